//! Slurm's vocabulary, so that cosched answers to Slurm's command names, options and output
//! formats (docs/slurm.md). Pure: no I/O, no clock (time and the local time zone are
//! arguments), so every format is tested line by line against what Slurm prints.
//!
//! | module | what it owns |
//! | --- | --- |
//! | [`hostlist`] | `n[01-04,07],gpu1`: expand and compress node names |
//! | [`constraint`] | `--constraint` on node features: `ib&big|gpu` |
//! | [`counts`] | `2(x3),1`: per-node counts (`SLURM_TASKS_PER_NODE`) |
//! | [`time`] | `--time` forms, durations as squeue/sacct print them, timestamps |
//! | [`state`] | job states and codes (`PENDING`/`PD` …) from cosched's lifecycle; reasons |
//! | [`job`] | [`job::JobView`]: what the job formatters read |
//! | [`node`] | node states, [`node::NodeView`] and [`node::PartitionView`] |
//! | [`squeue`] | `squeue -o/-O` fields, default and long formats, order, folded arrays |
//! | [`sacct`] | `sacct --format` fields, widths, `-p`/`-P` |
//! | [`scontrol`] | `scontrol show job|node|partition` records |
//! | [`sinfo`] | `sinfo` lines per partition and state, `-N`, `-o`/`-O` |
//! | [`spec`] | the `-o`/`-O` format strings squeue and sinfo share, and filling a field |
//! | [`options`] | the table of sbatch/srun/salloc options and what cosched does with each; `#SBATCH` directives |
//! | [`env`] | the `SLURM_*` environment of a batch script and of a step's tasks |
//! | [`size`] | `--mem` sizes (`4G`, `4096`) |
//!
//! ```
//! use cosched_slurm::{counts, hostlist};
//! assert_eq!(hostlist::compress(&["n1", "n2", "n3", "n7"]), "n[1-3,7]");
//! assert_eq!(hostlist::expand("n[01-02],gpu1").unwrap(), ["n01", "n02", "gpu1"]);
//! assert_eq!(counts::compress(&[2, 2, 2, 1]), "2(x3),1");
//! ```

#![forbid(unsafe_code)]

pub mod constraint;
pub mod counts;
pub mod env;
pub mod hostlist;
pub mod job;
pub mod node;
pub mod options;
pub mod sacct;
pub mod scontrol;
pub mod sinfo;
pub mod size;
pub mod spec;
pub mod squeue;
pub mod state;
pub mod time;

/// The Slurm release whose commands and formats cosched follows (`--version` prints it, as
/// Open MPI's launcher reads it from `srun --version`).
pub const SLURM_VERSION: &str = "22.05.8";

/// The one partition of a cosched cluster whose configuration names none: every node, the
/// default.
pub const DEFAULT_PARTITION: &str = "all";

/// The cluster's name until the administrator's configuration gives one.
pub const DEFAULT_CLUSTER: &str = "cosched";
