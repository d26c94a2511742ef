//! `cosched sim` and `cosched sim sweep` end to end: JSON keys, the per-job CSV, the SWF
//! schedule, byte-identical reruns, helpful errors, and a sweep's files.

mod support;

use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("cosched runs")
}

const MODEL: [&str; 10] = [
    "sim", "--model", "lublin", "--jobs", "400", "--procs", "64", "--load", "0.8", "--seed",
];

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn json_has_the_headline_keys() {
    let mut args = MODEL.to_vec();
    args.extend(["2", "--policy", "easy", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&ok(&cosched(&args))).unwrap();
    for key in [
        "policy",
        "jobs",
        "mean_wait_s",
        "mean_response_s",
        "mean_slowdown",
        "mean_bounded_slowdown",
        "utilization",
        "makespan_s",
    ] {
        assert!(doc.get(key).is_some(), "missing {key}: {doc}");
    }
    assert_eq!(doc["policy"], "easy");
    assert_eq!(doc["jobs"], 400);
    let u = doc["utilization"].as_f64().unwrap();
    assert!(u > 0.3 && u <= 1.0, "{u}");
    assert!(doc["mean_bounded_slowdown"].as_f64().unwrap() >= 1.0);
}

#[test]
fn jobs_csv_and_swf_are_written_and_reruns_are_identical() {
    let tmp = support::scratch_dir("sim-cli", "outputs");
    let dir = tmp.path();
    let run = |tag: &str| {
        let csv = dir.join(format!("{tag}.csv"));
        let swf = dir.join(format!("{tag}.swf"));
        let mut args = MODEL.to_vec();
        let (c, s) = (
            csv.to_str().unwrap().to_string(),
            swf.to_str().unwrap().to_string(),
        );
        args.extend([
            "5",
            "--policy",
            "conservative",
            "--jobs-out",
            &c,
            "--swf-out",
            &s,
        ]);
        let table = ok(&cosched(&args));
        (
            table,
            std::fs::read(&csv).unwrap(),
            std::fs::read_to_string(&swf).unwrap(),
        )
    };
    let (table, csv, swf) = run("a");
    assert!(
        table.contains("conservative") && table.contains("by size"),
        "{table}"
    );
    let text = String::from_utf8(csv.clone()).unwrap();
    // The provenance comes first, as `#` lines; the table after.
    assert!(text.starts_with("# generator: cosched "), "{text}");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header[..6],
        ["id", "submit", "start", "end", "procs", "runtime"]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 400);
    for r in &rows {
        let (submit, start, end, runtime): (f64, f64, f64, f64) = (
            r[1].parse().unwrap(),
            r[2].parse().unwrap(),
            r[3].parse().unwrap(),
            r[5].parse().unwrap(),
        );
        assert!(
            start >= submit && (end - start - runtime).abs() < 1e-6,
            "{r:?}"
        );
    }
    // The SWF schedule: 18 fields per job line, wait = start - submit.
    let jobs: Vec<Vec<f64>> = swf
        .lines()
        .filter(|l| !l.trim_start().starts_with(';') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(jobs.len(), 400);
    assert!(jobs.iter().all(|f| f.len() == 18));
    for (f, r) in jobs.iter().zip(&rows) {
        let (submit, start): (f64, f64) = (r[1].parse().unwrap(), r[2].parse().unwrap());
        assert!(
            (f[2] - (start - submit)).abs() < 1e-6,
            "wait of job {}",
            f[0]
        );
    }
    assert!(swf.contains("cosched sim"));
    let (table2, csv2, swf2) = run("b");
    assert_eq!(table, table2);
    // The provenance names the output files, which differ; what was computed must not.
    let data = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("; Provenance-command"))
            .map(String::from)
            .collect()
    };
    assert_eq!(
        data(&String::from_utf8(csv).unwrap()),
        data(&String::from_utf8(csv2).unwrap()),
        "per-job CSV differs between identical runs"
    );
    assert_eq!(data(&swf), data(&swf2));
}

#[test]
fn bad_input_says_what_to_do() {
    let err = |args: &[&str]| {
        let out = cosched(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8(out.stderr).unwrap()
    };
    assert!(err(&["sim", "--policy", "easy"]).contains("--trace"));
    assert!(err(&["sim", "--model", "lublin"]).contains("--procs"));
    let e = err(&[
        "sim", "--model", "lublin", "--procs", "8", "--jobs", "5", "--policy", "nope",
    ]);
    assert!(
        e.contains("nope") && e.contains("easy") && e.contains("--policy"),
        "{e}"
    );
    assert!(err(&["sim", "--model", "lublin", "--procs", "8", "--load", "0"]).contains("--load"));
    let e = err(&["sim", "--trace", "/nonexistent/x.swf", "--policy", "easy"]);
    assert!(e.contains("/nonexistent/x.swf"), "{e}");
    assert!(
        err(&[
            "sim", "--model", "lublin", "--procs", "8", "--opt", "novalue"
        ])
        .contains("KEY=VALUE")
    );
    assert!(ok(&cosched(&["sim", "--list"])).contains("conservative"));
}

#[test]
fn sweep_writes_table_and_plots() {
    let tmp = support::scratch_dir("sim-cli", "sweep");
    let dir = tmp.path();
    let out = dir.to_str().unwrap();
    let text = ok(&cosched(&[
        "sim",
        "sweep",
        "--model",
        "lublin",
        "--jobs",
        "300",
        "--procs",
        "32",
        "--policies",
        "fcfs,easy",
        "--loads",
        "0.5,0.8",
        "--seeds",
        "1,2",
        "--threads",
        "2",
        "--out",
        out,
    ]));
    assert!(text.contains("fcfs") && text.contains("easy"), "{text}");
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    // Four provenance lines, the header, a row per point.
    assert_eq!(csv.lines().count(), 4 + 1 + 2 * 2 * 2);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), 8);
    assert_eq!(&std::fs::read(dir.join("sweep.png")).unwrap()[1..4], b"PNG");
    assert!(
        std::fs::read_to_string(dir.join("sweep.svg"))
            .unwrap()
            .contains("bounded slowdown")
    );
}

#[test]
fn a_real_trace_runs_with_load_rescaling() {
    let Some(trace) = cosched_workload::shared::trace(
        "KTH-SP2-1996-2.1-cln.swf.gz",
        "the trace run with load rescaling",
    ) else {
        return;
    };
    let t = trace.to_str().unwrap();
    let run = |load: &str| -> serde_json::Value {
        let mut args = vec![
            "sim", "--trace", t, "--first", "3000", "--policy", "easy", "--json",
        ];
        if !load.is_empty() {
            args.extend(["--load", load]);
        }
        serde_json::from_str(&ok(&cosched(&args))).unwrap()
    };
    let native = run("");
    let heavy = run("0.95");
    assert_eq!(native["jobs"], 3000);
    assert_eq!(native["summary"]["procs"], 100);
    // Compressing arrivals to a higher load cannot make the schedule shorter-waiting here.
    assert!(heavy["mean_wait_s"].as_f64().unwrap() > native["mean_wait_s"].as_f64().unwrap());
    assert!(heavy["makespan_s"].as_f64().unwrap() < native["makespan_s"].as_f64().unwrap());
}
