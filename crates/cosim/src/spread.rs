//! Results over seeds. A sweep whose grid has a `seed` parameter runs every other grid point
//! once per seed; [`over_seeds`] groups those runs by the other parameters and the scheme and
//! reports the mean and range of each figure, and for a PROC scheme the change against its
//! base scheme (SB+PROC against SB, PB+PROC against PB) seed by seed — paired, since both
//! schemes see the same jobs — as its median and range.

use std::collections::BTreeMap;

use cosched_node::Scheme;
use serde::Serialize;

use crate::results::{Fractions, RunResult};

/// Mean, minimum and maximum of one figure over the seeds.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Range {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// Median, minimum and maximum of a per-seed change, in percent.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Change {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// A PROC scheme against its base scheme, seed by seed.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct VsBase {
    pub base: String,
    /// (PROC − base) / base of the mean response, percent.
    pub response_pct: Change,
    pub makespan_pct: Change,
}

/// One scheme at one grid point (seed aside), over its seeds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Spread {
    /// The grid point without the seed.
    pub params: BTreeMap<String, String>,
    pub scheme: String,
    pub seeds: Vec<String>,
    pub response_s: Range,
    pub makespan_s: Range,
    pub pending_ms: Range,
    /// The breakdown's mean over the seeds.
    pub breakdown: Fractions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_base: Option<VsBase>,
}

fn range(xs: &[f64]) -> Range {
    let n = xs.len().max(1) as f64;
    Range {
        mean: xs.iter().sum::<f64>() / n,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

fn change(mut xs: Vec<f64>) -> Change {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let median = if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    };
    Change {
        median,
        min: xs[0],
        max: xs[n - 1],
    }
}

/// Groups a sweep's runs by grid point (seed aside) and scheme, in the sweep's order. Empty
/// when no run has a `seed` parameter.
pub fn over_seeds(results: &[RunResult]) -> Vec<Spread> {
    let seed_of = |r: &RunResult| r.params.as_ref().and_then(|p| p.get("seed")).cloned();
    if results.iter().all(|r| seed_of(r).is_none()) {
        return Vec::new();
    }
    let point = |r: &RunResult| {
        let mut p = r.params.clone().unwrap_or_default();
        p.remove("seed");
        p
    };
    type Key = (BTreeMap<String, String>, String);
    let mut groups: Vec<(Key, Vec<&RunResult>)> = Vec::new();
    for r in results {
        let key = (point(r), r.scheme.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, runs)) => runs.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    let find = |params: &BTreeMap<String, String>, scheme: &str, seed: &Option<String>| {
        results
            .iter()
            .find(|r| r.scheme == scheme && point(r) == *params && seed_of(r) == *seed)
    };
    groups
        .iter()
        .map(|((params, scheme), runs)| {
            let of = |f: &dyn Fn(&RunResult) -> f64| runs.iter().map(|r| f(r)).collect::<Vec<_>>();
            let mean_of = |f: &dyn Fn(&Fractions) -> f64| range(&of(&|r| f(&r.breakdown))).mean;
            let base = scheme
                .parse::<Scheme>()
                .ok()
                .and_then(Scheme::proc_base)
                .map(Scheme::name);
            let vs_base = base.and_then(|b| {
                let pairs: Vec<(&RunResult, &RunResult)> = runs
                    .iter()
                    .filter_map(|r| find(params, b, &seed_of(r)).map(|o| (*r, o)))
                    .collect();
                let pct = |f: &dyn Fn(&RunResult) -> f64| {
                    pairs
                        .iter()
                        .map(|(p, o)| 100.0 * (f(p) - f(o)) / f(o))
                        .collect::<Vec<_>>()
                };
                (!pairs.is_empty()).then(|| VsBase {
                    base: b.to_string(),
                    response_pct: change(pct(&|r| r.mean_response_s)),
                    makespan_pct: change(pct(&|r| r.makespan_s)),
                })
            });
            Spread {
                params: params.clone(),
                scheme: scheme.clone(),
                seeds: runs.iter().filter_map(|r| seed_of(r)).collect(),
                response_s: range(&of(&|r| r.mean_response_s)),
                makespan_s: range(&of(&|r| r.makespan_s)),
                pending_ms: range(&of(&|r| r.msg_pending_s * 1e3)),
                breakdown: Fractions {
                    compute: mean_of(&|b| b.compute),
                    spin: mean_of(&|b| b.spin),
                    idle: mean_of(&|b| b.idle),
                    context_switch: mean_of(&|b| b.context_switch),
                    overhead: mean_of(&|b| b.overhead),
                },
                vs_base,
            }
        })
        .collect()
}
