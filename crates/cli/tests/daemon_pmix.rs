//! Open MPI and mpi4py under the resource manager: `cosched submit -n 4 PROGRAM`
//! with no `mpirun`, the ranks starting through the job's PMIx helper on each node
//! (`cosched pmix-helper`, OpenPMIx's server), on one node and across two (the fences
//! through the tree). Programs are compiled with `mpicc.openmpi` explicitly; mpi4py runs
//! under `/usr/bin/python3`. Without them (`.ci/run` installs `openmpi-bin`,
//! `libopenmpi-dev`, `python3-mpi4py`, `libpmix-dev`) the tests print a NOTICE and return.

mod support;
use support::cluster::Cluster;
use support::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One MPI cluster at a time on the 2-core machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Compiles `src` (its text) as `name` with `mpicc.openmpi`; `None` (after a NOTICE) without
/// Open MPI or without OpenPMIx in this build.
fn build(dir: &Path, name: &str, src: &str) -> Option<PathBuf> {
    if !cosched_pmix::AVAILABLE {
        notice(
            "NOTICE: skipping the Open MPI test: this cosched was built without OpenPMIx (libpmix-dev)",
        );
        return None;
    }
    if Command::new("mpicc.openmpi")
        .arg("-showme")
        .output()
        .is_err()
    {
        notice(
            "NOTICE: skipping the Open MPI test: `mpicc.openmpi` not found (install openmpi-bin and libopenmpi-dev, as .ci/run does)",
        );
        return None;
    }
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    mpicc("mpicc.openmpi", &c, &exe);
    Some(exe)
}

/// cosched-pmix's test program (`crates/pmix/tests/mpi/pmix_check.c`, one mode per test),
/// built in `dir` as [`build`] does.
fn build_check(dir: &Path) -> Option<PathBuf> {
    let src = include_str!("../../pmix/tests/mpi/pmix_check.c");
    build(dir, "pmix_check", src)
}

fn output(c: &Cluster, id: u64, rank: u32) -> String {
    c.ok(&["output", &id.to_string(), "--rank", &rank.to_string()])
}

/// What rank `rank` of job `id` wrote to stderr (`cosched output` prints it on its own).
fn errors(c: &Cluster, id: u64, rank: u32) -> String {
    let out = c.run(&["output", &id.to_string(), "--rank", &rank.to_string()]);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every rank of job `id` (4 ranks) completed the ring with world size 4 and the right sums.
fn assert_ring_of_four(c: &Cluster, id: u64) {
    let j = c.ended(id, 120);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0)),
        "job {id}: {j}\nrank 0 wrote: {}",
        output(c, id, 0)
    );
    for rank in 0..4u32 {
        let want = format!(
            "rank {rank} of 4: ring from {}, allreduce 6, ring sum 6, 5 iterations, ok",
            (rank + 3) % 4
        );
        let got = output(c, id, rank);
        assert!(got.contains(&want), "job {id} rank {rank} wrote {got:?}");
    }
}

#[test]
fn an_open_mpi_program_forms_one_world_of_four_on_one_node() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "one-node");
    let Some(ring) = build(tmp.path(), "ring", include_str!("mpi/ring.c")) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "1", "--pes", "4"]);
    let id = c.submit(&["-n", "4", ring.to_str().unwrap(), "5"]);
    assert_ring_of_four(&c, id);
}

#[test]
fn an_open_mpi_program_forms_one_world_of_four_across_two_nodes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "two-nodes");
    let Some(ring) = build(tmp.path(), "ring", include_str!("mpi/ring.c")) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "2", "--pes", "2"]);
    let id = c.submit(&["-n", "4", ring.to_str().unwrap(), "5"]);
    assert_ring_of_four(&c, id);
    // mpi4py (Debian's is built on Open MPI) through the same servers.
    let py = tmp.path().join("collectives.py");
    std::fs::write(&py, include_str!("../../pmix/tests/mpi/collectives.py")).unwrap();
    let id = c.submit(&["-n", "4", "/usr/bin/python3", py.to_str().unwrap(), "4"]);
    let j = c.ended(id, 120);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0)),
        "mpi4py job {id}: {j}\nrank 0 wrote: {}",
        output(&c, id, 0)
    );
    for rank in 0..4u32 {
        let got = output(&c, id, rank);
        assert!(
            got.contains(&format!("rank {rank} of 4: allreduce 6,")) && got.contains(": ok"),
            "mpi4py rank {rank} wrote {got:?}"
        );
    }
}

