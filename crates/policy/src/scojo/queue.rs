//! A VM's waiting queue: its jobs in queue order, each with its place under space sharing
//! beside it.
//!
//! Every backfilling pass reads the needs of the jobs it may place and of the other queues'
//! guests, and the FCFS forecast and the fairness check those of the queue they place. Kept
//! beside the ids, they are read in one run of memory, where looking each job up in the
//! policy's table costs a hash and a cache miss per job each time.

use std::ops::Deref;

use cosched_core::JobId;

use super::Space;

#[derive(Clone, Debug, Default)]
pub(super) struct Queue {
    ids: Vec<JobId>,
    /// `spaces[i]` is the place of job `ids[i]`, fixed when it was submitted.
    spaces: Vec<Space>,
    /// `procs[i]` is the processes job `ids[i]` asks for, and `total` their sum.
    procs: Vec<u32>,
    total: u64,
}

impl Queue {
    /// Adds job `id` of `procs` processes, whose place under space sharing is `space`, at
    /// the tail.
    pub(super) fn push(&mut self, id: JobId, procs: u32, space: Space) {
        debug_assert!(!self.ids.contains(&id), "{id} is queued once");
        self.ids.push(id);
        self.spaces.push(space);
        self.procs.push(procs);
        self.total += u64::from(procs);
    }

    /// Takes job `id` out of the queue, if it is there.
    pub(super) fn remove(&mut self, id: JobId) {
        if let Some(i) = self.ids.iter().position(|&x| x == id) {
            self.ids.remove(i);
            self.spaces.remove(i);
            self.total -= u64::from(self.procs.remove(i));
        }
    }

    /// The processes the jobs ask for, added up.
    pub(super) fn procs(&self) -> u64 {
        self.total
    }

    /// The places of the jobs, in queue order.
    pub(super) fn spaces(&self) -> &[Space] {
        &self.spaces
    }

    /// The jobs with their places, in queue order.
    pub(super) fn with_spaces(&self) -> impl Iterator<Item = (JobId, &Space)> {
        self.ids.iter().copied().zip(&self.spaces)
    }
}

/// The jobs in queue order.
impl Deref for Queue {
    type Target = [JobId];

    fn deref(&self) -> &[JobId] {
        &self.ids
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// After any pushes and removals, each job's place and processes are the ones it was
        /// pushed with, and the total is their sum.
        #[test]
        fn places_and_processes_stay_beside_their_jobs(
            ops in proptest::collection::vec((any::<bool>(), 0u64..12, 1u32..100), 0..80),
        ) {
            let mut q = Queue::default();
            let mut plain: Vec<(JobId, u32)> = Vec::new();
            let space = |id: u64, procs: u32| Space { ppn: procs, nodes: id as u32, ..Space::default() };
            for (push, id, procs) in ops {
                let id_ = JobId(id);
                if push && !plain.iter().any(|&(x, _)| x == id_) {
                    q.push(id_, procs, space(id, procs));
                    plain.push((id_, procs));
                } else if !push {
                    q.remove(id_);
                    plain.retain(|&(x, _)| x != id_);
                }
            }
            prop_assert_eq!(q.to_vec(), plain.iter().map(|&(x, _)| x).collect::<Vec<_>>());
            for ((id, s), &(_, procs)) in q.with_spaces().zip(&plain) {
                prop_assert_eq!((s.nodes, s.ppn), (id.0 as u32, procs));
            }
            prop_assert_eq!(q.procs(), plain.iter().map(|&(_, p)| u64::from(p)).sum::<u64>());
        }
    }
}
