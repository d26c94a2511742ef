//! What the daemons and the clients say to each other (postcard inside authenticated frames).
//!
//! - A peer connecting to the machine manager sends one [`Hello`] first: a node manager
//!   registering, or a client request (one request, one [`Response`], then the connection
//!   closes).
//! - The machine manager talks to node managers only through the tree: [`ToNode`] payloads of
//!   XFER-AND-SIGNAL going down, [`FromNode`] payloads of signals coming up.

use cosched_core::{JobId, JobRecord, NodeId};

pub use crate::jobio::JobIo;
pub use crate::start_conditions::{ArraySpec, ArrayTask, DepKind, Dependency, Schedule};
use serde::{Deserialize, Serialize};

/// Node variable written by every heartbeat (its sequence number); COMPARE checks it.
pub const VAR_HEARTBEAT: u32 = 1;
/// File broadcast (crate::bcast): `transfer id << 32 | chunks written`, set by the node
/// manager after each chunk is on its scratch; the sender's flow control compares it (≥).
pub const VAR_BCAST_HELD: u32 = 2;
/// File broadcast: `transfer id << 2 | state` ([`BCAST_OPEN`], [`BCAST_VERIFIED`],
/// [`BCAST_FAILED`]), set by the node manager.
pub const VAR_BCAST_STATE: u32 = 3;
/// File broadcast: the last transfer whose copies were verified on every node, written by the
/// machine manager's COMPARE-AND-WRITE; a staged copy is launched only once this reaches it.
pub const VAR_BCAST_READY: u32 = 4;
/// Key rotation: the rotation a node manager seals its frames with the new key of, set by it
/// once it has the key ([`ToNode::RotateKey`]'s `rotation`); the machine manager switches
/// when it holds everywhere.
pub const VAR_KEY_ROTATION: u32 = 5;
pub const BCAST_OPEN: i64 = 1;
pub const BCAST_VERIFIED: i64 = 2;
pub const BCAST_FAILED: i64 = 3;

/// Largest part of an output file `cosched output` brings back (the answer gives the whole
/// size; `--tail` brings the end; the file itself stays in the node's work directory).
pub const MAX_OUTPUT: u64 = 4 << 20;
/// Default of the node manager's `--output-cap`: 1 GiB per output file.
pub const DEFAULT_OUTPUT_CAP: u64 = 1 << 30;
/// How long a finished job's directory on a node is kept (the node manager's `--keep-jobs`).
pub const DEFAULT_KEEP_JOBS: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);
/// Longest grace between SIGTERM and SIGKILL taken (the machine manager's `--kill-wait` is
/// clamped to it, and so is what a node is told).
pub const MAX_KILL_WAIT: cosched_core::Dur = cosched_core::Dur::from_secs(3600);

/// The first frame of a connection to the machine manager, stamped so that a captured one
/// cannot be replayed (see [`Stamp`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Hello {
    Register(Stamp, Register),
    Client(Stamp, Request),
    /// A client request of Unix user `uid`, sealed with that user's credential
    /// ([`cosched_storm::Key::user_key`]), not the cluster key: the machine manager reads
    /// the claimed uid before it can check the tag, then checks it with `user_key(uid)`, and
    /// the caller is that user, no administrator (see docs/daemons.md, "Trust model").
    User(u32, Stamp, Request),
}

/// When a request was made and a random nonce: the machine manager
/// refuses a stamp more than [`REPLAY_WINDOW_US`] away from its clock, and a nonce it has seen
/// within that window, so a frame captured on the network cannot be sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub time_us: i64,
    pub nonce: u64,
}

/// How far a request's stamp may be from the machine manager's clock (either way).
pub const REPLAY_WINDOW_US: i64 = 60_000_000;

impl Stamp {
    /// A stamp for a request made now.
    pub fn now() -> Stamp {
        Stamp {
            time_us: crate::util::now().as_micros(),
            nonce: crate::util::random_u64(),
        }
    }
}

/// The version of the messages between the machine manager and the node managers. Raised
/// with every change to [`Hello`], [`Register`], [`RegisterReply`], [`ToNode`] or
/// [`FromNode`] or to the tree's payload ([`ToNode::payload`]): postcard is not
/// self-describing, so daemons of two versions would misread each other's messages. Nodes and
/// manager of one version mix, whatever their releases.
pub const WIRE_VERSION: u32 = 2;

/// Which cosched a daemon is: its release and the version of its messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub release: String,
    pub wire: u32,
}

impl Version {
    /// This build's.
    pub fn ours() -> Version {
        Version {
            release: env!("CARGO_PKG_VERSION").to_string(),
            wire: WIRE_VERSION,
        }
    }

