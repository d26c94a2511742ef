//! The name service from the node's side: PMI-1's and the PMIx helper's requests up to the
//! machine manager, its answers back to the rank or the helper, requests asked again on
//! joining the tree.

use super::pmix::node;
use super::*;
use cosched_pmix::helper::{FromHelper, ToHelper};
use cosched_proto::jobio::Mpi;
use cosched_proto::names::{FoundName, NameAnswer, NameOp};

/// The name requests sent up, as (job, run, rank, req, op).
fn asked(fx: &[Effect]) -> Vec<(JobId, u32, u32, u64, NameOp)> {
    ups(fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Names {
                job,
                run,
                rank,
                req,
                op,
            } => Some((job, run, rank, req, op)),
            _ => None,
        })
        .collect()
}

fn pmi(job: u64, rank: u32, line: &str) -> Input {
    Input::Pmi {
        job: JobId(job),
        rank,
        line: line.into(),
    }
}

#[test]
fn a_pmi1_ranks_name_requests_go_to_the_machine_manager_and_its_answers_back_to_the_rank() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(6, 1, &[(0, 0), (1, 1)], false));
    let fx = n.on(ms(20), pmi(6, 1, "cmd=publish_name service=svc port=p#1$"));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::PmiReply { .. })),
        "the rank waits for the machine manager's answer"
    );
    let up = asked(&fx);
    let names = vec![("svc".to_string(), "p#1$".to_string())];
    assert_eq!(up, [(JobId(6), 1, 1, up[0].3, NameOp::Publish { names })]);
    let fx = n.on(ms(25), pmi(6, 0, "cmd=lookup_name service=svc"));
    let lookup = asked(&fx)[0].3;
    // The answers may come in any order; each goes to the rank that asked.
    let found = NameAnswer::Found(vec![FoundName {
        name: "svc".into(),
        value: "p#1$".into(),
        job: JobId(6),
        rank: 1,
    }]);
    let fx = n.tree(
        ms(30),
        ToNode::Names {
            req: lookup,
            answer: found,
        },
    );
    assert!(
        matches!(&fx[..], [Effect::PmiReply { job: JobId(6), rank: 0, line }]
            if line == "cmd=lookup_result rc=0 msg=success port=p#1$\n"),
        "{fx:?}"
    );
    let fx = n.tree(
        ms(31),
        ToNode::Names {
            req: up[0].3,
            answer: NameAnswer::Done,
        },
    );
    assert!(
        matches!(&fx[..], [Effect::PmiReply { job: JobId(6), rank: 1, line }]
            if line == "cmd=publish_result rc=0 msg=success\n"),
        "{fx:?}"
    );
    // An answer repeated (asked again after a rejoin) is given once.
    let fx = n.tree(
        ms(32),
        ToNode::Names {
            req: up[0].3,
            answer: NameAnswer::Done,
        },
    );
    assert!(fx.is_empty(), "{fx:?}");
}

#[test]
fn the_pmix_helpers_name_requests_go_up_and_the_machine_managers_answers_back_to_the_helper() {
    let mut n = node();
    let ToNode::Launch(mut l) = launch(5, 1, &[(0, 0), (1, 1)], false) else {
        unreachable!()
    };
    l.io.mpi = Mpi::Pmix;
    n.tree(ms(10), ToNode::Launch(l));
    n.on(
        ms(20),
        Input::HelperReady {
            job: JobId(5),
            launch: 1,
            result: Ok(vec![(0, Vec::new()), (1, Vec::new())]),
        },
    );
    let helper = |tag, request| Input::Helper {
        job: JobId(5),
        launch: 1,
        msg: FromHelper::Names {
            tag,
            rank: 0,
            request,
        },
    };
    let lookup = NameOp::Lookup {
        names: vec!["svc".into()],
        wait: true,
    };
    let fx = n.on(ms(30), helper(7, lookup));
    let up = asked(&fx);
    assert_eq!(
        up,
        [(
            JobId(5),
            1,
            0,
            up[0].3,
            NameOp::Lookup {
                names: vec!["svc".into()],
                wait: true
            }
        )]
    );
    let to_helper = |fx: &[Effect]| -> Vec<ToHelper> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::ToHelper { job: JobId(5), msg } => Some(msg.clone()),
                _ => None,
            })
            .collect()
    };
    let found = NameAnswer::Found(vec![FoundName {
        name: "svc".into(),
        value: "port".into(),
        job: JobId(9),
        rank: 3,
    }]);
    let fx = n.tree(
        ms(40),
        ToNode::Names {
            req: up[0].3,
            answer: found.clone(),
        },
    );
    assert_eq!(
        to_helper(&fx),
        [ToHelper::Names {
            tag: 7,
            answer: found
        }]
    );
    let publish = NameOp::Publish {
        names: vec![("svc".into(), "mine".into())],
    };
    let fx = n.on(ms(50), helper(8, publish));
    let req = asked(&fx)[0].3;
    let fx = n.tree(
        ms(60),
        ToNode::Names {
            req,
            answer: NameAnswer::Taken("svc".into()),
        },
    );
    assert_eq!(
        to_helper(&fx),
        [ToHelper::Names {
            tag: 8,
            answer: NameAnswer::Taken("svc".into())
        }]
    );
}

#[test]
fn name_requests_not_answered_are_asked_again_when_the_node_joins_the_tree_again() {
    let mut n = Node::up("gs");
    n.tree(ms(10), launch(6, 1, &[(0, 0)], false));
    let fx = n.on(ms(20), pmi(6, 0, "cmd=lookup_name service=svc"));
    let first = asked(&fx);
    let fx = n.on(
        ms(30),
        Input::Topology {
            epoch: 2,
            member: true,
        },
    );
    assert_eq!(asked(&fx), first, "the same request, under the same number");
    n.tree(
        ms(40),
        ToNode::Names {
            req: first[0].3,
            answer: NameAnswer::NotFound,
        },
    );
    let fx = n.on(
        ms(50),
        Input::Topology {
            epoch: 3,
            member: true,
        },
    );
    assert!(asked(&fx).is_empty(), "answered: not asked again");
}
