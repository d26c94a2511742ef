//! `cosched cosim` end to end: JSON shape of a run and of a sweep, and error messages.

mod support;

use std::process::Command;

const SCENARIO: &str = r#"
name = "cli-small"
seed = 5
[machine]
nodes = 2
pes_per_node = 2
mpl = 2
[schemes]
timeslice = "20ms"
[[jobs]]
procs = 4
work = "200ms"
granularity = 0.5
[[jobs]]
procs = 2
work = "100ms"
granularity = 0.1
pattern = "nn"
variance = 0.5
[grid]
pattern = ["nn", "aa"]
"#;

fn scenario_file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn cosched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn run_json_has_the_documented_shape() {
    let dir = support::scratch_dir("cosim", "test");
    let f = scenario_file(&dir, "run.toml", SCENARIO);
    let hist = f.with_extension("classes.jsonl");
    let out = cosched(&[
        "cosim",
        "--scenario",
        f.to_str().unwrap(),
        "--scheme",
        "fcs",
        "--json",
        "--class-history",
        hist.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scheme"], "fcs");
    assert_eq!(v["provenance"]["input_sha256"].as_str().unwrap().len(), 64);
    for key in ["mean_response_s", "mean_wait_s", "msg_pending_s"] {
        assert!(v[key].as_f64().unwrap() >= 0.0, "{key}");
    }
    let b = &v["breakdown"];
    let sum: f64 = ["compute", "spin", "idle", "context_switch", "overhead"]
        .iter()
        .map(|k| b[k].as_f64().unwrap())
        .sum();
    assert!((sum - 1.0).abs() < 1e-9, "{sum}");
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let p0 = &jobs[0]["processes"][0];
    assert!(p0["rank"].is_u64() && p0["node"].is_u64());
    assert!(["CS", "F", "DC"].contains(&p0["class"].as_str().unwrap()));
    assert!(jobs[0]["response_s"].as_f64().unwrap() > 0.0 && jobs[0]["wait_s"].is_f64());
    let history = std::fs::read_to_string(&hist).unwrap();
    assert!(
        history.lines().count() >= 6,
        "one initial record per process at least"
    );
    // Other schemes report no class.
    let out = cosched(&[
        "cosim",
        "--scenario",
        f.to_str().unwrap(),
        "--scheme",
        "sb",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["jobs"][0]["processes"][0]["class"].is_null());
}

#[test]
fn sweep_json_has_provenance_and_rows_with_params() {
    let dir = support::scratch_dir("cosim", "test");
    let f = scenario_file(&dir, "sweep.toml", SCENARIO);
    let out = cosched(&[
        "cosim",
        "sweep",
        "--scenario",
        f.to_str().unwrap(),
        "--schemes",
        "gs,ics",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Where it came from: the scenario's hash and the command line.
    let prov = &v["provenance"];
    assert_eq!(prov["input_sha256"].as_str().unwrap().len(), 64, "{prov}");
    assert!(
        prov["command"].as_str().unwrap().contains("cosim sweep"),
        "{prov}"
    );
    let runs = v["rows"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    let names: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["params"]["pattern"].as_str().unwrap(),
                r["scheme"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("nn", "gs"), ("nn", "sb"), ("aa", "gs"), ("aa", "sb")],
        "grid values in file order"
    );
    // The table form too.
    let out = cosched(&[
        "cosim",
        "sweep",
        "--scenario",
        f.to_str().unwrap(),
        "--schemes",
        "local",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pattern=nn") && text.contains("local"),
        "{text}"
    );
    // The makespan column sits after wait_s and is never shorter than the mean response.
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    let col = header
        .iter()
        .position(|h| *h == "makespan_s")
        .expect("makespan_s column");
    assert_eq!(header[col - 1], "wait_s");
    for line in text.lines().skip(1).filter(|l| l.contains("local")) {
        // "pattern=nn local ...": params take one field here.
        let cells: Vec<&str> = line.split_whitespace().collect();
        let response: f64 = cells[2].parse().unwrap();
        let makespan: f64 = cells[col].parse().unwrap();
        assert!(makespan >= response && makespan > 0.0, "{line}");
    }
}

#[test]
fn bad_input_says_what_and_where() {
    let dir = support::scratch_dir("cosim", "test");
    let f = scenario_file(
        &dir,
        "bad.toml",
        "[machine]\nnodes = 2\n[[jobs]]\nprocs = 9\nwork = \"1s\"\ngranularity = 0.5\n",
    );
    let out = cosched(&["cosim", "--scenario", f.to_str().unwrap(), "--scheme", "gs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("jobs[0].procs"), "{err}");
    let out = cosched(&[
        "cosim",
        "--scenario",
        f.to_str().unwrap(),
        "--scheme",
        "gang",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scheme"));
    let out = cosched(&[
        "cosim",
        "--scenario",
        "/nonexistent/x.toml",
        "--scheme",
        "gs",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.toml"));
    let out = cosched(&["cosim", "--scheme", "gs"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--scenario"));
}

/// `cosim sweep --plot` draws a NAS sweep's slowdown relative to BATCH with the shared plotting
/// code: one series per scheme, the grid's values on the x axis; without `[mix]
/// batch_slowdown` that metric is refused by name.
#[test]
fn sweep_plots_the_slowdown_relative_to_batch() {
    let dir = support::scratch_dir("cosim", "test");
    let text = "[machine]\nnodes = 4\nmpl = 2\n[costs]\nserial_nic = true\nstartup = \"15us\"\n\
                [mix]\nworkload = \"IS\"\njobs = 2\nprocs = 4\nv = 0.5\niterations = 5\nbatch_slowdown = true\n\
                [grid]\nworkload = [\"IS\", \"FT\"]\n";
    let f = scenario_file(&dir, "nas.toml", text);
    let svg = f.with_extension("svg");
    let out = cosched(&[
        "cosim",
        "sweep",
        "--scenario",
        f.to_str().unwrap(),
        "--schemes",
        "fcfs,sb",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "batch-slowdown",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("batch_slowdown"), "{stdout}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    for label in ["slowdown relative to BATCH", "FT", "sb", "fcfs"] {
        assert!(drawn.contains(label), "{label} missing from the plot");
    }
    let plain = scenario_file(
        &dir,
        "nas-plain.toml",
        &text.replace("batch_slowdown = true\n", ""),
    );
    let out = cosched(&[
        "cosim",
        "sweep",
        "--scenario",
        plain.to_str().unwrap(),
        "--schemes",
        "sb",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-metric",
        "batch-slowdown",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("batch_slowdown"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
