//! The figures a scheduling researcher looks at first in a workload: size, span, offered load,
//! the size and runtime distributions and how good the users' estimates are. Computed here and
//! only printed by the command line.

use serde::Serialize;

use crate::swf::{ReadReport, SwfRecord, Trace};
use crate::transform;

/// Summary of one workload; serialises to the JSON of `cosched workload info --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub source: String,
    pub jobs: usize,
    pub procs: u32,
    /// From the first to the last submit, in seconds.
    pub span_s: f64,
    pub offered_load: f64,
    pub first_submit_s: Option<f64>,
    pub last_submit_s: Option<f64>,
    pub mean_interarrival_s: Option<f64>,
    pub users: usize,
    pub size: SizeStats,
    pub runtime_s: Option<Quantiles>,
    /// Mean of ln(runtime in seconds) over jobs with a runtime of at least 1 s.
    pub mean_log_runtime: Option<f64>,
    pub estimates: Option<EstimateStats>,
    /// Jobs per SWF status code (−1 for unknown), sorted by code.
    pub status: Vec<(i32, usize)>,
    /// Jobs per queue number (−1 for unknown), sorted by queue.
    pub queues: Vec<(i64, usize)>,
    pub read: ReadReport,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeStats {
    /// Jobs with a known size.
    pub known: usize,
    pub serial_pct: f64,
    /// Power-of-two sizes among parallel jobs.
    pub pow2_pct_of_parallel: f64,
    pub mean: f64,
    pub median: u32,
    pub max: u32,
    /// Jobs per size class: `[1]`, `[2]`, `[3,4]`, `[5,8]`, … up to the machine size.
    pub histogram: Vec<SizeBin>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeBin {
    pub from: u32,
    pub to: u32,
    pub jobs: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quantiles {
    pub count: usize,
    pub mean: f64,
    pub min: f64,
    pub p10: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    /// Nearest-rank quantiles of `values` (sorted in place); `None` when empty.
    pub fn of(values: &mut [f64]) -> Option<Quantiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let q = |p: f64| values[(((n as f64) * p).ceil() as usize).clamp(1, n) - 1];
        Some(Quantiles {
            count: n,
            mean: values.iter().sum::<f64>() / n as f64,
            min: values[0],
            p10: q(0.10),
            p25: q(0.25),
            p50: q(0.50),
            p75: q(0.75),
            p90: q(0.90),
            p99: q(0.99),
            max: values[n - 1],
        })
    }
}

/// How runtimes compare with requested times, over jobs that have both (and a positive
/// request).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EstimateStats {
    pub jobs: usize,
    /// runtime / requested time: 1 is a perfect estimate.
    pub accuracy: Quantiles,
    /// Jobs whose runtime exceeded the request (killed late or allowed to overrun).
    pub overrun_pct: f64,
    /// Jobs whose runtime was exactly the request.
    pub exact_pct: f64,
}

