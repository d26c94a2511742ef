//! The user's side of the daemons: a blocking client for user commands, an embedded cluster
//! of local daemons, the client's end of a file broadcast, and the benchmarks and launch
//! model measured on such a cluster. The daemons are `cosched-mm` and `cosched-nm`; what all
//! of them share is `cosched-proto`.
//!
//! - [`client`]: a blocking client for user commands (submit, wait, status, …).
//! - [`bcast`]: the client's end of a file broadcast (the file streamed in chunks).
//! - [`cluster`]: an embedded cluster of local daemons (`cosched cluster up|down`, the demo).
//! - [`bench`]: latency, gang-overhead and throughput benchmarks on an embedded cluster.
//! - [`launch_model`]: launch time and heartbeat cost against node count and fan-out, fitted
//!   on the launch benchmarks and extrapolated (seed 003 Fig. 10).
//! - [`views`]: job and status tables, accounting records as JSON, SWF export.
//!
//! ```no_run
//! use cosched_client::cluster::{ClusterOptions, up};
//! let opts = ClusterOptions::new("/usr/local/bin/cosched".into(), "/tmp/cosched-demo".into(), 2, 2);
//! let cluster = up(&opts).unwrap();
//! let id = cluster.client.submit_simple(2, &["/bin/true"]).unwrap();
//! let jobs = cluster.client.wait(&[id], std::time::Duration::from_secs(10)).unwrap();
//! assert_eq!(jobs[0].state.as_str(), "completed");
//! cluster.down().unwrap();
//! ```

#![forbid(unsafe_code)]

pub mod bcast;
pub mod bench;
pub mod client;
pub mod cluster;
pub mod launch_model;
pub mod views;

// The shared modules, under the names this crate's modules use for them.
