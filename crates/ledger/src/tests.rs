use super::*;

fn s(t: i64) -> Time {
    Time::from_secs(t)
}

fn ledger(pes: u32, jobs: &[(u64, u32)], migration: bool) -> Ledger {
    let mut l = Ledger::new("test", MachineShape::flat(pes, 1), migration);
    for &(id, procs) in jobs {
        let i = l
            .add(JobRequest::new(
                JobId(id),
                Time::ZERO,
                procs,
                Dur::from_secs(100),
            ))
            .unwrap();
        l.submit(i, Time::ZERO);
    }
    l
}

fn start(id: u64, first: u32, n: u32) -> Decision {
    Decision::Start {
        job: JobId(id),
        pes: PeSet::contiguous(first, n),
        slot: None,
    }
}

#[test]
fn suspended_time_and_run_time_are_accounted() {
    let mut l = ledger(2, &[(1, 2)], true);
    assert_eq!(
        l.apply(s(0), start(1, 0, 2)).unwrap(),
        Change::Runs {
            job: 0,
            launch: true
        }
    );
    assert_eq!(
        l.apply(s(3), Decision::Suspend { job: JobId(1) }).unwrap(),
        Change::Stops { job: 0 }
    );
    assert_eq!(
        l.apply(s(5), Decision::Resume { job: JobId(1) }).unwrap(),
        Change::Runs {
            job: 0,
            launch: false
        }
    );
    assert_eq!(l.entry(0).ran(s(6)), Dur::from_secs(4));
    assert!(l.end(0, s(9), Outcome::Completed, Some(0)));
    let r = l.record(0);
    assert_eq!((r.start, r.end), (Some(s(0)), Some(s(9))));
    assert_eq!(r.suspended, Dur::from_secs(2));
    assert_eq!(l.entry(0).ran(s(20)), Dur::from_secs(7));
    assert_eq!(l.running(), 0);
}

#[test]
fn a_hold_stops_a_running_job_until_released() {
    let mut l = ledger(2, &[(1, 2), (2, 2)], true);
    l.apply(s(0), start(1, 0, 2)).unwrap();
    assert_eq!(l.hold(0, s(2)), Change::Stops { job: 0 });
    // The policy still has it running: its PEs stay taken.
    let err = l.apply(s(3), start(2, 0, 2)).unwrap_err().to_string();
    assert!(err.contains("another job runs"), "{err}");
    // Decisions about a held job change its phase but run nothing.
    assert_eq!(
        l.apply(s(3), Decision::Suspend { job: JobId(1) }).unwrap(),
        Change::None
    );
    assert_eq!(
        l.apply(s(4), Decision::Resume { job: JobId(1) }).unwrap(),
        Change::None
    );
    // While held, the view counts the stop so far; the record takes it in at release.
    assert_eq!(l.entry(0).suspended(s(5)), Dur::from_secs(3));
    assert_eq!(l.record(0).suspended, Dur::ZERO);
    assert_eq!(
        l.release(0, s(6)),
        Change::Runs {
            job: 0,
            launch: false
        }
    );
    l.end(0, s(10), Outcome::Completed, None);
    assert_eq!(l.record(0).suspended, Dur::from_secs(4));
    assert_eq!(
        l.entry(0).suspended(s(20)),
        Dur::from_secs(4),
        "ended: no more accrues"
    );
    assert_eq!(l.entry(0).ran(s(10)), Dur::from_secs(6));
    // A held waiting job must not start.
    l.hold(1, s(10));
    let err = l.apply(s(11), start(2, 0, 2)).unwrap_err().to_string();
    assert!(err.contains("held") && err.contains("job 2"), "{err}");
}

