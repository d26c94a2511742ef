//! Small shared helpers: the wall clock as cosched time, private atomic file writes, signals,
//! process start times (to tell a daemon from a process that reused its pid), users.

use std::path::Path;

use rustix::process::{Pid, Signal};

use cosched_core::Time;

/// Now, as microseconds since the Unix epoch (the daemons' time base).
pub fn now() -> Time {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_micros(d.as_micros() as i64)
}

/// Writes a file so that a reader sees either the old or the whole new content; the file is
/// new, mode 0600, never written through a planted file or link (see
/// [`cosched_storm::frame::write_private`]).
pub fn write_atomic(path: &Path, content: &str) -> std::io::Result<()> {
    cosched_storm::frame::write_private(path, content.as_bytes())
}

/// When process `pid` started (field 22 of `/proc/PID/stat`, clock ticks since boot): with
/// the pid it names one process for good, since a pid is reused only by a later process.
pub fn process_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3, so field 22 is its 20th.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A random number from the kernel (a request's nonce).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let filled = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    if filled != Ok(8) {
        // Never expected; the clock still makes a duplicate improbable.
        return now().as_micros() as u64 ^ ((std::process::id() as u64) << 40);
    }
    u64::from_ne_bytes(b)
}

/// This process's effective user id.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The host's memory in bytes (`MemTotal` of /proc/meminfo); `u64::MAX` when it cannot be
/// read, which bounds nothing.
pub fn mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        })
        .unwrap_or(u64::MAX)
}

/// This process's effective group id.
pub fn egid() -> u32 {
    rustix::process::getegid().as_raw()
}

/// A user's account: name, primary group, home.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub gid: u32,
}

/// The account of `uid` in the password database, if it has one.
pub fn account(uid: u32) -> Option<Account> {
    crate::sys::account(uid)
}

/// The name of group `gid` in the group database, if it has one.
pub fn group_name(gid: u32) -> Option<String> {
    crate::sys::group_name(gid)
}

/// The uid of the account named `name` in the password database, if there is one.
pub fn uid_of_name(name: &str) -> Option<u32> {
    crate::sys::uid_of_name(&std::ffi::CString::new(name).ok()?)
}

/// A user's name for messages: the account name, else `uid N`.
pub fn user_name(uid: u32) -> String {
    account(uid).map_or_else(|| format!("uid {uid}"), |a| a.name)
}

/// The groups a process of `uid` running with group `gid` gets: those of its login
/// (`initgroups` with its account's primary group, which its session keeps after a `newgrp`),
/// and `gid`; only `gid` when it has no account. The primary group is among them because the
/// node manager lets it into the user's broadcast directory (crate::bcast).
pub fn groups_of(uid: u32, gid: u32) -> Vec<u32> {
    let Some(acc) = account(uid) else {
        return vec![gid];
    };
    let primary = acc.gid;
    let Ok(name) = std::ffi::CString::new(acc.name) else {
        return vec![gid];
    };
    let Some(mut groups) = crate::sys::group_list(&name, primary) else {
        return vec![gid];
    };
    if !groups.contains(&gid) {
        groups.push(gid);
    }
    groups
}

/// A path to connect or bind the Unix socket `path` by: itself when short enough for
/// `sockaddr_un` (108 bytes), else the same file through `/proc/self/fd/N/` of its directory,
/// opened `O_PATH` (returned: keep it open until the connect or bind is done).
pub fn socket_path(path: &Path) -> std::io::Result<(Option<std::fs::File>, std::path::PathBuf)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if path.as_os_str().len() < 100 {
        return Ok((None, path.to_path_buf()));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok((None, path.to_path_buf()));
    };
    let d = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)?;
    let short = std::path::PathBuf::from(format!("/proc/self/fd/{}", d.as_raw_fd())).join(name);
    Ok((Some(d), short))
}

/// Sends `sig` (a named signal: a real-time one is not sent) to the process group `pgid`; a
/// group that is gone is not an error.
pub fn signal_group(pgid: i32, sig: i32) {
    if let (Some(pgid), Some(sig)) = (positive_pid(pgid), Signal::from_named_raw(sig)) {
        let _ = rustix::process::kill_process_group(pgid, sig);
    }
}

