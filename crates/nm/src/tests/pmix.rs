//! PMIx: the job's helper before its ranks, the failures of the helper, `MPI_Abort`, fences
//! of a job on several nodes.

use super::*;
use crate::core::Level;
use crate::pmix::FENCE_BASE;
use cosched_pmix::helper::{FromHelper, ToHelper};
use cosched_proto::jobio::Mpi;

/// A node whose node manager can start PMIx helpers.
pub(super) fn node() -> Node {
    let mut cfg = config("gs");
    cfg.pmix_helper = Some(PathBuf::from("/usr/bin/cosched"));
    let (mut n, _) = Node::starting_with(cfg);
    n.on(ms(0), Input::Registration(Ok(accepted(Vec::new()))));
    n.on(
        ms(0),
        Input::Topology {
            epoch: 1,
            member: true,
        },
    );
    n
}

/// A launch of job `job` with `ranks` here, under `--mpi mpi`, `others` more ranks on node 1.
fn launch_mpi(job: u64, ranks: &[(u32, u32)], mpi: Mpi, others: &[(u32, u32)]) -> ToNode {
    let ToNode::Launch(mut l) = launch(job, 1, ranks, false) else {
        unreachable!()
    };
    l.io.mpi = mpi;
    if !others.is_empty() {
        l.placement.push(Placement {
            node: NodeId(1),
            ranks: others.to_vec(),
            extra_pes: Vec::new(),
        });
        l.size += others.len() as u32;
    }
    ToNode::Launch(l)
}

fn spawned(fx: &[Effect]) -> Vec<u32> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Spawn(s) => Some(s.rank),
            _ => None,
        })
        .collect()
}

fn envs(ranks: &[u32]) -> Vec<(u32, Vec<(String, String)>)> {
    ranks
        .iter()
        .map(|&r| (r, vec![("PMIX_RANK".to_string(), r.to_string())]))
        .collect()
}

/// The helper of the `launch`-th launch of `job` is ready.
fn ready_of(job: u64, launch: u64, ranks: &[u32]) -> Input {
    Input::HelperReady {
        job: JobId(job),
        launch,
        result: Ok(envs(ranks)),
    }
}

fn ready(job: u64, ranks: &[u32]) -> Input {
    ready_of(job, 1, ranks)
}

/// The rank exits sent up, as (rank, code, error).
fn errors(fx: &[Effect]) -> Vec<(u32, Option<i32>, Option<String>)> {
    ups(fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Exited { exit, .. } => Some((exit.rank, exit.code, exit.error)),
            _ => None,
        })
        .collect()
}

