//! What the machine manager answers a client: the responses and the job, node and status
//! records they carry.

use super::*;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    Submitted(JobId),
    Jobs(JobsPage),
    Done,
    Status(StatusInfo),
    Output(RankOutput),
    Error(String),
    Monitor(NodeMonitor),
    /// The answer to [`Request::Forecast`]: one entry per live job the policy knows, times in
    /// µs since the epoch.
    Forecast(Vec<cosched_policy::forecast::Expected>),
    Bcast(BcastReply),
    /// A reconfiguration was accepted: what changes.
    Reconfigured(String),
    /// The cluster key was rotated: where the new one is, until when the old one is accepted,
    /// which nodes did not confirm.
    KeyRotated(String),
    /// The credential the machine manager now accepts for a user.
    Credential(crate::user_key::Credential),
    /// The step started (boxed: larger than the other answers).
    Step(Box<StepInfo>),
}

/// What [`Request::Output`] brings back of a rank's files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Where the files are, when the job gave `--output`/`--error` patterns.
    pub files: Vec<String>,
    /// The whole sizes of the standard output and error files: when larger than what came,
    /// the file was cut to its first (or, asked with `tail`, last) bytes.
    pub sizes: (u64, u64),
    /// The end of the files was asked for.
    pub tail: bool,
}

impl RankOutput {
    /// Whether either file is longer than what came.
    pub fn cut(&self) -> bool {
        self.sizes.0 > self.stdout.len() as u64 || self.sizes.1 > self.stderr.len() as u64
    }
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    /// Allocated but stopped (time-slicing, a user's suspend, a preemption).
    Suspended,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
    NodeFailed,
    /// The policy found it can never run on this machine (the error says why).
    Rejected,
    /// The kernel killed it for taking more memory than its `--mem` (Slurm's OUT_OF_MEMORY).
    OutOfMemory,
}

impl JobState {
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            JobState::Queued | JobState::Running | JobState::Suspended
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Suspended => "suspended",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::TimedOut => "timed_out",
            JobState::NodeFailed => "node_failed",
            JobState::Rejected => "rejected",
            JobState::OutOfMemory => "out_of_memory",
        }
    }
    /// The ledger's outcome of an ended job.
    pub fn outcome(self) -> Option<cosched_core::Outcome> {
        use cosched_core::Outcome;
        match self {
            JobState::Queued | JobState::Running | JobState::Suspended => None,
            JobState::Completed => Some(Outcome::Completed),
            JobState::Failed => Some(Outcome::Failed),
            JobState::Cancelled => Some(Outcome::Cancelled),
            JobState::TimedOut => Some(Outcome::TimedOut),
            JobState::NodeFailed => Some(Outcome::NodeFailed),
            JobState::Rejected => Some(Outcome::Rejected),
            JobState::OutOfMemory => Some(Outcome::OutOfMemory),
        }
    }
}

/// Everything recorded about a job: persisted by the machine manager, shown by the clients.
/// Times are the machine manager's (microseconds since the Unix epoch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job ledger's record — submission, first start, end, stopped time, PEs (those it
    /// holds, while it lives), preemptions, outcome, exit code: the very record the
    /// simulator writes.
    pub record: JobRecord,
    pub state: JobState,
    pub name: String,
    pub class: Option<String>,
    /// The submitting user (its ranks run as this user when the node managers are root).
    pub user: Option<u32>,
    /// The submitting user's group, as the machine manager established it.
    #[serde(default)]
    pub gid: Option<u32>,
    pub time_limit_us: Option<i64>,
    pub cmd: Vec<String>,
    pub cwd: String,
    /// Time actually run (what the time limit counts).
    pub run_us: i64,
    pub placement: Vec<Placement>,
    /// Why it failed (launch error, lost node, time limit, …).
    pub error: Option<String>,
    /// Stopped by a user's `suspend`.
    pub held: bool,
    /// Environment and output patterns; the environment is kept only in the database and
    /// the launch (answers to clients leave it out).
    #[serde(default)]
    pub io: JobIo,
    /// Its dependencies and begin time (`array` is `None`: see `io.array`).
    #[serde(default)]
    pub sched: Schedule,
    /// Why a queued job is not yet given to the policy (dependency, begin time, array
    /// throttle), as Slurm's reason column; not persisted meaningfully (computed).
    #[serde(default)]
    pub reason: Option<String>,
    /// Launches so far (see [`Launch::run`]).
    #[serde(default)]
    pub run: u32,
    /// Its memory limit (`--mem`, `--mem-per-cpu`).
    #[serde(default)]
    pub mem: Option<MemLimit>,
    /// Where its tasks may go by node, when it asked (`-N`, `--nodelist`, …).
    #[serde(default)]
    pub spread: Option<Box<cosched_policy::Spread>>,
    /// Its steps (`srun` inside it), in the order they started.
    #[serde(default)]
    pub steps: Vec<StepInfo>,
    /// The partition it runs in; `None`: the one partition of a cluster that configures
    /// none.
    #[serde(default)]
    pub partition: Option<String>,
    /// Its tasks when fewer than its ranks: `--exclusive` gives it whole nodes.
    #[serde(default)]
    pub tasks: Option<Tasks>,
}

