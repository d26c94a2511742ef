//! The discrete-event engine. Events are ordered by (time, sequence number), time is integer
//! microseconds, and every process draws its compute times from its own seeded generator, so a
//! scenario, a scheme and a seed give one exact outcome.
//!
//! The engine owns the mechanics — PEs, processes' progress through their BSP iterations, the
//! network, job admission and time accounting — and asks each node's
//! [`NodeScheduler`] for every scheduling decision.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use cosched_core::{Dur, Time};
use cosched_node::{Action, LoadInfo, NodeScheduler, ProcClass, SchedParams, Scheme, WaitPolicy};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::results::{Breakdown, ClassChange, JobResult, ProcResult, RunResult};
use crate::scenario::Scenario;
use crate::workload::{AppJob, draw_size};

#[derive(Clone, Copy, Debug)]
enum Ev {
    JobArrive(usize),
    /// The running segment on a PE reaches a compute end, quantum end or spin end.
    SegEnd {
        pe: usize,
        epoch: u64,
    },
    /// A context switch or overhead period on a PE is over.
    BusyEnd {
        pe: usize,
        epoch: u64,
    },
    IoDone(u32),
    Msg {
        dst: u32,
        iter: u32,
        from_node: u32,
        info: LoadInfo,
    },
    Heartbeat,
    PbTick(u32),
    /// The NIC finished sending a process's messages (CC).
    SendDone(u32),
    /// The local schedulers' starvation check (`[schemes] ts_update`).
    TsUpdate,
}

struct Entry {
    at: Time,
    /// At equal times the NIC delivers messages before CPUs act on their timers, so a receive
    /// whose spin ends exactly when its message lands still catches it.
    class: u8,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.class, self.seq) == (o.at, o.class, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse so the earliest (then first scheduled) pops first.
        (o.at, o.class, o.seq).cmp(&(self.at, self.class, self.seq))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PeState {
    Idle,
    Busy {
        until: Time,
        switch: Dur,
        overhead: Dur,
        /// The process a charge interrupted: it continues where it stopped when the period
        /// ends, unless the scheduler was asked to decide again in the meantime.
        resume: Option<u32>,
    },
    Running {
        proc: u32,
    },
}

struct Pe {
    node: u32,
    local: usize,
    state: PeState,
    since: Time,
    epoch: u64,
    last_run: Option<u32>,
    quantum_end: Option<Time>,
    acct: Breakdown,
    last_traced: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Compute,
    Io,
    Send,
    /// CC: the messages are queued at the NIC; the sender waits for the send to complete.
    SendWait,
    Wait,
    Done,
}

struct Proc {
    job: usize,
    rank: u32,
    node: u32,
    gpe: usize,
    iter: u32,
    phase: Phase,
    rem: Dur,
    peers: Vec<u32>,
    /// Arrived, unconsumed messages: (iteration, arrival, sender node).
    inbox: Vec<(u32, Time, u32)>,
    got: u32,
    /// When the NIC has sent the current iteration's messages (CC).
    send_done: Time,
    policy: Option<WaitPolicy>,
    spin_left: Option<Dur>,
    blocked: bool,
    blocked_since: Time,
    wait_waited: Dur,
    wait_blocked: bool,
    rng: Pcg64,
    work_factor: f64,
    variance: f64,
    /// FCS class when the process exited.
    final_class: Option<&'static str>,
}

struct JobRt {
    start: Option<Time>,
    end: Option<Time>,
    procs: Vec<u32>,
    left: u32,
    row: u32,
}

/// Runs one scheme on a scenario's jobs.
pub struct Engine<'a> {
    sc: &'a Scenario,
    scheme: Scheme,
    jobs_in: &'a [AppJob],
    now: Time,
    seq: u64,
    heap: BinaryHeap<Entry>,
    nodes: Vec<NodeScheduler>,
    pes: Vec<Pe>,
    procs: Vec<Proc>,
    jobs: Vec<JobRt>,
    queue: VecDeque<usize>,
    /// Ousterhout matrix: rows × PEs, holding process ids.
    matrix: Vec<Vec<Option<u32>>>,
    mpl: u32,
    slot: u32,
    unfinished: usize,
    events: u64,
    pending_sum: Dur,
    pending_n: u64,
    history: Option<Vec<ClassChange>>,
    transit: Dur,
    /// Per node: when its NIC is free to send the next message (`serial_nic`).
    nic_free: Vec<Time>,
    trace: Option<Vec<Dispatch>>,
    /// Queued events other than heartbeats and boost ticks.
    live: u64,
    stalled: bool,
}

