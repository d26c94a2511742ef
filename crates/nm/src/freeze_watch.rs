//! Watches cgroups being frozen and reports each once the kernel says every process in it is
//! stopped (or none is left), on a thread of its own at the node manager's priority, so the
//! event loop never waits for a freeze. Every [`LOOK`] while a freeze is young (younger than
//! [`YOUNG`]), then less and less often up to [`LAST_LOOK`] apart: on this machine's kernel a
//! freeze of ranks that hold their cores completes in 20–50 µs (median ~30 µs, measured in
//! docs/benchmarks.md), so a look a few tens of microseconds late is what the next job loses
//! at each switch, while a rank that waits for a core behind others stops only when it next
//! runs (milliseconds) and is looked at less often. A look is one read of the cgroup's
//! `cgroup.events` held open (a few microseconds). The kernel's own change notification on
//! `cgroup.events` comes at most every 10 ms per file, too late for a millisecond quantum;
//! a thread that spun on the file without sleeping would keep the rank of its own core from
//! running into its freeze.

use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use cosched_core::JobId;
use tokio::sync::mpsc;

use crate::contain::{Events, JobCgroup};

/// The pause between looks while a freeze is younger than [`YOUNG`].
pub const LOOK: Duration = Duration::from_micros(15);
pub const YOUNG: Duration = Duration::from_micros(300);
/// The longest pause between two looks (an old freeze waits for a core).
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
    cosched_proto::util::raise_priority();
    cosched_proto::util::precise_timers();
    let mut pending: Vec<(Watch, Option<Events>, Instant)> = Vec::new();
    let mut pause = LOOK;
    loop {
        if pending.is_empty() {
            match rx.recv() {
                Ok(w) => pending.push(opened(w)),
                Err(_) => return,
            }
        }
        while let Ok(w) = rx.try_recv() {
            pending.push(opened(w));
        }
        pending.retain(|(w, events, since)| {
            if events.as_ref().is_none_or(Events::stopped) {
                let _ = reports.send((w.job, w.launch, w.generation));
                return false;
            }
            // Thawed meanwhile (the core moved on): nothing to report. Not asked of a young
            // freeze (a path walk a look; a stale report is dropped by the shell anyway).
            let age = since.elapsed();
            age < GIVE_UP && (age < YOUNG || w.cgroup.freezing())
        });
        let youngest = pending.iter().map(|(_, _, since)| since.elapsed()).min();
        match youngest {
            None => {}
            Some(age) if age < YOUNG => {
                pause = LOOK;
                std::thread::sleep(LOOK);
            }
            Some(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(LAST_LOOK);
            }
        }
    }
}

/// A watch with its cgroup's `cgroup.events` open (none when the cgroup is gone: stopped).
fn opened(w: Watch) -> (Watch, Option<Events>, Instant) {
    let events = w.cgroup.events();
    (w, events, Instant::now())
}
