//! The order of a switch on this node: what a plan of the node scheme stops goes out at
//! once, and what it continues (jobs thawed, ranks continued) is held back until the shell
//! reports every outgoing job's cgroup frozen ([`super::core::Input::Frozen`]), or until a
//! bound has passed (then it goes ahead, counted as a late freeze). A freeze is
//! asynchronous — the kernel stops each process when it next runs, which behind CPU-bound
//! ranks on a busy node can take a while — so continuing at once would leave two jobs
//! runnable on one PE; waiting on the node manager's loop would stall every other input.
//!
//! The bound is half the interval between the last two switches here (the quantum as this
//! node sees it), within [`MIN_BOUND`] and [`MAX_BOUND`]; before two switches it is
//! [`MAX_BOUND`]. Each switch's timing is kept for `cluster bench gang` ([`SwitchLog`]).
//!
//! Stops that are signals (a job without a cgroup, a rank under FCS) are not waited for:
//! nothing reports them, and SIGSTOP takes effect as fast as a freeze would.

use std::collections::{BTreeSet, VecDeque};

use cosched_core::{Dur, JobId, Time};

use crate::program::Landed;
use cosched_proto::proto::{SwitchLog, SwitchTiming};

/// Shortest wait for outgoing freezes (a sub-millisecond quantum still lets them land).
pub const MIN_BOUND: Dur = Dur::from_micros(500);
/// Longest wait, and the wait before the quantum is known.
pub const MAX_BOUND: Dur = Dur::from_millis(100);
/// Switch timings kept for the breakdown (10 s of 1-ms quanta).
pub const KEEP: usize = 10_000;

/// What a switch continues once its outgoing jobs are stopped.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Release {
    pub jobs: Vec<JobId>,
    pub ranks: Vec<i32>,
}

/// The switch in progress.
#[derive(Debug)]
struct Pending {
    started: Time,
    until: Time,
    frozen: Option<Time>,
    outgoing: Vec<JobId>,
    incoming: Vec<JobId>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Gate {
    /// Outgoing cgroups (job, launch) whose freeze is not reported yet.
    freezing: BTreeSet<(JobId, u64)>,
    held: Release,
    pending: Option<Pending>,
    /// When the last switch started, and the interval before it.
    last: Option<Time>,
    interval: Option<Dur>,
    log: SwitchLog,
    recent: VecDeque<SwitchTiming>,
}

impl Gate {
    /// A plan's stops went out: `freezing` are the cgroups of its stopped jobs, `stopped_jobs`
    /// and `stopped_ranks` everything it stopped; `jobs` and `ranks` are what it continues.
    /// Returns what may be continued now (nothing held back when no freeze is awaited).
    pub fn switch(
        &mut self,
        now: Time,
        freezing: &[(JobId, u64)],
        stopped_jobs: &[JobId],
        stopped_ranks: &[i32],
        jobs: Vec<JobId>,
        ranks: Vec<i32>,
    ) -> Option<Release> {
        // A continue held back from an earlier switch that this plan stops again must not
        // follow the stop.
        self.held.jobs.retain(|j| !stopped_jobs.contains(j));
        self.held.ranks.retain(|r| !stopped_ranks.contains(r));
        // A job continued again needs no freeze: its thaw goes with the others.
        self.freezing.retain(|(j, _)| !jobs.contains(j));
        let incoming = jobs.clone();
        self.held.jobs.extend(jobs);
        self.held.ranks.extend(ranks);
        if !freezing.is_empty() {
            self.freezing.extend(freezing.iter().copied());
            if let Some(last) = self.last {
                self.interval = Some(now.since(last));
            }
            self.last = Some(now);
            let bound = self
                .interval
                .map_or(MAX_BOUND, |q| Dur(q.0 / 2).clamp(MIN_BOUND, MAX_BOUND));
            // An earlier switch still waiting is folded into this one, and timed as this one.
            self.pending = Some(Pending {
                started: now,
                until: now + bound,
                frozen: None,
                outgoing: freezing.iter().map(|&(j, _)| j).collect(),
                incoming,
            });
        }
        self.release_if_ready(now)
    }

    /// The shell reports the cgroup of launch `launch` of `job` frozen (or empty).
    pub fn frozen(&mut self, now: Time, job: JobId, launch: u64) -> Option<Release> {
        if !self.freezing.remove(&(job, launch)) {
            return None;
        }
        self.release_if_ready(now)
    }

