//! Submissions: a client's new jobs checked (spread, memory) and added once durable.

use super::*;

impl Core {
    /// The jobs a submission by `caller` (or by the user an administrator names) adds, each
    /// with what the policy will be told, checked but not yet added: an array gives one job
    /// per index, their ids consecutive from the next one, the first being the array's id.
    /// [`Core::add_jobs`] adds them once they are durable (see [`crate::changes`]).
    pub(crate) fn new_jobs(
        &self,
        now: Time,
        mut s: SubmitRequest,
        caller: Caller,
    ) -> Result<Vec<(JobRequest, Side)>, String> {
        let owner = match s.user {
            Some(u) if u != caller.uid && !caller.admin => {
                return Err(format!(
                    "permission denied: {} (uid {}) cannot submit a job as uid {u}",
                    cosched_proto::util::user_name(caller.uid),
                    caller.uid
                ));
            }
            Some(u) if u != caller.uid => (u, cosched_proto::util::account(u).map_or(u, |a| a.gid)),
            _ => (caller.uid, caller.gid),
        };
        s.sched.after = self.check_dependencies(&s.sched.after)?;
        if let Some(b) = s.sched.begin_us
            && b <= now.as_micros()
        {
            s.sched.begin_us = None;
        }
        let first = JobId(self.next_job);
        let Some(array) = s.sched.array.take() else {
            return Ok(vec![self.new_job(now, first, s, owner)?]);
        };
        if array.indices.is_empty()
            || array.indices.len() > cosched_proto::start_conditions::MAX_ARRAY_TASKS
        {
            return Err(format!(
                "an array has 1 to {} tasks",
                cosched_proto::start_conditions::MAX_ARRAY_TASKS
            ));
        }
        let mut jobs = Vec::with_capacity(array.indices.len());
        for (k, &index) in array.indices.iter().enumerate() {
            let mut task = s.clone();
            task.io.array = Some(cosched_proto::start_conditions::ArrayTask {
                job: first,
                index,
                throttle: array.throttle,
            });
            jobs.push(self.new_job(now, JobId(first.0 + k as u64), task, owner)?);
        }
        Ok(jobs)
    }

