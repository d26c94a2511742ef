//! The Lublin–Feitelson workload model (JPDC 2003, "Lublin99" in the Parallel Workloads
//! Archive): rigid parallel jobs with sizes, runtimes, arrivals with a daily cycle, and two job
//! types (interactive and batch). This is cosched's own implementation, written from the paper's
//! description and the published parameter values; docs/workload.md lists where it deviates
//! from the reference C program.
//!
//! - **Size**: serial with probability `serial_prob`; otherwise `log2(size)` comes from a
//!   two-stage uniform on `[u_low, u_med]` (probability `u_prob`) or `[u_med, u_hi]`, and is
//!   rounded to an integer (a power-of-two size) when the same uniform draw that decided
//!   "parallel" also falls under `serial_prob + pow2_prob`, as in the reference program.
//! - **Runtime**: `ln(runtime)` is hyper-gamma: `gamma(a1, b1)` with probability
//!   `p = pa·size + pb` (clipped to [0, 1]), else `gamma(a2, b2)`; draws above 12 are redrawn.
//! - **Arrivals**: each type is its own stream. A gamma(`aarr·arar`, `barr`) draw `g` (redrawn
//!   above 13) gives `e^g` seconds of "rush-hour" inter-arrival time, which is spent across
//!   half-hour buckets weighted by a gamma(`anum`, `bnum`) density over the day, so arrivals are
//!   dense around midday and sparse at night. The next job is the earlier of the two streams.
//! - **Estimates**: exact by default, or a documented "popular values" model
//!   ([`EstimateModel`]).

use cosched_core::{Dur, Time};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Gamma};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

use crate::swf::{ReadReport, SwfHeader, SwfRecord, Trace};
use crate::transform;

/// Queue number of interactive jobs in generated traces (SWF field 15).
pub const QUEUE_INTERACTIVE: u32 = 0;
/// Queue number of batch jobs in generated traces.
pub const QUEUE_BATCH: u32 = 1;

const BUCKETS: usize = 48;
const SECONDS_IN_BUCKET: f64 = 1800.0;
/// The reference program's day for the arrival-count density starts at bucket 11.
const CYCLE_START: usize = 11;
/// `ln` of the longest runtime (about 45 hours); larger draws are redrawn.
const MAX_LOG_RUNTIME: f64 = 12.0;
/// `ln` of the longest inter-arrival gap (about 5 days); larger draws are redrawn.
const MAX_LOG_INTERARRIVAL: f64 = 13.0;
/// The published size parameters are for a machine of 2^7 = 128 nodes.
const REFERENCE_LOG2_MACHINE: f64 = 7.0;

/// The parameters of one job type (or of the typeless model).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeParams {
    pub serial_prob: f64,
    pub pow2_prob: f64,
    pub u_low: f64,
    pub u_med: f64,
    pub u_hi: f64,
    pub u_prob: f64,
    pub a1: f64,
    pub b1: f64,
    pub a2: f64,
    pub b2: f64,
    pub pa: f64,
    pub pb: f64,
    pub aarr: f64,
    pub barr: f64,
    pub anum: f64,
    pub bnum: f64,
    pub arar: f64,
}

