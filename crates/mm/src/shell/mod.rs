//! The shell around the core: the system clock, the tokio event loop, client and node
//! connections, the storm tree and SQLite. It drains everything that has arrived, hands it to
//! the core with one clock reading, steps the core once and carries out its effects.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use cosched_core::Time;
use cosched_policy::{PolicyConfig, PolicyOptions, registry};
use cosched_storm::accept::{Admission, DropLog, FirstFrameError, accept};
use cosched_storm::frame::MAX_HELLO;
use cosched_storm::{Cmp, Cond, Dest, Key, Keyring, Keys, Root, RootEvent};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use super::MmConfig;
use super::core::{Core, CoreConfig, Effect, Input, Recovered, ReqId};
use super::nodes::NodeTable;
use super::replays::{Replays, forgotten_before};
use super::store::Store;
use crate::db::Db;
use cosched_proto::DaemonError;
use cosched_proto::proto::*;
use cosched_proto::user_key::Credential;
use cosched_proto::util::{now, write_atomic};

mod listener;
use listener::*;

/// A connection waiting for its answer.
enum Waiting {
    Client(oneshot::Sender<Response>),
    Register(oneshot::Sender<RegisterReply>),
}

enum Incoming {
    /// With the stamp its frame carried: its nonce is kept in the database.
    Register(Register, Stamp, oneshot::Sender<RegisterReply>),
    /// With the stamp its frame carried: the nonce of a change is written with it.
    Client(Request, Caller, Stamp, oneshot::Sender<Response>),
    /// The web dashboard asks what to show; answered at once, the core untouched.
    Dashboard(oneshot::Sender<crate::dashboard::Snapshot>),
    /// SIGHUP: read the configuration again, as `cosched reconfigure` asks.
    Hangup,
}

/// Why a machine manager stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Shut down (`cosched cluster down`, `Request::Shutdown`): every job was ended.
    Shutdown,
    /// To start again on its new configuration (`cosched reconfigure`, SIGHUP): its jobs
    /// keep running on the node managers, which register with the new machine manager as
    /// after any restart, and its database carries the accounting over.
    Reconfigure,
}

pub(super) struct Shell {
    pub(super) core: Core,
    store: Store,
    pub(super) root: Root,
    waiting: HashMap<ReqId, Waiting>,
    next_req: ReqId,
    last_now: Time,
    /// The running file broadcast (super::bcast), the last one that failed (its client's
    /// next request gets the reason), and the id the next one gets at least.
    pub(super) bcast: Option<super::bcast::Transfer>,
    pub(super) bcast_failed: Option<(u32, String)>,
    pub(super) bcast_next: u32,
    /// How long a heartbeat's COMPARE may wait for the tree's combined answer.
    heartbeat_budget: std::time::Duration,
    /// The configuration file and the nodes it named at start-up (see [`Shell::reconfigure`]).
    config: Option<std::path::PathBuf>,
    names: Vec<String>,
    /// A reconfiguration was accepted: the machine manager restarts once it is answered.
    restart: bool,
    /// Users' credential serials, shared with the listeners that check them.
    creds: Credentials,
    /// The cluster keys, shared with the tree's root and the TCP listener; the key file
    /// and the rotation under way (super::rekey).
    pub(super) keys: Keyring,
    pub(super) key_file: Option<std::path::PathBuf>,
    pub(super) rotation: Option<super::rekey::Rotation>,
}

/// Each user's credential serial and expiry, by uid (see [`crate::user_key`]).
type Credentials = Arc<Mutex<BTreeMap<u32, Credential>>>;

/// [`run`] on a fresh single-threaded runtime, for a command's main thread.
pub fn run_blocking(cfg: MmConfig) -> Result<Exit, DaemonError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(cfg))
}

/// The policy a machine manager runs: built from the shared options, on a machine of
/// `nodes` × `pes` PEs, with migration off (a stopped process cannot move).
///
/// The machine is `flat(nodes, pes)`: PEs are numbered node by node, so a policy that packs
/// jobs onto whole nodes sees the nodes. (The simulator's machine is `flat(procs, 1)`: a
/// trace gives only a PE count, and every PE is its own node there.)
pub fn build_policy(
    policy: &str,
    nodes: u32,
    pes: u32,
    options: &PolicyOptions,
) -> Result<Box<dyn cosched_policy::Policy>, DaemonError> {
    let pcfg = policy_config(nodes, pes, options)?;
    registry::build(policy, &pcfg).map_err(|e| DaemonError::Config(format!("{e} (--policy)")))
}

