//! The node manager's end of a file broadcast: each transfer's chunks written into its
//! scratch directory, checked, and the copy handed to its owner; old copies removed off the
//! broadcast's path. What the ends agree on, and the whole scheme, is `cosched_proto::bcast`.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cosched_core::JobId;
use cosched_proto::bcast::*;
use cosched_proto::dir::Dir;
use cosched_proto::proto::*;
use cosched_storm::{Payload, Vars};

mod copies;
mod reaper;
mod space;
mod stager;
#[cfg(test)]
mod tests;

use space::*;
pub use stager::Stager;
