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
    let core = Core::new(core_cfg, policy, t, recovered)
        .map_err(|why| DaemonError::Config(format!("{}: {why}", state.db_file().display())))?;
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

/// Binds the listening socket. With a port of 0 (any port, as `cluster up` asks) on a state
/// directory whose `mm.addr` still names a port on the same address, that port is taken
/// again if it is free: the machine manager is being restarted after a crash, and its node
/// managers keep registering at the address they were given. A fresh
/// `cluster up` removes `mm.addr` first, and a clean `cluster down` removes it too, so only a
/// restart reuses a port; if the port is taken meanwhile, any port is used, as asked, and the
/// log says that the node managers must be restarted with the new address.
async fn listen(wanted: &str, state: &cosched_proto::StateDir) -> Result<TcpListener, DaemonError> {
    let bind_err = |addr: &str, e| DaemonError::Bind {
        addr: addr.to_string(),
        cause: e,
    };
    let previous = wanted
        .parse::<std::net::SocketAddr>()
        .ok()
        .filter(|w| w.port() == 0)
        .and_then(|w| {
            let old = state.addr().ok()?.parse::<std::net::SocketAddr>().ok()?;
            (old.ip() == w.ip() && old.port() != 0).then_some(old)
        });
    if let Some(old) = previous {
        match TcpListener::bind(old).await {
            Ok(l) => {
                tracing::info!(
                    "mm: listening again on {old}, the address recorded in {} (a restart)",
                    state.addr_file().display()
                );
                return Ok(l);
            }
            Err(e) => tracing::warn!(
                "mm: cannot listen again on {old} ({e}); taking another port: node managers started with {old} must be restarted with the new address"
            ),
        }
    }
    TcpListener::bind(wanted)
        .await
        .map_err(|e| bind_err(wanted, e))
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
                Effect::Heartbeat { seq, strobe } => {
                    let payload = ToNode::Heartbeat { seq, strobe }.payload(stamp(&self.root));
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

/// Serves connections: each sends one [`Hello`] (a registration or a client request) and
/// gets one answer. Every connection is accepted at once and admitted under its peer's
/// address ([`Admission`]): until its hello is read it holds at most [`MAX_HELLO`] bytes for
/// at most the first-frame time, and a peer's idle connections displace only its own, so
/// neither idle clients nor a flood keeps a node manager from registering.
async fn accept_loop(listener: TcpListener, l: Listening<std::net::IpAddr>) {
    loop {
        let (stream, peer) = accept(&listener, "mm").await;
        let ticket = l.admission.admit(peer.ip());
        let _ = stream.set_nodelay(true);
        let Listening {
            key,
            creds,
            tx,
            replays,
            admission,
            drops,
        } = l.clone();
        tokio::spawn(async move {
            let (mut rd, mut wr) = stream.into_split();
            let body = match admission.first_frame(&mut rd, ticket, MAX_HELLO).await {
                Ok(b) => b,
                // A connection closed before saying anything is a probe, not an attack.
                Err(FirstFrameError::Frame(cosched_storm::FrameError::Closed)) => return,
                Err(e) => {
                    if matches!(e, FirstFrameError::Displaced(_)) {
                        // Its request was not read: the peer may send it again.
                        cosched_storm::frame::write_busy(&mut wr).await;
                    }
                    drops.dropped(format_args!("mm: dropping peer {peer}: {e}"));
                    return;
                }
            };
            // `key` becomes the key this connection is answered with: the user's for a user.
            let held = creds.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let keys = key.keys();
            let (hello, key, grace) =
                match open_hello(&keys, cosched_proto::util::now().as_micros(), &held, &body) {
                    Ok(h) => h,
                    Err(e @ cosched_storm::FrameError::Decode(_)) => {
                        // A node manager of another version: told why, with both versions.
                        if let Some((why, key)) = other_version(&keys, &body) {
                            let reply = RegisterReply::Rejected(why.clone());
                            let _ = cosched_storm::frame::write_frame(&mut wr, &key, &reply).await;
                            drops.dropped(format_args!("mm: refusing peer {peer}: {why}"));
                        } else {
                            drops.dropped(format_args!("mm: dropping peer {peer}: {e}"));
                        }
                        return;
                    }
                    Err(e) => {
                        if matches!(e, cosched_storm::FrameError::BadTag) {
                            // Told, so a user with the wrong key hears why (not "closed").
                            cosched_storm::frame::write_refusal(&mut wr).await;
                        }
                        drops.dropped(format_args!("mm: dropping peer {peer}: {e}"));
                        return;
                    }
                };
            if let Hello::User(uid, ..) = &hello
                && let Some(why) = held
                    .get(uid)
                    .and_then(|c| c.expired(cosched_proto::util::now().as_micros()))
            {
                drops.dropped(format_args!("mm: dropping peer {peer}: uid {uid}: {why}"));
                let _ =
                    cosched_storm::frame::write_frame(&mut wr, &key, &Response::Error(why)).await;
                return;
            }
            let stamp = match &hello {
                Hello::Register(s, _) | Hello::Client(s, _) | Hello::User(_, s, _) => *s,
            };
            // The lock is released before any await.
            let checked = replays
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .check(stamp);
            if let Err(why) = checked {
                drops.dropped(format_args!("mm: dropping peer {peer}: {why}"));
                // The sender learns why: a node manager whose clock is off stops with the
                // reason instead of retrying in silence; a replayer learns nothing new.
                let _ = match hello {
                    Hello::Client(..) | Hello::User(..) => {
                        cosched_storm::frame::write_frame(&mut wr, &key, &Response::Error(why))
                            .await
                    }
                    Hello::Register(..) => {
                        let reply = RegisterReply::Rejected(why);
                        cosched_storm::frame::write_frame(&mut wr, &key, &reply).await
                    }
                };
                return;
            }
            match hello {
                // Sealed with the key of a rotation's grace period: the node missed the
                // rotation. It gets the new key, and registers again with it.
                Hello::Register(..) if grace.is_some() => {
                    let until_us = grace.unwrap_or_default();
                    let Ok(wrapped) = key.wrap(&keys.seal) else {
                        return;
                    };
                    let reply = RegisterReply::NewKey {
                        key: wrapped,
                        until_us,
                    };
                    let _ = cosched_storm::frame::write_frame(&mut wr, &key, &reply).await;
                    tracing::info!(
                        "mm: peer {peer} registered with the previous cluster key: given the new one"
                    );
                }
                Hello::Register(stamp, reg) => {
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Register(reg, stamp, otx)
                    })
                    .await
                }
                // The cluster key is the administrator's: its holder acts as this daemon's
                // user and may name the user a job runs as (see docs/daemons.md, "Trust").
                Hello::Client(stamp, req) => {
                    let caller = Caller {
                        uid: cosched_proto::util::euid(),
                        gid: cosched_proto::util::egid(),
                        admin: true,
                    };
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Client(req, caller, stamp, otx)
                    })
                    .await
                }
                // The tag proved the user credential of `uid`: that user, with a user's rights.
                Hello::User(uid, stamp, req) => {
                    let caller = Caller {
                        uid,
                        gid: cosched_proto::util::account(uid).map_or(uid, |a| a.gid),
                        admin: false,
                    };
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Client(req, caller, stamp, otx)
                    })
                    .await
                }
            }
        });
        // The reader runs before the next accept: a hello that has arrived is read before a
        // newer connection of the same peer could displace it.
        tokio::task::yield_now().await;
    }
}

