//! The contract between a policy and its two drivers.
//!
//! ## Instants
//! A driver hands a policy time in *instants*: every event that happened at one time is
//! given to [`Policy::observe`], then [`Policy::decide`] is called once. Deciding after each
//! single event would let a backfilling policy act on a machine that never existed (the first
//! of two jobs ending together gone, the second still there). Decisions can cause events at
//! the same time (a [`Decision::Kill`] or [`Decision::Reject`] is answered by
//! [`Event::Ended`]); those form a further round of the same instant: observed, then decided
//! again.
//!
//! ## What a driver promises
//! - Events arrive in time order; `now` never goes backwards.
//! - Within an instant, [`Event::Ended`] events come first, then [`Event::Submitted`] ones
//!   (by submit time, then id), then the rest (holds, nodes, timers).
//! - Every decision is applied in order, before the next instant's events.
//! - A [`Decision::SetTimer`] leads to exactly one [`Event::Timer`] with the same token at the
//!   requested time (or at `now`, if that time has passed).
//! - A job's actual runtime is never revealed: the driver tells when a job ends.
//! - A [`Decision::Kill`] or [`Decision::Reject`] is answered by [`Event::Ended`].
//!
//! ## What a policy promises
//! - At any instant no PE runs two jobs: a job only runs ([`Decision::Start`],
//!   [`Decision::Resume`]) on PEs that no other *running* job occupies. Several *allocated*
//!   jobs may share a PE in different slots of a time-sharing matrix.
//! - It starts, places or resumes only jobs it was told about and that have not ended, and
//!   never a job on a node it was told is down.
//! - It starts no job that is held ([`Event::Held`]) and waiting.
//! - Where the configuration says preempted jobs cannot move
//!   ([`PolicyConfig::migration`](crate::PolicyConfig::migration) is false, as on the real
//!   machine manager: a stopped process cannot be moved to other PEs), a preempted job is
//!   started again only on the PEs it had.
//!
//! The job ledger (`cosched-ledger`) checks every one of these promises in both drivers and
//! refuses a decision that breaks one, naming the policy, the job and the time.
//!
//! ## Skipping quanta (optional, simulator only)
//! A time-sharing policy that only rotates its matrix between two outside events wakes every
//! quantum for nothing new. It may say so: at the end of each instant the simulator asks
//! [`Policy::cycle_point`]. A policy answers at one fixed phase of its rotation (for gang:
//! one row just became active, the same row until something outside happens), listing
//! every job whose accounting its rotation touches, and says [`CyclePoint::Steady`] when its
//! whole state, apart from counters and timer tokens, equals the state at its previous cycle
//! point and it observed nothing but its own timers in between. The cycle is then periodic: the simulator measures one period (its
//! length, each listed job's run time in it, the events and decisions it took), jumps over as
//! many whole periods as end strictly before the next arrival, operation or job end, and calls
//! [`Policy::skip_cycles`] so the policy advances its counters and its pending timer's token
//! as the skipped quanta would have. It then steps again, so every job ends at the quantum
//! boundary and row of a step-by-step run: outputs are byte-identical. A job that runs the
//! whole period must keep running through it (never stopped and restarted in one instant).
//! The daemons never ask and keep stepping each quantum in real time; wrappers that watch
//! every decision (the time-sharing observer) do not forward the question, so they step too.

use cosched_core::{Dur, JobId, NodeId, PeSet, Time};
use serde::{Deserialize, Serialize};

/// What a policy knows of a job: what a real scheduler is told at submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRequest {
    pub id: JobId,
    pub submit: Time,
    pub procs: u32,
    /// Runtime estimate or time limit. A driver fills it with something (the trace's requested
    /// time, the exact runtime under "perfect information", or a default limit).
    pub estimate: Dur,
    /// Memory per PE in KiB, for policies that respect a per-node memory limit.
    pub mem_per_pe_kib: Option<u64>,
    /// Queue or class number (SWF field 15), mapped to classes by policies that have them.
    pub queue: Option<u32>,
    /// Class name given by a user (`cosched submit --class`), when any.
    pub class: Option<String>,
    pub user: Option<u32>,
    /// Where its tasks may go by node (Slurm's `-N`, `--nodelist`, …), when asked; `None`
    /// (every trace job): any free PEs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Box<crate::Spread>>,
}

