//! The job-level discrete-event simulator's engine: drives cosched-policy in virtual time.
//! What a run reports (metrics, sweeps, plots, output files) is `cosched-report`'s; this crate
//! stays small because the machine manager depends on it for [`forecast`].
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
//! - [`ahead`]: the reading thread maps the pages a streamed simulation will write next.
//! - `rates` (private): progress rates on multi-core nodes (seed 001): the engine reprices the
//!   jobs of a node when a job starts or stops there, and refuses a third job on a node.
//! - [`progress`]: how far a run got, published for a progress bar on another thread.

pub mod ahead;
pub mod engine;
pub mod forecast;
pub mod progress;
mod rates;
pub mod trace;

pub use engine::{EngineOptions, SimError, SimJob, SimResult, simulate};
