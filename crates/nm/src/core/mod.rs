//! The node manager's sans-IO core: everything it decides, nothing it does.
//!
//! Inputs go in with the time ([`NmCore::on`]); what the core wants done comes out as
//! [`Effect`]s ([`NmCore::poll_effect`]); [`NmCore::next_wake`] says when a timer is due (the
//! kill grace, the node scheme's look at its ranks, the silence after which it registers
//! again, the pause between registration attempts, the end of a fence or of a shutdown). The
//! core never reads a clock, a file, `/proc` or the environment: the shell
//! ([`super::shell`]) does every I/O and feeds the results back as inputs. Where an effect
//! asks a question (prepare a launch, spawn a rank, sample the ranks, list the job
//! directories, register), the shell answers it with its input right away, before any other
//! input, so a decision that needs the answer is taken as if it had been there all along.
//!
//! Time is the node manager's own clock: microseconds of `CLOCK_MONOTONIC`, the clock the
//! ranks stamp their monitor-ring records with, so the node scheme can compare the two.
//!
//! One job per file: this one holds the state and the dispatch of inputs and of the machine
//! manager's messages; [`super::register`] registration and the tree; [`super::launch`] a
//! launch; [`super::kill`] the kill grace, fencing and shutting down; [`super::sched`] the
//! node scheme.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;

use cosched_core::{Dur, JobId, NodeId, Time};

use cosched_pmix::helper::{FromHelper, RankEnvs, ToHelper};

use super::launch::{Launching, PrepareLaunch, Prepared, RankSpec};
use super::pmix::{JobPmix, StartHelper};
use super::sched::{NodeSched, Plan, Samples, TICK};
use super::scheme::NodeSchemeConfig;
use super::switch::{Gate, Release};
use super::worlds::Worlds;
use crate::pmi::{JobPmi, Out};
use cosched_proto::proto::*;

mod exits;
mod fences;
mod messages;
mod rotation;
mod switching;

use rotation::Rotating;

/// Grace between SIGTERM and SIGKILL until the machine manager says otherwise.
pub const DEFAULT_KILL_WAIT: Dur = Dur::from_secs(5);

/// What the core needs to know of its node manager.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    pub name: String,
    pub pes: u32,
    /// The machine manager's address (for messages only: the shell connects).
    pub mm: String,
    /// Where the tree listener accepts the parent (sent in every registration).
    pub addr: String,
    /// Fixed for the life of the node manager process (see [`Register::incarnation`]).
    pub incarnation: u64,
    /// The CPUs the node manager may use: PE i of a job runs on the (offset + i)-th, modulo
    /// their number.
    pub cpus: Vec<usize>,
    pub cpu_offset: u32,
    /// `--keep-jobs`: how long a finished job's directory stays.
    pub keep_jobs: Dur,
    /// `--output-cap`, bytes per output file.
    pub output_cap: u64,
    pub node_scheme: NodeSchemeConfig,
    /// The node manager's effective uid: as root it reads and cuts only files of the job's
    /// user.
    pub euid: u32,
    /// `WORKDIR/jobs`: job `ID`'s directory on the node is `jobs_dir/ID`.
    pub jobs_dir: PathBuf,
    /// The program that serves PMIx to a job's ranks (`cosched`, run as `cosched
    /// pmix-helper`); `None`: this node manager serves no PMIx.
    pub pmix_helper: Option<PathBuf>,
    /// Bytes of memory jobs may take on this node (see [`NmConfig::memory`]).
    ///
    /// [`NmConfig::memory`]: super::NmConfig::memory
    pub memory: u64,
    /// The node manager's directory of Slurm's commands (`srun` and the others, links to
    /// the `cosched` binary), put first on a batch script's and a step's `PATH`.
    pub slurm_bin: Option<PathBuf>,
}

impl CoreConfig {
    /// The CPU that PE `pe` runs on (see [`CoreConfig::cpus`]).
    pub fn cpu_of(&self, pe: u32) -> usize {
        let n = self.cpus.len().max(1);
        self.cpus[(self.cpu_offset as usize + pe as usize) % n]
    }

    /// The CPUs of [`CoreConfig::cpus`] that no PE of this node runs on: where the node
    /// manager's own threads take no core from a rank (none when the PEs cover them all).
    pub fn spare_cpus(&self) -> Vec<usize> {
        let used: std::collections::BTreeSet<usize> = (0..self.pes.min(self.cpus.len() as u32))
            .map(|pe| self.cpu_of(pe))
            .collect();
        self.cpus
            .iter()
            .copied()
            .filter(|c| !used.contains(c))
            .collect()
    }
}

