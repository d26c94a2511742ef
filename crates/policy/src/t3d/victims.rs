//! Which PEs a waiting T3D job could get now: open ones, then those of the jobs it may
//! preempt, cheapest first, or its own PEs again when it must come back where it was.

use std::cell::RefMut;

use cosched_core::{Dur, JobId, PeSet, Time};

use super::pes::Holder;
use super::{Assignment, Loaded, Pass, T3d, Victim, Victims, Waiting};

impl Victims {
    /// The `i`-th cheapest victim (from 0), if there are that many. The sorted prefix grows
    /// to at least `i + 1` and at least doubles: the cheapest of the rest are selected (in
    /// linear time) and only they are sorted, so a reservation that needs the first few
    /// victims of a long list does not sort it all.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub(super) fn nth(&mut self, i: usize) -> Option<Victim> {
        let len = self.list.len();
        if i >= len {
            return None;
        }
        if i >= self.sorted {
            let upto = (i + 1).max(2 * self.sorted).max(16).min(len);
            let rest = &mut self.list[self.sorted..];
            let k = upto - self.sorted;
            if k < rest.len() {
                rest.select_nth_unstable(k - 1);
            }
            rest[..k].sort_unstable();
            self.sorted = upto;
            // The prefix is sorted and holds the cheapest: none of the rest is cheaper than
            // its last.
            debug_assert!(self.list[..upto].is_sorted());
            debug_assert!(self.list[upto..].iter().all(|v| *v > self.list[upto - 1]));
        }
        Some(self.list[i])
    }
}

/// A started job's cost as a victim, besides its protected time left: its processors weighted
/// by its class's priority.
pub(super) fn fixed_cost(procs: u32, priority: u32) -> u64 {
    u64::from(procs) * (1 + u64::from(priority))
}

impl T3d {
    /// The cheapest victims `w` may take PEs from, in order, until they have `short`
    /// processors; `None` if all of them have fewer. The order and the jobs are
    /// [`T3d::victims_of`]'s: the jobs whose do-not-disturb time is over come in cost order
    /// from [`Protection`](super::protect::Protection) (their cost is fixed once that time is
    /// over), merged with the few still protected (the first pass only), ordered here.
    fn cheapest_victims(
        &self,
        w: &Waiting,
        now: Time,
        first_pass: bool,
        short: usize,
    ) -> Option<Vec<Victim>> {
        let prio = self.class(w.class).priority;
        let may = |c: usize| {
            let cls = self.class(c);
            cls.preemptible
                && if first_pass {
                    cls.priority <= prio
                } else {
                    cls.priority < prio
                }
        };
        let victim = |id: JobId, cost: u64| {
            let l = &self.loaded[&id];
            (!self.pe.any_marked(&l.pes)).then(|| (cost, id, self.dnd_end(l), l.req.procs))
        };
        let mut protected: Vec<Victim> = Vec::new();
        if first_pass {
            // [`victim`]'s entry, with one lookup of the job for its cost and its entry.
            for (id, (class, _, fixed)) in self.protection.protected() {
                if may(class) {
                    let l = &self.loaded[&id];
                    if !self.pe.any_marked(&l.pes) {
                        let dnd_end = self.dnd_end(l);
                        let left = (dnd_end - now).max(Dur::ZERO).as_secs() as u64;
                        protected.push((fixed + left, id, dnd_end, l.req.procs));
                    }
                }
            }
            protected.sort_unstable();
        }
        let mut over = (self.protection.over_by_cost())
            .filter(|&(_, _, class)| may(class))
            .filter_map(|(cost, id, _)| victim(id, cost))
            .peekable();
        let mut protected = protected.into_iter().peekable();
        let (mut chosen, mut have) = (Vec::new(), 0);
        while have < short {
            let next = match (over.peek(), protected.peek()) {
                (Some(a), Some(b)) if b < a => protected.next(),
                (Some(_), _) => over.next(),
                (None, _) => protected.next(),
            };
            let v = next?;
            have += v.3 as usize;
            chosen.push(v);
        }
        Some(chosen)
    }

