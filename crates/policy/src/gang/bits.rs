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
        // A row's jobs come mostly in id order already (they join in submit order): the
        // check costs less than sorting a sorted vector.
        if !self.0.is_sorted() {
            self.0.sort_unstable();
        }
        self.0.dedup();
    }
    /// Adds the ids of `more` (in any order; sorted in place) to the set: one merge from the
    /// back, instead of sorting the whole set again.
    pub fn merge(&mut self, more: &mut [JobId]) {
        if more.is_empty() {
            return;
        }
        more.sort_unstable();
        let n = self.0.len();
        self.0.extend_from_slice(more);
        let v = &mut self.0;
        let (mut i, mut j, mut k) = (n, more.len(), v.len());
        // Every slot from `k` on is final; once `more` is used up, `v[..i]` is in place.
        while j > 0 {
            k -= 1;
            if i > 0 && v[i - 1] > more[j - 1] {
                v[k] = v[i - 1];
                i -= 1;
            } else {
                v[k] = more[j - 1];
                j -= 1;
            }
        }
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
    /// Calls `mine` on each id of `self` that `other` lacks and `theirs` on each id of
    /// `other` that `self` lacks, each in order: one merge walk over the two sorted vectors
    /// for what two calls of [`SortedIds::for_each_not_in`] find.
    pub fn for_each_difference(
        &self,
        other: &SortedIds,
        mut mine: impl FnMut(JobId),
        mut theirs: impl FnMut(JobId),
    ) {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => {
                    mine(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    theirs(b[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
        }
        a[i..].iter().for_each(|&id| mine(id));
        b[j..].iter().for_each(|&id| theirs(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A merge gives what pushing the ids and sorting gives, duplicates and all.
        #[test]
        fn merge_is_push_then_sort(
            ids in proptest::collection::vec(0u64..40, 0..12),
            more in proptest::collection::vec(0u64..40, 0..12),
        ) {
            let mut a = SortedIds::default();
            for &id in &ids {
                a.push_unsorted(JobId(id));
            }
            a.sort();
            let mut more: Vec<JobId> = more.into_iter().map(JobId).collect();
            let mut want = a.clone();
            for &id in &more {
                want.push_unsorted(id);
            }
            want.sort();
            a.merge(&mut more);
            proptest::prop_assert_eq!(a, want);
        }

        /// One walk finds both differences as two calls of `for_each_not_in` do.
        #[test]
        fn both_differences_in_one_walk(
            ids in proptest::collection::vec(0u64..40, 0..16),
            other in proptest::collection::vec(0u64..40, 0..16),
        ) {
            let set = |v: &[u64]| {
                let mut s = SortedIds::default();
                for &id in v {
                    s.push_unsorted(JobId(id));
                }
                s.sort();
                s
            };
            let (a, b) = (set(&ids), set(&other));
            let (mut mine, mut theirs) = (Vec::new(), Vec::new());
            a.for_each_difference(&b, |id| mine.push(id), |id| theirs.push(id));
            let (mut want_mine, mut want_theirs) = (Vec::new(), Vec::new());
            a.for_each_not_in(&b, |id| want_mine.push(id));
            b.for_each_not_in(&a, |id| want_theirs.push(id));
            proptest::prop_assert_eq!(mine, want_mine);
            proptest::prop_assert_eq!(theirs, want_theirs);
        }
    }
}
