//! Killing, as the core decides it: a killed job's grace, a fenced node's kills, shutting
//! down; and the signal a job asked for ahead of its time limit.
//!
//! A job is killed as Slurm kills one: SIGTERM (and SIGCONT, so a stopped rank can act on it)
//! to every process now, SIGKILL to whatever is left `kill_wait` later — even if the job is
//! forgotten meanwhile. In a cgroup, "every process" is the cgroup's (thawed first), and
//! the SIGKILL is `cgroup.kill`, at once when the shell reports the cgroup empty. Without
//! one, it is the process groups of the job's ranks, exited ones included (a rank that
//! exited may have left background children in its group); a group whose number a new rank
//! of another job got meanwhile is spared.

use cosched_core::{Dur, JobId, Time};

use super::core::{CgroupOp, Effect, Level, NmCore, Phase};

/// Longest grace the ranks get when the node manager shuts down: `cluster down` kills
/// daemons still alive after 3 s, and the ranks die with the node manager anyway
/// (`PR_SET_PDEATHSIG`).
pub const SHUTDOWN_GRACE: Dur = Dur::from_secs(2);

/// How much longer than the kill wait a fenced node waits for its ranks to exit before it
/// registers again, holding those left.
pub const FENCE_MARGIN: Dur = Dur::from_secs(5);

/// A SIGKILL due at the end of a grace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingKill {
    pub(super) at: Time,
    pub(super) job: JobId,
    pub(super) target: Target,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The cgroup of this launch of the job.
    Cgroup(u64),
    /// These process groups.
    Groups(Vec<i32>),
}

impl NmCore {
    /// The process groups of a job's ranks, exited ones included.
    fn groups(&self, job: JobId) -> Vec<i32> {
        self.jobs
            .get(&job)
            .map(|j| {
                j.ranks
                    .values()
                    .map(|r| r.pgid)
                    .filter(|&g| g > 0)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Starts killing a job (see the module documentation).
    pub(super) fn terminate(&mut self, now: Time, job: JobId) {
        self.kill_set_aside(job);
        let at = now + self.kill_wait;
        let steps: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.within == Some(job) && !j.cgroup)
            .map(|(&id, _)| id)
            .collect();
        // Steps outside a cgroup are not killed with their allocation's: each on its own.
        for step in steps {
            self.terminate(now, step);
        }
        if let Some(j) = self.jobs.get(&job).filter(|j| j.owns_cgroup()) {
            let launch = j.launch;
            self.push(Effect::Cgroup {
                job,
                launch,
                op: CgroupOp::Terminate {
                    grace: self.kill_wait,
                },
            });
            self.kills.push(PendingKill {
                at,
                job,
                target: Target::Cgroup(launch),
            });
            return;
        }
        let groups = self.groups(job);
        if groups.is_empty() {
            return;
        }
        for &pgid in &groups {
            self.push(Effect::Signal {
                pgid,
                sig: libc::SIGTERM,
            });
            self.push(Effect::Signal {
                pgid,
                sig: libc::SIGCONT,
            });
        }
        self.kills.push(PendingKill {
            at,
            job,
            target: Target::Groups(groups),
        });
    }

    /// A machine manager's [`ToNode::Signal`](cosched_proto::proto::ToNode::Signal): `sig`
    /// to the running ranks of `jobs` here, each rank's process group or, with `leader`,
    /// the rank's own process (a rank leads its group: its pid is the group's number).
    pub(super) fn send_signal(&mut self, jobs: &[JobId], sig: i32, leader: bool) {
        let targets: Vec<i32> = jobs
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .flat_map(|j| j.ranks.values())
            .filter(|r| r.exit.is_none() && r.pgid > 0)
            .map(|r| r.pgid)
            .collect();
        for id in targets {
            self.push(if leader {
                Effect::SignalProcess { pid: id, sig }
            } else {
                Effect::Signal { pgid: id, sig }
            });
        }
    }

    /// Carries out the SIGKILLs whose grace is over.
    pub(super) fn kills_due(&mut self, now: Time) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.kills)
            .into_iter()
            .partition(|k| k.at <= now);
        self.kills = later;
        for k in due {
            self.kill(k);
        }
    }

    fn kill(&mut self, k: PendingKill) {
        match k.target {
            Target::Cgroup(launch) => self.push(Effect::Cgroup {
                job: k.job,
                launch,
                op: CgroupOp::Kill,
            }),
            Target::Groups(groups) => {
                for pgid in groups {
                    if self.owners.get(&pgid).is_none_or(|&o| o == k.job) {
                        self.push(Effect::Signal {
                            pgid,
                            sig: libc::SIGKILL,
                        });
                    }
                }
            }
        }
    }

