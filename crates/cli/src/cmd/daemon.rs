//! The resource manager's commands: the daemons (`mm`, `nm`), the embedded cluster
//! (`cluster up|down`) and the user commands (`submit`, `queue`, `wait`, `cancel`, `suspend`,
//! `resume`, `status`, `acct`, `output`). The work is in `cosched-daemon`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use cosched_core::{Dur, JobId, MachineShape};
use cosched_daemon::bcast::Staging;
use cosched_daemon::client::Client;
use cosched_daemon::cluster::{self, ClusterOptions};
use cosched_daemon::config::{ClusterConfig, parse_bytes};
use cosched_daemon::jobio;
use cosched_daemon::mm::ManagerSettings;
use cosched_daemon::proto::{JobInfo, JobIo, NodeOp, Request, Scope, StatusInfo, SubmitRequest};
use cosched_daemon::{StateDir, mm, nm, views};
use cosched_report::metrics::{MetricsOptions, Summary, summarize};
use cosched_sim::SimResult;
use cosched_storm::Key;
use cosched_storm::accept::Limits;

use super::batch::{self, JobOpts};
use super::policy_args::PolicyArgs;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run the machine manager (normally started by `cosched cluster up`)
    Mm(Box<MmArgs>),
    /// Run a node manager that joins the machine manager at --mm
    Nm(Box<NmArgs>),
    /// Start or stop an embedded cluster of local daemons
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Submit a parallel job: `cosched submit -n 4 -- ./prog args`, or a batch script with
    /// #SBATCH/#COSCHED lines: `cosched submit job.sh`; prints its id
    Submit(Box<SubmitArgs>),
    /// Run a job interactively: wait for PEs, stream every rank's output, Ctrl-C cancels;
    /// exits with the job's exit code
    Run(Box<super::interactive::RunArgs>),
    /// List waiting, running and recently ended jobs
    Queue(Box<QueueArgs>),
    /// Wait until jobs end; exit status 0 only if all completed with exit code 0
    Wait(Box<WaitArgs>),
    /// Cancel jobs (waiting or running)
    Cancel(Box<IdsArgs>),
    /// Stop a job (SIGSTOP) and keep it from running until `resume`
    Suspend(Box<IdArgs>),
    /// Let a suspended job run again
    Resume(Box<IdArgs>),
    /// Hold jobs: a queued job is not started, a running one is stopped, until `release`
    Hold(Box<IdsArgs>),
    /// Release held jobs
    Release(Box<IdsArgs>),
    /// Node map and Ousterhout matrix (which job each PE runs in each slot)
    Status(Box<StatusArgs>),
    /// Live view: node map, Ousterhout matrix with the active slot, jobs; keys suspend,
    /// resume and cancel the selected job (q quits)
    Top(Box<super::top::Args>),
    /// Accounting: one record per job (filters, columns), summary metrics; SWF export
    Acct(Box<super::acct::AcctArgs>),
    /// Print what a rank of a job wrote to stdout and stderr
    Output(Box<OutputArgs>),
    /// Broadcast a file down the tree to every node manager's scratch directory (pipelined
    /// chunks, each checked by its keyed hash on every node), as your copy for your jobs
    /// (`cosched-staged:NAME`), or published to everyone's with --publish; prints its name
    Bcast(Box<BcastArgs>),
    /// Take nodes out of service or back (administrators): `drain` (running jobs finish,
    /// nothing new starts), `down` (its jobs end now), `resume`; shown by `status`
    #[command(subcommand)]
    Node(NodeCmd),
    /// Write a new cluster key (64 hex digits, mode 0600, a new file: an existing one is
    /// never overwritten) to copy to every host of the cluster
    Keygen {
        /// Where [default: the configuration's `key`, else $COSCHED_STATE_DIR/key]
        #[arg(long)]
        out: Option<PathBuf>,
        /// The cluster's configuration file
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Have the machine manager read its configuration file again (as SIGHUP does): nodes
    /// added or removed, limits changed; it restarts in place, running jobs keep running and
    /// the accounting is kept
    Reconfigure(Box<ConnArgs>),
}

/// What `cosched node` does.
#[derive(clap::Subcommand)]
pub enum NodeCmd {
    /// Let the nodes' running jobs finish and start nothing new there (Slurm's DRAIN)
    Drain(Box<NodeArgs>),
    /// End the nodes' jobs now (node_failed, or requeued with --requeue) and start nothing
    /// there
    Down(Box<NodeArgs>),
    /// Put drained or down nodes back in service
    Resume(Box<NodeArgs>),
}

#[derive(clap::Args)]
pub struct NodeArgs {
    /// Node names or hostlists (`n[01-04]`)
    #[arg(required = true)]
    nodes: Vec<String>,
    /// Why (required for drain and down; kept with who and when)
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    conn: ConnArgs,
}

impl NodeCmd {
    fn parts(self) -> (NodeOp, Box<NodeArgs>) {
        match self {
            NodeCmd::Drain(a) => (NodeOp::Drain, a),
            NodeCmd::Down(a) => (NodeOp::Down, a),
            NodeCmd::Resume(a) => (NodeOp::Resume, a),
        }
    }
}

