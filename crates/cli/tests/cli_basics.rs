//! The front door: `--help` lists every subcommand with a description, `--version` works.

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