/// Something that reached the node manager.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one input is moved at a time, straight into the core: boxing a launch would cost an allocation per message for nothing"
)]
pub enum Input {
    /// A message of the machine manager's from the tree, stamped with the tree epoch it had
    /// announced last when it sent it ([`ToNode::payload`]; file-broadcast messages go to the
    /// stager, not here).
    Tree { epoch: u64, msg: ToNode },
    /// The tree's topology of `epoch` reached this node; `member`: it has a place in it.
    Topology { epoch: u64, member: bool },
    /// The machine manager's heartbeat changed the heartbeat variable: it is alive.
    Heard,
    /// The link to the parent in the tree broke.
    ParentLost,
    /// The answer to [`Effect::Register`]; `Err` says why there was none (no connection, no
    /// answer in time).
    Registration(Result<RegisterReply, String>),
    /// The answer to [`Effect::Prepare`].
    Prepared(Box<Prepared>),
    /// The answer to [`Effect::Spawn`]: the rank's pid (also its process group), or why it
    /// could not start.
    Spawned {
        job: JobId,
        launch: u64,
        rank: u32,
        result: Result<i32, String>,
    },
    /// A rank's process exited (`launch`: see [`Launch`] numbering in [`super::launch`]).
    Exited {
        job: JobId,
        launch: u64,
        exit: RankExit,
    },
    /// A line a rank wrote on its PMI socket.
    Pmi { job: JobId, rank: u32, line: String },
    /// The answer to [`Effect::Sample`].
    Samples(Samples),
    /// The cap's notice was appended to a rank's output file (after [`Effect::CapOutput`]).
    OutputCapped { job: JobId, rank: u32, file: usize },
    /// The answer to [`Effect::Sweep`]: each job directory of the work directory, and how long
    /// ago it last changed.
    JobDirs(Vec<(JobId, Dur)>),
    /// Every process of a cgroup being killed is gone ([`CgroupOp::Terminate`]).
    CgroupEmpty { job: JobId, launch: u64 },
    /// Switches the watcher's thread made of the rotation it carries out
    /// ([`Effect::Program`]), as they went.
    Switched(Vec<crate::program::Logged>),
    /// Every process of a cgroup being frozen ([`CgroupOp::Freeze`]) is stopped, or none is
    /// left.
    Frozen { job: JobId, launch: u64 },
    /// The answer to [`Effect::StartHelper`]: each local rank's PMIx environment, or why
    /// the job's helper is not serving.
    HelperReady {
        job: JobId,
        launch: u64,
        result: Result<RankEnvs, String>,
    },
    /// A line of a job's helper, after it was ready.
    Helper {
        job: JobId,
        launch: u64,
        msg: FromHelper,
    },
    /// A job's helper exited with this code (128 + signal when killed).
    HelperExited { job: JobId, launch: u64, code: i32 },
    /// The answer to [`Effect::LookForMpi`]: the MPI library mapped in the rank's process,
    /// if any.
    LookedForMpi {
        job: JobId,
        launch: u64,
        rank: u32,
        lib: Option<String>,
    },
    /// A time [`NmCore::next_wake`] named has come.
    Timer,
}

/// What to do to a launch's cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupOp {
    /// Stop every process in it; the shell answers with [`Input::Frozen`] once the kernel says
    /// they are (an answer that may come later than other inputs: see [`super::switch`]).
    Freeze,
    Thaw,
    /// Send this signal to every process in it.
    Signal(i32),
    /// Start killing it: thaw it; remove it at once if it is empty, else SIGTERM and SIGCONT
    /// to every process in it and report [`Input::CgroupEmpty`] if they are all gone within
    /// the `grace` (after which [`CgroupOp::Kill`] comes).
    Terminate {
        grace: Dur,
    },
    /// SIGKILL to everything left in it (`cgroup.kill`), then remove it once empty.
    Kill,
}

/// Keep one output file of a rank within the cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapOutput {
    pub job: JobId,
    pub rank: u32,
    /// Its index among the rank's files (out, then err when apart).
    pub file: usize,
    pub path: PathBuf,
    /// A file longer than this is cut back to it.
    pub keep: u64,
    /// Append the cap's notice after cutting (the first cut), and answer with
    /// [`Input::OutputCapped`].
    pub notice: bool,
    /// As root: only a regular file of this user is cut (a link they planted where an output
    /// was must not make root cut another file).
    pub must_own: Option<u32>,
}

