//! Unit tests of the core, with a virtual clock and the test as the nodes.

use cosched_core::{Dur, JobId, NodeId, PeSet, Time};
use cosched_policy::{Decision, Event, Never, Policy, PolicyOptions};

use super::core::{Core, CoreConfig, Effect, Input, Recovered};
use cosched_proto::proto::*;

/// Replays fixed decisions at given times, waking itself with timers.
#[derive(Clone)]
struct Script {
    steps: Vec<(Time, Vec<Decision>)>,
    armed: bool,
}

impl Policy for Script {
    fn name(&self) -> &str {
        "script"
    }
    fn observe(&mut self, _now: Time, e: Event) {
        if matches!(e, Event::Timer(_)) {
            self.armed = false;
        }
    }
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        while self.steps.first().is_some_and(|(t, _)| *t <= now) {
            out.extend(self.steps.remove(0).1);
        }
        if let Some((t, _)) = self.steps.first()
            && !self.armed
        {
            self.armed = true;
            out.push(Decision::SetTimer { at: *t, token: 0 });
        }
    }
    fn queue(&self) -> Vec<JobId> {
        Vec::new()
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

fn t(s: i64) -> Time {
    Time::from_secs(s)
}

/// The configuration the tests' cores start from: slow heartbeats (no node is declared dead
/// unless a test says so), no requeue; a test overrides what it is about.
fn config(nodes: u32, pes: u32) -> CoreConfig {
    CoreConfig {
        nodes,
        pes,
        names: Vec::new(),
        fanout: 8,
        heartbeat: Dur::from_secs(3600),
        suspect_after: Dur::from_secs(36_000),
        down_after: Dur::from_secs(36_000),
        requeue: false,
        kill_wait: Dur::from_secs(5),
        hold_pes_while_completing: true,
        keep_jobs: Dur::from_secs(7 * 86_400),
    }
}

/// A core on `nodes` × `pes` with every node registered at time 0.
fn core(policy: Box<dyn Policy>, nodes: u32, pes: u32) -> Core {
    let mut c = Core::new(config(nodes, pes), policy, t(0), Recovered::default()).unwrap();
    for n in 0..nodes {
        c.on(
            t(0),
            Input::Register {
                req: 100 + n as u64,
                reg: Register {
                    version: Version::ours(),
                    memory: 1 << 40,
                    name: format!("n{n}"),
                    pes,
                    addr: String::new(),
                    jobs: Vec::new(),
                    incarnation: 1,
                },
            },
        );
        join(&mut c, t(0), n, 1);
    }
    c.step(t(0));
    c
}

/// Node `n` reports that it is in the tree last announced.
fn join(c: &mut Core, now: Time, n: u32, incarnation: u64) {
    let epoch = c.tree_epoch();
    c.on(
        now,
        Input::FromNode {
            from: NodeId(n),
            msg: FromNode::Joined { incarnation, epoch },
        },
    );
}

fn submit(c: &mut Core, now: Time, procs: u32) {
    let request = Request::Submit(Box::new(SubmitRequest {
        mem: None,
        procs,
        time_limit_us: Some(Dur::from_secs(1000).as_micros()),
        class: None,
        name: None,
        cmd: vec!["work".into()],
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched: Default::default(),
        layout: None,
        hold: false,
    }));
    c.on_unstored(
        now,
        Input::Client {
            req: 1,
            request,
            caller: Caller::ROOT,
        },
    );
}

fn exit(c: &mut Core, now: Time, job: u64, rank: u32, code: i32) {
    let exit = RankExit {
        oom: false,
        rank,
        code: Some(code),
        error: None,
    };
    // Every job of these tests is launched once: its first run.
    let msg = FromNode::Exited {
        job: JobId(job),
        run: 1,
        exit,
    };
    c.on(
        now,
        Input::FromNode {
            from: NodeId(0),
            msg,
        },
    );
}

fn sent(effects: &[Effect]) -> Vec<ToNode> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send { msg, .. } => Some(msg.clone()),
            _ => None,
        })
        .collect()
}

fn state(c: &Core, job: u64) -> JobInfo {
    let i = c.ledger().find(JobId(job)).unwrap();
    c.job_info(i, t(1_000_000))
}

#[test]
fn everything_of_an_instant_reaches_the_policy_before_it_decides_once() {
    let fcfs = super::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 2);
    submit(&mut c, t(1), 1);
    submit(&mut c, t(1), 1);
    submit(&mut c, t(1), 2);
    let fx = c.step(t(1));
    assert_eq!(
        sent(&fx)
            .iter()
            .filter(|m| matches!(m, ToNode::Launch(_)))
            .count(),
        2,
        "both 1-PE jobs start, the 2-PE one waits"
    );
    // Both end at 5; the reports arrive one by one, and only then does the instant run: job 3
    // gets both PEs at once (deciding after the first end would start nothing).
    exit(&mut c, t(5), 1, 0, 0);
    exit(&mut c, t(5), 2, 0, 0);
    let fx = c.step(t(5));
    let launches: Vec<_> = sent(&fx)
        .into_iter()
        .filter_map(|m| match m {
            ToNode::Launch(l) => Some(l.job),
            _ => None,
        })
        .collect();
    assert_eq!(launches, [JobId(3)]);
    assert_eq!(state(&c, 1).state, JobState::Completed);
    assert_eq!(state(&c, 1).record.exit_code, Some(0));
    assert_eq!(state(&c, 3).record.start, Some(t(5)));
}

#[test]
fn a_warning_of_a_rank_is_the_completed_jobs_reason_and_a_failure_replaces_it() {
    let fcfs = super::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 2);
    submit(&mut c, t(1), 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    let warn = |c: &mut Core, at: Time, job: u64| {
        let msg = FromNode::Warning {
            job: JobId(job),
            run: 1,
            rank: 1,
            warning: "ran as an MPI world of one".into(),
        };
        c.on(
            at,
            Input::FromNode {
                from: NodeId(0),
                msg,
            },
        );
    };
    warn(&mut c, t(2), 1);
    exit(&mut c, t(3), 1, 0, 0);
    exit(&mut c, t(3), 1, 1, 0);
    c.step(t(3));
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(
        j.error.as_deref(),
        Some("warning: rank 1 on node n0: ran as an MPI world of one")
    );
    // Job 2 runs next; its failure's reason is the record's, not the warning.
    warn(&mut c, t(4), 2);
    exit(&mut c, t(4), 2, 0, 3);
    c.step(t(4));
    let j = state(&c, 2);
    assert_eq!(j.state, JobState::Failed);
    assert!(j.error.unwrap().contains("exited with code 3"));
}

fn script(steps: Vec<(Time, Vec<Decision>)>) -> Box<dyn Policy> {
    Box::new(Script {
        steps,
        armed: false,
    })
}

#[test]
fn a_policy_kill_ends_the_job_at_once_and_its_late_exits_are_ignored() {
    let pes = PeSet::contiguous(0, 2);
    let p = script(vec![
        (
            t(1),
            vec![Decision::Start {
                job: JobId(1),
                pes,
                slot: None,
            }],
        ),
        (t(4), vec![Decision::Kill { job: JobId(1) }]),
    ]);
    let mut c = core(p, 1, 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    let fx = c.step(t(4));
    let msgs = sent(&fx);
    assert!(
        msgs.iter()
            .any(|m| matches!(m, ToNode::Switch { kill, .. } if kill == &[JobId(1)])),
        "{msgs:?}"
    );
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.record.end, Some(t(4)));
    assert_eq!(j.run_us, Dur::from_secs(3).as_micros());
    // The killed ranks report later: the record stays, the job is forgotten on its node.
    exit(&mut c, t(6), 1, 0, -9);
    exit(&mut c, t(6), 1, 1, -9);
    let fx = c.step(t(6));
    assert!(sent(&fx).iter().any(|m| matches!(m, ToNode::Forget { .. })));
    assert_eq!(state(&c, 1), j);
}

#[test]
fn a_preempted_job_is_stopped_and_continued_on_its_own_pes_never_moved() {
    let pes = PeSet::contiguous(0, 2);
    let start = |pes: &PeSet| Decision::Start {
        job: JobId(1),
        pes: pes.clone(),
        slot: None,
    };
    let p = script(vec![
        (t(1), vec![start(&pes)]),
        (t(3), vec![Decision::Preempt { job: JobId(1) }]),
        (t(5), vec![start(&PeSet::contiguous(2, 2))]),
        (t(6), vec![start(&pes)]),
    ]);
    let mut c = core(p, 2, 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    let stop = sent(&c.step(t(3)));
    assert!(
        matches!(&stop[..], [ToNode::Switch { stop, .. }] if stop == &[JobId(1)]),
        "{stop:?}"
    );
    assert_eq!(state(&c, 1).state, JobState::Queued);
    // Elsewhere: refused (migration is off), nothing is sent.
    let fx = c.step(t(5));
    assert!(sent(&fx).is_empty(), "{fx:?}");
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Log(l) if l.contains("cannot move"))),
        "{fx:?}"
    );
    // On its own PEs: continued, not launched again.
    let cont = sent(&c.step(t(6)));
    assert!(
        matches!(&cont[..], [ToNode::Switch { cont, .. }] if cont == &[JobId(1)]),
        "{cont:?}"
    );
    let j = state(&c, 1);
    assert_eq!((j.state, j.record.preemptions), (JobState::Running, 1));
    assert_eq!(j.record.suspended, Dur::from_secs(3));
}

#[test]
fn a_rejection_ends_the_job_with_the_reason_shown() {
    let p = script(vec![(
        t(1),
        vec![Decision::Reject {
            job: JobId(1),
            why: Never::OverLimit { procs: 2, limit: 1 },
        }],
    )]);
    let mut c = core(p, 1, 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::Rejected);
    assert!(
        j.error
            .as_deref()
            .is_some_and(|e| e.contains("more than the largest job allowed (job_limit = 1)")),
        "{j:?}"
    );
}

#[test]
fn a_silent_node_is_marked_down_and_its_jobs_fail() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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

/// The registration of node `n1` (1 PE) by node manager process `incarnation`, holding `jobs`.
fn reg1(incarnation: u64, jobs: Vec<HeldJob>) -> Register {
    Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n1".into(),
        pes: 1,
        addr: String::new(),
        jobs,
        incarnation,
    }
}

/// The answer to registration `req` among `fx`.
fn registered(fx: &[Effect], req: u64) -> Option<RegisterReply> {
    fx.iter().find_map(|e| match e {
        Effect::Registered { req: r, reply } if *r == req => Some(reply.clone()),
        _ => None,
    })
}

/// The machine manager cannot move a stopped process, so every policy it builds is told
/// preempted jobs cannot migrate (T3D then restarts them on their own PEs). The acceptance
/// test (tests/sim_vs_mm.rs) fails too without it: T3D moves a preempted job.
#[test]
fn the_machine_manager_builds_its_policy_without_migration() {
    let opts = PolicyOptions::default();
    let cfg = super::shell::policy_config(4, 8, &opts).unwrap();
    assert!(!cfg.migration);
    assert_eq!(cfg.context_switch, Some(Dur::ZERO));
    assert_eq!(cfg.machine.total_pes(), 32);
    assert!(
        cosched_policy::PolicyConfig::new(cfg.machine).migration,
        "the default differs"
    );
    for name in ["fcfs", "gang", "t3d"] {
        assert!(super::build_policy(name, 4, 8, &opts).is_ok(), "{name}");
    }
}

/// A core whose nodes register at time 0 but have not joined the tree yet; a node silent
/// for `silence` is not responding and down at once.
fn registered_only(nodes: u32, heartbeat: Dur, silence: Dur) -> Core {
    let fcfs = super::build_policy("fcfs", nodes, 1, &PolicyOptions::default()).unwrap();
    let cfg = CoreConfig {
        heartbeat,
        suspect_after: silence,
        down_after: silence,
        ..config(nodes, 1)
    };
    let mut c = Core::new(cfg, fcfs, t(0), Recovered::default()).unwrap();
    for n in 0..nodes {
        let reg = Register {
            version: Version::ours(),
            memory: 1 << 40,
            name: format!("n{n}"),
            pes: 1,
            addr: String::new(),
            jobs: Vec::new(),
            incarnation: 1,
        };
        c.on(t(0), Input::Register { req: n as u64, reg });
    }
    c.step(t(0));
    c
}

fn launches(fx: &[Effect]) -> Vec<(Vec<NodeId>, JobId)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: ToNode::Launch(l),
            } => Some((to.clone(), l.job)),
            _ => None,
        })
        .collect()
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
    assert_eq!(to_0, super::core::LAUNCH_TRIES as usize, "{sent:?}");
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

