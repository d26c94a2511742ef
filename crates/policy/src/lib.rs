//! Job-level scheduling policies: pure state machines, written once and driven twice — by the
//! discrete-event simulator (`cosched-sim`) in virtual time and by the machine manager
//! (`cosched-mm`) in real time.
//!
//! A driver hands a policy time in instants: it gives every [`Event`] of one time to
//! [`Policy::observe`], then calls [`Policy::decide`] once, and the policy answers with
//! [`Decision`]s (a job that can never run here is answered with [`Decision::Reject`] and a
//! typed [`Never`] reason). The time is an argument: a policy never reads a clock, opens a
//! file or spawns anything, and it never sees a job's actual runtime, only what a real
//! scheduler would know ([`JobRequest`]). The job ledger (`cosched-ledger`) gives every
//! decision one meaning in both drivers and checks the policy's promises.
//!
//! - [`api`]: the contract, the [`Policy`] trait, events, decisions, the views a status tool
//!   reads.
//! - [`config`]: [`PolicyConfig`] and its one builder from options and a TOML file.
//! - [`forecast`]: a snapshot of the live jobs and their expected starts, and the
//!   [`forecast::Forecaster`] seam through which the simulator's engine forecasts for a
//!   driver or a policy.
//! - [`registry`]: policies by name; adding a policy is adding a file and one line there.
//! - [`pool`]: [`PePool`], free-PE bookkeeping shared by the space-sharing policies.
//! - [`queue`]: the waiting queue, holds, refused submissions and the event plumbing shared
//!   by the queue-based policies, so each policy file keeps only its rule.
//! - `opts`: typed reading of a policy's named options; keys a policy does not read are
//!   refused.
//! - [`profile`]: running jobs by expected end and the availability profile, for backfilling.
//! - [`easy`], [`conservative`]: EASY and conservative backfilling.
//! - [`external`]: `external:CMD`, a policy in any language run as a child process that
//!   speaks JSON lines (`docs/external-policies.md`).
//! - [`gang`]: gang scheduling on an Ousterhout matrix (packing, MPL, quanta, alternate
//!   scheduling); [`prime`]: prime/non-prime; [`t3d`]: the Cray T3D class-based gang scheduler.
//! - [`scojo`]: Scojo-PECT coarse-grain time slicing on multi-core nodes, with G-LOMARC-TS
//!   group matchmaking ([`scojo::glomarc`]) in its medium and long slices (seed 001).
//!
//! ```
//! use cosched_core::{Dur, JobId, MachineShape, Time};
//! use cosched_policy::{Decision, Event, JobRequest, PolicyConfig, registry};
//!
//! let cfg = PolicyConfig::new(MachineShape::flat(4, 1));
//! let mut fcfs = registry::build("fcfs", &cfg).unwrap();
//! let mut out = Vec::new();
//! let job = |id, procs| JobRequest::new(JobId(id), Time::ZERO, procs, Dur::from_secs(60));
//! // One instant: observe its events, then decide once.
//! fcfs.observe(Time::ZERO, Event::Submitted(job(1, 2)));
//! fcfs.observe(Time::ZERO, Event::Submitted(job(2, 8)));
//! fcfs.decide(Time::ZERO, &mut out);
//! // Job 2 asks for 8 PEs of a 4-PE machine: it can never run here, and says why.
//! assert!(matches!(out[0], Decision::Reject { job: JobId(2), .. }));
//! assert!(matches!(out[1], Decision::Start { job: JobId(1), .. }));
//! ```

#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod conservative;
pub mod easy;
pub mod external;
pub mod fcfs;
pub mod forecast;
pub mod gang;
pub(crate) mod opts;
pub mod pool;
pub mod prime;
pub mod profile;
pub mod queue;
pub mod registry;
pub mod scojo;
pub mod spread;
pub mod t3d;
#[cfg(test)]
mod testing;

pub use api::{CyclePoint, Decision, Event, JobRequest, MatrixView, Never, Policy, SlotView};
pub use config::{ConfigError, PolicyConfig, PolicyOptions, policy_config};
pub use pool::PePool;
pub use spread::Spread;
