//! What a run takes — the jobs with their real runtimes, the operations from outside, the
//! switches — and what it gives: one record per job, or why it stopped.

use cosched_core::{Dur, JobId, JobRecord, MachineShape, NodeId, Slowdowns, Time};
use cosched_ledger::{LedgerError, limited_run};
use cosched_policy::JobRequest;

use crate::progress::Progress;
use crate::rates::Usage;
/// One job as the simulator knows it: what the policy is told, and how long it really runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimJob {
    pub req: JobRequest,
    /// Work the job needs, in time on its PEs.
    pub runtime: Dur,
    /// When set, the job is killed after running this long (its time limit), ending as
    /// [`cosched_core::Outcome::TimedOut`] if its runtime is longer.
    pub limit: Option<Dur>,
}

impl SimJob {
    /// A job whose estimate is its exact runtime.
    pub fn exact(id: u64, submit: Time, procs: u32, runtime: Dur) -> SimJob {
        SimJob {
            req: JobRequest::new(JobId(id), submit, procs, runtime),
            runtime,
            limit: None,
        }
    }
    /// A job with a separate estimate.
    pub fn with_estimate(id: u64, submit: Time, procs: u32, runtime: Dur, estimate: Dur) -> SimJob {
        SimJob {
            req: JobRequest::new(JobId(id), submit, procs, estimate),
            runtime,
            limit: None,
        }
    }
    /// Run time after which the job ends: its runtime, cut at its limit.
    pub(super) fn work(&self) -> Dur {
        limited_run(self.runtime, self.limit).0
    }
}

/// Something that happens to the jobs from outside the policy at a given time: what users and
/// the machine do in a real run, replayed in virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A user cancels the job (waiting or running).
    Cancel(JobId),
    /// A user holds the job; it does not run until released.
    Hold(JobId),
    Release(JobId),
    /// The node fails: the jobs on it end as [`cosched_core::Outcome::NodeFailed`].
    NodeDown(NodeId),
    NodeUp(NodeId),
}

/// Switches of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Let the policy observe arrivals before job ends within an instant (the default is ends
    /// first). The policy decides after both either way, so only a policy that acts on the
    /// order of what it observes can tell.
    pub arrivals_first: bool,
    /// Whether a preempted job may start again on other PEs with its work kept (the
    /// simulator models checkpoint and restart; `PolicyConfig::migration`).
    pub no_migration: bool,
    /// Operations at given times, delivered after the instant's timers.
    pub operations: Vec<(Time, Operation)>,
    /// Multi-core nodes with contention (seed 001): jobs progress at `1 / slowdown`, the
    /// slowdowns drawn by this model, and no node holds more than two jobs.
    pub slowdowns: Option<Slowdowns>,
    /// Where the run publishes how far it got, for a progress bar on another thread.
    pub progress: Progress,
    /// The records of ended jobs keep no PE set ([`JobRecord::pes`] stays empty; see
    /// [`cosched_ledger::Ledger::forget_ended_pes`]): for a run none of whose outputs reads
    /// where a job ran. Everything else in the result is the same either way.
    pub forget_ended_pes: bool,
}

/// What a run produced: one record per job, in input order.
#[derive(Clone, Debug)]
pub struct SimResult {
    pub policy: String,
    pub machine: MachineShape,
    pub records: Vec<JobRecord>,
    /// Actual runtime of each job (same order as `records`), for the metrics.
    pub runtimes: Vec<Dur>,
    /// Events delivered to the policy.
    pub events: u64,
    /// Decisions the policy took.
    pub decisions: u64,
    /// Jobs still waiting or stopped when nothing could happen any more (a policy that
    /// starves them, or jobs larger than the usable machine).
    pub unfinished: usize,
    /// The policy's own counters ([`Policy::stats`]).
    pub policy_stats: Vec<(String, f64)>,
    /// Node and core usage by the number of waiting jobs, with a slowdown model.
    pub usage: Option<Usage>,
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A decision broke the policy's contract, or a job id appears twice.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("job {job} needs {procs} PEs, more than the machine's {machine}")]
    TooLarge {
        job: JobId,
        procs: u32,
        machine: u32,
    },
    #[error("job {job} has a negative runtime")]
    NegativeRuntime { job: JobId },
    /// A job fed to a run that simulates while the trace is read was submitted at or before
    /// a time already simulated (the trace is not in submit order there): the run must be
    /// done again from the whole trace (`cosched_report::run::run_read` does).
    #[error(
        "job {job} comes after jobs submitted later than it (the input is not in submit order)"
    )]
    OutOfOrder { job: JobId },
    #[error("operation at t={time}s names job {job}, which is not in the workload")]
    UnknownJob { job: JobId, time: Time },
    #[error(
        "policy {policy} at t={time}: job {job} would be a third job on node {node} (at most two jobs share a node)"
    )]
    Overshared {
        policy: String,
        job: JobId,
        node: NodeId,
        time: Time,
    },
}
