//! A small discrete-event driver for the time-sharing tests: it hands the policy each instant
//! (every event, then one decision), applies every decision of the policy API, tracks each
//! job's remaining work, and checks after each instant that no PE runs two jobs. Kept apart
//! from crates/sim so the policies are tested on their own.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use cosched_core::{Dur, JobId, PeSet, Time};
use cosched_policy::{Decision, Event, JobRequest, MatrixView, Policy};

#[derive(Clone, Debug)]
pub struct TestJob {
    pub req: JobRequest,
    pub runtime: Dur,
}

pub fn job(id: u64, submit: i64, procs: u32, runtime: i64) -> TestJob {
    TestJob {
        req: JobRequest::new(
            JobId(id),
            Time::from_secs(submit),
            procs,
            Dur::from_secs(runtime),
        ),
        runtime: Dur::from_secs(runtime),
    }
}

#[derive(Clone, Debug, Default)]
pub struct JobLog {
    pub start: Option<Time>,
    pub end: Option<Time>,
    pub pes: Option<PeSet>,
    pub running_since: Option<Time>,
    pub remaining: Dur,
    pub preemptions: u32,
    /// (time, decision name)
    pub history: Vec<(Time, &'static str)>,
}

/// What the driver saw; `check` is called after every event with the policy's matrix.
pub struct Run {
    pub jobs: BTreeMap<JobId, JobLog>,
    pub now: Time,
    pub decisions: usize,
    pub busy_pe_time: i128,
}

pub fn simulate(
    policy: &mut dyn Policy,
    jobs: &[TestJob],
    mut check: impl FnMut(Time, &Run, Option<MatrixView>),
) -> Run {
    let mut run = Run {
        jobs: BTreeMap::new(),
        now: Time::ZERO,
        decisions: 0,
        busy_pe_time: 0,
    };
    let runtime: HashMap<JobId, Dur> = jobs.iter().map(|j| (j.req.id, j.runtime)).collect();
    let mut arrivals: Vec<&TestJob> = jobs.iter().collect();
    arrivals.sort_by_key(|j| (j.req.submit, j.req.id));
    let mut next_arrival = 0;
    let mut timers: BTreeMap<(Time, u64), ()> = BTreeMap::new();
    let mut out = Vec::new();
    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(steps < 5_000_000, "test driver runaway");
        // The next completion among running jobs.
        let completion = run
            .jobs
            .iter()
            .filter_map(|(id, l)| l.running_since.map(|s| (s + l.remaining, *id)))
            .min();
        let arrival = arrivals.get(next_arrival).map(|j| j.req.submit);
        let timer = timers.keys().next().map(|k| k.0);
        let Some(now) = [completion.map(|c| c.0), arrival, timer]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        assert!(now >= run.now, "time went backwards");
        run.now = now;
        let mut events = Vec::new();
        if completion.is_some_and(|(t, _)| t == now) {
            // Every job finishing now.
            let done: Vec<JobId> = run
                .jobs
                .iter()
                .filter(|(_, l)| l.running_since.is_some_and(|s| s + l.remaining == now))
                .map(|(id, _)| *id)
                .collect();
            for id in done {
                let l = run.jobs.get_mut(&id).unwrap();
                stop(l, now, &mut run.busy_pe_time);
                l.end = Some(now);
                l.remaining = Dur::ZERO;
                l.pes = None;
                events.push(Event::Ended(id));
            }
        }
        while arrivals
            .get(next_arrival)
            .is_some_and(|j| j.req.submit == now)
        {
            let j = arrivals[next_arrival];
            run.jobs.insert(
                j.req.id,
                JobLog {
                    remaining: runtime[&j.req.id],
                    ..Default::default()
                },
            );
            events.push(Event::Submitted(j.req.clone()));
            next_arrival += 1;
        }
        while let Some((&(t, token), _)) = timers.iter().next() {
            if t != now {
                break;
            }
            timers.remove(&(t, token));
            events.push(Event::Timer(token));
        }
        // Rounds of the instant: a kill's end is observed, then decided on, at the same time.
        while !events.is_empty() {
            for ev in events.drain(..) {
                policy.observe(now, ev);
            }
            policy.decide(now, &mut out);
            for d in std::mem::take(&mut out) {
                run.decisions += 1;
                apply(&mut run, &mut timers, now, d, &mut events);
            }
            assert_disjoint(&run);
            check(now, &run, policy.matrix());
        }
    }
    run
}

fn stop(l: &mut JobLog, now: Time, busy: &mut i128) {
    if let Some(s) = l.running_since.take() {
        l.remaining -= now - s;
        *busy += (now - s).as_micros() as i128 * l.pes.as_ref().map_or(0, |p| p.len()) as i128;
    }
}