fn pct(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn size_stats(records: &[SwfRecord], procs: u32) -> SizeStats {
    let mut sizes: Vec<u32> = records
        .iter()
        .filter_map(SwfRecord::size)
        .filter(|&s| s > 0)
        .collect();
    sizes.sort_unstable();
    let serial = sizes.iter().filter(|&&s| s == 1).count();
    let parallel = sizes.len() - serial;
    let pow2 = sizes
        .iter()
        .filter(|&&s| s > 1 && s.is_power_of_two())
        .count();
    let top = sizes.last().copied().unwrap_or(0).max(procs);
    let mut histogram = vec![SizeBin {
        from: 1,
        to: 1,
        jobs: 0,
    }];
    let mut hi = 2u64;
    while hi / 2 < u64::from(top) {
        let from = (hi / 2 + 1) as u32;
        histogram.push(SizeBin {
            from,
            to: hi.min(u64::from(u32::MAX)) as u32,
            jobs: 0,
        });
        hi *= 2;
    }
    for &s in &sizes {
        let idx = if s <= 1 {
            0
        } else {
            (32 - (s - 1).leading_zeros()) as usize
        };
        if let Some(bin) = histogram.get_mut(idx) {
            bin.jobs += 1;
        }
    }
    histogram.retain(|b| b.jobs > 0 || b.to <= top);
    SizeStats {
        known: sizes.len(),
        serial_pct: pct(serial, sizes.len()),
        pow2_pct_of_parallel: pct(pow2, parallel),
        mean: if sizes.is_empty() {
            0.0
        } else {
            sizes.iter().map(|&s| f64::from(s)).sum::<f64>() / sizes.len() as f64
        },
        median: sizes
            .get(sizes.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(0),
        max: sizes.last().copied().unwrap_or(0),
        histogram,
    }
}

fn counts<K: Ord + Copy>(keys: impl Iterator<Item = K>) -> Vec<(K, usize)> {
    let mut map = std::collections::BTreeMap::new();
    for k in keys {
        *map.entry(k).or_insert(0usize) += 1;
    }
    map.into_iter().collect()
}

/// Summarises a trace; `source` names it in the output.
pub fn summarize(trace: &Trace, source: &str) -> Summary {
    let records = &trace.records;
    let range = transform::submit_range(records);
    let span_s = range.map_or(0.0, |(a, b)| b.since(a).as_secs_f64());
    let mut submits: Vec<i64> = records
        .iter()
        .filter_map(|r| r.submit.map(|t| t.as_micros()))
        .collect();
    submits.sort_unstable();
    let mean_interarrival_s = (submits.len() > 1).then(|| span_s / (submits.len() - 1) as f64);
    let mut runs: Vec<f64> = records
        .iter()
        .filter_map(|r| r.run.map(|d| d.as_secs_f64()))
        .collect();
    let logs: Vec<f64> = runs.iter().filter(|&&r| r >= 1.0).map(|r| r.ln()).collect();
    let mut accuracy = Vec::new();
    let (mut overrun, mut exact) = (0, 0);
    for r in records {
        if let (Some(run), Some(req)) = (r.run, r.req_time)
            && req.as_micros() > 0
        {
            accuracy.push(run.as_secs_f64() / req.as_secs_f64());
            overrun += usize::from(run > req);
            exact += usize::from(run == req);
        }
    }
    let n_est = accuracy.len();
    let mut users: Vec<u32> = records.iter().filter_map(|r| r.user).collect();
    users.sort_unstable();
    users.dedup();
    Summary {
        source: source.to_string(),
        jobs: records.len(),
        procs: trace.procs,
        span_s,
        offered_load: transform::offered_load(records, trace.procs),
        first_submit_s: range.map(|(a, _)| a.as_secs_f64()),
        last_submit_s: range.map(|(_, b)| b.as_secs_f64()),
        mean_interarrival_s,
        users: users.len(),
        size: size_stats(records, trace.procs),
        runtime_s: Quantiles::of(&mut runs),
        mean_log_runtime: (!logs.is_empty()).then(|| logs.iter().sum::<f64>() / logs.len() as f64),
        estimates: Quantiles::of(&mut accuracy).map(|accuracy| EstimateStats {
            jobs: n_est,
            accuracy,
            overrun_pct: pct(overrun, n_est),
            exact_pct: pct(exact, n_est),
        }),
        status: counts(records.iter().map(|r| r.status.unwrap_or(-1))),
        queues: counts(records.iter().map(|r| r.queue.map_or(-1, i64::from))),
        read: trace.report.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{Dur, Time};

    #[test]
    fn summary_counts_sizes_and_estimates() {
        let mk = |job: u64, size: u32, run: i64, req: i64| SwfRecord {
            job,
            submit: Some(Time::from_secs(job as i64 * 10)),
            run: Some(Dur::from_secs(run)),
            req_procs: Some(size),
            req_time: Some(Dur::from_secs(req)),
            ..SwfRecord::default()
        };
        let trace = Trace {
            header: Default::default(),
            records: vec![
                mk(0, 1, 10, 20),
                mk(1, 4, 20, 20),
                mk(2, 6, 30, 20),
                mk(3, 8, 5, 50),
            ],
            procs: 8,
            report: Default::default(),
        };
        let s = summarize(&trace, "t");
        assert_eq!(s.jobs, 4);
        assert_eq!(s.span_s, 30.0);
        assert_eq!(s.size.serial_pct, 25.0);
        assert!((s.size.pow2_pct_of_parallel - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.size.max, 8);
        let bins: Vec<(u32, u32, usize)> = s
            .size
            .histogram
            .iter()
            .map(|b| (b.from, b.to, b.jobs))
            .collect();
        assert_eq!(bins, vec![(1, 1, 1), (2, 2, 0), (3, 4, 1), (5, 8, 2)]);
        let est = s.estimates.unwrap();
        assert_eq!(est.jobs, 4);
        assert_eq!(est.overrun_pct, 25.0);
        assert_eq!(est.exact_pct, 25.0);
        assert_eq!(s.runtime_s.unwrap().p50, 10.0);
        // (10 + 80 + 180 + 40) / (8 * 30)
        assert!((s.offered_load - 310.0 / 240.0).abs() < 1e-12);
    }
}
