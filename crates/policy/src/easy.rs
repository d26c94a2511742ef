//! EASY backfilling (the Argonne SP1 scheduler): jobs start in queue order; when the queue
//! head does not fit, it gets a reservation at the earliest time enough PEs are expected to be
//! free (the "shadow time"), and later jobs may jump ahead if they fit now and do not delay
//! that reservation — they end by the shadow time, or use only PEs the head will not need
//! ("extra" PEs). Only the head is protected; other jobs may be delayed.
//!
//! Expected ends come from estimates ([`JobRequest::estimate`](crate::JobRequest::estimate)); a
//! job past its estimate is expected to end now.
//!
//! Other simulators' EASY are variants of it ([`variant`], `--opt variant=NAME`).

mod batsched;
mod pyss;
pub mod variant;

use cosched_core::{JobId, Time};

use crate::opts::Opts;
use crate::queue::{Seen, SpaceShare};
use crate::{ConfigError, Decision, Event, Policy, PolicyConfig};
use variant::{Blocked, Priority, Variant};

#[derive(Clone, Debug)]
pub struct Easy {
    s: SpaceShare,
    /// What the events of this instant call for at [`Policy::decide`].
    todo: Todo,
    /// The head's shadow time at the last backfilling pass, unless `shadow_due` is set.
    last_shadow: Time,
    /// The last backfilling pass, at this time, had no job that could use the free PEs, so it
    /// did not compute the head's reservation; [`Easy::last_shadow`] does if the next instant
    /// asks. Nothing it depends on can change in between: an instant that asks has seen only
    /// arrivals at the tail of the queue (anything else calls for a whole pass).
    shadow_due: Option<Time>,
    /// Queue positions started by a backfilling pass (kept to reuse the allocation).
    started: Vec<usize>,
    variant: Variant,
    /// The `accasim` variant's blocked head.
    blocked: Option<Blocked>,
    /// Decisions of the passes the `cqsim` variant ran while observing this instant.
    pending: Vec<Decision>,
    /// The jobs the `pybatsim` variant's passes chose at this instant, given PEs at
    /// [`Policy::decide`].
    chosen: Vec<crate::JobRequest>,
    /// The `batsched-easy-bf-fast` variant's head and its fixed shadow time.
    priority: Option<Priority>,
    /// `batsched-easy-bf-fast`: something other than a submission happened this instant.
    ended: bool,
    /// `batsched-easy-bf-fast`: the jobs submitted this instant, by queue key.
    arrived: Vec<(Time, JobId)>,
}

/// The work an instant leaves for [`Policy::decide`]. After a decision the head (if any) is
/// blocked, so an instant that only appends jobs to the queue needs only those jobs tried
/// against the head's reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Todo {
    Nothing,
    /// Only jobs from this queue position on are new, all appended behind a blocked head.
    BackfillFrom(usize),
    /// Anything else: start heads, then backfill the whole queue.
    Everything,
}

/// The queue head's reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// When the head is expected to start (`Time::MAX`: never, the machine is too small now).
    pub shadow: Time,
    /// PEs free at the shadow time beyond what the head needs.
    pub extra: u32,
}

impl Easy {
    pub fn new(cfg: &PolicyConfig) -> Result<Easy, ConfigError> {
        let o = Opts::new("easy", cfg);
        let variant = Variant::read(&o)?;
        o.finish()?;
        Ok(Easy {
            s: SpaceShare::new(cfg),
            todo: Todo::Nothing,
            last_shadow: Time::MAX,
            shadow_due: None,
            started: Vec::new(),
            variant,
            blocked: None,
            pending: Vec::new(),
            chosen: Vec::new(),
            priority: None,
            ended: false,
            arrived: Vec::new(),
        })
    }

    /// The reservation the queue head would get now, if there is a waiting head.
    pub fn reservation(&self, now: Time) -> Option<(JobId, Reservation)> {
        let head = self.s.queue.get(self.s.queue.head()?);
        Some((head.id, self.shadow(now, head.procs)))
    }

    /// The head's reservation. The extra PEs are all those free at the shadow time beyond
    /// the head's need, so every job expected to end at that time counts, not only those
    /// needed to reach it (jobs past their estimate all end "now").
    fn shadow(&self, now: Time, need: u32) -> Reservation {
        let mut avail = self.s.pool.free_count();
        if avail >= need {
            return Reservation {
                shadow: now,
                extra: avail - need,
            };
        }
        let mut shadow = Time::MAX;
        for (end, procs) in self.s.running.releases(now) {
            if end > shadow {
                break;
            }
            avail += procs;
            if avail >= need {
                shadow = end;
            }
        }
        if shadow == Time::MAX {
            return Reservation { shadow, extra: 0 };
        }
        Reservation {
            shadow,
            extra: avail - need,
        }
    }

