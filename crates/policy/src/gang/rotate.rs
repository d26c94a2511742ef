//! The rotation of the gang matrix: which jobs run while a row is active (its own, then
//! the others alternate scheduling lets in), the decisions that switch to it, and the
//! quantum timer.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use cosched_core::{Dur, JobId, PeSet, Time};

use super::{Bits, Gang, IdHasher, Member, SortedIds, Switch, TimerKind};
use crate::Decision;

/// Machines above this many PEs (64 words) test candidates against the active row's `busy`
/// in place ([`Gang::in_place`]); smaller ones copy it into the mask.
pub(super) const IN_PLACE_FROM_PES: u32 = 64 * 64;

/// Whether `bits` holds one of `pes`; a block of PEs (nearly every gang job) is tested
/// inline, without the out-of-line call of the general test for each candidate.
#[inline(always)]
fn meets(bits: &Bits, pes: &PeSet) -> bool {
    match *pes.runs() {
        [(s, e)] => !bits.range_clear(s, e),
        _ => bits.intersects_pes(pes),
    }
}

/// Sets `pes` in `bits`, a block of PEs inline (as [`meets`] tests it).
#[inline(always)]
fn put(bits: &mut Bits, pes: &PeSet) {
    match *pes.runs() {
        [(s, e)] => bits.set_range(s, e),
        _ => bits.set_pes(pes),
    }
}

/// The first and last PE of a job's PE set (not empty): the PEs [`Gang::compute_target`]
/// tests first.
#[inline(always)]
pub(super) fn ends(pes: &PeSet) -> [u32; 2] {
    let runs = pes.runs();
    [runs[0].0, runs[runs.len() - 1].1 - 1]
}

impl Gang {
    /// The jobs that should run while the active row is active: its own jobs, then (with
    /// alternate scheduling) the jobs running now that still fit, then other rows' jobs in
    /// row order after the active one. The answer, with the jobs it stops and runs, is
    /// `self.cache[self.active]` on return.
    fn target(&mut self) {
        if let Some(Some(s)) = self.cache.get(self.active)
            && s.version == self.version
        {
            if s.before == self.running {
                #[cfg(debug_assertions)]
                self.check_carried();
                return;
            }
            if self.same_target_for_running() {
                #[cfg(test)]
                {
                    self.reused_for_running += 1;
                    self.reused_beyond_clashing += u64::from(self.differs_beyond_clashing());
                }
                let s = self.cache[self.active].as_mut().expect("just read");
                s.from(&self.running);
                #[cfg(debug_assertions)]
                self.check_carried();
                return;
            }
        }
        if self.cache.len() <= self.active {
            self.cache.resize(self.active + 1, None);
        }
        // The row's stale entry lends its buffers: a miss allocates nothing either.
        let mut s = self.cache[self.active].take().unwrap_or(Switch {
            version: 0,
            before: SortedIds::default(),
            after: SortedIds::default(),
            stops: Vec::new(),
            goes: Vec::new(),
        });
        self.compute_target(&mut s.after);
        s.version = self.version;
        s.from(&self.running);
        self.cache[self.active] = Some(s);
    }

    /// Whether the active row's cached switch, of the current version, has the target a
    /// computation from the running set now would give, though it started from another
    /// running set. Without holds, the row's jobs are all chosen first and the candidates
    /// after them only ever meet a fuller mask and fewer free PEs, so a job's turn among
    /// the running jobs (ahead of its place in its row) changes the target only where it
    /// changes whether that job is chosen. The target `T` stays, one job of the difference
    /// at a time, when:
    /// - a job that ran and runs no more is not in `T` (it was turned away at its turn
    ///   among the running jobs, and is turned away again at its place in its row: skipping
    ///   a refusal leaves everything after it as it was), or is one of the row's own jobs
    ///   (chosen whatever runs);
    /// - a job that runs and did not is in `T` (it fitted at its place in its row, so it
    ///   fits at its earlier turn too, beside every job chosen in between: those were
    ///   chosen with it, so they share no PE with it and left PEs for it), or shares a PE
    ///   with the row's own jobs (turned away wherever it stands).
    ///
    /// After a change of the matrix the running set a row's turn starts from keeps changing
    /// for a cycle or more; where it changes only by such jobs, the switch holds.
    fn same_target_for_running(&self) -> bool {
        if self.held_members > 0 {
            return false;
        }
        let Some(Some(s)) = self.cache.get(self.active) else {
            return false;
        };
        let Some(row) = self.rows.get(self.active) else {
            return false;
        };
        let (busy, active, after) = (&row.busy, self.active, &s.after);
        let members = &self.members;
        let mut all = true;
        s.before.for_each_not_in(&self.running, |id| {
            all &= !after.contains(&id) || members.get(&id).is_some_and(|m| m.row == active)
        });
        all && {
            self.running.for_each_not_in(&s.before, |id| {
                all &= after.contains(&id)
                    || members
                        .get(&id)
                        .is_some_and(|m| busy.intersects_pes(&m.pes))
            });
            all
        }
    }

