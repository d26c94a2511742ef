//! The engine's queues of future events: the timer heap's entries and the running jobs' end
//! events, kept apart so that a suspension removes its job's end at once.

use cosched_core::Time;

/// Timer heap entry; `Reverse` makes the max-heap pop the earliest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Pending {
    pub(super) time: Time,
    pub(super) seq: u64,
    pub(super) token: u64,
}

/// The end events of the running jobs. Time-sharing stops and restarts the same few tens of
/// jobs every quantum, so this is an unordered vector that knows where each job sits (O(1)
/// insertion and removal) and remembers its earliest entry, found again by one scan only
/// after that entry leaves.
pub(super) struct RunningEnds {
    /// `(end, seq, job index)`.
    items: Vec<(Time, u64, u32)>,
    /// Position of each job in `items`, `u32::MAX` when it has no end event.
    pos: Vec<u32>,
    /// Position of the earliest `(end, seq)`; `None` when it must be searched for again.
    min: Option<usize>,
}

impl RunningEnds {
    pub(super) fn new(jobs: usize) -> RunningEnds {
        RunningEnds {
            items: Vec::with_capacity(64),
            pos: vec![u32::MAX; jobs],
            min: None,
        }
    }
    /// Room for jobs `0..jobs`, as they become known.
    pub(super) fn grow(&mut self, jobs: usize) {
        self.pos.resize(jobs, u32::MAX);
    }
    /// The earliest end event.
    pub(super) fn peek(&mut self) -> Option<(Time, u64, u32)> {
        if self.items.is_empty() {
            return None;
        }
        let k = match self.min {
            Some(k) => k,
            None => {
                let mut k = 0;
                for (j, it) in self.items.iter().enumerate().skip(1) {
                    if (it.0, it.1) < (self.items[k].0, self.items[k].1) {
                        k = j;
                    }
                }
                self.min = Some(k);
                k
            }
        };
        Some(self.items[k])
    }
    #[inline]
    pub(super) fn insert(&mut self, end: Time, seq: u64, job: usize) {
        debug_assert_eq!(self.pos[job], u32::MAX);
        let k = self.items.len();
        self.items.push((end, seq, job as u32));
        self.pos[job] = k as u32;
        if let Some(m) = self.min
            && (end, seq) < (self.items[m].0, self.items[m].1)
        {
            self.min = Some(k);
        } else if self.items.len() == 1 {
            self.min = Some(0);
        }
    }
    /// Moves every end event at or before `now` into `due`, in `(end, seq)` order: one scan
    /// for all the ends of an instant, instead of one per end after each removal.
    pub(super) fn drain_due(&mut self, now: Time, due: &mut Vec<(Time, u64, u32)>) {
        match self.peek() {
            Some((t, _, _)) if t <= now => {}
            _ => return,
        }
        let mut k = self.items.len();
        while k > 0 {
            k -= 1;
            if self.items[k].0 <= now {
                let it = self.items.swap_remove(k);
                self.pos[it.2 as usize] = u32::MAX;
                if k < self.items.len() {
                    self.pos[self.items[k].2 as usize] = k as u32;
                }
                due.push(it);
            }
        }
        self.min = None;
        due.sort_unstable();
    }

    /// The sequence number of job `job`'s end event, if it has one.
    pub(super) fn seq_of(&self, job: usize) -> Option<u64> {
        let k = self.pos[job];
        (k != u32::MAX).then(|| self.items[k as usize].1)
    }

    /// Drops job `job`'s end event, if it has one.
    #[inline]
    pub(super) fn remove(&mut self, job: usize) {
        let k = self.pos[job];
        if k == u32::MAX {
            return;
        }
        let k = k as usize;
        self.pos[job] = u32::MAX;
        self.items.swap_remove(k);
        let last = self.items.len();
        if k < last {
            self.pos[self.items[k].2 as usize] = k as u32;
        }
        self.min = match self.min {
            Some(m) if m == k => None,
            // The last entry moved into the hole.
            Some(m) if m == last => Some(k),
            other => other,
        };
    }
}
