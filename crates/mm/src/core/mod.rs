//! The machine manager's sans-IO core: everything it decides, nothing it does.
//!
//! Time is passed in, never read; what the core wants done comes out as [`Effect`]s (launch,
//! signal and forget messages down the tree, replies, heartbeats, records to persist), which
//! the shell ([`super::shell`]) carries out with tokio, the storm tree and SQLite. A test can
//! therefore drive it with a virtual clock and play the nodes itself.
//!
//! Jobs live in the shared job ledger ([`cosched_ledger`]): every lifecycle fact (phase, PEs,
//! hold, run and suspended time, outcome, start and end) is the ledger's, exactly as in the
//! simulator; the core keeps only its side table ([`Side`]: command, placement, per-rank
//! exits, error text). Inputs only gather the events of the current instant; [`Core::step`]
//! then hands the whole instant to the policy — ends, then submissions, then timers, then the
//! rest — and asks it to decide once, with further rounds for the ends its decisions caused.
//! Nothing calls back into the policy while a decision is applied.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

use cosched_core::{Dur, JobId, JobRecord, MachineShape, NodeId, Outcome, PeSet, Time};
use cosched_ledger::instant::Instant;
use cosched_ledger::{Change, Ix, Ledger, Refusal};
use cosched_policy::{Decision, Event, JobRequest, Policy, Spread};

use super::changes::{SHUT_DOWN, Staged, Write};
use super::nodes::{NodeEntry, NodeTable};
use crate::db::NodeRow;
use cosched_proto::proto::*;

mod ends;
mod launch;
mod modex;
mod names;
mod recovery;
mod signals;
mod submit;
mod timers;

pub use submit::parse_pes;
use submit::request_of;

/// Estimate given to the policy for a job submitted without `--time`.
pub const DEFAULT_ESTIMATE: Dur = Dur::from_secs(86_400);

/// The longest time limit a job may ask for. Checked where a limit enters: at `submit`'s
/// parsing (`cosched submit --time`, through [`check_time_limit`]) for a clear error, and
/// here in the machine manager, which must not trust what a client sends. A year is far
/// beyond any real batch limit and far inside the range of the clock's arithmetic.
pub const MAX_TIME_LIMIT: Dur = Dur::from_secs(366 * 86_400);

/// A time limit is positive and at most [`MAX_TIME_LIMIT`]; the error says which bound.
pub fn check_time_limit(limit: Dur) -> Result<Dur, String> {
    if limit <= Dur::ZERO {
        return Err("--time must be positive".into());
    }
    if limit > MAX_TIME_LIMIT {
        return Err(format!(
            "--time {limit} is too long: a time limit may be at most {} days",
            MAX_TIME_LIMIT.as_micros() / Dur::from_secs(86_400).as_micros()
        ));
    }
    Ok(limit)
}

/// How long a running job's accounting may stay in memory only after a node's run report
/// changed it ([`FromNode::Runs`], at every gang switch): the reports are written with the
/// job's next record, or this long after the first unwritten one. A run report is never
/// acknowledged to anyone, so nothing acknowledged waits in memory; a machine manager that
/// dies loses at most this much of its running jobs' run time, whose runs end then anyway.
pub const RUNS_WRITE_EVERY: Dur = Dur::from_secs(1);
/// How long the machine manager may sleep through its policy's timers while the gang
/// rotation it announced repeats (the node managers switch on their own): woken by anything
/// else, or this long after the first timer it slept through, it handles each at its own
/// instant ([`Core::catch_up`]). Waking for every quantum cost it ~3.6 % of a core at
/// 1-ms quanta, taken from the ranks on a node it shares with them.
pub const ROTATION_CATCH_UP: Dur = Dur::from_millis(100);

/// How many times a launch is sent to a node that does not acknowledge it before the job
/// fails with that reason.
pub const LAUNCH_TRIES: u32 = 3;

/// A launch not yet acknowledged by one of the job's nodes.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    /// When it was last sent; `None`: waiting for the node to be in the tree.
    pub sent: Option<Time>,
    pub tries: u32,
}

