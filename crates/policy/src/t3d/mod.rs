//! The Cray T3D class-based gang scheduler (`t3d`), seed 002 §4.
//!
//! A "lazy" gang scheduler: jobs run until a more urgent job needs their PEs; a preempted
//! job's state goes to disk (a [`Decision::Preempt`]) and comes back later — on other PEs
//! when [`PolicyConfig::migration`] allows it (the simulator), else only on the PEs it had
//! (the machine manager, which cannot move a stopped process). Moving a job's state costs
//! `swap_per_pe × procs` each way: its PEs stay unusable while it swaps out, and a job coming
//! back from disk starts only after swapping in.
//!
//! At every instant, once its events are observed, the scheduler makes two passes over the
//! waiting jobs (§4.3):
//! 1. Jobs that have waited longer than their class's maximum wait, by class priority then
//!    waiting time. The first one that can be given PEs — free ones, plus those of jobs
//!    it may preempt (preemptible, of a class of no higher priority, cheapest first) — gets
//!    them reserved. Victims whose do-not-disturb time is up are preempted at once, the
//!    others when it runs out. One reservation at a time; a job of a higher-priority class
//!    past its wait takes it over. The job loads as soon as its PEs are free, or earlier on
//!    other free PEs.
//! 2. The other jobs, by priority then waiting time, within the job, large-job, class and
//!    system (over-allocation) processor limits, on free PEs or on PEs of jobs of a
//!    strictly lower-priority class whose do-not-disturb time is up.
//!
//! With a night set ([`config::DayNight`]) the parameters in force switch at the day's start
//! and end (a timer wakes the policy); jobs keep their class, and loaded jobs their PEs.
//!
//! The policy keeps a log of every preemption and every quantum (uninterrupted run), for the
//! reports of Figs. 13-15 ([`T3d::quanta`], [`T3d::preemptions`]).

pub mod config;
mod earmarks;
mod order;
mod pass;
mod pes;
mod protect;
mod victims;

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::hash::BuildHasherDefault;

use cosched_core::{Dur, IdHasher, IdMap, JobId, PeSet, Time};

pub use config::{ClassParams, DayNight, T3dConfig};
use order::Lane;
use pes::{Holder, PeMap};
use protect::Protection;

use crate::queue::never_fits;
use crate::{ConfigError, Decision, Event, JobRequest, Never, Policy, PolicyConfig};

/// One uninterrupted run of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantum {
    pub job: JobId,
    pub procs: u32,
    pub class: usize,
    pub start: Time,
    pub end: Time,
    /// Ended by a preemption (else by the job's end).
    pub preempted: bool,
}

/// One preemption: who lost its PEs, for whom, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preemption {
    pub at: Time,
    pub victim: JobId,
    pub victim_class: usize,
    /// When the victim last started running.
    pub victim_since: Time,
    pub victim_procs: u32,
    pub for_job: JobId,
    pub for_class: usize,
}

/// PEs for a job, and the jobs to preempt for them (with their do-not-disturb ends).
type Assignment = (PeSet, Vec<(JobId, Time)>);

#[derive(Clone, Debug)]
struct Waiting {
    req: JobRequest,
    class: usize,
    /// Since when it waits for processors (submission, or its last preemption).
    since: Time,
    on_disk: bool,
    /// The PEs it had when preempted, where it must start again when preempted jobs cannot
    /// move ([`PolicyConfig::migration`] is false).
    home: Option<PeSet>,
    /// When it joined the waiting jobs, counted: a pass visits only the jobs waiting when it
    /// began.
    seq: u64,
}

#[derive(Clone, Debug)]
struct Loaded {
    req: JobRequest,
    class: usize,
    pes: PeSet,
    /// When it starts (or started) running: later than the load when swapping in.
    ready_at: Time,
    started: bool,
}

/// A job a waiting job may take PEs from: `(cost, job, dnd_end, procs)`. Jobs are unique, so
/// the order of these is that of `(cost, job)`.
type Victim = (u64, JobId, Time, u32);

/// The jobs a waiting job of some priority may take PEs from, and their processors in total.
/// They are taken cheapest first, and most reservations need only the first few of a list of
/// every loaded job: `list[..sorted]` is sorted and holds the cheapest, the rest is in no
/// order, and [`Victims::nth`] sorts further only as far as it is asked.
#[derive(Clone, Debug, Default)]
struct Victims {
    list: Vec<Victim>,
    sorted: usize,
    procs: u64,
}

