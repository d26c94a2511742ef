//! A VM's lanes and clock, and placing jobs on them: self- and coscheduling slowdowns,
//! seats under space sharing and in groups, starts and ends.

use std::cell::RefCell;
use std::collections::BTreeSet;

use cosched_core::multicore::mul;
use cosched_core::{Dur, IdMap, JobId, MachineShape, Milli, PeSet, Time};

use super::backfill::BackfillPlan;
use super::queue::Queue;
use super::{DOWN, FcfsPlan, Job, Scojo, Seat, Space};
use crate::Decision;

#[derive(Clone, Debug)]
pub(super) struct Vm {
    /// Occupant of each lane of each node (changed through [`Vm::set_lane`], which keeps
    /// `free` counted).
    pub(super) lanes: Vec<[Option<JobId>; 2]>,
    /// Nodes with both lanes empty: what a pass asks first, before it needs to know which
    /// nodes they are.
    pub(super) free: u32,
    /// The same nodes as bits (node `n` is bit `n % 64` of word `n / 64`), kept by
    /// [`Vm::set_lane`]: a start lists the lowest free nodes from them a word at a time, where
    /// the lanes of a machine of tens of thousands of nodes cost a read each.
    free_bits: Vec<u64>,
    /// VM clock accumulated before `active_since`.
    pub(super) vbase: Dur,
    pub(super) active_since: Option<Time>,
    /// Waiting jobs in (submit, id) order.
    pub(super) queue: Queue,
    /// Allocated jobs (running while the VM is active).
    pub(super) alloc: BTreeSet<JobId>,
    /// Counts the changes that can move an FCFS forecast of the VM: its lanes, its
    /// occupants' expected ends, or its queue other than at the tail.
    pub(super) epoch: u64,
    /// The FCFS forecast of the queue made last, as of `epoch`.
    pub(super) plan: Option<FcfsPlan>,
    /// The backfilling plan made last, as of `epoch`.
    pub(super) backfill: Option<BackfillPlan>,
    /// The node releases counted last ([`Scojo::release_counts`]), as of `(epoch, VM clock)`:
    /// the forecast and the backfilling plan made afresh in one decision both ask for them.
    pub(super) releases: RefCell<Option<KeptReleases>>,
    /// Where each allocated job is counted among the node releases, kept between epochs:
    /// a start or an end changes few nodes, and counting every node of every job at each
    /// epoch is most of what a count costs on a wide machine.
    pub(super) holds: RefCell<Holds>,
    /// The runs of the PE set a start gathers ([`seats_pe_set`]), kept from start to start:
    /// a wide job's runs are gathered without growing a vector, and its set is then made at
    /// its size.
    pe_runs: Vec<(u32, u32)>,
}

/// The nodes each allocated job of a VM is counted at ([`Scojo::release_counts`]), apart
/// from the ends that decide a shared node: kept per job, and made again only for the jobs
/// [`Vm::set_lane`] marks as `stale` (the occupants of a node whose lanes it changes).
#[derive(Clone, Debug, Default)]
pub(super) struct Holds {
    pub(super) stale: Vec<JobId>,
    pub(super) by_job: IdMap<JobHolds>,
}

/// A job's nodes that are up and that it occupies: `alone` those where no other job runs,
/// and `shared`, by partner (ascending), how many it shares with that partner. A shared node
/// is counted at the later of the two ends (on a tie, at the higher id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct JobHolds {
    pub(super) alone: u32,
    pub(super) shared: Vec<(JobId, u32)>,
}

/// The lanes of seat `s` of job `id` when the node's release is counted there: the node is
/// up, and a node the job holds both lanes of is counted at its lane-0 seat.
fn counted_at<'v>(vm: &'v Vm, s: &Seat, id: JobId) -> Option<&'v [Option<JobId>; 2]> {
    let lanes = &vm.lanes[s.node as usize];
    if lanes.contains(&Some(DOWN)) || (s.lane != 0 && lanes[0] == Some(id)) {
        return None;
    }
    Some(lanes)
}

/// Node releases counted (`(time, nodes)` by time) as of a VM's epoch and clock.
pub(super) type KeptReleases = (u64, Time, Vec<(Time, u32)>);

/// Work is counted as the engine counts it: in thousandths of a microsecond at full speed,
/// so a job's expected end, made from the same slowdowns, is an integer time and the same
/// however often it is asked for.
const WORK_PER_US: u64 = 1000;

