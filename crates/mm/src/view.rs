//! What clients see: a job's record ([`JobInfo`], built from the ledger's entry and the side
//! table) and the machine's status (nodes, the Ousterhout matrix, what runs where).

use cosched_core::{JobId, JobRecord, NodeId, Outcome, Time};
use cosched_ledger::{Ix, Phase};

use super::core::{Core, Side};
use cosched_proto::proto::*;

/// The state a ledger entry shows.
pub fn job_state(phase: Phase, held: bool, outcome: Option<Outcome>) -> JobState {
    match (phase, outcome) {
        (Phase::Ended, Some(o)) => match o {
            Outcome::Completed => JobState::Completed,
            Outcome::Failed => JobState::Failed,
            Outcome::Cancelled => JobState::Cancelled,
            Outcome::TimedOut => JobState::TimedOut,
            Outcome::NodeFailed => JobState::NodeFailed,
            Outcome::Rejected => JobState::Rejected,
            Outcome::OutOfMemory => JobState::OutOfMemory,
        },
        (Phase::Ended, None) => JobState::Failed,
        (Phase::Future | Phase::Waiting, _) => JobState::Queued,
        (Phase::Running, _) if !held => JobState::Running,
        (Phase::Running | Phase::Stopped, _) => JobState::Suspended,
    }
}

impl Core {
    /// Job `i` as clients see it and the database stores it.
    pub fn job_info(&self, i: Ix, now: Time) -> JobInfo {
        let e = self.ledger.entry(i);
        let s = &self.side[i];
        let r = e.record();
        // An ended job ran for all its time between start and end but the stopped time (this
        // holds for jobs recovered from the database too, whose ledger entry has no run time).
        let run = match (e.is_live(), r.start, r.end) {
            (false, Some(s), Some(end)) => end - s - r.suspended,
            (false, _, _) => cosched_core::Dur::ZERO,
            (true, _, _) => e.ran(now),
        };
        let mut record = r.clone();
        if e.is_live() {
            record.pes = e.pes().clone();
            // Live, as the run time is: a job stopped now shows the stop so far. What is
            // persisted includes it too, consistently with the run time: a restarted MM
            // adopts both and counts on from the instant they were written.
            record.suspended = e.suspended(now);
        }
        // What its processes do: under a node scheme that runs placed jobs, the nodes'
        // reports (see `Core::node_runs`), not the policy's phase.
        let state = match job_state(e.phase(), e.held(), r.outcome) {
            JobState::Running | JobState::Suspended if e.processes_run() => JobState::Running,
            JobState::Running | JobState::Suspended => JobState::Suspended,
            s => s,
        };
        let mut info = describe(s, record, state, run.as_micros());
        info.held = e.held();
        info.reason = self.reason(i, now);
        info.partition = self.partition_of(i);
        info
    }

    pub fn status(&self) -> StatusInfo {
        let total = self.shape.total_pes() as usize;
        let (slots, active) = match self.policy.matrix() {
            Some(m) => {
                let slots = m
                    .slots
                    .iter()
                    .map(|s| {
                        let mut row = vec![None; total];
                        for (job, pes) in &s.jobs {
                            for pe in pes.iter() {
                                if let Some(c) = row.get_mut(pe.0 as usize) {
                                    *c = Some(*job);
                                }
                            }
                        }
                        row
                    })
                    .collect();
                (slots, m.active)
            }
            None => {
                let mut row: Vec<Option<JobId>> = vec![None; total];
                for &i in &self.placed {
                    let e = self.ledger.entry(i);
                    for pe in e.pes().iter() {
                        row[pe.0 as usize] = Some(e.req.id);
                    }
                }
                (vec![row], Some(0))
            }
        };
        let mut running = vec![None; total];
        for &i in &self.placed {
            let e = self.ledger.entry(i);
            if e.is_running() {
                for pe in e.pes().iter() {
                    running[pe.0 as usize] = Some(e.req.id);
                }
            }
        }
        let mut nodes: Vec<NodeInfo> = self
            .nodes
            .iter()
            .map(|n| NodeInfo {
                id: n.row.id,
                name: n.row.name.clone(),
                // Registered but not yet back in the tree: nothing is sent to it yet.
                state: if n.removed {
                    "removed".into()
                } else if let Some(a) = &n.admin {
                    match a.op {
                        NodeOp::Down => "down".into(),
                        _ if self.placed.iter().any(|&i| {
                            self.side[i].placement.iter().any(|p| p.node == n.row.id)
                        }) =>
                        {
                            "draining".into()
                        }
                        _ => "drained".into(),
                    }
                } else if n.up && n.suspect {
                    "not_responding".into()
                } else if n.up && n.in_tree && n.policy_up {
                    "up".into()
                } else if n.up {
                    "joining".into()
                } else {
                    "down".into()
                },
                addr: n.addr.clone(),
                pes: n.row.pes,
                reason: n.admin.clone(),
            })
            .collect();
        for i in self.nodes.len() as u32..self.cfg.nodes {
            nodes.push(NodeInfo {
                id: NodeId(i),
                name: format!("(unregistered {i})"),
                state: "down".into(),
                addr: String::new(),
                pes: self.cfg.pes,
                reason: None,
            });
        }
        StatusInfo {
            policy: self.policy.name().to_string(),
            nodes_total: self.cfg.nodes,
            pes_per_node: self.cfg.pes,
            fanout: self.cfg.fanout,
            // The shell owns the tree and fills this in.
            tree_depth: 0,
            nodes,
            slots,
            active_slot: active,
            running,
            switches: self.switches,
            partitions: self.partition_infos(),
        }
    }
}

/// A job's record as clients see it and the database stores it: its lifecycle facts
/// (`record`, `state`, the time it ran) beside what the side table keeps; not held, no
/// reason given.
pub(super) fn describe(s: &Side, record: JobRecord, state: JobState, run_us: i64) -> JobInfo {
    JobInfo {
        record,
        state,
        name: s.name.clone(),
        class: s.class.clone(),
        user: s.user,
        gid: s.gid,
        time_limit_us: s.time_limit.map(|d| d.as_micros()),
        cmd: s.cmd.clone(),
        cwd: s.cwd.clone(),
        run_us,
        placement: s.placement.clone(),
        error: s.error.clone(),
        held: false,
        io: s.io.clone(),
        sched: s.sched.clone(),
        reason: None,
        run: s.run,
        mem: s.mem,
        spread: s.spread.clone(),
        steps: s.steps.clone(),
        partition: s.partition.clone(),
        tasks: s.tasks,
    }
}
