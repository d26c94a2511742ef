//! Bookkeeping shared by the backfilling policies: the running jobs ordered by their expected
//! end ([`RunningSet`]) and the availability profile of the machine over future time
//! ([`Profile`]).
//!
//! A running job is expected to end at `start + estimate`; one that has run past its estimate
//! is expected to end *now* (whatever "now" is when the question is asked). Both policies use
//! that rule, so an overrunning job never makes a reservation lie in the past.

use std::collections::BTreeSet;

use cosched_core::{Dur, IdMap, JobId, PeSet, Time};

/// One running (or allocated and held) job.
#[derive(Clone, Debug)]
pub struct Run {
    pub pes: PeSet,
    pub procs: u32,
    /// `start + estimate`.
    pub expected_end: Time,
}

/// Running jobs by id and by expected end.
#[derive(Clone, Debug, Default)]
pub struct RunningSet {
    by_id: IdMap<Run>,
    /// `(expected end, id, procs)`: the procs are kept here too, so that walking the jobs by
    /// expected end (EASY's shadow time, the profile's rebuild) looks nothing up by id.
    by_end: BTreeSet<(Time, JobId, u32)>,
}

impl RunningSet {
    pub fn insert(&mut self, id: JobId, run: Run) {
        self.by_end.insert((run.expected_end, id, run.procs));
        self.by_id.insert(id, run);
    }
    pub fn remove(&mut self, id: JobId) -> Option<Run> {
        let run = self.by_id.remove(&id)?;
        self.by_end.remove(&(run.expected_end, id, run.procs));
        Some(run)
    }
    pub fn get(&self, id: JobId) -> Option<&Run> {
        self.by_id.get(&id)
    }
    pub fn len(&self) -> usize {
        self.by_id.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
    /// True when some PE set held by a running job contains `pe`.
    pub fn holds(&self, pe: cosched_core::PeId) -> bool {
        self.by_id.values().any(|r| r.pes.contains(pe))
    }
    /// `(expected end clamped to now, procs)` in order of expected end.
    pub fn releases(&self, now: Time) -> impl Iterator<Item = (Time, u32)> + '_ {
        self.by_end
            .iter()
            .map(move |&(end, _, procs)| (end.max(now), procs))
    }
    /// The running jobs in order of expected end, with that end (unclamped).
    pub fn by_end(&self) -> impl Iterator<Item = (Time, &Run)> + '_ {
        self.by_end
            .iter()
            .map(|&(end, id, _)| (end, &self.by_id[&id]))
    }
    /// The earliest unclamped expected end, if any job runs.
    pub fn first_end(&self) -> Option<Time> {
        self.by_end.first().map(|&(t, _, _)| t)
    }
}

/// Free PEs over future time as steps: `steps[i].1` PEs are free during
/// `[steps[i].0, steps[i+1].0)`, and the last step lasts for ever.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    steps: Vec<(Time, u32)>,
}

impl Profile {
    /// The profile at `now` with `free_now` free PEs and running jobs releasing theirs at the
    /// given (non-decreasing) times.
    pub fn rebuild(
        &mut self,
        now: Time,
        free_now: u32,
        releases: impl Iterator<Item = (Time, u32)>,
    ) {
        self.steps.clear();
        self.steps.push((now, free_now));
        let mut free = free_now;
        for (t, procs) in releases {
            free += procs;
            let last = self.steps.last_mut().expect("never empty");
            if last.0 == t {
                last.1 = free;
            } else {
                self.steps.push((t, free));
            }
        }
    }

    /// Forgets the past: the profile then starts at `now`.
    pub fn advance(&mut self, now: Time) {
        let keep_from = self.steps.partition_point(|s| s.0 <= now).saturating_sub(1);
        if keep_from > 0 {
            self.steps.drain(..keep_from);
        }
        if let Some(first) = self.steps.first_mut() {
            first.0 = first.0.max(now);
        }
    }

    /// Free PEs at the profile's first instant.
    pub fn free_at_start(&self) -> u32 {
        self.steps.first().map_or(0, |s| s.1)
    }