    /// Starts heads while they fit, then backfills the rest of the queue.
    fn schedule(&mut self, now: Time, out: &mut Vec<Decision>) {
        while let Some(h) = self.s.queue.head() {
            if !self.s.start(now, h, out) {
                break;
            }
            self.s.queue.remove(h);
        }
        let Some(h) = self.s.queue.head() else { return };
        if self.variant == Variant::BatschedEasyBf {
            self.backfill_on_machines(now, h + 1, out);
        } else {
            self.backfill(now, h + 1, out);
        }
    }

    /// AccaSim's pass (see [`variant`]): the blocked head only at or after its slot, heads in
    /// order otherwise, then every later job that fits.
    fn accasim_pass(&mut self, now: Time, out: &mut Vec<Decision>) {
        let head_id = self.s.queue.head().map(|h| self.s.queue.get(h).id);
        if self.blocked.is_some_and(|b| Some(b.job) != head_id) {
            // The blocked job left the queue (cancelled or held).
            self.blocked = None;
        }
        let mut fill_from = None;
        if let Some(b) = self.blocked {
            let h = self.s.queue.head().expect("a blocked head is queued");
            if b.slot <= now && self.s.start(now, h, out) {
                self.s.queue.remove(h);
                self.blocked = None;
            } else {
                fill_from = Some(h + 1);
            }
        }
        if self.blocked.is_none() {
            while let Some(h) = self.s.queue.head() {
                if self.s.start(now, h, out) {
                    self.s.queue.remove(h);
                    continue;
                }
                let job = self.s.queue.get(h);
                let slot = self.shadow(now, job.procs).shadow;
                self.blocked = Some(Blocked { job: job.id, slot });
                fill_from = Some(h + 1);
                break;
            }
        }
        let Some(mut next) = fill_from else { return };
        let mut started = std::mem::take(&mut self.started);
        while let Some(k) = self.s.queue.next_fitting(next, self.s.pool.free_count()) {
            next = k + 1;
            if !self.s.queue.is_held(self.s.queue.get(k).id) && self.s.start(now, k, out) {
                started.push(k);
            }
        }
        self.s.queue.remove_all(&started);
        started.clear();
        self.started = started;
    }

    /// pybatsim's and CQSim's EASY: takes in one event and runs the pass it calls for at once
    /// (a job end always; a submission under CQSim always, under pybatsim when the new job
    /// fits in the free PEs, [`pyss`]), keeping the decisions for [`Policy::decide`].
    fn observe_and_pass(&mut self, now: Time, event: Event) {
        let pybatsim = self.variant == Variant::Pybatsim;
        let pass = match self.s.observe(event) {
            Seen::Refused => false,
            Seen::Queued(at) if pybatsim => self.pyss_fits(now, self.s.queue.get(at).procs),
            _ => true,
        };
        match (pass, pybatsim) {
            (false, _) => {}
            (true, true) => self.pyss_pass(now),
            (true, false) => {
                let mut out = std::mem::take(&mut self.pending);
                self.schedule(now, &mut out);
                self.pending = out;
            }
        }
    }

    /// The head's shadow time at the last backfilling pass, computed now if that pass did not
    /// need it.
    fn last_shadow(&mut self) -> Time {
        if let Some(at) = self.shadow_due.take() {
            let h = self
                .s
                .queue
                .head()
                .expect("a pass without a head leaves no shadow due");
            self.last_shadow = self.shadow(at, self.s.queue.get(h).procs).shadow;
        }
        self.last_shadow
    }

    /// The next waiting job from queue position `*next` on that is not held and fits in the
    /// free PEs (none once no PE is free), moving `*next` past it.
    fn next_candidate(&self, next: &mut usize) -> Option<usize> {
        loop {
            let free = self.s.pool.free_count();
            if free == 0 {
                return None;
            }
            let k = self.s.queue.next_fitting(*next, free)?;
            *next = k + 1;
            if !self.s.queue.is_held(self.s.queue.get(k).id) {
                return Some(k);
            }
        }
    }

