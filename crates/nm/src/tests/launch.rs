//! Launches: the spec each rank is started with, stopped launches, repeats, requeued runs,
//! ranks that cannot start, PMI fences.

use super::*;
use crate::core::Level;
use crate::launch::{BaseEnv, PrepareLaunch, RankSpec};

fn specs(fx: &[Effect]) -> Vec<RankSpec> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Spawn(s) => Some((**s).clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_launch_starts_each_rank_with_its_whole_spec_and_is_acknowledged_after_the_last() {
    let mut n = Node::up("gs");
    let fx = n.tree(ms(10), launch(5, 1, &[(3, 0), (4, 1)], false));
    let prepare: Vec<&PrepareLaunch> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Prepare(p) => Some(&**p),
            _ => None,
        })
        .collect();
    assert_eq!(
        prepare,
        [&PrepareLaunch {
            memory: None,
            job: JobId(5),
            launch: 1,
            cmd0: "/bin/prog".into(),
            uid: None,
            gid: None,
            cwd: "/home/ann/run".into(),
            ranks: vec![3, 4],
            join: None,
        }]
    );
    let s = specs(&fx);
    assert_eq!(s.len(), 2);
    let r4 = &s[1];
    assert_eq!((r4.job, r4.launch, r4.rank), (JobId(5), 1, 4));
    assert_eq!(r4.argv, ["/bin/prog", "arg"]);
    // The working directory is not on this node: the job's directory is.
    assert_eq!(r4.cwd, PathBuf::from("/work/jobs/5"));
    assert_eq!(r4.out, PathBuf::from("/work/jobs/5/4.out"));
    assert_eq!(r4.err, Some(PathBuf::from("/work/jobs/5/4.err")));
    assert_eq!(r4.cpus, [5], "local PE 1 on the second CPU");
    assert_eq!(r4.base_env, BaseEnv::Inherit);
    assert!(r4.remove_env.contains(&"PMI_FD".to_string()));
    let env: BTreeMap<&str, &str> = r4
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for (k, v) in [
        ("COSCHED_JOB_NAME", "prog"),
        ("COSCHED_JOB_ID", "5"),
        ("COSCHED_RANK", "4"),
        ("SLURM_PROCID", "4"),
        ("COSCHED_SIZE", "2"),
        ("COSCHED_NODE", "n0"),
        ("COSCHED_PE", "1"),
        (cosched_monitor::ENV_SLOT, "1"),
    ] {
        assert_eq!(env.get(k), Some(&v), "{k}");
    }
    assert_eq!(
        r4.pmi_env,
        [
            ("PMI_RANK".to_string(), "4".to_string()),
            ("PMI_SIZE".into(), "2".into()),
            ("PMI_SPAWNED".into(), "0".into())
        ]
    );
    // Each rank is asked for once the one before it started; the acknowledgement comes last.
    let order: Vec<&str> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Prepare(_) => Some("prepare"),
            Effect::Spawn(_) => Some("spawn"),
            Effect::Up(FromNode::Launched { .. }) => Some("ack"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["prepare", "spawn", "spawn", "ack"]);
    assert!(signals(&fx).is_empty(), "launched running");
    assert!(exits(&fx).is_empty());
}

#[test]
fn a_job_launched_stopped_is_stopped_rank_by_rank_or_frozen_once_every_rank_started() {
    let mut n = Node::up("gs");
    let fx = n.tree(ms(10), launch(1, 1, &[(0, 0), (1, 1)], true));
    let order: Vec<String> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Spawn(s) => Some(format!("spawn {}", s.rank)),
            Effect::Signal { pgid, sig } => Some(format!("{sig} {pgid}")),
            _ => None,
        })
        .collect();
    let stop = libc::SIGSTOP;
    assert_eq!(
        order,
        [
            "spawn 0".to_string(),
            format!("{stop} 100"),
            "spawn 1".into(),
            format!("{stop} 101")
        ]
    );

    let mut n = Node::up("gs");
    n.cgroups = true;
    let fx = n.tree(ms(10), launch(1, 1, &[(0, 0), (1, 1)], true));
    let order: Vec<String> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Spawn(s) => Some(format!("spawn {} in cgroup {}", s.rank, s.cgroup)),
            Effect::Signal { .. } => Some("signal".into()),
            Effect::Cgroup { launch, op, .. } => Some(format!("{op:?} {launch}")),
            Effect::Up(FromNode::Launched { .. }) => Some("ack".into()),
            _ => None,
        })
        .collect();
    // A rank joining a frozen cgroup would freeze before its exec.
    assert_eq!(
        order,
        [
            "spawn 0 in cgroup true",
            "spawn 1 in cgroup true",
            "Freeze 1",
            "ack"
        ]
    );
}