fn apply(
    run: &mut Run,
    timers: &mut BTreeMap<(Time, u64), ()>,
    now: Time,
    d: Decision,
    ended: &mut Vec<Event>,
) {
    let name = match &d {
        Decision::Start { .. } => "start",
        Decision::Place { .. } => "place",
        Decision::Suspend { .. } => "suspend",
        Decision::Resume { .. } => "resume",
        Decision::Preempt { .. } => "preempt",
        Decision::Kill { .. } => "kill",
        Decision::Reject { .. } => "reject",
        Decision::SetTimer { .. } => "timer",
    };
    match d {
        Decision::Start { job, pes, .. } => {
            let l = run.jobs.get_mut(&job).expect("start of an unknown job");
            assert!(l.end.is_none(), "start of ended job {job}");
            assert!(l.running_since.is_none(), "start of running job {job}");
            l.pes = Some(pes);
            l.start.get_or_insert(now);
            l.running_since = Some(now);
            l.history.push((now, name));
        }
        Decision::Place { job, pes, .. } => {
            let l = run.jobs.get_mut(&job).expect("place of an unknown job");
            assert!(l.running_since.is_none());
            l.pes = Some(pes);
            l.history.push((now, name));
        }
        Decision::Suspend { job } => {
            let l = run.jobs.get_mut(&job).expect("suspend of an unknown job");
            assert!(
                l.running_since.is_some(),
                "suspend of a stopped job {job} at {now}"
            );
            stop(l, now, &mut run.busy_pe_time);
            l.history.push((now, name));
        }
        Decision::Resume { job } => {
            let l = run.jobs.get_mut(&job).expect("resume of an unknown job");
            assert!(
                l.running_since.is_none(),
                "resume of a running job {job} at {now}"
            );
            assert!(l.pes.is_some(), "resume of job {job} without PEs");
            l.start.get_or_insert(now);
            l.running_since = Some(now);
            l.history.push((now, name));
        }
        Decision::Preempt { job } => {
            let l = run.jobs.get_mut(&job).expect("preempt of an unknown job");
            stop(l, now, &mut run.busy_pe_time);
            l.pes = None;
            l.preemptions += 1;
            l.history.push((now, name));
        }
        Decision::Kill { job } | Decision::Reject { job, .. } => {
            let l = run.jobs.get_mut(&job).expect("kill of an unknown job");
            stop(l, now, &mut run.busy_pe_time);
            l.end = Some(now);
            l.pes = None;
            l.history.push((now, name));
            ended.push(Event::Ended(job));
        }
        Decision::SetTimer { at, token } => {
            timers.insert((at.max(now), token), ());
        }
    }
}

/// No PE is used by two running jobs.
pub fn assert_disjoint(run: &Run) {
    let mut seen: Vec<(JobId, &PeSet)> = Vec::new();
    for (id, l) in &run.jobs {
        if l.running_since.is_some() {
            let pes = l.pes.as_ref().expect("running job has PEs");
            for (other, o) in &seen {
                assert!(
                    !pes.intersects(o),
                    "jobs {id} and {other} run on the same PE at {}",
                    run.now
                );
            }
            seen.push((*id, pes));
        }
    }
}

/// No PE is given to two jobs within one slot of the matrix.
pub fn assert_matrix_sound(m: &MatrixView) {
    for (s, slot) in m.slots.iter().enumerate() {
        for (i, (a, pa)) in slot.jobs.iter().enumerate() {
            for (b, pb) in &slot.jobs[i + 1..] {
                assert!(!pa.intersects(pb), "slot {s}: jobs {a} and {b} share a PE");
            }
        }
    }
}

/// A seeded workload: sizes skewed to small powers of two, runtimes from seconds to hours.
pub fn random_jobs(seed: u64, n: usize, max_procs: u32, mean_gap: i64) -> Vec<TestJob> {
    // A tiny xorshift keeps the test crate free of RNG dependencies.
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 0;
    (0..n)
        .map(|i| {
            t += (next() % (2 * mean_gap as u64 + 1)) as i64;
            let procs = match next() % 4 {
                0 => 1 << (next() % (32 - max_procs.leading_zeros()) as u64),
                1 => 1 + (next() % max_procs as u64) as u32,
                _ => 1 + (next() % 8) as u32,
            }
            .min(max_procs);
            let runtime = 1 + (next() % [30, 600, 7_200][(next() % 3) as usize]) as i64;
            job(i as u64 + 1, t, procs, runtime)
        })
        .collect()
}
