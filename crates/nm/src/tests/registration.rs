//! Registration, the tree and the machine manager's silence: exits held across a lost
//! machine manager, retries, jobs dropped at registration, refusal.

use super::*;
use crate::core::Level;

fn registrations(fx: &[Effect]) -> Vec<Register> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Register(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rank_exit_while_the_machine_manager_is_lost_is_held_and_reported_once_on_rejoining() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    // The machine manager dies: the node's parent goes, and it registers again (in vain).
    let fx = n.on(ms(1_000), Input::ParentLost);
    assert_eq!(registrations(&fx).len(), 1);
    assert!(!n.core.takes_tree_input(), "tree input waits");
    let fx = n.on(
        ms(1_001),
        Input::Registration(Err("connection refused".into())),
    );
    assert!(registrations(&fx).is_empty());
    // A rank exits meanwhile: recorded, not sent (there is nobody to send it to).
    let fx = n.on(
        ms(1_050),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(1, 3),
        },
    );
    assert!(ups(&fx).is_empty(), "{fx:?}");
    // The next attempt, 100 ms after the failed one, reports it.
    let fx = n.until(ms(1_101));
    let reg = registrations(&fx);
    assert_eq!(reg.len(), 1);
    assert_eq!(reg[0].jobs.len(), 1);
    assert_eq!(
        reg[0].jobs[0].ranks,
        [
            RankExit {
                oom: false,
                rank: 0,
                code: None,
                error: None
            },
            exit(1, 3)
        ]
    );
    // The restarted machine manager accepts the node; the report goes up once the node is in
    // its tree, once.
    let fx = n.on(ms(1_200), Input::Registration(Ok(accepted(Vec::new()))));
    assert!(exits(&fx).is_empty(), "not before joining the tree");
    let fx = n.on(
        ms(1_300),
        Input::Topology {
            epoch: 1,
            member: true,
        },
    );
    assert_eq!(exits(&fx), [(1, 1, 1, Some(3))]);
    assert!(matches!(
        ups(&fx)[0],
        FromNode::Joined {
            incarnation: 77,
            epoch: 1
        }
    ));
    // A topology of which the node is not a member repeats nothing.
    let fx = n.on(
        ms(1_400),
        Input::Topology {
            epoch: 2,
            member: false,
        },
    );
    assert!(ups(&fx).is_empty());
    // Recorded as it ended, the job is forgotten: no later join repeats the exit.
    n.tree(
        ms(1_500),
        ToNode::Forget {
            jobs: vec![JobId(1)],
        },
    );
    let fx = n.on(
        ms(1_600),
        Input::Topology {
            epoch: 3,
            member: true,
        },
    );
    assert!(exits(&fx).is_empty());
}

/// A rank aborts while the machine manager is down: the notice cannot go up, so the next
/// registration carries it with the job (the restarted machine manager never heard it), and
/// every later one while the job is held, beside the exits.
#[test]
fn an_abort_while_the_machine_manager_is_down_is_carried_by_the_next_registration() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    n.on(ms(1_000), Input::ParentLost);
    n.on(
        ms(1_001),
        Input::Registration(Err("connection refused".into())),
    );
    let fx = n.on(
        ms(1_050),
        Input::Pmi {
            job: JobId(1),
            rank: 1,
            line: "cmd=abort exitcode=7 msg=gives_up".into(),
        },
    );
    assert!(ups(&fx).is_empty(), "nobody to send it to: {fx:?}");
    let notice = RankExit {
        rank: 1,
        code: Some(7),
        error: Some("MPI_Abort with status 7: gives_up".into()),
        oom: false,
    };
    let reg = registrations(&n.until(ms(1_101)));
    assert_eq!(reg.len(), 1);
    assert_eq!(reg[0].jobs[0].aborted.as_ref(), Some(&notice));
    // Still carried once the killed rank's exit is in (until the job is forgotten).
    n.on(
        ms(1_110),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(1, 128 + libc::SIGKILL),
        },
    );
    n.on(
        ms(1_120),
        Input::Registration(Err("connection refused".into())),
    );
    let reg = registrations(&n.until(ms(1_220)));
    assert_eq!(reg.len(), 1);
    assert_eq!(reg[0].jobs[0].aborted.as_ref(), Some(&notice));
    assert_eq!(
        reg[0].jobs[0].ranks[1], notice,
        "the rank's exit is the abort's"
    );
}

