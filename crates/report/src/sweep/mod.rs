//! Sweeps: every policy × offered load × seed, run in parallel (rayon), one row each, and the
//! figure of seed 002 Fig. 6 — mean bounded slowdown against load, one line per policy.
//!
//! Each cell is one [`run::run`], the pipeline of a single `cosched sim` run.
//!
//! Rows come out in the order of the spec (policies, then loads, then seeds) whatever order
//! the threads finish in, so a sweep's table is as deterministic as a single run.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Deserializer, Serialize};

use cosched_core::MachineShape;
use cosched_policy::{ConfigError, registry};

use crate::metrics::{MetricsOptions, T95};
use crate::multicore_metrics::MulticoreSummary;
use crate::plot::{LineChart, Series};
use crate::provenance::Provenance;
use crate::run::{self, RunError, RunSpec};
use crate::setup::{SetupError, Source};
use cosched_policy::{PolicyOptions, policy_config};
use cosched_sim::EngineOptions;
use cosched_sim::trace::Semantics;

/// What to sweep.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    pub source: Source,
    pub policies: Vec<String>,
    /// Offered loads; `None` is the workload's own load.
    pub loads: Vec<Option<f64>>,
    /// Model seeds (a trace is the same for every seed: give one).
    pub seeds: Vec<u64>,
    pub semantics: Semantics,
    pub engine: EngineOptions,
    pub policy: PolicyOptions,
    pub metrics: MetricsOptions,
    /// The machine; `None` is one PE per node, as many as the source's PEs.
    pub machine: Option<MachineShape>,
    /// Seed 002's stopping rule for model workloads; `None`: one run of the model's jobs.
    pub stop: Option<StopRule>,
}

/// Seed 002 §3.2's stopping rule: each point is simulated with more jobs until the batch-means
/// 90 % interval of its mean bounded slowdown is within `rel` of the mean (at least 3 batches
/// after the warm-up batch, at most `max_batches`). Batches are the metrics' `batch_size` job
/// terminations. The job count doubles from attempt to attempt, each attempt a fresh run of
/// the model with the same seed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StopRule {
    pub rel: f64,
    pub max_batches: usize,
}

impl StopRule {
    /// Whether an estimate satisfies the rule (or can no longer grow).
    pub fn met(&self, b: Option<&crate::metrics::BatchMeans>) -> bool {
        b.is_some_and(|b| {
            b.batches >= self.max_batches
                || (b.batches >= 3 && b.ci90_half_width <= self.rel * b.mean.abs())
        })
    }
}

/// A sweep's policy entry: a registered name, optionally with options of its own after
/// colons (`glomarc:variant=cst:block_size=8`), so one sweep can compare variants and
/// parameter values of one policy. Returns the name and the options.
pub fn parse_entry(entry: &str) -> Result<(&str, Vec<String>), ConfigError> {
    // `external:CMD` is one name; its options come from the shared ones.
    if registry::is_external(entry) {
        return Ok((entry, Vec::new()));
    }
    let mut parts = entry.split(':');
    let name = parts.next().unwrap_or_default();
    let opts: Vec<String> = parts.map(str::to_string).collect();
    for o in &opts {
        if !o.contains('=') {
            return Err(ConfigError::BadOpt { text: o.clone() });
        }
    }
    Ok((name, opts))
}

/// One row of a sweep's table: a point and its figures. Read back from a point's file by
/// `--gather` ([`crate::sweep_array`]); JSON writes a NaN (a failed point's figures) as
/// `null`, which reads back as NaN.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub policy: String,
    /// The offered load asked for (`null`: the workload's own).
    pub load: Option<f64>,
    pub seed: u64,
    pub jobs: usize,
    pub unfinished: usize,
    #[serde(deserialize_with = "nan_when_null")]
    pub mean_wait_s: f64,
    #[serde(deserialize_with = "nan_when_null")]
    pub mean_response_s: f64,
    #[serde(deserialize_with = "nan_when_null")]
    pub mean_slowdown: f64,
    #[serde(deserialize_with = "nan_when_null")]
    pub mean_bounded_slowdown: f64,
    /// 90th percentile of the bounded slowdown over jobs.
    #[serde(deserialize_with = "nan_when_null")]
    pub p90_bounded_slowdown: f64,
    /// 90th percentile of the wait over jobs.
    #[serde(deserialize_with = "nan_when_null")]
    pub p90_wait_s: f64,
    /// Half-width of the batch-means 90 % interval of the mean bounded slowdown, when there
    /// were enough batches.
    pub bounded_slowdown_ci90: Option<f64>,
    #[serde(deserialize_with = "nan_when_null")]
    pub utilization: f64,
    #[serde(deserialize_with = "nan_when_null")]
    pub makespan_s: f64,
    /// Why the run failed (a policy broke its contract), if it did.
    pub error: Option<String>,
    /// Seed 001's figures, for multi-core policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicore: Option<MulticoreSummary>,
}