/// The configuration [`build_policy`] hands the policy (apart so a test can check it).
pub fn policy_config(
    nodes: u32,
    pes: u32,
    options: &PolicyOptions,
) -> Result<PolicyConfig, DaemonError> {
    let shape = cosched_core::MachineShape::flat(nodes.max(1), pes.max(1));
    let mut pcfg: PolicyConfig = cosched_policy::policy_config(shape, options)
        .map_err(|e| DaemonError::Config(e.to_string()))?;
    pcfg.migration = false;
    // Context switches cost what they cost on real nodes; the policy adds nothing.
    pcfg.context_switch.get_or_insert(cosched_core::Dur::ZERO);
    Ok(pcfg)
}

/// Runs a machine manager until a client asks it to shut down.
pub async fn run(cfg: MmConfig) -> Result<Exit, DaemonError> {
    // Every broadcast chunk passes through a few buffers of its size here.
    cosched_proto::bcast::keep_freed_buffers();
    let state = cosched_proto::StateDir::new(&cfg.state_dir);
    let listener = listen(&cfg.listen, &state).await?;
    let addr = listener.local_addr().map_err(DaemonError::Io)?;
    state.create()?;
    // Everything the machine manager creates is its own: the database (every job's command
    // and environment), its WAL and shared-memory files, the socket's directory entries.
    // SAFETY: umask(2) cannot fail.
    unsafe { libc::umask(0o077) };
    let db = Db::open(&state.db_file())?;
    private_db_files(&state);
    let creds: Credentials = Arc::new(Mutex::new(db.credentials()?));
    let recovered = Recovered {
        nodes: db.nodes()?,
        jobs: db.jobs()?,
        admin: db.node_admin()?,
    };
    // The machine grows and shrinks with the configuration: the policy is built for the
    // nodes the core will have.
    let machine = NodeTable::new(
        cfg.settings.nodes,
        cfg.settings.pes,
        &cfg.settings.names,
        recovered.nodes.clone(),
    )
    .map_err(|why| DaemonError::Config(format!("{}: {why}", state.db_file().display())))?;
    let policy = build_policy(
        &cfg.settings.policy,
        machine.size,
        cfg.settings.pes,
        &cfg.settings.policy_options,
    )?;
    let t = now();
    let replays = Arc::new(Mutex::new(Replays::restored(
        db.nonces(forgotten_before(t.as_micros()))?,
    )));
    let core_cfg = CoreConfig {
        nodes: cfg.settings.nodes,
        pes: cfg.settings.pes,
        names: cfg.settings.names.clone(),
        fanout: cfg.settings.fanout,
        heartbeat: cfg.settings.heartbeat,
        suspect_after: cfg.settings.suspect_after,
        down_after: cfg.settings.down_after,
        requeue: cfg.settings.requeue,
        kill_wait: cfg.settings.kill_wait,
        hold_pes_while_completing: true,
        keep_jobs: cfg.settings.keep_jobs,
    };
    let mut core = Core::new(core_cfg, policy, t, recovered)
        .map_err(|why| DaemonError::Config(format!("{}: {why}", state.db_file().display())))?;
    core.set_partitions(cfg.settings.partitions.clone());
    let keys = Keyring::new(super::rekey::load_keys(
        cfg.key.clone(),
        cfg.key_file.as_deref(),
        t.as_micros(),
    ));
    if let Some((_, until)) = keys.keys().previous(t.as_micros()) {
        tracing::info!(
            "mm: the previous cluster key is accepted until {}",
            cosched_proto::util::utc_us(until)
        );
    }
    let (root, mut up_rx) = Root::new(keys.clone(), cfg.settings.fanout);
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    let mut sh = Shell {
        core,
        store: Store::new(db),
        root,
        waiting: HashMap::new(),
        next_req: 1,
        last_now: t,
        heartbeat_budget: heartbeat_budget(cfg.settings.suspect_after),
        bcast: None,
        bcast_failed: None,
        bcast_next: 1,
        config: cfg.settings.config.clone(),
        names: cfg.settings.names.clone(),
        restart: false,
        creds: creds.clone(),
        keys: keys.clone(),
        key_file: cfg.key_file.clone(),
        rotation: None,
    };
    let first = sh.core.step(t);
    sh.carry_out(first);
    let local = bind_local(&state)?;
    // SIGHUP reconfigures, as it does Slurm's controller.
    let hup = in_tx.clone();
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            if hup.send(Incoming::Hangup).is_err() {
                return;
            }
        }
    });
    tokio::spawn(accept_loop(
        listener,
        Listening::new(keys, &creds, &in_tx, &replays, cfg.settings.admission),
    ));
    match &cfg.http {
        Some(http) => {
            let (ask_tx, mut ask_rx) = mpsc::unbounded_channel();
            let to_core = in_tx.clone();
            tokio::spawn(async move {
                while let Some(tx) = ask_rx.recv().await {
                    if to_core.send(Incoming::Dashboard(tx)).is_err() {
                        return;
                    }
                }
            });
            crate::dashboard::start(http, &state, ask_tx).await?;
        }
        None => {
            let _ = std::fs::remove_file(state.http_addr_file());
        }
    }
    tokio::spawn(local_accept_loop(
        local,
        Listening::new(
            Keyring::from(local_key()),
            &creds,
            &in_tx,
            &replays,
            cfg.settings.admission,
        ),
    ));
    write_atomic(&state.addr_file(), &format!("{addr}\n")).map_err(DaemonError::Io)?;
    tracing::info!("mm: running at {}", cosched_proto::util::raise_priority());
    tracing::info!(
        "mm: listening on {addr}, policy {}, {} nodes × {} PEs",
        cfg.settings.policy,
        machine.size,
        cfg.settings.pes
    );
    loop {
        let wait = wake_duration(sh.core.next_wake());
        if wait < PRECISE_BELOW {
            // tokio's timers tick in whole milliseconds, which would stretch a 1 ms quantum
            // to about 2 ms: let the link tasks run, take what has arrived, and sleep the
            // exact remainder on this thread.
            tokio::task::yield_now().await;
            sh.drain(&mut in_rx, &mut up_rx);
            let wait = wake_duration(sh.core.next_wake());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        } else {
            let sleep = tokio::time::sleep(wait - PRECISE_BELOW / 2);
            tokio::select! {
                Some(inc) = in_rx.recv() => { let t = sh.clock(); sh.incoming(t, inc) }
                Some(ev) = up_rx.recv() => { let t = sh.clock(); sh.tree_event(t, ev) }
                _ = sleep => {}
            }
            // Everything else that arrived meanwhile belongs to the same instant.
            sh.drain(&mut in_rx, &mut up_rx);
        }
        let t = sh.clock();
        let effects = sh.core.step(t);
        if sh.carry_out(effects) {
            // Let the shutdown message drain down the tree before the links close.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            return Ok(Exit::Shutdown);
        }
        if sh.restart {
            // Let the answer reach the client before the connections close.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            tracing::info!("mm: restarting on the new configuration");
            return Ok(Exit::Reconfigure);
        }
    }
}

