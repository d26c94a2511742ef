//! Jobs held back before the policy sees them: dependencies (`--dependency`), begin times
//! (`--begin`) and the throttle of job arrays (`--array=…%N`).
//!
//! How this maps onto the shared lifecycle: a deferred job is added to the ledger but stays
//! in [`cosched_ledger::Phase::Future`] — exactly where the simulator keeps a trace's job
//! before its submission time — and the policy is told nothing of it. When its conditions
//! hold, the machine manager submits it (ledger `submit`, then [`Event::Submitted`] with
//! the submission time set to that instant, as the simulator submits at the job's time), so
//! the policy's contract is unchanged and sim and MM share one lifecycle. A user's hold on a
//! deferred job is the ledger's hold overlay (allowed on a Future job); the job is handed to
//! the policy held. A job whose dependency can never be satisfied (`afterok` on a job that
//! failed) ends `cancelled` with "dependency never satisfied", as Slurm's
//! DependencyNeverSatisfied, without the policy ever hearing of it.
//!
//! The throttle counts the array's tasks handed to the policy and not ended (waiting or
//! running), so never more than N of them run at once.

use std::collections::BTreeMap;

use cosched_core::{JobId, NodeId, Outcome, Time};
use cosched_ledger::{Ix, Phase};
use cosched_policy::Event;

use super::core::{Core, Side};
use cosched_proto::proto::*;

impl Side {
    /// Whether the job must wait for something besides the policy.
    pub(super) fn has_conditions(&self) -> bool {
        !self.sched.after.is_empty()
            || self.sched.begin_us.is_some()
            || self.io.array.is_some_and(|a| a.throttle.is_some())
    }
}

/// Whether a dependency holds: `Some(true)` satisfied, `Some(false)` never will be, `None`
/// not yet.
fn dependency_state(
    kind: DepKind,
    started: bool,
    ended: Option<(Outcome, Option<i32>)>,
) -> Option<bool> {
    let ok = |o: &(Outcome, Option<i32>)| o.0 == Outcome::Completed && o.1 == Some(0);
    match (kind, ended) {
        (DepKind::After, _) if started => Some(true),
        (_, None) => None,
        (DepKind::After | DepKind::AfterAny, Some(_)) => Some(true),
        (DepKind::AfterOk, Some(o)) => Some(ok(&o)),
        (DepKind::AfterNotOk, Some(o)) => Some(!ok(&o)),
    }
}

impl Core {
    /// The dependencies of a submission, with an array's id standing for all its tasks
    /// (as in Slurm); an unknown job is refused.
    pub(super) fn check_dependencies(
        &self,
        after: &[Dependency],
    ) -> Result<Vec<Dependency>, String> {
        let mut out = Vec::new();
        for d in after {
            let Some(i) = self.ledger.find(d.job) else {
                return Err(format!(
                    "--dependency {d}: there is no job {}; `cosched queue --all` lists the jobs",
                    d.job
                ));
            };
            out.push(*d);
            if self.side[i].io.array.is_some_and(|a| a.job == d.job) {
                let mut next = d.job.0 + 1;
                while let Some(j) = self.ledger.find(JobId(next)) {
                    if self.side[j].io.array.is_none_or(|a| a.job != d.job) {
                        break;
                    }
                    out.push(Dependency {
                        kind: d.kind,
                        job: JobId(next),
                    });
                    next += 1;
                }
            }
        }
        Ok(out)
    }

    /// The earliest begin time after `now` among deferred jobs (a wake-up for the step). One
    /// already past is not: its job is released at the next step unless something else
    /// (a dependency, a throttle) holds it, and then waking for it again would spin.
    pub(super) fn next_begin(&self, now: Time) -> Option<Time> {
        self.deferred
            .iter()
            .filter_map(|&i| self.side[i].sched.begin_us)
            .filter(|&b| b > now.as_micros())
            .min()
            .map(Time::from_micros)
    }

    fn dep_state(&self, d: &Dependency) -> Option<bool> {
        let j = self.ledger.find(d.job)?;
        let e = self.ledger.entry(j);
        let r = e.record();
        let ended = (e.phase() == Phase::Ended)
            .then(|| (r.outcome.unwrap_or(Outcome::Failed), r.exit_code));
        dependency_state(d.kind, r.start.is_some(), ended)
    }

    /// Tasks of each throttled array handed to the policy and not ended.
    fn array_active(&self) -> BTreeMap<JobId, u32> {
        let mut active = BTreeMap::new();
        for &i in &self.live {
            if self.deferred.contains(&i) {
                continue;
            }
            if let Some(a) = self.side[i].io.array.filter(|a| a.throttle.is_some()) {
                *active.entry(a.job).or_insert(0) += 1;
            }
        }
        active
    }

