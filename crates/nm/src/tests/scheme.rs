//! The node scheme on the core: the gang strobe, FCS classes from the samples, and the
//! process-level simulator on the same scenario.

use cosched_monitor::Kind;

use super::*;
use crate::core::CgroupOp;

fn strobe(slot: u32, running: u64) -> ToNode {
    ToNode::Rotation(still(Strobe {
        slot: Some(slot),
        rows: vec![(JobId(1), 0), (JobId(2), 1)],
        running: vec![JobId(running)],
    }))
}

/// Checks that every process stopped in `fx` is stopped before any is continued (two jobs
/// never share a PE, even for an instant), and returns which ranks run after.
fn switch(n: &Node, fx: &[Effect], before: &BTreeSet<(JobId, u32)>) -> BTreeSet<(JobId, u32)> {
    let mut now = before.clone();
    for (i, e) in fx.iter().enumerate() {
        now = runnable(n, std::slice::from_ref(e), &now);
        assert!(
            jobs(&now).len() <= 1,
            "two jobs runnable after effect {i} of {fx:?}"
        );
    }
    now
}

#[test]
fn a_gang_jobs_ranks_are_launched_then_stopped_and_continued_by_the_strobe() {
    for cgroups in [false, true] {
        let mut n = Node::up("gs");
        n.cgroups = cgroups;
        let mut fx = n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
        // The policy placed job 2 in the other row: launched stopped.
        fx.extend(n.tree(ms(0), launch(2, 1, &[(0, 0), (1, 1)], true)));
        if cgroups {
            fx.extend(n.on(ms(0), launch_frozen(2, 2)));
        }
        let mut runs = runnable(&n, &fx, &BTreeSet::new());
        assert_eq!(
            jobs(&runs),
            BTreeSet::from([JobId(1)]),
            "cgroups: {cgroups}"
        );
        // The first strobe agrees with the launches: nothing to do.
        let fx = n.tree(ms(5), strobe(0, 1));
        assert!(signals(&fx).is_empty() && !fx.iter().any(|e| matches!(e, Effect::Cgroup { .. })));
        for (k, slot, job) in [(1, 1, 2), (2, 0, 1), (3, 1, 2)] {
            let mut fx = n.tree(ms(10 * k), strobe(slot, job));
            let out = JobId(3 - job);
            let runs_reports = |fx: &[Effect]| -> Vec<(JobId, bool)> {
                run_changes(fx)
                    .into_iter()
                    .filter(|c| c.run == 1)
                    .map(|c| (c.job, c.runs))
                    .collect()
            };
            // The machine manager books what ran: the outgoing job until it is stopped, the
            // incoming one from its thaw.
            // The first reports start with each job's run since its launch (job 2's
            // stopped at once).
            let expected = match k {
                1 => vec![
                    (out, true),
                    (out, false),
                    (JobId(job), false),
                    (JobId(job), true),
                ],
                _ => vec![(out, false), (JobId(job), true)],
            };
            if cgroups {
                assert_eq!(runs_reports(&fx), [], "nothing stopped or thawed yet");
                // The incoming job is thawed once the outgoing one is reported frozen.
                let launch = out.0;
                let after = n.on(ms(10 * k + 1), Input::Frozen { job: out, launch });
                assert_eq!(runs_reports(&after), expected);
                fx.extend(after);
            } else {
                assert_eq!(runs_reports(&fx), expected, "SIGSTOP and SIGCONT at once");
            }
            runs = switch(&n, &fx, &runs);
            assert_eq!(
                runs,
                BTreeSet::from([(JobId(job), 0), (JobId(job), 1)]),
                "slot {slot}"
            );
            if cgroups {
                let ops: Vec<(JobId, CgroupOp)> = fx
                    .iter()
                    .filter_map(|e| match e {
                        Effect::Cgroup { job, op, .. } => Some((*job, *op)),
                        _ => None,
                    })
                    .collect();
                assert_eq!(ops, [(out, CgroupOp::Freeze), (JobId(job), CgroupOp::Thaw)]);
            } else {
                assert_eq!(signals(&fx).len(), 4, "both ranks of both jobs");
            }
        }
        // A repeated strobe changes nothing.
        let fx = n.tree(ms(40), strobe(1, 2));
        assert!(signals(&fx).is_empty() && !fx.iter().any(|e| matches!(e, Effect::Cgroup { .. })));
    }
}