/// Drains, sets down or resumes nodes given by name or hostlist (`cosched node`, `scontrol
/// update nodename=… state=…`).
pub(super) fn node_op(
    conn: &ConnArgs,
    op: NodeOp,
    lists: &[String],
    reason: Option<&str>,
) -> anyhow::Result<i32> {
    let mut names = Vec::new();
    for l in lists {
        names.extend(cosched_slurm::hostlist::expand(l)?);
    }
    conn.client()?.node(op, &names, reason)?;
    let done = match op {
        NodeOp::Drain => "drained",
        NodeOp::Down => "set down",
        NodeOp::Resume => "resumed",
    };
    eprintln!("{done} {}", cosched_slurm::hostlist::compress(&names));
    Ok(0)
}

/// How a file is broadcast (`cosched bcast`, `cosched submit --bcast`).
#[derive(clap::Args, Clone)]
pub struct BcastOpts {
    /// Chunk size of a file broadcast (bytes, or with K, M; at most 1984K)
    #[arg(long, default_value = "512K", value_parser = parse_bytes)]
    pub(super) chunk: u64,
    /// Chunks of a file broadcast in flight (the sender reuses a slot once every node holds
    /// its chunk)
    #[arg(long, default_value_t = cosched_daemon::bcast::DEFAULT_SLOTS)]
    pub(super) slots: u32,
}

#[derive(clap::Args)]
pub struct BcastArgs {
    /// The file to send
    file: PathBuf,
    /// Name to stage it under, within each node manager's scratch directory (default: the
    /// file name and a hash prefix); an absolute path is taken as is by node managers not
    /// running as root
    #[arg(long)]
    dest: Option<String>,
    /// Publish it: a read-only copy every user's jobs may run as `cosched-staged:NAME` (when
    /// they have no copy of that name of their own); administrators only
    #[arg(long)]
    publish: bool,
    /// Only these nodes (names, comma-separated; default: every node in the tree)
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    #[command(flatten)]
    opts: BcastOpts,
    #[command(flatten)]
    conn: ConnArgs,
}

/// How to reach the machine manager.
#[derive(clap::Args, Clone, Default)]
pub struct ConnArgs {
    /// Machine manager address HOST:PORT (default: from $COSCHED_STATE_DIR/mm.addr)
    #[arg(long)]
    mm: Option<String>,
    /// Cluster key file (default: $COSCHED_STATE_DIR/key)
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Your user credential (from `cosched cluster user-key`): talk to the machine manager
    /// over TCP as that user, without the cluster key
    #[arg(long, conflicts_with = "key_file")]
    user_key: Option<PathBuf>,
    /// The cluster's configuration file, for the head address and the key [default:
    /// $COSCHED_CONFIG, else /etc/cosched/cosched.toml if it exists]
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Instead: what the communication monitors of this node (name or number) recorded for
    /// each rank of its jobs and of its last ended jobs (docs/monitor.md)
    #[arg(long)]
    node: Option<String>,
}

impl ConnArgs {
    /// How a broadcast over this connection is staged: whose copy it is follows the rule of
    /// submissions (this process's user, named; with a user credential, the credential's).
    pub(super) fn staging(&self, dest: Option<&str>, scope: Scope) -> Staging {
        Staging {
            dest: dest.map(str::to_string),
            scope,
            user: self.user_key.is_none().then(current_uid),
        }
    }

