//! Silence and its consequences: heartbeats, a node not responding and answering again, a
//! node declared down and fenced, the fence's expiry, and the grace period after the machine
//! manager restarts.

use cosched_core::{Dur, JobId, NodeId, Outcome, Time};
use cosched_policy::Event;

use crate::core::{Core, Effect, EndGroup};

impl Core {
    /// Sends heartbeat `seq`, then looks at every node's silence: not responding after
    /// `suspect_after`, down after `down_after`.
    pub(crate) fn heartbeat(&mut self, now: Time) {
        self.hb_seq += 1;
        self.next_hb = now + self.cfg.heartbeat;
        let rotation = self.announced.current().cloned();
        self.push(Effect::Heartbeat {
            seq: self.hb_seq,
            rotation,
        });
        let silent: Vec<(NodeId, Dur)> = self
            .nodes
            .iter()
            .filter(|n| n.up && now - n.last_seen > self.cfg.suspect_after)
            .map(|n| (n.row.id, now - n.last_seen))
            .collect();
        for (n, silence) in silent {
            if !self.nodes[n.0 as usize].suspect {
                self.not_responding(n, silence);
            }
            if silence > self.cfg.down_after {
                self.declare_down(now, n, silence);
            }
        }
    }

    /// A node that was up has been silent for `silence` (more than `suspect_after`): nothing
    /// new starts there, its jobs keep running.
    fn not_responding(&mut self, n: NodeId, silence: Dur) {
        let e = &mut self.nodes[n.0 as usize];
        let was = e.schedulable();
        e.suspect = true;
        let name = e.row.name.clone();
        self.log(format!(
            "mm: node {name} ({n}) has not answered for {silence}: not responding; nothing new starts there, its jobs keep running (declared down after {} of silence, --down-after)",
            self.cfg.down_after
        ));
        if was {
            // Down for the policy and the ledger (no new PEs there); the driver keeps the
            // jobs, as the policy interface allows.
            self.ledger.node_down(n);
            self.add_node_events(Event::NodeDown(n));
        }
    }

    /// Something came from `node` at `now`: a node that was not responding is up again, with
    /// its jobs.
    pub(crate) fn heard(&mut self, now: Time, node: NodeId) {
        let Some(e) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        let silence = now - e.last_seen;
        e.last_seen = e.last_seen.max(now);
        if !(e.up && e.suspect) {
            return;
        }
        e.suspect = false;
        let (name, now_schedulable) = (e.row.name.clone(), e.schedulable());
        self.log(format!(
            "mm: node {name} ({node}) answers again after {silence} of silence; up, with its jobs"
        ));
        if now_schedulable {
            self.ledger.node_up(node);
            self.add_node_events(Event::NodeUp(node));
        }
    }

    /// Whether `node` is up and answering: registered, not declared down, not silent for
    /// `suspect_after`.
    pub(crate) fn answering(&self, node: NodeId) -> bool {
        self.nodes
            .get(node.0 as usize)
            .is_some_and(|e| e.up && !e.suspect)
    }

    /// Why `node` did not answer a client's question in time, with what the machine manager
    /// knows of it.
    pub(crate) fn unanswered(&self, now: Time, node: NodeId) -> String {
        let Some(e) = self.nodes.get(node.0 as usize) else {
            return format!("node {node} did not answer in time");
        };
        let name = &e.row.name;
        if e.up && e.suspect {
            format!(
                "node {name} is not responding (nothing heard from it for {}): its files stay in its work directory; ask again once `cosched status` shows it up",
                now - e.last_seen
            )
        } else if !e.up {
            format!(
                "node {name} was declared down before it answered: its files stay in its work directory; ask again once it is back"
            )
        } else {
            format!("node {name} did not answer in time; ask again")
        }
    }