    /// Whether the running set differs from the active row's cached one by a job that does
    /// not share a PE with the row's jobs: a reuse only the membership of the target allows.
    #[cfg(test)]
    fn differs_beyond_clashing(&self) -> bool {
        let (Some(Some(s)), Some(row)) = (self.cache.get(self.active), self.rows.get(self.active))
        else {
            return false;
        };
        let clear =
            |id: JobId| (self.members.get(&id)).is_some_and(|m| !row.busy.intersects_pes(&m.pes));
        let mut any = false;
        s.before
            .for_each_not_in(&self.running, |id| any |= clear(id));
        self.running
            .for_each_not_in(&s.before, |id| any |= clear(id));
        any
    }

    /// A switch carried past a change of the matrix (see [`Gang::carry_arrival`]) is the one a
    /// fresh computation gives: checked on every reuse in debug builds, so the tests of every
    /// gang run check the carrying rules.
    #[cfg(debug_assertions)]
    fn check_carried(&mut self) {
        let mut fresh = SortedIds::default();
        self.compute_target(&mut fresh);
        let cached = &self.current().after;
        assert_eq!(
            &fresh, cached,
            "row {}'s cached target is stale",
            self.active
        );
    }

    /// The matrix just changed (`self.version` moved on from `old`) by a job on `pes` joining
    /// row `to`, or moving to it from row `from` (`from == to` for a new job). Every other
    /// row's cached switch stays valid where `pes` overlap that row's own jobs: those are
    /// taken first, so the job is turned away wherever it stands among the candidates, and
    /// every candidate after it sees the mask it would see without the job. A held job's PEs
    /// are in its row's `busy` but not in the mask, so with any hold nothing is carried.
    pub(super) fn carry_arrival(&mut self, old: u64, from: usize, to: usize, pes: &PeSet) {
        if self.held_members > 0 {
            return;
        }
        let version = self.version;
        for (r, s) in self.cache.iter_mut().enumerate() {
            if let Some(s) = s
                && s.version == old
                && r != from
                && r != to
                && self.rows[r].busy.intersects_pes(pes)
            {
                s.version = version;
            }
        }
    }

    /// The matrix just changed (`self.version` moved on from `old`) by job `id` leaving row
    /// `row`. Every other row's cached switch that turned the job away stays valid: the
    /// candidates after it saw the same mask and count of free PEs without it. It only no
    /// longer stops the job, which no longer runs.
    pub(super) fn carry_departure(&mut self, old: u64, row: usize, id: JobId) {
        let version = self.version;
        for (r, s) in self.cache.iter_mut().enumerate() {
            if let Some(s) = s
                && s.version == old
                && r != row
                && !s.after.contains(&id)
            {
                s.before.remove(id);
                s.stops.retain(|&j| j != id);
                s.version = version;
            }
        }
    }

    /// The switch [`Gang::target`] just computed or found.
    fn current(&self) -> &Switch {
        self.cache[self.active]
            .as_ref()
            .expect("target() fills the active row's entry")
    }

