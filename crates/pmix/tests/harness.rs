//! `pmix-node` itself, without an MPI program: what it needs of the machine to start.
//!
//! Without OpenPMIx (a build with the stand-in) or without `unshare` and the right to make a
//! PID namespace (root), the test prints a NOTICE and returns.

use std::process::Command;

const HARNESS: &str = env!("CARGO_BIN_EXE_pmix-node");

/// A run killed before its cleanup leaves its server directory in the temporary directory; a
/// later run that is given the same pid (pids are reused) must start anyway. The run here is
/// pid 1 of a PID namespace of its own, beside a leftover directory named after pid 1.
#[test]
fn pmix_node_starts_beside_a_directory_left_by_an_earlier_run_with_its_pid() {
    if !cosched_pmix::AVAILABLE {
        eprintln!("NOTICE: skipping: this cosched-pmix was built without OpenPMIx");
        return;
    }
    let root = Command::new("id").arg("-u").output().map(|o| o.stdout);
    if Command::new("unshare").arg("--version").output().is_err()
        || !root.is_ok_and(|uid| uid == b"0\n")
    {
        eprintln!("NOTICE: skipping: a PID namespace needs `unshare` (util-linux) and root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let leftover = tmp.path().join("pmix-node.1");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("pmix.ready"), "an earlier run's").unwrap();
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", HARNESS])
        .args([
            "--node",
            "n0",
            "--timeout",
            "60",
            "--job",
            "j0",
            "n0:1",
            "--",
        ])
        .arg("true")
        .env("TMPDIR", tmp.path())
        .output()
        .expect("unshare runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{:?}: {text}", out.status);
    assert!(text.contains("pmix-node: exit j0:0 code 0"), "{text}");
    // The leftover is not the run's to remove; the run's own directory is gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["pmix-node.1"], "{text}");
}
