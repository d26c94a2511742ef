//! The node manager's node-level scheme: the same [`NodeScheduler`] the
//! process-level simulator (crates/cosim) drives, fed here with real events — ranks starting
//! and exiting, their CPU time and run state from `/proc`, their receives from the
//! communication-monitor ring, and the machine manager's gang strobe — and carried out with
//! SIGSTOP/SIGCONT (per rank) or the job's freezer (per job), and the spin time written into
//! the ring.
//!
//! - `gs`: strict gang. A job of the matrix runs exactly when the strobe lists it as running
//!   (its row is the active slot, or alternate scheduling runs it); whole-job stops.
//! - `local`: no gang control: every job of the matrix runs, Linux time-shares the PEs
//!   (MPL > 1); waiting ranks keep the ring's spin time (0: block at once).
//! - `sb`: as `local`, but waiting ranks spin for the configured spin time, then block
//!   (spin-block, implicit coscheduling).
//! - `fcs`: flexible coscheduling: per PE, [`NodeScheduler::pick`] chooses the rank that runs
//!   (Fig. 3.2), from the classes Fig. 4.3's heuristic gives each rank at every strobe and on
//!   blocking; the other ready ranks of the PE are stopped. Blocked ranks are never stopped
//!   (they could not report their wake-up), so a blocked slot owner leaves its PE to a DC or
//!   F rank until it is runnable again.
//!
//! A job the machine manager holds or suspends (its row active, yet not listed as running) is
//! stopped whole under every scheme; jobs of a policy without a matrix follow the machine
//! manager's stop/continue messages.
//!
//! Pure, like the rest of the node manager's core: time comes as an argument (the node
//! manager's clock, [`super::core`]: microseconds of `CLOCK_MONOTONIC`, the clock the ranks
//! stamp their ring records with), and what the ranks did comes as [`Samples`] the shell read
//! from `/proc` and the rings. What to sample is [`NodeSched::to_sample`].

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use cosched_core::{Dur, JobId, Time};
use cosched_monitor::{Kind, Record};
use cosched_node::{Action, NodeScheduler, ProcId, ProcOptions, SchedParams, Scheme, WaitPolicy};

use super::scheme::NodeSchemeConfig;
use cosched_proto::proto::{NodeEvent, Strobe};

/// Events kept for `cosched acct --class-history` (the oldest go first).
pub const KEEP_EVENTS: usize = 200_000;

/// How often the node manager looks at its ranks (see [`NodeSched::tick`]): well under the
/// gang quantum, so that a blocked slot owner's PE is filled within a few percent of it.
pub const TICK: Dur = Dur::from_millis(10);

/// One rank as `/proc/PID/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcSample {
    pub pid: i32,
    /// The state letter (`R`, `S`, `D`, `T`, …).
    pub state: char,
    /// User and system CPU time so far.
    pub cpu: Dur,
}

/// What the ranks did since the last look, as the shell read it: the ranks `/proc` still
/// shows, and the records each job's ranks wrote into its ring since the last read, as
/// (rank, record) in order per rank.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub procs: Vec<ProcSample>,
    pub rings: Vec<(JobId, Vec<(u32, Record)>)>,
}

/// What the node manager must do after an update, in this order: stop ranks, stop jobs,
/// continue jobs, continue ranks (so two processes never share a PE even for an instant).
#[derive(Debug, Default)]
pub struct Plan {
    pub stop_ranks: Vec<i32>,
    pub stop_jobs: Vec<JobId>,
    pub cont_jobs: Vec<JobId>,
    pub cont_ranks: Vec<i32>,
    /// Jobs of the matrix whose run state on this node changes with this plan (`true`: some
    /// rank runs, `false`: every rank is stopped), to report to the machine manager
    /// (`FromNode::Runs`) under the schemes that run jobs the strobe does not list; never
    /// under `gs`, whose reports follow the switch's thaws and completed freezes instead
    /// (`NmCore::report_runs`).
    pub runs: Vec<(JobId, bool)>,
    /// New spin times (ns) to write into jobs' rings (see [`NodeSched::tick`]).
    pub spins: Vec<(JobId, u64)>,
}