/// Sends `sig` to one process (0: only asks whether it may be signalled, as kill(2) does).
pub fn signal_pid(pid: i32, sig: i32) -> bool {
    let Some(pid) = positive_pid(pid) else {
        return false;
    };
    if sig == 0 {
        return rustix::process::test_kill_process(pid).is_ok();
    }
    Signal::from_named_raw(sig).is_some_and(|sig| rustix::process::kill_process(pid, sig).is_ok())
}

/// `raw` as a process (group) id: none for 0 or a negative number, which kill(2) would take
/// for "my group" or "every process".
fn positive_pid(raw: i32) -> Option<Pid> {
    if raw > 0 { Pid::from_raw(raw) } else { None }
}

/// Whether a process with this pid runs: it exists and is not a zombie (a daemon killed
/// and not yet reaped by whoever its parent is now runs no more).
pub fn pid_alive(pid: i32) -> bool {
    signal_pid(pid, 0) && !is_zombie(pid)
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Lets a daemon preempt the jobs it manages, so a context switch or a heartbeat is not late
/// by a whole scheduler period on a busy node: real-time FIFO priority 1 when allowed (root),
/// else nice −10, else nothing. Children do not inherit either (`SCHED_RESET_ON_FORK`; ranks
/// are also reset explicitly). Returns what it got, for the log.
pub fn raise_priority() -> &'static str {
    if crate::sys::realtime_fifo_1() {
        return "real-time FIFO priority 1";
    }
    if rustix::process::setpriority_process(None, -10).is_ok() {
        return "nice -10";
    }
    "normal priority (no permission to raise it)"
}

/// The CPUs a thread may run on: this one's when `pid` is `None`, else that thread's (a
/// process's main thread has the process's id); CPU 0 alone when the kernel does not say.
pub fn allowed_cpus(pid: Option<i32>) -> Vec<usize> {
    let set = match pid {
        Some(p) => Pid::from_raw(p).map(|p| rustix::thread::sched_getaffinity(Some(p))),
        None => Some(rustix::thread::sched_getaffinity(None)),
    };
    let cpus: Vec<usize> = match set {
        Some(Ok(set)) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        _ => Vec::new(),
    };
    if cpus.is_empty() { vec![0] } else { cpus }
}

/// Pins every thread of process `pid` (this process when `None`) to `cpus`. A CPU mask belongs
/// to a thread, not to its process, so each thread listed in `/proc/PID/task` is pinned;
/// threads created later inherit their creator's mask, and children their parent's. Returns
/// the first error (no such process, a CPU the kernel refuses); the threads pinned before it
/// stay pinned.
pub fn pin_process(pid: Option<i32>, cpus: &[usize]) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for &cpu in cpus
        .iter()
        .filter(|&&c| c < rustix::thread::CpuSet::MAX_CPU)
    {
        set.set(cpu);
    }
    let tasks = match pid {
        Some(p) => format!("/proc/{p}/task"),
        None => "/proc/self/task".into(),
    };
    for entry in std::fs::read_dir(tasks)? {
        let Some(tid) = entry?
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
            .and_then(Pid::from_raw)
        else {
            continue;
        };
        match rustix::thread::sched_setaffinity(Some(tid), &set) {
            // A thread that ended since the listing.
            Err(rustix::io::Errno::SRCH) => {}
            r => r?,
        }
    }
    Ok(())
}

/// Lets this thread's sleeps end when asked rather than up to 50 µs later (the kernel's
/// default timer slack for a thread of normal priority, which merges wake-ups to save power;
/// a real-time thread has none): a freeze watched every 15 µs would be looked at every 65.
pub fn precise_timers() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

/// The daemons' log: `tracing` events with a UTC timestamp and a level, one a line, on
/// standard error (which `cluster up` sends to `logs/mm.log` and `logs/nm-NAME.log`).
///
/// The log lives on the state directory's disk, which may fill up or turn read-only; a line
/// that cannot be written is counted and dropped ([`LogWriter`]), never raised: tracing's
/// own report of a failed write goes to the same standard error through `eprintln!`, which
/// panics, so a full disk would take the daemon down with its log.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(|| LogWriter)
        .log_internal_errors(false)
        .with_ansi(false)
        .with_target(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
}