#[test]
fn a_repeated_or_late_launch_is_acknowledged_again_and_starts_nothing() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(1, 2, &[(0, 0)], false));
    for run in [2, 1] {
        let fx = n.tree(ms(20), launch(1, run, &[(0, 0)], false));
        assert!(
            matches!(&fx[..], [Effect::Up(FromNode::Launched { job: JobId(1), run: r })] if *r == run),
            "only the acknowledgement: {fx:?}"
        );
    }
    // A launch placing nothing here is not acknowledged either.
    let mut other = launch(2, 1, &[(0, 0)], false);
    if let ToNode::Launch(l) = &mut other {
        l.placement[0].node = NodeId(3);
    }
    assert!(n.tree(ms(30), other).is_empty());
}

#[test]
fn a_later_run_replaces_the_earlier_one_and_the_earlier_ones_exits_are_ignored() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(1, 1, &[(0, 0)], false));
    let old = n.pid(1, 0);
    // Requeued elsewhere and back here before this node heard the forget.
    let fx = n.tree(ms(20), launch(1, 2, &[(0, 0)], false));
    assert_eq!(
        signals(&fx)[..2],
        [(old, libc::SIGTERM), (old, libc::SIGCONT)],
        "the old run's processes go"
    );
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Forgotten {
            job: JobId(1),
            held: true
        }
    )));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Prepare(p) if p.launch == 2))
    );
    // The old run's rank dies of the SIGTERM: not the new run's exit.
    let fx = n.on(
        ms(30),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(0, 143),
        },
    );
    assert!(exits(&fx).is_empty(), "{fx:?}");
    let fx = n.on(
        ms(40),
        Input::Exited {
            job: JobId(1),
            launch: 2,
            exit: exit(0, 0),
        },
    );
    assert_eq!(exits(&fx), [(1, 2, 0, Some(0))]);
}

#[test]
fn a_rank_that_cannot_start_exits_127_after_the_acknowledgement_with_its_error_file() {
    let mut n = Node::up("gs");
    n.fail
        .insert(1, "No such file or directory (os error 2)".into());
    let fx = n.tree(ms(10), launch(1, 1, &[(0, 0), (1, 1)], false));
    let why = "cannot launch \"/bin/prog\": No such file or directory (os error 2)";
    let files: Vec<(String, String)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::WriteRankFile { name, content, .. } => {
                Some((name.clone(), String::from_utf8(content.clone()).unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        files,
        [
            ("1.err".to_string(), format!("cosched: {why}\n")),
            ("1.out".into(), String::new())
        ]
    );
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Log(Level::Warn, l) if l == &format!("nm n0: job 1 rank 1: {why}")
    )));
    let up = ups(&fx);
    let ack = up
        .iter()
        .position(|m| matches!(m, FromNode::Launched { .. }))
        .unwrap();
    let failed = up
        .iter()
        .position(|m| matches!(m, FromNode::Exited { exit, .. } if exit.rank == 1 && exit.code == Some(127) && exit.error.as_deref() == Some(why)))
        .unwrap();
    assert!(ack < failed, "{up:?}");
    assert_eq!(exits(&fx).len(), 1, "rank 0 runs");
}

#[test]
fn a_node_manager_that_is_not_root_fails_another_users_job_naming_why() {
    let mut n = Node::up("gs");
    let mut l = launch(1, 1, &[(0, 0)], false);
    if let ToNode::Launch(l) = &mut l {
        l.uid = Some(2000);
    }
    // The shell's answer when the user cannot be taken on.
    n.core.on(
        ms(10),
        Input::Tree {
            epoch: n.core.membership,
            msg: l,
        },
    );
    let Some(Effect::Prepare(p)) = n.core.poll_effect() else {
        panic!("prepare first")
    };
    // Answered here rather than by `pump`: the test's shell holds the setup from now on.
    n.setups.insert((p.job, p.launch));
    assert_eq!(p.uid, Some(2000));
    n.core.on(
        ms(10),
        Input::Prepared(Box::new(Prepared {
            memory: Ok(()),
            job: p.job,
            launch: p.launch,
            cmd0: Ok(None),
            run_as: Err("runs as ann and can run only that user's jobs".into()),
            cgroup: Ok(false),
            dir: Ok(()),
            monitor_env: vec![Vec::new()],
            cwd_exists: true,
        })),
    );
    let fx = n.pump();
    assert!(specs(&fx).is_empty(), "nothing started");
    assert_eq!(exits(&fx), [(1, 1, 0, Some(127))]);
}

