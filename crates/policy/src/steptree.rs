//! An availability profile (free PEs over future time, as steps) kept in a treap, so that
//! conservative backfilling can take and give back reservations and find earliest fits in
//! logarithmic time however long its queue and profile grow.
//!
//! It holds the same free function as the linear [`Profile`](crate::profile::Profile) and
//! answers the same questions with the same results (a unit test drives both with random
//! operations); it differs in cost, and in that it can be patched: free counts are signed, so a
//! patched profile that would be over-committed shows it ([`StepTree::min_free`] < 0) instead
//! of refusing a reservation. Neighbouring steps with equal free counts are merged, so the tree
//! holds only real changes of the free count.
//!
//! Each node is a step `(start, free)`; subtrees keep the minimum and maximum free count, and
//! a pending addition for their descendants (a reservation over a range is one addition on
//! `O(log n)` subtrees). Searches descend by those bounds: the first step at or after a time
//! with at least `p` free, or with fewer than `p` free, each in `O(log n)`.

use cosched_core::{Dur, Time};

const NIL: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: i64,
    /// This step's free count, with this node's pending addition already applied.
    val: i64,
    /// Minimum and maximum of the subtree, with this node's pending addition applied.
    min: i64,
    max: i64,
    /// Added to both children's subtrees, not yet pushed down.
    add: i64,
    pri: u32,
    l: u32,
    r: u32,
}

const SENTINEL: Node = Node {
    key: 0,
    val: 0,
    min: i64::MAX,
    max: i64::MIN,
    add: 0,
    pri: 0,
    l: NIL,
    r: NIL,
};

/// Free PEs over `[start, ∞)` as steps in a treap (see the module documentation).
#[derive(Clone, Debug)]
pub struct StepTree {
    /// Node 0 is the empty-tree sentinel; freed nodes are reused through `spare`.
    nodes: Vec<Node>,
    spare: Vec<u32>,
    root: u32,
    /// The xorshift state for priorities: a fixed seed, so every run builds the same tree.
    seed: u32,
}

impl Default for StepTree {
    fn default() -> Self {
        StepTree {
            nodes: vec![SENTINEL],
            spare: Vec::new(),
            root: NIL,
            seed: 0x9e37_79b9,
        }
    }
}

/// A reservation lasts at least a microsecond, as in the linear profile.
fn span(start: Time, dur: Dur) -> (i64, i64) {
    let s = start.as_micros();
    (s, s + dur.max(Dur::from_micros(1)).as_micros())
}

impl StepTree {
    fn pri(&mut self) -> u32 {
        let mut x = self.seed;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.seed = x;
        x
    }

    fn alloc(&mut self, key: i64, val: i64) -> u32 {
        let node = Node {
            key,
            val,
            min: val,
            max: val,
            add: 0,
            pri: self.pri(),
            l: NIL,
            r: NIL,
        };
        if let Some(i) = self.spare.pop() {
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    fn apply(&mut self, n: u32, d: i64) {
        if n != NIL {
            let x = &mut self.nodes[n as usize];
            x.val += d;
            x.min += d;
            x.max += d;
            x.add += d;
        }
    }

    fn push(&mut self, n: u32) {
        let Node { add, l, r, .. } = self.nodes[n as usize];
        if add != 0 {
            self.apply(l, add);
            self.apply(r, add);
            self.nodes[n as usize].add = 0;
        }
    }

    /// Recomputes `n`'s bounds from its children (its pending addition already pushed).
    fn pull(&mut self, n: u32) {
        let Node { val, l, r, .. } = self.nodes[n as usize];
        let (a, b) = (self.nodes[l as usize], self.nodes[r as usize]);
        let x = &mut self.nodes[n as usize];
        x.min = val.min(a.min).min(b.min);
        x.max = val.max(a.max).max(b.max);
    }

    /// Splits `n` into the steps with key < `k` and those with key >= `k`.
    fn split(&mut self, n: u32, k: i64) -> (u32, u32) {
        if n == NIL {
            return (NIL, NIL);
        }
        self.push(n);
        if self.nodes[n as usize].key < k {
            let (a, b) = self.split(self.nodes[n as usize].r, k);
            self.nodes[n as usize].r = a;
            self.pull(n);
            (n, b)
        } else {
            let (a, b) = self.split(self.nodes[n as usize].l, k);
            self.nodes[n as usize].l = b;
            self.pull(n);
            (a, n)
        }
    }

    /// Joins two treaps, every key of `a` before every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].pri > self.nodes[b as usize].pri {
            self.push(a);
            let r = self.merge(self.nodes[a as usize].r, b);
            self.nodes[a as usize].r = r;
            self.pull(a);
            a
        } else {
            self.push(b);
            let l = self.merge(a, self.nodes[b as usize].l);
            self.nodes[b as usize].l = l;
            self.pull(b);
            b
        }
    }

