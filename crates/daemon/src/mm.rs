//! The machine manager: the real-time driver of a job-level policy.
//!
//! It owns the job records (persisted in SQLite), the node list and the root of the tree.
//! Events from the world — a submission, a rank's exit reported up the tree, a timer, a node
//! that stopped answering heartbeats — are given to the policy (the very code the simulator
//! drives) and its decisions are carried out down the tree: Start/Place → launch (Place
//! launches stopped), Suspend/Preempt → SIGSTOP, Resume → SIGCONT, Kill → SIGKILL, all the
//! stops and continues of one policy step travelling as one multi-context-switch message.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::path::PathBuf;

use cosched_core::{Dur, JobId, MachineShape, NodeId, PeSet, Time};
use cosched_policy::{Decision, Event, JobRequest, Policy, PolicyConfig, registry};
use cosched_storm::{ChildEvent, Cmp, Cond, Dest, Key, Root, Up};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use crate::DaemonError;
use crate::db::{Db, NodeRow};
use crate::proto::*;
use crate::util::{now, write_atomic};

/// Estimate given to the policy for a job submitted without `--time`.
pub const DEFAULT_ESTIMATE: Dur = Dur::from_secs(86_400);

/// How the machine manager is set up.
#[derive(Clone, Debug)]
pub struct MmConfig {
    pub listen: String,
    pub nodes: u32,
    pub pes: u32,
    pub policy: String,
    pub mpl: Option<u32>,
    pub quantum: Option<Dur>,
    pub fanout: u32,
    /// Period of the liveness heartbeat down the tree.
    pub heartbeat: Dur,
    /// A node that has not answered for this long is marked down.
    pub dead_after: Dur,
    /// Requeue jobs lost with a node instead of failing them.
    pub requeue: bool,
    /// Where `mm.addr` and `mm.db` live.
    pub state_dir: PathBuf,
    pub key: Key,
}

impl MmConfig {
    pub fn new(state_dir: PathBuf, key: Key, nodes: u32, pes: u32) -> MmConfig {
        MmConfig {
            listen: "127.0.0.1:0".into(),
            nodes,
            pes,
            policy: "fcfs".into(),
            mpl: None,
            quantum: None,
            fanout: 8,
            heartbeat: Dur::from_millis(200),
            dead_after: Dur::from_millis(1_000),
            requeue: false,
            state_dir,
            key,
        }
    }
}

enum Incoming {
    Register(Register, oneshot::Sender<RegisterReply>),
    Client(Request, oneshot::Sender<Response>),
}

struct NodeEntry {
    row: NodeRow,
    addr: String,
    up: bool,
    last_seen: Time,
    /// Known from the database but not yet heard from since this machine manager started.
    awaiting: bool,
    /// The node manager process last registered (see [`Register::incarnation`]).
    incarnation: u64,
}

struct JobRt {
    info: JobInfo,
    pes: PeSet,
    launched: bool,
    /// What the policy last decided: run (Start/Resume) or not (Place/Suspend/Preempt).
    policy_running: bool,
    run_since: Option<Time>,
    stopped_since: Option<Time>,
    /// Why it will end once its processes are gone (set when the driver kills it).
    end_reason: Option<(JobState, String)>,
    /// Exit code per rank, `None` while it runs.
    ranks: BTreeMap<u32, Option<i32>>,
    /// The first non-zero exit code reported (the job's; the others may be our SIGKILLs).
    first_bad: Option<i32>,
}

impl JobRt {
    fn request(&self) -> JobRequest {
        let mut r = JobRequest::new(
            self.info.id,
            Time::from_micros(self.info.submit_us),
            self.info.procs,
            self.info
                .time_limit_us
                .map(Dur::from_micros)
                .unwrap_or(DEFAULT_ESTIMATE),
        );
        r.class = self.info.class.clone();
        r.user = self.info.user;
        r
    }
    fn nodes(&self) -> Vec<NodeId> {
        self.info.placement.iter().map(|p| p.node).collect()
    }
    fn node_of_rank(&self, rank: u32) -> Option<NodeId> {
        self.info
            .placement
            .iter()
            .find(|p| p.ranks.iter().any(|r| r.0 == rank))
            .map(|p| p.node)
    }
}

#[derive(Default)]
struct Switch {
    stop: Vec<JobId>,
    cont: Vec<JobId>,
    kill: Vec<JobId>,
    nodes: BTreeSet<NodeId>,
}

struct Mm {
    cfg: MmConfig,
    shape: MachineShape,
    db: Db,
    policy: Box<dyn Policy>,
    root: Root,
    nodes: Vec<NodeEntry>,
    jobs: BTreeMap<JobId, JobRt>,
    next_job: u64,
    timers: BinaryHeap<Reverse<(Time, u64)>>,
    last_now: Time,
    hb_seq: i64,
    next_hb: Time,
    hb_query: u64,
    grace_until: Option<Time>,
    next_req: u64,
    outputs: HashMap<u64, (oneshot::Sender<Response>, Time)>,
    switch: Switch,
    switches: u64,
    shutting_down: bool,
}

