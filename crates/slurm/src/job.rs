//! What Slurm's commands show of a job, as one plain description ([`JobView`]) that the
//! formatters (`squeue`, `sacct`, `scontrol`) read. The `cosched` binary fills it from the
//! machine manager's records; tests fill it from the jobs of a real Slurm run, so the same
//! jobs can be compared line by line.

use crate::hostlist;
use crate::state::{JobState, Reason};
use crate::time::{Limit, LocalOffset};

/// One task of a job array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayTask {
    /// The array's id (Slurm's `ArrayJobId`, `%A` in file names).
    pub job: u64,
    /// The task's index (`ArrayTaskId`, `%a`).
    pub index: u32,
    /// At most this many of the array's tasks run at once.
    pub throttle: Option<u32>,
}

/// A job as Slurm's commands show it. Times are seconds since the epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct JobView {
    /// The job's own id (unique per array task, as Slurm's raw job id).
    pub id: u64,
    pub array: Option<ArrayTask>,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub group: String,
    pub gid: u32,
    pub partition: String,
    pub state: JobState,
    pub reason: Reason,
    pub submit: i64,
    /// When it became eligible to run (its dependencies and begin time met); `None` while
    /// it is not.
    pub eligible: Option<i64>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Time it ran (stopped time excluded).
    pub run_secs: i64,
    /// Time it stood suspended while allocated.
    pub suspended_secs: i64,
    pub limit: Limit,
    /// The nodes it holds or held, in node order, and its tasks on each.
    pub nodes: Vec<String>,
    pub tasks_per_node: Vec<u32>,
    pub ntasks: u32,
    /// Nodes it asks for (shown while it has none).
    pub req_nodes: u32,
    pub cpus_per_task: u32,
    /// The PEs it holds when more than its tasks': whole nodes (`--exclusive`).
    pub whole_node_cpus: Option<u32>,
    /// How it ended: exit status, or the signal that ended it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub work_dir: String,
    pub command: String,
    pub stdout: String,
    pub stderr: String,
    /// Its dependencies as Slurm writes them (`afterok:20`).
    pub dependency: Option<String>,
    pub held: bool,
    /// Times it was started again after a requeue.
    pub restarts: u32,
    /// Submitted as a batch script (sbatch) rather than run interactively.
    pub batch: bool,
    /// A step of the job (`batch`, `0`, `1`, …: `sacct`'s `N.batch`, `N.0` lines), not the
    /// allocation itself; its fields are the step's (`ntasks`, nodes, times, state).
    pub step: Option<String>,
}

impl JobView {
    /// Whether `-p/--partition` of squeue or sacct (`names`, none: every job) shows it: a job
    /// waiting on a list of partitions (`a,b`) is in each of them.
    pub fn in_partitions(&self, names: &[String]) -> bool {
        names.is_empty()
            || self
                .partition
                .split(',')
                .any(|p| names.iter().any(|n| n == p))
    }

    /// `6_1` for an array task, else the id; with `.S` for a step.
    pub fn id_text(&self) -> String {
        let id = match self.array {
            Some(a) => format!("{}_{}", a.job, a.index),
            None => self.id.to_string(),
        };
        self.with_step(id)
    }

    /// The raw id (`JobIDRaw`), with `.S` for a step.
    pub fn raw_id(&self) -> String {
        self.with_step(self.id.to_string())
    }

    fn with_step(&self, id: String) -> String {
        match &self.step {
            Some(s) => format!("{id}.{s}"),
            None => id,
        }
    }

    /// The compressed node list (empty while it holds none).
    pub fn node_list(&self) -> String {
        hostlist::compress(&self.nodes)
    }

    /// Nodes it holds, else nodes it asks for.
    pub fn num_nodes(&self) -> u32 {
        if self.nodes.is_empty() {
            self.req_nodes.max(1)
        } else {
            self.nodes.len() as u32
        }
    }

    pub fn num_cpus(&self) -> u32 {
        self.whole_node_cpus
            .unwrap_or_else(|| self.ntasks.saturating_mul(self.cpus_per_task.max(1)))
    }

    /// When it started, or for a pending job held back by a begin time still to come, that
    /// time (Slurm's expected start).
    pub fn start_time(&self, now: i64) -> Option<i64> {
        self.start.or(self
            .eligible
            .filter(|&e| e > now && self.state == JobState::Pending))
    }

    /// When it ended, or is expected to end: its start (or expected start) plus its limit
    /// and the time it stood suspended; `None` when unknown.
    pub fn end_time(&self, now: i64) -> Option<i64> {
        if let Some(e) = self.end {
            return Some(e);
        }
        match (self.start_time(now), self.limit) {
            (Some(s), Limit::Secs(l)) if self.state.is_live() => {
                Some(s + self.suspended_secs + l as i64)
            }
            _ => None,
        }
    }

    /// Slurm's priority for the job's place in the queue: later submissions rank lower,
    /// and a held job has 0 (as Slurm's basic priority plugin gives them).
    pub fn priority(&self) -> u64 {
        if self.held {
            0
        } else {
            u64::from(u32::MAX - 65_535).saturating_sub(self.id)
        }
    }

    /// Slurm's `ExitCode`: `status:signal`.
    pub fn exit_text(&self) -> String {
        format!(
            "{}:{}",
            self.exit_code.unwrap_or(0),
            self.signal.unwrap_or(0)
        )
    }
}

/// What a rendering needs besides the jobs: the time, the local time zone and the cluster.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// Now, in seconds since the epoch.
    pub now: i64,
    pub offset: LocalOffset,
    pub cluster: &'a str,
}
