//! [`PeSet`]: the PEs a job holds, stored as sorted runs so a 1,000-PE contiguous allocation
//! costs one entry.

use std::fmt;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::PeId;

/// Runs kept inside the set itself, without a heap allocation. Nearly every job's PEs are one
/// to a few runs, and a simulator starts hundreds of thousands of jobs: an allocation (and a
/// free) for each was a visible part of a run (callgrind: `push_sorted` → `grow_one`).
const INLINE: usize = 3;

/// A set of PEs as sorted, disjoint, non-adjacent half-open runs `[start, end)`.
///
/// Up to [`INLINE`] runs are stored in the set, more on the heap; equality, hashing, `Debug`
/// and serde (`{"runs": [...]}`) see only the runs, as when they were a `Vec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeSet {
    runs: SmallVec<[(u32, u32); INLINE]>,
}

impl PeSet {
    pub fn new() -> PeSet {
        PeSet::default()
    }
    /// PEs `start .. start + len`.
    pub fn contiguous(start: u32, len: u32) -> PeSet {
        let mut set = PeSet::new();
        set.push_sorted(start, start + len);
        set
    }
    /// Builds a set from PEs in any order; duplicates are merged.
    pub fn from_pes<I: IntoIterator<Item = u32>>(pes: I) -> PeSet {
        let mut v: Vec<u32> = pes.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        let mut set = PeSet::new();
        for p in v {
            set.push_sorted(p, p + 1);
        }
        set
    }
    /// The set of `runs`, which must be sorted, disjoint, non-adjacent and non-empty (what
    /// a set's runs are), stored at their number: a set gathered elsewhere is made with one
    /// allocation of its size, not grown run by run. Panics if they are not: that is a bug
    /// in the caller.
    pub fn from_runs(runs: &[(u32, u32)]) -> PeSet {
        assert!(
            runs.iter().all(|&(s, e)| s < e) && runs.windows(2).all(|w| w[0].1 < w[1].0),
            "PeSet::from_runs of runs not sorted, disjoint and apart"
        );
        PeSet {
            runs: SmallVec::from_slice(runs),
        }
    }
    /// Appends a run that starts at or after the end of the last one (merging when adjacent).
    /// Panics if the run would go backwards: that is a bug in the caller.
    pub fn push_sorted(&mut self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        match self.runs.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            Some(last) => {
                assert!(last.1 < start, "PeSet::push_sorted out of order");
                self.runs.push((start, end));
            }
            None => self.runs.push((start, end)),
        }
    }
    #[inline]
    pub fn len(&self) -> u32 {
        self.runs().iter().map(|(s, e)| e - s).sum()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.runs().is_empty()
    }
    #[inline]
    pub fn runs(&self) -> &[(u32, u32)] {
        &self.runs
    }
    pub fn iter(&self) -> impl Iterator<Item = PeId> + '_ {
        self.runs().iter().flat_map(|&(s, e)| (s..e).map(PeId))
    }
    #[inline]
    pub fn contains(&self, pe: PeId) -> bool {
        let runs = self.runs();
        let i = runs.partition_point(|&(_, e)| e <= pe.0);
        runs.get(i).is_some_and(|&(s, _)| s <= pe.0)
    }
    /// True when the two sets share a PE.
    #[inline]
    pub fn intersects(&self, other: &PeSet) -> bool {
        let (x, y) = (self.runs(), other.runs());
        let (mut i, mut j) = (0, 0);
        while i < x.len() && j < y.len() {
            let (a, b) = (x[i], y[j]);
            if a.0 < b.1 && b.0 < a.1 {
                return true;
            }
            if a.1 <= b.1 { i += 1 } else { j += 1 }
        }
        false
    }
}

impl fmt::Display for PeSet {
    /// `0-3,8,10-11`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(s, e)) in self.runs().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if e - s == 1 {
                write!(f, "{s}")?
            } else {
                write!(f, "{}-{}", s, e - 1)?
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{Hash, Hasher};

    #[test]
    fn builds_runs_and_queries() {
        let s = PeSet::from_pes([3, 0, 1, 2, 8, 10, 11, 1]);
        assert_eq!(s.runs(), &[(0, 4), (8, 9), (10, 12)]);
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert!(s.contains(PeId(8)) && !s.contains(PeId(9)) && s.contains(PeId(11)));
        assert!(s.intersects(&PeSet::contiguous(9, 2)));
        assert!(!s.intersects(&PeSet::contiguous(4, 4)));
        assert_eq!(s.iter().count(), 7);
    }

    #[test]
    fn from_runs_is_the_set_pushed_run_by_run() {
        for runs in [
            vec![],
            vec![(0, 4)],
            vec![(0, 4), (8, 9), (10, 12)],
            (0..2 * INLINE as u32 + 1)
                .map(|i| (3 * i, 3 * i + 2))
                .collect(),
        ] {
            let mut pushed = PeSet::new();
            for &(s, e) in &runs {
                pushed.push_sorted(s, e);
            }
            let made = PeSet::from_runs(&runs);
            assert_eq!(made, pushed);
            assert_eq!(made.runs.spilled(), runs.len() > INLINE);
            assert!(made.runs.capacity() == INLINE.max(runs.len()));
        }
    }

    #[test]
    #[should_panic(expected = "not sorted")]
    fn from_runs_refuses_adjacent_runs() {
        PeSet::from_runs(&[(0, 4), (4, 6)]);
    }

    #[test]
    fn many_runs_move_to_the_heap_unseen() {
        // Past the inline runs the set keeps its meaning: same runs, merging, equality, hash,
        // Debug and serde as a set built in one go.
        let pes: Vec<u32> = (0..2 * INLINE as u32 + 1).map(|i| 3 * i).collect();
        let mut grown = PeSet::new();
        for &p in &pes {
            grown.push_sorted(p, p + 1);
        }
        grown.push_sorted(pes[pes.len() - 1] + 1, pes[pes.len() - 1] + 2); // merges
        assert!(grown.runs.spilled());
        assert_eq!(grown.runs().len(), pes.len());
        assert_eq!(grown.len(), pes.len() as u32 + 1);
        let json = serde_json::to_string(&grown).unwrap();
        assert!(json.starts_with(r#"{"runs":[[0,1],[3,4],"#), "{json}");
        let back: PeSet = serde_json::from_str(&json).unwrap();
        assert_eq!(back, grown);
        assert_eq!(format!("{back:?}"), format!("{grown:?}"));
        let hash = |s: &PeSet| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&back), hash(&grown));
        // A short set read back is inline and equal to one built by pushes.
        let small: PeSet = serde_json::from_str(r#"{"runs":[[0,4],[8,9]]}"#).unwrap();
        assert!(!small.runs.spilled() && small.runs.len() == 2);
        assert_eq!(small, PeSet::from_pes([0, 1, 2, 3, 8]));
        assert_eq!(format!("{small:?}"), "PeSet { runs: [(0, 4), (8, 9)] }");
        assert_eq!(hash(&small), {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            vec![(0u32, 4u32), (8, 9)].hash(&mut h);
            h.finish()
        });
    }
}
