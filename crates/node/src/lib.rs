//! Node-level coscheduling logic as pure state machines: no clock, no I/O. Time arrives as an
//! argument, so the process-level simulator (`cosched-cosim`) and a real node manager can drive
//! the same code.
//!
//! - [`scheme`]: the names of the schemes (LOCAL, IB, SB, DCS, PB, SB+PROC, PB+PROC, GS, FCS,
//!   FCFS) and what each does when a process waits for a message or a message arrives.
//! - [`mlfq`]: the local OS scheduler, a multilevel feedback queue in the style of the Solaris
//!   time-sharing class (60 levels, quantum per level, drop on expiry, raise on wake-up).
//! - [`fcs`]: flexible coscheduling — the per-process statistics, the CS/F/DC classes, the
//!   reclassification heuristic and the adaptive spin time.
//! - [`reorder`]: PROC — the load-imbalance information piggybacked on messages and the
//!   process reordering of Algorithm 1 (expected remaining time, candidate set).
//! - [`sched`]: [`NodeScheduler`], one node's dispatcher: which process runs on which PE, the
//!   spin/block decision, boosts, interrupts, gang slots and the FCS context switch.

#![forbid(unsafe_code)]

pub mod fcs;
pub mod mlfq;
pub mod reorder;
pub mod sched;
pub mod scheme;

pub use fcs::{FCS_KEYS, FcsParamError, FcsParams, FcsProc, ProcClass};
pub use reorder::{LoadInfo, ProcOptions};
pub use sched::{Action, NodeScheduler, Pick, ProcId, SchedParams, WaitPolicy};
pub use scheme::{Scheme, UnknownScheme};