/// a time limit beyond the maximum is refused at submit with the bound
/// in the message (a client may send anything), and the longest one allowed leaves the wake-up
/// computation sane: the core sleeps until its next heartbeat, not in a loop.
#[test]
fn a_huge_time_limit_is_refused_and_the_longest_allowed_does_not_overflow() {
    let fcfs = super::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 1);
    let submit_limit = |c: &mut Core, req: u64, limit_us: i64| {
        let request = Request::Submit(Box::new(SubmitRequest {
            mem: None,
            procs: 1,
            time_limit_us: Some(limit_us),
            class: None,
            name: None,
            cmd: vec!["work".into()],
            cwd: "/".into(),
            user: None,
            io: Default::default(),
            sched: Default::default(),
            layout: None,
            hold: false,
        }));
        c.on_unstored(
            t(1),
            Input::Client {
                req,
                request,
                caller: Caller::ROOT,
            },
        );
        c.step(t(1))
            .into_iter()
            .find_map(|e| match e {
                Effect::Reply { req: r, resp } if r == req => Some(resp),
                _ => None,
            })
            .expect("a reply")
    };
    // 292,000 years: what overflowed the wake-up computation.
    match submit_limit(&mut c, 7, i64::MAX) {
        Response::Error(e) => assert!(e.contains("at most 366 days"), "{e}"),
        other => panic!("accepted: {other:?}"),
    }
    let longest = super::MAX_TIME_LIMIT.as_micros();
    assert!(matches!(
        submit_limit(&mut c, 8, longest),
        Response::Submitted(_)
    ));
    assert_eq!(state(&c, 1).state, JobState::Running);
    let wake = c.next_wake();
    assert!(
        wake > t(1) && wake <= t(1) + Dur::from_secs(3600),
        "{wake:?}"
    );
    // The limit itself still ends the job, a year later (the node still answering).
    let later = t(1) + super::MAX_TIME_LIMIT;
    c.on(later, Input::Heard(NodeId(0)));
    c.step(later);
    assert_eq!(state(&c, 1).state, JobState::TimedOut);
}

/// A fence answer: destinations, fence number, key–value pairs.
type FenceAnswer = (Vec<NodeId>, u64, Vec<(String, String)>);

/// The fence-done messages among effects, with their destinations.
fn fence_done(effects: &[Effect]) -> Vec<FenceAnswer> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: ToNode::FenceDone { seq, kvs, .. },
            } => Some((to.clone(), *seq, kvs.clone())),
            _ => None,
        })
        .collect()
}

fn fence(c: &mut Core, now: Time, node: u32, seq: u64, puts: &[(&str, &str)]) {
    let puts = puts
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    c.on(
        now,
        Input::FromNode {
            from: NodeId(node),
            msg: FromNode::Fence {
                job: JobId(1),
                seq,
                puts,
            },
        },
    );
}

#[test]
fn a_pmi_fence_is_answered_to_every_node_of_the_job_once_all_entered_it() {
    let fcfs = super::build_policy("fcfs", 3, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 3, 2);
    submit(&mut c, t(1), 4); // nodes 0 and 1
    c.step(t(1));
    fence(&mut c, t(2), 0, 1, &[("a", "1")]);
    fence(&mut c, t(2), 2, 1, &[("x", "9")]); // not a node of the job: ignored
    assert!(fence_done(&c.step(t(2))).is_empty(), "node 1 is not in yet");
    fence(&mut c, t(3), 1, 1, &[("b", "2")]);
    let kvs = vec![("a".to_string(), "1".to_string()), ("b".into(), "2".into())];
    assert_eq!(
        fence_done(&c.step(t(3))),
        vec![(vec![NodeId(0), NodeId(1)], 1, kvs.clone())]
    );
    // A node that rejoined repeats its fence: it alone gets the answer again.
    fence(&mut c, t(4), 1, 1, &[("b", "2")]);
    assert_eq!(fence_done(&c.step(t(4))), vec![(vec![NodeId(1)], 1, kvs)]);
    // The next fence starts afresh and carries only its own puts.
    fence(&mut c, t(5), 1, 2, &[]);
    fence(&mut c, t(5), 0, 2, &[("c", "3")]);
    let done = fence_done(&c.step(t(5)));
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].1, done[0].2.len()), (2, 1));
    // A stale fence after a newer one does nothing; neither does one of an ended job.
    fence(&mut c, t(6), 0, 1, &[]);
    assert!(fence_done(&c.step(t(6))).is_empty());
    exit(&mut c, t(7), 1, 0, 5);
    c.step(t(7));
    fence(&mut c, t(8), 0, 3, &[]);
    fence(&mut c, t(8), 1, 3, &[]);
    assert!(fence_done(&c.step(t(8))).is_empty(), "the job ended");
}

/// a job's environment is kept with its record (a restarted machine manager
/// launches a queued job with it, plus the node list and tasks per node) but left out of what
/// clients are shown.
#[test]
fn a_jobs_environment_survives_a_restart_and_is_not_shown_to_clients() {
    let mut c = registered_only(1, Dur::from_secs(3600), Dur::from_secs(36_000));
    let io = JobIo {
        env: Some(vec![("SECRET".into(), "s3".into())]),
        output: Some("o-%j-%t".into()),
        error: None,
        array: None,
        mpi: Default::default(),
        batch: false,
    };
    let request = Request::Submit(Box::new(SubmitRequest {
        mem: None,
        procs: 1,
        time_limit_us: None,
        class: None,
        name: None,
        cmd: vec!["work".into()],
        cwd: "/".into(),
        user: None,
        io: io.clone(),
        sched: Default::default(),
        layout: None,
        hold: false,
    }));
    c.on_unstored(
        t(1),
        Input::Client {
            req: 1,
            request,
            caller: Caller::ROOT,
        },
    );
    let fx = c.step(t(1));
    let saved: Vec<JobInfo> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::PersistJob(j) => Some((**j).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].io, io, "the database gets the whole environment");
    c.on_unstored(
        t(2),
        Input::Client {
            req: 2,
            request: Request::Jobs(JobQuery::default()),
            caller: Caller::ROOT,
        },
    );
    let shown = c.step(t(2)).into_iter().find_map(|e| match e {
        Effect::Reply {
            resp: Response::Jobs(JobsPage { jobs: j, .. }),
            ..
        } => Some(j),
        _ => None,
    });
    let shown = shown.expect("answered");
    assert_eq!(shown[0].io.env, None, "clients do not see the environment");
    assert_eq!(shown[0].io.output, io.output);

    // A restart from that record: the queued job is launched with its environment.
    let fcfs = super::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
    let cfg = config(1, 1);
    let recovered = Recovered {
        nodes: Vec::new(),
        jobs: saved,
        admin: Default::default(),
    };
    let mut c = Core::new(cfg, fcfs, t(3), recovered).unwrap();
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs: Vec::new(),
        incarnation: 1,
    };
    c.on(t(3), Input::Register { req: 9, reg });
    c.step(t(3));
    join(&mut c, t(4), 0, 1);
    let launch = sent(&c.step(t(4)))
        .into_iter()
        .find_map(|m| match m {
            ToNode::Launch(l) => Some(l),
            _ => None,
        })
        .expect("launched after the restart");
    assert_eq!(launch.io, io);
    let var = |k: &str| {
        launch
            .env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(var("COSCHED_JOB_NODELIST").as_deref(), Some("n0"));
    assert_eq!(var("COSCHED_TASKS_PER_NODE").as_deref(), Some("1"));
}

/// A submission of `procs` PEs with start conditions `sched`, unlimited.
fn sched_request(procs: u32, sched: Schedule) -> SubmitRequest {
    SubmitRequest {
        mem: None,
        procs,
        time_limit_us: None,
        class: None,
        name: Some("s".into()),
        cmd: vec!["work".into()],
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched,
        layout: None,
        hold: false,
    }
}

fn submit_sched(c: &mut Core, now: Time, procs: u32, sched: Schedule) {
    let request = Request::Submit(Box::new(sched_request(procs, sched)));
    c.on_unstored(
        now,
        Input::Client {
            req: 1,
            request,
            caller: Caller::ROOT,
        },
    );
}

fn launch_msgs(fx: &[Effect]) -> Vec<Launch> {
    sent(fx)
        .into_iter()
        .filter_map(|m| match m {
            ToNode::Launch(l) => Some(l),
            _ => None,
        })
        .collect()
}

/// The job the launches of `fx` start.
fn launched(fx: &[Effect]) -> Vec<JobId> {
    sent(fx)
        .into_iter()
        .filter_map(|m| match m {
            ToNode::Launch(l) => Some(l.job),
            _ => None,
        })
        .collect()
}

/// An array's throttle lets at most N tasks reach the policy at once; its tasks
/// get the array variables; `afterok` on a failed job ends the dependent without the policy
/// hearing of it; `--begin` holds a job until its time.
#[test]
fn arrays_dependencies_and_begin_times_are_held_back_from_the_policy() {
    let fcfs = super::build_policy("fcfs", 1, 4, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 4);
    let array = ArraySpec {
        indices: vec![1, 2, 3, 4, 5],
        throttle: Some(2),
    };
    submit_sched(
        &mut c,
        t(1),
        1,
        Schedule {
            array: Some(array),
            ..Default::default()
        },
    );
    let l = launch_msgs(&c.step(t(1)));
    assert_eq!(
        l.iter().map(|l| l.job.0).collect::<Vec<_>>(),
        [1, 2],
        "two of five with %2"
    );
    let env = |l: &Launch, k: &str| l.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(env(&l[1], "SLURM_ARRAY_TASK_ID").as_deref(), Some("2"));
    assert_eq!(env(&l[1], "COSCHED_ARRAY_JOB_ID").as_deref(), Some("1"));
    assert!(
        state(&c, 3)
            .reason
            .unwrap()
            .starts_with("JobArrayTaskLimit")
    );
    exit(&mut c, t(2), 1, 0, 0);
    let l = launch_msgs(&c.step(t(2)));
    assert_eq!(
        l.iter().map(|l| l.job.0).collect::<Vec<_>>(),
        [3],
        "one ended, one more"
    );

    // Job 6 fails; 7 waits on it with afterok, 8 on 7 (a chain), 9 with afternotok.
    submit_sched(&mut c, t(3), 1, Schedule::default());
    for (kind, on) in [
        (DepKind::AfterOk, 6),
        (DepKind::AfterOk, 7),
        (DepKind::AfterNotOk, 6),
    ] {
        let after = vec![Dependency {
            kind,
            job: JobId(on),
        }];
        submit_sched(
            &mut c,
            t(3),
            1,
            Schedule {
                after,
                ..Default::default()
            },
        );
    }
    let l = launch_msgs(&c.step(t(3)));
    assert_eq!(l.iter().map(|l| l.job.0).collect::<Vec<_>>(), [6]);
    assert_eq!(
        state(&c, 7).reason.as_deref(),
        Some("Dependency (afterok:6)")
    );
    exit(&mut c, t(4), 6, 0, 1);
    let l = launch_msgs(&c.step(t(4)));
    assert_eq!(
        l.iter().map(|l| l.job.0).collect::<Vec<_>>(),
        [9],
        "afternotok runs"
    );
    for j in [7, 8] {
        let s = state(&c, j);
        assert_eq!(s.state, JobState::Cancelled);
        assert!(
            s.error.unwrap().contains("dependency never satisfied"),
            "job {j}"
        );
        assert_eq!(s.record.start, None);
    }

    // A begin time ten seconds on; an unknown dependency is refused.
    let begin_us = Some(t(14).as_micros());
    submit_sched(
        &mut c,
        t(4),
        1,
        Schedule {
            begin_us,
            ..Default::default()
        },
    );
    exit(&mut c, t(4), 9, 0, 0);
    assert!(launch_msgs(&c.step(t(4))).iter().all(|l| l.job.0 != 10));
    let i = c.ledger().find(JobId(10)).unwrap();
    let reason = c.job_info(i, t(4)).reason.unwrap();
    assert_eq!(reason, "BeginTime (in 10s)");
    assert!(c.next_wake() <= t(14));
    assert!(launch_msgs(&c.step(t(14))).iter().any(|l| l.job.0 == 10));
    let after = vec![Dependency {
        kind: DepKind::AfterAny,
        job: JobId(99),
    }];
    submit_sched(
        &mut c,
        t(15),
        1,
        Schedule {
            after,
            ..Default::default()
        },
    );
    let fx = c.step(t(15));
    assert!(fx.iter().any(
        |e| matches!(e, Effect::Reply { resp: Response::Error(w), .. } if w.contains("no job 99"))
    ));
}

/// A deferred job's conditions are kept with its record: a restarted machine manager holds
/// it back again and releases it when they hold.
#[test]
fn a_deferred_job_stays_deferred_across_a_restart() {
    let fcfs = super::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 1);
    let begin_us = Some(t(100).as_micros());
    submit_sched(
        &mut c,
        t(1),
        1,
        Schedule {
            begin_us,
            ..Default::default()
        },
    );
    let saved: Vec<JobInfo> = c
        .step(t(1))
        .into_iter()
        .filter_map(|e| match e {
            Effect::PersistJob(j) => Some(*j),
            _ => None,
        })
        .collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].sched.begin_us, begin_us);

    let fcfs = super::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
    let cfg = config(1, 1);
    let recovered = Recovered {
        nodes: Vec::new(),
        jobs: saved,
        admin: Default::default(),
    };
    let mut c = Core::new(cfg, fcfs, t(3), recovered).unwrap();
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs: Vec::new(),
        incarnation: 1,
    };
    c.on(t(3), Input::Register { req: 9, reg });
    c.step(t(3));
    join(&mut c, t(4), 0, 1);
    assert!(
        launch_msgs(&c.step(t(4))).is_empty(),
        "not before its begin time"
    );
    let i = c.ledger().find(JobId(1)).unwrap();
    assert!(c.job_info(i, t(4)).reason.unwrap().starts_with("BeginTime"));
    assert!(c.next_wake() <= t(100));
    let l = launch_msgs(&c.step(t(100)));
    assert_eq!(l.iter().map(|l| l.job.0).collect::<Vec<_>>(), [1]);
}

