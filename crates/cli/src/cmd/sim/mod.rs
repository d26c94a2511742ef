//! `cosched sim`: one policy over a trace or a model workload, and `cosched sim sweep` over
//! policies × loads × seeds. The work lives in `cosched-sim`; this file parses, checks and
//! prints.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args as ClapArgs, Subcommand};

use cosched_core::{Dur, MachineShape, Time};
use cosched_policy::registry;

use super::output::{aligned_table, table};
use super::policy_args::PolicyArgs as SharedPolicyArgs;
use super::progress::{RunWatch, runs_bar};
use cosched_policy::{ConfigError, PolicyOptions, policy_config};
use cosched_report::metrics::{Group, MetricsOptions, Summary};
use cosched_report::provenance::Provenance;
use cosched_report::run::{self, Observe, ReadRunError, RunError, RunSpec};
use cosched_report::run_files;
use cosched_report::setup::{OpenTrace, Source};
use cosched_report::sweep::{Metric, Outputs, StopRule, SweepRow, SweepSpec, prepare, write_files};
use cosched_report::sweep_array::{ArraySpec, SPEC, SweepDir};
use cosched_sim::EngineOptions;
use cosched_sim::trace::{Estimates, Semantics, SizeField, Workload};
use cosched_workload::feitelson97;
use cosched_workload::lublin::{ALPHA_W1, ALPHA_W2, GenOptions};
use cosched_workload::swf::{Oversize, ReadOptions};

/// Prints to stdout, ignoring write errors: `cosched sim … | head` must end quietly, not
/// panic on the closed pipe.
macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

mod sweep;

#[derive(ClapArgs)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Sub {
    /// Run every policy × load × seed in parallel; write a CSV/JSON table and a plot of a
    /// metric (--metric) against load
    Sweep(sweep::SweepArgs),
}

/// Where the jobs come from, and how a trace is read.
#[derive(ClapArgs, Clone)]
struct SourceArgs {
    /// SWF trace (plain or .gz), or a Batsim JSON workload (by a .json name or a leading `{`)
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    trace: Option<PathBuf>,
    /// Workload model instead of a trace: `lublin`, seed 001's `w1` / `w2` (Table 5: the
    /// typeless Lublin–Feitelson model on 128 nodes, inter-arrival α 10.33 / 9.83), or seed
    /// 002's `feitelson97` (Poisson arrivals, hyperexponential runtimes; 128 PEs by default)
    #[arg(long, value_name = "lublin|w1|w2|feitelson97")]
    model: Option<String>,
    /// Inter-arrival α of the model (the gamma shape `aarr` of its arrivals); smaller is
    /// busier
    #[arg(long, value_name = "ALPHA")]
    alpha: Option<f64>,
    /// Processors per node; with a multi-core policy (scojo-pect, glomarc) the default is 2
    /// and --procs counts nodes
    #[arg(long, value_name = "N")]
    sockets: Option<u32>,
    /// Cores per processor (default 2 with a multi-core policy, else 1)
    #[arg(long, value_name = "N")]
    cores_per_socket: Option<u32>,
    /// Jobs to generate with --model
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// Machine size in PEs (required with --model; overrides the trace header)
    #[arg(long)]
    procs: Option<u32>,
    /// Model seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulate only the first N jobs of the trace (the rest of the file is not read)
    #[arg(long, value_name = "N")]
    first: Option<usize>,
    /// What the policy is told about runtimes: the trace's requested times, or exact runtimes
    #[arg(long, default_value = "trace", value_name = "trace|exact")]
    estimates: Estimates,
    /// Job size from allocated (SWF field 5, else 8) or requested processors (8, else 5)
    #[arg(long, default_value = "alloc", value_name = "alloc|req")]
    size: SizeField,
    /// Kill jobs at their estimate instead of letting them run their recorded runtime
    #[arg(long)]
    kill_at_estimate: bool,
    /// At one instant, deliver arrivals before job ends (default: ends first)
    #[arg(long)]
    arrivals_first: bool,
    /// Jobs larger than the machine: skip, clip or error
    #[arg(long, default_value = "skip", value_name = "skip|clip|error")]
    oversize: Oversize,
    /// Skip malformed trace lines instead of failing
    #[arg(long)]
    lenient: bool,
}

