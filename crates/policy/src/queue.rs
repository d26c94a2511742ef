//! The plumbing every queue-based policy shares, written once so that each policy file keeps
//! only its rule.
//!
//! - [`WaitQueue`]: waiting jobs in (submit, id) order, the holds on them, and the
//!   submissions refused because they can never run (rejected at the next decision).
//! - [`SpaceShare`]: for the space-sharing policies (fcfs, easy, conservative, prime) the
//!   queue plus the free PEs ([`PePool`]) and the running jobs ([`RunningSet`]), with the
//!   handling of every event those policies treat alike: submissions, ends, the `Running`
//!   hello of a restarted machine manager, nodes going down and up, holds and releases.
//!   [`SpaceShare::observe`] says what an event did ([`Seen`]), so a policy reacts only where
//!   its rule cares.
//!
//! "Never" (a [`Decision::Reject`]) means never on the whole machine as configured: a job
//! larger than the machine, or asking for no PE. A job larger than what is *usable* now
//! (nodes down) only waits, since the nodes may come back; the driver reports it unfinished
//! if they never do.

use std::collections::{HashSet, VecDeque};

use cosched_core::{JobId, MachineShape, PeSet, Time};

use crate::profile::{Run, RunningSet};
use crate::{Decision, Event, JobRequest, Never, PePool, PolicyConfig};

/// An entry of a [`WaitQueue`]: the request plus whatever a policy keeps per waiting job.
/// [`SpaceShare`] also makes entries from submissions, with `From<JobRequest>`.
pub trait Queued {
    fn req(&self) -> &JobRequest;
}

impl Queued for JobRequest {
    fn req(&self) -> &JobRequest {
        self
    }
}

/// Why a job can never run on a machine of `total_pes` PEs, if it cannot.
pub fn never_fits(req: &JobRequest, total_pes: u32) -> Option<Never> {
    if req.procs == 0 {
        Some(Never::NoPes)
    } else if req.procs > total_pes {
        Some(Never::TooLarge {
            procs: req.procs,
            machine: total_pes,
        })
    } else {
        None
    }
}

/// Why a job's [`crate::Spread`] can never be met on `machine`, if it has one that cannot.
pub fn never_placed(req: &JobRequest, machine: &MachineShape) -> Option<Never> {
    let spread = req.spread.as_ref()?;
    spread.never(req.procs, machine).map(|_| Never::Unplaceable)
}

/// Waiting jobs by (submit, id), their holds, and refused submissions.
#[derive(Clone, Debug)]
pub struct WaitQueue<T = JobRequest> {
    /// A deque, since the head is what leaves most often: under FCFS the queue of a busy log
    /// holds tens of thousands of jobs, and taking the head out of a `Vec` moved them all.
    jobs: VecDeque<T>,
    /// Held jobs. A hold may come before the submission and outlives a start (the driver keeps
    /// a held running job stopped); it goes with the job's end.
    held: HashSet<JobId>,
    /// Submissions that can never run, with the reason, for the next decision.
    refused: Vec<(JobId, Never)>,
}

impl<T> Default for WaitQueue<T> {
    fn default() -> Self {
        WaitQueue {
            jobs: VecDeque::new(),
            held: HashSet::new(),
            refused: Vec::new(),
        }
    }
}

impl<T: Queued> WaitQueue<T> {
    /// Adds a job in (submit, id) order, even if a driver delivers out of order; returns its
    /// position.
    pub fn insert(&mut self, job: T) -> usize {
        let key = (job.req().submit, job.req().id);
        // Drivers deliver in submit order, so a new job almost always goes last.
        if self
            .jobs
            .back()
            .is_none_or(|j| (j.req().submit, j.req().id) <= key)
        {
            self.jobs.push_back(job);
            return self.jobs.len() - 1;
        }
        let at = self
            .jobs
            .partition_point(|j| (j.req().submit, j.req().id) <= key);
        self.jobs.insert(at, job);
        at
    }

    /// Refuses a submission: it is rejected with `why` by [`WaitQueue::reject_refused`].
    pub fn refuse(&mut self, job: JobId, why: Never) {
        self.refused.push((job, why));
    }

    /// Pushes a [`Decision::Reject`] for every refused submission.
    pub fn reject_refused(&mut self, out: &mut Vec<Decision>) {
        for (job, why) in self.refused.drain(..) {
            out.push(Decision::Reject { job, why });
        }
    }

    /// A job ended: it leaves the queue if it waited there (returned), and its hold goes.
    pub fn end(&mut self, id: JobId) -> Option<T> {
        self.held.remove(&id);
        let at = self.jobs.iter().position(|j| j.req().id == id)?;
        self.jobs.remove(at)
    }

