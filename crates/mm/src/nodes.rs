//! Node membership: registration and its reconciliation with the job records, heartbeats and
//! failure detection, the grace period after a restart, and the tree's member list.
//!
//! Reconciliation is a protocol, not a race. A node manager registers with its
//! complete state (jobs held, each rank running or exited with its status); the core takes in
//! the exits, drops what it no longer runs and fails (or requeues) what the node lost, all
//! before the policy hears about the node. The node then joins the tree the core announces;
//! only when it reports [`FromNode::Joined`] for that announcement is it *in the tree*: nothing
//! is sent to it before (launches wait, signals are replaced by a resynchronisation on
//! joining), and only then is it up for the policy. A launch is resent until the node
//! acknowledges it ([`FromNode::Launched`]), at most [`LAUNCH_TRIES`] times, after which the
//! job fails with the reason.
//!
//! Late is not dead. A node that has not answered for `suspect_after` is *not responding*:
//! the policy counts it down, so nothing new starts there, but its jobs keep running and a
//! node that answers again is up with its jobs intact. Only one silent for `down_after` is
//! declared down: the jobs holding PEs on it end as `node_failed` (or start over, with
//! `--requeue`), exactly as in the simulator's node operations. Silence is counted in the
//! machine manager's own running time: a stall of the manager itself (see
//! [`Core::stalled`]) moves every deadline.
//!
//! A node declared down is *fenced*: its processes may still run (a node manager that was
//! stopped, a network cut), so when it registers again while holding running ranks, it is
//! answered [`RegisterReply::Fence`] and must kill them before it is accepted. A job lost
//! with it under `--requeue` starts again only once its previous run is known gone: every
//! rank's exit reported, or the fenced node back without it — or, if the node never comes
//! back, `down_after` after it was declared down (2 × `down_after` of silence in all).

use std::collections::{BTreeSet, HashMap};

use cosched_core::{Dur, JobId, NodeId, Outcome, Time};
use cosched_ledger::Ix;
use cosched_policy::Event;

use super::core::{Core, Effect, Pending, ReqId};
use crate::db::NodeRow;
use cosched_proto::proto::*;

/// The nodes a machine manager starts with, from its database and its configuration.
///
/// Nodes keep their ids whatever order they register in: a node's id is its row's, and a
/// configured node the database does not know takes the next free id. A row no longer
/// configured (or beyond `--nodes`) stays, *removed*: its id is never given again, since old
/// jobs' records name it, and it may not register. A row whose PEs differ from the
/// configuration's takes the configuration's. So the state directory follows the machine as
/// it grows and shrinks, with its accounting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeTable {
    /// Every node, by id (dense from 0).
    pub rows: Vec<NodeRow>,
    /// Rows to write: new or changed.
    pub changed: Vec<NodeRow>,
    /// Rows no longer part of the machine.
    pub removed: BTreeSet<NodeId>,
    /// The nodes of the machine: the rows, or with `--nodes`, as many as it says if more.
    pub size: u32,
    /// How many of the rows (the first) the database held.
    pub known: usize,
}

impl NodeTable {
    /// The table for `names` (the configuration's nodes; empty: the first `nodes` to
    /// register, by name, as `--nodes` says) of `pes` PEs each, given the database's `rows`.
    pub fn new(
        nodes: u32,
        pes: u32,
        names: &[String],
        rows: Vec<NodeRow>,
    ) -> Result<NodeTable, String> {
        let mut t = NodeTable::default();
        for (i, mut row) in rows.into_iter().enumerate() {
            if row.id.0 as usize != i {
                return Err(format!(
                    "the database's nodes are not numbered 0, 1, 2, …: node {} has id {} at position {i}; restore the state directory from a backup",
                    row.name, row.id
                ));
            }
            let kept = if names.is_empty() {
                row.id.0 < nodes
            } else {
                names.contains(&row.name)
            };
            if !kept {
                t.removed.insert(row.id);
            } else if row.pes != pes {
                row.pes = pes;
                t.changed.push(row.clone());
            }
            t.rows.push(row);
        }
        t.known = t.rows.len();
        for name in names {
            if !t.rows.iter().any(|r| &r.name == name) {
                let row = NodeRow {
                    id: NodeId(t.rows.len() as u32),
                    name: name.clone(),
                    pes,
                };
                t.changed.push(row.clone());
                t.rows.push(row);
            }
        }
        t.size = if names.is_empty() {
            (t.rows.len() as u32).max(nodes)
        } else {
            t.rows.len() as u32
        };
        Ok(t)
    }
}