/// a job belongs to the user the machine manager established, not to
/// one named in the request; only its owner or an administrator may cancel, hold, release or
/// read it, and only an administrator may shut the cluster down.
#[test]
fn only_the_owner_or_an_administrator_acts_on_a_job() {
    let fcfs = super::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 1);
    let alice = Caller {
        uid: 60001,
        gid: 60001,
        admin: false,
    };
    let bob = Caller {
        uid: 60002,
        gid: 60002,
        admin: false,
    };
    let mut next = 10;
    let mut ask = |c: &mut Core, request: Request, caller: Caller| -> Response {
        next += 1;
        let req = next;
        c.on_unstored(
            t(1),
            Input::Client {
                req,
                request,
                caller,
            },
        );
        c.step(t(1))
            .into_iter()
            .find_map(|e| match e {
                Effect::Reply { req: r, resp } if r == req => Some(resp),
                _ => None,
            })
            .expect("answered")
    };
    let submit = |user: Option<u32>| {
        Request::Submit(Box::new(SubmitRequest {
            mem: None,
            procs: 1,
            time_limit_us: None,
            class: None,
            name: None,
            cmd: vec!["work".into()],
            cwd: "/".into(),
            user,
            io: Default::default(),
            sched: Default::default(),
            layout: None,
            hold: false,
        }))
    };
    // A claim to be someone else is refused to a user...
    match ask(&mut c, submit(Some(0)), alice) {
        Response::Error(e) => assert!(e.contains("permission denied"), "{e}"),
        r => panic!("alice submitted as root: {r:?}"),
    }
    // ...and the job is the caller's whatever the request says of itself.
    let Response::Submitted(id) = ask(&mut c, submit(Some(alice.uid)), alice) else {
        panic!("not submitted")
    };
    let info = state(&c, id.0);
    assert_eq!((info.user, info.gid), (Some(alice.uid), Some(alice.gid)));
    for request in [
        Request::Cancel(id),
        Request::Suspend(id),
        Request::Resume(id),
        Request::Output {
            step: None,
            job: id,
            rank: 0,
            tail: false,
        },
    ] {
        match ask(&mut c, request.clone(), bob) {
            Response::Error(e) => assert!(
                e.contains(&format!("permission denied: job {id} belongs to")),
                "{request:?}: {e}"
            ),
            r => panic!("bob's {request:?} was served: {r:?}"),
        }
    }
    match ask(&mut c, Request::Shutdown, bob) {
        Response::Error(e) => assert!(e.contains("permission denied"), "{e}"),
        r => panic!("bob shut the cluster down: {r:?}"),
    }
    assert!(matches!(
        ask(&mut c, Request::Suspend(id), alice),
        Response::Done
    ));
    assert!(matches!(
        ask(&mut c, Request::Cancel(id), Caller::ROOT),
        Response::Done
    ));
    // An administrator submits as the user it names.
    let Response::Submitted(id2) = ask(&mut c, submit(Some(bob.uid)), Caller::ROOT) else {
        panic!("not submitted")
    };
    assert_eq!(state(&c, id2.0).user, Some(bob.uid));
}

/// A cancelled job completes (Slurm's COMPLETING): its record ends at once, but its PEs go to
/// the next job only when every rank has reported its exit — or, for the ranks of a node
/// whose NM process was replaced, when the new one registers (they died with the old one).
#[test]
fn a_cancelled_jobs_pes_are_given_again_only_once_its_ranks_are_gone() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 1);
    submit(&mut c, t(1), 2);
    assert_eq!(launched(&c.step(t(1))), [JobId(1)]);
    submit(&mut c, t(2), 1);
    c.step(t(2));
    c.on_unstored(
        t(3),
        Input::Client {
            req: 2,
            request: Request::Cancel(JobId(1)),
            caller: Caller::ROOT,
        },
    );
    assert!(
        launched(&c.step(t(3))).is_empty(),
        "started on PEs still in use"
    );
    assert_eq!(state(&c, 1).state, JobState::Cancelled);
    assert_eq!(state(&c, 1).record.end, Some(t(3)));
    exit(&mut c, t(4), 1, 0, 143);
    assert!(launched(&c.step(t(4))).is_empty(), "rank 1 still runs");
    // Node 1's NM was replaced: rank 1 went with the old one.
    c.on(
        t(5),
        Input::Register {
            req: 300,
            reg: Register {
                version: Version::ours(),
                memory: 1 << 40,
                name: "n1".into(),
                pes: 1,
                addr: String::new(),
                jobs: Vec::new(),
                incarnation: 2,
            },
        },
    );
    join(&mut c, t(5), 1, 2);
    assert_eq!(launched(&c.step(t(5))), [JobId(2)]);
}

/// Found by the chaos test with `--requeue`: a requeued job ran again while its first run's
/// ranks on the surviving nodes were still being killed, and reports of the first run were
/// taken for the second's. Here a 2-rank job on n0 and n1 loses n0: it goes back to the queue
/// only once n1 has reported its rank's exit (and n0 is back without its rank: it was
/// fenced), then runs again on n1 and n2; a repeated exit report and a late acknowledgement
/// of the first run must not count for the second.
#[test]
fn reports_of_an_earlier_run_do_not_count_for_the_requeued_run() {
    let fcfs = super::build_policy("fcfs", 3, 1, &PolicyOptions::default()).unwrap();
    let cfg = CoreConfig {
        heartbeat: Dur::from_secs(1),
        suspect_after: Dur::from_secs(3),
        down_after: Dur::from_secs(3),
        requeue: true,
        ..config(3, 1)
    };
    let mut c = Core::new(cfg, fcfs, t(0), Recovered::default()).unwrap();
    for n in 0..3 {
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
    let first: Vec<_> = sent(&c.step(t(0)))
        .into_iter()
        .filter_map(|m| match m {
            ToNode::Launch(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].run, 1);
    assert_eq!(
        first[0]
            .placement
            .iter()
            .map(|p| p.node)
            .collect::<Vec<_>>(),
        [NodeId(0), NodeId(1)]
    );
    for n in [0, 1] {
        let msg = FromNode::Launched {
            job: JobId(1),
            run: 1,
        };
        c.on(
            t(0),
            Input::FromNode {
                from: NodeId(n),
                msg,
            },
        );
    }
    // Nodes 1 and 2 answer, node 0 does not: at 4 it is down; the job is requeued only once
    // n1's rank (killed) has reported.
    for s in 1..=4 {
        for n in [1, 2] {
            c.on(t(s), Input::Heard(NodeId(n)));
        }
        let fx = c.step(t(s));
        assert!(launched(&fx).is_empty(), "launched again at {s} s");
        if s == 4 {
            let killed = sent(&fx)
                .into_iter()
                .any(|m| matches!(m, ToNode::Switch { kill, .. } if kill.contains(&JobId(1))));
            assert!(killed, "n1's rank of the lost job not killed");
        }
    }
    let first_exit = |c: &mut Core, now: Time| {
        let exit = RankExit {
            oom: false,
            rank: 1,
            code: Some(143),
            error: None,
        };
        let msg = FromNode::Exited {
            job: JobId(1),
            run: 1,
            exit,
        };
        c.on(
            now,
            Input::FromNode {
                from: NodeId(1),
                msg,
            },
        );
    };
    first_exit(&mut c, t(5));
    for n in [1, 2] {
        c.on(t(5), Input::Heard(NodeId(n)));
    }
    // A new node manager on n0: the first run's rank there died with the old one.
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs: Vec::new(),
        incarnation: 2,
    };
    c.on(t(5), Input::Register { req: 9, reg });
    let second: Vec<_> = sent(&c.step(t(5)))
        .into_iter()
        .filter_map(|m| match m {
            ToNode::Launch(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(
        second.len(),
        1,
        "launched again once its first run was gone"
    );
    assert_eq!(second[0].run, 2);
    assert_eq!(
        second[0]
            .placement
            .iter()
            .map(|p| p.node)
            .collect::<Vec<_>>(),
        [NodeId(1), NodeId(2)]
    );
    // The first run's exit again (as a node repeats its exits on joining) and a late
    // acknowledgement of its launch.
    first_exit(&mut c, t(6));
    let ack = FromNode::Launched {
        job: JobId(1),
        run: 1,
    };
    c.on(
        t(6),
        Input::FromNode {
            from: NodeId(1),
            msg: ack,
        },
    );
    for n in [1, 2] {
        c.on(t(6), Input::Heard(NodeId(n)));
    }
    c.step(t(6));
    assert_eq!(
        state(&c, 1).state,
        JobState::Running,
        "ended by the first run's exit"
    );
    // Unacknowledged by node 1 (only the first run's ack came): sent to it again.
    let mut again = Vec::new();
    for s in [7, 8] {
        for n in [1, 2] {
            c.on(t(s), Input::Heard(NodeId(n)));
        }
        again.extend(launches(&c.step(t(s))));
    }
    assert!(
        again
            .iter()
            .any(|(to, j)| *j == JobId(1) && to.contains(&NodeId(1))),
        "the second run's launch was not resent to node 1: {again:?}"
    );
}

/// an ended job is forgotten `keep_jobs` after its end — its command
/// line leaves memory, a query asks the shell to take its record from the database, its
/// output is refused with the reason, and nothing shorter overwrites its database record.
#[test]
fn an_ended_job_is_forgotten_after_the_retention() {
    let fcfs = super::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 1);
    // Set after the first step: ended jobs are next looked at a minute (the most between two
    // looks) after it.
    c.cfg.keep_jobs = Dur::from_secs(10);
    submit(&mut c, t(1), 1);
    c.step(t(1));
    c.on(
        t(1),
        Input::FromNode {
            from: NodeId(0),
            msg: FromNode::Launched {
                job: JobId(1),
                run: 1,
            },
        },
    );
    exit(&mut c, t(2), 1, 0, 0);
    c.step(t(2));
    let ask = |c: &mut Core, now: Time, request: Request| {
        c.on_unstored(
            now,
            Input::Client {
                req: 7,
                request,
                caller: Caller::ROOT,
            },
        );
        c.step(now)
    };
    // Within the retention the record is answered from memory, whole.
    let effects = ask(&mut c, t(5), Request::Jobs(JobQuery::default()));
    assert!(effects.iter().any(|e| matches!(e,
        Effect::Reply { resp: Response::Jobs(p), .. } if p.jobs[0].cmd == ["work"])));
    let effects = c.step(t(61));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Log(l) if l.contains("forgot 1 jobs"))),
        "{effects:?}"
    );
    assert!(c.side[0].forgotten && c.side[0].cmd.is_empty());
    let effects = ask(&mut c, t(62), Request::Jobs(JobQuery::default()));
    let (page, from_db) = effects
        .iter()
        .find_map(|e| match e {
            Effect::ReplyJobs { page, from_db, .. } => Some((page, from_db)),
            _ => None,
        })
        .expect("answered through the database");
    assert_eq!(from_db, &[0]);
    assert_eq!(page.jobs[0].state, JobState::Completed);
    let effects = ask(
        &mut c,
        t(63),
        Request::Output {
            step: None,
            job: JobId(1),
            rank: 0,
            tail: false,
        },
    );
    assert!(effects.iter().any(|e| matches!(e,
        Effect::Reply { resp: Response::Error(w), .. } if w.contains("--keep-jobs"))));
    let effects = ask(&mut c, t(64), Request::Cancel(JobId(1)));
    assert!(!effects.iter().any(|e| matches!(e, Effect::PersistJob(_))));
}

/// Asks the core for a forecast at `now` and returns its answer.
fn ask_forecast(c: &mut Core, now: Time) -> Response {
    c.on_unstored(
        now,
        Input::Client {
            req: 777,
            request: Request::Forecast,
            caller: Caller::ROOT,
        },
    );
    c.step(now)
        .into_iter()
        .find_map(|e| match e {
            Effect::Reply { req: 777, resp } => Some(resp),
            _ => None,
        })
        .expect("answered")
}

