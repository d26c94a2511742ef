//! First come, first served: the queue head starts as soon as enough PEs are free; nothing
//! overtakes it. The reference policy the others are measured against.

use cosched_core::{JobId, Time};

use crate::opts::Opts;
use crate::queue::SpaceShare;
use crate::{ConfigError, Decision, Event, Policy, PolicyConfig};

#[derive(Clone, Debug)]
pub struct Fcfs {
    s: SpaceShare,
}

impl Fcfs {
    pub fn new(cfg: &PolicyConfig) -> Result<Fcfs, ConfigError> {
        Opts::new("fcfs", cfg).finish()?;
        Ok(Fcfs {
            s: SpaceShare::new(cfg),
        })
    }
}

impl Policy for Fcfs {
    fn places_by_node(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "fcfs"
    }

    fn observe(&mut self, _now: Time, event: Event) {
        self.s.observe(event);
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.s.queue.reject_refused(out);
        while let Some(head) = self.s.queue.head() {
            if !self.s.start(now, head, out) {
                break;
            }
            self.s.queue.remove(head);
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
    use crate::JobRequest;
    use cosched_core::{Dur, MachineShape};

    fn req(id: u64, t: i64, procs: u32) -> Event {
        Event::Submitted(JobRequest::new(
            JobId(id),
            Time::from_secs(t),
            procs,
            Dur::from_secs(100),
        ))
    }

    #[test]
    fn head_blocks_smaller_jobs_behind_it() {
        let mut p = Fcfs::new(&PolicyConfig::new(MachineShape::flat(10, 1))).unwrap();
        let mut out = Vec::new();
        p.handle(Time::ZERO, req(1, 0, 6), &mut out);
        p.handle(Time::ZERO, req(2, 0, 6), &mut out);
        p.handle(Time::ZERO, req(3, 0, 1), &mut out);
        assert_eq!(
            out.len(),
            1,
            "only job 1 fits; job 3 must not overtake job 2"
        );
        out.clear();
        p.handle(Time::from_secs(5), Event::Ended(JobId(1)), &mut out);
        let started: Vec<_> = out
            .iter()
            .map(|d| match d {
                Decision::Start { job, .. } => job.0,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(started, vec![2, 3]);
        assert_eq!(p.queue(), vec![]);
    }

    #[test]
    fn held_job_is_skipped_until_released() {
        let mut p = Fcfs::new(&PolicyConfig::new(MachineShape::flat(4, 1))).unwrap();
        let mut out = Vec::new();
        p.handle(Time::ZERO, Event::Held(JobId(1)), &mut out);
        p.handle(Time::ZERO, req(1, 0, 4), &mut out);
        assert!(out.is_empty());
        p.handle(Time::ZERO, Event::Released(JobId(1)), &mut out);
        assert_eq!(out.len(), 1);
    }
}
