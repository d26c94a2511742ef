//! The policy's decisions carried out: starting, launching and signalling jobs, and the PMI
//! fences of MPI jobs.

use super::*;

impl Core {
    /// Applies one decision: the ledger says what it means, the core does its side.
    pub(super) fn apply(&mut self, now: Time, d: Decision) {
        if let Decision::SetTimer { at, token } = d {
            // Timers are the driver's, not the lifecycle's.
            self.seq += 1;
            self.timers.push(Reverse((at.max(now), self.seq, token)));
            return;
        }
        let why = match &d {
            Decision::Kill { .. } => Some("killed by the policy".to_string()),
            Decision::Reject { why, .. } => Some(format!("it can never run here: {why}")),
            _ => None,
        };
        match self.ledger.apply(now, d) {
            Ok(change) => self.carry_out(now, change, why),
            // A broken promise is refused and logged, with what the policy can say about the
            // decision (an external policy quotes its reply line); the machine keeps running.
            Err(e) => {
                let job = match e.refusal() {
                    Refusal::Violation { job, .. } => Some(*job),
                    Refusal::DuplicateJob { .. } => None,
                };
                let explain = job.and_then(|j| self.policy.explain(j));
                self.log(format!(
                    "mm: decision refused: {e}{}",
                    explain.map(|x| format!("; {x}")).unwrap_or_default()
                ));
                // The policy believes its decision took effect, so it would never decide about
                // that job again: a job still waiting would wait forever. It ends as failed,
                // with the refusal as its error, and the policy hears of the end.
                if let Some(i) = job.and_then(|j| self.ledger.find(j))
                    && self.live.contains(&i)
                    && self.side[i].placement.is_empty()
                    && self.ledger.entry(i).pes().is_empty()
                {
                    self.finish(
                        now,
                        i,
                        Outcome::Failed,
                        None,
                        Some(format!("the policy broke its contract: {e}")),
                    );
                    self.ended(now, i, EndGroup::Caused);
                }
            }
        }
    }

    /// The machine manager's side of a ledger change.
    pub(crate) fn carry_out(&mut self, now: Time, change: Change, why: Option<String>) {
        match change {
            Change::None => {}
            Change::Runs { job, launch: true } => {
                self.ran(job);
                self.launch(now, job, false);
            }
            Change::Runs { job, launch: false } => {
                self.ran(job);
                self.signal(job, |s| &mut s.cont);
            }
            Change::Placed { job } => self.launch(now, job, true),
            Change::Stops { job } => self.signal(job, |s| &mut s.stop),
            Change::Ends { job } => {
                // A kill or a rejection: ended by the ledger at the decision's time; the
                // processes go and their later exits are ignored.
                self.after_end(job, why);
                self.ended(now, job, EndGroup::Caused);
            }
        }
    }

    pub(super) fn ran(&mut self, i: Ix) {
        self.seq += 1;
        self.side[i].run_seq = self.seq;
    }

    /// Creates a job's processes on the PEs the ledger gave it (stopped for a Place).
    pub(super) fn launch(&mut self, now: Time, i: Ix, stopped: bool) {
        let per = self.shape.pes_per_node();
        let pes = self.ledger.entry(i).pes().clone();
        self.placed.insert(i);
        let s = &mut self.side[i];
        s.placement.clear();
        s.ranks.clear();
        s.run += 1;
        // A rank to every `c` PEs of a node (`--cpus-per-task`; the spread gave each node a
        // multiple of `c`): the first is its own, the others its extra PEs.
        let mut c = s.spread.as_ref().map_or(1, |sp| sp.cpus_per_task.max(1)) as usize;
        // Whole nodes without a script: the job's ranks are its tasks, laid out over its
        // nodes as Slurm's (`layout`, tasks per node); the rest of each node is held, idle.
        let mut layout = None;
        if let Some(t) = s.tasks.filter(|_| !s.io.batch) {
            let nodes: BTreeSet<u32> = pes.iter().map(|pe| pe.0 / per).collect();
            c = t.cpus.max(1) as usize;
            layout = Some(t.layout(nodes.len() as u32));
        }
        let mut rank = 0;
        for pe in pes.iter() {
            let node = NodeId(pe.0 / per);
            if s.placement.last().map(|p| p.node) != Some(node) {
                s.placement.push(Placement {
                    node,
                    ranks: Vec::new(),
                    extra_pes: Vec::new(),
                });
            }
            let k = s.placement.len() - 1;
            let p = s.placement.last_mut().expect("pushed");
            let held = p.ranks.len() + p.extra_pes.len();
            if layout
                .as_ref()
                .is_some_and(|l| held >= l.get(k).copied().unwrap_or(0) as usize * c)
            {
                continue;
            }
            if held.is_multiple_of(c) {
                p.ranks.push((rank, pe.0 % per));
                rank += 1;
            } else {
                p.extra_pes.push((rank - 1, pe.0 % per));
            }
        }
        s.placement.retain(|p| !p.ranks.is_empty());
        s.ranks = crate::steps::expected_ranks(&s.placement, s.io.batch);
        let launch = self.launch_msg(i, stopped);
        let id = launch.job;
        let nodes: Vec<NodeId> = self.side[i].placement.iter().map(|p| p.node).collect();
        // Sent now to the nodes in the tree, on joining to the others; resent until each
        // acknowledges it.
        let mut to = Vec::new();
        for &n in &nodes {
            let in_tree = self.nodes.get(n.0 as usize).is_some_and(|e| e.in_tree);
            let sent = in_tree.then_some(now);
            self.pending.insert(
                (id, n),
                Pending {
                    sent,
                    tries: sent.map_or(0, |_| 1),
                },
            );
            if in_tree {
                to.push(n);
            }
        }
        if !to.is_empty() {
            self.push(Effect::Send {
                to,
                msg: ToNode::Launch(launch),
            });
        }
        self.mark(i);
    }