/// A node as the machine manager knows it.
#[derive(Clone, Debug)]
pub struct NodeEntry {
    pub row: NodeRow,
    pub addr: String,
    pub up: bool,
    pub last_seen: Time,
    /// Known from the database but not yet heard from since this machine manager started.
    pub awaiting: bool,
    /// The node manager process last registered (see [`Register::incarnation`]).
    pub incarnation: u64,
    /// Reported [`FromNode::Joined`] for the tree announced at its last registration:
    /// messages may be sent to it.
    pub in_tree: bool,
    /// Up for the policy (and the ledger): from its first joining the tree after being down
    /// until it is found dead.
    pub policy_up: bool,
    /// The tree epoch announced at its last registration; older `Joined` reports are stale.
    pub join_epoch: u64,
    /// Where its membership began: the tree epoch announced at the registration that last
    /// released what the records waited for there (its fence lifted, a new node manager
    /// process). Messages sent to it before do not act there (see [`Core::register`]).
    pub member_since: u64,
    /// `Forget`s due while it was out of the tree, sent when it joins.
    pub deferred_forget: Vec<JobId>,
    /// Up, but not heard from for `suspect_after`: not responding (the policy counts it
    /// down; its jobs keep running).
    pub suspect: bool,
    /// Declared down: when it registers again it must first kill what it still runs.
    pub fenced: bool,
    /// Until when jobs to be requeued wait for it to come back without their processes;
    /// then those count as gone.
    pub fence_until: Option<Time>,
    /// No longer in the configuration: it may not register (see [`NodeTable`]).
    pub removed: bool,
    /// Drained or set down by an administrator (why, who, when): nothing new starts there
    /// until it is resumed.
    pub admin: Option<NodeChange>,
    /// Bytes of memory a job may take there, as its node manager said at registration (the
    /// configured memory, else the host's): the bound of `--mem` at submission.
    pub memory: Option<u64>,
}

impl NodeEntry {
    /// A node remembered from the database: down until it registers again.
    pub fn known(row: NodeRow, now: Time) -> NodeEntry {
        NodeEntry {
            row,
            addr: String::new(),
            up: false,
            last_seen: now,
            awaiting: true,
            incarnation: 0,
            in_tree: false,
            policy_up: false,
            join_epoch: 0,
            member_since: 0,
            deferred_forget: Vec::new(),
            suspect: false,
            fenced: false,
            fence_until: None,
            removed: false,
            admin: None,
            memory: None,
        }
    }

    /// Whether the policy may start jobs here: up, answering, in service.
    pub fn schedulable(&self) -> bool {
        self.policy_up && !self.suspect && self.admin.is_none()
    }
}

impl Core {
    /// Live jobs with PEs on `node`.
    fn jobs_on(&self, node: NodeId) -> Vec<Ix> {
        self.placed
            .iter()
            .copied()
            .filter(|&i| self.side[i].placement.iter().any(|p| p.node == node))
            .collect()
    }

    /// Sends heartbeat `seq`, then looks at every node's silence: not responding after
    /// `suspect_after`, down after `down_after`.
    pub(super) fn heartbeat(&mut self, now: Time) {
        self.hb_seq += 1;
        self.next_hb = now + self.cfg.heartbeat;
        let rotation = self.announced.current().cloned();
        self.push(Effect::Heartbeat {
            seq: self.hb_seq,
            rotation,
        });
        let silent: Vec<(NodeId, Dur)> = self
            .nodes
            .iter()
            .filter(|n| n.up && now - n.last_seen > self.cfg.suspect_after)
            .map(|n| (n.row.id, now - n.last_seen))
            .collect();
        for (n, silence) in silent {
            if !self.nodes[n.0 as usize].suspect {
                self.not_responding(n, silence);
            }
            if silence > self.cfg.down_after {
                self.declare_down(now, n, silence);
            }
        }
    }

