//! `cosched cosim`: run one coscheduling scheme on a scenario file, or sweep several schemes
//! over the scenario's parameter grid (`cosched cosim sweep`).

use std::path::PathBuf;

use anyhow::{Context, bail};
use cosched_cosim::{RunResult, Scenario};
use cosched_node::Scheme;
use cosched_report::provenance::Provenance;

use super::output::{aligned_table, table};
use super::progress::runs_bar;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    sweep: Option<Sub>,
    /// Scenario file (TOML; see scenarios/ and docs/cosim.md)
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Scheme: local, ib, sb (alias ics), dcs, pb, sb+proc, pb+proc, gs, fcs, fcfs, cc
    #[arg(long)]
    scheme: Option<String>,
    /// Print one JSON document instead of tables
    #[arg(long)]
    json: bool,
    /// Write every FCS class change (JSON lines: time_s, job, rank, class) to this file
    #[arg(long)]
    class_history: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Run several schemes over the scenario's parameter grid, in parallel
    Sweep(SweepArgs),
}

#[derive(clap::Args)]
struct SweepArgs {
    /// Scenario file (TOML)
    #[arg(long)]
    scenario: PathBuf,
    /// Comma-separated schemes (default: all eleven)
    #[arg(long, value_delimiter = ',')]
    schemes: Vec<String>,
    /// Print one JSON array instead of a table
    #[arg(long)]
    json: bool,
    /// Draw no progress bar (one is drawn on stderr when it is a terminal)
    #[arg(long)]
    no_progress: bool,
    /// Also draw the sweep (.png or .svg): one series per scheme, the grid points side by
    /// side on the x axis (the mean over seeds when the grid has `seed`)
    #[arg(long)]
    plot: Option<PathBuf>,
    /// What the plot shows: response (mean response s), makespan (s), pending (message
    /// pending ms) or batch-slowdown (needs `[mix] batch_slowdown`)
    #[arg(long, default_value = "response", requires = "plot")]
    plot_metric: PlotMetric,
}

/// The quantity `cosim sweep --plot` draws.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum PlotMetric {
    Response,
    Makespan,
    Pending,
    BatchSlowdown,
}

impl PlotMetric {
    fn of(self, r: &RunResult) -> Option<f64> {
        match self {
            PlotMetric::Response => Some(r.mean_response_s),
            PlotMetric::Makespan => Some(r.makespan_s),
            PlotMetric::Pending => Some(r.msg_pending_s * 1e3),
            PlotMetric::BatchSlowdown => r.batch_slowdown,
        }
    }
    fn label(self) -> &'static str {
        match self {
            PlotMetric::Response => "mean job response (s)",
            PlotMetric::Makespan => "makespan (s)",
            PlotMetric::Pending => "message pending time (ms)",
            PlotMetric::BatchSlowdown => "slowdown relative to BATCH",
        }
    }
}

/// The sweep as a chart drawn by the simulator's plotting code: grid points are categories
/// on the x axis, each scheme a series of markers.
fn plot_sweep(
    path: &std::path::Path,
    sc: &Scenario,
    results: &[RunResult],
    metric: PlotMetric,
    prov: Provenance,
) -> anyhow::Result<()> {
    use cosched_report::plot::{LineChart, Series, line_chart};
    let mut x_names: Vec<String> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    // A one-parameter grid names its points by value and the axis by the parameter; runs of
    // several seeds are drawn as their mean at each point.
    let keys: Vec<&String> = sc.grid.keys().filter(|k| *k != "seed").collect();
    let single = (keys.len() == 1).then(|| keys[0].clone());
    // (x index, scheme) → sum and count of the metric over seeds.
    let mut points: Vec<(usize, String, f64, u32)> = Vec::new();
    for r in results {
        let mut params = r.params.clone().unwrap_or_default();
        params.remove("seed");
        let x = match &single {
            Some(k) => params.get(k).cloned().unwrap_or_default(),
            None => join_params(&params),
        };
        let k = match x_names.iter().position(|n| *n == x) {
            Some(k) => k,
            None => {
                x_names.push(x);
                x_names.len() - 1
            }
        };
        let Some(y) = metric.of(r) else {
            bail!(
                "--plot-metric {metric:?}: the scenario does not report it (set [mix] batch_slowdown = true)"
            );
        };
        match points.iter_mut().find(|p| p.0 == k && p.1 == r.scheme) {
            Some(p) => {
                p.2 += y;
                p.3 += 1;
            }
            None => points.push((k, r.scheme.clone(), y, 1)),
        }
    }
    for (k, scheme, sum, n) in points {
        let s = match series.iter_mut().position(|s| s.name == scheme) {
            Some(i) => &mut series[i],
            None => {
                series.push(Series {
                    name: scheme.clone(),
                    markers_only: true,
                    ..Series::default()
                });
                series.last_mut().expect("just pushed")
            }
        };
        s.points.push(((k + 1) as f64, sum / f64::from(n)));
    }
    let chart = LineChart {
        title: if sc.description.is_empty() {
            sc.name.clone()
        } else {
            sc.description.clone()
        },
        x_label: single.unwrap_or_else(|| "grid point".into()),
        y_label: metric.label().into(),
        series,
        provenance: Some(prov),
        x_names,
        ..LineChart::default()
    };
    line_chart(path, &chart).with_context(|| format!("drawing {}", path.display()))
}

