//! The `SLURM_*` environment of a batch script and of a step's tasks, from a description of
//! the allocation — what scripts read, and what MPI launchers read to recognise an
//! allocation: MPICH's Hydra wants `SLURM_JOB_NODELIST` (or `SLURM_NODELIST`),
//! `SLURM_JOB_NUM_NODES` (or `SLURM_NNODES`) and `SLURM_TASKS_PER_NODE` in Slurm's `2(x3)`
//! form, and its proxies `SLURM_NODEID`; Open MPI's PRRTE wants `SLURM_JOB_ID` (or
//! `SLURM_JOBID`), `SLURM_NODELIST`, `SLURM_TASKS_PER_NODE` (or `SLURM_JOB_CPUS_PER_NODE`),
//! `SLURM_CPUS_PER_TASK`, and on each node `SLURM_NODEID` and `SLURMD_NODENAME`. Both then
//! start their daemons with `srun` (`srun --nodes=N --nodelist=L --ntasks=N
//! --ntasks-per-node=1 ...`), which needs job steps.
//!
//! Three parts, by when they are known: [`submit_env`] at submission (the same for every
//! task of an array), [`allocation_env`] when the job gets its nodes, [`task_env`] for one
//! task of a step. The names and forms follow what Slurm 22.05 sets (captured on loopback;
//! see the tests).

use crate::{counts, hostlist};

/// What is known of a job when it is submitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Submission {
    pub submit_dir: String,
    pub submit_host: String,
    pub cluster: String,
    pub partition: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// `--cpus-per-task`, when given.
    pub cpus_per_task: Option<u32>,
    /// `--ntasks-per-node`, when given.
    pub ntasks_per_node: Option<u32>,
    /// The indices of the job's array, when it is one.
    pub array: Option<Vec<u32>>,
}

type Env = Vec<(String, String)>;

/// `--cpus-per-task` as the tasks see it, and as `srun` inside an allocation reads it.
pub const CPUS_PER_TASK: &str = "SLURM_CPUS_PER_TASK";

fn set(env: &mut Env, k: &str, v: impl ToString) {
    env.push((k.to_string(), v.to_string()));
}

/// The variables known at submission.
pub fn submit_env(s: &Submission) -> Env {
    let mut env = Env::new();
    set(&mut env, "SLURM_SUBMIT_DIR", &s.submit_dir);
    set(&mut env, "SLURM_SUBMIT_HOST", &s.submit_host);
    set(&mut env, "SLURM_CLUSTER_NAME", &s.cluster);
    set(&mut env, "SLURM_JOB_PARTITION", &s.partition);
    set(&mut env, "SLURM_JOB_USER", &s.user);
    set(&mut env, "SLURM_JOB_UID", s.uid);
    set(&mut env, "SLURM_JOB_GID", s.gid);
    if let Some(c) = s.cpus_per_task {
        set(&mut env, CPUS_PER_TASK, c);
    }
    if let Some(n) = s.ntasks_per_node {
        set(&mut env, "SLURM_NTASKS_PER_NODE", n);
    }
    if let Some(idx) = s.array.as_deref().filter(|i| !i.is_empty()) {
        let (min, max) = (idx[0], idx[idx.len() - 1]);
        // Slurm's step is the stride of an evenly spaced array, else 1.
        let step = match idx {
            [a, b, ..] if idx.windows(2).all(|w| w[1] - w[0] == b - a) => b - a,
            _ => 1,
        };
        set(&mut env, "SLURM_ARRAY_TASK_COUNT", idx.len());
        set(&mut env, "SLURM_ARRAY_TASK_MAX", max);
        set(&mut env, "SLURM_ARRAY_TASK_MIN", min);
        set(&mut env, "SLURM_ARRAY_TASK_STEP", step.max(1));
    }
    env
}

/// A job with its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation<'a> {
    pub job_id: u64,
    pub name: &'a str,
    /// `(array id, index)` of an array task.
    pub array: Option<(u64, u32)>,
    /// Its nodes in node order, with its tasks on each.
    pub nodes: &'a [(String, u32)],
    /// The CPUs (PEs) it holds on each of its nodes, in the same order: its tasks' (times
    /// `--cpus-per-task`), or whole nodes' (`--exclusive`).
    pub cpus: &'a [u32],
}

impl Allocation<'_> {
    fn ntasks(&self) -> u32 {
        self.nodes.iter().map(|n| n.1).sum()
    }
    fn node_list(&self) -> String {
        hostlist::compress(&self.nodes.iter().map(|n| n.0.as_str()).collect::<Vec<_>>())
    }
    fn tasks_per_node(&self) -> String {
        counts::compress(&self.nodes.iter().map(|n| n.1).collect::<Vec<_>>())
    }
}

