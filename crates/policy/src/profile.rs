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

/// Free PEs over future time as steps: a step `(t, n)` says `n` PEs are free from `t` to the
/// next step's time, and the last step lasts for ever.
///
/// The steps are kept in blocks of a few dozen, each with the most and the fewest PEs free
/// in it. With thousands of waiting jobs the profile has thousands of steps, and most of an
/// earliest-fit search is a walk over steps with too few PEs free (the job waits because no
/// hole fits it): a block whose most is below the width is passed in one comparison, and a
/// window whose blocks all have enough is checked block by block. A change touches one or
/// two blocks instead of moving every later step.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Never an empty block; no block at all before the first rebuild.
    blocks: Vec<Block>,
}

#[derive(Clone, Debug, Default)]
struct Block {
    steps: Vec<(Time, u32)>,
    /// The most and the fewest PEs free over `steps`.
    max: u32,
    min: u32,
    /// The first step's time, kept beside the summary so that the binary searches over the
    /// blocks, made at every change and search, read no block's steps.
    start: Time,
}

impl Block {
    fn of(steps: Vec<(Time, u32)>) -> Block {
        let start = steps[0].0;
        let mut b = Block {
            steps,
            max: 0,
            min: 0,
            start,
        };
        b.summarize();
        b
    }

    fn summarize(&mut self) {
        self.max = self.steps.iter().fold(0, |m, s| m.max(s.1));
        self.min = self.steps.iter().fold(u32::MAX, |m, s| m.min(s.1));
    }

    /// Brings the most and fewest free up to date after some steps, not all, gained `delta`
    /// free PEs and now have from `lo` to `hi` free. The untouched steps' extremes are not
    /// known, but an old extreme that no shifted step held stays where it was; only when a
    /// shifted step may have held it is the block summarized again. A reservation's edge
    /// block mostly keeps its most (it lies in the untouched part), so most changes read only
    /// the steps they shift.
    fn retally(&mut self, hi: u32, lo: u32, delta: i64) {
        use std::cmp::Ordering;
        // What the shifted steps held before.
        let (old_hi, old_lo) = ((hi as i64 - delta) as u32, (lo as i64 - delta) as u32);
        match delta.cmp(&0) {
            Ordering::Equal => {}
            Ordering::Less => {
                self.min = self.min.min(lo);
                if old_hi >= self.max {
                    self.max = self.steps.iter().fold(0, |m, s| m.max(s.1));
                }
            }
            Ordering::Greater => {
                self.max = self.max.max(hi);
                if old_lo <= self.min {
                    self.min = self.steps.iter().fold(u32::MAX, |m, s| m.min(s.1));
                }
            }
        }
        #[cfg(debug_assertions)]
        {
            let (max, min) = (self.max, self.min);
            self.summarize();
            debug_assert_eq!((max, min), (self.max, self.min), "block summary wrong");
        }
    }

    fn start(&self) -> Time {
        debug_assert_eq!(self.start, self.steps[0].0);
        self.start
    }
}

/// A step's place: its block and its index there. What [`Profile::earliest`] returns for
/// [`Profile::reserve`], valid until the profile next changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    b: usize,
    k: usize,
}

/// Steps a rebuild puts in a block, and the most a block holds before it is cut in two.
const BLOCK: usize = 64;
const BLOCK_CAP: usize = 2 * BLOCK;

impl Profile {
    /// The profile at `now` with `free_now` free PEs and running jobs releasing theirs at the
    /// given (non-decreasing) times.
    pub fn rebuild(
        &mut self,
        now: Time,
        free_now: u32,
        releases: impl Iterator<Item = (Time, u32)>,
    ) {
        // The old blocks lend their buffers: a rebuild, frequent on real traces, allocates
        // only when the profile grew.
        let mut spare: Vec<Vec<(Time, u32)>> = std::mem::take(&mut self.blocks)
            .into_iter()
            .map(|mut b| {
                b.steps.clear();
                b.steps
            })
            .collect();
        let mut cur = spare.pop().unwrap_or_default();
        cur.push((now, free_now));
        let mut free = free_now;
        for (t, procs) in releases {
            free += procs;
            let last = cur.last_mut().expect("never empty");
            if last.0 == t {
                last.1 = free;
                continue;
            }
            if cur.len() == BLOCK {
                let next = spare.pop().unwrap_or_default();
                self.blocks
                    .push(Block::of(std::mem::replace(&mut cur, next)));
            }
            cur.push((t, free));
        }
        self.blocks.push(Block::of(cur));
    }

