//! Agreement of the simulator's `easy` and `fcfs` with an independent textbook EASY / FCFS
//!: for every trace in ../shared/traces and both policies, run `cosched sim`'s
//! pipeline (default trace semantics, `flat(procs, 1)`, the registry's policy) and the
//! reference in `reference_support`, compare the start time of every job, print the agreement
//! and the first disagreements, and require at least 99 % agreement.
//!
//! Each trace case also prints diagnostics that classify the disagreements: how often the
//! simulator matches the reference run with one or both of two departures from it (deciding
//! after every single event instead of once per instant; counting the extra PEs only up to the
//! first release that makes the head fit). docs/sim.md, "Agreement with a textbook EASY",
//! records the figures.
//!
//! The reference itself is checked first, on small hand-built workloads whose schedules are
//! worked out by hand in the comments.

mod reference_support;

use std::path::PathBuf;
use std::time::Instant;

use cosched_core::{Dur, MachineShape, Time};
use cosched_policy::registry;
use cosched_policy::{PolicyOptions, policy_config};
use cosched_report::setup::Source;
use cosched_sim::trace::Semantics;
use cosched_sim::{EngineOptions, SimJob, simulate};
use cosched_workload::swf::{Oversize, ReadOptions};
use reference_support::{Extra, Granularity, REFERENCE, Rule, Variant, schedule, schedule_variant};

use cosched_workload::notice;

/// The agreement the simulator must reach on every trace.
const TARGET: f64 = 0.99;

fn job(id: u64, submit: i64, procs: u32, runtime: i64, estimate: i64) -> SimJob {
    SimJob::with_estimate(
        id,
        Time::from_secs(submit),
        procs,
        Dur::from_secs(runtime),
        Dur::from_secs(estimate),
    )
}

/// Deciding after every single event (a diagnostic variant).
const PER_EVENT: Variant = Variant {
    granularity: Granularity::PerEvent,
    ..REFERENCE
};

/// Extra PEs counted only up to the first release that makes the head fit (a diagnostic).
const FIRST_RELEASE: Variant = Variant {
    extra: Extra::FirstRelease,
    ..REFERENCE
};

/// Both departures at once: how a simulator that decides after each event and frees a job's PEs
/// at its first completion drives `easy` (main at 524c1a7 matches it on every job of the three shared traces).
const PER_EVENT_FIRST_RELEASE: Variant = Variant {
    granularity: Granularity::PerEvent,
    extra: Extra::FirstRelease,
};

fn starts_secs(procs: u32, jobs: &[SimJob], rule: Rule, v: Variant) -> Vec<(u64, i64)> {
    schedule_variant(procs, jobs, rule, v)
        .into_iter()
        .zip(jobs)
        .map(|(s, j)| (j.req.id.0, s.expect("every job starts").as_secs()))
        .collect()
}

/// Two jobs end at the same instant while a short job waits behind a blocked head.
///
/// 10 PEs. At 0, A (4 PEs, ends 100, estimate 100), B (4 PEs, ends 100, estimate 200) and
/// C (2 PEs, ends 300) start; the machine is full. D (8 PEs) arrives at 1 and is the head; E
/// (2 PEs, 10 s) arrives at 2 and waits (nothing free). At 100 A and B end together: 8 PEs are
/// free, so D starts at 100 and E, which no longer fits, waits for D's end at 150.
///
/// Deciding after each end instead (the diagnostic) gives another schedule: after A's end
/// alone 4 PEs are free, D does not fit, its shadow is B's expected end 200, and E (ends at
/// 110 <= 200) is backfilled at 100; after B's end only 6 PEs are free, so D waits for E
/// until 110.
#[test]
fn reference_applies_all_ends_of_an_instant_before_deciding() {
    let jobs = vec![
        job(1, 0, 4, 100, 100),
        job(2, 0, 4, 100, 200),
        job(3, 0, 2, 300, 300),
        job(4, 1, 8, 50, 50),
        job(5, 2, 2, 10, 10),
    ];
    assert_eq!(
        starts_secs(10, &jobs, Rule::Easy, REFERENCE),
        vec![(1, 0), (2, 0), (3, 0), (4, 100), (5, 150)]
    );
    assert_eq!(
        starts_secs(10, &jobs, Rule::Easy, PER_EVENT),
        vec![(1, 0), (2, 0), (3, 0), (4, 110), (5, 100)]
    );
    // FCFS never lets E pass D.
    assert_eq!(
        starts_secs(10, &jobs, Rule::Fcfs, REFERENCE),
        vec![(1, 0), (2, 0), (3, 0), (4, 100), (5, 150)]
    );
}

