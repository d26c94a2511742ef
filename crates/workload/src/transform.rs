//! Transformations of a workload: measure and rescale its offered load, compress time, take
//! the first jobs or a time window; and [`apply`], the pipeline of `cosched workload transform`
//! that runs them in a fixed order and notes what it did in the header.
//!
//! The offered load is `Σ size·runtime / (procs · span)`, where the size is the requested
//! processors (else the allocated ones), the runtime is the actual one, and the span runs
//! from the first to the last submit time. Rescaling stretches the gaps between submits around
//! the first one, which changes that span, and only that, so the target is met exactly (up to
//! microsecond rounding).

use std::ops::Range;

use cosched_core::{Dur, ParseDurError, Time};

use crate::swf::{SwfHeader, SwfRecord};

/// First and last known submit times.
pub fn submit_range(records: &[SwfRecord]) -> Option<(Time, Time)> {
    let mut it = records.iter().filter_map(|r| r.submit);
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t))))
}

/// Total PE-seconds of the jobs with a known size and runtime.
pub fn total_work_pe_s(records: &[SwfRecord]) -> f64 {
    records
        .iter()
        .filter_map(|r| Some(f64::from(r.size()?) * r.run?.as_secs_f64()))
        .sum()
}

/// Offered load: `Σ size·runtime / (procs · span)`. Zero when the span is empty (fewer than
/// two distinct submit times) or `procs` is zero.
pub fn offered_load(records: &[SwfRecord], procs: u32) -> f64 {
    let Some((first, last)) = submit_range(records) else {
        return 0.0;
    };
    let span = last.since(first).as_secs_f64();
    if span <= 0.0 || procs == 0 {
        return 0.0;
    }
    total_work_pe_s(records) / (f64::from(procs) * span)
}

/// Scales the gaps between submit times (around the first submit) so that the offered load
/// becomes `target`. Does nothing when `target` is not positive or the load is undefined
/// (see [`offered_load`]).
pub fn rescale_load(records: &mut [SwfRecord], procs: u32, target: f64) {
    let current = offered_load(records, procs);
    if !(target > 0.0 && target.is_finite()) || current <= 0.0 {
        return;
    }
    let Some((first, _)) = submit_range(records) else {
        return;
    };
    let factor = current / target;
    for r in records.iter_mut() {
        if let Some(t) = r.submit.as_mut() {
            let gap = t.since(first).as_micros() as f64 * factor;
            *t = Time::from_micros(first.as_micros() + gap.round() as i64);
        }
    }
}

fn div_dur(d: Dur, factor: f64) -> Dur {
    Dur::from_micros((d.as_micros() as f64 / factor).round() as i64)
}

/// Divides every time field (submit, wait, run, requested time, think time) by `factor`, as
/// the FCS thesis compresses logs by 100 to study short jobs. Does nothing unless
/// `factor` is positive and finite.
pub fn compress(records: &mut [SwfRecord], factor: f64) {
    if !(factor > 0.0 && factor.is_finite()) {
        return;
    }
    for r in records.iter_mut() {
        r.submit = r
            .submit
            .map(|t| Time::from_micros((t.as_micros() as f64 / factor).round() as i64));
        r.wait = r.wait.map(|d| div_dur(d, factor));
        r.run = r.run.map(|d| div_dur(d, factor));
        r.req_time = r.req_time.map(|d| div_dur(d, factor));
        r.think_time = r.think_time.map(|d| div_dur(d, factor));
    }
}

/// Keeps the first `n` records (file order).
pub fn first(records: &mut Vec<SwfRecord>, n: usize) {
    records.truncate(n);
}

/// Keeps the jobs submitted in `range` (from inclusive, to exclusive) and shifts their submit
/// times so that `range.start` becomes time zero: a window of a log is a log of its own.
/// Jobs with an unknown submit time are dropped.
pub fn window(records: &mut Vec<SwfRecord>, range: Range<Time>) {
    records.retain(|r| r.submit.is_some_and(|t| range.contains(&t)));
    for r in records.iter_mut() {
        r.submit = r
            .submit
            .map(|t| Time::from_micros(t.since(range.start).as_micros()));
    }
}

/// A time window `FROM..TO` that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("expected FROM..TO, e.g. 10d..20d or ..36h")]
    NoRange,
    #[error(transparent)]
    Dur(#[from] ParseDurError),
    #[error("FROM must be before TO")]
    Empty,
}

