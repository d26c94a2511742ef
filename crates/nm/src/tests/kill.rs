//! Kills: the grace between SIGTERM and SIGKILL, reused process groups, cgroups, shutdown.

use super::*;
use crate::core::CgroupOp;

fn kill(job: u64) -> ToNode {
    ToNode::Switch {
        stop: vec![],
        cont: vec![],
        kill: vec![JobId(job)],
    }
}

fn forget(job: u64) -> ToNode {
    ToNode::Forget {
        jobs: vec![JobId(job)],
    }
}

#[test]
fn a_killed_jobs_groups_get_sigterm_and_sigcont_then_sigkill_after_the_grace() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    let (a, b) = (n.pid(1, 0), n.pid(1, 1));
    // Rank 1 exited already: its group may hold its background children, and is killed too.
    n.on(
        ms(50),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(1, 0),
        },
    );
    let fx = n.tree(ms(100), kill(1));
    assert_eq!(
        signals(&fx),
        [
            (a, libc::SIGTERM),
            (a, libc::SIGCONT),
            (b, libc::SIGTERM),
            (b, libc::SIGCONT)
        ]
    );
    assert_eq!(n.core.next_wake(), Some(ms(5_100)), "the kill wait: 5 s");
    // The job is forgotten meanwhile: its SIGKILL is still due, and the forget terminates
    // what may be left of its groups (a rank's background children) with a grace of its own.
    let fx = n.tree(ms(200), forget(1));
    assert_eq!(signals(&fx).len(), 4, "SIGTERM and SIGCONT again");
    assert!(signals(&n.until(ms(5_099))).is_empty());
    assert_eq!(
        signals(&n.until(ms(5_100))),
        [(a, libc::SIGKILL), (b, libc::SIGKILL)]
    );
    assert_eq!(
        signals(&n.until(ms(5_200))),
        [(a, libc::SIGKILL), (b, libc::SIGKILL)]
    );
    let later = n.until(ms(60_000));
    assert!(signals(&later).is_empty(), "{later:?}");
}

#[test]
fn a_group_reused_by_a_new_ranks_process_is_spared_by_the_delayed_sigkill() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
    let old = n.pid(1, 0);
    n.tree(ms(100), kill(1));
    n.on(
        ms(150),
        Input::Exited {
            job: JobId(1),
            launch: 1,
            exit: exit(0, 143),
        },
    );
    n.tree(ms(200), forget(1));
    // The kernel gives the freed number to a rank of the next job.
    n.next_pid = old;
    n.tree(ms(300), launch(2, 1, &[(0, 0)], false));
    assert_eq!(n.pid(2, 0), old);
    assert!(
        signals(&n.until(ms(10_000))).is_empty(),
        "job 2's rank spared"
    );
}

#[test]
fn a_killed_jobs_cgroup_goes_at_once_when_it_empties_else_at_the_end_of_the_grace() {
    for empties in [true, false] {
        let mut n = Node::up("gs");
        n.cgroups = true;
        n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
        let fx = n.tree(ms(100), kill(1));
        assert!(
            matches!(
                &fx[..],
                [Effect::Cgroup {
                    job: JobId(1),
                    launch: 1,
                    op: CgroupOp::Terminate { grace }
                }] if *grace == Dur::from_secs(5)
            ),
            "{fx:?}"
        );
        let kill_op = |fx: &[Effect]| {
            fx.iter().any(|e| {
                matches!(
                    e,
                    Effect::Cgroup {
                        op: CgroupOp::Kill,
                        launch: 1,
                        ..
                    }
                )
            })
        };
        if empties {
            let fx = n.on(
                ms(300),
                Input::CgroupEmpty {
                    job: JobId(1),
                    launch: 1,
                },
            );
            assert!(kill_op(&fx), "removed once empty");
            assert!(!kill_op(&n.until(ms(60_000))), "and not again");
        } else {
            assert!(!kill_op(&n.until(ms(5_099))));
            assert!(kill_op(&n.until(ms(5_100))));
        }
    }
}

#[test]
fn a_job_outside_the_matrix_follows_the_switch_messages() {
    let mut n = Node::up("gs");
    n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
    let pid = n.pid(1, 0);
    let switch = |stop: bool| ToNode::Switch {
        stop: if stop { vec![JobId(1)] } else { vec![] },
        cont: if stop { vec![] } else { vec![JobId(1)] },
        kill: vec![],
    };
    assert_eq!(
        signals(&n.tree(ms(10), switch(true))),
        [(pid, libc::SIGSTOP)]
    );
    assert_eq!(
        signals(&n.tree(ms(20), switch(false))),
        [(pid, libc::SIGCONT)]
    );
    // A job of the matrix is the strobe's to switch.
    n.tree(
        ms(30),
        ToNode::Rotation(still(Strobe {
            slot: Some(0),
            rows: vec![(JobId(1), 0)],
            running: vec![JobId(1)],
        })),
    );
    assert!(signals(&n.tree(ms(40), switch(true))).is_empty());
}

#[test]
fn shutting_down_gives_the_ranks_a_short_grace_then_sigkill_and_exits() {
    for all_exit in [true, false] {
        let mut n = Node::up("gs");
        n.tree(ms(0), launch(1, 1, &[(0, 0)], false));
        let pid = n.pid(1, 0);
        let fx = n.tree(ms(100), ToNode::Shutdown);
        assert_eq!(signals(&fx), [(pid, libc::SIGTERM), (pid, libc::SIGCONT)]);
        assert!(!n.core.takes_tree_input());
        assert_eq!(
            n.core.next_wake(),
            Some(ms(2_100)),
            "2 s, under the kill wait"
        );
        let fx = if all_exit {
            n.on(
                ms(150),
                Input::Exited {
                    job: JobId(1),
                    launch: 1,
                    exit: exit(0, 143),
                },
            )
        } else {
            n.until(ms(2_100))
        };
        assert_eq!(signals(&fx), [(pid, libc::SIGKILL)]);
        assert!(matches!(fx.last(), Some(Effect::Exit)), "{fx:?}");
        assert!(exits(&fx).is_empty(), "nothing is reported on the way out");
        assert_eq!(n.core.next_wake(), None);
    }
}