/// A database of an older release may be readable by everyone: made private (0600), with
/// its `-wal` and `-shm` files.
fn private_db_files(state: &cosched_proto::StateDir) {
    use std::os::unix::fs::PermissionsExt;
    let db = state.db_file();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(suffix);
        if let Err(e) = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("mm: cannot make {} private: {e}", db.display());
        }
    }
}

/// The stamp of a message sent down the tree now ([`ToNode::payload`]): the epoch of the
/// tree announced last, in the order of the core's effects, so a message sent before a
/// node's registration carries an epoch older than the one its registration announced.
pub(super) fn stamp(root: &Root) -> u64 {
    root.topology().epoch
}

/// How long the tree may combine a heartbeat's answers: half the silence after which a node
/// is not responding, so a subtree that is merely slow is still heard in time.
fn heartbeat_budget(suspect_after: cosched_core::Dur) -> std::time::Duration {
    std::time::Duration::from_micros((suspect_after.as_micros().max(2_000) / 2) as u64)
}

/// Waits shorter than this are slept precisely on the thread rather than with tokio's timer.
const PRECISE_BELOW: std::time::Duration = std::time::Duration::from_millis(2);

fn wake_duration(at: Time) -> std::time::Duration {
    let us = (at - now()).as_micros().clamp(0, 1_000_000);
    std::time::Duration::from_micros(us as u64)
}

