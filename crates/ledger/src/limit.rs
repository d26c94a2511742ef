//! The time-limit rule both drivers apply: a job's processes run for at most its limit of run
//! time (time stopped does not count), and a job that reaches it ends as
//! [`Outcome::TimedOut`]. The simulator knows each job's runtime ahead and asks
//! [`limited_run`]; the machine manager sets a timer at [`Ledger::limit_reached_at`] and ends
//! the job when [`Ledger::past_limit`] says so.

use cosched_core::{Dur, Outcome, Time};

use crate::{Ix, Ledger};

/// The run a job that needs `runtime` gets under `limit`: how long its processes run, and how
/// it ends. A job that needs exactly its limit completes.
#[inline]
pub fn limited_run(runtime: Dur, limit: Option<Dur>) -> (Dur, Outcome) {
    match limit {
        Some(l) if runtime > l => (l, Outcome::TimedOut),
        _ => (runtime, Outcome::Completed),
    }
}

impl Ledger {
    /// When a running job reaches a time limit `limit` of run time, if it keeps running.
    pub fn limit_reached_at(&self, job: Ix, limit: Dur) -> Option<Time> {
        let e = &self.entries[job];
        e.processes_run().then(|| e.since + (limit - e.ran))
    }

    /// How a job with `limit` ends at `now` if it has reached it; `None` while it has not
    /// (or its processes are stopped).
    pub fn past_limit(&self, job: Ix, limit: Dur, now: Time) -> Option<Outcome> {
        self.limit_reached_at(job, limit)
            .is_some_and(|at| at <= now)
            .then_some(Outcome::TimedOut)
    }
}
