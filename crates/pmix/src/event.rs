//! What the server hands its caller: typed events, and for the requests that wait for an
//! answer, a reply handle the caller answers later, from any thread.
//!
//! A reply handle is answered exactly once: its methods take it by value, and one dropped
//! unanswered answers with an error (`PMIX_ERR_UNREACH` for a modex, `PMIX_ERROR` otherwise),
//! so a rank never waits for an answer that cannot come.
#![forbid(unsafe_code)]

use crate::status::Status;
use crate::sys::{self, Request};

/// A process: its namespace and rank. The rank [`Proc::WILDCARD`] stands for every rank of
/// the namespace.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Proc {
    pub nspace: String,
    pub rank: u32,
}

impl Proc {
    /// PMIx's `PMIX_RANK_WILDCARD`: all ranks of the namespace.
    pub const WILDCARD: u32 = u32::MAX - 1;
    /// PMIx's `PMIX_RANK_UNDEF`.
    pub const UNDEF: u32 = u32::MAX;

    pub fn new(nspace: impl Into<String>, rank: u32) -> Proc {
        Proc {
            nspace: nspace.into(),
            rank,
        }
    }
}

impl std::fmt::Display for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.rank {
            Proc::WILDCARD => write!(f, "{}:*", self.nspace),
            r => write!(f, "{}:{r}", self.nspace),
        }
    }
}

/// Where published names are visible (PMIx's data ranges, as the rank asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// The rank named none: the PMIx default, the whole session.
    Default,
    Local,
    Namespace,
    Session,
    Global,
    /// Another of PMIx's range codes (resource manager, custom, the process alone).
    Other(i32),
}

impl Range {
    fn from_code(code: i32) -> Range {
        match code {
            -1 | 0 => Range::Default,
            2 => Range::Local,
            3 => Range::Namespace,
            4 => Range::Session,
            5 => Range::Global,
            c => Range::Other(c),
        }
    }
}

/// A request the server refuses by itself, reported so the caller can say so in the job's
/// output: the rank's call has already failed with `PMIX_ERR_NOT_SUPPORTED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `PMIx_Spawn` (`MPI_Comm_spawn`): starting processes outside the job's allocation.
    Spawn,
    /// `PMIx_Connect` (`MPI_Comm_connect`/`accept`, `MPI_Intercomm_create` across jobs).
    Connect,
    /// `PMIx_Disconnect`.
    Disconnect,
    /// A tool (debugger, `pmix_info`-like query) asking to connect.
    Tool,
    /// `PMIx_Allocation_request`.
    Allocate,
    /// A `PMIx_Publish` of a value that is not a string (only strings are served).
    PublishedValueType,
}

impl Refusal {
    /// What the refusal means, for the job's output.
    pub fn explain(self) -> &'static str {
        match self {
            Refusal::Spawn => {
                "MPI_Comm_spawn / PMIx_Spawn is not supported by cosched: submit every process of the job at once"
            }
            Refusal::Connect => {
                "MPI_Comm_connect/accept / PMIx_Connect is not supported by cosched"
            }
            Refusal::Disconnect => "PMIx_Disconnect is not supported by cosched",
            Refusal::Tool => "PMIx tools cannot connect to cosched's PMIx server",
            Refusal::Allocate => "PMIx_Allocation_request is not supported by cosched",
            Refusal::PublishedValueType => {
                "PMIx_Publish of a value that is not a string is not supported by cosched"
            }
        }
    }

    fn from_code(code: i32) -> Option<Refusal> {
        Some(match code {
            1 => Refusal::Spawn,
            2 => Refusal::Connect,
            3 => Refusal::Disconnect,
            4 => Refusal::Tool,
            5 => Refusal::Allocate,
            6 => Refusal::PublishedValueType,
            _ => return None,
        })
    }
}

/// A name a rank published, as a lookup finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub owner: Proc,
    pub key: String,
    pub value: String,
}