    /// The job left the node: nothing of it is waited for or continued.
    pub fn forget(&mut self, now: Time, job: JobId) -> Option<Release> {
        self.held.jobs.retain(|&j| j != job);
        let before = self.freezing.len();
        self.freezing.retain(|(j, _)| *j != job);
        if self.freezing.len() == before {
            return None;
        }
        self.release_if_ready(now)
    }

    /// The freeze watcher's thread takes the switching over ([`crate::program`]): nothing is
    /// waited for or continued any more.
    pub fn reset(&mut self) {
        self.freezing.clear();
        self.held = Release::default();
        self.pending = None;
    }

    /// When the bound of the switch in progress passes.
    pub fn until(&self) -> Option<Time> {
        self.pending.as_ref().map(|p| p.until)
    }

    /// The bound has passed (a timer): what is held back goes, counted as a late freeze.
    pub fn due(&mut self, now: Time) -> Option<Release> {
        if self.until().is_none_or(|t| t > now) {
            return None;
        }
        self.freezing.clear();
        self.log.late += 1;
        self.release(now)
    }

    /// Switches thawed at the bound so far.
    pub fn late(&self) -> u64 {
        self.log.late
    }

    /// The switches so far and the last ones' timings.
    pub fn log(&self) -> SwitchLog {
        SwitchLog {
            recent: self.recent.iter().cloned().collect(),
            ..self.log.clone()
        }
    }

    /// A switch of an announced rotation, made by the freeze watcher's thread
    /// ([`crate::program`]), goes into the same log, timed from its announced instant.
    pub fn landed(&mut self, l: &Landed) {
        let us = |t: Time| {
            t.since(l.due)
                .as_micros()
                .clamp(i32::MIN as i64, i32::MAX as i64) as i32
        };
        self.log.count += 1;
        // A handover's landing is read later ([`Gate::landing`]).
        self.log.late += u64::from(l.frozen.is_none() && !l.outgoing.is_empty() && !l.handover);
        self.keep(SwitchTiming {
            at_us: l.due.as_micros(),
            lead_us: l
                .due
                .since(l.frozen_written)
                .as_micros()
                .clamp(0, u32::MAX as i64) as u32,
            frozen_us: l.frozen.map(us),
            thawed_us: us(l.thawed),
            outgoing: l.outgoing.iter().map(|&(j, _)| j).collect(),
            incoming: l.incoming.iter().map(|&(j, _)| j).collect(),
            handover: l.handover,
        });
    }

    /// The outgoing freezes of the handover due at `due` read frozen at `frozen`, or not
    /// (late): its timing in the log says so.
    pub fn landing(&mut self, due: Time, frozen: Option<Time>) {
        self.log.late += u64::from(frozen.is_none());
        let at_us = due.as_micros();
        if let (Some(f), Some(t)) = (
            frozen,
            self.recent
                .iter_mut()
                .rev()
                .find(|t| t.handover && t.at_us == at_us),
        ) {
            t.frozen_us = Some(
                f.since(due)
                    .as_micros()
                    .clamp(i32::MIN as i64, i32::MAX as i64) as i32,
            );
        }
    }

    fn keep(&mut self, t: SwitchTiming) {
        self.recent.push_back(t);
        while self.recent.len() > KEEP {
            self.recent.pop_front();
        }
    }

    fn release_if_ready(&mut self, now: Time) -> Option<Release> {
        if !self.freezing.is_empty() {
            return None;
        }
        if let Some(p) = &mut self.pending {
            p.frozen = Some(now);
        }
        self.release(now)
    }

    fn release(&mut self, now: Time) -> Option<Release> {
        if let Some(p) = self.pending.take() {
            let us = |t: Time| t.since(p.started).as_micros().clamp(0, i32::MAX as i64) as i32;
            self.log.count += 1;
            self.keep(SwitchTiming {
                at_us: p.started.as_micros(),
                lead_us: 0,
                frozen_us: p.frozen.map(us),
                thawed_us: us(now),
                outgoing: p.outgoing,
                incoming: p.incoming,
                handover: false,
            });
        }
        let r = std::mem::take(&mut self.held);
        (!r.jobs.is_empty() || !r.ranks.is_empty()).then_some(r)
    }
}
