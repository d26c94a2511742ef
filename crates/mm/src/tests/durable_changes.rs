//! Changes written before they take effect: refused when the database cannot take them, and
//! what a restart finds; jobs submitted held.

use super::*;

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
    let fcfs = crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
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
    let fcfs = || crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
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
    let mut c = Core::new(config(1, 2), fcfs(), t(10), recovered_jobs(written)).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 1, 4, &PolicyOptions::default()).unwrap();
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
