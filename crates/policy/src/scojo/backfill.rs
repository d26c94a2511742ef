//! Conservative backfilling inside a VM, non-type slice backfilling (§4.8) and, behind
//! `group_backfill`, case-1 groups while backfilling; `schedule` runs a decision's passes.

use std::cell::OnceCell;

use cosched_core::{Dur, JobId, Time};

use super::defer::Deferred;
use super::front::Fronts;
use super::glomarc::{self, Cand, Primary, Variant};
use super::vm::work_secs;
use super::{LONG, MEDIUM, SHORT, Scojo, Space};
use crate::Decision;
use crate::profile::Profile;

/// A VM's backfilling plan kept between passes: the profile of whole nodes once the
/// waiting jobs of its queue up to `placed` (held ones aside) have reserved their earliest
/// fit or been deferred (`defer.rs`) and the jobs whose fit was now have started, as of VM
/// clock `at` and the VM's `epoch`. A pass that stops early (no job left could start now)
/// leaves the rest of the queue to the next pass, which goes on from there.
///
/// A fresh pass at a later clock `v`, on the same state, makes the same plan, moved on to
/// `v`, as long as no node is released and no reservation starts in between (`next`, the
/// first of either after `at`): every fit it finds was found from `at` already, and
/// nothing starts. A job added at the queue's tail (which does not change the epoch) is
/// placed last in either. A start the pass itself makes leaves the plan valid when the
/// job's expected end is where its reservation ends: a fresh plan then has it as a release
/// of the same nodes at the same time, and each waiting job finds the same fit, since the
/// jobs started after it in the pass fitted beside it. Anything else that changes the VM (a
/// start elsewhere, an end, a group, a job held, released or leaving the queue, a node
/// down or up) moves the epoch, and the next pass makes the plan afresh.
#[derive(Clone, Debug)]
pub(super) struct BackfillPlan {
    pub(super) epoch: u64,
    pub(super) at: Time,
    profile: Profile,
    pub(super) deferred: Deferred,
    /// Jobs of the queue, from its head, that it has placed or deferred.
    pub(super) placed: usize,
    pub(super) next: Time,
}

