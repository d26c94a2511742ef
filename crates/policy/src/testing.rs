//! Helpers for the unit tests of the space-sharing policies.

use cosched_core::{Dur, JobId, Time};

use crate::{Decision, Event, JobRequest, Policy};

/// Submits job `id` (`procs` PEs, estimate `est` s) at `now` s as an instant of its own and
/// returns the jobs started.
pub fn sub(p: &mut dyn Policy, now: i64, id: u64, procs: u32, est: i64) -> Vec<u64> {
    let mut out = Vec::new();
    let req = JobRequest::new(JobId(id), Time::from_secs(now), procs, Dur::from_secs(est));
    p.handle(Time::from_secs(now), Event::Submitted(req), &mut out);
    started(&out)
}

/// Started jobs; timers are allowed, anything else is a bug.
pub fn started(out: &[Decision]) -> Vec<u64> {
    out.iter()
        .filter_map(|d| match d {
            Decision::Start { job, .. } => Some(job.0),
            Decision::SetTimer { .. } => None,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}
