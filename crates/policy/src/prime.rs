//! Prime/non-prime (`prime`), after the NASA Ames SP2 policy simplified in seed 002 §3.1.
//!
//! Space sharing, first come first served among the jobs allowed to start now. During prime
//! time a large job (more than `large_job` PEs, default 32) may start only if its estimate is
//! at most `prime_large_limit` (10 min); a small job only if its estimate is at most
//! `prime_large_limit`, or at most `prime_small_limit` (4 h) while at least `prime_free`
//! PEs (32) are free. Jobs not allowed wait for non-prime time, when every job may start.
//! The simulator fills the estimate with the exact runtime, as the seed assumes.
//!
//! When is prime time: `schedule = "alternate"` (the seed's simulation: prime and non-prime
//! alternate every `shift`, default 12 h, starting with prime at time 0) or `schedule =
//! "daily"` (prime from `prime_start` to `prime_end` each day, default 8h to 18h; `day_offset`
//! is the time of day at time 0; with `weekends = true`, days 5 and 6 after time 0's day, counted
//! as a Monday, are non-prime).

use std::collections::BTreeSet;
use std::ops::Bound::{Excluded, Unbounded};

use cosched_core::{Dur, JobId, Time};

use crate::opts::Opts;
use crate::queue::{Seen, SpaceShare};
use crate::{ConfigError, Decision, Event, JobRequest, Policy, PolicyConfig};

const DAY: i64 = 86_400_000_000;

/// When prime time is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrimeSchedule {
    /// Prime during even `shift`s from time 0, non-prime during odd ones.
    Alternate { shift: Dur },
    /// Prime between two times of day.
    Daily {
        start: Dur,
        end: Dur,
        day_offset: Dur,
        weekends: bool,
    },
}

impl PrimeSchedule {
    pub fn is_prime(&self, now: Time) -> bool {
        match *self {
            PrimeSchedule::Alternate { shift } => {
                now.as_micros().div_euclid(shift.as_micros()) % 2 == 0
            }
            PrimeSchedule::Daily {
                start,
                end,
                day_offset,
                weekends,
            } => {
                let t = now.as_micros() + day_offset.as_micros();
                let day = t.div_euclid(DAY);
                let tod = t.rem_euclid(DAY);
                if weekends && day.rem_euclid(7) >= 5 {
                    return false;
                }
                start.as_micros() <= tod && tod < end.as_micros()
            }
        }
    }

