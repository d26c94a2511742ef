//! An administrator's changes to nodes (`cosched node drain|down|resume`): checked, then
//! carried out once durable.

use cosched_core::{NodeId, Outcome, Time};
use cosched_policy::Event;

use crate::core::Core;
use cosched_proto::proto::*;

impl Core {
    /// The configured node named `name`, or an error naming the nodes there are.
    pub(crate) fn node_named(&self, name: &str) -> Result<NodeId, String> {
        if let Some(e) = self.nodes.iter().find(|e| e.row.name == name && !e.removed) {
            return Ok(e.row.id);
        }
        let known: Vec<&str> = self
            .nodes
            .iter()
            .filter(|e| !e.removed)
            .map(|e| e.row.name.as_str())
            .collect();
        Err(format!(
            "unknown node {name}; the nodes are {} (`cosched status`)",
            cosched_slurm::hostlist::compress(&known)
        ))
    }

    /// Checks an administrator's change to `names` (`cosched node drain|down|resume`): the
    /// changes to make durable, or why not.
    pub(crate) fn node_changes(
        &self,
        now: Time,
        op: NodeOp,
        names: &[String],
        reason: Option<String>,
        uid: u32,
    ) -> Result<Vec<NodeChange>, String> {
        if names.is_empty() {
            return Err("name the nodes (`cosched node drain n01 n02 --reason …`)".into());
        }
        if op != NodeOp::Resume && reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
            return Err(format!(
                "say why with --reason (Slurm's `scontrol update nodename=… state={} reason=…` asks the same)",
                op.as_str()
            ));
        }
        let mut out = Vec::new();
        for name in names {
            out.push(NodeChange {
                node: self.node_named(name)?,
                name: name.clone(),
                op,
                reason: reason.clone(),
                uid,
                at_us: now.as_micros(),
            });
        }
        Ok(out)
    }

    /// Carries out an administrator's change, once durable: a drained node takes no new
    /// work and keeps its jobs; a node set down loses its jobs (as a failed node does); a
    /// resumed one is in service again as soon as it answers.
    pub(crate) fn change_node(&mut self, now: Time, c: NodeChange) {
        let n = c.node;
        let e = &mut self.nodes[n.0 as usize];
        let was = e.schedulable();
        let who = cosched_proto::util::user_name(c.uid);
        let why = c.reason.clone().unwrap_or_default();
        let name = e.row.name.clone();
        match c.op {
            NodeOp::Resume => {
                e.admin = None;
                let now_up = e.schedulable();
                self.log(format!("mm: node {name} ({n}) resumed by {who}"));
                if now_up {
                    self.ledger.node_up(n);
                    self.add_node_events(Event::NodeUp(n));
                }
            }
            NodeOp::Drain => {
                e.admin = Some(c);
                self.log(format!(
                    "mm: node {name} ({n}) drained by {who}: {why}; its jobs run to their end, nothing new starts there"
                ));
                if was {
                    self.ledger.node_down(n);
                    self.add_node_events(Event::NodeDown(n));
                }
            }
            NodeOp::Down => {
                e.admin = Some(c);
                self.log(format!("mm: node {name} ({n}) set down by {who}: {why}"));
                let lost = format!("node {name} was set down by {who}: {why}");
                if was {
                    self.node_down(now, n, &lost, true);
                } else {
                    for i in self.jobs_on(n) {
                        self.lost(now, i, Outcome::NodeFailed, lost.clone());
                    }
                }
            }
        }
    }
}
