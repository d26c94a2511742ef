//! How jobs end: rank exits, jobs lost with a node, requeues, cancels, and the completing
//! jobs whose PEs are held until their processes are gone.

use super::*;

impl Core {
    /// Ends a live job at `now` (its processes ended, failed, timed out, were cancelled or
    /// lost). The caller delivers [`Event::Ended`] in the right group of the instant.
    pub(crate) fn finish(
        &mut self,
        now: Time,
        i: Ix,
        outcome: Outcome,
        exit_code: Option<i32>,
        why: Option<String>,
    ) {
        self.ledger.end(i, now, outcome, exit_code);
        self.after_end(i, why);
    }

    /// The side of an end: the record is written, and processes that may still run are
    /// killed (forgotten on their nodes once every rank reported).
    pub(super) fn after_end(&mut self, i: Ix, why: Option<String>) {
        if self.side[i].requeue_why.take().is_some() {
            // Ended (cancelled, say) while its requeue waited: it ends instead.
            self.completing.remove(&i);
        }
        self.live.remove(&i);
        self.placed.remove(&i);
        self.end_steps(i);
        // The environment is for launches only, and an ended job has none left: the memory
        // of a long history is not spent on it.
        self.side[i].io.env = None;
        self.ended.push_back((self.last_now, i));
        let id = self.ledger.entry(i).req.id;
        self.pending.retain(|(j, _), _| *j != id);
        self.fences.remove(&id);
        self.mark(i);
        if why.is_some() {
            self.side[i].error = why;
        }
        let s = &self.side[i];
        if s.placement.is_empty() {
            return;
        }
        if s.ranks.values().all(|c| c.is_some()) {
            self.forget(i);
        } else {
            self.signal(i, |s| &mut s.kill);
            self.side[i].forget_pending = true;
        }
    }

    pub(super) fn forget(&mut self, i: Ix) {
        let to: Vec<NodeId> = self.side[i].placement.iter().map(|p| p.node).collect();
        self.side[i].forget_pending = false;
        let id = self.ledger.entry(i).req.id;
        self.send(to, ToNode::Forget { jobs: vec![id] });
    }