/// `count` receives of one rank, one every 100 ms from `from`, each waiting `wait`.
fn receives(from: Time, count: u64, wait: Dur) -> Vec<(u32, Record)> {
    (0..count)
        .map(|k| {
            let start = (from.as_micros() as u64 + k * 100_000) * 1_000;
            let record = Record {
                start_ns: start,
                end_ns: start + wait.as_micros() as u64 * 1_000,
                bytes: 8,
                peer: 1,
                kind: Kind::Recv,
                blocked_ns: 0,
            };
            (0, record)
        })
        .collect()
}

/// Runs a 1-rank job under FCS (T = 200 ms: a class lasts at least 1 s of CPU at first) for
/// two measuring periods of 1.1 and 1.2 s of CPU, with `first` and `second` ring records in
/// them; returns the class changes and the spin times written.
fn fcs(first: Vec<(u32, Record)>, second: Vec<(u32, Record)>) -> (Vec<String>, Vec<u64>) {
    let mut n = Node::up("fcs");
    let rows = || Strobe {
        slot: Some(0),
        rows: vec![(JobId(1), 0)],
        running: vec![JobId(1)],
    };
    let mut fx = n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
    fx.extend(n.tree(ms(0), ToNode::Rotation(still(rows()))));
    let pid = n.pid(1, 0);
    // What the rank did shows at the next look; the heartbeat after it reclassifies.
    n.procs.insert(pid, ('R', Dur::from_millis(1_100)));
    n.rings.insert(JobId(1), first);
    fx.extend(n.tree(ms(1_100), ToNode::Rotation(still(rows()))));
    fx.extend(n.tree(ms(1_200), ToNode::Rotation(still(rows()))));
    n.procs.insert(pid, ('R', Dur::from_millis(2_300)));
    n.rings.insert(JobId(1), second);
    fx.extend(n.tree(ms(2_400), ToNode::Rotation(still(rows()))));
    fx.extend(n.tree(ms(2_500), ToNode::Rotation(still(rows()))));
    let spins = fx
        .iter()
        .filter_map(|e| match e {
            Effect::SetSpin { ns, .. } => Some(*ns),
            _ => None,
        })
        .collect();
    n.core.on(
        ms(2_600),
        Input::Tree {
            epoch: n.core.membership,
            msg: ToNode::FetchMonitor { req: 9 },
        },
    );
    let report = n.pump();
    let [Effect::SendMonitor { scheme, events, .. }] = &report[..] else {
        panic!("{report:?}")
    };
    assert_eq!(scheme, "fcs");
    let classes = events
        .iter()
        .filter(|e| !e.switch_in)
        .map(|e| e.class.clone())
        .collect();
    (classes, spins)
}

#[test]
fn an_fcs_class_change_comes_from_injected_ring_samples() {
    // Ten receives waiting 5 ms each in 1.1 s of CPU while coscheduled: neither fine-grained
    // nor effective, so the rank leaves CS to be measured as DC; ten more in its DC period
    // keep it communicating, and its coscheduled waits (5 ms > F_thresh = 2 ms) make it F.
    let wait = Dur::from_millis(5);
    let (classes, spins) = fcs(receives(ms(0), 10, wait), receives(ms(1_250), 10, wait));
    assert_eq!(classes, ["CS", "DC", "F"]);
    // A CS slot owner spins a whole time slice; then min(2·5 ms, MAX_spin = 2 ms).
    assert_eq!(spins, [200_000_000, 2_000_000]);
    // Without the records, the same CPU time says nothing of its communication: DC.
    let (classes, _) = fcs(Vec::new(), Vec::new());
    assert_eq!(classes, ["CS", "DC", "DC"]);
}

#[test]
fn fcs_looks_at_its_ranks_every_tick_while_it_has_ranks() {
    let mut n = Node::up("fcs");
    // Only the machine manager's silence is due before a rank arrives.
    assert_eq!(n.core.next_wake(), Some(ms(40_200)));
    n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
    assert_eq!(n.core.next_wake(), Some(ms(0)));
    let looks = |fx: &[Effect]| {
        fx.iter()
            .filter(|e| matches!(e, Effect::Sample { .. }))
            .count()
    };
    assert_eq!(looks(&n.until(ms(95))), 10, "at 0, 10, … 90 ms");
    n.on(
        ms(96),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(0, 0),
        },
    );
    assert_eq!(looks(&n.until(ms(200))), 0, "no rank left to look at");
}

