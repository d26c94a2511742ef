//! The discrete-event driver: runs one [`Policy`] over a list of jobs in virtual time.
//!
//! Time is integer ([`Time`], microseconds) and advances in *instants*: at each time that
//! something happens, the policy observes every event of that time — job ends, then arrivals
//! (by submit time, then id), then timers — and decides once ([`Policy::decide`]). Events
//! that its decisions cause at the same time (a kill's end, a timer set for now, a job with
//! no work left) form a further round of the instant. Equal inputs give byte-identical
//! outputs.
//!
//! What a decision means — the job lifecycle, the checks of the policy's promises, the run
//! and suspended time, the records — is the job ledger's ([`cosched_ledger`]), shared with
//! the machine manager. This driver keeps only virtual time and what the policy must never
//! see: each job's actual runtime. Timers sit in a heap; the end events of running jobs sit
//! apart, indexed by job (`RunningEnds`), so a suspension removes its job's end at once and
//! millions of suspend/resume decisions leave no stale entries behind.
//!
//! The jobs may all be known at the start ([`simulate`]) or come in pieces while a trace is
//! still being read (`simulate_streamed`, for `cosched_report::run::run_read`): the same loop asks
//! for more jobs before an instant until it knows one submitted after it, so a trace in
//! submit order gives the same schedule either way; a job that comes after its submit time
//! was simulated ends the run ([`SimError::OutOfOrder`]) and the caller runs it whole.
//!
//! With a slowdown model ([`EngineOptions::slowdowns`], seed 001's multi-core nodes) a job's
//! progress rate follows the slowdowns in force: the engine reprices the jobs of every node
//! where a job started or stopped and moves their ends (`crate::rates`), and it refuses a
//! decision that puts a third job on a node.
//!
//! Without a slowdown model, a policy whose matrix only rotates between outside events is
//! not woken every quantum: whole periods of its rotation are skipped (`skip`, and the
//! policy contract's "Skipping quanta").

#[path = "skip.rs"]
mod skip;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cosched_core::{Dur, JobId, JobRecord, MachineShape, NodeId, Outcome, Slowdowns, Time};
use cosched_ledger::instant::{self, Stage};
use cosched_ledger::{Change, Ledger, LedgerError, Room, limited_run};
use cosched_policy::{Decision, Event, JobRequest, Policy};

use crate::ahead::Ahead;
use crate::progress::{Progress, Snapshot};
pub use crate::rates::Usage;
use crate::rates::{Overshared, Rates};

/// One job as the simulator knows it: what the policy is told, and how long it really runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimJob {
    pub req: JobRequest,
    /// Work the job needs, in time on its PEs.
    pub runtime: Dur,
    /// When set, the job is killed after running this long (its time limit), ending as
    /// [`Outcome::TimedOut`] if its runtime is longer.
    pub limit: Option<Dur>,
}

impl SimJob {
    /// A job whose estimate is its exact runtime.
    pub fn exact(id: u64, submit: Time, procs: u32, runtime: Dur) -> SimJob {
        SimJob {
            req: JobRequest::new(JobId(id), submit, procs, runtime),
            runtime,
            limit: None,
        }
    }
    /// A job with a separate estimate.
    pub fn with_estimate(id: u64, submit: Time, procs: u32, runtime: Dur, estimate: Dur) -> SimJob {
        SimJob {
            req: JobRequest::new(JobId(id), submit, procs, estimate),
            runtime,
            limit: None,
        }
    }
    /// Run time after which the job ends: its runtime, cut at its limit.
    fn work(&self) -> Dur {
        limited_run(self.runtime, self.limit).0
    }
}

/// Something that happens to the jobs from outside the policy at a given time: what users and
/// the machine do in a real run, replayed in virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A user cancels the job (waiting or running).
    Cancel(JobId),
    /// A user holds the job; it does not run until released.
    Hold(JobId),
    Release(JobId),
    /// The node fails: the jobs on it end as [`Outcome::NodeFailed`].
    NodeDown(NodeId),
    NodeUp(NodeId),
}

/// Switches of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Let the policy observe arrivals before job ends within an instant (the default is ends
    /// first). The policy decides after both either way, so only a policy that acts on the
    /// order of what it observes can tell.
    pub arrivals_first: bool,
    /// Whether a preempted job may start again on other PEs with its work kept (the
    /// simulator models checkpoint and restart; `PolicyConfig::migration`).
    pub no_migration: bool,
    /// Operations at given times, delivered after the instant's timers.
    pub operations: Vec<(Time, Operation)>,
    /// Multi-core nodes with contention (seed 001): jobs progress at `1 / slowdown`, the
    /// slowdowns drawn by this model, and no node holds more than two jobs.
    pub slowdowns: Option<Slowdowns>,
    /// Where the run publishes how far it got, for a progress bar on another thread.
    pub progress: Progress,
}

/// What a run produced: one record per job, in input order.
#[derive(Clone, Debug)]
pub struct SimResult {
    pub policy: String,
    pub machine: MachineShape,
    pub records: Vec<JobRecord>,
    /// Actual runtime of each job (same order as `records`), for the metrics.
    pub runtimes: Vec<Dur>,
    /// Events delivered to the policy.
    pub events: u64,
    /// Decisions the policy took.
    pub decisions: u64,
    /// Jobs still waiting or stopped when nothing could happen any more (a policy that
    /// starves them, or jobs larger than the usable machine).
    pub unfinished: usize,
    /// The policy's own counters ([`Policy::stats`]).
    pub policy_stats: Vec<(String, f64)>,
    /// Node and core usage by the number of waiting jobs, with a slowdown model.
    pub usage: Option<Usage>,
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A decision broke the policy's contract, or a job id appears twice.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("job {job} needs {procs} PEs, more than the machine's {machine}")]
    TooLarge {
        job: JobId,
        procs: u32,
        machine: u32,
    },
    #[error("job {job} has a negative runtime")]
    NegativeRuntime { job: JobId },
    /// A job fed to a run that simulates while the trace is read was submitted at or before
    /// a time already simulated (the trace is not in submit order there): the run must be
    /// done again from the whole trace (`cosched_report::run::run_read` does).
    #[error(
        "job {job} comes after jobs submitted later than it (the input is not in submit order)"
    )]
    OutOfOrder { job: JobId },
    #[error("operation at t={time}s names job {job}, which is not in the workload")]
    UnknownJob { job: JobId, time: Time },
    #[error(
        "policy {policy} at t={time}: job {job} would be a third job on node {node} (at most two jobs share a node)"
    )]
    Overshared {
        policy: String,
        job: JobId,
        node: NodeId,
        time: Time,
    },
}

/// Timer heap entry; `Reverse` makes the max-heap pop the earliest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    time: Time,
    seq: u64,
    token: u64,
}

/// The end events of the running jobs. Time-sharing stops and restarts the same few tens of
/// jobs every quantum, so this is an unordered vector that knows where each job sits (O(1)
/// insertion and removal) and remembers its earliest entry, found again by one scan only
/// after that entry leaves.
struct RunningEnds {
    /// `(end, seq, job index)`.
    items: Vec<(Time, u64, u32)>,
    /// Position of each job in `items`, `u32::MAX` when it has no end event.
    pos: Vec<u32>,
    /// Position of the earliest `(end, seq)`; `None` when it must be searched for again.
    min: Option<usize>,
}

