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

/// The mask of bits `lo..hi` (both within one word, `hi <= 64`).
#[inline]
fn mask(lo: u32, hi: u32) -> u64 {
    let upper = if hi >= 64 { u64::MAX } else { (1u64 << hi) - 1 };
    upper & !((1u64 << lo) - 1)
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

    #[inline]
    fn for_words(s: u32, e: u32, mut f: impl FnMut(usize, u64) -> bool) -> bool {
        let mut i = s;
        while i < e {
            let w = i / 64;
            let hi = e.min((w + 1) * 64);
            if !f(w as usize, mask(i % 64, hi - w * 64)) {
                return false;
            }
            i = hi;
        }
        true
    }

    #[inline]
    pub fn clear_all(&mut self) {
        self.words.fill(0);
    }

    #[inline]
    pub fn set_range(&mut self, s: u32, e: u32) {
        let words = &mut self.words;
        PeBits::for_words(s, e, |w, m| {
            words[w] |= m;
            true
        });
    }
    #[inline]
    pub fn clear_range(&mut self, s: u32, e: u32) {
        let words = &mut self.words;
        PeBits::for_words(s, e, |w, m| {
            words[w] &= !m;
            true
        });
    }
    /// True when no bit of `s..e` is set.
    #[inline]
    pub fn range_clear(&self, s: u32, e: u32) -> bool {
        PeBits::for_words(s, e, |w, m| self.words[w] & m == 0)
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
        if self.len - self.count() < n {
            return None;
        }
        let mut set = PeSet::new();
        let mut need = n;
        for (w, &word) in self.words.iter().enumerate() {
            let mut free = !word;
            while need > 0 && free != 0 {
                let bit = free.trailing_zeros();
                let pe = w as u32 * 64 + bit;
                if pe >= self.len {
                    break;
                }
                free &= free - 1;
                set.push_sorted(pe, pe + 1);
                need -= 1;
            }
            if need == 0 {
                return Some(set);
            }
        }
        None
    }
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
}