/// [`run`] on a fresh single-threaded runtime, for a command's main thread.
pub fn run_blocking(cfg: MmConfig) -> Result<(), DaemonError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(cfg))
}

/// Runs a machine manager until a client asks it to shut down.
pub async fn run(cfg: MmConfig) -> Result<(), DaemonError> {
    let listener = TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| DaemonError::Bind {
            addr: cfg.listen.clone(),
            cause: e,
        })?;
    let addr = listener.local_addr().map_err(DaemonError::Io)?;
    let (mut mm, mut up_rx) = Mm::open(cfg)?;
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    tokio::spawn(accept_loop(listener, mm.cfg.key.clone(), in_tx));
    write_atomic(
        &crate::StateDir::new(&mm.cfg.state_dir).addr_file(),
        &format!("{addr}\n"),
    )
    .map_err(DaemonError::Io)?;
    eprintln!("mm: running at {}", crate::util::raise_priority());
    eprintln!(
        "mm: listening on {addr}, policy {}, {} nodes × {} PEs",
        mm.cfg.policy, mm.cfg.nodes, mm.cfg.pes
    );
    loop {
        let wait = wake_duration(mm.next_wake());
        if wait < PRECISE_BELOW {
            // tokio's timers tick in whole milliseconds, which would stretch a 1 ms quantum
            // to about 2 ms: let the link tasks run, take what has arrived, and sleep the
            // exact remainder on this thread.
            tokio::task::yield_now().await;
            while let Ok(inc) = in_rx.try_recv() {
                mm.incoming(inc);
            }
            while let Ok(ev) = up_rx.try_recv() {
                mm.tree_event(ev);
            }
            let wait = wake_duration(mm.next_wake());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        } else {
            let sleep = tokio::time::sleep(wait - PRECISE_BELOW / 2);
            tokio::select! {
                Some(inc) = in_rx.recv() => mm.incoming(inc),
                Some(ev) = up_rx.recv() => mm.tree_event(ev),
                _ = sleep => {}
            }
        }
        mm.tick();
        if mm.shutting_down {
            // Let the shutdown message drain down the tree before the links close.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            return Ok(());
        }
    }
}

/// Waits shorter than this are slept precisely on the thread rather than with tokio's timer.
const PRECISE_BELOW: std::time::Duration = std::time::Duration::from_millis(2);

fn wake_duration(at: Time) -> std::time::Duration {
    let us = (at - now()).as_micros().clamp(0, 1_000_000);
    std::time::Duration::from_micros(us as u64)
}

async fn accept_loop(listener: TcpListener, key: Key, tx: mpsc::UnboundedSender<Incoming>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (key, tx) = (key.clone(), tx.clone());
        tokio::spawn(async move {
            let (mut rd, mut wr) = stream.into_split();
            let hello = tokio::time::timeout(
                cosched_storm::node::HANDSHAKE_TIMEOUT,
                cosched_storm::frame::read_frame::<_, Hello>(&mut rd, &key),
            )
            .await;
            let hello = match hello {
                Ok(Ok(h)) => h,
                // A connection closed before saying anything is a probe, not an attack.
                Ok(Err(cosched_storm::FrameError::Closed)) => return,
                Ok(Err(e)) => {
                    eprintln!("mm: dropping peer {peer}: {e}");
                    return;
                }
                Err(_) => {
                    eprintln!("mm: dropping peer {peer}: nothing sent");
                    return;
                }
            };
            match hello {
                Hello::Register(reg) => {
                    let (otx, orx) = oneshot::channel();
                    if tx.send(Incoming::Register(reg, otx)).is_err() {
                        return;
                    }
                    if let Ok(reply) = orx.await {
                        let _ = cosched_storm::frame::write_frame(&mut wr, &key, &reply).await;
                    }
                }
                Hello::Client(req) => {
                    let (otx, orx) = oneshot::channel();
                    if tx.send(Incoming::Client(req, otx)).is_err() {
                        return;
                    }
                    if let Ok(resp) = orx.await {
                        let _ = cosched_storm::frame::write_frame(&mut wr, &key, &resp).await;
                    }
                }
            }
        });
    }
}

impl Mm {
    fn open(cfg: MmConfig) -> Result<(Mm, mpsc::UnboundedReceiver<ChildEvent>), DaemonError> {
        if cfg.nodes == 0 || cfg.pes == 0 {
            return Err(DaemonError::Config(
                "--nodes and --pes must be at least 1".into(),
            ));
        }
        let shape = MachineShape::flat(cfg.nodes, cfg.pes);
        let mut pcfg = PolicyConfig::new(shape);
        pcfg.mpl = cfg.mpl;
        pcfg.quantum = cfg.quantum;
        pcfg.context_switch = Some(Dur::ZERO);
        let policy = registry::build(&cfg.policy, &pcfg)
            .map_err(|e| DaemonError::Config(format!("{e} (--policy)")))?;
        std::fs::create_dir_all(&cfg.state_dir).map_err(DaemonError::Io)?;
        let db = Db::open(&crate::StateDir::new(&cfg.state_dir).db_file())?;
        let (root, rx) = Root::new(cfg.key.clone(), cfg.fanout);
        let t = now();
        let mut mm = Mm {
            shape,
            policy,
            root,
            nodes: Vec::new(),
            jobs: BTreeMap::new(),
            next_job: db.max_job_id()?.0 + 1,
            timers: BinaryHeap::new(),
            last_now: t,
            hb_seq: 0,
            next_hb: t,
            hb_query: 0,
            grace_until: None,
            next_req: 1,
            outputs: HashMap::new(),
            switch: Switch::default(),
            switches: 0,
            shutting_down: false,
            db,
            cfg,
        };
        mm.recover(t)?;
        Ok((mm, rx))
    }