struct RankProc {
    job: JobId,
    rank: u32,
    pe: u32,
    pid: i32,
    /// CPU time at the last look.
    cpu: Dur,
    /// What this module last did to the rank: `Some(true)` stopped it, `Some(false)`
    /// continued it, `None` nothing yet (or the job was stopped or continued whole since).
    stopped: Option<bool>,
    /// Since when the rank is stopped (by a rank or a job stop), and the last stopped
    /// periods (monotonic ns): a wait's time stopped is not waiting while scheduled
    /// (seed 000 §3.4), so it is taken out of the wait.
    stopped_since: Option<u64>,
    stops: VecDeque<(u64, u64)>,
    /// The state letter `/proc` showed at the last look.
    seen: char,
    /// The receives of the synchronous operation in progress: (messages, waited, blocked,
    /// end of the last one in ns).
    op: Option<(u32, Dur, bool, u64)>,
    /// The rank sends: its operations are delimited by its sends (one BSP exchange is the
    /// receives after one round of sends), not by the time between receives.
    sends: bool,
}

/// Receives closer than this to the previous one belong to the same synchronous operation
/// (one BSP exchange receives from every peer in a row): the simulator reports one
/// `comm_done` per operation with its message count, and so must the node manager, or
/// the CPU time per event would shrink by the number of peers.
const SAME_OP_NS: u64 = 200_000;

/// Stopped periods kept per rank (a wait longer than these many switches loses the oldest).
const KEEP_STOPS: usize = 64;

impl RankProc {
    fn mark(&mut self, stopped: bool, now: u64) {
        match (stopped, self.stopped_since) {
            (true, None) => self.stopped_since = Some(now),
            (false, Some(t)) => {
                self.stopped_since = None;
                self.stops.push_back((t, now));
                while self.stops.len() > KEEP_STOPS {
                    self.stops.pop_front();
                }
            }
            _ => {}
        }
    }

    /// The part of [start, end] the rank spent stopped.
    fn stopped_within(&self, start: u64, end: u64) -> u64 {
        let open = self.stopped_since.map(|t| (t, end));
        self.stops
            .iter()
            .copied()
            .chain(open)
            .map(|(a, b)| b.min(end).saturating_sub(a.max(start)))
            .sum()
    }
}

/// See the module documentation.
pub struct NodeSched {
    cfg: NodeSchemeConfig,
    node: String,
    sched: NodeScheduler,
    procs: BTreeMap<ProcId, RankProc>,
    ids: HashMap<(JobId, u32), ProcId>,
    next: ProcId,
    strobe: Option<Strobe>,
    /// Job-level run state the last plan asked for (`true`: stopped).
    job_stopped: HashMap<JobId, bool>,
    /// When each live job was launched here (monotonic ns).
    started: HashMap<JobId, u64>,
    /// Spin time last written into each job's ring.
    spins: HashMap<JobId, u64>,
    /// Run state last reported for each job (see [`Plan::runs`]).
    runs_sent: HashMap<JobId, bool>,
    /// What runs on each PE, as last chosen (fcs).
    on_pe: Vec<Option<ProcId>>,
    events: VecDeque<NodeEvent>,
}

/// The node manager's clock in nanoseconds, the unit of the rings' records.
fn ns(now: Time) -> u64 {
    now.as_micros().max(0) as u64 * 1_000
}