/// What the server asks of, or tells, its caller. Events come from OpenPMIx's progress
/// thread through the sink given to [`crate::Server::start`].
#[derive(Debug)]
pub enum Event {
    /// A registered rank connected (its `PMIx_Init`).
    ClientConnected { client: Proc },
    /// A rank called `PMIx_Finalize`.
    ClientFinalized { client: Proc },
    /// A rank called `PMIx_Abort` (`MPI_Abort`): the job should end with `status`. The rank
    /// has been answered and exits by itself; ending the others is the caller's part.
    /// `targets` is empty when the rank named no processes (its whole namespace).
    Abort {
        client: Proc,
        status: i32,
        message: String,
        targets: Vec<Proc>,
    },
    /// Every local participant of a fence entered it: `data` is this node's contribution.
    /// The caller gathers every node's contribution of the same fence and answers with them
    /// all concatenated (any order); a fence among this node's ranks only is answered with
    /// `data` itself.
    Fence {
        procs: Vec<Proc>,
        data: Vec<u8>,
        /// The ranks asked for the data (`PMIX_COLLECT_DATA`); without it an empty answer
        /// does.
        collect: bool,
        reply: ModexReply,
    },
    /// A local rank wants the data of `target`, a rank on another node: the caller asks that
    /// node (whose caller calls [`crate::Server::local_modex`]) and answers with its blob.
    DirectModex { target: Proc, reply: ModexReply },
    /// The answer to [`crate::Server::local_modex`]: what `target` (a rank of this node) put,
    /// for the node that asked.
    LocalModex {
        tag: u64,
        target: Proc,
        result: Result<Vec<u8>, Status>,
    },
    /// `PMIx_Publish` (`MPI_Publish_name`).
    Publish {
        client: Proc,
        names: Vec<(String, String)>,
        range: Range,
        reply: OpReply,
    },
    /// `PMIx_Lookup` (`MPI_Lookup_name`); `wait`: the rank asked to wait until the names are
    /// published (`PMIX_WAIT`) rather than be told they are not found.
    Lookup {
        client: Proc,
        keys: Vec<String>,
        range: Range,
        wait: bool,
        reply: LookupReply,
    },
    /// `PMIx_Unpublish` (`MPI_Unpublish_name`); no keys means all the rank's names.
    Unpublish {
        client: Proc,
        keys: Vec<String>,
        range: Range,
        reply: OpReply,
    },
    /// A request the server refused by itself (see [`Refusal`]); `client` is absent for a
    /// tool, which is not a rank. A refused collective (`PMIx_Connect`, `PMIx_Disconnect`)
    /// comes once for every proc it lists, of every namespace and node: the server does not
    /// say which of them called here.
    Refused {
        client: Option<Proc>,
        request: Refusal,
    },
}

/// The answer to a fence or a direct modex: bytes the PMIx library made on the nodes
/// involved, handed back untouched.
#[derive(Debug)]
pub struct ModexReply(Option<Request>);

impl ModexReply {
    /// Answers with the data.
    pub fn ok(mut self, data: &[u8]) {
        if let Some(req) = self.0.take() {
            sys::reply_modex(req, 0, data);
        }
    }

    /// Answers with an error: the ranks' fence or get fails with `status`.
    pub fn fail(mut self, status: Status) {
        if let Some(req) = self.0.take() {
            sys::reply_modex(req, status.0, &[]);
        }
    }
}

impl Drop for ModexReply {
    fn drop(&mut self) {
        if let Some(req) = self.0.take() {
            sys::reply_modex(req, Status::UNREACH.0, &[]);
        }
    }
}

/// The answer to a publish or unpublish: done, or an error.
#[derive(Debug)]
pub struct OpReply(Option<Request>);

impl OpReply {
    pub fn ok(mut self) {
        if let Some(req) = self.0.take() {
            sys::reply_op(req, 0);
        }
    }

    pub fn fail(mut self, status: Status) {
        if let Some(req) = self.0.take() {
            sys::reply_op(req, status.0);
        }
    }
}

