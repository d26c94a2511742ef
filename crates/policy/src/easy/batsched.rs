//! batsched's two EASY passes (Batsim's C++ schedulers; [`super::variant`] says what each
//! reads in batsched's source): `easy_bf` reserves specific machines for the head,
//! `easy_bf_fast` fixes the head's shadow time when the job becomes head.

use cosched_core::{PeId, PeSet, Time};

use super::Easy;
use super::variant::Priority;
use crate::Decision;

impl Easy {
    /// `easy_bf`'s backfilling of the jobs at `from..`: the head holds the lowest-numbered
    /// machines among those free by its shadow time; a job that would still run then may not
    /// take one of them and runs on the lowest-numbered unreserved free machines, one that
    /// ends by then takes the lowest-numbered free ones.
    pub(super) fn backfill_on_machines(&mut self, now: Time, from: usize, out: &mut Vec<Decision>) {
        let Some(h) = self.s.queue.head() else { return };
        let need = self.s.queue.get(h).procs;
        let shadow = self.shadow(now, need).shadow;
        let reserved = self.reserved_machines(now, shadow, need);
        let total = self.s.pool.machine().total_pes();
        let mut started = std::mem::take(&mut self.started);
        let mut next = from;
        while let Some(k) = self.next_candidate(&mut next) {
            let job = self.s.queue.get(k);
            let (id, procs, estimate) = (job.id, job.procs, job.estimate);
            if shadow == Time::MAX || now + estimate <= shadow {
                if self.s.start(now, k, out) {
                    started.push(k);
                }
                continue;
            }
            let pes: Vec<u32> = (0..total)
                .filter(|&pe| !reserved[pe as usize] && self.s.pool.is_free(PeId(pe)))
                .take(procs as usize)
                .collect();
            if pes.len() < procs as usize {
                continue;
            }
            let pes = PeSet::from_pes(pes);
            let taken = self.s.pool.take(&pes);
            debug_assert!(taken, "free PEs {pes} could not be taken");
            self.s.launch(now, id, procs, estimate, pes, out);
            started.push(k);
        }
        self.s.queue.remove_all(&started);
        started.clear();
        self.started = started;
    }

    /// The head's machines, by PE number: the `need` lowest-numbered PEs free by `shadow`
    /// (free now, or held by a job expected to end by then) — batsched's first fit for the
    /// head, whose earliest window starts at the shadow time since every other job in its
    /// schedule already runs. None when the head can never start (`shadow` is `Time::MAX`).
    fn reserved_machines(&self, now: Time, shadow: Time, need: u32) -> Vec<bool> {
        let total = self.s.pool.machine().total_pes() as usize;
        let mut by_shadow = vec![false; total];
        if shadow == Time::MAX {
            return by_shadow;
        }
        for (pe, free) in by_shadow.iter_mut().enumerate() {
            *free = self.s.pool.is_free(PeId(pe as u32));
        }
        for (end, run) in self.s.running.by_end() {
            if end.max(now) > shadow {
                break;
            }
            for pe in run.pes.iter() {
                by_shadow[pe.0 as usize] = true;
            }
        }
        let mut left = need;
        for free in by_shadow.iter_mut() {
            if left > 0 && *free {
                left -= 1;
            } else {
                *free = false;
            }
        }
        by_shadow
    }

    /// `easy_bf_fast`'s decision for an instant. When a job ended (or anything but
    /// submissions happened), the head starts if it fits, then the jobs behind it in order
    /// until one does not fit, which becomes the head with a shadow time computed now; then
    /// the older jobs that fit now and end by the head's shadow start. Then each job
    /// submitted at this instant, in order: it starts if it fits now and ends by the shadow
    /// time (or there is no head); one that does not fit becomes the head if there is none.
    pub(super) fn fast_pass(&mut self, now: Time, out: &mut Vec<Decision>) {
        let arrived = std::mem::take(&mut self.arrived);
        let fresh = arrived
            .iter()
            .filter(|&&key| self.s.queue.position(key).is_some())
            .count();
        let mut old = self.s.queue.len() - fresh;
        let head = self.s.queue.head().filter(|&h| h < old);
        // The head batsched knows is the one it was given; any other (a cancelled head's
        // successor, a released one) gets its shadow now.
        self.priority = head.map(|h| {
            let job = self.s.queue.get(h);
            match self.priority {
                Some(p) if p.job == job.id => p,
                _ => Priority {
                    job: job.id,
                    shadow: self.shadow(now, job.procs).shadow,
                },
            }
        });
        if std::mem::take(&mut self.ended) {
            if let Some(h) = head
                && self.s.start(now, h, out)
            {
                self.s.queue.remove(h);
                old -= 1;
                self.priority = None;
                while let Some(h) = self.s.queue.head().filter(|&h| h < old) {
                    if self.s.start(now, h, out) {
                        self.s.queue.remove(h);
                        old -= 1;
                        continue;
                    }
                    let job = self.s.queue.get(h);
                    self.priority = Some(Priority {
                        job: job.id,
                        shadow: self.shadow(now, job.procs).shadow,
                    });
                    break;
                }
            }
            if let Some(p) = self.priority {
                let h = self.s.queue.head().expect("a head has a queue");
                old -= self.fast_backfill(now, h + 1, old, p.shadow, out);
            }
        }
        // The submissions of this instant, behind the older jobs.
        let mut k = old;
        while k < self.s.queue.len() {
            let job = self.s.queue.get(k);
            if self.s.queue.is_held(job.id) {
                k += 1;
                continue;
            }
            let (id, procs, estimate) = (job.id, job.procs, job.estimate);
            if procs <= self.s.pool.free_count() {
                let in_time = self.priority.is_none_or(|p| now + estimate <= p.shadow);
                if in_time && self.s.start(now, k, out) {
                    self.s.queue.remove(k);
                    continue;
                }
            } else if self.priority.is_none() {
                self.priority = Some(Priority {
                    job: id,
                    shadow: self.shadow(now, procs).shadow,
                });
            }
            k += 1;
        }
    }