/// Authenticates the first frame of a TCP connection (its body: tag and payload) and returns
/// it with the key its answer is sealed with. A [`Hello::User`] names its uid in the payload,
/// which is decoded before the tag is checked only to learn that uid: nothing in it is used
/// unless the tag checks with that user's credential, derived from the cluster key. Any other
/// hello must carry the cluster key's tag.
/// A user's credential is the one of the serial `creds` holds for them (0 if none): an
/// earlier one was revoked.
///
/// Any cluster key accepted at `now_us` will do (see [`cosched_storm::keyring`]): the third
/// value is the deadline of the one that did, if it is accepted only for a rotation's grace
/// period. A user credential counts as made from each of them in turn.
fn open_hello(
    keys: &Keys,
    now_us: i64,
    creds: &BTreeMap<u32, Credential>,
    body: &[u8],
) -> Result<(Hello, Key, Option<i64>), cosched_storm::FrameError> {
    let claimed = body
        .get(cosched_storm::frame::TAG_LEN..)
        .and_then(|payload| postcard::from_bytes::<Hello>(payload).ok());
    let mut refused = cosched_storm::FrameError::BadTag;
    for (cluster, until) in keys.accepted_until(now_us) {
        let key = match claimed {
            Some(Hello::User(uid, ..)) => {
                cluster.user_key_serial(uid, creds.get(&uid).map_or(0, |c| c.serial))
            }
            _ => cluster.clone(),
        };
        match key.open::<Hello>(body) {
            // The claim checked is the claim used: the payload decoded again is the same bytes.
            Ok(hello) => return Ok((hello, key, until)),
            Err(e @ cosched_storm::FrameError::BadTag) => refused = e,
            Err(e) => return Err(e),
        }
    }
    Err(refused)
}

