//! MPI programs under the resource manager: a C program built with
//! Debian's MPICH (`mpicc.mpich`) runs with `cosched submit -n 8 PROGRAM`, no `mpiexec`, its ranks
//! starting through the PMI-1 server of the node managers, on a 4-node × 2-PE loopback
//! cluster, under fcfs and under gang scheduling with a second MPI job competing. The job's
//! exit code is the program's. Beside it, on the same cluster, an Open MPI program and an
//! mpi4py one (their ranks starting through the jobs' PMIx helpers), under fcfs and under gang.
//!
//! Without `mpicc.mpich` (`.ci/run` installs `mpich` and `libmpich-dev`) the tests print a NOTICE
//! and return.

mod support;
use support::cluster::Cluster;
use support::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

use cosched_workload::notice;

/// The tests share a 2-core machine: one MPI cluster at a time, or gang's time slices would
/// be lost in the noise of the other test's spinning ranks.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Builds tests/mpi/ring.c with `mpicc.mpich` into `dir`; `None` (after a NOTICE) without MPICH.
fn build_ring(dir: &Path) -> Option<PathBuf> {
    if Command::new("mpicc.mpich").arg("-show").output().is_err() {
        notice!(
            "NOTICE: skipping the MPI test: `mpicc.mpich` not found (install Debian's mpich and libmpich-dev, as .ci/run does)"
        );
        return None;
    }
    let src = dir.join("ring.c");
    std::fs::write(&src, include_str!("mpi/ring.c")).unwrap();
    let exe = dir.join("ring");
    mpicc("mpicc.mpich", &src, &exe);
    Some(exe)
}

/// Builds tests/mpi/monitored.c with `mpicc.mpich` into `dir` (MPICH is there: `build_ring` said so).
fn build_monitored(dir: &Path) -> PathBuf {
    let src = dir.join("monitored.c");
    std::fs::write(&src, include_str!("mpi/monitored.c")).unwrap();
    let exe = dir.join("monitored");
    mpicc("mpicc.mpich", &src, &exe);
    exe
}

/// The PMPI shim beside the cosched binary, built with the same profile if it is not there
/// (`cargo test -p cosched` builds only what the cli crate depends on).
fn shim() -> PathBuf {
    let exe = Path::new(bin());
    let profile_dir = exe.parent().unwrap();
    let so = profile_dir.join("libcosched_mpishim.so");
    let mut cargo = Command::new(option_env!("CARGO").unwrap_or("cargo"));
    cargo
        .args(["build", "-q", "-p", "cosched-mpishim"])
        .env("CARGO_TARGET_DIR", profile_dir.parent().unwrap());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    let out = cargo.output().expect("cargo runs");
    assert!(
        out.status.success() && so.is_file(),
        "cargo build -p cosched-mpishim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// The MPI tests' cluster: 4 nodes of 2 PEs.
const FOUR_BY_TWO: &[&str] = &["--nodes", "4", "--pes", "2"];

/// What the MPI tests ask of the shared test cluster.
trait MpiChecks {
    fn output(&self, id: u64, rank: u32) -> String;
    fn assert_ring_ok(&self, id: u64, iterations: u32);
}

impl MpiChecks for Cluster {
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

#[test]
fn an_mpich_program_runs_under_fcfs_and_its_exit_code_is_the_jobs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("mpi", "mpi-fcfs");
    let dir = tmp.path();
    let Some(ring) = build_ring(dir) else {
        return;
    };
    let ring = ring.to_str().unwrap();
    let c = Cluster::up_in(dir.join("state"), FOUR_BY_TWO);
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
}

#[test]
fn mpi_abort_in_an_mpich_job_ends_it_at_once_with_the_code_and_the_rank_named() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("mpi", "mpi-abort");
    let dir = tmp.path();
    if build_ring(dir).is_none() {
        return;
    }
    std::fs::write(
        dir.join("conformance.h"),
        include_str!("../../../tests/mpi-conformance/conformance.h"),
    )
    .unwrap();
    std::fs::write(
        dir.join("abort.c"),
        include_str!("../../../tests/mpi-conformance/abort.c"),
    )
    .unwrap();
    let exe = dir.join("abort");
    let out = Command::new("mpicc.mpich")
        .arg("-I")
        .arg(dir)
        .arg("-o")
        .arg(&exe)
        .arg(dir.join("abort.c"))
        .output()
        .expect("mpicc.mpich runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = Cluster::up_in(dir.join("state"), FOUR_BY_TWO);
    // Rank 1 calls MPI_Abort(MPI_COMM_WORLD, 7) while the other seven wait in a broadcast
    // from it: without the node manager ending the job, it runs to its time limit.
    let id = c.submit(&["-n", "8", "-t", "10m", exe.to_str().unwrap(), "8"]);
    let j = c.ended(id, 120);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("failed"), Some(7)),
        "{j}"
    );
    let error = j["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("rank 1 on node n0: MPI_Abort with status 7"),
        "the record names the rank, its node and the abort: {j}"
    );
    let ran = j["run_s"].as_f64().unwrap_or(f64::MAX);
    assert!(ran < 60.0, "the job ran {ran} s: {j}");
    let left = c.until(30, "no process of the job left", || {
        let left = running(&exe);
        left.is_empty().then_some(left)
    });
    assert!(left.is_empty());
}

