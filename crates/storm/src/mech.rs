//! The three STORM mechanisms as messages, the node-local variables they act on, and the
//! combining of answers on their way up the tree.
//!
//! - XFER-AND-SIGNAL ([`Down::Xfer`]): deliver a payload to a set of nodes and, on each, set a
//!   variable (the receiver's completion event) before the payload is handed to the node
//!   manager. With an acknowledgement ([`Query`] in `ack`), every destination also answers
//!   once it holds the payload, and the answers are combined like COMPARE's, so the sender
//!   gets one completion event for the whole set.
//! - TEST-EVENT ([`Vars::test_event`], [`Vars::wait_event`]): poll or wait until a local
//!   variable reaches a value.
//! - COMPARE-AND-WRITE ([`Down::Compare`]): evaluate a condition ([`Cond`]: ≥, =, <, ≠) on a
//!   variable of every destination node. Every node waits for the answers of the children
//!   whose subtrees hold destinations (for at most the query's budget: a child that stays
//!   silent is reported with the destinations of its subtree) and sends one combined
//!   [`Answer`] up, so the root gets exactly one answer whatever the node count. The root
//!   applies the write half ([`Down::Write`]) only when the combined answer holds everywhere.
//!
//! [`Combiner`] is that bookkeeping, shared by the nodes and the root.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cosched_core::NodeId;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::tree::{Dest, Route};

/// A node-local variable (STORM's "global" memory word), named by a number.
pub type Var = u32;

/// A comparison of a variable with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmp {
    Ge,
    Eq,
    Lt,
    Ne,
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
            Cmp::Ne => current != self.value,
        }
    }
}

/// What every answered message carries: its id, whom it is for, and how long a node may
/// wait for its children's answers. Each hop hands its children [`Query::for_children`], a
/// smaller budget, so a child gives up on a silent grandchild before its parent gives up on
/// it, and the answer naming the silent subtree still arrives in time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    pub id: u64,
    pub dest: Dest,
    pub budget_ms: u32,
}

impl Query {
    pub fn budget(&self) -> Duration {
        Duration::from_millis(self.budget_ms as u64)
    }
    /// The same query with the budget a child gets: three quarters of this one.
    pub fn for_children(&self) -> Query {
        Query {
            budget_ms: self.budget_ms - self.budget_ms / 4,
            ..self.clone()
        }
    }
}

/// Root to nodes, with the XFER payload held as a `Vec<u8>`: what the root builds and seals.
pub type Down = DownOf<Vec<u8>>;

/// Root to nodes, whatever holds the XFER payload: [`Down`] owns it; a node decodes
/// `DownOf<&[u8]>`, which borrows it from the frame it keeps to forward, so that a payload
/// of megabytes (a broadcast's chunk) is not copied at every hop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "P: AsRef<[u8]>",
    deserialize = "P: crate::bytes::FromBytes<'de>"
))]
pub enum DownOf<P> {
    /// The overlay changed; sent by a parent to each child right after it connects, and again
    /// on every change. A node reconfigures its own children and passes it on.
    Topology(crate::tree::Topology),
    /// XFER-AND-SIGNAL; with `ack`, every destination answers (holding) once it has the
    /// payload, combined up the tree.
    Xfer {
        dest: Dest,
        write: Option<(Var, i64)>,
        #[serde(with = "crate::bytes")]
        payload: P,
        ack: Option<Query>,
    },
    /// The query half of COMPARE-AND-WRITE; answered with one combined [`Up::Answer`]. With
    /// `wait_ms` > 0, a destination where the condition does not hold yet answers once it
    /// does (a TEST-EVENT), or "does not hold" after `wait_ms` (at most half its budget), so a
    /// sender waiting for every node to reach a value needs no polling.
    Compare {
        query: Query,
        cond: Cond,
        wait_ms: u32,
    },
    /// The write half of COMPARE-AND-WRITE, sent by the root only once the comparison held on
    /// every destination: sets `var` to `value` on each.
    Write { dest: Dest, var: Var, value: i64 },
}

