//! Figures of merit of a simulated schedule: per-job wait, response, slowdown and bounded
//! slowdown; their means, percentiles and maxima; utilization and makespan; breakdowns by job
//! size and runtime class; batch-means confidence intervals.
//!
//! Only jobs that ran to their end count (the others are reported as `unfinished`). Times are
//! reported in seconds as floats: this is the edge where integers become figures.

use rayon::prelude::*;
use serde::Serialize;

use cosched_core::{Dur, JobId, JobRecord, Time};

use cosched_sim::SimResult;

/// Knobs of the metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricsOptions {
    /// Bounded slowdown uses `max(runtime, threshold)` as the denominator.
    pub bsld_threshold: Dur,
    /// Jobs per batch for batch means (in order of termination).
    pub batch_size: usize,
}

impl Default for MetricsOptions {
    fn default() -> MetricsOptions {
        MetricsOptions {
            bsld_threshold: Dur::from_secs(10),
            batch_size: 3333,
        }
    }
}

/// Per-job figures, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct JobMetrics {
    pub wait_s: f64,
    pub response_s: f64,
    pub slowdown: f64,
    pub bounded_slowdown: f64,
}

/// Mean, percentiles and maximum of one figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Dist {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Dist {
    /// The figures of `values`; `keys` is scratch, reused between calls. Percentiles by
    /// selection, not a full sort, since the summary takes 48 of these over up to a quarter
    /// million values each; selected as integers ordered as `f64::total_cmp` orders the
    /// floats ([`total_order_key`]): one compare each, where `total_cmp` transforms both
    /// sides at every comparison.
    fn of(values: impl Iterator<Item = f64>, keys: &mut Vec<u64>) -> Dist {
        keys.clear();
        // Summed in the given order, as a plain sum of the values.
        let sum: f64 = values.inspect(|v| keys.push(total_order_key(*v))).sum();
        let n = keys.len();
        if n == 0 {
            return Dist::default();
        }
        let mean = sum / n as f64;
        // Nearest-rank percentiles: the smallest value with at least q of the data at or below.
        let rank = |q: f64| ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        let max = *keys.iter().max().expect("non-empty");
        // Largest rank first: each later selection only needs the part left of the previous.
        let (r99, r90, r50) = (rank(0.99), rank(0.9), rank(0.5));
        let p99 = *keys.select_nth_unstable(r99).1;
        let p90 = *keys[..=r99].select_nth_unstable(r90).1;
        let p50 = *keys[..=r90].select_nth_unstable(r50).1;
        Dist {
            mean,
            p50: from_total_order_key(p50),
            p90: from_total_order_key(p90),
            p99: from_total_order_key(p99),
            max: from_total_order_key(max),
        }
    }
}

/// A float as an integer whose unsigned order is `f64::total_cmp`'s order: negatives (sign
/// set) have all their bits flipped, the others only the sign bit.
fn total_order_key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The float of a [`total_order_key`].
fn from_total_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// The figures of one group of jobs (all of them, or one size or runtime class).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    pub label: String,
    pub jobs: usize,
    pub wait_s: Dist,
    pub response_s: Dist,
    pub slowdown: Dist,
    pub bounded_slowdown: Dist,
}

/// A batch-means estimate: the mean of batch means and the half-width of its 90 % confidence
/// interval (Student t), the first batch left out as warm-up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BatchMeans {
    pub batches: usize,
    pub mean: f64,
    pub ci90_half_width: f64,
}

/// Everything `cosched sim` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    /// Jobs that completed (the population of every figure).
    pub jobs: usize,
    pub unfinished: usize,
    pub procs: u32,
    pub mean_wait_s: f64,
    pub mean_response_s: f64,
    pub mean_slowdown: f64,
    pub mean_bounded_slowdown: f64,
    pub bsld_threshold_s: f64,
    /// Delivered PE-time over machine PE-time from the first submission to the last end.
    pub utilization: f64,
    pub makespan_s: f64,
    pub all: Group,
    pub by_size: Vec<Group>,
    pub by_runtime: Vec<Group>,
    /// Batch means of bounded slowdown and of wait; `None` with fewer than 3 batches.
    pub batch_bounded_slowdown: Option<BatchMeans>,
    pub batch_wait_s: Option<BatchMeans>,
    pub events: u64,
    pub decisions: u64,
    /// Seed 001's figures, for runs on multi-core nodes with a slowdown model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multicore: Option<crate::multicore_metrics::MulticoreSummary>,
}

