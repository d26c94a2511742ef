//! The slice timeline: intervals cut into short, medium and long slices, each VM's clock
//! moving only in its own slice's active part, and VM time converted to wall time.

use cosched_core::{Dur, Time};

use super::{LONG, MEDIUM, SHORT, Scojo, ScojoConfig};
use crate::Decision;

/// One slice of the timeline.
/// The non-empty slices of one interval, in order (at most three: held in place, because
/// the timeline is walked slice by slice for every response-time prediction).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Slices {
    pub(super) list: [Slice; 3],
    pub(super) len: usize,
}

impl Slices {
    /// Appends `s` unless it is empty.
    fn push(&mut self, s: Slice) {
        if s.end > s.begin {
            self.list[self.len] = s;
            self.len += 1;
        }
    }
}

impl Slices {
    /// The same slices `t0` later: slice bounds are whole microseconds, so this is exact.
    fn shifted(&self, t0: Time) -> Slices {
        let d = Dur::from_micros(t0.as_micros());
        let mut out = *self;
        for s in &mut out.list[..out.len] {
            s.begin += d;
            s.active += d;
            s.end += d;
        }
        out
    }
}

impl std::ops::Deref for Slices {
    type Target = [Slice];
    fn deref(&self) -> &[Slice] {
        &self.list[..self.len]
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Slice {
    pub(super) kind: usize,
    pub(super) begin: Time,
    /// End of the preemption overhead: the VM runs from here.
    pub(super) active: Time,
    pub(super) end: Time,
}

impl Scojo {
    /// The slices of the interval starting at `t0`. An interval without a short slice is
    /// the same at every start, so it is the one computed at construction, moved to `t0`.
    pub(super) fn slices_of(&self, t0: Time, short: bool) -> Slices {
        if short {
            Self::slices_at(&self.cfg, t0, true)
        } else {
            self.plain.shifted(t0)
        }
    }

    /// The slices of the interval starting at `t0`, computed.
    pub(super) fn slices_at(c: &ScojoConfig, t0: Time, short: bool) -> Slices {
        let mut v = Slices::default();
        let mut t = t0;
        let mk = |kind, begin: Time, end: Time| Slice {
            kind,
            begin,
            active: (begin + c.overhead).min(end),
            end,
        };
        if short {
            v.push(mk(SHORT, t, t + c.short_slice));
            t += c.short_slice;
        }
        let rest = (t0 + c.interval) - t;
        let m = Dur::from_micros((rest.as_micros() as f64 * c.medium_share).round() as i64);
        v.push(mk(MEDIUM, t, t + m));
        v.push(mk(LONG, t + m, t0 + c.interval));
        v
    }

    pub(super) fn short_pending(&self) -> bool {
        !self.vms[SHORT].queue.is_empty() || !self.vms[SHORT].alloc.is_empty()
    }

    pub(super) fn busy(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Starts the timeline in the interval holding `now` (the first job, or the first after an
    /// idle spell).
    pub(super) fn start_timeline(&mut self, now: Time) {
        let i = self.cfg.interval.as_micros();
        self.interval_start = Time::from_micros(now.as_micros().div_euclid(i) * i);
        self.short_here = self.short_pending();
        let s = self
            .slices_of(self.interval_start, self.short_here)
            .iter()
            .copied()
            .find(|s| s.end > now)
            .expect("the interval holds now");
        // Nothing ran before: nothing to preempt or resume, so no overhead.
        self.slice = Some(Slice {
            active: s.active.min(now.max(s.begin)),
            ..s
        });
    }

    /// The slice after `s`.
    pub(super) fn next_slice(&mut self, s: Slice) -> Slice {
        let list = self.slices_of(self.interval_start, self.short_here);
        let k = list
            .iter()
            .position(|x| (x.kind, x.begin) == (s.kind, s.begin))
            .expect("current slice");
        if k + 1 < list.len() {
            return list[k + 1];
        }
        self.interval_start += self.cfg.interval;
        self.short_here = self.short_pending();
        self.slices_of(self.interval_start, self.short_here)[0]
    }

    /// Carries the timeline up to `now`: slice ends suspend their VM's jobs, slice
    /// activations resume theirs.
    pub(super) fn advance(&mut self, now: Time, out: &mut Vec<Decision>) {
        if self.slice.is_none() {
            if !self.busy() {
                return;
            }
            self.start_timeline(now);
        }
        while let Some(s) = self.slice {
            let vm = &self.vms[s.kind];
            if now >= s.end {
                if let Some(since) = vm.active_since {
                    self.stats.active[s.kind] += (s.end - since).as_secs_f64();
                    let vm = &mut self.vms[s.kind];
                    vm.vbase += s.end - since;
                    vm.active_since = None;
                    for &id in &vm.alloc {
                        out.push(Decision::Suspend { job: id });
                    }
                }
                if !self.busy() {
                    self.slice = None;
                    return;
                }
                let next = self.next_slice(s);
                self.slice = Some(next);
            } else if now >= s.active && vm.active_since.is_none() {
                let vm = &mut self.vms[s.kind];
                vm.active_since = Some(s.active);
                for &id in &vm.alloc {
                    out.push(Decision::Resume { job: id });
                }
                break;
            } else {
                break;
            }
        }
    }

    /// The wall time at which VM `k`'s clock reaches `v`, from `now`, assuming no short
    /// slices in later intervals. The current interval is walked slice by slice from the
    /// current slice (it holds at most one slice of VM `k`, so when the current slice is
    /// `k`'s the rest of the interval is passed at once); past it every interval is plain and gives VM `k` the
    /// same active part at the same offset, so the answer is read off from how many whole
    /// active parts the rest of `need` spans. That is [`Scojo::wall_at_walked`]'s answer
    /// whenever the walk would reach it within its bound of slices; beyond that bound (or
    /// with no active part of VM `k` in a plain interval) the walk itself answers.
    pub(super) fn wall_at(&self, k: usize, v: Time, now: Time) -> Time {
        let at = self.wall_at_direct(k, v, now);
        debug_assert_eq!(
            at,
            self.wall_at_walked(k, v, now),
            "VM {k}: wall time of {v:?} from {now:?}"
        );
        at
    }

    fn wall_at_direct(&self, k: usize, v: Time, now: Time) -> Time {
        let mut need = v - self.vms[k].vnow(now);
        let Some(s) = self.slice else {
            return now + need.max(Dur::ZERO);
        };
        if need <= Dur::ZERO {
            return now;
        }
        // The current slice.
        let mut walked: i64 = 1;
        if s.kind == k {
            let from = now.max(s.active);
            let avail = s.end.since(from).max(Dur::ZERO);
            if avail >= need {
                return from + need;
            }
            need -= avail;
        }
        // The slices after it in the current interval. An interval holds at most one slice
        // of each VM, so when the current slice is VM `k`'s (as it is for every decision the
        // VM makes) none of them gives `k` time, and the interval's slices are not made:
        // `uncounted` then bounds how many of them the walk would have passed.
        let mut uncounted: i64 = 2;
        if s.kind != k {
            let list = self.slices_of(self.interval_start, self.short_here);
            let pos = list
                .iter()
                .position(|x| (x.kind, x.begin) == (s.kind, s.begin));
            let rest = pos.map_or(&list[..0], |p| &list[p + 1..]);
            let mut t = s.end;
            for x in rest {
                walked += 1;
                if x.kind == k {
                    let from = t.max(x.active);
                    let avail = x.end.since(from).max(Dur::ZERO);
                    if avail >= need {
                        return from + need;
                    }
                    need -= avail;
                }
                t = x.end;
            }
            uncounted = 0;
        }
        // Plain intervals from `t0` on: VM `k`'s slice is the `q`-th of each, active for
        // `a` from `off` after the interval's start.
        let t0 = self.interval_start + self.cfg.interval;
        let plain = &self.plain;
        let Some(q) = plain.iter().position(|x| x.kind == k) else {
            return self.wall_at_walked(k, v, now);
        };
        let a = (plain[q].end - plain[q].active).as_micros();
        if a <= 0 {
            return self.wall_at_walked(k, v, now);
        }
        // The walk passes `n` whole intervals at once from VM `k`'s slice of the first,
        // having walked `q` slices of it, as far as its bound lets it.
        walked += q as i64;
        let n = (need.as_micros() - 1) / a;
        // Near the walk's bound (uncounted slices taken as walked), the walk answers.
        if n > (100_000 - walked - uncounted - 1) / plain.len() as i64 {
            return self.wall_at_walked(k, v, now);
        }
        let off = plain[q].active - Time::ZERO;
        t0 + self.cfg.interval * n + off + (need - Dur::from_micros(a * n))
    }

    /// [`Scojo::wall_at`] by walking the timeline: slice by slice through the current
    /// interval, then whole plain intervals at once while VM `k`'s slice leaves some of
    /// `need`, up to a bound of 100,000 slices.
    pub(super) fn wall_at_walked(&self, k: usize, v: Time, now: Time) -> Time {
        let vm = &self.vms[k];
        let mut need = v - vm.vnow(now);
        let mut t = now;
        let Some(mut s) = self.slice else {
            return now + need.max(Dur::ZERO);
        };
        let mut t0 = self.interval_start;
        let mut list = self.slices_of(t0, self.short_here);
        let mut pos = list
            .iter()
            .position(|x| (x.kind, x.begin) == (s.kind, s.begin));
        // Once past the current interval every interval is plain, and VM `k` gets the same
        // active time `a` in each: the whole intervals whose slice leaves some of `need`
        // are passed at once.
        let mut plain = false;
        let mut walked = 0;
        while walked < 100_000 {
            if need <= Dur::ZERO {
                break;
            }
            if s.kind == k && plain && t <= s.active {
                let a = (s.end - s.active).as_micros();
                if a > 0 {
                    let n = (need.as_micros() - 1) / a;
                    let n = n.min((100_000 - walked - 1) / list.len() as i64);
                    if n > 0 {
                        need -= Dur::from_micros(a * n);
                        t0 += self.cfg.interval * n;
                        list = self.slices_of(t0, false);
                        s = list[pos.expect("set on entering a plain interval")];
                        t = s.begin;
                        walked += n * list.len() as i64;
                    }
                }
            }
            walked += 1;
            if s.kind == k {
                let from = t.max(s.active);
                let avail = s.end.since(from).max(Dur::ZERO);
                if avail >= need {
                    return from + need;
                }
                need -= avail;
            }
            t = s.end;
            match pos {
                Some(p) if p + 1 < list.len() => pos = Some(p + 1),
                _ => {
                    t0 += self.cfg.interval;
                    list = self.slices_of(t0, false);
                    pos = Some(0);
                    plain = true;
                }
            }
            s = list[pos.expect("set above")];
        }
        t + need.max(Dur::ZERO)
    }
}