impl TypeParams {
    /// Published batch parameters.
    pub const BATCH: TypeParams = TypeParams {
        serial_prob: 0.2927,
        pow2_prob: 0.6686,
        u_low: 1.2,
        u_med: 5.0,
        u_hi: 7.0,
        u_prob: 0.875,
        a1: 6.57,
        b1: 0.823,
        a2: 639.1,
        b2: 0.0156,
        pa: -0.003,
        pb: 0.6986,
        aarr: 6.0415,
        barr: 0.8531,
        anum: 6.1271,
        bnum: 5.2740,
        arar: 1.0519,
    };
    /// Published interactive parameters.
    pub const INTERACTIVE: TypeParams = TypeParams {
        serial_prob: 0.1541,
        pow2_prob: 0.625,
        u_low: 1.0,
        u_med: 3.0,
        u_hi: 5.5,
        u_prob: 0.705,
        a1: 3.8351,
        b1: 0.6605,
        a2: 7.073,
        b2: 0.6856,
        pa: -0.0118,
        pb: 0.9156,
        aarr: 6.5510,
        barr: 0.6621,
        anum: 8.9186,
        bnum: 3.6680,
        arar: 0.9797,
    };
    /// Published parameters for the whole sample, without the type split.
    pub const UNTYPED: TypeParams = TypeParams {
        serial_prob: 0.244,
        pow2_prob: 0.576,
        u_low: 0.8,
        u_med: 4.5,
        u_hi: 7.0,
        u_prob: 0.86,
        a1: 4.2,
        b1: 0.94,
        a2: 312.0,
        b2: 0.03,
        pa: -0.0054,
        pb: 0.78,
        aarr: 10.2303,
        barr: 0.4871,
        anum: 8.1737,
        bnum: 3.9631,
        arar: 1.0225,
    };

    /// The hyper-gamma mixing probability for a job of `size` PEs.
    pub fn runtime_mix(&self, size: u32) -> f64 {
        (self.pa * f64::from(size) + self.pb).clamp(0.0, 1.0)
    }

    /// The size parameters moved to a machine of `procs` PEs: `u_hi` and `u_med` shift by
    /// `log2(procs) − 7` (the published values are for 128 nodes), `u_low` stays, and the
    /// three are kept in order.
    pub fn for_machine(&self, procs: u32) -> TypeParams {
        let shift = f64::from(procs.max(1)).log2() - REFERENCE_LOG2_MACHINE;
        let mut p = *self;
        p.u_hi = (self.u_hi + shift).max(0.0);
        p.u_med = (self.u_med + shift).clamp(p.u_low.min(p.u_hi), p.u_hi);
        p.u_low = p.u_low.min(p.u_med);
        p
    }
}

/// The model's parameters: batch and interactive, or one typeless set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LublinParams {
    pub batch: TypeParams,
    pub interactive: TypeParams,
    /// When false, only the `interactive` parameter set is used (set it to
    /// [`TypeParams::UNTYPED`]) and jobs carry no queue number.
    pub typed: bool,
}

impl Default for LublinParams {
    fn default() -> Self {
        LublinParams {
            batch: TypeParams::BATCH,
            interactive: TypeParams::INTERACTIVE,
            typed: true,
        }
    }
}

impl LublinParams {
    /// The typeless ("whole sample") variant.
    pub fn untyped() -> Self {
        LublinParams {
            batch: TypeParams::UNTYPED,
            interactive: TypeParams::UNTYPED,
            typed: false,
        }
    }
}

/// How generated jobs get their requested time (SWF field 9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EstimateModel {
    /// The estimate equals the runtime.
    #[default]
    Exact,
    /// Users overestimate and pick round numbers: the runtime is multiplied by a factor drawn
    /// log-uniformly from [1, 10], then rounded up to the next of [`POPULAR_ESTIMATES_S`]
    /// (capped at the largest, 48 h, but never below the runtime). A simple stand-in for the modal estimates Tsafrir et al.
    /// observed, not a fitted model.
    Popular,
}

impl std::str::FromStr for EstimateModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "exact" => Ok(EstimateModel::Exact),
            "popular" => Ok(EstimateModel::Popular),
            _ => Err(format!(
                "unknown estimate model {s:?} (use exact or popular)"
            )),
        }
    }
}

/// Round requested times, in seconds, that the `Popular` estimate model rounds up to.
pub const POPULAR_ESTIMATES_S: [i64; 20] = [
    60, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 28800, 36000,
    43200, 64800, 86400, 129600, 172800,
];