/// Parses `FROM..TO`, each side a duration since the start of the log (`10d`, `36h`, `3600`)
/// or empty: an empty FROM is time zero, an empty TO is the end of time.
pub fn parse_window(text: &str) -> Result<Range<Time>, WindowError> {
    let (from, to) = text.split_once("..").ok_or(WindowError::NoRange)?;
    let side = |s: &str, default: Time| -> Result<Time, WindowError> {
        if s.trim().is_empty() {
            return Ok(default);
        }
        Ok(Time::from_micros(Dur::parse(s)?.as_micros()))
    };
    let range = side(from, Time::ZERO)?..side(to, Time::MAX)?;
    if range.start >= range.end {
        return Err(WindowError::Empty);
    }
    Ok(range)
}

/// The steps of [`apply`]; each is skipped when `None`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Steps {
    /// Keep the jobs submitted in this window, rebased to start at zero ([`window`]).
    pub window: Option<Range<Time>>,
    /// Keep the first N jobs ([`first`]).
    pub first: Option<usize>,
    /// Divide all times by this factor ([`compress`]).
    pub compress: Option<f64>,
    /// Rescale inter-arrival times to this offered load ([`rescale_load`]).
    pub load: Option<f64>,
}

/// A transformation that cannot be done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransformError {
    #[error("{step} must be a positive number, not {value}")]
    NotPositive { step: &'static str, value: f64 },
    #[error(
        "the offered load of the selected jobs is undefined (fewer than two distinct submit \
         times or no known sizes and runtimes)"
    )]
    UndefinedLoad,
}