/// A figure that JSON wrote as `null` (serde_json's form of NaN) reads back as NaN.
fn nan_when_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A sweep could not start.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Policy(#[from] ConfigError),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// A sweep checked and ready to run: each entry's policy name and configuration, and the
/// points in the spec's order (policies, then loads, then seeds).
pub struct Prepared<'a> {
    spec: &'a SweepSpec,
    names: Vec<String>,
    cfgs: Vec<cosched_policy::PolicyConfig>,
    points: Vec<Point>,
}

/// One point of a sweep: which entry of `SweepSpec::policies`, which load, which seed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub policy: usize,
    pub load: Option<f64>,
    pub seed: u64,
}

/// Runs every point; `tick` is called once per finished point (from worker threads).
pub fn run(spec: &SweepSpec, tick: &(dyn Fn() + Sync)) -> Result<Vec<SweepRow>, SweepError> {
    let prepared = prepare(spec)?;
    let rows = (0..prepared.points.len())
        .into_par_iter()
        .map(|i| {
            let row = prepared.run_point(i);
            tick();
            row
        })
        .collect();
    Ok(rows)
}

/// Checks every policy entry and option before any time is spent, and lists the points.
pub fn prepare(spec: &SweepSpec) -> Result<Prepared<'_>, SweepError> {
    let machine = spec
        .machine
        .unwrap_or_else(|| MachineShape::flat(spec.source.procs(), 1));
    let cfg = policy_config(machine, &spec.policy)?;
    // One sweep's options serve several policies: each gets the keys it takes, and a key that
    // no policy of the sweep takes is refused, as a single run would.
    let mut known: Vec<&str> = Vec::new();
    let mut cfgs = Vec::with_capacity(spec.policies.len());
    let mut names = Vec::with_capacity(spec.policies.len());
    for entry in &spec.policies {
        let (name, own) = parse_entry(entry)?;
        known.extend(registry::options(name).unwrap_or_default());
        let mut c = registry::restrict(name, &cfg);
        // The options every driver takes (quantum, mpl, context_switch) may be given per
        // entry too, so `gang:quantum=10s,gang:quantum=600s` is two series of one sweep.
        let mut rest = Vec::new();
        for o in own {
            let (k, v) = o.split_once('=').unwrap_or((&o, ""));
            let bad = |why: String| ConfigError::BadOpt {
                text: format!("{o} ({why})"),
            };
            match k.trim() {
                "quantum" => c.quantum = Some(v.trim().parse().map_err(|e| bad(format!("{e}")))?),
                "context_switch" => {
                    c.context_switch = Some(v.trim().parse().map_err(|e| bad(format!("{e}")))?)
                }
                "mpl" => c.mpl = Some(v.trim().parse().map_err(|e| bad(format!("{e}")))?),
                _ => rest.push(o),
            }
        }
        let extra = policy_config(
            machine,
            &PolicyOptions {
                opts: rest,
                ..PolicyOptions::default()
            },
        )?;
        c.options.extend(extra.options);
        cfgs.push(c);
        names.push(name.to_string());
    }
    known.sort_unstable();
    known.dedup();
    // An external policy reads any option from its hello.
    let any_external = names.iter().any(|n| registry::is_external(n));
    let unknown: Vec<String> = cfg
        .options
        .keys()
        .filter(|k| !any_external && !known.contains(&k.as_str()))
        .cloned()
        .collect();
    // Refuse unknown policies and bad options before spending any time.
    for (name, cfg) in names.iter().zip(&cfgs) {
        registry::build(name, cfg)?;
    }
    if !unknown.is_empty() {
        return Err(ConfigError::UnknownOption {
            policy: spec.policies.join(", "),
            unknown,
            known: known.into_iter().map(String::from).collect(),
        }
        .into());
    }
    let points = (0..spec.policies.len())
        .flat_map(|policy| {
            spec.loads.iter().flat_map(move |&load| {
                spec.seeds
                    .iter()
                    .map(move |&seed| Point { policy, load, seed })
            })
        })
        .collect();
    Ok(Prepared {
        spec,
        names,
        cfgs,
        points,
    })
}

