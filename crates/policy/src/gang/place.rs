//! Putting jobs into the gang matrix and taking them out: memory per node, the packings
//! (buddy, first-fit, best-fit), admitting waiting jobs, and moving the remaining jobs to
//! lower rows when jobs leave.

use std::cell::Cell;

use cosched_core::{JobId, PeSet};

use super::{Bits, Gang, Member, Packing, Row, SortedIds, rotate};
use crate::queue::{never_fits, never_placed};
use crate::{JobRequest, Never};

impl Gang {
    fn mem_per_node(&self, pes: &PeSet, kib_per_pe: u64) -> Vec<(usize, u64)> {
        let per = self.machine.pes_per_node();
        let mut out: Vec<(usize, u64)> = Vec::new();
        for &(s, e) in pes.runs() {
            let mut p = s;
            while p < e {
                let node = p / per;
                let end = e.min((node + 1) * per);
                let add = (end - p) as u64 * kib_per_pe;
                match out.last_mut() {
                    Some((n, k)) if *n == node as usize => *k += add,
                    _ => out.push((node as usize, add)),
                }
                p = end;
            }
        }
        out
    }

    fn mem_fits(&self, pes: &PeSet, req: &JobRequest) -> bool {
        match (self.mem_limit_kib, req.mem_per_pe_kib) {
            (Some(limit), Some(kib)) => self
                .mem_per_node(pes, kib)
                .iter()
                .all(|&(n, k)| self.mem_used[n] + k <= limit),
            _ => true,
        }
    }

    fn mem_change(&mut self, pes: &PeSet, req: &JobRequest, add: bool) {
        if let (Some(_), Some(kib)) = (self.mem_limit_kib, req.mem_per_pe_kib) {
            for (n, k) in self.mem_per_node(pes, kib) {
                if add {
                    self.mem_used[n] += k
                } else {
                    self.mem_used[n] -= k
                }
            }
        }
    }

    /// A job that can never run here: more PEs than the machine, or more memory per node
    /// than a node has.
    /// Why `req` can never run on this machine, if it cannot.
    pub(super) fn impossible(&self, req: &JobRequest) -> Option<Never> {
        if let Some(why) = never_fits(req, self.pes).or_else(|| never_placed(req, &self.machine)) {
            return Some(why);
        }
        match (self.mem_limit_kib, req.mem_per_pe_kib) {
            (Some(limit), Some(kib)) => {
                let per_node = self.machine.pes_per_node().min(req.procs) as u64;
                // Packing fills nodes, so some node gets min(procs, pes_per_node) of its PEs.
                (kib.saturating_mul(per_node) > limit).then(|| Never::Memory {
                    need_kib: kib.saturating_mul(per_node),
                    node_kib: limit,
                })
            }
            _ => None,
        }
    }

    /// Where `req` would go in `row` (its PEs and its block), if anywhere.
    fn fit_in(&self, row: Option<&Row>, req: &JobRequest) -> Option<(PeSet, PeSet)> {
        // What packing must avoid is the row's reservations and the nodes down, read word by
        // word from both bitsets: no union is built, no PE is visited alone.
        let reserved = row.map_or(&self.down, |r| &r.reserved);
        let down = &self.down;
        let n = req.procs;
        let taken = row.map_or(0, |r| r.reserved_count).max(self.down_count);
        if let Some(r) = row {
            debug_assert_eq!(r.reserved_count, r.reserved.count());
        }
        if n > self.pes - taken {
            return None; // not that many PEs clear in the row, in any shape
        }
        if let Some(spread) = &req.spread {
            // Where the spread says, whatever the packing; a block is the PEs themselves.
            let pes = spread.choose(n, &self.machine, |p| !reserved.get(p) && !down.get(p))?;
            return self.mem_fits(&pes, req).then(|| (pes.clone(), pes));
        }
        match self.packing {
            Packing::FirstFit | Packing::BestFit => {
                let from = row.map_or(0, |r| r.full_below.get());
                let (pes, open) = reserved.lowest_clear_in_both_from(down, n, from);
                // Words full with the down nodes need not be full in the row itself.
                if let Some(r) = row
                    && self.down_count == 0
                {
                    r.full_below.set(open);
                }
                let pes = pes?;
                self.mem_fits(&pes, req).then(|| (pes.clone(), pes))
            }
            Packing::Buddy => {
                let size = n.next_power_of_two();
                // No block starts in a full word.
                let mut from = row.map_or(0, |r| r.full_below.get() as u32 * 64);
                while let Some(start) = reserved.first_aligned_clear_in_both(down, size, from) {
                    if start + n > self.pes {
                        return None; // later blocks start later still
                    }
                    let end = (start + size).min(self.pes);
                    let pes = PeSet::contiguous(start, n);
                    if self.mem_fits(&pes, req) {
                        return Some((pes, PeSet::contiguous(start, end - start)));
                    }
                    from = start + size;
                }
                None
            }
        }
    }