    pub fn steps(&self) -> &[(Time, u32)] {
        &self.steps
    }

    /// The earliest time `procs` PEs stay free for `dur`, with the index of its step; `None`
    /// if the machine never has that many free.
    pub fn earliest(&self, procs: u32, dur: Dur) -> Option<(Time, usize)> {
        self.earliest_before(procs, dur, Time::MAX)
    }

    /// [`Profile::earliest`] among the starts before `limit` only.
    pub fn earliest_before(&self, procs: u32, dur: Dur, limit: Time) -> Option<(Time, usize)> {
        self.earliest_from_step(procs, dur, 0, limit)
    }

    /// [`Profile::earliest`] among the starts in `[from, limit)` only: a caller that knows
    /// no place starts before `from` skips the steps before it.
    pub fn earliest_within(
        &self,
        procs: u32,
        dur: Dur,
        from: Time,
        limit: Time,
    ) -> Option<(Time, usize)> {
        let i = self.steps.partition_point(|x| x.0 < from);
        self.earliest_from_step(procs, dur, i, limit)
    }

    /// The search of [`Profile::earliest_within`], from step `i` on.
    fn earliest_from_step(
        &self,
        procs: u32,
        dur: Dur,
        mut i: usize,
        limit: Time,
    ) -> Option<(Time, usize)> {
        let s = &self.steps;
        let dur = dur.max(Dur::from_micros(1));
        'candidates: loop {
            i = next_with(s, i, procs)?;
            if s[i].0 >= limit {
                return None;
            }
            let end = s[i].0 + dur;
            let mut j = i + 1;
            while j < s.len() && s[j].0 < end {
                if s[j].1 < procs {
                    i = j + 1;
                    continue 'candidates;
                }
                j += 1;
            }
            return Some((s[i].0, i));
        }
    }

    /// When `procs` PEs are free all along from some time up to `at` (exclusive), the
    /// earliest such time; `None` if the instant just before `at` has fewer free, or `at` is
    /// not after the profile's start.
    pub fn free_until(&self, at: Time, procs: u32) -> Option<Time> {
        let n = self.steps.partition_point(|x| x.0 < at);
        let run = self.steps[..n]
            .iter()
            .rev()
            .take_while(|x| x.1 >= procs)
            .count();
        (run > 0).then(|| self.steps[n - run].0)
    }

    /// The most PEs free at any instant of `[start, end)` (0 for an empty span).
    pub fn max_free(&self, start: Time, end: Time) -> u32 {
        let from = self
            .steps
            .partition_point(|s| s.0 <= start)
            .saturating_sub(1);
        self.steps[from..]
            .iter()
            .take_while(|s| s.0 < end)
            .map(|s| s.1)
            .max()
            .unwrap_or(0)
    }

    /// Index of the step starting exactly at `t`, splitting the step that covers it if
    /// needed. `t` must not be before the profile's start.
    fn split(&mut self, t: Time) -> usize {
        let i = self.steps.partition_point(|s| s.0 <= t);
        debug_assert!(i > 0, "split before the profile's start");
        if self.steps[i - 1].0 == t {
            return i - 1;
        }
        let free = self.steps[i - 1].1;
        self.steps.insert(i, (t, free));
        i
    }

    /// Takes `procs` PEs during `[start, start + dur)` if they are free all along; returns
    /// false (taking nothing) otherwise, or when `start` is before the profile's start.
    pub fn reserve_at(&mut self, start: Time, dur: Dur, procs: u32) -> bool {
        if self.steps.first().is_none_or(|s| start < s.0) {
            return false;
        }
        let end = start + dur.max(Dur::from_micros(1));
        let i = self.split(start);
        let j = self.split(end);
        if self.steps[i..j].iter().any(|s| s.1 < procs) {
            return false;
        }
        for step in &mut self.steps[i..j] {
            step.1 -= procs;
        }
        true
    }

    /// Gives back what [`Profile::reserve_at`] (or [`Profile::reserve`]) took.
    pub fn unreserve(&mut self, start: Time, dur: Dur, procs: u32) {
        self.free(start, start + dur.max(Dur::from_micros(1)), procs);
    }

    /// Adds `procs` free PEs over `[start, end)`, the part before the profile's start
    /// ignored (it is the past): a running job that ended before its expected end, or a
    /// reservation given back whose window may have begun already.
    pub fn free(&mut self, start: Time, end: Time, procs: u32) {
        let Some(first) = self.steps.first() else {
            return;
        };
        let start = start.max(first.0);
        if end <= start {
            return;
        }
        let i = self.split(start);
        let j = self.split(end);
        for step in &mut self.steps[i..j] {
            step.1 += procs;
        }
    }

    /// The steps with equal neighbours merged: two profiles that say the same free counts at
    /// every instant have the same normal form whatever their splits.
    pub fn normalized(&self) -> Vec<(Time, u32)> {
        let mut out: Vec<(Time, u32)> = Vec::with_capacity(self.steps.len());
        for &s in &self.steps {
            if out.last().is_none_or(|l| l.1 != s.1) {
                out.push(s);
            }
        }
        out
    }

    /// Takes `procs` PEs during `[start, start + dur)`, where `start` is the time of step `at`
    /// (as [`Profile::earliest`] returns it).
    pub fn reserve(&mut self, at: usize, dur: Dur, procs: u32) {
        let end = self.steps[at].0 + dur.max(Dur::from_micros(1));
        let mut j = at;
        while j < self.steps.len() && self.steps[j].0 < end {
            j += 1;
        }
        if j == self.steps.len() || self.steps[j].0 != end {
            let before = self.steps[j - 1].1;
            self.steps.insert(j, (end, before));
        }
        for step in &mut self.steps[at..j] {
            debug_assert!(step.1 >= procs, "reservation over a full step");
            step.1 -= procs;
        }
    }
}