    pub(crate) fn launch_msg(&self, i: Ix, stopped: bool) -> Launch {
        let s = &self.side[i];
        let e = self.ledger.entry(i);
        let c = s.spread.as_ref().map_or(1, |sp| sp.cpus_per_task.max(1));
        Launch {
            job: e.req.id,
            // Its ranks: one to every `c` PEs, or to each of its tasks on whole nodes.
            size: s.placement.iter().map(|p| p.ranks.len() as u32).sum(),
            cmd: s.cmd.clone(),
            cwd: s.cwd.clone(),
            env: {
                let (nodes, tasks) = cosched_proto::jobio::nodelist_and_tasks(&s.placement, |p| {
                    self.nodes
                        .get(p.node.0 as usize)
                        .map_or_else(|| p.node.to_string(), |n| n.row.name.clone())
                });
                let mut env = vec![
                    ("COSCHED_JOB_NAME".into(), s.name.clone()),
                    ("COSCHED_JOB_NODELIST".into(), nodes.clone()),
                    ("COSCHED_TASKS_PER_NODE".into(), tasks.clone()),
                ];
                let slurm_nodes = crate::deferral::slurm_nodes(
                    &s.placement,
                    s.tasks,
                    self.shape.pes_per_node(),
                    |n| self.node_name(n),
                );
                env.extend(crate::deferral::slurm_env(
                    e.req.id,
                    &s.name,
                    s.tasks.map_or(e.req.procs / c, |t| t.count),
                    &slurm_nodes,
                    s.io.array.as_ref(),
                ));
                if let Some(p) = self.partition_of(i) {
                    env.push(("SLURM_JOB_PARTITION".into(), p));
                }
                env
            },
            io: s.io.clone(),
            stopped,
            uid: s.user,
            gid: s.gid,
            placement: s.placement.clone(),
            run: s.run,
            mem: s.mem,
            within: None,
        }
    }

    /// Node `from` entered fence `seq` of `job` with these puts. Once every node of the
    /// job's placement has, the union of their puts goes down to all of them (gather up,
    /// broadcast down). Fences of jobs that ended, or older than the one gathered, are
    /// ignored.
    pub(super) fn fence(
        &mut self,
        from: NodeId,
        job: JobId,
        seq: u64,
        puts: Vec<(String, String)>,
    ) {
        let Some(nodes) = self.fence_nodes(job) else {
            return;
        };
        if !nodes.contains(&from) {
            return;
        }
        let f = self.fences.entry(job).or_default();
        if seq < f.seq {
            return;
        }
        if seq > f.seq {
            *f = Fence {
                seq,
                ..Fence::default()
            };
        }
        if f.complete {
            let kvs = f.kvs.clone().into_iter().collect();
            self.send(vec![from], ToNode::FenceDone { job, seq, kvs });
            return;
        }
        f.nodes.insert(from);
        f.kvs.extend(puts);
        if f.nodes == nodes {
            f.complete = true;
            let kvs = f.kvs.clone().into_iter().collect();
            self.send(
                nodes.into_iter().collect(),
                ToNode::FenceDone { job, seq, kvs },
            );
        }
    }

    /// The nodes of a live job's or running step's PMI world.
    pub(super) fn fence_nodes(&self, job: JobId) -> Option<BTreeSet<NodeId>> {
        let placement = self.world_placement(job)?;
        Some(placement.iter().map(|p| p.node).collect())
    }

    /// Where the ranks of a live job or running step run.
    pub(super) fn world_placement(&self, job: JobId) -> Option<&[Placement]> {
        let (id, step) = match unit_step(job) {
            Some((id, k)) => (id, Some(k)),
            None => (job, None),
        };
        let i = self.ledger.find(id)?;
        if !self.ledger.entry(i).is_live() {
            return None;
        }
        match step {
            None => Some(&self.side[i].placement),
            Some(k) => {
                let st = self.side[i].steps.iter().find(|s| s.id == k)?;
                (!st.state.is_final()).then_some(&st.placement[..])
            }
        }
    }
}
