//! The shell around the node manager's core: the clock, the tokio event loop, the tree, the
//! ranks' processes and PMI sockets, cgroups, the rings and the files. It hands each input to
//! the core with one clock reading and carries out the core's effects in order; an effect
//! that asks a question (register, prepare a launch, spawn a rank, sample, list the job
//! directories) is answered with its input at once, before anything else reaches the core.
//! A PMIx helper's start is the exception: its readiness comes from a task, as a later input,
//! and the loop serves the node's other jobs meanwhile.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use cosched_core::{Dur, JobId, NodeId, Time};
use cosched_storm::{Cmp, Cond, Delivery, Keyring, NodeHandle, Vars, spawn_node};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::NmConfig;
use super::core::{CgroupOp, CoreConfig, Effect, Input, Level, NmCore};
use super::freeze_watch::{FreezeWatcher, Frozen, Watch};
use super::launch::{PrepareLaunch, Prepared, RankSpec};
use super::monitor::Monitors;
use super::pmix::StartHelper;
use crate::bcast::Stager;
use crate::contain::{Containment, JobCgroup};
use crate::pmi::FromRank;
use cosched_proto::DaemonError;
use cosched_proto::dir::Dir;
use cosched_proto::proto::*;
use cosched_proto::rotation::Rotation;

mod ranks;

/// A rank's exit as its watcher reports it: job, launch, exit.
type RankEnd = (JobId, u64, RankExit);

/// How long a job's PMIx helper may take to start its server and register the job.
const HELPER_READY: Duration = Duration::from_secs(10);

/// The node manager's clock: microseconds of `CLOCK_MONOTONIC`, as the rings' records.
fn now() -> Time {
    Time::from_micros((cosched_monitor::now_ns() / 1_000) as i64)
}

/// The tree, once the node is registered.
struct Tree {
    handle: NodeHandle,
    deliveries: mpsc::UnboundedReceiver<Delivery>,
    node: NodeId,
    /// The heartbeat's XFER-AND-SIGNAL writes its sequence number into VAR_HEARTBEAT; the
    /// machine manager's liveness is a TEST-EVENT on that variable changing (a restarted
    /// machine manager may count from a lower number, hence "differs", not "grows").
    beat: i64,
}

/// What a launch holds from its preparation until its ranks have started
/// ([`Effect::SetupDone`]).
struct Preparing {
    /// The job's directory, made for it and given to its user.
    dir: Option<Dir>,
    /// Its cgroups' `cgroup.procs`, for the ranks to join.
    procs: Vec<OwnedFd>,
}

