//! What the passing of time asks of the core: time limits, forgetting ended jobs, resending
//! unacknowledged launches, and the policy's rounds of decisions.

use super::*;

impl Core {
    /// Job `i`'s time limit, if it has one that counts now.
    pub(super) fn limit(&self, i: Ix) -> Option<Dur> {
        if self.side[i].requeue_why.is_some() {
            return None; // being killed for a requeue: its limit starts over with the next run
        }
        self.side[i].time_limit
    }

    pub(super) fn limit_at(&self, i: Ix) -> Option<Time> {
        self.ledger.limit_reached_at(i, self.limit(i)?)
    }

    /// When job `i`'s `--signal` is due: when the time left of its limit, counted as the
    /// limit is (its running time only), is the signal's lead. Never before: a signal comes
    /// within the event loop's lateness after that instant, where Slurm's may come up to a
    /// minute early. `None` once sent in this run, or while its processes are stopped (it
    /// is sent when they continue, if due by then).
    pub(super) fn warn_at(&self, i: Ix) -> Option<Time> {
        let s = &self.side[i];
        let w = s.io.signal.filter(|_| s.warned_run != s.run)?;
        let lead = Dur::from_secs(i64::from(w.before_s));
        self.ledger.limit_reached_at(i, self.limit(i)? - lead)
    }

    /// Jobs whose `--signal` is due get it: with `B:` the batch script's shell alone (not
    /// the commands it runs), else the job's tasks — its running steps' ranks, and its own
    /// ranks when it has no script — as Slurm sends it.
    pub(super) fn warn_signals(&mut self, now: Time) {
        let due: Vec<Ix> = self
            .placed
            .iter()
            .copied()
            .filter(|&i| self.warn_at(i).is_some_and(|at| at <= now))
            .collect();
        for i in due {
            let id = self.ledger.entry(i).req.id;
            let s = &mut self.side[i];
            s.warned_run = s.run;
            let Some(w) = s.io.signal else { continue };
            let (jobs, nodes): (Vec<JobId>, BTreeSet<NodeId>) = if w.script {
                let first = s.placement.first().map(|p| p.node);
                (vec![id], first.into_iter().collect())
            } else {
                let mut jobs = Vec::new();
                let mut nodes = BTreeSet::new();
                if !s.io.batch {
                    jobs.push(id);
                    nodes.extend(s.placement.iter().map(|p| p.node));
                }
                for st in s.steps.iter().filter(|st| !st.state.is_final()) {
                    jobs.push(step_unit(id, st.id));
                    nodes.extend(st.placement.iter().map(|p| p.node));
                }
                (jobs, nodes)
            };
            self.log(format!(
                "mm: job {id} has {}s of its time limit left: signal {} to {}",
                w.before_s,
                w.sig,
                if w.script {
                    "its batch script"
                } else {
                    "its tasks"
                }
            ));
            if !jobs.is_empty() {
                self.send(
                    nodes.into_iter().collect(),
                    ToNode::Signal {
                        jobs,
                        sig: w.sig,
                        leader: w.script,
                    },
                );
            }
        }
    }

    /// How job `i` ends at `now` if it has reached its time limit.
    pub(super) fn limit_outcome(&self, i: Ix, now: Time) -> Option<Outcome> {
        self.ledger.past_limit(i, self.limit(i)?, now)
    }

    /// Heartbeats, failure detection, the restart grace period, unacknowledged launches and
    /// output fetch deadlines.
    pub(super) fn periodic(&mut self, now: Time) {
        if now >= self.next_hb {
            self.heartbeat(now);
        }
        self.resend_launches(now);
        self.release_completing(now);
        if now >= self.next_forget {
            self.forget_ended(now);
        }
        if self.grace_until.is_some_and(|g| now >= g) {
            self.grace_until = None;
            self.grace_over(now);
        }
        self.fences_expired(now);
        let mut expired: Vec<u64> = self
            .outputs
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        expired.sort_unstable();
        for k in expired {
            if let Some(f) = self.outputs.remove(&k) {
                let why = self.unanswered(now, f.node);
                self.push(Effect::Reply {
                    req: f.client,
                    resp: Response::Error(why),
                });
            }
        }
    }

