//! Unit tests of the core, with a virtual clock and the test as the nodes.

use cosched_core::{Dur, JobId, NodeId, PeSet, Time};
use cosched_policy::{Decision, Event, Never, Policy, PolicyOptions};

use super::core::{Core, CoreConfig, Effect, Input, Recovered};
use cosched_proto::proto::*;

mod durable_changes;
mod ends;
mod job_steps;
mod jobs;
mod liveness;
mod names;
mod node_admin;
mod policy_decisions;
mod registration;

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
                reg: registration(&format!("n{n}"), pes, 1, Vec::new()),
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
    submit_as(c, now, procs, None)
}

/// A job of `procs` ranks submitted by root, as `user` when given.
fn submit_as(c: &mut Core, now: Time, procs: u32, user: Option<u32>) {
    let request = Request::Submit(Box::new(SubmitRequest {
        mem: None,
        procs,
        time_limit_us: Some(Dur::from_secs(1000).as_micros()),
        class: None,
        name: None,
        cmd: vec!["work".into()],
        cwd: "/".into(),
        user,
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

fn script(steps: Vec<(Time, Vec<Decision>)>) -> Box<dyn Policy> {
    Box::new(Script {
        steps,
        armed: false,
    })
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

/// The registration of node `name` with `pes` PEs by node manager process `incarnation`,
/// holding `jobs`.
fn registration(name: &str, pes: u32, incarnation: u64, jobs: Vec<HeldJob>) -> Register {
    Register {
        version: Version::ours(),
        memory: 1 << 40,
        name: name.into(),
        pes,
        addr: String::new(),
        jobs,
        incarnation,
    }
}

/// The registration of node `n1` (1 PE) by node manager process `incarnation`, holding `jobs`.
fn reg1(incarnation: u64, jobs: Vec<HeldJob>) -> Register {
    registration("n1", 1, incarnation, jobs)
}

/// What a restarted machine manager reads back: these job records and nothing else.
fn recovered_jobs(jobs: Vec<JobInfo>) -> Recovered {
    Recovered {
        nodes: Vec::new(),
        jobs,
        admin: Default::default(),
    }
}

/// The answer to registration `req` among `fx`.
fn registered(fx: &[Effect], req: u64) -> Option<RegisterReply> {
    fx.iter().find_map(|e| match e {
        Effect::Registered { req: r, reply } if *r == req => Some(reply.clone()),
        _ => None,
    })
}

/// A core whose nodes register at time 0 but have not joined the tree yet; a node silent
/// for `silence` is not responding and down at once.
fn registered_only(nodes: u32, heartbeat: Dur, silence: Dur) -> Core {
    let fcfs = crate::build_policy("fcfs", nodes, 1, &PolicyOptions::default()).unwrap();
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