    /// Chooses a row (possibly a new one, index `rows.len()`) and PEs for `req`.
    fn choose(&self, req: &JobRequest) -> Option<(usize, PeSet, PeSet)> {
        let mut best: Option<(u32, usize, PeSet, PeSet)> = None;
        for (i, row) in self.rows.iter().enumerate() {
            if let Some((pes, block)) = self.fit_in(Some(row), req) {
                if self.packing != Packing::BestFit {
                    return Some((i, pes, block));
                }
                let free = self.pes - row.reserved_count;
                if best.as_ref().is_none_or(|b| free < b.0) {
                    best = Some((free, i, pes, block));
                }
            }
        }
        if let Some((_, i, pes, block)) = best {
            return Some((i, pes, block));
        }
        let may_open = self.mpl.is_none_or(|m| (self.rows.len() as u32) < m);
        if may_open {
            return self
                .fit_in(None, req)
                .map(|(pes, block)| (self.rows.len(), pes, block));
        }
        None
    }

    pub(super) fn insert(
        &mut self,
        req: JobRequest,
        row: usize,
        pes: PeSet,
        block: PeSet,
        held: bool,
    ) {
        let old = self.version;
        self.version += 1;
        if row == self.rows.len() {
            self.rows.push(Row {
                busy: Bits::new(self.pes),
                reserved: Bits::new(self.pes),
                reserved_count: 0,
                full_below: Cell::new(0),
                jobs: Vec::new(),
                ids: SortedIds::default(),
                entries: Vec::new(),
                blocks: Vec::new(),
                cleared_at: self.clears,
                settled: 0,
            });
            self.stats.max_rows = self.stats.max_rows.max(self.rows.len());
        }
        let r = &mut self.rows[row];
        r.busy.set_pes(&pes);
        debug_assert!(
            !r.reserved.intersects_pes(&block),
            "blocks overlap in a row"
        );
        r.reserved.set_pes(&block);
        r.reserved_count += block.len();
        r.jobs.push(req.id);
        r.ids.insert(req.id);
        r.entries
            .push((req.id, req.procs, rotate::ends(&pes), pes.clone()));
        r.blocks.push((block.clone(), 0));
        r.settled = 0;
        self.mem_change(&pes, &req, true);
        self.fresh.push(req.id);
        self.held_members += held as usize;
        self.carry_arrival(old, row, row, &pes);
        self.members.insert(
            req.id,
            Member {
                req,
                pes,
                block,
                row,
                held,
                announced: false,
            },
        );
    }

    /// Places waiting jobs into the matrix. Inlined for its test: every switch asks, and the
    /// queue is mostly empty.
    #[inline(always)]
    pub(super) fn admit(&mut self) {
        if !self.queue.is_empty() {
            self.admit_queue();
        }
    }

