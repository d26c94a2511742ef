//! The order of a gang switch under the virtual clock: the incoming job's cgroup is thawed
//! only once the outgoing one's is reported frozen, or once the bound (half the quantum
//! seen) has passed, counted as a late freeze.

use super::*;
use crate::core::CgroupOp;
use crate::switch::MAX_BOUND;

fn strobe(slot: u32, running: u64) -> ToNode {
    ToNode::Rotation(still(Strobe {
        slot: Some(slot),
        rows: vec![(JobId(1), 0), (JobId(2), 1)],
        running: vec![JobId(running)],
    }))
}

/// Two 2-rank jobs in cgroups under `gs` (job 1 runs, job 2 launched stopped), each job's
/// launch numbered as the job.
fn two_jobs() -> Node {
    let mut n = Node::up("gs");
    n.cgroups = true;
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    n.tree(ms(0), launch(2, 1, &[(0, 0), (1, 1)], true));
    n.on(ms(0), launch_frozen(2, 2));
    n.tree(ms(0), strobe(0, 1));
    n
}

/// The cgroup operations among `fx`, as (job, op).
fn ops(fx: &[Effect]) -> Vec<(u64, CgroupOp)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Cgroup { job, op, .. } => Some((job.0, *op)),
            _ => None,
        })
        .collect()
}

fn frozen(job: u64) -> Input {
    Input::Frozen {
        job: JobId(job),
        launch: job,
    }
}