/// The tasks of an allocation of whole nodes (`--exclusive`), fewer than its PEs: how many,
/// at most how many on a node, and the PEs each holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Tasks {
    pub count: u32,
    /// `--ntasks-per-node`.
    pub per_node: Option<u32>,
    /// `--cpus-per-task` (1 without it).
    pub cpus: u32,
}

impl Tasks {
    /// How many of them lie on each of `nodes` nodes, in node order (Slurm's block
    /// distribution, [`cosched_policy::spread::task_layout`]).
    pub fn layout(&self, nodes: u32) -> Vec<u32> {
        cosched_policy::spread::task_layout(self.count, nodes, self.per_node)
    }
}

#[derive(Deserialize)]
struct TasksFields {
    count: u32,
    per_node: Option<u32>,
    cpus: u32,
}

/// A database record's `tasks` (JSON): the fields, or the count alone (a record that kept
/// only the count: spread evenly, a PE each).
#[derive(Deserialize)]
#[serde(untagged)]
enum TasksRecord {
    Count(u32),
    Fields(TasksFields),
}

impl<'de> Deserialize<'de> for Tasks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Tasks, D::Error> {
        // The wire (postcard) always carries the fields, and cannot read an untagged form.
        let f = if d.is_human_readable() {
            match TasksRecord::deserialize(d)? {
                TasksRecord::Count(count) => {
                    return Ok(Tasks {
                        count,
                        per_node: None,
                        cpus: 1,
                    });
                }
                TasksRecord::Fields(f) => f,
            }
        } else {
            TasksFields::deserialize(d)?
        };
        Ok(Tasks {
            count: f.count,
            per_node: f.per_node,
            cpus: f.cpus,
        })
    }
}

impl JobInfo {
    pub fn id(&self) -> JobId {
        self.record.id
    }
    pub fn procs(&self) -> u32 {
        self.record.procs
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    pub name: String,
    /// `up`, `not_responding` (silent for `--suspect-after`: nothing new starts there, its
    /// jobs keep running), `joining` (registered, not yet back in the tree: nothing is sent
    /// to it) or `down`; or taken out of service by an administrator: `draining` (its jobs
    /// still run), `drained`, `down` (with `reason`); or `removed` from the configuration.
    pub state: String,
    pub addr: String,
    pub pes: u32,
    /// Why an administrator drained it or set it down, who did and when.
    pub reason: Option<NodeChange>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatusInfo {
    pub policy: String,
    pub nodes_total: u32,
    pub pes_per_node: u32,
    pub fanout: u32,
    pub tree_depth: u32,
    pub nodes: Vec<NodeInfo>,
    /// `slots[s][pe]` = the job holding PE `pe` in slot `s`.
    pub slots: Vec<Vec<Option<JobId>>>,
    pub active_slot: Option<u32>,
    /// Jobs running now, per PE.
    pub running: Vec<Option<JobId>>,
    /// Multi-context-switch messages sent down the tree since the MM started.
    pub switches: u64,
    /// The configured partitions; empty: one of every node, `all`.
    #[serde(default)]
    pub partitions: Vec<PartitionInfo>,
}

/// A partition as clients see it (`sinfo`, `scontrol show partition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub name: String,
    /// Its nodes, by name.
    pub nodes: Vec<String>,
    /// Jobs that name no partition run in it.
    pub default: bool,
    /// The longest time limit a job of it may ask.
    pub max_time_us: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_tasks_read_as_the_count_alone_or_with_their_layout() {
        let t: Tasks = serde_json::from_str("3").unwrap();
        let even = Tasks {
            count: 3,
            per_node: None,
            cpus: 1,
        };
        assert_eq!(t, even);
        let full = Tasks {
            count: 4,
            per_node: Some(1),
            cpus: 2,
        };
        let text = serde_json::to_string(&full).unwrap();
        assert_eq!(serde_json::from_str::<Tasks>(&text).unwrap(), full);
        let wire = postcard::to_allocvec(&Some(full)).unwrap();
        assert_eq!(
            postcard::from_bytes::<Option<Tasks>>(&wire).unwrap(),
            Some(full)
        );
        assert_eq!(full.layout(4), [1, 1, 1, 1]);
    }
}
