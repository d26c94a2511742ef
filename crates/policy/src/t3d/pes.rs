//! [`PeMap`]: who holds each PE of the T3D machine, as runs, with the bitsets its free-space
//! lookups need, so that no T3D event costs a walk over every PE.
//!
//! A PE is free, held by a loaded job, or swapping a preempted job's state out until some
//! time. Holders are kept as disjoint runs `[start, end)` in a vector sorted by start (a job
//! of 10,000 contiguous PEs is one entry): there are about as many runs as pieces of loaded
//! jobs, so a binary search and a short shift of the vector cost less than the steps of an
//! ordered map. "Free" is a bitset, and a second bitset says which PEs are *open* (free, not
//! earmarked for a waiting job, on a node that is up). A summary bit per word of `blocked`
//! says whether the word has an open PE, so finding the lowest `n` open PEs skips full
//! stretches of the machine 4,096 PEs at a time, and the open count is kept as the bits
//! change.

use cosched_core::bits::take_lowest;
use cosched_core::{JobId, PeBits, PeSet, Time};

/// What holds a PE that is not free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Holder {
    Job(JobId),
    /// Swapping a preempted job's state out until then.
    Out(Time),
}

#[derive(Clone, Debug)]
pub(super) struct PeMap {
    len: u32,
    /// `(start, end, holder)` by start; runs are disjoint and cover exactly the taken PEs.
    runs: Vec<(u32, u32, Holder)>,
    /// Bit set = PE held (not free).
    taken: Vec<u64>,
    /// Bit set = PE earmarked for a waiting job.
    marked: Vec<u64>,
    /// Bit set = PE of a node that is down.
    down: Vec<u64>,
    /// `taken | marked | down`, and every bit past `len`: a clear bit is an open PE.
    blocked: Vec<u64>,
    /// Bit `w` set = word `w` of `blocked` has a clear bit.
    has_open: Vec<u64>,
    /// Clear bits of `blocked`.
    open: u32,
    /// The runs set in `marked`, so the next [`PeMap::set_marks`] can clear just them.
    mark_runs: Vec<(u32, u32)>,
    /// The buffer of the marks before the last [`PeMap::set_marks`], kept for the next.
    mark_spare: Vec<(u32, u32)>,
    /// Bumped whenever the marks change or an earmarked PE changes holder.
    marks_version: u64,
    /// [`PeMap::free_where`]'s list of the parts it frees.
    gone: Vec<(u32, u32)>,
}

