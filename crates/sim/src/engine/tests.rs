//! The driver's instants, accounting, streamed input, slowdown rates and operations, on
//! small machines where each schedule can be worked out by hand.

use super::*;
use cosched_core::{NodeId, PeSet, Slowdowns};
use cosched_policy::{PolicyConfig, registry};

fn fcfs(pes: u32) -> (MachineShape, Box<dyn Policy>) {
    let m = MachineShape::flat(pes, 1);
    (m, registry::build("fcfs", &PolicyConfig::new(m)).unwrap())
}

/// Jobs in submit order with many equal submit times, the ids of each such group in
/// decreasing order (so that the arrivals must be sorted across pieces).
fn tied_jobs(n: u64, pes: u32) -> Vec<SimJob> {
    let mut x = 12345u64;
    let mut rnd = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut jobs = Vec::new();
    let mut t = 0;
    while (jobs.len() as u64) < n {
        t += rnd(4) * 30;
        let group = 1 + rnd(3);
        let first = jobs.len() as u64;
        for k in (0..group).rev() {
            let runtime = Dur::from_secs(1 + rnd(400) as i64);
            let estimate = runtime + Dur::from_secs(rnd(300) as i64);
            let procs = 1 + rnd(pes as u64) as u32;
            let id = 1000 + first + k;
            let job =
                SimJob::with_estimate(id, Time::from_secs(t as i64), procs, runtime, estimate);
            jobs.push(job);
        }
    }
    jobs
}

/// Feeds `jobs` in pieces of `piece` to the streamed engine, which expects `expected`,
/// from another thread that makes the room of each piece resident before sending it, as
/// the trace reader does.
fn streamed(
    m: MachineShape,
    jobs: &[SimJob],
    piece: usize,
    expected: usize,
    p: &mut dyn Policy,
) -> Result<(SimResult, Vec<SimJob>), SimError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let ahead = &Ahead::new();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut sent = 0;
            for c in jobs.chunks(piece) {
                sent += c.len();
                ahead.populate(sent);
                tx.send(c.to_vec()).unwrap();
            }
        });
        simulate_streamed(m, expected, rx, ahead, p, EngineOptions::default())
    })
}

#[test]
fn jobs_fed_in_pieces_give_the_schedule_of_all_at_once() {
    let m = MachineShape::flat(16, 1);
    let jobs = tied_jobs(400, 16);
    for policy in ["fcfs", "easy", "conservative"] {
        let cfg = PolicyConfig::new(m);
        let mut p = registry::build(policy, &cfg).unwrap();
        let all = simulate(m, &jobs, p.as_mut(), EngineOptions::default()).unwrap();
        // Expecting nothing, fewer jobs than come, all of them, or more (a trace's header
        // may be wrong either way): the same schedule.
        for (piece, expected) in [(1, 0), (2, 100), (7, 400), (64, 0), (1000, 5000), (7, 0)] {
            let mut p = registry::build(policy, &cfg).unwrap();
            let (res, back) = streamed(m, &jobs, piece, expected, p.as_mut()).unwrap();
            assert_eq!(res.records, all.records, "{policy}, pieces of {piece}");
            assert_eq!((res.events, res.decisions), (all.events, all.decisions));
            assert_eq!(res.runtimes, all.runtimes);
            assert_eq!(back, jobs);
        }
    }
}

/// Gang skips whole periods of its rotation up to the next arrival it knows; while the
/// trace is still being read, a job read later but submitted inside the skipped time is
/// out of order (the caller runs the whole trace), never silently late.
#[test]
fn a_job_read_after_gang_skipped_past_its_submit_time_stops_the_run() {
    let m = MachineShape::flat(1, 1);
    let mut cfg = PolicyConfig::new(m);
    cfg.quantum = Some(Dur::from_secs(10));
    let job = |id, t, run| SimJob::exact(id, Time::from_secs(t), 1, Dur::from_secs(run));
    // Two jobs share the one PE in turn long past t=50,000; the next one known comes at
    // about t=50,000 (the skip stops just before it, and the quantum after the skip may
    // fall on it or not: every phase is tried), and the one read later belongs at 3,000.
    for t3 in [50_000, 50_005, 50_010, 50_015] {
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send(vec![job(1, 0, 100_000), job(2, 0, 100_000), job(3, t3, 10)])
            .unwrap();
        tx.send(vec![job(4, 3_000, 10)]).unwrap();
        drop(tx);
        let mut p = registry::build("gang", &cfg).unwrap();
        let err = simulate_streamed(
            m,
            0,
            rx,
            &Ahead::new(),
            p.as_mut(),
            EngineOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, SimError::OutOfOrder { job: JobId(4) }),
            "t3={t3}: {err}"
        );
    }
}