    /// Everything in a cgroup being killed exited on SIGTERM: it is removed now rather than
    /// at the end of the grace.
    pub(super) fn cgroup_empty(&mut self, job: JobId, launch: u64) {
        let target = Target::Cgroup(launch);
        if let Some(i) = self
            .kills
            .iter()
            .position(|k| k.job == job && k.target == target)
        {
            let k = self.kills.remove(i);
            self.kill(k);
        }
    }

    /// Whether any rank of these jobs (of every job, when `None`) still runs.
    fn running(&self, jobs: Option<&[JobId]>) -> bool {
        self.jobs
            .iter()
            .filter(|(id, _)| jobs.is_none_or(|js| js.contains(id)))
            .any(|(_, j)| j.ranks.values().any(|r| r.pgid > 0 && r.exit.is_none()))
    }

    /// The machine manager declared this node down while it ran `jobs` (its manager was
    /// stopped, or cut off) and has ended or requeued them since: they are killed as any
    /// killed job is, and forgotten once every rank has exited, so that the next
    /// registration reports them gone. Ranks that outlive the kill wait and a margin stay
    /// held (the registration reports them, and the machine manager asks again).
    pub(super) fn fence(&mut self, now: Time, jobs: Vec<JobId>) {
        self.log(
            Level::Warn,
            format!(
                "declared down while running jobs {jobs:?}, which the machine manager has ended or requeued since: killing them before registering again"
            ),
        );
        for &job in &jobs {
            self.terminate(now, job);
        }
        let until = now + self.kill_wait + FENCE_MARGIN;
        self.phase = Phase::Fencing { jobs, until };
        self.fence_progress(now);
    }

    /// A fenced job's rank exited: once none runs, the fence is over.
    pub(super) fn fence_progress(&mut self, now: Time) {
        if let Phase::Fencing { jobs, .. } = &self.phase
            && !self.running(Some(jobs))
        {
            self.fenced(now);
        }
    }

    /// The fence is over (its ranks are gone, or its time is): what is gone is forgotten,
    /// and the node registers again.
    pub(super) fn fenced(&mut self, now: Time) {
        let Phase::Fencing { jobs, .. } = std::mem::replace(&mut self.phase, Phase::Done) else {
            return;
        };
        for job in jobs {
            let gone = self
                .jobs
                .get(&job)
                .is_some_and(|j| j.ranks.values().all(|r| r.pgid == 0 || r.exit.is_some()));
            if gone {
                self.forget(now, job);
            } else {
                self.log(
                    Level::Warn,
                    format!(
                        "job {job} still has ranks running after its kill; the machine manager will ask again"
                    ),
                );
            }
        }
        self.register_again(now);
    }

    /// Before the node manager exits: every job gets SIGTERM, the ranks get up to
    /// [`SHUTDOWN_GRACE`] (or `kill_wait` if shorter) to exit, then every group gets SIGKILL
    /// and every job cgroup is killed.
    pub(super) fn shut_down(&mut self, now: Time) {
        let cgroups: Vec<(JobId, u64)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.owns_cgroup())
            .map(|(&id, j)| (id, j.launch))
            .collect();
        for (job, launch) in cgroups {
            for op in [CgroupOp::Thaw, CgroupOp::Signal(libc::SIGTERM)] {
                self.push(Effect::Cgroup { job, launch, op });
            }
        }
        let jobs: Vec<JobId> = self.jobs.keys().copied().collect();
        let mut groups = Vec::new();
        for job in jobs {
            for pgid in self.groups(job) {
                groups.push(pgid);
                for sig in [libc::SIGTERM, libc::SIGCONT] {
                    self.push(Effect::Signal { pgid, sig });
                }
            }
        }
        let until = now + self.kill_wait.min(SHUTDOWN_GRACE);
        self.phase = Phase::ShuttingDown { until, groups };
        self.shutdown_progress();
    }

    /// A rank exited while shutting down: once none runs, the node manager goes.
    pub(super) fn shutdown_progress(&mut self) {
        if matches!(self.phase, Phase::ShuttingDown { .. }) && !self.running(None) {
            self.shut();
        }
    }

    /// The end: SIGKILL to every group, the shell clears the cgroups and staged copies.
    pub(super) fn shut(&mut self) {
        let Phase::ShuttingDown { groups, .. } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        for pgid in groups {
            self.push(Effect::Signal {
                pgid,
                sig: libc::SIGKILL,
            });
        }
        self.jobs.clear();
        self.kills.clear();
        self.push(Effect::Exit);
    }
}