#[test]
fn two_mpich_programs_share_the_machine_under_gang_scheduling() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("mpi", "mpi-gang");
    let dir = tmp.path();
    let Some(ring) = build_ring(dir) else {
        return;
    };
    let ring = ring.to_str().unwrap();
    let c = Cluster::up_in(
        dir.join("state"),
        &[
            FOUR_BY_TWO,
            &["--policy", "gang", "--mpl", "2", "--quantum", "10ms"],
        ]
        .concat(),
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
}

/// The processes whose command line names `path` (a program, or the script python runs).
fn running_program(path: &Path) -> Vec<i32> {
    let path = path.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == path.as_bytes()))
        })
        .collect()
}

/// `crates/cli/tests/mpi/ring.c` built with `mpicc.openmpi` into `dir` as `ring-ompi`; `None`
/// (after a NOTICE) without Open MPI, mpi4py or OpenPMIx in this build.
fn build_open_mpi_ring(dir: &Path) -> Option<PathBuf> {
    if !cosched_pmix::AVAILABLE {
        notice!(
            "NOTICE: skipping the Open MPI part: this cosched was built without OpenPMIx (libpmix-dev)"
        );
        return None;
    }
    let mpi4py = Command::new("/usr/bin/python3")
        .args(["-c", "import mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success());
    if Command::new("mpicc.openmpi")
        .arg("-showme")
        .output()
        .is_err()
        || !mpi4py
    {
        notice!(
            "NOTICE: skipping the Open MPI part: `mpicc.openmpi` or mpi4py missing (install openmpi-bin, libopenmpi-dev and python3-mpi4py, as .ci/run does)"
        );
        return None;
    }
    let src = dir.join("ring.c");
    std::fs::write(&src, include_str!("mpi/ring.c")).unwrap();
    let exe = dir.join("ring-ompi");
    mpicc("mpicc.openmpi", &src, &exe);
    Some(exe)
}

/// Submits, all at once with 8 ranks each on a 4-node × 2-PE cluster under `policy`, an MPICH
/// ring, an Open MPI ring and the mpi4py collectives (allreduce, bcast, scatter, size); asserts
/// that every job completed with the right answers on every rank and that no process of any
/// of them is left (none stopped, none orphaned). Returns the cluster, its directory and the
/// jobs' records for the policy's own checks, in the order they are to be dropped (the
/// cluster is brought down from its state in the directory: keep the tuple whole, as bindings
/// of its fields drop in reverse); `None` (after a NOTICE) without the MPIs.
fn three_mpis_of_eight_ranks(
    name: &str,
    policy: &[&str],
) -> Option<(Cluster, tempfile::TempDir, Vec<Value>)> {
    let tmp = scratch_dir("mpi", name);
    let dir = tmp.path();
    let mpich = build_ring(dir)?;
    let ompi = build_open_mpi_ring(dir)?;
    let py = dir.join("collectives.py");
    std::fs::write(&py, include_str!("../../pmix/tests/mpi/collectives.py")).unwrap();
    let c = Cluster::up_in(dir.join("state"), &[FOUR_BY_TWO, policy].concat());
    let rings = [
        c.submit(&["-n", "8", "-t", "5m", mpich.to_str().unwrap(), "5"]),
        c.submit(&["-n", "8", "-t", "5m", ompi.to_str().unwrap(), "5"]),
    ];
    let py_job = c.submit(&[
        "-n",
        "8",
        "-t",
        "5m",
        "/usr/bin/python3",
        py.to_str().unwrap(),
        "8",
    ]);
    for id in rings {
        c.ended(id, 300);
        c.assert_ring_ok(id, 5);
    }
    let j = c.ended(py_job, 300);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0)),
        "mpi4py job {py_job}: {j}\nrank 0 wrote: {}",
        c.output(py_job, 0)
    );
    for rank in 0..8u32 {
        let got = c.output(py_job, rank);
        let want = format!(
            "rank {rank} of 8: allreduce 28, bcast {{'from': 0, 'size': 8}}, scatter {}: ok",
            rank * rank
        );
        assert!(got.contains(&want), "mpi4py rank {rank} wrote {got:?}");
    }
    for program in [&mpich, &ompi, &py] {
        let left = c.until(30, "no process of the jobs left", || {
            let left = running_program(program);
            left.is_empty().then_some(left)
        });
        assert!(left.is_empty());
    }
    let records = [rings[0], rings[1], py_job]
        .iter()
        .map(|&id| c.job(id))
        .collect();
    Some((c, tmp, records))
}

