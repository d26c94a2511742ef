//! A sweep's figures: the y-axis metric a sweep plots, the line chart of one metric against
//! offered load (one line per policy, seed 002 Fig. 6), and the multicore chart.

use cosched_policy::registry;

use super::SweepRow;
use crate::metrics::T95;
use crate::multicore_metrics::MulticoreSummary;
use crate::plot::{LineChart, Series};

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
