//! Progress rates on multi-core nodes (seed 001): the engine's side of slowdowns.
//!
//! Without a slowdown model a running job does one second of work per second, and its end is
//! `now + work left`. With one ([`cosched_core::Slowdowns`]), a job's rate is `1 / slowdown`,
//! where its slowdown is the largest over its nodes (a parallel job waits for its slowest
//! process) of its self-slowdown there times the coscheduling slowdown of the other job on
//! that node, if any. Whenever a job starts or stops on a node, every job on that node is
//! *repriced*: the work it did since its last price is added up at the old rate and its end
//! is computed again at the new one. The policy only says where jobs run (it may announce
//! co-location by placing two jobs on one node); the engine computes what that costs.
//!
//! Work is counted in thousandths of a microsecond, so a rate change loses at most a
//! thousandth of a microsecond of work and, given the same inputs, every end time is the
//! same integer on every machine.
//!
//! This also enforces seed 001's node rule: at most two jobs' processes on one node (the
//! ledger already refuses two running jobs on one core, so no node ever runs more processes
//! than it has cores).

use cosched_core::{Dur, JobId, MachineShape, Milli, NodeId, PeSet, Slowdowns, Time};

/// An empty slot of a node.
const NONE: u32 = u32::MAX;

/// How a job's processes sit on one node, which decides its self-slowdown there: one
/// process (none), one per processor (SL_nos), several on one processor (SL_crs), or several
/// on several processors (both).
fn kind(procs: u32, sockets: u32) -> u8 {
    if procs == 1 {
        0
    } else if sockets & (sockets - 1) == 0 {
        2
    } else if procs == sockets.count_ones() {
        1
    } else {
        3
    }
}

/// One job's processes on one node.
#[derive(Clone, Copy, Debug)]
struct Here {
    /// The job, [`NONE`] for an empty slot.
    job: u32,
    /// Its [`kind`] of placement here.
    kind: u8,
    /// The slowdown counted for the job on this node in its tally of shared nodes; 0 while
    /// the job is alone here (counted in its `alone`) or the node waits to be repriced.
    counted: Milli,
}

const EMPTY: Here = Here {
    job: NONE,
    kind: 0,
    counted: 0,
};

/// What a [`NodeWalk`] hands each node it reads.
trait NodeVisit {
    /// The node holds `procs` of the PE set's PEs, on the processors of `sockets` (a bit per
    /// processor), a placement of [`kind`] `k`. An error ends the walk.
    fn visit(&mut self, node: u32, procs: u32, sockets: u32, k: u8) -> Result<(), u32>;
}

/// A PE set read node by node: for each node it touches, in order, the processes there and
/// the processors they sit on.
///
/// PEs are numbered node by node, processor by processor, so the PEs of a run on one node are
/// consecutive cores and sit on every processor from the first one's to the last one's: two
/// masks per core (the processors from its own on, and up to its own) give a piece's
/// processors with no division. Runs are sorted, so the node of a run is the one being read,
/// the next one, or found by a division (at the first run and after a gap of a node or more);
/// a stretch of whole nodes is counted off a node at a time with the placement of a whole
/// node.
#[derive(Clone, Debug)]
struct NodeWalk {
    /// PEs per node.
    per: u32,
    /// Every processor of a node.
    every: u32,
    /// The [`kind`] of a whole node.
    whole: u8,
    /// By core within a node: the processors from the core's own on.
    from: Vec<u32>,
    /// By core within a node: the processors up to the core's own.
    upto: Vec<u32>,
}

impl NodeWalk {
    fn new(machine: MachineShape) -> NodeWalk {
        let per = machine.pes_per_node();
        let every = u32::MAX >> (32 - machine.sockets_per_node);
        let socket = |c: u32| machine.socket_of(cosched_core::PeId(c));
        NodeWalk {
            per,
            every,
            whole: kind(per, every),
            from: (0..per).map(|c| u32::MAX << socket(c)).collect(),
            upto: (0..per).map(|c| u32::MAX >> (31 - socket(c))).collect(),
        }
    }

    /// Visits each node `pes` touches, in order, and stops at the first error.
    #[inline(always)]
    fn walk(&self, pes: &PeSet, to: &mut impl NodeVisit) -> Result<(), u32> {
        let per = self.per;
        let runs = pes.runs();
        let Some(&(first, _)) = runs.first() else {
            return Ok(());
        };
        // The node being read (`base` its first PE), and its processes and processors so far:
        // the next run may add to them.
        let mut node = first / per;
        let mut base = node * per;
        let (mut procs, mut sockets) = (0, 0);
        for &(lo, hi) in runs {
            let off = lo - base;
            if off >= per {
                if procs > 0 {
                    to.visit(node, procs, sockets, kind(procs, sockets))?;
                    (procs, sockets) = (0, 0);
                }
                if off < 2 * per {
                    node += 1;
                    base += per;
                } else {
                    node = lo / per;
                    base = node * per;
                }
            }
            let off = lo - base;
            if off > 0 {
                // The run starts inside the node: its piece here, up to its end or the node's.
                let end = (hi - base).min(per);
                procs += end - off;
                sockets |= self.from[off as usize] & self.upto[end as usize - 1];
                if end < per {
                    continue;
                }
                to.visit(node, procs, sockets, kind(procs, sockets))?;
                (procs, sockets) = (0, 0);
                node += 1;
                base += per;
            }
            while hi - base >= per {
                to.visit(node, per, self.every, self.whole)?;
                node += 1;
                base += per;
            }
            if hi > base {
                // The run ends inside a node it starts: the node's first piece.
                debug_assert_eq!(procs, 0);
                procs = hi - base;
                sockets = self.upto[procs as usize - 1];
            }
        }
        if procs > 0 {
            to.visit(node, procs, sockets, kind(procs, sockets))?;
        }
        Ok(())
    }
}

