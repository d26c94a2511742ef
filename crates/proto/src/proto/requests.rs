//! What a client asks the machine manager: the caller as established, the requests, and
//! what a submission or a step carries.

use super::*;

/// Who sent a client request, as the machine manager established it:
/// on its Unix socket the kernel's account of the peer (`SO_PEERCRED`), never a claim in the
/// request; on TCP the holder of the cluster key, who is trusted as the administrator, or the
/// holder of a user's credential ([`Hello::User`]), who is that user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    /// Root, the machine manager's own user, or a cluster-key holder: may act on any job,
    /// submit as any user and shut the cluster down.
    pub admin: bool,
}

impl Caller {
    /// The administrator (root), as tests and the library's key holders are.
    pub const ROOT: Caller = Caller {
        uid: 0,
        gid: 0,
        admin: true,
    };
}

/// The key that frames on the machine manager's Unix socket are sealed with. It is no
/// secret: there the kernel vouches for the peer, and a user needs no cluster key to submit.
pub fn local_key() -> cosched_storm::Key {
    cosched_storm::Key::from_bytes(*b"cosched local socket: no secret!")
}

/// A user's request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// Boxed: a submission is far larger than any other request.
    Submit(Box<SubmitRequest>),
    /// One page of the jobs a query selects: the client pages through
    /// them (`cosched_client::client::Client::query`), as no single answer may hold them all.
    Jobs(JobQuery),
    Cancel(JobId),
    /// `salloc`'s end of its allocation once its command has exited: the job ends
    /// `Completed` (code 0) or `Failed` with the command's exit code, as Slurm records an
    /// allocation, and its steps and processes end with it.
    Relinquish {
        job: JobId,
        exit_code: i32,
    },
    Suspend(JobId),
    Resume(JobId),
    Status,
    /// A rank's output: at most [`MAX_OUTPUT`] bytes of each file, its beginning
    /// or (`tail`) its end; the answer says the whole sizes, so a cut is never silent.
    Output {
        job: JobId,
        /// A rank of this step of the job (`srun` relaying its step's output).
        step: Option<u32>,
        rank: u32,
        tail: bool,
    },
    /// Start a step in a running allocation of the caller's (`srun` inside a job):
    /// answered with [`Response::Step`] once the step is recorded.
    Step(Box<StepRequest>),
    /// Stop every job and every daemon.
    Shutdown,
    /// What the communication monitors of a node (by name or number) recorded.
    Monitor {
        node: String,
    },
    /// Each live job's expected start and end: the machine manager runs a copy of its policy
    /// forward from its live jobs (`cosched_sim::forecast`), every job taking its time limit.
    Forecast,
    /// One step of a file broadcast (crate::bcast).
    Bcast(BcastOp),
    /// Take nodes out of service or back (administrators only): `cosched node drain|resume|
    /// down`, `scontrol update nodename=… state=…`.
    Node {
        op: NodeOp,
        /// Node names.
        nodes: Vec<String>,
        reason: Option<String>,
    },
    /// Read the configuration file again and apply it (`cosched reconfigure`, SIGHUP):
    /// administrators only.
    Reconfigure,
    /// Issue user `uid` a new credential serial, which revokes the earlier ones (`cosched
    /// cluster user-key`; with `revoke`, no credential is written for it), valid until
    /// `expires_us` if given: administrators only. Answered with [`Response::Credential`].
    Credential {
        uid: u32,
        expires_us: Option<i64>,
    },
    /// End step `step` of job `job` (`scancel N.S`, a killed `srun`): its ranks on every
    /// node; the allocation and its other steps go on.
    CancelStep {
        job: JobId,
        step: u32,
    },
    /// Give every daemon a new cluster key, the old one accepted for `grace_us` more
    /// (`cosched cluster rotate-key`): administrators only. Answered with
    /// [`Response::KeyRotated`] once the machine manager seals with the new key.
    RotateKey {
        grace_us: i64,
    },
}

/// What an administrator does to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeOp {
    /// Nothing new starts there; its jobs run to their end.
    Drain,
    /// Its jobs end now (`node_failed`, or requeued with `--requeue`); nothing starts there.
    Down,
    /// Back in service.
    Resume,
}

impl NodeOp {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeOp::Drain => "drain",
            NodeOp::Down => "down",
            NodeOp::Resume => "resume",
        }
    }
}

/// An administrator's change to a node, as accounting keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeChange {
    pub node: NodeId,
    pub name: String,
    pub op: NodeOp,
    pub reason: Option<String>,
    /// Who asked.
    pub uid: u32,
    /// When (µs since the epoch).
    pub at_us: i64,
}

