//! Conservative backfilling: every waiting job holds a reservation on an availability
//! profile ([`Profile`]), made in queue order at the earliest time its PEs are expected free
//! for its estimate. A job starts when its reservation comes due; a later job can only take
//! a hole that no earlier job's reservation uses, so no job is ever delayed by one behind it.
//!
//! When a job ends before its estimate or a waiting job leaves, the reservations are
//! compressed: in queue order each job gives its reservation back and takes the earliest one
//! it can get, which is never later, so every job starts no later than it was first promised
//! as long as running jobs end by their estimates. When the machine changes or a job is held
//! or released, every reservation is made again from scratch in queue order. A job past its
//! estimate is expected to end now: its PEs count as free from now on, so a reservation may
//! come due while it still runs; that job then waits, and every reservation is made again at
//! the next event.

use cosched_core::{Dur, JobId, Time};

use crate::opts::Opts;
use crate::profile::Profile;
use crate::queue::{Queued, Seen, SpaceShare};
use crate::{ConfigError, Decision, Event, JobRequest, Policy, PolicyConfig};

#[derive(Clone, Debug)]
struct Waiting {
    req: JobRequest,
    /// The reservation; `None` while held or when the usable machine is too small for it.
    resv: Option<Time>,
}

impl Queued for Waiting {
    fn req(&self) -> &JobRequest {
        &self.req
    }
}

impl From<JobRequest> for Waiting {
    fn from(req: JobRequest) -> Self {
        Waiting { req, resv: None }
    }
}

#[derive(Clone, Debug)]
pub struct Conservative {
    s: SpaceShare<Waiting>,
    profile: Profile,
    /// The profile holds exactly the running jobs and the queue's reservations.
    valid: bool,
    /// The earliest timer asked for and not yet fired.
    timer: Option<Time>,
    /// An upper bound on the free PEs of any step whose free count rose (a reservation
    /// moved earlier) after some waiting job last looked for its earliest place; 0 right
    /// after a rebuild, when every reservation is the earliest fit. See [`Conservative::compress`].
    unseen_rise: u32,
    /// The end of the last span where those rises happened (no rise since at or after it).
    unseen_end: Time,
    /// What the events of this instant call for at [`Policy::decide`].
    repair: Repair,
}

/// How much of the profile an instant's events invalidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repair {
    /// Nothing unforeseen: the profile is right as it is.
    Keep,
    /// PEs were freed over `[now, t)` and nothing else changed: compression suffices.
    Compress(Time),
    /// Make every reservation again.
    Rebuild,
}

impl Repair {
    fn and(self, other: Repair) -> Repair {
        match (self, other) {
            (Repair::Rebuild, _) | (_, Repair::Rebuild) => Repair::Rebuild,
            (Repair::Compress(a), Repair::Compress(b)) => Repair::Compress(a.max(b)),
            (Repair::Compress(t), Repair::Keep) | (Repair::Keep, Repair::Compress(t)) => {
                Repair::Compress(t)
            }
            (Repair::Keep, Repair::Keep) => Repair::Keep,
        }
    }
}

impl Conservative {
    pub fn new(cfg: &PolicyConfig) -> Result<Conservative, ConfigError> {
        Opts::new("conservative", cfg).finish()?;
        Ok(Conservative {
            s: SpaceShare::new(cfg),
            profile: Profile::default(),
            valid: false,
            timer: None,
            unseen_rise: 0,
            unseen_end: Time::ZERO,
            repair: Repair::Keep,
        })
    }

    /// Each waiting job's reservation, in queue order.
    pub fn reservations(&self) -> Vec<(JobId, Option<Time>)> {
        self.s.queue.iter().map(|w| (w.req.id, w.resv)).collect()
    }

