//! Links to children: one TCP connection per child, dialled by the parent, with a writer task
//! fed by a queue (so a slow child never stalls its parent) and a reader task that passes the
//! child's authenticated [`Up`] frames to the owner.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cosched_core::NodeId;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::frame::{Key, MAX_FRAME, frame_of_body, read_body};
use crate::mech::Up;
use crate::tree::{Dest, Route};

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
    tx: mpsc::UnboundedSender<Arc<Vec<u8>>>,
}

/// The child links of one tree position.
pub struct Children {
    key: Key,
    links: HashMap<NodeId, Child>,
    next_conn: u64,
    events: mpsc::UnboundedSender<ChildEvent>,
}

impl Children {
    pub fn new(key: Key, events: mpsc::UnboundedSender<ChildEvent>) -> Children {
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
            let _ = c.tx.send(topology_frame.clone());
        }
    }

    /// Forwards a frame to every child whose subtree holds a destination.
    pub fn route(&self, dest: &Dest, frame: Arc<Vec<u8>>) {
        for c in self.links.values() {
            if dest.reaches(&c.subtree) {
                let _ = c.tx.send(frame.clone());
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
    key: Key,
    node: NodeId,
    addr: String,
    conn: u64,
    events: mpsc::UnboundedSender<ChildEvent>,
) -> mpsc::UnboundedSender<Arc<Vec<u8>>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Arc<Vec<u8>>>();
    tokio::spawn(async move {
        let stream = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                eprintln!("storm: cannot reach child {node} at {addr}: {e}");
                let _ = events.send(ChildEvent::Lost { node, conn });
                return;
            }
            Err(_) => {
                eprintln!("storm: child {node} at {addr} did not accept within {DIAL_TIMEOUT:?}");
                let _ = events.send(ChildEvent::Lost { node, conn });
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let (mut rd, mut wr) = stream.into_split();
        let ev = events.clone();
        let reader = tokio::spawn(async move {
            loop {
                // The child was dialled at an address the authenticated topology gave.
                match read_body(&mut rd, MAX_FRAME).await {
                    Ok(body) => match key.open::<Up>(&body) {
                        Ok(msg) => {
                            if ev
                                .send(ChildEvent::Up {
                                    frame: frame_of_body(&body),
                                    msg,
                                })
                                .is_err()
                            {
                                return;
                            }
                        }
                        Err(e) => {
                            eprintln!("storm: dropping child {node} at {addr}: {e}");
                            break;
                        }
                    },
                    Err(crate::FrameError::Closed) => break,
                    Err(e) => {
                        eprintln!("storm: dropping child {node} at {addr}: {e}");
                        break;
                    }
                }
            }
            let _ = ev.send(ChildEvent::Lost { node, conn });
        });
        while let Some(frame) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                break;
            }
        }
        // The owner dropped this link (or the write failed): close both directions.
        reader.abort();
        let _ = wr.shutdown().await;
    });
    tx
}
