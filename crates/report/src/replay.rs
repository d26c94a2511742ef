//! A trace replayed on a running cluster (`cosched replay`), the parts that need no cluster:
//! the plan (which job is submitted when, of what size, with what limit), the replayed jobs as
//! SWF (what `sim` then simulates), the resumable state file, and the accuracy of the
//! forecasts logged during a replay.
//!
//! The state file holds the replay's start time and, one JSON line per job, which trace job
//! became which cluster job. Before each submission an "intent" line is written, so a replay
//! killed between the submission and its record finds that one job by its name on resume
//! instead of submitting it twice.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use cosched_core::{Dur, Time};
use cosched_workload::swf::{SwfHeader, SwfRecord};
use serde::{Deserialize, Serialize};

/// Why a replay cannot be planned, or its files read.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(
        "trace job {job} needs {size} PEs and the cluster has {cluster_pes}: pass --scale-sizes to scale every size by {cluster_pes}/{trace_pes}, or cut the trace (cosched workload transform)"
    )]
    TooLarge {
        job: u64,
        size: u32,
        cluster_pes: u32,
        trace_pes: u32,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:1: not the state file of a cosched replay ({source})", path.display())]
    NotState {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: empty, not the state file of a replay", path.display())]
    Empty { path: PathBuf },
}

/// One job as it is replayed: offsets from the replay's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub trace_id: u64,
    /// Submit time after the first job's.
    pub at: Dur,
    pub procs: u32,
    pub runtime: Dur,
    /// The time limit: the estimate (or the runtime, when larger or no estimate) plus slack.
    pub limit: Dur,
}

/// What was left out of a replay and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Left {
    /// Unknown or non-positive runtime.
    pub runtime: usize,
    /// Unknown or non-positive size.
    pub size: usize,
    /// Unknown submit time.
    pub submit: usize,
}

/// The jobs of `records` (already windowed, cut and compressed) as replayed on a cluster of
/// `cluster_pes`; `trace_pes` is the trace's machine, for `scale`.
pub fn plan(
    records: &[SwfRecord],
    trace_pes: u32,
    cluster_pes: u32,
    scale: bool,
    slack: Dur,
) -> Result<(Vec<Planned>, Left), ReplayError> {
    let mut left = Left::default();
    let mut out = Vec::new();
    for r in records {
        // The simulator's default size semantics (allocated, else requested), so the replay
        // and `sim` of the same trace agree.
        let Some(size) = r.alloc_procs.filter(|&p| p > 0).or(r.req_procs) else {
            left.size += 1;
            continue;
        };
        if size == 0 {
            left.size += 1;
            continue;
        }
        let Some(runtime) = r.run.filter(|d| *d > Dur::ZERO) else {
            left.runtime += 1;
            continue;
        };
        let Some(submit) = r.submit else {
            left.submit += 1;
            continue;
        };
        let procs = if scale {
            let f = f64::from(cluster_pes) / f64::from(trace_pes.max(1));
            ((f64::from(size) * f).round() as u32).clamp(1, cluster_pes)
        } else if size > cluster_pes {
            return Err(ReplayError::TooLarge {
                job: r.job,
                size,
                cluster_pes,
                trace_pes,
            });
        } else {
            size
        };
        let estimate = r.req_time.filter(|d| *d > Dur::ZERO).unwrap_or(runtime);
        out.push(Planned {
            trace_id: r.job,
            at: Dur::from_micros(submit.as_micros()),
            procs,
            runtime,
            limit: estimate.max(runtime) + slack,
        });
    }
    // Submit order; a stable sort keeps the trace's order among equal times.
    out.sort_by_key(|p| p.at);
    if let Some(first) = out.first().map(|p| p.at) {
        for p in &mut out {
            p.at -= first;
        }
    }
    Ok((out, left))
}

/// The replayed jobs as SWF (what `sim --trace` of them simulates).
pub fn planned_swf(
    plan: &[Planned],
    cluster_pes: u32,
    source: &str,
) -> (SwfHeader, Vec<SwfRecord>) {
    let mut header = SwfHeader::default();
    for line in [
        " Version: 2.2".to_string(),
        format!(" Computer: cosched replay of {source}"),
        format!(" MaxJobs: {}", plan.len()),
        format!(" MaxRecords: {}", plan.len()),
        format!(" MaxProcs: {cluster_pes}"),
        " Note: written by cosched replay --trace-out: the jobs as submitted (sizes, \
         compressed times; the requested time is the time limit given)"
            .to_string(),
    ] {
        header.push_line(&line);
    }
    let records = plan
        .iter()
        .map(|p| SwfRecord {
            job: p.trace_id,
            submit: Some(Time::ZERO + p.at),
            run: Some(p.runtime),
            alloc_procs: Some(p.procs),
            req_procs: Some(p.procs),
            req_time: Some(p.limit),
            status: Some(1),
            ..SwfRecord::default()
        })
        .collect();
    (header, records)
}

