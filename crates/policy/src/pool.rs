//! [`PePool`]: which PEs are free, for space-sharing policies.
//!
//! A bitset over the machine's PEs. Allocation is first-fit on PE numbers, so jobs land on
//! low-numbered PEs and whole nodes stay together when sizes allow. PEs of nodes that are
//! down are neither free nor allocatable until the node comes back.
//!
//! The pool keeps its own words (a set bit is a free PE) and a first-free-word hint rather
//! than core's `PeBits`: allocation is on every start of every space-sharing policy, and the
//! `PeBits` search made EASY on KTH-SP2 run 2 % more instructions (callgrind).

use cosched_core::{MachineShape, NodeId, PeBits, PeId, PeSet};

#[derive(Clone, Debug)]
pub struct PePool {
    machine: MachineShape,
    /// Bit set = PE free.
    free: Vec<u64>,
    /// Bit set = PE's node down (a PE can be both allocated and down: its job is being ended).
    down: Vec<u64>,
    free_count: u32,
    /// Every word below this one has no free PE, so allocation starts its scan here: on a busy
    /// machine the low words are full and were read again at every start. A lower bound only:
    /// allocation raises it past the words it fills, release and `node_up` lower it.
    first_free: usize,
}

impl PePool {
    pub fn new(machine: MachineShape) -> PePool {
        let n = machine.total_pes() as usize;
        let words = n.div_ceil(64);
        let mut free = vec![u64::MAX; words];
        if !n.is_multiple_of(64) {
            free[words - 1] = (1u64 << (n % 64)) - 1;
        }
        PePool {
            machine,
            free,
            down: vec![0; words],
            free_count: n as u32,
            first_free: 0,
        }
    }

    pub fn machine(&self) -> &MachineShape {
        &self.machine
    }
    /// PEs free now.
    pub fn free_count(&self) -> u32 {
        self.free_count
    }
    /// PEs on nodes that are up, allocated or not.
    pub fn usable_count(&self) -> u32 {
        self.machine.total_pes() - self.down.iter().map(|w| w.count_ones()).sum::<u32>()
    }
    pub fn is_free(&self, pe: PeId) -> bool {
        self.free[(pe.0 / 64) as usize] & (1 << (pe.0 % 64)) != 0
    }

    /// Takes the `n` lowest-numbered free PEs, or `None` (and changes nothing) if fewer are free.
    pub fn allocate(&mut self, n: u32) -> Option<PeSet> {
        if n > self.free_count {
            return None;
        }
        let mut set = PeSet::new();
        let mut need = n;
        let from = self.first_free;
        for (w, word) in self.free.iter_mut().enumerate().skip(from) {
            // A run of free PEs at a time.
            while need > 0 && *word != 0 {
                let lo = word.trailing_zeros();
                let run = (*word >> lo).trailing_ones().min(need);
                let bits = if run == 64 {
                    u64::MAX
                } else {
                    (1u64 << run) - 1
                };
                *word &= !(bits << lo);
                let pe = w as u32 * 64 + lo;
                set.push_sorted(pe, pe + run);
                need -= run;
            }
            if need == 0 {
                break;
            }
        }
        self.free_count -= n;
        while self.free.get(self.first_free) == Some(&0) {
            self.first_free += 1;
        }
        Some(set)
    }

    /// Takes PEs for `req`: the lowest free ones ([`PePool::allocate`]), or where its
    /// [`crate::Spread`] says when it has one. `None` (and nothing changes) if it cannot
    /// start now.
    pub fn allocate_for(&mut self, req: &crate::JobRequest) -> Option<PeSet> {
        let Some(spread) = &req.spread else {
            return self.allocate(req.procs);
        };
        if req.procs > self.free_count {
            return None;
        }
        let pes = spread.choose(req.procs, &self.machine, |p| self.is_free(PeId(p)))?;
        let taken = self.take(&pes);
        debug_assert!(taken, "a spread chose PEs that are not free");
        while self.free.get(self.first_free) == Some(&0) {
            self.first_free += 1;
        }
        Some(pes)
    }

    /// Takes exactly these PEs (a restarted manager re-adopting running jobs). Returns false
    /// and changes nothing if any of them is not free.
    pub fn take(&mut self, pes: &PeSet) -> bool {
        if !pes
            .iter()
            .all(|p| p.0 < self.machine.total_pes() && self.is_free(p))
        {
            return false;
        }
        for p in pes.iter() {
            self.free[(p.0 / 64) as usize] &= !(1 << (p.0 % 64));
        }
        self.free_count -= pes.len();
        true
    }

    /// Returns PEs to the pool. PEs of nodes that are down stay unavailable.
    pub fn release(&mut self, pes: &PeSet) {
        // A word at a time: a job of a thousand PEs is a few words, not a thousand bits.
        let (free, down) = (&mut self.free, &self.down);
        let (mut added, mut lowest) = (0, self.first_free);
        PeBits::each_word(pes, |w, m| {
            debug_assert!(free[w] & m == 0, "PEs of {pes} released twice");
            let back = m & !down[w] & !free[w];
            free[w] |= back;
            added += back.count_ones();
            if back != 0 {
                lowest = lowest.min(w);
            }
        });
        self.free_count += added;
        self.first_free = lowest;
    }