#[test]
fn preempted_jobs_move_only_where_migration_is_on() {
    for migration in [true, false] {
        let mut l = ledger(4, &[(1, 2)], migration);
        l.apply(s(0), start(1, 0, 2)).unwrap();
        assert_eq!(
            l.apply(s(5), Decision::Preempt { job: JobId(1) }).unwrap(),
            Change::Stops { job: 0 }
        );
        assert_eq!(l.entry(0).phase(), Phase::Waiting);
        let moved = l.apply(s(8), start(1, 2, 2));
        if migration {
            assert_eq!(
                moved.unwrap(),
                Change::Runs {
                    job: 0,
                    launch: false
                }
            );
            assert_eq!(l.record(0).preemptions, 1);
            assert_eq!(l.record(0).suspended, Dur::from_secs(3));
        } else {
            let err = moved.unwrap_err().to_string();
            assert!(err.contains("migration is off"), "{err}");
            assert_eq!(
                l.apply(s(8), start(1, 0, 2)).unwrap(),
                Change::Runs {
                    job: 0,
                    launch: false
                }
            );
        }
    }
}

/// Where a preempted job must come back is kept beside the entries: a start refused for a
/// clash puts it back, and an ended job leaves nothing behind.
#[test]
fn a_preempted_job_keeps_its_pes_through_a_refused_start_until_it_ends() {
    let mut l = ledger(4, &[(1, 2), (2, 2)], false);
    l.apply(s(0), start(1, 0, 2)).unwrap();
    l.apply(s(5), Decision::Preempt { job: JobId(1) }).unwrap();
    l.apply(s(6), start(2, 0, 2)).unwrap();
    let err = l.apply(s(7), start(1, 0, 2)).unwrap_err().to_string();
    assert!(err.contains("another job runs on"), "{err}");
    let err = l.apply(s(7), start(1, 2, 2)).unwrap_err().to_string();
    assert!(err.contains("migration is off"), "{err}");
    l.end(1, s(8), Outcome::Completed, Some(0));
    l.apply(s(8), start(1, 0, 2)).unwrap();
    assert!(l.preempted_on.0.is_empty());
    l.end(0, s(9), Outcome::Completed, Some(0));
    assert_eq!(l.record(0).suspended, Dur::from_secs(3));
    assert_eq!(l.record(0).pes, PeSet::contiguous(0, 2));
}

/// An entry and a record per job of a trace: their size is the simulator's memory traffic
/// per job, so it is pinned (the preemption PEs live beside the entries, the stop time shares
/// `since`, the records are a vector of their own; a request's node spread is boxed, one word
/// for the jobs that have none).
#[test]
fn an_entry_stays_small() {
    let (entry, record) = (
        std::mem::size_of::<Entry>(),
        std::mem::size_of::<JobRecord>(),
    );
    assert!(entry <= 160 && entry + record <= 272, "{entry} + {record}");
}

/// The records given back at the end are those the entries' views show, in order.
#[test]
fn records_are_the_views_records_in_order() {
    let mut l = ledger(4, &[(5, 1), (3, 2), (9, 1)], true);
    l.apply(s(1), start(3, 0, 2)).unwrap();
    l.end(1, s(4), Outcome::Completed, Some(0));
    l.apply(s(2), start(9, 2, 1)).unwrap();
    assert_eq!(l.entry(2).suspended(s(3)), Dur::ZERO);
    l.apply(s(3), Decision::Suspend { job: JobId(9) }).unwrap();
    assert_eq!(l.entry(2).suspended(s(5)), Dur::from_secs(2));
    let views: Vec<JobRecord> = (0..3).map(|i| l.entry(i).record().clone()).collect();
    assert_eq!(l.records().cloned().collect::<Vec<_>>(), views);
    let ids: Vec<u64> = views.iter().map(|r| r.id.0).collect();
    assert_eq!(ids, [5, 3, 9]);
    assert_eq!(views[1].end, Some(s(4)));
    assert_eq!(l.into_records(), views);
}

#[test]
fn broken_promises_name_policy_job_and_time() {
    let mut l = Ledger::new("script", MachineShape::flat(2, 1), true);
    l.add(JobRequest::new(JobId(7), s(5), 1, Dur::from_secs(1)))
        .unwrap();
    let err = l.apply(s(0), start(7, 0, 1)).unwrap_err().to_string();
    assert!(
        err.contains("script")
            && err.contains("job 7")
            && err.contains("t=0")
            && err.contains("not submitted"),
        "{err}"
    );
    let err = l
        .apply(s(0), Decision::Resume { job: JobId(99) })
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown job"), "{err}");
    assert!(matches!(
        l.add(JobRequest::new(JobId(7), s(5), 1, Dur::from_secs(1))),
        Err(e) if matches!(e.refusal(), Refusal::DuplicateJob { .. })
    ));
    l.submit(0, s(5));
    let err = l.apply(s(5), start(7, 1, 2)).unwrap_err().to_string();
    assert!(err.contains("outside the machine"), "{err}");
}

