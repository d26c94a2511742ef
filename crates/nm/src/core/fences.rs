//! PMI fences gathered up the tree, and what the node's PMI servers ask for (the name
//! service's requests go on in [`crate::names`]).

use super::*;

impl NmCore {
    /// This node's part of fence `seq` of `job` (PMI-1's, or PMIx's from
    /// [`crate::pmix::FENCE_BASE`]), gathered with the other nodes' up the tree.
    pub(crate) fn fence_up(&mut self, job: JobId, seq: u64, puts: Vec<(String, String)>) {
        let Some(j) = self.jobs.get(&job) else {
            return;
        };
        let id = (job.0, u64::from(j.run), seq);
        let nodes = j.nodes.clone();
        let msg = FromNode::Fence { job, seq, puts };
        self.push(Effect::Gather { id, nodes, msg });
    }

    /// Carries out what the PMI protocol of `job` asks for.
    pub(super) fn pmi_out(&mut self, job: JobId, out: Vec<Out>) {
        for o in out {
            match o {
                Out::Reply(rank, line) => self.push(Effect::PmiReply { job, rank, line }),
                Out::FenceUp { seq, puts } => self.fence_up(job, seq, puts),
                Out::Abort { rank, code, msg } => self.pmi_abort(job, rank, code, &msg),
                Out::Names { rank, op } => {
                    let cmd = crate::pmi::NameCmd::of(&op);
                    self.ask_names(job, rank, op, crate::names::Asker::Pmi1 { cmd })
                }
                Out::Bad { rank, line } => self.log(
                    Level::Warn,
                    format!("job {job} rank {rank}: PMI line not served: {line:?}"),
                ),
            }
        }
    }

    /// A rank's `PMI_Abort`. MPICH's client waits after it for the process manager to end the
    /// job (as Hydra does), so the node manager kills the rank, its exit recorded with the
    /// rank's code and the abort as its reason; the machine manager hears of the abort before
    /// the kill, and kills the other ranks.
    pub(super) fn pmi_abort(&mut self, job: JobId, rank: u32, code: i32, msg: &str) {
        let Some(j) = self.jobs.get(&job) else {
            return;
        };
        let pgid = j
            .ranks
            .get(&rank)
            .filter(|r| r.exit.is_none())
            .map_or(0, |r| r.pgid);
        self.aborted(job, rank, code, msg, true);
        if pgid > 0 {
            self.push(Effect::Signal {
                pgid,
                sig: libc::SIGKILL,
            });
        }
    }
}
