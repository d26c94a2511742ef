//! File broadcast (seed 003 §2.3, §3.1): a file of any size sent down the tree in chunks,
//! written to every node manager's scratch directory, and checked there before anything runs
//! it. This module holds the two ends: the client that streams a file to the machine manager
//! ([`send_file`]) and the node manager's writer ([`Stager`]); the machine manager's part,
//! which paces the chunks, is `mm::bcast`.
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
//!   the node manager's own ([`open_scratch`], crate::dir): one someone else made (a user
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
//!   user's copy of that transfer ([`Stager::resolve`]).
//! - A user's named copy stays until the user broadcasts that name again or the node manager
//!   stops; a job's copy goes `--keep-jobs` after the last job that ran it here was forgotten
//!   (or after it was staged, when none ran here); a node manager starting removes what an
//!   earlier run of it left (see [`Stager::clear`]).
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
//!   renamed aside, then written over when nobody else holds it (see [`recycle`]), else
//!   unlinked by a thread of the idle scheduling class (see [`Reaper`]). Every file is
//!   reached relative to the node manager's handle of its directory (crate::dir).
//! - A node that dies or stops answering fails the transfer with its name; the others remove
//!   their partial copies, and nothing is launched.
//!
//! `COSCHED_TEST_CHUNK_DELAY_MS` (test only, never for production): a node manager started
//! with it sleeps that many milliseconds before writing each chunk, to play a slow node;
//! `NAME=MS` slows only the node manager named NAME.

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cosched_core::JobId;
use cosched_storm::{Payload, Vars};

use crate::DaemonError;
use crate::client::Client;
use crate::dir::{Dir, DirError};
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
/// Test-only knob of the node manager (see the module documentation).
pub const TEST_CHUNK_DELAY_ENV: &str = "COSCHED_TEST_CHUNK_DELAY_MS";
/// The copies' directory within the scratch directory.
const BCAST: &str = "bcast";
/// The published copies' directory within [`BCAST`].
const PUBLIC: &str = "public";

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
fn scratch_parts(name: &str, workdir: &Path) -> (PathBuf, Option<String>) {
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

/// Opens (making it if missing) the scratch directory of node manager `name`, refusing one
/// that is not the node manager's own (see crate::dir), with its path and what to do.
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

/// Which name space a staged copy is in on a node (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Space {
    /// A user's own names (`cosched bcast`).
    User(u32),
    /// The copy transfer `transfer` staged for a job of user `uid` (`submit --bcast`).
    Job { uid: u32, transfer: u32 },
    /// Published by an administrator (`cosched bcast --publish`).
    Public,
}

