//! The machine manager's records as Slurm's commands show them: [`JobInfo`] into
//! `cosched_slurm::job::JobView`, the status into nodes and partitions, and the
//! system lookups a view needs (user and group names, the local time zone).

use std::collections::HashMap;

use cosched_core::JobId;
use cosched_proto::jobio;
use cosched_proto::proto::{JobInfo, JobState as Cosched, PartitionInfo, StatusInfo};
use cosched_slurm::job::{ArrayTask, JobView};
use cosched_slurm::node::{NodeState, NodeView, PartitionView};
use cosched_slurm::state::{JobState, Phase, Reason, ReasonFacts};
use cosched_slurm::time::Limit;

/// The offset of local time from UTC at `t` (seconds since the epoch), from the C library.
pub fn local_offset(t: i64) -> i64 {
    let t = t as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed struct we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    tm.tm_gmtoff
}

/// A user's name, else the uid as text.
pub fn user_name(uid: u32) -> String {
    cosched_proto::util::account(uid).map_or_else(|| uid.to_string(), |a| a.name)
}

/// A group's name, else the gid as text.
pub fn group_name(gid: u32) -> String {
    cosched_proto::util::group_name(gid).unwrap_or_else(|| gid.to_string())
}

/// The uid of a user name (or of a number).
pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    cosched_proto::util::uid_of_name(name)
}

/// This process's uid (the caller of `--me`, and the owner for sacct's default).
pub fn my_uid() -> u32 {
    cosched_proto::util::euid()
}

/// This host's name (`SLURM_SUBMIT_HOST`, `%N` on the client).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// cosched's state as the phase the Slurm layer maps.
pub fn phase(j: &JobInfo) -> Phase {
    phase_of(j.state)
}

/// [`phase`] of a state (a job's or a step's).
pub fn phase_of(state: Cosched) -> Phase {
    match state {
        Cosched::Queued => Phase::Queued,
        Cosched::Running => Phase::Running,
        Cosched::Suspended => Phase::Suspended,
        s => Phase::Ended(s.outcome().expect("an ended state has an outcome")),
    }
}

/// cosched's state for a phase (the filters sent to the machine manager).
pub fn cosched_state(p: Phase) -> Cosched {
    use cosched_core::Outcome;
    match p {
        Phase::Queued => Cosched::Queued,
        Phase::Running => Cosched::Running,
        Phase::Suspended => Cosched::Suspended,
        Phase::Ended(o) => match o {
            Outcome::Completed => Cosched::Completed,
            Outcome::Failed => Cosched::Failed,
            Outcome::Cancelled => Cosched::Cancelled,
            Outcome::TimedOut => Cosched::TimedOut,
            Outcome::NodeFailed => Cosched::NodeFailed,
            Outcome::Rejected => Cosched::Rejected,
            Outcome::OutOfMemory => Cosched::OutOfMemory,
        },
    }
}