impl<P> DownOf<P> {
    /// The same message with its XFER payload (if any) turned into what `f` makes of it.
    pub fn map_payload<Q>(self, f: impl FnOnce(P) -> Q) -> DownOf<Q> {
        match self {
            DownOf::Topology(t) => DownOf::Topology(t),
            DownOf::Xfer {
                dest,
                write,
                payload,
                ack,
            } => DownOf::Xfer {
                dest,
                write,
                payload: f(payload),
                ack,
            },
            DownOf::Compare {
                query,
                cond,
                wait_ms,
            } => DownOf::Compare {
                query,
                cond,
                wait_ms,
            },
            DownOf::Write { dest, var, value } => DownOf::Write { dest, var, value },
        }
    }
}

/// Nodes to root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Up {
    /// A node manager's report (a job's processes ended, a status reply, …).
    Signal {
        from: NodeId,
        #[serde(with = "crate::bytes")]
        payload: Vec<u8>,
    },
    /// A subtree's combined answer to a query.
    Answer(Answer),
    /// A subtree's contributions to a gathering ([`crate::gather`]).
    Gather(crate::gather::Gather),
}

/// The combined answer of the destinations in one subtree: how many answered, and which did
/// not hold or did not answer (both empty: it held everywhere). Only the exceptions travel,
/// so the answer of a healthy subtree is a few bytes whatever its size.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub id: u64,
    /// The root of the subtree that sends it.
    pub from: NodeId,
    pub answered: u32,
    /// Destinations that answered and where the condition did not hold.
    pub fails: Vec<NodeId>,
    /// Destinations that did not answer in time (dead, cut off, or too slow).
    pub silent: Vec<NodeId>,
}

impl Answer {
    /// True when every destination answered and the condition held on each.
    pub fn holds_everywhere(&self) -> bool {
        self.fails.is_empty() && self.silent.is_empty()
    }
    fn merge(&mut self, other: Answer) {
        self.answered += other.answered;
        self.fails.extend(other.fails);
        self.silent.extend(other.silent);
    }
}

/// A position's own part in a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Own {
    /// Not a destination (or the root).
    NotAsked,
    Now(bool),
    /// A destination that answers later (a waiting COMPARE), with [`Combiner::own`].
    Later,
}

/// One query a position is combining.
struct Pending<T> {
    answer: Answer,
    /// Children still to answer, with the destinations in their subtrees.
    waiting: HashMap<NodeId, Vec<NodeId>>,
    deadline: Instant,
    tag: T,
}

/// The answers a tree position is combining: started when a query passes down, fed with its
/// children's answers, finished (one [`Answer`] out) when every child has answered, a child's
/// link is lost, or the budget runs out. `T` is what the owner keeps with each query (the
/// root keeps the write half and the expected nodes).
pub struct Combiner<T> {
    me: NodeId,
    pending: HashMap<u64, Pending<T>>,
}

impl<T> Combiner<T> {
    pub fn new(me: NodeId) -> Combiner<T> {
        Combiner {
            me,
            pending: HashMap::new(),
        }
    }

    /// Starts combining `query`, which passes this position at `now`, at a position whose
    /// child routes are `routes` (`linked` says which children are connected now: the
    /// destinations under one that is not are silent at once). `own` is this node's answer, if
    /// it is a destination. Returns the answer at once when no child is to answer; otherwise
    /// the query's budget runs from `now` (see [`Combiner::expire`]).
    pub fn start(
        &mut self,
        now: Instant,
        query: &Query,
        own: Own,
        routes: &[Route],
        linked: impl Fn(NodeId) -> bool,
        tag: T,
    ) -> Option<(Answer, T)> {
        let mut answer = Answer {
            id: query.id,
            from: self.me,
            ..Answer::default()
        };
        let mut waiting = HashMap::new();
        match own {
            Own::NotAsked => {}
            Own::Now(holds) => {
                answer.answered = 1;
                if !holds {
                    answer.fails.push(self.me);
                }
            }
            // Comes later through [`Combiner::own`].
            Own::Later => {
                waiting.insert(self.me, vec![self.me]);
            }
        }
        for r in routes {
            let members: Vec<NodeId> = r
                .subtree
                .iter()
                .copied()
                .filter(|n| query.dest.includes(*n))
                .collect();
            if members.is_empty() {
                continue;
            }
            if linked(r.node) {
                waiting.insert(r.node, members);
            } else {
                answer.silent.extend(members);
            }
        }
        if waiting.is_empty() {
            return Some((answer, tag));
        }
        self.pending.insert(
            query.id,
            Pending {
                answer,
                waiting,
                deadline: now + query.budget(),
                tag,
            },
        );
        None
    }