impl PeMap {
    pub fn new(len: u32) -> PeMap {
        let words = len.div_ceil(64) as usize;
        let mut blocked = vec![0u64; words];
        if !len.is_multiple_of(64) {
            blocked[words - 1] = !((1u64 << (len % 64)) - 1);
        }
        let mut has_open = vec![0u64; words.div_ceil(64)];
        for w in 0..words {
            has_open[w / 64] |= 1 << (w % 64);
        }
        PeMap {
            len,
            runs: Vec::new(),
            taken: vec![0; words],
            marked: vec![0; words],
            down: vec![0; words],
            blocked,
            has_open,
            open: len,
            mark_runs: Vec::new(),
            mark_spare: Vec::new(),
            marks_version: 0,
            gone: Vec::new(),
        }
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    /// Changes whenever the marks change or an earmarked PE changes holder: what the jobs on
    /// the earmarked PEs depend on.
    pub fn marks_version(&self) -> u64 {
        self.marks_version
    }

    /// PEs free, not earmarked and up.
    pub fn open_count(&self) -> u32 {
        self.open
    }

    /// Recomputes `blocked` (and the open count and summary) over the words of `s..e`.
    fn refresh(&mut self, s: u32, e: u32) {
        if s >= e {
            return;
        }
        for w in (s / 64) as usize..=((e - 1) / 64) as usize {
            let b = self.blocked_word(w);
            put_blocked(&mut self.blocked, &mut self.has_open, &mut self.open, w, b);
        }
    }

    /// What word `w` of `blocked` is: `taken | marked | down`, and the bits past `len` in
    /// the last word.
    fn blocked_word(&self, w: usize) -> u64 {
        let b = self.taken[w] | self.marked[w] | self.down[w];
        if w == self.blocked.len() - 1 && !self.len.is_multiple_of(64) {
            b | !((1u64 << (self.len % 64)) - 1)
        } else {
            b
        }
    }

    /// Gives `s..e` to `holder` (`None`: frees it), whatever held it before.
    pub fn set(&mut self, s: u32, e: u32, holder: Option<Holder>) {
        let e = e.min(self.len);
        if s >= e {
            return;
        }
        if !self.set_whole_run(s, e, holder) {
            self.set_cutting(s, e, holder);
        }
        self.set_taken(s, e, holder.is_some());
    }

    /// Sets (or clears) the taken bits of `s..e`, bringing `blocked`, its summary and the open
    /// count along in the same walk over the words, and bumps the marks version if one of the
    /// PEs is earmarked. `blocked` is `taken | marked | down` (and the bits past `len`) before
    /// the call, so taking PEs only sets their bits in it, and freeing them leaves set only
    /// those still marked or down: no word is recomputed from the four bitsets.
    fn set_taken(&mut self, s: u32, e: u32, taken: bool) {
        let PeMap {
            taken: bits,
            marked,
            down,
            blocked,
            has_open,
            open,
            marks_version,
            ..
        } = self;
        let mut on_marks = false;
        PeBits::range_words(s, e, |w, m| {
            on_marks |= marked[w] & m != 0;
            let b = if taken {
                bits[w] |= m;
                blocked[w] | m
            } else {
                bits[w] &= !m;
                (blocked[w] & !m) | ((marked[w] | down[w]) & m)
            };
            put_blocked(blocked, has_open, open, w, b);
        });
        *marks_version += u64::from(on_marks);
        self.check_blocked(s, e);
    }

    /// Debug builds: the words of `s..e` of `blocked` are `taken | marked | down` (and the
    /// bits past `len`), their summary bits say whether they have an open PE, and the open
    /// count is the clear bits of all of `blocked`.
    fn check_blocked(&self, s: u32, e: u32) {
        #[cfg(debug_assertions)]
        {
            PeBits::range_words(s, e, |w, _| {
                let b = self.blocked_word(w);
                assert_eq!(self.blocked[w], b, "blocked word {w}");
                let summary = self.has_open[w / 64] >> (w % 64) & 1 == 1;
                assert_eq!(summary, b != u64::MAX, "summary bit of word {w}");
            });
            // The whole count on machines of up to 4,096 PEs: on larger ones it would cost
            // debug builds a walk over the machine at every change.
            if self.blocked.len() <= 64 {
                let open: u32 = self.blocked.iter().map(|b| b.count_zeros()).sum();
                assert_eq!(self.open, open, "open PEs");
            }
        }
        #[cfg(not(debug_assertions))]
        let _ = (s, e);
    }

    /// [`PeMap::set`]'s runs in the two cases most changes are (a job's own run handed on
    /// or freed, a run laid on free PEs), with one or two lookups of the map; false, with
    /// nothing done, in any other case. The runs come out as [`PeMap::set_cutting`] leaves
    /// them.
    fn set_whole_run(&mut self, s: u32, e: u32, holder: Option<Holder>) -> bool {
        // Runs `..i` start before `e`.
        let i = self.runs.partition_point(|r| r.0 < e);
        match i.checked_sub(1).map(|l| (l, self.runs[l])) {
            // Exactly one run, `s..e`.
            Some((l, (rs, re, _))) if rs == s && re == e => {
                match holder {
                    Some(h) => self.runs[l].2 = h,
                    None => {
                        self.runs.remove(l);
                    }
                }
                true
            }
            // Nothing held in `s..e`.
            last if last.is_none_or(|(_, (_, re, _))| re <= s) => {
                if let Some(h) = holder {
                    self.runs.insert(i, (s, e, h));
                }
                true
            }
            _ => false,
        }
    }

    /// [`PeMap::set`]'s runs in general: runs overlapping `s..e` are cut at its ends.
    fn set_cutting(&mut self, s: u32, e: u32, holder: Option<Holder>) {
        // The run that starts before `s` and reaches into it is cut at `s`.
        let i = self.runs.partition_point(|r| r.0 < s);
        if let Some(l) = i.checked_sub(1)
            && self.runs[l].1 > s
        {
            let (_, re, h) = self.runs[l];
            self.runs[l].1 = s;
            if re > e {
                self.runs.insert(i, (e, re, h));
            }
        }
        // Runs that start within `s..e` go, and the part of the last one past `e` stays.
        let j = self.runs.partition_point(|r| r.0 < e);
        let tail = match j.checked_sub(1).map(|l| self.runs[l]) {
            Some((rs, re, h)) if rs >= s && re > e => Some((e, re, h)),
            _ => None,
        };
        let new = holder.map(|h| (s, e, h));
        self.runs.splice(i..j, new.into_iter().chain(tail));
    }

    /// The held parts of `s..e`, in PE order, clipped to it.
    pub fn holders(&self, s: u32, e: u32) -> impl Iterator<Item = (u32, u32, Holder)> + '_ {
        let mut i = self.runs.partition_point(|r| r.0 < s);
        if i > 0 && self.runs[i - 1].1 > s {
            i -= 1;
        }
        // A range covers few runs: a walk to its end costs less than a second search.
        let mut j = i;
        while j < self.runs.len() && self.runs[j].0 < e {
            j += 1;
        }
        self.runs[i..j]
            .iter()
            .map(move |&(rs, re, h)| (rs.max(s), re.min(e), h))
    }

