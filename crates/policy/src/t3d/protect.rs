//! [`Protection`]: the started T3D jobs by the end of their do-not-disturb time, with the
//! processors, by class, of those whose time is over — what a waiting job of the second pass
//! could take by preemption at most — kept up to date as time passes, not recounted over
//! every loaded job at every decision. Those whose time is over are also kept ordered by
//! their cost as victims (fixed once the time is over), and those still protected are
//! kept apart, so that a victim list is a merge of the two instead of a walk over every
//! loaded job and a sort.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use cosched_core::{IdMap, JobId, Time};

/// A started job's class, processors and fixed cost as a victim.
pub(super) type Started = (usize, u32, u64);

#[derive(Clone, Debug, Default)]
pub(super) struct Protection {
    /// Started jobs whose do-not-disturb time was not over when last looked at, by its end:
    /// `(end, job, start count)`. An entry whose job has stopped since (or started again) is
    /// dropped when it comes up.
    pending: BinaryHeap<Reverse<(Time, JobId, u64)>>,
    /// The start count, class, processors and fixed cost of each started job.
    started: IdMap<(u64, Started)>,
    /// Jobs whose do-not-disturb time is over.
    over: IdMap<Started>,
    /// The same jobs by `(fixed cost, job)`: the order of a victim list.
    over_by_cost: BTreeSet<(u64, JobId)>,
    /// Started jobs whose do-not-disturb time is not over yet (when last looked at).
    protected: IdMap<Started>,
    /// Their processors by class.
    over_procs: Vec<u64>,
}

impl Protection {
    pub fn new(classes: usize) -> Protection {
        Protection {
            over_procs: vec![0; classes],
            ..Protection::default()
        }
    }

    fn set_over(&mut self, id: JobId, s: Started) {
        self.over.insert(id, s);
        self.over_by_cost.insert((s.2, id));
        self.over_procs[s.0] += u64::from(s.1);
    }

    /// Job `id` (of the class, processors and fixed cost `s`) started at `now` (its
    /// `starts`-th start, a count that never repeats) and is protected until `end`.
    pub fn start(&mut self, id: JobId, s: Started, end: Time, starts: u64, now: Time) {
        self.started.insert(id, (starts, s));
        if end <= now {
            self.set_over(id, s);
        } else {
            self.protected.insert(id, s);
            self.pending.push(Reverse((end, id, starts)));
        }
    }

    /// Job `id` stopped running (preempted or ended).
    pub fn stop(&mut self, id: JobId) {
        self.started.remove(&id);
        self.protected.remove(&id);
        if let Some((class, procs, cost)) = self.over.remove(&id) {
            self.over_procs[class] -= u64::from(procs);
            self.over_by_cost.remove(&(cost, id));
        }
    }

    /// Moves every job whose do-not-disturb time ends by `now` among those whose time is over.
    pub fn advance(&mut self, now: Time) {
        while let Some(&Reverse((end, id, starts))) = self.pending.peek() {
            if end > now {
                break;
            }
            self.pending.pop();
            if let Some(&(st, s)) = self.started.get(&id)
                && st == starts
            {
                self.protected.remove(&id);
                self.set_over(id, s);
            }
        }
    }

    /// The next end of a do-not-disturb time not over yet (one of a job that has stopped
    /// since may answer: never later than the true one).
    pub fn next_end(&self) -> Option<Time> {
        self.pending.peek().map(|Reverse((end, _, _))| *end)
    }

    /// Processors of the jobs of `class` whose do-not-disturb time is over.
    pub fn over(&self, class: usize) -> u64 {
        self.over_procs[class]
    }

    /// The jobs whose do-not-disturb time is over, with their class, in no order.
    pub fn over_jobs(&self) -> impl Iterator<Item = (JobId, usize)> + '_ {
        self.over.iter().map(|(&id, &(class, _, _))| (id, class))
    }

    /// The jobs whose do-not-disturb time is over by `(fixed cost, job)`, with their class.
    pub fn over_by_cost(&self) -> impl Iterator<Item = (u64, JobId, usize)> + '_ {
        self.over_by_cost
            .iter()
            .map(|&(cost, id)| (cost, id, self.over[&id].0))
    }

    /// The started jobs whose do-not-disturb time is not over, in no order.
    pub fn protected(&self) -> impl Iterator<Item = (JobId, Started)> + '_ {
        self.protected.iter().map(|(&id, &s)| (id, s))
    }

    /// Whether job `id`'s do-not-disturb time is over.
    pub fn is_over(&self, id: JobId) -> bool {
        self.over.contains_key(&id)
    }

    /// Forgets everything (the do-not-disturb times changed with the parameter set).
    pub fn clear(&mut self) {
        let classes = self.over_procs.len();
        *self = Protection::new(classes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Starts, stops and time moving on: the jobs whose time is over, in cost order, and
        /// the protected ones, are those a walk over every started job finds.
        #[test]
        fn over_and_protected_are_those_of_a_walk_over_the_started_jobs(
            ops in proptest::collection::vec((0u8..3, 0u64..30, 0i64..50, 1u32..9, 0usize..3), 1..200),
        ) {
            let mut p = Protection::new(3);
            // job -> (class, procs, cost, end)
            let mut plain: std::collections::BTreeMap<JobId, (usize, u32, u64, Time)> =
                Default::default();
            let (mut now, mut starts) = (Time::ZERO, 0);
            for (op, job, t, procs, class) in ops {
                let id = JobId(job);
                match op {
                    0 => {
                        p.stop(id);
                        plain.remove(&id);
                        starts += 1;
                        let end = now + cosched_core::Dur::from_secs(t - 10);
                        let cost = u64::from(procs) * 3 + job % 4;
                        p.start(id, (class, procs, cost), end, starts, now);
                        plain.insert(id, (class, procs, cost, end));
                    }
                    1 => {
                        p.stop(id);
                        plain.remove(&id);
                    }
                    _ => {
                        now += cosched_core::Dur::from_secs(t);
                        p.advance(now);
                    }
                }
                let mut over: Vec<(u64, JobId, usize)> = plain
                    .iter()
                    .filter(|(_, s)| s.3 <= now)
                    .map(|(&id, s)| (s.2, id, s.0))
                    .collect();
                over.sort_unstable();
                prop_assert_eq!(p.over_by_cost().collect::<Vec<_>>(), over.clone());
                let mut protected: Vec<(JobId, Started)> = p.protected().collect();
                protected.sort_unstable();
                let want: Vec<(JobId, Started)> = plain
                    .iter()
                    .filter(|(_, s)| s.3 > now)
                    .map(|(&id, s)| (id, (s.0, s.1, s.2)))
                    .collect();
                prop_assert_eq!(protected, want);
                for c in 0..3 {
                    let procs: u64 = over.iter().filter(|o| o.2 == c).map(|o| plain[&o.1].1 as u64).sum();
                    prop_assert_eq!(p.over(c), procs);
                }
            }
        }
    }
}