    /// A client of the machine manager: `--mm` and `--key-file` if given; else its local
    /// socket in the state directory if there is one; else the configuration's `head` and
    /// `key`; else the state directory's `mm.addr` and `key`.
    pub(super) fn client(&self) -> anyhow::Result<Client> {
        let conf = ClusterConfig::find(self.config.as_deref())?;
        let mm = self
            .mm
            .clone()
            .or_else(|| conf.as_ref().and_then(|c| c.head.clone()));
        if let Some(file) = &self.user_key {
            let cred = cosched_daemon::user_key::UserKey::load(file)?;
            let addr = match mm {
                Some(a) => a,
                None => StateDir::from_env().addr()?,
            };
            return Ok(Client::with_user_key(addr, cred, file));
        }
        let key = self
            .key_file
            .clone()
            .or_else(|| conf.as_ref().and_then(|c| c.key.clone()));
        let dir = state_dir(None, conf.as_ref());
        if self.mm.is_none() && self.key_file.is_none() && dir.sock_file().exists() {
            // On the head node: the machine manager's socket, where the kernel vouches for
            // the user, before the cluster key (which users cannot read).
            return Ok(Client::from_state_dir(&dir, None, None)?);
        }
        Ok(Client::from_state_dir(&dir, mm.as_deref(), key.as_deref())?)
    }
}

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
                .clamp(Dur::ZERO, cosched_daemon::mm::MAX_KILL_WAIT),
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
    fn config(&self) -> anyhow::Result<cosched_daemon::nm::scheme::NodeSchemeConfig> {
        cosched_daemon::nm::scheme::NodeSchemeConfig::parse(
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
    Model(super::launch_model::ModelArgs),
    /// Burn this much CPU time and exit (the CPU-bound rank of `bench gang`)
    #[command(hide = true)]
    Spin { cpu: Dur },
}

#[derive(clap::Subcommand)]
pub enum BenchCmd {
    /// Submit-to-running latency of a job with one rank per node, for several node counts
    Latency {
        /// Node-manager counts to measure
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        nodes: Vec<u32>,
        /// Tree fan-out
        #[arg(long, default_value_t = 8)]
        fanout: u32,
        /// Measured runs per node count (after one warm-up)
        #[arg(long, default_value_t = 7)]
        runs: usize,
        #[arg(long)]
        json: bool,
    },
    /// Slowdown of two CPU-bound jobs time-sliced at MPL 2, against FCFS, per quantum, and
    /// where the quanta went: per switch at the node, strobe to outgoing job frozen and to
    /// incoming job thawed, late switches, the daemons' CPU per switch
    Gang {
        /// CPU time each rank burns
        #[arg(long, default_value = "2s")]
        cpu: Dur,
        /// Quanta to measure
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1ms,2ms,5ms,10ms,50ms,100ms"
        )]
        quanta: Vec<Dur>,
        /// PEs of the single node (one rank per PE per job)
        #[arg(long, default_value_t = 2)]
        pes: u32,
        /// Runs per setting (the best is reported: other load only adds time)
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[arg(long)]
        json: bool,
    },
    /// Load held by the machine manager: submit latency percentiles and its CPU per job
    /// while a backlog of queued jobs builds up, then for a burst of concurrent submissions
    Load {
        /// Jobs queued behind one that never ends (in phases of 2,000)
        #[arg(long, default_value_t = 10_000)]
        backlog: usize,
        /// Submissions in the burst onto the backlog
        #[arg(long, default_value_t = 1000)]
        burst: usize,
        /// Concurrent clients of the burst
        #[arg(long, default_value_t = 8)]
        clients: usize,
        #[arg(long)]
        json: bool,
    },
    /// Launch of do-nothing programs padded to 4/8/12 MB on every node (`submit --bcast`):
    /// send and execute times, submit to last rank started, idle and under CPU load
    Launch {
        /// Node-manager counts to measure
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        nodes: Vec<u32>,
        /// Program sizes, MB
        #[arg(long, value_delimiter = ',', default_value = "4,8,12")]
        mb: Vec<u32>,
        /// Loads to measure under: idle, cpu (every CPU kept busy), net (a TCP flood over
        /// loopback)
        #[arg(long, value_delimiter = ',', default_value = "idle,cpu")]
        load: Vec<String>,
        /// Tree fan-out
        #[arg(long, default_value_t = 8)]
        fanout: u32,
        #[command(flatten)]
        bcast: BcastOpts,
        /// Measured runs per setting (after one warm-up)
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Also append one row per setting to this CSV (`cluster model --from` reads it)
        #[arg(long)]
        csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Latency of COMPARE-AND-WRITE (the heartbeat's query) against node count and fan-out,
    /// on the node managers' tree transports in this process
    Compare {
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        nodes: Vec<u32>,
        #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
        fanout: Vec<u32>,
        /// Measured queries per setting (after one that connects the tree)
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Also append one row per setting to this CSV (`cluster model --from` reads it)
        #[arg(long)]
        csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Broadcast bandwidth against chunk size × slots (seed 003 Fig. 8)
    Bcast {
        #[arg(long, default_value_t = 16)]
        nodes: u32,
        #[arg(long, default_value_t = 8)]
        fanout: u32,
        /// File size, MB
        #[arg(long, default_value_t = 12)]
        mb: u32,
        /// Chunk sizes (bytes, or with K, M)
        #[arg(long, value_delimiter = ',', default_value = "64K,128K,256K,512K,1M", value_parser = parse_bytes)]
        chunks: Vec<u64>,
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        slots: Vec<u32>,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Also append one row per setting to this CSV (`cluster model --from` reads it)
        #[arg(long)]
        csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Sustained throughput of trivial 1-PE jobs, submitted to completed
    Throughput {
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        #[arg(long, default_value_t = 4)]
        nodes: u32,
        #[arg(long, default_value_t = 2)]
        pes: u32,
        #[arg(long)]
        json: bool,
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

#[derive(clap::Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub(super) job: JobOpts,
    #[command(flatten)]
    pub(super) conn: ConnArgs,
    /// Broadcast FILE to every node first and run the staged copies: argv[0] of the command
    /// is replaced by the node's copy (the command may then be left out: FILE alone runs)
    #[arg(long, value_name = "FILE")]
    pub(super) bcast: Option<PathBuf>,
    #[command(flatten)]
    pub(super) bcast_opts: BcastOpts,
    /// The program and its arguments (a `--` before them is optional), or a batch script
    /// (a file beginning with #!) and its arguments
    #[arg(trailing_var_arg = true, required_unless_present = "bcast")]
    pub(super) cmd: Vec<String>,
}

/// Broadcasts `file` with `opts` (to `nodes`, or all), staged as `staging` says.
pub(super) fn bcast_file(
    client: &Client,
    file: &std::path::Path,
    staging: &Staging,
    opts: &BcastOpts,
    nodes: &[String],
) -> anyhow::Result<cosched_daemon::bcast::Sent> {
    let chunk = u32::try_from(opts.chunk).unwrap_or(u32::MAX);
    Ok(cosched_daemon::bcast::send_file(
        client, file, staging, chunk, opts.slots, nodes,
    )?)
}

/// `submit --bcast FILE` (and `run --bcast`): the copy staged for this job alone, and the
/// command line that runs it (argv\[0\] replaced, or FILE alone when there is no command).
pub(super) fn bcast_for_job(
    conn: &ConnArgs,
    client: &Client,
    file: &std::path::Path,
    opts: &BcastOpts,
    cmd: &mut Vec<String>,
) -> anyhow::Result<cosched_daemon::bcast::Sent> {
    let sent = bcast_file(client, file, &conn.staging(None, Scope::Job), opts, &[])?;
    let staged = format!("{}{}", cosched_daemon::bcast::STAGED_PREFIX, sent.dest);
    match cmd.first_mut() {
        Some(c0) => *c0 = staged,
        None => cmd.push(staged),
    }
    Ok(sent)
}

#[derive(clap::Args)]
pub struct IdsArgs {
    /// Job ids
    #[arg(required = true)]
    ids: Vec<u64>,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct QueueArgs {
    /// Every job ever submitted, not only live and recently ended ones
    #[arg(long)]
    all: bool,
    /// Each live job's expected start and end: a copy of the cluster's policy run forward,
    /// every job taking its time limit and nothing new arriving (not for external policies)
    #[arg(long)]
    forecast: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct WaitArgs {
    /// Job ids
    #[arg(required = true)]
    ids: Vec<u64>,
    /// Give up after this long (exit status 2)
    #[arg(long, default_value = "1h")]
    timeout: Dur,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct IdArgs {
    /// Job id
    id: u64,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct OutputArgs {
    /// Job id
    id: u64,
    /// Rank whose output to print
    #[arg(long, default_value_t = 0)]
    rank: u32,
    /// Print the end of a file longer than 4 MiB rather than its beginning
    #[arg(long)]
    tail: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

/// The state directory: `--state-dir`, else $COSCHED_STATE_DIR, else the configuration's
/// `state_dir`, else the default.
fn state_dir(flag: Option<PathBuf>, conf: Option<&ClusterConfig>) -> StateDir {
    let from_conf = conf
        .and_then(|c| c.state_dir.clone())
        .filter(|_| std::env::var_os("COSCHED_STATE_DIR").is_none());
    flag.or(from_conf)
        .map_or_else(StateDir::from_env, StateDir::new)
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

/// A benchmark's table as text: a header line and one line per row, columns padded, the
/// first `left` columns aligned left and the others (figures) right.
fn bench_table(header: &[&str], left: usize, rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(header);
    for r in rows {
        t.add_row(r);
    }
    for i in left..header.len() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    format!("{t}\n")
}

/// Prints to stdout; a reader that went away (`| head`) is not an error.
pub(super) fn emit(text: &str) {
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// `submit --monitor`: the PMPI shim goes first in the ranks' LD_PRELOAD. It is
/// `$COSCHED_MPISHIM`, else beside the binary (`cargo build` puts it there), else in the
/// package's library directory (`/usr/bin/cosched` → `/usr/lib/cosched/`).
fn preload_shim(env: &mut Vec<(String, String)>) -> anyhow::Result<()> {
    const NAME: &str = "libcosched_mpishim.so";
    let candidates: Vec<PathBuf> = match std::env::var_os("COSCHED_MPISHIM") {
        Some(p) => vec![PathBuf::from(p)],
        None => {
            let exe = std::env::current_exe()?;
            let bin = exe.parent().unwrap_or(std::path::Path::new("."));
            vec![bin.join(NAME), bin.join("../lib/cosched").join(NAME)]
        }
    };
    let Some(shim) = candidates.iter().find(|p| p.is_file()) else {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "--monitor: {NAME} not found at {} (`cargo build --release` builds it beside the cosched binary; the package installs it in /usr/lib/cosched; or set COSCHED_MPISHIM)",
            tried.join(" nor ")
        );
    };
    let shim = shim.canonicalize()?.display().to_string();
    let old = env
        .iter()
        .position(|(k, _)| k == "LD_PRELOAD")
        .map(|i| env.remove(i).1);
    let value = match old {
        Some(o) if !o.is_empty() => format!("{shim}:{o}"),
        _ => shim,
    };
    env.push(("LD_PRELOAD".into(), value));
    Ok(())
}

pub(super) fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    emit(&format!("{}\n", serde_json::to_string_pretty(v)?));
    Ok(())
}

fn now_us() -> i64 {
    cosched_daemon::util::now().as_micros()
}

pub fn run(c: Command) -> anyhow::Result<i32> {
    match c {
        Command::Mm(a) => {
            cosched_daemon::util::init_logging();
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
            let mut cfg = mm::MmConfig::new(dir.root().to_path_buf(), key, nodes, pes);
            cfg.key_file = Some(key_file);
            cfg.listen = a
                .listen
                .or_else(|| {
                    conf.as_ref()
                        .and_then(|c| c.listen.clone().or(c.head.clone()))
                })
                .unwrap_or_else(|| mm::DEFAULT_LISTEN.to_string());
            cfg.settings = a.manager.settings(nodes, pes, conf.as_ref());
            cfg.settings.check().map_err(anyhow::Error::msg)?;
            cfg.http = a.http;
            dir.write_pid(&dir.mm_pid_file(), std::process::id() as i32)?;
            match mm::run_blocking(cfg)? {
                mm::Exit::Shutdown => Ok(0),
                mm::Exit::Reconfigure => {
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
        Command::Nm(a) => {
            cosched_daemon::util::init_logging();
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
            let cfg = nm::NmConfig {
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
            nm::run_blocking(cfg)?;
            Ok(0)
        }
        Command::Cluster(ClusterCmd::Up(a)) => {
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
        Command::Cluster(ClusterCmd::Spin { cpu }) => {
            cosched_daemon::bench::spin_cpu(cpu);
            Ok(0)
        }
        Command::Cluster(ClusterCmd::UserKey {
            uid,
            out,
            key_file,
            expires,
            revoke,
            config,
        }) => {
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
            let cred = cosched_daemon::user_key::UserKey::derive(&key, uid, issued.serial);
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
        Command::Cluster(ClusterCmd::RotateKey { grace, conn }) => {
            let what = conn.client()?.rotate_key(grace.as_micros())?;
            eprintln!("rotate-key: {what}");
            Ok(0)
        }
        Command::Cluster(ClusterCmd::Bench(b)) => bench(b),
        Command::Cluster(ClusterCmd::Model(a)) => super::launch_model::run(a),
        Command::Cluster(ClusterCmd::Down) => {
            cluster::down(&StateDir::from_env())?;
            eprintln!("cluster down");
            Ok(0)
        }
        Command::Submit(a) => {
            let client = a.conn.client()?;
            let mut cmd = a.cmd;
            if let Some(file) = &a.bcast {
                let sent = bcast_for_job(&a.conn, &client, file, &a.bcast_opts, &mut cmd)?;
                eprintln!(
                    "staged {} ({} bytes) on {} nodes in {:.1} ms",
                    file.display(),
                    sent.bytes,
                    sent.nodes.len(),
                    sent.took.as_secs_f64() * 1e3
                );
            }
            let mut job = a.job;
            if let Some(file) = &a.bcast
                && job.name.is_none()
            {
                job.name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            }
            let mut req = submit_request(job, cmd)?;
            if a.conn.user_key.is_some() {
                // The credential says who submits; this process's uid may be another's.
                req.user = None;
            }
            let tasks = req.sched.array.as_ref().map(|s| s.indices.len());
            let id = client.submit(req)?;
            if a.conn.json {
                let ids: Vec<u64> = (id.0..id.0 + tasks.unwrap_or(1) as u64).collect();
                print_json(&serde_json::json!({ "id": id.0, "ids": ids }))?;
            } else {
                emit(&format!("{id}\n"));
                if let Some(n) = tasks {
                    eprintln!(
                        "array job {id}: {n} tasks, jobs {id}..{} (`--dependency afterok:{id}` waits for them all)",
                        id.0 + n as u64 - 1
                    );
                }
            }
            Ok(0)
        }
        Command::Run(a) => super::interactive::run(*a),
        Command::Hold(a) => many(&a, Request::Suspend, "held"),
        Command::Release(a) => many(&a, Request::Resume, "released"),
        Command::Queue(a) => {
            let now = now_us();
            // Live jobs and those ended in the last five minutes, selected by the machine
            // manager and fetched page by page.
            let q = cosched_daemon::proto::JobQuery {
                since_us: (!a.all).then_some(now - 300_000_000),
                ..Default::default()
            };
            let client = a.conn.client()?;
            let shown: Vec<JobInfo> = client.query(q, None)?;
            let forecast = if a.forecast {
                Some(client.forecast()?)
            } else {
                None
            };
            if a.conn.json {
                let jobs: Vec<_> = shown
                    .iter()
                    .map(|j| {
                        let mut rec = views::acct_record(j);
                        if let Some(e) = forecast
                            .as_deref()
                            .and_then(|f| f.iter().find(|e| e.job == j.record.id))
                        {
                            rec["expected_start"] = e.start.map(|t| t.as_secs_f64()).into();
                            rec["expected_end"] = e.end.map(|t| t.as_secs_f64()).into();
                        }
                        rec
                    })
                    .collect();
                print_json(&serde_json::json!({ "jobs": jobs }))?;
            } else {
                emit(&views::jobs_table_forecast(
                    &shown,
                    now,
                    forecast.as_deref(),
                ));
            }
            Ok(0)
        }
        Command::Wait(a) => {
            let ids: Vec<JobId> = a.ids.iter().map(|&i| JobId(i)).collect();
            let timeout = Duration::from_micros(a.timeout.as_micros().max(0) as u64);
            let jobs = a.conn.client()?.wait(&ids, timeout)?;
            let ok = jobs
                .iter()
                .all(|j| j.state.as_str() == "completed" && j.record.exit_code == Some(0));
            if a.conn.json {
                print_json(&serde_json::json!({
                    "ok": ok, "jobs": jobs.iter().map(views::acct_record).collect::<Vec<_>>()
                }))?;
            } else {
                emit(&views::jobs_table(&jobs, now_us()));
            }
            Ok(if ok { 0 } else { 1 })
        }
        Command::Cancel(a) => many(&a, Request::Cancel, "cancelled"),
        Command::Suspend(a) => simple(&a, Request::Suspend(JobId(a.id)), "suspended"),
        Command::Resume(a) => simple(&a, Request::Resume(JobId(a.id)), "resumed"),
        Command::Status(a) if a.node.is_some() => {
            let m = a
                .conn
                .client()?
                .monitor(a.node.as_deref().expect("checked"))?;
            if a.conn.json {
                print_json(&m)?;
            } else {
                emit(&views::monitor_text(&m));
            }
            Ok(0)
        }
        Command::Status(a) => {
            let conn = &a.conn;
            let st = conn.client()?.status()?;
            if conn.json {
                print_json(&st)?;
            } else {
                emit(&views::status_text(&st));
            }
            Ok(0)
        }
        Command::Node(c) => {
            let (op, a) = c.parts();
            node_op(&a.conn, op, &a.nodes, a.reason.as_deref())
        }
        Command::Keygen { out, config } => {
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
        Command::Reconfigure(conn) => {
            let what = conn.client()?.reconfigure()?;
            eprintln!("reconfigure: {what}");
            Ok(0)
        }
        Command::Acct(a) => super::acct::run(*a),
        Command::Top(a) => super::top::run(*a),
        Command::Bcast(a) => {
            let client = a.conn.client()?;
            let scope = if a.publish {
                Scope::Public
            } else {
                Scope::User
            };
            let staging = a.conn.staging(a.dest.as_deref(), scope);
            let sent = bcast_file(&client, &a.file, &staging, &a.opts, &a.nodes)?;
            let secs = sent.took.as_secs_f64();
            if a.conn.json {
                print_json(&serde_json::json!({
                    "dest": sent.dest, "bytes": sent.bytes, "nodes": sent.nodes,
                    "seconds": secs, "streamed_seconds": sent.streamed.as_secs_f64(), "mb_per_s": sent.bytes as f64 / secs / 1e6,
                }))?;
            } else {
                emit(&format!(
                    "{} ({} bytes) staged as {} on {} nodes in {:.1} ms ({:.1} MB/s)\n",
                    a.file.display(),
                    sent.bytes,
                    sent.dest,
                    sent.nodes.len(),
                    secs * 1e3,
                    sent.bytes as f64 / secs / 1e6
                ));
            }
            Ok(0)
        }
        Command::Output(a) => {
            let o = a.conn.client()?.rank_output(JobId(a.id), a.rank, a.tail)?;
            // A file cut to MAX_OUTPUT is said so, with its size.
            if !a.conn.json {
                let part = if a.tail { "last" } else { "first" };
                for (what, got, size) in [
                    ("output", o.stdout.len() as u64, o.sizes.0),
                    ("error", o.stderr.len() as u64, o.sizes.1),
                ] {
                    if size > got {
                        eprintln!(
                            "cosched: job {} rank {}'s standard {what} is {size} bytes; showing its {part} {got} (--tail shows the end; the whole file stays on the node)",
                            a.id, a.rank
                        );
                    }
                }
            }
            let (out, err, files) = (&o.stdout, &o.stderr, &o.files);
            if !files.is_empty() && !a.conn.json {
                eprintln!(
                    "cosched: job {} rank {} wrote to {} (its --output/--error)",
                    a.id,
                    a.rank,
                    files.join(" and ")
                );
            }
            if a.conn.json {
                print_json(&serde_json::json!({
                    "id": a.id, "rank": a.rank,
                    "stdout": String::from_utf8_lossy(out), "stderr": String::from_utf8_lossy(err),
                    "files": files,
                    "stdout_size": o.sizes.0, "stderr_size": o.sizes.1,
                    "truncated": o.cut(), "tail": o.tail,
                }))?;
            } else {
                let _ = std::io::stdout().write_all(out);
                let _ = std::io::stderr().write_all(err);
            }
            Ok(0)
        }
    }
}

/// Appends a bench's rows to `--csv FILE` when one was given (what `cluster model` fits on).
fn to_csv(
    csv: &Option<PathBuf>,
    rows: impl Iterator<Item = cosched_daemon::launch_model::Measurement>,
) -> anyhow::Result<()> {
    if let Some(path) = csv {
        let m: Vec<_> = rows.collect();
        cosched_daemon::launch_model::append_csv(path, &m)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn bench(b: BenchCmd) -> anyhow::Result<i32> {
    use cosched_daemon::bench;
    use cosched_daemon::launch_model::Measurement;
    let exe = std::env::current_exe().context("finding the cosched executable")?;
    let dir = bench::scratch();
    let result = (|| -> anyhow::Result<()> {
        match b {
            BenchCmd::Latency {
                nodes,
                fanout,
                runs,
                json,
            } => {
                let rows = bench::latency(&exe, &dir, &nodes, fanout, runs.max(1))?;
                if json {
                    return print_json(&rows);
                }
                emit(&bench_table(
                    &["NODES", "DEPTH", "MEDIAN(ms)", "MAX(ms)", "FIRST RANK(ms)"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.tree_depth.to_string(),
                            format!("{:.1}", r.median_ms),
                            format!("{:.1}", r.max_ms),
                            format!("{:.1}", r.first_rank_median_ms),
                        ]
                    }),
                ));
            }
            BenchCmd::Launch {
                nodes,
                mb,
                load,
                fanout,
                bcast,
                runs,
                csv,
                json,
            } => {
                let setup = bench::LaunchSetup {
                    fanout,
                    chunk: u32::try_from(bcast.chunk).unwrap_or(u32::MAX),
                    slots: bcast.slots,
                    runs: runs.max(1),
                };
                let rows = bench::launch(&exe, &dir, &nodes, &mb, &load, &setup)?;
                to_csv(&csv, rows.iter().map(|r| Measurement::of_launch(r, &setup)))?;
                if json {
                    return print_json(&rows);
                }
                emit(&bench_table(
                    &[
                        "NODES",
                        "DEPTH",
                        "MB",
                        "LOAD",
                        "SEND(ms)",
                        "EXECUTE(ms)",
                        "TOTAL(ms)",
                        "MAX(ms)",
                    ],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.tree_depth.to_string(),
                            r.mb.to_string(),
                            r.load.to_string(),
                            format!("{:.1}", r.send_ms),
                            format!("{:.1}", r.execute_ms),
                            format!("{:.1}", r.total_ms),
                            format!("{:.1}", r.total_max_ms),
                        ]
                    }),
                ));
            }
            BenchCmd::Bcast {
                nodes,
                fanout,
                mb,
                chunks,
                slots,
                runs,
                csv,
                json,
            } => {
                let chunks: Vec<u32> = chunks
                    .iter()
                    .map(|&c| u32::try_from(c).unwrap_or(u32::MAX))
                    .collect();
                let rows =
                    bench::bcast(&exe, &dir, nodes, fanout, mb, &chunks, &slots, runs.max(1))?;
                to_csv(
                    &csv,
                    rows.iter().map(|r| Measurement::of_bcast(r, fanout, mb)),
                )?;
                if json {
                    return print_json(&rows);
                }
                emit(&bench_table(
                    &["NODES", "CHUNK(KiB)", "SLOTS", "MEDIAN(ms)", "MB/s"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.chunk_kib.to_string(),
                            r.slots.to_string(),
                            format!("{:.1}", r.median_ms),
                            format!("{:.1}", r.mb_per_s),
                        ]
                    }),
                ));
            }
            BenchCmd::Compare {
                nodes,
                fanout,
                runs,
                csv,
                json,
            } => {
                let rows = bench::compare(&nodes, &fanout, runs.max(1))?;
                to_csv(&csv, rows.iter().map(Measurement::of_compare))?;
                if json {
                    return print_json(&rows);
                }
                emit(&bench_table(
                    &["NODES", "FANOUT", "DEPTH", "MEDIAN(ms)", "MAX(ms)"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.fanout.to_string(),
                            r.tree_depth.to_string(),
                            format!("{:.3}", r.median_ms),
                            format!("{:.3}", r.max_ms),
                        ]
                    }),
                ));
            }
            BenchCmd::Gang {
                cpu,
                quanta,
                pes,
                runs,
                json,
            } => {
                let rows = bench::gang(&exe, &dir, pes, cpu, &quanta, runs.max(1))?;
                if json {
                    return print_json(&rows);
                }
                let mut t = bench_table(
                    &["QUANTUM", "MAKESPAN(s)", "SLOWDOWN"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.quantum_ms
                                .map(|q| format!("{q}ms"))
                                .unwrap_or_else(|| "fcfs".into()),
                            format!("{:.3}", r.makespan_s),
                            format!("{:.1}%", r.slowdown_pct),
                        ]
                    }),
                );
                if let Some(best) = rows
                    .iter()
                    .filter(|r| r.quantum_ms.is_some() && r.slowdown_pct <= 2.0)
                    .map(|r| r.quantum_ms.unwrap_or(0.0))
                    .reduce(f64::min)
                {
                    t += &format!("smallest quantum with slowdown <= 2%: {best}ms\n");
                } else {
                    t += "no quantum measured has a slowdown <= 2%\n";
                }
                // Where the quanta went: per switch at the node, from the strobe's arrival.
                t += "\nswitches at the node (strobe -> outgoing frozen -> incoming thawed, us: median/p90):\n";
                t += &bench_table(
                    &[
                        "QUANTUM",
                        "SWITCHES",
                        "LATE",
                        "INTERVAL(ms)",
                        "FROZEN(us)",
                        "THAWED(us)",
                        "MM-CPU/SW(us)",
                        "NM-CPU/SW(us)",
                    ],
                    0,
                    rows.iter().filter_map(|r| {
                        let (q, b) = (r.quantum_ms?, r.switches.as_ref()?);
                        Some(vec![
                            format!("{q}ms"),
                            b.switches.to_string(),
                            b.late.to_string(),
                            format!("{:.2}", b.interval_ms),
                            format!("{:.0}/{:.0}", b.frozen_p50_us, b.frozen_p90_us),
                            format!("{:.0}/{:.0}", b.thawed_p50_us, b.thawed_p90_us),
                            format!("{:.0}", b.mm_cpu_us),
                            format!("{:.0}", b.nm_cpu_us),
                        ])
                    }),
                );
                emit(&t);
            }
            BenchCmd::Load {
                backlog,
                burst,
                clients,
                json,
            } => {
                let rows = bench::load(&exe, &dir, backlog, burst, clients)?;
                if json {
                    return print_json(&rows);
                }
                emit(&bench_table(
                    &[
                        "PHASE",
                        "SUBMITS",
                        "P50(ms)",
                        "P95(ms)",
                        "P99(ms)",
                        "MAX(ms)",
                        "MM CPU/JOB(ms)",
                    ],
                    1,
                    rows.iter().map(|r| {
                        vec![
                            r.what.to_string(),
                            r.submits.to_string(),
                            format!("{:.2}", r.p50_ms),
                            format!("{:.2}", r.p95_ms),
                            format!("{:.2}", r.p99_ms),
                            format!("{:.2}", r.max_ms),
                            format!("{:.3}", r.mm_cpu_ms_per_job),
                        ]
                    }),
                ));
            }
            BenchCmd::Throughput {
                jobs,
                nodes,
                pes,
                json,
            } => {
                let r = bench::throughput(&exe, &dir, nodes, pes, jobs)?;
                if json {
                    return print_json(&r);
                }
                emit(&format!(
                    "{} trivial jobs on {} nodes x {} PEs: {:.2} s, {:.1} jobs/s\n",
                    r.jobs, r.nodes, r.pes, r.elapsed_s, r.jobs_per_s
                ));
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|_| 0)
}

/// The summary `cosched sim` prints, of a real run: every ended job that ran, its runtime
/// being the time it actually ran (stopped time excluded).
pub(super) fn run_summary(jobs: &[JobInfo], st: &StatusInfo) -> Summary {
    let ran: Vec<&JobInfo> = jobs
        .iter()
        .filter(|j| j.record.start.is_some() && j.record.end.is_some())
        .collect();
    let result = SimResult {
        policy: st.policy.clone(),
        machine: MachineShape::flat(st.nodes_total.max(1), st.pes_per_node.max(1)),
        records: ran.iter().map(|j| j.record.clone()).collect(),
        runtimes: ran.iter().map(|j| Dur::from_micros(j.run_us)).collect(),
        events: 0,
        decisions: 0,
        unfinished: jobs.iter().filter(|j| !j.state.is_final()).count(),
        policy_stats: Vec::new(),
        usage: None,
    };
    summarize(&result, &MetricsOptions::default())
}

/// Holds or releases each job; every id is tried, and the exit status is 1 if any failed.
fn many(a: &IdsArgs, req: fn(JobId) -> Request, done: &str) -> anyhow::Result<i32> {
    let client = a.conn.client()?;
    let mut results = Vec::new();
    let mut failed = false;
    for &id in &a.ids {
        match client.simple(req(JobId(id))) {
            Ok(()) => {
                results.push(serde_json::json!({ "id": id, "result": done }));
                if !a.conn.json {
                    emit(&format!("job {id} {done}\n"));
                }
            }
            Err(e) => {
                failed = true;
                results.push(serde_json::json!({ "id": id, "error": e.to_string() }));
                if !a.conn.json {
                    eprintln!("error: job {id}: {e}");
                }
            }
        }
    }
    if a.conn.json {
        print_json(&serde_json::json!({ "jobs": results }))?;
    }
    Ok(if failed { 1 } else { 0 })
}

/// The submission of a command, or of a batch script with its directives (the command
/// line's options win over them). The warnings of Slurm options cosched ignores go to
/// stderr; `COSCHED_SLURM_STRICT=1` refuses them instead.
pub(super) fn submit_request(cli: JobOpts, mut cmd: Vec<String>) -> anyhow::Result<SubmitRequest> {
    let mut opts = cli;
    let mut default_name = None;
    if let Some(first) = cmd.first().cloned()
        && batch::is_script(std::path::Path::new(&first))
    {
        let strict = cosched_slurm::options::strict_from_env(
            std::env::var("COSCHED_SLURM_STRICT").ok().as_deref(),
        );
        let script =
            batch::read_script(std::path::Path::new(&first), strict).map_err(anyhow::Error::msg)?;
        for w in &script.slurm.warnings {
            eprintln!("{w}");
        }
        opts = opts.or(script.opts);
        let path = std::fs::canonicalize(&first).with_context(|| format!("finding {first}"))?;
        default_name = path.file_name().map(|f| f.to_string_lossy().into_owned());
        // Run through its interpreter, as sbatch does: the script needs no execute bit.
        let mut full = script.interpreter;
        full.push(path.display().to_string());
        full.extend(cmd.drain(1..));
        cmd = full;
    }
    request_of(&opts, cmd, default_name)
}

/// The submission of `cmd` with `opts` (a script already resolved into its interpreter and
/// path); `default_name` names the job when `opts` do not.
pub(crate) fn request_of(
    opts: &JobOpts,
    cmd: Vec<String>,
    default_name: Option<String>,
) -> anyhow::Result<SubmitRequest> {
    let procs = opts.ranks().map_err(anyhow::Error::msg)?;
    let export = opts.export.clone().unwrap_or_else(|| "ALL".into());
    let mut env =
        jobio::parse_export(&export, &jobio::current_environ()).map_err(anyhow::Error::msg)?;
    if opts.monitor {
        preload_shim(&mut env)?;
    }
    let cwd = match &opts.chdir {
        Some(d) => std::env::current_dir().unwrap_or_default().join(d),
        None => std::env::current_dir().unwrap_or_default(),
    };
    Ok(SubmitRequest {
        procs,
        time_limit_us: opts.time.map(|d| d.as_micros()),
        class: opts.class.clone(),
        name: opts.name.clone().or(default_name),
        cmd,
        cwd: cwd.display().to_string(),
        user: Some(current_uid()),
        io: JobIo {
            env: Some(env),
            output: opts.output.clone(),
            error: opts.error.clone(),
            array: None,
            mpi: opts.mpi.unwrap_or_default(),
            batch: false,
        },
        sched: opts.schedule(),
        layout: opts.layout(),
        hold: opts.hold,
        mem: opts.mem_limit(),
    })
}

fn simple(a: &IdArgs, req: Request, done: &str) -> anyhow::Result<i32> {
    a.conn.client()?.simple(req)?;
    if a.conn.json {
        print_json(&serde_json::json!({ "id": a.id, "result": done }))?;
    } else {
        emit(&format!("job {} {done}\n", a.id));
    }
    Ok(0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "node".into())
}

fn current_uid() -> u32 {
    // /proc/self belongs to this process's user.
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}
