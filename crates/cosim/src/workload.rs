//! Turns a scenario's workload into BSP jobs: per job the arrival, the number of processes, the
//! iteration count and, per iteration, the basic compute, the synchronous I/O and the exchange
//! pattern (seed 000 Fig. 4.4; seed 004 Table 2).

use cosched_core::{Dur, Time};
use cosched_workload::{GenOptions, LublinParams, generate, transform};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::hyper_erlang::HyperErlang;
use crate::scenario::{DrawCfg, JobCfg, LublinModel, MixCfg, Pattern, Scenario, ScenarioError};

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
    /// Message sizes (bytes, probability) each message is drawn from; empty: every message
    /// is `[costs] message_bytes` long and takes the scenario's transit time.
    pub msg_sizes: Vec<(u64, f64)>,
    /// A wider neighbourhood than NN's (the NAS models): the partners are the ranks at ± each
    /// of these distances on the ring of ranks. Empty: the pattern's own partners.
    pub ring: Vec<u32>,
}

impl AppJob {
    /// The ranks `rank` sends to each iteration. It waits for as many messages, one from each
    /// of its senders (the same ranks, or for the one-way ring the rank before it).
    pub fn send_peers(&self, rank: u32) -> Vec<u32> {
        if self.ring.is_empty() {
            send_peers(self.pattern, self.procs, rank)
        } else {
            at_distances(self.procs, rank, &self.ring)
        }
    }

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

/// The ranks `rank` sends to each iteration.
pub fn send_peers(pattern: Pattern, procs: u32, rank: u32) -> Vec<u32> {
    match pattern {
        Pattern::None => Vec::new(),
        Pattern::Aa => (0..procs).filter(|&r| r != rank).collect(),
        Pattern::Nn => at_distances(procs, rank, &[1]),
        Pattern::Ring if procs > 1 => vec![(rank + 1) % procs],
        Pattern::Ring => Vec::new(),
    }
}

/// The ranks `rank` receives from each iteration: its senders, which are its own send peers
/// for every pattern but the one-way ring.
pub fn recv_peers(pattern: Pattern, procs: u32, rank: u32) -> Vec<u32> {
    match pattern {
        Pattern::Ring if procs > 1 => vec![(rank + procs - 1) % procs],
        _ => send_peers(pattern, procs, rank),
    }
}

/// The ranks at ± each distance on a ring of `procs`, each once, never `rank` itself.
fn at_distances(procs: u32, rank: u32, distances: &[u32]) -> Vec<u32> {
    let mut v = Vec::new();
    for &d in distances {
        let d = d % procs.max(1);
        for r in [(rank + d) % procs, (rank + procs - d) % procs] {
            if r != rank && !v.contains(&r) {
                v.push(r);
            }
        }
    }
    v
}

/// A NAS model's partners (seed 004 Table 2(b)'s "NN (four)", "NN (six)", "AA").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NasPattern {
    /// Four neighbours on a 2-D torus: ranks ±1 and ± the row width (the smallest power of
    /// two at least √procs) — our reading of LU's "NN (four)".
    Grid2d,
    /// Six partners at distances ±1, ±2, ±4 — our reading of CG's "NN (six)" (its row
    /// reductions exchange with partners at power-of-two distances).
    PowersOfTwo,
    AllToAll,
}

impl NasPattern {
    /// The pattern and ring distances of an [`AppJob`] with `procs` ranks.
    fn job_pattern(self, procs: u32) -> (Pattern, Vec<u32>) {
        match self {
            NasPattern::Grid2d => {
                let mut width = 1;
                while width * width < procs {
                    width *= 2;
                }
                (Pattern::Nn, vec![1, width])
            }
            NasPattern::PowersOfTwo => (Pattern::Nn, vec![1, 2, 4]),
            NasPattern::AllToAll => (Pattern::Aa, Vec::new()),
        }
    }
}

