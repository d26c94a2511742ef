//! The Pareto front of (nodes, estimate) of every suffix of a VM's waiting queue: what
//! backfilling's early stop tests, so one small long job and one wide short one elsewhere in
//! the queue do not stand for a small short job that is not there.

use cosched_core::Dur;

use crate::profile::Profile;

/// A job's needs as backfilling places it: whole nodes for an estimate.
pub(super) type Need = (u32, Dur);

/// For each suffix `pos..` of a queue, the needs no other need of the suffix dominates
/// (fewer or as many nodes for as short or a shorter estimate), by nodes ascending and so
/// estimate descending. Every job of the suffix needs at least the nodes and the estimate
/// of one point of its front, and a profile that fits a need fits every smaller one, so a
/// job of the suffix fits a profile only if a point of its front does: the front answers
/// "can any of these start now" exactly, where the fewest nodes and the shortest estimate
/// taken apart may belong to two jobs and answer yes for neither.
///
/// A pass asks for the suffixes in queue order and most passes stop after a few jobs, so
/// only the front of the suffix it is at is held. The fronts are made from the queue's tail
/// (each need either dominated, or put in where it goes with the points it dominates taken
/// out, a contiguous run); what each step did is logged, and moving on past a job undoes
/// its step. Making them costs one step per job and moving on one undo per job, where
/// keeping every distinct front would cost their sizes added up.
#[derive(Debug)]
pub(super) struct Fronts {
    /// The front of suffix `pos`, by nodes ascending.
    front: Vec<Need>,
    /// Per job, the step it made from the tail, if its need went into the front: where it
    /// went in, and the run of points it took out (`removed[a..b]`, which stood there).
    steps: Vec<Option<(u32, u32, u32)>>,
    removed: Vec<Need>,
    /// The suffix `front` is of.
    pos: usize,
    /// Counts the changes of `front` passed: equal for suffixes with the same front.
    id: usize,
}

impl Fronts {
    /// The fronts of `needs`' suffixes, at suffix 0; `None` is a job no pass places (held),
    /// which the fronts leave out.
    pub(super) fn new(
        needs: impl DoubleEndedIterator<Item = Option<Need>> + ExactSizeIterator,
    ) -> Self {
        let len = needs.len();
        let mut fronts = Fronts {
            front: Vec::new(),
            steps: vec![None; len],
            removed: Vec::new(),
            pos: 0,
            id: 0,
        };
        let front = &mut fronts.front;
        for (pos, need) in needs.enumerate().rev() {
            // Among the points of at most `n` nodes (a prefix), the last has the shortest
            // estimate: it alone tells whether one of them dominates the need.
            if let Some((n, d)) = need
                && front[..front.partition_point(|&(fn_, _)| fn_ <= n)]
                    .last()
                    .is_none_or(|&(_, fd)| fd > d)
            {
                // It dominates the points with at least its nodes and estimate (those after
                // the points with fewer nodes, all longer than it, up to the first shorter
                // one), and takes their place.
                let at = front.partition_point(|&(fn_, _)| fn_ < n);
                let out = front[at..].iter().take_while(|&&(_, fd)| fd >= d).count();
                let a = fronts.removed.len();
                fronts.removed.extend_from_slice(&front[at..at + out]);
                front.splice(at..at + out, [(n, d)]);
                fronts.steps[pos] = Some((at as u32, a as u32, fronts.removed.len() as u32));
            }
        }
        fronts
    }

    /// Moves on to suffix `pos` (no earlier than the one it is at), undoing the steps of
    /// the jobs passed.
    fn go_to(&mut self, pos: usize) {
        debug_assert!(pos >= self.pos, "fronts are asked for in queue order");
        while self.pos < pos {
            if let Some((at, a, b)) = self.steps[self.pos] {
                let at = at as usize;
                self.front.splice(
                    at..at + 1,
                    self.removed[a as usize..b as usize].iter().copied(),
                );
                self.id += 1;
            }
            self.pos += 1;
        }
    }

    /// Which front suffix `pos` has: equal for suffixes with the same front.
    pub(super) fn id(&mut self, pos: usize) -> usize {
        self.go_to(pos);
        self.id
    }

    /// The front of suffix `pos`, by nodes ascending.
    pub(super) fn of(&mut self, pos: usize) -> &[Need] {
        self.go_to(pos);
        &self.front
    }

    /// The fewest nodes a job of suffix `pos` needs (`u32::MAX` with none to place).
    pub(super) fn fewest_nodes(&mut self, pos: usize) -> u32 {
        self.of(pos).first().map_or(u32::MAX, |&(n, _)| n)
    }

