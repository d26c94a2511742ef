//! The node manager: registers with the machine manager, serves its place in the tree, and
//! launches, stops, continues and kills the processes of the jobs placed on its PEs.
//!
//! Launching lives here, not in separate program-launcher processes as in the original
//! testbed (seed 000 §4.3.5): those existed because a launcher had to fork per PE and per
//! time slot inside a runtime (RMS) that owned the processes. Here each rank is simply a
//! child process in its own process group, pinned to its PE, and SIGSTOP/SIGCONT on the group
//! is the whole context switch, so one process per node suffices and there is no extra hop.
//!
//! Ranks run as the job's user (issue 10, finding 3): a node manager running as root sets
//! their uid, gid and supplementary groups before `exec`, and the rank itself creates its
//! output files (mode 0600, in a job directory of mode 0700 owned by the user), so nothing is
//! created or truncated with root's rights where the user could have planted a link. What the
//! node manager itself makes in a job's directory (the monitor ring, the error files of ranks
//! that could not start) it makes relative to its handle of the directory, anew and without
//! following links (crate::dir). A node manager that is not root runs only its own user's
//! jobs and refuses the others.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use cosched_core::{JobId, NodeId};
use cosched_storm::{Cmp, Cond, Delivery, Key, NodeHandle, Payload, spawn_node};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::DaemonError;
use crate::contain::{Containment, JobCgroup};
use crate::dir::Dir;
use crate::pmi::{FromRank, JobPmi, Out};
use crate::proto::*;
use crate::util::signal_group;

/// Grace between SIGTERM and SIGKILL until the machine manager says otherwise.
const DEFAULT_KILL_WAIT: Duration = Duration::from_secs(5);
/// Longest grace the ranks get when the node manager shuts down (see [`Nm::shut_down`]).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Largest part of an output file `cosched output` brings back (the answer gives the whole
/// size; `--tail` brings the end; the file itself stays in the node's work directory).
pub const MAX_OUTPUT: u64 = 4 << 20;

/// Default of `--output-cap`: 1 GiB per output file.
pub const DEFAULT_OUTPUT_CAP: u64 = 1 << 30;

/// The notice appended to an output file cut at the cap.
pub fn cap_notice(cap: u64) -> String {
    format!(
        "\n[cosched: this output reached the node's cap of {cap} bytes (--output-cap); what the rank wrote after it was discarded]\n"
    )
}

/// How long a finished job's directory on a node is kept (`--keep-jobs`).
pub const DEFAULT_KEEP_JOBS: Duration = Duration::from_secs(7 * 86_400);

#[derive(Clone, Debug)]
pub struct NmConfig {
    pub mm: String,
    pub name: String,
    pub pes: u32,
    pub workdir: PathBuf,
    /// Address to accept the tree parent on; `None`: the address this host uses to reach
    /// the machine manager, port chosen by the system.
    pub listen: Option<String>,
    pub key: Key,
    /// PE i runs on the (offset + i)-th usable CPU, modulo their number. Node managers
    /// sharing a host (an embedded cluster) get different offsets so that their PEs spread
    /// over the cores instead of all landing on the first ones.
    pub cpu_offset: u32,
    /// A finished job's directory (its default output files) is removed this long after the
    /// job ended (`--keep-jobs`; issue 10, finding 7).
    pub keep_jobs: Duration,
    /// A rank's output file is cut back to this many bytes, with a notice appended, once it
    /// grows past it (`--output-cap`), checked at every heartbeat and at the rank's exit.
    pub output_cap: u64,
    /// The node-level scheme (issue 12; crate::nm_sched).
    pub node_scheme: crate::nm_sched::NodeSchemeConfig,
}

struct Rank {
    pgid: i32,
    exit: Option<RankExit>,
    /// Its output files (one when the streams are merged), kept within `--output-cap`.
    files: Vec<PathBuf>,
    /// The cap's notice has been appended to these of its files.
    capped: Vec<bool>,
    /// Lines to write to the rank's PMI socket (`None` when it has none).
    pmi: Option<mpsc::UnboundedSender<String>>,
}

struct NodeJob {
    ranks: BTreeMap<u32, Rank>,
    pmi: JobPmi,
    /// The job's cgroup on this node (see crate::contain); `None`: its process groups.
    cgroup: Option<JobCgroup>,
    /// Which launch of this node manager it is: the exits of its ranks carry it.
    launch: u64,
    /// Which run of the job it is (the machine manager's count, see [`Launch::run`]).
    run: u32,
    /// The job's user, when this node manager (root) runs it as another: only files of
    /// theirs are cut (a link they planted where an output was must not make root cut
    /// another file).
    must_own: Option<u32>,
}

/// A rank's exit as its watcher reports it: job, launch (see [`NodeJob::launch`]), exit.
type RankEnd = (JobId, u64, RankExit);

struct Nm {
    cfg: NmConfig,
    jobs: HashMap<JobId, NodeJob>,
    cpus: Vec<usize>,
    /// Learnt at registration; the machine manager addresses placements by it.
    id: Option<NodeId>,
    incarnation: u64,
    exits: mpsc::UnboundedSender<RankEnd>,
    /// Between SIGTERM and SIGKILL (the machine manager's `--kill-wait`, learnt at
    /// registration).
    kill_wait: Duration,
    /// Which job each live rank's process group belongs to, shared with the delayed SIGKILLs:
    /// once a group is empty its number may be reused by a new rank, which must be spared.
    owners: Owners,
    /// Lines the ranks write on their PMI sockets.
    pmi: mpsc::UnboundedSender<FromRank>,
    /// The jobs' communication-monitor rings (crate::nm_monitor).
    monitors: crate::nm_monitor::Monitors,
    /// Cgroups or process groups (see crate::contain).
    contain: Containment,
    /// Launches so far, numbering the job cgroups.
    launches: u64,
    /// When the work directory was last swept of expired job directories (`None`: never, so
    /// the first heartbeat sweeps what an earlier run left).
    last_sweep: Option<std::time::Instant>,
    /// The node-level scheme: gang strobe, local, spin-block or FCS (crate::nm_sched).
    nsched: crate::nm_sched::NodeSched,
    /// Writes broadcast files to the scratch directory (crate::bcast); set once the tree
    /// transport, whose variables it sets, is up.
    stager: Option<crate::bcast::Stager>,
    /// `WORKDIR/jobs`, checked to be the node manager's own and held open: each job's
    /// directory is made and given to its user relative to it.
    jobs_dir: Dir,
}