impl NodeSched {
    pub fn new(cfg: NodeSchemeConfig, node: &str, pes: u32) -> NodeSched {
        let params = SchedParams {
            scheme: cfg.scheme,
            pes: pes as usize,
            spin_time: cfg.spin,
            interrupt: Dur::ZERO,
            check_endpoint: Dur::ZERO,
            global_info: Dur::ZERO,
            queue_reorder: Dur::ZERO,
            proc: ProcOptions::default(),
            fcs: cfg.fcs,
        };
        NodeSched {
            sched: NodeScheduler::new(params),
            cfg,
            node: node.to_string(),
            procs: BTreeMap::new(),
            ids: HashMap::new(),
            next: 1,
            strobe: None,
            job_stopped: HashMap::new(),
            started: HashMap::new(),
            spins: HashMap::new(),
            runs_sent: HashMap::new(),
            on_pe: vec![None; pes as usize],
            events: VecDeque::new(),
        }
    }

    pub fn scheme(&self) -> Scheme {
        self.cfg.scheme
    }

    /// Whether [`NodeSched::tick`] has anything to do: FCS and SB watch their ranks; `gs`
    /// and `local` act only on the strobe.
    pub fn active(&self) -> bool {
        self.watches_ranks() && !self.procs.is_empty()
    }

    /// Whether the scheme's decisions use what the ranks did ([`Samples`]): FCS and SB do;
    /// `gs` and `local` act on the strobe alone.
    pub fn watches_ranks(&self) -> bool {
        matches!(self.cfg.scheme, Scheme::Sb | Scheme::Fcs)
    }

    /// Class changes and context switches recorded so far.
    pub fn events(&self) -> Vec<NodeEvent> {
        self.events.iter().cloned().collect()
    }

    /// What the next [`NodeSched::tick`] or [`NodeSched::strobe`] wants sampled: the ranks'
    /// pids, and the jobs whose rings to read.
    pub fn to_sample(&self) -> (Vec<i32>, Vec<JobId>) {
        let pids = self.procs.values().map(|p| p.pid).collect();
        let jobs: BTreeSet<JobId> = self.procs.values().map(|p| p.job).collect();
        (pids, jobs.into_iter().collect())
    }

    fn event(&mut self, now: Time, id: ProcId, class: Option<&str>) {
        let Some(p) = self.procs.get(&id) else { return };
        let t0 = self.started.get(&p.job).copied().unwrap_or(0);
        let ev = NodeEvent {
            time_s: ns(now).saturating_sub(t0) as f64 * 1e-9,
            job: p.job,
            rank: p.rank,
            node: self.node.clone(),
            pe: p.pe,
            class: class.unwrap_or_default().to_string(),
            switch_in: class.is_none(),
        };
        self.events.push_back(ev);
        while self.events.len() > KEEP_EVENTS {
            self.events.pop_front();
        }
    }

    /// A rank started on local PE `pe` (`stopped`: launched stopped).
    pub fn add(&mut self, now: Time, job: JobId, rank: u32, pe: u32, pid: i32, stopped: bool) {
        if pid <= 0 {
            return;
        }
        self.started.entry(job).or_insert(ns(now));
        self.job_stopped.insert(job, stopped);
        let id = self.next;
        self.next += 1;
        self.ids.insert((job, rank), id);
        self.procs.insert(
            id,
            RankProc {
                job,
                rank,
                pe,
                pid,
                cpu: Dur::ZERO,
                stopped: None,
                stopped_since: stopped.then(|| ns(now)),
                stops: VecDeque::new(),
                seen: '?',
                op: None,
                sends: false,
            },
        );
        let slot = self.row_of(job).unwrap_or(self.sched.slot());
        self.sched.add(id, pe as usize, slot);
        if self.cfg.scheme == Scheme::Fcs {
            self.event(now, id, Some("CS"));
        }
        if !stopped && self.cfg.scheme == Scheme::Gs {
            self.event(now, id, None);
        }
    }

    /// A rank exited.
    pub fn exited(&mut self, job: JobId, rank: u32) {
        if let Some(id) = self.ids.remove(&(job, rank)) {
            self.procs.remove(&id);
            self.sched.remove(id);
            for c in &mut self.on_pe {
                if *c == Some(id) {
                    *c = None;
                }
            }
        }
    }