/// Names of users and groups, looked up once each.
#[derive(Default)]
pub struct Names {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl Names {
    pub fn user(&mut self, uid: u32) -> String {
        self.users
            .entry(uid)
            .or_insert_with(|| user_name(uid))
            .clone()
    }
    pub fn group(&mut self, gid: u32) -> String {
        self.groups
            .entry(gid)
            .or_insert_with(|| group_name(gid))
            .clone()
    }
}

/// The node names of the machine, by node id.
pub fn node_name(st: &StatusInfo, id: cosched_core::NodeId) -> String {
    st.nodes
        .iter()
        .find(|n| n.id == id)
        .map_or_else(|| id.to_string(), |n| n.name.clone())
}

/// The first eligible queued job of `jobs` (the one Slurm says waits for resources).
pub fn first_in_line(jobs: &[JobInfo]) -> Option<JobId> {
    jobs.iter()
        .filter(|j| j.state == Cosched::Queued && !j.held && j.reason.is_none())
        .map(JobInfo::id)
        .min()
}

/// A job as Slurm's commands show it. `first` is the first eligible queued job.
pub fn job_view(j: &JobInfo, st: &StatusInfo, first: Option<JobId>, names: &mut Names) -> JobView {
    let r = &j.record;
    let state = JobState::of(phase(j));
    let secs = |us: i64| us.div_euclid(1_000_000);
    let reason = Reason::of(
        state,
        ReasonFacts {
            deferral: j.reason.as_deref(),
            held: j.held,
            first_in_line: first == Some(r.id),
            error: j.error.as_deref(),
            exit_code: r.exit_code,
            started: r.start.is_some(),
            rejected: j.state == Cosched::Rejected,
        },
    );
    let submit = secs(r.submit.as_micros());
    let begin = j.sched.begin_us.map(secs);
    // Eligible once its dependencies hold (a job still waiting on one is not) and its begin
    // time is reached.
    let eligible = match reason {
        Reason::Dependency | Reason::DependencyNeverSatisfied => None,
        _ => Some(begin.map_or(submit, |b| b.max(submit))),
    };
    let nodes: Vec<String> = j.placement.iter().map(|p| node_name(st, p.node)).collect();
    let uid = j.user.unwrap_or(0);
    let gid = j.gid.unwrap_or(0);
    let user = names.user(uid);
    // The signal Slurm reports: cosched ends a job at its limit, or a cancelled running one,
    // with SIGTERM (then SIGKILL after the kill wait).
    let signal = match j.state {
        Cosched::TimedOut => Some(libc::SIGTERM),
        Cosched::Cancelled if r.start.is_some() => Some(libc::SIGTERM),
        _ => None,
    };
    let file = |pattern: &Option<String>| {
        pattern.as_deref().map_or_else(String::new, |p| {
            let node = nodes.first().map_or("%N", String::as_str);
            let path = jobio::expand(p, r.id, j.io.array.as_ref(), 0, node);
            std::path::Path::new(&j.cwd)
                .join(path)
                .display()
                .to_string()
        })
    };
    let pes = st.pes_per_node.max(1);
    let cpus_per_task = match j.tasks {
        Some(t) => t.cpus.max(1),
        None => j.spread.as_ref().map_or(1, |s| s.cpus_per_task.max(1)),
    };
    let stdout = file(&j.io.output);
    let stderr = file(&j.io.error.clone().or_else(|| j.io.output.clone()));
    JobView {
        id: r.id.0,
        array: j.io.array.map(|a| ArrayTask {
            job: a.job.0,
            index: a.index,
            throttle: a.throttle,
        }),
        name: j.name.clone(),
        user,
        uid,
        group: names.group(gid),
        gid,
        partition: j
            .partition
            .clone()
            .unwrap_or_else(|| cosched_slurm::DEFAULT_PARTITION.into()),
        state,
        reason,
        submit,
        eligible,
        start: r.start.map(|t| secs(t.as_micros())),
        end: r.end.map(|t| secs(t.as_micros())),
        run_secs: secs(j.run_us),
        suspended_secs: secs(r.suspended.as_micros()),
        limit: j
            .time_limit_us
            .map_or(Limit::Unlimited, |us| Limit::Secs(secs(us).max(0) as u64)),
        tasks_per_node: match j.tasks {
            Some(t) => t.layout(j.placement.len() as u32),
            None => j.placement.iter().map(|p| p.ranks.len() as u32).collect(),
        },
        nodes,
        ntasks: j.tasks.map_or(r.procs / cpus_per_task, |t| t.count),
        whole_node_cpus: j.tasks.map(|_| r.procs),
        req_nodes: r.procs.div_ceil(pes),
        cpus_per_task,
        exit_code: r.exit_code.map(|c| if signal.is_some() { 0 } else { c }),
        signal,
        work_dir: j.cwd.clone(),
        command: j.cmd.join(" "),
        stdout,
        stderr,
        dependency: (!j.sched.after.is_empty()).then(|| {
            j.sched
                .after
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }),
        held: j.held,
        restarts: j.run.saturating_sub(1),
        batch: j.io.batch,
        step: None,
    }
}

/// The lines of a job's steps, as `sacct` shows them after the allocation's (`alloc`, the
/// job's own view): `N.batch` for a batch script, then its `srun` steps `N.0`, `N.1`, …; a
/// job submitted without a script is its one implicit step, `N.0`, of all its ranks.
pub fn step_views(j: &JobInfo, alloc: &JobView, st: &StatusInfo, now: i64) -> Vec<JobView> {
    let secs = |us: i64| us.div_euclid(1_000_000);
    let mut out = Vec::new();
    if alloc.start.is_some() {
        let whole = |name: &str, step: &str, nodes: Vec<String>, per_node: Vec<u32>| JobView {
            name: name.to_string(),
            step: Some(step.to_string()),
            ntasks: per_node.iter().sum(),
            nodes,
            tasks_per_node: per_node,
            whole_node_cpus: None,
            reason: cosched_slurm::state::Reason::None,
            ..alloc.clone()
        };
        if j.io.batch {
            let first = alloc.nodes.first().cloned().into_iter().collect();
            out.push(whole("batch", "batch", first, vec![1]));
        } else {
            out.push(whole(
                &alloc.name,
                "0",
                alloc.nodes.clone(),
                alloc.tasks_per_node.clone(),
            ));
        }
    }
    for s in &j.steps {
        let start = secs(s.start_us);
        let end = s.end_us.map(secs);
        let state = JobState::of(phase_of(s.state));
        out.push(JobView {
            name: s.name.clone(),
            step: Some(s.id.to_string()),
            state,
            reason: cosched_slurm::state::Reason::None,
            submit: start,
            eligible: Some(start),
            start: Some(start),
            end,
            run_secs: end.unwrap_or(now) - start,
            suspended_secs: 0,
            nodes: s.placement.iter().map(|p| node_name(st, p.node)).collect(),
            tasks_per_node: s.placement.iter().map(|p| p.ranks.len() as u32).collect(),
            ntasks: s.ntasks(),
            whole_node_cpus: None,
            exit_code: s.exit_code,
            signal: None,
            command: s.cmd.join(" "),
            ..alloc.clone()
        });
    }
    out
}

/// All jobs as views (`first` taken from `jobs` themselves).
pub fn job_views(jobs: &[JobInfo], st: &StatusInfo, names: &mut Names) -> Vec<JobView> {
    let first = first_in_line(jobs);
    jobs.iter().map(|j| job_view(j, st, first, names)).collect()
}

/// The machine's nodes and its partitions (without a configuration, one of every node).
pub fn nodes_view(st: &StatusInfo) -> (Vec<PartitionView>, Vec<NodeView>) {
    let parts: Vec<PartitionInfo> = if st.partitions.is_empty() {
        vec![PartitionInfo {
            name: cosched_slurm::DEFAULT_PARTITION.into(),
            nodes: st.nodes.iter().map(|n| n.name.clone()).collect(),
            default: true,
            max_time_us: None,
        }]
    } else {
        st.partitions.clone()
    };
    let pes = st.pes_per_node as usize;
    let nodes: Vec<NodeView> = st
        .nodes
        .iter()
        .map(|n| {
            // PEs of the node that a job holds in some slot of the matrix (allocated, as
            // Slurm counts a gang-suspended job's CPUs).
            let first = n.id.0 as usize * pes;
            let held = (first..first + pes)
                .filter(|&pe| {
                    st.slots
                        .iter()
                        .any(|row| row.get(pe).is_some_and(Option::is_some))
                })
                .count() as u32;
            NodeView {
                name: n.name.clone(),
                state: NodeState::of(&n.state, held, n.pes),
                cpus: n.pes,
                alloc_cpus: held,
                addr: n.addr.clone(),
                partitions: parts
                    .iter()
                    .filter(|p| p.nodes.contains(&n.name))
                    .map(|p| p.name.clone())
                    .collect(),
            }
        })
        .collect();
    let views = parts
        .iter()
        .map(|p| {
            let members: Vec<&NodeView> =
                nodes.iter().filter(|n| p.nodes.contains(&n.name)).collect();
            PartitionView {
                name: p.name.clone(),
                default: p.default,
                up: true,
                max_time_secs: p.max_time_us.map(|us| (us / 1_000_000).max(0) as u64),
                nodes: members.iter().map(|n| n.name.clone()).collect(),
                total_cpus: members.iter().map(|n| n.cpus).sum(),
            }
        })
        .collect();
    (views, nodes)
}
