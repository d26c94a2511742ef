//! [`NodeScheduler`]: one node's dispatcher, a pure state machine. The driver (simulator or
//! node manager) reports what processes do — start, block, wake, wait for a message, receive
//! one — and asks, whenever a PE needs a decision, which process should run there ([`pick`]).
//! Calls return [`Action`]s the driver must carry out: re-decide a PE, charge overhead to a PE,
//! wake a process.
//!
//! Every process has a home PE (processor affinity, as in seed 000 §3.5.7), so each PE has its
//! own run queue. How a waiting process waits and what an arriving message does depend on the
//! [`Scheme`]; the gang schemes follow the slot of a global heartbeat.
//!
//! [`pick`]: NodeScheduler::pick

use cosched_core::{Dur, Time};

use crate::fcs::{FcsParams, FcsProc, ProcClass};
use crate::mlfq;
use crate::reorder::{self, LoadInfo, LoadTracker, ProcOptions, ProcRemote, RemoteNode};
use crate::scheme::Scheme;

/// A process, as numbered by the driver (unique across the machine).
pub type ProcId = u32;

/// The knobs of a node scheduler.
#[derive(Clone, Debug)]
pub struct SchedParams {
    pub scheme: Scheme,
    pub pes: usize,
    /// SB / SB+PROC: how long a receiver spins before blocking.
    pub spin_time: Dur,
    /// Cost of a NIC interrupt (IB, SB, DCS, FCS wake-ups).
    pub interrupt: Dur,
    /// PB: cost of checking one endpoint for pending messages.
    pub check_endpoint: Dur,
    /// PROC: cost of moving load information between NIC and scheduler, per message.
    pub global_info: Dur,
    /// PROC: cost of changing a process's position in the run queue.
    pub queue_reorder: Dur,
    /// SB+PROC: departures from the paper's reading (all off by default).
    pub proc: ProcOptions,
    pub fcs: FcsParams,
}

/// How a process that must wait for a message waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Busy-wait until the message arrives or the process is descheduled.
    SpinForever,
    /// Busy-wait for at most this much CPU time, then block.
    Spin(Dur),
    /// Block at once.
    Block,
}

/// Something the driver must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Decide again what runs on this PE (call [`NodeScheduler::pick`]).
    Repick { pe: usize },
    /// Charge this much CPU overhead to the PE (the running process is delayed).
    Overhead { pe: usize, dur: Dur },
    /// The process, blocked waiting for a message, is runnable again.
    Wake { proc: ProcId },
    /// The process's FCS class changed.
    ClassChanged { proc: ProcId, class: ProcClass },
}

/// The answer of [`NodeScheduler::pick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub proc: Option<ProcId>,
    /// When the chosen process's quantum ends (local-scheduler schemes), if it does.
    pub quantum_end: Option<Time>,
    /// Scheduler work to charge before the process runs (PROC reordering).
    pub overhead: Dur,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunState {
    Ready,
    Blocked,
}

#[derive(Clone, Debug)]
struct SProc {
    id: ProcId,
    pe: usize,
    slot: u32,
    state: RunState,
    pri: u8,
    /// Position in its priority level: lower runs first.
    stamp: u64,
    /// Sender nodes of the messages that have arrived and are not consumed yet.
    pending_from: Vec<u32>,
    remote: Vec<ProcRemote>,
    fcs: FcsProc,
}

#[derive(Clone, Debug, Default)]
struct SPe {
    current: Option<ProcId>,
    quantum_end: Option<Time>,
    expired: bool,
    /// PB: the boosted process the next pick must choose.
    forced: Option<ProcId>,
}

/// One node's scheduler. See the module documentation.
#[derive(Clone, Debug)]
pub struct NodeScheduler {
    p: SchedParams,
    procs: Vec<SProc>,
    pes: Vec<SPe>,
    slot: u32,
    next_stamp: u64,
    remotes: Vec<RemoteNode>,
    load: LoadTracker,
    pb_cursor: ProcId,
}