type Owners = std::sync::Arc<std::sync::Mutex<HashMap<i32, JobId>>>;

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
    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel();
    let (pmi_tx, mut pmi_rx) = mpsc::unbounded_channel();
    let nsched = crate::nm_sched::NodeSched::new(cfg.node_scheme.clone(), &cfg.name, cfg.pes);
    let mut nm = Nm {
        nsched,
        pmi: pmi_tx,
        cpus: allowed_cpus(),
        cfg,
        jobs: HashMap::new(),
        id: None,
        incarnation: crate::util::now().as_micros() as u64,
        exits: exit_tx,
        kill_wait: DEFAULT_KILL_WAIT,
        owners: Owners::default(),
        monitors: Default::default(),
        contain: Containment::Groups(String::new()),
        launches: 0,
        last_sweep: None,
        stager: None,
        jobs_dir,
    };
    nm.contain = Containment::detect(&nm.cfg.name, &nm.cfg.workdir, nm.incarnation);
    tracing::info!("nm {}: {}", nm.cfg.name, nm.contain.describe());
    if let Containment::Cgroups(cg) = &nm.contain {
        let orphans = cg.reap_orphans();
        if !orphans.is_empty() {
            tracing::warn!(
                "nm {}: killed what was left in {} job cgroups of an earlier node manager",
                nm.cfg.name,
                orphans.len()
            );
        }
    }

    let priority = crate::util::raise_priority();
    let (node, mut silence) = nm.register(&addr, &mut exit_rx).await?;
    tracing::info!("nm {}: running at {priority}", nm.cfg.name);
    tracing::info!(
        "nm {}: registered as node {node} (tree listener {addr})",
        nm.cfg.name
    );
    let (handle, mut deliveries) = spawn_node(listener, nm.cfg.key.clone(), node);
    nm.stager = Some(crate::bcast::Stager::new(
        &nm.cfg.name,
        &nm.cfg.workdir,
        handle.vars.clone(),
    ));
    let mut last_heard = tokio::time::Instant::now();
    // The heartbeat's XFER-AND-SIGNAL writes its sequence number into VAR_HEARTBEAT; the
    // machine manager's liveness is a TEST-EVENT on that variable changing (a restarted
    // machine manager may count from a lower number, hence "differs", not "grows").
    let mut beat = handle.vars.get(VAR_HEARTBEAT);
    // How often the node scheme looks at its ranks (/proc, the monitor rings): well under
    // the gang quantum, so that a blocked slot owner's PE is filled within a few percent of it.
    let mut sched_tick = tokio::time::interval(crate::nm_sched::TICK);
    sched_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = sched_tick.tick(), if nm.nsched.active() => {
                let plan = nm.nsched.tick(&mut nm.monitors);
                nm.carry_out(plan, &handle);
            }
            d = deliveries.recv() => {
                let Some(d) = d else { return Ok(()) };
                match d {
                    Delivery::Xfer(payload) => {
                        match postcard::take_from_bytes::<ToNode>(&payload) {
                            Ok((ToNode::Shutdown, _)) => {
                                nm.shut_down(&mut exit_rx).await;
                                tracing::info!("nm {}: shut down by the machine manager", nm.cfg.name);
                                return Ok(());
                            }
                            Ok((msg, rest)) => {
                                let rest = payload.tail(rest.len());
                                nm.handle(msg, rest, &handle)
                            }
                            Err(e) => tracing::warn!("nm {}: undecodable message: {e}", nm.cfg.name),
                        }
                    }
                    Delivery::Topology(topo) => {
                        last_heard = tokio::time::Instant::now();
                        if topo.position(node).is_some() {
                            nm.joined(topo.epoch, &handle);
                        }
                    }
                    Delivery::ParentLost => {
                        tracing::warn!("nm {}: lost its parent in the tree; registering again", nm.cfg.name);
                        (_, silence) = nm.register(&addr, &mut exit_rx).await?;
                        last_heard = tokio::time::Instant::now();
                    }
                }
            }
            Some((job, launch, exit)) = exit_rx.recv() => {
                // Kept until the machine manager forgets the job: reported again at the next
                // registration and on joining the tree, so a report lost on the way (no
                // parent yet, a parent that died) is not lost for good.
                if let Some(run) = nm.record_exit(job, launch, &exit) {
                    handle.signal_up(postcard::to_stdvec(&FromNode::Exited { job, run, exit }).expect("encodes"));
                }
            }
            Some(line) = pmi_rx.recv() => nm.pmi_line(line, &handle),
            v = handle.vars.wait_cond(Cond { var: VAR_HEARTBEAT, cmp: Cmp::Ne, value: beat }) => {
                beat = v;
                last_heard = tokio::time::Instant::now();
            }
            _ = tokio::time::sleep_until(last_heard + silence) => {
                tracing::warn!("nm {}: no heartbeat for {silence:?}; registering again", nm.cfg.name);
                (_, silence) = nm.register(&addr, &mut exit_rx).await?;
                last_heard = tokio::time::Instant::now();
            }
        }
    }
}

impl Nm {
    /// Takes in a rank's exit; `None` when the job or rank is unknown (forgotten already), or
    /// when the exit is of an earlier launch of the job (a requeued job launched here again
    /// while a rank of its previous run was still exiting: that exit is not the new rank's).
    /// Returns the job's run (see [`Launch::run`]) when it took the exit in.
    fn record_exit(&mut self, job: JobId, launch: u64, exit: &RankExit) -> Option<u32> {
        let j = self.jobs.get_mut(&job).filter(|j| j.launch == launch)?;
        j.ranks.get_mut(&exit.rank)?.exit = Some(exit.clone());
        let run = j.run;
        // Its last writes are cut too, not only those a heartbeat saw.
        self.cap_outputs(Some((job, exit.rank)));
        self.nsched.exited(job, exit.rank);
        Some(run)
    }

