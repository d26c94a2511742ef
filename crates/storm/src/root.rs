//! The transport side of the machine manager: position 0 of the tree. It announces the
//! overlay, sends XFER-AND-SIGNAL, COMPARE and write messages down, combines its children's
//! answers into one per query, applies the write half of a COMPARE-AND-WRITE when the answer
//! holds everywhere, and passes what comes up to its owner as [`RootEvent`]s.
//!
//! The links and the combining run in one task (spawned by [`Root::new`]); the [`Root`]
//! handle only sends it commands, so the machine manager's loop never blocks on the tree.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cosched_core::NodeId;
use tokio::sync::mpsc;

use crate::keyring::Keyring;
use crate::link::{ChildEvent, Children};
use crate::mech::{Answer, Combiner, Cond, Down, Own, Query, Up, Var, sleep_until};
use crate::tree::{Dest, Route, Topology};

/// What the root hands its owner.
#[derive(Debug)]
pub enum RootEvent {
    /// A node manager's report.
    Signal { from: NodeId, payload: Vec<u8> },
    /// The one combined answer to a query ([`Root::compare`], [`Root::xfer_acked`]): the
    /// sender's completion event.
    Answer(Outcome),
}

/// The combined answer of a whole query, as the root delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub answer: Answer,
    /// The destinations that were members of the overlay when the query left.
    pub expected: Vec<NodeId>,
    /// The write half was sent (the comparison held on every destination).
    pub written: bool,
}

impl Outcome {
    pub fn id(&self) -> u64 {
        self.answer.id
    }
    pub fn holds_everywhere(&self) -> bool {
        self.answer.holds_everywhere()
    }
    /// The destinations that answered and where the condition held.
    pub fn held(&self) -> Vec<NodeId> {
        self.expected
            .iter()
            .copied()
            .filter(|n| {
                self.answer.fails.binary_search(n).is_err()
                    && self.answer.silent.binary_search(n).is_err()
            })
            .collect()
    }
}

/// Counters a test (or a status page) can read: how many answer frames reached the root from
/// its children, and how many combined answers it delivered. Per query, the first is at most
/// the root's fan-out and the second exactly one, whatever the node count.
#[derive(Debug, Default)]
pub struct RootStats {
    pub answer_frames: AtomicU64,
    /// Frames of signals and gatherings received from the children.
    pub signal_frames: AtomicU64,
    pub outcomes: AtomicU64,
}

enum Ctl {
    Members(Vec<Route>, Arc<Vec<u8>>),
    Route(Dest, Arc<Vec<u8>>),
    Query {
        query: Query,
        frame: Arc<Vec<u8>>,
        write: Option<(Var, i64)>,
        expected: Vec<NodeId>,
    },
}

/// What the root keeps with each query it combines.
struct Tag {
    write: Option<(Var, i64)>,
    dest: Dest,
    expected: Vec<NodeId>,
}

pub struct Root {
    key: Keyring,
    topo: Topology,
    ctl: mpsc::UnboundedSender<Ctl>,
    next_query: u64,
    stats: Arc<RootStats>,
}

impl Root {
    /// A root with no members yet; what comes up arrives on the returned receiver.
    pub fn new(key: impl Into<Keyring>, fanout: u32) -> (Root, mpsc::UnboundedReceiver<RootEvent>) {
        let key = key.into();
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let stats = Arc::new(RootStats::default());
        tokio::spawn(run(key.clone(), ctl_rx, out_tx, stats.clone()));
        let topo = Topology {
            epoch: 0,
            fanout: fanout.max(1),
            members: Vec::new(),
        };
        (
            Root {
                key,
                topo,
                ctl: ctl_tx,
                next_query: 1,
                stats,
            },
            out_rx,
        )
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn stats(&self) -> Arc<RootStats> {
        self.stats.clone()
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
        let _ = self.ctl.send(Ctl::Members(self.topo.routes(0), frame));
    }

    /// XFER-AND-SIGNAL: delivers `payload` to `dest`, setting `write` on each first.
    pub fn xfer(&self, dest: &Dest, write: Option<(Var, i64)>, payload: Vec<u8>) {
        let frame = Arc::new(self.key.seal(&Down::Xfer {
            dest: dest.clone(),
            write,
            payload,
            ack: None,
        }));
        let _ = self.ctl.send(Ctl::Route(dest.clone(), frame));
    }

    /// XFER-AND-SIGNAL with the sender's completion event: as [`Root::xfer`], and one
    /// [`RootEvent::Answer`] with the returned id once every destination holds the payload
    /// (or `budget` ran out, naming the ones that did not answer).
    pub fn xfer_acked(
        &mut self,
        dest: &Dest,
        write: Option<(Var, i64)>,
        payload: Vec<u8>,
        budget: Duration,
    ) -> u64 {
        let query = self.query(dest, budget);
        let frame = Arc::new(self.key.seal(&Down::Xfer {
            dest: dest.clone(),
            write,
            payload,
            ack: Some(query.for_children()),
        }));
        self.send_query(query, frame, None)
    }

    /// COMPARE-AND-WRITE: evaluates `cond` on every node of `dest`; one
    /// [`RootEvent::Answer`] with the returned id comes back, after every destination answered
    /// or `budget` ran out. If it held everywhere and `write` is given, `write` is set on every
    /// destination before the answer is delivered ([`Outcome::written`]).
    pub fn compare(
        &mut self,
        dest: &Dest,
        cond: Cond,
        write: Option<(Var, i64)>,
        budget: Duration,
    ) -> u64 {
        self.compare_waiting(dest, cond, write, budget, Duration::ZERO)
    }

    /// [`Root::compare`] where a destination on which `cond` does not hold yet waits up to
    /// `wait` (at most half its budget) for it to hold before answering (see
    /// [`Down::Compare`]): one round trip tells when every node has reached a value.
    pub fn compare_waiting(
        &mut self,
        dest: &Dest,
        cond: Cond,
        write: Option<(Var, i64)>,
        budget: Duration,
        wait: Duration,
    ) -> u64 {
        let query = self.query(dest, budget);
        let frame = Arc::new(self.key.seal(&Down::Compare {
            query: query.for_children(),
            cond,
            wait_ms: wait.as_millis().min(u32::MAX as u128) as u32,
        }));
        self.send_query(query, frame, write)
    }

    fn query(&mut self, dest: &Dest, budget: Duration) -> Query {
        let id = self.next_query;
        self.next_query += 1;
        Query {
            id,
            dest: dest.clone(),
            budget_ms: budget.as_millis().min(u32::MAX as u128) as u32,
        }
    }

    fn send_query(&self, query: Query, frame: Arc<Vec<u8>>, write: Option<(Var, i64)>) -> u64 {
        let id = query.id;
        let expected = self
            .topo
            .members
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| query.dest.includes(*n))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let _ = self.ctl.send(Ctl::Query {
            query,
            frame,
            write,
            expected,
        });
        id
    }
}