impl NodeScheduler {
    pub fn new(p: SchedParams) -> NodeScheduler {
        let pes = vec![SPe::default(); p.pes];
        NodeScheduler {
            p,
            procs: Vec::new(),
            pes,
            slot: 0,
            next_stamp: 0,
            remotes: Vec::new(),
            load: LoadTracker::default(),
            pb_cursor: 0,
        }
    }

    pub fn scheme(&self) -> Scheme {
        self.p.scheme
    }

    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    fn idx(&self, id: ProcId) -> Option<usize> {
        self.procs.iter().position(|p| p.id == id)
    }

    /// The process currently chosen on `pe`.
    pub fn current(&self, pe: usize) -> Option<ProcId> {
        self.pes.get(pe).and_then(|s| s.current)
    }

    /// The FCS class of a process (None for other schemes or unknown processes).
    pub fn class(&self, id: ProcId) -> Option<ProcClass> {
        if self.p.scheme != Scheme::Fcs {
            return None;
        }
        self.idx(id).map(|i| self.procs[i].fcs.class)
    }

    /// The current gang slot.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// A new process on `pe`, in gang slot `slot` (the Ousterhout-matrix row), ready to run.
    pub fn add(&mut self, id: ProcId, pe: usize, slot: u32) -> Vec<Action> {
        let stamp = self.stamp();
        self.procs.push(SProc {
            id,
            pe,
            slot,
            state: RunState::Ready,
            pri: mlfq::START_PRI,
            stamp,
            pending_from: Vec::new(),
            remote: Vec::new(),
            fcs: FcsProc::default(),
        });
        vec![Action::Repick { pe }]
    }

    /// The process moved to gang slot `slot` (a real machine manager repacks its matrix when
    /// jobs leave; the simulator's rows never change).
    pub fn set_slot(&mut self, id: ProcId, slot: u32) -> Vec<Action> {
        let Some(i) = self.idx(id) else {
            return Vec::new();
        };
        if self.procs[i].slot == slot {
            return Vec::new();
        }
        self.procs[i].slot = slot;
        vec![Action::Repick {
            pe: self.procs[i].pe,
        }]
    }

    /// Whether the driver last reported the process blocked.
    pub fn is_blocked(&self, id: ProcId) -> bool {
        self.idx(id)
            .is_some_and(|i| self.procs[i].state == RunState::Blocked)
    }

    /// The process's FCS state (statistics, class), for observation.
    pub fn fcs_state(&self, id: ProcId) -> Option<&FcsProc> {
        self.idx(id).map(|i| &self.procs[i].fcs)
    }

    /// The process exited.
    pub fn remove(&mut self, id: ProcId) -> Vec<Action> {
        let Some(i) = self.idx(id) else {
            return Vec::new();
        };
        let sp = self.procs.remove(i);
        let pe = &mut self.pes[sp.pe];
        if pe.current == Some(id) {
            pe.current = None;
            pe.quantum_end = None;
        }
        if pe.forced == Some(id) {
            pe.forced = None;
        }
        vec![Action::Repick { pe: sp.pe }]
    }

    /// The process blocked (synchronous I/O, or a receive that stopped spinning).
    pub fn block(&mut self, id: ProcId) -> Vec<Action> {
        let Some(i) = self.idx(id) else {
            return Vec::new();
        };
        self.procs[i].state = RunState::Blocked;
        let pe = self.procs[i].pe;
        let mut out = Vec::new();
        if self.p.scheme == Scheme::Fcs
            && let Some(class) = self.procs[i].fcs.reclassify(&self.p.fcs)
        {
            out.push(Action::ClassChanged { proc: id, class });
        }
        if self.pes[pe].current == Some(id) {
            self.pes[pe].current = None;
            self.pes[pe].quantum_end = None;
        }
        out.push(Action::Repick { pe });
        out
    }

