//! The transport side of a node manager: accepts its parent (whoever sends a valid
//! [`Down::Topology`] first), routes down-going messages to its children and up-going ones to
//! its parent, applies XFER and COMPARE-AND-WRITE writes to its [`Vars`], answers COMPARE
//! queries (and acknowledged XFERs) with one answer combined with its children's
//! ([`Combiner`]), and hands the payloads meant for it to the node manager.

use std::sync::Arc;
use std::time::Duration;

use cosched_core::NodeId;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

use crate::accept::{Admission, DropLog, Limits, accept};
use crate::frame::{Key, MAX_FRAME, MAX_HELLO, read_whole};
use crate::gather::{Gather, GatherId, Gathers};
use crate::keyring::Keyring;
use crate::link::{ChildEvent, Children};
use crate::mech::{Answer, Combiner, Down, DownOf, Own, Up, Vars, sleep_until};
use crate::tree::{Dest, Route, Topology};

/// What the transport hands to the node manager.
#[derive(Debug)]
pub enum Delivery {
    /// The payload of an XFER-AND-SIGNAL addressed to this node.
    Xfer(Payload),
    /// The node joined a (new) overlay.
    Topology(Topology),
    /// The connection to the parent broke; the node manager should register again.
    ParentLost,
}

/// An XFER's payload, where it lies in the frame it came in: the frame is shared with the
/// links that forward it, so the payload reaches the node manager (and a broadcast's chunk
/// its file) without a copy at this hop. The frame is freed when the last holder
/// drops it.
#[derive(Clone, Debug)]
pub struct Payload {
    frame: Arc<Vec<u8>>,
    range: std::ops::Range<usize>,
}

impl Payload {
    /// The last `n` bytes of this payload (a part that follows a message decoded from its
    /// start), without a copy.
    pub fn tail(&self, n: usize) -> Payload {
        let n = n.min(self.range.len());
        Payload {
            frame: self.frame.clone(),
            range: self.range.end - n..self.range.end,
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Payload {
        let range = 0..bytes.len();
        Payload {
            frame: Arc::new(bytes),
            range,
        }
    }
}

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.frame[self.range.clone()]
    }
}

/// Where `part` (a slice of `whole`) lies in `whole`.
fn range_in(whole: &[u8], part: &[u8]) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    debug_assert!(start + part.len() <= whole.len());
    start..start + part.len()
}

/// What the node manager sends up.
enum ToRoot {
    Signal(Vec<u8>),
    /// Its own contribution to a gathering.
    Gather(GatherId, Dest, Vec<u8>),
}

/// The node manager's handle on its transport.
#[derive(Clone)]
pub struct NodeHandle {
    pub vars: Vars,
    up: mpsc::UnboundedSender<ToRoot>,
}

impl NodeHandle {
    /// Sends a payload up the tree to the root (dropped if there is no parent right now).
    pub fn signal_up(&self, payload: Vec<u8>) {
        let _ = self.up.send(ToRoot::Signal(payload));
    }

    /// Contributes `payload` to gathering `id` of the nodes `dest` ([`crate::gather`]): it
    /// goes up combined with the contributions of this node's subtree, and reaches the root
    /// as a signal from this node.
    pub fn gather_up(&self, id: GatherId, dest: Dest, payload: Vec<u8>) {
        let _ = self.up.send(ToRoot::Gather(id, dest, payload));
    }
}

enum Ev {
    NewParent {
        conn: u64,
        writer: OwnedWriteHalf,
        topo: Topology,
        /// The key the topology was sealed with.
        key: Key,
    },
    FromParent {
        conn: u64,
        /// The key the frame was sealed with.
        key: Key,
        /// The whole frame as read, forwarded unchanged where it is not re-sealed.
        frame: Vec<u8>,
        /// The message, an XFER's payload given by where it lies in `frame`.
        msg: DownOf<std::ops::Range<usize>>,
    },
    ParentClosed {
        conn: u64,
    },
    /// This node's deferred answer to a waiting COMPARE.
    Own {
        id: u64,
        holds: bool,
    },
}

/// Starts the transport of node `me` on `listener`; returns the handle and the deliveries.
pub fn spawn_node(
    listener: TcpListener,
    key: impl Into<Keyring>,
    me: NodeId,
) -> (NodeHandle, mpsc::UnboundedReceiver<Delivery>) {
    let key = key.into();
    let (deliver_tx, deliver_rx) = mpsc::unbounded_channel();
    let (up_tx, up_rx) = mpsc::unbounded_channel();
    let vars = Vars::default();
    tokio::spawn(run(listener, key, me, vars.clone(), deliver_tx, up_rx));
    (NodeHandle { vars, up: up_tx }, deliver_rx)
}