fn parse_schemes(names: &[String]) -> anyhow::Result<Vec<Scheme>> {
    if names.is_empty() {
        return Ok(Scheme::ALL.to_vec());
    }
    names
        .iter()
        .map(|n| {
            n.parse::<Scheme>()
                .map_err(|e| anyhow::anyhow!("--schemes: {e}"))
        })
        .collect()
}

/// Every PE of the scenario's machine is simulated, process by process: refuse a machine that
/// cannot fit in memory before building it.
fn check_machine_fits(sc: &Scenario, path: &std::path::Path) -> anyhow::Result<()> {
    let m = &sc.machine;
    super::memory::check_fits_here(
        &super::memory::Ask {
            subject: &format!(
                "{}: [machine] nodes = {}, pes_per_node = {}",
                path.display(),
                m.nodes,
                m.pes_per_node
            ),
            what: "simulating every PE",
            fix: "fewer nodes or PEs per node",
        },
        u64::from(m.nodes) * u64::from(m.pes_per_node),
        super::memory::COSIM_BYTES_PER_PE,
    )
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(Sub::Sweep(s)) = args.sweep {
        return sweep(s);
    }
    let Some(path) = args.scenario else {
        bail!(
            "missing --scenario FILE (for example: --scenario scenarios/fcs-classification.toml)"
        );
    };
    let Some(name) = args.scheme else {
        bail!(
            "missing --scheme NAME (one of: local, ib, sb, dcs, pb, sb+proc, pb+proc, gs, fcs, fcfs, cc)"
        );
    };
    let scheme: Scheme = name.parse().map_err(|e| anyhow::anyhow!("--scheme: {e}"))?;
    let sc = Scenario::load(&path)?;
    check_machine_fits(&sc, &path)?;
    let history = args.class_history.is_some();
    let result = cosched_cosim::run(&sc, scheme, history)?;
    if result.stalled {
        eprintln!(
            "warning: {}: the run stopped at {:.3} s because no process could progress; {} of {} jobs finished",
            path.display(),
            result.makespan_s,
            result.finished_jobs,
            result.jobs.len()
        );
    }
    if let Some(file) = &args.class_history {
        let mut text = String::new();
        for c in result.class_history.as_deref().unwrap_or_default() {
            text.push_str(&serde_json::to_string(c)?);
            text.push('\n');
        }
        std::fs::write(file, text)
            .with_context(|| format!("writing --class-history {}", file.display()))?;
    }
    if args.json {
        let mut doc = serde_json::to_value(&result)?;
        doc["provenance"] = serde_json::to_value(provenance(&path)?)?;
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_summary(std::slice::from_ref(&result));
        print_jobs(&result);
    }
    Ok(0)
}

