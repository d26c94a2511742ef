//! [`PeSet`]: the PEs a job holds, stored as sorted runs so a 1,000-PE contiguous allocation
//! costs one entry.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::PeId;

/// A set of PEs as sorted, disjoint, non-adjacent half-open runs `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeSet {
    runs: Vec<(u32, u32)>,
}

impl PeSet {
    pub fn new() -> PeSet {
        PeSet::default()
    }
    /// PEs `start .. start + len`.
    pub fn contiguous(start: u32, len: u32) -> PeSet {
        if len == 0 {
            PeSet::new()
        } else {
            PeSet {
                runs: vec![(start, start + len)],
            }
        }
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
        self.runs.iter().map(|(s, e)| e - s).sum()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
    #[inline]
    pub fn runs(&self) -> &[(u32, u32)] {
        &self.runs
    }
    pub fn iter(&self) -> impl Iterator<Item = PeId> + '_ {
        self.runs.iter().flat_map(|&(s, e)| (s..e).map(PeId))
    }
    #[inline]
    pub fn contains(&self, pe: PeId) -> bool {
        let i = self.runs.partition_point(|&(_, e)| e <= pe.0);
        self.runs.get(i).is_some_and(|&(s, _)| s <= pe.0)
    }
    /// True when the two sets share a PE.
    #[inline]
    pub fn intersects(&self, other: &PeSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.runs.len() && j < other.runs.len() {
            let (a, b) = (self.runs[i], other.runs[j]);
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
        for (i, &(s, e)) in self.runs.iter().enumerate() {
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
}