    /// Puts every node of `n` back on the spare list.
    fn free_all(&mut self, n: u32) {
        let mut stack = vec![n];
        while let Some(n) = stack.pop() {
            if n != NIL {
                let Node { l, r, .. } = self.nodes[n as usize];
                stack.push(l);
                stack.push(r);
                self.spare.push(n);
            }
        }
    }

    /// The profile at `now` with `free_now` free PEs and running jobs releasing theirs at the
    /// given (non-decreasing) times, as [`Profile::rebuild`](crate::profile::Profile::rebuild).
    pub fn rebuild(
        &mut self,
        now: Time,
        free_now: u32,
        releases: impl Iterator<Item = (Time, u32)>,
    ) {
        self.nodes.truncate(1);
        self.spare.clear();
        // Steps in key order onto the right spine of a Cartesian tree: linear time.
        let mut spine: Vec<u32> = Vec::new();
        let mut free = i64::from(free_now);
        let mut last = (now.as_micros(), free);
        let mut emit = |tree: &mut StepTree, (key, val): (i64, i64)| {
            let n = tree.alloc(key, val);
            let mut left = NIL;
            while let Some(&top) = spine.last() {
                if tree.nodes[top as usize].pri > tree.nodes[n as usize].pri {
                    break;
                }
                spine.pop();
                tree.pull(top);
                left = top;
            }
            tree.nodes[n as usize].l = left;
            if let Some(&top) = spine.last() {
                tree.nodes[top as usize].r = n;
            }
            spine.push(n);
        };
        for (t, procs) in releases {
            free += i64::from(procs);
            if t.as_micros() == last.0 {
                last.1 = free;
            } else {
                if last.1 != free {
                    emit(self, last);
                    last = (t.as_micros(), free);
                }
            }
        }
        emit(self, last);
        for &n in spine.iter().rev() {
            self.pull(n);
        }
        self.root = spine.first().copied().unwrap_or(NIL);
    }

    /// The profile's first instant (`None` when empty, before any rebuild).
    pub fn start(&self) -> Option<Time> {
        let mut n = self.root;
        if n == NIL {
            return None;
        }
        while self.nodes[n as usize].l != NIL {
            n = self.nodes[n as usize].l;
        }
        Some(Time::from_micros(self.nodes[n as usize].key))
    }

    /// The free count at `k` (of the last step starting at or before it), if `k` is not before
    /// the profile's start.
    fn value_at(&self, k: i64) -> Option<i64> {
        let (mut n, mut acc, mut found) = (self.root, 0, None);
        while n != NIL {
            let x = &self.nodes[n as usize];
            if x.key <= k {
                found = Some(x.val + acc);
                acc += x.add;
                n = x.r;
            } else {
                acc += x.add;
                n = x.l;
            }
        }
        found
    }

