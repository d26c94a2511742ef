//! Recovery: the core rebuilt from what its database held when the machine manager starts.

use super::*;

impl Core {
    /// Rebuilds the state a database holds: jobs found running are announced to the policy
    /// first (the "hello"), then the queue; every node is down until it registers again.
    pub(super) fn recover(
        &mut self,
        now: Time,
        table: NodeTable,
        r: Recovered,
    ) -> Result<(), String> {
        let recovered_any = !r.jobs.is_empty() || table.known > 0;
        // PEs are numbered node by node: with another count per node, a running job's PEs
        // would name other cores.
        let reshaped = table
            .changed
            .iter()
            .any(|c| (c.id.0 as usize) < table.known);
        let placed: Vec<JobId> = r
            .jobs
            .iter()
            .filter(|j| !j.state.is_final() && !j.placement.is_empty())
            .map(JobInfo::id)
            .collect();
        if reshaped && !placed.is_empty() {
            return Err(format!(
                "the nodes' PEs changed to {} while jobs {placed:?} hold PEs numbered for the old count; start with the old count (--pes, or `cores` in the configuration), end those jobs, then change it",
                self.cfg.pes
            ));
        }
        for row in table.changed {
            self.push(Effect::PersistNode(row));
        }
        for row in table.rows {
            let id = row.id;
            let mut e = NodeEntry::known(row, now);
            // A node new to the database has nothing to come back with.
            e.awaiting = (id.0 as usize) < table.known;
            e.removed = table.removed.contains(&id);
            e.admin = r.admin.get(&id).cloned();
            self.nodes.push(e);
        }
        if !table.removed.is_empty() {
            let names: Vec<&str> = table
                .removed
                .iter()
                .map(|n| self.nodes[n.0 as usize].row.name.as_str())
                .collect();
            self.log(format!(
                "mm: nodes {} are no longer configured: removed (their jobs' records stay)",
                cosched_slurm::hostlist::compress(&names)
            ));
        }
        for info in r.jobs {
            self.next_job = self.next_job.max(info.id().0 + 1);
            let side = Side {
                name: info.name.clone(),
                class: info.class.clone(),
                user: info.user,
                gid: info.gid,
                time_limit: info.time_limit_us.map(Dur::from_micros),
                cmd: info.cmd.clone(),
                cwd: info.cwd.clone(),
                io: info.io.clone(),
                sched: info.sched.clone(),
                mem: info.mem,
                spread: info.spread.clone(),
                partition: info.partition.clone(),
                tasks: info.tasks,
                placement: info.placement.clone(),
                ranks: crate::steps::expected_ranks(&info.placement, info.io.batch),
                error: info.error.clone(),
                run_seq: 0,
                forget_pending: false,
                run: info.run,
                requeue_why: None,
                forgotten: false,
                record_bytes: 0,
                runs_on: BTreeSet::new(),
                runs_at: Time::ZERO,
                steps: info.steps.clone(),
                warned_run: 0,
            };
            let req = request_of(&info.id(), info.record.submit, info.procs(), &side);
            let i = self.ledger.add(req.clone()).map_err(|e| e.to_string())?;
            self.side.push(side);
            let record = info.record.clone();
            if info.state.is_final() {
                let end = record.end.unwrap_or(record.submit);
                self.ledger.adopt_ended(i, record);
                self.ended.push_back((end, i));
                continue;
            }
            self.live.insert(i);
            if info.placement.is_empty() && self.side[i].has_conditions() {
                // Given to the policy again once its conditions hold (met already, for one
                // released before the restart: then at the first step).
                self.deferred.insert(i);
                if info.held {
                    self.ledger.hold(i, now);
                }
            } else if info.placement.is_empty() {
                self.ledger.submit(i, now);
                if info.held {
                    self.ledger.hold(i, now);
                }
                self.instant.submitted.push(Event::Submitted(req));
                if info.held {
                    self.instant.rest.push(Event::Held(info.id()));
                }
            } else {
                self.placed.insert(i);
                let pes = record.pes.clone();
                // A held job is one the policy runs and a user stopped: adopted running,
                // then held again (its processes are stopped already).
                let running = info.state == JobState::Running || info.held;
                let since = record.start.unwrap_or(record.submit);
                // Counted on from the instant the record was written, in the state it says:
                // a live record's run and stopped time add up to its time since its start
                // then (`job_info`), so the time this machine manager was away is booked once,
                // to the job's run or to its stop, not left out of both (an ended job's run
                // is its time from start to end less its stops: every job would have been
                // counted as running for it). The nodes' reports from then on carry it on.
                let ran = Dur::from_micros(info.run_us);
                let written = record
                    .start
                    .map_or(now, |s| (s + ran + record.suspended).min(now));
                self.ledger
                    .adopt(i, pes.clone(), running, written, ran, record);
                self.side[i].runs_at = written;
                self.instant.hello.push(Event::Running {
                    job: req,
                    pes,
                    since,
                });
                if info.held {
                    self.ledger.hold(i, now);
                    self.instant.rest.push(Event::Held(info.id()));
                }
            }
        }
        // Forgotten in the order of their ends (the first step forgets those long ended).
        self.ended.make_contiguous().sort_by_key(|&(t, i)| (t, i));
        if recovered_any {
            // A node notices the restart within `suspect_after` at worst (its own silence
            // timer), then has `down_after` like any silent node.
            self.grace_until = Some(now + self.cfg.suspect_after + self.cfg.down_after);
            self.log(format!(
                "mm: recovered {} jobs and {} nodes from the database",
                self.side.len(),
                self.nodes.len()
            ));
        }
        // Every node is down until it registers (again).
        for n in 0..self.cfg.nodes {
            self.ledger.node_down(NodeId(n));
            self.instant.rest.push(Event::NodeDown(NodeId(n)));
        }
        // The policy hears all this at the first step.
        Ok(())
    }
}