    /// Forgets the past: the profile then starts at `now`.
    pub fn advance(&mut self, now: Time) {
        if self.blocks.is_empty() {
            return;
        }
        let Place { b, k } = self.covering(now);
        if b > 0 {
            self.blocks.drain(..b);
        }
        let first = &mut self.blocks[0];
        if k > 0 {
            first.steps.drain(..k);
            first.summarize();
        }
        first.steps[0].0 = first.steps[0].0.max(now);
        first.start = first.steps[0].0;
    }

    /// Free PEs at the profile's first instant.
    pub fn free_at_start(&self) -> u32 {
        self.blocks.first().map_or(0, |b| b.steps[0].1)
    }

    /// Every step in time order.
    pub fn steps(&self) -> Vec<(Time, u32)> {
        self.blocks
            .iter()
            .flat_map(|b| b.steps.iter().copied())
            .collect()
    }

    /// The step at `p`.
    fn at(&self, p: Place) -> (Time, u32) {
        self.blocks[p.b].steps[p.k]
    }

    /// The place after `p` (past the end: `b == blocks.len()`).
    fn after(&self, p: Place) -> Place {
        if p.k + 1 < self.blocks[p.b].steps.len() {
            Place { b: p.b, k: p.k + 1 }
        } else {
            Place { b: p.b + 1, k: 0 }
        }
    }

    /// The step covering `t`: the last one starting at or before it, or the first step
    /// when `t` is before the profile's start. The profile must not be empty.
    fn covering(&self, t: Time) -> Place {
        let b = self
            .blocks
            .partition_point(|x| x.start() <= t)
            .saturating_sub(1);
        let k = self.blocks[b]
            .steps
            .partition_point(|s| s.0 <= t)
            .saturating_sub(1);
        Place { b, k }
    }

    /// The first step starting at or after `t` (past the end if none).
    fn first_from(&self, t: Time) -> Place {
        let b = self.blocks.partition_point(|x| x.start() < t);
        // The block before may still hold steps at or after `t`.
        if b > 0 {
            let prev = &self.blocks[b - 1].steps;
            let k = prev.partition_point(|s| s.0 < t);
            if k < prev.len() {
                return Place { b: b - 1, k };
            }
        }
        Place { b, k: 0 }
    }

    /// The first step from `p` on with at least `procs` free.
    fn next_with(&self, mut p: Place, procs: u32) -> Option<Place> {
        while let Some(block) = self.blocks.get(p.b) {
            if block.max >= procs
                && let Some(k) = block.steps[p.k..].iter().position(|s| s.1 >= procs)
            {
                return Some(Place { b: p.b, k: p.k + k });
            }
            p = Place { b: p.b + 1, k: 0 };
        }
        None
    }

    /// The first step from `p` on that starts before `end` and has fewer than `procs` free.
    fn first_short(&self, mut p: Place, end: Time, procs: u32) -> Option<Place> {
        while let Some(block) = self.blocks.get(p.b) {
            if block.start() >= end {
                return None;
            }
            if block.min < procs {
                for (k, s) in block.steps[p.k..].iter().enumerate() {
                    if s.0 >= end {
                        return None;
                    }
                    if s.1 < procs {
                        return Some(Place { b: p.b, k: p.k + k });
                    }
                }
            }
            p = Place { b: p.b + 1, k: 0 };
        }
        None
    }

    /// Whether `procs` PEs are free for `dur` from the profile's start (a job of that width
    /// and length could start now).
    pub fn fits_at_start(&self, procs: u32, dur: Dur) -> bool {
        let Some(start) = self.blocks.first().map(Block::start) else {
            return false;
        };
        let end = start + dur;
        self.first_short(Place { b: 0, k: 0 }, end, procs).is_none()
    }

    /// The earliest time `procs` PEs stay free for `dur`, with the place of its step; `None`
    /// if the machine never has that many free.
    pub fn earliest(&self, procs: u32, dur: Dur) -> Option<(Time, Place)> {
        self.earliest_before(procs, dur, Time::MAX)
    }

