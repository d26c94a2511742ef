//! An embedded cluster: one machine manager and N node managers as background processes on
//! this machine (loopback), with their files in a [`StateDir`]. The history (the MM's
//! database) outlives `down`: the next `up` in the same directory keeps the accounting and
//! continues the job ids.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cosched_policy::PolicyOptions;
use cosched_storm::Key;

use crate::client::Client;
use cosched_mm::ManagerSettings;
use cosched_proto::proto::Request;
use cosched_proto::util::{pid_alive, signal_pid};
use cosched_proto::{DaemonError, StateDir};

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The `cosched` executable that runs `mm` and `nm`.
    pub exe: PathBuf,
    pub state_dir: PathBuf,
    /// What the machine manager runs (passed on as its command line).
    pub settings: ManagerSettings,
    /// How long to wait for every node to register.
    pub timeout: Duration,
    /// Where the machine manager serves its web dashboard (`--http`), if anywhere.
    pub http: Option<String>,
    /// The node managers' node-level scheme.
    pub node_scheme: cosched_nm::scheme::NodeSchemeConfig,
}

impl ClusterOptions {
    pub fn new(exe: PathBuf, state_dir: PathBuf, nodes: u32, pes: u32) -> ClusterOptions {
        ClusterOptions {
            exe,
            state_dir,
            settings: ManagerSettings::new(nodes, pes),
            timeout: Duration::from_secs(30),
            http: None,
            node_scheme: Default::default(),
        }
    }
}

/// A running embedded cluster.
pub struct Cluster {
    pub addr: String,
    pub state_dir: StateDir,
    pub client: Client,
    /// Daemons started by this process (reaped by [`Cluster::down`]).
    children: Vec<Child>,
}

/// The configuration an embedded cluster's daemons read: an empty file, so that what
/// `cluster up` says is all they take, whatever `/etc/cosched/cosched.toml` holds.
pub const NO_CONFIG: &str = "/dev/null";

/// Node names of an embedded cluster.
pub fn node_name(i: u32) -> String {
    format!("n{i}")
}

/// Opens a daemon's log for appending: private (0600), never through a link, and only if it
/// is this user's own file.
fn open_log(log: &Path) -> Result<std::fs::File, DaemonError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(log)
        .map_err(|e| DaemonError::Config(format!("cannot open the log {}: {e}", log.display())))?;
    let m = f.metadata()?;
    if m.uid() != cosched_proto::util::euid() {
        return Err(DaemonError::Config(format!(
            "the log {} belongs to uid {}, not to this user: remove it",
            log.display(),
            m.uid()
        )));
    }
    Ok(f)
}

fn spawn_daemon(
    exe: &Path,
    args: &[String],
    log: &Path,
    dir: &StateDir,
    pid_file: &Path,
) -> Result<Child, DaemonError> {
    use std::os::unix::process::CommandExt;
    let log_file = open_log(log)?;
    let child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        // Its own process group: a Ctrl-C in the terminal that ran `cluster up` spares it.
        .process_group(0)
        .spawn()
        .map_err(|e| DaemonError::Config(format!("cannot run {}: {e}", exe.display())))?;
    // With its start time: `cluster down` signals this pid only while it is this process.
    dir.write_pid(pid_file, child.id() as i32)?;
    Ok(child)
}

