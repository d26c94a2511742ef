//! `cosched sim` with the time-sharing policies: the matrix drawing, the time-sharing report,
//! and configuration errors that name what is wrong.

mod support;

use std::process::Command;

fn cosched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("cosched runs")
}

#[test]
fn gang_draws_the_matrix_and_reports_quanta() {
    let tmp = support::scratch_dir("timeshare", "gang");
    let dir = tmp.path();
    let svg = dir.join("m.svg");
    let json = dir.join("t.json");
    let out = cosched(&[
        "sim",
        "--model",
        "lublin",
        "--procs",
        "32",
        "--jobs",
        "300",
        "--load",
        "0.9",
        "--policy",
        "gang",
        "--quantum",
        "10s",
        "--opt",
        "packing=best-fit",
        "--matrix-out",
        svg.to_str().unwrap(),
        "--matrix-from",
        "1h",
        "--matrix-span",
        "5m",
        "--timeshare-out",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("time sharing") && stdout.contains("mean quantum"),
        "{stdout}"
    );
    // The histograms of seed 002 Figs. 12 and 14 are in the human report too.
    assert!(
        stdout.contains("slowdown hist      1-2:")
            && stdout.contains("bounded sld hist   1-2:")
            && stdout.contains("preemptions hist   0:300 "),
        "{stdout}"
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(
        picture.starts_with("<svg") && picture.contains("slot 0"),
        "{picture}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["jobs"], 300);
    assert!(
        report["suspensions_total"].as_u64().unwrap() > 0,
        "gang at load 0.9 time-slices"
    );
    assert_eq!(
        report["preemptions_total"], 0,
        "gang suspends, it never preempts"
    );
}

#[test]
fn t3d_reads_its_classes_from_the_policy_config_file() {
    let tmp = support::scratch_dir("timeshare", "t3d");
    let dir = tmp.path();
    let cfg = dir.join("t3d.toml");
    std::fs::write(&cfg, "[policy]\nswap_per_pe = \"500ms\"\n[policy.queues]\n0 = \"interactive\"\n1 = \"production\"\n").unwrap();
    let out = cosched(&[
        "sim",
        "--model",
        "lublin",
        "--procs",
        "64",
        "--jobs",
        "400",
        "--load",
        "0.8",
        "--policy",
        "t3d",
        "--policy-config",
        cfg.to_str().unwrap(),
        "--json",
        "--timeshare-out",
        dir.join("t.json").to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["policy"], "t3d");
    assert_eq!(doc["jobs"], 400);
    assert!(
        doc["timeshare"]["by_size"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    let ts = &doc["timeshare"];
    assert!(
        ts["interactive_max_slowdown"].as_f64().unwrap()
            >= ts["interactive_mean_slowdown"].as_f64().unwrap(),
        "{ts}"
    );

    std::fs::write(&cfg, "[policy.classes.debug]\nprio = 3\n").unwrap();
    let out = cosched(&[
        "sim",
        "--model",
        "lublin",
        "--procs",
        "64",
        "--jobs",
        "10",
        "--policy",
        "t3d",
        "--policy-config",
        cfg.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("classes.debug.prio") && err.contains("priority"),
        "{err}"
    );
}

#[test]
fn unknown_packing_is_refused_with_the_choices() {
    let out = cosched(&[
        "sim",
        "--model",
        "lublin",
        "--procs",
        "16",
        "--jobs",
        "10",
        "--policy",
        "gang",
        "--opt",
        "packing=tetris",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("packing") && err.contains("best-fit"), "{err}");
}

#[test]
fn unknown_option_keys_are_refused_with_the_known_ones() {
    let run = |policy: &str, opt: &str| {
        let out = cosched(&[
            "sim", "--model", "lublin", "--procs", "16", "--jobs", "10", "--policy", policy,
            "--opt", opt,
        ]);
        assert!(!out.status.success(), "{policy} --opt {opt} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert_eq!(
        run("gang", "packng=best-fit").trim(),
        "error: policy gang: unknown option packng; known options: alternate, packing, queue, \
         relaxed, repack"
    );
    assert_eq!(
        run("fcfs", "packing=buddy").trim(),
        "error: policy fcfs: unknown option packing; fcfs takes no options"
    );
    assert_eq!(
        run("easy", "packing=buddy").trim(),
        "error: policy easy: unknown option packing; known options: variant"
    );
}
