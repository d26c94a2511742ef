//! Running and stopping jobs: samples for the node's scheduler, its plans carried out, the
//! runs reported up, and the signals that freeze and thaw a job.

use super::*;

impl NmCore {
    /// Asks the shell for what the ranks did, for a tick or a strobe of the node scheme (a
    /// strobe is planned at once when there is no rank here, or when the scheme acts on the
    /// strobe alone: reading `/proc` and the rings at every switch of 1-ms quanta cost `gs`
    /// more CPU than the switch itself).
    pub(super) fn sample(&mut self, now: Time, what: SampleFor) {
        let (pids, jobs) = self.nsched.to_sample();
        if pids.is_empty() || !self.nsched.watches_ranks() {
            let plan = match what {
                SampleFor::Strobe(s) => self.nsched.strobe(now, s, &Samples::default()),
                SampleFor::Tick => return,
            };
            self.carry_out(now, plan);
            return;
        }
        self.sampling = Some(what);
        self.push(Effect::Sample { pids, jobs });
    }

    /// Carries out a plan of the node scheme: rank stops and job stops at once; job continues,
    /// then rank continues, once the jobs it freezes are reported frozen ([`crate::switch`]),
    /// so two jobs never share a PE even for an instant; then tells the machine manager which
    /// jobs now run or stand stopped here, for its accounting.
    pub(super) fn carry_out(&mut self, now: Time, plan: Plan) {
        for (job, ns) in plan.spins {
            self.push(Effect::SetSpin { job, ns });
        }
        for &pid in &plan.stop_ranks {
            self.push(Effect::Signal {
                pgid: pid,
                sig: libc::SIGSTOP,
            });
        }
        let mut freezing = Vec::new();
        for &job in &plan.stop_jobs {
            match self.jobs.get(&job) {
                // A job whose launch is under way is frozen at its end (see `signal`): no
                // freeze to wait for, and its stop is booked when that freeze lands.
                Some(j) if j.owns_cgroup() && self.launch_under_way(job) => {}
                Some(j) if j.owns_cgroup() => freezing.push((job, j.launch)),
                // SIGSTOP: stopped once sent, as far as anything here can tell.
                _ => self.report_runs(job, false, self.clock),
            }
            self.signal(job, true);
        }
        let r = self.gate.switch(
            now,
            &freezing,
            &plan.stop_jobs,
            &plan.stop_ranks,
            plan.cont_jobs,
            plan.cont_ranks,
        );
        self.continue_held(r);
        for (job, runs) in plan.runs {
            if let Some(j) = self.jobs.get(&job) {
                let run = j.run;
                self.runs_up(RunChange {
                    job,
                    run,
                    runs,
                    at_us: now.as_micros(),
                });
            }
        }
    }

    /// Under `gs`, tells the machine manager when a job of the matrix starts or stops
    /// running here (a [`RunChange`]), for its accounting: from its thaw to the moment its
    /// freeze is reported done, not the slot's bounds, so that a job is not booked as running
    /// while the switch's freeze and thaw are under way, nor as stopped while its freeze has
    /// not landed. The other schemes report from their plans ([`Plan::runs`]).
    /// `at`: when the change happened.
    pub(crate) fn report_runs(&mut self, job: JobId, runs: bool, at: Time) {
        if self.nsched.scheme() != cosched_node::Scheme::Gs || !self.nsched.manages(job) {
            return;
        }
        let Some(j) = self.jobs.get(&job) else {
            return;
        };
        // Its run here is its processes' life: a rotation that switches its cgroup before
        // the first rank has started, or a switch booked after the last one exited, says
        // nothing of them.
        let Some(began) = j.began.filter(|_| !(runs && j.all_exited())) else {
            return;
        };
        let (run, held) = (j.run, j.held);
        // The first report of a run starts with its processes: they ran from the first
        // rank's start (until the launch's freeze landed, for a job launched stopped), which
        // may be long before the node learnt the job is in the matrix.
        if !self.ran.contains_key(&(job, run)) {
            // (A rank stopped by a signal as it started never ran.)
            let before = (held != Some(began))
                .then_some((true, began))
                .into_iter()
                .chain(held.map(|h| (false, h)));
            for (r, t) in before {
                self.runs_up(RunChange {
                    job,
                    run,
                    runs: r,
                    at_us: t.as_micros(),
                });
            }
            self.ran.insert((job, run), held.is_none());
        }
        // Keyed by run: a requeued job's new run reports afresh.
        if self.ran.insert((job, run), runs) != Some(runs) {
            self.runs_up(RunChange {
                job,
                run,
                runs,
                at_us: at.as_micros(),
            });
        }
    }

    /// Continues what a switch held back: jobs, then ranks.
    pub(super) fn continue_held(&mut self, r: Option<Release>) {
        let Some(Release { jobs, ranks }) = r else {
            return;
        };
        let thaw_only = self.nsched.scheme() == cosched_node::Scheme::Fcs;
        for job in jobs {
            match self.jobs.get(&job) {
                // FCS continues the chosen ranks one by one (below); the job's freezer must
                // let them.
                Some(j) if thaw_only => {
                    if j.owns_cgroup() {
                        let launch = j.launch;
                        if let Some(j) = self.jobs.get_mut(&job) {
                            j.stopped = false;
                        }
                        self.release_steps(job);
                        self.push(Effect::Cgroup {
                            job,
                            launch,
                            op: CgroupOp::Thaw,
                        });
                    }
                }
                _ => self.signal(job, false),
            }
            self.report_runs(job, true, self.clock);
        }
        for pid in ranks {
            self.push(Effect::Signal {
                pgid: pid,
                sig: libc::SIGCONT,
            });
        }
    }

    /// Stops or continues a job whole: its cgroup's freezer (which stops every process of the
    /// job, `setsid` ones included), else its running ranks' process groups.
    pub(crate) fn signal(&mut self, job: JobId, stop: bool) {
        let Some(j) = self.jobs.get_mut(&job) else {
            return;
        };
        j.stopped = stop;
        if !stop {
            self.release_steps(job);
        }
        let j = &self.jobs[&job];
        if j.owns_cgroup() {
            if self.launch_under_way(job) {
                // A rank that joins a frozen cgroup freezes before its exec, and its spawn
                // with it: the launch's end freezes the job if it is to stand stopped then.
                return;
            }
            let (launch, op) = (
                j.launch,
                if stop {
                    CgroupOp::Freeze
                } else {
                    CgroupOp::Thaw
                },
            );
            self.push(Effect::Cgroup { job, launch, op });
            return;
        }
        let sig = if stop { libc::SIGSTOP } else { libc::SIGCONT };
        // Its steps' ranks too: without a cgroup nothing else holds them together.
        let groups: Vec<i32> = self
            .jobs
            .iter()
            .filter(|&(&id, j)| id == job || j.within == Some(job))
            .flat_map(|(_, j)| j.ranks.values())
            .filter(|r| r.exit.is_none())
            .map(|r| r.pgid)
            .filter(|&g| g > 0)
            .collect();
        for pgid in groups {
            self.push(Effect::Signal { pgid, sig });
        }
    }
}
