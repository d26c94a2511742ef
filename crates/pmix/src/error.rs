//! The server's errors: what went wrong, and what to do about it.
#![forbid(unsafe_code)]

use crate::status::Status;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The crate was compiled where pkg-config found no OpenPMIx.
    #[error(
        "this cosched was built without OpenPMIx: install libpmix-dev (and pkg-config) and rebuild"
    )]
    NotBuilt,
    /// One server per process, for the life of the process.
    #[error(
        "a PMIx server was already started in this process (one per process, also after a shutdown): keep the first `Server` and register every job with it"
    )]
    AlreadyStarted,
    /// A call into OpenPMIx failed.
    #[error("{call} failed: {status}")]
    Pmix { call: String, status: Status },
    /// A string handed to the server cannot be passed to C.
    #[error("{what} contains a NUL byte: {value:?}")]
    Nul { what: &'static str, value: String },
    /// A blocking call was made from inside the event sink, which runs on OpenPMIx's progress
    /// thread: the call would wait for that very thread.
    #[error(
        "{call} was called from inside the PMIx event sink (the library's progress thread), where it would deadlock: pass the event to another thread and call from there"
    )]
    OnProgressThread { call: &'static str },
    /// A job layout that cannot be registered.
    #[error("job layout for namespace {nspace:?}: {problem}")]
    Layout { nspace: String, problem: String },
    /// The node is not one of the job's nodes.
    #[error("node {node:?} is not one of the nodes of namespace {nspace:?} ({nodes})")]
    NotANode {
        nspace: String,
        node: String,
        nodes: String,
    },
}