    fn admit_queue(&mut self) {
        let (at, mut failed) = std::mem::take(&mut self.unplaceable);
        if at != self.version {
            failed = SortedIds::default();
        }
        // Failures of this pass, apart so `failed` stays sorted for its lookups.
        let mut new_failures = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            let req = self.queue.get(i);
            if self.queue.is_held(req.id) {
                i += 1;
                continue;
            }
            let placed = if failed.contains(&req.id) {
                None
            } else {
                self.choose(req)
            };
            match placed {
                Some((row, pes, block)) => {
                    let req = self.queue.remove(i);
                    self.insert(req, row, pes, block, false);
                }
                None => {
                    if !failed.contains(&req.id) {
                        new_failures.push(req.id);
                    }
                    if self.fifo {
                        break;
                    }
                    i += 1;
                }
            }
        }
        if !new_failures.is_empty() {
            for id in new_failures {
                failed.push_unsorted(id);
            }
            failed.sort();
        }
        // Placements in this pass only took room, so every failure still holds now.
        self.unplaceable = (self.version, failed);
    }

    /// After a departure: moves jobs down to lower rows where their blocks are free, drops
    /// empty rows, and returns whether the active row disappeared (then at `self.active` now
    /// stands the row after it).
    pub(super) fn compact(&mut self) -> bool {
        if self.repack {
            // The latest clearing of any row below `r`: a job settled since has no room there.
            let mut cleared_below = 0;
            let mut stamps = std::mem::take(&mut self.cleared_stamps);
            let mut recent = std::mem::take(&mut self.recent_rows);
            stamps.clear();
            for r in 1..self.rows.len() {
                stamps.push(self.rows[r - 1].cleared_at);
                cleared_below = cleared_below.max(self.rows[r - 1].cleared_at);
                let row_settled = self.rows[r].settled;
                if row_settled != 0 && cleared_below <= row_settled {
                    continue; // every job of the row settled since the rows below changed
                }
                // Every job of the row settled at `row_settled` or later (when it is not 0):
                // the rows below cleared since are the only ones any of them looks at again,
                // listed once for the row rather than found by each job among all rows below.
                recent.clear();
                if row_settled != 0 {
                    recent.extend((0..r).filter(|&q| stamps[q] > row_settled));
                }
                // The least stamp of the jobs that stay, for the row's next look.
                let mut least = u64::MAX;
                // The row's jobs by place: a job that moves down is taken out at `i`, and the
                // next one comes to stand there, so each is looked at once, in order.
                let mut i = 0;
                while i < self.rows[r].jobs.len() {
                    let id = self.rows[r].jobs[i];
                    let settled = self.rows[r].blocks[i].1;
                    let running_in_active = r == self.active && self.running.contains(&id);
                    if running_in_active || settled != 0 && cleared_below <= settled {
                        least = least.min(settled);
                        i += 1;
                        continue;
                    }
                    self.rows[r].blocks[i].1 = self.clears;
                    least = least.min(self.clears);
                    // Rows not cleared since it settled still overlap its block. Moves into
                    // the rows below do not clear them, so `stamps` stays their `cleared_at`.
                    let rows = &self.rows;
                    let block = &rows[r].blocks[i].0;
                    let room = |q: usize| {
                        (settled == 0 || stamps[q] > settled)
                            && !rows[q].reserved.intersects_pes(block)
                    };
                    let lowest = if row_settled != 0 {
                        recent.iter().copied().find(|&q| room(q))
                    } else {
                        (0..r).find(|&q| room(q))
                    };
                    let Some(q) = lowest else {
                        i += 1;
                        continue;
                    };
                    self.clears += 1;
                    let from = &mut self.rows[r];
                    from.cleared_at = self.clears;
                    from.jobs.remove(i);
                    from.ids.remove(id);
                    let entry = from.entries.remove(i);
                    let (block, stamp) = from.blocks.remove(i);
                    debug_assert_eq!(entry.0, id, "entries follow the row's jobs");
                    let pes = &entry.3;
                    from.busy.clear_pes(pes);
                    from.reserved.clear_pes(&block);
                    from.reserved_count -= block.len();
                    from.unfill(&block);
                    let to = &mut self.rows[q];
                    to.busy.set_pes(pes);
                    to.reserved.set_pes(&block);
                    to.reserved_count += block.len();
                    to.jobs.push(id);
                    to.ids.insert(id);
                    to.settled = 0;
                    self.members.get_mut(&id).expect("member").row = q;
                    let old = self.version;
                    self.version += 1;
                    self.carry_arrival(old, r, q, pes);
                    let to = &mut self.rows[q];
                    to.entries.push(entry);
                    to.blocks.push((block, stamp));
                }
                self.rows[r].settled = least;
            }
            self.cleared_stamps = stamps;
            self.recent_rows = recent;
        }
        let old = std::mem::take(&mut self.rows);
        let mut cache = std::mem::take(&mut self.cache).into_iter();
        let mut active_gone = false;
        let mut new_active = 0;
        // Rows from this one on have a new index: only their jobs are renumbered below.
        let mut first_moved = old.len();
        for (i, row) in old.into_iter().enumerate() {
            if i == self.active {
                active_gone = row.jobs.is_empty();
                new_active = self.rows.len();
            }
            if row.jobs.is_empty() {
                first_moved = first_moved.min(i);
            }
            // A cached switch follows its row: an empty row held no candidates, so dropping
            // it changes no other row's switch.
            let switch = cache.next().flatten();
            if !row.jobs.is_empty() {
                self.rows.push(row);
                self.cache.push(switch);
            }
        }
        self.active = if self.rows.is_empty() {
            0
        } else {
            new_active % self.rows.len()
        };
        for (i, row) in self.rows.iter().enumerate().skip(first_moved) {
            for id in &row.jobs {
                self.members.get_mut(id).expect("row jobs are members").row = i;
            }
        }
        active_gone
    }

    pub(super) fn remove_member(&mut self, id: JobId) -> bool {
        let old = self.version;
        self.version += 1;
        let Some(m) = self.members.remove(&id) else {
            // Not in the matrix: every cached switch holds.
            self.carry_departure(old, usize::MAX, id);
            return false;
        };
        self.carry_departure(old, m.row, id);
        self.clears += 1;
        let row = &mut self.rows[m.row];
        row.cleared_at = self.clears;
        row.busy.clear_pes(&m.pes);
        row.reserved.clear_pes(&m.block);
        row.reserved_count -= m.block.len();
        row.unfill(&m.block);
        let at = row
            .jobs
            .iter()
            .position(|j| *j == id)
            .expect("a member is in its row");
        row.jobs.remove(at);
        row.ids.remove(id);
        row.entries.remove(at);
        row.blocks.remove(at);
        self.running.remove(id);
        self.held_members -= m.held as usize;
        self.mem_change(&m.pes, &m.req, false);
        true
    }
}