#[test]
fn ranks_start_only_once_the_jobs_pmix_helper_is_ready_and_with_its_environment() {
    let mut n = node();
    let fx = n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    let start: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::StartHelper(h) => Some(h.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(start.len(), 1, "one helper per job on the node");
    let h = &start[0];
    assert_eq!(h.spec.argv, ["/usr/bin/cosched", "pmix-helper"]);
    assert_eq!(h.setup.nspace, "cosched.5");
    assert_eq!(h.setup.nodes, [("node0".to_string(), vec![0, 1])]);
    assert_eq!(h.setup.host, "node0");
    assert_eq!(h.setup.dir, PathBuf::from("/work/jobs/5/pmix"));
    assert_eq!(h.setup.universe, 2, "MPI_UNIVERSE_SIZE: the job's PEs");
    assert!(
        spawned(&fx).is_empty(),
        "no rank before the helper is ready"
    );
    assert!(
        !ups(&fx)
            .iter()
            .any(|m| matches!(m, FromNode::Launched { .. })),
        "not acknowledged before the ranks started"
    );
    let fx = n.on(ms(20), ready(5, &[0, 1]));
    assert_eq!(spawned(&fx), [0, 1]);
    let rank1 = fx
        .iter()
        .find_map(|e| match e {
            Effect::Spawn(s) if s.rank == 1 => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    assert!(rank1.env.contains(&("PMIX_RANK".into(), "1".into())));
    assert!(!rank1.pmi_env.is_empty(), "PMI-1 beside PMIx under auto");
    assert!(ups(&fx).iter().any(|m| matches!(
        m,
        FromNode::Launched {
            job: JobId(5),
            run: 1
        }
    )));
}

#[test]
fn a_one_rank_job_or_a_pmi1_job_gets_no_helper_and_pmix_or_none_gets_no_pmi1_socket() {
    let mut n = node();
    let fx = n.tree(ms(10), launch_mpi(5, &[(0, 0)], Mpi::Auto, &[]));
    assert!(!fx.iter().any(|e| matches!(e, Effect::StartHelper(_))));
    assert_eq!(spawned(&fx), [0]);
    let fx = n.tree(ms(10), launch_mpi(6, &[(0, 0), (1, 1)], Mpi::Pmi1, &[]));
    assert!(!fx.iter().any(|e| matches!(e, Effect::StartHelper(_))));
    assert_eq!(spawned(&fx), [0, 1]);
    let fx = n.tree(ms(10), launch_mpi(7, &[(0, 0), (1, 1)], Mpi::None, &[]));
    assert!(!fx.iter().any(|e| matches!(e, Effect::StartHelper(_))));
    assert!(fx.iter().all(|e| match e {
        Effect::Spawn(s) => s.pmi_env.is_empty(),
        _ => true,
    }));
    n.tree(ms(10), launch_mpi(8, &[(0, 0), (1, 1)], Mpi::Pmix, &[]));
    let fx = n.on(ms(20), ready_of(8, 4, &[0, 1]));
    assert!(fx.iter().all(|e| match e {
        Effect::Spawn(s) => s.pmi_env.is_empty(),
        _ => true,
    }));
}

#[test]
fn a_helper_that_cannot_start_fails_a_pmix_jobs_ranks_with_the_reason() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Pmix, &[]));
    let fx = n.on(
        ms(20),
        Input::HelperReady {
            job: JobId(5),
            launch: 1,
            result: Err("PMIx_server_init failed".into()),
        },
    );
    assert!(spawned(&fx).is_empty());
    let e = errors(&fx);
    assert_eq!(e.len(), 2);
    for (_, code, error) in e {
        assert_eq!(code, Some(127));
        let error = error.unwrap();
        assert!(
            error.contains("PMIx server could not start: PMIx_server_init failed"),
            "{error}"
        );
    }
}

#[test]
fn under_mpi_auto_a_helper_that_cannot_start_leaves_the_ranks_pmi1() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    let fx = n.on(
        ms(20),
        Input::HelperReady {
            job: JobId(5),
            launch: 1,
            result: Err("no libpmix".into()),
        },
    );
    assert_eq!(spawned(&fx), [0, 1]);
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Log(Level::Warn, l) if l.contains("no libpmix") && l.contains("PMI-1 alone")
    )));
}

#[test]
fn an_mpi_abort_fails_the_job_with_the_aborting_ranks_status_and_message() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    n.on(ms(20), ready(5, &[0, 1]));
    let said = Input::Helper {
        job: JobId(5),
        launch: 1,
        msg: FromHelper::Abort {
            rank: 1,
            status: 7,
            message: "N/A".into(),
        },
    };
    // It goes up as the helper reports it, before the rank (answered) exits: the other
    // ranks fail only after that exit, and their failures must not name the job's.
    let fx = n.on(ms(30), said);
    let notices: Vec<(u32, RankExit)> = ups(&fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Aborted {
                job: JobId(5),
                run,
                exit,
            } => Some((run, exit)),
            _ => None,
        })
        .collect();
    let notice = RankExit {
        rank: 1,
        code: Some(7),
        error: Some("MPI_Abort with status 7: N/A".into()),
        oom: false,
    };
    assert_eq!(notices, [(1, notice)]);
    let fx = n.on(
        ms(31),
        Input::Exited {
            job: JobId(5),
            launch: 1,
            exit: exit(1, 7),
        },
    );
    assert_eq!(
        errors(&fx),
        [(1, Some(7), Some("MPI_Abort with status 7: N/A".into()))]
    );
}