/// The shared policy options, and how the results are measured.
#[derive(ClapArgs, Clone)]
struct PolicyMetricArgs {
    #[command(flatten)]
    policy: SharedPolicyArgs,
    /// Bounded-slowdown threshold
    #[arg(long, default_value = "10s", value_name = "DUR")]
    bsld_threshold: Dur,
    /// Job terminations per batch for batch-means confidence intervals
    #[arg(long, default_value_t = 3333)]
    batch_size: usize,
}

#[derive(ClapArgs)]
struct RunArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    policy_args: PolicyMetricArgs,
    /// Policy name (see `cosched sim --list`)
    #[arg(long, default_value = "easy")]
    policy: String,
    /// Rescale inter-arrival times to this offered load
    #[arg(long)]
    load: Option<f64>,
    /// List the policies and exit
    #[arg(long)]
    list: bool,
    /// Print how long reading, preparing, simulating and measuring took (on stderr)
    #[arg(long)]
    timing: bool,
    /// Draw no progress bar (one is drawn on stderr when it is a terminal and the run lasts)
    #[arg(long)]
    no_progress: bool,
    /// Print one JSON document instead of tables
    #[arg(long)]
    json: bool,
    /// Write one CSV line per job (id,submit,start,end,procs,runtime,…; seconds)
    #[arg(long, value_name = "FILE.csv")]
    jobs_out: Option<PathBuf>,
    /// Write the schedule as Batsim's jobs.csv (its columns and states; evalys reads it)
    #[arg(long, value_name = "FILE.csv")]
    jobs_out_batsim: Option<PathBuf>,
    /// Draw the Ousterhout matrix and what ran over a time window, as SVG
    #[arg(long, value_name = "FILE.svg")]
    matrix_out: Option<PathBuf>,
    /// Start of the --matrix-out window, in simulated time
    #[arg(long, value_name = "DUR", default_value = "0s")]
    matrix_from: Dur,
    /// Length of the --matrix-out window
    #[arg(long, value_name = "DUR", default_value = "2m")]
    matrix_span: Dur,
    /// Write time-sharing figures (preemptions, quanta, interactive slowdowns) as JSON
    #[arg(long, value_name = "FILE.json")]
    timeshare_out: Option<PathBuf>,
    /// Memory of one node in MiB: jobs with a memory request (SWF field 10) are only placed
    /// where it fits (policies with a memory limit, e.g. gang)
    #[arg(long, value_name = "MIB")]
    mem_per_node: Option<u64>,
    /// Write the simulated schedule as SWF (wait and run times filled in)
    #[arg(long, value_name = "FILE")]
    swf_out: Option<PathBuf>,
    /// Draw the schedule as a Gantt chart (jobs over PEs and time, utilization and queue
    /// length below), SVG or PNG by the extension
    #[arg(long, value_name = "FILE.svg|png")]
    gantt_out: Option<PathBuf>,
    /// Time window of --gantt-out, in simulated time: A..B (e.g. 10d..12d, 0s..2h)
    #[arg(long, value_name = "A..B", requires = "gantt_out", value_parser = parse_window)]
    gantt_window: Option<std::ops::Range<Dur>>,
}

/// `A..B` with two durations, A before B.
pub(crate) fn parse_window(s: &str) -> Result<std::ops::Range<Dur>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?}: expected A..B, e.g. 10d..12d"))?;
    let a: Dur = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: Dur = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
    if b <= a {
        return Err(format!("{s:?}: the window's end must come after its start"));
    }
    Ok(a..b)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.sub {
        Some(Sub::Sweep(s)) => sweep::run_sweep(s),
        None => run_one(args.run),
    }
}

