//! What a run reports beside its schedule: groups formed, the worst fairness ratio, active
//! slice time, and why decisions formed no group.

use super::glomarc;

#[derive(Clone, Debug, Default)]
pub(super) struct Stats {
    pub(super) groups: u64,
    pub(super) grouped_jobs: u64,
    pub(super) worst_fair_ratio: f64,
    /// Active (non-overhead) slice time per type, seconds.
    pub(super) active: [f64; 3],
    pub(super) unformed: Unformed,
}

/// Why decisions formed no group, counted over a run: which rule of §4.5–4.7 stops groups
/// (reported with the policy's stats; docs/reproductions/glomarc.md traces a workload).
#[derive(Clone, Debug, Default)]
pub(super) struct Unformed {
    /// Step 1 of §4.5: every waiting job fits one process per node.
    pub(super) low_load: u64,
    /// Decisions past step 1.
    pub(super) tries: u64,
    /// A waiting primary whose nodes are not free.
    pub(super) no_room: u64,
    /// A primary with no candidate at all.
    pub(super) no_candidates: u64,
    /// Per candidate set: the step of [`glomarc::form`] that left no group.
    pub(super) preselection: u64,
    pub(super) min_gain: u64,
    pub(super) must: u64,
    pub(super) fairness: u64,
    /// A group found that does not beat space sharing's gain (`beat_ssp`).
    pub(super) beaten_by_ssp: u64,
}

impl Unformed {
    pub(super) fn add(&mut self, o: &Unformed) {
        self.low_load += o.low_load;
        self.tries += o.tries;
        self.no_room += o.no_room;
        self.no_candidates += o.no_candidates;
        self.preselection += o.preselection;
        self.min_gain += o.min_gain;
        self.must += o.must;
        self.fairness += o.fairness;
        self.beaten_by_ssp += o.beaten_by_ssp;
    }

    pub(super) fn note<T>(&mut self, candidates: usize, r: &Result<T, glomarc::Unformed>) {
        match r {
            Ok(_) => {}
            Err(_) if candidates == 0 => self.no_candidates += 1,
            Err(glomarc::Unformed::Preselection) => self.preselection += 1,
            Err(glomarc::Unformed::MinGain) => self.min_gain += 1,
            Err(glomarc::Unformed::Must) => self.must += 1,
            Err(glomarc::Unformed::Fairness) => self.fairness += 1,
        }
    }
}
