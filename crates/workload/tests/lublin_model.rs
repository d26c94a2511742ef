//! The generated workload has the statistics the published parameters imply. Expected values
//! are computed here independently of the generator (closed forms and numerical integration of
//! the gamma density). Each statistical check allows four standard errors of the estimate
//! (computed from the sample size and the distribution), so a correct generator passes with
//! probability above 99.99% for any seed; the seeds are fixed, so the tests are deterministic.

use cosched_workload::lublin::{
    self, EstimateModel, GenOptions, LublinParams, QUEUE_BATCH, QUEUE_INTERACTIVE, TypeParams,
};
use cosched_workload::swf::{self, ReadOptions, SwfRecord};
use cosched_workload::transform;
use rand::SeedableRng;

const JOBS: usize = 40_000;

fn trace() -> Vec<SwfRecord> {
    lublin::generate(&GenOptions {
        jobs: JOBS,
        procs: 128,
        seed: 2026,
        ..Default::default()
    })
    .records
}

/// Asserts `|got − want| < 4·se`.
fn within(got: f64, want: f64, se: f64, what: &str) {
    assert!(
        (got - want).abs() < 4.0 * se,
        "{what}: got {got}, expected {want} ± 4×{se:.5}"
    );
}

fn binomial_se(p: f64, n: usize) -> f64 {
    (p * (1.0 - p) / n as f64).sqrt()
}

fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

fn of_queue(records: &[SwfRecord], q: u32) -> Vec<&SwfRecord> {
    records.iter().filter(|r| r.queue == Some(q)).collect()
}

/// ln Γ by the Stirling series after shifting the argument above 10.
fn ln_gamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 10.0 {
        acc -= x.ln();
        x += 1.0;
    }
    acc + (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x.powi(3))
        + 1.0 / (1260.0 * x.powi(5))
}

