//! [`Protection`]: the started T3D jobs by the end of their do-not-disturb time, with the
//! processors, by class, of those whose time is over — what a waiting job of the second pass
//! could take by preemption at most — kept up to date as time passes, not recounted over
//! every loaded job at every decision.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cosched_core::{IdMap, JobId, Time};

#[derive(Clone, Debug, Default)]
pub(super) struct Protection {
    /// Started jobs whose do-not-disturb time was not over when last looked at, by its end:
    /// `(end, job, start count)`. An entry whose job has stopped since (or started again) is
    /// dropped when it comes up.
    pending: BinaryHeap<Reverse<(Time, JobId, u64)>>,
    /// The start count, class and processors of each started job.
    started: IdMap<(u64, usize, u32)>,
    /// Jobs whose do-not-disturb time is over.
    over: IdMap<(usize, u32)>,
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

    /// Job `id` of `class` started at `now` (its `starts`-th start, a count that never
    /// repeats) and is protected until `end`.
    pub fn start(
        &mut self,
        id: JobId,
        class: usize,
        procs: u32,
        end: Time,
        starts: u64,
        now: Time,
    ) {
        self.started.insert(id, (starts, class, procs));
        if end <= now {
            self.over.insert(id, (class, procs));
            self.over_procs[class] += u64::from(procs);
        } else {
            self.pending.push(Reverse((end, id, starts)));
        }
    }

    /// Job `id` stopped running (preempted or ended).
    pub fn stop(&mut self, id: JobId) {
        self.started.remove(&id);
        if let Some((class, procs)) = self.over.remove(&id) {
            self.over_procs[class] -= u64::from(procs);
        }
    }

    /// Moves every job whose do-not-disturb time ends by `now` among those whose time is over.
    pub fn advance(&mut self, now: Time) {
        while let Some(&Reverse((end, id, starts))) = self.pending.peek() {
            if end > now {
                break;
            }
            self.pending.pop();
            if let Some(&(s, class, procs)) = self.started.get(&id)
                && s == starts
            {
                self.over.insert(id, (class, procs));
                self.over_procs[class] += u64::from(procs);
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
        self.over.iter().map(|(&id, &(class, _))| (id, class))
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
