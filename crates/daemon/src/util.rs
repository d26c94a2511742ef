//! Small shared helpers: the wall clock as cosched time, atomic file writes, signals.

use std::path::Path;

use cosched_core::Time;

/// Now, as microseconds since the Unix epoch (the daemons' time base).
pub fn now() -> Time {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_micros(d.as_micros() as i64)
}

/// Writes a file so that a reader sees either the old or the whole new content.
pub fn write_atomic(path: &Path, content: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content)?;
    std::fs::rename(tmp, path)
}

/// Sends `sig` to the process group `pgid`; a group that is gone is not an error.
pub fn signal_group(pgid: i32, sig: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid addresses a process group; no memory is involved.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// Sends `sig` to one process.
pub fn signal_pid(pid: i32, sig: i32) -> bool {
    // SAFETY: plain kill(2).
    pid > 0 && unsafe { libc::kill(pid, sig) } == 0
}

/// Whether a process with this pid exists (and is not a zombie we could still reap).
pub fn pid_alive(pid: i32) -> bool {
    signal_pid(pid, 0)
}

/// Lets a daemon preempt the jobs it manages, so a context switch or a heartbeat is not late
/// by a whole scheduler period on a busy node: real-time FIFO priority 1 when allowed (root),
/// else nice −10, else nothing. Children do not inherit either (`SCHED_RESET_ON_FORK`; ranks
/// are also reset explicitly). Returns what it got, for the log.
pub fn raise_priority() -> &'static str {
    // SAFETY: plain system calls on this process with a valid sched_param.
    unsafe {
        let param = libc::sched_param { sched_priority: 1 };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) == 0 {
            return "real-time FIFO priority 1";
        }
        if libc::setpriority(libc::PRIO_PROCESS, 0, -10) == 0 {
            return "nice -10";
        }
    }
    "normal priority (no permission to raise it)"
}

/// The daemons' log: `tracing` events with a UTC timestamp and a level, one a line, on
/// standard error (which `cluster up` sends to `logs/mm.log` and `logs/nm-NAME.log`).
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
}
