//! File broadcast (seed 003 §2.3, §3.1): a file of any size sent down the tree in chunks,
//! written to every node manager's scratch directory, and checked there before anything runs
//! it. This module holds what every end agrees on; the ends are the client that streams a
//! file to the machine manager (`cosched_client::bcast::send_file`), the machine manager's
//! part, which paces the chunks (`cosched_mm::bcast`), and the node manager's writer
//! (`cosched_nm::bcast::Stager`).
//!
//! - The file goes in chunks of `chunk` bytes (default [`DEFAULT_CHUNK`], 512 KiB, seed 003's
//!   best); each chunk is one XFER-AND-SIGNAL, well below the 16 MiB frame cap. The chunk's
//!   bytes follow its [`ToNode::BcastChunk`] message in the payload, and are written from the
//!   frame they came in (no copy at the node manager).
//! - At most `slots` chunks (default [`DEFAULT_SLOTS`]) are in flight: the machine manager
//!   sends chunk `k` only once every destination holds chunk `k - slots` (a COMPARE ≥ on
//!   [`VAR_BCAST_HELD`], which each node manager sets after writing a chunk). Every hop
//!   buffers at most those `slots` chunks in its link queues; a slow node throttles the sender
//!   instead of making the tree hold the whole file.
//! - Each node manager writes into its scratch directory: `$COSCHED_SCRATCH/<node name>` if
//!   that variable is set, else `/dev/shm/cosched-<uid>/<node name>-<hash of its work
//!   directory>` (tmpfs: seed 003 stages to a RAM disk, and a launch then reads no disk), else
//!   `<work dir>/scratch` where there is no `/dev/shm`. The name and the hash keep node
//!   managers that share a host apart, those of two clusters included. The directory must be
//!   the node manager's own (`cosched_nm::bcast`'s `open_scratch`, crate::dir): one someone else made (a user
//!   squatting `/dev/shm/cosched-0` before the cluster starts) is refused, naming it, and the
//!   node then fails every broadcast rather than write where that user chose.
//! - Copies are kept per user (with one name space per node, a user
//!   re-broadcasting a name root had staged made root's queued job run the user's program).
//!   Under `<scratch>/bcast/`: `<uid>/<dest>` for a user's own names (`cosched bcast`),
//!   `<uid>/@<transfer>/<dest>` for the copy staged for one job (`cosched submit --bcast`),
//!   and `public/<dest>` for what an administrator published (`cosched bcast --publish`:
//!   owned by the node manager, readable and runnable by everyone, changed by nobody else).
//!   A user's directory belongs to the node manager, with the user's primary group allowed in
//!   (0710) and nobody else. A job runs `cosched-staged:<dest>` from its own user's names,
//!   else from the published ones, and `cosched-staged:@<transfer>/<dest>` only from its own
//!   user's copy of that transfer (`cosched_nm::bcast::Stager::resolve`).
//! - A user's named copy stays until the user broadcasts that name again or the node manager
//!   stops; a job's copy goes `--keep-jobs` after the last job that ran it here was forgotten
//!   (or after it was staged, when none ran here); a node manager starting removes what an
//!   earlier run of it left (see `cosched_nm::bcast::Stager::clear`).
//! - The client hashes the file (BLAKE3) as it reads the chunks and, after the last one,
//!   checks that the file's size and modification time did not move: a file that changed
//!   while it was sent fails the transfer (the client aborts it). The machine manager hashes
//!   the chunks as they pass through it and compares with the client's hash at the finish.
//!   Each node checks that every chunk came in order, at its offset, in a frame whose tag
//!   (keyed with the cluster key, sealed by the machine manager) it verified, and that the
//!   size written is the announced one. It does not hash the file again: the tag it already
//!   checks on every chunk proves each byte is the machine manager's, and a second pass per
//!   node and byte would cost as much (per-byte work at every node is what a
//!   broadcast to many nodes on few cores pays N times; docs/daemons.md, "File broadcast",
//!   says why this is as strong).
//! - The end is sent right behind the last chunk (it may overtake chunks on a link; a node
//!   checks its copy once it has both). Then one COMPARE = "verified" AND WRITE
//!   [`VAR_BCAST_READY`], each node answering once it has checked its copy: only once that
//!   write reached a node may a job run the staged copy there (`cosched submit --bcast`,
//!   whose argv\[0\] is [`STAGED_PREFIX`] and the name, replaced on each node by the staged
//!   path). If a node is not verified then, the machine manager waits until every node has
//!   decided (COMPARE ≠ "open") and asks once more, to name the nodes whose copies failed.
//! - A node creates its copy at the full size (`fallocate`: a node without room fails at
//!   the start, not halfway) in the writer thread. The copy the transfer replaces is
//!   renamed aside, then written over when nobody else holds it (see `cosched_nm::bcast`), else
//!   unlinked by a thread of the idle scheduling class (the node manager's reaper). Every file is
//!   reached relative to the node manager's handle of its directory (crate::dir).
//! - A node that dies or stops answering fails the transfer with its name; the others remove
//!   their partial copies, and nothing is launched.
//!
//! `COSCHED_TEST_CHUNK_DELAY_MS` (test only, never for production): a node manager started
//! with it sleeps that many milliseconds before writing each chunk, to play a slow node;
//! `NAME=MS` slows only the node manager named NAME.