    /// The node is in the tree of `epoch`: tells the machine manager (which sends it nothing
    /// before), then repeats every exit it holds, since those sent while it had no parent
    /// were dropped on the way.
    fn joined(&self, epoch: u64, handle: &NodeHandle) {
        let up = |m: &FromNode| postcard::to_stdvec(m).expect("encodes");
        handle.signal_up(up(&FromNode::Joined {
            incarnation: self.incarnation,
            epoch,
        }));
        for (&job, j) in &self.jobs {
            // A fence answer may have been lost with the old parent: ask again (the machine
            // manager answers a completed fence again).
            if let Some((seq, puts)) = j.pmi.pending_fence() {
                handle.signal_up(up(&FromNode::Fence { job, seq, puts }));
            }
            for r in j.ranks.values() {
                if let Some(exit) = &r.exit {
                    handle.signal_up(up(&FromNode::Exited {
                        job,
                        run: j.run,
                        exit: exit.clone(),
                    }));
                }
            }
        }
    }

    /// Registers (again) with the machine manager with everything it holds (ranks running,
    /// ranks exited with their status), retrying until it answers: after an MM restart this
    /// is how the node comes back with its jobs. Rank exits keep being taken in between
    /// attempts, so each attempt reports the node's state as it is then. A node that was
    /// declared down meanwhile is told to kill what it still runs first ([`Nm::kill_fenced`]).
    /// Returns the node's id and how long it may hear nothing before it registers again:
    /// as long as the machine manager waits before it takes the node for not responding,
    /// and at least four heartbeats.
    async fn register(
        &mut self,
        addr: &str,
        exits: &mut mpsc::UnboundedReceiver<RankEnd>,
    ) -> Result<(NodeId, Duration), DaemonError> {
        let mut warned = false;
        loop {
            while let Ok((job, launch, exit)) = exits.try_recv() {
                self.record_exit(job, launch, &exit);
            }
            let reg = Register {
                name: self.cfg.name.clone(),
                pes: self.cfg.pes,
                addr: addr.to_string(),
                incarnation: self.incarnation,
                jobs: self
                    .jobs
                    .iter()
                    .map(|(id, j)| HeldJob {
                        job: *id,
                        run: j.run,
                        ranks: j
                            .ranks
                            .iter()
                            .map(|(r, s)| {
                                s.exit.clone().unwrap_or(RankExit {
                                    rank: *r,
                                    code: None,
                                    error: None,
                                })
                            })
                            .collect(),
                    })
                    .collect(),
            };
            match try_register(&self.cfg.mm, &self.cfg.key, &reg).await {
                Ok(RegisterReply::Accepted {
                    node,
                    heartbeat_us,
                    suspect_after_us,
                    kill_wait_us,
                    drop_jobs,
                }) => {
                    self.set_kill_wait(kill_wait_us);
                    for job in drop_jobs {
                        self.forget(job);
                    }
                    self.id = Some(node);
                    let heartbeat = Duration::from_micros(heartbeat_us.max(1_000) as u64);
                    let suspect = Duration::from_micros(suspect_after_us.max(0) as u64);
                    let silence = (heartbeat * 4 + Duration::from_millis(200)).max(suspect);
                    return Ok((node, silence));
                }
                Ok(RegisterReply::Fence { jobs, kill_wait_us }) => {
                    self.set_kill_wait(kill_wait_us);
                    self.kill_fenced(&jobs, exits).await;
                }
                Ok(RegisterReply::Rejected(why)) => return Err(DaemonError::Rejected(why)),
                Err(e) => {
                    if !warned {
                        tracing::warn!(
                            "nm {}: cannot register with {} ({e}); retrying",
                            self.cfg.name,
                            self.cfg.mm
                        );
                        warned = true;
                    }
                    // Exits that happen meanwhile are recorded, to be in the next attempt.
                    let pause = tokio::time::sleep(Duration::from_millis(100));
                    tokio::pin!(pause);
                    loop {
                        tokio::select! {
                            _ = &mut pause => break,
                            Some((job, launch, exit)) = exits.recv() => { self.record_exit(job, launch, &exit); }
                        }
                    }
                }
            }
        }
    }

    fn set_kill_wait(&mut self, us: i64) {
        let most = crate::mm::MAX_KILL_WAIT.as_micros();
        self.kill_wait = Duration::from_micros(us.clamp(0, most) as u64);
    }