/// `queue --forecast` on the core: FCFS on one node of 4 PEs, every job's time limit
/// 1000 s (`submit`). Job 1 (4 PEs) starts at 0; jobs 2 (2 PEs) and 3 (2 PEs) wait, then run
/// side by side from 1000; job 4 (4 PEs) follows at 2000. Asked at 10 s, the forecast says so
/// exactly, and the live state is untouched: asked again later, after job 1 ended early
/// at 400, everything moves up by 600 s.
#[test]
fn forecast_of_an_fcfs_queue_is_exact_and_leaves_the_live_state_alone() {
    let fcfs = cosched_policy::registry::build(
        "fcfs",
        &cosched_policy::PolicyConfig::new(cosched_core::MachineShape::flat(1, 4)),
    )
    .unwrap();
    let mut c = core(fcfs, 1, 4);
    for procs in [4, 2, 2, 4] {
        submit(&mut c, t(0), procs);
    }
    c.step(t(0));
    let expect = |c: &mut Core, now: i64, shift: i64| {
        let Response::Forecast(f) = ask_forecast(c, t(now)) else {
            panic!("no forecast");
        };
        let got: Vec<(u64, Option<i64>, Option<i64>)> = f
            .iter()
            .map(|e| {
                (
                    e.job.0,
                    e.start.map(|s| s.as_secs()),
                    e.end.map(|s| s.as_secs()),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, Some(0), Some(1000 - shift)),
                (2, Some(1000 - shift), Some(2000 - shift)),
                (3, Some(1000 - shift), Some(2000 - shift)),
                (4, Some(2000 - shift), Some(3000 - shift)),
            ][usize::from(shift > 0)..]
                .to_vec()
        );
    };
    expect(&mut c, 10, 0);
    expect(&mut c, 20, 0);
    exit(&mut c, t(400), 1, 0, 0);
    for rank in 1..4 {
        exit(&mut c, t(400), 1, rank, 0);
    }
    c.step(t(400));
    expect(&mut c, 401, 600);
}

/// A copy of an external policy cannot decide (it cannot share the child process): the
/// forecast says it is not available instead of a schedule in which nothing starts.
#[test]
fn forecast_is_refused_for_a_policy_whose_copy_cannot_decide() {
    #[derive(Clone)]
    struct Uncopyable(bool);
    impl Policy for Uncopyable {
        fn name(&self) -> &str {
            "external:./my-policy"
        }
        fn observe(&mut self, _now: Time, _e: Event) {}
        fn decide(&mut self, _now: Time, _out: &mut Vec<Decision>) {}
        fn queue(&self) -> Vec<JobId> {
            Vec::new()
        }
        fn failure(&self) -> Option<String> {
            self.0.then(|| "a copy cannot share the child".to_string())
        }
        fn boxed_clone(&self) -> Box<dyn Policy> {
            Box::new(Uncopyable(true))
        }
    }
    let mut c = core(Box::new(Uncopyable(false)), 1, 1);
    submit(&mut c, t(0), 1);
    match ask_forecast(&mut c, t(1)) {
        Response::Error(e) => assert!(
            e.contains("forecast not available for external policies"),
            "{e}"
        ),
        other => panic!("forecast from a copy that cannot decide: {other:?}"),
    }
}

/// A policy that breaks a promise (starts a job on PEs another job holds): the decision is
/// refused with a clear log line, and the job it was about, still waiting, ends as failed
/// with the refusal as its error instead of waiting forever.
#[test]
fn a_broken_promise_is_logged_and_its_job_does_not_wait_forever() {
    let pes = PeSet::contiguous(0, 2);
    let p = script(vec![(
        t(1),
        vec![
            Decision::Start {
                job: JobId(1),
                pes: pes.clone(),
                slot: None,
            },
            Decision::Start {
                job: JobId(2),
                pes: pes.clone(),
                slot: None,
            },
        ],
    )]);
    let mut c = core(p, 1, 2);
    submit(&mut c, t(1), 2);
    submit(&mut c, t(1), 2);
    let fx = c.step(t(1));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Log(l)
            if l.contains("mm: decision refused: policy script broke its contract")
                && l.contains("job 2"))),
        "{fx:?}"
    );
    assert_eq!(state(&c, 1).state, JobState::Running);
    let j = state(&c, 2);
    assert_eq!(j.state, JobState::Failed, "{j:?}");
    assert!(
        j.error
            .as_deref()
            .is_some_and(|e| e.starts_with("the policy broke its contract")),
        "{j:?}"
    );
}

/// A policy that stops deciding (an external policy whose child died): the failure is logged
/// once and the waiting jobs end as failed with it, rather than wait for decisions that
/// will never come.
#[derive(Clone)]
struct Dies {
    dead: bool,
}

impl Policy for Dies {
    fn name(&self) -> &str {
        "external:python3 broken.py"
    }
    fn observe(&mut self, _now: Time, _e: Event) {}
    fn decide(&mut self, now: Time, _out: &mut Vec<Decision>) {
        self.dead |= now >= t(2);
    }
    fn queue(&self) -> Vec<JobId> {
        Vec::new()
    }
    fn failure(&self) -> Option<String> {
        self.dead
            .then(|| "its process exited (status 1) while answering".to_string())
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

#[test]
fn a_failed_policy_is_logged_once_and_its_waiting_jobs_end() {
    let mut c = core(Box::new(Dies { dead: false }), 1, 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    assert_eq!(state(&c, 1).state, JobState::Queued);
    submit(&mut c, t(2), 1);
    let fx = c.step(t(2));
    let logs: Vec<&String> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Log(l) if l.contains("failed and decides nothing more") => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(logs.len(), 1, "{fx:?}");
    assert!(logs[0].contains("external:python3 broken.py") && logs[0].contains("exited"));
    for job in [1, 2] {
        let j = state(&c, job);
        assert_eq!(j.state, JobState::Failed, "{j:?}");
        assert!(j.error.as_deref().unwrap().contains("the policy failed"));
    }
    // Logged once: a later submission ends too, without a second line.
    submit(&mut c, t(3), 1);
    let fx = c.step(t(3));
    assert_eq!(state(&c, 3).state, JobState::Failed);
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Log(l) if l.contains("decides nothing more"))),
        "{fx:?}"
    );
}

/// Under a node scheme that runs every job of the matrix (`local`, `sb`), a job the
/// policy only placed runs all the same; the nodes report it, and its record says so: a start
/// time although its row never became active, no suspended time but the stops the nodes
/// reported, and the state clients see follows the nodes, not the phase. A node's report of
/// an earlier run counts for nothing, and a job no node reports on keeps the policy's
/// accounting (the `gs` scheme sends no reports).
#[test]
fn node_reports_of_run_state_drive_the_record_of_a_placed_job() {
    let pes = PeSet::contiguous(0, 4);
    let p = script(vec![(
        t(1),
        vec![
            Decision::Start {
                job: JobId(1),
                pes: pes.clone(),
                slot: Some(0),
            },
            Decision::Place {
                job: JobId(2),
                pes,
                slot: Some(1),
            },
        ],
    )]);
    let mut c = core(p, 2, 2);
    submit(&mut c, t(1), 4);
    submit(&mut c, t(1), 4);
    c.step(t(1));
    assert_eq!(state(&c, 2).state, JobState::Suspended);
    let runs = |c: &mut Core, now: Time, node: u32, run: u32, runs: bool| {
        let msg = FromNode::Runs {
            job: JobId(2),
            run,
            runs,
        };
        c.on(
            now,
            Input::FromNode {
                from: NodeId(node),
                msg,
            },
        );
        c.step(now);
    };
    runs(&mut c, t(2), 0, 7, true);
    assert_eq!(state(&c, 2).record.start, None, "another run's report");
    runs(&mut c, t(2), 0, 1, true);
    runs(&mut c, t(2), 1, 1, true);
    assert_eq!(state(&c, 2).record.start, Some(t(2)));
    assert_eq!(state(&c, 2).state, JobState::Running);
    // Stopped on one node only: it still runs; on both: stopped.
    runs(&mut c, t(3), 0, 1, false);
    assert_eq!(state(&c, 2).state, JobState::Running);
    runs(&mut c, t(4), 1, 1, false);
    assert_eq!(state(&c, 2).state, JobState::Suspended);
    runs(&mut c, t(5), 1, 1, true);
    for r in 0..4 {
        let exit = RankExit {
            oom: false,
            rank: r,
            code: Some(0),
            error: None,
        };
        let msg = FromNode::Exited {
            job: JobId(2),
            run: 1,
            exit,
        };
        c.on(
            t(6),
            Input::FromNode {
                from: NodeId(r / 2),
                msg,
            },
        );
    }
    c.step(t(6));
    let j = state(&c, 2);
    assert_eq!(j.state, JobState::Completed);
    assert_eq!((j.record.start, j.record.end), (Some(t(2)), Some(t(6))));
    assert_eq!(j.record.suspended, Dur::from_secs(1));
    assert_eq!(j.run_us, Dur::from_secs(3).as_micros());
    // Job 1 had no reports: the policy's accounting, running since 1.
    let j = state(&c, 1);
    assert_eq!((j.state, j.record.start), (JobState::Running, Some(t(1))));
    assert_eq!(j.record.suspended, Dur::ZERO);
}