impl Shell {
    /// Reads the configuration file again and, if it is sound, has the machine manager
    /// restart on it (see [`Exit::Reconfigure`]); says what changes, or why not.
    fn reconfigure(&mut self) -> Result<String, String> {
        let Some(path) = &self.config else {
            return Err("this machine manager was started without a configuration file (--config); restart it with one to reconfigure".into());
        };
        let new = cosched_proto::config::ClusterConfig::load(path).map_err(|e| e.to_string())?;
        if new.nodes.is_empty() {
            return Err(format!(
                "{} names no nodes ([[nodes]]); the machine manager keeps its configuration",
                path.display()
            ));
        }
        let names = new.node_names();
        let added: Vec<&str> = names
            .iter()
            .filter(|n| !self.names.contains(n))
            .map(String::as_str)
            .collect();
        let removed: Vec<&str> = self
            .names
            .iter()
            .filter(|n| !names.contains(n))
            .map(String::as_str)
            .collect();
        let list = |v: &[&str]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                cosched_slurm::hostlist::compress(v)
            }
        };
        self.restart = true;
        Ok(format!(
            "{}: nodes added: {}; removed: {}; the machine manager restarts on it, running jobs keep running and the accounting is kept",
            path.display(),
            list(&added),
            list(&removed)
        ))
    }

    /// Issues `uid` the next credential serial, revoking the earlier ones, once it is in the
    /// database (an answer the disk does not back would revoke nothing after a restart).
    fn credential(&mut self, caller: Caller, uid: u32, expires_us: Option<i64>) -> Response {
        if !caller.admin {
            return Response::Error(format!(
                "permission denied: only root or the cluster's own user ({}) issues or revokes user credentials",
                cosched_proto::util::user_name(cosched_proto::util::euid())
            ));
        }
        let mut held = self.creds.lock().unwrap_or_else(|e| e.into_inner());
        let serial = held.get(&uid).map_or(0, |c| c.serial) + 1;
        let c = Credential { serial, expires_us };
        match self.store.credential(uid, c) {
            Ok(()) => {
                held.insert(uid, c);
                tracing::info!(
                    "mm: uid {uid} has credential serial {serial} now; earlier ones are revoked"
                );
                Response::Credential(c)
            }
            Err(why) => Response::Error(format!("uid {uid}'s credential not changed: {why}")),
        }
    }

    /// The system clock, never going backwards.
    fn clock(&mut self) -> Time {
        self.last_now = self.last_now.max(now());
        self.last_now
    }

    fn drain(
        &mut self,
        in_rx: &mut mpsc::UnboundedReceiver<Incoming>,
        up_rx: &mut mpsc::UnboundedReceiver<RootEvent>,
    ) {
        let t = self.clock();
        while let Ok(inc) = in_rx.try_recv() {
            self.incoming(t, inc);
        }
        while let Ok(ev) = up_rx.try_recv() {
            self.tree_event(t, ev);
        }
    }

    fn incoming(&mut self, t: Time, inc: Incoming) {
        let req = self.next_req;
        self.next_req += 1;
        let input = match inc {
            Incoming::Register(reg, stamp, tx) => {
                self.waiting.insert(req, Waiting::Register(tx));
                self.store.nonce(stamp, t.as_micros());
                Input::Register { req, reg }
            }
            Incoming::Dashboard(tx) => {
                let mut snap = self.core.dashboard(t);
                snap.status.tree_depth = self.root.topology().depth();
                let _ = tx.send(snap);
                return;
            }
            Incoming::Hangup => {
                match self.reconfigure() {
                    Ok(what) => tracing::info!("mm: SIGHUP: {what}"),
                    Err(why) => tracing::warn!("mm: SIGHUP: {why}"),
                }
                return;
            }
            Incoming::Client(Request::Reconfigure, caller, _, tx) => {
                let resp = if !caller.admin {
                    Response::Error(format!(
                        "permission denied: only root or the cluster's own user ({}) may reconfigure the cluster",
                        cosched_proto::util::user_name(cosched_proto::util::euid())
                    ))
                } else {
                    match self.reconfigure() {
                        Ok(what) => Response::Reconfigured(what),
                        Err(why) => Response::Error(why),
                    }
                };
                let _ = tx.send(resp);
                return;
            }
            Incoming::Client(Request::Credential { uid, expires_us }, caller, _, tx) => {
                let _ = tx.send(self.credential(caller, uid, expires_us));
                return;
            }
            Incoming::Client(Request::RotateKey { grace_us }, caller, stamp, tx) => {
                // It changes the keys, not records: its nonce is kept all the same.
                self.store.nonce(stamp, t.as_micros());
                self.rotate_key_request(caller, grace_us, tx);
                return;
            }
            Incoming::Client(Request::Bcast(op), caller, stamp, tx) => {
                // It changes files on the nodes, not records: its nonce is kept all the same.
                self.store.nonce(stamp, t.as_micros());
                self.bcast_request(op, caller, tx);
                return;
            }
            Incoming::Client(request, caller, stamp, tx) => {
                self.waiting.insert(req, Waiting::Client(tx));
                let input = Input::Client {
                    req,
                    request,
                    caller,
                };
                // A change takes effect only once its records (and the request's nonce) are
                // in the database; the core is told at once whether they are.
                if let Some(w) = self.core.on(t, input) {
                    let result = self.store.change(&w.jobs, &w.nodes, stamp, t.as_micros());
                    self.core.on(t, Input::Written { req: w.req, result });
                }
                return;
            }
        };
        self.core.on(t, input);
    }

    fn tree_event(&mut self, t: Time, ev: RootEvent) {
        match ev {
            RootEvent::Answer(outcome) => {
                if self.bcast_answer(&outcome) || self.rekey_answer(&outcome) {
                    return;
                }
                // A heartbeat's combined answer: every node that answered and holds the
                // sequence number lives; the silent ones are left to the failure detector.
                for node in outcome.held() {
                    self.core.on(t, Input::Heard(node));
                }
            }
            RootEvent::Signal { from, payload } => {
                self.core.on(t, Input::Heard(from));
                match postcard::from_bytes::<FromNode>(&payload) {
                    Ok(msg) => {
                        self.core.on(t, Input::FromNode { from, msg });
                    }
                    Err(e) => tracing::warn!("mm: undecodable report from node {from}: {e}"),
                }
            }
        }
    }

    /// Carries out the core's effects; returns whether the machine manager must exit.
    fn carry_out(&mut self, effects: Vec<Effect>) -> bool {
        let mut exit = false;
        for e in effects {
            match e {
                Effect::Reply { req, mut resp } => {
                    if let Response::Status(s) = &mut resp {
                        s.tree_depth = self.root.topology().depth();
                    }
                    if let Some(Waiting::Client(tx)) = self.waiting.remove(&req) {
                        let _ = tx.send(resp);
                    }
                }
                Effect::ReplyJobs {
                    req,
                    mut page,
                    from_db,
                    listing,
                } => {
                    // Forgotten jobs: their whole records are the database's.
                    for k in from_db {
                        let Some(slot) = page.jobs.get_mut(k) else {
                            continue;
                        };
                        match self.store.read_job(slot.id()) {
                            Ok(Some(mut info)) => {
                                info.io.env = None;
                                info.reason = None;
                                if listing {
                                    super::requests::shorten_cmd(&mut info.cmd, LISTED_CMD_BYTES);
                                }
                                *slot = info;
                            }
                            Ok(None) => {}
                            Err(e) => tracing::warn!("mm: cannot read job {}: {e}", slot.id()),
                        }
                    }
                    if let Some(Waiting::Client(tx)) = self.waiting.remove(&req) {
                        let _ = tx.send(Response::Jobs(page));
                    }
                }
                Effect::Registered { req, reply } => {
                    if let Some(Waiting::Register(tx)) = self.waiting.remove(&req) {
                        let _ = tx.send(reply);
                    }
                }
                Effect::Send { to, msg } => {
                    if !to.is_empty() {
                        let payload = msg.payload(stamp(&self.root));
                        self.root.xfer(&Dest::nodes(to), None, payload);
                    }
                }
                Effect::Broadcast(msg) => {
                    let payload = msg.payload(stamp(&self.root));
                    self.root.xfer(&Dest::All, None, payload);
                }
                Effect::Heartbeat { seq, rotation } => {
                    let payload = ToNode::Heartbeat { seq, rotation }.payload(stamp(&self.root));
                    self.root
                        .xfer(&Dest::All, Some((VAR_HEARTBEAT, seq)), payload);
                    self.root.compare(
                        &Dest::All,
                        Cond {
                            var: VAR_HEARTBEAT,
                            cmp: Cmp::Ge,
                            value: seq,
                        },
                        None,
                        self.heartbeat_budget,
                    );
                }
                Effect::Members { epoch, members } => self.root.set_members(epoch, members),
                Effect::PersistJob(info) => self.store.job(&info),
                Effect::PersistNode(row) => self.store.node(row),
                Effect::Log(line) => tracing::info!("{line}"),
                Effect::Exit => exit = true,
            }
        }
        self.store.flush(self.last_now.as_micros());
        exit
    }
}
