//! The nodes' run reports and liveness: nodes not responding, a stalled machine manager,
//! fenced nodes and the requeued jobs that wait for them.

use super::*;

/// Job 1 started in row 0 and job 2 placed in row 1 at 1 s, both on PEs 0–3: two rows of a
/// gang matrix.
fn two_rows() -> Box<dyn Policy> {
    let pes = PeSet::contiguous(0, 4);
    script(vec![(
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
    )])
}

/// Node `node` reports at `now` that run `run` of `job` runs there, or stands stopped.
fn report_runs(c: &mut Core, now: Time, node: u32, job: u64, run: u32, runs: bool) {
    let msg = FromNode::Runs {
        sent_us: now.as_micros(),
        changes: vec![RunChange {
            job: JobId(job),
            run,
            runs,
            at_us: now.as_micros(),
        }],
    };
    c.on(
        now,
        Input::FromNode {
            from: NodeId(node),
            msg,
        },
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
    let mut c = core(two_rows(), 2, 2);
    submit(&mut c, t(1), 4);
    submit(&mut c, t(1), 4);
    c.step(t(1));
    assert_eq!(state(&c, 2).state, JobState::Suspended);
    let runs = |c: &mut Core, now: Time, node: u32, run: u32, runs: bool| {
        report_runs(c, now, node, 2, run, runs);
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
        report_runs(&mut c, at, 0, 1, 1, k % 2 == 0);
        written.extend(writes(c.step(at)).into_iter().map(|j| (at, j)));
    }
    let due = start + crate::core::RUNS_WRITE_EVERY;
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
    let p = crate::build_policy(policy, nodes, pes, &PolicyOptions::default()).unwrap();
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
        aborted: None,
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
        aborted: None,
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

/// While the gang rotation it announced repeats, the machine manager does not wake for each
/// quantum: it sleeps up to [`crate::core::ROTATION_CATCH_UP`] past the first timer and then
/// handles each timer at its own instant, so every job's record comes out as if it had
/// woken for every switch (two jobs alternating in 10-ms quanta each run half the time,
/// within a quantum).
#[test]
fn the_manager_sleeps_through_an_announced_rotation_and_books_each_switch_at_its_instant() {
    let opts = PolicyOptions {
        quantum: Some(Dur::from_millis(10)),
        mpl: Some(2),
        ..PolicyOptions::default()
    };
    let p = crate::build_policy("gang", 1, 2, &opts).unwrap();
    let mut c = Core::new(config(1, 2), p, t(0), Recovered::default()).unwrap();
    let reg = registration("n0", 2, 1, Vec::new());
    c.on(t(0), Input::Register { req: 100, reg });
    join(&mut c, t(0), 0, 1);
    c.step(t(0));
    submit(&mut c, t(1), 2);
    submit(&mut c, t(1), 2);
    let fx = c.step(t(1));
    for (_, job) in launches(&fx) {
        ack(&mut c, t(1), job.0, &[0]);
    }
    let (mut now, mut steps) = (t(1), 0);
    let end = t(3);
    while now < end {
        c.on(now, Input::Heard(NodeId(0)));
        c.step(now);
        steps += 1;
        let wake = c.next_wake();
        assert!(wake > now, "{wake:?} after {now:?}");
        now = wake.min(end);
    }
    c.step(end);
    assert!(
        steps <= 25,
        "woken {steps} times in 2 s of 10-ms quanta (200 switches)"
    );
    for job in [1, 2] {
        let info = c.job_info(c.ledger().find(JobId(job)).unwrap(), end);
        let run = Dur::from_micros(info.run_us);
        assert!(
            run >= Dur::from_millis(990) && run <= Dur::from_millis(1010),
            "job {job} ran {run:?} of 2 s in alternating 10-ms quanta: {info:?}"
        );
    }
    // Job 2's first turn, the first quantum the manager slept through, booked at its instant;
    // at 3 s, 200 quanta on, job 1's row is the active one.
    let info = |job: u64| c.job_info(c.ledger().find(JobId(job)).unwrap(), end);
    assert_eq!(info(2).record.start, Some(t(1) + Dur::from_millis(10)));
    assert_eq!(
        (info(1).state, info(2).state),
        (JobState::Running, JobState::Suspended)
    );
}

/// A restarted machine manager counts each job's run and stopped time on from the instant its
/// record was written (its start plus the run and stopped time the record holds), in the
/// state the nodes had last reported then: the time it was away is booked once — as the run
/// of the job that ran, the stop of the one that stood stopped — not as run time of both; and
/// the nodes' reports after the restart carry its run time on instead of starting it afresh.
#[test]
fn a_restart_books_its_downtime_once_by_the_state_written_and_keeps_the_run_time() {
    let runs = |c: &mut Core, now: Time, job: u64, runs: bool| {
        for node in 0..2 {
            report_runs(c, now, node, job, 1, runs);
        }
        c.step(now);
    };
    let mut c = core(two_rows(), 2, 2);
    submit(&mut c, t(1), 4);
    submit(&mut c, t(1), 4);
    c.step(t(1));
    runs(&mut c, t(1), 1, true);
    runs(&mut c, t(1), 2, false);
    // Job 2's row from 3 s on; the records are written at 4 s, then the machine manager dies.
    runs(&mut c, t(3), 1, false);
    runs(&mut c, t(3), 2, true);
    let written: Vec<JobInfo> = (1..=2)
        .map(|id| {
            let i = c.ledger().find(JobId(id)).unwrap();
            c.job_info(i, t(4))
        })
        .collect();
    let run_stop = |j: &JobInfo| {
        (
            j.run_us / 1_000_000,
            j.record.suspended.as_micros() / 1_000_000,
        )
    };
    let at = |c: &Core, id: u64, now: Time| {
        let i = c.ledger().find(JobId(id)).unwrap();
        run_stop(&c.job_info(i, now))
    };
    assert_eq!(run_stop(&written[0]), (2, 1));
    assert_eq!(run_stop(&written[1]), (1, 0));

    // Back at 10 s: job 1 stood stopped and job 2 ran for the 6 s since the records.
    let mut c = Core::new(config(2, 2), two_rows(), t(10), recovered_jobs(written)).unwrap();
    for n in 0..2u32 {
        let held = HeldJob {
            job: JobId(1),
            run: 1,
            ranks: (2 * n..2 * n + 2)
                .map(|rank| RankExit {
                    oom: false,
                    rank,
                    code: None,
                    error: None,
                })
                .collect(),
            aborted: None,
        };
        let mut two = held.clone();
        two.job = JobId(2);
        c.on(
            t(10),
            Input::Register {
                req: 200 + u64::from(n),
                reg: registration(&format!("n{n}"), 2, 1, vec![held, two]),
            },
        );
        join(&mut c, t(10), n, 1);
    }
    c.step(t(10));
    assert_eq!(at(&c, 1, t(10)), (2, 7));
    assert_eq!(at(&c, 2, t(10)), (7, 0));
    // The nodes switch back at 11 s: job 2 ran 8 s in all, not the 1 s since its report.
    runs(&mut c, t(11), 2, false);
    runs(&mut c, t(11), 1, true);
    assert_eq!(at(&c, 2, t(11)), (8, 0));
    assert_eq!(at(&c, 1, t(11)), (2, 8));
    runs(&mut c, t(12), 1, false);
    assert_eq!(at(&c, 1, t(12)), (3, 8));
}