/// A start's seats: the job goes on each node the walk visits, alone or beside a job that was
/// alone there (both are priced there at the reprice); a node holding two jobs refuses it. A
/// first slot left by a stopped job (see [`Rates::stop`]) counts as empty: taking it spoils
/// that job's kept seats.
struct Seating<'a> {
    job: u32,
    nodes: &'a mut [[Here; 2]],
    running: &'a [bool],
    kept: &'a mut [Kept],
    alone_of: &'a mut [[u32; 4]],
    touched: &'a mut Vec<u32>,
    touched_flag: &'a mut [bool],
    /// The job's nodes so far, its nodes alone by kind, and its processes.
    seated: Vec<u32>,
    alone: [u32; 4],
    procs: u32,
}

impl NodeVisit for Seating<'_> {
    #[inline(always)]
    fn visit(&mut self, node: u32, procs: u32, _: u32, k: u8) -> Result<(), u32> {
        let me = Here {
            job: self.job,
            kind: k,
            counted: 0,
        };
        let slots = &mut self.nodes[node as usize];
        let first = slots[0].job;
        if first == NONE || !self.running[first as usize] {
            if first != NONE && self.kept[first as usize] == Kept::Whole {
                self.kept[first as usize] = Kept::Spoilt;
            }
            slots[0] = me;
            self.alone[usize::from(k)] += 1;
        } else if slots[1].job == NONE {
            let first = slots[0];
            debug_assert_eq!(first.counted, 0);
            slots[1] = me;
            self.alone_of[first.job as usize][usize::from(first.kind)] -= 1;
            if !std::mem::replace(&mut self.touched_flag[node as usize], true) {
                self.touched.push(node);
            }
        } else {
            return Err(node);
        }
        self.seated.push(node);
        self.procs += procs;
        Ok(())
    }
}

/// The PE set read PE by PE: (node, processes, processors) for each node it touches, what
/// a [`NodeWalk`] must hand over; debug builds check every start against it.
#[cfg(any(test, debug_assertions))]
fn nodes_by_pe(m: MachineShape, pes: &PeSet) -> Vec<(u32, u32, u32)> {
    let mut out: Vec<(u32, u32, u32)> = Vec::new();
    for pe in pes.iter() {
        let (node, bit) = (m.node_of(pe).0, 1 << m.socket_of(pe));
        match out.last_mut() {
            Some(h) if h.0 == node => {
                h.1 += 1;
                h.2 |= bit;
            }
            _ => out.push((node, 1, bit)),
        }
    }
    out
}

/// What a job that does not run keeps of its last seats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// Nothing: its node list is empty and no slot names it.
    None,
    /// It was alone on every node when it stopped and is still in the first slot of each:
    /// resumed on the same PEs it takes them back as they are.
    Whole,
    /// Another job took the first slot of some of its nodes: the rest still name it.
    Spoilt,
}

