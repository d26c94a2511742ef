//! The job lifecycle both drivers share.
//!
//! A policy's decisions mean one thing whether the simulator or the machine manager carries
//! them out. The [`Ledger`] holds every job's place in that lifecycle, applies decisions to
//! it, checks each one against the policy's promises (crates/policy/src/api.rs) and refuses a
//! broken promise with an error naming the policy, the job and the time. It accounts the time
//! each job ran and stood stopped and writes the [`JobRecord`] of both drivers. A driver adds
//! only its side of the world: the simulator its virtual time and each job's remaining work,
//! the machine manager its processes, signals and database. Each call returns the
//! [`Change`] the driver must carry out.
//!
//! ```text
//!            Start                 Suspend / hold
//!   Waiting ───────▶ Running ◀──────────────────▶ Stopped ◀── Place ── Waiting
//!      ▲                │        Resume / release      │
//!      └──── Preempt ───┴──────────────────────────────┘
//!   any live phase ── Kill / Reject / end / cancel ──▶ Ended (with an Outcome)
//! ```
//!
//! A hold is an overlay, not a phase: a held job never runs, whatever its phase says; the
//! policy keeps planning with it (a held running job keeps its PEs) and it runs again once
//! released if the policy still has it running.
//!
//! What a job's processes really do is the policy's phase and the hold, unless the driver
//! reports it ([`Ledger::report_runs`]): a machine manager whose node managers run a node
//! scheme (`local`, `sb`, `fcs` run jobs of rows that are not active) tells the
//! ledger when the nodes actually stop and continue a job's processes. The phase still
//! follows the policy (its contract is checked on it); only the accounting — start, run time,
//! suspended time, time limits — follows the report.
//!
//! The ledger stays one file (its tests apart, in `tests.rs`): an [`Entry`]'s phase, hold
//! and accounting fields are private so that only the ledger's transitions change them, and
//! those transitions, the promise checks they run and the accounting they do read and write
//! the same fields; a split would have to widen them to the crate and lose that guarantee.
//!
//! ```
//! use cosched_core::{Dur, JobId, MachineShape, Outcome, PeSet, Time};
//! use cosched_ledger::{Change, Ledger};
//! use cosched_policy::{Decision, JobRequest};
//!
//! let mut l = Ledger::new("fcfs", MachineShape::flat(4, 1), true);
//! let j = l.add(JobRequest::new(JobId(1), Time::ZERO, 2, Dur::from_secs(60))).unwrap();
//! l.submit(j, Time::ZERO);
//! let start = Decision::Start { job: JobId(1), pes: PeSet::contiguous(0, 2), slot: None };
//! assert_eq!(l.apply(Time::ZERO, start).unwrap(), Change::Runs { job: j, launch: true });
//! l.end(j, Time::from_secs(60), Outcome::Completed, Some(0));
//! assert_eq!(l.record(j).end, Some(Time::from_secs(60)));
//! ```

#![forbid(unsafe_code)]

mod index;
pub mod instant;
mod limit;
pub mod room;

use cosched_core::{
    Dur, JobId, JobRecord, JobSpec, MachineShape, NodeId, Outcome, PeBits, PeSet, Time,
};
use cosched_policy::{Decision, JobRequest};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use crate::index::JobIndex;
pub use crate::limit::limited_run;
pub use crate::room::Room;

/// A job's position in the ledger (dense, in the order jobs were added).
pub type Ix = usize;

/// Where a job stands, as the policy's decisions put it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Known to the driver but not submitted yet (a trace's future job).
    Future,
    /// In the queue: never ran, or preempted (no PEs).
    Waiting,
    /// Holds PEs and the policy runs it (it is stopped all the same while held).
    Running,
    /// Holds PEs but is stopped: placed in a slot, or suspended.
    Stopped,
    Ended,
}

/// What the driver must do after a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing (a decision about a held job, a timer, a preemption of a stopped job).
    None,
    /// The job's processes run from now: created first when `launch` (its first start or
    /// placement), else continued.
    Runs { job: Ix, launch: bool },
    /// The job got PEs but stays stopped: its processes are created stopped.
    Placed { job: Ix },
    /// The job's processes stop where they are (a suspension, a hold, a preemption).
    Stops { job: Ix },
    /// The job ended by this decision (a kill or a rejection): its processes, if any, go, and
    /// the policy is told [`cosched_policy::Event::Ended`].
    Ends { job: Ix },
}

/// A call the ledger refused. One pointer wide: with the two-word [`Change`] a decision's
/// `Result` comes back in registers, which matters at tens of millions of decisions a run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct LedgerError(Box<Refusal>);