impl RunningEnds {
    fn new(jobs: usize) -> RunningEnds {
        RunningEnds {
            items: Vec::with_capacity(64),
            pos: vec![u32::MAX; jobs],
            min: None,
        }
    }
    /// Room for jobs `0..jobs`, as they become known.
    fn grow(&mut self, jobs: usize) {
        self.pos.resize(jobs, u32::MAX);
    }
    /// The earliest end event.
    fn peek(&mut self) -> Option<(Time, u64, u32)> {
        if self.items.is_empty() {
            return None;
        }
        let k = match self.min {
            Some(k) => k,
            None => {
                let mut k = 0;
                for (j, it) in self.items.iter().enumerate().skip(1) {
                    if (it.0, it.1) < (self.items[k].0, self.items[k].1) {
                        k = j;
                    }
                }
                self.min = Some(k);
                k
            }
        };
        Some(self.items[k])
    }
    #[inline]
    fn insert(&mut self, end: Time, seq: u64, job: usize) {
        debug_assert_eq!(self.pos[job], u32::MAX);
        let k = self.items.len();
        self.items.push((end, seq, job as u32));
        self.pos[job] = k as u32;
        if let Some(m) = self.min
            && (end, seq) < (self.items[m].0, self.items[m].1)
        {
            self.min = Some(k);
        } else if self.items.len() == 1 {
            self.min = Some(0);
        }
    }
    /// Moves every end event at or before `now` into `due`, in `(end, seq)` order: one scan
    /// for all the ends of an instant, instead of one per end after each removal.
    fn drain_due(&mut self, now: Time, due: &mut Vec<(Time, u64, u32)>) {
        match self.peek() {
            Some((t, _, _)) if t <= now => {}
            _ => return,
        }
        let mut k = self.items.len();
        while k > 0 {
            k -= 1;
            if self.items[k].0 <= now {
                let it = self.items.swap_remove(k);
                self.pos[it.2 as usize] = u32::MAX;
                if k < self.items.len() {
                    self.pos[self.items[k].2 as usize] = k as u32;
                }
                due.push(it);
            }
        }
        self.min = None;
        due.sort_unstable();
    }

    /// The sequence number of job `job`'s end event, if it has one.
    fn seq_of(&self, job: usize) -> Option<u64> {
        let k = self.pos[job];
        (k != u32::MAX).then(|| self.items[k as usize].1)
    }

    /// Drops job `job`'s end event, if it has one.
    #[inline]
    fn remove(&mut self, job: usize) {
        let k = self.pos[job];
        if k == u32::MAX {
            return;
        }
        let k = k as usize;
        self.pos[job] = u32::MAX;
        self.items.swap_remove(k);
        let last = self.items.len();
        if k < last {
            self.pos[self.items[k].2 as usize] = k as u32;
        }
        self.min = match self.min {
            Some(m) if m == k => None,
            // The last entry moved into the hole.
            Some(m) if m == last => Some(k),
            other => other,
        };
    }
}

/// Runs `policy` over `jobs` on `machine`. Jobs may come in any order; ids must be unique.
pub fn simulate(
    machine: MachineShape,
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    opts: EngineOptions,
) -> Result<SimResult, SimError> {
    // A policy that estimates from forecasts (Scojo-PECT) runs them on this engine.
    policy.set_forecaster(crate::forecast::shared());
    // Two monomorphic drivers: without a slowdown model the multi-core bookkeeping (rates,
    // the two-jobs-per-node check, usage) is compiled out of the per-decision path, which
    // time-sharing policies run millions of times.
    if opts.slowdowns.is_some() {
        Engine::<true, _>::new(machine, jobs, policy, opts)?
            .run()
            .map(|r| r.0)
    } else {
        Engine::<false, _>::new(machine, jobs, policy, opts)?
            .run()
            .map(|r| r.0)
    }
}

/// Where the engine's jobs come from: all known at the start (a slice), or piece by piece
/// while a trace is being read ([`Streamed`]). There is one engine loop for both: before an
/// instant, it asks for more jobs until it knows every job submitted by then.
pub(crate) trait Jobs {
    /// The jobs known so far, in input order.
    fn known(&self) -> &[SimJob];
    /// Waits for more jobs; false when there will be no more.
    fn more(&mut self) -> bool;
    /// How many jobs there will probably be in all (at least those known): room for them
    /// is reserved at once.
    fn expected(&self) -> usize {
        self.known().len()
    }
    /// Where the ledger will write the jobs still to come (see [`crate::ahead`]): offered to
    /// whoever makes that memory resident ahead of the simulation, if anyone does.
    fn ledger_room(&self, _room: [Room; 2]) {}
}

impl Jobs for &[SimJob] {
    fn known(&self) -> &[SimJob] {
        self
    }
    fn more(&mut self) -> bool {
        false
    }
}

/// Jobs arriving in pieces over a channel (a trace's pieces as they are parsed), kept as
/// they come: the run's workload when it ends. Room for the jobs the trace announces is
/// reserved at the start, so that each piece is copied once, not again at every growth.
pub(crate) struct Streamed<'a> {
    pub(crate) jobs: Vec<SimJob>,
    rx: std::sync::mpsc::Receiver<Vec<SimJob>>,
    /// The sender makes the room of the jobs and of the ledger resident ahead of them.
    ahead: &'a Ahead,
}

impl Jobs for Streamed<'_> {
    fn known(&self) -> &[SimJob] {
        &self.jobs
    }
    fn more(&mut self) -> bool {
        match self.rx.recv() {
            // Nothing reserved (the trace announced nothing): the first piece is taken as is.
            Ok(piece) if self.jobs.capacity() == 0 => self.jobs = piece,
            Ok(piece) => self.jobs.extend(piece),
            // Every sender is gone: the input has ended.
            Err(_) => return false,
        }
        self.ahead.offer("jobs", Room::of(&self.jobs));
        true
    }
    fn expected(&self) -> usize {
        self.jobs.capacity()
    }
    fn ledger_room(&self, [entries, records]: [Room; 2]) {
        self.ahead.offer("ledger entries", entries);
        self.ahead.offer("ledger records", records);
    }
}

/// Runs `policy` over the jobs received from `rx` as they come, in input order; the jobs
/// must be in submit order as far as the simulation has gone when they arrive
/// ([`SimError::OutOfOrder`] otherwise). Flat machines only (no slowdown model, no
/// operations). Gives the jobs back with the result: equal to [`simulate`] of the same jobs
/// when it succeeds. `expected`: how many jobs will probably come (room is reserved for
/// them; 0 if unknown). The room the jobs will be written to is offered to `ahead`, which
/// the sender populates; it is closed when the run ends.
pub fn simulate_streamed(
    machine: MachineShape,
    expected: usize,
    rx: std::sync::mpsc::Receiver<Vec<SimJob>>,
    ahead: &Ahead,
    policy: &mut dyn Policy,
    opts: EngineOptions,
) -> Result<(SimResult, Vec<SimJob>), SimError> {
    debug_assert!(opts.slowdowns.is_none() && opts.operations.is_empty());
    policy.set_forecaster(crate::forecast::shared());
    let feed = Streamed {
        jobs: Vec::with_capacity(expected),
        rx,
        ahead,
    };
    ahead.offer("jobs", Room::of(&feed.jobs));
    let run = Engine::<false, _>::new(machine, feed, policy, opts).and_then(Engine::run);
    ahead.close();
    let (res, feed) = run?;
    Ok((res, feed.jobs))
}

/// Runs `policy` forward from a live state instead of from nothing (see [`crate::forecast`]):
/// `jobs[i]` is `snapshot.jobs[i]`, with its remaining work as its runtime; the policy has
/// already seen every one of them, so none arrives, and the running ones end when their work
/// is done. Flat machines only (no slowdown model), as the machine manager's.
pub(crate) fn simulate_from(
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    snapshot: &cosched_policy::forecast::Snapshot,
) -> Result<SimResult, SimError> {
    let opts = EngineOptions {
        no_migration: !snapshot.migration,
        ..EngineOptions::default()
    };
    let mut engine = Engine::<false, _>::new(snapshot.machine, jobs, policy, opts)?;
    engine.resume_from(snapshot);
    if snapshot.introduce {
        engine.introduce(snapshot);
        engine.instant(snapshot.now)?;
    }
    engine.run().map(|r| r.0)
}