    /// Tries the jobs at `from..` against the head's reservation. The reservation is computed
    /// at the first job that fits in the free PEs: on a busy machine most passes find none
    /// (or no PE free at all), and walking the running jobs for it was a fifth of the pass.
    fn backfill(&mut self, now: Time, from: usize, out: &mut Vec<Decision>) {
        let Some(h) = self.s.queue.head() else { return };
        let need = self.s.queue.get(h).procs;
        self.shadow_due = Some(now);
        let mut res: Option<Reservation> = None;
        let mut started = std::mem::take(&mut self.started);
        let mut next = from;
        while let Some(k) = self.next_candidate(&mut next) {
            let job = self.s.queue.get(k);
            let (procs, estimate) = (job.procs, job.estimate);
            if res.is_none() {
                let r = self.shadow(now, need);
                self.last_shadow = r.shadow;
                self.shadow_due = None;
                res = Some(r);
            }
            let Some(res) = res.as_mut() else { continue };
            let ends_in_time = res.shadow == Time::MAX || now + estimate <= res.shadow;
            if !ends_in_time && procs > res.extra {
                continue;
            }
            if self.s.start(now, k, out) {
                if !ends_in_time {
                    res.extra -= procs;
                }
                started.push(k);
            }
        }
        self.s.queue.remove_all(&started);
        started.clear();
        self.started = started;
    }
}

impl Policy for Easy {
    fn places_by_node(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "easy"
    }

    fn observe(&mut self, now: Time, event: Event) {
        if self.variant.passes_per_event() {
            self.observe_and_pass(now, event);
            return;
        }
        if self.variant == Variant::BatschedEasyBfFast {
            if let Event::Submitted(job) = &event {
                self.arrived.push((job.submit, job.id));
            } else {
                self.ended = true;
            }
        }
        let todo = match self.s.observe(event) {
            // A job joining the tail behind a blocked head needs only itself tried.
            Seen::Queued(at)
                if at == self.s.queue.len() - 1
                    && !self.s.queue.is_held(self.s.queue.get(at).id)
                    && self.s.queue.head().is_some_and(|h| h < at) =>
            {
                Todo::BackfillFrom(at)
            }
            Seen::Refused => Todo::Nothing,
            _ => Todo::Everything,
        };
        self.todo = match (self.todo, todo) {
            (Todo::Nothing, t) | (t, Todo::Nothing) => t,
            (Todo::BackfillFrom(k), Todo::BackfillFrom(_)) => Todo::BackfillFrom(k),
            _ => Todo::Everything,
        };
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.s.queue.reject_refused(out);
        if self.variant.passes_per_event() {
            self.pyss_start(now, out);
            out.append(&mut self.pending);
            return;
        }
        if self.variant == Variant::BatschedEasyBfFast {
            if std::mem::replace(&mut self.todo, Todo::Nothing) != Todo::Nothing {
                self.fast_pass(now, out);
            }
            return;
        }
        if self.variant == Variant::Accasim {
            if std::mem::replace(&mut self.todo, Todo::Nothing) != Todo::Nothing {
                self.accasim_pass(now, out);
            }
            return;
        }
        match std::mem::replace(&mut self.todo, Todo::Nothing) {
            Todo::Nothing => {}
            // The jobs before `k` were tried at the last pass and nothing freed PEs since; they
            // could only fit now if the shadow has come due, which moves the overrunning
            // jobs' expected ends (and so the extra PEs) to now.
            // With no PE free both ways do nothing; the pass only notes its time.
            // batsched tries only the new jobs when none ended, whatever the shadow.
            Todo::BackfillFrom(k) if self.variant == Variant::BatschedEasyBf => {
                self.backfill_on_machines(now, k, out)
            }
            Todo::BackfillFrom(k) if self.s.pool.free_count() == 0 || self.last_shadow() > now => {
                self.backfill(now, k, out)
            }
            Todo::BackfillFrom(_) => self.schedule(now, out),
            Todo::Everything => self.schedule(now, out),
        }
    }

