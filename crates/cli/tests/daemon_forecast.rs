//! `cosched queue --forecast` against what happens: a loopback FCFS cluster runs `sleep` jobs
//! whose time limits equal their runtimes, so the forecast (every job runs its limit) is the
//! schedule, up to the time it takes the cluster to end one job and start the next.

mod support;
use support::cluster::Cluster;

use serde_json::Value;

/// The liveness heartbeat of the test's cluster. A job's end reaches the machine manager
/// and the next job's launch leaves it within one period of the loop the heartbeat paces (in
/// practice within milliseconds), so each job a waiting job queues behind may put it off by
/// at most one period.
const HEARTBEAT_S: f64 = 0.25;

fn jobs(v: &Value) -> Vec<Value> {
    v["jobs"].as_array().cloned().unwrap_or_default()
}

/// FCFS on one node of 2 PEs: job 1 (2 PEs, 2 s) runs; jobs 2 (1 PE, 1 s) and 3 (1 PE, 2 s)
/// follow it side by side, job 4 (2 PEs, 1 s) waits for both, job 5 (1 PE, 1 s) comes last.
/// The forecast at submission gives starts 0, 2, 2, 4, 5 s after job 1's; the actual starts
/// agree within one heartbeat per job ahead in the chain.
#[test]
fn forecast_of_an_fcfs_queue_matches_the_actual_starts() {
    let c = Cluster::up(
        "forecast",
        "fcfs",
        &[
            "--nodes",
            "1",
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
    c.until(30, "the node up", || (c.nodes_up() == 1).then_some(()));
    // (PEs, seconds, jobs it waits behind along the chain to it).
    let spec = [(2, 2, 0), (1, 1, 1), (1, 2, 1), (2, 1, 2), (1, 1, 3)];
    let ids: Vec<u64> = spec
        .iter()
        .map(|&(n, s, _)| {
            let (n, s) = (n.to_string(), s.to_string());
            c.submit(&["-n", &n, "--time", &format!("{s}s"), "--", "sleep", &s])
        })
        .collect();
    let forecast: Value = serde_json::from_str(&c.ok(&["queue", "--forecast", "--json"])).unwrap();
    let expected: Vec<f64> = ids
        .iter()
        .map(|&id| {
            let j = jobs(&forecast)
                .into_iter()
                .find(|j| j["id"] == id)
                .unwrap_or_else(|| panic!("job {id} not in {forecast}"));
            j["expected_start"]
                .as_f64()
                .unwrap_or_else(|| panic!("job {id} has no expected start: {j}"))
        })
        .collect();
    // The table carries the column too.
    let table = c.ok(&["queue", "--forecast"]);
    assert!(table.contains("EXPECTED START"), "{table}");
    let mut wait = vec!["wait", "--timeout", "60s"];
    let id_text: Vec<String> = ids.iter().map(u64::to_string).collect();
    wait.extend(id_text.iter().map(String::as_str));
    // Jobs killed at their limit end as timed out: `wait` then exits 1, which is fine here.
    let _ = c.run(&wait);
    let acct: Value = serde_json::from_str(&c.ok(&["acct", "--json"])).unwrap();
    let actual: Vec<f64> = ids
        .iter()
        .map(|&id| {
            jobs(&acct)
                .into_iter()
                .find(|j| j["id"] == id)
                .and_then(|j| j["start"].as_f64())
                .unwrap_or_else(|| panic!("job {id} never started: {acct}"))
        })
        .collect();
    let t0 = actual[0];
    let rel = |v: &[f64]| v.iter().map(|x| x - t0).collect::<Vec<_>>();
    // The forecast itself is the FCFS schedule run by hand.
    for (k, (&e, want)) in rel(&expected)
        .iter()
        .zip([0.0, 2.0, 2.0, 4.0, 5.0])
        .enumerate()
    {
        assert!(
            (e - want).abs() < 1e-3,
            "job {}: forecast start {e:.3} s after job 1's, FCFS gives {want}",
            ids[k]
        );
    }
    for (k, &(_, _, depth)) in spec.iter().enumerate() {
        let err = actual[k] - expected[k];
        let tol = f64::from(depth) * HEARTBEAT_S + 1e-3;
        assert!(
            err.abs() <= tol,
            "job {}: started {err:+.3} s from its forecast (tolerance {tol:.2} s); \
             forecast {:?}, actual {:?}",
            ids[k],
            rel(&expected),
            rel(&actual),
        );
    }
}
