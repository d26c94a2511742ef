//! Group matchmaking in a VM (§4.5, cases 1–3 and serial jobs): candidates, the open
//! running primaries, the search for the best group and its placement.

use std::cell::OnceCell;

use cosched_core::multicore::mul;
use cosched_core::{JobId, Milli, Time};

use super::glomarc::{self, Cand, Params, Primary};
use super::vm::{run_for, work_secs};
use super::{Job, Scojo, Seat, SlSelf, Space, Unformed};
use crate::Decision;

/// A waiting job as a group's matched candidate: its processes, and its processes per node,
/// nodes and work (s) in a group.
pub(super) struct Waiting {
    pub(super) id: JobId,
    pub(super) procs: u32,
    pub(super) ppn: u32,
    pub(super) nodes: u32,
    pub(super) rem: f64,
}

impl Scojo {
    /// The response time (s, from submission) a job would see running the rest of its
    /// estimate at slowdown `sl` in VM `k` from now.
    pub(super) fn predicted_response(&self, j: &Job, k: usize, sl: Milli, now: Time) -> f64 {
        let v = self.vms[k].vnow(now);
        let end = self.wall_at(k, v + run_for(j.left(v), sl), now);
        (end - j.req.submit).as_secs_f64()
    }

    /// A candidate matched job `c` (placed at `ppn` per node) beside primary `a`.
    pub(super) fn cand(
        &self,
        a: &Job,
        a_self: Milli,
        c: &Job,
        ppn: u32,
        key: f64,
        v: Time,
    ) -> Cand {
        let c_self = self.self_sl(c, ppn.min(c.req.procs));
        let rem = work_secs(c.left(v));
        let cos = self.model.cos(c.req.id, a.req.id);
        let cos_prim = self.model.cos(a.req.id, c.req.id);
        let with_self = f64::from(mul(c_self, cos)) / 1000.0;
        let with_self_prim = f64::from(mul(a_self, cos_prim)) / 1000.0;
        let (cos, cos_prim) = (f64::from(cos) / 1000.0, f64::from(cos_prim) / 1000.0);
        let (sl, sl_prim, pre_sl, pre_sl_prim) = match self.cfg.sl_self {
            SlSelf::Both => (with_self, with_self_prim, with_self, with_self_prim),
            SlSelf::Gain => (with_self, with_self_prim, cos, cos_prim),
            SlSelf::None => (cos, cos_prim, cos, cos_prim),
        };
        Cand {
            id: c.req.id,
            size: c.req.procs,
            nodes: c.req.procs.div_ceil(ppn),
            rem,
            sl,
            sl_prim,
            pre_sl,
            pre_sl_prim,
            key,
        }
    }

    pub(super) fn params(&self, exceed: f64) -> Params {
        Params {
            variant: self.cfg.variant,
            max_sl: f64::from(self.cfg.limits.max_sl) / 1000.0,
            min_gain: self.cfg.min_utilgain,
            block_size: self.cfg.block_size as usize,
            exceed,
            max_longer: self.cfg.max_matched_longer_prim.as_secs_f64(),
        }
    }

    /// Running jobs of VM `k` that can take a partner: individual, up to one process per
    /// processor on lane 0 of each node, lane 1 free. By increasing delay (predicted
    /// response over R_est), with that delay.
    pub(super) fn open_running(&self, k: usize, now: Time) -> Vec<(f64, JobId)> {
        let mut v: Vec<(f64, JobId)> = self.vms[k]
            .alloc
            .iter()
            .filter_map(|id| self.jobs.get(id).map(|j| (id, j)))
            .filter(|(_, j)| self.is_open(k, j))
            .map(|(&id, j)| (self.delay(k, j, now), id))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        v
    }

