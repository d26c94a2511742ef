//! The three STORM mechanisms as messages, and the node-local variables they act on.
//!
//! - XFER-AND-SIGNAL ([`Down::Xfer`]): deliver a payload to a set of nodes and, on each, set a
//!   variable (the "signal") before the payload is handed to the node manager.
//! - TEST-EVENT ([`Vars::test_event`], [`Vars::wait_event`]): poll or wait until a local
//!   variable reaches a value.
//! - COMPARE-AND-WRITE ([`Down::Compare`], then a write): evaluate a condition on a variable
//!   of every destination node; the root gathers the answers ([`Gather`]) and, if the
//!   condition held everywhere, writes a variable on all of them with an XFER.
//!
//! Messages from nodes to the root ([`Up`]) are forwarded hop by hop up the same tree.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use cosched_core::NodeId;
use serde::{Deserialize, Serialize};

use crate::tree::{Dest, Topology};

/// A node-local variable (STORM's "global" memory word), named by a number.
pub type Var = u32;

/// A comparison of a variable with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmp {
    Ge,
    Eq,
    Lt,
}

/// `vars[var] <cmp> value`; an unset variable reads as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cond {
    pub var: Var,
    pub cmp: Cmp,
    pub value: i64,
}

impl Cond {
    pub fn holds(&self, current: i64) -> bool {
        match self.cmp {
            Cmp::Ge => current >= self.value,
            Cmp::Eq => current == self.value,
            Cmp::Lt => current < self.value,
        }
    }
}

/// Root to nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Down {
    /// The overlay changed; sent by a parent to each child right after it connects, and again
    /// on every change. A node reconfigures its own children and passes it on.
    Topology(Topology),
    /// XFER-AND-SIGNAL.
    Xfer {
        dest: Dest,
        write: Option<(Var, i64)>,
        payload: Vec<u8>,
    },
    /// The query half of COMPARE-AND-WRITE; each destination answers with [`Up::Answer`].
    Compare { id: u64, dest: Dest, cond: Cond },
}

/// Nodes to root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Up {
    /// A node manager's report (a job's processes ended, a status reply, …).
    Signal {
        from: NodeId,
        payload: Vec<u8>,
    },
    Answer {
        id: u64,
        from: NodeId,
        holds: bool,
    },
}

/// A node's variables, shared between the transport (which writes on XFER) and the node
/// manager (which tests them).
#[derive(Clone, Default)]
pub struct Vars {
    inner: Arc<(Mutex<HashMap<Var, i64>>, tokio::sync::Notify)>,
}

impl Vars {
    pub fn get(&self, var: Var) -> i64 {
        self.inner
            .0
            .lock()
            .expect("vars lock")
            .get(&var)
            .copied()
            .unwrap_or(0)
    }
    pub fn set(&self, var: Var, value: i64) {
        self.inner.0.lock().expect("vars lock").insert(var, value);
        self.inner.1.notify_waiters();
    }
    /// TEST-EVENT, polling form: has `var` reached `value`?
    pub fn test_event(&self, var: Var, value: i64) -> bool {
        self.get(var) >= value
    }
    /// TEST-EVENT, blocking form: waits until `var` reaches `value`.
    pub async fn wait_event(&self, var: Var, value: i64) {
        loop {
            let notified = self.inner.1.notified();
            if self.test_event(var, value) {
                return;
            }
            notified.await;
        }
    }
}

/// The root's bookkeeping for one COMPARE-AND-WRITE: who answered, and how.
#[derive(Clone, Debug, Default)]
pub struct Gather {
    pub expected: BTreeSet<NodeId>,
    pub holds: BTreeSet<NodeId>,
    pub fails: BTreeSet<NodeId>,
}

impl Gather {
    pub fn new(expected: impl IntoIterator<Item = NodeId>) -> Gather {
        Gather {
            expected: expected.into_iter().collect(),
            ..Gather::default()
        }
    }
    pub fn record(&mut self, from: NodeId, holds: bool) {
        if self.expected.contains(&from) {
            if holds {
                self.holds.insert(from)
            } else {
                self.fails.insert(from)
            };
        }
    }
    pub fn complete(&self) -> bool {
        self.holds.len() + self.fails.len() == self.expected.len()
    }
    /// True only when every expected node answered and the condition held on all.
    pub fn all_hold(&self) -> bool {
        self.holds.len() == self.expected.len()
    }
    /// Expected nodes that have not answered (yet).
    pub fn silent(&self) -> Vec<NodeId> {
        self.expected
            .iter()
            .filter(|n| !self.holds.contains(n) && !self.fails.contains(n))
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_tracks_silent_nodes() {
        let mut g = Gather::new([NodeId(1), NodeId(2), NodeId(3)]);
        g.record(NodeId(1), true);
        g.record(NodeId(9), true);
        assert!(!g.complete());
        assert_eq!(g.silent(), vec![NodeId(2), NodeId(3)]);
        g.record(NodeId(2), true);
        g.record(NodeId(3), false);
        assert!(g.complete() && !g.all_hold());
    }

    #[test]
    fn vars_test_event() {
        let v = Vars::default();
        assert!(!v.test_event(1, 1));
        v.set(1, 5);
        assert!(v.test_event(1, 5) && !v.test_event(1, 6));
        assert!(
            Cond {
                var: 1,
                cmp: Cmp::Eq,
                value: 5
            }
            .holds(v.get(1))
        );
    }
}