/// Rates of the running jobs.
///
/// A job's slowdown on a node changes only when the node's occupants change, so each running
/// job keeps its nodes counted in two ways: the nodes where it is alone, by kind of placement
/// (its slowdown there is its self-slowdown for that kind, whoever runs elsewhere), and the
/// nodes it shares, in a tally by slowdown (few distinct values: its self-slowdowns times its
/// partners' coscheduling slowdowns), brought up to date on the touched nodes only. Its
/// slowdown is then the largest of its alone kinds' and its tally's values. A start or stop
/// writes each of the job's nodes once and prices only the nodes where a partner is (or
/// was): a job alone on all its nodes, the common case, is priced in constant time.
///
/// A time-sharing policy stops the jobs of one slice and resumes them, on the same PEs, a
/// slice later, mostly alone on the same nodes each time. So a job that stops alone on all its
/// nodes leaves its seats in place ([`Kept::Whole`]): a slot naming a job that does not run
/// counts as empty, and a resume on the PEs it stopped on (compared run by run) takes the
/// seats back without reading a node, unless another job took one meanwhile.
#[derive(Clone, Debug)]
pub(crate) struct Rates {
    model: Slowdowns,
    /// The machine, for debug builds to read each start PE by PE beside the walk.
    #[cfg(debug_assertions)]
    machine: MachineShape,
    walk: NodeWalk,
    /// Work done, in thousandths of a microsecond.
    done: Vec<u64>,
    /// When `done` was last brought up to date.
    since: Vec<Time>,
    /// The slowdown in force, 0 while the job does not run or has not been priced yet.
    slow: Vec<Milli>,
    /// Whether the job runs (priced or not).
    running: Vec<bool>,
    /// Per job that does not run, what it keeps of its last seats (its `job_nodes`, `alone`
    /// and `procs` stay with them).
    kept: Vec<Kept>,
    /// Per job, the PE runs its seats were read from (kept while it runs or keeps seats).
    seated_on: Vec<Vec<(u32, u32)>>,
    /// The nodes each running job is on.
    job_nodes: Vec<Vec<u32>>,
    /// Processes of each running job.
    procs: Vec<u32>,
    /// Per running job, the nodes where it is alone, by [`kind`].
    alone: Vec<[u32; 4]>,
    /// Per running job, its priced shared nodes counted by slowdown there: (slowdown,
    /// nodes), by decreasing slowdown.
    tally: Vec<Vec<(Milli, u32)>>,
    /// Per job, its node and core self-slowdowns (SL_nos, SL_crs), 0 until first needed:
    /// drawing them is a hash per call.
    selfs: Vec<[Milli; 2]>,
    /// The jobs on each node: slot 0 holds the first, slot 1 a partner ([`EMPTY`] when none).
    nodes: Vec<[Here; 2]>,
    /// Nodes that gained a partner and must be repriced.
    touched: Vec<u32>,
    touched_flag: Vec<bool>,
    /// Node lists of stopped jobs, kept for the next start so that suspending and resuming
    /// wide jobs allocates nothing.
    spare: Vec<Vec<u32>>,
    /// The jobs to reprice, with a mark each.
    jobs: Vec<u32>,
    listed: Vec<bool>,
    /// Nodes running at least one process, and processes running.
    pub busy_nodes: u32,
    pub busy_cores: u32,
}

/// One more node of a job at slowdown `v`.
fn tally_add(t: &mut Vec<(Milli, u32)>, v: Milli) {
    match t.binary_search_by(|e| v.cmp(&e.0)) {
        Ok(i) => t[i].1 += 1,
        Err(i) => t.insert(i, (v, 1)),
    }
}

/// One node fewer of a job at slowdown `v`.
fn tally_remove(t: &mut Vec<(Milli, u32)>, v: Milli) {
    let i = t
        .binary_search_by(|e| v.cmp(&e.0))
        .expect("a counted slowdown is in the tally");
    t[i].1 -= 1;
    if t[i].1 == 0 {
        t.remove(i);
    }
}

/// Machine usage over a run by the number of jobs waiting (formulas 1–3 of seed 001): for
/// each count of waiting jobs (the last entry for that many or more), the time spent at it
/// and the node and core time used meanwhile, all in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub by_wait: Vec<[u128; 3]>,
    pub nodes: u32,
    pub cores_per_node: u32,
    last: Option<Time>,
}

impl Usage {
    /// Waiting counts kept apart; more are counted with the last.
    pub const LEVELS: usize = 257;

    pub fn new(machine: MachineShape) -> Usage {
        Usage {
            by_wait: vec![[0; 3]; Usage::LEVELS],
            nodes: machine.nodes,
            cores_per_node: machine.pes_per_node(),
            last: None,
        }
    }

    /// The state since the last call held until `now`.
    pub fn advance(&mut self, now: Time, waiting: usize, nodes: u32, cores: u32) {
        if let Some(t) = self.last {
            let dt = (now - t).as_micros().max(0) as u128;
            let row = &mut self.by_wait[waiting.min(Usage::LEVELS - 1)];
            row[0] += dt;
            row[1] += dt * u128::from(nodes);
            row[2] += dt * u128::from(cores);
        }
        self.last = Some(now);
    }
}

/// A decision put a third job on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overshared {
    pub node: NodeId,
    pub job: usize,
}

impl Rates {
    pub fn new(model: Slowdowns, machine: MachineShape, jobs: usize) -> Rates {
        Rates {
            model,
            #[cfg(debug_assertions)]
            machine,
            walk: NodeWalk::new(machine),
            done: vec![0; jobs],
            since: vec![Time::ZERO; jobs],
            slow: vec![0; jobs],
            running: vec![false; jobs],
            kept: vec![Kept::None; jobs],
            seated_on: vec![Vec::new(); jobs],
            job_nodes: vec![Vec::new(); jobs],
            procs: vec![0; jobs],
            alone: vec![[0; 4]; jobs],
            tally: vec![Vec::new(); jobs],
            selfs: vec![[0; 2]; jobs],
            nodes: vec![[EMPTY; 2]; machine.nodes as usize],
            touched: Vec::new(),
            touched_flag: vec![false; machine.nodes as usize],
            spare: Vec::new(),
            jobs: Vec::new(),
            listed: vec![false; jobs],
            busy_nodes: 0,
            busy_cores: 0,
        }
    }

    /// The job is to be repriced at the next [`Rates::reprice`].
    fn list(&mut self, job: u32) {
        if !std::mem::replace(&mut self.listed[job as usize], true) {
            self.jobs.push(job);
        }
    }

