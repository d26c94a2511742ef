//! The shared vocabulary of cosched.
//!
//! Every other crate — the job-level simulator, the process-level simulator and the real
//! daemons — speaks in these types, so that a simulated run and a real one produce records
//! that can be set side by side. Nothing here does I/O or reads a clock.
//!
//! - [`time`]: integer time ([`Time`], [`Dur`]) in microseconds, with parsing of `10s`, `50ms`.
//! - [`ids`]: [`JobId`], [`NodeId`], [`PeId`].
//! - [`machine`]: the shape of a machine (nodes × sockets × cores) and its PE numbering.
//! - [`multicore`]: seed 001's multi-core nodes: slowdowns (Table 4), where a job's processes
//!   sit on a node (Fig. 12), formulas 7 and 11.
//! - [`pes`]: [`PeSet`], a compact set of PEs; [`bits`]: [`PeBits`], a bitset over PE numbers.
//! - [`job`]: what a user asks for ([`JobSpec`]) and what happened ([`JobRecord`]).
//!
//! ```
//! use cosched_core::{Dur, MachineShape, Time};
//! let m = MachineShape::flat(4, 2);
//! assert_eq!(m.total_pes(), 8);
//! let t = Time::from_secs(3) + Dur::parse("500ms").unwrap();
//! assert_eq!(t.as_micros(), 3_500_000);
//! ```

#![forbid(unsafe_code)]

pub mod bits;
pub mod ids;
pub mod job;
pub mod machine;
pub mod multicore;
pub mod pes;
pub mod time;

pub use bits::PeBits;
pub use ids::{IdHasher, IdMap, JobId, NodeId, PeId};
pub use job::{JobRecord, JobSpec, Outcome};
pub use machine::MachineShape;
pub use multicore::{Milli, SelfLimits, Slowdowns};
pub use pes::PeSet;
pub use time::{Dur, ParseDurError, Time};