/// What to generate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenOptions {
    pub jobs: usize,
    /// Machine size in PEs; job sizes are scaled to it (see [`TypeParams::for_machine`]).
    pub procs: u32,
    pub seed: u64,
    /// Rescale inter-arrival times so the offered load equals this.
    pub load: Option<f64>,
    pub params: LublinParams,
    pub estimates: EstimateModel,
    /// Hour of the day (0–23) at which the workload starts.
    pub start_hour: u32,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            jobs: 1000,
            procs: 128,
            seed: 1,
            load: None,
            params: LublinParams::default(),
            estimates: EstimateModel::Exact,
            start_hour: 0,
        }
    }
}

/// Inter-arrival α (the gamma shape `aarr` of the typeless model) of seed 001's workloads
/// (Table 5): W1, the normal load, and W2, the high load.
pub const ALPHA_W1: f64 = 10.33;
pub const ALPHA_W2: f64 = 9.83;

impl GenOptions {
    /// Seed 001's workloads (Table 5): the typeless Lublin–Feitelson model on 128 nodes with
    /// inter-arrival α `alpha` ([`ALPHA_W1`], [`ALPHA_W2`]). Sizes are in nodes (one process
    /// per node); the multi-core transformation of formula 7 is applied by the run.
    pub fn seed001(alpha: f64, jobs: usize, seed: u64) -> GenOptions {
        let mut params = LublinParams::untyped();
        params.interactive.aarr = alpha;
        params.batch.aarr = alpha;
        GenOptions {
            jobs,
            procs: 128,
            seed,
            load: None,
            params,
            estimates: EstimateModel::Exact,
            start_hour: 0,
        }
    }
}

/// Draws a job size from a type's (machine-scaled) parameters.
pub fn sample_size<R: rand::Rng + ?Sized>(rng: &mut R, p: &TypeParams, procs: u32) -> u32 {
    let u: f64 = rng.random();
    if u <= p.serial_prob {
        return 1;
    }
    let (lo, hi) = if rng.random::<f64>() <= p.u_prob {
        (p.u_low, p.u_med)
    } else {
        (p.u_med, p.u_hi)
    };
    let mut log2 = lo + (hi - lo) * rng.random::<f64>();
    if u <= p.serial_prob + p.pow2_prob {
        log2 = log2.round();
    }
    (2f64.powf(log2).round() as u32).clamp(1, procs.max(1))
}

fn gamma(shape: f64, scale: f64) -> Gamma<f64> {
    // Parameters are validated where they enter (generate); fall back to a point mass rather
    // than panic on a degenerate user-supplied value.
    Gamma::new(shape.max(f64::MIN_POSITIVE), scale.max(f64::MIN_POSITIVE))
        .unwrap_or_else(|_| Gamma::new(1.0, f64::MIN_POSITIVE).expect("valid"))
}

/// Draws `ln(runtime in seconds)` for a job of `size` PEs: hyper-gamma, redrawn above 12.
pub fn sample_log_runtime<R: rand::Rng + ?Sized>(rng: &mut R, p: &TypeParams, size: u32) -> f64 {
    let mix = p.runtime_mix(size);
    let first = gamma(p.a1, p.b1);
    let second = gamma(p.a2, p.b2);
    loop {
        let g = if rng.random::<f64>() <= mix {
            first.sample(rng)
        } else {
            second.sample(rng)
        };
        if g <= MAX_LOG_RUNTIME {
            return g;
        }
    }
}

