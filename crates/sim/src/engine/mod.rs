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
//!
//! This file is the loop; [`io`] holds what a run takes and gives, `ends` the timer heap's
//! entries and the running jobs' ends, `source` where the jobs come from, `skip` the quantum
//! skipping.

mod ends;
mod io;
mod skip;
mod source;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cosched_core::{Dur, JobId, MachineShape, Outcome, Time};
use cosched_ledger::instant::{self, Stage};
use cosched_ledger::{Change, Ledger, Room, limited_run};
use cosched_policy::{Decision, Event, Policy};

use crate::ahead::Ahead;
use crate::progress::{Progress, Snapshot};
pub use crate::rates::Usage;
use crate::rates::{Overshared, Rates};
use ends::{Pending, RunningEnds};
pub use io::{EngineOptions, Operation, SimError, SimJob, SimResult};
pub(crate) use source::{Jobs, Streamed};

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
        // A forecast reads the starts and ends only.
        forget_ended_pes: true,
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

/// Stands in for a decision taken out of the round's list to be applied.
const PLACEHOLDER: Decision = Decision::SetTimer {
    at: Time::ZERO,
    token: 0,
};

/// The length of the row switch that `ds` starts with: its suspends, then its resumes (0 if
/// it starts with neither).
#[inline]
fn switch_len(ds: &[Decision]) -> usize {
    let stops = ds
        .iter()
        .take_while(|d| matches!(d, Decision::Suspend { .. }))
        .count();
    stops
        + ds[stops..]
            .iter()
            .take_while(|d| matches!(d, Decision::Resume { .. }))
            .count()
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
        let mut ledger = Ledger::new(policy.name(), machine, !opts.no_migration);
        if opts.forget_ended_pes {
            ledger.forget_ended_pes();
        }
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
            let mut k = 0;
            while k < out.len() {
                // Without a slowdown model a row switch (its suspends, then its resumes)
                // goes to the ledger in one piece.
                let n = if MC { 0 } else { switch_len(&out[k..]) };
                if n > 0 {
                    self.switch(now, &out[k..k + n])?;
                    k += n;
                    continue;
                }
                let d = std::mem::replace(&mut out[k], PLACEHOLDER);
                k += 1;
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
            out.clear();
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

    /// The job stops running: no end event, no rate. A job that ends keeps no seats with
    /// the rates; a stopped one may be resumed where it was.
    #[inline]
    fn stopped(&mut self, job: usize, now: Time, ends: bool) {
        self.ends.remove(job);
        if MC && let Some(r) = self.rates.as_mut() {
            if ends {
                r.end(job, now);
            } else {
                r.stop(job, now);
            }
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
                r.end(i, now);
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
                    self.stopped(i, now, true);
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
                        self.stopped(i, now, true);
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
            Change::Stops { job } => self.stopped(job, now, false),
            Change::Ends { job } => {
                if MC && !self.ledger.entry(job).launched() {
                    self.waiting = self.waiting.saturating_sub(1);
                }
                self.stopped(job, now, true);
                self.caused
                    .push(Event::Ended(self.jobs.known()[job].req.id));
                self.again = true;
            }
            Change::None | Change::Placed { .. } => {}
        }
    }

    /// A row switch, `ds` as [`switch_len`] found it: the ledger applies it in one pass
    /// ([`Ledger::switch`]), and each job's end event goes or comes as
    /// [`Engine::carry_out`] would move it for the decisions one by one (same times, same
    /// sequence numbers in the same order).
    #[inline(always)]
    fn switch(&mut self, now: Time, ds: &[Decision]) -> Result<(), SimError> {
        debug_assert!(!MC, "rates follow each stop and start");
        let (ends, seq, again, work) = (&mut self.ends, &mut self.seq, &mut self.again, &self.work);
        self.ledger.switch(now, ds, |i, ran| match ran {
            None => ends.remove(i),
            Some(ran) => {
                let left = work[i] - ran;
                *again |= left <= Dur::ZERO;
                *seq += 1;
                ends.insert(now + left, *seq, i);
            }
        })?;
        Ok(())
    }

    /// A job starts or resumes under a slowdown model: priced with its co-runners at the end
    /// of the round (`reprice`). Kept out of line so that `carry_out` stays small.
    #[inline(never)]
    fn runs_priced(&mut self, now: Time, job: usize, launch: bool) {
        if launch {
            self.waiting -= 1;
        }
        let rates = self.rates.as_mut().expect("set with a slowdown model");
        if let Err(o) = rates.start(job, self.ledger.entry(job).pes(), now) {
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
