//! Steps of an allocation: `srun` inside a running job asks for a step, the machine manager
//! places its tasks on the allocation's PEs ([`place_step`], a pure decision), records it
//! durably, and launches it on the nodes as a launch of its own ([`step_unit`]) whose ranks
//! join the allocation's cgroup, so that whatever stops, continues or kills the allocation
//! acts on every step in it. Policies and the simulator never see steps: they schedule
//! allocations.
//!
//! A batch job's script is the allocation's own launch, run once as rank 0 on its first
//! node ([`expected_ranks`]); a job submitted without a script is one implicit step of all
//! its PEs (its ranks).

use std::collections::{BTreeMap, BTreeSet};

use cosched_core::{JobId, NodeId, Time};
use cosched_ledger::Ix;

use super::changes::{Staged, Write};
use super::core::{Core, Effect, ReqId};
use cosched_proto::proto::*;

/// The ranks of a launch whose exits end the job: every rank of its placement, or for a
/// batch job the script alone (rank 0, on the first node).
pub(super) fn expected_ranks(placement: &[Placement], batch: bool) -> BTreeMap<u32, Option<i32>> {
    placement
        .iter()
        .flat_map(|p| p.ranks.iter().map(|&(r, _)| r))
        .filter(|&r| !batch || r == 0)
        .map(|r| (r, None))
        .collect()
}

/// The number of a job's next `srun` step: from 0 in a batch job; from 1 in a job started
/// without a script, whose own ranks are its step 0 (as Slurm's `srun` outside an
/// allocation makes `N.0`).
pub(super) fn next_step_id(batch: bool, steps: &[StepInfo]) -> u32 {
    steps.last().map_or(u32::from(!batch), |s| s.id + 1)
}

/// Why a step cannot start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepRefusal {
    /// Not now: the PEs it needs are held by the allocation's other running steps (`srun`
    /// waits and asks again, as Slurm's does).
    Busy(String),
    /// Never, in this allocation.
    Never(String),
}