/// The first line of a state file: what is replayed, and when it started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateHeader {
    pub replay: u32,
    pub start_us: i64,
    pub trace: String,
    pub compress: f64,
    pub window: Option<(i64, i64)>,
    pub first: Option<usize>,
    pub scale_sizes: bool,
    pub jobs: usize,
}

/// A line after the header: a submission about to be made (`job` is `None`), or made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateLine {
    pub trace_id: u64,
    #[serde(default)]
    pub job: Option<u64>,
    /// When it was due and when it was submitted, µs since the epoch.
    pub due_us: i64,
    pub at_us: i64,
}

/// A line of `--forecast-log`: a job's expected start as forecast right after its
/// submission. Times in µs since the epoch; `expected_start_us` is `None` when the job does
/// not start in the forecast (held, or an external policy, which has no forecast).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForecastLine {
    pub trace_id: u64,
    pub job: u64,
    pub asked_us: i64,
    pub expected_start_us: Option<i64>,
    /// Why there is no forecast, when asking failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The forecast error over a set of jobs: actual start − expected start, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ForecastError {
    /// Jobs with both a forecast start and an actual start.
    pub n: usize,
    /// Mean, p50, p90 and max of |actual − expected|.
    pub mean_abs: f64,
    pub p50_abs: f64,
    pub p90_abs: f64,
    pub max_abs: f64,
    /// Mean of actual − expected: negative when jobs start earlier than forecast (as when
    /// they end before their limits).
    pub mean_signed: f64,
}

impl ForecastError {
    /// The summary of `errors` (actual − expected, seconds); percentiles are nearest-rank.
    pub fn of(errors: &[f64]) -> ForecastError {
        if errors.is_empty() {
            return ForecastError::default();
        }
        let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let n = abs.len();
        // Nearest rank: the smallest value with at least q·n values at or below it.
        let q = |q: f64| abs[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        ForecastError {
            n,
            mean_abs: abs.iter().sum::<f64>() / n as f64,
            p50_abs: q(0.5),
            p90_abs: q(0.9),
            max_abs: abs[n - 1],
            mean_signed: errors.iter().sum::<f64>() / n as f64,
        }
    }
}

/// The forecast accuracy of a replay: every job, and those forecast to wait (a job forecast
/// to start when it was asked about was already running, so it is right by construction).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ForecastAccuracy {
    /// Lines in the log for jobs of this replay.
    pub logged: usize,
    /// Of those, without a forecast start or without an actual start.
    pub unmatched: usize,
    pub all: ForecastError,
    pub waited: ForecastError,
}

/// Joins the forecast log with the actual starts (cluster job id → start, µs since the
/// epoch). The last line of a job wins (a resumed replay may have asked twice).
pub fn forecast_accuracy(log: &[ForecastLine], actual: &HashMap<u64, i64>) -> ForecastAccuracy {
    let mut last: BTreeMap<u64, &ForecastLine> = BTreeMap::new();
    for l in log.iter().filter(|l| actual.contains_key(&l.job)) {
        last.insert(l.job, l);
    }
    let (mut all, mut waited) = (Vec::new(), Vec::new());
    let mut unmatched = 0;
    for (job, l) in &last {
        let (Some(e), Some(&a)) = (l.expected_start_us, actual.get(job)) else {
            unmatched += 1;
            continue;
        };
        let err = (a - e) as f64 / 1e6;
        all.push(err);
        // At or before the time asked: the job had started by then.
        if e > l.asked_us {
            waited.push(err);
        }
    }
    ForecastAccuracy {
        logged: last.len(),
        unmatched,
        all: ForecastError::of(&all),
        waited: ForecastError::of(&waited),
    }
}

/// The lines of a `--forecast-log` file.
pub fn read_forecast_log(path: &Path) -> Result<Vec<ForecastLine>, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    // A line torn by a kill is skipped, as in the state file.
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// A state file read back.
#[derive(Debug, Default)]
pub struct State {
    pub header: Option<StateHeader>,
    /// trace id → (cluster job id, due, submitted at).
    pub done: BTreeMap<u64, (u64, i64, i64)>,
    /// The last intent not followed by its submission (the replay died in between).
    pub pending: Option<StateLine>,
}

/// A state file read back; a missing file is an empty state (a replay not started yet).
pub fn read_state(path: &Path) -> Result<State, ReplayError> {
    let mut st = State::default();
    let read = |source| ReplayError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(st),
        Err(e) => return Err(read(e)),
    };
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read)?;
        if line.trim().is_empty() {
            continue;
        }
        if n == 0 {
            st.header =
                Some(
                    serde_json::from_str(&line).map_err(|source| ReplayError::NotState {
                        path: path.to_path_buf(),
                        source,
                    })?,
                );
            continue;
        }
        // A line torn by a kill in mid-write is the last one, and its submission (if any)
        // is found again through the intent before it.
        let Ok(l) = serde_json::from_str::<StateLine>(&line) else {
            continue;
        };
        match l.job {
            Some(job) => {
                st.done.insert(l.trace_id, (job, l.due_us, l.at_us));
                if st
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.trace_id == l.trace_id)
                {
                    st.pending = None;
                }
            }
            None => st.pending = Some(l),
        }
    }
    Ok(st)
}

