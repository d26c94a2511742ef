//! The machine manager's part of a file broadcast (cosched_proto::bcast): it takes the client's chunks
//! and passes each down the tree as one XFER-AND-SIGNAL, at most `slots` ahead of the chunks
//! every destination holds, learning what they hold by COMPARE (≥ on `VAR_BCAST_HELD`), and
//! at the end releases the copies by COMPARE-AND-WRITE once each node has checked its own.
//! The file's hash (BLAKE3) is checked here, once, as the chunks pass (see cosched_proto::bcast).
//!
//! One transfer runs at a time. A client request that must wait (a chunk while every slot is
//! taken, the finish until the copies are checked) is answered later. Every `slots / 2`-th
//! chunk sent (each one with fewer than 4 slots, and the last) gets a COMPARE in flight, a
//! waiting one (`Root::compare_waiting`): a node that has not written the chunk yet answers
//! once it has (or "not yet" after [`WAIT`], and the machine manager asks again), so no one
//! polls and the pipeline keeps up to `slots` chunks moving. Holding chunk k means holding
//! every chunk before it (a node writes them in order), so one answer frees the slots of
//! the chunks before it too: asking for every chunk sent twice as many small frames through
//! every node for the same pacing (6–7 % of a 12 MB broadcast's CPU on 64 node managers).
//! A destination
//! that does not answer within [`BUDGET`] (dead, cut off, hung) fails the transfer with its
//! name: the others drop their partial copies and the client gets the error.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cosched_core::NodeId;
use cosched_storm::{Cmp, Cond, Dest, Outcome, Var};
use tokio::sync::oneshot;

use super::shell::{Shell, stamp};
use cosched_proto::bcast::{MAX_CHUNK, held, state};
use cosched_proto::proto::*;

/// How long one query may wait for the tree's answer.
pub const BUDGET: Duration = Duration::from_secs(3);
/// How long a node waits for the condition before answering "not yet".
pub const WAIT: Duration = Duration::from_secs(1);
/// How long a node may take to create its file, or to check its copy.
const DECIDE_WITHIN: Duration = Duration::from_secs(30);
/// A transfer whose client went quiet for this long may be replaced by a new one.
const ABANDONED_AFTER: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for every node to have created its file (COMPARE = open) ...
    Opening,
    /// ... that found a node not open yet: waiting for every node to have tried (COMPARE ≥
    /// open: open, or failed) ...
    OpenChecking,
    /// ... then COMPARE = open once more, which names the nodes that could not create it.
    OpenRechecking,
    Streaming,
    /// Every chunk sent: COMPARE = verified AND WRITE ready, each node answering once it has
    /// checked its copy (one round trip on the way that succeeds).
    Deciding,
    /// That found a node not verified (failed, or slow to decide): waiting for every node to
    /// have decided (COMPARE ≠ open) ...
    Checking,
    /// ... then COMPARE = verified AND WRITE ready once more, which fails the transfer naming
    /// the nodes whose copies did not check out.
    Releasing,
}

pub struct Transfer {
    id: u32,
    /// The user who began it: only they (or an administrator) may send its chunks, finish
    /// or abort it.
    owner: u32,
    nodes: Vec<NodeId>,
    names: HashMap<NodeId, String>,
    size: u64,
    chunk: u32,
    slots: u32,
    chunks: u32,
    /// The hash (BLAKE3) of the chunks accepted so far, compared with the client's at the end.
    hash: blake3::Hasher,
    sent: u32,
    /// Chunks every destination holds.
    held: u32,
    phase: Phase,
    /// The COMPARE of the phase in flight, if any.
    query: Option<u64>,
    /// The COMPARE in flight for each chunk not yet held everywhere (query id → chunk).
    chunk_queries: HashMap<u64, u32>,
    /// A chunk waiting for a free slot.
    parked: Option<(u32, Vec<u8>, oneshot::Sender<Response>)>,
    /// The Begin or Finish request waiting for its answer.
    reply: Option<oneshot::Sender<Response>>,
    finishing: bool,
    phase_since: Instant,
    last_request: Instant,
}

impl Transfer {
    fn dest(&self) -> Dest {
        Dest::nodes(self.nodes.clone())
    }
    fn named(&self, nodes: &[NodeId]) -> String {
        let names: Vec<&str> = nodes
            .iter()
            .map(|n| self.names.get(n).map(String::as_str).unwrap_or("?"))
            .collect();
        names.join(", ")
    }
}

