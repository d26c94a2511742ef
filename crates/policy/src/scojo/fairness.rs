//! The fairness check of G-LOMARC-TS (§4.6 step 7, formula 4): the predicted responses of a
//! group's members and of the waiting jobs it delays against F_slack · R_est.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use cosched_core::{Dur, JobId, Milli, Time};

use super::glomarc::Cand;
use super::vm::{milli, run_for};
use super::{DOWN, Scojo};
use crate::profile::Profile;

/// What the fairness check of one search reads of a VM ([`Scojo::fair_base`]): the VM
/// clock, when the occupied nodes that are up are released (VM time), counted by time
/// ascending ([`Scojo::release_counts`]), the free nodes, the profile of whole nodes these
/// make, and the waiting jobs it places (queue order, held jobs left out) with their nodes
/// and estimates under space sharing.
pub(super) struct FairBase {
    pub(super) v: Time,
    pub(super) counts: Vec<(Time, u32)>,
    pub(super) free: u32,
    pub(super) profile: Profile,
    pub(super) waiting: Vec<(JobId, u32, Dur)>,
}

impl FairBase {
    /// The node releases once a group holds its touched nodes until `end` and takes
    /// `taken` free nodes until then, as the steps of a profile of whole nodes in time
    /// order. `moved` holds, sorted, the releases of the touched nodes released before
    /// `end` (each is one of the counted releases): those nodes leave their time and join
    /// the taken ones at `end`; touched nodes released at or after `end` keep theirs. Made
    /// from the counts in one merge, without sorting every node's release again.
    fn releases_with_group(&self, moved: &[Time], end: Time, taken: u32) -> Vec<(Time, u32)> {
        let at_end = moved.len() as u32 + taken;
        let mut moved = moved.iter().peekable();
        let mut steps: Vec<(Time, u32)> = Vec::with_capacity(self.counts.len() + 1);
        let mut placed = at_end == 0;
        for &(t, n) in &self.counts {
            // Both sorted, and every moved time is one of the counted times: the next moved
            // time is never below `t`.
            let mut left = n;
            while moved.next_if(|&&m| m == t).is_some() {
                left -= 1;
            }
            if !placed && t > end {
                steps.push((end, at_end));
                placed = true;
            }
            if left > 0 {
                steps.push((t, left));
            }
        }
        debug_assert!(
            moved.next().is_none(),
            "a moved release not among the counts"
        );
        if !placed {
            steps.push((end, at_end));
        }
        steps
    }
}