/// A NAS Parallel Benchmark job model (seed 004 §4, Table 2(b)): its exchange pattern, the
/// share of its run spent communicating, and the sizes of its messages. The paper gives only
/// these; the rest is our reading, documented in docs/reproductions/proc-fig7.md: no I/O, one
/// exchange with every partner per iteration, each message's size drawn from the table, and
/// an iteration count that makes a job run about a second alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NasModel {
    pub name: &'static str,
    pub pattern: NasPattern,
    /// Percent of the time alone spent communicating (Table 2(b) "Comm.").
    pub comm_share: f64,
    /// (bytes, probability) — Table 2(b)'s sizes and shares (LU's "320, 640 (48.3 %)" read
    /// as 48.3 % each).
    pub sizes: &'static [(u64, f64)],
    pub iterations: u32,
}

const NAS: [NasModel; 4] = [
    NasModel {
        name: "LU",
        pattern: NasPattern::Grid2d,
        comm_share: 11.5,
        sizes: &[
            (320, 0.483),
            (640, 0.483),
            (40_960, 0.0156),
            (81_920, 0.0156),
        ],
        iterations: 1_000,
    },
    NasModel {
        name: "CG",
        pattern: NasPattern::PowersOfTwo,
        comm_share: 63.4,
        sizes: &[(8, 0.59), (16, 0.01), (14_000, 0.40)],
        iterations: 2_000,
    },
    NasModel {
        name: "IS",
        pattern: NasPattern::AllToAll,
        comm_share: 30.1,
        sizes: &[(4, 0.5), (32_768, 0.5)],
        iterations: 100,
    },
    NasModel {
        name: "FT",
        pattern: NasPattern::AllToAll,
        comm_share: 56.3,
        sizes: &[(128 * 1024, 0.5), (256 * 1024, 0.5)],
        iterations: 16,
    },
];

/// The NAS job model of this name (LU, CG, IS, FT; any case).
pub fn nas_model(name: &str) -> Option<&'static NasModel> {
    NAS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