/// Why a first frame that does not decode as this version's [`Hello`] came from a node
/// manager of another version, if it did: sealed with the cluster key, beginning as every
/// version's registration does ([`RegisterHead`]), with another message version.
/// Returns the refusal with the key to seal it with.
fn other_version(keys: &Keys, body: &[u8]) -> Option<(String, Key)> {
    let key = keys
        .accepted(cosched_proto::util::now().as_micros())
        .find(|k| k.open::<RegisterHead>(body).is_ok_and(|head| head.tag == 0))?;
    let head: RegisterHead = key.open(body).ok()?;
    Some((Version::refusal(&head.version, None)?, key.clone()))
}

/// Binds the Unix socket of local clients, `mm.sock` in the state directory, connectable by
/// every user who may enter the directory: the kernel tells who connects (`SO_PEERCRED`), so
/// a user needs no key, and gets no more than a user's rights.
fn bind_local(state: &cosched_proto::StateDir) -> Result<tokio::net::UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    let path = state.sock_file();
    // Only this user can write in the (checked) directory: what is there is a stale socket.
    let _ = std::fs::remove_file(&path);
    let (_dir, short) = cosched_proto::util::socket_path(&path)?;
    let l = tokio::net::UnixListener::bind(&short).map_err(|e| DaemonError::StateDir {
        dir: state.root().to_path_buf(),
        why: format!("cannot listen on {}: {e}", path.display()),
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}

/// Serves local clients on the Unix socket: as [`accept_loop`], but each request is the
/// caller's whose uid and gid the kernel gives (`SO_PEERCRED`, read before the connection is
/// admitted: a user's connections are admitted under that uid, so one user's idle
/// connections displace only that user's), never a claim in the request; node managers
/// register only over TCP, with the key.
async fn local_accept_loop(listener: tokio::net::UnixListener, l: Listening<u32>) {
    let me = cosched_proto::util::euid();
    loop {
        let (stream, _) = accept(&listener, "mm (local)").await;
        let Ok(cred) = stream.peer_cred() else {
            continue;
        };
        let caller = Caller {
            uid: cred.uid(),
            gid: cred.gid(),
            admin: cred.uid() == 0 || cred.uid() == me,
        };
        let ticket = l.admission.admit(caller.uid);
        // The kernel vouches for a local user: no credential to check.
        let Listening {
            key,
            tx,
            replays,
            admission,
            drops,
            ..
        } = l.clone();
        let key = key.current();
        tokio::spawn(async move {
            let (mut rd, mut wr) = stream.into_split();
            let body = admission.first_frame(&mut rd, ticket, MAX_HELLO).await;
            let who = format!("local uid {}", caller.uid);
            let hello = match body {
                Ok(b) => key.open::<Hello>(&b),
                Err(FirstFrameError::Frame(e)) => Err(e),
                Err(e) => {
                    if matches!(e, FirstFrameError::Displaced(_)) {
                        cosched_storm::frame::write_busy(&mut wr).await;
                    }
                    drops.dropped(format_args!("mm: dropping {who}: {e}"));
                    return;
                }
            };
            match hello {
                Ok(Hello::Client(stamp, req)) => {
                    let checked = replays
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .check(stamp);
                    if let Err(why) = checked {
                        drops.dropped(format_args!("mm: dropping {who}: {why}"));
                        let answer = Response::Error(why);
                        let _ = cosched_storm::frame::write_frame(&mut wr, &key, &answer).await;
                        return;
                    }
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Client(req, caller, stamp, otx)
                    })
                    .await
                }
                Ok(Hello::Register(..)) => drops.dropped(format_args!(
                    "mm: dropping {who}: node managers register over TCP, with the key"
                )),
                // Here the kernel says who the peer is; a credential is for TCP only.
                Ok(Hello::User(..)) => drops.dropped(format_args!(
                    "mm: dropping {who}: user credentials are for TCP clients"
                )),
                Err(cosched_storm::FrameError::Closed) => {}
                Err(e) => drops.dropped(format_args!("mm: dropping {who}: {e}")),
            }
        });
        tokio::task::yield_now().await;
    }
}