impl Space {
    fn of(scope: Scope, uid: u32, transfer: u32) -> Space {
        match scope {
            Scope::User => Space::User(uid),
            Scope::Job => Space::Job { uid, transfer },
            Scope::Public => Space::Public,
        }
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

/// Where a copy goes: file `name` in the directory `dir`, which the node manager holds open.
#[derive(Clone)]
struct Place {
    dir: Arc<Dir>,
    name: String,
}

impl Place {
    fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

enum Step {
    /// A chunk's bytes, where they lie in the frame that brought them: written from there.
    Chunk {
        k: u32,
        offset: u64,
        data: Payload,
    },
    End,
    Abort,
}

/// A staged copy is known by its name space and name.
type Key = (Space, String);

/// A copy staged for a job, on this node: the jobs here that run it, and since when none has.
struct JobCopy {
    jobs: BTreeSet<JobId>,
    idle_since: Instant,
}

/// The node manager's side: one writer thread per transfer (the node manager's loop never
/// waits for a disk), which writes chunks in order and sets the variables the machine
/// manager compares.
pub struct Stager {
    name: String,
    /// The scratch directory, checked and held open (see [`open_scratch`]), or why it was
    /// refused: then every transfer fails here.
    scratch: Result<Dir, String>,
    vars: Vars,
    delay: Duration,
    /// The transfer being written: its id, its writer, where its copy goes, and its key.
    current: Option<(u32, std::sync::mpsc::Sender<Step>, Place, Key)>,
    /// Staged copies and the transfer that verified each.
    verified: Arc<Mutex<HashMap<Key, (PathBuf, u32)>>>,
    /// Copies staged for jobs, by user and transfer.
    job_copies: HashMap<(u32, u32), JobCopy>,
    reaper: Reaper,
}

impl Stager {
    pub fn new(name: &str, workdir: &Path, vars: Vars) -> Stager {
        let delay = std::env::var(TEST_CHUNK_DELAY_ENV)
            .ok()
            .and_then(|v| match v.split_once('=') {
                Some((who, ms)) if who == name => ms.parse().ok(),
                Some(_) => None,
                None => v.parse().ok(),
            })
            .map(Duration::from_millis)
            .unwrap_or_default();
        if !delay.is_zero() {
            tracing::warn!(
                "nm {name}: {TEST_CHUNK_DELAY_ENV}: each broadcast chunk waits {delay:?} (a test knob)"
            );
        }
        keep_freed_buffers();
        let scratch = open_scratch(name, workdir).map_err(|e| {
            tracing::error!("nm {name}: file broadcasts refused on this node: {e}");
            e.to_string()
        });
        // Copies an earlier run of this node manager staged cannot be launched (which were
        // verified and released is known only to the process that received them), and on
        // tmpfs they hold memory: they go.
        if let Ok(s) = &scratch {
            remove_staged(s);
        }
        Stager {
            name: name.to_string(),
            scratch,
            vars,
            delay,
            current: None,
            verified: Arc::default(),
            job_copies: HashMap::new(),
            reaper: Reaper::start(name),
        }
    }

    /// Acts on a broadcast message; `rest` is what followed it in its payload (a chunk's
    /// bytes).
    pub fn handle(&mut self, msg: ToNode, rest: Payload) {
        match msg {
            ToNode::BcastBegin {
                id,
                dest,
                size,
                uid,
                scope,
            } => self.begin(id, dest, size, Space::of(scope, uid, id)),
            ToNode::BcastChunk { id, k, offset } => self.step(
                id,
                Step::Chunk {
                    k,
                    offset,
                    data: rest,
                },
            ),
            ToNode::BcastEnd { id } => self.step(id, Step::End),
            ToNode::BcastAbort { id } => {
                self.step(id, Step::Abort);
                if let Some((_, _, place, key)) = self.current.take_if(|c| c.0 == id) {
                    // The writer may be done already (its copy checked here, not elsewhere).
                    self.verified.lock().expect("lock").remove(&key);
                    let _ = place.dir.remove_file(&place.name);
                }
            }
            _ => {}
        }
    }

    fn step(&self, id: u32, s: Step) {
        if let Some((cur, tx, _, _)) = &self.current
            && *cur == id
        {
            let _ = tx.send(s);
        }
    }

    /// Where `dest` of `space` is staged on this node: its directory (made for the space's
    /// user as needed, relative to the node manager's handles) and its file name; `Err` says
    /// why it cannot be.
    fn place(&self, space: Space, dest: &str) -> Result<Place, String> {
        let scope = match space {
            Space::User(_) => Scope::User,
            Space::Job { .. } => Scope::Job,
            Space::Public => Scope::Public,
        };
        check_dest(dest, scope)?;
        let p = Path::new(dest);
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| format!("{dest:?} names no file"))?;
        let io = |e: std::io::Error| format!("{e}");
        if p.is_absolute() {
            // As root, an absolute path would let a user replace any file.
            if crate::util::euid() == 0 {
                return Err(format!(
                    "{dest:?}: a node manager running as root stages only by name, within its scratch directory"
                ));
            }
            let parent = p.parent().unwrap_or(Path::new("/"));
            std::fs::create_dir_all(parent).map_err(io)?;
            return Ok(Place {
                dir: Arc::new(Dir::open(parent).map_err(io)?),
                name,
            });
        }
        let scratch = self
            .scratch
            .as_ref()
            .map_err(|why| format!("its scratch directory was refused: {why}"))?;
        let mut dir =
            space_dir(&scratch.child_for(BCAST, 0o711, None).map_err(io)?, space).map_err(io)?;
        let parts: Vec<_> = p.components().collect();
        for part in &parts[..parts.len() - 1] {
            dir = dir.child_for(part, 0o711, None).map_err(io)?;
        }
        Ok(Place {
            dir: Arc::new(dir),
            name,
        })
    }

    fn begin(&mut self, id: u32, dest: String, size: u64, space: Space) {
        let place = match self.place(space, &dest) {
            Ok(p) => p,
            Err(why) => {
                tracing::warn!("nm {}: bcast {id}: refusing {dest:?}: {why}", self.name);
                self.vars.set(VAR_BCAST_STATE, state(id, BCAST_FAILED));
                return;
            }
        };
        let key = (space, dest);
        self.verified.lock().expect("lock").remove(&key);
        if let Space::Job { uid, transfer } = space {
            self.job_copies.insert(
                (uid, transfer),
                JobCopy {
                    jobs: BTreeSet::new(),
                    idle_since: Instant::now(),
                },
            );
        }
        let (tx, rx) = std::sync::mpsc::channel();
        self.current = Some((id, tx, place.clone(), key.clone()));
        // The old copy goes aside here, so that it is never the one a launch finds. Only
        // copies in the scratch directory are reused (an absolute destination is the user's
        // own file, left to be removed as before).
        let mut old = self.reaper.set_aside(&place, id);
        if Path::new(&key.1).is_absolute()
            && let Some(o) = old.take()
        {
            self.reaper.remove(place.dir.clone(), o);
        }
        let (vars, delay, verified, node, reaper) = (
            self.vars.clone(),
            self.delay,
            self.verified.clone(),
            self.name.clone(),
            self.reaper.clone(),
        );
        // The file is created (or the old copy taken over) and its pages reserved by the
        // writer, not in the node manager's loop, which shares its thread with the transport:
        // forwarding to the children waits for neither.
        std::thread::spawn(move || {
            let path = place.path();
            let file = match open_copy(&place, size, old, &reaper) {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!("bcast {id}: cannot create {}: {e}", path.display());
                    vars.set(VAR_BCAST_STATE, state(id, BCAST_FAILED));
                    return;
                }
            };
            vars.set(VAR_BCAST_HELD, held(id, 0));
            vars.set(VAR_BCAST_STATE, state(id, BCAST_OPEN));
            let mut written = 0u64;
            let mut failed = None;
            // End may come before the last chunks: it is a small frame, and small frames pass
            // the chunks queued on a link. The copy is checked once both have come.
            let mut ending = false;
            for s in rx {
                match s {
                    Step::Chunk { k, offset, data } => {
                        if failed.is_some() {
                            continue;
                        }
                        std::thread::sleep(delay);
                        if offset != written {
                            failed = Some(format!("chunk {k} at {offset}, expected {written}"));
                        } else if let Err(e) = file.write_all_at(&data, offset) {
                            failed = Some(format!("writing chunk {k}: {e}"));
                        } else {
                            written += data.len() as u64;
                            vars.set(VAR_BCAST_HELD, held(id, k + 1));
                        }
                    }
                    Step::End => ending = true,
                    Step::Abort => {
                        let _ = place.dir.remove_file(&place.name);
                        return;
                    }
                }
                if !ending || (failed.is_none() && written < size) {
                    continue;
                }
                let on_disk = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
                let mut ok = failed.is_none() && written == size && on_disk == size;
                if ok && let Err(e) = hand_over(&file, key.0) {
                    failed = Some(format!("giving the copy to its user: {e}"));
                    ok = false;
                }
                if ok {
                    verified
                        .lock()
                        .expect("lock")
                        .insert(key.clone(), (path.clone(), id));
                } else {
                    tracing::warn!(
                        "nm {node}: bcast {id} to {}: check failed ({} of {size} bytes, {} on disk{})",
                        path.display(),
                        written,
                        on_disk,
                        failed
                            .as_deref()
                            .map(|f| format!("; {f}"))
                            .unwrap_or_default()
                    );
                }
                // Closed before anyone may run it (exec refuses a file open for writing).
                drop(file);
                let st = if ok { BCAST_VERIFIED } else { BCAST_FAILED };
                vars.set(VAR_BCAST_STATE, state(id, st));
                return;
            }
        });
    }

    /// Removes this node manager's staged copies and its scratch directory (when that is left
    /// empty): called when it shuts down cleanly. Without this, every throw-away cluster
    /// (a benchmark's, a test's) left its copies in `/dev/shm` until the machine ran out of
    /// memory.
    pub fn clear(&mut self) {
        if let Some((_, tx, _, _)) = self.current.take() {
            let _ = tx.send(Step::Abort);
        }
        self.verified.lock().expect("lock").clear();
        self.job_copies.clear();
        if let Ok(s) = &self.scratch {
            remove_staged(s);
            let _ = std::fs::remove_dir(s.path());
        }
    }

    /// The staged path job `job` of user `uid` runs for `cmd0` (`cosched-staged:<name>`: the
    /// user's own copy of that name, else a published one; `cosched-staged:@<transfer>/<name>`:
    /// the user's copy staged by that transfer), if it names a copy verified here and
    /// released on every node (its transfer reached [`VAR_BCAST_READY`]); `Err` says why
    /// not. `Ok(None)`: `cmd0` names no staged copy. Never another user's copy: what a job
    /// runs is its own user's or an administrator's.
    pub fn resolve(&mut self, cmd0: &str, job: JobId, uid: u32) -> Result<Option<PathBuf>, String> {
        let Some(name) = cmd0.strip_prefix(STAGED_PREFIX) else {
            return Ok(None);
        };
        let of_job = name
            .strip_prefix('@')
            .and_then(|r| r.split_once('/'))
            .and_then(|(t, n)| Some((t.parse::<u32>().ok()?, n)));
        let keys = match of_job {
            Some((transfer, n)) => vec![(Space::Job { uid, transfer }, n.to_string())],
            None => vec![
                (Space::User(uid), name.to_string()),
                (Space::Public, name.to_string()),
            ],
        };
        let (space, path, id) = {
            let verified = self.verified.lock().expect("lock");
            let Some((key, (path, id))) = keys.iter().find_map(|k| verified.get(k).map(|v| (k, v)))
            else {
                return Err(format!(
                    "no verified staged file {name:?} of {}'s or published on this node",
                    crate::util::user_name(uid)
                ));
            };
            (key.0, path.clone(), *id)
        };
        if self.vars.get(VAR_BCAST_READY) < id as i64 {
            return Err(format!("staged file {name:?} not released on every node"));
        }
        if let Space::Job { uid, transfer } = space
            && let Some(c) = self.job_copies.get_mut(&(uid, transfer))
        {
            c.jobs.insert(job);
        }
        Ok(Some(path))
    }

    /// Job `job` left this node: a copy staged for it is no longer in use by it.
    pub fn forget(&mut self, job: JobId) {
        for c in self.job_copies.values_mut() {
            if c.jobs.remove(&job) && c.jobs.is_empty() {
                c.idle_since = Instant::now();
            }
        }
    }

    /// Removes the copies staged for jobs that no job here has run for `keep` (the node's
    /// `--keep-jobs`), counting from their staging when none ran here.
    pub fn sweep(&mut self, keep: Duration) {
        let Ok(scratch) = &self.scratch else { return };
        let writing = match &self.current {
            Some((_, _, _, (Space::Job { uid, transfer }, _))) => Some((*uid, *transfer)),
            _ => None,
        };
        let expired: Vec<(u32, u32)> = self
            .job_copies
            .iter()
            .filter(|&(k, c)| {
                c.jobs.is_empty() && c.idle_since.elapsed() >= keep && Some(*k) != writing
            })
            .map(|(k, _)| *k)
            .collect();
        for (uid, transfer) in expired {
            self.job_copies.remove(&(uid, transfer));
            self.verified
                .lock()
                .expect("lock")
                .retain(|(s, _), _| *s != Space::Job { uid, transfer });
            let dir = scratch
                .join(BCAST)
                .join(uid.to_string())
                .join(format!("@{transfer}"));
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => tracing::info!(
                    "nm {}: removed the copy staged for a job by transfer {transfer}, unused for {keep:?} (--keep-jobs)",
                    self.name
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("nm {}: cannot remove {}: {e}", self.name, dir.display()),
            }
        }
    }
}

/// The directory of name space `space` under `bcast`, made for its user as needed.
fn space_dir(bcast: &Dir, space: Space) -> std::io::Result<Dir> {
    match space {
        Space::Public => bcast.child_for(PUBLIC, 0o755, None),
        Space::User(uid) => user_dir(bcast, uid),
        Space::Job { uid, transfer } => {
            user_dir(bcast, uid)?.child_for(format!("@{transfer}"), 0o711, None)
        }
    }
}

/// User `uid`'s directory under `bcast`: the node manager's, which the user's primary group
/// may enter (0710) and nobody else; as another user than root, simply its own (0700).
fn user_dir(bcast: &Dir, uid: u32) -> std::io::Result<Dir> {
    let me = crate::util::euid();
    if me != 0 {
        return bcast.child_for(uid.to_string(), 0o700, None);
    }
    let gid = crate::util::account(uid).map_or(uid, |a| a.gid);
    bcast.child_for(uid.to_string(), 0o710, Some((me, gid)))
}

/// The file a transfer writes at `place`, `size` bytes long: the copy it replaces (`old`, set
/// aside in the same directory by [`Reaper::set_aside`]) taken over when nobody else can
/// reach it (see [`recycle`]), else a new file (and `old` goes to the reaper). While it is
/// written it belongs to the node manager and nobody else may open it; [`hand_over`] gives
/// it to the job's user once it is checked.
fn open_copy(
    place: &Place,
    size: u64,
    old: Option<String>,
    reaper: &Reaper,
) -> std::io::Result<std::fs::File> {
    if let Some(old) = old {
        match recycle(&place.dir, &old, &place.name, size) {
            Ok(f) => return Ok(f),
            Err(e) => {
                tracing::debug!("{}: not reused: {e}", place.dir.join(&old).display());
                reaper.remove(place.dir.clone(), old);
            }
        }
    }
    let f = place.dir.create_new(&place.name, 0o600)?;
    reserve(&f, 0, size)?;
    Ok(f)
}

/// Takes over the copy `old` that a transfer replaces, as the file of the new one at `name`
/// (`size` bytes), both in `dir`: its pages are written over instead of a new file's being
/// allocated, and the old ones freed. That is a fifth of the CPU of a 12 MB broadcast to 64
/// node managers on one host (`fallocate` and the unlink were 10 % of the profile,
/// and the copy into fresh pages is slower). Refused (`Err`, and the caller creates a new
/// file) unless nobody else can see what is written:
/// - the file is the node manager's and closed to everyone else first (owner the node
///   manager, mode 0600), so no one can open it from then on;
/// - no one holds it open or mapped from before: a write lease (`F_SETLEASE`) is granted only
///   to the one opener of a file, and opening it for writing fails while a job executes it;
/// - it has no other name (a hard link made before it was closed).
///
/// The bytes of the old copy beyond what the new one has written stay readable by nobody but
/// the node manager (until [`hand_over`], which comes only once all of it is written).
fn recycle(dir: &Dir, old: &str, name: &str, size: u64) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let f = dir.open_file(old, true)?;
    // Whether this descriptor is the file's only opener: a write lease is granted only then
    // (it is dropped at once; only its grant is wanted).
    let alone = |f: &std::fs::File| {
        // SAFETY: fcntl on an open descriptor.
        if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(std::io::Error::new(e.kind(), format!("in use: {e}")));
        }
        // SAFETY: as above.
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        Ok(())
    };
    // A job still running from the copy is the common refusal: seen before anything changes.
    alone(&f)?;
    let was = f.metadata()?;
    if !was.is_file() || was.nlink() != 1 {
        return Err(std::io::Error::other(format!("{} links", was.nlink())));
    }
    let me = crate::util::euid();
    if me == 0 {
        std::os::unix::fs::fchown(&f, Some(0), None)?;
    }
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    // Opened between the first look and the closing: given back as it was (the reaper
    // removes its name; whoever holds it keeps what they opened).
    if let Err(e) = alone(&f) {
        if me == 0 {
            let _ = std::os::unix::fs::fchown(&f, Some(was.uid()), None);
        }
        let _ = f.set_permissions(was.permissions());
        return Err(e);
    }
    // A link made before the file was closed (after it, nobody but the owner can make one).
    let m = f.metadata()?;
    if m.nlink() != 1 {
        return Err(std::io::Error::other(format!("{} links", m.nlink())));
    }
    if m.len() > size {
        f.set_len(size)?;
    } else {
        reserve(&f, m.len(), size)?;
    }
    dir.rename(old, name)?;
    Ok(f)
}