/// Answer a [`ToNode::FetchOutput`]: read at most [`cosched_proto::proto::MAX_OUTPUT`] bytes of each of a
/// rank's output files and send [`FromNode::Output`] up.
#[derive(Clone, Debug)]
pub struct ReadOutput {
    pub req: u64,
    pub job: JobId,
    pub rank: u32,
    /// The job's working directory as submitted (the node's job directory when it has none).
    pub cwd: String,
    pub io: JobIo,
    /// As root: only regular files of this user are read.
    pub must_own: Option<u32>,
    pub tail: bool,
}

/// A line for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

/// Something the shell must do.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Register with the machine manager; answer with [`Input::Registration`].
    Register(Register),
    /// The machine manager accepted the node as `node`: the first time, the shell joins the
    /// tree with that id.
    Accepted {
        node: NodeId,
    },
    /// The machine manager refused the node: the node manager stops with this error.
    Rejected(String),
    /// Send this to the machine manager, up the tree.
    Up(FromNode),
    /// Send this node's part of a fence to the machine manager, combined at every hop of
    /// the tree with the parts of the other `nodes` of the job (one gathering, `id`).
    Gather {
        id: cosched_storm::GatherId,
        nodes: Vec<NodeId>,
        msg: FromNode,
    },
    /// Set up a launch; answer with [`Input::Prepared`].
    Prepare(Box<PrepareLaunch>),
    /// Start a rank; answer with [`Input::Spawned`].
    Spawn(Box<RankSpec>),
    /// Every rank of launch `launch` of `job` has started, or none will: the shell lets go
    /// of what it has held for the launch since [`Effect::Prepare`] (the `cgroup.procs`
    /// descriptors its ranks join, the handle of the job directory its rank files are
    /// written through). A launch set aside for its PMIx helper spawns its ranks on a
    /// later input, so the end of one batch of effects is not the end of a launch.
    SetupDone {
        job: JobId,
        launch: u64,
    },
    /// Start a job's PMIx helper ([`super::pmix`]); answer with [`Input::HelperReady`].
    StartHelper(Box<StartHelper>),
    /// Write this line to a job's helper.
    ToHelper {
        job: JobId,
        msg: ToHelper,
    },
    /// Send a signal to a process group.
    Signal {
        pgid: i32,
        sig: i32,
    },
    /// Send a signal to one process.
    SignalProcess {
        pid: i32,
        sig: i32,
    },
    /// Carry out this gang rotation on the freeze watcher's thread from now on, in place of
    /// the one before ([`crate::program`]); `thawed`: the cgroups running now, as the core
    /// knows them (a runner already at work keeps its own account of the cgroups it knew).
    /// The switches it makes come back as [`Input::Switched`].
    Program {
        program: crate::program::Program,
        thawed: std::collections::BTreeSet<crate::program::Cg>,
    },
    /// The watcher's thread stops carrying out a rotation (the core switches again).
    StopProgram,
    /// Act on the cgroup of launch `launch` of `job`.
    Cgroup {
        job: JobId,
        launch: u64,
        op: CgroupOp,
    },
    /// Write this line (its newline included) to the rank's PMI socket.
    PmiReply {
        job: JobId,
        rank: u32,
        line: String,
    },
    CapOutput(CapOutput),
    /// Append `text` to a rank's output file (a regular file of `must_own`'s, when given):
    /// what the node manager has to tell the job's user.
    AppendOutput {
        path: PathBuf,
        text: String,
        must_own: Option<u32>,
    },
    /// Look for an MPI library mapped in process `pid` (`/proc/PID/maps`); answer with
    /// [`Input::LookedForMpi`].
    LookForMpi {
        job: JobId,
        launch: u64,
        rank: u32,
        pid: i32,
    },
    /// Write file `name` of a rank that could not start into the job's directory, as made for
    /// the launch being prepared: a new private file in place of whatever is at the name,
    /// given to `owner` (uid, gid).
    WriteRankFile {
        job: JobId,
        launch: u64,
        name: String,
        content: Vec<u8>,
        owner: Option<(u32, u32)>,
    },
    ReadOutput(Box<ReadOutput>),
    /// Answer a [`ToNode::FetchMonitor`]: what the rings recorded, with the node scheme's name
    /// and events.
    SendMonitor {
        req: u64,
        scheme: String,
        events: Vec<NodeEvent>,
        switches: SwitchLog,
    },
    /// Read `/proc/PID/stat` of these ranks and the new records of these jobs' rings; answer
    /// with [`Input::Samples`].
    Sample {
        pids: Vec<i32>,
        jobs: Vec<JobId>,
    },
    /// Write a job's spin time (ns) into its ring.
    SetSpin {
        job: JobId,
        ns: u64,
    },
    /// Remove the copies staged for jobs that no job here has run for `keep`, and list the job
    /// directories; answer with [`Input::JobDirs`].
    Sweep {
        keep: Dur,
    },
    /// Remove a job's directory on the node (`--keep-jobs` is over).
    RemoveJobDir(JobId),
    /// The job left the node: its ring, its staged copies and its PMI sockets go; `held`: the
    /// node ran it, and its directory's time is set to now (the retention counts from it).
    Forgotten {
        job: JobId,
        held: bool,
    },
    /// Shut down: kill what is left in every job cgroup, remove the staged copies, and exit.
    Exit,
    Log(Level, String),
}