/// A workload source, or a trace whose header only has been read (its jobs are read by the
/// run, which may simulate them as they are parsed: `run::run_read`).
enum Input {
    Open(Box<OpenTrace>, PathBuf),
    Ready(Source),
}

impl Input {
    fn procs(&self) -> u32 {
        match self {
            Input::Open(o, _) => o.procs(),
            Input::Ready(s) => s.procs(),
        }
    }
}

fn reading(path: &std::path::Path) -> String {
    format!("reading trace {}", path.display())
}

fn source(a: &SourceArgs) -> anyhow::Result<Source> {
    match input(a)? {
        Input::Open(o, path) => o.read().with_context(|| reading(&path)),
        Input::Ready(s) => Ok(s),
    }
}

fn input(a: &SourceArgs) -> anyhow::Result<Input> {
    if a.procs == Some(0) {
        bail!("--procs 0: the machine needs at least one PE");
    }
    if a.model.is_some() {
        if a.jobs == 0 {
            bail!("--jobs 0: a model workload needs at least one job");
        }
        super::memory::check_jobs_fit_here(
            a.jobs,
            "simulating the generated jobs",
            super::memory::SIM_BYTES_PER_JOB,
        )?;
    }
    let ready = |s| Ok(Input::Ready(s));
    match (&a.trace, a.model.as_deref()) {
        (Some(path), _) => {
            let opts = ReadOptions {
                procs: a.procs,
                lenient: a.lenient,
                oversize: a.oversize,
            };
            if cosched_workload::batsim::is_batsim_workload(path) {
                return ready(Source::batsim(path, &opts, a.first).with_context(|| reading(path))?);
            }
            let open = Source::open_trace(path, &opts, a.first).with_context(|| reading(path))?;
            Ok(Input::Open(Box::new(open), path.clone()))
        }
        (None, Some("lublin")) => {
            let Some(procs) = a.procs.filter(|&p| p > 0) else {
                bail!("--model lublin needs the machine size: pass --procs N");
            };
            let mut model = GenOptions {
                jobs: a.jobs,
                procs,
                seed: a.seed,
                ..GenOptions::default()
            };
            if let Some(alpha) = alpha(a)? {
                model.params.batch.aarr = alpha;
                model.params.interactive.aarr = alpha;
            }
            ready(Source::Lublin {
                model: Box::new(model),
            })
        }
        (None, Some(w @ ("w1" | "w2"))) => {
            let default = if w == "w1" { ALPHA_W1 } else { ALPHA_W2 };
            let mut model = GenOptions::seed001(alpha(a)?.unwrap_or(default), a.jobs, a.seed);
            if let Some(p) = a.procs {
                model.procs = p;
            }
            ready(Source::Lublin {
                model: Box::new(model),
            })
        }
        (None, Some("feitelson97")) => {
            if a.alpha.is_some() {
                bail!("--alpha applies to the Lublin models; feitelson97's load is set by --load");
            }
            ready(Source::Feitelson97 {
                model: Box::new(feitelson97::Options {
                    jobs: a.jobs,
                    procs: a.procs.unwrap_or(128),
                    seed: a.seed,
                    ..feitelson97::Options::default()
                }),
            })
        }
        (None, Some(other)) => {
            bail!(
                "unknown model {other:?}: the models are lublin, w1, w2 and feitelson97 \
                 (--model lublin)"
            )
        }
        (None, None) => bail!("no workload: pass --trace FILE or --model lublin --procs N"),
    }
}

fn alpha(a: &SourceArgs) -> anyhow::Result<Option<f64>> {
    match a.alpha {
        Some(x) if !(x > 0.0 && x.is_finite()) => {
            bail!("--alpha {x}: the inter-arrival shape must be a positive number (e.g. 10.33)")
        }
        other => Ok(other),
    }
}

