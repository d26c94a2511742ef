//! Membership: a node manager's registration and its reconciliation with the records, the
//! tree's member list, and a node joining the tree announced to it.

use std::collections::HashMap;

use cosched_core::{JobId, NodeId, Outcome, Time};
use cosched_ledger::Ix;
use cosched_policy::Event;

use super::NodeEntry;
use crate::core::{Core, Effect, Pending, ReqId};
use crate::db::NodeRow;
use cosched_proto::proto::*;

impl Core {
    pub(crate) fn announce_topology(&mut self, now: Time) {
        let members: Vec<(NodeId, String)> = self
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| (n.row.id, n.addr.clone()))
            .collect();
        // Strictly growing, so a node's `Joined` tells which announcement it heard.
        self.epoch = (now.as_micros().max(0) as u64).max(self.epoch + 1);
        self.push(Effect::Members {
            epoch: self.epoch,
            members,
        });
    }

    /// The nodes that are up and in the tree, with their names (a broadcast's destinations).
    pub fn tree_nodes(&self) -> Vec<(NodeId, String)> {
        self.nodes
            .iter()
            .filter(|n| n.up && n.in_tree)
            .map(|n| (n.row.id, n.row.name.clone()))
            .collect()
    }

    /// The last tree epoch announced (a node joining reports it back).
    pub fn tree_epoch(&self) -> u64 {
        self.epoch
    }

    /// A node reports that it is in the tree of `epoch`. The first report after a
    /// registration brings it into the tree: it is up for the policy (if it was not), gets
    /// the launches that waited for it, and is brought in line with the records (stop what is
    /// stopped, continue what runs, kill what ended, forget what was forgotten), since
    /// signals meant for it while it was out of the tree were not sent.
    pub(crate) fn joined(&mut self, now: Time, node: NodeId, incarnation: u64, epoch: u64) {
        let Some(n) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        if !n.up || n.in_tree || n.incarnation != incarnation || epoch < n.join_epoch {
            return; // already in, or a report from an older registration
        }
        n.in_tree = true;
        self.heard(now, node);
        let n = &mut self.nodes[node.0 as usize];
        let name = n.row.name.clone();
        if !n.policy_up {
            n.policy_up = true;
            let in_service = n.admin.is_none();
            self.log(format!("mm: node {name} ({node}) is up (back in the tree)"));
            if in_service {
                self.ledger.node_up(node);
                self.add_node_events(Event::NodeUp(node));
            }
        }
        let forget = std::mem::take(&mut self.nodes[node.0 as usize].deferred_forget);
        if !forget.is_empty() {
            self.send(vec![node], ToNode::Forget { jobs: forget });
        }
        let (mut stop, mut cont, mut kill) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..self.side.len() {
            if !self.side[i].placement.iter().any(|p| p.node == node) {
                continue;
            }
            let id = self.ledger.entry(i).req.id;
            if self.pending.contains_key(&(id, node)) {
                continue; // not there yet: its launch goes below
            }
            if !self.live.contains(&i) {
                if self.side[i].forget_pending {
                    kill.push(id);
                }
            } else if self.side[i].requeue_why.is_some() {
                kill.push(id);
            } else if self.ledger.entry(i).is_running() {
                cont.push(id);
            } else {
                stop.push(id);
            }
        }
        if !(stop.is_empty() && cont.is_empty() && kill.is_empty()) {
            self.send(vec![node], ToNode::Switch { stop, cont, kill });
        }
        let due: Vec<JobId> = self
            .pending
            .keys()
            .filter(|(_, n)| *n == node)
            .map(|(j, _)| *j)
            .collect();
        for job in due {
            self.send_launch(now, job, node);
        }
    }

    /// A node manager (re)registers: it is up from now, and what it holds is reconciled with
    /// the records (abort notices and exits it kept are taken in, jobs no longer run are dropped, a launch lost
    /// in flight is sent again, processes lost with a restarted node manager fail their job).
    pub(crate) fn register(&mut self, now: Time, req: ReqId, reg: Register) {
        let reject = |why: String| Effect::Registered {
            req,
            reply: RegisterReply::Rejected(why),
        };
        if let Some(why) = Version::refusal(&reg.version, Some(&reg.name)) {
            self.push(reject(why));
            return;
        }
        if reg.pes != self.cfg.pes {
            let e = reject(format!(
                "node {} offers {} PEs but this machine has {} per node; start it with --pes {}",
                reg.name, reg.pes, self.cfg.pes, self.cfg.pes
            ));
            self.push(e);
            return;
        }
        let idx = match self.nodes.iter().position(|n| n.row.name == reg.name) {
            Some(i) if self.nodes[i].removed => {
                let e = reject(format!(
                    "node {} was removed from the configuration; add it back and run `cosched reconfigure` to let it join",
                    reg.name
                ));
                self.push(e);
                return;
            }
            Some(i) => i,
            None if !self.cfg.names.is_empty() => {
                let e = reject(format!(
                    "node {} is not in the configuration (its nodes: {}); add it to a [[nodes]] entry and run `cosched reconfigure`, or start the node manager with --name set to a configured node",
                    reg.name,
                    cosched_slurm::hostlist::compress(&self.cfg.names)
                ));
                self.push(e);
                return;
            }
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
        // A registration may come from a new node manager, on another clock.
        self.node_clocks.forget(id);
        let lifted = self.nodes[idx].fenced;
        if lifted {
            // Declared down while it ran processes: none may run there before it is back.
            let running: Vec<JobId> = reg
                .jobs
                .iter()
                .filter(|h| h.ranks.iter().any(|r| r.code.is_none()))
                .map(|h| h.job)
                .collect();
            if !running.is_empty() {
                self.log(format!(
                    "mm: node {} ({id}) is back but still runs processes of jobs {running:?}, which were ended or requeued while it was down; it must kill them before it is accepted",
                    reg.name
                ));
                self.push(Effect::Registered {
                    req,
                    reply: RegisterReply::Fence {
                        jobs: running,
                        kill_wait_us: self.cfg.kill_wait.as_micros(),
                    },
                });
                return;
            }
            let n = &mut self.nodes[idx];
            n.fenced = false;
            n.fence_until = None;
            self.log(format!(
                "mm: node {} ({id}) is back and runs nothing it ran when it was declared down",
                reg.name
            ));
        }
        // Heard from: a node that was not responding is up again (with its jobs).
        self.heard(now, id);
        {
            let n = &mut self.nodes[idx];
            n.addr = reg.addr.clone();
            n.up = true;
            // Out of the tree until it says it has joined the one announced below: nothing
            // is sent to it meanwhile. A node the policy counts up stays up (its jobs run).
            n.in_tree = false;
            n.last_seen = now;
            n.awaiting = false;
            n.memory = Some(reg.memory);
        }
        self.log(format!(
            "mm: node {} ({id}) registered from {} with {} jobs; joining the tree",
            reg.name,
            reg.addr,
            reg.jobs.len()
        ));
        // Reconcile the jobs this node holds with the records.
        let mut drop_jobs = Vec::new();
        let mut exits = Vec::new();
        let held: HashMap<_, _> = reg.jobs.iter().map(|h| (h.job, h)).collect();
        let mut step_exits = Vec::new();
        // Abort notices the node kept (this machine manager may have restarted since it sent
        // them): taken before the exits, which followed them.
        let mut aborts = Vec::new();
        let mut step_aborts = Vec::new();
        for h in &reg.jobs {
            if unit_step(h.job).is_some() {
                // A step: kept while it runs there, its exits taken in; dropped otherwise.
                if self.step_runs_on(h.job, h.run, id) {
                    step_aborts.extend(h.aborted.iter().map(|a| (h.job, h.run, a.clone())));
                    let done = h.ranks.iter().filter(|r| r.code.is_some());
                    step_exits.extend(done.map(|r| (h.job, h.run, r.clone())));
                } else {
                    drop_jobs.push(h.job);
                }
                continue;
            }
            // The same run only: a node that still holds an earlier run of a requeued job
            // (its forget never reached it) gets it dropped, and the current run's launch
            // stays pending.
            let ours = self.ledger.find(h.job).is_some_and(|i| {
                self.ledger.entry(i).is_live()
                    && self.side[i].requeue_why.is_none()
                    && self.side[i].run == h.run
                    && self.side[i].placement.iter().any(|p| p.node == id)
            });
            if ours {
                // It has the job: any launch of it there has arrived.
                self.pending.remove(&(h.job, id));
                aborts.extend(h.aborted.iter().map(|a| (h.job, a.clone())));
                exits.extend(
                    h.ranks
                        .iter()
                        .filter(|r| r.code.is_some())
                        .map(|r| (h.job, r.clone())),
                );
            } else {
                // Ended here; while it completes, the exits it reports are what releases its
                // PEs.
                if self
                    .ledger
                    .find(h.job)
                    .is_some_and(|i| self.completing.contains_key(&i) && self.side[i].run == h.run)
                {
                    let done = h.ranks.iter().filter(|r| r.code.is_some());
                    exits.extend(done.map(|r| (h.job, r.clone())));
                }
                drop_jobs.push(h.job);
            }
        }
        let same_process = self.nodes[idx].incarnation == reg.incarnation;

        self.nodes[idx].incarnation = reg.incarnation;
        // (A job waiting to start again is not run here any more, whatever the node holds.)
        let lost: Vec<Ix> = self
            .jobs_on(id)
            .into_iter()
            .filter(|&i| self.side[i].requeue_why.is_none())
            .filter(|&i| !held.contains_key(&self.ledger.entry(i).req.id))
            .collect();
        for i in lost {
            if same_process {
                // The launch was in flight when the node lost its parent: it is sent again
                // once the node is back in the tree.
                let job = self.ledger.entry(i).req.id;
                self.pending.entry((job, id)).or_insert(Pending {
                    sent: None,
                    tries: 0,
                });
                continue;
            }
            let why = format!("its processes on node {} were lost", reg.name);
            self.lost(now, i, Outcome::Failed, why);
        }
        let released = !same_process || lifted;
        if released {
            // A new node manager process (the old one's ranks died with it), or a fenced
            // node back without its old processes: what was left of them is gone.
            self.ranks_gone_on(id, true);
        }
        self.announce_topology(now);
        self.nodes[idx].join_epoch = self.epoch;
        if released {
            // A new membership: what was sent to the node before was meant for what the
            // records have just given up there (a launch of a run since requeued), and the
            // node drops it, even if it comes in only now (it waited while the node was
            // stopped, or registering). A node that only lost its parent keeps its
            // membership: what was sent to it still stands.
            self.nodes[idx].member_since = self.epoch;
        }
        self.push(Effect::Registered {
            req,
            reply: RegisterReply::Accepted {
                node: id,
                heartbeat_us: self.cfg.heartbeat.as_micros(),
                suspect_after_us: self.cfg.suspect_after.as_micros(),
                down_after_us: self.cfg.down_after.as_micros(),
                kill_wait_us: self.cfg.kill_wait.as_micros(),
                drop_jobs,
                epoch: self.nodes[idx].member_since,
            },
        });
        for (job, exit) in aborts {
            self.rank_aborted(now, job, id, exit);
        }
        for (job, exit) in exits {
            self.rank_exit(now, job, id, exit);
        }
        for (unit, run, exit) in step_aborts {
            self.step_aborted(unit, run, id, exit);
        }
        for (unit, run, exit) in step_exits {
            self.step_exit(now, unit, run, id, exit);
        }
    }
}