impl Shell {
    pub(super) fn bcast_request(
        &mut self,
        op: BcastOp,
        caller: Caller,
        tx: oneshot::Sender<Response>,
    ) {
        let err = |tx: oneshot::Sender<Response>, why: String| {
            let _ = tx.send(Response::Error(why));
        };
        let op_id = match &op {
            BcastOp::Begin { .. } => None,
            BcastOp::Chunk { id, .. } | BcastOp::Finish { id, .. } | BcastOp::Abort { id, .. } => {
                Some(*id)
            }
        };
        if let Some(id) = op_id
            && let Some(t) = self.bcast.as_ref().filter(|t| t.id == id)
            && caller.uid != t.owner
            && !caller.admin
        {
            return err(tx, format!("bcast {id} belongs to another user"));
        }
        match op {
            BcastOp::Begin {
                dest,
                size,
                chunk,
                slots,
                nodes,
                scope,
                user,
            } => {
                // Whose copy it is: the caller's, or, for an administrator, the user named
                // (as a submission names the user a job runs as). Only an administrator
                // publishes: a published copy runs in every user's jobs.
                let uid = match user {
                    Some(u) if u != caller.uid && !caller.admin => {
                        return err(
                            tx,
                            format!(
                                "permission denied: only an administrator stages files for another user (uid {u})"
                            ),
                        );
                    }
                    Some(u) => u,
                    None => caller.uid,
                };
                if scope == Scope::Public && !caller.admin {
                    return err(
                        tx,
                        "permission denied: only an administrator publishes a file to every user's jobs (--publish); broadcast it without --publish to stage it for your own jobs".into(),
                    );
                }
                if let Err(why) = cosched_proto::bcast::check_dest(&dest, scope) {
                    return err(tx, why);
                }
                if let Some(t) = &self.bcast {
                    if t.last_request.elapsed() < ABANDONED_AFTER {
                        return err(
                            tx,
                            format!(
                                "a broadcast (transfer {}) is running; try again once it ends",
                                t.id
                            ),
                        );
                    }
                    let why = format!("transfer {} abandoned by its client", t.id);
                    self.bcast_fail(why);
                }
                if !(1..=MAX_CHUNK).contains(&chunk) || slots == 0 {
                    return err(
                        tx,
                        format!("chunk must be 1..={MAX_CHUNK} bytes, slots ≥ 1"),
                    );
                }
                let members = self.core.tree_nodes();
                let chosen: Vec<(NodeId, String)> = if nodes.is_empty() {
                    members
                } else {
                    let mut v = Vec::new();
                    for name in &nodes {
                        match members.iter().find(|(_, n)| n == name) {
                            Some(m) => v.push(m.clone()),
                            None => {
                                return err(
                                    tx,
                                    format!(
                                        "node {name:?} is not up in the tree (`cosched status` lists the nodes)"
                                    ),
                                );
                            }
                        }
                    }
                    v
                };
                if chosen.is_empty() {
                    return err(tx, "no node is up in the tree".into());
                }
                let now_s = cosched_proto::util::now().as_micros() / 1_000_000;
                // Growing across restarts of the machine manager: node variables outlive it.
                let id = (now_s as u32).max(self.bcast_next);
                self.bcast_next = id + 1;
                let chunks = size.div_ceil(chunk as u64) as u32;
                let t = Transfer {
                    id,
                    owner: caller.uid,
                    nodes: chosen.iter().map(|(n, _)| *n).collect(),
                    names: chosen.iter().cloned().collect(),
                    size,
                    chunk,
                    slots,
                    chunks,
                    hash: blake3::Hasher::new(),
                    sent: 0,
                    held: 0,
                    phase: Phase::Opening,
                    query: None,
                    chunk_queries: HashMap::new(),
                    parked: None,
                    reply: Some(tx),
                    finishing: false,
                    phase_since: Instant::now(),
                    last_request: Instant::now(),
                };
                tracing::info!(
                    "mm: bcast {id}: {size} bytes as {dest:?} ({scope:?} copy of uid {uid}) to {} nodes, {chunks} chunks of {chunk} bytes, {slots} slots",
                    t.nodes.len()
                );
                let msg = ToNode::BcastBegin {
                    id,
                    dest,
                    size,
                    uid,
                    scope,
                };
                self.root
                    .xfer(&t.dest(), None, msg.payload(stamp(&self.root)));
                self.bcast = Some(t);
                self.bcast_ask();
            }
            BcastOp::Chunk { id, k, data } => {
                let Some(t) = self.bcast.as_mut().filter(|t| t.id == id) else {
                    return err(tx, self.bcast_gone(id));
                };
                t.last_request = Instant::now();
                let last = k + 1 == t.chunks;
                let want = if last {
                    t.size - (k as u64) * t.chunk as u64
                } else {
                    t.chunk as u64
                };
                if t.phase != Phase::Streaming
                    || k != t.sent
                    || k >= t.chunks
                    || data.len() as u64 != want
                    || t.parked.is_some()
                {
                    return err(
                        tx,
                        format!("bcast {id}: chunk {k} out of order or of the wrong size"),
                    );
                }
                t.hash.update(&data);
                t.parked = Some((k, data, tx));
                self.bcast_pump();
            }
            BcastOp::Finish { id, blake3 } => {
                let Some(t) = self.bcast.as_mut().filter(|t| t.id == id) else {
                    return err(tx, self.bcast_gone(id));
                };
                t.last_request = Instant::now();
                if t.sent != t.chunks || t.reply.is_some() {
                    return err(
                        tx,
                        format!(
                            "bcast {id}: finished after {} of {} chunks",
                            t.sent, t.chunks
                        ),
                    );
                }
                if <[u8; 32]>::from(t.hash.finalize()) != blake3 {
                    let why = format!(
                        "bcast {id}: the chunks passed on do not have the hash (BLAKE3) of what the client read; nothing was launched"
                    );
                    self.bcast_fail(why.clone());
                    return err(tx, why);
                }
                t.reply = Some(tx);
                t.finishing = true;
                self.bcast_pump();
            }
            BcastOp::Abort { id, why } => {
                if self.bcast.as_ref().is_none_or(|t| t.id != id) {
                    return err(tx, self.bcast_gone(id));
                }
                self.bcast_fail(format!("bcast {id}: {why}; nothing was launched"));
                let _ = tx.send(Response::Bcast(BcastReply::Sent));
            }
        }
    }

