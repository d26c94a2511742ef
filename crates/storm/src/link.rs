//! Links to children: one TCP connection per child, dialled by the parent, with a writer task
//! fed by queues (so a slow child never stalls its parent) and a reader task that passes the
//! child's authenticated [`Up`] frames to the owner.
//!
//! Each link has two queues: frames of up to [`BULK_FRAME`] bytes (queries, heartbeats,
//! writes, launches) go before bigger ones (a file broadcast's chunks), so a COMPARE never
//! waits behind the megabytes of chunks queued on a link. With 256 node managers on two cores
//! a heartbeat that queued behind every slot of chunks at every hop missed its deadline and
//! the node was declared dead mid-broadcast. Order is kept within each queue; a small frame
//! may only overtake big ones, never the reverse, and the machine manager sends nothing small
//! that must follow a chunk before every node holds that chunk (it learns so by COMPARE).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cosched_core::NodeId;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::frame::{MAX_FRAME, read_whole};
use crate::keyring::Keyring;
use crate::mech::Up;
use crate::tree::{Dest, Route};

/// Frames longer than this (bytes, length prefix included) wait behind shorter ones.
pub const BULK_FRAME: usize = 64 << 10;

/// How long a parent waits to connect to a child before giving up on it.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// What the children of a node (or of the root) report.
#[derive(Debug)]
pub enum ChildEvent {
    /// An authenticated frame from below: the decoded message and its bytes, to forward as is.
    Up { frame: Vec<u8>, msg: Up },
    /// The link to this child broke or could not be made (`conn` tells which attempt).
    Lost { node: NodeId, conn: u64 },
}

struct Child {
    addr: String,
    subtree: Vec<NodeId>,
    conn: u64,
    tx: Queues,
}

/// The two queues of a link's writer: frames of at most [`BULK_FRAME`] bytes, and bigger ones.
struct Queues {
    small: mpsc::UnboundedSender<Arc<Vec<u8>>>,
    bulk: mpsc::UnboundedSender<Arc<Vec<u8>>>,
}

impl Queues {
    fn send(&self, frame: Arc<Vec<u8>>) {
        let q = if frame.len() > BULK_FRAME {
            &self.bulk
        } else {
            &self.small
        };
        let _ = q.send(frame);
    }
}

/// The child links of one tree position.
pub struct Children {
    key: Keyring,
    links: HashMap<NodeId, Child>,
    next_conn: u64,
    events: mpsc::UnboundedSender<ChildEvent>,
}

impl Children {
    pub fn new(key: Keyring, events: mpsc::UnboundedSender<ChildEvent>) -> Children {
        Children {
            key,
            links: HashMap::new(),
            next_conn: 1,
            events,
        }
    }

    /// Makes the links match `routes`: keeps links whose child and address are unchanged,
    /// dials new ones, closes the rest; then sends `topology_frame` to every child.
    pub fn reconcile(&mut self, routes: Vec<Route>, topology_frame: Arc<Vec<u8>>) {
        let wanted: HashMap<NodeId, &Route> = routes.iter().map(|r| (r.node, r)).collect();
        self.links
            .retain(|n, c| wanted.get(n).is_some_and(|r| r.addr == c.addr));
        for r in &routes {
            if let Some(c) = self.links.get_mut(&r.node) {
                c.subtree = r.subtree.clone();
            } else {
                let conn = self.next_conn;
                self.next_conn += 1;
                let tx = spawn_link(
                    self.key.clone(),
                    r.node,
                    r.addr.clone(),
                    conn,
                    self.events.clone(),
                );
                self.links.insert(
                    r.node,
                    Child {
                        addr: r.addr.clone(),
                        subtree: r.subtree.clone(),
                        conn,
                        tx,
                    },
                );
            }
        }
        for c in self.links.values() {
            c.tx.send(topology_frame.clone());
        }
    }

    /// Forwards a frame to every child whose subtree holds a destination.
    pub fn route(&self, dest: &Dest, frame: Arc<Vec<u8>>) {
        for c in self.links.values() {
            if dest.reaches(&c.subtree) {
                c.tx.send(frame.clone());
            }
        }
    }

    /// Forgets a broken link (if `conn` is still the current one for that child).
    pub fn lost(&mut self, node: NodeId, conn: u64) -> bool {
        if self.links.get(&node).is_some_and(|c| c.conn == conn) {
            self.links.remove(&node);
            true
        } else {
            false
        }
    }

    /// Whether a link to `node` is up (or being dialled).
    pub fn linked(&self, node: NodeId) -> bool {
        self.links.contains_key(&node)
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }
}

fn spawn_link(
    key: Keyring,
    node: NodeId,
    addr: String,
    conn: u64,
    events: mpsc::UnboundedSender<ChildEvent>,
) -> Queues {
    let (small, mut small_rx) = mpsc::unbounded_channel::<Arc<Vec<u8>>>();
    let (bulk, mut bulk_rx) = mpsc::unbounded_channel::<Arc<Vec<u8>>>();
    tokio::spawn(async move {
        let stream = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!("storm: cannot reach child {node} at {addr}: {e}");
                let _ = events.send(ChildEvent::Lost { node, conn });
                return;
            }
            Err(_) => {
                tracing::warn!(
                    "storm: child {node} at {addr} did not accept within {DIAL_TIMEOUT:?}"
                );
                let _ = events.send(ChildEvent::Lost { node, conn });
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        widen_buffers(&stream);
        let (rd, mut wr) = stream.into_split();
        let mut rd = crate::frame::buffered(rd);
        let ev = events.clone();
        let reader = tokio::spawn(async move {
            loop {
                // The child was dialled at an address the authenticated topology gave.
                match read_whole(&mut rd, MAX_FRAME).await {
                    Ok(frame) => match key.open::<Up>(&frame[4..]) {
                        Ok(msg) => {
                            if ev.send(ChildEvent::Up { frame, msg }).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            tracing::warn!("storm: dropping child {node} at {addr}: {e}");
                            break;
                        }
                    },
                    Err(crate::FrameError::Closed) => break,
                    Err(e) => {
                        tracing::warn!("storm: dropping child {node} at {addr}: {e}");
                        break;
                    }
                }
            }
            let _ = ev.send(ChildEvent::Lost { node, conn });
        });
        loop {
            let frame = tokio::select! {
                biased;
                Some(f) = small_rx.recv() => f,
                Some(f) = bulk_rx.recv() => f,
                else => break,
            };
            if wr.write_all(&frame).await.is_err() {
                break;
            }
        }
        // The owner dropped this link (or the write failed): close both directions.
        reader.abort();
        let _ = wr.shutdown().await;
    });
    Queues { small, bulk }
}

/// The socket buffer a tree link asks for, each way: room for several 512 KiB chunk frames.
const LINK_BUFFER: usize = 4 << 20;

/// Asks for [`LINK_BUFFER`] of send and receive buffer on a tree link (the kernel caps it at
/// `net.core.wmem_max` / `rmem_max`). With the defaults a 512 KiB chunk frame went out in
/// five or so partial writes, each a wait for the peer to drain the socket and a wake-up of
/// both ends; on a host running many node managers those wake-ups were a large part of a
/// broadcast's CPU. A failure leaves the kernel's defaults, which still work.
pub(crate) fn widen_buffers(stream: &TcpStream) {
    let s = socket2::SockRef::from(stream);
    let _ = s.set_send_buffer_size(LINK_BUFFER);
    let _ = s.set_recv_buffer_size(LINK_BUFFER);
}