#[test]
fn a_helper_that_exits_while_ranks_run_ends_the_job_saying_why() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    n.on(ms(20), ready(5, &[0, 1]));
    let (p0, p1) = (n.pid(5, 0), n.pid(5, 1));
    let fx = n.on(
        ms(30),
        Input::HelperExited {
            job: JobId(5),
            launch: 1,
            code: 139,
        },
    );
    let sig = signals(&fx);
    assert!(sig.contains(&(p0, libc::SIGTERM)) && sig.contains(&(p1, libc::SIGTERM)));
    let fx = n.on(
        ms(40),
        Input::Exited {
            job: JobId(5),
            launch: 1,
            exit: exit(0, 143),
        },
    );
    let e = errors(&fx);
    let why = e[0].2.clone().unwrap();
    assert!(
        why.contains("PMIx server") && why.contains("code 139"),
        "{why}"
    );
}

#[test]
fn a_helper_that_exits_after_every_rank_did_or_while_the_job_is_killed_is_no_failure() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    n.on(ms(20), ready(5, &[0, 1]));
    for r in [0, 1] {
        n.on(
            ms(30),
            Input::Exited {
                job: JobId(5),
                launch: 1,
                exit: exit(r, 0),
            },
        );
    }
    let fx = n.on(
        ms(40),
        Input::HelperExited {
            job: JobId(5),
            launch: 1,
            code: 139,
        },
    );
    assert!(signals(&fx).is_empty());
    // Killed (cancelled): the helper dies with the ranks; their exits say nothing of it.
    n.tree(ms(50), launch_mpi(6, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    n.on(ms(50), ready_of(6, 2, &[0, 1]));
    n.tree(
        ms(60),
        ToNode::Switch {
            stop: vec![],
            cont: vec![],
            kill: vec![JobId(6)],
        },
    );
    n.on(
        ms(61),
        Input::HelperExited {
            job: JobId(6),
            launch: 2,
            code: 143,
        },
    );
    let fx = n.on(
        ms(62),
        Input::Exited {
            job: JobId(6),
            launch: 2,
            exit: exit(0, 143),
        },
    );
    assert_eq!(errors(&fx), [(0, Some(143), None)]);
}

#[test]
fn a_pmix_fence_goes_up_under_its_own_number_and_comes_back_as_every_nodes_data() {
    let mut n = node();
    n.tree(
        ms(10),
        launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[(2, 0), (3, 1)]),
    );
    let fx = n.on(ms(20), ready(5, &[0, 1]));
    assert_eq!(spawned(&fx), [0, 1]);
    let fx = n.on(
        ms(30),
        Input::Helper {
            job: JobId(5),
            launch: 1,
            msg: FromHelper::Fence {
                seq: 1,
                data: vec![1, 2],
            },
        },
    );
    // Gathered with node 1's part up the tree.
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Gather { id: (5, 1, s), nodes, .. }
            if *s == FENCE_BASE + 1 && nodes == &[NodeId(0), NodeId(1)])),
        "{fx:?}"
    );
    let up: Vec<_> = ups(&fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Fence { job, seq, puts } => Some((job, seq, puts)),
            _ => None,
        })
        .collect();
    assert_eq!(
        up,
        [(
            JobId(5),
            FENCE_BASE + 1,
            vec![("pmix.0000000000".to_string(), "0102".to_string())]
        )]
    );
    let fx = n.tree(
        ms(40),
        ToNode::FenceDone {
            job: JobId(5),
            seq: FENCE_BASE + 1,
            kvs: vec![
                ("pmix.0000000001".into(), "03".into()),
                ("pmix.0000000000".into(), "0102".into()),
            ],
        },
    );
    let to_helper: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::ToHelper { job, msg } => Some((*job, msg.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        to_helper,
        [(
            JobId(5),
            ToHelper::FenceDone {
                seq: 1,
                data: vec![1, 2, 3]
            }
        )]
    );
}

#[test]
fn a_failed_exit_that_comes_before_its_abort_waits_for_it_and_one_without_is_sent_after_the_grace()
{
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[]));
    n.on(ms(20), ready(5, &[0, 1]));
    let fx = n.on(
        ms(30),
        Input::Exited {
            job: JobId(5),
            launch: 1,
            exit: exit(1, 7),
        },
    );
    assert!(errors(&fx).is_empty(), "held for its abort");
    let fx = n.on(
        ms(40),
        Input::Helper {
            job: JobId(5),
            launch: 1,
            msg: FromHelper::Abort {
                rank: 1,
                status: 7,
                message: "N/A".into(),
            },
        },
    );
    assert_eq!(
        errors(&fx),
        [(1, Some(7), Some("MPI_Abort with status 7: N/A".into()))]
    );
    // Rank 0 fails on its own: it goes up once the grace is over, as it is.
    let fx = n.on(
        ms(50),
        Input::Exited {
            job: JobId(5),
            launch: 1,
            exit: exit(0, 3),
        },
    );
    assert!(errors(&fx).is_empty());
    let fx = n.until(ms(50) + crate::pmix::ABORT_GRACE);
    assert_eq!(errors(&fx), [(0, Some(3), None)]);
}

