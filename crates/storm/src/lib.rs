//! STORM's three mechanisms (XFER-AND-SIGNAL, TEST-EVENT, COMPARE-AND-WRITE) over a k-ary
//! tree of authenticated TCP links.
//!
//! The daemons write every collective function (job launch, heartbeat and gang context
//! switch, fault detection, status gathering) with these mechanisms, so the transport below
//! them could be replaced (RDMA, hardware multicast) without touching the functions.
//!
//! - [`accept`]: accepting with back-off, and the cap on unauthenticated connections.
//! - [`bytes`]: byte buffers in messages encoded as one run (a `memcpy`, not a visit per byte).
//! - [`frame`]: length-delimited frames with a keyed BLAKE3 tag; the cluster [`Key`].
//! - [`keyring`]: the keys accepted and the one sealed with, during a rotation of the key.
//! - [`tree`]: the k-ary overlay ([`Topology`]) and destination sets ([`Dest`]).
//! - [`mech`]: the mechanisms as messages ([`Down`], [`Up`]), node variables ([`Vars`]),
//!   and the combining of answers at every hop ([`Combiner`]).
//! - [`gather`]: contributions of many nodes gathered up the tree, combined at every hop
//!   ([`Gathers`]): one message per link per gathering (a job's fence).
//! - [`link`]: parent-to-child connections with queued writers.
//! - [`node`]: the node side (routing, variables, deliveries to the node manager).
//! - [`root`]: the root side, driven by the machine manager: one combined answer per query
//!   ([`Outcome`]), and the write half of COMPARE-AND-WRITE.

#![forbid(unsafe_code)]

pub mod accept;
pub mod bytes;
pub mod frame;
pub mod gather;
pub mod keyring;
pub mod link;
pub mod mech;
pub mod node;
pub mod root;
pub mod tree;

pub use frame::{FrameError, Key};
pub use gather::{Gather, GatherId, Gathers};
pub use keyring::{Keyring, Keys, Wrapped};
pub use link::ChildEvent;
pub use mech::{Answer, Cmp, Combiner, Cond, Down, DownOf, Own, Query, Up, Var, Vars};
pub use node::{Delivery, NodeHandle, Payload, spawn_node};
pub use root::{Outcome, Root, RootEvent, RootStats};
pub use tree::{Dest, Topology};