/// A start refused because another job runs on its PEs leaves the job waiting with no PEs,
/// so a driver that goes on (the machine manager) can start it elsewhere later.
#[test]
fn a_refused_start_leaves_the_job_as_it_was() {
    let mut l = ledger(4, &[(1, 2), (2, 2)], false);
    l.apply(s(1), start(1, 0, 2)).unwrap();
    let err = l.apply(s(1), start(2, 1, 2)).unwrap_err().to_string();
    assert!(err.contains("another job runs on"), "{err}");
    let e = l.entry(1);
    assert!(e.pes().is_empty(), "{:?}", e.pes());
    assert_eq!(e.record().start, None);
    l.apply(s(2), start(2, 2, 2)).unwrap();
    assert_eq!(l.entry(1).pes(), &PeSet::contiguous(2, 2));
}

#[test]
fn kill_and_reject_end_jobs_with_their_outcomes() {
    let mut l = ledger(4, &[(1, 2), (2, 8)], true);
    l.apply(s(0), start(1, 0, 2)).unwrap();
    assert_eq!(
        l.apply(s(4), Decision::Kill { job: JobId(1) }).unwrap(),
        Change::Ends { job: 0 }
    );
    assert_eq!(l.record(0).outcome, Some(Outcome::Cancelled));
    let reject = Decision::Reject {
        job: JobId(2),
        why: cosched_policy::Never::TooLarge {
            procs: 8,
            machine: 4,
        },
    };
    assert_eq!(
        l.apply(s(4), reject.clone()).unwrap(),
        Change::Ends { job: 1 }
    );
    assert_eq!(l.record(1).outcome, Some(Outcome::Rejected));
    assert_eq!(l.record(1).start, None);
    let err = l.apply(s(5), reject).unwrap_err().to_string();
    assert!(err.contains("already ended"), "{err}");
    assert_eq!(l.ended(), 2);
}

#[test]
fn nothing_is_given_pes_on_a_down_node() {
    let mut l = Ledger::new("t", MachineShape::flat(2, 2), true);
    for id in 1..=2 {
        let i = l
            .add(JobRequest::new(JobId(id), Time::ZERO, 2, Dur::from_secs(9)))
            .unwrap();
        l.submit(i, Time::ZERO);
    }
    l.apply(s(0), start(1, 0, 2)).unwrap();
    assert_eq!(l.node_down(NodeId(0)), vec![0]);
    assert!(l.is_down(NodeId(0)) && !l.is_down(NodeId(1)));
    l.end(0, s(1), Outcome::NodeFailed, None);
    let err = l.apply(s(2), start(2, 0, 2)).unwrap_err().to_string();
    assert!(err.contains("down"), "{err}");
    l.node_up(NodeId(0));
    assert!(l.apply(s(3), start(2, 0, 2)).is_ok());
}

/// Without migration a preempted job's stopped processes stay on its old PEs: a failure of
/// their node loses the job, though it holds no PEs. With migration it is not tied to them.
#[test]
fn a_node_failure_loses_the_jobs_preempted_there_without_migration() {
    for migration in [false, true] {
        // Two nodes of two PEs: job 1 on node 0, job 2 on node 1.
        let mut l = Ledger::new("t", MachineShape::flat(2, 2), migration);
        for id in 1..=2 {
            let i = l
                .add(JobRequest::new(JobId(id), Time::ZERO, 2, Dur::from_secs(9)))
                .unwrap();
            l.submit(i, Time::ZERO);
        }
        l.apply(s(0), start(1, 0, 2)).unwrap();
        l.apply(s(0), start(2, 2, 2)).unwrap();
        l.apply(s(1), Decision::Preempt { job: JobId(1) }).unwrap();
        l.apply(s(1), Decision::Preempt { job: JobId(2) }).unwrap();
        let lost = l.node_down(NodeId(0));
        let want: Vec<Ix> = if migration { vec![] } else { vec![0] };
        assert_eq!(lost, want, "migration = {migration}");
    }
}

