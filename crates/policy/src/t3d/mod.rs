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
mod pes;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cosched_core::{Dur, JobId, PeSet, Time};

pub use config::{ClassParams, DayNight, T3dConfig};
use pes::{Holder, PeMap};

use crate::queue::{Queued, WaitQueue, never_fits};
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
}

impl Queued for Waiting {
    fn req(&self) -> &JobRequest {
        &self.req
    }
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
/// (`(cost, job, dnd_end)`), and their processors in total.
#[derive(Debug, Default)]
struct Victims {
    list: Vec<(u64, JobId, Time)>,
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
    /// Waiting jobs (new and preempted) with their holds; the order that counts is
    /// [`T3d::ordered`]'s.
    waiting: WaitQueue<Waiting>,
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
    /// Bumped whenever the loaded jobs or the earmarks change.
    epoch: u64,
    /// Victim lists computed at this epoch: every waiting job of one priority that does not
    /// fit in a pass shares one, instead of a walk over every loaded job each.
    victim_cache: RefCell<Vec<(VictimKey, Arc<Victims>)>>,
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
        T3d {
            cfg: cfg.set_at(Time::ZERO),
            full: cfg,
            is_day,
            pe: PeMap::new(pes),
            swaps: Vec::new(),
            loaded: BTreeMap::new(),
            waiting: WaitQueue::default(),
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
        }
        self.ask_timer(next, now, out);
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

    /// Processors held by loaded and earmarked jobs, in total, of one class, and of large jobs.
    fn usage(&self) -> (u64, Vec<u64>, u64) {
        let mut total = 0;
        let mut by_class = vec![0; self.cfg.classes.len()];
        let mut large = 0;
        let mut add = |req: &JobRequest, class: usize| {
            let p = req.procs as u64;
            total += p;
            by_class[class] += p;
            if req.procs >= self.cfg.large_job {
                large += p;
            }
        };
        for l in self.loaded.values() {
            add(&l.req, l.class);
        }
        for e in &self.earmarks {
            if let Some(w) = self.waiting.iter().find(|w| w.req.id == e.job) {
                add(&w.req, w.class);
            }
        }
        (total, by_class, large)
    }

    /// The job, large-job, class and system limits. A limit smaller than the job itself only
    /// asks that the job runs alone in its category, so that no job waits forever.
    fn within_limits(&self, w: &Waiting) -> bool {
        let (total, by_class, large) = self.usage();
        let p = w.req.procs as u64;
        let disk = if w.on_disk {
            self.disk_procs - p
        } else {
            self.disk_procs
        };
        let fits =
            |used: u64, limit: u32| used + p <= limit as u64 || (used == 0 && p > limit as u64);
        p <= self.cfg.job_limit as u64
            && fits(by_class[w.class], self.class(w.class).proc_limit)
            && (w.req.procs < self.cfg.large_job || fits(large, self.cfg.large_limit))
            && fits(total + disk, self.cfg.system_limit)
    }

    /// Loads waiting job `idx` on `pes`: it starts now, or after swapping in from disk.
    fn load(&mut self, idx: usize, set: PeSet, now: Time, out: &mut Vec<Decision>) {
        let w = self.waiting.remove(idx);
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
        let id = w.req.id;
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
            self.start_ready(id, out);
        } else {
            self.ask_timer(ready_at, now, out);
        }
    }

    fn start_ready(&mut self, id: JobId, out: &mut Vec<Decision>) {
        let l = self.loaded.get_mut(&id).expect("loaded");
        l.started = true;
        self.epoch += 1;
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
        self.waiting.insert(Waiting {
            req: l.req,
            class: l.class,
            since: now,
            on_disk: true,
            home,
        });
    }