    fn bcast_gone(&self, id: u32) -> String {
        match &self.bcast_failed {
            Some((fid, why)) if *fid == id => why.clone(),
            _ => format!("no broadcast {id} is running"),
        }
    }

    /// Sends the parked chunk if a slot is free; starts the checks once all are held.
    fn bcast_pump(&mut self) {
        let Some(t) = self.bcast.as_mut() else { return };
        if t.phase == Phase::Streaming
            && t.sent - t.held < t.slots
            && let Some((k, data, tx)) = t.parked.take()
        {
            let offset = k as u64 * t.chunk as u64;
            let payload = ToNode::chunk_payload(stamp(&self.root), t.id, k, offset, &data);
            self.root.xfer(&t.dest(), None, payload);
            t.sent += 1;
            let _ = tx.send(Response::Bcast(BcastReply::Sent));
            // Asked for every `step`-th chunk only: see the module documentation.
            let step = (t.slots / 2).max(1);
            if (k + 1) % step == 0 || k + 1 == t.chunks {
                self.bcast_ask_chunk(k);
            }
        }
        let Some(t) = self.bcast.as_mut() else { return };
        // Not waiting for the last chunks to be held: a node checks its copy once both its
        // last chunk and the end have come, in whatever order its links delivered them.
        if t.phase == Phase::Streaming && t.finishing && t.sent == t.chunks {
            let msg = ToNode::BcastEnd { id: t.id };
            self.root
                .xfer(&t.dest(), None, msg.payload(stamp(&self.root)));
            t.phase = Phase::Deciding;
            t.phase_since = Instant::now();
        }
        if t.query.is_none() {
            self.bcast_ask();
        }
    }

    /// Asks every destination to answer once it holds chunk `k`.
    fn bcast_ask_chunk(&mut self, k: u32) {
        let Some(t) = self.bcast.as_mut() else { return };
        let cond = Cond {
            var: VAR_BCAST_HELD,
            cmp: Cmp::Ge,
            value: held(t.id, k + 1),
        };
        let q = self
            .root
            .compare_waiting(&t.dest(), cond, None, BUDGET, WAIT);
        t.chunk_queries.insert(q, k);
    }

    /// Sends the COMPARE the current phase waits on (none while nothing is outstanding).
    fn bcast_ask(&mut self) {
        let Some(t) = self.bcast.as_mut() else { return };
        if t.query.is_some() {
            return;
        }
        let (cond, write): (Cond, Option<(Var, i64)>) = match t.phase {
            Phase::Opening | Phase::OpenRechecking => (
                Cond {
                    var: VAR_BCAST_STATE,
                    cmp: Cmp::Eq,
                    value: state(t.id, BCAST_OPEN),
                },
                None,
            ),
            // Failed (3) and verified (2) sort above open (1) within a transfer, and every
            // value of an earlier transfer below them.
            Phase::OpenChecking => (
                Cond {
                    var: VAR_BCAST_STATE,
                    cmp: Cmp::Ge,
                    value: state(t.id, BCAST_OPEN),
                },
                None,
            ),
            Phase::Streaming => return,
            Phase::Checking => (
                Cond {
                    var: VAR_BCAST_STATE,
                    cmp: Cmp::Ne,
                    value: state(t.id, BCAST_OPEN),
                },
                None,
            ),
            Phase::Deciding | Phase::Releasing => (
                Cond {
                    var: VAR_BCAST_STATE,
                    cmp: Cmp::Eq,
                    value: state(t.id, BCAST_VERIFIED),
                },
                Some((VAR_BCAST_READY, t.id as i64)),
            ),
        };
        // These ask once: every node has decided by then.
        let wait = if matches!(t.phase, Phase::Releasing | Phase::OpenRechecking) {
            Duration::ZERO
        } else {
            WAIT
        };
        t.query = Some(
            self.root
                .compare_waiting(&t.dest(), cond, write, BUDGET, wait),
        );
    }

