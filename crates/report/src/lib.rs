//! Runs of the job-level simulator (`cosched-sim`) and what they report: metrics, sweeps,
//! plots, Gantt charts, provenance and the files a run writes.
//!
//! - [`setup`]: workload sources (trace, Lublin model). The policy configuration is built by
//!   `cosched_policy::policy_config`, as in the machine manager.
//! - [`run`]: one run start to finish ([`run::run`] of a [`run::RunSpec`]): build the policy,
//!   prepare the workload, simulate (optionally observed), summarise. `cosched sim` runs it once,
//!   [`sweep`] once per cell.
//! - [`metrics`]: wait, response, (bounded) slowdown, utilization, breakdowns, batch means.
//! - [`multicore_metrics`]: seed 001's figures: RR by job type, node and core utilization
//!   overall and in high-load phases, groups.
//! - [`timeshare_metrics`]: preemptions, quanta and interactive slowdowns of time-sharing runs.
//! - [`run_files`]: what a run writes besides its summary: the per-job CSV, the SWF schedule
//!   with its note, the matrix drawing.
//! - [`batsim_jobs`]: the schedule as Batsim's `jobs.csv`, for evalys and Batsim's tools.
//! - [`sweep`]: policies × loads × seeds in parallel; the table and the Fig. 6-style chart.
//! - [`sweep_array`]: a sweep as a job array on whatever answers `sbatch`: the pinned spec,
//!   one point per task, the gather that merges them into a local sweep's files.
//! - [`table`]: plain tables of figures as text, for every command that prints one.
//! - [`plot`]: line charts as PNG/SVG with an embedded font (reusable for other figures).
//! - [`gantt`]: the schedule as a Gantt chart.
//! - [`matrix_svg`]: the Ousterhout matrix over a time window, as SVG.
//! - [`provenance`]: where an output came from (cosched's version, the command line, the
//!   input's hash), carried by every file a run writes.

#![forbid(unsafe_code)]

pub mod batsim_jobs;
pub mod compare;
pub mod gantt;
pub mod matrix_svg;
pub mod metrics;
pub mod multicore_metrics;
pub mod plot;
pub mod provenance;
pub mod replay;
pub mod run;
pub mod run_files;
pub mod setup;
pub mod sweep;
pub mod sweep_array;
pub mod table;
pub mod timeshare_metrics;