    /// A node that was up has been silent for `silence` (more than `suspect_after`): nothing
    /// new starts there, its jobs keep running.
    fn not_responding(&mut self, n: NodeId, silence: Dur) {
        let e = &mut self.nodes[n.0 as usize];
        let was = e.schedulable();
        e.suspect = true;
        let name = e.row.name.clone();
        self.log(format!(
            "mm: node {name} ({n}) has not answered for {silence}: not responding; nothing new starts there, its jobs keep running (declared down after {} of silence, --down-after)",
            self.cfg.down_after
        ));
        if was {
            // Down for the policy and the ledger (no new PEs there); the driver keeps the
            // jobs, as the policy interface allows.
            self.ledger.node_down(n);
            self.add_node_events(Event::NodeDown(n));
        }
    }

    /// Something came from `node` at `now`: a node that was not responding is up again, with
    /// its jobs.
    pub(super) fn heard(&mut self, now: Time, node: NodeId) {
        let Some(e) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        let silence = now - e.last_seen;
        e.last_seen = e.last_seen.max(now);
        if !(e.up && e.suspect) {
            return;
        }
        e.suspect = false;
        let (name, now_schedulable) = (e.row.name.clone(), e.schedulable());
        self.log(format!(
            "mm: node {name} ({node}) answers again after {silence} of silence; up, with its jobs"
        ));
        if now_schedulable {
            self.ledger.node_up(node);
            self.add_node_events(Event::NodeUp(node));
        }
    }

    /// Whether `node` is up and answering: registered, not declared down, not silent for
    /// `suspect_after`.
    pub(super) fn answering(&self, node: NodeId) -> bool {
        self.nodes
            .get(node.0 as usize)
            .is_some_and(|e| e.up && !e.suspect)
    }

    /// Why `node` did not answer a client's question in time, with what the machine manager
    /// knows of it.
    pub(super) fn unanswered(&self, now: Time, node: NodeId) -> String {
        let Some(e) = self.nodes.get(node.0 as usize) else {
            return format!("node {node} did not answer in time");
        };
        let name = &e.row.name;
        if e.up && e.suspect {
            format!(
                "node {name} is not responding (nothing heard from it for {}): its files stay in its work directory; ask again once `cosched status` shows it up",
                now - e.last_seen
            )
        } else if !e.up {
            format!(
                "node {name} was declared down before it answered: its files stay in its work directory; ask again once it is back"
            )
        } else {
            format!("node {name} did not answer in time; ask again")
        }
    }

    /// A node silent for `silence` (more than `down_after`) is declared down: out of the
    /// tree, fenced, and the jobs on it are lost.
    fn declare_down(&mut self, now: Time, n: NodeId, silence: Dur) {
        let e = &self.nodes[n.0 as usize];
        let (name, policy_up, told) = (e.row.name.clone(), e.policy_up, e.schedulable());
        self.log(format!(
            "mm: node {name} ({n}) has not answered for {silence} (--down-after {}); declaring it down",
            self.cfg.down_after
        ));
        let why = format!("node {name} stopped answering heartbeats");
        self.out_of_tree(n);
        self.fence_node(now, n);
        if policy_up {
            // A node that was not responding, or drained, is down for the policy already.
            self.node_down(now, n, &why, told);
        } else {
            // Registered but never back in the tree: the policy never counted it up, but
            // whatever it holds is lost all the same.
            for i in self.jobs_on(n) {
                self.lost(now, i, Outcome::NodeFailed, why.clone());
            }
        }
        self.announce_topology(now);
    }

    /// The node is no longer a member of the tree, nor up for anyone.
    fn out_of_tree(&mut self, n: NodeId) {
        let e = &mut self.nodes[n.0 as usize];
        e.up = false;
        e.in_tree = false;
        e.policy_up = false;
        e.suspect = false;
        e.deferred_forget.clear();
        self.pending.retain(|(_, node), _| *node != n);
        // Ended jobs no longer wait for their ranks there (the node kills them before it
        // is accepted again); jobs to be requeued do (see the module documentation).
        self.ranks_gone_on(n, false);
    }

    /// The node is fenced: whatever it still runs must be killed before it is accepted
    /// again, and jobs to be requeued wait `down_after` for it to come back without them.
    fn fence_node(&mut self, now: Time, n: NodeId) {
        let e = &mut self.nodes[n.0 as usize];
        e.fenced = true;
        e.fence_until = Some(now + self.cfg.down_after);
    }

