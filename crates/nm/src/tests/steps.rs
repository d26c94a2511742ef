//! Allocations and steps on a node: a batch script runs once, on the allocation's first
//! node; a step's ranks join the allocation's cgroup, are stopped, continued and killed with
//! it, and their end is reported once.

use super::*;
use crate::core::CgroupOp;
use crate::launch::{PrepareLaunch, RankSpec};

fn specs(fx: &[Effect]) -> Vec<RankSpec> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Spawn(s) => Some((**s).clone()),
            _ => None,
        })
        .collect()
}

fn prepares(fx: &[Effect]) -> Vec<PrepareLaunch> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Prepare(p) => Some((**p).clone()),
            _ => None,
        })
        .collect()
}

/// Whether job 5's launch (run 1) was acknowledged.
fn launched(fx: &[Effect]) -> bool {
    ups(fx).iter().any(|m| {
        matches!(
            m,
            FromNode::Launched {
                job: JobId(5),
                run: 1
            }
        )
    })
}

/// Batch job 5 of four ranks: `first` holds ranks 0 and 1, the other node 2 and 3.
fn batch(first: NodeId, other: NodeId) -> ToNode {
    let ToNode::Launch(mut l) = launch(5, 1, &[], false) else {
        unreachable!()
    };
    l.size = 4;
    l.cmd = vec!["/bin/sh".into(), "/home/ann/job.sh".into()];
    l.io.batch = true;
    l.placement = vec![
        Placement {
            node: first,
            ranks: vec![(0, 0), (1, 1)],
            extra_pes: Vec::new(),
        },
        Placement {
            node: other,
            ranks: vec![(2, 0), (3, 1)],
            extra_pes: Vec::new(),
        },
    ];
    ToNode::Launch(l)
}

/// Step `step` of job 5 (run 1) with two ranks on this node.
fn step(step: u32) -> ToNode {
    ToNode::Launch(Launch {
        job: step_unit(JobId(5), step),
        size: 2,
        cmd: vec!["./prog".into()],
        cwd: "/home/ann".into(),
        env: Vec::new(),
        io: JobIo::default(),
        stopped: false,
        uid: None,
        gid: None,
        placement: vec![Placement {
            node: NodeId(0),
            ranks: vec![(0, 0), (1, 1)],
            extra_pes: Vec::new(),
        }],
        run: 1,
        mem: None,
        within: Some(JobId(5)),
    })
}

#[test]
fn a_batch_job_runs_its_script_once_on_the_first_node_only() {
    let mut n = Node::up("gs");
    let fx = n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    let s = specs(&fx);
    assert_eq!(s.len(), 1, "one process for four PEs: {s:?}");
    assert_eq!((s[0].job, s[0].rank), (JobId(5), 0));
    assert!(s[0].pmi_env.is_empty(), "a batch script gets no PMI");
    assert_eq!(s[0].path_first, Some(PathBuf::from("/w/slurm-bin")));
    assert!(launched(&fx));

    // On the allocation's second node: nothing runs, but the allocation is held there (its
    // cgroup made) for the steps to come.
    let mut n = Node::up("gs");
    n.cgroups = true;
    let fx = n.tree(ms(10), batch(NodeId(1), NodeId(0)));
    assert!(specs(&fx).is_empty(), "{fx:?}");
    assert_eq!(prepares(&fx).len(), 1);
    assert!(launched(&fx));
    let fx = n.tree(ms(20), step(0));
    assert_eq!(prepares(&fx)[0].join, Some((JobId(5), 1)));
    assert_eq!(specs(&fx).len(), 2);
}

#[test]
fn a_steps_ranks_spawn_in_the_allocations_cgroup_with_their_own_numbering() {
    let mut n = Node::up("gs");
    n.cgroups = true;
    n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    let fx = n.tree(ms(20), step(0));
    let p = prepares(&fx);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].job, step_unit(JobId(5), 0));
    assert_eq!(p[0].join, Some((JobId(5), 1)), "the allocation's launch 1");
    let s = specs(&fx);
    assert_eq!(s.len(), 2);
    for (rank, spec) in s.iter().enumerate() {
        assert!(spec.cgroup, "rank {rank} joins a cgroup");
        assert_eq!(spec.rank, rank as u32);
        let env: BTreeMap<&str, &str> = spec
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(env["COSCHED_JOB_ID"], "5");
        assert_eq!(env["SLURM_PROCID"], rank.to_string());
        assert_eq!(env["SLURM_LOCALID"], rank.to_string());
        assert_eq!(env["SLURM_NODEID"], "0");
        assert_eq!(env["SLURMD_NODENAME"], "n0");
        assert_eq!(spec.path_first, Some(PathBuf::from("/w/slurm-bin")));
    }
    // The allocation's freezer holds the step: stopping the job freezes one cgroup, and the
    // step's ranks get no signal of their own.
    let fx = n.tree(
        ms(30),
        ToNode::Switch {
            stop: vec![JobId(5)],
            cont: vec![],
            kill: vec![],
        },
    );
    let freezes: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Cgroup { job, launch, op } => Some((*job, *launch, *op)),
            _ => None,
        })
        .collect();
    assert_eq!(freezes, [(JobId(5), 1, CgroupOp::Freeze)]);
}