/// Size classes: upper bounds (inclusive) on PEs.
const SIZE_CLASSES: &[(u32, &str)] = &[
    (1, "1"),
    (4, "2-4"),
    (16, "5-16"),
    (64, "17-64"),
    (256, "65-256"),
    (u32::MAX, ">256"),
];
/// Runtime classes: upper bounds (exclusive) in seconds.
const RUNTIME_CLASSES: &[(i64, &str)] = &[
    (60, "<1m"),
    (600, "1m-10m"),
    (3_600, "10m-1h"),
    (36_000, "1h-10h"),
    (i64::MAX, ">=10h"),
];

/// Per-job figures of a completed job.
pub fn job_metrics(
    submit: Time,
    start: Time,
    end: Time,
    runtime: Dur,
    threshold: Dur,
) -> JobMetrics {
    let wait = (start - submit).as_secs_f64();
    let response = (end - submit).as_secs_f64();
    let run = runtime.as_secs_f64();
    let slowdown = if run > 0.0 {
        response / run
    } else {
        1.0f64.max(response)
    };
    let bounded_slowdown =
        (response / run.max(threshold.as_secs_f64()).max(f64::MIN_POSITIVE)).max(1.0);
    JobMetrics {
        wait_s: wait,
        response_s: response,
        slowdown,
        bounded_slowdown,
    }
}

/// Two-sided 90 % Student t quantiles (0.95) for 1..=30 degrees of freedom.
pub(crate) const T95: [f64; 30] = [
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
    1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
    1.703, 1.701, 1.699, 1.697,
];

/// Batch means over values in termination order; the first batch is discarded.
pub fn batch_means(values: &[f64], batch_size: usize) -> Option<BatchMeans> {
    if batch_size == 0 {
        return None;
    }
    let means: Vec<f64> = values
        .chunks_exact(batch_size)
        .skip(1)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    let k = means.len();
    if k < 2 {
        return None;
    }
    let mean = means.iter().sum::<f64>() / k as f64;
    let var = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let t = T95.get(k - 2).copied().unwrap_or(1.645);
    Some(BatchMeans {
        batches: k,
        mean,
        ci90_half_width: t * (var / k as f64).sqrt(),
    })
}

/// Index in [`SIZE_CLASSES`] of a job of `procs` PEs (none for zero PEs).
fn size_class(procs: u32) -> Option<usize> {
    (procs > 0).then(|| SIZE_CLASSES.iter().position(|&(hi, _)| procs <= hi))?
}

/// Index in [`RUNTIME_CLASSES`] of a job of that runtime.
fn runtime_class(runtime: Dur) -> Option<usize> {
    let secs = runtime.as_secs();
    RUNTIME_CLASSES.iter().position(|&(hi, _)| secs < hi)
}

/// Records per stretch of the per-job pass of [`summarize`].
const PART: usize = 1 << 14;

/// What [`summarize`] needs of one stretch of records: the figures of its jobs that ran to
/// their end (its rows), which rows fall in each size and runtime class, and the facts the
/// whole-run figures are made of.
struct Part {
    rows: Vec<JobMetrics>,
    /// `(end, id, stretch, row)` of each row, for the termination order.
    keyed: Vec<(Time, JobId, u32, u32)>,
    /// Rows of each size class, then of each runtime class, in row order.
    by_size: Vec<Vec<u32>>,
    by_runtime: Vec<Vec<u32>>,
    /// PE-seconds each row delivered, in row order (summed in that order for utilization).
    delivered: Vec<f64>,
    first_submit: Option<Time>,
    last_end: Option<Time>,
}

