//! `cosched sim sweep`: policies × loads × seeds, run here in parallel or as a job array on
//! whatever answers `sbatch` (submit, one point, gather), and the table and chart it prints.

use super::*;

#[derive(ClapArgs)]
pub(super) struct SweepArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    policy_args: PolicyMetricArgs,
    /// Policies, comma-separated; an entry may carry options after colons, so one policy
    /// can be several series: gang:quantum=10s,gang:quantum=600s,easy
    #[arg(long, value_delimiter = ',', default_value = "fcfs,easy,conservative")]
    policies: Vec<String>,
    /// Offered loads, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.6,0.7,0.8,0.9")]
    loads: Vec<f64>,
    /// Run at the workload's own load instead of --loads (seed 001's W1 and W2 set their
    /// load by the inter-arrival α)
    #[arg(long)]
    own_load: bool,
    /// Multiply every policy entry by the values of one option: `block_size=4:8:12:16`
    /// makes `glomarc` into `glomarc:block_size=4`, `glomarc:block_size=8`, … (an entry
    /// may carry options of its own: `glomarc:variant=cst`)
    #[arg(long, value_name = "KEY=V1:V2:...")]
    vary: Option<String>,
    /// Model seeds, comma-separated (a trace uses only the first)
    #[arg(long, value_delimiter = ',')]
    seeds: Option<Vec<u64>>,
    /// Seed 002's stopping rule (model workloads): simulate each point with more jobs (from
    /// --jobs, doubling) until the batch-means 90 % interval of the mean bounded slowdown is
    /// within REL of it (seed 002: 0.1), with at least 3 batches of --batch-size after the
    /// warm-up batch and at most --max-batches
    #[arg(long, value_name = "REL")]
    batch_stop: Option<f64>,
    /// Most batches the stopping rule may use (seed 002: 100)
    #[arg(long, default_value_t = 100, requires = "batch_stop")]
    max_batches: usize,
    /// Directory for sweep.csv, sweep.json, sweep.png and sweep.svg
    #[arg(long, value_name = "DIR", default_value = "sweep-out")]
    out: PathBuf,
    /// Worker threads (default: all cores)
    #[arg(long)]
    threads: Option<usize>,
    /// What the figure plots against load: bsld (mean bounded slowdown), p90-bsld, wait
    /// (mean, s), p90-wait, response (mean, s), slowdown (mean), utilization, makespan
    #[arg(long, default_value = "bsld", value_name = "METRIC")]
    metric: Metric,
    /// Also draw the figure to this file (.svg or .png; repeatable), e.g. straight into a
    /// paper's or the docs' directory
    #[arg(long, value_name = "FILE.svg|png")]
    plot: Vec<PathBuf>,
    /// The figure's title (default: the workload and the estimates)
    #[arg(long)]
    title: Option<String>,
    /// Print the JSON table instead of the text table
    #[arg(long)]
    json: bool,
    /// Draw no progress bar (one is drawn on stderr when it is a terminal)
    #[arg(long)]
    no_progress: bool,
    /// Run the points elsewhere: write the sweep's spec into DIR and submit one job-array
    /// task per point to `sbatch` (a cosched cluster's or a Slurm site's); again with the same
    /// DIR (and the same options, or none) to submit only the points without a result
    #[arg(long, value_name = "DIR", conflicts_with_all = ["gather", "point"])]
    submit: Option<PathBuf>,
    /// Merge the points of the sweep submitted into DIR into DIR/sweep.{csv,json,png,svg},
    /// as a local sweep writes them; names the points still missing
    #[arg(long, value_name = "DIR", conflicts_with = "point")]
    gather: Option<PathBuf>,
    /// The program --submit runs to submit the array
    #[arg(long, value_name = "PROGRAM", default_value = "sbatch")]
    sbatch: std::ffi::OsString,
    /// Run point K of the sweep in --spec and write its result (what each array task runs)
    #[arg(long, value_name = "K", requires = "spec", hide = true)]
    point: Option<usize>,
    /// A submitted sweep's DIR/spec.json, for --point
    #[arg(long, value_name = "FILE", requires = "point", hide = true)]
    spec: Option<PathBuf>,
}

/// A sweep's arguments parsed on their own: how an array task reads its spec's.
#[derive(clap::Parser)]
#[command(name = "sweep")]
struct SweepLine {
    #[command(flatten)]
    args: SweepArgs,
}