    /// Job `id` of a submission, owned by `(uid, gid)`, checked.
    pub(super) fn new_job(
        &self,
        now: Time,
        id: JobId,
        s: SubmitRequest,
        (uid, gid): (u32, u32),
    ) -> Result<(JobRequest, Side), String> {
        let total = self.shape.total_pes();
        if s.procs == 0 {
            return Err("a job needs at least 1 PE (-n)".into());
        }
        if s.procs > total {
            return Err(format!(
                "job asks for {} PEs but the machine has only {total} ({} nodes × {} PEs); ask for at most -n {total}",
                s.procs, self.cfg.nodes, self.cfg.pes
            ));
        }
        if s.cmd.is_empty() {
            return Err("no command given: put it after `--`".into());
        }
        if let Some(l) = s.time_limit_us {
            check_time_limit(Dur::from_micros(l))?;
        }
        if let Some(m) = s.mem {
            self.check_memory(m, s.procs)?;
        }
        let mut layout = s.layout.clone().unwrap_or_default();
        let time_limit = s.time_limit_us.map(Dur::from_micros);
        let (partition, outside) = self.restriction(&layout, time_limit)?;
        // A job free to use every node any way has no spread: the policies place it as the
        // simulator does.
        let (mut procs, mut tasks) = (s.procs, None);
        if layout.exclusive {
            // Whole nodes: the job holds every PE of them, so nobody else runs there.
            let per = self.shape.pes_per_node();
            let n = crate::partitions::whole_nodes(&layout, s.procs, per, s.io.batch)?;
            let cpus = layout.cpus_per_task.unwrap_or(1).max(1);
            tasks = Some(Tasks {
                count: s.procs / cpus,
                per_node: layout.tasks_per_node,
                cpus,
            });
            procs = n * per;
            layout = NodeLayout {
                nodes: Some(n),
                tasks_per_node: Some(per),
                cpus_per_task: None,
                ..layout
            };
        }
        let spread = if layout.spreads() || !outside.is_empty() {
            Some(Box::new(self.spread_of(&layout, procs, outside)?))
        } else {
            None
        };
        let side = Side {
            name: s.name.unwrap_or_else(|| {
                std::path::Path::new(&s.cmd[0])
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            class: s.class,
            user: Some(uid),
            gid: Some(gid),
            time_limit: s.time_limit_us.map(Dur::from_micros),
            cmd: s.cmd,
            cwd: s.cwd,
            io: s.io,
            sched: s.sched,
            mem: s.mem,
            spread,
            partition: Some(partition),
            tasks,
            placement: Vec::new(),
            ranks: BTreeMap::new(),
            error: None,
            run_seq: 0,
            forget_pending: false,
            run: 0,
            requeue_why: None,
            forgotten: false,
            record_bytes: 0,
            runs_on: BTreeSet::new(),
            runs_at: Time::ZERO,
            steps: Vec::new(),
            warned_run: 0,
        };
        Ok((request_of(&id, now, procs, &side), side))
    }

    /// The policies' spread for a submission's layout: nodes by number, checked against the
    /// machine and the policy. Refused, saying why, when it names a node the machine does not
    /// have, can never be met, or the policy places by its own geometry.
    /// `outside`: the nodes its partition and constraint leave out.
    pub(super) fn spread_of(
        &self,
        l: &NodeLayout,
        procs: u32,
        outside: Vec<NodeId>,
    ) -> Result<Spread, String> {
        let ids = |opt: &str, names: &[String]| -> Result<Vec<NodeId>, String> {
            let mut ids = names
                .iter()
                .map(|name| self.node_named(name).map_err(|e| format!("--{opt}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            ids.sort_unstable();
            ids.dedup();
            Ok(ids)
        };
        let mut excluded = ids("exclude", &l.exclude)?;
        excluded.extend(outside);
        excluded.sort_unstable();
        excluded.dedup();
        let spread = Spread {
            nodes: l.nodes,
            tasks_per_node: l.tasks_per_node,
            required: ids("nodelist", &l.nodelist)?,
            excluded,
            cpus_per_task: l.cpus_per_task.unwrap_or(1),
        };
        if let Some(why) = spread.never(procs, &self.shape) {
            return Err(format!(
                "the job's spread over nodes can never be met: {why} (this machine: {} nodes × {} PEs)",
                self.shape.nodes,
                self.shape.pes_per_node()
            ));
        }
        if !self.policy.places_by_node() {
            return Err(format!(
                "policy {} places jobs by its own geometry, not by node: -N, --ntasks-per-node, \
                 --cpus-per-task, --nodelist, --exclude, --exclusive and a partition or \
                 --constraint that leaves out nodes need fcfs, easy, conservative, prime or \
                 gang; submit with -n alone",
                self.policy.name()
            ));
        }
        Ok(spread)
    }

    /// A job asking more memory of a node than the smallest node has can never run: refused
    /// with the numbers. Nodes not registered yet are not counted (their memory is unknown).
    pub(super) fn check_memory(&self, m: MemLimit, procs: u32) -> Result<(), String> {
        let need = m.most_on_a_node(procs, self.shape.pes_per_node());
        let Some(small) = self
            .nodes
            .iter()
            .filter(|n| !n.removed)
            .filter_map(|n| Some((n.memory?, &n.row.name)))
            .min()
        else {
            return Ok(());
        };
        if need <= small.0 {
            return Ok(());
        }
        let mib = |b: u64| b.div_ceil(1 << 20);
        let most = match m {
            MemLimit::PerNode(_) => format!("--mem={}M", small.0 >> 20),
            MemLimit::PerCpu(_) => format!(
                "--mem-per-cpu={}M",
                (small.0 / u64::from(procs.min(self.shape.pes_per_node()).max(1))) >> 20
            ),
        };
        Err(format!(
            "job asks for {} MiB of memory on a node ({}) but node {} has {} MiB; ask for at most {most}",
            mib(need),
            m.option(),
            small.1,
            small.0 >> 20
        ))
    }

    /// Adds the jobs of a submission ([`Core::new_jobs`]) to the queue, or holds them back
    /// while their conditions do not hold; returns the first id.
    pub(crate) fn add_jobs(&mut self, jobs: Vec<(JobRequest, Side)>) -> Option<JobId> {
        let first = jobs.first().map(|(req, _)| req.id);
        for (req, side) in jobs {
            let i = match self.ledger.add(req.clone()) {
                Ok(i) => i,
                // Ids come from `next_job` alone: a duplicate is a bug, refused by the ledger.
                Err(e) => {
                    self.log(format!("mm: job {} not added: {e}", req.id));
                    continue;
                }
            };
            self.next_job = self.next_job.max(req.id.0 + 1);
            self.side.push(side);
            self.live.insert(i);
            self.mark(i);
            if self.side[i].has_conditions() {
                // Out of the policy's sight until its conditions hold (`release_deferred`).
                self.deferred.insert(i);
                continue;
            }
            self.ledger.submit(i, req.submit);
            self.instant.submitted.push(Event::Submitted(req));
        }
        first
    }
}

/// What the policy is told of a job.
pub(super) fn request_of(id: &JobId, submit: Time, procs: u32, s: &Side) -> JobRequest {
    let mut r = JobRequest::new(*id, submit, procs, s.time_limit.unwrap_or(DEFAULT_ESTIMATE));
    r.class = s.class.clone();
    r.user = s.user;
    r.spread = s.spread.clone();
    r
}

/// Parses `0-3,8` back into a PE set.
pub fn parse_pes(text: &str) -> PeSet {
    let mut pes = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    pes.extend(a..=b);
                }
            }
            None => pes.extend(part.parse::<u32>().ok()),
        }
    }
    PeSet::from_pes(pes)
}
