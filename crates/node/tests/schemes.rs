//! Each scheme's defining behaviour, in two-process micro-scenarios driven directly through the
//! state machine (one PE, processes 1 and 2).

use cosched_core::{Dur, Time};
use cosched_node::{
    Action, FcsParams, LoadInfo, NodeScheduler, ProcClass, ProcOptions, SchedParams, Scheme,
    WaitPolicy,
};

fn node(scheme: Scheme) -> NodeScheduler {
    node_with(scheme, ProcOptions::default())
}

fn node_with(scheme: Scheme, proc: ProcOptions) -> NodeScheduler {
    NodeScheduler::new(SchedParams {
        scheme,
        pes: 1,
        spin_time: Dur::from_micros(188),
        interrupt: Dur::from_micros(30),
        check_endpoint: Dur::from_micros(2),
        global_info: Dur::from_micros(2),
        queue_reorder: Dur::from_micros(2),
        proc,
        fcs: FcsParams::table_4_1(Dur::from_millis(200)),
    })
}

/// Process 1 (slot 0) runs; process 2 (slot 1) is ready behind it.
fn two(scheme: Scheme) -> NodeScheduler {
    let mut n = node(scheme);
    n.add(1, 0, 0);
    n.add(2, 0, 1);
    assert_eq!(n.pick(Time(0), 0).proc, Some(1));
    n
}

fn t(us: i64) -> Time {
    Time(us)
}

#[test]
fn waiting_policies_follow_table_1() {
    assert_eq!(two(Scheme::Local).wait_policy(1), WaitPolicy::SpinForever);
    assert_eq!(two(Scheme::Dcs).wait_policy(1), WaitPolicy::SpinForever);
    assert_eq!(two(Scheme::Pb).wait_policy(1), WaitPolicy::SpinForever);
    assert_eq!(two(Scheme::Ib).wait_policy(1), WaitPolicy::Block);
    assert_eq!(
        two(Scheme::Sb).wait_policy(1),
        WaitPolicy::Spin(Dur::from_micros(188))
    );
}

#[test]
fn sb_blocked_receiver_is_woken_by_an_interrupt_and_boosted() {
    let mut n = two(Scheme::Sb);
    // Process 1 spun and blocked; process 2 runs.
    let acts = n.block(1);
    assert!(acts.contains(&Action::Repick { pe: 0 }));
    assert_eq!(n.pick(t(200), 0).proc, Some(2));
    let acts = n.msg_arrived(t(500), 1, 1, LoadInfo::default(), true, false);
    assert!(
        acts.contains(&Action::Overhead {
            pe: 0,
            dur: Dur::from_micros(30)
        }),
        "{acts:?}"
    );
    assert!(acts.contains(&Action::Wake { proc: 1 }));
    assert!(
        acts.contains(&Action::Repick { pe: 0 }),
        "boosted above the running process"
    );
    assert_eq!(n.pick(t(530), 0).proc, Some(1));
}

#[test]
fn local_ignores_arrivals() {
    let mut n = two(Scheme::Local);
    let acts = n.msg_arrived(t(100), 2, 1, LoadInfo::default(), false, false);
    assert!(acts.is_empty(), "{acts:?}");
    assert_eq!(n.pick(t(100), 0).proc, Some(1));
}

#[test]
fn dcs_boosts_on_arrival_for_a_process_not_running() {
    let mut n = two(Scheme::Dcs);
    let acts = n.msg_arrived(t(100), 2, 1, LoadInfo::default(), false, false);
    assert!(
        acts.contains(&Action::Overhead {
            pe: 0,
            dur: Dur::from_micros(30)
        }),
        "{acts:?}"
    );
    assert!(acts.contains(&Action::Repick { pe: 0 }));
    assert_eq!(n.pick(t(130), 0).proc, Some(2));
    // A message for the running process costs nothing.
    let acts = n.msg_arrived(t(200), 2, 1, LoadInfo::default(), false, true);
    assert!(acts.is_empty(), "{acts:?}");
}

#[test]
fn pb_boosts_only_at_its_period() {
    let mut n = two(Scheme::Pb);
    let acts = n.msg_arrived(t(100), 2, 1, LoadInfo::default(), false, false);
    assert!(
        acts.is_empty(),
        "no interrupt, no boost on arrival: {acts:?}"
    );
    assert_eq!(n.pick(t(150), 0).proc, Some(1));
    let acts = n.periodic_boost(t(1000));
    assert!(
        acts.contains(&Action::Overhead {
            pe: 0,
            dur: Dur::from_micros(4)
        }),
        "two endpoints checked: {acts:?}"
    );
    assert!(acts.contains(&Action::Repick { pe: 0 }));
    assert_eq!(n.pick(t(1004), 0).proc, Some(2));
    // Once consumed, nothing is pending: the next tick boosts nobody.
    n.msgs_consumed(2, &[1]);
    let acts = n.periodic_boost(t(2000));
    assert!(
        !acts.iter().any(|a| matches!(a, Action::Repick { .. })),
        "{acts:?}"
    );
}

