//! Old copies removed off the broadcast's path.

use super::*;

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
pub(super) struct Reaper {
    /// Copies to remove: a name in a directory the node manager holds.
    tx: std::sync::mpsc::Sender<(Arc<Dir>, String)>,
    /// Copies handed to the thread and not removed yet.
    waiting: Arc<std::sync::atomic::AtomicUsize>,
}

impl Reaper {
    const BEHIND: usize = 2;

    pub(super) fn start(node: &str) -> Reaper {
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
    pub(super) fn set_aside(&self, place: &Place, id: u32) -> Option<String> {
        let aside = format!(".cosched-old-{id}-{}", place.name);
        match place.dir.rename(&place.name, &aside) {
            Ok(()) => Some(aside),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // Renaming failed for another reason: the old copy is removed here, on the path.
            Err(_) => {
                let _ = place.dir.remove_file(&place.name);
                None
            }
        }
    }

    /// Has the copy set aside as `aside` in `dir` removed: by the idle thread, or at once
    /// when [`Reaper::BEHIND`] already wait for it.
    pub(super) fn remove(&self, dir: Arc<Dir>, aside: String) {
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
pub(super) fn remove_staged(scratch: &Dir) {
    let dir = scratch.join(BCAST);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("cannot remove the staged copies in {}: {e}", dir.display()),
    }
}