/// A client's question (a rank's output, a node's monitor records) passed to a node, awaiting
/// its answer.
#[derive(Clone, Copy, Debug)]
pub struct Fetch {
    pub client: ReqId,
    pub node: NodeId,
    /// The client gets an error saying why if the node has not answered by then.
    pub deadline: Time,
    /// The files' ends were asked for.
    pub tail: bool,
}

/// Identifies a request whose answer the shell must route back (a client's connection, a
/// node's registration).
pub type ReqId = u64;

/// Something that reached the machine manager.
#[derive(Clone, Debug)]
pub enum Input {
    /// A client's request.
    Client {
        req: ReqId,
        request: Request,
        caller: Caller,
    },
    /// A node manager (re)registers.
    Register { req: ReqId, reg: Register },
    /// A report a node sent up the tree.
    FromNode { from: NodeId, msg: FromNode },
    /// A sign of life from a node (a heartbeat answer or any report).
    Heard(NodeId),
    /// The records of request `req`'s change ([`Write`]) are in the database (`Ok`), or
    /// could not be written (`Err`: why, naming the database and what to do). The driver
    /// passes it right after the request, before any other input.
    Written {
        req: ReqId,
        result: Result<(), String>,
    },
}

/// Something the shell must do.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Answer a client request.
    Reply {
        req: ReqId,
        resp: Response,
    },
    /// Answer a job query whose page holds forgotten jobs: the shell replaces the records at
    /// `from_db` (positions in the page) by the database's, shortening their command lines
    /// when `listing`.
    ReplyJobs {
        req: ReqId,
        page: JobsPage,
        from_db: Vec<usize>,
        listing: bool,
    },
    /// Answer a registration.
    Registered {
        req: ReqId,
        reply: RegisterReply,
    },
    /// Send a message down the tree to these nodes.
    Send {
        to: Vec<NodeId>,
        msg: ToNode,
    },
    /// Send a message to every node.
    Broadcast(ToNode),
    /// Send heartbeat `seq` to every node and ask which hold it.
    Heartbeat {
        seq: i64,
        /// The gang rotation in force it carries again (see [`Core::announce`]).
        rotation: Option<cosched_proto::rotation::Rotation>,
    },
    /// The tree's members changed (the nodes that are up, with their addresses).
    Members {
        epoch: u64,
        members: Vec<(NodeId, String)>,
    },
    /// Write a job's record through to the database.
    PersistJob(Box<JobInfo>),
    PersistNode(NodeRow),
    /// A line for the log.
    Log(String),
    /// Everything is stopped: the shell lets the last messages drain and exits.
    Exit,
}

/// The machine manager's settings that the core needs.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// Nodes of the machine without a configuration (`--nodes`); with one, the machine has
    /// the configured nodes, and those the database still knows (see [`NodeTable`]).
    pub nodes: u32,
    pub pes: u32,
    /// The configured nodes, by name; empty: the first `nodes` to register.
    pub names: Vec<String>,
    /// Fan-out of the tree (shown by `status`).
    pub fanout: u32,
    /// Period of the heartbeat down the tree.
    pub heartbeat: Dur,
    /// A node not heard from for this long is not responding (see [`super::nodes`]).
    pub suspect_after: Dur,
    /// A node not heard from for this long is down (see [`super::nodes`]).
    pub down_after: Dur,
    /// Requeue jobs lost with a node instead of failing them.
    pub requeue: bool,
    /// Between SIGTERM and SIGKILL when a job is killed (given to the nodes at registration).
    pub kill_wait: Dur,
    /// Keep a killed job's PEs until its ranks reported their exits (see [`Completing`]).
    /// Off only where processes vanish the instant they are killed: the test that compares
    /// the core with the simulator, which has no processes.
    pub hold_pes_while_completing: bool,
    /// An ended job is forgotten (its command, environment and placement dropped from
    /// memory; its record stays in the database) this long after its end (`--keep-jobs`).
    pub keep_jobs: Dur,
}

/// What a restarted machine manager finds in its database.
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    pub nodes: Vec<NodeRow>,
    pub jobs: Vec<JobInfo>,
    /// Nodes an administrator drained or set down.
    pub admin: BTreeMap<NodeId, NodeChange>,
}

