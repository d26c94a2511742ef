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
        /// The gang strobe it carries (see [`Core::strobe`]).
        strobe: Option<Strobe>,
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
    /// The nodes that report running some process of it (see [`FromNode::Runs`]).
    pub(super) runs_on: BTreeSet<NodeId>,
    /// Its steps (`srun` inside it; see [`super::steps`]), by step number.
    pub steps: Vec<StepInfo>,
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

    /// Rebuilds the state a database holds: jobs found running are announced to the policy
    /// first (the "hello"), then the queue; every node is down until it registers again.
    fn recover(&mut self, now: Time, table: NodeTable, r: Recovered) -> Result<(), String> {
        let recovered_any = !r.jobs.is_empty() || table.known > 0;
        // PEs are numbered node by node: with another count per node, a running job's PEs
        // would name other cores.
        let reshaped = table
            .changed
            .iter()
            .any(|c| (c.id.0 as usize) < table.known);
        let placed: Vec<JobId> = r
            .jobs
            .iter()
            .filter(|j| !j.state.is_final() && !j.placement.is_empty())
            .map(JobInfo::id)
            .collect();
        if reshaped && !placed.is_empty() {
            return Err(format!(
                "the nodes' PEs changed to {} while jobs {placed:?} hold PEs numbered for the old count; start with the old count (--pes, or `cores` in the configuration), end those jobs, then change it",
                self.cfg.pes
            ));
        }
        for row in table.changed {
            self.push(Effect::PersistNode(row));
        }
        for row in table.rows {
            let id = row.id;
            let mut e = NodeEntry::known(row, now);
            // A node new to the database has nothing to come back with.
            e.awaiting = (id.0 as usize) < table.known;
            e.removed = table.removed.contains(&id);
            e.admin = r.admin.get(&id).cloned();
            self.nodes.push(e);
        }
        if !table.removed.is_empty() {
            let names: Vec<&str> = table
                .removed
                .iter()
                .map(|n| self.nodes[n.0 as usize].row.name.as_str())
                .collect();
            self.log(format!(
                "mm: nodes {} are no longer configured: removed (their jobs' records stay)",
                cosched_slurm::hostlist::compress(&names)
            ));
        }
        for info in r.jobs {
            self.next_job = self.next_job.max(info.id().0 + 1);
            let side = Side {
                name: info.name.clone(),
                class: info.class.clone(),
                user: info.user,
                gid: info.gid,
                time_limit: info.time_limit_us.map(Dur::from_micros),
                cmd: info.cmd.clone(),
                cwd: info.cwd.clone(),
                io: info.io.clone(),
                sched: info.sched.clone(),
                mem: info.mem,
                spread: info.spread.clone(),
                placement: info.placement.clone(),
                ranks: super::steps::expected_ranks(&info.placement, info.io.batch),
                error: info.error.clone(),
                run_seq: 0,
                forget_pending: false,
                run: info.run,
                requeue_why: None,
                forgotten: false,
                record_bytes: 0,
                runs_on: BTreeSet::new(),
                steps: info.steps.clone(),
            };
            let req = request_of(&info.id(), info.record.submit, info.procs(), &side);
            let i = self.ledger.add(req.clone()).map_err(|e| e.to_string())?;
            self.side.push(side);
            let record = info.record.clone();
            if info.state.is_final() {
                let end = record.end.unwrap_or(record.submit);
                self.ledger.adopt_ended(i, record);
                self.ended.push_back((end, i));
                continue;
            }
            self.live.insert(i);
            if info.placement.is_empty() && self.side[i].has_conditions() {
                // Given to the policy again once its conditions hold (met already, for one
                // released before the restart: then at the first step).
                self.deferred.insert(i);
                if info.held {
                    self.ledger.hold(i, now);
                }
            } else if info.placement.is_empty() {
                self.ledger.submit(i, now);
                if info.held {
                    self.ledger.hold(i, now);
                }
                self.instant.submitted.push(Event::Submitted(req));
                if info.held {
                    self.instant.rest.push(Event::Held(info.id()));
                }
            } else {
                self.placed.insert(i);
                let pes = record.pes.clone();
                // A held job is one the policy runs and a user stopped: adopted running,
                // then held again (its processes are stopped already).
                let running = info.state == JobState::Running || info.held;
                let since = record.start.unwrap_or(record.submit);
                self.ledger.adopt(
                    i,
                    pes.clone(),
                    running,
                    now,
                    Dur::from_micros(info.run_us),
                    record,
                );
                self.instant.hello.push(Event::Running {
                    job: req,
                    pes,
                    since,
                });
                if info.held {
                    self.ledger.hold(i, now);
                    self.instant.rest.push(Event::Held(info.id()));
                }
            }
        }
        // Forgotten in the order of their ends (the first step forgets those long ended).
        self.ended.make_contiguous().sort_by_key(|&(t, i)| (t, i));
        if recovered_any {
            // A node notices the restart within `suspect_after` at worst (its own silence
            // timer), then has `down_after` like any silent node.
            self.grace_until = Some(now + self.cfg.suspect_after + self.cfg.down_after);
            self.log(format!(
                "mm: recovered {} jobs and {} nodes from the database",
                self.side.len(),
                self.nodes.len()
            ));
        }
        // Every node is down until it registers (again).
        for n in 0..self.cfg.nodes {
            self.ledger.node_down(NodeId(n));
            self.instant.rest.push(Event::NodeDown(NodeId(n)));
        }
        // The policy hears all this at the first step.
        Ok(())
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
                FromNode::Runs { job, run, runs } => {
                    if self.run_of(job) == Some(run) {
                        self.node_runs(now, job, from, runs);
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
    /// while some node runs it; the ledger accounts from these reports from the first one on.
    fn node_runs(&mut self, now: Time, job: JobId, from: NodeId, runs: bool) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        let on = &mut self.side[i].runs_on;
        if runs {
            on.insert(from);
        } else {
            on.remove(&from);
        }
        let any = !on.is_empty();
        let before = self.ledger.entry(i).processes_run();
        self.ledger.report_runs(i, now, any);
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
        let now = self.clamp(now);
        self.account_stall(now);
        if !self.shutting_down {
            self.periodic(now);
            self.rounds(now);
        }
        self.flush_switch();
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
            w = w.min(*t);
        }
        if let Some(g) = self.grace_until {
            w = w.min(g);
        }
        for &i in &self.placed {
            if let Some(at) = self.limit_at(i) {
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

    /// Job `i`'s time limit, if it has one that counts now.
    fn limit(&self, i: Ix) -> Option<Dur> {
        if self.side[i].requeue_why.is_some() {
            return None; // being killed for a requeue: its limit starts over with the next run
        }
        self.side[i].time_limit
    }

    fn limit_at(&self, i: Ix) -> Option<Time> {
        self.ledger.limit_reached_at(i, self.limit(i)?)
    }

    /// How job `i` ends at `now` if it has reached its time limit.
    fn limit_outcome(&self, i: Ix, now: Time) -> Option<Outcome> {
        self.ledger.past_limit(i, self.limit(i)?, now)
    }

    /// Heartbeats, failure detection, the restart grace period, unacknowledged launches and
    /// output fetch deadlines.
    fn periodic(&mut self, now: Time) {
        if now >= self.next_hb {
            self.heartbeat(now);
        }
        self.resend_launches(now);
        self.release_completing(now);
        if now >= self.next_forget {
            self.forget_ended(now);
        }
        if self.grace_until.is_some_and(|g| now >= g) {
            self.grace_until = None;
            self.grace_over(now);
        }
        self.fences_expired(now);
        let mut expired: Vec<u64> = self
            .outputs
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        expired.sort_unstable();
        for k in expired {
            if let Some(f) = self.outputs.remove(&k) {
                let why = self.unanswered(now, f.node);
                self.push(Effect::Reply {
                    req: f.client,
                    resp: Response::Error(why),
                });
            }
        }
    }

    /// Forgets the jobs that ended more than `keep_jobs` ago: memory
    /// then holds per old job only the ledger's record, its name, class and owner, not its
    /// command line and environment (which a submission from the command line carries
    /// whole). Looked at every quarter of the retention, between 0.2 s and a minute.
    fn forget_ended(&mut self, now: Time) {
        let keep = self.cfg.keep_jobs;
        self.next_forget = now
            + Dur::from_micros(keep.as_micros() / 4)
                .clamp(Dur::from_millis(200), Dur::from_secs(60));
        let mut forgotten = 0;
        while let Some(&(end, i)) = self.ended.front()
            && end + keep <= now
        {
            self.ended.pop_front();
            if self.side[i].forget_pending {
                // Processes of it may still run: kept until they are gone.
                self.ended.push_back((now, i));
                continue;
            }
            if self.runs_unwritten.remove(&i) {
                self.dirty.insert(i);
            }
            if self.dirty.contains(&i) {
                // Its last record is not written yet: written first, forgotten next time.
                self.ended.push_front((end, i));
                break;
            }
            let mut info = self.job_info(i, now);
            info.io.env = None;
            let bytes = postcard::experimental::serialized_size(&info).unwrap_or(0);
            let s = &mut self.side[i];
            s.record_bytes = bytes;
            s.forgotten = true;
            s.cmd = Vec::new();
            s.cwd = String::new();
            s.io = JobIo::default();
            s.sched = Schedule::default();
            s.placement = Vec::new();
            s.ranks = BTreeMap::new();
            s.error = None;
            forgotten += 1;
        }
        if forgotten > 0 {
            self.log(format!(
                "mm: forgot {forgotten} jobs ended more than {keep} ago (their records stay in the database; --keep-jobs)"
            ));
        }
    }

    /// Launches a node in the tree has not acknowledged within `suspect_after` are sent
    /// again; after [`LAUNCH_TRIES`] the job fails (or is requeued) with the reason, never
    /// left waiting for processes that do not exist. A node that is not responding is not
    /// counted against: its launch waits in its link like everything else sent to it, and
    /// the node either answers or is declared down.
    fn resend_launches(&mut self, now: Time) {
        let due: Vec<((JobId, NodeId), u32)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.sent.is_some_and(|t| now >= t + self.cfg.suspect_after))
            .map(|(k, p)| (*k, p.tries))
            .collect();
        for ((job, node), tries) in due {
            if !self.answering(node) {
                // Counted again from now: the node has not been heard since it was sent.
                if let Some(p) = self.pending.get_mut(&(job, node)) {
                    p.sent = Some(now);
                }
                continue;
            }
            if tries < LAUNCH_TRIES {
                self.log(format!(
                    "mm: node {node} did not acknowledge the launch of job {job}; sending it again"
                ));
                self.send_launch(now, job, node);
            } else if let Some(i) = self.ledger.find(job) {
                self.pending.remove(&(job, node));
                let why =
                    format!("its launch on node {node} was not acknowledged after {tries} tries");
                self.lost(now, i, Outcome::Failed, why);
            }
        }
    }

    /// Sends (again) the launch of `job` to `node`, which must be in the tree.
    pub(super) fn send_launch(&mut self, now: Time, job: JobId, node: NodeId) {
        let Some(i) = self.ledger.find(job) else {
            self.pending.remove(&(job, node));
            return;
        };
        let stopped = !self.ledger.entry(i).is_running();
        let launch = self.launch_msg(i, stopped);
        if let Some(p) = self.pending.get_mut(&(job, node)) {
            p.sent = Some(now);
            p.tries += 1;
        }
        self.push(Effect::Send {
            to: vec![node],
            msg: ToNode::Launch(launch),
        });
    }

    /// Sends `msg` down the tree to those of `to` that are in it. A node out of the tree
    /// gets nothing: its launches wait in `pending`, its `Forget`s are kept for it, and
    /// signals are replaced by the resynchronisation it gets on joining.
    pub(super) fn send(&mut self, to: Vec<NodeId>, msg: ToNode) {
        let (in_tree, out): (Vec<NodeId>, Vec<NodeId>) = to
            .into_iter()
            .partition(|n| self.nodes.get(n.0 as usize).is_some_and(|e| e.in_tree));
        if let ToNode::Forget { jobs } = &msg {
            for n in out {
                if let Some(e) = self.nodes.get_mut(n.0 as usize)
                    && e.up
                {
                    e.deferred_forget.extend(jobs.iter().copied());
                }
            }
        }
        if !in_tree.is_empty() {
            self.push(Effect::Send { to: in_tree, msg });
        }
    }

    /// Jobs that reached their time limit end now.
    fn time_limits(&mut self, now: Time) {
        let over: Vec<(Ix, Outcome)> = self
            .placed
            .iter()
            .copied()
            .filter_map(|i| Some((i, self.limit_outcome(i, now)?)))
            .collect();
        for (i, outcome) in over {
            let limit = self.side[i].time_limit.unwrap_or(Dur::ZERO);
            self.finish(
                now,
                i,
                outcome,
                None,
                Some(format!("ran for its time limit of {limit}")),
            );
            let seq = self.side[i].run_seq;
            self.ended(now, i, EndGroup::Ends(seq));
        }
    }

    /// The policy's rounds of the instant `now`: observe every event, decide once, apply;
    /// again while the decisions caused further events.
    fn rounds(&mut self, now: Time) {
        let mut out = Vec::new();
        loop {
            self.time_limits(now);
            self.release_deferred(now);
            while let Some(Reverse((at, _, token))) = self.timers.peek().copied()
                && at <= now
            {
                self.timers.pop();
                self.instant.timers.push(Event::Timer(token));
            }
            if self.instant.is_empty() {
                return;
            }
            for ev in self.instant.take() {
                self.policy.observe(now, ev);
            }
            self.policy.decide(now, &mut out);
            for d in out.drain(..) {
                self.apply(now, d);
            }
            self.check_policy(now);
        }
    }

    /// A policy that failed decides nothing more: its waiting jobs would wait forever. The
    /// failure is logged once, and each waiting job ends as failed with it as its error, so
    /// `cosched wait` returns and `acct` says why. Running jobs run on to their end.
    fn check_policy(&mut self, now: Time) {
        let why = match &self.policy_failed {
            Some(why) => why.clone(),
            None => {
                let Some(why) = self.policy.failure() else {
                    return;
                };
                self.log(format!(
                    "mm: the policy {} failed and decides nothing more: {why}; its waiting jobs end as failed",
                    self.policy.name()
                ));
                self.policy_failed = Some(why.clone());
                why
            }
        };
        let waiting: Vec<Ix> = self
            .live
            .iter()
            .copied()
            .filter(|&i| self.side[i].placement.is_empty() && self.ledger.entry(i).pes().is_empty())
            .collect();
        for i in waiting {
            self.finish(
                now,
                i,
                Outcome::Failed,
                None,
                Some(format!("the policy failed: {why}")),
            );
            self.ended(now, i, EndGroup::Caused);
        }
    }
}

/// The job lifecycle as the machine manager carries it out.
impl Core {
    /// Applies one decision: the ledger says what it means, the core does its side.
    fn apply(&mut self, now: Time, d: Decision) {
        if let Decision::SetTimer { at, token } = d {
            // Timers are the driver's, not the lifecycle's.
            self.seq += 1;
            self.timers.push(Reverse((at.max(now), self.seq, token)));
            return;
        }
        let why = match &d {
            Decision::Kill { .. } => Some("killed by the policy".to_string()),
            Decision::Reject { why, .. } => Some(format!("it can never run here: {why}")),
            _ => None,
        };
        match self.ledger.apply(now, d) {
            Ok(change) => self.carry_out(now, change, why),
            // A broken promise is refused and logged, with what the policy can say about the
            // decision (an external policy quotes its reply line); the machine keeps running.
            Err(e) => {
                let job = match e.refusal() {
                    Refusal::Violation { job, .. } => Some(*job),
                    Refusal::DuplicateJob { .. } => None,
                };
                let explain = job.and_then(|j| self.policy.explain(j));
                self.log(format!(
                    "mm: decision refused: {e}{}",
                    explain.map(|x| format!("; {x}")).unwrap_or_default()
                ));
                // The policy believes its decision took effect, so it would never decide about
                // that job again: a job still waiting would wait forever. It ends as failed,
                // with the refusal as its error, and the policy hears of the end.
                if let Some(i) = job.and_then(|j| self.ledger.find(j))
                    && self.live.contains(&i)
                    && self.side[i].placement.is_empty()
                    && self.ledger.entry(i).pes().is_empty()
                {
                    self.finish(
                        now,
                        i,
                        Outcome::Failed,
                        None,
                        Some(format!("the policy broke its contract: {e}")),
                    );
                    self.ended(now, i, EndGroup::Caused);
                }
            }
        }
    }

    /// The machine manager's side of a ledger change.
    pub(super) fn carry_out(&mut self, now: Time, change: Change, why: Option<String>) {
        match change {
            Change::None => {}
            Change::Runs { job, launch: true } => {
                self.ran(job);
                self.launch(now, job, false);
            }
            Change::Runs { job, launch: false } => {
                self.ran(job);
                self.signal(job, |s| &mut s.cont);
            }
            Change::Placed { job } => self.launch(now, job, true),
            Change::Stops { job } => self.signal(job, |s| &mut s.stop),
            Change::Ends { job } => {
                // A kill or a rejection: ended by the ledger at the decision's time; the
                // processes go and their later exits are ignored.
                self.after_end(job, why);
                self.ended(now, job, EndGroup::Caused);
            }
        }
    }

    fn ran(&mut self, i: Ix) {
        self.seq += 1;
        self.side[i].run_seq = self.seq;
    }

    /// Takes job `id` out of this step's switch message (its stops, continues and kills).
    fn unsignal(&mut self, id: JobId) {
        for list in [
            &mut self.switch.stop,
            &mut self.switch.cont,
            &mut self.switch.kill,
        ] {
            list.retain(|j| *j != id);
        }
    }

    /// Adds a job's nodes to this step's switch message, in the list `which` picks.
    fn signal(&mut self, i: Ix, which: fn(&mut Switch) -> &mut Vec<JobId>) {
        let id = self.ledger.entry(i).req.id;
        which(&mut self.switch).push(id);
        let nodes = self.side[i].placement.iter().map(|p| p.node);
        self.switch.nodes.extend(nodes);
    }

    /// Creates a job's processes on the PEs the ledger gave it (stopped for a Place).
    fn launch(&mut self, now: Time, i: Ix, stopped: bool) {
        let per = self.shape.pes_per_node();
        let pes = self.ledger.entry(i).pes().clone();
        self.placed.insert(i);
        let s = &mut self.side[i];
        s.placement.clear();
        s.ranks.clear();
        s.run += 1;
        for (rank, pe) in pes.iter().enumerate() {
            let node = NodeId(pe.0 / per);
            if s.placement.last().map(|p| p.node) != Some(node) {
                s.placement.push(Placement {
                    node,
                    ranks: Vec::new(),
                });
            }
            let p = s.placement.last_mut().expect("pushed");
            p.ranks.push((rank as u32, pe.0 % per));
        }
        s.ranks = super::steps::expected_ranks(&s.placement, s.io.batch);
        let launch = self.launch_msg(i, stopped);
        let id = launch.job;
        let nodes: Vec<NodeId> = self.side[i].placement.iter().map(|p| p.node).collect();
        // Sent now to the nodes in the tree, on joining to the others; resent until each
        // acknowledges it.
        let mut to = Vec::new();
        for &n in &nodes {
            let in_tree = self.nodes.get(n.0 as usize).is_some_and(|e| e.in_tree);
            let sent = in_tree.then_some(now);
            self.pending.insert(
                (id, n),
                Pending {
                    sent,
                    tries: sent.map_or(0, |_| 1),
                },
            );
            if in_tree {
                to.push(n);
            }
        }
        if !to.is_empty() {
            self.push(Effect::Send {
                to,
                msg: ToNode::Launch(launch),
            });
        }
        self.mark(i);
    }

    pub(super) fn launch_msg(&self, i: Ix, stopped: bool) -> Launch {
        let s = &self.side[i];
        let e = self.ledger.entry(i);
        Launch {
            job: e.req.id,
            size: e.req.procs,
            cmd: s.cmd.clone(),
            cwd: s.cwd.clone(),
            env: {
                let (nodes, tasks) = cosched_proto::jobio::nodelist_and_tasks(&s.placement, |p| {
                    self.nodes
                        .get(p.node.0 as usize)
                        .map_or_else(|| p.node.to_string(), |n| n.row.name.clone())
                });
                let mut env = vec![
                    ("COSCHED_JOB_NAME".into(), s.name.clone()),
                    ("COSCHED_JOB_NODELIST".into(), nodes.clone()),
                    ("COSCHED_TASKS_PER_NODE".into(), tasks.clone()),
                ];
                env.extend(super::deferral::slurm_env(
                    e.req.id,
                    &s.name,
                    e.req.procs,
                    &nodes,
                    &tasks,
                    s.io.array.as_ref(),
                ));
                env
            },
            io: s.io.clone(),
            stopped,
            uid: s.user,
            gid: s.gid,
            placement: s.placement.clone(),
            run: s.run,
            mem: s.mem,
            within: None,
        }
    }

    /// Node `from` entered fence `seq` of `job` with these puts. Once every node of the
    /// job's placement has, the union of their puts goes down to all of them (gather up,
    /// broadcast down). Fences of jobs that ended, or older than the one gathered, are
    /// ignored.
    fn fence(&mut self, from: NodeId, job: JobId, seq: u64, puts: Vec<(String, String)>) {
        let Some(nodes) = self.fence_nodes(job) else {
            return;
        };
        if !nodes.contains(&from) {
            return;
        }
        let f = self.fences.entry(job).or_default();
        if seq < f.seq {
            return;
        }
        if seq > f.seq {
            *f = Fence {
                seq,
                ..Fence::default()
            };
        }
        if f.complete {
            let kvs = f.kvs.clone().into_iter().collect();
            self.send(vec![from], ToNode::FenceDone { job, seq, kvs });
            return;
        }
        f.nodes.insert(from);
        f.kvs.extend(puts);
        if f.nodes == nodes {
            f.complete = true;
            let kvs = f.kvs.clone().into_iter().collect();
            self.send(
                nodes.into_iter().collect(),
                ToNode::FenceDone { job, seq, kvs },
            );
        }
    }

    /// The nodes of a live job's or running step's PMI world.
    fn fence_nodes(&self, job: JobId) -> Option<BTreeSet<NodeId>> {
        let (id, step) = match unit_step(job) {
            Some((id, k)) => (id, Some(k)),
            None => (job, None),
        };
        let i = self.ledger.find(id)?;
        if !self.ledger.entry(i).is_live() {
            return None;
        }
        let placement = match step {
            None => &self.side[i].placement,
            Some(k) => {
                let st = self.side[i].steps.iter().find(|s| s.id == k)?;
                if st.state.is_final() {
                    return None;
                }
                &st.placement
            }
        };
        Some(placement.iter().map(|p| p.node).collect())
    }

    /// Ends a live job at `now` (its processes ended, failed, timed out, were cancelled or
    /// lost). The caller delivers [`Event::Ended`] in the right group of the instant.
    pub(super) fn finish(
        &mut self,
        now: Time,
        i: Ix,
        outcome: Outcome,
        exit_code: Option<i32>,
        why: Option<String>,
    ) {
        self.ledger.end(i, now, outcome, exit_code);
        self.after_end(i, why);
    }

    /// The side of an end: the record is written, and processes that may still run are
    /// killed (forgotten on their nodes once every rank reported).
    fn after_end(&mut self, i: Ix, why: Option<String>) {
        if self.side[i].requeue_why.take().is_some() {
            // Ended (cancelled, say) while its requeue waited: it ends instead.
            self.completing.remove(&i);
        }
        self.live.remove(&i);
        self.placed.remove(&i);
        self.end_steps(i);
        // The environment is for launches only, and an ended job has none left: the memory
        // of a long history is not spent on it.
        self.side[i].io.env = None;
        self.ended.push_back((self.last_now, i));
        let id = self.ledger.entry(i).req.id;
        self.pending.retain(|(j, _), _| *j != id);
        self.fences.remove(&id);
        self.mark(i);
        if why.is_some() {
            self.side[i].error = why;
        }
        let s = &self.side[i];
        if s.placement.is_empty() {
            return;
        }
        if s.ranks.values().all(|c| c.is_some()) {
            self.forget(i);
        } else {
            self.signal(i, |s| &mut s.kill);
            self.side[i].forget_pending = true;
        }
    }

    fn forget(&mut self, i: Ix) {
        let to: Vec<NodeId> = self.side[i].placement.iter().map(|p| p.node).collect();
        self.side[i].forget_pending = false;
        let id = self.ledger.entry(i).req.id;
        self.send(to, ToNode::Forget { jobs: vec![id] });
    }

    /// What a rank's node has to say of it although it did not fail: the job's record says it
    /// (the first such, naming the rank and its node), unless the job ends with a failure,
    /// whose reason it then gives.
    fn rank_warning(&mut self, job: JobId, node: NodeId, rank: u32, warning: String) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        if !self.ledger.entry(i).is_live() || self.side[i].error.is_some() {
            return;
        }
        let on = self
            .nodes
            .get(node.0 as usize)
            .map_or_else(|| node.to_string(), |e| e.row.name.clone());
        self.side[i].error = Some(format!("warning: rank {rank} on node {on}: {warning}"));
    }

    /// A rank of a job exited (or could not be launched).
    pub(super) fn rank_exit(&mut self, now: Time, job: JobId, node: NodeId, exit: RankExit) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        let s = &mut self.side[i];
        if s.ranks.get(&exit.rank).is_none_or(|c| c.is_some()) {
            return;
        }
        let code = exit.code.unwrap_or(-1);
        s.ranks.insert(exit.rank, Some(code));
        let done = s.ranks.values().all(|c| c.is_some());
        if s.requeue_why.is_some() {
            // Being killed for a requeue: its exits only tell that the processes are gone.
            if done {
                self.release(i);
            }
            return;
        }
        if !self.ledger.entry(i).is_live() {
            // Killed already: its exits only tell that the processes are gone.
            if done && self.side[i].forget_pending {
                self.forget(i);
                self.release(i);
            }
            return;
        }
        // The failure names the rank and where it ran, so a user knows whose output to read.
        let on = self
            .nodes
            .get(node.0 as usize)
            .map_or_else(|| node.to_string(), |e| e.row.name.clone());
        let end = if exit.oom {
            let mem = self.side[i].mem.map(|m| format!(" ({})", m.option()));
            Some((
                Outcome::OutOfMemory,
                Some(code),
                Some(format!(
                    "rank {} on node {on} was killed out of memory: the job went over its memory limit{}",
                    exit.rank,
                    mem.unwrap_or_default()
                )),
            ))
        } else if let Some(err) = exit.error {
            Some((
                Outcome::Failed,
                Some(code),
                Some(format!("rank {} on node {on}: {err}", exit.rank)),
            ))
        } else if code != 0 {
            let why = if done {
                format!("rank {} on node {on} exited with code {code}", exit.rank)
            } else {
                format!(
                    "rank {} on node {on} exited with code {code}; the other ranks were killed",
                    exit.rank
                )
            };
            Some((Outcome::Failed, Some(code), Some(why)))
        } else if done {
            Some((Outcome::Completed, Some(0), None))
        } else {
            None
        };
        if let Some((outcome, code, why)) = end {
            self.finish(now, i, outcome, code, why);
            let seq = self.side[i].run_seq;
            self.ended(now, i, EndGroup::Ends(seq));
        }
    }

    /// A job lost with its node: it fails, or starts over when the machine requeues.
    pub(super) fn lost(&mut self, now: Time, i: Ix, outcome: Outcome, why: String) {
        let id = self.ledger.entry(i).req.id;
        if !self.cfg.requeue {
            self.finish(now, i, outcome, None, Some(why));
            self.ended(now, i, EndGroup::Rest);
            return;
        }
        if self.side[i].requeue_why.is_some() {
            // Lost again (another of its nodes) while its requeue waits: it waits for that
            // node too (see [`super::nodes`], fencing).
            return;
        }
        self.log(format!("mm: requeueing job {id}: {why}"));
        self.pending.retain(|(j, _), _| *j != id);
        self.fences.remove(&id);
        // Stops and continues of the job in this step go: it is being killed.
        self.unsignal(id);
        if self.cfg.hold_pes_while_completing && !self.side[i].placement.is_empty() {
            // Its ranks on the nodes still up are killed first; it goes back to the queue
            // (and may start again, on these PEs too) once every rank is known gone — its
            // exit reported, or its node back without it (a node declared down is fenced:
            // see [`super::nodes`]) — so that no two runs of a job overlap.
            if !self.side[i].ranks.values().all(|c| c.is_some()) {
                self.signal(i, |s| &mut s.kill);
                self.side[i].requeue_why = Some(why);
                let until = self.completing_bound(now);
                let group = EndGroup::Requeue;
                self.completing.insert(i, Completing { group, until });
                return;
            }
        }
        self.requeue_now(i, why);
    }

    /// Puts a lost job back in the queue now: what is left of its run is forgotten on its
    /// nodes (which kills it), and the policy hears of its end and its submission again.
    fn requeue_now(&mut self, i: Ix, why: String) {
        let now = self.last_now;
        let id = self.ledger.entry(i).req.id;
        self.side[i].requeue_why = None;
        // Its ranks are gone (or given up on): a kill of it still in this step's switch,
        // which goes to the nodes of every signal of the step, would reach its next run if
        // the policy starts it again in this step. The forget below kills what is left.
        self.unsignal(id);
        if !self.side[i].placement.is_empty() {
            self.forget(i);
        }
        self.end_steps(i);
        self.ledger.requeue(i, now);
        self.placed.remove(&i);
        let s = &mut self.side[i];
        s.placement.clear();
        s.ranks.clear();
        s.runs_on.clear();
        s.error = Some(format!("requeued: {why}"));
        self.mark(i);
        let req = self.ledger.entry(i).req.clone();
        self.instant.rest.push(Event::Ended(id));
        self.instant.rest.push(Event::Submitted(req));
    }

    /// The jobs a submission by `caller` (or by the user an administrator names) adds, each
    /// with what the policy will be told, checked but not yet added: an array gives one job
    /// per index, their ids consecutive from the next one, the first being the array's id.
    /// [`Core::add_jobs`] adds them once they are durable (see [`super::changes`]).
    pub(super) fn new_jobs(
        &self,
        now: Time,
        mut s: SubmitRequest,
        caller: Caller,
    ) -> Result<Vec<(JobRequest, Side)>, String> {
        let owner = match s.user {
            Some(u) if u != caller.uid && !caller.admin => {
                return Err(format!(
                    "permission denied: {} (uid {}) cannot submit a job as uid {u}",
                    cosched_proto::util::user_name(caller.uid),
                    caller.uid
                ));
            }
            Some(u) if u != caller.uid => (u, cosched_proto::util::account(u).map_or(u, |a| a.gid)),
            _ => (caller.uid, caller.gid),
        };
        s.sched.after = self.check_dependencies(&s.sched.after)?;
        if let Some(b) = s.sched.begin_us
            && b <= now.as_micros()
        {
            s.sched.begin_us = None;
        }
        let first = JobId(self.next_job);
        let Some(array) = s.sched.array.take() else {
            return Ok(vec![self.new_job(now, first, s, owner)?]);
        };
        if array.indices.is_empty()
            || array.indices.len() > cosched_proto::start_conditions::MAX_ARRAY_TASKS
        {
            return Err(format!(
                "an array has 1 to {} tasks",
                cosched_proto::start_conditions::MAX_ARRAY_TASKS
            ));
        }
        let mut jobs = Vec::with_capacity(array.indices.len());
        for (k, &index) in array.indices.iter().enumerate() {
            let mut task = s.clone();
            task.io.array = Some(cosched_proto::start_conditions::ArrayTask {
                job: first,
                index,
                throttle: array.throttle,
            });
            jobs.push(self.new_job(now, JobId(first.0 + k as u64), task, owner)?);
        }
        Ok(jobs)
    }

    /// Job `id` of a submission, owned by `(uid, gid)`, checked.
    fn new_job(
        &self,
        now: Time,
        id: JobId,
        s: SubmitRequest,
        (uid, gid): (u32, u32),
    ) -> Result<(JobRequest, Side), String> {
        let total = self.shape.total_pes();
        if s.procs == 0 {
            return Err("a job needs at least 1 PE (-n)".into());
        }
        if s.procs > total {
            return Err(format!(
                "job asks for {} PEs but the machine has only {total} ({} nodes × {} PEs); ask for at most -n {total}",
                s.procs, self.cfg.nodes, self.cfg.pes
            ));
        }
        if s.cmd.is_empty() {
            return Err("no command given: put it after `--`".into());
        }
        if let Some(l) = s.time_limit_us {
            check_time_limit(Dur::from_micros(l))?;
        }
        if let Some(m) = s.mem {
            self.check_memory(m, s.procs)?;
        }
        let spread = match &s.layout {
            Some(l) => Some(Box::new(self.spread_of(l, s.procs)?)),
            None => None,
        };
        let side = Side {
            name: s.name.unwrap_or_else(|| {
                std::path::Path::new(&s.cmd[0])
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            class: s.class,
            user: Some(uid),
            gid: Some(gid),
            time_limit: s.time_limit_us.map(Dur::from_micros),
            cmd: s.cmd,
            cwd: s.cwd,
            io: s.io,
            sched: s.sched,
            mem: s.mem,
            spread,
            placement: Vec::new(),
            ranks: BTreeMap::new(),
            error: None,
            run_seq: 0,
            forget_pending: false,
            run: 0,
            requeue_why: None,
            forgotten: false,
            record_bytes: 0,
            runs_on: BTreeSet::new(),
            steps: Vec::new(),
        };
        Ok((request_of(&id, now, s.procs, &side), side))
    }

    /// The policies' spread for a submission's layout: nodes by number, checked against the
    /// machine and the policy. Refused, saying why, when it names a node the machine does not
    /// have, can never be met, or the policy places by its own geometry.
    fn spread_of(&self, l: &NodeLayout, procs: u32) -> Result<Spread, String> {
        let ids = |opt: &str, names: &[String]| -> Result<Vec<NodeId>, String> {
            let mut ids = names
                .iter()
                .map(|name| self.node_named(name).map_err(|e| format!("--{opt}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            ids.sort_unstable();
            ids.dedup();
            Ok(ids)
        };
        let spread = Spread {
            nodes: l.nodes,
            tasks_per_node: l.tasks_per_node,
            required: ids("nodelist", &l.nodelist)?,
            excluded: ids("exclude", &l.exclude)?,
        };
        if let Some(why) = spread.never(procs, &self.shape) {
            return Err(format!(
                "the job's spread over nodes can never be met: {why} (this machine: {} nodes × {} PEs)",
                self.shape.nodes,
                self.shape.pes_per_node()
            ));
        }
        if !self.policy.places_by_node() {
            return Err(format!(
                "policy {} places jobs by its own geometry, not by node: -N, --ntasks-per-node, \
                 --nodelist and --exclude need fcfs, easy, conservative, prime or gang; submit \
                 with -n alone",
                self.policy.name()
            ));
        }
        Ok(spread)
    }

    /// A job asking more memory of a node than the smallest node has can never run: refused
    /// with the numbers. Nodes not registered yet are not counted (their memory is unknown).
    fn check_memory(&self, m: MemLimit, procs: u32) -> Result<(), String> {
        let need = m.most_on_a_node(procs, self.shape.pes_per_node());
        let Some(small) = self
            .nodes
            .iter()
            .filter(|n| !n.removed)
            .filter_map(|n| Some((n.memory?, &n.row.name)))
            .min()
        else {
            return Ok(());
        };
        if need <= small.0 {
            return Ok(());
        }
        let mib = |b: u64| b.div_ceil(1 << 20);
        let most = match m {
            MemLimit::PerNode(_) => format!("--mem={}M", small.0 >> 20),
            MemLimit::PerCpu(_) => format!(
                "--mem-per-cpu={}M",
                (small.0 / u64::from(procs.min(self.shape.pes_per_node()).max(1))) >> 20
            ),
        };
        Err(format!(
            "job asks for {} MiB of memory on a node ({}) but node {} has {} MiB; ask for at most {most}",
            mib(need),
            m.option(),
            small.1,
            small.0 >> 20
        ))
    }

    /// Adds the jobs of a submission ([`Core::new_jobs`]) to the queue, or holds them back
    /// while their conditions do not hold; returns the first id.
    pub(super) fn add_jobs(&mut self, jobs: Vec<(JobRequest, Side)>) -> Option<JobId> {
        let first = jobs.first().map(|(req, _)| req.id);
        for (req, side) in jobs {
            let i = match self.ledger.add(req.clone()) {
                Ok(i) => i,
                // Ids come from `next_job` alone: a duplicate is a bug, refused by the ledger.
                Err(e) => {
                    self.log(format!("mm: job {} not added: {e}", req.id));
                    continue;
                }
            };
            self.next_job = self.next_job.max(req.id.0 + 1);
            self.side.push(side);
            self.live.insert(i);
            self.mark(i);
            if self.side[i].has_conditions() {
                // Out of the policy's sight until its conditions hold (`release_deferred`).
                self.deferred.insert(i);
                continue;
            }
            self.ledger.submit(i, req.submit);
            self.instant.submitted.push(Event::Submitted(req));
        }
        first
    }

    /// A user's cancel: the job ends now, its processes are killed.
    pub(super) fn cancel(&mut self, now: Time, i: Ix, why: &str) {
        self.finish(now, i, Outcome::Cancelled, None, Some(why.to_string()));
        if self.deferred.remove(&i) {
            // The policy never saw it.
            return;
        }
        self.ended(now, i, EndGroup::Rest);
    }

    /// Tells the policy that job `i` ended, in `group` of the instant: now if none of its
    /// processes may still run, else once they are gone (see [`Completing`]).
    pub(super) fn ended(&mut self, now: Time, i: Ix, group: EndGroup) {
        if self.side[i].forget_pending && self.cfg.hold_pes_while_completing {
            // Ranks on a node that is down count as gone: its PEs are out of use until it
            // is back, and it comes back only once it has killed them (fencing).
            self.gone_on_down_nodes(i);
            if self.side[i].ranks.values().all(|c| c.is_some()) {
                self.forget(i);
                self.deliver_end(i, group);
                return;
            }
            let until = self.completing_bound(now);
            self.completing.insert(i, Completing { group, until });
        } else {
            self.deliver_end(i, group);
        }
    }

    /// A completing job's processes are gone (or can be given up on): the policy hears of
    /// its end now.
    pub(super) fn release(&mut self, i: Ix) {
        if let Some(c) = self.completing.remove(&i) {
            if matches!(c.group, EndGroup::Requeue) {
                let why = self.side[i].requeue_why.take().unwrap_or_default();
                self.requeue_now(i, why);
            } else {
                self.deliver_end(i, c.group);
            }
        }
    }

    /// The ranks of job `i` on nodes that are down count as exited.
    fn gone_on_down_nodes(&mut self, i: Ix) {
        let down: Vec<NodeId> = self.side[i]
            .placement
            .iter()
            .map(|p| p.node)
            .filter(|n| !self.nodes.get(n.0 as usize).is_some_and(|e| e.up))
            .collect();
        for n in down {
            self.mark_gone(i, n);
        }
    }

    fn deliver_end(&mut self, i: Ix, group: EndGroup) {
        let id = self.ledger.entry(i).req.id;
        match group {
            EndGroup::Caused => self.instant.caused.push(Event::Ended(id)),
            EndGroup::Ends(seq) => self.instant.ends.push((seq, id)),
            EndGroup::Rest | EndGroup::Requeue => self.instant.rest.push(Event::Ended(id)),
        }
    }

    /// How long a killed job's ranks on answering nodes get to report their exits: the kill
    /// wait (after which the nodes SIGKILL), the silence after which a node is not
    /// responding, and a second.
    fn completing_bound(&self, now: Time) -> Time {
        now + self.cfg.kill_wait + self.cfg.suspect_after + Dur::from_secs(1)
    }

    /// Whether a rank of job `i` that has not reported its exit is on a node that does not
    /// answer (not responding, or down and not yet known clean).
    fn waits_on_silent_node(&self, i: Ix) -> bool {
        let s = &self.side[i];
        s.placement.iter().any(|p| {
            !self.answering(p.node)
                && p.ranks
                    .iter()
                    .any(|(r, _)| s.ranks.get(r).is_some_and(|c| c.is_none()))
        })
    }

    /// Completing jobs past their bound are released (logged: a node did not report),
    /// except those with ranks on a node that does not answer: that node either answers
    /// (and reports, or the bound runs again) or is declared down, and its ranks count as
    /// gone only as fencing says.
    pub(super) fn release_completing(&mut self, now: Time) {
        let due: Vec<Ix> = self
            .completing
            .iter()
            .filter(|(_, c)| now >= c.until)
            .map(|(i, _)| *i)
            .collect();
        let (waiting, due): (Vec<Ix>, Vec<Ix>) =
            due.into_iter().partition(|&i| self.waits_on_silent_node(i));
        for i in waiting {
            let until = self.completing_bound(now);
            if let Some(c) = self.completing.get_mut(&i) {
                c.until = until;
            }
        }
        for i in due {
            let id = self.ledger.entry(i).req.id;
            self.log(format!(
                "mm: job {id}: not every rank reported its end within the kill wait; its PEs are released"
            ));
            self.release(i);
        }
    }

    /// The ranks of completing jobs on `node` are gone (a new node manager process
    /// registered there: the old one's ranks died with it; or the node came back without
    /// them): a job whose ranks are then all gone is forgotten and released. With
    /// `requeues` false (the node was just declared down), only ended jobs count them gone:
    /// the PEs of a node that is down are out of use anyway, but a job waiting to start
    /// again must not while its previous run may still be running there.
    pub(super) fn ranks_gone_on(&mut self, node: NodeId, requeues: bool) {
        let hit: Vec<Ix> = self
            .completing
            .iter()
            .filter(|(_, c)| requeues || !matches!(c.group, EndGroup::Requeue))
            .map(|(&i, _)| i)
            .filter(|&i| self.side[i].placement.iter().any(|p| p.node == node))
            .collect();
        for i in hit {
            self.mark_gone(i, node);
            if self.side[i].ranks.values().all(|c| c.is_some()) {
                self.forget(i);
                self.release(i);
            }
        }
    }

    /// Ranks of job `i` on `node` count as exited (code -1 when they had not reported).
    fn mark_gone(&mut self, i: Ix, node: NodeId) {
        let s = &mut self.side[i];
        for p in s.placement.iter().filter(|p| p.node == node) {
            for &(r, _) in &p.ranks {
                s.ranks.entry(r).and_modify(|c| {
                    c.get_or_insert(-1);
                });
            }
        }
    }

    /// A user's hold or release (`cosched suspend` / `resume`).
    pub(super) fn set_held(&mut self, now: Time, i: Ix, hold: bool) {
        let id = self.ledger.entry(i).req.id;
        let change = if hold {
            self.ledger.hold(i, now)
        } else {
            self.ledger.release(i, now)
        };
        self.carry_out(now, change, None);
        self.mark(i);
        if self.deferred.contains(&i) {
            // Not the policy's yet: it is given to it held, if still held then.
            return;
        }
        self.instant.rest.push(if hold {
            Event::Held(id)
        } else {
            Event::Released(id)
        });
    }

    /// Stops everything for good, without asking the policy (nothing new starts).
    pub(super) fn shutdown(&mut self, now: Time) {
        let live: Vec<Ix> = self.live.iter().copied().collect();
        for i in live {
            self.finish(now, i, Outcome::Cancelled, None, Some(SHUT_DOWN.into()));
        }
        self.flush_switch();
        self.push(Effect::Broadcast(ToNode::Shutdown));
        self.push(Effect::Exit);
        self.shutting_down = true;
    }

    fn flush_switch(&mut self) {
        let mut s = std::mem::take(&mut self.switch);
        if s.stop.is_empty() && s.cont.is_empty() && s.kill.is_empty() {
            return;
        }
        self.switches += 1;
        // Every node hears the new matrix state now, not at the next heartbeat: the node
        // schemes switch from it, so the jobs of the matrix need no stop or continue of their
        // own (one message per switch instead of two: at millisecond quanta the daemons'
        // CPU per message is a visible share of the cores).
        let strobe = self.strobe();
        if let Some(st) = &strobe {
            let in_matrix = |j: &JobId| st.rows.iter().any(|(r, _)| r == j);
            s.stop.retain(|j| !in_matrix(j));
            s.cont.retain(|j| !in_matrix(j));
        }
        if !(s.stop.is_empty() && s.cont.is_empty() && s.kill.is_empty()) {
            self.send(
                s.nodes.into_iter().collect(),
                ToNode::Switch {
                    stop: s.stop,
                    cont: s.cont,
                    kill: s.kill,
                },
            );
        }
        if let Some(strobe) = strobe {
            self.push(Effect::Broadcast(ToNode::Strobe(strobe)));
        }
    }

    /// The gang strobe (seed 000 §4.1): the active slot, each job's row and the jobs the
    /// policy runs now; `None` for a policy without a matrix.
    pub(super) fn strobe(&self) -> Option<Strobe> {
        let m = self.policy.matrix()?;
        let rows = m
            .slots
            .iter()
            .enumerate()
            .flat_map(|(r, s)| s.jobs.iter().map(move |(j, _)| (*j, r as u32)))
            .collect();
        let running = self
            .live
            .iter()
            .map(|&i| self.ledger.entry(i))
            .filter(|e| e.is_running())
            .map(|e| e.req.id)
            .collect();
        Some(Strobe {
            slot: m.active,
            rows,
            running,
        })
    }

    pub(super) fn add_node_events(&mut self, ev: Event) {
        self.instant.rest.push(ev);
    }
    pub(super) fn push_submitted(&mut self, ev: Event) {
        self.instant.submitted.push(ev);
    }
    pub(super) fn push_rest(&mut self, ev: Event) {
        self.instant.rest.push(ev);
    }
}

/// What the policy is told of a job.
fn request_of(id: &JobId, submit: Time, procs: u32, s: &Side) -> JobRequest {
    let mut r = JobRequest::new(*id, submit, procs, s.time_limit.unwrap_or(DEFAULT_ESTIMATE));
    r.class = s.class.clone();
    r.user = s.user;
    r.spread = s.spread.clone();
    r
}

/// Parses `0-3,8` back into a PE set.
pub fn parse_pes(text: &str) -> PeSet {
    let mut pes = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    pes.extend(a..=b);
                }
            }
            None => pes.extend(part.parse::<u32>().ok()),
        }
    }
    PeSet::from_pes(pes)
}