/// The first step from index `i` on with at least `procs` free. Most of an earliest-fit
/// search is this skip over a busy stretch; taking the steps in blocks whose maximum is
/// computed without a branch per step costs fewer instructions than testing each (−13 % on
/// conservative over SDSC-BLUE; the user time measured the same, see docs/benchmarks.md).
fn next_with(s: &[(Time, u32)], mut i: usize, procs: u32) -> Option<usize> {
    const BLOCK: usize = 8;
    while let Some(block) = s.get(i..i + BLOCK) {
        if block.iter().fold(0, |m, x| m.max(x.1)) >= procs {
            break;
        }
        i += BLOCK;
    }
    let rest = s.get(i..)?;
    rest.iter().position(|x| x.1 >= procs).map(|k| i + k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Time {
        Time::from_secs(s)
    }
    fn d(s: i64) -> Dur {
        Dur::from_secs(s)
    }

    #[test]
    fn earliest_fit_skips_holes_too_short() {
        let mut p = Profile::default();
        // 4 free now, 10 at 10 s, 16 at 30 s.
        p.rebuild(t(0), 4, [(t(10), 6), (t(30), 6)].into_iter());
        assert_eq!(p.earliest(4, d(100)).unwrap().0, t(0));
        assert_eq!(p.earliest(8, d(5)).unwrap().0, t(10));
        let (at, i) = p.earliest(10, d(5)).unwrap();
        assert_eq!(at, t(10));
        p.reserve(i, d(5), 10); // 0 free in [10, 15)
        assert_eq!(
            p.steps(),
            &[(t(0), 4), (t(10), 0), (t(15), 10), (t(30), 16)]
        );
        // A 2-PE job for 12 s would run into the full step at 10: it goes at 15; 10 s fits at 0.
        assert_eq!(p.earliest(2, d(12)).unwrap().0, t(15));
        assert_eq!(p.earliest(2, d(10)).unwrap().0, t(0));
        assert!(p.earliest(17, d(1)).is_none());
        // Giving back and taking again at a fixed time.
        p.unreserve(t(10), d(5), 10);
        assert_eq!(p.earliest(10, d(5)).unwrap().0, t(10));
        assert!(!p.reserve_at(t(5), d(10), 5));
        assert!(p.reserve_at(t(10), d(5), 10));
        assert_eq!(p.earliest(1, d(3)).unwrap().0, t(0));
        assert!(!p.reserve_at(t(-1), d(1), 1));
        p.advance(t(12));
        assert_eq!(p.steps(), &[(t(12), 0), (t(15), 10), (t(30), 16)]);
    }

    /// The block skip of the earliest-fit search against a search that tests every step,
    /// on long random profiles (busy and free stretches, block boundaries anywhere).
    #[test]
    fn earliest_fit_matches_a_step_by_step_search() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let naive = |p: &Profile, procs: u32, dur: Dur, from: Time, limit: Time| {
            let s = p.steps();
            let dur = dur.max(Dur::from_micros(1));
            (0..s.len())
                .filter(|&i| s[i].0 >= from && s[i].0 < limit)
                .find(|&i| {
                    let end = s[i].0 + dur;
                    s[i..]
                        .iter()
                        .take_while(|x| x.0 < end)
                        .all(|x| x.1 >= procs)
                })
                .map(|i| (s[i].0, i))
        };
        let mut checked = 0;
        for _ in 0..200 {
            let mut p = Profile::default();
            let n = 1 + next(60) as i64;
            p.rebuild(t(0), 0, (1..=n).map(|k| (t(k * 10), 2)));
            // Take PEs back over random spans: busy stretches of any length.
            for _ in 0..next(40) {
                let (a, len) = (next(n as u64 * 10) as i64, 1 + next(200) as i64);
                let procs = 1 + next(6) as u32;
                let _ = p.reserve_at(t(a), d(len), procs);
            }
            for _ in 0..50 {
                let procs = 1 + next(2 * n as u64 + 2) as u32;
                let dur = d(next(120) as i64);
                let from = t(next(n as u64 * 10) as i64 - 5);
                let limit = t(next(n as u64 * 12) as i64);
                let got = p.earliest_within(procs, dur, from, limit);
                assert_eq!(got, naive(&p, procs, dur, from, limit), "{:?}", p.steps());
                assert_eq!(
                    p.earliest(procs, dur),
                    naive(&p, procs, dur, t(0), Time::MAX)
                );
                checked += got.is_some() as u32;
            }
        }
        assert!(checked > 1000, "only {checked} searches found a place");
    }

    #[test]
    fn earlier_places_and_free_runs() {
        let mut p = Profile::default();
        // 4 free now, 10 at 10 s; a 6-PE job for 20 s reserved at 10.
        p.rebuild(t(0), 4, [(t(10), 6)].into_iter());
        assert!(p.reserve_at(t(10), d(20), 6));
        assert_eq!(p.normalized(), vec![(t(0), 4), (t(30), 10)]);
        assert_eq!(p.free_until(t(10), 4), Some(t(0)));
        assert_eq!(p.free_until(t(10), 5), None);
        assert_eq!(p.free_until(t(0), 1), None);
        assert_eq!(p.free_until(t(40), 5), Some(t(30)));
        assert_eq!(p.earliest_before(5, d(1), t(30)), None);
        assert_eq!(p.earliest_before(5, d(1), t(31)).unwrap().0, t(30));
        let mut q = Profile::default();
        q.rebuild(t(0), 0, [(t(5), 3)].into_iter());
        assert!(q.reserve_at(t(8), d(12), 3)); // a hole [5, 8)
        assert!(q.reserve_at(t(20), d(2), 3));
        assert_eq!(q.earliest_before(3, d(3), t(20)).unwrap().0, t(5));
        assert_eq!(q.earliest_before(3, d(4), t(20)), None);
        assert_eq!(q.earliest(3, d(4)).unwrap().0, t(22));
        // Freeing clips at the profile's start and splits where needed.
        q.advance(t(6));
        q.free(t(0), t(7), 2);
        assert_eq!(q.normalized()[..3], [(t(6), 5), (t(7), 3), (t(8), 0)]);
    }
}