/// The sweep the options describe.
fn sweep_spec(a: &SweepArgs) -> anyhow::Result<SweepSpec> {
    for &l in &a.loads {
        check_load(l)?;
    }
    if a.policies.is_empty() {
        bail!("--policies is empty: name at least one policy");
    }
    let src = source(&a.source)?;
    let mut policies = a.policies.clone();
    if let Some(v) = &a.vary {
        let Some((key, values)) = v.split_once('=') else {
            bail!("--vary {v:?}: expected KEY=V1:V2:... (e.g. block_size=4:8:12)");
        };
        policies = policies
            .iter()
            .flat_map(|p| values.split(':').map(move |x| format!("{p}:{key}={x}")))
            .collect();
    }
    let names: Vec<&str> = policies.iter().map(String::as_str).collect();
    let machine = machine_shape(&a.source, src.procs(), &names);
    if let Some(r) = a.batch_stop {
        if !(r > 0.0 && r.is_finite()) {
            bail!("--batch-stop {r}: a positive fraction, such as 0.1");
        }
        if src.model_jobs().is_none() {
            bail!("--batch-stop needs a model workload (--model): a trace has only its own jobs");
        }
    }
    let seeds = match (&a.seeds, &src) {
        (Some(s), Source::Lublin { .. } | Source::Feitelson97 { .. }) if !s.is_empty() => s.clone(),
        (Some(s), Source::Trace { .. }) if !s.is_empty() => vec![s[0]],
        _ => vec![a.source.seed],
    };
    let spec = SweepSpec {
        source: src,
        policies: policies.clone(),
        loads: if a.own_load {
            vec![None]
        } else {
            a.loads.iter().map(|&l| Some(l)).collect()
        },
        seeds,
        semantics: semantics(&a.source),
        engine: EngineOptions {
            arrivals_first: a.source.arrivals_first,
            // A sweep's tables and plots read no job's PEs.
            forget_ended_pes: true,
            ..EngineOptions::default()
        },
        policy: policy_options(&a.policy_args),
        metrics: metrics_options(&a.policy_args),
        stop: a.batch_stop.map(|rel| StopRule {
            rel,
            max_batches: a.max_batches.max(3),
        }),
        machine: Some(machine),
    };
    Ok(spec)
}

/// `cosched sim sweep`: here, or as a job array (--submit, --point, --gather).
pub(super) fn run_sweep(a: SweepArgs) -> anyhow::Result<i32> {
    if let (Some(index), Some(spec)) = (a.point, &a.spec) {
        return run_point(index, spec);
    }
    if let Some(dir) = &a.gather {
        return gather(&a, dir);
    }
    if let Some(dir) = &a.submit {
        return submit(&a, dir);
    }
    let spec = sweep_spec(&a)?;
    let points = (spec.policies.len() * spec.loads.len() * spec.seeds.len()) as u64;
    let bar = runs_bar(points, a.no_progress);
    let pool = {
        let mut b = rayon::ThreadPoolBuilder::new();
        if let Some(n) = a.threads {
            b = b.num_threads(n);
        }
        b.build().context("starting worker threads")?
    };
    let rows = pool.install(|| cosched_report::sweep::run(&spec, &|| bar.inc(1)))?;
    bar.finish_and_clear();
    let prov = Provenance::of(&spec.source);
    let title = sweep_title(&a, &spec);
    let json = write_files(
        &rows,
        &prov,
        &Outputs {
            dir: &a.out,
            title: &title,
            metric: a.metric,
            plots: &a.plot,
        },
    )?;
    Ok(print_rows(&rows, &json, a.json, &a.out))
}

/// The figure's title: --title, or the workload and the estimates.
fn sweep_title(a: &SweepArgs, spec: &SweepSpec) -> String {
    a.title.clone().unwrap_or_else(|| {
        format!(
            "{} ({:?} estimates)",
            spec.source.label(),
            spec.semantics.estimates
        )
        .to_lowercase()
    })
}

/// The sweep's arguments on this command line (after `sweep`), without the ones that say
/// where and how to submit it: what an array task parses again.
fn sweep_arguments() -> Vec<String> {
    let mut args = std::env::args().skip_while(|a| a != "sweep").skip(1);
    let mut kept = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--submit" | "--sbatch" => {
                args.next();
            }
            _ if a.starts_with("--submit=") || a.starts_with("--sbatch=") => {}
            _ => kept.push(a),
        }
    }
    kept
}

