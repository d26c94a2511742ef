//! The node manager's end: each transfer's chunks written into place, checked, and the
//! copy handed to its owner.

use super::copies::{hand_over, open_copy, space_dir};
use super::reaper::{Reaper, remove_staged};
use super::*;

pub(super) enum Step {
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
pub(super) type Key = (Space, String);

/// A copy staged for a job, on this node: the jobs here that run it, and since when none has.
pub(super) struct JobCopy {
    pub(super) jobs: BTreeSet<JobId>,
    pub(super) idle_since: Instant,
}

/// The node manager's side: one writer thread per transfer (the node manager's loop never
/// waits for a disk), which writes chunks in order and sets the variables the machine
/// manager compares.
pub struct Stager {
    pub(super) name: String,
    /// The scratch directory, checked and held open (see [`open_scratch`]), or why it was
    /// refused: then every transfer fails here.
    pub(super) scratch: Result<Dir, String>,
    pub(super) vars: Vars,
    pub(super) delay: Duration,
    /// The transfer being written: its id, its writer, where its copy goes, and its key.
    pub(super) current: Option<(u32, std::sync::mpsc::Sender<Step>, Place, Key)>,
    /// Staged copies and the transfer that verified each.
    pub(super) verified: Arc<Mutex<HashMap<Key, (PathBuf, u32)>>>,
    /// Copies staged for jobs, by user and transfer.
    pub(super) job_copies: HashMap<(u32, u32), JobCopy>,
    pub(super) reaper: Reaper,
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
            if cosched_proto::util::euid() == 0 {
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
        // own file: its old copy is set aside and removed, never written over).
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
                    cosched_proto::util::user_name(uid)
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
