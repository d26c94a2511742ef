//! Forecasts: when each live job is expected to start and end, found by running a copy of the
//! live policy forward on the simulator's engine (as Flux's `forecast()`), assuming every job
//! runs exactly its estimate and nothing new arrives.
//!
//! This is the one home of the forecast: `cosched queue --forecast` (the machine manager
//! clones its policy and snapshots its ledger) and Scojo-PECT's response-time estimates at
//! submission (through [`cosched_policy::forecast::Forecaster`], which [`simulate`] hands
//! every policy it runs) both come here. No scheduling is done here: the policy decides, the
//! engine (`crate::engine`) carries its decisions out through the job ledger, exactly as in
//! a simulation.
//!
//! [`simulate`]: crate::simulate
//!
//! ```
//! use cosched_core::{Dur, JobId, MachineShape, PeSet, Time};
//! use cosched_policy::forecast::{LiveJob, LiveState, Snapshot};
//! use cosched_policy::{Decision, Event, JobRequest, PolicyConfig, registry};
//!
//! // Live FCFS on 4 PEs: job 1 (4 PEs, 100 s) started at 0; job 2 waits.
//! let m = MachineShape::flat(4, 1);
//! let mut live = registry::build("fcfs", &PolicyConfig::new(m)).unwrap();
//! let req = |id, procs| JobRequest::new(JobId(id), Time::ZERO, procs, Dur::from_secs(100));
//! let mut out = Vec::new();
//! live.observe(Time::ZERO, Event::Submitted(req(1, 4)));
//! live.observe(Time::ZERO, Event::Submitted(req(2, 2)));
//! live.decide(Time::ZERO, &mut out);
//! // At 30 s, job 2 is expected to start at 100 s and end at 200 s.
//! let now = Time::from_secs(30);
//! let snapshot = Snapshot {
//!     introduce: false,
//!     machine: m,
//!     migration: true,
//!     now,
//!     jobs: vec![
//!         LiveJob {
//!             req: req(1, 4),
//!             state: LiveState::Running { pes: PeSet::contiguous(0, 4), ran: Dur::from_secs(30) },
//!             started: Some(Time::ZERO),
//!             held: false,
//!         },
//!         LiveJob { req: req(2, 2), state: LiveState::Waiting { ran: Dur::ZERO }, started: None, held: false },
//!     ],
//!     timers: vec![],
//!     down: vec![],
//! };
//! let f = cosched_sim::forecast::forecast(live.boxed_clone().as_mut(), &snapshot).unwrap();
//! assert_eq!((f[1].start, f[1].end), (Some(Time::from_secs(100)), Some(Time::from_secs(200))));
//! ```

use std::sync::Arc;

use cosched_core::Dur;
use cosched_policy::Policy;
use cosched_policy::forecast::{Expected, Forecaster, LiveState, SharedForecaster, Snapshot};

use crate::engine::{SimError, SimJob, simulate_from};

/// Runs `policy` (a copy of the live one, in the state that matches `snapshot`) forward from
/// `snapshot.now`: every job runs for its estimate in all (a running job ends at `now` plus
/// what is left of its estimate, at `now` if it has run longer), nothing new arrives. Returns
/// each job's expected start and end, in the snapshot's order; a running job's start is the
/// one it had.
pub fn forecast(policy: &mut dyn Policy, snapshot: &Snapshot) -> Result<Vec<Expected>, SimError> {
    let jobs: Vec<SimJob> = snapshot
        .jobs
        .iter()
        .map(|j| {
            let ran = match &j.state {
                LiveState::Waiting { ran }
                | LiveState::Running { ran, .. }
                | LiveState::Stopped { ran, .. } => *ran,
            };
            SimJob {
                req: j.req.clone(),
                runtime: (j.req.estimate - ran).max(Dur::ZERO),
                limit: None,
            }
        })
        .collect();
    let result = simulate_from(&jobs, policy, snapshot)?;
    Ok(snapshot
        .jobs
        .iter()
        .zip(&result.records)
        .map(|(j, r)| Expected {
            job: j.req.id,
            start: j.started.or(r.start),
            end: r.end,
        })
        .collect())
}

