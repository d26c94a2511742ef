//! One policy, two drivers: the simulator and the machine manager's core give the same schedule.
//!
//! One workload — a seeded Lublin model of 240 jobs on 4 nodes × 8 PEs, with time limits
//! (some too short), cancellations, holds and releases, and a node that goes down and comes
//! back — runs (a) through the simulator and (b) through the machine manager's sans-IO core
//! with a virtual clock, this test playing the nodes: it turns launch, stop, continue and kill
//! messages into each job's remaining work and reports the ranks' exits when the work is
//! done. Under fcfs, easy, conservative, prime, gang and t3d, the decision logs (every
//! non-empty `decide`, with its time) and the job records must be identical.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cosched_core::{Dur, JobId, JobRecord, NodeId, Outcome, Time};
use cosched_mm::build_policy;
use cosched_mm::core::{Core, CoreConfig, Effect, Input, Recovered};
use cosched_policy::{Decision, Event, MatrixView, Policy, PolicyOptions};
use cosched_proto::proto::{Caller, FromNode, RankExit, Register, Request, SubmitRequest, ToNode};
use cosched_sim::engine::Operation;
use cosched_sim::{EngineOptions, SimJob, simulate};
use cosched_workload::lublin::{EstimateModel, GenOptions, generate};

const NODES: u32 = 4;
const PES: u32 = 8;
/// The node that fails, and when (a multiple of the heartbeat, when the MM notices).
const DOWN_NODE: u32 = 1;
const HEARTBEAT: Dur = Dur::from_secs(60);
const DEAD_AFTER: Dur = Dur::from_secs(150);

type Log = Arc<Mutex<Vec<(Time, Vec<Decision>)>>>;

/// Lets a policy decide and logs every non-empty decision of each `decide` call.
struct Recording {
    inner: Box<dyn Policy>,
    log: Log,
}

impl Policy for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn observe(&mut self, now: Time, event: Event) {
        self.inner.observe(now, event);
    }
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        let from = out.len();
        self.inner.decide(now, out);
        if out.len() > from {
            self.log.lock().unwrap().push((now, out[from..].to_vec()));
        }
    }
    fn queue(&self) -> Vec<JobId> {
        self.inner.queue()
    }
    fn matrix(&self) -> Option<MatrixView> {
        self.inner.matrix()
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        // A forecast's decisions are not the run's: the copy logs elsewhere.
        Box::new(Recording {
            inner: self.inner.boxed_clone(),
            log: Log::default(),
        })
    }
}

/// The same policy, configured as the machine manager configures it (migration off), for
/// both drivers.
fn policy(name: &str) -> (Box<dyn Policy>, Log) {
    let mut opts = PolicyOptions {
        quantum: Some(Dur::from_secs(300)),
        mpl: Some(3),
        ..PolicyOptions::default()
    };
    // The policy reads its file when built; the directory goes once it is.
    let mut conf_dir = None;
    if name == "t3d" {
        // Jobs over 24 PEs are refused, so rejections are compared too. Production jobs
        // (every job here) are preemptible, so T3D preempts, and with migration off each
        // preempted job restarts on its own PEs.
        let dir = tempfile::Builder::new()
            .prefix("cosched-sim-vs-mm-")
            .tempdir()
            .unwrap();
        let file = dir.path().join("t3d.toml");
        std::fs::write(&file, "[policy]\njob_limit = 24\n").unwrap();
        opts.file = Some(file);
        conf_dir = Some(dir);
    }
    let inner = build_policy(name, NODES, PES, &opts).unwrap();
    drop(conf_dir);
    let log = Log::default();
    let p = Recording {
        inner,
        log: log.clone(),
    };
    (Box::new(p), log)
}

fn s(secs: f64) -> Time {
    Time::from_secs_f64(secs)
}