#[test]
fn the_gang_switch_sequence_of_two_jobs_is_the_process_level_simulators() {
    let horizon = ms(100);
    // The process-level simulator: two 2-rank jobs on one node of 2 PEs under gs, 10 ms
    // slices, free switches; each job computes far longer than the horizon.
    let sc = cosched_cosim::Scenario::parse(
        r#"
seed = 1
[machine]
nodes = 1
pes_per_node = 2
mpl = 2
[costs]
context_switch = "0us"
[schemes]
timeslice = "10ms"
[[jobs]]
procs = 2
work = "2s"
granularity = 10.0
pattern = "none"
[[jobs]]
procs = 2
work = "2s"
granularity = 10.0
pattern = "none"
"#,
        "two-gang",
    )
    .unwrap();
    let jobs = cosched_cosim::workload::build(&sc).unwrap();
    let ids: Vec<u32> = jobs.iter().map(|j| j.id).collect();
    let (_, trace) =
        cosched_cosim::engine::Engine::new(&sc, cosched_node::Scheme::Gs, &jobs, false)
            .traced()
            .run_traced();
    let mut sim: BTreeMap<Time, BTreeSet<JobId>> = BTreeMap::new();
    for d in trace.iter().filter(|d| d.at < horizon) {
        let job = ids.iter().position(|&i| i == d.job).unwrap() as u64 + 1;
        sim.entry(d.at).or_default().insert(JobId(job));
    }
    // The real driver: the machine manager's core running the gang policy with the same
    // quantum, and this node manager's core, the test carrying the tree's messages.
    let real = real_gang_run(horizon);
    assert_eq!(real, sim);
    assert!(sim.len() >= 10, "a switch every quantum: {sim:?}");
}

/// When each job's processes start running on the node under the machine manager's gang
/// policy (2 rows, 10 ms quanta) with two 2-rank jobs submitted at 0.
fn real_gang_run(horizon: Time) -> BTreeMap<Time, BTreeSet<JobId>> {
    use cosched_mm::core::{Core, CoreConfig as MmConfig, Effect as MmEffect, Input as MmInput};
    let opts = cosched_policy::PolicyOptions {
        mpl: Some(2),
        quantum: Some(Dur::from_millis(10)),
        ..Default::default()
    };
    let policy = cosched_mm::build_policy("gang", 1, 2, &opts).unwrap();
    let cfg = MmConfig {
        nodes: 1,
        pes: 2,
        names: Vec::new(),
        fanout: 8,
        heartbeat: Dur::from_secs(3600),
        suspect_after: Dur::from_secs(36_000),
        down_after: Dur::from_secs(36_000),
        requeue: false,
        kill_wait: Dur::from_secs(5),
        hold_pes_while_completing: true,
        keep_jobs: Dur::from_secs(86_400),
    };
    let mut mm = Core::new(cfg, policy, ms(0), Default::default()).unwrap();
    let (mut nm, mut to_mm) = Node::starting("gs");
    let mut runs: BTreeMap<Time, BTreeSet<JobId>> = BTreeMap::new();
    let mut running = BTreeSet::new();
    let mut now = ms(0);
    let mut submitted = false;
    let mut tree_epoch = 0;
    loop {
        // Everything of this instant, until neither side has anything to say.
        loop {
            for e in std::mem::take(&mut to_mm) {
                match e {
                    Effect::Register(reg) => {
                        mm.on(now, MmInput::Register { req: 1, reg });
                    }
                    Effect::Up(msg) => {
                        mm.on(
                            now,
                            MmInput::FromNode {
                                from: NodeId(0),
                                msg,
                            },
                        );
                    }
                    _ => {}
                }
            }
            if !submitted && nm.core.takes_tree_input() {
                for _ in 0..2 {
                    mm.on_unstored(now, submit(2));
                }
                submitted = true;
            }
            let mut to_nm = Vec::new();
            for e in mm.step(now) {
                match e {
                    MmEffect::Registered { reply, .. } => {
                        to_nm.push(Input::Registration(Ok(reply)))
                    }
                    MmEffect::Members { epoch, members } => {
                        // Messages are stamped with the epoch announced last, as the
                        // machine manager's shell stamps them.
                        tree_epoch = epoch;
                        to_nm.push(Input::Topology {
                            epoch,
                            member: members.iter().any(|(n, _)| *n == NodeId(0)),
                        })
                    }
                    MmEffect::Send { to, msg } if to.contains(&NodeId(0)) => {
                        to_nm.push(Input::Tree {
                            epoch: tree_epoch,
                            msg,
                        })
                    }
                    MmEffect::Broadcast(msg) => to_nm.push(Input::Tree {
                        epoch: tree_epoch,
                        msg,
                    }),
                    MmEffect::Heartbeat { seq, rotation } => to_nm.push(Input::Tree {
                        epoch: tree_epoch,
                        msg: ToNode::Heartbeat { seq, rotation },
                    }),
                    _ => {}
                }
            }
            if to_nm.is_empty() && to_mm.is_empty() {
                break;
            }
            for i in to_nm {
                let fx = nm.on(now, i);
                seen(&nm, now, fx, &mut running, &mut runs, &mut to_mm);
            }
        }
        let next = [Some(mm.next_wake()), nm.core.next_wake()]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        if next >= horizon {
            return runs;
        }
        now = next.max(now);
        // The node switches on its own timer, at the instants the rotation announced.
        let fx = nm.until(now);
        seen(&nm, now, fx, &mut running, &mut runs, &mut to_mm);
    }
}

