//! Regression tests, each named after the finding it guards: nothing acknowledged is lost when
//! the state directory's disk is full or read-only, and no daemon dies of a log it cannot write;
//! peers without the key cannot starve those with it; a frame captured before a machine
//! manager restart is refused after it, and a requeued job gets a cgroup of its own on a
//! restarted node manager. Real daemons on loopback; the disk tests mount a size-limited
//! tmpfs (and an ext4 image that the kernel turns read-only) and need root: without it they
//! print a NOTICE and pass. Every wait polls with a generous deadline: the machine is small
//! and shared.

mod support;
use support::cluster::{Cluster, signal};
use support::*;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A file system mounted for one test, unmounted (lazily, so a straggler cannot keep it) and
/// its mount point removed on drop. Declare it before the cluster that runs on it.
struct Mounted {
    at: PathBuf,
    /// A loop device's image file, removed after the unmount.
    image: Option<PathBuf>,
}

impl Mounted {
    /// A tmpfs of `size` (as mount's `size=`) at `at`, mode 0700.
    fn tmpfs(at: &Path, size: &str) -> Option<Mounted> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mounted {
            at: at.to_path_buf(),
            image: None,
        })
    }

    /// An ext4 file system of `mb` MB in an image file, loop-mounted at `at` with
    /// `errors=remount-ro`: [`Mounted::fail`] makes the kernel turn it read-only under the
    /// daemons' open files, as it does on a disk error.
    fn ext4(at: &Path, mb: u32) -> Option<Mounted> {
        std::fs::create_dir_all(at).unwrap();
        let image = at.with_extension("img");
        let run = |cmd: &mut Command| cmd.output().is_ok_and(|o| o.status.success());
        let made = std::fs::File::create(&image)
            .and_then(|f| f.set_len(u64::from(mb) << 20))
            .is_ok()
            && run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))
            && run(Command::new("mount")
                .args(["-o", "loop,errors=remount-ro"])
                .arg(&image)
                .arg(at));
        if !made {
            let _ = std::fs::remove_file(&image);
            return None;
        }
        let _ = std::fs::set_permissions(at, std::os::unix::fs::PermissionsExt::from_mode(0o700));
        Some(Mounted {
            at: at.to_path_buf(),
            image: Some(image),
        })
    }

    /// Reports an error on the ext4 file system (its `trigger_fs_error` knob): with
    /// `errors=remount-ro`, the kernel makes it read-only at once.
    fn fail(&self) -> bool {
        let out = Command::new("findmnt")
            .args(["-n", "-o", "SOURCE"])
            .arg(&self.at)
            .output()
            .unwrap();
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let name = Path::new(&dev).file_name().unwrap_or_default().to_owned();
        let knob = Path::new("/sys/fs/ext4")
            .join(name)
            .join("trigger_fs_error");
        std::fs::write(knob, "cosched test: a disk error\n").is_ok()
    }

    /// Fills the file system with a file of zeros until it is full; returns the file.
    fn fill(&self) -> PathBuf {
        let f = self.at.join("filler");
        let mut w = std::fs::File::create(&f).unwrap();
        let block = vec![0u8; 64 << 10];
        while w.write_all(&block).is_ok() {}
        let _ = w.sync_all();
        f
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        let _ = std::fs::remove_dir(&self.at);
        if let Some(i) = &self.image {
            let _ = std::fs::remove_file(i);
        }
    }
}

/// Whether the daemon whose pid file is `file` runs.
fn alive(file: PathBuf) -> bool {
    alive_pid(&pid_in_file(&file))
}

