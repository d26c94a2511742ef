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
}

impl NodeJob {
    /// Its processes are in a cgroup of its own, which stops, continues and kills them
    /// (a step's are in its allocation's).
    pub(super) fn owns_cgroup(&self) -> bool {
        self.cgroup && self.within.is_none()
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
    /// Under `gs`, what was last reported of each job's processes (`true`: runnable): see
    /// [`NmCore::report_runs`].
    ran: HashMap<(JobId, u32), bool>,
    effects: VecDeque<Effect>,
}

impl NmCore {
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
            ran: HashMap::new(),
            effects: VecDeque::new(),
        };
        core.register_again(now);
        core
    }

    /// The next thing to do, in order.
    pub fn poll_effect(&mut self) -> Option<Effect> {
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
        self.push(Effect::Up(msg));
    }

    pub(super) fn log(&mut self, level: Level, line: String) {
        let line = format!("nm {}: {line}", self.cfg.name);
        self.push(Effect::Log(level, line));
    }

    /// Takes in one input at `now`.
    pub fn on(&mut self, now: Time, input: Input) {
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
                if self.jobs.get(&job).is_some_and(|j| j.launch == launch) {
                    self.report_runs(job, false);
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
            Input::Timer => self.timer(now),
        }
        self.next_launch(now);
        // The node scheme looks at its ranks from the moment it has some to watch.
        if self.nsched.active() {
            self.next_tick.get_or_insert(now);
        } else {
            self.next_tick = None;
        }
    }

    fn timer(&mut self, now: Time) {
        self.kills_due(now);
        self.release_held(now);
        if let Some(r) = self.gate.due(now) {
            // Logged at the 1st, 2nd, 4th, 8th… late freeze: at 1-ms quanta every one would
            // flood the log.
            let late = self.gate.late();
            if late.is_power_of_two() {
                self.log(
                    Level::Warn,
                    format!("an outgoing job was not reported frozen within the switch's bound: the incoming one was thawed anyway ({late} late freezes so far)"),
                );
            }
            self.continue_held(Some(r));
        }
        self.looks_due(now);
        match self.phase.clone() {
            Phase::Registering { due: Some(t), .. } if t <= now => self.attempt(),
            Phase::Fencing { until, .. } if until <= now => self.fenced(now),
            Phase::ShuttingDown { until, .. } if until <= now => self.shut(),
            Phase::Running => {
                if self.silent_at() <= now {
                    self.silence_over(now);
                    return;
                }
                if self.nsched.active() && self.next_tick.is_some_and(|t| t <= now) {
                    self.next_tick = Some(now + TICK);
                    self.sample(now, SampleFor::Tick);
                }
            }
            _ => {}
        }
    }

    /// The machine manager has not been heard for the silence it allows: the node registers
    /// again.
    fn silence_over(&mut self, now: Time) {
        let silence = std::time::Duration::from_micros(self.silence.0.max(0) as u64);
        self.log(
            Level::Warn,
            format!("no heartbeat for {silence:?}; registering again"),
        );
        self.register_again(now);
    }

    /// A message of the machine manager's from the tree, stamped `epoch`. One sent before
    /// the node's membership began does not act: it waited in the shell or on a socket while
    /// the node was stopped, registered or was fenced, and the registration that began the
    /// membership gave up on what it was meant for — a launch of it would start a run that
    /// was requeued meanwhile and may run elsewhere. The registration reconciled the rest:
    /// jobs the node no longer runs are dropped, a launch that still stands is sent again
    /// once the node is back in the tree, signals are replaced by the resynchronisation on
    /// joining, an unanswered PMI fence is repeated.
    fn tree_message(&mut self, now: Time, epoch: u64, msg: ToNode) {
        if epoch >= self.membership {
            self.message(now, msg);
            return;
        }
        if let ToNode::Launch(l) = &msg {
            let (job, run, membership) = (l.job, l.run, self.membership);
            self.log(
                Level::Warn,
                format!(
                    "dropped the launch of job {job} (run {run}) sent before the node registered again (tree epoch {epoch}, the node's membership is of {membership}): the machine manager sends it again if it still stands"
                ),
            );
        }
    }

    /// One message of the machine manager's.
    fn message(&mut self, now: Time, msg: ToNode) {
        match msg {
            ToNode::Heartbeat { strobe, .. } => {
                self.cap_outputs(None);
                self.sweep_if_due(now);
                if let Some(strobe) = strobe {
                    self.sample(now, SampleFor::Strobe(strobe));
                }
            }
            ToNode::Strobe(strobe) => self.sample(now, SampleFor::Strobe(strobe)),
            ToNode::Shutdown => self.shut_down(now),
            // The shell's: it holds the keys.
            ToNode::RotateKey { .. } => {}
            ToNode::BcastBegin { .. }
            | ToNode::BcastChunk { .. }
            | ToNode::BcastEnd { .. }
            | ToNode::BcastAbort { .. } => {}
            ToNode::Launch(l) => self.launch(now, l),
            ToNode::Switch { stop, cont, kill } => {
                // Stop the outgoing jobs before continuing the incoming ones, so two jobs never
                // share a PE even for an instant. Jobs of the gang matrix are switched by the
                // node scheme from the strobe that follows this message; the others (a policy
                // without a matrix) here.
                for (jobs, stopped) in [(stop, true), (cont, false)] {
                    for job in jobs {
                        if self.nsched.manages(job) {
                            continue;
                        }
                        self.signal(job, stopped);
                        self.nsched.job_signalled(now, job, stopped);
                    }
                }
                for job in kill {
                    self.terminate(now, job);
                }
            }
            ToNode::FenceDone { job, seq, kvs } if seq >= super::pmix::FENCE_BASE => {
                self.pmix_fence_done(job, seq - super::pmix::FENCE_BASE, kvs)
            }
            ToNode::FenceDone { job, seq, kvs } => {
                if let Some(j) = self.jobs.get_mut(&job) {
                    let out = j.pmi.fence_done(seq, kvs);
                    self.pmi_out(job, out);
                }
            }
            ToNode::FetchMonitor { req } => {
                let scheme = self.nsched.scheme().name().to_string();
                let events = self.nsched.events();
                let switches = self.gate.log();
                self.push(Effect::SendMonitor {
                    req,
                    scheme,
                    events,
                    switches,
                });
            }
            ToNode::Forget { jobs } => {
                for job in jobs {
                    self.forget(now, job);
                }
            }
            ToNode::FetchOutput {
                req,
                job,
                rank,
                cwd,
                io,
                uid,
                tail,
            } => {
                // As root, only the job's user's own regular files are read: the user could
                // have put a link to any file, or a FIFO, where the output was.
                let must_own = uid.filter(|&u| u != 0 && self.cfg.euid == 0);
                self.push(Effect::ReadOutput(Box::new(ReadOutput {
                    req,
                    job,
                    rank,
                    cwd,
                    io,
                    must_own,
                    tail,
                })));
            }
        }
    }

    /// Asks the shell for what the ranks did, for a tick or a strobe of the node scheme (a
    /// strobe is planned at once when there is no rank here, or when the scheme acts on the
    /// strobe alone: reading `/proc` and the rings at every switch of 1-ms quanta cost `gs`
    /// more CPU than the switch itself).
    fn sample(&mut self, now: Time, what: SampleFor) {
        let (pids, jobs) = self.nsched.to_sample();
        if pids.is_empty() || !self.nsched.watches_ranks() {
            let plan = match what {
                SampleFor::Strobe(s) => self.nsched.strobe(now, s, &Samples::default()),
                SampleFor::Tick => return,
            };
            self.carry_out(now, plan);
            return;
        }
        self.sampling = Some(what);
        self.push(Effect::Sample { pids, jobs });
    }

    /// Carries out a plan of the node scheme: rank stops and job stops at once; job continues,
    /// then rank continues, once the jobs it freezes are reported frozen ([`super::switch`]),
    /// so two jobs never share a PE even for an instant; then tells the machine manager which
    /// jobs now run or stand stopped here, for its accounting.
    fn carry_out(&mut self, now: Time, plan: Plan) {
        for (job, ns) in plan.spins {
            self.push(Effect::SetSpin { job, ns });
        }
        for &pid in &plan.stop_ranks {
            self.push(Effect::Signal {
                pgid: pid,
                sig: libc::SIGSTOP,
            });
        }
        let mut freezing = Vec::new();
        for &job in &plan.stop_jobs {
            match self.jobs.get(&job) {
                Some(j) if j.owns_cgroup() => freezing.push((job, j.launch)),
                // SIGSTOP: stopped once sent, as far as anything here can tell.
                _ => self.report_runs(job, false),
            }
            self.signal(job, true);
        }
        let r = self.gate.switch(
            now,
            &freezing,
            &plan.stop_jobs,
            &plan.stop_ranks,
            plan.cont_jobs,
            plan.cont_ranks,
        );
        self.continue_held(r);
        for (job, runs) in plan.runs {
            if let Some(j) = self.jobs.get(&job) {
                let run = j.run;
                self.up(FromNode::Runs { job, run, runs });
            }
        }
    }

    /// Under `gs`, tells the machine manager when a job of the matrix starts or stops
    /// running here (`FromNode::Runs`), for its accounting: from its thaw to the moment its
    /// freeze is reported done, not the slot's bounds, so that a job is not booked as running
    /// while the switch's freeze and thaw are under way, nor as stopped while its freeze has
    /// not landed. The other schemes report from their plans ([`Plan::runs`]).
    fn report_runs(&mut self, job: JobId, runs: bool) {
        if self.nsched.scheme() != cosched_node::Scheme::Gs || !self.nsched.manages(job) {
            return;
        }
        let Some(run) = self.jobs.get(&job).map(|j| j.run) else {
            return;
        };
        // Keyed by run: a requeued job's new run reports afresh.
        if self.ran.insert((job, run), runs) != Some(runs) {
            self.up(FromNode::Runs { job, run, runs });
        }
    }

    /// Continues what a switch held back: jobs, then ranks.
    fn continue_held(&mut self, r: Option<Release>) {
        let Some(Release { jobs, ranks }) = r else {
            return;
        };
        let thaw_only = self.nsched.scheme() == cosched_node::Scheme::Fcs;
        for job in jobs {
            match self.jobs.get(&job) {
                // FCS continues the chosen ranks one by one (below); the job's freezer must
                // let them.
                Some(j) if thaw_only => {
                    if j.owns_cgroup() {
                        let launch = j.launch;
                        if let Some(j) = self.jobs.get_mut(&job) {
                            j.stopped = false;
                        }
                        self.release_steps(job);
                        self.push(Effect::Cgroup {
                            job,
                            launch,
                            op: CgroupOp::Thaw,
                        });
                    }
                }
                _ => self.signal(job, false),
            }
            self.report_runs(job, true);
        }
        for pid in ranks {
            self.push(Effect::Signal {
                pgid: pid,
                sig: libc::SIGCONT,
            });
        }
    }

    /// Stops or continues a job whole: its cgroup's freezer (which stops every process of the
    /// job, `setsid` ones included), else its running ranks' process groups.
    pub(super) fn signal(&mut self, job: JobId, stop: bool) {
        let Some(j) = self.jobs.get_mut(&job) else {
            return;
        };
        j.stopped = stop;
        if !stop {
            self.release_steps(job);
        }
        let j = &self.jobs[&job];
        if j.owns_cgroup() {
            let (launch, op) = (
                j.launch,
                if stop {
                    CgroupOp::Freeze
                } else {
                    CgroupOp::Thaw
                },
            );
            self.push(Effect::Cgroup { job, launch, op });
            return;
        }
        let sig = if stop { libc::SIGSTOP } else { libc::SIGCONT };
        // Its steps' ranks too: without a cgroup nothing else holds them together.
        let groups: Vec<i32> = self
            .jobs
            .iter()
            .filter(|&(&id, j)| id == job || j.within == Some(job))
            .flat_map(|(_, j)| j.ranks.values())
            .filter(|r| r.exit.is_none())
            .map(|r| r.pgid)
            .filter(|&g| g > 0)
            .collect();
        for pgid in groups {
            self.push(Effect::Signal { pgid, sig });
        }
    }

    /// This node's part of fence `seq` of `job` (PMI-1's, or PMIx's from
    /// [`super::pmix::FENCE_BASE`]), gathered with the other nodes' up the tree.
    pub(super) fn fence_up(&mut self, job: JobId, seq: u64, puts: Vec<(String, String)>) {
        let Some(j) = self.jobs.get(&job) else {
            return;
        };
        let id = (job.0, u64::from(j.run), seq);
        let nodes = j.nodes.clone();
        let msg = FromNode::Fence { job, seq, puts };
        self.push(Effect::Gather { id, nodes, msg });
    }

    /// Carries out what the PMI protocol of `job` asks for.
    fn pmi_out(&mut self, job: JobId, out: Vec<Out>) {
        for o in out {
            match o {
                Out::Reply(rank, line) => self.push(Effect::PmiReply { job, rank, line }),
                Out::FenceUp { seq, puts } => self.fence_up(job, seq, puts),
                Out::Abort { rank, code, msg } => self.pmi_abort(job, rank, code, &msg),
                Out::Bad { rank, line } => self.log(
                    Level::Warn,
                    format!("job {job} rank {rank}: PMI line not served: {line:?}"),
                ),
            }
        }
    }

    /// A rank's `PMI_Abort`. MPICH's client waits after it for the process manager to end the
    /// job (as Hydra does), so the node manager kills the rank, its exit recorded with the
    /// rank's code and the abort as its reason; the machine manager then kills the other ranks,
    /// as for any rank exiting non-zero.
    fn pmi_abort(&mut self, job: JobId, rank: u32, code: i32, msg: &str) {
        let Some(j) = self.jobs.get_mut(&job) else {
            return;
        };
        let why = match msg {
            "" => format!("MPI_Abort with status {code}"),
            m => format!("MPI_Abort with status {code}: {m}"),
        };
        let pgid = j
            .ranks
            .get(&rank)
            .filter(|r| r.exit.is_none())
            .map_or(0, |r| r.pgid);
        j.notes.insert(
            rank,
            ExitNote {
                why: why.clone(),
                code: Some(code),
            },
        );
        self.log(Level::Warn, format!("job {job} rank {rank}: {why}"));
        if pgid > 0 {
            self.push(Effect::Signal {
                pgid,
                sig: libc::SIGKILL,
            });
        }
    }

    /// A rank's exit as reported: with the reason its MPI gave for it, when there is one.
    pub(super) fn explained(&self, job: JobId, mut exit: RankExit) -> RankExit {
        let note = self.jobs.get(&job).and_then(|j| j.notes.get(&exit.rank));
        if let Some(note) = note
            && exit.error.is_none()
            && (exit.code != Some(0) || note.code.is_some())
        {
            exit.error = Some(note.why.clone());
            exit.code = note.code.or(exit.code);
        }
        exit
    }

    /// A rank's exit: recorded (and cut to the cap one last time); sent up when the node is
    /// registered. Kept until the machine manager forgets the job: reported again at the next
    /// registration and on joining the tree, so a report lost on the way (no parent yet, a
    /// parent that died) is not lost for good.
    fn exited(&mut self, now: Time, job: JobId, launch: u64, exit: RankExit) {
        let exit = self.explained(job, exit);
        let exit = self.world_of_one(job, exit);
        if let Some(exit) = self.hold_for_abort(now, job, launch, exit) {
            self.exit_taken(now, job, launch, exit);
        }
    }

    /// [`NmCore::exited`], once the exit says all it will.
    pub(super) fn exit_taken(&mut self, now: Time, job: JobId, launch: u64, exit: RankExit) {
        let run = self.record_exit(job, launch, &exit);
        match self.phase {
            Phase::Running => {
                if let Some(run) = run {
                    self.up(FromNode::Exited { job, run, exit });
                }
            }
            Phase::Fencing { .. } => self.fence_progress(now),
            Phase::ShuttingDown { .. } => self.shutdown_progress(),
            Phase::Registering { .. } | Phase::Done => {}
        }
    }

    /// Takes in a rank's exit; `None` when the job or rank is unknown (forgotten already), or
    /// when the exit is of an earlier launch of the job (a requeued job launched here again
    /// while a rank of its previous run was still exiting: that exit is not the new rank's).
    /// Returns the job's run (see [`Launch::run`]) when it took the exit in.
    pub(super) fn record_exit(&mut self, job: JobId, launch: u64, exit: &RankExit) -> Option<u32> {
        let j = self.jobs.get_mut(&job).filter(|j| j.launch == launch)?;
        let r = j.ranks.get_mut(&exit.rank)?;
        if r.exit.is_some() {
            // Taken in already: an exit is reported once.
            return None;
        }
        r.exit = Some(exit.clone());
        let run = j.run;
        // Its last writes are cut too, not only those a heartbeat saw.
        self.cap_outputs(Some((job, exit.rank)));
        self.nsched.exited(job, exit.rank);
        Some(run)
    }

    /// Keeps the output files of the running ranks (of `only` that rank, when given) within
    /// `--output-cap`: a file past it is cut back to the cap and the notice appended once;
    /// the rank appends (`O_APPEND`), so what it writes later lands after the notice and is
    /// cut at the next check. A fast writer overshoots by what it writes between two
    /// heartbeats.
    fn cap_outputs(&mut self, only: Option<(JobId, u32)>) {
        let cap = self.cfg.output_cap;
        let notice = super::cap_notice(cap).len() as u64;
        let mut checks = Vec::new();
        for (&job, j) in &self.jobs {
            for (&rank, r) in &j.ranks {
                let wanted = match only {
                    Some(o) => o == (job, rank),
                    None => r.exit.is_none(),
                };
                if !wanted {
                    continue;
                }
                for (file, (path, &capped)) in r.files.iter().zip(&r.capped).enumerate() {
                    checks.push(CapOutput {
                        job,
                        rank,
                        file,
                        path: path.clone(),
                        keep: cap + if capped { notice } else { 0 },
                        notice: !capped,
                        must_own: j.must_own,
                    });
                }
            }
        }
        for c in checks {
            self.push(Effect::CapOutput(c));
        }
    }

    /// Sweeps the work directory at most every quarter of the retention (between 0.2 s and a
    /// minute): cheap enough on every heartbeat, prompt enough for a short retention. Only
    /// the node's own job directories go, of jobs it no longer holds, once their last change
    /// (their end, see [`Effect::Forgotten`]) is older than the retention.
    fn sweep_if_due(&mut self, now: Time) {
        let keep = self.cfg.keep_jobs;
        let every = Dur(keep.0 / 4)
            .max(Dur::from_millis(200))
            .min(Dur::from_secs(60));
        if self.last_sweep.is_some_and(|t| now.since(t) < every) {
            return;
        }
        self.last_sweep = Some(now);
        self.push(Effect::Sweep { keep });
    }

    /// Drops a job the machine manager has ended; what is left of its processes (a rank's
    /// background children) is terminated with the usual grace.
    pub(super) fn forget(&mut self, now: Time, job: JobId) {
        self.terminate(now, job);
        self.nsched.forget(job);
        let r = self.gate.forget(now, job);
        self.continue_held(r);
        self.ran.retain(|(j, _), _| *j != job);
        let held = self.jobs.remove(&job).is_some();
        self.push(Effect::Forgotten { job, held });
        self.owners.retain(|_, o| *o != job);
    }
}
