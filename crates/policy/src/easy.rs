//! EASY backfilling (the Argonne SP1 scheduler): jobs start in queue order; when the queue
//! head does not fit, it gets a reservation at the earliest time enough PEs are expected to be
//! free (the "shadow time"), and later jobs may jump ahead if they fit now and do not delay
//! that reservation — they end by the shadow time, or use only PEs the head will not need
//! ("extra" PEs). Only the head is protected; other jobs may be delayed.
//!
//! Expected ends come from estimates ([`JobRequest::estimate`]); a job past its estimate is
//! expected to end now.

use std::collections::HashSet;

use cosched_core::{JobId, Time};

use crate::profile::{Run, RunningSet};
use crate::{Decision, Event, JobRequest, PePool, Policy, PolicyConfig};

#[derive(Clone, Debug)]
pub struct Easy {
    pool: PePool,
    /// Waiting jobs by (submit, id).
    queue: Vec<JobRequest>,
    running: RunningSet,
    held: HashSet<JobId>,
    /// What the events of this instant call for at [`Policy::decide`].
    todo: Todo,
    /// The head's shadow time at the last backfilling pass.
    last_shadow: Time,
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
    pub fn new(cfg: &PolicyConfig) -> Easy {
        Easy {
            pool: PePool::new(cfg.machine),
            queue: Vec::new(),
            running: RunningSet::default(),
            held: HashSet::new(),
            todo: Todo::Nothing,
            last_shadow: Time::MAX,
        }
    }

    fn head(&self) -> Option<usize> {
        if self.held.is_empty() {
            return if self.queue.is_empty() { None } else { Some(0) };
        }
        self.queue.iter().position(|j| !self.held.contains(&j.id))
    }

    /// The reservation the queue head would get now, if there is a waiting head.
    pub fn reservation(&self, now: Time) -> Option<(JobId, Reservation)> {
        let head = &self.queue[self.head()?];
        Some((head.id, self.shadow(now, head.procs)))
    }

