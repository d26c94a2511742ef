//! Seed 001 end to end: Scojo-PECT and G-LOMARC-TS on the multi-core machine, with the
//! engine's rates, over the W1 workload model.

use cosched_core::{Dur, JobId, MachineShape, Time};
use cosched_policy::{PolicyConfig, registry};
use cosched_report::metrics::MetricsOptions;
use cosched_report::run::{RunSpec, run};
use cosched_report::setup::Source;
use cosched_sim::trace::Semantics;
use cosched_sim::{EngineOptions, SimJob, simulate};
use cosched_workload::lublin::{ALPHA_W1, GenOptions};

fn machine(nodes: u32) -> MachineShape {
    MachineShape {
        nodes,
        sockets_per_node: 2,
        cores_per_socket: 2,
        mem_per_node_mib: None,
    }
}

fn w1(jobs: usize, seed: u64) -> Source {
    Source::Lublin {
        model: Box::new(GenOptions::seed001(ALPHA_W1, jobs, seed)),
    }
}

fn config(opts: &[(&str, toml::Value)]) -> PolicyConfig {
    let mut c = PolicyConfig::new(machine(128));
    for (k, v) in opts {
        c.options.insert(k.to_string(), v.clone());
    }
    c
}

fn spec<'a>(src: &'a Source, policy: &'a str, cfg: &'a PolicyConfig) -> RunSpec<'a> {
    RunSpec {
        source: src,
        semantics: Semantics::default(),
        load: None,
        seed: None,
        policy,
        config: cfg,
        engine: EngineOptions::default(),
        metrics: MetricsOptions::default(),
        observe: None,
    }
}

#[test]
fn w1_runs_under_every_variant_and_is_deterministic() {
    let src = w1(1500, 3);
    for variant in ["ssp", "glts", "cst", "cstws", "fbo", "ns", "nh"] {
        let cfg = config(&[("variant", toml::Value::String(variant.into()))]);
        let out = run(&spec(&src, "glomarc", &cfg)).unwrap_or_else(|e| panic!("{variant}: {e}"));
        assert_eq!(out.result.unfinished, 0, "{variant}");
        let mc = out.summary.multicore.as_ref().expect("multicore figures");
        assert!(mc.all.rr >= 1.0, "{variant}: {mc:?}");
        assert!(mc.core_utilization > 0.0 && mc.core_utilization <= 1.0);
        if variant == "ssp" {
            assert_eq!(mc.groups, 0.0);
        } else {
            assert!(mc.groups > 0.0, "{variant} formed no group");
        }
        if variant != "ssp" {
            // Step 7 held for every group formed: no member beyond F_slack · R_est.
            let worst = out
                .result
                .policy_stats
                .iter()
                .find(|(k, _)| k == "worst_fairness_ratio")
                .unwrap()
                .1;
            assert!(worst <= 1.0, "{variant}: {worst}");
        }
        // Same seed, byte-identical output.
        let again = run(&spec(&src, "glomarc", &cfg)).unwrap();
        assert_eq!(
            serde_json::to_string(&again.summary).unwrap(),
            serde_json::to_string(&out.summary).unwrap()
        );
        assert_eq!(again.result.records, out.result.records);
        eprintln!(
            "{variant}: RR all {:.2} medium {:.2} long {:.2}; high-load core util {:.3}; groups {} ({:.2} jobs)",
            mc.all.rr,
            mc.medium.rr,
            mc.long.rr,
            mc.high_load_core_utilization,
            mc.groups,
            mc.jobs_per_group
        );
    }
}

/// Groups formed while backfilling (option `group_backfill`) keep every invariant the head's
/// groups do: all jobs end, the fairness bound holds for every group, same seed same output.
#[test]
fn group_backfilling_keeps_the_fairness_bound_and_determinism() {
    let src = w1(1500, 3);
    let cfg = config(&[("group_backfill", toml::Value::Boolean(true))]);
    let out = run(&spec(&src, "glomarc", &cfg)).unwrap();
    assert_eq!(out.result.unfinished, 0);
    let stat = |k: &str| out.result.policy_stats.iter().find(|x| x.0 == k).unwrap().1;
    assert!(stat("groups") > 0.0);
    assert!(
        stat("worst_fairness_ratio") <= 1.0,
        "{}",
        stat("worst_fairness_ratio")
    );
    let again = run(&spec(&src, "glomarc", &cfg)).unwrap();
    assert_eq!(again.result.records, out.result.records);
}