/// The job-wide variables of an allocation (the same on every node and task).
pub fn allocation_env(a: &Allocation) -> Env {
    let mut env = Env::new();
    let nodes = a.node_list();
    let cpus = counts::compress(a.cpus);
    set(&mut env, "SLURM_JOB_ID", a.job_id);
    set(&mut env, "SLURM_JOBID", a.job_id);
    set(&mut env, "SLURM_JOB_NAME", a.name);
    set(&mut env, "SLURM_NTASKS", a.ntasks());
    set(&mut env, "SLURM_NPROCS", a.ntasks());
    set(&mut env, "SLURM_JOB_NODELIST", &nodes);
    set(&mut env, "SLURM_NODELIST", &nodes);
    set(&mut env, "SLURM_JOB_NUM_NODES", a.nodes.len());
    set(&mut env, "SLURM_NNODES", a.nodes.len());
    set(&mut env, "SLURM_TASKS_PER_NODE", a.tasks_per_node());
    set(&mut env, "SLURM_JOB_CPUS_PER_NODE", cpus);
    if let Some((job, index)) = a.array {
        set(&mut env, "SLURM_ARRAY_JOB_ID", job);
        set(&mut env, "SLURM_ARRAY_TASK_ID", index);
    }
    env
}

/// Which step a task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// The batch script, run once on the first node.
    Batch,
    /// Step `N` (`srun`), its tasks spread over `nodes` of the allocation.
    Step(u32),
}

/// One task of a step: its rank, and the step's layout (tasks on each of the step's nodes,
/// in block order: the first node's tasks are ranks 0.., the next node's follow).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task<'a> {
    pub step: StepKind,
    pub rank: u32,
    /// The step's nodes and its tasks on each (the batch step: the first node, 1 task).
    pub layout: &'a [(String, u32)],
}

/// The variables of one task: its rank, its place, and for an `srun` step the step's shape.
pub fn task_env(t: &Task) -> Env {
    let mut env = Env::new();
    let mut first = 0;
    let mut place = (0, 0, "");
    for (i, (name, n)) in t.layout.iter().enumerate() {
        if t.rank < first + n {
            place = (i, t.rank - first, name.as_str());
            break;
        }
        first += n;
    }
    let (node_id, local_id, node) = place;
    set(&mut env, "SLURM_PROCID", t.rank);
    set(&mut env, "SLURM_LOCALID", local_id);
    set(&mut env, "SLURM_NODEID", node_id);
    set(&mut env, "SLURMD_NODENAME", node);
    set(&mut env, "SLURM_TOPOLOGY_ADDR", node);
    set(&mut env, "SLURM_TOPOLOGY_ADDR_PATTERN", "node");
    // The global ranks on this node.
    let start: u32 = t.layout[..node_id].iter().map(|n| n.1).sum();
    let here = t.layout.get(node_id).map_or(0, |n| n.1);
    let gtids: Vec<String> = (start..start + here).map(|r| r.to_string()).collect();
    set(&mut env, "SLURM_GTIDS", gtids.join(","));
    set(&mut env, "SLURM_CPUS_ON_NODE", here.max(1));
    if let StepKind::Step(id) = t.step {
        env.extend(step_env(id, t.layout));
    }
    env
}

/// The variables of an `srun` step, the same for each of its tasks: its id and shape, and
/// the task count and nodes `srun` sets for the step over the allocation's
/// (`SLURM_NTASKS`, `SLURM_NNODES`, `SLURM_NODELIST`, `SLURM_TASKS_PER_NODE`; the
/// `SLURM_JOB_*` ones stay the allocation's).
pub fn step_env(id: u32, layout: &[(String, u32)]) -> Env {
    let mut env = Env::new();
    let nodes = hostlist::compress(&layout.iter().map(|n| n.0.as_str()).collect::<Vec<_>>());
    let tasks: Vec<u32> = layout.iter().map(|n| n.1).collect();
    let ntasks: u32 = tasks.iter().sum();
    let per_node = counts::compress(&tasks);
    set(&mut env, "SLURM_STEP_ID", id);
    set(&mut env, "SLURM_STEPID", id);
    set(&mut env, "SLURM_STEP_NODELIST", &nodes);
    set(&mut env, "SLURM_STEP_NUM_NODES", layout.len());
    set(&mut env, "SLURM_STEP_NUM_TASKS", ntasks);
    set(&mut env, "SLURM_STEP_TASKS_PER_NODE", &per_node);
    set(&mut env, "SLURM_NTASKS", ntasks);
    set(&mut env, "SLURM_NPROCS", ntasks);
    set(&mut env, "SLURM_NNODES", layout.len());
    set(&mut env, "SLURM_NODELIST", &nodes);
    set(&mut env, "SLURM_TASKS_PER_NODE", &per_node);
    env
}