async fn run(
    key: Keyring,
    mut ctl: mpsc::UnboundedReceiver<Ctl>,
    out: mpsc::UnboundedSender<RootEvent>,
    stats: Arc<RootStats>,
) {
    let (child_tx, mut child_rx) = mpsc::unbounded_channel();
    let mut children = Children::new(key.clone(), child_tx);
    let mut routes: Vec<Route> = Vec::new();
    // The root is no node: its own id never appears in an answer's lists.
    let mut combiner: Combiner<Tag> = Combiner::new(NodeId(u32::MAX));
    let finish = |children: &Children, a: Answer, t: Tag| {
        let mut written = false;
        if let Some((var, value)) = t.write
            && a.holds_everywhere()
        {
            let frame = Arc::new(key.seal(&Down::Write {
                dest: t.dest.clone(),
                var,
                value,
            }));
            children.route(&t.dest, frame);
            written = true;
        }
        stats.outcomes.fetch_add(1, Ordering::Relaxed);
        let _ = out.send(RootEvent::Answer(Outcome {
            answer: a,
            expected: t.expected,
            written,
        }));
    };
    loop {
        tokio::select! {
            // Commands first: a query is registered before any answer to it can be read.
            biased;
            c = ctl.recv() => match c {
                None => return,
                Some(Ctl::Members(r, frame)) => {
                    children.reconcile(r.clone(), frame);
                    routes = r;
                }
                Some(Ctl::Route(dest, frame)) => children.route(&dest, frame),
                Some(Ctl::Query { query, frame, write, expected }) => {
                    let dest = query.dest.clone();
                    children.route(&dest, frame);
                    let tag = Tag { write, dest, expected };
                    if let Some((a, t)) = combiner.start(tokio::time::Instant::now(), &query, Own::NotAsked, &routes, |n| children.linked(n), tag) {
                        finish(&children, a, t);
                    }
                }
            },
            Some(ev) = child_rx.recv() => match ev {
                ChildEvent::Up { msg: Up::Answer(a), .. } => {
                    stats.answer_frames.fetch_add(1, Ordering::Relaxed);
                    if let Some((a, t)) = combiner.record(a) {
                        finish(&children, a, t);
                    }
                }
                ChildEvent::Up { msg: Up::Signal { from, payload }, .. } => {
                    stats.signal_frames.fetch_add(1, Ordering::Relaxed);
                    let _ = out.send(RootEvent::Signal { from, payload });
                }
                ChildEvent::Up { msg: Up::Gather(g), .. } => {
                    // A gathering's parts reach the machine manager as each contributor's
                    // signal: combining is the tree's business alone.
                    stats.signal_frames.fetch_add(1, Ordering::Relaxed);
                    for (from, payload) in g.parts {
                        let _ = out.send(RootEvent::Signal { from, payload });
                    }
                }
                ChildEvent::Lost { node, conn } => {
                    if children.lost(node, conn) {
                        for (a, t) in combiner.lost(node) {
                            finish(&children, a, t);
                        }
                    }
                }
            },
            _ = sleep_until(combiner.next_deadline()) => {
                for (a, t) in combiner.expire(tokio::time::Instant::now()) {
                    finish(&children, a, t);
                }
            }
        }
    }
}
