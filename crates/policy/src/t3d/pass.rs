//! The two passes of a T3D decision over the waiting jobs (the overdue ones, then the rest
//! within the processor limits), and how a pass finds the next job that may act without
//! visiting the thousands that cannot.

use std::cell::OnceCell;
use std::cmp::Reverse;

use cosched_core::{JobId, Time};

use super::{Earmark, Pass, PassKey, T3d, Waiting};
use crate::Decision;

/// Processors held by loaded and earmarked jobs ([`T3d::usage`]).
struct Usage {
    total: u64,
    /// Of one class.
    class: u64,
    /// Of large jobs.
    large: u64,
}

/// Where a pass stands ([`T3d::pass`]).
struct Cursor {
    pass: Pass,
    /// Jobs that joined the waiting ones from this count on are not this pass's.
    joined_before: u64,
    /// Jobs earmarked when the pass began (not this pass's).
    marked: Vec<JobId>,
    /// The last job visited: `(priority, since, id)`.
    after: Option<(u32, Time, JobId)>,
    /// The epoch the lanes' answers were found at.
    epoch: Option<u64>,
    /// Each lane's first job after `after` that may act, once asked.
    next: Vec<Option<Option<PassKey>>>,
}

/// What [`T3d::bounds`] says.
pub(super) struct Bounds {
    open: u64,
    reservation: Option<Option<u32>>,
    /// Started jobs with PEs earmarked: `(job, class, procs)`, found on first need
    /// ([`T3d::marked`]): most lanes are settled by a bound that does not read them.
    marked: OnceCell<Vec<(JobId, usize, u32)>>,
}

impl T3d {
    /// Processors held by loaded and earmarked jobs: in total, of `class`, and of large jobs.
    fn usage(&self, class: usize) -> Usage {
        debug_assert_eq!(self.marked_procs, self.count_marked_procs());
        let (total, by_class, large) = &self.marked_procs;
        Usage {
            total: self.loaded_procs + total,
            class: self.loaded_by_class[class] + by_class[class],
            large: self.loaded_large + large,
        }
    }

    /// The job, large-job, class and system limits. A limit smaller than the job itself only
    /// asks that the job runs alone in its category, so that no job waits forever.
    fn within_limits(&self, w: &Waiting) -> bool {
        let Usage {
            total,
            class: in_class,
            large,
        } = self.usage(w.class);
        let p = w.req.procs as u64;
        let disk = if w.on_disk {
            self.disk_procs - p
        } else {
            self.disk_procs
        };
        let fits =
            |used: u64, limit: u32| used + p <= limit as u64 || (used == 0 && p > limit as u64);
        p <= self.cfg.job_limit as u64
            && fits(in_class, self.class(w.class).proc_limit)
            && (w.req.procs < self.cfg.large_job || fits(large, self.cfg.large_limit))
            && fits(total + disk, self.cfg.system_limit)
    }

    /// The widest job of `class` (on disk or not) that [`T3d::within_limits`] may accept with
    /// this usage: each limit accepts every width up to some bound, or every width while
    /// nothing of its category is loaded. For a job on disk the system limit is no bound on
    /// its width (its own PEs already count): once the limit is exceeded it accepts only a
    /// job of exactly the processors counted, so this is an upper bound; whoever uses it
    /// still asks [`T3d::within_limits`].
    fn widest_within_limits(&self, class: usize, on_disk: bool) -> u64 {
        let Usage {
            total,
            class: in_class,
            large,
        } = self.usage(class);
        let room = |used: u64, limit: u32| {
            if used == 0 {
                u64::MAX
            } else {
                (limit as u64).saturating_sub(used)
            }
        };
        let in_class = room(in_class, self.class(class).proc_limit);
        // A job narrower than `large_job` is not a large one.
        let as_large =
            room(large, self.cfg.large_limit).max((self.cfg.large_job as u64).saturating_sub(1));
        let others = (self.cfg.job_limit as u64).min(in_class).min(as_large);
        let all = total + self.disk_procs;
        let in_system = match on_disk {
            false => room(all, self.cfg.system_limit),
            true if all <= self.cfg.system_limit as u64 => u64::MAX,
            // Over the limit already: only the job that is all of it may come back.
            true if all <= others => all,
            true => 0,
        };
        others.min(in_system)
    }