    /// Frees the parts of `pes` whose holder passes `free`.
    pub fn free_where(&mut self, pes: &PeSet, free: impl Fn(Holder) -> bool) {
        // The list's buffer is kept from one call to the next.
        let mut gone = std::mem::take(&mut self.gone);
        gone.clear();
        for &(s, e) in pes.runs() {
            gone.extend(
                self.holders(s, e)
                    .filter(|&(_, _, h)| free(h))
                    .map(|(a, b, _)| (a, b)),
            );
        }
        for &(a, b) in &gone {
            self.set(a, b, None);
        }
        self.gone = gone;
    }

    /// True when every PE of `pes` is free (earmarked or down or not).
    pub fn all_free(&self, pes: &PeSet) -> bool {
        pes.runs().iter().all(|&(s, e)| {
            let mut clear = true;
            PeBits::range_words(s, e.min(self.len), |w, m| clear &= self.taken[w] & m == 0);
            clear && e <= self.len
        })
    }

    /// True when every PE of `pes` is open (free, not earmarked, up).
    pub fn all_open(&self, pes: &PeSet) -> bool {
        pes.runs().iter().all(|&(s, e)| {
            let mut clear = true;
            PeBits::range_words(s, e.min(self.len), |w, m| clear &= self.blocked[w] & m == 0);
            clear && e <= self.len
        })
    }

    /// True when some PE of `pes` is earmarked.
    pub fn any_marked(&self, pes: &PeSet) -> bool {
        if self.mark_runs.is_empty() {
            return false;
        }
        let mut hit = false;
        for &(s, e) in pes.runs() {
            PeBits::range_words(s, e.min(self.len), |w, m| hit |= self.marked[w] & m != 0);
        }
        hit
    }

    /// True when some PE of `pes` is earmarked or down.
    pub fn any_marked_or_down(&self, pes: &PeSet) -> bool {
        let mut hit = false;
        for &(s, e) in pes.runs() {
            PeBits::range_words(s, e.min(self.len), |w, m| {
                hit |= (self.marked[w] | self.down[w]) & m != 0
            });
        }
        hit
    }

    /// True when some PE of `pes` is down.
    pub fn any_down(&self, pes: &PeSet) -> bool {
        let mut hit = false;
        for &(s, e) in pes.runs() {
            PeBits::range_words(s, e.min(self.len), |w, m| hit |= self.down[w] & m != 0);
        }
        hit
    }

    /// The `n` lowest-numbered open PEs, or all of them when fewer are open.
    pub fn lowest_open(&self, n: u32) -> PeSet {
        let mut set = PeSet::new();
        let mut need = n.min(self.open);
        for (sw, &summary) in self.has_open.iter().enumerate() {
            let mut words = summary;
            while need > 0 && words != 0 {
                let w = sw * 64 + words.trailing_zeros() as usize;
                words &= words - 1;
                take_lowest(!self.blocked[w], w as u32 * 64, &mut need, &mut set);
            }
            if need == 0 {
                break;
            }
        }
        set
    }