/// What [`T3d::victims`] depends on besides the loaded jobs and the marks (which bump
/// [`T3d::epoch`]): the instant, the pass, and the waiting job's class priority.
type VictimKey = (u64, Time, bool, u32);

/// PEs set aside for one waiting job until they are all free.
#[derive(Clone, Debug)]
struct Earmark {
    job: JobId,
    pes: PeSet,
    /// Made by the first pass (the one reservation), else by the second.
    reservation: bool,
}

#[derive(Clone, Debug)]
pub struct T3d {
    /// The parameters as configured, night set included.
    full: T3dConfig,
    /// The set in force now (the day set, or the night set outside the day).
    cfg: T3dConfig,
    /// Whether `cfg` is the day set.
    is_day: bool,
    /// Who holds each PE, which PEs are earmarked and which are down.
    pe: PeMap,
    /// PEs set swapping out, with when the swap ends; [`T3d::schedule`] frees them then.
    swaps: Vec<(Time, PeSet)>,
    /// Hashed, not ordered: every walk over them sorts what it takes, or only sums.
    loaded: IdMap<Loaded>,
    /// Loaded jobs still swapping in from disk (not started yet).
    swapping_in: BTreeSet<JobId>,
    /// Processors of the loaded jobs: in all, by class, of large jobs (`cfg.large_job` PEs
    /// or more), and of the started ones by class (what a waiting job could preempt at most).
    loaded_procs: u64,
    loaded_by_class: Vec<u64>,
    loaded_large: u64,
    started_by_class: Vec<u64>,
    /// The started jobs by the end of their do-not-disturb time.
    protection: Protection,
    /// Starts so far (each start's count tells it from the job's earlier ones).
    starts: u64,
    /// Waiting jobs (new and preempted); the order that counts is [`T3d::ordered`]'s, which
    /// the lanes hold (see [`T3d::lane`]).
    waiting: IdMap<Waiting>,
    /// Waiting jobs by class and whether on disk, in the order of a pass.
    lanes: Vec<Lane>,
    /// The lanes with a job, in increasing order: a pass asks only them.
    live_lanes: Vec<usize>,
    /// Joins of the waiting jobs so far (each one's [`Waiting::seq`]).
    joins: u64,
    /// Held jobs. A hold may come before the submission and outlives a start; it goes with
    /// the job's end.
    held: HashSet<JobId, BuildHasherDefault<IdHasher>>,
    /// Submissions that can never run, with the reason, for the next decision.
    refused: Vec<(JobId, Never)>,
    /// When each waiting job becomes overdue, `(at, parameter generation, job, join)`, until
    /// a timer is asked for it at the end of a decision ([`T3d::ask_wakes`]).
    wakes: BinaryHeap<Reverse<(Time, u64, JobId, u64)>>,
    /// Bumped when the parameter set in force changes (the wake times move).
    generation: u64,
    /// Whether a preempted job may come back on other PEs.
    migration: bool,
    /// Kept in [`T3d::pe`]'s marks by [`T3d::remark`] after every change.
    earmarks: Vec<Earmark>,
    /// Processors of the waiting jobs with an earmark: in all, by class, of large jobs
    /// (kept by [`T3d::remark`], for [`T3d::usage`]).
    marked_procs: (u64, Vec<u64>, u64),
    pes_per_node: u32,
    /// PEs of jobs whose state is on disk.
    disk_procs: u64,
    asked: BTreeSet<Time>,
    tokens: HashMap<u64, Time, BuildHasherDefault<IdHasher>>,
    next_token: u64,
    quanta: Vec<Quantum>,
    preemptions: Vec<Preemption>,
    /// Bumped whenever anything a pass reads changes: the loaded jobs, the earmarks, the
    /// waiting jobs and their holds, the PEs (a swap ending, a node going down or up), the
    /// parameter set. Only time moves without it.
    epoch: u64,
    /// Per pass (overdue, rest): at this epoch the pass did nothing, and it will do nothing
    /// before this time unless the epoch moves ([`T3d::pass`]).
    quiet: [Option<(u64, Time)>; 2],
    /// Likewise for [`T3d::serve_earmarks`].
    quiet_serve: Option<(u64, Time)>,
    /// The jobs on each earmark's PEs, at this [`PeMap::marks_version`].
    occupants: RefCell<(Option<u64>, Vec<Vec<JobId>>)>,
    /// [`T3d::serve_earmarks`]'s list of one earmark's occupants, kept between calls.
    serve_buffer: Vec<JobId>,
    /// [`Cursor`]'s lists, kept from one pass to the next.
    pass_buffers: (Vec<Option<Option<PassKey>>>, Vec<JobId>),
    /// Victim lists computed at this epoch: every waiting job of one priority that does not
    /// fit in a pass shares one, instead of a walk over every loaded job each.
    victim_cache: RefCell<Vec<(VictimKey, Victims)>>,
}

