//! `cosched demo`: shows what cosched does with no input. For now it generates a small
//! Lublin–Feitelson workload in memory and prints its summary; later parts of cosched add a
//! scheduling run on top of it.

use cosched_workload::lublin::{self, GenOptions};
use cosched_workload::summary::{Summary, summarize};

#[derive(clap::Args)]
pub struct Args {
    /// Number of jobs in the demo workload
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub jobs: usize,
    /// Machine size in PEs
    #[arg(long, value_name = "P", default_value_t = 128)]
    pub procs: u32,
    /// Random seed
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub json: bool,
}

/// The demo's workload and its summary (deterministic for given arguments).
pub fn demo_workload(args: &Args) -> (cosched_workload::swf::Trace, Summary) {
    let trace = lublin::generate(&GenOptions {
        jobs: args.jobs,
        procs: args.procs,
        seed: args.seed,
        ..Default::default()
    });
    let name = format!(
        "Lublin-Feitelson model: {} jobs on {} PEs, seed {} (generated in memory)",
        args.jobs, args.procs, args.seed
    );
    let summary = summarize(&trace, &name);
    (trace, summary)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.jobs == 0 || args.procs == 0 {
        anyhow::bail!("--jobs and --procs must be at least 1");
    }
    let (_trace, summary) = demo_workload(&args);
    super::workload::emit(&summary, args.json, None)?;
    Ok(0)
}