/// The time `left` work (thousandths of a microsecond) takes at slowdown `sl`, up to the
/// first microsecond by which it is done.
pub(super) fn run_for(left: u64, sl: Milli) -> Dur {
    Dur::from_micros((u128::from(left) * u128::from(sl)).div_ceil(1_000_000) as i64)
}

/// A job's whole estimate as work (thousandths of a microsecond).
pub(super) fn work_of(estimate: Dur) -> u64 {
    (estimate.as_micros().max(0) as u64).saturating_mul(WORK_PER_US)
}

/// Work as seconds at full speed (what the group search weighs).
pub(super) fn work_secs(work: u64) -> f64 {
    work as f64 / (1e6 * WORK_PER_US as f64)
}

/// A slowdown the group search weighs as a factor, back in thousandths: every such factor
/// is a whole number of thousandths divided by 1000, which rounding recovers exactly.
pub(super) fn milli(sl: f64) -> Milli {
    (sl * 1000.0).round() as Milli
}

impl Job {
    /// Work done by VM time `v`: what was counted at `mark`, and since then at its slowdown.
    pub(super) fn done_at(&self, v: Time) -> u64 {
        let ran = v.since(self.mark).as_micros().max(0) as u64;
        self.done + ran * 1_000_000 / u64::from(self.sl.max(1))
    }

    /// Work left at VM time `v` (the whole estimate while it waits).
    pub(super) fn left(&self, v: Time) -> u64 {
        let all = work_of(self.req.estimate);
        if self.allocated {
            all.saturating_sub(self.done_at(v))
        } else {
            all
        }
    }
}

impl Vm {
    pub(super) fn new(nodes: u32) -> Vm {
        Vm {
            lanes: vec![[None, None]; nodes as usize],
            free: nodes,
            free_bits: (0..nodes.div_ceil(64))
                .map(|w| {
                    let left = nodes - w * 64;
                    if left >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << left) - 1
                    }
                })
                .collect(),
            vbase: Dur::ZERO,
            active_since: None,
            queue: Queue::default(),
            alloc: BTreeSet::new(),
            epoch: 0,
            plan: None,
            backfill: None,
            releases: RefCell::new(None),
            holds: RefCell::new(Holds::default()),
            pe_runs: Vec::new(),
        }
    }
    /// The VM clock at wall time `now`: the time its slice has been active.
    pub(super) fn vnow(&self, now: Time) -> Time {
        let ran = match self.active_since {
            Some(t) => self.vbase + now.since(t),
            None => self.vbase,
        };
        Time::ZERO + ran
    }
    /// Sets lane `lane` of `node` to `to`, keeping the count of free nodes.
    pub(super) fn set_lane(&mut self, node: u32, lane: u32, to: Option<JobId>) {
        let seat = Seat {
            node,
            lane,
            procs: 0,
        };
        self.set_lanes(&[seat], |_, _| Some(to));
    }

    /// Sets the lane of each of `seats` in turn to what `to(seat, occupant)` says (`None`:
    /// left as it is), keeping the free nodes counted and as bits and the jobs whose counted
    /// nodes change marked stale: a job's start or end in one pass, where its nodes follow
    /// each other and a word of free bits covers 64 of them.
    pub(super) fn set_lanes(
        &mut self,
        seats: &[Seat],
        mut to: impl FnMut(&Seat, Option<JobId>) -> Option<Option<JobId>>,
    ) {
        let nodes = self.lanes.len();
        let stale = &mut self.holds.get_mut().stale;
        // The free bits that flip in word `word`, written when the seats move to another.
        let (mut word, mut flips) = (0usize, 0u64);
        // The last two jobs marked stale here: a wide job's nodes change one after the
        // other beside the same partner, if any, so those two are nearly all there is to
        // mark. Ids as numbers, no job (and a node down) as `DOWN`'s, which is never marked.
        let (mut last, mut before) = (DOWN.0, DOWN.0);
        for s in seats {
            let l = &mut self.lanes[s.node as usize];
            let Some(to) = to(s, l[s.lane as usize]) else {
                continue;
            };
            let was = l[0].is_none() && l[1].is_none();
            // Who is counted at the node may change for every job there, before and after.
            for id in [l[0], l[1], to] {
                let id = id.map_or(DOWN.0, |j| j.0);
                if id != last && id != before && id != DOWN.0 {
                    stale.push(JobId(id));
                    (last, before) = (id, last);
                    // The list is kept to about one entry per node however long no count
                    // reads it.
                    if stale.len() > nodes + 64 {
                        stale.sort_unstable();
                        stale.dedup();
                    }
                }
            }
            l[s.lane as usize] = to;
            let is = l[0].is_none() && l[1].is_none();
            self.free = self.free + u32::from(is) - u32::from(was);
            let w = s.node as usize / 64;
            if w != word {
                self.free_bits[word] ^= flips;
                (word, flips) = (w, 0);
            }
            flips ^= u64::from(is != was) << (s.node % 64);
        }
        if flips != 0 {
            self.free_bits[word] ^= flips;
        }
    }

    /// The free nodes (both lanes empty), ascending.
    pub(super) fn free_nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.free_bits.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    w as u32 * 64 + b
                })
            })
        })
    }

    /// [`Vm::free_nodes`] by reading every node's lanes (what debug builds compare it with).
    pub(super) fn free_nodes_by_lanes(&self) -> impl Iterator<Item = u32> + '_ {
        self.lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| l[0].is_none() && l[1].is_none())
            .map(|(n, _)| n as u32)
    }
}

