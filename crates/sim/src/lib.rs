//! The job-level discrete-event simulator: drives cosched-policy in virtual time; metrics,
//! sweeps, plots.
//!
//! - [`engine`]: the driver ([`simulate`]): integer time, instants (the policy observes every
//!   event of one time, then decides once), deterministic event order. What each
//!   [`cosched_policy::Decision`] means, the checks of the policy contract and the
//!   [`cosched_core::JobRecord`]s are the job ledger's (`cosched-ledger`), shared with the
//!   machine manager; a broken promise ends the run with [`SimError::Ledger`].
//! - [`forecast`]: expected starts and ends of the live jobs, by running a copy of the live
//!   policy forward on this engine from a snapshot (`cosched queue --forecast`, Scojo-PECT's
//!   response-time estimates).
//! - [`trace`]: SWF records → jobs under explicit trace semantics, and the schedule back to SWF.
//! - [`metrics`]: wait, response, (bounded) slowdown, utilization, breakdowns, batch means.
//! - `rates` (private): progress rates on multi-core nodes (seed 001): the engine reprices the
//!   jobs of a node when a job starts or stops there, and refuses a third job on a node.
//! - [`multicore_metrics`]: seed 001's figures: RR by job type, node and core utilization
//!   overall and in high-load phases, groups.
//! - [`setup`]: workload sources (trace, Lublin model). The policy configuration is built by
//!   `cosched_policy::policy_config`, as in the machine manager.
//! - [`run`]: one run start to finish ([`run::run`] of a [`run::RunSpec`]): build the policy,
//!   prepare the workload, simulate (optionally observed), summarise. `cosched sim` runs it once,
//!   [`sweep`] once per cell.
//! - [`batsim_jobs`]: the schedule as Batsim's `jobs.csv`, for evalys and Batsim's tools.
//! - [`report`]: what a run writes: the per-job CSV, the SWF schedule with its note, the
//!   matrix drawing.
//! - [`sweep`]: policies × loads × seeds in parallel; the table and the Fig. 6-style chart.
//! - [`plot`]: line charts as PNG/SVG with an embedded font (reusable for other figures).
//! - [`timeshare_metrics`]: preemptions, quanta and interactive slowdowns of time-sharing runs.
//! - [`matrix_svg`]: the Ousterhout matrix over a time window, as SVG.

mod ahead;
pub mod batsim_jobs;
pub mod engine;
pub mod forecast;
pub mod gantt;
pub mod matrix_svg;
pub mod metrics;
pub mod multicore_metrics;
pub mod plot;
pub mod provenance;
mod rates;
pub mod report;
pub mod run;
pub mod setup;
pub mod sweep;
pub mod timeshare_metrics;
pub mod trace;

pub use engine::{EngineOptions, SimError, SimJob, SimResult, simulate};