#[test]
fn pb_proc_boosts_the_process_whose_peer_runs_soonest() {
    let mut n = node(Scheme::PbProc);
    n.add(1, 0, 0);
    n.add(2, 0, 0);
    n.add(3, 0, 0);
    assert_eq!(n.pick(t(0), 0).proc, Some(1));
    // Process 2 hears from a busy node (ENP 4), process 3 from an idle one (ENP 0.5).
    n.msg_arrived(
        t(100),
        2,
        5,
        LoadInfo {
            ts: Dur::from_millis(10),
            enp_milli: 4000,
        },
        false,
        false,
    );
    n.msg_arrived(
        t(100),
        3,
        6,
        LoadInfo {
            ts: Dur::from_millis(10),
            enp_milli: 500,
        },
        false,
        false,
    );
    n.periodic_boost(t(1000));
    assert_eq!(n.pick(t(1000), 0).proc, Some(3));
}

/// Load information from a node whose processes run again after `enp` switches of 10 ms.
fn heard(n: &mut NodeScheduler, at: i64, proc: u32, from: u32, enp: f64, blocked: bool) {
    n.msg_arrived(
        t(at),
        proc,
        from,
        LoadInfo {
            ts: Dur::from_millis(10),
            enp_milli: (enp * 1000.0) as i64,
        },
        blocked,
        false,
    );
}

/// Seed 004 §5.1: in SB the boost sequence follows message arrival; SB+PROC reorders it by
/// expected remaining time. Processes 2 and 3 are blocked receivers, woken one after the other
/// before the scheduler runs: 2 by a message from a busy node, 3 from an idle one.
#[test]
fn sb_proc_reorders_the_boost_sequence_where_sb_keeps_arrival_order() {
    for (scheme, first) in [(Scheme::Sb, 2), (Scheme::SbProc, 3)] {
        let mut n = node(scheme);
        for id in 1..=3 {
            n.add(id, 0, 0);
        }
        assert_eq!(n.pick(t(0), 0).proc, Some(1));
        n.block(2);
        n.block(3);
        heard(&mut n, 100, 2, 5, 4.0, true);
        heard(&mut n, 110, 3, 6, 0.5, true);
        assert_eq!(n.pick(t(200), 0).proc, Some(first), "{scheme}");
    }
}

/// Process 1 runs with a message pending (a receive still waiting for its second message);
/// blocked process 2 is woken and boosted. SB lets the boost preempt, and so does SB+PROC by
/// default; `keep_reordered` keeps process 1.
#[test]
fn sb_proc_lets_a_woken_boosted_process_preempt_unless_keep_reordered() {
    for (keep, runs) in [(false, 2), (true, 1)] {
        let opts = ProcOptions {
            keep_reordered: keep,
            ..ProcOptions::default()
        };
        let mut n = node_with(Scheme::SbProc, opts);
        n.add(1, 0, 0);
        n.add(2, 0, 1);
        assert_eq!(n.pick(t(0), 0).proc, Some(1));
        n.block(2);
        n.msg_arrived(t(50), 1, 4, LoadInfo::default(), false, true);
        let acts = n.msg_arrived(t(100), 2, 5, LoadInfo::default(), true, false);
        assert!(acts.contains(&Action::Repick { pe: 0 }), "{acts:?}");
        assert_eq!(
            n.pick(t(130), 0).proc,
            Some(runs),
            "keep_reordered = {keep}"
        );
    }
}

/// SB+PROC's candidates are the processes with pending messages at the highest ready level
/// (the boosted ones); `any_level` lets a lower-priority process with pending messages and a
/// sooner peer win over the boosted process.
#[test]
fn sb_proc_candidates_are_the_top_level_unless_any_level() {
    for (any, runs) in [(false, 2), (true, 3)] {
        let opts = ProcOptions {
            any_level: any,
            ..ProcOptions::default()
        };
        let mut n = node_with(Scheme::SbProc, opts);
        for id in 1..=3 {
            n.add(id, 0, 0);
        }
        assert_eq!(n.pick(t(0), 0).proc, Some(1));
        // Process 3 is ready at the start level with a message from an idle node; process 2
        // is woken and boosted by one from a busy node.
        heard(&mut n, 50, 3, 6, 0.5, false);
        n.block(2);
        heard(&mut n, 100, 2, 5, 4.0, true);
        assert_eq!(n.pick(t(130), 0).proc, Some(runs), "any_level = {any}");
    }
}

