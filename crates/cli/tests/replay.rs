//! `cosched replay` and `cosched compare` end to end, on a loopback
//! cluster: 50 jobs of a trace replayed, heavily compressed, complete, and `compare` against
//! `sim` of the very jobs replayed reports every one of them; a replay killed half way and
//! resumed with its state file submits each job exactly once.

mod support;
use support::cluster::Cluster;
use support::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cosched_workload::swf::{ReadOptions, read_trace};
use serde_json::Value;

/// The first 50 jobs of KTH-SP2 (cut with `workload transform`), or, without the shared
/// traces, 50 generated Lublin–Feitelson jobs (said so in a notice).
fn fifty_jobs(dir: &Path) -> PathBuf {
    let out = dir.join("fifty.swf");
    let path = out.to_str().unwrap();
    let args: Vec<String> = match cosched_workload::shared::trace(
        "KTH-SP2-1996-2.1-cln.swf.gz",
        "the replay of KTH-SP2's first 50 jobs (a generated workload is replayed instead)",
    ) {
        Some(kth) => ["workload", "transform", kth.to_str().unwrap(), "-o", path]
            .iter()
            .map(|s| s.to_string())
            .chain(["--first".into(), "50".into()])
            .collect(),
        None => [
            "workload", "gen", "--model", "lublin", "--jobs", "50", "--procs", "64", "--seed", "3",
            "-o", path,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(&args, cosched(dir, &args), "");
    out
}

/// The compression that fits the whole trace (first submit to last end) into `secs` seconds.
fn compress_to(trace: &Path, secs: f64) -> f64 {
    let t = read_trace(trace, &ReadOptions::default()).unwrap();
    let first = t
        .records
        .iter()
        .filter_map(|r| Some(r.submit?.as_secs_f64()))
        .fold(f64::INFINITY, f64::min);
    let last = t
        .records
        .iter()
        .filter_map(|r| Some(r.submit?.as_secs_f64() + r.run?.as_secs_f64()))
        .fold(0.0, f64::max);
    ((last - first) / secs).max(1.0)
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn fifty_jobs_replayed_complete_and_compare_with_sim_reports_every_job() {
    let c = Cluster::up(
        "replay",
        "fifty",
        &["--nodes", "4", "--pes", "2", "--policy", "easy"],
    );
    let d = c.dir.clone();
    let file = |n: &str| d.join(n).to_str().unwrap().to_string();
    let trace = fifty_jobs(&c.dir);
    let f = format!("{}", compress_to(&trace, 12.0));
    let started = Instant::now();
    // The replay lasts as long as the trace's first submit to last end, compressed.
    let out = c.ok(&[
        "replay",
        trace.to_str().unwrap(),
        "--compress",
        &f,
        "--scale-sizes",
        "--burn",
        "sleep",
        "--state",
        &file("state"),
        "--trace-out",
        &file("replayed.swf"),
        "--swf-out",
        &file("real.swf"),
        "--json",
    ]);
    let r = json(&out);
    assert_eq!(r["jobs"], 50, "{out}");
    assert_eq!(r["states"]["completed"], 50, "{out}");
    assert!(
        (Duration::from_secs(11)..Duration::from_secs(45)).contains(&started.elapsed()),
        "compressed to 12 s, the replay took {:?}",
        started.elapsed()
    );

    // The same jobs simulated under the same policy.
    c.ok(&[
        "sim",
        "--trace",
        &file("replayed.swf"),
        "--policy",
        "easy",
        "--swf-out",
        &file("sim.swf"),
    ]);
    let out = c.ok(&[
        "compare",
        &file("sim.swf"),
        &file("real.swf"),
        "--json",
        "--out-csv",
        &file("cmp.csv"),
        "--plot",
        &file("cmp.svg"),
    ]);
    let cmp = json(&out);
    assert_eq!(cmp["matched"], 50, "{out}");
    assert_eq!(cmp["rows"].as_array().unwrap().len(), 50);
    assert_eq!(cmp["only_a"].as_array().unwrap().len(), 0, "{out}");
    assert_eq!(cmp["only_b"].as_array().unwrap().len(), 0, "{out}");
    assert_eq!(cmp["d_start"]["n"], 50, "every job started on both sides");
    // A real start lags the simulated one by the submit lag and the launch, not by more
    // than the whole (12 s) replay.
    let max = cmp["d_start"]["max_abs"].as_f64().unwrap();
    assert!(max < 12.0, "|Δstart| up to {max} s");
    let csv = std::fs::read_to_string(file("cmp.csv")).unwrap();
    // Provenance lines (`# key: value`), then the header and one row per job.
    assert!(csv.starts_with("# generator: cosched"), "{csv}");
    let table: Vec<&str> = csv.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(table.len(), 51, "{csv}");
    assert!(
        table[1..]
            .iter()
            .all(|l| l.split(',').nth(1) == Some("both"))
    );
    let svg = std::fs::read_to_string(file("cmp.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("50 jobs"), "{svg}");

    // acct's export has cluster ids: the replay's state file maps them back.
    c.ok(&["acct", "--swf-out", &file("acct.swf")]);
    let out = c.ok(&[
        "compare",
        &file("sim.swf"),
        &file("acct.swf"),
        "--map",
        &file("state"),
        "--json",
    ]);
    assert_eq!(json(&out)["matched"], 50, "{out}");
}

/// A hand-made trace: `n` one-to-four-PE jobs, one every 0.25 s, each running 0.2 s.
fn steady_trace(path: &Path, n: u64) {
    let mut s = String::from("; MaxProcs: 8\n");
    for i in 1..=n {
        s += &format!(
            "{i} {} -1 0.2 {} -1 -1 {} 1 -1 1 -1 -1 -1 -1 -1 -1 -1\n",
            (i - 1) as f64 * 0.25,
            1 + i % 4,
            1 + i % 4
        );
    }
    std::fs::write(path, s).unwrap();
}

fn submitted(state: &Path) -> usize {
    std::fs::read_to_string(state)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"job\":") && !l.contains("\"job\":null"))
        .count()
}

#[test]
fn a_resumed_replay_submits_no_job_twice() {
    let c = Cluster::up("replay", "resume", &["--nodes", "4", "--pes", "2"]);
    let trace = c.dir.join("steady.swf");
    steady_trace(&trace, 30);
    let state = c.dir.join("state");
    let args = |compress: &str| -> Vec<String> {
        [
            "replay",
            trace.to_str().unwrap(),
            "--compress",
            compress,
            "--burn",
            "sleep",
            "--state",
            state.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut child = Command::new(bin())
        .args(args("1"))
        .env("COSCHED_STATE_DIR", &c.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    c.until(30, "8 jobs submitted by the first replay", || {
        (submitted(&state) >= 8).then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let first = submitted(&state);
    assert!(
        first < 30,
        "killed after all {first} submissions: too late to test a resume"
    );

    // Another replay's options on this state file are refused.
    let other: Vec<String> = args("2");
    let other: Vec<&str> = other.iter().map(String::as_str).collect();
    let out = c.run(&other);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the state of another replay"), "{err}");

    let again = args("1");
    let again: Vec<&str> = again.iter().map(String::as_str).collect();
    let out = c.ok(&again);
    // The jobs recorded before the kill, and perhaps the one whose submission the kill
    // cut off before it was recorded (adopted by name).
    let resumed: usize = out
        .split(" submitted before a resume")
        .next()
        .and_then(|h| h.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        resumed == first || resumed == first + 1,
        "{first} then {resumed}: {out}"
    );
    let acct = json(&c.ok(&["acct", "--json"]));
    let mut names: Vec<String> = acct["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(n, names.len(), "a trace job submitted twice: {names:?}");
    assert_eq!(n, 30, "every trace job submitted once: {names:?}");
    assert_eq!(submitted(&state), 30);
}

/// A replayed rank does not count the time it stood stopped (gang scheduling's SIGSTOP) as
/// work: stopped 0.7 s into a 1 s sleep burn, it ends about 1.7 s after its start, not 1 s.
#[test]
fn a_stopped_sleep_burner_does_not_count_the_stop() {
    let start = Instant::now();
    let mut child = Command::new(bin())
        .args(["burn", "--for", "1s", "--mode", "sleep"])
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    std::thread::sleep(Duration::from_millis(300));
    support::cluster::signal(&pid, "STOP");
    std::thread::sleep(Duration::from_millis(700));
    support::cluster::signal(&pid, "CONT");
    assert!(child.wait().unwrap().success());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1_600) && took < Duration::from_secs(5),
        "a 1 s burn stopped for 0.7 s took {took:?}"
    );
}

/// Under gang scheduling the node manager stops a job's ranks however it does it (the cgroup
/// freezer where it can, which sends no signal; SIGSTOP otherwise): two 1 s sleep burners
/// time-sharing one PE both run their 1 s and stand stopped for a good part of the other's,
/// and accounting books each the second it ran.
///
/// The bounds catch a quantum (0.2 s) booked on the wrong side either way: the first job's
/// run counted from its start across the policy's first stop, the second's time held after
/// its launch ahead of its slot booked as suspended, or a burner counting the other's slots
/// as work (about 0.5 s). With four CPU spinners beside the test, the runs booked were
/// 0.98–1.03 s.
#[test]
fn gang_suspended_sleep_burners_do_not_count_the_suspension() {
    let c = Cluster::up(
        "replay",
        "gang",
        &[
            "--nodes",
            "1",
            "--pes",
            "1",
            "--policy",
            "gang",
            "--quantum",
            "200ms",
        ],
    );
    let burn = [bin(), "burn", "--for", "1s", "--mode", "sleep"];
    let a = c.submit(&[&["-n", "1", "--"], &burn[..]].concat());
    let b = c.submit(&[&["-n", "1", "--"], &burn[..]].concat());
    c.ok(&["wait", &a.to_string(), &b.to_string()]);
    let acct = json(&c.ok(&["acct", "--json"]));
    for j in acct["jobs"].as_array().unwrap() {
        let (run, stopped) = (
            j["run_s"].as_f64().unwrap(),
            j["suspended_s"].as_f64().unwrap(),
        );
        assert!(
            (0.9..1.15).contains(&run) && stopped > 0.5,
            "job {}: ran {run} s, stopped {stopped} s",
            j["id"]
        );
    }
}

/// The liveness heartbeat of the forecast test's cluster: each job a waiting job queues
/// behind may put its start off by at most one period of the loop it paces (the job's end
/// reaching the machine manager, the next launch), as in `daemon_forecast.rs`.
const HEARTBEAT_S: f64 = 0.25;

/// `replay --forecast-log` on FCFS with time limits equal to the runtimes: one line per job,
/// and every job starts when the forecast at its submission said, within one heartbeat per
/// job submitted before it (under FCFS a later arrival never moves an earlier job, so the
/// forecast's "nothing new arrives" costs nothing).
#[test]
fn forecast_log_of_an_fcfs_replay_matches_the_actual_starts() {
    let c = Cluster::up(
        "replay",
        "fclog",
        &[
            "--nodes",
            "2",
            "--pes",
            "2",
            "--policy",
            "fcfs",
            "--heartbeat",
            "250ms",
            "--kill-wait",
            "1s",
        ],
    );
    c.until(30, "the nodes up", || (c.nodes_up() == 2).then_some(()));
    // 12 jobs of 1–3 PEs, one every 50 ms, each running 1 s with an estimate of 1 s.
    let trace = c.dir.join("twelve.swf");
    let mut s = String::from("; MaxProcs: 4\n");
    for i in 1..=12u64 {
        let (t, n) = ((i - 1) as f64 * 0.05, 1 + i % 3);
        s += &format!("{i} {t} -1 1 {n} -1 -1 {n} 1 -1 1 -1 -1 -1 -1 -1 -1 -1\n");
    }
    std::fs::write(&trace, s).unwrap();
    let log = c.dir.join("forecast.jsonl");
    // No slack: the limit is the runtime, so a job ends at its limit either way (killed at
    // it or just done), and `replay` may exit 1 for jobs ended as timed out.
    let out = c.run(&[
        "replay",
        trace.to_str().unwrap(),
        "--burn",
        "sleep",
        "--limit-slack",
        "0s",
        "--forecast-log",
        log.to_str().unwrap(),
        "--json",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let r = json(&text);
    assert_eq!(r["jobs"], 12, "{text}");
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(json)
        .collect();
    assert_eq!(lines.len(), 12, "one line per job: {lines:?}");
    let acct = json(&c.ok(&["acct", "--json"]));
    let start_of = |id: &Value| {
        acct["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == *id)
            .and_then(|j| j["start"].as_f64())
            .unwrap_or_else(|| panic!("job {id} never started: {acct}"))
    };
    let mut errors = Vec::new();
    for (k, l) in lines.iter().enumerate() {
        assert_eq!(l["trace_id"], k as u64 + 1, "in submission order: {l}");
        let expected = l["expected_start_us"]
            .as_f64()
            .unwrap_or_else(|| panic!("no forecast start: {l}"))
            / 1e6;
        let err = start_of(&l["job"]) - expected;
        let tol = k as f64 * HEARTBEAT_S + 1e-3;
        assert!(
            err.abs() <= tol,
            "trace job {}: started {err:+.3} s from its forecast (tolerance {tol:.2} s); log {lines:?}",
            k + 1
        );
        errors.push(err.abs());
    }
    // The summary is the same join.
    let fe = &r["forecast_error"];
    assert_eq!(fe["all"]["n"], 12, "{text}");
    assert_eq!(fe["unmatched"], 0, "{text}");
    let max = errors.iter().copied().fold(0.0, f64::max);
    let got = fe["all"]["max_abs"].as_f64().unwrap();
    assert!(
        (got - max).abs() < 1e-3,
        "summary max {got}, jobs' max {max}"
    );
    // The schedule is a real queue: most jobs were forecast to wait.
    assert!(fe["waited"]["n"].as_u64().unwrap() >= 6, "{text}");
}