/// A rank of a job on this node.
#[derive(Clone, Debug)]
pub(super) struct Rank {
    /// Its process group (its pid); 0 when it could not start.
    pub(super) pgid: i32,
    pub(super) exit: Option<RankExit>,
    /// Its output files (one when the streams are merged), kept within `--output-cap`.
    pub(super) files: Vec<PathBuf>,
    /// The cap's notice has been appended to these of its files.
    pub(super) capped: Vec<bool>,
}

/// Why a rank's exit failed its job, when that says more than its status: its `MPI_Abort`
/// (PMI-1 or PMIx), or its PMIx server's death.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ExitNote {
    pub(super) why: String,
    /// The code its exit is recorded with, whatever its status: set when the node manager
    /// killed the rank on its own word (a PMI-1 abort, which waits to be killed), so that its
    /// status tells only the signal.
    pub(super) code: Option<i32>,
}

impl ExitNote {
    /// A reason that leaves the rank's own exit code as it is.
    pub(super) fn said(why: String) -> ExitNote {
        ExitNote { why, code: None }
    }
}

/// A job on this node.
#[derive(Clone, Debug)]
pub(super) struct NodeJob {
    pub(super) ranks: BTreeMap<u32, Rank>,
    pub(super) pmi: JobPmi,
    /// Its PMIx environments and what its helper said ([`super::pmix`]).
    pub(super) pmix: JobPmix,
    /// What its ranks' failed exits say beyond their status, by rank.
    pub(super) notes: BTreeMap<u32, ExitNote>,
    /// The first `MPI_Abort` of its ranks here, as sent up ([`FromNode::Aborted`]): sent
    /// again on joining the tree.
    pub(super) aborted: Option<RankExit>,
    /// Which of its ranks reached an MPI server and which loaded MPI ([`super::worlds`]).
    pub(super) worlds: Worlds,
    /// Its processes are in a cgroup: its own, or for a step its allocation's (else they
    /// are its ranks' process groups).
    pub(super) cgroup: bool,
    /// A step of this allocation ([`Launch::within`]): its ranks are in the allocation's
    /// cgroup, which stops, continues and kills them with it; the step's own kill
    /// (`--kill-on-bad-exit`, its end) goes to its process groups.
    pub(super) within: Option<JobId>,
    /// Stopped by the machine manager or the node scheme (its cgroup frozen): a step of it
    /// waits to be launched until it continues, as a process joining a frozen cgroup would
    /// freeze before its exec and the spawn with it.
    pub(super) stopped: bool,
    /// Which launch of this node manager it is: the exits of its ranks carry it.
    pub(super) launch: u64,
    /// Which run of the job it is (the machine manager's count, see [`Launch::run`]).
    pub(super) run: u32,
    /// The nodes it runs on: its fences are gathered from them, combined at every hop.
    pub(super) nodes: Vec<NodeId>,
    /// The job's user, when this node manager (root) runs it as another: only files of
    /// theirs are cut.
    pub(super) must_own: Option<u32>,
    /// When its first rank started here, and, launched stopped, when the freeze that
    /// followed its last rank's start landed: its run before the first run report
    /// ([`NmCore::report_runs`]), which starts with it.
    pub(super) began: Option<Time>,
    pub(super) held: Option<Time>,
}