/// Over a long run the medium and long slices keep their 30 % / 70 % shares of the time
/// that is not the short slices' (within 1 %), measured by how long two jobs that never run
/// out of work actually ran.
#[test]
fn slices_keep_their_shares() {
    let m = machine(4);
    let cfg = PolicyConfig::new(m);
    let mut cfg = cfg;
    cfg.options
        .insert("slowdown_seed".into(), toml::Value::Integer(1));
    let mut p = registry::build("scojo-pect", &cfg).unwrap();
    let day = 24 * 3600;
    // A medium and a long job, each alone on the machine's nodes, too long to end in 30 days
    // (the medium one is told it is medium).
    let jobs = vec![
        SimJob::with_estimate(
            1,
            Time::ZERO,
            1,
            Dur::from_secs(30 * day),
            Dur::from_secs(3 * 3600),
        ),
        SimJob::exact(2, Time::ZERO, 1, Dur::from_secs(30 * day)),
    ];
    let opts = EngineOptions {
        slowdowns: Some(cosched_core::Slowdowns::new(1)),
        ..EngineOptions::default()
    };
    let r = simulate(m, &jobs, p.as_mut(), opts).unwrap();
    let stat = |k: &str| r.policy_stats.iter().find(|x| x.0 == k).unwrap().1;
    let (med, long) = (stat("medium_slice_s"), stat("long_slice_s"));
    // Each slice loses its 60 s of overhead: 0.3·3600 − 60 = 1020 s and 0.7·3600 − 60 = 2460 s.
    let share = med / (med + long);
    assert!((share - 1020.0 / 3480.0).abs() < 0.01, "{share}");
    // The medium job ran only in medium slices: its run time is the medium slices' time,
    // until it ended at its work (30 days of work take about 3.4 times as long).
    let rec = |id: u64| r.records.iter().find(|x| x.id == JobId(id)).unwrap();
    let ran = |id: u64| {
        let x = rec(id);
        ((x.end.unwrap() - x.start.unwrap()) - x.suspended).as_secs_f64()
    };
    assert!((ran(1) - 30.0 * day as f64).abs() < 1.0, "{}", ran(1));
    let span1 = (rec(1).end.unwrap() - Time::ZERO).as_secs_f64();
    let span2 = (rec(2).end.unwrap() - Time::ZERO).as_secs_f64();
    assert!(span1 > span2, "the medium job gets the smaller share");
    let medium_share = (30.0 * day as f64) / span1;
    assert!(
        (medium_share - 1020.0 / 3600.0).abs() < 0.01 * 1020.0 / 3600.0 + 1e-3,
        "{medium_share}"
    );
}

/// Table 5: W1's job-type mix (64 % short, 19.5 % medium, 16.5 % long) and its share of
/// serial jobs (24 %), over three seeds of 4,000 jobs; the shares of work are printed for the
/// reproduction notes.
#[test]
fn w1_has_table_5s_job_type_mix() {
    let (mut n, mut counts, mut work, mut serial, mut pow2, mut parallel) =
        (0usize, [0usize; 3], [0f64; 3], 0usize, 0usize, 0usize);
    for seed in 1..=3 {
        let g = cosched_workload::lublin::generate(&GenOptions::seed001(ALPHA_W1, 4000, seed));
        for r in &g.records {
            let run = r.run.unwrap().as_secs();
            let t = if run <= 600 {
                0
            } else if run <= 3 * 3600 {
                1
            } else {
                2
            };
            let size = r.alloc_procs.unwrap();
            n += 1;
            counts[t] += 1;
            work[t] += run as f64 * f64::from(size);
            if size == 1 {
                serial += 1;
            } else {
                parallel += 1;
                if size.is_power_of_two() {
                    pow2 += 1;
                }
            }
        }
    }
    let pct = |x: usize, of: usize| 100.0 * x as f64 / of as f64;
    let total: f64 = work.iter().sum();
    eprintln!(
        "W1: short {:.1} %, medium {:.1} %, long {:.1} %; work {:.1} / {:.1} / {:.1} %; serial {:.1} %; power-of-two among parallel {:.1} %",
        pct(counts[0], n),
        pct(counts[1], n),
        pct(counts[2], n),
        100.0 * work[0] / total,
        100.0 * work[1] / total,
        100.0 * work[2] / total,
        pct(serial, n),
        pct(pow2, parallel)
    );
    assert!((pct(counts[0], n) - 64.0).abs() < 4.0);
    assert!((pct(counts[1], n) - 19.5).abs() < 3.0);
    assert!((pct(counts[2], n) - 16.5).abs() < 3.0);
    assert!((pct(serial, n) - 24.0).abs() < 3.0);
}