/// Both backfilling conditions, a job past its estimate, and the extra PEs.
///
/// 12 PEs. At 0: A (6 PEs, 100 s, estimate 100) and B (2 PEs, runs 300 s but estimates 50)
/// start; 4 PEs free. At 10 H (10 PEs, 100 s) arrives with X (3 PEs, 200 s), S (2 PEs, 80 s)
/// and W (2 PEs, 500 s), all exact estimates, in that id order.
/// - H does not fit. Expected ends: B at 50 (4 + 2 = 6 free), A at 100 (12 free): shadow 100,
///   extra 12 - 10 = 2.
/// - X fits (3 <= 4) but ends at 210 > 100 and 3 > extra 2: waits.
/// - S fits, ends at 90 <= 100: starts at 10 (extra stays 2); 2 PEs free.
/// - W fits (2 <= 2), ends at 510 > 100, but 2 <= extra: starts at 10; extra 0, none free.
///
/// Y (1 PE, 5 s) arrives at 20: nothing free. At 90 S ends (2 free). H's shadow: B is past
/// its estimate, expected to end now (90): 4 free; A at 100: 10 free: shadow 100, extra 0.
/// X (3 > 2) cannot start; Y fits and ends at 95 <= 100: starts at 90. At 100 A ends: 8 free,
/// B expected now: 10 at 100, shadow 100, extra 0; X fits but ends at 300 and 3 > 0: waits.
/// At 300 B ends: H starts (10 PEs). At 400 H ends: X starts.
///
/// FCFS: H starts at 100 when A ends (10 free); X, S, W and Y all start at 200, when H ends.
#[test]
fn reference_backfills_by_shadow_and_by_extra_pes() {
    let jobs = vec![
        job(1, 0, 6, 100, 100),   // A
        job(2, 0, 2, 300, 50),    // B
        job(3, 10, 10, 100, 100), // H
        job(4, 10, 3, 200, 200),  // X
        job(5, 10, 2, 80, 80),    // S
        job(6, 10, 2, 500, 500),  // W
        job(7, 20, 1, 5, 5),      // Y
    ];
    assert_eq!(
        starts_secs(12, &jobs, Rule::Easy, REFERENCE),
        vec![
            (1, 0),
            (2, 0),
            (3, 300),
            (4, 400),
            (5, 10),
            (6, 10),
            (7, 90)
        ]
    );
    assert_eq!(
        starts_secs(12, &jobs, Rule::Fcfs, REFERENCE),
        vec![
            (1, 0),
            (2, 0),
            (3, 100),
            (4, 200),
            (5, 200),
            (6, 200),
            (7, 200)
        ]
    );
}

/// The extra PEs count every job expected to end by the shadow time, not only those needed
/// to reach the head's size.
///
/// 10 PEs. A and B (4 PEs each, 100 s) start at 0; 2 free. At 1 H (6 PEs) is the head: A's
/// end at 100 already gives 6 free, so the shadow is 100, but B ends then too: 10 free at the
/// shadow, extra 4. W (2 PEs, 1000 s) then starts at 1 on the extra PEs. At 100 H starts
/// (8 free). Stopping the count at A would give extra 0 and keep W waiting until H has started at 100.
#[test]
fn reference_extra_pes_count_every_job_ending_by_the_shadow() {
    let jobs = vec![
        job(1, 0, 4, 100, 100),
        job(2, 0, 4, 100, 100),
        job(3, 1, 6, 1, 1),
        job(4, 1, 2, 1000, 1000),
    ];
    assert_eq!(
        starts_secs(10, &jobs, Rule::Easy, REFERENCE),
        vec![(1, 0), (2, 0), (3, 100), (4, 1)]
    );
    assert_eq!(
        starts_secs(10, &jobs, Rule::Easy, FIRST_RELEASE),
        vec![(1, 0), (2, 0), (3, 100), (4, 100)]
    );
}

/// A time limit cuts the job's hold on its PEs, as in the simulator.
#[test]
fn reference_honours_time_limits() {
    let mut a = job(1, 0, 4, 1000, 100);
    a.limit = Some(Dur::from_secs(100));
    let jobs = vec![a, job(2, 5, 4, 10, 10)];
    assert_eq!(
        starts_secs(4, &jobs, Rule::Fcfs, REFERENCE),
        vec![(1, 0), (2, 100)]
    );
}

fn traces_dir() -> Option<PathBuf> {
    cosched_workload::shared::traces_dir("agreement with the textbook EASY/FCFS")
}

