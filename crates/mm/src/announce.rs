//! The gang rotation announced ahead ([`cosched_proto::rotation`]): what the policy's matrix
//! will do from now on if nothing but its own timers happens, found by running a copy of the
//! policy forward through those timers (the policy is a pure state machine), and whether a
//! switch the real policy just made is the one announced. The node managers switch on their
//! own timers from the announcement; a message goes out only when the matrix or its rotation
//! changes (an arrival, an end, a repack, a hold), so a switch costs no message and no node
//! manager work on the machine manager's side.

use std::collections::BTreeSet;

use cosched_core::{Dur, JobId, Time};
use cosched_policy::{Decision, Event, MatrixView, Policy};
use cosched_proto::proto::Strobe;
use cosched_proto::rotation::{Cycle, Rotation, Step};

/// Steps forecast at most: enough for two whole cycles of a matrix of up to 15 rows (a
/// cycle is found only once it has been seen repeat).
pub const MAX_STEPS: usize = 32;

/// (job, row) of every job of the matrix.
pub fn rows(m: &MatrixView) -> Vec<(JobId, u32)> {
    m.slots
        .iter()
        .enumerate()
        .flat_map(|(r, s)| s.jobs.iter().map(move |(j, _)| (*j, r as u32)))
        .collect()
}

/// The rotation from `now` of `policy`, whose matrix stands as `strobe` says, with its timers
/// `timers` (at, token) pending: a copy of the policy handles those timers (and the timers
/// they arm) in order, and each change of the active slot or of the running jobs is a step.
/// The forecast stops where the copy decides anything but suspending, resuming and arming
/// timers (that is not a rotation: the real policy's decision makes a new announcement), or
/// where the matrix's rows change.
pub fn forecast(
    policy: &dyn Policy,
    now: Time,
    strobe: Strobe,
    timers: &[(Time, u64)],
) -> Rotation {
    let mut r = Rotation::still(now, strobe);
    let mut copy = policy.boxed_clone();
    let mut pending: Vec<(Time, u64)> = timers.to_vec();
    let mut running: BTreeSet<JobId> = r.steps[0].running.iter().copied().collect();
    let mut out = Vec::new();
    while r.steps.len() < MAX_STEPS {
        // The earliest first; among equal instants, the one armed first.
        let Some(k) = (0..pending.len()).min_by_key(|&k| (pending[k].0, k)) else {
            break;
        };
        let (at, token) = pending.remove(k);
        copy.handle(at, Event::Timer(token), &mut out);
        let mut rotates = true;
        for d in out.drain(..) {
            match d {
                Decision::SetTimer { at: t, token } => pending.push((t.max(at), token)),
                Decision::Suspend { job } => {
                    running.remove(&job);
                }
                Decision::Resume { job } => {
                    running.insert(job);
                }
                _ => rotates = false,
            }
        }
        let m = copy.matrix();
        if !rotates || m.as_ref().is_none_or(|m| rows(m) != r.rows) {
            break;
        }
        let slot = m.and_then(|m| m.active);
        let last = r.steps.last().expect("one step at least");
        let running: Vec<JobId> = running.iter().copied().collect();
        if last.slot == slot && last.running == running {
            continue;
        }
        r.steps.push(Step { at, slot, running });
    }
    r.cycle = cycle(&r.steps);
    r
}

/// The shortest cycle the steps after the first go through, seen at least twice over: step 0
/// is the moment of the announcement, within a quantum, so the cycle starts at step 1.
fn cycle(steps: &[Step]) -> Option<Cycle> {
    let same = |a: &Step, b: &Step| a.slot == b.slot && a.running == b.running;
    let n = steps.len();
    (1..n).find_map(|p| {
        if 1 + 2 * p > n {
            return None;
        }
        let period: Dur = steps[1 + p].at - steps[1].at;
        let repeats = (1..n - p)
            .all(|i| same(&steps[i], &steps[i + p]) && steps[i + p].at - steps[i].at == period);
        (repeats && period > Dur::ZERO).then_some(Cycle { from: 1, period })
    })
}

/// What the node managers were told last, and how far the real policy has gone through it.
#[derive(Debug, Default)]
pub struct Announced {
    rotation: Option<Rotation>,
    /// The step the real policy stands at.
    step: usize,
}

impl Announced {
    /// The real policy's matrix stands as `strobe` says: true when that is the announced step
    /// or the next one (the node managers already know), false when a new announcement must
    /// go out. A rotation running out of steps needs one too.
    pub fn follows(&mut self, strobe: &Strobe) -> bool {
        let Some(r) = &self.rotation else {
            return false;
        };
        if r.rows != strobe.rows {
            return false;
        }
        let is = |k: usize| {
            r.nth(k)
                .is_some_and(|s| s.slot == strobe.slot && s.running == strobe.running)
        };
        if is(self.step) {
            return true;
        }
        // The last step of a rotation without a cycle holds: past it, nothing is known.
        if is(self.step + 1) && (r.cycle.is_some() || self.step + 2 < r.steps.len()) {
            self.step += 1;
            return true;
        }
        false
    }