impl Prepared<'_> {
    /// The points, in the order of the rows.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// The policy entry of a point, as the spec spells it.
    pub fn entry(&self, p: &Point) -> &str {
        &self.spec.policies[p.policy]
    }

    /// Runs point `index` (of [`Prepared::points`]); a policy that broke its contract is a
    /// row with its error, as in a whole sweep.
    pub fn run_point(&self, index: usize) -> SweepRow {
        let spec = self.spec;
        let Point { policy, load, seed } = self.points[index];
        let name = &spec.policies[policy];
        // The same pipeline as a single `cosched sim` run, unobserved.
        let cell = RunSpec {
            source: &spec.source,
            semantics: spec.semantics,
            load,
            seed: Some(seed),
            policy: &self.names[policy],
            config: &self.cfgs[policy],
            engine: spec.engine.clone(),
            metrics: spec.metrics,
            observe: None,
        };
        let mut result = run::run(&cell);
        if let (Some(rule), Some(mut jobs)) = (spec.stop, spec.source.model_jobs()) {
            let batch = spec.metrics.batch_size.max(1);
            // Warm-up batch + the batches the rule allows at most.
            let most = batch * (rule.max_batches + 1);
            jobs = jobs.max(batch * 4).min(most);
            let mut src;
            loop {
                src = spec.source.with_jobs(jobs);
                result = run::run(&RunSpec {
                    source: &src,
                    ..cell.clone()
                });
                let done = match &result {
                    Ok(out) => rule.met(out.summary.batch_bounded_slowdown.as_ref()),
                    Err(_) => true,
                };
                if done || jobs >= most {
                    break;
                }
                jobs = (jobs * 2).min(most);
            }
        }
        match result {
            Ok(out) => {
                let s = out.summary;
                SweepRow {
                    policy: name.clone(),
                    load,
                    seed,
                    jobs: s.jobs,
                    unfinished: s.unfinished,
                    mean_wait_s: s.mean_wait_s,
                    mean_response_s: s.mean_response_s,
                    mean_slowdown: s.mean_slowdown,
                    mean_bounded_slowdown: s.mean_bounded_slowdown,
                    p90_bounded_slowdown: s.all.bounded_slowdown.p90,
                    p90_wait_s: s.all.wait_s.p90,
                    bounded_slowdown_ci90: s.batch_bounded_slowdown.map(|b| b.ci90_half_width),
                    utilization: s.utilization,
                    makespan_s: s.makespan_s,
                    error: None,
                    multicore: s.multicore,
                }
            }
            Err(err) => SweepRow {
                policy: name.clone(),
                load,
                seed,
                jobs: 0,
                unfinished: match &err {
                    RunError::Sim { jobs, .. } | RunError::Failed { jobs, .. } => *jobs,
                    // Checked before the sweep started; no jobs were prepared.
                    RunError::Policy(_) | RunError::Classes(_) => 0,
                },
                mean_wait_s: f64::NAN,
                mean_response_s: f64::NAN,
                mean_slowdown: f64::NAN,
                mean_bounded_slowdown: f64::NAN,
                p90_bounded_slowdown: f64::NAN,
                p90_wait_s: f64::NAN,
                bounded_slowdown_ci90: None,
                utilization: f64::NAN,
                makespan_s: f64::NAN,
                error: Some(err.to_string()),
                multicore: None,
            },
        }
    }
}