use std::path::{Component, Path, PathBuf};

use crate::proto::*;

/// Seed 003's best chunk size (Fig. 8).
pub const DEFAULT_CHUNK: u32 = 512 << 10;
/// Seed 003's best slot count (Fig. 8).
pub const DEFAULT_SLOTS: u32 = 4;
/// Largest chunk: a chunk travels from the client as the first frame of a connection, which
/// may not exceed `MAX_HELLO` (2 MiB); this leaves room for the request around it.
pub const MAX_CHUNK: u32 = (2 << 20) - (64 << 10);
/// argv\[0\] of a job that runs a staged copy: `cosched-staged:<name>`, or
/// `cosched-staged:@<transfer>/<name>` for the copy staged for the job itself.
pub const STAGED_PREFIX: &str = "cosched-staged:";

/// The value of [`VAR_BCAST_HELD`] once `chunks` chunks of transfer `id` are written.
pub fn held(id: u32, chunks: u32) -> i64 {
    ((id as i64) << 32) | chunks as i64
}

/// The value of [`VAR_BCAST_STATE`] for transfer `id` in `state`.
pub fn state(id: u32, state: i64) -> i64 {
    ((id as i64) << 2) | state
}

/// The scratch directory of node manager `name` as two parts: the directory the node manager
/// keeps for itself, and, when node managers of one host share that one, its own
/// subdirectory in it (see the module documentation).
pub fn scratch_parts(name: &str, workdir: &Path) -> (PathBuf, Option<String>) {
    if let Some(dir) = std::env::var_os("COSCHED_SCRATCH") {
        return (PathBuf::from(dir).join(name), None);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same work directory gives the same name every run.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::path::absolute(workdir)
            .unwrap_or_else(|_| workdir.to_path_buf())
            .hash(&mut h);
        return (
            shm.join(format!("cosched-{}", crate::util::euid())),
            Some(format!("{name}-{:08x}", h.finish() as u32)),
        );
    }
    (workdir.join("scratch"), None)
}

/// The scratch directory of node manager `name` (see the module documentation).
pub fn scratch_dir(name: &str, workdir: &Path) -> PathBuf {
    match scratch_parts(name, workdir) {
        (own, Some(node)) => own.join(node),
        (own, None) => own,
    }
}

/// Why `dest` cannot be staged in `scope`, if it cannot: a staged name is a relative path
/// without `..`, whose first part does not begin with `@` (those name the copies of one job);
/// an absolute path is taken only for a user's own copy (and only by a node manager that is
/// not root, which the node decides). Checked by the machine manager when a transfer begins,
/// and by every node manager again.
pub fn check_dest(dest: &str, scope: Scope) -> Result<(), String> {
    let p = Path::new(dest);
    if p.is_absolute() {
        return match scope {
            Scope::User => Ok(()),
            _ => Err(format!(
                "{dest:?}: a copy for a job or a published one is staged by name, not at an absolute path"
            )),
        };
    }
    let plain = p.components().all(|c| matches!(c, Component::Normal(_)));
    if dest.is_empty() || !plain || dest.starts_with('@') {
        return Err(format!(
            "{dest:?} is not a name to stage a file under: give a relative path without `..` whose first part does not begin with `@`"
        ));
    }
    Ok(())
}

/// Makes glibc's allocator keep freed buffers of up to 32 MiB for reuse instead of returning
/// them to the kernel: each chunk passes through a buffer of its size at every node (the
/// frame it came in) and a few at the machine manager (the client's request, the payload,
/// the sealed frame), and with glibc's defaults each came from fresh pages (an `mmap`, or a
/// heap grown again after a trim), faulted in and zeroed by the kernel, then unmapped: a
/// seventh of the node managers' CPU during a broadcast in the profile. Called
/// once by each node manager and machine manager; a process-wide setting, costing only the
/// memory of the few chunk buffers its arenas keep.
pub fn keep_freed_buffers() {
    crate::sys::keep_freed_below(32 << 20, 64 << 20);
}
