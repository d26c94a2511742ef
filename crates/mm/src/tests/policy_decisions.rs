//! The policy's part: the events of an instant, its decisions carried out (kills, preemption,
//! rejection), forecasts, and a policy that breaks its promises or fails.

use super::*;

#[test]
fn everything_of_an_instant_reaches_the_policy_before_it_decides_once() {
    let fcfs = crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
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