/// The node's effects `fx` at `now`: the jobs that start running are added to `runs`, and
/// the effects go on to the machine manager.
fn seen(
    nm: &Node,
    now: Time,
    fx: Vec<Effect>,
    running: &mut BTreeSet<(JobId, u32)>,
    runs: &mut BTreeMap<Time, BTreeSet<JobId>>,
    to_mm: &mut Vec<Effect>,
) {
    let after = runnable(nm, &fx, running);
    let started: BTreeSet<JobId> = jobs(&after).difference(&jobs(running)).copied().collect();
    if !started.is_empty() {
        runs.entry(now).or_default().extend(started);
    }
    *running = after;
    to_mm.extend(fx);
}

fn submit(procs: u32) -> cosched_mm::core::Input {
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
    cosched_mm::core::Input::Client {
        req: 2,
        request,
        caller: Caller::ROOT,
    }
}

/// A job launched stopped into its cgroup is frozen asynchronously: the first look may still
/// see its ranks running, the next one frozen, which `/proc` shows as sleeping. That sleep is
/// the freezer's, not the rank's: read as a block, FCS took the ranks off their PEs and put
/// them back once thawed, two context switches for one.
#[test]
fn fcs_does_not_read_a_frozen_jobs_ranks_as_blocked() {
    let mut n = Node::up("fcs");
    n.cgroups = true;
    let rows = |jobs: &[u64]| {
        ToNode::Rotation(still(Strobe {
            slot: Some(0),
            rows: jobs.iter().map(|&j| (JobId(j), j as u32 - 1)).collect(),
            running: vec![JobId(1)],
        }))
    };
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    n.tree(ms(0), rows(&[1]));
    // Job 1's ranks sleep: their PEs are free for the other row's job.
    for r in 0..2 {
        n.procs.insert(n.pid(1, r), ('S', Dur::ZERO));
    }
    n.until(ms(20));
    // The policy placed job 2 in row 1, launched stopped; the strobe naming it comes after.
    let fx = n.tree(ms(21), launch(2, 1, &[(0, 0), (1, 1)], true));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Cgroup {
                op: CgroupOp::Freeze,
                ..
            }
        )),
        "launched frozen: {fx:?}"
    );
    n.until(ms(30));
    // The freeze has landed: the ranks show as sleeping.
    for r in 0..2 {
        n.procs.insert(n.pid(2, r), ('S', Dur::ZERO));
    }
    let fx = n.tree(ms(31), rows(&[1, 2]));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Cgroup {
                job: JobId(2),
                op: CgroupOp::Thaw,
                ..
            }
        )),
        "job 2 fills row 0's idle PEs: {fx:?}"
    );
    for r in 0..2 {
        n.procs.insert(n.pid(2, r), ('R', Dur::from_millis(5)));
    }
    n.until(ms(60));
    n.core.on(
        ms(60),
        Input::Tree {
            epoch: n.core.membership,
            msg: ToNode::FetchMonitor { req: 9 },
        },
    );
    let report = n.pump();
    let [Effect::SendMonitor { events, .. }] = &report[..] else {
        panic!("{report:?}")
    };
    let ins: Vec<(u32, u32)> = events
        .iter()
        .filter(|e| e.switch_in && e.job == JobId(2))
        .map(|e| (e.rank, e.pe))
        .collect();
    assert_eq!(
        ins,
        [(0, 0), (1, 1)],
        "each rank of job 2 went onto its PE once: {events:?}"
    );
}