    /// Waiting jobs not held and not earmarked, in (priority, waiting time) order.
    pub(super) fn ordered(&self, filter: impl Fn(&Waiting) -> bool) -> Vec<JobId> {
        let mut v: Vec<&Waiting> = self
            .waiting
            .values()
            .filter(|w| {
                !self.held.contains(&w.req.id) && !self.earmarks.iter().any(|e| e.job == w.req.id)
            })
            .filter(|w| filter(w))
            .collect();
        v.sort_by_key(|w| (Reverse(self.class(w.class).priority), w.since, w.req.id));
        v.iter().map(|w| w.req.id).collect()
    }

    /// Whether debug builds check the lanes and timers against the plain walk now: while at
    /// most a few hundred jobs wait. The check is the plain walk itself, and over a whole
    /// trace's queue of thousands it would cost debug builds (the tests that run whole
    /// traces) what the lanes save; the runs that drive every rule on purpose (a few hundred
    /// jobs at most) are checked at every pass.
    #[cfg(debug_assertions)]
    pub(super) fn checked(&self) -> bool {
        self.waiting.len() <= 256
    }

    #[cfg(debug_assertions)]
    fn overdue(&self, w: &Waiting, now: Time) -> bool {
        now - w.since >= self.class(w.class).wait
    }

    /// One pass over the waiting jobs (the overdue ones, or all) not held and not earmarked
    /// when it begins, in the order of [`T3d::ordered`]: each job in turn is loaded, given a
    /// reservation or PEs to be freed for it, or passed over.
    ///
    /// A pass is a function of the state and the time. One that did nothing is followed by
    /// passes that do nothing until the epoch moves or time crosses what the pass reads
    /// ([`T3d::pass_changes`]): those are not made.
    ///
    /// Most of a long queue can do nothing: a job needs its width in open PEs, or in open
    /// PEs and those of the jobs it may preempt, and within the limits. Each of these accepts
    /// every width up to a bound that depends on the job's class, so the pass asks each lane
    /// for its first job after the last one visited that is narrow enough
    /// ([`T3d::lane_next`]), visits the first of those in pass order with the same code that
    /// visits every job, and asks again only the lanes whose answer that visit changed; the
    /// jobs passed over would have done nothing. Debug builds check it: every job of the
    /// plain order that the lanes pass over is asked whether it would act ([`T3d::acts`]).
    pub(super) fn pass(&mut self, pass: Pass, now: Time, out: &mut Vec<Decision>) {
        let kind = pass as usize;
        if self.quiet[kind].is_some_and(|(epoch, until)| epoch == self.epoch && now < until) {
            #[cfg(debug_assertions)]
            if self.checked() {
                for id in self.ordered(|w| pass == Pass::Rest || self.overdue(w, now)) {
                    assert!(
                        !self.acts(pass, id, now),
                        "{pass:?} pass at {now:?} skipped, but job {id} acts"
                    );
                }
            }
            return;
        }
        let epoch = self.epoch;
        // The buffers of the last pass, reused.
        let (mut next, mut marked) = std::mem::take(&mut self.pass_buffers);
        next.clear();
        next.resize(self.lanes.len(), None);
        marked.clear();
        marked.extend(self.earmarks.iter().map(|e| e.job));
        let mut cursor = Cursor {
            pass,
            joined_before: self.joins,
            marked,
            after: None,
            epoch: None,
            next,
        };
        #[cfg(debug_assertions)]
        let (plain, mut seen) = (
            self.checked()
                .then(|| self.ordered(|w| pass == Pass::Rest || self.overdue(w, now))),
            0,
        );
        loop {
            let found = self.next_in_pass(&mut cursor, now);
            #[cfg(debug_assertions)]
            if let Some(plain) = &plain {
                let upto = found.map_or(plain.len(), |(_, _, id)| {
                    seen + plain[seen..]
                        .iter()
                        .position(|&x| x == id)
                        .unwrap_or_else(|| {
                            panic!("{pass:?} pass at {now:?}: job {id} out of order")
                        })
                });
                for &id in &plain[seen..upto] {
                    assert!(
                        !self.acts(pass, id, now),
                        "{pass:?} pass at {now:?}: job {id} passed over, but it acts"
                    );
                }
                seen = upto + 1;
            }
            let Some((Reverse(prio), since, id)) = found else {
                break;
            };
            cursor.after = Some((prio, since, id));
            match pass {
                Pass::Overdue => self.visit_overdue(id, now, out),
                Pass::Rest => self.visit_rest(id, now, out),
            }
        }
        self.pass_buffers = (cursor.next, cursor.marked);
        if self.epoch == epoch {
            self.quiet[kind] = Some((epoch, self.pass_changes(pass, now)));
        }
    }