/// The machine manager's side of a job: what the policy never sees and the ledger does not
/// keep.
#[derive(Clone, Debug)]
pub struct Side {
    pub name: String,
    pub class: Option<String>,
    pub user: Option<u32>,
    pub gid: Option<u32>,
    pub time_limit: Option<Dur>,
    pub cmd: Vec<String>,
    pub cwd: String,
    pub io: JobIo,
    /// Its dependencies and begin time (see [`super::deferral`]).
    pub sched: Schedule,
    /// Its memory limit (`--mem`, `--mem-per-cpu`), which its nodes set on its cgroup.
    pub mem: Option<MemLimit>,
    /// Where its tasks may go by node (`-N`, `--nodelist`, …), which the policy honours.
    pub spread: Option<Box<Spread>>,
    /// The partition it runs in, or the list it may run in (see [`Core::partition_of`]).
    pub partition: Option<String>,
    /// Its tasks when fewer than its PEs (`--exclusive`: whole nodes).
    pub tasks: Option<Tasks>,
    /// Where its ranks run (empty until it is given PEs, and again after a requeue).
    pub placement: Vec<Placement>,
    /// Exit code per rank, `None` while it runs.
    pub ranks: BTreeMap<u32, Option<i32>>,
    pub error: Option<String>,
    /// Order of its last start of running: the ends of one instant reach the policy in this
    /// order, whatever order their reports arrived in ([`cosched_ledger::instant::Stage::Ends`]).
    run_seq: u64,
    /// Killed while its processes existed: forget it on its nodes once every rank reported.
    pub(super) forget_pending: bool,
    /// Launches so far: the current run's number (see [`Launch::run`]).
    pub run: u32,
    /// Lost with a node and to be requeued (why) once the processes of its run on the other
    /// nodes are gone (see [`Completing`]).
    pub(super) requeue_why: Option<String>,
    /// Ended more than `keep_jobs` ago: only the ledger's record, the name, class and owner
    /// are in memory; queries take the rest from the database.
    pub(super) forgotten: bool,
    /// The size of its record as a client gets it, from before it was forgotten: what its
    /// record from the database adds to a page.
    pub(super) record_bytes: usize,
    /// The nodes that report running some process of it (see [`FromNode::Runs`]), and the
    /// instant of the last report booked (reports of several nodes, each sent in batches,
    /// are booked in the order they arrive, never before the one booked last).
    pub(super) runs_on: BTreeSet<NodeId>,
    pub(super) runs_at: Time,
    /// Its steps (`srun` inside it; see [`super::steps`]), by step number.
    pub steps: Vec<StepInfo>,
    /// The run its `--signal` was sent in (0: none yet): each run gets it once.
    pub(super) warned_run: u32,
}

/// Where a job's [`Event::Ended`] goes in the instant it is delivered.
#[derive(Clone, Copy, Debug)]
pub(super) enum EndGroup {
    Caused,
    /// With the job's run order.
    Ends(u64),
    Rest,
    /// Not an end: the job goes back to the queue (`--requeue`).
    Requeue,
}

/// A job that ended while processes of it may still run (Slurm's COMPLETING): the policy
/// hears of its end, and so may give its PEs to another job, only once every rank has
/// reported its exit, or a node of it is lost, or `until` passes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Completing {
    pub group: EndGroup,
    pub until: Time,
}

/// A PMI fence of one job being gathered: the nodes that entered it and their puts.
#[derive(Clone, Debug, Default)]
pub(super) struct Fence {
    seq: u64,
    nodes: BTreeSet<NodeId>,
    kvs: BTreeMap<String, String>,
    /// Answered already: a node that repeats it (it rejoined the tree and the answer may
    /// have been lost) gets the answer again.
    complete: bool,
}

/// The stops, continues and kills of one step: one multi-context-switch message.
#[derive(Default)]
struct Switch {
    stop: Vec<JobId>,
    cont: Vec<JobId>,
    kill: Vec<JobId>,
    nodes: BTreeSet<NodeId>,
}

