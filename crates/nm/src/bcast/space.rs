//! Where a node manager keeps its broadcast copies: its scratch directory, checked and held
//! open, the name space of each copy (a user's, one job's, the published ones) and the place
//! of one copy in it. The scheme is `cosched_proto::bcast`'s module documentation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cosched_proto::bcast::scratch_parts;
use cosched_proto::dir::{Dir, DirError};
use cosched_proto::proto::Scope;

/// Test-only knob of the node manager (see `cosched_proto::bcast`).
pub const TEST_CHUNK_DELAY_ENV: &str = "COSCHED_TEST_CHUNK_DELAY_MS";
/// The copies' directory within the scratch directory.
pub const BCAST: &str = "bcast";
/// The published copies' directory within [`BCAST`].
pub const PUBLIC: &str = "public";

/// Opens (making it if missing) the scratch directory of node manager `name`, refusing one
/// that is not the node manager's own (see `cosched_proto::dir`), with its path and what to do.
pub fn open_scratch(name: &str, workdir: &Path) -> Result<Dir, DirError> {
    let (own, node) = scratch_parts(name, workdir);
    let hint = |mut e: DirError| {
        e.why.push_str(
            " (the node manager's scratch directory for file broadcasts; or set COSCHED_SCRATCH to a directory of its user's)",
        );
        e
    };
    let dir = Dir::private(&own, 0o711).map_err(hint)?;
    match node {
        Some(node) => dir.private_child(node, 0o711).map_err(hint),
        None => Ok(dir),
    }
}

/// Which name space a staged copy is in on a node (see `cosched_proto::bcast`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// A user's own names (`cosched bcast`).
    User(u32),
    /// The copy transfer `transfer` staged for a job of user `uid` (`submit --bcast`).
    Job { uid: u32, transfer: u32 },
    /// Published by an administrator (`cosched bcast --publish`).
    Public,
}

impl Space {
    pub fn of(scope: Scope, uid: u32, transfer: u32) -> Space {
        match scope {
            Scope::User => Space::User(uid),
            Scope::Job => Space::Job { uid, transfer },
            Scope::Public => Space::Public,
        }
    }
}

/// Where a copy goes: file `name` in the directory `dir`, which the node manager holds open.
#[derive(Clone)]
pub struct Place {
    pub dir: Arc<Dir>,
    pub name: String,
}

impl Place {
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}
