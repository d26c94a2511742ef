//! MPI programs under the resource manager (issue 11, item 1): a C program built with
//! Debian's MPICH (`mpicc`) runs with `cosched submit -n 8 PROGRAM`, no `mpiexec`, its ranks
//! starting through the PMI-1 server of the node managers, on a 4-node × 2-PE loopback
//! cluster, under fcfs and under gang scheduling with a second MPI job competing. The job's
//! exit code is the program's.
//!
//! Without `mpicc` (`.ci/run` installs `mpich` and `libmpich-dev`) the tests print a NOTICE
//! and return.

mod support;
use support::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// `eprintln!` past the test harness's capture, so the notice shows in the test output even
/// when the test passes.
macro_rules! notice {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

/// The tests share a 2-core machine: one MPI cluster at a time, or gang's time slices would
/// be lost in the noise of the other test's spinning ranks.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Builds tests/mpi/ring.c with `mpicc` into `dir`; `None` (after a NOTICE) without MPICH.
fn build_ring(dir: &Path) -> Option<PathBuf> {
    if Command::new("mpicc").arg("-show").output().is_err() {
        notice!(
            "NOTICE: skipping the MPI test: `mpicc` not found (install Debian's mpich and libmpich-dev, as .ci/run does)"
        );
        return None;
    }
    let src = dir.join("ring.c");
    std::fs::write(&src, include_str!("mpi/ring.c")).unwrap();
    let exe = dir.join("ring");
    let out = Command::new("mpicc")
        .arg("-O2")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("mpicc runs");
    assert!(
        out.status.success(),
        "mpicc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// A loopback cluster in its own state directory; stopped and removed on drop.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn up(dir: PathBuf, args: &[&str]) -> Cluster {
        std::fs::create_dir_all(&dir).unwrap();
        let c = Cluster { dir };
        let mut full = vec!["cluster", "up", "--nodes", "4", "--pes", "2"];
        full.extend_from_slice(args);
        c.ok(&full);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .env("COSCHED_STATE_DIR", &self.dir)
            .current_dir(&self.dir)
            .output()
            .expect("cosched runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        succeeded(args, self.run(args), "")
    }

    fn submit(&self, args: &[&str]) -> u64 {
        job_id(&self.ok(&[&["submit"], args].concat()))
    }

    fn job(&self, id: u64) -> Value {
        let v: Value = serde_json::from_str(&self.ok(&["acct", "--json"])).unwrap();
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .expect("job in acct")
    }

    /// Waits until the job has ended (at most `secs`) and returns its record.
    fn ended(&self, id: u64, secs: u64) -> Value {
        let start = Instant::now();
        loop {
            let j = self.job(id);
            if !["queued", "running", "suspended"].contains(&j["state"].as_str().unwrap()) {
                return j;
            }
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "job {id} did not end within {secs} s: {j}\nmm log:\n{}",
                std::fs::read_to_string(self.dir.join("logs/mm.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What rank `rank` of job `id` wrote to stdout.
    fn output(&self, id: u64, rank: u32) -> String {
        self.ok(&["output", &id.to_string(), "--rank", &rank.to_string()])
    }

    /// Asserts that the job completed with exit code 0 and that every rank printed the
    /// right neighbour and sums.
    fn assert_ring_ok(&self, id: u64, iterations: u32) {
        let j = self.ended(id, 60);
        let out0 = self.output(id, 0);
        assert_eq!(
            (j["state"].as_str(), j["exit_code"].as_i64()),
            (Some("completed"), Some(0)),
            "job {id}: {j}\nrank 0 wrote: {out0}"
        );
        for rank in 0..8u32 {
            let want = format!(
                "rank {rank} of 8: ring from {}, allreduce 28, ring sum 28, {iterations} iterations, ok",
                (rank + 7) % 8
            );
            let got = self.output(id, rank);
            assert!(got.contains(&want), "job {id} rank {rank} wrote {got:?}");
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .args(["cluster", "down"])
            .env("COSCHED_STATE_DIR", &self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn an_mpich_program_runs_under_fcfs_and_its_exit_code_is_the_jobs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("mpi", "mpi-fcfs");
    let Some(ring) = build_ring(&dir) else {
        return;
    };
    let ring = ring.to_str().unwrap();
    let c = Cluster::up(dir.join("state"), &[]);
    let id = c.submit(&["-n", "8", ring, "5"]);
    c.assert_ring_ok(id, 5);

    // Rank 0 returns 3 after a correct run: the job fails with the program's code.
    let id = c.submit(&["-n", "8", ring, "1", "3"]);
    let j = c.ended(id, 60);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("failed"), Some(3)),
        "{j}"
    );
    // The ranks did get through MPI_Init and the sums before rank 0's exit.
    assert!(
        c.output(id, 0).contains("allreduce 28"),
        "{}",
        c.output(id, 0)
    );
    // The cluster first: with its state directory gone, `cluster down` could not find it.
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_mpich_programs_share_the_machine_under_gang_scheduling() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("mpi", "mpi-gang");
    let Some(ring) = build_ring(&dir) else {
        return;
    };
    let ring = ring.to_str().unwrap();
    let c = Cluster::up(
        dir.join("state"),
        &["--policy", "gang", "--mpl", "2", "--quantum", "10ms"],
    );
    // Both jobs take all 8 PEs: gang runs them in alternate 10 ms slots, so each is stopped
    // in the middle of its start-up fences and of its communication, and resumed.
    let a = c.submit(&["-n", "8", ring, "5"]);
    let b = c.submit(&["-n", "8", ring, "5"]);
    c.assert_ring_ok(a, 5);
    c.assert_ring_ok(b, 5);
    let stopped: f64 = [a, b]
        .iter()
        .map(|&id| c.job(id)["suspended_s"].as_f64().unwrap())
        .sum();
    assert!(
        stopped > 0.0,
        "the two jobs were never time-sliced (suspended 0 s): the test did not test gang"
    );
    // The cluster first: with its state directory gone, `cluster down` could not find it.
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
