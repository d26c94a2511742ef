//! The daemons and the cluster: `mm`, `nm`, `cluster up|down|user-key|spin|bench|model`,
//! `keygen` and `reconfigure`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use cosched_client::cluster::{self, ClusterOptions};
use cosched_core::Dur;
use cosched_mm::ManagerSettings;
use cosched_proto::StateDir;
use cosched_proto::config::{ClusterConfig, parse_bytes};
use cosched_storm::Key;
use cosched_storm::accept::Limits;

use super::bench::{BenchCmd, bench};
use crate::cmd::conn::{ConnArgs, now_us, state_dir};
use crate::cmd::output::{emit, print_json};
use crate::cmd::policy_args::PolicyArgs;

#[derive(clap::Args)]
pub struct MmArgs {
    /// Address to listen on [default: the configuration's `listen` or `head`, else
    /// 127.0.0.1:7070: give a routable address to let other hosts in]
    #[arg(long)]
    listen: Option<String>,
    /// Nodes in the machine (without a configuration file naming them)
    #[arg(long)]
    nodes: Option<u32>,
    /// PEs (cores) per node [default: the configured nodes' cores]
    #[arg(long)]
    pes: Option<u32>,
    /// The cluster's configuration file [default: $COSCHED_CONFIG, else
    /// /etc/cosched/cosched.toml if it exists]
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(flatten)]
    manager: ManagerArgs,
    /// Where mm.addr and mm.db live (default: $COSCHED_STATE_DIR)
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Cluster key file (64 hex digits; created if missing)
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Serve the read-only web dashboard on ADDR (e.g. 127.0.0.1:8080), behind a random
    /// token printed at start-up and kept in STATE_DIR/http-token (off by default)
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
}

/// What the machine manager runs: the same flags for `cosched mm` and `cluster up`. A flag
/// not given takes the configuration file's value, then the default.
#[derive(clap::Args)]
pub struct ManagerArgs {
    /// Scheduling policy (`cosched sim --list` lists them) [default: fcfs]
    #[arg(long)]
    policy: Option<String>,
    #[command(flatten)]
    policy_args: PolicyArgs,
    /// Fan-out of the tree of node managers [default: 8]
    #[arg(long)]
    fanout: Option<u32>,
    /// Period of the heartbeat down the tree: the liveness probe and the gang strobe the
    /// node managers switch from [default: 200ms]
    #[arg(long)]
    heartbeat: Option<Dur>,
    /// A node silent this long is not responding: nothing new starts there, its jobs keep
    /// running, and it is up again as soon as it answers [default: 10s]
    #[arg(long)]
    suspect_after: Option<Dur>,
    /// A node silent this long is declared down (as Slurm's SlurmdTimeout): its jobs end
    /// node_failed, or start again with --requeue once their processes are known gone.
    /// STORM's sub-second detection: --heartbeat 100ms --suspect-after 300ms --down-after 500ms
    /// [default: 5m]
    #[arg(long)]
    down_after: Option<Dur>,
    /// Requeue jobs lost with a failed node instead of failing them
    #[arg(long)]
    requeue: bool,
    /// Grace between SIGTERM and SIGKILL when a job is cancelled or killed, as Slurm's
    /// KillWait (at most 1h) [default: 5s]
    #[arg(long)]
    kill_wait: Option<Dur>,
    /// Ended jobs are kept this long: then the machine manager keeps only a small part of
    /// their records in memory (the database keeps all: `acct` shows them whole) and the
    /// node managers `cluster up` starts remove their directories (default output files)
    /// [default: 7d]
    #[arg(long)]
    keep_jobs: Option<Dur>,
    /// Time a connection to the machine manager has to send its whole first frame (the
    /// request or registration that proves who it is)
    #[arg(long, default_value_t = dur(Limits::default().first_frame))]
    first_frame_timeout: Dur,
    /// Connections one peer (an address; a local user) may have open before their first
    /// frame; another one closes its oldest idle one
    #[arg(long, default_value_t = Limits::default().per_peer)]
    max_pending_per_peer: usize,
    /// Connections before their first frame, in all; another one closes one of the peer
    /// with the most
    #[arg(long, default_value_t = Limits::default().total)]
    max_pending: usize,
}