/// The workload and what users and the machine do to it, in the simulator's terms.
fn workload() -> (Vec<SimJob>, Vec<(Time, Operation)>, Time, Time) {
    let trace = generate(&GenOptions {
        jobs: 240,
        procs: NODES * PES,
        seed: 9,
        estimates: EstimateModel::Popular,
        ..GenOptions::default()
    });
    let mut recs: Vec<_> = trace
        .records
        .iter()
        .filter(|r| r.submit.is_some())
        .collect();
    recs.sort_by_key(|r| (r.submit, r.job));
    let mut jobs = Vec::new();
    for (k, r) in recs.iter().enumerate() {
        let id = k as u64 + 1;
        // Whole seconds, after the nodes registered at 0.
        let submit = Time::from_secs(r.submit.unwrap().as_secs() + 1);
        let runtime = Dur::from_secs(r.run.unwrap_or(Dur::ZERO).as_secs().max(1));
        let procs = r
            .req_procs
            .or(r.alloc_procs)
            .unwrap_or(1)
            .clamp(1, NODES * PES);
        let mut estimate = r.req_time.unwrap_or(runtime).max(runtime);
        if id.is_multiple_of(17) {
            // A time limit too short: the job is killed at it.
            estimate = Dur::from_secs((runtime.as_secs() / 2).max(1));
        }
        let mut j = SimJob::with_estimate(id, submit, procs, runtime, estimate);
        j.limit = Some(estimate);
        jobs.push(j);
    }
    let span = jobs.last().unwrap().req.submit;
    let mut ops = Vec::new();
    for j in &jobs {
        let id = j.req.id;
        let at = j.req.submit.as_secs_f64();
        match id.0 % 23 {
            // Cancelled soon after submission (often still waiting) or while running.
            3 => ops.push((s(at + 0.5), Operation::Cancel(id))),
            7 => ops.push((
                s(at + j.runtime.as_secs_f64() * 0.6 + 30.5),
                Operation::Cancel(id),
            )),
            // Held from its submission, released half an hour later.
            11 => {
                ops.push((j.req.submit, Operation::Hold(id)));
                ops.push((s(at + 1800.5), Operation::Release(id)));
            }
            // Held a little after its submission (often running by then), released later.
            19 => {
                ops.push((s(at + 10.5), Operation::Hold(id)));
                ops.push((s(at + 1800.5), Operation::Release(id)));
            }
            _ => {}
        }
    }
    // The node fails in the middle of the run and comes back an hour later.
    let hb = HEARTBEAT.as_secs();
    let down = Time::from_secs(span.as_secs() / 2 / hb * hb);
    let up = down + Dur::from_secs(3600);
    ops.push((down, Operation::NodeDown(NodeId(DOWN_NODE))));
    ops.push((up, Operation::NodeUp(NodeId(DOWN_NODE))));
    ops.sort_by_key(|o| o.0);
    (jobs, ops, down, up)
}

/// A job's processes as the fake nodes run them.
struct Procs {
    run: u32,
    left: Dur,
    since: Option<Time>,
    /// Node of each rank.
    ranks: Vec<NodeId>,
}