    fn queue(&self) -> Vec<JobId> {
        self.s.queue.ids()
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{started, sub};
    use cosched_core::MachineShape;

    /// Seed 002, Figs. 1-2: 128 nodes, a 64-node job running; a 128-node job waits. A 32-node
    /// job may jump ahead only if it ends by the time the 64-node job is expected to end.
    #[test]
    fn fig1_small_job_backfills_only_if_short() {
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(128, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 64, 100), vec![1]);
        assert_eq!(sub(&mut p, 1, 2, 128, 50), Vec::<u64>::new());
        // Too long: would delay the 128-node job (reservation at 100, no extra PEs).
        assert_eq!(sub(&mut p, 2, 3, 32, 200), Vec::<u64>::new());
        // Short enough: ends at 92 <= 100.
        assert_eq!(sub(&mut p, 2, 4, 32, 90), vec![4]);
        assert_eq!(
            p.reservation(Time::from_secs(2)).unwrap(),
            (
                JobId(2),
                Reservation {
                    shadow: Time::from_secs(100),
                    extra: 0
                }
            )
        );
        let mut out = Vec::new();
        p.handle(Time::from_secs(92), Event::Ended(JobId(4)), &mut out);
        assert!(out.is_empty());
        p.handle(Time::from_secs(100), Event::Ended(JobId(1)), &mut out);
        assert_eq!(started(&out), vec![2]);
        assert_eq!(p.queue(), vec![JobId(3)]);
    }

    fn accasim(pes: u32) -> Easy {
        let mut cfg = PolicyConfig::new(MachineShape::flat(pes, 1));
        cfg.options
            .insert("variant".into(), toml::Value::String("accasim".into()));
        Easy::new(&cfg).unwrap()
    }

    /// AccaSim backfills every job that fits now: the head's reservation holds no PEs.
    #[test]
    fn accasim_variant_backfills_jobs_that_delay_the_head() {
        for (variant, starts) in [(Easy::new(&cfg10()).unwrap(), false), (accasim(10), true)] {
            let mut p = variant;
            assert_eq!(sub(&mut p, 0, 1, 6, 100), vec![1]);
            assert_eq!(sub(&mut p, 1, 2, 8, 10), Vec::<u64>::new());
            // 4 PEs for 1000 s: past the head's shadow (100) and more than its 2 extra PEs.
            let got = sub(&mut p, 2, 3, 4, 1000);
            assert_eq!(got == vec![3], starts, "{:?}: {got:?}", p.variant);
        }
    }

    /// AccaSim tries a blocked head again only from its slot on, even when it fits earlier.
    #[test]
    fn accasim_variant_retries_the_head_only_from_its_slot() {
        let mut p = accasim(10);
        assert_eq!(sub(&mut p, 0, 1, 6, 100), vec![1]);
        assert_eq!(sub(&mut p, 1, 2, 8, 10), Vec::<u64>::new());
        let mut out = Vec::new();
        // Job 1 ends at 10, far before its estimate: the head fits but its slot is 100.
        p.handle(Time::from_secs(10), Event::Ended(JobId(1)), &mut out);
        assert!(out.is_empty(), "{out:?}");
        // A job fitting beside it starts at once; the head waits for an instant at 100 or later.
        assert_eq!(sub(&mut p, 50, 3, 2, 30), vec![3]);
        // At 100 the head starts on 8 of the 8 free PEs (job 3 still holds 2); job 4 waits.
        assert_eq!(sub(&mut p, 100, 4, 1, 30), vec![2]);
        // The textbook EASY starts the head as soon as it fits.
        let mut e = Easy::new(&cfg10()).unwrap();
        sub(&mut e, 0, 1, 6, 100);
        sub(&mut e, 1, 2, 8, 10);
        let mut out = Vec::new();
        e.handle(Time::from_secs(10), Event::Ended(JobId(1)), &mut out);
        assert_eq!(started(&out), vec![2]);
    }

    /// Two jobs end at one instant. Once per instant (cosched) the head then fits and starts;
    /// after each event (pybatsim, CQSim) the first end alone leaves the head waiting, a short
    /// job backfills the freed PEs, and the head no longer fits after the second end.
    #[test]
    fn per_event_variants_backfill_between_two_ends_of_one_instant() {
        for (variant, want) in [
            ("cosched", vec![3]),
            ("pybatsim", vec![4]),
            ("cqsim", vec![4]),
        ] {
            let mut cfg = cfg10();
            cfg.options
                .insert("variant".into(), toml::Value::String(variant.into()));
            let mut p = Easy::new(&cfg).unwrap();
            assert_eq!(sub(&mut p, 0, 1, 4, 100), vec![1]);
            assert_eq!(sub(&mut p, 0, 2, 6, 100), vec![2]);
            assert_eq!(sub(&mut p, 1, 3, 10, 100), Vec::<u64>::new());
            // Ends at 90, before the head's shadow time (100).
            assert_eq!(sub(&mut p, 2, 4, 4, 40), Vec::<u64>::new());
            let (t, mut out) = (Time::from_secs(50), Vec::new());
            p.observe(t, Event::Ended(JobId(1)));
            p.observe(t, Event::Ended(JobId(2)));
            p.decide(t, &mut out);
            assert_eq!(started(&out), want, "{variant}");
        }
    }