/// ∫₀^limit f(g)·pdf(g) dg and ∫₀^limit pdf(g) dg for gamma(shape, scale), by Simpson's rule.
fn gamma_integral(shape: f64, scale: f64, limit: f64, f: impl Fn(f64) -> f64) -> (f64, f64) {
    let n = 200_000;
    let h = limit / n as f64;
    let pdf = |g: f64| {
        if g <= 0.0 {
            return 0.0;
        }
        ((shape - 1.0) * g.ln() - g / scale - ln_gamma(shape) - shape * scale.ln()).exp()
    };
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..=n {
        let g = i as f64 * h;
        let w = if i == 0 || i == n {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        num += w * f(g) * pdf(g);
        den += w * pdf(g);
    }
    (num * h / 3.0, den * h / 3.0)
}

/// The two gamma branches of the runtime model truncated at 12: (mean of f, mass) of each.
fn runtime_branches(p: &TypeParams, f: fn(f64) -> f64) -> [(f64, f64); 2] {
    [(p.a1, p.b1), (p.a2, p.b2)].map(|(a, b)| {
        let (num, den) = gamma_integral(a, b, 12.0, f);
        (num / den, den)
    })
}

/// Expected f(ln runtime) for a size: the hyper-gamma mix of the truncated branches. Rejection
/// above 12 redraws the whole mixture, so each branch is weighted by its mass below 12.
fn expected_log_runtime(p: &TypeParams, size: u32, br: &[(f64, f64); 2]) -> f64 {
    let mix = p.runtime_mix(size);
    let [(m1, d1), (m2, d2)] = *br;
    (mix * d1 * m1 + (1.0 - mix) * d2 * m2) / (mix * d1 + (1.0 - mix) * d2)
}

/// Probability that a parallel job's size is a power of two: rounded with probability
/// pow2/(1 − serial), else 2^x with x two-stage uniform, which lands on a power of two when
/// round(2^x) does.
fn expected_pow2_of_parallel(p: &TypeParams) -> f64 {
    let rounded = p.pow2_prob / (1.0 - p.serial_prob);
    let n = 400_000;
    let mut hits = 0.0;
    for (lo, hi, w) in [
        (p.u_low, p.u_med, p.u_prob),
        (p.u_med, p.u_hi, 1.0 - p.u_prob),
    ] {
        let mut inside = 0usize;
        for i in 0..n {
            let x = lo + (hi - lo) * (i as f64 + 0.5) / n as f64;
            let size = (2f64.powf(x)).round() as u32;
            inside += usize::from(size > 1 && size.is_power_of_two());
        }
        hits += w * inside as f64 / n as f64;
    }
    rounded + (1.0 - rounded) * hits
}

#[test]
fn serial_fraction_matches_each_type() {
    let records = trace();
    for (q, p) in [
        (QUEUE_BATCH, TypeParams::BATCH),
        (QUEUE_INTERACTIVE, TypeParams::INTERACTIVE),
    ] {
        let jobs = of_queue(&records, q);
        assert!(jobs.len() > 5000, "queue {q}: only {} jobs", jobs.len());
        let serial =
            jobs.iter().filter(|r| r.req_procs == Some(1)).count() as f64 / jobs.len() as f64;
        within(
            serial,
            p.serial_prob,
            binomial_se(p.serial_prob, jobs.len()),
            &format!("queue {q} serial"),
        );
    }
}

#[test]
fn power_of_two_fraction_matches_each_type() {
    let records = trace();
    for (q, p) in [
        (QUEUE_BATCH, TypeParams::BATCH),
        (QUEUE_INTERACTIVE, TypeParams::INTERACTIVE),
    ] {
        let parallel: Vec<u32> = of_queue(&records, q)
            .iter()
            .filter_map(|r| r.req_procs)
            .filter(|&s| s > 1)
            .collect();
        let pow2 =
            parallel.iter().filter(|s| s.is_power_of_two()).count() as f64 / parallel.len() as f64;
        let want = expected_pow2_of_parallel(&p);
        within(
            pow2,
            want,
            binomial_se(want, parallel.len()),
            &format!("queue {q} pow2"),
        );
        assert!(parallel.iter().all(|&s| s <= 128));
    }
}

#[test]
fn log_runtime_follows_the_hyper_gamma() {
    // The sampler itself, for a few sizes, against the truncated hyper-gamma mean.
    let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
    for (p, size) in [
        (TypeParams::BATCH, 1),
        (TypeParams::BATCH, 64),
        (TypeParams::INTERACTIVE, 8),
    ] {
        let draws: Vec<f64> = (0..20_000)
            .map(|_| lublin::sample_log_runtime(&mut rng, &p, size))
            .collect();
        let (mean, sd) = mean_sd(&draws);
        let want = expected_log_runtime(&p, size, &runtime_branches(&p, |g| g));
        within(
            mean,
            want,
            sd / (draws.len() as f64).sqrt(),
            &format!("size {size} ln runtime"),
        );
    }
    // The whole trace: runtimes are whole seconds (the draw's e^g floored, at least 1 s), so
    // the expectation is of ln(max(1, floor(e^g))).
    let floored = |g: f64| g.exp().floor().max(1.0).ln();
    let records = trace();
    for (q, p) in [
        (QUEUE_BATCH, TypeParams::BATCH),
        (QUEUE_INTERACTIVE, TypeParams::INTERACTIVE),
    ] {
        let jobs = of_queue(&records, q);
        let logs: Vec<f64> = jobs
            .iter()
            .map(|r| r.run.unwrap().as_secs_f64().ln())
            .collect();
        let (mean, sd) = mean_sd(&logs);
        let br = runtime_branches(&p, floored);
        let want = jobs
            .iter()
            .map(|r| expected_log_runtime(&p, r.req_procs.unwrap(), &br))
            .sum::<f64>()
            / jobs.len() as f64;
        within(
            mean,
            want,
            sd / (logs.len() as f64).sqrt(),
            &format!("queue {q} mean ln runtime"),
        );
    }
}

#[test]
fn mean_interarrival_matches_the_gamma_in_log_scale() {
    // Over whole days the daily weights average 1, so a stream's mean gap is E[e^G | G ≤ 13]
    // with G ~ gamma(aarr·arar, barr). The gap is very heavy-tailed (its mean is made by rare
    // draws of G near the cutoff, cv ≈ 10), hence the large sample.
    let records = lublin::generate(&GenOptions {
        jobs: 400_000,
        procs: 128,
        seed: 77,
        ..Default::default()
    })
    .records;
    for (q, p) in [
        (QUEUE_BATCH, TypeParams::BATCH),
        (QUEUE_INTERACTIVE, TypeParams::INTERACTIVE),
    ] {
        let submits: Vec<f64> = of_queue(&records, q)
            .iter()
            .map(|r| r.submit.unwrap().as_secs_f64())
            .collect();
        let mean_gap = (submits[submits.len() - 1] - submits[0]) / (submits.len() - 1) as f64;
        let (num, den) = gamma_integral(p.aarr * p.arar, p.barr, 13.0, f64::exp);
        let (num2, _) = gamma_integral(p.aarr * p.arar, p.barr, 13.0, |g| (2.0 * g).exp());
        let want = num / den;
        // The sd of the rush-hour gap e^G; the daily cycle stretches gaps at night, so allow
        // 1.5 times that.
        let sd = 1.5 * (num2 / den - want * want).sqrt();
        within(
            mean_gap,
            want,
            sd / (submits.len() as f64).sqrt(),
            &format!("queue {q} mean gap (s)"),
        );
    }
}

#[test]
fn load_option_sets_the_offered_load_and_the_mean_interarrival() {
    let procs = 256;
    for load in [0.5, 0.9] {
        let t = lublin::generate(&GenOptions {
            jobs: 5000,
            procs,
            seed: 9,
            load: Some(load),
            ..Default::default()
        });
        let got = transform::offered_load(&t.records, procs);
        assert!((got - load).abs() < 1e-3 * load, "load {got} vs {load}");
        // Mean inter-arrival = total work / (procs · load · (n − 1)).
        let work = transform::total_work_pe_s(&t.records);
        let (first, last) = transform::submit_range(&t.records).unwrap();
        let mean_gap = last.since(first).as_secs_f64() / 4999.0;
        let want = work / (f64::from(procs) * load * 4999.0);
        assert!((mean_gap - want).abs() / want < 1e-3);
        assert!(
            t.records.windows(2).all(|w| w[0].submit <= w[1].submit),
            "submits stay sorted"
        );
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_workload() {
    let opts = GenOptions {
        jobs: 3000,
        procs: 100,
        seed: 11,
        load: Some(0.8),
        estimates: EstimateModel::Popular,
        ..Default::default()
    };
    let bytes = |o: &GenOptions| {
        let t = lublin::generate(o);
        let mut out = Vec::new();
        swf::write_trace(&mut out, &t.header, &t.records).unwrap();
        out
    };
    let a = bytes(&opts);
    assert_eq!(a, bytes(&opts));
    assert_ne!(
        a,
        bytes(&GenOptions {
            seed: 12,
            ..opts.clone()
        })
    );
    // What is written reads back as the same workload.
    let t = lublin::generate(&opts);
    let back = swf::read_trace_from(&a[..], "gen", &ReadOptions::default()).unwrap();
    assert_eq!(back.records, t.records);
    assert_eq!(back.procs, 100);
}

#[test]
fn popular_estimates_are_round_and_never_short() {
    let t = lublin::generate(&GenOptions {
        jobs: 3000,
        seed: 4,
        estimates: EstimateModel::Popular,
        ..Default::default()
    });
    for r in &t.records {
        let (run, req) = (r.run.unwrap().as_secs(), r.req_time.unwrap().as_secs());
        assert!(req >= run);
        assert!(
            lublin::POPULAR_ESTIMATES_S.contains(&req) || req == run,
            "{req}"
        );
    }
    let exact = lublin::generate(&GenOptions {
        jobs: 100,
        ..Default::default()
    });
    assert!(exact.records.iter().all(|r| r.req_time == r.run));
}

#[test]
fn untyped_model_has_one_stream_and_no_queue() {
    let t = lublin::generate(&GenOptions {
        jobs: 20_000,
        seed: 8,
        params: LublinParams::untyped(),
        ..Default::default()
    });
    assert!(t.records.iter().all(|r| r.queue.is_none()));
    let serial = t.records.iter().filter(|r| r.req_procs == Some(1)).count() as f64 / 20_000.0;
    within(serial, 0.244, binomial_se(0.244, 20_000), "untyped serial");
}