#[cfg(test)]
mod tests {
    use cosched_core::{Dur, JobId, MachineShape, Time};

    use super::super::Gang;
    use crate::{Event, JobRequest, Policy, PolicyConfig};

    /// Repacking by its definition: every job of every row but the first, in order, except
    /// those running in the active row, moves to the lowest row where its block is clear;
    /// then the empty rows go (by [`Gang::compact`] with repacking off).
    fn compact_plainly(p: &mut Gang) -> bool {
        for r in 1..p.rows.len() {
            for id in p.rows[r].jobs.clone() {
                if r == p.active && p.running.contains(&id) {
                    continue;
                }
                let m = &p.members[&id];
                let Some(q) = (0..r).find(|&q| !p.rows[q].reserved.intersects_pes(&m.block)) else {
                    continue;
                };
                let (pes, block) = (m.pes.clone(), m.block.clone());
                let from = &mut p.rows[r];
                from.busy.clear_pes(&pes);
                from.reserved.clear_pes(&block);
                from.reserved_count -= block.len();
                from.jobs.retain(|j| *j != id);
                let to = &mut p.rows[q];
                to.busy.set_pes(&pes);
                to.reserved.set_pes(&block);
                to.reserved_count += block.len();
                to.jobs.push(id);
                p.members.get_mut(&id).expect("member").row = q;
            }
        }
        p.repack = false;
        let gone = p.compact();
        p.repack = true;
        gone
    }