impl Part {
    fn of(k: u32, records: &[JobRecord], runtimes: &[Dur], opts: &MetricsOptions) -> Part {
        let mut p = Part {
            rows: Vec::with_capacity(records.len()),
            keyed: Vec::with_capacity(records.len()),
            by_size: vec![Vec::new(); SIZE_CLASSES.len()],
            by_runtime: vec![Vec::new(); RUNTIME_CLASSES.len()],
            delivered: Vec::with_capacity(records.len()),
            first_submit: records.iter().map(|r| r.submit).min(),
            last_end: None,
        };
        for (r, &runtime) in records.iter().zip(runtimes) {
            if let (Some(start), Some(end)) = (r.start, r.end) {
                let row = p.rows.len() as u32;
                let ran = (end - start) - r.suspended;
                p.delivered.push(r.procs as f64 * ran.as_secs_f64());
                p.last_end = p.last_end.max(Some(end));
                p.keyed.push((end, r.id, k, row));
                if let Some(c) = size_class(r.procs) {
                    p.by_size[c].push(row);
                }
                if let Some(c) = runtime_class(runtime) {
                    p.by_runtime[c].push(row);
                }
                let m = job_metrics(r.submit, start, end, runtime, opts.bsld_threshold);
                p.rows.push(m);
            }
        }
        p
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Size,
    Runtime,
}

/// The jobs of a group.
#[derive(Clone, Copy, Debug)]
enum Selection {
    All,
    Class(Kind, usize),
}

impl Selection {
    fn count(&self, parts: &[Part]) -> usize {
        parts.iter().map(|p| self.len_in(p)).sum()
    }

    fn len_in(&self, p: &Part) -> usize {
        match *self {
            Selection::All => p.rows.len(),
            Selection::Class(kind, c) => class_rows(p, kind, c).len(),
        }
    }