    /// Minimum (`max == false`) or maximum of the free counts of the steps with key in
    /// `(lo, hi)`, or `None` if there is none.
    fn bound_between(&self, lo: i64, hi: i64, max: bool) -> Option<i64> {
        let pick = |a: i64, b: i64| if max { a.max(b) } else { a.min(b) };
        let mut best: Option<i64> = None;
        // Descend to the split point, then walk the two boundaries taking whole subtrees.
        let (mut n, mut acc) = (self.root, 0);
        while n != NIL {
            let x = &self.nodes[n as usize];
            if x.key <= lo {
                acc += x.add;
                n = x.r;
            } else if x.key >= hi {
                acc += x.add;
                n = x.l;
            } else {
                break;
            }
        }
        if n == NIL {
            return None;
        }
        let x = self.nodes[n as usize];
        best = Some(best.map_or(x.val + acc, |b| pick(b, x.val + acc)));
        let inner = acc + x.add;
        // Left boundary: keys > lo.
        let (mut m, mut a) = (x.l, inner);
        while m != NIL {
            let y = &self.nodes[m as usize];
            if y.key > lo {
                let v = y.val + a;
                let r = &self.nodes[y.r as usize];
                let mut b = pick(best.unwrap(), v);
                if y.r != NIL {
                    b = pick(b, if max { r.max } else { r.min } + a + y.add);
                }
                best = Some(b);
                a += y.add;
                m = y.l;
            } else {
                a += y.add;
                m = y.r;
            }
        }
        // Right boundary: keys < hi.
        let (mut m, mut a) = (x.r, inner);
        while m != NIL {
            let y = &self.nodes[m as usize];
            if y.key < hi {
                let v = y.val + a;
                let l = &self.nodes[y.l as usize];
                let mut b = pick(best.unwrap(), v);
                if y.l != NIL {
                    b = pick(b, if max { l.max } else { l.min } + a + y.add);
                }
                best = Some(b);
                a += y.add;
                m = y.r;
            } else {
                a += y.add;
                m = y.l;
            }
        }
        best
    }

    /// The first step with key >= `k` whose free count is at least `p` (`ge`) or below `p`
    /// (`!ge`): its key.
    fn first_from(&self, k: i64, p: i64, ge: bool) -> Option<i64> {
        self.first_in(self.root, 0, k, p, ge)
    }

    fn first_in(&self, n: u32, acc: i64, k: i64, p: i64, ge: bool) -> Option<i64> {
        if n == NIL {
            return None;
        }
        let x = &self.nodes[n as usize];
        let fits = |v: i64| if ge { v >= p } else { v < p };
        let possible = if ge {
            x.max + acc >= p
        } else {
            x.min + acc < p
        };
        if !possible {
            return None;
        }
        let inner = acc + x.add;
        if x.key < k {
            return self.first_in(x.r, inner, k, p, ge);
        }
        if let Some(found) = self.first_in(x.l, inner, k, p, ge) {
            return Some(found);
        }
        if fits(x.val + acc) {
            return Some(x.key);
        }
        self.first_in(x.r, inner, k, p, ge)
    }

    /// The earliest time `procs` PEs stay free for `dur`; `None` if the machine never has
    /// that many free. As [`Profile::earliest`](crate::profile::Profile::earliest).
    pub fn earliest(&self, procs: u32, dur: Dur) -> Option<Time> {
        let p = i64::from(procs);
        let dur = dur.max(Dur::from_micros(1)).as_micros();
        let mut from = self.start()?.as_micros();
        loop {
            let t = self.first_from(from, p, true)?;
            match self.first_from(t + 1, p, false) {
                Some(short) if short < t + dur => from = short,
                _ => return Some(Time::from_micros(t)),
            }
        }
    }

    /// The most PEs free at any instant of `[start, end)` (0 for an empty span; the linear
    /// profile may answer otherwise for an empty span that does not start a step, which
    /// compression never asks: its spans start at the profile's start or are not empty).
    pub fn max_free(&self, start: Time, end: Time) -> u32 {
        let (s, e) = (start.as_micros(), end.as_micros());
        let Some(here) = self.value_at(s).filter(|_| e > s) else {
            return 0;
        };
        let best = self.bound_between(s, e, true).map_or(here, |m| m.max(here));
        best.max(0) as u32
    }

