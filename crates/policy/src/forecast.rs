//! What a forecast is given and what it returns: a snapshot of the live jobs and each job's
//! expected start and end, and the [`Forecaster`] seam through which a policy asks for one.
//!
//! The forecast itself runs the simulator's engine (`cosched_sim::forecast`), forward in
//! virtual time from the snapshot, on a copy of a policy ([`Policy::boxed_clone`]). The types
//! live here, not in the simulator, because a policy needs them too: Scojo-PECT estimates a
//! job's response time at submission with an FCFS forecast of its virtual machine (seed 001,
//! §5), and `cosched-sim` depends on this crate, so this crate cannot call it. A driver that
//! owns the engine hands the policy a [`Forecaster`] ([`Policy::set_forecaster`]).

use std::fmt;
use std::sync::Arc;

use cosched_core::{Dur, JobId, MachineShape, NodeId, PeSet, Time};
use serde::{Deserialize, Serialize};

use crate::{JobRequest, Policy};

/// Where a live job stands in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LiveState {
    /// In the queue (never ran, or preempted: `ran` is the work it kept).
    Waiting { ran: Dur },
    /// Holds `pes` and runs; it has run `ran` in all.
    Running { pes: PeSet, ran: Dur },
    /// Holds `pes` but is stopped (placed in a slot, or suspended); it has run `ran`.
    Stopped { pes: PeSet, ran: Dur },
}

/// One live job: what the policy was told, where it stands, and whether it is held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveJob {
    /// Its `estimate` is what the forecast assumes it runs in all.
    pub req: JobRequest,
    pub state: LiveState,
    /// When it first ran, if it did (reported back as its start).
    pub started: Option<Time>,
    pub held: bool,
}

/// The live state a forecast starts from: the jobs the policy knows, the driver's pending
/// timers and the nodes down, at `now`. The policy given with it must be in the matching
/// state (a copy of the live one, which has seen every one of these jobs), unless
/// `introduce` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The policy has seen none of this (a fresh one, such as the FCFS policy behind
    /// Scojo-PECT's estimates): the forecast first tells it, in one instant at `now`, the
    /// nodes down, a start-up hello ([`crate::Event::Running`]) for each job holding PEs, a
    /// submission for each waiting job (in the snapshot's order) and the holds.
    pub introduce: bool,
    pub machine: MachineShape,
    /// Whether a preempted job may restart on other PEs (`PolicyConfig::migration`).
    pub migration: bool,
    pub now: Time,
    pub jobs: Vec<LiveJob>,
    /// `(at, token)` of the timers the policy set and the driver has not fired yet.
    pub timers: Vec<(Time, u64)>,
    pub down: Vec<NodeId>,
}

/// A job's expected start and end. `start` is `None` when the job does not start in the
/// forecast (held, or a policy that never starts it); `end` likewise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub job: JobId,
    pub start: Option<Time>,
    pub end: Option<Time>,
}

/// Runs a policy forward from a snapshot, every job running exactly its estimate, nothing new
/// arriving; returns one [`Expected`] per job of the snapshot, in its order. The simulator
/// implements it (`cosched_sim::forecast::Engine`).
pub trait Forecaster: Send + Sync {
    fn forecast(
        &self,
        policy: &mut dyn Policy,
        snapshot: &Snapshot,
    ) -> Result<Vec<Expected>, String>;
}

/// A shared [`Forecaster`], as policies keep it (cloned with them).
#[derive(Clone)]
pub struct SharedForecaster(pub Arc<dyn Forecaster>);

impl fmt::Debug for SharedForecaster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Forecaster")
    }
}

impl std::ops::Deref for SharedForecaster {
    type Target = dyn Forecaster;
    fn deref(&self) -> &(dyn Forecaster + 'static) {
        &*self.0
    }
}
