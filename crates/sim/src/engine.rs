//! The discrete-event driver: runs one [`Policy`] over a list of jobs in virtual time.
//!
//! Time is integer ([`Time`], microseconds). Events are ordered by `(time, kind, seq)`:
//! at one instant job ends come first, then arrivals, then timers (unless
//! [`EngineOptions::arrivals_first`] swaps the first two); `seq` is the order in which events
//! were created, so equal inputs always give byte-identical outputs.
//!
//! The driver owns what the policy must never see: each job's actual runtime and the work it
//! has left. Timers sit in a heap; the end events of running jobs sit apart, indexed by job
//! ([`RunningEnds`]), so a suspension removes its job's end at once and millions of
//! suspend/resume decisions leave no stale entries behind.
//!
//! Every decision is checked against the policy's promises (no PE runs two jobs at one
//! instant, only known, submitted, live jobs are touched); a broken promise stops the run with
//! a [`SimError::Violation`] naming the policy, the job and the time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use cosched_core::{Dur, JobId, JobRecord, MachineShape, Outcome, PeSet, Time};
use cosched_policy::{Decision, Event, JobRequest, Policy};

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
}

/// Switches of the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Deliver arrivals before job ends at one instant (the default is ends first).
    pub arrivals_first: bool,
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
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("policy {policy} broke its contract at t={time}s, job {job}: {what}")]
    Violation {
        policy: String,
        job: JobId,
        time: Time,
        what: String,
    },
    #[error("job {job} appears twice in the workload")]
    DuplicateJob { job: JobId },
    #[error("job {job} needs {procs} PEs, more than the machine's {machine}")]
    TooLarge {
        job: JobId,
        procs: u32,
        machine: u32,
    },
    #[error("job {job} has a negative runtime")]
    NegativeRuntime { job: JobId },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not submitted yet.
    Future,
    /// In the queue, never ran or preempted (no PEs).
    Waiting,
    Running,
    /// Holds PEs but is stopped (placed in a slot, or suspended).
    Stopped,
    Done,
}

#[derive(Clone, Debug)]
struct JobState {
    state: State,
    remaining: Dur,
    /// When it last started or resumed running.
    since: Time,
    /// When it last stopped running after its first start (for suspended time).
    stopped_at: Option<Time>,
    pes: PeSet,
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
    /// Drops job `job`'s end event, if it has one.
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

const KIND_END: u8 = 0;
const KIND_ARRIVAL: u8 = 1;
const KIND_TIMER: u8 = 2;

/// Job id to input position. Trace ids are usually small and dense, so a plain array does
/// the lookup of every decision without hashing; sparse ids fall back to a hash map.
enum JobIndex {
    Dense(Vec<u32>),
    Hashed(IdMap),
}

impl JobIndex {
    fn build(jobs: &[SimJob]) -> Result<JobIndex, SimError> {
        let max = jobs.iter().map(|j| j.req.id.0).max().unwrap_or(0);
        if max < 4 * jobs.len() as u64 + 1024 {
            let mut v = vec![u32::MAX; max as usize + 1];
            for (i, j) in jobs.iter().enumerate() {
                let slot = &mut v[j.req.id.0 as usize];
                if *slot != u32::MAX {
                    return Err(SimError::DuplicateJob { job: j.req.id });
                }
                *slot = i as u32;
            }
            return Ok(JobIndex::Dense(v));
        }
        let mut index = IdMap::default();
        index.reserve(jobs.len());
        for (i, j) in jobs.iter().enumerate() {
            if index.insert(j.req.id, i as u32).is_some() {
                return Err(SimError::DuplicateJob { job: j.req.id });
            }
        }
        Ok(JobIndex::Hashed(index))
    }
    fn get(&self, job: JobId) -> Option<usize> {
        match self {
            JobIndex::Dense(v) => v
                .get(job.0 as usize)
                .copied()
                .filter(|&i| i != u32::MAX)
                .map(|i| i as usize),
            JobIndex::Hashed(m) => m.get(&job).map(|&i| i as usize),
        }
    }
}

/// A multiplicative hash for job ids: they are small distinct integers, so SipHash's cost
/// buys nothing here.
#[derive(Default)]
struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ *b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ 0x5555_5555).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
type IdMap = HashMap<JobId, u32, BuildHasherDefault<IdHasher>>;

/// Which PEs run a job now: one bit per PE.
struct Busy {
    words: Vec<u64>,
    total: u32,
}