/// Gives a checked copy to whoever may run it: a user's (their own names, or one of their
/// jobs') becomes theirs (when the node manager runs as root) and executable by them alone;
/// a published one stays the node manager's, readable and executable by everyone.
fn hand_over(f: &std::fs::File, space: Space) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let uid = match space {
        Space::User(uid) | Space::Job { uid, .. } => uid,
        Space::Public => return f.set_permissions(std::fs::Permissions::from_mode(0o755)),
    };
    if crate::util::euid() == 0 {
        std::os::unix::fs::fchown(f, Some(uid), None)?;
    }
    f.set_permissions(std::fs::Permissions::from_mode(0o700))
}

/// Allocates bytes `from..size` of the file up front (on tmpfs, its pages): a node without
/// room for it fails when it opens the transfer, before any chunk is sent, not halfway; and
/// the writes then find their pages in place instead of allocating them one by one as each
/// chunk comes.
fn reserve(f: &std::fs::File, from: u64, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if size <= from {
        return Ok(());
    }
    // SAFETY: fallocate on an open descriptor; no memory is passed.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            0,
            from as libc::off_t,
            (size - from) as libc::off_t,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // A file system without fallocate: the writes allocate as they go.
        Some(libc::EOPNOTSUPP) => Ok(()),
        _ => Err(std::io::Error::new(
            e.kind(),
            format!("reserving {size} bytes: {e}"),
        )),
    }
}