/// Runs `steps` over a trace of a `procs`-PE machine, in this order: window, first, compress,
/// load. The order is part of the meaning: `first` counts jobs inside the window, and the load
/// is rescaled last so that it is the load of exactly the jobs written. When any step ran, the
/// header gains a Note line naming `input` and the steps (with the load before and after).
pub fn apply(
    mut header: SwfHeader,
    mut records: Vec<SwfRecord>,
    procs: u32,
    input: &str,
    steps: &Steps,
) -> Result<(SwfHeader, Vec<SwfRecord>), TransformError> {
    for (step, value) in [("compress", steps.compress), ("load", steps.load)] {
        if let Some(v) = value.filter(|v| !(*v > 0.0 && v.is_finite())) {
            return Err(TransformError::NotPositive { step, value: v });
        }
    }
    let mut done = Vec::new();
    if let Some(w) = steps.window.clone() {
        done.push(format!("window {}..{}", w.start.as_secs(), w.end.as_secs()));
        window(&mut records, w);
    }
    if let Some(n) = steps.first {
        done.push(format!("first {n}"));
        first(&mut records, n);
    }
    if let Some(f) = steps.compress {
        done.push(format!("compress {f}"));
        compress(&mut records, f);
    }
    if let Some(l) = steps.load {
        let before = offered_load(&records, procs);
        if before <= 0.0 {
            return Err(TransformError::UndefinedLoad);
        }
        done.push(format!("load {before:.4} -> {l}"));
        rescale_load(&mut records, procs, l);
    }
    if !done.is_empty() {
        header.push_line(&format!(
            " Note: transformed by cosched from {input}: {}",
            done.join(", ")
        ));
    }
    Ok((header, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(submit_s: i64, size: u32, run_s: i64) -> SwfRecord {
        SwfRecord {
            job: submit_s as u64,
            submit: Some(Time::from_secs(submit_s)),
            run: Some(Dur::from_secs(run_s)),
            req_procs: Some(size),
            alloc_procs: Some(size),
            ..SwfRecord::default()
        }
    }

    #[test]
    fn load_is_work_over_capacity_across_the_span() {
        let jobs = vec![job(0, 4, 100), job(50, 2, 100), job(100, 4, 50)];
        // (400 + 200 + 200) / (8 * 100)
        assert!((offered_load(&jobs, 8) - 1.0).abs() < 1e-12);
        assert_eq!(offered_load(&jobs[..1], 8), 0.0);
    }

    #[test]
    fn rescale_hits_the_target_and_keeps_order() {
        let mut jobs = vec![job(10, 4, 100), job(60, 2, 100), job(110, 4, 50)];
        rescale_load(&mut jobs, 8, 0.25);
        assert!((offered_load(&jobs, 8) - 0.25).abs() < 1e-9);
        assert_eq!(jobs[0].submit, Some(Time::from_secs(10)));
        assert_eq!(jobs[1].submit, Some(Time::from_secs(210)));
    }

    #[test]
    fn compress_divides_all_times() {
        let mut jobs = vec![job(1000, 1, 500)];
        jobs[0].req_time = Some(Dur::from_secs(700));
        compress(&mut jobs, 100.0);
        assert_eq!(jobs[0].submit, Some(Time::from_secs(10)));
        assert_eq!(jobs[0].run, Some(Dur::from_secs(5)));
        assert_eq!(jobs[0].req_time, Some(Dur::from_secs(7)));
    }

    #[test]
    fn window_keeps_and_rebases() {
        let mut jobs = vec![job(0, 1, 1), job(100, 1, 1), job(200, 1, 1)];
        window(&mut jobs, Time::from_secs(100)..Time::from_secs(200));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].job, 100);
        assert_eq!(jobs[0].submit, Some(Time::ZERO));
        let mut jobs = vec![job(0, 1, 1), job(100, 1, 1)];
        first(&mut jobs, 1);
        assert_eq!(jobs.len(), 1);
    }

    #[test]
    fn windows_parse() {
        let w = parse_window("1d..36h").unwrap();
        assert_eq!((w.start.as_secs(), w.end.as_secs()), (86_400, 129_600));
        assert_eq!(parse_window("..100").unwrap().start, Time::ZERO);
        assert_eq!(parse_window("5..").unwrap().end, Time::MAX);
        assert_eq!(parse_window("10"), Err(WindowError::NoRange));
        assert_eq!(parse_window("20..10"), Err(WindowError::Empty));
        assert!(matches!(parse_window("x..10"), Err(WindowError::Dur(_))));
    }

    #[test]
    fn the_pipeline_runs_window_first_compress_load_in_that_order() {
        // Submits every 100 s; each job 4 PEs for 100 s on an 8-PE machine.
        let jobs: Vec<SwfRecord> = (0..10).map(|i| job(i * 100, 4, 100)).collect();
        let steps = Steps {
            window: Some(Time::from_secs(300)..Time::from_secs(900)),
            first: Some(3),
            compress: Some(10.0),
            load: Some(0.25),
        };
        let (header, out) = apply(SwfHeader::default(), jobs.clone(), 8, "in.swf", &steps).unwrap();
        // The window comes first: `first` counts inside it (jobs 300, 400, 500), not the
        // first three of the log.
        let ids: Vec<u64> = out.iter().map(|r| r.job).collect();
        assert_eq!(ids, [300, 400, 500]);
        // Times are divided by 10, then the load of the three selected jobs (40 PE-s each,
        // 120 over 8 PEs × a 20 s span: 0.75) is rescaled to 0.25: the gaps grow threefold.
        assert_eq!(out[0].run, Some(Dur::from_secs(10)));
        assert!((offered_load(&out, 8) - 0.25).abs() < 1e-9);
        assert_eq!(out[0].submit, Some(Time::ZERO));
        assert_eq!(out[2].submit, Some(Time::from_secs(60)));
        assert_eq!(
            header.lines.last().map(String::as_str),
            Some(
                " Note: transformed by cosched from in.swf: window 300..900, first 3, compress 10, load 0.7500 -> 0.25"
            )
        );
        // No steps: the trace is unchanged and the header gets no note.
        let (h, same) = apply(
            SwfHeader::default(),
            jobs.clone(),
            8,
            "in.swf",
            &Steps::default(),
        )
        .unwrap();
        assert_eq!(same, jobs);
        assert!(h.lines.is_empty());
    }

    #[test]
    fn the_pipeline_refuses_what_it_cannot_do() {
        let one = vec![job(0, 4, 100)];
        let load = Steps {
            load: Some(0.5),
            ..Steps::default()
        };
        assert_eq!(
            apply(SwfHeader::default(), one.clone(), 8, "x", &load).unwrap_err(),
            TransformError::UndefinedLoad
        );
        let bad = Steps {
            compress: Some(0.0),
            ..Steps::default()
        };
        assert!(matches!(
            apply(SwfHeader::default(), one, 8, "x", &bad),
            Err(TransformError::NotPositive {
                step: "compress",
                ..
            })
        ));
    }
}
