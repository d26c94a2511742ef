//! Client requests that change state — submit, cancel, suspend and resume (hold and
//! release), a step's start or cancel, an administrator's drain, down or resume of a node,
//! shutdown — take effect only once they are durable: an answer the database does
//! not back would be lost at a restart, and its job's id given again.
//!
//! The core checks such a request and stages it without touching its state: [`Core::on`]
//! returns a [`Write`], the records the change needs in the database. The shell writes them
//! in one transaction (with the request's nonce: see `super::shell`) and answers at once with
//! [`Input::Written`]; only then is the change carried out and the client answered. If the
//! write failed, the client gets the database's error (which names the state directory and
//! what to do) and nothing changed: memory and disk agree, and the machine manager goes on
//! serving reads and takes the next change when the disk takes it. Nothing else reaches the
//! core between the two inputs, so the change is carried out on the very state it was checked
//! against.
//!
//! What is written first is what a restart must find: a new job's record, or a job's record
//! with the change noted (ended cancelled at that instant, held, released). The exact record,
//! with its accounting, is written at the step that carries the change out, as for every
//! record the core changes on its own (starts, ends), which the shell keeps and writes again
//! while the disk refuses it. Job ids are never given twice: an id is answered only once its
//! record is in the database, whose largest id a restarted machine manager continues from.

use cosched_core::{JobId, JobRecord, JobSpec, Outcome, Time};
use cosched_ledger::{Ix, Phase};
use cosched_policy::JobRequest;

use super::core::{Core, Effect, ReqId, Side};
use cosched_proto::proto::*;

/// The records a client's change needs durable before it takes effect.
#[derive(Clone, Debug)]
pub struct Write {
    /// The request that asked for the change; the answer is [`super::core::Input::Written`]
    /// with it.
    pub req: ReqId,
    pub jobs: Vec<JobInfo>,
    /// Administrators' changes to nodes (accounting keeps each, and the state it leaves).
    pub nodes: Vec<NodeChange>,
}

/// A change checked and waiting for its records to be durable.
#[derive(Debug)]
pub(super) enum Staged {
    /// New jobs (an array's tasks in index order), as [`Core::new_jobs`] made them, and
    /// whether they are submitted held (`--hold`).
    Submit(Vec<(JobRequest, Side)>, bool),
    Cancel(Ix),
    /// An allocation relinquished by `salloc` once its command exited with this code.
    Relinquish(Ix, i32),
    /// A hold (`true`, `cosched suspend`) or its release.
    Hold(Ix, bool),
    /// Nodes drained, set down or resumed.
    Nodes(Vec<NodeChange>),
    /// A step of a running allocation, placed, with `srun`'s environment for its ranks.
    Step(Ix, Box<StepInfo>, Vec<(String, String)>),
    /// A running step cancelled (`scancel N.S`, a killed `srun`): allocation and step number.
    StepCancel(Ix, u32),
    Shutdown,
}

/// The error of a user's cancel, as the record keeps it.
pub(super) const CANCELLED_BY_USER: &str = "cancelled by a user";

/// How a request ends a job: its outcome, exit code and error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct End {
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub why: Option<String>,
}

/// A user's cancel.
fn cancelled() -> End {
    End {
        outcome: Outcome::Cancelled,
        exit_code: None,
        why: Some(CANCELLED_BY_USER.into()),
    }
}

/// `salloc`'s end of its allocation: as its command exited, as Slurm records an allocation.
fn relinquished(code: i32) -> End {
    End {
        outcome: if code == 0 {
            Outcome::Completed
        } else {
            Outcome::Failed
        },
        exit_code: Some(code),
        why: (code != 0).then(|| format!("salloc's command exited with code {code}")),
    }
}
/// The error of every live job when the cluster shuts down.
pub(super) const SHUT_DOWN: &str = "the cluster was shut down";

