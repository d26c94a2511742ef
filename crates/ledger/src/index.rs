//! [`JobIndex`]: job id → position in the ledger.
//!
//! Trace ids and the machine manager's ids are small and dense, so a plain array answers the
//! lookup of every decision without hashing; sparse ids fall back to a hash map. Cleaned
//! traces have gaps (HPC2N's 202,876 jobs run to id 527,371, with a gap of thousands of ids
//! early on), so the array tolerates a fixed slack of a million ids (4 MiB) on top of four
//! ids per job before it gives way: time-sharing policies look a job up on every decision.

use cosched_core::{IdMap, JobId};

#[derive(Clone, Debug)]
pub(crate) enum JobIndex {
    Dense(Vec<u32>),
    Hashed(IdMap<u32>),
}

const NONE: u32 = u32::MAX;

/// Ids below `4 * jobs + SLACK` stay in the array.
const SLACK: u64 = 1 << 20;

impl JobIndex {
    pub(crate) fn new() -> JobIndex {
        JobIndex::Dense(Vec::new())
    }

    /// Records that `job` sits at position `at`; false if `job` is there already.
    pub(crate) fn insert(&mut self, job: JobId, at: u32, len: usize) -> bool {
        if let JobIndex::Dense(v) = self {
            // Ids far beyond the number of jobs would make the array mostly holes.
            if job.0 >= 4 * len as u64 + SLACK {
                let mut map = IdMap::<u32>::default();
                map.reserve(len + 1);
                for (id, &pos) in v.iter().enumerate() {
                    if pos != NONE {
                        map.insert(JobId(id as u64), pos);
                    }
                }
                *self = JobIndex::Hashed(map);
            }
        }
        match self {
            JobIndex::Dense(v) => {
                let i = job.0 as usize;
                if i >= v.len() {
                    v.resize(i + 1, NONE);
                }
                if v[i] != NONE {
                    return false;
                }
                v[i] = at;
                true
            }
            JobIndex::Hashed(m) => m.insert(job, at).is_none(),
        }
    }

    #[inline]
    pub(crate) fn get(&self, job: JobId) -> Option<usize> {
        match self {
            JobIndex::Dense(v) => v
                .get(job.0 as usize)
                .copied()
                .filter(|&i| i != NONE)
                .map(|i| i as usize),
            JobIndex::Hashed(m) => m.get(&job).map(|&i| i as usize),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_then_sparse_ids_are_all_found() {
        let mut ix = JobIndex::new();
        for (k, id) in [1u64, 2, 3, 7].into_iter().enumerate() {
            assert!(ix.insert(JobId(id), k as u32, k));
        }
        assert!(!ix.insert(JobId(3), 9, 4), "duplicate");
        assert!(matches!(ix, JobIndex::Dense(_)));
        assert!(ix.insert(JobId(500_000), 4, 4));
        assert!(
            matches!(ix, JobIndex::Dense(_)),
            "a trace's gap stays dense"
        );
        assert!(ix.insert(JobId(5_000_000), 5, 5));
        assert!(matches!(ix, JobIndex::Hashed(_)));
        assert_eq!(ix.get(JobId(7)), Some(3));
        assert_eq!(ix.get(JobId(500_000)), Some(4));
        assert_eq!(ix.get(JobId(5_000_000)), Some(5));
        assert_eq!(ix.get(JobId(5)), None);
        assert!(!ix.insert(JobId(2), 6, 6), "duplicate after the switch");
    }
}
