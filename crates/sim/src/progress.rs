//! Watching a run from another thread: the engine publishes, now and then, how many jobs it
//! knows, how many have ended and whether more will come, so that a progress bar can draw
//! itself without the simulation waiting on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The counters a run publishes.
#[derive(Debug, Default)]
pub struct Counters {
    known: AtomicU64,
    ended: AtomicU64,
    all_known: AtomicBool,
}

/// What [`Counters`] said when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Jobs the engine knows (all of them once `all_known`; a trace read while simulating
    /// comes in pieces).
    pub known: u64,
    /// Jobs that have ended (or will never run).
    pub ended: u64,
    /// No more jobs will come: `known` is the run's total.
    pub all_known: bool,
}

impl Counters {
    pub fn read(&self) -> Snapshot {
        Snapshot {
            known: self.known.load(Ordering::Relaxed),
            ended: self.ended.load(Ordering::Relaxed),
            all_known: self.all_known.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn publish(&self, s: Snapshot) {
        self.known.store(s.known, Ordering::Relaxed);
        self.ended.store(s.ended, Ordering::Relaxed);
        self.all_known.store(s.all_known, Ordering::Relaxed);
    }
}

/// Where a run publishes its progress, if anyone watches ([`crate::EngineOptions::progress`]).
#[derive(Clone, Debug, Default)]
pub struct Progress(pub Option<Arc<Counters>>);

impl Progress {
    /// A new set of counters to watch, and the handle to give the run.
    pub fn watched() -> (Arc<Counters>, Progress) {
        let c = Arc::new(Counters::default());
        (c.clone(), Progress(Some(c)))
    }
}

/// Watching a run does not change it: every two [`Progress`] handles compare equal, so
/// options that differ only in who watches are the same options.
impl PartialEq for Progress {
    fn eq(&self, _: &Progress) -> bool {
        true
    }
}

impl Eq for Progress {}