/// A node reports a job's run state at every gang switch (every millisecond at 1-ms quanta):
/// the reports reach the database together, one record write at most `RUNS_WRITE_EVERY` after
/// the first unwritten one, not one write each; what is written then is the accounting of
/// every report so far.
#[test]
fn run_reports_are_written_together_not_one_record_each() {
    let pes = PeSet::contiguous(0, 2);
    let p = script(vec![(
        t(1),
        vec![Decision::Place {
            job: JobId(1),
            pes,
            slot: Some(0),
        }],
    )]);
    let mut c = core(p, 1, 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    let writes = |effects: Vec<Effect>| -> Vec<JobInfo> {
        effects
            .into_iter()
            .filter_map(|e| match e {
                Effect::PersistJob(j) if j.record.id == JobId(1) => Some(*j),
                _ => None,
            })
            .collect()
    };
    let start = t(2);
    let mut written = Vec::new();
    let mut at = start;
    for k in 0..200 {
        at = start + Dur::from_millis(k * 5);
        let msg = FromNode::Runs {
            job: JobId(1),
            run: 1,
            runs: k % 2 == 0,
        };
        c.on(
            at,
            Input::FromNode {
                from: NodeId(0),
                msg,
            },
        );
        written.extend(writes(c.step(at)).into_iter().map(|j| (at, j)));
    }
    let due = start + super::core::RUNS_WRITE_EVERY;
    assert!(
        written.len() <= 1,
        "200 reports in 1 s written {} times",
        written.len()
    );
    if written.is_empty() {
        written.extend(writes(c.step(due)).into_iter().map(|j| (due, j)));
    }
    let [(when, info)] = written.as_slice() else {
        panic!("the reports were never written: {written:?}");
    };
    assert!(*when <= due.max(at), "written at {when:?}, due by {due:?}");
    // Every other 5-ms report ran the job: 100 run phases of 5 ms before the write.
    assert_eq!(info.record.start, Some(start));
    let memory = c.job_info(c.ledger().find(JobId(1)).unwrap(), *when);
    assert_eq!(info.run_us, memory.run_us);
    assert!(
        info.run_us >= Dur::from_millis(495).as_micros(),
        "run time written {} us",
        info.run_us
    );
}

/// A core on `nodes` × `pes` under `policy` with these liveness settings (heartbeat 1 s),
/// every node registered and in the tree at time 0, with `requeue` as given.
fn live_core(policy: &str, nodes: u32, pes: u32, suspect: i64, down: i64, requeue: bool) -> Core {
    let p = super::build_policy(policy, nodes, pes, &PolicyOptions::default()).unwrap();
    let cfg = CoreConfig {
        heartbeat: Dur::from_secs(1),
        suspect_after: Dur::from_secs(suspect),
        down_after: Dur::from_secs(down),
        requeue,
        ..config(nodes, pes)
    };
    let mut c = Core::new(cfg, p, t(0), Recovered::default()).unwrap();
    for n in 0..nodes {
        let reg = Register {
            version: Version::ours(),
            memory: 1 << 40,
            name: format!("n{n}"),
            pes,
            addr: String::new(),
            jobs: Vec::new(),
            incarnation: 1,
        };
        c.on(
            t(0),
            Input::Register {
                req: 100 + n as u64,
                reg,
            },
        );
        join(&mut c, t(0), n, 1);
    }
    c.step(t(0));
    c
}

/// Steps the core at each whole second of `secs`, the nodes of `answering` answering the
/// heartbeats; returns the jobs launched meanwhile.
fn run_answering(
    c: &mut Core,
    secs: std::ops::RangeInclusive<i64>,
    answering: &[u32],
) -> Vec<JobId> {
    let mut out = Vec::new();
    for s in secs {
        for &n in answering {
            c.on(t(s), Input::Heard(NodeId(n)));
        }
        out.extend(launched(&c.step(t(s))));
    }
    out
}

/// The nodes `nodes` acknowledge the launch of run 1 of `job`.
fn ack(c: &mut Core, now: Time, job: u64, nodes: &[u32]) {
    for &n in nodes {
        let msg = FromNode::Launched {
            job: JobId(job),
            run: 1,
        };
        c.on(
            now,
            Input::FromNode {
                from: NodeId(n),
                msg,
            },
        );
    }
}

fn node_state(c: &Core, n: usize) -> String {
    c.status().nodes[n].state.clone()
}

/// late is not dead. A node silent past
/// `suspect_after` but not `down_after` is not responding — its job keeps running, nothing
/// new starts on it, `status` says so — and once it answers again it is up with its job
/// intact, and takes new work again.
#[test]
fn a_node_that_is_not_responding_keeps_its_jobs_and_gets_no_new_ones() {
    let mut c = live_core("fcfs", 2, 2, 2, 10, false);
    submit(&mut c, t(0), 3); // PEs 0-2: both of node 0, one of node 1
    assert_eq!(launched(&c.step(t(0))), [JobId(1)]);
    ack(&mut c, t(0), 1, &[0, 1]);
    // Node 1 is silent from 0 s on: not responding at 3 s.
    run_answering(&mut c, 1..=3, &[0]);
    assert_eq!(node_state(&c, 1), "not_responding");
    submit(&mut c, t(4), 1); // PE 3 is free, but on node 1
    assert!(
        run_answering(&mut c, 4..=4, &[0]).is_empty(),
        "started on it"
    );
    assert_eq!(state(&c, 2).state, JobState::Queued);
    assert_eq!(state(&c, 1).state, JobState::Running);
    // It answers again at 5 s (before `down_after`): up, its job intact, the waiting job
    // starts there.
    assert_eq!(run_answering(&mut c, 5..=5, &[0, 1]), [JobId(2)]);
    ack(&mut c, t(5), 2, &[1]);
    assert_eq!(node_state(&c, 1), "up");
    run_answering(&mut c, 6..=30, &[0, 1]);
    assert_eq!(state(&c, 1).state, JobState::Running);
    assert_eq!(state(&c, 1).error, None);
}

/// a machine manager that was itself stalled (its process stopped, or
/// starved of CPU) blames no node for the silence it did not hear: the deadlines move by
/// the stall, an exit that waited for it ends its job as it ended, and a node that stays
/// silent afterwards is still found out, counting from the end of the stall.
#[test]
fn a_stalled_machine_manager_blames_no_node_for_its_own_silence() {
    let mut c = live_core("fcfs", 2, 1, 2, 3, false);
    submit(&mut c, t(0), 1); // node 0
    submit(&mut c, t(0), 1); // node 1
    assert_eq!(launched(&c.step(t(0))), [JobId(1), JobId(2)]);
    ack(&mut c, t(0), 1, &[0]);
    ack(&mut c, t(0), 2, &[1]);
    run_answering(&mut c, 1..=2, &[0, 1]);
    // Nothing runs from just after 2 s until 10 s (the next wake-up was 3 s). Then what
    // arrived meanwhile is taken in: job 1's exit (it completed during the stall) and node
    // 0's answer; node 1's is not there yet.
    exit(&mut c, t(10), 1, 0, 0);
    c.on(t(10), Input::Heard(NodeId(0)));
    c.step(t(10));
    assert_eq!(state(&c, 1).state, JobState::Completed);
    assert_eq!(state(&c, 2).state, JobState::Running);
    assert_eq!(
        (node_state(&c, 0), node_state(&c, 1)),
        ("up".into(), "up".into())
    );
    // Node 1 never answers again: its silence counts from 9 s (2 s before the stall, 7 s
    // of stall): not responding at 12 s, down at 13 s.
    run_answering(&mut c, 11..=11, &[0]);
    assert_eq!(node_state(&c, 1), "up");
    run_answering(&mut c, 12..=12, &[0]);
    assert_eq!(node_state(&c, 1), "not_responding");
    assert_eq!(state(&c, 2).state, JobState::Running);
    run_answering(&mut c, 13..=13, &[0]);
    let j = state(&c, 2);
    assert_eq!((j.state, j.record.end), (JobState::NodeFailed, Some(t(13))));
}

/// The set-up of the requeue fencing tests: 3 nodes of 1 PE with `--requeue`, not
/// responding after 2 s, down after 5 s. A 2-rank job runs on n0 and n1; n0 stops
/// answering at 0 s (its node manager is stopped; its rank runs on). At 6 s n0 is declared
/// down and n1's rank is killed; n1 reports its exit at 7 s. Nothing has started again.
fn requeued_with_n0_fenced() -> Core {
    let mut c = live_core("fcfs", 3, 1, 2, 5, true);
    submit(&mut c, t(0), 2);
    assert_eq!(launched(&c.step(t(0))), [JobId(1)]);
    ack(&mut c, t(0), 1, &[0, 1]);
    assert!(run_answering(&mut c, 1..=6, &[1, 2]).is_empty());
    assert_eq!(node_state(&c, 0), "down");
    let exit = RankExit {
        oom: false,
        rank: 1,
        code: Some(143),
        error: None,
    };
    let msg = FromNode::Exited {
        job: JobId(1),
        run: 1,
        exit,
    };
    c.on(
        t(7),
        Input::FromNode {
            from: NodeId(1),
            msg,
        },
    );
    assert!(
        run_answering(&mut c, 7..=7, &[1, 2]).is_empty(),
        "its rank on n0 may still run"
    );
    c
}

/// with `--requeue`, no two runs of a job overlap. A job lost with a
/// node declared down starts again only once its previous run is known gone there: the
/// node comes back still running the old rank, is told to kill it (fenced) and is not
/// accepted until it holds nothing; only then does the job run again, as run 2.
#[test]
fn a_requeued_job_starts_again_only_once_its_fenced_node_is_back_without_the_old_run() {
    let mut c = requeued_with_n0_fenced();
    let running = vec![HeldJob {
        job: JobId(1),
        run: 1,
        ranks: vec![RankExit {
            oom: false,
            rank: 0,
            code: None,
            error: None,
        }],
    }];
    let reg = |jobs| Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs,
        incarnation: 1,
    };
    c.on(
        t(8),
        Input::Register {
            req: 1,
            reg: reg(running),
        },
    );
    c.on(t(8), Input::Heard(NodeId(1)));
    c.on(t(8), Input::Heard(NodeId(2)));
    let fx = c.step(t(8));
    let fence = RegisterReply::Fence {
        jobs: vec![JobId(1)],
        kill_wait_us: Dur::from_secs(5).as_micros(),
    };
    assert_eq!(registered(&fx, 1), Some(fence));
    assert!(
        launched(&fx).is_empty(),
        "started again while its old rank runs"
    );
    assert_eq!(node_state(&c, 0), "down");
    // It killed the rank: back without it, it is accepted, and the job starts again on
    // the nodes in the tree.
    c.on(
        t(9),
        Input::Register {
            req: 2,
            reg: reg(Vec::new()),
        },
    );
    c.on(t(9), Input::Heard(NodeId(1)));
    c.on(t(9), Input::Heard(NodeId(2)));
    let fx = c.step(t(9));
    assert!(matches!(
        registered(&fx, 2),
        Some(RegisterReply::Accepted { .. })
    ));
    let again = launch_msgs(&fx);
    assert_eq!(again.len(), 1, "{fx:?}");
    assert_eq!(again[0].run, 2);
    let on: Vec<NodeId> = again[0].placement.iter().map(|p| p.node).collect();
    assert_eq!(on, [NodeId(1), NodeId(2)]);
}

/// The membership epoch a registration's acceptance gives the node.
fn member_since(fx: &[Effect], req: u64) -> u64 {
    match registered(fx, req) {
        Some(RegisterReply::Accepted { epoch, .. }) => epoch,
        other => panic!("not accepted: {other:?}"),
    }
}

/// The launch of a run since requeued may still wait on a stopped node's link when the node
/// comes back without it. The registration that releases the requeue begins a new
/// membership, later than every message sent before, so the node drops that launch
/// (nm/tests/registration.rs) rather than start the old run beside the new one; a node that
/// only lost its parent keeps its membership, and what was sent to it stands.
#[test]
fn a_fenced_node_back_without_the_old_run_begins_a_membership_later_than_the_old_launch() {
    let mut c = requeued_with_n0_fenced();
    // Every message of the first run (its launch at 0 s) was stamped with at most this.
    let before = c.tree_epoch();
    let reg = |incarnation, jobs| Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs,
        incarnation,
    };
    c.on(
        t(8),
        Input::Register {
            req: 1,
            reg: reg(1, Vec::new()),
        },
    );
    c.on(t(8), Input::Heard(NodeId(1)));
    c.on(t(8), Input::Heard(NodeId(2)));
    let fx = c.step(t(8));
    let since = member_since(&fx, 1);
    assert!(since > before, "{since} <= {before}");
    assert_eq!(since, c.tree_epoch());
    let again = launch_msgs(&fx);
    assert_eq!(
        again.len(),
        1,
        "the job starts again in the same step: {fx:?}"
    );
    assert_eq!(again[0].run, 2);
    // n0 loses its parent and registers again, the same process holding nothing the records
    // gave up: its membership goes on.
    join(&mut c, t(9), 0, 1);
    c.on(
        t(9),
        Input::Register {
            req: 2,
            reg: reg(1, Vec::new()),
        },
    );
    assert_eq!(member_since(&c.step(t(9)), 2), since);
    // A new node manager process begins a new one.
    c.on(
        t(10),
        Input::Register {
            req: 3,
            reg: reg(2, Vec::new()),
        },
    );
    let fx = c.step(t(10));
    assert_eq!(member_since(&fx, 3), c.tree_epoch());
    assert!(member_since(&fx, 3) > since);
}

/// What happens when a fenced node never comes back: the job waits for
/// it `down_after` after it was declared down (2 × `down_after` of silence in all), then
/// its old run there is taken for gone and it starts again.
#[test]
fn a_requeued_job_whose_fenced_node_never_returns_starts_again_down_after_later() {
    let mut c = requeued_with_n0_fenced();
    // Declared down at 6 s: the job waits until 11 s.
    assert!(run_answering(&mut c, 8..=10, &[1, 2]).is_empty());
    assert_eq!(run_answering(&mut c, 11..=11, &[1, 2]), [JobId(1)]);
    // The node stays fenced: if it ever comes back running the old rank, it kills it first.
    let running = vec![HeldJob {
        job: JobId(1),
        run: 1,
        ranks: vec![RankExit {
            oom: false,
            rank: 0,
            code: None,
            error: None,
        }],
    }];
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs: running,
        incarnation: 1,
    };
    c.on(t(12), Input::Register { req: 3, reg });
    assert!(matches!(
        registered(&c.step(t(12)), 3),
        Some(RegisterReply::Fence { .. })
    ));
}

/// A launch sent to a node that then stops answering is neither resent nor counted against
/// the job while the node is not responding (it waits in the node's link like everything
/// sent there): the job keeps its place until the node answers, instead of failing after
/// three unacknowledged tries.
#[test]
fn a_launch_to_a_node_that_is_not_responding_waits_for_it() {
    let mut c = live_core("fcfs", 1, 1, 2, 60, false);
    submit(&mut c, t(0), 1);
    let mut sent = launched(&c.step(t(0)));
    sent.extend(run_answering(&mut c, 1..=40, &[]));
    assert!(sent.len() <= 2, "sent {} times", sent.len());
    assert_eq!(node_state(&c, 0), "not_responding");
    assert_eq!(state(&c, 1).state, JobState::Running);
    ack(&mut c, t(41), 1, &[0]);
    run_answering(&mut c, 41..=50, &[0]);
    assert_eq!(node_state(&c, 0), "up");
    let j = state(&c, 1);
    assert_eq!((j.state, j.error), (JobState::Running, None));
}