    /// The fewest PEs free at any instant of `[start, end)`.
    fn min_over(&self, s: i64, e: i64) -> Option<i64> {
        let here = self.value_at(s)?;
        Some(
            self.bound_between(s, e, false)
                .map_or(here, |m| m.min(here)),
        )
    }

    /// The fewest PEs free at any instant of the profile: negative when the reservations and
    /// the running jobs ask for more than the machine has.
    pub fn min_free(&self) -> i64 {
        if self.root == NIL {
            0
        } else {
            self.nodes[self.root as usize].min
        }
    }

    /// Adds `d` free PEs over `[s, e)` (clamped to the profile's start), keeping steps with
    /// equal neighbours merged.
    fn add(&mut self, s: i64, e: i64, d: i64) {
        let Some(first) = self.start() else { return };
        let s = s.max(first.as_micros());
        if e <= s {
            return;
        }
        let before_s = self.value_at(s).expect("s is in the profile");
        let before_e = self.value_at(e).expect("e is in the profile");
        let (a, rest) = self.split(self.root, s);
        let (mut m, mut c) = self.split(rest, e);
        // The step at `s` (made if needed) and at `e` (made if needed).
        if self.leftmost_key(m) != Some(s) {
            let n = self.alloc(s, before_s);
            m = self.merge(n, m);
        }
        if self.leftmost_key(c) != Some(e) {
            let n = self.alloc(e, before_e);
            c = self.merge(n, c);
        }
        self.apply(m, d);
        // Merge equal neighbours at the two boundaries.
        let prev_s = self.rightmost_val(a);
        if prev_s == Some(before_s + d) {
            m = self.drop_leftmost(m);
        }
        let last_m = self.rightmost_val(m).or(prev_s).expect("a step before e");
        if last_m == before_e {
            c = self.drop_leftmost(c);
        }
        let am = self.merge(a, m);
        self.root = self.merge(am, c);
    }

    fn leftmost_key(&self, mut n: u32) -> Option<i64> {
        if n == NIL {
            return None;
        }
        while self.nodes[n as usize].l != NIL {
            n = self.nodes[n as usize].l;
        }
        Some(self.nodes[n as usize].key)
    }

    fn rightmost_val(&self, mut n: u32) -> Option<i64> {
        if n == NIL {
            return None;
        }
        let mut acc = 0;
        while self.nodes[n as usize].r != NIL {
            acc += self.nodes[n as usize].add;
            n = self.nodes[n as usize].r;
        }
        Some(self.nodes[n as usize].val + acc)
    }

    /// Removes the first step of `n`; returns the new subtree.
    fn drop_leftmost(&mut self, n: u32) -> u32 {
        self.push(n);
        let l = self.nodes[n as usize].l;
        if l == NIL {
            let r = self.nodes[n as usize].r;
            self.spare.push(n);
            return r;
        }
        let nl = self.drop_leftmost(l);
        self.nodes[n as usize].l = nl;
        self.pull(n);
        n
    }

    /// Forgets the past: the profile then starts at `now`.
    pub fn advance(&mut self, now: Time) {
        let k = now.as_micros();
        let Some(v) = self.value_at(k) else { return };
        let (past, rest) = self.split(self.root, k + 1);
        if self.leftmost_key(past) == Some(k) && self.nodes[past as usize].l == NIL {
            // Only the step at `now` itself is there.
            self.root = self.merge(past, rest);
            return;
        }
        self.free_all(past);
        // The first later step cannot equal `v` in a merged profile; checked all the same.
        let rest = if rest != NIL && self.first_val(rest) == v {
            self.drop_leftmost(rest)
        } else {
            rest
        };
        let n = self.alloc(k, v);
        self.root = self.merge(n, rest);
    }

    fn first_val(&self, mut n: u32) -> i64 {
        let mut acc = 0;
        while self.nodes[n as usize].l != NIL {
            acc += self.nodes[n as usize].add;
            n = self.nodes[n as usize].l;
        }
        self.nodes[n as usize].val + acc
    }

