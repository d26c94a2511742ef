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
mod order;
mod pes;
mod protect;

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashSet};
use std::sync::Arc;

use cosched_core::{Dur, JobId, PeSet, Time};

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

/// The jobs a waiting job of some priority may take PEs from, cheapest first
/// (`(cost, job, dnd_end, procs)`), and their processors in total.
#[derive(Debug, Default)]
struct Victims {
    list: Vec<(u64, JobId, Time, u32)>,
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
    loaded: BTreeMap<JobId, Loaded>,
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
    waiting: BTreeMap<JobId, Waiting>,
    /// Waiting jobs by class and whether on disk, in the order of a pass.
    lanes: Vec<Lane>,
    /// Joins of the waiting jobs so far (each one's [`Waiting::seq`]).
    joins: u64,
    /// Held jobs. A hold may come before the submission and outlives a start; it goes with
    /// the job's end.
    held: HashSet<JobId>,
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
    pes_per_node: u32,
    /// PEs of jobs whose state is on disk.
    disk_procs: u64,
    asked: BTreeSet<Time>,
    tokens: BTreeMap<u64, Time>,
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
    /// [`Cursor`]'s lists, kept from one pass to the next.
    pass_buffers: (Vec<Option<Option<PassKey>>>, Vec<JobId>),
    /// Victim lists computed at this epoch: every waiting job of one priority that does not
    /// fit in a pass shares one, instead of a walk over every loaded job each.
    victim_cache: RefCell<Vec<(VictimKey, Arc<Victims>)>>,
}

/// Processors held by loaded and earmarked jobs ([`T3d::usage`]).
struct Usage {
    total: u64,
    /// Of one class.
    class: u64,
    /// Of large jobs.
    large: u64,
}

/// A job's place in a pass: class priority (highest first), since when it waits, id.
type PassKey = (Reverse<u32>, Time, JobId);

/// Where a pass stands ([`T3d::pass`]).
struct Cursor {
    pass: Pass,
    /// Jobs that joined the waiting ones from this count on are not this pass's.
    joined_before: u64,
    /// Jobs earmarked when the pass began (not this pass's).
    marked: Vec<JobId>,
    /// The last job visited: `(priority, since, id)`.
    after: Option<(u32, Time, JobId)>,
    /// The epoch the lanes' answers were found at.
    epoch: Option<u64>,
    /// Each lane's first job after `after` that may act, once asked.
    next: Vec<Option<Option<PassKey>>>,
}

