//! [`PeBits`]: a fixed-size bitset over PE numbers, with the range and [`PeSet`] operations
//! that matrices and the ledger need (one word covers 64 PEs, so testing a whole machine
//! costs PEs/64 steps).

use crate::PeSet;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
/// A bitset over PE numbers `0..len`.
pub struct PeBits {
    words: Vec<u64>,
    len: u32,
}

impl PeBits {
    #[inline]
    pub fn new(len: u32) -> PeBits {
        PeBits {
            words: vec![0; len.div_ceil(64) as usize],
            len,
        }
    }

    #[inline]
    pub fn get(&self, i: u32) -> bool {
        self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Calls `f(word index, mask)` for the words covering `pes`, one call per word of each run:
    /// what word-level operations over a PE set are built on.
    #[inline]
    pub fn each_word(pes: &PeSet, mut f: impl FnMut(usize, u64)) {
        for &(s, e) in pes.runs() {
            PeBits::for_words(s, e, |w, m| {
                f(w, m);
                true
            });
        }
    }

    /// Calls `f(word index, mask)` for each word that PEs `s..e` cover, first to last: the one
    /// walk over the words of a PE range, also for bitsets kept as plain words.
    #[inline]
    pub fn range_words(s: u32, e: u32, mut f: impl FnMut(usize, u64)) {
        PeBits::for_words(s, e, |w, m| {
            f(w, m);
            true
        });
    }

    /// Calls `f(word index, mask)` for each word of `s..e`, first to last, until `f` says
    /// stop; returns false if it did. The masks come from the run's ends without a loop over
    /// bits, and a run within one word (most runs: the ledger checks one per decision) takes
    /// a single call.
    #[inline]
    fn for_words(s: u32, e: u32, mut f: impl FnMut(usize, u64) -> bool) -> bool {
        let Some((first, last, head, tail)) = span(s, e) else {
            return true;
        };
        if first == last {
            return f(first, head & tail);
        }
        if !f(first, head) {
            return false;
        }
        for w in first + 1..last {
            if !f(w, u64::MAX) {
                return false;
            }
        }
        f(last, tail)
    }

    #[inline]
    pub fn set(&mut self, i: u32) {
        self.words[(i / 64) as usize] |= 1 << (i % 64);
    }
    #[inline]
    pub fn clear(&mut self, i: u32) {
        self.words[(i / 64) as usize] &= !(1 << (i % 64));
    }

    /// Makes `self` a copy of `other`, a bitset of the same length, without allocating.
    #[inline]
    pub fn copy_from(&mut self, other: &PeBits) {
        debug_assert_eq!(self.len, other.len);
        self.words.copy_from_slice(&other.words);
    }

    #[inline]
    pub fn clear_all(&mut self) {
        self.words.fill(0);
    }

    #[inline]
    pub fn set_range(&mut self, s: u32, e: u32) {
        if let Some((first, last, head, tail)) = span(s, e) {
            let words = &mut self.words;
            if first == last {
                words[first] |= head & tail;
            } else {
                words[first] |= head;
                // Whole words in between: a fill, which the compiler turns into a memset.
                words[first + 1..last].fill(u64::MAX);
                words[last] |= tail;
            }
        }
    }
    #[inline]
    pub fn clear_range(&mut self, s: u32, e: u32) {
        if let Some((first, last, head, tail)) = span(s, e) {
            let words = &mut self.words;
            if first == last {
                words[first] &= !(head & tail);
            } else {
                words[first] &= !head;
                words[first + 1..last].fill(0);
                words[last] &= !tail;
            }
        }
    }
    /// True when no bit of `s..e` is set.
    #[inline]
    pub fn range_clear(&self, s: u32, e: u32) -> bool {
        let Some((first, last, head, tail)) = span(s, e) else {
            return true;
        };
        let words = &self.words;
        if first == last {
            return words[first] & head & tail == 0;
        }
        // The two ends first (a clash is most often at an edge of a block), then the words
        // in between a few at a time: an OR over a chunk vectorises, and a clash still stops
        // the test within a chunk of where it is.
        words[first] & head == 0
            && words[last] & tail == 0
            && words[first + 1..last]
                .chunks(8)
                .all(|c| c.iter().fold(0, |a, w| a | w) == 0)
    }
    #[inline]
    pub fn set_pes(&mut self, pes: &PeSet) {
        for &(s, e) in pes.runs() {
            self.set_range(s, e);
        }
    }
    #[inline]
    pub fn clear_pes(&mut self, pes: &PeSet) {
        for &(s, e) in pes.runs() {
            self.clear_range(s, e);
        }
    }
    /// Sets the bits of `pes` unless one of them is set already; says whether it did. The
    /// ledger's test and update of every resume: a test of every run, then the update, each
    /// a pass over whole words that vectorises; a refusal leaves the set as it was.
    #[inline]
    pub fn try_set_pes(&mut self, pes: &PeSet) -> bool {
        if self.intersects_pes(pes) {
            return false;
        }
        self.set_pes(pes);
        true
    }

    #[inline]
    pub fn intersects_pes(&self, pes: &PeSet) -> bool {
        !pes.runs().iter().all(|&(s, e)| self.range_clear(s, e))
    }
    #[inline]
    pub fn or(&self, other: &PeBits) -> PeBits {
        PeBits {
            words: self
                .words
                .iter()
                .zip(&other.words)
                .map(|(a, b)| a | b)
                .collect(),
            len: self.len,
        }
    }
    #[inline]
    pub fn count(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }
    /// The `n` lowest-numbered clear bits, or `None` if fewer are clear.
    #[inline]
    pub fn lowest_clear(&self, n: u32) -> Option<PeSet> {
        self.lowest_clear_in_both(self, n)
    }

    /// The `n` lowest-numbered PEs clear in both `self` and `other` (as `self.or(other)
    /// .lowest_clear(n)`, without building the union), or `None` if fewer are. A run of clear
    /// bits at a time, so the cost is the words scanned, not the PEs taken.
    pub fn lowest_clear_in_both(&self, other: &PeBits, n: u32) -> Option<PeSet> {
        self.lowest_clear_in_both_from(other, n, 0).0
    }

    /// [`PeBits::lowest_clear_in_both`] for a caller that knows every word of the union
    /// below `from_word` is full; also returns the first word of the union, from there, with a
    /// clear bit (the words' count if none), the next call's `from_word` while no bit below
    /// it is cleared.
    pub fn lowest_clear_in_both_from(
        &self,
        other: &PeBits,
        n: u32,
        from_word: usize,
    ) -> (Option<PeSet>, usize) {
        let mut set = PeSet::new();
        let mut need = n;
        let mut first_open = self.words.len();
        if need == 0 {
            return (Some(set), from_word);
        }
        let words = self.words.iter().zip(&other.words).enumerate();
        for (w, (&a, &b)) in words.skip(from_word) {
            let mut free = !(a | b);
            if free != 0 {
                first_open = first_open.min(w);
            }
            let base = w as u32 * 64;
            if self.len - base < 64 {
                // The last word: its bits past `len` are no PEs.
                free &= (1u64 << (self.len - base)) - 1;
            }
            take_lowest(free, base, &mut need, &mut set);
            if need == 0 {
                return (Some(set), first_open);
            }
        }
        (None, first_open)
    }

    /// The first `start >= from`, a multiple of `size` (a power of two), whose block
    /// `start .. min(start + size, len)` is clear in both `self` and `other`. Blocks smaller
    /// than a word are found a word at a time (a fold of the word's clear bits), larger ones
    /// by their words: the search never steps PE by PE.
    pub fn first_aligned_clear_in_both(&self, other: &PeBits, size: u32, from: u32) -> Option<u32> {
        debug_assert!(size.is_power_of_two());
        let from = from.next_multiple_of(size);
        if size >= 64 {
            let mut start = from;
            while start < self.len {
                let end = start.saturating_add(size).min(self.len);
                let clear =
                    PeBits::for_words(start, end, |w, m| (self.words[w] | other.words[w]) & m == 0);
                if clear {
                    return Some(start);
                }
                start = start.saturating_add(size);
            }
            return None;
        }
        // Bits `i` with `i % size == 0`.
        let aligned = u64::MAX / ((1u64 << size) - 1);
        let first = (from / 64) as usize;
        for w in first..self.words.len() {
            // Bits past `len` are clear in both, as the blocks are checked only up to `len`.
            let mut f = !(self.words[w] | other.words[w]);
            let mut k = 1;
            while k < size {
                f &= f >> k;
                k <<= 1;
            }
            f &= aligned;
            if w == first {
                f &= u64::MAX << (from % 64);
            }
            if f != 0 {
                let start = w as u32 * 64 + f.trailing_zeros();
                return (start < self.len).then_some(start);
            }
        }
        None
    }
}

/// The words PEs `s..e` cover, `(first, last, mask of first, mask of last)`, or `None` for an
/// empty range: the masks come from the run's ends, without a loop over bits.
#[inline]
fn span(s: u32, e: u32) -> Option<(usize, usize, u64, u64)> {
    (s < e).then(|| {
        let head = u64::MAX << (s % 64);
        let tail = u64::MAX >> (63 - (e - 1) % 64);
        ((s / 64) as usize, ((e - 1) / 64) as usize, head, tail)
    })
}

/// Takes the lowest `*need` set bits of `bits`, the word of PEs `base..base + 64`, into `set`
/// a run at a time (so the cost is the runs, not the PEs), lowering `*need`; returns the bits
/// taken. Every lowest-first search over bitset words is built on it.
#[inline]
pub fn take_lowest(bits: u64, base: u32, need: &mut u32, set: &mut PeSet) -> u64 {
    let (mut left, mut taken) = (bits, 0u64);
    while *need > 0 && left != 0 {
        let lo = left.trailing_zeros();
        let run = (left >> lo).trailing_ones().min(*need);
        let mask = if run == 64 {
            u64::MAX
        } else {
            ((1u64 << run) - 1) << lo
        };
        left &= !mask;
        taken |= mask;
        set.push_sorted(base + lo, base + lo + run);
        *need -= run;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_across_words() {
        let mut b = PeBits::new(200);
        b.set_range(60, 130);
        assert_eq!(b.count(), 70);
        assert!(b.get(60) && b.get(129) && !b.get(130) && !b.get(59));
        assert!(b.range_clear(0, 60) && !b.range_clear(0, 61) && b.range_clear(130, 200));
        b.clear_range(64, 128);
        assert_eq!(b.count(), 6);
        assert_eq!(b.lowest_clear(3).unwrap().to_string(), "0-2");
        let mut full = PeBits::new(70);
        full.set_range(0, 69);
        assert_eq!(full.lowest_clear(1).unwrap().to_string(), "69");
        assert!(full.lowest_clear(2).is_none());
        assert!(full.intersects_pes(&PeSet::contiguous(68, 2)));
        assert!(!full.intersects_pes(&PeSet::contiguous(69, 1)));
    }

    /// Range operations touch exactly the bits of the range, for every pair of ends around
    /// word boundaries (one word, two, several, empty ranges).
    #[test]
    fn range_operations_match_bit_by_bit() {
        let len = 200;
        for s in 0..len {
            for e in (s..=len).filter(|&e| e - s < 4 || e % 64 < 3 || e % 64 > 61 || e == len) {
                let mut b = PeBits::new(len);
                b.set_range(s, e);
                for p in 0..len {
                    assert_eq!(b.get(p), (s..e).contains(&p), "set {s}..{e} bit {p}");
                }
                assert_eq!(b.range_clear(s, e), s == e, "range_clear {s}..{e}");
                let mut full = PeBits::new(len);
                full.set_range(0, len);
                full.clear_range(s, e);
                assert_eq!(full.count(), len - (e - s), "clear {s}..{e}");
                assert!(full.range_clear(s, e));
                assert_eq!(s > 0 && !full.range_clear(s - 1, e), s > 0);
            }
        }
    }

    /// `try_set_pes` sets a set clear of the bitset, and leaves the bitset exactly as it was
    /// when the set clashes anywhere (in its first, a middle or its last word or run).
    #[test]
    fn try_set_pes_sets_all_or_nothing() {
        let set = PeSet::from_pes((0..3).chain(60..140).chain(190..192));
        for clash in [
            None,
            Some(0),
            Some(2),
            Some(63),
            Some(64),
            Some(139),
            Some(191),
        ] {
            let mut b = PeBits::new(200);
            b.set_range(150, 160);
            if let Some(p) = clash {
                b.set_range(p, p + 1);
            }
            let before = b.clone();
            let ok = b.try_set_pes(&set);
            assert_eq!(ok, clash.is_none(), "clash at {clash:?}");
            if ok {
                let mut want = before;
                want.set_pes(&set);
                assert_eq!(b, want);
            } else {
                assert_eq!(b, before, "clash at {clash:?} left bits behind");
            }
        }
    }

    /// The word-level searches answer as the plain definitions do, on random bitsets.
    #[test]
    fn word_searches_match_the_definitions() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..300 {
            let len = 1 + (rand() % 300) as u32;
            let (mut a, mut b) = (PeBits::new(len), PeBits::new(len));
            let density = rand() % 4;
            for p in 0..len {
                if rand() % 4 < density {
                    a.set_range(p, p + 1);
                }
                if rand() % 8 == 0 {
                    b.set_range(p, p + 1);
                }
            }
            let union = a.or(&b);
            let n = (rand() % (len as u64 + 2)) as u32;
            let naive: Vec<u32> = (0..len)
                .filter(|&p| !union.get(p))
                .take(n as usize)
                .collect();
            let want = (naive.len() == n as usize).then(|| PeSet::from_pes(naive));
            assert_eq!(a.lowest_clear_in_both(&b, n), want, "round {round}");
            let (got, first) = a.lowest_clear_in_both_from(&b, n.max(1), 0);
            let (again, _) = a.lowest_clear_in_both_from(&b, n.max(1), first);
            assert_eq!(
                got, again,
                "round {round}: restarting at the first open word"
            );
            for size in [1u32, 2, 4, 8, 16, 32, 64, 128, 256] {
                let from = (rand() % (len as u64 + 1)) as u32;
                let want = (from.next_multiple_of(size)..len)
                    .step_by(size as usize)
                    .find(|&s| union.range_clear(s, (s + size).min(len)));
                assert_eq!(
                    a.first_aligned_clear_in_both(&b, size, from),
                    want,
                    "round {round} size {size} from {from}"
                );
            }
        }
    }
}
