//! `cosched demo`: what cosched does, with no input and nothing to set up.
//!
//! 1. The laboratory: a Lublin–Feitelson workload generated in memory, summarised, then run
//!    through FCFS, EASY, conservative backfilling and gang scheduling in the job-level
//!    simulator (in parallel), one line of figures per policy.
//! 2. The resource manager: an embedded cluster (one machine manager and node managers on
//!    loopback) under gang scheduling runs a small mixed workload of real CPU-bound processes,
//!    shows its Ousterhout matrix while they share the PEs, prints the per-job table, and is
//!    torn down. `--no-cluster` skips this part.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use cosched_client::cluster::{self, ClusterOptions};
use cosched_client::views::{acct_record, jobs_table, status_text};
use cosched_core::Dur;
use cosched_policy::PolicyOptions;
use cosched_proto::proto::SubmitRequest;
use cosched_report::metrics::MetricsOptions;
use cosched_report::setup::Source;
use cosched_report::sweep::{self, SweepRow, SweepSpec};
use cosched_sim::EngineOptions;
use cosched_sim::trace::Semantics;
use cosched_workload::lublin::{self, GenOptions};
use cosched_workload::summary::{Summary, summarize};

#[derive(clap::Args)]
pub struct Args {
    /// Number of jobs in the simulated workload
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub jobs: usize,
    /// Machine size in PEs for the simulation
    #[arg(long, value_name = "P", default_value_t = 128)]
    pub procs: u32,
    /// Offered load of the simulated workload
    #[arg(long, value_name = "L", default_value_t = 0.7)]
    pub load: f64,
    /// Random seed
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Only the simulation: do not start an embedded cluster
    #[arg(long)]
    pub no_cluster: bool,
    /// Print one JSON document instead of tables
    #[arg(long)]
    pub json: bool,
}

const POLICIES: [&str; 4] = ["fcfs", "easy", "conservative", "gang"];

/// The demo's workload and its summary (deterministic for given arguments).
pub fn demo_workload(args: &Args) -> (cosched_workload::swf::Trace, Summary) {
    let trace = lublin::generate(&model(args));
    let name = format!(
        "Lublin-Feitelson model: {} jobs on {} PEs, load {}, seed {} (generated in memory)",
        args.jobs, args.procs, args.load, args.seed
    );
    let summary = summarize(&trace, &name);
    (trace, summary)
}

fn model(args: &Args) -> GenOptions {
    GenOptions {
        jobs: args.jobs,
        procs: args.procs,
        seed: args.seed,
        load: Some(args.load),
        ..Default::default()
    }
}

/// Part 1: every policy on the same model workload, in parallel.
fn simulate(args: &Args) -> anyhow::Result<Vec<SweepRow>> {
    let spec = SweepSpec {
        source: Source::Lublin {
            model: Box::new(model(args)),
        },
        policies: POLICIES.iter().map(|p| p.to_string()).collect(),
        loads: vec![Some(args.load)],
        seeds: vec![args.seed],
        semantics: Semantics::default(),
        engine: EngineOptions::default(),
        policy: PolicyOptions {
            quantum: Some(Dur::from_secs(10)),
            ..Default::default()
        },
        metrics: MetricsOptions::default(),
        stop: None,
        machine: None,
    };
    Ok(sweep::run(&spec, &|| {})?)
}

fn print_rows(rows: &[SweepRow]) {
    println!(
        "\n{:<13} {:>12} {:>14} {:>14} {:>12}",
        "policy", "mean wait s", "mean slowdown", "mean bsld(10s)", "utilization"
    );
    for r in rows {
        match &r.error {
            Some(e) => println!("{:<13} failed: {e}", r.policy),
            None => println!(
                "{:<13} {:>12.0} {:>14.1} {:>14.1} {:>12.3}",
                r.policy, r.mean_wait_s, r.mean_slowdown, r.mean_bounded_slowdown, r.utilization
            ),
        }
    }
}

/// What part 2 ran and saw.
struct ClusterRun {
    matrix: String,
    table: String,
    jobs: Vec<cosched_proto::proto::JobInfo>,
}