/// Removes the copies a new transfer replaces, off the broadcast's path: the old copy is
/// renamed aside at once (so the new one can take its name), and a thread of the lowest
/// scheduling class (`SCHED_IDLE`, which runs when the CPU has nothing else to do) unlinks
/// it. Unlinking 12 MB on tmpfs gives back 3,000 pages; done where it was, in the node
/// manager's loop at the start of each transfer, it was 5 % of the CPU of a broadcast of
/// 12 MB to 64 node managers on one host, all of it before the first chunk could leave.
///
/// An idle-class thread may not run for long on a node kept busy, so at most
/// [`Reaper::BEHIND`] copies wait for it: beyond that, a replaced copy is removed at once, as
/// before, and the memory old copies hold on tmpfs stays bounded.
#[derive(Clone)]
struct Reaper {
    /// Copies to remove: a name in a directory the node manager holds.
    tx: std::sync::mpsc::Sender<(Arc<Dir>, String)>,
    /// Copies handed to the thread and not removed yet.
    waiting: Arc<std::sync::atomic::AtomicUsize>,
}

impl Reaper {
    const BEHIND: usize = 2;

    fn start(node: &str) -> Reaper {
        let (tx, rx) = std::sync::mpsc::channel::<(Arc<Dir>, String)>();
        let node = node.to_string();
        let waiting = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let left = waiting.clone();
        std::thread::Builder::new()
            .name("bcast-reaper".into())
            .spawn(move || {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: changes only this thread's scheduling class.
                if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
                    tracing::debug!(
                        "nm {node}: old staged copies are removed at normal priority: {}",
                        std::io::Error::last_os_error()
                    );
                }
                for (dir, name) in rx {
                    if let Err(e) = dir.remove_file(&name)
                        && e.kind() != std::io::ErrorKind::NotFound
                    {
                        let path = dir.join(&name);
                        tracing::warn!("nm {node}: cannot remove {}: {e}", path.display());
                    }
                    left.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .expect("spawn the reaper thread");
        Reaper { tx, waiting }
    }

    /// Moves the copy at `place`, if any, out of the way of transfer `id`: the name it went
    /// to in the same directory (for [`recycle`] or [`Reaper::remove`]).
    fn set_aside(&self, place: &Place, id: u32) -> Option<String> {
        let aside = format!(".cosched-old-{id}-{}", place.name);
        match place.dir.rename(&place.name, &aside) {
            Ok(()) => Some(aside),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // Renaming failed for another reason: removed here, as before.
            Err(_) => {
                let _ = place.dir.remove_file(&place.name);
                None
            }
        }
    }

    /// Has the copy set aside as `aside` in `dir` removed: by the idle thread, or at once
    /// when [`Reaper::BEHIND`] already wait for it.
    fn remove(&self, dir: Arc<Dir>, aside: String) {
        if self.waiting.load(std::sync::atomic::Ordering::Relaxed) >= Self::BEHIND {
            let _ = dir.remove_file(&aside);
            return;
        }
        self.waiting
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = self.tx.send((dir, aside));
    }
}

/// Removes the staged copies under `scratch` (not those staged at absolute paths, which are
/// the user's files). `std::fs::remove_dir_all` removes entries relative to the directories
/// it opens and never follows a link.
fn remove_staged(scratch: &Dir) {
    let dir = scratch.join(BCAST);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("cannot remove the staged copies in {}: {e}", dir.display()),
    }
}

/// Makes glibc's allocator keep freed buffers of up to 32 MiB for reuse instead of returning
/// them to the kernel: each chunk passes through a buffer of its size at every node (the
/// frame it came in) and a few at the machine manager (the client's request, the payload,
/// the sealed frame), and with glibc's defaults each came from fresh pages (an `mmap`, or a
/// heap grown again after a trim), faulted in and zeroed by the kernel, then unmapped: a
/// seventh of the node managers' CPU during a broadcast in the profile. Called
/// once by each node manager and machine manager; a process-wide setting, costing only the
/// memory of the few chunk buffers its arenas keep.
pub(crate) fn keep_freed_buffers() {
    // SAFETY: mallopt only sets allocator parameters; it is safe to call at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

/// What a finished broadcast reports.
#[derive(Clone, Debug)]
pub struct Sent {
    pub nodes: Vec<String>,
    pub bytes: u64,
    /// From the start to the last chunk accepted by the machine manager (which accepts a
    /// chunk only once a slot is free: a slow node stretches this).
    pub streamed: Duration,
    pub took: Duration,
    /// The name the copies were staged under (argv\[0\] for `submit --bcast`:
    /// [`STAGED_PREFIX`] + this).
    pub dest: String,
}

/// The BLAKE3 hash and size of a file (what a broadcast checks: `b3sum` prints the same hash).
pub fn digest_file(path: &Path) -> std::io::Result<([u8; 32], u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut hash = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hash.finalize().into(), size))
}