impl LedgerError {
    pub fn refusal(&self) -> &Refusal {
        &self.0
    }
}

/// What the ledger refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A decision broke the policy's contract.
    #[error("policy {policy} broke its contract at t={time}s, job {job}: {what}")]
    Violation {
        policy: String,
        job: JobId,
        time: Time,
        what: String,
    },
    #[error("job {job} appears twice")]
    DuplicateJob { job: JobId },
}

/// One job in the ledger: its place in the lifecycle. Its [`JobRecord`] is kept apart, in a
/// vector of records beside the entries, so that the records are the driver's result as
/// they stand (the simulator's, at the end of a run: no conversion pass over every job);
/// [`Ledger::entry`] gives both.
#[derive(Clone, Debug)]
pub struct Entry {
    pub req: JobRequest,
    phase: Phase,
    held: bool,
    /// Its processes exist (it was started or placed and has not ended or been requeued).
    launched: bool,
    /// Its processes stand stopped after having run: `since` is when they stopped (for
    /// suspended time). Never set while they run, so `since` serves both.
    stopped: bool,
    /// Taken over with its accounting so far ([`Ledger::adopt`]): the driver's reports carry
    /// it on, its first one included.
    adopted: bool,
    pes: PeSet,
    slot: Option<u32>,
    /// Run time before the current stretch.
    ran: Dur,
    /// While its processes run, the start of the current running stretch; while they stand
    /// stopped after having run (`stopped`), when they stopped. One field for the two keeps
    /// the entry small: the simulator holds one per job of a trace.
    since: Time,
    /// Whether its processes run as the driver reported it ([`Ledger::report_runs`]); `None`:
    /// they run exactly when the policy runs it and nobody holds it.
    reported: Option<bool>,
}

/// A job in the ledger with its record, as [`Ledger::entry`] gives it: the entry's methods
/// through `Deref`, and those that need the record.
#[derive(Clone, Copy, Debug)]
pub struct EntryView<'a> {
    entry: &'a Entry,
    record: &'a JobRecord,
}

impl std::ops::Deref for EntryView<'_> {
    type Target = Entry;
    #[inline]
    fn deref(&self) -> &Entry {
        self.entry
    }
}

impl<'a> EntryView<'a> {
    pub fn record(&self) -> &'a JobRecord {
        self.record
    }
    /// Time it has stood stopped since it first ran, up to `now`: the record's total plus the
    /// current stop, which the record only takes in when the job runs again or ends. Views
    /// show this, so a job held for a minute shows a minute, not zero, while still held.
    #[inline]
    pub fn suspended(&self, now: Time) -> Dur {
        let e = self.entry;
        if e.stopped && e.is_live() {
            self.record.suspended + (now - e.since).max(Dur::ZERO)
        } else {
            self.record.suspended
        }
    }
}

impl Entry {
    #[inline]
    pub fn phase(&self) -> Phase {
        self.phase
    }
    #[inline]
    pub fn held(&self) -> bool {
        self.held
    }
    /// Whether its processes run now: the policy runs it and nobody holds it.
    #[inline]
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running && !self.held
    }
    pub fn launched(&self) -> bool {
        self.launched
    }
    /// The PEs it holds (empty while waiting or once ended).
    pub fn pes(&self) -> &PeSet {
        &self.pes
    }
    /// Its row in the policy's matrix, for time-sharing policies.
    pub fn slot(&self) -> Option<u32> {
        self.slot
    }
    /// Whether its processes run now as far as accounting goes: what the driver reported, or
    /// else [`Entry::is_running`].
    #[inline]
    pub fn processes_run(&self) -> bool {
        match self.reported {
            Some(r) => r,
            None => self.is_running(),
        }
    }
    /// Time it has run so far.
    #[inline]
    pub fn ran(&self, now: Time) -> Dur {
        if self.processes_run() {
            self.ran + (now - self.since)
        } else {
            self.ran
        }
    }
    /// When it started its current running stretch, if running.
    pub fn running_since(&self) -> Option<Time> {
        self.processes_run().then_some(self.since)
    }

    /// Accounting for processes that (re)start running at `now`.
    #[inline]
    fn account_runs(&mut self, record: &mut JobRecord, now: Time) {
        if std::mem::take(&mut self.stopped) {
            record.suspended += now - self.since;
        }
        self.since = now;
        record.start.get_or_insert(now);
    }

    /// Accounting for processes that stop at `now`.
    #[inline]
    fn account_stops(&mut self, now: Time) {
        self.ran += now - self.since;
        self.since = now;
        self.stopped = true;
    }
    #[inline]
    pub fn is_live(&self) -> bool {
        !matches!(self.phase, Phase::Future | Phase::Ended)
    }
}