/// A job's place in a pass: class priority (highest first), since when it waits, id.
type PassKey = (Reverse<u32>, Time, JobId);

/// Which of the two passes of [`T3d::schedule`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Pass {
    /// Jobs past their class's maximum wait: a reservation.
    Overdue,
    /// Every waiting job, within the limits.
    Rest,
}

impl T3d {
    pub fn new(cfg: &PolicyConfig) -> Result<T3d, ConfigError> {
        let mut t = T3d::with_config(cfg.machine.total_pes(), T3dConfig::from_policy_config(cfg)?);
        t.pes_per_node = cfg.machine.pes_per_node().max(1);
        t.migration = cfg.migration;
        Ok(t)
    }

    pub fn with_config(pes: u32, cfg: T3dConfig) -> T3d {
        let is_day = cfg
            .night
            .as_ref()
            .is_none_or(|n| n.day.is_prime(Time::ZERO));
        let classes = cfg.classes.len();
        T3d {
            cfg: cfg.set_at(Time::ZERO),
            full: cfg,
            is_day,
            pe: PeMap::new(pes),
            swaps: Vec::new(),
            loaded: IdMap::default(),
            swapping_in: BTreeSet::new(),
            loaded_procs: 0,
            loaded_by_class: vec![0; classes],
            loaded_large: 0,
            started_by_class: vec![0; classes],
            protection: Protection::new(classes),
            starts: 0,
            waiting: IdMap::default(),
            lanes: vec![Lane::default(); 2 * classes],
            live_lanes: Vec::new(),
            joins: 0,
            held: HashSet::default(),
            refused: Vec::new(),
            wakes: BinaryHeap::new(),
            generation: 0,
            migration: true,
            earmarks: Vec::new(),
            marked_procs: (0, vec![0; classes], 0),
            pes_per_node: 1,
            disk_procs: 0,
            asked: BTreeSet::new(),
            tokens: HashMap::default(),
            next_token: 0,
            quanta: Vec::new(),
            preemptions: Vec::new(),
            epoch: 0,
            quiet: [None, None],
            quiet_serve: None,
            occupants: RefCell::new((None, Vec::new())),
            serve_buffer: Vec::new(),
            pass_buffers: (Vec::new(), Vec::new()),
            victim_cache: RefCell::new(Vec::new()),
        }
    }

    /// The parameters as configured (with the night set, if any).
    pub fn config(&self) -> &T3dConfig {
        &self.full
    }
    /// The parameter set in force now.
    pub fn active(&self) -> &T3dConfig {
        &self.cfg
    }
    pub fn is_day(&self) -> bool {
        self.is_day
    }

    /// Puts the day or night set in force at `now`, and asks to be woken at the next change.
    fn day_or_night(&mut self, now: Time, out: &mut Vec<Decision>) {
        let Some(n) = &self.full.night else {
            return;
        };
        let (day, next) = (n.day.is_prime(now), n.day.next_change(now));
        if day != self.is_day {
            self.is_day = day;
            self.cfg = self.full.set_at(now);
            // Priorities and do-not-disturb times changed: cached victim lists are stale.
            self.epoch += 1;
            // So did what counts as large, and every class's maximum wait.
            self.marked_procs = self.count_marked_procs();
            let large = self.cfg.large_job;
            self.loaded_large = self
                .loaded
                .values()
                .filter(|l| l.req.procs >= large)
                .map(|l| l.req.procs as u64)
                .sum();
            self.protection.clear();
            let started: Vec<(JobId, usize, u32, Time)> = self
                .loaded
                .iter()
                .filter(|(_, l)| l.started)
                .map(|(&id, l)| (id, l.class, l.req.procs, self.dnd_end(l)))
                .collect();
            for (id, class, procs, end) in started {
                self.protect(id, class, procs, end, now);
            }
            self.generation += 1;
            let wakes: Vec<_> = self
                .waiting
                .values()
                .map(|w| Reverse((self.wake_of(w), self.generation, w.req.id, w.seq)))
                .collect();
            self.wakes.extend(wakes);
        }
        self.ask_timer(next, now, out);
    }