#[test]
fn pmi_fence_goes_up_once_every_local_rank_entered_and_its_answer_comes_down() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(1, 1, &[(0, 0), (1, 1)], false));
    let line = |rank: u32, line: &str| Input::Pmi {
        job: JobId(1),
        rank,
        line: line.into(),
    };
    let fx = n.on(ms(20), line(0, "cmd=put key=k0 value=v0"));
    assert!(matches!(&fx[..], [Effect::PmiReply { rank: 0, line, .. }] if line.contains("rc=0")));
    assert!(n.on(ms(21), line(0, "cmd=barrier_in")).is_empty());
    let fx = n.on(ms(22), line(1, "cmd=barrier_in"));
    // One gathering of the job's nodes, named by job, run and fence.
    assert!(
        matches!(&fx[..], [Effect::Gather { id: (1, 1, 1), nodes, .. }] if nodes == &[NodeId(0)]),
        "{fx:?}"
    );
    let fence = FromNode::Fence {
        job: JobId(1),
        seq: 1,
        puts: vec![("k0".into(), "v0".into())],
    };
    assert_eq!(
        format!("{:?}", ups(&fx)),
        format!("{:?}", std::slice::from_ref(&fence))
    );
    // The answer may have been lost with the old parent: asked again on joining a new tree.
    let fx = n.on(
        ms(30),
        Input::Topology {
            epoch: 2,
            member: true,
        },
    );
    assert_eq!(
        format!("{:?}", ups(&fx)),
        format!(
            "{:?}",
            [
                FromNode::Joined {
                    incarnation: 77,
                    epoch: 2
                },
                fence
            ]
        )
    );
    let fx = n.tree(
        ms(40),
        ToNode::FenceDone {
            job: JobId(1),
            seq: 1,
            kvs: vec![("k0".into(), "v0".into()), ("k1".into(), "v1".into())],
        },
    );
    let replies: Vec<(u32, &str)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::PmiReply { rank, line, .. } => Some((*rank, line.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        replies,
        [(0, "cmd=barrier_out\n"), (1, "cmd=barrier_out\n")]
    );
    let fx = n.on(ms(50), line(1, "cmd=get kvsname=cosched_1 key=k1"));
    assert!(
        matches!(&fx[..], [Effect::PmiReply { rank: 1, line, .. }] if line.contains("value=v1"))
    );
    // Nothing is pending any more: a new tree gets no fence.
    let fx = n.on(
        ms(60),
        Input::Topology {
            epoch: 3,
            member: true,
        },
    );
    assert_eq!(ups(&fx).len(), 1, "only Joined");
}

/// The machine manager hears of a PMI-1 abort before the node manager kills the rank: the
/// other ranks' own failures follow the kill, and must not name the job's failure.
#[test]
fn a_pmi_abort_goes_up_before_the_rank_is_killed() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(1, 1, &[(0, 0), (1, 1)], false));
    let fx = n.on(
        ms(20),
        Input::Pmi {
            job: JobId(1),
            rank: 1,
            line: "cmd=abort exitcode=7 msg=gives_up".into(),
        },
    );
    let want = RankExit {
        rank: 1,
        code: Some(7),
        error: Some("MPI_Abort with status 7: gives_up".into()),
        oom: false,
    };
    let notice = fx.iter().position(|e| {
        matches!(e, Effect::Up(FromNode::Aborted { job: JobId(1), run: 1, exit }) if *exit == want)
    });
    let kill = fx
        .iter()
        .position(|e| matches!(e, Effect::Signal { sig, .. } if *sig == libc::SIGKILL));
    assert!(
        notice.zip(kill).is_some_and(|(a, k)| a < k),
        "the abort goes up ({notice:?}) before the kill ({kill:?}): {fx:?}"
    );
    // Repeated on joining the tree again, before the exits.
    n.on(
        ms(21),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(1, 128 + libc::SIGKILL),
        },
    );
    let fx = n.on(
        ms(30),
        Input::Topology {
            epoch: 2,
            member: true,
        },
    );
    let order: Vec<&str> = ups(&fx)
        .iter()
        .filter_map(|m| match m {
            FromNode::Aborted { .. } => Some("aborted"),
            FromNode::Exited { .. } => Some("exited"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["aborted", "exited"]);
}

#[test]
fn a_pmi_abort_kills_the_rank_and_fails_the_job_with_its_code_and_the_abort() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(1, 1, &[(0, 0), (1, 1)], false));
    let pid = n.pid(1, 1);
    let fx = n.on(
        ms(20),
        Input::Pmi {
            job: JobId(1),
            rank: 1,
            line: "cmd=abort exitcode=7".into(),
        },
    );
    // MPICH waits after its abort: nothing would end the job but the node manager.
    assert_eq!(signals(&fx), [(pid, libc::SIGKILL)]);
    assert!(
        exits(&fx).is_empty(),
        "its exit is the process's, when it comes"
    );
    let fx = n.on(
        ms(21),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(1, 128 + libc::SIGKILL),
        },
    );
    let sent: Vec<RankExit> = ups(&fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Exited { exit, .. } => Some(exit),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent,
        [RankExit {
            rank: 1,
            code: Some(7),
            error: Some("MPI_Abort with status 7".into()),
            oom: false,
        }]
    );
    // Another rank's exit, killed with the job, keeps its own status.
    let fx = n.on(
        ms(30),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(0, 128 + libc::SIGTERM),
        },
    );
    assert_eq!(exits(&fx), [(1, 1, 0, Some(128 + libc::SIGTERM))]);
}

