//! The node manager (`cosched nm`): registers with the machine manager, serves its place in
//! the tree, and launches, stops, continues and kills the processes of the jobs placed on its
//! PEs; it also runs their PMI server, contains them (cgroups) and writes the copies of file
//! broadcasts. What it shares with the machine manager and the clients is `cosched-proto`.
//!
//! Launching lives here, not in separate program-launcher processes as in the original
//! testbed (seed 000 §4.3.5): those existed because a launcher had to fork per PE and per
//! time slot inside a runtime (RMS) that owned the processes. Here each rank is simply a
//! child process in its own process group, pinned to its PE, and SIGSTOP/SIGCONT on the group
//! (or the job's cgroup freezer) is the whole context switch, so one process per node
//! suffices and there is no extra hop.
//!
//! Ranks run as the job's user: a node manager running as root sets their uid, gid and
//! supplementary groups before `exec`, and the rank itself creates its output files (mode
//! 0600, in a job directory of mode 0700 owned by the user), so nothing is created or
//! truncated with root's rights where the user could have planted a link. What the node
//! manager itself makes in a job's directory (the monitor ring, the error files of ranks that
//! could not start) it makes relative to its handle of the directory, anew and without
//! following links (crate::dir). A node manager that is not root runs only its own user's
//! jobs and refuses the others.
//!
//! The shape is the machine manager's: a sans-IO core and a shell around it.
//!
//! - [`core`]: the core — `NmCore::on(now, Input)`, effects out (`poll_effect`), `next_wake`;
//!   registration, fencing, joining the tree, exits held until reported, PMI, output caps,
//!   sweeping, the node scheme's plans carried out as signals and freezes. With
//!   [`launch`] (a launch as a chain of effects: prepare, spawn each rank), [`kill`] (the
//!   grace between SIGTERM and SIGKILL, fencing, shutting down) and [`register`]
//!   (registration, its answers, the machine manager's silence, joining the tree).
//! - [`sched`]: the node scheme (gs, local, sb, fcs) on the `NodeScheduler` the process-level
//!   simulator drives; [`scheme`]: its parameters from the command line; [`switch`]: the
//!   order of a switch (continues wait until the outgoing jobs are reported frozen);
//!   [`program`]: an announced gang rotation switched at its instants, off the event loop.
//! - [`shell`]: tokio, the tree, the children, PMI sockets, cgroups and files around the core;
//!   [`spawn`] (fork/exec of a rank as its user), [`files`] (output caps, job directories,
//!   `cosched output`), [`sample`] (`/proc` and the rings), [`monitor`] (the rings),
//!   [`freeze_watch`] (reports outgoing cgroups frozen, off the event loop).
//! - [`pmix`]: a job's PMIx helper process, started before its ranks, its fences up the
//!   tree, its aborts in the job's record; [`worlds`]: ranks that ran as MPI worlds of one,
//!   reported.
//! - [`pmi`]: the PMI-1 server for MPI programs; [`names`]: the ranks' name requests (PMI-1's
//!   and PMIx's) carried to the machine manager's name service and back.
//! - [`contain`]: containment of a job's processes (a cgroup v2 per job, or process groups).
//! - [`bcast`]: the node's end of a file broadcast (writing, checking and handing over copies).

pub mod bcast;
pub mod contain;
pub mod core;
pub mod files;
pub mod freeze_watch;
pub mod kill;
pub mod launch;
pub mod monitor;
pub mod names;
pub mod pmi;
pub mod pmix;
pub mod program;
pub mod register;
pub mod sample;
pub mod sched;
pub mod scheme;
pub mod shell;
pub mod spawn;
pub mod switch;
pub mod worlds;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use cosched_storm::Key;

// The shared modules, under the names this crate's modules use for them.

pub use shell::{run, run_blocking};

/// The notice appended to an output file cut at the cap.
pub fn cap_notice(cap: u64) -> String {
    format!(
        "\n[cosched: this output reached the node's cap of {cap} bytes (--output-cap); what the rank wrote after it was discarded]\n"
    )
}

#[derive(Clone, Debug)]
pub struct NmConfig {
    pub mm: String,
    pub name: String,
    pub pes: u32,
    pub workdir: PathBuf,
    /// Address to accept the tree parent on; `None`: the address this host uses to reach
    /// the machine manager, port chosen by the system.
    pub listen: Option<String>,
    pub key: Key,
    /// Where the key was read from: a rotation ([`cosched_proto::proto::ToNode::RotateKey`]) writes
    /// the new key there, so that the node manager restarted later has it; `None`: nowhere.
    pub key_file: Option<PathBuf>,
    /// PE i runs on the (offset + i)-th usable CPU, modulo their number. Node managers
    /// sharing a host (an embedded cluster) get different offsets so that their PEs spread
    /// over the cores instead of all landing on the first ones.
    pub cpu_offset: u32,
    /// A finished job's directory (its default output files) is removed this long after the
    /// job ended (`--keep-jobs`).
    pub keep_jobs: Duration,
    /// A rank's output file is cut back to this many bytes, with a notice appended, once it
    /// grows past it (`--output-cap`), checked at every heartbeat and at the rank's exit.
    pub output_cap: u64,
    /// The node-level scheme ([`sched`]).
    pub node_scheme: scheme::NodeSchemeConfig,
    /// The `cosched` executable, which serves PMIx to a job's ranks as `cosched
    /// pmix-helper` ([`pmix`]); `None`: no PMIx.
    pub pmix_helper: Option<PathBuf>,
    /// The node's memory in bytes as the configuration gives it; `None`: the host's
    /// `MemTotal`. No job's memory limit goes above it.
    pub memory: Option<u64>,
}