#[test]
fn a_job_fed_after_its_submit_time_was_simulated_stops_the_run() {
    let (m, mut p) = fcfs(4);
    let job = |id, t| SimJob::exact(id, Time::from_secs(t), 1, Dur::from_secs(10));
    // The third job's piece is asked for at t=100 (the last submit time known), after
    // t=0 and t=60 (the first job's end) were simulated: it belongs at t=50.
    let (tx, rx) = std::sync::mpsc::channel();
    let long = SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(60));
    tx.send(vec![long, job(2, 100)]).unwrap();
    tx.send(vec![job(3, 50)]).unwrap();
    drop(tx);
    let ahead = Ahead::new();
    let err =
        simulate_streamed(m, 0, rx, &ahead, p.as_mut(), EngineOptions::default()).unwrap_err();
    assert!(
        matches!(err, SimError::OutOfOrder { job: JobId(3) }),
        "{err}"
    );
    // Out of order among the jobs not yet arrived is no harm (here the third job comes
    // at t=100, when only t=0 and t=10 were simulated).
    let (_, mut p) = fcfs(4);
    let jobs = [job(1, 0), job(2, 100), job(3, 50), job(4, 200)];
    let all = simulate(m, &jobs, p.as_mut(), EngineOptions::default()).unwrap();
    let (_, mut p) = fcfs(4);
    let (res, _) = streamed(m, &jobs, 4, 0, p.as_mut()).unwrap();
    assert_eq!(res.records, all.records);
}

#[test]
fn fcfs_runs_jobs_back_to_back() {
    let (m, mut p) = fcfs(4);
    let jobs = vec![
        SimJob::exact(1, Time::from_secs(0), 4, Dur::from_secs(10)),
        SimJob::exact(2, Time::from_secs(1), 2, Dur::from_secs(5)),
        SimJob::exact(3, Time::from_secs(10), 2, Dur::from_secs(5)),
    ];
    let r = simulate(m, &jobs, p.as_mut(), EngineOptions::default()).unwrap();
    let starts: Vec<_> = r
        .records
        .iter()
        .map(|r| r.start.unwrap().as_secs())
        .collect();
    // Job 1 ends at 10 and its end is handled before job 3 arrives at 10: both 2 and 3 start.
    assert_eq!(starts, vec![0, 10, 10]);
    let ends: Vec<_> = r.records.iter().map(|r| r.end.unwrap().as_secs()).collect();
    assert_eq!(ends, vec![10, 15, 15]);
    assert_eq!(r.unfinished, 0);
}

/// Records the events it is given and its decision points, in order, and lets FCFS
/// decide.
struct Recorder(Vec<String>, Box<dyn Policy>);
impl Policy for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn observe(&mut self, now: Time, e: Event) {
        let what = match &e {
            Event::Submitted(j) => format!("{}:submit{}", now.as_secs(), j.id),
            Event::Ended(j) => format!("{}:end{}", now.as_secs(), j),
            other => format!("{other:?}"),
        };
        self.0.push(what);
        self.1.observe(now, e);
    }
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.0.push(format!("{}:decide", now.as_secs()));
        self.1.decide(now, out);
    }
    fn queue(&self) -> Vec<JobId> {
        self.1.queue()
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(Recorder(self.0.clone(), self.1.boxed_clone()))
    }
}

#[test]
fn one_decision_per_instant_after_ends_then_arrivals_unless_switched() {
    let (m, p) = fcfs(4);
    let jobs = vec![
        SimJob::exact(1, Time::from_secs(0), 4, Dur::from_secs(10)),
        SimJob::exact(2, Time::from_secs(10), 4, Dur::from_secs(5)),
    ];
    let mut r = Recorder(Vec::new(), p.boxed_clone());
    simulate(m, &jobs, &mut r, EngineOptions::default()).unwrap();
    assert_eq!(
        r.0,
        [
            "0:submit1",
            "0:decide",
            "10:end1",
            "10:submit2",
            "10:decide",
            "15:end2",
            "15:decide"
        ]
    );
    let mut r = Recorder(Vec::new(), p.boxed_clone());
    let res = simulate(
        m,
        &jobs,
        &mut r,
        EngineOptions {
            arrivals_first: true,
            ..EngineOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        r.0,
        [
            "0:submit1",
            "0:decide",
            "10:submit2",
            "10:end1",
            "10:decide",
            "15:end2",
            "15:decide"
        ]
    );
    assert_eq!(res.records[1].start, Some(Time::from_secs(10)));
}

/// A scripted policy: replays fixed decisions at given times, from timers (which fire
/// after the arrivals of their instant).
/// A test policy written one event at a time; [`PerEvent`] replays an instant's events
/// to it at the decision.
trait Stepper: Clone + Send + 'static {
    const NAME: &'static str;
    fn step(&mut self, now: Time, e: Event, out: &mut Vec<Decision>);
}