    /// Marks the PEs of `sets` as earmarked, and only them. Costs the runs of the old and
    /// new marks, not the machine.
    pub fn set_marks<'a>(&mut self, sets: impl Iterator<Item = &'a PeSet>) {
        self.marks_version += 1;
        let old = std::mem::take(&mut self.mark_runs);
        for &(s, e) in &old {
            let marked = &mut self.marked;
            PeBits::range_words(s, e, |w, m| marked[w] &= !m);
        }
        let mut new = std::mem::take(&mut self.mark_spare);
        new.clear();
        for set in sets {
            for &(s, e) in set.runs() {
                let e = e.min(self.len);
                if s < e {
                    let marked = &mut self.marked;
                    PeBits::range_words(s, e, |w, m| marked[w] |= m);
                    new.push((s, e));
                }
            }
        }
        // Refresh after both, so PEs of a mark that stays keep their bit.
        for &(s, e) in old.iter().chain(&new) {
            self.refresh(s, e);
        }
        self.mark_runs = new;
        self.mark_spare = old;
    }

    /// Marks PEs `s..e` down (or up).
    pub fn set_down(&mut self, s: u32, e: u32, down: bool) {
        let e = e.min(self.len);
        let bits = &mut self.down;
        PeBits::range_words(s, e, |w, m| if down { bits[w] |= m } else { bits[w] &= !m });
        self.refresh(s, e);
    }
}

