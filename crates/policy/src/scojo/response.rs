//! Response-time estimates at submission: the FCFS forecast plan of a VM, kept between
//! submissions, and the simulator's forecast that debug builds check it against.

use std::collections::{BTreeMap, VecDeque};

use cosched_core::{Dur, JobId, MachineShape, NodeId, PeSet, Time};

use super::{SHORT, Scojo, Space, Vm};
use crate::forecast::{LiveJob, LiveState, SharedForecaster, Snapshot};
use crate::{JobRequest, PolicyConfig};

/// An FCFS forecast of one VM on whole nodes (the response-time estimates): the queue's
/// head, in order, starts once its nodes are free, no earlier than the job before it. Jobs
/// are placed one by one from the head; the plan answers for the queue as it was when it
/// was made, and goes on from where it stopped while the VM's state and clock are the same
/// (the queue only grows at its tail in between).
#[derive(Clone, Debug)]
pub(super) struct FcfsPlan {
    /// The VM's epoch and clock (µs) it was made at.
    pub(super) epoch: u64,
    pub(super) at: Time,
    /// How many jobs of the queue, from the head, it has placed.
    pub(super) placed: usize,
    /// How many of the nodes that are up are free of the running jobs and the jobs placed
    /// from each time on, by time ascending, one entry per time: a job takes its nodes from
    /// the earliest times and gives them all back at one time, so a count per time does in
    /// a few steps what a time per node does in one step per node. Taken from the front and
    /// given back mostly near the back (a job ends after the releases it waited for), which
    /// a ring buffer does in place.
    pub(super) free_at: VecDeque<(Time, u32)>,
    /// The nodes that are up (the sum of the counts).
    pub(super) up: u32,
    /// The last placed job's start (no later job starts before it); `None` once a job
    /// needs more nodes than are up, and then no later job ever starts.
    pub(super) last: Option<Time>,
}

impl FcfsPlan {
    /// Places a job of `nodes` nodes for `dur` and returns its start.
    pub(super) fn place(&mut self, nodes: u32, dur: Dur) -> Option<Time> {
        let last = self.last?;
        if nodes > self.up {
            self.last = None;
            return None;
        }
        // The `nodes` first free: any nodes free at the start serve, and every later job
        // starts no earlier.
        let mut at = last;
        let mut need = nodes;
        while need > 0 {
            let first = self.free_at.front_mut().expect("counted above");
            at = at.max(first.0);
            if first.1 <= need {
                need -= first.1;
                self.free_at.pop_front();
            } else {
                first.1 -= need;
                need = 0;
            }
        }
        if nodes > 0 {
            let end = at + dur;
            let i = self.free_at.partition_point(|&(t, _)| t < end);
            match self.free_at.get_mut(i) {
                Some(same) if same.0 == end => same.1 += nodes,
                _ => self.free_at.insert(i, (end, nodes)),
            }
        }
        self.last = Some(at);
        Some(at)
    }
}

impl Scojo {
    /// The response-time estimate of a job just submitted (seed 001, §4.2 and §5.1: "an FCFS
    /// simulation with space sharing at job submission", scaled by 0.75): when the job of
    /// its VM would start under FCFS on whole nodes ([`Scojo::fcfs_start`]), its estimated
    /// run at its SSP slowdown from there, converted from VM time to wall time along the
    /// slice timeline.
    pub(super) fn estimate_response(&mut self, id: JobId, now: Time) -> f64 {
        let j = &self.jobs[&id];
        let k = j.kind;
        if k == SHORT {
            return j.req.estimate.as_secs_f64().max(1.0);
        }
        let (run, submit) = (j.space.dur, j.req.submit);
        let v = self.vms[k].vnow(now);
        // A job that never starts under FCFS (too few nodes up) is taken to start at once:
        // the smallest estimate, the strictest fairness.
        let start = self.fcfs_start(id, now).unwrap_or(v);
        if cfg!(debug_assertions)
            && let Some(f) = &self.forecaster
        {
            let engine = self.engine_fcfs_start(f, id, now);
            debug_assert_eq!(
                engine.unwrap_or(v),
                start,
                "job {id}: FCFS plan and forecast"
            );
        }
        let end = self.wall_at(k, start + run, now);
        (self.cfg.r_est_scale * (end - submit).as_secs_f64()).max(1.0)
    }

    /// When job `id`, waiting in its VM, would start (VM time) if the VM ran FCFS with
    /// space sharing from now: the VM's [`FcfsPlan`], made again if the VM changed or its
    /// clock moved since it was made, carried on to `id` from where it stopped. `None` if
    /// the job never starts (too few nodes up).
    pub(super) fn fcfs_start(&mut self, id: JobId, now: Time) -> Option<Time> {
        let k = self.jobs[&id].kind;
        let vt = self.vms[k].vnow(now);
        let epoch = self.vms[k].epoch;
        let pos = |vm: &Vm, from: usize| {
            vm.queue
                .get(from..)
                .and_then(|q| q.iter().position(|&x| x == id))
                .map(|p| p + from)
        };
        let vm = &self.vms[k];
        let kept = vm
            .plan
            .as_ref()
            .filter(|p| p.epoch == epoch && p.at == vt)
            .and_then(|p| pos(vm, p.placed).map(|i| (p.placed, i)));
        let (from, to) = match kept {
            Some(r) => r,
            None => {
                let free = vm.free;
                // The counts are gathered in a sorted run, which is the plan's order. No
                // release is before `vt`, so the free nodes go first.
                let mut steps: Vec<(Time, u32)> = Vec::new();
                self.release_counts(k, vt, &mut steps);
                if free > 0 {
                    steps.insert(0, (vt, free));
                }
                let up = steps.iter().map(|&(_, n)| n).sum();
                let free_at: VecDeque<(Time, u32)> = steps
                    .chunk_by(|a, b| a.0 == b.0)
                    .map(|run| (run[0].0, run.iter().map(|&(_, n)| n).sum::<u32>()))
                    .collect();
                let to = pos(vm, 0)?;
                self.vms[k].plan = Some(FcfsPlan {
                    epoch,
                    at: vt,
                    placed: 0,
                    free_at,
                    up,
                    last: Some(vt),
                });
                (0, to)
            }
        };
        let vm = &mut self.vms[k];
        let plan = vm.plan.as_mut().expect("made above");
        let mut start = None;
        for s in &vm.queue.spaces()[from..=to] {
            start = plan.place(s.nodes, s.dur);
        }
        plan.placed = to + 1;
        start
    }

