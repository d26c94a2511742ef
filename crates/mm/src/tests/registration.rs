//! Nodes registering and joining the tree, silent nodes marked down, and launches resent
//! until acknowledged.

use super::*;

#[test]
fn a_silent_node_is_marked_down_and_its_jobs_fail() {
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let cfg = CoreConfig {
        heartbeat: Dur::from_secs(1),
        suspect_after: Dur::from_secs(2),
        down_after: Dur::from_secs(3),
        ..config(2, 1)
    };
    let mut c = Core::new(cfg, fcfs, t(0), Recovered::default()).unwrap();
    for n in 0..2 {
        let reg = Register {
            version: Version::ours(),
            memory: 1 << 40,
            name: format!("n{n}"),
            pes: 1,
            addr: String::new(),
            jobs: Vec::new(),
            incarnation: 1,
        };
        c.on(t(0), Input::Register { req: n, reg });
        join(&mut c, t(0), n as u32, 1);
    }
    c.step(t(0));
    submit(&mut c, t(0), 2);
    c.step(t(0));
    // Node 1 never answers; node 0 does.
    for s in 1..=4 {
        c.on(t(s), Input::Heard(NodeId(0)));
        c.step(t(s));
    }
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::NodeFailed);
    assert_eq!(j.record.end, Some(t(4)));
    assert!(c.status().nodes[1].state == "down");
    // Node 1 comes back still running its rank of the job (its node manager was stopped):
    // it is fenced, told to kill it first, and accepted only once it holds nothing.
    let holding = vec![HeldJob {
        job: JobId(1),
        run: 1,
        ranks: vec![RankExit {
            oom: false,
            rank: 1,
            code: None,
            error: None,
        }],
        aborted: None,
    }];
    c.on(
        t(5),
        Input::Register {
            req: 7,
            reg: reg1(1, holding),
        },
    );
    let fx = c.step(t(5));
    let fence = RegisterReply::Fence {
        jobs: vec![JobId(1)],
        kill_wait_us: Dur::from_secs(5).as_micros(),
    };
    assert_eq!(registered(&fx, 7), Some(fence), "{fx:?}");
    assert_eq!(c.status().nodes[1].state, "down");
    c.on(
        t(6),
        Input::Register {
            req: 8,
            reg: reg1(1, Vec::new()),
        },
    );
    let fx = c.step(t(6));
    assert!(
        matches!(registered(&fx, 8), Some(RegisterReply::Accepted { .. })),
        "{fx:?}"
    );
    assert_eq!(c.status().nodes[1].state, "joining");
}

/// The machine manager cannot move a stopped process, so every policy it builds is told
/// preempted jobs cannot migrate (T3D then restarts them on their own PEs). The acceptance
/// test (tests/sim_vs_mm.rs) fails too without it: T3D moves a preempted job.
#[test]
fn the_machine_manager_builds_its_policy_without_migration() {
    let opts = PolicyOptions::default();
    let cfg = crate::shell::policy_config(4, 8, &opts).unwrap();
    assert!(!cfg.migration);
    assert_eq!(cfg.context_switch, Some(Dur::ZERO));
    assert_eq!(cfg.machine.total_pes(), 32);
    assert!(
        cosched_policy::PolicyConfig::new(cfg.machine).migration,
        "the default differs"
    );
    for name in ["fcfs", "gang", "t3d"] {
        assert!(crate::build_policy(name, 4, 8, &opts).is_ok(), "{name}");
    }
}

