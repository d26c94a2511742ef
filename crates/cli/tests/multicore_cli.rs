//! `cosched sim` on seed 001's multi-core machine: the W1/W2 models, Scojo-PECT and
//! G-LOMARC-TS, their figures in the report and the JSON, determinism, and sweeps over
//! variants and parameters.

use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("run cosched")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn w1_under_glomarc_reports_seed_001_figures_and_is_byte_identical() {
    let args = [
        "sim", "--model", "w1", "--jobs", "600", "--seed", "4", "--policy", "glomarc", "--json",
    ];
    let a = ok(&cosched(&args));
    let b = ok(&cosched(&args));
    assert_eq!(a, b, "same seed, same bytes");
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    let m = &v["summary"]["multicore"];
    for key in [
        "node_utilization",
        "core_utilization",
        "high_load_core_utilization",
        "groups",
        "jobs_per_group",
    ] {
        assert!(m[key].is_number(), "{key}: {m}");
    }
    for t in ["short", "medium", "long", "all"] {
        assert!(m[t]["rr"].as_f64().unwrap() >= 1.0, "{t}: {m}");
    }
    // 128 nodes of two dual-core processors.
    assert_eq!(v["summary"]["procs"], 512);
    let text = ok(&cosched(&[
        "sim",
        "--model",
        "w2",
        "--jobs",
        "300",
        "--policy",
        "scojo-pect",
    ]));
    assert!(text.contains("multi-core nodes (seed 001)"), "{text}");
    assert!(text.contains("groups formed 0"), "{text}");
    let bad = cosched(&[
        "sim",
        "--model",
        "w1",
        "--jobs",
        "50",
        "--policy",
        "glomarc",
        "--opt",
        "variant=best",
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("variant") && err.contains("glts"), "{err}");
}

#[test]
fn sweep_varies_a_parameter_of_each_variant() {
    // Removed when the test ends, passed or failed: nothing is left in target/.
    let tmp = tempfile::Builder::new()
        .prefix("cosched-multicore-sweep-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("out");
    let out = ok(&cosched(&[
        "sim",
        "sweep",
        "--model",
        "w1",
        "--jobs",
        "300",
        "--own-load",
        "--seeds",
        "1,2",
        "--policies",
        "glomarc,glomarc:variant=nh",
        "--vary",
        "block_size=4:12",
        "--out",
        dir.to_str().unwrap(),
    ]));
    assert!(out.contains("glomarc:variant=nh:block_size=12"), "{out}");
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    assert!(
        csv.lines()
            .find(|l| !l.starts_with('#'))
            .unwrap()
            .ends_with("groups,jobs_per_group")
    );
    // Four provenance lines, the header, the rows.
    assert_eq!(csv.lines().count(), 4 + 1 + 2 * 2 * 2);
    assert!(dir.join("sweep.svg").exists() && dir.join("sweep.png").exists());
}