struct Shell {
    cfg: NmConfig,
    /// The cluster keys: the one frames are sealed with, and the old one during a rotation's
    /// grace period (shared with the tree transport).
    keys: Keyring,
    core: NmCore,
    addr: String,
    /// The tree listener, until the tree starts at the first registration.
    listener: Option<TcpListener>,
    priority: &'static str,
    tree: Option<Tree>,
    /// Writes broadcast files to the scratch directory (crate::bcast); set once the tree
    /// transport, whose variables it sets, is up.
    stager: Option<Stager>,
    /// `WORKDIR/jobs`, checked to be the node manager's own and held open: each job's
    /// directory is made and given to its user relative to it.
    jobs_dir: Dir,
    contain: Containment,
    /// The cgroup of each launch until it is killed.
    cgroups: HashMap<(JobId, u64), JobCgroup>,
    /// The launches prepared whose ranks have not all started: one set aside for its PMIx
    /// helper spawns them on a later input, into the cgroup prepared for it.
    preparing: HashMap<(JobId, u64), Preparing>,
    /// Lines to write to each rank's PMI socket.
    pmi: HashMap<(JobId, u32), mpsc::UnboundedSender<String>>,
    monitors: Monitors,
    exits_tx: mpsc::UnboundedSender<RankEnd>,
    exits: mpsc::UnboundedReceiver<RankEnd>,
    pmi_tx: mpsc::UnboundedSender<FromRank>,
    pmi_rx: mpsc::UnboundedReceiver<FromRank>,
    /// Lines to write to each job's PMIx helper (dropped: its socket closes and it ends).
    helpers: HashMap<JobId, mpsc::UnboundedSender<String>>,
    /// What the helpers say, and their exits.
    helper_tx: mpsc::UnboundedSender<Input>,
    helper_rx: mpsc::UnboundedReceiver<Input>,
    /// Helpers' messages for the tree that came while the node was registering: they wait
    /// for the tree, while a helper's readiness and exit are taken at once, so that a job's
    /// ranks start even while the machine manager is away.
    helper_held: VecDeque<Input>,
    /// Cgroups found empty while being killed.
    empty_tx: mpsc::UnboundedSender<(JobId, u64)>,
    empty: mpsc::UnboundedReceiver<(JobId, u64)>,
    /// Freezes being watched, and the watcher's reports.
    watcher: FreezeWatcher,
    frozen: mpsc::UnboundedReceiver<Frozen>,
    /// The last freeze or thaw of each cgroup (its generation): a report of an earlier freeze
    /// is stale.
    generations: HashMap<(JobId, u64), u64>,
    generation: u64,
    /// The last gang rotation handed to the core, as the machine manager sent it: a
    /// heartbeat carrying it again is not a new announcement.
    rotation_in: Option<Rotation>,
    done: bool,
}

/// [`run`] on a fresh single-threaded runtime, for a command's main thread. The runtime
/// stays on this thread, which matters: ranks die with the thread that forked them.
pub fn run_blocking(cfg: NmConfig) -> Result<(), DaemonError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(cfg))
}