    /// A blocked process becomes runnable: after I/O (`boost` false, the sleep-return raise) or
    /// on a message (`boost` true, the coscheduling boost to the top level).
    pub fn wake(&mut self, id: ProcId, boost: bool) -> Vec<Action> {
        let Some(i) = self.idx(id) else {
            return Vec::new();
        };
        let stamp = self.stamp();
        let sp = &mut self.procs[i];
        sp.state = RunState::Ready;
        sp.pri = if boost {
            mlfq::MAX_PRI
        } else {
            mlfq::on_wake(sp.pri)
        };
        sp.stamp = stamp;
        self.load.woke();
        let pe = sp.pe;
        self.preempt_check(pe, id)
    }

    /// Whether making `id` runnable (or raising it) should interrupt what `pe` runs now.
    fn preempt_check(&self, pe: usize, id: ProcId) -> Vec<Action> {
        let Some(cur) = self.pes[pe].current else {
            return vec![Action::Repick { pe }];
        };
        if cur == id {
            return Vec::new();
        }
        let repick = if self.p.scheme.is_gang() {
            true
        } else {
            let pri = |x: ProcId| self.idx(x).map_or(0, |i| self.procs[i].pri);
            pri(id) > pri(cur)
        };
        if repick {
            vec![Action::Repick { pe }]
        } else {
            Vec::new()
        }
    }

    /// The process reached a receive whose message has not arrived: how should it wait?
    pub fn wait_policy(&self, id: ProcId) -> WaitPolicy {
        match self.p.scheme {
            Scheme::Local
            | Scheme::Dcs
            | Scheme::Pb
            | Scheme::PbProc
            | Scheme::Gs
            | Scheme::Fcfs => WaitPolicy::SpinForever,
            Scheme::Ib => WaitPolicy::Block,
            Scheme::Sb | Scheme::SbProc | Scheme::Cc => WaitPolicy::Spin(self.p.spin_time),
            Scheme::Fcs => {
                let Some(i) = self.idx(id) else {
                    return WaitPolicy::Block;
                };
                let sp = &self.procs[i];
                let owner = sp.slot == self.slot;
                match sp.fcs.class {
                    ProcClass::Cs | ProcClass::InitCs if owner => WaitPolicy::SpinForever,
                    _ => WaitPolicy::Spin(sp.fcs.spin_time(&self.p.fcs)),
                }
            }
        }
    }

    /// A synchronous communication operation of `id` completed: `messages` exchanged, `waited`
    /// for them while scheduled, `blocked` if it had to block. Feeds the FCS statistics.
    pub fn comm_done(&mut self, id: ProcId, messages: u32, waited: Dur, blocked: bool) {
        if let Some(i) = self.idx(id) {
            self.procs[i].fcs.comm_done(messages, waited, blocked);
        }
    }

    /// The process used `d` of CPU (computing or spinning).
    pub fn ran(&mut self, id: ProcId, d: Dur) {
        if let Some(i) = self.idx(id) {
            self.procs[i].fcs.ran(d);
        }
    }

    /// The load information this node attaches to an outgoing message.
    pub fn load_info(&self, now: Time) -> LoadInfo {
        let ready = self
            .procs
            .iter()
            .filter(|p| p.state == RunState::Ready && self.pes[p.pe].current != Some(p.id));
        let top = ready.clone().map(|p| p.pri).max();
        let n = top.map_or(0, |t| ready.filter(|p| p.pri == t).count() as u32);
        self.load.info(now, n)
    }

