//! Turns a scenario's workload into BSP jobs: per job the arrival, the number of processes, the
//! iteration count and, per iteration, the basic compute, the synchronous I/O and the exchange
//! pattern (seed 000 Fig. 4.4; seed 004 Table 2).

use cosched_core::{Dur, Time};
use cosched_workload::{GenOptions, LublinParams, generate, transform};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::scenario::{JobCfg, LublinModel, Pattern, Scenario, ScenarioError};

/// One BSP job, ready to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct AppJob {
    pub id: u32,
    pub arrival: Time,
    pub procs: u32,
    pub iterations: u32,
    /// Basic compute per iteration (before variance and per-rank factors).
    pub compute: Dur,
    /// Synchronous I/O per iteration.
    pub io: Dur,
    pub pattern: Pattern,
    /// Compute and I/O per iteration are uniform in basic·(1 ± variance).
    pub variance: f64,
    /// Per-rank (work factor, variance) overrides.
    pub rank_overrides: Vec<(u32, f64, Option<f64>)>,
    /// Nominal work W (compute over all iterations), for reporting.
    pub work: Dur,
    /// Kind of job (J1/J2/J3 for mixes, G/V/pattern for model jobs).
    pub label: String,
}

impl AppJob {
    /// Work factor and variance of one rank.
    pub fn rank_params(&self, rank: u32) -> (f64, f64) {
        rank_params(self.variance, &self.rank_overrides, rank)
    }
}

/// Work factor and variance of `rank` in a job of this `variance` and these per-rank
/// `(rank, work factor, variance)` overrides (the last override of a rank wins); the real
/// BSP program (crates/bsp) reads its ranks' parameters the same way.
pub fn rank_params(variance: f64, overrides: &[(u32, f64, Option<f64>)], rank: u32) -> (f64, f64) {
    let mut out = (1.0, variance);
    for &(r, f, v) in overrides {
        if r == rank {
            out = (f, v.unwrap_or(out.1));
        }
    }
    out
}

/// The peers a rank exchanges with each iteration (it sends to and receives from each).
pub fn peers(pattern: Pattern, procs: u32, rank: u32) -> Vec<u32> {
    match pattern {
        Pattern::None => Vec::new(),
        Pattern::Aa => (0..procs).filter(|&r| r != rank).collect(),
        Pattern::Nn => {
            let mut v = Vec::new();
            if procs > 1 {
                v.push((rank + 1) % procs);
                let left = (rank + procs - 1) % procs;
                if left != v[0] {
                    v.push(left);
                }
            }
            v
        }
    }
}

/// Shares of computation, I/O and communication (percent) of the `index`-th job of a seed-004
/// workload, and its job type.
pub fn mix_shares(workload: &str, index: u32) -> Option<(f64, f64, f64, &'static str)> {
    const J: [(f64, f64, f64, &str); 3] = [
        (70.0, 5.0, 25.0, "J1"),
        (48.0, 5.0, 47.0, "J2"),
        (25.0, 5.0, 70.0, "J3"),
    ];
    match workload.to_ascii_uppercase().as_str() {
        "WL1" => Some(J[0]),
        "WL2" => Some(J[1]),
        "WL3" => Some(J[2]),
        "WL4" => Some(J[(index % 3) as usize]),
        _ => None,
    }
}

