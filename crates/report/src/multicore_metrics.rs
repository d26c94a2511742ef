//! Seed 001's figures of a run on multi-core nodes: the average bounded relative response
//! time (RR) by job type, node and core utilization (formulas 2 and 3) over the whole run and
//! during high-load phases (formula 1: while at least `N_H` jobs wait), and the groups the
//! policy formed. The engine measures usage ([`cosched_sim::engine::Usage`]); the policy counts its
//! groups ([`cosched_policy::Policy::stats`]).

use serde::{Deserialize, Serialize};

use cosched_core::Dur;

use crate::metrics::job_metrics;
use cosched_sim::SimResult;

/// Runtime bounds of the job types (seed 001, §5.1): short ≤ 10 min, medium ≤ 3 h.
pub const SHORT_MAX: Dur = Dur::from_secs(600);
pub const MEDIUM_MAX: Dur = Dur::from_secs(3 * 3600);

/// Mean RR of one job type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TypeRr {
    pub jobs: usize,
    pub rr: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MulticoreSummary {
    pub short: TypeRr,
    pub medium: TypeRr,
    pub long: TypeRr,
    pub all: TypeRr,
    /// Formula 2 and 3 over the makespan (first submission to last end).
    pub node_utilization: f64,
    pub core_utilization: f64,
    /// The same during high-load phases (at least `n_h` jobs waiting).
    pub high_load_node_utilization: f64,
    pub high_load_core_utilization: f64,
    pub high_load_time_s: f64,
    pub n_h: u32,
    pub groups: f64,
    pub jobs_per_group: f64,
}

impl MulticoreSummary {
    /// `None` when the run had no slowdown model.
    pub fn build(result: &SimResult, threshold: Dur) -> Option<MulticoreSummary> {
        let usage = result.usage.as_ref()?;
        let stat = |k: &str| {
            result
                .policy_stats
                .iter()
                .find(|(n, _)| n == k)
                .map(|x| x.1)
        };
        let n_h = stat("n_h").map_or(12, |v| v as u32);
        let mut sums = [(0usize, 0f64); 4];
        for (r, &runtime) in result.records.iter().zip(&result.runtimes) {
            let (Some(start), Some(end)) = (r.start, r.end) else {
                continue;
            };
            let rr = job_metrics(r.submit, start, end, runtime, threshold).bounded_slowdown;
            let t = if runtime <= SHORT_MAX {
                0
            } else if runtime <= MEDIUM_MAX {
                1
            } else {
                2
            };
            for k in [t, 3] {
                sums[k].0 += 1;
                sums[k].1 += rr;
            }
        }
        let ty = |k: usize| TypeRr {
            jobs: sums[k].0,
            rr: if sums[k].0 == 0 {
                0.0
            } else {
                sums[k].1 / sums[k].0 as f64
            },
        };
        let first = result.records.iter().map(|r| r.submit).min();
        let last = result.records.iter().filter_map(|r| r.end).max();
        let makespan = match (first, last) {
            (Some(a), Some(b)) => (b - a).as_micros().max(0) as f64,
            _ => 0.0,
        };
        let (mut nodes, mut cores) = (0u128, 0u128);
        let (mut ht, mut hn, mut hc) = (0u128, 0u128, 0u128);
        for (w, row) in usage.by_wait.iter().enumerate() {
            nodes += row[1];
            cores += row[2];
            if w >= n_h as usize {
                ht += row[0];
                hn += row[1];
                hc += row[2];
            }
        }
        let (m, c) = (f64::from(usage.nodes), f64::from(usage.cores_per_node));
        let ratio = |x: u128, d: f64| if d > 0.0 { x as f64 / d } else { 0.0 };
        Some(MulticoreSummary {
            short: ty(0),
            medium: ty(1),
            long: ty(2),
            all: ty(3),
            node_utilization: ratio(nodes, makespan * m),
            core_utilization: ratio(cores, makespan * m * c),
            high_load_node_utilization: ratio(hn, ht as f64 * m),
            high_load_core_utilization: ratio(hc, ht as f64 * m * c),
            high_load_time_s: ht as f64 / 1e6,
            n_h,
            groups: stat("groups").unwrap_or(0.0),
            jobs_per_group: stat("jobs_per_group").unwrap_or(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{JobRecord, MachineShape, Time};
    use cosched_sim::engine::Usage;

    /// Formulas 1–3 by hand: 2 nodes of 4 cores over a 100 s makespan. For 60 s 3 jobs wait
    /// (high load with N_H = 2) while 2 nodes and 5 cores are busy; for 40 s nobody waits and
    /// 1 node, 1 core are busy. U_node = (60·2 + 40·1) / (100·2) = 0.8; U_core = (60·5 +
    /// 40·1) / (100·8) = 0.425; in the high-load phase U_node = 1, U_core = 5/8.
    #[test]
    fn utilizations_by_hand() {
        let m = MachineShape {
            nodes: 2,
            sockets_per_node: 2,
            cores_per_socket: 2,
            mem_per_node_mib: None,
        };
        let mut u = Usage::new(m);
        u.advance(Time::ZERO, 3, 0, 0);
        u.advance(Time::from_secs(60), 3, 2, 5);
        u.advance(Time::from_secs(100), 0, 1, 1);
        let rec = |id: u64, run: i64| {
            let spec = cosched_core::JobSpec::new(id, Time::ZERO, 1, Dur::from_secs(run));
            let mut r = JobRecord::new(&spec);
            r.start = Some(Time::ZERO);
            r.end = Some(Time::from_secs(run));
            r
        };
        let result = SimResult {
            policy: "glomarc".into(),
            machine: m,
            records: vec![rec(1, 100), rec(2, 100)],
            runtimes: vec![Dur::from_secs(100), Dur::from_secs(50)],
            events: 0,
            decisions: 0,
            unfinished: 0,
            policy_stats: vec![("n_h".into(), 2.0), ("groups".into(), 1.0)],
            usage: Some(u),
        };
        let s = MulticoreSummary::build(&result, Dur::from_secs(10)).unwrap();
        assert!((s.node_utilization - 0.8).abs() < 1e-12, "{s:?}");
        assert!((s.core_utilization - 0.425).abs() < 1e-12);
        assert!((s.high_load_node_utilization - 1.0).abs() < 1e-12);
        assert!((s.high_load_core_utilization - 0.625).abs() < 1e-12);
        assert!((s.high_load_time_s - 60.0).abs() < 1e-12);
        // Job 2's response is twice its pure runtime, job 1's once; both are short jobs.
        assert_eq!((s.short.jobs, s.medium.jobs, s.all.jobs), (2, 0, 2));
        assert!((s.short.rr - 1.5).abs() < 1e-12 && (s.all.rr - 1.5).abs() < 1e-12);
        assert_eq!(s.groups, 1.0);
    }
}
