//! Resource bounds and containment: memory before
//! authentication, the SIGTERM grace before SIGKILL, and `cluster down` launching
//! nothing. Real daemons on loopback, each test in its own state directory, torn
//! down on drop. Every wait polls for a condition with a generous deadline: the machine is
//! small and shared.

mod support;
use support::cluster::Cluster;
use support::*;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Resident memory of a process, in bytes (VmRSS of /proc/PID/status).
fn rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb * 1024
}

/// Opens `n` connections to `addr`, each announcing a frame of `announce` bytes and then
/// sending `send` bytes of it (never the whole frame), as someone without the key would.
/// Returns the open connections once every writer has sent all it could (a writer the
/// daemon stops reading from gives up after 3 s).
fn flood(addr: &str, n: usize, announce: u32, send: usize) -> Vec<TcpStream> {
    let writers: Vec<_> = (0..n)
        .map(|_| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).ok()?;
                s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
                s.write_all(&announce.to_be_bytes()).ok()?;
                let chunk = vec![0x5a; 64 << 10];
                let mut left = send;
                while left > 0 {
                    let k = left.min(chunk.len());
                    if s.write_all(&chunk[..k]).is_err() {
                        break;
                    }
                    left -= k;
                }
                Some(s)
            })
        })
        .collect();
    writers
        .into_iter()
        .filter_map(|w| w.join().unwrap())
        .collect()
}

/// The most memory `pid` holds over about a second.
fn peak_rss(pid: i32) -> u64 {
    (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(200));
            rss(pid)
        })
        .max()
        .unwrap()
}

const MB: u64 = 1 << 20;

/// A peer without the key could make a daemon allocate a 16 MiB frame per
/// connection (60 connections took 990 MB). Now the first frame of a connection is refused
/// from its length when it exceeds 2 MiB, and at most 16 connections at a time may hold a
/// first frame being read, so each listener's daemon stays within a few tens of MB — and
/// still answers its clients.
#[test]
fn unauthenticated_peers_cannot_make_the_daemons_hold_memory() {
    let c = Cluster::up("bounds", "memory", &["--nodes", "1", "--pes", "1"]);
    let status: Value = serde_json::from_str(&c.ok(&["status", "--json"])).unwrap();
    let nm_addr = status["nodes"][0]["addr"].as_str().unwrap().to_string();
    let targets = [
        (
            "mm",
            c.pid(c.state.mm_pid_file()).parse().unwrap(),
            c.state.addr().unwrap(),
        ),
        (
            "nm",
            c.pid(c.state.nm_pid_file("n0")).parse().unwrap(),
            nm_addr,
        ),
    ];
    for (who, pid, addr) in targets {
        let before = rss(pid);
        // 60 peers announcing 16 MiB frames and sending them (all but the last byte).
        let held = flood(&addr, 60, 16 << 20, (16 << 20) - 1);
        let big = peak_rss(pid).saturating_sub(before);
        drop(held);
        // 60 peers announcing frames of just under the first-frame limit, sent but for a
        // byte: at most 16 of them are read at a time.
        let held = flood(&addr, 60, (2 << 20) - 8, (2 << 20) - 9);
        let near = peak_rss(pid).saturating_sub(before);
        drop(held);
        eprintln!(
            "{who}: resident memory grew by {} MB (16-MiB frames), {} MB (2-MiB frames)",
            big / MB,
            near / MB
        );
        assert!(
            big < 50 * MB,
            "{who} grew by {} MB under 60 announced 16-MiB frames",
            big / MB
        );
        assert!(
            near < 80 * MB,
            "{who} grew by {} MB under 60 announced 2-MiB frames",
            near / MB
        );
        // Still serving: the cluster answers and runs a job.
        let id = c.submit(&["-n", "1", "--", "true"]);
        c.ok(&["wait", &id.to_string(), "--timeout", "30s"]);
    }
    assert!(
        c.mm_log().contains("outside 32..="),
        "the refused frames are logged:\n{}",
        c.mm_log()
    );
}

/// Waits for a pid file a rank writes, and reads it.
fn pid_in(file: &Path) -> i32 {
    until(30, &format!("{} written", file.display()), || {
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    })
}