/// Log lines dropped since the last one written (see [`LogWriter`]).
static LOST_LOG_LINES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Standard error for the log: a line that cannot be written (ENOSPC, EROFS, EIO) is
/// dropped and counted, and the first line written after says how many were lost.
pub struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering;
        let mut err = std::io::stderr().lock();
        let lost = LOST_LOG_LINES.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let note = format!(
                "cosched: {lost} log lines were lost (the log's disk was full or not writable)\n"
            );
            if err.write_all(note.as_bytes()).is_err() {
                LOST_LOG_LINES.fetch_add(lost, Ordering::Relaxed);
            }
        }
        if err.write_all(line).is_err() {
            LOST_LOG_LINES.fetch_add(1, Ordering::Relaxed);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// A moment in µs since the epoch as UTC, e.g. `2026-11-27T19:05:00Z`.
pub fn utc_us(us: i64) -> String {
    format!(
        "{}Z",
        cosched_slurm::time::timestamp(Some(us.div_euclid(1_000_000)), |_| 0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    #[test]
    fn a_signal_reaches_its_process_and_its_group() {
        let mut one = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = one.id() as i32;
        assert!(pid_alive(pid));
        assert!(signal_pid(pid, libc::SIGKILL));
        assert_eq!(one.wait().unwrap().signal(), Some(libc::SIGKILL));

        let mut group = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        signal_group(group.id() as i32, libc::SIGTERM);
        assert_eq!(group.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    /// Every thread of the process is pinned, including one started before the call, and
    /// a thread the process starts afterwards inherits the mask.
    #[test]
    fn a_pinned_process_runs_where_it_is_pinned() {
        let host = allowed_cpus(None);
        let last = *host.last().unwrap();
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import threading,time,os,sys\n\
                 t=threading.Thread(target=time.sleep,args=(30,));t.start()\n\
                 sys.stdin.readline()\n\
                 u=threading.Thread(target=time.sleep,args=(30,));u.start()\n\
                 print(' '.join(str(x) for x in sorted(os.sched_getaffinity(u.native_id))),flush=True)\n\
                 os._exit(0)",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Both Python threads exist once /proc lists at least two.
        while std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .count()
            < 2
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        pin_process(Some(pid), &[last]).unwrap();
        for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
            let tid: i32 = t.unwrap().file_name().to_str().unwrap().parse().unwrap();
            assert_eq!(allowed_cpus(Some(tid)), [last], "thread {tid}");
        }
        use std::io::{BufRead, Write};
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), last.to_string(), "a thread started later");
        child.wait().unwrap();
        assert!(pin_process(Some(pid), &[last]).is_err(), "an ended process");
    }

    #[test]
    fn no_pid_or_a_negative_one_signals_nobody() {
        // kill(2) would take 0 for this process's group and -1 for every process it may
        // signal: neither may be reached through a pid that is missing or corrupt.
        assert!(!signal_pid(0, 0));
        assert!(!signal_pid(-1, 0));
        assert!(!pid_alive(0));
        signal_group(0, libc::SIGCONT);
        signal_group(-1, libc::SIGCONT);
        assert!(signal_pid(std::process::id() as i32, 0));
    }

    #[test]
    fn ids_and_random_numbers_come_from_the_kernel() {
        assert_eq!(euid(), std::fs::metadata("/proc/self").unwrap().uid());
        assert_ne!(random_u64(), random_u64());
    }

    #[test]
    fn accounts_and_groups_come_from_the_password_and_group_databases() {
        let root = account(0).expect("every system has uid 0 in its password database");
        assert_eq!(root.name, "root");
        let groups = groups_of(0, 12345);
        assert!(groups.contains(&root.gid), "{groups:?}");
        assert!(groups.contains(&12345), "{groups:?}");
        // A uid without an account gets only the group it runs with.
        assert_eq!(groups_of(3_999_999_999, 7), vec![7]);
        assert_eq!(uid_of_name("root"), Some(0));
        assert_eq!(uid_of_name("no such user, surely"), None);
        assert_eq!(group_name(root.gid).as_deref(), Some("root"));
    }
}
