//! MPI worlds of one: a rank of a job of several ranks that loaded an MPI library but never
//! reached the job's PMI-1 or PMIx server ran as an MPI world of its own rank, and its
//! answers are not the job's. It says nothing itself (`MPI_Comm_size` is 1, the program
//! exits 0), so the node manager finds it out and says so (docs/daemons.md, "Worlds of one").
//!
//! *Reached a server*: the rank wrote a PMI-1 line, or the job's PMIx helper saw it connect.
//! *Loaded MPI*: a library whose file name starts with `libmpi` (Open MPI's `libmpi.so.40`,
//! MPICH's `libmpich.so.12` and `libmpi.so.12`, mpi4py's `dlopen` of either) is mapped in the
//! rank's process: the shell looks at `/proc/PID/maps` ([`Effect::LookForMpi`]) a few times
//! after the rank starts ([`LOOKS`] apart, then every [`LOOK_EVERY`]) until it has either
//! answer.
//! A rank whose process is a shell running the program, or that ends before the first look,
//! is not looked into: the check reports only what it saw.
//!
//! At the rank's exit a world of one is reported: under `--mpi pmix`, asked explicitly, the
//! rank fails with the reason; else the job's record carries it as a warning
//! ([`FromNode::Warning`]). Either way the same words are appended to the rank's error output.

use std::collections::{BTreeMap, BTreeSet};

use cosched_core::{Dur, JobId, Time};

use super::core::{Effect, Level, NmCore};
use cosched_proto::jobio::Mpi;
use cosched_proto::proto::{FromNode, RankExit};

/// When a rank's process is looked into: this long after its start, then after each look
/// (then every [`LOOK_EVERY`]). MPI's libraries are mapped at its
/// start (a C program) or when the program imports them (Python's mpi4py, within a second).
pub const LOOKS: [Dur; 3] = [
    Dur::from_millis(100),
    Dur::from_millis(500),
    Dur::from_millis(2_000),
];

/// Then, until the rank reaches a server or exits.
pub const LOOK_EVERY: Dur = Dur::from_secs(10);

/// What the node manager knows of a job's ranks' MPI.
#[derive(Clone, Debug, Default)]
pub(super) struct Worlds {
    /// The job's size and what its ranks were given (`--mpi`).
    size: u32,
    mpi: Mpi,
    /// Ranks that spoke to a server.
    reached: BTreeSet<u32>,
    /// Ranks with an MPI library mapped: its file name.
    loaded: BTreeMap<u32, String>,
    /// The next look into each rank still to look into: (when, looks so far).
    looks: BTreeMap<u32, (Time, usize)>,
}

impl Worlds {
    pub(super) fn new(size: u32, mpi: Mpi) -> Worlds {
        Worlds {
            size,
            mpi,
            ..Worlds::default()
        }
    }

    /// A rank of the job started: looked into when the job has several ranks.
    pub(super) fn started(&mut self, now: Time, rank: u32) {
        if self.size > 1 {
            self.looks.insert(rank, (now + LOOKS[0], 0));
        }
    }

    /// The rank spoke to the job's PMI-1 or PMIx server.
    pub(super) fn reached(&mut self, rank: u32) {
        self.reached.insert(rank);
        self.looks.remove(&rank);
    }

    /// What the job's record says of a rank that ran as a world of one (after "rank R on
    /// node N: "), when it is one: an MPI library mapped and no server reached.
    fn alone(&self, rank: u32) -> Option<String> {
        if self.reached.contains(&rank) {
            return None;
        }
        let lib = self.loaded.get(&rank)?;
        let n = self.size;
        let given = match self.mpi {
            Mpi::Auto => {
                "it was given both PMI-1 and PMIx, so its MPI speaks neither as cosched serves them: \
                 build it with Debian's mpich or openmpi (mpicc.mpich, mpicc.openmpi)"
            }
            Mpi::Pmix => {
                "it was given PMIx only (--mpi pmix): MPICH needs PMI-1, submit with --mpi auto (the default)"
            }
            Mpi::Pmi1 => {
                "it was given PMI-1 only (--mpi pmi1): Open MPI and mpi4py need PMIx, submit with --mpi auto (the default)"
            }
            Mpi::None => {
                "it was given no MPI server (--mpi none): submit with --mpi auto (the default)"
            }
        };
        Some(format!(
            "loaded MPI ({lib}) but reached no MPI server of the job, so it ran as an MPI world \
             of one rank, not one of {n}; {given}"
        ))
    }
}