#[derive(Clone)]
struct PerEvent<S>(S, Vec<(Time, Event)>);
impl<S: Stepper> PerEvent<S> {
    fn new(inner: S) -> PerEvent<S> {
        PerEvent(inner, Vec::new())
    }
}
impl<S: Stepper> Policy for PerEvent<S> {
    fn name(&self) -> &str {
        S::NAME
    }
    fn observe(&mut self, now: Time, e: Event) {
        self.1.push((now, e));
    }
    fn decide(&mut self, _now: Time, out: &mut Vec<Decision>) {
        for (now, e) in std::mem::take(&mut self.1) {
            self.0.step(now, e, out);
        }
    }
    fn queue(&self) -> Vec<JobId> {
        Vec::new()
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

#[derive(Clone)]
struct Script(Vec<(Time, Vec<Decision>)>, bool);
impl Script {
    fn new(steps: Vec<(Time, Vec<Decision>)>) -> PerEvent<Script> {
        PerEvent::new(Script(steps, false))
    }
}
impl Stepper for Script {
    const NAME: &'static str = "script";
    fn step(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
        if matches!(e, Event::Timer(_)) {
            self.1 = false;
            while let Some((t, _)) = self.0.first() {
                if *t > now {
                    break;
                }
                out.extend(self.0.remove(0).1);
            }
        }
        if let Some((t, _)) = self.0.first()
            && !self.1
        {
            self.1 = true;
            out.push(Decision::SetTimer { at: *t, token: 0 });
        }
    }
}

#[test]
fn suspend_resume_and_preempt_keep_progress() {
    let m = MachineShape::flat(2, 1);
    let jobs = vec![
        SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10)),
        SimJob::exact(2, Time::ZERO, 2, Dur::from_secs(4)),
    ];
    let s = |t: i64| Time::from_secs(t);
    let all = PeSet::contiguous(0, 2);
    let mut p = Script::new(vec![
        (
            s(0),
            vec![
                Decision::Start {
                    job: JobId(1),
                    pes: all.clone(),
                    slot: Some(0),
                },
                Decision::Place {
                    job: JobId(2),
                    pes: all.clone(),
                    slot: Some(1),
                },
            ],
        ),
        (
            s(3),
            vec![
                Decision::Suspend { job: JobId(1) },
                Decision::Resume { job: JobId(2) },
            ],
        ),
        (
            s(5),
            vec![
                Decision::Suspend { job: JobId(2) },
                Decision::Resume { job: JobId(1) },
            ],
        ),
        (
            s(6),
            vec![
                Decision::Preempt { job: JobId(1) },
                Decision::Resume { job: JobId(2) },
            ],
        ),
        (
            s(8),
            vec![Decision::Start {
                job: JobId(1),
                pes: all.clone(),
                slot: None,
            }],
        ),
    ]);
    let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
    // Job 1: runs 0-3, 5-6 (4 s done), preempted, restarts at 8 for its last 6 s.
    assert_eq!(r.records[0].end, Some(s(14)));
    assert_eq!(r.records[0].start, Some(s(0)));
    assert_eq!(r.records[0].suspended, Dur::from_secs(4));
    assert_eq!(r.records[0].preemptions, 1);
    // Job 2: placed at 0, runs 3-5 and 6-8 (4 s): ends at 8, first ran at 3.
    assert_eq!(r.records[1].start, Some(s(3)));
    assert_eq!(r.records[1].end, Some(s(8)));
    assert_eq!(r.records[1].suspended, Dur::from_secs(1));
}