    /// The availability profile (free PEs over time, reservations taken out).
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Takes the earliest place of a job in `profile` (none while it is held or when the
    /// machine never has its width free) and returns its start.
    fn place(profile: &mut Profile, req: &JobRequest, held: bool) -> Option<Time> {
        if held {
            return None;
        }
        let (procs, est) = (req.procs, req.estimate);
        profile.earliest(procs, est).map(|(t, i)| {
            profile.reserve(i, est, procs);
            t
        })
    }

    fn reserve(&mut self, k: usize) {
        let req = &self.s.queue.get(k).req;
        let held = self.s.queue.is_held(req.id);
        let resv = Self::place(&mut self.profile, req, held);
        self.s.queue.get_mut(k).resv = resv;
    }

    /// Makes every reservation again in queue order on the running jobs' profile.
    ///
    /// Nearly all rebuilds follow a running job that overran its estimate (a reservation
    /// came due on its PEs), so they are frequent on real traces. While the queue is placed
    /// the profile only loses free PEs, so a place for a job `k` is also a place, in the
    /// profile an earlier job `j` saw, for `j` when `j` is no wider and no longer: `k` cannot
    /// start before `j` did. The search for `k` starts at the latest such start among a few
    /// recent jobs ([`Floors`]); any subset of them gives a bound, so the result is the
    /// plain earliest fit.
    fn rebuild(&mut self, now: Time) {
        self.profile
            .rebuild(now, self.s.pool.free_count(), self.s.running.releases(now));
        let mut floors = Floors::default();
        for k in 0..self.s.queue.len() {
            let req = &self.s.queue.get(k).req;
            let resv = if self.s.queue.is_held(req.id) {
                None
            } else {
                let (procs, est) = (req.procs, req.estimate);
                let from = floors.bound(procs, est, now);
                let place = self.profile.earliest_within(procs, est, from, Time::MAX);
                place.map(|(t, i)| {
                    self.profile.reserve(i, est, procs);
                    floors.push(procs, est, t);
                    t
                })
            };
            self.s.queue.get_mut(k).resv = resv;
        }
        #[cfg(debug_assertions)]
        {
            // The plain rebuild, every search from the profile's start.
            let mut profile = Profile::default();
            profile.rebuild(now, self.s.pool.free_count(), self.s.running.releases(now));
            for w in self.s.queue.iter() {
                let held = self.s.queue.is_held(w.req.id);
                let t = Self::place(&mut profile, &w.req, held);
                assert_eq!(t, w.resv, "rebuild bound wrong for job {}", w.req.id);
            }
            assert_eq!(profile.steps(), self.profile.steps());
        }
        self.valid = true;
        self.unseen_rise = 0;
        self.unseen_end = now;
    }

    /// Compression after a change that can only free PEs (a job ended early, a waiting job
    /// left), which freed PEs over `[now, freed_until)`: in queue order each job gives its
    /// reservation back and takes the earliest one it can get — never later than before,
    /// since its old place is still free and the jobs after it have not moved yet. Falls
    /// back to a full rebuild when a reservation lies in the past (its job could not start:
    /// a running job overran its estimate).
    ///
    /// The profile is not rebuilt: [`Policy::observe`] gave the freed PEs back to it as the
    /// events came, so it already holds the running jobs and every reservation where it was.
    /// Two exact prunings keep most jobs from being searched for:
    /// - Every reservation is the earliest fit given the others, except for what rose since
    ///   the job last looked. A job can move earlier only if some step of its new place gained
    ///   free PEs and now has at least its width free; `rise` bounds the free PEs of every step
    ///   that gained since, so a job wider than `rise` keeps its place.
    /// - Likewise every rise since lies before `rise_end`. A new place must contain a point
    ///   that rose (else the job would have taken it when it last looked, as nothing else
    ///   there gained free PEs since), and a place starting at or after `rise_end` contains
    ///   none: only starts before `rise_end` are tried.
    /// - Whether a narrower job moves is decided without giving its place back: a start
    ///   `s` before its reservation `t` needs its width free over `[s, min(s + est, t))` in
    ///   the profile as it is, since from `t` on the window lies in its own. So it moves iff
    ///   the PEs are free from some `s` before `rise_end` right up to `t`
    ///   ([`Profile::free_until`]), or it has a whole place of its own starting before
    ///   `min(t, rise_end)` ([`Profile::earliest_before`]). A job that cannot move would give
    ///   back and take again the same place, which leaves the profile as it was.
    /// - The second test depends on the job's width, estimate and limit only, and until a job
    ///   moves (or one without a place takes one) the profile does not change: its answers
    ///   are kept, and bound those of wider and longer jobs (no earlier place) and of narrower
    ///   and shorter ones (a place at least as early), so most tests search nothing and the
    ///   rest search only between those bounds ([`Conservative::place_before`]).
    /// - A job that moves is not given back and searched for from the profile's start: its
    ///   new place is the start of the free run up to `t`, or an earlier whole place that the
    ///   same bounds narrow down ([`Conservative::earliest_before`]), and the profile changes
    ///   only where the old and new windows differ ([`Conservative::shift_reservation`]).
    ///
    /// Debug builds compare the outcome with the full compression (profile rebuilt, every
    /// reservation taken again, every job searched for again).
    fn compress(&mut self, now: Time, freed_until: Time) {
        #[cfg(debug_assertions)]
        let expected = self.valid.then(|| self.full_compression(now));
        if !self.valid {
            return self.rebuild(now);
        }
        if self.s.queue.iter().any(|w| w.resv.is_some_and(|t| t < now)) {
            #[cfg(debug_assertions)]
            assert!(
                matches!(expected, Some(None)),
                "compression rebuilt when it need not"
            );
            return self.rebuild(now);
        }
        self.profile.advance(now);
        let mut rise = self
            .unseen_rise
            .max(self.profile.max_free(now, freed_until));
        let mut rise_end = self.unseen_end.max(freed_until);
        // Rises made by a job moving earlier, which the jobs before it have not seen.
        let mut moved_rise = 0;
        let mut moved_end = now;
        // What the searches found in the profile as it is.
        let mut known: Vec<Known> = Vec::new();
        for k in 0..self.s.queue.len() {
            let w = self.s.queue.get(k);
            let (procs, est) = (w.req.procs, w.req.estimate);
            let old = w.resv;
            if let Some(t) = old {
                if procs > rise {
                    continue;
                }
                let run = self.profile.free_until(t, procs);
                let moves = run.is_some_and(|s| s < rise_end)
                    || Self::place_before(&self.profile, &mut known, procs, est, t.min(rise_end));
                if !moves {
                    continue;
                }
                // Its earliest place once its own is given back, found without giving it
                // back: the start of the free run up to `t` (the rest of that window lies in
                // its own), unless a whole place in the profile as it is starts earlier. The
                // new place starts before `rise_end` (see above), so only starts before that
                // are searched.
                let limit = run.unwrap_or(t).min(rise_end);
                let new = Self::earliest_before(&self.profile, &known, procs, est, limit)
                    .or(run)
                    .expect("a job that moves has an earlier place");
                let gained = Self::shift_reservation(&mut self.profile, t, new, est, procs);
                self.s.queue.get_mut(k).resv = Some(new);
                known.clear();
                // Only the steps over `[gained, end)` rose.
                let end = t + est.max(Dur::from_micros(1));
                let freed = self.profile.max_free(gained, end);
                rise = rise.max(freed);
                moved_rise = moved_rise.max(freed);
                rise_end = rise_end.max(end);
                moved_end = moved_end.max(end);
            } else {
                known.clear();
                self.reserve(k);
            }
        }
        self.unseen_rise = moved_rise;
        self.unseen_end = moved_end;
        #[cfg(debug_assertions)]
        {
            let (resv, profile) = expected
                .flatten()
                .unwrap_or_else(|| panic!("the full compression at {now:?} would rebuild"));
            let got: Vec<Option<Time>> = self.s.queue.iter().map(|w| w.resv).collect();
            assert_eq!(
                got, resv,
                "compression differs from the full one at {now:?}"
            );
            assert_eq!(
                self.profile.normalized(),
                profile.normalized(),
                "compressed profile differs from the full one at {now:?}"
            );
        }
    }

    /// Whether `profile` has a place of `procs` PEs for `est` starting before `limit`, through
    /// what earlier searches in this profile found (`known`; see [`Conservative::compress`]).
    /// A place for a job at least as wide and as long is one for this job, and this job's
    /// earliest place is no earlier than that of one no wider and no longer; only what those
    /// bounds leave open is searched, and only up to `limit`.
    fn place_before(
        profile: &Profile,
        known: &mut Vec<Known>,
        procs: u32,
        est: Dur,
        limit: Time,
    ) -> bool {
        let mut from: Option<Time> = None;
        // An entry of this very width and length that did not answer: it bounded below
        // `limit` and had no place before it, so what this search finds supersedes it.
        let mut same: Option<usize> = None;
        for (i, k) in known.iter().enumerate() {
            if k.procs >= procs && k.est >= est && k.at.is_some_and(|s| s < limit) {
                return true;
            }
            if k.procs <= procs && k.est <= est {
                let bound = k.at.unwrap_or(k.searched);
                if bound >= limit {
                    return false;
                }
                from = Some(from.map_or(bound, |f| f.max(bound)));
                if k.procs == procs && k.est == est {
                    same = Some(i);
                }
            }
        }
        let at = match from {
            Some(from) => profile.earliest_within(procs, est, from, limit),
            None => profile.earliest_before(procs, est, limit),
        }
        .map(|(s, _)| s);
        let found = Known {
            procs,
            est,
            searched: limit,
            at,
        };
        // Replacing keeps the list one entry per width and length: with long queues of jobs
        // alike, it would otherwise grow with every test, and every test reads all of it.
        match same {
            Some(i) => known[i] = found,
            None => known.push(found),
        }
        at.is_some()
    }

    /// The earliest place of `procs` PEs for `est` in `profile` starting before `limit`, with
    /// what earlier searches in this profile found (`known`) as bounds: a place of a job at
    /// least as wide and as long is one for this job (so the search stops there), and no
    /// place of this job starts before the earliest of a job no wider and no longer.
    fn earliest_before(
        profile: &Profile,
        known: &[Known],
        procs: u32,
        est: Dur,
        limit: Time,
    ) -> Option<Time> {
        let mut from: Option<Time> = None;
        let mut upper: Option<Time> = None;
        for k in known {
            if k.procs >= procs
                && k.est >= est
                && let Some(s) = k.at
                && s < limit
            {
                upper = Some(upper.map_or(s, |u| u.min(s)));
            }
            if k.procs <= procs && k.est <= est {
                let bound = k.at.unwrap_or(k.searched);
                from = Some(from.map_or(bound, |f| f.max(bound)));
            }
        }
        let limit = upper.map_or(limit, |u| u.min(limit));
        if from.is_some_and(|f| f >= limit) {
            return upper;
        }
        match from {
            Some(from) => profile.earliest_within(procs, est, from, limit),
            None => profile.earliest_before(procs, est, limit),
        }
        .map(|(s, _)| s)
        .or(upper)
    }

    /// Moves a reservation of `procs` PEs for `est` from `old` to the earlier `new`. Where
    /// the two windows overlap nothing changes, so only `[new, old)` is taken and the part of
    /// the old window past the new one given back: a short move shifts few steps however
    /// long the job.
    /// Returns where the given-back part starts.
    fn shift_reservation(
        profile: &mut Profile,
        old: Time,
        new: Time,
        est: Dur,
        procs: u32,
    ) -> Time {
        debug_assert!(new < old);
        let len = est.max(Dur::from_micros(1));
        let (take_end, give_start) = if new + len <= old {
            (new + len, old)
        } else {
            (old, new + len)
        };
        profile.free(give_start, old + len, procs);
        let taken = profile.reserve_at(new, take_end - new, procs);
        debug_assert!(taken, "the new place of a reservation is not free");
        give_start
    }

    /// The full compression, as a check of [`Conservative::compress`]: the profile rebuilt
    /// from the running jobs, every reservation taken again where it was, then every job in
    /// queue order given back and placed again. `None` when a reservation no longer fits
    /// (then the policy must rebuild).
    #[cfg(debug_assertions)]
    fn full_compression(&self, now: Time) -> Option<(Vec<Option<Time>>, Profile)> {
        let mut profile = Profile::default();
        profile.rebuild(now, self.s.pool.free_count(), self.s.running.releases(now));
        for w in self.s.queue.iter() {
            if let Some(t) = w.resv
                && !profile.reserve_at(t, w.req.estimate, w.req.procs)
            {
                return None;
            }
        }
        let mut resv = Vec::with_capacity(self.s.queue.len());
        for w in self.s.queue.iter() {
            if let Some(t) = w.resv {
                profile.unreserve(t, w.req.estimate, w.req.procs);
            }
            let held = self.s.queue.is_held(w.req.id);
            resv.push(Self::place(&mut profile, &w.req, held));
        }
        Some((resv, profile))
    }

    /// Starts the jobs whose reservation is due, and asks for a timer at the next
    /// reservation: compression can leave a reservation at an instant when nothing else
    /// happens (the end of a reservation that has since moved).
    fn start_due(&mut self, now: Time, out: &mut Vec<Decision>) {
        let mut next: Option<Time> = None;
        let mut k = 0;
        while k < self.s.queue.len() {
            let (due, late) = match self.s.queue.get(k).resv {
                Some(t) if t <= now => (true, t < now),
                Some(t) => {
                    next = Some(next.map_or(t, |n| n.min(t)));
                    (false, false)
                }
                None => (false, false),
            };
            // A due job whose PEs are not free yet: if another job ends at this same instant
            // and has not been reported yet, the next event frees them and the profile stays
            // right. Once time has moved on (a job ran past its estimate, a node went down),
            // the profile placed this job too early: make every reservation again.
            let started = due && self.s.start(now, k, out);
            if late {
                self.valid = false;
            }
            if started {
                self.s.queue.remove(k);
            } else {
                k += 1;
            }
        }
        if let Some(t) = next
            && self.timer.is_none_or(|x| x <= now || t < x)
        {
            self.timer = Some(t);
            out.push(Decision::SetTimer {
                at: t,
                token: t.as_micros() as u64,
            });
        }
    }
}

/// What a search of the profile as it stands found for a width and a length: `at` is the
/// earliest place when one starts before `searched`, and `None` says none does.
struct Known {
    procs: u32,
    est: Dur,
    searched: Time,
    at: Option<Time>,
}

/// The starts of the latest jobs placed during a rebuild, as lower bounds for the jobs
/// at least as wide and as long (see [`Conservative::rebuild`]). Kept short: an entry
/// that another one dominates (no wider, no longer, starting no earlier) is dropped, and
/// beyond [`Floors::CAP`] the oldest goes.
#[derive(Default)]
struct Floors(Vec<(u32, Dur, Time)>);

impl Floors {
    const CAP: usize = 16;