impl Scojo {
    /// Conservative backfilling in VM `k`, then short jobs into its slice.
    /// Returns whether it placed a group (the caller then runs it again on the new state).
    pub(super) fn backfill(
        &mut self,
        now: Time,
        k: usize,
        slice_end: Time,
        out: &mut Vec<Decision>,
    ) -> bool {
        let free_at_first = self.vms[k].free;
        debug_assert_eq!(
            free_at_first as usize,
            self.vms[k].free_nodes_by_lanes().count(),
            "free nodes of VM {k}"
        );
        debug_assert!(
            self.vms[k]
                .free_nodes()
                .eq(self.vms[k].free_nodes_by_lanes()),
            "free node bits of VM {k}"
        );
        // Every start below (alone, in a group, or as a guest) takes at least one free node
        // now: with none there is nothing to decide, and the profile need not be built (a
        // kept plan stays as it is).
        if free_at_first == 0 {
            return false;
        }
        // Starts take the lowest free nodes, listed when a start needs them: most passes
        // start nothing, and a start's nodes stop being free at once (`Vm::set_lane`), so the
        // lowest ones left are the next start's.
        let mut free_n = free_at_first;
        let left = slice_end - now;
        // Guests: waiting jobs of the other queues that fit the slice and the free nodes.
        // The pass starts only jobs of this VM's queue, so the other queues are the same
        // after it, and the guests are listed only when the pass gets to them.
        let guest = self
            .guests(k, left, free_at_first)
            .fold((u32::MAX, Dur::MAX), |(n, d), (_, s)| {
                (n.min(s.nodes), d.min(s.dur))
            });
        let grouping = self.cfg.group_backfill && k != SHORT && self.cfg.variant != Variant::Ssp;
        let v = self.vms[k].vnow(now);
        let epoch = self.vms[k].epoch;
        let kept = self.vms[k].backfill.take().filter(|p| {
            let moved_on = v > p.at && v < p.next;
            !grouping && p.epoch == epoch && (v == p.at || moved_on)
        });
        let from = kept.as_ref().map_or(0, |p| p.placed);
        let queue: Vec<JobId> = self.vms[k].queue[from..].to_vec();
        // Each job's space (`None` for a held job, which no pass places).
        let spaces: Vec<Option<Space>> = queue
            .iter()
            .zip(&self.vms[k].queue.spaces()[from..])
            .map(|(id, s)| (!self.held.contains(id)).then_some(*s))
            .collect();
        // A start needs its nodes free from now for its estimate: once no waiting job left
        // in the queue and no guest can have that, no later reservation can change what
        // starts now (reservations only take free nodes away). The test is made on the
        // Pareto front of the jobs left ([`Fronts`]), which answers it exactly. Grouping
        // while backfilling starts jobs on fewer nodes than space sharing, so it walks the
        // whole queue. A kept plan goes on from the first job it has not placed.
        let need = |s: &Option<Space>| {
            if grouping {
                Some((0, Dur::ZERO))
            } else {
                s.map(|s| (s.nodes, s.dur))
            }
        };
        // Reservations only take free nodes away: when neither the fewest nodes a job left
        // needs nor a guest's fit the free nodes, no job can start now, whatever the profile
        // holds, so neither it nor the fronts are built.
        //
        // And the longest window a start now in this pass can take: a waiting job's on at
        // most the free nodes (starts only take free nodes away), or a guest's (at most the
        // slice's rest). A reservation from its end on can change a start now only through
        // the fits of the jobs after it, so placements from there are deferred (`defer.rs`).
        let (fewest, longest_start) =
            spaces
                .iter()
                .fold((u32::MAX, Dur::ZERO), |(fewest, longest), s| {
                    let fewest = need(s).map_or(fewest, |(n, _)| fewest.min(n));
                    match s {
                        Some(s) if s.nodes <= free_at_first => (fewest, longest.max(s.dur)),
                        _ => (fewest, longest),
                    }
                });
        if fewest > free_at_first && guest.0 > free_at_first {
            self.vms[k].backfill = kept;
            return false;
        }
        let far = v + if guest.0 <= free_at_first {
            longest_start.max(left)
        } else {
            longest_start
        };
        let mut later = Fronts::new(spaces.iter().map(need));
        debug_assert_eq!(later.fewest_nodes(0), fewest);
        let (mut profile, mut deferred, mut next) = match kept {
            Some(mut p) => {
                p.profile.advance(v);
                (p.profile, p.deferred, p.next)
            }
            None => {
                let mut releases: Vec<(Time, u32)> = Vec::new();
                self.release_counts(k, v, &mut releases);
                let next = releases
                    .iter()
                    .map(|&(t, _)| t)
                    .find(|&t| t > v)
                    .unwrap_or(Time::MAX);
                let mut profile = Profile::default();
                profile.rebuild(v, free_at_first, releases.into_iter());
                (profile, Deferred::default(), next)
            }
        };
        // Whether the plan, once every job has its place, is the one a fresh pass would make
        // from the new state: each start's expected end must be where its reservation ends.
        let mut keep = !grouping;
        let may_start = |(n, d): (u32, Dur), free: u32, profile: &Profile| {
            n <= free && profile.fits_at_start(n, d)
        };
        // The test reads the profile only from its start for the longest need it checked
        // (`reach`), and its answer for the same front and free nodes stands until a
        // reservation starts within that reach: most reservations of a long queue lie
        // further ahead, so the test is made again only when one does or the front changes.
        let start = v;
        let mut known: Option<(usize, u32, Dur)> = None;
        // Jobs of the pass's queue placed (or passed over, held) and started.
        let waiting = queue.len();
        let (mut done, mut started) = (waiting, 0);
        // The earliest fits found so far in this pass: a later job of as many nodes or more
        // and no shorter estimate fits nowhere before them (`floor.rs`).
        let mut floors = std::mem::take(&mut self.floors);
        floors.clear();
        for (pos, id) in queue.into_iter().enumerate() {
            if known.is_none_or(|(f, n, _)| f != later.id(pos) || n != free_n) {
                // The later jobs' reservations only matter to starts now, and those need a
                // free node.
                let (queued, reach) = later.may_start(pos, free_n, &profile);
                if free_n == 0 || !queued && !may_start(guest, free_n, &profile) {
                    done = pos;
                    break;
                }
                let reach = if guest.0 <= free_n {
                    reach.max(guest.1)
                } else {
                    reach
                };
                known = Some((later.id(pos), free_n, reach));
            }
            let Some(Space {
                ppn, nodes, dur, ..
            }) = spaces[pos]
            else {
                continue;
            };
            let floor = floors.floor(nodes, dur);
            if !grouping
                && self.defer
                && let Some(bound) = floor
                && bound != Time::MAX
                && bound >= far
            {
                deferred.push(nodes, dur, bound);
                continue;
            }
            let search = |profile: &Profile| match floor {
                None => profile.earliest(nodes, dur),
                Some(Time::MAX) => None,
                Some(floor) => profile.earliest_within(nodes, dur, floor, Time::MAX),
            };
            let mut found = search(&profile);
            // A fit whose window reaches the horizon is the true one only once the deferred
            // jobs it could meet are placed; beyond any start now's window it is deferred
            // instead (its true fit is no earlier).
            while let Some((at, _)) = found
                && at + dur > deferred.horizon()
            {
                if at >= far {
                    break;
                }
                deferred.place_before(at + dur, &mut profile, |n, d, at| {
                    floors.found(n, d, at.unwrap_or(Time::MAX));
                    if let Some(at) = at {
                        next = next.min(at);
                        if known.is_some_and(|(_, _, reach)| at - start < reach) {
                            known = None;
                        }
                    }
                });
                found = search(&profile);
            }
            debug_assert!(
                !deferred.is_empty() || found == profile.earliest(nodes, dur),
                "floor of {id}"
            );
            floors.found(nodes, dur, found.map_or(Time::MAX, |(at, _)| at));
            let Some((at, i)) = found else {
                continue;
            };
            if at + dur > deferred.horizon() {
                deferred.push(nodes, dur, at);
                continue;
            }
            if grouping
                && !(at <= v && free_n >= nodes)
                && let Some(m) = self.backfill_group(now, k, id, &profile, free_n as usize)
            {
                let ppn = self.group_ppn(&self.jobs[&id]);
                let ratio = self.fairness(k, (id, ppn), &m, now);
                self.place_group(now, k, id, ppn, true, &m, out);
                self.stats.worst_fair_ratio = self.stats.worst_fair_ratio.max(ratio);
                return true;
            }
            profile.reserve(i, dur, nodes);
            if known.is_some_and(|(_, _, reach)| at - start < reach) {
                known = None;
            }
            if at <= v && free_n >= nodes {
                let take: Vec<u32> = self.vms[k].free_nodes().take(nodes as usize).collect();
                debug_assert_eq!(take.len(), nodes as usize, "free nodes of VM {k}");
                free_n -= nodes;
                keep &= self.start_planned(now, k, id, &take, ppn, v, dur, out);
                next = next.min(v + dur);
                started += 1;
            } else {
                next = next.min(at);
            }
        }
        // Non-type slice backfilling (seed 001, §4.8): waiting jobs of another type may run
        // in this slice "only until the end of the slice" and "if they do not delay any job
        // of the slice type or of their own type". They must fit the profile of this VM now
        // (conservative backfilling: no reservation of the slice type moves) and their
        // estimate at their slowdown must end before the slice does. Leaving their own queue
        // early cannot delay a job of their own type: it only frees that VM's profile.
        // Short jobs first (their slice is the rarest), then the other of medium and long.
        // Preempted jobs are not backfilled: they keep their cores in their own VM. (The
        // short slice takes no guests: `guests` is empty there.) When the pass stopped
        // early, no guest can start either.
        let guests: Vec<(JobId, Space)> = if done < waiting || guest.0 > free_n {
            Vec::new()
        } else {
            self.guests(k, left, free_at_first)
                .map(|(id, s)| (id, *s))
                .collect()
        };
        for (id, space) in guests {
            let Space {
                ppn, nodes, dur, ..
            } = space;
            if free_n < nodes {
                continue;
            }
            if v + dur > deferred.horizon() {
                deferred.place_before(v + dur, &mut profile, |_, _, at| {
                    if let Some(at) = at {
                        next = next.min(at);
                    }
                });
            }
            if profile.reserve_at(v, dur, nodes) {
                let take: Vec<u32> = self.vms[k].free_nodes().take(nodes as usize).collect();
                debug_assert_eq!(take.len(), nodes as usize, "free nodes of VM {k}");
                free_n -= nodes;
                keep &= self.start_planned(now, k, id, &take, ppn, v, dur, out);
                next = next.min(v + dur);
            }
        }
        self.floors = floors;
        if keep {
            let vm = &mut self.vms[k];
            // A deferred job's reservation starts at its bound or later.
            let next = next.min(deferred.horizon());
            vm.backfill = Some(BackfillPlan {
                epoch: vm.epoch,
                at: v,
                profile,
                deferred,
                placed: from + done - started,
                next,
            });
        }
        false
    }

