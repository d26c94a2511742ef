//! The k-ary tree overlay: who is whose parent, and which children a message must reach.
//!
//! The machine manager is position 0 (the root); the live node managers, in the order the
//! machine manager lists them, are positions 1..=n. Position `p` has children
//! `k·p+1 ..= k·p+k`, so the depth is ⌈log_k n⌉ and no node forwards to more than `k` peers.

use cosched_core::NodeId;
use serde::{Deserialize, Serialize};

/// The overlay as the machine manager announces it, down the tree, whenever membership
/// changes. `epoch` grows with every change so a node can ignore stale announcements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub epoch: u64,
    pub fanout: u32,
    /// `(node, address its storm listener accepts on)`, in position order (position = index + 1).
    pub members: Vec<(NodeId, String)>,
}

impl Topology {
    /// Position of `node` (1-based), if it is a member.
    pub fn position(&self, node: NodeId) -> Option<u32> {
        self.members
            .iter()
            .position(|(n, _)| *n == node)
            .map(|i| i as u32 + 1)
    }

    /// Positions of the direct children of position `p` (0 = root).
    pub fn child_positions(&self, p: u32) -> std::ops::RangeInclusive<u32> {
        let k = self.fanout.max(1);
        let n = self.members.len() as u32;
        let first = k.saturating_mul(p).saturating_add(1);
        first..=first.saturating_add(k - 1).min(n)
    }

    /// The member at position `p` (1-based).
    pub fn at(&self, p: u32) -> &(NodeId, String) {
        &self.members[p as usize - 1]
    }

    /// Every node in the subtree rooted at position `p` (itself included unless it is the
    /// root), sorted by id.
    pub fn subtree(&self, p: u32) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack = vec![p];
        while let Some(q) = stack.pop() {
            if q != 0 {
                out.push(self.at(q).0);
            }
            stack.extend(self.child_positions(q));
        }
        out.sort_unstable();
        out
    }

    /// The children of position `p` with the sorted node ids of their subtrees.
    pub fn routes(&self, p: u32) -> Vec<Route> {
        self.child_positions(p)
            .map(|c| {
                let (node, addr) = self.at(c).clone();
                Route {
                    node,
                    addr,
                    subtree: self.subtree(c),
                }
            })
            .collect()
    }

    /// Tree depth: hops from the root to the deepest node.
    pub fn depth(&self) -> u32 {
        let (k, mut n, mut d, mut level) = (
            self.fanout.max(1) as u64,
            self.members.len() as u64,
            0,
            1u64,
        );
        while n > 0 {
            level = level.saturating_mul(k);
            n = n.saturating_sub(level);
            d += 1;
        }
        d
    }
}

/// One child link of a node: where it is and whom it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub node: NodeId,
    pub addr: String,
    pub subtree: Vec<NodeId>,
}

/// The nodes a down-going message is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dest {
    All,
    /// Sorted, deduplicated.
    Nodes(Vec<NodeId>),
}

impl Dest {
    pub fn nodes(mut v: Vec<NodeId>) -> Dest {
        v.sort_unstable();
        v.dedup();
        Dest::Nodes(v)
    }
    pub fn includes(&self, node: NodeId) -> bool {
        match self {
            Dest::All => true,
            Dest::Nodes(v) => v.binary_search(&node).is_ok(),
        }
    }
    /// True when some node of the (sorted) `subtree` is a destination.
    pub fn reaches(&self, subtree: &[NodeId]) -> bool {
        match self {
            Dest::All => !subtree.is_empty(),
            Dest::Nodes(v) => {
                let (mut i, mut j) = (0, 0);
                while i < v.len() && j < subtree.len() {
                    match v[i].cmp(&subtree[j]) {
                        std::cmp::Ordering::Equal => return true,
                        std::cmp::Ordering::Less => i += 1,
                        std::cmp::Ordering::Greater => j += 1,
                    }
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(n: u32, k: u32) -> Topology {
        Topology {
            epoch: 1,
            fanout: k,
            members: (0..n).map(|i| (NodeId(i), format!("h{i}"))).collect(),
        }
    }

    #[test]
    fn binary_tree_shape() {
        let t = topo(6, 2);
        assert_eq!(t.child_positions(0), 1..=2);
        assert_eq!(t.child_positions(2).collect::<Vec<_>>(), vec![5, 6]);
        assert_eq!(t.child_positions(3).count(), 0);
        assert_eq!(t.subtree(1), vec![NodeId(0), NodeId(2), NodeId(3)]);
        assert_eq!(t.subtree(0).len(), 6);
        assert_eq!(t.depth(), 2);
        assert_eq!(topo(7, 2).depth(), 3);
        assert_eq!(topo(64, 8).depth(), 2);
        assert_eq!(topo(1, 8).depth(), 1);
    }

    #[test]
    fn every_node_reached_exactly_once() {
        for (n, k) in [(1, 1), (7, 2), (64, 4), (65, 8), (10, 100)] {
            let t = topo(n, k);
            let mut seen = vec![0; n as usize];
            let mut stack = vec![0u32];
            while let Some(p) = stack.pop() {
                for r in t.routes(p) {
                    seen[r.node.0 as usize] += 1;
                    stack.push(t.position(r.node).unwrap());
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n={n} k={k}: {seen:?}");
        }
    }

    #[test]
    fn dest_routing() {
        let t = topo(6, 2);
        let d = Dest::nodes(vec![NodeId(5), NodeId(5)]);
        let routes = t.routes(0);
        assert!(!d.reaches(&routes[0].subtree));
        assert!(d.reaches(&routes[1].subtree));
        assert!(d.includes(NodeId(5)) && !d.includes(NodeId(4)));
        assert!(Dest::All.reaches(&routes[0].subtree));
    }
}
