//! Batsim interoperability end to end: a Batsim JSON workload is simulated as Batsim would
//! read it, `workload convert --to batsim` writes a workload that simulates like its SWF
//! source, and the `--jobs-out-batsim` file is read by evalys (Batsim's analysis package),
//! which must see every job with the states, times and resources cosched recorded.
//!
//! evalys is a Python package from the registry; `.ci/run` installs it into
//! `target/evalys-venv` (or set `COSCHED_EVALYS_PYTHON` to an interpreter that has it).
//! Without it the evalys test fails, saying how to install it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cosched(args: &[&str]) -> String {
    let out = Command::new(support::bin())
        .args(args)
        .output()
        .expect("cosched runs");
    assert!(
        out.status.success(),
        "cosched {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The Python that has evalys.
fn evalys_python() -> PathBuf {
    let python = std::env::var_os("COSCHED_EVALYS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/evalys-venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import evalys"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import evalys: run .ci/run's install step (python3 -m venv \
         target/evalys-venv && target/evalys-venv/bin/pip install evalys) or set \
         COSCHED_EVALYS_PYTHON",
        python.display()
    );
    python
}

/// Eight jobs on 4 resources; jobs 5 and 6 run past their walltime (killed there with
/// `--kill-at-estimate`, as Batsim kills them), job 7 is a `workload!number` id.
const WORKLOAD: &str = r#"{
  "nb_res": 4,
  "jobs": [
    {"id": 1, "subtime": 0, "walltime": 100, "res": 2, "profile": "p50"},
    {"id": 2, "subtime": 0, "walltime": 100, "res": 4, "profile": "p50"},
    {"id": 3, "subtime": 5, "walltime": 20, "res": 1, "profile": "p10"},
    {"id": 4, "subtime": 5.5, "walltime": 100, "res": 2, "profile": "p50"},
    {"id": 5, "subtime": 8, "walltime": 10, "res": 1, "profile": "p50"},
    {"id": 6, "subtime": 9, "walltime": 30, "res": 3, "profile": "p50"},
    {"id": "w0!7", "subtime": 9, "res": 1, "profile": "p10"},
    {"id": 8, "subtime": 300, "walltime": 60, "res": 4, "profile": "p10"}
  ],
  "profiles": {
    "p50": {"type": "delay", "delay": 50},
    "p10": {"type": "delay", "delay": 10}
  }
}"#;

/// cosched's own records (`--jobs-out`): id → (start, end, procs, outcome).
fn records(csv: &Path) -> HashMap<String, (f64, f64, u32, String)> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<_> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (id, start, end, procs, outcome) = (
        col("id"),
        col("start"),
        col("end"),
        col("procs"),
        col("outcome"),
    );
    lines
        .map(|l| {
            let f: Vec<_> = l.split(',').collect();
            (
                f[id].to_string(),
                (
                    f[start].parse().unwrap(),
                    f[end].parse().unwrap(),
                    f[procs].parse().unwrap(),
                    f[outcome].to_string(),
                ),
            )
        })
        .collect()
}

/// Simulates `trace` with `extra` flags, writing both CSVs into `dir`; evalys reads the
/// Batsim one, and every job must agree with cosched's record.
fn evalys_sees_the_schedule(dir: &Path, trace: &Path, extra: &[&str]) -> serde_json::Value {
    let (batsim, own) = (dir.join("jobs.csv"), dir.join("own.csv"));
    let mut args = vec![
        "sim",
        "--trace",
        trace.to_str().unwrap(),
        "--jobs-out-batsim",
        batsim.to_str().unwrap(),
        "--jobs-out",
        own.to_str().unwrap(),
    ];
    args.extend(extra);
    cosched(&args);
    let out = Command::new(evalys_python())
        .arg(repo().join("crates/cli/tests/batsim/evalys_read.py"))
        .arg(&batsim)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "evalys could not read {}: {}",
        batsim.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let own = records(&own);
    assert_eq!(seen["jobs"].as_u64().unwrap() as usize, own.len());
    for row in seen["rows"].as_array().unwrap() {
        let id = row["id"].as_str().unwrap();
        let (start, end, procs, outcome) = &own[id];
        let state = match outcome.as_str() {
            "completed" => "COMPLETED_SUCCESSFULLY",
            "timedout" => "COMPLETED_WALLTIME_REACHED",
            other => panic!("job {id}: outcome {other} not expected here"),
        };
        assert_eq!(row["state"], state, "job {id}");
        assert_eq!(row["success"], u8::from(outcome == "completed"), "job {id}");
        assert_eq!(row["start"].as_f64().unwrap(), *start, "job {id}");
        assert_eq!(row["finish"].as_f64().unwrap(), *end, "job {id}");
        assert_eq!(
            row["procs"].as_u64().unwrap(),
            u64::from(*procs),
            "job {id}"
        );
        assert_eq!(
            row["requested"].as_u64().unwrap(),
            u64::from(*procs),
            "job {id}"
        );
    }
    seen
}

#[test]
fn evalys_reads_the_batsim_jobs_csv_of_a_batsim_workload() {
    let dir = support::scratch_dir("batsim", "evalys");
    let w = dir.path().join("w.json");
    std::fs::write(&w, WORKLOAD).unwrap();
    let seen =
        evalys_sees_the_schedule(dir.path(), &w, &["--policy", "easy", "--kill-at-estimate"]);
    let rows = seen["rows"].as_array().unwrap();
    let by_id = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();
    // Job 5 asked for 10 s and runs 50: Batsim's walltime kill.
    assert_eq!(by_id("5")["state"], "COMPLETED_WALLTIME_REACHED");
    assert_eq!(
        by_id("5")["finish"].as_f64().unwrap() - by_id("5")["start"].as_f64().unwrap(),
        10.0
    );
    // Job 2 takes the whole machine once job 1 ends: resources 0-3; fractional submit kept.
    assert_eq!(by_id("2")["resources"], "0-3");
    assert_eq!(by_id("4")["waiting"].as_f64().unwrap() % 1.0, 0.5);
    assert_eq!(by_id("7")["state"], "COMPLETED_SUCCESSFULLY");
    assert_eq!(seen["max_procs"], 4);
    assert!(seen["peak_utilisation"].as_u64().unwrap() <= 4);
}

#[test]
fn evalys_reads_a_kth_schedule_converted_to_batsim_and_back() {
    let trace = repo().join("../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz");
    let dir = support::scratch_dir("batsim", "kth");
    let json = dir.path().join("kth.json");
    cosched(&[
        "workload",
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "batsim",
        "-o",
        json.to_str().unwrap(),
        "--oversize",
        "skip",
    ]);
    // The Batsim workload simulates exactly like its SWF source.
    let run = |t: &Path| {
        let out = cosched(&[
            "sim",
            "--trace",
            t.to_str().unwrap(),
            "--first",
            "3000",
            "--policy",
            "easy",
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (
            v["jobs"].clone(),
            v["mean_wait_s"].clone(),
            v["makespan_s"].clone(),
        )
    };
    assert_eq!(run(&json), run(&trace));
    let seen = evalys_sees_the_schedule(dir.path(), &json, &["--first", "3000"]);
    assert_eq!(seen["jobs"], 3000);
    assert_eq!(
        seen["max_procs"], 100,
        "some job ran on PE 0 and some on PE 99"
    );
    // PEs are whole: evalys counts the same resources as the job's size in every row.
    assert!(seen["peak_utilisation"].as_u64().unwrap() <= 100);
}