    pub fn hold(&mut self, id: JobId) {
        self.held.insert(id);
    }
    pub fn release(&mut self, id: JobId) {
        // Every end releases; hashing the id is wasted when nothing is held.
        if !self.held.is_empty() {
            self.held.remove(&id);
        }
    }
    pub fn is_held(&self, id: JobId) -> bool {
        !self.held.is_empty() && self.held.contains(&id)
    }
    /// Whether any job is held (waiting or not).
    pub fn any_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// The position of the job submitted at `key.0` with id `key.1`, if it waits.
    pub fn position(&self, key: (Time, JobId)) -> Option<usize> {
        self.jobs
            .binary_search_by(|j| (j.req().submit, j.req().id).cmp(&key))
            .ok()
    }

    /// The position of the first job not held: the queue head as every policy sees it.
    pub fn head(&self) -> Option<usize> {
        if self.held.is_empty() {
            return if self.jobs.is_empty() { None } else { Some(0) };
        }
        self.jobs
            .iter()
            .position(|j| !self.held.contains(&j.req().id))
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
    pub fn get(&self, k: usize) -> &T {
        &self.jobs[k]
    }
    /// The first position from `k` on whose job asks for at most `procs` PEs. A backfilling
    /// pass skips most of a long queue this way, in a tight scan of the deque's two slices
    /// rather than position by position.
    pub fn next_fitting(&self, k: usize, procs: u32) -> Option<usize> {
        let (a, b) = self.jobs.as_slices();
        let fits = |j: &T| j.req().procs <= procs;
        if k < a.len() {
            if let Some(d) = a[k..].iter().position(fits) {
                return Some(k + d);
            }
            b.iter().position(fits).map(|d| a.len() + d)
        } else {
            let from = k - a.len();
            b.get(from..)?.iter().position(fits).map(|d| k + d)
        }
    }
    pub fn get_mut(&mut self, k: usize) -> &mut T {
        &mut self.jobs[k]
    }
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.jobs.iter()
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.jobs.iter_mut()
    }
    /// Takes the job at position `k` out of the queue (it started, or moved elsewhere).
    pub fn remove(&mut self, k: usize) -> T {
        self.jobs.remove(k).expect("a queue position")
    }
    /// Takes out the jobs at these positions (increasing), in one pass over the shorter side:
    /// the jobs behind the first position are moved forward over the gaps, or the jobs before
    /// the last position backward, whichever moves fewer. A backfilling pass usually starts
    /// jobs near the tail of a queue of thousands, and moving the whole queue at every pass
    /// was a tenth of EASY's simulation.
    pub fn remove_all(&mut self, positions: &[usize]) {
        let (Some(&first), Some(&last)) = (positions.first(), positions.last()) else {
            return;
        };
        debug_assert!(positions.windows(2).all(|w| w[0] < w[1]));
        if first == last {
            // One job (a backfilling pass starts one at most, mostly): the deque moves the
            // shorter side in one block, where the loops below swap job by job.
            self.jobs.remove(first);
            return;
        }
        let len = self.jobs.len();
        if len - first <= last + 1 {
            // Forward: every kept job from `first` on moves left by the gaps before it; the
            // removed ones collect at the tail.
            let mut gone = positions.iter().peekable();
            let mut w = first;
            for r in first..len {
                if gone.next_if_eq(&&r).is_some() {
                    continue;
                }
                self.jobs.swap(w, r);
                w += 1;
            }
            self.jobs.truncate(w);
        } else {
            // Backward: every kept job up to `last` moves right; the removed ones collect at
            // the head.
            let mut gone = positions.iter().rev().peekable();
            let mut w = last;
            for r in (0..=last).rev() {
                if gone.next_if_eq(&&r).is_some() {
                    continue;
                }
                self.jobs.swap(w, r);
                // Never below the count of removed positions before `r`, so never below 0.
                w -= 1;
            }
            self.jobs.drain(..=w);
        }
    }
    /// Waiting jobs' ids in queue order ([`crate::Policy::queue`]).
    pub fn ids(&self) -> Vec<JobId> {
        self.jobs.iter().map(|j| j.req().id).collect()
    }
}

/// What an event did to a [`SpaceShare`], for the policy's own reaction.
#[derive(Debug)]
pub enum Seen<T> {
    /// A submission joined the queue at this position.
    Queued(usize),
    /// A submission that can never run: it is rejected at the next decision.
    Refused,
    /// A running job ended; its PEs are back in the pool.
    Finished(Run),
    /// A waiting job left the queue.
    Withdrawn(T),
    /// An end of a job neither waiting nor running (already gone, or refused).
    Gone,
    Timer(u64),
    /// A hello, a node down or up, a hold or a release: already taken into account.
    Other,
}