#[test]
fn registration_is_retried_every_100_ms_and_the_failure_logged_once() {
    let (mut n, fx) = Node::starting("gs");
    assert_eq!(registrations(&fx).len(), 1, "the first attempt at once");
    let warns = |fx: &[Effect]| {
        fx.iter()
            .filter(|e| matches!(e, Effect::Log(Level::Warn, l) if l.contains("cannot register with mm:7070")))
            .count()
    };
    let fx = n.on(ms(0), Input::Registration(Err("refused".into())));
    assert_eq!(warns(&fx), 1);
    for k in 1..5 {
        assert_eq!(n.core.next_wake(), Some(ms(100 * k)));
        assert!(registrations(&n.until(ms(100 * k - 1))).is_empty());
        assert_eq!(registrations(&n.until(ms(100 * k))).len(), 1);
        let fx = n.on(ms(100 * k), Input::Registration(Err("refused".into())));
        assert_eq!(warns(&fx), 0, "logged once");
    }
    let fx = n.until(ms(500));
    assert_eq!(registrations(&fx).len(), 1);
    let fx = n.on(ms(500), Input::Registration(Ok(accepted(Vec::new()))));
    assert!(matches!(fx[..], [Effect::Accepted { node: NodeId(0) }]));
    assert!(n.core.takes_tree_input());
}

#[test]
fn a_silent_machine_manager_makes_the_node_register_again() {
    let mut n = Node::up("gs");
    // Four heartbeats and 200 ms after it was last heard.
    assert_eq!(n.core.next_wake(), Some(ms(40_200)));
    n.on(ms(700), Input::Heard);
    assert_eq!(n.core.next_wake(), Some(ms(40_900)));
    n.on(
        ms(900),
        Input::Topology {
            epoch: 2,
            member: true,
        },
    );
    assert!(registrations(&n.until(ms(41_099))).is_empty());
    let fx = n.until(ms(41_100));
    assert_eq!(registrations(&fx).len(), 1);
    assert!(fx.iter().any(
        |e| matches!(e, Effect::Log(Level::Warn, l) if l == "nm n0: no heartbeat for 40.2s; registering again")
    ));
}

#[test]
fn jobs_the_machine_manager_dropped_while_the_node_was_away_are_killed_and_forgotten() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
    n.tree(ms(0), launch(2, 1, &[(1, 1)], false));
    let (one, two) = (n.pid(1, 0), n.pid(2, 1));
    n.on(ms(100), Input::ParentLost);
    let fx = n.on(ms(150), Input::Registration(Ok(accepted(vec![JobId(1)]))));
    assert_eq!(signals(&fx), [(one, libc::SIGTERM), (one, libc::SIGCONT)]);
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Forgotten {
            job: JobId(1),
            held: true
        }
    )));
    assert_eq!(signals(&n.until(ms(5_150))), [(one, libc::SIGKILL)]);
    // Job 2 runs on: its exit is reported.
    let fx = n.on(
        ms(6_000),
        Input::Exited {
            job: JobId(2),
            launch: 2,
            exit: exit(1, 0),
        },
    );
    assert_eq!(exits(&fx), [(2, 1, 1, Some(0))]);
    assert!(!signals(&fx).contains(&(two, libc::SIGKILL)));
}

#[test]
fn a_refused_node_stops() {
    let (mut n, _) = Node::starting("gs");
    let fx = n.on(
        ms(10),
        Input::Registration(Ok(RegisterReply::Rejected("wrong shape".into()))),
    );
    assert!(matches!(&fx[..], [Effect::Rejected(why)] if why == "wrong shape"));
    assert_eq!(n.core.next_wake(), None);
}

/// The machine manager's answer to a node it declared down while it ran `jobs`.
fn fence(jobs: &[u64], kill_wait: Dur) -> Input {
    Input::Registration(Ok(RegisterReply::Fence {
        jobs: jobs.iter().map(|&j| JobId(j)).collect(),
        kill_wait_us: kill_wait.as_micros(),
    }))
}