/// Part 2: an embedded 2-node × 2-PE cluster under gang scheduling (MPL 2, 50 ms quanta), and
/// five real jobs: a 4-PE CPU-bound job in one row of the matrix, two 2-PE ones sharing the
/// other row, then a 1-PE job and a 4-PE `echo $COSCHED_NODE` that wait for a free row.
fn run_cluster() -> anyhow::Result<ClusterRun> {
    let exe = std::env::current_exe().context("cannot find the cosched executable")?;
    let dir: PathBuf = std::env::temp_dir().join(format!("cosched-demo-{}", std::process::id()));
    let mut opts = ClusterOptions::new(exe.clone(), dir.clone(), 2, 2);
    opts.settings.policy = "gang".into();
    opts.settings.policy_options.mpl = Some(2);
    opts.settings.policy_options.quantum = Some(Dur::from_millis(50));
    let cluster = cluster::up(&opts).context("starting the embedded cluster")?;
    let result = (|| -> anyhow::Result<ClusterRun> {
        let exe = exe.display().to_string();
        let spin = |cpu: &str| vec![exe.clone(), "cluster".into(), "spin".into(), cpu.into()];
        let workload: [(&str, u32, Vec<String>); 5] = [
            ("wide", 4, spin("1s")),
            ("half-a", 2, spin("1s")),
            ("half-b", 2, spin("1s")),
            ("single", 1, spin("300ms")),
            (
                "nodes",
                4,
                vec!["sh".into(), "-c".into(), "echo $COSCHED_NODE".into()],
            ),
        ];
        let cwd = std::env::current_dir()
            .unwrap_or_else(|_| dir.clone())
            .display()
            .to_string();
        let mut ids = Vec::new();
        for (name, procs, cmd) in workload {
            ids.push(cluster.client.submit(SubmitRequest {
                procs,
                time_limit_us: Some(Dur::from_secs(600).as_micros()),
                class: None,
                name: Some(name.into()),
                cmd,
                cwd: cwd.clone(),
                user: None,
                io: Default::default(),
                sched: Default::default(),
                layout: None,
                hold: false,
                mem: None,
            })?);
        }
        // Catch the matrix while the first three jobs share the PEs.
        let mut matrix = String::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let st = cluster.client.status()?;
            matrix = status_text(&st);
            let running = cluster
                .client
                .jobs(&ids[..3])?
                .iter()
                .filter(|j| j.record.start.is_some() && j.record.end.is_none())
                .count();
            if running == 3 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The jobs burn CPU time, which a loaded machine stretches into much more wall time
        // (two CPU-bound processes per core beside them: over a minute); a demo that is slow
        // there still finishes.
        let jobs = cluster.client.wait(&ids, Duration::from_secs(600))?;
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        Ok(ClusterRun {
            matrix,
            table: jobs_table(&jobs, now_us),
            jobs,
        })
    })();
    cluster.down().context("stopping the embedded cluster")?;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.jobs == 0 || args.procs == 0 {
        anyhow::bail!("--jobs and --procs must be at least 1");
    }
    if !(args.load.is_finite() && args.load > 0.0) {
        anyhow::bail!("--load must be a positive number, not {}", args.load);
    }
    let (_trace, summary) = demo_workload(&args);
    let rows = simulate(&args)?;
    let cluster = if args.no_cluster {
        None
    } else {
        Some(run_cluster()?)
    };
    let all_ok = cluster.as_ref().is_none_or(|c| {
        c.jobs
            .iter()
            .all(|j| j.record.exit_code == Some(0) && j.record.end.is_some())
    });
    if args.json {
        let doc = serde_json::json!({
            "workload": summary,
            "simulation": rows,
            "cluster": cluster.as_ref().map(|c| serde_json::json!({
                "jobs": c.jobs.iter().map(acct_record).collect::<Vec<_>>(),
                "matrix": c.matrix,
            })),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("== 1. The laboratory: one workload, four policies (job-level simulator)\n");
        super::workload::emit(&summary, false, None)?;
        print_rows(&rows);
        println!(
            "\n(try: cosched sim sweep --model lublin --jobs 20000 --procs 128 \\\n       --policies fcfs,easy,conservative,gang --loads 0.5,0.6,0.7,0.8,0.9 --out sweep)"
        );
        if let Some(c) = &cluster {
            println!(
                "\n== 2. The resource manager: an embedded cluster (2 nodes x 2 PEs, gang, MPL 2, 50 ms quanta)\n"
            );
            println!("{}", c.matrix.trim_end());
            println!("\n{}", c.table.trim_end());
            println!(
                "\n`wide` (all 4 PEs) and the two 2-PE `half` jobs ran at once in two rows of the matrix,\ntaking turns every 50 ms, so each took about twice its CPU time; with the multiprogramming\nlevel at 2, `single` and `nodes` waited for a row to empty. Real processes, SIGSTOP/SIGCONT."
            );
        }
    }
    Ok(if all_ok { 0 } else { 1 })
}