/// `cosched output` of a rank on a node that is not responding asks the
/// node all the same, and if it does not answer says that it is not responding and what to
/// do, rather than a bare timeout.
#[test]
fn output_from_a_node_that_is_not_responding_says_so() {
    let mut c = live_core("fcfs", 1, 1, 2, 60, false);
    submit(&mut c, t(0), 1);
    c.step(t(0));
    run_answering(&mut c, 1..=3, &[]);
    assert_eq!(node_state(&c, 0), "not_responding");
    let request = Request::Output {
        step: None,
        job: JobId(1),
        rank: 0,
        tail: false,
    };
    c.on(
        t(4),
        Input::Client {
            req: 77,
            request,
            caller: Caller::ROOT,
        },
    );
    let fx = c.step(t(4));
    assert!(
        sent(&fx)
            .iter()
            .any(|m| matches!(m, ToNode::FetchOutput { .. })),
        "not asked: {fx:?}"
    );
    let mut answer = None;
    for s in 5..=10 {
        for e in c.step(t(s)) {
            if let Effect::Reply { req: 77, resp } = e {
                answer = Some(resp);
            }
        }
    }
    match answer {
        Some(Response::Error(e)) => assert!(e.contains("not responding"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// A job whose begin time has passed but which still waits for a dependency does not make
/// the core ask to be woken in the past: the machine manager would spin on it, and no stall
/// of its own is counted from such quick steps (the nodes' deadlines still run).
#[test]
fn a_begin_time_past_while_a_dependency_waits_does_not_wake_the_core_in_a_loop() {
    let mut c = live_core("fcfs", 1, 1, 2, 3, false);
    submit(&mut c, t(0), 1);
    assert_eq!(launched(&c.step(t(0))), [JobId(1)]);
    ack(&mut c, t(0), 1, &[0]);
    let sched = Schedule {
        after: vec![Dependency {
            kind: DepKind::AfterOk,
            job: JobId(1),
        }],
        begin_us: Some(t(1).as_micros()),
        array: None,
    };
    submit_sched(&mut c, t(0), 1, sched);
    c.step(t(0));
    run_answering(&mut c, 1..=2, &[0]);
    assert!(c.next_wake() > t(2), "wakes at {:?}", c.next_wake());
    // Many quick steps do not hold the silent node's deadline still: not responding at 5 s,
    // down at 6 s, as without them.
    let mut now = t(2);
    while now < t(6) {
        now += Dur::from_millis(10);
        c.step(now);
    }
    assert_eq!(node_state(&c, 0), "down");
    assert_eq!(state(&c, 1).state, JobState::NodeFailed);
}

/// Found by the chaos test with `--requeue`: a job whose node manager was replaced was
/// requeued and started again within the one step of the new registration, and the kill
/// of its first run, still in that step's multi-context switch (one message to the nodes of
/// every signal of the step), reached its second run's new node after the launch and killed
/// it (exit 143, the job failed). The first run's ranks are gone once it goes back to the
/// queue; what is left of them is its forget's to kill.
#[test]
fn a_job_requeued_and_started_again_in_one_step_is_not_killed_by_its_first_runs_kill() {
    let mut c = live_core("fcfs", 3, 1, 60, 120, true);
    submit(&mut c, t(0), 1); // n0
    submit(&mut c, t(0), 1); // n1
    assert_eq!(launched(&c.step(t(0))), [JobId(1), JobId(2)]);
    ack(&mut c, t(0), 1, &[0]);
    ack(&mut c, t(0), 2, &[1]);
    // A user's suspend of job 2 in the same step puts n1 in the step's switch too.
    c.on_unstored(
        t(1),
        Input::Client {
            req: 5,
            request: Request::Suspend(JobId(2)),
            caller: Caller::ROOT,
        },
    );
    // n0's node manager was killed and restarted: job 1's rank there is gone.
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 1,
        addr: String::new(),
        jobs: Vec::new(),
        incarnation: 2,
    };
    c.on(t(1), Input::Register { req: 6, reg });
    join(&mut c, t(1), 0, 2);
    let fx = c.step(t(1));
    let again = launch_msgs(&fx);
    assert_eq!(
        again.iter().map(|l| (l.job, l.run)).collect::<Vec<_>>(),
        [(JobId(1), 2)]
    );
    for m in sent(&fx) {
        if let ToNode::Switch { kill, .. } = m {
            assert!(
                !kill.contains(&JobId(1)),
                "its second run is killed: {fx:?}"
            );
        }
    }
}

/// A client's request as the shell passes it: the change it stages (if any) is answered
/// with `written` at once. Returns the records the change wanted durable and the answer.
fn change(
    c: &mut Core,
    now: Time,
    req: u64,
    request: Request,
    written: Result<(), String>,
) -> (Vec<JobInfo>, Response) {
    let w = c.on(
        now,
        Input::Client {
            req,
            request,
            caller: Caller::ROOT,
        },
    );
    let jobs = w.as_ref().map(|w| w.jobs.clone()).unwrap_or_default();
    if let Some(w) = w {
        c.on(
            now,
            Input::Written {
                req: w.req,
                result: written,
            },
        );
    }
    let fx = c.step(now);
    let resp = fx
        .into_iter()
        .find_map(|e| match e {
            Effect::Reply { req: r, resp } if r == req => Some(resp),
            _ => None,
        })
        .expect("answered");
    (jobs, resp)
}

fn one_pe_job() -> Request {
    Request::Submit(Box::new(SubmitRequest {
        mem: None,
        procs: 1,
        time_limit_us: None,
        class: None,
        name: None,
        cmd: vec!["work".into()],
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched: Default::default(),
        layout: None,
        hold: false,
    }))
}

const FULL: &str = "the file system of /s is full (database or disk is full); free space on it";

/// A change whose records cannot be written is refused with the
/// database's reason, and nothing of it happens — no job, no id spent, no launch, no kill, no
/// stop; the same change is taken once the disk takes it.
#[test]
fn a_change_that_cannot_be_written_is_refused_and_changes_nothing() {
    let fcfs = super::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 2);
    let (jobs, resp) = change(&mut c, t(1), 1, one_pe_job(), Err(FULL.into()));
    assert_eq!(
        jobs.len(),
        1,
        "the new job's record is what must be written"
    );
    assert_eq!((jobs[0].id(), jobs[0].state), (JobId(1), JobState::Queued));
    assert!(
        matches!(&resp, Response::Error(e) if e.starts_with("not submitted: ") && e.contains("free space")),
        "{resp:?}"
    );
    assert_eq!(c.records().count(), 0, "no job exists in memory either");

    // The disk takes writes again: the same id (never given out) goes to the next job.
    let (_, resp) = change(&mut c, t(2), 2, one_pe_job(), Ok(()));
    assert!(matches!(resp, Response::Submitted(JobId(1))), "{resp:?}");
    assert_eq!(state(&c, 1).state, JobState::Running);

    // A cancel and a suspend that cannot be written: the job runs on, untouched.
    for (req, request, what) in [
        (3, Request::Cancel(JobId(1)), "job 1 not cancelled: "),
        (4, Request::Suspend(JobId(1)), "job 1 not suspended: "),
    ] {
        let w = c.on(
            t(3),
            Input::Client {
                req,
                request,
                caller: Caller::ROOT,
            },
        );
        let w = w.expect("a change to write");
        c.on(
            t(3),
            Input::Written {
                req: w.req,
                result: Err(FULL.into()),
            },
        );
        let fx = c.step(t(3));
        assert!(
            fx.iter().any(|e| matches!(e, Effect::Reply { resp: Response::Error(m), .. } if m.starts_with(what))),
            "{fx:?}"
        );
        assert!(
            !sent(&fx).iter().any(|m| matches!(m, ToNode::Switch { .. })),
            "nothing is stopped or killed: {fx:?}"
        );
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::PersistJob(_))),
            "nothing changed, so nothing is to be written"
        );
        let j = state(&c, 1);
        assert_eq!(
            (j.state, j.held, j.record.end),
            (JobState::Running, false, None)
        );
    }
    // Written, the cancel takes effect.
    let (jobs, resp) = change(&mut c, t(4), 5, Request::Cancel(JobId(1)), Ok(()));
    assert!(matches!(resp, Response::Done), "{resp:?}");
    assert_eq!(jobs[0].state, JobState::Cancelled);
    assert_eq!(state(&c, 1).state, JobState::Cancelled);
}

/// What a change writes before it takes effect is what a restart must
/// find — a submitted job queued (and run), a cancelled one ended, a held one held — should
/// the machine manager die before the step that writes the exact records.
#[test]
fn what_a_change_writes_first_is_what_a_restart_finds() {
    let fcfs = || super::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs(), 1, 2);
    let (mut written, _) = change(&mut c, t(1), 1, one_pe_job(), Ok(()));
    let (two, _) = change(&mut c, t(1), 2, one_pe_job(), Ok(()));
    let (three, _) = change(&mut c, t(1), 3, one_pe_job(), Ok(()));
    let (cancelled, _) = change(&mut c, t(2), 4, Request::Cancel(JobId(2)), Ok(()));
    let (held, _) = change(&mut c, t(2), 5, Request::Suspend(JobId(3)), Ok(()));
    assert_eq!(two[0].id(), JobId(2));
    assert_eq!(three[0].id(), JobId(3));
    written.extend(cancelled);
    written.extend(held);
    let mut c = Core::new(
        config(1, 2),
        fcfs(),
        t(10),
        Recovered {
            nodes: Vec::new(),
            jobs: written,
            admin: Default::default(),
        },
    )
    .unwrap();
    let j = |c: &Core, id| {
        let i = c.ledger().find(JobId(id)).unwrap();
        c.job_info(i, t(10))
    };
    assert_eq!(j(&c, 1).state, JobState::Queued);
    let two = j(&c, 2);
    assert_eq!(
        (two.state, two.record.end),
        (JobState::Cancelled, Some(t(2)))
    );
    assert_eq!(two.error.as_deref(), Some("cancelled by a user"));
    assert!(j(&c, 3).held, "{:?}", j(&c, 3));
    // Ids continue after the largest written.
    c.step(t(10));
    let (jobs, resp) = change(&mut c, t(11), 6, one_pe_job(), Ok(()));
    assert!(matches!(resp, Response::Submitted(JobId(4))), "{resp:?}");
    assert_eq!(jobs[0].id(), JobId(4));
}

/// `sbatch --hold` on an idle machine: the hold comes with the submission and takes effect
/// in the same instant, so the policy never starts the job (nor any task of an array) before
/// a release; the records written for the submission say it is held, so a restart keeps it.
#[test]
fn a_job_submitted_held_never_starts_before_its_release() {
    let fcfs = super::build_policy("fcfs", 1, 4, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 4);
    let array = Schedule {
        array: Some(ArraySpec {
            indices: vec![1, 2],
            throttle: None,
        }),
        ..Default::default()
    };
    let request = Request::Submit(Box::new(SubmitRequest {
        hold: true,
        ..sched_request(1, array)
    }));
    let client = Input::Client {
        req: 1,
        request,
        caller: Caller::ROOT,
    };
    let w = c.on(t(1), client).expect("a submission is written first");
    assert_eq!(w.jobs.len(), 2);
    assert!(w.jobs.iter().all(|r| r.held), "{:?}", w.jobs);
    let written = Input::Written {
        req: w.req,
        result: Ok(()),
    };
    c.on(t(1), written);
    let fx = c.step(t(1));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Reply {
                resp: Response::Submitted(JobId(1)),
                ..
            }
        )),
        "answered with the first id"
    );
    assert!(launched(&fx).is_empty(), "a held job started");
    assert!(
        launched(&c.step(t(5))).is_empty(),
        "a held job started later"
    );
    // Released (each release durable, then carried out), both start at the next decision.
    let mut started = Vec::new();
    for id in [1, 2] {
        let release = Input::Client {
            req: 2,
            request: Request::Resume(JobId(id)),
            caller: Caller::ROOT,
        };
        let w = c.on(t(6), release).expect("a release is written first");
        let written = Input::Written {
            req: w.req,
            result: Ok(()),
        };
        c.on(t(6), written);
        started.extend(launched(&c.step(t(6))));
    }
    assert_eq!(started, [JobId(1), JobId(2)]);
}

/// An administrator's `cosched node OP NODES --reason REASON` at `now`, its records written
/// (`written`), and the answer.
fn node_op(
    c: &mut Core,
    now: Time,
    op: NodeOp,
    nodes: &[&str],
    reason: Option<&str>,
    caller: Caller,
    written: Result<(), String>,
) -> Response {
    let request = Request::Node {
        op,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        reason: reason.map(str::to_string),
    };
    let req = 900;
    if let Some(w) = c.on(
        now,
        Input::Client {
            req,
            request,
            caller,
        },
    ) {
        assert_eq!(w.nodes.len(), nodes.len(), "each change is recorded");
        c.on(
            now,
            Input::Written {
                req: w.req,
                result: written,
            },
        );
    }
    let fx = c.step(now);
    fx.into_iter()
        .find_map(|e| match e {
            Effect::Reply { req: r, resp } if r == req => Some(resp),
            _ => None,
        })
        .expect("answered")
}

fn named_state(c: &Core, name: &str) -> String {
    c.status()
        .nodes
        .into_iter()
        .find(|n| n.name == name)
        .map(|n| n.state)
        .unwrap()
}

fn runs_on(c: &Core, job: u64) -> Option<NodeId> {
    state(c, job).placement.first().map(|p| p.node)
}

#[test]
fn a_drained_node_keeps_its_job_and_takes_no_new_one_until_resumed() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 1);
    submit(&mut c, t(1), 1);
    c.step(t(1));
    assert_eq!(runs_on(&c, 1), Some(NodeId(0)));
    let r = node_op(
        &mut c,
        t(2),
        NodeOp::Drain,
        &["n0"],
        Some("new memory"),
        Caller::ROOT,
        Ok(()),
    );
    assert!(matches!(r, Response::Done), "{r:?}");
    assert_eq!(state(&c, 1).state, JobState::Running, "its job runs on");
    assert_eq!(named_state(&c, "n0"), "draining");
    let why = c.status().nodes[0].reason.clone().unwrap();
    assert_eq!(
        (why.op, why.reason.as_deref(), why.uid, why.at_us),
        (NodeOp::Drain, Some("new memory"), 0, t(2).as_micros())
    );
    // Two more jobs of one PE: one goes to n1, the other waits for a node in service.
    submit(&mut c, t(3), 1);
    submit(&mut c, t(3), 1);
    c.step(t(3));
    assert_eq!(runs_on(&c, 2), Some(NodeId(1)));
    assert_eq!(state(&c, 3).state, JobState::Queued);
    // Job 1 ends: n0 is drained, and job 3 still does not start there.
    exit(&mut c, t(4), 1, 0, 0);
    c.step(t(4));
    assert_eq!(state(&c, 1).state, JobState::Completed);
    assert_eq!(named_state(&c, "n0"), "drained");
    assert_eq!(state(&c, 3).state, JobState::Queued);
    // Resumed: job 3 starts there.
    let r = node_op(
        &mut c,
        t(5),
        NodeOp::Resume,
        &["n0"],
        None,
        Caller::ROOT,
        Ok(()),
    );
    assert!(matches!(r, Response::Done), "{r:?}");
    c.step(t(5));
    assert_eq!(named_state(&c, "n0"), "up");
    assert!(c.status().nodes[0].reason.is_none());
    assert_eq!(runs_on(&c, 3), Some(NodeId(0)));
    assert_eq!(state(&c, 3).state, JobState::Running);
}