    /// The machine manager declared this node down while it ran `jobs` (its manager was
    /// stopped, or cut off) and has ended or requeued them since: they are killed as any
    /// killed job is, and forgotten once every rank has exited, so that the next
    /// registration reports them gone. Ranks that outlive the kill wait and a margin stay
    /// held (the registration reports them, and the machine manager asks again).
    async fn kill_fenced(&mut self, jobs: &[JobId], exits: &mut mpsc::UnboundedReceiver<RankEnd>) {
        tracing::warn!(
            "nm {}: declared down while running jobs {jobs:?}, which the machine manager has ended or requeued since: killing them before registering again",
            self.cfg.name
        );
        for &job in jobs {
            self.terminate(job);
        }
        let running = |nm: &Nm| {
            jobs.iter().any(|j| {
                nm.jobs
                    .get(j)
                    .is_some_and(|j| j.ranks.values().any(|r| r.pgid > 0 && r.exit.is_none()))
            })
        };
        let deadline = tokio::time::Instant::now() + self.kill_wait + Duration::from_secs(5);
        while running(self) {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                Some((job, launch, exit)) = exits.recv() => { self.record_exit(job, launch, &exit); }
            }
        }
        for &job in jobs {
            let gone = self
                .jobs
                .get(&job)
                .is_some_and(|j| j.ranks.values().all(|r| r.pgid == 0 || r.exit.is_some()));
            if gone {
                self.forget(job);
            } else {
                tracing::warn!(
                    "nm {}: job {job} still has ranks running after its kill; the machine manager will ask again",
                    self.cfg.name
                );
            }
        }
    }

    /// Carries out one message of the machine manager's; `rest` is what followed it in its
    /// payload (a broadcast chunk's bytes, [`ToNode::chunk_payload`]).
    fn handle(&mut self, msg: ToNode, rest: Payload, handle: &NodeHandle) {
        match msg {
            ToNode::Heartbeat { strobe, .. } => {
                self.cap_outputs(None);
                self.sweep_if_due();
                if let Some(strobe) = strobe {
                    let plan = self.nsched.strobe(strobe, &mut self.monitors);
                    self.carry_out(plan, handle);
                }
            }
            ToNode::Strobe(strobe) => {
                let plan = self.nsched.strobe(strobe, &mut self.monitors);
                self.carry_out(plan, handle);
            }
            ToNode::Shutdown => {}
            msg @ (ToNode::BcastBegin { .. }
            | ToNode::BcastChunk { .. }
            | ToNode::BcastEnd { .. }
            | ToNode::BcastAbort { .. }) => {
                if let Some(st) = &mut self.stager {
                    st.handle(msg, rest);
                }
            }
            ToNode::Launch(l) => {
                let (job, run) = (l.job, l.run);
                let mine = l.placement.iter().any(|p| Some(p.node) == self.id);
                self.launch(l);
                if mine {
                    // Acknowledged even when it was a repeat: the machine manager resends a
                    // launch until it hears this.
                    handle.signal_up(
                        postcard::to_stdvec(&FromNode::Launched { job, run }).expect("encodes"),
                    );
                }
            }
            ToNode::Switch { stop, cont, kill } => {
                // Stop the outgoing jobs before continuing the incoming ones, so two jobs never
                // share a PE even for an instant.
                // Jobs of the gang matrix are switched by the node scheme from the strobe that
                // follows this message; the others (a policy without a matrix) here.
                for (jobs, sig) in [(stop, libc::SIGSTOP), (cont, libc::SIGCONT)] {
                    for job in jobs {
                        if self.nsched.manages(job) {
                            continue;
                        }
                        self.signal(job, sig);
                        self.nsched.job_signalled(job, sig == libc::SIGSTOP);
                    }
                }
                for job in kill {
                    self.terminate(job);
                }
            }
            ToNode::FenceDone { job, seq, kvs } => {
                if let Some(j) = self.jobs.get_mut(&job) {
                    let out = j.pmi.fence_done(seq, kvs);
                    self.pmi_out(job, out, handle);
                }
            }
            ToNode::FetchMonitor { req } => handle.signal_up(
                postcard::to_stdvec(&FromNode::Monitor {
                    req,
                    monitor: {
                        let mut m = self.monitors.report(&self.cfg.name);
                        m.scheme = self.nsched.scheme().name().to_string();
                        m.events = self.nsched.events();
                        m
                    },
                })
                .expect("encodes"),
            ),
            ToNode::Forget { jobs } => {
                for job in jobs {
                    self.forget(job);
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
                let dir = self.job_dir(job);
                // As root, only the job's user's own regular files are read: the user could
                // have put a link to any file, or a FIFO, where the output was.
                let must_own = uid.filter(|&u| u != 0 && crate::util::euid() == 0);
                // The directory the rank started in (see spawn_rank).
                let cwd = std::path::Path::new(&cwd);
                let cwd = if cwd.is_dir() { cwd } else { &dir };
                let f = crate::jobio::rank_files(&io, cwd, &dir, job, rank, &self.cfg.name);
                // At most MAX_OUTPUT bytes of a file, its beginning or its end, and its size.
                let read = |path: &std::path::Path| -> Option<(Vec<u8>, u64)> {
                    use std::io::{Read, Seek};
                    let mut f = match must_own {
                        Some(u) => crate::dir::open_regular(path, Some(u), false),
                        None => std::fs::File::open(path),
                    }
                    .ok()?;
                    let size = f.metadata().ok()?.len();
                    if tail && size > MAX_OUTPUT {
                        f.seek(std::io::SeekFrom::Start(size - MAX_OUTPUT)).ok()?;
                    }
                    let mut buf = Vec::new();
                    f.take(MAX_OUTPUT).read_to_end(&mut buf).ok()?;
                    Some((buf, size))
                };
                // Merged streams are in one file: shown once, as standard output.
                let err = if f.merged {
                    Some((Vec::new(), 0))
                } else {
                    read(&f.err)
                };
                let (found, (stdout, out_size), (stderr, err_size)) = match (read(&f.out), err) {
                    (Some(o), Some(e)) => (true, o, e),
                    _ => (false, (Vec::new(), 0), (Vec::new(), 0)),
                };
                let mut files = Vec::new();
                if io.output.is_some() || io.error.is_some() {
                    files.push(f.out.display().to_string());
                    if !f.merged {
                        files.push(f.err.display().to_string());
                    }
                }
                handle.signal_up(
                    postcard::to_stdvec(&FromNode::Output {
                        req,
                        found,
                        stdout,
                        stderr,
                        files,
                        sizes: (out_size, err_size),
                    })
                    .expect("encodes"),
                );
            }
        }
    }

    /// A line a rank wrote on its PMI socket.
    fn pmi_line(&mut self, from: FromRank, handle: &NodeHandle) {
        let Some(j) = self.jobs.get_mut(&from.job) else {
            return;
        };
        let out = j.pmi.on_line(from.rank, &from.line);
        self.pmi_out(from.job, out, handle);
    }

    /// Carries out what the PMI protocol of `job` asks for.
    fn pmi_out(&self, job: JobId, out: Vec<Out>, handle: &NodeHandle) {
        let Some(j) = self.jobs.get(&job) else {
            return;
        };
        for o in out {
            match o {
                Out::Reply(rank, line) => {
                    if let Some(tx) = j.ranks.get(&rank).and_then(|r| r.pmi.as_ref()) {
                        let _ = tx.send(line);
                    }
                }
                Out::FenceUp { seq, puts } => handle.signal_up(
                    postcard::to_stdvec(&FromNode::Fence { job, seq, puts }).expect("encodes"),
                ),
                // The rank exits with its code itself; the job then fails with it and the
                // other ranks are killed, as for any rank exiting non-zero.
                Out::Abort { rank, code, msg } => tracing::warn!(
                    "nm {}: job {job} rank {rank} called PMI abort (exit code {code}): {msg}",
                    self.cfg.name
                ),
                Out::Bad { rank, line } => tracing::warn!(
                    "nm {}: job {job} rank {rank}: PMI line not served: {line:?}",
                    self.cfg.name
                ),
            }
        }
    }

    /// Keeps the output files of the running ranks (of `only` that rank, when given) within
    /// `--output-cap`: a file past it is cut back to the cap and the notice appended once;
    /// the rank appends (`O_APPEND`), so what it writes later lands after the notice and is
    /// cut at the next check. A fast writer overshoots by what it writes between two
    /// heartbeats.
    fn cap_outputs(&mut self, only: Option<(JobId, u32)>) {
        use std::io::Write;
        let cap = self.cfg.output_cap;
        let notice = cap_notice(cap);
        for (&job, j) in self.jobs.iter_mut() {
            for (&r, rank) in j.ranks.iter_mut() {
                let wanted = match only {
                    Some(o) => o == (job, r),
                    None => rank.exit.is_none(),
                };
                if !wanted {
                    continue;
                }
                for (path, capped) in rank.files.iter().zip(rank.capped.iter_mut()) {
                    let keep = cap + if *capped { notice.len() as u64 } else { 0 };
                    if std::fs::metadata(path).map_or(true, |m| m.len() <= keep) {
                        continue;
                    }
                    // Only a regular file (of the job's user, as root): a link the user put
                    // where the output was must not make root cut another file.
                    let Ok(mut f) = crate::dir::open_regular(path, j.must_own, true) else {
                        continue;
                    };
                    if f.set_len(keep).is_err() {
                        continue;
                    }
                    if !*capped {
                        let _ = f.write_all(notice.as_bytes());
                        *capped = true;
                        tracing::info!(
                            "nm {}: output of job {job} rank {r} reached --output-cap ({cap} bytes): cut, with a notice",
                            self.cfg.name
                        );
                    }
                }
            }
        }
    }

    /// Sweeps the work directory at most every quarter of the retention (between 0.2 s and a
    /// minute): cheap enough on every heartbeat, prompt enough for a short retention.
    fn sweep_if_due(&mut self) {
        let every =
            (self.cfg.keep_jobs / 4).clamp(Duration::from_millis(200), Duration::from_secs(60));
        if self.last_sweep.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last_sweep = Some(std::time::Instant::now());
        self.sweep();
        if let Some(st) = &mut self.stager {
            st.sweep(self.cfg.keep_jobs);
        }
    }

    /// Removes the directories of jobs this node no longer holds whose last change (their
    /// end, see [`Nm::forget`]) is older than the retention. Only the node's own job
    /// directories go (`WORKDIR/jobs/ID`, with the default output files); files a job wrote
    /// elsewhere (`--output` patterns, its working directory) are never touched.
    fn sweep(&self) {
        let root = self.jobs_dir.path();
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        let now = std::time::SystemTime::now();
        for e in entries.flatten() {
            let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            if self.jobs.contains_key(&JobId(id)) {
                continue;
            }
            // Not followed: only a real directory made by this node manager is removed.
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            let ended = m.modified().unwrap_or(now);
            if !m.is_dir() || now.duration_since(ended).unwrap_or_default() < self.cfg.keep_jobs {
                continue;
            }
            match std::fs::remove_dir_all(e.path()) {
                Ok(()) => tracing::info!(
                    "nm {}: removed the directory of job {id}, ended more than {:?} ago (--keep-jobs)",
                    self.cfg.name,
                    self.cfg.keep_jobs
                ),
                Err(err) => tracing::warn!(
                    "nm {}: cannot remove {}: {err}",
                    self.cfg.name,
                    e.path().display()
                ),
            }
        }
    }

    /// Carries out a plan of the node scheme: rank stops, job stops, job continues, rank
    /// continues, in that order (see [`crate::nm_sched::Plan`]); then tells the machine
    /// manager which jobs now run or stand stopped here, for its accounting.
    fn carry_out(&self, plan: crate::nm_sched::Plan, handle: &NodeHandle) {
        for pid in plan.stop_ranks {
            signal_group(pid, libc::SIGSTOP);
        }
        for job in plan.stop_jobs {
            self.signal(job, libc::SIGSTOP);
        }
        for job in plan.cont_jobs {
            let thaw_only = self.nsched.scheme() == cosched_node::Scheme::Fcs;
            match self.jobs.get(&job) {
                // FCS continues the chosen ranks one by one (below); the job's freezer
                // must let them.
                Some(j) if thaw_only => {
                    if let Some(cg) = &j.cgroup {
                        cg.freeze(false);
                    }
                }
                _ => self.signal(job, libc::SIGCONT),
            }
        }
        for pid in plan.cont_ranks {
            signal_group(pid, libc::SIGCONT);
        }
        for (job, runs) in plan.runs {
            if let Some(j) = self.jobs.get(&job) {
                let msg = FromNode::Runs {
                    job,
                    run: j.run,
                    runs,
                };
                handle.signal_up(postcard::to_stdvec(&msg).expect("encodes"));
            }
        }
    }

    fn job_dir(&self, job: JobId) -> PathBuf {
        self.jobs_dir.join(job.0.to_string())
    }

    fn signal(&self, job: JobId, sig: i32) {
        if let Some(j) = self.jobs.get(&job) {
            if let Some(cg) = &j.cgroup {
                // The freezer stops every process of the job, `setsid` ones included.
                cg.freeze(sig == libc::SIGSTOP);
                return;
            }
            for r in j.ranks.values().filter(|r| r.exit.is_none()) {
                signal_group(r.pgid, sig);
            }
        }
    }

    /// The process groups of a job's ranks, exited ones included: a rank that exited may
    /// have left background children in its group.
    fn groups(&self, job: JobId) -> Vec<i32> {
        self.jobs
            .get(&job)
            .map(|j| {
                j.ranks
                    .values()
                    .map(|r| r.pgid)
                    .filter(|&g| g > 0)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Kills a job as Slurm does: SIGTERM (and SIGCONT, so a stopped rank can act on it) to
    /// every process group of the job now, SIGKILL to whatever is left of them `kill_wait`
    /// later. The SIGKILL is sent even if the job is forgotten meanwhile.
    fn terminate(&self, job: JobId) {
        if let Some(cg) = self.jobs.get(&job).and_then(|j| j.cgroup.clone()) {
            terminate_cgroup(cg, self.kill_wait);
            return;
        }
        let groups = self.groups(job);
        if groups.is_empty() {
            return;
        }
        for &g in &groups {
            signal_group(g, libc::SIGTERM);
            signal_group(g, libc::SIGCONT);
        }
        let (wait, owners) = (self.kill_wait, self.owners.clone());
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let owners = owners.lock().unwrap_or_else(|e| e.into_inner());
            for g in groups {
                if owners.get(&g).is_none_or(|&o| o == job) {
                    signal_group(g, libc::SIGKILL);
                }
            }
        });
    }

    /// Drops a job the machine manager has ended; what is left of its process groups (a
    /// rank's background children) is terminated with the usual grace.
    fn forget(&mut self, job: JobId) {
        self.terminate(job);
        self.nsched.forget(job);
        self.monitors.forget(job);
        if let Some(st) = &mut self.stager {
            st.forget(job);
        }
        if self.jobs.remove(&job).is_some() {
            // The directory's time marks the job's end: the retention counts from it, across
            // restarts of the node manager too.
            if let Ok(d) = self.jobs_dir.child(job.0.to_string()) {
                let _ = d.mark_modified();
            }
        }
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        owners.retain(|_, o| *o != job);
    }

    /// Before the node manager exits: every job gets SIGTERM, the ranks get up to
    /// [`SHUTDOWN_GRACE`] (or `kill_wait` if shorter) to exit, then every group gets SIGKILL.
    /// The grace is short because `cluster down` kills daemons still alive after 3 s, and the
    /// ranks die with the node manager anyway (PR_SET_PDEATHSIG).
    async fn shut_down(&mut self, exits: &mut mpsc::UnboundedReceiver<RankEnd>) {
        let jobs: Vec<JobId> = self.jobs.keys().copied().collect();
        let mut groups = Vec::new();
        let cgroups: Vec<JobCgroup> = self
            .jobs
            .values()
            .filter_map(|j| j.cgroup.clone())
            .collect();
        for cg in &cgroups {
            cg.freeze(false);
            cg.signal(libc::SIGTERM);
        }
        for &job in &jobs {
            groups.extend(self.groups(job));
            for g in self.groups(job) {
                signal_group(g, libc::SIGTERM);
                signal_group(g, libc::SIGCONT);
            }
        }
        let deadline = tokio::time::Instant::now() + self.kill_wait.min(SHUTDOWN_GRACE);
        let running = |nm: &Nm| {
            nm.jobs
                .values()
                .any(|j| j.ranks.values().any(|r| r.pgid > 0 && r.exit.is_none()))
        };
        while running(self) {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                Some((job, launch, exit)) = exits.recv() => { self.record_exit(job, launch, &exit); }
            }
        }
        for g in groups {
            signal_group(g, libc::SIGKILL);
        }
        if let Containment::Cgroups(cg) = &self.contain {
            // Every job cgroup, those of jobs forgotten earlier whose kill is still pending
            // included.
            cg.clear(Duration::from_secs(1));
        }
        self.jobs.clear();
        // The staged copies are of no use to a later run, and on tmpfs they hold memory.
        if let Some(st) = &mut self.stager {
            st.clear();
        }
    }

    fn launch(&mut self, mut l: Launch) {
        let Some(mine) = l.placement.iter().find(|p| Some(p.node) == self.id) else {
            return;
        };
        // `cosched submit --bcast`: argv[0] names a staged copy; run this node's, of the job's
        // user's or published. One that is not verified and released stays unresolved, and
        // the launch fails naming it.
        if let (Some(st), Some(cmd0)) = (&mut self.stager, l.cmd.first_mut()) {
            let uid = l.uid.unwrap_or_else(crate::util::euid);
            match st.resolve(cmd0, l.job, uid) {
                Ok(Some(path)) => *cmd0 = path.display().to_string(),
                Ok(None) => {}
                Err(why) => tracing::warn!("nm {}: job {}: {why}", self.cfg.name, l.job),
            }
        }
        let mine = mine.clone();
        match self.jobs.get(&l.job).map(|j| j.run) {
            Some(run) if run >= l.run => return, // a duplicate (or late) delivery
            // An earlier run of a requeued job whose forget never came (the node was out of
            // the tree then): its processes go, the new run starts.
            Some(_) => self.forget(l.job),
            None => {}
        }
        let dir = self.job_dir(l.job);
        let local = mine.ranks.iter().map(|&(r, _)| r).collect();
        self.launches += 1;
        let (cgroup, procs) = match self.contain.for_launch(l.job, self.launches) {
            Ok(c) => c.unzip(),
            Err(e) => {
                let name = &self.cfg.name;
                tracing::warn!("nm {name}: job {}: no cgroup ({e}); process groups", l.job);
                (None, None)
            }
        };
        let procs_fd = procs.as_ref().map(crate::contain::raw);
        let run_as = run_as(&l, &self.cfg.name);
        let owner = run_as.as_ref().ok().and_then(Option::as_ref);
        let mut job = NodeJob {
            ranks: BTreeMap::new(),
            pmi: JobPmi::new(l.job, l.size, &l.placement, local),
            cgroup,
            launch: self.launches,
            run: l.run,
            must_own: owner
                .map(|w| w.uid)
                .filter(|&u| u != 0 && crate::util::euid() == 0),
        };
        // Where each rank's output goes, as spawn_rank opens it.
        let cwd = if std::path::Path::new(&l.cwd).is_dir() {
            PathBuf::from(&l.cwd)
        } else {
            dir.clone()
        };
        let files_of = |rank: u32| {
            let f = crate::jobio::rank_files(&l.io, &cwd, &dir, l.job, rank, &self.cfg.name);
            if f.merged {
                vec![f.out]
            } else {
                vec![f.out, f.err]
            }
        };
        let ranks: Vec<u32> = mine.ranks.iter().map(|&(r, _)| r).collect();
        let owner_ids = owner.map(|o| (o.uid, o.gid));
        // Made, or taken back from an earlier run, relative to the handle of `jobs/`, and
        // given to the user through its own handle.
        let handle = self
            .jobs_dir
            .child_for(l.job.0.to_string(), 0o700, owner_ids)
            .inspect_err(|e| {
                tracing::warn!(
                    "nm {}: job {}: cannot make its directory {}: {e}",
                    self.cfg.name,
                    l.job,
                    dir.display()
                )
            })
            .ok();
        let monitor_env = match &handle {
            Some(h) => self
                .monitors
                .prepare(l.job, h, &self.cfg.name, &ranks, owner_ids),
            None => vec![Vec::new(); ranks.len()],
        };
        for (&(rank, local_pe), menv) in mine.ranks.iter().zip(&monitor_env) {
            let cpu = self.cpus[(self.cfg.cpu_offset + local_pe) as usize % self.cpus.len()];
            // The rank's PMI socket: our end is served by a task, its end is inherited.
            let pair = std::os::unix::net::UnixStream::pair();
            let pmi_fd = pair.as_ref().ok().map(|(_, theirs)| theirs.as_raw_fd());
            let spawned = run_as
                .as_ref()
                .map_err(|why| std::io::Error::other(why.clone()))
                .and_then(|who| {
                    spawn_rank(
                        &l,
                        rank,
                        local_pe,
                        cpu,
                        &self.cfg.name,
                        &dir,
                        pmi_fd,
                        who.as_ref(),
                        menv,
                        procs_fd,
                    )
                });
            match spawned {
                Ok(mut child) => {
                    // Our copy of the rank's end must go, or we would never see it close.
                    let ours = pair.ok().and_then(|(ours, _theirs)| {
                        ours.set_nonblocking(true).ok()?;
                        tokio::net::UnixStream::from_std(ours).ok()
                    });
                    let pmi = ours.map(|stream| {
                        let (tx, rx) = mpsc::unbounded_channel();
                        let to_nm = self.pmi.clone();
                        tokio::spawn(crate::pmi::serve_rank(stream, l.job, rank, to_nm, rx));
                        tx
                    });
                    let pid = child.id().map(|p| p as i32).unwrap_or(0);
                    self.owners
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(pid, l.job);
                    if l.stopped && job.cgroup.is_none() {
                        signal_group(pid, libc::SIGSTOP);
                    }
                    job.ranks.insert(
                        rank,
                        Rank {
                            pgid: pid,
                            exit: None,
                            pmi,
                            files: files_of(rank),
                            capped: vec![false; 2],
                        },
                    );
                    self.nsched.add(l.job, rank, local_pe, pid, l.stopped);
                    let (tx, id, launch) = (self.exits.clone(), l.job, self.launches);
                    tokio::spawn(async move {
                        let code = match child.wait().await {
                            Ok(st) => exit_code(st),
                            Err(_) => -1,
                        };
                        let _ = tx.send((
                            id,
                            launch,
                            RankExit {
                                rank,
                                code: Some(code),
                                error: None,
                            },
                        ));
                    });
                }
                Err(e) => {
                    let why = format!("cannot launch {:?}: {e}", l.cmd[0]);
                    tracing::warn!("nm {}: job {} rank {rank}: {why}", self.cfg.name, l.job);
                    if let Some(h) = &handle {
                        let err = format!("cosched: {why}\n");
                        write_rank_file(h, &format!("{rank}.err"), err.as_bytes(), owner_ids);
                        write_rank_file(h, &format!("{rank}.out"), b"", owner_ids);
                    }
                    job.ranks.insert(
                        rank,
                        Rank {
                            pgid: 0,
                            exit: None,
                            pmi: None,
                            files: Vec::new(),
                            capped: Vec::new(),
                        },
                    );
                    let _ = self.exits.send((
                        l.job,
                        self.launches,
                        RankExit {
                            rank,
                            code: Some(127),
                            error: Some(why),
                        },
                    ));
                }
            }
        }
        if l.stopped
            && let Some(cg) = &job.cgroup
        {
            // Only now: a rank joining a frozen cgroup would freeze before its exec, and the
            // spawn waits for the exec.
            cg.freeze(true);
        }
        self.jobs.insert(l.job, job);
    }
}

