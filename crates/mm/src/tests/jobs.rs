//! What a job carries through its life: time limits, PMI fences and direct modex, its
//! environment across a restart, and the dependencies, arrays and begin times that hold it back.

use super::*;

/// a time limit beyond the maximum is refused at submit with the bound
/// in the message (a client may send anything), and the longest one allowed leaves the wake-up
/// computation sane: the core sleeps until its next heartbeat, not in a loop.
#[test]
fn a_huge_time_limit_is_refused_and_the_longest_allowed_does_not_overflow() {
    let fcfs = crate::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
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
    let longest = crate::MAX_TIME_LIMIT.as_micros();
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
    let later = t(1) + crate::MAX_TIME_LIMIT;
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
    let fcfs = crate::build_policy("fcfs", 3, 2, &PolicyOptions::default()).unwrap();
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
        signal: None,
        append: false,
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
    let fcfs = crate::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
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

/// An array's throttle lets at most N tasks reach the policy at once; its tasks
/// get the array variables; `afterok` on a failed job ends the dependent without the policy
/// hearing of it; `--begin` holds a job until its time.
#[test]
fn arrays_dependencies_and_begin_times_are_held_back_from_the_policy() {
    let fcfs = crate::build_policy("fcfs", 1, 4, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
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

    let fcfs = crate::build_policy("fcfs", 1, 1, &PolicyOptions::default()).unwrap();
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

/// The messages of `effects` for the nodes, with their destinations.
fn sent_to(effects: Vec<Effect>) -> Vec<(Vec<NodeId>, ToNode)> {
    effects
        .into_iter()
        .filter_map(|e| match e {
            Effect::Send { to, msg } => Some((to, msg)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_direct_modex_want_goes_to_the_node_of_the_rank_and_its_answer_back() {
    let fcfs = crate::build_policy("fcfs", 3, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 3, 2);
    submit(&mut c, t(1), 4); // ranks 0, 1 on node 0; 2, 3 on node 1
    c.step(t(1));
    let from = |c: &mut Core, node, msg| {
        c.on(
            t(2),
            Input::FromNode {
                from: NodeId(node),
                msg,
            },
        );
        sent_to(c.step(t(2)))
    };
    let want = |rank, req| FromNode::ModexWant {
        job: JobId(1),
        run: 1,
        rank,
        req,
    };
    let out = from(&mut c, 0, want(2, 4));
    assert!(
        matches!(&out[..], [(to, ToNode::ModexWant { job: JobId(1), rank: 2, from: NodeId(0), req: 4 })]
            if to == &[NodeId(1)]),
        "{out:?}"
    );
    let have = FromNode::ModexHave {
        job: JobId(1),
        run: 1,
        to: NodeId(0),
        req: 4,
        data: Ok(vec![5]),
    };
    let out = from(&mut c, 1, have);
    assert!(
        matches!(&out[..], [(to, ToNode::ModexHave { job: JobId(1), req: 4, data: Ok(d) })]
            if to == &[NodeId(0)] && d == &[5]),
        "{out:?}"
    );
    // No such rank: the asking node is answered at once.
    let out = from(&mut c, 0, want(9, 5));
    assert!(
        matches!(&out[..], [(to, ToNode::ModexHave { req: 5, data: Err(-46), .. })]
            if to == &[NodeId(0)]),
        "{out:?}"
    );
}

/// The `--signal` messages among effects: destinations, launches, signal, leader only.
fn warnings(effects: &[Effect]) -> Vec<(Vec<NodeId>, Vec<JobId>, i32, bool)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: ToNode::Signal { jobs, sig, leader },
            } => Some((to.clone(), jobs.clone(), *sig, *leader)),
            _ => None,
        })
        .collect()
}

/// A job of `procs` PEs with a limit of 100 s and `--signal=spec`, a batch script or not.
fn submit_warned(c: &mut Core, now: Time, req: u64, procs: u32, spec: &str, batch: bool) {
    let request = Request::Submit(Box::new(SubmitRequest {
        time_limit_us: Some(Dur::from_secs(100).as_micros()),
        io: JobIo {
            batch,
            signal: Some(WarnSignal::parse(spec).unwrap()),
            ..JobIo::default()
        },
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
}

/// Steps the core at `now` (every node heard), its `--signal` messages.
fn warnings_at(c: &mut Core, now: Time) -> Vec<(Vec<NodeId>, Vec<JobId>, i32, bool)> {
    for n in 0..4 {
        c.on(now, Input::Heard(NodeId(n)));
    }
    warnings(&c.step(now))
}

/// `--signal=USR1@30` on a 100 s limit: the tasks get SIGUSR1 once, when 30 s of running
/// are left — not before, and the core wakes for it; a suspension moves it as it moves
/// the limit.
#[test]
fn signal_is_sent_once_when_its_lead_of_the_time_limit_is_left() {
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 1);
    submit_warned(&mut c, t(1), 7, 2, "USR1@30", false);
    assert!(warnings_at(&mut c, t(1)).is_empty());
    assert_eq!(state(&c, 1).state, JobState::Running);
    assert_eq!(c.next_wake(), t(71), "the core wakes for the signal");
    assert!(warnings_at(&mut c, t(70)).is_empty(), "not early");
    let w = warnings_at(&mut c, t(71));
    assert_eq!(
        w,
        [(
            vec![NodeId(0), NodeId(1)],
            vec![JobId(1)],
            libc::SIGUSR1,
            false
        )]
    );
    assert!(warnings_at(&mut c, t(80)).is_empty(), "sent once");
    assert!(c.next_wake() > t(80));

    // Suspended for 20 s from 10 s of running: 30 s are left at 91 s, not 71 s.
    let mut c = core(
        crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap(),
        2,
        1,
    );
    submit_warned(&mut c, t(1), 7, 1, "USR1@30", false);
    c.step(t(1));
    for (at, request) in [
        (11, Request::Suspend(JobId(1))),
        (31, Request::Resume(JobId(1))),
    ] {
        c.on_unstored(
            t(at),
            Input::Client {
                req: 8,
                request,
                caller: Caller::ROOT,
            },
        );
        assert!(warnings_at(&mut c, t(at)).is_empty());
    }
    assert!(warnings_at(&mut c, t(90)).is_empty());
    assert_eq!(warnings_at(&mut c, t(91)).len(), 1);
}

/// `B:` goes to the batch script's shell alone, on the allocation's first node; without
/// it a batch job's signal goes to its steps' tasks, and with no step running to none.
#[test]
fn signal_goes_to_the_batch_shell_with_b_and_to_the_steps_without() {
    let fcfs = crate::build_policy("fcfs", 4, 1, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 4, 1);
    submit_warned(&mut c, t(1), 7, 2, "B:USR2@10", true);
    submit_warned(&mut c, t(1), 8, 2, "R:USR1@10", true);
    c.step(t(1));
    assert_eq!(state(&c, 2).state, JobState::Running);
    let w = warnings_at(&mut c, t(91));
    assert_eq!(
        w,
        [(vec![NodeId(0)], vec![JobId(1)], libc::SIGUSR2, true)],
        "a batch job without steps has no tasks to signal"
    );
}