/// The mapping cluster job id → trace job id of a replay's state file (`compare --map`).
pub fn read_mapping(path: &Path) -> Result<HashMap<u64, u64>, ReplayError> {
    let st = read_state(path)?;
    if st.header.is_none() {
        return Err(ReplayError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(st.done.iter().map(|(&t, &(j, _, _))| (j, t)).collect())
}

/// Appends one line and flushes it to disk: what is recorded survives a kill that follows.
pub fn append(file: &mut std::fs::File, v: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_string(v).map_err(std::io::Error::other)?;
    line.push('\n');
    file.write_all(line.as_bytes())?;
    file.sync_data()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(job: u64, submit: i64, size: u32, run: i64, req: Option<i64>) -> SwfRecord {
        SwfRecord {
            job,
            submit: Some(Time::from_secs(submit)),
            run: Some(Dur::from_secs(run)),
            alloc_procs: Some(size),
            req_time: req.map(Dur::from_secs),
            ..SwfRecord::default()
        }
    }

    #[test]
    fn plan_scales_sizes_and_keeps_estimates() {
        let records = vec![
            rec(7, 100, 100, 10, Some(20)),
            rec(8, 130, 1, 5, None),
            rec(9, 110, 50, 30, Some(10)),
        ];
        let (p, left) = plan(&records, 100, 32, true, Dur::from_secs(1)).unwrap();
        assert_eq!(left, Left::default());
        let got: Vec<_> = p
            .iter()
            .map(|p| (p.trace_id, p.at.as_secs(), p.procs, p.limit.as_secs()))
            .collect();
        // Sorted by submit, offsets from the first; 100 → 32, 50 → 16, 1 stays 1; the limit
        // is the estimate (or the longer runtime) plus the slack.
        assert_eq!(got, vec![(7, 0, 32, 21), (9, 10, 16, 31), (8, 30, 1, 6)]);
        let e = plan(&records, 100, 32, false, Dur::ZERO).unwrap_err();
        assert!(e.to_string().contains("trace job 7 needs 100 PEs"), "{e}");
    }

    #[test]
    fn state_keeps_submissions_and_the_last_intent() {
        let dir = std::env::temp_dir().join(format!("cosched-replay-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        let mut f = std::fs::File::create(&path).unwrap();
        let h = StateHeader {
            replay: 1,
            start_us: 5,
            trace: "t".into(),
            compress: 2.0,
            window: None,
            first: Some(3),
            scale_sizes: false,
            jobs: 3,
        };
        append(&mut f, &h).unwrap();
        let l = |t, job| StateLine {
            trace_id: t,
            job,
            due_us: 0,
            at_us: 0,
        };
        for line in [l(1, None), l(1, Some(40)), l(2, None)] {
            append(&mut f, &line).unwrap();
        }
        f.write_all(b"{\"trace_id\": 3, \"jo").unwrap();
        let st = read_state(&path).unwrap();
        assert_eq!(st.header, Some(h));
        assert_eq!(st.done.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(st.pending.map(|p| p.trace_id), Some(2));
        assert_eq!(read_mapping(&path).unwrap().get(&40), Some(&1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn forecast_error_joins_the_log_with_the_actual_starts() {
        let l = |job, asked: i64, expected: Option<i64>| ForecastLine {
            trace_id: job + 100,
            job,
            asked_us: asked * 1_000_000,
            expected_start_us: expected.map(|e| e * 1_000_000),
            error: None,
        };
        let log = vec![
            // Running when asked: exact by construction, not among the waiting ones.
            l(1, 10, Some(10)),
            // Forecast to wait: actual − expected = +1, −3, +2 s.
            l(2, 10, Some(20)),
            l(3, 11, Some(30)),
            l(4, 11, Some(99)),
            // Asked again on a resume: the last line wins (+2 s, not +12).
            l(4, 12, Some(40)),
            // No forecast start (held), and a job of another replay.
            l(5, 12, None),
            l(77, 12, Some(50)),
        ];
        let actual: HashMap<u64, i64> = [(1, 10), (2, 21), (3, 27), (4, 42), (5, 60)]
            .into_iter()
            .map(|(j, s)| (j, s * 1_000_000))
            .collect();
        let acc = forecast_accuracy(&log, &actual);
        assert_eq!((acc.logged, acc.unmatched), (5, 1));
        // All four: errors 0, +1, −3, +2.
        assert_eq!(
            acc.all,
            ForecastError {
                n: 4,
                mean_abs: 1.5,
                p50_abs: 1.0,
                p90_abs: 3.0,
                max_abs: 3.0,
                mean_signed: 0.0,
            }
        );
        assert_eq!(acc.waited.n, 3);
        assert_eq!(acc.waited.mean_abs, 2.0);
        assert_eq!(acc.waited.p50_abs, 2.0);
        assert_eq!(acc.waited.max_abs, 3.0);
        assert_eq!(ForecastError::of(&[]), ForecastError::default());
    }
}