/// The default staged name of `path`: its file name and 8 bytes of a hash of what identifies
/// this version of the file (device, inode, size, modification time), so two different files
/// of one name, or two versions of one file, never share a copy. Not of its contents: that
/// would read and hash the whole file before the first chunk could leave (about 7 ms for
/// 12 MB, on the launch's critical path); the contents' hash is computed as the chunks go
/// and checked by the machine manager at the end.
pub fn default_dest(path: &Path, meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let base = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let mut h = blake3::Hasher::new();
    for v in [
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
    ] {
        h.update(&v.to_le_bytes());
    }
    let tag: String = h.finalize().as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{base}.{tag}")
}

/// How the file moved between two looks (`None`: it did not, as far as its size and
/// modification time say).
fn changed(before: &std::fs::Metadata, after: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    if before.size() != after.size() {
        Some("changed size")
    } else if (before.mtime(), before.mtime_nsec()) != (after.mtime(), after.mtime_nsec()) {
        Some("was modified")
    } else {
        None
    }
}

fn ask(client: &Client, op: BcastOp) -> Result<BcastReply, DaemonError> {
    match client.request(Request::Bcast(op))? {
        Response::Bcast(r) => Ok(r),
        Response::Error(e) => Err(DaemonError::Refused(e)),
        other => Err(DaemonError::Refused(format!("unexpected answer {other:?}"))),
    }
}