/// The user a job's ranks run as, when it is not the node manager's own.
#[derive(Clone, Debug)]
struct RunAs {
    uid: u32,
    gid: u32,
    /// Supplementary groups, as `initgroups` would set them (looked up before the fork:
    /// reading the group database is not async-signal-safe).
    groups: Vec<libc::gid_t>,
}

/// Who the ranks of `l` run as: `None` for the node manager's own user (or a job recorded
/// without a user); an error when this node manager is not root and the job is another
/// user's.
fn run_as(l: &Launch, node: &str) -> Result<Option<RunAs>, String> {
    let me = crate::util::euid();
    match l.uid {
        None => Ok(None),
        Some(u) if u == me => Ok(None),
        Some(u) if me != 0 => Err(format!(
            "the node manager of {node} runs as {} (uid {me}) and can run only that user's jobs; job {} belongs to {} (uid {u}): run the node managers as root to run every user's jobs",
            crate::util::user_name(me),
            l.job,
            crate::util::user_name(u)
        )),
        Some(uid) => {
            let gid = l
                .gid
                .unwrap_or_else(|| crate::util::account(uid).map_or(uid, |a| a.gid));
            Ok(Some(RunAs {
                uid,
                gid,
                groups: crate::util::groups_of(uid, gid),
            }))
        }
    }
}