    /// A node silent for `silence` (more than `down_after`) is declared down: out of the
    /// tree, fenced, and the jobs on it are lost.
    fn declare_down(&mut self, now: Time, n: NodeId, silence: Dur) {
        let e = &self.nodes[n.0 as usize];
        let (name, policy_up, told) = (e.row.name.clone(), e.policy_up, e.schedulable());
        self.log(format!(
            "mm: node {name} ({n}) has not answered for {silence} (--down-after {}); declaring it down",
            self.cfg.down_after
        ));
        let why = format!("node {name} stopped answering heartbeats");
        self.out_of_tree(n);
        self.fence_node(now, n);
        if policy_up {
            // A node that was not responding, or drained, is down for the policy already.
            self.node_down(now, n, &why, told);
        } else {
            // Registered but never back in the tree: the policy never counted it up, but
            // whatever it holds is lost all the same.
            for i in self.jobs_on(n) {
                self.lost(now, i, Outcome::NodeFailed, why.clone());
            }
        }
        self.announce_topology(now);
    }

    /// The node is no longer a member of the tree, nor up for anyone.
    fn out_of_tree(&mut self, n: NodeId) {
        let e = &mut self.nodes[n.0 as usize];
        e.up = false;
        e.in_tree = false;
        e.policy_up = false;
        e.suspect = false;
        e.deferred_forget.clear();
        self.pending.retain(|(_, node), _| *node != n);
        // Ended jobs no longer wait for their ranks there (the node kills them before it
        // is accepted again); jobs to be requeued do (see `nodes/mod.rs`).
        self.ranks_gone_on(n, false);
    }

    /// The node is fenced: whatever it still runs must be killed before it is accepted
    /// again, and jobs to be requeued wait `down_after` for it to come back without them.
    fn fence_node(&mut self, now: Time, n: NodeId) {
        let e = &mut self.nodes[n.0 as usize];
        e.fenced = true;
        e.fence_until = Some(now + self.cfg.down_after);
    }

    /// Fenced nodes that did not come back within `down_after` of being declared down: the
    /// processes of jobs waiting to start again are taken for gone there (the node stays
    /// fenced: it still kills them if it ever returns).
    pub(crate) fn fences_expired(&mut self, now: Time) {
        let expired: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|e| e.fence_until.is_some_and(|u| now >= u))
            .map(|e| e.row.id)
            .collect();
        for n in expired {
            self.nodes[n.0 as usize].fence_until = None;
            let waiting: Vec<JobId> = self
                .completing
                .iter()
                .filter(|(_, c)| matches!(c.group, EndGroup::Requeue))
                .map(|(&i, _)| i)
                .filter(|&i| self.side[i].placement.iter().any(|p| p.node == n))
                .map(|i| self.ledger.entry(i).req.id)
                .collect();
            if !waiting.is_empty() {
                let name = self.nodes[n.0 as usize].row.name.clone();
                self.log(format!(
                    "mm: node {name} ({n}) did not come back within {} of being declared down; the processes of jobs {waiting:?} there are taken for gone and those jobs start again (--down-after)",
                    self.cfg.down_after
                ));
            }
            self.ranks_gone_on(n, true);
        }
    }

    /// The node is down: the policy is told (unless it was already, the node being not
    /// responding), and the jobs on it end or start over.
    pub(super) fn node_down(&mut self, now: Time, node: NodeId, why: &str, tell: bool) {
        let mut hit = self.ledger.node_down(node);
        // Jobs placed there by a previous machine manager hold PEs the ledger adopted.
        hit.extend(self.jobs_on(node));
        hit.sort_unstable();
        hit.dedup();
        if tell {
            self.add_node_events(Event::NodeDown(node));
        }
        for i in hit {
            self.lost(now, i, Outcome::NodeFailed, why.to_string());
        }
    }

    /// Nodes known from the database that did not come back: their jobs are lost.
    pub(crate) fn grace_over(&mut self, now: Time) {
        let awaiting: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.awaiting)
            .map(|n| n.row.id)
            .collect();
        for n in awaiting {
            self.nodes[n.0 as usize].awaiting = false;
            // Its processes may still run: it is fenced as a node declared down is.
            self.fence_node(now, n);
            let why = "its node did not come back after the machine manager restarted";
            for i in self.jobs_on(n) {
                self.lost(now, i, Outcome::NodeFailed, why.to_string());
            }
        }
    }
}