    /// Rebuilds state from the database: surviving jobs are announced to the policy first
    /// (the "hello"), then the queue, then every node is down until it registers again.
    fn recover(&mut self, t: Time) -> Result<(), DaemonError> {
        for row in self.db.nodes()? {
            if row.id.0 >= self.cfg.nodes || row.pes != self.cfg.pes {
                return Err(DaemonError::Config(format!(
                    "the database in {} is for another machine (node {} with {} PEs); start with matching --nodes/--pes or a fresh COSCHED_STATE_DIR",
                    self.cfg.state_dir.display(),
                    row.name,
                    row.pes
                )));
            }
            self.nodes.push(NodeEntry {
                row,
                addr: String::new(),
                up: false,
                last_seen: t,
                awaiting: true,
                incarnation: 0,
            });
        }
        let mut queued = Vec::new();
        let mut out = Vec::new();
        for info in self.db.jobs()? {
            let pes = parse_pes(&info.pes);
            let final_ = info.state.is_final();
            let mut rt = JobRt {
                ranks: BTreeMap::new(),
                first_bad: None,
                launched: !info.placement.is_empty() && !final_,
                policy_running: info.state == JobState::Running,
                run_since: (info.state == JobState::Running).then_some(t),
                stopped_since: (info.state == JobState::Suspended && info.start_us.is_some())
                    .then_some(t),
                end_reason: None,
                pes,
                info,
            };
            for p in &rt.info.placement {
                for &(rank, _) in &p.ranks {
                    rt.ranks.insert(rank, None);
                }
            }
            if !final_ {
                if rt.launched {
                    let since = Time::from_micros(rt.info.start_us.unwrap_or(rt.info.submit_us));
                    self.policy.handle(
                        t,
                        Event::Running {
                            job: rt.request(),
                            pes: rt.pes.clone(),
                            since,
                        },
                        &mut out,
                    );
                } else {
                    queued.push(rt.request());
                }
            }
            self.jobs.insert(rt.info.id, rt);
        }
        if !self.jobs.is_empty() || !self.nodes.is_empty() {
            self.grace_until = Some(t + self.cfg.dead_after * 3 + Dur::from_secs(2));
            eprintln!(
                "mm: recovered {} jobs and {} nodes from the database",
                self.jobs.len(),
                self.nodes.len()
            );
        }
        for job in queued {
            self.policy.handle(t, Event::Submitted(job), &mut out);
        }
        for n in 0..self.cfg.nodes {
            self.policy.handle(t, Event::NodeDown(NodeId(n)), &mut out);
        }
        self.apply(t, out);
        Ok(())
    }

    fn clock(&mut self) -> Time {
        self.last_now = self.last_now.max(now());
        self.last_now
    }

    fn next_wake(&self) -> Time {
        let mut w = self.next_hb;
        if let Some(Reverse((t, _))) = self.timers.peek() {
            w = w.min(*t);
        }
        if let Some(g) = self.grace_until {
            w = w.min(g);
        }
        for j in self.jobs.values() {
            if let (Some(since), Some(limit)) = (j.run_since, j.info.time_limit_us)
                && j.end_reason.is_none()
            {
                w = w.min(since + Dur::from_micros(limit - j.info.run_us));
            }
        }
        for (_, deadline) in self.outputs.values() {
            w = w.min(*deadline);
        }
        w
    }

    fn handle(&mut self, t: Time, ev: Event) {
        let mut out = Vec::new();
        self.policy.handle(t, ev, &mut out);
        self.apply(t, out);
    }

