//! Schedule invariants of the space-sharing policies, on random workloads (proptest) and on
//! every trace in ../shared/traces: the machine is never over-committed, no job starts before
//! it is submitted, every job ends exactly its runtime after it starts, EASY never starts the
//! queue head after the reservation it was given, conservative never starts any job after
//! its first reservation (both when estimates are not below runtimes), and runs are
//! deterministic.

use std::collections::HashMap;

use cosched_core::{Dur, JobId, MachineShape, Time};
use cosched_policy::conservative::Conservative;
use cosched_policy::easy::Easy;
use cosched_policy::fcfs::Fcfs;
use cosched_policy::{Decision, Event, MatrixView, Policy, PolicyConfig};
use cosched_sim::trace::{Estimates, Semantics, prepare};
use cosched_sim::{EngineOptions, SimJob, SimResult, simulate};
use cosched_workload::swf::{Oversize, ReadOptions, read_trace};
use proptest::prelude::*;

/// Wraps a policy and remembers the first reservation each job was given.
#[derive(Clone)]
struct Watch<P> {
    inner: P,
    look: fn(&P, Time) -> Vec<(JobId, Time)>,
    promised: HashMap<JobId, Time>,
}

impl<P: Policy + Clone + 'static> Policy for Watch<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn observe(&mut self, now: Time, event: Event) {
        self.inner.observe(now, event);
    }
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.inner.decide(now, out);
        for (id, t) in (self.look)(&self.inner, now) {
            self.promised.entry(id).or_insert(t);
        }
    }
    fn queue(&self) -> Vec<JobId> {
        self.inner.queue()
    }
    fn matrix(&self) -> Option<MatrixView> {
        None
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

fn easy_head(p: &Easy, now: Time) -> Vec<(JobId, Time)> {
    p.reservation(now)
        .into_iter()
        .filter(|r| r.1.shadow != Time::MAX)
        .map(|(id, r)| (id, r.shadow))
        .collect()
}

fn conservative_all(p: &Conservative, _now: Time) -> Vec<(JobId, Time)> {
    p.reservations()
        .into_iter()
        .filter_map(|(id, t)| Some((id, t?)))
        .collect()
}

/// The invariants every space-sharing schedule must satisfy.
fn check_schedule(machine: MachineShape, jobs: &[SimJob], r: &SimResult) {
    assert_eq!(r.unfinished, 0, "{}: jobs left unfinished", r.policy);
    let mut edges = Vec::with_capacity(2 * jobs.len());
    for (j, rec) in jobs.iter().zip(&r.records) {
        let (start, end) = (rec.start.expect("started"), rec.end.expect("ended"));
        assert!(
            start >= j.req.submit,
            "{}: job {} starts at {start} before its submit {}",
            r.policy,
            j.req.id,
            j.req.submit
        );
        assert_eq!(
            end - start,
            j.runtime,
            "{}: job {} did not run exactly its runtime",
            r.policy,
            j.req.id
        );
        assert_eq!(rec.suspended, Dur::ZERO);
        assert_eq!(rec.pes.len(), j.req.procs);
        edges.push((end, 0u8, j.req.procs as i64));
        edges.push((start, 1u8, -(j.req.procs as i64)));
    }
    // Ends before starts at one instant; running total of PEs in use.
    edges.sort();
    let mut used = 0i64;
    for (t, _, delta) in edges {
        used -= delta;
        assert!(
            used <= machine.total_pes() as i64,
            "{}: {used} PEs in use at {t}",
            r.policy
        );
    }
}

fn check_promises(policy: &str, jobs: &[SimJob], r: &SimResult, promised: &HashMap<JobId, Time>) {
    let mut checked = 0;
    for (j, rec) in jobs.iter().zip(&r.records) {
        if let Some(&p) = promised.get(&j.req.id) {
            let start = rec.start.expect("started");
            assert!(
                start <= p,
                "{policy}: job {} promised {p}, started {start}",
                j.req.id
            );
            checked += 1;
        }
    }
    // Not vacuous: on a busy machine many jobs wait for a reservation.
    let waited = r
        .records
        .iter()
        .filter(|x| x.start.unwrap() > x.submit)
        .count();
    assert!(
        waited == 0 || checked > 0,
        "{policy}: jobs waited but no reservation was seen"
    );
}

fn run_all(machine: MachineShape, jobs: &[SimJob], promises: bool) {
    let cfg = PolicyConfig::new(machine);
    let opts = EngineOptions::default();
    let r = simulate(machine, jobs, &mut Fcfs::new(&cfg).unwrap(), opts.clone()).unwrap();
    check_schedule(machine, jobs, &r);

    let mut easy = Watch {
        inner: Easy::new(&cfg).unwrap(),
        look: easy_head,
        promised: HashMap::new(),
    };
    let r = simulate(machine, jobs, &mut easy, opts.clone()).unwrap();
    check_schedule(machine, jobs, &r);
    if promises {
        check_promises("easy", jobs, &r, &easy.promised);
    }

    let mut cons = Watch {
        inner: Conservative::new(&cfg).unwrap(),
        look: conservative_all,
        promised: HashMap::new(),
    };
    let r = simulate(machine, jobs, &mut cons, opts).unwrap();
    check_schedule(machine, jobs, &r);
    if promises {
        check_promises("conservative", jobs, &r, &cons.promised);
    }
}

fn workload() -> impl Strategy<Value = (u32, Vec<SimJob>)> {
    (1u32..=32)
        .prop_flat_map(|pes| {
            let job = (0i64..120, 1u32..=pes, 1i64..2_000, 1i64..=4, any::<bool>());
            (Just(pes), prop::collection::vec(job, 1..80))
        })
        .prop_map(|(pes, raw)| {
            let mut t = 0;
            let jobs = raw
                .into_iter()
                .enumerate()
                .map(|(i, (gap, procs, run, factor, exact))| {
                    t += gap;
                    let est = if exact { run } else { run * factor };
                    SimJob::with_estimate(
                        i as u64 + 1,
                        Time::from_secs(t),
                        procs,
                        Dur::from_secs(run),
                        Dur::from_secs(est),
                    )
                })
                .collect();
            (pes, jobs)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_workloads_keep_the_invariants((pes, jobs) in workload()) {
        run_all(MachineShape::flat(pes, 1), &jobs, true);
    }

    #[test]
    fn runs_are_deterministic((pes, jobs) in workload()) {
        let m = MachineShape::flat(pes, 1);
        let cfg = PolicyConfig::new(m);
        let a = simulate(m, &jobs, &mut Conservative::new(&cfg).unwrap(), EngineOptions::default()).unwrap();
        let b = simulate(m, &jobs, &mut Conservative::new(&cfg).unwrap(), EngineOptions::default()).unwrap();
        prop_assert_eq!(a.records, b.records);
    }
}

/// Found by proptest: two jobs end at one instant and a 9-PE job is due; the first end alone
/// does not free enough PEs. Remaking every reservation there (instead of waiting for the
/// second end) delayed other jobs past their promises.
#[test]
fn simultaneous_ends_keep_conservative_promises() {
    // (submit s, procs, estimate s, runtime s), ids from 1.
    const JOBS: &[(i64, u32, i64, i64)] = &[
        (20, 4, 3584, 896),
        (127, 6, 434, 434),
        (139, 8, 1418, 1418),
        (164, 6, 1108, 1108),
        (204, 2, 657, 657),
        (254, 2, 221, 221),
        (348, 1, 924, 924),
        (371, 9, 66, 66),
        (412, 3, 3237, 1079),
        (508, 5, 1205, 1205),
        (567, 8, 576, 288),
        (653, 4, 1178, 589),
        (708, 2, 3112, 778),
        (816, 2, 2948, 1474),
        (921, 5, 1096, 1096),
        (929, 1, 83, 83),
        (963, 8, 75, 75),
        (1031, 2, 546, 546),
        (1131, 9, 1599, 1599),
        (1230, 3, 1919, 1919),
        (1297, 1, 4929, 1643),
        (1350, 4, 955, 955),
        (1428, 5, 2210, 1105),
        (1489, 8, 2540, 1270),
        (1567, 4, 3108, 1036),
        (1673, 3, 1876, 1876),
        (1753, 6, 4652, 1163),
        (1837, 9, 225, 225),
        (1861, 4, 3856, 1928),
        (1931, 1, 3576, 1788),
        (2021, 2, 489, 489),
        (2035, 2, 619, 619),
        (2061, 3, 1874, 1874),
        (2086, 4, 647, 647),
        (2139, 4, 1803, 1803),
        (2187, 8, 2522, 1261),
        (2281, 9, 1848, 924),
        (2376, 7, 553, 553),
        (2479, 5, 1699, 1699),
        (2480, 1, 421, 421),
        (2582, 3, 3225, 1075),
        (2616, 4, 1490, 745),
        (2625, 4, 1282, 1282),
        (2631, 8, 1621, 1621),
        (2720, 4, 1643, 1643),
        (2813, 5, 1413, 1413),
        (2840, 2, 472, 472),
        (2848, 4, 2124, 531),
        (2957, 2, 866, 866),
        (3017, 8, 612, 612),
        (3104, 8, 328, 328),
        (3135, 3, 1433, 1433),
    ];
    let jobs: Vec<SimJob> = JOBS
        .iter()
        .enumerate()
        .map(|(i, &(t, p, est, run))| {
            SimJob::with_estimate(
                i as u64 + 1,
                Time::from_secs(t),
                p,
                Dur::from_secs(run),
                Dur::from_secs(est),
            )
        })
        .collect();
    run_all(MachineShape::flat(9, 1), &jobs, true);
}

/// Estimates below runtimes (users underestimate): promises may slip, but the schedule
/// invariants must hold.
#[test]
fn underestimates_keep_the_schedule_invariants() {
    let jobs: Vec<SimJob> = (0..300u64)
        .map(|i| {
            let run = 10 + (i * 7919 % 1000) as i64;
            let est = if i % 3 == 0 { run / 4 + 1 } else { run * 2 };
            SimJob::with_estimate(
                i + 1,
                Time::from_secs(i as i64 * 13),
                1 + (i * 31 % 16) as u32,
                Dur::from_secs(run),
                Dur::from_secs(est),
            )
        })
        .collect();
    run_all(MachineShape::flat(16, 1), &jobs, false);
}

#[test]
fn every_shared_trace_keeps_the_invariants() {
    let Some(dir) = cosched_workload::shared::traces_dir("trace invariants") else {
        return;
    };
    let entries = std::fs::read_dir(&dir).unwrap();
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".swf"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no traces in {}", dir.display());
    for path in paths {
        let opts = ReadOptions {
            oversize: Oversize::Skip,
            lenient: true,
            ..ReadOptions::default()
        };
        let trace = read_trace(&path, &opts).unwrap();
        let m = MachineShape::flat(trace.procs, 1);
        // The trace's own estimates: whole trace, every policy, schedule invariants.
        let w = prepare(&trace.records, trace.procs, &Semantics::default(), None);
        eprintln!("{}: {} jobs", path.display(), w.jobs.len());
        run_all(m, &w.jobs, w.overrunning == 0);
        // Exact estimates: the reservation promises, on the first 40,000 jobs.
        let exact = Semantics {
            estimates: Estimates::Exact,
            ..Semantics::default()
        };
        let n = trace.records.len().min(40_000);
        let w = prepare(&trace.records[..n], trace.procs, &exact, None);
        run_all(m, &w.jobs, true);
    }
}
