//! `cosched demo`, the README's first command: the simulation part alone, and the whole demo
//! with its embedded cluster of real processes.

use std::process::Command;

fn demo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .arg("demo")
        .args(args)
        .arg("--json")
        .output()
        .expect("cosched runs");
    assert!(
        out.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[test]
fn simulation_part_compares_the_policies_on_one_workload() {
    let doc = demo(&["--no-cluster", "--jobs", "400", "--procs", "64"]);
    assert_eq!(doc["workload"]["jobs"], 400);
    let rows = doc["simulation"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(names, ["fcfs", "easy", "conservative", "gang"]);
    for r in rows {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["jobs"], 400, "every job finishes under {}", r["policy"]);
    }
    let bsld = |i: usize| rows[i]["mean_bounded_slowdown"].as_f64().unwrap();
    assert!(
        bsld(1) <= bsld(0),
        "EASY is no worse than FCFS on the same workload"
    );
    assert!(doc["cluster"].is_null());
}

#[test]
fn whole_demo_runs_real_jobs_under_gang_scheduling() {
    let doc = demo(&["--jobs", "200", "--procs", "32"]);
    let jobs = doc["cluster"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 5);
    for j in jobs {
        assert_eq!(j["exit_code"], 0, "{j}");
        assert_eq!(j["state"], "completed", "{j}");
    }
    let matrix = doc["cluster"]["matrix"].as_str().unwrap();
    assert!(
        matrix.contains("slot1"),
        "two rows of the matrix were in use:\n{matrix}"
    );
}