/// A cancel was SIGKILL at once. Now a killed job's process groups get SIGTERM,
/// then SIGKILL `--kill-wait` later: a rank that traps SIGTERM cleans up and exits on its
/// own, one that ignores it is killed after the grace, not before.
#[test]
fn cancel_sends_sigterm_then_sigkill_after_the_kill_wait() {
    let c = Cluster::up(
        "bounds",
        "killwait",
        &["--nodes", "1", "--pes", "2", "--kill-wait", "3s"],
    );
    let m = c.dir.join("marks");
    std::fs::create_dir_all(&m).unwrap();
    let m = m.display();
    let traps = c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!(
            "trap 'echo cleaned > {m}/term; exit 0' TERM; echo $$ > {m}/t.pid; while :; do sleep 0.1; done"
        ),
    ]);
    let ignores = c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!("trap '' TERM; echo $$ > {m}/i.pid; while :; do sleep 0.1; done"),
    ]);
    let t = pid_in(Path::new(&format!("{m}/t.pid")));
    let i = pid_in(Path::new(&format!("{m}/i.pid")));

    c.ok(&["cancel", &traps.to_string()]);
    let cleaned = until(20, "the trapping rank's clean-up", || {
        std::fs::read_to_string(format!("{m}/term")).ok()
    });
    assert_eq!(cleaned.trim(), "cleaned");
    until(20, "the trapping rank gone", || (!alive(t)).then_some(()));

    let asked = Instant::now();
    c.ok(&["cancel", &ignores.to_string()]);
    // Not before the grace: the kill's order and timing are the node manager core's tests
    // (`a_killed_jobs_groups_get_sigterm_and_sigcont_then_sigkill_after_the_grace`); here the
    // signals reach real processes.
    until(30, "the rank ignoring SIGTERM killed", || {
        (!alive(i)).then_some(())
    });
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_millis(2900),
        "killed {took:?} after the cancel, before the 3-s grace"
    );
    for id in [traps, ignores] {
        assert_eq!(c.state_of(id).as_deref(), Some("cancelled"));
    }
}

/// Background children of a rank that exited outlived their job. Now the job's
/// process groups are terminated when the job ends, so they go with it.
#[test]
fn background_children_of_an_exited_rank_end_with_the_job() {
    let c = Cluster::up(
        "bounds",
        "background",
        &["--nodes", "1", "--pes", "1", "--kill-wait", "1s"],
    );
    let pidfile = c.dir.join("bg.pid");
    let id = c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!("sleep 300 & echo $! > {}; exit 0", pidfile.display()),
    ]);
    c.ok(&["wait", &id.to_string(), "--timeout", "30s"]);
    let bg = pid_in(&pidfile);
    until(20, "the background child killed with its job", || {
        (!alive(bg)).then_some(())
    });
}

/// `cluster down` could start queued jobs on its way out. Jobs queued behind a
/// long one when the cluster goes down never run (they would leave a marker) and end
/// `cancelled`, as the next `cluster up` in the same directory shows.
#[test]
fn cluster_down_launches_nothing() {
    let args = ["--nodes", "1", "--pes", "1", "--kill-wait", "1s"];
    let c = Cluster::up("bounds", "down", &args);
    let m = c.dir.join("marks");
    std::fs::create_dir_all(&m).unwrap();
    let long = c.submit(&["-n", "1", "--", "sleep", "60"]);
    until(30, "the long job running", || {
        (c.state_of(long).as_deref() == Some("running")).then_some(())
    });
    let queued: Vec<u64> = (0..3)
        .map(|_| {
            c.submit(&[
                "-n",
                "1",
                "--",
                "sh",
                "-c",
                &format!("touch {}/ran.$COSCHED_JOB_ID", m.display()),
            ])
        })
        .collect();
    for &q in &queued {
        assert_eq!(c.state_of(q).as_deref(), Some("queued"));
    }
    c.ok(&["cluster", "down"]);
    std::thread::sleep(Duration::from_millis(500));
    c.up_again(&args);
    let ran: Vec<_> = std::fs::read_dir(&m).unwrap().flatten().collect();
    assert!(
        ran.is_empty(),
        "queued jobs ran during cluster down: {ran:?}"
    );
    for id in queued.iter().copied().chain([long]) {
        let j = c.job(id);
        assert_eq!(j["state"], "cancelled", "{j}");
        assert_eq!(j["error"], "the cluster was shut down", "{j}");
    }
}

/// CPU time (user + system) process `pid` has used, in seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    // After the command name: state is field 3, utime 14 and stime 15.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no memory effects.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Sets the open-file limit of process `pid` (soft; the hard one is kept); returns the old.
fn set_nofile(pid: i32, soft: u64) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads and writes the two rlimit structs given.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(r, 0, "prlimit(get) on the machine manager");
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit(set) on the machine manager");
    old
}

/// Out of file descriptors, the machine manager's accept loop called `accept`
/// again at once, failing for ever at real-time priority. Now it backs off (and says so),
/// and serves again once descriptors free up.
#[test]
fn out_of_file_descriptors_the_accept_loop_backs_off() {
    let c = Cluster::up("bounds", "emfile", &["--nodes", "1", "--pes", "1"]);
    let pid: i32 = c.pid(c.state.mm_pid_file()).parse().unwrap();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    // Room for two more connections; the third accept fails with EMFILE.
    let old = set_nofile(pid, open + 2);
    let addr = c.state.addr().unwrap();
    let silent: Vec<TcpStream> = (0..20)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(pid) - before;
    eprintln!("mm used {used:.2} s of CPU in 2 s while out of file descriptors");
    // SAFETY: restores the limit read above.
    unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
    drop(silent);
    assert!(
        used < 0.5,
        "the machine manager spun: {used:.2} s of CPU in 2 s out of file descriptors"
    );
    assert!(
        c.mm_log().contains("cannot accept a connection"),
        "the failure is logged:\n{}",
        c.mm_log()
    );
    let id = c.submit(&["-n", "1", "--", "true"]);
    c.ok(&["wait", &id.to_string(), "--timeout", "30s"]);
}