    /// The job is gone from the node.
    pub fn forget(&mut self, job: JobId) {
        let ranks: Vec<u32> = self
            .procs
            .values()
            .filter(|p| p.job == job)
            .map(|p| p.rank)
            .collect();
        for r in ranks {
            self.exited(job, r);
        }
        self.job_stopped.remove(&job);
        self.started.remove(&job);
        self.spins.remove(&job);
        self.runs_sent.remove(&job);
    }

    /// The machine manager stopped or continued the job whole (its own messages: a policy
    /// without a matrix, or a job the strobe does not know yet).
    pub fn job_signalled(&mut self, now: Time, job: JobId, stopped: bool) {
        let was = self.job_stopped.insert(job, stopped);
        for p in self.procs.values_mut().filter(|p| p.job == job) {
            p.stopped = None;
            p.mark(stopped, ns(now));
        }
        if self.cfg.scheme == Scheme::Gs && !stopped && was != Some(false) {
            let ids: Vec<ProcId> = self.ids_of(job);
            for id in ids {
                self.event(now, id, None);
            }
        }
    }

    fn ids_of(&self, job: JobId) -> Vec<ProcId> {
        self.procs
            .iter()
            .filter(|(_, p)| p.job == job)
            .map(|(&id, _)| id)
            .collect()
    }

    fn row_of(&self, job: JobId) -> Option<u32> {
        let s = self.strobe.as_ref()?;
        s.rows.iter().find(|(j, _)| *j == job).map(|&(_, r)| r)
    }

    /// Whether the strobe manages the job (it is in the matrix).
    pub fn manages(&self, job: JobId) -> bool {
        self.row_of(job).is_some()
    }

    /// The matrix of a rotation the node's switching thread carries out itself (an announced
    /// rotation under `gs`, [`super::program`]): its rows are taken in and nothing is planned;
    /// the jobs' run state follows [`NodeSched::job_signalled`] as the switches land.
    pub fn follow(&mut self, s: Strobe) {
        self.strobe = Some(s);
    }

    /// The machine manager's strobe arrived (with a heartbeat, or at a switch): FCS
    /// reclassifies every rank here, and the plan follows the new slot (after what `samples`
    /// show, as [`NodeSched::tick`]).
    pub fn strobe(&mut self, now: Time, s: Strobe, samples: &Samples) -> Plan {
        self.strobe = Some(s);
        let slot = self.strobe.as_ref().and_then(|s| s.slot);
        let ids: Vec<(ProcId, JobId)> = self.procs.iter().map(|(&i, p)| (i, p.job)).collect();
        let cur = slot.unwrap_or(self.sched.slot());
        for (id, job) in ids {
            // Jobs outside the matrix own every slot.
            let row = self.row_of(job).unwrap_or(cur);
            self.sched.set_slot(id, row);
        }
        if let Some(slot) = slot {
            let acts = self.sched.heartbeat(slot);
            self.actions(now, acts);
        }
        self.tick(now, samples)
    }

    fn actions(&mut self, now: Time, acts: Vec<Action>) {
        for a in acts {
            if let Action::ClassChanged { proc, class } = a {
                self.event(now, proc, Some(class.label()));
            }
        }
    }

    /// Takes in what the ranks did since the last look (CPU time, run state, receives: the
    /// `samples` of what [`NodeSched::to_sample`] named), and returns what to stop and
    /// continue, and the spin times to write.
    pub fn tick(&mut self, now: Time, samples: &Samples) -> Plan {
        self.observe(now, samples);
        let spins = self.spins();
        let mut plan = self.plan(now);
        plan.spins = spins;
        plan
    }

