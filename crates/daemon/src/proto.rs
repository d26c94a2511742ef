//! What the daemons and the clients say to each other (postcard inside authenticated frames).
//!
//! - A peer connecting to the machine manager sends one [`Hello`] first: a node manager
//!   registering, or a client request (one request, one [`Response`], then the connection
//!   closes).
//! - The machine manager talks to node managers only through the tree: [`ToNode`] payloads of
//!   XFER-AND-SIGNAL going down, [`FromNode`] payloads of signals coming up.

use cosched_core::{JobId, JobRecord, NodeId};

pub use crate::jobio::JobIo;
use serde::{Deserialize, Serialize};

/// Node variable written by every heartbeat (its sequence number); COMPARE checks it.
pub const VAR_HEARTBEAT: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Hello {
    Register(Register),
    Client(Request),
}

/// A node manager introduces itself (again, after losing its parent or an MM restart).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Register {
    pub name: String,
    pub pes: u32,
    /// Where its storm listener accepts its parent.
    pub addr: String,
    /// Jobs it holds processes (or unreported exits) of.
    pub jobs: Vec<HeldJob>,
    /// Fixed for the life of the node manager process (its start time): tells a reconnection
    /// (same process: a launch it lacks was lost in flight, so it is sent again) from a
    /// restart (a new process: the old processes are gone).
    pub incarnation: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeldJob {
    pub job: JobId,
    /// Which run of the job (see [`Launch::run`]) the node holds.
    pub run: u32,
    pub ranks: Vec<RankExit>,
}

/// A rank of a job on a node: `code` is `None` while it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankExit {
    pub rank: u32,
    pub code: Option<i32>,
    /// Why it could not be launched, when it could not.
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RegisterReply {
    Accepted {
        node: NodeId,
        heartbeat_us: i64,
        /// How long a killed job's processes get between SIGTERM and SIGKILL (`--kill-wait`).
        kill_wait_us: i64,
        /// Jobs the machine manager no longer runs: kill and forget them.
        drop_jobs: Vec<JobId>,
    },
    Rejected(String),
}

/// One job's processes on a node: which ranks run on which of its PEs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub node: NodeId,
    /// `(rank, local PE index)`.
    pub ranks: Vec<(u32, u32)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Launch {
    pub job: JobId,
    pub size: u32,
    pub cmd: Vec<String>,
    pub cwd: String,
    /// cosched's job-wide variables (name, node list, tasks per node), set over `io.env`.
    pub env: Vec<(String, String)>,
    /// The submitter's environment and output patterns: sent once per job, here.
    pub io: JobIo,
    /// Launch and stop at once (a policy's Place).
    pub stopped: bool,
    pub placement: Vec<Placement>,
    /// Which run of the job this is (1 for the first launch, one more at each launch after
    /// a requeue): reports of an earlier run (its exits, a node still holding it, a late
    /// acknowledgement) are told apart from those of this one.
    pub run: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToNode {
    Heartbeat {
        seq: i64,
    },
    Launch(Launch),
    /// One multi-context switch: stop these jobs, then continue those, then kill those.
    Switch {
        stop: Vec<JobId>,
        cont: Vec<JobId>,
        kill: Vec<JobId>,
    },
    /// The machine manager has recorded these jobs' ends: drop their state.
    Forget {
        jobs: Vec<JobId>,
    },
    FetchOutput {
        req: u64,
        job: JobId,
        rank: u32,
        /// The job's working directory and output patterns: the node finds the files from
        /// them even after it has forgotten the job.
        cwd: String,
        io: JobIo,
    },
    /// Every node of `job` entered its PMI fence `seq`: here are all their puts (the
    /// broadcast half of the fence; the node answers `barrier_out` to its waiting ranks).
    FenceDone {
        job: JobId,
        seq: u64,
        kvs: Vec<(String, String)>,
    },
    Shutdown,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum FromNode {
    Exited {
        job: JobId,
        /// The run of the job the rank belongs to (see [`Launch::run`]).
        run: u32,
        exit: RankExit,
    },
    /// The node is in the tree announced with `epoch` (it has a parent and heard the
    /// topology): sent on every topology it receives. Until the machine manager hears this
    /// after a registration, it sends the node nothing and the policy does not count it up.
    Joined { incarnation: u64, epoch: u64 },
    /// The node received the launch of `job` (also for a repeated delivery): the machine
    /// manager stops resending it.
    Launched { job: JobId, run: u32 },
    Output {
        req: u64,
        found: bool,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        /// Where the files are, when the job gave `--output`/`--error` patterns.
        files: Vec<String>,
    },
    /// Every local rank of `job` entered PMI fence `seq` (`barrier_in`); these are the
    /// node's puts since the previous fence (the gather half of the fence). Repeated when the
    /// node rejoins the tree before the answer came.
    Fence {
        job: JobId,
        seq: u64,
        puts: Vec<(String, String)>,
    },
}

/// A user's request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    Submit(SubmitRequest),
    /// Jobs by id; every job when `ids` is empty.
    Jobs {
        ids: Vec<JobId>,
    },
    Cancel(JobId),
    Suspend(JobId),
    Resume(JobId),
    Status,
    Output {
        job: JobId,
        rank: u32,
    },
    /// Stop every job and every daemon.
    Shutdown,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubmitRequest {
    pub procs: u32,
    pub time_limit_us: Option<i64>,
    pub class: Option<String>,
    pub name: Option<String>,
    pub cmd: Vec<String>,
    pub cwd: String,
    pub user: Option<u32>,
    /// Environment (`--export`) and output patterns (`--output`, `--error`).
    pub io: JobIo,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    Submitted(JobId),
    Jobs(Vec<JobInfo>),
    Done,
    Status(StatusInfo),
    Output {
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        /// Where the files are, when the job gave `--output`/`--error` patterns.
        files: Vec<String>,
    },
    Error(String),
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
    pub user: Option<u32>,
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
    /// Launches so far (see [`Launch::run`]).
    #[serde(default)]
    pub run: u32,
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
    /// `up`, `joining` (registered, not yet back in the tree: nothing is sent to it) or
    /// `down`.
    pub state: String,
    pub addr: String,
    pub pes: u32,
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
}