    /// The waiting jobs of the other queues that could backfill into VM `k`'s slice, in the
    /// order they are offered (short jobs first): not held, on at most `free` nodes, their
    /// estimate within the `left` of the slice. The short slice takes none.
    fn guests(&self, k: usize, left: Dur, free: u32) -> impl Iterator<Item = (JobId, &Space)> {
        let other = if k == MEDIUM { LONG } else { MEDIUM };
        let queues = if k == SHORT { 0..0 } else { 0..2 };
        queues
            .flat_map(move |i| self.vms[[SHORT, other][i]].queue.with_spaces())
            .filter(move |&(id, s)| s.dur <= left && s.nodes <= free && !self.held.contains(&id))
    }

    /// Starts job `id` on whole free nodes `take` of VM `k` where the backfilling plan
    /// reserved it `dur` from VM time `v`. Returns whether its expected end is where that
    /// reservation ends, as a plan made afresh would have it (a job whose slowdown on a node
    /// it fills less is higher, or of no length, is not).
    #[allow(clippy::too_many_arguments)]
    fn start_planned(
        &mut self,
        now: Time,
        k: usize,
        id: JobId,
        take: &[u32],
        ppn: u32,
        v: Time,
        dur: Dur,
        out: &mut Vec<Decision>,
    ) -> bool {
        let seats = self.ssp_seats(&self.jobs[&id], take, ppn);
        self.launch(now, k, id, seats, out);
        dur > Dur::ZERO && self.expected_end(&self.jobs[&id], v) == v + dur
    }