    /// Forgets the jobs that ended more than `keep_jobs` ago: memory
    /// then holds per old job only the ledger's record, its name, class and owner, not its
    /// command line and environment (which a submission from the command line carries
    /// whole). Looked at every quarter of the retention, between 0.2 s and a minute.
    pub(super) fn forget_ended(&mut self, now: Time) {
        let keep = self.cfg.keep_jobs;
        self.next_forget = now
            + Dur::from_micros(keep.as_micros() / 4)
                .clamp(Dur::from_millis(200), Dur::from_secs(60));
        let mut forgotten = 0;
        while let Some(&(end, i)) = self.ended.front()
            && end + keep <= now
        {
            self.ended.pop_front();
            if self.side[i].forget_pending {
                // Processes of it may still run: kept until they are gone.
                self.ended.push_back((now, i));
                continue;
            }
            if self.runs_unwritten.remove(&i) {
                self.dirty.insert(i);
            }
            if self.dirty.contains(&i) {
                // Its last record is not written yet: written first, forgotten next time.
                self.ended.push_front((end, i));
                break;
            }
            let mut info = self.job_info(i, now);
            info.io.env = None;
            let bytes = postcard::experimental::serialized_size(&info).unwrap_or(0);
            let s = &mut self.side[i];
            s.record_bytes = bytes;
            s.forgotten = true;
            s.cmd = Vec::new();
            s.cwd = String::new();
            s.io = JobIo::default();
            s.sched = Schedule::default();
            s.placement = Vec::new();
            s.ranks = BTreeMap::new();
            s.error = None;
            forgotten += 1;
        }
        if forgotten > 0 {
            self.log(format!(
                "mm: forgot {forgotten} jobs ended more than {keep} ago (their records stay in the database; --keep-jobs)"
            ));
        }
    }