    /// When waiting job `w` becomes overdue under the parameters in force.
    fn wake_of(&self, w: &Waiting) -> Time {
        w.since + self.class(w.class).wait
    }

    fn lane_of(w: &Waiting) -> usize {
        2 * w.class + usize::from(w.on_disk)
    }

    /// Adds a waiting job (submitted, or preempted).
    fn join(&mut self, mut w: Waiting) {
        self.epoch += 1;
        w.seq = self.joins;
        self.joins += 1;
        let l = Self::lane_of(&w);
        if self.lanes[l].is_empty()
            && let Err(at) = self.live_lanes.binary_search(&l)
        {
            self.live_lanes.insert(at, l);
        }
        self.lanes[l].insert((w.since, w.req.id), w.req.procs, w.seq);
        self.check_live_lanes();
        self.wakes.push(Reverse((
            self.wake_of(&w),
            self.generation,
            w.req.id,
            w.seq,
        )));
        self.waiting.insert(w.req.id, w);
    }

    /// Debug builds: [`T3d::live_lanes`] are the lanes with a job, in order.
    fn check_live_lanes(&self) {
        debug_assert!(
            (0..self.lanes.len())
                .filter(|&l| !self.lanes[l].is_empty())
                .eq(self.live_lanes.iter().copied()),
            "the live lanes are those with a job"
        );
    }

    /// Takes a waiting job out (loaded, or ended).
    fn leave(&mut self, id: JobId) -> Option<Waiting> {
        let w = self.waiting.remove(&id)?;
        self.epoch += 1;
        let l = Self::lane_of(&w);
        self.lanes[l].remove(id);
        if self.lanes[l].is_empty() {
            self.live_lanes.retain(|&x| x != l);
        }
        self.check_live_lanes();
        Some(w)
    }

    /// Counts a job in (or out of) the loaded processors.
    fn tally_loaded(&mut self, req: &JobRequest, class: usize, into: bool) {
        let p = req.procs as u64;
        let large = if req.procs >= self.cfg.large_job {
            p
        } else {
            0
        };
        if into {
            self.loaded_procs += p;
            self.loaded_by_class[class] += p;
            self.loaded_large += large;
        } else {
            self.loaded_procs -= p;
            self.loaded_by_class[class] -= p;
            self.loaded_large -= large;
        }
    }

    /// Asks a timer for every waiting job that becomes overdue within half a year, as at the
    /// end of every decision; each time once.
    fn ask_wakes(&mut self, now: Time, out: &mut Vec<Decision>) {
        let horizon = config::YEAR.as_micros() / 2;
        while let Some(&Reverse((at, generation, id, seq))) = self.wakes.peek() {
            if at > now && at.as_micros() - now.as_micros() > horizon {
                break;
            }
            self.wakes.pop();
            let current = generation == self.generation
                && self.waiting.get(&id).is_some_and(|w| w.seq == seq);
            if current {
                self.ask_timer(at, now, out);
            }
        }
        // Every waiting job's wake within the horizon has its timer, as asking for each
        // job at the end of every decision would have it.
        #[cfg(debug_assertions)]
        if self.checked() {
            for w in self.waiting.values() {
                let at = self.wake_of(w);
                if at > now && at.as_micros() - now.as_micros() <= horizon {
                    assert!(
                        self.asked.contains(&at),
                        "no wake at {at:?} for job {}",
                        w.req.id
                    );
                }
            }
        }
    }
    /// Every uninterrupted run so far (runs still going are not included).
    pub fn quanta(&self) -> &[Quantum] {
        &self.quanta
    }
    pub fn preemptions(&self) -> &[Preemption] {
        &self.preemptions
    }

    fn class(&self, i: usize) -> &ClassParams {
        &self.cfg.classes[i]
    }

    fn dnd_end(&self, l: &Loaded) -> Time {
        let per = self.class(l.class).dnd_per_pe;
        let dnd = Dur::from_micros(per.as_micros().saturating_mul(l.req.procs as i64));
        Time::from_micros(l.ready_at.as_micros().saturating_add(dnd.as_micros()))
    }

