//! A VM's waiting queue: its jobs in queue order, each with its place under space sharing
//! beside it.
//!
//! Every backfilling pass reads the needs of the jobs it may place and of the other queues'
//! guests. Kept beside the ids, they are read in one run of memory, where looking each job
//! up in the policy's table costs a hash and a cache miss per job at every pass.

use std::ops::Deref;

use cosched_core::JobId;

use super::Space;

#[derive(Clone, Debug, Default)]
pub(super) struct Queue {
    ids: Vec<JobId>,
    /// `spaces[i]` is the place of job `ids[i]`, fixed when it was submitted.
    spaces: Vec<Space>,
}

impl Queue {
    /// Adds job `id`, whose place under space sharing is `space`, at the tail.
    pub(super) fn push(&mut self, id: JobId, space: Space) {
        debug_assert!(!self.ids.contains(&id), "{id} is queued once");
        self.ids.push(id);
        self.spaces.push(space);
    }

    /// Takes job `id` out of the queue, if it is there.
    pub(super) fn remove(&mut self, id: JobId) {
        if let Some(i) = self.ids.iter().position(|&x| x == id) {
            self.ids.remove(i);
            self.spaces.remove(i);
        }
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