/// The steps of a file broadcast, each one request: the client opens the transfer, sends the
/// chunks in order (each answered once the machine manager has passed it down the tree,
/// which it does only while a slot is free: the client is paced by the slowest node), and
/// finishes it (answered once every node has checked its copy).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum BcastOp {
    Begin {
        /// Where each node stages the file: a name within its scratch directory, or an
        /// absolute path (a user's own copy only, refused by a node manager running as root).
        dest: String,
        size: u64,
        chunk: u32,
        slots: u32,
        /// Node names; empty: every node in the tree.
        nodes: Vec<String>,
        /// Whose name space the copies go to (crate::bcast).
        scope: Scope,
        /// The user whose copy it is; `None`: the caller. Another user only for an
        /// administrator (as `SubmitRequest::user`).
        user: Option<u32>,
    },
    Chunk {
        id: u32,
        k: u32,
        #[serde(with = "cosched_storm::bytes")]
        data: Vec<u8>,
    },
    Finish {
        id: u32,
        /// The hash (BLAKE3) of the file as the client read it, which the machine manager
        /// checks against the chunks it passed on.
        blake3: [u8; 32],
    },
    /// The client gives up (the file changed while it was read, or could not be read): the
    /// transfer fails with `why`, and the nodes drop their copies.
    Abort { id: u32, why: String },
}

/// Which name space a broadcast stages its copies in on every node (crate::bcast): what a
/// job may run is its own user's copy, or a published one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// The user's own names (`cosched bcast`): run only by that user's jobs.
    #[default]
    User,
    /// The copy for one job (`cosched submit --bcast`): named by its transfer, which the
    /// job's argv\[0\] names (`cosched-staged:@ID/NAME`); run only by that user's jobs.
    Job,
    /// Published by an administrator (`cosched bcast --publish`): the node manager's,
    /// readable and runnable by every user's jobs, changed by no user.
    Public,
}

/// The machine manager's answers to [`BcastOp`]s.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum BcastReply {
    Started {
        id: u32,
        nodes: Vec<String>,
    },
    /// The chunk is on its way down the tree.
    Sent,
    /// Every node holds a verified copy.
    Done {
        nodes: Vec<String>,
    },
}

/// Which jobs a [`Request::Jobs`] selects, and where its page starts. The machine manager
/// applies the filters (a selective `acct` costs one small answer, not every record), and
/// answers at most [`JobQuery::limit`] records (at most [`MAX_PAGE_JOBS`]) within
/// [`PAGE_BYTES`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQuery {
    /// These jobs, in this order, with their whole command lines (every job when empty; a
    /// listing shortens command lines to [`LISTED_CMD_BYTES`]). An unknown id is an error.
    pub ids: Vec<JobId>,
    /// Only jobs of these users.
    pub users: Vec<u32>,
    /// Only jobs in these states.
    pub states: Vec<JobState>,
    /// Only jobs not ended before this time (µs since the epoch).
    pub since_us: Option<i64>,
    /// Only jobs submitted by this time.
    pub until_us: Option<i64>,
    /// A listing's cursor: only jobs with a greater id (the last id of the previous page).
    pub after: Option<JobId>,
    /// Skip this many of `ids` (the ones answered by the previous pages).
    pub skip: u32,
    /// At most this many records in the page (0: [`MAX_PAGE_JOBS`]).
    pub limit: u32,
}

/// Most records in one page of [`Request::Jobs`].
pub const MAX_PAGE_JOBS: u32 = 2_000;
/// A page of [`Request::Jobs`] stops once its records take this many bytes (always holding
/// at least one record, which a submission's size limit keeps below 2 MiB): far inside the
/// 16 MiB frame limit, however large the records.
pub const PAGE_BYTES: usize = 4 << 20;
/// A listing (a query without ids) shows at most this many bytes of a command line; the rest
/// is replaced by a marker saying how much was left out. Asked by id, a job's command line
/// comes whole.
pub const LISTED_CMD_BYTES: usize = 4096;

/// One page of jobs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct JobsPage {
    pub jobs: Vec<JobInfo>,
    /// More jobs are selected after these: ask again from the last of them (`after`, or
    /// `skip` for a query by ids).
    pub more: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubmitRequest {
    pub procs: u32,
    pub time_limit_us: Option<i64>,
    pub class: Option<String>,
    pub name: Option<String>,
    pub cmd: Vec<String>,
    pub cwd: String,
    /// The user the job runs as: only an administrator (root, or a cluster-key holder) may
    /// name another user than itself; `None`: the caller.
    pub user: Option<u32>,
    /// Environment (`--export`) and output patterns (`--output`, `--error`).
    pub io: JobIo,
    /// Dependencies, begin time, array (`--dependency`, `--begin`, `--array`).
    #[serde(default)]
    pub sched: Schedule,
    /// How the tasks are to be spread over nodes (`-N`, `--ntasks-per-node`), when asked.
    #[serde(default)]
    pub layout: Option<NodeLayout>,
    /// Submit held (`--hold`): held in the same instant as the submission, so the policy
    /// never starts it before a release.
    #[serde(default)]
    pub hold: bool,
    /// The memory it may take (`--mem`, `--mem-per-cpu`); `None`: no limit but the node's.
    #[serde(default)]
    pub mem: Option<MemLimit>,
}

/// How much memory a job may take on each of its nodes, as Slurm's options say it. Bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemLimit {
    /// `--mem`: on each node, whatever number of its tasks run there.
    PerNode(u64),
    /// `--mem-per-cpu`: for each PE the job holds on the node.
    PerCpu(u64),
}