/// Writes file `name` of a rank that could not start (its error) in the job's directory
/// `dir`: a new private file in place of whatever the user left at the name (never written
/// through it), given to the job's user (uid, gid) through its descriptor.
fn write_rank_file(dir: &Dir, name: &str, content: &[u8], owner: Option<(u32, u32)>) {
    use std::io::Write;
    if let Ok(mut f) = dir.replace(name, 0o600) {
        if let Some((uid, gid)) = owner {
            let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
        }
        let _ = f.write_all(content);
    }
}

/// A path for `open(2)` in the rank between fork and exec.
fn c_path(p: &std::path::Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other(format!("{} contains a NUL byte", p.display())))
}

/// Kills a job contained in a cgroup: thawed, SIGTERM (and SIGCONT) to every process in it
/// now, `cgroup.kill` `wait` later, and the cgroup removed once empty. Done at once when
/// nothing is left in it.
fn terminate_cgroup(cg: JobCgroup, wait: Duration) {
    cg.freeze(false);
    if !cg.populated() {
        cg.remove_when_empty(Duration::ZERO);
        return;
    }
    cg.signal(libc::SIGTERM);
    cg.signal(libc::SIGCONT);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + wait;
        // Early out when everything exited on SIGTERM.
        while tokio::time::Instant::now() < deadline && cg.populated() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cg.kill();
        let _ = tokio::task::spawn_blocking(move || cg.remove_when_empty(Duration::from_secs(10)))
            .await;
    });
}

