//! The reading thread makes the simulation's next memory resident ahead of it.
//!
//! A simulation run beside the reading of its trace (`cosched_report::run::run_read`) writes each
//! new job into vectors reserved for the whole trace: the jobs themselves and the ledger's
//! entries and records, some 370 bytes a job. The first write to each 4 KiB page traps into
//! the kernel, which zeroes and maps it: about 1.8 µs a page on the 2-core VMs cosched is
//! measured on, some 45 ms of the simulation thread's time over SDSC-BLUE (26,000 faults),
//! when that thread is what the run waits for. The reading thread has time to spare, so
//! before it hands over each piece of jobs it maps the pages those jobs will be written to,
//! with `madvise(MADV_POPULATE_WRITE)` (Linux 5.14; elsewhere, or where the call is refused,
//! nothing happens and the simulation faults the pages in itself).
//!
//! Populating never reads or writes the memory's contents: it is not an access to the
//! vectors and cannot race with the simulation's writes. The simulation offers each vector's
//! [`Room`] again whenever it may have moved (it grew past its reservation); should a room
//! be freed while a call is under way (a run that fails while the trace is still read), the
//! call finds the range unmapped and fails, or maps pages of a newer allocation whose
//! contents it leaves as they are. [`Ahead::close`] stops the populating once the run ends.

use cosched_ledger::Room;
use std::sync::Mutex;

/// The rooms a simulation writes its next jobs into; `None` once closed.
#[derive(Default)]
pub struct Ahead(Mutex<Option<Vec<Offered>>>);

/// A room by name, with the first job whose slot is not resident yet.
type Offered = (&'static str, Room, usize);

/// Bytes of a page: populating works on whole pages.
const PAGE: usize = 4096;

impl Ahead {
    pub fn new() -> Ahead {
        Ahead(Mutex::new(Some(Vec::new())))
    }

    /// The simulation writes the jobs still to come into `room`, replacing what `name` was
    /// before (the same vector, perhaps moved).
    pub fn offer(&self, name: &'static str, room: Room) {
        let Ok(mut rooms) = self.0.lock() else { return };
        let Some(rooms) = rooms.as_mut() else { return };
        match rooms.iter_mut().find(|(n, _, _)| *n == name) {
            // Still where it was: what is resident stays resident.
            Some((_, r, _)) if r.start == room.start && r.per_job == room.per_job => *r = room,
            Some(old) => *old = (name, room, room.first),
            None => rooms.push((name, room, room.first)),
        }
    }

    /// Makes the slots of jobs up to (not including) `jobs` resident in every room.
    pub fn populate(&self, jobs: usize) {
        let mut ranges = Vec::new();
        {
            let Ok(mut rooms) = self.0.lock() else { return };
            let Some(rooms) = rooms.as_mut() else { return };
            for (_, room, resident) in rooms.iter_mut() {
                let bytes = room.bytes(*resident, jobs);
                if !bytes.is_empty() {
                    ranges.push(bytes);
                }
                *resident = (*resident).max(jobs.min(room.end));
            }
        }
        // Outside the lock: the simulation offering a room must not wait for the kernel. A
        // refusal leaves the faults to the simulation.
        for bytes in ranges {
            populate(bytes.start / PAGE * PAGE, bytes.end.div_ceil(PAGE) * PAGE);
        }
    }

    /// No more populating: the run is over.
    pub fn close(&self) {
        if let Ok(mut rooms) = self.0.lock() {
            *rooms = None;
        }
    }

    #[cfg(test)]
    fn resident(&self, name: &str) -> Option<usize> {
        let rooms = self.0.lock().unwrap();
        let rooms = rooms.as_ref()?;
        rooms.iter().find(|(n, _, _)| *n == name).map(|r| r.2)
    }
}

/// Maps the pages of `start..end` writable without touching their contents; false if the
/// kernel would not.
#[cfg(target_os = "linux")]
fn populate(start: usize, end: usize) -> bool {
    // SAFETY: MADV_POPULATE_WRITE only faults pages in, as a write would, without writing:
    // no memory's contents change, whatever the range holds. A range that is not (or no
    // longer) mapped writable makes the call fail, which leaves the faults to the writer.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_start: usize, _end: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populating_follows_the_jobs_and_keeps_what_it_did_while_a_room_stays_put() {
        let mut v: Vec<[u8; 1000]> = Vec::with_capacity(100);
        let ahead = Ahead::new();
        ahead.offer("v", Room::of(&v));
        ahead.populate(10);
        assert_eq!(ahead.resident("v"), Some(10));
        // Values written where populating went are the writer's, untouched.
        v.extend((0..20).map(|i| [i as u8; 1000]));
        ahead.offer("v", Room::of(&v));
        assert_eq!(ahead.resident("v"), Some(10));
        ahead.populate(150);
        assert_eq!(
            ahead.resident("v"),
            Some(100),
            "no further than the capacity"
        );
        assert!(
            v.iter()
                .enumerate()
                .all(|(i, x)| x.iter().all(|&b| b == i as u8))
        );
        // Moved: the new place starts over from its first free slot.
        v.reserve(1000);
        ahead.offer("v", Room::of(&v));
        assert_eq!(ahead.resident("v"), Some(20));
        ahead.close();
        ahead.populate(500);
        ahead.offer("v", Room::of(&v));
        assert_eq!(ahead.resident("v"), None, "closed");
    }

    /// After populating, writing the pages costs no faults: the populating happened.
    #[cfg(target_os = "linux")]
    #[test]
    fn populated_pages_do_not_fault_when_written() {
        fn minor_faults() -> i64 {
            let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
            // SAFETY: getrusage fills the struct it is given.
            unsafe {
                libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr());
                usage.assume_init().ru_minflt
            }
        }
        let pages = 2048;
        let fresh = |populate: bool| {
            let mut v: Vec<u8> = Vec::with_capacity(pages * PAGE);
            let ahead = Ahead::new();
            ahead.offer("v", Room::of(&v));
            if populate {
                ahead.populate(pages * PAGE);
            }
            let before = minor_faults();
            v.resize(pages * PAGE, 1);
            minor_faults() - before
        };
        let probe: Vec<u8> = Vec::with_capacity(PAGE * 2);
        let start = (probe.as_ptr() as usize).div_ceil(PAGE) * PAGE;
        if !populate(start, start + PAGE) {
            eprintln!("NOT TESTED: this kernel refuses MADV_POPULATE_WRITE (Linux 5.14 has it)");
            return;
        }
        let (faulted, populated) = (fresh(false), fresh(true));
        if faulted < pages as i64 / 2 {
            eprintln!("NOT TESTED: fresh memory took only {faulted} faults (huge pages?)");
            return;
        }
        assert!(
            faulted >= pages as i64 / 2,
            "writing fresh pages faulted {faulted} times"
        );
        assert!(
            populated < pages as i64 / 10,
            "populated pages faulted {populated} times"
        );
    }
}