    /// The first `n` of [`Scojo::open_running`] (of the open jobs `open`), with the delays
    /// of only as many jobs as that needs. VM `k`'s clock runs at most as fast as the wall
    /// clock, so a job's predicted end is no earlier than now plus the rest of its run at
    /// its slowdown: that bound on its delay costs no walk of the slice timeline. Jobs are
    /// taken by increasing bound and their delays worked out until `n` are known of which
    /// the last (by delay, then id) is below the next bound: no job left can come before it.
    fn least_delayed(&self, k: usize, now: Time, open: &[JobId], n: usize) -> Vec<JobId> {
        if n == 0 {
            return Vec::new();
        }
        let v = self.vms[k].vnow(now);
        let by = |a: &(f64, JobId), b: &(f64, JobId)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        let mut bounds: Vec<(f64, JobId)> = open
            .iter()
            .map(|&id| {
                let j = &self.jobs[&id];
                let end = now + run_for(j.left(v), j.sl);
                ((end - j.req.submit).as_secs_f64() / j.r_est.max(1.0), id)
            })
            .collect();
        bounds.sort_by(by);
        let mut known: Vec<(f64, JobId)> = Vec::with_capacity(n + 1);
        for &(bound, id) in &bounds {
            if known.len() >= n {
                known.sort_by(by);
                known.truncate(n);
                if known[n - 1].0.total_cmp(&bound).is_lt() {
                    break;
                }
            }
            let d = self.delay(k, &self.jobs[&id], now);
            debug_assert!(bound <= d, "a delay below its bound: {d} < {bound}");
            known.push((d, id));
        }
        known.sort_by(by);
        known.truncate(n);
        let first: Vec<JobId> = known.into_iter().map(|(_, id)| id).collect();
        debug_assert_eq!(
            first,
            self.open_running(k, now)
                .iter()
                .take(n)
                .map(|&(_, id)| id)
                .collect::<Vec<_>>(),
            "the least delayed open jobs against all delays sorted"
        );
        first
    }

    /// The delay of running job `j` of VM `k`: its predicted response over R_est.
    fn delay(&self, k: usize, j: &Job, now: Time) -> f64 {
        self.predicted_response(j, k, j.sl, now) / j.r_est.max(1.0)
    }

    /// Whether allocated job `j` of VM `k` can take a partner (see [`Scojo::open_running`]).
    pub(super) fn is_open(&self, k: usize, j: &Job) -> bool {
        let vm = &self.vms[k];
        j.kind == k
            && j.group.is_none()
            && j.seats
                .iter()
                .all(|s| s.lane == 0 && vm.lanes[s.node as usize][1].is_none())
    }