/// The memory limit a launch asks the shell to set on the job's cgroup here.
fn memory_asked(fx: &[Effect]) -> Option<u64> {
    fx.iter()
        .find_map(|e| match e {
            Effect::Prepare(p) => Some(p.memory),
            _ => None,
        })
        .expect("a launch is prepared")
}

#[test]
fn a_jobs_memory_limit_on_a_node_is_its_mem_or_its_pes_there_times_mem_per_cpu_at_most_the_nodes() {
    let mut n = Node::up("gs");
    let node = config("gs").memory;
    let with = |job: u64, ranks: &[(u32, u32)], mem: MemLimit| match launch(job, 1, ranks, false) {
        ToNode::Launch(l) => ToNode::Launch(Launch {
            mem: Some(mem),
            ..l
        }),
        _ => unreachable!(),
    };
    let fx = n.tree(ms(10), with(1, &[(0, 0)], MemLimit::PerNode(64 << 20)));
    assert_eq!(memory_asked(&fx), Some(64 << 20));
    let fx = n.tree(
        ms(20),
        with(2, &[(0, 1), (1, 2)], MemLimit::PerCpu(100 << 20)),
    );
    assert_eq!(memory_asked(&fx), Some(200 << 20), "two PEs here");
    let fx = n.tree(ms(30), with(3, &[(0, 3)], MemLimit::PerNode(node + 1)));
    assert_eq!(memory_asked(&fx), Some(node), "no more than the node has");
    let fx = n.tree(ms(40), launch(4, 1, &[(0, 0)], false));
    assert_eq!(memory_asked(&fx), None, "no --mem, no limit but the node's");
}

#[test]
fn an_exit_after_an_oom_kill_goes_up_marked_so() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(5, 1, &[(0, 0)], false));
    let fx = n.on(
        ms(20),
        Input::Exited {
            job: JobId(5),
            launch: 1,
            exit: RankExit {
                oom: true,
                ..exit(0, 137)
            },
        },
    );
    let up = ups(&fx).into_iter().find_map(|m| match m {
        FromNode::Exited { exit, .. } => Some(exit),
        _ => None,
    });
    assert_eq!(up.map(|e| (e.code, e.oom)), Some((Some(137), true)));
}

/// PE i runs on the (offset + i)-th CPU the node manager may use, wrapping past the last.
#[test]
fn a_pe_runs_on_the_cpu_its_offset_and_number_name() {
    let mut cfg = config("gs");
    cfg.cpus = vec![0, 1, 2, 3];
    assert_eq!((cfg.cpu_of(0), cfg.cpu_of(3)), (0, 3));
    cfg.cpu_offset = 3;
    assert_eq!((cfg.cpu_of(0), cfg.cpu_of(1), cfg.cpu_of(5)), (3, 0, 0));
}

/// The node manager's own threads go where no PE is: the CPUs left over by the PEs, offset
/// and wrapped as the ranks are placed, and none when the PEs take every CPU.
#[test]
fn spare_cpus_are_those_no_pe_runs_on() {
    let mut cfg = config("gs");
    cfg.cpus = vec![0, 1, 2, 3];
    cfg.pes = 1;
    assert_eq!(cfg.spare_cpus(), [1, 2, 3]);
    cfg.cpu_offset = 3;
    cfg.pes = 2;
    assert_eq!(cfg.spare_cpus(), [1, 2], "wrapped past the last CPU");
    cfg.pes = 4;
    assert!(cfg.spare_cpus().is_empty());
    // More PEs than CPUs (an embedded cluster's node): every CPU holds a PE.
    cfg.pes = 9;
    assert!(cfg.spare_cpus().is_empty());
}
