//! What the end-to-end daemon tests share: the `cosched` binary, a scratch state directory
//! per test, and running a command against one cluster with its failure explained.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Compiles the C program `src` at -O2 into `exe` with `mpicc`, named explicitly
/// (`mpicc.mpich`, `mpicc.openmpi`: plain `mpicc` follows whichever MPI was installed last);
/// a compile error fails the test with the compiler's message.
pub fn mpicc(mpicc: &str, src: &Path, exe: &Path) {
    let out = Command::new(mpicc)
        .args(["-O2", "-o"])
        .arg(exe)
        .arg(src)
        .output()
        .unwrap_or_else(|e| panic!("{mpicc} runs: {e}"));
    assert!(
        out.status.success(),
        "{mpicc} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cosched")
}

/// A fresh, empty directory for one test (`cosched-PREFIX-NAME-XXXXXX` under the temp dir),
/// removed when the guard drops: also when the test fails, or returns early because it
/// cannot run here. Declare it before anything that runs in it (a cluster), so that those
/// stop first.
pub fn scratch_dir(prefix: &str, name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("cosched-{prefix}-{name}-"))
        .tempdir()
        .unwrap()
}

/// [`scratch_dir`] for an owner that removes it itself, after stopping what runs there (the
/// tests' cluster guards do, in their `Drop`).
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    scratch_dir(prefix, name).keep()
}

/// Runs `cosched ARGS` against the cluster whose state is in `state_dir`.
pub fn cosched(state_dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("COSCHED_STATE_DIR", state_dir)
        .output()
        .expect("cosched runs")
}

/// The stdout of a command that must have succeeded; `context` (a log, say) is shown with
/// the failure.
pub fn succeeded(args: &[&str], out: Output, context: &str) -> String {
    assert!(
        out.status.success(),
        "cosched {args:?} failed ({}): {}{}{context}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The pid in a daemon's pid file (which also records the process's start time).
pub fn pid_in_file(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The job id `cosched submit` printed.
pub fn job_id(stdout: &str) -> u64 {
    stdout.trim().parse().expect("submit prints the job id")
}
pub mod cluster;
pub mod marks;
pub mod mpi_names;
pub mod slurm_site;
pub mod user;

/// Says why a test did not run (or ran only in part), where the test output shows it: the
/// test harness captures `eprintln!` of a passing test, but not a write to the stderr handle.
pub fn notice(msg: &str) {
    cosched_workload::notice!("NOTICE: {msg}");
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Polls `pred` until it holds (at most `secs`: generous, on a loaded 2-core machine) and
/// returns what it gave; past the deadline the test fails with `what`.
pub fn until<T>(secs: u64, what: &str, pred: impl FnMut() -> Option<T>) -> T {
    until_or(secs, pred, || format!("{what} not reached in {secs} s"))
}

/// [`until`] failing with the message `why` builds (a log, say) past the deadline.
pub fn until_or<T>(secs: u64, mut pred: impl FnMut() -> Option<T>, why: impl Fn() -> String) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = pred() {
            return v;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(secs),
            "{}",
            why()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs `ip ARGS` quietly; whether it succeeded.
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the test runs as root (its effective user id is 0).
pub fn is_root() -> bool {
    cosched_proto::util::euid() == 0
}

/// The processes running `exe` (by their executable's path).
pub fn running(exe: &Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .collect()
}
