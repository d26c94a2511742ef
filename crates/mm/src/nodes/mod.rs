//! Node membership: registration and its reconciliation with the job records, heartbeats and
//! failure detection, the grace period after a restart, and the tree's member list.
//!
//! Reconciliation is a protocol, not a race. A node manager registers with its
//! complete state (jobs held, each rank running or exited with its status); the core takes in
//! the exits, drops what it no longer runs and fails (or requeues) what the node lost, all
//! before the policy hears about the node. The node then joins the tree the core announces;
//! only when it reports [`FromNode::Joined`] for that announcement is it *in the tree*: nothing
//! is sent to it before (launches wait, signals are replaced by a resynchronisation on
//! joining), and only then is it up for the policy. A launch is resent until the node
//! acknowledges it ([`FromNode::Launched`]), at most [`LAUNCH_TRIES`] times, after which the
//! job fails with the reason.
//!
//! Late is not dead. A node that has not answered for `suspect_after` is *not responding*:
//! the policy counts it down, so nothing new starts there, but its jobs keep running and a
//! node that answers again is up with its jobs intact. Only one silent for `down_after` is
//! declared down: the jobs holding PEs on it end as `node_failed` (or start over, with
//! `--requeue`), exactly as in the simulator's node operations. Silence is counted in the
//! machine manager's own running time: a stall of the manager itself (see
//! [`Core::stalled`]) moves every deadline.
//!
//! A node declared down is *fenced*: its processes may still run (a node manager that was
//! stopped, a network cut), so when it registers again while holding running ranks, it is
//! answered [`RegisterReply::Fence`] and must kill them before it is accepted. A job lost
//! with it under `--requeue` starts again only once its previous run is known gone: every
//! rank's exit reported, or the fenced node back without it — or, if the node never comes
//! back, `down_after` after it was declared down (2 × `down_after` of silence in all).
//!
//! One file per concern: the table a machine manager starts with (`table.rs`), silence and its
//! consequences (`liveness.rs`), registration and joining the tree (`membership.rs`), an
//! administrator's drain, down and resume (`admin.rs`).

mod admin;
mod liveness;
mod membership;
mod table;

pub use table::NodeTable;

use cosched_core::{JobId, NodeId, Time};
use cosched_ledger::Ix;

use crate::core::Core;
use crate::db::NodeRow;
use cosched_proto::proto::*;

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
    /// Reported [`FromNode::Joined`] for the tree announced at its last registration:
    /// messages may be sent to it.
    pub in_tree: bool,
    /// Up for the policy (and the ledger): from its first joining the tree after being down
    /// until it is found dead.
    pub policy_up: bool,
    /// The tree epoch announced at its last registration; older `Joined` reports are stale.
    pub join_epoch: u64,
    /// Where its membership began: the tree epoch announced at the registration that last
    /// released what the records waited for there (its fence lifted, a new node manager
    /// process). Messages sent to it before do not act there (see [`Core::register`]).
    pub member_since: u64,
    /// `Forget`s due while it was out of the tree, sent when it joins.
    pub deferred_forget: Vec<JobId>,
    /// Up, but not heard from for `suspect_after`: not responding (the policy counts it
    /// down; its jobs keep running).
    pub suspect: bool,
    /// Declared down: when it registers again it must first kill what it still runs.
    pub fenced: bool,
    /// Until when jobs to be requeued wait for it to come back without their processes;
    /// then those count as gone.
    pub fence_until: Option<Time>,
    /// No longer in the configuration: it may not register (see [`NodeTable`]).
    pub removed: bool,
    /// Drained or set down by an administrator (why, who, when): nothing new starts there
    /// until it is resumed.
    pub admin: Option<NodeChange>,
    /// Bytes of memory a job may take there, as its node manager said at registration (the
    /// configured memory, else the host's): the bound of `--mem` at submission.
    pub memory: Option<u64>,
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
            in_tree: false,
            policy_up: false,
            join_epoch: 0,
            member_since: 0,
            deferred_forget: Vec::new(),
            suspect: false,
            fenced: false,
            fence_until: None,
            removed: false,
            admin: None,
            memory: None,
        }
    }

    /// Whether the policy may start jobs here: up, answering, in service.
    pub fn schedulable(&self) -> bool {
        self.policy_up && !self.suspect && self.admin.is_none()
    }
}

impl Core {
    /// Live jobs with PEs on `node`.
    fn jobs_on(&self, node: NodeId) -> Vec<Ix> {
        self.placed
            .iter()
            .copied()
            .filter(|&i| self.side[i].placement.iter().any(|p| p.node == node))
            .collect()
    }
}
