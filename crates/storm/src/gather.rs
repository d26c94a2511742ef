//! Gathering up the tree, combined at every hop: each of a set of nodes contributes a
//! payload under one id (a job's fence), and every node holds what its subtree's
//! contributors sent until all of them have, then sends one [`Gather`] up with every part.
//! The root hears one message per child link whatever the number of contributors, and
//! each link carries one message per gathering instead of one per contributor below it.
//!
//! The parts are kept apart (who sent what), so the receiver sees the same contributions
//! as if each had been sent on its own; combining is the transport's business alone. What
//! cannot complete at a hop is sent up as it is, never held for ever: when the node's child
//! links change (a child lost, a new overlay) every pending gathering goes up partial, and
//! the later parts of one sent up partial are passed on as they come. A gathering older
//! than [`MAX_AGE`] (a job that ended before all its nodes contributed) goes up the same
//! way the next time a gathering starts.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use cosched_core::NodeId;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::tree::{Dest, Route};

/// The sender's name for one gathering, unique while it lasts (the node manager's: job,
/// run, fence).
pub type GatherId = (u64, u64, u64);

/// How long a hop holds an incomplete gathering before it goes up as it is.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// How many gatherings sent up partial a node remembers (their later parts are passed on).
const PASSED_ON: usize = 1024;

/// Contributions to one gathering, from the nodes of one subtree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gather {
    pub id: GatherId,
    /// Every contributor of the gathering.
    pub dest: Dest,
    /// (contributor, its payload).
    pub parts: Vec<(NodeId, Vec<u8>)>,
}

struct Pending {
    dest: Dest,
    /// Contributors of this subtree not heard yet.
    waiting: BTreeSet<NodeId>,
    parts: Vec<(NodeId, Vec<u8>)>,
    since: Instant,
}

/// A node's gatherings under way (see the module documentation).
pub struct Gathers {
    me: NodeId,
    pending: HashMap<GatherId, Pending>,
    passed_on: VecDeque<GatherId>,
}

impl Gathers {
    pub fn new(me: NodeId) -> Gathers {
        Gathers {
            me,
            pending: HashMap::new(),
            passed_on: VecDeque::new(),
        }
    }

    /// Takes in a contribution (this node's own or a child's combined one), with `routes`
    /// this node's child links. Returns what goes up now: the whole subtree's gathering
    /// once complete, a late part of one sent up partial, and any gathering too old.
    pub fn add(&mut self, now: Instant, routes: &[Route], g: Gather) -> Vec<Gather> {
        if self.passed_on.contains(&g.id) {
            return vec![g];
        }
        let mut up = Vec::new();
        if !self.pending.contains_key(&g.id) {
            up = self.expire(now);
            let mut waiting: BTreeSet<NodeId> = routes
                .iter()
                .flat_map(|r| r.subtree.iter().copied())
                .filter(|&n| g.dest.includes(n))
                .collect();
            if g.dest.includes(self.me) {
                waiting.insert(self.me);
            }
            let p = Pending {
                dest: g.dest.clone(),
                waiting,
                parts: Vec::new(),
                since: now,
            };
            self.pending.insert(g.id, p);
        }
        let p = self.pending.get_mut(&g.id).expect("inserted");
        for (from, _) in &g.parts {
            p.waiting.remove(from);
        }
        p.parts.extend(g.parts);
        if p.waiting.is_empty() {
            let p = self.pending.remove(&g.id).expect("present");
            up.push(Gather {
                id: g.id,
                dest: p.dest,
                parts: p.parts,
            });
        }
        up
    }

    /// The child links changed (a child lost, a new overlay): every gathering under way
    /// goes up as it is, and its later parts are passed on.
    pub fn flush(&mut self) -> Vec<Gather> {
        let ids: Vec<GatherId> = self.pending.keys().copied().collect();
        ids.into_iter().map(|id| self.send_partial(id)).collect()
    }

    fn expire(&mut self, now: Instant) -> Vec<Gather> {
        let old: Vec<GatherId> = self
            .pending
            .iter()
            .filter(|(_, p)| now.duration_since(p.since) >= MAX_AGE)
            .map(|(&id, _)| id)
            .collect();
        old.into_iter().map(|id| self.send_partial(id)).collect()
    }

