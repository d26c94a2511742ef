//! pybatsim's EASY (`variant=pybatsim`, adapted from pyss): a pass after each event, over
//! pyss's CPU snapshot. The snapshot holds each running job until its walltime, less the
//! tail cut off when its completion is reported; so at an instant where several jobs reach
//! their walltime, the pass after the first completion already counts the PEs of all of them
//! free. The jobs a pass chooses get their PEs at [`Policy::decide`](crate::Policy::decide),
//! once every end of the instant has been taken in — which, with Batsim killing jobs at their
//! walltime (`--kill-at-estimate` here), frees those PEs.

use cosched_core::Time;

use super::Easy;
use crate::{Decision, JobRequest};

impl Easy {
    /// PEs free now as pyss's snapshot counts them: free, or held by a job whose walltime is
    /// reached, less those the passes of this instant have already given out.
    fn pyss_free(&self, now: Time) -> u32 {
        let due: u32 = self
            .s
            .running
            .by_end()
            .take_while(|(end, _)| *end <= now)
            .map(|(_, r)| r.procs)
            .sum();
        let chosen: u32 = self.chosen.iter().map(|j| j.procs).sum();
        (self.s.pool.free_count() + due).saturating_sub(chosen)
    }

    /// Whether a submission calls for a pass: the new job fits in the snapshot's free PEs.
    pub(super) fn pyss_fits(&self, now: Time, procs: u32) -> bool {
        procs <= self.pyss_free(now)
    }

    /// One pass: heads while they fit, then the textbook backfilling of the rest against the
    /// head's shadow time and extra PEs, all on the snapshot's counts.
    pub(super) fn pyss_pass(&mut self, now: Time) {
        let mut free = self.pyss_free(now);
        while let Some(h) = self.s.queue.head() {
            if self.s.queue.get(h).procs > free {
                break;
            }
            let job = self.s.queue.remove(h);
            free -= job.procs;
            self.chosen.push(job);
        }
        let Some(h) = self.s.queue.head() else { return };
        let need = self.s.queue.get(h).procs;
        // Expected ends after now: the running jobs' and those chosen at this instant.
        let mut releases: Vec<(Time, u32)> = self
            .s
            .running
            .by_end()
            .filter(|(end, _)| *end > now)
            .map(|(end, r)| (end, r.procs))
            .chain(self.chosen.iter().map(|j| (now + j.estimate, j.procs)))
            .collect();
        releases.sort_unstable();
        // Every job ending by the shadow time frees its PEs then, not only those the head
        // needs.
        let (mut shadow, mut avail) = (Time::MAX, free);
        for (end, procs) in releases {
            if end > shadow {
                break;
            }
            avail += procs;
            if shadow == Time::MAX && avail >= need {
                shadow = end;
            }
        }
        let mut extra = if shadow == Time::MAX { 0 } else { avail - need };
        let mut picked: Vec<usize> = Vec::new();
        for k in h + 1..self.s.queue.len() {
            if free == 0 {
                break;
            }
            let job = self.s.queue.get(k);
            if job.procs > free || self.s.queue.is_held(job.id) {
                continue;
            }
            let in_time = shadow == Time::MAX || now + job.estimate <= shadow;
            if !in_time && job.procs > extra {
                continue;
            }
            if !in_time {
                extra -= job.procs;
            }
            free -= job.procs;
            picked.push(k);
        }
        let mut backfilled: Vec<JobRequest> = picked
            .iter()
            .rev()
            .map(|&k| self.s.queue.remove(k))
            .collect();
        backfilled.reverse();
        self.chosen.append(&mut backfilled);
    }

    /// Gives the jobs chosen at this instant their PEs, in the order chosen. A job whose PEs
    /// are still held (a job past its walltime that was not killed) waits in the queue again.
    pub(super) fn pyss_start(&mut self, now: Time, out: &mut Vec<Decision>) {
        let chosen = std::mem::take(&mut self.chosen);
        for job in chosen {
            match self.s.pool.allocate_for(&job) {
                Some(pes) => self
                    .s
                    .launch(now, job.id, job.procs, job.estimate, pes, out),
                None => {
                    self.s.queue.insert(job);
                }
            }
        }
    }
}
