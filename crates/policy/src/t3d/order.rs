//! [`Lane`]: the waiting jobs of one T3D class in the order a pass visits them (since when
//! they wait, then id), with the least width of every span, so that a pass finds the next job
//! narrow enough to act without walking past the thousands that cannot.
//!
//! Jobs sit in slots of a segment tree in key order; a job that leaves keeps its key and
//! gets width `u32::MAX`, so a slot's place never moves until the lane is compacted (when it
//! fills, or when a job must go before the last key: a job joins a lane almost always last,
//! since it waits from the instant it is queued).

use cosched_core::{IdMap, JobId, Time};

/// A slot's key: since when the job waits, then its id.
pub(super) type Key = (Time, JobId);

/// Width of a slot whose job left.
const GONE: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub(super) struct Lane {
    /// Every slot's key, in increasing order (slots whose job left keep theirs).
    keys: Vec<Key>,
    /// Every slot's tag (the caller's: when the job joined).
    tags: Vec<u64>,
    /// The segment tree: leaves `cap..2 cap` hold the slots' widths, each inner node the least
    /// of its two children.
    tree: Vec<u32>,
    /// Leaves: a power of two, at least `keys.len()`.
    cap: usize,
    /// The slot of each job in the lane.
    slot: IdMap<usize>,
}

impl Lane {
    pub fn is_empty(&self) -> bool {
        self.slot.is_empty()
    }

    /// The width of the lane's narrowest job (`u32::MAX` when it is empty).
    pub fn narrowest(&self) -> u32 {
        if self.slot.is_empty() {
            GONE
        } else {
            self.tree[1]
        }
    }

    /// The earliest `since` among the lane's keys: no job of the lane waits from earlier (a
    /// job that left may answer).
    pub fn earliest_since(&self) -> Option<Time> {
        self.keys.first().map(|k| k.0)
    }

    /// Adds a job waiting since `key.0` that asks for `procs` PEs, with a tag of the caller's.
    pub fn insert(&mut self, key: Key, procs: u32, tag: u64) {
        debug_assert!(!self.slot.contains_key(&key.1));
        if self.keys.last().is_none_or(|&last| last < key) && self.keys.len() < self.cap {
            let s = self.keys.len();
            self.keys.push(key);
            self.tags.push(tag);
            self.slot.insert(key.1, s);
            self.set(s, procs);
            return;
        }
        // Out of order, or full: lay the live jobs out again, with this one among them.
        let mut live: Vec<(Key, u32, u64)> = (0..self.keys.len())
            .filter_map(|s| {
                let w = self.tree[self.cap + s];
                (w != GONE).then_some((self.keys[s], w, self.tags[s]))
            })
            .collect();
        let at = live.partition_point(|&(k, _, _)| k < key);
        live.insert(at, (key, procs, tag));
        self.lay_out(&live);
    }

    /// Takes job `id` out of the lane, if it is there.
    pub fn remove(&mut self, id: JobId) {
        let Some(s) = self.slot.remove(&id) else {
            return;
        };
        if self.slot.is_empty() {
            self.keys.clear();
            self.tags.clear();
            self.tree.iter_mut().for_each(|w| *w = GONE);
            return;
        }
        self.set(s, GONE);
    }

    /// The first job, in key order, after `after` (from the start if `None`) and waiting
    /// since no later than `until` (if given), whose width is at most `bound`: its key and
    /// tag.
    pub fn first(&self, after: Option<Key>, until: Option<Time>, bound: u32) -> Option<(Key, u64)> {
        // The root holds the narrowest job of the lane.
        if self.slot.is_empty() || self.tree[1] > bound {
            return None;
        }
        // Keys are unique and sorted: a job still in the lane is found by its slot.
        let lo = after.map_or(0, |a| match self.slot.get(&a.1) {
            Some(&s) if self.keys[s] == a => s + 1,
            _ => self.keys.partition_point(|&k| k <= a),
        });
        let hi = until.map_or(self.keys.len(), |u| self.keys.partition_point(|k| k.0 <= u));
        let s = self.first_at_most(lo, hi, bound)?;
        Some((self.keys[s], self.tags[s]))
    }

    /// The earliest `since` later than `t` among the lane's keys (a job that left may still
    /// answer: never later than the true one).
    pub fn first_since_after(&self, t: Time) -> Option<Time> {
        let i = self.keys.partition_point(|k| k.0 <= t);
        self.keys.get(i).map(|k| k.0)
    }

