//! Where the engine's jobs come from: a slice known at the start, or pieces received while a
//! trace is still being read.

use cosched_ledger::Room;

use super::SimJob;
use crate::ahead::Ahead;

/// Where the engine's jobs come from: all known at the start (a slice), or piece by piece
/// while a trace is being read ([`Streamed`]). There is one engine loop for both: before an
/// instant, it asks for more jobs until it knows every job submitted by then.
pub(crate) trait Jobs {
    /// The jobs known so far, in input order.
    fn known(&self) -> &[SimJob];
    /// Waits for more jobs; false when there will be no more.
    fn more(&mut self) -> bool;
    /// How many jobs there will probably be in all (at least those known): room for them
    /// is reserved at once.
    fn expected(&self) -> usize {
        self.known().len()
    }
    /// Where the ledger will write the jobs still to come (see [`crate::ahead`]): offered to
    /// whoever makes that memory resident ahead of the simulation, if anyone does.
    fn ledger_room(&self, _room: [Room; 2]) {}
}

impl Jobs for &[SimJob] {
    fn known(&self) -> &[SimJob] {
        self
    }
    fn more(&mut self) -> bool {
        false
    }
}

/// Jobs arriving in pieces over a channel (a trace's pieces as they are parsed), kept as
/// they come: the run's workload when it ends. Room for the jobs the trace announces is
/// reserved at the start, so that each piece is copied once, not again at every growth.
pub(crate) struct Streamed<'a> {
    pub(crate) jobs: Vec<SimJob>,
    pub(super) rx: std::sync::mpsc::Receiver<Vec<SimJob>>,
    /// The sender makes the room of the jobs and of the ledger resident ahead of them.
    pub(super) ahead: &'a Ahead,
}

impl Jobs for Streamed<'_> {
    fn known(&self) -> &[SimJob] {
        &self.jobs
    }
    fn more(&mut self) -> bool {
        match self.rx.recv() {
            // Nothing reserved (the trace announced nothing): the first piece is taken as is.
            Ok(piece) if self.jobs.capacity() == 0 => self.jobs = piece,
            Ok(piece) => self.jobs.extend(piece),
            // Every sender is gone: the input has ended.
            Err(_) => return false,
        }
        self.ahead.offer("jobs", Room::of(&self.jobs));
        true
    }
    fn expected(&self) -> usize {
        self.jobs.capacity()
    }
    fn ledger_room(&self, [entries, records]: [Room; 2]) {
        self.ahead.offer("ledger entries", entries);
        self.ahead.offer("ledger records", records);
    }
}
