//! Jobs: what is asked ([`JobSpec`]) and what happened ([`JobRecord`]).
//!
//! A simulator and the real machine manager both write [`JobRecord`]s, so a real run can be
//! compared with its simulation job by job and both can be exported as SWF.

use serde::{Deserialize, Serialize};

use crate::{Dur, JobId, PeSet, Time};

/// A rigid parallel job as submitted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    pub id: JobId,
    pub submit: Time,
    /// PEs the job needs (rigid: all at once).
    pub procs: u32,
    /// The user's estimate or time limit; `None` when unknown.
    pub estimate: Option<Dur>,
    /// The time the job actually runs when given the CPU. Known to simulators (from a trace
    /// or a model), never to a policy, and unknown (`None`) to the real daemons.
    pub runtime: Option<Dur>,
    /// Memory per PE in KiB, when known.
    pub mem_per_pe_kib: Option<u64>,
    /// Queue or class number (SWF field 15), when known.
    pub queue: Option<u32>,
    /// User number (SWF field 12), when known.
    pub user: Option<u32>,
}

impl JobSpec {
    /// A job with only the essentials set.
    pub fn new(id: u64, submit: Time, procs: u32, runtime: Dur) -> JobSpec {
        JobSpec {
            id: JobId(id),
            submit,
            procs,
            estimate: None,
            runtime: Some(runtime),
            mem_per_pe_kib: None,
            queue: None,
            user: None,
        }
    }
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    /// Ran and exited with a failure, or could not be launched.
    Failed,
    Cancelled,
    /// Killed at its time limit.
    TimedOut,
    /// Lost with a node that failed.
    NodeFailed,
    /// The policy found that it can never run on this machine (and said why); it never ran.
    Rejected,
    /// Killed by the kernel for taking more memory than it asked for (`--mem`).
    OutOfMemory,
}

impl Outcome {
    /// The SWF status code (field 11): 1 completed, 0 failed, 5 cancelled (a rejected job
    /// never ran, as a job cancelled while waiting).
    pub fn swf_status(self) -> i32 {
        match self {
            Outcome::Completed => 1,
            Outcome::Cancelled | Outcome::Rejected => 5,
            Outcome::Failed | Outcome::TimedOut | Outcome::NodeFailed | Outcome::OutOfMemory => 0,
        }
    }
}

/// What happened to one job; written by every driver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: JobId,
    pub submit: Time,
    pub procs: u32,
    /// The first time the job ran.
    pub start: Option<Time>,
    pub end: Option<Time>,
    /// Time between start and end during which the job was allocated but not running
    /// (time-slicing, preemption).
    pub suspended: Dur,
    /// Times the job was preempted (its PEs taken away).
    pub preemptions: u32,
    /// The PEs it last held.
    pub pes: PeSet,
    pub outcome: Option<Outcome>,
    pub exit_code: Option<i32>,
}

impl JobRecord {
    pub fn new(spec: &JobSpec) -> JobRecord {
        JobRecord {
            id: spec.id,
            submit: spec.submit,
            procs: spec.procs,
            start: None,
            end: None,
            suspended: Dur::ZERO,
            preemptions: 0,
            pes: PeSet::new(),
            outcome: None,
            exit_code: None,
        }
    }
    /// Time from submission to first start.
    pub fn wait(&self) -> Option<Dur> {
        self.start.map(|s| s - self.submit)
    }
    /// Time from submission to end.
    pub fn response(&self) -> Option<Dur> {
        self.end.map(|e| e - self.submit)
    }
    /// Time between first start and end, suspended periods included.
    pub fn wallclock(&self) -> Option<Dur> {
        Some(self.end? - self.start?)
    }
}