/// `--submit DIR`: the spec into DIR (or DIR's own, given no workload), the points without a
/// result as one array.
fn submit(a: &SweepArgs, dir: &std::path::Path) -> anyhow::Result<i32> {
    let resume = a.source.trace.is_none() && a.source.model.is_none();
    let sweep = if resume && dir.join(SPEC).exists() {
        SweepDir::open(dir)?
    } else {
        let spec = sweep_spec(a)?;
        let prepared = prepare(&spec)?;
        let array = ArraySpec::new(
            &prepared,
            &Provenance::of(&spec.source),
            sweep_arguments(),
            sweep_title(a, &spec),
            a.metric.name().to_string(),
        )?;
        SweepDir::create(dir, array)?
    };
    let total = sweep.spec.points.len();
    let d = sweep.dir.display();
    match sweep.submit(&a.sbatch)? {
        Some((id, points)) => outln!(
            "Submitted {} of {total} points as array job {id} ({d}/logs/INDEX.out); when it has run: cosched sim sweep --gather {d}",
            points.len()
        ),
        None => outln!("every point of {d} has its result: cosched sim sweep --gather {d}"),
    }
    Ok(0)
}

/// `--point K --spec FILE`: one array task.
fn run_point(index: usize, spec_file: &std::path::Path) -> anyhow::Result<i32> {
    let dir = spec_file.parent().unwrap_or(std::path::Path::new("."));
    let sweep = SweepDir::open(dir)?;
    let line = <SweepLine as clap::Parser>::try_parse_from(
        std::iter::once("sweep".to_string()).chain(sweep.spec.args.iter().cloned()),
    )
    .with_context(|| format!("{}: reading its arguments", spec_file.display()))?;
    let spec = sweep_spec(&line.args)?;
    let prepared = prepare(&spec)?;
    let point = sweep.run_point(&prepared, &Provenance::of(&spec.source), index)?;
    outln!(
        "point {index} ({}) of {}: {}",
        sweep.spec.points[index],
        sweep.dir.display(),
        point.row.error.as_deref().unwrap_or("done")
    );
    Ok(0)
}

/// `--gather DIR`: the points' rows into the files a local sweep writes.
fn gather(a: &SweepArgs, dir: &std::path::Path) -> anyhow::Result<i32> {
    let sweep = SweepDir::open(dir)?;
    let (rows, prov) = sweep.gather()?;
    let metric: Metric = sweep
        .spec
        .metric
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: {e}", sweep.dir.join(SPEC).display()))?;
    let json = write_files(
        &rows,
        &prov,
        &Outputs {
            dir: &sweep.dir,
            title: &sweep.spec.title,
            metric,
            plots: &a.plot,
        },
    )?;
    Ok(print_rows(&rows, &json, a.json, &sweep.dir))
}

/// Prints a sweep's table (or its JSON); the exit status: 1 when a point failed.
fn print_rows(rows: &[SweepRow], json: &str, as_json: bool, out: &std::path::Path) -> i32 {
    if as_json {
        outln!("{json}");
    } else {
        // The last column, without a header, says why a point failed.
        let header = [
            "policy", "load", "seed", "jobs", "wait_s", "bsld", "±90%", "util", "",
        ];
        let rows = rows.iter().map(|r| {
            vec![
                r.policy.clone(),
                r.load.map_or("-".into(), |l| format!("{l}")),
                r.seed.to_string(),
                r.jobs.to_string(),
                format!("{:.1}", r.mean_wait_s),
                format!("{:.3}", r.mean_bounded_slowdown),
                r.bounded_slowdown_ci90
                    .map_or("-".into(), |c| format!("{c:.3}")),
                format!("{:.4}", r.utilization),
                r.error
                    .as_deref()
                    .map(|e| format!("ERROR: {e}"))
                    .unwrap_or_default(),
            ]
        });
        let mut right = [true; 9];
        (right[0], right[8]) = (false, false);
        out!("{}", aligned_table(&header, &right, rows));
        outln!("\nwrote {}/sweep.{{csv,json,png,svg}}", out.display());
    }
    i32::from(rows.iter().any(|r| r.error.is_some()))
}
