//! The machine manager (`cosched mm`): the real-time driver of a job-level policy, the job
//! records and their store, the root of the tree, failure detection, the web dashboard.
//! What it shares with the node managers and the clients is `cosched-proto`.
//!
//! It drives the very policy code the simulator drives, through the same job ledger, so a
//! real run and its simulation can be compared job by job. One concern per module:
//!
//! - [`announce`]: the gang rotation announced ahead (a copy of the policy run through its
//!   timers), and whether the real policy follows it.
//! - [`core`]: the sans-IO core — inputs in, effects out, time passed in; the job lifecycle on
//!   the ledger and the policy's instants.
//! - [`nodes`]: node membership, heartbeats and failure detection, registration reconciliation.
//! - [`deferral`]: dependencies, begin times and array throttles, before the policy sees a job.
//! - [`partitions`]: partitions and node features: where a job may run by `--partition` and
//!   `--constraint`.
//! - [`requests`]: client requests.
//! - [`steps`]: steps of an allocation (`srun` inside a job): placed on its PEs, recorded,
//!   launched into its cgroup, ended with it.
//! - [`changes`]: a client's change takes effect only once its records are durable.
//! - [`forecast`]: `queue --forecast`: a copy of the policy run forward from the live jobs.
//! - [`names`]: the name service across jobs and nodes (`MPI_Publish_name` and kin), per user.
//! - [`view`]: what clients see (job records, status).
//! - [`dashboard`]: the read-only web dashboard (`--http`), and what it sees of the core
//!   (read directly, never a request).
//! - [`db`]: the SQLite (WAL) store of job records, nodes, credentials and replays.
//! - [`bcast`]: the sender's side of a file broadcast (pacing chunks by COMPARE-AND-WRITE).
//! - [`shell`]: tokio, the storm tree, SQLite and the system clock around the core.
//! - [`store`]: the shell's writes to the database, kept and retried while the disk refuses.
//! - [`replays`]: replayed requests refused, also across a restart.
//!
//! Decisions are carried out down the tree: Start/Place → launch (Place launches stopped),
//! Suspend/Preempt → SIGSTOP, Resume → SIGCONT, Kill/Reject → the job ends at once and its
//! processes get SIGTERM, then SIGKILL after `kill_wait`; all the stops, continues and kills
//! of one step travel as one multi-context-switch message.

pub mod announce;
pub mod bcast;
pub mod changes;
pub mod clocks;
pub mod core;
pub mod dashboard;
pub mod db;
pub mod deferral;
pub mod forecast;
pub mod names;
pub mod nodes;
pub mod partitions;
pub mod rekey;
pub mod replays;
pub mod requests;
pub mod shell;
pub mod steps;
pub mod store;
pub mod view;

use std::path::PathBuf;

use cosched_core::Dur;
use cosched_policy::PolicyOptions;
use cosched_storm::Key;
use cosched_storm::accept::Limits;

// The shared modules, under the names this crate's modules use for them.

pub use self::core::{DEFAULT_ESTIMATE, MAX_TIME_LIMIT, check_time_limit, parse_pes};
pub use shell::{Exit, build_policy, run, run_blocking};

/// Where `cosched mm` listens without `--listen` or a configuration: this host only. Other
/// hosts are let in by choice (`--listen`, or the configuration's `head`).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";

/// Default period of the heartbeat down the tree (`--heartbeat`): the liveness probe, and the
/// gang strobe every node manager switches from (FCS reclassifies its ranks at each).
pub const DEFAULT_HEARTBEAT: Dur = Dur::from_millis(200);
/// Default silence after which a node is *not responding* (`--suspect-after`): nothing new
/// starts there, its jobs keep running. Cheap to be wrong about, so short.
pub const DEFAULT_SUSPECT_AFTER: Dur = Dur::from_secs(10);
/// Default silence after which a node is declared down and its jobs are lost
/// (`--down-after`): Slurm's SlurmdTimeout default, since being wrong here kills jobs.
pub const DEFAULT_DOWN_AFTER: Dur = Dur::from_secs(300);

/// Default grace between SIGTERM and SIGKILL for a killed job (`--kill-wait`).
pub const DEFAULT_KILL_WAIT: Dur = Dur::from_secs(5);

