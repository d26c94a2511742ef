//! Who may act on a job, and how jobs end: cancels holding PEs until the ranks are gone,
//! reports of an earlier run after a requeue, and ended jobs forgotten after the retention.

use super::*;

/// a job belongs to the user the machine manager established, not to
/// one named in the request; only its owner or an administrator may cancel, hold, release or
/// read it, and only an administrator may shut the cluster down.
#[test]
fn only_the_owner_or_an_administrator_acts_on_a_job() {
    let fcfs = crate::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
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
    // A user who claims to be someone else is refused...
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
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 3, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
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

/// A rank aborted while the machine manager was down: its node kept the notice, and its
/// registration with the restarted machine manager carries it beside the exits, so the job
/// is recorded with the abort's rank, code and words, not with the failure of a peer (which
/// exited first, its connection to the aborting rank gone) or the aborting rank's kill.
#[test]
fn an_abort_the_machine_manager_missed_while_down_names_the_failure_when_the_node_registers() {
    let fcfs = || crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs(), 1, 2);
    submit(&mut c, t(1), 2);
    c.step(t(1));
    let running = c.job_info(c.ledger().find(JobId(1)).unwrap(), t(1));
    assert_eq!(running.state, JobState::Running);
    // The machine manager restarts from the job's record and its node's row.
    let row = crate::db::NodeRow {
        id: NodeId(0),
        name: "n0".into(),
        pes: 2,
    };
    let recovered = Recovered {
        nodes: vec![row],
        jobs: vec![running],
        admin: Default::default(),
    };
    let mut c = Core::new(config(1, 2), fcfs(), t(10), recovered).unwrap();
    c.step(t(10));
    let rank = |rank, code: Option<i32>, error: Option<&str>| RankExit {
        rank,
        code,
        error: error.map(String::from),
        oom: false,
    };
    let abort = "MPI_Abort with status 7: rank 1 gives up";
    let held = HeldJob {
        job: JobId(1),
        run: 1,
        ranks: vec![rank(0, Some(1), None), rank(1, None, None)],
        aborted: Some(rank(1, Some(7), Some(abort))),
    };
    let reg = Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: "n0".into(),
        pes: 2,
        addr: String::new(),
        jobs: vec![held],
        incarnation: 1,
    };
    c.on(t(11), Input::Register { req: 9, reg });
    c.step(t(11));
    let j = state(&c, 1);
    let want = (
        JobState::Failed,
        Some(7),
        Some(format!("rank 1 on node n0: {abort}")),
    );
    assert_eq!((j.state, j.record.exit_code, j.error), want);
}

/// An `MPI_Abort` heard before any exit fails the job with the aborting rank's code and
/// words; the other ranks' failures that follow it (their own aborts when their connections
/// to the aborting rank die, which may reach the machine manager before that rank's exit)
/// and the rank's exit itself leave that cause alone.
#[test]
fn an_abort_notice_names_the_jobs_failure_and_later_aborts_and_exits_leave_it() {
    let fcfs = crate::build_policy("fcfs", 2, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 2);
    submit(&mut c, t(1), 4); // ranks 0 and 1 on n0, 2 and 3 on n1
    c.step(t(1));
    let report = |c: &mut Core, node: u32, msg: FromNode| {
        c.on(
            t(2),
            Input::FromNode {
                from: NodeId(node),
                msg,
            },
        );
    };
    let aborted = |rank: u32, code: i32, words: &str| RankExit {
        oom: false,
        rank,
        code: Some(code),
        error: Some(words.into()),
    };
    let rank1 = aborted(1, 7, "MPI_Abort with status 7: rank 1 gives up");
    let rank2 = aborted(2, 15, "MPI_Abort with status 339332623");
    report(
        &mut c,
        0,
        FromNode::Aborted {
            job: JobId(1),
            run: 1,
            exit: rank1.clone(),
        },
    );
    // The peer's abort, then its exit, come in before rank 1's exit.
    report(
        &mut c,
        1,
        FromNode::Aborted {
            job: JobId(1),
            run: 1,
            exit: rank2.clone(),
        },
    );
    report(
        &mut c,
        1,
        FromNode::Exited {
            job: JobId(1),
            run: 1,
            exit: rank2,
        },
    );
    let fx = c.step(t(2));
    let killed = sent(&fx)
        .into_iter()
        .any(|m| matches!(m, ToNode::Switch { kill, .. } if kill.contains(&JobId(1))));
    assert!(killed, "the other ranks are killed on the abort");
    let want = (
        JobState::Failed,
        Some(7),
        Some("rank 1 on node n0: MPI_Abort with status 7: rank 1 gives up".to_string()),
    );
    let j = state(&c, 1);
    assert_eq!((j.state, j.record.exit_code, j.error), want);
    // Rank 1's own exit and the rest change nothing.
    report(
        &mut c,
        0,
        FromNode::Exited {
            job: JobId(1),
            run: 1,
            exit: rank1,
        },
    );
    exit(&mut c, t(3), 1, 0, 137);
    c.on(
        t(3),
        Input::FromNode {
            from: NodeId(1),
            msg: FromNode::Exited {
                job: JobId(1),
                run: 1,
                exit: aborted(3, 15, "MPI_Abort with status 339332623"),
            },
        },
    );
    c.step(t(3));
    let j = state(&c, 1);
    assert_eq!((j.state, j.record.exit_code, j.error), want);
}