    /// When a pass that did nothing at `now` might do something with the state unchanged:
    /// when the next waiting job becomes overdue (the first pass), or the next started job's
    /// do-not-disturb time ends (the second).
    fn pass_changes(&self, pass: Pass, now: Time) -> Time {
        match pass {
            Pass::Overdue => (self.live_lanes.iter().copied())
                .filter_map(|l| {
                    let wait = self.class(l / 2).wait;
                    let since = self.lanes[l].first_since_after(now - wait)?;
                    Some(since + wait)
                })
                .min()
                .unwrap_or(Time::MAX),
            Pass::Rest => self.protection.next_end().unwrap_or(Time::MAX),
        }
    }

    /// The next job of the pass after the cursor that may act: the first in pass order of
    /// each lane's answer, asked again only for the lanes whose answer the cursor passed or
    /// since the state changed (the epoch moved).
    fn next_in_pass(&self, cursor: &mut Cursor, now: Time) -> Option<PassKey> {
        if cursor.epoch != Some(self.epoch) {
            cursor.epoch = Some(self.epoch);
            cursor.next.iter_mut().for_each(|n| *n = None);
        }
        let after = cursor
            .after
            .map(|(prio, since, id)| (Reverse(prio), since, id));
        let mut bounds: Option<Bounds> = None;
        let mut best: Option<PassKey> = None;
        // Only the lanes with a job can answer.
        for &l in &self.live_lanes {
            let stale = match cursor.next[l] {
                None => true,
                Some(found) => found.is_some_and(|k| after.is_some_and(|a| k <= a)),
            };
            if stale {
                let b = bounds.get_or_insert_with(|| self.bounds());
                cursor.next[l] = Some(self.lane_next(l, b, cursor, now));
            }
            if let Some(Some(k)) = cursor.next[l]
                && best.is_none_or(|b| k < b)
            {
                best = Some(k);
            }
        }
        best
    }

    /// What a waiting job of each class could get now, for the pass's bounds: open PEs, the
    /// reservation's holder (and its priority, if it waits), and the started jobs with PEs
    /// earmarked (which nobody may preempt), the last on first need.
    pub(super) fn bounds(&self) -> Bounds {
        Bounds {
            open: self.pe.open_count() as u64,
            reservation: self.earmarks.iter().find(|e| e.reservation).map(|e| {
                self.waiting
                    .get(&e.job)
                    .map(|x| self.class(x.class).priority)
            }),
            marked: OnceCell::new(),
        }
    }

