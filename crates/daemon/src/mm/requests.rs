//! Client requests: submit, query, cancel, hold and release, output, status, shutdown. Each
//! is answered with an [`Effect::Reply`]; an output fetch is answered once its node replies.

use cosched_core::{Dur, JobId, Time};

use super::core::{Core, Effect, ReqId};
use crate::proto::*;

/// How long a node has to send a rank's output back.
const OUTPUT_TIMEOUT: Dur = Dur::from_secs(5);

impl Core {
    pub(super) fn request(&mut self, now: Time, req: ReqId, request: Request, caller: Caller) {
        // A job's environment is for its ranks only: it may hold secrets, and with many jobs
        // it could outgrow a frame.
        let shown = |mut j: JobInfo| {
            j.io.env = None;
            j
        };
        let unknown = |id: JobId| {
            Response::Error(format!(
                "unknown job id {id}; `cosched queue --all` lists the jobs"
            ))
        };
        let ended = |id: JobId, info: &JobInfo| {
            Response::Error(format!(
                "job {id} has already ended ({})",
                info.state.as_str()
            ))
        };
        let resp = match request {
            Request::Submit(s) => match self.submit(now, *s, caller) {
                Ok(id) => Response::Submitted(id),
                Err(why) => Response::Error(why),
            },
            Request::Jobs { ids } => {
                if ids.is_empty() {
                    Response::Jobs(
                        (0..self.side.len())
                            .map(|i| shown(self.job_info(i, now)))
                            .collect(),
                    )
                } else {
                    let found: Option<Vec<_>> =
                        ids.iter().map(|&id| self.ledger.find(id)).collect();
                    match found {
                        Some(ixs) => Response::Jobs(
                            ixs.into_iter()
                                .map(|i| shown(self.job_info(i, now)))
                                .collect(),
                        ),
                        None => unknown(
                            *ids.iter()
                                .find(|&&id| self.ledger.find(id).is_none())
                                .expect("one is missing"),
                        ),
                    }
                }
            }
            Request::Cancel(id) => match self.ledger.find(id) {
                None => unknown(id),
                Some(i) if !self.may_act(caller, i) => self.denied(i),
                Some(i) if !self.live.contains(&i) => ended(id, &self.job_info(i, now)),
                Some(i) => {
                    self.cancel(now, i, "cancelled by a user");
                    Response::Done
                }
            },
            Request::Suspend(id) | Request::Resume(id) => {
                let hold = matches!(request, Request::Suspend(_));
                match self.ledger.find(id) {
                    None => unknown(id),
                    Some(i) if !self.may_act(caller, i) => self.denied(i),
                    Some(i) if !self.live.contains(&i) => ended(id, &self.job_info(i, now)),
                    Some(i) => {
                        if self.ledger.entry(i).held() != hold {
                            self.set_held(now, i, hold);
                        }
                        Response::Done
                    }
                }
            }
            Request::Status => Response::Status(self.status()),
            Request::Output { job, rank } => match self.output(now, req, job, rank, caller) {
                Some(resp) => resp,
                None => return,
            },
            Request::Shutdown if !caller.admin => Response::Error(format!(
                "permission denied: only root or the cluster's own user ({}) may shut it down",
                crate::util::user_name(crate::util::euid())
            )),
            Request::Shutdown => {
                self.shutdown(now);
                Response::Done
            }
            Request::Monitor { node } => match self.fetch_monitor(now, req, &node) {
                Some(resp) => resp,
                None => return,
            },
        };
        self.push(Effect::Reply { req, resp });
    }

    /// Whether `caller` may cancel, hold, release or read the output of job `i`: its owner or
    /// an administrator. (A job recorded without a user, from before issue 10, is the
    /// administrator's.)
    fn may_act(&self, caller: Caller, i: cosched_ledger::Ix) -> bool {
        caller.admin || self.side[i].user == Some(caller.uid)
    }

    fn denied(&self, i: cosched_ledger::Ix) -> Response {
        let owner = self.side[i]
            .user
            .map_or_else(|| "the administrator".to_string(), crate::util::user_name);
        Response::Error(format!(
            "permission denied: job {} belongs to {owner}",
            self.ledger.entry(i).req.id
        ))
    }

    /// Asks a node (by name or number) for what its communication monitors recorded; `None`
    /// when the answer comes later.
    fn fetch_monitor(&mut self, now: Time, req: ReqId, node: &str) -> Option<Response> {
        let found = self.nodes.iter().position(|e| {
            e.row.name == node
                || node
                    .parse::<u32>()
                    .is_ok_and(|n| n as usize == e.row.id.0 as usize)
        });
        let Some(n) = found else {
            let names: Vec<&str> = self.nodes.iter().map(|e| e.row.name.as_str()).collect();
            return Some(Response::Error(format!(
                "no node {node:?}; the nodes are {}",
                names.join(", ")
            )));
        };
        if !self.nodes[n].in_tree {
            return Some(Response::Error(format!(
                "node {node} is not in the tree now (down or joining)"
            )));
        }
        let fetch = self.next_fetch;
        self.next_fetch += 1;
        let id = self.nodes[n].row.id;
        self.send(vec![id], ToNode::FetchMonitor { req: fetch });
        self.outputs.insert(fetch, (req, now + OUTPUT_TIMEOUT));
        None
    }

    /// Asks the node of rank `rank` for its output; `None` when the answer comes later.
    fn output(
        &mut self,
        now: Time,
        req: ReqId,
        job: JobId,
        rank: u32,
        caller: Caller,
    ) -> Option<Response> {
        let Some(i) = self.ledger.find(job) else {
            return Some(Response::Error(format!(
                "unknown job id {job}; `cosched queue --all` lists the jobs"
            )));
        };
        if !self.may_act(caller, i) {
            return Some(self.denied(i));
        }
        let procs = self.ledger.entry(i).req.procs;
        if rank >= procs {
            return Some(Response::Error(format!(
                "job {job} has ranks 0..{procs}; --rank {rank} is out of range"
            )));
        }
        let node = self.side[i]
            .placement
            .iter()
            .find(|p| p.ranks.iter().any(|r| r.0 == rank))
            .map(|p| p.node);
        let node = match node {
            None => {
                return Some(Response::Error(format!(
                    "job {job} never ran, so it has no output"
                )));
            }
            Some(n) if !self.nodes.get(n.0 as usize).is_some_and(|e| e.in_tree) => {
                let name = self
                    .nodes
                    .get(n.0 as usize)
                    .map_or_else(|| n.to_string(), |e| e.row.name.clone());
                return Some(Response::Error(format!(
                    "rank {rank} of job {job} ran on node {name}, which is down; its files stay in that node's work directory"
                )));
            }
            Some(n) => n,
        };
        let fetch = self.next_fetch;
        self.next_fetch += 1;
        self.send(
            vec![node],
            ToNode::FetchOutput {
                req: fetch,
                job,
                rank,
                cwd: self.side[i].cwd.clone(),
                io: JobIo {
                    env: None,
                    ..self.side[i].io.clone()
                },
                uid: self.side[i].user,
            },
        );
        self.outputs.insert(fetch, (req, now + OUTPUT_TIMEOUT));
        None
    }
}