    /// The first slot of `lo..hi` whose width is at most `bound`.
    fn first_at_most(&self, lo: usize, hi: usize, bound: u32) -> Option<usize> {
        if lo >= hi {
            return None;
        }
        // The canonical nodes covering lo..hi, left to right: the left side's in the order
        // the climb meets them, then the right side's from the top down. The right side's
        // node at level `k` is `(hi + cap) >> k` less one, present when that is odd, so a
        // mask of levels stands for the list (no array to clear at every call).
        let (mut l, mut r) = (lo + self.cap, hi + self.cap);
        let top = r;
        let (mut right, mut level) = (0u64, 0u32);
        while l < r {
            if l & 1 == 1 {
                if self.tree[l] <= bound {
                    return Some(self.descend(l, bound));
                }
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                right |= 1 << level;
            }
            l >>= 1;
            r >>= 1;
            level += 1;
        }
        while right != 0 {
            let k = 63 - right.leading_zeros();
            right &= !(1u64 << k);
            let n = (top >> k) - 1;
            if self.tree[n] <= bound {
                return Some(self.descend(n, bound));
            }
        }
        None
    }

    /// The first leaf under node `n` (whose width is at most `bound`) of width at most
    /// `bound`: its slot.
    fn descend(&self, mut n: usize, bound: u32) -> usize {
        while n < self.cap {
            n *= 2;
            if self.tree[n] > bound {
                n += 1;
            }
        }
        n - self.cap
    }

    fn set(&mut self, s: usize, w: u32) {
        let mut n = self.cap + s;
        self.tree[n] = w;
        while n > 1 {
            n /= 2;
            self.tree[n] = self.tree[2 * n].min(self.tree[2 * n + 1]);
        }
    }

    /// Puts `live` (in key order) in slots `0..`, with room for as many again.
    fn lay_out(&mut self, live: &[(Key, u32, u64)]) {
        self.cap = (2 * live.len()).next_power_of_two().max(16);
        self.keys.clear();
        self.tags.clear();
        self.slot.clear();
        self.tree.clear();
        self.tree.resize(2 * self.cap, GONE);
        for (s, &(k, w, tag)) in live.iter().enumerate() {
            self.keys.push(k);
            self.tags.push(tag);
            self.slot.insert(k.1, s);
            self.tree[self.cap + s] = w;
        }
        for n in (1..self.cap).rev() {
            self.tree[n] = self.tree[2 * n].min(self.tree[2 * n + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random inserts (mostly last, some out of order), removals and queries, against a plain
    /// sorted list.
    #[test]
    fn first_is_the_first_narrow_enough_job_of_a_plain_list() {
        let mut lane = Lane::default();
        let mut plain: Vec<(Key, u32, u64)> = Vec::new();
        let mut x: u64 = 7;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut next_id = 0u64;
        let mut clock = 0i64;
        for step in 0..20_000u64 {
            match rnd(10) {
                0..=4 => {
                    clock += rnd(3) as i64;
                    // Now and then a job goes before the last key.
                    let since = if rnd(20) == 0 {
                        clock - rnd(5) as i64
                    } else {
                        clock
                    };
                    next_id += 1;
                    let id = if rnd(4) == 0 {
                        1_000_000 - next_id
                    } else {
                        next_id
                    };
                    let key = (Time::from_secs(since), JobId(id));
                    let procs = 1 + rnd(64) as u32;
                    lane.insert(key, procs, step);
                    let at = plain.partition_point(|&(k, _, _)| k < key);
                    plain.insert(at, (key, procs, step));
                }
                5..=7 if !plain.is_empty() => {
                    let (k, _, _) = plain.remove(rnd(plain.len() as u64) as usize);
                    lane.remove(k.1);
                }
                _ => {}
            }
            assert_eq!(lane.is_empty(), plain.is_empty());
            let bound = rnd(70) as u32;
            let after = (!plain.is_empty() && rnd(2) == 0)
                .then(|| plain[rnd(plain.len() as u64) as usize].0);
            let until = Time::from_secs(clock - rnd(4) as i64);
            let until = (rnd(3) != 0).then_some(until);
            let want = plain
                .iter()
                .filter(|&&(k, _, _)| after.is_none_or(|a| k > a) && until.is_none_or(|u| k.0 <= u))
                .find(|&&(_, w, _)| w <= bound)
                .map(|&(k, _, tag)| (k, tag));
            let got = lane.first(after, until, bound);
            assert_eq!(got, want, "step {step}");
        }
    }
}