    /// The started jobs with PEs earmarked, `(job, class, procs)`, of `b`.
    fn marked<'b>(&self, b: &'b Bounds) -> &'b [(JobId, usize, u32)] {
        b.marked.get_or_init(|| {
            // Only sums are taken over these: their order does not count.
            let mut marked: Vec<(JobId, usize, u32)> = self
                .occupants_all()
                .iter()
                .flatten()
                .filter_map(|j| {
                    let l = self.loaded.get(j)?;
                    l.started.then_some((*j, l.class, l.req.procs))
                })
                .collect();
            if self.earmarks.len() > 1 {
                marked.sort_unstable_by_key(|m| m.0);
                marked.dedup_by_key(|m| m.0);
            }
            marked
        })
    }

    /// The processors of the jobs a waiting job of `class` may preempt in this pass: the
    /// started jobs of the preemptible classes of lower priority (or equal, in the first
    /// pass), whose do-not-disturb time is over (in the second), none of whose PEs is
    /// earmarked — [`T3d::victims_of`]'s, without a walk over the loaded jobs. With `exact`
    /// false the earmarked ones are not taken off: an upper bound that reads no earmark.
    pub(super) fn victim_procs(
        &self,
        class: usize,
        pass: Pass,
        b: &Bounds,
        now: Time,
        exact: bool,
    ) -> u64 {
        let prio = self.class(class).priority;
        let first_pass = pass == Pass::Overdue;
        let may = |c: usize| {
            let cls = self.class(c);
            cls.preemptible && (cls.priority < prio || (first_pass && cls.priority == prio))
        };
        let counted = |c: usize| {
            if first_pass {
                self.started_by_class[c]
            } else {
                self.protection.over(c)
            }
        };
        let all: u64 = (0..self.cfg.classes.len())
            .filter(|&c| may(c))
            .map(counted)
            .sum();
        if !exact {
            return all;
        }
        let marked: u64 = self
            .marked(b)
            .iter()
            .filter(|&&(j, c, _)| may(c) && (first_pass || self.protection.is_over(j)))
            .map(|&(_, _, p)| u64::from(p))
            .sum();
        let procs = all - marked;
        debug_assert_eq!(procs, self.victims_of(prio, now, first_pass).procs);
        procs
    }

    /// The widest job of a lane of `class` (whose narrowest job has `narrowest` PEs) that may
    /// act: `limit`, or fewer when it needs the PEs of victims beyond the open ones. The
    /// victims' earmarked PEs are read only when the bound without them would let the lane's
    /// narrowest job act: otherwise no job of the lane acts with either bound.
    fn widest_with_victims(
        &self,
        (class, narrowest, limit): (usize, u32, u64),
        pass: Pass,
        b: &Bounds,
        now: Time,
    ) -> u64 {
        if limit <= b.open {
            return limit;
        }
        let loose = limit.min(b.open + self.victim_procs(class, pass, b, now, false));
        if u64::from(narrowest) > loose {
            return loose;
        }
        limit.min(b.open + self.victim_procs(class, pass, b, now, true))
    }

    /// Lane `l`'s first job after the cursor that is narrow enough to act in this pass and
    /// is the pass's (not held, not earmarked when the pass began, waiting since before it).
    fn lane_next(&self, l: usize, b: &Bounds, cursor: &Cursor, now: Time) -> Option<PassKey> {
        let lane = &self.lanes[l];
        if lane.is_empty() {
            return None;
        }
        let (class, on_disk) = (l / 2, l % 2 == 1);
        let cls = self.class(class);
        let prio = cls.priority;
        let mut from = match cursor.after {
            Some((p, ..)) if prio > p => return None,
            Some((p, since, id)) if prio == p => Some((since, id)),
            _ => None,
        };
        let until = match cursor.pass {
            Pass::Overdue => Some(now - cls.wait),
            Pass::Rest => None,
        };
        // No job of the lane is overdue yet: no bound is needed to say so.
        if until.is_some_and(|u| lane.earliest_since().is_none_or(|e| e > u)) {
            return None;
        }
        let job_limit = self.cfg.job_limit as u64;
        let narrowest = lane.narrowest();
        let widest = match cursor.pass {
            // Loads on open PEs; else, with no reservation of a class at least as urgent,
            // drops a lesser one, or takes it on open PEs and victims.
            Pass::Overdue => match b.reservation {
                Some(Some(h)) if h >= prio => job_limit.min(b.open),
                Some(_) => job_limit,
                None => {
                    self.widest_with_victims((class, narrowest, job_limit), cursor.pass, b, now)
                }
            },
            Pass::Rest => {
                let limit = self.widest_within_limits(class, on_disk);
                self.widest_with_victims((class, narrowest, limit), cursor.pass, b, now)
            }
        };
        let bound = widest.min(u64::from(u32::MAX - 1)) as u32;
        while let Some(((since, id), joined)) = lane.first(from, until, bound) {
            let ours = joined < cursor.joined_before
                && (self.held.is_empty() || !self.held.contains(&id))
                && !cursor.marked.contains(&id);
            if ours {
                return Some((Reverse(prio), since, id));
            }
            from = Some((since, id));
        }
        None
    }

    /// Whether job `id` would do anything if the pass visited it now, without doing it: the
    /// check of debug builds on the jobs [`T3d::pass`] passes over.
    #[cfg(debug_assertions)]
    fn acts(&self, pass: Pass, id: JobId, now: Time) -> bool {
        let w = &self.waiting[&id];
        match pass {
            Pass::Overdue => {
                if w.req.procs > self.cfg.job_limit {
                    return false;
                }
                if self.free_fit(w).is_some() {
                    return true;
                }
                if let Some(e) = self.earmarks.iter().find(|e| e.reservation) {
                    let holder = self
                        .waiting
                        .get(&e.job)
                        .map(|x| self.class(x.class).priority);
                    // Passed over, or it drops the lesser reservation.
                    return holder.is_none_or(|p| p < self.class(w.class).priority);
                }
                self.assignment(w, now, true).is_some()
            }
            Pass::Rest => self.within_limits(w) && self.assignment(w, now, false).is_some(),
        }
    }

    /// First pass, one job past its maximum wait: loaded on free PEs, or given the one
    /// reservation (free PEs and those of jobs it may preempt) unless a job of a class at
    /// least as urgent holds it.
    fn visit_overdue(&mut self, id: JobId, now: Time, out: &mut Vec<Decision>) {
        let w = self.waiting[&id].clone();
        if w.req.procs > self.cfg.job_limit {
            return;
        }
        if let Some(pes) = self.free_fit(&w) {
            // Another compatible set is free: no need for the reservation.
            self.retain_earmarks(|e| !(e.reservation && e.job == id));
            self.load(id, pes, now, out);
            return;
        }
        let current = self.earmarks.iter().find(|e| e.reservation).map(|e| e.job);
        if let Some(holder) = current {
            let holder_prio = self
                .waiting
                .get(&holder)
                .map(|x| self.class(x.class).priority);
            if holder_prio.is_some_and(|p| p >= self.class(w.class).priority) {
                return; // one reservation at a time
            }
            self.retain_earmarks(|e| !e.reservation);
        }
        if let Some((pes, _victims)) = self.assignment(&w, now, true) {
            self.earmarks.push(Earmark {
                job: id,
                pes,
                reservation: true,
            });
            self.remark();
        }
    }

    /// Second pass, one job: within the limits, loaded on free PEs, or given PEs of jobs of
    /// a lesser class, which are preempted for it.
    fn visit_rest(&mut self, id: JobId, now: Time, out: &mut Vec<Decision>) {
        let w = self.waiting[&id].clone();
        if !self.within_limits(&w) {
            return;
        }
        let Some((pes, victims)) = self.assignment(&w, now, false) else {
            return;
        };
        if victims.is_empty() {
            self.load(id, pes, now, out);
        } else {
            for (v, _) in victims {
                self.preempt(v, id, w.class, now, out);
            }
            self.earmarks.push(Earmark {
                job: id,
                pes,
                reservation: false,
            });
            self.remark();
        }
    }
}