/// The engine as a [`Forecaster`], for policies that estimate from forecasts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Engine;

impl Forecaster for Engine {
    fn forecast(
        &self,
        policy: &mut dyn Policy,
        snapshot: &Snapshot,
    ) -> Result<Vec<Expected>, String> {
        forecast(policy, snapshot).map_err(|e| e.to_string())
    }
}

/// The engine as a shared [`Forecaster`], as [`Policy::set_forecaster`] takes it.
pub fn shared() -> SharedForecaster {
    SharedForecaster(Arc::new(Engine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{JobId, MachineShape, PeSet, Time};
    use cosched_policy::forecast::LiveJob;
    use cosched_policy::{Decision, Event, JobRequest, PolicyConfig, registry};

    const S: fn(i64) -> Time = Time::from_secs;
    const D: fn(i64) -> Dur = Dur::from_secs;

    /// A live policy driven by hand through submissions at `t = 0` and then the given starts'
    /// state, as a driver would: returns it and the snapshot of its jobs at `now`.
    struct Live {
        policy: Box<dyn Policy>,
        started: Vec<(JobId, PeSet, Time)>,
        machine: MachineShape,
    }

    impl Live {
        fn new(name: &str, machine: MachineShape) -> Live {
            Live {
                policy: registry::build(name, &PolicyConfig::new(machine)).unwrap(),
                started: Vec::new(),
                machine,
            }
        }
        /// One instant: these submissions, then one decision; records the starts.
        fn instant(&mut self, now: Time, submit: &[JobRequest]) {
            for r in submit {
                self.policy.observe(now, Event::Submitted(r.clone()));
            }
            let mut out = Vec::new();
            self.policy.decide(now, &mut out);
            for d in out {
                if let Decision::Start { job, pes, .. } = d {
                    self.started.push((job, pes, now));
                }
            }
        }
        fn snapshot(&self, now: Time, jobs: &[JobRequest]) -> Snapshot {
            let jobs = jobs
                .iter()
                .map(|r| {
                    let run = self.started.iter().find(|s| s.0 == r.id);
                    LiveJob {
                        req: r.clone(),
                        state: match run {
                            Some((_, pes, at)) => LiveState::Running {
                                pes: pes.clone(),
                                ran: now - *at,
                            },
                            None => LiveState::Waiting { ran: Dur::ZERO },
                        },
                        started: run.map(|s| s.2),
                        held: false,
                    }
                })
                .collect();
            Snapshot {
                introduce: false,
                machine: self.machine,
                migration: true,
                now,
                jobs,
                timers: Vec::new(),
                down: Vec::new(),
            }
        }
    }

    fn req(id: u64, procs: u32, est: i64) -> JobRequest {
        JobRequest::new(JobId(id), Time::ZERO, procs, D(est))
    }

    fn starts(f: &[Expected]) -> Vec<(u64, Option<i64>, Option<i64>)> {
        f.iter()
            .map(|e| {
                (
                    e.job.0,
                    e.start.map(|t| t.as_secs()),
                    e.end.map(|t| t.as_secs()),
                )
            })
            .collect()
    }

    /// FCFS on 4 PEs: jobs start in order, each when the one before leaves room, exactly as
    /// a queue run by hand; the running job has run 30 s of its 100.
    #[test]
    fn fcfs_forecast_is_the_queue_run_by_hand() {
        let m = MachineShape::flat(4, 1);
        let mut live = Live::new("fcfs", m);
        let jobs = vec![
            req(1, 3, 100),
            req(2, 2, 50), // waits for job 1: 3 + 2 > 4
            req(3, 2, 20), // beside job 2 at 100
            req(4, 4, 10), // after jobs 2 and 3: at 150
            req(5, 1, 5),  // FCFS: after job 4, though it would fit beside job 1
        ];
        live.instant(S(0), &jobs);
        assert_eq!(live.started.len(), 1, "only job 1 runs");
        let snap = live.snapshot(S(30), &jobs);
        let f = forecast(live.policy.boxed_clone().as_mut(), &snap).unwrap();
        assert_eq!(
            starts(&f),
            vec![
                (1, Some(0), Some(100)),
                (2, Some(100), Some(150)),
                (3, Some(100), Some(120)),
                (4, Some(150), Some(160)),
                (5, Some(160), Some(165)),
            ]
        );
        // The live policy is untouched: the same queue in the same order.
        assert_eq!(
            live.policy.queue(),
            vec![JobId(2), JobId(3), JobId(4), JobId(5)]
        );
    }

    /// A running job past its estimate is taken to end now; a held job never starts.
    #[test]
    fn overdue_jobs_end_now_and_held_jobs_never_start() {
        let m = MachineShape::flat(2, 1);
        let mut live = Live::new("fcfs", m);
        let jobs = vec![req(1, 2, 10), req(2, 2, 10), req(3, 1, 10)];
        live.instant(S(0), &jobs);
        let mut snap = live.snapshot(S(25), &jobs);
        snap.jobs[1].held = true;
        live.policy.observe(S(25), Event::Held(JobId(2)));
        let f = forecast(live.policy.boxed_clone().as_mut(), &snap).unwrap();
        assert_eq!(
            starts(&f),
            vec![
                (1, Some(0), Some(25)),
                (2, None, None),
                (3, Some(25), Some(35))
            ]
        );
    }

    /// EASY on 8 PEs against a schedule computed by hand. At t = 10: job 1 (6 PEs, estimate
    /// 100, started at 0) runs. Waiting, in order: job 2 (8 PEs, 50 s) — reserved at 100,
    /// when job 1 ends; job 3 (2 PEs, 80 s) — fits now and ends at 90 ≤ 100: backfilled at
    /// 10; job 4 (2 PEs, 200 s) — no PE free before 90 (job 3), and from 90 it would end after
    /// 100 on PEs job 2 needs: waits; job 5 (4 PEs, 30 s) — likewise. At 100 job 2 starts
    /// (all 8 PEs) and ends at 150; then job 4 and job 5 start at 150 (2 + 4 ≤ 8).
    #[test]
    fn easy_forecast_matches_a_hand_computed_schedule() {
        let m = MachineShape::flat(8, 1);
        let mut live = Live::new("easy", m);
        let j1 = req(1, 6, 100);
        live.instant(S(0), std::slice::from_ref(&j1));
        let rest = vec![req(2, 8, 50), req(3, 2, 80), req(4, 2, 200), req(5, 4, 30)];
        let rest: Vec<JobRequest> = rest
            .into_iter()
            .map(|mut r| {
                r.submit = S(10);
                r
            })
            .collect();
        live.instant(S(10), &rest);
        // Job 3 is backfilled at once by the live policy.
        assert_eq!(
            live.started.iter().map(|s| s.0.0).collect::<Vec<_>>(),
            vec![1, 3]
        );
        let mut all = vec![j1];
        all.extend(rest);
        let snap = live.snapshot(S(10), &all);
        let f = forecast(live.policy.boxed_clone().as_mut(), &snap).unwrap();
        assert_eq!(
            starts(&f),
            vec![
                (1, Some(0), Some(100)),
                (2, Some(100), Some(150)),
                (3, Some(10), Some(90)),
                (4, Some(150), Some(350)),
                (5, Some(150), Some(180)),
            ]
        );
    }

    /// The forecast of a time-sharing policy continues its pending timers: gang with two
    /// slots of one PE each, quantum 10 s. Job 1 runs in slot 0 from 0, job 2 is placed in
    /// slot 1; the snapshot is taken at 5 with the switch timer due at 10.
    #[test]
    fn pending_timers_carry_on_in_the_forecast() {
        let m = MachineShape::flat(1, 1);
        let mut cfg = PolicyConfig::new(m);
        cfg.quantum = Some(D(10));
        let mut p = registry::build("gang", &cfg).unwrap();
        let mut out = Vec::new();
        let jobs = vec![req(1, 1, 15), req(2, 1, 15)];
        for r in &jobs {
            p.observe(S(0), Event::Submitted(r.clone()));
        }
        p.decide(S(0), &mut out);
        let mut timers = Vec::new();
        let mut state = Vec::new();
        for d in &out {
            match d {
                Decision::Start { job, pes, .. } => state.push((*job, pes.clone(), true)),
                Decision::Place { job, pes, .. } => state.push((*job, pes.clone(), false)),
                Decision::SetTimer { at, token } => timers.push((*at, *token)),
                _ => {}
            }
        }
        assert_eq!(state.len(), 2, "{out:?}");
        assert!(!timers.is_empty(), "gang sets its quantum timer: {out:?}");
        let now = S(5);
        let snap = Snapshot {
            introduce: false,
            machine: m,
            migration: true,
            now,
            jobs: jobs
                .iter()
                .map(|r| {
                    let (_, pes, running) = state.iter().find(|s| s.0 == r.id).unwrap();
                    LiveJob {
                        req: r.clone(),
                        state: if *running {
                            LiveState::Running {
                                pes: pes.clone(),
                                ran: D(5),
                            }
                        } else {
                            LiveState::Stopped {
                                pes: pes.clone(),
                                ran: Dur::ZERO,
                            }
                        },
                        started: running.then_some(S(0)),
                        held: false,
                    }
                })
                .collect(),
            timers,
            down: Vec::new(),
        };
        let f = forecast(p.boxed_clone().as_mut(), &snap).unwrap();
        // Slices of 10 s, the two alternating: job 1 0-10 and 20-25; job 2 10-20 and 25-30.
        assert_eq!(
            starts(&f),
            vec![(1, Some(0), Some(25)), (2, Some(10), Some(30))]
        );
    }

    /// A fresh policy that has seen nothing is told the snapshot first (as Scojo-PECT's
    /// estimates do): a hello for the job holding PEs, submissions for the others, a node
    /// down. FCFS on 4 PEs with node (PE) 3 down: job 9 holds PEs 0-1 until 40 (10 of its 40
    /// s done); job 1 (2 PEs) finds only PE 2 free and waits until 40; job 2 (1 PE) would fit
    /// on PE 2 but waits behind job 1 (FCFS) and starts with it at 40.
    #[test]
    fn a_fresh_policy_is_introduced_to_the_snapshot() {
        let m = MachineShape::flat(4, 1);
        let mut fresh = registry::build("fcfs", &PolicyConfig::new(m)).unwrap();
        let live = |id, procs, est, state| LiveJob {
            req: req(id, procs, est),
            state,
            started: None,
            held: false,
        };
        let snap = Snapshot {
            introduce: true,
            machine: m,
            migration: true,
            now: S(10),
            jobs: vec![
                live(
                    9,
                    2,
                    40,
                    LiveState::Running {
                        pes: PeSet::contiguous(0, 2),
                        ran: D(10),
                    },
                ),
                live(1, 2, 5, LiveState::Waiting { ran: Dur::ZERO }),
                live(2, 1, 5, LiveState::Waiting { ran: Dur::ZERO }),
            ],
            timers: Vec::new(),
            down: vec![cosched_core::NodeId(3)],
        };
        let f = forecast(fresh.as_mut(), &snap).unwrap();
        assert_eq!(
            starts(&f),
            vec![
                (9, None, Some(40)),
                (1, Some(40), Some(45)),
                (2, Some(40), Some(45)),
            ]
        );
    }
}