    /// [`Profile::earliest`] among the starts before `limit` only.
    pub fn earliest_before(&self, procs: u32, dur: Dur, limit: Time) -> Option<(Time, Place)> {
        self.earliest_from(procs, dur, Place { b: 0, k: 0 }, limit)
    }

    /// [`Profile::earliest`] among the starts in `[from, limit)` only: a caller that knows
    /// no place starts before `from` skips the steps before it.
    pub fn earliest_within(
        &self,
        procs: u32,
        dur: Dur,
        from: Time,
        limit: Time,
    ) -> Option<(Time, Place)> {
        if self.blocks.is_empty() {
            return None;
        }
        self.earliest_from(procs, dur, self.first_from(from), limit)
    }

    /// The search of [`Profile::earliest_within`], from step `p` on.
    fn earliest_from(
        &self,
        procs: u32,
        dur: Dur,
        mut p: Place,
        limit: Time,
    ) -> Option<(Time, Place)> {
        let dur = dur.max(Dur::from_micros(1));
        loop {
            p = self.next_with(p, procs)?;
            let t = self.at(p).0;
            if t >= limit {
                return None;
            }
            match self.first_short(self.after(p), t + dur, procs) {
                Some(short) => p = self.after(short),
                None => return Some((t, p)),
            }
        }
    }

    /// When `procs` PEs are free all along from some time up to `at` (exclusive), the
    /// earliest such time; `None` if the instant just before `at` has fewer free, or `at` is
    /// not after the profile's start.
    pub fn free_until(&self, at: Time, procs: u32) -> Option<Time> {
        if self.blocks.is_empty() {
            return None;
        }
        // Walk back from the last step starting before `at` while the steps have enough.
        let Place { b, k } = self.first_from(at);
        let (mut b, mut k) = match (b, k) {
            (0, 0) => return None,
            (b, 0) => (b - 1, self.blocks[b - 1].steps.len()),
            (b, k) => (b, k),
        };
        let mut earliest = None;
        loop {
            let steps = &self.blocks[b].steps[..k];
            if self.blocks[b].min >= procs && k == self.blocks[b].steps.len() {
                earliest = Some(steps[0].0);
            } else {
                let run = steps.iter().rev().take_while(|s| s.1 >= procs).count();
                if run > 0 {
                    earliest = Some(steps[k - run].0);
                }
                if run < k {
                    return earliest;
                }
            }
            if b == 0 {
                return earliest;
            }
            b -= 1;
            k = self.blocks[b].steps.len();
        }
    }

    /// The most PEs free at any instant of `[start, end)` (0 for an empty span).
    pub fn max_free(&self, start: Time, end: Time) -> u32 {
        if self.blocks.is_empty() {
            return 0;
        }
        let mut p = self.covering(start);
        let mut most = 0;
        while let Some(block) = self.blocks.get(p.b) {
            if block.start() >= end {
                break;
            }
            let whole = p.k == 0 && block.steps.last().is_some_and(|s| s.0 < end);
            if whole {
                most = most.max(block.max);
            } else {
                for s in &block.steps[p.k..] {
                    if s.0 >= end {
                        return most;
                    }
                    most = most.max(s.1);
                }
            }
            p = Place { b: p.b + 1, k: 0 };
        }
        most
    }

    /// The place of the step starting exactly at `t`, splitting the step that covers it if
    /// needed. `t` must not be before the profile's start.
    fn split(&mut self, t: Time) -> Place {
        let Place { b, k } = self.covering(t);
        debug_assert!(
            self.blocks[b].steps[k].0 <= t,
            "split before the profile's start"
        );
        if self.blocks[b].steps[k].0 == t {
            return Place { b, k };
        }
        let free = self.blocks[b].steps[k].1;
        self.blocks[b].steps.insert(k + 1, (t, free));
        // The same free count twice: the block's summary stands.
        if self.blocks[b].steps.len() > BLOCK_CAP {
            let tail = self.blocks[b].steps.split_off(BLOCK);
            self.blocks[b].summarize();
            self.blocks.insert(b + 1, Block::of(tail));
            if k + 1 >= BLOCK {
                return Place {
                    b: b + 1,
                    k: k + 1 - BLOCK,
                };
            }
        }
        Place { b, k: k + 1 }
    }

