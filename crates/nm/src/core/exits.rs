//! Rank exits explained, recorded and reported; output caps; and jobs forgotten once done.

use super::*;

impl NmCore {
    /// A rank's exit as reported: with the reason its MPI gave for it, when there is one.
    pub(crate) fn explained(&self, job: JobId, mut exit: RankExit) -> RankExit {
        let note = self.jobs.get(&job).and_then(|j| j.notes.get(&exit.rank));
        if let Some(note) = note
            && exit.error.is_none()
            && (exit.code != Some(0) || note.code.is_some())
        {
            exit.error = Some(note.why.clone());
            exit.code = note.code.or(exit.code);
        }
        exit
    }

    /// Rank `rank` of `job` called `MPI_Abort` with status `code` and message `msg`: the
    /// abort explains the rank's exit, and the machine manager hears of it now
    /// ([`FromNode::Aborted`]), before the rank is killed or exits, since the other ranks'
    /// failures follow only from that. `killed`: the node manager kills the rank (PMI-1),
    /// whose status then tells only the signal, so its exit is recorded with `code`.
    pub(crate) fn aborted(&mut self, job: JobId, rank: u32, code: i32, msg: &str, killed: bool) {
        let Some(j) = self.jobs.get_mut(&job) else {
            return;
        };
        let why = match msg {
            "" => format!("MPI_Abort with status {code}"),
            m => format!("MPI_Abort with status {code}: {m}"),
        };
        let note = ExitNote {
            why: why.clone(),
            code: killed.then_some(code),
        };
        j.notes.insert(rank, note);
        let exit = RankExit {
            rank,
            code: Some(code),
            error: Some(why.clone()),
            oom: false,
        };
        // The first is the one repeated on rejoining the tree: a later abort here follows it.
        j.aborted.get_or_insert_with(|| exit.clone());
        let run = j.run;
        self.log(Level::Warn, format!("job {job} rank {rank}: {why}"));
        if matches!(self.phase, Phase::Running) {
            self.up(FromNode::Aborted { job, run, exit });
        }
    }

    /// A rank's exit: recorded (and cut to the cap one last time); sent up when the node is
    /// registered. Kept until the machine manager forgets the job: reported again at the next
    /// registration and on joining the tree, so a report lost on the way (no parent yet, a
    /// parent that died) is not lost for good.
    pub(super) fn exited(&mut self, now: Time, job: JobId, launch: u64, exit: RankExit) {
        let exit = self.explained(job, exit);
        let exit = self.world_of_one(job, exit);
        if let Some(exit) = self.hold_for_abort(now, job, launch, exit) {
            self.exit_taken(now, job, launch, exit);
        }
    }

    /// [`NmCore::exited`], once the exit says all it will.
    pub(crate) fn exit_taken(&mut self, now: Time, job: JobId, launch: u64, exit: RankExit) {
        let run = self.record_exit(job, launch, &exit);
        match self.phase {
            Phase::Running => {
                if let Some(run) = run {
                    // Its run here ends with its last rank, not when the machine manager
                    // reads the exit (under `gs`; the report goes up first).
                    let launched = self.launching.as_ref().is_none_or(|ln| ln.l.job != job);
                    if launched && self.jobs.get(&job).is_some_and(NodeJob::all_exited) {
                        self.report_runs(job, false, now);
                    }
                    self.up(FromNode::Exited { job, run, exit });
                }
            }
            Phase::Fencing { .. } => self.fence_progress(now),
            Phase::ShuttingDown { .. } => self.shutdown_progress(),
            Phase::Registering { .. } | Phase::Done => {}
        }
    }

    /// Takes in a rank's exit; `None` when the job or rank is unknown (forgotten already), or
    /// when the exit is of an earlier launch of the job (a requeued job launched here again
    /// while a rank of its previous run was still exiting: that exit is not the new rank's).
    /// Returns the job's run (see [`Launch::run`]) when it took the exit in.
    pub(crate) fn record_exit(&mut self, job: JobId, launch: u64, exit: &RankExit) -> Option<u32> {
        let j = self.jobs.get_mut(&job).filter(|j| j.launch == launch)?;
        let r = j.ranks.get_mut(&exit.rank)?;
        if r.exit.is_some() {
            // Taken in already: an exit is reported once.
            return None;
        }
        r.exit = Some(exit.clone());
        let run = j.run;
        // Its last writes are cut too, not only those a heartbeat saw.
        self.cap_outputs(Some((job, exit.rank)));
        self.nsched.exited(job, exit.rank);
        Some(run)
    }

    /// Keeps the output files of the running ranks (of `only` that rank, when given) within
    /// `--output-cap`: a file past it is cut back to the cap and the notice appended once;
    /// the rank appends (`O_APPEND`), so what it writes later lands after the notice and is
    /// cut at the next check. A fast writer overshoots by what it writes between two
    /// heartbeats.
    pub(super) fn cap_outputs(&mut self, only: Option<(JobId, u32)>) {
        let cap = self.cfg.output_cap;
        let notice = crate::cap_notice(cap).len() as u64;
        let mut checks = Vec::new();
        for (&job, j) in &self.jobs {
            for (&rank, r) in &j.ranks {
                let wanted = match only {
                    Some(o) => o == (job, rank),
                    None => r.exit.is_none(),
                };
                if !wanted {
                    continue;
                }
                for (file, (path, &capped)) in r.files.iter().zip(&r.capped).enumerate() {
                    checks.push(CapOutput {
                        job,
                        rank,
                        file,
                        path: path.clone(),
                        keep: cap + if capped { notice } else { 0 },
                        notice: !capped,
                        must_own: j.must_own,
                    });
                }
            }
        }
        for c in checks {
            self.push(Effect::CapOutput(c));
        }
    }

    /// Sweeps the work directory at most every quarter of the retention (between 0.2 s and a
    /// minute): cheap enough on every heartbeat, prompt enough for a short retention. Only
    /// the node's own job directories go, of jobs it no longer holds, once their last change
    /// (their end, see [`Effect::Forgotten`]) is older than the retention.
    pub(super) fn sweep_if_due(&mut self, now: Time) {
        let keep = self.cfg.keep_jobs;
        let every = Dur(keep.0 / 4)
            .max(Dur::from_millis(200))
            .min(Dur::from_secs(60));
        if self.last_sweep.is_some_and(|t| now.since(t) < every) {
            return;
        }
        self.last_sweep = Some(now);
        self.push(Effect::Sweep { keep });
    }

    /// Drops a job the machine manager has ended; what is left of its processes (a rank's
    /// background children) is terminated with the usual grace.
    pub(crate) fn forget(&mut self, now: Time, job: JobId) {
        self.terminate(now, job);
        self.nsched.forget(job);
        let r = self.gate.forget(now, job);
        self.continue_held(r);
        self.ran.retain(|(j, _), _| *j != job);
        let held = self.jobs.remove(&job).is_some();
        self.push(Effect::Forgotten { job, held });
        self.owners.retain(|_, o| *o != job);
    }
}
