//! The job-level discrete-event simulator: drives cosched-policy in virtual time; metrics,
//! sweeps, plots.
//!
//! - [`engine`]: the driver ([`simulate`]): integer time, deterministic event order, checks of
//!   every decision against the policy contract, all of [`cosched_policy::Decision`].
//! - [`trace`]: SWF records → jobs under explicit trace semantics, and the schedule back to SWF.
//! - [`metrics`]: wait, response, (bounded) slowdown, utilization, breakdowns, batch means.

pub mod engine;
pub mod metrics;
pub mod trace;

pub use engine::{EngineOptions, SimError, SimJob, SimResult, simulate};
