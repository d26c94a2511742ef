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

use crate::metrics::MetricsOptions;
use crate::multicore_metrics::MulticoreSummary;
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

mod chart;
#[cfg(test)]
mod tests;

pub use chart::{Metric, chart, multicore_chart, series_name};