impl JobRequest {
    pub fn new(id: JobId, submit: Time, procs: u32, estimate: Dur) -> JobRequest {
        JobRequest {
            id,
            submit,
            procs,
            estimate,
            mem_per_pe_kib: None,
            queue: None,
            class: None,
            user: None,
            spread: None,
        }
    }
}

/// Something that happened, delivered to [`Policy::observe`] with the time it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A job arrived in the queue.
    Submitted(JobRequest),
    /// A job left the system, whatever its state: it finished, failed, was cancelled while
    /// waiting or running, or was lost with a node. The policy forgets it and frees its PEs.
    Ended(JobId),
    /// A timer set with [`Decision::SetTimer`] fired.
    Timer(u64),
    /// A node stopped answering: nothing new may be given PEs there. Jobs running on it are
    /// ended separately by the driver (an [`Event::Ended`] each) if it is lost; a driver
    /// that only suspects it keeps them, and an [`Event::NodeUp`] follows when it answers.
    NodeDown(NodeId),
    /// A node came back (or joined) and may be used again.
    NodeUp(NodeId),
    /// An administrator or user holds a job: if waiting, it must not start; if it holds PEs,
    /// the driver has stopped its processes and keeps them stopped until [`Event::Released`],
    /// whatever the policy decides meanwhile. The PEs stay the job's in the policy's plan; a
    /// time-sharing policy may keep rotating it (its turns are simply idle).
    Held(JobId),
    Released(JobId),
    /// Start-up "hello" (as in Flux): this job already holds these PEs and has been running
    /// since `since`. Sent by a restarted machine manager before any other event, one per
    /// surviving job, so the policy rebuilds its state without disturbing running work.
    Running {
        job: JobRequest,
        pes: PeSet,
        since: Time,
    },
}

/// What a policy asks the driver to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// Give the job these PEs and run it now. `slot` is its row in a time-sharing matrix
    /// (`None` for space-sharing policies). Also used to restart a preempted job: it then
    /// continues its remaining work on the (possibly different) PEs.
    Start {
        job: JobId,
        pes: PeSet,
        slot: Option<u32>,
    },
    /// Give the job these PEs in a slot of the matrix but leave it stopped; a later
    /// [`Decision::Resume`] runs it.
    Place {
        job: JobId,
        pes: PeSet,
        slot: Option<u32>,
    },
    /// Stop a running job; it keeps its PEs (a context switch out of its slot).
    Suspend { job: JobId },
    /// Run an allocated, stopped job again.
    Resume { job: JobId },
    /// Stop a job and take its PEs away (its state goes to disk); it waits until started
    /// again. Work done so far is kept.
    Preempt { job: JobId },
    /// Kill a job; the driver answers with [`Event::Ended`].
    Kill { job: JobId },
    /// The job can never run here (larger than the machine, more memory than a node has, …):
    /// it ends as [`cosched_core::Outcome::Rejected`] with the reason given, without running.
    /// The driver answers with [`Event::Ended`]. "Not now" is simply not starting the job.
    Reject { job: JobId, why: Never },
    /// Deliver [`Event::Timer`]`(token)` at `at`.
    SetTimer { at: Time, token: u64 },
}

/// Why a job can never run on a machine, as a policy found it. A typed value, not text, so
/// that drivers and tools can tell the reasons apart (and so a decision stays small: the
/// millions of suspend and resume decisions of a time-sharing run are built in place only
/// while no variant of [`Decision`] owns heap memory beyond a PE set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Never {
    /// It asks for no PE.
    NoPes,
    /// It needs more PEs than the machine has.
    TooLarge { procs: u32, machine: u32 },
    /// It needs more memory on one node than a node has (KiB).
    Memory { need_kib: u64, node_kib: u64 },
    /// It is larger than the largest job the policy's configuration allows.
    OverLimit { procs: u32, limit: u32 },
    /// Its spread over nodes cannot be met on this machine, or this policy does not place
    /// by node.
    Unplaceable,
}

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Never::NoPes => write!(f, "asks for no PE"),
            Never::TooLarge { procs, machine } => {
                write!(f, "needs {procs} PEs; the machine has {machine}")
            }
            Never::Memory { need_kib, node_kib } => write!(
                f,
                "needs {need_kib} KiB of memory on a node; a node has {node_kib} KiB"
            ),
            Never::OverLimit { procs, limit } => write!(
                f,
                "needs {procs} PEs, more than the largest job allowed (job_limit = {limit})"
            ),
            Never::Unplaceable => write!(
                f,
                "its spread over nodes (-N, --ntasks-per-node, --nodelist, --exclude) cannot be met here"
            ),
        }
    }
}