#[test]
fn overlapping_runs_are_reported_with_policy_job_and_time() {
    let m = MachineShape::flat(2, 1);
    let jobs = vec![
        SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10)),
        SimJob::exact(7, Time::ZERO, 1, Dur::from_secs(4)),
    ];
    let mut p = Script::new(vec![(
        Time::ZERO,
        vec![
            Decision::Start {
                job: JobId(1),
                pes: PeSet::contiguous(0, 2),
                slot: None,
            },
            Decision::Start {
                job: JobId(7),
                pes: PeSet::contiguous(1, 1),
                slot: None,
            },
        ],
    )]);
    let err = simulate(m, &jobs, &mut p, EngineOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("script") && err.contains("job 7") && err.contains("t=0"),
        "{err}"
    );
}

#[test]
fn starting_an_unsubmitted_job_is_an_error() {
    let m = MachineShape::flat(2, 1);
    let jobs = vec![
        SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(10)),
        SimJob::exact(2, Time::from_secs(5), 1, Dur::from_secs(4)),
    ];
    let mut p = Script::new(vec![(
        Time::ZERO,
        vec![Decision::Start {
            job: JobId(2),
            pes: PeSet::contiguous(0, 1),
            slot: None,
        }],
    )]);
    let err = simulate(m, &jobs, &mut p, EngineOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("not submitted"), "{err}");
    let mut p = Script::new(vec![(
        Time::ZERO,
        vec![Decision::Resume { job: JobId(99) }],
    )]);
    let err = simulate(m, &jobs, &mut p, EngineOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown job"), "{err}");
}

/// Round robin of two jobs on one PE, one-second quanta: 20,000 context switches each
/// remove one end event and add another, and the accounting must stay exact.
#[derive(Clone)]
struct RoundRobin {
    running: Option<u64>,
    alive: Vec<u64>,
}
impl Stepper for RoundRobin {
    const NAME: &'static str = "rr";
    fn step(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
        let pe = PeSet::contiguous(0, 1);
        match e {
            Event::Submitted(j) => {
                self.alive.push(j.id.0);
                if self.running.is_none() {
                    self.running = Some(j.id.0);
                    out.push(Decision::Start {
                        job: j.id,
                        pes: pe,
                        slot: Some(0),
                    });
                    out.push(Decision::SetTimer {
                        at: now + Dur::from_secs(1),
                        token: 0,
                    });
                } else {
                    out.push(Decision::Place {
                        job: j.id,
                        pes: pe,
                        slot: Some(1),
                    });
                }
            }
            Event::Ended(id) => {
                self.alive.retain(|&j| j != id.0);
                self.running = None;
                if let Some(&next) = self.alive.first() {
                    self.running = Some(next);
                    out.push(Decision::Resume { job: JobId(next) });
                }
            }
            Event::Timer(_) => {
                if let (Some(cur), 2) = (self.running, self.alive.len()) {
                    let next = if self.alive[0] == cur {
                        self.alive[1]
                    } else {
                        self.alive[0]
                    };
                    out.push(Decision::Suspend { job: JobId(cur) });
                    out.push(Decision::Resume { job: JobId(next) });
                    self.running = Some(next);
                }
                if !self.alive.is_empty() {
                    out.push(Decision::SetTimer {
                        at: now + Dur::from_secs(1),
                        token: 0,
                    });
                }
            }
            _ => {}
        }
    }
}

#[test]
fn many_context_switches_keep_exact_accounting() {
    let m = MachineShape::flat(1, 1);
    let jobs = vec![
        SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(10_000)),
        SimJob::exact(2, Time::ZERO, 1, Dur::from_secs(10_000)),
    ];
    let mut p = PerEvent::new(RoundRobin {
        running: None,
        alive: Vec::new(),
    });
    let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
    // Job 1 runs in [0,1), [2,3), …: its 10,000th second ends at 19,999; job 2 at 20,000.
    assert_eq!(r.records[0].end, Some(Time::from_secs(19_999)));
    assert_eq!(r.records[1].end, Some(Time::from_secs(20_000)));
    assert_eq!(r.records[1].start, Some(Time::from_secs(1)));
    assert_eq!(r.records[0].suspended, Dur::from_secs(9_999));
    assert_eq!(r.records[1].suspended, Dur::from_secs(9_999));
}

