//! The figures a scheduling researcher looks at first in a workload: size, span, offered load,
//! the size and runtime distributions and how good the users' estimates are. Computed here and
//! only printed by the command line.

use serde::Serialize;

use crate::swf::{ReadReport, SwfHeader, SwfRecord, Trace};

/// Summary of one workload; serialises to the JSON of `cosched workload info --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub source: String,
    /// The header's `Computer` and `Installation` lines, when present.
    pub computer: Option<String>,
    pub installation: Option<String>,
    /// The header's `Acknowledge` lines: whom to credit when publishing results on the log.
    pub acknowledge: Vec<String>,
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

fn size_stats(mut sizes: Vec<u32>, procs: u32) -> SizeStats {
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

/// Accumulates a summary one record at a time, so that `cosched workload info` can stream a
/// log without holding its records (it keeps a few numbers per job, not the whole record).
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    jobs: usize,
    first_submit: Option<i64>,
    last_submit: Option<i64>,
    submits: usize,
    work_pe_s: f64,
    sizes: Vec<u32>,
    runs: Vec<f64>,
    log_run_sum: f64,
    log_run_count: usize,
    accuracy: Vec<f64>,
    overrun: usize,
    exact: usize,
    users: Vec<u32>,
    status: std::collections::BTreeMap<i32, usize>,
    queues: std::collections::BTreeMap<i64, usize>,
}

impl SummaryBuilder {
    pub fn with_capacity(jobs: usize) -> Self {
        SummaryBuilder {
            sizes: Vec::with_capacity(jobs),
            runs: Vec::with_capacity(jobs),
            ..Default::default()
        }
    }

    pub fn add(&mut self, r: &SwfRecord) {
        self.jobs += 1;
        if let Some(t) = r.submit.map(|t| t.as_micros()) {
            self.submits += 1;
            self.first_submit = Some(self.first_submit.map_or(t, |f| f.min(t)));
            self.last_submit = Some(self.last_submit.map_or(t, |l| l.max(t)));
        }
        let size = r.size().filter(|&s| s > 0);
        if let Some(s) = size {
            self.sizes.push(s);
        }
        if let Some(run) = r.run {
            let secs = run.as_secs_f64();
            self.runs.push(secs);
            if secs >= 1.0 {
                self.log_run_sum += secs.ln();
                self.log_run_count += 1;
            }
            if let Some(s) = r.size() {
                self.work_pe_s += f64::from(s) * secs;
            }
            if let Some(req) = r.req_time.filter(|q| q.as_micros() > 0) {
                self.accuracy.push(secs / req.as_secs_f64());
                self.overrun += usize::from(run > req);
                self.exact += usize::from(run == req);
            }
        }
        if let Some(u) = r.user {
            self.users.push(u);
        }
        *self.status.entry(r.status.unwrap_or(-1)).or_default() += 1;
        *self
            .queues
            .entry(r.queue.map_or(-1, i64::from))
            .or_default() += 1;
    }

    /// The summary; `source` names the workload, `header`, `procs` and `read` come from the
    /// reader.
    pub fn finish(self, source: &str, header: &SwfHeader, procs: u32, read: ReadReport) -> Summary {
        let span_s = match (self.first_submit, self.last_submit) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e6,
            _ => 0.0,
        };
        let mut users = self.users;
        users.sort_unstable();
        users.dedup();
        let mut runs = self.runs;
        let mut accuracy = self.accuracy;
        let n_est = accuracy.len();
        Summary {
            source: source.to_string(),
            computer: header.computer.clone(),
            installation: header.installation.clone(),
            acknowledge: header.acknowledge.clone(),
            jobs: self.jobs,
            procs,
            span_s,
            offered_load: if span_s > 0.0 && procs > 0 {
                self.work_pe_s / (f64::from(procs) * span_s)
            } else {
                0.0
            },
            first_submit_s: self.first_submit.map(|t| t as f64 / 1e6),
            last_submit_s: self.last_submit.map(|t| t as f64 / 1e6),
            mean_interarrival_s: (self.submits > 1).then(|| span_s / (self.submits - 1) as f64),
            users: users.len(),
            size: size_stats(self.sizes, procs),
            runtime_s: Quantiles::of(&mut runs),
            mean_log_runtime: (self.log_run_count > 0)
                .then(|| self.log_run_sum / self.log_run_count as f64),
            estimates: Quantiles::of(&mut accuracy).map(|accuracy| EstimateStats {
                jobs: n_est,
                accuracy,
                overrun_pct: pct(self.overrun, n_est),
                exact_pct: pct(self.exact, n_est),
            }),
            status: self.status.into_iter().collect(),
            queues: self.queues.into_iter().collect(),
            read,
        }
    }
}

/// Summarises a trace in memory; `source` names it in the output.
pub fn summarize(trace: &Trace, source: &str) -> Summary {
    let mut b = SummaryBuilder::with_capacity(trace.records.len());
    for r in &trace.records {
        b.add(r);
    }
    b.finish(source, &trace.header, trace.procs, trace.report.clone())
}

/// Reads and summarises a trace file in one streaming pass.
pub fn summarize_file(
    path: &std::path::Path,
    opts: &crate::swf::ReadOptions,
) -> Result<Summary, crate::swf::SwfError> {
    let mut reader = crate::swf::open(path, opts)?;
    let hint = reader
        .header()
        .max_records
        .map_or(0, |n| n.min(1 << 24) as usize);
    let mut b = SummaryBuilder::with_capacity(hint);
    for r in reader.by_ref() {
        b.add(&r?);
    }
    let procs = reader.procs();
    let name = reader.name().to_string();
    let (header, report) = reader.into_parts();
    Ok(b.finish(&name, &header, procs, report))
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
