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

/// For each number of nodes placed, the earliest fits found so far in a pass as a
/// staircase: estimates ascending, starts strictly ascending (an entry with a longer
/// estimate and no later start bounds nothing another does not), so the bound for an
/// estimate is the last entry not longer than it. `Time::MAX` stands for "no fit".
///
/// The counts are few (a queue's jobs come in a few dozen sizes at most) and kept sorted, so
/// a bound reads the staircases of every count up to the job's own.
#[derive(Debug, Default)]
pub(super) struct Floors {
    by_nodes: Vec<(u32, Vec<(Dur, Time)>)>,
}

impl Floors {
    /// The latest start found for a job of at most `nodes` nodes and an estimate no longer
    /// than `dur` (`Time::MAX` if one found no fit); `None` if no such job was placed.
    pub(super) fn floor(&self, nodes: u32, dur: Dur) -> Option<Time> {
        let upto = self.by_nodes.partition_point(|&(n, _)| n <= nodes);
        self.by_nodes[..upto]
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
            self.by_nodes.insert(c, (nodes, Vec::new()));
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
        /// The staircases answer what the largest start among the jobs of no more nodes and
        /// no longer estimate says, computed over every job recorded.
        #[test]
        fn the_floor_is_the_latest_start_of_a_smaller_job(
            jobs in proptest::collection::vec((1u32..4, 1i64..20, 0i64..50), 1..60),
            asks in proptest::collection::vec((1u32..4, 0i64..22), 1..30),
        ) {
            let mut f = Floors::default();
            for &(n, d, s) in &jobs {
                let at = if s == 49 { Time::MAX } else { t(s) };
                f.found(n, Dur::from_secs(d), at);
            }
            for (n, d) in asks {
                let want = jobs
                    .iter()
                    .filter(|&&(jn, jd, _)| jn <= n && jd <= d)
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
            jobs in proptest::collection::vec((1u32..6, 1i64..300), 1..150),
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
