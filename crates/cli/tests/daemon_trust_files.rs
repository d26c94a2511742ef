//! No local root through the files a root daemon touches. Real
//! daemons on loopback, attacked by a second Unix user (created with `useradd` when the
//! tests run as root; run as another user, the tests that need one print a NOTICE and
//! return).
//!
//! - A link the user plants at the node manager's monitor ring names, in the job
//!   directory the user owns, is never followed (it made root truncate any file and give it
//!   to the user, or create a missing one as theirs).
//! - A user re-broadcasting a name root staged does not change what root's job
//!   runs (broadcast names were one name space per node for all users).
//! - A scratch directory a user made before the cluster started is refused, and
//!   nothing is written where it leads (a root-owned file was replaced by the user's).
//!
//! `COSCHED_RACE_ITERATIONS=N` runs the launch race above N times (default
//! [`RACE_ITERATIONS`], a few seconds); docs/reliability.md has the figure for 1,000.

mod support;
use support::cluster::{Cluster, signal};
use support::user::*;
use support::*;

use std::ffi::CString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Launch races tried by default.
const RACE_ITERATIONS: usize = 12;

/// A state directory other users may enter (0755, as an administrator makes one for a shared
/// cluster), for a cluster brought up by the test.
fn shared_dir(name: &str) -> PathBuf {
    let dir = scratch("trustfiles", name);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A root-only directory holding the files the attacks aim at: `victim` (root's, "precious",
/// 0644) and the name `missing`, which must not come to exist.
struct Targets {
    victim: PathBuf,
    missing: PathBuf,
}

impl Targets {
    fn new(dir: &Path) -> Targets {
        let root_only = dir.join("root-only");
        std::fs::create_dir(&root_only).unwrap();
        std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o711)).unwrap();
        let victim = root_only.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        Targets {
            victim,
            missing: root_only.join("ld.so.preload"),
        }
    }

    /// What an attack changed, if anything.
    fn harm(&self) -> Option<String> {
        let m = std::fs::symlink_metadata(&self.victim).unwrap();
        let text = std::fs::read_to_string(&self.victim).unwrap_or_default();
        if text != "precious\n" || m.uid() != 0 || m.mode() & 0o7777 != 0o644 {
            return Some(format!(
                "{} is now {} bytes, uid {}, mode {:o}",
                self.victim.display(),
                m.len(),
                m.uid(),
                m.mode() & 0o7777
            ));
        }
        if let Ok(m) = std::fs::symlink_metadata(&self.missing) {
            return Some(format!(
                "{} was created (uid {})",
                self.missing.display(),
                m.uid()
            ));
        }
        None
    }
}

/// The directory of job `id` on node `node` of the cluster in `dir`.
fn job_dir(dir: &Path, node: &str, id: u64) -> PathBuf {
    dir.join(format!("nm-{node}/jobs/{id}"))
}

/// The job id in `cosched submit`'s output, which must have succeeded.
fn submitted(out: &std::process::Output) -> u64 {
    assert!(out.status.success(), "{}", text(out));
    job_id(&String::from_utf8_lossy(&out.stdout))
}

/// The monitor-ring link, made deterministic: the job's ranks (as the user) plant links at the monitor
/// ring's temporary name in their own job directories (to root's file on n0, to a missing
/// path on n1); the node manager n0 is killed and restarted, so the job is requeued and
/// launched again in the same directories. The node managers must replace the links, not
/// write through them. (On the code before the fix, the victim was truncated to the ring's
/// size and given to the user, and the missing file created as the user's.)
#[test]
fn monitor_ring_is_not_created_through_links_the_user_planted_for_a_requeued_run() {
    let Some(u) = second_user("monitor_ring_is_not_created_through_links_the_user_planted") else {
        return;
    };
    let dir = shared_dir("requeue");
    let t = Targets::new(&dir);
    let c = Cluster::up_in(
        dir.join("state"),
        &[
            "--nodes",
            "2",
            "--pes",
            "1",
            "--heartbeat",
            "100ms",
            "--requeue",
        ],
    );
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = c.dir.display();
    // Each rank plants its link once, in its node's directory of the job (it owns it).
    let script = format!(
        "j={d}/nm-$COSCHED_NODE/jobs/$COSCHED_JOB_ID; \
         if [ ! -e $j/planted ]; then \
           if [ $COSCHED_NODE = n0 ]; then ln -s {} $j/monitor-n0.tmp; else ln -s {} $j/monitor-n1.tmp; fi; \
           touch $j/planted; \
         fi; sleep 60",
        t.victim.display(),
        t.missing.display()
    );
    let id = submitted(&cosched_as(
        &u,
        &c.dir,
        &["submit", "-n", "2", "--", "sh", "-c", &script],
    ));
    let tmp = |node: &str| job_dir(&c.dir, node, id).join(format!("monitor-{node}.tmp"));
    c.until(30, "the links planted by the first run", || {
        ["n0", "n1"]
            .iter()
            .all(|n| std::fs::symlink_metadata(tmp(n)).is_ok())
            .then_some(())
    });
    signal(&c.pid(c.state.nm_pid_file("n0")), "KILL");
    c.restart_nm(0, 1);
    // The second run's launch makes the rings again on both nodes: the links are gone then.
    c.until(60, "the requeued run launched on n0 and n1", || {
        ["n0", "n1"]
            .iter()
            .all(|n| std::fs::symlink_metadata(tmp(n)).is_err())
            .then_some(())
    });
    assert!(
        c.mm_log().contains(&format!("requeueing job {id}")),
        "{}",
        c.mm_log()
    );
    let _ = c.run(&["cancel", &id.to_string()]);
    assert_eq!(t.harm(), None, "the planted links were followed");
}

