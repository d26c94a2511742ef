//! `cosched`: subcommands only. Each `cmd/*.rs` parses its arguments, calls the library crate
//! that owns the work, and prints; no scheduling logic lives here.

use clap::{CommandFactory, Parser, Subcommand};
use cosched::cmd;

/// A resource manager and scheduling laboratory for parallel jobs on clusters.
#[derive(Parser)]
#[command(name = "cosched", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what cosched does, on an embedded default (no input needed)
    Demo(cmd::demo::Args),
    /// Read, summarise, generate and transform workloads (SWF traces, Lublin–Feitelson model)
    #[command(subcommand)]
    Workload(cmd::workload::Command),
    /// Simulate job-level scheduling policies on a trace or a model workload
    Sim(Box<cmd::sim::Args>),
    /// Simulate process-level coscheduling schemes (GS, SB, DCS, PB, PROC, FCS…) on a scenario
    Cosim(cmd::cosim::Args),
    /// Run one rank of the synthetic BSP benchmark (submit it: `cosched submit -n 8 cosched bsp ...`)
    Bsp(Box<cmd::bsp::Args>),
    #[command(flatten)]
    Daemon(cmd::daemon::Command),
    /// Replay a trace on the running cluster: each job submitted at its (compressed) time,
    /// its ranks burning its runtime, its estimate as the limit; resumable (--state)
    Replay(Box<cmd::replay::Args>),
    /// Compare two schedules of the same jobs (SWF or jobs CSV) job by job: start and end
    /// differences, start-order inversions, a plot
    Compare(Box<cmd::compare::Args>),
    /// Slurm's commands (sbatch, squeue, scancel, sacct, sinfo, scontrol) over this
    /// cluster: `cosched slurm squeue -u me`; `cosched slurm install-links DIR` makes them
    /// commands of their own (docs/slurm.md)
    Slurm(cmd::slurm::Args),
    /// Write the man pages or the shell completions (from these very definitions)
    Generate(cmd::generate::Args),
    /// Run for a while, as a rank of a replayed job (CPU time, or sleep that stops with
    /// the job)
    #[command(hide = true)]
    Burn(cmd::replay::BurnArgs),
    /// A job's PMIx server on one node, started by the node manager before the job's ranks
    #[command(hide = true)]
    PmixHelper,
}

fn main() {
    // Run through a link named sbatch, squeue, …: that Slurm command.
    let mut args = std::env::args_os();
    if let Some(name) = args.next().as_deref().and_then(cmd::slurm::command_of) {
        let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        std::process::exit(cmd::slurm::dispatch(name, rest));
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Workload(c) => cmd::workload::run(c),
        Command::Sim(args) => cmd::sim::run(*args),
        Command::Cosim(args) => cmd::cosim::run(args),
        Command::Bsp(args) => cmd::bsp::run(*args),
        Command::Daemon(c) => cmd::daemon::run(c),
        Command::Replay(args) => cmd::replay::run(*args),
        Command::Compare(args) => cmd::compare::run(*args),
        Command::Slurm(args) => cmd::slurm::run(args),
        Command::Burn(args) => cmd::replay::burn(args),
        Command::Generate(args) => cmd::generate::run(args, Cli::command()),
        Command::PmixHelper => cmd::pmix_helper::run(),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::exit(2);
        }
    }
}