    /// This node's own deferred answer (see [`Own::Later`]).
    pub fn own(&mut self, id: u64, holds: bool) -> Option<(Answer, T)> {
        self.record(Answer {
            id,
            from: self.me,
            answered: 1,
            fails: if holds { Vec::new() } else { vec![self.me] },
            silent: Vec::new(),
        })
    }

    /// A child's combined answer; returns the whole answer once it is complete. Answers to
    /// queries no longer pending (finished by a timeout) are dropped.
    pub fn record(&mut self, child: Answer) -> Option<(Answer, T)> {
        let p = self.pending.get_mut(&child.id)?;
        p.waiting.remove(&child.from)?;
        p.answer.merge(child);
        if p.waiting.is_empty() {
            let id = p.answer.id;
            return self.finish(id);
        }
        None
    }

    /// The link to `child` broke: every pending query waiting on it counts the destinations
    /// of its subtree silent now rather than at the deadline.
    pub fn lost(&mut self, child: NodeId) -> Vec<(Answer, T)> {
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.waiting.contains_key(&child))
            .map(|(id, _)| *id)
            .collect();
        let mut out = Vec::new();
        for id in ids {
            let p = self.pending.get_mut(&id).expect("listed");
            let members = p.waiting.remove(&child).expect("listed");
            p.answer.silent.extend(members);
            if p.waiting.is_empty() {
                out.extend(self.finish(id));
            }
        }
        out
    }

    /// Finishes every query whose budget has run out at `now`, naming the silent subtrees.
    pub fn expire(&mut self, now: Instant) -> Vec<(Answer, T)> {
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        let mut out = Vec::new();
        for id in ids {
            let p = self.pending.get_mut(&id).expect("listed");
            for (_, members) in p.waiting.drain() {
                p.answer.silent.extend(members);
            }
            out.extend(self.finish(id));
        }
        out
    }

    /// When the next pending query runs out of budget.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.deadline).min()
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn finish(&mut self, id: u64) -> Option<(Answer, T)> {
        let mut p = self.pending.remove(&id)?;
        p.answer.fails.sort_unstable();
        p.answer.silent.sort_unstable();
        Some((p.answer, p.tag))
    }
}

