//! `cosched bsp`: one rank of the synthetic BSP benchmark (seed 000 Fig. 4.4) as a real
//! program, started by `cosched submit -n N cosched bsp ...` (it is a PMI-1 client). Its
//! parameters are the process-level simulator's: a scenario job (`--scenario FILE --job N`),
//! the scenario's job fields as flags (`--work`, `--granularity`, `--pattern`, `--variance`,
//! `--io-blocks`, `--rank-override`, with `--timeslice`, `--msg-time`, `--io-time`), or the
//! model's fields directly (`--iterations`, `--compute`, `--io`). The work is in cosched-bsp.

use std::path::PathBuf;

use anyhow::{Context, bail};
use cosched_bsp::{Params, Pattern};
use cosched_cosim::Scenario;

#[derive(clap::Args)]
pub struct Args {
    /// Take the job's parameters from this scenario file (with --job)
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Which job of the scenario (1-based, as cosim numbers them)
    #[arg(long, requires = "scenario")]
    job: Option<u32>,
    /// Total work W (compute over all iterations), as in a scenario's [[jobs]]
    #[arg(long)]
    work: Option<String>,
    /// Iteration length as a fraction of the time slice (G), as in a scenario's [[jobs]]
    #[arg(long)]
    granularity: Option<f64>,
    /// The time slice granularity is a fraction of (the scenario's [schemes] timeslice)
    #[arg(long)]
    timeslice: Option<String>,
    /// Estimated time per message ([app] msg_time; sizes the compute of an iteration)
    #[arg(long)]
    msg_time: Option<String>,
    /// Time of one I/O block ([app] io_time)
    #[arg(long)]
    io_time: Option<String>,
    /// I/O blocks per iteration (B)
    #[arg(long)]
    io_blocks: Option<u32>,
    /// Ranks the parameters are made for (the scenario's procs; default: the job's size)
    #[arg(long)]
    procs: Option<u32>,
    /// Iterations (overrides what work and granularity give)
    #[arg(long)]
    iterations: Option<u32>,
    /// Basic compute per iteration, CPU time (overrides what work and granularity give)
    #[arg(long)]
    compute: Option<String>,
    /// Synchronous I/O per iteration (overrides io-blocks × io-time)
    #[arg(long)]
    io: Option<String>,
    /// Exchange pattern: none, nn (nearest neighbour), aa (all-to-all), ring
    #[arg(long)]
    pattern: Option<String>,
    /// Compute and I/O per iteration are uniform in basic·(1 ± variance)
    #[arg(long)]
    variance: Option<f64>,
    /// Per-rank deviation RANKS:FACTOR[:VARIANCE], RANKS comma-separated (a scenario's
    /// [[jobs.ranks]]); repeatable
    #[arg(long = "rank-override")]
    rank_override: Vec<String>,
    /// Payload bytes of each message (at most 65536)
    #[arg(long, default_value_t = 1024)]
    msg_bytes: usize,
    /// Seed of the payloads and of the variance draws
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fault injection: this rank kills itself (SIGKILL) at --kill-at
    #[arg(long, requires = "kill_at")]
    kill_rank: Option<u32>,
    /// The iteration at which --kill-rank dies
    #[arg(long)]
    kill_at: Option<u32>,
    /// Print the parameters the flags give and exit (no run)
    #[arg(long)]
    dry_run: bool,
}

fn dur(flag: &str, s: &str) -> anyhow::Result<std::time::Duration> {
    let d = cosched_core::Dur::parse(s).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
    Ok(std::time::Duration::from_micros(d.0.max(0) as u64))
}

/// `0,1:1.5:0.75` → (ranks, factor, variance).
fn rank_override(s: &str) -> anyhow::Result<(Vec<u32>, f64, Option<f64>)> {
    let bad = || anyhow::anyhow!("--rank-override {s:?}: expected RANKS:FACTOR[:VARIANCE]");
    let mut parts = s.split(':');
    let ranks = parts
        .next()
        .ok_or_else(bad)?
        .split(',')
        .map(|r| r.trim().parse::<u32>().map_err(|_| bad()))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    let factor = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    let variance = parts
        .next()
        .map(|v| v.parse().map_err(|_| bad()))
        .transpose()?;
    Ok((ranks, factor, variance))
}

