//! Where a vector keeps the room for jobs it has not got yet, as addresses only.
//!
//! A simulation fed by a trace reader writes each new job into vectors reserved for the
//! whole trace; the reader makes that room resident ahead of the writes (`cosched_sim`'s
//! `ahead`). A [`Room`] says where the room lies and how many bytes a job takes: nothing can
//! be read or written through it.

/// The reserved but unused part of a vector of per-job values: job `i`'s slot starts at
/// `start + i × per_job` bytes, for `first ≤ i < end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    pub start: usize,
    pub per_job: usize,
    /// The first job without a value yet (the vector's length).
    pub first: usize,
    /// The first job the vector has no room for (its capacity).
    pub end: usize,
}

impl Room {
    /// The room `v` keeps beyond its values.
    pub fn of<T>(v: &Vec<T>) -> Room {
        Room {
            start: v.as_ptr() as usize,
            per_job: std::mem::size_of::<T>(),
            first: v.len(),
            end: v.capacity(),
        }
    }

    /// The bytes of jobs `from..to`'s slots that are in the room.
    pub fn bytes(&self, from: usize, to: usize) -> std::ops::Range<usize> {
        let (from, to) = (from.max(self.first), to.min(self.end));
        if from >= to {
            return 0..0;
        }
        self.start + from * self.per_job..self.start + to * self.per_job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_room_spans_the_capacity_beyond_the_values() {
        let mut v: Vec<u64> = Vec::with_capacity(10);
        v.extend([1, 2, 3]);
        let r = Room::of(&v);
        let base = v.as_ptr() as usize;
        assert_eq!((r.first, r.end, r.per_job), (3, 10, 8));
        // Slots already written are not room; nor is anything past the capacity.
        assert_eq!(r.bytes(0, 5), base + 24..base + 40);
        assert_eq!(r.bytes(4, 100), base + 32..base + 80);
        assert_eq!(r.bytes(0, 3), 0..0);
        assert_eq!(r.bytes(10, 12), 0..0);
    }
}