    /// Tries to start the first waiting job of VM `k` in a group (§4.5 steps 1–4). Returns
    /// whether it did.
    pub(super) fn try_group(&mut self, now: Time, k: usize, out: &mut Vec<Decision>) -> bool {
        let vm = &self.vms[k];
        let Some(&h) = vm.queue.iter().find(|id| !self.held.contains(id)) else {
            return false;
        };
        let free = vm.free;
        // Step 1: low load, everything fits one process per node.
        if vm.queue.procs() <= u64::from(free) {
            self.stats.unformed.low_load += 1;
            return false;
        }
        let mut why = Unformed {
            tries: 1,
            ..Unformed::default()
        };
        // Every group needs a free node for its waiting primary or a running primary with
        // an open lane: with neither, no plan can be formed.
        if free == 0
            && !vm
                .alloc
                .iter()
                .any(|id| self.jobs.get(id).is_some_and(|j| self.is_open(k, j)))
        {
            why.no_room = 1;
            self.stats.unformed.add(&why);
            return false;
        }
        let v = vm.vnow(now);
        let head = &self.jobs[&h];
        // Space sharing's gain (case 5 / 4), if the head fits now.
        let Space {
            ppn: ppn_s,
            nodes: nodes_s,
            sl: sl_s,
            ..
        } = head.space;
        let ssp_gain = if nodes_s <= free {
            f64::from(ppn_s.min(head.req.procs)) / (f64::from(sl_s) / 1000.0) - 1.0
        } else {
            f64::NEG_INFINITY
        };
        // Candidate plans: (gain, primary, primary ppn, primary seats source, matched, lanes).
        struct Plan {
            gain: f64,
            primary: JobId,
            primary_ppn: u32,
            primary_waiting: bool,
            matched: Vec<(Cand, u32)>,
            /// Its fairness ratio, from the check it passed: a check that passes (≤ 1)
            /// never stopped early, so this is the ratio over every job it covers.
            ratio: f64,
        }
        let mut plans: Vec<Plan> = Vec::new();
        let waiting: Vec<JobId> = vm
            .queue
            .iter()
            .copied()
            .filter(|id| !self.held.contains(id))
            .collect();
        // The open running jobs, by id. Their delays (a predicted response each, the costly
        // part) are worked out only where their order is read: to pick the running
        // primaries when there are more open jobs than are tried, and as the sort key of
        // case 2's candidates that pass pre-selection. With no more open jobs than are
        // tried, every one is tried and their order is not read: plans are compared by
        // gain, then id, and the counts of unformed groups add up in any order.
        let open_ids: Vec<JobId> = vm
            .alloc
            .iter()
            .filter(|id| self.jobs.get(id).is_some_and(|j| self.is_open(k, j)))
            .copied()
            .collect();
        let n_prim = self.cfg.running_prim_num as usize;
        let running_prims: Vec<JobId> = if open_ids.len() > n_prim {
            self.least_delayed(k, now, &open_ids, n_prim)
        } else {
            open_ids.clone()
        };
        let serial = head.req.procs == 1;
        let base = OnceCell::new();
        // The waiting jobs as matched candidates: what pre-selection's bounds read of each,
        // gathered once for every primary.
        let pool: Vec<Waiting> = waiting
            .iter()
            .map(|&id| {
                let c = &self.jobs[&id];
                let ppn = self.group_ppn(c);
                Waiting {
                    id,
                    procs: c.req.procs,
                    ppn,
                    nodes: c.req.procs.div_ceil(ppn),
                    rem: c.req.estimate.as_secs_f64().max(0.0),
                }
            })
            .collect();
        let serial_offered = pool.iter().filter(|w| w.procs == 1).count();
        // Primaries to try: (job, is waiting).
        let mut primaries: Vec<(JobId, bool)> = Vec::new();
        if serial {
            // A parallel waiting job or a parallel running job as primary, serial waiting
            // jobs (the head among them) matched.
            if let Some(&p) = waiting.iter().find(|id| self.jobs[id].req.procs > 1) {
                primaries.push((p, true));
            }
            for &r in &running_prims {
                if self.jobs[&r].req.procs > 1 {
                    primaries.push((r, false));
                }
            }
        } else {
            primaries.push((h, true));
            for &r in &running_prims {
                primaries.push((r, false));
            }
        }
        for (p, p_waiting) in primaries {
            let a = &self.jobs[&p];
            let (a_ppn, a_nodes) = if p_waiting {
                let ppn = self.group_ppn(a);
                (ppn, a.req.procs.div_ceil(ppn))
            } else {
                let ppn = a.seats.iter().map(|s| s.procs).max().unwrap_or(1);
                (ppn, a.seats.len() as u32)
            };
            let spare = free - if p_waiting { a_nodes.min(free) } else { 0 };
            if p_waiting && a_nodes > free {
                why.no_room += 1;
                continue;
            }
            let a_self = self.self_sl(a, a_ppn.min(a.req.procs));
            let prim = Primary {
                size: a.req.procs,
                ppn: a_ppn,
                nodes: a_nodes,
                rem: work_secs(a.left(v)),
            };
            let exceed =
                (f64::from(spare) / f64::from(a_nodes.max(1))).min(self.cfg.matched_exceed_prim);
            // Matched: waiting jobs (cases 1, 3); for a waiting primary also running jobs
            // (case 2).
            // Those out of the primary's reach are counted as candidates but not weighed:
            // pre-selection refuses them whatever their slowdowns.
            let params = self.params(exceed);
            let offered_to_p = |w: &Waiting| w.id != p && (!serial || w.procs == 1);
            // Every waiting job but a waiting primary itself (which is parallel when the
            // head is serial, as is every running primary tried then).
            let offered = if serial {
                serial_offered
            } else {
                pool.len() - usize::from(p_waiting)
            };
            debug_assert_eq!(offered, pool.iter().filter(|w| offered_to_p(w)).count());
            // In queue order, which is step 2's (their sort key is their queue position),
            // and worked out only as far as group formation reads them.
            let reach = glomarc::Reach::of(&prim, &params);
            let cands = pool
                .iter()
                .enumerate()
                .filter(|(_, w)| offered_to_p(w))
                .filter(|(_, w)| reach.holds(w.rem, w.nodes))
                .map(|(pos, w)| self.cand(a, a_self, &self.jobs[&w.id], w.ppn, pos as f64, v));
            let must = if p == h { None } else { Some(h) };
            // The head is the pool's first job, so the first candidate in step 2's order if
            // it is one: when it is not, or fails pre-selection, no group of this primary
            // holds it, and formation's answer needs only step 4's sets.
            let head_passes = must.is_none() || {
                let w = &pool[0];
                debug_assert_eq!(w.id, h, "the pool starts with the head");
                offered_to_p(w)
                    && reach.holds(w.rem, w.nodes)
                    && reach.preselects(
                        &params,
                        &self.cand(a, a_self, &self.jobs[&h], w.ppn, 0.0, v),
                    )
            };
            // A waiting job is matched at its group PPN, as the pool holds it.
            let waiting_ppn = |id: JobId| self.group_ppn(&self.jobs[&id]);
            let mut ratio = f64::NAN;
            let g = if head_passes {
                glomarc::form_ordered(&prim, cands, &params, must, &mut |m| {
                    let with: Vec<(Cand, u32)> =
                        m.iter().map(|c| (*c, waiting_ppn(c.id))).collect();
                    ratio = self.fairness_from(&base, k, (p, a_ppn), &with, now, 1.0);
                    ratio <= 1.0
                })
            } else {
                Err(glomarc::unformed_without_must(&prim, cands, &params))
            };
            why.note(offered, &g);
            let best = g.ok().map(|g| {
                let with: Vec<(Cand, u32)> =
                    g.matched.iter().map(|c| (*c, waiting_ppn(c.id))).collect();
                (g, with, ratio)
            });
            if p == h && !serial && p_waiting {
                // Case 2: the head onto running jobs' open lanes.
                // Only those that pass pre-selection are handed to group formation (which
                // sorts by key, then leaves out the others): their delays are the keys.
                let params0 = Params {
                    exceed: 0.0,
                    ..self.params(0.0)
                };
                let mut rc: Vec<(Cand, u32)> = Vec::new();
                for &r in &open_ids {
                    let c = &self.jobs[&r];
                    let ppn = c.seats.iter().map(|s| s.procs).max().unwrap_or(1);
                    let mut cd = self.cand(a, a_self, c, ppn, f64::NAN, v);
                    cd.nodes = c.seats.len() as u32;
                    if glomarc::preselected(&prim, &params0, &cd) {
                        cd.key = self.delay(k, c, now);
                        rc.push((cd, ppn));
                    }
                }
                // By delay, as the open jobs are ordered: NH keeps the order given.
                rc.sort_by(|a, b| a.0.key.total_cmp(&b.0.key).then(a.0.id.cmp(&b.0.id)));
                // The head's processes must all find room: on the running jobs' nodes, the
                // rest on free nodes.
                let before = best.as_ref().map(|b| b.0.gain);
                let ppn_of = |cs: &[(Cand, u32)], id: JobId| {
                    cs.iter().find(|x| x.0.id == id).map(|x| x.1).unwrap_or(1)
                };
                let with_free = |cs: Vec<(Cand, u32)>, offered: usize, why: &mut Unformed| {
                    let only: Vec<Cand> = cs.iter().map(|x| x.0).collect();
                    let mut ratio = f64::NAN;
                    let params = Params {
                        exceed: 0.0,
                        ..self.params(0.0)
                    };
                    let g = glomarc::form(&prim, &only, &params, None, &mut |m| {
                        let on: u32 = m.iter().map(|c| c.nodes).sum();
                        let need = prim.nodes.saturating_sub(on);
                        if need > free {
                            return false;
                        }
                        let with: Vec<(Cand, u32)> =
                            m.iter().map(|c| (*c, ppn_of(&cs, c.id))).collect();
                        ratio = self.fairness_from(&base, k, (p, a_ppn), &with, now, 1.0);
                        ratio <= 1.0
                    });
                    why.note(offered, &g);
                    g.ok().map(|g| {
                        let with = g
                            .matched
                            .iter()
                            .map(|c| (*c, ppn_of(&cs, c.id)))
                            .collect::<Vec<_>>();
                        (g, with, ratio)
                    })
                };
                if let Some((g, with, ratio)) = with_free(rc, open_ids.len(), &mut why)
                    && before.is_none_or(|b| g.gain > b)
                {
                    plans.push(Plan {
                        gain: g.gain,
                        primary: p,
                        primary_ppn: a_ppn,
                        primary_waiting: true,
                        matched: with,
                        ratio,
                    });
                }
            }
            if let Some((g, with, ratio)) = best {
                plans.push(Plan {
                    gain: g.gain,
                    primary: p,
                    primary_ppn: a_ppn,
                    primary_waiting: p_waiting,
                    matched: with,
                    ratio,
                });
            }
        }
        let plan = plans
            .into_iter()
            .max_by(|a, b| a.gain.total_cmp(&b.gain).then(b.primary.cmp(&a.primary)));
        why.beaten_by_ssp = u64::from(
            plan.as_ref()
                .is_some_and(|plan| self.cfg.beat_ssp && plan.gain <= ssp_gain),
        );
        self.stats.unformed.add(&why);
        let Some(plan) = plan else {
            return false;
        };
        if why.beaten_by_ssp > 0 {
            return false;
        }
        self.place_group(
            now,
            k,
            plan.primary,
            plan.primary_ppn,
            plan.primary_waiting,
            &plan.matched,
            out,
        );
        self.stats.worst_fair_ratio = self.stats.worst_fair_ratio.max(plan.ratio);
        true
    }