    /// What a rank's node has to say of it although it did not fail: the job's record says it
    /// (the first such, naming the rank and its node), unless the job ends with a failure,
    /// whose reason it then gives.
    pub(super) fn rank_warning(&mut self, job: JobId, node: NodeId, rank: u32, warning: String) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        if !self.ledger.entry(i).is_live() || self.side[i].error.is_some() {
            return;
        }
        let on = self
            .nodes
            .get(node.0 as usize)
            .map_or_else(|| node.to_string(), |e| e.row.name.clone());
        self.side[i].error = Some(format!("warning: rank {rank} on node {on}: {warning}"));
    }

    /// A rank of a job exited (or could not be launched).
    pub(crate) fn rank_exit(&mut self, now: Time, job: JobId, node: NodeId, exit: RankExit) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        let s = &mut self.side[i];
        if s.ranks.get(&exit.rank).is_none_or(|c| c.is_some()) {
            return;
        }
        let code = exit.code.unwrap_or(-1);
        s.ranks.insert(exit.rank, Some(code));
        let done = s.ranks.values().all(|c| c.is_some());
        if s.requeue_why.is_some() {
            // Being killed for a requeue: its exits only tell that the processes are gone.
            if done {
                self.release(i);
            }
            return;
        }
        if !self.ledger.entry(i).is_live() {
            // Killed already: its exits only tell that the processes are gone.
            if done && self.side[i].forget_pending {
                self.forget(i);
                self.release(i);
            }
            return;
        }
        self.end_by_rank(now, i, node, exit, done);
    }

    /// A rank of a live job called `MPI_Abort`, heard before its exit: the job fails with the
    /// abort now, so the exits that follow (the rank's own, and the other ranks' failures
    /// when their connections to it die) find it ended and leave its cause alone.
    pub(crate) fn rank_aborted(&mut self, now: Time, job: JobId, node: NodeId, exit: RankExit) {
        let Some(i) = self.ledger.find(job) else {
            return;
        };
        let s = &self.side[i];
        if !s.ranks.contains_key(&exit.rank)
            || s.requeue_why.is_some()
            || !self.ledger.entry(i).is_live()
        {
            return;
        }
        self.end_by_rank(now, i, node, exit, false);
    }

    /// Ends live job `i` as `exit` of a rank on `node` says, if it says the job is over:
    /// the rank failed, or it was the last (`done`) and every rank succeeded.
    fn end_by_rank(&mut self, now: Time, i: Ix, node: NodeId, exit: RankExit, done: bool) {
        let code = exit.code.unwrap_or(-1);
        // The failure names the rank and where it ran, so a user knows whose output to read.
        let on = self
            .nodes
            .get(node.0 as usize)
            .map_or_else(|| node.to_string(), |e| e.row.name.clone());
        let end = if exit.oom {
            let mem = self.side[i].mem.map(|m| format!(" ({})", m.option()));
            Some((
                Outcome::OutOfMemory,
                Some(code),
                Some(format!(
                    "rank {} on node {on} was killed out of memory: the job went over its memory limit{}",
                    exit.rank,
                    mem.unwrap_or_default()
                )),
            ))
        } else if let Some(err) = exit.error {
            Some((
                Outcome::Failed,
                Some(code),
                Some(format!("rank {} on node {on}: {err}", exit.rank)),
            ))
        } else if code != 0 {
            let why = if done {
                format!("rank {} on node {on} exited with code {code}", exit.rank)
            } else {
                format!(
                    "rank {} on node {on} exited with code {code}; the other ranks were killed",
                    exit.rank
                )
            };
            Some((Outcome::Failed, Some(code), Some(why)))
        } else if done {
            Some((Outcome::Completed, Some(0), None))
        } else {
            None
        };
        if let Some((outcome, code, why)) = end {
            self.finish(now, i, outcome, code, why);
            let seq = self.side[i].run_seq;
            self.ended(now, i, EndGroup::Ends(seq));
        }
    }

    /// A job lost with its node: it fails, or starts over when the machine requeues.
    pub(crate) fn lost(&mut self, now: Time, i: Ix, outcome: Outcome, why: String) {
        let id = self.ledger.entry(i).req.id;
        if !self.cfg.requeue {
            self.finish(now, i, outcome, None, Some(why));
            self.ended(now, i, EndGroup::Rest);
            return;
        }
        if self.side[i].requeue_why.is_some() {
            // Lost again (another of its nodes) while its requeue waits: it waits for that
            // node too (see [`crate::nodes`], fencing).
            return;
        }
        self.log(format!("mm: requeueing job {id}: {why}"));
        self.pending.retain(|(j, _), _| *j != id);
        self.fences.remove(&id);
        // Stops and continues of the job in this step go: it is being killed.
        self.unsignal(id);
        if self.cfg.hold_pes_while_completing && !self.side[i].placement.is_empty() {
            // Its ranks on the nodes still up are killed first; it goes back to the queue
            // (and may start again, on these PEs too) once every rank is known gone — its
            // exit reported, or its node back without it (a node declared down is fenced:
            // see [`crate::nodes`]) — so that no two runs of a job overlap.
            if !self.side[i].ranks.values().all(|c| c.is_some()) {
                self.signal(i, |s| &mut s.kill);
                self.side[i].requeue_why = Some(why);
                let until = self.completing_bound(now);
                let group = EndGroup::Requeue;
                self.completing.insert(i, Completing { group, until });
                return;
            }
        }
        self.requeue_now(i, why);
    }

    /// Puts a lost job back in the queue now: what is left of its run is forgotten on its
    /// nodes (which kills it), and the policy hears of its end and its submission again.
    pub(super) fn requeue_now(&mut self, i: Ix, why: String) {
        let now = self.last_now;
        let id = self.ledger.entry(i).req.id;
        self.side[i].requeue_why = None;
        // Its ranks are gone (or given up on): a kill of it still in this step's switch,
        // which goes to the nodes of every signal of the step, would reach its next run if
        // the policy starts it again in this step. The forget below kills what is left.
        self.unsignal(id);
        if !self.side[i].placement.is_empty() {
            self.forget(i);
        }
        self.end_steps(i);
        self.ledger.requeue(i, now);
        self.placed.remove(&i);
        let s = &mut self.side[i];
        s.placement.clear();
        s.ranks.clear();
        s.runs_on.clear();
        s.error = Some(format!("requeued: {why}"));
        self.mark(i);
        let req = self.ledger.entry(i).req.clone();
        self.instant.rest.push(Event::Ended(id));
        self.instant.rest.push(Event::Submitted(req));
    }

    /// A user's cancel: the job ends now, its processes are killed.
    pub(crate) fn cancel(&mut self, now: Time, i: Ix, why: &str) {
        self.end_by_request(
            now,
            i,
            crate::changes::End {
                outcome: Outcome::Cancelled,
                exit_code: None,
                why: Some(why.to_string()),
            },
        );
    }

    /// A request ends the job now, as `end` says (a cancel, salloc's relinquish); its
    /// processes are killed.
    pub(crate) fn end_by_request(&mut self, now: Time, i: Ix, end: crate::changes::End) {
        self.finish(now, i, end.outcome, end.exit_code, end.why);
        if self.deferred.remove(&i) {
            // The policy never saw it.
            return;
        }
        self.ended(now, i, EndGroup::Rest);
    }

    /// Tells the policy that job `i` ended, in `group` of the instant: now if none of its
    /// processes may still run, else once they are gone (see [`Completing`]).
    pub(crate) fn ended(&mut self, now: Time, i: Ix, group: EndGroup) {
        if self.side[i].forget_pending && self.cfg.hold_pes_while_completing {
            // Ranks on a node that is down count as gone: its PEs are out of use until it
            // is back, and it comes back only once it has killed them (fencing).
            self.gone_on_down_nodes(i);
            if self.side[i].ranks.values().all(|c| c.is_some()) {
                self.forget(i);
                self.deliver_end(i, group);
                return;
            }
            let until = self.completing_bound(now);
            self.completing.insert(i, Completing { group, until });
        } else {
            self.deliver_end(i, group);
        }
    }

    /// A completing job's processes are gone (or can be given up on): the policy hears of
    /// its end now.
    pub(crate) fn release(&mut self, i: Ix) {
        if let Some(c) = self.completing.remove(&i) {
            if matches!(c.group, EndGroup::Requeue) {
                let why = self.side[i].requeue_why.take().unwrap_or_default();
                self.requeue_now(i, why);
            } else {
                self.deliver_end(i, c.group);
            }
        }
    }

    /// The ranks of job `i` on nodes that are down count as exited.
    pub(super) fn gone_on_down_nodes(&mut self, i: Ix) {
        let down: Vec<NodeId> = self.side[i]
            .placement
            .iter()
            .map(|p| p.node)
            .filter(|n| !self.nodes.get(n.0 as usize).is_some_and(|e| e.up))
            .collect();
        for n in down {
            self.mark_gone(i, n);
        }
    }

    pub(super) fn deliver_end(&mut self, i: Ix, group: EndGroup) {
        let id = self.ledger.entry(i).req.id;
        match group {
            EndGroup::Caused => self.instant.caused.push(Event::Ended(id)),
            EndGroup::Ends(seq) => self.instant.ends.push((seq, id)),
            EndGroup::Rest | EndGroup::Requeue => self.instant.rest.push(Event::Ended(id)),
        }
    }

    /// How long a killed job's ranks on answering nodes get to report their exits: the kill
    /// wait (after which the nodes SIGKILL), the silence after which a node is not
    /// responding, and a second.
    pub(super) fn completing_bound(&self, now: Time) -> Time {
        now + self.cfg.kill_wait + self.cfg.suspect_after + Dur::from_secs(1)
    }

    /// Whether a rank of job `i` that has not reported its exit is on a node that does not
    /// answer (not responding, or down and not yet known clean).
    pub(super) fn waits_on_silent_node(&self, i: Ix) -> bool {
        let s = &self.side[i];
        s.placement.iter().any(|p| {
            !self.answering(p.node)
                && p.ranks
                    .iter()
                    .any(|(r, _)| s.ranks.get(r).is_some_and(|c| c.is_none()))
        })
    }

    /// Completing jobs past their bound are released (logged: a node did not report),
    /// except those with ranks on a node that does not answer: that node either answers
    /// (and reports, or the bound runs again) or is declared down, and its ranks count as
    /// gone only as fencing says.
    pub(crate) fn release_completing(&mut self, now: Time) {
        let due: Vec<Ix> = self
            .completing
            .iter()
            .filter(|(_, c)| now >= c.until)
            .map(|(i, _)| *i)
            .collect();
        let (waiting, due): (Vec<Ix>, Vec<Ix>) =
            due.into_iter().partition(|&i| self.waits_on_silent_node(i));
        for i in waiting {
            let until = self.completing_bound(now);
            if let Some(c) = self.completing.get_mut(&i) {
                c.until = until;
            }
        }
        for i in due {
            let id = self.ledger.entry(i).req.id;
            self.log(format!(
                "mm: job {id}: not every rank reported its end within the kill wait; its PEs are released"
            ));
            self.release(i);
        }
    }

    /// The ranks of completing jobs on `node` are gone (a new node manager process
    /// registered there: the old one's ranks died with it; or the node came back without
    /// them): a job whose ranks are then all gone is forgotten and released. With
    /// `requeues` false (the node was just declared down), only ended jobs count them gone:
    /// the PEs of a node that is down are out of use anyway, but a job waiting to start
    /// again must not while its previous run may still be running there.
    pub(crate) fn ranks_gone_on(&mut self, node: NodeId, requeues: bool) {
        let hit: Vec<Ix> = self
            .completing
            .iter()
            .filter(|(_, c)| requeues || !matches!(c.group, EndGroup::Requeue))
            .map(|(&i, _)| i)
            .filter(|&i| self.side[i].placement.iter().any(|p| p.node == node))
            .collect();
        for i in hit {
            self.mark_gone(i, node);
            if self.side[i].ranks.values().all(|c| c.is_some()) {
                self.forget(i);
                self.release(i);
            }
        }
    }

    /// Ranks of job `i` on `node` count as exited (code -1 when they had not reported).
    pub(super) fn mark_gone(&mut self, i: Ix, node: NodeId) {
        let s = &mut self.side[i];
        for p in s.placement.iter().filter(|p| p.node == node) {
            for &(r, _) in &p.ranks {
                s.ranks.entry(r).and_modify(|c| {
                    c.get_or_insert(-1);
                });
            }
        }
    }
}