    /// Starts the jobs at `from..to` that fit now and end by `shadow`; returns how many.
    fn fast_backfill(
        &mut self,
        now: Time,
        from: usize,
        to: usize,
        shadow: Time,
        out: &mut Vec<Decision>,
    ) -> usize {
        let mut started = std::mem::take(&mut self.started);
        for k in from..to {
            let free = self.s.pool.free_count();
            if free == 0 {
                break;
            }
            let job = self.s.queue.get(k);
            if job.procs > free || self.s.queue.is_held(job.id) || now + job.estimate > shadow {
                continue;
            }
            if self.s.start(now, k, out) {
                started.push(k);
            }
        }
        let n = started.len();
        self.s.queue.remove_all(&started);
        started.clear();
        self.started = started;
        n
    }
}

#[cfg(test)]
mod tests {
    use cosched_core::{Dur, JobId, MachineShape, PeSet, Time};

    use crate::easy::Easy;
    use crate::testing::{started, sub};
    use crate::{Decision, Event, JobRequest, Policy, PolicyConfig};

    fn easy(pes: u32, variant: &str) -> Easy {
        let mut cfg = PolicyConfig::new(MachineShape::flat(pes, 1));
        cfg.options
            .insert("variant".into(), toml::Value::String(variant.into()));
        Easy::new(&cfg).unwrap()
    }

    /// Submits job `id` at `now` and returns the PEs of each job started.
    fn sub_pes(p: &mut Easy, now: i64, id: u64, procs: u32, est: i64) -> Vec<(u64, PeSet)> {
        let mut out = Vec::new();
        let req = JobRequest::new(JobId(id), Time::from_secs(now), procs, Dur::from_secs(est));
        p.handle(Time::from_secs(now), Event::Submitted(req), &mut out);
        out.into_iter()
            .filter_map(|d| match d {
                Decision::Start { job, pes, .. } => Some((job.0, pes)),
                _ => None,
            })
            .collect()
    }

    /// 10 PEs: job 1 on PEs 0-1 until 100, job 2 on 2-3 until 1000; the head (7 PEs) is due
    /// at 100 on the lowest seven of {0, 1, 4..9}, i.e. all but PE 9. A long 1-PE job runs on
    /// PE 9 under batsched's `easy_bf`, where the textbook EASY takes the lowest free PE, 4.
    #[test]
    fn batsched_easy_bf_runs_a_long_job_on_an_unreserved_machine() {
        for (variant, pe) in [("cosched", 4), ("batsched-easy-bf", 9)] {
            let mut p = easy(10, variant);
            sub(&mut p, 0, 1, 2, 100);
            sub(&mut p, 0, 2, 2, 1000);
            assert_eq!(sub(&mut p, 1, 3, 7, 10), Vec::<u64>::new());
            let got = sub_pes(&mut p, 2, 4, 1, 1000);
            assert_eq!(got, vec![(4, PeSet::contiguous(pe, 1))], "{variant}");
        }
    }

