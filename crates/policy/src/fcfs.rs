//! First come, first served: the queue head starts as soon as enough PEs are free; nothing
//! overtakes it. The reference policy the others are measured against.

use std::collections::{HashMap, HashSet, VecDeque};

use cosched_core::{JobId, PeSet, Time};

use crate::{Decision, Event, JobRequest, PePool, Policy, PolicyConfig};

#[derive(Clone, Debug)]
pub struct Fcfs {
    pool: PePool,
    /// Waiting jobs in arrival order (submit time, then id).
    queue: VecDeque<JobRequest>,
    running: HashMap<JobId, PeSet>,
    held: HashSet<JobId>,
}

impl Fcfs {
    pub fn new(cfg: &PolicyConfig) -> Fcfs {
        Fcfs {
            pool: PePool::new(cfg.machine),
            queue: VecDeque::new(),
            running: HashMap::new(),
            held: HashSet::new(),
        }
    }

    fn schedule(&mut self, out: &mut Vec<Decision>) {
        while let Some(head) = self.queue.iter().position(|j| !self.held.contains(&j.id)) {
            let Some(pes) = self.pool.allocate(self.queue[head].procs) else {
                break;
            };
            let job = self.queue.remove(head).expect("position is in range").id;
            self.running.insert(job, pes.clone());
            out.push(Decision::Start {
                job,
                pes,
                slot: None,
            });
        }
    }
}

impl Policy for Fcfs {
    fn name(&self) -> &str {
        "fcfs"
    }

    fn observe(&mut self, _now: Time, event: Event) {
        match event {
            Event::Submitted(job) => {
                // Keep (submit, id) order even if a driver delivers out of order.
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
            Event::Timer(_) => {}
        }
    }

    fn decide(&mut self, _now: Time, out: &mut Vec<Decision>) {
        self.schedule(out);
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
        let mut p = Fcfs::new(&PolicyConfig::new(MachineShape::flat(10, 1)));
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
        let mut p = Fcfs::new(&PolicyConfig::new(MachineShape::flat(4, 1)));
        let mut out = Vec::new();
        p.handle(Time::ZERO, Event::Held(JobId(1)), &mut out);
        p.handle(Time::ZERO, req(1, 0, 4), &mut out);
        assert!(out.is_empty());
        p.handle(Time::ZERO, Event::Released(JobId(1)), &mut out);
        assert_eq!(out.len(), 1);
    }
}