/// What the connections of one listener share: the key their frames are read with (the
/// cluster's, or `mm.sock`'s public one), the way to the event loop, the replay window, their
/// admission under their peers' names and the log of those dropped.
#[derive(Clone)]
struct Listening<P> {
    key: Keyring,
    /// Each user's credential serial and expiry (see [`crate::user_key`]).
    creds: Credentials,
    tx: mpsc::UnboundedSender<Incoming>,
    replays: Arc<Mutex<Replays>>,
    admission: Admission<P>,
    drops: DropLog,
}

impl<P: std::hash::Hash + Eq + Clone> Listening<P> {
    fn new(
        key: Keyring,
        creds: &Credentials,
        tx: &mpsc::UnboundedSender<Incoming>,
        replays: &Arc<Mutex<Replays>>,
        limits: cosched_storm::accept::Limits,
    ) -> Listening<P> {
        Listening {
            key,
            creds: creds.clone(),
            tx: tx.clone(),
            replays: replays.clone(),
            admission: Admission::new(limits),
            drops: DropLog::default(),
        }
    }
}

/// Hands a request to the event loop and writes its answer back on the connection.
async fn relay<T: serde::Serialize, W: tokio::io::AsyncWrite + Unpin>(
    tx: &mpsc::UnboundedSender<Incoming>,
    wr: &mut W,
    key: &Key,
    wrap: impl FnOnce(oneshot::Sender<T>) -> Incoming,
) {
    let (otx, orx) = oneshot::channel();
    if tx.send(wrap(otx)).is_err() {
        return;
    }
    if let Ok(answer) = orx.await {
        let _ = cosched_storm::frame::write_frame(wr, key, &answer).await;
    }
}

#[cfg(test)]
mod hello_tests {
    use super::*;

    fn body(frame: Vec<u8>) -> Vec<u8> {
        frame[4..].to_vec()
    }

    /// A registration of another message version does not decode as a [`Hello`]; what it
    /// begins with names its version, and the refusal names both.
    #[test]
    fn a_node_manager_of_another_version_is_refused_naming_both_versions() {
        let cluster = Key::from_bytes([5; 32]);
        #[derive(serde::Serialize)]
        struct Future {
            head: RegisterHead,
            what_it_says_next: Vec<u128>,
        }
        let future = Future {
            head: RegisterHead {
                tag: 0,
                stamp: Stamp::now(),
                version: Version {
                    release: "9.9.9".into(),
                    wire: WIRE_VERSION + 1,
                },
            },
            what_it_says_next: vec![u128::MAX; 3],
        };
        let frame = body(cluster.seal(&future));
        assert!(matches!(
            open_hello(&Keys::new(cluster.clone()), 0, &BTreeMap::new(), &frame),
            Err(cosched_storm::FrameError::Decode(_))
        ));
        let why = other_version(&Keys::new(cluster.clone()), &frame)
            .expect("refused")
            .0;
        assert_eq!(
            why,
            format!(
                "node manager is cosched 9.9.9 (messages v{}) but the machine manager is cosched {} (messages v{WIRE_VERSION}): run the same version on both (docs/deploy.md, Upgrades)",
                WIRE_VERSION + 1,
                env!("CARGO_PKG_VERSION")
            )
        );
        // Not sealed with the cluster key: nothing is said.
        let stranger = body(Key::from_bytes([6; 32]).seal(&future));
        assert_eq!(other_version(&Keys::new(cluster.clone()), &stranger), None);
        // This version's registration begins as the head says.
        let reg = Hello::Register(
            future.head.stamp,
            Register {
                version: Version::ours(),
                name: "n0".into(),
                pes: 1,
                addr: String::new(),
                jobs: Vec::new(),
                incarnation: 1,
                memory: 1,
            },
        );
        let head: RegisterHead = cluster.open(&body(cluster.seal(&reg))).unwrap();
        assert_eq!((head.tag, head.version), (0, Version::ours()));
    }