impl NmCore {
    /// When the first look into a rank is due. A job being killed is not looked into: its
    /// ranks' ends are not theirs.
    pub(super) fn looks_until(&self) -> Option<Time> {
        self.jobs
            .iter()
            .filter(|(job, _)| !self.kills.iter().any(|k| k.job == **job))
            .flat_map(|(_, j)| j.worlds.looks.values().map(|l| l.0))
            .min()
    }

    /// Asks the shell to look into the ranks whose look is due.
    pub(super) fn looks_due(&mut self, now: Time) {
        let mut asks = Vec::new();
        for (&job, j) in &mut self.jobs {
            if self.kills.iter().any(|k| k.job == job) {
                continue;
            }
            let launch = j.launch;
            for (&rank, (at, done)) in &mut j.worlds.looks {
                if *at > now {
                    continue;
                }
                let pid = j
                    .ranks
                    .get(&rank)
                    .filter(|r| r.exit.is_none())
                    .map_or(0, |r| r.pgid);
                if pid > 0 {
                    asks.push(Effect::LookForMpi {
                        job,
                        launch,
                        rank,
                        pid,
                    });
                }
                *done += 1;
                *at = now + LOOKS.get(*done).copied().unwrap_or(LOOK_EVERY);
            }
            // Nothing more to learn of a rank that exited.
            let ranks = &j.ranks;
            j.worlds
                .looks
                .retain(|r, _| ranks.get(r).is_some_and(|r| r.exit.is_none()));
        }
        for a in asks {
            self.push(a);
        }
    }

    /// The shell's answer to [`Effect::LookForMpi`]: `lib`, an MPI library mapped in the
    /// rank's process, or none yet.
    pub(super) fn looked(&mut self, job: JobId, launch: u64, rank: u32, lib: Option<String>) {
        let Some(j) = self.jobs.get_mut(&job).filter(|j| j.launch == launch) else {
            return;
        };
        if let Some(lib) = lib {
            j.worlds.loaded.insert(rank, lib);
            j.worlds.looks.remove(&rank);
        }
    }

    /// A rank's exit, said to be a world of one's when it is: its error under `--mpi pmix`
    /// (unless it failed already), else a warning sent up beside it; in its error output
    /// either way.
    pub(super) fn world_of_one(&mut self, job: JobId, mut exit: RankExit) -> RankExit {
        let Some(j) = self.jobs.get(&job) else {
            return exit;
        };
        let Some(why) = j.worlds.alone(exit.rank) else {
            return exit;
        };
        let (run, pmix) = (j.run, j.worlds.mpi == Mpi::Pmix);
        let file = j
            .ranks
            .get(&exit.rank)
            .and_then(|r| r.files.last().cloned());
        let must_own = j.must_own;
        let rank = exit.rank;
        self.log(Level::Warn, format!("job {job} rank {rank}: {why}"));
        if let Some(path) = file {
            self.push(Effect::AppendOutput {
                path,
                text: format!("cosched: rank {rank}: {why}\n"),
                must_own,
            });
        }
        if pmix && exit.error.is_none() {
            exit.error = Some(why);
        } else {
            self.up(FromNode::Warning {
                job,
                run,
                rank: exit.rank,
                warning: why,
            });
        }
        exit
    }
}