/// a registered node is not up for the policy, and nothing is sent to
/// it, until it reports that it joined the tree announced at its registration (an older
/// announcement does not count).
#[test]
fn a_node_gets_nothing_and_is_not_up_until_it_is_back_in_the_tree() {
    let mut c = registered_only(1, Dur::from_secs(3600), Dur::from_secs(36_000));
    assert_eq!(c.status().nodes[0].state, "joining");
    submit(&mut c, t(1), 1);
    let fx = c.step(t(1));
    assert!(launches(&fx).is_empty(), "{fx:?}");
    assert_eq!(state(&c, 1).state, JobState::Queued);
    let stale = c.tree_epoch() - 1;
    c.on(
        t(2),
        Input::FromNode {
            from: NodeId(0),
            msg: FromNode::Joined {
                incarnation: 1,
                epoch: stale,
            },
        },
    );
    assert!(launches(&c.step(t(2))).is_empty());
    join(&mut c, t(3), 0, 1);
    let fx = c.step(t(3));
    assert_eq!(launches(&fx), [(vec![NodeId(0)], JobId(1))], "{fx:?}");
    assert_eq!(c.status().nodes[0].state, "up");
    assert_eq!(state(&c, 1).state, JobState::Running);
}

/// a launch the node does not acknowledge is sent again after
/// `suspect_after`, and after `LAUNCH_TRIES` sends the job fails saying why, instead of staying
/// "running" with no processes; an acknowledged launch is not resent.
#[test]
fn an_unacknowledged_launch_is_resent_then_the_job_fails_with_the_reason() {
    let mut c = registered_only(2, Dur::from_secs(1), Dur::from_secs(3));
    join(&mut c, t(0), 0, 1);
    join(&mut c, t(0), 1, 1);
    c.step(t(0));
    submit(&mut c, t(0), 1);
    submit(&mut c, t(0), 1);
    let mut sent = launches(&c.step(t(0)));
    // Node 1 acknowledges job 2; node 0 never acknowledges job 1. Both answer heartbeats.
    let ack = FromNode::Launched {
        job: JobId(2),
        run: 1,
    };
    c.on(
        t(0),
        Input::FromNode {
            from: NodeId(1),
            msg: ack,
        },
    );
    for s in 1..=12 {
        c.on(t(s), Input::Heard(NodeId(0)));
        c.on(t(s), Input::Heard(NodeId(1)));
        sent.extend(launches(&c.step(t(s))));
    }
    let to_0 = sent.iter().filter(|(to, _)| to == &[NodeId(0)]).count();
    assert_eq!(to_0, crate::core::LAUNCH_TRIES as usize, "{sent:?}");
    assert_eq!(sent.iter().filter(|(_, j)| *j == JobId(2)).count(), 1);
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::Failed, "{j:?}");
    assert!(
        j.error
            .as_deref()
            .is_some_and(|e| e.contains("not acknowledged")),
        "{j:?}"
    );
    assert_eq!(state(&c, 2).state, JobState::Running);
}

/// a node manager that registers again (same process) while a launch to
/// it was in flight gets the launch once it is back in the tree, not before; signals meant
/// for it meanwhile are replaced by a resynchronisation when it joins.
#[test]
fn a_rejoining_node_gets_its_launch_and_its_signals_after_joining() {
    let mut c = registered_only(1, Dur::from_secs(3600), Dur::from_secs(36_000));
    join(&mut c, t(0), 0, 1);
    submit(&mut c, t(1), 1);
    assert_eq!(launches(&c.step(t(1))).len(), 1);
    // The launch was lost with the parent link: the node registers again without the job.
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs: Vec::new(),
        incarnation: 1,
    };
    c.on(t(2), Input::Register { req: 9, reg });
    let fx = c.step(t(2));
    assert!(launches(&fx).is_empty(), "{fx:?}");
    // A user's hold while it is out of the tree: recorded, not sent.
    c.on_unstored(
        t(3),
        Input::Client {
            req: 3,
            request: Request::Suspend(JobId(1)),
            caller: Caller::ROOT,
        },
    );
    assert!(sent(&c.step(t(3))).is_empty());
    join(&mut c, t(4), 0, 1);
    let msgs = sent(&c.step(t(4)));
    assert!(
        msgs.iter()
            .any(|m| matches!(m, ToNode::Launch(l) if l.job == JobId(1) && l.stopped)),
        "launched stopped, as the hold says: {msgs:?}"
    );
    assert_eq!(state(&c, 1).state, JobState::Suspended);
}