    fn observe(&mut self, now: Time, samples: &Samples) {
        let seen: HashMap<i32, &ProcSample> = samples.procs.iter().map(|s| (s.pid, s)).collect();
        let ids: Vec<ProcId> = self.procs.keys().copied().collect();
        for id in ids {
            let Some(&&ProcSample { state, cpu, .. }) = seen.get(&self.procs[&id].pid) else {
                continue;
            };
            let p = self.procs.get_mut(&id).expect("listed");
            let d = cpu - p.cpu;
            p.cpu = cpu;
            p.seen = state;
            if d > Dur::ZERO {
                self.sched.ran(id, d);
            }
            // While its job is stopped whole the rank's state is the freezer's, which `/proc`
            // shows as a sleep once it lands (and as running before), and 'T' is our own stop:
            // nothing learnt either way.
            if self.job_stopped.get(&p.job) == Some(&true) {
                continue;
            }
            match state {
                'S' | 'D' if !self.sched.is_blocked(id) => {
                    let acts = self.sched.block(id);
                    self.actions(now, acts);
                }
                'R' if self.sched.is_blocked(id) => {
                    let acts = self.sched.wake(id, true);
                    self.actions(now, acts);
                }
                _ => {}
            }
        }
        for (job, recs) in &samples.rings {
            let job = *job;
            for &(rank, r) in recs {
                let Some(&id) = self.ids.get(&(job, rank)) else {
                    continue;
                };
                let p = self.procs.get_mut(&id).expect("listed");
                // A receive is one synchronous communication event: its wait is what the
                // statistics measure (sends never wait: the messages fit the socket buffers).
                // A send ends the operation before it: on a loaded machine the receives of
                // one exchange can be further apart than SAME_OP_NS (the rank waited for a
                // core between them), and split they would cut the CPU time per event by
                // the number of peers (a coarse job would look fine-grained).
                if r.kind == Kind::Send {
                    p.sends = true;
                    if let Some((n, w, b, _)) = p.op.take() {
                        self.sched.comm_done(id, n, w, b);
                    }
                    continue;
                }
                {
                    let off = p.stopped_within(r.start_ns, r.end_ns);
                    let wall = r.end_ns.saturating_sub(r.start_ns);
                    let waited = Dur((wall.saturating_sub(off) / 1_000) as i64);
                    let blocked = r.blocked_ns > 0;
                    let sends = p.sends;
                    match p.op.as_mut() {
                        Some(op) if sends || r.start_ns.saturating_sub(op.3) < SAME_OP_NS => {
                            *op = (op.0 + 1, op.1 + waited, op.2 || blocked, r.end_ns);
                        }
                        _ => {
                            let done = p.op.replace((1, waited, blocked, r.end_ns));
                            if let Some((n, w, b, _)) = done {
                                self.sched.comm_done(id, n, w, b);
                            }
                        }
                    }
                }
            }
        }
        // An operation is over once its rank has gone on (computing) for a while; a rank that
        // sends ends it with its next send instead.
        let now = ns(now);
        for (&id, p) in self.procs.iter_mut() {
            if !p.sends
                && p.op
                    .is_some_and(|op| now.saturating_sub(op.3) >= SAME_OP_NS)
                && let Some((n, w, b, _)) = p.op.take()
            {
                self.sched.comm_done(id, n, w, b);
            }
        }
    }

    /// Each job's spin time for its ring, where it changed: the scheme's wait policy (for
    /// FCS the longest of the job's local ranks, as the ring holds one per job). `gs` and
    /// `local` leave the ring's own (block at once, as an ordinary blocking receive): their
    /// "spin forever" would burn a PE of every job that merely waits, under every policy
    /// (the default scheme also runs FCFS clusters).
    fn spins(&mut self) -> Vec<(JobId, u64)> {
        if !matches!(self.cfg.scheme, Scheme::Sb | Scheme::Fcs) {
            return Vec::new();
        }
        let mut per_job: BTreeMap<JobId, u64> = BTreeMap::new();
        for (&id, p) in &self.procs {
            let ns = match self.sched.wait_policy(id) {
                // A rank reads the spin time when its wait starts and does not look again:
                // "forever" is one time slice, after which it blocks and can be rescheduled
                // (else a slot owner that turned DC, or lost its slot, while spinning would
                // spin on past every later decision).
                WaitPolicy::SpinForever => (self.cfg.fcs.dc_thresh.0.max(0) as u64) * 1_000,
                WaitPolicy::Spin(d) => d.0.max(0) as u64 * 1_000,
                WaitPolicy::Block => 0,
            };
            let e = per_job.entry(p.job).or_insert(0);
            *e = (*e).max(ns);
        }
        per_job
            .into_iter()
            .filter(|&(job, ns)| self.spins.insert(job, ns) != Some(ns))
            .collect()
    }

