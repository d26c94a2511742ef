//! `cosched queue --forecast`: the machine manager's side of a forecast. It copies its policy
//! ([`cosched_policy::Policy::boxed_clone`]) and snapshots the live jobs of its ledger and its
//! pending timers; the simulator's engine (`cosched_sim::forecast`, the one home of
//! forecasting) runs the copy forward. The live policy and ledger are only read.

use cosched_core::Time;
use cosched_ledger::Phase;
use cosched_policy::forecast::{Expected, LiveJob, LiveState, Snapshot};

use super::core::Core;

impl Core {
    /// Each live job's expected start and end, or why there is none.
    pub(super) fn forecast(&self, now: Time) -> Result<Vec<Expected>, String> {
        let mut copy = self.policy.boxed_clone();
        // A copy of an external policy decides nothing (it cannot share the child process);
        // a forecast from it would only say that no waiting job ever starts.
        if copy.failure().is_some() || self.policy.name().starts_with("external") {
            return Err(
                "forecast not available for external policies (a copy of an \
                        external:CMD policy cannot decide)"
                    .into(),
            );
        }
        let snapshot = self.snapshot(now);
        cosched_sim::forecast::forecast(copy.as_mut(), &snapshot)
            .map_err(|e| format!("the forecast failed: {e}"))
    }

    /// The live jobs the policy knows (not those held back by a dependency or a begin time,
    /// which it has not seen), the pending timers and the nodes down, at `now`.
    pub(super) fn snapshot(&self, now: Time) -> Snapshot {
        let jobs = self
            .live
            .iter()
            .filter_map(|&i| {
                let e = self.ledger.entry(i);
                let ran = e.ran(now);
                let state = match e.phase() {
                    Phase::Waiting => LiveState::Waiting { ran },
                    Phase::Running => LiveState::Running {
                        pes: e.pes().clone(),
                        ran,
                    },
                    Phase::Stopped => LiveState::Stopped {
                        pes: e.pes().clone(),
                        ran,
                    },
                    Phase::Future | Phase::Ended => return None,
                };
                Some(LiveJob {
                    req: e.req.clone(),
                    state,
                    started: e.record().start,
                    held: e.held(),
                })
            })
            .collect();
        Snapshot {
            introduce: false,
            machine: self.shape,
            migration: false,
            now,
            jobs,
            timers: self.pending_timers(),
            down: (0..self.shape.nodes)
                .map(cosched_core::NodeId)
                .filter(|&n| self.ledger.is_down(n))
                .collect(),
        }
    }
}
