//! The transport side of the machine manager: position 0 of the tree. It announces the
//! overlay, sends XFER-AND-SIGNAL and COMPARE messages down, and receives what comes up.

use std::sync::Arc;

use cosched_core::NodeId;
use tokio::sync::mpsc;

use crate::frame::Key;
use crate::link::{ChildEvent, Children};
use crate::mech::{Cond, Down, Var};
use crate::tree::{Dest, Topology};

pub struct Root {
    key: Key,
    topo: Topology,
    children: Children,
    next_query: u64,
}

impl Root {
    /// A root with no members yet; what comes up arrives on the returned receiver.
    pub fn new(key: Key, fanout: u32) -> (Root, mpsc::UnboundedReceiver<ChildEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let topo = Topology {
            epoch: 0,
            fanout: fanout.max(1),
            members: Vec::new(),
        };
        (
            Root {
                children: Children::new(key.clone(), tx),
                key,
                topo,
                next_query: 1,
            },
            rx,
        )
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Announces a new overlay of `members` (position order). `epoch` must grow across
    /// announcements, restarts of the root included (wall-clock microseconds do).
    pub fn set_members(&mut self, epoch: u64, members: Vec<(NodeId, String)>) {
        self.topo = Topology {
            epoch: epoch.max(self.topo.epoch + 1),
            fanout: self.topo.fanout,
            members,
        };
        let frame = Arc::new(self.key.seal(&Down::Topology(self.topo.clone())));
        self.children.reconcile(self.topo.routes(0), frame);
    }

    /// XFER-AND-SIGNAL: delivers `payload` to `dest`, setting `write` on each first.
    pub fn xfer(&self, dest: &Dest, write: Option<(Var, i64)>, payload: Vec<u8>) {
        let frame = Arc::new(self.key.seal(&Down::Xfer {
            dest: dest.clone(),
            write,
            payload,
        }));
        self.children.route(dest, frame);
    }

    /// Sends the query half of COMPARE-AND-WRITE; answers come back with the returned id.
    /// Gather them with [`crate::Gather`], then write with [`Root::xfer`] if all hold.
    pub fn compare(&mut self, dest: &Dest, cond: Cond) -> u64 {
        let id = self.next_query;
        self.next_query += 1;
        let frame = Arc::new(self.key.seal(&Down::Compare {
            id,
            dest: dest.clone(),
            cond,
        }));
        self.children.route(dest, frame);
        id
    }

    /// Forgets a broken child link.
    pub fn lost(&mut self, node: NodeId, conn: u64) -> bool {
        self.children.lost(node, conn)
    }
}