#[test]
fn a_steps_end_is_reported_once() {
    let mut n = Node::up("gs");
    n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    n.tree(ms(20), step(0));
    let unit = step_unit(JobId(5), 0);
    let mut reported = Vec::new();
    for (at, rank) in [(30, 0), (31, 1), (32, 1)] {
        let fx = n.on(
            ms(at),
            Input::Exited {
                job: unit,
                launch: 2,
                exit: exit(rank, 0),
            },
        );
        reported.extend(exits(&fx));
    }
    assert_eq!(reported, [(unit.0, 1, 0, Some(0)), (unit.0, 1, 1, Some(0))]);
    // The batch script (launch 1) is still there; the step's exits were not its.
    let fx = n.on(
        ms(40),
        Input::Exited {
            job: JobId(5),
            launch: 1,
            exit: exit(0, 0),
        },
    );
    assert_eq!(exits(&fx), [(5, 1, 0, Some(0))]);
}

#[test]
fn scancel_kills_every_step_of_the_allocation() {
    // In a cgroup: the allocation's one terminate reaches every step's processes.
    let mut n = Node::up("gs");
    n.cgroups = true;
    n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    n.tree(ms(20), step(0));
    n.tree(ms(21), step(1));
    let kill = ToNode::Switch {
        stop: vec![],
        cont: vec![],
        kill: vec![JobId(5)],
    };
    let fx = n.tree(ms(30), kill.clone());
    let ops: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Cgroup { job, launch, op } => Some((*job, *launch, *op)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ops,
        [(
            JobId(5),
            1,
            CgroupOp::Terminate {
                grace: Dur::from_secs(5)
            }
        )]
    );

    // Without cgroups: SIGTERM to the script's group and to each step rank's.
    let mut n = Node::up("gs");
    n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    n.tree(ms(20), step(0));
    n.tree(ms(21), step(1));
    let fx = n.tree(ms(30), kill);
    let mut termed: Vec<i32> = signals(&fx)
        .into_iter()
        .filter(|&(_, s)| s == libc::SIGTERM)
        .map(|(g, _)| g)
        .collect();
    termed.sort_unstable();
    assert_eq!(
        termed,
        [100, 101, 102, 103, 104],
        "the script and four step ranks"
    );
}

#[test]
fn a_step_waits_to_spawn_while_its_allocation_is_frozen() {
    let mut n = Node::up("gs");
    n.cgroups = true;
    n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    n.tree(
        ms(20),
        ToNode::Switch {
            stop: vec![JobId(5)],
            cont: vec![],
            kill: vec![],
        },
    );
    let fx = n.tree(ms(30), step(0));
    assert!(specs(&fx).is_empty(), "no process joins a frozen cgroup");
    let fx = n.tree(
        ms(40),
        ToNode::Switch {
            stop: vec![],
            cont: vec![JobId(5)],
            kill: vec![],
        },
    );
    let order: Vec<&str> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Cgroup {
                op: CgroupOp::Thaw, ..
            } => Some("thaw"),
            Effect::Spawn(_) => Some("spawn"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["thaw", "spawn", "spawn"]);
}

#[test]
fn mpi_universe_size_is_the_allocations_pes_for_its_steps_and_a_jobs_own_pes_for_a_job() {
    let mut n = Node::up("gs");
    n.tree(ms(10), batch(NodeId(0), NodeId(1)));
    n.tree(ms(20), step(0));
    let rank = |job| Input::Pmi {
        job,
        rank: 0,
        line: "cmd=get_universe_size".into(),
    };
    let answer = |fx: &[Effect]| match fx {
        [Effect::PmiReply { line, .. }] => line.clone(),
        _ => panic!("{fx:?}"),
    };
    // The two-rank step sees the four PEs of its allocation.
    let fx = n.on(ms(30), rank(step_unit(JobId(5), 0)));
    assert_eq!(answer(&fx), "cmd=universe_size rc=0 size=4\n");
    // A job on its own: the PEs it was placed on.
    n.tree(ms(40), launch(6, 1, &[(0, 0), (1, 1)], false));
    let fx = n.on(ms(50), rank(JobId(6)));
    assert_eq!(answer(&fx), "cmd=universe_size rc=0 size=2\n");
}
