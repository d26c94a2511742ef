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

use std::collections::{HashMap, HashSet, VecDeque};

use cosched_core::{Dur, JobId, PeSet, Time};

use crate::gang::opts::Opts;
use crate::{ConfigError, Decision, Event, JobRequest, PePool, Policy, PolicyConfig};

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
    pool: PePool,
    queue: VecDeque<JobRequest>,
    running: HashMap<JobId, PeSet>,
    held: HashSet<JobId>,
    schedule: PrimeSchedule,
    large_job: u32,
    large_limit: Dur,
    small_limit: Dur,
    free_needed: u32,
    /// The boundary timer pending, if any.
    pending: Option<(u64, Time)>,
    next_token: u64,
    /// Jobs that can never run, seen at this instant, with the reason.
    rejects: Vec<(JobId, String)>,
}

impl Prime {
    pub fn new(cfg: &PolicyConfig) -> Result<Prime, ConfigError> {
        let o = Opts::new("prime", cfg);
        let kind = o.string("schedule", "alternate")?;
        let schedule = match kind.as_str() {
            "alternate" => {
                let shift = o.dur("shift", Dur::from_secs(12 * 3600))?;
                if shift <= Dur::ZERO {
                    return Err(o.bad("shift", "must be positive"));
                }
                PrimeSchedule::Alternate { shift }
            }
            "daily" => {
                let start = o.dur("prime_start", Dur::from_secs(8 * 3600))?;
                let end = o.dur("prime_end", Dur::from_secs(18 * 3600))?;
                if !(start < end && end.as_micros() <= DAY) {
                    return Err(o.bad(
                        "prime_end",
                        "prime_start must come before prime_end, within one day",
                    ));
                }
                let day_offset = o.dur("day_offset", Dur::ZERO)?;
                PrimeSchedule::Daily {
                    start,
                    end,
                    day_offset,
                    weekends: o.boolean("weekends", false)?,
                }
            }
            other => {
                return Err(o.bad(
                    "schedule",
                    format!("{other:?} is not one of alternate, daily"),
                ));
            }
        };
        Ok(Prime {
            pool: PePool::new(cfg.machine),
            queue: VecDeque::new(),
            running: HashMap::new(),
            held: HashSet::new(),
            schedule,
            large_job: o.uint("large_job", 32)?,
            large_limit: o.dur("prime_large_limit", Dur::from_secs(600))?,
            small_limit: o.dur("prime_small_limit", Dur::from_secs(4 * 3600))?,
            free_needed: o.uint("prime_free", 32)?,
            pending: None,
            next_token: 0,
            rejects: Vec::new(),
        })
    }

    /// May `job` start at `now` with the PEs free now?
    pub fn allowed(&self, job: &JobRequest, now: Time) -> bool {
        if !self.schedule.is_prime(now) || job.estimate <= self.large_limit {
            return true;
        }
        job.procs <= self.large_job
            && job.estimate <= self.small_limit
            && self.pool.free_count() >= self.free_needed
    }

    fn schedule_jobs(&mut self, now: Time, out: &mut Vec<Decision>) {
        let mut i = 0;
        let mut blocked = false;
        while i < self.queue.len() {
            let job = &self.queue[i];
            if self.held.contains(&job.id) || !self.allowed(job, now) {
                blocked = true;
                i += 1;
                continue;
            }
            let Some(pes) = self.pool.allocate(job.procs) else {
                break;
            };
            let id = self.queue.remove(i).expect("index in range").id;
            self.running.insert(id, pes.clone());
            out.push(Decision::Start {
                job: id,
                pes,
                slot: None,
            });
        }
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
}

impl Policy for Prime {
    fn name(&self) -> &str {
        "prime"
    }

    fn observe(&mut self, _now: Time, event: Event) {
        match event {
            Event::Submitted(job) => {
                let total = self.pool.machine().total_pes();
                if job.procs == 0 || job.procs > total {
                    let why = format!("needs {} PEs; the machine has {total}", job.procs);
                    self.rejects.push((job.id, why));
                    return;
                }
                let key = (job.submit, job.id);
                let at = self.queue.partition_point(|j| (j.submit, j.id) <= key);
                self.queue.insert(at, job);
            }
            Event::Ended(id) => {
                if let Some(pes) = self.running.remove(&id) {
                    self.pool.release(&pes);
                } else {
                    self.queue.retain(|j| j.id != id);
                }
                self.held.remove(&id);
            }
            Event::Timer(token) => {
                if self.pending.is_some_and(|(t, _)| t == token) {
                    self.pending = None;
                }
            }
            Event::Running { job, pes, since: _ } => {
                if self.pool.take(&pes) {
                    self.running.insert(job.id, pes);
                }
            }
            Event::NodeDown(node) => self.pool.node_down(node),
            Event::NodeUp(node) => {
                let running = &self.running;
                self.pool
                    .node_up(node, |pe| running.values().any(|s| s.contains(pe)));
            }
            Event::Held(id) => {
                self.held.insert(id);
            }
            Event::Released(id) => {
                self.held.remove(&id);
            }
        }
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        for (job, why) in self.rejects.drain(..) {
            out.push(Decision::Reject {
                job,
                why: why.into(),
            });
        }
        self.schedule_jobs(now, out);
    }

    fn queue(&self) -> Vec<JobId> {
        self.queue.iter().map(|j| j.id).collect()
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}