/// Runs a node manager until the machine manager tells it to shut down (or rejects it).
pub async fn run(mut cfg: NmConfig) -> Result<(), DaemonError> {
    // Absolute: a rank opens its output files after changing to its working directory.
    cfg.workdir = std::path::absolute(&cfg.workdir)?;
    // The node manager's own, checked (a directory someone else made or can change is
    // refused, naming it); others may pass through (to their own job's directory) but not
    // list or write.
    let jobs_dir = Dir::private(&cfg.workdir, 0o711)?.private_child("jobs", 0o711)?;
    let listen = match &cfg.listen {
        Some(l) => l.clone(),
        None => {
            // The machine manager may not be up yet (started together, or restarting).
            let mut warned = false;
            let probe = loop {
                match TcpStream::connect(&cfg.mm).await {
                    Ok(p) => break p,
                    Err(e) => {
                        if !warned {
                            tracing::warn!(
                                "nm {}: cannot reach {} yet ({e}); retrying",
                                cfg.name,
                                cfg.mm
                            );
                            warned = true;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            };
            format!("{}:0", probe.local_addr().map_err(DaemonError::Io)?.ip())
        }
    };
    let listener = TcpListener::bind(&listen)
        .await
        .map_err(|e| DaemonError::Bind {
            addr: listen.clone(),
            cause: e,
        })?;
    let addr = listener.local_addr().map_err(DaemonError::Io)?.to_string();
    let incarnation = cosched_proto::util::now().as_micros() as u64;
    let gs = cfg.node_scheme.scheme == cosched_node::Scheme::Gs;
    let contain = Containment::detect(&cfg.name, &cfg.workdir, incarnation, gs);
    tracing::info!("nm {}: {}", cfg.name, contain.describe());
    if let Containment::Cgroups(cg) = &contain {
        let orphans = cg.reap_orphans();
        if !orphans.is_empty() {
            tracing::warn!(
                "nm {}: killed what was left in {} job cgroups of an earlier node manager",
                cfg.name,
                orphans.len()
            );
        }
    }
    let priority = cosched_proto::util::raise_priority();
    cosched_proto::util::precise_timers();
    let core = NmCore::new(
        CoreConfig {
            name: cfg.name.clone(),
            pes: cfg.pes,
            mm: cfg.mm.clone(),
            addr: addr.clone(),
            incarnation,
            // PEs map onto these in order (modulo their number when a node claims more PEs
            // than the host has cores, as an embedded cluster does).
            cpus: cosched_proto::util::allowed_cpus(None),
            cpu_offset: cfg.cpu_offset,
            keep_jobs: Dur(cfg.keep_jobs.as_micros().min(i64::MAX as u128) as i64),
            output_cap: cfg.output_cap,
            node_scheme: cfg.node_scheme.clone(),
            euid: cosched_proto::util::euid(),
            jobs_dir: jobs_dir.path().to_path_buf(),
            pmix_helper: cfg.pmix_helper.clone(),
            memory: cfg.memory.unwrap_or_else(cosched_proto::util::mem_total),
            slurm_bin: cfg
                .pmix_helper
                .as_deref()
                .and_then(|exe| super::files::slurm_bin(&cfg.workdir, exe, &cfg.name)),
        },
        now(),
    );
    let (exits_tx, exits) = mpsc::unbounded_channel();
    let (pmi_tx, pmi_rx) = mpsc::unbounded_channel();
    let (empty_tx, empty) = mpsc::unbounded_channel();
    let (frozen_tx, frozen) = mpsc::unbounded_channel();
    pin_to_spare_cpus(&core.config().spare_cpus());
    let watcher = FreezeWatcher::start(frozen_tx)?;
    let (helper_tx, helper_rx) = mpsc::unbounded_channel();
    let mut sh = Shell {
        keys: Keyring::from(cfg.key.clone()),
        cfg,
        core,
        addr,
        listener: Some(listener),
        priority,
        tree: None,
        stager: None,
        jobs_dir,
        contain,
        cgroups: HashMap::new(),
        preparing: HashMap::new(),
        pmi: HashMap::new(),
        monitors: Monitors::default(),
        exits_tx,
        exits,
        pmi_tx,
        pmi_rx,
        helpers: HashMap::new(),
        helper_tx,
        helper_rx,
        helper_held: VecDeque::new(),
        empty_tx,
        empty,
        watcher,
        frozen,
        generations: HashMap::new(),
        generation: 0,
        rotation_in: None,
        done: false,
    };
    sh.run().await
}

/// Keeps the node manager off the CPUs its PEs run on, where any are left over: its threads
/// run in the real-time class, so one that woke on a rank's CPU would take it from the rank
/// at once (the freeze watcher's switches at every quantum, the event loop at every message),
/// and every thread it starts later, and every helper it spawns, inherit the mask. Ranks are
/// pinned to their own CPUs as they start ([`super::spawn`]). On a node whose PEs cover every
/// CPU there is nowhere else to go, and nothing changes.
fn pin_to_spare_cpus(spare: &[usize]) {
    if spare.is_empty() {
        return;
    }
    match cosched_proto::util::pin_process(None, spare) {
        Ok(()) => tracing::info!("nm: own threads on CPUs {spare:?}, where no PE runs"),
        Err(e) => tracing::warn!("nm: could not keep own threads on CPUs {spare:?}: {e}"),
    }
}

/// What woke the loop.
#[expect(
    clippy::large_enum_variant,
    reason = "one event at a time, handed on at once (see Input)"
)]
enum Event {
    Delivery(Option<Delivery>),
    Exit(RankEnd),
    Pmi(FromRank),
    Beat(i64),
    Empty(JobId, u64),
    Frozen(Frozen),
    Helper(Input),
    Timer,
}

/// Waits for the next delivery of the tree, or for ever when there is none yet.
async fn delivery(tree: &mut Option<Tree>) -> Option<Delivery> {
    match tree {
        Some(t) => t.deliveries.recv().await,
        None => std::future::pending().await,
    }
}

/// Waits for the heartbeat variable to change, or for ever when there is no tree yet.
async fn heartbeat(vars: Option<(Vars, i64)>) -> i64 {
    match vars {
        Some((vars, beat)) => {
            vars.wait_cond(Cond {
                var: VAR_HEARTBEAT,
                cmp: Cmp::Ne,
                value: beat,
            })
            .await
        }
        None => std::future::pending().await,
    }
}

impl Shell {
    /// Hands the core the switches the watcher's thread made since the last call (the thread
    /// wakes nobody); whether there were any.
    fn take_switches(&mut self) -> bool {
        let landed = self.watcher.landed();
        if landed.is_empty() {
            return false;
        }
        self.core.on(now(), Input::Switched(landed));
        true
    }

    async fn run(&mut self) -> Result<(), DaemonError> {
        loop {
            self.effects().await?;
            if self.done {
                return Ok(());
            }
            // The switches made since the last turn before the exits that followed them: a
            // job's run is booked in the order its switches and its end happened.
            if self.take_switches() {
                continue;
            }
            // Then exits: a registration reports the node as it is.
            if let Ok((job, launch, exit)) = self.exits.try_recv() {
                self.core.on(now(), Input::Exited { job, launch, exit });
                continue;
            }
            let live = self.core.takes_tree_input();
            if live && let Some(i) = self.helper_held.pop_front() {
                self.core.on(now(), i);
                continue;
            }
            let wake = self.core.next_wake();
            let sleep = wake.map(|w| Duration::from_micros(w.since(now()).0.max(0) as u64));
            let beat = self.tree.as_ref().map(|t| (t.handle.vars.clone(), t.beat));
            let ev = tokio::select! {
                d = delivery(&mut self.tree), if live => Event::Delivery(d),
                Some(e) = self.exits.recv() => Event::Exit(e),
                Some(l) = self.pmi_rx.recv(), if live => Event::Pmi(l),
                v = heartbeat(beat), if live => Event::Beat(v),
                Some((job, launch)) = self.empty.recv() => Event::Empty(job, launch),
                Some(f) = self.frozen.recv() => Event::Frozen(f),
                Some(i) = self.helper_rx.recv() => Event::Helper(i),
                _ = cosched_storm::mech::sleep_until(sleep.map(|d| tokio::time::Instant::now() + d)) => Event::Timer,
            };
            let input = match ev {
                Event::Delivery(None) => return Ok(()),
                Event::Delivery(Some(d)) => match self.delivered(d) {
                    Some(i) => i,
                    None => continue,
                },
                Event::Exit((job, launch, exit)) => Input::Exited { job, launch, exit },
                Event::Pmi(l) => Input::Pmi {
                    job: l.job,
                    rank: l.rank,
                    line: l.line,
                },
                Event::Beat(v) => {
                    if let Some(t) = &mut self.tree {
                        t.beat = v;
                    }
                    Input::Heard
                }
                Event::Empty(job, launch) => Input::CgroupEmpty { job, launch },
                Event::Frozen((job, launch, generation)) => {
                    if self.generations.get(&(job, launch)) != Some(&generation) {
                        continue;
                    }
                    Input::Frozen { job, launch }
                }
                Event::Helper(i) => {
                    if !live && matches!(i, Input::Helper { .. }) {
                        self.helper_held.push_back(i);
                        continue;
                    }
                    i
                }
                Event::Timer => Input::Timer,
            };
            // The switches made while the loop slept happened before what woke it: an exit
            // taken ahead of the thaw before it would book the job's last stretch as stopped.
            self.take_switches();
            self.core.on(now(), input);
        }
    }

    /// What a delivery of the tree means to the core (broadcast chunks go to the stager).
    fn delivered(&mut self, d: Delivery) -> Option<Input> {
        match d {
            Delivery::Xfer(payload) => match ToNode::from_payload(&payload) {
                Ok((
                    _,
                    msg @ (ToNode::BcastBegin { .. }
                    | ToNode::BcastChunk { .. }
                    | ToNode::BcastEnd { .. }
                    | ToNode::BcastAbort { .. }),
                    rest,
                )) => {
                    let rest = payload.tail(rest.len());
                    if let Some(st) = &mut self.stager {
                        st.handle(msg, rest);
                    }
                    None
                }
                Ok((
                    _,
                    ToNode::RotateKey {
                        key,
                        until_us,
                        rotation,
                    },
                    _,
                )) => {
                    self.rotate_key(&key, until_us);
                    if let Some(t) = &self.tree {
                        t.handle.vars.set(VAR_KEY_ROTATION, rotation);
                    }
                    None
                }
                Ok((epoch, msg, _)) => self
                    .on_node_clock(msg)
                    .map(|msg| Input::Tree { epoch, msg }),
                Err(e) => {
                    tracing::warn!("nm {}: undecodable message: {e}", self.cfg.name);
                    None
                }
            },
            Delivery::Topology(topo) => {
                let node = self.tree.as_ref()?.node;
                Some(Input::Topology {
                    epoch: topo.epoch,
                    member: topo.position(node).is_some(),
                })
            }
            Delivery::ParentLost => Some(Input::ParentLost),
        }
    }

    /// A gang rotation's instants, which are the machine manager's (wall clock), moved onto the
    /// node manager's clock (`CLOCK_MONOTONIC`) by the difference of the two now; a
    /// heartbeat's rotation goes to the core only when it is not the last one handed over
    /// (a repeated `Rotation` is dropped).
    fn on_node_clock(&mut self, msg: ToNode) -> Option<ToNode> {
        let r = match &msg {
            ToNode::Rotation(r) => r,
            ToNode::Heartbeat {
                rotation: Some(r), ..
            } => r,
            _ => return Some(msg),
        };
        let offset = now() - cosched_proto::util::now();
        if self.rotation_in.as_ref() == Some(r) {
            return match msg {
                ToNode::Heartbeat { seq, .. } => Some(ToNode::Heartbeat {
                    seq,
                    rotation: None,
                }),
                _ => None,
            };
        }
        self.rotation_in = Some(r.clone());
        Some(match msg {
            ToNode::Rotation(r) => ToNode::Rotation(r.shifted(offset)),
            ToNode::Heartbeat { seq, rotation } => ToNode::Heartbeat {
                seq,
                rotation: rotation.map(|r| r.shifted(offset)),
            },
            other => other,
        })
    }

    /// Takes the cluster's new key, wrapped with the one sealing with now: seals with it from
    /// now on, accepts the old one until `until_us`, and writes it to the key file (a node
    /// manager restarted later must not come back with the old one).
    fn rotate_key(&mut self, wrapped: &cosched_storm::Wrapped, until_us: i64) {
        let new = self.keys.current().unwrap_key(wrapped);
        self.keys.update(|k| k.rotate(new.clone(), until_us));
        let saved = match &self.cfg.key_file {
            Some(path) => match new.save(path) {
                Ok(()) => format!("written to {}", path.display()),
                Err(e) => format!("NOT written ({e}): copy the new key there by hand"),
            },
            None => "kept in memory only (no key file)".into(),
        };
        tracing::info!(
            "nm {}: the cluster key was rotated: sealing with the new one, {saved}; the old one is accepted until {}",
            self.cfg.name,
            cosched_proto::util::utc_us(until_us)
        );
    }

    /// Carries out the core's effects, in order, until it has none.
    async fn effects(&mut self) -> Result<(), DaemonError> {
        while let Some(e) = self.core.poll_effect() {
            match e {
                Effect::Register(reg) => {
                    let answer = match try_register(&self.cfg.mm, &self.keys, &reg).await {
                        Ok(RegisterReply::NewKey { key, until_us }) => {
                            self.rotate_key(&key, until_us);
                            Err("the machine manager gave this node the cluster's new key: registering again with it".into())
                        }
                        r => r.map_err(|e| e.to_string()),
                    };
                    self.core.on(now(), Input::Registration(answer));
                }
                Effect::Accepted { node } => self.join_tree(node),
                Effect::Rejected(why) => return Err(DaemonError::Rejected(why)),
                Effect::Up(msg) => self.up(&msg),
                Effect::Gather { id, nodes, msg } => {
                    if let Some(t) = &self.tree {
                        let payload = postcard::to_stdvec(&msg).expect("encodes");
                        t.handle
                            .gather_up(id, cosched_storm::Dest::nodes(nodes), payload);
                    }
                }
                Effect::Prepare(p) => {
                    let prepared = self.prepare(&p);
                    self.core.on(now(), Input::Prepared(Box::new(prepared)));
                }
                Effect::Spawn(spec) => {
                    let result = self.spawn(&spec);
                    let (job, launch, rank) = (spec.job, spec.launch, spec.rank);
                    let input = Input::Spawned {
                        job,
                        launch,
                        rank,
                        result,
                    };
                    self.core.on(now(), input);
                }
                Effect::StartHelper(h) => {
                    // Answered as an input when the helper is ready (see `serve_helper`).
                    if let Err(why) = self.start_helper(&h) {
                        let (job, launch) = (h.spec.job, h.spec.launch);
                        let input = Input::HelperReady {
                            job,
                            launch,
                            result: Err(why),
                        };
                        self.core.on(now(), input);
                    }
                }
                Effect::ToHelper { job, msg } => {
                    if let Some(tx) = self.helpers.get(&job) {
                        let _ = tx.send(msg.line());
                    }
                }
                Effect::Signal { pgid, sig } => cosched_proto::util::signal_group(pgid, sig),
                Effect::SignalProcess { pid, sig } => {
                    cosched_proto::util::signal_pid(pid, sig);
                }
                Effect::Cgroup { job, launch, op } => self.cgroup(job, launch, op),
                Effect::Program { program, thawed } => self.program(program, thawed),
                Effect::StopProgram => self.watcher.stop_rotation(),
                Effect::PmiReply { job, rank, line } => {
                    if let Some(tx) = self.pmi.get(&(job, rank)) {
                        let _ = tx.send(line);
                    }
                }
                Effect::AppendOutput {
                    path,
                    text,
                    must_own,
                } => super::files::append_output(&path, &text, must_own),
                Effect::LookForMpi {
                    job,
                    launch,
                    rank,
                    pid,
                } => {
                    let lib = super::sample::mpi_library(pid);
                    let looked = Input::LookedForMpi {
                        job,
                        launch,
                        rank,
                        lib,
                    };
                    self.core.on(now(), looked);
                }
                Effect::CapOutput(c) => {
                    if super::files::cap_output(&c, self.cfg.output_cap) {
                        let (job, rank, file) = (c.job, c.rank, c.file);
                        self.core.on(now(), Input::OutputCapped { job, rank, file });
                    }
                }
                Effect::WriteRankFile {
                    job,
                    launch,
                    name,
                    content,
                    owner,
                } => {
                    if let Some(Preparing { dir: Some(d), .. }) = self.preparing.get(&(job, launch))
                    {
                        super::files::write_rank_file(d, &name, &content, owner);
                    }
                }
                Effect::SetupDone { job, launch } => {
                    self.preparing.remove(&(job, launch));
                }
                Effect::ReadOutput(r) => {
                    let dir = self.jobs_dir.join(r.job.0.to_string());
                    let msg = super::files::read_output(&r, &dir, &self.cfg.name);
                    self.up(&msg);
                }
                Effect::SendMonitor {
                    req,
                    scheme,
                    events,
                    switches,
                } => {
                    let mut monitor = self.monitors.report(&self.cfg.name);
                    monitor.scheme = scheme;
                    monitor.events = events;
                    monitor.switches = switches;
                    self.up(&FromNode::Monitor { req, monitor });
                }
                Effect::Sample { pids, jobs } => {
                    let s = super::sample::sample(&pids, &jobs, &mut self.monitors);
                    self.core.on(now(), Input::Samples(s));
                }
                Effect::SetSpin { job, ns } => self.monitors.set_spin(job, ns),
                Effect::Sweep { keep } => {
                    if let Some(st) = &mut self.stager {
                        st.sweep(Duration::from_micros(keep.0.max(0) as u64));
                    }
                    let dirs = super::files::job_dirs(&self.jobs_dir);
                    self.core.on(now(), Input::JobDirs(dirs));
                }
                Effect::RemoveJobDir(job) => super::files::remove_job_dir(
                    &self.jobs_dir,
                    job,
                    &self.cfg.name,
                    self.cfg.keep_jobs,
                ),
                Effect::Forgotten { job, held } => {
                    self.monitors.forget(job);
                    if let Some(st) = &mut self.stager {
                        st.forget(job);
                    }
                    self.pmi.retain(|(j, _), _| *j != job);
                    self.generations.retain(|(j, _), _| *j != job);
                    self.helpers.remove(&job);
                    if held {
                        // The directory's time marks the job's end: the retention counts from
                        // it, across restarts of the node manager too.
                        if let Ok(d) = self.jobs_dir.child(job.0.to_string()) {
                            let _ = d.mark_modified();
                        }
                    }
                }
                Effect::Exit => {
                    if let Containment::Cgroups(cg) = &self.contain {
                        // Every job cgroup, those of jobs forgotten earlier whose kill is
                        // still pending included.
                        cg.clear(Duration::from_secs(1));
                    }
                    self.cgroups.clear();
                    self.preparing.clear();
                    self.pmi.clear();
                    self.helpers.clear();
                    // The staged copies are of no use to a later run, and on tmpfs they hold
                    // memory.
                    if let Some(st) = &mut self.stager {
                        st.clear();
                    }
                    tracing::info!("nm {}: shut down by the machine manager", self.cfg.name);
                    self.done = true;
                }
                Effect::Log(Level::Info, line) => tracing::info!("{line}"),
                Effect::Log(Level::Warn, line) => tracing::warn!("{line}"),
            }
        }
        Ok(())
    }

    fn up(&self, msg: &FromNode) {
        if let Some(t) = &self.tree {
            t.handle
                .signal_up(postcard::to_stdvec(msg).expect("encodes"));
        }
    }

    /// The first registration: the node takes its place in the tree.
    fn join_tree(&mut self, node: NodeId) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        tracing::info!("nm {}: running at {}", self.cfg.name, self.priority);
        tracing::info!(
            "nm {}: registered as node {node} (tree listener {})",
            self.cfg.name,
            self.addr
        );
        let (handle, deliveries) = spawn_node(listener, self.keys.clone(), node);
        self.stager = Some(Stager::new(
            &self.cfg.name,
            &self.cfg.workdir,
            handle.vars.clone(),
        ));
        let beat = handle.vars.get(VAR_HEARTBEAT);
        self.tree = Some(Tree {
            handle,
            deliveries,
            node,
            beat,
        });
    }
}

/// Registers once with the machine manager, sealed with the current key; the reply is read
/// with the keys accepted now.
async fn try_register(
    mm: &str,
    keys: &Keyring,
    reg: &Register,
) -> Result<RegisterReply, DaemonError> {
    let key = &keys.current();
    let connect = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(mm)).await;
    let mut stream = match connect {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(DaemonError::Connect {
                addr: mm.to_string(),
                cause: e,
            });
        }
        Err(_) => {
            return Err(DaemonError::Connect {
                addr: mm.to_string(),
                cause: std::io::ErrorKind::TimedOut.into(),
            });
        }
    };
    cosched_storm::frame::write_frame(
        &mut stream,
        key,
        &Hello::Register(Stamp::now(), reg.clone()),
    )
    .await?;
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        cosched_storm::frame::read_frame(&mut stream, key, cosched_storm::frame::MAX_HELLO),
    )
    .await
    .map_err(|_| DaemonError::Connect {
        addr: mm.to_string(),
        cause: std::io::ErrorKind::TimedOut.into(),
    })??;
    Ok(reply)
}
