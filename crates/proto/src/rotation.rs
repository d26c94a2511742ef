//! A gang rotation announced ahead: the slots of the Ousterhout matrix that will be active
//! and the instant each starts, so that node managers switch on their own timers (STORM's
//! heartbeat-driven multi-context switch, seed 003) instead of waiting for a message per
//! switch. The machine manager sends one when the matrix or its rotation changes (an
//! arrival, an end, a repack); a new one replaces the old from its first step on.
//!
//! Instants are microseconds of the sender's clock; the receiver moves them onto its own
//! clock ([`Rotation::shifted`]) before it acts on them.

use cosched_core::{Dur, JobId, Time};
use serde::{Deserialize, Serialize};

use crate::proto::Strobe;

/// One step of a rotation: from `at` on, `slot` is the active row and `running` the jobs the
/// policy runs (as in a [`Strobe`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub at: Time,
    pub slot: Option<u32>,
    pub running: Vec<JobId>,
}

/// See the module documentation. Step `i` starts at `steps[i].at`; with a [`Cycle`], the
/// steps from `cycle.from` on repeat for ever; without one the last step holds until the next
/// announcement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rotation {
    /// (job, row) of every job in the matrix, the same for every step.
    pub rows: Vec<(JobId, u32)>,
    /// In order of their instants, the first one the moment the announcement takes effect
    /// (which may fall within a quantum: then it is not part of the cycle).
    pub steps: Vec<Step>,
    pub cycle: Option<Cycle>,
}

/// The repeating part of a rotation: step `from + i` also starts at `steps[from + i].at + k ×
/// period` for every k.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cycle {
    pub from: usize,
    pub period: Dur,
}

impl Rotation {
    /// A rotation that stands still: `strobe` from `at` until the next announcement.
    pub fn still(at: Time, strobe: Strobe) -> Rotation {
        Rotation {
            rows: strobe.rows,
            steps: vec![Step {
                at,
                slot: strobe.slot,
                running: strobe.running,
            }],
            cycle: None,
        }
    }

    /// The same rotation on a clock that reads `offset` more than the sender's.
    pub fn shifted(mut self, offset: Dur) -> Rotation {
        for s in &mut self.steps {
            s.at += offset;
        }
        self
    }

    /// The cycle, when it is well formed (a positive period, its first step in the list).
    fn repeating(&self) -> Option<(usize, Dur, Time)> {
        let c = self.cycle?;
        let start = self.steps.get(c.from)?.at;
        (c.period > Dur::ZERO).then_some((c.from, c.period, start))
    }

    /// The step in force at `t` and the instant it began: `None` before the first step.
    pub fn at(&self, t: Time) -> Option<(&Step, Time)> {
        if t < self.steps.first()?.at {
            return None;
        }
        if let Some((from, period, start)) = self.repeating()
            && t >= start
        {
            let base = Dur((t - start).0 / period.0 * period.0);
            let u = t - base;
            let i = from + self.steps[from..].partition_point(|s| s.at <= u) - 1;
            return Some((&self.steps[i], self.steps[i].at + base));
        }
        let i = self.steps.partition_point(|s| s.at <= t) - 1;
        Some((&self.steps[i], self.steps[i].at))
    }

    /// The first step start strictly after `t`, if any.
    pub fn next_after(&self, t: Time) -> Option<Time> {
        if let Some((from, period, start)) = self.repeating()
            && t >= start
        {
            let base = Dur((t - start).0 / period.0 * period.0);
            let u = t - base;
            return Some(match self.steps[from..].iter().find(|s| s.at > u) {
                Some(s) => s.at + base,
                None => start + base + period,
            });
        }
        self.steps.iter().find(|s| s.at > t).map(|s| s.at)
    }

    /// Step `k` of the sequence (the cycle taken round as often as needed).
    pub fn nth(&self, k: usize) -> Option<&Step> {
        match self.repeating() {
            Some((from, _, _)) if k >= from => self
                .steps
                .get(from + (k - from) % (self.steps.len() - from)),
            _ => self.steps.get(k),
        }
    }

