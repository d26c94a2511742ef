//! A VM's lanes and clock, and placing jobs on them: self- and coscheduling slowdowns,
//! seats under space sharing and in groups, starts and ends.

use std::collections::{BTreeMap, BTreeSet};

use cosched_core::multicore::mul;
use cosched_core::{Dur, JobId, Milli, NodeId, PeSet, Time};

use super::{DOWN, FcfsPlan, Job, Scojo, Seat, Space};
use crate::Decision;

#[derive(Clone, Debug)]
pub(super) struct Vm {
    /// Occupant of each lane of each node.
    pub(super) lanes: Vec<[Option<JobId>; 2]>,
    /// VM clock (s) accumulated before `active_since`.
    pub(super) vbase: f64,
    pub(super) active_since: Option<Time>,
    /// Waiting jobs in (submit, id) order.
    pub(super) queue: Vec<JobId>,
    /// Allocated jobs (running while the VM is active).
    pub(super) alloc: BTreeSet<JobId>,
    /// Counts the changes that can move an FCFS forecast of the VM: its lanes, its
    /// occupants' expected ends, or its queue other than at the tail.
    pub(super) epoch: u64,
    /// The FCFS forecast of the queue made last, as of `epoch`.
    pub(super) plan: Option<FcfsPlan>,
}

impl Vm {
    pub(super) fn new(nodes: u32) -> Vm {
        Vm {
            lanes: vec![[None, None]; nodes as usize],
            vbase: 0.0,
            active_since: None,
            queue: Vec::new(),
            alloc: BTreeSet::new(),
            epoch: 0,
            plan: None,
        }
    }
    pub(super) fn vnow(&self, now: Time) -> f64 {
        match self.active_since {
            Some(t) => self.vbase + (now - t).as_secs_f64().max(0.0),
            None => self.vbase,
        }
    }
    pub(super) fn free_nodes(&self) -> impl Iterator<Item = u32> + '_ {
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
        let sl = f64::from(self.self_sl(j, ppn.min(j.req.procs))) / 1000.0;
        let secs = j.req.estimate.as_secs_f64() * sl;
        Space {
            ppn,
            nodes,
            sl,
            secs,
            dur: Dur::from_secs_f64(secs),
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
    /// computes it).
    pub(super) fn slowdown_of(&self, id: JobId) -> f64 {
        let j = &self.jobs[&id];
        let vm = &self.vms[j.vm];
        let mut worst: Milli = 1000;
        let mut per_node: BTreeMap<u32, u32> = BTreeMap::new();
        for s in &j.seats {
            *per_node.entry(s.node).or_default() += s.procs;
        }
        for (&node, &procs) in &per_node {
            if procs == 0 {
                continue;
            }
            let own = self.self_sl(j, procs);
            let partner = vm.lanes[node as usize].iter().flatten().find(|&&o| {
                o != id
                    && self
                        .jobs
                        .get(&o)
                        .is_some_and(|x| x.seats.iter().any(|s| s.node == node && s.procs > 0))
            });
            let s = match partner {
                Some(&p) => mul(own, self.model.cos(id, p)),
                None => own,
            };
            worst = worst.max(s);
        }
        f64::from(worst) / 1000.0
    }

    /// Brings a job's estimated work left up to VM time `v`.
    pub(super) fn settle(&mut self, id: JobId, v: f64) {
        let j = self.jobs.get_mut(&id).expect("known");
        j.rem -= (v - j.mark) / j.sl;
        j.mark = v;
    }

    /// Expected end (VM time) of an allocated job.
    pub(super) fn expected_end(&self, j: &Job, v: f64) -> f64 {
        let rem = j.rem - (v - j.mark) / j.sl;
        v + (rem * j.sl).max(0.0)
    }

    /// Re-estimates the slowdowns of the jobs on `nodes` of VM `k` after a change there.
    pub(super) fn reprice(&mut self, k: usize, nodes: &[u32], v: f64) {
        let mut ids = BTreeSet::new();
        for &n in nodes {
            ids.extend(self.vms[k].lanes[n as usize].iter().flatten().copied());
        }
        for id in ids {
            if !self.jobs.contains_key(&id) {
                continue;
            }
            self.settle(id, v);
            let sl = self.slowdown_of(id);
            self.jobs.get_mut(&id).expect("known").sl = sl;
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
        let mut pes = Vec::new();
        for s in &seats {
            let lane = &mut self.vms[k].lanes[s.node as usize][s.lane as usize];
            debug_assert!(lane.is_none(), "lane taken");
            *lane = Some(id);
            pes.extend(
                self.machine
                    .node_cores(NodeId(s.node), s.procs, s.lane)
                    .into_iter()
                    .map(|p| p.0),
            );
        }
        let kind = self.jobs[&id].kind;
        self.vms[kind].queue.retain(|&x| x != id);
        self.vms[kind].epoch += 1;
        self.vms[k].alloc.insert(id);
        self.vms[k].epoch += 1;
        let nodes: Vec<u32> = seats.iter().map(|s| s.node).collect();
        {
            let j = self.jobs.get_mut(&id).expect("known");
            j.allocated = true;
            j.vm = k;
            j.seats = seats;
            j.rem = j.req.estimate.as_secs_f64();
            j.mark = v;
            j.sl = 1.0;
        }
        self.reprice(k, &nodes, v);
        out.push(Decision::Start {
            job: id,
            pes: PeSet::from_pes(pes),
            slot: Some(k as u32),
        });
    }

    /// Seats of a space-shared job on free nodes: whole nodes, a job of up to one process per
    /// processor on lane 0 only (lane 1 stays open to coscheduling).
    pub(super) fn ssp_seats(&self, j: &Job, nodes: &[u32], ppn: u32) -> Vec<Seat> {
        let mut left = j.req.procs;
        let sockets = self.machine.sockets_per_node;
        let mut seats = Vec::new();
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
        let mut seats = Vec::new();
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
            self.vms[j.kind].queue.retain(|&x| x != id);
            self.vms[j.kind].epoch += 1;
            return;
        }
        let vm = &mut self.vms[j.vm];
        vm.alloc.remove(&id);
        vm.epoch += 1;
        let mut nodes = Vec::new();
        for s in &j.seats {
            let down = self.down.contains(&s.node);
            let lane = &mut vm.lanes[s.node as usize][s.lane as usize];
            if *lane == Some(id) {
                *lane = if down { Some(DOWN) } else { None };
            }
            nodes.push(s.node);
        }
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
        self.reprice(k, &nodes, v);
    }
}