/// The machine: `nodes` nodes of --sockets × --cores-per-socket cores; two dual-core
/// processors per node when a multi-core policy runs and neither is given.
fn machine_shape(a: &SourceArgs, nodes: u32, policies: &[&str]) -> MachineShape {
    let multi = policies
        .iter()
        .any(|p| cosched_report::run::is_multicore(p.split(':').next().unwrap_or(p)));
    let d = if multi { 2 } else { 1 };
    MachineShape {
        nodes,
        sockets_per_node: a.sockets.unwrap_or(d).max(1),
        cores_per_socket: a.cores_per_socket.unwrap_or(d).max(1),
        mem_per_node_mib: None,
    }
}

fn semantics(a: &SourceArgs) -> Semantics {
    Semantics {
        size: a.size,
        estimates: a.estimates,
        kill_at_estimate: a.kill_at_estimate,
    }
}

fn policy_options(a: &PolicyMetricArgs) -> PolicyOptions {
    a.policy.options()
}

fn metrics_options(a: &PolicyMetricArgs) -> MetricsOptions {
    MetricsOptions {
        bsld_threshold: a.bsld_threshold,
        batch_size: a.batch_size,
    }
}

fn check_load(load: f64) -> anyhow::Result<()> {
    if !(load > 0.0 && load.is_finite()) {
        bail!("--load {load}: the offered load must be a positive number (e.g. 0.7)");
    }
    Ok(())
}