fn switch_log(n: &mut Node, at: Time) -> SwitchLog {
    let fx = n.tree(at, ToNode::FetchMonitor { req: 1 });
    match &fx[..] {
        [Effect::SendMonitor { switches, .. }] => switches.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_gang_switch_thaws_the_incoming_job_only_once_the_outgoing_one_is_reported_frozen() {
    let mut n = two_jobs();
    let fx = n.tree(ms(10), strobe(1, 2));
    assert_eq!(
        ops(&fx),
        [(1, CgroupOp::Freeze)],
        "no thaw before the freeze"
    );
    // Nothing else thaws it meanwhile: not a tick, not the same strobe again.
    assert!(ops(&n.until(ms(10) + Dur::from_micros(300))).is_empty());
    assert!(ops(&n.tree(ms(10) + Dur::from_micros(300), strobe(1, 2))).is_empty());
    let fx = n.on(ms(10) + Dur::from_micros(400), frozen(1));
    assert_eq!(ops(&fx), [(2, CgroupOp::Thaw)]);
    // A report of a job not being frozen changes nothing.
    assert!(ops(&n.on(ms(11), frozen(1))).is_empty());
    let log = switch_log(&mut n, ms(12));
    assert_eq!((log.count, log.late), (1, 0));
    assert_eq!(
        log.recent,
        [SwitchTiming {
            at_us: 10_000,
            lead_us: 0,
            frozen_us: Some(400),
            thawed_us: 400,
            outgoing: vec![JobId(1)],
            incoming: vec![JobId(2)],
            handover: false,
        }]
    );
}

#[test]
fn an_outgoing_job_not_reported_frozen_is_thawed_past_at_the_bound_half_the_quantum() {
    let mut n = two_jobs();
    // Before the quantum is known, the bound is the longest.
    n.tree(ms(20), strobe(1, 2));
    assert!(ops(&n.until(ms(20) + MAX_BOUND - Dur(1))).is_empty());
    let fx = n.until(ms(20) + MAX_BOUND);
    assert_eq!(ops(&fx), [(2, CgroupOp::Thaw)]);
    // Switches 20 ms apart: half of that.
    n.tree(ms(140), strobe(0, 1));
    n.on(ms(141), frozen(2));
    n.tree(ms(160), strobe(1, 2));
    assert!(ops(&n.until(ms(169) + Dur(999))).is_empty());
    let fx = n.until(ms(170));
    assert_eq!(ops(&fx), [(2, CgroupOp::Thaw)], "thawed at the bound");
    // The report that comes after changes nothing.
    assert!(ops(&n.on(ms(171), frozen(1))).is_empty());
    let log = switch_log(&mut n, ms(172));
    assert_eq!((log.count, log.late), (3, 2));
    let timing: Vec<(Option<i32>, i32)> = log
        .recent
        .iter()
        .map(|t| (t.frozen_us, t.thawed_us))
        .collect();
    assert_eq!(
        timing,
        [(None, 100_000), (Some(1_000), 1_000), (None, 10_000)]
    );
}

#[test]
fn a_thaw_held_back_is_dropped_when_the_next_switch_stops_that_job_again() {
    let mut n = two_jobs();
    let mut runs = BTreeSet::from([(JobId(1), 0), (JobId(1), 1)]);
    let mut all = n.tree(ms(10), strobe(1, 2));
    // Job 1 is not frozen yet when the strobe brings it back: job 2, never thawed, is frozen
    // (again), and job 1 thawed once that is reported.
    let fx = n.tree(ms(11), strobe(0, 1));
    assert_eq!(ops(&fx), [(2, CgroupOp::Freeze)]);
    all.extend(fx);
    let fx = n.on(ms(12), frozen(2));
    assert_eq!(ops(&fx), [(1, CgroupOp::Thaw)]);
    all.extend(fx);
    for e in &all {
        runs = runnable(&n, std::slice::from_ref(e), &runs);
        assert!(jobs(&runs).len() <= 1, "two jobs runnable in {all:?}");
    }
    assert_eq!(jobs(&runs), BTreeSet::from([JobId(1)]));
}

#[test]
fn a_switch_whose_outgoing_job_ends_thaws_the_incoming_one() {
    let mut n = two_jobs();
    n.tree(ms(10), strobe(1, 2));
    let fx = n.tree(
        ms(11),
        ToNode::Forget {
            jobs: vec![JobId(1)],
        },
    );
    assert!(ops(&fx).contains(&(2, CgroupOp::Thaw)), "{fx:?}");
}

/// The run states sent up for the accounting, as (job, runs).
fn runs_reports(fx: &[Effect]) -> Vec<(u64, bool)> {
    run_changes(fx)
        .into_iter()
        .map(|c| (c.job.0, c.runs))
        .collect()
}

/// Past the bound the incoming job is thawed and booked running, but the outgoing one is
/// booked stopped only when its freeze is reported done: a rank that waits for its core runs
/// into its freeze late, and the accounting follows the freezer, not the switch's bound.
#[test]
fn a_late_freeze_is_booked_stopped_when_it_lands_not_at_the_bound() {
    let mut n = two_jobs();
    let fx = n.tree(ms(20), strobe(1, 2));
    assert_eq!(runs_reports(&fx), [], "nothing frozen or thawed yet");
    let fx = n.until(ms(20) + MAX_BOUND);
    assert_eq!(ops(&fx), [(2, CgroupOp::Thaw)]);
    assert_eq!(
        runs_reports(&fx),
        [(2, false), (2, true)],
        "job 1 still runs into its freeze (job 2's first report starts with its launch, \
         stopped)"
    );
    let fx = n.on(ms(20) + MAX_BOUND + Dur::from_millis(3), frozen(1));
    assert_eq!(runs_reports(&fx), [(1, true), (1, false)]);
    // The next switch books job 2 stopped at its freeze and job 1 running at its thaw.
    let at = ms(200);
    assert_eq!(runs_reports(&n.tree(at, strobe(0, 1))), []);
    let fx = n.on(at + Dur::from_micros(40), frozen(2));
    assert_eq!(ops(&fx), [(1, CgroupOp::Thaw)]);
    assert_eq!(runs_reports(&fx), [(2, false), (1, true)]);
}

/// A rotation's idle handover ([`crate::program::Order::Handover`]) thaws first: the log
/// keeps it as made, then whether its outgoing freeze had landed when read at the next switch
/// (the exposure's bound), or not, counted late.
#[test]
fn a_handover_is_logged_with_its_freeze_landing_after_the_thaw() {
    use crate::program::Logged;
    let mut n = two_jobs();
    let handover = |due: Time| {
        Logged::Switch(crate::program::Landed {
            due,
            frozen_written: due,
            frozen: None,
            thawed: due,
            outgoing: vec![(JobId(1), 1)],
            incoming: vec![(JobId(2), 2)],
            handover: true,
        })
    };
    n.on(
        ms(11),
        Input::Switched(vec![
            handover(ms(10)),
            handover(ms(12)),
            Logged::Landing {
                due: ms(10),
                frozen: Some(ms(10) + Dur::from_micros(900)),
            },
        ]),
    );
    n.on(
        ms(15),
        Input::Switched(vec![Logged::Landing {
            due: ms(12),
            frozen: None,
        }]),
    );
    let log = switch_log(&mut n, ms(16));
    assert_eq!((log.count, log.late), (2, 1));
    let timing = |at_us: i64, frozen_us: Option<i32>| SwitchTiming {
        at_us,
        lead_us: 0,
        frozen_us,
        thawed_us: 0,
        outgoing: vec![JobId(1)],
        incoming: vec![JobId(2)],
        handover: true,
    };
    assert_eq!(
        log.recent,
        [timing(10_000, Some(900)), timing(12_000, None)]
    );
}