#[test]
fn requeue_starts_over() {
    let mut l = ledger(2, &[(1, 2)], false);
    l.apply(s(0), start(1, 0, 2)).unwrap();
    l.requeue(0, s(5));
    assert_eq!(l.entry(0).phase(), Phase::Waiting);
    assert_eq!(l.running(), 0);
    assert_eq!(
        l.apply(s(6), start(1, 0, 2)).unwrap(),
        Change::Runs {
            job: 0,
            launch: true
        }
    );
    assert_eq!(l.record(0).start, Some(s(6)));
    assert_eq!(l.limit_reached_at(0, Dur::from_secs(10)), Some(s(16)));
}

/// A driver holds back a job it has not submitted (a dependency, a begin time): it may hold
/// it, submit it held, or end it without the policy ever seeing it.
#[test]
fn a_future_job_may_be_held_and_ended_before_submission() {
    let mut l = Ledger::new("test", MachineShape::flat(2, 1), false);
    let req = |id| JobRequest::new(JobId(id), Time::ZERO, 1, Dur::from_secs(100));
    let a = l.add(req(1)).unwrap();
    let b = l.add(req(2)).unwrap();
    assert_eq!(l.hold(a, s(1)), Change::None);
    assert!(l.entry(a).held() && l.entry(a).phase() == Phase::Future);
    l.submit(a, s(2));
    assert_eq!(l.entry(a).phase(), Phase::Waiting);
    assert!(l.entry(a).held(), "submitted held");
    assert!(
        l.apply(s(2), start(1, 0, 1)).is_err(),
        "a held job cannot start"
    );
    assert!(!l.end(b, s(3), Outcome::Cancelled, None), "no processes");
    assert_eq!(l.entry(b).phase(), Phase::Ended);
    assert_eq!((l.record(b).start, l.record(b).end), (None, Some(s(3))));
    assert_eq!(l.ended(), 1);
}

/// A node scheme runs a job the policy only placed (its row is not active): once the driver
/// reports what the processes do, start, run and suspended time follow the reports, while the
/// phase (and the contract checked on it) still follows the policy.
#[test]
fn reported_run_state_drives_the_accounting_not_the_phase() {
    let mut l = ledger(2, &[(1, 2), (2, 2)], true);
    let place = Decision::Place {
        job: JobId(2),
        pes: PeSet::contiguous(0, 2),
        slot: Some(1),
    };
    l.apply(s(0), start(1, 0, 2)).unwrap();
    assert_eq!(l.apply(s(0), place).unwrap(), Change::Placed { job: 1 });
    // Before any report, a placed job is stopped and has not started.
    assert_eq!(l.entry(1).record().start, None);
    l.report_runs(1, s(1), true);
    assert_eq!(l.entry(1).phase(), Phase::Stopped);
    assert_eq!(l.entry(1).running_since(), Some(s(1)));
    assert_eq!(l.limit_reached_at(1, Dur::from_secs(10)), Some(s(11)));
    // Once the node reports runs, the policy's switches do not move its accounting...
    l.apply(s(2), Decision::Suspend { job: JobId(1) }).unwrap();
    l.apply(s(2), Decision::Resume { job: JobId(2) }).unwrap();
    l.apply(s(4), Decision::Suspend { job: JobId(2) }).unwrap();
    assert_eq!(l.entry(1).ran(s(5)), Dur::from_secs(4));
    // ...the reported stops do.
    l.report_runs(1, s(5), false);
    l.report_runs(1, s(5), false);
    l.report_runs(1, s(7), true);
    assert_eq!(l.entry(1).suspended(s(7)), Dur::from_secs(2));
    l.end(1, s(8), Outcome::Completed, Some(0));
    let r = l.record(1);
    assert_eq!((r.start, r.end), (Some(s(1)), Some(s(8))));
    assert_eq!(r.suspended, Dur::from_secs(2));
    assert_eq!(l.entry(1).ran(s(20)), Dur::from_secs(5));
    // A job without reports is accounted from the policy's decisions: suspended since 2.
    l.end(0, s(8), Outcome::Completed, Some(0));
    assert_eq!(l.record(0).suspended, Dur::from_secs(6));
    // A report about an ended job changes nothing.
    l.report_runs(1, s(9), false);
    assert_eq!(l.record(1).suspended, Dur::from_secs(2));
}