/// How a broadcast is staged: under which name, in which name space, and whose copy it is.
#[derive(Clone, Debug, Default)]
pub struct Staging {
    /// The name (default: [`default_dest`] of the file).
    pub dest: Option<String>,
    pub scope: Scope,
    /// Whose copy it is, for a client holding the cluster key (an administrator, which the
    /// machine manager knows as its own user) that stages for the user it runs as; `None`:
    /// the caller's.
    pub user: Option<u32>,
}

impl Staging {
    /// The caller's own copy under `dest`.
    pub fn named(dest: &str) -> Staging {
        Staging {
            dest: Some(dest.to_string()),
            ..Staging::default()
        }
    }
}

/// Broadcasts `path` to `nodes` (every node in the tree when empty), staged as `staging`
/// says, in chunks of `chunk` bytes with `slots` in flight. Returns once every node holds a
/// verified copy; fails, naming the nodes, when one does not.
pub fn send_file(
    client: &Client,
    path: &Path,
    staging: &Staging,
    chunk: u32,
    slots: u32,
    nodes: &[String],
) -> Result<Sent, DaemonError> {
    if !(1..=MAX_CHUNK).contains(&chunk) || slots == 0 {
        return Err(DaemonError::Config(format!(
            "chunk size must be 1..={MAX_CHUNK} bytes and slots at least 1"
        )));
    }
    let t0 = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    let size = meta.len();
    let dest = staging
        .dest
        .clone()
        .unwrap_or_else(|| default_dest(path, &meta));
    let BcastReply::Started { id, .. } = ask(
        client,
        BcastOp::Begin {
            dest: dest.clone(),
            size,
            chunk,
            slots,
            nodes: nodes.to_vec(),
            scope: staging.scope,
            user: staging.user,
        },
    )?
    else {
        return Err(DaemonError::Refused("unexpected answer to a bcast".into()));
    };
    // Hashed as it is read: the machine manager compares at the end, so a file that changed
    // while it was sent fails the transfer.
    let mut hash = blake3::Hasher::new();
    let mut k = 0u32;
    loop {
        let mut data = Vec::with_capacity(chunk as usize);
        (&mut f).take(chunk as u64).read_to_end(&mut data)?;
        if data.is_empty() {
            break;
        }
        hash.update(&data);
        ask(client, BcastOp::Chunk { id, k, data })?;
        k += 1;
    }
    if let Some(why) = changed(&meta, &f.metadata()?) {
        let why = format!("{} {why} while it was sent", path.display());
        let _ = ask(client, BcastOp::Abort { id, why });
        return Err(DaemonError::Refused(format!(
            "{} changed while it was sent; nothing was launched",
            path.display()
        )));
    }
    let streamed = t0.elapsed();
    let blake3 = hash.finalize().into();
    // A job's copy is named by its transfer, which the job's argv[0] then names.
    let dest = match staging.scope {
        Scope::Job => format!("@{id}/{dest}"),
        _ => dest,
    };
    match ask(client, BcastOp::Finish { id, blake3 })? {
        BcastReply::Done { nodes } => Ok(Sent {
            nodes,
            bytes: size,
            streamed,
            took: t0.elapsed(),
            dest,
        }),
        other => Err(DaemonError::Refused(format!("unexpected answer {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's own directory, removed when the test ends (also when it fails).
    fn scratch(what: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("cosched-{what}-"))
            .tempdir()
            .unwrap()
    }

    /// A replaced copy leaves its name at once and is gone soon after (the reaper runs in the
    /// idle class, and this test leaves the CPU idle enough for it).
    #[test]
    fn a_replaced_copy_frees_its_name_at_once_and_is_removed() {
        let tmp = scratch("reaper");
        let dir = tmp.path();
        let place = Place {
            dir: Arc::new(Dir::open(dir).unwrap()),
            name: "prog".into(),
        };
        let path = place.path();
        std::fs::write(&path, b"old").unwrap();
        let reaper = Reaper::start("t");
        let aside = reaper.set_aside(&place, 7).expect("there was a copy");
        assert!(!path.exists(), "the name is free for the new copy");
        reaper.remove(place.dir.clone(), aside);
        let t0 = Instant::now();
        while std::fs::read_dir(dir).unwrap().count() > 0 {
            assert!(t0.elapsed() < Duration::from_secs(20), "the old copy stays");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Nothing there: nothing to do, and no error.
        assert_eq!(reaper.set_aside(&place, 8), None);
    }

    /// The copy a transfer replaces is written over only when nothing else holds it: not
    /// while it is open elsewhere, mapped, or has a second name; then a new file takes its
    /// place and it is left as it was.
    #[test]
    fn a_replaced_copy_is_reused_only_when_nobody_else_holds_it() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = scratch("recycle");
        let dir = tmp.path();
        let place = Place {
            dir: Arc::new(Dir::open(dir).unwrap()),
            name: "prog".into(),
        };
        let path = place.path();
        let reaper = Reaper::start("t");
        let stage = |len: usize, id: u32| {
            std::fs::write(&path, vec![b'o'; len]).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
            let ino = std::fs::metadata(&path).unwrap().ino();
            (reaper.set_aside(&place, id).unwrap(), ino)
        };
        let me = Space::User(crate::util::euid());
        // Free: taken over, at its new size either way, closed to others while written.
        for (old, new) in [(3 * 4096, 5 * 4096 + 7), (5 * 4096, 4096)] {
            let (aside, ino) = stage(old, 1);
            let f = open_copy(&place, new, Some(aside.clone()), &reaper).unwrap();
            let m = std::fs::metadata(&path).unwrap();
            assert_eq!((m.ino(), m.len()), (ino, new), "reused at the new size");
            assert_eq!(m.permissions().mode() & 0o777, 0o600);
            assert!(!dir.join(&aside).exists());
            hand_over(&f, me).unwrap();
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o700
            );
            drop(f);
            std::fs::remove_file(&path).unwrap();
        }
        // Held: open for reading, mapped (its descriptor closed), linked elsewhere.
        let (aside_name, ino) = stage(4096, 2);
        let aside = dir.join(&aside_name);
        let again = || recycle(&place.dir, &aside_name, "prog", 4096);
        let reader = std::fs::File::open(&aside).unwrap();
        assert!(again().is_err(), "open elsewhere");
        assert_eq!(
            std::fs::metadata(&aside).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // SAFETY: a shared read-only mapping of an open file, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_SHARED,
                reader.as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        drop(reader);
        assert!(again().is_err(), "mapped");
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(map, 4096) };
        let link = dir.join("link");
        std::fs::hard_link(&aside, &link).unwrap();
        assert!(again().is_err(), "linked");
        std::fs::remove_file(&link).unwrap();
        // Refused: a new file instead, the old one left to the reaper.
        let reader = std::fs::File::open(&aside).unwrap();
        let f = open_copy(&place, 4096, Some(aside_name.clone()), &reaper).unwrap();
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), ino, "a new file");
        drop((f, reader));
        let t0 = Instant::now();
        while aside.exists() {
            assert!(t0.elapsed() < Duration::from_secs(20), "the old copy stays");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn staged_names_stay_in_the_scratch_directory() {
        for ok in ["a.out", "d/a", "x@y"] {
            for scope in [Scope::User, Scope::Job, Scope::Public] {
                assert_eq!(check_dest(ok, scope), Ok(()), "{ok} {scope:?}");
            }
        }
        for bad in ["../x", "", "./x", "d/../x", "@5/a", "@x"] {
            assert!(check_dest(bad, Scope::User).is_err(), "{bad}");
        }
        assert_eq!(check_dest("/abs/x", Scope::User), Ok(()));
        assert!(check_dest("/abs/x", Scope::Job).is_err());
        assert!(check_dest("/abs/x", Scope::Public).is_err());
        assert_eq!(held(3, 5), (3 << 32) | 5);
        assert!(held(3, 5) >= held(3, 4) && held(4, 0) > held(3, 99));
    }

    /// a scratch directory someone else made where the node manager's
    /// goes (a user squatting `/dev/shm/cosched-0`, here under `COSCHED_SCRATCH`-like paths
    /// of a sticky shared directory) is refused, naming it; the node manager's own is used.
    #[test]
    fn a_scratch_directory_made_by_someone_else_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = scratch("squat");
        let shared = tmp.path().join("shm");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let mine = Dir::private(&shared.join("cosched-me"), 0o711).unwrap();
        mine.private_child("n0-1234", 0o711).unwrap();
        let squatted = shared.join("cosched-them");
        std::fs::create_dir(&squatted).unwrap();
        std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink("/", squatted.join("n0-1234")).unwrap();
        let e = Dir::private(&squatted, 0o711).unwrap_err().to_string();
        assert!(e.contains(&squatted.display().to_string()), "{e}");
        std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = Dir::private(&squatted, 0o711).unwrap();
        let e = d.private_child("n0-1234", 0o711).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    /// Copies of a job's transfer, a user's names and published ones are told apart by the
    /// reference a job's argv[0] makes.
    #[test]
    fn a_staged_reference_names_one_space() {
        let scratch = scratch("spaces");
        let vars = cosched_storm::Vars::default();
        vars.set(VAR_BCAST_READY, 100);
        let mut st = Stager {
            name: "t".into(),
            scratch: Ok(Dir::open(scratch.path()).unwrap()),
            vars,
            delay: Duration::ZERO,
            current: None,
            verified: Arc::default(),
            job_copies: HashMap::new(),
            reaper: Reaper::start("t"),
        };
        let put = |st: &Stager, space, name: &str, path: &str| {
            st.verified
                .lock()
                .unwrap()
                .insert((space, name.into()), (PathBuf::from(path), 1));
        };
        put(&st, Space::User(7), "app", "/u7/app");
        put(&st, Space::Public, "app", "/pub/app");
        put(&st, Space::Public, "tool", "/pub/tool");
        put(
            &st,
            Space::Job {
                uid: 7,
                transfer: 9,
            },
            "app",
            "/u7/@9/app",
        );
        let r = |st: &mut Stager, cmd: &str, uid| st.resolve(cmd, JobId(1), uid);
        assert_eq!(r(&mut st, "/bin/true", 7), Ok(None));
        assert_eq!(
            r(&mut st, "cosched-staged:app", 7),
            Ok(Some("/u7/app".into()))
        );
        assert_eq!(
            r(&mut st, "cosched-staged:app", 8),
            Ok(Some("/pub/app".into()))
        );
        assert_eq!(
            r(&mut st, "cosched-staged:tool", 7),
            Ok(Some("/pub/tool".into()))
        );
        assert_eq!(
            r(&mut st, "cosched-staged:@9/app", 7),
            Ok(Some("/u7/@9/app".into()))
        );
        assert!(
            r(&mut st, "cosched-staged:@9/app", 8).is_err(),
            "another user's job copy"
        );
        st.job_copies.insert(
            (7, 9),
            JobCopy {
                jobs: BTreeSet::new(),
                idle_since: Instant::now(),
            },
        );
        r(&mut st, "cosched-staged:@9/app", 7).unwrap();
        st.sweep(Duration::ZERO);
        assert!(st.job_copies.contains_key(&(7, 9)), "in use by job 1");
        st.forget(JobId(1));
        st.sweep(Duration::ZERO);
        assert!(!st.job_copies.contains_key(&(7, 9)));
        assert!(r(&mut st, "cosched-staged:@9/app", 7).is_err(), "swept");
    }
}