    /// The figures of column `f` over the group's rows, in row order.
    fn dist(&self, parts: &[Part], f: fn(&JobMetrics) -> f64, scratch: &mut Vec<u64>) -> Dist {
        match *self {
            Selection::All => Dist::of(parts.iter().flat_map(|p| p.rows.iter().map(f)), scratch),
            Selection::Class(kind, c) => {
                let values = parts.iter().flat_map(|p| {
                    let rows = &p.rows;
                    class_rows(p, kind, c)
                        .iter()
                        .map(move |&i| f(&rows[i as usize]))
                });
                Dist::of(values, scratch)
            }
        }
    }
}

/// The rows of a stretch in class `c` of `kind`.
fn class_rows(p: &Part, kind: Kind, c: usize) -> &[u32] {
    match kind {
        Kind::Size => &p.by_size[c],
        Kind::Runtime => &p.by_runtime[c],
    }
}

/// The summary `cosched sim` prints, of a real run rather than a simulated one: `ran` holds
/// each job that started and ended, with the time it actually ran (stopped time excluded);
/// `unfinished` counts the jobs not ended yet.
pub fn summarize_real(
    policy: &str,
    machine: cosched_core::MachineShape,
    ran: impl IntoIterator<Item = (JobRecord, Dur)>,
    unfinished: usize,
) -> Summary {
    let (records, runtimes) = ran.into_iter().unzip();
    let result = SimResult {
        policy: policy.to_string(),
        machine,
        records,
        runtimes,
        events: 0,
        decisions: 0,
        unfinished,
        policy_stats: Vec::new(),
        usage: None,
    };
    summarize(&result, &MetricsOptions::default())
}

/// Computes the summary of a run.
pub fn summarize(result: &SimResult, opts: &MetricsOptions) -> Summary {
    // The per-job pass, in stretches of records side by side; every figure below reads the
    // stretches in order, so sums add up in row order whatever the split.
    let parts: Vec<Part> = result
        .records
        .par_chunks(PART)
        .zip(result.runtimes.par_chunks(PART))
        .enumerate()
        .map(|(k, (records, runtimes))| Part::of(k as u32, records, runtimes, opts))
        .collect();
    let jobs: usize = parts.iter().map(|p| p.rows.len()).sum();
    let delivered = parts
        .iter()
        .flat_map(|p| &p.delivered)
        .fold(0f64, |sum, d| sum + d);
    let first_submit = parts.iter().filter_map(|p| p.first_submit).min();
    let last_end = parts
        .iter()
        .filter_map(|p| p.last_end)
        .fold(first_submit.unwrap_or(Time::ZERO), Time::max);
    let makespan = first_submit.map_or(0.0, |f| (last_end - f).as_secs_f64());
    let procs = result.machine.total_pes();
    let utilization = if makespan > 0.0 {
        delivered / (procs as f64 * makespan)
    } else {
        0.0
    };
    // The groups: all jobs, then each size and runtime class that has jobs.
    let sizes =
        (0..SIZE_CLASSES.len()).map(|c| (SIZE_CLASSES[c].1, Selection::Class(Kind::Size, c)));
    let runtimes = (0..RUNTIME_CLASSES.len())
        .map(|c| (RUNTIME_CLASSES[c].1, Selection::Class(Kind::Runtime, c)));
    let groups: Vec<(&str, Selection, usize)> = std::iter::once(("all", Selection::All))
        .chain(sizes.chain(runtimes))
        .map(|(label, sel)| (label, sel, sel.count(&parts)))
        .filter(|&(_, sel, jobs)| jobs > 0 || matches!(sel, Selection::All))
        .collect();
    const COLUMNS: [fn(&JobMetrics) -> f64; 4] = [
        |m| m.wait_s,
        |m| m.response_s,
        |m| m.slowdown,
        |m| m.bounded_slowdown,
    ];
    // The 48 figures and the termination order are independent; on a long trace they are a
    // large share of the run after the simulation, so they are computed side by side, one
    // column of one group per task, so that every core stays busy to the end.
    let (dists, (batch_bounded_slowdown, batch_wait_s)) = rayon::join(
        || {
            (0..groups.len() * COLUMNS.len())
                .into_par_iter()
                .map_init(Vec::new, |scratch, task| {
                    let f = COLUMNS[task % COLUMNS.len()];
                    groups[task / COLUMNS.len()].1.dist(&parts, f, scratch)
                })
                .collect::<Vec<Dist>>()
        },
        || {
            // (end, id, part, row): ids are unique, so the order is that of (end, id).
            let mut keyed: Vec<(Time, JobId, u32, u32)> =
                parts.iter().flat_map(|p| p.keyed.iter().copied()).collect();
            keyed.sort_unstable();
            let ordered = |f: fn(&JobMetrics) -> f64| {
                keyed
                    .iter()
                    .map(|e| f(&parts[e.2 as usize].rows[e.3 as usize]))
                    .collect::<Vec<_>>()
            };
            (
                batch_means(&ordered(|m| m.bounded_slowdown), opts.batch_size),
                batch_means(&ordered(|m| m.wait_s), opts.batch_size),
            )
        },
    );
    let mut all = None;
    let (mut by_size, mut by_runtime) = (Vec::new(), Vec::new());
    for (&(label, sel, jobs), d) in groups.iter().zip(dists.chunks_exact(COLUMNS.len())) {
        let group = Group {
            label: label.to_string(),
            jobs,
            wait_s: d[0],
            response_s: d[1],
            slowdown: d[2],
            bounded_slowdown: d[3],
        };
        match sel {
            Selection::All => all = Some(group),
            Selection::Class(Kind::Size, _) => by_size.push(group),
            Selection::Class(Kind::Runtime, _) => by_runtime.push(group),
        }
    }
    let all = all.expect("the group of all jobs is always made");
    Summary {
        policy: result.policy.clone(),
        jobs,
        unfinished: result.unfinished,
        procs,
        mean_wait_s: all.wait_s.mean,
        mean_response_s: all.response_s.mean,
        mean_slowdown: all.slowdown.mean,
        mean_bounded_slowdown: all.bounded_slowdown.mean,
        bsld_threshold_s: opts.bsld_threshold.as_secs_f64(),
        utilization,
        makespan_s: makespan,
        batch_bounded_slowdown,
        batch_wait_s,
        all,
        by_size,
        by_runtime,
        events: result.events,
        decisions: result.decisions,
        multicore: crate::multicore_metrics::MulticoreSummary::build(result, opts.bsld_threshold),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary as a plain reading of its definition: one pass in record order, full
    /// sorts for the percentiles and the termination order.
    fn reference(result: &SimResult, opts: &MetricsOptions) -> Summary {
        let mut rows = Vec::new();
        let mut keyed = Vec::new();
        let mut size_rows = vec![Vec::new(); SIZE_CLASSES.len()];
        let mut runtime_rows = vec![Vec::new(); RUNTIME_CLASSES.len()];
        let mut delivered = 0f64;
        let first_submit = result.records.iter().map(|r| r.submit).min();
        let mut last_end = first_submit.unwrap_or(Time::ZERO);
        for (r, &runtime) in result.records.iter().zip(&result.runtimes) {
            let (Some(start), Some(end)) = (r.start, r.end) else {
                continue;
            };
            delivered += r.procs as f64 * ((end - start) - r.suspended).as_secs_f64();
            last_end = last_end.max(end);
            keyed.push((end, r.id, rows.len()));
            if let Some(c) = size_class(r.procs) {
                size_rows[c].push(rows.len());
            }
            if let Some(c) = runtime_class(runtime) {
                runtime_rows[c].push(rows.len());
            }
            rows.push(job_metrics(
                r.submit,
                start,
                end,
                runtime,
                opts.bsld_threshold,
            ));
        }
        let dist = |v: Vec<f64>| {
            if v.is_empty() {
                return Dist::default();
            }
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let mut sorted = v;
            sorted.sort_by(f64::total_cmp);
            let at = |q: f64| {
                let k = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
                sorted[k - 1]
            };
            Dist {
                mean,
                p50: at(0.5),
                p90: at(0.9),
                p99: at(0.99),
                max: *sorted.last().unwrap(),
            }
        };
        let group = |label: &str, sel: &[usize]| {
            let col = |f: fn(&JobMetrics) -> f64| dist(sel.iter().map(|&i| f(&rows[i])).collect());
            Group {
                label: label.to_string(),
                jobs: sel.len(),
                wait_s: col(|m| m.wait_s),
                response_s: col(|m| m.response_s),
                slowdown: col(|m| m.slowdown),
                bounded_slowdown: col(|m| m.bounded_slowdown),
            }
        };
        let every: Vec<usize> = (0..rows.len()).collect();
        let classes = |labels: Vec<&str>, sel: &[Vec<usize>]| -> Vec<Group> {
            labels
                .into_iter()
                .zip(sel)
                .filter(|(_, s)| !s.is_empty())
                .map(|(l, s)| group(l, s))
                .collect()
        };
        keyed.sort();
        let ordered = |f: fn(&JobMetrics) -> f64| -> Vec<f64> {
            keyed.iter().map(|e| f(&rows[e.2])).collect()
        };
        let makespan = first_submit.map_or(0.0, |f| (last_end - f).as_secs_f64());
        let procs = result.machine.total_pes();
        let all = group("all", &every);
        Summary {
            policy: result.policy.clone(),
            jobs: rows.len(),
            unfinished: result.unfinished,
            procs,
            mean_wait_s: all.wait_s.mean,
            mean_response_s: all.response_s.mean,
            mean_slowdown: all.slowdown.mean,
            mean_bounded_slowdown: all.bounded_slowdown.mean,
            bsld_threshold_s: opts.bsld_threshold.as_secs_f64(),
            utilization: if makespan > 0.0 {
                delivered / (procs as f64 * makespan)
            } else {
                0.0
            },
            makespan_s: makespan,
            batch_bounded_slowdown: batch_means(&ordered(|m| m.bounded_slowdown), opts.batch_size),
            batch_wait_s: batch_means(&ordered(|m| m.wait_s), opts.batch_size),
            all,
            by_size: classes(SIZE_CLASSES.iter().map(|c| c.1).collect(), &size_rows),
            by_runtime: classes(RUNTIME_CLASSES.iter().map(|c| c.1).collect(), &runtime_rows),
            events: result.events,
            decisions: result.decisions,
            multicore: None,
        }
    }

    /// The summary in stretches side by side against the plain reading, on random runs
    /// longer than several stretches: unfinished jobs, many jobs ending at the same instant
    /// (the termination order's ties), empty classes, fractional seconds.
    #[test]
    fn summary_in_stretches_matches_the_plain_reading() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for (jobs, most_procs) in [(0, 8), (1, 8), (3 * PART + 77, 300), (PART, 4)] {
            let mut records = Vec::new();
            let mut runtimes = Vec::new();
            for id in 0..jobs as u64 {
                let submit = Time::from_micros(next(1_000_000_000) as i64);
                let procs = 1 + next(most_procs) as u32;
                let runtime =
                    Dur::from_micros(next(50_000_000_000) as i64 / (1 + next(1000) as i64));
                let spec = cosched_core::JobSpec::new(id * 7 + 3, submit, procs, runtime);
                let mut r = JobRecord::new(&spec);
                if next(50) != 0 {
                    let start = submit + Dur::from_secs(next(100_000) as i64);
                    // Ends on a coarse grid: many ties between jobs.
                    let end = start + runtime + Dur::from_secs(next(3) as i64 * 600);
                    r.start = Some(start);
                    r.end = Some(Time::from_secs(end.as_secs() / 600 * 600).max(start));
                    r.suspended = Dur::from_micros((r.end.unwrap() - start).as_micros() / 7);
                }
                records.push(r);
                runtimes.push(runtime);
            }
            let result = SimResult {
                policy: "fcfs".into(),
                machine: cosched_core::MachineShape::flat(512, 1),
                unfinished: records.iter().filter(|r| r.end.is_none()).count(),
                records,
                runtimes,
                events: 5,
                decisions: 4,
                policy_stats: Vec::new(),
                usage: None,
            };
            let opts = MetricsOptions {
                batch_size: 333,
                ..MetricsOptions::default()
            };
            let (got, want) = (summarize(&result, &opts), reference(&result, &opts));
            // Bit for bit, through the JSON every output is written from.
            assert_eq!(
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "{jobs} jobs"
            );
        }
    }

    #[test]
    fn bounded_slowdown_uses_the_threshold_for_short_jobs() {
        let s = Time::from_secs;
        let m = job_metrics(s(0), s(20), s(21), Dur::from_secs(1), Dur::from_secs(10));
        assert_eq!(m.wait_s, 20.0);
        assert_eq!(m.slowdown, 21.0);
        assert!((m.bounded_slowdown - 2.1).abs() < 1e-12);
        // A long job that did not wait has (bounded) slowdown 1.
        let m = job_metrics(s(0), s(0), s(100), Dur::from_secs(100), Dur::from_secs(10));
        assert_eq!((m.slowdown, m.bounded_slowdown), (1.0, 1.0));
        // Never below 1, even for a job shorter than the threshold that did not wait.
        let m = job_metrics(s(0), s(0), s(2), Dur::from_secs(2), Dur::from_secs(10));
        assert_eq!(m.bounded_slowdown, 1.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of((1..=100).map(f64::from), &mut Vec::new());
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(d.mean, 50.5);
    }

    #[test]
    fn selected_percentiles_match_a_full_sort() {
        // Duplicates, a negative zero and an unsorted order: selection must agree with sorting.
        let v: Vec<f64> = (0..1013u32)
            .map(|i| f64::from((i * 7919) % 211) - 50.0)
            .chain([-0.0, 0.0, 3.5])
            .collect();
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize) - 1];
        let d = Dist::of(v.iter().copied(), &mut Vec::new());
        assert_eq!(d.mean, v.iter().sum::<f64>() / v.len() as f64);
        assert_eq!(
            (d.p50, d.p90, d.p99, d.max),
            (at(0.5), at(0.9), at(0.99), *sorted.last().unwrap())
        );
    }

