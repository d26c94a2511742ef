//! An independent, deliberately plain textbook EASY / FCFS scheduler: the yardstick the
//! simulator's `easy` and `fcfs` policies are measured against.
//!
//! It is written from these reference semantics, not from `crates/policy`:
//!
//! > a pool of interchangeable PEs; at each instant all ends are applied, then all submissions
//! > join the queue (ordered by submit time, then id), then one pass: start jobs from the head
//! > while they fit; if the head does not fit, its shadow time is the earliest time enough PEs
//! > are free, taking each running job's expected end as max(now, start + estimate), and the
//! > extra PEs are those free then beyond the head's need; each later job, in order, starts now
//! > if it fits and either ends by the shadow time (now + its estimate <= shadow) or uses at
//! > most the extra PEs (which then shrink by its size).
//!
//! FCFS is the same pass without the backfilling part. Jobs end at start + runtime, cut at
//! `SimJob::limit` when one is set, exactly as the simulator runs them.
//!
//! [`schedule`] is the reference. [`schedule_variant`] also runs two departures from it that
//! are diagnostics, not references: [`Granularity::PerEvent`] runs the pass after every single
//! end and every single arrival (ends first, same-instant ends in the order the jobs were
//! started), and [`Extra::FirstRelease`] counts the extra PEs only up to the first running job
//! whose release gives the head enough (ignoring other jobs expected to end at the same
//! time). Together they are how the simulator once drove `easy` (the
//! test measures how much of the disagreement each explains).
//!
//! Nothing here is optimised beyond keeping running jobs in ordered sets: it must be easy to
//! check by reading.

use std::collections::BTreeSet;

use cosched_core::{Dur, Time};
use cosched_sim::SimJob;

/// Which textbook policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Fcfs,
    Easy,
}

/// When the scheduling pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// The reference: once per instant, after all its ends and all its arrivals.
    PerInstant,
    /// Diagnostic: after every single event.
    PerEvent,
}

/// Which PEs count as extra when the head does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    /// The reference: all PEs free at the shadow time beyond the head's need.
    AtShadow,
    /// Diagnostic: the PEs free once the running jobs, walked by expected end, first give the
    /// head enough; jobs tied with the last one walked are left out.
    FirstRelease,
}

/// A way of running the textbook pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub granularity: Granularity,
    pub extra: Extra,
}

/// The reference semantics (the module documentation).
pub const REFERENCE: Variant = Variant {
    granularity: Granularity::PerInstant,
    extra: Extra::AtShadow,
};

/// The start time of every job of `jobs` (same order) under the reference semantics, `None`
/// for a job that never starts (only possible for a job wider than the machine).
pub fn schedule(procs: u32, jobs: &[SimJob], rule: Rule) -> Vec<Option<Time>> {
    schedule_variant(procs, jobs, rule, REFERENCE)
}

/// The same under a (diagnostic) variant of the semantics.
pub fn schedule_variant(
    procs: u32,
    jobs: &[SimJob],
    rule: Rule,
    variant: Variant,
) -> Vec<Option<Time>> {
    let mut s = Reference::new(procs, jobs, rule, variant.extra);
    s.run(variant.granularity);
    s.start
}

struct Reference<'a> {
    jobs: &'a [SimJob],
    rule: Rule,
    extra: Extra,
    /// PEs not held by a running job.
    free: u32,
    /// Job indices in submission order (submit time, then id).
    arrivals: Vec<usize>,
    next_arrival: usize,
    /// Waiting jobs, in queue order (the order they arrived in, which is submit time, then id).
    queue: Vec<usize>,
    /// Running jobs by actual end: `(end, start sequence, job)`. The start sequence orders
    /// same-instant ends the way the simulator's end events are ordered (only `PerEvent` cares).
    ends: BTreeSet<(Time, u64, usize)>,
    /// Running jobs by `start + estimate`: `max(now, start + estimate)` sorts the same way.
    expected: BTreeSet<(Time, usize)>,
    start: Vec<Option<Time>>,
    started: u64,
}