/// The CSV table: the provenance as `# key: value` lines (when given), a header, one record
/// per row; written with the `csv` crate, so an error message with commas or quotes stays
/// one field. Multi-core sweeps add seed 001's figures as further columns.
pub fn to_csv(rows: &[SweepRow], provenance: Option<&Provenance>) -> String {
    let multicore = rows.iter().any(|r| r.multicore.is_some());
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "policy",
        "load",
        "seed",
        "jobs",
        "unfinished",
        "mean_wait_s",
        "p90_wait_s",
        "mean_response_s",
        "mean_slowdown",
        "mean_bounded_slowdown",
        "p90_bounded_slowdown",
        "bounded_slowdown_ci90",
        "utilization",
        "makespan_s",
        "error",
    ];
    if multicore {
        header.extend([
            "rr_short",
            "rr_medium",
            "rr_long",
            "rr_all",
            "core_util",
            "node_util",
            "high_core_util",
            "high_node_util",
            "groups",
            "jobs_per_group",
        ]);
    }
    // Writing to a Vec cannot fail.
    let _ = w.write_record(&header);
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for r in rows {
        let mut rec = vec![
            r.policy.clone(),
            opt(r.load),
            r.seed.to_string(),
            r.jobs.to_string(),
            r.unfinished.to_string(),
            format!("{:.3}", r.mean_wait_s),
            format!("{:.3}", r.p90_wait_s),
            format!("{:.3}", r.mean_response_s),
            format!("{:.4}", r.mean_slowdown),
            format!("{:.4}", r.mean_bounded_slowdown),
            format!("{:.4}", r.p90_bounded_slowdown),
            r.bounded_slowdown_ci90
                .map_or(String::new(), |v| format!("{v:.4}")),
            format!("{:.4}", r.utilization),
            format!("{:.0}", r.makespan_s),
            r.error.clone().unwrap_or_default(),
        ];
        if multicore {
            match &r.multicore {
                Some(m) => rec.extend([
                    format!("{:.4}", m.short.rr),
                    format!("{:.4}", m.medium.rr),
                    format!("{:.4}", m.long.rr),
                    format!("{:.4}", m.all.rr),
                    format!("{:.4}", m.core_utilization),
                    format!("{:.4}", m.node_utilization),
                    format!("{:.4}", m.high_load_core_utilization),
                    format!("{:.4}", m.high_load_node_utilization),
                    m.groups.to_string(),
                    format!("{:.3}", m.jobs_per_group),
                ]),
                None => rec.extend(std::iter::repeat_n(String::new(), 10)),
            }
        }
        let _ = w.write_record(&rec);
    }
    let body = w.into_inner().unwrap_or_default();
    let mut out = provenance.map(Provenance::csv_comments).unwrap_or_default();
    out.push_str(&String::from_utf8_lossy(&body));
    out
}

/// Where a sweep's files go and what its figure shows.
pub struct Outputs<'a> {
    pub dir: &'a Path,
    pub title: &'a str,
    pub metric: Metric,
    /// Further copies of the figure (`--plot`), SVG or PNG by the extension.
    pub plots: &'a [PathBuf],
}

/// A sweep's files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("drawing {path}: {source}")]
    Plot {
        path: PathBuf,
        source: crate::plot::PlotError,
    },
}

/// Writes `DIR/sweep.csv`, `sweep.json`, `sweep.png` and `sweep.svg` (and the further plots)
/// of `rows`, each with `prov`; returns the JSON text. The figure is seed 001's when the rows
/// have its figures, else `metric` against load. A local sweep and a gathered one
/// ([`crate::sweep_array::gather`]) write through here, so the same rows give the same files.
pub fn write_files(
    rows: &[SweepRow],
    prov: &Provenance,
    out: &Outputs,
) -> Result<String, FilesError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FilesError::Io { path, source }
    };
    std::fs::create_dir_all(out.dir).map_err(io(out.dir))?;
    let csv = out.dir.join("sweep.csv");
    std::fs::write(&csv, to_csv(rows, Some(prov))).map_err(io(&csv))?;
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "provenance": prov,
        "rows": rows,
    }))
    // Rows and provenance are plain data; serializing them cannot fail.
    .unwrap_or_default();
    let json_path = out.dir.join("sweep.json");
    std::fs::write(&json_path, &json).map_err(io(&json_path))?;
    let mut c = if rows.iter().any(|r| r.multicore.is_some()) {
        multicore_chart(rows, out.title)
    } else {
        chart(rows, out.title, out.metric)
    };
    c.provenance = Some(prov.clone());
    let files = ["png", "svg"].map(|ext| out.dir.join(format!("sweep.{ext}")));
    for p in files.iter().chain(out.plots) {
        crate::plot::line_chart(p, &c).map_err(|source| FilesError::Plot {
            path: p.clone(),
            source,
        })?;
    }
    Ok(json)
}

