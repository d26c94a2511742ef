//! The front door: `--help` lists every subcommand with a description, `--version` works;
//! input that cannot work is refused at once, saying what and where.

mod support;

use std::process::Command;

fn cosched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("cosched runs")
}

#[test]
fn help_lists_subcommands_with_descriptions() {
    let out = cosched(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for sub in ["demo", "workload", "sim", "cosim"] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(sub))
            .unwrap_or_else(|| panic!("--help does not list {sub}:\n{text}"));
        assert!(
            line.trim_start().len() > sub.len() + 5,
            "no description for {sub}: {line:?}"
        );
    }
}

#[test]
fn version_prints_the_crate_version() {
    let out = cosched(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
}

#[test]
fn unknown_subcommand_fails_with_usage() {
    let out = cosched(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

/// Work that cannot fit in memory is refused before it starts, with the flag to change, rather
/// than abort on a terabyte allocation or grow until the kernel kills it.
#[test]
fn runs_larger_than_memory_are_refused_before_they_start() {
    let dir = support::scratch_dir("cli", "too-large");
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "sim",
                "--model",
                "lublin",
                "--jobs",
                "1000000000",
                "--procs",
                "128",
            ],
            "--jobs 1000000000: simulating the generated jobs would need about",
        ),
        (
            &[
                "workload",
                "gen",
                "--jobs",
                "100000000000",
                "--procs",
                "128",
                "-o",
                "x.swf",
            ],
            "--jobs 100000000000: generating the jobs would need about",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(support::bin())
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(want) && err.contains("lower --jobs"),
            "{args:?}: {err}"
        );
    }
    let scenario = dir.path().join("huge.toml");
    std::fs::write(
        &scenario,
        "name = \"huge\"\n[machine]\nnodes = 1000000\npes_per_node = 1000\n\
         [[jobs]]\nprocs = 4\nwork = \"1s\"\ngranularity = 0.5\n",
    )
    .unwrap();
    let out = Command::new(support::bin())
        .args(["cosim", "--scenario"])
        .arg(&scenario)
        .args(["--scheme", "gs"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("nodes = 1000000, pes_per_node = 1000: simulating every PE would need"),
        "{err}"
    );
}

/// "NaN" in a trace is not a number (it was reported as a value too large for its field).
#[test]
fn nan_in_a_trace_is_reported_as_not_a_number() {
    let dir = support::scratch_dir("cli", "nan");
    let swf = dir.path().join("nan.swf");
    std::fs::write(
        &swf,
        "; MaxProcs: 8\n1 0 0 NaN 4 -1 -1 4 100 -1 1 1 1 1 1 -1 -1 -1\n",
    )
    .unwrap();
    let out = cosched(&["workload", "info", swf.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("nan.swf:2") && err.contains("not a number"),
        "{err}"
    );
    assert!(!err.contains("too large"), "{err}");
}