/// A process starting to run on a PE (recorded by [`Engine::traced`], for tests and plots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub at: Time,
    /// Global PE index (node × PEs per node + local PE).
    pub pe: usize,
    pub job: u32,
    pub rank: u32,
}

impl<'a> Engine<'a> {
    pub fn new(
        sc: &'a Scenario,
        scheme: Scheme,
        jobs: &'a [AppJob],
        record_history: bool,
    ) -> Engine<'a> {
        let m = sc.machine;
        let mpl = if scheme == Scheme::Fcfs { 1 } else { m.mpl };
        let fcs = sc.fcs_params();
        let params = SchedParams {
            scheme,
            pes: m.pes_per_node as usize,
            spin_time: sc.schemes.spin_time.unwrap_or(sc.costs.latency),
            interrupt: sc.costs.interrupt,
            check_endpoint: sc.costs.check_endpoint,
            global_info: sc.costs.global_info,
            queue_reorder: sc.costs.queue_reorder,
            proc: sc.schemes.proc.options(),
            fcs,
        };
        let nodes = (0..m.nodes)
            .map(|_| NodeScheduler::new(params.clone()))
            .collect();
        let mut pes = Vec::new();
        for n in 0..m.nodes {
            for l in 0..m.pes_per_node as usize {
                pes.push(Pe {
                    node: n,
                    local: l,
                    state: PeState::Idle,
                    since: Time::ZERO,
                    epoch: 0,
                    last_run: None,
                    quantum_end: None,
                    acct: Breakdown::default(),
                    last_traced: None,
                });
            }
        }
        let total = pes.len();
        Engine {
            sc,
            scheme,
            jobs_in: jobs,
            now: Time::ZERO,
            seq: 0,
            heap: BinaryHeap::new(),
            nodes,
            pes,
            procs: Vec::new(),
            jobs: jobs
                .iter()
                .map(|_| JobRt {
                    start: None,
                    end: None,
                    procs: Vec::new(),
                    left: 0,
                    row: 0,
                })
                .collect(),
            queue: VecDeque::new(),
            matrix: vec![vec![None; total]; mpl as usize],
            mpl,
            slot: 0,
            unfinished: jobs.len(),
            events: 0,
            pending_sum: Dur::ZERO,
            pending_n: 0,
            history: record_history.then(Vec::new),
            transit: sc.costs.transit(),
            nic_free: vec![Time::ZERO; sc.machine.nodes as usize],
            trace: None,
            live: 0,
            stalled: false,
        }
    }

    /// Records every dispatch; [`Engine::run_traced`] returns them.
    pub fn traced(mut self) -> Self {
        self.trace = Some(Vec::new());
        self
    }

    /// Runs and returns the result with the dispatch trace (empty unless [`Engine::traced`]).
    pub fn run_traced(mut self) -> (RunResult, Vec<Dispatch>) {
        let trace = std::mem::take(&mut self.trace);
        self.trace = trace.map(|_| Vec::new());
        let mut out = Vec::new();
        let r = self.run_inner(&mut out);
        (r, out)
    }

    /// Runs to completion (or the scenario's time limit) and reports.
    pub fn run(self) -> RunResult {
        let mut sink = Vec::new();
        self.run_inner(&mut sink)
    }

    fn at(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        let class = u8::from(!matches!(ev, Ev::Msg { .. }));
        if !matches!(ev, Ev::Heartbeat | Ev::PbTick(_) | Ev::TsUpdate) {
            self.live += 1;
        }
        self.heap.push(Entry {
            at,
            class,
            seq: self.seq,
            ev,
        });
    }

    fn run_inner(mut self, trace_out: &mut Vec<Dispatch>) -> RunResult {
        for (i, j) in self.jobs_in.iter().enumerate() {
            self.at(j.arrival, Ev::JobArrive(i));
        }
        if self.scheme.is_gang() {
            self.at(Time::ZERO + self.sc.schemes.timeslice, Ev::Heartbeat);
        }
        if self.scheme.uses_periodic_boost() {
            for n in 0..self.nodes.len() as u32 {
                self.at(Time::ZERO + self.sc.schemes.pb_period, Ev::PbTick(n));
            }
        }
        if let Some(p) = self.sc.schemes.ts_update
            && !self.scheme.is_gang()
        {
            self.at(Time::ZERO + p, Ev::TsUpdate);
        }
        let limit = self.sc.limits.max_time.map(|d| Time::ZERO + d);
        // Heartbeats and boost ticks alone cannot unblock a process: if nothing else is left
        // for a few rounds, the run is stuck (a modelling error) and stops instead of spinning.
        let stall_after = 2 * (u64::from(self.mpl) + 2) * (self.nodes.len() as u64 + 1);
        let mut idle_ticks = 0u64;
        while self.unfinished > 0 {
            let Some(e) = self.heap.pop() else { break };
            if limit.is_some_and(|l| e.at > l) {
                self.now = limit.unwrap_or(e.at);
                break;
            }
            self.now = e.at;
            self.events += 1;
            let periodic = matches!(e.ev, Ev::Heartbeat | Ev::PbTick(_) | Ev::TsUpdate);
            if !periodic {
                self.live -= 1;
            }
            self.handle(e.ev);
            idle_ticks = if periodic && self.live == 0 {
                idle_ticks + 1
            } else {
                0
            };
            if idle_ticks > stall_after {
                self.stalled = true;
                break;
            }
        }
        if let Some(t) = self.trace.take() {
            *trace_out = t;
        }
        self.finish()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::JobArrive(j) => {
                self.queue.push_back(j);
                self.admit();
            }
            Ev::SegEnd { pe, epoch } => {
                if self.pes[pe].epoch == epoch {
                    self.seg_end(pe);
                }
            }
            Ev::BusyEnd { pe, epoch } => {
                if self.pes[pe].epoch == epoch {
                    let resume = match self.pes[pe].state {
                        PeState::Busy { resume, .. } => resume,
                        _ => None,
                    };
                    self.close(pe);
                    match resume {
                        Some(p) => self.resume(pe, p),
                        None => {
                            self.pes[pe].state = PeState::Idle;
                            self.repick(pe);
                        }
                    }
                }
            }
            Ev::IoDone(p) => {
                let pr = &mut self.procs[p as usize];
                pr.phase = Phase::Send;
                let node = pr.node as usize;
                let acts = self.nodes[node].wake(p, false);
                self.apply(node, acts);
            }
            Ev::Msg {
                dst,
                iter,
                from_node,
                info,
            } => self.msg(dst, iter, from_node, info),
            Ev::Heartbeat => {
                for id in 0..self.procs.len() as u32 {
                    if self.procs[id as usize].blocked {
                        let active = self.row_active(id);
                        self.flush_blocked(id, active);
                    }
                }
                self.slot = self.next_slot();
                for n in 0..self.nodes.len() {
                    let acts = self.nodes[n].heartbeat(self.slot);
                    self.apply(n, acts);
                }
                let next = self.now + self.sc.schemes.timeslice;
                self.at(next, Ev::Heartbeat);
            }
            Ev::PbTick(n) => {
                let acts = self.nodes[n as usize].periodic_boost(self.now);
                self.apply(n as usize, acts);
                let next = self.now + self.sc.schemes.pb_period;
                self.at(next, Ev::PbTick(n));
            }
            Ev::SendDone(p) => self.send_done(p),
            Ev::TsUpdate => {
                for n in 0..self.nodes.len() {
                    let acts = self.nodes[n].ts_update();
                    self.apply(n, acts);
                }
                if let Some(p) = self.sc.schemes.ts_update {
                    self.at(self.now + p, Ev::TsUpdate);
                }
            }
        }
    }

    /// The next occupied row of the matrix after the current one.
    fn next_slot(&self) -> u32 {
        for k in 1..=self.mpl {
            let r = (self.slot + k) % self.mpl;
            if self.matrix[r as usize].iter().any(Option::is_some) {
                return r;
            }
        }
        self.slot
    }

    /// FCFS admission: the head of the queue enters the first matrix row with enough free
    /// PEs; nobody overtakes it.
    fn admit(&mut self) {
        while let Some(&j) = self.queue.front() {
            let need = self.jobs_in[j].procs as usize;
            let Some(row) = (0..self.mpl as usize)
                .find(|&r| self.matrix[r].iter().filter(|c| c.is_none()).count() >= need)
            else {
                return;
            };
            self.queue.pop_front();
            let cols: Vec<usize> = (0..self.pes.len())
                .filter(|&c| self.matrix[row][c].is_none())
                .take(need)
                .collect();
            let job = &self.jobs_in[j];
            self.jobs[j].start = Some(self.now);
            self.jobs[j].row = row as u32;
            self.jobs[j].left = job.procs;
            let first = self.procs.len() as u32;
            for (rank, &gpe) in cols.iter().enumerate() {
                let rank = rank as u32;
                let id = first + rank;
                let (factor, variance) = job.rank_params(rank);
                let seed = self.sc.seed
                    ^ (u64::from(job.id) << 20)
                    ^ u64::from(rank).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut p = Proc {
                    job: j,
                    rank,
                    node: self.pes[gpe].node,
                    gpe,
                    iter: 0,
                    phase: Phase::Compute,
                    rem: Dur::ZERO,
                    peers: job
                        .send_peers(rank)
                        .into_iter()
                        .map(|r| first + r)
                        .collect(),
                    inbox: Vec::new(),
                    got: 0,
                    send_done: Time::ZERO,
                    policy: None,
                    spin_left: None,
                    blocked: false,
                    blocked_since: Time::ZERO,
                    wait_waited: Dur::ZERO,
                    wait_blocked: false,
                    rng: Pcg64::seed_from_u64(seed),
                    work_factor: factor,
                    variance,
                    final_class: None,
                };
                p.rem = draw(&mut p.rng, job.compute, factor, variance);
                self.procs.push(p);
                self.matrix[row][gpe] = Some(id);
                self.jobs[j].procs.push(id);
                if let Some(h) = self.history.as_mut()
                    && self.scheme == Scheme::Fcs
                {
                    h.push(ClassChange {
                        time_s: self.now.as_secs_f64(),
                        job: job.id,
                        rank,
                        class: "CS",
                    });
                }
            }
            for (rank, &gpe) in cols.iter().enumerate() {
                let id = first + rank as u32;
                let node = self.pes[gpe].node as usize;
                let acts = self.nodes[node].add(id, self.pes[gpe].local, row as u32);
                self.apply(node, acts);
            }
        }
    }

    fn finish(mut self) -> RunResult {
        for gpe in 0..self.pes.len() {
            if let PeState::Busy { until, .. } = self.pes[gpe].state {
                // A busy period still open at the end counts as far as it went.
                let d = self.now.since(self.pes[gpe].since);
                if let PeState::Busy {
                    switch, overhead, ..
                } = self.pes[gpe].state
                {
                    let ov = overhead.min(d);
                    self.pes[gpe].acct.overhead += ov;
                    self.pes[gpe].acct.context_switch += (d - ov).min(switch);
                }
                let _ = until;
                self.pes[gpe].since = self.now;
                self.pes[gpe].state = PeState::Idle;
            } else {
                self.close(gpe);
            }
        }
        let end = self.now;
        let ppn = self.sc.machine.pes_per_node as usize;
        let nodes: Vec<Breakdown> = (0..self.nodes.len())
            .map(|n| {
                self.pes[n * ppn..(n + 1) * ppn]
                    .iter()
                    .fold(Breakdown::default(), |a, pe| a.plus(&pe.acct))
            })
            .collect();
        let total = nodes.iter().fold(Breakdown::default(), |a, b| a.plus(b));
        let mut jobs = Vec::new();
        for (j, rt) in self.jobs.iter().enumerate() {
            let spec = &self.jobs_in[j];
            let processes = rt
                .procs
                .iter()
                .map(|&id| {
                    let p = &self.procs[id as usize];
                    let class = p
                        .final_class
                        .or_else(|| self.nodes[p.node as usize].class(id).map(ProcClass::label));
                    ProcResult {
                        rank: p.rank,
                        node: p.node,
                        pe: self.pes[p.gpe].local as u32,
                        class,
                    }
                })
                .collect();
            jobs.push(JobResult::new(spec, rt.start, rt.end, processes));
        }
        let stalled = self.stalled;
        let mut r = RunResult::new(
            self.scheme,
            end,
            self.events,
            if self.pending_n > 0 {
                self.pending_sum.as_secs_f64() / self.pending_n as f64
            } else {
                0.0
            },
            total,
            nodes,
            jobs,
            self.history,
        );
        r.stalled = stalled;
        r
    }
}

fn node_of(p: &Proc) -> usize {
    p.node as usize
}

/// One iteration's compute (or I/O): basic × factor × (1 + unif(−v, v)), at least 1 µs.
fn draw(rng: &mut Pcg64, basic: Dur, factor: f64, variance: f64) -> Dur {
    let jitter = if variance > 0.0 {
        rng.random_range(-variance..variance)
    } else {
        0.0
    };
    Dur(((basic.0 as f64) * factor * (1.0 + jitter)).round() as i64).max(Dur(1))
}

mod pes;
mod progress;
#[cfg(test)]
mod tests;