impl Busy {
    fn new(total: u32) -> Busy {
        Busy {
            words: vec![0; (total as usize).div_ceil(64)],
            total,
        }
    }
    fn mask(s: u32, e: u32) -> u64 {
        let hi = if e == 64 { u64::MAX } else { (1u64 << e) - 1 };
        hi & !((1u64 << s) - 1)
    }
    /// Applies `f(word_index, mask)` over the run `[s, e)`.
    fn each(s: u32, e: u32, mut f: impl FnMut(usize, u64)) {
        let mut p = s;
        while p < e {
            let w = p / 64;
            let end = e.min((w + 1) * 64);
            f(w as usize, Busy::mask(p % 64, end - w * 64));
            p = end;
        }
    }
    /// True when any PE of the set is busy.
    fn any(&self, pes: &PeSet) -> bool {
        let mut hit = false;
        for &(s, e) in pes.runs() {
            Busy::each(s, e, |w, m| hit |= self.words[w] & m != 0);
        }
        hit
    }
    fn set(&mut self, pes: &PeSet, on: bool) {
        for &(s, e) in pes.runs() {
            Busy::each(s, e, |w, m| {
                if on {
                    self.words[w] |= m
                } else {
                    self.words[w] &= !m
                }
            });
        }
    }
}

/// Runs `policy` over `jobs` on `machine`. Jobs may come in any order; ids must be unique.
pub fn simulate(
    machine: MachineShape,
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    opts: EngineOptions,
) -> Result<SimResult, SimError> {
    Engine::new(machine, jobs, policy, opts)?.run()
}

struct Engine<'a> {
    machine: MachineShape,
    jobs: &'a [SimJob],
    policy: &'a mut dyn Policy,
    opts: EngineOptions,
    index: JobIndex,
    /// Job indices by (submit, id).
    arrivals: Vec<u32>,
    next_arrival: usize,
    /// Pending timers.
    heap: BinaryHeap<Reverse<Pending>>,
    /// End events of the running jobs.
    ends: RunningEnds,
    seq: u64,
    state: Vec<JobState>,
    records: Vec<JobRecord>,
    busy: Busy,
    /// Events caused by decisions (a kill's end), delivered before the next timed one.
    immediate: VecDeque<Event>,
    out: Vec<Decision>,
    done: usize,
    /// Jobs running now.
    running: usize,
    events: u64,
    decisions: u64,
}

