//! What the web dashboard shows of the machine manager's state (see [`super`]):
//! read straight from the core, not through a client request, so the dashboard can only look.

use cosched_core::Time;

use super::Snapshot;
use crate::core::Core;

/// Ended jobs the dashboard lists at most (the most recent), besides the live ones.
const ENDED_SHOWN: usize = 200;

impl Core {
    /// The status, the live jobs and the jobs ended in the last hour, as of `now`.
    pub fn dashboard(&self, now: Time) -> Snapshot {
        let hour = 3_600_000_000;
        let mut ended = Vec::new();
        let mut jobs = Vec::new();
        for i in 0..self.side.len() {
            let e = self.ledger.entry(i);
            if e.is_live() || self.live.contains(&i) {
                jobs.push(i);
            } else if e
                .record()
                .end
                .is_some_and(|t| now.as_micros() - t.as_micros() < hour)
            {
                ended.push(i);
            }
        }
        let skip = ended.len().saturating_sub(ENDED_SHOWN);
        jobs.extend(ended.into_iter().skip(skip));
        jobs.sort_unstable();
        Snapshot {
            now_us: now.as_micros(),
            status: self.status(),
            jobs: jobs
                .into_iter()
                .map(|i| {
                    let mut j = self.job_info(i, now);
                    j.io.env = None;
                    j
                })
                .collect(),
        }
    }
}