    /// A combined answer: is it the broadcast's? (Else it is a heartbeat's.)
    pub(super) fn bcast_answer(&mut self, o: &Outcome) -> bool {
        let Some(t) = self.bcast.as_mut() else {
            return false;
        };
        let chunk = t.chunk_queries.remove(&o.id());
        if chunk.is_none() && t.query != Some(o.id()) {
            return false;
        }
        if chunk.is_none() {
            t.query = None;
        }
        if !o.answer.silent.is_empty() {
            let why = format!(
                "bcast {}: node(s) {} stopped answering (dead, cut off or hung); nothing was launched",
                t.id,
                t.named(&o.answer.silent)
            );
            self.bcast_fail(why);
            return true;
        }
        let holds = o.holds_everywhere();
        if let Some(k) = chunk {
            if holds {
                // Chunks are written in order: holding k+1 means holding all before it.
                t.held = t.held.max(k + 1);
                self.bcast_pump();
            } else if t.held <= k {
                self.bcast_ask_chunk(k);
            }
            return true;
        }
        match t.phase {
            Phase::Opening | Phase::OpenRechecking if holds => {
                t.phase = Phase::Streaming;
                let (id, nodes) = (t.id, t.nodes.iter().map(|n| t.names[n].clone()).collect());
                if let Some(tx) = t.reply.take() {
                    let _ = tx.send(Response::Bcast(BcastReply::Started { id, nodes }));
                }
            }
            Phase::Opening if t.phase_since.elapsed() <= DECIDE_WITHIN => {
                t.phase = Phase::OpenChecking;
            }
            Phase::OpenChecking if holds => {
                t.phase = Phase::OpenRechecking;
            }
            Phase::OpenRechecking => {
                let why = format!(
                    "bcast {}: node(s) {} could not create the file (their logs say why: no room, a bad path, a scratch directory refused); nothing was launched",
                    t.id,
                    t.named(&o.answer.fails)
                );
                self.bcast_fail(why);
                return true;
            }
            Phase::Deciding if !o.written && t.phase_since.elapsed() <= DECIDE_WITHIN => {
                t.phase = Phase::Checking;
            }
            Phase::Checking if holds => {
                t.phase = Phase::Releasing;
            }
            Phase::Deciding | Phase::Releasing => {
                if o.written {
                    let names = t.nodes.iter().map(|n| t.names[n].clone()).collect();
                    tracing::info!("mm: bcast {}: every copy verified and released", t.id);
                    if let Some(tx) = t.reply.take() {
                        let _ = tx.send(Response::Bcast(BcastReply::Done { nodes: names }));
                    }
                    self.bcast = None;
                } else {
                    let why = format!(
                        "bcast {}: the copy on node(s) {} did not check out (its size, or a chunk out of order) or could not be written; nothing was launched",
                        t.id,
                        t.named(&o.answer.fails)
                    );
                    self.bcast_fail(why);
                }
                return true;
            }
            Phase::Opening | Phase::OpenChecking | Phase::Checking
                if t.phase_since.elapsed() > DECIDE_WITHIN =>
            {
                let why = format!(
                    "bcast {}: node(s) {} did not {} within {DECIDE_WITHIN:?}",
                    t.id,
                    t.named(&o.answer.fails),
                    if t.phase != Phase::Checking {
                        "create the file"
                    } else {
                        "check the copy"
                    }
                );
                self.bcast_fail(why);
                return true;
            }
            _ => {}
        }
        // Not yet everywhere (the nodes waited already): ask again.
        self.bcast_ask();
        true
    }

    /// Fails the running transfer: answers whatever waits with `why`, and tells the nodes to
    /// drop their copies.
    fn bcast_fail(&mut self, why: String) {
        let Some(mut t) = self.bcast.take() else {
            return;
        };
        tracing::warn!("mm: {why}");
        if let Some((_, _, tx)) = t.parked.take() {
            let _ = tx.send(Response::Error(why.clone()));
        }
        if let Some(tx) = t.reply.take() {
            let _ = tx.send(Response::Error(why.clone()));
        }
        let msg = ToNode::BcastAbort { id: t.id };
        self.root
            .xfer(&t.dest(), None, msg.payload(stamp(&self.root)));
        self.bcast_failed = Some((t.id, why));
    }
}