impl Drop for OpReply {
    fn drop(&mut self) {
        if let Some(req) = self.0.take() {
            sys::reply_op(req, Status::ERROR.0);
        }
    }
}

/// The answer to a lookup: the names found, or an error (`Status::NOT_FOUND` for none).
#[derive(Debug)]
pub struct LookupReply(Option<Request>);

impl LookupReply {
    pub fn found(mut self, names: &[Published]) {
        if let Some(req) = self.0.take() {
            let flat: Vec<_> = names
                .iter()
                .map(|p| (p.owner.clone(), p.key.clone(), p.value.clone()))
                .collect();
            sys::reply_lookup(req, 0, &flat);
        }
    }

    pub fn fail(mut self, status: Status) {
        if let Some(req) = self.0.take() {
            sys::reply_lookup(req, status.0, &[]);
        }
    }
}

impl Drop for LookupReply {
    fn drop(&mut self) {
        if let Some(req) = self.0.take() {
            sys::reply_lookup(req, Status::ERROR.0, &[]);
        }
    }
}

/// The kinds of the glue's event record (`CSP_EV_*` in glue.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawKind {
    Connected,
    Finalized,
    Abort,
    Fence,
    DirectModex,
    Publish,
    Lookup,
    Unpublish,
    Refused,
    LocalModex,
}

impl RawKind {
    pub(crate) fn from_code(code: i32) -> Option<RawKind> {
        Some(match code {
            1 => RawKind::Connected,
            2 => RawKind::Finalized,
            3 => RawKind::Abort,
            4 => RawKind::Fence,
            5 => RawKind::DirectModex,
            6 => RawKind::Publish,
            7 => RawKind::Lookup,
            8 => RawKind::Unpublish,
            9 => RawKind::Refused,
            10 => RawKind::LocalModex,
            _ => return None,
        })
    }
}

/// The glue's event record copied into Rust values, before it is given its type.
#[derive(Debug)]
pub(crate) struct RawEvent {
    pub kind: RawKind,
    pub client: Proc,
    pub status: i32,
    pub message: String,
    pub procs: Vec<Proc>,
    pub data: Vec<u8>,
    pub flag: i32,
    pub range: i32,
    pub keys: Vec<String>,
    pub values: Vec<String>,
    pub tag: u64,
    pub req: Option<Request>,
}

impl RawEvent {
    /// The typed event; `None` for a record that does not make one (a request record
    /// missing, which the glue never sends).
    pub(crate) fn into_event(self) -> Option<Event> {
        let RawEvent {
            kind,
            client,
            status,
            message,
            procs,
            data,
            flag,
            range,
            keys,
            values,
            tag,
            req,
        } = self;
        let range = Range::from_code(range);
        Some(match kind {
            RawKind::Connected => Event::ClientConnected { client },
            RawKind::Finalized => Event::ClientFinalized { client },
            RawKind::Abort => Event::Abort {
                client,
                status,
                message,
                targets: procs,
            },
            RawKind::Fence => Event::Fence {
                procs,
                data,
                collect: flag != 0,
                reply: ModexReply(Some(req?)),
            },
            RawKind::DirectModex => Event::DirectModex {
                target: client,
                reply: ModexReply(Some(req?)),
            },
            RawKind::LocalModex => Event::LocalModex {
                tag,
                target: client,
                result: if status == 0 {
                    Ok(data)
                } else {
                    Err(Status(status))
                },
            },
            RawKind::Publish => Event::Publish {
                client,
                names: keys.into_iter().zip(values).collect(),
                range,
                reply: OpReply(Some(req?)),
            },
            RawKind::Lookup => Event::Lookup {
                client,
                keys,
                range,
                wait: flag != 0,
                reply: LookupReply(Some(req?)),
            },
            RawKind::Unpublish => Event::Unpublish {
                client,
                keys,
                range,
                reply: OpReply(Some(req?)),
            },
            RawKind::Refused => Event::Refused {
                client: (!client.nspace.is_empty()).then_some(client),
                request: Refusal::from_code(status)?,
            },
        })
    }
}