impl<'a> Reference<'a> {
    fn new(procs: u32, jobs: &'a [SimJob], rule: Rule, extra: Extra) -> Reference<'a> {
        let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
        arrivals.sort_by_key(|&i| (jobs[i].req.submit, jobs[i].req.id));
        Reference {
            jobs,
            rule,
            extra,
            free: procs,
            arrivals,
            next_arrival: 0,
            queue: Vec::new(),
            ends: BTreeSet::new(),
            expected: BTreeSet::new(),
            start: vec![None; jobs.len()],
            started: 0,
        }
    }

    fn procs(&self, j: usize) -> u32 {
        self.jobs[j].req.procs
    }
    fn estimate(&self, j: usize) -> Dur {
        self.jobs[j].req.estimate
    }
    /// How long the job really holds its PEs: its runtime, cut at its limit if it has one.
    fn runs_for(&self, j: usize) -> Dur {
        let job = &self.jobs[j];
        job.limit.map_or(job.runtime, |l| job.runtime.min(l))
    }

    fn run(&mut self, granularity: Granularity) {
        loop {
            let next_arrival = self
                .arrivals
                .get(self.next_arrival)
                .map(|&j| self.jobs[j].req.submit);
            let next_end = self.ends.first().map(|&(t, _, _)| t);
            let now = match (next_arrival, next_end) {
                (None, None) => break,
                (Some(a), None) => a,
                (None, Some(e)) => e,
                (Some(a), Some(e)) => a.min(e),
            };
            // All ends of this instant first, then all its arrivals.
            while let Some(&(t, seq, j)) = self.ends.first() {
                if t > now {
                    break;
                }
                self.ends.remove(&(t, seq, j));
                let started = self.start[j].expect("a running job has started");
                self.expected.remove(&(started + self.estimate(j), j));
                self.free += self.procs(j);
                if granularity == Granularity::PerEvent {
                    self.pass(now);
                }
            }
            while let Some(&j) = self.arrivals.get(self.next_arrival) {
                if self.jobs[j].req.submit > now {
                    break;
                }
                self.next_arrival += 1;
                self.queue.push(j);
                if granularity == Granularity::PerEvent {
                    self.pass(now);
                }
            }
            if granularity == Granularity::PerInstant {
                self.pass(now);
            }
        }
    }

    fn start_job(&mut self, j: usize, now: Time) {
        debug_assert!(self.procs(j) <= self.free);
        self.free -= self.procs(j);
        self.start[j] = Some(now);
        self.started += 1;
        self.ends.insert((now + self.runs_for(j), self.started, j));
        self.expected.insert((now + self.estimate(j), j));
    }

    /// The one scheduling pass of an instant.
    fn pass(&mut self, now: Time) {
        // Start jobs from the head while they fit.
        let mut n = 0;
        while n < self.queue.len() && self.procs(self.queue[n]) <= self.free {
            self.start_job(self.queue[n], now);
            n += 1;
        }
        self.queue.drain(..n);
        if self.rule == Rule::Fcfs || self.queue.is_empty() {
            return;
        }

        // The head does not fit: its shadow time is the earliest expected end at which enough
        // PEs are free.
        let need = self.procs(self.queue[0]);
        let mut free_then = self.free;
        let mut shadow = None;
        for &(end, j) in &self.expected {
            free_then += self.procs(j);
            if free_then >= need {
                shadow = Some(end.max(now));
                break;
            }
        }
        let shadow = shadow.expect("the head fits the empty machine, so some end frees enough");
        // The extra PEs: everything free at the shadow time (every job expected to end by
        // then, not only those needed to reach the head's size) beyond the head's need.
        let free_at_shadow = self.free
            + self
                .expected
                .iter()
                .filter(|&&(end, _)| end.max(now) <= shadow)
                .map(|&(_, j)| self.procs(j))
                .sum::<u32>();
        let mut extra = match self.extra {
            Extra::AtShadow => free_at_shadow - need,
            Extra::FirstRelease => free_then - need,
        };

        // Each later job, in queue order.
        let mut backfilled = Vec::new();
        for k in 1..self.queue.len() {
            let j = self.queue[k];
            if self.procs(j) > self.free {
                continue;
            }
            if now + self.estimate(j) <= shadow {
                self.start_job(j, now);
                backfilled.push(j);
            } else if self.procs(j) <= extra {
                extra -= self.procs(j);
                self.start_job(j, now);
                backfilled.push(j);
            }
        }
        if !backfilled.is_empty() {
            let start = &self.start;
            self.queue.retain(|&j| start[j].is_none());
        }
    }
}