    /// Jobs that `w` may take PEs from, cheapest first: `(cost, job, dnd_end)`.
    fn victims(&self, w: &Waiting, now: Time, first_pass: bool) -> Arc<Victims> {
        let prio = self.class(w.class).priority;
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
        let mut v: Vec<(u64, JobId, Time)> = self
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
                ))
            })
            .collect();
        v.sort();
        let procs = v
            .iter()
            .map(|&(_, id, _)| self.loaded[&id].req.procs as u64)
            .sum();
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
        for &(cost, id, dnd_end) in &victims.list {
            if have >= need {
                break;
            }
            have += self.loaded[&id].req.procs as usize;
            chosen.push((cost, id, dnd_end));
        }
        if have < need {
            return None;
        }
        // Drop victims that turned out unnecessary, dearest first.
        for i in (0..chosen.len()).rev() {
            let p = self.loaded[&chosen[i].1].req.procs as usize;
            if have - p >= need {
                have -= p;
                chosen.remove(i);
            }
        }
        // The lowest `need` PEs of the open ones and the victims', merged as runs.
        let mut runs: Vec<(u32, u32)> = self.pe.lowest_open(open as u32).runs().to_vec();
        for (_, id, _) in &chosen {
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
        Some((pes, chosen.into_iter().map(|(_, id, d)| (id, d)).collect()))
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
                            let &(_, _, dnd_end) = victims.list.iter().find(|v| v.1 == j)?;
                            chosen.push((j, dnd_end));
                        }
                    }
                }
            }
        }
        Some((home.clone(), chosen))
    }

    /// Preempts the loaded jobs on an earmark whose do-not-disturb time is up, and loads the
    /// earmarked job when all its PEs are free.
    fn serve_earmarks(&mut self, now: Time, out: &mut Vec<Decision>) {
        let mut i = 0;
        while i < self.earmarks.len() {
            let e = self.earmarks[i].clone();
            let Some(widx) = self.waiting.iter().position(|w| w.req.id == e.job) else {
                self.earmarks.remove(i);
                self.remark();
                continue;
            };
            let (job, class) = (self.waiting.get(widx).req.id, self.waiting.get(widx).class);
            let occupants: BTreeSet<JobId> = e
                .pes
                .runs()
                .iter()
                .flat_map(|&(s, e)| self.pe.holders(s, e))
                .filter_map(|(_, _, h)| match h {
                    Holder::Job(j) => Some(j),
                    Holder::Out(_) => None,
                })
                .collect();
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
                    self.ask_timer(at, now, out);
                }
            }
            if self.pe.all_free(&e.pes) {
                let widx = self
                    .waiting
                    .iter()
                    .position(|w| w.req.id == job)
                    .expect("still waiting");
                self.load(widx, e.pes, now, out);
                continue; // load() removed the earmark
            }
            i += 1;
        }
    }

    /// Waiting jobs not held and not earmarked, in (priority, waiting time) order.
    fn ordered(&self, filter: impl Fn(&Waiting) -> bool) -> Vec<JobId> {
        let mut v: Vec<&Waiting> = self
            .waiting
            .iter()
            .filter(|w| {
                !self.waiting.is_held(w.req.id) && !self.earmarks.iter().any(|e| e.job == w.req.id)
            })
            .filter(|w| filter(w))
            .collect();
        v.sort_by_key(|w| {
            (
                std::cmp::Reverse(self.class(w.class).priority),
                w.since,
                w.req.id,
            )
        });
        v.iter().map(|w| w.req.id).collect()
    }

    fn widx(&self, id: JobId) -> usize {
        self.waiting
            .iter()
            .position(|w| w.req.id == id)
            .expect("waiting job")
    }

    fn schedule(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.day_or_night(now, out);
        // Swaps that are over: their PEs still swapping (not taken since) become free.
        if self.swaps.iter().any(|(t, _)| *t <= now) {
            let (over, going): (Vec<_>, Vec<_>) = std::mem::take(&mut self.swaps)
                .into_iter()
                .partition(|(t, _)| *t <= now);
            self.swaps = going;
            for (_, pes) in over {
                self.pe
                    .free_where(&pes, |h| matches!(h, Holder::Out(t) if t <= now));
            }
        }
        let ready: Vec<JobId> = self
            .loaded
            .iter()
            .filter(|(_, l)| !l.started && l.ready_at <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            self.start_ready(id, out);
        }

        // First pass: jobs past their maximum wait.
        let overdue = self.ordered(|w| now - w.since >= self.class(w.class).wait);
        for id in overdue {
            let w = self.waiting.get(self.widx(id)).clone();
            if w.req.procs > self.cfg.job_limit {
                continue;
            }
            if let Some(pes) = self.free_fit(&w) {
                // Another compatible set is free: no need for the reservation.
                self.retain_earmarks(|e| !(e.reservation && e.job == id));
                let idx = self.widx(id);
                self.load(idx, pes, now, out);
                continue;
            }
            let current = self.earmarks.iter().find(|e| e.reservation).map(|e| e.job);
            if let Some(holder) = current {
                let holder_prio = self
                    .waiting
                    .iter()
                    .find(|x| x.req.id == holder)
                    .map(|x| self.class(x.class).priority);
                if holder_prio.is_some_and(|p| p >= self.class(w.class).priority) {
                    continue; // one reservation at a time
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
        self.serve_earmarks(now, out);

        // Second pass: everything else that fits the limits.
        for id in self.ordered(|_| true) {
            let idx = self.widx(id);
            let w = self.waiting.get(idx).clone();
            if !self.within_limits(&w) {
                continue;
            }
            let Some((pes, victims)) = self.assignment(&w, now, false) else {
                continue;
            };
            if victims.is_empty() {
                self.load(idx, pes, now, out);
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
        self.serve_earmarks(now, out);

        // Wake up when a waiting job becomes overdue.
        let wakes: Vec<Time> = self
            .waiting
            .iter()
            .map(|w| w.since + self.class(w.class).wait)
            .collect();
        for at in wakes {
            self.ask_timer(at, now, out);
        }
    }

    fn forget(&mut self, id: JobId, now: Time) {
        if let Some(l) = self.loaded.remove(&id) {
            self.epoch += 1;
            self.pe.free_where(&l.pes, |h| h == Holder::Job(id));
            if l.started {
                self.quanta.push(Quantum {
                    job: id,
                    procs: l.req.procs,
                    class: l.class,
                    start: l.ready_at,
                    end: now,
                    preempted: false,
                });
            }
        }
        if let Some(w) = self.waiting.end(id)
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
                    self.waiting.refuse(req.id, why);
                    return;
                }
                let class = self.cfg.class_of(&req);
                self.waiting.insert(Waiting {
                    since: req.submit.max(Time::ZERO).min(now),
                    req,
                    class,
                    on_disk: false,
                    home: None,
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
                self.loaded.insert(
                    job.id,
                    Loaded {
                        req: job,
                        class,
                        pes,
                        ready_at: since,
                        started: true,
                    },
                );
            }
            // Jobs on a failed node are ended by the driver; its PEs are not used until it is up.
            Event::NodeDown(node) | Event::NodeUp(node) => {
                let per = self.pes_per_node;
                self.pe.set_down(node.0 * per, (node.0 + 1) * per, !node_up);
                let (pe, before) = (&self.pe, self.earmarks.len());
                self.earmarks.retain(|e| !pe.any_down(&e.pes));
                if self.earmarks.len() != before {
                    self.remark();
                }
            }
            Event::Held(id) => self.waiting.hold(id),
            Event::Released(id) => self.waiting.release(id),
        }
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.waiting.reject_refused(out);
        self.schedule(now, out);
    }

    fn queue(&self) -> Vec<JobId> {
        self.ordered(|_| true)
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}