    /// Jobs 1 and 2 reach their walltime at 100 together. pyss's snapshot frees both at the
    /// first completion, so that pass starts job 10 (6 PEs) and judges job 12 (2 PEs until
    /// 600) against the next head, job 11 (8 PEs, due at 150 with no extra PE): it waits.
    /// CQSim's pass after the first completion sees only 4 free PEs: job 10 waits, due now
    /// with 2 extra PEs, and job 12 takes them, delaying job 11. Once per instant (cosched)
    /// gives pyss's outcome here.
    #[test]
    fn pybatsim_variant_frees_every_job_at_its_walltime_at_the_first_completion() {
        for (variant, want) in [
            ("cosched", vec![10]),
            ("pybatsim", vec![10]),
            ("cqsim", vec![12, 10]),
        ] {
            let mut cfg = cfg10();
            cfg.options
                .insert("variant".into(), toml::Value::String(variant.into()));
            let mut p = Easy::new(&cfg).unwrap();
            assert_eq!(sub(&mut p, 0, 3, 2, 1000), vec![3]);
            assert_eq!(sub(&mut p, 0, 1, 4, 100), vec![1]);
            assert_eq!(sub(&mut p, 0, 2, 4, 100), vec![2]);
            assert_eq!(sub(&mut p, 1, 10, 6, 50), Vec::<u64>::new());
            assert_eq!(sub(&mut p, 2, 11, 8, 50), Vec::<u64>::new());
            assert_eq!(sub(&mut p, 3, 12, 2, 500), Vec::<u64>::new());
            let (t, mut out) = (Time::from_secs(100), Vec::new());
            p.observe(t, Event::Ended(JobId(1)));
            p.observe(t, Event::Ended(JobId(2)));
            p.decide(t, &mut out);
            assert_eq!(started(&out), want, "{variant}");
        }
    }

    #[test]
    fn unknown_variant_is_refused_with_the_known_ones() {
        let mut cfg = cfg10();
        cfg.options
            .insert("variant".into(), toml::Value::String("slurm".into()));
        let e = Easy::new(&cfg).unwrap_err().to_string();
        assert!(
            e.contains("unknown variant \"slurm\"") && e.contains("cosched, accasim"),
            "{e}"
        );
    }

    fn cfg10() -> PolicyConfig {
        PolicyConfig::new(MachineShape::flat(10, 1))
    }

    #[test]
    fn extra_pes_admit_long_jobs() {
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(10, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 6, 100), vec![1]);
        // Head needs 8: at 100 there will be 10 free, 2 extra.
        assert_eq!(sub(&mut p, 0, 2, 8, 10), Vec::<u64>::new());
        assert_eq!(sub(&mut p, 0, 3, 3, 1000), Vec::<u64>::new()); // 3 > 2 extra
        assert_eq!(sub(&mut p, 0, 4, 2, 1000), vec![4]); // uses the extra
        assert_eq!(sub(&mut p, 0, 5, 1, 1000), Vec::<u64>::new()); // extra used up
        assert_eq!(sub(&mut p, 0, 6, 1, 100), vec![6]); // ends by the shadow
    }

    #[test]
    fn overrunning_job_is_expected_to_end_now() {
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(10, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 10, 10), vec![1]);
        assert_eq!(sub(&mut p, 0, 2, 10, 10), Vec::<u64>::new());
        // At 50 job 1 is 40 s past its estimate: the head's reservation is now, so a job of
        // any length that would use its PEs may not start (none are free anyway).
        assert_eq!(
            p.reservation(Time::from_secs(50)).unwrap().1.shadow,
            Time::from_secs(50)
        );
    }

    #[test]
    fn cancelled_waiting_job_leaves_the_queue_and_held_head_is_skipped() {
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(4, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 4, 10), vec![1]);
        sub(&mut p, 0, 2, 4, 10);
        sub(&mut p, 0, 3, 2, 10);
        let mut out = Vec::new();
        p.handle(Time::from_secs(1), Event::Ended(JobId(2)), &mut out);
        assert_eq!(p.queue(), vec![JobId(3)]);
        p.handle(Time::from_secs(1), Event::Held(JobId(3)), &mut out);
        p.handle(Time::from_secs(10), Event::Ended(JobId(1)), &mut out);
        assert!(out.is_empty());
        p.handle(Time::from_secs(11), Event::Released(JobId(3)), &mut out);
        assert_eq!(started(&out), vec![3]);
    }
}