/// The parameters the flags describe.
fn params(a: &Args) -> anyhow::Result<Params> {
    let size = a
        .procs
        .or_else(|| std::env::var("PMI_SIZE").ok().and_then(|s| s.parse().ok()));
    let mut p = if let Some(path) = &a.scenario {
        let sc = Scenario::load(path)?;
        let jobs = cosched_cosim::workload::build(&sc)?;
        let n = a.job.unwrap_or(1);
        let j = jobs.iter().find(|j| j.id == n).with_context(|| {
            format!("{} has jobs 1..={}; --job {n}", path.display(), jobs.len())
        })?;
        Params::from_app_job(j)
    } else if a.work.is_some() || a.granularity.is_some() {
        // The scenario's own job fields, through the simulator's own code (a one-job scenario).
        let (Some(work), Some(g)) = (&a.work, a.granularity) else {
            bail!("--work and --granularity go together (W and G of a scenario job)");
        };
        let mut toml = format!("[machine]\nnodes = {}\n", size.unwrap_or(1));
        if let Some(t) = &a.timeslice {
            toml += &format!("[schemes]\ntimeslice = {t:?}\n");
        }
        toml += "[app]\n";
        if let Some(m) = &a.msg_time {
            toml += &format!("msg_time = {m:?}\n");
        }
        if let Some(io) = &a.io_time {
            toml += &format!("io_time = {io:?}\n");
        }
        let pattern = match a.pattern.as_deref() {
            Some("ring") | None => "aa",
            Some(p) => p,
        };
        toml += &format!(
            "[[jobs]]\nprocs = {}\nwork = {work:?}\ngranularity = {g}\npattern = {pattern:?}\nvariance = {}\nio_blocks = {}\n",
            size.unwrap_or(1),
            a.variance.unwrap_or(0.0),
            a.io_blocks.unwrap_or(0),
        );
        for r in &a.rank_override {
            let (ranks, f, v) = rank_override(r)?;
            toml += &format!("[[jobs.ranks]]\nranks = {ranks:?}\nwork_factor = {f}\n");
            if let Some(v) = v {
                toml += &format!("variance = {v}\n");
            }
        }
        let sc = Scenario::parse(&toml, "the bsp flags")?;
        let jobs = cosched_cosim::workload::build(&sc)?;
        Params::from_app_job(&jobs[0])
    } else {
        Params::default()
    };
    if let Some(i) = a.iterations {
        p.iterations = i;
    }
    if let Some(c) = &a.compute {
        p.compute = dur("compute", c)?;
    }
    if let Some(io) = &a.io {
        p.io = dur("io", io)?;
    }
    if let Some(pat) = &a.pattern {
        p.pattern = Pattern::parse(pat)
            .with_context(|| format!("--pattern {pat:?}: expected none, nn, aa or ring"))?;
    }
    if let Some(v) = a.variance {
        p.variance = v;
    }
    if a.scenario.is_some() || (a.work.is_none() && a.granularity.is_none()) {
        for r in &a.rank_override {
            let (ranks, f, v) = rank_override(r)?;
            p.rank_overrides
                .extend(ranks.into_iter().map(|rank| (rank, f, v)));
        }
    }
    if a.procs.is_some() {
        p.procs = a.procs;
    }
    p.msg_bytes = a.msg_bytes;
    p.seed = a.seed;
    p.kill = a.kill_rank.zip(a.kill_at);
    Ok(p)
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let p = params(&a)?;
    if a.dry_run {
        println!("{}", serde_json::to_string_pretty(&p)?);
        return Ok(0);
    }
    match cosched_bsp::run(&p) {
        Ok(out) => {
            match out.job {
                Some(job) => println!("{}", serde_json::to_string(&job)?),
                None => println!("{}", serde_json::to_string(&out.rank)?),
            }
            Ok(0)
        }
        Err(e) => {
            eprintln!("bsp: {e}");
            if e.peer_lost() {
                // A peer's death is the job's failure, not this rank's: give the resource
                // manager time to hear of that rank first and kill this one.
                std::thread::sleep(std::time::Duration::from_secs(3));
            }
            Ok(1)
        }
    }
}