impl Scojo {
    /// When each node of VM `k` is next wholly free (VM time), for the occupied nodes that
    /// are up, by increasing node.
    pub(super) fn node_releases_iter(
        &self,
        k: usize,
        v: Time,
    ) -> impl Iterator<Item = (u32, Time)> + '_ {
        self.vms[k]
            .lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| (l[0].is_some() || l[1].is_some()) && !l.contains(&Some(DOWN)))
            .map(move |(n, l)| {
                let end = l
                    .iter()
                    .flatten()
                    .filter_map(|id| self.jobs.get(id))
                    .map(|j| self.expected_end(j, v))
                    .fold(v, Time::max);
                (n as u32, end)
            })
    }

    /// When node `n` of VM `k` is next wholly free (VM time), if it is occupied and up: the
    /// entry of [`Scojo::node_releases_iter`] for that node alone.
    fn node_release(&self, k: usize, n: u32, v: Time) -> Option<Time> {
        let l = &self.vms[k].lanes[n as usize];
        if (l[0].is_none() && l[1].is_none()) || l.contains(&Some(DOWN)) {
            return None;
        }
        Some(
            l.iter()
                .flatten()
                .filter_map(|id| self.jobs.get(id))
                .map(|j| self.expected_end(j, v))
                .fold(v, Time::max),
        )
    }

    /// What the fairness check reads of VM `k` and no candidate group changes, gathered
    /// once for every group a search weighs.
    pub(super) fn fair_base(&self, k: usize, now: Time) -> FairBase {
        let v = self.vms[k].vnow(now);
        // Counted job by job, not node by node: a job's expected end is worked out once
        // (debug builds check the counts against the node walk).
        let mut counts = Vec::new();
        self.release_counts(k, v, &mut counts);
        let free = self.vms[k].free;
        let mut profile = Profile::default();
        profile.rebuild(v, free, counts.iter().copied());
        let waiting = self.vms[k]
            .queue
            .with_spaces()
            .filter(|(id, _)| !self.held.contains(id))
            .map(|(id, s)| (id, s.nodes, s.dur))
            .collect();
        FairBase {
            v,
            counts,
            free,
            profile,
            waiting,
        }
    }

    /// The fairness check of step 7, formula 4: "a group which causes any other jobs to be
    /// delayed severely (more than a threshold) compared to their R_est,i is discarded"
    /// (§4.6), with R_max,i = F_slack · R_est,i for every job i (§4.2). Every member's
    /// predicted response must stay within R_max; so must that of every other waiting job
    /// of the VM — those the group jumps over and those behind it — that the group delays.
    /// A waiting job's predicted start is its place in the conservative profile of whole
    /// nodes, with and without the group; the group is taken to hold every node it touches
    /// until its last member's expected end (pessimistic: a matched job's node may free
    /// earlier). Jobs not delayed by the group are not its doing and do not count. Returns
    /// the worst ratio of predicted response to R_max (≤ 1 passes).
    pub(super) fn fairness(
        &self,
        k: usize,
        primary: (JobId, u32),
        matched: &[(Cand, u32)],
        now: Time,
    ) -> f64 {
        self.fairness_from(&OnceCell::new(), k, primary, matched, now, f64::INFINITY)
    }

    /// [`Scojo::fairness`] on `base` (VM `k` as of `now`, gathered on first need and shared
    /// by every group of one search: most searches end before a group reaches the check of
    /// the other waiting jobs, and then the VM is never read), stopping at the first ratio above
    /// `stop_above`: a caller that only asks whether the group passes (ratio ≤ 1) learns
    /// that from the first job found too late, without placing the rest of the queue.
    /// Waiting jobs are placed in queue order with the group, and without it only as far as
    /// a start there is read ([`Scojo::others_lazily`]).
    pub(super) fn fairness_from(
        &self,
        base: &OnceCell<FairBase>,
        k: usize,
        primary: (JobId, u32),
        matched: &[(Cand, u32)],
        now: Time,
        stop_above: f64,
    ) -> f64 {
        let a = &self.jobs[&primary.0];
        let a_self = self.self_sl(a, primary.1.min(a.req.procs));
        let sl_a = matched
            .iter()
            .map(|(c, _)| milli(c.sl_prim))
            .fold(a_self, Milli::max);
        let mut worst = self.predicted_response(a, k, sl_a, now) / (self.cfg.f_slack * a.r_est);
        for (c, _) in matched {
            let j = &self.jobs[&c.id];
            let r = self.predicted_response(j, k, milli(c.sl), now) / (self.cfg.f_slack * j.r_est);
            worst = worst.max(r);
        }
        if !self.cfg.fair_others || worst > stop_above {
            return worst;
        }
        let base = base.get_or_init(|| self.fair_base(k, now));
        let v = base.v;
        // The group's end: its last member's expected end at its slowdown in the group.
        let mut end = v + run_for(a.left(v), sl_a);
        for (c, _) in matched {
            end = end.max(v + run_for(self.jobs[&c.id].left(v), milli(c.sl)));
        }
        // Nodes it touches: its running members' nodes, and the free nodes it takes (as
        // `place_group` does).
        let a_nodes = if a.allocated {
            a.seats
                .iter()
                .map(|s| s.node)
                .collect::<BTreeSet<_>>()
                .len() as u32
        } else {
            a.req.procs.div_ceil(primary.1.max(1))
        };
        let mut touched: BTreeSet<u32> = BTreeSet::new();
        let mut members: BTreeSet<JobId> = BTreeSet::new();
        members.insert(primary.0);
        let mut running_matched_nodes = 0;
        let mut waiting_matched_nodes = 0;
        for (c, _) in matched {
            members.insert(c.id);
            let j = &self.jobs[&c.id];
            if j.allocated {
                running_matched_nodes += c.nodes;
                touched.extend(j.seats.iter().map(|s| s.node));
            } else {
                waiting_matched_nodes += c.nodes;
            }
        }
        if a.allocated {
            touched.extend(a.seats.iter().map(|s| s.node));
        }
        let taken = if !a.allocated && running_matched_nodes > 0 {
            a_nodes.saturating_sub(running_matched_nodes)
        } else {
            let own = if a.allocated { 0 } else { a_nodes };
            own + waiting_matched_nodes.saturating_sub(a_nodes)
        };
        let taken = taken.min(base.free);
        let mut moved: Vec<Time> = touched
            .iter()
            .filter_map(|&n| self.node_release(k, n, v))
            .filter(|&e| e < end)
            .collect();
        moved.sort_unstable();
        let mut after = Profile::default();
        after.rebuild(
            v,
            base.free - taken,
            base.releases_with_group(&moved, end, taken).into_iter(),
        );
        let eager = cfg!(debug_assertions)
            .then(|| self.others_eagerly(k, base, &members, after.clone(), now, worst, stop_above));
        let lazy = self.others_lazily(k, base, &members, after, now, worst, stop_above);
        debug_assert!(
            eager.is_none_or(|e| e.to_bits() == lazy.to_bits()),
            "the other waiting jobs' worst ratio, placed without the group only where read: \
             {lazy} against {eager:?}"
        );
        lazy
    }

    /// The worst of `worst` and the ratios of the waiting jobs of `base` but the group's
    /// `members` that the group delays: each placed in queue order in `after` (the profile
    /// with the group) and, only where its start there is read, in the profile without
    /// the group. A job whose ratio with the group is no more than the worst so far
    /// cannot raise it, delayed or not, so its start without the group is not needed; the
    /// placement without the group catches up with the queue only for a job that would
    /// raise it. Most waiting jobs are of the first kind, and the placement without the
    /// group stops at the last of the second. The answer is
    /// [`Scojo::others_eagerly`]'s: after each job both hold the same worst ratio, so
    /// both stop at the same job.
    #[allow(clippy::too_many_arguments)]
    fn others_lazily(
        &self,
        k: usize,
        base: &FairBase,
        members: &BTreeSet<JobId>,
        mut after: Profile,
        now: Time,
        mut worst: f64,
        stop_above: f64,
    ) -> f64 {
        // The profile without the group (made on first need) holds the jobs of
        // `base.waiting[..placed]`.
        let mut before: Option<Profile> = None;
        let mut placed = 0;
        for (i, &(id, nodes, dur)) in base.waiting.iter().enumerate() {
            if members.contains(&id) {
                continue;
            }
            let Some(at) = place(&mut after, nodes, dur) else {
                continue;
            };
            let r = self.ratio_ending(k, id, at + dur, now);
            if r <= worst {
                continue;
            }
            let before = before.get_or_insert_with(|| base.profile.clone());
            let mut t0 = Time::MAX;
            for &(id, nodes, dur) in &base.waiting[placed..=i] {
                if members.contains(&id) {
                    continue;
                }
                t0 = place(before, nodes, dur).unwrap_or(Time::MAX);
            }
            placed = i + 1;
            // Delayed by the group (a second's tolerance).
            if at > t0 + Dur::from_secs(1) {
                worst = worst.max(r);
                if worst > stop_above {
                    return worst;
                }
            }
        }
        worst
    }

    /// [`Scojo::others_lazily`] placing every waiting job in both profiles side by side
    /// (the plain computation, which debug builds compare with it).
    #[allow(clippy::too_many_arguments)]
    fn others_eagerly(
        &self,
        k: usize,
        base: &FairBase,
        members: &BTreeSet<JobId>,
        mut after: Profile,
        now: Time,
        mut worst: f64,
        stop_above: f64,
    ) -> f64 {
        let mut before = base.profile.clone();
        for &(id, nodes, dur) in &base.waiting {
            if members.contains(&id) {
                continue;
            }
            let t0 = place(&mut before, nodes, dur).unwrap_or(Time::MAX);
            let Some(at) = place(&mut after, nodes, dur) else {
                continue;
            };
            // Delayed by the group (a second's tolerance).
            if at > t0 + Dur::from_secs(1) {
                worst = worst.max(self.ratio_ending(k, id, at + dur, now));
                if worst > stop_above {
                    return worst;
                }
            }
        }
        worst
    }

    /// Waiting job `id`'s response, were it to end at VM clock `end`, over its slack
    /// times its estimated response: the ratio the fairness check bounds.
    fn ratio_ending(&self, k: usize, id: JobId, end: Time, now: Time) -> f64 {
        let j = &self.jobs[&id];
        let r = (self.wall_at(k, end, now) - j.req.submit).as_secs_f64();
        r / (self.cfg.f_slack * j.r_est)
    }
}

