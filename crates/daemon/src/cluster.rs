//! An embedded cluster: one machine manager and N node managers as background processes on
//! this machine (loopback), with their files in a state directory:
//! `mm.addr`, `key`, `mm.pid`, `nm-NAME.pid`, `mm.db`, `logs/`, and one work directory per node.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cosched_core::Dur;
use cosched_storm::Key;

use crate::DaemonError;
use crate::client::Client;
use crate::proto::Request;
use crate::util::{pid_alive, signal_pid};

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The `cosched` executable that runs `mm` and `nm`.
    pub exe: PathBuf,
    pub state_dir: PathBuf,
    pub nodes: u32,
    pub pes: u32,
    pub policy: String,
    pub mpl: Option<u32>,
    pub quantum: Option<Dur>,
    pub fanout: u32,
    pub heartbeat: Dur,
    pub requeue: bool,
    /// How long to wait for every node to register.
    pub timeout: Duration,
}

impl ClusterOptions {
    pub fn new(exe: PathBuf, state_dir: PathBuf, nodes: u32, pes: u32) -> ClusterOptions {
        ClusterOptions {
            exe,
            state_dir,
            nodes,
            pes,
            policy: "fcfs".into(),
            mpl: None,
            quantum: None,
            fanout: 8,
            heartbeat: Dur::from_millis(200),
            requeue: false,
            timeout: Duration::from_secs(30),
        }
    }
}

/// A running embedded cluster.
pub struct Cluster {
    pub addr: String,
    pub state_dir: PathBuf,
    pub client: Client,
    /// Daemons started by this process (reaped by [`Cluster::down`]).
    children: Vec<Child>,
}

/// Node names of an embedded cluster.
pub fn node_name(i: u32) -> String {
    format!("n{i}")
}

fn spawn_daemon(
    exe: &Path,
    args: &[String],
    log: &Path,
    pid_file: &Path,
) -> Result<Child, DaemonError> {
    use std::os::unix::process::CommandExt;
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        // Its own process group: a Ctrl-C in the terminal that ran `cluster up` spares it.
        .process_group(0)
        .spawn()
        .map_err(|e| DaemonError::Config(format!("cannot run {}: {e}", exe.display())))?;
    std::fs::write(pid_file, format!("{}\n", child.id()))?;
    Ok(child)
}

/// Starts the machine manager and the node managers; returns once every node is registered.
pub fn up(o: &ClusterOptions) -> Result<Cluster, DaemonError> {
    let dir = &o.state_dir;
    std::fs::create_dir_all(dir.join("logs"))?;
    if let Some(pid) = read_pid(&dir.join("mm.pid"))
        && pid_alive(pid)
    {
        return Err(DaemonError::StateDir {
            dir: dir.clone(),
            why: format!(
                "a machine manager (pid {pid}) already runs here; `cosched cluster down` first, or use another COSCHED_STATE_DIR"
            ),
        });
    }
    for stale in ["mm.addr", "mm.db", "mm.db-wal", "mm.db-shm"] {
        let _ = std::fs::remove_file(dir.join(stale));
    }
    let key = Key::generate()?;
    key.save(&dir.join("key"))?;
    let mut args: Vec<String> = vec![
        "mm".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--nodes".into(),
        o.nodes.to_string(),
        "--pes".into(),
        o.pes.to_string(),
        "--policy".into(),
        o.policy.clone(),
        "--fanout".into(),
        o.fanout.to_string(),
        "--heartbeat".into(),
        o.heartbeat.to_string(),
        "--state-dir".into(),
        dir.display().to_string(),
        "--key-file".into(),
        dir.join("key").display().to_string(),
    ];
    if let Some(m) = o.mpl {
        args.extend(["--mpl".into(), m.to_string()]);
    }
    if let Some(q) = o.quantum {
        args.extend(["--quantum".into(), q.to_string()]);
    }
    if o.requeue {
        args.push("--requeue".into());
    }
    let mut children = vec![spawn_daemon(
        &o.exe,
        &args,
        &dir.join("logs/mm.log"),
        &dir.join("mm.pid"),
    )?];
    let start = Instant::now();
    let addr = loop {
        if let Ok(a) = std::fs::read_to_string(dir.join("mm.addr")) {
            break a.trim().to_string();
        }
        if let Ok(Some(st)) = children[0].try_wait() {
            return Err(DaemonError::Config(format!(
                "the machine manager exited ({st}); see {}",
                dir.join("logs/mm.log").display()
            )));
        }
        if start.elapsed() > o.timeout {
            return Err(DaemonError::Timeout(
                "the machine manager did not start".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    for i in 0..o.nodes {
        let name = node_name(i);
        let args: Vec<String> = vec![
            "nm".into(),
            "--mm".into(),
            addr.clone(),
            "--name".into(),
            name.clone(),
            "--pes".into(),
            o.pes.to_string(),
            "--workdir".into(),
            dir.join(format!("nm-{name}")).display().to_string(),
            "--key-file".into(),
            dir.join("key").display().to_string(),
            "--cpu-offset".into(),
            (i * o.pes).to_string(),
        ];
        children.push(spawn_daemon(
            &o.exe,
            &args,
            &dir.join(format!("logs/nm-{name}.log")),
            &dir.join(format!("nm-{name}.pid")),
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
        if st.nodes.iter().filter(|n| n.state == "up").count() as u32 == o.nodes {
            return Ok(cluster);
        }
        if start.elapsed() > o.timeout {
            let _ = cluster.down_inner();
            return Err(DaemonError::Timeout(format!(
                "only {} of {} nodes registered within {:?}; see the logs in {}",
                st.nodes.iter().filter(|n| n.state == "up").count(),
                o.nodes,
                o.timeout,
                dir.join("logs").display()
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

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Stops the cluster whose files are in `dir`: asks the machine manager to shut everything
/// down, then kills whatever daemon is still alive after 3 s, and removes the pid files.
pub fn down(dir: &Path) -> Result<(), DaemonError> {
    // Best effort: a machine manager that is gone is killed by pid below anyway.
    let _ = Client::from_state_dir(dir, None, None).and_then(|c| c.simple(Request::Shutdown));
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".pid") && (name == "mm.pid" || name.starts_with("nm-")) {
            if let Some(pid) = read_pid(&entry.path()) {
                pids.push(pid);
            }
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && pids.iter().any(|&p| pid_alive(p) && !is_zombie(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in &pids {
        if pid_alive(p) && !is_zombie(p) {
            signal_pid(p, libc::SIGKILL);
        }
    }
    let _ = std::fs::remove_file(dir.join("mm.addr"));
    if pids.is_empty() {
        return Err(DaemonError::StateDir {
            dir: dir.to_path_buf(),
            why: "no cluster runs here (no pid files)".into(),
        });
    }
    Ok(())
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}