/// A job the policy started runs, for accounting, from the driver's first report that its
/// processes run (they exist only once the launch reached its nodes), not from the decision,
/// whatever the policy switched meanwhile; a later report of the same state moves nothing.
#[test]
fn a_started_job_runs_from_the_first_report_that_its_processes_run() {
    let mut l = ledger(2, &[(1, 2)], true);
    l.apply(s(0), start(1, 0, 2)).unwrap();
    assert_eq!(l.entry(0).running_since(), Some(s(0)));
    l.apply(s(1), Decision::Suspend { job: JobId(1) }).unwrap();
    l.apply(s(1), Decision::Resume { job: JobId(1) }).unwrap();
    assert_eq!(l.entry(0).ran(s(1)), Dur::from_secs(1));
    l.report_runs(0, s(2), true);
    assert_eq!(l.entry(0).ran(s(2)), Dur::ZERO);
    assert_eq!(l.entry(0).running_since(), Some(s(2)));
    l.report_runs(0, s(3), true);
    assert_eq!(l.entry(0).running_since(), Some(s(2)));
    l.report_runs(0, s(4), false);
    l.report_runs(0, s(5), true);
    l.end(0, s(9), Outcome::Completed, Some(0));
    assert_eq!(l.entry(0).ran(s(20)), Dur::from_secs(6));
    assert_eq!(l.record(0).suspended, Dur::from_secs(1));
    // The start of the job is the decision's.
    assert_eq!(l.record(0).start, Some(s(0)));
}

/// Under gang scheduling the policy may stop a job before the driver's first report, dated
/// earlier, says its processes began: the processes ran from the report's time, the policy's
/// stop never happened, and the suspended time is the reported stops' alone (a negative
/// stretch would book the job as running longer than it lived unstopped).
#[test]
fn a_first_report_dated_before_the_policys_stop_books_no_negative_suspension() {
    let mut l = ledger(1, &[(1, 1)], true);
    l.apply(s(0), start(1, 0, 1)).unwrap();
    l.apply(s(3), Decision::Suspend { job: JobId(1) }).unwrap();
    l.report_runs(0, s(1), true);
    assert_eq!(l.entry(0).suspended(s(1)), Dur::ZERO);
    l.report_runs(0, s(3), false);
    l.apply(s(5), Decision::Resume { job: JobId(1) }).unwrap();
    l.report_runs(0, s(5), true);
    l.end(0, s(7), Outcome::Completed, Some(0));
    assert_eq!(l.record(0).suspended, Dur::from_secs(2));
    assert_eq!(l.entry(0).ran(s(20)), Dur::from_secs(4));
}

/// A gang node launches a job ahead of its slot and holds it: the report that its processes
/// began, and that they were stopped, reaches the ledger after the policy started the job
/// at its slot. Nothing before the start is booked, so run time plus suspended time is
/// still the time from start to end.
#[test]
fn reports_dated_before_the_start_are_booked_at_the_start() {
    let mut l = ledger(2, &[(1, 1), (2, 1)], true);
    l.apply(s(0), start(1, 0, 1)).unwrap();
    let place = Decision::Place {
        job: JobId(2),
        pes: PeSet::contiguous(0, 1),
        slot: Some(1),
    };
    l.apply(s(0), place).unwrap();
    l.apply(s(2), Decision::Suspend { job: JobId(1) }).unwrap();
    l.apply(s(2), Decision::Resume { job: JobId(2) }).unwrap();
    l.report_runs(1, s(1), true);
    l.report_runs(1, s(1), false);
    l.report_runs(1, s(2), true);
    assert_eq!(l.entry(1).suspended(s(2)), Dur::ZERO);
    l.report_runs(1, s(4), false);
    l.report_runs(1, s(6), true);
    l.end(1, s(7), Outcome::Completed, Some(0));
    let r = l.record(1);
    assert_eq!((r.start, r.suspended), (Some(s(2)), Dur::from_secs(2)));
    assert_eq!(l.entry(1).ran(s(20)), Dur::from_secs(3));
}