impl NodeJob {
    /// Its processes are in a cgroup of its own, which stops, continues and kills them
    /// (a step's are in its allocation's).
    pub(super) fn owns_cgroup(&self) -> bool {
        self.cgroup && self.within.is_none()
    }

    /// Every rank it started here has exited.
    pub(super) fn all_exited(&self) -> bool {
        !self.ranks.is_empty() && self.ranks.values().all(|r| r.exit.is_some())
    }
}

/// Where the node manager stands with the machine manager.
#[derive(Clone, Debug)]
pub(super) enum Phase {
    /// Registering: the next attempt is due at `due` (`None`: one is under way). Tree input is
    /// not taken meanwhile; exits are recorded and go in the registration.
    Registering { due: Option<Time>, warned: bool },
    /// Fenced (see [`super::kill`]): killing these jobs, until their ranks are gone or `until`.
    Fencing { jobs: Vec<JobId>, until: Time },
    /// Registered: tree input is taken.
    Running,
    /// Shutting down: the ranks got SIGTERM; `groups` get SIGKILL once they are gone or at
    /// `until`.
    ShuttingDown { until: Time, groups: Vec<i32> },
    /// Stopped ([`Effect::Exit`] or [`Effect::Rejected`] was given).
    Done,
}

/// What a requested sample is for.
#[derive(Clone, Debug)]
pub(super) enum SampleFor {
    Tick,
    Strobe(Strobe),
}

/// See the module documentation.
pub struct NmCore {
    pub(super) cfg: CoreConfig,
    pub(super) phase: Phase,
    /// Learnt at registration; the machine manager addresses placements by it.
    pub(super) id: Option<NodeId>,
    /// Where the node's membership began, as the machine manager's last acceptance said:
    /// tree messages stamped earlier are dropped ([`NmCore::tree_message`]).
    pub(super) membership: u64,
    pub(super) jobs: BTreeMap<JobId, NodeJob>,
    /// Between SIGTERM and SIGKILL (the machine manager's `--kill-wait`, learnt at
    /// registration).
    pub(super) kill_wait: Dur,
    /// Launches so far, numbering the job cgroups and telling the exits of two launches of
    /// one job apart.
    pub(super) launches: u64,
    /// The launch whose effects are being carried out ([`super::launch`]).
    pub(super) launching: Option<Launching>,
    /// Launches whose ranks wait for their job's PMIx helper to be ready: set aside, so the
    /// next launch's chain goes on meanwhile ([`super::pmix`]).
    pub(super) helper_waits: Vec<Launching>,
    /// The ranks' name requests waiting for the machine manager's answer.
    pub(super) names: crate::names::NameRequests,
    /// Launches whose helper answered while another chain was under way: their ranks start
    /// next, before any launch not yet begun.
    pub(super) resumable: VecDeque<Launching>,
    /// SIGKILLs due after the grace ([`super::kill`]).
    pub(super) kills: Vec<super::kill::PendingKill>,
    /// Which job each live rank's process group belongs to: once a group is empty its number
    /// may be reused by a new rank, which a delayed SIGKILL must spare.
    pub(super) owners: HashMap<i32, JobId>,
    /// Registered: when the machine manager was last heard, and how long a silence makes
    /// the node register again.
    pub(super) last_heard: Time,
    pub(super) silence: Dur,
    /// The machine manager's `--down-after` (see [`NmCore::may_be_down_at`]).
    pub(super) down_after: Dur,
    /// When the job directories were last swept (`None`: never, so the first heartbeat
    /// sweeps what an earlier run left).
    last_sweep: Option<Time>,
    pub(super) nsched: NodeSched,
    /// When the node scheme looks at its ranks next (while it watches them).
    pub(super) next_tick: Option<Time>,
    pub(super) sampling: Option<SampleFor>,
    /// Launches of steps whose allocation is stopped here, started when it continues.
    pub(super) waiting_steps: Vec<Launch>,
    /// Launches to start once the one under way is done.
    pub(super) queued: VecDeque<Launch>,
    /// The order of the switch in progress: continues wait for the outgoing freezes.
    gate: Gate,
    /// The gang rotation announced, and who carries it out ([`rotation`]).
    rotating: Rotating,
    /// Under `gs`, what was last reported of each job's processes (`true`: runnable): see
    /// [`NmCore::report_runs`].
    ran: HashMap<(JobId, u32), bool>,
    /// Run-state changes not sent yet: they go up together, in one [`FromNode::Runs`], when
    /// the input that made them is done or before any other message (which keeps their order
    /// with a job's exit).
    runs_out: Vec<RunChange>,
    /// The instant of the input being taken in: run changes are stamped with it, and the
    /// message that carries them with the instant it goes up.
    clock: Time,
    effects: VecDeque<Effect>,
}

