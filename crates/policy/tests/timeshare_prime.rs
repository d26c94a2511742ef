//! Prime/non-prime (`prime`): which jobs may start during prime time, and that the held-back
//! jobs start when non-prime time begins.

mod timeshare_support;

use cosched_core::{Dur, JobId, MachineShape, Time};
use cosched_policy::prime::PrimeSchedule;
use cosched_policy::{Decision, Event, JobRequest, PolicyConfig, registry};
use timeshare_support::{TestJob, simulate};

fn tj(id: u64, submit: i64, procs: u32, runtime: i64) -> TestJob {
    // The estimate is the exact runtime, as in seed 002's simulations.
    let mut j = timeshare_support::job(id, submit, procs, runtime);
    j.req.estimate = Dur::from_secs(runtime);
    j
}

fn started(out: &[Decision]) -> Vec<u64> {
    out.iter()
        .filter_map(|d| match d {
            Decision::Start { job, .. } => Some(job.0),
            _ => None,
        })
        .collect()
}

#[test]
fn prime_time_restricts_large_and_long_jobs() {
    let c = PolicyConfig::new(MachineShape::flat(128, 1));
    let mut p = registry::build("prime", &c).unwrap();
    let mut out = Vec::new();
    let sub = |id, procs, est: i64| {
        Event::Submitted(JobRequest::new(
            JobId(id),
            Time::from_secs(60),
            procs,
            Dur::from_secs(est),
        ))
    };
    let now = Time::from_secs(60); // prime time (first 12 h)
    p.handle(now, sub(1, 64, 3600), &mut out); // large, 1 h: waits
    p.handle(now, sub(2, 64, 300), &mut out); // large, 5 min: runs
    p.handle(now, sub(3, 8, 3 * 3600), &mut out); // small, 3 h, 64 free: runs
    p.handle(now, sub(4, 8, 5 * 3600), &mut out); // small, 5 h: waits
    p.handle(now, sub(5, 16, 2 * 3600), &mut out); // small, 2 h, 56 free: runs
    p.handle(now, sub(6, 16, 2 * 3600), &mut out); // small, 2 h, 40 free: runs
    p.handle(now, sub(7, 16, 2 * 3600), &mut out); // 24 free < 32: waits
    p.handle(now, sub(8, 8, 600), &mut out); // 10 min: runs whatever is free
    assert_eq!(started(&out), vec![2, 3, 5, 6, 8]);
    assert_eq!(p.queue(), vec![JobId(1), JobId(4), JobId(7)]);
    // A timer for the end of prime time was asked for.
    let timer = out.iter().find_map(|d| match d {
        Decision::SetTimer { at, token } => Some((*at, *token)),
        _ => None,
    });
    let (at, token) = timer.expect("a timer at the end of prime time");
    assert_eq!(at, Time::from_secs(12 * 3600));
    out.clear();
    for id in [2, 3, 5, 6, 8] {
        p.handle(
            Time::from_secs(11 * 3600),
            Event::Ended(JobId(id)),
            &mut out,
        );
    }
    // Prime time still: job 1 (large, 1 h) and job 4 (5 h) wait; job 7 may now go.
    assert_eq!(started(&out), vec![7]);
    out.clear();
    p.handle(at, Event::Timer(token), &mut out);
    assert_eq!(started(&out), vec![1, 4]);
}

#[test]
fn night_lets_everything_run_in_a_simulation() {
    let c = PolicyConfig::new(MachineShape::flat(64, 1));
    let mut p = registry::build("prime", &c).unwrap();
    let jobs = [tj(1, 0, 64, 7200), tj(2, 10, 4, 100), tj(3, 20, 40, 30)];
    let run = simulate(p.as_mut(), &jobs, |_, _, _| {});
    assert_eq!(run.jobs[&JobId(2)].start, Some(Time::from_secs(10)));
    assert_eq!(run.jobs[&JobId(3)].start, Some(Time::from_secs(20)));
    assert_eq!(run.jobs[&JobId(1)].start, Some(Time::from_secs(12 * 3600)));
    assert!(run.jobs.values().all(|l| l.end.is_some()));
}

#[test]
fn daily_schedule_boundaries() {
    let h = |x: i64| Dur::from_secs(x * 3600);
    let s = PrimeSchedule::Daily {
        start: h(8),
        end: h(18),
        day_offset: h(6),
        weekends: true,
    };
    // Time 0 is 06:00 on a Monday.
    assert!(!s.is_prime(Time::ZERO));
    assert!(s.is_prime(Time::from_secs(2 * 3600)));
    assert_eq!(s.next_change(Time::ZERO), Time::from_secs(2 * 3600));
    assert_eq!(
        s.next_change(Time::from_secs(2 * 3600)),
        Time::from_secs(12 * 3600)
    );
    assert_eq!(
        s.next_change(Time::from_secs(13 * 3600)),
        Time::from_secs(26 * 3600)
    );
    // Saturday noon is not prime time.
    let saturday_noon = Time::from_secs((5 * 24 + 6) * 3600);
    assert!(!s.is_prime(saturday_noon));
    let alt = PrimeSchedule::Alternate { shift: h(12) };
    assert!(alt.is_prime(Time::ZERO) && !alt.is_prime(Time::from_secs(12 * 3600)));
    assert_eq!(
        alt.next_change(Time::from_secs(5)),
        Time::from_secs(12 * 3600)
    );
}

#[test]
fn options_change_the_threshold_and_bad_ones_are_named() {
    let mut c = PolicyConfig::new(MachineShape::flat(128, 1));
    c.options
        .insert("large_job".into(), toml::Value::Integer(64));
    let mut p = registry::build("prime", &c).unwrap();
    let mut out = Vec::new();
    let j = JobRequest::new(JobId(1), Time::ZERO, 64, Dur::from_secs(3600));
    p.handle(Time::ZERO, Event::Submitted(j), &mut out);
    assert_eq!(
        started(&out),
        vec![1],
        "64 PEs is small when large_job = 64"
    );
    c.options
        .insert("schedule".into(), toml::Value::String("weekly".into()));
    let err = registry::build("prime", &c).err().unwrap().to_string();
    assert!(err.contains("schedule") && err.contains("daily"), "{err}");
}