/// The PEs each preempted job held (see [`Ledger`]'s field). Every start and end asks it, and
/// most runs preempt nothing: an empty map answers without hashing.
#[derive(Clone, Debug, Default)]
struct PreemptedOn(HashMap<Ix, PeSet>);

impl PreemptedOn {
    #[inline]
    fn get(&self, job: Ix) -> Option<&PeSet> {
        if self.0.is_empty() {
            return None;
        }
        self.0.get(&job)
    }
    #[inline]
    fn take(&mut self, job: Ix) -> Option<PeSet> {
        if self.0.is_empty() {
            return None;
        }
        self.0.remove(&job)
    }
    fn insert(&mut self, job: Ix, pes: PeSet) {
        self.0.insert(job, pes);
    }
}

/// Takes `pes` out of `busy` (the PEs of the Running jobs), as [`PeBits::clear_pes`] does. A
/// time-shared job is nearly always one block of PEs: that case is the inlined range update,
/// without the out-of-line call and its register saves on each of the millions of suspends.
#[inline(always)]
fn clear_busy(busy: &mut PeBits, pes: &PeSet) {
    match *pes.runs() {
        [(s, e)] => busy.clear_range(s, e),
        _ => busy.clear_pes(pes),
    }
}

/// Puts `pes` in `busy` unless one of them is there already, as [`PeBits::try_set_pes`]
/// does (a refusal leaves `busy` as it was); one block of PEs, the resumes' usual case, is
/// tested and set inline.
#[inline(always)]
fn try_set_busy(busy: &mut PeBits, pes: &PeSet) -> bool {
    match *pes.runs() {
        [(s, e)] => {
            if !busy.range_clear(s, e) {
                return false;
            }
            busy.set_range(s, e);
            true
        }
        _ => busy.try_set_pes(pes),
    }
}

/// Every job's lifecycle; see the crate documentation.
#[derive(Clone, Debug)]
pub struct Ledger {
    policy: String,
    machine: MachineShape,
    migration: bool,
    entries: Vec<Entry>,
    /// Every job's record, `records[i]` that of `entries[i]`.
    records: Vec<JobRecord>,
    /// The PEs each preempted job held, which it must get back where jobs cannot migrate.
    /// Out of the entries: few jobs are ever preempted, and every entry would carry the room.
    preempted_on: PreemptedOn,
    index: JobIndex,
    /// PEs of jobs in phase Running: no two may share one.
    busy: PeBits,
    /// PEs of nodes that are down.
    down: PeBits,
    /// Jobs whose processes run now.
    running: usize,
    ended: usize,
    /// Whether an ended job's record keeps the PEs it last held (see
    /// [`Ledger::forget_ended_pes`]).
    keep_ended_pes: bool,
}

impl Ledger {
    /// An empty ledger for `policy` (named in errors) on `machine`. `migration`: whether a
    /// preempted job may start again on other PEs (see `PolicyConfig::migration`).
    pub fn new(policy: &str, machine: MachineShape, migration: bool) -> Ledger {
        Ledger {
            policy: policy.to_string(),
            machine,
            migration,
            entries: Vec::new(),
            records: Vec::new(),
            preempted_on: PreemptedOn::default(),
            index: JobIndex::new(),
            busy: PeBits::new(machine.total_pes()),
            down: PeBits::new(machine.total_pes()),
            running: 0,
            ended: 0,
            keep_ended_pes: true,
        }
    }

    /// From now on an ended job's record keeps no PE set ([`JobRecord::pes`] stays empty);
    /// nothing else changes, the decisions and their checks least of all (they read the
    /// entries' PEs, never an ended job's record).
    ///
    /// For a driver none of whose outputs reads where an ended job ran: the simulator, when
    /// its caller asks no such output of the run ([`JobRecord::pes`] is read by the Gantt
    /// chart and the Batsim jobs table; docs/sim.md). A simulation holds every job's record
    /// to the end of the run, and a job spread over a share of many nodes' cores holds one
    /// run per node: kept, those sets are most of the run's memory. The machine manager
    /// keeps them: its views and its accounting show where a job ran.
    pub fn forget_ended_pes(&mut self) {
        self.keep_ended_pes = false;
    }

