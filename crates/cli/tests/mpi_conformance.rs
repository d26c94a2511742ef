//! The MPI conformance set (`tests/mpi-conformance/`) built with MPICH and with Open MPI and
//! run by `cosched submit -n 4` on a 2-node × 2-PE loopback cluster, its ranks starting
//! through the node managers' PMI-1 server (MPICH) or the jobs' PMIx helpers (Open MPI,
//! mpi4py), and, as the reference, by each MPI's own launcher (`mpiexec.mpich -n 4`,
//! `mpirun.openmpi -n 4`) on this one host. What fails under a launcher is listed with the
//! reason: the test fails if one of those starts passing, so each list follows the code, and
//! the lists side by side say where cosched differs from the MPI's own launcher. Without an
//! MPI's compiler or launcher its tests print a NOTICE and return.

mod support;
use support::cluster::Cluster;
use support::*;

#[path = "../../../tests/mpi-conformance/runner.rs"]
mod runner;

use runner::{Built, Launcher, Mpi, Own, Ran};

/// A job's time limit here: the set's programs take about a second; one that hangs (a known
/// failure) ends at its limit instead of holding the test.
const LIMIT: &str = "20s";

/// `cosched submit` on a running cluster as the launcher.
struct Submit<'a> {
    cluster: &'a Cluster,
    /// Which server the ranks use, for the table.
    server: &'static str,
}

impl Launcher for Submit<'_> {
    fn name(&self) -> String {
        format!("cosched submit ({}), 2 nodes x 2 PEs", self.server)
    }

    fn run(&self, argv: &[String], ranks: u32) -> Ran {
        let n = ranks.to_string();
        let mut args: Vec<&str> = vec!["-n", &n, "-t", LIMIT];
        args.extend(argv.iter().map(String::as_str));
        let id = self.cluster.submit(&args);
        let j = self.cluster.ended(id, 120);
        let output = (0..ranks)
            .map(|r| {
                self.cluster
                    .ok(&["output", &id.to_string(), "--rank", &r.to_string()])
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ran {
            code: j["exit_code"].as_i64().map(|c| c as i32),
            output: format!("{output}\njob record: {j}"),
        }
    }
}

#[test]
fn mpich_passes_the_conformance_set_under_cosched_submit() {
    let set = match Built::new(Mpi::Mpich) {
        Ok(set) => set,
        Err(why) => {
            eprintln!("NOTICE: skipping the MPICH conformance set: {why}");
            return;
        }
    };
    let tmp = scratch_dir("mpi", "conformance");
    let cluster = Cluster::up_in(tmp.path().join("state"), &["--nodes", "2", "--pes", "2"]);
    let submit = Submit {
        cluster: &cluster,
        server: "PMI-1",
    };
    set.check(&submit, 4, KNOWN);
}

#[test]
fn open_mpi_passes_the_conformance_set_under_cosched_submit() {
    if !cosched_pmix::AVAILABLE {
        eprintln!(
            "NOTICE: skipping the Open MPI conformance set: cosched was built without OpenPMIx"
        );
        return;
    }
    let set = match Built::new(Mpi::OpenMpi) {
        Ok(set) => set,
        Err(why) => {
            eprintln!("NOTICE: skipping the Open MPI conformance set: {why}");
            return;
        }
    };
    let tmp = scratch_dir("mpi", "conformance-ompi");
    let cluster = Cluster::up_in(tmp.path().join("state"), &["--nodes", "2", "--pes", "2"]);
    let submit = Submit {
        cluster: &cluster,
        server: "PMIx",
    };
    set.check(&submit, 4, OPEN_MPI_KNOWN);
}

/// Builds the set for `mpi` and runs it under the MPI's own launcher with 4 ranks, checking
/// the verdicts against `known`; a NOTICE and nothing else without that MPI.
fn under_own_launcher(mpi: Mpi, known: &[(&str, &str)]) {
    let own = Own { mpi };
    let set = match own.available().and_then(|()| Built::new(mpi)) {
        Ok(set) => set,
        Err(why) => {
            eprintln!("NOTICE: skipping the {mpi:?} conformance set under its own launcher: {why}");
            return;
        }
    };
    set.check(&own, 4, known);
}

#[test]
fn mpich_passes_the_conformance_set_under_its_own_mpiexec() {
    under_own_launcher(Mpi::Mpich, MPICH_OWN_KNOWN);
}

#[test]
fn open_mpi_passes_the_conformance_set_under_its_own_mpirun() {
    under_own_launcher(Mpi::OpenMpi, OPEN_MPI_OWN_KNOWN);
}

/// What fails for MPICH under `mpiexec.mpich -n 4` on one host, and why.
const MPICH_OWN_KNOWN: &[(&str, &str)] = &[(
    "onesided",
    "Debian's MPICH 4.0.2 (ch4:ucx) gets stale values across MPI_Win_fence on this machine, \
         as under cosched submit",
)];

/// What fails for Open MPI under `mpirun.openmpi -n 4` on one host, and why.
const OPEN_MPI_OWN_KNOWN: &[(&str, &str)] = &[(
    "spawn",
    "mpirun serves MPI_Comm_spawn, and the program checks the error cosched's PMIx helper \
         gives it instead (cosched starts every process of a job at submission)",
)];

/// What fails for Open MPI under cosched today, and why.
const OPEN_MPI_KNOWN: &[(&str, &str)] = &[(
    "onesided",
    "Open MPI 4.1 picks no one-sided component that works over TCP between hosts \
         (MPI_Win_create: MPI_ERR_WIN), as under mpirun --mca btl tcp,self",
)];

/// What fails for MPICH under cosched today, and why.
const KNOWN: &[(&str, &str)] = &[(
    "onesided",
    "Debian's MPICH 4.0.2 (ch4:ucx) gets stale values across MPI_Win_fence on this \
         machine, under its own mpiexec as well",
)];