    /// Each row's jobs (the plain repacking above keeps only these and the members' rows).
    fn rows_of(p: &Gang) -> Vec<Vec<JobId>> {
        for (r, row) in p.rows.iter().enumerate() {
            for id in &row.jobs {
                assert_eq!(p.members[id].row, r);
            }
        }
        p.rows.iter().map(|row| row.jobs.clone()).collect()
    }

    /// Checks each row's per-job lists against its jobs and their members.
    fn check_lists(p: &Gang) {
        for (r, row) in p.rows.iter().enumerate() {
            assert_eq!(row.jobs.len(), row.entries.len());
            assert_eq!(row.jobs.len(), row.blocks.len());
            for (k, id) in row.jobs.iter().enumerate() {
                let m = &p.members[id];
                assert_eq!(m.row, r);
                assert_eq!(row.entries[k].0, *id);
                assert_eq!(row.entries[k].3, m.pes);
                assert_eq!(row.blocks[k].0, m.block);
            }
            assert!(
                row.ids.iter().eq({
                    let mut v = row.jobs.clone();
                    v.sort();
                    v
                }
                .iter())
            );
        }
    }

    proptest::proptest! {
        /// Repacking after a departure, which looks only at the jobs and rows that changed
        /// since each job last found no room below (the stamps in [`super::super::Row::blocks`]),
        /// moves the jobs its definition moves, to the same rows in the same order, through
        /// arrivals, departures and switches with each packing; the rows' per-job lists stay
        /// those of their members.
        #[test]
        fn repacking_is_its_definition(
            packing in 0usize..3,
            ops in proptest::collection::vec((0u8..5, 1u32..17, 0usize..64), 1..120),
        ) {
            let mut c = PolicyConfig::new(MachineShape::flat(16, 1));
            c.quantum = Some(Dur::from_secs(10));
            let name = ["buddy", "first-fit", "best-fit"][packing];
            c.options.insert("packing".into(), toml::Value::from(name));
            let mut p = Gang::new(&c).unwrap();
            let mut out = Vec::new();
            let mut next = 1u64;
            for (step, (op, procs, pick)) in ops.into_iter().enumerate() {
                let t = Time::from_secs(step as i64 + 1);
                let mut ids: Vec<JobId> = p.members.keys().copied().collect();
                ids.sort();
                out.clear();
                match op {
                    0 | 1 => {
                        let req = JobRequest::new(JobId(next), t, procs, Dur::from_secs(100_000));
                        next += 1;
                        p.handle(t, Event::Submitted(req), &mut out);
                    }
                    2 | 3 if !ids.is_empty() => {
                        let id = ids[pick % ids.len()];
                        let mut plain = p.clone();
                        proptest::prop_assert!(plain.remove_member(id));
                        let plain_gone = compact_plainly(&mut plain);
                        p.observe(t, Event::Ended(id));
                        proptest::prop_assert_eq!(p.active_gone, plain_gone);
                        proptest::prop_assert_eq!(p.active, plain.active);
                        proptest::prop_assert_eq!(rows_of(&p), rows_of(&plain));
                        check_lists(&p);
                        p.decide(t, &mut out);
                    }
                    _ => {
                        if let Some((token, _)) = p.pending {
                            p.handle(t, Event::Timer(token), &mut out);
                        }
                    }
                }
            }
        }
    }
}
