//! What the daemons and the clients say to each other (postcard inside authenticated frames).
//!
//! - A peer connecting to the machine manager sends one [`Hello`] first: a node manager
//!   registering, or a client request (one request, one [`Response`], then the connection
//!   closes).
//! - The machine manager talks to node managers only through the tree: [`ToNode`] payloads of
//!   XFER-AND-SIGNAL going down, [`FromNode`] payloads of signals coming up.
//!
//! The messages of each conversation have their file: `node` (registration and the tree),
//! `requests` (a client's) and `responses` (the machine manager's answers); this module keeps
//! the greeting, the stamps and versions, and the constants the daemons share.

use cosched_core::{JobId, JobRecord, NodeId};

pub use crate::jobio::{JobIo, WarnSignal};
pub use crate::start_conditions::{ArraySpec, ArrayTask, DepKind, Dependency, Schedule};
use serde::{Deserialize, Serialize};

mod node;
mod requests;
mod responses;

pub use node::*;
pub use requests::*;
pub use responses::*;

/// Node variable written by every heartbeat (its sequence number); COMPARE checks it.
pub const VAR_HEARTBEAT: u32 = 1;
/// File broadcast (crate::bcast): `transfer id << 32 | chunks written`, set by the node
/// manager after each chunk is on its scratch; the sender's flow control compares it (≥).
pub const VAR_BCAST_HELD: u32 = 2;
/// File broadcast: `transfer id << 2 | state` ([`BCAST_OPEN`], [`BCAST_VERIFIED`],
/// [`BCAST_FAILED`]), set by the node manager.
pub const VAR_BCAST_STATE: u32 = 3;
/// File broadcast: the last transfer whose copies were verified on every node, written by the
/// machine manager's COMPARE-AND-WRITE; a staged copy is launched only once this reaches it.
pub const VAR_BCAST_READY: u32 = 4;
/// Key rotation: the rotation a node manager seals its frames with the new key of, set by it
/// once it has the key ([`ToNode::RotateKey`]'s `rotation`); the machine manager switches
/// when it holds everywhere.
pub const VAR_KEY_ROTATION: u32 = 5;
pub const BCAST_OPEN: i64 = 1;
pub const BCAST_VERIFIED: i64 = 2;
pub const BCAST_FAILED: i64 = 3;

/// Largest part of an output file `cosched output` brings back (the answer gives the whole
/// size; `--tail` brings the end; the file itself stays in the node's work directory).
pub const MAX_OUTPUT: u64 = 4 << 20;
/// Default of the node manager's `--output-cap`: 1 GiB per output file.
pub const DEFAULT_OUTPUT_CAP: u64 = 1 << 30;
/// How long a finished job's directory on a node is kept (the node manager's `--keep-jobs`).
pub const DEFAULT_KEEP_JOBS: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);
/// Longest grace between SIGTERM and SIGKILL taken (the machine manager's `--kill-wait` is
/// clamped to it, and so is what a node is told).
pub const MAX_KILL_WAIT: cosched_core::Dur = cosched_core::Dur::from_secs(3600);

/// The first frame of a connection to the machine manager, stamped so that a captured one
/// cannot be replayed (see [`Stamp`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Hello {
    Register(Stamp, Register),
    Client(Stamp, Request),
    /// A client request of Unix user `uid`, sealed with that user's credential
    /// ([`cosched_storm::Key::user_key`]), not the cluster key: the machine manager reads
    /// the claimed uid before it can check the tag, then checks it with `user_key(uid)`, and
    /// the caller is that user, no administrator (see docs/daemons.md, "Trust model").
    User(u32, Stamp, Request),
}

/// When a request was made and a random nonce: the machine manager
/// refuses a stamp more than [`REPLAY_WINDOW_US`] away from its clock, and a nonce it has seen
/// within that window, so a frame captured on the network cannot be sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub time_us: i64,
    pub nonce: u64,
}

/// How far a request's stamp may be from the machine manager's clock (either way).
pub const REPLAY_WINDOW_US: i64 = 60_000_000;

impl Stamp {
    /// A stamp for a request made now.
    pub fn now() -> Stamp {
        Stamp {
            time_us: crate::util::now().as_micros(),
            nonce: crate::util::random_u64(),
        }
    }
}

/// The version of the messages between the machine manager and the node managers. Raised
/// with every change to [`Hello`], [`Register`], [`RegisterReply`], [`ToNode`] or
/// [`FromNode`] or to the tree's payload ([`ToNode::payload`]): postcard is not
/// self-describing, so daemons of two versions would misread each other's messages. Nodes and
/// manager of one version mix, whatever their releases.
pub const WIRE_VERSION: u32 = 5;

/// Which cosched a daemon is: its release and the version of its messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub release: String,
    pub wire: u32,
}

impl Version {
    /// This build's.
    pub fn ours() -> Version {
        Version {
            release: env!("CARGO_PKG_VERSION").to_string(),
            wire: WIRE_VERSION,
        }
    }

    /// Why a node manager of version `theirs` may not join a machine manager of this build,
    /// naming both; `None` when it may.
    pub fn refusal(theirs: &Version, node: Option<&str>) -> Option<String> {
        let ours = Version::ours();
        (theirs.wire != ours.wire).then(|| {
            format!(
                "node manager{} is cosched {} (messages v{}) but the machine manager is cosched {} (messages v{}): run the same version on both (docs/deploy.md, Upgrades)",
                node.map(|n| format!(" {n}")).unwrap_or_default(),
                theirs.release,
                theirs.wire,
                ours.release,
                ours.wire
            )
        })
    }
}