#[test]
fn while_a_jobs_helper_gets_ready_the_nodes_other_jobs_are_served() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(4, &[(0, 0)], Mpi::Pmi1, &[]));
    let fx = n.tree(ms(20), launch_mpi(5, &[(0, 1)], Mpi::Pmix, &[]));
    assert!(fx.iter().any(|e| matches!(e, Effect::StartHelper(_))));
    assert!(spawned(&fx).is_empty(), "job 5 waits for its helper");
    // The helper's answer is an input that has not come yet: job 4 is served meanwhile.
    let fx = n.on(
        ms(30),
        Input::Pmi {
            job: JobId(4),
            rank: 0,
            line: "cmd=get_maxes".into(),
        },
    );
    assert!(
        matches!(&fx[..], [Effect::PmiReply { rank: 0, .. }]),
        "{fx:?}"
    );
    let fx = n.on(
        ms(40),
        Input::Exited {
            job: JobId(4),
            launch: 1,
            exit: exit(0, 0),
        },
    );
    assert_eq!(exits(&fx), [(4, 1, 0, Some(0))]);
    let fx = n.on(ms(50), ready_of(5, 2, &[0]));
    assert_eq!(spawned(&fx), [0]);
}

/// The launches acknowledged in `fx`, as job numbers.
fn launched(fx: &[Effect]) -> Vec<u64> {
    ups(fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Launched { job, .. } => Some(job.0),
            _ => None,
        })
        .collect()
}

fn helpers_started(fx: &[Effect]) -> Vec<(u64, u64)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::StartHelper(h) => Some((h.spec.job.0, h.spec.launch)),
            _ => None,
        })
        .collect()
}

#[test]
fn launches_that_arrive_while_a_helper_starts_go_on_and_each_starts_its_own_ranks() {
    let mut n = node();
    let fx = n.tree(ms(10), launch_mpi(5, &[(0, 0)], Mpi::Pmix, &[]));
    assert_eq!(helpers_started(&fx), [(5, 1)]);
    // A second PMIx job while job 5's helper has not answered: its own helper starts.
    let fx = n.tree(ms(20), launch_mpi(6, &[(0, 1)], Mpi::Pmix, &[]));
    assert_eq!(helpers_started(&fx), [(6, 2)]);
    // A PMI-1 job meanwhile starts at once.
    let fx = n.tree(ms(30), launch_mpi(7, &[(0, 1)], Mpi::Pmi1, &[]));
    assert_eq!((spawned(&fx), launched(&fx)), (vec![0], vec![7]));
    // The helpers answer in the other order; each job gets its own ranks, once.
    let fx = n.on(ms(40), ready_of(6, 2, &[0]));
    assert_eq!((spawned(&fx), launched(&fx)), (vec![0], vec![6]));
    let fx = n.on(ms(50), ready_of(5, 1, &[0]));
    assert_eq!((spawned(&fx), launched(&fx)), (vec![0], vec![5]));
    for job in [5, 6, 7] {
        assert_eq!(n.core.jobs[&JobId(job)].ranks.len(), 1, "job {job}");
        n.pid(job, 0);
    }
    let fx = n.on(ms(60), ready_of(5, 1, &[0]));
    assert!(spawned(&fx).is_empty(), "a second answer starts nothing");
}