/// Runs `policy` through the simulator exactly as `cosched sim --trace FILE --policy NAME`
/// does with its defaults, runs the reference on the same jobs, prints the comparison and
/// checks the agreement.
fn agreement(file: &str, policy: &str) {
    let Some(dir) = traces_dir() else { return };
    let path = dir.join(file);
    if !path.is_file() {
        notice!(
            "NOTICE: {} is absent; agreement of {policy} not measured on it",
            path.display()
        );
        return;
    }
    let clock = Instant::now();
    // `cosched sim`'s defaults: oversize jobs skipped, strict parsing, default semantics.
    let read = ReadOptions {
        oversize: Oversize::Skip,
        ..ReadOptions::default()
    };
    let src = Source::trace(&path, &read, None).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (workload, _) = src.workload(&Semantics::default(), None, None);
    let jobs = &workload.jobs;
    let machine = MachineShape::flat(src.procs(), 1);
    let cfg = policy_config(machine, &PolicyOptions::default()).unwrap();
    let mut p = registry::build(policy, &cfg).unwrap();
    let t_read = clock.elapsed();
    let sim = simulate(machine, jobs, p.as_mut(), EngineOptions::default()).unwrap();
    let t_sim = clock.elapsed() - t_read;
    let rule = match policy {
        "easy" => Rule::Easy,
        "fcfs" => Rule::Fcfs,
        other => panic!("no reference for {other}"),
    };
    let reference = schedule(src.procs(), jobs, rule);
    let t_ref = clock.elapsed() - t_read - t_sim;
    // The diagnostics: each departure from the reference alone, and both (today's driver).
    let per_event = schedule_variant(src.procs(), jobs, rule, PER_EVENT);
    let first_release = schedule_variant(src.procs(), jobs, rule, FIRST_RELEASE);
    let both = schedule_variant(src.procs(), jobs, rule, PER_EVENT_FIRST_RELEASE);

    let sim_starts: Vec<Option<Time>> = sim.records.iter().map(|r| r.start).collect();
    let n = jobs.len();
    let pct = |a: &[Option<Time>], b: &[Option<Time>]| {
        100.0 * a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / n as f64
    };
    let agree = sim_starts
        .iter()
        .zip(&reference)
        .filter(|(x, y)| x == y)
        .count();
    let fraction = agree as f64 / n as f64;
    eprintln!(
        "{file} {policy}: {agree} of {n} jobs start as in the textbook {policy} ({:.2} %) \
         (read {:.1} s, simulate {:.1} s, reference {:.1} s)",
        100.0 * fraction,
        t_read.as_secs_f64(),
        t_sim.as_secs_f64(),
        t_ref.as_secs_f64(),
    );
    eprintln!(
        "  diagnostics: the simulator starts {:.2} % of the jobs as the reference run per event, \
         {:.2} % as the reference with extra PEs at the first release, {:.2} % as with both; \
         the reference itself starts {:.2} % as per event, {:.2} % as with extra at the first release",
        pct(&sim_starts, &per_event),
        pct(&sim_starts, &first_release),
        pct(&sim_starts, &both),
        pct(&reference, &per_event),
        pct(&reference, &first_release),
    );
    // The first disagreements in time: later ones are mostly their consequences.
    let mut differ: Vec<usize> = (0..n).filter(|&i| sim_starts[i] != reference[i]).collect();
    differ.sort_by_key(|&i| (sim_starts[i].min(reference[i]), jobs[i].req.id));
    let secs = |t: Option<Time>| t.map_or("never".to_string(), |t| t.as_secs().to_string());
    for &i in differ.iter().take(5) {
        let j = &jobs[i];
        eprintln!(
            "  job {}: submit {} s, {} PEs, estimate {} s, runtime {} s: starts at {} in the simulator, \
             {} in the reference (per event {}, extra at the first release {})",
            j.req.id.0,
            j.req.submit.as_secs(),
            j.req.procs,
            j.req.estimate.as_secs(),
            j.runtime.as_secs(),
            secs(sim_starts[i]),
            secs(reference[i]),
            secs(per_event[i]),
            secs(first_release[i]),
        );
    }
    assert!(
        fraction >= TARGET,
        "{file}: {policy} agrees with the textbook {policy} on {:.2} % of the jobs, below {:.0} %",
        100.0 * fraction,
        100.0 * TARGET
    );
}

#[test]
fn kth_sp2_easy_agrees_with_the_textbook() {
    agreement("KTH-SP2-1996-2.1-cln.swf.gz", "easy");
}

#[test]
fn kth_sp2_fcfs_agrees_with_the_textbook() {
    agreement("KTH-SP2-1996-2.1-cln.swf.gz", "fcfs");
}

#[test]
fn sdsc_blue_easy_agrees_with_the_textbook() {
    agreement("SDSC-BLUE-2000-4.2-cln.swf.gz", "easy");
}

#[test]
fn sdsc_blue_fcfs_agrees_with_the_textbook() {
    agreement("SDSC-BLUE-2000-4.2-cln.swf.gz", "fcfs");
}

#[test]
fn hpc2n_easy_agrees_with_the_textbook() {
    agreement("HPC2N-2002-2.1-cln.swf.gz", "easy");
}

#[test]
fn hpc2n_fcfs_agrees_with_the_textbook() {
    agreement("HPC2N-2002-2.1-cln.swf.gz", "fcfs");
}
