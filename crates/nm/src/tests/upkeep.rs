//! What the node keeps in order at heartbeats: output files within the cap, job directories
//! swept after the retention; and what it reads for clients.

use super::*;
use crate::core::{CapOutput, Level};

fn heartbeat(seq: i64) -> ToNode {
    ToNode::Heartbeat {
        seq,
        rotation: None,
    }
}

fn caps(fx: &[Effect]) -> Vec<CapOutput> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::CapOutput(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn output_files_are_kept_within_the_cap_at_every_heartbeat_and_at_exit_with_one_notice() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    let out0 = PathBuf::from("/work/jobs/1/0.out");
    let notice = crate::cap_notice(1_000).len() as u64;
    // Every output file of every running rank is looked at.
    let fx = n.tree(ms(200), heartbeat(1));
    let c = caps(&fx);
    assert_eq!(c.len(), 4, "out and err of two ranks");
    assert_eq!(
        (c[0].path.clone(), c[0].keep, c[0].notice),
        (out0.clone(), 1_000, true)
    );
    // Rank 0's output grows past the cap: cut, with the notice, once.
    n.sizes.insert(out0.clone(), 5_000);
    let fx = n.tree(ms(400), heartbeat(2));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Log(Level::Info, l) if l == "nm n0: output of job 1 rank 0 reached --output-cap (1000 bytes): cut, with a notice"
    )));
    assert_eq!(n.sizes[&out0], 1_000 + notice);
    // It keeps writing after the notice: cut back to the cap and the notice, no second one.
    n.sizes.insert(out0.clone(), 9_000);
    let fx = n.tree(ms(600), heartbeat(3));
    let c = caps(&fx);
    assert_eq!((c[0].keep, c[0].notice), (1_000 + notice, false));
    assert_eq!(n.sizes[&out0], 1_000 + notice);
    assert!(!fx.iter().any(|e| matches!(e, Effect::Log(..))));
    // Its last writes are cut at its exit; an exited rank is not looked at again.
    n.sizes.insert(out0.clone(), 7_000);
    let fx = n.on(
        ms(700),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(0, 0),
        },
    );
    assert_eq!(caps(&fx).len(), 2, "rank 0's two files");
    assert_eq!(n.sizes[&out0], 1_000 + notice);
    let fx = n.tree(ms(800), heartbeat(4));
    assert!(caps(&fx).iter().all(|c| c.rank == 1));
}

#[test]
fn job_directories_are_swept_at_most_every_quarter_of_the_retention_and_only_those_not_held() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(2, 1, &[(0, 0)], false));
    // Job 1 ended long ago, job 2 runs (its directory's time is old too), job 3 ended 1 s ago.
    n.dirs = vec![
        (JobId(1), Dur::from_secs(5)),
        (JobId(2), Dur::from_secs(9)),
        (JobId(3), Dur::from_secs(1)),
    ];
    let removed = |fx: &[Effect]| -> Vec<JobId> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::RemoveJobDir(j) => Some(*j),
                _ => None,
            })
            .collect()
    };
    let sweeps = |fx: &[Effect]| {
        fx.iter()
            .filter(|e| matches!(e, Effect::Sweep { keep } if *keep == Dur::from_secs(4)))
            .count()
    };
    // The first heartbeat sweeps what an earlier run left.
    let fx = n.tree(ms(200), heartbeat(1));
    assert_eq!((sweeps(&fx), removed(&fx)), (1, vec![JobId(1)]));
    // A retention of 4 s: every second at most.
    n.dirs.retain(|(j, _)| *j != JobId(1));
    n.dirs[1].1 = Dur::from_secs(4);
    assert_eq!(sweeps(&n.tree(ms(1_000), heartbeat(2))), 0);
    let fx = n.tree(ms(1_200), heartbeat(3));
    assert_eq!((sweeps(&fx), removed(&fx)), (1, vec![JobId(3)]));
    // Once job 2 is forgotten, its directory goes too.
    n.tree(
        ms(1_300),
        ToNode::Forget {
            jobs: vec![JobId(2)],
        },
    );
    n.dirs = vec![(JobId(2), Dur::from_secs(4))];
    let fx = n.tree(ms(2_200), heartbeat(4));
    assert_eq!(removed(&fx), [JobId(2)]);
}

#[test]
fn as_root_only_the_job_users_own_files_are_read_or_cut() {
    let mut cfg = config("gs");
    cfg.euid = 0;
    let (mut n, _) = Node::starting_with(cfg);
    n.on(ms(0), Input::Registration(Ok(accepted(Vec::new()))));
    let fetch = |uid: Option<u32>| ToNode::FetchOutput {
        req: 4,
        job: JobId(9),
        rank: 0,
        cwd: "/home/ann".into(),
        io: JobIo::default(),
        uid,
        tail: true,
    };
    for (uid, must_own) in [(Some(2000), Some(2000)), (Some(0), None), (None, None)] {
        let fx = n.tree(ms(10), fetch(uid));
        assert!(
            matches!(&fx[..], [Effect::ReadOutput(r)] if r.must_own == must_own && r.tail && r.job == JobId(9)),
            "{fx:?}"
        );
    }
    // A job of user 2000 launched by root: its files are cut only if they are 2000's.
    let mut l = launch(1, 1, &[(0, 0)], false);
    if let ToNode::Launch(l) = &mut l {
        l.uid = Some(2000);
    }
    n.core.on(
        ms(20),
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
    let creds = crate::launch::Creds {
        uid: 2000,
        gid: 2000,
        groups: vec![2000],
    };
    n.core.on(
        ms(20),
        Input::Prepared(Box::new(Prepared {
            memory: Ok(()),
            job: p.job,
            launch: p.launch,
            cmd0: Ok(None),
            run_as: Ok(Some(creds.clone())),
            cgroup: Ok(false),
            dir: Ok(()),
            monitor_env: vec![Vec::new()],
            cwd_exists: true,
        })),
    );
    let fx = n.pump();
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Spawn(s) if s.creds == Some(creds.clone()) && s.cwd == std::path::Path::new("/home/ann/run")))
    );
    let fx = n.tree(ms(200), heartbeat(1));
    assert!(caps(&fx).iter().all(|c| c.must_own == Some(2000)));
}