    /// Why a node manager of version `theirs` may not join a machine manager of this build,
    /// naming both; `None` when it may.
    pub fn refusal(theirs: &Version, node: Option<&str>) -> Option<String> {
        let ours = Version::ours();
        (theirs.wire != ours.wire).then(|| {
            format!(
                "node manager{} is cosched {} (messages v{}) but the machine manager is cosched {} (messages v{}): run the same version on both (docs/deploy.md, Upgrades)",
                node.map(|n| format!(" {n}")).unwrap_or_default(),
                theirs.release,
                theirs.wire,
                ours.release,
                ours.wire
            )
        })
    }
}

/// What every version's registration begins with: the [`Hello::Register`] tag, its stamp and
/// the node manager's [`Version`]. A machine manager that cannot read the rest of a
/// registration reads this much, to refuse the node naming both versions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RegisterHead {
    /// postcard writes an enum's variant as this number: 0 is [`Hello::Register`].
    pub tag: u32,
    pub stamp: Stamp,
    pub version: Version,
}

/// A node manager introduces itself (again, after losing its parent or an MM restart).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Register {
    /// First, so that a machine manager of another version can read it ([`RegisterHead`]).
    pub version: Version,
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
    /// Bytes of memory a job may take on this node: its configured memory, else the host's
    /// `MemTotal` (the bound of every `--mem`).
    pub memory: u64,
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
    /// The kernel killed a process of its job on this node for going over the job's
    /// memory limit (its cgroup counted an OOM kill).
    #[serde(default)]
    pub oom: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegisterReply {
    Accepted {
        node: NodeId,
        heartbeat_us: i64,
        /// The machine manager takes a node silent this long for not responding
        /// (`--suspect-after`); a node that hears nothing for as long registers again.
        suspect_after_us: i64,
        /// The machine manager declares a node silent this long down (`--down-after`): a
        /// node that heard nothing for nearly as long may have been, and registers again
        /// before it takes in anything from the tree.
        down_after_us: i64,
        /// How long a killed job's processes get between SIGTERM and SIGKILL (`--kill-wait`).
        kill_wait_us: i64,
        /// Jobs the machine manager no longer runs: kill and forget them.
        drop_jobs: Vec<JobId>,
        /// Where the node's membership began: the tree epoch announced at this registration
        /// when it released what the machine manager waited for there (a fence lifted, a new
        /// node manager process), else at the one that last did. A message down the tree
        /// stamped earlier ([`ToNode::payload`]) was meant for the node's earlier membership,
        /// and the node drops it.
        epoch: u64,
    },
    /// The node was declared down while it ran these jobs, which have since ended or been
    /// requeued (it was fenced): it kills them, waits until their ranks have exited, and
    /// registers again; no work is given to it before.
    Fence {
        jobs: Vec<JobId>,
        /// Between SIGTERM and SIGKILL (`--kill-wait`).
        kill_wait_us: i64,
    },
    Rejected(String),
    /// The node sealed its registration with a cluster key accepted only until `until_us`
    /// (it missed a rotation): here is the new one, wrapped with the old; it takes it,
    /// writes it to its key file and registers again with it.
    NewKey {
        key: cosched_storm::Wrapped,
        until_us: i64,
    },
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
    /// The submitting user and group: the ranks run as them (see the node manager).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub placement: Vec<Placement>,
    /// Which run of the job this is (1 for the first launch, one more at each launch after
    /// a requeue): reports of an earlier run (its exits, a node still holding it, a late
    /// acknowledgement) are told apart from those of this one.
    pub run: u32,
    /// The job's memory limit (`--mem`, `--mem-per-cpu`), set on its cgroup by each node.
    pub mem: Option<MemLimit>,
    /// A step of this allocation (then `job` is the step's [`step_unit`] and `run` the
    /// allocation's): its ranks join the allocation's cgroup, and end with it.
    pub within: Option<JobId>,
}

/// Bits of a [`step_unit`] id below the step number: job ids stay below 2^40.
const UNIT_SHIFT: u32 = 40;

/// The id a step's processes go by between the machine manager and the nodes: the job's
/// id with the step's number (plus one) above [`UNIT_SHIFT`]. A step is a launch of its own
/// on the nodes (its ranks, exits, PMI world and output files), so it needs an id of its
/// own there, one no job has.
pub fn step_unit(job: JobId, step: u32) -> JobId {
    JobId(job.0 | (u64::from(step) + 1) << UNIT_SHIFT)
}