/// Reserves `nodes` nodes for `dur` at their earliest fit in `profile` and returns its
/// start (`None`: it fits nowhere, and nothing is reserved).
fn place(profile: &mut Profile, nodes: u32, dur: Dur) -> Option<Time> {
    let (at, i) = profile.earliest(nodes, dur)?;
    profile.reserve(i, dur, nodes);
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The check of the other waiting jobs that places the queue without the group only
    /// where a start there is read gives the ratio of the placement of every job in both
    /// profiles: a random stream of submissions and ends on 8 quad-core nodes under
    /// G-LOMARC-TS, and after each decision, in the medium and long VMs, the first waiting
    /// job with none to two of the next as the group, a random reservation as the group's
    /// share of the profile, from a worst ratio of 0 (every job placed may raise it) and
    /// of 1.5, up to bounds of 1 and of none.
    #[test]
    fn others_placed_lazily_give_the_eager_ratio() {
        use crate::{Decision, Event, JobRequest, Policy, PolicyConfig};
        use cosched_core::MachineShape;
        let machine = MachineShape {
            nodes: 8,
            sockets_per_node: 2,
            cores_per_socket: 2,
            mem_per_node_mib: None,
        };
        let mut cfg = PolicyConfig::new(machine);
        for (k, v) in [("short_max", 100), ("medium_max", 1000)] {
            cfg.options.insert(k.into(), toml::Value::Integer(v));
        }
        let mut p = Scojo::new("glomarc", super::super::Variant::Glts, &cfg).unwrap();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut running: Vec<JobId> = Vec::new();
        let (mut now, mut next) = (0i64, 1u64);
        let (mut compared, mut raised, mut stopped) = (0, 0, 0);
        for _ in 0..800 {
            now += 1 + rand(60) as i64;
            let t = Time::from_secs(now);
            if rand(3) == 0 {
                let est = Dur::from_secs(20 + rand(2500) as i64);
                let r = JobRequest::new(JobId(next), t, 1 + rand(24) as u32, est);
                p.observe(t, Event::Submitted(r));
                next += 1;
            }
            if !running.is_empty() && rand(4) == 0 {
                let i = rand(running.len() as u64) as usize;
                p.observe(t, Event::Ended(running.swap_remove(i)));
            }
            let mut out = Vec::new();
            p.decide(t, &mut out);
            running.extend(out.iter().filter_map(|d| match d {
                Decision::Start { job, .. } => Some(*job),
                _ => None,
            }));
            for k in [super::super::MEDIUM, super::super::LONG] {
                let base = p.fair_base(k, t);
                let Some(&(h, _, _)) = base.waiting.first() else {
                    continue;
                };
                for n in 0..base.waiting.len().min(3) {
                    let members: BTreeSet<JobId> =
                        base.waiting[..n.max(1)].iter().map(|w| w.0).collect();
                    debug_assert!(members.contains(&h));
                    let mut after = base.profile.clone();
                    let dur = Dur::from_secs(1 + rand(3000) as i64);
                    after.reserve_at(base.v, dur, 1 + rand(4) as u32);
                    for (worst, stop) in [(0.0, 1.0), (0.0, f64::INFINITY), (1.5, f64::INFINITY)] {
                        let lazy =
                            p.others_lazily(k, &base, &members, after.clone(), t, worst, stop);
                        let eager =
                            p.others_eagerly(k, &base, &members, after.clone(), t, worst, stop);
                        assert_eq!(lazy.to_bits(), eager.to_bits(), "VM {k} at {now} s");
                        compared += 1;
                        raised += usize::from(eager > worst);
                        stopped += usize::from(eager > stop);
                    }
                }
            }
        }
        assert!(compared > 1000, "{compared} checks compared");
        assert!(raised > 100, "{raised} checks raised by a delayed job");
        assert!(stopped > 10, "{stopped} checks stopped early");
    }

    proptest! {
        /// The releases with a group, made from the counted releases, are those of every
        /// node with the touched ones moved to the group's end and the taken ones added,
        /// sorted afresh: the same times, in time order.
        #[test]
        fn releases_with_a_group_are_the_releases_sorted_afresh(
            rel in proptest::collection::btree_map(0u32..60, 0i64..50, 0..40),
            touched in proptest::collection::btree_set(0u32..70, 0..12),
            end in 0i64..60,
            taken in 0u32..5,
        ) {
            let at = Time::from_secs;
            let rel: Vec<(u32, Time)> = rel.into_iter().map(|(n, e)| (n, at(e))).collect();
            let end = at(end);
            let mut times: Vec<Time> = rel.iter().map(|&(_, e)| e).collect();
            times.sort_unstable();
            let mut counts: Vec<(Time, u32)> = Vec::new();
            for t in times {
                match counts.last_mut() {
                    Some(last) if last.0 == t => last.1 += 1,
                    _ => counts.push((t, 1)),
                }
            }
            let base = FairBase {
                v: Time::ZERO,
                counts,
                free: taken,
                profile: Profile::default(),
                waiting: Vec::new(),
            };
            let mut moved: Vec<Time> = rel
                .iter()
                .filter(|&&(n, e)| touched.contains(&n) && e < end)
                .map(|&(_, e)| e)
                .collect();
            moved.sort_unstable();
            let mut want: Vec<Time> = rel
                .iter()
                .map(|&(n, e)| if touched.contains(&n) { e.max(end) } else { e })
                .chain(std::iter::repeat_n(end, taken as usize))
                .collect();
            want.sort_unstable();
            let steps = base.releases_with_group(&moved, end, taken);
            prop_assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0), "steps in time order");
            prop_assert!(steps.iter().all(|&(_, n)| n > 0), "no empty step");
            let got: Vec<Time> = steps
                .iter()
                .flat_map(|&(t, n)| std::iter::repeat_n(t, n as usize))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