/// Stores `b` as word `w` of `blocked`, keeping the open count (the clear bits of `blocked`)
/// and the word's summary bit in `has_open` with it. A word stored unchanged (a mark cleared
/// and set again, a word that several runs share) keeps both as they are.
fn put_blocked(blocked: &mut [u64], has_open: &mut [u64], open: &mut u32, w: usize, b: u64) {
    let old = blocked[w];
    if b == old {
        return;
    }
    *open = *open + old.count_ones() - b.count_ones();
    blocked[w] = b;
    let bit = 1u64 << (w % 64);
    if b == u64::MAX {
        has_open[w / 64] &= !bit;
    } else {
        has_open[w / 64] |= bit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_split_and_open_pes_follow() {
        let mut m = PeMap::new(200);
        m.set(10, 150, Some(Holder::Job(JobId(1))));
        assert_eq!(m.open_count(), 60);
        m.set(60, 70, Some(Holder::Out(Time::from_secs(5))));
        let h: Vec<_> = m.holders(0, 200).collect();
        assert_eq!(
            h,
            vec![
                (10, 60, Holder::Job(JobId(1))),
                (60, 70, Holder::Out(Time::from_secs(5))),
                (70, 150, Holder::Job(JobId(1))),
            ]
        );
        assert_eq!(m.holders(65, 75).count(), 2);
        m.free_where(&PeSet::contiguous(0, 200), |h| h == Holder::Job(JobId(1)));
        assert_eq!(m.open_count(), 190);
        assert_eq!(m.lowest_open(15).to_string(), "0-14");
        m.set_marks([PeSet::contiguous(0, 5)].iter());
        m.set_down(7, 9, true);
        assert_eq!(m.lowest_open(5).to_string(), "5-6,9-11");
        assert!(m.all_free(&PeSet::contiguous(0, 10)));
        assert!(!m.all_open(&PeSet::contiguous(0, 10)));
        assert!(m.any_marked(&PeSet::contiguous(4, 1)));
        m.set_marks(std::iter::empty());
        m.set_down(7, 9, false);
        assert_eq!(m.open_count(), 190);
        assert_eq!(m.lowest_open(500).len(), 190);
        assert!(!m.all_free(&PeSet::contiguous(195, 10)));
    }

    /// A fixed pseudo-random sequence (a linear congruential generator from `seed`): each
    /// call draws a number below its argument.
    fn draws(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |n| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        }
    }

    /// The runs a map holds, in order.
    fn runs_of(m: &PeMap) -> Vec<(u32, u32, Holder)> {
        m.holders(0, m.len()).collect()
    }

    #[test]
    fn whole_run_changes_leave_the_runs_that_cutting_leaves() {
        // A fixed pseudo-random walk over hand-ons, frees and lays, many on exact runs.
        let (mut fast, mut cut) = (PeMap::new(300), PeMap::new(300));
        let mut next = draws(7);
        for step in 0..5_000 {
            let runs = runs_of(&cut);
            let (s, e) = if !runs.is_empty() && next(2) == 0 {
                let r = runs[next(runs.len() as u64) as usize];
                (r.0, r.1)
            } else {
                let s = next(300) as u32;
                (s, s + 1 + next(40) as u32)
            };
            let holder = match next(3) {
                0 => None,
                1 => Some(Holder::Job(JobId(next(20)))),
                _ => Some(Holder::Out(Time::from_secs(next(5) as i64))),
            };
            fast.set(s, e, holder);
            let e = e.min(cut.len());
            cut.set_cutting(s, e, holder);
            assert_eq!(
                runs_of(&fast),
                runs_of(&cut),
                "step {step}: set({s}, {e}, {holder:?})"
            );
        }
    }

    /// Takes, frees, marks and nodes going down and up, against a plain walk over the PEs:
    /// the open count and the lowest open PEs follow every change (debug builds also check
    /// every word [`PeMap::set`] touches).
    #[test]
    fn open_pes_are_those_of_a_walk_over_the_pes() {
        let len = 300;
        let mut m = PeMap::new(len);
        // Per PE: taken, marked, down.
        let mut plain = vec![(false, false, false); len as usize];
        let mut next = draws(11);
        for step in 0..5_000 {
            let s = next(len as u64) as u32;
            let e = (s + 1 + next(90) as u32).min(len);
            match next(8) {
                0..=2 => {
                    m.set(s, e, Some(Holder::Job(JobId(next(20)))));
                    plain[s as usize..e as usize]
                        .iter_mut()
                        .for_each(|p| p.0 = true);
                }
                3..=5 => {
                    m.set(s, e, None);
                    plain[s as usize..e as usize]
                        .iter_mut()
                        .for_each(|p| p.0 = false);
                }
                6 => {
                    let marks = [PeSet::contiguous(s, e - s)];
                    let marks = if next(3) == 0 {
                        &marks[..0]
                    } else {
                        &marks[..]
                    };
                    m.set_marks(marks.iter());
                    plain.iter_mut().for_each(|p| p.1 = false);
                    for set in marks {
                        for &(a, b) in set.runs() {
                            plain[a as usize..b as usize]
                                .iter_mut()
                                .for_each(|p| p.1 = true);
                        }
                    }
                }
                _ => {
                    let down = next(2) == 0;
                    m.set_down(s, e, down);
                    plain[s as usize..e as usize]
                        .iter_mut()
                        .for_each(|p| p.2 = down);
                }
            }
            let open: Vec<u32> = (0..len)
                .filter(|&i| plain[i as usize] == (false, false, false))
                .collect();
            assert_eq!(m.open_count() as usize, open.len(), "step {step}");
            let want = next(len as u64 + 10) as u32;
            let lowest: Vec<u32> = open.iter().copied().take(want as usize).collect();
            let got: Vec<u32> = m.lowest_open(want).iter().map(|p| p.0).collect();
            assert_eq!(got, lowest, "step {step}");
        }
    }

    #[test]
    fn marks_version_moves_when_an_earmarked_pe_changes_holder_and_only_then() {
        let mut m = PeMap::new(200);
        m.set_marks([PeSet::contiguous(50, 10)].iter());
        let v = m.marks_version();
        m.set(0, 40, Some(Holder::Job(JobId(1))));
        m.set(0, 40, None);
        m.set(60, 70, Some(Holder::Job(JobId(2))));
        assert_eq!(m.marks_version(), v, "no earmarked PE changed holder");
        m.set(45, 52, Some(Holder::Job(JobId(3))));
        assert_ne!(m.marks_version(), v, "PEs 50 and 51 are earmarked");
        let v = m.marks_version();
        m.set_marks([PeSet::contiguous(100, 5)].iter());
        assert_ne!(m.marks_version(), v, "the marks changed");
    }

    #[test]
    fn lowest_open_skips_full_stretches() {
        let mut m = PeMap::new(20_000);
        m.set(0, 19_990, Some(Holder::Job(JobId(1))));
        assert_eq!(m.lowest_open(20).to_string(), "19990-19999");
        m.set(5, 6, None);
        assert_eq!(m.lowest_open(2).to_string(), "5,19990");
    }
}
