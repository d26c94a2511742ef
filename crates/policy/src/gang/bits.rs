//! [`SortedIds`]: the small sets of job ids the matrix keeps (who runs, who is next).

use cosched_core::JobId;

/// A set of job ids kept as a sorted vector: the sets here hold tens of jobs, where a vector
/// beats a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SortedIds(Vec<JobId>);

impl SortedIds {
    pub fn contains(&self, id: &JobId) -> bool {
        self.0.binary_search(id).is_ok()
    }
    pub fn insert(&mut self, id: JobId) {
        if let Err(i) = self.0.binary_search(&id) {
            self.0.insert(i, id);
        }
    }
    pub fn remove(&mut self, id: JobId) {
        if let Ok(i) = self.0.binary_search(&id) {
            self.0.remove(i);
        }
    }
    /// Appends without keeping order; call [`SortedIds::sort`] before any lookup.
    pub fn push_unsorted(&mut self, id: JobId) {
        self.0.push(id);
    }
    pub fn sort(&mut self) {
        self.0.sort_unstable();
        self.0.dedup();
    }
    pub fn clear(&mut self) {
        self.0.clear();
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn iter(&self) -> std::slice::Iter<'_, JobId> {
        self.0.iter()
    }
    /// Makes `self` a copy of `other`, reusing its buffer (a derived `clone_from` would
    /// allocate).
    pub fn copy_from(&mut self, other: &SortedIds) {
        self.0.clear();
        self.0.extend_from_slice(&other.0);
    }
    /// Calls `f` on each id of `self` that `other` lacks, in order: one merge walk over the
    /// two sorted vectors instead of a binary search per id.
    pub fn for_each_not_in(&self, other: &SortedIds, mut f: impl FnMut(JobId)) {
        let theirs = &other.0;
        let mut k = 0;
        for &id in &self.0 {
            while k < theirs.len() && theirs[k] < id {
                k += 1;
            }
            if k < theirs.len() && theirs[k] == id {
                k += 1;
            } else {
                f(id);
            }
        }
    }
}