    /// A message for `id` arrived from node `from` at the NIC. `blocked_waiting`: the process is
    /// blocked in a receive; `running`: it is on its PE now.
    pub fn msg_arrived(
        &mut self,
        now: Time,
        id: ProcId,
        from: u32,
        info: LoadInfo,
        blocked_waiting: bool,
        running: bool,
    ) -> Vec<Action> {
        let Some(i) = self.idx(id) else {
            return Vec::new();
        };
        let pe = self.procs[i].pe;
        let mut out = Vec::new();
        self.procs[i].pending_from.push(from);
        if self.p.scheme.uses_proc() {
            let sp = &mut self.procs[i];
            reorder::record(&mut self.remotes, &mut sp.remote, from, info, now);
            out.push(Action::Overhead {
                pe,
                dur: self.p.global_info,
            });
        }
        match self.p.scheme {
            Scheme::Ib | Scheme::Sb | Scheme::SbProc | Scheme::Cc | Scheme::Fcs
                if blocked_waiting =>
            {
                out.push(Action::Overhead {
                    pe,
                    dur: self.p.interrupt,
                });
                out.push(Action::Wake { proc: id });
                out.extend(self.wake(id, true));
            }
            Scheme::Dcs if !running => {
                out.push(Action::Overhead {
                    pe,
                    dur: self.p.interrupt,
                });
                let stamp = self.stamp();
                let sp = &mut self.procs[i];
                sp.pri = mlfq::MAX_PRI;
                sp.stamp = stamp;
                self.load.woke();
                if self.procs[i].state == RunState::Ready {
                    out.extend(self.preempt_check(pe, id));
                }
            }
            _ => {}
        }
        out
    }

    /// The process consumed the messages that came from these nodes.
    pub fn msgs_consumed(&mut self, id: ProcId, from: &[u32]) {
        if let Some(i) = self.idx(id) {
            let pending = &mut self.procs[i].pending_from;
            for f in from {
                if let Some(k) = pending.iter().position(|x| x == f) {
                    pending.swap_remove(k);
                }
            }
        }
    }

    /// The quantum of the process on `pe` ran out: it drops a level and goes to the back.
    pub fn quantum_expired(&mut self, pe: usize) {
        let Some(cur) = self.pes[pe].current else {
            return;
        };
        let stamp = self.stamp();
        if let Some(i) = self.idx(cur) {
            let sp = &mut self.procs[i];
            sp.pri = mlfq::on_quantum_expired(sp.pri);
            sp.stamp = stamp;
        }
        self.pes[pe].expired = true;
    }

    /// The periodic-boost thread (PB, PB+PROC): checks every endpoint and boosts, per PE, one
    /// process with pending messages that is not running — round robin for PB, least expected
    /// remaining time for PB+PROC.
    pub fn periodic_boost(&mut self, now: Time) -> Vec<Action> {
        let mut out = Vec::new();
        for pe in 0..self.pes.len() {
            let on_pe = self.procs.iter().filter(|p| p.pe == pe).count() as i64;
            if on_pe > 0 {
                out.push(Action::Overhead {
                    pe,
                    dur: self.p.check_endpoint * on_pe,
                });
            }
            let cur = self.pes[pe].current;
            let mut cands: Vec<usize> = (0..self.procs.len())
                .filter(|&i| {
                    let p = &self.procs[i];
                    p.pe == pe
                        && p.state == RunState::Ready
                        && Some(p.id) != cur
                        && !p.pending_from.is_empty()
                })
                .collect();
            if cands.is_empty() {
                continue;
            }
            cands.sort_by_key(|&i| self.procs[i].id);
            let chosen = if self.p.scheme == Scheme::PbProc && cands.len() >= 2 {
                out.push(Action::Overhead {
                    pe,
                    dur: self.p.queue_reorder,
                });
                self.least_ert(now, &cands).unwrap_or(cands[0])
            } else {
                let after = self.pb_cursor;
                *cands
                    .iter()
                    .find(|&&i| self.procs[i].id > after)
                    .unwrap_or(&cands[0])
            };
            let stamp = self.stamp();
            let sp = &mut self.procs[chosen];
            sp.pri = mlfq::MAX_PRI;
            sp.stamp = stamp;
            self.pb_cursor = sp.id;
            self.pes[pe].forced = Some(sp.id);
            self.load.woke();
            out.push(Action::Repick { pe });
        }
        out
    }