    /// The job starts (or resumes) on `pes` at `now`; its price comes at [`Rates::reprice`].
    /// A node that already holds two jobs refuses the start, and the state is left as it was.
    pub fn start(&mut self, job: usize, pes: &PeSet, now: Time) -> Result<(), Overshared> {
        debug_assert!(!self.running[job]);
        debug_assert!(self.tally[job].is_empty());
        match self.kept[job] {
            Kept::Whole if self.seated_on[job] == pes.runs() => {
                self.kept[job] = Kept::None;
                self.busy_nodes += self.job_nodes[job].len() as u32;
                self.busy_cores += self.procs[job];
                self.running[job] = true;
                #[cfg(debug_assertions)]
                self.check_seats(job, pes);
                self.slow[job] = 0;
                self.since[job] = now;
                self.list(job as u32);
                return Ok(());
            }
            Kept::None => {}
            Kept::Whole | Kept::Spoilt => self.forget(job),
        }
        let mut seating = Seating {
            job: job as u32,
            nodes: &mut self.nodes,
            running: &self.running,
            kept: &mut self.kept,
            alone_of: &mut self.alone,
            touched: &mut self.touched,
            touched_flag: &mut self.touched_flag,
            seated: self.spare.pop().unwrap_or_default(),
            alone: [0; 4],
            procs: 0,
        };
        debug_assert!(seating.seated.is_empty());
        let walked = self.walk.walk(pes, &mut seating);
        let Seating {
            seated: mut nodes,
            alone,
            procs,
            ..
        } = seating;
        if let Err(node) = walked {
            self.unseat(job as u32, &nodes);
            nodes.clear();
            self.spare.push(nodes);
            return Err(Overshared {
                node: NodeId(node),
                job,
            });
        }
        self.busy_nodes += alone.iter().sum::<u32>();
        self.busy_cores += procs;
        self.procs[job] = procs;
        self.alone[job] = alone;
        self.job_nodes[job] = nodes;
        self.running[job] = true;
        let on = &mut self.seated_on[job];
        on.clear();
        on.extend_from_slice(pes.runs());
        #[cfg(debug_assertions)]
        self.check_seats(job, pes);
        self.slow[job] = 0;
        self.since[job] = now;
        self.list(job as u32);
        Ok(())
    }

    /// Debug builds: the seats of a started job are its PE set's nodes, read PE by PE, with
    /// its placement on each.
    #[cfg(debug_assertions)]
    fn check_seats(&self, job: usize, pes: &PeSet) {
        let by_pe = nodes_by_pe(self.machine, pes);
        let by_node: Vec<(u32, u8)> = self.job_nodes[job]
            .iter()
            .map(|&n| {
                let slots = &self.nodes[n as usize];
                let h = slots[usize::from(slots[0].job != job as u32)];
                debug_assert_eq!(h.job, job as u32, "job {job} seated on node {n}");
                (n, h.kind)
            })
            .collect();
        let expected: Vec<(u32, u8)> = by_pe.iter().map(|&(n, p, s)| (n, kind(p, s))).collect();
        debug_assert_eq!(by_node, expected, "placement per node of job {job}");
        let procs: u32 = by_pe.iter().map(|h| h.1).sum();
        debug_assert_eq!(self.procs[job], procs, "processes of job {job}");
    }

    /// Clears the seats a job that does not run kept: the first slots that still name it.
    fn forget(&mut self, job: usize) {
        let mut nodes = std::mem::take(&mut self.job_nodes[job]);
        if self.kept[job] != Kept::None {
            for &n in &nodes {
                let slots = &mut self.nodes[n as usize];
                if slots[0].job == job as u32 {
                    debug_assert_eq!(slots[1].job, NONE);
                    slots[0] = EMPTY;
                }
            }
            self.kept[job] = Kept::None;
        }
        self.alone[job] = [0; 4];
        self.procs[job] = 0;
        nodes.clear();
        self.spare.push(nodes);
    }

    /// Takes a refused start back from the nodes it was seated on. A node it touched stays
    /// listed: the reprice passes over a node without a partner.
    fn unseat(&mut self, job: u32, nodes: &[u32]) {
        for &n in nodes {
            let slots = &mut self.nodes[n as usize];
            if slots[0].job == job {
                slots[0] = EMPTY;
            } else {
                slots[1] = EMPTY;
                let first = slots[0];
                self.alone[first.job as usize][usize::from(first.kind)] += 1;
            }
        }
    }

    /// Work done up to `now` at the price in force.
    fn accrue(&mut self, job: usize, now: Time) {
        let s = self.slow[job];
        if s > 0 {
            let wall = (now - self.since[job]).as_micros().max(0) as u64;
            self.done[job] += wall * 1_000_000 / u64::from(s);
        }
        self.since[job] = now;
    }

    /// The job stops (suspended or preempted) at `now`; its work so far is kept. Its
    /// partners are left alone on the nodes they shared with it. Alone on all its nodes, it
    /// keeps its seats there ([`Kept::Whole`]) for a resume on the same PEs.
    pub fn stop(&mut self, job: usize, now: Time) {
        if !self.running[job] {
            return;
        }
        let seats = self.job_nodes[job].len() as u32;
        if self.alone[job].iter().sum::<u32>() == seats {
            debug_assert!(self.tally[job].is_empty());
            self.accrue(job, now);
            self.running[job] = false;
            self.slow[job] = 0;
            self.kept[job] = Kept::Whole;
            self.busy_cores -= self.procs[job];
            self.busy_nodes -= seats;
            return;
        }
        self.unseat_stopped(job, now);
    }