/// The running-ends set against a sorted reference, over a long mix of inserts and
/// removals that often drop the earliest entry (as suspending a whole row does).
#[test]
fn running_ends_always_yield_the_earliest_live_end() {
    use std::collections::BTreeSet;
    let jobs = 64;
    let mut ends = RunningEnds::new(jobs);
    let mut reference: BTreeSet<(Time, u64, u32)> = BTreeSet::new();
    let mut live: Vec<Option<(Time, u64)>> = vec![None; jobs];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for seq in 0..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let job = (x % jobs as u64) as usize;
        match live[job] {
            Some((t, s)) => {
                ends.remove(job);
                reference.remove(&(t, s, job as u32));
                live[job] = None;
            }
            None => {
                // Few distinct times, so ties are broken by `seq`.
                let t = Time::from_secs(((x >> 20) % 50) as i64);
                ends.insert(t, seq, job);
                reference.insert((t, seq, job as u32));
                live[job] = Some((t, seq));
            }
        }
        assert_eq!(ends.peek(), reference.first().copied(), "after op {seq}");
        if seq % 997 == 0 {
            // Everything due by some time leaves at once, in order.
            let t = Time::from_secs(((x >> 40) % 50) as i64);
            let mut due = Vec::new();
            ends.drain_due(t, &mut due);
            let expect: Vec<_> = reference.iter().copied().filter(|e| e.0 <= t).collect();
            assert_eq!(due, expect, "drained at {t} after op {seq}");
            for e in &expect {
                reference.remove(e);
                live[e.2 as usize] = None;
            }
            assert_eq!(ends.peek(), reference.first().copied());
        }
    }
}

fn quad(nodes: u32) -> MachineShape {
    MachineShape {
        nodes,
        sockets_per_node: 2,
        cores_per_socket: 2,
        mem_per_node_mib: None,
    }
}

fn start(job: u64, pes: Vec<cosched_core::PeId>) -> Decision {
    Decision::Start {
        job: JobId(job),
        pes: PeSet::from_pes(pes.into_iter().map(|p| p.0)),
        slot: None,
    }
}

/// Seed 001: a job's rate follows the slowdowns in force. Job 1 runs alone on node 0 for
/// 40 s (rate 1), then shares it with job 2 (each slowed by the other's SL_cos) until job
/// 2 ends, then runs alone again; job 3 uses four processes of node 1 (SL_nos · SL_crs).
/// The ends are recomputed by hand with integer arithmetic.
#[test]
fn rates_follow_co_runners_exactly() {
    let m = quad(2);
    let model = Slowdowns::new(11);
    let jobs = vec![
        SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(100)),
        SimJob::exact(2, Time::ZERO, 1, Dur::from_secs(10)),
        SimJob::exact(3, Time::ZERO, 4, Dur::from_secs(50)),
    ];
    let n0 = NodeId(0);
    let mut p = Script::new(vec![
        (
            Time::ZERO,
            vec![
                start(1, m.node_cores(n0, 1, 0)),
                start(3, m.node_cores(NodeId(1), 4, 0)),
            ],
        ),
        (Time::from_secs(40), vec![start(2, m.node_cores(n0, 1, 1))]),
    ]);
    let opts = EngineOptions {
        slowdowns: Some(model),
        ..EngineOptions::default()
    };
    let r = simulate(m, &jobs, &mut p, opts).unwrap();
    let (a, b) = (
        u64::from(model.cos(JobId(1), JobId(2))),
        u64::from(model.cos(JobId(2), JobId(1))),
    );
    let us = 1_000_000u64;
    // Job 2: 10 s of work at slowdown b, from 40 s.
    let end2 = 40 * us + (10 * us * 1000 * b).div_ceil(1_000_000);
    // Job 1: 40 s done alone; (end2 − 40 s) at slowdown a; the rest alone.
    let done = 40 * us * 1000 + (end2 - 40 * us) * 1_000_000 / a;
    let end1 = end2 + (100 * us * 1000 - done).div_ceil(1000);
    let at = |t: u64| Some(Time::from_micros(t as i64));
    assert_eq!(r.records[1].end, at(end2));
    assert_eq!(r.records[0].end, at(end1));
    assert!(end1 > 100 * us && end2 > 50 * us, "both were slowed");
    let s3 = u64::from(cosched_core::multicore::mul(
        model.nos(JobId(3)),
        model.crs(JobId(3)),
    ));
    assert_eq!(
        r.records[2].end,
        at((50 * us * 1000 * s3).div_ceil(1_000_000))
    );
}