/// Builds the jobs of a scenario.
pub fn build(sc: &Scenario) -> Result<Vec<AppJob>, ScenarioError> {
    let total = sc.machine.nodes * sc.machine.pes_per_node;
    if let Some(mix) = &sc.mix {
        let transit = sc.costs.transit();
        let mut jobs = Vec::new();
        for i in 0..mix.jobs {
            let (comp, io, comm, label) =
                mix_shares(&mix.workload, i).ok_or_else(|| ScenarioError::Invalid {
                    path: sc.name.clone(),
                    field: "mix.workload".into(),
                    why: format!("{:?} is not WL1..WL4", mix.workload),
                })?;
            let receives = peers(mix.pattern, mix.procs, 0).len().max(1) as i64;
            let comm_time = transit * receives;
            let compute = Dur::from_secs_f64(comm_time.as_secs_f64() * comp / comm);
            let io_t = if mix.without_io {
                Dur::ZERO
            } else {
                Dur::from_secs_f64(comm_time.as_secs_f64() * io / comm)
            };
            // Persistent per-process imbalance: one factor per rank, no per-iteration noise.
            let rank_overrides = if mix.per_process_v {
                let mut rng = Pcg64::seed_from_u64(sc.seed ^ 0xba1a_0c3e ^ (u64::from(i) << 32));
                (0..mix.procs)
                    .map(|r| {
                        let f = if mix.v > 0.0 {
                            1.0 + rng.random_range(-mix.v / 2.0..mix.v / 2.0)
                        } else {
                            1.0
                        };
                        (r, f, Some(0.0))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            jobs.push(AppJob {
                id: i + 1,
                arrival: Time::ZERO + mix.interarrival * i64::from(i),
                procs: mix.procs,
                iterations: mix.iterations,
                compute,
                io: io_t,
                pattern: mix.pattern,
                variance: mix.v / 2.0,
                rank_overrides,
                work: compute * i64::from(mix.iterations),
                label: label.to_string(),
            });
        }
        return Ok(jobs);
    }
    if let Some(l) = &sc.lublin {
        let opts = GenOptions {
            jobs: l.jobs,
            procs: total,
            seed: sc.seed,
            load: Some(l.load),
            params: match l.model {
                LublinModel::Lublin => LublinParams::default(),
                LublinModel::LublinUntyped => LublinParams::untyped(),
            },
            ..GenOptions::default()
        };
        let mut trace = generate(&opts);
        transform::compress(&mut trace.records, l.compress);
        let first = trace
            .records
            .iter()
            .filter_map(|r| r.submit)
            .min()
            .unwrap_or(Time::ZERO);
        let mut rng = Pcg64::seed_from_u64(sc.seed ^ 0x5eed_c051_u64);
        let mut jobs = Vec::new();
        for (i, r) in trace.records.iter().enumerate() {
            if l.take > 0 && i >= l.take {
                break;
            }
            let g = l.granularities[rng.random_range(0..l.granularities.len())];
            let v = l.variances[rng.random_range(0..l.variances.len())];
            let x: f64 = rng.random_range(0.0..l.pattern_weights.iter().sum::<f64>());
            let pattern = if x < l.pattern_weights[0] {
                Pattern::None
            } else if x < l.pattern_weights[0] + l.pattern_weights[1] {
                Pattern::Nn
            } else {
                Pattern::Aa
            };
            let cfg = JobCfg {
                arrival: r.submit.unwrap_or(first).since(first),
                procs: r.alloc_procs.or(r.req_procs).unwrap_or(1).clamp(1, total),
                work: r.run.unwrap_or(Dur::ZERO).max(Dur::from_millis(1)),
                granularity: g,
                pattern,
                variance: v,
                io_blocks: l.io_blocks,
                ranks: Vec::new(),
            };
            jobs.push(explicit(sc, i as u32 + 1, &cfg));
        }
        jobs.sort_by_key(|j| (j.arrival, j.id));
        return Ok(jobs);
    }
    Ok(sc
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| explicit(sc, i as u32 + 1, j))
        .collect())
}

/// A seed-000 benchmark job: the iteration lasts G·T; the basic work w is that minus the
/// estimated communication and I/O time; W/w iterations, each with W/iterations of compute.
fn explicit(sc: &Scenario, id: u32, j: &JobCfg) -> AppJob {
    let iter_len = Dur::from_secs_f64(sc.schemes.timeslice.as_secs_f64() * j.granularity);
    let c = peers(j.pattern, j.procs, 0).len() as i64;
    let estimate = sc.app.msg_time * c + sc.app.io_time * i64::from(j.io_blocks);
    let w = (iter_len - estimate).max(Dur(iter_len.0 / 10).max(Dur(1)));
    let iterations = ((j.work.0 as f64 / w.0 as f64).round() as u32).max(1);
    let compute = Dur(j.work.0 / i64::from(iterations)).max(Dur(1));
    let mut overrides = Vec::new();
    for r in &j.ranks {
        for &k in &r.ranks {
            overrides.push((k, r.work_factor, r.variance));
        }
    }
    AppJob {
        id,
        arrival: Time::ZERO + j.arrival,
        procs: j.procs,
        iterations,
        compute,
        io: sc.app.io_time * i64::from(j.io_blocks),
        pattern: j.pattern,
        variance: j.variance,
        rank_overrides: overrides,
        work: j.work,
        label: format!("G{} V{} {}", j.granularity, j.variance, j.pattern.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_by_pattern() {
        assert_eq!(peers(Pattern::Aa, 4, 1), vec![0, 2, 3]);
        assert_eq!(peers(Pattern::Nn, 4, 0), vec![1, 3]);
        assert_eq!(peers(Pattern::Nn, 2, 0), vec![1]);
        assert!(peers(Pattern::Nn, 1, 0).is_empty());
        assert!(peers(Pattern::None, 4, 0).is_empty());
    }

    #[test]
    fn mix_job_shares_follow_table_2() {
        let text = "[machine]\nnodes = 4\n[mix]\nworkload = \"WL1\"\njobs = 2\nprocs = 4\npattern = \"nn\"\nv = 0.5\niterations = 10\n";
        let sc = Scenario::parse(text, "t").unwrap();
        let jobs = build(&sc).unwrap();
        // NN: two receives of 188 µs = 376 µs of communication = 25 %.
        assert_eq!(jobs[0].compute, Dur::from_micros(1053));
        assert_eq!(jobs[0].io, Dur::from_micros(75));
        assert_eq!(jobs[0].variance, 0.25);
    }

    #[test]
    fn explicit_job_iterations_cover_the_work() {
        let text = "[machine]\nnodes = 2\npes_per_node = 2\n[[jobs]]\nprocs = 2\nwork = \"10s\"\ngranularity = 0.5\n";
        let sc = Scenario::parse(text, "t").unwrap();
        let j = &build(&sc).unwrap()[0];
        assert_eq!(j.iterations, 100);
        assert_eq!(j.compute * i64::from(j.iterations), Dur::from_secs(10));
    }
}