fn dur(d: Duration) -> Dur {
    Dur::from_micros(d.as_micros() as i64)
}

impl ManagerArgs {
    /// The settings: each flag given, else the configuration's value (`conf`), else the
    /// default.
    fn settings(self, nodes: u32, pes: u32, conf: Option<&ClusterConfig>) -> ManagerSettings {
        let d = ManagerSettings::new(nodes, pes);
        let pick = |flag: Option<Dur>, file: fn(&ClusterConfig) -> Option<Dur>, default: Dur| {
            flag.or_else(|| conf.and_then(file)).unwrap_or(default)
        };
        let sched = conf.map(|c| &c.scheduler);
        let mut policy_options = self.policy_args.options();
        if let Some(s) = sched {
            policy_options.mpl = policy_options.mpl.or(s.mpl);
            policy_options.quantum = policy_options.quantum.or(s.quantum);
            policy_options.context_switch = policy_options.context_switch.or(s.context_switch);
            // The file's options first: an --opt of the same key comes later and wins.
            let mut opts = s.options.clone();
            opts.append(&mut policy_options.opts);
            policy_options.opts = opts;
        }
        ManagerSettings {
            nodes,
            pes,
            names: conf.map(ClusterConfig::node_names).unwrap_or_default(),
            partitions: conf
                .map(cosched_mm::partitions::Partitions::of)
                .unwrap_or_default(),
            config: conf.map(|c| c.path.clone()),
            policy_options,
            policy: self
                .policy
                .or_else(|| sched.and_then(|s| s.policy.clone()))
                .unwrap_or(d.policy.clone()),
            fanout: self
                .fanout
                .or_else(|| conf.and_then(|c| c.fanout))
                .unwrap_or(d.fanout)
                .max(1),
            heartbeat: pick(self.heartbeat, |c| c.heartbeat, d.heartbeat).max(Dur::from_millis(1)),
            suspect_after: pick(self.suspect_after, |c| c.suspect_after, d.suspect_after),
            down_after: pick(self.down_after, |c| c.down_after, d.down_after),
            requeue: self.requeue || sched.and_then(|s| s.requeue).unwrap_or(false),
            kill_wait: pick(self.kill_wait, |c| c.kill_wait, d.kill_wait)
                .clamp(Dur::ZERO, cosched_proto::proto::MAX_KILL_WAIT),
            keep_jobs: pick(self.keep_jobs, |c| c.keep_jobs, d.keep_jobs).max(Dur::ZERO),
            admission: Limits {
                first_frame: Duration::from_micros(
                    self.first_frame_timeout
                        .max(Dur::from_millis(1))
                        .as_micros() as u64,
                ),
                per_peer: self.max_pending_per_peer.max(1),
                total: self.max_pending.max(1),
            },
            ..d
        }
    }
}