/// With `any_level` a reordering can choose a process below the highest ready level. The PE
/// pays the reordering once: the decision that ends the context switch to that process picks
/// it again without another charge (a charge would end in yet another decision, for ever).
#[test]
fn sb_proc_pays_a_reordering_once() {
    let opts = ProcOptions {
        any_level: true,
        ..ProcOptions::default()
    };
    let mut n = node_with(Scheme::SbProc, opts);
    for id in 1..=3 {
        n.add(id, 0, 0);
    }
    assert_eq!(n.pick(t(0), 0).proc, Some(1));
    heard(&mut n, 50, 3, 6, 0.5, false);
    n.block(2);
    heard(&mut n, 100, 2, 5, 4.0, true);
    let first = n.pick(t(130), 0);
    assert_eq!((first.proc, first.overhead), (Some(3), Dur::from_micros(2)));
    let again = n.pick(t(232), 0);
    assert_eq!((again.proc, again.overhead), (Some(3), Dur::ZERO));
}

#[test]
fn gs_runs_only_the_slot_owner() {
    let mut n = two(Scheme::Gs);
    // Slot 0: process 1, even if process 2 wakes with a boost.
    n.block(2);
    n.wake(2, true);
    assert_eq!(n.pick(t(10), 0).proc, Some(1));
    n.heartbeat(1);
    assert_eq!(n.pick(t(200_000), 0).proc, Some(2));
    // The owner blocked on I/O: strict gang leaves the PE idle rather than run process 1.
    n.block(2);
    assert_eq!(n.pick(t(200_100), 0).proc, None);
}

#[test]
fn fcs_cs_process_is_not_preempted_inside_its_slot() {
    let mut n = two(Scheme::Fcs);
    assert_eq!(n.class(1), Some(ProcClass::InitCs));
    assert_eq!(
        n.wait_policy(1),
        WaitPolicy::SpinForever,
        "a CS owner spins through its slot"
    );
    let acts = n.msg_arrived(t(100), 2, 1, LoadInfo::default(), false, false);
    assert!(acts.is_empty(), "{acts:?}");
    n.block(2);
    n.wake(2, true);
    assert_eq!(n.pick(t(200), 0).proc, Some(1));
    // The CS process blocks on I/O: the PE is filled by the other process.
    n.block(1);
    assert_eq!(n.pick(t(300), 0).proc, Some(2));
    // Back in its slot as soon as it is runnable.
    n.wake(1, false);
    assert_eq!(n.pick(t(400), 0).proc, Some(1));
}

#[test]
fn fcs_empty_slot_lets_a_dc_process_continue() {
    let mut n = node(Scheme::Fcs);
    n.add(1, 0, 0);
    assert_eq!(n.pick(t(0), 0).proc, Some(1));
    n.heartbeat(3);
    assert_eq!(
        n.pick(t(200_000), 0).proc,
        Some(1),
        "nobody owns slot 3 here"
    );
}

#[test]
fn ts_update_raises_a_starved_ready_process_over_one_that_used_its_quantum() {
    let mut n = two(Scheme::Local);
    // Process 1 spins through its quantum (29 → 19); process 2 runs, sleeps on I/O and comes
    // back at the sleep-return level (≥ 50), then uses a quantum too (→ 42, still above 19).
    n.quantum_expired(0);
    assert_eq!(n.pick(t(100), 0).proc, Some(2));
    n.block(2);
    n.wake(2, false);
    assert_eq!(n.pick(t(200), 0).proc, Some(2));
    n.quantum_expired(0);
    assert_eq!(
        n.pick(t(300), 0).proc,
        Some(2),
        "19 < 42: process 1 starves"
    );
    // The once-a-second check lifts the waiting process to its sleep-return level (51 > 42),
    // which preempts the running one.
    let acts = n.ts_update();
    assert!(acts.contains(&Action::Repick { pe: 0 }), "{acts:?}");
    assert_eq!(n.pick(t(400), 0).proc, Some(1));
    // The next check lifts process 2, which now waits in turn (42 → 54 > 51); the running
    // process 1 is not raised (it stays at 51).
    let acts = n.ts_update();
    assert!(acts.contains(&Action::Repick { pe: 0 }), "{acts:?}");
    assert_eq!(n.pick(t(500), 0).proc, Some(2));
}