#[test]
fn a_node_set_down_ends_its_jobs_and_takes_none_while_it_answers() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 1);
    submit(&mut c, t(1), 1);
    c.step(t(1));
    assert_eq!(runs_on(&c, 1), Some(NodeId(0)));
    let r = node_op(
        &mut c,
        t(2),
        NodeOp::Down,
        &["n0"],
        Some("bad DIMM"),
        Caller::ROOT,
        Ok(()),
    );
    assert!(matches!(r, Response::Done), "{r:?}");
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::NodeFailed);
    assert!(
        j.error.as_deref().unwrap_or("").contains("bad DIMM"),
        "{:?}",
        j.error
    );
    assert_eq!(named_state(&c, "n0"), "down");
    // It still answers heartbeats: it stays out of service.
    c.on(t(3), Input::Heard(NodeId(0)));
    submit(&mut c, t(3), 2);
    c.step(t(3));
    assert_eq!(state(&c, 2).state, JobState::Queued);
    node_op(
        &mut c,
        t(4),
        NodeOp::Resume,
        &["n0"],
        None,
        Caller::ROOT,
        Ok(()),
    );
    c.step(t(4));
    assert_eq!(
        state(&c, 2).state,
        JobState::Queued,
        "job 1's killed rank still holds its PE"
    );
    // Its rank reports the kill: the PE is free, and job 2 starts on both nodes.
    exit(&mut c, t(5), 1, 0, 137);
    c.step(t(5));
    assert_eq!(state(&c, 2).state, JobState::Running);
}

#[test]
fn node_operations_are_refused_without_a_reason_for_unknown_nodes_and_to_users() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 1);
    let refused = |r: Response| match r {
        Response::Error(why) => why,
        other => panic!("accepted: {other:?}"),
    };
    let why = refused(node_op(
        &mut c,
        t(1),
        NodeOp::Drain,
        &["n0"],
        None,
        Caller::ROOT,
        Ok(()),
    ));
    assert!(why.contains("--reason"), "{why}");
    let why = refused(node_op(
        &mut c,
        t(1),
        NodeOp::Down,
        &["n9"],
        Some("x"),
        Caller::ROOT,
        Ok(()),
    ));
    assert!(
        why.contains("unknown node n9") && why.contains("n[0-1]"),
        "{why}"
    );
    let user = Caller {
        uid: 1000,
        gid: 1000,
        admin: false,
    };
    let why = refused(node_op(
        &mut c,
        t(1),
        NodeOp::Drain,
        &["n0"],
        Some("x"),
        user,
        Ok(()),
    ));
    assert!(why.contains("permission denied"), "{why}");
    assert_eq!(named_state(&c, "n0"), "up");
}

#[test]
fn a_node_change_whose_record_cannot_be_written_is_not_made() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 1);
    let r = node_op(
        &mut c,
        t(1),
        NodeOp::Drain,
        &["n1"],
        Some("x"),
        Caller::ROOT,
        Err("disk full".into()),
    );
    match r {
        Response::Error(why) => assert!(
            why.contains("n1 not changed") && why.contains("disk full"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(named_state(&c, "n1"), "up");
}

/// A core of the configured nodes `names` (1 PE each), from the database's `rows`.
fn configured(names: &[&str], rows: Vec<crate::db::NodeRow>) -> (Core, Vec<Effect>) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let table = super::nodes::NodeTable::new(0, 1, &names, rows.clone()).unwrap();
    let fcfs = super::build_policy("fcfs", table.size, 1, &PolicyOptions::default()).unwrap();
    let cfg = CoreConfig {
        names,
        ..config(0, 1)
    };
    let recovered = Recovered {
        nodes: rows,
        ..Recovered::default()
    };
    let mut c = Core::new(cfg, fcfs, t(0), recovered).unwrap();
    let fx = c.step(t(0));
    (c, fx)
}

fn register_as(c: &mut Core, now: Time, req: u64, name: &str) -> RegisterReply {
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: name.into(),
        pes: 1,
        addr: String::new(),
        jobs: Vec::new(),
        incarnation: 1,
    };
    c.on(now, Input::Register { req, reg });
    registered(&c.step(now), req).expect("answered")
}