/// Whether process `pid` exists and is not a zombie.
fn alive_pid(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Job ids and states as `acct --json` lists them.
fn jobs(c: &Cluster) -> Vec<(u64, String)> {
    let v: Value = serde_json::from_str(&c.ok(&["acct", "--json"])).unwrap();
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_u64().unwrap(),
                j["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A job's communication ring made on a full disk is an error the node manager reports (the
/// job runs unmonitored), not a SIGBUS when its pages are first written, which would kill a
/// node manager launching a job placed just before the disk filled.
#[test]
fn a_monitor_ring_on_a_full_disk_is_refused_not_a_crash() {
    let test = "a_monitor_ring_on_a_full_disk_is_refused_not_a_crash";
    if !is_root() {
        notice(&format!(
            "{test}: not run as root, so no tmpfs can be mounted; the full disk was NOT tried"
        ));
        return;
    }
    let scratch = scratch_dir("durable", "ring");
    let Some(disk) = Mounted::tmpfs(&scratch.path().join("disk"), "1m") else {
        notice(&format!("{test}: cannot mount a tmpfs here; NOT tried"));
        return;
    };
    let _filler = disk.fill();
    let ranks: Vec<u32> = (0..8).collect();
    let made = cosched_monitor::Ring::create(&disk.at.join("job.ring"), 7, "n0", &ranks, 1024, 0);
    let e = made.err().expect("a ring was made on a full disk");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
}

/// With the state directory's disk full, a submission, a cancel and a suspend are
/// refused with an error naming the directory and saying to free space, and nothing of them
/// happens; the daemons stay up (their logs cannot be written either) and serve reads; a job
/// that ends meanwhile is recorded once space returns; then changes are taken again, without
/// a restart; after a restart every acknowledged job is there and no id is given twice.
#[test]
fn a_full_disk_refuses_changes_by_name_and_loses_no_acknowledged_job() {
    let test = "a_full_disk_refuses_changes_by_name_and_loses_no_acknowledged_job";
    if !is_root() {
        notice(&format!(
            "{test}: not run as root, so no tmpfs can be mounted; the full disk was NOT tried"
        ));
        return;
    }
    let scratch = scratch_dir("durable", "full");
    let Some(disk) = Mounted::tmpfs(&scratch.path().join("disk"), "24m") else {
        notice(&format!("{test}: cannot mount a tmpfs here; NOT tried"));
        return;
    };
    let c = Cluster::up_in(
        disk.at.join("s"),
        &["--nodes", "1", "--pes", "4", "--heartbeat", "400ms"],
    );
    let mm = c.pid(c.state.mm_pid_file());
    let long = c.submit(&["-n", "1", "--", "sleep", "600"]);
    let ending = c.submit(&["-n", "1", "--", "sleep", "3"]);
    c.until(30, "both running", || {
        let j = jobs(&c);
        j.iter().all(|(_, s)| s == "running").then_some(())
    });
    let acknowledged = vec![long, ending];

    let filler = disk.fill();
    let dir = c.dir.display().to_string();
    for _ in 0..5 {
        let out = c.run(&["submit", "-n", "1", "--", "true"]);
        let e = stderr(&out);
        assert!(!out.status.success(), "a submission was answered: {e}");
        assert!(
            e.contains("not submitted") && e.contains(&dir) && e.contains("free space"),
            "{e}"
        );
    }
    for (args, what) in [
        (["cancel", &long.to_string()], "not cancelled"),
        (["suspend", &long.to_string()], "not suspended"),
    ] {
        let out = c.run(&args);
        assert!(
            !out.status.success() && stderr(&out).contains(what),
            "{}",
            stderr(&out)
        );
    }
    // Garbage on the machine manager's port makes it log, into the full disk.
    for _ in 0..3 {
        let mut s = std::net::TcpStream::connect(c.state.addr().unwrap()).unwrap();
        let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
    }
    // Reads go on; the job ending meanwhile ends in memory.
    let start = Instant::now();
    while !jobs(&c).contains(&(ending, "completed".to_string())) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "job {ending} not completed in 30 s: {:?} (node manager alive: {})\n--- mm log ---\n{}\n--- nm log ---\n{}",
            jobs(&c),
            alive(c.state.nm_pid_file("n0")),
            c.mm_log(),
            std::fs::read_to_string(c.state.nm_log("n0")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let j = jobs(&c);
    assert_eq!(
        j.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        acknowledged,
        "no refused job exists"
    );
    assert_eq!(
        j[0].1, "running",
        "the refused cancel and suspend did nothing"
    );
    c.ok(&["status"]);
    assert!(
        alive(c.state.mm_pid_file()) && alive(c.state.nm_pid_file("n0")),
        "a daemon died of the full disk"
    );

    // Space returns: changes are taken again, by the same machine manager.
    std::fs::remove_file(&filler).unwrap();
    let after = c.submit(&["-n", "1", "--", "true"]);
    assert_eq!(
        after,
        ending + 1,
        "the next id follows the last acknowledged one"
    );
    c.ok(&["cancel", &long.to_string()]);
    c.ended(after, 30);
    // Give the kept record of the job that ended during the full disk its retry.
    std::thread::sleep(Duration::from_millis(800));

    // A restart finds every acknowledged job as it ended, and gives no id twice.
    let addr = c.state.addr().unwrap();
    signal(&mm, "KILL");
    c.reap();
    c.restart_mm(&addr);
    let j = c.until(30, "the restarted machine manager's answer", || {
        let out = c.run(&["acct", "--json"]);
        out.status.success().then(|| jobs(&c))
    });
    assert_eq!(
        j,
        vec![
            (long, "cancelled".to_string()),
            (ending, "completed".to_string()),
            (after, "completed".to_string())
        ],
        "{}",
        c.mm_log()
    );
    let next = c.submit(&["-n", "1", "--", "true"]);
    assert_eq!(next, after + 1);
}

/// A state directory whose file system the kernel turns read-only (a disk error,
/// `errors=remount-ro`) refuses changes with its path and "read-only file system", keeps
/// serving reads, and a cluster brought up on it is refused with the same words.
#[test]
fn a_read_only_state_directory_is_named_and_reads_go_on() {
    let test = "a_read_only_state_directory_is_named_and_reads_go_on";
    if !is_root() {
        notice(&format!(
            "{test}: not run as root, so no file system can be mounted; NOT tried"
        ));
        return;
    }
    let scratch = scratch_dir("durable", "ro");
    let Some(disk) = Mounted::ext4(&scratch.path().join("disk"), 32) else {
        notice(&format!(
            "{test}: cannot loop-mount an ext4 image here (no loop device or mkfs.ext4); NOT tried"
        ));
        return;
    };
    let state = disk.at.join("s");
    let c = Cluster::up_in(
        state.clone(),
        &["--nodes", "1", "--pes", "2", "--heartbeat", "400ms"],
    );
    let job = c.submit(&["-n", "1", "--", "sleep", "600"]);
    c.until(30, "the job running", || {
        (c.state_of(job).as_deref() == Some("running")).then_some(())
    });
    if !disk.fail() {
        notice(&format!(
            "{test}: this kernel has no ext4 trigger_fs_error; the read-only case was NOT tried"
        ));
        return;
    }
    let dir = state.display().to_string();
    let out = c.run(&["submit", "-n", "1", "--", "true"]);
    let e = stderr(&out);
    assert!(!out.status.success(), "a submission was answered: {e}");
    assert!(
        e.contains("not submitted") && e.contains(&dir) && e.contains("read-only file system"),
        "{e}"
    );
    assert_eq!(jobs(&c), vec![(job, "running".to_string())]);
    assert!(alive(c.state.mm_pid_file()));
    let mm = pid_in_file(&c.state.mm_pid_file());
    drop(c);
    // `cluster down` could not remove the pid files here: the machine manager's must be gone.
    until(30, "the machine manager's end", || {
        (!alive_pid(&mm)).then_some(())
    });

    // Starting on it: refused with the directory named.
    let out = cosched(&state, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
    let e = stderr(&out);
    assert!(!out.status.success());
    assert!(
        e.contains(&dir) && e.contains("read-only file system"),
        "{e}"
    );
}

/// A daemon whose log cannot be written (its standard error is `/dev/full`, as a
/// log on a full disk) runs on: the machine manager and a node manager run a job and drop
/// garbage peers, each of which they log.
#[test]
fn daemons_whose_log_cannot_be_written_keep_running() {
    let scratch = scratch_dir("durable", "devfull");
    let dir = scratch.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let key = dir.join("key");
    let mut daemons = Daemons(Vec::new());
    daemons.0.push(
        Command::new(bin())
            .args([
                "mm",
                "--listen",
                "127.0.0.1:0",
                "--nodes",
                "1",
                "--pes",
                "1",
            ])
            .arg("--state-dir")
            .arg(&dir)
            .arg("--key-file")
            .arg(&key)
            .env("COSCHED_STATE_DIR", &dir)
            .stdin(Stdio::null())
            .stdout(full())
            .stderr(full())
            .spawn()
            .unwrap(),
    );
    let addr = until(30, "mm.addr", || {
        std::fs::read_to_string(dir.join("mm.addr")).ok()
    });
    let addr = addr.trim().to_string();
    daemons.0.push(
        Command::new(bin())
            .args(["nm", "--mm", &addr, "--name", "n0", "--pes", "1"])
            .arg("--workdir")
            .arg(dir.join("nm-n0"))
            .arg("--key-file")
            .arg(&key)
            .env("COSCHED_STATE_DIR", &dir)
            .stdin(Stdio::null())
            .stdout(full())
            .stderr(full())
            .spawn()
            .unwrap(),
    );
    let run = |args: &[&str]| cosched(&dir, args);
    let id = until(30, "a submission", || {
        let out = run(&["submit", "-n", "1", "--", "true"]);
        out.status
            .success()
            .then(|| job_id(&String::from_utf8_lossy(&out.stdout)))
    });
    let out = run(&["wait", &id.to_string(), "--timeout", "30s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for _ in 0..5 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(&[0xff; 64]);
    }
    std::thread::sleep(Duration::from_millis(500));
    for d in &mut daemons.0 {
        assert!(
            d.try_wait().unwrap().is_none(),
            "a daemon exited: {:?}",
            d.try_wait()
        );
    }
    let out = run(&["cluster", "down"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Daemons a test started itself: killed and reaped on drop.
struct Daemons(Vec<std::process::Child>);

impl Drop for Daemons {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A peer without the key holding idle connections to the machine manager: `tcp` to its
/// address, `local` to its Unix socket, each reopened (every 100 ms) when the machine manager
/// closes it or restarts, until dropped.
struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flood {
    fn start(addr: String, sock: PathBuf, tcp: usize, local: usize) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut tcps: Vec<Option<std::net::TcpStream>> = (0..tcp).map(|_| None).collect();
            let mut unixes: Vec<Option<std::os::unix::net::UnixStream>> =
                (0..local).map(|_| None).collect();
            while !halt.load(Ordering::Relaxed) {
                for c in tcps.iter_mut() {
                    if c.as_mut().is_some_and(|s| !still_open(s)) {
                        *c = None;
                    }
                    if c.is_none() {
                        *c = std::net::TcpStream::connect(&addr).ok();
                        if let Some(s) = c {
                            s.set_nonblocking(true).unwrap();
                        }
                    }
                }
                for c in unixes.iter_mut() {
                    if c.as_mut().is_some_and(|s| !still_open(s)) {
                        *c = None;
                    }
                    if c.is_none() {
                        *c = std::os::unix::net::UnixStream::connect(&sock).ok();
                        if let Some(s) = c {
                            s.set_nonblocking(true).unwrap();
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Flood {
            stop,
            thread: Some(thread),
        }
    }
}

/// Whether a non-blocking connection is still open (no end of file, no error but "nothing
/// to read yet").
fn still_open(r: &mut impl Read) -> bool {
    let mut b = [0u8; 1];
    match r.read(&mut b) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// 150 idle TCP connections and 200 idle connections on `mm.sock`, kept open (reopened
/// whenever closed), delay a submission over either by well under a second; and when the machine manager restarts in the middle of them, both node managers
/// register again and their running jobs end completed, none `node_failed`.
#[test]
fn idle_peers_without_the_key_delay_no_submission_and_no_registration() {
    let c = Cluster::up(
        "durable",
        "flood",
        &["--nodes", "2", "--pes", "1", "--heartbeat", "400ms"],
    );
    let running: Vec<u64> = (0..2)
        .map(|_| c.submit(&["-n", "1", "--", "sleep", "12"]))
        .collect();
    for &id in &running {
        c.until(30, "jobs running", || {
            (c.state_of(id).as_deref() == Some("running")).then_some(())
        });
    }
    let addr = c.state.addr().unwrap();
    let flood = Flood::start(addr.clone(), c.state.sock_file(), 150, 200);
    std::thread::sleep(Duration::from_secs(1));
    let key = c.state.key_file().display().to_string();
    let mut took = Vec::new();
    for args in [
        vec!["submit", "-n", "1", "--", "true"],
        vec![
            "submit",
            "--mm",
            &addr,
            "--key-file",
            &key,
            "-n",
            "1",
            "--",
            "true",
        ],
    ] {
        let t = Instant::now();
        let out = c.run(&args);
        took.push(t.elapsed());
        assert!(
            out.status.success(),
            "{args:?} under the flood: {}",
            stderr(&out)
        );
    }
    notice(&format!(
        "finding_5: under 150 idle TCP and 200 idle mm.sock connections, a submission took {:?} (mm.sock) and {:?} (TCP)",
        took[0], took[1]
    ));
    for t in &took {
        assert!(*t < Duration::from_secs(5), "a submission took {t:?}");
    }

    // The machine manager restarts while the flood goes on: the nodes come back in time.
    let mm = c.pid(c.state.mm_pid_file());
    signal(&mm, "KILL");
    std::thread::sleep(Duration::from_millis(300));
    c.restart_mm(&addr);
    c.until(30, "both nodes back under the flood", || {
        (c.nodes_up() == 2).then_some(())
    });
    for id in running {
        let j = c.ended(id, 60);
        assert_eq!(j["state"], "completed", "{j}\n{}", c.mm_log());
    }
    drop(flood);
}

/// A submission's frame, sent once and captured, then sent again after the
/// machine manager restarted, is refused: no second job.
#[test]
fn a_frame_captured_before_a_restart_is_refused_after_it() {
    use cosched_proto::proto::{Hello, Request, Response, Stamp, SubmitRequest};
    use cosched_storm::Key;
    use cosched_storm::frame::read_blocking;

    let c = Cluster::up("durable", "replay", &["--nodes", "1", "--pes", "1"]);
    let addr = c.state.addr().unwrap();
    let key = Key::load(&c.state.key_file()).unwrap();
    let submit = Request::Submit(Box::new(SubmitRequest {
        mem: None,
        procs: 1,
        time_limit_us: None,
        class: None,
        name: Some("captured".into()),
        cmd: vec!["true".into()],
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched: Default::default(),
        layout: None,
        hold: false,
    }));
    // The frame as it travelled: what someone on the network could record.
    let frame = key.seal(&Hello::Client(Stamp::now(), submit));
    let send = |frame: &[u8]| -> Option<Response> {
        let mut s = std::net::TcpStream::connect(c.state.addr().ok()?).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(frame).ok()?;
        read_blocking(&mut s, &key).ok()
    };
    let first = match send(&frame) {
        Some(Response::Submitted(id)) => id.0,
        other => panic!("the first sending: {other:?}"),
    };
    c.ended(first, 30);

    let mm = c.pid(c.state.mm_pid_file());
    signal(&mm, "KILL");
    c.reap();
    c.restart_mm(&addr);
    let answer = until(30, "the restarted machine manager's answer", || {
        send(&frame)
    });
    assert!(
        matches!(&answer, Response::Error(e) if e.contains("replayed")),
        "{answer:?}"
    );
    let ids: Vec<u64> = jobs(&c).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, vec![first], "the replay made a job\n{}", c.mm_log());
}

/// The cgroup a rank of job `id` ran in, as it wrote it, per run.
fn cgroups_of_runs(marks: &Path) -> Vec<String> {
    std::fs::read_to_string(marks)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A job requeued after its node manager died is relaunched by the restarted node
/// manager in a cgroup of its own — not the directory of the first run, which the new node
/// manager is removing — and runs to completion.
#[test]
fn a_requeued_job_on_a_restarted_node_manager_gets_a_new_cgroup() {
    let c = Cluster::up(
        "durable",
        "cgroup",
        &[
            "--nodes",
            "1",
            "--pes",
            "1",
            "--requeue",
            "--heartbeat",
            "200ms",
            // The killed node manager's node is declared down after 2 s; its job waits
            // another 2 s for it to come back (fencing), then goes back to the queue.
            "--suspect-after",
            "1s",
            "--down-after",
            "2s",
        ],
    );
    let marks = c.dir.join("marks");
    let script = format!(
        "grep '^0::' /proc/self/cgroup >> {m}; n=$(wc -l < {m}); if [ $n -lt 2 ]; then sleep 600; fi",
        m = marks.display()
    );
    let id = c.submit(&["-n", "1", "--", "sh", "-c", &script]);
    c.until(30, "the first run", || {
        (cgroups_of_runs(&marks).len() == 1).then_some(())
    });
    let first = cgroups_of_runs(&marks)[0].clone();
    if !first.contains("/job-") {
        notice(&format!(
            "a_requeued_job_on_a_restarted_node_manager_gets_a_new_cgroup: jobs run without cgroups here ({first}); NOT tried"
        ));
        return;
    }
    let nm = c.pid(c.state.nm_pid_file("n0"));
    signal(&nm, "KILL");
    c.until(30, "the job requeued", || {
        (c.state_of(id).as_deref() == Some("queued")).then_some(())
    });
    c.restart_nm(0, 1);
    let j = c.ended(id, 60);
    assert_eq!(j["state"], "completed", "{j}\n{}", c.mm_log());
    let runs = cgroups_of_runs(&marks);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_ne!(
        runs[0], runs[1],
        "the relaunch reused the first run's cgroup"
    );
}