    /// Whole-job run state the strobe gives: `None` when the job is not in the matrix.
    fn job_runs(&self, job: JobId) -> Option<bool> {
        let s = self.strobe.as_ref()?;
        let row = self.row_of(job)?;
        let listed = s.running.contains(&job);
        Some(match self.cfg.scheme {
            Scheme::Gs => listed,
            // Held or suspended: its row is active, yet the policy does not run it.
            _ => listed || s.slot.is_none_or(|a| a != row),
        })
    }

    fn plan(&mut self, now: Time) -> Plan {
        let mut plan = self.signals(now);
        plan.runs = self.run_changes();
        plan
    }

    /// The jobs of the matrix whose run state here (some rank not stopped by this module)
    /// differs from the last report (see [`Plan::runs`]).
    fn run_changes(&mut self) -> Vec<(JobId, bool)> {
        if self.cfg.scheme == Scheme::Gs {
            return Vec::new();
        }
        let mut now: BTreeMap<JobId, bool> = BTreeMap::new();
        for p in self.procs.values() {
            *now.entry(p.job).or_insert(false) |= p.stopped_since.is_none();
        }
        now.into_iter()
            .filter(|&(job, runs)| {
                self.manages(job) && self.runs_sent.insert(job, runs) != Some(runs)
            })
            .collect()
    }

