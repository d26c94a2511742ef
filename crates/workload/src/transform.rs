//! Transformations of a workload: measure and rescale its offered load, compress time, take
//! the first jobs or a time window.
//!
//! The offered load is `Σ size·runtime / (procs · span)`, where the size is the requested
//! processors (else the allocated ones), the runtime is the actual one, and the span runs
//! from the first to the last submit time. Rescaling stretches the gaps between submits around
//! the first one, which changes that span, and only that, so the target is met exactly (up to
//! microsecond rounding).

use std::ops::Range;

use cosched_core::{Dur, Time};

use crate::swf::SwfRecord;

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
}
