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
    by_end: BTreeSet<(Time, JobId)>,
}

impl RunningSet {
    pub fn insert(&mut self, id: JobId, run: Run) {
        self.by_end.insert((run.expected_end, id));
        self.by_id.insert(id, run);
    }
    pub fn remove(&mut self, id: JobId) -> Option<Run> {
        let run = self.by_id.remove(&id)?;
        self.by_end.remove(&(run.expected_end, id));
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
            .map(move |&(end, id)| (end.max(now), self.by_id[&id].procs))
    }
    /// The earliest unclamped expected end, if any job runs.
    pub fn first_end(&self) -> Option<Time> {
        self.by_end.first().map(|&(t, _)| t)
    }
}

/// Most steps a chunk holds before it is cut in two; a rebuilt profile fills chunks to half
/// of this, so that insertions rarely cut one.
const CHUNK: usize = 64;

/// Free PEs in the profile's arithmetic (signed and wide: a pending addition may be
/// negative and accumulates between refreshes).
type Free = i64;

trait FromU32 {
    fn from_u32(x: u32) -> Free;
}
impl FromU32 for Free {
    fn from_u32(x: u32) -> Free {
        Free::from(x)
    }
}

/// A run of consecutive steps with summaries: the free PEs of step `k` are `f[k] + add`.
/// `min` is a lower and `max` an upper bound of the chunk's `f`, exact when the flags say
/// so. A reservation covering the whole chunk only changes `add`; one covering part of it
/// touches its own steps only: taking PEs keeps `min` exact and leaves `max` an upper
/// bound, giving them back the other way round. The bounds are all the earliest-fit search
/// needs; the exact values are recomputed only when a question needs them.
#[derive(Clone, Debug, Default)]
struct Chunk {
    t: Vec<Time>,
    f: Vec<Free>,
    add: Free,
    min: Free,
    max: Free,
    min_exact: bool,
    max_exact: bool,
}

impl Chunk {
    fn refresh(&mut self) {
        let add = std::mem::take(&mut self.add);
        let (mut lo, mut hi) = (Free::MAX, Free::MIN);
        for x in &mut self.f {
            *x += add;
            lo = lo.min(*x);
            hi = hi.max(*x);
        }
        (self.min, self.max) = (lo, hi);
        (self.min_exact, self.max_exact) = (true, true);
    }
    fn free(&self, k: usize) -> Free {
        self.f[k] + self.add
    }
    /// The fewest free PEs over the whole chunk.
    fn least(&self) -> Free {
        if self.min_exact {
            self.min + self.add
        } else {
            self.f
                .iter()
                .copied()
                .min()
                .map_or(Free::MAX, |m| m + self.add)
        }
    }
    /// The most free PEs over the whole chunk.
    fn most(&self) -> Free {
        if self.max_exact {
            self.max + self.add
        } else {
            self.f
                .iter()
                .copied()
                .max()
                .map_or(Free::MIN, |m| m + self.add)
        }
    }
    /// Adds `delta` to steps `from..to` of this chunk.
    fn add_range(&mut self, from: usize, to: usize, delta: Free) {
        if from == 0 && to == self.f.len() {
            self.add += delta;
            return;
        }
        let (mut lo, mut hi) = (Free::MAX, Free::MIN);
        for x in &mut self.f[from..to] {
            *x += delta;
            lo = lo.min(*x);
            hi = hi.max(*x);
        }
        if delta < 0 {
            self.min = self.min.min(lo);
            self.max_exact = false;
        } else if delta > 0 {
            self.max = self.max.max(hi);
            self.min_exact = false;
        }
    }
}

/// Where a step is: chunk and index in it. Valid until the profile next changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    c: usize,
    k: usize,
}