/// With `pmix_base_async_modex=1` and `pmix_base_collect_data=0`, Open MPI's fence in
/// `MPI_Init` brings no addresses: each rank fetches a remote peer's by direct modex, which
/// goes through the machine manager to the peer's node and its helper.
#[test]
fn an_open_mpi_job_across_two_nodes_gets_its_peers_addresses_by_direct_modex() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "direct-modex");
    let Some(ring) = build(tmp.path(), "ring", include_str!("mpi/ring.c")) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "2", "--pes", "2"]);
    let export = "ALL,OMPI_MCA_pmix_base_async_modex=1,OMPI_MCA_pmix_base_collect_data=0";
    let id = c.submit(&["-n", "4", "--export", export, ring.to_str().unwrap(), "5"]);
    assert_ring_of_four(&c, id);
}

/// How long after its `MPI_Abort` an 8-rank job may end: the abort goes from rank 1's helper
/// to its node manager, the machine manager and the three other nodes, which kill their ranks
/// (8–16 ms measured on the loaded 2-core VM: docs/daemons.md, *PMIx*).
const ABORT_ENDS_JOB_WITHIN_S: f64 = 1.0;

#[test]
fn mpi_abort_in_an_eight_rank_open_mpi_job_ends_it_within_a_second_naming_the_rank_and_status() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "abort");
    let Some(check) = build_check(tmp.path()) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "4", "--pes", "2"]);
    // Without the abort ending the job, the seven other ranks would wait in their broadcast
    // until the time limit.
    let id = c.submit(&["-n", "8", "-t", "5m", check.to_str().unwrap(), "abort", "8"]);
    let j = c.ended(id, 120);
    let error = j["error"].as_str().unwrap_or_default();
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("failed"), Some(7)),
        "{j}"
    );
    assert!(
        error.contains("rank 1 on node") && error.contains("MPI_Abort with status 7"),
        "the record names the rank, its node and the abort: {j}"
    );
    // Rank 1 printed the wall-clock time of its abort; the record's end is the machine
    // manager's wall clock, on the same host.
    let said = output(&c, id, 1);
    let abort_at = said
        .lines()
        .find_map(|l| l.strip_prefix("rank 1: abort at "))
        .and_then(|t| t.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("rank 1 printed its abort time: {said:?}"))
        / 1e6;
    let end = j["end"]
        .as_f64()
        .expect("an ended job's record has its end");
    eprintln!(
        "job {id} ended {:.3} s after rank 1's MPI_Abort",
        end - abort_at
    );
    assert!(
        end - abort_at < ABORT_ENDS_JOB_WITHIN_S,
        "the job ended {:.3} s after the abort: {j}",
        end - abort_at
    );
    let left = c.until(30, "no process of the job left", || {
        let left = running(&check);
        left.is_empty().then_some(left)
    });
    assert!(left.is_empty());
}

#[test]
fn an_open_mpi_job_whose_ranks_reach_no_server_is_reported_as_worlds_of_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "alone");
    let Some(ring) = build(tmp.path(), "ring", include_str!("mpi/ring.c")) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "1", "--pes", "2"]);
    // Without a server each rank is an MPI world of its own: the ring of one is "right", the
    // program exits 0, and only the node manager can tell.
    let id = c.submit(&["-n", "2", "--mpi", "none", ring.to_str().unwrap(), "200"]);
    let j = c.ended(id, 120);
    let out = output(&c, id, 0);
    assert!(out.contains("rank 0 of 1:"), "a world of one: {out}");
    assert_eq!(j["state"].as_str(), Some("completed"), "{j}\n{out}");
    let error = j["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("warning: rank ")
            && error.contains("loaded MPI (libmpi.so")
            && error.contains("world of one rank, not one of 2")
            && error.contains("--mpi none"),
        "the record says what happened and what to do: {j}"
    );
    let err = errors(&c, id, 0);
    assert!(
        err.contains("cosched: rank 0: loaded MPI (libmpi.so"),
        "and so does the rank's error output: {err}"
    );
    // The same program given its server forms one world and is not reported.
    let id = c.submit(&["-n", "2", ring.to_str().unwrap(), "200"]);
    let j = c.ended(id, 120);
    assert_eq!(j["state"].as_str(), Some("completed"), "{j}");
    assert!(j["error"].is_null(), "{j}");
    assert!(output(&c, id, 1).contains("rank 1 of 2:"));
}