/// The machine manager, without its input and output; see the module documentation.
pub struct Core {
    pub(super) cfg: CoreConfig,
    pub(super) shape: MachineShape,
    pub(super) policy: Box<dyn Policy>,
    pub(super) ledger: Ledger,
    /// Side table, by ledger position.
    pub(super) side: Vec<Side>,
    /// The configuration's partitions and node features (see [`crate::partitions`]).
    pub(super) partitions: crate::partitions::Partitions,
    /// Jobs not ended, by ledger position.
    pub(super) live: BTreeSet<Ix>,
    /// The live jobs that hold PEs (have a placement): the only ones with a time limit
    /// running. Kept apart so that the work of each step grows with the jobs running, not with
    /// the queue (a 10,000-job backlog made every submission 5× dearer).
    pub(super) placed: BTreeSet<Ix>,
    pub(super) nodes: Vec<NodeEntry>,
    next_job: u64,
    /// `(at, seq, token)`.
    timers: BinaryHeap<Reverse<(Time, u64, u64)>>,
    seq: u64,
    instant: Instant,
    switch: Switch,
    pub(super) switches: u64,
    /// The gang rotation the nodes were told last ([`Core::announce`]).
    pub(super) announced: crate::announce::Announced,
    effects: Vec<Effect>,
    /// Why the policy stopped deciding ([`Policy::failure`]: an external policy's child
    /// exited or answered nonsense), once it did; logged once.
    pub(super) policy_failed: Option<String>,
    /// Jobs whose record changed since the last step.
    dirty: BTreeSet<Ix>,
    /// Jobs whose accounting changed by run reports only, and when they are written at the
    /// latest ([`RUNS_WRITE_EVERY`]).
    runs_unwritten: BTreeSet<Ix>,
    runs_write_at: Time,
    pub(super) hb_seq: i64,
    pub(super) next_hb: Time,
    /// Until when nodes known from the database may come back with their jobs.
    pub(super) grace_until: Option<Time>,
    /// Output and monitor fetches awaiting a node's answer, by fetch id.
    pub(super) outputs: HashMap<u64, Fetch>,
    pub(super) next_fetch: u64,
    /// The last tree epoch announced.
    pub(super) epoch: u64,
    /// Launches not yet acknowledged, by (job, node).
    pub(super) pending: BTreeMap<(JobId, NodeId), Pending>,
    /// The PMI fence each MPI job is in (until the job ends).
    fences: BTreeMap<JobId, Fence>,
    /// Where each node's clock falls on this one, for its run reports.
    pub(crate) node_clocks: crate::clocks::NodeClocks,
    /// The name service's table (`MPI_Publish_name` and kin; see [`crate::names`]).
    names: crate::names::Names,
    /// Live jobs not yet given to the policy: their dependencies, begin time or array
    /// throttle hold them back (ledger phase Future; see [`super::deferral`]).
    pub(super) deferred: BTreeSet<Ix>,
    /// Ended jobs whose processes are being killed; see [`Completing`].
    pub(super) completing: BTreeMap<Ix, Completing>,
    pub(super) last_now: Time,
    /// When the last step ran (see [`Core::account_stall`]).
    last_step: Time,
    shutting_down: bool,
    /// Ended jobs in the order of their ends, to be forgotten `keep_jobs` after.
    ended: std::collections::VecDeque<(Time, Ix)>,
    /// When ended jobs are next looked at for forgetting.
    next_forget: Time,
    /// A client's change waiting for its records to be durable (see [`super::changes`]).
    pub(super) staged: Option<(ReqId, Staged)>,
}

impl Core {
    /// The timers the policy set that have not fired, as `(at, token)`.
    pub(super) fn pending_timers(&self) -> Vec<(Time, u64)> {
        let mut t: Vec<_> = self.timers.iter().map(|r| r.0).collect();
        t.sort_unstable();
        t.into_iter().map(|(at, _, token)| (at, token)).collect()
    }