/// Regularised lower incomplete gamma function P(a, x): series below a + 1, continued
/// fraction above (the textbook split, accurate to ~1e-12 here).
fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let ln_prefix = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let (mut term, mut sum, mut n) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        (sum.ln() + ln_prefix).exp()
    } else {
        // Modified Lentz for the continued fraction of Q(a, x).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        1.0 - (ln_prefix.exp() * h)
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The relative arrival intensity of each half-hour bucket of the day (mean 1): the gamma
/// (`anum`, `bnum`) probability mass of the bucket, the day starting at bucket 11.
pub fn daily_weights(p: &TypeParams) -> [f64; BUCKETS] {
    let mut w = [0.0; BUCKETS];
    for i in CYCLE_START..CYCLE_START + BUCKETS {
        let x = i as f64;
        let mass = gamma_p(p.anum, (x + 0.5) / p.bnum) - gamma_p(p.anum, (x - 0.5) / p.bnum);
        w[(i - 1) % BUCKETS] = mass;
    }
    let mean = w.iter().sum::<f64>() / BUCKETS as f64;
    for v in &mut w {
        *v /= mean;
    }
    w
}

/// One arrival stream (one job type) walking through the daily cycle.
struct Stream {
    weights: [f64; BUCKETS],
    gap: Gamma<f64>,
    /// Seconds since the start of the workload of this stream's next job.
    next: f64,
    bucket: usize,
    /// Points already spent in the current bucket (the bucket holds `weights[bucket]`).
    spent: f64,
}

impl Stream {
    fn new(p: &TypeParams, start_hour: u32) -> Stream {
        Stream {
            weights: daily_weights(p),
            gap: gamma(p.aarr * p.arar, p.barr),
            next: 0.0,
            bucket: (start_hour as usize % 24) * BUCKETS / 24,
            spent: 0.0,
        }
    }

    /// Moves `next` forward by one inter-arrival gap. The gap's `e^g` rush-hour seconds are
    /// converted into points (one point per bucket at mean intensity) and paid bucket by
    /// bucket: a busy bucket (weight > 1) absorbs more points per second, so gaps there are
    /// shorter.
    fn advance<R: rand::Rng + ?Sized>(&mut self, rng: &mut R) {
        let g = loop {
            let g = self.gap.sample(rng);
            if g <= MAX_LOG_INTERARRIVAL {
                break g;
            }
        };
        let start_fraction = self.spent / self.weights[self.bucket];
        let mut points = self.spent + g.exp() / SECONDS_IN_BUCKET;
        let mut elapsed = 0.0;
        while points > self.weights[self.bucket] {
            points -= self.weights[self.bucket];
            self.bucket = (self.bucket + 1) % BUCKETS;
            elapsed += SECONDS_IN_BUCKET;
        }
        self.spent = points;
        let end_fraction = points / self.weights[self.bucket];
        self.next += elapsed + SECONDS_IN_BUCKET * (end_fraction - start_fraction);
    }
}

fn estimate<R: rand::Rng + ?Sized>(rng: &mut R, model: EstimateModel, run_s: i64) -> i64 {
    match model {
        EstimateModel::Exact => run_s,
        EstimateModel::Popular => {
            let factor = (rng.random::<f64>() * 10f64.ln()).exp();
            let wanted = (run_s as f64 * factor).ceil() as i64;
            POPULAR_ESTIMATES_S
                .iter()
                .copied()
                .find(|&v| v >= wanted)
                .unwrap_or(POPULAR_ESTIMATES_S[POPULAR_ESTIMATES_S.len() - 1])
                .max(run_s)
        }
    }
}

/// The header written with generated traces.
pub fn generated_header(opts: &GenOptions) -> SwfHeader {
    let mut h = SwfHeader::default();
    for line in [
        " Version: 2.2".to_string(),
        " Computer: Lublin-Feitelson workload model (Lublin99), generated by cosched".to_string(),
        " Acknowledge: U. Lublin and D. G. Feitelson, JPDC 63(11), 2003".to_string(),
        format!(" MaxJobs: {}", opts.jobs),
        format!(" MaxRecords: {}", opts.jobs),
        format!(" MaxNodes: {}", opts.procs),
        format!(" MaxProcs: {}", opts.procs),
        format!(
            " Note: seed {}, {} model, estimates {}, start hour {}{}",
            opts.seed,
            if opts.params.typed {
                "batch/interactive"
            } else {
                "typeless"
            },
            match opts.estimates {
                EstimateModel::Exact => "exact",
                EstimateModel::Popular => "popular",
            },
            opts.start_hour,
            opts.load
                .map(|l| format!(", rescaled to offered load {l}"))
                .unwrap_or_default()
        ),
    ] {
        h.push_line(&line);
    }
    if opts.params.typed {
        h.push_line(" MaxQueues: 2");
        h.push_line(&format!(" Queue: {QUEUE_INTERACTIVE} interactive"));
        h.push_line(&format!(" Queue: {QUEUE_BATCH} batch"));
    }
    h
}

/// Generates a workload. Deterministic: the same options give identical records.
///
/// Submit times and runtimes are whole seconds (runtimes at least 1 s). With `load`, the
/// inter-arrival gaps are scaled so that [`transform::offered_load`] equals it before the
/// submit times are rounded to seconds.
pub fn generate(opts: &GenOptions) -> Trace {
    let procs = opts.procs.max(1);
    let mut rng = Pcg64::seed_from_u64(opts.seed);
    let batch = opts.params.batch.for_machine(procs);
    let interactive = opts.params.interactive.for_machine(procs);
    let mut streams = [
        Stream::new(&interactive, opts.start_hour),
        Stream::new(&batch, opts.start_hour),
    ];
    // Like the reference program, each stream's first job arrives one gap after time zero.
    for s in &mut streams {
        s.advance(&mut rng);
    }
    let mut records = Vec::with_capacity(opts.jobs);
    for i in 0..opts.jobs {
        // Ties go to the interactive stream.
        let kind = if opts.params.typed && streams[1].next < streams[0].next {
            QUEUE_BATCH
        } else {
            QUEUE_INTERACTIVE
        };
        let stream = &mut streams[kind as usize];
        let submit = stream.next;
        stream.advance(&mut rng);
        let p = if kind == QUEUE_BATCH {
            &batch
        } else {
            &interactive
        };
        let size = sample_size(&mut rng, p, procs);
        let run_s = (sample_log_runtime(&mut rng, p, size).exp().floor() as i64).max(1);
        let req_s = estimate(&mut rng, opts.estimates, run_s);
        records.push(SwfRecord {
            job: i as u64 + 1,
            submit: Some(Time::from_secs_f64(submit)),
            run: Some(Dur::from_secs(run_s)),
            alloc_procs: Some(size),
            req_procs: Some(size),
            req_time: Some(Dur::from_secs(req_s)),
            status: Some(1),
            queue: opts.params.typed.then_some(kind),
            ..SwfRecord::default()
        });
    }
    if let Some(load) = opts.load {
        transform::rescale_load(&mut records, procs, load);
    }
    for r in &mut records {
        r.submit = r
            .submit
            .map(|t| Time::from_secs((t.as_micros() + 500_000).div_euclid(1_000_000)));
    }
    Trace {
        header: generated_header(opts),
        records,
        procs,
        report: ReadReport::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_gamma_matches_known_values() {
        // P(1, x) = 1 − e^−x; P(a, x) for integer a has a closed form.
        for x in [0.1f64, 1.0, 3.0, 10.0] {
            assert!((gamma_p(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-12);
        }
        let x: f64 = 4.0;
        let p3 = 1.0 - (-x).exp() * (1.0 + x + x * x / 2.0);
        assert!((gamma_p(3.0, x) - p3).abs() < 1e-12);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn weights_average_one_and_peak_by_day() {
        let w = daily_weights(&TypeParams::BATCH);
        assert!((w.iter().sum::<f64>() / 48.0 - 1.0).abs() < 1e-12);
        let peak = (0..48).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap();
        // Busiest half hour is in the working day, the quietest at night.
        assert!((16..40).contains(&peak), "peak bucket {peak}");
        let low = (0..48).min_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap();
        assert!(!(16..40).contains(&low), "lowest bucket {low}");
    }

    #[test]
    fn sizes_fit_the_machine() {
        let mut rng = Pcg64::seed_from_u64(3);
        for procs in [1, 2, 8, 100, 1152] {
            let p = TypeParams::BATCH.for_machine(procs);
            for _ in 0..2000 {
                let s = sample_size(&mut rng, &p, procs);
                assert!((1..=procs).contains(&s));
            }
        }
    }
}