impl Scojo {
    pub(super) fn self_sl(&self, j: &Job, procs_here: u32) -> Milli {
        let sockets = self.machine.sockets_per_node;
        match procs_here {
            0 | 1 => 1000,
            p if p <= sockets => j.nos,
            _ => mul(j.nos, j.crs),
        }
    }

    /// Space sharing: processes per node by formula 11, nodes, and the slowdown (the job's
    /// [`Space`], cached in it at submission).
    pub(super) fn space_of(&self, j: &Job) -> Space {
        let m = &self.machine;
        let ppn = self.cfg.limits.ppn(
            j.req.procs,
            j.crs,
            j.nos,
            m.pes_per_node(),
            m.sockets_per_node,
        );
        // A job too wide for the machine at its preferred PPN packs every core instead.
        let ppn = if j.req.procs.div_ceil(ppn) > m.nodes {
            m.pes_per_node()
        } else {
            ppn
        };
        let nodes = j.req.procs.div_ceil(ppn);
        let sl = self.self_sl(j, ppn.min(j.req.procs));
        Space {
            ppn,
            nodes,
            sl,
            dur: run_for(work_of(j.req.estimate), sl),
        }
    }

    /// In a group a job uses one lane: one process per processor if its node self-slowdown
    /// allows (SELF_SL_2), else one.
    pub(super) fn group_ppn(&self, j: &Job) -> u32 {
        if j.req.procs > 1 && j.nos <= self.cfg.limits.self_sl_2 {
            self.machine.sockets_per_node
        } else {
            1
        }
    }

    /// The slowdown of an allocated job from its seats and its partners' (as the engine
    /// computes it). `busy` holds, per partner already looked at, the nodes where it runs
    /// processes (sorted): seats do not change while a change is repriced, so a wide job
    /// beside wide partners reads each partner's seats once, not once per shared node.
    pub(super) fn slowdown_of(&self, id: JobId, busy: &mut IdMap<Vec<u32>>) -> Milli {
        let j = &self.jobs[&id];
        let vm = &self.vms[j.vm];
        let mut worst: Milli = 1000;
        // Processes per node: the seats of one node added up (the slowdown is a maximum
        // over nodes, so their order does not matter). Seats listed by node, as every start
        // lists them, are added up as they come; others are sorted first.
        let sorted;
        let seats: &[Seat] = if j.seats.is_sorted_by_key(|s| s.node) {
            &j.seats
        } else {
            sorted = {
                let mut v = j.seats.clone();
                v.sort_by_key(|s| s.node);
                v
            };
            &sorted
        };
        let per_node = seats
            .chunk_by(|a, b| a.node == b.node)
            .map(|n| (n[0].node, n.iter().map(|s| s.procs).sum::<u32>()));
        for (node, procs) in per_node {
            if procs == 0 {
                continue;
            }
            let own = self.self_sl(j, procs);
            let lanes = &vm.lanes[node as usize];
            // Most nodes of a wide job hold no one else: no partner to look for.
            if lanes.iter().all(|&o| o.is_none() || o == Some(id)) {
                worst = worst.max(own);
                continue;
            }
            let mut partner = None;
            for &o in lanes.iter().flatten() {
                if o == id {
                    continue;
                }
                let Some(x) = self.jobs.get(&o) else { continue };
                let nodes = busy.entry(o).or_insert_with(|| {
                    let mut n: Vec<u32> = x
                        .seats
                        .iter()
                        .filter(|s| s.procs > 0)
                        .map(|s| s.node)
                        .collect();
                    n.sort_unstable();
                    n.dedup();
                    n
                });
                if nodes.binary_search(&node).is_ok() {
                    partner = Some(o);
                    break;
                }
            }
            let s = match partner {
                Some(p) => mul(own, self.model.cos(id, p)),
                None => own,
            };
            worst = worst.max(s);
        }
        worst
    }