/// Makes a link at each of `paths` to its target, as `uid` (gid `gid`), trying again and
/// again until each is made or `within` passes: the attacker of the launch race, in a child
/// process of its own. Returns how many were made.
fn plant_links(uid: u32, links: &[(CString, CString)], within: Duration) -> usize {
    // Everything the child needs is made before the fork: it only calls the kernel.
    let secs = within.as_secs() as libc::time_t + 1;
    // SAFETY: the child makes plain system calls on data prepared before the fork and leaves
    // with _exit; it never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: plain system calls in the child.
        unsafe {
            if libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                libc::_exit(100);
            }
            let deadline = libc::time(std::ptr::null_mut()) + secs;
            let mut made = [false; 8];
            let mut left = links.len();
            while left > 0 && libc::time(std::ptr::null_mut()) < deadline {
                for (i, (target, link)) in links.iter().enumerate() {
                    if !made[i] && libc::symlink(target.as_ptr(), link.as_ptr()) == 0 {
                        made[i] = true;
                        left -= 1;
                    }
                }
            }
            libc::_exit((links.len() - left) as i32);
        }
    }
    let mut status = 0;
    // SAFETY: reaps the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "the attacker died: {status}");
    let made = libc::WEXITSTATUS(status);
    assert!(made != 100, "the attacker could not become the second user");
    made as usize
}