#[derive(clap::Args)]
pub struct NmArgs {
    /// Machine manager address HOST:PORT [default: the configuration's `head`]
    #[arg(long)]
    mm: Option<String>,
    /// Node name, as the configuration names it (default: the host name)
    #[arg(long)]
    name: Option<String>,
    /// PEs (cores) this node offers [default: its configured cores]
    #[arg(long)]
    pes: Option<u32>,
    /// The cluster's configuration file [default: $COSCHED_CONFIG, else
    /// /etc/cosched/cosched.toml if it exists]
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Where job output goes (default: $COSCHED_STATE_DIR/nm-NAME)
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Address for the tree parent to connect to (default: this host's address toward the MM)
    #[arg(long)]
    listen: Option<String>,
    /// Cluster key file (the machine manager's)
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Pin PE i to the (OFFSET + i)-th usable CPU (several node managers on one host)
    #[arg(long, default_value_t = 0)]
    cpu_offset: u32,
    /// Remove a finished job's directory on this node (its default output files) this long
    /// after the job ended
    #[arg(long, default_value = "7d")]
    keep_jobs: Dur,
    /// Cut a rank's output file back to this size (bytes, or with K, M, G) once it passes
    /// it, appending a notice that says so
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    output_cap: u64,
    #[command(flatten)]
    node_scheme: NodeSchemeArgs,
}

/// The node-level scheme of the node managers (docs/daemons.md, "Node schemes").
#[derive(clap::Args, Clone)]
pub struct NodeSchemeArgs {
    /// gs (strict gang from the machine manager's strobe), local (Linux time-shares the
    /// matrix's jobs), sb (spin-block) or fcs (flexible coscheduling)
    #[arg(long, default_value = "gs")]
    node_scheme: String,
    /// FCS parameter KEY=VALUE (seed 000 Table 4.1): t (time slice; sets the others),
    /// max_wdc_wcs, f_thresh, dc_thresh, cs_thresh, max_ctime, min_ctime, min_init_ctime,
    /// max_spin; repeatable
    #[arg(long = "fcs-opt")]
    fcs_opt: Vec<String>,
    /// sb: how long a waiting rank spins before it blocks
    #[arg(long, default_value = "100us")]
    spin_time: Dur,
}

impl NodeSchemeArgs {
    fn config(&self) -> anyhow::Result<cosched_nm::scheme::NodeSchemeConfig> {
        cosched_nm::scheme::NodeSchemeConfig::parse(
            &self.node_scheme,
            &self.fcs_opt,
            Some(self.spin_time),
        )
        .map_err(anyhow::Error::msg)
    }
}

#[derive(clap::Subcommand)]
pub enum ClusterCmd {
    /// Start a machine manager and N node managers on this machine; prints the MM address.
    /// A cluster brought up again in the same $COSCHED_STATE_DIR keeps its job history
    Up(Box<UpArgs>),
    /// Stop the cluster of $COSCHED_STATE_DIR and cancel every live job; the history stays
    Down,
    /// Write user UID's credential for remote clients (`--user-key`), derived from the
    /// cluster key and a new serial the machine manager issues (which revokes that user's
    /// earlier credentials, no one else's), as a new file of mode 0600 to give to that user;
    /// rotating the cluster key revokes every credential at the end of its grace period
    UserKey {
        /// The Unix user the credential speaks for
        #[arg(long)]
        uid: u32,
        /// Where to write it (default: standard output)
        #[arg(long)]
        out: Option<PathBuf>,
        /// Cluster key file (default: the configuration's `key`, else $COSCHED_STATE_DIR/key)
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The credential stops working this long from now (e.g. 30d)
        #[arg(long)]
        expires: Option<Dur>,
        /// Only revoke the user's credentials: write none
        #[arg(long, conflicts_with_all = ["out", "expires"])]
        revoke: bool,
        /// The cluster's configuration file
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Give every daemon a new cluster key without stopping anything: the machine manager
    /// writes it to its key file, sends it down the tree wrapped with the old one (the node
    /// managers write it to theirs), and accepts the old key for --grace more; user
    /// credentials made from the old key stop working then (see docs/deploy.md)
    RotateKey {
        /// How long the old key is still accepted (e.g. 10m, 1h)
        #[arg(long, default_value = "10m")]
        grace: Dur,
        #[command(flatten)]
        conn: Box<ConnArgs>,
    },
    /// Benchmarks on throw-away embedded clusters (figures in docs/benchmarks.md)
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Fit the launch model (seed 003 Fig. 10) on `bench launch|bcast|compare --csv`
    /// measurements; print its error and its extrapolation to --max-nodes, and draw it
    Model(crate::cmd::launch_model::ModelArgs),
    /// Burn this much CPU time and exit (the CPU-bound rank of `bench gang`)
    #[command(hide = true)]
    Spin {
        cpu: Dur,
        /// Then print `runnable_us N`: how long this process was runnable (on a core or
        /// waiting for one), which a frozen or stopped process is not
        #[arg(long)]
        runnable: bool,
        /// Then print `unfrozen_us N`: the time from its fork to its end less the time its
        /// cgroup was frozen (the kernel's `frozen_usec`, Linux 6.17); `frozen_us N`, that
        /// frozen time; `startup_us N`: from its fork to its `main`; and `end_unix_us N`: the
        /// wall clock at its end, µs since the epoch
        #[arg(long)]
        unfrozen: bool,
        /// Then print `gap START END` for each stretch it did not run (stopped, frozen or
        /// waiting for a core), µs of CLOCK_MONOTONIC (`cluster bench gang`'s breakdown)
        #[arg(long)]
        gaps: bool,
    },
}

#[derive(clap::Args)]
pub struct UpArgs {
    /// Node managers to start
    #[arg(long, default_value_t = 2)]
    nodes: u32,
    /// PEs per node
    #[arg(long, default_value_t = 2)]
    pes: u32,
    #[command(flatten)]
    manager: ManagerArgs,
    /// Serve the read-only web dashboard on ADDR (e.g. 127.0.0.1:8080), behind a random
    /// token printed at start-up and kept in STATE_DIR/http-token (off by default)
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// The node managers cut a rank's output file back to this size (bytes, or with K, M,
    /// G) once it passes it, appending a notice that says so
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    output_cap: u64,
    #[command(flatten)]
    node_scheme: NodeSchemeArgs,
    /// Print one JSON document
    #[arg(long)]
    json: bool,
}

/// `cosched mm`.
pub(super) fn mm(a: MmArgs) -> anyhow::Result<i32> {
    cosched_proto::util::init_logging();
    let conf = ClusterConfig::find(a.config.as_deref())?;
    let named = conf.as_ref().filter(|c| !c.nodes.is_empty());
    let (nodes, pes) = match (named, a.nodes, a.pes) {
        (Some(c), Some(_), _) => anyhow::bail!(
            "--nodes and the nodes of {} say the same thing: drop --nodes, or pass --config with a file that names no nodes",
            c.path.display()
        ),
        (Some(c), None, pes) => (0, pes.or(c.cores()).unwrap_or(1)),
        (None, Some(n), Some(p)) => (n, p),
        (None, _, _) => anyhow::bail!(
            "the machine's shape is not given: pass --nodes N --pes P, or a configuration file whose [[nodes]] name them (--config PATH; see docs/deploy.md)"
        ),
    };
    let dir = state_dir(a.state_dir, conf.as_ref());
    // Private, and refused if another user could have planted files in it.
    dir.create()?;
    let key_file = a
        .key_file
        .or_else(|| conf.as_ref().and_then(|c| c.key.clone()))
        .unwrap_or_else(|| dir.key_file());
    let key = load_or_create_key(&key_file)?;
    let mut cfg = cosched_mm::MmConfig::new(dir.root().to_path_buf(), key, nodes, pes);
    cfg.key_file = Some(key_file);
    cfg.listen = a
        .listen
        .or_else(|| {
            conf.as_ref()
                .and_then(|c| c.listen.clone().or(c.head.clone()))
        })
        .unwrap_or_else(|| cosched_mm::DEFAULT_LISTEN.to_string());
    cfg.settings = a.manager.settings(nodes, pes, conf.as_ref());
    cfg.settings.check().map_err(anyhow::Error::msg)?;
    cfg.http = a.http;
    dir.write_pid(&dir.mm_pid_file(), std::process::id() as i32)?;
    match cosched_mm::run_blocking(cfg)? {
        cosched_mm::Exit::Shutdown => Ok(0),
        cosched_mm::Exit::Reconfigure => {
            use std::os::unix::process::CommandExt;
            // The same process (its pid stays the one recorded) starts again from
            // its command line: flags still override the new file.
            let exe = std::env::current_exe().context("finding the cosched executable")?;
            let err = std::process::Command::new(&exe)
                .args(std::env::args_os().skip(1))
                .exec();
            Err(anyhow::anyhow!(
                "cannot restart the machine manager ({}) on its new configuration: {err}",
                exe.display()
            ))
        }
    }
}

/// `cosched nm`.
pub(super) fn nm(a: NmArgs) -> anyhow::Result<i32> {
    cosched_proto::util::init_logging();
    let conf = ClusterConfig::find(a.config.as_deref())?;
    let name = a.name.unwrap_or_else(hostname);
    let node = match conf.as_ref().filter(|c| !c.nodes.is_empty()) {
            Some(c) => Some(c.node(&name).with_context(|| {
                format!(
                    "node {name} is not in {} (its nodes: {}); pass --name with a configured node's name",
                    c.path.display(),
                    cosched_slurm::hostlist::compress(&c.node_names())
                )
            })?),
            None => None,
        };
    let pes = a.pes.or(node.map(|n| n.cores)).context(
            "how many PEs does this node offer? pass --pes, or name it in a configuration file (--config)",
        )?;
    let mm = a
            .mm
            .or_else(|| conf.as_ref().and_then(|c| c.head.clone()))
            .context(
                "where is the machine manager? pass --mm HOST:PORT, or set `head` in the configuration file (--config)",
            )?;
    let dir = state_dir(None, conf.as_ref());
    let key_file = a
        .key_file
        .or_else(|| conf.as_ref().and_then(|c| c.key.clone()))
        .unwrap_or_else(|| dir.key_file());
    let key = Key::load(&key_file)
        .with_context(|| "the node manager needs the cluster key (--key-file)")?;
    let workdir = a.workdir.unwrap_or_else(|| dir.node_work_dir(&name));
    let cfg = cosched_nm::NmConfig {
        mm,
        name,
        pes,
        workdir,
        listen: a.listen,
        key,
        key_file: Some(key_file),
        cpu_offset: a.cpu_offset,
        keep_jobs: Duration::from_micros(a.keep_jobs.as_micros().max(0) as u64),
        output_cap: a.output_cap,
        node_scheme: a.node_scheme.config()?,
        pmix_helper: std::env::current_exe().ok(),
        memory: node.and_then(|n| n.memory),
    };
    cosched_nm::run_blocking(cfg)?;
    Ok(0)
}

/// `cosched cluster ...`.
pub(super) fn cluster(c: ClusterCmd) -> anyhow::Result<i32> {
    match c {
        ClusterCmd::Up(a) => {
            let exe = std::env::current_exe().context("finding the cosched executable")?;
            let mut o = ClusterOptions::new(
                exe,
                StateDir::from_env().root().to_path_buf(),
                a.nodes,
                a.pes,
            );
            o.settings = a.manager.settings(a.nodes, a.pes, None);
            o.http = a.http;
            o.settings.output_cap = a.output_cap;
            o.node_scheme = a.node_scheme.config()?;
            let c = cluster::up(&o)?;
            let dashboard = o.http.as_ref().and_then(|_| c.state_dir.http_url());
            // The daemons outlive this command: `cluster down` stops them.
            let addr = c.addr.clone();
            std::mem::forget(c);
            if a.json {
                print_json(&serde_json::json!({
                    "mm": addr, "nodes": o.settings.nodes, "pes": o.settings.pes, "policy": o.settings.policy,
                    "state_dir": o.state_dir.display().to_string(), "dashboard": dashboard,
                }))?;
            } else {
                emit(&format!("{addr}\n"));
                eprintln!(
                    "cluster up: {} nodes × {} PEs, policy {}; state in {} (stop with `cosched cluster down`)",
                    o.settings.nodes,
                    o.settings.pes,
                    o.settings.policy,
                    o.state_dir.display()
                );
                if let Some(url) = dashboard {
                    eprintln!("dashboard (read-only): {url}");
                }
            }
            Ok(0)
        }
        ClusterCmd::Spin {
            cpu,
            runnable,
            unfrozen,
            gaps,
        } => {
            let frozen = || {
                cosched_client::bench::frozen().ok_or_else(|| {
                    anyhow::anyhow!(
                        "cannot read frozen_usec from this process's cgroup.stat.local (no cgroup v2, or a kernel before 6.17)"
                    )
                })
            };
            let since_fork = || {
                cosched_client::bench::since_fork().ok_or_else(|| {
                    anyhow::anyhow!("cannot read this process's start time from /proc/self/stat")
                })
            };
            // From the fork, not from here: the job's run time counts the exec and start-up
            // too. Its cgroup is frozen only once every rank has started, so all of its
            // frozen time falls in this process's life.
            let started = if unfrozen { Some(since_fork()?) } else { None };
            let off = cosched_client::bench::spin_cpu(cpu);
            if let Some(started) = started {
                let (wall, frozen) = (since_fork()?, frozen()?);
                let end = now_us();
                println!("unfrozen_us {}", (wall - frozen).as_micros());
                println!("frozen_us {}", frozen.as_micros());
                println!("startup_us {}", started.as_micros());
                println!("end_unix_us {end}");
            }
            if gaps {
                let mut out = String::new();
                for (a, b) in off {
                    out += &format!("gap {a} {b}\n");
                }
                emit(&out);
            }
            if runnable {
                match cosched_client::bench::runnable() {
                    Some(d) => println!("runnable_us {}", d.as_micros()),
                    None => anyhow::bail!(
                        "cannot read /proc/self/schedstat (no schedstats in this kernel?)"
                    ),
                }
            }
            Ok(0)
        }
        ClusterCmd::UserKey {
            uid,
            out,
            key_file,
            expires,
            revoke,
            config,
        } => {
            let conf = ClusterConfig::find(config.as_deref())?;
            let key_file = key_file
                .or_else(|| conf.as_ref().and_then(|c| c.key.clone()))
                .unwrap_or_else(|| state_dir(None, conf.as_ref()).key_file());
            let key = Key::load(&key_file).with_context(
                || "a user key is derived from the cluster key: only its holder writes one",
            )?;
            // The machine manager issues the serial: from then on it accepts only this one.
            let conn = ConnArgs {
                config,
                ..ConnArgs::default()
            };
            let expires_us = expires.map(|d| now_us() + d.as_micros());
            let issued = conn.client()?.credential(uid, expires_us)?;
            if revoke {
                eprintln!(
                    "revoked uid {uid}'s credentials (serial {} is the only one accepted now, and none was written)",
                    issued.serial
                );
                return Ok(0);
            }
            let cred = cosched_proto::user_key::UserKey::derive(&key, uid, issued.serial);
            match out {
                Some(path) => {
                    cred.save(&path)?;
                    eprintln!(
                        "wrote uid {uid}'s user key to {}; give it to that user (chown {uid} it), who passes it as --user-key",
                        path.display()
                    );
                }
                None => emit(&cred.to_text()),
            }
            Ok(0)
        }
        ClusterCmd::RotateKey { grace, conn } => {
            let what = conn.client()?.rotate_key(grace.as_micros())?;
            eprintln!("rotate-key: {what}");
            Ok(0)
        }
        ClusterCmd::Bench(b) => bench(b),
        ClusterCmd::Model(a) => crate::cmd::launch_model::run(a),
        ClusterCmd::Down => {
            cluster::down(&StateDir::from_env())?;
            eprintln!("cluster down");
            Ok(0)
        }
    }
}

/// `cosched keygen`.
pub(super) fn keygen(out: Option<PathBuf>, config: Option<PathBuf>) -> anyhow::Result<i32> {
    let conf = ClusterConfig::find(config.as_deref())?;
    let path = out
        .or_else(|| conf.as_ref().and_then(|c| c.key.clone()))
        .unwrap_or_else(|| state_dir(None, conf.as_ref()).key_file());
    if path.symlink_metadata().is_ok() {
        anyhow::bail!(
            "{} exists already: a new key would lock out every host and user credential made from it; remove it first if that is what you want, or pass --out",
            path.display()
        );
    }
    Key::generate()?
        .save(&path)
        .with_context(|| format!("writing the key {}", path.display()))?;
    eprintln!(
        "wrote a new cluster key to {} (mode 0600); copy it to every host of the cluster",
        path.display()
    );
    Ok(0)
}

/// `cosched reconfigure`.
pub(super) fn reconfigure(conn: &ConnArgs) -> anyhow::Result<i32> {
    let what = conn.client()?.reconfigure()?;
    eprintln!("reconfigure: {what}");
    Ok(0)
}

fn load_or_create_key(path: &std::path::Path) -> anyhow::Result<Key> {
    if path.exists() {
        return Ok(Key::load(path)?);
    }
    let key = Key::generate()?;
    key.save(path)
        .with_context(|| format!("writing the new cluster key to {}", path.display()))?;
    // Standard error is the daemon's log: a line that cannot be written must not end it.
    let _ = writeln!(
        std::io::stderr(),
        "created a new cluster key in {}; give it to the node managers (--key-file)",
        path.display()
    );
    Ok(key)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "node".into())
}