#[test]
fn a_fenced_node_kills_its_old_jobs_and_registers_again_only_once_their_ranks_are_gone() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    n.tree(ms(0), launch(2, 1, &[(2, 0)], false));
    let (a, b, other) = (n.pid(1, 0), n.pid(1, 1), n.pid(2, 2));
    n.on(ms(100), Input::ParentLost);
    let fx = n.on(ms(150), fence(&[1], Dur::from_secs(2)));
    assert_eq!(
        signals(&fx),
        [
            (a, libc::SIGTERM),
            (a, libc::SIGCONT),
            (b, libc::SIGTERM),
            (b, libc::SIGCONT)
        ],
        "the fenced job only"
    );
    assert!(
        registrations(&fx).is_empty(),
        "not before its ranks are gone"
    );
    assert!(!n.core.takes_tree_input());
    // One rank goes; the other still runs: still no registration, and no exit sent up (the
    // machine manager has ended the job).
    let fx = n.on(
        ms(400),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(0, 143),
        },
    );
    assert!(
        registrations(&fx).is_empty() && ups(&fx).is_empty(),
        "{fx:?}"
    );
    let fx = n.on(
        ms(500),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(1, 143),
        },
    );
    assert!(ups(&fx).is_empty(), "{fx:?}");
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Forgotten {
            job: JobId(1),
            held: true
        }
    )));
    // The registration that follows reports what is left: job 2, running.
    let reg = registrations(&fx);
    assert_eq!(reg.len(), 1);
    let held: Vec<u64> = reg[0].jobs.iter().map(|j| j.job.0).collect();
    assert_eq!(held, [2]);
    // The kill's SIGKILL still comes at the end of the grace, for what the ranks left behind.
    assert_eq!(
        signals(&n.until(ms(2_150))),
        [(a, libc::SIGKILL), (b, libc::SIGKILL)]
    );
    let fx = n.on(ms(2_200), Input::Registration(Ok(accepted(Vec::new()))));
    assert!(matches!(fx[..], [Effect::Accepted { .. }]));
    assert!(n.core.takes_tree_input());
    assert!(!signals(&n.until(ms(10_000))).contains(&(other, libc::SIGKILL)));
}

#[test]
fn a_fenced_rank_that_outlives_its_kill_keeps_its_job_held_at_the_next_registration() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
    let pid = n.pid(1, 0);
    n.on(ms(100), Input::ParentLost);
    n.on(ms(100), fence(&[1], Dur::from_secs(1)));
    // SIGKILL at the end of the kill wait; the node waits 5 s more for the exit.
    assert_eq!(signals(&n.until(ms(1_100))), [(pid, libc::SIGKILL)]);
    assert!(registrations(&n.until(ms(6_099))).is_empty());
    let fx = n.until(ms(6_100));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Log(Level::Warn, l) if l.contains("job 1 still has ranks running after its kill")
    )));
    let reg = registrations(&fx);
    assert_eq!(reg.len(), 1);
    assert_eq!(
        reg[0].jobs.len(),
        1,
        "still held: the machine manager asks again"
    );
    assert_eq!(reg[0].jobs[0].ranks[0].code, None);
}

#[test]
fn a_fence_of_jobs_no_rank_of_which_runs_here_registers_again_at_once() {
    let mut n = Node::up("gs");
    n.on(ms(100), Input::ParentLost);
    let fx = n.on(ms(150), fence(&[9], Dur::from_secs(5)));
    assert!(signals(&fx).is_empty());
    assert_eq!(registrations(&fx).len(), 1);
}

#[test]
fn the_silence_before_registering_again_is_at_least_the_machine_managers_suspect_after() {
    let (mut n, _) = Node::starting("gs");
    let reply = RegisterReply::Accepted {
        node: NodeId(0),
        heartbeat_us: 1_000_000,
        suspect_after_us: 30_000_000,
        down_after_us: 300_000_000,
        kill_wait_us: 5_000_000,
        drop_jobs: Vec::new(),
        epoch: 1,
    };
    n.on(ms(0), Input::Registration(Ok(reply)));
    assert_eq!(n.core.next_wake(), Some(ms(30_000)));
    // Four heartbeats and 200 ms when that is longer.
    let (mut n, _) = Node::starting("gs");
    let reply = RegisterReply::Accepted {
        node: NodeId(0),
        heartbeat_us: 10_000_000,
        suspect_after_us: 30_000_000,
        down_after_us: 300_000_000,
        kill_wait_us: 5_000_000,
        drop_jobs: Vec::new(),
        epoch: 1,
    };
    n.on(ms(0), Input::Registration(Ok(reply)));
    assert_eq!(n.core.next_wake(), Some(ms(40_200)));
}