    /// Marks a node down: its free PEs leave the pool; allocated ones stay allocated until
    /// released, then stay out.
    pub fn node_down(&mut self, node: NodeId) {
        for pe in self.machine.pes_of(node) {
            let (w, b) = ((pe / 64) as usize, 1u64 << (pe % 64));
            if self.down[w] & b == 0 {
                self.down[w] |= b;
                if self.free[w] & b != 0 {
                    self.free[w] &= !b;
                    self.free_count -= 1;
                }
            }
        }
    }

    /// Marks a node up: its PEs that no job holds become free. `held` says whether a PE is
    /// still allocated to some job.
    pub fn node_up(&mut self, node: NodeId, held: impl Fn(PeId) -> bool) {
        for pe in self.machine.pes_of(node) {
            let (w, b) = ((pe / 64) as usize, 1u64 << (pe % 64));
            if self.down[w] & b != 0 {
                self.down[w] &= !b;
                if !held(PeId(pe)) {
                    self.free[w] |= b;
                    self.free_count += 1;
                    self.first_free = self.first_free.min(w);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_lowest_first_and_releases() {
        let mut pool = PePool::new(MachineShape::flat(70, 1));
        let a = pool.allocate(65).unwrap();
        assert_eq!(a.runs(), &[(0, 65)]);
        assert_eq!(pool.free_count(), 5);
        assert!(pool.allocate(6).is_none());
        assert_eq!(pool.free_count(), 5);
        pool.release(&PeSet::contiguous(10, 3));
        let b = pool.allocate(4).unwrap();
        assert_eq!(b.to_string(), "10-12,65");
        assert_eq!(pool.free_count(), 4);
    }

    #[test]
    fn a_spread_job_gets_the_nodes_it_asks_for_and_a_plain_one_the_lowest_pes() {
        use crate::{JobRequest, Spread};
        use cosched_core::{Dur, JobId, Time};
        let mut pool = PePool::new(MachineShape::flat(3, 2));
        let plain = JobRequest::new(JobId(1), Time::ZERO, 1, Dur::from_secs(1));
        assert_eq!(pool.allocate_for(&plain).unwrap().to_string(), "0");
        let mut spread = plain.clone();
        spread.procs = 2;
        spread.spread = Some(Box::new(Spread {
            nodes: Some(2),
            tasks_per_node: Some(1),
            ..Spread::default()
        }));
        // Counting PEs, "1-2" would do; the spread wants one on each of two nodes.
        assert_eq!(pool.allocate_for(&spread).unwrap().to_string(), "1-2");
        assert_eq!(pool.free_count(), 3);
        spread.spread.as_mut().unwrap().excluded = vec![NodeId(1)];
        assert!(
            pool.allocate_for(&spread).is_none(),
            "nodes 0 and 2: node 0 is full"
        );
        assert_eq!(pool.free_count(), 3, "a refused allocation takes nothing");
        assert_eq!(pool.allocate_for(&plain).unwrap().to_string(), "3");
    }

    #[test]
    fn down_nodes_are_not_allocated() {
        let m = MachineShape::flat(4, 2);
        let mut pool = PePool::new(m);
        let a = pool.allocate(2).unwrap(); // node 0
        pool.node_down(NodeId(0));
        pool.node_down(NodeId(1));
        assert_eq!(pool.free_count(), 4);
        assert_eq!(pool.usable_count(), 4);
        pool.release(&a);
        assert_eq!(pool.free_count(), 4);
        assert_eq!(pool.allocate(4).unwrap().to_string(), "4-7");
        pool.node_up(NodeId(0), |_| false);
        assert_eq!(pool.free_count(), 2);
        // Node 0 came back below PEs allocated since: the scan starts low enough to see it.
        assert_eq!(pool.allocate(1).unwrap().to_string(), "0");
    }

    #[test]
    fn a_full_low_part_is_skipped_but_freed_pes_below_are_found() {
        let mut pool = PePool::new(MachineShape::flat(200, 1));
        // Words 0 and 1 full, word 2 in part.
        assert_eq!(pool.allocate(130).unwrap().to_string(), "0-129");
        assert_eq!(pool.first_free, 2);
        assert_eq!(pool.allocate(3).unwrap().to_string(), "130-132");
        pool.release(&PeSet::contiguous(70, 2));
        assert_eq!(pool.first_free, 1);
        assert_eq!(pool.allocate(3).unwrap().to_string(), "70-71,133");
        assert_eq!(pool.first_free, 2);
        pool.release(&PeSet::contiguous(0, 64));
        assert_eq!(pool.first_free, 0);
        assert_eq!(pool.allocate(1).unwrap().to_string(), "0");
        assert_eq!(pool.free_count(), 200 - 130 - 3 + 2 - 3 + 64 - 1);
    }
}