    /// The job ends at `now` (or stops for good): its seats are cleared and nothing of them
    /// is kept.
    pub fn end(&mut self, job: usize, now: Time) {
        if self.running[job] {
            self.unseat_stopped(job, now);
        } else {
            self.forget(job);
        }
        self.seated_on[job] = Vec::new();
    }

    /// A running job stops and leaves every node it is on.
    fn unseat_stopped(&mut self, job: usize, now: Time) {
        self.accrue(job, now);
        self.running[job] = false;
        self.slow[job] = 0;
        self.tally[job].clear();
        self.alone[job] = [0; 4];
        self.busy_cores -= std::mem::take(&mut self.procs[job]);
        let mut nodes = std::mem::take(&mut self.job_nodes[job]);
        let mut freed = 0;
        for &n in &nodes {
            let slots = &mut self.nodes[n as usize];
            if slots[1].job == NONE {
                // Alone here: the job is the first.
                slots[0] = EMPTY;
                freed += 1;
                continue;
            }
            let other = slots[usize::from(slots[0].job == job as u32)];
            slots[1] = EMPTY;
            slots[0] = Here {
                counted: 0,
                ..other
            };
            let o = other.job as usize;
            if other.counted != 0 {
                tally_remove(&mut self.tally[o], other.counted);
            }
            self.alone[o][usize::from(other.kind)] += 1;
            self.list(other.job);
        }
        self.busy_nodes -= freed;
        nodes.clear();
        self.spare.push(nodes);
    }

    /// The job's self-slowdown on a node where its placement is of kind `k`.
    fn own(&mut self, job: usize, k: u8, me: JobId) -> Milli {
        if k == 0 {
            return 1000;
        }
        let sc = &mut self.selfs[job];
        if sc[0] == 0 {
            *sc = [self.model.nos(me), self.model.crs(me)];
        }
        let [nos, crs] = *sc;
        match k {
            1 => nos,
            2 => crs,
            _ => cosched_core::multicore::mul(nos, crs),
        }
    }

    /// The slowdown of a running job now, the straightforward way: the largest over all its
    /// nodes. The counts must agree with it.
    #[cfg(debug_assertions)]
    fn slowdown_by_nodes(&self, job: usize, ids: &impl Fn(usize) -> JobId) -> Milli {
        let me = ids(job);
        let mut worst = 1000;
        for &n in &self.job_nodes[job] {
            let slots = &self.nodes[n as usize];
            let Some(h) = slots.iter().find(|h| h.job == job as u32) else {
                continue;
            };
            let own = match h.kind {
                0 => 1000,
                1 => self.model.nos(me),
                2 => self.model.crs(me),
                _ => cosched_core::multicore::mul(self.model.nos(me), self.model.crs(me)),
            };
            let s = match slots.iter().find(|o| o.job != job as u32 && o.job != NONE) {
                Some(o) => {
                    cosched_core::multicore::mul(own, self.model.cos(me, ids(o.job as usize)))
                }
                None => own,
            };
            worst = worst.max(s);
        }
        worst
    }