    /// A user's hello opens only with the credential of the uid it claims, and is answered
    /// with that credential; a cluster-key hello opens as before.
    #[test]
    fn a_user_hello_opens_only_with_its_uids_credential() {
        let cluster = Key::from_bytes([5; 32]);
        let none = BTreeMap::new();
        let s = Stamp::now();
        let user = |uid| Hello::User(uid, s, Request::Status);
        let (h, k, _) = open_hello(
            &Keys::new(cluster.clone()),
            0,
            &none,
            &body(cluster.user_key(1000).seal(&user(1000))),
        )
        .unwrap();
        assert!(matches!(h, Hello::User(1000, ..)));
        assert_eq!(k, cluster.user_key(1000));
        // uid 1000's credential claiming uid 0, or sealed with the cluster key itself: refused.
        for frame in [
            cluster.user_key(1000).seal(&user(0)),
            cluster.seal(&user(0)),
        ] {
            assert!(matches!(
                open_hello(&Keys::new(cluster.clone()), 0, &none, &body(frame)),
                Err(cosched_storm::FrameError::BadTag)
            ));
        }
        let client = Hello::Client(s, Request::Status);
        let (h, k, _) = open_hello(
            &Keys::new(cluster.clone()),
            0,
            &none,
            &body(cluster.seal(&client)),
        )
        .unwrap();
        assert!(matches!(h, Hello::Client(..)));
        assert_eq!(k, cluster);
        // A user credential does not pass for the cluster key.
        assert!(
            open_hello(
                &Keys::new(cluster.clone()),
                0,
                &none,
                &body(cluster.user_key(0).seal(&client))
            )
            .is_err()
        );
    }

    /// Once uid 1000 has serial 2, its credentials of serial 0 and 1 are refused and the
    /// one of serial 2 opens; another user's serial-0 credential still opens.
    #[test]
    fn a_revoked_user_credential_is_refused_and_another_users_still_works() {
        let cluster = Key::from_bytes([5; 32]);
        let s = Stamp::now();
        let user = |uid| Hello::User(uid, s, Request::Status);
        let creds = BTreeMap::from([(
            1000,
            Credential {
                serial: 2,
                expires_us: None,
            },
        )]);
        for old in [0, 1] {
            let frame = cluster.user_key_serial(1000, old).seal(&user(1000));
            assert!(
                matches!(
                    open_hello(&Keys::new(cluster.clone()), 0, &creds, &body(frame)),
                    Err(cosched_storm::FrameError::BadTag)
                ),
                "serial {old}"
            );
        }
        let frame = cluster.user_key_serial(1000, 2).seal(&user(1000));
        let (_, k, _) = open_hello(&Keys::new(cluster.clone()), 0, &creds, &body(frame)).unwrap();
        assert_eq!(k, cluster.user_key_serial(1000, 2));
        let other = cluster.user_key(1001).seal(&user(1001));
        assert!(open_hello(&Keys::new(cluster.clone()), 0, &creds, &body(other)).is_ok());
    }

    /// During a rotation's grace period a hello sealed with the old key, or with a user
    /// credential made from it, opens and is marked with the deadline (a node manager that
    /// sealed its registration so gets the new key); after the deadline both are refused,
    /// and the new key's hellos open unmarked throughout.
    #[test]
    fn the_old_key_and_its_user_credentials_open_until_the_grace_deadline() {
        let (old, new) = (Key::from_bytes([5; 32]), Key::from_bytes([6; 32]));
        let mut keys = Keys::new(old.clone());
        keys.rotate(new.clone(), 1_000);
        let none = BTreeMap::new();
        let s = Stamp::now();
        let client = Hello::Client(s, Request::Status);
        let user = Hello::User(1000, s, Request::Status);
        let by_old = body(old.seal(&client));
        let (_, k, grace) = open_hello(&keys, 999, &none, &by_old).unwrap();
        assert_eq!((k, grace), (old.clone(), Some(1_000)));
        let (_, k, grace) = open_hello(&keys, 999, &none, &body(new.seal(&client))).unwrap();
        assert_eq!((k, grace), (new.clone(), None));
        let old_user = body(old.user_key(1000).seal(&user));
        assert!(open_hello(&keys, 999, &none, &old_user).is_ok());
        for frame in [&by_old, &old_user] {
            assert!(matches!(
                open_hello(&keys, 1_000, &none, frame),
                Err(cosched_storm::FrameError::BadTag)
            ));
        }
        assert!(open_hello(&keys, 1_000, &none, &body(new.user_key(1000).seal(&user))).is_ok());
    }
}