    /// The first instant after `now` at which prime time may begin or end.
    pub fn next_change(&self, now: Time) -> Time {
        match *self {
            PrimeSchedule::Alternate { shift } => {
                let s = shift.as_micros();
                Time::from_micros((now.as_micros().div_euclid(s) + 1) * s)
            }
            PrimeSchedule::Daily {
                start,
                end,
                day_offset,
                ..
            } => {
                let t = now.as_micros() + day_offset.as_micros();
                let day_start = t.div_euclid(DAY) * DAY;
                [0, DAY]
                    .into_iter()
                    .flat_map(|d| {
                        [
                            day_start + d + start.as_micros(),
                            day_start + d + end.as_micros(),
                        ]
                    })
                    .filter(|&c| c > t)
                    .min()
                    .map(|c| Time::from_micros(c - day_offset.as_micros()))
                    .expect("tomorrow's boundaries are in the future")
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct Prime {
    s: SpaceShare,
    schedule: PrimeSchedule,
    large_job: u32,
    large_limit: Dur,
    small_limit: Dur,
    free_needed: u32,
    /// The boundary timer pending, if any.
    pending: Option<(u64, Time)>,
    next_token: u64,
    /// Waiting jobs by what prime time allows them (see [`Prime::kind`]), each in queue
    /// order `(submit, id)`: a walk in prime time goes from one allowed job to the next
    /// without visiting the many that must wait for the night.
    by_kind: [BTreeSet<(Time, JobId)>; 3],
}

/// What prime time allows a job, by its size and estimate alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Short enough to start whenever it fits.
    Always = 0,
    /// A small job of moderate length: only while enough PEs are free.
    WhileFree = 1,
    /// Large or long: only in non-prime time.
    Never = 2,
}

impl Prime {
    pub fn new(cfg: &PolicyConfig) -> Result<Prime, ConfigError> {
        let o = Opts::new("prime", cfg);
        let kind = o.string("schedule", "alternate")?;
        // Both schedules' options are read (and checked) whichever is chosen, so that every
        // key of this policy is known to [`Opts::finish`].
        let shift = o.dur("shift", Dur::from_secs(12 * 3600))?;
        let start = o.dur("prime_start", Dur::from_secs(8 * 3600))?;
        let end = o.dur("prime_end", Dur::from_secs(18 * 3600))?;
        let day_offset = o.dur("day_offset", Dur::ZERO)?;
        let weekends = o.boolean("weekends", false)?;
        let schedule = match kind.as_str() {
            "alternate" => {
                if shift <= Dur::ZERO {
                    return Err(o.bad("shift", "must be positive"));
                }
                PrimeSchedule::Alternate { shift }
            }
            "daily" => {
                if !(start < end && end.as_micros() <= DAY) {
                    return Err(o.bad(
                        "prime_end",
                        "prime_start must come before prime_end, within one day",
                    ));
                }
                PrimeSchedule::Daily {
                    start,
                    end,
                    day_offset,
                    weekends,
                }
            }
            other => {
                return Err(o.bad(
                    "schedule",
                    format!("{other:?} is not one of alternate, daily"),
                ));
            }
        };
        let large_job = o.uint("large_job", 32)?;
        let large_limit = o.dur("prime_large_limit", Dur::from_secs(600))?;
        let small_limit = o.dur("prime_small_limit", Dur::from_secs(4 * 3600))?;
        let free_needed = o.uint("prime_free", 32)?;
        o.finish()?;
        Ok(Prime {
            s: SpaceShare::new(cfg),
            schedule,
            large_job,
            large_limit,
            small_limit,
            free_needed,
            pending: None,
            next_token: 0,
            by_kind: Default::default(),
        })
    }

    /// What prime time allows `job` ([`Prime::allowed`] by its size and estimate).
    fn kind(&self, job: &JobRequest) -> Kind {
        if job.estimate <= self.large_limit {
            Kind::Always
        } else if job.procs <= self.large_job && job.estimate <= self.small_limit {
            Kind::WhileFree
        } else {
            Kind::Never
        }
    }

    /// May `job` start at `now` with the PEs free now?
    pub fn allowed(&self, job: &JobRequest, now: Time) -> bool {
        if !self.schedule.is_prime(now) {
            return true;
        }
        match self.kind(job) {
            Kind::Always => true,
            Kind::WhileFree => self.s.pool.free_count() >= self.free_needed,
            Kind::Never => false,
        }
    }

    fn schedule_jobs(&mut self, now: Time, out: &mut Vec<Decision>) {
        let blocked = if self.schedule.is_prime(now) && !self.s.queue.any_held() {
            // Debug builds check the walk by kinds against the plain one (on short queues: a
            // copy of the policy each time).
            #[cfg(debug_assertions)]
            let plain = (self.s.queue.len() <= 64).then(|| {
                let (mut copy, mut o) = (self.clone(), Vec::new());
                let b = copy.walk(now, &mut o);
                (o, b)
            });
            #[cfg(debug_assertions)]
            let before = out.len();
            let blocked = self.walk_prime(now, out);
            #[cfg(debug_assertions)]
            if let Some((o, b)) = plain {
                assert_eq!(
                    (&out[before..], blocked),
                    (&o[..], b),
                    "prime walk at {now:?}"
                );
            }
            blocked
        } else {
            self.walk(now, out)
        };
        // Jobs held back by prime time are looked at again when it ends.
        if blocked && self.schedule.is_prime(now) {
            let at = self.schedule.next_change(now);
            if self.pending.is_none_or(|(_, t)| t != at) {
                self.next_token += 1;
                self.pending = Some((self.next_token, at));
                out.push(Decision::SetTimer {
                    at,
                    token: self.next_token,
                });
            }
        }
    }

    /// Starts, in queue order, every job allowed now until one does not fit; returns whether
    /// it passed over a job (held, or not allowed).
    fn walk(&mut self, now: Time, out: &mut Vec<Decision>) -> bool {
        let mut i = 0;
        let mut blocked = false;
        while i < self.s.queue.len() {
            let job = self.s.queue.get(i);
            if self.s.queue.is_held(job.id) || !self.allowed(job, now) {
                blocked = true;
                i += 1;
                continue;
            }
            if !self.s.start(now, i, out) {
                break;
            }
            self.leave(i);
        }
        blocked
    }

    /// [`Prime::walk`] in prime time with no job held: from one allowed job to the next in
    /// queue order (by kind), a job passed over being any of those between them that prime
    /// time does not allow.
    fn walk_prime(&mut self, now: Time, out: &mut Vec<Decision>) -> bool {
        let [always, while_free, never] = &self.by_kind;
        let mut blocked = false;
        let mut from = Unbounded;
        let mut started = Vec::new();
        loop {
            let free_ok = self.s.pool.free_count() >= self.free_needed;
            let next_always = always.range((from, Unbounded)).next().copied();
            let next_free = free_ok
                .then(|| while_free.range((from, Unbounded)).next().copied())
                .flatten();
            let next = match (next_always, next_free) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let to = next.map_or(Unbounded, Excluded);
            let passed = |set: &BTreeSet<(Time, JobId)>| set.range((from, to)).next().is_some();
            blocked |= passed(never) || (!free_ok && passed(while_free));
            let Some(key) = next else {
                break;
            };
            let i = self.s.queue.position(key).expect("a waiting job");
            if !self.s.start(now, i, out) {
                break;
            }
            let job = self.s.queue.remove(i);
            started.push((self.kind(&job), key));
            from = Excluded(key);
        }
        for (kind, key) in started {
            self.by_kind[kind as usize].remove(&key);
        }
        blocked
    }

    /// Takes the job at queue position `i` out (it started).
    fn leave(&mut self, i: usize) {
        let job = self.s.queue.remove(i);
        let kind = self.kind(&job);
        self.by_kind[kind as usize].remove(&(job.submit, job.id));
    }
}

impl Policy for Prime {
    fn places_by_node(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "prime"
    }

    fn observe(&mut self, _now: Time, event: Event) {
        match self.s.observe(event) {
            Seen::Timer(token) if self.pending.is_some_and(|(t, _)| t == token) => {
                self.pending = None;
            }
            Seen::Queued(at) => {
                let job = self.s.queue.get(at);
                let kind = self.kind(job);
                self.by_kind[kind as usize].insert((job.submit, job.id));
            }
            Seen::Withdrawn(job) => {
                let kind = self.kind(&job);
                self.by_kind[kind as usize].remove(&(job.submit, job.id));
            }
            _ => {}
        }
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.s.queue.reject_refused(out);
        self.schedule_jobs(now, out);
    }

    fn queue(&self) -> Vec<JobId> {
        self.s.queue.ids()
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}
