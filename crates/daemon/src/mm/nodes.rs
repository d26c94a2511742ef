//! Node membership: registration and its reconciliation with the job records, heartbeats and
//! failure detection, the grace period after a restart, and the tree's member list.
//!
//! A node is up for the policy from its registration until it misses heartbeats for
//! `dead_after`; the jobs holding PEs on a node that goes down end as `node_failed` (or start
//! over, with `--requeue`), exactly as in the simulator's node operations.

use std::collections::HashMap;

use cosched_core::{NodeId, Outcome, Time};
use cosched_ledger::Ix;
use cosched_policy::Event;

use super::core::{Core, Effect, ReqId};
use crate::db::NodeRow;
use crate::proto::*;

/// A node as the machine manager knows it.
#[derive(Clone, Debug)]
pub struct NodeEntry {
    pub row: NodeRow,
    pub addr: String,
    pub up: bool,
    pub last_seen: Time,
    /// Known from the database but not yet heard from since this machine manager started.
    pub awaiting: bool,
    /// The node manager process last registered (see [`Register::incarnation`]).
    pub incarnation: u64,
}

impl NodeEntry {
    /// A node remembered from the database: down until it registers again.
    pub fn known(row: NodeRow, now: Time) -> NodeEntry {
        NodeEntry {
            row,
            addr: String::new(),
            up: false,
            last_seen: now,
            awaiting: true,
            incarnation: 0,
        }
    }
}

impl Core {
    /// Live jobs with PEs on `node`.
    fn jobs_on(&self, node: NodeId) -> Vec<Ix> {
        self.live
            .iter()
            .copied()
            .filter(|&i| self.side[i].placement.iter().any(|p| p.node == node))
            .collect()
    }

    /// Sends heartbeat `seq` and marks down the nodes not heard from for `dead_after`.
    pub(super) fn heartbeat(&mut self, now: Time) {
        self.hb_seq += 1;
        self.next_hb = now + self.cfg.heartbeat;
        self.push(Effect::Heartbeat { seq: self.hb_seq });
        let dead: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.up && now - n.last_seen > self.cfg.dead_after)
            .map(|n| n.row.id)
            .collect();
        for n in dead {
            let name = self.nodes[n.0 as usize].row.name.clone();
            self.log(format!(
                "mm: node {name} ({n}) missed heartbeats for {}; marking it down",
                self.cfg.dead_after
            ));
            self.nodes[n.0 as usize].up = false;
            self.node_down(now, n, &format!("node {name} stopped answering heartbeats"));
            self.announce_topology(now);
        }
    }

    /// The node is down: the policy is told, and the jobs on it end or start over.
    fn node_down(&mut self, now: Time, node: NodeId, why: &str) {
        let mut hit = self.ledger.node_down(node);
        // Jobs placed there by a previous machine manager hold PEs the ledger adopted.
        hit.extend(self.jobs_on(node));
        hit.sort_unstable();
        hit.dedup();
        self.add_node_events(Event::NodeDown(node));
        for i in hit {
            self.lost(now, i, Outcome::NodeFailed, why.to_string());
        }
    }

    /// Nodes known from the database that did not come back: their jobs are lost.
    pub(super) fn grace_over(&mut self, now: Time) {
        let awaiting: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.awaiting)
            .map(|n| n.row.id)
            .collect();
        for n in awaiting {
            self.nodes[n.0 as usize].awaiting = false;
            let why = "its node did not come back after the machine manager restarted";
            for i in self.jobs_on(n) {
                self.lost(now, i, Outcome::NodeFailed, why.to_string());
            }
        }
    }

    pub(super) fn announce_topology(&mut self, now: Time) {
        let members: Vec<(NodeId, String)> = self
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| (n.row.id, n.addr.clone()))
            .collect();
        self.push(Effect::Members {
            epoch: now.as_micros() as u64,
            members,
        });
    }

    /// A node manager (re)registers: it is up from now, and what it holds is reconciled with
    /// the records (exits it kept are taken in, jobs no longer run are dropped, a launch lost
    /// in flight is sent again, processes lost with a restarted node manager fail their job).
    pub(super) fn register(&mut self, now: Time, req: ReqId, reg: Register) {
        let reject = |why: String| Effect::Registered {
            req,
            reply: RegisterReply::Rejected(why),
        };
        if reg.pes != self.cfg.pes {
            let e = reject(format!(
                "node {} offers {} PEs but this machine has {} per node; start it with --pes {}",
                reg.name, reg.pes, self.cfg.pes, self.cfg.pes
            ));
            self.push(e);
            return;
        }
        let idx = match self.nodes.iter().position(|n| n.row.name == reg.name) {
            Some(i) => i,
            None => {
                if self.nodes.len() as u32 >= self.cfg.nodes {
                    let e = reject(format!(
                        "the machine is full: {} nodes configured (--nodes) and node {} is not one of them",
                        self.cfg.nodes, reg.name
                    ));
                    self.push(e);
                    return;
                }
                let row = NodeRow {
                    id: NodeId(self.nodes.len() as u32),
                    name: reg.name.clone(),
                    pes: reg.pes,
                };
                self.push(Effect::PersistNode(row.clone()));
                let mut n = NodeEntry::known(row, now);
                n.awaiting = false;
                self.nodes.push(n);
                self.nodes.len() - 1
            }
        };
        let id = self.nodes[idx].row.id;
        let was_up = self.nodes[idx].up;
        {
            let n = &mut self.nodes[idx];
            n.addr = reg.addr.clone();
            n.up = true;
            n.last_seen = now;
            n.awaiting = false;
        }
        if !was_up {
            self.log(format!(
                "mm: node {} ({id}) is up at {}",
                reg.name, reg.addr
            ));
            self.ledger.node_up(id);
            self.add_node_events(Event::NodeUp(id));
        }
        // Reconcile the jobs this node holds with the records.
        let mut drop_jobs = Vec::new();
        let mut exits = Vec::new();
        let held: HashMap<_, _> = reg.jobs.iter().map(|h| (h.job, h)).collect();
        for h in &reg.jobs {
            let ours = self.ledger.find(h.job).is_some_and(|i| {
                self.ledger.entry(i).is_live()
                    && self.side[i].placement.iter().any(|p| p.node == id)
            });
            if ours {
                exits.extend(
                    h.ranks
                        .iter()
                        .filter(|r| r.code.is_some())
                        .map(|r| (h.job, r.clone())),
                );
            } else {
                drop_jobs.push(h.job);
            }
        }
        let same_process = self.nodes[idx].incarnation == reg.incarnation;
        self.nodes[idx].incarnation = reg.incarnation;
        let lost: Vec<Ix> = self
            .jobs_on(id)
            .into_iter()
            .filter(|&i| !held.contains_key(&self.ledger.entry(i).req.id))
            .collect();
        for i in lost {
            if same_process {
                // The launch was in flight when the node lost its parent: send it again.
                let stopped = !self.ledger.entry(i).is_running();
                let launch = self.launch_msg(i, stopped);
                self.push(Effect::Send {
                    to: vec![id],
                    msg: ToNode::Launch(launch),
                });
                continue;
            }
            let why = format!("its processes on node {} were lost", reg.name);
            self.lost(now, i, Outcome::Failed, why);
        }
        self.announce_topology(now);
        self.push(Effect::Registered {
            req,
            reply: RegisterReply::Accepted {
                node: id,
                heartbeat_us: self.cfg.heartbeat.as_micros(),
                drop_jobs,
            },
        });
        for (job, exit) in exits {
            self.rank_exit(now, job, exit);
        }
    }
}