async fn run(
    listener: TcpListener,
    key: Keyring,
    me: NodeId,
    vars: Vars,
    deliver: mpsc::UnboundedSender<Delivery>,
    mut up_rx: mpsc::UnboundedReceiver<ToRoot>,
) {
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<Ev>();
    let (child_tx, mut child_rx) = mpsc::unbounded_channel::<ChildEvent>();
    let mut children = Children::new(key.clone(), child_tx);
    // What this node seals with: the key its parent's last frame was sealed with. The root
    // chooses the key for the whole tree, and switches to a new one only once every node
    // accepts it, so no hop seals with a key its neighbour does not know yet (see
    // [`crate::keyring`]).
    let mut sealing: Key = key.current();
    let mut parent: Option<(u64, OwnedWriteHalf)> = None;
    let mut epoch = 0u64;
    let mut routes: Vec<Route> = Vec::new();
    let mut combiner: Combiner<()> = Combiner::new(me);
    let mut gathers = Gathers::new(me);
    let mut next_conn = 1u64;
    // Its parent (the machine manager or a node manager) dials it: peers are addresses.
    let admission: Admission<std::net::IpAddr> = Admission::new(Limits::default());
    let drops = DropLog::default();

    loop {
        tokio::select! {
            (stream, peer) = accept(&listener, "storm") => {
                let ticket = admission.admit(peer.ip());
                let (admission, drops) = (admission.clone(), drops.clone());
                let _ = stream.set_nodelay(true);
                crate::link::widen_buffers(&stream);
                let conn = next_conn;
                next_conn += 1;
                let (key, ev_tx) = (key.clone(), ev_tx.clone());
                tokio::spawn(async move {
                    let (rd, mut writer) = stream.into_split();
                    let mut rd = crate::frame::buffered(rd);
                    // Until its first frame proves the key, a peer may make this node hold
                    // at most MAX_HELLO bytes, for at most the first-frame time.
                    let first = match admission.first_frame(&mut rd, ticket, MAX_HELLO).await {
                        Err(e @ crate::accept::FirstFrameError::Displaced(_)) => {
                            crate::frame::write_busy(&mut writer).await;
                            Err(e.to_string())
                        }
                        r => r
                            .map_err(|e| e.to_string())
                            .and_then(|b| key.open_with::<Down>(&b).map_err(|e| e.to_string())),
                    };
                    let (topo, with) = match first {
                        Ok((Down::Topology(t), with)) => (t, with),
                        Ok(_) => { drops.dropped(format_args!("storm: dropping {peer}: first frame is not a topology")); return; }
                        Err(e) => { drops.dropped(format_args!("storm: dropping {peer}: {e}")); return; }
                    };
                    if ev_tx.send(Ev::NewParent { conn, writer, topo, key: with }).is_err() { return; }
                    loop {
                        match read_whole(&mut rd, MAX_FRAME).await {
                            Ok(frame) => match key.open_with::<DownOf<&[u8]>>(&frame[4..]) {
                                Ok((msg, with)) => {
                                    let msg = msg.map_payload(|p| range_in(&frame, p));
                                    if ev_tx.send(Ev::FromParent { conn, key: with, frame, msg }).is_err() { return; }
                                }
                                Err(e) => { tracing::warn!("storm: dropping parent {peer}: {e}"); break; }
                            },
                            Err(crate::FrameError::Closed) => break,
                            Err(e) => { tracing::warn!("storm: dropping parent {peer}: {e}"); break; }
                        }
                    }
                    let _ = ev_tx.send(Ev::ParentClosed { conn });
                });
            }
            Some(ev) = ev_rx.recv() => match ev {
                Ev::NewParent { conn, writer, topo, key: with } => {
                    if topo.epoch < epoch {
                        continue; // a stale parent from an older overlay
                    }
                    sealing = with;
                    parent = Some((conn, writer));
                    epoch = topo.epoch;
                    routes = apply(&mut children, &sealing, me, &topo);
                    let _ = deliver.send(Delivery::Topology(topo));
                    for g in gathers.flush() { gather_up(&mut parent, &sealing, g).await; }
                }
                Ev::FromParent { conn, key: with, frame, msg } => {
                    if parent.as_ref().map(|p| p.0) != Some(conn) {
                        continue;
                    }
                    sealing = with;
                    match msg {
                        DownOf::Topology(topo) => {
                            if topo.epoch >= epoch {
                                epoch = topo.epoch;
                                let before = routes.clone();
                                routes = apply(&mut children, &sealing, me, &topo);
                                let _ = deliver.send(Delivery::Topology(topo));
                                if routes != before {
                                    for g in gathers.flush() { gather_up(&mut parent, &sealing, g).await; }
                                }
                            }
                        }
                        DownOf::Xfer { dest, write, payload: range, ack } => {
                            let mine = dest.includes(me);
                            let frame = Arc::new(frame);
                            match &ack {
                                None => children.route(&dest, frame.clone()),
                                Some(q) => children.route(&dest, Arc::new(sealing.seal(&DownOf::Xfer { dest: dest.clone(), write, payload: &frame[range.clone()], ack: Some(q.for_children()) }))),
                            }
                            if mine {
                                if let Some((var, value)) = write {
                                    vars.set(var, value);
                                }
                                let _ = deliver.send(Delivery::Xfer(Payload { frame, range }));
                            }
                            if let Some(q) = ack {
                                // Holding: the payload is in the node manager's queue.
                                let own = if mine { Own::Now(true) } else { Own::NotAsked };
                                let done = combiner.start(tokio::time::Instant::now(), &q, own, &routes, |n| children.linked(n), ());
                                if let Some((a, ())) = done { answer_up(&mut parent, &sealing, a).await; }
                            }
                        }
                        DownOf::Compare { query, cond, wait_ms } => {
                            children.route(&query.dest, Arc::new(sealing.seal(&Down::Compare { query: query.for_children(), cond, wait_ms })));
                            let own = match query.dest.includes(me).then(|| cond.holds(vars.get(cond.var))) {
                                None => Own::NotAsked,
                                Some(false) if wait_ms > 0 => {
                                    // TEST-EVENT with a deadline well inside the budget, so the
                                    // answer ("not yet") still beats the parent's deadline.
                                    let wait = Duration::from_millis(wait_ms.min(query.budget_ms / 2) as u64);
                                    let (vars, ev_tx, id) = (vars.clone(), ev_tx.clone(), query.id);
                                    tokio::spawn(async move {
                                        let holds = tokio::time::timeout(wait, vars.wait_cond(cond)).await.is_ok();
                                        let _ = ev_tx.send(Ev::Own { id, holds });
                                    });
                                    Own::Later
                                }
                                Some(holds) => Own::Now(holds),
                            };
                            let done = combiner.start(tokio::time::Instant::now(), &query, own, &routes, |n| children.linked(n), ());
                            if let Some((a, ())) = done { answer_up(&mut parent, &sealing, a).await; }
                        }
                        DownOf::Write { dest, var, value } => {
                            children.route(&dest, Arc::new(frame));
                            if dest.includes(me) {
                                vars.set(var, value);
                            }
                        }
                    }
                }
                Ev::Own { id, holds } => {
                    if let Some((a, ())) = combiner.own(id, holds) { answer_up(&mut parent, &sealing, a).await; }
                }
                Ev::ParentClosed { conn } => {
                    if parent.as_ref().map(|p| p.0) == Some(conn) {
                        parent = None;
                        let _ = deliver.send(Delivery::ParentLost);
                    }
                }
            },
            Some(ev) = child_rx.recv() => match ev {
                ChildEvent::Up { msg: Up::Answer(a), .. } => {
                    if let Some((a, ())) = combiner.record(a) { answer_up(&mut parent, &sealing, a).await; }
                }
                ChildEvent::Up { msg: Up::Gather(g), .. } => {
                    for g in gathers.add(tokio::time::Instant::now(), &routes, g) { gather_up(&mut parent, &sealing, g).await; }
                }
                ChildEvent::Up { frame, .. } => send_parent(&mut parent, &frame).await,
                ChildEvent::Lost { node, conn } => {
                    if children.lost(node, conn) {
                        for (a, ()) in combiner.lost(node) { answer_up(&mut parent, &sealing, a).await; }
                        for g in gathers.flush() { gather_up(&mut parent, &sealing, g).await; }
                    }
                }
            },
            _ = sleep_until(combiner.next_deadline()) => {
                for (a, ()) in combiner.expire(tokio::time::Instant::now()) {
                    answer_up(&mut parent, &sealing, a).await;
                }
            }
            msg = up_rx.recv() => match msg {
                None => return,
                Some(ToRoot::Signal(payload)) => {
                    send_parent(&mut parent, &sealing.seal(&Up::Signal { from: me, payload })).await;
                }
                Some(ToRoot::Gather(id, dest, payload)) => {
                    let g = Gather { id, dest, parts: vec![(me, payload)] };
                    for g in gathers.add(tokio::time::Instant::now(), &routes, g) { gather_up(&mut parent, &sealing, g).await; }
                }
            },
        }
    }
}

/// Reconfigures the child links for `topo`; returns this node's child routes.
fn apply(children: &mut Children, key: &Key, me: NodeId, topo: &Topology) -> Vec<Route> {
    let routes = match topo.position(me) {
        Some(p) => topo.routes(p),
        None => Vec::new(),
    };
    children.reconcile(
        routes.clone(),
        Arc::new(key.seal(&Down::Topology(topo.clone()))),
    );
    routes
}

async fn answer_up(parent: &mut Option<(u64, OwnedWriteHalf)>, key: &Key, a: Answer) {
    send_parent(parent, &key.seal(&Up::Answer(a))).await;
}

async fn gather_up(parent: &mut Option<(u64, OwnedWriteHalf)>, key: &Key, g: Gather) {
    send_parent(parent, &key.seal(&Up::Gather(g))).await;
}

async fn send_parent(parent: &mut Option<(u64, OwnedWriteHalf)>, frame: &[u8]) {
    if let Some((_, w)) = parent
        && w.write_all(frame).await.is_err()
    {
        *parent = None;
    }
}