    /// Adds `delta` free PEs (or takes `-delta`) over the steps from the one starting at
    /// `start` to the one before the step starting at `end`; both must be step starts.
    fn shift(&mut self, start: Time, end: Time, delta: i64) {
        let p = self.covering(start);
        debug_assert_eq!(self.at(p).0, start);
        self.shift_from(p, end, delta);
    }

    /// [`Profile::shift`] from the step at `p`.
    ///
    /// A step at either edge left with the free count of the step before it in its block is
    /// dropped: compression gives back and takes again reservations all the time, and the
    /// split points they leave behind would otherwise pile up for every search and change to
    /// walk over. A place or a free run never starts at such a step (the one before it
    /// would do as well), so no answer changes.
    fn shift_from(&mut self, mut p: Place, end: Time, delta: i64) {
        let first = p;
        let mut last: Option<Place> = None;
        while let Some(block) = self.blocks.get_mut(p.b) {
            if block.start() >= end {
                break;
            }
            let whole = p.k == 0 && block.steps.last().is_some_and(|s| s.0 < end);
            let apply = |n: u32| {
                let v = n as i64 + delta;
                debug_assert!(v >= 0, "reservation over a full step");
                v as u32
            };
            if whole {
                for s in &mut block.steps {
                    s.1 = apply(s.1);
                }
                block.max = apply(block.max);
                block.min = apply(block.min);
            } else {
                let mut stop = None;
                // The most and fewest free of the shifted steps, after the shift.
                let (mut hi, mut lo) = (0, u32::MAX);
                for (i, s) in block.steps[p.k..].iter_mut().enumerate() {
                    if s.0 >= end {
                        stop = Some(p.k + i);
                        break;
                    }
                    s.1 = apply(s.1);
                    hi = hi.max(s.1);
                    lo = lo.min(s.1);
                }
                if lo <= hi {
                    block.retally(hi, lo, delta);
                }
                if let Some(k) = stop {
                    last = Some(Place { b: p.b, k });
                    break;
                }
            }
            p = Place { b: p.b + 1, k: 0 };
        }
        // The later edge first, so that the earlier one's place stays right.
        for Place { b, k } in last.into_iter().chain([first]) {
            let steps = &mut self.blocks[b].steps;
            // Dropping a duplicate leaves the block's most, fewest and start as they are.
            if k > 0 && k < steps.len() && steps[k - 1].1 == steps[k].1 {
                steps.remove(k);
            }
        }
    }

    /// Splits at `start` and `end` and adds `delta` free PEs between them.
    fn change(&mut self, start: Time, end: Time, delta: i64) {
        // The later split first: the place of the earlier one then stays valid for the shift.
        self.split(end);
        let p = self.split(start);
        self.shift_from(p, end, delta);
    }

    /// Takes `procs` PEs during `[start, start + dur)` if they are free all along; returns
    /// false (taking nothing) otherwise, or when `start` is before the profile's start.
    pub fn reserve_at(&mut self, start: Time, dur: Dur, procs: u32) -> bool {
        if self.blocks.first().is_none_or(|b| start < b.start()) {
            return false;
        }
        let end = start + dur.max(Dur::from_micros(1));
        if self.first_short(self.covering(start), end, procs).is_some() {
            return false;
        }
        self.change(start, end, -(procs as i64));
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
        let Some(first) = self.blocks.first() else {
            return;
        };
        let start = start.max(first.start());
        if end <= start {
            return;
        }
        self.change(start, end, procs as i64);
    }