/// A job-level scheduling policy: a pure state machine.
pub trait Policy: Send {
    /// The registry name (`fcfs`, `easy`, …).
    fn name(&self) -> &str;

    /// Takes in one event of the instant `now`. Decisions wait for [`Policy::decide`], which
    /// the driver calls once every event of the instant has been observed.
    fn observe(&mut self, now: Time, event: Event);

    /// Decides, once per instant, pushing decisions onto `out` (which the driver empties
    /// between calls).
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>);

    /// An instant with one event: [`Policy::observe`] then [`Policy::decide`].
    fn handle(&mut self, now: Time, event: Event, out: &mut Vec<Decision>) {
        self.observe(now, event);
        self.decide(now, out);
    }

    /// Waiting jobs in the order the policy would start them.
    fn queue(&self) -> Vec<JobId>;

    /// Whether the policy places a job with a [`crate::Spread`] as it asks. Those that do
    /// ask [`crate::Spread::choose`] (through [`crate::PePool::allocate_for`] or their own
    /// packing); the others place by their own geometry and reject such jobs.
    fn places_by_node(&self) -> bool {
        false
    }

    /// The time-sharing matrix, for policies that have one (status tools draw it).
    fn matrix(&self) -> Option<MatrixView> {
        None
    }

    /// Counters of the policy's own for reports, by name (groups formed, jobs per group, …);
    /// none by default.
    fn stats(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Why the policy stopped deciding, if it did: only a policy that talks to something
    /// outside itself can fail (an external policy whose child process exited or answered
    /// nonsense). [`Policy::decide`] cannot return an error, so drivers ask after a run.
    fn failure(&self) -> Option<String> {
        None
    }

    /// What the policy can add about its latest decision about `job` when a driver refuses
    /// it (an external policy quotes the reply line that carried it); none by default.
    fn explain(&self, _job: JobId) -> Option<String> {
        None
    }

    /// A copy of the whole state, so a driver can simulate forward ("forecast") without
    /// disturbing the real one.
    fn boxed_clone(&self) -> Box<dyn Policy>;

    /// Hands the policy the simulator's forecast (`cosched_sim::forecast`), for policies that
    /// estimate from one (Scojo-PECT's response-time estimates at submission). The drivers
    /// that own the engine call it before the first event; others ignore it.
    fn set_forecaster(&mut self, _forecaster: crate::forecast::SharedForecaster) {}

    /// Quantum skipping (see "Skipping quanta" above): at the end of the instant `now`, whether the
    /// policy stands at the fixed phase of its cycle, with `jobs` set to every job whose
    /// accounting the cycle touches. `None` (the default) means: step as usual.
    fn cycle_point(&mut self, _now: Time, _jobs: &mut Vec<JobId>) -> Option<CyclePoint> {
        None
    }

    /// Quantum skipping: right after a [`CyclePoint::Steady`] answer, advance as if `cycles`
    /// more whole periods had been stepped (counters, timer tokens), and return the token of
    /// the timer now pending, which the driver moves by the skipped time. `None` (the
    /// default): nothing was skipped, and the driver steps.
    fn skip_cycles(&mut self, _cycles: u64) -> Option<u64> {
        None
    }
}

/// What [`Policy::cycle_point`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CyclePoint {
    /// At the phase, but not (or not yet known to be) repeating: the driver starts measuring
    /// a period here.
    Mark,
    /// At the phase, in the same state as at the previous cycle point, with only this
    /// policy's own timers observed since: one whole period has passed.
    Steady,
}

/// One row of the Ousterhout matrix: which job holds which PEs in this slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotView {
    pub jobs: Vec<(JobId, PeSet)>,
}

/// The Ousterhout matrix as a status tool sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixView {
    pub slots: Vec<SlotView>,
    /// The slot whose jobs run now, when one does.
    pub active: Option<u32>,
}
