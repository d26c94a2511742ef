//! Client requests: submit, query, cancel, hold and release, output, status, shutdown. Each
//! is answered with an [`Effect::Reply`]; an output fetch is answered once its node replies.

use cosched_core::{Dur, JobId, NodeId, Time};
use cosched_ledger::Ix;

use super::changes::{Staged, Write};
use super::core::{Core, Effect, Fetch, ReqId};
use cosched_proto::proto::*;

/// How long a node has to send a rank's output back.
const OUTPUT_TIMEOUT: Dur = Dur::from_secs(5);

impl Core {
    /// Answers a read; checks and stages a change, whose records it returns (see
    /// [`super::changes`]).
    pub(super) fn request(
        &mut self,
        now: Time,
        req: ReqId,
        request: Request,
        caller: Caller,
    ) -> Option<Write> {
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
            Request::Submit(s) => {
                let hold = s.hold;
                match self.new_jobs(now, *s, caller) {
                    Ok(jobs) => return Some(self.stage(now, req, Staged::Submit(jobs, hold))),
                    Err(why) => Response::Error(why),
                }
            }
            Request::Jobs(q) => {
                let (page, from_db) = self.jobs_page(&q, now);
                match page {
                    Response::Jobs(page) if !from_db.is_empty() => {
                        self.push(Effect::ReplyJobs {
                            req,
                            page,
                            from_db,
                            listing: q.ids.is_empty(),
                        });
                        return None;
                    }
                    page => page,
                }
            }
            Request::Cancel(id) => match self.ledger.find(id) {
                None => unknown(id),
                Some(i) if !self.may_act(caller, i) => self.denied(i),
                Some(i) if !self.live.contains(&i) => ended(id, &self.job_info(i, now)),
                Some(i) => return Some(self.stage(now, req, Staged::Cancel(i))),
            },
            Request::Relinquish { job, exit_code } => match self.ledger.find(job) {
                None => unknown(job),
                Some(i) if !self.may_act(caller, i) => self.denied(i),
                Some(i) if !self.live.contains(&i) => ended(job, &self.job_info(i, now)),
                Some(i) => return Some(self.stage(now, req, Staged::Relinquish(i, exit_code))),
            },
            Request::Suspend(id) | Request::Resume(id) => {
                let hold = matches!(request, Request::Suspend(_));
                match self.ledger.find(id) {
                    None => unknown(id),
                    Some(i) if !self.may_act(caller, i) => self.denied(i),
                    Some(i) if !self.live.contains(&i) => ended(id, &self.job_info(i, now)),
                    Some(i) if self.ledger.entry(i).held() == hold => Response::Done,
                    Some(i) => return Some(self.stage(now, req, Staged::Hold(i, hold))),
                }
            }
            Request::Status => Response::Status(self.status()),
            Request::Output {
                job,
                step,
                rank,
                tail,
            } => {
                // `None`: answered when the node replies (and there is nothing to write).
                self.output(now, req, (job, step), rank, tail, caller)?
            }
            Request::Step(r) => return self.step_request(now, req, *r, caller),
            Request::CancelStep { job, step } => match self.ledger.find(job) {
                None => unknown(job),
                Some(i) if !self.may_act(caller, i) => self.denied(i),
                Some(i) => match self.check_step_cancel(i, step) {
                    Ok(()) => return Some(self.stage(now, req, Staged::StepCancel(i, step))),
                    Err(resp) => *resp,
                },
            },
            Request::Shutdown if !caller.admin => Response::Error(format!(
                "permission denied: only root or the cluster's own user ({}) may shut it down",
                cosched_proto::util::user_name(cosched_proto::util::euid())
            )),
            Request::Shutdown => return Some(self.stage(now, req, Staged::Shutdown)),
            Request::Forecast => match self.forecast(now) {
                Ok(f) => Response::Forecast(f),
                Err(why) => Response::Error(why),
            },
            Request::Monitor { node } => self.fetch_monitor(now, req, &node)?,
            Request::Node { op, .. } if !caller.admin => Response::Error(format!(
                "permission denied: only root or the cluster's own user ({}) may {} nodes",
                cosched_proto::util::user_name(cosched_proto::util::euid()),
                op.as_str()
            )),
            Request::Node { op, nodes, reason } => {
                match self.node_changes(now, op, &nodes, reason, caller.uid) {
                    Ok(c) => return Some(self.stage(now, req, Staged::Nodes(c))),
                    Err(why) => Response::Error(why),
                }
            }
            // The shell reads the configuration file and holds the credentials; none of
            // these reaches the core.
            Request::Reconfigure | Request::Credential { .. } | Request::RotateKey { .. } => {
                Response::Error("served by the shell".into())
            }
            // The shell serves broadcasts (super::bcast); none reaches the core.
            Request::Bcast(_) => Response::Error("a broadcast is served by the shell".into()),
        };
        self.push(Effect::Reply { req, resp });
        None
    }

    /// One page of the jobs `q` selects: at most `q.limit` records
    /// within [`PAGE_BYTES`], so that no answer outgrows a frame however many jobs there are
    /// or however long their command lines. The filters are checked on the ledger's entry
    /// before a record is built, so a selective query costs little beyond a pass over ids.
    /// Also returns the positions in the page of forgotten jobs, whose records the shell
    /// takes from the database.
    fn jobs_page(&self, q: &JobQuery, now: Time) -> (Response, Vec<usize>) {
        let limit = match q.limit {
            0 => MAX_PAGE_JOBS,
            n => n.min(MAX_PAGE_JOBS),
        } as usize;
        let by_id = !q.ids.is_empty();
        let candidates: Box<dyn Iterator<Item = Result<Ix, JobId>>> = if by_id {
            Box::new(
                q.ids
                    .iter()
                    .skip(q.skip as usize)
                    .map(|&id| self.ledger.find(id).ok_or(id)),
            )
        } else {
            // Ledger positions follow ids: start right after the cursor.
            let first = match q.after {
                None => 0,
                Some(after) => {
                    let n = self.side.len();
                    let (mut lo, mut hi) = (0, n);
                    while lo < hi {
                        let mid = (lo + hi) / 2;
                        if self.ledger.entry(mid).req.id <= after {
                            lo = mid + 1;
                        } else {
                            hi = mid;
                        }
                    }
                    lo
                }
            };
            Box::new((first..self.side.len()).map(Ok))
        };
        let mut page = JobsPage::default();
        let mut from_db = Vec::new();
        let mut bytes = 0;
        for c in candidates {
            let i = match c {
                Ok(i) => i,
                Err(id) => {
                    let why = format!("unknown job id {id}; `cosched queue --all` lists the jobs");
                    return (Response::Error(why), Vec::new());
                }
            };
            // A query by ids answers every id in order (the client skips the answered ones).
            if !by_id && !self.selected(i, q) {
                continue;
            }
            if page.jobs.len() >= limit {
                page.more = true;
                break;
            }
            let mut j = self.job_info(i, now);
            // A job's environment is for its ranks only: it may hold secrets, and with many
            // jobs it could outgrow a frame.
            j.io.env = None;
            if !by_id {
                shorten_cmd(&mut j.cmd, LISTED_CMD_BYTES);
            }
            let mut size = postcard::experimental::serialized_size(&j).unwrap_or(0);
            if self.side[i].forgotten {
                let whole = self.side[i].record_bytes;
                size = if by_id {
                    whole
                } else {
                    whole.min(size + LISTED_CMD_BYTES + 200)
                };
            }
            if !page.jobs.is_empty() && bytes + size > PAGE_BYTES {
                page.more = true;
                break;
            }
            bytes += size;
            if self.side[i].forgotten {
                from_db.push(page.jobs.len());
            }
            page.jobs.push(j);
        }
        (Response::Jobs(page), from_db)
    }

    /// Whether job `i` passes the filters of `q`.
    fn selected(&self, i: Ix, q: &JobQuery) -> bool {
        let e = self.ledger.entry(i);
        let r = e.record();
        (q.users.is_empty() || self.side[i].user.is_some_and(|u| q.users.contains(&u)))
            && (q.states.is_empty()
                || q.states
                    .contains(&super::view::job_state(e.phase(), e.held(), r.outcome)))
            && q.since_us
                .is_none_or(|s| r.end.is_none_or(|end| end.as_micros() >= s))
            && q.until_us.is_none_or(|u| r.submit.as_micros() <= u)
    }

    /// Whether `caller` may cancel, hold, release or read the output of job `i`: its owner or
    /// an administrator. (A job recorded without a user, from an older release, is the
    /// administrator's.)
    fn may_act(&self, caller: Caller, i: cosched_ledger::Ix) -> bool {
        caller.admin || self.side[i].user == Some(caller.uid)
    }

    pub(super) fn denied(&self, i: cosched_ledger::Ix) -> Response {
        let owner = self.side[i].user.map_or_else(
            || "the administrator".to_string(),
            cosched_proto::util::user_name,
        );
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
        self.fetching(fetch, req, id, now, false);
        None
    }

    /// Asks the node of rank `rank` for its output; `None` when the answer comes later.
    fn output(
        &mut self,
        now: Time,
        req: ReqId,
        (job, step): (JobId, Option<u32>),
        rank: u32,
        tail: bool,
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
        if self.side[i].forgotten {
            return Some(Response::Error(format!(
                "job {job} ended more than {} ago (--keep-jobs): its record is kept (`cosched acct`), its output on the nodes is not; files it wrote with --output stay where it wrote them",
                self.cfg.keep_jobs
            )));
        }
        let s = &self.side[i];
        let (unit, placement, cwd, io) = match step {
            None => (job, &s.placement, &s.cwd, &s.io),
            Some(k) => match s.steps.iter().find(|st| st.id == k) {
                Some(st) => (step_unit(job, k), &st.placement, &st.cwd, &st.io),
                None => {
                    return Some(Response::Error(format!(
                        "job {job} has no step {k} ({} steps)",
                        s.steps.len()
                    )));
                }
            },
        };
        let procs: u32 = placement.iter().map(|p| p.ranks.len() as u32).sum();
        let procs = if step.is_none() {
            self.ledger.entry(i).req.procs
        } else {
            procs
        };
        if rank >= procs {
            return Some(Response::Error(format!(
                "job {job} has ranks 0..{procs}; --rank {rank} is out of range"
            )));
        }
        let node = placement
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
                let (name, joining) = self
                    .nodes
                    .get(n.0 as usize)
                    .map_or_else(|| (n.to_string(), false), |e| (e.row.name.clone(), e.up));
                let now_state = if joining {
                    "is joining the tree again; ask again in a moment"
                } else {
                    "is down; its files stay in that node's work directory, and can be asked for again once it is back"
                };
                return Some(Response::Error(format!(
                    "rank {rank} of job {job} ran on node {name}, which {now_state}"
                )));
            }
            Some(n) => n,
        };
        let msg = ToNode::FetchOutput {
            req: self.next_fetch,
            job: unit,
            rank,
            cwd: cwd.clone(),
            io: JobIo {
                env: None,
                ..io.clone()
            },
            uid: s.user,
            tail,
        };
        let fetch = self.next_fetch;
        self.next_fetch += 1;
        self.send(vec![node], msg);
        self.fetching(fetch, req, node, now, tail);
        None
    }

    /// Awaits `node`'s answer to fetch `fetch` for client request `req`, until
    /// [`OUTPUT_TIMEOUT`]. A node that is not responding is asked all the same: it may
    /// answer in time, and if not, the client is told that it is not responding.
    fn fetching(&mut self, fetch: u64, req: ReqId, node: NodeId, now: Time, tail: bool) {
        let f = Fetch {
            client: req,
            node,
            deadline: now + OUTPUT_TIMEOUT,
            tail,
        };
        self.outputs.insert(fetch, f);
    }
}

/// Shortens a command line to about `max` bytes for a listing: the arguments past the budget
/// are dropped and the last kept one is cut (on a character boundary), and a marker argument
/// says how many bytes were left out, so a shortened line never passes for the real one.
pub fn shorten_cmd(cmd: &mut Vec<String>, max: usize) {
    let total: usize = cmd.iter().map(|a| a.len()).sum();
    if total <= max {
        return;
    }
    let mut kept = 0;
    let mut out = Vec::new();
    for a in cmd.iter() {
        if kept + a.len() <= max {
            kept += a.len();
            out.push(a.clone());
            continue;
        }
        let mut cut = max - kept;
        while !a.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut > 0 {
            out.push(a[..cut].to_string());
            kept += cut;
        }
        break;
    }
    out.push(format!(
        "[cosched: command line shortened, {} more bytes; ask for the job by id for all of it]",
        total - kept
    ));
    *cmd = out;
}