    /// The announcement in force repeats for ever (it has a cycle): the node managers go on
    /// switching without the machine manager.
    pub fn cycles(&self) -> bool {
        self.rotation.as_ref().is_some_and(|r| r.cycle.is_some())
    }

    /// A new announcement went out.
    pub fn set(&mut self, r: Rotation) {
        self.rotation = Some(r);
        self.step = 0;
    }

    /// The announcement in force (heartbeats carry it again, for a node that missed it).
    pub fn current(&self) -> Option<&Rotation> {
        self.rotation.as_ref()
    }

    /// The policy has no matrix any more.
    pub fn clear(&mut self) {
        self.rotation = None;
        self.step = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::MachineShape;
    use cosched_policy::{JobRequest, PolicyConfig, registry};

    fn ms(n: i64) -> Time {
        Time::from_micros(n * 1_000)
    }

    /// Two 2-PE jobs at MPL 2 on a node of 2 PEs under gang at 10-ms quanta: the strobe,
    /// the running set and the pending timers as the machine manager has them after `until`.
    fn two_jobs_under_gang(until: Time) -> (Box<dyn Policy>, Strobe, Vec<(Time, u64)>) {
        let mut cfg = PolicyConfig::new(MachineShape::flat(1, 2));
        cfg.mpl = Some(2);
        cfg.quantum = Some(Dur::from_millis(10));
        cfg.context_switch = Some(Dur::ZERO);
        let mut p = registry::build("gang", &cfg).unwrap();
        let mut out = Vec::new();
        let mut running = BTreeSet::new();
        let mut timers = Vec::new();
        let take = |out: &mut Vec<Decision>,
                    running: &mut BTreeSet<JobId>,
                    timers: &mut Vec<(Time, u64)>| {
            for d in out.drain(..) {
                match d {
                    Decision::Start { job, .. } | Decision::Resume { job } => {
                        running.insert(job);
                    }
                    Decision::Suspend { job } => {
                        running.remove(&job);
                    }
                    Decision::SetTimer { at, token } => timers.push((at, token)),
                    _ => {}
                }
            }
        };
        for id in [1, 2] {
            let req = JobRequest::new(JobId(id), Time::ZERO, 2, Dur::from_secs(1000));
            p.handle(Time::ZERO, Event::Submitted(req), &mut out);
            take(&mut out, &mut running, &mut timers);
        }
        while let Some(k) = (0..timers.len())
            .filter(|&k| timers[k].0 <= until)
            .min_by_key(|&k| timers[k].0)
        {
            let (at, token) = timers.remove(k);
            p.handle(at, Event::Timer(token), &mut out);
            take(&mut out, &mut running, &mut timers);
        }
        let m = p.matrix().unwrap();
        let strobe = Strobe {
            slot: m.active,
            rows: rows(&m),
            running: running.into_iter().collect(),
        };
        (p, strobe, timers)
    }

    #[test]
    fn the_forecast_of_a_gang_rotation_alternates_the_rows_each_quantum_for_ever() {
        let (p, strobe, timers) = two_jobs_under_gang(ms(25));
        let first = strobe.clone();
        let r = forecast(p.as_ref(), ms(27), strobe, &timers);
        assert_eq!(r.steps[0].at, ms(27));
        assert_eq!(r.steps[0].running, first.running);
        // The next switch is the policy's pending quantum end, then one every 10 ms.
        assert_eq!(r.steps[1].at, ms(30));
        assert_eq!(
            r.cycle,
            Some(Cycle {
                from: 1,
                period: Dur::from_millis(20)
            })
        );
        assert_ne!(r.steps[1].running, r.steps[2].running);
        for k in 1..6 {
            let s = r.nth(k).unwrap();
            assert_eq!(s.running.len(), 1, "one job at a time: {s:?}");
            assert_ne!(r.nth(k + 1).unwrap().running, s.running);
        }
        // What the real policy does next is what was announced.
        let mut a = Announced::default();
        a.set(r.clone());
        assert!(a.follows(&first));
        let mut next = first.clone();
        next.running = r.steps[1].running.clone();
        next.slot = r.steps[1].slot;
        assert!(a.follows(&next));
        assert!(a.follows(&first), "and round again");
        let mut other = first.clone();
        other.rows.pop();
        assert!(!a.follows(&other), "the matrix changed: a new announcement");
    }

    #[test]
    fn a_single_row_forecasts_a_rotation_that_stands_still() {
        let mut cfg = PolicyConfig::new(MachineShape::flat(1, 2));
        cfg.mpl = Some(2);
        cfg.quantum = Some(Dur::from_millis(10));
        let mut p = registry::build("gang", &cfg).unwrap();
        let mut out = Vec::new();
        let req = JobRequest::new(JobId(1), Time::ZERO, 2, Dur::from_secs(1000));
        p.handle(Time::ZERO, Event::Submitted(req), &mut out);
        let m = p.matrix().unwrap();
        let strobe = Strobe {
            slot: m.active,
            rows: rows(&m),
            running: vec![JobId(1)],
        };
        let r = forecast(p.as_ref(), ms(1), strobe, &[]);
        assert_eq!(r.steps.len(), 1);
        assert_eq!(r.cycle, None);
    }
}
