//! The daemons link the simulator's engine (for forecasts), never its reporting: plots, CSV
//! writers and hashing belong to `cosched-report`, and a root daemon carries no code it does
//! not run.

use std::process::Command;

/// Crates that come only with the reporting side; none may be in the daemons' build.
const REPORTING_ONLY: [&str; 4] = ["cosched-report", "plotters", "csv", "sha2"];

#[test]
fn daemons_link_the_simulator_engine_without_its_reporting() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "cosched-daemon",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} tree: {e}"));
    assert!(
        out.status.success(),
        "{cargo} tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"cosched-sim"),
        "the daemons forecast with cosched-sim; the tree does not show it:\n{tree}"
    );
    let found: Vec<&str> = REPORTING_ONLY
        .into_iter()
        .filter(|c| names.contains(c))
        .collect();
    assert!(
        found.is_empty(),
        "cosched-daemon depends on {found:?}, which only the reporting needs \
         (see `cargo tree -p cosched-daemon -i {}`)",
        found[0]
    );
}
