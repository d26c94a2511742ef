//! No local user can become root, read another user's jobs or act on
//! them. Real daemons on loopback. The attacks that need a second Unix user run as one the
//! test creates with `useradd` when it runs as root; run as another user, those tests print a
//! NOTICE saying so and return.

mod support;
use support::cluster::Cluster;
use support::user::*;
use support::*;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// A cluster brought up for one test in a directory other users may enter (0755, as an
/// administrator would make it for a shared cluster); stopped and removed on drop.
fn shared_cluster(name: &str, args: &[&str]) -> Cluster {
    let dir = scratch("ident", name);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    Cluster::up_in(dir, args)
}

/// Brings down whatever cluster a failed assertion left in these directories, and removes
/// them.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for d in &self.0 {
            if d.join("mm.pid").exists() {
                let _ = cosched(d, &["cluster", "down"]);
            }
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Step 1: a state directory another user could have planted files in is refused, with its
/// path in the message; a new one is private. (Before: anything was used as it stood.)
#[test]
fn an_unsafe_state_directory_is_refused_and_a_new_one_is_private() {
    let base = scratch("ident", "statedir");
    let writable = base.join("writable");
    let _cleanup = Cleanup(vec![writable.clone(), base.join("fresh"), base.clone()]);
    std::fs::create_dir(&writable).unwrap();
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = cosched(&writable, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&writable.display().to_string())
            && text(&out).contains("writable by its group or others"),
        "{}",
        text(&out)
    );
    assert!(!writable.join("key").exists(), "nothing is written there");

    let link = base.join("link");
    std::os::unix::fs::symlink(&writable, &link).unwrap();
    let out = cosched(&link, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
    assert!(
        !out.status.success() && text(&out).contains("symbolic link"),
        "{}",
        text(&out)
    );

    if let Some(u) = second_user("an_unsafe_state_directory_is_refused") {
        let theirs = base.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(u.uid), None).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = cosched(&theirs, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
        assert!(
            !out.status.success() && text(&out).contains("is owned by"),
            "{}",
            text(&out)
        );
        // Nor may `cluster down` act on it.
        let out = cosched(&theirs, &["cluster", "down"]);
        assert!(text(&out).contains("is owned by"), "{}", text(&out));
    }

    let fresh = base.join("fresh");
    let out = cosched(&fresh, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let _ = cosched(&fresh, &["cluster", "down"]);
    assert_eq!(mode(&fresh), 0o700);
    assert_eq!(mode(&fresh.join("logs")), 0o700);
    for f in ["key", "mm.db", "logs/mm.log", "logs/nm-n0.log"] {
        assert_eq!(mode(&fresh.join(f)), 0o600, "{f}");
    }
}

/// Step 1: `cluster up` never writes the key through a file or link that stood at its path.
/// (Before: the link was followed and its target overwritten; a 0666 file kept its mode.)
#[test]
fn the_key_is_never_written_through_a_planted_file_or_link() {
    let dir = scratch("ident", "key");
    let _cleanup = Cleanup(vec![dir.clone()]);
    let victim = std::env::temp_dir().join(format!("cosched-ident-victim-{}", std::process::id()));
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("key")).unwrap();
    let out = cosched(&dir, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let _ = cosched(&dir, &["cluster", "down"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let m = std::fs::symlink_metadata(dir.join("key")).unwrap();
    assert!(m.file_type().is_file(), "the link was replaced by a file");
    assert_eq!(m.mode() & 0o777, 0o600);

    if let Some(u) = second_user("the_key_is_never_written_through_a_planted_file") {
        std::fs::remove_file(dir.join("key")).unwrap();
        std::fs::write(dir.join("key"), "").unwrap();
        std::os::unix::fs::chown(dir.join("key"), Some(u.uid), None).unwrap();
        std::fs::set_permissions(dir.join("key"), std::fs::Permissions::from_mode(0o666)).unwrap();
        let out = cosched(&dir, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
        assert!(out.status.success(), "{}", text(&out));
        let _ = cosched(&dir, &["cluster", "down"]);
        let m = std::fs::metadata(dir.join("key")).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o600));
        let read = run_as(&u, &["cat", &dir.join("key").display().to_string()]);
        assert!(!read.status.success(), "the second user read the key");
    }
    let _ = std::fs::remove_file(&victim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Step 2: `cluster down` never signals a pid planted in a pid file (without a start time, or
/// with another process's): the process survives and the file is named. (Before: SIGKILL.)
#[test]
fn cluster_down_never_signals_a_planted_pid() {
    let mut sleep = Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = sleep.id();
    let tmp = scratch_dir("ident", "pid");
    let dir = tmp.path();
    std::fs::write(dir.join("mm.pid"), format!("{pid}\n")).unwrap();
    let out = cosched(dir, &["cluster", "down"]);
    assert!(
        text(&out).contains("not signalled") && text(&out).contains(&format!("pid {pid}")),
        "{}",
        text(&out)
    );
    assert!(
        sleep.try_wait().unwrap().is_none(),
        "the planted pid was killed"
    );

    // In a running cluster, a node manager's pid file replaced by another process's pid
    // with a made-up start time: the cluster goes down, the process lives.
    let c = shared_cluster("pid", &["--nodes", "2", "--pes", "1"]);
    std::fs::write(c.dir.join("nm-n1.pid"), format!("{pid} 12345\n")).unwrap();
    let out = cosched(&c.dir, &["cluster", "down"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("not signalled"), "{}", text(&out));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        sleep.try_wait().unwrap().is_none(),
        "the planted pid was killed"
    );
    let _ = sleep.kill();
    let _ = sleep.wait();
}

/// Step 3: local clients are who the kernel says (the MM's Unix socket, `SO_PEERCRED`):
/// another user's job cannot be cancelled, held, released or read, a user's own job can be,
/// and the job records the submitting uid whatever the client claims. (Before: any client
/// with the key acted on every job; a user without it could do nothing at all.)
#[test]
fn a_user_acts_only_on_their_own_jobs() {
    let Some(u) = second_user("a_user_acts_only_on_their_own_jobs") else {
        return;
    };
    let c = shared_cluster("owner", &["--nodes", "1", "--pes", "1"]);
    let mine = job_id(&c.ok(&["submit", "-n", "1", "--", "sleep", "60"]));
    for args in [
        vec!["cancel".to_string(), mine.to_string()],
        vec!["suspend".into(), mine.to_string()],
        vec!["resume".into(), mine.to_string()],
        vec!["output".into(), mine.to_string()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cosched_as(&u, &c.dir, &args);
        assert!(
            !out.status.success()
                && text(&out).contains(&format!("permission denied: job {mine} belongs to root")),
            "{args:?} as {}: {}",
            u.name,
            text(&out)
        );
    }
    assert_eq!(c.state_of(mine).as_deref(), Some("running"));
    let out = cosched_as(&u, &c.dir, &["submit", "-n", "1", "--", "sleep", "60"]);
    assert!(out.status.success(), "{}", text(&out));
    let theirs = job_id(&String::from_utf8_lossy(&out.stdout));
    let rec = c
        .jobs()
        .into_iter()
        .find(|j| j["id"] == theirs)
        .expect("listed");
    assert_eq!(rec["uid"], u.uid, "{rec}");
    let out = cosched_as(&u, &c.dir, &["cancel", &theirs.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(c.ended(theirs, 60)["state"], "cancelled");
    c.ok(&["cancel", &mine.to_string()]);

    // A private state directory (0700, as `cluster up` makes one) is closed to the user,
    // who is told so rather than sent looking for `mm.addr`.
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = cosched_as(&u, &c.dir, &["queue"]);
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(
        !out.status.success() && text(&out).contains("not open to this user"),
        "{}",
        text(&out)
    );
}

/// Step 4: ranks run as the submitting user (uid, gid, groups), and their output files are
/// the user's, mode 0600, in a job directory of mode 0700. (Before: as the node manager's
/// user, root.) A node manager that is not root refuses another user's job with the reason.
#[test]
fn ranks_run_as_the_submitting_user() {
    let Some(u) = second_user("ranks_run_as_the_submitting_user") else {
        return;
    };
    let c = shared_cluster("runas", &["--nodes", "1", "--pes", "1"]);
    let out = cosched_as(
        &u,
        &c.dir,
        &["submit", "-n", "1", "--", "sh", "-c", "id -u; id -g"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let id = job_id(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(c.ended(id, 60)["state"], "completed", "{}", c.mm_log());
    let out = cosched_as(&u, &c.dir, &["output", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&u.uid.to_string().as_str()),
        "{printed}"
    );
    let want_gid = String::from_utf8(
        Command::new("id")
            .args(["-g", &u.name])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(lines.get(1).copied(), Some(want_gid.trim()), "{printed}");
    let job_dir = c.dir.join(format!("nm-n0/jobs/{id}"));
    let file = job_dir.join("0.out");
    let m = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (m.uid(), m.mode() & 0o777),
        (u.uid, 0o600),
        "{}",
        file.display()
    );
    let m = std::fs::metadata(&job_dir).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (u.uid, 0o700));

    // Output where only root may write: the rank, being the user, cannot create it.
    let planted = format!("/etc/cosched-ident-{}-%j", std::process::id());
    let out = cosched_as(
        &u,
        &c.dir,
        &["submit", "-n", "1", "--output", &planted, "--", "true"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let id = job_id(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(c.ended(id, 60)["state"], "failed");
    let target = planted.replace("%j", &id.to_string());
    let made = Path::new(&target).exists();
    let _ = std::fs::remove_file(&target);
    assert!(!made, "root created {target} for the user");
    let rec = c.jobs().into_iter().find(|j| j["id"] == id).unwrap();
    assert!(
        rec["error"]
            .as_str()
            .is_some_and(|e| e.contains("ermission denied")),
        "{rec}"
    );
    drop(c);

    // The whole cluster run by the second user: root's job (over TCP with the key, as an
    // administrator naming itself) is refused by its node manager with the reason.
    let dir = scratch("ident", "userclu");
    std::os::unix::fs::chown(&dir, Some(u.uid), None).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let up = cosched_as(&u, &dir, &["cluster", "up", "--nodes", "1", "--pes", "1"]);
    assert!(up.status.success(), "{}", text(&up));
    let addr = std::fs::read_to_string(dir.join("mm.addr")).unwrap();
    let key = dir.join("key").display().to_string();
    let sub = cosched(
        &dir,
        &[
            "submit",
            "--mm",
            addr.trim(),
            "--key-file",
            &key,
            "-n",
            "1",
            "--",
            "true",
        ],
    );
    assert!(sub.status.success(), "{}", text(&sub));
    let id = job_id(&String::from_utf8_lossy(&sub.stdout));
    let rec = until(60, &format!("the end of job {id}"), || {
        let out = cosched(
            &dir,
            &["acct", "--json", "--mm", addr.trim(), "--key-file", &key],
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v["jobs"]
            .as_array()?
            .iter()
            .find(|j| j["id"] == id)
            .filter(|r| r["state"] != "queued" && r["state"] != "running")
            .cloned()
    });
    let _ = cosched_as(&u, &dir, &["cluster", "down"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(rec["state"], "failed", "{rec}");
    assert!(
        rec["error"]
            .as_str()
            .is_some_and(|e| e.contains("can run only that user's jobs")),
        "{rec}"
    );
}

/// Step 6: the database (every job's command and environment), the logs and a job's output
/// are not readable by other users. (Before: mm.db, the logs and outputs were 0644.)
#[test]
fn other_users_cannot_read_the_database_logs_or_output() {
    let Some(u) = second_user("other_users_cannot_read_the_database_logs_or_output") else {
        return;
    };
    let c = shared_cluster("private", &["--nodes", "1", "--pes", "1"]);
    let id = job_id(&c.ok(&["submit", "-n", "1", "--", "echo", "secret"]));
    assert_eq!(c.ended(id, 60)["state"], "completed");
    assert!(c.ok(&["output", &id.to_string()]).contains("secret"));
    for f in [
        "mm.db".to_string(),
        "key".into(),
        "logs/mm.log".into(),
        "logs/nm-n0.log".into(),
        format!("nm-n0/jobs/{id}/0.out"),
    ] {
        let path = c.dir.join(&f);
        assert!(path.exists(), "{f}");
        let out = run_as(&u, &["cat", &path.display().to_string()]);
        assert!(!out.status.success(), "{} read {f}: {}", u.name, text(&out));
    }
    let out = run_as(&u, &["ls", &c.dir.join("nm-n0/jobs").display().to_string()]);
    assert!(
        !out.status.success(),
        "{} listed the jobs: {}",
        u.name,
        text(&out)
    );
}

/// Step 5: a captured request cannot be replayed. A proxy between `cosched submit` (over TCP
/// with the key) and the MM records the bytes of the submission; sent again, they are refused
/// and no second job appears. (Before: the replay submitted the job a second time.)
#[test]
fn a_captured_submit_frame_replayed_is_refused() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};

    let c = shared_cluster("replay", &["--nodes", "1", "--pes", "1"]);
    let mm = std::fs::read_to_string(c.dir.join("mm.addr"))
        .unwrap()
        .trim()
        .to_string();
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_addr = proxy.local_addr().unwrap().to_string();
    let captured = Arc::new(Mutex::new(Vec::new()));
    let rec = captured.clone();
    let upstream_addr = mm.clone();
    let relay = std::thread::spawn(move || {
        let (mut client, _) = proxy.accept().unwrap();
        let mut upstream = TcpStream::connect(&upstream_addr).unwrap();
        let (mut back_from, mut back_to) =
            (upstream.try_clone().unwrap(), client.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut back_from, &mut back_to);
            let _ = back_to.shutdown(std::net::Shutdown::Write);
        });
        let mut buf = [0u8; 8192];
        loop {
            match client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    rec.lock().unwrap().extend_from_slice(&buf[..n]);
                    if upstream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = upstream.shutdown(std::net::Shutdown::Write);
        let _ = back.join();
    });
    let key = c.dir.join("key").display().to_string();
    let args = [
        "submit",
        "--mm",
        &proxy_addr,
        "--key-file",
        &key,
        "-n",
        "1",
        "--",
        "true",
    ];
    let first = job_id(&succeeded(&args, cosched(&c.dir, &args), &c.mm_log()));
    relay.join().unwrap();
    let frame = captured.lock().unwrap().clone();
    assert!(frame.len() > 36, "a frame was captured");

    // The very bytes, again, on a new connection.
    let mut s = TcpStream::connect(&mm).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&frame).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert_eq!(c.ended(first, 60)["state"], "completed");
    // Give a wrongly accepted replay time to be recorded.
    std::thread::sleep(Duration::from_millis(300));
    let ids: Vec<u64> = c.jobs().iter().map(|j| j["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![first], "the replay made a job\n{}", c.mm_log());
    assert!(c.mm_log().contains("replayed"), "{}", c.mm_log());
}

/// A file broadcast belongs to the user who began it: another user can neither feed it
/// chunks (which the owner's job, root's here, would then run) nor abort it, and the owner
/// still finishes it. The other user's requests come from a child process that took their
/// uid, so that the machine manager knows them by `SO_PEERCRED` as any local client.
#[test]
fn only_its_owner_feeds_or_aborts_a_broadcast() {
    use cosched_client::client::Client;
    use cosched_proto::StateDir;
    use cosched_proto::proto::{BcastOp, BcastReply, Request, Response};
    let Some(u) = second_user("only_its_owner_feeds_or_aborts_a_broadcast") else {
        return;
    };
    let c = shared_cluster("bcastowner", &["--nodes", "1", "--pes", "1"]);
    let state = StateDir::new(&c.dir);
    let root = Client::from_state_dir(&state, None, None).unwrap();
    let Ok(Response::Bcast(BcastReply::Started { id, .. })) =
        root.request(Request::Bcast(BcastOp::Begin {
            dest: "owned".into(),
            size: 1000,
            chunk: 512,
            slots: 4,
            nodes: vec![],
            scope: Default::default(),
            user: None,
        }))
    else {
        panic!("not started\n{}", c.mm_log())
    };
    let (mut rd, wr) = std::io::pipe().unwrap();
    // SAFETY: the child only switches user, makes two requests on a fresh connection, writes
    // to a pipe and leaves with _exit; it never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let report = std::panic::catch_unwind(|| {
            // SAFETY: plain system calls in the child.
            unsafe {
                assert_eq!(libc::setgid(u.uid), 0);
                assert_eq!(libc::setuid(u.uid), 0);
            }
            let them = Client::from_state_dir(&state, None, None).unwrap();
            let chunk = them.request(Request::Bcast(BcastOp::Chunk {
                id,
                k: 0,
                data: vec![0xcc; 512],
            }));
            let abort = them.request(Request::Bcast(BcastOp::Abort {
                id,
                why: "not mine".into(),
            }));
            format!("chunk: {chunk:?}\nabort: {abort:?}\n")
        })
        .unwrap_or_else(|_| "the child panicked\n".into());
        let mut wr = wr;
        let _ = std::io::Write::write_all(&mut wr, report.as_bytes());
        // SAFETY: leaves the child without running the harness's destructors.
        unsafe { libc::_exit(0) };
    }
    drop(wr);
    let mut report = String::new();
    std::io::Read::read_to_string(&mut rd, &mut report).unwrap();
    // SAFETY: reaps the child forked above.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    let refused = format!("bcast {id} belongs to another user");
    assert_eq!(
        report.matches(&refused).count(),
        2,
        "both requests must be refused:\n{report}"
    );
    for k in 0..2u32 {
        let r = root.request(Request::Bcast(BcastOp::Chunk {
            id,
            k,
            data: vec![k as u8; if k == 0 { 512 } else { 488 }],
        }));
        assert!(matches!(r, Ok(Response::Bcast(BcastReply::Sent))), "{r:?}");
    }
    let file = c.dir.join("owned.bin");
    let mut data = vec![0u8; 512];
    data.extend(vec![1u8; 488]);
    std::fs::write(&file, &data).unwrap();
    let (blake3, _) = cosched_client::bcast::digest_file(&file).unwrap();
    let r = root.request(Request::Bcast(BcastOp::Finish { id, blake3 }));
    assert!(
        matches!(r, Ok(Response::Bcast(BcastReply::Done { .. }))),
        "{r:?}\n{}",
        c.mm_log()
    );
}