/// Starts the machine manager and the node managers; returns once every node is registered.
pub fn up(o: &ClusterOptions) -> Result<Cluster, DaemonError> {
    let dir = StateDir::new(&o.state_dir);
    dir.create()?;
    if let Some(pid) = dir.live_mm() {
        return Err(DaemonError::StateDir {
            dir: o.state_dir.clone(),
            why: format!(
                "a machine manager (pid {pid}) already runs here; `cosched cluster down` first, or use another COSCHED_STATE_DIR"
            ),
        });
    }
    // A bad policy, option, policy file or liveness setting is refused here with its own
    // message, rather than in the log of a background process.
    o.settings.check().map_err(DaemonError::Config)?;
    cosched_mm::build_policy(
        &o.settings.policy,
        o.settings.nodes,
        o.settings.pes,
        &o.settings.policy_options,
    )?;
    // The address of the last MM would be taken for the new one's; the database stays, so the
    // new MM continues its history (on a machine of another shape, it grows or shrinks).
    dir.forget_addr();
    let key = Key::generate()?;
    key.save(&dir.key_file())?;
    let mut args: Vec<String> = vec![
        "mm".into(),
        // Its own machine, whatever configuration this host has.
        "--config".into(),
        NO_CONFIG.into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--nodes".into(),
        o.settings.nodes.to_string(),
        "--pes".into(),
        o.settings.pes.to_string(),
        "--policy".into(),
        o.settings.policy.clone(),
        "--fanout".into(),
        o.settings.fanout.to_string(),
        "--heartbeat".into(),
        o.settings.heartbeat.to_string(),
        "--suspect-after".into(),
        o.settings.suspect_after.to_string(),
        "--down-after".into(),
        o.settings.down_after.to_string(),
        "--kill-wait".into(),
        o.settings.kill_wait.to_string(),
        "--keep-jobs".into(),
        o.settings.keep_jobs.to_string(),
        "--first-frame-timeout".into(),
        cosched_core::Dur::from_micros(o.settings.admission.first_frame.as_micros() as i64)
            .to_string(),
        "--max-pending-per-peer".into(),
        o.settings.admission.per_peer.to_string(),
        "--max-pending".into(),
        o.settings.admission.total.to_string(),
        "--state-dir".into(),
        dir.root().display().to_string(),
        "--key-file".into(),
        dir.key_file().display().to_string(),
    ];
    args.extend(policy_args(&o.settings.policy_options)?);
    if o.settings.requeue {
        args.push("--requeue".into());
    }
    if let Some(http) = &o.http {
        args.extend(["--http".into(), http.clone()]);
    }
    let mut children = vec![spawn_daemon(
        &o.exe,
        &args,
        &dir.mm_log(),
        &dir,
        &dir.mm_pid_file(),
    )?];
    let start = Instant::now();
    let addr = loop {
        if let Ok(a) = dir.addr() {
            break a;
        }
        if let Ok(Some(st)) = children[0].try_wait() {
            let _ = std::fs::remove_file(dir.mm_pid_file());
            // Its last words say why (e.g. a database for a machine of another shape).
            let why = last_line(&dir.mm_log())
                .map(|l| format!(": {}", l.trim_start_matches("error: ")))
                .unwrap_or_default();
            return Err(DaemonError::Config(format!(
                "the machine manager exited ({st}){why}; see {}",
                dir.mm_log().display()
            )));
        }
        if start.elapsed() > o.timeout {
            return Err(DaemonError::Timeout(
                "the machine manager did not start".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    for i in 0..o.settings.nodes {
        let name = node_name(i);
        let mut args: Vec<String> = vec![
            "nm".into(),
            "--config".into(),
            NO_CONFIG.into(),
            "--mm".into(),
            addr.clone(),
            "--name".into(),
            name.clone(),
            "--pes".into(),
            o.settings.pes.to_string(),
            "--workdir".into(),
            dir.node_work_dir(&name).display().to_string(),
            "--key-file".into(),
            dir.key_file().display().to_string(),
            "--cpu-offset".into(),
            (i * o.settings.pes).to_string(),
            "--keep-jobs".into(),
            o.settings.keep_jobs.to_string(),
            "--output-cap".into(),
            o.settings.output_cap.to_string(),
        ];
        args.extend(o.node_scheme.args());
        children.push(spawn_daemon(
            &o.exe,
            &args,
            &dir.nm_log(&name),
            &dir,
            &dir.nm_pid_file(&name),
        )?);
        // One at a time, so that node nI gets id I (ids follow registration order).
        let probe = Client::new(addr.clone(), key.clone());
        while start.elapsed() < o.timeout {
            match probe.status() {
                Ok(st) if st.nodes.iter().filter(|n| n.state == "up").count() as u32 > i => break,
                _ => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
    let client = Client::new(addr.clone(), key);
    let mut cluster = Cluster {
        addr,
        state_dir: dir.clone(),
        client,
        children,
    };
    loop {
        let st = cluster.client.status()?;
        if st.nodes.iter().filter(|n| n.state == "up").count() as u32 == o.settings.nodes {
            return Ok(cluster);
        }
        if start.elapsed() > o.timeout {
            let _ = cluster.down_inner();
            return Err(DaemonError::Timeout(format!(
                "only {} of {} nodes registered within {:?}; see the logs in {}",
                st.nodes.iter().filter(|n| n.state == "up").count(),
                o.settings.nodes,
                o.timeout,
                dir.logs_dir().display()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Cluster {
    /// Shuts the cluster down and reaps the daemons this process started.
    pub fn down(mut self) -> Result<(), DaemonError> {
        self.down_inner()
    }

    fn down_inner(&mut self) -> Result<(), DaemonError> {
        let r = down(&self.state_dir);
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        r
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.children.is_empty() {
            let _ = self.down_inner();
            self.children.clear();
        }
    }
}

/// The last non-empty line of a log, if any.
fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// Stops the cluster whose files are in `dir`: asks the machine manager to shut everything
/// down (it ends the live jobs `cancelled`, "the cluster was shut down", and writes them to
/// its database), then kills whatever daemon is still alive after 3 s, and removes the pid
/// files and the address. The database, key, logs and job output stay for the next `up`.
/// A pid file whose process is not the one recorded (no start time, another start time) is
/// named on stderr and its pid is never signalled.
pub fn down(dir: &StateDir) -> Result<(), DaemonError> {
    dir.check()?;
    // Best effort: a machine manager that is gone is killed by pid below anyway. One that
    // answers it cannot shut down (its database takes no writes) is stopped the same way,
    // and the user told what that means.
    if let Err(DaemonError::Refused(why)) =
        Client::from_state_dir(dir, None, None).and_then(|c| c.simple(Request::Shutdown))
    {
        eprintln!(
            "cluster down: {why}; stopping the daemons by signal: the live jobs stay as last recorded (a restarted machine manager ends them node_failed or runs them again)"
        );
    }
    let (pids, refused) = dir.take_pids()?;
    for why in &refused {
        eprintln!("cluster down: {why}");
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && pids.iter().any(|&p| pid_alive(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in &pids {
        if pid_alive(p) {
            signal_pid(p, libc::SIGKILL);
        }
    }
    dir.forget_addr();
    if pids.is_empty() {
        return Err(DaemonError::StateDir {
            dir: dir.root().to_path_buf(),
            why: "no cluster runs here (no pid files)".into(),
        });
    }
    Ok(())
}

/// The policy options as `cosched mm` arguments. The file's path is made absolute: the
/// machine manager runs in another directory.
fn policy_args(p: &PolicyOptions) -> Result<Vec<String>, DaemonError> {
    let mut args = Vec::new();
    if let Some(m) = p.mpl {
        args.extend(["--mpl".into(), m.to_string()]);
    }
    if let Some(q) = p.quantum {
        args.extend(["--quantum".into(), q.to_string()]);
    }
    if let Some(c) = p.context_switch {
        args.extend(["--context-switch".into(), c.to_string()]);
    }
    if let Some(f) = &p.file {
        let abs = std::path::absolute(f)?;
        args.extend(["--policy-config".into(), abs.display().to_string()]);
    }
    for o in &p.opts {
        args.extend(["--opt".into(), o.clone()]);
    }
    Ok(args)
}