/// A seeded stream of choices for the random matrices.
struct Rng(rand_pcg::Pcg64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        rand::RngExt::random_range(&mut self.0, 0..n)
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// [`Ledger::switch`] leaves the state, refuses at the decision and reports the stops and
/// runs that [`Ledger::apply`] of each decision in turn gives, on random gang matrices (rows
/// of blocks with holes) with holds, driver reports, clashing resumes and refused decisions.
#[test]
fn a_switch_is_its_decisions_one_by_one() {
    let mut refusals = 0;
    let mut moves = 0;
    for seed in 1..=300u64 {
        let mut rng = Rng(rand::SeedableRng::seed_from_u64(seed));
        let pes = 8 + rng.below(120) as u32;
        let rows = 1 + rng.below(4) as u32;
        // (id, first PE, PEs, row)
        let mut blocks = Vec::new();
        for row in 0..rows {
            let mut at = 0;
            while at < pes {
                let n = 1 + rng.below(u64::from((pes - at).min(16))) as u32;
                if !rng.one_in(4) {
                    blocks.push((blocks.len() as u64 + 1, at, n, row));
                }
                at += n;
            }
        }
        if blocks.is_empty() {
            // Every block a hole: no job to switch.
            continue;
        }
        let sizes: Vec<(u64, u32)> = blocks.iter().map(|b| (b.0, b.2)).collect();
        let mut a = ledger(pes, &sizes, true);
        for &(id, first, n, row) in &blocks {
            let place = Decision::Place {
                job: JobId(id),
                pes: PeSet::contiguous(first, n),
                slot: Some(row),
            };
            a.apply(Time::ZERO, place).unwrap();
        }
        let mut now = Time::ZERO;
        for step in 0..40 {
            now += Dur::from_secs(1 + rng.below(30) as i64);
            let i = rng.below(blocks.len() as u64) as usize;
            if rng.one_in(8) {
                if a.entry(i).held() {
                    a.release(i, now);
                } else {
                    a.hold(i, now);
                }
            }
            if rng.one_in(16) {
                a.report_runs(i, now, rng.one_in(2));
            }
            // Mostly a switch to the next row: its jobs resume, the others stop; sometimes
            // jobs of any row resume (they may clash), or a decision the ledger refuses.
            let row = (step % rows as usize) as u32;
            let mut ds = Vec::new();
            for (k, b) in blocks.iter().enumerate() {
                if a.entry(k).phase() == Phase::Running && (b.3 != row || rng.one_in(6)) {
                    ds.push(Decision::Suspend { job: JobId(b.0) });
                }
            }
            if rng.one_in(10) {
                ds.push(Decision::Suspend {
                    job: JobId(1 + rng.below(blocks.len() as u64 + 2)),
                });
            }
            let stops = ds.len();
            for (k, b) in blocks.iter().enumerate() {
                let stopping = ds[..stops].contains(&Decision::Suspend { job: JobId(b.0) });
                let stopped = a.entry(k).phase() == Phase::Stopped || stopping;
                if stopped && !stopping && (b.3 == row || rng.one_in(8)) {
                    ds.push(Decision::Resume { job: JobId(b.0) });
                }
            }
            if rng.one_in(10) {
                let k = rng.below(blocks.len() as u64) as usize;
                ds.push(Decision::Resume {
                    job: JobId(blocks[k].0),
                });
            }
            let mut b = a.clone();
            // One by one, as the general path applies them.
            let mut want = Vec::new();
            let mut first_refusal = Ok(());
            for d in ds.iter().cloned() {
                match a.apply(now, d) {
                    Ok(Change::Stops { job }) => want.push((job, None)),
                    Ok(Change::Runs { job, launch }) => {
                        assert!(!launch, "a resumed job was placed before");
                        want.push((job, Some(a.entry(job).ran(now))));
                    }
                    Ok(Change::None) => {}
                    Ok(other) => panic!("a switch gives no {other:?}"),
                    Err(e) => {
                        first_refusal = Err(e);
                        break;
                    }
                }
            }
            let mut got = Vec::new();
            let batch = b.switch(now, &ds, |i, ran| got.push((i, ran)));
            assert_eq!(batch, first_refusal, "seed {seed} step {step}: {ds:?}");
            assert_eq!(got, want, "seed {seed} step {step}");
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "seed {seed} step {step}"
            );
            refusals += usize::from(batch.is_err());
            moves += got.len();
        }
    }
    // The random matrices reach both paths of every outcome.
    assert!(refusals > 100, "{refusals} refusals");
    assert!(moves > 10_000, "{moves} moves");
}