impl<'a> Engine<'a> {
    fn new(
        machine: MachineShape,
        jobs: &'a [SimJob],
        policy: &'a mut dyn Policy,
        opts: EngineOptions,
    ) -> Result<Engine<'a>, SimError> {
        let index = JobIndex::build(jobs)?;
        for j in jobs {
            if j.req.procs > machine.total_pes() {
                return Err(SimError::TooLarge {
                    job: j.req.id,
                    procs: j.req.procs,
                    machine: machine.total_pes(),
                });
            }
            if j.runtime < Dur::ZERO {
                return Err(SimError::NegativeRuntime { job: j.req.id });
            }
        }
        let mut arrivals: Vec<u32> = (0..jobs.len() as u32).collect();
        arrivals.sort_by_key(|&i| (jobs[i as usize].req.submit, jobs[i as usize].req.id));
        let state = jobs
            .iter()
            .map(|j| JobState {
                state: State::Future,
                remaining: j.limit.map_or(j.runtime, |l| j.runtime.min(l)),
                since: Time::ZERO,
                stopped_at: None,
                pes: PeSet::new(),
            })
            .collect();
        let records = jobs
            .iter()
            .map(|j| {
                let mut r = JobRecord::new(&cosched_core::JobSpec::new(
                    j.req.id.0,
                    j.req.submit,
                    j.req.procs,
                    j.runtime,
                ));
                r.id = j.req.id;
                r
            })
            .collect();
        Ok(Engine {
            machine,
            jobs,
            policy,
            opts,
            index,
            arrivals,
            next_arrival: 0,
            heap: BinaryHeap::with_capacity(1024),
            ends: RunningEnds::new(jobs.len()),
            seq: 0,
            state,
            records,
            busy: Busy::new(machine.total_pes()),
            immediate: VecDeque::new(),
            out: Vec::with_capacity(64),
            done: 0,
            running: 0,
            events: 0,
            decisions: 0,
        })
    }

    fn push_timer(&mut self, time: Time, token: u64) {
        self.seq += 1;
        self.heap.push(Reverse(Pending {
            time,
            seq: self.seq,
            token,
        }));
    }

    fn arrival_kind(&self) -> u8 {
        if self.opts.arrivals_first {
            0
        } else {
            KIND_ARRIVAL
        }
    }
    fn end_kind(&self) -> u8 {
        if self.opts.arrivals_first {
            KIND_ARRIVAL
        } else {
            KIND_END
        }
    }

    fn run(mut self) -> Result<SimResult, SimError> {
        // Timers that fire while nothing runs and nothing arrives, in a row: a policy that
        // keeps ticking over jobs it never starts would otherwise loop for ever.
        let mut idle_ticks = 0u32;
        loop {
            let arrival = self.arrivals.get(self.next_arrival).map(|&i| {
                let j = &self.jobs[i as usize];
                (j.req.submit, self.arrival_kind(), 0u64)
            });
            let timer = self
                .heap
                .peek()
                .map(|Reverse(p)| (p.time, KIND_TIMER, p.seq));
            let end = self
                .ends
                .peek()
                .map(|(t, seq, _)| (t, self.end_kind(), seq));
            let timed = match (timer, end) {
                (Some(t), Some(e)) => Some(t.min(e)),
                (t, e) => t.or(e),
            };
            let take_arrival = match (arrival, timed) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((ta, ka, _)), Some((tt, kt, _))) => (ta, ka) < (tt, kt),
            };
            if take_arrival {
                let i = self.arrivals[self.next_arrival] as usize;
                self.next_arrival += 1;
                let now = self.jobs[i].req.submit;
                self.state[i].state = State::Waiting;
                idle_ticks = 0;
                self.deliver(now, Event::Submitted(self.jobs[i].req.clone()))?;
                continue;
            }
            if timed == timer {
                let Reverse(p) = self.heap.pop().expect("peeked");
                if self.running == 0 && self.next_arrival == self.arrivals.len() {
                    idle_ticks += 1;
                    if idle_ticks > 10_000 || self.done == self.jobs.len() {
                        break;
                    }
                } else {
                    idle_ticks = 0;
                }
                self.deliver(p.time, Event::Timer(p.token))?;
                continue;
            }
            let (now, _, i) = self.ends.peek().expect("peeked");
            let i = i as usize;
            debug_assert_eq!(self.state[i].state, State::Running);
            idle_ticks = 0;
            let outcome = match self.jobs[i].limit {
                Some(l) if self.jobs[i].runtime > l => Outcome::TimedOut,
                _ => Outcome::Completed,
            };
            self.finish(i, now, outcome);
            self.deliver(now, Event::Ended(self.jobs[i].req.id))?;
        }
        let unfinished = self.jobs.len() - self.done;
        Ok(SimResult {
            policy: self.policy.name().to_string(),
            machine: self.machine,
            runtimes: self.jobs.iter().map(|j| j.runtime).collect(),
            records: self.records,
            events: self.events,
            decisions: self.decisions,
            unfinished,
        })
    }

    fn finish(&mut self, i: usize, now: Time, outcome: Outcome) {
        let st = &mut self.state[i];
        if st.state == State::Running {
            self.busy.set(&st.pes, false);
            self.ends.remove(i);
            self.running -= 1;
        }
        if let Some(at) = st.stopped_at.take() {
            self.records[i].suspended += now - at;
        }
        st.state = State::Done;
        let rec = &mut self.records[i];
        rec.end = Some(now);
        rec.outcome = Some(outcome);
        rec.pes = std::mem::take(&mut st.pes);
        self.done += 1;
    }

    /// Hands one event to the policy and applies its decisions, then any events those caused.
    fn deliver(&mut self, now: Time, event: Event) -> Result<(), SimError> {
        let mut event = Some(event);
        while let Some(ev) = event.take().or_else(|| self.immediate.pop_front()) {
            self.events += 1;
            let mut out = std::mem::take(&mut self.out);
            self.policy.handle(now, ev, &mut out);
            self.decisions += out.len() as u64;
            for d in out.drain(..) {
                self.apply(now, d)?;
            }
            self.out = out;
        }
        Ok(())
    }

    fn violation(&self, job: JobId, now: Time, what: impl Into<String>) -> SimError {
        SimError::Violation {
            policy: self.policy.name().to_string(),
            job,
            time: now,
            what: what.into(),
        }
    }

    fn lookup(&self, job: JobId, now: Time) -> Result<usize, SimError> {
        let i = self
            .index
            .get(job)
            .ok_or_else(|| self.violation(job, now, "unknown job"))?;
        match self.state[i].state {
            State::Future => Err(self.violation(job, now, "job not submitted yet")),
            State::Done => Err(self.violation(job, now, "job already ended")),
            _ => Ok(i),
        }
    }

    fn check_pes(&self, i: usize, pes: &PeSet, now: Time) -> Result<(), SimError> {
        let id = self.jobs[i].req.id;
        if pes.len() < self.jobs[i].req.procs {
            return Err(self.violation(
                id,
                now,
                format!("given {} PEs, needs {}", pes.len(), self.jobs[i].req.procs),
            ));
        }
        if pes.runs().last().is_some_and(|&(_, e)| e > self.busy.total) {
            return Err(self.violation(id, now, format!("PE set {pes} is outside the machine")));
        }
        Ok(())
    }

    /// Makes job `i` run on its PEs from `now`.
    fn run_job(&mut self, i: usize, now: Time) -> Result<(), SimError> {
        let id = self.jobs[i].req.id;
        if self.busy.any(&self.state[i].pes) {
            let pes = self.state[i].pes.clone();
            return Err(self.violation(
                id,
                now,
                format!("runs on PEs {pes}, some of which another job runs on"),
            ));
        }
        let st = &mut self.state[i];
        self.busy.set(&st.pes, true);
        self.running += 1;
        st.state = State::Running;
        st.since = now;
        if let Some(at) = st.stopped_at.take() {
            self.records[i].suspended += now - at;
        }
        if self.records[i].start.is_none() {
            self.records[i].start = Some(now);
        }
        let end = now + st.remaining;
        self.seq += 1;
        self.ends.insert(end, self.seq, i);
        Ok(())
    }

    /// Stops job `i` running; it keeps its PEs (the caller takes them for a preemption).
    fn stop_job(&mut self, i: usize, now: Time) {
        let st = &mut self.state[i];
        self.busy.set(&st.pes, false);
        self.ends.remove(i);
        self.running -= 1;
        st.remaining -= now - st.since;
        st.state = State::Stopped;
        st.stopped_at = Some(now);
    }

    fn apply(&mut self, now: Time, d: Decision) -> Result<(), SimError> {
        match d {
            Decision::Start { job, pes, slot: _ } => {
                let i = self.lookup(job, now)?;
                match self.state[i].state {
                    State::Waiting | State::Stopped => {}
                    State::Running => {
                        return Err(self.violation(job, now, "started while already running"));
                    }
                    _ => unreachable!("lookup filters"),
                }
                self.check_pes(i, &pes, now)?;
                self.state[i].pes = pes;
                self.run_job(i, now)?;
            }
            Decision::Place { job, pes, slot: _ } => {
                let i = self.lookup(job, now)?;
                if self.state[i].state != State::Waiting {
                    return Err(self.violation(job, now, "placed while not waiting"));
                }
                self.check_pes(i, &pes, now)?;
                let st = &mut self.state[i];
                st.pes = pes;
                st.state = State::Stopped;
            }
            Decision::Suspend { job } => {
                let i = self.lookup(job, now)?;
                if self.state[i].state != State::Running {
                    return Err(self.violation(job, now, "suspended while not running"));
                }
                self.stop_job(i, now);
            }
            Decision::Resume { job } => {
                let i = self.lookup(job, now)?;
                if self.state[i].state != State::Stopped {
                    return Err(self.violation(
                        job,
                        now,
                        "resumed while not allocated and stopped",
                    ));
                }
                self.run_job(i, now)?;
            }
            Decision::Preempt { job } => {
                let i = self.lookup(job, now)?;
                match self.state[i].state {
                    State::Running => self.stop_job(i, now),
                    State::Stopped => {}
                    _ => return Err(self.violation(job, now, "preempted while holding no PEs")),
                }
                let st = &mut self.state[i];
                st.state = State::Waiting;
                st.pes = PeSet::new();
                if self.records[i].start.is_some() {
                    self.records[i].preemptions += 1;
                }
            }
            Decision::Kill { job } => {
                let i = self.lookup(job, now)?;
                self.finish(i, now, Outcome::Cancelled);
                self.immediate.push_back(Event::Ended(job));
            }
            Decision::SetTimer { at, token } => {
                let at = if at < now { now } else { at };
                self.push_timer(at, token);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_policy::{PolicyConfig, registry};

    fn fcfs(pes: u32) -> (MachineShape, Box<dyn Policy>) {
        let m = MachineShape::flat(pes, 1);
        (m, registry::build("fcfs", &PolicyConfig::new(m)).unwrap())
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

    /// Records the events it is given, in order, and lets FCFS decide.
    struct Recorder(Vec<String>, Box<dyn Policy>);
    impl Policy for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        fn handle(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
            let what = match &e {
                Event::Submitted(j) => format!("{}:submit{}", now.as_secs(), j.id),
                Event::Ended(j) => format!("{}:end{}", now.as_secs(), j),
                other => format!("{other:?}"),
            };
            self.0.push(what);
            self.1.handle(now, e, out);
        }
        fn queue(&self) -> Vec<JobId> {
            self.1.queue()
        }
        fn boxed_clone(&self) -> Box<dyn Policy> {
            Box::new(Recorder(self.0.clone(), self.1.boxed_clone()))
        }
    }

    #[test]
    fn same_instant_order_is_ends_then_arrivals_unless_switched() {
        let (m, p) = fcfs(4);
        let jobs = vec![
            SimJob::exact(1, Time::from_secs(0), 4, Dur::from_secs(10)),
            SimJob::exact(2, Time::from_secs(10), 4, Dur::from_secs(5)),
        ];
        let mut r = Recorder(Vec::new(), p.boxed_clone());
        simulate(m, &jobs, &mut r, EngineOptions::default()).unwrap();
        assert_eq!(r.0, ["0:submit1", "10:end1", "10:submit2", "15:end2"]);
        let mut r = Recorder(Vec::new(), p.boxed_clone());
        let res = simulate(
            m,
            &jobs,
            &mut r,
            EngineOptions {
                arrivals_first: true,
            },
        )
        .unwrap();
        assert_eq!(r.0, ["0:submit1", "10:submit2", "10:end1", "15:end2"]);
        assert_eq!(res.records[1].start, Some(Time::from_secs(10)));
    }

    /// A scripted policy: replays fixed decisions at given times, from timers (which fire
    /// after the arrivals of their instant).
    #[derive(Clone)]
    struct Script(Vec<(Time, Vec<Decision>)>, bool);
    impl Policy for Script {
        fn name(&self) -> &str {
            "script"
        }
        fn handle(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
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
        fn queue(&self) -> Vec<JobId> {
            Vec::new()
        }
        fn boxed_clone(&self) -> Box<dyn Policy> {
            Box::new(self.clone())
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
        let mut p = Script(
            vec![
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
            ],
            false,
        );
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
        let mut p = Script(
            vec![(
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
            )],
            false,
        );
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
        let mut p = Script(
            vec![(
                Time::ZERO,
                vec![Decision::Start {
                    job: JobId(2),
                    pes: PeSet::contiguous(0, 1),
                    slot: None,
                }],
            )],
            false,
        );
        let err = simulate(m, &jobs, &mut p, EngineOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not submitted"), "{err}");
        let mut p = Script(
            vec![(Time::ZERO, vec![Decision::Resume { job: JobId(99) }])],
            false,
        );
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
    impl Policy for RoundRobin {
        fn name(&self) -> &str {
            "rr"
        }
        fn handle(&mut self, now: Time, e: Event, out: &mut Vec<Decision>) {
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
        fn queue(&self) -> Vec<JobId> {
            Vec::new()
        }
        fn boxed_clone(&self) -> Box<dyn Policy> {
            Box::new(self.clone())
        }
    }

    #[test]
    fn many_context_switches_keep_exact_accounting() {
        let m = MachineShape::flat(1, 1);
        let jobs = vec![
            SimJob::exact(1, Time::ZERO, 1, Dur::from_secs(10_000)),
            SimJob::exact(2, Time::ZERO, 1, Dur::from_secs(10_000)),
        ];
        let mut p = RoundRobin {
            running: None,
            alive: Vec::new(),
        };
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
        }
    }

    #[test]
    fn kill_ends_the_job_and_tells_the_policy() {
        let m = MachineShape::flat(2, 1);
        let jobs = vec![SimJob::exact(1, Time::ZERO, 2, Dur::from_secs(10))];
        let mut p = Script(
            vec![
                (
                    Time::ZERO,
                    vec![Decision::Start {
                        job: JobId(1),
                        pes: PeSet::contiguous(0, 2),
                        slot: None,
                    }],
                ),
                (Time::from_secs(3), vec![Decision::Kill { job: JobId(1) }]),
            ],
            false,
        );
        let r = simulate(m, &jobs, &mut p, EngineOptions::default()).unwrap();
        assert_eq!(r.records[0].end, Some(Time::from_secs(3)));
        assert_eq!(r.records[0].outcome, Some(Outcome::Cancelled));
    }
}