/// Free PEs over future time as steps: step `i` has its free PEs from its time until the
/// next step's, and the last step lasts for ever.
///
/// The steps are kept in chunks of at most [`CHUNK`] with the least and most free PEs of
/// each chunk and a pending addition (a two-level blocked list). Conservative backfilling
/// asks, for every waiting job on every early end, for the earliest window where enough PEs
/// stay free; with the summaries that search jumps over whole chunks that are too full (for
/// a candidate start) or free enough (for the rest of the window), and a reservation over a
/// long stretch changes one number per chunk, so both cost about `steps / CHUNK + CHUNK`
/// instead of `steps`. Inserting a step moves at most a chunk. (A balanced tree would make
/// this logarithmic; with the few thousand steps a long queue produces, the chunk scans are
/// contiguous and short, and the structure stays simple.)
#[derive(Clone, Debug, Default)]
pub struct Profile {
    chunks: Vec<Chunk>,
    /// The time of each chunk's first step, searched without touching the chunks.
    starts: Vec<Time>,
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
        self.chunks.clear();
        self.starts.clear();
        let mut cur = Chunk::default();
        cur.t.push(now);
        cur.f.push(Free::from_u32(free_now));
        let mut free = Free::from_u32(free_now);
        for (t, procs) in releases {
            free += Free::from_u32(procs);
            if *cur.t.last().expect("never empty") == t {
                *cur.f.last_mut().expect("never empty") = free;
                continue;
            }
            if cur.t.len() >= CHUNK / 2 {
                cur.refresh();
                self.starts.push(cur.t[0]);
                self.chunks.push(std::mem::take(&mut cur));
            }
            cur.t.push(t);
            cur.f.push(free);
        }
        cur.refresh();
        self.starts.push(cur.t[0]);
        self.chunks.push(cur);
    }

    /// Forgets the past: the profile then starts at `now`.
    pub fn advance(&mut self, now: Time) {
        if self.chunks.is_empty() {
            return;
        }
        let p = self.locate(now);
        if p.c > 0 {
            self.chunks.drain(..p.c);
            self.starts.drain(..p.c);
        }
        let ch = &mut self.chunks[0];
        if p.k > 0 {
            ch.t.drain(..p.k);
            ch.f.drain(..p.k);
            ch.refresh();
        }
        ch.t[0] = ch.t[0].max(now);
        self.starts[0] = ch.t[0];
    }

    /// The profile's first instant, if it has steps.
    pub fn steps_start(&self) -> Option<Time> {
        self.chunks.first().map(|c| c.t[0])
    }

    /// Free PEs at the profile's first instant.
    pub fn free_at_start(&self) -> u32 {
        self.chunks.first().map_or(0, |c| c.free(0) as u32)
    }

    /// The steps, `(time, free PEs)` in time order.
    pub fn steps(&self) -> Vec<(Time, u32)> {
        self.chunks
            .iter()
            .flat_map(|c| c.t.iter().zip(&c.f).map(|(&t, &f)| (t, (f + c.add) as u32)))
            .collect()
    }

    /// The step covering `t` (the first step when `t` is before the profile's start).
    fn locate(&self, t: Time) -> Pos {
        let c = self.starts.partition_point(|&s| s <= t).saturating_sub(1);
        let k = self.chunks[c]
            .t
            .partition_point(|&x| x <= t)
            .saturating_sub(1);
        Pos { c, k }
    }

    fn time(&self, p: Pos) -> Time {
        self.chunks[p.c].t[p.k]
    }

    fn next(&self, p: Pos) -> Option<Pos> {
        if p.k + 1 < self.chunks[p.c].t.len() {
            Some(Pos { c: p.c, k: p.k + 1 })
        } else if p.c + 1 < self.chunks.len() {
            Some(Pos { c: p.c + 1, k: 0 })
        } else {
            None
        }
    }

    /// The first step at or after `from` whose free PEs are at least `procs`
    /// (`at_least`) or below it (`!at_least`), among the steps beginning before `until`.
    fn first_where(&self, from: Pos, procs: Free, at_least: bool, until: Time) -> Option<Pos> {
        let mut c = from.c;
        let mut k = from.k;
        while c < self.chunks.len() {
            if self.starts[c] >= until {
                return None;
            }
            let ch = &self.chunks[c];
            // The whole chunk (or what is left of it) can be passed over when its summary
            // says no step matches.
            let skip = if at_least {
                ch.max + ch.add < procs
            } else {
                ch.min + ch.add >= procs
            };
            if !skip {
                let want = procs - ch.add;
                let hit = if at_least {
                    ch.f[k..].iter().position(|&f| f >= want)
                } else {
                    ch.f[k..].iter().position(|&f| f < want)
                };
                if let Some(h) = hit {
                    return (ch.t[k + h] < until).then_some(Pos { c, k: k + h });
                }
            }
            c += 1;
            k = 0;
        }
        None
    }

    /// The earliest time `procs` PEs stay free for `dur`, with where its step is; `None` if
    /// the machine never has that many free.
    pub fn earliest(&self, procs: u32, dur: Dur) -> Option<(Time, Pos)> {
        if self.chunks.is_empty() {
            return None;
        }
        let dur = dur.max(Dur::from_micros(1));
        let procs = Free::from_u32(procs);
        let mut from = Pos { c: 0, k: 0 };
        loop {
            // The first step with room is a candidate; it holds if no step with too little
            // room begins before the window ends, else the search goes on after that step.
            let cand = self.first_where(from, procs, true, Time::MAX)?;
            let at = self.time(cand);
            let end = at + dur;
            let block = self
                .next(cand)
                .and_then(|n| self.first_where(n, procs, false, end));
            match block {
                Some(b) => from = self.next(b)?,
                None => return Some((at, cand)),
            }
        }
    }

    /// The most PEs free over the steps from the one covering `start` to the last beginning
    /// before `end` (0 when there is none).
    pub fn max_free(&self, start: Time, end: Time) -> u32 {
        if self.chunks.is_empty() {
            return 0;
        }
        let p = self.locate(start);
        let mut best = Free::MIN;
        for (c, ch) in self.chunks.iter().enumerate().skip(p.c) {
            let k0 = if c == p.c { p.k } else { 0 };
            if ch.t[k0] >= end {
                break;
            }
            let whole = k0 == 0 && self.starts.get(c + 1).is_some_and(|&n| n <= end);
            if whole {
                best = best.max(ch.most());
                continue;
            }
            for k in k0..ch.t.len() {
                if ch.t[k] >= end {
                    break;
                }
                best = best.max(ch.free(k));
            }
        }
        best.max(0) as u32
    }

    /// Makes a step start exactly at `t` (a copy of the step covering it) and returns where
    /// it is, with the chunk cut in two and where, if one was. `t` must not be before the
    /// profile's start.
    fn split(&mut self, t: Time) -> (Pos, Option<(usize, usize)>) {
        let p = self.locate(t);
        debug_assert!(self.time(p) <= t, "split before the profile's start");
        if self.time(p) == t {
            return (p, None);
        }
        let ch = &mut self.chunks[p.c];
        let f = ch.f[p.k];
        ch.t.insert(p.k + 1, t);
        ch.f.insert(p.k + 1, f);
        if ch.t.len() > CHUNK {
            // Cut the chunk in two; both halves keep the pending addition.
            let half = ch.t.len() / 2;
            let mut tail = Chunk {
                t: ch.t.split_off(half),
                f: ch.f.split_off(half),
                add: ch.add,
                ..Chunk::default()
            };
            ch.refresh();
            tail.refresh();
            self.starts.insert(p.c + 1, tail.t[0]);
            self.chunks.insert(p.c + 1, tail);
            let at = if p.k + 1 >= half {
                Pos {
                    c: p.c + 1,
                    k: p.k + 1 - half,
                }
            } else {
                Pos { c: p.c, k: p.k + 1 }
            };
            return (at, Some((p.c, half)));
        }
        (Pos { c: p.c, k: p.k + 1 }, None)
    }

    /// Adds `delta` to every step of `[from, to)`, both step positions.
    fn add_range(&mut self, from: Pos, to: Pos, delta: Free) {
        if from.c == to.c {
            self.chunks[from.c].add_range(from.k, to.k, delta);
            return;
        }
        let n = self.chunks[from.c].t.len();
        self.chunks[from.c].add_range(from.k, n, delta);
        for ch in &mut self.chunks[from.c + 1..to.c] {
            ch.add += delta;
        }
        self.chunks[to.c].add_range(0, to.k, delta);
    }

    /// The fewest PEs free over `[from, to)`, both step positions.
    fn min_range(&self, from: Pos, to: Pos) -> Free {
        let part = |c: usize, a: usize, b: usize| {
            let ch = &self.chunks[c];
            if a == 0 && b == ch.t.len() {
                ch.least()
            } else {
                ch.f[a..b]
                    .iter()
                    .copied()
                    .min()
                    .map_or(Free::MAX, |m| m + ch.add)
            }
        };
        if from.c == to.c {
            return part(from.c, from.k, to.k);
        }
        let mut m = part(from.c, from.k, self.chunks[from.c].t.len());
        for c in from.c + 1..to.c {
            m = m.min(self.chunks[c].least());
        }
        m.min(part(to.c, 0, to.k))
    }

    /// Steps starting exactly at `start` and `end` (made if needed), as positions.
    fn span(&mut self, start: Time, end: Time) -> (Pos, Pos) {
        let (mut i, _) = self.split(start);
        let (j, cut) = self.split(end);
        // The end's step comes after the start's, so only a cut of the start's chunk moves
        // the start.
        if let Some((c, half)) = cut
            && i.c == c
            && i.k >= half
        {
            i = Pos {
                c: c + 1,
                k: i.k - half,
            };
        }
        debug_assert_eq!((i, j), (self.locate(start), self.locate(end)));
        (i, j)
    }

    /// Takes `procs` PEs during `[start, start + dur)` if they are free all along; returns
    /// false (taking nothing) otherwise, or when `start` is before the profile's start.
    pub fn reserve_at(&mut self, start: Time, dur: Dur, procs: u32) -> bool {
        if self.chunks.first().is_none_or(|c| start < c.t[0]) {
            return false;
        }
        let end = start + dur.max(Dur::from_micros(1));
        let (i, j) = self.span(start, end);
        let procs = Free::from_u32(procs);
        if self.min_range(i, j) < procs {
            return false;
        }
        self.add_range(i, j, -procs);
        true
    }

    /// Gives back what [`Profile::reserve_at`] (or [`Profile::reserve`]) took.
    pub fn unreserve(&mut self, start: Time, dur: Dur, procs: u32) {
        let end = start + dur.max(Dur::from_micros(1));
        let (i, j) = self.span(start, end);
        self.add_range(i, j, Free::from_u32(procs));
    }

    /// Takes `procs` PEs during `[start, start + dur)`, where `start` is the time of the step
    /// at `at` (as [`Profile::earliest`] returns it).
    pub fn reserve(&mut self, at: Pos, dur: Dur, procs: u32) {
        let start = self.time(at);
        let end = start + dur.max(Dur::from_micros(1));
        let (i, j) = self.span(start, end);
        debug_assert!(
            self.min_range(i, j) >= Free::from_u32(procs),
            "reservation over a full step"
        );
        self.add_range(i, j, -Free::from_u32(procs));
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
        assert_eq!(p.steps(), [(t(0), 4), (t(10), 0), (t(15), 10), (t(30), 16)]);
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
        assert_eq!(p.steps(), [(t(12), 0), (t(15), 10), (t(30), 16)]);
    }

    /// The plain list of steps the chunked profile replaced, as the reference.
    #[derive(Default)]
    struct Plain(Vec<(Time, u32)>);

    impl Plain {
        fn earliest(&self, procs: u32, dur: Dur) -> Option<Time> {
            let s = &self.0;
            let dur = dur.max(Dur::from_micros(1));
            let mut i = 0;
            'candidates: while i < s.len() {
                if s[i].1 < procs {
                    i += 1;
                    continue;
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
                return Some(s[i].0);
            }
            None
        }
        fn split(&mut self, t: Time) -> usize {
            let i = self.0.partition_point(|s| s.0 <= t);
            if self.0[i - 1].0 == t {
                return i - 1;
            }
            let free = self.0[i - 1].1;
            self.0.insert(i, (t, free));
            i
        }
        fn reserve_at(&mut self, start: Time, dur: Dur, procs: u32) -> bool {
            if self.0.first().is_none_or(|s| start < s.0) {
                return false;
            }
            let end = start + dur.max(Dur::from_micros(1));
            let i = self.split(start);
            let j = self.split(end);
            if self.0[i..j].iter().any(|s| s.1 < procs) {
                return false;
            }
            self.0[i..j].iter_mut().for_each(|s| s.1 -= procs);
            true
        }
        fn unreserve(&mut self, start: Time, dur: Dur, procs: u32) {
            let end = start + dur.max(Dur::from_micros(1));
            let i = self.split(start);
            let j = self.split(end);
            self.0[i..j].iter_mut().for_each(|s| s.1 += procs);
        }
        fn max_free(&self, start: Time, end: Time) -> u32 {
            let from = self.0.partition_point(|s| s.0 <= start).saturating_sub(1);
            self.0[from..]
                .iter()
                .take_while(|s| s.0 < end)
                .map(|s| s.1)
                .max()
                .unwrap_or(0)
        }
        fn advance(&mut self, now: Time) {
            let keep_from = self.0.partition_point(|s| s.0 <= now).saturating_sub(1);
            self.0.drain(..keep_from);
            if let Some(first) = self.0.first_mut() {
                first.0 = first.0.max(now);
            }
        }
    }

    /// Long random runs of every operation (enough steps for many chunks, so chunk cuts,
    /// whole-chunk additions and skips are exercised): the same answers and the same steps as
    /// the plain list.
    #[test]
    fn chunked_profile_matches_the_plain_list() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..20 {
            let now = t(rnd(100) as i64);
            let free = rnd(64) as u32;
            let mut rel: Vec<(Time, u32)> = (0..rnd(300))
                .map(|_| (now + d(rnd(5000) as i64), 1 + rnd(8) as u32))
                .collect();
            rel.sort();
            let mut p = Profile::default();
            p.rebuild(now, free, rel.iter().copied());
            let mut q = Plain::default();
            q.0.push((now, free));
            let mut f = free;
            for &(tt, n) in &rel {
                f += n;
                if q.0.last().unwrap().0 == tt {
                    q.0.last_mut().unwrap().1 = f;
                } else {
                    q.0.push((tt, f));
                }
            }
            let mut held: Vec<(Time, Dur, u32)> = Vec::new();
            let mut start = now;
            for op in 0..3000 {
                let wide = rnd(4) == 0;
                let procs = 1 + rnd(if wide { 400 } else { 24 }) as u32;
                let dur = d(rnd(2000) as i64);
                match rnd(6) {
                    0 | 1 => {
                        let got = p.earliest(procs, dur);
                        assert_eq!(got.map(|g| g.0), q.earliest(procs, dur), "{round}/{op}");
                        if let Some((at, pos)) = got {
                            p.reserve(pos, dur, procs);
                            assert!(q.reserve_at(at, dur, procs));
                            held.push((at, dur, procs));
                        }
                    }
                    2 => {
                        let at = start + d(rnd(6000) as i64);
                        let ok = p.reserve_at(at, dur, procs);
                        assert_eq!(ok, q.reserve_at(at, dur, procs), "{round}/{op}");
                        if ok {
                            held.push((at, dur, procs));
                        }
                    }
                    3 if !held.is_empty() => {
                        let (at, dur, procs) = held.swap_remove(rnd(held.len() as u64) as usize);
                        if at >= start {
                            p.unreserve(at, dur, procs);
                            q.unreserve(at, dur, procs);
                        }
                    }
                    4 => {
                        let a = start + d(rnd(6000) as i64);
                        let b = a + d(rnd(3000) as i64);
                        assert_eq!(p.max_free(a, b), q.max_free(a, b), "{round}/{op}");
                    }
                    5 if rnd(20) == 0 => {
                        start += d(rnd(200) as i64);
                        p.advance(start);
                        q.advance(start);
                        held.retain(|h| h.0 >= start);
                    }
                    _ => {}
                }
                assert_eq!(p.free_at_start(), q.0[0].1);
                if op % 100 == 0 {
                    assert_eq!(p.steps(), q.0, "{round}/{op}");
                }
            }
            assert_eq!(p.steps(), q.0);
        }
    }
}