    /// Takes `procs` PEs during `[start, start + dur)` if they are free all along; returns
    /// false (taking nothing) otherwise, or when `start` is before the profile's start.
    pub fn reserve_at(&mut self, start: Time, dur: Dur, procs: u32) -> bool {
        let (s, e) = span(start, dur);
        match self.min_over(s, e) {
            Some(m) if m >= i64::from(procs) => {
                self.add(s, e, -i64::from(procs));
                true
            }
            _ => false,
        }
    }

    /// Takes `procs` PEs during `[start, start + dur)` without checking that they are free.
    pub fn reserve(&mut self, start: Time, dur: Dur, procs: u32) {
        let (s, e) = span(start, dur);
        self.add(s, e, -i64::from(procs));
    }

    /// Gives back what a reservation of `procs` PEs over `[start, start + dur)` took (the part
    /// before the profile's start is forgotten).
    pub fn unreserve(&mut self, start: Time, dur: Dur, procs: u32) {
        let (s, e) = span(start, dur);
        self.add(s, e, i64::from(procs));
    }

    /// Frees `procs` PEs over `[start, end)`: a running job that ended before its expected end.
    pub fn free(&mut self, start: Time, end: Time, procs: u32) {
        self.add(start.as_micros(), end.as_micros(), i64::from(procs));
    }