/// `MC`: a slowdown model is set (multi-core nodes); `rates` and `usage` are `Some` exactly
/// then.
struct Engine<'a, const MC: bool, F: Jobs> {
    machine: MachineShape,
    jobs: F,
    /// No more jobs will come.
    exhausted: bool,
    /// The latest submit time of the jobs known.
    latest: Option<Time>,
    /// The instant being simulated (or the last one); a job fed later must be submitted
    /// after it.
    clock: Option<Time>,
    policy: &'a mut dyn Policy,
    arrivals_first: bool,
    ledger: Ledger,
    /// Each job's work: its runtime, cut at its limit.
    work: Vec<Dur>,
    /// Job indices by (submit, id) (those not yet arrived sorted as the jobs come).
    arrivals: Vec<u32>,
    next_arrival: usize,
    /// Operations by time (stable: same-time operations keep their order).
    operations: Vec<(Time, Operation)>,
    next_operation: usize,
    /// Pending timers.
    heap: BinaryHeap<Reverse<Pending>>,
    /// End events of the running jobs.
    ends: RunningEnds,
    seq: u64,
    /// Ends caused by decisions, for the next round.
    caused: Vec<Event>,
    /// End events due at the current instant, in (time, sequence) order.
    due: Vec<(Time, u64, u32)>,
    /// A decision made something due at the current instant (an end, a timer, a job with no
    /// work left), so the instant needs another round.
    again: bool,
    out: Vec<Decision>,
    events: u64,
    decisions: u64,
    /// Progress rates, with a slowdown model.
    rates: Option<Rates>,
    /// A decision broke the two-jobs-per-node rule (reported after the decision).
    fault: Option<(Overshared, Time)>,
    usage: Option<Usage>,
    /// Jobs submitted that never ran and have not ended (kept with a slowdown model only,
    /// for `usage`).
    waiting: usize,
    /// Events told other than timers: a skipped period must have had none.
    other_events: u64,
    skipper: skip::Skipper,
    progress: Progress,
}