/// Sleeps until `at`, or forever when there is nothing to wait for (a `select!` branch).
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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
        self.wait_cond(Cond {
            var,
            cmp: Cmp::Ge,
            value,
        })
        .await;
    }
    /// TEST-EVENT on any condition: waits until `cond` holds; returns the variable then.
    pub async fn wait_cond(&self, cond: Cond) -> i64 {
        loop {
            let notified = self.inner.1.notified();
            let v = self.get(cond.var);
            if cond.holds(v) {
                return v;
            }
            notified.await;
        }
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

    /// Two children: one answers (with a failure below it), the other is lost; one answer
    /// comes out, naming both, and a late answer is dropped.
    #[test]
    fn combiner_merges_children_and_names_silent_subtrees() {
        // A virtual clock: every instant is this one plus an offset.
        let t0 = Instant::now();
        let mut c = Combiner::new(NodeId(0));
        let q = Query {
            id: 7,
            dest: Dest::All,
            budget_ms: 1000,
        };
        let routes = [route(1, &[1, 3]), route(2, &[2, 4])];
        assert!(
            c.start(t0, &q, Own::Now(true), &routes, |_| true, ())
                .is_none()
        );
        let child = Answer {
            id: 7,
            from: NodeId(1),
            answered: 2,
            fails: vec![NodeId(3)],
            silent: vec![],
        };
        assert!(c.record(child.clone()).is_none());
        let (a, ()) = c
            .lost(NodeId(2))
            .pop()
            .expect("complete once the last child is lost");
        assert_eq!(a.answered, 3);
        assert_eq!(a.fails, vec![NodeId(3)]);
        assert_eq!(a.silent, vec![NodeId(2), NodeId(4)]);
        assert!(!a.holds_everywhere());
        assert!(c.record(child).is_none() && c.pending() == 0);
        // A destination set outside one subtree waits only for the other; an unlinked child
        // is silent at once.
        let q = Query {
            id: 8,
            dest: Dest::nodes(vec![NodeId(4)]),
            budget_ms: 0,
        };
        let (a, ()) = c
            .start(t0, &q, Own::NotAsked, &routes, |_| false, ())
            .expect("nothing to wait for");
        assert_eq!((a.answered, a.silent), (0, vec![NodeId(4)]));
        assert!(
            c.start(t0, &q, Own::NotAsked, &routes, |_| true, ())
                .is_none()
        );
        let (a, ()) = c.expire(t0).pop().expect("budget of 0 ms ran out");
        assert_eq!(a.silent, vec![NodeId(4)]);
        assert_eq!(q.for_children().budget_ms, 0);
        // A deferred own answer completes the query like a child's.
        let q = Query {
            id: 9,
            dest: Dest::All,
            budget_ms: 1000,
        };
        assert!(c.start(t0, &q, Own::Later, &[], |_| true, ()).is_none());
        let (a, ()) = c.own(9, false).expect("own answer completes it");
        assert_eq!((a.answered, a.fails), (1, vec![NodeId(0)]));
    }

    /// The budget runs from the instant the query passed, on the clock the caller passes: a
    /// silent child is named exactly when the budget is spent, not a moment before, and the
    /// next deadline is that instant.
    #[test]
    fn a_silent_subtree_is_named_exactly_when_the_budget_runs_out() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut c: Combiner<()> = Combiner::new(NodeId(0));
        let routes = [route(1, &[1, 3]), route(2, &[2, 4])];
        let q = Query {
            id: 1,
            dest: Dest::All,
            budget_ms: 600,
        };
        // The query passes 100 ms into the run; one child answers, the other never does.
        assert!(
            c.start(t0 + ms(100), &q, Own::Now(true), &routes, |_| true, ())
                .is_none()
        );
        assert_eq!(c.next_deadline(), Some(t0 + ms(700)));
        let answered = Answer {
            id: 1,
            from: NodeId(1),
            answered: 2,
            fails: vec![],
            silent: vec![],
        };
        assert!(c.record(answered).is_none());
        assert!(c.expire(t0 + ms(699)).is_empty(), "budget not spent yet");
        let (a, ()) = c.expire(t0 + ms(700)).pop().expect("budget spent");
        assert_eq!((a.answered, a.silent), (3, vec![NodeId(2), NodeId(4)]));
        assert!(c.expire(t0 + ms(10_000)).is_empty() && c.next_deadline().is_none());
    }

    #[test]
    fn comparisons() {
        let c = |cmp| Cond {
            var: 1,
            cmp,
            value: 5,
        };
        let table = [
            (Cmp::Ge, [false, true, true]),
            (Cmp::Eq, [false, true, false]),
            (Cmp::Lt, [true, false, false]),
            (Cmp::Ne, [true, false, true]),
        ];
        for (cmp, want) in table {
            assert_eq!([4, 5, 6].map(|v| c(cmp).holds(v)), want, "{cmp:?}");
        }
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