    /// The head's reservation. The extra PEs are all those free at the shadow time beyond
    /// the head's need, so every job expected to end at that time counts, not only those
    /// needed to reach it (jobs past their estimate all end "now").
    fn shadow(&self, now: Time, need: u32) -> Reservation {
        let mut avail = self.pool.free_count();
        if avail >= need {
            return Reservation {
                shadow: now,
                extra: avail - need,
            };
        }
        let mut shadow = Time::MAX;
        for (end, procs) in self.running.releases(now) {
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

    fn start(&mut self, now: Time, job: &JobRequest, out: &mut Vec<Decision>) -> bool {
        let Some(pes) = self.pool.allocate(job.procs) else {
            return false;
        };
        let expected_end = now + job.estimate;
        self.running.insert(
            job.id,
            Run {
                pes: pes.clone(),
                procs: job.procs,
                expected_end,
            },
        );
        out.push(Decision::Start {
            job: job.id,
            pes,
            slot: None,
        });
        true
    }

    /// Starts heads while they fit, then backfills the rest of the queue.
    fn schedule(&mut self, now: Time, out: &mut Vec<Decision>) {
        while let Some(h) = self.head() {
            let job = self.queue[h].clone();
            if !self.start(now, &job, out) {
                break;
            }
            self.queue.remove(h);
        }
        let Some(h) = self.head() else { return };
        self.backfill(now, h + 1, out);
    }

    /// Tries the jobs at `from..` against the head's reservation.
    fn backfill(&mut self, now: Time, from: usize, out: &mut Vec<Decision>) {
        let Some(h) = self.head() else { return };
        let mut res = self.shadow(now, self.queue[h].procs);
        self.last_shadow = res.shadow;
        let mut started = Vec::new();
        for k in from..self.queue.len() {
            let free = self.pool.free_count();
            if free == 0 {
                break;
            }
            let job = &self.queue[k];
            if job.procs > free || self.held.contains(&job.id) {
                continue;
            }
            let ends_in_time = res.shadow == Time::MAX || now + job.estimate <= res.shadow;
            if !ends_in_time && job.procs > res.extra {
                continue;
            }
            let job = job.clone();
            if self.start(now, &job, out) {
                if !ends_in_time {
                    res.extra -= job.procs;
                }
                started.push(k);
            }
        }
        if !started.is_empty() {
            let mut next = started.into_iter().peekable();
            let mut k = 0;
            self.queue.retain(|_| {
                let drop = next.peek() == Some(&k);
                if drop {
                    next.next();
                }
                k += 1;
                !drop
            });
        }
    }
}

impl Policy for Easy {
    fn name(&self) -> &str {
        "easy"
    }

    fn observe(&mut self, _now: Time, event: Event) {
        let mut todo = Todo::Everything;
        match event {
            Event::Submitted(job) => {
                let key = (job.submit, job.id);
                let at = self.queue.partition_point(|j| (j.submit, j.id) <= key);
                let head_waits = self.head().is_some();
                self.queue.insert(at, job);
                if head_waits
                    && at == self.queue.len() - 1
                    && !self.held.contains(&self.queue[at].id)
                {
                    todo = Todo::BackfillFrom(at);
                }
            }
            Event::Ended(id) => {
                if let Some(run) = self.running.remove(id) {
                    self.pool.release(&run.pes);
                } else {
                    self.queue.retain(|j| j.id != id);
                }
                self.held.remove(&id);
            }
            Event::Running { job, pes, since } => {
                if self.pool.take(&pes) {
                    let expected_end = since + job.estimate;
                    self.running.insert(
                        job.id,
                        Run {
                            pes,
                            procs: job.procs,
                            expected_end,
                        },
                    );
                }
            }
            Event::NodeDown(node) => self.pool.node_down(node),
            Event::NodeUp(node) => {
                let running = &self.running;
                self.pool.node_up(node, |pe| running.holds(pe));
            }
            Event::Held(id) => {
                self.held.insert(id);
            }
            Event::Released(id) => {
                self.held.remove(&id);
            }
            Event::Timer(_) => {}
        }
        self.todo = match (self.todo, todo) {
            (Todo::Nothing, t) => t,
            (Todo::BackfillFrom(k), Todo::BackfillFrom(_)) => Todo::BackfillFrom(k),
            _ => Todo::Everything,
        };
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        match std::mem::replace(&mut self.todo, Todo::Nothing) {
            Todo::Nothing => {}
            // The jobs before `k` were tried at the last pass and nothing freed PEs since; they
            // could only fit now if the shadow has come due, which moves the overrunning
            // jobs' expected ends (and so the extra PEs) to now.
            Todo::BackfillFrom(k) if self.last_shadow > now => self.backfill(now, k, out),
            Todo::BackfillFrom(_) => self.schedule(now, out),
            Todo::Everything => self.schedule(now, out),
        }
    }

    fn queue(&self) -> Vec<JobId> {
        self.queue.iter().map(|j| j.id).collect()
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{Dur, MachineShape};

    fn sub(p: &mut Easy, now: i64, id: u64, procs: u32, est: i64) -> Vec<u64> {
        let mut out = Vec::new();
        let req = JobRequest::new(JobId(id), Time::from_secs(now), procs, Dur::from_secs(est));
        p.handle(Time::from_secs(now), Event::Submitted(req), &mut out);
        started(&out)
    }
    fn started(out: &[Decision]) -> Vec<u64> {
        out.iter()
            .map(|d| match d {
                Decision::Start { job, .. } => job.0,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    /// Seed 002, Figs. 1-2: 128 nodes, a 64-node job running; a 128-node job waits. A 32-node
    /// job may jump ahead only if it ends by the time the 64-node job is expected to end.
    #[test]
    fn fig1_small_job_backfills_only_if_short() {
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(128, 1)));
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

    #[test]
    fn extra_pes_admit_long_jobs() {
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(10, 1)));
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
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(10, 1)));
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
        let mut p = Easy::new(&PolicyConfig::new(MachineShape::flat(4, 1)));
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