#[test]
fn a_slow_helper_does_not_delay_another_jobs_signals_or_strobe() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(4, &[(0, 0)], Mpi::Pmi1, &[]));
    let pid = n.pid(4, 0);
    n.tree(ms(20), launch_mpi(5, &[(0, 1)], Mpi::Pmix, &[]));
    let stop = ToNode::Switch {
        stop: vec![JobId(4)],
        cont: vec![],
        kill: vec![],
    };
    assert_eq!(signals(&n.tree(ms(30), stop)), [(pid, libc::SIGSTOP)]);
    // The strobe puts job 4 in the matrix and running: it is continued at once.
    let fx = n.tree(
        ms(40),
        ToNode::Rotation(still(Strobe {
            slot: Some(0),
            rows: vec![(JobId(4), 0), (JobId(5), 1)],
            running: vec![JobId(4)],
        })),
    );
    assert_eq!(signals(&fx), [(pid, libc::SIGCONT)]);
    assert!(spawned(&fx).is_empty(), "job 5 still waits for its helper");
}

#[test]
fn a_repeated_launch_while_its_helper_starts_is_acknowledged_only_once_the_ranks_started() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0)], Mpi::Pmix, &[]));
    let fx = n.tree(ms(20), launch_mpi(5, &[(0, 0)], Mpi::Pmix, &[]));
    assert!(fx.is_empty(), "{fx:?}");
    let fx = n.on(ms(30), ready_of(5, 1, &[0]));
    assert_eq!((spawned(&fx), launched(&fx)), (vec![0], vec![5]));
}

#[test]
fn a_job_killed_while_its_helper_starts_starts_no_rank_and_its_ranks_exits_say_why() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Pmix, &[]));
    n.tree(
        ms(20),
        ToNode::Switch {
            stop: vec![],
            cont: vec![],
            kill: vec![JobId(5)],
        },
    );
    let fx = n.on(ms(30), ready_of(5, 1, &[0, 1]));
    assert!(spawned(&fx).is_empty(), "{fx:?}");
    let why = Some("the job was killed before its ranks started".to_string());
    assert_eq!(
        errors(&fx),
        [(0, Some(127), why.clone()), (1, Some(127), why)]
    );
}

#[test]
fn a_job_forgotten_while_its_helper_starts_starts_nothing_when_it_answers() {
    let mut n = node();
    n.tree(ms(10), launch_mpi(5, &[(0, 0)], Mpi::Pmix, &[]));
    n.tree(
        ms(20),
        ToNode::Forget {
            jobs: vec![JobId(5)],
        },
    );
    let fx = n.on(ms(30), ready_of(5, 1, &[0]));
    assert!(
        spawned(&fx).is_empty() && launched(&fx).is_empty(),
        "{fx:?}"
    );
}

/// The launches whose setup the core let go of in `fx`, as (job, launch).
fn setups_done(fx: &[Effect]) -> Vec<(u64, u64)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::SetupDone { job, launch } => Some((job.0, *launch)),
            _ => None,
        })
        .collect()
}

#[test]
fn ranks_of_a_launch_set_aside_for_its_helper_start_inside_the_cgroup_prepared_for_them() {
    let mut n = node();
    n.cgroups = true;
    // Two ranks, one here: under `--mpi auto` the job gets a helper.
    let fx = n.tree(ms(10), launch_mpi(5, &[(0, 0)], Mpi::Auto, &[(1, 0)]));
    assert_eq!(helpers_started(&fx), [(5, 1)]);
    assert!(
        setups_done(&fx).is_empty(),
        "job 5's rank has not started: the shell keeps its cgroup's handles"
    );
    // Another launch's whole chain meanwhile lets go of its own setup, not job 5's.
    let fx = n.tree(ms(20), launch_mpi(6, &[(0, 1)], Mpi::Pmi1, &[]));
    assert_eq!((spawned(&fx), setups_done(&fx)), (vec![0], vec![(6, 2)]));
    // The helper answers on a later input: the rank starts (inside its setup: the test's
    // shell checks it) in the job's cgroup, and only then is the setup let go.
    let fx = n.on(ms(30), ready_of(5, 1, &[0]));
    let specs: Vec<(u32, bool)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Spawn(s) => Some((s.rank, s.cgroup)),
            _ => None,
        })
        .collect();
    assert_eq!(specs, [(0, true)]);
    assert_eq!(setups_done(&fx), [(5, 1)]);
    assert!(n.setups.is_empty(), "{:?}", n.setups);
    // Its MPI_Abort's kill then reaches the rank through the cgroup.
    let fx = n.tree(
        ms(40),
        ToNode::Switch {
            stop: vec![],
            cont: vec![],
            kill: vec![JobId(5)],
        },
    );
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Cgroup {
                job: JobId(5),
                launch: 1,
                op: crate::core::CgroupOp::Terminate { .. }
            }
        )),
        "{fx:?}"
    );
}