#[allow(clippy::too_many_arguments)]
fn spawn_rank(
    l: &Launch,
    rank: u32,
    local_pe: u32,
    cpu: usize,
    node_name: &str,
    dir: &std::path::Path,
    pmi_fd: Option<RawFd>,
    run_as: Option<&RunAs>,
    monitor_env: &[(String, String)],
    cgroup_procs: Option<RawFd>,
) -> std::io::Result<tokio::process::Child> {
    // The job's working directory when this node has it (a shared file system), else the
    // job's directory on the node; output patterns are relative to the same.
    let cwd = if std::path::Path::new(&l.cwd).is_dir() {
        std::path::Path::new(&l.cwd)
    } else {
        dir
    };
    let files = crate::jobio::rank_files(&l.io, cwd, dir, l.job, rank, node_name);
    // As another user, the rank creates its files itself (below, after taking the user's
    // identity); as ourselves, we do, to name the file in the error.
    let (out, err): (std::process::Stdio, std::process::Stdio) = if run_as.is_some() {
        (std::process::Stdio::null(), std::process::Stdio::null())
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        let create = |p: &std::path::Path| {
            std::fs::OpenOptions::new()
                .create(true)
                // Appending: a file cut back at --output-cap then grows from its end. (The
                // standard library refuses truncate with append: the flag is given as is.)
                .append(true)
                .custom_flags(libc::O_TRUNC)
                .mode(0o600)
                .open(p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        let out = create(&files.out)?;
        let err = if files.merged {
            out.try_clone()?
        } else {
            create(&files.err)?
        };
        (out.into(), err.into())
    };
    let creds = run_as.cloned();
    let child_files = match run_as {
        Some(_) => Some((
            c_path(&files.out)?,
            if files.merged {
                None
            } else {
                Some(c_path(&files.err)?)
            },
        )),
        None => None,
    };
    let mut cmd = tokio::process::Command::new(&l.cmd[0]);
    cmd.args(&l.cmd[1..]);
    if let Some(env) = &l.io.env {
        // `--export`: the submitter's choice replaces the node manager's environment.
        cmd.env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    // PMI variables exported from a submitter that is itself a rank would point at a
    // descriptor this rank does not have.
    for k in [
        "PMI_FD",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_SPAWNED",
        cosched_monitor::ENV_RING,
        cosched_monitor::ENV_SLOT,
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(l.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("COSCHED_JOB_ID", l.job.0.to_string())
        .env("COSCHED_RANK", rank.to_string())
        .env("SLURM_PROCID", rank.to_string())
        .env("COSCHED_SIZE", l.size.to_string())
        .env("COSCHED_NODE", node_name)
        .env("COSCHED_PE", local_pe.to_string())
        .envs(monitor_env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    // PMI-1 for MPI programs (see crate::pmi); a descriptor below 3 would be taken by the
    // standard streams, so then the rank goes without.
    let pmi_fd = pmi_fd.filter(|&fd| fd > 2);
    if let Some(fd) = pmi_fd {
        cmd.env("PMI_FD", fd.to_string())
            .env("PMI_RANK", rank.to_string())
            .env("PMI_SIZE", l.size.to_string())
            .env("PMI_SPAWNED", "0");
    }
    // As another user, the rank enters its directory only once it is that user, so it gets
    // no further than the user could.
    let child_cwd = match run_as {
        Some(_) => Some(c_path(cwd)?),
        None => {
            cmd.current_dir(cwd);
            None
        }
    };
    let nm_pid = std::process::id();
    // SAFETY: only async-signal-safe calls (write, fcntl, prctl, getppid, sched_setaffinity,
    // setgroups, setgid, setuid, chdir, open, dup2) between fork and exec, on data prepared
    // before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // Into the job's cgroup first: whatever the rank starts is then in it too.
            if let Some(fd) = cgroup_procs {
                crate::contain::join_self(fd)?;
            }
            // The PMI socket is created close-on-exec, like every descriptor of the node
            // manager; only this rank's end is made to survive its exec.
            if let Some(fd) = pmi_fd
                && libc::fcntl(fd, libc::F_SETFD, 0) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            // Ranks run at normal priority whatever the node manager's.
            let normal = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal);
            libc::setpriority(libc::PRIO_PROCESS, 0, 0);
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            // The job's user: groups first, uid last (after it, no more changes are allowed).
            if let Some(c) = &creds
                && (libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0
                    || libc::setgid(c.gid) != 0
                    || libc::setuid(c.uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            // A rank must not outlive its node manager: a killed NM takes its processes along,
            // as a crashed node would. Set after the identity change, which clears it. A node
            // manager that died before this line sends no signal: then the rank is already
            // an orphan and must not run (the machine manager takes its job for lost when the
            // next node manager registers, and may start it elsewhere at once).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() as u32 != nm_pid {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(dir) = &child_cwd
                && libc::chdir(dir.as_ptr()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Output files created by the user, with the user's rights.
            if let Some((out, err)) = &child_files {
                let open = |p: &std::ffi::CString| {
                    let fd = libc::open(
                        p.as_ptr(),
                        libc::O_WRONLY
                            | libc::O_CREAT
                            | libc::O_TRUNC
                            | libc::O_APPEND
                            | libc::O_CLOEXEC,
                        0o600,
                    );
                    if fd < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(fd)
                    }
                };
                let o = open(out)?;
                let e = match err {
                    Some(p) => open(p)?,
                    None => o,
                };
                if libc::dup2(o, 1) < 0 || libc::dup2(e, 2) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        // Failed as the job's user: entering the directory, creating an output file or the
        // exec itself; say where.
        Err(e) if let Some(who) = run_as => Err(std::io::Error::new(
            e.kind(),
            format!(
                "{e} (as {} in {}, output {})",
                crate::util::user_name(who.uid),
                cwd.display(),
                files.out.display()
            ),
        )),
        r => r,
    }
}

fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// The CPUs this process may run on: PEs map onto them in order (modulo their number when a
/// node claims more PEs than the host has cores, as an embedded cluster does).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills a zeroed cpu_set_t of the size given.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            == 0;
    let cpus: Vec<usize> = if ok {
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    } else {
        Vec::new()
    };
    if cpus.is_empty() { vec![0] } else { cpus }
}

async fn try_register(mm: &str, key: &Key, reg: &Register) -> Result<RegisterReply, DaemonError> {
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