    /// Reprices every job that started, or gained or lost a partner on a node. For each whose
    /// price changed (or that was just started), `reend(job, end)` is called with its new end
    /// time.
    pub fn reprice(
        &mut self,
        now: Time,
        work: &[Dur],
        ids: &impl Fn(usize) -> JobId,
        mut reend: impl FnMut(usize, Time),
    ) {
        let mut touched = std::mem::take(&mut self.touched);
        for &n in &touched {
            self.touched_flag[n as usize] = false;
            let slots = self.nodes[n as usize];
            // A partner that came and went within the round leaves the node as it was.
            if slots[1].job == NONE {
                continue;
            }
            for i in 0..2 {
                let h = slots[i];
                let j = h.job as usize;
                let me = ids(j);
                let own = self.own(j, h.kind, me);
                let with = ids(slots[1 - i].job as usize);
                let s = cosched_core::multicore::mul(own, self.model.cos(me, with));
                if s != h.counted {
                    let t = &mut self.tally[j];
                    if h.counted != 0 {
                        tally_remove(t, h.counted);
                    }
                    tally_add(t, s);
                    self.nodes[n as usize][i].counted = s;
                }
                self.list(h.job);
            }
        }
        touched.clear();
        self.touched = touched;
        let mut jobs = std::mem::take(&mut self.jobs);
        // By job: the order in which new ends are handed out decides ties among them.
        jobs.sort_unstable();
        for &j in &jobs {
            let j = j as usize;
            self.listed[j] = false;
            if !self.running[j] {
                continue;
            }
            let mut s = self.tally[j].first().map_or(1000, |e| e.0.max(1000));
            let alone = self.alone[j];
            for (k, &count) in alone.iter().enumerate() {
                if count > 0 {
                    s = s.max(self.own(j, k as u8, ids(j)));
                }
            }
            #[cfg(debug_assertions)]
            debug_assert_eq!(s, self.slowdown_by_nodes(j, ids), "slowdown of job {j}");
            if s == self.slow[j] {
                continue;
            }
            self.accrue(j, now);
            self.slow[j] = s;
            let need = (work[j].as_micros().max(0) as u64).saturating_mul(1000);
            let left = need.saturating_sub(self.done[j]);
            // Ceiling: the job ends at the first microsecond by which its work is done.
            let wall = (u128::from(left) * u128::from(s)).div_ceil(1_000_000) as i64;
            reend(j, now + Dur::from_micros(wall));
        }
        jobs.clear();
        self.jobs = jobs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const JOBS: usize = 8;

    fn machine() -> MachineShape {
        MachineShape {
            nodes: 6,
            sockets_per_node: 2,
            cores_per_socket: 2,
            mem_per_node_mib: None,
        }
    }

    /// The straightforward engine: every running job's slowdown from its PEs over the whole
    /// machine after every round, repriced when it changed.
    struct Plain {
        model: Slowdowns,
        pes: Vec<Option<Vec<u32>>>,
        done: Vec<u64>,
        since: Vec<Time>,
        slow: Vec<Milli>,
    }

    impl Plain {
        /// The jobs other than `job` with a process on `node`.
        fn others(&self, node: u32, job: usize) -> Vec<usize> {
            let per = machine().pes_per_node();
            (0..JOBS)
                .filter(|&o| {
                    o != job
                        && self.pes[o]
                            .as_ref()
                            .is_some_and(|p| p.iter().any(|&pe| pe / per == node))
                })
                .collect()
        }

        fn slowdown(&self, job: usize) -> Milli {
            let m = machine();
            let per = m.pes_per_node();
            let me = JobId(100 + job as u64);
            let pes = self.pes[job].as_ref().unwrap();
            let mut worst = 1000;
            for node in 0..m.nodes {
                let mine: Vec<u32> = pes.iter().copied().filter(|&p| p / per == node).collect();
                if mine.is_empty() {
                    continue;
                }
                let sockets: std::collections::BTreeSet<u32> = mine
                    .iter()
                    .map(|&p| m.socket_of(cosched_core::PeId(p)))
                    .collect();
                let own = match (mine.len(), sockets.len()) {
                    (1, _) => 1000,
                    (c, d) if c == d => self.model.nos(me),
                    (_, 1) => self.model.crs(me),
                    _ => cosched_core::multicore::mul(self.model.nos(me), self.model.crs(me)),
                };
                let s = match self.others(node, job).first() {
                    Some(&o) => {
                        cosched_core::multicore::mul(own, self.model.cos(me, JobId(100 + o as u64)))
                    }
                    None => own,
                };
                worst = worst.max(s);
            }
            worst
        }

        fn accrue(&mut self, job: usize, now: Time) {
            let s = self.slow[job];
            if s > 0 {
                let wall = (now - self.since[job]).as_micros().max(0) as u64;
                self.done[job] += wall * 1_000_000 / u64::from(s);
            }
            self.since[job] = now;
        }

        fn reprice(&mut self, now: Time, work: &[Dur]) -> Vec<(usize, Time)> {
            let mut out = Vec::new();
            for (j, work) in work.iter().enumerate() {
                if self.pes[j].is_none() {
                    continue;
                }
                let s = self.slowdown(j);
                if s == self.slow[j] {
                    continue;
                }
                self.accrue(j, now);
                self.slow[j] = s;
                let need = (work.as_micros() as u64) * 1000;
                let left = need.saturating_sub(self.done[j]);
                let wall = (u128::from(left) * u128::from(s)).div_ceil(1_000_000) as i64;
                out.push((j, now + Dur::from_micros(wall)));
            }
            out
        }
    }

    /// The walk's visits, refused at one node if any.
    struct Visits {
        nodes: Vec<(u32, u32, u32, u8)>,
        refused: Option<u32>,
    }

    impl NodeVisit for Visits {
        fn visit(&mut self, node: u32, procs: u32, sockets: u32, k: u8) -> Result<(), u32> {
            if self.refused == Some(node) {
                return Err(node);
            }
            self.nodes.push((node, procs, sockets, k));
            Ok(())
        }
    }

    proptest! {
        /// On machines of 1 to 4 processors of 1 to 5 cores, PE sets of short runs, runs
        /// across nodes, whole stretches and runs far apart are read node by node as PE by PE.
        #[test]
        fn the_walk_reads_nodes_as_pe_by_pe(
            sockets in 1u32..5,
            cores in 1u32..6,
            nodes in 1u32..12,
            gaps in proptest::collection::vec((0u32..30, 1u32..30), 0..12),
        ) {
            let m = MachineShape {
                nodes,
                sockets_per_node: sockets,
                cores_per_socket: cores,
                mem_per_node_mib: None,
            };
            let mut pes = PeSet::new();
            let mut pe = 0;
            for (gap, len) in gaps {
                let lo = (pe + gap).min(m.total_pes());
                let hi = (lo + len).min(m.total_pes());
                pes.push_sorted(lo, hi);
                pe = hi;
            }
            let mut walked = Visits { nodes: Vec::new(), refused: None };
            prop_assert!(NodeWalk::new(m).walk(&pes, &mut walked).is_ok());
            let expected: Vec<(u32, u32, u32, u8)> = nodes_by_pe(m, &pes)
                .into_iter()
                .map(|(n, p, s)| (n, p, s, kind(p, s)))
                .collect();
            prop_assert_eq!(walked.nodes, expected);
        }

        /// The walk stops at the first node its visit refuses.
        #[test]
        fn the_walk_stops_at_a_refusal(
            start in 0u32..40,
            len in 1u32..40,
            refused in 0u32..10,
        ) {
            let m = machine();
            let pes = PeSet::contiguous(start, len.min(m.total_pes() - start.min(m.total_pes())));
            let mut walked = Visits { nodes: Vec::new(), refused: Some(refused) };
            let r = NodeWalk::new(m).walk(&pes, &mut walked);
            let all: Vec<u32> = nodes_by_pe(m, &pes).iter().map(|h| h.0).collect();
            let before: Vec<u32> = all.iter().copied().take_while(|&n| n != refused).collect();
            prop_assert_eq!(r, if all.contains(&refused) { Err(refused) } else { Ok(()) });
            let got: Vec<u32> = walked.nodes.iter().map(|v| v.0).collect();
            prop_assert_eq!(got, before);
        }
    }

    /// A job stopped alone on its nodes keeps its seats: resumed on the same PEs it takes
    /// them back whole; once another job took one of its nodes, or on other PEs, it is seated
    /// afresh. Its price is the same either way.
    #[test]
    fn a_job_stopped_alone_resumes_on_its_kept_seats() {
        let m = machine();
        let model = Slowdowns::new(7);
        let work = vec![Dur::from_secs(1000); JOBS];
        let ids = |j: usize| JobId(100 + j as u64);
        let mut rates = Rates::new(model, m, JOBS);
        let reprice = |r: &mut Rates, now: Time| r.reprice(now, &work, &ids, |_, _| {});
        // Job 0 on nodes 0 and 1 (two PEs on node 1), job 1 beside it on node 1.
        let pes0 = PeSet::from_pes([0, 1, 2, 3, 4, 6]);
        let pes1 = PeSet::from_pes([5]);
        rates.start(0, &pes0, Time::ZERO).unwrap();
        reprice(&mut rates, Time::ZERO);
        let alone_price = rates.slow[0];
        rates.start(1, &pes1, Time::ZERO).unwrap();
        reprice(&mut rates, Time::ZERO);
        // Sharing node 1, job 0 clears its seats when it stops.
        rates.stop(0, Time::from_secs(1));
        assert_eq!(rates.kept[0], Kept::None);
        assert!(rates.job_nodes[0].is_empty());
        rates.end(1, Time::from_secs(1));
        assert_eq!((rates.busy_nodes, rates.busy_cores), (0, 0));
        // Alone, it keeps them, and a resume on the same PEs takes them back whole.
        rates.start(0, &pes0, Time::from_secs(2)).unwrap();
        reprice(&mut rates, Time::from_secs(2));
        rates.stop(0, Time::from_secs(3));
        assert_eq!(rates.kept[0], Kept::Whole);
        assert_eq!((rates.busy_nodes, rates.busy_cores), (0, 0));
        rates.start(0, &pes0, Time::from_secs(4)).unwrap();
        assert_eq!(rates.kept[0], Kept::None);
        assert_eq!((rates.busy_nodes, rates.busy_cores), (2, 6));
        reprice(&mut rates, Time::from_secs(4));
        assert_eq!(rates.slow[0], alone_price);
        // Job 2 takes node 1 while job 0 is stopped: job 0's seats are spoilt, and its
        // resume seats it afresh beside job 2.
        rates.stop(0, Time::from_secs(5));
        rates
            .start(2, &PeSet::from_pes([7]), Time::from_secs(5))
            .unwrap();
        assert_eq!(rates.kept[0], Kept::Spoilt);
        reprice(&mut rates, Time::from_secs(5));
        rates.start(0, &pes0, Time::from_secs(6)).unwrap();
        reprice(&mut rates, Time::from_secs(6));
        let mut fresh = Rates::new(model, m, JOBS);
        fresh.start(2, &PeSet::from_pes([7]), Time::ZERO).unwrap();
        fresh.start(0, &pes0, Time::ZERO).unwrap();
        reprice(&mut fresh, Time::ZERO);
        assert_eq!(rates.slow[..3], fresh.slow[..3]);
        assert_eq!((rates.busy_nodes, rates.busy_cores), (2, 7));
        // Stopped alone on other PEs than it resumes on: seated afresh, its old first
        // slots cleared.
        rates.end(2, Time::from_secs(7));
        reprice(&mut rates, Time::from_secs(7));
        rates.stop(0, Time::from_secs(8));
        assert_eq!(rates.kept[0], Kept::Whole);
        rates
            .start(0, &PeSet::from_pes([8, 9]), Time::from_secs(9))
            .unwrap();
        assert_eq!(rates.job_nodes[0], vec![2]);
        assert!(
            rates.nodes[..2]
                .iter()
                .all(|s| s[0].job == NONE && s[1].job == NONE)
        );
        // Ended, it keeps nothing.
        rates.end(0, Time::from_secs(10));
        assert_eq!(rates.kept[0], Kept::None);
        assert!(
            rates
                .nodes
                .iter()
                .all(|s| s[0].job == NONE && s[1].job == NONE)
        );
    }

    proptest! {
        /// Random starts and stops, several to a round, of jobs scattered over the nodes or
        /// on stretches of them: the counts of nodes alone and the tallies of shared ones give
        /// every job the slowdown of the straightforward computation and the same new ends, in
        /// the same order; a start refused for a third job on a node leaves the state as it
        /// was.
        #[test]
        fn tallies_match_the_straightforward_computation(
            seed in 0u64..1000,
            work in proptest::collection::vec(1i64..2000, JOBS),
            rounds in proptest::collection::vec(
                (
                    1i64..200,
                    proptest::collection::vec(
                        (0usize..JOBS, any::<u16>(), any::<bool>(), any::<bool>()),
                        1..5,
                    ),
                ),
                1..40,
            ),
        ) {
            let m = machine();
            let model = Slowdowns::new(seed);
            let work: Vec<Dur> = work.into_iter().map(Dur::from_secs).collect();
            let ids = |j: usize| JobId(100 + j as u64);
            let mut rates = Rates::new(model, m, JOBS);
            let mut plain = Plain {
                model,
                pes: vec![None; JOBS],
                done: vec![0; JOBS],
                since: vec![Time::ZERO; JOBS],
                slow: vec![0; JOBS],
            };
            // The PEs each stopped (not ended) job last ran on.
            let mut last: Vec<Option<Vec<u32>>> = vec![None; JOBS];
            let mut now = Time::ZERO;
            for (dt, actions) in rounds {
                now += Dur::from_millis(dt * 137);
                for (j, mask, contiguous, again) in actions {
                    if plain.pes[j].is_some() {
                        // Stopped to be resumed, or ended.
                        if again {
                            rates.stop(j, now);
                        } else {
                            rates.end(j, now);
                        }
                        plain.accrue(j, now);
                        last[j] = plain.pes[j].take().filter(|_| again);
                        plain.slow[j] = 0;
                        continue;
                    }
                    let used: Vec<u32> = plain.pes.iter().flatten().flatten().copied().collect();
                    let free: Vec<u32> =
                        (0..m.total_pes()).filter(|p| !used.contains(p)).collect();
                    // Resumed where it stopped if those PEs are free, or scattered PEs, or a
                    // stretch of the free ones (whole nodes, as wide jobs take them, and nodes
                    // alone).
                    let resume = last[j].take().filter(|p| p.iter().all(|pe| free.contains(pe)));
                    let pick: Vec<u32> = if let Some(p) = resume {
                        p
                    } else if contiguous {
                        let lo = usize::from(mask & 0xff) % free.len().max(1);
                        let len = usize::from(mask >> 8) % 16;
                        free.iter().skip(lo).take(len).copied().collect()
                    } else {
                        free.iter()
                            .enumerate()
                            .filter(|&(k, _)| mask >> (k % 16) & 1 == 1)
                            .map(|(_, &p)| p)
                            .collect()
                    };
                    if pick.is_empty() {
                        continue;
                    }
                    let per = m.pes_per_node();
                    let third = pick.iter().any(|&p| plain.others(p / per, j).len() >= 2);
                    let before = (rates.busy_nodes, rates.busy_cores);
                    let r = rates.start(j, &PeSet::from_pes(pick.iter().copied()), now);
                    prop_assert_eq!(r.is_err(), third);
                    if third {
                        prop_assert_eq!((rates.busy_nodes, rates.busy_cores), before);
                        continue;
                    }
                    plain.pes[j] = Some(pick);
                    plain.slow[j] = 0;
                    plain.since[j] = now;
                }
                let mut got = Vec::new();
                rates.reprice(now, &work, &ids, |j, end| got.push((j, end)));
                prop_assert_eq!(got, plain.reprice(now, &work));
                for j in 0..JOBS {
                    prop_assert_eq!(rates.slow[j], plain.slow[j], "job {}", j);
                    // After a reprice every node of a job is counted once: alone or priced.
                    let alone: u32 = rates.alone[j].iter().sum();
                    let shared: u32 = rates.tally[j].iter().map(|e| e.1).sum();
                    prop_assert_eq!((alone + shared) as usize, rates.job_nodes[j].len());
                }
                let used: Vec<u32> = plain.pes.iter().flatten().flatten().copied().collect();
                let per = m.pes_per_node();
                let mut busy: Vec<u32> = used.iter().map(|p| p / per).collect();
                busy.sort_unstable();
                busy.dedup();
                prop_assert_eq!(rates.busy_cores as usize, used.len());
                prop_assert_eq!(rates.busy_nodes as usize, busy.len());
            }
        }
    }
}