/// The state of a space-sharing policy apart from its rule: free PEs, running jobs and the
/// waiting queue.
#[derive(Clone, Debug)]
pub struct SpaceShare<T = JobRequest> {
    pub pool: PePool,
    pub queue: WaitQueue<T>,
    pub running: RunningSet,
}

impl<T: Queued + From<JobRequest>> SpaceShare<T> {
    pub fn new(cfg: &PolicyConfig) -> SpaceShare<T> {
        SpaceShare {
            pool: PePool::new(cfg.machine),
            queue: WaitQueue::default(),
            running: RunningSet::default(),
        }
    }

    /// Takes in one event.
    pub fn observe(&mut self, event: Event) -> Seen<T> {
        match event {
            Event::Submitted(job) => {
                if let Some(why) = never_fits(&job, self.pool.machine().total_pes())
                    .or_else(|| never_placed(&job, self.pool.machine()))
                {
                    self.queue.refuse(job.id, why);
                    return Seen::Refused;
                }
                Seen::Queued(self.queue.insert(T::from(job)))
            }
            Event::Ended(id) => {
                if let Some(run) = self.running.remove(id) {
                    self.queue.release(id);
                    self.pool.release(&run.pes);
                    Seen::Finished(run)
                } else {
                    self.queue.end(id).map_or(Seen::Gone, Seen::Withdrawn)
                }
            }
            Event::Running { job, pes, since } => {
                // A job the pool cannot give these PEs to (they overlap another's) is left
                // out; the ledger of the driver refuses the inconsistency.
                if self.pool.take(&pes) {
                    let run = Run {
                        pes,
                        procs: job.procs,
                        expected_end: since + job.estimate,
                    };
                    self.running.insert(job.id, run);
                }
                Seen::Other
            }
            Event::NodeDown(node) => {
                self.pool.node_down(node);
                Seen::Other
            }
            Event::NodeUp(node) => {
                let running = &self.running;
                self.pool.node_up(node, |pe| running.holds(pe));
                Seen::Other
            }
            Event::Held(id) => {
                self.queue.hold(id);
                Seen::Other
            }
            Event::Released(id) => {
                self.queue.release(id);
                Seen::Other
            }
            Event::Timer(token) => Seen::Timer(token),
        }
    }

    /// Starts the waiting job at position `k` now if enough PEs are free, leaving it in the
    /// queue for the caller to take out (one by one, or all at once after a pass).
    pub fn start(&mut self, now: Time, k: usize, out: &mut Vec<Decision>) -> bool {
        let req = self.queue.get(k).req();
        let (id, procs, estimate) = (req.id, req.procs, req.estimate);
        let Some(pes) = self.pool.allocate_for(req) else {
            return false;
        };
        self.launch(now, id, procs, estimate, pes, out);
        true
    }

