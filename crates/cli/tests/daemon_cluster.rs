//! End-to-end tests of the resource manager: real daemons (`cosched cluster up`) on loopback,
//! real processes. Each test has its own state directory and ephemeral ports, and tears its
//! daemons down even when it fails (the guard's Drop).

mod support;
use support::*;

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::cluster::{Cluster, signal};

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn hundred_short_jobs_complete_with_their_output() {
    let c = Cluster::up("test", "hundred", &["--nodes", "2", "--pes", "2"]);
    let ids: Vec<u64> = (0..100)
        .map(|i| {
            c.submit(&[
                "-n",
                "1",
                "--",
                "sh",
                "-c",
                &format!("echo job{i} $COSCHED_JOB_ID $COSCHED_RANK/$COSCHED_SIZE"),
            ])
        })
        .collect();
    let mut wait = vec!["wait", "--timeout", "60s"];
    let strs: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    wait.extend(strs.iter().map(String::as_str));
    c.ok(&wait);
    for (i, id) in ids.iter().enumerate() {
        let out = c.ok(&["output", &id.to_string()]);
        assert_eq!(out.trim(), format!("job{i} {id} 0/1"));
    }
    let acct = c.json(&["acct", "--json"]);
    let jobs = acct["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 100);
    for j in jobs {
        assert_eq!(j["state"], "completed", "{j}");
        assert_eq!(j["exit_code"], 0);
        assert!(f(&j["end"]) >= f(&j["start"]) && f(&j["start"]) >= f(&j["submit"]));
    }
}

#[test]
fn ranks_get_their_environment_and_bad_input_is_refused() {
    let c = Cluster::up("test", "env", &["--nodes", "2", "--pes", "2"]);
    let id = c.submit(&[
        "-n",
        "4",
        "--name",
        "envtest",
        "--",
        "sh",
        "-c",
        "echo $COSCHED_RANK $COSCHED_SIZE $COSCHED_NODE; echo err$COSCHED_RANK >&2",
    ]);
    c.ok(&["wait", &id.to_string()]);
    let mut nodes = Vec::new();
    for rank in 0..4 {
        let out = c.run(&["output", &id.to_string(), "--rank", &rank.to_string()]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(&words[..2], &[rank.to_string().as_str(), "4"], "{text}");
        nodes.push(words[2].to_string());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            format!("err{rank}")
        );
    }
    assert_eq!(nodes[0], nodes[1]);
    assert_ne!(nodes[1], nodes[2], "ranks 2-3 are on the second node");

    // Too many PEs: refused at submit, with the size of the machine in the message.
    let out = c.run(&["submit", "-n", "5", "--", "true"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only 4"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Unknown job id: clear error, non-zero exit, for every command taking an id.
    for cmd in [
        &["wait", "999"][..],
        &["cancel", "999"],
        &["output", "999"],
        &["suspend", "999"],
    ] {
        let out = c.run(cmd);
        assert!(!out.status.success(), "{cmd:?} succeeded");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("unknown job id 999"),
            "{cmd:?}"
        );
    }

    // A command that cannot run: the job fails with the launch error; the cluster continues.
    let bad = c.submit(&["-n", "2", "--", "/no/such/program"]);
    let out = c.run(&["wait", &bad.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let j = c.job(bad);
    assert_eq!(j["state"], "failed");
    assert!(
        j["error"].as_str().unwrap().contains("cannot launch"),
        "{j}"
    );
    assert!(c.ok(&["queue"]).contains("cannot launch"));
    let good = c.submit(&["-n", "1", "--", "true"]);
    c.ok(&["wait", &good.to_string()]);

    // A rank that fails makes the job fail with its exit code.
    let fails = c.submit(&["-n", "2", "--", "sh", "-c", "exit $((COSCHED_RANK * 3))"]);
    assert_eq!(c.run(&["wait", &fails.to_string()]).status.code(), Some(1));
    assert_eq!(c.job(fails)["exit_code"], 3);

    // SWF export of the run.
    let swf = c.dir.join("run.swf");
    c.ok(&["acct", "--swf-out", swf.to_str().unwrap()]);
    let text = std::fs::read_to_string(&swf).unwrap();
    assert_eq!(text.lines().filter(|l| !l.starts_with(';')).count(), 4);
    assert!(
        text.lines()
            .all(|l| l.starts_with(';') || l.split_whitespace().count() == 18)
    );
}

#[test]
fn cancel_suspend_resume_and_time_limits_count_run_time_only() {
    let c = Cluster::up("test", "limits", &["--nodes", "1", "--pes", "2"]);
    // Runs out of its 0.5 s limit.
    let over = c.submit(&["-n", "1", "--time", "500ms", "--", "sleep", "20"]);
    // Sleeps 1 s under a 2 s limit but is suspended for 2.5 s on the way: the wall time
    // exceeds the limit, the run time does not (its timer expires while it is stopped).
    let fits = c.submit(&["-n", "1", "--time", "2s", "--", "sleep", "1"]);
    c.job_until(fits, 30, |j| j["state"] == "running");
    c.ok(&["suspend", &fits.to_string()]);
    assert_eq!(c.job(fits)["state"], "suspended");
    assert!(c.ok(&["queue"]).contains("suspended(held)"));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        c.job(fits)["state"],
        "suspended",
        "a held job stays stopped"
    );
    c.ok(&["resume", &fits.to_string()]);
    let out = c.run(&[
        "wait",
        &over.to_string(),
        &fits.to_string(),
        "--timeout",
        "30s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the timed-out job makes wait fail"
    );
    let o = c.job(over);
    assert_eq!(o["state"], "timed_out", "{o}");
    assert!(o["error"].as_str().unwrap().contains("time limit"));
    let j = c.job(fits);
    assert_eq!(j["state"], "completed", "{j}");
    assert!(f(&j["suspended_s"]) >= 2.4, "{j}");
    assert!(f(&j["run_s"]) < 2.0, "{j}");
    assert!(f(&j["end"]) - f(&j["start"]) > 2.4, "{j}");

    let long = c.submit(&["-n", "2", "--", "sleep", "30"]);
    c.job_until(long, 30, |j| j["state"] == "running");
    c.ok(&["cancel", &long.to_string()]);
    let j = c.job_until(long, 30, |j| j["state"] != "running");
    assert_eq!(j["state"], "cancelled");
}

fn gang_pair(policy: &[&str]) -> (Value, Value) {
    let c = Cluster::up(
        "test",
        policy[1],
        &[&["--nodes", "1", "--pes", "2"], policy].concat(),
    );
    // Ranks that burn 1 s of CPU time (not wall time), so time-slicing stretches them.
    let a = c.submit(&["-n", "2", "--", bin(), "cluster", "spin", "1s"]);
    let b = c.submit(&["-n", "2", "--", bin(), "cluster", "spin", "1s"]);
    c.ok(&["wait", &a.to_string(), &b.to_string(), "--timeout", "60s"]);
    (c.job(a), c.job(b))
}

#[test]
fn gang_runs_two_jobs_at_once_and_fcfs_serialises_them() {
    let (a, b) = gang_pair(&["--policy", "gang", "--mpl", "2", "--quantum", "50ms"]);
    for j in [&a, &b] {
        assert_eq!(j["state"], "completed", "{j}");
        assert!(
            f(&j["start"]) - f(&j["submit"]) < 0.5,
            "both start at once under gang: {j}"
        );
        assert!(
            f(&j["end"]) - f(&j["start"]) >= 1.6,
            "each takes about twice its 1 s of CPU: {j}"
        );
        assert!(f(&j["suspended_s"]) >= 0.5, "time-sliced: {j}");
    }
    let (a, b) = gang_pair(&["--policy", "fcfs"]);
    assert!(
        f(&b["start"]) >= f(&a["end"]) - 0.05,
        "under fcfs the second waits for the first: {a} {b}"
    );
    assert!(f(&a["suspended_s"]) == 0.0 && f(&b["suspended_s"]) == 0.0);
}

#[test]
fn a_killed_node_manager_is_detected_and_its_job_fails() {
    // Down after 3 s of silence: long enough for a loaded machine, short for a test.
    let c = Cluster::up(
        "test",
        "nmkill",
        &[
            "--nodes",
            "2",
            "--pes",
            "1",
            "--suspect-after",
            "1s",
            "--down-after",
            "3s",
        ],
    );
    let id = c.submit(&["-n", "2", "--", "sleep", "60"]);
    c.job_until(id, 30, |j| j["state"] == "running");
    let victim = c.pid(c.state.nm_pid_file("n1"));
    let killed_at = Instant::now();
    signal(&victim, "KILL");
    let j = c.job_until(id, 30, |j| j["state"] != "running");
    eprintln!("job ended {:?} after the kill", killed_at.elapsed());
    assert_eq!(j["state"], "node_failed", "{j}");
    let st = c.json(&["status", "--json"]);
    let states: Vec<&str> = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.iter().filter(|s| **s == "down").count(), 1, "{st}");
    assert_eq!(states.iter().filter(|s| **s == "up").count(), 1, "{st}");
    // The cluster keeps serving on the surviving node; a 2-PE job cannot fit, a 1-PE one can.
    let next = c.submit(&["-n", "1", "--", "true"]);
    c.ok(&["wait", &next.to_string(), "--timeout", "30s"]);
}

/// The node does not come back: its old run counts as gone `--down-after` after the node
/// was declared down, and the job runs again on the survivor.
#[test]
fn with_requeue_a_job_lost_with_its_node_runs_again_elsewhere() {
    let c = Cluster::up(
        "test",
        "requeue",
        &[
            "--nodes",
            "2",
            "--pes",
            "1",
            "--suspect-after",
            "1s",
            "--down-after",
            "3s",
            "--requeue",
        ],
    );
    let id = c.submit(&["-n", "1", "--", "sh", "-c", "sleep 1; echo $COSCHED_NODE"]);
    let j = c.job_until(id, 30, |j| j["state"] == "running");
    let node: u64 = j["pes"].as_str().unwrap().parse().unwrap();
    let st = c.json(&["status", "--json"]);
    let name = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == node)
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    signal(&c.pid(c.state.nm_pid_file(&name)), "KILL");
    c.ok(&["wait", &id.to_string(), "--timeout", "60s"]);
    let j = c.job(id);
    assert_eq!(j["state"], "completed", "{j}");
    assert!(
        j["error"].as_str().unwrap_or("").contains("requeued"),
        "{j}"
    );
    let ran_on = c.ok(&["output", &id.to_string()]).trim().to_string();
    assert_ne!(ran_on, name, "it ran again on the surviving node");
}

#[test]
fn the_tree_repairs_itself_when_an_interior_node_manager_dies() {
    // Fan-out 2 over 5 nodes: node 0 (position 1) is the parent of positions 3 and 4.
    let c = Cluster::up(
        "test",
        "tree",
        &[
            "--nodes",
            "5",
            "--pes",
            "1",
            "--fanout",
            "2",
            "--suspect-after",
            "1s",
            "--down-after",
            "3s",
        ],
    );
    let st = c.json(&["status", "--json"]);
    assert_eq!(st["tree_depth"], 2, "{st}");
    let all = c.submit(&["-n", "5", "--", "sh", "-c", "echo $COSCHED_RANK"]);
    c.ok(&["wait", &all.to_string(), "--timeout", "20s"]);
    let interior = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == 0)
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    signal(&c.pid(c.state.nm_pid_file(&interior)), "KILL");
    let start = Instant::now();
    loop {
        let st = c.json(&["status", "--json"]);
        let up = st["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["state"] == "up")
            .count();
        if up == 4 && st["nodes"][0]["state"] == "down" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "tree not repaired: {st}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The orphans of the dead node were re-parented: a job on all four survivors runs.
    let four = c.submit(&["-n", "4", "--", "sh", "-c", "echo $COSCHED_NODE"]);
    c.ok(&["wait", &four.to_string(), "--timeout", "20s"]);
    let mut seen: Vec<String> = (0..4)
        .map(|r| {
            c.ok(&["output", &four.to_string(), "--rank", &r.to_string()])
                .trim()
                .to_string()
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4);
    assert!(!seen.contains(&interior));
}

#[test]
fn a_killed_and_restarted_machine_manager_loses_no_record() {
    let c = Cluster::up(
        "test",
        "mmkill",
        &["--nodes", "1", "--pes", "1", "--heartbeat", "100ms"],
    );
    let done = c.submit(&["-n", "1", "--", "true"]);
    c.ok(&["wait", &done.to_string()]);
    let survivor = c.submit(&["-n", "1", "--", "sh", "-c", "sleep 2; echo survived"]);
    let queued = c.submit(&["-n", "1", "--", "echo", "after"]);
    c.job_until(survivor, 30, |j| j["state"] == "running");
    let addr = c.state.addr().unwrap();
    signal(&c.pid(c.state.mm_pid_file()), "KILL");
    std::thread::sleep(Duration::from_millis(300));
    c.restart_mm(&addr);
    c.until(10, "the restarted MM answering", || {
        (c.run(&["status"]).status.code() == Some(0)).then_some(())
    });
    let out = c.run(&[
        "wait",
        &done.to_string(),
        &survivor.to_string(),
        &queued.to_string(),
        "--timeout",
        "20s",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        c.mm_log()
    );
    assert_eq!(c.ok(&["output", &survivor.to_string()]).trim(), "survived");
    assert_eq!(c.ok(&["output", &queued.to_string()]).trim(), "after");
    assert_eq!(
        c.json(&["acct", "--json"])["jobs"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(c.mm_log().contains("recovered 3 jobs"), "{}", c.mm_log());
}

#[test]
fn garbage_sent_to_the_machine_manager_is_dropped_while_jobs_continue() {
    let c = Cluster::up("test", "garbage", &["--nodes", "1", "--pes", "1"]);
    let long = c.submit(&["-n", "1", "--", "sh", "-c", "sleep 1; echo fine"]);
    let addr = c.state.addr().unwrap();
    // Raw garbage, an HTTP request, and a well-formed frame signed with another key.
    let frames: Vec<Vec<u8>> = vec![
        (0..200u32).map(|i| (i * 37 % 251) as u8).collect(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        {
            let mut v = vec![0, 0, 0, 40];
            v.extend_from_slice(&[0xAB; 40]);
            v
        },
    ];
    for bytes in &frames {
        // The MM may drop the connection while we are still writing: errors are expected.
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = std::io::Read::read_to_end(&mut s, &mut Vec::new());
    }
    let other = c.dir.join("other.key");
    std::fs::write(&other, "11".repeat(32)).unwrap();
    let out = c.run(&["status", "--key-file", other.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "a client with the wrong key is refused"
    );
    c.ok(&["wait", &long.to_string(), "--timeout", "20s"]);
    assert_eq!(c.ok(&["output", &long.to_string()]).trim(), "fine");
    let next = c.submit(&["-n", "1", "--", "true"]);
    c.ok(&["wait", &next.to_string()]);
    let log = c.mm_log();
    assert!(log.matches("dropping peer").count() >= 3, "{log}");
    assert!(log.contains("authentication failed"), "{log}");
}

/// A cluster brought down and up again in the same state directory keeps its
/// accounting and continues the job ids; jobs live at `down` keep the record the shutdown
/// wrote; a machine of another shape keeps it too.
#[test]
fn history_survives_cluster_down_and_up() {
    let shape = ["--nodes", "2", "--pes", "1"];
    let c = Cluster::up("test", "history", &shape);
    let first = c.submit(&["-n", "1", "--", "echo", "first"]);
    let second = c.submit(&["-n", "2", "--", "sh", "-c", "exit 3"]);
    assert_eq!((first, second), (1, 2));
    c.job_until(first, 30, |j| j["state"] == "completed");
    c.job_until(second, 30, |j| j["state"] == "failed");
    let before = c.json(&["acct", "--json"])["jobs"].clone();
    c.ok(&["cluster", "down"]);
    assert!(c.state.db_file().is_file(), "down removed the history");

    // Another shape: the machine takes it, and the history stays.
    c.up_again(&["--nodes", "3", "--pes", "2"]);
    assert_eq!(c.json(&["acct", "--json"])["jobs"], before);
    let st = c.json(&["status", "--json"]);
    assert_eq!(
        (st["nodes_total"].as_u64(), st["pes_per_node"].as_u64()),
        (Some(3), Some(2))
    );
    c.ok(&["cluster", "down"]);

    c.up_again(&shape);
    let third = c.submit(&["-n", "1", "--", "true"]);
    assert_eq!(third, 3, "job ids restarted");
    c.ok(&["wait", "3"]);
    let jobs = c.json(&["acct", "--json"])["jobs"].clone();
    let ids: Vec<u64> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![1, 2, 3]);
    // The old records are exactly what they were, and the old output is still there.
    assert_eq!(jobs[0], before[0]);
    assert_eq!(jobs[1], before[1]);
    assert_eq!(jobs[1]["exit_code"], 3);
    assert_eq!(c.ok(&["output", "1"]).trim(), "first");
    let queue = c.json(&["queue", "--all", "--json"]);
    assert_eq!(queue["jobs"].as_array().unwrap().len(), 3);

    // A job still running at `down` keeps the shutdown's record across the next `up`.
    let live = c.submit(&["-n", "1", "--", "sleep", "60"]);
    c.job_until(live, 30, |j| j["state"] == "running");
    c.ok(&["cluster", "down"]);
    c.up_again(&shape);
    let j = c.job(live);
    assert_eq!(j["state"], "cancelled", "{j}");
    assert_eq!(j["error"], "the cluster was shut down", "{j}");
    assert!(j["end"].as_f64().is_some(), "{j}");
    assert_eq!(c.submit(&["-n", "1", "--", "true"]), live + 1);
}

/// `cluster up` takes the policy options of `cosched sim` and passes them to the machine
/// manager: a T3D configuration file is honoured on the real cluster, and a bad option is
/// refused by `cluster up` itself.
#[test]
fn cluster_up_honours_the_policy_configuration_file_and_refuses_bad_options() {
    let dir = std::env::temp_dir().join(format!("cosched-t3d-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("t3d.toml");
    std::fs::write(&conf, "[policy]\njob_limit = 2\n").unwrap();
    let conf_arg = conf.to_str().unwrap();
    let c = Cluster::up(
        "test",
        "t3dconf",
        &[
            "--nodes",
            "1",
            "--pes",
            "4",
            "--policy",
            "t3d",
            "--policy-config",
            conf_arg,
        ],
    );
    let small = c.submit(&["-n", "2", "--", "true"]);
    let big = c.submit(&["-n", "4", "--", "true"]);
    let j = c.job_until(big, 30, |j| j["state"] != "queued");
    assert_eq!(j["state"], "rejected", "{j}");
    assert!(
        j["error"].as_str().unwrap_or("").contains("job_limit = 2"),
        "{j}"
    );
    c.job_until(small, 30, |j| j["state"] == "completed");
    drop(c);

    // Refused before any daemon starts, with the policy's own message.
    let bad = Cluster::up("test", "t3dbad", &["--nodes", "1", "--pes", "1"]);
    bad.ok(&["cluster", "down"]);
    for (args, says) in [
        (
            vec!["--policy", "t3d", "--opt", "swap_per_pe=soon"],
            "swap_per_pe",
        ),
        (vec!["--policy", "t3d", "--opt", "nokey"], "KEY=VALUE"),
        (
            vec![
                "--policy",
                "t3d",
                "--policy-config",
                "/nonexistent/t3d.toml",
            ],
            "/nonexistent/t3d.toml",
        ),
    ] {
        let mut full = vec!["cluster", "up", "--nodes", "1", "--pes", "1"];
        full.extend(args.iter().copied());
        let out = bad.run(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(bad.state.live_mm().is_none(), "{args:?} started a daemon");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `acct` is built from the ledger's records: its SWF export (through the workload crate's
/// writer, with the machine in its header) reads back with `workload info`, and it prints the
/// summary `cosched sim` prints, a job's runtime being the time it ran.
#[test]
fn acct_exports_swf_that_reads_back_and_summarises_like_sim() {
    let c = Cluster::up("test", "acctswf", &["--nodes", "2", "--pes", "1"]);
    let ids: Vec<String> = [
        vec!["-n", "1", "--", "sleep", "0.3"],
        vec!["-n", "2", "--", "true"],
        vec!["-n", "1", "--", "true"],
    ]
    .iter()
    .map(|a| c.submit(a).to_string())
    .collect();
    let mut wait = vec!["wait"];
    wait.extend(ids.iter().map(String::as_str));
    c.ok(&wait);
    let swf = c.dir.join("run.swf");
    let text = c.ok(&["acct", "--swf-out", swf.to_str().unwrap()]);
    for line in [
        "mean wait",
        "mean bounded sld",
        "utilization",
        "2 nodes x 1 PEs",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let info = c.ok(&["workload", "info", swf.to_str().unwrap()]);
    assert!(info.contains('3'), "{info}");
    let v = c.json(&["acct", "--json"]);
    assert_eq!(v["summary"]["jobs"], 3, "{v}");
    // The first job slept 0.3 s: its runtime is at least that, and it is what ran.
    let first = &v["jobs"][0];
    assert!(first["run_s"].as_f64().unwrap() >= 0.3, "{first}");
}