    /// Hands the policy every deferred job whose conditions now hold, in submission order,
    /// and ends those whose dependencies never can be.
    pub(super) fn release_deferred(&mut self, now: Time) {
        if self.deferred.is_empty() {
            return;
        }
        let mut active = self.array_active();
        // In id order: a job depends only on earlier ones, so a chain of never-satisfiable
        // dependencies ends in one pass.
        let waiting: Vec<Ix> = self.deferred.iter().copied().collect();
        for i in waiting {
            let s = &self.side[i];
            let mut never = None;
            let mut pending = false;
            for d in &s.sched.after {
                match self.dep_state(d) {
                    Some(true) => {}
                    Some(false) => {
                        never = Some(*d);
                        break;
                    }
                    None => pending = true,
                }
            }
            if let Some(d) = never {
                let how = self
                    .ledger
                    .find(d.job)
                    .map(|j| self.job_info(j, now).state.as_str())
                    .unwrap_or("unknown");
                self.deferred.remove(&i);
                self.finish(
                    now,
                    i,
                    Outcome::Cancelled,
                    None,
                    Some(format!(
                        "dependency never satisfied: {d} (job {} ended {how})",
                        d.job
                    )),
                );
                continue;
            }
            if pending || s.sched.begin_us.is_some_and(|b| now.as_micros() < b) {
                continue;
            }
            if let Some(a) = s.io.array
                && let Some(limit) = a.throttle
            {
                let n = active.entry(a.job).or_insert(0);
                if *n >= limit {
                    continue;
                }
                *n += 1;
            }
            self.deferred.remove(&i);
            self.ledger.submit(i, now);
            let mut req = self.ledger.entry(i).req.clone();
            // The policy hears of it now, as the simulator submits a job at its time.
            req.submit = now;
            let id = req.id;
            self.push_submitted(Event::Submitted(req));
            if self.ledger.entry(i).held() {
                self.push_rest(Event::Held(id));
            }
            self.mark(i);
        }
    }

    /// Why a live job is not yet the policy's: Slurm's reasons, with the detail.
    pub(super) fn reason(&self, i: Ix, now: Time) -> Option<String> {
        if !self.deferred.contains(&i) {
            return None;
        }
        let s = &self.side[i];
        let waiting: Vec<String> = s
            .sched
            .after
            .iter()
            .filter(|d| self.dep_state(d).is_none())
            .map(|d| d.to_string())
            .collect();
        if !waiting.is_empty() {
            return Some(format!("Dependency ({})", waiting.join(",")));
        }
        if let Some(b) = s.sched.begin_us.filter(|&b| now.as_micros() < b) {
            let secs = (b - now.as_micros()) as f64 / 1e6;
            return Some(format!("BeginTime (in {secs:.0}s)"));
        }
        if let Some(a) = s.io.array
            && let Some(limit) = a.throttle
        {
            return Some(format!("JobArrayTaskLimit (%{limit})"));
        }
        None
    }
}

/// The nodes of `placement` as [`slurm_env`] takes them: each one's name (`name_of`), tasks
/// and PEs. `tasks`: the job's tasks when fewer than its PEs (`--exclusive` gives it whole
/// nodes of `pes_per_node` PEs), laid out over its nodes as Slurm's ([`Tasks::layout`]);
/// otherwise a rank is a task.
pub fn slurm_nodes(
    placement: &[Placement],
    tasks: Option<Tasks>,
    pes_per_node: u32,
    name_of: impl Fn(NodeId) -> String,
) -> Vec<(String, u32, u32)> {
    let layout = tasks.map(|t| t.layout(placement.len() as u32));
    placement
        .iter()
        .enumerate()
        .map(|(k, p)| match &layout {
            Some(l) => (name_of(p.node), l[k], pes_per_node),
            None => (
                name_of(p.node),
                p.ranks.len() as u32,
                p.pes().count() as u32,
            ),
        })
        .collect()
}