/// The monitor-ring link as a race: while the user's job starts, the user (another process)
/// plants links at the monitor ring's temporary name the instant the job directory becomes
/// theirs, to root's file on n0 and a missing path on n1. Run `COSCHED_RACE_ITERATIONS`
/// times; no link may ever be followed. Reports how many links landed before the node
/// manager made the ring (it then removed them) rather than after.
#[test]
fn monitor_ring_launch_race_is_never_won() {
    let Some(u) = second_user("monitor_ring_launch_race_is_never_won") else {
        return;
    };
    let iterations: usize = std::env::var("COSCHED_RACE_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RACE_ITERATIONS);
    let dir = shared_dir("race");
    let t = Targets::new(&dir);
    let c = Cluster::up_in(dir.join("state"), &["--nodes", "2", "--pes", "1"]);
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let (mut planted, mut in_time) = (0, 0);
    for i in 0..iterations {
        // Job ids count from 1 in a fresh cluster, and only this loop submits.
        let id = i as u64 + 1;
        let link = |node: &str| job_dir(&c.dir, node, id).join(format!("monitor-{node}.tmp"));
        let c_str = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let links = [
            (c_str(&t.victim), c_str(&link("n0"))),
            (c_str(&t.missing), c_str(&link("n1"))),
        ];
        let state = c.dir.clone();
        let user = User {
            name: u.name.clone(),
            uid: u.uid,
        };
        let submit = std::thread::spawn(move || {
            submitted(&cosched_as(
                &user,
                &state,
                &["submit", "-n", "2", "--", "true"],
            ))
        });
        let made = plant_links(u.uid, &links, Duration::from_secs(15));
        assert_eq!(
            submit.join().unwrap(),
            id,
            "job ids are not the predicted ones"
        );
        c.ended(id, 60);
        planted += made;
        // A link that landed before the ring was made is removed by the node manager; one
        // that landed after stays.
        in_time += ["n0", "n1"]
            .iter()
            .filter(|n| std::fs::symlink_metadata(link(n)).is_err())
            .count()
            .min(made);
        if let Some(harm) = t.harm() {
            panic!("race {} of {iterations} won: {harm}", i + 1);
        }
    }
    notice(&format!(
        "monitor_ring_launch_race_is_never_won: {iterations} launches on 2 nodes in {:.1} s; {planted} links planted, {in_time} of them before the ring was made (removed, not followed); none won",
        started.elapsed().as_secs_f64()
    ));
}

/// Writes an executable script printing `word` and its uid.
fn script(dir: &Path, name: &str, word: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\necho {word} $(id -u)\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// What rank 0 of job `id` printed, once the job completed.
fn printed(c: &Cluster, id: u64) -> String {
    let end = c.ended(id, 60);
    assert_eq!(end["state"], "completed", "{end}\n{}", c.mm_log());
    c.ok(&["output", &id.to_string()]).trim().to_string()
}

/// Re-broadcasting a staged name: root stages `app` and queues a job running `cosched-staged:app`; the
/// user broadcasts their own `app`; root's job still runs root's. The user's jobs run the
/// user's `app`, cannot read root's copies, cannot publish, and run what root published.
/// (On the code before the fix, root's job ran the user's program as root.)
#[test]
fn a_user_rebroadcasting_a_name_root_staged_does_not_change_what_roots_job_runs() {
    let Some(u) = second_user("a_user_rebroadcasting_a_name_root_staged") else {
        return;
    };
    let dir = shared_dir("names");
    let c = Cluster::up_in_env(
        dir.join("state"),
        &["--nodes", "1", "--pes", "1"],
        &[("COSCHED_SCRATCH", dir.join("scratch").to_str().unwrap())],
    );
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let roots = script(&dir, "root-app.sh", "root-app");
    let theirs = script(&dir, "user-app.sh", "user-app");
    c.ok(&["bcast", roots.to_str().unwrap(), "--dest", "app"]);
    let blocker = c.submit(&["-n", "1", "--", "sleep", "60"]);
    c.until(30, "the blocker running", || {
        (c.state_of(blocker).as_deref() == Some("running")).then_some(())
    });
    let roots_job = c.submit(&["-n", "1", "--", "cosched-staged:app"]);
    assert_eq!(c.state_of(roots_job).as_deref(), Some("queued"));

    let out = cosched_as(
        &u,
        &c.dir,
        &["bcast", theirs.to_str().unwrap(), "--dest", "app"],
    );
    assert!(out.status.success(), "{}", text(&out));
    c.ok(&["cancel", &blocker.to_string()]);
    assert_eq!(
        printed(&c, roots_job),
        "root-app 0",
        "root's job ran another program"
    );

    let users_job = submitted(&cosched_as(
        &u,
        &c.dir,
        &["submit", "-n", "1", "--", "cosched-staged:app"],
    ));
    assert_eq!(printed(&c, users_job), format!("user-app {}", u.uid));

    // Root's copies are closed to the user: not listed, not read.
    let roots_copies = dir.join("scratch/n0/bcast/0");
    for cmd in [
        vec!["ls", roots_copies.to_str().unwrap()],
        vec!["cat", roots_copies.join("app").to_str().unwrap()],
    ] {
        let out = run_as(&u, &cmd);
        assert!(!out.status.success(), "{cmd:?}: {}", text(&out));
    }

    // Publishing is root's: the user is refused; what root publishes runs in the user's
    // jobs (as the user).
    let tool = script(&dir, "tool.sh", "tool");
    let out = cosched_as(
        &u,
        &c.dir,
        &[
            "bcast",
            "--publish",
            tool.to_str().unwrap(),
            "--dest",
            "tool",
        ],
    );
    assert!(
        !out.status.success() && text(&out).contains("only an administrator"),
        "{}",
        text(&out)
    );
    c.ok(&[
        "bcast",
        "--publish",
        tool.to_str().unwrap(),
        "--dest",
        "tool",
    ]);
    let job = submitted(&cosched_as(
        &u,
        &c.dir,
        &["submit", "-n", "1", "--", "cosched-staged:tool"],
    ));
    assert_eq!(printed(&c, job), format!("tool {}", u.uid));
    let published = dir.join("scratch/n0/bcast/public/tool");
    let m = std::fs::metadata(&published).unwrap();
    assert_eq!(
        (m.uid(), m.mode() & 0o777),
        (0, 0o755),
        "{}",
        published.display()
    );
}

/// The user makes the node manager's scratch directory before the cluster starts
/// (here `COSCHED_SCRATCH` is a sticky directory like `/dev/shm`, and `n0` in it the user's),
/// with `bcast` in it a link to a directory holding a root-owned file. The node manager
/// refuses the directory, naming it; broadcasts to it fail by name; the root-owned file is
/// untouched; jobs still run. (On the code before the fix, the user's broadcast replaced
/// root's file with the user's, user-writable.)
#[test]
fn a_scratch_directory_squatted_before_the_cluster_starts_is_refused_and_never_written() {
    let Some(u) = second_user("a_scratch_directory_squatted_before_the_cluster_starts") else {
        return;
    };
    let dir = shared_dir("squat");
    let shm = dir.join("shm");
    std::fs::create_dir(&shm).unwrap();
    std::fs::set_permissions(&shm, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victims = dir.join("victims");
    std::fs::create_dir(&victims).unwrap();
    std::fs::set_permissions(&victims, std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = victims.join("app");
    std::fs::write(&victim, "precious\n").unwrap();
    let squatted = shm.join("n0");
    for cmd in [
        vec!["mkdir", squatted.to_str().unwrap()],
        vec![
            "ln",
            "-s",
            victims.to_str().unwrap(),
            squatted.join("bcast").to_str().unwrap(),
        ],
    ] {
        let out = run_as(&u, &cmd);
        assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    }
    let c = Cluster::up_in_env(
        dir.join("state"),
        &["--nodes", "1", "--pes", "1"],
        &[("COSCHED_SCRATCH", shm.to_str().unwrap())],
    );
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let evil = script(&dir, "evil.sh", "evil");
    let out = cosched_as(
        &u,
        &c.dir,
        &["bcast", evil.to_str().unwrap(), "--dest", "app"],
    );
    assert!(
        !out.status.success() && text(&out).contains("n0"),
        "the broadcast went through: {}",
        text(&out)
    );
    let m = std::fs::symlink_metadata(&victim).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(m.uid(), 0, "root's file was given away");
    assert_eq!(
        std::fs::read_dir(&victims).unwrap().count(),
        1,
        "written beside it"
    );
    let log = std::fs::read_to_string(c.state.nm_log("n0")).unwrap();
    assert!(
        log.contains(&squatted.display().to_string()) && log.contains("is owned by"),
        "the node manager's log does not name the refused directory:\n{log}"
    );
    let id = c.submit(&["-n", "1", "--", "echo", "runs"]);
    assert_eq!(printed(&c, id), "runs");
}

/// A copy staged for a job (`submit --bcast`) is that job's: broadcasting the user's own
/// name (even the very name) or staging the same file for another job does not change what
/// the queued job runs.
#[test]
fn a_copy_staged_for_a_job_is_not_changed_by_later_broadcasts() {
    let dir = shared_dir("perjob");
    let c = Cluster::up_in_env(
        dir.join("state"),
        &["--nodes", "1", "--pes", "1"],
        &[("COSCHED_SCRATCH", dir.join("scratch").to_str().unwrap())],
    );
    let blocker = c.submit(&["-n", "1", "--", "sleep", "60"]);
    c.until(30, "the blocker running", || {
        (c.state_of(blocker).as_deref() == Some("running")).then_some(())
    });
    let prog = script(&dir, "prog.sh", "first");
    let first = c.submit(&["-n", "1", "--bcast", prog.to_str().unwrap()]);
    let cmd0 = c.job(first)["cmd"][0].as_str().unwrap().to_string();
    let reference = cmd0
        .strip_prefix("cosched-staged:@")
        .expect("the job names the copy of its own transfer");
    let (_, name) = reference.split_once('/').unwrap();
    // The same name among the user's own, and the same file staged for another job.
    let other = script(&dir, "other.sh", "other");
    c.ok(&["bcast", other.to_str().unwrap(), "--dest", name]);
    let second = c.submit(&["-n", "1", "--bcast", prog.to_str().unwrap()]);
    let named = c.submit(&["-n", "1", "--", &format!("cosched-staged:{name}")]);
    c.ok(&["cancel", &blocker.to_string()]);
    let me = support::user::euid();
    assert_eq!(printed(&c, first), format!("first {me}"));
    assert_eq!(printed(&c, second), format!("first {me}"));
    assert_eq!(printed(&c, named), format!("other {me}"));
    let v: Value = c.job(second);
    assert_ne!(
        v["cmd"][0].as_str(),
        Some(cmd0.as_str()),
        "one copy per job"
    );
}