    /// Expected end (VM time) of an allocated job.
    pub(super) fn expected_end(&self, j: &Job, v: Time) -> Time {
        v + run_for(j.left(v), j.sl)
    }

    /// When the occupied nodes of VM `k` that are up are next wholly free, as of VM time
    /// `v`, counted by time: `(time, nodes)` by time ascending, one entry per time, into
    /// `out`. A node is free at the later of its occupants' expected ends, and no earlier
    /// than `v` ([`Scojo::node_releases_iter`] node by node). Made job by job: a job's
    /// expected end is worked out once for all its nodes, and what is sorted is one count
    /// per job, not one time per node.
    pub(super) fn release_counts(&self, k: usize, v: Time, out: &mut Vec<(Time, u32)>) {
        let vm = &self.vms[k];
        // They change only with the VM's epoch (every change of its lanes, of its jobs'
        // seats or slowdowns, or of the nodes down moves it) and its clock.
        let kept = match &*vm.releases.borrow() {
            Some((epoch, at, counts)) if *epoch == vm.epoch && *at == v => {
                out.clone_from(counts);
                true
            }
            _ => false,
        };
        if !kept {
            self.count_releases(k, v, out);
            *vm.releases.borrow_mut() = Some((vm.epoch, v, out.clone()));
        }
        if cfg!(debug_assertions) {
            let mut by_node: Vec<Time> = self.node_releases_iter(k, v).map(|(_, t)| t).collect();
            by_node.sort_unstable();
            let mut counted: Vec<(Time, u32)> = Vec::new();
            for t in by_node {
                match counted.last_mut() {
                    Some(last) if last.0 == t => last.1 += 1,
                    _ => counted.push((t, 1)),
                }
            }
            debug_assert_eq!(*out, counted, "node releases of VM {k} at {v:?}");
        }
    }

    /// [`Scojo::release_counts`], counted from each job's [`JobHolds`], made again for the
    /// jobs whose nodes changed.
    fn count_releases(&self, k: usize, v: Time, out: &mut Vec<(Time, u32)>) {
        let vm = &self.vms[k];
        let mut holds = vm.holds.borrow_mut();
        let Holds { stale, by_job } = &mut *holds;
        stale.sort_unstable();
        stale.dedup();
        for id in stale.drain(..) {
            match self.jobs.get(&id) {
                Some(j) if vm.alloc.contains(&id) => {
                    by_job.insert(id, self.job_holds(k, id, j));
                }
                _ => {
                    by_job.remove(&id);
                }
            }
        }
        // By id, as `alloc` holds them: a partner's end is found by a binary search.
        let ends: Vec<(JobId, Time)> = vm
            .alloc
            .iter()
            .filter_map(|&id| {
                let j = self.jobs.get(&id)?;
                Some((id, self.expected_end(j, v).max(v)))
            })
            .collect();
        out.clear();
        for &(id, end) in &ends {
            let Some(h) = by_job.get(&id) else { continue };
            if cfg!(debug_assertions) {
                debug_assert_eq!(*h, self.job_holds(k, id, &self.jobs[&id]), "holds of {id}");
            }
            let mut n = h.alone;
            for &(o, c) in &h.shared {
                if let Ok(i) = ends.binary_search_by_key(&o, |e| e.0)
                    && (ends[i].1, o) > (end, id)
                {
                    continue;
                }
                n += c;
            }
            if n > 0 {
                out.push((end, n));
            }
        }
        sum_by_key(out);
        if cfg!(debug_assertions) {
            let mut walked = Vec::new();
            self.count_releases_by_seat(k, v, &mut walked);
            debug_assert_eq!(*out, walked, "kept holds of VM {k} at {v:?}");
        }
    }

    /// Where job `id` of VM `k` is counted among the node releases: its seats' nodes that
    /// are up, each once.
    fn job_holds(&self, k: usize, id: JobId, j: &Job) -> JobHolds {
        let vm = &self.vms[k];
        let mut h = JobHolds::default();
        for s in &j.seats {
            let Some(lanes) = counted_at(vm, s, id) else {
                continue;
            };
            match lanes[1 - s.lane as usize] {
                Some(o) if o != id => h.shared.push((o, 1)),
                _ => h.alone += 1,
            }
        }
        sum_by_key(&mut h.shared);
        h
    }