/// The job-wide variables a Slurm batch script reads, beside cosched's own: the job's id,
/// name, size and nodes in Slurm's forms (`n[1-4]`, `2(x3),1`: what MPI launchers parse, see
/// `cosched_slurm::env`), and for an array task its array id and index (under both names).
/// `nodes` are its nodes' names with its tasks and PEs on each, `ntasks` its tasks (also
/// before its placement is known).
pub fn slurm_env(
    job: JobId,
    name: &str,
    ntasks: u32,
    nodes: &[(String, u32, u32)],
    array: Option<&ArrayTask>,
) -> Vec<(String, String)> {
    let layout: Vec<(String, u32)> = nodes.iter().map(|(n, t, _)| (n.clone(), *t)).collect();
    let cpus: Vec<u32> = nodes.iter().map(|n| n.2).collect();
    let mut env = cosched_slurm::env::allocation_env(&cosched_slurm::env::Allocation {
        job_id: job.0,
        name,
        array: array.map(|a| (a.job.0, a.index)),
        nodes: &layout,
        cpus: &cpus,
    });
    for (k, v) in &mut env {
        if k == "SLURM_NTASKS" || k == "SLURM_NPROCS" {
            *v = ntasks.to_string();
        }
    }
    if let Some(a) = array {
        env.push(("COSCHED_ARRAY_JOB_ID".into(), a.job.0.to_string()));
        env.push(("COSCHED_ARRAY_TASK_ID".into(), a.index.to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_env_writes_nodes_and_tasks_in_slurms_compressed_forms() {
        let task = ArrayTask {
            job: JobId(4),
            index: 7,
            throttle: None,
        };
        let nodes = [
            ("n0".to_string(), 2, 2),
            ("n1".to_string(), 2, 2),
            ("n2".to_string(), 1, 1),
        ];
        let env = slurm_env(JobId(9), "j", 5, &nodes, Some(&task));
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(var("SLURM_JOB_NODELIST"), Some("n[0-2]"));
        assert_eq!(var("SLURM_NODELIST"), Some("n[0-2]"));
        assert_eq!(var("SLURM_TASKS_PER_NODE"), Some("2(x2),1"));
        assert_eq!(var("SLURM_JOB_NUM_NODES"), Some("3"));
        assert_eq!(var("SLURM_NNODES"), Some("3"));
        assert_eq!(var("SLURM_NTASKS"), Some("5"));
        assert_eq!(var("SLURM_JOB_ID"), Some("9"));
        assert_eq!(var("SLURM_ARRAY_TASK_ID"), Some("7"));
        assert_eq!(var("COSCHED_ARRAY_JOB_ID"), Some("4"));
    }

    #[test]
    fn an_exclusive_jobs_tasks_are_spread_over_its_whole_nodes() {
        let node = |n: u32| Placement {
            node: NodeId(n),
            ranks: vec![(2 * n, 0), (2 * n + 1, 1)],
            extra_pes: Vec::new(),
        };
        let tasks = |count, per_node| Tasks {
            count,
            per_node,
            cpus: 1,
        };
        let name = |n: NodeId| format!("n{}", n.0);
        let nodes = slurm_nodes(&[node(0), node(1)], Some(tasks(3, None)), 2, name);
        assert_eq!(nodes, [("n0".to_string(), 2, 2), ("n1".to_string(), 1, 2)]);
        let nodes = slurm_nodes(&[node(0)], None, 2, name);
        assert_eq!(nodes, [("n0".to_string(), 2, 2)]);
        // --ntasks-per-node: blocks in node order, over whole nodes of 4 PEs.
        let nodes = slurm_nodes(&[node(0), node(1)], Some(tasks(2, Some(1))), 4, name);
        assert_eq!(nodes, [("n0".to_string(), 1, 4), ("n1".to_string(), 1, 4)]);
    }

    #[test]
    fn slurm_env_counts_tasks_and_the_pes_they_hold_apart() {
        // -n 3 -c 2: 6 PEs, two tasks on n0 and one on n1.
        let nodes = [("n0".to_string(), 2, 4), ("n1".to_string(), 1, 2)];
        let env = slurm_env(JobId(9), "j", 3, &nodes, None);
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(var("SLURM_NTASKS"), Some("3"));
        assert_eq!(var("SLURM_TASKS_PER_NODE"), Some("2,1"));
        assert_eq!(var("SLURM_JOB_CPUS_PER_NODE"), Some("4,2"));
    }

    #[test]
    fn dependency_states_follow_slurm() {
        let ok = Some((Outcome::Completed, Some(0)));
        let bad = Some((Outcome::Failed, Some(3)));
        assert_eq!(dependency_state(DepKind::AfterOk, true, None), None);
        assert_eq!(dependency_state(DepKind::AfterOk, true, ok), Some(true));
        assert_eq!(dependency_state(DepKind::AfterOk, true, bad), Some(false));
        assert_eq!(dependency_state(DepKind::AfterNotOk, true, ok), Some(false));
        assert_eq!(dependency_state(DepKind::AfterNotOk, true, bad), Some(true));
        assert_eq!(dependency_state(DepKind::AfterAny, true, bad), Some(true));
        assert_eq!(dependency_state(DepKind::After, true, None), Some(true));
        assert_eq!(dependency_state(DepKind::After, false, None), None);
    }
}
