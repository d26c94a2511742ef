//! Nodes as configured and administered: drain, down and resume, configured ids, memory
//! limits per node, and node managers of another message version.

use super::*;

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
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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
    let table = crate::nodes::NodeTable::new(0, 1, &names, rows.clone()).unwrap();
    let fcfs = crate::build_policy("fcfs", table.size, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 3, 1, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 2, 4, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 1, 2, &PolicyOptions::default()).unwrap();
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
    let fcfs = crate::build_policy("fcfs", 2, 1, &PolicyOptions::default()).unwrap();
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