    /// Whether a job of suffix `pos` could start now on `free` free nodes in `profile`, and
    /// the longest estimate the answer read the profile for (the answer stands until a
    /// reservation starts within it).
    pub(super) fn may_start(&mut self, pos: usize, free: u32, profile: &Profile) -> (bool, Dur) {
        // Nodes ascending, estimates descending: those within `free` are a prefix, the
        // longest of them first.
        let mut within = self
            .of(pos)
            .iter()
            .take_while(|&&(n, _)| n <= free)
            .peekable();
        let reach = within.peek().map_or(Dur::ZERO, |&&(_, d)| d);
        (within.any(|&(n, d)| profile.fits_at_start(n, d)), reach)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: i64) -> Dur {
        Dur::from_secs(secs)
    }

    #[test]
    fn a_suffix_front_keeps_only_undominated_needs_by_nodes_ascending() {
        let needs = [
            Some((4, s(10))),
            Some((1, s(500))),
            None,
            Some((8, s(5))),
            Some((2, s(600))),
        ];
        let mut f = Fronts::new(needs.into_iter());
        assert_eq!(f.fewest_nodes(0), 1);
        assert_eq!(f.of(0), &[(1, s(500)), (4, s(10)), (8, s(5))]);
        assert_eq!(f.of(1), &[(1, s(500)), (8, s(5))]);
        let id2 = f.id(2);
        assert_eq!(f.of(2), &[(2, s(600)), (8, s(5))]);
        assert_eq!(f.id(3), id2);
        assert_eq!(f.of(3), &[(2, s(600)), (8, s(5))]);
        assert_ne!(f.id(4), id2);
        assert_eq!(f.of(4), &[(2, s(600))]);
        assert_eq!(f.of(5), &[]);
        assert_eq!(f.fewest_nodes(5), u32::MAX);
    }

    /// The front of `needs[pos..]` worked out directly: the distinct needs no other need
    /// there is at most as large as in both, by nodes ascending.
    fn front_of(needs: &[Option<Need>]) -> Vec<Need> {
        let all: Vec<Need> = needs.iter().flatten().copied().collect();
        let mut front: Vec<Need> = all
            .iter()
            .copied()
            .filter(|&(n, d)| {
                !all.iter()
                    .any(|&(m, e)| m <= n && e <= d && (m, e) != (n, d))
            })
            .collect();
        front.sort_unstable();
        front.dedup();
        front
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Walked in queue order, from any first suffix on and skipping any, the front held
        /// is every suffix's front worked out directly, and the ids of two suffixes are
        /// equal exactly when their fronts are (a run of equal fronts).
        #[test]
        fn the_fronts_walked_in_order_are_each_suffixs_front(
            raw in proptest::collection::vec(
                proptest::option::weighted(0.9, (1u32..8, 1i64..12)),
                0..40,
            ),
            stride in 1usize..4,
        ) {
            let needs: Vec<Option<Need>> =
                raw.iter().map(|o| o.map(|(n, d)| (n, s(d)))).collect();
            let mut f = Fronts::new(needs.iter().copied());
            let mut last: Option<(usize, Vec<Need>)> = None;
            for pos in (0..=needs.len()).step_by(stride) {
                let want = front_of(&needs[pos..]);
                let id = f.id(pos);
                proptest::prop_assert_eq!(f.of(pos), &want[..]);
                proptest::prop_assert_eq!(
                    f.fewest_nodes(pos),
                    want.first().map_or(u32::MAX, |&(n, _)| n)
                );
                if let Some((lid, lfront)) = &last {
                    // Ids count changes: equal ids mean no change in between.
                    if *lid == id {
                        proptest::prop_assert_eq!(lfront, &want);
                    }
                    if stride == 1 {
                        proptest::prop_assert_eq!(*lid == id, *lfront == want);
                    }
                }
                last = Some((id, want));
            }
        }
    }

    /// One small long job and one wide short one: neither starts in 4 free nodes that stay
    /// free 100 s, though the fewest nodes (1) and the shortest estimate (10 s) would.
    #[test]
    fn one_small_job_and_one_short_job_do_not_make_a_small_short_one() {
        let mut profile = Profile::default();
        profile.rebuild(
            cosched_core::Time::ZERO,
            4,
            [(cosched_core::Time::from_secs(100), 4)].into_iter(),
        );
        assert!(profile.reserve_at(cosched_core::Time::from_secs(100), s(1000), 8));
        let mut f = Fronts::new([Some((1, s(500))), Some((6, s(10)))].into_iter());
        let (fits, reach) = f.may_start(0, 4, &profile);
        assert!(!fits);
        assert_eq!(reach, s(500));
        assert!(profile.fits_at_start(1, s(10)));
        let mut g = Fronts::new([Some((1, s(50))), Some((6, s(10)))].into_iter());
        assert!(g.may_start(0, 4, &profile).0);
    }
}
