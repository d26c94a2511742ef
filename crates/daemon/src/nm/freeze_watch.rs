//! Watches cgroups being frozen and reports each once the kernel says every process in it is
//! stopped (or none is left), on a thread of its own at the node manager's priority, so the
//! event loop never waits for a freeze. It looks again and again, from [`FIRST_LOOK`] apart
//! up to [`LAST_LOOK`] (a look reads two small files: a few percent of a core while a freeze
//! is pending): a running rank stops within microseconds, one that waits for a core
//! behind others only when it next runs; the kernel's own change notification on
//! `cgroup.events` comes at most every 10 ms per file, too late for a millisecond quantum.

use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use cosched_core::JobId;
use tokio::sync::mpsc;

use crate::contain::JobCgroup;

/// The first look after the freeze is written, and the longest pause between two.
pub const FIRST_LOOK: Duration = Duration::from_micros(50);
pub const LAST_LOOK: Duration = Duration::from_micros(250);
/// A freeze not done by then is no longer watched (the core went ahead at its bound long
/// before).
pub const GIVE_UP: Duration = Duration::from_secs(5);

/// One freeze to watch; `gen` comes back with the report, so the shell can drop a report of
/// a freeze that a later thaw made stale.
pub struct Watch {
    pub job: JobId,
    pub launch: u64,
    pub generation: u64,
    pub cgroup: JobCgroup,
}

/// A report: (job, launch, generation) of a cgroup found frozen or empty.
pub type Frozen = (JobId, u64, u64);

/// The watching thread's end of the node manager; dropping it ends the thread once idle.
pub struct FreezeWatcher {
    tx: std_mpsc::Sender<Watch>,
}

impl FreezeWatcher {
    pub fn start(reports: mpsc::UnboundedSender<Frozen>) -> std::io::Result<FreezeWatcher> {
        let (tx, rx) = std_mpsc::channel();
        std::thread::Builder::new()
            .name("freeze-watch".into())
            .spawn(move || watch(rx, reports))?;
        Ok(FreezeWatcher { tx })
    }

    pub fn watch(&self, w: Watch) {
        let _ = self.tx.send(w);
    }
}

fn watch(rx: std_mpsc::Receiver<Watch>, reports: mpsc::UnboundedSender<Frozen>) {
    // Threads do not inherit the node manager's real-time class (it resets on fork): behind
    // CPU-bound ranks a watcher of normal priority would itself wait for a core.
    crate::util::raise_priority();
    let mut pending: Vec<(Watch, Instant)> = Vec::new();
    let mut pause = FIRST_LOOK;
    loop {
        if pending.is_empty() {
            match rx.recv() {
                Ok(w) => pending.push((w, Instant::now())),
                Err(_) => return,
            }
            pause = FIRST_LOOK;
        }
        while let Ok(w) = rx.try_recv() {
            pending.push((w, Instant::now()));
            pause = FIRST_LOOK;
        }
        pending.retain(|(w, since)| {
            if w.cgroup.stopped() {
                let _ = reports.send((w.job, w.launch, w.generation));
                return false;
            }
            // Thawed meanwhile (the core moved on): nothing to report.
            w.cgroup.freezing() && since.elapsed() < GIVE_UP
        });
        if !pending.is_empty() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(LAST_LOOK);
        }
    }
}