    /// The steps with equal neighbours merged: two profiles that say the same free counts at
    /// every instant have the same normal form whatever their splits.
    pub fn normalized(&self) -> Vec<(Time, u32)> {
        let mut out: Vec<(Time, u32)> = Vec::new();
        for b in &self.blocks {
            for &s in &b.steps {
                if out.last().is_none_or(|l| l.1 != s.1) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// Takes `procs` PEs during `[start, start + dur)`, where `start` is the time of the step
    /// at `at` (as [`Profile::earliest`] returns it).
    pub fn reserve(&mut self, at: Place, dur: Dur, procs: u32) {
        let start = self.at(at).0;
        let end = start + dur.max(Dur::from_micros(1));
        self.split(end);
        self.shift(start, end, -(procs as i64));
    }
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

    /// The blocked profile against a flat list of steps changed and searched step by step,
    /// on long random profiles (many blocks, blocks cut in two by splits, busy and free
    /// stretches across block boundaries, the past dropped).
    #[test]
    fn blocked_profile_matches_a_flat_step_by_step_one() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // The flat reference: splits by insertion, searches by testing every step.
        fn split(s: &mut Vec<(Time, u32)>, at: Time) -> usize {
            let i = s.partition_point(|x| x.0 <= at);
            if s[i - 1].0 == at {
                return i - 1;
            }
            s.insert(i, (at, s[i - 1].1));
            i
        }
        fn add(s: &mut Vec<(Time, u32)>, a: Time, b: Time, delta: i64) {
            let (i, j) = (split(s, a), split(s, b));
            for x in &mut s[i..j] {
                x.1 = (x.1 as i64 + delta) as u32;
            }
        }
        let fits = |s: &[(Time, u32)], i: usize, procs: u32, dur: Dur| {
            let end = s[i].0 + dur.max(Dur::from_micros(1));
            s[i..]
                .iter()
                .take_while(|x| x.0 < end)
                .all(|x| x.1 >= procs)
        };
        let normal = |s: &[(Time, u32)]| {
            let mut out: Vec<(Time, u32)> = Vec::new();
            for &x in s {
                if out.last().is_none_or(|l| l.1 != x.1) {
                    out.push(x);
                }
            }
            out
        };
        let mut checked = 0;
        for _ in 0..60 {
            let mut p = Profile::default();
            let n = 1 + next(400) as i64;
            let releases: Vec<(Time, u32)> = (1..=n).map(|k| (t(k * 10), 2)).collect();
            p.rebuild(t(0), 0, releases.iter().copied());
            let mut flat = vec![(t(0), 0)];
            flat.extend((1..=n).map(|k| (t(k * 10), 2 * k as u32)));
            for round in 0..next(300) {
                let (a, len) = (next(n as u64 * 10) as i64, 1 + next(400) as i64);
                let procs = 1 + next(6) as u32;
                let start = flat[0].0;
                if round % 7 == 6 {
                    // Give back over a span, the part before the start ignored.
                    p.free(t(a - 20), t(a + len), procs);
                    let from = t(a - 20).max(start);
                    if from < t(a + len) {
                        add(&mut flat, from, t(a + len), procs as i64);
                    }
                } else if round % 31 == 30 {
                    let now = t(next(n as u64 * 10) as i64).max(start);
                    p.advance(now);
                    let keep = flat.partition_point(|x| x.0 <= now).saturating_sub(1);
                    flat.drain(..keep);
                    flat[0].0 = flat[0].0.max(now);
                } else {
                    let ok = flat[0].0 <= t(a) && {
                        let i = split(&mut flat, t(a));
                        fits(&flat, i, procs, d(len))
                    };
                    assert_eq!(p.reserve_at(t(a), d(len), procs), ok);
                    if ok {
                        add(&mut flat, t(a), t(a + len), -(procs as i64));
                    }
                }
                assert_eq!(p.normalized(), normal(&flat), "after round {round}");
            }
            let s = p.steps();
            assert_eq!(normal(&s), normal(&flat));
            for _ in 0..50 {
                let procs = 1 + next(2 * n as u64 + 2) as u32;
                let dur = d(next(120) as i64);
                let from = t(next(n as u64 * 10) as i64 - 5);
                let limit = t(next(n as u64 * 12) as i64);
                let naive = (0..s.len())
                    .filter(|&i| s[i].0 >= from && s[i].0 < limit)
                    .find(|&i| fits(&s, i, procs, dur))
                    .map(|i| s[i].0);
                let got = p.earliest_within(procs, dur, from, limit);
                assert_eq!(got.map(|g| g.0), naive);
                let naive_all = (0..s.len()).find(|&i| fits(&s, i, procs, dur));
                assert_eq!(
                    p.earliest(procs, dur).map(|g| g.0),
                    naive_all.map(|i| s[i].0)
                );
                // The free run up to `limit` and the most free over `[from, limit)`.
                let before = s.partition_point(|x| x.0 < limit);
                let run = s[..before]
                    .iter()
                    .rev()
                    .take_while(|x| x.1 >= procs)
                    .count();
                let naive_run = (run > 0).then(|| s[before - run].0);
                assert_eq!(p.free_until(limit, procs), naive_run);
                let c = s.partition_point(|x| x.0 <= from).saturating_sub(1);
                let most = s[c..]
                    .iter()
                    .take_while(|x| x.0 < limit)
                    .map(|x| x.1)
                    .max()
                    .unwrap_or(0);
                assert_eq!(p.max_free(from, limit), most);
                checked += got.is_some() as u32;
            }
        }
        assert!(checked > 300, "only {checked} searches found a place");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Reservations taken and PEs given back over random spans keep every block's most
        /// and fewest free equal to its steps' (the summaries a partial shift updates without
        /// reading the block), and the free counts equal to a flat list changed step by step.
        #[test]
        fn block_summaries_follow_random_changes(
            releases in proptest::collection::vec((1i64..10, 0u32..9), 1..400),
            ops in proptest::collection::vec((proptest::bool::ANY, 0i64..4000, 1i64..600, 1u32..8), 1..120),
        ) {
            let mut p = Profile::default();
            let mut at = 0;
            let rel: Vec<(Time, u32)> = releases
                .iter()
                .map(|&(gap, n)| {
                    at += gap;
                    (t(at), n)
                })
                .collect();
            p.rebuild(t(0), 3, rel.iter().copied());
            // The flat reference: the free count at every second of the horizon.
            let horizon = 5_000usize;
            let mut flat = vec![3i64; horizon];
            for &(r, n) in &rel {
                for x in &mut flat[r.as_secs() as usize..] {
                    *x += n as i64;
                }
            }
            for (take, a, len, procs) in ops {
                let (a, b) = (a as usize, (a + len) as usize);
                if take {
                    let ok = flat[a..b].iter().all(|&x| x >= procs as i64);
                    proptest::prop_assert_eq!(p.reserve_at(t(a as i64), d(len), procs), ok);
                    if ok {
                        flat[a..b].iter_mut().for_each(|x| *x -= procs as i64);
                    }
                } else {
                    p.free(t(a as i64), t(b as i64), procs);
                    flat[a..b].iter_mut().for_each(|x| *x += procs as i64);
                }
                for blk in &p.blocks {
                    let most = blk.steps.iter().map(|s| s.1).max().unwrap();
                    let fewest = blk.steps.iter().map(|s| s.1).min().unwrap();
                    proptest::prop_assert_eq!((blk.max, blk.min), (most, fewest));
                }
                let steps = p.steps();
                let mut i = 0;
                for (sec, &want) in flat.iter().enumerate() {
                    while i + 1 < steps.len() && steps[i + 1].0 <= t(sec as i64) {
                        i += 1;
                    }
                    proptest::prop_assert_eq!(steps[i].1 as i64, want, "at {} s", sec);
                }
            }
        }
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

    /// Giving back a reservation leaves no split point behind where the free count no longer
    /// changes: a profile that compression reserves in and gives back to over and over keeps
    /// the steps it started with.
    #[test]
    fn given_back_reservations_leave_no_split_points_behind() {
        let mut p = Profile::default();
        p.rebuild(t(0), 4, (1..=200).map(|k| (t(k * 100), 4)));
        let before = p.steps();
        for k in 0..500 {
            let (start, len) = (t(k * 37 % 19_000 + 1), d(1 + k % 450));
            assert!(p.reserve_at(start, len, 3));
            p.unreserve(start, len, 3);
        }
        assert_eq!(p.steps(), before);
    }

    /// A job fits from the profile's start only if its width is free all along its length.
    #[test]
    fn fits_at_start_needs_the_width_free_for_the_whole_length() {
        let mut profile = Profile::default();
        // 4 free now, 2 more at 100 s; a reservation of 3 over [50, 80).
        profile.rebuild(Time::ZERO, 4, [(t(100), 2)].into_iter());
        assert!(profile.reserve_at(t(50), Dur::from_secs(30), 3));
        assert!(profile.fits_at_start(4, Dur::from_secs(50)));
        assert!(!profile.fits_at_start(4, Dur::from_secs(51)));
        assert!(profile.fits_at_start(1, Dur::from_secs(1000)));
        assert!(!profile.fits_at_start(2, Dur::from_secs(60)));
        assert!(!profile.fits_at_start(5, Dur::from_secs(1)));
    }
}