    /// Job `id` of `class` starts at `now`, protected until `end`.
    fn protect(&mut self, id: JobId, class: usize, procs: u32, end: Time, now: Time) {
        self.starts += 1;
        let cost = victims::fixed_cost(procs, self.class(class).priority);
        self.protection
            .start(id, (class, procs, cost), end, self.starts, now);
    }

    fn ask_timer(&mut self, at: Time, now: Time, out: &mut Vec<Decision>) {
        // Far-future times ("one year") need no timer: some other event comes first.
        if at <= now || at.as_micros() - now.as_micros() > config::YEAR.as_micros() / 2 {
            return;
        }
        if self.asked.insert(at) {
            self.next_token += 1;
            self.tokens.insert(self.next_token, at);
            out.push(Decision::SetTimer {
                at,
                token: self.next_token,
            });
        }
    }

    /// Loads waiting job `id` on `pes`: it starts now, or after swapping in from disk.
    fn load(&mut self, id: JobId, set: PeSet, now: Time, out: &mut Vec<Decision>) {
        let w = self.leave(id).expect("a waiting job");
        debug_assert!(w.home.as_ref().is_none_or(|h| *h == set));
        self.retain_earmarks(|e| e.job != w.req.id);
        self.epoch += 1;
        for &(s, e) in set.runs() {
            self.pe.set(s, e, Some(Holder::Job(w.req.id)));
        }
        let ready_at = if w.on_disk {
            self.disk_procs -= w.req.procs as u64;
            now + Dur::from_micros(self.cfg.swap_per_pe.as_micros() * w.req.procs as i64)
        } else {
            now
        };
        self.tally_loaded(&w.req, w.class, true);
        self.loaded.insert(
            id,
            Loaded {
                req: w.req,
                class: w.class,
                pes: set,
                ready_at,
                started: false,
            },
        );
        if ready_at <= now {
            self.start_ready(id, now, out);
        } else {
            self.swapping_in.insert(id);
            self.ask_timer(ready_at, now, out);
        }
    }

    fn start_ready(&mut self, id: JobId, now: Time, out: &mut Vec<Decision>) {
        let l = self.loaded.get_mut(&id).expect("loaded");
        l.started = true;
        self.started_by_class[l.class] += l.req.procs as u64;
        let l = &self.loaded[&id];
        let (class, procs, end) = (l.class, l.req.procs, self.dnd_end(l));
        self.protect(id, class, procs, end, now);
        self.swapping_in.remove(&id);
        self.epoch += 1;
        let l = &self.loaded[&id];
        out.push(Decision::Start {
            job: id,
            pes: l.pes.clone(),
            slot: None,
        });
    }

    fn preempt(
        &mut self,
        victim: JobId,
        for_job: JobId,
        for_class: usize,
        now: Time,
        out: &mut Vec<Decision>,
    ) {
        let l = self.loaded.remove(&victim).expect("victim is loaded");
        debug_assert!(l.started, "only a running job is preempted");
        self.started_by_class[l.class] -= l.req.procs as u64;
        self.protection.stop(victim);
        self.tally_loaded(&l.req, l.class, false);
        self.epoch += 1;
        let until = now + Dur::from_micros(self.cfg.swap_per_pe.as_micros() * l.req.procs as i64);
        let holder = (until > now).then_some(Holder::Out(until));
        for &(s, e) in l.pes.runs() {
            self.pe.set(s, e, holder);
        }
        if until > now {
            self.swaps.push((until, l.pes.clone()));
        }
        self.ask_timer(until, now, out);
        self.quanta.push(Quantum {
            job: victim,
            procs: l.req.procs,
            class: l.class,
            start: l.ready_at,
            end: now,
            preempted: true,
        });
        self.preemptions.push(Preemption {
            at: now,
            victim,
            victim_class: l.class,
            victim_since: l.ready_at,
            victim_procs: l.req.procs,
            for_job,
            for_class,
        });
        self.disk_procs += l.req.procs as u64;
        out.push(Decision::Preempt { job: victim });
        let home = (!self.migration).then_some(l.pes);
        self.join(Waiting {
            req: l.req,
            class: l.class,
            since: now,
            on_disk: true,
            home,
            seq: 0,
        });
    }