    /// Records a job as running on `pes` (already taken from the pool) and says so.
    pub fn launch(
        &mut self,
        now: Time,
        id: JobId,
        procs: u32,
        estimate: cosched_core::Dur,
        pes: PeSet,
        out: &mut Vec<Decision>,
    ) {
        let run = Run {
            pes: pes.clone(),
            procs,
            expected_end: now + estimate,
        };
        self.running.insert(id, run);
        out.push(Decision::Start {
            job: id,
            pes,
            slot: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{Dur, MachineShape, NodeId};

    fn req(id: u64, submit: i64, procs: u32) -> JobRequest {
        JobRequest::new(
            JobId(id),
            Time::from_secs(submit),
            procs,
            Dur::from_secs(10),
        )
    }

    /// The next job that fits is the one a scan position by position finds, wherever the
    /// deque's storage wraps.
    #[test]
    fn next_fitting_is_the_first_fitting_position_from_k() {
        let mut q = WaitQueue::default();
        for id in 0..12 {
            q.insert(req(id, id as i64, 1 + (id as u32 * 7) % 5));
        }
        let mut wrapped = false;
        for round in 0..12u64 {
            // Taking heads and adding tails moves the deque's wrap point.
            q.remove(0);
            q.insert(req(
                100 + round,
                100 + round as i64,
                1 + (round as u32 * 3) % 5,
            ));
            wrapped |= !q.jobs.as_slices().1.is_empty();
            for k in 0..=q.len() + 1 {
                for procs in 0..6 {
                    let naive = (k..q.len()).find(|&i| q.get(i).procs <= procs);
                    assert_eq!(
                        q.next_fitting(k, procs),
                        naive,
                        "round {round}, k {k}, {procs}"
                    );
                }
            }
        }
        assert!(wrapped, "the storage never wrapped");
    }

    #[test]
    fn queue_keeps_submit_then_id_order_and_skips_held_heads() {
        let mut q: WaitQueue = WaitQueue::default();
        assert_eq!(q.insert(req(3, 5, 1)), 0);
        assert_eq!(q.insert(req(2, 5, 1)), 0);
        assert_eq!(q.insert(req(1, 9, 1)), 2);
        assert_eq!(q.ids(), vec![JobId(2), JobId(3), JobId(1)]);
        q.hold(JobId(2));
        assert_eq!(q.head(), Some(1));
        assert!(q.end(JobId(2)).is_some());
        assert!(!q.is_held(JobId(2)), "an end drops the hold");
        q.remove_all(&[0, 1]);
        assert!(q.is_empty());
    }

    #[test]
    fn remove_all_keeps_the_order_of_the_rest_from_either_side() {
        // Every subset of positions of queues of up to 7 jobs, some wrapped around the
        // deque's buffer end: the result must be the queue without them, in order.
        for len in 0..8u64 {
            for mask in 0u32..(1 << len) {
                let mut q: WaitQueue = WaitQueue::default();
                for id in 0..len {
                    q.jobs.push_back(req(id, id as i64, 1));
                }
                // Turn the buffer so the deque wraps.
                for _ in 0..len / 2 {
                    let j = q.jobs.pop_front().unwrap();
                    q.jobs.push_back(j);
                }
                let before = q.ids();
                let positions: Vec<usize> =
                    (0..len as usize).filter(|k| mask & (1 << k) != 0).collect();
                let want: Vec<JobId> = (0..len as usize)
                    .filter(|k| mask & (1 << k) == 0)
                    .map(|k| before[k])
                    .collect();
                q.remove_all(&positions);
                assert_eq!(q.ids(), want, "len {len}, positions {positions:?}");
            }
        }
    }

    #[test]
    fn insert_out_of_order_still_sorts() {
        let mut q: WaitQueue = WaitQueue::default();
        assert_eq!(q.insert(req(5, 10, 1)), 0);
        assert_eq!(q.insert(req(6, 10, 1)), 1);
        assert_eq!(q.insert(req(4, 10, 1)), 0);
        assert_eq!(q.insert(req(9, 3, 1)), 0);
        assert_eq!(q.insert(req(1, 11, 1)), 4);
        assert_eq!(
            q.ids(),
            vec![JobId(9), JobId(4), JobId(5), JobId(6), JobId(1)]
        );
    }

    #[test]
    fn never_means_the_whole_machine_not_what_is_up() {
        let mut s: SpaceShare = SpaceShare::new(&PolicyConfig::new(MachineShape::flat(4, 2)));
        assert!(matches!(
            s.observe(Event::Submitted(req(1, 0, 9))),
            Seen::Refused
        ));
        assert!(matches!(
            s.observe(Event::Submitted(req(2, 0, 0))),
            Seen::Refused
        ));
        s.observe(Event::NodeDown(NodeId(0)));
        // 8 PEs, 6 usable: a job of 8 waits for the node instead of being rejected.
        assert!(matches!(
            s.observe(Event::Submitted(req(3, 0, 8))),
            Seen::Queued(0)
        ));
        let mut out = Vec::new();
        s.queue.reject_refused(&mut out);
        assert_eq!(
            out,
            vec![
                Decision::Reject {
                    job: JobId(1),
                    why: Never::TooLarge {
                        procs: 9,
                        machine: 8
                    }
                },
                Decision::Reject {
                    job: JobId(2),
                    why: Never::NoPes
                },
            ]
        );
        assert!(!s.start(Time::ZERO, 0, &mut out));
        s.observe(Event::NodeUp(NodeId(0)));
        assert!(s.start(Time::ZERO, 0, &mut out));
    }

    #[test]
    fn hello_takes_its_pes_and_node_up_keeps_them() {
        let mut s: SpaceShare = SpaceShare::new(&PolicyConfig::new(MachineShape::flat(2, 2)));
        s.observe(Event::Running {
            job: req(7, 0, 2),
            pes: PeSet::contiguous(0, 2),
            since: Time::ZERO,
        });
        s.observe(Event::NodeDown(NodeId(0)));
        s.observe(Event::NodeUp(NodeId(0)));
        assert_eq!(s.pool.free_count(), 2, "node 0's PEs still belong to job 7");
        assert!(matches!(
            s.observe(Event::Ended(JobId(7))),
            Seen::Finished(_)
        ));
        assert_eq!(s.pool.free_count(), 4);
        assert!(matches!(s.observe(Event::Ended(JobId(7))), Seen::Gone));
    }
}