#[test]
fn a_launch_set_aside_lets_go_of_its_setup_when_its_job_is_killed_or_forgotten_meanwhile() {
    let mut n = node();
    n.cgroups = true;
    n.tree(ms(10), launch_mpi(5, &[(0, 0)], Mpi::Pmix, &[]));
    n.tree(ms(20), launch_mpi(6, &[(0, 1)], Mpi::Pmix, &[]));
    let kill = ToNode::Switch {
        stop: vec![],
        cont: vec![],
        kill: vec![JobId(5)],
    };
    assert!(setups_done(&n.tree(ms(30), kill)).is_empty());
    let forget = ToNode::Forget {
        jobs: vec![JobId(6)],
    };
    assert!(setups_done(&n.tree(ms(40), forget)).is_empty());
    // Killed: its rank fails with the reason, and its setup goes.
    let fx = n.on(ms(50), ready_of(5, 1, &[0]));
    assert_eq!(setups_done(&fx), [(5, 1)]);
    // Forgotten: nothing starts, and its setup goes too.
    let fx = n.on(ms(60), ready_of(6, 2, &[0]));
    assert_eq!((spawned(&fx), setups_done(&fx)), (vec![], vec![(6, 2)]));
    assert!(n.setups.is_empty(), "{:?}", n.setups);
}

#[test]
fn a_direct_modex_goes_to_the_ranks_node_and_the_data_its_helper_gives_comes_back() {
    let mut n = node();
    n.tree(
        ms(10),
        launch_mpi(5, &[(0, 0), (1, 1)], Mpi::Auto, &[(2, 0), (3, 1)]),
    );
    n.on(ms(20), ready(5, &[0, 1]));
    let helper = |msg| Input::Helper {
        job: JobId(5),
        launch: 1,
        msg,
    };
    let to_helper = |fx: &[Effect]| -> Vec<ToHelper> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::ToHelper { job: JobId(5), msg } => Some(msg.clone()),
                _ => None,
            })
            .collect()
    };
    // A local rank wants rank 2's data, which node 1 holds.
    let fx = n.on(ms(30), helper(FromHelper::Want { tag: 4, rank: 2 }));
    assert!(
        ups(&fx).iter().any(|m| matches!(
            m,
            FromNode::ModexWant {
                job: JobId(5),
                run: 1,
                rank: 2,
                req: 4
            }
        )),
        "{fx:?}"
    );
    let data = Ok(vec![9, 8]);
    let fx = n.tree(
        ms(40),
        ToNode::ModexHave {
            job: JobId(5),
            req: 4,
            data: data.clone(),
        },
    );
    assert_eq!(to_helper(&fx), [ToHelper::Have { tag: 4, data }]);
    // Node 1 wants local rank 1's data: the helper gives it, and it goes up for node 1.
    let want = |rank, req| ToNode::ModexWant {
        job: JobId(5),
        rank,
        from: NodeId(1),
        req,
    };
    let fx = n.tree(ms(50), want(1, 8));
    assert_eq!(
        to_helper(&fx),
        [ToHelper::Give {
            from: 1,
            req: 8,
            rank: 1
        }]
    );
    let given = FromHelper::Given {
        from: 1,
        req: 8,
        data: Ok(vec![7]),
    };
    let fx = n.on(ms(60), helper(given));
    let have = |fx: &[Effect]| -> Vec<(NodeId, u64, Result<Vec<u8>, i32>)> {
        ups(fx)
            .into_iter()
            .filter_map(|m| match m {
                FromNode::ModexHave {
                    job: JobId(5),
                    run: 1,
                    to,
                    req,
                    data,
                } => Some((to, req, data)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(have(&fx), [(NodeId(1), 8, Ok(vec![7]))]);
    // A rank this node does not run: the request fails at once instead of waiting.
    let fx = n.tree(ms(70), want(3, 9));
    assert!(to_helper(&fx).is_empty());
    let not_found = cosched_pmix::Status::NOT_FOUND.0;
    assert_eq!(have(&fx), [(NodeId(1), 9, Err(not_found))]);
}