/// What a machine manager runs, however it is started (`cosched mm`, or `cluster up` which
/// passes these on to the `mm` it starts), with the defaults of both.
#[derive(Clone, Debug)]
pub struct ManagerSettings {
    /// Nodes without a configuration file (`--nodes`): the first to register take them.
    pub nodes: u32,
    pub pes: u32,
    /// The configuration's nodes, by name: only they may register, each keeps its id.
    pub names: Vec<String>,
    /// The configuration file (`--config`), read again by `cosched reconfigure` and SIGHUP.
    pub config: Option<PathBuf>,
    /// The configuration's partitions and node features.
    pub partitions: partitions::Partitions,
    pub policy: String,
    /// `--mpl`, `--quantum`, `--context-switch`, `--opt`, `--policy-config`, as for `sim`.
    pub policy_options: PolicyOptions,
    pub fanout: u32,
    /// Period of the heartbeat down the tree (the liveness probe and the gang strobe).
    pub heartbeat: Dur,
    /// A node silent this long is *not responding*: nothing new starts there, its jobs
    /// keep running (see [`nodes`]).
    pub suspect_after: Dur,
    /// A node silent this long is down: its jobs end `node_failed`, or start over with
    /// `--requeue` once its processes are known gone (see [`nodes`]).
    pub down_after: Dur,
    /// Requeue jobs lost with a node instead of failing them.
    pub requeue: bool,
    /// A killed job's processes get SIGTERM, then SIGKILL this long after (Slurm's KillWait).
    pub kill_wait: Dur,
    /// How long an ended job is kept whole in the machine manager's memory, and its
    /// directory by the node managers `cluster up` starts (`--keep-jobs`).
    pub keep_jobs: Dur,
    /// The cap on a rank's output file those node managers enforce (`--output-cap`, bytes).
    pub output_cap: u64,
    /// What a connection may do before its first frame (`--first-frame-timeout`,
    /// `--max-pending-per-peer`, `--max-pending`; see `cosched_storm::accept`).
    pub admission: Limits,
}

impl ManagerSettings {
    pub fn new(nodes: u32, pes: u32) -> ManagerSettings {
        ManagerSettings {
            nodes,
            pes,
            names: Vec::new(),
            config: None,
            partitions: partitions::Partitions::default(),
            policy: "fcfs".into(),
            policy_options: PolicyOptions::default(),
            fanout: 8,
            heartbeat: DEFAULT_HEARTBEAT,
            suspect_after: DEFAULT_SUSPECT_AFTER,
            down_after: DEFAULT_DOWN_AFTER,
            requeue: false,
            kill_wait: DEFAULT_KILL_WAIT,
            keep_jobs: Dur::from_micros(cosched_proto::proto::DEFAULT_KEEP_JOBS.as_micros() as i64),
            output_cap: cosched_proto::proto::DEFAULT_OUTPUT_CAP,
            admission: Limits::default(),
        }
    }

    /// The liveness settings make sense together: a heartbeat comes before a node can be
    /// missed, and a node is not responding before it is down.
    pub fn check(&self) -> Result<(), String> {
        if self.heartbeat <= Dur::ZERO {
            return Err("--heartbeat must be positive".into());
        }
        if self.suspect_after < self.heartbeat {
            return Err(format!(
                "--suspect-after {} is shorter than --heartbeat {}: a node would be taken for not responding between two heartbeats; give --suspect-after at least {}",
                self.suspect_after, self.heartbeat, self.heartbeat
            ));
        }
        if self.down_after < self.suspect_after {
            return Err(format!(
                "--down-after {} is shorter than --suspect-after {}: a node is not responding before it is declared down; give --down-after at least {}",
                self.down_after, self.suspect_after, self.suspect_after
            ));
        }
        Ok(())
    }
}

/// How the machine manager process is set up.
#[derive(Clone, Debug)]
pub struct MmConfig {
    pub listen: String,
    pub settings: ManagerSettings,
    /// Where `mm.addr` and `mm.db` live.
    pub state_dir: PathBuf,
    pub key: Key,
    /// Where the key was read from: a rotation writes the new key there (and the old one,
    /// for its grace period, beside it: [`rekey::previous_file`]); `None`: no rotation.
    pub key_file: Option<PathBuf>,
    /// Where the read-only web dashboard listens (`--http`); off when `None`.
    pub http: Option<String>,
}

impl MmConfig {
    pub fn new(state_dir: PathBuf, key: Key, nodes: u32, pes: u32) -> MmConfig {
        MmConfig {
            listen: "127.0.0.1:0".into(),
            settings: ManagerSettings::new(nodes, pes),
            state_dir,
            key,
            key_file: None,
            http: None,
        }
    }
}

#[cfg(test)]
mod tests;