    fn send_partial(&mut self, id: GatherId) -> Gather {
        let p = self.pending.remove(&id).expect("pending");
        if self.passed_on.len() == PASSED_ON {
            self.passed_on.pop_front();
        }
        self.passed_on.push_back(id);
        Gather {
            id,
            dest: p.dest,
            parts: p.parts,
        }
    }

    /// Gatherings under way.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(node: u32, subtree: &[u32]) -> Route {
        Route {
            node: NodeId(node),
            addr: String::new(),
            subtree: subtree.iter().map(|&n| NodeId(n)).collect(),
        }
    }

    fn part(id: GatherId, dest: &[u32], from: &[u32]) -> Gather {
        Gather {
            id,
            dest: Dest::nodes(dest.iter().map(|&n| NodeId(n)).collect()),
            parts: from.iter().map(|&n| (NodeId(n), vec![n as u8])).collect(),
        }
    }

    fn senders(g: &Gather) -> Vec<u32> {
        let mut v: Vec<u32> = g.parts.iter().map(|(n, _)| n.0).collect();
        v.sort();
        v
    }

    const ID: GatherId = (7, 1, 0);

    #[test]
    fn a_hop_sends_one_message_up_once_its_subtrees_contributors_all_have() {
        // Node 0 with children 1 (subtree 1, 3, 4) and 2 (subtree 2, 5); the job runs on 0, 3,
        // 4 and 5 (not 1 or 2, which only relay).
        let routes = [route(1, &[1, 3, 4]), route(2, &[2, 5])];
        let dest = [0, 3, 4, 5];
        let mut g = Gathers::new(NodeId(0));
        let t = Instant::now();
        let mut up = Vec::new();
        up.extend(g.add(t, &routes, part(ID, &dest, &[5])));
        up.extend(g.add(t, &routes, part(ID, &dest, &[0])));
        assert!(up.is_empty(), "waits for 3 and 4");
        up.extend(g.add(t, &routes, part(ID, &dest, &[3, 4])));
        assert_eq!(up.len(), 1, "one message up for four contributors");
        assert_eq!(senders(&up[0]), [0, 3, 4, 5]);
        assert_eq!(g.pending(), 0);
    }

    #[test]
    fn a_hop_outside_the_job_counts_only_its_subtrees_contributors() {
        let routes = [route(3, &[3]), route(4, &[4])];
        let mut g = Gathers::new(NodeId(1));
        let t = Instant::now();
        assert!(g.add(t, &routes, part(ID, &[0, 3, 4, 5], &[4])).is_empty());
        let up = g.add(t, &routes, part(ID, &[0, 3, 4, 5], &[3]));
        assert_eq!(up.iter().map(senders).collect::<Vec<_>>(), [vec![3, 4]]);
    }

    #[test]
    fn gatherings_go_up_partial_when_the_links_change_and_their_late_parts_follow() {
        let routes = [route(1, &[1]), route(2, &[2])];
        let mut g = Gathers::new(NodeId(0));
        let t = Instant::now();
        assert!(g.add(t, &routes, part(ID, &[0, 1, 2], &[0])).is_empty());
        let up = g.flush();
        assert_eq!(up.iter().map(senders).collect::<Vec<_>>(), [vec![0]]);
        // The rest comes later: passed on at once, not held waiting for what went up.
        let up = g.add(t, &routes, part(ID, &[0, 1, 2], &[1]));
        assert_eq!(up.iter().map(senders).collect::<Vec<_>>(), [vec![1]]);
        assert_eq!(g.pending(), 0);
    }

    #[test]
    fn a_gathering_that_never_completes_goes_up_once_too_old() {
        let routes = [route(1, &[1])];
        let mut g = Gathers::new(NodeId(0));
        let t = Instant::now();
        assert!(g.add(t, &routes, part(ID, &[0, 1], &[0])).is_empty());
        let later = t + MAX_AGE;
        let up = g.add(later, &routes, part((8, 1, 0), &[0, 1], &[0]));
        assert_eq!(up.len(), 1);
        assert_eq!((up[0].id, senders(&up[0])), (ID, vec![0]));
        assert_eq!(g.pending(), 1, "the new one waits");
    }
}