    /// Places a group: a waiting primary on free nodes' lane 0, matched waiting jobs on lane
    /// 1 of the primary's nodes (then of free nodes), or the waiting primary onto running
    /// matched jobs' lane 1 (case 2).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn place_group(
        &mut self,
        now: Time,
        k: usize,
        p: JobId,
        p_ppn: u32,
        p_waiting: bool,
        matched: &[(Cand, u32)],
        out: &mut Vec<Decision>,
    ) {
        let g = self.next_group;
        self.next_group += 1;
        self.stats.groups += 1;
        self.stats.grouped_jobs += 1 + matched.len() as u64;
        let mut free: Vec<u32> = self.vms[k].free_nodes().collect();
        let running_matched = matched.iter().any(|(c, _)| self.jobs[&c.id].allocated);
        if p_waiting && running_matched {
            // Case 2: the primary goes onto the running jobs' open lanes, then free nodes.
            let mut nodes: Vec<u32> = Vec::new();
            for (c, _) in matched {
                nodes.extend(self.jobs[&c.id].seats.iter().map(|s| s.node));
            }
            let procs = self.jobs[&p].req.procs;
            let mut seats = Self::lane_seats(procs, p_ppn, &nodes, 1);
            let placed: u32 = seats.iter().map(|s| s.procs).sum();
            if placed < procs {
                let need = (procs - placed).div_ceil(p_ppn) as usize;
                let take: Vec<u32> = free.drain(..need.min(free.len())).collect();
                seats.extend(Self::lane_seats(procs - placed, p_ppn, &take, 0));
            }
            for (c, _) in matched {
                let x = self.jobs.get_mut(&c.id).expect("member");
                x.group = Some(g);
                x.primary = false;
            }
            let x = self.jobs.get_mut(&p).expect("primary");
            x.group = Some(g);
            x.primary = true;
            self.launch(now, k, p, seats, out);
            return;
        }
        let p_nodes: Vec<u32> = if p_waiting {
            let n = self.jobs[&p].req.procs.div_ceil(p_ppn) as usize;
            let take: Vec<u32> = free.drain(..n).collect();
            let seats = Self::lane_seats(self.jobs[&p].req.procs, p_ppn, &take, 0);
            let x = self.jobs.get_mut(&p).expect("primary");
            x.group = Some(g);
            x.primary = true;
            self.launch(now, k, p, seats, out);
            take
        } else {
            let x = self.jobs.get_mut(&p).expect("primary");
            x.group = Some(g);
            x.primary = true;
            x.seats.iter().map(|s| s.node).collect()
        };
        // Matched jobs fill lane 1 of the primary's nodes in turn, then free nodes.
        let mut slots = p_nodes.into_iter();
        for (c, ppn) in matched {
            let n = c.nodes as usize;
            let mut nodes: Vec<u32> = slots.by_ref().take(n).collect();
            let mut spill = Vec::new();
            if nodes.len() < n {
                spill = free.drain(..(n - nodes.len()).min(free.len())).collect();
                nodes.extend(&spill);
            }
            let procs = self.jobs[&c.id].req.procs;
            let mut seats = Self::lane_seats(procs, *ppn, &nodes, 1);
            // On a spill node the matched job keeps lane 0 to itself.
            for &s in &spill {
                seats.push(Seat {
                    node: s,
                    lane: 0,
                    procs: 0,
                });
            }
            let x = self.jobs.get_mut(&c.id).expect("member");
            x.group = Some(g);
            x.primary = false;
            self.launch(now, k, c.id, seats, out);
        }
    }
}