/// At most two jobs on a node, and never more processes than cores.
#[test]
fn a_third_job_on_a_node_or_a_shared_core_is_refused() {
    let m = quad(1);
    let jobs: Vec<SimJob> = (1..=3)
        .map(|i| SimJob::exact(i, Time::ZERO, 1, Dur::from_secs(10)))
        .collect();
    let opts = || EngineOptions {
        slowdowns: Some(Slowdowns::new(1)),
        ..EngineOptions::default()
    };
    let pe = |p: u32| vec![cosched_core::PeId(p)];
    let mut p = Script::new(vec![(
        Time::ZERO,
        vec![start(1, pe(0)), start(2, pe(1)), start(3, pe(2))],
    )]);
    let err = simulate(m, &jobs, &mut p, opts()).unwrap_err().to_string();
    assert!(
        err.contains("third job on node 0") && err.contains("job 3"),
        "{err}"
    );
    let mut p = Script::new(vec![(Time::ZERO, vec![start(1, pe(0)), start(2, pe(0))])]);
    assert!(simulate(m, &jobs[..2], &mut p, opts()).is_err());
    // Two jobs, then a third once one has ended: fine.
    let mut p = Script::new(vec![
        (Time::ZERO, vec![start(1, pe(0)), start(2, pe(1))]),
        (Time::from_secs(30), vec![start(3, pe(2))]),
    ]);
    let r = simulate(m, &jobs, &mut p, opts()).unwrap();
    assert_eq!(r.unfinished, 0);
}

#[test]
fn kill_ends_the_job_and_tells_the_policy() {
    let m = MachineShape::flat(2, 1);
    let jobs = vec![SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10))];
    let mut p = Script::new(vec![
        (
            Time::ZERO,
            vec![Decision::Start {
                job: JobId(1),
                pes: PeSet::contiguous(0, 2),
                slot: None,
            }],
        ),
        (Time::from_secs(3), vec![Decision::Kill { job: JobId(1) }]),
    ]);
    let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
    assert_eq!(r.records[0].end, Some(Time::from_secs(3)));
    assert_eq!(r.records[0].outcome, Some(Outcome::Cancelled));
}

/// What users and the machine do, replayed in virtual time: a hold stops a running job
/// and its time stands still; a cancel ends a waiting job; a failing node ends the job on
/// it and keeps its PEs out of use until it is back.
#[test]
fn operations_hold_cancel_and_fail_nodes() {
    let m = MachineShape::flat(2, 2);
    let mut p = registry::build("fcfs", &PolicyConfig::new(m)).unwrap();
    let s = Time::from_secs;
    let jobs = vec![
        SimJob::exact(1, s(0), 2, Dur::from_secs(10)),
        SimJob::exact(2, s(0), 2, Dur::from_secs(10)),
        SimJob::exact(3, s(1), 4, Dur::from_secs(5)),
        SimJob::exact(4, s(2), 2, Dur::from_secs(5)),
    ];
    let opts = EngineOptions {
        operations: vec![
            (s(3), Operation::Hold(JobId(1))),
            (s(6), Operation::Release(JobId(1))),
            (s(4), Operation::NodeDown(NodeId(1))),
            (s(5), Operation::Cancel(JobId(3))),
            (s(30), Operation::NodeUp(NodeId(1))),
        ],
        ..EngineOptions::default()
    };
    let r = simulate(m, &jobs, p.as_mut(), opts).unwrap();
    let rec = |id: u64| r.records.iter().find(|x| x.id == JobId(id)).unwrap();
    // Job 1 ran 0-3 and 6-13: held for 3 s.
    assert_eq!(
        (rec(1).end, rec(1).suspended),
        (Some(s(13)), Dur::from_secs(3))
    );
    // Job 2 ran on node 1, which failed at 4.
    assert_eq!(rec(2).outcome, Some(Outcome::NodeFailed));
    assert_eq!(rec(2).end, Some(s(4)));
    // Job 3 waited behind the hold and was cancelled without running.
    assert_eq!(
        (rec(3).start, rec(3).outcome),
        (None, Some(Outcome::Cancelled))
    );
    // Job 4 waits: a held job keeps its PEs (node 0, until job 1 ends at 13) and node 1 is
    // down until 30.
    assert_eq!(rec(4).start, Some(s(13)));
    assert_eq!(r.unfinished, 0);
    let bad = EngineOptions {
        operations: vec![(s(1), Operation::Cancel(JobId(99)))],
        ..EngineOptions::default()
    };
    let err = simulate(m, &jobs, p.as_mut(), bad).unwrap_err().to_string();
    assert!(err.contains("99") && err.contains("t=1"), "{err}");
}