    pub(super) fn schedule(&mut self, now: Time, out: &mut Vec<Decision>) {
        let Some(s) = self.slice else { return };
        if self.vms[s.kind].active_since.is_none() {
            return;
        }
        let k = s.kind;
        if k != SHORT && self.cfg.variant != Variant::Ssp {
            let mut guard = 0;
            while guard < 1000 && self.try_group(now, k, out) {
                guard += 1;
            }
        }
        let mut guard = 0;
        while guard < 1000 && self.backfill(now, k, s.end, out) {
            guard += 1;
        }
    }

    /// Case 1 while backfilling (§4.5: "a similar algorithm is applied when attempting to
    /// backfill jobs. However, only Case 1, Case 4, and Case 5 are applied"), behind option
    /// `group_backfill` (off by default: an experiment): waiting job `id`, which cannot start
    /// alone now, as the primary of a group of waiting jobs, if the group's nodes, held until
    /// its last member's expected end, fit the conservative profile now (no reservation of
    /// an earlier job moves) and it passes the fairness check. Returns the matched jobs.
    pub(super) fn backfill_group(
        &self,
        now: Time,
        k: usize,
        id: JobId,
        profile: &Profile,
        free: usize,
    ) -> Option<Vec<(Cand, u32)>> {
        let a = &self.jobs[&id];
        let ppn = self.group_ppn(a);
        let a_nodes = a.req.procs.div_ceil(ppn);
        if a_nodes as usize > free {
            return None;
        }
        let v = self.vms[k].vnow(now);
        let spare = (free - a_nodes as usize) as f64;
        let exceed = (spare / f64::from(a_nodes.max(1))).min(self.cfg.matched_exceed_prim);
        let a_self = self.self_sl(a, ppn.min(a.req.procs));
        let prim = Primary {
            size: a.req.procs,
            ppn,
            nodes: a_nodes,
            rem: work_secs(a.left(v)),
        };
        let mut cands: Vec<(Cand, u32)> = Vec::new();
        for (pos, &w) in self.vms[k].queue.iter().enumerate() {
            if w == id || self.held.contains(&w) {
                continue;
            }
            let c = &self.jobs[&w];
            let cp = self.group_ppn(c);
            cands.push((self.cand(a, a_self, c, cp, pos as f64, v), cp));
        }
        let only: Vec<Cand> = cands.iter().map(|x| x.0).collect();
        let ppn_of = |cid: JobId| cands.iter().find(|x| x.0.id == cid).map_or(1, |x| x.1);
        let base = OnceCell::new();
        let g = glomarc::form(&prim, &only, &self.params(exceed), None, &mut |m| {
            let slq = m
                .iter()
                .map(|c| c.sl_prim)
                .fold(f64::from(a_self) / 1000.0, f64::max);
            let dur = m
                .iter()
                .map(|c| c.rem * c.sl)
                .fold(prim.rem * slq, f64::max);
            let on: u32 = m.iter().map(|c| c.nodes).sum();
            let nodes = a_nodes + on.saturating_sub(a_nodes);
            if nodes as usize > free
                || !profile
                    .clone()
                    .reserve_at(v, Dur::from_secs_f64(dur), nodes)
            {
                return false;
            }
            let with: Vec<(Cand, u32)> = m.iter().map(|c| (*c, ppn_of(c.id))).collect();
            self.fairness_from(&base, k, (id, ppn), &with, now, 1.0) <= 1.0
        })
        .ok()?;
        Some(g.matched.iter().map(|c| (*c, ppn_of(c.id))).collect())
    }
}