impl NmCore {
    /// What the core was configured with.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// A node manager that has just started: it registers first.
    pub fn new(cfg: CoreConfig, now: Time) -> NmCore {
        let nsched = NodeSched::new(cfg.node_scheme.clone(), &cfg.name, cfg.pes);
        let mut core = NmCore {
            cfg,
            phase: Phase::Done,
            id: None,
            membership: 0,
            jobs: BTreeMap::new(),
            kill_wait: DEFAULT_KILL_WAIT,
            launches: 0,
            launching: None,
            helper_waits: Vec::new(),
            names: Default::default(),
            resumable: VecDeque::new(),
            kills: Vec::new(),
            owners: HashMap::new(),
            last_heard: now,
            silence: Dur::MAX,
            down_after: Dur::MAX,
            last_sweep: None,
            nsched,
            next_tick: None,
            sampling: None,
            waiting_steps: Vec::new(),
            queued: VecDeque::new(),
            gate: Gate::default(),
            rotating: Rotating::default(),
            ran: HashMap::new(),
            runs_out: Vec::new(),
            clock: now,
            effects: VecDeque::new(),
        };
        core.register_again(now);
        core
    }

    /// The next thing to do, in order.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        if self.effects.is_empty() {
            self.flush_runs();
        }
        self.effects.pop_front()
    }

    /// Whether tree messages, PMI lines and heartbeats are taken now (not while registering,
    /// fencing or shutting down: the shell leaves them queued).
    pub fn takes_tree_input(&self) -> bool {
        matches!(self.phase, Phase::Running)
    }

    /// The node's id, once registered.
    pub fn node(&self) -> Option<NodeId> {
        self.id
    }

    /// When to pass [`Input::Timer`] next.
    pub fn next_wake(&self) -> Option<Time> {
        let phase = match &self.phase {
            Phase::Registering { due, .. } => *due,
            Phase::Fencing { until, .. } | Phase::ShuttingDown { until, .. } => Some(*until),
            Phase::Running => {
                let tick = self.next_tick.filter(|_| self.nsched.active());
                Some(tick.map_or(self.silent_at(), |t| t.min(self.silent_at())))
            }
            Phase::Done => None,
        };
        let kill = self.kills.iter().map(|k| k.at).min();
        [
            phase,
            kill,
            self.held_until(),
            self.gate.until(),
            self.looks_until(),
            self.rotation_wake()
                .filter(|_| matches!(self.phase, Phase::Running)),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn silent_at(&self) -> Time {
        Time(self.last_heard.0.saturating_add(self.silence.0))
    }

    /// From when the machine manager may have declared the node down: `--down-after` after
    /// it was last heard, less the silence the node allows (the machine manager's last word
    /// from the node may be that much older than the node's from it), and not before that
    /// silence.
    fn may_be_down_at(&self) -> Time {
        let early = Dur(self.down_after.0.saturating_sub(self.silence.0)).max(self.silence);
        Time(self.last_heard.0.saturating_add(early.0))
    }

    pub(super) fn push(&mut self, e: Effect) {
        self.effects.push_back(e);
    }

    pub(super) fn up(&mut self, msg: FromNode) {
        self.flush_runs();
        self.push(Effect::Up(msg));
    }

    /// A change of a job's run state here, sent up with the others of the same input.
    pub(super) fn runs_up(&mut self, change: RunChange) {
        self.runs_out.push(change);
    }

    fn flush_runs(&mut self) {
        if !self.runs_out.is_empty() {
            let changes = std::mem::take(&mut self.runs_out);
            self.push(Effect::Up(FromNode::Runs {
                sent_us: self.clock.as_micros(),
                changes,
            }));
        }
    }

    pub(super) fn log(&mut self, level: Level, line: String) {
        let line = format!("nm {}: {line}", self.cfg.name);
        self.push(Effect::Log(level, line));
    }

    /// Takes in one input at `now`.
    pub fn on(&mut self, now: Time, input: Input) {
        self.clock = self.clock.max(now);
        if matches!(
            input,
            Input::Tree { .. } | Input::Topology { .. } | Input::Heard
        ) && matches!(self.phase, Phase::Running)
            && self.may_be_down_at() <= now
        {
            // Silent for nearly `--down-after` (the node manager was stopped): the machine
            // manager may have declared the node down and started its jobs elsewhere. What
            // the tree delivers first after such a silence was sent before it; the node
            // registers again before it takes anything in, whichever of the timer and the
            // tree the shell served first. (A shorter silence, a starved node's, leaves it to
            // the timer: the node's jobs and messages still stand.)
            self.silence_over(now);
        }
        match input {
            Input::Tree { epoch, msg } => {
                // Not registered (it found itself silent past its limit as it took this in):
                // from before the registration under way.
                if matches!(self.phase, Phase::Running) {
                    self.tree_message(now, epoch, msg);
                }
            }
            Input::Topology { epoch, member } => {
                self.last_heard = now;
                if member {
                    self.joined(epoch);
                }
            }
            Input::Heard => self.last_heard = now,
            Input::ParentLost => {
                if matches!(self.phase, Phase::Running) {
                    self.log(
                        Level::Warn,
                        "lost its parent in the tree; registering again".into(),
                    );
                    self.register_again(now);
                }
            }
            Input::Registration(answer) => self.registration(now, answer),
            Input::Prepared(p) => self.prepared(now, *p),
            Input::Spawned {
                job,
                launch,
                rank,
                result,
            } => self.spawned(now, job, launch, rank, result),
            Input::Exited { job, launch, exit } => self.exited(now, job, launch, exit),
            Input::Pmi { job, rank, line } => {
                if let Some(j) = self.jobs.get_mut(&job) {
                    j.worlds.reached(rank);
                    let out = j.pmi.on_line(rank, &line);
                    self.pmi_out(job, out);
                }
            }
            Input::Samples(samples) => {
                let plan = match self.sampling.take() {
                    Some(SampleFor::Strobe(s)) => self.nsched.strobe(now, s, &samples),
                    Some(SampleFor::Tick) => self.nsched.tick(now, &samples),
                    None => return,
                };
                self.carry_out(now, plan);
            }
            Input::OutputCapped { job, rank, file } => {
                let capped = self
                    .jobs
                    .get_mut(&job)
                    .and_then(|j| j.ranks.get_mut(&rank))
                    .and_then(|r| r.capped.get_mut(file));
                if let Some(c) = capped {
                    *c = true;
                    let cap = self.cfg.output_cap;
                    self.log(
                        Level::Info,
                        format!(
                            "output of job {job} rank {rank} reached --output-cap ({cap} bytes): cut, with a notice"
                        ),
                    );
                }
            }
            Input::JobDirs(dirs) => {
                for (job, age) in dirs {
                    if !self.jobs.contains_key(&job) && age >= self.cfg.keep_jobs {
                        self.push(Effect::RemoveJobDir(job));
                    }
                }
            }
            Input::CgroupEmpty { job, launch } => self.cgroup_empty(job, launch),
            Input::Frozen { job, launch } => {
                if let Some(j) = self.jobs.get_mut(&job).filter(|j| j.launch == launch) {
                    j.held.get_or_insert(now);
                    self.report_runs(job, false, now);
                }
                let r = self.gate.frozen(now, job, launch);
                self.continue_held(r);
            }
            Input::HelperReady {
                job,
                launch,
                result,
            } => self.helper_ready(now, job, launch, result),
            Input::Helper { job, launch, msg } => self.helper_said(now, job, launch, msg),
            Input::HelperExited { job, launch, code } => self.helper_exited(now, job, launch, code),
            Input::LookedForMpi {
                job,
                launch,
                rank,
                lib,
            } => self.looked(job, launch, rank, lib),
            Input::Switched(switches) => self.landed(switches),
            Input::Timer => self.timer(now),
        }
        self.next_launch(now);
        if matches!(self.phase, Phase::Running) {
            self.rotation_upkeep(now);
        }
        // The node scheme looks at its ranks from the moment it has some to watch.
        if self.nsched.active() {
            self.next_tick.get_or_insert(now);
        } else {
            self.next_tick = None;
        }
    }
}
