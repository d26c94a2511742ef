//! Bare PMIx clients (C programs linking OpenPMIx's client library, no MPI) started by
//! `pmix-node`: what the server answers in orders of events an MPI program only meets by
//! chance, replayed on purpose.
//!
//! Without OpenPMIx (a build with the stand-in), a test prints a NOTICE and returns.

use std::path::{Path, PathBuf};
use std::process::Command;

const HARNESS: &str = env!("CARGO_BIN_EXE_pmix-node");

/// `tests/clients/NAME.c` compiled against OpenPMIx (`cc`, flags from pkg-config, both needed
/// to build this crate with OpenPMIx at all) into `dir`.
fn compile(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write the program");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "pmix"])
        .output()
        .expect("pkg-config runs (it found OpenPMIx for this build)");
    assert!(
        flags.status.success(),
        "pkg-config --cflags --libs pmix failed"
    );
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(String::from_utf8_lossy(&flags.stdout).split_whitespace())
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "cc {name}.c failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn a_global_key_committed_while_a_local_peers_request_is_in_flight_is_found() {
    if !cosched_pmix::AVAILABLE {
        eprintln!(
            "NOTICE: skipping the PMIx client test: this cosched-pmix was built without OpenPMIx (install libpmix-dev and pkg-config, as .ci/run does)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = compile(
        dir.path(),
        "get_after_commit",
        include_str!("clients/get_after_commit.c"),
    );
    let cues = dir.path().join("cues");
    std::fs::create_dir(&cues).unwrap();
    let out = Command::new(HARNESS)
        .args([
            "--node",
            "n0",
            "--timeout",
            "60",
            "--job",
            "race",
            "n0:2",
            "--",
        ])
        .arg(&prog)
        .arg(&cues)
        .output()
        .expect("pmix-node runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Rank 0 asked its server for rank 1's key after its own look-up missed; the server read
    // rank 1's commit first and must answer from it, not "not found".
    assert!(text.contains("rank 0: got put-by-rank-1"), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
}