/// The inline busy updates of the switch path (`clear_busy`, `try_set_busy`) leave the PE
/// set and answer as [`PeBits::clear_pes`] and [`PeBits::try_set_pes`] do, on random busy
/// sets of one to several words and PE sets of one block (within a word, or across words)
/// or several.
#[test]
fn inline_busy_updates_are_the_general_ones() {
    let mut refused = 0;
    for seed in 1..=2_000u64 {
        let mut rng = Rng(rand::SeedableRng::seed_from_u64(seed));
        let pes = 1 + rng.below(300) as u32;
        let mut busy = PeBits::new(pes);
        for p in 0..pes {
            if rng.one_in(3) {
                busy.set(p);
            }
        }
        let mut set = PeSet::new();
        let mut at = rng.below(u64::from(pes)) as u32;
        for _ in 0..1 + rng.below(3) {
            if at >= pes {
                break;
            }
            let end = at + 1 + rng.below(u64::from((pes - at).min(130))) as u32;
            set.push_sorted(at, end);
            at = end + 1 + rng.below(8) as u32;
        }
        let (mut a, mut b) = (busy.clone(), busy.clone());
        a.clear_pes(&set);
        clear_busy(&mut b, &set);
        assert_eq!(a, b, "seed {seed}: clear {set}");
        let (mut a, mut b) = (busy.clone(), busy);
        let (x, y) = (a.try_set_pes(&set), try_set_busy(&mut b, &set));
        assert_eq!(x, y, "seed {seed}: try_set {set}");
        assert_eq!(a, b, "seed {seed}: try_set {set}");
        refused += usize::from(!x);
    }
    // Both answers were tried.
    assert!(refused > 100 && refused < 1_900, "{refused} refusals");
}

/// A ledger that forgets ended jobs' PEs gives the records of one that keeps them, less their
/// PE sets, and refuses and accepts the same decisions (a running job's PEs still clash).
#[test]
fn forgetting_ended_pes_empties_only_the_ended_records_pes() {
    let jobs = [(1, 2), (2, 2), (3, 4)];
    let mut kept = ledger(4, &jobs, true);
    let mut forgot = ledger(4, &jobs, true);
    forgot.forget_ended_pes();
    for l in [&mut kept, &mut forgot] {
        l.apply(s(0), start(1, 0, 2)).unwrap();
        l.apply(s(0), start(2, 2, 2)).unwrap();
        assert!(l.apply(s(1), start(3, 0, 4)).is_err(), "PEs 0-3 are taken");
        l.apply(s(2), Decision::Suspend { job: JobId(2) }).unwrap();
        l.apply(s(3), Decision::Resume { job: JobId(2) }).unwrap();
        l.end(0, s(5), Outcome::Completed, Some(0));
        assert!(
            l.apply(s(5), start(3, 0, 4)).is_err(),
            "job 2 runs on PEs 2-3"
        );
        l.apply(s(6), Decision::Kill { job: JobId(2) }).unwrap();
        l.apply(s(6), start(3, 0, 4)).unwrap();
        assert_eq!(
            l.entry(2).pes(),
            &PeSet::contiguous(0, 4),
            "a live job's PEs"
        );
    }
    assert_eq!(kept.record(0).pes, PeSet::contiguous(0, 2));
    assert_eq!(kept.record(1).pes, PeSet::contiguous(2, 2));
    for i in 0..jobs.len() {
        let mut expected = kept.record(i).clone();
        if kept.entry(i).phase() == Phase::Ended {
            expected.pes = PeSet::new();
        }
        assert_eq!(forgot.record(i), &expected, "job {i}");
    }
}