    /// Fenced nodes that did not come back within `down_after` of being declared down: the
    /// processes of jobs waiting to start again are taken for gone there (the node stays
    /// fenced: it still kills them if it ever returns).
    pub(super) fn fences_expired(&mut self, now: Time) {
        let expired: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|e| e.fence_until.is_some_and(|u| now >= u))
            .map(|e| e.row.id)
            .collect();
        for n in expired {
            self.nodes[n.0 as usize].fence_until = None;
            let waiting: Vec<JobId> = self
                .completing
                .iter()
                .filter(|(_, c)| matches!(c.group, super::core::EndGroup::Requeue))
                .map(|(&i, _)| i)
                .filter(|&i| self.side[i].placement.iter().any(|p| p.node == n))
                .map(|i| self.ledger.entry(i).req.id)
                .collect();
            if !waiting.is_empty() {
                let name = self.nodes[n.0 as usize].row.name.clone();
                self.log(format!(
                    "mm: node {name} ({n}) did not come back within {} of being declared down; the processes of jobs {waiting:?} there are taken for gone and those jobs start again (--down-after)",
                    self.cfg.down_after
                ));
            }
            self.ranks_gone_on(n, true);
        }
    }

    /// The node is down: the policy is told (unless it was already, the node being not
    /// responding), and the jobs on it end or start over.
    fn node_down(&mut self, now: Time, node: NodeId, why: &str, tell: bool) {
        let mut hit = self.ledger.node_down(node);
        // Jobs placed there by a previous machine manager hold PEs the ledger adopted.
        hit.extend(self.jobs_on(node));
        hit.sort_unstable();
        hit.dedup();
        if tell {
            self.add_node_events(Event::NodeDown(node));
        }
        for i in hit {
            self.lost(now, i, Outcome::NodeFailed, why.to_string());
        }
    }

    /// Nodes known from the database that did not come back: their jobs are lost.
    pub(super) fn grace_over(&mut self, now: Time) {
        let awaiting: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.awaiting)
            .map(|n| n.row.id)
            .collect();
        for n in awaiting {
            self.nodes[n.0 as usize].awaiting = false;
            // Its processes may still run: it is fenced as a node declared down is.
            self.fence_node(now, n);
            let why = "its node did not come back after the machine manager restarted";
            for i in self.jobs_on(n) {
                self.lost(now, i, Outcome::NodeFailed, why.to_string());
            }
        }
    }

    pub(super) fn announce_topology(&mut self, now: Time) {
        let members: Vec<(NodeId, String)> = self
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| (n.row.id, n.addr.clone()))
            .collect();
        // Strictly growing, so a node's `Joined` tells which announcement it heard.
        self.epoch = (now.as_micros().max(0) as u64).max(self.epoch + 1);
        self.push(Effect::Members {
            epoch: self.epoch,
            members,
        });
    }

    /// The nodes that are up and in the tree, with their names (a broadcast's destinations).
    pub fn tree_nodes(&self) -> Vec<(NodeId, String)> {
        self.nodes
            .iter()
            .filter(|n| n.up && n.in_tree)
            .map(|n| (n.row.id, n.row.name.clone()))
            .collect()
    }

    /// The last tree epoch announced (a node joining reports it back).
    pub fn tree_epoch(&self) -> u64 {
        self.epoch
    }

    /// A node reports that it is in the tree of `epoch`. The first report after a
    /// registration brings it into the tree: it is up for the policy (if it was not), gets
    /// the launches that waited for it, and is brought in line with the records (stop what is
    /// stopped, continue what runs, kill what ended, forget what was forgotten), since
    /// signals meant for it while it was out of the tree were not sent.
    pub(super) fn joined(&mut self, now: Time, node: NodeId, incarnation: u64, epoch: u64) {
        let Some(n) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        if !n.up || n.in_tree || n.incarnation != incarnation || epoch < n.join_epoch {
            return; // already in, or a report from an older registration
        }
        n.in_tree = true;
        self.heard(now, node);
        let n = &mut self.nodes[node.0 as usize];
        let name = n.row.name.clone();
        if !n.policy_up {
            n.policy_up = true;
            let in_service = n.admin.is_none();
            self.log(format!("mm: node {name} ({node}) is up (back in the tree)"));
            if in_service {
                self.ledger.node_up(node);
                self.add_node_events(Event::NodeUp(node));
            }
        }
        let forget = std::mem::take(&mut self.nodes[node.0 as usize].deferred_forget);
        if !forget.is_empty() {
            self.send(vec![node], ToNode::Forget { jobs: forget });
        }
        let (mut stop, mut cont, mut kill) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..self.side.len() {
            if !self.side[i].placement.iter().any(|p| p.node == node) {
                continue;
            }
            let id = self.ledger.entry(i).req.id;
            if self.pending.contains_key(&(id, node)) {
                continue; // not there yet: its launch goes below
            }
            if !self.live.contains(&i) {
                if self.side[i].forget_pending {
                    kill.push(id);
                }
            } else if self.side[i].requeue_why.is_some() {
                kill.push(id);
            } else if self.ledger.entry(i).is_running() {
                cont.push(id);
            } else {
                stop.push(id);
            }
        }
        if !(stop.is_empty() && cont.is_empty() && kill.is_empty()) {
            self.send(vec![node], ToNode::Switch { stop, cont, kill });
        }
        let due: Vec<JobId> = self
            .pending
            .keys()
            .filter(|(_, n)| *n == node)
            .map(|(j, _)| *j)
            .collect();
        for job in due {
            self.send_launch(now, job, node);
        }
    }

    /// A node manager (re)registers: it is up from now, and what it holds is reconciled with
    /// the records (exits it kept are taken in, jobs no longer run are dropped, a launch lost
    /// in flight is sent again, processes lost with a restarted node manager fail their job).
    pub(super) fn register(&mut self, now: Time, req: ReqId, reg: Register) {
        let reject = |why: String| Effect::Registered {
            req,
            reply: RegisterReply::Rejected(why),
        };
        if let Some(why) = Version::refusal(&reg.version, Some(&reg.name)) {
            self.push(reject(why));
            return;
        }
        if reg.pes != self.cfg.pes {
            let e = reject(format!(
                "node {} offers {} PEs but this machine has {} per node; start it with --pes {}",
                reg.name, reg.pes, self.cfg.pes, self.cfg.pes
            ));
            self.push(e);
            return;
        }
        let idx = match self.nodes.iter().position(|n| n.row.name == reg.name) {
            Some(i) if self.nodes[i].removed => {
                let e = reject(format!(
                    "node {} was removed from the configuration; add it back and run `cosched reconfigure` to let it join",
                    reg.name
                ));
                self.push(e);
                return;
            }
            Some(i) => i,
            None if !self.cfg.names.is_empty() => {
                let e = reject(format!(
                    "node {} is not in the configuration (its nodes: {}); add it to a [[nodes]] entry and run `cosched reconfigure`, or start the node manager with --name set to a configured node",
                    reg.name,
                    cosched_slurm::hostlist::compress(&self.cfg.names)
                ));
                self.push(e);
                return;
            }
            None => {
                if self.nodes.len() as u32 >= self.cfg.nodes {
                    let e = reject(format!(
                        "the machine is full: {} nodes configured (--nodes) and node {} is not one of them",
                        self.cfg.nodes, reg.name
                    ));
                    self.push(e);
                    return;
                }
                let row = NodeRow {
                    id: NodeId(self.nodes.len() as u32),
                    name: reg.name.clone(),
                    pes: reg.pes,
                };
                self.push(Effect::PersistNode(row.clone()));
                let mut n = NodeEntry::known(row, now);
                n.awaiting = false;
                self.nodes.push(n);
                self.nodes.len() - 1
            }
        };
        let id = self.nodes[idx].row.id;
        let lifted = self.nodes[idx].fenced;
        if lifted {
            // Declared down while it ran processes: none may run there before it is back.
            let running: Vec<JobId> = reg
                .jobs
                .iter()
                .filter(|h| h.ranks.iter().any(|r| r.code.is_none()))
                .map(|h| h.job)
                .collect();
            if !running.is_empty() {
                self.log(format!(
                    "mm: node {} ({id}) is back but still runs processes of jobs {running:?}, which were ended or requeued while it was down; it must kill them before it is accepted",
                    reg.name
                ));
                self.push(Effect::Registered {
                    req,
                    reply: RegisterReply::Fence {
                        jobs: running,
                        kill_wait_us: self.cfg.kill_wait.as_micros(),
                    },
                });
                return;
            }
            let n = &mut self.nodes[idx];
            n.fenced = false;
            n.fence_until = None;
            self.log(format!(
                "mm: node {} ({id}) is back and runs nothing it ran when it was declared down",
                reg.name
            ));
        }
        // Heard from: a node that was not responding is up again (with its jobs).
        self.heard(now, id);
        {
            let n = &mut self.nodes[idx];
            n.addr = reg.addr.clone();
            n.up = true;
            // Out of the tree until it says it has joined the one announced below: nothing
            // is sent to it meanwhile. A node the policy counts up stays up (its jobs run).
            n.in_tree = false;
            n.last_seen = now;
            n.awaiting = false;
            n.memory = Some(reg.memory);
        }
        self.log(format!(
            "mm: node {} ({id}) registered from {} with {} jobs; joining the tree",
            reg.name,
            reg.addr,
            reg.jobs.len()
        ));
        // Reconcile the jobs this node holds with the records.
        let mut drop_jobs = Vec::new();
        let mut exits = Vec::new();
        let held: HashMap<_, _> = reg.jobs.iter().map(|h| (h.job, h)).collect();
        let mut step_exits = Vec::new();
        for h in &reg.jobs {
            if unit_step(h.job).is_some() {
                // A step: kept while it runs there, its exits taken in; dropped otherwise.
                if self.step_runs_on(h.job, h.run, id) {
                    let done = h.ranks.iter().filter(|r| r.code.is_some());
                    step_exits.extend(done.map(|r| (h.job, h.run, r.clone())));
                } else {
                    drop_jobs.push(h.job);
                }
                continue;
            }
            // The same run only: a node that still holds an earlier run of a requeued job
            // (its forget never reached it) gets it dropped, and the current run's launch
            // stays pending.
            let ours = self.ledger.find(h.job).is_some_and(|i| {
                self.ledger.entry(i).is_live()
                    && self.side[i].requeue_why.is_none()
                    && self.side[i].run == h.run
                    && self.side[i].placement.iter().any(|p| p.node == id)
            });
            if ours {
                // It has the job: any launch of it there has arrived.
                self.pending.remove(&(h.job, id));
                exits.extend(
                    h.ranks
                        .iter()
                        .filter(|r| r.code.is_some())
                        .map(|r| (h.job, r.clone())),
                );
            } else {
                // Ended here; while it completes, the exits it reports are what releases its
                // PEs.
                if self
                    .ledger
                    .find(h.job)
                    .is_some_and(|i| self.completing.contains_key(&i) && self.side[i].run == h.run)
                {
                    let done = h.ranks.iter().filter(|r| r.code.is_some());
                    exits.extend(done.map(|r| (h.job, r.clone())));
                }
                drop_jobs.push(h.job);
            }
        }
        let same_process = self.nodes[idx].incarnation == reg.incarnation;

        self.nodes[idx].incarnation = reg.incarnation;
        // (A job waiting to start again is not run here any more, whatever the node holds.)
        let lost: Vec<Ix> = self
            .jobs_on(id)
            .into_iter()
            .filter(|&i| self.side[i].requeue_why.is_none())
            .filter(|&i| !held.contains_key(&self.ledger.entry(i).req.id))
            .collect();
        for i in lost {
            if same_process {
                // The launch was in flight when the node lost its parent: it is sent again
                // once the node is back in the tree.
                let job = self.ledger.entry(i).req.id;
                self.pending.entry((job, id)).or_insert(Pending {
                    sent: None,
                    tries: 0,
                });
                continue;
            }
            let why = format!("its processes on node {} were lost", reg.name);
            self.lost(now, i, Outcome::Failed, why);
        }
        let released = !same_process || lifted;
        if released {
            // A new node manager process (the old one's ranks died with it), or a fenced
            // node back without its old processes: what was left of them is gone.
            self.ranks_gone_on(id, true);
        }
        self.announce_topology(now);
        self.nodes[idx].join_epoch = self.epoch;
        if released {
            // A new membership: what was sent to the node before was meant for what the
            // records have just given up there (a launch of a run since requeued), and the
            // node drops it, even if it comes in only now (it waited while the node was
            // stopped, or registering). A node that only lost its parent keeps its
            // membership: what was sent to it still stands.
            self.nodes[idx].member_since = self.epoch;
        }
        self.push(Effect::Registered {
            req,
            reply: RegisterReply::Accepted {
                node: id,
                heartbeat_us: self.cfg.heartbeat.as_micros(),
                suspect_after_us: self.cfg.suspect_after.as_micros(),
                down_after_us: self.cfg.down_after.as_micros(),
                kill_wait_us: self.cfg.kill_wait.as_micros(),
                drop_jobs,
                epoch: self.nodes[idx].member_since,
            },
        });
        for (job, exit) in exits {
            self.rank_exit(now, job, id, exit);
        }
        for (unit, run, exit) in step_exits {
            self.step_exit(now, unit, run, id, exit);
        }
    }
}