    /// The latest start among the recorded jobs no wider and no longer than this one, or
    /// `start` (the profile's) if there is none.
    fn bound(&self, procs: u32, est: Dur, start: Time) -> Time {
        self.0
            .iter()
            .filter(|&&(p, d, _)| p <= procs && d <= est)
            .map(|&(_, _, t)| t)
            .max()
            .unwrap_or(start)
    }

    fn push(&mut self, procs: u32, est: Dur, at: Time) {
        self.0
            .retain(|&(p, d, t)| !(procs <= p && est <= d && at >= t));
        if self.0.len() == Self::CAP {
            self.0.remove(0);
        }
        self.0.push((procs, est, at));
    }
}

impl Policy for Conservative {
    fn places_by_node(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "conservative"
    }

    fn observe(&mut self, now: Time, event: Event) {
        // Whether the profile stays right as it is (only the past needs dropping), or only
        // improved up to some time (compression suffices).
        let mut keep = false;
        let mut improved: Option<Time> = None;
        match self.s.observe(event) {
            Seen::Queued(at) => {
                if self.valid && at == self.s.queue.len() - 1 {
                    keep = true;
                    // A job joining the tail takes the earliest hole left; nobody moves.
                    // After an early end at this instant, it waits unreserved for the
                    // compression, which reserves jobs without a place in queue order.
                    if self.repair == Repair::Keep {
                        self.profile.advance(now);
                        self.reserve(at);
                    }
                }
            }
            Seen::Finished(run) => {
                // Ending when expected, or after (the profile already counted an
                // overrunning job's PEs free from now on), frees nothing unforeseen.
                keep = run.expected_end <= now && self.valid;
                if keep {
                    self.profile.advance(now);
                }
                if run.expected_end > now {
                    improved = Some(run.expected_end);
                    // Its PEs are free until it was expected to end: the profile stays the
                    // running jobs and the reservations, for compression to start from.
                    if self.valid {
                        self.profile.free(now, run.expected_end, run.procs);
                    }
                }
            }
            Seen::Withdrawn(w) => {
                improved = Some(match w.resv {
                    Some(t) => {
                        let end = t + w.req.estimate.max(Dur::from_micros(1));
                        if self.valid {
                            self.profile.free(t, end, w.req.procs);
                        }
                        end
                    }
                    None => now,
                });
            }
            Seen::Gone => improved = Some(now),
            Seen::Timer(_) => {
                if self.timer.is_some_and(|x| x <= now) {
                    self.timer = None;
                }
                keep = self.valid;
                if keep {
                    self.profile.advance(now);
                }
            }
            // A refused job never enters the profile.
            Seen::Refused => keep = self.valid,
            // The machine, the running set or a hold changed: make every reservation again.
            Seen::Other => {}
        }
        let repair = match improved {
            Some(t) => Repair::Compress(t),
            None if keep => Repair::Keep,
            None => Repair::Rebuild,
        };
        self.repair = self.repair.and(repair);
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.s.queue.reject_refused(out);
        match std::mem::replace(&mut self.repair, Repair::Keep) {
            Repair::Keep => {}
            Repair::Compress(freed_until) => self.compress(now, freed_until),
            Repair::Rebuild => self.rebuild(now),
        }
        self.start_due(now, out);
    }