/// The job and step a [`step_unit`] id names; `None` for a job's own id.
pub fn unit_step(unit: JobId) -> Option<(JobId, u32)> {
    let s = unit.0 >> UNIT_SHIFT;
    (s > 0).then(|| (JobId(unit.0 & ((1 << UNIT_SHIFT) - 1)), (s - 1) as u32))
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToNode {
    Heartbeat {
        seq: i64,
        /// The gang strobe (seed 000 §4.1): the matrix as of this heartbeat, for the node's
        /// scheme to switch from; `None` under a policy without a matrix.
        strobe: Option<Strobe>,
    },
    /// The strobe again, sent at once when a multi-context switch happens (the heartbeat
    /// carries it otherwise), so that every node switches together.
    Strobe(Strobe),
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
        /// The job's user: a node manager running as root reads only files of theirs.
        uid: Option<u32>,
        /// The end of each file rather than its beginning, when it is longer than
        /// [`MAX_OUTPUT`].
        tail: bool,
    },
    /// Every node of `job` entered its PMI fence `seq`: here are all their puts (the
    /// broadcast half of the fence; the node answers `barrier_out` to its waiting ranks).
    FenceDone {
        job: JobId,
        seq: u64,
        kvs: Vec<(String, String)>,
    },
    Shutdown,
    /// The cluster key changes: seal with `key` (wrapped with the key this frame is sealed
    /// with) from now on, accept the old one until `until_us`, write the new one to the key
    /// file, then set [`VAR_KEY_ROTATION`] to `rotation`.
    RotateKey {
        key: cosched_storm::Wrapped,
        until_us: i64,
        rotation: i64,
    },
    /// Send back what the node's communication monitors recorded ([`FromNode::Monitor`]).
    FetchMonitor {
        req: u64,
    },
    /// A file broadcast starts: create the staged file `dest` (crate::bcast) for `size`
    /// bytes, in user `uid`'s name space of `scope` (or the published one), to be given to
    /// them. (The machine manager checks the file's hash as it passes.)
    BcastBegin {
        id: u32,
        dest: String,
        size: u64,
        uid: u32,
        scope: Scope,
    },
    /// Chunk `k` of transfer `id`, to be written at `offset`. The chunk's bytes are not a
    /// field: they follow this message in the same XFER payload ([`ToNode::chunk_payload`]),
    /// so a node manager writes them from the frame it received and forwarded, without
    /// copying them out of it.
    BcastChunk {
        id: u32,
        k: u32,
        offset: u64,
    },
    /// Every chunk was sent: check the size, and say so in [`VAR_BCAST_STATE`].
    BcastEnd {
        id: u32,
    },
    /// The transfer failed: remove the partial file.
    BcastAbort {
        id: u32,
    },
}

impl ToNode {
    /// The XFER payload of this message: the tree epoch the machine manager had announced
    /// last when it sent it, then the message. A node drops a message stamped before its
    /// membership began (the `epoch` of [`RegisterReply::Accepted`]): it was meant for the
    /// node's earlier membership, and the registration has reconciled what it meant.
    pub fn payload(&self, epoch: u64) -> Vec<u8> {
        postcard::to_stdvec(&(epoch, self)).expect("encodes")
    }

    /// The XFER payload of chunk `k` of transfer `id`: the [`ToNode::BcastChunk`] message
    /// (stamped as [`ToNode::payload`]), then the chunk's bytes.
    pub fn chunk_payload(epoch: u64, id: u32, k: u32, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut payload = ToNode::BcastChunk { id, k, offset }.payload(epoch);
        payload.extend_from_slice(data);
        payload
    }

    /// Reads a payload of [`ToNode::payload`]: its stamp, the message, and what follows it
    /// (a chunk's bytes).
    pub fn from_payload(payload: &[u8]) -> postcard::Result<(u64, ToNode, &[u8])> {
        let ((epoch, msg), rest) = postcard::take_from_bytes::<(u64, ToNode)>(payload)?;
        Ok((epoch, msg, rest))
    }
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
        /// The files' whole sizes: larger than what came when they were cut.
        sizes: (u64, u64),
    },
    /// Every local rank of `job` entered PMI fence `seq` (`barrier_in`); these are the
    /// node's puts since the previous fence (the gather half of the fence). Repeated when the
    /// node rejoins the tree before the answer came.
    Fence {
        job: JobId,
        seq: u64,
        puts: Vec<(String, String)>,
    },
    /// The answer to [`ToNode::FetchMonitor`].
    Monitor { req: u64, monitor: NodeMonitor },
    /// Whether the node now lets some process of `job` run (`runs`) or has stopped every one
    /// of them: under a node scheme that runs jobs the strobe does not list (`local`, `sb`,
    /// `fcs`), and under `gs` from each switch's thaw and completed freeze. Sent when that
    /// changes; the machine manager's accounting follows it.
    Runs { job: JobId, run: u32, runs: bool },
    /// What the job's record should say of rank `rank` of run `run` although the rank did not
    /// fail (it ran as an MPI world of one): sent before the rank's exit.
    Warning {
        job: JobId,
        run: u32,
        rank: u32,
        warning: String,
    },
}

