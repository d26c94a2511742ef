//! Placements a backfilling pass leaves for later: jobs whose earliest fit lies beyond the
//! longest window a start now can take.
//!
//! A pass places the waiting jobs in queue order, each at its earliest fit in the profile the
//! jobs before it left, to learn which jobs can start now. In a long queue nearly every fit
//! lies far ahead (on the 100 k and 200 k synthetic logs under Scojo-PECT, 99 % of them
//! beyond the reach of the early stop's test): such a reservation can change a start now
//! only through the fits of the jobs after it. So a job whose fit is known to begin no
//! earlier than some bound `L` at or past the end of the longest window a start now can take
//! (`far`: now plus the longest estimate of a waiting job on at most the free nodes, or of a
//! guest) is deferred: it keeps `L`, and nothing is reserved for it. The profile the pass
//! holds is then exact before the earliest bound kept, the horizon `H`, and has more free
//! nodes than the exact one after it.
//!
//! Why every answer stays exact:
//! - A job's fit found at `t` in the held profile, searched from a true lower bound of its
//!   fit, is its true fit when `t + d ≤ H`: no earlier start fits the held profile, so none
//!   fits the exact one (fewer free nodes), and the window at `t` lies where the two agree.
//!   Otherwise its true fit is no earlier than `t`: from `far` on it is deferred with `t`;
//!   before `far`, the deferred jobs are first placed for real, in queue order, up to the
//!   last one whose bound lies before `t + d`, and the job is searched again. A start now
//!   (or a guest's) window ends by `far`, so it meets deferred jobs only when a plan kept
//!   from an earlier pass deferred them against a nearer `far`; the same rule places them.
//! - A deferred job's true fit is searched from its bound: every job placed exactly after it
//!   in the queue ended by the horizon of its time, at or before that bound, so no start from
//!   the bound on sees those jobs, and the profile from there is the one its place in the
//!   queue gives it. The bounds of the jobs left stay past the window that was placed for.
//! - The early stop reads the held profile: more free nodes only ever say "a job may start"
//!   where the exact profile says it too or says no, so the pass never stops earlier; it may
//!   go on further, placing or deferring jobs that start nothing.
//! - The floors (`floor.rs`) stay true lower bounds: a fit found in the held profile from a
//!   true bound is itself one, and so is a deferred job's bound.

use cosched_core::{Dur, Time};

use crate::profile::Profile;

/// The deferred jobs of a pass (or of a plan kept between passes), in queue order.
#[derive(Clone, Debug)]
pub(super) struct Deferred {
    /// `(nodes, estimate, bound)`: the job's true earliest fit begins at `bound` or later.
    jobs: Vec<(u32, Dur, Time)>,
    /// The earliest bound (`Time::MAX` with none): the held profile is exact before it.
    horizon: Time,
}

/// None deferred: the held profile is exact everywhere.
impl Default for Deferred {
    fn default() -> Deferred {
        Deferred {
            jobs: Vec::new(),
            horizon: Time::MAX,
        }
    }
}

impl Deferred {
    /// Before this instant the held profile is the exact one.
    pub(super) fn horizon(&self) -> Time {
        self.horizon
    }

    pub(super) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Defers the next job in queue order: `nodes` nodes for `dur`, whose true earliest fit
    /// begins at `bound` or later.
    pub(super) fn push(&mut self, nodes: u32, dur: Dur, bound: Time) {
        self.jobs.push((nodes, dur, bound));
        self.horizon = self.horizon.min(bound);
    }

    /// Places for real, in queue order, the deferred jobs up to the last one whose bound is
    /// before `until`, reserving each at its earliest fit from its bound in `profile` and
    /// handing `placed` its nodes, estimate and start (`None`: it fits nowhere). Afterwards
    /// the horizon is at `until` or later.
    pub(super) fn place_before(
        &mut self,
        until: Time,
        profile: &mut Profile,
        mut placed: impl FnMut(u32, Dur, Option<Time>),
    ) {
        let Some(last) = self.jobs.iter().rposition(|&(_, _, b)| b < until) else {
            return;
        };
        for (nodes, dur, bound) in self.jobs.drain(..=last) {
            let found = profile.earliest_within(nodes, dur, bound, Time::MAX);
            if let Some((_, at)) = found {
                profile.reserve(at, dur, nodes);
            }
            placed(nodes, dur, found.map(|(t, _)| t));
        }
        self.horizon = self
            .jobs
            .iter()
            .map(|&(_, _, b)| b)
            .min()
            .unwrap_or(Time::MAX);
    }
}