    /// A machine manager for `policy` (built with `migration` off), starting at `now` from
    /// what its database held.
    pub fn new(
        cfg: CoreConfig,
        policy: Box<dyn Policy>,
        now: Time,
        recovered: Recovered,
    ) -> Result<Core, String> {
        let mut cfg = cfg;
        if (cfg.nodes == 0 && cfg.names.is_empty()) || cfg.pes == 0 {
            return Err("--nodes and --pes must be at least 1".into());
        }
        let mut recovered = recovered;
        let table = NodeTable::new(
            cfg.nodes,
            cfg.pes,
            &cfg.names,
            std::mem::take(&mut recovered.nodes),
        )?;
        cfg.nodes = table.size;
        let shape = MachineShape::flat(cfg.nodes, cfg.pes);
        let mut policy = policy;
        // A policy that estimates from forecasts runs them on the simulator's engine, as in
        // a simulation.
        policy.set_forecaster(cosched_sim::forecast::shared());
        // Stopped processes cannot move: the ledger refuses a preempted job restarted elsewhere.
        let ledger = Ledger::new(policy.name(), shape, false);
        let mut core = Core {
            partitions: Default::default(),
            shape,
            policy,
            ledger,
            side: Vec::new(),
            live: BTreeSet::new(),
            placed: BTreeSet::new(),
            nodes: Vec::new(),
            next_job: 1,
            timers: BinaryHeap::new(),
            seq: 0,
            instant: Instant::default(),
            switch: Switch::default(),
            announced: Default::default(),
            switches: 0,
            effects: Vec::new(),
            policy_failed: None,
            dirty: BTreeSet::new(),
            runs_unwritten: BTreeSet::new(),
            runs_write_at: now,
            hb_seq: 0,
            next_hb: now,
            grace_until: None,
            outputs: HashMap::new(),
            next_fetch: 1,
            epoch: 0,
            pending: BTreeMap::new(),
            fences: BTreeMap::new(),
            node_clocks: Default::default(),
            names: Default::default(),
            deferred: BTreeSet::new(),
            completing: BTreeMap::new(),
            last_now: now,
            last_step: now,
            shutting_down: false,
            ended: Default::default(),
            next_forget: now,
            staged: None,
            cfg,
        };
        core.recover(now, table, recovered)?;
        Ok(core)
    }