/// What a sweep's figure plots on its y axis (`cosched sim sweep --metric`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Mean bounded slowdown (the default; seed 002 Fig. 6).
    Bsld,
    /// 90th percentile of the bounded slowdown.
    P90Bsld,
    /// Mean wait, seconds.
    Wait,
    /// 90th percentile of the wait, seconds.
    P90Wait,
    /// Mean response time, seconds.
    Response,
    /// Mean (unbounded) slowdown.
    Slowdown,
    /// Utilization of the machine.
    Utilization,
    /// Makespan, seconds.
    Makespan,
}

impl Metric {
    /// Every metric, with its name on the command line.
    pub const ALL: [(Metric, &'static str); 8] = [
        (Metric::Bsld, "bsld"),
        (Metric::P90Bsld, "p90-bsld"),
        (Metric::Wait, "wait"),
        (Metric::P90Wait, "p90-wait"),
        (Metric::Response, "response"),
        (Metric::Slowdown, "slowdown"),
        (Metric::Utilization, "utilization"),
        (Metric::Makespan, "makespan"),
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        Metric::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("bsld", |(_, n)| n)
    }

    /// The axis label.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Bsld => "mean bounded slowdown",
            Metric::P90Bsld => "p90 bounded slowdown",
            Metric::Wait => "mean wait (s)",
            Metric::P90Wait => "p90 wait (s)",
            Metric::Response => "mean response (s)",
            Metric::Slowdown => "mean slowdown",
            Metric::Utilization => "utilization",
            Metric::Makespan => "makespan (s)",
        }
    }

    /// A row's value.
    pub fn of(self, r: &SweepRow) -> f64 {
        match self {
            Metric::Bsld => r.mean_bounded_slowdown,
            Metric::P90Bsld => r.p90_bounded_slowdown,
            Metric::Wait => r.mean_wait_s,
            Metric::P90Wait => r.p90_wait_s,
            Metric::Response => r.mean_response_s,
            Metric::Slowdown => r.mean_slowdown,
            Metric::Utilization => r.utilization,
            Metric::Makespan => r.makespan_s,
        }
    }

    /// Whether the axis is logarithmic: slowdowns and waits span decades near saturation.
    pub fn log(self) -> bool {
        !matches!(self, Metric::Utilization | Metric::Makespan)
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Metric, String> {
        Metric::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(m, _)| *m)
            .ok_or_else(|| {
                format!(
                    "unknown metric {s:?}; the metrics are {}",
                    Metric::ALL.map(|(_, n)| n).join(", ")
                )
            })
    }
}

/// A sweep entry's name in a legend: `gang:quantum=10s` becomes `gang quantum=10s`.
pub fn series_name(entry: &str) -> String {
    if registry::is_external(entry) {
        return entry.to_string();
    }
    entry.replace(':', " ")
}

