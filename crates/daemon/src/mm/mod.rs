//! The machine manager: the real-time driver of a job-level policy.
//!
//! It drives the very policy code the simulator drives, through the same job ledger, so a
//! real run and its simulation can be compared job by job. One concern per module:
//!
//! - [`core`]: the sans-IO core — inputs in, effects out, time passed in; the job lifecycle on
//!   the ledger and the policy's instants.
//! - [`nodes`]: node membership, heartbeats and failure detection, registration reconciliation.
//! - [`deferral`]: dependencies, begin times and array throttles, before the policy sees a job.
//! - [`requests`]: client requests.
//! - [`changes`]: a client's change takes effect only once its records are durable.
//! - [`forecast`]: `queue --forecast`: a copy of the policy run forward from the live jobs.
//! - [`view`]: what clients see (job records, status).
//! - [`dashboard`]: what the web dashboard sees (read directly, never a request).
//! - [`bcast`]: the sender's side of a file broadcast (pacing chunks by COMPARE-AND-WRITE).
//! - [`shell`]: tokio, the storm tree, SQLite and the system clock around the core.
//! - [`store`]: the shell's writes to the database, kept and retried while the disk refuses.
//! - [`replays`]: replayed requests refused, also across a restart.
//!
//! Decisions are carried out down the tree: Start/Place → launch (Place launches stopped),
//! Suspend/Preempt → SIGSTOP, Resume → SIGCONT, Kill/Reject → the job ends at once and its
//! processes get SIGTERM, then SIGKILL after `kill_wait`; all the stops, continues and kills
//! of one step travel as one multi-context-switch message.

pub mod bcast;
pub mod changes;
pub mod core;
pub mod dashboard;
pub mod deferral;
pub mod forecast;
pub mod nodes;
pub mod replays;
pub mod requests;
pub mod shell;
pub mod store;
pub mod view;

use std::path::PathBuf;

use cosched_core::Dur;
use cosched_policy::PolicyOptions;
use cosched_storm::Key;
use cosched_storm::accept::Limits;

pub use self::core::{DEFAULT_ESTIMATE, MAX_TIME_LIMIT, check_time_limit, parse_pes};
pub use shell::{build_policy, run, run_blocking};

/// Default grace between SIGTERM and SIGKILL for a killed job (`--kill-wait`).
pub const DEFAULT_KILL_WAIT: Dur = Dur::from_secs(5);
/// Longest grace taken (`--kill-wait` is clamped to it, and so is what a node is told).
pub const MAX_KILL_WAIT: Dur = Dur::from_secs(3600);

/// What a machine manager runs, however it is started (`cosched mm`, or `cluster up` which
/// passes these on to the `mm` it starts), with the defaults of both.
#[derive(Clone, Debug)]
pub struct ManagerSettings {
    pub nodes: u32,
    pub pes: u32,
    pub policy: String,
    /// `--mpl`, `--quantum`, `--context-switch`, `--opt`, `--policy-config`, as for `sim`.
    pub policy_options: PolicyOptions,
    pub fanout: u32,
    /// Period of the liveness heartbeat down the tree.
    pub heartbeat: Dur,
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
            policy: "fcfs".into(),
            policy_options: PolicyOptions::default(),
            fanout: 8,
            heartbeat: Dur::from_millis(200),
            requeue: false,
            kill_wait: DEFAULT_KILL_WAIT,
            keep_jobs: Dur::from_micros(crate::nm::DEFAULT_KEEP_JOBS.as_micros() as i64),
            output_cap: crate::nm::DEFAULT_OUTPUT_CAP,
            admission: Limits::default(),
        }
    }
}

/// How the machine manager process is set up.
#[derive(Clone, Debug)]
pub struct MmConfig {
    pub listen: String,
    pub settings: ManagerSettings,
    /// A node that has not answered for this long is marked down.
    pub dead_after: Dur,
    /// Where `mm.addr` and `mm.db` live.
    pub state_dir: PathBuf,
    pub key: Key,
    /// Where the read-only web dashboard listens (`--http`); off when `None`.
    pub http: Option<String>,
}

impl MmConfig {
    pub fn new(state_dir: PathBuf, key: Key, nodes: u32, pes: u32) -> MmConfig {
        MmConfig {
            listen: "127.0.0.1:0".into(),
            settings: ManagerSettings::new(nodes, pes),
            dead_after: Dur::from_millis(1_000),
            state_dir,
            key,
            http: None,
        }
    }
}

#[cfg(test)]
mod tests;
