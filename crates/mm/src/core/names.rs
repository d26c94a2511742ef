//! The name service as the core serves it: a node's request for one of its ranks is checked
//! (the job runs there, in that run), taken to the table of the job's user
//! ([`crate::names::Names`]), and the answers go to the nodes that wait for them.

use std::collections::BTreeSet;

use cosched_core::{JobId, NodeId};
use cosched_proto::names::{NameAnswer, NameOp};
use cosched_proto::proto::{ToNode, unit_step};

use super::Core;
use crate::names::Asker;

impl Core {
    /// Node `from` asks the name service `op` for rank `rank` of run `run` of `job` (a job or
    /// a step of one), request `req` of that node. The name space is the job's user's; the
    /// answers go to the nodes that wait for them.
    pub(super) fn names_asked(
        &mut self,
        from: NodeId,
        (job, run, rank): (JobId, u32, u32),
        req: u64,
        op: NameOp,
    ) {
        // Names of jobs and steps that ended go before anyone can see them.
        let live = |j: JobId| self.fence_nodes(j).is_some_and(|n| !n.is_empty());
        let ended: BTreeSet<JobId> = self.names.jobs().filter(|&j| !live(j)).collect();
        self.names.jobs_ended(|j| ended.contains(&j));
        let asker = Asker { node: from, req };
        let base = unit_step(job).map_or(job, |(id, _)| id);
        // A step runs in its allocation's run.
        let runs_here = self.run_of(base) == Some(run)
            && self.fence_nodes(job).is_some_and(|n| n.contains(&from));
        let uid = self
            .ledger
            .find(base)
            .filter(|_| runs_here)
            .map(|i| self.side[i].user.unwrap_or(u32::MAX));
        let answers = match uid {
            Some(uid) => self.names.ask(uid, job, rank, op, asker),
            None => vec![(
                asker,
                NameAnswer::Refused(format!("job {job} does not run on node {from}")),
            )],
        };
        for (to, answer) in answers {
            let req = to.req;
            self.send(vec![to.node], ToNode::Names { req, answer });
        }
    }
}