    /// Periodic work: timers, time limits, heartbeats and failure detection.
    fn tick(&mut self) {
        let t = self.clock();
        while let Some(Reverse((at, token))) = self.timers.peek().copied() {
            if at > t {
                break;
            }
            self.timers.pop();
            self.handle(t, Event::Timer(token));
        }
        let over: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| j.end_reason.is_none())
            .filter(|j| match (j.run_since, j.info.time_limit_us) {
                (Some(since), Some(limit)) => j.info.run_us + (t - since).as_micros() >= limit,
                _ => false,
            })
            .map(|j| j.info.id)
            .collect();
        for id in over {
            let limit = Dur::from_micros(self.jobs[&id].info.time_limit_us.unwrap_or(0));
            self.kill(
                t,
                id,
                JobState::TimedOut,
                format!("ran for its time limit of {limit}"),
            );
        }
        if t >= self.next_hb {
            self.heartbeat(t);
        }
        if self.grace_until.is_some_and(|g| t >= g) {
            self.grace_until = None;
            let awaiting: Vec<NodeId> = self
                .nodes
                .iter()
                .filter(|n| n.awaiting)
                .map(|n| n.row.id)
                .collect();
            for n in awaiting {
                self.nodes[n.0 as usize].awaiting = false;
                self.fail_jobs_on(
                    t,
                    n,
                    "its node did not come back after the machine manager restarted",
                );
            }
        }
        let expired: Vec<u64> = self
            .outputs
            .iter()
            .filter(|(_, (_, d))| *d <= t)
            .map(|(k, _)| *k)
            .collect();
        for k in expired {
            if let Some((tx, _)) = self.outputs.remove(&k) {
                let _ = tx.send(Response::Error(
                    "the node holding that output did not answer in 5 s".into(),
                ));
            }
        }
        self.flush_switch();
    }

    fn heartbeat(&mut self, t: Time) {
        self.hb_seq += 1;
        self.next_hb = t + self.cfg.heartbeat;
        let payload =
            postcard::to_stdvec(&ToNode::Heartbeat { seq: self.hb_seq }).expect("encodes");
        self.root
            .xfer(&Dest::All, Some((VAR_HEARTBEAT, self.hb_seq)), payload);
        self.hb_query = self.root.compare(
            &Dest::All,
            Cond {
                var: VAR_HEARTBEAT,
                cmp: Cmp::Ge,
                value: self.hb_seq,
            },
        );
        let dead: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.up && t - n.last_seen > self.cfg.dead_after)
            .map(|n| n.row.id)
            .collect();
        for n in dead {
            let name = self.nodes[n.0 as usize].row.name.clone();
            eprintln!(
                "mm: node {name} ({n}) missed heartbeats for {}; marking it down",
                self.cfg.dead_after
            );
            self.nodes[n.0 as usize].up = false;
            self.handle(t, Event::NodeDown(n));
            self.fail_jobs_on(t, n, &format!("node {name} stopped answering heartbeats"));
            self.announce_topology(t);
        }
    }

    fn announce_topology(&mut self, t: Time) {
        let members: Vec<(NodeId, String)> = self
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| (n.row.id, n.addr.clone()))
            .collect();
        self.root.set_members(t.as_micros() as u64, members);
    }

    /// Ends (or requeues) every live job with processes on `node`.
    fn fail_jobs_on(&mut self, t: Time, node: NodeId, why: &str) {
        let hit: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| !j.info.state.is_final() && j.launched && j.nodes().contains(&node))
            .map(|j| j.info.id)
            .collect();
        for id in hit {
            let others: Vec<NodeId> = self.jobs[&id]
                .nodes()
                .into_iter()
                .filter(|n| *n != node)
                .collect();
            self.switch.kill.push(id);
            self.switch.nodes.extend(others.iter().copied());
            if self.cfg.requeue {
                self.requeue(t, id, why);
            } else {
                let j = self.jobs.get_mut(&id).expect("listed");
                j.end_reason = Some((JobState::NodeFailed, why.to_string()));
                self.finish(t, id);
            }
        }
    }

    fn requeue(&mut self, t: Time, id: JobId, why: &str) {
        eprintln!("mm: requeueing job {id}: {why}");
        let nodes = self.jobs[&id].nodes();
        self.forget_on(id, nodes);
        let j = self.jobs.get_mut(&id).expect("exists");
        j.launched = false;
        j.policy_running = false;
        j.run_since = None;
        j.stopped_since = None;
        j.ranks.clear();
        j.first_bad = None;
        j.info.placement.clear();
        j.info.pes.clear();
        j.info.state = JobState::Queued;
        j.info.error = Some(format!("requeued: {why}"));
        let req = j.request();
        self.persist(id);
        self.handle(t, Event::Ended(id));
        self.handle(t, Event::Submitted(req));
    }

    fn persist(&self, id: JobId) {
        if let Some(j) = self.jobs.get(&id)
            && let Err(e) = self.db.put_job(&j.info)
        {
            eprintln!("mm: could not persist job {id}: {e}");
        }
    }

    fn apply(&mut self, t: Time, decisions: Vec<Decision>) {
        for d in decisions {
            match d {
                Decision::Start { job, pes, .. } => self.start(t, job, pes, false),
                Decision::Place { job, pes, .. } => self.start(t, job, pes, true),
                Decision::Suspend { job } | Decision::Preempt { job } => {
                    self.set_policy_running(t, job, false)
                }
                Decision::Resume { job } => self.set_policy_running(t, job, true),
                Decision::Kill { job } => {
                    self.kill(t, job, JobState::Cancelled, "killed by the policy".into())
                }
                Decision::Reject { job, why } => self.kill(
                    t,
                    job,
                    JobState::Cancelled,
                    format!("it can never run on this machine: {why}"),
                ),
                Decision::SetTimer { at, token } => self.timers.push(Reverse((at, token))),
            }
        }
    }

    fn start(&mut self, t: Time, id: JobId, pes: PeSet, stopped: bool) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.info.state.is_final() {
            return;
        }
        if j.launched {
            if j.pes == pes {
                self.set_policy_running(t, id, !stopped);
                return;
            }
            // Restarted on other PEs (after a preemption): no checkpoints, so start afresh.
            let nodes = j.nodes();
            self.switch.kill.push(id);
            self.switch.nodes.extend(nodes.iter().copied());
            self.flush_switch();
            self.forget_on(id, nodes);
        }
        let j = self.jobs.get_mut(&id).expect("exists");
        let per = self.shape.pes_per_node();
        let mut placement: Vec<Placement> = Vec::new();
        j.ranks.clear();
        for (rank, pe) in pes.iter().enumerate() {
            let node = NodeId(pe.0 / per);
            if placement.last().map(|p| p.node) != Some(node) {
                placement.push(Placement {
                    node,
                    ranks: Vec::new(),
                });
            }
            placement
                .last_mut()
                .expect("pushed")
                .ranks
                .push((rank as u32, pe.0 % per));
            j.ranks.insert(rank as u32, None);
        }
        j.info.placement = placement.clone();
        j.info.pes = pes.to_string();
        j.pes = pes;
        j.launched = true;
        j.policy_running = !stopped;
        if stopped {
            j.info.state = JobState::Suspended;
        } else {
            j.info.state = JobState::Running;
            j.run_since = Some(t);
            j.info.start_us.get_or_insert(t.as_micros());
        }
        let launch = launch_of(j, stopped);
        let dest = Dest::nodes(placement.iter().map(|p| p.node).collect());
        self.root.xfer(
            &dest,
            None,
            postcard::to_stdvec(&ToNode::Launch(launch)).expect("encodes"),
        );
        self.persist(id);
        if self.jobs[&id].info.held {
            self.sync_run(t, id);
        }
    }

    fn set_policy_running(&mut self, t: Time, id: JobId, run: bool) {
        if let Some(j) = self.jobs.get_mut(&id) {
            j.policy_running = run;
            self.sync_run(t, id);
        }
    }

    /// Makes the processes' state match what the policy and the user want, and accounts for
    /// run time and suspended time.
    fn sync_run(&mut self, t: Time, id: JobId) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if !j.launched || j.info.state.is_final() || j.end_reason.is_some() {
            return;
        }
        let want = j.policy_running && !j.info.held;
        let nodes = j.nodes();
        match (want, j.run_since) {
            (true, None) => {
                j.run_since = Some(t);
                if let Some(s) = j.stopped_since.take() {
                    j.info.suspended_us += (t - s).as_micros();
                }
                j.info.start_us.get_or_insert(t.as_micros());
                j.info.state = JobState::Running;
                self.switch.cont.push(id);
            }
            (false, Some(since)) => {
                j.info.run_us += (t - since).as_micros();
                j.run_since = None;
                j.stopped_since = Some(t);
                j.info.state = JobState::Suspended;
                self.switch.stop.push(id);
            }
            _ => return,
        }
        self.switch.nodes.extend(nodes);
        // Time-slicing switches are not written through (up to 2000 a second at a 1 ms
        // quantum); the next state change, end or user action writes the record.
        if self.jobs[&id].info.held {
            self.persist(id);
        }
    }

    fn flush_switch(&mut self) {
        if self.switch.stop.is_empty() && self.switch.cont.is_empty() && self.switch.kill.is_empty()
        {
            return;
        }
        let s = std::mem::take(&mut self.switch);
        self.switches += 1;
        let dest = Dest::nodes(s.nodes.into_iter().collect());
        let msg = ToNode::Switch {
            stop: s.stop,
            cont: s.cont,
            kill: s.kill,
        };
        self.root
            .xfer(&dest, None, postcard::to_stdvec(&msg).expect("encodes"));
    }

    fn forget_on(&mut self, id: JobId, nodes: Vec<NodeId>) {
        if !nodes.is_empty() {
            let msg = ToNode::Forget { jobs: vec![id] };
            self.root.xfer(
                &Dest::nodes(nodes),
                None,
                postcard::to_stdvec(&msg).expect("encodes"),
            );
        }
    }

    /// Stops a job for good: at once if it has no processes, else once they are reported gone.
    fn kill(&mut self, t: Time, id: JobId, state: JobState, why: String) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.info.state.is_final() {
            return;
        }
        if j.end_reason.is_none() {
            j.end_reason = Some((state, why));
        }
        if j.launched {
            // Its run time stops counting now.
            if let Some(since) = j.run_since.take() {
                j.info.run_us += (t - since).as_micros();
            }
            let nodes = j.nodes();
            self.switch.kill.push(id);
            self.switch.nodes.extend(nodes);
        } else {
            self.finish(t, id);
        }
    }

    /// Records a job's end and tells the policy.
    fn finish(&mut self, t: Time, id: JobId) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.info.state.is_final() {
            return;
        }
        if let Some(since) = j.run_since.take() {
            j.info.run_us += (t - since).as_micros();
        }
        if let Some(s) = j.stopped_since.take() {
            j.info.suspended_us += (t - s).as_micros();
        }
        let first_bad = j.first_bad;
        let all_reported = j.ranks.values().all(|c| c.is_some());
        j.info.exit_code = if j.launched && all_reported {
            Some(first_bad.unwrap_or(0))
        } else {
            first_bad
        };
        let (state, error) = match j.end_reason.take() {
            Some((s, why)) => (s, Some(why)),
            None if first_bad.is_none() => (JobState::Completed, None),
            None => (
                JobState::Failed,
                Some(format!("exited with code {}", first_bad.unwrap_or(-1))),
            ),
        };
        j.info.state = state;
        if error.is_some() {
            j.info.error = error;
        }
        j.info.end_us = Some(t.as_micros());
        let nodes = if j.launched { j.nodes() } else { Vec::new() };
        j.launched = false;
        self.persist(id);
        self.forget_on(id, nodes);
        self.handle(t, Event::Ended(id));
    }

    fn rank_exit(&mut self, t: Time, id: JobId, exit: RankExit) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.info.state.is_final() || !j.ranks.contains_key(&exit.rank) {
            return;
        }
        let code = exit.code.unwrap_or(-1);
        j.ranks.insert(exit.rank, Some(code));
        if code != 0 && j.first_bad.is_none() {
            j.first_bad = Some(code);
        }
        if let Some(err) = exit.error {
            j.info.error = Some(format!("rank {}: {err}", exit.rank));
            if j.end_reason.is_none() {
                j.end_reason = Some((JobState::Failed, format!("rank {}: {err}", exit.rank)));
            }
        }
        let done = j.ranks.values().all(|c| c.is_some());
        if code != 0 && !done && j.end_reason.is_none() {
            let why = format!(
                "rank {} exited with code {code}; the other ranks were killed",
                exit.rank
            );
            self.kill(t, id, JobState::Failed, why);
        } else if code != 0 && !done {
            let nodes = j.nodes();
            self.switch.kill.push(id);
            self.switch.nodes.extend(nodes);
        }
        if done {
            self.finish(t, id);
        }
    }

    fn tree_event(&mut self, ev: ChildEvent) {
        let t = self.clock();
        match ev {
            ChildEvent::Lost { node, conn } => {
                self.root.lost(node, conn);
            }
            ChildEvent::Up {
                msg: Up::Answer { id: _, from, holds },
                ..
            } => {
                if holds && let Some(n) = self.nodes.get_mut(from.0 as usize) {
                    n.last_seen = t;
                }
            }
            ChildEvent::Up {
                msg: Up::Signal { from, payload },
                ..
            } => {
                if let Some(n) = self.nodes.get_mut(from.0 as usize) {
                    n.last_seen = t;
                }
                match postcard::from_bytes::<FromNode>(&payload) {
                    Ok(FromNode::Exited { job, exit }) => self.rank_exit(t, job, exit),
                    Ok(FromNode::Output {
                        req,
                        found,
                        stdout,
                        stderr,
                    }) => {
                        if let Some((tx, _)) = self.outputs.remove(&req) {
                            let _ = tx.send(if found {
                                Response::Output { stdout, stderr }
                            } else {
                                Response::Error(format!(
                                    "node {from} has no output files for that rank"
                                ))
                            });
                        }
                    }
                    Err(e) => eprintln!("mm: undecodable report from node {from}: {e}"),
                }
            }
        }
        self.flush_switch();
    }

    fn incoming(&mut self, inc: Incoming) {
        let t = self.clock();
        match inc {
            Incoming::Register(reg, reply) => {
                let (answer, exits) = self.register(t, reg);
                let _ = reply.send(answer);
                for (job, exit) in exits {
                    self.rank_exit(t, job, exit);
                }
            }
            Incoming::Client(req, reply) => {
                if let Some(resp) = self.client(t, req, reply) {
                    let _ = resp.0.send(resp.1);
                }
            }
        }
        self.flush_switch();
    }

    fn register(&mut self, t: Time, reg: Register) -> (RegisterReply, Vec<(JobId, RankExit)>) {
        if reg.pes != self.cfg.pes {
            return (
                RegisterReply::Rejected(format!(
                    "node {} offers {} PEs but this machine has {} per node; start it with --pes {}",
                    reg.name, reg.pes, self.cfg.pes, self.cfg.pes
                )),
                Vec::new(),
            );
        }
        let idx = match self.nodes.iter().position(|n| n.row.name == reg.name) {
            Some(i) => i,
            None => {
                if self.nodes.len() as u32 >= self.cfg.nodes {
                    return (
                        RegisterReply::Rejected(format!(
                            "the machine is full: {} nodes configured (--nodes) and node {} is not one of them",
                            self.cfg.nodes, reg.name
                        )),
                        Vec::new(),
                    );
                }
                let row = NodeRow {
                    id: NodeId(self.nodes.len() as u32),
                    name: reg.name.clone(),
                    pes: reg.pes,
                };
                if let Err(e) = self.db.put_node(&row) {
                    eprintln!("mm: could not persist node {}: {e}", reg.name);
                }
                self.nodes.push(NodeEntry {
                    row,
                    addr: String::new(),
                    up: false,
                    last_seen: t,
                    awaiting: false,
                    incarnation: 0,
                });
                self.nodes.len() - 1
            }
        };
        let id = self.nodes[idx].row.id;
        let was_up = self.nodes[idx].up;
        {
            let n = &mut self.nodes[idx];
            n.addr = reg.addr.clone();
            n.up = true;
            n.last_seen = t;
            n.awaiting = false;
        }
        if !was_up {
            eprintln!("mm: node {} ({id}) is up at {}", reg.name, reg.addr);
            self.handle(t, Event::NodeUp(id));
        }
        // Reconcile the jobs this node holds with what this machine manager believes.
        let mut drop_jobs = Vec::new();
        let mut exits = Vec::new();
        let held: HashMap<JobId, &HeldJob> = reg.jobs.iter().map(|h| (h.job, h)).collect();
        for h in &reg.jobs {
            match self.jobs.get(&h.job) {
                Some(j) if !j.info.state.is_final() && j.launched && j.nodes().contains(&id) => {
                    exits.extend(
                        h.ranks
                            .iter()
                            .filter(|r| r.code.is_some())
                            .map(|r| (h.job, r.clone())),
                    );
                }
                _ => drop_jobs.push(h.job),
            }
        }
        let same_process = self.nodes[idx].incarnation == reg.incarnation;
        self.nodes[idx].incarnation = reg.incarnation;
        let lost: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| !j.info.state.is_final() && j.launched && j.nodes().contains(&id))
            .filter(|j| !held.contains_key(&j.info.id))
            .map(|j| j.info.id)
            .collect();
        for job in lost {
            if same_process {
                // The launch was in flight when the node lost its parent: send it again.
                let j = &self.jobs[&job];
                let launch = launch_of(j, j.run_since.is_none());
                let msg = postcard::to_stdvec(&ToNode::Launch(launch)).expect("encodes");
                self.root.xfer(&Dest::nodes(vec![id]), None, msg);
                continue;
            }
            let why = format!("its processes on node {} were lost", reg.name);
            let nodes = self.jobs[&job].nodes();
            self.switch.kill.push(job);
            self.switch.nodes.extend(nodes);
            self.jobs.get_mut(&job).expect("listed").end_reason = Some((JobState::Failed, why));
            self.finish(t, job);
        }
        self.announce_topology(t);
        (
            RegisterReply::Accepted {
                node: id,
                heartbeat_us: self.cfg.heartbeat.as_micros(),
                drop_jobs,
            },
            exits,
        )
    }

    /// Answers a client; returns the reply channel with the answer, or `None` when the answer
    /// will come later (output fetched from a node).
    fn client(
        &mut self,
        t: Time,
        req: Request,
        reply: oneshot::Sender<Response>,
    ) -> Option<(oneshot::Sender<Response>, Response)> {
        let unknown = |id: JobId| {
            Response::Error(format!(
                "unknown job id {id}; `cosched queue --all` lists the jobs"
            ))
        };
        let resp = match req {
            Request::Submit(s) => self.submit(t, s),
            Request::Jobs { ids } => {
                if ids.is_empty() {
                    Response::Jobs(self.jobs.values().map(|j| j.info.clone()).collect())
                } else if let Some(bad) = ids.iter().find(|i| !self.jobs.contains_key(i)) {
                    unknown(*bad)
                } else {
                    Response::Jobs(ids.iter().map(|i| self.jobs[i].info.clone()).collect())
                }
            }
            Request::Cancel(id) => match self.jobs.get(&id) {
                None => unknown(id),
                Some(j) if j.info.state.is_final() => Response::Error(format!(
                    "job {id} has already ended ({})",
                    j.info.state.as_str()
                )),
                Some(_) => {
                    self.kill(t, id, JobState::Cancelled, "cancelled by a user".into());
                    Response::Done
                }
            },
            Request::Suspend(id) | Request::Resume(id) => {
                let hold = matches!(req, Request::Suspend(_));
                match self.jobs.get_mut(&id) {
                    None => unknown(id),
                    Some(j) if j.info.state.is_final() => Response::Error(format!(
                        "job {id} has already ended ({})",
                        j.info.state.as_str()
                    )),
                    Some(j) => {
                        if j.info.held != hold {
                            j.info.held = hold;
                            self.handle(
                                t,
                                if hold {
                                    Event::Held(id)
                                } else {
                                    Event::Released(id)
                                },
                            );
                            self.sync_run(t, id);
                            self.persist(id);
                        }
                        Response::Done
                    }
                }
            }
            Request::Status => Response::Status(self.status()),
            Request::Output { job, rank } => match self.jobs.get(&job) {
                None => unknown(job),
                Some(j) if rank >= j.info.procs => Response::Error(format!(
                    "job {job} has ranks 0..{}; --rank {rank} is out of range",
                    j.info.procs
                )),
                Some(j) => match j.node_of_rank(rank) {
                    None => Response::Error(format!("job {job} never ran, so it has no output")),
                    Some(node) if !self.nodes[node.0 as usize].up => Response::Error(format!(
                        "rank {rank} of job {job} ran on node {}, which is down; its files stay in that node's work directory",
                        self.nodes[node.0 as usize].row.name
                    )),
                    Some(node) => {
                        let req = self.next_req;
                        self.next_req += 1;
                        let msg = ToNode::FetchOutput { req, job, rank };
                        self.root.xfer(
                            &Dest::nodes(vec![node]),
                            None,
                            postcard::to_stdvec(&msg).expect("encodes"),
                        );
                        self.outputs.insert(req, (reply, t + Dur::from_secs(5)));
                        return None;
                    }
                },
            },
            Request::Shutdown => {
                let live: Vec<JobId> = self
                    .jobs
                    .values()
                    .filter(|j| !j.info.state.is_final())
                    .map(|j| j.info.id)
                    .collect();
                for id in live {
                    self.kill(
                        t,
                        id,
                        JobState::Cancelled,
                        "the cluster was shut down".into(),
                    );
                    let j = self.jobs.get_mut(&id).expect("listed");
                    j.end_reason
                        .get_or_insert((JobState::Cancelled, "the cluster was shut down".into()));
                    self.finish(t, id);
                }
                self.flush_switch();
                self.root.xfer(
                    &Dest::All,
                    None,
                    postcard::to_stdvec(&ToNode::Shutdown).expect("encodes"),
                );
                self.shutting_down = true;
                Response::Done
            }
        };
        Some((reply, resp))
    }

    fn submit(&mut self, t: Time, s: SubmitRequest) -> Response {
        let total = self.shape.total_pes();
        if s.procs == 0 {
            return Response::Error("a job needs at least 1 PE (-n)".into());
        }
        if s.procs > total {
            return Response::Error(format!(
                "job asks for {} PEs but the machine has only {total} ({} nodes × {} PEs); ask for at most -n {total}",
                s.procs, self.cfg.nodes, self.cfg.pes
            ));
        }
        if s.cmd.is_empty() {
            return Response::Error("no command given: put it after `--`".into());
        }
        if s.time_limit_us.is_some_and(|l| l <= 0) {
            return Response::Error("--time must be positive".into());
        }
        let id = JobId(self.next_job);
        self.next_job += 1;
        let info = JobInfo {
            id,
            name: s.name.unwrap_or_else(|| {
                std::path::Path::new(&s.cmd[0])
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            class: s.class,
            user: s.user,
            procs: s.procs,
            time_limit_us: s.time_limit_us,
            cmd: s.cmd,
            cwd: s.cwd,
            state: JobState::Queued,
            submit_us: t.as_micros(),
            start_us: None,
            end_us: None,
            suspended_us: 0,
            run_us: 0,
            pes: String::new(),
            placement: Vec::new(),
            exit_code: None,
            error: None,
            held: false,
        };
        let rt = JobRt {
            info,
            pes: PeSet::new(),
            launched: false,
            policy_running: false,
            run_since: None,
            stopped_since: None,
            end_reason: None,
            ranks: BTreeMap::new(),
            first_bad: None,
        };
        let req = rt.request();
        self.jobs.insert(id, rt);
        self.persist(id);
        self.handle(t, Event::Submitted(req));
        Response::Submitted(id)
    }

    fn status(&self) -> StatusInfo {
        let total = self.shape.total_pes() as usize;
        let (slots, active) = match self.policy.matrix() {
            Some(m) => {
                let slots = m
                    .slots
                    .iter()
                    .map(|s| {
                        let mut row = vec![None; total];
                        for (job, pes) in &s.jobs {
                            for pe in pes.iter() {
                                if let Some(c) = row.get_mut(pe.0 as usize) {
                                    *c = Some(*job);
                                }
                            }
                        }
                        row
                    })
                    .collect();
                (slots, m.active)
            }
            None => {
                let mut row = vec![None; total];
                for j in self
                    .jobs
                    .values()
                    .filter(|j| j.launched && !j.info.state.is_final())
                {
                    for pe in j.pes.iter() {
                        row[pe.0 as usize] = Some(j.info.id);
                    }
                }
                (vec![row], Some(0))
            }
        };
        let mut running = vec![None; total];
        for j in self.jobs.values().filter(|j| j.run_since.is_some()) {
            for pe in j.pes.iter() {
                running[pe.0 as usize] = Some(j.info.id);
            }
        }
        let mut nodes: Vec<NodeInfo> = self
            .nodes
            .iter()
            .map(|n| NodeInfo {
                id: n.row.id,
                name: n.row.name.clone(),
                state: if n.up { "up".into() } else { "down".into() },
                addr: n.addr.clone(),
                pes: n.row.pes,
            })
            .collect();
        for i in self.nodes.len() as u32..self.cfg.nodes {
            nodes.push(NodeInfo {
                id: NodeId(i),
                name: format!("(unregistered {i})"),
                state: "down".into(),
                addr: String::new(),
                pes: self.cfg.pes,
            });
        }
        StatusInfo {
            policy: self.cfg.policy.clone(),
            nodes_total: self.cfg.nodes,
            pes_per_node: self.cfg.pes,
            fanout: self.cfg.fanout,
            tree_depth: self.root.topology().depth(),
            nodes,
            slots,
            active_slot: active,
            running,
            switches: self.switches,
        }
    }
}

fn launch_of(j: &JobRt, stopped: bool) -> Launch {
    Launch {
        job: j.info.id,
        size: j.info.procs,
        cmd: j.info.cmd.clone(),
        cwd: j.info.cwd.clone(),
        env: vec![("COSCHED_JOB_NAME".into(), j.info.name.clone())],
        stopped,
        placement: j.info.placement.clone(),
    }
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
