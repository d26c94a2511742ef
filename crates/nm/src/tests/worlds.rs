//! MPI worlds of one: a rank that loaded MPI and reached no server is reported at its exit,
//! as a warning, or as its failure under `--mpi pmix`; a rank that reached one is not.

use super::*;
use crate::worlds::{LOOK_EVERY, LOOKS};
use cosched_pmix::helper::FromHelper;
use cosched_proto::jobio::Mpi;

/// A launch of job `job` with ranks 0 and 1 here under `--mpi mpi`.
fn launch_of_two(job: u64, mpi: Mpi) -> ToNode {
    let ToNode::Launch(mut l) = launch(job, 1, &[(0, 0), (1, 1)], false) else {
        unreachable!()
    };
    l.io.mpi = mpi;
    ToNode::Launch(l)
}

/// The looks asked for, as (rank, pid).
fn looks(fx: &[Effect]) -> Vec<(u32, i32)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::LookForMpi { rank, pid, .. } => Some((*rank, *pid)),
            _ => None,
        })
        .collect()
}

fn looked(job: u64, rank: u32, lib: Option<&str>) -> Input {
    Input::LookedForMpi {
        job: JobId(job),
        launch: 1,
        rank,
        lib: lib.map(str::to_string),
    }
}

fn exited(job: u64, rank: u32, code: i32) -> Input {
    Input::Exited {
        job: JobId(job),
        launch: 1,
        exit: exit(rank, code),
    }
}

/// The texts appended to output files, as (file name, text).
fn appended(fx: &[Effect]) -> Vec<(String, String)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::AppendOutput { path, text, .. } => Some((
                path.file_name().unwrap().to_string_lossy().into_owned(),
                text.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rank_that_loaded_mpi_and_reached_no_server_is_reported_as_a_world_of_one() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch_of_two(1, Mpi::None));
    let (p0, p1) = (n.pid(1, 0), n.pid(1, 1));
    let first = ms(0) + LOOKS[0];
    assert!(looks(&n.until(first - Dur::from_millis(1))).is_empty());
    assert_eq!(looks(&n.until(first)), [(0, p0), (1, p1)]);
    n.on(first, looked(1, 0, Some("libmpi.so.40.30.4")));
    n.on(first, looked(1, 1, None));
    // Rank 0 is known to use MPI: only rank 1 is looked into again, then on and on.
    let again = first + LOOKS[1];
    assert!(looks(&n.until(again - Dur::from_millis(1))).is_empty());
    assert_eq!(looks(&n.until(again)), [(1, p1)]);
    let late = again + LOOKS[2] + LOOK_EVERY;
    assert_eq!(looks(&n.until(late)), [(1, p1), (1, p1)]);
    let fx = n.on(late, exited(1, 0, 0));
    let sent = ups(&fx);
    let FromNode::Warning {
        job, rank, warning, ..
    } = &sent[0]
    else {
        panic!("a warning before the exit: {sent:?}")
    };
    assert_eq!((job.0, *rank), (1, 0));
    assert!(
        warning.starts_with("loaded MPI (libmpi.so.40.30.4) but reached no MPI server of the job")
            && warning.contains("world of one rank, not one of 2")
            && warning.contains("--mpi none"),
        "{warning}"
    );
    assert!(matches!(&sent[1], FromNode::Exited { exit, .. } if exit.error.is_none()));
    let told = appended(&fx);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].1.starts_with("cosched: rank 0: loaded MPI"));
    // Rank 1 never showed MPI: nothing said of it; and no look after its exit.
    let fx = n.on(late, exited(1, 1, 0));
    assert_eq!(exits(&fx), [(1, 1, 1, Some(0))]);
    assert!(appended(&fx).is_empty());
    assert!(looks(&n.until(late + LOOK_EVERY + LOOK_EVERY)).is_empty());
}

#[test]
fn a_rank_that_reached_a_server_is_not_a_world_of_one_and_under_pmix_one_that_did_not_fails() {
    let mut n = super::pmix::node();
    n.tree(ms(0), launch_of_two(2, Mpi::Pmix));
    let env = |r: u32| (r, vec![("PMIX_RANK".to_string(), r.to_string())]);
    n.on(
        ms(1),
        Input::HelperReady {
            job: JobId(2),
            launch: 1,
            result: Ok(vec![env(0), env(1)]),
        },
    );
    n.on(
        ms(5),
        Input::Helper {
            job: JobId(2),
            launch: 1,
            msg: FromHelper::Connected { rank: 1 },
        },
    );
    // Only rank 0, which has not connected, is looked into.
    let at = ms(1) + LOOKS[0];
    assert_eq!(looks(&n.until(at)), [(0, n.pid(2, 0))]);
    n.on(at, looked(2, 0, Some("libmpich.so.12")));
    let fx = n.on(ms(200), exited(2, 1, 0));
    assert_eq!(exits(&fx), [(2, 1, 1, Some(0))]);
    assert!(appended(&fx).is_empty());
    let fx = n.on(ms(300), exited(2, 0, 0));
    let sent = ups(&fx);
    assert!(
        !sent.iter().any(|m| matches!(m, FromNode::Warning { .. })),
        "a failure, not a warning: {sent:?}"
    );
    let FromNode::Exited { exit, .. } = &sent[0] else {
        panic!("{sent:?}")
    };
    let error = exit.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("libmpich.so.12") && error.contains("--mpi pmix"),
        "{error}"
    );
    assert_eq!(appended(&fx).len(), 1);
}

#[test]
fn a_one_rank_job_is_never_looked_into() {
    let mut n = Node::up("gs");
    let ToNode::Launch(mut l) = launch(3, 1, &[(0, 0)], false) else {
        unreachable!()
    };
    l.io.mpi = Mpi::None;
    n.tree(ms(0), ToNode::Launch(l));
    assert!(looks(&n.until(ms(60_000))).is_empty());
}
