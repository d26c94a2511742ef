//! Steps inside a job, spreads over nodes, and batch submissions.

use super::*;

/// Steps of an allocation (`srun` inside a batch job): only its owner starts one, in a
/// running job; it is recorded before it is answered and launched into the allocation;
/// its end is accounted once; a batch job ends with its script alone; an allocation that
/// ends takes its running steps with it.
#[test]
fn a_step_is_recorded_before_it_is_answered_ends_alone_when_cancelled_and_with_its_allocation() {
    let fcfs = crate::build_policy("fcfs", 2, 2, &PolicyOptions::default()).unwrap();
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
        let p = crate::build_policy(policy, 3, 4, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 2, 2, &PolicyOptions::default()).unwrap();
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
    let t3d = crate::build_policy("t3d", 2, 2, &PolicyOptions::default()).unwrap();
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

/// `request` of root at `now`, written at once when it writes: the effects of the step.
fn ask_as_root(c: &mut Core, now: Time, req: u64, request: Request) -> Vec<Effect> {
    let caller = Caller::ROOT;
    if c.on(
        now,
        Input::Client {
            req,
            request,
            caller,
        },
    )
    .is_some()
    {
        let result = Ok(());
        c.on(now, Input::Written { req, result });
    }
    c.step(now)
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
    let fcfs = crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 1, 2);
    let batch = batch_submission(2);
    ask_as_root(&mut c, t(1), 1, batch);
    for (req, now) in [(2, t(2)), (3, t(3))] {
        let step = Request::Step(Box::new(StepRequest {
            job: JobId(1),
            name: "orted".into(),
            cmd: vec!["orted".into()],
            ntasks: Some(1),
            overlap: true,
            ..StepRequest::default()
        }));
        ask_as_root(&mut c, now, req, step);
    }
    let cancel = |k| Request::CancelStep {
        job: JobId(1),
        step: k,
    };
    // Step 0's task had exited 0 when its srun's SIGTERM came (the report was on its way):
    // completed, as Slurm records a step whose tasks all exited 0.
    ask_as_root(&mut c, t(4), 4, cancel(0));
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
    ask_as_root(&mut c, t(6), 6, cancel(1));
    step_exit(&mut c, t(7), step_unit(JobId(1), 1), 0, 0, 143);
    c.step(t(7));
    let s = &state(&c, 1).steps[1];
    assert_eq!((s.state, s.exit_code), (JobState::Cancelled, Some(143)));
    // A step that ended is not cancelled again.
    let fx = ask_as_root(&mut c, t(8), 8, cancel(0));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Reply {
            req: 8,
            resp: Response::Done
        }
    )));
    assert_eq!(state(&c, 1).steps[0].state, JobState::Completed);
}

/// A task's `MPI_Abort`, heard before any exit, names the step's failure as it names a job's
/// (the task, its node, the MPI's words, the abort's code) and kills the step's other tasks;
/// the failures that follow (a peer's exit when its connection to the aborting task dies,
/// the killed tasks' signals) leave that cause and code alone, and the allocation goes on.
#[test]
fn a_steps_first_abort_names_its_failure_and_code_whatever_exits_follow() {
    let fcfs = crate::build_policy("fcfs", 2, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 2, 2);
    ask_as_root(&mut c, t(1), 1, batch_submission(4));
    let step = Request::Step(Box::new(StepRequest {
        job: JobId(1),
        name: "ring".into(),
        cmd: vec!["ring".into()],
        ntasks: Some(4),
        ..StepRequest::default()
    }));
    ask_as_root(&mut c, t(2), 2, step);
    let unit = step_unit(JobId(1), 0);
    // Tasks 0 and 1 on n0, 2 and 3 on n1; task 1 aborts.
    c.on(
        t(3),
        Input::FromNode {
            from: NodeId(0),
            msg: FromNode::Aborted {
                job: unit,
                run: 1,
                exit: RankExit {
                    rank: 1,
                    code: Some(7),
                    error: Some("MPI_Abort with status 7: task 1 gives up".into()),
                    oom: false,
                },
            },
        },
    );
    let fx = c.step(t(3));
    let killed: Vec<NodeId> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: ToNode::Switch { kill, .. },
            } if kill == &[unit] => Some(to.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        killed,
        [NodeId(0), NodeId(1)],
        "the other tasks are killed: {fx:?}"
    );
    // Task 2's failure (its peer is gone) comes in before the aborting task's own exit.
    step_exit(&mut c, t(4), unit, 1, 2, 15);
    step_exit(&mut c, t(4), unit, 0, 1, 7);
    step_exit(&mut c, t(4), unit, 0, 0, 137);
    step_exit(&mut c, t(4), unit, 1, 3, 137);
    c.step(t(4));
    let s = &state(&c, 1).steps[0];
    let want = (
        JobState::Failed,
        Some(7),
        Some("task 1 on node n0: MPI_Abort with status 7: task 1 gives up"),
    );
    assert_eq!((s.state, s.exit_code, s.error.as_deref()), want);
    assert_eq!(
        state(&c, 1).state,
        JobState::Running,
        "the allocation goes on"
    );
}