    /// The steps in time order, `(start, free)`; neighbours always differ.
    pub fn steps(&self) -> Vec<(Time, i64)> {
        let mut out = Vec::new();
        let mut stack: Vec<(u32, i64)> = Vec::new();
        let (mut n, mut acc) = (self.root, 0);
        loop {
            while n != NIL {
                stack.push((n, acc));
                acc += self.nodes[n as usize].add;
                n = self.nodes[n as usize].l;
            }
            let Some((m, a)) = stack.pop() else { break };
            let x = &self.nodes[m as usize];
            out.push((Time::from_micros(x.key), x.val + a));
            acc = a + x.add;
            n = x.r;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use proptest::prelude::*;

    fn t(s: i64) -> Time {
        Time::from_secs(s)
    }
    fn d(s: i64) -> Dur {
        Dur::from_secs(s)
    }

    /// The linear profile's steps with equal neighbours merged.
    fn canonical(p: &Profile) -> Vec<(Time, i64)> {
        let mut out: Vec<(Time, i64)> = Vec::new();
        for &(at, free) in p.steps() {
            if out.last().is_none_or(|l| l.1 != i64::from(free)) {
                out.push((at, i64::from(free)));
            }
        }
        out
    }

    #[test]
    fn same_answers_as_the_linear_profile_by_hand() {
        let mut p = StepTree::default();
        assert_eq!(p.earliest(1, d(1)), None);
        p.rebuild(t(0), 4, [(t(10), 6), (t(30), 6)].into_iter());
        assert_eq!(p.steps(), vec![(t(0), 4), (t(10), 10), (t(30), 16)]);
        assert_eq!(p.earliest(8, d(5)), Some(t(10)));
        p.reserve(t(10), d(5), 10);
        assert_eq!(
            p.steps(),
            vec![(t(0), 4), (t(10), 0), (t(15), 10), (t(30), 16)]
        );
        assert_eq!(p.earliest(2, d(12)), Some(t(15)));
        assert_eq!(p.earliest(2, d(10)), Some(t(0)));
        assert_eq!(p.earliest(17, d(1)), None);
        assert_eq!(p.max_free(t(0), t(15)), 4);
        assert_eq!(p.max_free(t(12), t(16)), 10);
        // Giving back merges the steps again.
        p.unreserve(t(10), d(5), 10);
        assert_eq!(p.steps(), vec![(t(0), 4), (t(10), 10), (t(30), 16)]);
        assert!(!p.reserve_at(t(5), d(10), 5));
        assert!(!p.reserve_at(t(-1), d(1), 1));
        assert!(p.reserve_at(t(10), d(20), 10));
        assert_eq!(p.steps(), vec![(t(0), 4), (t(10), 0), (t(30), 16)]);
        p.advance(t(12));
        assert_eq!(p.steps(), vec![(t(12), 0), (t(30), 16)]);
        // Over-committing shows as a negative minimum.
        p.reserve(t(12), d(1), 3);
        assert_eq!(p.min_free(), -3);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Earliest(u32, i64),
        ReserveAt(i64, i64, u32),
        /// Give back the reservation at this index (modulo) of those taken.
        Unreserve(usize),
        /// Take at the earliest fit, as conservative does.
        ReserveEarliest(u32, i64),
        MaxFree(i64, i64),
        Advance(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u32..20, 0i64..40).prop_map(|(p, d)| Op::Earliest(p, d)),
            (0i64..120, 0i64..40, 1u32..12).prop_map(|(s, d, p)| Op::ReserveAt(s, d, p)),
            any::<usize>().prop_map(Op::Unreserve),
            (1u32..20, 0i64..40).prop_map(|(p, d)| Op::ReserveEarliest(p, d)),
            (0i64..120, 1i64..60).prop_map(|(s, d)| Op::MaxFree(s, d)),
            (0i64..6).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random operations on both profiles give the same answers and the same free
        /// function after every step.
        #[test]
        fn matches_the_linear_profile(
            free_now in 0u32..8,
            releases in prop::collection::vec((0i64..60, 1u32..6), 0..8),
            ops in prop::collection::vec(op(), 1..120),
        ) {
            let mut rel: Vec<(Time, u32)> = releases.iter().map(|&(s, p)| (t(s), p)).collect();
            rel.sort_by_key(|r| r.0);
            let mut lin = Profile::default();
            let mut tree = StepTree::default();
            let mut now = 0;
            lin.rebuild(t(now), free_now, rel.iter().copied());
            tree.rebuild(t(now), free_now, rel.iter().copied());
            prop_assert_eq!(tree.steps(), canonical(&lin));
            let mut taken: Vec<(i64, i64, u32)> = Vec::new();
            for op in ops {
                match op {
                    Op::Earliest(p, du) => {
                        prop_assert_eq!(tree.earliest(p, d(du)), lin.earliest(p, d(du)).map(|e| e.0));
                    }
                    Op::ReserveAt(s, du, p) => {
                        let ok = lin.reserve_at(t(s), d(du), p);
                        prop_assert_eq!(tree.reserve_at(t(s), d(du), p), ok);
                        if ok {
                            taken.push((s, du, p));
                        }
                    }
                    Op::Unreserve(i) => {
                        // Only reservations still wholly in the future, as the linear profile
                        // cannot give back before its start.
                        taken.retain(|r| r.0 >= now);
                        if !taken.is_empty() {
                            let (s, du, p) = taken.swap_remove(i % taken.len());
                            lin.unreserve(t(s), d(du), p);
                            tree.unreserve(t(s), d(du), p);
                        }
                    }
                    Op::ReserveEarliest(p, du) => {
                        let want = lin.earliest(p, d(du));
                        prop_assert_eq!(tree.earliest(p, d(du)), want.map(|e| e.0));
                        if let Some((at, i)) = want {
                            lin.reserve(i, d(du), p);
                            tree.reserve(at, d(du), p);
                            taken.push((at.as_secs(), du, p));
                        }
                    }
                    Op::MaxFree(s, du) => {
                        let s = s.max(now);
                        prop_assert_eq!(tree.max_free(t(s), t(s + du)), lin.max_free(t(s), t(s + du)));
                    }
                    Op::Advance(by) => {
                        now += by;
                        lin.advance(t(now));
                        tree.advance(t(now));
                    }
                }
                prop_assert_eq!(tree.steps(), canonical(&lin));
                prop_assert!(tree.min_free() >= 0);
            }
        }
    }
}
