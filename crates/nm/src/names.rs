//! The name service for a job's ranks, as the core carries it (`MPI_Publish_name`,
//! `MPI_Lookup_name`, `MPI_Unpublish_name`): a PMI-1 rank's request ([`super::pmi::Out::Names`])
//! or the PMIx helper's ([`FromHelper::Names`]) goes up to the machine manager, which keeps
//! the one table of every job and node (`cosched_mm::names`), under a request number of this
//! node's; the answer ([`ToNode::Names`]) goes back to the rank as its PMI-1 reply line, or to
//! the helper, which answers the rank's PMIx call. A request still unanswered when the node
//! joins the tree again is asked again, as a fence is (its answer may have been lost with the
//! old parent).

use std::collections::BTreeMap;

use cosched_core::JobId;
use cosched_pmix::helper::ToHelper;
use cosched_proto::names::{NameAnswer, NameOp};
use cosched_proto::proto::FromNode;

use super::core::{Effect, NmCore};
use super::pmi::NameCmd;

/// Who asked, to take the answer back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Asker {
    /// A PMI-1 rank, which waits for its reply line.
    Pmi1 { cmd: NameCmd },
    /// The job's PMIx helper, with its tag for the request.
    Helper { tag: u64 },
}

#[derive(Clone, Debug)]
struct Asked {
    job: JobId,
    rank: u32,
    op: NameOp,
    asker: Asker,
}

/// This node's name requests waiting for the machine manager's answer.
#[derive(Clone, Debug, Default)]
pub(super) struct NameRequests {
    next: u64,
    waiting: BTreeMap<u64, Asked>,
}

impl NmCore {
    /// Rank `rank` of `job` asks the name service `op`; `asker` takes the answer.
    pub(super) fn ask_names(&mut self, job: JobId, rank: u32, op: NameOp, asker: Asker) {
        let Some(run) = self.jobs.get(&job).map(|j| j.run) else {
            return;
        };
        // Requests of jobs that left the node wait for nobody.
        let jobs = &self.jobs;
        self.names.waiting.retain(|_, a| jobs.contains_key(&a.job));
        self.names.next += 1;
        let req = self.names.next;
        let asked = Asked {
            job,
            rank,
            op: op.clone(),
            asker,
        };
        self.names.waiting.insert(req, asked);
        self.up(FromNode::Names {
            job,
            run,
            rank,
            req,
            op,
        });
    }

    /// The machine manager's answer to request `req`.
    pub(super) fn names_answered(&mut self, req: u64, answer: NameAnswer) {
        let Some(Asked {
            job, rank, asker, ..
        }) = self.names.waiting.remove(&req)
        else {
            return;
        };
        if !self.jobs.contains_key(&job) {
            return;
        }
        match asker {
            Asker::Pmi1 { cmd } => {
                let line = cmd.reply(&answer);
                self.push(Effect::PmiReply { job, rank, line });
            }
            Asker::Helper { tag } => {
                let msg = ToHelper::Names { tag, answer };
                self.push(Effect::ToHelper { job, msg });
            }
        }
    }

    /// The requests to ask again on joining the tree.
    pub(super) fn names_pending(&self) -> Vec<FromNode> {
        self.names
            .waiting
            .iter()
            .filter_map(|(&req, a)| {
                let run = self.jobs.get(&a.job)?.run;
                Some(FromNode::Names {
                    job: a.job,
                    run,
                    rank: a.rank,
                    req,
                    op: a.op.clone(),
                })
            })
            .collect()
    }
}
