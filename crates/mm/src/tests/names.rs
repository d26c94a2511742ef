//! The name service through the core: a node's request checked against the job it names, the
//! user's table, the answer to the node that asked.

use super::*;
use cosched_proto::names::{FoundName, NameAnswer, NameOp};

/// Node `node` asks the name service `op` for rank 0 of run 1 of `job`, as its request
/// `req`; the answers the step sends, as (destinations, request, answer).
fn ask_names(
    c: &mut Core,
    now: Time,
    (node, job, req): (u32, u64, u64),
    op: NameOp,
) -> Vec<(Vec<NodeId>, u64, NameAnswer)> {
    c.on(
        now,
        Input::FromNode {
            from: NodeId(node),
            msg: FromNode::Names {
                job: JobId(job),
                run: 1,
                rank: 0,
                req,
                op,
            },
        },
    );
    c.step(now)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Send {
                to,
                msg: ToNode::Names { req, answer },
            } => Some((to, req, answer)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_published_name_is_found_from_another_node_by_jobs_of_its_user_only_and_goes_with_its_job() {
    let fcfs = crate::build_policy("fcfs", 3, 2, &PolicyOptions::default()).unwrap();
    let mut c = core(fcfs, 3, 2);
    submit_as(&mut c, t(1), 2, Some(1000)); // job 1, node 0
    submit_as(&mut c, t(1), 2, Some(1000)); // job 2, node 1
    submit_as(&mut c, t(1), 2, Some(1001)); // job 3, node 2: another user
    c.step(t(1));
    let publish = NameOp::Publish {
        names: vec![("svc".into(), "port-1".into())],
    };
    let lookup = || NameOp::Lookup {
        names: vec!["svc".into()],
        wait: false,
    };
    assert_eq!(
        ask_names(&mut c, t(2), (0, 1, 7), publish),
        [(vec![NodeId(0)], 7, NameAnswer::Done)]
    );
    let found = NameAnswer::Found(vec![FoundName {
        name: "svc".into(),
        value: "port-1".into(),
        job: JobId(1),
        rank: 0,
    }]);
    assert_eq!(
        ask_names(&mut c, t(3), (1, 2, 3), lookup()),
        [(vec![NodeId(1)], 3, found)]
    );
    assert_eq!(
        ask_names(&mut c, t(4), (2, 3, 4), lookup()),
        [(vec![NodeId(2)], 4, NameAnswer::NotFound)],
        "another user's job does not see it"
    );
    // A node cannot speak for a job it does not run.
    let refused = ask_names(&mut c, t(5), (2, 1, 5), lookup());
    assert!(
        matches!(&refused[..], [(_, 5, NameAnswer::Refused(why))] if why.contains("job 1")),
        "{refused:?}"
    );
    exit(&mut c, t(6), 1, 0, 0);
    exit(&mut c, t(6), 1, 1, 0);
    c.step(t(6));
    assert_eq!(state(&c, 1).state, JobState::Completed);
    assert_eq!(
        ask_names(&mut c, t(7), (1, 2, 6), lookup()),
        [(vec![NodeId(1)], 6, NameAnswer::NotFound)],
        "the name went with its job"
    );
}