#[test]
fn mpich_open_mpi_and_mpi4py_jobs_of_eight_ranks_complete_under_fcfs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    three_mpis_of_eight_ranks("three-fcfs", &[]);
}

#[test]
fn mpich_open_mpi_and_mpi4py_jobs_of_eight_ranks_complete_sharing_the_pes_under_gang() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Kept whole: its fields drop in order, the cluster before its directory.
    let Some(kept) = three_mpis_of_eight_ranks(
        "three-gang",
        &["--policy", "gang", "--mpl", "2", "--quantum", "10ms"],
    ) else {
        return;
    };
    let jobs = &kept.2;
    // Each job takes all 8 PEs, so two running at once are in two rows of the gang matrix,
    // sharing every PE by turns.
    let span = |j: &Value| (j["start"].as_f64().unwrap(), j["end"].as_f64().unwrap());
    let overlapped = (0..jobs.len()).any(|a| {
        (a + 1..jobs.len()).any(|b| {
            let ((sa, ea), (sb, eb)) = (span(&jobs[a]), span(&jobs[b]));
            sa < eb && sb < ea
        })
    });
    assert!(
        overlapped,
        "no two of the 8-rank jobs ran at the same time: {jobs:?}"
    );
    let stopped: f64 = jobs
        .iter()
        .map(|j| j["suspended_s"].as_f64().unwrap())
        .sum();
    assert!(
        stopped > 0.0,
        "the jobs were never time-sliced (suspended 0 s): the test did not test gang: {jobs:?}"
    );
}

#[test]
fn with_the_pmpi_shim_the_node_managers_count_every_mpi_call_the_program_made() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("mpi", "mpi-shim");
    let dir = tmp.path();
    if build_ring(dir).is_none() {
        return;
    }
    let prog = build_monitored(dir);
    let shim = shim();
    let c = Cluster::up_in(dir.join("state"), FOUR_BY_TWO);
    let id = Command::new(bin())
        .args([
            "submit",
            "-n",
            "8",
            "--monitor",
            prog.to_str().unwrap(),
            "4",
        ])
        .env("COSCHED_STATE_DIR", &c.dir)
        .env("COSCHED_MPISHIM", &shim)
        .output()
        .expect("cosched runs");
    let id = job_id(&succeeded(&["submit", "--monitor"], id, ""));
    let j = c.ended(id, 90);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0)),
        "{j}\nrank 0: {}",
        c.output(id, 0)
    );
    for node in 0..4 {
        let m: Value =
            serde_json::from_str(&c.ok(&["status", "--node", &format!("n{node}"), "--json"]))
                .unwrap();
        let procs: Vec<&Value> = m["procs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["job"] == id)
            .collect();
        assert_eq!(procs.len(), 2, "node n{node}: {m}");
        for p in procs {
            let rank = p["rank"].as_u64().unwrap() as u32;
            // "rank R: send S recv V wait W barrier B allreduce A bcast C ok"
            let out = c.output(id, rank);
            let words: Vec<&str> = out.split_whitespace().collect();
            assert_eq!(words.last(), Some(&"ok"), "rank {rank}: {out}");
            let mut total = 0;
            for kind in ["send", "recv", "wait", "barrier", "allreduce", "bcast"] {
                let at = words.iter().position(|w| *w == kind).unwrap();
                let did: u64 = words[at + 1].parse().unwrap();
                assert!(did > 0);
                total += did;
                assert_eq!(
                    p["by_kind"][kind].as_u64().unwrap_or(0),
                    did,
                    "rank {rank} {kind}: the program says {out:?}, the monitor {p}"
                );
            }
            assert_eq!(p["count"].as_u64().unwrap(), total, "{p}");
            // 64 doubles per send and receive, 4 bytes per allreduce and bcast.
            let (sends, allr) = (
                p["by_kind"]["send"].as_u64().unwrap(),
                p["by_kind"]["allreduce"].as_u64().unwrap(),
            );
            assert_eq!(
                p["bytes"].as_u64().unwrap(),
                2 * 512 * sends + 4 * allr + 4 * p["by_kind"]["bcast"].as_u64().unwrap(),
                "{p}"
            );
        }
    }
    drop(c);
}

/// `MPI_Publish_name` in one MPICH job, `MPI_Lookup_name` in another on another node (through
/// PMI-1's `publish_name`/`lookup_name` and the machine manager's name service), not found by
/// another user's job, and gone with its job when left published.
#[test]
fn a_name_an_mpich_job_publishes_is_found_by_another_job_on_another_node_only_of_its_user() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("mpi", "names");
    let Some(prog) = mpi_names::build(tmp.path(), "mpicc.mpich") else {
        return;
    };
    mpi_names::across_jobs_nodes_and_users(
        "a_name_an_mpich_job_publishes_is_found_by_another_job_on_another_node_only_of_its_user",
        tmp.path(),
        &prog,
    );
}
