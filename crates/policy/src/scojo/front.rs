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
#[derive(Debug)]
pub(super) struct Fronts {
    /// The distinct fronts, one after the other.
    points: Vec<Need>,
    /// Front `f` is `points[spans[f]..spans[f + 1]]`.
    spans: Vec<usize>,
    /// The front of suffix `pos`; equal numbers are equal fronts.
    of: Vec<usize>,
}

impl Fronts {
    /// The fronts of `needs`' suffixes; `None` is a job no pass places (held), which the
    /// fronts leave out.
    pub(super) fn new(
        needs: impl DoubleEndedIterator<Item = Option<Need>> + ExactSizeIterator,
    ) -> Self {
        let len = needs.len();
        let mut front: Vec<Need> = Vec::new();
        let mut fronts = Fronts {
            points: Vec::new(),
            spans: vec![0, 0],
            of: vec![0; len + 1],
        };
        for (pos, need) in needs.enumerate().rev() {
            // Among the points of at most `n` nodes (a prefix), the last has the shortest
            // estimate: it alone tells whether one of them dominates the need.
            if let Some((n, d)) = need
                && front[..front.partition_point(|&(fn_, _)| fn_ <= n)]
                    .last()
                    .is_none_or(|&(_, fd)| fd > d)
            {
                // It dominates the points with at least its nodes and estimate, and goes
                // after those with fewer nodes (all longer than it, or they would dominate it).
                front.retain(|&(fn_, fd)| fn_ < n || fd < d);
                let at = front.partition_point(|&(fn_, _)| fn_ < n);
                front.insert(at, (n, d));
                fronts.points.extend_from_slice(&front);
                fronts.spans.push(fronts.points.len());
            }
            fronts.of[pos] = fronts.spans.len() - 2;
        }
        fronts
    }

    /// Which front suffix `pos` has: equal for suffixes with the same front.
    pub(super) fn id(&self, pos: usize) -> usize {
        self.of[pos]
    }

    /// The front of suffix `pos`, by nodes ascending.
    pub(super) fn of(&self, pos: usize) -> &[Need] {
        let f = self.of[pos];
        &self.points[self.spans[f]..self.spans[f + 1]]
    }

    /// The fewest nodes a job of suffix `pos` needs (`u32::MAX` with none to place).
    pub(super) fn fewest_nodes(&self, pos: usize) -> u32 {
        self.of(pos).first().map_or(u32::MAX, |&(n, _)| n)
    }

    /// Whether a job of suffix `pos` could start now on `free` free nodes in `profile`, and
    /// the longest estimate the answer read the profile for (the answer stands until a
    /// reservation starts within it).
    pub(super) fn may_start(&self, pos: usize, free: u32, profile: &Profile) -> (bool, Dur) {
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
        let f = Fronts::new(needs.into_iter());
        assert_eq!(f.of(5), &[]);
        assert_eq!(f.of(4), &[(2, s(600))]);
        assert_eq!(f.of(3), &[(2, s(600)), (8, s(5))]);
        assert_eq!(f.id(2), f.id(3));
        assert_eq!(f.of(1), &[(1, s(500)), (8, s(5))]);
        assert_eq!(f.of(0), &[(1, s(500)), (4, s(10)), (8, s(5))]);
        assert_eq!(f.fewest_nodes(0), 1);
        assert_eq!(f.fewest_nodes(5), u32::MAX);
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
        let f = Fronts::new([Some((1, s(500))), Some((6, s(10)))].into_iter());
        let (fits, reach) = f.may_start(0, 4, &profile);
        assert!(!fits);
        assert_eq!(reach, s(500));
        assert!(profile.fits_at_start(1, s(10)));
        let g = Fronts::new([Some((1, s(50))), Some((6, s(10)))].into_iter());
        assert!(g.may_start(0, 4, &profile).0);
    }
}