impl MemLimit {
    /// The limit on a node where the job holds `pes` PEs, at most `node` bytes (the node's
    /// memory: a limit above it means nothing).
    pub fn on_node(self, pes: u32, node: u64) -> u64 {
        match self {
            MemLimit::PerNode(b) => b,
            MemLimit::PerCpu(b) => b.saturating_mul(u64::from(pes)),
        }
        .min(node)
    }

    /// The most it asks of one node, when the job's `procs` PEs fill nodes of `per_node` PEs.
    pub fn most_on_a_node(self, procs: u32, per_node: u32) -> u64 {
        match self {
            MemLimit::PerNode(b) => b,
            MemLimit::PerCpu(b) => b.saturating_mul(u64::from(procs.min(per_node))),
        }
    }

    /// As Slurm writes it: `--mem=4096M` or `--mem-per-cpu=512M`.
    pub fn option(self) -> String {
        match self {
            MemLimit::PerNode(b) => format!("--mem={}M", b.div_ceil(1 << 20)),
            MemLimit::PerCpu(b) => format!("--mem-per-cpu={}M", b.div_ceil(1 << 20)),
        }
    }
}

/// A step asked of a running allocation (`srun` inside a job): its command and where its
/// tasks go within the allocation's PEs (Slurm's `-n`, `-N`, `--ntasks-per-node`,
/// `--nodelist`, `--overlap`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StepRequest {
    pub job: JobId,
    pub name: String,
    pub cmd: Vec<String>,
    pub cwd: String,
    /// `srun`'s environment, its output patterns (`%j`, `%A`, `%a` already expanded) and
    /// `--mpi`.
    pub io: JobIo,
    /// `-n`; `None`: one per node given by `-N`/`--ntasks-per-node`, else one.
    pub ntasks: Option<u32>,
    /// `-N`: exactly this many of the allocation's nodes.
    pub nodes: Option<u32>,
    pub tasks_per_node: Option<u32>,
    /// `-c`: PEs of one node each task holds; `None`: one.
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    /// `--nodelist`: these nodes of the allocation (names).
    pub nodelist: Vec<String>,
    /// `--overlap`: the step may share PEs with the allocation's other running steps;
    /// without it, it takes PEs no running step holds (Slurm 22.05's default).
    pub overlap: bool,
    /// `--kill-on-bad-exit`: a rank exiting non-zero kills the step's other ranks.
    pub kill_on_bad_exit: bool,
}

/// A step of an allocation, as accounting keeps it (`sacct` shows `N.S`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepInfo {
    pub id: u32,
    pub name: String,
    pub cmd: Vec<String>,
    /// Where its ranks run (ranks numbered from 0 within the step).
    pub placement: Vec<Placement>,
    /// `Running`, then `Completed`, `Failed` (a rank exited non-zero or aborted),
    /// `Cancelled` (its allocation ended first) or what ended the allocation.
    pub state: JobState,
    pub start_us: i64,
    pub end_us: Option<i64>,
    /// Once its tasks have all exited: the highest of their codes, or the code of the
    /// `MPI_Abort` that named its failure (set as that is heard).
    pub exit_code: Option<i32>,
    /// Each rank's exit code, `None` while it runs.
    pub ranks: Vec<Option<i32>>,
    pub error: Option<String>,
    pub overlap: bool,
    pub kill_on_bad_exit: bool,
    pub cwd: String,
    /// Output patterns and `--mpi` (the environment is not kept).
    pub io: JobIo,
}

impl StepInfo {
    /// Its number of tasks.
    pub fn ntasks(&self) -> u32 {
        self.ranks.len() as u32
    }
}

impl NodeLayout {
    /// Whether it asks where the tasks go by node beyond a partition and a constraint
    /// (which may leave every node allowed).
    pub fn spreads(&self) -> bool {
        self.nodes.is_some()
            || self.tasks_per_node.is_some()
            || !self.nodelist.is_empty()
            || !self.exclude.is_empty()
            || self.cpus_per_task.is_some_and(|c| c > 1)
            || self.exclusive
    }
}

/// A job's tasks spread over nodes, as Slurm's `-N N --ntasks-per-node M --nodelist L
/// --exclude X` ask, with nodes by name. The machine manager turns it into the policies'
/// [`cosched_policy::Spread`] (node numbers) at submission, refusing one that names an
/// unknown node or can never be met.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLayout {
    /// On exactly this many nodes.
    pub nodes: Option<u32>,
    /// At most this many tasks on each.
    pub tasks_per_node: Option<u32>,
    /// Nodes it must include.
    #[serde(default)]
    pub nodelist: Vec<String>,
    /// Nodes it must not use.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// PEs of one node each task holds (`--cpus-per-task`), when more than one.
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    /// The partition it runs in (`--partition`); `None`: the default one.
    #[serde(default)]
    pub partition: Option<String>,
    /// The node features it needs (`--constraint`, Slurm's form).
    #[serde(default)]
    pub constraint: Option<String>,
    /// Whole nodes (`--exclusive`).
    #[serde(default)]
    pub exclusive: bool,
}