    /// The once-a-second starvation check of the Solaris time-sharing class (`ts_update`):
    /// every process that is ready but not on its PE rises to its sleep-return level
    /// (`ts_lwait`, equal to `ts_slpret` in the default table), so a process pushed down by
    /// spinning through its quanta is not starved by those that keep waking from I/O.
    pub fn ts_update(&mut self) -> Vec<Action> {
        let mut raised: Vec<(usize, ProcId)> = Vec::new();
        for i in 0..self.procs.len() {
            let (id, pe, pri, ready) = {
                let p = &self.procs[i];
                (p.id, p.pe, p.pri, p.state == RunState::Ready)
            };
            let up = mlfq::on_wake(pri);
            if !ready || self.pes[pe].current == Some(id) || up <= pri {
                continue;
            }
            let stamp = self.stamp();
            let sp = &mut self.procs[i];
            sp.pri = up;
            sp.stamp = stamp;
            raised.push((pe, id));
        }
        let mut out = Vec::new();
        for (pe, id) in raised {
            for a in self.preempt_check(pe, id) {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        out
    }

    /// The global heartbeat moved to `slot` (gang schemes). FCS reevaluates every class here.
    pub fn heartbeat(&mut self, slot: u32) -> Vec<Action> {
        self.slot = slot;
        let mut out = Vec::new();
        if self.p.scheme == Scheme::Fcs {
            for sp in &mut self.procs {
                if let Some(class) = sp.fcs.reclassify(&self.p.fcs) {
                    out.push(Action::ClassChanged { proc: sp.id, class });
                }
            }
        }
        out.extend((0..self.pes.len()).map(|pe| Action::Repick { pe }));
        out
    }

    /// Among `cands` (indices into procs), the first of the PROC candidate set.
    fn least_ert(&mut self, now: Time, cands: &[usize]) -> Option<usize> {
        let mut erts = Vec::with_capacity(cands.len());
        for &i in cands {
            let sp = &mut self.procs[i];
            if let Some(e) =
                reorder::expected_remaining(&self.remotes, &mut sp.remote, &sp.pending_from, now)
            {
                erts.push((i, e));
            }
        }
        reorder::candidate_set(&erts)
            .into_iter()
            .min_by_key(|&i| self.procs[i].stamp)
    }

    /// Decides what runs on `pe` from now on.
    pub fn pick(&mut self, now: Time, pe: usize) -> Pick {
        let cur = self.pes[pe].current;
        let runnable = |p: &SProc| p.pe == pe && p.state == RunState::Ready;
        let cur_runnable = cur
            .and_then(|c| self.idx(c))
            .is_some_and(|i| runnable(&self.procs[i]));
        let mut overhead = Dur::ZERO;
        let chosen: Option<ProcId> = match self.p.scheme {
            Scheme::Gs | Scheme::Fcfs => {
                let owner = self
                    .procs
                    .iter()
                    .find(|p| p.pe == pe && p.slot == self.slot);
                match owner {
                    Some(o) => (o.state == RunState::Ready).then_some(o.id),
                    None if cur_runnable => cur,
                    None => self
                        .procs
                        .iter()
                        .filter(|p| runnable(p))
                        .min_by_key(|p| (p.slot, p.stamp))
                        .map(|p| p.id),
                }
            }
            Scheme::Fcs => self.pick_fcs(pe, cur, cur_runnable),
            _ => {
                let forced = self.pes[pe]
                    .forced
                    .take()
                    .filter(|&f| self.idx(f).is_some_and(|i| runnable(&self.procs[i])));
                if forced.is_some() {
                    forced
                } else {
                    let best = self
                        .procs
                        .iter()
                        .filter(|p| runnable(p))
                        .max_by_key(|p| (p.pri, std::cmp::Reverse(p.stamp)));
                    let sb_proc = self.p.scheme == Scheme::SbProc;
                    let keep_cur = cur_runnable && !self.pes[pe].expired && {
                        let ci = self.idx(cur.unwrap_or_default()).unwrap_or(0);
                        let c = &self.procs[ci];
                        let reordered = sb_proc
                            && self.p.proc.keep_reordered
                            && !c.pending_from.is_empty()
                            && best.is_some_and(|b| !b.pending_from.is_empty());
                        reordered || best.is_none_or(|b| b.pri <= c.pri)
                    };
                    if keep_cur {
                        cur
                    } else if sb_proc {
                        // Algorithm 1 over the processes with pending messages at the highest
                        // ready level (SB's boost sequence), or at every level with
                        // `any_level` when the best one has pending messages.
                        let top = best.map(|b| b.pri);
                        let any_level = self.p.proc.any_level
                            && best.is_some_and(|b| !b.pending_from.is_empty());
                        let cands: Vec<usize> = (0..self.procs.len())
                            .filter(|&i| {
                                let p = &self.procs[i];
                                runnable(p)
                                    && (any_level || Some(p.pri) == top)
                                    && !p.pending_from.is_empty()
                            })
                            .collect();
                        let best_id = best.map(|b| b.id);
                        if cands.len() >= 2 {
                            let choice = self
                                .least_ert(now, &cands)
                                .map(|i| self.procs[i].id)
                                .or(best_id);
                            // The reordering is paid once, when it moves a process ahead of
                            // SB's choice; choosing the process already placed there again
                            // (the decision that ends its context switch) costs nothing.
                            if choice != best_id && choice != cur {
                                overhead += self.p.queue_reorder;
                            }
                            choice
                        } else {
                            best_id
                        }
                    } else {
                        best.map(|b| b.id)
                    }
                }
            }
        };
        let pes = &mut self.pes[pe];
        pes.expired = false;
        if chosen != cur || pes.quantum_end.is_none_or(|q| q <= now) {
            if chosen != cur && chosen.is_some() {
                self.load.switched(now);
            }
            pes.current = chosen;
            pes.quantum_end = match chosen {
                Some(c) if !self.p.scheme.is_gang() => {
                    let pri = self.procs.iter().find(|p| p.id == c).map_or(0, |p| p.pri);
                    Some(now + mlfq::quantum(pri))
                }
                _ => None,
            };
        }
        Pick {
            proc: self.pes[pe].current,
            quantum_end: self.pes[pe].quantum_end,
            overhead,
        }
    }

    /// Seed 000 Fig. 3.2: the slot owner runs if it is CS or F and runnable; otherwise the PE
    /// is filled by the local scheduler, DC processes first, then F, then CS. An empty slot
    /// lets a DC or F process continue.
    fn pick_fcs(&self, pe: usize, cur: Option<ProcId>, cur_runnable: bool) -> Option<ProcId> {
        let owner = self
            .procs
            .iter()
            .find(|p| p.pe == pe && p.slot == self.slot);
        if let Some(o) = owner
            && o.state == RunState::Ready
            && o.fcs.class.coscheduled()
        {
            return Some(o.id);
        }
        let cur_p = cur.and_then(|c| self.procs.iter().find(|p| p.id == c));
        if owner.is_none()
            && cur_runnable
            && cur_p.is_some_and(|p| {
                matches!(
                    p.fcs.class,
                    ProcClass::Dc | ProcClass::InitDc | ProcClass::F
                )
            })
        {
            return cur;
        }
        let tier = |p: &SProc| match p.fcs.class {
            ProcClass::Dc | ProcClass::InitDc => 0,
            ProcClass::F => 1,
            ProcClass::Cs | ProcClass::InitCs => 2,
        };
        let best_tier = self
            .procs
            .iter()
            .filter(|p| p.pe == pe && p.state == RunState::Ready)
            .map(tier)
            .min()?;
        if cur_runnable && cur_p.is_some_and(|p| tier(p) == best_tier) {
            return cur;
        }
        self.procs
            .iter()
            .filter(|p| p.pe == pe && p.state == RunState::Ready && tier(p) == best_tier)
            .max_by_key(|p| (p.pri, std::cmp::Reverse(p.stamp)))
            .map(|p| p.id)
    }
}
