//! Quantum skipping: the simulator's half of the policy contract's "Skipping quanta".
//!
//! A time-sharing policy whose matrix only rotates between outside events answers
//! [`Policy::cycle_point`] at one phase of its rotation. The engine keeps, at each such point,
//! the time, its counters and the run time of every job the policy lists. When the policy
//! next says [`CyclePoint::Steady`], the time since is one period `L`, and each listed job ran
//! `w` of it. Stepping on would repeat that period exactly until something from outside
//! happens, so the engine jumps `k` whole periods at once, `k` the largest count that ends
//! strictly before the next arrival, the next operation and every job's completion (a job
//! with `r` work left completes after more than `k` periods iff `k·w < r`). Everything the
//! skipped quanta would have recorded is added in integer time: run and suspended time, the
//! current stretches moved by `k·L` (`Ledger::skip_cycles`), the end events of the jobs that
//! were stopped and restarted in the period, the pending timer, the event and decision
//! counts. The engine then steps again, so completions fall on the instants and rows of a
//! step-by-step run.
//!
//! While a trace is still being read (`simulate_streamed`), the next arrival is the next one
//! read so far; a skip moves the engine's clock to the end of the skipped periods, so a job
//! read later but submitted inside them is out of order and the run is done again from the
//! whole trace, never simulated late.
//!
//! End events that tie are taken in the order of their sequence numbers. Stepping gives every
//! job restarted in the last period a fresh number, in the order it was restarted, above the
//! numbers of jobs that ran throughout; re-inserting the restarted jobs' ends in the order of
//! their current numbers keeps that order.

use super::*;
use cosched_policy::CyclePoint;

/// The engine's record at the last cycle point.
#[derive(Default)]
pub(super) struct Skipper {
    /// Whether `at` and the rest describe the last cycle point.
    valid: bool,
    at: Time,
    events: u64,
    decisions: u64,
    other_events: u64,
    /// `(job index, run time so far)` of the jobs the policy listed, in its order.
    jobs: Vec<(u32, Dur)>,
    /// Buffers reused at every point.
    ids: Vec<JobId>,
    restarted: Vec<(u64, u32)>,
}

impl<const MC: bool, F: Jobs> Engine<'_, MC, F> {
    /// At the end of the instant `now`: asks the policy where it stands and skips whole
    /// periods when it repeats.
    pub(super) fn cycle_point(&mut self, now: Time) {
        let mut ids = std::mem::take(&mut self.skipper.ids);
        if let Some(point) = self.policy.cycle_point(now, &mut ids) {
            let skipped = point == CyclePoint::Steady && self.skip(now, &ids);
            if skipped {
                // The next point starts a fresh measure.
                self.skipper.valid = false;
            } else {
                self.mark(now, &ids);
            }
        }
        self.skipper.ids = ids;
    }

    fn mark(&mut self, now: Time, ids: &[JobId]) {
        let s = &mut self.skipper;
        s.valid = true;
        s.at = now;
        s.events = self.events;
        s.decisions = self.decisions;
        s.other_events = self.other_events;
        s.jobs.clear();
        for &id in ids {
            match self.ledger.find(id) {
                Some(i) => s.jobs.push((i as u32, self.ledger.entry(i).ran(now))),
                None => {
                    s.valid = false;
                    return;
                }
            }
        }
    }

    /// Skips as many whole periods as nothing else happens in; whether it skipped any.
    fn skip(&mut self, now: Time, ids: &[JobId]) -> bool {
        let s = &self.skipper;
        let period = now - s.at;
        if MC
            || !s.valid
            || s.other_events != self.other_events
            || s.jobs.len() != ids.len()
            || period <= Dur::ZERO
            || self.heap.len() != 1
            || !self.caused.is_empty()
        {
            return false;
        }
        let l = period.as_micros();
        // Periods that end strictly before `t`.
        let before = |t: Time| ((t - now).as_micros() - 1).max(0) / l;
        let mut k = i64::MAX;
        if let Some(&i) = self.arrivals.get(self.next_arrival) {
            k = k.min(before(self.jobs.known()[i as usize].req.submit));
        }
        if let Some(&(t, _)) = self.operations.get(self.next_operation) {
            k = k.min(before(t));
        }
        let mut running = 0;
        for (&(i, ran0), &id) in s.jobs.iter().zip(ids) {
            let i = i as usize;
            let e = self.ledger.entry(i);
            if self.jobs.known()[i].req.id != id || !e.is_live() || !e.launched() || e.held() {
                return false;
            }
            running += usize::from(e.is_running());
            let ran = e.ran(now);
            let w = (ran - ran0).as_micros();
            let left = (self.work[i] - ran).as_micros();
            if w < 0 || w > l || left <= 0 || (w == 0 && e.is_running()) {
                return false;
            }
            if w > 0 {
                k = k.min((left - 1) / w);
            }
        }
        if running != self.ledger.running() || k < 1 || k == i64::MAX {
            return false;
        }
        let Some(token) = self.policy.skip_cycles(k as u64) else {
            return false;
        };
        let shift = Dur::from_micros(k * l);
        let s = &mut self.skipper;
        let mut restarted = std::mem::take(&mut s.restarted);
        restarted.clear();
        for &(i, ran0) in &s.jobs {
            let i = i as usize;
            let w = self.ledger.entry(i).ran(now) - ran0;
            if w == Dur::ZERO || w == period {
                continue; // never ran, or ran throughout: nothing moves
            }
            if let Some(seq) = self.ends.seq_of(i) {
                restarted.push((seq, i as u32));
            }
            self.ledger.skip_cycles(i, shift, w * k);
        }
        let later = now + shift;
        // Simulated up to there: a job that a trace read as it is simulated brings later,
        // submitted by then, is out of order (the run is done again from the whole trace).
        self.clock = self.clock.max(Some(later));
        restarted.sort_unstable();
        for &(_, i) in &restarted {
            let i = i as usize;
            self.ends.remove(i);
            self.seq += 1;
            let left = self.work[i] - self.ledger.entry(i).ran(later);
            self.ends.insert(later + left, self.seq, i);
        }
        s.restarted = restarted;
        let k = k as u64;
        self.events += k * (self.events - s.events);
        self.decisions += k * (self.decisions - s.decisions);
        let Reverse(timer) = self.heap.pop().expect("one timer, checked above");
        self.push_timer(timer.time + shift, token);
        true
    }
}