/// What [`T3d::bounds`] says.
struct Bounds {
    open: u64,
    reservation: Option<Option<u32>>,
    /// Started jobs with PEs earmarked: `(job, class, procs)`.
    marked: Vec<(JobId, usize, u32)>,
}

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
            loaded: BTreeMap::new(),
            swapping_in: BTreeSet::new(),
            loaded_procs: 0,
            loaded_by_class: vec![0; classes],
            loaded_large: 0,
            started_by_class: vec![0; classes],
            protection: Protection::new(classes),
            starts: 0,
            waiting: BTreeMap::new(),
            lanes: vec![Lane::default(); 2 * classes],
            joins: 0,
            held: HashSet::new(),
            refused: Vec::new(),
            wakes: BinaryHeap::new(),
            generation: 0,
            migration: true,
            earmarks: Vec::new(),
            pes_per_node: 1,
            disk_procs: 0,
            asked: BTreeSet::new(),
            tokens: BTreeMap::new(),
            next_token: 0,
            quanta: Vec::new(),
            preemptions: Vec::new(),
            epoch: 0,
            quiet: [None, None],
            quiet_serve: None,
            occupants: RefCell::new((None, Vec::new())),
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
                self.starts += 1;
                self.protection
                    .start(id, class, procs, end, self.starts, now);
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
        self.lanes[Self::lane_of(&w)].insert((w.since, w.req.id), w.req.procs, w.seq);
        self.wakes.push(Reverse((
            self.wake_of(&w),
            self.generation,
            w.req.id,
            w.seq,
        )));
        self.waiting.insert(w.req.id, w);
    }

    /// Takes a waiting job out (loaded, or ended).
    fn leave(&mut self, id: JobId) -> Option<Waiting> {
        let w = self.waiting.remove(&id)?;
        self.epoch += 1;
        self.lanes[Self::lane_of(&w)].remove(id);
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

    /// Brings the earmarked PEs of [`T3d::pe`] in line with `earmarks`: called after every
    /// change to them (it costs their runs, not the machine).
    fn remark(&mut self) {
        self.epoch += 1;
        self.pe.set_marks(self.earmarks.iter().map(|e| &e.pes));
    }

    /// Drops the earmarks `keep` refuses, updating the marks only if one went.
    fn retain_earmarks(&mut self, keep: impl FnMut(&Earmark) -> bool) {
        let before = self.earmarks.len();
        self.earmarks.retain(keep);
        if self.earmarks.len() != before {
            self.remark();
        }
    }

    /// Processors held by loaded and earmarked jobs: in total, of `class`, and of large jobs.
    fn usage(&self, class: usize) -> Usage {
        let mut u = Usage {
            total: self.loaded_procs,
            class: self.loaded_by_class[class],
            large: self.loaded_large,
        };
        for e in &self.earmarks {
            if let Some(w) = self.waiting.get(&e.job) {
                let p = w.req.procs as u64;
                u.total += p;
                if w.class == class {
                    u.class += p;
                }
                if w.req.procs >= self.cfg.large_job {
                    u.large += p;
                }
            }
        }
        u
    }

    /// The job, large-job, class and system limits. A limit smaller than the job itself only
    /// asks that the job runs alone in its category, so that no job waits forever.
    fn within_limits(&self, w: &Waiting) -> bool {
        let Usage {
            total,
            class: in_class,
            large,
        } = self.usage(w.class);
        let p = w.req.procs as u64;
        let disk = if w.on_disk {
            self.disk_procs - p
        } else {
            self.disk_procs
        };
        let fits =
            |used: u64, limit: u32| used + p <= limit as u64 || (used == 0 && p > limit as u64);
        p <= self.cfg.job_limit as u64
            && fits(in_class, self.class(w.class).proc_limit)
            && (w.req.procs < self.cfg.large_job || fits(large, self.cfg.large_limit))
            && fits(total + disk, self.cfg.system_limit)
    }

    /// The widest job of `class` (on disk or not) that [`T3d::within_limits`] may accept with
    /// this usage: each limit accepts every width up to some bound, or every width while
    /// nothing of its category is loaded. For a job on disk the system limit is no bound on
    /// its width (its own PEs already count): once the limit is exceeded it accepts only a
    /// job of exactly the processors counted, so this is an upper bound; whoever uses it
    /// still asks [`T3d::within_limits`].
    fn widest_within_limits(&self, class: usize, on_disk: bool) -> u64 {
        let Usage {
            total,
            class: in_class,
            large,
        } = self.usage(class);
        let room = |used: u64, limit: u32| {
            if used == 0 {
                u64::MAX
            } else {
                (limit as u64).saturating_sub(used)
            }
        };
        let in_class = room(in_class, self.class(class).proc_limit);
        // A job narrower than `large_job` is not a large one.
        let as_large =
            room(large, self.cfg.large_limit).max((self.cfg.large_job as u64).saturating_sub(1));
        let others = (self.cfg.job_limit as u64).min(in_class).min(as_large);
        let all = total + self.disk_procs;
        let in_system = match on_disk {
            false => room(all, self.cfg.system_limit),
            true if all <= self.cfg.system_limit as u64 => u64::MAX,
            // Over the limit already: only the job that is all of it may come back.
            true if all <= others => all,
            true => 0,
        };
        others.min(in_system)
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
        self.starts += 1;
        self.protection
            .start(id, class, procs, end, self.starts, now);
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

    /// Jobs that `w` may take PEs from, cheapest first: `(cost, job, dnd_end, procs)`.
    fn victims(&self, w: &Waiting, now: Time, first_pass: bool) -> Arc<Victims> {
        self.victims_of(self.class(w.class).priority, now, first_pass)
    }

    /// Jobs that a waiting job of priority `prio` may take PEs from, cheapest first.
    fn victims_of(&self, prio: u32, now: Time, first_pass: bool) -> Arc<Victims> {
        let key = (self.epoch, now, first_pass, prio);
        let mut cache = self.victim_cache.borrow_mut();
        if cache
            .first()
            .is_some_and(|(k, _)| (k.0, k.1) != (key.0, key.1))
        {
            cache.clear();
        }
        if let Some((_, v)) = cache.iter().find(|(k, _)| *k == key) {
            return v.clone();
        }
        let mut v: Vec<(u64, JobId, Time, u32)> = self
            .loaded
            .iter()
            .filter(|(_, l)| {
                let c = self.class(l.class);
                l.started
                    && c.preemptible
                    && if first_pass {
                        c.priority <= prio
                    } else {
                        c.priority < prio
                    }
                    && !self.pe.any_marked(&l.pes)
            })
            .filter_map(|(id, l)| {
                let dnd_end = self.dnd_end(l);
                if !first_pass && dnd_end > now {
                    return None;
                }
                let left = (dnd_end - now).max(Dur::ZERO).as_secs() as u64;
                let c = self.class(l.class);
                // Nodes taken, weighted by the victim's priority, plus its protected time left.
                Some((
                    l.req.procs as u64 * (1 + c.priority as u64) + left,
                    *id,
                    dnd_end,
                    l.req.procs,
                ))
            })
            .collect();
        // Jobs are unique: the order is (cost, job)'s.
        v.sort_unstable();
        let procs = v.iter().map(|v| u64::from(v.3)).sum();
        let v = Arc::new(Victims { list: v, procs });
        cache.push((key, v.clone()));
        v
    }

    /// Free PEs `w` may load on now, if enough: the lowest-numbered ones, or its own PEs when
    /// it must come back where it was.
    fn free_fit(&self, w: &Waiting) -> Option<PeSet> {
        match &w.home {
            None => (self.pe.open_count() >= w.req.procs).then(|| self.pe.lowest_open(w.req.procs)),
            Some(home) => self.pe.all_open(home).then(|| home.clone()),
        }
    }

    /// PEs for `w`: free ones first, then the fewest cheapest victims. `None` if not enough.
    fn assignment(&self, w: &Waiting, now: Time, first_pass: bool) -> Option<Assignment> {
        if let Some(home) = &w.home {
            return self.home_assignment(w, home, now, first_pass);
        }
        let need = w.req.procs as usize;
        let open = self.pe.open_count() as usize;
        if open >= need {
            return Some((self.pe.lowest_open(w.req.procs), Vec::new()));
        }
        let victims = self.victims(w, now, first_pass);
        if open as u64 + victims.procs < need as u64 {
            return None; // even every victim would not make room
        }
        let mut chosen = Vec::new();
        let mut have = open;
        for &(cost, id, dnd_end, procs) in &victims.list {
            if have >= need {
                break;
            }
            have += procs as usize;
            chosen.push((cost, id, dnd_end, procs));
        }
        if have < need {
            return None;
        }
        // Drop victims that turned out unnecessary, dearest first.
        for i in (0..chosen.len()).rev() {
            let p = chosen[i].3 as usize;
            if have - p >= need {
                have -= p;
                chosen.remove(i);
            }
        }
        // The lowest `need` PEs of the open ones and the victims', merged as runs.
        let mut runs: Vec<(u32, u32)> = self.pe.lowest_open(open as u32).runs().to_vec();
        for (_, id, _, _) in &chosen {
            runs.extend_from_slice(self.loaded[id].pes.runs());
        }
        runs.sort_unstable();
        let mut pes = PeSet::new();
        let mut left = need as u32;
        let mut reached = 0;
        for (s, e) in runs {
            let s = s.max(reached);
            if left == 0 || s >= e {
                continue;
            }
            let e = e.min(s + left);
            pes.push_sorted(s, e);
            left -= e - s;
            reached = e;
        }
        Some((pes, chosen.into_iter().map(|(_, id, d, _)| (id, d)).collect()))
    }

    /// The assignment of a job that must come back on `home`, its PEs before its preemption:
    /// every job on them must be a victim `w` may take PEs from.
    fn home_assignment(
        &self,
        w: &Waiting,
        home: &PeSet,
        now: Time,
        first_pass: bool,
    ) -> Option<Assignment> {
        if self.pe.any_marked_or_down(home) {
            return None;
        }
        let victims = self.victims(w, now, first_pass);
        let mut chosen: Vec<(JobId, Time)> = Vec::new();
        for &(s, e) in home.runs() {
            for (_, _, h) in self.pe.holders(s, e) {
                match h {
                    // Still swapping some job out: not yet.
                    Holder::Out(_) => return None,
                    Holder::Job(j) => {
                        if !chosen.iter().any(|c| c.0 == j) {
                            let &(_, _, dnd_end, _) = victims.list.iter().find(|v| v.1 == j)?;
                            chosen.push((j, dnd_end));
                        }
                    }
                }
            }
        }
        Some((home.clone(), chosen))
    }

    /// The jobs on earmark `i`'s PEs, in id order (kept while the PEs' holders and marks
    /// stay: [`PeMap::marks_version`]).
    fn occupants(&self, i: usize) -> Vec<JobId> {
        self.occupants_all()[i].clone()
    }

    /// Every earmark's [`T3d::occupants`], borrowed. A rebuild reuses the lists' buffers.
    fn occupants_all(&self) -> std::cell::Ref<'_, Vec<Vec<JobId>>> {
        {
            let mut cache = self.occupants.borrow_mut();
            if cache.0 != Some(self.pe.marks_version()) {
                let lists = &mut cache.1;
                lists.resize_with(self.earmarks.len(), Vec::new);
                for (v, e) in lists.iter_mut().zip(&self.earmarks) {
                    v.clear();
                    v.extend(
                        e.pes
                            .runs()
                            .iter()
                            .flat_map(|&(s, e)| self.pe.holders(s, e))
                            .filter_map(|(_, _, h)| match h {
                                Holder::Job(j) => Some(j),
                                Holder::Out(_) => None,
                            }),
                    );
                    v.sort_unstable();
                    v.dedup();
                }
                cache.0 = Some(self.pe.marks_version());
            }
        }
        std::cell::Ref::map(self.occupants.borrow(), |c| &c.1)
    }

    /// Preempts the loaded jobs on an earmark whose do-not-disturb time is up, and loads the
    /// earmarked job when all its PEs are free.
    ///
    /// A call that does nothing is followed by calls that do nothing until the epoch moves
    /// or time reaches the first occupant's do-not-disturb end (or, for one swapping in, its
    /// start), or the half year before one, when its timer can be asked for: those are not
    /// made ([`T3d::quiet_serve`]).
    fn serve_earmarks(&mut self, now: Time, out: &mut Vec<Decision>) {
        if self.earmarks.is_empty()
            || self
                .quiet_serve
                .is_some_and(|(epoch, until)| epoch == self.epoch && now < until)
        {
            return;
        }
        let epoch = self.epoch;
        let mut until = Time::MAX;
        let mut i = 0;
        while i < self.earmarks.len() {
            let e = self.earmarks[i].clone();
            let Some(class) = self.waiting.get(&e.job).map(|w| w.class) else {
                self.earmarks.remove(i);
                self.remark();
                continue;
            };
            let job = e.job;
            let occupants = self.occupants(i);
            let prio = self.class(class).priority;
            let blocked = occupants.iter().any(|v| {
                self.loaded.get(v).is_some_and(|l| {
                    let c = self.class(l.class);
                    !c.preemptible || c.priority > prio
                })
            });
            if blocked {
                // Never preempt for a job of a lower-priority class, nor a protected job.
                self.earmarks.remove(i);
                self.remark();
                continue;
            }
            for v in occupants {
                let Some(l) = self.loaded.get(&v) else {
                    continue;
                };
                let dnd_end = self.dnd_end(l);
                if l.started && dnd_end <= now {
                    self.preempt(v, job, class, now, out);
                } else {
                    let at = if l.started { dnd_end } else { l.ready_at };
                    // Its timer is asked for once it is within half a year.
                    let horizon = Dur::from_micros(config::YEAR.as_micros() / 2);
                    until = until.min(if at - now > horizon { at - horizon } else { at });
                    self.ask_timer(at, now, out);
                }
            }
            if self.pe.all_free(&e.pes) {
                self.load(job, e.pes, now, out);
                continue; // load() removed the earmark
            }
            i += 1;
        }
        if self.epoch == epoch {
            self.quiet_serve = Some((epoch, until));
        }
    }

    /// Waiting jobs not held and not earmarked, in (priority, waiting time) order.
    fn ordered(&self, filter: impl Fn(&Waiting) -> bool) -> Vec<JobId> {
        let mut v: Vec<&Waiting> = self
            .waiting
            .values()
            .filter(|w| {
                !self.held.contains(&w.req.id) && !self.earmarks.iter().any(|e| e.job == w.req.id)
            })
            .filter(|w| filter(w))
            .collect();
        v.sort_by_key(|w| (Reverse(self.class(w.class).priority), w.since, w.req.id));
        v.iter().map(|w| w.req.id).collect()
    }

    /// Whether debug builds check the lanes and timers against the plain walk now: while at
    /// most a few hundred jobs wait. The check is the plain walk itself, and over a whole
    /// trace's queue of thousands it would cost debug builds (the tests that run whole
    /// traces) what the lanes save; the runs that drive every rule on purpose (a few hundred
    /// jobs at most) are checked at every pass.
    #[cfg(debug_assertions)]
    fn checked(&self) -> bool {
        self.waiting.len() <= 256
    }

    #[cfg(debug_assertions)]
    fn overdue(&self, w: &Waiting, now: Time) -> bool {
        now - w.since >= self.class(w.class).wait
    }

    /// One pass over the waiting jobs (the overdue ones, or all) not held and not earmarked
    /// when it begins, in the order of [`T3d::ordered`]: each job in turn is loaded, given a
    /// reservation or PEs to be freed for it, or passed over.
    ///
    /// A pass is a function of the state and the time. One that did nothing is followed by
    /// passes that do nothing until the epoch moves or time crosses what the pass reads
    /// ([`T3d::pass_changes`]): those are not made.
    ///
    /// Most of a long queue can do nothing: a job needs its width in open PEs, or in open
    /// PEs and those of the jobs it may preempt, and within the limits. Each of these accepts
    /// every width up to a bound that depends on the job's class, so the pass asks each lane
    /// for its first job after the last one visited that is narrow enough
    /// ([`T3d::lane_next`]), visits the first of those in pass order with the same code that
    /// visits every job, and asks again only the lanes whose answer that visit changed; the
    /// jobs passed over would have done nothing. Debug builds check it: every job of the
    /// plain order that the lanes pass over is asked whether it would act ([`T3d::acts`]).
    fn pass(&mut self, pass: Pass, now: Time, out: &mut Vec<Decision>) {
        let kind = pass as usize;
        if self.quiet[kind].is_some_and(|(epoch, until)| epoch == self.epoch && now < until) {
            #[cfg(debug_assertions)]
            if self.checked() {
                for id in self.ordered(|w| pass == Pass::Rest || self.overdue(w, now)) {
                    assert!(
                        !self.acts(pass, id, now),
                        "{pass:?} pass at {now:?} skipped, but job {id} acts"
                    );
                }
            }
            return;
        }
        let epoch = self.epoch;
        // The buffers of the last pass, reused.
        let (mut next, mut marked) = std::mem::take(&mut self.pass_buffers);
        next.clear();
        next.resize(self.lanes.len(), None);
        marked.clear();
        marked.extend(self.earmarks.iter().map(|e| e.job));
        let mut cursor = Cursor {
            pass,
            joined_before: self.joins,
            marked,
            after: None,
            epoch: None,
            next,
        };
        #[cfg(debug_assertions)]
        let (plain, mut seen) = (
            self.checked()
                .then(|| self.ordered(|w| pass == Pass::Rest || self.overdue(w, now))),
            0,
        );
        loop {
            let found = self.next_in_pass(&mut cursor, now);
            #[cfg(debug_assertions)]
            if let Some(plain) = &plain {
                let upto = found.map_or(plain.len(), |(_, _, id)| {
                    seen + plain[seen..]
                        .iter()
                        .position(|&x| x == id)
                        .unwrap_or_else(|| {
                            panic!("{pass:?} pass at {now:?}: job {id} out of order")
                        })
                });
                for &id in &plain[seen..upto] {
                    assert!(
                        !self.acts(pass, id, now),
                        "{pass:?} pass at {now:?}: job {id} passed over, but it acts"
                    );
                }
                seen = upto + 1;
            }
            let Some((Reverse(prio), since, id)) = found else {
                break;
            };
            cursor.after = Some((prio, since, id));
            match pass {
                Pass::Overdue => self.visit_overdue(id, now, out),
                Pass::Rest => self.visit_rest(id, now, out),
            }
        }
        self.pass_buffers = (cursor.next, cursor.marked);
        if self.epoch == epoch {
            self.quiet[kind] = Some((epoch, self.pass_changes(pass, now)));
        }
    }

    /// When a pass that did nothing at `now` might do something with the state unchanged:
    /// when the next waiting job becomes overdue (the first pass), or the next started job's
    /// do-not-disturb time ends (the second).
    fn pass_changes(&self, pass: Pass, now: Time) -> Time {
        match pass {
            Pass::Overdue => (0..self.lanes.len())
                .filter_map(|l| {
                    let wait = self.class(l / 2).wait;
                    let since = self.lanes[l].first_since_after(now - wait)?;
                    Some(since + wait)
                })
                .min()
                .unwrap_or(Time::MAX),
            Pass::Rest => self.protection.next_end().unwrap_or(Time::MAX),
        }
    }

    /// The next job of the pass after the cursor that may act: the first in pass order of
    /// each lane's answer, asked again only for the lanes whose answer the cursor passed or
    /// since the state changed (the epoch moved).
    fn next_in_pass(&self, cursor: &mut Cursor, now: Time) -> Option<PassKey> {
        if cursor.epoch != Some(self.epoch) {
            cursor.epoch = Some(self.epoch);
            cursor.next.iter_mut().for_each(|n| *n = None);
        }
        let after = cursor
            .after
            .map(|(prio, since, id)| (Reverse(prio), since, id));
        let mut bounds: Option<Bounds> = None;
        let mut best: Option<PassKey> = None;
        for l in 0..self.lanes.len() {
            let stale = match cursor.next[l] {
                None => true,
                Some(found) => found.is_some_and(|k| after.is_some_and(|a| k <= a)),
            };
            if stale {
                let b = bounds.get_or_insert_with(|| self.bounds());
                cursor.next[l] = Some(self.lane_next(l, b, cursor, now));
            }
            if let Some(Some(k)) = cursor.next[l]
                && best.is_none_or(|b| k < b)
            {
                best = Some(k);
            }
        }
        best
    }

    /// What a waiting job of each class could get now, for the pass's bounds: open PEs, the
    /// reservation's holder (and its priority, if it waits), and the started jobs with PEs
    /// earmarked (which nobody may preempt).
    fn bounds(&self) -> Bounds {
        // Only sums are taken over these: their order does not count.
        let mut marked: Vec<(JobId, usize, u32)> = self
            .occupants_all()
            .iter()
            .flatten()
            .filter_map(|j| {
                let l = self.loaded.get(j)?;
                l.started.then_some((*j, l.class, l.req.procs))
            })
            .collect();
        if self.earmarks.len() > 1 {
            marked.sort_unstable_by_key(|m| m.0);
            marked.dedup_by_key(|m| m.0);
        }
        Bounds {
            open: self.pe.open_count() as u64,
            reservation: self.earmarks.iter().find(|e| e.reservation).map(|e| {
                self.waiting
                    .get(&e.job)
                    .map(|x| self.class(x.class).priority)
            }),
            marked,
        }
    }

    /// The processors of the jobs a waiting job of `class` may preempt in this pass: the
    /// started jobs of the preemptible classes of lower priority (or equal, in the first
    /// pass), whose do-not-disturb time is over (in the second), none of whose PEs is
    /// earmarked — [`T3d::victims_of`]'s, without a walk over the loaded jobs.
    fn victim_procs(&self, class: usize, pass: Pass, b: &Bounds, now: Time) -> u64 {
        let prio = self.class(class).priority;
        let first_pass = pass == Pass::Overdue;
        let may = |c: usize| {
            let cls = self.class(c);
            cls.preemptible && (cls.priority < prio || (first_pass && cls.priority == prio))
        };
        let counted = |c: usize| {
            if first_pass {
                self.started_by_class[c]
            } else {
                self.protection.over(c)
            }
        };
        let all: u64 = (0..self.cfg.classes.len())
            .filter(|&c| may(c))
            .map(counted)
            .sum();
        let marked: u64 = b
            .marked
            .iter()
            .filter(|&&(j, c, _)| may(c) && (first_pass || self.protection.is_over(j)))
            .map(|&(_, _, p)| u64::from(p))
            .sum();
        let procs = all - marked;
        debug_assert_eq!(procs, self.victims_of(prio, now, first_pass).procs);
        procs
    }

    /// Lane `l`'s first job after the cursor that is narrow enough to act in this pass and
    /// is the pass's (not held, not earmarked when the pass began, waiting since before it).
    fn lane_next(&self, l: usize, b: &Bounds, cursor: &Cursor, now: Time) -> Option<PassKey> {
        let lane = &self.lanes[l];
        if lane.is_empty() {
            return None;
        }
        let (class, on_disk) = (l / 2, l % 2 == 1);
        let cls = self.class(class);
        let prio = cls.priority;
        let mut from = match cursor.after {
            Some((p, ..)) if prio > p => return None,
            Some((p, since, id)) if prio == p => Some((since, id)),
            _ => None,
        };
        let job_limit = self.cfg.job_limit as u64;
        let widest = match cursor.pass {
            // Loads on open PEs; else, with no reservation of a class at least as urgent,
            // drops a lesser one, or takes it on open PEs and victims.
            Pass::Overdue => match b.reservation {
                Some(Some(h)) if h >= prio => job_limit.min(b.open),
                Some(_) => job_limit,
                None => job_limit.min(b.open + self.victim_procs(class, cursor.pass, b, now)),
            },
            Pass::Rest => self
                .widest_within_limits(class, on_disk)
                .min(b.open + self.victim_procs(class, cursor.pass, b, now)),
        };
        let bound = widest.min(u64::from(u32::MAX - 1)) as u32;
        let until = match cursor.pass {
            Pass::Overdue => Some(now - cls.wait),
            Pass::Rest => None,
        };
        while let Some(((since, id), joined)) = lane.first(from, until, bound) {
            let ours = joined < cursor.joined_before
                && (self.held.is_empty() || !self.held.contains(&id))
                && !cursor.marked.contains(&id);
            if ours {
                return Some((Reverse(prio), since, id));
            }
            from = Some((since, id));
        }
        None
    }

    /// Whether job `id` would do anything if the pass visited it now, without doing it: the
    /// check of debug builds on the jobs [`T3d::pass`] passes over.
    #[cfg(debug_assertions)]
    fn acts(&self, pass: Pass, id: JobId, now: Time) -> bool {
        let w = &self.waiting[&id];
        match pass {
            Pass::Overdue => {
                if w.req.procs > self.cfg.job_limit {
                    return false;
                }
                if self.free_fit(w).is_some() {
                    return true;
                }
                if let Some(e) = self.earmarks.iter().find(|e| e.reservation) {
                    let holder = self
                        .waiting
                        .get(&e.job)
                        .map(|x| self.class(x.class).priority);
                    // Passed over, or it drops the lesser reservation.
                    return holder.is_none_or(|p| p < self.class(w.class).priority);
                }
                self.assignment(w, now, true).is_some()
            }
            Pass::Rest => self.within_limits(w) && self.assignment(w, now, false).is_some(),
        }
    }

    /// First pass, one job past its maximum wait: loaded on free PEs, or given the one
    /// reservation (free PEs and those of jobs it may preempt) unless a job of a class at
    /// least as urgent holds it.
    fn visit_overdue(&mut self, id: JobId, now: Time, out: &mut Vec<Decision>) {
        let w = self.waiting[&id].clone();
        if w.req.procs > self.cfg.job_limit {
            return;
        }
        if let Some(pes) = self.free_fit(&w) {
            // Another compatible set is free: no need for the reservation.
            self.retain_earmarks(|e| !(e.reservation && e.job == id));
            self.load(id, pes, now, out);
            return;
        }
        let current = self.earmarks.iter().find(|e| e.reservation).map(|e| e.job);
        if let Some(holder) = current {
            let holder_prio = self
                .waiting
                .get(&holder)
                .map(|x| self.class(x.class).priority);
            if holder_prio.is_some_and(|p| p >= self.class(w.class).priority) {
                return; // one reservation at a time
            }
            self.retain_earmarks(|e| !e.reservation);
        }
        if let Some((pes, _victims)) = self.assignment(&w, now, true) {
            self.earmarks.push(Earmark {
                job: id,
                pes,
                reservation: true,
            });
            self.remark();
        }
    }

    /// Second pass, one job: within the limits, loaded on free PEs, or given PEs of jobs of
    /// a lesser class, which are preempted for it.
    fn visit_rest(&mut self, id: JobId, now: Time, out: &mut Vec<Decision>) {
        let w = self.waiting[&id].clone();
        if !self.within_limits(&w) {
            return;
        }
        let Some((pes, victims)) = self.assignment(&w, now, false) else {
            return;
        };
        if victims.is_empty() {
            self.load(id, pes, now, out);
        } else {
            for (v, _) in victims {
                self.preempt(v, id, w.class, now, out);
            }
            self.earmarks.push(Earmark {
                job: id,
                pes,
                reservation: false,
            });
            self.remark();
        }
    }

    fn schedule(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.day_or_night(now, out);
        self.protection.advance(now);
        // Swaps that are over: their PEs still swapping (not taken since) become free.
        if self.swaps.iter().any(|(t, _)| *t <= now) {
            let (over, going): (Vec<_>, Vec<_>) = std::mem::take(&mut self.swaps)
                .into_iter()
                .partition(|(t, _)| *t <= now);
            self.swaps = going;
            self.epoch += 1;
            for (_, pes) in over {
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
                self.starts += 1;
                self.protection
                    .start(id, class, procs, end, self.starts, now);
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