/// Where the tasks of step `req` go within the allocation `alloc` (its nodes in order, with
/// their local PEs), given how many running steps hold each (node, local PE) (`busy`):
/// Slurm's rules within an allocation — `--nodelist` picks nodes of it, `-N n` the first
/// `n` of those, `--ntasks-per-node m` at most `m` on each, `-N` without it spreads the
/// tasks evenly (the first nodes one more), and otherwise the tasks fill the nodes in
/// order. Without `--overlap` a step takes only PEs no running step holds. Ranks are
/// numbered in node order (block distribution). With `--cpus-per-task c` each task holds
/// `c` PEs of one node: the counts are of tasks, a node holds as many as it has `c` PEs for.
/// In an allocation of whole nodes (`tasks`, `--exclusive`) a step that says nothing of
/// nodes spreads its tasks over all of them as the allocation's lie (Slurm's srun takes
/// the allocation's node count and `--ntasks-per-node`), not onto the first node's PEs.
pub fn place_step(
    alloc: &[Placement],
    tasks: Option<Tasks>,
    name_of: &dyn Fn(NodeId) -> String,
    busy: &BTreeMap<(NodeId, u32), u32>,
    req: &StepRequest,
) -> Result<Vec<Placement>, StepRefusal> {
    let never = |s: String| Err(StepRefusal::Never(s));
    let all_names = || {
        cosched_slurm::hostlist::compress(
            &alloc
                .iter()
                .map(|p| name_of(p.node))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
    };
    let mut nodes: Vec<&Placement> = if req.nodelist.is_empty() {
        alloc.iter().collect()
    } else {
        if let Some(name) = req
            .nodelist
            .iter()
            .find(|n| !alloc.iter().any(|p| name_of(p.node) == **n))
        {
            return never(format!(
                "--nodelist: node {name} is not in job {}'s allocation ({})",
                req.job,
                all_names()
            ));
        }
        // In the allocation's order, as Slurm lays a step out whatever the list's order.
        alloc
            .iter()
            .filter(|p| req.nodelist.contains(&name_of(p.node)))
            .collect()
    };
    let asked_nodes = req.nodes.is_some() || !req.nodelist.is_empty();
    if let Some(n) = req.nodes {
        if n == 0 || n as usize > nodes.len() {
            return never(format!(
                "-N {n}: job {}'s allocation has {} node(s) to give ({})",
                req.job,
                nodes.len(),
                all_names()
            ));
        }
        nodes.truncate(n as usize);
    }
    let c = req.cpus_per_task.unwrap_or(1).max(1);
    let ntasks = req.ntasks.unwrap_or(match req.tasks_per_node {
        Some(m) => m * nodes.len() as u32,
        None if asked_nodes => nodes.len() as u32,
        None => 1,
    });
    if ntasks == 0 {
        return never("-n 0: a step needs at least one task".into());
    }
    // The PEs of each node, those no running step holds first (all of them with
    // `--overlap`, least held first).
    let pes_of = |p: &Placement| -> (Vec<u32>, usize) {
        let mut pes: Vec<(u32, u32)> = p
            .pes()
            .map(|pe| (busy.get(&(p.node, pe)).copied().unwrap_or(0), pe))
            .collect();
        pes.sort_unstable();
        pes.dedup();
        let free = pes.iter().filter(|(held, _)| *held == 0).count();
        (pes.into_iter().map(|(_, pe)| pe).collect(), free)
    };
    // Tasks a node has room for.
    let cap = |p: &Placement| {
        let (all, free) = pes_of(p);
        (if req.overlap { all.len() } else { free }) as u32 / c
    };
    let room = |p: &Placement| pes_of(p).0.len() as u32 / c;
    let total: u32 = nodes.iter().map(|p| room(p)).sum();
    let mut counts: Vec<u32> = vec![0; nodes.len()];
    match req.tasks_per_node {
        Some(m) => {
            if ntasks > m * nodes.len() as u32 {
                return never(format!(
                    "-n {ntasks} with --ntasks-per-node={m} needs more than the {} node(s) given",
                    nodes.len()
                ));
            }
            let mut left = ntasks;
            for c in counts.iter_mut() {
                *c = m.min(left);
                left -= *c;
            }
        }
        None if asked_nodes => {
            let n = nodes.len() as u32;
            if ntasks < n {
                return never(format!(
                    "-n {ntasks} is fewer tasks than the {n} nodes asked for (-N, --nodelist)"
                ));
            }
            for (k, c) in counts.iter_mut().enumerate() {
                *c = ntasks / n + u32::from((k as u32) < ntasks % n);
            }
        }
        None if tasks.is_some() && ntasks >= nodes.len() as u32 => {
            let n = nodes.len() as u32;
            let per_node = tasks
                .and_then(|t| t.per_node)
                .filter(|&m| u64::from(m) * u64::from(n) >= u64::from(ntasks));
            counts = cosched_policy::spread::task_layout(ntasks, n, per_node);
        }
        None => {
            let mut left = ntasks;
            for (k, p) in nodes.iter().enumerate() {
                counts[k] = cap(p).min(left);
                left -= counts[k];
            }
            if left > 0 {
                // More tasks than free PEs: the remainder waits for PEs (or, past the
                // allocation's size, can never run).
                let mut left = ntasks;
                for (k, p) in nodes.iter().enumerate() {
                    counts[k] = room(p).min(left);
                    left -= counts[k];
                }
                if left > 0 {
                    return never(format!(
                        "-n {ntasks}{}: job {}'s allocation has room for {total} task(s) on the nodes given",
                        per_task(c),
                        req.job
                    ));
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut rank = 0;
    for (p, &count) in nodes.iter().zip(&counts) {
        if count == 0 {
            continue;
        }
        let (pes, free) = pes_of(p);
        let need = (count * c) as usize;
        if need > pes.len() {
            return never(format!(
                "{count} tasks{} on node {}: job {}'s allocation has {} PE(s) there",
                per_task(c),
                name_of(p.node),
                req.job,
                pes.len()
            ));
        }
        if !req.overlap && need > free {
            return Err(StepRefusal::Busy(format!(
                "Requested nodes are busy: {} of node {}'s {} PE(s) in job {} are held by running steps (srun --overlap shares them)",
                pes.len() - free,
                name_of(p.node),
                pes.len(),
                req.job
            )));
        }
        let mut placed = Placement {
            node: p.node,
            ranks: Vec::new(),
            extra_pes: Vec::new(),
        };
        for task in pes[..need].chunks(c as usize) {
            placed.ranks.push((rank, task[0]));
            placed
                .extra_pes
                .extend(task[1..].iter().map(|&pe| (rank, pe)));
            rank += 1;
        }
        out.push(placed);
    }
    Ok(out)
}

/// ` of c PEs each`, when a task has more than one.
fn per_task(c: u32) -> String {
    if c > 1 {
        format!(" of {c} PEs each")
    } else {
        String::new()
    }
}

impl Core {
    /// A step asked by `caller`: checked and placed, then staged to be recorded (answered
    /// once durable, [`Core::start_step`]); or answered at once with why it cannot start.
    pub(super) fn step_request(
        &mut self,
        now: Time,
        req: ReqId,
        r: StepRequest,
        caller: Caller,
    ) -> Option<Write> {
        match self.check_step(now, req, r, caller) {
            Ok(w) => Some(w),
            Err(resp) => {
                self.push(Effect::Reply { req, resp: *resp });
                None
            }
        }
    }

    fn check_step(
        &mut self,
        now: Time,
        req: ReqId,
        r: StepRequest,
        caller: Caller,
    ) -> Result<Write, Box<Response>> {
        let job = r.job;
        let Some(i) = self.ledger.find(job) else {
            return Err(Box::new(Response::Error(format!(
                "unknown job id {job} (SLURM_JOB_ID): srun starts a step only inside a running job of yours"
            ))));
        };
        if self.side[i].user != Some(caller.uid) && !caller.admin {
            return Err(Box::new(self.denied(i)));
        }
        if !self.live.contains(&i) || self.side[i].placement.is_empty() {
            let state = self.job_info(i, now).state;
            return Err(Box::new(Response::Error(format!(
                "job {job} is {} (not running): a step starts only in a running allocation",
                state.as_str()
            ))));
        }
        if r.cmd.is_empty() {
            return Err(Box::new(Response::Error("srun: no command given".into())));
        }
        let s = &self.side[i];
        let mut busy: BTreeMap<(NodeId, u32), u32> = BTreeMap::new();
        for st in s.steps.iter().filter(|st| !st.state.is_final()) {
            for p in &st.placement {
                for pe in p.pes() {
                    *busy.entry((p.node, pe)).or_default() += 1;
                }
            }
        }
        let name_of = |n: NodeId| self.node_name(n);
        let placement = match place_step(&s.placement, s.tasks, &name_of, &busy, &r) {
            Ok(p) => p,
            Err(StepRefusal::Busy(why)) => {
                return Err(Box::new(Response::Error(format!("{STEP_BUSY}{why}"))));
            }
            Err(StepRefusal::Never(why)) => return Err(Box::new(Response::Error(why))),
        };
        let ntasks: usize = placement.iter().map(|p| p.ranks.len()).sum();
        let step = StepInfo {
            id: next_step_id(s.io.batch, &s.steps),
            name: r.name.clone(),
            cmd: r.cmd.clone(),
            placement,
            state: JobState::Running,
            start_us: now.as_micros(),
            end_us: None,
            exit_code: None,
            ranks: vec![None; ntasks],
            error: None,
            overlap: r.overlap,
            kill_on_bad_exit: r.kill_on_bad_exit,
            cwd: r.cwd.clone(),
            io: JobIo { env: None, ..r.io },
        };
        let env = r.io.env.unwrap_or_default();
        Ok(self.stage(now, req, Staged::Step(i, Box::new(step), env)))
    }

    /// A node's name, or its number when unknown.
    pub(super) fn node_name(&self, n: NodeId) -> String {
        self.nodes
            .get(n.0 as usize)
            .map_or_else(|| n.to_string(), |e| e.row.name.clone())
    }

    /// Starts a recorded step: its launch goes to its nodes (the ranks join the
    /// allocation's cgroup there), with `env` (srun's) and the step's variables.
    pub(super) fn start_step(&mut self, i: Ix, step: StepInfo, env: Vec<(String, String)>) {
        let id = self.ledger.entry(i).req.id;
        let k = step.id;
        let layout: Vec<(String, u32)> = step
            .placement
            .iter()
            .map(|p| (self.node_name(p.node), p.ranks.len() as u32))
            .collect();
        let mut env = env;
        let vars = cosched_slurm::env::step_env(k, &layout);
        env.retain(|(k, _)| !vars.iter().any(|(v, _)| v == k));
        env.extend(vars);
        let s = &self.side[i];
        let launch = Launch {
            job: step_unit(id, k),
            size: step.ntasks(),
            cmd: step.cmd.clone(),
            cwd: step.cwd.clone(),
            env: Vec::new(),
            io: JobIo {
                env: Some(env),
                ..step.io.clone()
            },
            stopped: false,
            uid: s.user,
            gid: s.gid,
            placement: step.placement.clone(),
            run: s.run,
            // The allocation's cgroups hold its memory limit; the step joins them.
            mem: None,
            within: Some(id),
        };
        let to = step.placement.iter().map(|p| p.node).collect();
        self.side[i].steps.push(step);
        self.send(to, ToNode::Launch(launch));
        self.mark(i);
    }

    /// A rank of a step exited: the step ends once every rank has (failed when one exited
    /// non-zero, with the highest code); with `--kill-on-bad-exit` a non-zero exit kills the
    /// step's other ranks.
    pub(super) fn step_exit(
        &mut self,
        now: Time,
        unit: JobId,
        run: u32,
        from: NodeId,
        exit: RankExit,
    ) {
        let Some((i, s)) = self.step_of(unit, run) else {
            return;
        };
        let on = self.node_name(from);
        let st = &mut self.side[i].steps[s];
        if st.state.is_final() && !awaiting_exits(st) {
            return;
        }
        let Some(slot) = st.ranks.get_mut(exit.rank as usize).filter(|c| c.is_none()) else {
            return;
        };
        let code = exit.code.unwrap_or(-1);
        *slot = Some(code);
        if st.error.is_none() {
            st.error = match (&exit.error, code) {
                (Some(e), _) => Some(task_failed(&exit, &on, e)),
                (None, 0) => None,
                (None, c) => Some(format!(
                    "task {} on node {on} exited with code {c}",
                    exit.rank
                )),
            };
        }
        let done = st.ranks.iter().all(Option::is_some);
        let kill = code != 0 && st.kill_on_bad_exit && !done && !st.state.is_final();
        let nodes: Vec<NodeId> = st.placement.iter().map(|p| p.node).collect();
        if done {
            // An abort that named the step's failure gave its code already.
            let worst = st.ranks.iter().flatten().copied().max().unwrap_or(0);
            st.exit_code.get_or_insert(worst);
            let all_zero = st.ranks.iter().flatten().all(|&c| c == 0);
            // Slurm records a step by how its tasks ended: a cancel whose tasks all exited 0
            // anyway (they were finishing as it came) leaves it COMPLETED; one that ended a
            // task leaves it CANCELLED.
            st.state = match (st.state, all_zero) {
                (_, true) => JobState::Completed,
                (JobState::Cancelled, false) => JobState::Cancelled,
                (_, false) => JobState::Failed,
            };
            if all_zero {
                st.error = None;
            }
            st.end_us = Some(now.as_micros());
            self.send(nodes, ToNode::Forget { jobs: vec![unit] });
        } else if kill {
            self.kill_step(nodes, unit);
        }
        self.mark(i);
    }

    /// A task of a step called `MPI_Abort` (heard before its exit, as for a job: see
    /// [`Core::rank_aborted`]): unless a failure named the step's already, the abort does
    /// (the task, its node, the MPI's words and the abort's code, which becomes the step's),
    /// whatever exits follow; and the step's other tasks are killed, as `srun` ends a step
    /// one of whose tasks aborts. The allocation and its other steps go on.
    pub(super) fn step_aborted(&mut self, unit: JobId, run: u32, from: NodeId, exit: RankExit) {
        let Some((i, s)) = self.step_of(unit, run) else {
            return;
        };
        let on = self.node_name(from);
        let st = &mut self.side[i].steps[s];
        let running = st
            .ranks
            .get(exit.rank as usize)
            .is_some_and(Option::is_none);
        if st.state.is_final() || !running || st.error.is_some() {
            return;
        }
        let words = exit.error.as_deref().unwrap_or("MPI_Abort");
        st.error = Some(task_failed(&exit, &on, words));
        st.exit_code = exit.code;
        let nodes = st.placement.iter().map(|p| p.node).collect();
        self.kill_step(nodes, unit);
        self.mark(i);
    }

    /// The allocation and the place among its steps of step `unit`, of run `run`.
    fn step_of(&self, unit: JobId, run: u32) -> Option<(Ix, usize)> {
        let (id, k) = unit_step(unit)?;
        let i = self.ledger.find(id).filter(|&i| self.side[i].run == run)?;
        let s = self.side[i].steps.iter().position(|s| s.id == k)?;
        Some((i, s))
    }

    /// Ends the tasks of step `unit` on `nodes` (SIGTERM, then SIGKILL); they still report
    /// their exits.
    fn kill_step(&mut self, nodes: Vec<NodeId>, unit: JobId) {
        let kill = vec![unit];
        let (stop, cont) = (Vec::new(), Vec::new());
        self.send(nodes, ToNode::Switch { stop, cont, kill });
    }

    /// Whether step `unit` of run `run` of its job runs and has ranks on `node`.
    pub(super) fn step_runs_on(&self, unit: JobId, run: u32, node: NodeId) -> bool {
        let Some((id, k)) = unit_step(unit) else {
            return false;
        };
        self.ledger.find(id).is_some_and(|i| {
            let s = &self.side[i];
            s.run == run
                && s.steps.iter().find(|st| st.id == k).is_some_and(|st| {
                    !st.state.is_final() && st.placement.iter().any(|p| p.node == node)
                })
        })
    }

    /// The allocation ended (or goes back to the queue): its running steps end with it, as
    /// cancelled, and their processes go on their nodes.
    pub(super) fn end_steps(&mut self, i: Ix) {
        self.cancel_steps(i, "its allocation ended");
    }

    /// Whether `scancel N.S` or a killed `srun` may cancel step `k` of allocation `i`: `Ok`
    /// when it runs (the cancel is then staged, `Staged::StepCancel`); otherwise the
    /// answer: done already for a step that has ended, an error for one that does not exist.
    pub(super) fn check_step_cancel(&self, i: Ix, k: u32) -> Result<(), Box<Response>> {
        let id = self.ledger.entry(i).req.id;
        match self.side[i].steps.iter().find(|st| st.id == k) {
            None => Err(Box::new(Response::Error(format!(
                "job {id} has no step {k} (sacct -j {id} lists them)"
            )))),
            Some(st) if st.state.is_final() => Err(Box::new(Response::Done)),
            Some(_) => Ok(()),
        }
    }

    /// Allocation `i`'s record as the cancel of its step `k` at `now` leaves it: what must be
    /// durable before the cancel is answered.
    pub(super) fn step_cancelled_info(&self, i: Ix, k: u32, now: Time) -> JobInfo {
        let mut info = self.job_info(i, now);
        if let Some(st) = info.steps.iter_mut().find(|st| st.id == k) {
            cancelled(st, now.as_micros(), CANCELLED);
        }
        info
    }

    /// `scancel N.S` or a killed `srun`, durable: step `k` of allocation `i` is recorded
    /// cancelled and its tasks are ended (SIGTERM, then SIGKILL) on every node, which still
    /// report their exits: a step whose tasks all exit 0 is completed after all
    /// ([`Core::step_exit`]). The allocation and its other steps go on.
    pub(super) fn cancel_step(&mut self, i: Ix, k: u32) {
        let now = self.last_now.as_micros();
        let id = self.ledger.entry(i).req.id;
        let Some(st) = self.side[i]
            .steps
            .iter_mut()
            .find(|st| st.id == k && !st.state.is_final())
        else {
            return;
        };
        cancelled(st, now, CANCELLED);
        let nodes = st.placement.iter().map(|p| p.node).collect();
        self.kill_step(nodes, step_unit(id, k));
        self.mark(i);
    }

    /// Ends the running steps of allocation `i` as cancelled with `why`: their records say
    /// so and their nodes forget their processes (and those of cancelled steps whose exits
    /// are still awaited).
    fn cancel_steps(&mut self, i: Ix, why: &str) {
        let now = self.last_now.as_micros();
        let id = self.ledger.entry(i).req.id;
        let mut forget: BTreeSet<NodeId> = BTreeSet::new();
        let mut units = Vec::new();
        for st in self.side[i].steps.iter_mut() {
            if !st.state.is_final() {
                cancelled(st, now, why);
            } else if !awaiting_exits(st) {
                continue;
            }
            forget.extend(st.placement.iter().map(|p| p.node));
            units.push(step_unit(id, st.id));
        }
        if !units.is_empty() {
            self.send(forget.into_iter().collect(), ToNode::Forget { jobs: units });
            self.mark(i);
        }
    }
}

/// A step's failure as task `exit.rank` on node `on` explains it with `words`.
fn task_failed(exit: &RankExit, on: &str, words: &str) -> String {
    format!("task {} on node {on}: {words}", exit.rank)
}

/// The error a cancelled step's record keeps.
const CANCELLED: &str = "cancelled";

/// What a cancel at `now_us` (µs) writes in step `st`'s record: ended cancelled, with `why`.
pub(super) fn cancelled(st: &mut StepInfo, now_us: i64, why: &str) {
    st.state = JobState::Cancelled;
    st.end_us = Some(now_us);
    st.error.get_or_insert_with(|| why.into());
}

/// Whether step `st` was cancelled while some of its tasks still ran: their exits are still
/// taken in, and decide its state.
fn awaiting_exits(st: &StepInfo) -> bool {
    st.state == JobState::Cancelled && st.ranks.iter().any(Option::is_none)
}

/// The beginning of the answer to a step that must wait for PEs: `srun` asks again.
pub const STEP_BUSY: &str = "step creation temporarily disabled: ";

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc() -> Vec<Placement> {
        vec![
            Placement {
                node: NodeId(0),
                ranks: vec![(0, 0), (1, 1)],
                extra_pes: Vec::new(),
            },
            Placement {
                node: NodeId(2),
                ranks: vec![(2, 0), (3, 1)],
                extra_pes: Vec::new(),
            },
        ]
    }

    fn name(n: NodeId) -> String {
        format!("n{}", n.0)
    }

    fn req(f: impl FnOnce(&mut StepRequest)) -> StepRequest {
        let mut r = StepRequest {
            job: JobId(5),
            cmd: vec!["prog".into()],
            ..StepRequest::default()
        };
        f(&mut r);
        r
    }

    fn shape(p: &[Placement]) -> Vec<(u32, Vec<(u32, u32)>)> {
        p.iter().map(|p| (p.node.0, p.ranks.clone())).collect()
    }

    #[test]
    fn a_step_fills_the_allocation_in_node_order_and_numbers_ranks_from_zero() {
        let none = BTreeMap::new();
        let p = place_step(&alloc(), None, &name, &none, &req(|r| r.ntasks = Some(3))).unwrap();
        assert_eq!(
            shape(&p),
            vec![(0, vec![(0, 0), (1, 1)]), (2, vec![(2, 0)])]
        );
        let p = place_step(&alloc(), None, &name, &none, &req(|_| {})).unwrap();
        assert_eq!(shape(&p), vec![(0, vec![(0, 0)])]);
    }

    #[test]
    fn a_step_in_whole_nodes_spreads_over_them_as_the_allocations_tasks_lie() {
        // sbatch --exclusive -N 2 --ntasks-per-node=1: two tasks on whole nodes of 2 PEs;
        // `srun prog` (SLURM_NTASKS: 2) puts one on each, not both on the first.
        let none = BTreeMap::new();
        let tasks = Tasks {
            count: 2,
            per_node: Some(1),
            cpus: 1,
        };
        let two = req(|r| r.ntasks = Some(2));
        let p = place_step(&alloc(), Some(tasks), &name, &none, &two).unwrap();
        assert_eq!(shape(&p), vec![(0, vec![(0, 0)]), (2, vec![(1, 0)])]);
        // Three tasks: per node 1 cannot hold them, so evenly.
        let three = req(|r| r.ntasks = Some(3));
        let p = place_step(&alloc(), Some(tasks), &name, &none, &three).unwrap();
        assert_eq!(
            shape(&p),
            vec![(0, vec![(0, 0), (1, 1)]), (2, vec![(2, 0)])]
        );
        // A step that names its nodes places as it asks.
        let one_node = req(|r| {
            r.ntasks = Some(2);
            r.nodes = Some(1);
        });
        let p = place_step(&alloc(), Some(tasks), &name, &none, &one_node).unwrap();
        assert_eq!(shape(&p), vec![(0, vec![(0, 0), (1, 1)])]);
    }

    #[test]
    fn open_mpis_daemon_step_gets_one_task_on_each_listed_node() {
        // srun --ntasks-per-node=1 --nodes=2 --nodelist=n0,n2 --ntasks=2 orted ...
        let none = BTreeMap::new();
        let r = req(|r| {
            r.ntasks = Some(2);
            r.nodes = Some(2);
            r.tasks_per_node = Some(1);
            r.nodelist = vec!["n2".into(), "n0".into()];
        });
        let p = place_step(&alloc(), None, &name, &none, &r).unwrap();
        assert_eq!(shape(&p), vec![(0, vec![(0, 0)]), (2, vec![(1, 0)])]);
        let spread = place_step(&alloc(), None, &name, &none, &req(|r| r.nodes = Some(2))).unwrap();
        assert_eq!(shape(&spread), vec![(0, vec![(0, 0)]), (2, vec![(1, 0)])]);
    }

    #[test]
    fn a_step_waits_for_pes_other_steps_hold_unless_it_overlaps() {
        let mut busy = BTreeMap::new();
        busy.insert((NodeId(0), 0), 1);
        busy.insert((NodeId(0), 1), 1);
        let p = place_step(&alloc(), None, &name, &busy, &req(|r| r.ntasks = Some(2))).unwrap();
        assert_eq!(shape(&p), vec![(2, vec![(0, 0), (1, 1)])]);
        let wait = place_step(&alloc(), None, &name, &busy, &req(|r| r.ntasks = Some(4)));
        assert!(matches!(wait, Err(StepRefusal::Busy(_))), "{wait:?}");
        let shared = place_step(
            &alloc(),
            None,
            &name,
            &busy,
            &req(|r| {
                r.ntasks = Some(4);
                r.overlap = true;
            }),
        )
        .unwrap();
        assert_eq!(shared.iter().map(|p| p.ranks.len()).sum::<usize>(), 4);
    }

    #[test]
    fn cpus_per_task_gives_each_task_that_many_pes_of_one_node() {
        // srun -n 2 -c 2 in an allocation of two nodes of two PEs: a task on each node,
        // holding both its PEs.
        let none = BTreeMap::new();
        let r = req(|r| {
            r.ntasks = Some(2);
            r.cpus_per_task = Some(2);
        });
        let p = place_step(&alloc(), None, &name, &none, &r).unwrap();
        assert_eq!(shape(&p), vec![(0, vec![(0, 0)]), (2, vec![(1, 0)])]);
        assert_eq!(p[0].extra_pes, vec![(0, 1)]);
        assert_eq!(p[1].extra_pes, vec![(1, 1)]);
        // One PE of node 0 held by another step: no room for a task there now.
        let mut busy = BTreeMap::new();
        busy.insert((NodeId(0), 1), 1);
        let wait = place_step(&alloc(), None, &name, &busy, &r);
        assert!(matches!(wait, Err(StepRefusal::Busy(_))), "{wait:?}");
        // Three tasks of two PEs never fit in two nodes of two PEs.
        let big = req(|r| {
            r.ntasks = Some(3);
            r.cpus_per_task = Some(2);
        });
        let got = place_step(&alloc(), None, &name, &none, &big);
        assert!(matches!(got, Err(StepRefusal::Never(_))), "{got:?}");
    }

    #[test]
    fn a_step_beyond_the_allocation_is_refused_for_good() {
        let none = BTreeMap::new();
        for r in [
            req(|r| r.ntasks = Some(5)),
            req(|r| r.nodes = Some(3)),
            req(|r| r.nodelist = vec!["n1".into()]),
            req(|r| {
                r.ntasks = Some(3);
                r.tasks_per_node = Some(1);
            }),
        ] {
            let got = place_step(&alloc(), None, &name, &none, &r);
            assert!(matches!(got, Err(StepRefusal::Never(_))), "{r:?}: {got:?}");
        }
    }

    #[test]
    fn a_batch_job_waits_for_its_script_alone() {
        let ranks = expected_ranks(&alloc(), true);
        assert_eq!(ranks.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(expected_ranks(&alloc(), false).len(), 4);
    }
}