    /// What to stop and continue.
    fn signals(&mut self, now: Time) -> Plan {
        let mut plan = Plan::default();
        let jobs: Vec<JobId> = {
            let mut v: Vec<JobId> = self.job_stopped.keys().copied().collect();
            v.sort();
            v
        };
        for job in jobs {
            let Some(runs) = self.job_runs(job) else {
                continue;
            };
            let stopped = self.job_stopped.get(&job).copied().unwrap_or(false);
            if runs != stopped {
                continue;
            }
            if runs {
                plan.cont_jobs.push(job);
            } else {
                plan.stop_jobs.push(job);
            }
            self.job_signalled(now, job, !runs);
        }
        if self.cfg.scheme != Scheme::Fcs {
            return plan;
        }
        for pe in 0..self.on_pe.len() {
            let chosen = self.sched.pick(now, pe).proc;
            let on_pe: Vec<ProcId> = self
                .procs
                .iter()
                .filter(|(_, p)| p.pe as usize == pe)
                .map(|(&id, _)| id)
                .collect();
            for id in on_pe {
                let p = &self.procs[&id];
                let job_stopped = self.job_stopped.get(&p.job).copied().unwrap_or(false);
                if job_stopped || !self.manages(p.job) {
                    continue;
                }
                // Blocked ranks are left alone: stopped, they could not show their wake-up.
                let stop = Some(id) != chosen && !self.sched.is_blocked(id);
                // What `/proc` shows must agree with what was done last: a signal that did
                // not take (sent to a rank while its job's cgroup was frozen and thawed, say)
                // is sent again.
                let agrees = match p.seen {
                    'T' => stop,
                    'R' => !stop,
                    _ => true,
                };
                if p.stopped == Some(stop) && agrees {
                    continue;
                }
                if stop {
                    plan.stop_ranks.push(p.pid);
                } else {
                    plan.cont_ranks.push(p.pid);
                }
                let p = self.procs.get_mut(&id).expect("listed");
                p.stopped = Some(stop);
                p.mark(stop, ns(now));
            }
            // A local context switch: another rank goes onto the PE.
            if chosen != self.on_pe[pe] {
                self.on_pe[pe] = chosen;
                if let Some(c) = chosen {
                    self.event(now, c, None);
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pids of ranks that are never sampled (the plans come from the strobe alone).
    const NO_PID: i32 = i32::MAX - 7;

    fn t(ms: i64) -> Time {
        Time::from_micros(ms * 1_000)
    }

    fn strobe(slot: Option<u32>, running: &[u64]) -> Strobe {
        Strobe {
            slot,
            rows: vec![(JobId(1), 0), (JobId(2), 1)],
            running: running.iter().map(|&j| JobId(j)).collect(),
        }
    }

    fn two_jobs(scheme: &str) -> (NodeSched, Samples) {
        let cfg = NodeSchemeConfig::parse(scheme, &[], None).unwrap();
        let mut n = NodeSched::new(cfg, "n0", 1);
        n.add(t(0), JobId(1), 0, 0, NO_PID, false);
        n.add(t(0), JobId(2), 0, 0, NO_PID - 1, true);
        (n, Samples::default())
    }

    #[test]
    fn gs_runs_what_the_strobe_lists_and_local_runs_every_job_not_held() {
        let (mut n, m) = two_jobs("gs");
        let p = n.strobe(t(10), strobe(Some(1), &[2]), &m);
        assert_eq!((p.stop_jobs, p.cont_jobs), (vec![JobId(1)], vec![JobId(2)]));
        assert!(p.runs.is_empty(), "gs reports nothing: the MM decided it");
        assert!(n.manages(JobId(1)) && !n.manages(JobId(3)));
        let p = n.strobe(t(20), strobe(Some(1), &[2]), &m);
        assert!(
            p.stop_jobs.is_empty() && p.cont_jobs.is_empty(),
            "nothing twice"
        );
        let p = n.strobe(t(30), strobe(Some(0), &[1]), &m);
        assert_eq!((p.stop_jobs, p.cont_jobs), (vec![JobId(2)], vec![JobId(1)]));
        assert_eq!(n.events().iter().filter(|e| e.switch_in).count(), 3);

        let (mut n, m) = two_jobs("local");
        let p = n.strobe(t(40), strobe(Some(0), &[1]), &m);
        assert_eq!((p.stop_jobs, p.cont_jobs), (vec![], vec![JobId(2)]));
        // Both run here, job 2 although the policy only placed it: reported once.
        assert_eq!(p.runs, [(JobId(1), true), (JobId(2), true)]);
        assert!(n.strobe(t(50), strobe(Some(1), &[2]), &m).runs.is_empty());
        // Job 1's row is active but the policy does not run it: held.
        let p = n.strobe(t(60), strobe(Some(0), &[]), &m);
        assert_eq!(p.stop_jobs, vec![JobId(1)]);
        assert_eq!(p.runs, [(JobId(1), false)]);
    }

    #[test]
    fn fcs_stops_all_but_the_slot_owner_of_a_pe() {
        let (mut n, m) = two_jobs("fcs");
        let p = n.strobe(t(70), strobe(Some(0), &[1]), &m);
        // Job 2 (launched stopped) is thawed for the scheme; rank by rank, job 1's runs.
        assert_eq!(p.cont_jobs, vec![JobId(2)]);
        assert_eq!(p.stop_ranks, vec![NO_PID - 1]);
        assert_eq!(p.cont_ranks, vec![NO_PID]);
        // Job 2's only rank here is stopped rank by rank: it does not run.
        assert_eq!(p.runs, [(JobId(1), true), (JobId(2), false)]);
        let p = n.strobe(t(80), strobe(Some(1), &[2]), &m);
        assert_eq!(
            (p.stop_ranks, p.cont_ranks),
            (vec![NO_PID], vec![NO_PID - 1])
        );
        assert_eq!(p.runs, [(JobId(1), false), (JobId(2), true)]);
        let classes: Vec<String> = n
            .events()
            .iter()
            .filter(|e| !e.switch_in)
            .map(|e| e.class.clone())
            .collect();
        assert_eq!(classes, ["CS", "CS"], "each starts CS");
    }
}
