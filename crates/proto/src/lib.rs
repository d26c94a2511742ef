//! What the machine manager, the node managers and their clients share: the messages they
//! say to each other, the cluster's configuration and state directory, the directories a root
//! daemon works in, job records and how they are shown, and the one error type they report.
//! The daemons themselves are `cosched-mm` and `cosched-nm`; the user's side is
//! `cosched-client`.
//!
//! - [`proto`]: what daemons and clients say to each other.
//! - [`bcast`]: what both ends of a file broadcast agree on (chunk sizes, the variables the
//!   machine manager compares, staged names, the scratch directory); the ends themselves are
//!   in `cosched-client`, `cosched-mm` and `cosched-nm`.
//! - [`jobio`]: a job's environment (`--export`, node list) and output file patterns.
//! - [`names`]: the name service's requests and answers (`MPI_Publish_name` and kin).
//! - [`start_conditions`]: start conditions: dependencies, begin times, job arrays and their
//!   throttle (said by the client, enforced by the machine manager).
//! - [`config`]: the cluster's configuration file (nodes, partitions, head, key, timeouts).
//! - [`state_dir`]: the layout of a cluster's state directory (addresses, keys, pids, database).
//! - [`user_key`]: a user's credential, derived from the cluster key.
//! - [`rotation`]: a gang rotation announced ahead (slots and the instants they start).
//! - [`views`]: tables, the Ousterhout matrix and SWF export of job records.
//! - [`util`]: clock, atomic files, signals, accounts, logging.
//! - [`dir`]: directories a root daemon works in, held open; files in them made without
//!   following links; its own directories checked before use.
//!
//! No `unsafe` outside `sys`, the C library calls no safe wrapper offers.
#![deny(unsafe_code)]

pub mod bcast;
pub mod config;
pub mod dir;
pub mod jobio;
pub mod names;
pub mod proto;
pub mod rotation;
pub mod start_conditions;
pub mod state_dir;
mod sys;
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
    /// The machine manager's store (`cosched_mm::db::DbError`, converted there).
    #[error(transparent)]
    Db(Box<dyn std::error::Error + Send + Sync>),
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