    /// [`T3d::cheapest_victims`] from the whole list of [`T3d::victims_of`], for debug builds
    /// to check it against.
    #[cfg(debug_assertions)]
    fn cheapest_victims_plain(
        &self,
        w: &Waiting,
        now: Time,
        first_pass: bool,
        short: usize,
    ) -> Option<Vec<Victim>> {
        let mut victims = self.victims(w, now, first_pass);
        let (mut chosen, mut have) = (Vec::new(), 0);
        while have < short {
            let v = victims.nth(chosen.len())?;
            have += v.3 as usize;
            chosen.push(v);
        }
        Some(chosen)
    }

    /// Jobs that `w` may take PEs from ([`T3d::victims_of`]).
    fn victims(&self, w: &Waiting, now: Time, first_pass: bool) -> RefMut<'_, Victims> {
        self.victims_of(self.class(w.class).priority, now, first_pass)
    }

    /// Jobs that a waiting job of priority `prio` may take PEs from, taken cheapest first
    /// with [`Victims::nth`]. The list lives in [`T3d::victim_cache`], borrowed until the
    /// answer is dropped.
    pub(super) fn victims_of(&self, prio: u32, now: Time, first_pass: bool) -> RefMut<'_, Victims> {
        let key = (self.epoch, now, first_pass, prio);
        let mut cache = self.victim_cache.borrow_mut();
        if cache
            .first()
            .is_some_and(|(k, _)| (k.0, k.1) != (key.0, key.1))
        {
            cache.clear();
        }
        if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
            return RefMut::map(cache, |c| &mut c[i].1);
        }
        let may: Vec<bool> = (self.cfg.classes.iter())
            .map(|c| {
                c.preemptible
                    && if first_pass {
                        c.priority <= prio
                    } else {
                        c.priority < prio
                    }
            })
            .collect();
        let mut v: Vec<(u64, JobId, Time, u32)> = Vec::new();
        // With no started job of a class it may preempt, no walk over the loaded jobs.
        if (may.iter().zip(&self.started_by_class)).any(|(&may, &started)| may && started > 0) {
            v.reserve(self.loaded.len());
            // The cheap tests first: the earmarks are read only for a job that passes them.
            let mut take = |id: JobId, l: &Loaded| {
                let dnd_end = self.dnd_end(l);
                if (!first_pass && dnd_end > now) || self.pe.any_marked(&l.pes) {
                    return;
                }
                let left = (dnd_end - now).max(Dur::ZERO).as_secs() as u64;
                let c = self.class(l.class);
                // Nodes taken, weighted by the victim's priority, plus its protected time left.
                v.push((
                    l.req.procs as u64 * (1 + c.priority as u64) + left,
                    id,
                    dnd_end,
                    l.req.procs,
                ));
            };
            if first_pass {
                for (&id, l) in &self.loaded {
                    if l.started && may[l.class] {
                        take(id, l);
                    }
                }
            } else {
                // Only jobs whose do-not-disturb time is over qualify: those the protection
                // keeps (all started, all loaded), not every loaded job.
                for (id, class) in self.protection.over_jobs() {
                    if may[class] {
                        take(id, &self.loaded[&id]);
                    }
                }
            }
        }
        // Sorted only as far as [`Victims::nth`] is asked.
        let procs = v.iter().map(|v| u64::from(v.3)).sum();
        cache.push((
            key,
            Victims {
                list: v,
                sorted: 0,
                procs,
            },
        ));
        RefMut::map(cache, |c| &mut c.last_mut().expect("just pushed").1)
    }

    /// Free PEs `w` may load on now, if enough: the lowest-numbered ones, or its own PEs when
    /// it must come back where it was.
    pub(super) fn free_fit(&self, w: &Waiting) -> Option<PeSet> {
        match &w.home {
            None => (self.pe.open_count() >= w.req.procs).then(|| self.pe.lowest_open(w.req.procs)),
            Some(home) => self.pe.all_open(home).then(|| home.clone()),
        }
    }

    /// PEs for `w`: free ones first, then the fewest cheapest victims. `None` if not enough.
    pub(super) fn assignment(
        &self,
        w: &Waiting,
        now: Time,
        first_pass: bool,
    ) -> Option<Assignment> {
        if let Some(home) = &w.home {
            return self.home_assignment(w, home, now, first_pass);
        }
        let need = w.req.procs as usize;
        let open = self.pe.open_count() as usize;
        if open >= need {
            return Some((self.pe.lowest_open(w.req.procs), Vec::new()));
        }
        let pass = if first_pass {
            Pass::Overdue
        } else {
            Pass::Rest
        };
        let all = self.victim_procs(w.class, pass, &self.bounds(), now, true);
        if open as u64 + all < need as u64 {
            return None; // even every victim would not make room
        }
        let chosen = self.cheapest_victims(w, now, first_pass, need - open);
        #[cfg(debug_assertions)]
        assert_eq!(
            chosen,
            self.cheapest_victims_plain(w, now, first_pass, need - open),
            "victims of job {} at {now:?}",
            w.req.id
        );
        let mut chosen = chosen?;
        let mut have = open + chosen.iter().map(|v| v.3 as usize).sum::<usize>();
        // Drop victims that turned out unnecessary, dearest first.
        for i in (0..chosen.len()).rev() {
            let p = chosen[i].3 as usize;
            if have - p >= need {
                have -= p;
                chosen.remove(i);
            }
        }
        // The lowest `need` PEs of the open ones and the victims', merged as runs.
        let open_pes = self.pe.lowest_open(open as u32);
        let victim_pes = |v: &Victim| &self.loaded[&v.1].pes;
        // Sized once: growing it run by run costs more than the merge.
        let mut runs: Vec<(u32, u32)> = Vec::with_capacity(
            open_pes.runs().len()
                + chosen
                    .iter()
                    .map(|v| victim_pes(v).runs().len())
                    .sum::<usize>(),
        );
        runs.extend_from_slice(open_pes.runs());
        for v in &chosen {
            runs.extend_from_slice(victim_pes(v).runs());
        }
        runs.sort_unstable();
        let mut pes = PeSet::new();
        let mut left = need as u32;
        let mut reached = 0;
        for (s, e) in runs {
            let s = s.max(reached);
            if left == 0 || s >= e {
                continue;
            }
            let e = e.min(s + left);
            pes.push_sorted(s, e);
            left -= e - s;
            reached = e;
        }
        Some((
            pes,
            chosen.into_iter().map(|(_, id, d, _)| (id, d)).collect(),
        ))
    }

    /// The assignment of a job that must come back on `home`, its PEs before its preemption:
    /// every job on them must be a victim `w` may take PEs from.
    fn home_assignment(
        &self,
        w: &Waiting,
        home: &PeSet,
        now: Time,
        first_pass: bool,
    ) -> Option<Assignment> {
        if self.pe.any_marked_or_down(home) {
            return None;
        }
        let victims = self.victims(w, now, first_pass);
        let mut chosen: Vec<(JobId, Time)> = Vec::new();
        for &(s, e) in home.runs() {
            for (_, _, h) in self.pe.holders(s, e) {
                match h {
                    // Still swapping some job out: not yet.
                    Holder::Out(_) => return None,
                    Holder::Job(j) => {
                        if !chosen.iter().any(|c| c.0 == j) {
                            let &(_, _, dnd_end, _) = victims.list.iter().find(|v| v.1 == j)?;
                            chosen.push((j, dnd_end));
                        }
                    }
                }
            }
        }
        Some((home.clone(), chosen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Asking for the victims in any order of indices gives each one the fully sorted
        /// list has at that index.
        #[test]
        fn nth_is_the_fully_sorted_lists(
            costs in proptest::collection::vec((0u64..40, 1u32..9), 0..300),
            asks in proptest::collection::vec(0usize..320, 1..40),
        ) {
            let list: Vec<Victim> = costs
                .iter()
                .enumerate()
                .map(|(j, &(c, p))| (c, JobId(300 - j as u64), Time::from_secs(c as i64), p))
                .collect();
            let mut sorted = list.clone();
            sorted.sort_unstable();
            let procs = list.iter().map(|v| u64::from(v.3)).sum();
            let mut v = Victims { list, sorted: 0, procs };
            for &i in &asks {
                prop_assert_eq!(v.nth(i), sorted.get(i).copied());
            }
            // In order from the start, as a reservation takes them.
            let mut i = 0;
            while let Some(x) = v.nth(i) {
                prop_assert_eq!(x, sorted[i]);
                i += 1;
            }
            prop_assert_eq!(i, sorted.len());
        }
    }
}
