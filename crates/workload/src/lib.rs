//! Workloads for cosched: real traces in the Standard Workload Format of the Parallel
//! Workloads Archive, and synthetic ones from the Lublin–Feitelson model.
//!
//! - [`swf`]: streaming reader (plain or gzip) and writer for SWF 2.2, with the header labels.
//! - [`batsim`]: Batsim's JSON workload (delay profiles), read into SWF records and written
//!   from them.
//! - [`lublin`]: the Lublin–Feitelson (1999/2003) model of rigid parallel jobs.
//! - [`feitelson97`]: seed 002's model (Poisson arrivals, three-stage hyperexponential
//!   runtimes that grow with size, re-runs), for its Fig. 6.
//! - [`transform`]: offered load, load rescaling, time compression, first-N and windows, and
//!   [`transform::apply`], the pipeline of `cosched workload transform` (window, first,
//!   compress, load, in that order, noted in the header).
//! - [`summary`]: the figures `cosched workload info` prints, as a serialisable struct.
//! - [`shared`]: where the archive logs beside the repository are, for tests and benchmarks.
//!
//! ```
//! use cosched_workload::{lublin, summary, transform};
//! let trace = lublin::generate(&lublin::GenOptions { jobs: 500, procs: 64, seed: 7,
//!     load: Some(0.7), ..Default::default() });
//! assert_eq!(trace.records.len(), 500);
//! assert!((transform::offered_load(&trace.records, 64) - 0.7).abs() < 1e-3);
//! let s = summary::summarize(&trace, "model");
//! assert_eq!(s.jobs, 500);
//! ```

#![forbid(unsafe_code)]

pub mod batsim;
pub mod feitelson97;
pub mod lublin;
pub mod shared;
pub mod summary;
pub mod swf;
pub mod transform;

pub use lublin::{GenOptions, LublinParams, generate};
pub use summary::{Summary, summarize};
pub use swf::{
    Oversize, ReadOptions, ReadReport, Reader, SwfError, SwfHeader, SwfRecord, Trace, read_trace,
    write_trace,
};