fn sweep(a: SweepArgs) -> anyhow::Result<i32> {
    let schemes = parse_schemes(&a.schemes)?;
    let sc = Scenario::load(&a.scenario)?;
    check_machine_fits(&sc, &a.scenario)?;
    let total = (sc.grid_points().len() * schemes.len()) as u64;
    let bar = runs_bar(total, a.no_progress);
    let results = cosched_cosim::sweep(&sc, &schemes, &|done, _| bar.set_position(done as u64))?;
    bar.finish_and_clear();
    let spread = cosched_cosim::spread::over_seeds(&results);
    if a.json {
        let mut doc = serde_json::json!({
            "provenance": provenance(&a.scenario)?,
            "rows": results,
        });
        if !spread.is_empty() {
            doc["spread"] = serde_json::to_value(&spread)?;
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_summary(&results);
        print_slowdowns(&results);
        print_spread(&spread);
    }
    if let Some(p) = &a.plot {
        plot_sweep(p, &sc, &results, a.plot_metric, provenance(&a.scenario)?)?;
    }
    Ok(0)
}

fn params_text(r: &RunResult) -> String {
    r.params.as_ref().map(join_params).unwrap_or_default()
}

/// A grid point as `key=value` pairs.
fn join_params(p: &std::collections::BTreeMap<String, String>) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_summary(results: &[RunResult]) {
    let header = [
        "params",
        "scheme",
        "response_s",
        "wait_s",
        "makespan_s",
        "pending_ms",
        "compute",
        "spin",
        "idle",
        "cswitch",
        "ovhd",
    ];
    let rows = results.iter().map(|r| {
        let b = &r.breakdown;
        vec![
            params_text(r),
            r.scheme.clone(),
            format!("{:.3}", r.mean_response_s),
            format!("{:.3}", r.mean_wait_s),
            format!("{:.3}", r.makespan_s),
            format!("{:.3}", r.msg_pending_s * 1e3),
            format!("{:.3}", b.compute),
            format!("{:.3}", b.spin),
            format!("{:.3}", b.idle),
            format!("{:.4}", b.context_switch),
            format!("{:.4}", b.overhead),
        ]
    });
    print!("{}", table(&header, 2, rows));
}

/// The slowdown columns, when the scenario asked for them (`[mix] slowdown` for fairness,
/// `[mix] batch_slowdown` for the slowdown relative to BATCH).
fn print_slowdowns(results: &[RunResult]) {
    if results
        .iter()
        .all(|r| r.slowdown_cv.is_none() && r.batch_slowdown.is_none())
    {
        return;
    }
    let opt = |x: Option<f64>, prec: usize| x.map_or("-".into(), |v| format!("{v:.prec$}"));
    println!();
    let header = [
        "params",
        "scheme",
        "mean_slowdown",
        "slowdown_cv",
        "batch_slowdown",
    ];
    let rows = results.iter().map(|r| {
        vec![
            params_text(r),
            r.scheme.clone(),
            opt(r.mean_slowdown, 3),
            opt(r.slowdown_cv, 4),
            opt(r.batch_slowdown, 3),
        ]
    });
    print!("{}", table(&header, 2, rows));
}

/// The runs over seeds (a `seed` grid parameter): per grid point and scheme the mean and
/// range of response and makespan, the mean breakdown, and a PROC scheme's per-seed change
/// against its base scheme.
fn print_spread(spread: &[cosched_cosim::spread::Spread]) {
    if spread.is_empty() {
        return;
    }
    println!();
    let header = [
        "over seeds",
        "scheme",
        "seeds",
        "response_s mean [range]",
        "makespan_s mean [range]",
        "pending_ms",
        "comp",
        "spin",
        "idle",
        "cswitch",
        "vs base, per seed: response % and makespan % median [range]",
    ];
    let r =
        |x: &cosched_cosim::spread::Range| format!("{:.3} [{:.3}, {:.3}]", x.mean, x.min, x.max);
    let c = |x: &cosched_cosim::spread::Change| {
        format!("{:+.1} [{:+.1}, {:+.1}]", x.median, x.min, x.max)
    };
    let rows = spread.iter().map(|s| {
        let vs = s.vs_base.as_ref().map_or(String::new(), |v| {
            format!("{}: {}  {}", v.base, c(&v.response_pct), c(&v.makespan_pct))
        });
        let b = &s.breakdown;
        vec![
            join_params(&s.params),
            s.scheme.clone(),
            s.seeds.len().to_string(),
            r(&s.response_s),
            r(&s.makespan_s),
            format!("{:.3}", s.pending_ms.mean),
            format!("{:.3}", b.compute),
            format!("{:.3}", b.spin),
            format!("{:.3}", b.idle),
            format!("{:.4}", b.context_switch),
            vs,
        ]
    });
    let mut right = [true; 11];
    (right[0], right[1], right[10]) = (false, false, false);
    print!("{}", aligned_table(&header, &right, rows));
}

fn print_jobs(r: &RunResult) {
    println!();
    println!(
        "short jobs (<0.6 s work): {} jobs, runtime {:.3} s, wait {:.3} s; long: {} jobs, runtime {:.3} s, wait {:.3} s",
        r.short.jobs,
        r.short.mean_runtime_s,
        r.short.mean_wait_s,
        r.long.jobs,
        r.long.mean_runtime_s,
        r.long.mean_wait_s
    );
    if r.jobs.len() > 40 {
        return;
    }
    let header = [
        "job",
        "kind",
        "procs",
        "work_s",
        "wait_s",
        "response_s",
        "classes",
    ];
    let rows = r.jobs.iter().map(|j| {
        let classes: Vec<&str> = j.processes.iter().map(|p| p.class.unwrap_or("-")).collect();
        vec![
            j.id.to_string(),
            j.kind.clone(),
            j.procs.to_string(),
            format!("{:.3}", j.work_s),
            j.wait_s.map_or("-".into(), |w| format!("{w:.3}")),
            j.response_s
                .map_or("unfinished".into(), |w| format!("{w:.3}")),
            classes.join(" "),
        ]
    });
    let right = [true, false, true, true, true, true, false];
    print!("{}", aligned_table(&header, &right, rows));
}

/// Where a run's JSON came from: cosched's version, the command line and a hash of the
/// scenario file (as `sim` stamps its outputs).
fn provenance(scenario: &std::path::Path) -> anyhow::Result<Provenance> {
    let bytes =
        std::fs::read(scenario).with_context(|| format!("reading {} again", scenario.display()))?;
    Ok(Provenance::of_bytes(
        &scenario.display().to_string(),
        &bytes,
    ))
}