    /// 10 PEs: job 1 on 0-3 ends early at 10, job 2 holds 4-5 until 1000, job 3 holds 6-9
    /// until 100. The head (7 PEs) is due at 100 on {0..3, 6, 7, 8}; the one extra PE (9) is
    /// busy now. The textbook EASY counts it and starts a long 1-PE job on a free PE;
    /// batsched's `easy_bf` finds every free machine (0-3) reserved and does not.
    #[test]
    fn batsched_easy_bf_keeps_reserved_machines_from_long_jobs() {
        for (variant, starts) in [("cosched", true), ("batsched-easy-bf", false)] {
            let mut p = easy(10, variant);
            sub(&mut p, 0, 1, 4, 100);
            sub(&mut p, 0, 2, 2, 1000);
            sub(&mut p, 0, 3, 4, 100);
            let mut out = Vec::new();
            p.handle(Time::from_secs(10), Event::Ended(JobId(1)), &mut out);
            assert_eq!(sub(&mut p, 11, 4, 7, 10), Vec::<u64>::new());
            let got = sub(&mut p, 12, 5, 1, 1000);
            assert_eq!(got == vec![5], starts, "{variant}: {got:?}");
            // A short job may use a reserved machine: it is gone by the head's start.
            assert_eq!(sub(&mut p, 13, 6, 1, 50), vec![6], "{variant}");
        }
    }

    /// 10 PEs: the head (8 PEs) is due at 100 with 2 extra PEs. The textbook EASY starts a
    /// long 2-PE job on them; batsched's `easy_bf_fast` backfills only jobs that end by the
    /// shadow time.
    #[test]
    fn batsched_easy_bf_fast_backfills_only_jobs_ending_by_the_shadow() {
        for (variant, starts) in [("cosched", true), ("batsched-easy-bf-fast", false)] {
            let mut p = easy(10, variant);
            assert_eq!(sub(&mut p, 0, 1, 6, 100), vec![1]);
            assert_eq!(sub(&mut p, 1, 2, 8, 10), Vec::<u64>::new());
            let got = sub(&mut p, 2, 3, 2, 1000);
            assert_eq!(got == vec![3], starts, "{variant}: {got:?}");
            assert_eq!(sub(&mut p, 3, 4, 1, 90), vec![4], "{variant}");
        }
    }

    /// 10 PEs, 1 free: jobs of 3 PEs end at 50 (job 2), 100 (job 1) and 200 (job 3). The head
    /// (5 PEs) gets the shadow time 100. Job 3 ends early at 10: 4 PEs are free and the
    /// textbook EASY moves the shadow to 50, too soon for job 5 (4 PEs until 80, more than
    /// the 2 extra PEs); `easy_bf_fast` keeps 100 and starts job 5 — which delays the head.
    #[test]
    fn batsched_easy_bf_fast_keeps_the_shadow_the_head_was_given() {
        for (variant, starts) in [("cosched", false), ("batsched-easy-bf-fast", true)] {
            let mut p = easy(10, variant);
            sub(&mut p, 0, 1, 3, 100);
            sub(&mut p, 0, 2, 3, 50);
            sub(&mut p, 0, 3, 3, 200);
            assert_eq!(sub(&mut p, 1, 4, 5, 10), Vec::<u64>::new());
            assert_eq!(sub(&mut p, 2, 5, 4, 70), Vec::<u64>::new());
            let mut out = Vec::new();
            p.handle(Time::from_secs(10), Event::Ended(JobId(3)), &mut out);
            assert_eq!(started(&out) == vec![5], starts, "{variant}: {out:?}");
        }
    }

    /// Once the head starts, the next job that does not fit becomes head with a shadow time
    /// computed then, and jobs submitted while no job is waiting start if they fit.
    #[test]
    fn batsched_easy_bf_fast_hands_the_head_on() {
        let mut p = easy(10, "batsched-easy-bf-fast");
        assert_eq!(sub(&mut p, 0, 1, 6, 100), vec![1]);
        assert_eq!(sub(&mut p, 0, 2, 4, 300), vec![2]);
        assert_eq!(sub(&mut p, 1, 3, 8, 50), Vec::<u64>::new());
        assert_eq!(sub(&mut p, 2, 4, 6, 250), Vec::<u64>::new());
        let mut out = Vec::new();
        // Job 1 ends: the head (8) does not fit in the 6 free PEs; job 4 fits but would run
        // until 350, past the head's shadow time (300).
        p.handle(Time::from_secs(100), Event::Ended(JobId(1)), &mut out);
        assert!(started(&out).is_empty(), "{out:?}");
        // Job 2 ends: the head starts, job 4 (6 PEs, 2 free) becomes head, due at 350 when
        // job 3 is expected to end; a 2-PE job ending by then starts.
        p.handle(Time::from_secs(300), Event::Ended(JobId(2)), &mut out);
        assert_eq!(started(&out), vec![3]);
        assert_eq!(sub(&mut p, 301, 5, 2, 49), vec![5]);
        assert_eq!(sub(&mut p, 302, 6, 1, 49), Vec::<u64>::new(), "no PE free");
    }
}