/// One message size drawn from `sizes` ((bytes, probability); the last takes any rounding).
pub fn draw_size(rng: &mut Pcg64, sizes: &[(u64, f64)]) -> u64 {
    let total: f64 = sizes.iter().map(|s| s.1).sum();
    let mut x = rng.random_range(0.0..total.max(f64::MIN_POSITIVE));
    for &(b, p) in sizes {
        if x < p {
            return b;
        }
        x -= p;
    }
    sizes.last().map_or(0, |s| s.0)
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
        return mix_jobs(sc, mix);
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

/// The jobs of a `[mix]` workload: each job's size and length (fixed, or Hyper-Erlang
/// draws), its per-iteration compute, I/O and exchange from its kind, and the arrivals
/// (simultaneous, a fixed interval, or open Hyper-Erlang arrivals at an offered load).
fn mix_jobs(sc: &Scenario, mix: &MixCfg) -> Result<Vec<AppJob>, ScenarioError> {
    let invalid = |field: &str, why: String| ScenarioError::Invalid {
        path: sc.name.clone(),
        field: field.into(),
        why,
    };
    let total = sc.machine.nodes * sc.machine.pes_per_node;
    let nas = nas_model(&mix.workload);
    let mean_iterations = match (mix.iterations, nas) {
        (Some(n), _) => n,
        (None, Some(m)) => m.iterations,
        (None, None) => {
            return Err(invalid(
                "mix",
                "WL1..WL4 need a pattern and iterations".into(),
            ));
        }
    };
    // Each draw has its own stream, so drawing sizes does not move the lengths or arrivals.
    let draws = |cfg: Option<DrawCfg>, mean: u32, salt: u64, field: &str, max: u32| {
        let n = mix.jobs as usize;
        let Some(d) = cfg else {
            return Ok::<_, ScenarioError>(vec![mean; n]);
        };
        let he = HyperErlang::fit(f64::from(mean), d.cv2, d.order)
            .map_err(|e| invalid(field, e.to_string()))?;
        let mut rng = Pcg64::seed_from_u64(sc.seed ^ salt);
        Ok((0..n)
            .map(|_| (he.sample(&mut rng).round() as u32).clamp(1, max))
            .collect::<Vec<u32>>())
    };
    let sizes = draws(mix.size, mix.procs, 0x5123_d4a3_51e5, "mix.size", total)?;
    let lengths = draws(
        mix.length,
        mean_iterations,
        0x1e49_7a15,
        "mix.length",
        u32::MAX,
    )?;
    let mut jobs = Vec::new();
    // Each job's runtime alone with no variance: its iterations × (compute + I/O + exchange).
    let mut alone = Vec::new();
    for i in 0..mix.jobs {
        let (procs, iterations) = (sizes[i as usize], lengths[i as usize]);
        let (job, iteration) = match nas {
            Some(m) => nas_job(sc, mix, m, i, procs, iterations),
            None => wl_job(sc, mix, i, procs, iterations)?,
        };
        alone.push(f64::from(procs) * iteration.as_secs_f64() * f64::from(iterations));
        jobs.push(job);
    }
    match mix.arrivals {
        Some(a) => {
            let pe_seconds: f64 = alone.iter().sum();
            let mean_gap = pe_seconds / (f64::from(mix.jobs) * f64::from(total) * a.load);
            let he = HyperErlang::fit(mean_gap, a.cv2, a.order)
                .map_err(|e| invalid("mix.arrivals", e.to_string()))?;
            let mut rng = Pcg64::seed_from_u64(sc.seed ^ 0xa441_7a15);
            let mut at = Time::ZERO;
            for j in &mut jobs {
                j.arrival = at;
                at += Dur::from_secs_f64(he.sample(&mut rng));
            }
        }
        None => {
            for (i, j) in jobs.iter_mut().enumerate() {
                j.arrival = Time::ZERO + mix.interarrival * i as i64;
            }
        }
    }
    Ok(jobs)
}

/// The `index`-th job of a NAS model, and its nominal iteration time: the share of Table 2(b)
/// is the exchange's over the whole iteration.
fn nas_job(
    sc: &Scenario,
    mix: &MixCfg,
    m: &NasModel,
    index: u32,
    procs: u32,
    iterations: u32,
) -> (AppJob, Dur) {
    // An iteration's communication alone: the sending NIC transfers the messages one after
    // another (mean transfer each), and the last one's startup latency follows.
    let startup = sc.costs.startup;
    let mean_transfer: f64 = m
        .sizes
        .iter()
        .map(|&(b, p)| p * (sc.costs.transit_bytes(b) - startup).as_secs_f64())
        .sum::<f64>()
        / m.sizes.iter().map(|s| s.1).sum::<f64>();
    let (pattern, ring) = m.pattern.job_pattern(procs);
    let receives = if ring.is_empty() {
        recv_peers(pattern, procs, 0).len()
    } else {
        at_distances(procs, 0, &ring).len()
    }
    .max(1) as f64;
    let comm_time = mean_transfer * receives + startup.as_secs_f64();
    let compute = Dur::from_secs_f64(comm_time * (100.0 - m.comm_share) / m.comm_share);
    let job = AppJob {
        id: index + 1,
        arrival: Time::ZERO,
        procs,
        iterations,
        compute,
        io: Dur::ZERO,
        pattern,
        variance: mix.v / 2.0,
        rank_overrides: Vec::new(),
        work: compute * i64::from(iterations),
        label: m.name.to_string(),
        msg_sizes: m.sizes.to_vec(),
        ring,
    };
    (job, compute + Dur::from_secs_f64(comm_time))
}

/// The `index`-th job of WL1..WL4 (Table 2(a)), and its nominal iteration time: the exchange
/// is `receives × transit`, and compute and I/O follow the kind's shares of it.
fn wl_job(
    sc: &Scenario,
    mix: &MixCfg,
    index: u32,
    procs: u32,
    iterations: u32,
) -> Result<(AppJob, Dur), ScenarioError> {
    let invalid = |field: &str, why: String| ScenarioError::Invalid {
        path: sc.name.clone(),
        field: field.into(),
        why,
    };
    let pattern = mix
        .pattern
        .ok_or_else(|| invalid("mix", "WL1..WL4 need a pattern and iterations".into()))?;
    let (comp, io, comm, label) = mix_shares(&mix.workload, index).ok_or_else(|| {
        invalid(
            "mix.workload",
            format!("{:?} is not WL1..WL4", mix.workload),
        )
    })?;
    let receives = recv_peers(pattern, procs, 0).len().max(1) as i64;
    let comm_time = sc.costs.transit() * receives;
    let compute = Dur::from_secs_f64(comm_time.as_secs_f64() * comp / comm);
    let io_t = if mix.without_io {
        Dur::ZERO
    } else {
        Dur::from_secs_f64(comm_time.as_secs_f64() * io / comm)
    };
    // Persistent per-process imbalance: one factor per rank, no per-iteration noise.
    let rank_overrides = if mix.per_process_v {
        let mut rng = Pcg64::seed_from_u64(sc.seed ^ 0xba1a_0c3e ^ (u64::from(index) << 32));
        (0..procs)
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
    let job = AppJob {
        id: index + 1,
        arrival: Time::ZERO,
        procs,
        iterations,
        compute,
        io: io_t,
        pattern,
        variance: mix.v / 2.0,
        rank_overrides,
        work: compute * i64::from(iterations),
        label: label.to_string(),
        msg_sizes: Vec::new(),
        ring: Vec::new(),
    };
    Ok((job, compute + io_t + comm_time))
}

/// A seed-000 benchmark job: the iteration lasts G·T; the basic work w is that minus the
/// estimated communication and I/O time; W/w iterations, each with W/iterations of compute.
fn explicit(sc: &Scenario, id: u32, j: &JobCfg) -> AppJob {
    let iter_len = Dur::from_secs_f64(sc.schemes.timeslice.as_secs_f64() * j.granularity);
    let c = recv_peers(j.pattern, j.procs, 0).len() as i64;
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
        msg_sizes: Vec::new(),
        ring: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_by_pattern() {
        assert_eq!(send_peers(Pattern::Aa, 4, 1), vec![0, 2, 3]);
        assert_eq!(send_peers(Pattern::Nn, 4, 0), vec![1, 3]);
        assert_eq!(send_peers(Pattern::Nn, 2, 0), vec![1]);
        assert!(send_peers(Pattern::Nn, 1, 0).is_empty());
        assert!(send_peers(Pattern::None, 4, 0).is_empty());
    }

    #[test]
    fn nas_neighbourhoods() {
        let (p, ring) = NasPattern::Grid2d.job_pattern(32);
        assert_eq!((p, ring.as_slice()), (Pattern::Nn, &[1, 8][..]));
        assert_eq!(at_distances(32, 0, &ring), vec![1, 31, 8, 24]);
        let (_, ring) = NasPattern::PowersOfTwo.job_pattern(32);
        assert_eq!(at_distances(32, 5, &ring), vec![6, 4, 7, 3, 9, 1]);
        assert_eq!(at_distances(4, 0, &ring), vec![1, 3, 2]);
    }

    #[test]
    fn nas_jobs_take_table_2b_shares_and_sizes() {
        let text = "[machine]\nnodes = 32\n[costs]\nstartup = \"15us\"\n[mix]\nworkload = \"is\"\njobs = 2\nprocs = 32\nv = 0.0\n";
        let sc = Scenario::parse(text, "t").unwrap();
        let jobs = build(&sc).unwrap();
        assert_eq!(jobs.len(), 2);
        let j = &jobs[0];
        assert_eq!(
            (j.pattern, j.iterations, j.io),
            (Pattern::Aa, 100, Dur::ZERO)
        );
        assert_eq!(j.send_peers(3).len(), 31);
        // 32 KB takes the full 188 µs (173 of transfer), 4 bytes the 15 µs startup: 31
        // transfers of 86.5 µs on average and one startup are 30.1 % of an iteration.
        let comm = 31.0 * 173.0 / 2.0 + 15.0;
        let want = comm * (100.0 - 30.1) / 30.1;
        assert!(
            (j.compute.0 as f64 - want).abs() <= 1.0,
            "{:?} vs {want}",
            j.compute
        );
        assert_eq!(sc.costs.transit_bytes(32_768), Dur::from_micros(188));
        assert_eq!(sc.costs.transit_bytes(0), Dur::from_micros(15));
        let e = Scenario::parse(&format!("{text}pattern = \"aa\"\n"), "t").unwrap_err();
        assert!(e.to_string().contains("mix.pattern"), "{e}");
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

    const OPEN: &str = "seed = 9\n[machine]\nnodes = 32\n[mix]\nworkload = \"WL3\"\njobs = 2000\nprocs = 32\npattern = \"nn\"\nv = 0.5\niterations = 400\n[mix.arrivals]\nload = 0.6\ncv2 = 4.0\norder = 2\n[mix.length]\ncv2 = 4.0\norder = 2\n";

    /// Open arrivals and Hyper-Erlang lengths: the same seed gives the same jobs, another seed
    /// other ones; the draws have the asked mean and spread, and the arrivals the asked load.
    #[test]
    fn open_arrival_mix_is_seeded_and_reproducible() {
        let sc = Scenario::parse(OPEN, "open").unwrap();
        let jobs = build(&sc).unwrap();
        assert_eq!(jobs, build(&sc).unwrap());
        let mut other = sc.clone();
        other.seed = 10;
        let moved = build(&other).unwrap();
        assert_ne!(jobs[1].arrival, moved[1].arrival);
        assert_ne!(jobs[0].iterations, moved[0].iterations);
        let n = jobs.len() as f64;
        let iters: Vec<f64> = jobs.iter().map(|j| f64::from(j.iterations)).collect();
        let mean = iters.iter().sum::<f64>() / n;
        let cv2 = iters.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n / (mean * mean);
        // 2000 draws of CV² 4: the sample mean's standard error is 4.5 %.
        assert!((mean - 400.0).abs() < 60.0, "mean length {mean}");
        assert!((cv2 - 4.0).abs() < 1.5, "length cv2 {cv2}");
        let gaps: Vec<f64> = jobs
            .windows(2)
            .map(|w| w[1].arrival.since(w[0].arrival).as_secs_f64())
            .collect();
        let gm = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let gcv2 = gaps.iter().map(|x| (x - gm).powi(2)).sum::<f64>() / gaps.len() as f64 / gm / gm;
        assert!((gcv2 - 4.0).abs() < 1.5, "gap cv2 {gcv2}");
        // Nearly constant gaps (an Erlang of order 1000) show the load the mean is scaled to:
        // WL3 NN's iteration alone is two 188 µs receives over the 70 % exchange share.
        let steady = Scenario::parse(
            &OPEN.replace(
                "cv2 = 4.0\norder = 2\n[mix.length]",
                "cv2 = 0.001\norder = 1000\n[mix.length]",
            ),
            "steady",
        )
        .unwrap();
        let js = build(&steady).unwrap();
        let span = js[js.len() - 1].arrival.since(js[0].arrival).as_secs_f64();
        let iteration = 2.0 * 188e-6 / 0.70;
        let work: f64 = js[..js.len() - 1]
            .iter()
            .map(|j| f64::from(j.iterations) * iteration * 32.0)
            .sum();
        let offered = work / (32.0 * span);
        assert!((offered - 0.6).abs() < 0.03, "offered load {offered}");
        assert!(jobs.iter().all(|j| j.procs == 32));
    }

    /// Sizes come from a stream of their own: drawing them leaves lengths and the shape of the
    /// arrivals alone, and they stay within the machine.
    #[test]
    fn mix_sizes_are_drawn_within_the_machine_from_their_own_stream() {
        let sc = Scenario::parse(OPEN, "open").unwrap();
        let fixed = build(&sc).unwrap();
        let sized = Scenario::parse(&format!("{OPEN}[mix.size]\ncv2 = 1.0\n"), "sized").unwrap();
        let jobs = build(&sized).unwrap();
        assert!(jobs.iter().all(|j| (1..=32).contains(&j.procs)));
        assert!(jobs.iter().any(|j| j.procs < 16));
        let lengths = |js: &[AppJob]| js.iter().map(|j| j.iterations).collect::<Vec<_>>();
        assert_eq!(lengths(&fixed), lengths(&jobs));
        let e = Scenario::parse(&format!("{OPEN}[mix.size]\ncv2 = 0.2\n"), "bad").unwrap_err();
        assert!(e.to_string().contains("mix.size"), "{e}");
        let e = Scenario::parse(
            &OPEN.replace("v = 0.5", "v = 0.5\ninterarrival = \"1s\""),
            "bad",
        )
        .unwrap_err();
        assert!(e.to_string().contains("mix.arrivals"), "{e}");
    }
}
