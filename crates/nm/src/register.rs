//! Registration and the tree, as the core decides them: what a registration reports (every
//! job held, running or exited), retries while the machine manager does not answer, its
//! answer (accepted, fenced: see [`super::kill`], refused), the silence after which the node
//! registers again, and joining the tree (where the exits held meanwhile are sent again).

use cosched_core::{Dur, Time};

use super::core::{Effect, Level, NmCore, Phase};
use cosched_proto::proto::*;

/// Pause between two registration attempts the machine manager did not answer.
pub const REGISTER_RETRY: Dur = Dur::from_millis(100);

impl NmCore {
    /// The node is in the tree of `epoch`: tells the machine manager (which sends it nothing
    /// before), then repeats every exit it holds, since those sent while it had no parent
    /// were dropped on the way, and its unanswered fences and name requests.
    pub(super) fn joined(&mut self, epoch: u64) {
        let incarnation = self.cfg.incarnation;
        self.up(FromNode::Joined { incarnation, epoch });
        let mut ups = Vec::new();
        for (&job, j) in &self.jobs {
            // A fence answer may have been lost with the old parent: ask again (the machine
            // manager answers a completed fence again).
            if let Some((seq, puts)) = j.pmi.pending_fence() {
                ups.push(FromNode::Fence { job, seq, puts });
            }
            // Before the exits: the other ranks' failures followed the abort.
            if let Some(exit) = &j.aborted {
                ups.push(FromNode::Aborted {
                    job,
                    run: j.run,
                    exit: exit.clone(),
                });
            }
            for r in j.ranks.values() {
                if let Some(exit) = &r.exit {
                    ups.push(FromNode::Exited {
                        job,
                        run: j.run,
                        exit: exit.clone(),
                    });
                }
            }
        }
        // So may a name service's answer: the rank still waits for it.
        ups.extend(self.names_pending());
        for m in ups {
            self.up(m);
        }
    }

    /// What the node holds, as a registration reports it: every job with its ranks, running
    /// or exited with their status, and its first abort notice (a machine manager that
    /// restarted while the rank aborted never heard it).
    fn held(&self) -> Vec<HeldJob> {
        self.jobs
            .iter()
            .map(|(id, j)| HeldJob {
                job: *id,
                run: j.run,
                ranks: j
                    .ranks
                    .iter()
                    .map(|(r, s)| {
                        s.exit.clone().unwrap_or(RankExit {
                            rank: *r,
                            code: None,
                            error: None,
                            oom: false,
                        })
                    })
                    .collect(),
                aborted: j.aborted.clone(),
            })
            .collect()
    }

    /// Registers (again) with the machine manager with everything the node holds, retrying
    /// until it answers: after an MM restart this is how the node comes back with its jobs.
    /// Rank exits keep being taken in between attempts, so each attempt reports the node's
    /// state as it is then.
    pub(super) fn register_again(&mut self, now: Time) {
        self.phase = Phase::Registering {
            due: Some(now),
            warned: false,
        };
        self.sampling = None;
        self.next_tick = None;
        self.attempt();
    }

    pub(super) fn attempt(&mut self) {
        if let Phase::Registering { due, .. } = &mut self.phase {
            *due = None;
        }
        let reg = Register {
            version: Version::ours(),
            name: self.cfg.name.clone(),
            pes: self.cfg.pes,
            addr: self.cfg.addr.clone(),
            incarnation: self.cfg.incarnation,
            jobs: self.held(),
            memory: self.cfg.memory,
        };
        self.push(Effect::Register(reg));
    }

    pub(super) fn registration(&mut self, now: Time, answer: Result<RegisterReply, String>) {
        let Phase::Registering { warned, .. } = self.phase else {
            return;
        };
        match answer {
            Ok(RegisterReply::Accepted {
                node,
                heartbeat_us,
                suspect_after_us,
                down_after_us,
                kill_wait_us,
                drop_jobs,
                epoch,
            }) => {
                self.set_kill_wait(kill_wait_us);
                self.membership = epoch;
                for job in drop_jobs {
                    self.forget(now, job);
                }
                self.id = Some(node);
                self.silence = silence(heartbeat_us, suspect_after_us);
                self.down_after = Dur(down_after_us.max(0));
                self.last_heard = now;
                self.phase = Phase::Running;
                self.push(Effect::Accepted { node });
            }
            Ok(RegisterReply::Fence { jobs, kill_wait_us }) => {
                self.set_kill_wait(kill_wait_us);
                self.fence(now, jobs);
            }
            // The shell takes the new key itself: to the core it is a registration to retry.
            Ok(RegisterReply::NewKey { .. }) => {
                let again = "the machine manager sent the cluster's new key".to_string();
                self.registration(now, Err(again));
            }
            Ok(RegisterReply::Rejected(why)) => {
                self.phase = Phase::Done;
                self.push(Effect::Rejected(why));
            }
            Err(e) => {
                if !warned {
                    let mm = self.cfg.mm.clone();
                    self.log(
                        Level::Warn,
                        format!("cannot register with {mm} ({e}); retrying"),
                    );
                }
                self.phase = Phase::Registering {
                    due: Some(now + REGISTER_RETRY),
                    warned: true,
                };
            }
        }
    }

    pub(super) fn set_kill_wait(&mut self, us: i64) {
        let most = cosched_proto::proto::MAX_KILL_WAIT.as_micros();
        self.kill_wait = Dur(us.clamp(0, most));
    }
}

/// How long a registered node may hear nothing before it registers again: as long as the
/// machine manager waits before it takes the node for not responding, and at least four
/// heartbeats.
pub(super) fn silence(heartbeat_us: i64, suspect_after_us: i64) -> Dur {
    let heartbeat = Dur(heartbeat_us.max(1_000));
    let suspect = Dur(suspect_after_us.max(0));
    (Dur(heartbeat.0 * 4) + Dur::from_millis(200)).max(suspect)
}
