//! Benchmarks of the real daemons on an embedded cluster (`cosched cluster bench …`):
//! submit-to-running latency against the number of node managers, the cost of gang
//! time-slicing against the quantum, and the throughput of trivial jobs.
//!
//! Figures are wall-clock measurements on whatever machine runs them; docs/benchmarks.md
//! records the command, the machine and the date next to each.
//!
//! - `clocks`: the CPU clocks the benches read and the spinning rank of the gang bench.
//! - `gang`: the gang bench and its breakdown of each switch.
//! - `launch`: launch latency, file broadcast, COMPARE latency and throughput.
//! - `load`: the machine manager under a backlog, and the CPU and network loads the launch
//!   bench runs under.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::ClusterOptions;
use cosched_proto::proto::SubmitRequest;

mod clocks;
mod gang;
mod launch;
mod load;

pub use clocks::{GAP, frozen, runnable, since_fork, spin_cpu};
pub use gang::{GangRow, JobGaps, Seen, SwitchBreakdown, gang, parse_gaps, seen};
pub use launch::{
    BcastRow, CompareRow, LatencyRow, LaunchRow, LaunchSetup, ThroughputRow, bcast, compare,
    latency, launch, padded_program, throughput,
};
pub use load::{CpuLoad, LoadPhase, NetLoad, load};

/// A job of `procs` ranks running `cmd`, with nothing else asked.
fn submit(procs: u32, cmd: Vec<String>) -> SubmitRequest {
    SubmitRequest {
        mem: None,
        procs,
        time_limit_us: None,
        class: None,
        name: None,
        cmd,
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched: Default::default(),
        layout: None,
        hold: false,
    }
}

/// An embedded cluster of `nodes` × `pes` in a fresh `dir`, given two minutes to come up.
fn opts(exe: &Path, dir: &Path, nodes: u32, pes: u32) -> ClusterOptions {
    let _ = std::fs::remove_dir_all(dir);
    let mut o = ClusterOptions::new(exe.to_path_buf(), dir.to_path_buf(), nodes, pes);
    o.timeout = Duration::from_secs(120);
    o
}

/// A scratch directory for benchmark clusters.
pub fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("cosched-bench-{}", std::process::id()))
}