    pub fn shape(&self) -> MachineShape {
        self.shape
    }
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
    pub fn policy_name(&self) -> &str {
        self.policy.name()
    }
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }
    /// Every job record, in id order.
    pub fn records(&self) -> impl Iterator<Item = &JobRecord> {
        self.ledger.records()
    }

    pub(super) fn log(&mut self, line: String) {
        self.effects.push(Effect::Log(line));
    }
    pub(super) fn push(&mut self, e: Effect) {
        self.effects.push(e);
    }
    pub(super) fn mark(&mut self, i: Ix) {
        self.dirty.insert(i);
    }
    fn clamp(&mut self, now: Time) -> Time {
        self.last_now = self.last_now.max(now);
        self.last_now
    }

    /// Takes in one input that arrived at `now`. Its events wait for [`Core::step`].
    ///
    /// A client's request that changes state (submit, cancel, suspend, resume, shutdown)
    /// returns the records it needs durable before it takes effect: the driver writes them
    /// and passes [`Input::Written`] at once, before anything else (see [`super::changes`]).
    pub fn on(&mut self, now: Time, input: Input) -> Option<Write> {
        self.catch_up(now);
        let now = self.clamp(now);
        match input {
            Input::Client {
                req,
                request,
                caller,
            } => return self.request(now, req, request, caller),
            Input::Written { req, result } => self.written(now, req, result),
            Input::Register { req, reg } => self.register(now, req, reg),
            Input::FromNode { from, msg } => match msg {
                // Reports of an earlier run of the job (a node that still held it when it was
                // requeued and launched again) are not this run's.
                FromNode::Exited { job, run, exit } if unit_step(job).is_some() => {
                    self.step_exit(now, job, run, from, exit)
                }
                FromNode::Exited { job, run, exit } => {
                    if self.run_of(job) == Some(run) {
                        self.pending.remove(&(job, from));
                        self.rank_exit(now, job, from, exit)
                    }
                }
                FromNode::Aborted { job, run, exit } if unit_step(job).is_some() => {
                    self.step_aborted(job, run, from, exit)
                }
                FromNode::Aborted { job, run, exit } => {
                    if self.run_of(job) == Some(run) {
                        self.rank_aborted(now, job, from, exit)
                    }
                }
                FromNode::Launched { job, run } => {
                    if self.run_of(job) == Some(run) {
                        self.pending.remove(&(job, from));
                    }
                }
                FromNode::Joined { incarnation, epoch } => {
                    self.joined(now, from, incarnation, epoch)
                }
                FromNode::Output {
                    req,
                    found,
                    stdout,
                    stderr,
                    files,
                    sizes,
                } => {
                    if let Some(Fetch { client, tail, .. }) = self.outputs.remove(&req) {
                        let resp = if found {
                            Response::Output(RankOutput {
                                stdout,
                                stderr,
                                files,
                                sizes,
                                tail,
                            })
                        } else {
                            Response::Error(format!(
                                "node {from} has no output files for that rank (never written, or removed with the job's directory after the retention period, `--keep-jobs`)"
                            ))
                        };
                        self.push(Effect::Reply { req: client, resp });
                    }
                }
                FromNode::Fence { job, seq, puts } => self.fence(from, job, seq, puts),
                FromNode::Warning {
                    job,
                    run,
                    rank,
                    warning,
                } => {
                    if self.run_of(job) == Some(run) {
                        self.rank_warning(job, from, rank, warning);
                    }
                }
                FromNode::Runs { sent_us, changes } => {
                    for c in changes {
                        if self.run_of(c.job) == Some(c.run) {
                            let at = self.node_clocks.place(
                                from,
                                now,
                                Time::from_micros(sent_us),
                                Time::from_micros(c.at_us),
                            );
                            self.node_runs(now, c.job, from, c.runs, at);
                        }
                    }
                }
                FromNode::Monitor { req, monitor } => {
                    if let Some(f) = self.outputs.remove(&req) {
                        self.push(Effect::Reply {
                            req: f.client,
                            resp: Response::Monitor(monitor),
                        });
                    }
                }
                FromNode::Names {
                    job,
                    run,
                    rank,
                    req,
                    op,
                } => self.names_asked(from, (job, run, rank), req, op),
                FromNode::ModexWant {
                    job,
                    run,
                    rank,
                    req,
                } => self.modex_want(from, (job, run), rank, req),
                FromNode::ModexHave {
                    job,
                    run,
                    to,
                    req,
                    data,
                } => self.modex_have((job, run), to, req, data),
            },
            Input::Heard(node) => self.heard(now, node),
        }
        None
    }

    /// [`Core::on`] for a driver that keeps no database (the comparison with the
    /// simulator, the fuzzer): a change is taken as written at once.
    pub fn on_unstored(&mut self, now: Time, input: Input) {
        if let Some(w) = self.on(now, input) {
            self.on(
                now,
                Input::Written {
                    req: w.req,
                    result: Ok(()),
                },
            );
        }
    }

    /// A node reports whether it lets `job`'s processes run (a node scheme other than `gs`
    /// decides that itself; under `gs` the switch's freeze and thaw take time). The job runs
    /// while some node runs it; the ledger accounts from these reports from the first one on,
    /// each at the instant the node says the change happened (`ago` before `now`).
    fn node_runs(&mut self, now: Time, job: JobId, from: NodeId, runs: bool, at: Time) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        let at = at.max(self.side[i].runs_at);
        self.side[i].runs_at = at;
        let on = &mut self.side[i].runs_on;
        if runs {
            on.insert(from);
        } else {
            on.remove(&from);
        }
        let any = !on.is_empty();
        let before = self.ledger.entry(i).processes_run();
        self.ledger.report_runs(i, at, any);
        if before != any {
            if self.runs_unwritten.is_empty() {
                self.runs_write_at = now + RUNS_WRITE_EVERY;
            }
            self.runs_unwritten.insert(i);
        }
    }

    /// The current run of `job` (see [`Launch::run`]).
    pub(super) fn run_of(&self, job: JobId) -> Option<u32> {
        self.ledger.find(job).map(|i| self.side[i].run)
    }

    /// Runs the instant `now` once everything that arrived has been taken in: timers, time
    /// limits, heartbeats and failure detection, then the policy's rounds. Returns what the
    /// shell must do.
    pub fn step(&mut self, now: Time) -> Vec<Effect> {
        self.catch_up(now);
        let now = self.clamp(now);
        self.account_stall(now);
        if !self.shutting_down {
            self.periodic(now);
            self.rounds(now);
        }
        self.flush_switch();
        self.announce(now);
        if now >= self.runs_write_at {
            self.dirty.append(&mut self.runs_unwritten);
        }
        for i in std::mem::take(&mut self.dirty) {
            self.runs_unwritten.remove(&i);
            if self.side[i].forgotten {
                // Its whole record is the database's; what memory holds would shorten it.
                continue;
            }
            let info = self.job_info(i, now);
            self.effects.push(Effect::PersistJob(Box::new(info)));
        }
        std::mem::take(&mut self.effects)
    }

    /// When [`Core::step`] must run next even if nothing arrives.
    pub fn next_wake(&self) -> Time {
        let mut w = self.next_hb;
        if !self.runs_unwritten.is_empty() {
            w = w.min(self.runs_write_at);
        }
        if let Some(Reverse((t, _, _))) = self.timers.peek() {
            let slept_through = if self.announced.cycles() {
                ROTATION_CATCH_UP
            } else {
                Dur::ZERO
            };
            w = w.min(*t + slept_through);
        }
        if let Some(g) = self.grace_until {
            w = w.min(g);
        }
        for &i in &self.placed {
            for at in [self.limit_at(i), self.warn_at(i)].into_iter().flatten() {
                w = w.min(at);
            }
        }
        if let Some(at) = self.next_begin(self.last_now) {
            w = w.min(at);
        }
        for f in self.outputs.values() {
            w = w.min(f.deadline);
        }
        for c in self.completing.values() {
            w = w.min(c.until);
        }
        for p in self.pending.values() {
            if let Some(sent) = p.sent {
                w = w.min(sent + self.cfg.suspect_after);
            }
        }
        for n in &self.nodes {
            if let Some(until) = n.fence_until {
                w = w.min(until);
            }
        }
        w
    }

    /// Measures how late this step comes: the time past the wake-up the core asked for (or
    /// past the previous step, if later) is time the machine manager did not run — its
    /// process was stopped, or starved of CPU. Nothing was heard from the nodes meanwhile
    /// through no fault of theirs, so every deadline that counts their silence is moved by
    /// that much (see [`Core::stalled`]). Lateness under half a heartbeat is the event loop's
    /// ordinary jitter, far inside any liveness timeout, and is not counted: summed over
    /// many quick steps it would hold every deadline still.
    fn account_stall(&mut self, now: Time) {
        let expected = self.next_wake().max(self.last_step);
        self.last_step = now;
        let late = now - expected;
        if late.as_micros() * 2 > self.cfg.heartbeat.as_micros() {
            self.stalled(now, late);
        }
    }

    /// The machine manager itself was stalled for `by` until `now`: the nodes' silence, the
    /// acknowledgements and answers awaited and the bounds of completing jobs are counted
    /// without it, so a stall of the manager is never taken for silent nodes.
    fn stalled(&mut self, now: Time, by: Dur) {
        if by >= self.cfg.heartbeat {
            self.log(format!(
                "mm: this machine manager did not run for {by} (its process was stopped or starved of CPU); the nodes' deadlines are moved by as much"
            ));
        }
        for n in &mut self.nodes {
            n.last_seen = (n.last_seen + by).min(now);
            if let Some(u) = &mut n.fence_until {
                *u += by;
            }
        }
        for p in self.pending.values_mut() {
            if let Some(sent) = &mut p.sent {
                *sent = (*sent + by).min(now);
            }
        }
        for c in self.completing.values_mut() {
            c.until += by;
        }
        for f in self.outputs.values_mut() {
            f.deadline += by;
        }
        if let Some(g) = &mut self.grace_until {
            *g += by;
        }
    }
}