    /// Room for `additional` more jobs, so that adding a whole trace's jobs does not move
    /// the entries again at every doubling (amortised: a trace added piece by piece as it is
    /// read reserves at every piece).
    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
        self.records.reserve(additional);
    }

    /// Makes a job known, not yet submitted ([`Phase::Future`]).
    pub fn add(&mut self, req: JobRequest) -> Result<Ix, LedgerError> {
        let at = self.entries.len();
        if !self.index.insert(req.id, at as u32, at) {
            return Err(LedgerError(Box::new(Refusal::DuplicateJob { job: req.id })));
        }
        let mut record = JobRecord::new(&JobSpec {
            id: req.id,
            submit: req.submit,
            procs: req.procs,
            estimate: Some(req.estimate),
            runtime: None,
            mem_per_pe_kib: req.mem_per_pe_kib,
            queue: req.queue,
            user: req.user,
        });
        record.id = req.id;
        self.entries.push(Entry {
            req,
            phase: Phase::Future,
            held: false,
            launched: false,
            stopped: false,
            adopted: false,
            pes: PeSet::new(),
            slot: None,
            ran: Dur::ZERO,
            since: Time::ZERO,
            reported: None,
        });
        self.records.push(record);
        Ok(at)
    }

    /// The job joins the queue.
    pub fn submit(&mut self, job: Ix, _now: Time) {
        let e = &mut self.entries[job];
        debug_assert_eq!(e.phase, Phase::Future, "job {} submitted twice", e.req.id);
        e.phase = Phase::Waiting;
    }

    pub fn policy(&self) -> &str {
        &self.policy
    }
    pub fn machine(&self) -> MachineShape {
        self.machine
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Position of a job, if known.
    #[inline]
    pub fn find(&self, id: JobId) -> Option<Ix> {
        self.index.get(id)
    }
    #[inline]
    pub fn entry(&self, job: Ix) -> EntryView<'_> {
        EntryView {
            entry: &self.entries[job],
            record: &self.records[job],
        }
    }
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
    pub fn record(&self, job: Ix) -> &JobRecord {
        &self.records[job]
    }
    /// Every record, in the order jobs were added.
    pub fn records(&self) -> impl Iterator<Item = &JobRecord> {
        self.records.iter()
    }
    /// Where the room [`Ledger::reserve`] keeps for jobs still to come lies: that of the
    /// entries and that of the records (job `i`'s slot in each is written when it is added).
    pub fn room(&self) -> [Room; 2] {
        [Room::of(&self.entries), Room::of(&self.records)]
    }
    /// Every record, in the order jobs were added (as they stand: no copy).
    pub fn into_records(self) -> Vec<JobRecord> {
        self.records
    }
    /// Jobs whose processes run now.
    #[inline]
    pub fn running(&self) -> usize {
        self.running
    }
    #[inline]
    pub fn ended(&self) -> usize {
        self.ended
    }
    pub fn is_down(&self, node: NodeId) -> bool {
        let r = self.machine.pes_of(node);
        !self.down.range_clear(r.start, r.end)
    }

    #[cold]
    #[inline(never)]
    fn violation(&self, job: JobId, now: Time, what: impl Into<String>) -> LedgerError {
        LedgerError(Box::new(Refusal::Violation {
            policy: self.policy.clone(),
            job,
            time: now,
            what: what.into(),
        }))
    }

    /// The live job a decision names.
    #[inline]
    fn lookup(&self, job: JobId, now: Time) -> Result<Ix, LedgerError> {
        match self.index.get(job) {
            Some(i) if self.entries[i].is_live() => Ok(i),
            _ => Err(self.not_live(job, now)),
        }
    }

    /// Why a decision names a job that is not live.
    #[cold]
    #[inline(never)]
    fn not_live(&self, job: JobId, now: Time) -> LedgerError {
        let what = match self.index.get(job).map(|i| self.entries[i].phase) {
            None => "unknown job",
            Some(Phase::Future) => "job not submitted yet",
            _ => "job already ended",
        };
        self.violation(job, now, what)
    }

    fn check_pes(&self, i: Ix, pes: &PeSet, now: Time) -> Result<(), LedgerError> {
        let e = &self.entries[i];
        let id = e.req.id;
        if pes.len() < e.req.procs {
            return Err(self.violation(
                id,
                now,
                format!("given {} PEs, needs {}", pes.len(), e.req.procs),
            ));
        }
        if pes
            .runs()
            .last()
            .is_some_and(|&(_, end)| end > self.machine.total_pes())
        {
            return Err(self.violation(id, now, format!("PE set {pes} is outside the machine")));
        }
        if self.down.intersects_pes(pes) {
            return Err(self.violation(id, now, format!("PE set {pes} is on a node that is down")));
        }
        if let Some(spread) = &e.req.spread
            && !spread.admits(e.req.procs, &self.machine, pes)
        {
            return Err(self.violation(
                id,
                now,
                format!(
                    "PE set {pes} does not spread its tasks over nodes as it asks ({spread:?})"
                ),
            ));
        }
        if !self.migration
            && let Some(old) = self.preempted_on.get(i)
            && old != pes
        {
            return Err(self.violation(
                id,
                now,
                format!(
                    "restarted on PEs {pes} after a preemption on {old}; preempted jobs cannot move on this driver (migration is off)"
                ),
            ));
        }
        Ok(())
    }

    /// Puts job `i` in phase Running from `now`; the change is `Runs` unless it is held.
    #[inline(always)]
    fn run(&mut self, i: Ix, now: Time) -> Result<Change, LedgerError> {
        let e = &mut self.entries[i];
        // The clash test and the busy update in one pass over the words: this runs on every
        // resume.
        if !try_set_busy(&mut self.busy, &e.pes) {
            return Err(self.clash(i, now));
        }
        e.phase = Phase::Running;
        if e.held {
            return Ok(Change::None);
        }
        Ok(self.resume_processes(i, now))
    }

    #[cold]
    #[inline(never)]
    fn clash(&self, i: Ix, now: Time) -> LedgerError {
        let e = &self.entries[i];
        self.violation(
            e.req.id,
            now,
            format!("runs on PEs {}, some of which another job runs on", e.pes),
        )
    }

    /// Accounting for processes that (re)start running at `now`.
    #[inline]
    fn resume_processes(&mut self, i: Ix, now: Time) -> Change {
        let e = &mut self.entries[i];
        if e.reported.is_none() {
            e.account_runs(&mut self.records[i], now);
        }
        let launch = !e.launched;
        e.launched = true;
        self.running += 1;
        Change::Runs { job: i, launch }
    }

    /// Accounting for processes that stop at `now`.
    #[inline]
    fn stop_processes(&mut self, i: Ix, now: Time) {
        let e = &mut self.entries[i];
        if e.reported.is_none() {
            e.account_stops(now);
        }
        self.running -= 1;
    }

    /// The driver reports at `now` whether job `i`'s processes actually run (`runs`),
    /// whatever the policy's phase says: from then on its accounting (start, run time,
    /// suspended time, time limit) follows these reports alone, until it ends or is
    /// requeued. The first report is of the job's first process: no run time is booked
    /// before it. For drivers whose nodes decide themselves when processes run (see the
    /// crate documentation); a report about a job without processes is ignored.
    pub fn report_runs(&mut self, i: Ix, now: Time, runs: bool) {
        let e = &mut self.entries[i];
        if !e.is_live() || !e.launched {
            return;
        }
        let record = &mut self.records[i];
        // Nothing is booked before the job's start: a node that launched it ahead of its
        // slot held its processes until then.
        let now = record.start.map_or(now, |s| now.max(s));
        let was = e.processes_run();
        // The first report of a job adopted with its run time is one more change.
        let first = e.reported.replace(runs).is_none() && !e.adopted;
        if first {
            // The driver speaks from its job's first process on, and its accounting starts
            // over there in the state it reports. What the policy's phase booked as run
            // before then (the launch on its way, the processes starting) ran nothing; a
            // stop the policy booked before it stood (the job placed, or stopped as it was
            // launched); one it booked after it, while the report was on its way, did not
            // happen: the reports say when the processes stopped.
            if e.stopped && now > e.since {
                record.suspended += now - e.since;
            }
            e.ran = Dur::ZERO;
            e.since = now;
            // Stopped before it ever started is not suspended: waiting.
            e.stopped = !runs && record.start.is_some();
            if runs {
                record.start.get_or_insert(now);
            }
            return;
        }
        match (was, runs) {
            (false, true) => e.account_runs(record, now),
            (true, false) => e.account_stops(now),
            _ => {}
        }
    }

    /// Quantum skipping (the simulator's `engine::skip`): job `i` went through repeating
    /// cycles lasting `shift` in all, running `run` of it. Its run and suspended time grow as
    /// stepping through them would have made them grow, and its current stretch (running or
    /// stopped) moves by `shift`, as it began at the same phase of the last cycle. Only for a
    /// job that both ran and stood stopped in each cycle (one that ran throughout, or never
    /// ran, is simply left as it is), with no driver reports.
    pub fn skip_cycles(&mut self, i: Ix, shift: Dur, run: Dur) {
        let e = &mut self.entries[i];
        debug_assert!(e.reported.is_none() && e.is_live() && e.launched && !e.held);
        debug_assert!(Dur::ZERO < run && run < shift);
        e.ran += run;
        self.records[i].suspended += shift - run;
        // The start of its running stretch or the time it stopped: both move.
        if e.is_running() || e.stopped {
            e.since += shift;
        }
    }

    /// Applies one decision taken at `now`.
    // Always inlined: the simulator applies millions of suspend/resume decisions, and the
    // call (with its result returned through memory) is a noticeable share of each.
    #[inline(always)]
    pub fn apply(&mut self, now: Time, d: Decision) -> Result<Change, LedgerError> {
        // Time-sharing policies suspend and resume millions of times: those two first, with
        // nothing else in their way.
        match d {
            Decision::Suspend { job } => self.suspend(now, job),
            Decision::Resume { job } => self.resume(now, job),
            other => self.apply_other(now, other),
        }
    }

    /// Applies a row switch taken at `now`: `ds` is a run of `Suspend`s followed by a run of
    /// `Resume`s (either may be empty), as a time-sharing policy switches its matrix to another
    /// row. The ledger ends in the state, and refuses at the decision, that [`Ledger::apply`]
    /// of each in turn gives; in place of their [`Change`]s, `moved(i, None)` is called for
    /// each job whose processes stop, and `moved(i, Some(ran))` for each whose processes run
    /// from `now` on (none of them a launch: a resumed job was placed or started before), with
    /// the time it has run so far, in the decisions' order. One pass with no `Change` to hand back per
    /// decision: the simulator applies millions of these.
    ///
    /// # Panics
    /// If `ds` holds anything but `Suspend`s followed by `Resume`s.
    #[inline]
    pub fn switch(
        &mut self,
        now: Time,
        ds: &[Decision],
        mut moved: impl FnMut(Ix, Option<Dur>),
    ) -> Result<(), LedgerError> {
        let resumes = ds
            .iter()
            .position(|d| !matches!(d, Decision::Suspend { .. }))
            .unwrap_or(ds.len());
        for d in &ds[..resumes] {
            let Decision::Suspend { job } = *d else {
                unreachable!("the run of suspends")
            };
            let i = match self.index.get(job) {
                Some(i) if self.entries[i].phase == Phase::Running => i,
                _ => return Err(self.refused(job, now, "suspended while not running")),
            };
            let e = &mut self.entries[i];
            clear_busy(&mut self.busy, &e.pes);
            e.phase = Phase::Stopped;
            if !e.held {
                if e.reported.is_none() {
                    e.account_stops(now);
                }
                self.running -= 1;
                moved(i, None);
            }
        }
        for d in &ds[resumes..] {
            let Decision::Resume { job } = *d else {
                panic!("a switch is suspends then resumes, not {d:?}")
            };
            let i = match self.index.get(job) {
                Some(i) if self.entries[i].phase == Phase::Stopped => i,
                _ => {
                    return Err(self.refused(job, now, "resumed while not allocated and stopped"));
                }
            };
            let e = &mut self.entries[i];
            if !try_set_busy(&mut self.busy, &e.pes) {
                return Err(self.clash(i, now));
            }
            e.phase = Phase::Running;
            if e.held {
                continue;
            }
            let ran = if e.reported.is_none() {
                e.account_runs(&mut self.records[i], now);
                // Its stretch starts now: no run time in it yet.
                e.ran
            } else {
                e.ran(now)
            };
            e.launched = true;
            self.running += 1;
            moved(i, Some(ran));
        }
        Ok(())
    }

    // Suspend and resume are inlined into the driver's loop with one lookup and one phase
    // test each (a Running or Stopped job is live, so `lookup`'s liveness test is not needed
    // on the way through); anything else goes to `refused`, which finds the same error the general path would.
    #[inline(always)]
    fn suspend(&mut self, now: Time, job: JobId) -> Result<Change, LedgerError> {
        match self.index.get(job) {
            Some(i) if self.entries[i].phase == Phase::Running => {
                Ok(self.leave_running(i, now, Phase::Stopped))
            }
            _ => Err(self.refused(job, now, "suspended while not running")),
        }
    }

    #[inline(always)]
    fn resume(&mut self, now: Time, job: JobId) -> Result<Change, LedgerError> {
        match self.index.get(job) {
            Some(i) if self.entries[i].phase == Phase::Stopped => self.run(i, now),
            _ => Err(self.refused(job, now, "resumed while not allocated and stopped")),
        }
    }

    /// Why a suspend or resume of `job` is refused: the job is not live (as [`Ledger::lookup`]
    /// says), or else not in the phase the decision needs (`what`).
    #[cold]
    #[inline(never)]
    fn refused(&self, job: JobId, now: Time, what: &str) -> LedgerError {
        match self.lookup(job, now) {
            Err(e) => e,
            Ok(_) => self.violation(job, now, what),
        }
    }

    fn apply_other(&mut self, now: Time, d: Decision) -> Result<Change, LedgerError> {
        match d {
            Decision::Start { job, pes, slot } => {
                let i = self.lookup(job, now)?;
                let e = &self.entries[i];
                match e.phase {
                    Phase::Waiting if e.held => {
                        return Err(self.violation(job, now, "started while held"));
                    }
                    Phase::Waiting => self.check_pes(i, &pes, now)?,
                    Phase::Stopped if e.pes != pes => {
                        return Err(self.violation(
                            job,
                            now,
                            format!(
                                "started on PEs {pes} while it holds {}; preempt it first",
                                e.pes
                            ),
                        ));
                    }
                    Phase::Stopped => {}
                    Phase::Running => {
                        return Err(self.violation(job, now, "started while already running"));
                    }
                    Phase::Future | Phase::Ended => unreachable!("lookup filters"),
                }
                let e = &mut self.entries[i];
                let before = (
                    std::mem::replace(&mut e.pes, pes),
                    std::mem::replace(&mut e.slot, slot),
                    self.preempted_on.take(i),
                );
                // A refused start leaves the job as it was: a driver that goes on after a
                // refusal (the machine manager) must not find a waiting job holding PEs.
                self.run(i, now).inspect_err(|_| {
                    let e = &mut self.entries[i];
                    let old;
                    (e.pes, e.slot, old) = before;
                    if let Some(old) = old {
                        self.preempted_on.insert(i, old);
                    }
                })
            }
            Decision::Place { job, pes, slot } => {
                let i = self.lookup(job, now)?;
                if self.entries[i].phase != Phase::Waiting {
                    return Err(self.violation(job, now, "placed while not waiting"));
                }
                self.check_pes(i, &pes, now)?;
                let e = &mut self.entries[i];
                e.pes = pes;
                e.slot = slot;
                self.preempted_on.take(i);
                e.phase = Phase::Stopped;
                if e.launched {
                    // A preempted job placed back where it was: its processes are there.
                    return Ok(Change::None);
                }
                e.launched = true;
                Ok(Change::Placed { job: i })
            }
            Decision::Suspend { job } => self.suspend(now, job),
            Decision::Resume { job } => self.resume(now, job),
            Decision::Preempt { job } => {
                let i = self.lookup(job, now)?;
                let change = match self.entries[i].phase {
                    Phase::Running => self.leave_running(i, now, Phase::Waiting),
                    Phase::Stopped => {
                        self.entries[i].phase = Phase::Waiting;
                        Change::None
                    }
                    _ => return Err(self.violation(job, now, "preempted while holding no PEs")),
                };
                let e = &mut self.entries[i];
                let pes = std::mem::take(&mut e.pes);
                self.preempted_on.insert(i, pes);
                e.slot = None;
                if self.records[i].start.is_some() {
                    self.records[i].preemptions += 1;
                }
                Ok(change)
            }
            Decision::Kill { job } => {
                let i = self.lookup(job, now)?;
                self.end(i, now, Outcome::Cancelled, None);
                Ok(Change::Ends { job: i })
            }
            Decision::Reject { job, why: _ } => {
                let i = self.lookup(job, now)?;
                if self.entries[i].phase != Phase::Waiting || self.entries[i].launched {
                    return Err(self.violation(job, now, "rejected after it was given PEs"));
                }
                self.end(i, now, Outcome::Rejected, None);
                Ok(Change::Ends { job: i })
            }
            // Timers are the driver's: it keeps its own clock and schedules them itself.
            Decision::SetTimer { .. } => Ok(Change::None),
        }
    }

    /// A Running job leaves that phase for `to` (Stopped or Waiting).
    #[inline(always)]
    fn leave_running(&mut self, i: Ix, now: Time, to: Phase) -> Change {
        let e = &mut self.entries[i];
        clear_busy(&mut self.busy, &e.pes);
        e.phase = to;
        if e.held {
            return Change::None;
        }
        self.stop_processes(i, now);
        Change::Stops { job: i }
    }

    /// The job ends at `now` with `outcome`, whatever its phase (it finished, failed, timed
    /// out, was cancelled or lost). Returns whether it had processes, which the driver must
    /// then remove; the driver tells the policy [`cosched_policy::Event::Ended`] — unless the
    /// job was still [`Phase::Future`] (a driver may end a job it never submitted, such as one
    /// whose dependency can never be satisfied: the policy never saw it).
    pub fn end(&mut self, job: Ix, now: Time, outcome: Outcome, exit_code: Option<i32>) -> bool {
        let e = &mut self.entries[job];
        let r = &mut self.records[job];
        debug_assert!(e.phase != Phase::Ended, "job {} ended twice", e.req.id);
        if e.phase == Phase::Running {
            self.busy.clear_pes(&e.pes);
        }
        if e.is_running() {
            self.running -= 1;
        }
        if e.processes_run() {
            e.ran += now - e.since;
        } else if std::mem::take(&mut e.stopped) {
            r.suspended += now - e.since;
        }
        e.reported = None;
        // An ended job never starts again: where it was preempted no longer matters.
        self.preempted_on.take(job);
        let had_processes = e.launched;
        e.phase = Phase::Ended;
        e.launched = false;
        e.held = false;
        r.end = Some(now);
        r.outcome = Some(outcome);
        r.exit_code = exit_code;
        let pes = std::mem::take(&mut e.pes);
        if self.keep_ended_pes {
            r.pes = pes;
        }
        self.ended += 1;
        had_processes
    }

    /// Holds the job: it does not run until released. Returns `Stops` if it was running. A
    /// job not submitted yet ([`Phase::Future`]) may be held too: it is submitted held.
    pub fn hold(&mut self, job: Ix, now: Time) -> Change {
        let e = &mut self.entries[job];
        if e.held || e.phase == Phase::Ended {
            return Change::None;
        }
        let was_running = e.is_running();
        e.held = true;
        if was_running {
            self.stop_processes(job, now);
            return Change::Stops { job };
        }
        Change::None
    }

    /// Releases a hold. Returns `Runs` if the policy still has the job running.
    pub fn release(&mut self, job: Ix, now: Time) -> Change {
        let e = &mut self.entries[job];
        if !e.held {
            return Change::None;
        }
        e.held = false;
        if e.phase == Phase::Running {
            return self.resume_processes(job, now);
        }
        Change::None
    }

    /// Sends a job back to the queue after its processes were lost (a node failed and the
    /// driver requeues): it starts over, from no work done.
    pub fn requeue(&mut self, job: Ix, now: Time) {
        let e = &mut self.entries[job];
        if e.phase == Phase::Running {
            self.busy.clear_pes(&e.pes);
        }
        if e.is_running() {
            self.running -= 1;
        }
        e.phase = Phase::Waiting;
        e.launched = false;
        e.pes = PeSet::new();
        e.slot = None;
        self.preempted_on.take(job);
        e.ran = Dur::ZERO;
        e.stopped = false;
        e.adopted = false;
        e.reported = None;
        self.records[job].start = None;
        self.records[job].suspended = Dur::ZERO;
        let _ = now;
    }

    /// A job found running (or stopped) when a restarted driver rebuilds its state: it holds
    /// `pes` and has run `ran` before its current stretch, running or (having run) stopped
    /// since `since`.
    pub fn adopt(
        &mut self,
        job: Ix,
        pes: PeSet,
        running: bool,
        since: Time,
        ran: Dur,
        record: JobRecord,
    ) {
        let e = &mut self.entries[job];
        e.pes = pes;
        e.launched = true;
        e.adopted = true;
        e.ran = ran;
        e.since = since;
        self.records[job] = record;
        if running {
            e.phase = Phase::Running;
            e.stopped = false;
            self.busy.set_pes(&e.pes);
            self.running += 1;
        } else {
            e.phase = Phase::Stopped;
            e.stopped = self.records[job].start.is_some();
        }
    }

    /// Restores a job that had ended before a restart.
    pub fn adopt_ended(&mut self, job: Ix, record: JobRecord) {
        let e = &mut self.entries[job];
        e.phase = Phase::Ended;
        self.records[job] = record;
        self.ended += 1;
    }

    /// Marks a node down: nothing may be given PEs there until it is up again. Returns the
    /// live jobs that hold PEs on it, and, where jobs cannot migrate, the preempted jobs whose
    /// stopped processes sit there (the driver ends or requeues them all).
    pub fn node_down(&mut self, node: NodeId) -> Vec<Ix> {
        let r = self.machine.pes_of(node);
        self.down.set_range(r.start, r.end);
        let on = PeSet::contiguous(r.start, r.end - r.start);
        // Without migration a preempted job's processes stay stopped on its old PEs (it may
        // only restart there), so they die with the node, as the machine manager sees from
        // their placement; continuing them later would run processes that no longer exist.
        // With migration the job is not tied to its old PEs and is left alone.
        let lost_preempted = |i: Ix, e: &Entry| {
            !self.migration
                && e.launched
                && self.preempted_on.get(i).is_some_and(|p| p.intersects(&on))
        };
        (0..self.entries.len())
            .filter(|&i| {
                let e = &self.entries[i];
                e.is_live() && (e.pes.intersects(&on) || lost_preempted(i, e))
            })
            .collect()
    }

    pub fn node_up(&mut self, node: NodeId) {
        let r = self.machine.pes_of(node);
        self.down.clear_range(r.start, r.end);
    }
}

#[cfg(test)]
mod tests;
