//! No job stuck or lost across machine-manager restarts and node
//! rejoins, and no overflow from a huge time limit. Real daemons on loopback, each test in its
//! own state directory; daemons are torn down even when a test fails (the guards' Drop).
//! Every wait polls for a condition with a generous deadline: the machine is small and shared.

mod support;
use support::cluster::{Cluster, signal};
use support::*;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// Lines of the marker files the ranks of job `id` wrote (one line per rank start).
fn starts(marks: &std::path::Path, id: u64) -> usize {
    std::fs::read_dir(marks)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{id}."))
                })
                .map(|e| std::fs::read_to_string(e.path()).unwrap().lines().count())
                .sum()
        })
        .unwrap_or(0)
}

/// Ranks that exit while the machine manager is down are reported when it comes
/// back (in the node's registration or up the tree once it has a parent), so every job ends
/// with the right outcome, and the queue moves on.
#[test]
fn ranks_that_exit_while_the_mm_is_down_end_their_jobs_after_its_restart() {
    let c = Cluster::up(
        "trust",
        "mmdown",
        &["--nodes", "2", "--pes", "2", "--heartbeat", "100ms"],
    );
    // The 1-s ranks leave a marker as they exit.
    let marks = c.dir.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let done = format!("touch {}/$COSCHED_JOB_ID.$COSCHED_RANK", marks.display());
    let ok = c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!("sleep 1; echo a; {done}"),
    ]);
    let bad = c.submit(&[
        "-n",
        "1",
        "--",
        "sh",
        "-c",
        &format!("sleep 1; {done}; exit 3"),
    ]);
    // One rank ends while the MM is down, the other after it is back.
    let split = c.submit(&[
        "-n",
        "2",
        "--",
        "sh",
        "-c",
        &format!("if [ $COSCHED_RANK = 0 ]; then sleep 1; {done}; else sleep 5; fi"),
    ]);
    let queued = c.submit(&["-n", "4", "--", "echo", "after"]);
    for id in [ok, bad, split] {
        c.until(20, "jobs running", || {
            (c.state_of(id).as_deref() == Some("running")).then_some(())
        });
    }
    let addr = c.state.addr().unwrap();
    signal(&c.pid(c.state.mm_pid_file()), "KILL");
    // The 1-s ranks exit while nobody listens.
    c.until(20, "the 1-s ranks done", || {
        (std::fs::read_dir(&marks).ok()?.count() == 3).then_some(())
    });
    c.restart_mm(&addr);
    let ended = c.until(60, "every job ended", || {
        let out = c.run(&["acct", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let jobs = v["jobs"].as_array()?.clone();
        jobs.iter()
            .all(|j| !["queued", "running", "suspended"].contains(&j["state"].as_str().unwrap()))
            .then_some(jobs)
    });
    let by_id = |id: u64| ended.iter().find(|j| j["id"] == id).unwrap().clone();
    assert_eq!(by_id(ok)["state"], "completed", "{}", by_id(ok));
    assert_eq!(c.ok(&["output", &ok.to_string()]).trim(), "a");
    let b = by_id(bad);
    assert_eq!(
        (b["state"].as_str(), b["exit_code"].as_i64()),
        (Some("failed"), Some(3)),
        "{b}"
    );
    assert_eq!(by_id(split)["state"], "completed", "{}", by_id(split));
    assert_eq!(by_id(queued)["state"], "completed", "{}", by_id(queued));
    // New work runs on both nodes.
    let next = c.submit(&["-n", "4", "--", "true"]);
    c.ok(&["wait", &next.to_string(), "--timeout", "30s"]);
}

/// A node manager paused for 3 s (declared down meanwhile, after 2 s, and fenced
/// when it returns), one killed and restarted, and a machine manager killed and restarted:
/// the nodes come back into the tree before anything is sent to them; every job submitted
/// around those events ends exactly once (ranks leave a marker per start), none stays stuck,
/// and jobs needing both nodes run afterwards.
#[test]
fn paused_and_restarted_node_managers_lose_no_launch() {
    let c = Cluster::up(
        "trust",
        "rejoin",
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
            "2s",
        ],
    );
    let marks = c.dir.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let script = format!(
        "echo $COSCHED_NODE >> {}/$COSCHED_JOB_ID.$COSCHED_RANK; sleep 0.3",
        marks.display()
    );
    let job = |c: &Cluster, n: &str| c.submit(&["-n", n, "--", "sh", "-c", &script]);
    let mut ids = Vec::new();
    // A backlog, so that launches are due the moment a node comes back.
    for _ in 0..6 {
        ids.push(job(&c, "2"));
    }
    let victim = c.pid(c.state.nm_pid_file("n1"));
    signal(&victim, "STOP");
    for _ in 0..6 {
        ids.push(job(&c, "1"));
        std::thread::sleep(Duration::from_millis(250));
    }
    ids.push(job(&c, "4"));
    std::thread::sleep(Duration::from_millis(1500));
    signal(&victim, "CONT");
    for _ in 0..4 {
        ids.push(job(&c, "2"));
    }
    // Wait until n1 is back, then kill and restart it with work queued.
    c.until(30, "n1 back after SIGCONT", || {
        (c.nodes_up() == 2).then_some(())
    });
    for _ in 0..4 {
        ids.push(job(&c, "2"));
    }
    signal(&c.pid(c.state.nm_pid_file("n1")), "KILL");
    std::thread::sleep(Duration::from_millis(100));
    c.restart_nm(1, 2);
    for _ in 0..4 {
        ids.push(job(&c, "1"));
    }
    ids.push(job(&c, "4"));
    // And the machine manager killed and restarted with work running and queued.
    c.until(30, "n1 back after its restart", || {
        (c.nodes_up() == 2).then_some(())
    });
    for _ in 0..4 {
        ids.push(job(&c, "2"));
    }
    let addr = c.state.addr().unwrap();
    signal(&c.pid(c.state.mm_pid_file()), "KILL");
    std::thread::sleep(Duration::from_millis(700));
    c.restart_mm(&addr);
    c.until(30, "the MM answers again", || {
        c.run(&["status"]).status.success().then_some(())
    });
    for _ in 0..4 {
        ids.push(job(&c, "1"));
    }
    let jobs = c.until(90, "every job ended", || {
        let out = c.run(&["acct", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let jobs = v["jobs"].as_array()?.clone();
        jobs.iter()
            .all(|j| !["queued", "running", "suspended"].contains(&j["state"].as_str().unwrap()))
            .then_some(jobs)
    });
    assert_eq!(jobs.len(), ids.len());
    let mut completed = 0;
    for j in &jobs {
        let id = j["id"].as_u64().unwrap();
        let procs = j["procs"].as_u64().unwrap() as usize;
        let n = starts(&marks, id);
        match j["state"].as_str().unwrap() {
            "completed" => {
                completed += 1;
                assert_eq!(n, procs, "a completed job started each rank once: {j}");
            }
            // Lost with a node: it may have started, never twice, and it says why.
            "node_failed" | "failed" => {
                assert!(n <= procs, "{j}");
                assert!(j["error"].as_str().is_some_and(|e| !e.is_empty()), "{j}");
            }
            other => panic!("job {id} ended {other}: {j}"),
        }
    }
    assert!(completed >= ids.len() / 2, "most jobs completed: {jobs:?}");
    c.until(30, "both nodes up", || (c.nodes_up() == 2).then_some(()));
    let both = c.submit(&["-n", "4", "--", "true"]);
    c.ok(&["wait", &both.to_string(), "--timeout", "30s"]);
}

/// A time limit of ~292,000 years overflowed the machine manager's wake-up
/// computation. `submit` refuses a limit beyond the maximum before sending anything, with
/// the bound in the message (the machine manager checks it again, see the core's tests).
#[test]
fn submit_refuses_a_time_limit_beyond_the_maximum() {
    let dir = std::env::temp_dir().join(format!("cosched-trust-time-{}", std::process::id()));
    // A limit beyond the clock's range is refused as too large (not saturated to i64::MAX µs
    // and shown as such); one beyond a year by the machine manager's maximum.
    for (time, refusal) in [
        ("300000000d", Some("too large")),
        ("367d", Some("at most 366 days")),
        ("366d", None),
    ] {
        let out = Command::new(bin())
            .args(["submit", "-n", "1", "--time", time, "--", "true"])
            .env("COSCHED_STATE_DIR", &dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{time}: no cluster, yet it succeeded"
        );
        // An accepted limit gets as far as looking for the machine manager.
        match refusal {
            Some(why) => assert!(err.contains(why) && err.contains(time), "{time}: {err}"),
            None => assert!(
                !err.contains("at most") && !err.contains("too large"),
                "{time}: {err}"
            ),
        }
    }
}

/// The machine manager of an embedded cluster, killed and restarted with the very
/// command line `cluster up` gave it (`--listen 127.0.0.1:0`), listens again on the port
/// recorded in the state directory, so its node managers come back and jobs run.
#[test]
fn an_embedded_mm_restarted_with_its_own_command_line_gets_its_nodes_back() {
    let c = Cluster::up(
        "trust",
        "relisten",
        &["--nodes", "2", "--pes", "1", "--heartbeat", "100ms"],
    );
    let first = c.submit(&["-n", "2", "--", "true"]);
    c.ok(&["wait", &first.to_string(), "--timeout", "30s"]);
    let addr = c.state.addr().unwrap();
    signal(&c.pid(c.state.mm_pid_file()), "KILL");
    std::thread::sleep(Duration::from_millis(200));
    c.restart_mm("127.0.0.1:0");
    c.until(30, "both nodes back", || (c.nodes_up() == 2).then_some(()));
    assert_eq!(c.state.addr().unwrap(), addr, "{}", c.mm_log());
    let next = c.submit(&["-n", "2", "--", "true"]);
    c.ok(&["wait", &next.to_string(), "--timeout", "30s"]);
}
