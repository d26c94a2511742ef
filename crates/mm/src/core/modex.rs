//! Direct modex between nodes (PMIx's `PMIx_Get` of a key a fence did not bring, as Open MPI
//! asks with `pmix_base_async_modex=1`): the core passes a node's want on to the node that
//! runs the rank, and that node's answer back. Nothing is kept: the nodes number their
//! requests.

use cosched_core::{JobId, NodeId};
use cosched_proto::proto::{ToNode, unit_step};

use super::Core;

/// PMIx's `PMIX_ERR_NOT_FOUND`: the rank is not in the job, or the job does not run.
const NOT_FOUND: i32 = -46;

impl Core {
    /// Node `from` wants the data of rank `rank` of run `run` of `job` for its request `req`.
    pub(super) fn modex_want(
        &mut self,
        from: NodeId,
        (job, run): (JobId, u32),
        rank: u32,
        req: u64,
    ) {
        let base = unit_step(job).map_or(job, |(id, _)| id);
        let holder = self
            .world_placement(job)
            .filter(|_| self.run_of(base) == Some(run))
            .and_then(|pl| {
                pl.iter()
                    .find(|p| p.ranks.iter().any(|&(r, _)| r == rank))
                    .map(|p| p.node)
            });
        match holder {
            Some(node) => self.send(
                vec![node],
                ToNode::ModexWant {
                    job,
                    rank,
                    from,
                    req,
                },
            ),
            None => {
                let data = Err(NOT_FOUND);
                self.send(vec![from], ToNode::ModexHave { job, req, data })
            }
        }
    }

    /// Node `from`'s answer to the want `req` of node `to`: passed on while the job runs.
    pub(super) fn modex_have(
        &mut self,
        (job, run): (JobId, u32),
        to: NodeId,
        req: u64,
        data: Result<Vec<u8>, i32>,
    ) {
        let base = unit_step(job).map_or(job, |(id, _)| id);
        if self.run_of(base) == Some(run) && self.world_placement(job).is_some() {
            self.send(vec![to], ToNode::ModexHave { job, req, data });
        }
    }
}