#[test]
fn a_launch_taken_in_after_a_silence_past_the_limit_does_not_start_before_registering_again() {
    // The node manager was stopped (SIGSTOP) for nearly the down rule: when it continues,
    // the launch waiting on its socket may come in before the timer that says it was
    // silent. The machine manager may have declared it down and started the job elsewhere
    // since, so the node registers again first and the launch does not act.
    let mut n = Node::up("gs");
    let fx = n.tree(ms(60_000), launch(1, 1, &[(0, 0)], false));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Spawn(_))),
        "a rank started: {fx:?}"
    );
    assert_eq!(registrations(&fx).len(), 1, "{fx:?}");
    assert!(!n.core.takes_tree_input());
    // A heartbeat taken in first does not excuse the silence either.
    let mut n = Node::up("gs");
    let fx = n.on(ms(60_000), Input::Heard);
    assert_eq!(registrations(&fx).len(), 1, "{fx:?}");
    // Short of that (a starved node, not declared down), what comes in acts: the node
    // keeps its jobs, and its timer has it register again if it is still silent.
    let mut n = Node::up("gs");
    let fx = n.tree(ms(59_000), launch(1, 1, &[(0, 0)], false));
    assert!(fx.iter().any(|e| matches!(e, Effect::Spawn(_))), "{fx:?}");
    assert!(registrations(&fx).is_empty(), "{fx:?}");
}

#[test]
fn a_launch_sent_before_the_node_registered_again_does_not_start_after_it() {
    // The chaos test's job 813: its launch to n0 waits on n0's socket while n0 is stopped;
    // n0 is declared down (the job is requeued), comes back without the job, and its
    // registration releases the requeue (the machine manager begins a new membership at
    // tree epoch 5). The launch, read only then, must not start rank 0 of the old run: the
    // new one may already run elsewhere.
    let mut n = Node::up("gs");
    let stale = launch(813, 1, &[(0, 0)], false);
    let fx = n.on(ms(50_000), Input::Timer);
    assert_eq!(registrations(&fx).len(), 1, "silent past the limit");
    let fx = n.on(
        ms(50_010),
        Input::Registration(Ok(accepted_since(5, Vec::new()))),
    );
    assert!(matches!(fx[..], [Effect::Accepted { .. }]), "{fx:?}");
    let fx = n.on(
        ms(50_011),
        Input::Tree {
            epoch: 1,
            msg: stale.clone(),
        },
    );
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Spawn(_) | Effect::Prepare(_))),
        "the old run started: {fx:?}"
    );
    assert!(
        !ups(&fx)
            .iter()
            .any(|m| matches!(m, FromNode::Launched { .. })),
        "not acknowledged: the machine manager would take the old run for started here"
    );
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Log(Level::Warn, l) if l.contains("dropped the launch of job 813 (run 1)")
    )));
    // Other messages of then do not act either: a kill of then spares what runs now.
    n.on(
        ms(50_020),
        Input::Topology {
            epoch: 5,
            member: true,
        },
    );
    let fx = n.on(
        ms(50_030),
        Input::Tree {
            epoch: 5,
            msg: launch(814, 1, &[(0, 0)], false),
        },
    );
    assert!(fx.iter().any(|e| matches!(e, Effect::Spawn(_))), "{fx:?}");
    let fx = n.on(
        ms(50_040),
        Input::Tree {
            epoch: 4,
            msg: ToNode::Switch {
                stop: vec![],
                cont: vec![],
                kill: vec![JobId(814)],
            },
        },
    );
    assert!(signals(&fx).is_empty(), "{fx:?}");
    // What the machine manager sends in this membership acts: the launch of the run that
    // still stands, sent again, starts.
    let fx = n.on(
        ms(50_050),
        Input::Tree {
            epoch: 6,
            msg: launch(813, 2, &[(0, 1)], false),
        },
    );
    assert!(fx.iter().any(|e| matches!(e, Effect::Spawn(_))), "{fx:?}");
}
