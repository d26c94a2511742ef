//! The machine manager and the node managers: the real-time driver of the job-level policies,
//! running real parallel jobs on real nodes.
//!
//! - [`bcast`]: file broadcast down the tree (the client's and the node manager's ends).
//! - [`mm`]: the machine manager (policy driver, job records, tree root, failure detection).
//! - [`nm`]: the node manager, a sans-IO core and its shell (tree node, launching,
//!   SIGSTOP/SIGCONT and freezer context switches, the node schemes, the rings it reads).
//! - [`jobio`]: a job's environment (`--export`, node list) and output file patterns.
//! - [`pmi`]: the PMI-1 server the node manager runs for MPI programs.
//! - [`proto`]: what daemons and clients say to each other.
//! - [`dashboard`]: the machine manager's read-only web dashboard (`--http`).
//! - [`db`]: the machine manager's SQLite (WAL) store.
//! - [`config`]: the cluster's configuration file (nodes, partitions, head, key, timeouts).
//! - [`client`]: a blocking client for user commands (submit, wait, status, …).
//! - [`bench`]: latency, gang-overhead and throughput benchmarks on an embedded cluster.
//! - [`launch_model`]: launch time and heartbeat cost against node count and fan-out, fitted
//!   on the launch benchmarks and extrapolated (seed 003 Fig. 10).
//! - [`cluster`]: an embedded cluster of local daemons (`cosched cluster up|down`, the demo).
//! - [`state_dir`]: the layout of a cluster's state directory (addresses, keys, pids, database).
//! - [`start_conditions`]: start conditions: dependencies, begin times, job arrays and their throttle.
//! - [`views`]: tables, the Ousterhout matrix and SWF export of job records.
//! - [`util`]: clock, atomic files, signals.
//! - [`dir`]: directories a root daemon works in, held open; files in them made without
//!   following links; its own directories checked before use.
//!
//! ```no_run
//! use cosched_daemon::cluster::{ClusterOptions, up};
//! let opts = ClusterOptions::new("/usr/local/bin/cosched".into(), "/tmp/cosched-demo".into(), 2, 2);
//! let cluster = up(&opts).unwrap();
//! let id = cluster.client.submit_simple(2, &["/bin/true"]).unwrap();
//! let jobs = cluster.client.wait(&[id], std::time::Duration::from_secs(10)).unwrap();
//! assert_eq!(jobs[0].state.as_str(), "completed");
//! cluster.down().unwrap();
//! ```

pub mod bcast;
pub mod bench;
pub mod client;
pub mod cluster;
pub mod config;
pub mod contain;
pub mod dashboard;
pub mod db;
pub mod dir;
pub mod jobio;
pub mod launch_model;
pub mod mm;
pub mod nm;
pub mod pmi;
pub mod proto;
pub mod start_conditions;
pub mod state_dir;
pub mod user_key;
pub mod util;
pub mod views;

pub use state_dir::StateDir;

use std::path::PathBuf;

/// What can go wrong in the daemons and their clients; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot listen on {addr}: {cause} (choose another address with --listen)")]
    Bind { addr: String, cause: std::io::Error },
    #[error(
        "cannot reach the machine manager at {addr}: {cause} (is the cluster up? `cosched cluster up`, or pass --mm ADDR)"
    )]
    Connect { addr: String, cause: std::io::Error },
    #[error(transparent)]
    Frame(#[from] cosched_storm::FrameError),
    #[error(transparent)]
    Db(#[from] db::DbError),
    #[error("{0}")]
    Config(String),
    #[error("the machine manager rejected this node: {0}")]
    Rejected(String),
    /// The machine manager answered the request with an error.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Timeout(String),
    #[error("state directory {dir}: {why}")]
    StateDir { dir: PathBuf, why: String },
    /// A directory a daemon keeps for itself (a work or scratch directory) that is not safe.
    #[error(transparent)]
    Dir(#[from] dir::DirError),
    #[error(transparent)]
    ClusterConfig(#[from] config::ConfigError),
}
