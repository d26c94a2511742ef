//! Containment by a cgroup v2 per job per node. A rank's `setsid`
//! grandchild (which leaves the rank's process group) is frozen by suspend, killed by cancel,
//! and killed by the next node manager after its node manager was `kill -9`ed; and a killed
//! job's PEs go to the next job only once its processes are gone.
//!
//! Where the node managers cannot use cgroup v2 (their log says which containment is in use),
//! the cgroup-specific assertions are skipped with a visible NOTICE; the rest still runs.

mod support;
use support::cluster::{Cluster, signal};

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether node manager `node` contains jobs with cgroups (from its log line).
fn cgroups_in_use(c: &Cluster, node: &str) -> bool {
    let line = c.until(30, "the NM's containment line", || {
        let log = std::fs::read_to_string(c.state.nm_log(node)).ok()?;
        log.lines()
            .find(|l| l.contains("containment:"))
            .map(str::to_string)
    });
    let yes = line.contains("cgroup v2 per job");
    if !yes {
        eprintln!("NOTICE: {line}: the cgroup-specific assertions of this test are skipped");
    }
    yes
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

fn read_pid(c: &Cluster, file: &Path) -> i32 {
    c.until(30, &format!("{} written", file.display()), || {
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    })
}

/// A rank that starts a `setsid` grandchild writing a heartbeat to `dir/hb` every 50 ms, its
/// pid in `dir/gc.pid`, then sleeps.
fn heartbeat_job(c: &Cluster, dir: &Path) -> u64 {
    let d = dir.display();
    c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!(
            "setsid sh -c 'echo $$ > {d}/gc.pid; while :; do date +%s%N > {d}/hb; sleep 0.05; done' & sleep 300"
        ),
    ])
}

fn beat(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("hb")).unwrap_or_default()
}

#[test]
fn a_setsid_grandchild_is_frozen_by_suspend_and_killed_by_cancel() {
    let c = Cluster::up(
        "contain",
        "setsid",
        &["--nodes", "1", "--pes", "2", "--kill-wait", "1s"],
    );
    let cg = cgroups_in_use(&c, "n0");
    let id = heartbeat_job(&c, &c.dir);
    let gc = read_pid(&c, &c.dir.join("gc.pid"));
    c.until(30, "the first heartbeat", || {
        (!beat(&c.dir).is_empty()).then_some(())
    });

    c.ok(&["suspend", &id.to_string()]);
    std::thread::sleep(Duration::from_millis(300));
    let a = beat(&c.dir);
    std::thread::sleep(Duration::from_millis(700));
    let b = beat(&c.dir);
    if cg {
        assert_eq!(
            a, b,
            "the setsid grandchild kept beating while its job was suspended"
        );
    }

    c.ok(&["resume", &id.to_string()]);
    c.until(10, "the heartbeat again after resume", || {
        (beat(&c.dir) != b).then_some(())
    });

    c.ok(&["cancel", &id.to_string()]);
    if cg {
        c.until(10, "the setsid grandchild killed with its job", || {
            (!alive(gc)).then_some(())
        });
    } else {
        signal(&gc.to_string(), "KILL");
    }
}

/// A killed NM takes its ranks along (PR_SET_PDEATHSIG) but not their `setsid` children: the
/// node manager restarted on the same work directory finds the job cgroups its predecessor
/// left and kills them (a new NM process holds no job; the MM fails the job).
#[test]
fn a_restarted_node_manager_kills_what_its_killed_predecessor_left() {
    let c = Cluster::up(
        "contain",
        "nmkill",
        &[
            "--nodes",
            "1",
            "--pes",
            "1",
            "--heartbeat",
            "100ms",
            "--kill-wait",
            "1s",
        ],
    );
    let cg = cgroups_in_use(&c, "n0");
    let id = heartbeat_job(&c, &c.dir);
    let gc = read_pid(&c, &c.dir.join("gc.pid"));
    c.until(30, "the job running", || {
        (c.state_of(id).as_deref() == Some("running")).then_some(())
    });
    signal(&c.pid(c.state.nm_pid_file("n0")), "KILL");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        alive(gc),
        "the setsid grandchild died with its NM (nothing left to test)"
    );
    c.restart_nm(0, 1);
    let end = c.until(30, "the job ended", || {
        c.state_of(id)
            .filter(|s| !["queued", "running", "suspended"].contains(&s.as_str()))
    });
    assert!(["failed", "node_failed"].contains(&end.as_str()), "{end}");
    if cg {
        c.until(10, "the orphaned grandchild killed by the new NM", || {
            (!alive(gc)).then_some(())
        });
        let log = std::fs::read_to_string(c.state.nm_log("n0")).unwrap();
        assert!(
            log.contains("job cgroups of an earlier node manager"),
            "{log}"
        );
    } else {
        signal(&gc.to_string(), "KILL");
    }
}

/// A cancelled job's PEs are not given to the next job while its processes still run (they
/// ignore SIGTERM here, so they last the whole 3-s kill wait): as Slurm's COMPLETING, the
/// policy hears of the end once every rank has exited.
#[test]
fn a_killed_jobs_pes_stay_busy_until_its_processes_are_gone() {
    let c = Cluster::up(
        "contain",
        "completing",
        &["--nodes", "1", "--pes", "1", "--kill-wait", "3s"],
    );
    let d = c.dir.display();
    let stubborn = c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!("trap '' TERM; echo $$ > {d}/a.pid; while :; do sleep 0.1; done"),
    ]);
    let a = read_pid(&c, &c.dir.join("a.pid"));
    let next = c.submit(&["-n", "1", "--", "sh", "-c", &format!("touch {d}/b")]);
    let cancelled = Instant::now();
    c.ok(&["cancel", &stubborn.to_string()]);
    let b = c.dir.join("b");
    c.until(30, "the next job ran", || b.exists().then_some(()));
    let took = cancelled.elapsed();
    assert!(
        !alive(a),
        "the next job started on the PE while the cancelled job's rank still ran"
    );
    assert!(
        took >= Duration::from_millis(2800),
        "the next job started {took:?} after the cancel, within the 3-s kill wait"
    );
    c.ok(&["wait", &next.to_string(), "--timeout", "30s"]);
    assert_eq!(c.state_of(stubborn).as_deref(), Some("cancelled"));
}