    /// The integer keys order floats exactly as `f64::total_cmp` does, and give them back
    /// bit for bit: signed zeros, infinities, subnormals, extremes.
    #[test]
    fn total_order_keys_sort_as_total_cmp() {
        let mut v = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 4.0,
            -f64::MIN_POSITIVE / 4.0,
            f64::MAX,
            f64::MIN,
            1e-300,
            -2.5e7,
            3.25,
        ];
        for x in v.clone() {
            assert_eq!(
                from_total_order_key(total_order_key(x)).to_bits(),
                x.to_bits()
            );
        }
        let mut by_key = v.clone();
        by_key.sort_by_key(|&x| total_order_key(x));
        v.sort_by(f64::total_cmp);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&by_key), bits(&v));
        // Selection picks the same bits as sorting, negative zero against positive zero.
        let d = Dist::of([0.0, -0.0, -0.0].into_iter(), &mut Vec::new());
        assert_eq!(d.p50.to_bits(), (-0.0f64).to_bits());
        assert_eq!(d.max.to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn batch_means_drop_the_first_batch() {
        // Batches: [100,100] (discarded), [1,3], [3,5], [5,7] → means 2, 4, 6.
        let v = [100.0, 100.0, 1.0, 3.0, 3.0, 5.0, 5.0, 7.0, 9.0];
        let b = batch_means(&v, 2).unwrap();
        assert_eq!(b.batches, 3);
        assert!((b.mean - 4.0).abs() < 1e-12);
        // s = 2, t(2 df) = 2.920: half-width 2.920 * 2 / sqrt(3).
        assert!((b.ci90_half_width - 2.920 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert!(batch_means(&v[..5], 2).is_none());
    }
}
