use super::*;
use cosched_workload::lublin::GenOptions;

#[test]
fn sweep_rows_follow_the_spec_order_and_backfilling_beats_fcfs() {
    let model = GenOptions {
        jobs: 600,
        procs: 64,
        seed: 3,
        ..GenOptions::default()
    };
    let spec = SweepSpec {
        source: Source::Lublin {
            model: Box::new(model),
        },
        policies: vec!["fcfs".into(), "easy".into()],
        loads: vec![Some(0.6), Some(0.85)],
        seeds: vec![1, 2],
        semantics: Semantics::default(),
        engine: EngineOptions::default(),
        policy: PolicyOptions::default(),
        metrics: MetricsOptions {
            batch_size: 100,
            ..MetricsOptions::default()
        },
        stop: None,
        machine: None,
    };
    let count = std::sync::atomic::AtomicUsize::new(0);
    let rows = run(&spec, &|| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(count.into_inner(), 8);
    let keys: Vec<_> = rows
        .iter()
        .map(|r| (r.policy.as_str(), r.load.unwrap(), r.seed))
        .collect();
    assert_eq!(
        keys[..3],
        [("fcfs", 0.6, 1), ("fcfs", 0.6, 2), ("fcfs", 0.85, 1)]
    );
    assert!(rows.iter().all(|r| r.error.is_none() && r.jobs == 600));
    let mean = |p: &str, l: f64| {
        rows.iter()
            .filter(|r| r.policy == p && r.load == Some(l))
            .map(|r| r.mean_bounded_slowdown)
            .sum::<f64>()
    };
    assert!(mean("easy", 0.85) < mean("fcfs", 0.85), "{rows:?}");
    let csv = to_csv(&rows, None);
    assert_eq!(csv.lines().count(), 9);
    let c = chart(&rows, "t", Metric::Bsld);
    assert_eq!(c.series.len(), 2);
    assert_eq!(c.series[0].points.len(), 2);
    // Same spec, same table.
    assert_eq!(to_csv(&run(&spec, &|| {}).unwrap(), None), csv);
}

/// Options serve the policies that take them; one that no policy of the sweep takes is
/// refused before anything runs.
#[test]
fn sweep_options_go_to_the_policies_that_take_them() {
    let model = GenOptions {
        jobs: 50,
        procs: 16,
        seed: 1,
        ..GenOptions::default()
    };
    let mut spec = SweepSpec {
        source: Source::Lublin {
            model: Box::new(model),
        },
        policies: vec!["easy".into(), "gang".into()],
        loads: vec![None],
        seeds: vec![1],
        semantics: Semantics::default(),
        engine: EngineOptions::default(),
        policy: PolicyOptions {
            opts: vec!["packing=first-fit".into()],
            ..PolicyOptions::default()
        },
        metrics: MetricsOptions::default(),
        stop: None,
        machine: None,
    };
    let rows = run(&spec, &|| {}).unwrap();
    assert!(rows.iter().all(|r| r.error.is_none()), "{rows:?}");
    spec.policy.opts.push("packng=best-fit".into());
    let err = run(&spec, &|| {}).unwrap_err().to_string();
    assert_eq!(
        err,
        "policy easy, gang: unknown option packng; known options: alternate, packing, \
         queue, relaxed, repack, variant"
    );
}

#[test]
fn a_sweep_cell_is_a_single_run() {
    let model = GenOptions {
        jobs: 300,
        procs: 32,
        seed: 9,
        ..GenOptions::default()
    };
    let spec = SweepSpec {
        source: Source::Lublin {
            model: Box::new(model),
        },
        policies: vec!["conservative".into()],
        loads: vec![Some(0.9)],
        seeds: vec![4],
        semantics: Semantics::default(),
        engine: EngineOptions::default(),
        policy: PolicyOptions::default(),
        metrics: MetricsOptions::default(),
        stop: None,
        machine: None,
    };
    let rows = run(&spec, &|| {}).unwrap();
    let cfg = policy_config(MachineShape::flat(32, 1), &spec.policy).unwrap();
    let single = run::run(&RunSpec {
        source: &spec.source,
        semantics: spec.semantics,
        load: Some(0.9),
        seed: Some(4),
        policy: "conservative",
        config: &cfg,
        engine: spec.engine.clone(),
        metrics: spec.metrics,
        observe: None,
    })
    .unwrap();
    let s = single.summary;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].jobs,
            rows[0].mean_wait_s,
            rows[0].mean_bounded_slowdown
        ),
        (s.jobs, s.mean_wait_s, s.mean_bounded_slowdown)
    );
}