/// Seed 001's figures against the value of the option varied across a sweep's policy
/// entries (the last `key=value` of each entry), one line per entry without that option and
/// job type; where the last option is not a number (schedulers side by side), one line per
/// job type over the entries' positions. RR of medium, long and all jobs, the mean over
/// seeds and loads.
pub fn multicore_chart(rows: &[SweepRow], title: &str) -> LineChart {
    let split = |label: &str| -> (String, String) {
        match label.rsplit_once(':') {
            Some((base, last)) if last.contains('=') => (base.to_string(), last.to_string()),
            _ => (label.to_string(), String::new()),
        }
    };
    let mut entries: Vec<&str> = Vec::new();
    for r in rows {
        if !entries.contains(&r.policy.as_str()) {
            entries.push(&r.policy);
        }
    }
    let mut key = String::from("variant");
    let mut x_names = Vec::new();
    let mut numeric = false;
    let mut series: Vec<Series> = Vec::new();
    type Pick = fn(&MulticoreSummary) -> f64;
    let types: [(&str, Pick); 3] = [
        ("medium", |m| m.medium.rr),
        ("long", |m| m.long.rr),
        ("all", |m| m.all.rr),
    ];
    for (pos, &e) in entries.iter().enumerate() {
        let (mut base, last) = split(e);
        // A numeric last option is the x value; anything else is a line of its own.
        let x = match last.split_once('=').map(|(k, v)| (k, v.parse::<f64>())) {
            Some((k, Ok(v))) => {
                key = k.to_string();
                numeric = true;
                v
            }
            // Entries that differ otherwise (schedulers side by side): one line per job
            // type, the entries in order along x.
            _ => {
                base = String::new();
                // The last option's value names the entry (`variant=ssp`: "ssp").
                x_names.push(match last.split_once('=') {
                    Some((_, v)) => v.to_string(),
                    None => series_name(e),
                });
                pos as f64 + 1.0
            }
        };
        let ms: Vec<&MulticoreSummary> = rows
            .iter()
            .filter(|r| r.policy == e)
            .filter_map(|r| r.multicore.as_ref())
            .collect();
        if ms.is_empty() {
            continue;
        }
        for (t, f) in types {
            let name = if base.is_empty() {
                t.to_string()
            } else {
                format!("{base} {t}")
            };
            let mean = ms.iter().map(|m| f(m)).sum::<f64>() / ms.len() as f64;
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((x, mean)),
                None => series.push(Series {
                    name,
                    points: vec![(x, mean)],
                    error: None,
                    markers_only: false,
                }),
            }
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    if numeric {
        // Names only when every entry is a category: on a numeric axis they would hide the
        // numbers.
        x_names.clear();
    }
    let mut seeds: Vec<u64> = rows.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    LineChart {
        title: title.to_string(),
        x_label: key,
        y_label: "mean bounded relative response time".into(),
        log_y: false,
        series: series
            .into_iter()
            .map(|s| Series {
                name: series_name(&s.name),
                ..s
            })
            .collect(),
        note: format!(
            "points: mean over {} seed{} and loads; no error bars",
            seeds.len(),
            if seeds.len() == 1 { "" } else { "s" }
        ),
        provenance: None,
        x_names,
    }
}

/// `metric` against load, one line per sweep entry (the mean over seeds). Error bars: with
/// several seeds, the 90 % Student-t interval of the mean over the seeds; with one seed, for
/// the mean bounded slowdown only, the batch-means 90 % interval of that run; else none. The
/// chart's note says which.
pub fn chart(rows: &[SweepRow], title: &str, metric: Metric) -> LineChart {
    let mut policies: Vec<&str> = Vec::new();
    for r in rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let mut seeds: Vec<u64> = rows.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let series = policies
        .iter()
        .map(|&p| {
            let mut loads: Vec<f64> = rows
                .iter()
                .filter(|r| r.policy == p && r.error.is_none())
                .filter_map(|r| r.load)
                .collect();
            loads.sort_by(f64::total_cmp);
            loads.dedup();
            let mut points = Vec::new();
            let mut error = Vec::new();
            for l in loads {
                let v: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.policy == p && r.load == Some(l) && r.error.is_none())
                    .map(|r| metric.of(r))
                    .collect();
                let n = v.len() as f64;
                let mean = v.iter().sum::<f64>() / n;
                let half = if v.len() == 1 {
                    rows.iter()
                        .find(|r| r.policy == p && r.load == Some(l) && r.error.is_none())
                        .filter(|_| metric == Metric::Bsld)
                        .and_then(|r| r.bounded_slowdown_ci90)
                        .unwrap_or(f64::NAN)
                } else {
                    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
                    let t = T95.get(v.len() - 2).copied().unwrap_or(1.645);
                    t * (var / n).sqrt()
                };
                points.push((l, mean));
                error.push(half);
            }
            Series {
                name: series_name(p),
                points,
                error: Some(error),
                markers_only: false,
            }
        })
        .collect();
    let note = match (seeds.len(), metric) {
        (1, Metric::Bsld) => {
            "bars: 90 % batch-means confidence interval of the one run (one seed)".to_string()
        }
        (1, _) => "one seed: no error bars".to_string(),
        (n, _) => format!(
            "points: mean over {n} seeds; bars: 90 % Student-t confidence interval of that mean"
        ),
    };
    LineChart {
        x_names: Vec::new(),
        title: title.to_string(),
        x_label: "offered load".into(),
        y_label: metric.label().into(),
        log_y: metric.log(),
        series,
        note,
        provenance: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_workload::lublin::GenOptions;

    #[test]
    fn sweep_rows_follow_the_spec_order_and_backfilling_beats_fcfs() {
        let model = GenOptions {
            jobs: 600,
            procs: 64,
            seed: 3,
            ..GenOptions::default()
        };
        let spec = SweepSpec {
            source: Source::Lublin {
                model: Box::new(model),
            },
            policies: vec!["fcfs".into(), "easy".into()],
            loads: vec![Some(0.6), Some(0.85)],
            seeds: vec![1, 2],
            semantics: Semantics::default(),
            engine: EngineOptions::default(),
            policy: PolicyOptions::default(),
            metrics: MetricsOptions {
                batch_size: 100,
                ..MetricsOptions::default()
            },
            stop: None,
            machine: None,
        };
        let count = std::sync::atomic::AtomicUsize::new(0);
        let rows = run(&spec, &|| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(count.into_inner(), 8);
        let keys: Vec<_> = rows
            .iter()
            .map(|r| (r.policy.as_str(), r.load.unwrap(), r.seed))
            .collect();
        assert_eq!(
            keys[..3],
            [("fcfs", 0.6, 1), ("fcfs", 0.6, 2), ("fcfs", 0.85, 1)]
        );
        assert!(rows.iter().all(|r| r.error.is_none() && r.jobs == 600));
        let mean = |p: &str, l: f64| {
            rows.iter()
                .filter(|r| r.policy == p && r.load == Some(l))
                .map(|r| r.mean_bounded_slowdown)
                .sum::<f64>()
        };
        assert!(mean("easy", 0.85) < mean("fcfs", 0.85), "{rows:?}");
        let csv = to_csv(&rows, None);
        assert_eq!(csv.lines().count(), 9);
        let c = chart(&rows, "t", Metric::Bsld);
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.series[0].points.len(), 2);
        // Same spec, same table.
        assert_eq!(to_csv(&run(&spec, &|| {}).unwrap(), None), csv);
    }

    /// Options serve the policies that take them; one that no policy of the sweep takes is
    /// refused before anything runs.
    #[test]
    fn sweep_options_go_to_the_policies_that_take_them() {
        let model = GenOptions {
            jobs: 50,
            procs: 16,
            seed: 1,
            ..GenOptions::default()
        };
        let mut spec = SweepSpec {
            source: Source::Lublin {
                model: Box::new(model),
            },
            policies: vec!["easy".into(), "gang".into()],
            loads: vec![None],
            seeds: vec![1],
            semantics: Semantics::default(),
            engine: EngineOptions::default(),
            policy: PolicyOptions {
                opts: vec!["packing=first-fit".into()],
                ..PolicyOptions::default()
            },
            metrics: MetricsOptions::default(),
            stop: None,
            machine: None,
        };
        let rows = run(&spec, &|| {}).unwrap();
        assert!(rows.iter().all(|r| r.error.is_none()), "{rows:?}");
        spec.policy.opts.push("packng=best-fit".into());
        let err = run(&spec, &|| {}).unwrap_err().to_string();
        assert_eq!(
            err,
            "policy easy, gang: unknown option packng; known options: alternate, packing, \
             queue, relaxed, repack, variant"
        );
    }

    #[test]
    fn a_sweep_cell_is_a_single_run() {
        let model = GenOptions {
            jobs: 300,
            procs: 32,
            seed: 9,
            ..GenOptions::default()
        };
        let spec = SweepSpec {
            source: Source::Lublin {
                model: Box::new(model),
            },
            policies: vec!["conservative".into()],
            loads: vec![Some(0.9)],
            seeds: vec![4],
            semantics: Semantics::default(),
            engine: EngineOptions::default(),
            policy: PolicyOptions::default(),
            metrics: MetricsOptions::default(),
            stop: None,
            machine: None,
        };
        let rows = run(&spec, &|| {}).unwrap();
        let cfg = policy_config(MachineShape::flat(32, 1), &spec.policy).unwrap();
        let single = run::run(&RunSpec {
            source: &spec.source,
            semantics: spec.semantics,
            load: Some(0.9),
            seed: Some(4),
            policy: "conservative",
            config: &cfg,
            engine: spec.engine.clone(),
            metrics: spec.metrics,
            observe: None,
        })
        .unwrap();
        let s = single.summary;
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (
                rows[0].jobs,
                rows[0].mean_wait_s,
                rows[0].mean_bounded_slowdown
            ),
            (s.jobs, s.mean_wait_s, s.mean_bounded_slowdown)
        );
    }

    /// Seed 001's sweeps: variants and parameter values of one policy as entries, on the
    /// multi-core machine, with its figures in the rows, the CSV and the chart.
    #[test]
    fn multicore_entries_sweep_variants_and_parameters() {
        let spec = SweepSpec {
            source: Source::Lublin {
                model: Box::new(GenOptions::seed001(
                    cosched_workload::lublin::ALPHA_W1,
                    400,
                    1,
                )),
            },
            policies: vec![
                "glomarc:variant=ssp".into(),
                "glomarc:block_size=4".into(),
                "glomarc:block_size=12".into(),
            ],
            loads: vec![None],
            seeds: vec![1, 2],
            semantics: Semantics::default(),
            engine: EngineOptions::default(),
            policy: PolicyOptions::default(),
            metrics: MetricsOptions::default(),
            stop: None,
            machine: Some(MachineShape {
                nodes: 128,
                sockets_per_node: 2,
                cores_per_socket: 2,
                mem_per_node_mib: None,
            }),
        };
        let rows = run(&spec, &|| {}).unwrap();
        assert_eq!(rows.len(), 6);
        assert!(
            rows.iter()
                .all(|r| r.error.is_none() && r.multicore.is_some()),
            "{rows:?}"
        );
        assert_eq!(rows[0].multicore.as_ref().unwrap().groups, 0.0);
        let csv = to_csv(&rows, None);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",groups,jobs_per_group")
        );
        let c = multicore_chart(&rows, "t");
        assert_eq!(c.x_label, "block_size");
        let glomarc_all = c.series.iter().find(|s| s.name == "glomarc all").unwrap();
        assert_eq!(
            glomarc_all.points.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![4.0, 12.0]
        );
        assert!(c.x_names.is_empty(), "a numeric option is an x value");
        // Schedulers side by side: x is their position, each tick named by its value.
        let mut side = rows.clone();
        for r in &mut side {
            r.policy = r.policy.replace("block_size=4", "variant=ssp");
            r.policy = r.policy.replace("block_size=12", "variant=glts");
        }
        let c = multicore_chart(&side, "t");
        assert_eq!(c.x_names, ["ssp", "glts"]);
        assert_eq!(
            c.series[0].points.iter().map(|p| p.0).collect::<Vec<_>>(),
            [1.0, 2.0]
        );
        let bad = SweepSpec {
            policies: vec!["glomarc:nokey".into()],
            ..spec
        };
        assert!(run(&bad, &|| {}).is_err());
    }

    /// Seed 002's stopping rule: a point gets more jobs until its interval is tight enough, and
    /// never more than the warm-up batch plus `max_batches`.
    #[test]
    fn the_stopping_rule_adds_jobs_until_the_interval_is_tight() {
        let spec = |rel: f64| SweepSpec {
            source: Source::Feitelson97 {
                model: Box::new(cosched_workload::feitelson97::Options {
                    jobs: 100,
                    procs: 64,
                    seed: 2,
                    ..Default::default()
                }),
            },
            policies: vec!["gang".into()],
            loads: vec![Some(0.5)],
            seeds: vec![1],
            semantics: Semantics::default(),
            engine: EngineOptions::default(),
            policy: PolicyOptions::default(),
            metrics: MetricsOptions {
                batch_size: 50,
                ..MetricsOptions::default()
            },
            stop: Some(StopRule {
                rel,
                max_batches: 10,
            }),
            machine: None,
        };
        // Never satisfied: the cap, 50 × (10 + 1) jobs, from 200 (4 batches) by doubling.
        let capped = run(&spec(1e-9), &|| {}).unwrap();
        assert_eq!(capped[0].jobs, 550);
        // Easily satisfied: the first attempt, 4 batches (warm-up + 3).
        let loose = run(&spec(1e9), &|| {}).unwrap();
        assert_eq!(loose[0].jobs, 200);
        let ci = loose[0].bounded_slowdown_ci90.unwrap();
        assert!(ci <= 1e9 * loose[0].mean_bounded_slowdown);
    }
}
