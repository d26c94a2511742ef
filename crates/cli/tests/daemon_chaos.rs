//! Issue 10's acceptance chaos test (added with the chaos test itself) and the regression
//! tests of the bugs it found. Real daemons on loopback; the tests take a lock so that each
//! runs alone on the machine.

mod support;
use support::cluster::{Cluster, signal};

use std::sync::Mutex;

static ALONE: Mutex<()> = Mutex::new(());

/// Found by the chaos test with `--requeue`: a job requeued and launched again on a node
/// where a rank of its previous run was still exiting (its SIGTERM handler takes 0.5 s here)
/// failed with that old rank's exit code, taken for the new rank's. Now an exit counts only
/// for the launch it belongs to, and the job completes on its second run.
#[test]
fn issue_10_an_old_runs_exit_does_not_end_the_requeued_run() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::up(
        "chaos",
        "stale-exit",
        &[
            "--nodes",
            "3",
            "--pes",
            "1",
            "--heartbeat",
            "100ms",
            "--kill-wait",
            "2s",
            "--requeue",
        ],
    );
    let d = c.dir.display();
    let job = c.submit(&[
        "-n",
        "2",
        "--",
        "sh",
        "-c",
        &format!(
            "trap 'sleep 0.5; exit 7' TERM; echo $COSCHED_NODE >> {d}/$COSCHED_JOB_ID.$COSCHED_RANK; \
             if [ $(wc -l < {d}/$COSCHED_JOB_ID.$COSCHED_RANK) -eq 1 ]; then while :; do sleep 0.1; done; else sleep 1; fi"
        ),
    ]);
    let first = c.until(30, "the job running on n0 and n1", || {
        let a = std::fs::read_to_string(c.dir.join(format!("{job}.0"))).ok()?;
        let b = std::fs::read_to_string(c.dir.join(format!("{job}.1"))).ok()?;
        Some((a.trim().to_string(), b.trim().to_string()))
    });
    assert_eq!((first.0.as_str(), first.1.as_str()), ("n0", "n1"));
    // n1 stops answering: the job is requeued and runs again with rank 0 on n0, where rank 0
    // of the first run is still in its SIGTERM handler, and rank 1 on n2.
    let n1 = c.pid(c.state.nm_pid_file("n1"));
    signal(&n1, "STOP");
    let end = c.until(30, "the requeued job ended", || {
        c.state_of(job)
            .filter(|s| !["queued", "running", "suspended"].contains(&s.as_str()))
    });
    signal(&n1, "CONT");
    let again = std::fs::read_to_string(c.dir.join(format!("{job}.0"))).unwrap();
    assert_eq!(
        again.lines().collect::<Vec<_>>(),
        ["n0", "n0"],
        "rank 0 ran twice on n0"
    );
    assert_eq!(end, "completed", "\n--- mm log ---\n{}", c.mm_log());
}

/// Found by the chaos test with `--requeue`: a job requeued when one of its nodes stopped
/// answering, and started again at once on its other node and a free one, was killed there
/// by the kill of its first run, which went out by job id after the new launch. Now a
/// requeue's processes are killed by the forget alone, and the second run completes.
#[test]
fn issue_10_a_requeued_job_started_again_at_once_is_not_killed_by_its_first_runs_kill() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::up(
        "chaos",
        "requeue-kill",
        &[
            "--nodes",
            "3",
            "--pes",
            "1",
            "--heartbeat",
            "100ms",
            "--kill-wait",
            "1s",
            "--requeue",
        ],
    );
    let d = c.dir.display();
    let job = c.submit(&[
        "-n",
        "2",
        "--",
        "sh",
        "-c",
        &format!(
            "trap 'exit 7' TERM; echo $COSCHED_NODE >> {d}/$COSCHED_JOB_ID.$COSCHED_RANK; \
             if [ $(wc -l < {d}/$COSCHED_JOB_ID.$COSCHED_RANK) -eq 1 ]; then while :; do sleep 0.1; done; else sleep 1; fi"
        ),
    ]);
    let first = c.until(30, "the job running on n0 and n1", || {
        let a = std::fs::read_to_string(c.dir.join(format!("{job}.0"))).ok()?;
        let b = std::fs::read_to_string(c.dir.join(format!("{job}.1"))).ok()?;
        Some((a.trim().to_string(), b.trim().to_string()))
    });
    assert_eq!((first.0.as_str(), first.1.as_str()), ("n0", "n1"));
    let n0 = c.pid(c.state.nm_pid_file("n0"));
    signal(&n0, "STOP");
    let end = c.until(30, "the requeued job ended", || {
        c.state_of(job)
            .filter(|s| !["queued", "running", "suspended"].contains(&s.as_str()))
    });
    signal(&n0, "CONT");
    assert_eq!(end, "completed", "\n--- mm log ---\n{}", c.mm_log());
}