    fn queue(&self) -> Vec<JobId> {
        self.s.queue.ids()
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{started, sub};
    use cosched_core::MachineShape;

    fn t(s: i64) -> Option<Time> {
        Some(Time::from_secs(s))
    }

    /// Seed 002, Figs. 1-2 on 128 nodes: the 32-node job backfills only when it ends before
    /// the 128-node job's reservation.
    #[test]
    fn fig1_reservations_for_every_job() {
        let mut p = Conservative::new(&PolicyConfig::new(MachineShape::flat(128, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 64, 100), vec![1]);
        assert_eq!(sub(&mut p, 1, 2, 128, 50), Vec::<u64>::new());
        assert_eq!(sub(&mut p, 2, 3, 32, 200), Vec::<u64>::new());
        assert_eq!(sub(&mut p, 2, 4, 32, 90), vec![4]);
        // Job 3 is reserved after job 2: 100 + 50.
        assert_eq!(
            p.reservations(),
            vec![(JobId(2), t(100)), (JobId(3), t(150))]
        );
    }

    #[test]
    fn later_job_does_not_delay_an_earlier_non_head_reservation() {
        // EASY would let job 4 (long, fits now) delay job 3; conservative must not.
        let mut p = Conservative::new(&PolicyConfig::new(MachineShape::flat(10, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 6, 100), vec![1]);
        assert_eq!(sub(&mut p, 0, 2, 8, 10), Vec::<u64>::new()); // at 100
        assert_eq!(sub(&mut p, 0, 3, 2, 50), vec![3]); // fits now and ends before 100
        assert_eq!(sub(&mut p, 0, 4, 2, 1000), vec![4]); // uses the 2 extra PEs at 100
        assert_eq!(sub(&mut p, 0, 5, 4, 20), Vec::<u64>::new());
        // Job 5 needs 4: after job 2 (100-110), 8 free while job 4 runs → 110.
        assert_eq!(
            p.reservations(),
            vec![(JobId(2), t(100)), (JobId(5), t(110))]
        );
    }

    #[test]
    fn early_end_compresses_reservations() {
        let mut p = Conservative::new(&PolicyConfig::new(MachineShape::flat(10, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 10, 100), vec![1]);
        sub(&mut p, 0, 2, 10, 10);
        sub(&mut p, 0, 3, 5, 10);
        assert_eq!(
            p.reservations(),
            vec![(JobId(2), t(100)), (JobId(3), t(110))]
        );
        let mut out = Vec::new();
        p.handle(Time::from_secs(40), Event::Ended(JobId(1)), &mut out);
        assert_eq!(started(&out), vec![2]);
        assert_eq!(p.reservations(), vec![(JobId(3), t(50))]);
        out.clear();
        p.handle(Time::from_secs(50), Event::Ended(JobId(2)), &mut out);
        assert_eq!(started(&out), vec![3]);
    }

    /// A random workload with early ends and withdrawals, run by a small driver: in debug
    /// builds every compression is compared with the full one (see
    /// [`Conservative::compress`]), and since every job ends by its estimate, none may start
    /// later than its first reservation.
    #[test]
    fn random_workload_matches_full_compression() {
        random_workload(100);
    }

    /// The same with jobs that run up to half again their estimate: reservations come due
    /// on PEs still held, and every reservation is made again; debug builds compare each
    /// such rebuild with the plain one (see [`Conservative::rebuild`]).
    #[test]
    fn random_workload_with_overruns_matches_plain_rebuild() {
        random_workload(150);
    }

    /// Runs 600 random jobs whose runtimes are up to `max_pct` % of their estimates.
    fn random_workload(max_pct: u64) {
        use std::collections::{BTreeMap, HashMap};
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (rng >> 33) % n
        };
        let mut p = Conservative::new(&PolicyConfig::new(MachineShape::flat(32, 1))).unwrap();
        // (time, order) -> event; runtimes by job.
        let mut events: BTreeMap<(Time, u64), Event> = BTreeMap::new();
        let mut runtime = HashMap::new();
        let mut seq = 0u64;
        let mut at = 0;
        for id in 1..=600u64 {
            at += next(15) as i64;
            let procs = [1, 1, 2, 3, 4, 8, 16, 32][next(8) as usize];
            let est = 10 + next(300) as i64;
            runtime.insert(id, Dur::from_secs(est * next(max_pct + 1) as i64 / 100));
            let req = JobRequest::new(JobId(id), Time::from_secs(at), procs, Dur::from_secs(est));
            events.insert((Time::from_secs(at), seq), Event::Submitted(req));
            seq += 1;
            if next(20) == 0 {
                let when = Time::from_secs(at + 1 + next(200) as i64);
                events.insert((when, seq), Event::Ended(JobId(id)));
                seq += 1;
            }
        }
        let mut promised: HashMap<u64, Time> = HashMap::new();
        let (mut starts, mut out) = (0, Vec::new());
        while let Some((&(now, _), _)) = events.first_key_value() {
            while let Some(entry) = events.first_entry() {
                if entry.key().0 != now {
                    break;
                }
                p.observe(now, entry.remove());
            }
            out.clear();
            p.decide(now, &mut out);
            for d in &out {
                match d {
                    Decision::Start { job, .. } => {
                        starts += 1;
                        assert!(
                            max_pct > 100 || promised.get(&job.0).is_none_or(|&t| now <= t),
                            "job {} started after its first reservation",
                            job.0
                        );
                        events.insert((now + runtime[&job.0], seq), Event::Ended(*job));
                        seq += 1;
                    }
                    Decision::SetTimer { at, token } => {
                        events.insert((*at, seq), Event::Timer(*token));
                        seq += 1;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            for (id, resv) in p.reservations() {
                if let Some(t) = resv {
                    promised.entry(id.0).or_insert(t);
                }
            }
        }
        assert!(p.queue().is_empty());
        assert!(starts > 500, "only {starts} jobs started");
    }

    #[test]
    fn cancel_and_hold_release_reservations() {
        let mut p = Conservative::new(&PolicyConfig::new(MachineShape::flat(4, 1))).unwrap();
        assert_eq!(sub(&mut p, 0, 1, 4, 10), vec![1]);
        sub(&mut p, 0, 2, 4, 10);
        sub(&mut p, 0, 3, 4, 10);
        let mut out = Vec::new();
        p.handle(Time::from_secs(1), Event::Ended(JobId(2)), &mut out);
        assert_eq!(p.reservations(), vec![(JobId(3), t(10))]);
        p.handle(Time::from_secs(1), Event::Held(JobId(3)), &mut out);
        assert_eq!(p.reservations(), vec![(JobId(3), None)]);
        p.handle(Time::from_secs(10), Event::Ended(JobId(1)), &mut out);
        assert!(out.is_empty());
        p.handle(Time::from_secs(12), Event::Released(JobId(3)), &mut out);
        assert_eq!(started(&out), vec![3]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// A reservation moved by compression goes where giving it back and searching from the
        /// profile's start would put it, and leaves the same free counts: the earliest place
        /// from the free run up to it and [`Conservative::earliest_before`] (with what searches
        /// of other widths and lengths found as bounds), the change through
        /// [`Conservative::shift_reservation`].
        #[test]
        fn moved_reservation_matches_give_back_and_search(
            releases in proptest::collection::vec((1i64..40, 0u32..6), 1..60),
            jobs in proptest::collection::vec((0i64..600, 1i64..300, 1u32..6), 1..40),
            probes in proptest::collection::vec((1u32..8, 1i64..300, 0i64..700), 0..6),
            pick in 0usize..40,
        ) {
            let secs = Time::from_secs;
            let mut p = Profile::default();
            let mut at = 0;
            let rel: Vec<(Time, u32)> = releases
                .iter()
                .map(|&(gap, n)| {
                    at += gap;
                    (secs(at), n)
                })
                .collect();
            p.rebuild(Time::ZERO, 2, rel.into_iter());
            let mut placed = Vec::new();
            for &(start, len, procs) in &jobs {
                if p.reserve_at(secs(start), Dur::from_secs(len), procs) {
                    placed.push((secs(start), Dur::from_secs(len), procs));
                }
            }
            proptest::prop_assume!(!placed.is_empty());
            let (t, est, procs) = placed[pick % placed.len()];
            // The plain way: give back, search from the start.
            let mut plain = p.clone();
            plain.unreserve(t, est, procs);
            let (want, i) = plain.earliest(procs, est).expect("its own place is free");
            plain.reserve(i, est, procs);
            // Bounds from searches of other jobs in the profile as it is.
            let mut known = Vec::new();
            for &(kp, kd, lim) in &probes {
                Conservative::place_before(&p, &mut known, kp, Dur::from_secs(kd), secs(lim));
            }
            let run = p.free_until(t, procs);
            let limit = run.unwrap_or(t);
            let got = Conservative::earliest_before(&p, &known, procs, est, limit).or(run);
            if want < t {
                proptest::prop_assert_eq!(got, Some(want));
                Conservative::shift_reservation(&mut p, t, want, est, procs);
                proptest::prop_assert_eq!(p.normalized(), plain.normalized());
            } else {
                proptest::prop_assert_eq!(want, t);
                proptest::prop_assert_eq!(got, None);
            }
        }
    }
}