#[test]
fn configured_nodes_keep_their_ids_whatever_order_they_register_in() {
    let (mut c, fx) = configured(&["a", "b", "c"], Vec::new());
    let persisted: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::PersistNode(r) => Some((r.id.0, r.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        persisted,
        [(0, "a".to_string()), (1, "b".into()), (2, "c".into())]
    );
    for (req, name, id) in [(1, "c", 2), (2, "a", 0), (3, "b", 1)] {
        match register_as(&mut c, t(1), req, name) {
            RegisterReply::Accepted { node, .. } => assert_eq!(node, NodeId(id), "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    match register_as(&mut c, t(1), 4, "x") {
        RegisterReply::Rejected(why) => {
            assert!(why.contains("node x is not in the configuration"), "{why}");
            assert!(
                why.contains("a,b,c") || why.contains("[a-c]") || why.contains("a"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.status().nodes_total, 3);
}

#[test]
fn a_database_of_another_shape_grows_and_shrinks_with_the_configuration() {
    use crate::db::NodeRow;
    let row = |id: u32, name: &str, pes: u32| NodeRow {
        id: NodeId(id),
        name: name.into(),
        pes,
    };
    // The database knew a and b (b with 2 PEs); the configuration now has b and c of 1 PE.
    let (mut c, fx) = configured(&["b", "c"], vec![row(0, "a", 1), row(1, "b", 2)]);
    let persisted: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::PersistNode(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(persisted, [row(1, "b", 1), row(2, "c", 1)]);
    assert_eq!(named_state(&c, "a"), "removed");
    assert_eq!(c.status().nodes_total, 3, "a's id is never given again");
    match register_as(&mut c, t(1), 1, "a") {
        RegisterReply::Rejected(why) => assert!(why.contains("node a was removed"), "{why}"),
        other => panic!("{other:?}"),
    }
    match register_as(&mut c, t(1), 2, "c") {
        RegisterReply::Accepted { node, .. } => assert_eq!(node, NodeId(2)),
        other => panic!("{other:?}"),
    }
    // Without a configuration, a database of more nodes than --nodes is not refused either.
    let fcfs = super::build_policy("fcfs", 3, 1, &PolicyOptions::default()).unwrap();
    let recovered = Recovered {
        nodes: vec![row(0, "a", 1), row(1, "b", 1), row(2, "c", 1)],
        ..Recovered::default()
    };
    let c = Core::new(config(2, 1), fcfs, t(0), recovered).unwrap();
    assert_eq!(named_state(&c, "c"), "removed");
}

/// Submits `procs` PEs with memory limit `mem` and returns the reply.
fn submit_mem(c: &mut Core, now: Time, req: u64, procs: u32, mem: MemLimit) -> Response {
    let request = Request::Submit(Box::new(SubmitRequest {
        mem: Some(mem),
        ..sched_request(procs, Schedule::default())
    }));
    c.on_unstored(
        now,
        Input::Client {
            req,
            request,
            caller: Caller::ROOT,
        },
    );
    c.step(now)
        .into_iter()
        .find_map(|e| match e {
            Effect::Reply { req: r, resp } if r == req => Some(resp),
            _ => None,
        })
        .expect("a reply")
}

#[test]
fn a_job_asking_more_memory_than_the_smallest_node_is_refused_with_the_numbers() {
    let fcfs = super::build_policy("fcfs", 2, 4, &PolicyOptions::default()).unwrap();
    // Node 0 has 1 TiB (the tests' registration); node 1 registers again with 8 GiB.
    let mut c = core(fcfs, 2, 4);
    c.on(
        t(0),
        Input::Register {
            req: 7,
            reg: Register {
                version: Version::ours(),
                memory: 8 << 30,
                name: "n1".into(),
                pes: 4,
                addr: String::new(),
                jobs: Vec::new(),
                incarnation: 1,
            },
        },
    );
    match submit_mem(&mut c, t(1), 8, 1, MemLimit::PerNode(9 << 30)) {
        Response::Error(e) => assert_eq!(
            e,
            "job asks for 9216 MiB of memory on a node (--mem=9216M) but node n1 has 8192 MiB; ask for at most --mem=8192M"
        ),
        other => panic!("accepted: {other:?}"),
    }
    // Per PE: 4 PEs of a node × 3 GiB is 12 GiB on a node.
    match submit_mem(&mut c, t(1), 9, 8, MemLimit::PerCpu(3 << 30)) {
        Response::Error(e) => assert!(e.ends_with("ask for at most --mem-per-cpu=2048M"), "{e}"),
        other => panic!("accepted: {other:?}"),
    }
    let Response::Submitted(id) = submit_mem(&mut c, t(1), 10, 8, MemLimit::PerCpu(2 << 30)) else {
        panic!("refused")
    };
    let j = state(&c, id.0);
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.mem, Some(MemLimit::PerCpu(2 << 30)), "kept with the job");
    let l = c.launch_msg(c.ledger().find(id).unwrap(), false);
    assert_eq!(
        l.mem,
        Some(MemLimit::PerCpu(2 << 30)),
        "and sent to its nodes"
    );
}

#[test]
fn a_rank_killed_for_its_memory_ends_the_job_out_of_memory_naming_the_limit() {
    let fcfs = super::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 2);
    assert!(matches!(
        submit_mem(&mut c, t(1), 5, 2, MemLimit::PerNode(64 << 20)),
        Response::Submitted(_)
    ));
    c.step(t(1));
    let msg = FromNode::Exited {
        job: JobId(1),
        run: 1,
        exit: RankExit {
            rank: 1,
            code: Some(137),
            error: None,
            oom: true,
        },
    };
    c.on(
        t(2),
        Input::FromNode {
            from: NodeId(0),
            msg,
        },
    );
    c.step(t(2));
    let j = state(&c, 1);
    assert_eq!(j.state, JobState::OutOfMemory, "{j:?}");
    assert_eq!(j.record.outcome, Some(cosched_core::Outcome::OutOfMemory));
    assert_eq!(
        j.error.as_deref(),
        Some(
            "rank 1 on node n0 was killed out of memory: the job went over its memory limit (--mem=64M)"
        )
    );
}

#[test]
fn a_node_manager_of_another_message_version_is_refused_naming_both() {
    let fcfs = super::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = Core::new(config(2, 1), fcfs, t(0), Recovered::default()).unwrap();
    let theirs = Version {
        release: "0.0.1".into(),
        wire: WIRE_VERSION + 1,
    };
    c.on(
        t(0),
        Input::Register {
            req: 3,
            reg: Register {
                version: theirs,
                ..reg1(1, Vec::new())
            },
        },
    );
    let Some(RegisterReply::Rejected(why)) = registered(&c.step(t(0)), 3) else {
        panic!("accepted")
    };
    assert!(
        why.starts_with(&format!(
            "node manager n1 is cosched 0.0.1 (messages v{}) but the machine manager is cosched {} (messages v{WIRE_VERSION})",
            WIRE_VERSION + 1,
            env!("CARGO_PKG_VERSION")
        )),
        "{why}"
    );
    assert_eq!(
        c.status().nodes.iter().filter(|n| n.state == "up").count(),
        0
    );
    c.on(
        t(0),
        Input::Register {
            req: 4,
            reg: reg1(1, Vec::new()),
        },
    );
    assert!(matches!(
        registered(&c.step(t(0)), 4),
        Some(RegisterReply::Accepted { .. })
    ));
}

/// Steps of an allocation (`srun` inside a batch job): only its owner starts one, in a
/// running job; it is recorded before it is answered and launched into the allocation;
/// its end is accounted once; a batch job ends with its script alone; an allocation that
/// ends takes its running steps with it.
#[test]
fn a_step_is_recorded_before_it_is_answered_ends_alone_when_cancelled_and_with_its_allocation() {
    let fcfs = super::build_policy("fcfs", 2, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 2);
    let alice = Caller {
        uid: 60001,
        gid: 60001,
        admin: false,
    };
    let bob = Caller {
        uid: 60002,
        gid: 60002,
        admin: false,
    };
    let batch = batch_submission(4);
    let ask = |c: &mut Core, req: u64, request: Request, caller: Caller| {
        c.on(
            t(2),
            Input::Client {
                req,
                request,
                caller,
            },
        )
    };
    assert!(ask(&mut c, 1, batch, alice).is_some());
    c.on(
        t(1),
        Input::Written {
            req: 1,
            result: Ok(()),
        },
    );
    let launched = c.step(t(1));
    let ToNode::Launch(l) = sent(&launched).remove(0) else {
        panic!("the allocation is launched")
    };
    assert!(l.io.batch && l.within.is_none());
    let step = || {
        Request::Step(Box::new(StepRequest {
            job: JobId(1),
            name: "prog".into(),
            cmd: vec!["prog".into()],
            ntasks: Some(4),
            ..StepRequest::default()
        }))
    };
    // Another user's allocation: refused at once, nothing to write.
    assert!(ask(&mut c, 2, step(), bob).is_none());
    let refused = c.step(t(2));
    assert!(
        refused.iter().any(|e| matches!(e,
            Effect::Reply { req: 2, resp: Response::Error(m) } if m.contains("permission denied"))),
        "{refused:?}"
    );
    // The owner's: written first, with the step in the job's record; answered after.
    let w = ask(&mut c, 3, step(), alice).expect("a step is written before it starts");
    assert_eq!(w.jobs[0].steps.len(), 1);
    assert_eq!(w.jobs[0].steps[0].id, 0, "a batch job's steps count from 0");
    let before = c.step(t(2));
    assert!(
        !before
            .iter()
            .any(|e| matches!(e, Effect::Reply { req: 3, .. }))
    );
    assert!(
        sent(&before).is_empty(),
        "nothing launched before the write"
    );
    c.on(
        t(2),
        Input::Written {
            req: 3,
            result: Ok(()),
        },
    );
    let fx = c.step(t(2));
    assert!(fx.iter().any(|e| matches!(e,
        Effect::Reply { req: 3, resp: Response::Step(s) } if s.ntasks() == 4)));
    let unit = step_unit(JobId(1), 0);
    let ToNode::Launch(sl) = sent(&fx).remove(0) else {
        panic!("the step is launched")
    };
    assert_eq!((sl.job, sl.within, sl.size), (unit, Some(JobId(1)), 4));
    let env: std::collections::BTreeMap<String, String> =
        sl.io.env.clone().unwrap().into_iter().collect();
    assert_eq!(env["SLURM_STEP_ID"], "0");
    assert_eq!(env["SLURM_STEP_NUM_TASKS"], "4");
    assert_eq!(env["SLURM_STEP_NODELIST"], "n[0-1]");

    // Its ranks' exits (one reported twice) end it once, failed with the highest code.
    for (rank, code) in [(0, 0), (1, 2), (1, 2), (2, 0), (3, 0)] {
        c.on(
            t(3),
            Input::FromNode {
                from: NodeId(rank / 2),
                msg: FromNode::Exited {
                    job: unit,
                    run: 1,
                    exit: RankExit {
                        rank,
                        code: Some(code),
                        error: None,
                        oom: false,
                    },
                },
            },
        );
    }
    let fx = c.step(t(3));
    let forgets = sent(&fx)
        .into_iter()
        .filter(|m| matches!(m, ToNode::Forget { jobs } if jobs == &[unit]))
        .count();
    assert_eq!(forgets, 1, "the step's end is carried out once: {fx:?}");
    let s = &state(&c, 1).steps[0];
    assert_eq!((s.state, s.exit_code), (JobState::Failed, Some(2)));
    assert_eq!(
        state(&c, 1).state,
        JobState::Running,
        "the allocation goes on"
    );

    // A second step, then the script exits: the job ends, the running step with it.
    ask(&mut c, 4, step(), alice).expect("written");
    c.on(
        t(4),
        Input::Written {
            req: 4,
            result: Ok(()),
        },
    );
    c.step(t(4));
    // A third, sharing PEs (--overlap); `scancel 1.2` ends it alone, and only its owner may.
    let overlap = Request::Step(Box::new(StepRequest {
        job: JobId(1),
        name: "prog".into(),
        cmd: vec!["prog".into()],
        ntasks: Some(2),
        overlap: true,
        ..StepRequest::default()
    }));
    ask(&mut c, 6, overlap, alice).expect("written");
    c.on(
        t(4),
        Input::Written {
            req: 6,
            result: Ok(()),
        },
    );
    c.step(t(4));
    let cancel = || Request::CancelStep {
        job: JobId(1),
        step: 2,
    };
    assert!(ask(&mut c, 7, cancel(), bob).is_none());
    let fx = c.step(t(4));
    assert!(fx.iter().any(|e| matches!(e,
        Effect::Reply { req: 7, resp: Response::Error(m) } if m.contains("permission denied"))));
    assert_eq!(state(&c, 1).steps[2].state, JobState::Running);
    // The owner's cancel is written first, the step recorded cancelled, and carried out and
    // answered only then.
    let w = ask(&mut c, 8, cancel(), alice).expect("a step's cancel is written first");
    assert_eq!(w.jobs[0].steps[2].state, JobState::Cancelled);
    let before = c.step(t(4));
    assert!(
        !before
            .iter()
            .any(|e| matches!(e, Effect::Reply { req: 8, .. }))
            && sent(&before).is_empty(),
        "nothing done before the write: {before:?}"
    );
    assert_eq!(state(&c, 1).steps[2].state, JobState::Running);
    c.on(
        t(4),
        Input::Written {
            req: 8,
            result: Ok(()),
        },
    );
    let fx = c.step(t(4));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Reply {
            req: 8,
            resp: Response::Done
        }
    )));
    assert_eq!(
        sent(&fx)
            .iter()
            .filter(
                |m| matches!(m, ToNode::Switch { kill, .. } if kill == &[step_unit(JobId(1), 2)])
            )
            .count(),
        1,
        "its ranks are ended on its node, which reports their exits: {fx:?}"
    );
    let info = state(&c, 1);
    assert_eq!(info.steps[2].state, JobState::Cancelled);
    assert_eq!(
        info.steps[1].state,
        JobState::Running,
        "the other step goes on"
    );
    assert_eq!(info.state, JobState::Running, "the allocation goes on");

    exit(&mut c, t(5), 1, 0, 0);
    let fx = c.step(t(5));
    let info = state(&c, 1);
    assert_eq!(
        info.state,
        JobState::Completed,
        "the script alone ends a batch job"
    );
    assert_eq!(info.steps[1].state, JobState::Cancelled);
    assert!(
        sent(&fx).iter().any(|m| matches!(m, ToNode::Forget { jobs }
            if jobs.contains(&step_unit(JobId(1), 1)) && jobs.contains(&step_unit(JobId(1), 2)))),
        "the running step and the cancelled one whose exits never came go on the nodes: {fx:?}"
    );
    // No step in an ended job.
    assert!(ask(&mut c, 5, step(), alice).is_none());
}

/// Submits `procs` tasks with `layout`; the reply.
fn submit_spread(c: &mut Core, now: Time, req: u64, procs: u32, layout: NodeLayout) -> Response {
    let request = Request::Submit(Box::new(SubmitRequest {
        mem: None,
        procs,
        time_limit_us: Some(Dur::from_secs(1000).as_micros()),
        class: None,
        name: None,
        cmd: vec!["work".into()],
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched: Default::default(),
        layout: Some(layout),
        hold: false,
    }));
    c.on_unstored(
        now,
        Input::Client {
            req,
            request,
            caller: Caller::ROOT,
        },
    );
    c.step(now)
        .into_iter()
        .find_map(|e| match e {
            Effect::Reply { req: r, resp } if r == req => Some(resp),
            _ => None,
        })
        .expect("a reply")
}

#[test]
fn a_job_asking_two_nodes_one_task_each_runs_on_two_nodes_and_nodelist_and_exclude_hold() {
    for policy in ["fcfs", "easy", "conservative", "gang"] {
        let p = super::build_policy(policy, 3, 4, &PolicyOptions::default()).unwrap();
        let mut c = core(p, 3, 4);
        // One PE of node 0 busy: counting PEs, 2 tasks would both go on node 0.
        submit(&mut c, t(1), 1);
        c.step(t(1));
        let two = NodeLayout {
            nodes: Some(2),
            tasks_per_node: Some(1),
            ..NodeLayout::default()
        };
        assert!(matches!(
            submit_spread(&mut c, t(2), 2, 2, two),
            Response::Submitted(_)
        ));
        let nodes = |c: &Core, job: u64| -> Vec<u32> {
            state(c, job).placement.iter().map(|p| p.node.0).collect()
        };
        assert_eq!(nodes(&c, 2), [0, 1], "{policy}");
        let pinned = NodeLayout {
            nodes: Some(2),
            nodelist: vec!["n2".into()],
            exclude: vec!["n0".into()],
            ..NodeLayout::default()
        };
        assert!(matches!(
            submit_spread(&mut c, t(3), 3, 4, pinned),
            Response::Submitted(_)
        ));
        assert_eq!(nodes(&c, 3), [1, 2], "{policy}");
    }
}

#[test]
fn a_spread_that_can_never_be_met_is_refused_at_submission_saying_why() {
    let fcfs = super::build_policy("fcfs", 2, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 2);
    let refused =
        |c: &mut Core, req, procs, layout| match submit_spread(c, t(1), req, procs, layout) {
            Response::Error(e) => e,
            other => panic!("accepted: {other:?}"),
        };
    let e = refused(
        &mut c,
        1,
        3,
        NodeLayout {
            nodes: Some(3),
            tasks_per_node: Some(1),
            ..NodeLayout::default()
        },
    );
    assert!(e.contains("needs 3 nodes; the machine has 2"), "{e}");
    let e = refused(
        &mut c,
        2,
        1,
        NodeLayout {
            nodelist: vec!["n7".into()],
            ..NodeLayout::default()
        },
    );
    assert!(
        e.contains("--nodelist: unknown node n7; the nodes are n[0-1]"),
        "{e}"
    );
    // A policy with a geometry of its own refuses a spread rather than ignore it.
    let t3d = super::build_policy("t3d", 2, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(t3d, 2, 2);
    let e = refused(
        &mut c,
        3,
        2,
        NodeLayout {
            nodes: Some(2),
            ..NodeLayout::default()
        },
    );
    assert!(
        e.contains("policy t3d places jobs by its own geometry"),
        "{e}"
    );
}

/// The submission of a batch job of `procs` PEs (its script runs once; steps run in it).
fn batch_submission(procs: u32) -> Request {
    Request::Submit(Box::new(SubmitRequest {
        procs,
        time_limit_us: None,
        class: None,
        name: None,
        cmd: vec!["/bin/sh".into(), "job.sh".into()],
        cwd: "/".into(),
        user: None,
        io: JobIo {
            batch: true,
            ..JobIo::default()
        },
        sched: Default::default(),
        layout: None,
        hold: false,
        mem: None,
    }))
}

/// A step's rank `rank` on node `node` exits with `code`.
fn step_exit(c: &mut Core, now: Time, unit: JobId, node: u32, rank: u32, code: i32) {
    c.on(
        now,
        Input::FromNode {
            from: NodeId(node),
            msg: FromNode::Exited {
                job: unit,
                run: 1,
                exit: RankExit {
                    rank,
                    code: Some(code),
                    error: None,
                    oom: false,
                },
            },
        },
    );
}

#[test]
fn a_cancelled_step_whose_tasks_all_exit_zero_is_completed_and_one_the_cancel_ended_is_cancelled() {
    let fcfs = super::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 2);
    let ask = |c: &mut Core, now: Time, req: u64, request: Request| {
        let w = c.on(
            now,
            Input::Client {
                req,
                request,
                caller: Caller::ROOT,
            },
        );
        if w.is_some() {
            c.on(
                now,
                Input::Written {
                    req,
                    result: Ok(()),
                },
            );
        }
        c.step(now)
    };
    let batch = batch_submission(2);
    ask(&mut c, t(1), 1, batch);
    for (req, now) in [(2, t(2)), (3, t(3))] {
        let step = Request::Step(Box::new(StepRequest {
            job: JobId(1),
            name: "orted".into(),
            cmd: vec!["orted".into()],
            ntasks: Some(1),
            overlap: true,
            ..StepRequest::default()
        }));
        ask(&mut c, now, req, step);
    }
    let cancel = |k| Request::CancelStep {
        job: JobId(1),
        step: k,
    };
    // Step 0's task had exited 0 when its srun's SIGTERM came (the report was on its way):
    // completed, as Slurm records a step whose tasks all exited 0.
    ask(&mut c, t(4), 4, cancel(0));
    assert_eq!(state(&c, 1).steps[0].state, JobState::Cancelled);
    step_exit(&mut c, t(5), step_unit(JobId(1), 0), 0, 0, 0);
    let fx = c.step(t(5));
    let s = &state(&c, 1).steps[0];
    assert_eq!(
        (s.state, s.exit_code, s.error.as_deref()),
        (JobState::Completed, Some(0), None)
    );
    assert!(
        sent(&fx)
            .iter()
            .any(|m| matches!(m, ToNode::Forget { jobs } if jobs == &[step_unit(JobId(1), 0)]))
    );
    // Step 1's task was ended by the cancel (SIGTERM: 128 + 15): cancelled.
    ask(&mut c, t(6), 6, cancel(1));
    step_exit(&mut c, t(7), step_unit(JobId(1), 1), 0, 0, 143);
    c.step(t(7));
    let s = &state(&c, 1).steps[1];
    assert_eq!((s.state, s.exit_code), (JobState::Cancelled, Some(143)));
    // A step that ended is not cancelled again.
    let fx = ask(&mut c, t(8), 8, cancel(0));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Reply {
            req: 8,
            resp: Response::Done
        }
    )));
    assert_eq!(state(&c, 1).steps[0].state, JobState::Completed);
}