impl Core {
    /// The configured node named `name`, or an error naming the nodes there are.
    pub(super) fn node_named(&self, name: &str) -> Result<NodeId, String> {
        if let Some(e) = self.nodes.iter().find(|e| e.row.name == name && !e.removed) {
            return Ok(e.row.id);
        }
        let known: Vec<&str> = self
            .nodes
            .iter()
            .filter(|e| !e.removed)
            .map(|e| e.row.name.as_str())
            .collect();
        Err(format!(
            "unknown node {name}; the nodes are {} (`cosched status`)",
            cosched_slurm::hostlist::compress(&known)
        ))
    }

    /// Checks an administrator's change to `names` (`cosched node drain|down|resume`): the
    /// changes to make durable, or why not.
    pub(super) fn node_changes(
        &self,
        now: Time,
        op: NodeOp,
        names: &[String],
        reason: Option<String>,
        uid: u32,
    ) -> Result<Vec<NodeChange>, String> {
        if names.is_empty() {
            return Err("name the nodes (`cosched node drain n01 n02 --reason …`)".into());
        }
        if op != NodeOp::Resume && reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
            return Err(format!(
                "say why with --reason (Slurm's `scontrol update nodename=… state={} reason=…` asks the same)",
                op.as_str()
            ));
        }
        let mut out = Vec::new();
        for name in names {
            out.push(NodeChange {
                node: self.node_named(name)?,
                name: name.clone(),
                op,
                reason: reason.clone(),
                uid,
                at_us: now.as_micros(),
            });
        }
        Ok(out)
    }

    /// Carries out an administrator's change, once durable: a drained node takes no new
    /// work and keeps its jobs; a node set down loses its jobs (as a failed node does); a
    /// resumed one is in service again as soon as it answers.
    pub(super) fn change_node(&mut self, now: Time, c: NodeChange) {
        let n = c.node;
        let e = &mut self.nodes[n.0 as usize];
        let was = e.schedulable();
        let who = cosched_proto::util::user_name(c.uid);
        let why = c.reason.clone().unwrap_or_default();
        let name = e.row.name.clone();
        match c.op {
            NodeOp::Resume => {
                e.admin = None;
                let now_up = e.schedulable();
                self.log(format!("mm: node {name} ({n}) resumed by {who}"));
                if now_up {
                    self.ledger.node_up(n);
                    self.add_node_events(Event::NodeUp(n));
                }
            }
            NodeOp::Drain => {
                e.admin = Some(c);
                self.log(format!(
                    "mm: node {name} ({n}) drained by {who}: {why}; its jobs run to their end, nothing new starts there"
                ));
                if was {
                    self.ledger.node_down(n);
                    self.add_node_events(Event::NodeDown(n));
                }
            }
            NodeOp::Down => {
                e.admin = Some(c);
                self.log(format!("mm: node {name} ({n}) set down by {who}: {why}"));
                let lost = format!("node {name} was set down by {who}: {why}");
                if was {
                    self.node_down(now, n, &lost, true);
                } else {
                    for i in self.jobs_on(n) {
                        self.lost(now, i, Outcome::NodeFailed, lost.clone());
                    }
                }
            }
        }
    }
}