/// The STORM strobe (seed 000 §4.1): the current slot of the Ousterhout matrix and
/// each job's row, which every node manager switches from locally with its node scheme.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Strobe {
    /// The active row; `None` in the middle of a multi-context switch (nothing of the
    /// matrix should start then).
    pub slot: Option<u32>,
    /// (job, row) of every job in the matrix.
    pub rows: Vec<(JobId, u32)>,
    /// The jobs the policy has running now: the active row's, and those of other rows run by
    /// alternate scheduling. A job of the active row missing here is held or suspended.
    pub running: Vec<JobId>,
}

/// One line of a node's observation record: a process's FCS class change
/// (`class` set) or a local context switch (`switch_in` set: the process went onto PE `pe`).
/// Times are seconds since the job was launched on the node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeEvent {
    pub time_s: f64,
    pub job: JobId,
    pub rank: u32,
    pub node: String,
    pub pe: u32,
    /// `CS`, `F` or `DC` (as `cosched cosim --class-history`); empty for a switch.
    pub class: String,
    pub switch_in: bool,
}

/// What a node's communication monitors recorded (crates/monitor; docs/monitor.md): one entry
/// per rank of the jobs it runs, and of the last jobs it ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMonitor {
    pub node: String,
    pub procs: Vec<ProcMonitor>,
    /// The node scheme (`gs`, `local`, `sb`, `fcs`).
    pub scheme: String,
    /// Class changes and local context switches of the live and the last ended jobs.
    pub events: Vec<NodeEvent>,
    /// How the node's gang switches went (`cluster bench gang`'s breakdown).
    pub switches: SwitchLog,
}

/// A node manager's switches that stopped a job of its own cgroup (a gang switch): the
/// incoming job is thawed once the outgoing ones are reported frozen, or at the bound.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchLog {
    /// Switches since the node manager started.
    pub count: u64,
    /// Of these, thawed at the bound, before every outgoing job was reported frozen.
    pub late: u64,
    /// The last switches, oldest first (at most `nm::switch::KEEP`).
    pub recent: Vec<SwitchTiming>,
}

/// One switch on a node, from the strobe's arrival (µs of the node manager's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchTiming {
    /// When the strobe that started it arrived.
    pub at_us: i64,
    /// From then until every outgoing job was reported frozen (`None`: not before the thaw).
    pub frozen_us: Option<u32>,
    /// From then until the incoming jobs were thawed.
    pub thawed_us: u32,
}

/// One rank's communication as its node's ring holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcMonitor {
    pub job: JobId,
    pub rank: u32,
    /// 0 until the rank attached to the ring (a program that never uses the monitor).
    pub pid: u32,
    /// The job still runs on the node (false: kept from a job that ended).
    pub live: bool,
    /// `running`, `spinning` or `blocked` (in the monitor's wait), as of the read.
    pub state: String,
    /// Blocking communications recorded, and their payload bytes.
    pub count: u64,
    pub bytes: u64,
    /// Σ (end − start) of the communications.
    pub comm_ns: u64,
    /// Of the waits (spin-then-block): how many, how many ran out of spin and blocked, time
    /// spinning, time blocked.
    pub waits: u64,
    pub blocks: u64,
    pub spun_ns: u64,
    pub blocked_ns: u64,
    /// The spin time the node manager sets for the job's ranks.
    pub spin_ns: u64,
    /// Communications by kind (`send`, `recv`, `wait`, `barrier`, `allreduce`, `bcast`,
    /// `other`); kinds never seen are left out.
    pub by_kind: std::collections::BTreeMap<String, u64>,
    pub last: Option<LastComm>,
}

/// The latest communication of a rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastComm {
    pub kind: String,
    /// −1: none (a collective).
    pub peer: i32,
    pub bytes: u64,
    pub duration_ns: u64,
    /// How long before the node's read it ended.
    pub ago_ns: u64,
}

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
    /// `Running`, then `Completed`, `Failed` (a rank exited non-zero: the highest code is
    /// the step's), `Cancelled` (its allocation ended first) or what ended the allocation.
    pub state: JobState,
    pub start_us: i64,
    pub end_us: Option<i64>,
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
}

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
}
