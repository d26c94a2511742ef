//! The daemons link the simulator's engine (for forecasts), never its reporting: plots, CSV
//! writers and hashing belong to `cosched-report`, tables for people to `cosched-client`, and
//! a root daemon carries no code it does not run.

use std::process::Command;

/// Crates that come only with the reporting side; none may be in the daemons' build.
const REPORTING_ONLY: [&str; 4] = ["cosched-report", "plotters", "csv", "sha2"];

/// Crates that only the user's side needs (the tables of `queue`, `status`, `acct`).
const CLIENT_ONLY: [&str; 2] = ["cosched-client", "comfy-table"];

/// The daemons' crates: the machine manager, the node manager and what they share.
const DAEMONS: [&str; 3] = ["cosched-mm", "cosched-nm", "cosched-proto"];

#[test]
fn daemons_link_the_simulator_engine_without_its_reporting() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let packages = DAEMONS.into_iter().flat_map(|d| ["-p", d]);
    let out = Command::new(&cargo)
        .args(["tree", "--offline"])
        .args(packages)
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
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
        .chain(CLIENT_ONLY)
        .filter(|c| names.contains(c))
        .collect();
    assert!(
        found.is_empty(),
        "the daemons depend on {found:?}, which only the reporting or the client needs \
         (see `cargo tree -p {} -i {}`)",
        DAEMONS.join(" -p "),
        found[0]
    );
}
