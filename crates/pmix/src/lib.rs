//! A PMIx server for cosched's node manager, on OpenPMIx's server library (as Slurm, Flux,
//! OpenPBS and ParaStation serve PMIx), so that Open MPI, mpi4py and every MPI built against
//! PMIx start under `cosched submit` without `mpirun`.
//!
//! The caller (the node manager) drives it without sharing its I/O:
//!
//! - [`Server::start`] once per process, with a sink that receives [`Event`]s on OpenPMIx's
//!   progress thread (pass them to a channel);
//! - per job, [`Server::register_job`] with its [`JobLayout`] (the keys MPI libraries read at
//!   start-up: sizes, local ranks and peers, node and process maps, ids), then per local rank
//!   [`Server::register_client`] and [`Server::client_env`] (the variables the rank needs to
//!   find the server); [`Server::deregister_client`] and [`Server::deregister_job`] after;
//! - requests come as events: a fence's local contribution ([`Event::Fence`]: gather every
//!   node's, answer with the concatenation), a rank's want of a remote rank's data
//!   ([`Event::DirectModex`]: ask that node, whose caller calls [`Server::local_modex`] and
//!   gets [`Event::LocalModex`]), `MPI_Abort` ([`Event::Abort`]), the name service
//!   ([`Event::Publish`], [`Event::Lookup`], [`Event::Unpublish`]). Each request carries a
//!   reply handle answered later, from any thread; one dropped unanswered answers an error,
//!   so no rank waits forever;
//! - spawn, connect, tools, allocation and job control are refused at once with
//!   `PMIX_ERR_NOT_SUPPORTED` (the rank's call fails) and reported as [`Event::Refused`].
//!
//! ```no_run
//! use cosched_pmix::{Event, JobLayout, JobNode, Server};
//! let (tx, rx) = std::sync::mpsc::channel();
//! let server = Server::start("/run/cosched/pmix".as_ref(), "node0", move |e| {
//!     let _ = tx.send(e);
//! })?;
//! let job = JobLayout::new("cosched.42", vec![JobNode { host: "node0".into(), ranks: vec![0, 1] }])?;
//! server.register_job(&job, "node0", None)?;
//! for rank in 0..2 {
//!     server.register_client("cosched.42", rank, 1000, 1000)?;
//!     let env = server.client_env("cosched.42", rank)?; // set these in the rank's environment
//!     # let _ = env;
//! }
//! for event in rx {
//!     match event {
//!         // One node: the fence's data is everybody's.
//!         Event::Fence { data, reply, .. } => reply.ok(&data),
//!         Event::Abort { client, status, .. } => { eprintln!("{client} aborted with {status}"); break }
//!         _ => {}
//!     }
//! }
//! # Ok::<(), cosched_pmix::Error>(())
//! ```
//!
//! **Built without OpenPMIx.** When pkg-config finds no `pmix` (Debian: `libpmix-dev`), the
//! crate still builds, with a stand-in: [`Server::start`] returns [`Error::NotBuilt`], which
//! says to install libpmix-dev and pkg-config and rebuild. So `cargo build` needs only Rust
//! and a C compiler.
//!
//! Modules: `layout` (the registration, pure), `event` (events and reply handles), `server`
//! (the calls), `status`, `error`, and `sys`, the C glue (`src/sys/glue.c`) and its
//! bindings, the crate's only unsafe code.
#![deny(unsafe_code)]

mod error;
mod event;
pub mod helper;
mod layout;
mod names;
mod server;
mod status;
mod sys;

pub use error::Error;
pub use event::{Event, LookupReply, ModexReply, OpReply, Proc, Published, Range, Refusal};
pub use layout::{Info, JobLayout, JobNode, Value, keys};
pub use names::Names;
pub use server::{OPEN_MPI_ENV, OPEN_MPI_OVERSUBSCRIBED, Server};
pub use status::Status;

/// Whether this build has OpenPMIx (false: [`Server::start`] returns [`Error::NotBuilt`]).
pub const AVAILABLE: bool = sys::AVAILABLE;