#[test]
fn mpi_comm_spawn_under_open_mpi_is_refused_in_the_ranks_own_output() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "spawn");
    let Some(check) = build_check(tmp.path()) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "1", "--pes", "2"]);
    let id = c.submit(&["-n", "2", "-t", "5m", check.to_str().unwrap(), "spawn", "2"]);
    let j = c.ended(id, 120);
    let out = output(&c, id, 0);
    assert_eq!(j["state"].as_str(), Some("completed"), "{j}\n{out}");
    assert!(out.contains("MPI_Comm_spawn failed"), "{out}");
    let err = errors(&c, id, 0);
    assert!(
        err.contains(
            "cosched: rank 0: MPI_Comm_spawn / PMIx_Spawn is not supported by cosched: submit every process of the job at once"
        ),
        "the refusal, in the words of the server, reaches the rank's error output: {err}"
    );
}

/// `MPI_Comm_accept` in one Open MPI job and `MPI_Comm_connect` in another, on another node,
/// to the port the first published: the ports meet through the name service, and the
/// `PMIx_Connect` that would join the two jobs is refused. Neither job hangs: every rank's
/// call fails, the refusal in the server's words reaches every rank's error output (each
/// node's helper tells its own ranks, not the other job's), and both jobs end.
#[test]
fn mpi_comm_connect_between_open_mpi_jobs_is_refused_in_every_ranks_output_and_never_hangs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch_dir("pmix", "connect");
    let Some(check) = build_check(tmp.path()) else {
        return;
    };
    let c = Cluster::up_in(tmp.path().join("state"), &["--nodes", "2", "--pes", "2"]);
    let name = tmp.path().join("svc").display().to_string();
    let prog = check.to_str().unwrap();
    let mut jobs = Vec::new();
    for (mode, node) in [("accept", "n0"), ("connect", "n1")] {
        let args = [
            "-n",
            "2",
            "-t",
            "5m",
            "--nodelist",
            node,
            prog,
            mode,
            "2",
            &name,
        ];
        jobs.push((mode, c.submit(&args)));
    }
    for (mode, id) in jobs {
        let j = c.ended(id, 180);
        let call = if mode == "accept" {
            "MPI_Comm_accept"
        } else {
            "MPI_Comm_connect"
        };
        for rank in 0..2 {
            let out = output(&c, id, rank);
            assert_eq!(j["state"].as_str(), Some("completed"), "{j}\n{out}");
            assert!(
                out.contains(&format!("{call} failed")),
                "job {id} rank {rank}: {out}"
            );
            let err = errors(&c, id, rank);
            let refusal = format!(
                "cosched: rank {rank}: MPI_Comm_connect/accept / PMIx_Connect is not supported by cosched"
            );
            assert_eq!(
                err.matches(&refusal).count(),
                1,
                "job {id} rank {rank}: the refusal reaches the rank's error output once: {err}"
            );
        }
    }
}

/// `MPI_Publish_name` in one Open MPI job, `MPI_Lookup_name` in another on another node
/// (through PMIx and the machine manager's name service), not found by another user's job,
/// and gone with its job when left published.
#[test]
fn a_name_an_open_mpi_job_publishes_is_found_by_another_job_on_another_node_only_of_its_user() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !cosched_pmix::AVAILABLE {
        notice("skipping the Open MPI test: this cosched was built without OpenPMIx (libpmix-dev)");
        return;
    }
    let tmp = scratch_dir("pmix", "names");
    let Some(prog) = mpi_names::build(tmp.path(), "mpicc.openmpi") else {
        return;
    };
    mpi_names::across_jobs_nodes_and_users(
        "a_name_an_open_mpi_job_publishes_is_found_by_another_job_on_another_node_only_of_its_user",
        tmp.path(),
        &prog,
    );
}
