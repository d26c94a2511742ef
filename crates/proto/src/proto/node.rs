//! The conversation of the machine manager with the node managers: registration, launches,
//! and the messages down and up the tree (with the monitoring a node reports).

use super::*;
use crate::rotation::Rotation;

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
    /// The first `MPI_Abort` of its ranks here ([`FromNode::Aborted`]'s exit), kept until the
    /// job is forgotten: a machine manager that restarted since never heard the notice, and
    /// takes it before the exits, as the notice came before them.
    pub aborted: Option<RankExit>,
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
    /// `(rank, local PE index)`: each rank and its (first) PE.
    pub ranks: Vec<(u32, u32)>,
    /// `(rank, local PE index)` of the PEs a rank holds beside its first, with
    /// `--cpus-per-task` (empty: one PE to a rank).
    #[serde(default)]
    pub extra_pes: Vec<(u32, u32)>,
}

impl Placement {
    /// Every PE it holds on its node.
    pub fn pes(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranks.iter().chain(&self.extra_pes).map(|&(_, pe)| pe)
    }

    /// The PEs rank `rank` holds here, its first one first.
    pub fn pes_of(&self, rank: u32) -> impl Iterator<Item = u32> + '_ {
        self.ranks
            .iter()
            .chain(&self.extra_pes)
            .filter(move |&&(r, _)| r == rank)
            .map(|&(_, pe)| pe)
    }
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
pub(super) const UNIT_SHIFT: u32 = 40;

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
        /// The gang rotation in force (seed 000 §4.1's strobe, announced ahead: see
        /// [`crate::rotation`]), again for a node that missed its announcement; `None` under
        /// a policy without a matrix.
        rotation: Option<Rotation>,
    },
    /// A new gang rotation, sent when the matrix or its rotation changes (an arrival, an end,
    /// a hold, a repack): every node switches from it on its own timer, so nodes switch
    /// together with no message per switch.
    Rotation(Rotation),
    Launch(Launch),
    /// One multi-context switch: stop these jobs, then continue those, then kill those.
    Switch {
        stop: Vec<JobId>,
        cont: Vec<JobId>,
        kill: Vec<JobId>,
    },
    /// Send `sig` to the ranks of these launches (jobs or [`step_unit`]s) here: to each
    /// rank's process group, or with `leader` to the rank's own process alone (a batch
    /// script's shell, not the commands it runs). A `--signal` ahead of a time limit.
    Signal {
        jobs: Vec<JobId>,
        sig: i32,
        leader: bool,
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
    /// The name service's answer to the node's request `req` ([`FromNode::Names`]).
    Names {
        req: u64,
        answer: crate::names::NameAnswer,
    },
    /// Node `from` wants the PMIx data of local rank `rank` of `job` for its request `req`
    /// ([`FromNode::ModexWant`]); answer with [`FromNode::ModexHave`].
    ModexWant {
        job: JobId,
        rank: u32,
        from: NodeId,
        req: u64,
    },
    /// The answer to this node's [`FromNode::ModexWant`] `req`.
    ModexHave {
        job: JobId,
        req: u64,
        data: Result<Vec<u8>, i32>,
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
    /// Rank `exit.rank` of run `run` of `job` called `MPI_Abort` (through PMI-1 or PMIx):
    /// its exit as the job's record gives it (the rank's code, the abort as its error). Sent
    /// the moment the node manager hears of the abort, before the rank is killed or exits,
    /// since the failures of the other ranks (their connections to it die) only follow
    /// that: the machine manager fails the job with the first abort it hears of. The rank's
    /// own [`FromNode::Exited`] still follows once it is reaped. Repeated when the node
    /// rejoins the tree, as exits are.
    Aborted {
        job: JobId,
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
    /// Changes of whether the node lets some process of a job run, in the order they
    /// happened: one message for all the changes an input made (a plan carried out, a batch
    /// of the watcher's switches), so a gang switch costs no message of its own. `sent_us`:
    /// the node's clock when it sent them, from which the machine manager learns where the
    /// node's clock falls on its own (`cosched_mm::clocks`).
    Runs {
        sent_us: i64,
        changes: Vec<RunChange>,
    },
    /// What the job's record should say of rank `rank` of run `run` although the rank did not
    /// fail (it ran as an MPI world of one): sent before the rank's exit.
    Warning {
        job: JobId,
        run: u32,
        rank: u32,
        warning: String,
    },
    /// Rank `rank` of run `run` of `job` asks the name service (`MPI_Publish_name` and kin,
    /// through PMI-1 or PMIx): the machine manager answers this node with
    /// [`ToNode::Names`] under the node's request number `req`. Repeated when the node
    /// rejoins the tree before the answer came.
    Names {
        job: JobId,
        run: u32,
        rank: u32,
        req: u64,
        op: crate::names::NameOp,
    },
    /// A rank of `job` on this node wants the PMIx data of rank `rank` (direct modex: a key
    /// its fence did not bring): the machine manager passes it on to the node that runs
    /// `rank` ([`ToNode::ModexWant`]); the answer comes back as [`ToNode::ModexHave`] with
    /// `req`.
    ModexWant {
        job: JobId,
        run: u32,
        rank: u32,
        req: u64,
    },
    /// This node's answer to [`ToNode::ModexWant`]: the rank's data for node `to`, or the
    /// PMIx status the request failed with.
    ModexHave {
        job: JobId,
        run: u32,
        to: NodeId,
        req: u64,
        data: Result<Vec<u8>, i32>,
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

/// One switch on a node (µs of the node manager's clock): from the instant it was due — a
/// strobe's arrival, or the instant a rotation announced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchTiming {
    /// When it was due.
    pub at_us: i64,
    /// How long before then the outgoing freezes were written (0: at that instant).
    #[serde(default)]
    pub lead_us: u32,
    /// From then until every outgoing job read frozen (`None`: not before the thaw, or under
    /// the handover not by the next switch, when it is read; negative: before the instant,
    /// as a rotation's switch lands when placed by its lead).
    pub frozen_us: Option<i32>,
    /// From then until the incoming jobs were thawed (negative: before the instant).
    pub thawed_us: i32,
    /// The jobs it stopped and those it continued.
    #[serde(default)]
    pub outgoing: Vec<JobId>,
    #[serde(default)]
    pub incoming: Vec<JobId>,
    /// An idle handover: the incoming jobs were thawed with the outgoing ones set idle, and
    /// their freezes landed after the thaw, by `frozen_us` (read at the next switch: the
    /// exposure, in which an outgoing rank could still run at idle weight, is at most
    /// `frozen_us` − `thawed_us`).
    #[serde(default)]
    pub handover: bool,
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

/// Whether the node now lets some process of run `run` of `job` run (`runs`) or has stopped
/// every one of them: under a node scheme that runs jobs the strobe does not list (`local`,
/// `sb`, `fcs`), and under `gs` from each switch's thaw and completed freeze. Sent when that
/// changes ([`FromNode::Runs`]); the machine manager's accounting follows it. `at_us`: when
/// the change happened, on the node's clock (µs of its monotonic clock; a node books the
/// switches its watcher's thread made in batches), which the machine manager places on its
/// own ([`FromNode::Runs`]'s `sent_us`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunChange {
    pub job: JobId,
    pub run: u32,
    pub runs: bool,
    pub at_us: i64,
}