impl Core {
    /// Stages `change`, asked by request `req` at `now`, and returns the records to write.
    pub(super) fn stage(&mut self, now: Time, req: ReqId, change: Staged) -> Write {
        let jobs = match &change {
            Staged::Submit(jobs, hold) => jobs
                .iter()
                .map(|(r, side)| {
                    let record = JobRecord::new(&JobSpec {
                        user: r.user,
                        ..JobSpec::new(r.id.0, r.submit, r.procs, cosched_core::Dur::ZERO)
                    });
                    let mut info = super::view::describe(side, record, JobState::Queued, 0);
                    info.held = *hold;
                    info
                })
                .collect(),
            Staged::Cancel(i) => vec![self.ended_info(*i, now, &cancelled())],
            Staged::Relinquish(i, code) => vec![self.ended_info(*i, now, &relinquished(*code))],
            Staged::Hold(i, hold) => {
                let mut info = self.job_info(*i, now);
                let e = self.ledger.entry(*i);
                info.held = *hold;
                info.state = super::view::job_state(e.phase(), *hold, e.record().outcome);
                vec![info]
            }
            Staged::Nodes(_) => Vec::new(),
            Staged::Step(i, step, _) => {
                let mut info = self.job_info(*i, now);
                info.steps.push((**step).clone());
                vec![info]
            }
            Staged::StepCancel(i, k) => vec![self.step_cancelled_info(*i, *k, now)],
            Staged::Shutdown => self
                .live
                .iter()
                .map(|&i| {
                    let end = End {
                        why: Some(SHUT_DOWN.into()),
                        ..cancelled()
                    };
                    self.ended_info(i, now, &end)
                })
                .collect(),
        };
        let nodes = match &change {
            Staged::Nodes(c) => c.clone(),
            _ => Vec::new(),
        };
        if let Some((old, _)) = self.staged.replace((req, change)) {
            // The driver must answer a write before it passes anything else: refused, so its
            // client is not left waiting.
            self.push(Effect::Reply {
                req: old,
                resp: Response::Error("internal error: the change was not written".into()),
            });
        }
        Write { req, jobs, nodes }
    }

    /// Job `i`'s record as an end at `now` by a request leaves it.
    fn ended_info(&self, i: Ix, now: Time, end: &End) -> JobInfo {
        let mut info = self.job_info(i, now);
        info.record.end = Some(now);
        info.record.outcome = Some(end.outcome);
        info.record.exit_code = end.exit_code;
        info.state = super::view::job_state(Phase::Ended, false, Some(end.outcome));
        info.held = false;
        info.reason = None;
        info.error = end.why.clone();
        info
    }

    /// The records of request `req`'s change are durable (`Ok`): it is carried out and
    /// answered; or they could not be written (`Err`: why, naming the database and what to
    /// do): the client is told, and nothing changed.
    pub(super) fn written(&mut self, now: Time, req: ReqId, result: Result<(), String>) {
        let Some((staged_req, change)) = self.staged.take() else {
            return;
        };
        if staged_req != req {
            self.staged = Some((staged_req, change));
            return;
        }
        let resp = match result {
            Err(why) => Response::Error(format!("{}: {why}", not_done(&change, self))),
            Ok(()) => match change {
                Staged::Submit(jobs, hold) => {
                    let ids: Vec<JobId> = jobs.iter().map(|(r, _)| r.id).collect();
                    match self.add_jobs(jobs) {
                        Some(first) => {
                            if hold {
                                // Held in the instant of its submission: the policy, which
                                // decides once the instant's events are in, never starts it.
                                for id in ids {
                                    if let Some(i) = self.ledger.find(id) {
                                        self.set_held(now, i, true);
                                    }
                                }
                            }
                            Response::Submitted(first)
                        }
                        None => Response::Error("an empty submission".into()),
                    }
                }
                Staged::Cancel(i) => {
                    self.cancel(now, i, CANCELLED_BY_USER);
                    Response::Done
                }
                Staged::Relinquish(i, code) => {
                    self.end_by_request(now, i, relinquished(code));
                    Response::Done
                }
                Staged::Hold(i, hold) => {
                    self.set_held(now, i, hold);
                    Response::Done
                }
                Staged::Nodes(changes) => {
                    for c in changes {
                        self.change_node(now, c);
                    }
                    Response::Done
                }
                Staged::Shutdown => {
                    self.shutdown(now);
                    Response::Done
                }
                Staged::Step(i, step, env) => {
                    let answer = step.clone();
                    self.start_step(i, *step, env);
                    Response::Step(answer)
                }
                Staged::StepCancel(i, k) => {
                    self.cancel_step(i, k);
                    Response::Done
                }
            },
        };
        self.push(Effect::Reply { req, resp });
    }
}

/// What did not happen when a change could not be written.
fn not_done(change: &Staged, core: &Core) -> String {
    let id = |i: &Ix| -> JobId { core.ledger.entry(*i).req.id };
    match change {
        Staged::Submit(..) => "not submitted".into(),
        Staged::Cancel(i) => format!("job {} not cancelled", id(i)),
        Staged::Relinquish(i, _) => format!("allocation {} not relinquished", id(i)),
        Staged::Hold(i, true) => format!("job {} not suspended", id(i)),
        Staged::Hold(i, false) => format!("job {} not resumed", id(i)),
        Staged::Nodes(c) => format!(
            "nodes {} not changed",
            cosched_slurm::hostlist::compress(
                &c.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()
            )
        ),
        Staged::Shutdown => "the cluster was not shut down".into(),
        Staged::Step(i, ..) => format!("no step started in job {}", id(i)),
        Staged::StepCancel(i, k) => format!("step {}.{k} not cancelled", id(i)),
    }
}