    /// Launches a node in the tree has not acknowledged within `suspect_after` are sent
    /// again; after [`LAUNCH_TRIES`] the job fails (or is requeued) with the reason, never
    /// left waiting for processes that do not exist. A node that is not responding is not
    /// counted against: its launch waits in its link like everything else sent to it, and
    /// the node either answers or is declared down.
    pub(super) fn resend_launches(&mut self, now: Time) {
        let due: Vec<((JobId, NodeId), u32)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.sent.is_some_and(|t| now >= t + self.cfg.suspect_after))
            .map(|(k, p)| (*k, p.tries))
            .collect();
        for ((job, node), tries) in due {
            if !self.answering(node) {
                // Counted again from now: the node has not been heard since it was sent.
                if let Some(p) = self.pending.get_mut(&(job, node)) {
                    p.sent = Some(now);
                }
                continue;
            }
            if tries < LAUNCH_TRIES {
                self.log(format!(
                    "mm: node {node} did not acknowledge the launch of job {job}; sending it again"
                ));
                self.send_launch(now, job, node);
            } else if let Some(i) = self.ledger.find(job) {
                self.pending.remove(&(job, node));
                let why =
                    format!("its launch on node {node} was not acknowledged after {tries} tries");
                self.lost(now, i, Outcome::Failed, why);
            }
        }
    }

    /// Sends (again) the launch of `job` to `node`, which must be in the tree.
    pub(crate) fn send_launch(&mut self, now: Time, job: JobId, node: NodeId) {
        let Some(i) = self.ledger.find(job) else {
            self.pending.remove(&(job, node));
            return;
        };
        let stopped = !self.ledger.entry(i).is_running();
        let launch = self.launch_msg(i, stopped);
        if let Some(p) = self.pending.get_mut(&(job, node)) {
            p.sent = Some(now);
            p.tries += 1;
        }
        self.push(Effect::Send {
            to: vec![node],
            msg: ToNode::Launch(launch),
        });
    }

    /// Sends `msg` down the tree to those of `to` that are in it. A node out of the tree
    /// gets nothing: its launches wait in `pending`, its `Forget`s are kept for it, and
    /// signals are replaced by the resynchronisation it gets on joining.
    pub(crate) fn send(&mut self, to: Vec<NodeId>, msg: ToNode) {
        let (in_tree, out): (Vec<NodeId>, Vec<NodeId>) = to
            .into_iter()
            .partition(|n| self.nodes.get(n.0 as usize).is_some_and(|e| e.in_tree));
        if let ToNode::Forget { jobs } = &msg {
            for n in out {
                if let Some(e) = self.nodes.get_mut(n.0 as usize)
                    && e.up
                {
                    e.deferred_forget.extend(jobs.iter().copied());
                }
            }
        }
        if !in_tree.is_empty() {
            self.push(Effect::Send { to: in_tree, msg });
        }
    }

    /// Jobs that reached their time limit end now.
    pub(super) fn time_limits(&mut self, now: Time) {
        let over: Vec<(Ix, Outcome)> = self
            .placed
            .iter()
            .copied()
            .filter_map(|i| Some((i, self.limit_outcome(i, now)?)))
            .collect();
        for (i, outcome) in over {
            let limit = self.side[i].time_limit.unwrap_or(Dur::ZERO);
            self.finish(
                now,
                i,
                outcome,
                None,
                Some(format!("ran for its time limit of {limit}")),
            );
            let seq = self.side[i].run_seq;
            self.ended(now, i, EndGroup::Ends(seq));
        }
    }

    /// The policy's rounds of the instant `now`: observe every event, decide once, apply;
    /// again while the decisions caused further events.
    /// Handles, each at its own instant, the policy's timers before `now` that the machine
    /// manager slept through ([`ROTATION_CATCH_UP`]), as if it had woken for them: its state
    /// is then the one it would have had, before anything that arrived at `now` is taken in.
    pub(super) fn catch_up(&mut self, now: Time) {
        while !self.shutting_down
            && let Some(Reverse((at, _, _))) = self.timers.peek().copied()
            && at < now
            && at > self.last_now
        {
            let at = self.clamp(at);
            self.rounds(at);
            self.flush_switch();
            self.announce(at);
        }
    }

    pub(super) fn rounds(&mut self, now: Time) {
        let mut out = Vec::new();
        loop {
            self.warn_signals(now);
            self.time_limits(now);
            self.release_deferred(now);
            while let Some(Reverse((at, _, token))) = self.timers.peek().copied()
                && at <= now
            {
                self.timers.pop();
                self.instant.timers.push(Event::Timer(token));
            }
            if self.instant.is_empty() {
                return;
            }
            for ev in self.instant.take() {
                self.policy.observe(now, ev);
            }
            self.policy.decide(now, &mut out);
            for d in out.drain(..) {
                self.apply(now, d);
            }
            self.check_policy(now);
        }
    }

    /// A policy that failed decides nothing more: its waiting jobs would wait forever. The
    /// failure is logged once, and each waiting job ends as failed with it as its error, so
    /// `cosched wait` returns and `acct` says why. Running jobs run on to their end.
    pub(super) fn check_policy(&mut self, now: Time) {
        let why = match &self.policy_failed {
            Some(why) => why.clone(),
            None => {
                let Some(why) = self.policy.failure() else {
                    return;
                };
                self.log(format!(
                    "mm: the policy {} failed and decides nothing more: {why}; its waiting jobs end as failed",
                    self.policy.name()
                ));
                self.policy_failed = Some(why.clone());
                why
            }
        };
        let waiting: Vec<Ix> = self
            .live
            .iter()
            .copied()
            .filter(|&i| self.side[i].placement.is_empty() && self.ledger.entry(i).pes().is_empty())
            .collect();
        for i in waiting {
            self.finish(
                now,
                i,
                Outcome::Failed,
                None,
                Some(format!("the policy failed: {why}")),
            );
            self.ended(now, i, EndGroup::Caused);
        }
    }
}