    /// [`Scojo::fcfs_start`] by the simulator's forecast (the check of debug builds): a fresh
    /// FCFS policy on a machine of one PE per node, told the VM's state (each occupied node
    /// busy until its occupants' expected end, the waiting jobs up to `id` in queue order,
    /// each on the nodes of formula 11's PPN for its estimate times its self-slowdown), run
    /// forward by the simulator's engine. `None` if the forecast has it never start or fails.
    pub(super) fn engine_fcfs_start(
        &self,
        forecaster: &SharedForecaster,
        id: JobId,
        now: Time,
    ) -> Option<Time> {
        let k = self.jobs[&id].kind;
        let vm = &self.vms[k];
        let vt = vm.vnow(now);
        // Nodes by the time they are released: one running pseudo-job per release time
        // (jobs in a group share nodes, which FCFS on whole nodes cannot express job by job).
        let mut releases: BTreeMap<Time, Vec<u32>> = BTreeMap::new();
        for (n, end) in self.node_releases_iter(k, vt) {
            releases.entry(end).or_default().push(n);
        }
        let mut jobs = Vec::new();
        for (r, (end, nodes)) in releases.into_iter().enumerate() {
            // Ids above every real job's (and below DOWN's marker).
            let pseudo = JobId(u64::MAX - 1 - r as u64);
            jobs.push(LiveJob {
                req: JobRequest::new(pseudo, vt, nodes.len() as u32, end - vt),
                state: LiveState::Running {
                    pes: PeSet::from_pes(nodes),
                    ran: Dur::ZERO,
                },
                started: Some(vt),
                held: false,
            });
        }
        for &q in vm.queue.iter() {
            let x = &self.jobs[&q];
            let Space { nodes, dur, .. } = x.space;
            jobs.push(LiveJob {
                req: JobRequest::new(q, x.req.submit, nodes, dur),
                state: LiveState::Waiting { ran: Dur::ZERO },
                started: None,
                held: false,
            });
            // Under FCFS no later job can move an earlier one.
            if q == id {
                break;
            }
        }
        let machine = MachineShape::flat(self.machine.nodes, 1);
        let mut fcfs = crate::fcfs::Fcfs::new(&PolicyConfig::new(machine)).ok()?;
        let snapshot = Snapshot {
            introduce: true,
            machine,
            migration: true,
            now: vt,
            jobs,
            timers: Vec::new(),
            down: self.down.iter().map(|&n| NodeId(n)).collect(),
        };
        let f = forecaster.forecast(&mut fcfs, &snapshot).ok()?;
        f.iter().find(|e| e.job == id)?.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The FCFS placement on a map of free nodes by time (one search of the map per step):
    /// what [`FcfsPlan::place`] computes on its ring buffer.
    fn place_on_map(
        free_at: &mut BTreeMap<Time, u32>,
        up: u32,
        last: &mut Option<Time>,
        nodes: u32,
        dur: Dur,
    ) -> Option<Time> {
        let prev = (*last)?;
        if nodes > up {
            *last = None;
            return None;
        }
        let mut at = prev;
        let mut need = nodes;
        while need > 0 {
            let mut first = free_at.first_entry().expect("enough nodes up");
            at = at.max(*first.key());
            let n = first.get_mut();
            if *n <= need {
                need -= *n;
                first.remove();
            } else {
                *n -= need;
                need = 0;
            }
        }
        if nodes > 0 {
            *free_at.entry(at + dur).or_default() += nodes;
        }
        *last = Some(at);
        Some(at)
    }

    proptest! {
        /// Random releases and jobs placed one after the other: the same starts as on a map
        /// of counts by time, and the same counts left.
        #[test]
        fn placing_on_the_ring_buffer_matches_the_map(
            releases in proptest::collection::btree_map(0i64..500, 1u32..6, 1..12),
            jobs in proptest::collection::vec((0u32..14, 0i64..300), 0..40),
        ) {
            let at = Time::from_secs;
            let map: BTreeMap<Time, u32> =
                releases.iter().map(|(&t, &n)| (at(t), n)).collect();
            let up = map.values().sum();
            let mut plan = FcfsPlan {
                epoch: 0,
                at: Time::ZERO,
                placed: 0,
                free_at: map.iter().map(|(&t, &n)| (t, n)).collect(),
                up,
                last: Some(Time::ZERO),
            };
            let (mut want_map, mut want_last) = (map, Some(Time::ZERO));
            for (nodes, dur) in jobs {
                let dur = Dur::from_secs(dur);
                let want = place_on_map(&mut want_map, up, &mut want_last, nodes, dur);
                prop_assert_eq!(plan.place(nodes, dur), want);
                let left: Vec<(Time, u32)> = want_map.iter().map(|(&t, &n)| (t, n)).collect();
                prop_assert_eq!(plan.free_at.iter().copied().collect::<Vec<_>>(), left);
            }
        }
    }
}
