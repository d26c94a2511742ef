//! `cosched workload …` and `cosched demo` from the outside: exit codes, JSON keys, files
//! written, and error messages that name the flag to pass.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("run cosched")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "stderr: {}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn shared_trace(name: &str) -> Option<PathBuf> {
    cosched_workload::shared::trace(name, "this trace test")
}

#[test]
fn gen_writes_a_deterministic_trace_with_the_requested_load() {
    let tmp = support::scratch_dir("cli", "gen");
    let dir = tmp.path();
    let a = dir.join("a.swf");
    let b = dir.join("b.swf.gz");
    let args = |out: &Path| {
        vec![
            "workload".to_string(),
            "gen".into(),
            "--model".into(),
            "lublin".into(),
            "--jobs".into(),
            "1500".into(),
            "--procs".into(),
            "64".into(),
            "--load".into(),
            "0.8".into(),
            "--seed".into(),
            "5".into(),
            "-o".into(),
            out.display().to_string(),
            "--json".into(),
        ]
    };
    let run = |out: &Path| {
        let a = args(out);
        cosched(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let first = json(&run(&a));
    assert_eq!(first["jobs"], 1500);
    assert_eq!(first["procs"], 64);
    assert!((first["offered_load"].as_f64().unwrap() - 0.8).abs() < 1e-3);
    let bytes = std::fs::read(&a).unwrap();
    json(&run(&a));
    assert_eq!(bytes, std::fs::read(&a).unwrap(), "same seed, same bytes");
    json(&run(&b));
    assert_eq!(
        &std::fs::read(&b).unwrap()[..2],
        &[0x1f, 0x8b],
        ".gz output is gzip"
    );
    // info reads both back with the same figures.
    let info_a = json(&cosched(&[
        "workload",
        "info",
        a.to_str().unwrap(),
        "--json",
    ]));
    let info_b = json(&cosched(&[
        "workload",
        "info",
        b.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(info_a["jobs"], 1500);
    assert_eq!(info_a["span_s"], info_b["span_s"]);
    assert_eq!(info_a["offered_load"], first["offered_load"]);
}

#[test]
fn transform_rescales_compresses_and_cuts() {
    let tmp = support::scratch_dir("cli", "transform");
    let dir = tmp.path();
    let src = dir.join("src.swf");
    let out = dir.join("out.swf");
    assert!(
        cosched(&[
            "workload",
            "gen",
            "--jobs",
            "800",
            "--procs",
            "32",
            "-o",
            src.to_str().unwrap()
        ])
        .status
        .success()
    );
    let before = json(&cosched(&[
        "workload",
        "info",
        src.to_str().unwrap(),
        "--json",
    ]));
    let o = cosched(&[
        "workload",
        "transform",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--compress",
        "100",
        "--json",
    ]);
    let compressed = json(&o);
    let ratio = before["span_s"].as_f64().unwrap() / compressed["span_s"].as_f64().unwrap();
    assert!((ratio - 100.0).abs() < 0.1, "span ratio {ratio}");
    let o = cosched(&[
        "workload",
        "transform",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--first",
        "100",
        "--load",
        "0.5",
        "--json",
    ]);
    let cut = json(&o);
    assert_eq!(cut["jobs"], 100);
    assert!((cut["offered_load"].as_f64().unwrap() - 0.5).abs() < 1e-3);
    let o = cosched(&[
        "workload",
        "transform",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--window",
        "1d..2d",
        "--json",
    ]);
    let day = json(&o);
    assert!(day["jobs"].as_u64().unwrap() < 800);
    assert!(day["last_submit_s"].as_f64().unwrap() < 86_400.0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("; Note: transformed by cosched from src.swf: window"),
        "note added"
    );
    let bad = cosched(&[
        "workload",
        "transform",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--window",
        "2d..1d",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--window"));
}

#[test]
fn errors_name_the_place_and_the_flag() {
    let tmp = support::scratch_dir("cli", "errors");
    let dir = tmp.path();
    let headerless = dir.join("headerless.swf");
    std::fs::write(
        &headerless,
        "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let o = cosched(&["workload", "info", headerless.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--procs"), "{}", stderr(&o));
    let ok = json(&cosched(&[
        "workload",
        "info",
        headerless.to_str().unwrap(),
        "--procs",
        "8",
        "--json",
    ]));
    assert_eq!(ok["procs"], 8);

    let oversize = dir.join("oversize.swf");
    std::fs::write(
        &oversize,
        "; MaxProcs: 4\n1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 9 5 100 16 -1 -1 16 200 -1 1 1 1 -1 1 -1 -1 -1\n\
         3 12 5 1x0 2 -1 -1 2 200 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let o = cosched(&["workload", "info", oversize.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(
        err.contains("oversize.swf:3") && err.contains("job 2") && err.contains("--oversize"),
        "{err}"
    );
    let o = cosched(&[
        "workload",
        "info",
        oversize.to_str().unwrap(),
        "--oversize",
        "clip",
    ]);
    let err = stderr(&o);
    assert!(
        err.contains("oversize.swf:4")
            && err.contains("field 4 (run time)")
            && err.contains("\"1x0\""),
        "{err}"
    );
    let lenient = json(&cosched(&[
        "workload",
        "info",
        oversize.to_str().unwrap(),
        "--oversize",
        "skip",
        "--lenient",
        "--json",
    ]));
    assert_eq!(lenient["jobs"], 1);
    assert_eq!(lenient["read"]["skipped"]["not_a_number"], 1);
    assert_eq!(lenient["read"]["oversize_skipped"], 1);
    let table = cosched(&[
        "workload",
        "info",
        oversize.to_str().unwrap(),
        "--oversize",
        "skip",
        "--lenient",
    ]);
    assert!(
        stdout(&table).contains("skipped (lenient)"),
        "{}",
        stdout(&table)
    );

    // A gzip trace written by gen, cut short.
    let truncated = dir.join("truncated.swf.gz");
    let generated = cosched(&[
        "workload",
        "gen",
        "--jobs",
        "3000",
        "--procs",
        "8",
        "-o",
        truncated.to_str().unwrap(),
    ]);
    assert!(generated.status.success(), "{}", stderr(&generated));
    let packed = std::fs::read(&truncated).unwrap();
    std::fs::write(&truncated, &packed[..packed.len() - 40]).unwrap();
    let o = cosched(&["workload", "info", truncated.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));
}

#[test]
fn info_on_an_archive_log_has_the_documented_keys() {
    let Some(kth) = shared_trace("KTH-SP2-1996-2.1-cln.swf.gz") else {
        return;
    };
    let v = json(&cosched(&[
        "workload",
        "info",
        kth.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["jobs"], 28_490 - 498); // 27,992 job lines
    assert_eq!(v["procs"], 100);
    for key in ["span_s", "offered_load", "size", "runtime_s", "estimates"] {
        assert!(!v[key].is_null(), "missing {key}");
    }
    let load = v["offered_load"].as_f64().unwrap();
    assert!(load > 0.1 && load < 1.5, "load {load}");
    let table = stdout(&cosched(&["workload", "info", kth.to_str().unwrap()]));
    assert!(
        table.contains("offered load") && table.contains("27,992"),
        "{table}"
    );
}

#[test]
fn demo_summarises_a_model_workload() {
    let o = cosched(&["demo", "--no-cluster"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("Lublin") && text.contains("2,000") && text.contains("offered load"),
        "{text}"
    );
    let v = json(&cosched(&["demo", "--no-cluster", "--json"]));
    assert_eq!(v["workload"]["jobs"], 2000);
    assert_eq!(v["workload"]["procs"], 128);
}

#[test]
fn dash_reads_stdin_and_writes_stdout() {
    use std::io::Write;
    use std::process::Stdio;
    let generated = cosched(&[
        "workload", "gen", "--jobs", "300", "--procs", "32", "-o", "-",
    ]);
    assert!(generated.status.success(), "{}", stderr(&generated));
    let text = stdout(&generated);
    assert!(
        text.starts_with("; Version: 2.2"),
        "only the trace on stdout"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["workload", "info", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&generated.stdout)
        .unwrap();
    let v = json(&child.wait_with_output().unwrap());
    assert_eq!(v["jobs"], 300);
    assert_eq!(v["source"], "<stdin>");
}

#[test]
fn gen_feitelson97_meets_the_load_and_rejects_lublin_only_flags() {
    let tmp = support::scratch_dir("cli", "gen-f97");
    let dir = tmp.path();
    let out = dir.join("f.swf");
    let o = cosched(&[
        "workload",
        "gen",
        "--model",
        "feitelson97",
        "--jobs",
        "2000",
        "--procs",
        "128",
        "--load",
        "0.7",
        "-o",
        out.to_str().unwrap(),
        "--json",
    ]);
    let s = json(&o);
    assert_eq!(s["jobs"], 2000);
    assert!(
        (s["offered_load"].as_f64().unwrap() - 0.7).abs() < 0.01,
        "{s}"
    );
    let o = cosched(&[
        "workload",
        "gen",
        "--model",
        "feitelson97",
        "--jobs",
        "10",
        "--procs",
        "128",
        "--start-hour",
        "3",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--start-hour"), "{}", stderr(&o));
}