    /// The strobe of the step in force at `t`.
    pub fn strobe_at(&self, t: Time) -> Option<Strobe> {
        self.at(t).map(|(s, _)| self.strobe(s))
    }

    /// The strobe of a step.
    pub fn strobe(&self, s: &Step) -> Strobe {
        Strobe {
            slot: s.slot,
            rows: self.rows.clone(),
            running: s.running.clone(),
        }
    }

    /// Whether `job` is in the matrix.
    pub fn manages(&self, job: JobId) -> bool {
        self.rows.iter().any(|(j, _)| *j == job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: i64) -> Time {
        Time::from_micros(us)
    }

    fn two_slots() -> Rotation {
        Rotation {
            rows: vec![(JobId(1), 0), (JobId(2), 1)],
            steps: vec![
                Step {
                    at: t(1_000),
                    slot: Some(0),
                    running: vec![JobId(1)],
                },
                Step {
                    at: t(2_000),
                    slot: Some(1),
                    running: vec![JobId(2)],
                },
            ],
            cycle: Some(Cycle {
                from: 0,
                period: Dur::from_micros(2_000),
            }),
        }
    }

    #[test]
    fn a_repeating_rotation_names_the_step_and_its_start_at_any_instant() {
        let r = two_slots();
        assert!(r.at(t(999)).is_none());
        assert_eq!(
            r.at(t(1_000)).map(|(s, a)| (s.slot, a)),
            Some((Some(0), t(1_000)))
        );
        assert_eq!(
            r.at(t(2_500)).map(|(s, a)| (s.slot, a)),
            Some((Some(1), t(2_000)))
        );
        assert_eq!(
            r.at(t(3_000)).map(|(s, a)| (s.slot, a)),
            Some((Some(0), t(3_000)))
        );
        assert_eq!(
            r.at(t(10_999)).map(|(s, a)| (s.slot, a)),
            Some((Some(1), t(10_000)))
        );
        assert_eq!(r.next_after(t(0)), Some(t(1_000)));
        assert_eq!(r.next_after(t(1_000)), Some(t(2_000)));
        assert_eq!(r.next_after(t(2_999)), Some(t(3_000)));
        assert_eq!(r.next_after(t(10_000)), Some(t(11_000)));
        assert_eq!(r.at(t(4_100)).unwrap().0.running, vec![JobId(2)]);
        assert_eq!(r.nth(5).map(|s| s.slot), Some(Some(1)));
    }

    #[test]
    fn a_cycle_may_start_after_a_first_partial_step() {
        let mut r = two_slots();
        r.steps.insert(
            0,
            Step {
                at: t(400),
                slot: Some(1),
                running: vec![JobId(2)],
            },
        );
        r.cycle = Some(Cycle {
            from: 1,
            period: Dur::from_micros(2_000),
        });
        assert_eq!(
            r.at(t(500)).map(|(s, a)| (s.slot, a)),
            Some((Some(1), t(400)))
        );
        assert_eq!(r.next_after(t(500)), Some(t(1_000)));
        assert_eq!(
            r.at(t(5_000)).map(|(s, a)| (s.slot, a)),
            Some((Some(0), t(5_000)))
        );
        assert_eq!(r.nth(0).map(|s| s.at), Some(t(400)));
        assert_eq!(r.nth(3).map(|s| s.slot), Some(Some(0)));
    }

    #[test]
    fn a_rotation_without_a_period_holds_its_last_step() {
        let mut r = two_slots();
        r.cycle = None;
        assert_eq!(
            r.at(t(50_000)).map(|(s, a)| (s.slot, a)),
            Some((Some(1), t(2_000)))
        );
        assert_eq!(r.next_after(t(2_000)), None);
        let r = r.shifted(Dur::from_micros(-500));
        assert_eq!(r.next_after(t(0)), Some(t(500)));
        assert!(r.manages(JobId(2)) && !r.manages(JobId(3)));
    }
}