/// Runs the workload through the machine manager's core; returns its records and decisions.
fn run_mm(
    name: &str,
    jobs: &[SimJob],
    ops: &[(Time, Operation)],
    down: Time,
    up: Time,
) -> (Vec<JobRecord>, Vec<(Time, Vec<Decision>)>) {
    let (policy, log) = policy(name);
    let cfg = CoreConfig {
        nodes: NODES,
        pes: PES,
        names: Vec::new(),
        fanout: 8,
        heartbeat: HEARTBEAT,
        // Not responding and down at the same heartbeat: the simulator's node goes down
        // (for the policy and its jobs) in one instant.
        suspect_after: DEAD_AFTER,
        down_after: DEAD_AFTER,
        requeue: false,
        kill_wait: Dur::from_secs(5),
        hold_pes_while_completing: false,
        keep_jobs: Dur::from_secs(7 * 86_400),
    };
    let mut core = Core::new(cfg, policy, Time::ZERO, Recovered::default()).unwrap();
    let register = |n: u32, incarnation: u64| Input::Register {
        req: 0,
        reg: Register {
            version: cosched_proto::proto::Version::ours(),
            memory: 1 << 40,
            name: format!("n{n}"),
            pes: PES,
            addr: format!("127.0.0.1:{}", 9000 + n),
            jobs: Vec::new(),
            incarnation,
        },
    };
    // A node is up once it reports being in the tree announced at its registration.
    let join = |core: &mut Core, now: Time, n: u32, incarnation: u64| {
        let epoch = core.tree_epoch();
        let msg = FromNode::Joined { incarnation, epoch };
        core.on(
            now,
            Input::FromNode {
                from: NodeId(n),
                msg,
            },
        );
    };
    for n in 0..NODES {
        core.on(Time::ZERO, register(n, 1));
        join(&mut core, Time::ZERO, n, 1);
    }
    let work: BTreeMap<JobId, Dur> = jobs.iter().map(|j| (j.req.id, j.runtime)).collect();
    let mut procs: BTreeMap<JobId, Procs> = BTreeMap::new();
    // The gang rotation the nodes were told last.
    let mut rotation: Option<cosched_proto::rotation::Rotation> = None;
    let mut next_job = 0;
    let mut next_op = 0;
    // The failing node answers no heartbeat after this; its processes run until it is
    // declared down.
    let silent_from = down - HEARTBEAT * 3 + Dur::from_secs(1);
    let mut now = Time::ZERO;
    let mut acks: Vec<(NodeId, FromNode)> = Vec::new();
    loop {
        for (from, msg) in acks.drain(..) {
            core.on(now, Input::FromNode { from, msg });
        }
        // Exits due now, then the submissions and the users' operations.
        let due: Vec<JobId> = procs
            .iter()
            .filter(|(_, p)| p.since.is_some_and(|s| s + p.left <= now))
            .map(|(j, _)| *j)
            .collect();
        for job in due {
            let p = procs.remove(&job).unwrap();
            for (rank, node) in p.ranks.iter().enumerate() {
                let exit = RankExit {
                    oom: false,
                    rank: rank as u32,
                    code: Some(0),
                    error: None,
                };
                let msg = FromNode::Exited {
                    job,
                    run: p.run,
                    exit,
                };
                core.on(now, Input::FromNode { from: *node, msg });
            }
        }
        while let Some(j) = jobs.get(next_job)
            && j.req.submit <= now
        {
            let request = Request::Submit(Box::new(SubmitRequest {
                mem: None,
                procs: j.req.procs,
                time_limit_us: j.limit.map(|l| l.as_micros()),
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
            core.on_unstored(
                now,
                Input::Client {
                    req: 1,
                    request,
                    caller: Caller::ROOT,
                },
            );
            next_job += 1;
        }
        while let Some((t, op)) = ops.get(next_op)
            && *t <= now
        {
            let request = match op {
                Operation::Cancel(j) => Some(Request::Cancel(*j)),
                Operation::Hold(j) => Some(Request::Suspend(*j)),
                Operation::Release(j) => Some(Request::Resume(*j)),
                // Noticed by missed heartbeats.
                Operation::NodeDown(_) => None,
                Operation::NodeUp(n) => {
                    core.on(now, register(n.0, 2));
                    join(&mut core, now, n.0, 2);
                    None
                }
            };
            if let Some(request) = request {
                core.on_unstored(
                    now,
                    Input::Client {
                        req: 2,
                        request,
                        caller: Caller::ROOT,
                    },
                );
            }
            next_op += 1;
        }
        for e in core.step(now) {
            match e {
                Effect::Send { msg, .. } => match msg {
                    ToNode::Launch(l) => {
                        // Each node acknowledges the launch (acted on at the next step).
                        for pl in &l.placement {
                            let msg = FromNode::Launched {
                                job: l.job,
                                run: l.run,
                            };
                            acks.push((pl.node, msg));
                        }
                        let mut ranks = vec![NodeId(0); l.size as usize];
                        for pl in &l.placement {
                            for &(r, _) in &pl.ranks {
                                ranks[r as usize] = pl.node;
                            }
                        }
                        let p = Procs {
                            run: l.run,
                            left: work[&l.job],
                            since: (!l.stopped).then_some(now),
                            ranks,
                        };
                        assert!(
                            procs.insert(l.job, p).is_none(),
                            "job {} launched twice",
                            l.job
                        );
                    }
                    ToNode::Switch { stop, cont, kill } => {
                        for j in stop {
                            let p = procs.get_mut(&j).expect("stops a job with processes");
                            let since = p.since.take().expect("stops a running job");
                            p.left -= now - since;
                        }
                        for j in cont {
                            let p = procs.get_mut(&j).expect("continues a job with processes");
                            assert!(p.since.is_none(), "continues a running job");
                            p.since = Some(now);
                        }
                        for j in kill {
                            procs.remove(&j);
                        }
                    }
                    ToNode::Forget { jobs } => {
                        for j in jobs {
                            procs.remove(&j);
                        }
                    }
                    _ => {}
                },
                // The jobs of the gang matrix get no stop or continue of their own: the nodes
                // run those the announced rotation lists as running at each instant (what a
                // `gs` node does).
                Effect::Broadcast(ToNode::Rotation(r)) => rotation = Some(r),
                Effect::Heartbeat { .. } => {
                    for n in 0..NODES {
                        if n != DOWN_NODE || now < silent_from || now >= up {
                            core.on(now, Input::Heard(NodeId(n)));
                        }
                    }
                }
                Effect::Log(line) => assert!(!line.contains("refused"), "{line}"),
                _ => {}
            }
        }
        if let Some(st) = rotation.as_ref().and_then(|r| r.strobe_at(now)) {
            for (j, _) in &st.rows {
                let Some(p) = procs.get_mut(j) else { continue };
                let runs = st.running.contains(j);
                match p.since {
                    Some(since) if !runs => {
                        p.left -= now - since;
                        p.since = None;
                    }
                    None if runs => p.since = Some(now),
                    _ => {}
                }
            }
        }
        if core.ledger().ended() == jobs.len() && next_op == ops.len() {
            break;
        }
        let next_exit = procs
            .values()
            .filter_map(|p| p.since.map(|s| s + p.left))
            .min();
        let next = [
            jobs.get(next_job).map(|j| j.req.submit),
            ops.get(next_op).map(|o| o.0),
            next_exit,
            // The nodes switch at the rotation's instants whether the machine manager wakes
            // then or not.
            rotation.as_ref().and_then(|r| r.next_after(now)),
            Some(core.next_wake()),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        assert!(next >= now, "time went backwards");
        now = next;
    }
    let records = core.records().cloned().collect();
    drop(core);
    let log = std::mem::take(&mut *log.lock().unwrap());
    (records, log)
}

/// Whether the policy had `job` running just before `at`, by the decisions logged before.
fn runs_at(log: &[(Time, Vec<Decision>)], job: JobId, at: Time) -> bool {
    let mut running = false;
    for d in log
        .iter()
        .take_while(|(t, _)| *t < at)
        .flat_map(|(_, ds)| ds)
    {
        match d {
            Decision::Start { job: j, .. } | Decision::Resume { job: j } if *j == job => {
                running = true
            }
            Decision::Suspend { job: j }
            | Decision::Preempt { job: j }
            | Decision::Kill { job: j }
                if *j == job =>
            {
                running = false
            }
            _ => {}
        }
    }
    running
}

#[test]
fn the_simulator_and_the_machine_manager_decide_and_record_alike() {
    for name in ["fcfs", "easy", "conservative", "prime", "gang", "t3d"] {
        let (jobs, ops, down, up) = workload();
        assert!(jobs.len() >= 200);
        let (mut sim_policy, sim_log) = policy(name);
        let sim = simulate(
            cosched_core::MachineShape::flat(NODES, PES),
            &jobs,
            sim_policy.as_mut(),
            EngineOptions {
                operations: ops.clone(),
                no_migration: true,
                ..EngineOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: the simulator: {e}"));
        let (mm, mm_log) = run_mm(name, &jobs, &ops, down, up);
        let sim_log = std::mem::take(&mut *sim_log.lock().unwrap());
        for (k, (a, b)) in sim_log.iter().zip(&mm_log).enumerate() {
            assert_eq!(a, b, "{name}: decision {k} differs (left: simulator)");
        }
        assert_eq!(sim_log.len(), mm_log.len(), "{name}: decision counts");
        // A simulated job has no processes, so no exit code: that field alone is normalised.
        let mm: Vec<JobRecord> = mm
            .into_iter()
            .map(|mut r| {
                r.exit_code = None;
                r
            })
            .collect();
        assert_eq!(sim.records.len(), mm.len());
        // The workload exercises what it claims to, under every policy.
        let count = |o: Outcome| mm.iter().filter(|r| r.outcome == Some(o)).count();
        let held = mm.iter().filter(|r| r.suspended > Dur::ZERO).count();
        eprintln!(
            "{name}: {} decisions; completed {}, cancelled {}, timed out {}, node failed {}, rejected {}, stopped for a while {held}",
            mm_log.len(),
            count(Outcome::Completed),
            count(Outcome::Cancelled),
            count(Outcome::TimedOut),
            count(Outcome::NodeFailed),
            count(Outcome::Rejected),
        );
        assert!(
            count(Outcome::Cancelled) >= 5 && count(Outcome::TimedOut) >= 3,
            "{name}"
        );
        // Under prime the failing node happens to be idle when it fails (both drivers agree
        // on that too); it still goes down and comes back.
        if name != "prime" {
            let lost = count(Outcome::NodeFailed);
            assert!(lost >= 1, "{name}: no job was lost with the node");
        }
        assert!(held >= 1, "{name}: no job was ever stopped");
        if name == "t3d" {
            assert!(
                count(Outcome::Rejected) >= 1,
                "t3d: nothing over its job limit"
            );
            let preempts = mm_log
                .iter()
                .flat_map(|(_, ds)| ds)
                .filter(|d| matches!(d, Decision::Preempt { .. }))
                .count();
            eprintln!("t3d: {preempts} preemptions");
            assert!(preempts >= 1, "t3d: no job was preempted");
            // Without migration a preempted job's stopped processes die with their node (the
            // simulator does not keep such jobs to continue them later).
            let lost_preempted = mm
                .iter()
                .filter(|r| r.outcome == Some(Outcome::NodeFailed) && r.preemptions > 0)
                .count();
            assert!(
                lost_preempted >= 1,
                "t3d: no preempted job lost with its node"
            );
        }
        // Holds of running jobs: the ledger keeps them running under the hold, and the
        // time-sharing policies must stop (or keep) them without breaking its checks.
        let running_holds = ops
            .iter()
            .filter(|(t, op)| matches!(op, Operation::Hold(j) if runs_at(&mm_log, *j, *t)))
            .count();
        eprintln!("{name}: {running_holds} holds of running jobs");
        if name == "gang" || name == "t3d" {
            assert!(running_holds >= 1, "{name}: no running job was held");
        }
        assert_eq!(sim.unfinished, 0, "{name}");
        for (a, b) in sim.records.iter().zip(&mm) {
            assert_eq!(a, b, "{name}: job {} differs (left: simulator)", a.id);
        }
    }
}