    /// The target of [`Gang::target`], into `chosen`.
    ///
    /// Without holds, on a machine of more than [`IN_PLACE_FROM_PES`] PEs, the PEs taken
    /// are the active row's `busy` (read in place) and the mask in `self.scratch` of the
    /// jobs alternate scheduling adds: the mask is not a copy of the row (on a machine of
    /// 80,000 PEs a copy is 1,250 words at every recomputation, where the added jobs are a
    /// few). The mask is all clear between calls: the added jobs' runs are cleared on the
    /// way out, which costs what setting them did.
    pub(super) fn compute_target(&mut self, chosen: &mut SortedIds) {
        chosen.clear();
        if self.rows.is_empty() {
            return;
        }
        let mut mask = std::mem::take(&mut self.scratch);
        debug_assert_eq!(mask.count(), 0, "the mask is clear between calls");
        let mut taken = std::mem::take(&mut self.taken);
        let mut free = self.pes;
        // Holds are rare: without any, no member needs looking up, and the row's jobs are
        // all chosen, so its `busy` holds their PEs (read in place, or copied into the mask).
        let none_held = self.held_members == 0;
        let row = &self.rows[self.active];
        let base = if none_held {
            for &(_, procs, _, _) in &row.entries {
                free -= procs;
            }
            // The row's ids kept in order: no sort of its jobs at each recomputation.
            chosen.copy_from(&row.ids);
            debug_assert!(
                row.ids.iter().eq({
                    let mut v = row.jobs.clone();
                    v.sort();
                    v
                }
                .iter())
            );
            // On a small machine the copy is a few words, less than a second test of
            // every candidate that clears the row (HPC2N's 240 PEs: callgrind counts more
            // instructions in place than with the copy).
            if self.in_place {
                Some(&row.busy)
            } else {
                mask.copy_from(&row.busy);
                None
            }
        } else {
            for (id, procs, _, pes) in &row.entries {
                if !self.members[id].held {
                    mask.set_pes(pes);
                    free -= procs;
                    chosen.push_unsorted(*id);
                }
            }
            chosen.sort();
            None
        };
        if self.alternate && free > 0 {
            let mut extra = std::mem::take(&mut self.extra);
            extra.clear();
            let members = &self.members;
            // Whether job `id` joins the target beside the active row; one body for the two
            // loops below, inlined: it runs for every candidate of every recomputed target.
            // A job already chosen (of the active row, or taken before) has its PEs in
            // `base` or `mask`, so the intersection alone turns it away: no lookup in either
            // list. Most candidates clash with the active row, and most clashes cover an end
            // of the job (its PEs are a block, and the row's jobs are blocks): the bits of
            // its first and last PE in `base` (or the whole `mask` on the copy path) turn
            // most away before the test of its runs, which decides what they leave open.
            // `mask` is tested only once it holds a job.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn consider(
                (id, procs, [first, last], pes): (JobId, u32, [u32; 2], &PeSet),
                base: Option<&Bits>,
                mask: &mut Bits,
                taken: &mut Vec<(u32, u32)>,
                free: &mut u32,
                extra: &mut Vec<JobId>,
                none_held: bool,
                members: &HashMap<JobId, Member, BuildHasherDefault<IdHasher>>,
            ) {
                debug_assert!(procs > 0, "a member holds PEs");
                debug_assert_eq!([first, last], ends(pes));
                let front = base.unwrap_or(&*mask);
                if procs <= *free
                    && !front.get(first)
                    && !front.get(last)
                    && !base.is_some_and(|b| meets(b, pes))
                    && (base.is_some() && extra.is_empty() || !meets(mask, pes))
                    && (none_held || !members[&id].held)
                {
                    put(mask, pes);
                    if base.is_some() {
                        taken.extend_from_slice(pes.runs());
                    }
                    *free -= procs;
                    extra.push(id);
                }
            }
            // Running jobs of the active row are in `chosen` already, which `consider` would
            // refuse; both sets are sorted, so one merge walk skips them without a member
            // lookup.
            let mut mine = chosen.iter().peekable();
            for &id in self.running.iter() {
                while mine.next_if(|&&c| c < id).is_some() {}
                if mine.next_if(|&&c| c == id).is_some() {
                    continue;
                }
                let m = &members[&id];
                let job = (id, m.req.procs, ends(&m.pes), &m.pes);
                consider(
                    job, base, &mut mask, &mut taken, &mut free, &mut extra, none_held, members,
                );
            }
            'rows: for k in 1..self.rows.len() {
                let r = (self.active + k) % self.rows.len();
                for (id, procs, ends, pes) in &self.rows[r].entries {
                    let job = (*id, *procs, *ends, pes);
                    consider(
                        job, base, &mut mask, &mut taken, &mut free, &mut extra, none_held, members,
                    );
                    if free == 0 {
                        break 'rows;
                    }
                }
            }
            chosen.merge(&mut extra);
            self.extra = extra;
        }
        if base.is_some() {
            for &(s, e) in &taken {
                mask.clear_range(s, e);
            }
        } else {
            mask.clear_all();
        }
        taken.clear();
        self.taken = taken;
        self.scratch = mask;
        #[cfg(debug_assertions)]
        assert_eq!(
            *chosen,
            self.target_by_definition(),
            "row {}'s target differs from its definition",
            self.active
        );
    }

    /// [`Gang::compute_target`] computed plainly, for the checks: a fresh mask of every
    /// chosen job's PEs, candidates in the same order, a member lookup for each.
    #[cfg(any(test, debug_assertions))]
    pub(super) fn target_by_definition(&self) -> SortedIds {
        let mut chosen = SortedIds::default();
        if self.rows.is_empty() {
            return chosen;
        }
        let mut mask = Bits::new(self.pes);
        let mut free = self.pes;
        for &id in &self.rows[self.active].jobs {
            let m = &self.members[&id];
            if !m.held {
                mask.set_pes(&m.pes);
                free -= m.req.procs;
                chosen.insert(id);
            }
        }
        if self.alternate {
            let others = (1..self.rows.len())
                .flat_map(|k| &self.rows[(self.active + k) % self.rows.len()].jobs);
            for &id in self.running.iter().chain(others) {
                let m = &self.members[&id];
                if !chosen.contains(&id)
                    && !m.held
                    && m.req.procs <= free
                    && !mask.intersects_pes(&m.pes)
                {
                    mask.set_pes(&m.pes);
                    free -= m.req.procs;
                    chosen.insert(id);
                }
            }
        }
        chosen
    }

    /// Sends the decisions that make the running set match [`Gang::target`], announces newly
    /// placed jobs, and keeps the quantum timer armed only when a switch would change something.
    fn reconcile(&mut self, now: Time, out: &mut Vec<Decision>) {
        if self.switching {
            self.announce_stopped(out);
            return;
        }
        self.target();
        self.apply_target(now, out);
    }

    /// The second half of [`Gang::reconcile`], once [`Gang::target`] has run.
    fn apply_target(&mut self, now: Time, out: &mut Vec<Decision>) {
        let Some(Some(s)) = self.cache.get(self.active) else {
            unreachable!("target() fills the active row's entry")
        };
        if !s.stops.is_empty() || !s.goes.is_empty() {
            // Who stops, then who goes, each in id order.
            out.extend(s.stops.iter().map(|&job| Decision::Suspend { job }));
            if self.fresh.is_empty() {
                // Every member leaves `fresh` only once announced, so each arriving job
                // just resumes, without a member lookup.
                out.extend(s.goes.iter().map(|&job| Decision::Resume { job }));
            } else {
                for &job in &s.goes {
                    let m = self.members.get_mut(&job).expect("target jobs are members");
                    if m.announced {
                        out.push(Decision::Resume { job });
                    } else {
                        m.announced = true;
                        out.push(Decision::Start {
                            job,
                            pes: m.pes.clone(),
                            slot: Some(m.row as u32),
                        });
                    }
                }
            }
            self.running.copy_from(&s.after);
        }
        self.announce_stopped(out);
        let runnable = self.members.len() - self.held_members;
        let needs_switching = self.rows.len() > 1 && self.running.len() < runnable;
        match self.pending {
            None if needs_switching => {
                self.set_timer(now + self.quantum, TimerKind::QuantumEnd, out)
            }
            Some((_, TimerKind::QuantumEnd)) if !needs_switching => self.pending = None,
            _ => {}
        }
    }

    /// Places the members not announced yet. Inlined for its test: every switch asks, and
    /// almost never has anyone to announce.
    #[inline(always)]
    fn announce_stopped(&mut self, out: &mut Vec<Decision>) {
        if !self.fresh.is_empty() {
            self.announce_fresh(out);
        }
    }

    fn announce_fresh(&mut self, out: &mut Vec<Decision>) {
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.sort();
        for job in fresh {
            let running = self.running.contains(&job);
            let Some(m) = self.members.get_mut(&job) else {
                continue;
            };
            if !m.announced && !running {
                m.announced = true;
                out.push(Decision::Place {
                    job,
                    pes: m.pes.clone(),
                    slot: Some(m.row as u32),
                });
            }
        }
    }

    fn set_timer(&mut self, at: Time, kind: TimerKind, out: &mut Vec<Decision>) {
        self.next_token += 1;
        self.pending = Some((self.next_token, kind));
        self.due = at;
        out.push(Decision::SetTimer {
            at,
            token: self.next_token,
        });
    }

    /// Makes `row` the active row: stops the jobs that must leave and, when that costs
    /// something, starts the arriving ones only after the context switch.
    pub(super) fn switch_to(&mut self, now: Time, row: usize, out: &mut Vec<Decision>) {
        self.pending = None;
        self.active = row;
        self.stats.slot_switches += 1;
        self.target();
        let stops = !self.current().stops.is_empty();
        if stops && self.context_switch > Dur::ZERO {
            self.stats.context_switches += 1;
            let s = self.cache[self.active].as_ref().expect("just computed");
            for &job in &s.stops {
                self.running.remove(job);
                out.push(Decision::Suspend { job });
            }
            self.switching = true;
            self.set_timer(now + self.context_switch, TimerKind::SwitchDone, out);
            self.announce_stopped(out);
        } else {
            if stops {
                self.stats.context_switches += 1;
            }
            // Not switching (callers check), so this is what `reconcile` would do, without
            // computing the target a second time.
            self.apply_target(now, out);
        }
    }

    /// The common tail of every event: place waiting jobs, then run what should run.
    pub(super) fn settle(&mut self, now: Time, out: &mut Vec<Decision>, active_gone: bool) {
        self.admit();
        if active_gone && !self.switching && !self.rows.is_empty() {
            let row = self.active;
            self.switch_to(now, row, out);
        } else {
            self.reconcile(now, out);
        }
    }
}