impl<'a, const MC: bool, F: Jobs> Engine<'a, MC, F> {
    fn new(
        machine: MachineShape,
        jobs: F,
        policy: &'a mut dyn Policy,
        opts: EngineOptions,
    ) -> Result<Engine<'a, MC, F>, SimError> {
        debug_assert_eq!(MC, opts.slowdowns.is_some());
        let known = jobs.known().len();
        let mut operations = opts.operations;
        operations.sort_by_key(|o| o.0);
        let ledger = Ledger::new(policy.name(), machine, !opts.no_migration);
        let mut engine = Engine {
            machine,
            jobs,
            exhausted: false,
            latest: None,
            clock: None,
            policy,
            arrivals_first: opts.arrivals_first,
            ledger,
            work: Vec::with_capacity(known),
            arrivals: Vec::with_capacity(known),
            next_arrival: 0,
            operations,
            next_operation: 0,
            heap: BinaryHeap::with_capacity(1024),
            ends: RunningEnds::new(0),
            seq: 0,
            caused: Vec::new(),
            due: Vec::with_capacity(64),
            again: true,
            out: Vec::with_capacity(64),
            events: 0,
            decisions: 0,
            // Sized for the jobs known at the start: a slowdown model needs them all then.
            rates: opts.slowdowns.map(|m| Rates::new(m, machine, known)),
            fault: None,
            usage: opts.slowdowns.map(|_| Usage::new(machine)),
            waiting: 0,
            other_events: 0,
            skipper: skip::Skipper::default(),
            progress: opts.progress,
        };
        engine.intake(0)?;
        for (time, op) in &engine.operations {
            if let Operation::Cancel(job) | Operation::Hold(job) | Operation::Release(job) = op
                && engine.ledger.find(*job).is_none()
            {
                return Err(SimError::UnknownJob {
                    job: *job,
                    time: *time,
                });
            }
        }
        Ok(engine)
    }

    /// Makes the jobs known from index `from` on part of the run: checked, added to the
    /// ledger, and placed among the arrivals still to come.
    fn intake(&mut self, from: usize) -> Result<(), SimError> {
        // The ledger holds the jobs before `from` already.
        let known = self.jobs.known().len();
        self.ledger
            .reserve(self.jobs.expected().max(known) - self.ledger.len());
        self.jobs.ledger_room(self.ledger.room());
        let jobs = self.jobs.known();
        let total = self.machine.total_pes();
        let key = |i: u32| (jobs[i as usize].req.submit, jobs[i as usize].req.id);
        let mut sorted = true;
        for (i, j) in jobs.iter().enumerate().skip(from) {
            if j.req.procs > total {
                return Err(SimError::TooLarge {
                    job: j.req.id,
                    procs: j.req.procs,
                    machine: total,
                });
            }
            if j.runtime < Dur::ZERO {
                return Err(SimError::NegativeRuntime { job: j.req.id });
            }
            self.ledger.add(j.req.clone())?;
            if self.clock.is_some_and(|c| j.req.submit <= c) {
                return Err(SimError::OutOfOrder { job: j.req.id });
            }
            if let Some(&last) = self.arrivals.last() {
                sorted &= key(last) < key(i as u32);
            }
            self.arrivals.push(i as u32);
            self.work.push(j.work());
            self.latest = self.latest.max(Some(j.req.submit));
        }
        if !sorted {
            self.arrivals[self.next_arrival..].sort_by_key(|&i| key(i));
        }
        self.ends.grow(jobs.len());
        Ok(())
    }

    /// Puts the ledger, the end events and the timers in the snapshot's state: every job
    /// submitted (the policy knows them all), the running ones with their end at `now` plus
    /// their remaining work.
    fn resume_from(&mut self, snapshot: &cosched_policy::forecast::Snapshot) {
        use cosched_policy::forecast::LiveState;
        let now = snapshot.now;
        self.next_arrival = self.arrivals.len();
        for node in &snapshot.down {
            self.ledger.node_down(*node);
        }
        for (i, live) in snapshot.jobs.iter().enumerate() {
            self.ledger.submit(i, now);
            let mut record = self.ledger.record(i).clone();
            record.start = live.started;
            match &live.state {
                LiveState::Waiting { .. } => {}
                LiveState::Running { pes, .. } => {
                    self.ledger
                        .adopt(i, pes.clone(), true, now, Dur::ZERO, record)
                }
                LiveState::Stopped { pes, .. } => {
                    self.ledger
                        .adopt(i, pes.clone(), false, now, Dur::ZERO, record)
                }
            }
            if live.held {
                self.ledger.hold(i, now);
            }
            if self.ledger.entry(i).is_running() {
                self.seq += 1;
                self.ends.insert(now + self.work[i], self.seq, i);
            }
        }
        for &(at, token) in &snapshot.timers {
            self.push_timer(at.max(now), token);
        }
    }

    /// Tells a policy that has seen none of the snapshot what it holds, as the first round
    /// of the instant `now` (see `Snapshot::introduce`).
    fn introduce(&mut self, snapshot: &cosched_policy::forecast::Snapshot) {
        use cosched_policy::forecast::LiveState;
        let now = snapshot.now;
        let caused = &mut self.caused;
        caused.extend(snapshot.down.iter().map(|&n| Event::NodeDown(n)));
        for live in &snapshot.jobs {
            caused.push(match &live.state {
                LiveState::Waiting { .. } => Event::Submitted(live.req.clone()),
                LiveState::Running { pes, ran } | LiveState::Stopped { pes, ran } => {
                    Event::Running {
                        job: live.req.clone(),
                        pes: pes.clone(),
                        since: now - *ran,
                    }
                }
            });
        }
        caused.extend(
            snapshot
                .jobs
                .iter()
                .filter(|j| j.held)
                .map(|j| Event::Held(j.req.id)),
        );
    }

    fn push_timer(&mut self, time: Time, token: u64) {
        self.seq += 1;
        self.heap.push(Reverse(Pending {
            time,
            seq: self.seq,
            token,
        }));
    }

    /// The time of the next instant, if anything is left to happen; first, while jobs are
    /// still coming, every job submitted by then is made known (jobs come in submit order,
    /// so once one was submitted later, those before it are all in).
    fn next_time(&mut self) -> Result<Option<Time>, SimError> {
        loop {
            let next = self.earliest();
            if self.exhausted || matches!((self.latest, next), (Some(l), Some(t)) if l > t) {
                return Ok(next);
            }
            let from = self.jobs.known().len();
            if self.jobs.more() {
                self.intake(from)?;
            } else {
                self.exhausted = true;
            }
        }
    }

    /// The earliest of what the engine knows will happen.
    fn earliest(&mut self) -> Option<Time> {
        let arrival = self
            .arrivals
            .get(self.next_arrival)
            .map(|&i| self.jobs.known()[i as usize].req.submit);
        let timer = self.heap.peek().map(|Reverse(p)| p.time);
        let end = self.ends.peek().map(|(t, _, _)| t);
        let op = self.operations.get(self.next_operation).map(|o| o.0);
        // Plain comparisons: an array of options here costs a store-forwarding stall on
        // every instant.
        let earliest = |a: Option<Time>, b: Option<Time>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        earliest(earliest(arrival, timer), earliest(end, op))
    }

    /// Runs to the end; gives back the jobs with the result.
    fn run(mut self) -> Result<(SimResult, F), SimError> {
        // Instants with nothing but timers while nothing runs and nothing is left to arrive,
        // in a row: a policy that keeps ticking over jobs it never starts would otherwise
        // loop for ever.
        let mut idle_ticks = 0u32;
        let mut instants = 0u64;
        while let Some(now) = self.next_time()? {
            self.clock = Some(now);
            // Often enough for a bar redrawn a few times a second, rarely enough to cost
            // nothing measurable.
            instants += 1;
            if instants.is_multiple_of(4096) {
                self.publish_progress();
            }
            let idle = self.ledger.running() == 0
                && self.exhausted
                && self.next_arrival == self.arrivals.len()
                && self.next_operation == self.operations.len();
            if idle {
                idle_ticks += 1;
                if idle_ticks > 10_000 || self.ledger.ended() == self.jobs.known().len() {
                    break;
                }
            } else {
                idle_ticks = 0;
            }
            self.instant(now)?;
            if !MC {
                self.cycle_point(now);
            }
        }
        self.publish_progress();
        let unfinished = self.jobs.known().len() - self.ledger.ended();
        let policy_stats = self
            .policy
            .stats()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let result = SimResult {
            policy_stats,
            usage: self.usage,
            policy: self.policy.name().to_string(),
            machine: self.machine,
            runtimes: self.jobs.known().iter().map(|j| j.runtime).collect(),
            records: self.ledger.into_records(),
            events: self.events,
            decisions: self.decisions,
            unfinished,
        };
        Ok((result, self.jobs))
    }

    fn publish_progress(&self) {
        if let Some(c) = &self.progress.0 {
            c.publish(Snapshot {
                known: self.jobs.known().len() as u64,
                ended: self.ledger.ended() as u64,
                all_known: self.exhausted,
            });
        }
    }

    /// Every round of the instant `now`: the policy observes each event as it is found, in
    /// the ledger's order of an instant ([`instant::order`]), then decides once.
    fn instant(&mut self, now: Time) -> Result<(), SimError> {
        if MC && let (Some(u), Some(r)) = (self.usage.as_mut(), self.rates.as_ref()) {
            u.advance(now, self.waiting, r.busy_nodes, r.busy_cores);
        }
        self.again = true;
        while std::mem::take(&mut self.again) {
            let before = self.events;
            for stage in instant::order(self.arrivals_first) {
                match stage {
                    // A simulation starts from nothing: no jobs are found running.
                    Stage::Hello => {}
                    Stage::Caused => {
                        for ev in std::mem::take(&mut self.caused) {
                            self.tell(now, ev);
                        }
                    }
                    Stage::Ends => self.ends_due(now),
                    Stage::Submitted => self.arrivals(now),
                    Stage::Timers => {
                        while let Some(Reverse(p)) = self.heap.peek()
                            && p.time <= now
                        {
                            let token = p.token;
                            self.heap.pop();
                            self.tell(now, Event::Timer(token));
                        }
                    }
                    Stage::Rest => {
                        while let Some((t, _)) = self.operations.get(self.next_operation)
                            && *t <= now
                        {
                            let op = self.operations[self.next_operation].1.clone();
                            self.next_operation += 1;
                            self.operate(now, op);
                        }
                    }
                }
            }
            if self.events == before {
                return Ok(());
            }
            let mut out = std::mem::take(&mut self.out);
            self.policy.decide(now, &mut out);
            self.decisions += out.len() as u64;
            for d in out.drain(..) {
                self.apply(now, d)?;
                if MC && let Some((o, time)) = self.fault.take() {
                    return Err(SimError::Overshared {
                        policy: self.policy.name().to_string(),
                        job: self.jobs.known()[o.job].req.id,
                        node: o.node,
                        time,
                    });
                }
            }
            self.out = out;
            if MC {
                self.reprice(now);
            }
        }
        Ok(())
    }

    /// New ends for the jobs whose co-runners changed in this round.
    fn reprice(&mut self, now: Time) {
        let Some(rates) = self.rates.as_mut() else {
            return;
        };
        let jobs = self.jobs.known();
        let ids = |i: usize| jobs[i].req.id;
        let (ends, seq, again) = (&mut self.ends, &mut self.seq, &mut self.again);
        rates.reprice(now, &self.work, &ids, |j, end| {
            ends.remove(j);
            *seq += 1;
            *again |= end <= now;
            ends.insert(end, *seq, j);
        });
    }

    /// The job no longer runs: no end event, no rate.
    #[inline]
    fn stopped(&mut self, job: usize, now: Time) {
        self.ends.remove(job);
        if MC && let Some(r) = self.rates.as_mut() {
            r.stop(job, now);
        }
    }

    /// Hands one event of the instant to the policy.
    #[inline]
    fn tell(&mut self, now: Time, ev: Event) {
        self.events += 1;
        self.other_events += u64::from(!matches!(ev, Event::Timer(_)));
        self.policy.observe(now, ev);
    }

    /// Jobs whose work is done at `now`.
    fn ends_due(&mut self, now: Time) {
        let mut due = std::mem::take(&mut self.due);
        self.ends.drain_due(now, &mut due);
        for &(_, _, i) in &due {
            let i = i as usize;
            if MC && let Some(r) = self.rates.as_mut() {
                r.stop(i, now);
            }
            let j = &self.jobs.known()[i];
            let (_, outcome) = limited_run(j.runtime, j.limit);
            self.ledger.end(i, now, outcome, None);
            self.tell(now, Event::Ended(self.jobs.known()[i].req.id));
        }
        due.clear();
        self.due = due;
    }

    fn arrivals(&mut self, now: Time) {
        while let Some(&i) = self.arrivals.get(self.next_arrival)
            && self.jobs.known()[i as usize].req.submit <= now
        {
            self.next_arrival += 1;
            self.waiting += usize::from(MC);
            self.ledger.submit(i as usize, now);
            let req = self.jobs.known()[i as usize].req.clone();
            self.tell(now, Event::Submitted(req));
        }
    }

    fn operate(&mut self, now: Time, op: Operation) {
        let ix = |l: &Ledger, job: JobId| l.find(job).expect("checked at the start");
        match op {
            Operation::Cancel(job) => {
                let i = ix(&self.ledger, job);
                if self.ledger.entry(i).is_live() {
                    if MC && !self.ledger.entry(i).launched() {
                        self.waiting -= 1;
                    }
                    self.stopped(i, now);
                    self.ledger.end(i, now, Outcome::Cancelled, None);
                    self.tell(now, Event::Ended(job));
                }
            }
            Operation::Hold(job) => {
                let i = ix(&self.ledger, job);
                if self.ledger.entry(i).is_live() && !self.ledger.entry(i).held() {
                    let change = self.ledger.hold(i, now);
                    self.carry_out(now, change);
                    self.tell(now, Event::Held(job));
                }
            }
            Operation::Release(job) => {
                let i = ix(&self.ledger, job);
                if self.ledger.entry(i).held() {
                    let change = self.ledger.release(i, now);
                    self.carry_out(now, change);
                    self.tell(now, Event::Released(job));
                }
            }
            Operation::NodeDown(node) => {
                if !self.ledger.is_down(node) {
                    self.tell(now, Event::NodeDown(node));
                    for i in self.ledger.node_down(node) {
                        self.stopped(i, now);
                        self.ledger.end(i, now, Outcome::NodeFailed, None);
                        self.tell(now, Event::Ended(self.jobs.known()[i].req.id));
                    }
                }
            }
            Operation::NodeUp(node) => {
                if self.ledger.is_down(node) {
                    self.ledger.node_up(node);
                    self.tell(now, Event::NodeUp(node));
                }
            }
        }
    }

    /// The simulator's side of a change: job ends and timers in virtual time.
    // Always inlined: it runs once per decision (millions of suspend/resume decisions under
    // gang), and a call per decision cost several percent.
    #[inline(always)]
    fn carry_out(&mut self, now: Time, change: Change) {
        match change {
            Change::Runs { job, launch } if MC => self.runs_priced(now, job, launch),
            Change::Runs { job, .. } => {
                let left = self.work[job] - self.ledger.entry(job).ran(now);
                self.again |= left <= Dur::ZERO;
                self.seq += 1;
                self.ends.insert(now + left, self.seq, job);
            }
            Change::Stops { job } => self.stopped(job, now),
            Change::Ends { job } => {
                if MC && !self.ledger.entry(job).launched() {
                    self.waiting = self.waiting.saturating_sub(1);
                }
                self.stopped(job, now);
                self.caused
                    .push(Event::Ended(self.jobs.known()[job].req.id));
                self.again = true;
            }
            Change::None | Change::Placed { .. } => {}
        }
    }

    /// A job starts or resumes under a slowdown model: priced with its co-runners at the end
    /// of the round (`reprice`). Kept out of line so that `carry_out` stays small.
    #[inline(never)]
    fn runs_priced(&mut self, now: Time, job: usize, launch: bool) {
        if launch {
            self.waiting -= 1;
        }
        let pes = self.ledger.entry(job).pes().clone();
        let rates = self.rates.as_mut().expect("set with a slowdown model");
        if let Err(o) = rates.start(job, &pes, now) {
            self.fault = Some((o, now));
        }
    }

    #[inline(always)]
    fn apply(&mut self, now: Time, d: Decision) -> Result<(), SimError> {
        if let Decision::SetTimer { at, token } = d {
            // At `now` or before: delivered in the next round of this instant.
            self.again |= at <= now;
            self.push_timer(at.max(now), token);
            return Ok(());
        }
        let change = self.ledger.apply(now, d)?;
        self.carry_out(now, change);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::PeSet;
    use cosched_policy::{PolicyConfig, registry};

    fn fcfs(pes: u32) -> (MachineShape, Box<dyn Policy>) {
        let m = MachineShape::flat(pes, 1);
        (m, registry::build("fcfs", &PolicyConfig::new(m)).unwrap())
    }

    /// Jobs in submit order with many equal submit times, the ids of each such group in
    /// decreasing order (so that the arrivals must be sorted across pieces).
    fn tied_jobs(n: u64, pes: u32) -> Vec<SimJob> {
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut jobs = Vec::new();
        let mut t = 0;
        while (jobs.len() as u64) < n {
            t += rnd(4) * 30;
            let group = 1 + rnd(3);
            let first = jobs.len() as u64;
            for k in (0..group).rev() {
                let runtime = Dur::from_secs(1 + rnd(400) as i64);
                let estimate = runtime + Dur::from_secs(rnd(300) as i64);
                let procs = 1 + rnd(pes as u64) as u32;
                let id = 1000 + first + k;
                let job =
                    SimJob::with_estimate(id, Time::from_secs(t as i64), procs, runtime, estimate);
                jobs.push(job);
            }
        }
        jobs
    }

    /// Feeds `jobs` in pieces of `piece` to the streamed engine, which expects `expected`,
    /// from another thread that makes the room of each piece resident before sending it, as
    /// the trace reader does.
    fn streamed(
        m: MachineShape,
        jobs: &[SimJob],
        piece: usize,
        expected: usize,
        p: &mut dyn Policy,
    ) -> Result<(SimResult, Vec<SimJob>), SimError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let ahead = &Ahead::new();
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut sent = 0;
                for c in jobs.chunks(piece) {
                    sent += c.len();
                    ahead.populate(sent);
                    tx.send(c.to_vec()).unwrap();
                }
            });
            simulate_streamed(m, expected, rx, ahead, p, EngineOptions::default())
        })
    }

    #[test]
    fn jobs_fed_in_pieces_give_the_schedule_of_all_at_once() {
        let m = MachineShape::flat(16, 1);
        let jobs = tied_jobs(400, 16);
        for policy in ["fcfs", "easy", "conservative"] {
            let cfg = PolicyConfig::new(m);
            let mut p = registry::build(policy, &cfg).unwrap();
            let all = simulate(m, &jobs, p.as_mut(), EngineOptions::default()).unwrap();
            // Expecting nothing, fewer jobs than come, all of them, or more (a trace's header
            // may be wrong either way): the same schedule.
            for (piece, expected) in [(1, 0), (2, 100), (7, 400), (64, 0), (1000, 5000), (7, 0)] {
                let mut p = registry::build(policy, &cfg).unwrap();
                let (res, back) = streamed(m, &jobs, piece, expected, p.as_mut()).unwrap();
                assert_eq!(res.records, all.records, "{policy}, pieces of {piece}");
                assert_eq!((res.events, res.decisions), (all.events, all.decisions));
                assert_eq!(res.runtimes, all.runtimes);
                assert_eq!(back, jobs);
            }
        }
    }

    /// Gang skips whole periods of its rotation up to the next arrival it knows; while the
    /// trace is still being read, a job read later but submitted inside the skipped time is
    /// out of order (the caller runs the whole trace), never silently late.
    #[test]
    fn a_job_read_after_gang_skipped_past_its_submit_time_stops_the_run() {
        let m = MachineShape::flat(1, 1);
        let mut cfg = PolicyConfig::new(m);
        cfg.quantum = Some(Dur::from_secs(10));
        let job = |id, t, run| SimJob::exact(id, Time::from_secs(t), 1, Dur::from_secs(run));
        // Two jobs share the one PE in turn long past t=50,000; the next one known comes at
        // about t=50,000 (the skip stops just before it, and the quantum after the skip may
        // fall on it or not: every phase is tried), and the one read later belongs at 3,000.
        for t3 in [50_000, 50_005, 50_010, 50_015] {
            let (tx, rx) = std::sync::mpsc::channel();
            tx.send(vec![job(1, 0, 100_000), job(2, 0, 100_000), job(3, t3, 10)])
                .unwrap();
            tx.send(vec![job(4, 3_000, 10)]).unwrap();
            drop(tx);
            let mut p = registry::build("gang", &cfg).unwrap();
            let err = simulate_streamed(
                m,
                0,
                rx,
                &Ahead::new(),
                p.as_mut(),
                EngineOptions::default(),
            )
            .unwrap_err();
            assert!(
                matches!(err, SimError::OutOfOrder { job: JobId(4) }),
                "t3={t3}: {err}"
            );
        }
    }

    #[test]
    fn a_job_fed_after_its_submit_time_was_simulated_stops_the_run() {
        let (m, mut p) = fcfs(4);
        let job = |id, t| SimJob::exact(id, Time::from_secs(t), 1, Dur::from_secs(10));
        // The third job's piece is asked for at t=100 (the last submit time known), after
        // t=0 and t=60 (the first job's end) were simulated: it belongs at t=50.
        let (tx, rx) = std::sync::mpsc::channel();
        let long = SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(60));
        tx.send(vec![long, job(2, 100)]).unwrap();
        tx.send(vec![job(3, 50)]).unwrap();
        drop(tx);
        let ahead = Ahead::new();
        let err =
            simulate_streamed(m, 0, rx, &ahead, p.as_mut(), EngineOptions::default()).unwrap_err();
        assert!(
            matches!(err, SimError::OutOfOrder { job: JobId(3) }),
            "{err}"
        );
        // Out of order among the jobs not yet arrived is no harm (here the third job comes
        // at t=100, when only t=0 and t=10 were simulated).
        let (_, mut p) = fcfs(4);
        let jobs = [job(1, 0), job(2, 100), job(3, 50), job(4, 200)];
        let all = simulate(m, &jobs, p.as_mut(), EngineOptions::default()).unwrap();
        let (_, mut p) = fcfs(4);
        let (res, _) = streamed(m, &jobs, 4, 0, p.as_mut()).unwrap();
        assert_eq!(res.records, all.records);
    }

    #[test]
    fn fcfs_runs_jobs_back_to_back() {
        let (m, mut p) = fcfs(4);
        let jobs = vec![
            SimJob::exact(1, Time::from_secs(0), 4, Dur::from_secs(10)),
            SimJob::exact(2, Time::from_secs(1), 2, Dur::from_secs(5)),
            SimJob::exact(3, Time::from_secs(10), 2, Dur::from_secs(5)),
        ];
        let r = simulate(m, &jobs, p.as_mut(), EngineOptions::default()).unwrap();
        let starts: Vec<_> = r
            .records
            .iter()
            .map(|r| r.start.unwrap().as_secs())
            .collect();
        // Job 1 ends at 10 and its end is handled before job 3 arrives at 10: both 2 and 3 start.
        assert_eq!(starts, vec![0, 10, 10]);
        let ends: Vec<_> = r.records.iter().map(|r| r.end.unwrap().as_secs()).collect();
        assert_eq!(ends, vec![10, 15, 15]);
        assert_eq!(r.unfinished, 0);
    }

    /// Records the events it is given and its decision points, in order, and lets FCFS
    /// decide.
    struct Recorder(Vec<String>, Box<dyn Policy>);
    impl Policy for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        fn observe(&mut self, now: Time, e: Event) {
            let what = match &e {
                Event::Submitted(j) => format!("{}:submit{}", now.as_secs(), j.id),
                Event::Ended(j) => format!("{}:end{}", now.as_secs(), j),
                other => format!("{other:?}"),
            };
            self.0.push(what);
            self.1.observe(now, e);
        }
        fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
            self.0.push(format!("{}:decide", now.as_secs()));
            self.1.decide(now, out);
        }
        fn queue(&self) -> Vec<JobId> {
            self.1.queue()
        }
        fn boxed_clone(&self) -> Box<dyn Policy> {
            Box::new(Recorder(self.0.clone(), self.1.boxed_clone()))
        }
    }

    #[test]
    fn one_decision_per_instant_after_ends_then_arrivals_unless_switched() {
        let (m, p) = fcfs(4);
        let jobs = vec![
            SimJob::exact(1, Time::from_secs(0), 4, Dur::from_secs(10)),
            SimJob::exact(2, Time::from_secs(10), 4, Dur::from_secs(5)),
        ];
        let mut r = Recorder(Vec::new(), p.boxed_clone());
        simulate(m, &jobs, &mut r, EngineOptions::default()).unwrap();
        assert_eq!(
            r.0,
            [
                "0:submit1",
                "0:decide",
                "10:end1",
                "10:submit2",
                "10:decide",
                "15:end2",
                "15:decide"
            ]
        );
        let mut r = Recorder(Vec::new(), p.boxed_clone());
        let res = simulate(
            m,
            &jobs,
            &mut r,
            EngineOptions {
                arrivals_first: true,
                ..EngineOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            r.0,
            [
                "0:submit1",
                "0:decide",
                "10:submit2",
                "10:end1",
                "10:decide",
                "15:end2",
                "15:decide"
            ]
        );
        assert_eq!(res.records[1].start, Some(Time::from_secs(10)));
    }

    /// A scripted policy: replays fixed decisions at given times, from timers (which fire
    /// after the arrivals of their instant).
    /// A test policy written one event at a time; [`PerEvent`] replays an instant's events
    /// to it at the decision.
    trait Stepper: Clone + Send + 'static {
        const NAME: &'static str;
        fn step(&mut self, now: Time, e: Event, out: &mut Vec<Decision>);
    }

    #[derive(Clone)]
    struct PerEvent<S>(S, Vec<(Time, Event)>);
    impl<S: Stepper> PerEvent<S> {
        fn new(inner: S) -> PerEvent<S> {
            PerEvent(inner, Vec::new())
        }
    }
    impl<S: Stepper> Policy for PerEvent<S> {
        fn name(&self) -> &str {
            S::NAME
        }
        fn observe(&mut self, now: Time, e: Event) {
            self.1.push((now, e));
        }
        fn decide(&mut self, _now: Time, out: &mut Vec<Decision>) {
            for (now, e) in std::mem::take(&mut self.1) {
                self.0.step(now, e, out);
            }
        }
        fn queue(&self) -> Vec<JobId> {
            Vec::new()
        }
        fn boxed_clone(&self) -> Box<dyn Policy> {
            Box::new(self.clone())
        }
    }

    #[derive(Clone)]
    struct Script(Vec<(Time, Vec<Decision>)>, bool);
    impl Script {
        fn new(steps: Vec<(Time, Vec<Decision>)>) -> PerEvent<Script> {
            PerEvent::new(Script(steps, false))
        }
    }
    impl Stepper for Script {
        const NAME: &'static str = "script";
        fn step(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
            if matches!(e, Event::Timer(_)) {
                self.1 = false;
                while let Some((t, _)) = self.0.first() {
                    if *t > now {
                        break;
                    }
                    out.extend(self.0.remove(0).1);
                }
            }
            if let Some((t, _)) = self.0.first()
                && !self.1
            {
                self.1 = true;
                out.push(Decision::SetTimer { at: *t, token: 0 });
            }
        }
    }

    #[test]
    fn suspend_resume_and_preempt_keep_progress() {
        let m = MachineShape::flat(2, 1);
        let jobs = vec![
            SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10)),
            SimJob::exact(2, Time::ZERO, 2, Dur::from_secs(4)),
        ];
        let s = |t: i64| Time::from_secs(t);
        let all = PeSet::contiguous(0, 2);
        let mut p = Script::new(vec![
            (
                s(0),
                vec![
                    Decision::Start {
                        job: JobId(1),
                        pes: all.clone(),
                        slot: Some(0),
                    },
                    Decision::Place {
                        job: JobId(2),
                        pes: all.clone(),
                        slot: Some(1),
                    },
                ],
            ),
            (
                s(3),
                vec![
                    Decision::Suspend { job: JobId(1) },
                    Decision::Resume { job: JobId(2) },
                ],
            ),
            (
                s(5),
                vec![
                    Decision::Suspend { job: JobId(2) },
                    Decision::Resume { job: JobId(1) },
                ],
            ),
            (
                s(6),
                vec![
                    Decision::Preempt { job: JobId(1) },
                    Decision::Resume { job: JobId(2) },
                ],
            ),
            (
                s(8),
                vec![Decision::Start {
                    job: JobId(1),
                    pes: all.clone(),
                    slot: None,
                }],
            ),
        ]);
        let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
        // Job 1: runs 0-3, 5-6 (4 s done), preempted, restarts at 8 for its last 6 s.
        assert_eq!(r.records[0].end, Some(s(14)));
        assert_eq!(r.records[0].start, Some(s(0)));
        assert_eq!(r.records[0].suspended, Dur::from_secs(4));
        assert_eq!(r.records[0].preemptions, 1);
        // Job 2: placed at 0, runs 3-5 and 6-8 (4 s): ends at 8, first ran at 3.
        assert_eq!(r.records[1].start, Some(s(3)));
        assert_eq!(r.records[1].end, Some(s(8)));
        assert_eq!(r.records[1].suspended, Dur::from_secs(1));
    }

    #[test]
    fn overlapping_runs_are_reported_with_policy_job_and_time() {
        let m = MachineShape::flat(2, 1);
        let jobs = vec![
            SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10)),
            SimJob::exact(7, Time::ZERO, 1, Dur::from_secs(4)),
        ];
        let mut p = Script::new(vec![(
            Time::ZERO,
            vec![
                Decision::Start {
                    job: JobId(1),
                    pes: PeSet::contiguous(0, 2),
                    slot: None,
                },
                Decision::Start {
                    job: JobId(7),
                    pes: PeSet::contiguous(1, 1),
                    slot: None,
                },
            ],
        )]);
        let err = simulate(m, &jobs, &mut p, EngineOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("script") && err.contains("job 7") && err.contains("t=0"),
            "{err}"
        );
    }

    #[test]
    fn starting_an_unsubmitted_job_is_an_error() {
        let m = MachineShape::flat(2, 1);
        let jobs = vec![
            SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(10)),
            SimJob::exact(2, Time::from_secs(5), 1, Dur::from_secs(4)),
        ];
        let mut p = Script::new(vec![(
            Time::ZERO,
            vec![Decision::Start {
                job: JobId(2),
                pes: PeSet::contiguous(0, 1),
                slot: None,
            }],
        )]);
        let err = simulate(m, &jobs, &mut p, EngineOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not submitted"), "{err}");
        let mut p = Script::new(vec![(
            Time::ZERO,
            vec![Decision::Resume { job: JobId(99) }],
        )]);
        let err = simulate(m, &jobs, &mut p, EngineOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown job"), "{err}");
    }

    /// Round robin of two jobs on one PE, one-second quanta: 20,000 context switches each
    /// remove one end event and add another, and the accounting must stay exact.
    #[derive(Clone)]
    struct RoundRobin {
        running: Option<u64>,
        alive: Vec<u64>,
    }
    impl Stepper for RoundRobin {
        const NAME: &'static str = "rr";
        fn step(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
            let pe = PeSet::contiguous(0, 1);
            match e {
                Event::Submitted(j) => {
                    self.alive.push(j.id.0);
                    if self.running.is_none() {
                        self.running = Some(j.id.0);
                        out.push(Decision::Start {
                            job: j.id,
                            pes: pe,
                            slot: Some(0),
                        });
                        out.push(Decision::SetTimer {
                            at: now + Dur::from_secs(1),
                            token: 0,
                        });
                    } else {
                        out.push(Decision::Place {
                            job: j.id,
                            pes: pe,
                            slot: Some(1),
                        });
                    }
                }
                Event::Ended(id) => {
                    self.alive.retain(|&j| j != id.0);
                    self.running = None;
                    if let Some(&next) = self.alive.first() {
                        self.running = Some(next);
                        out.push(Decision::Resume { job: JobId(next) });
                    }
                }
                Event::Timer(_) => {
                    if let (Some(cur), 2) = (self.running, self.alive.len()) {
                        let next = if self.alive[0] == cur {
                            self.alive[1]
                        } else {
                            self.alive[0]
                        };
                        out.push(Decision::Suspend { job: JobId(cur) });
                        out.push(Decision::Resume { job: JobId(next) });
                        self.running = Some(next);
                    }
                    if !self.alive.is_empty() {
                        out.push(Decision::SetTimer {
                            at: now + Dur::from_secs(1),
                            token: 0,
                        });
                    }
                }
                _ => {}
            }
        }
    }

    #[test]
    fn many_context_switches_keep_exact_accounting() {
        let m = MachineShape::flat(1, 1);
        let jobs = vec![
            SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(10_000)),
            SimJob::exact(2, Time::ZERO, 1, Dur::from_secs(10_000)),
        ];
        let mut p = PerEvent::new(RoundRobin {
            running: None,
            alive: Vec::new(),
        });
        let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
        // Job 1 runs in [0,1), [2,3), …: its 10,000th second ends at 19,999; job 2 at 20,000.
        assert_eq!(r.records[0].end, Some(Time::from_secs(19_999)));
        assert_eq!(r.records[1].end, Some(Time::from_secs(20_000)));
        assert_eq!(r.records[1].start, Some(Time::from_secs(1)));
        assert_eq!(r.records[0].suspended, Dur::from_secs(9_999));
        assert_eq!(r.records[1].suspended, Dur::from_secs(9_999));
    }

    /// The running-ends set against a sorted reference, over a long mix of inserts and
    /// removals that often drop the earliest entry (as suspending a whole row does).
    #[test]
    fn running_ends_always_yield_the_earliest_live_end() {
        use std::collections::BTreeSet;
        let jobs = 64;
        let mut ends = RunningEnds::new(jobs);
        let mut reference: BTreeSet<(Time, u64, u32)> = BTreeSet::new();
        let mut live: Vec<Option<(Time, u64)>> = vec![None; jobs];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for seq in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let job = (x % jobs as u64) as usize;
            match live[job] {
                Some((t, s)) => {
                    ends.remove(job);
                    reference.remove(&(t, s, job as u32));
                    live[job] = None;
                }
                None => {
                    // Few distinct times, so ties are broken by `seq`.
                    let t = Time::from_secs(((x >> 20) % 50) as i64);
                    ends.insert(t, seq, job);
                    reference.insert((t, seq, job as u32));
                    live[job] = Some((t, seq));
                }
            }
            assert_eq!(ends.peek(), reference.first().copied(), "after op {seq}");
            if seq % 997 == 0 {
                // Everything due by some time leaves at once, in order.
                let t = Time::from_secs(((x >> 40) % 50) as i64);
                let mut due = Vec::new();
                ends.drain_due(t, &mut due);
                let expect: Vec<_> = reference.iter().copied().filter(|e| e.0 <= t).collect();
                assert_eq!(due, expect, "drained at {t} after op {seq}");
                for e in &expect {
                    reference.remove(e);
                    live[e.2 as usize] = None;
                }
                assert_eq!(ends.peek(), reference.first().copied());
            }
        }
    }

    fn quad(nodes: u32) -> MachineShape {
        MachineShape {
            nodes,
            sockets_per_node: 2,
            cores_per_socket: 2,
            mem_per_node_mib: None,
        }
    }

    fn start(job: u64, pes: Vec<cosched_core::PeId>) -> Decision {
        Decision::Start {
            job: JobId(job),
            pes: PeSet::from_pes(pes.into_iter().map(|p| p.0)),
            slot: None,
        }
    }

    /// Seed 001: a job's rate follows the slowdowns in force. Job 1 runs alone on node 0 for
    /// 40 s (rate 1), then shares it with job 2 (each slowed by the other's SL_cos) until job
    /// 2 ends, then runs alone again; job 3 uses four processes of node 1 (SL_nos · SL_crs).
    /// The ends are recomputed by hand with integer arithmetic.
    #[test]
    fn rates_follow_co_runners_exactly() {
        let m = quad(2);
        let model = Slowdowns::new(11);
        let jobs = vec![
            SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(100)),
            SimJob::exact(2, Time::ZERO, 1, Dur::from_secs(10)),
            SimJob::exact(3, Time::ZERO, 4, Dur::from_secs(50)),
        ];
        let n0 = NodeId(0);
        let mut p = Script::new(vec![
            (
                Time::ZERO,
                vec![
                    start(1, m.node_cores(n0, 1, 0)),
                    start(3, m.node_cores(NodeId(1), 4, 0)),
                ],
            ),
            (Time::from_secs(40), vec![start(2, m.node_cores(n0, 1, 1))]),
        ]);
        let opts = EngineOptions {
            slowdowns: Some(model),
            ..EngineOptions::default()
        };
        let r = simulate(m, &jobs, &mut p, opts).unwrap();
        let (a, b) = (
            u64::from(model.cos(JobId(1), JobId(2))),
            u64::from(model.cos(JobId(2), JobId(1))),
        );
        let us = 1_000_000u64;
        // Job 2: 10 s of work at slowdown b, from 40 s.
        let end2 = 40 * us + (10 * us * 1000 * b).div_ceil(1_000_000);
        // Job 1: 40 s done alone; (end2 − 40 s) at slowdown a; the rest alone.
        let done = 40 * us * 1000 + (end2 - 40 * us) * 1_000_000 / a;
        let end1 = end2 + (100 * us * 1000 - done).div_ceil(1000);
        let at = |t: u64| Some(Time::from_micros(t as i64));
        assert_eq!(r.records[1].end, at(end2));
        assert_eq!(r.records[0].end, at(end1));
        assert!(end1 > 100 * us && end2 > 50 * us, "both were slowed");
        let s3 = u64::from(cosched_core::multicore::mul(
            model.nos(JobId(3)),
            model.crs(JobId(3)),
        ));
        assert_eq!(
            r.records[2].end,
            at((50 * us * 1000 * s3).div_ceil(1_000_000))
        );
    }

    /// At most two jobs on a node, and never more processes than cores.
    #[test]
    fn a_third_job_on_a_node_or_a_shared_core_is_refused() {
        let m = quad(1);
        let jobs: Vec<SimJob> = (1..=3)
            .map(|i| SimJob::exact(i, Time::ZERO, 1, Dur::from_secs(10)))
            .collect();
        let opts = || EngineOptions {
            slowdowns: Some(Slowdowns::new(1)),
            ..EngineOptions::default()
        };
        let pe = |p: u32| vec![cosched_core::PeId(p)];
        let mut p = Script::new(vec![(
            Time::ZERO,
            vec![start(1, pe(0)), start(2, pe(1)), start(3, pe(2))],
        )]);
        let err = simulate(m, &jobs, &mut p, opts()).unwrap_err().to_string();
        assert!(
            err.contains("third job on node 0") && err.contains("job 3"),
            "{err}"
        );
        let mut p = Script::new(vec![(Time::ZERO, vec![start(1, pe(0)), start(2, pe(0))])]);
        assert!(simulate(m, &jobs[..2], &mut p, opts()).is_err());
        // Two jobs, then a third once one has ended: fine.
        let mut p = Script::new(vec![
            (Time::ZERO, vec![start(1, pe(0)), start(2, pe(1))]),
            (Time::from_secs(30), vec![start(3, pe(2))]),
        ]);
        let r = simulate(m, &jobs, &mut p, opts()).unwrap();
        assert_eq!(r.unfinished, 0);
    }

    #[test]
    fn kill_ends_the_job_and_tells_the_policy() {
        let m = MachineShape::flat(2, 1);
        let jobs = vec![SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10))];
        let mut p = Script::new(vec![
            (
                Time::ZERO,
                vec![Decision::Start {
                    job: JobId(1),
                    pes: PeSet::contiguous(0, 2),
                    slot: None,
                }],
            ),
            (Time::from_secs(3), vec![Decision::Kill { job: JobId(1) }]),
        ]);
        let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
        assert_eq!(r.records[0].end, Some(Time::from_secs(3)));
        assert_eq!(r.records[0].outcome, Some(Outcome::Cancelled));
    }

    /// What users and the machine do, replayed in virtual time: a hold stops a running job
    /// and its time stands still; a cancel ends a waiting job; a failing node ends the job on
    /// it and keeps its PEs out of use until it is back.
    #[test]
    fn operations_hold_cancel_and_fail_nodes() {
        let m = MachineShape::flat(2, 2);
        let mut p = registry::build("fcfs", &PolicyConfig::new(m)).unwrap();
        let s = Time::from_secs;
        let jobs = vec![
            SimJob::exact(1, s(0), 2, Dur::from_secs(10)),
            SimJob::exact(2, s(0), 2, Dur::from_secs(10)),
            SimJob::exact(3, s(1), 4, Dur::from_secs(5)),
            SimJob::exact(4, s(2), 2, Dur::from_secs(5)),
        ];
        let opts = EngineOptions {
            operations: vec![
                (s(3), Operation::Hold(JobId(1))),
                (s(6), Operation::Release(JobId(1))),
                (s(4), Operation::NodeDown(NodeId(1))),
                (s(5), Operation::Cancel(JobId(3))),
                (s(30), Operation::NodeUp(NodeId(1))),
            ],
            ..EngineOptions::default()
        };
        let r = simulate(m, &jobs, p.as_mut(), opts).unwrap();
        let rec = |id: u64| r.records.iter().find(|x| x.id == JobId(id)).unwrap();
        // Job 1 ran 0-3 and 6-13: held for 3 s.
        assert_eq!(
            (rec(1).end, rec(1).suspended),
            (Some(s(13)), Dur::from_secs(3))
        );
        // Job 2 ran on node 1, which failed at 4.
        assert_eq!(rec(2).outcome, Some(Outcome::NodeFailed));
        assert_eq!(rec(2).end, Some(s(4)));
        // Job 3 waited behind the hold and was cancelled without running.
        assert_eq!(
            (rec(3).start, rec(3).outcome),
            (None, Some(Outcome::Cancelled))
        );
        // Job 4 waits: a held job keeps its PEs (node 0, until job 1 ends at 13) and node 1 is
        // down until 30.
        assert_eq!(rec(4).start, Some(s(13)));
        assert_eq!(r.unfinished, 0);
        let bad = EngineOptions {
            operations: vec![(s(1), Operation::Cancel(JobId(99)))],
            ..EngineOptions::default()
        };
        let err = simulate(m, &jobs, p.as_mut(), bad).unwrap_err().to_string();
        assert!(err.contains("99") && err.contains("t=1"), "{err}");
    }
}