    fn schedule(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.day_or_night(now, out);
        self.protection.advance(now);
        // Swaps that are over: their PEs still swapping (not taken since) become free.
        if self.swaps.iter().any(|(t, _)| *t <= now) {
            self.epoch += 1;
            // Taken out in place: the list keeps its buffer for the swaps to come.
            for (_, pes) in self.swaps.extract_if(.., |(t, _)| *t <= now) {
                self.pe
                    .free_where(&pes, |h| matches!(h, Holder::Out(t) if t <= now));
            }
        }
        let ready: Vec<JobId> = self
            .swapping_in
            .iter()
            .copied()
            .filter(|id| self.loaded[id].ready_at <= now)
            .collect();
        for id in ready {
            self.start_ready(id, now, out);
        }

        // First pass: jobs past their maximum wait.
        self.pass(Pass::Overdue, now, out);
        self.serve_earmarks(now, out);

        // Second pass: everything else that fits the limits.
        self.pass(Pass::Rest, now, out);
        self.serve_earmarks(now, out);

        // Wake up when a waiting job becomes overdue.
        self.ask_wakes(now, out);
    }

    fn forget(&mut self, id: JobId, now: Time) {
        self.held.remove(&id);
        if let Some(l) = self.loaded.remove(&id) {
            self.epoch += 1;
            self.tally_loaded(&l.req, l.class, false);
            self.pe.free_where(&l.pes, |h| h == Holder::Job(id));
            if l.started {
                self.started_by_class[l.class] -= l.req.procs as u64;
                self.protection.stop(id);
                self.quanta.push(Quantum {
                    job: id,
                    procs: l.req.procs,
                    class: l.class,
                    start: l.ready_at,
                    end: now,
                    preempted: false,
                });
            } else {
                self.swapping_in.remove(&id);
            }
        } else if let Some(w) = self.leave(id)
            && w.on_disk
        {
            self.disk_procs -= w.req.procs as u64;
        }
        self.retain_earmarks(|e| e.job != id);
    }
}

impl Policy for T3d {
    fn name(&self) -> &str {
        "t3d"
    }

    fn observe(&mut self, now: Time, event: Event) {
        let node_up = matches!(event, Event::NodeUp(_));
        match event {
            Event::Submitted(req) => {
                let why = if let Some(why) = never_fits(&req, self.pe.len()) {
                    Some(why)
                } else if req.procs > self.cfg.job_limit {
                    Some(Never::OverLimit {
                        procs: req.procs,
                        limit: self.cfg.job_limit,
                    })
                } else {
                    None
                };
                if let Some(why) = why {
                    self.refused.push((req.id, why));
                    return;
                }
                let class = self.cfg.class_of(&req);
                self.join(Waiting {
                    since: req.submit.max(Time::ZERO).min(now),
                    req,
                    class,
                    on_disk: false,
                    home: None,
                    seq: 0,
                });
            }
            Event::Ended(id) => self.forget(id, now),
            Event::Timer(token) => {
                if let Some(at) = self.tokens.remove(&token) {
                    self.asked.remove(&at);
                }
            }
            Event::Running { job, pes, since } => {
                let class = self.cfg.class_of(&job);
                for &(s, e) in pes.runs() {
                    self.pe.set(s, e, Some(Holder::Job(job.id)));
                }
                self.epoch += 1;
                self.tally_loaded(&job, class, true);
                self.started_by_class[class] += job.procs as u64;
                let id = job.id;
                let l = Loaded {
                    req: job,
                    class,
                    pes,
                    ready_at: since,
                    started: true,
                };
                let (procs, end) = (l.req.procs, self.dnd_end(&l));
                self.protect(id, class, procs, end, now);
                self.loaded.insert(id, l);
            }
            // Jobs on a failed node are ended by the driver; its PEs are not used until it is up.
            Event::NodeDown(node) | Event::NodeUp(node) => {
                let per = self.pes_per_node;
                self.pe.set_down(node.0 * per, (node.0 + 1) * per, !node_up);
                self.epoch += 1;
                let (pe, before) = (&self.pe, self.earmarks.len());
                self.earmarks.retain(|e| !pe.any_down(&e.pes));
                if self.earmarks.len() != before {
                    self.remark();
                }
            }
            Event::Held(id) => {
                self.epoch += 1;
                self.held.insert(id);
            }
            Event::Released(id) => {
                self.epoch += 1;
                self.held.remove(&id);
            }
        }
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        for (job, why) in self.refused.drain(..) {
            out.push(Decision::Reject { job, why });
        }
        self.schedule(now, out);
    }

    fn queue(&self) -> Vec<JobId> {
        self.ordered(|_| true)
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}
