//! Each scheme's defining behaviour, in two-process micro-scenarios driven directly through the
//! state machine (one PE, processes 1 and 2).

use cosched_core::{Dur, Time};
use cosched_node::{
    Action, FcsParams, LoadInfo, NodeScheduler, ProcClass, SchedParams, Scheme, WaitPolicy,
};

fn node(scheme: Scheme) -> NodeScheduler {
    NodeScheduler::new(SchedParams {
        scheme,
        pes: 1,
        spin_time: Dur::from_micros(188),
        interrupt: Dur::from_micros(30),
        check_endpoint: Dur::from_micros(2),
        global_info: Dur::from_micros(2),
        queue_reorder: Dur::from_micros(2),
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