fn run_one(a: RunArgs) -> anyhow::Result<i32> {
    if a.list {
        for (name, what) in registry::describe() {
            outln!("{name:<14} {what}");
            let options = registry::options(name).unwrap_or_default();
            if !options.is_empty() {
                outln!("{:<14} options: {}", "", options.join(", "));
            }
        }
        outln!(
            "{:<14} a policy in any language: CMD runs as a child process speaking JSON lines (docs/external-policies.md)",
            "external:CMD"
        );
        outln!("{:<14} options: any (the child reads them)", "");
        return Ok(0);
    }
    if let Some(l) = a.load {
        check_load(l)?;
    }
    let clock = std::time::Instant::now();
    let input = input(&a.source)?;
    let t_read = clock.elapsed();
    let mut machine = machine_shape(&a.source, input.procs(), &[&a.policy]);
    machine.mem_per_node_mib = a.mem_per_node;
    let cfg = match policy_config(machine, &policy_options(&a.policy_args)) {
        Ok(cfg) => cfg,
        Err(e) => {
            // A trace that cannot be read is reported before the options.
            if let Input::Open(o, path) = input {
                o.read().with_context(|| reading(&path))?;
            }
            return Err(e.into());
        }
    };
    let t_config = clock.elapsed() - t_read;
    // Time-sharing figures and the matrix drawing come from a wrapper that watches the policy.
    let observe = (a.matrix_out.is_some() || a.timeshare_out.is_some()).then(|| {
        let from = Time::ZERO + a.matrix_from;
        Observe {
            matrix_window: a.matrix_out.is_some().then(|| from..from + a.matrix_span),
        }
    });
    // The run as far as the source is known (a trace's header); the run itself is of the
    // source as read.
    let known = match &input {
        Input::Open(o, _) => o.header_only(),
        Input::Ready(s) => s.clone(),
    };
    let watch = RunWatch::start(a.no_progress);
    let base = RunSpec {
        source: &known,
        semantics: semantics(&a.source),
        load: a.load,
        seed: None,
        policy: &a.policy,
        config: &cfg,
        engine: EngineOptions {
            arrivals_first: a.source.arrivals_first,
            progress: watch.progress(),
            // Of this command's outputs, only the Gantt chart and the Batsim jobs table read
            // where an ended job ran.
            forget_ended_pes: a.gantt_out.is_none() && a.jobs_out_batsim.is_none(),
            ..EngineOptions::default()
        },
        metrics: metrics_options(&a.policy_args),
        observe,
    };
    let run_error = |e| match e {
        RunError::Policy(e @ ConfigError::UnknownPolicy { .. }) => {
            anyhow::Error::new(e).context("choose a policy with --policy NAME")
        }
        RunError::Policy(e) => e.into(),
        RunError::Sim {
            err, context: None, ..
        } => err.into(),
        e @ (RunError::Sim { .. } | RunError::Failed { .. } | RunError::Classes(_)) => e.into(),
    };
    let (src, out) = match input {
        Input::Open(o, path) => run::run_read(*o, &base).map_err(|e| match e {
            ReadRunError::Read(e) => anyhow::Error::new(e).context(reading(&path)),
            ReadRunError::Run(e) => run_error(e),
        })?,
        Input::Ready(src) => {
            let out = run::run(&base.with_source(&src)).map_err(run_error)?;
            (src, out)
        }
    };
    drop(watch);
    let spec = base.with_source(&src);
    let (result, summary, workload) = (&out.result, &out.summary, &out.workload);
    if a.timing {
        let t = out.timings;
        eprintln!(
            "timing: read {:.3} s{}, prepare {:.3} s, simulate {:.3} s ({} events, {} decisions), metrics {:.3} s",
            t_read.as_secs_f64(),
            if t.read_while_simulating {
                " (the header; the jobs while simulating)"
            } else {
                ""
            },
            (t_config + t.prepare).as_secs_f64(),
            t.simulate.as_secs_f64(),
            result.events,
            result.decisions,
            t.metrics.as_secs_f64()
        );
    }
    let prov = Provenance::of(&src);
    if let Some(path) = &a.jobs_out {
        let file =
            std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
        run_files::write_jobs_csv(
            file,
            workload,
            result,
            spec.metrics.bsld_threshold,
            Some(&prov),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.jobs_out_batsim {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        cosched_report::batsim_jobs::write_batsim_jobs_csv(file, workload, result)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.swf_out {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        run_files::write_schedule_swf(std::io::BufWriter::new(file), &spec, &out, Some(&prov))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let (Some(path), Some(svg)) = (&a.matrix_out, run_files::matrix_svg(&out)) {
        let svg = cosched_report::provenance::svg_insert_after_open(&svg, &prov.svg_elements());
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.gantt_out {
        let window = a
            .gantt_window
            .as_ref()
            .map(|w| w.start.as_secs_f64()..w.end.as_secs_f64());
        let mut g = run_files::gantt_of(&out, window);
        g.provenance = Some(prov.clone());
        cosched_report::gantt::gantt(path, &g)
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    let timeshare = out.timeshare.as_ref().map(|t| &t.report);
    if let (Some(path), Some(report)) = (&a.timeshare_out, timeshare) {
        let mut doc = serde_json::to_value(report)?;
        doc["provenance"] = serde_json::to_value(&prov)?;
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        let doc = serde_json::json!({
            "source": src.label(),
            "load": a.load,
            "estimates": a.source.estimates,
            "skipped": workload.skipped,
            "skipped_total": workload.skipped.total(),
            "estimate_from_runtime": workload.estimate_from_runtime,
            "overrunning": workload.overrunning,
            "summary": summary,
            // The headline figures at top level too, for scripts.
            "policy": summary.policy,
            "jobs": summary.jobs,
            "mean_wait_s": summary.mean_wait_s,
            "mean_response_s": summary.mean_response_s,
            "mean_slowdown": summary.mean_slowdown,
            "mean_bounded_slowdown": summary.mean_bounded_slowdown,
            "utilization": summary.utilization,
            "makespan_s": summary.makespan_s,
            "timeshare": timeshare,
            // The policy's own counters (groups formed and why others were not, …).
            "policy_stats": out
                .result
                .policy_stats
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                .collect::<serde_json::Map<_, _>>(),
            "provenance": prov,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_summary(&src, workload, summary, a.load);
        if let Some(t) = timeshare {
            out!("\n{}", t.to_text());
        }
    }
    // The process ends next, and its memory goes back with it: dropping the run's records,
    // jobs and trace one by one first took 8-9 ms of a 0.22 s run over SDSC-BLUE.
    std::mem::forget((out, src));
    Ok(0)
}

fn print_group_table(title: &str, groups: &[Group]) {
    outln!("\n{title}");
    let header = [
        "class",
        "jobs",
        "wait_s",
        "p90_wait_s",
        "resp_s",
        "sld",
        "bsld",
        "p99_bsld",
    ];
    let rows = groups.iter().map(|g| {
        vec![
            g.label.to_string(),
            g.jobs.to_string(),
            format!("{:.1}", g.wait_s.mean),
            format!("{:.1}", g.wait_s.p90),
            format!("{:.1}", g.response_s.mean),
            format!("{:.2}", g.slowdown.mean),
            format!("{:.2}", g.bounded_slowdown.mean),
            format!("{:.1}", g.bounded_slowdown.p99),
        ]
    });
    out!("{}", table(&header, 1, rows));
}

fn print_summary(src: &Source, w: &Workload, s: &Summary, load: Option<f64>) {
    outln!("policy            {}", s.policy);
    outln!(
        "workload          {}{}",
        src.label(),
        load.map(|l| format!(", offered load {l}"))
            .unwrap_or_default()
    );
    outln!("machine           {} PEs", s.procs);
    outln!(
        "jobs              {} simulated, {} unfinished, {} skipped (runtime {}, size {}, oversize {}, submit {})",
        s.jobs,
        s.unfinished,
        w.skipped.total(),
        w.skipped.runtime,
        w.skipped.size,
        w.skipped.oversize,
        w.skipped.submit
    );
    outln!(
        "estimates         {} from the runtime, {} jobs run past their estimate",
        w.estimate_from_runtime,
        w.overrunning
    );
    print_metrics(s);
}

/// The figures of a run's summary (also printed by `cosched acct` for a real run).
pub(crate) fn print_metrics(s: &Summary) {
    outln!(
        "mean wait         {:.1} s (p50 {:.1}, p90 {:.1}, max {:.1})",
        s.mean_wait_s,
        s.all.wait_s.p50,
        s.all.wait_s.p90,
        s.all.wait_s.max
    );
    outln!("mean response     {:.1} s", s.mean_response_s);
    outln!("mean slowdown     {:.3}", s.mean_slowdown);
    out!(
        "mean bounded sld  {:.3} (threshold {} s",
        s.mean_bounded_slowdown,
        s.bsld_threshold_s
    );
    match s.batch_bounded_slowdown {
        Some(b) => outln!(
            "; batch means {:.3} ± {:.3} at 90 %, {} batches)",
            b.mean,
            b.ci90_half_width,
            b.batches
        ),
        None => outln!(")"),
    }
    outln!("utilization       {:.4}", s.utilization);
    outln!("makespan          {:.0} s", s.makespan_s);
    print_group_table("by size (PEs)", &s.by_size);
    print_group_table("by runtime", &s.by_runtime);
    if let Some(m) = &s.multicore {
        outln!("\nmulti-core nodes (seed 001)");
        outln!(
            "  bounded relative response time (RR): short {:.3} ({} jobs), medium {:.3} ({}), long {:.3} ({}), all {:.3} ({})",
            m.short.rr,
            m.short.jobs,
            m.medium.rr,
            m.medium.jobs,
            m.long.rr,
            m.long.jobs,
            m.all.rr,
            m.all.jobs
        );
        outln!(
            "  utilization: core {:.4}, node {:.4}; in high-load phases (N_wait >= {}, {:.0} s): core {:.4}, node {:.4}",
            m.core_utilization,
            m.node_utilization,
            m.n_h,
            m.high_load_time_s,
            m.high_load_core_utilization,
            m.high_load_node_utilization
        );
        outln!(
            "  groups formed {}, {:.2} jobs per group",
            m.groups,
            m.jobs_per_group
        );
    }
}
