//! Late is not dead, and no two runs of a job
//! overlap. Real daemons on loopback, each test in its own state directory; a node manager
//! or the machine manager is stopped (SIGSTOP) and continued. The settings give every wait a
//! wide margin on a loaded machine: the faults last seconds, the deadlines tens of seconds.
//! The core's unit tests (crates/mm/src/tests.rs) check the same rules under a
//! virtual clock.

mod support;
use support::cluster::{Cluster, signal};
use support::marks::{by_rank, job_log, overlap, starts};
use support::*;

use std::time::{Duration, Instant};

/// Whether job `id` has ended (any final state).
fn ended(c: &Cluster, id: u64) -> Option<String> {
    c.state_of(id)
        .filter(|s| !["queued", "running", "suspended"].contains(&s.as_str()))
}

fn pid_written(c: &Cluster, file: &str) -> i32 {
    c.until(30, &format!("{file} written"), || {
        std::fs::read_to_string(c.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// A node manager stopped for longer than `--suspect-after` but shorter than
/// `--down-after` is not responding — nothing new starts on it, `status` says so — and keeps
/// its job, which completes once it is back; a job waiting for its free PE starts then.
#[test]
fn a_node_manager_stopped_past_suspect_after_but_not_down_after_keeps_its_jobs() {
    let c = Cluster::up(
        "liveness",
        "suspect",
        &[
            "--nodes",
            "2",
            "--pes",
            "2",
            "--heartbeat",
            "100ms",
            "--suspect-after",
            "1s",
            "--down-after",
            "60s",
        ],
    );
    // PEs 0-2: both of n0, one of n1 (whose other PE stays free).
    let long = c.submit(&[
        "-n",
        "3",
        "--",
        "sh",
        "-c",
        "sleep 4; echo done-$COSCHED_RANK",
    ]);
    c.until(30, "the job running", || {
        (c.state_of(long)? == "running").then_some(())
    });
    let nm = c.pid(c.state.nm_pid_file("n1"));
    signal(&nm, "STOP");
    c.until(30, "n1 not responding", || {
        (c.node_state("n1")? == "not_responding").then_some(())
    });
    let small = c.submit(&["-n", "1", "--", "echo", "small"]);
    std::thread::sleep(Duration::from_secs(1));
    let waiting = c.state_of(small);
    signal(&nm, "CONT");
    assert_eq!(
        waiting.as_deref(),
        Some("queued"),
        "a job started on a node that is not responding\n{}",
        c.mm_log()
    );
    c.until(30, "n1 up again", || {
        (c.node_state("n1")? == "up").then_some(())
    });
    for id in [long, small] {
        let j = c.ended(id, 60);
        assert_eq!(j["state"], "completed", "{j}\n{}", c.mm_log());
    }
    assert_eq!(
        c.ok(&["output", &long.to_string(), "--rank", "2"]).trim(),
        "done-2"
    );
    let log = c.mm_log();
    assert!(
        log.contains("not responding") && log.contains("answers again"),
        "{log}"
    );
    assert!(!log.contains("declaring it down"), "{log}");
}

/// The other side: a node manager stopped for longer than `--down-after` is
/// declared down and its job fails `node_failed` (the existing rules), while its rank keeps
/// running there. When it comes back it is fenced: it kills that rank before it is accepted,
/// and then takes work again.
#[test]
fn a_node_manager_stopped_past_down_after_is_declared_down_and_fenced() {
    let c = Cluster::up(
        "liveness",
        "down",
        &[
            "--nodes",
            "2",
            "--pes",
            "1",
            "--heartbeat",
            "100ms",
            "--suspect-after",
            "1s",
            "--down-after",
            "3s",
            "--kill-wait",
            "1s",
        ],
    );
    let d = c.dir.display();
    let id = c.submit(&[
        "-n",
        "2",
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {d}/rank.$COSCHED_RANK; exec sleep 300"),
    ]);
    let rank1 = pid_written(&c, "rank.1");
    let nm = c.pid(c.state.nm_pid_file("n1"));
    signal(&nm, "STOP");
    let state = c.until(60, "the job lost with n1", || ended(&c, id));
    let still = alive(rank1);
    signal(&nm, "CONT");
    let j = c.job(id);
    assert_eq!(state, "node_failed", "{j}");
    assert!(
        j["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped answering")),
        "{j}"
    );
    assert!(still, "n1's rank died while its node manager was stopped");
    c.until(60, "n1 back", || {
        (c.node_state("n1")? == "up").then_some(())
    });
    assert!(
        !alive(rank1),
        "n1 was accepted again with the old rank running"
    );
    let nm_log = std::fs::read_to_string(c.state.nm_log("n1")).unwrap();
    assert!(nm_log.contains("declared down while running"), "{nm_log}");
    assert!(
        c.mm_log().contains("still runs processes of jobs"),
        "{}",
        c.mm_log()
    );
    let next = c.submit(&["-n", "2", "--", "true"]);
    assert_eq!(c.ended(next, 60)["state"], "completed");
}

/// A machine manager stopped for 1.5 s — longer than `--down-after` — blames no
/// node for the silence: it measures its own stall and moves the nodes' deadlines by it.
/// Jobs running across the stall complete, and so do jobs whose ranks exited during it.
#[test]
fn a_machine_manager_stopped_for_1_5_s_fails_nothing() {
    // STORM-like settings: before the fix, 1.5 s of the manager's own silence declared
    // every node down.
    let c = Cluster::up(
        "liveness",
        "mmstop",
        &[
            "--nodes",
            "2",
            "--pes",
            "2",
            "--heartbeat",
            "100ms",
            "--suspect-after",
            "500ms",
            "--down-after",
            "1s",
        ],
    );
    let d = c.dir.display();
    let mut ids = Vec::new();
    for secs in [1, 1, 4, 4] {
        ids.push(c.submit(&[
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            &format!("touch {d}/started.$COSCHED_JOB_ID; sleep {secs}"),
        ]));
    }
    c.until(30, "every job started", || {
        ids.iter()
            .all(|id| c.dir.join(format!("started.{id}")).exists())
            .then_some(())
    });
    let mm = c.pid(c.state.mm_pid_file());
    signal(&mm, "STOP");
    std::thread::sleep(Duration::from_millis(1500));
    signal(&mm, "CONT");
    for &id in &ids {
        let j = c.ended(id, 60);
        assert_eq!(j["state"], "completed", "{j}\n{}", c.mm_log());
    }
    let log = c.mm_log();
    assert!(log.contains("did not run for"), "{log}");
    assert!(!log.contains("declaring it down"), "{log}");
}

/// With `--requeue`, a node manager stopped for 8 s (declared down after 5 s)
/// while a 2-rank job runs on it and on another node: the job goes back to the queue, and
/// although a free node could take it at once, it starts again only once the stopped node is
/// back and has killed its rank of the first run (fencing). No two runs of a rank overlap
/// (the ranks leave start and end markers).
#[test]
fn requeued_runs_never_overlap_under_an_8_s_node_pause() {
    let c = Cluster::up(
        "liveness",
        "requeue",
        &[
            "--nodes",
            "4",
            "--pes",
            "1",
            "--heartbeat",
            "100ms",
            "--suspect-after",
            "1s",
            "--down-after",
            "5s",
            "--kill-wait",
            "1s",
            "--requeue",
        ],
    );
    let marks = c.dir.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let m = marks.display().to_string();
    // n0 runs a bystander; the 2-rank job runs on n1 and n2, each rank for 12 s; n3 is free.
    let bystander = c.submit(&["-n", "1", "--", "sh", "-c", &marks::script(&m, 12_000)]);
    let job = c.submit(&["-n", "2", "--", "sh", "-c", &marks::script(&m, 12_000)]);
    c.until(30, "both ranks of the job started", || {
        (starts(&marks.join(job.to_string())).len() == 2).then_some(())
    });
    let nm = c.pid(c.state.nm_pid_file("n1"));
    let paused = Instant::now();
    signal(&nm, "STOP");
    std::thread::sleep(Duration::from_secs(8));
    signal(&nm, "CONT");
    let requeued_while_paused = c.mm_log().contains(&format!("requeueing job {job}:"));
    for id in [bystander, job] {
        let j = c.ended(id, 120);
        assert_eq!(j["state"], "completed", "{j}\n{}", c.mm_log());
    }
    let log = c.mm_log();
    assert!(
        requeued_while_paused,
        "the pause did not make the job go back to the queue (paused {:?}):\n{log}",
        paused.elapsed()
    );
    let st = starts(&marks.join(job.to_string()));
    for (r, runs) in by_rank(&st) {
        assert_eq!(runs.len(), 2, "rank {r} ran {} times: {st:?}", runs.len());
        if let Some((a, b)) = overlap(&runs) {
            panic!(
                "job {job} rank {r}: run 2 started before run 1 ended: {a:?} then {b:?}\n{}",
                job_log(&log, job)
            );
        }
    }
    assert_eq!(starts(&marks.join(bystander.to_string())).len(), 1);
}