/// Seed 001's sweeps: variants and parameter values of one policy as entries, on the
/// multi-core machine, with its figures in the rows, the CSV and the chart.
#[test]
fn multicore_entries_sweep_variants_and_parameters() {
    let spec = SweepSpec {
        source: Source::Lublin {
            model: Box::new(GenOptions::seed001(
                cosched_workload::lublin::ALPHA_W1,
                400,
                1,
            )),
        },
        policies: vec![
            "glomarc:variant=ssp".into(),
            "glomarc:block_size=4".into(),
            "glomarc:block_size=12".into(),
        ],
        loads: vec![None],
        seeds: vec![1, 2],
        semantics: Semantics::default(),
        engine: EngineOptions::default(),
        policy: PolicyOptions::default(),
        metrics: MetricsOptions::default(),
        stop: None,
        machine: Some(MachineShape {
            nodes: 128,
            sockets_per_node: 2,
            cores_per_socket: 2,
            mem_per_node_mib: None,
        }),
    };
    let rows = run(&spec, &|| {}).unwrap();
    assert_eq!(rows.len(), 6);
    assert!(
        rows.iter()
            .all(|r| r.error.is_none() && r.multicore.is_some()),
        "{rows:?}"
    );
    assert_eq!(rows[0].multicore.as_ref().unwrap().groups, 0.0);
    let csv = to_csv(&rows, None);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",groups,jobs_per_group")
    );
    let c = multicore_chart(&rows, "t");
    assert_eq!(c.x_label, "block_size");
    let glomarc_all = c.series.iter().find(|s| s.name == "glomarc all").unwrap();
    assert_eq!(
        glomarc_all.points.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![4.0, 12.0]
    );
    assert!(c.x_names.is_empty(), "a numeric option is an x value");
    // Schedulers side by side: x is their position, each tick named by its value.
    let mut side = rows.clone();
    for r in &mut side {
        r.policy = r.policy.replace("block_size=4", "variant=ssp");
        r.policy = r.policy.replace("block_size=12", "variant=glts");
    }
    let c = multicore_chart(&side, "t");
    assert_eq!(c.x_names, ["ssp", "glts"]);
    assert_eq!(
        c.series[0].points.iter().map(|p| p.0).collect::<Vec<_>>(),
        [1.0, 2.0]
    );
    let bad = SweepSpec {
        policies: vec!["glomarc:nokey".into()],
        ..spec
    };
    assert!(run(&bad, &|| {}).is_err());
}

/// Seed 002's stopping rule: a point gets more jobs until its interval is tight enough, and
/// never more than the warm-up batch plus `max_batches`.
#[test]
fn the_stopping_rule_adds_jobs_until_the_interval_is_tight() {
    let spec = |rel: f64| SweepSpec {
        source: Source::Feitelson97 {
            model: Box::new(cosched_workload::feitelson97::Options {
                jobs: 100,
                procs: 64,
                seed: 2,
                ..Default::default()
            }),
        },
        policies: vec!["gang".into()],
        loads: vec![Some(0.5)],
        seeds: vec![1],
        semantics: Semantics::default(),
        engine: EngineOptions::default(),
        policy: PolicyOptions::default(),
        metrics: MetricsOptions {
            batch_size: 50,
            ..MetricsOptions::default()
        },
        stop: Some(StopRule {
            rel,
            max_batches: 10,
        }),
        machine: None,
    };
    // Never satisfied: the cap, 50 × (10 + 1) jobs, from 200 (4 batches) by doubling.
    let capped = run(&spec(1e-9), &|| {}).unwrap();
    assert_eq!(capped[0].jobs, 550);
    // Easily satisfied: the first attempt, 4 batches (warm-up + 3).
    let loose = run(&spec(1e9), &|| {}).unwrap();
    assert_eq!(loose[0].jobs, 200);
    let ci = loose[0].bounded_slowdown_ci90.unwrap();
    assert!(ci <= 1e9 * loose[0].mean_bounded_slowdown);
}
