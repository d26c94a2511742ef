//! Lower bounds on the earliest fits of one backfilling pass.
//!
//! A pass places the waiting jobs in queue order, each at its earliest fit in a profile that
//! the pass only takes free nodes away from (each placement reserves; nothing is given
//! back). If an earlier job of `n` nodes for `d` was placed at `t`, a later job of `n' ≥ n`
//! nodes for `d' ≥ d` fits nowhere before `t`: a fit of the later job at `s < t` is `n'`
//! nodes free for `d'` from `s` in a profile with no more free than the earlier one had,
//! hence `n` nodes free for `d` from `s` then, a fit of the earlier job before the one it
//! found. Its search starts at the latest such `t` and finds the same place. The same holds
//! for a job that found no fit at all: no later job of as many nodes and as long an estimate
//! finds one.

use cosched_core::{Dur, Time};

/// How many node counts, the job's own and the next smaller ones placed, bound its search.
/// Every smaller count gives a true bound, and any subset of them a weaker one that finds
/// the same place; the nearest bound best (a job is held back most by jobs like it), and
/// reading every count costs more than the searches it shortens. On SDSC-BLUE's first
/// 60,000 jobs under Scojo-PECT (callgrind): 15.10 G instructions with the job's own count
/// alone, 14.80 G with the 2 nearest, 14.71 G with 4, 14.60 G with 8, 15.23 G with all.
const NEAREST: usize = 8;

/// For each number of nodes placed, the earliest fits found so far in a pass as a
/// staircase: estimates ascending, starts strictly ascending (an entry with a longer
/// estimate and no later start bounds nothing another does not), so the bound for an
/// estimate is the last entry not longer than it. `Time::MAX` stands for "no fit". The
/// counts are kept sorted.
#[derive(Clone, Debug, Default)]
pub(super) struct Floors {
    by_nodes: Vec<(u32, Vec<(Dur, Time)>)>,
    /// Emptied staircases of earlier passes: most passes place a few dozen jobs, and their
    /// staircases reuse these buffers instead of allocating anew.
    spare: Vec<Vec<(Dur, Time)>>,
}

impl Floors {
    /// Forgets every fit, for a new pass.
    pub(super) fn clear(&mut self) {
        for (_, mut s) in self.by_nodes.drain(..) {
            s.clear();
            self.spare.push(s);
        }
    }

    /// The latest start found for a job of one of the [`NEAREST`] counts up to `nodes` nodes
    /// and an estimate no longer than `dur` (`Time::MAX` if one found no fit); `None` if no
    /// such job was placed.
    pub(super) fn floor(&self, nodes: u32, dur: Dur) -> Option<Time> {
        let upto = self.by_nodes.partition_point(|&(n, _)| n <= nodes);
        self.by_nodes[upto.saturating_sub(NEAREST)..upto]
            .iter()
            .filter_map(|(_, s)| {
                let i = s.partition_point(|&(d, _)| d <= dur);
                i.checked_sub(1).map(|i| s[i].1)
            })
            .max()
    }

    /// A job of `nodes` nodes for `dur` found its earliest fit at `at` (`Time::MAX`: none).
    pub(super) fn found(&mut self, nodes: u32, dur: Dur, at: Time) {
        let c = self.by_nodes.partition_point(|&(n, _)| n < nodes);
        if self.by_nodes.get(c).is_none_or(|&(n, _)| n != nodes) {
            let s = self.spare.pop().unwrap_or_default();
            self.by_nodes.insert(c, (nodes, s));
        }
        let s = &mut self.by_nodes[c].1;
        let i = s.partition_point(|&(d, _)| d <= dur);
        if i > 0 && s[i - 1].1 >= at {
            return;
        }
        // The entries with longer estimates and no later start are bounded by this one.
        let j = i + s[i..].iter().take_while(|&&(_, t)| t <= at).count();
        if i > 0 && s[i - 1].0 == dur {
            s[i - 1].1 = at;
            s.drain(i..j);
        } else {
            s.splice(i..j, [(dur, at)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::profile::Profile;

    fn t(s: i64) -> Time {
        Time::from_secs(s)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The staircases answer what the largest start among the jobs of the nearest
        /// counts up to the asked one and no longer estimate says, computed over every job
        /// recorded.
        #[test]
        fn the_floor_is_the_latest_start_of_a_smaller_job(
            jobs in proptest::collection::vec((1u32..10, 1i64..20, 0i64..50), 1..60),
            asks in proptest::collection::vec((1u32..10, 0i64..22), 1..30),
        ) {
            let mut f = Floors::default();
            for &(n, d, s) in &jobs {
                let at = if s == 49 { Time::MAX } else { t(s) };
                f.found(n, Dur::from_secs(d), at);
            }
            for (n, d) in asks {
                let mut counts: Vec<u32> = jobs.iter().map(|j| j.0).filter(|&c| c <= n).collect();
                counts.sort_unstable();
                counts.dedup();
                let nearest = &counts[counts.len().saturating_sub(NEAREST)..];
                let want = jobs
                    .iter()
                    .filter(|&&(jn, jd, _)| nearest.contains(&jn) && jd <= d)
                    .map(|&(_, _, s)| if s == 49 { Time::MAX } else { t(s) })
                    .max();
                prop_assert_eq!(f.floor(n, Dur::from_secs(d)), want);
            }
        }

        /// Jobs placed one after the other in a profile, each at its earliest fit: the search
        /// started at the floor finds the same place as the search from the profile's start.
        #[test]
        fn a_search_from_the_floor_finds_the_earliest_fit(
            releases in proptest::collection::vec((1i64..50, 1u32..4), 1..200),
            jobs in proptest::collection::vec((1u32..9, 1i64..300), 1..150),
        ) {
            let mut p = Profile::default();
            let mut at = 0;
            p.rebuild(
                t(0),
                2,
                releases.iter().map(|&(gap, n)| {
                    at += gap;
                    (t(at), n)
                }),
            );
            let mut f = Floors::default();
            for (n, d) in jobs {
                let d = Dur::from_secs(d);
                let plain = p.earliest(n, d);
                let bounded = match f.floor(n, d) {
                    None => p.earliest(n, d),
                    Some(Time::MAX) => None,
                    Some(floor) => p.earliest_within(n, d, floor, Time::MAX),
                };
                prop_assert_eq!(bounded, plain);
                f.found(n, d, plain.map_or(Time::MAX, |(s, _)| s));
                if let Some((_, i)) = plain {
                    p.reserve(i, d, n);
                }
            }
        }
    }
}