    /// [`Scojo::release_counts`], counted seat by seat of every allocated job (what the kept
    /// [`JobHolds`] are checked against).
    fn count_releases_by_seat(&self, k: usize, v: Time, out: &mut Vec<(Time, u32)>) {
        let vm = &self.vms[k];
        // By id, as `alloc` holds them: a partner's end is found by a binary search.
        let ends: Vec<(JobId, Time, &Job)> = vm
            .alloc
            .iter()
            .filter_map(|&id| {
                let j = self.jobs.get(&id)?;
                Some((id, self.expected_end(j, v).max(v), j))
            })
            .collect();
        out.clear();
        for &(id, end, j) in &ends {
            let mut n = 0;
            for s in &j.seats {
                let Some(lanes) = counted_at(vm, s, id) else {
                    continue;
                };
                // A node shared with another job goes with the later end (on a tie, the
                // higher id), so that it is counted once.
                if let Some(o) = lanes[1 - s.lane as usize]
                    && o != id
                    && let Ok(i) = ends.binary_search_by_key(&o, |e| e.0)
                    && (ends[i].1, o) > (end, id)
                {
                    continue;
                }
                n += 1;
            }
            if n > 0 {
                out.push((end, n));
            }
        }
        sum_by_key(out);
    }

    /// The jobs on `nodes` of VM `k` (the occupants of their lanes, nodes down included),
    /// by id, each once: those [`Scojo::reprice`] re-estimates after a change there.
    fn occupants(&self, k: usize, nodes: impl Iterator<Item = u32>) -> Vec<JobId> {
        let lanes = &self.vms[k].lanes;
        let mut ids: Vec<JobId> = Vec::new();
        // A wide job's nodes follow each other, most with the same occupants as the node
        // before: those add no one, and its id is listed once per run of the others.
        let mut before = None;
        for n in nodes {
            let here = lanes[n as usize];
            if before == Some(here) {
                continue;
            }
            before = Some(here);
            for o in here.into_iter().flatten() {
                if ids.last() != Some(&o) {
                    ids.push(o);
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Re-estimates the slowdowns of jobs `ids` (by id, each once; [`Scojo::occupants`] of
    /// the nodes of a change) of VM `k`: as the engine does, a job whose slowdown changes
    /// has its work so far added up at the old one.
    pub(super) fn reprice(&mut self, ids: Vec<JobId>, v: Time) {
        let mut busy = IdMap::default();
        for id in ids {
            if !self.jobs.contains_key(&id) {
                continue;
            }
            let sl = self.slowdown_of(id, &mut busy);
            let j = self.jobs.get_mut(&id).expect("known");
            if sl != j.sl {
                j.done = j.done_at(v);
                j.mark = v;
                j.sl = sl;
            }
        }
    }

    /// Allocates `seats` to a waiting job in VM `k` and starts it.
    pub(super) fn launch(
        &mut self,
        now: Time,
        k: usize,
        id: JobId,
        seats: Vec<Seat>,
        out: &mut Vec<Decision>,
    ) {
        let v = self.vms[k].vnow(now);
        self.vms[k].set_lanes(&seats, |_, was| {
            debug_assert!(was.is_none(), "lane taken");
            Some(Some(id))
        });
        let pe_set = seats_pe_set(&self.machine, &seats, &mut self.vms[k].pe_runs);
        let kind = self.jobs[&id].kind;
        self.vms[kind].queue.remove(id);
        self.vms[kind].epoch += 1;
        self.vms[k].alloc.insert(id);
        self.vms[k].epoch += 1;
        let ids = self.occupants(k, seats.iter().map(|s| s.node));
        {
            let j = self.jobs.get_mut(&id).expect("known");
            j.allocated = true;
            j.vm = k;
            j.seats = seats;
            j.done = 0;
            j.mark = v;
            j.sl = 1000;
        }
        self.reprice(ids, v);
        out.push(Decision::Start {
            job: id,
            pes: pe_set,
            slot: Some(k as u32),
        });
    }

    /// Seats of a space-shared job on free nodes: whole nodes, a job of up to one process per
    /// processor on lane 0 only (lane 1 stays open to coscheduling).
    pub(super) fn ssp_seats(&self, j: &Job, nodes: &[u32], ppn: u32) -> Vec<Seat> {
        let mut left = j.req.procs;
        let sockets = self.machine.sockets_per_node;
        // Every node takes two seats when its processes outnumber its sockets, else one:
        // sized up front, a wide job's seats are written once, not copied as they grow.
        let per_node = if ppn <= sockets { 1 } else { 2 };
        let mut seats = Vec::with_capacity(nodes.len() * per_node);
        for &n in nodes {
            let p = left.min(ppn);
            left -= p;
            if p <= sockets && ppn <= sockets {
                seats.push(Seat {
                    node: n,
                    lane: 0,
                    procs: p,
                });
            } else {
                let a = p.min(sockets);
                seats.push(Seat {
                    node: n,
                    lane: 0,
                    procs: a,
                });
                seats.push(Seat {
                    node: n,
                    lane: 1,
                    procs: p - a,
                });
            }
        }
        seats
    }

    /// Seats on lane `lane` of `nodes` for `procs` processes at `ppn` per node.
    pub(super) fn lane_seats(procs: u32, ppn: u32, nodes: &[u32], lane: u32) -> Vec<Seat> {
        let mut left = procs;
        // One seat per node until the processes run out.
        let used = match ppn {
            0 => nodes.len(),
            _ => nodes.len().min(procs.div_ceil(ppn) as usize),
        };
        let mut seats = Vec::with_capacity(used);
        for &n in nodes {
            if left == 0 {
                break;
            }
            let p = left.min(ppn);
            left -= p;
            seats.push(Seat {
                node: n,
                lane,
                procs: p,
            });
        }
        seats
    }

    pub(super) fn ended(&mut self, id: JobId, now: Time) {
        self.held.remove(&id);
        let Some(j) = self.jobs.remove(&id) else {
            self.fresh.retain(|&x| x != id);
            return;
        };
        self.fresh.retain(|&x| x != id);
        if !j.allocated {
            self.vms[j.kind].queue.remove(id);
            self.vms[j.kind].epoch += 1;
            return;
        }
        let vm = &mut self.vms[j.vm];
        vm.alloc.remove(&id);
        vm.epoch += 1;
        let down = &self.down;
        vm.set_lanes(&j.seats, |s, was| {
            (was == Some(id)).then(|| down.contains(&s.node).then_some(DOWN))
        });
        // Disbanding: the primary's end, or its last matched job's.
        if let Some(g) = j.group {
            // A group's members all run in the VM it was formed in.
            let members: Vec<JobId> = self.vms[j.vm]
                .alloc
                .iter()
                .copied()
                .filter(|i| self.jobs.get(i).is_some_and(|x| x.group == Some(g)))
                .collect();
            let any_matched = members.iter().any(|i| !self.jobs[i].primary);
            if j.primary || !any_matched {
                for i in members {
                    let x = self.jobs.get_mut(&i).expect("member");
                    x.group = None;
                    x.primary = false;
                }
            }
        }
        let k = j.vm;
        let v = self.vms[k].vnow(now);
        let ids = self.occupants(k, j.seats.iter().map(|s| s.node));
        self.reprice(ids, v);
    }
}

/// The cores a seat of fewer processes than cores takes on its node, as
/// [`MachineShape::node_cores`] places them (not sorted: [`pe_set_of`] sorts a node's cores),
/// without a vector per seat.
fn seat_cores(m: &MachineShape, s: &Seat) -> impl Iterator<Item = u32> {
    let base = s.node * m.pes_per_node();
    let (sockets, per_socket, lane) = (m.sockets_per_node, m.cores_per_socket, s.lane);
    (0..s.procs.min(m.pes_per_node()))
        .map(move |c| base + (c % sockets) * per_socket + (lane + c / sockets) % per_socket)
}

/// Sorts `counts` by key and adds up the counts of each key into one entry.
fn sum_by_key<K: Ord + Copy>(counts: &mut Vec<(K, u32)>) {
    counts.sort_unstable_by_key(|&(k, _)| k);
    counts.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
}

/// The cores a seat takes: every core of its node when it has as many processes as cores,
/// whatever the lane, else those [`MachineShape::node_cores`] places.
fn seat_pes(m: &MachineShape, s: &Seat) -> impl Iterator<Item = u32> {
    let per_node = m.pes_per_node();
    let base = s.node * per_node;
    let whole = (s.procs >= per_node).then(|| base..base + per_node);
    let part = (s.procs < per_node).then(|| seat_cores(m, s));
    whole
        .into_iter()
        .flatten()
        .chain(part.into_iter().flatten())
}

/// The cores of `seats` as a set. Seats by node ascending (as every start lists them) are
/// gathered node by node into a mask of the node's cores, whose runs go into the set in
/// order: no list of every core of a wide job, and no sort. A seat's mask depends only on
/// its processes and lane, so each (processes, lane) a start uses is worked out once per
/// start, and a wide job's seats cost a look-up each; a node whose cores are all taken
/// extends the set's last run when it follows it. The runs are gathered in `runs` (emptied
/// first; a buffer kept between starts), and the set made from them at its size.
fn seats_pe_set(m: &MachineShape, seats: &[Seat], runs: &mut Vec<(u32, u32)>) -> PeSet {
    let per_node = m.pes_per_node();
    let by_node = seats.windows(2).all(|w| w[0].node <= w[1].node);
    if !by_node || per_node == 0 || per_node > 64 {
        return PeSet::from_pes(seats.iter().flat_map(|s| seat_pes(m, s)));
    }
    let below = |n: u32| if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    let full = below(per_node);
    // Masks of lanes 0 and 1 by processes (0: not worked out yet; a seat of no processes
    // has the empty mask, which costs nothing to work out).
    let mut known = [[0u64; 65]; 2];
    let mut mask_of = |s: &Seat| -> u64 {
        if s.procs >= per_node {
            return full;
        }
        let base = s.node * per_node;
        let fresh = |s: &Seat| seat_cores(m, s).fold(0u64, |mask, p| mask | 1 << (p - base));
        match known.get_mut(s.lane as usize) {
            Some(row) => {
                let slot = &mut row[s.procs as usize];
                if *slot == 0 {
                    *slot = fresh(s);
                }
                *slot
            }
            None => fresh(s),
        }
    };
    runs.clear();
    // As `PeSet::push_sorted`: a run that starts where the last one ends extends it.
    let push = |runs: &mut Vec<(u32, u32)>, start: u32, end: u32| match runs.last_mut() {
        Some(last) if last.1 == start => last.1 = end,
        _ => runs.push((start, end)),
    };
    // The runs of the mask split last, from the node's first core: a wide job's nodes
    // mostly take the same cores, split once (a mask of 64 bits has at most 32 runs).
    let (mut split_mask, mut split, mut split_len) = (0u64, [(0u32, 0u32); 32], 0);
    let mut i = 0;
    while i < seats.len() {
        let node = seats[i].node;
        let base = node * per_node;
        let mut mask = mask_of(&seats[i]);
        i += 1;
        while i < seats.len() && seats[i].node == node {
            mask |= mask_of(&seats[i]);
            i += 1;
        }
        if mask == full {
            push(runs, base, base + per_node);
            continue;
        }
        if mask != split_mask {
            (split_mask, split_len) = (mask, 0);
            while mask != 0 {
                let lo = mask.trailing_zeros();
                let run = (mask >> lo).trailing_ones();
                split[split_len] = (lo, lo + run);
                split_len += 1;
                mask &= !below(lo + run);
            }
        }
        for &(lo, hi) in &split[..split_len] {
            push(runs, base + lo, base + hi);
        }
    }
    let set = PeSet::from_runs(runs);
    if cfg!(debug_assertions) {
        let all = PeSet::from_pes(seats.iter().flat_map(|s| seat_pes(m, s)));
        debug_assert_eq!(set, all, "PEs of {seats:?}");
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::NodeId;
    use proptest::prelude::*;

    proptest! {
        /// The free-node bits follow every change of the lanes: the free nodes listed from
        /// them are those whose lanes are both empty, ascending, and as many as counted.
        #[test]
        fn free_node_bits_follow_the_lanes(
            nodes in 1u32..200,
            changes in proptest::collection::vec((0u32..200, 0u32..2, proptest::option::of(0u64..4)), 0..300),
        ) {
            let mut vm = Vm::new(nodes);
            for (node, lane, to) in changes {
                vm.set_lane(node % nodes, lane, to.map(JobId));
                let bits: Vec<u32> = vm.free_nodes().collect();
                let lanes: Vec<u32> = vm.free_nodes_by_lanes().collect();
                prop_assert_eq!(&bits, &lanes);
                prop_assert_eq!(bits.len(), vm.free as usize);
            }
        }

        /// A pass of changes over many seats leaves the lanes, the free nodes (counted and as
        /// bits) and the jobs marked stale as the changes made one at a time do, and marks
        /// every job that was or is on a lane it changes.
        #[test]
        fn lanes_set_in_one_pass_are_those_set_one_by_one(
            nodes in 1u32..200,
            before in proptest::collection::vec((0u32..200, 0u32..2, 0u64..4), 0..100),
            changes in proptest::collection::vec(
                (0u32..200, 0u32..2, proptest::option::of(proptest::option::of(0u64..4))),
                0..300,
            ),
            by_node in any::<bool>(),
        ) {
            let mut one = Vm::new(nodes);
            for (node, lane, to) in before {
                one.set_lane(node % nodes, lane, Some(JobId(to)).filter(|&id| id != JobId(3)).or(Some(DOWN)));
            }
            one.holds.get_mut().stale.clear();
            let mut pass = one.clone();
            let mut changes: Vec<(Seat, Option<Option<JobId>>)> = changes
                .into_iter()
                .map(|(node, lane, to)| {
                    (Seat { node: node % nodes, lane, procs: 0 }, to.map(|t| t.map(JobId)))
                })
                .collect();
            if by_node {
                changes.sort_by_key(|c| c.0.node);
            }
            let mut marked = Vec::new();
            for &(s, to) in &changes {
                if let Some(to) = to {
                    let l = one.lanes[s.node as usize];
                    marked.extend([l[0], l[1], to].into_iter().flatten().filter(|&id| id != DOWN));
                    one.set_lane(s.node, s.lane, to);
                }
            }
            let seats: Vec<Seat> = changes.iter().map(|c| c.0).collect();
            let mut i = 0;
            pass.set_lanes(&seats, |_, _| {
                i += 1;
                changes[i - 1].1
            });
            prop_assert_eq!(&pass.lanes, &one.lanes);
            prop_assert_eq!(pass.free, one.free);
            prop_assert_eq!(&pass.free_bits, &one.free_bits);
            let by_lanes: Vec<u32> = pass.free_nodes_by_lanes().collect();
            prop_assert_eq!(pass.free_nodes().collect::<Vec<u32>>(), by_lanes.clone());
            prop_assert_eq!(pass.free as usize, by_lanes.len());
            let set = |v: &mut Vec<JobId>| {
                v.sort_unstable();
                v.dedup();
                v.clone()
            };
            let stale = set(&mut pass.holds.get_mut().stale);
            prop_assert_eq!(&stale, &set(&mut one.holds.get_mut().stale));
            prop_assert_eq!(stale, set(&mut marked));
        }

        /// A seat's cores, listed without a vector, are the ones the machine places there.
        #[test]
        fn seat_cores_are_the_machines(
            sockets in 1u32..5,
            per_socket in 1u32..5,
            node in 0u32..7,
            procs in 0u32..24,
            lane in 0u32..2,
        ) {
            let m = MachineShape { nodes: 8, sockets_per_node: sockets, cores_per_socket: per_socket, mem_per_node_mib: None };
            let mut ours: Vec<u32> = seat_cores(&m, &Seat { node, lane, procs }).collect();
            ours.sort_unstable();
            let theirs: Vec<u32> = m.node_cores(NodeId(node), procs, lane).into_iter().map(|p| p.0).collect();
            prop_assert_eq!(ours, theirs);
        }

        /// The set gathered node by node from masks is the set of the machine's cores of
        /// every seat, sorted, for seats by node and in any order.
        #[test]
        fn seats_make_the_set_of_their_cores(
            sockets in 1u32..5,
            per_socket in 1u32..5,
            seats in proptest::collection::vec((0u32..6, 0u32..3, 0u32..20), 0..10),
            by_node in any::<bool>(),
        ) {
            let m = MachineShape { nodes: 8, sockets_per_node: sockets, cores_per_socket: per_socket, mem_per_node_mib: None };
            let mut seats: Vec<Seat> = seats
                .into_iter()
                .map(|(node, lane, procs)| Seat { node, lane, procs })
                .collect();
            if by_node {
                seats.sort_by_key(|s| s.node);
            }
            let per_node = m.pes_per_node();
            let pes: Vec<u32> = seats
                .iter()
                .flat_map(|s| {
                    if s.procs >= per_node {
                        (s.node * per_node..(s.node + 1) * per_node).collect::<Vec<_>>()
                    } else {
                        m.node_cores(NodeId(s.node), s.procs, s.lane).into_iter().map(|p| p.0).collect()
                    }
                })
                .collect();
            prop_assert_eq!(seats_pe_set(&m, &seats, &mut vec![(1, 2)]), PeSet::from_pes(pes));
        }
    }
}
