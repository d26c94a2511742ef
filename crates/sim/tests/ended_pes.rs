//! A run that forgets ended jobs' PE sets (`EngineOptions::forget_ended_pes`) is the run that
//! keeps them, less those sets: the same records otherwise, the same events, decisions,
//! policy counters and usage, for every policy, flat or on multi-core nodes with slowdowns
//! (where Scojo-PECT also runs its forecasts), with and without operations. And the forgotten
//! sets are every ended job's: nothing that ended keeps one.

use cosched_core::{Dur, JobId, MachineShape, NodeId, PeSet, Slowdowns, Time};
use cosched_policy::{PolicyConfig, registry};
use cosched_sim::engine::{EngineOptions, Operation, SimJob, SimResult, simulate};

/// `n` jobs of up to `widest` PEs, some submitted together, some estimated past their runtime.
fn jobs(n: u64, widest: u32, seed: u64) -> Vec<SimJob> {
    let mut x = seed;
    let mut rnd = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut t = 0;
    (0..n)
        .map(|k| {
            t += rnd(3) * 40;
            let runtime = Dur::from_secs(1 + rnd(900) as i64);
            let estimate = runtime + Dur::from_secs(rnd(600) as i64);
            let procs = 1 + rnd(u64::from(widest)) as u32;
            SimJob::with_estimate(100 + k, Time::from_secs(t as i64), procs, runtime, estimate)
        })
        .collect()
}

fn run(policy: &str, m: MachineShape, jobs: &[SimJob], opts: EngineOptions) -> SimResult {
    let mut p = registry::build(policy, &PolicyConfig::new(m)).unwrap();
    simulate(m, jobs, p.as_mut(), opts).unwrap()
}

/// `forgot` is `kept` with every ended job's PE set emptied; the runs were the same.
fn same_but_pes(policy: &str, kept: &SimResult, forgot: &SimResult) {
    assert_eq!(kept.records.len(), forgot.records.len(), "{policy}");
    let mut dropped = 0;
    for (k, f) in kept.records.iter().zip(&forgot.records) {
        let mut expected = k.clone();
        if k.end.is_some() {
            dropped += usize::from(!k.pes.is_empty());
            expected.pes = PeSet::new();
        }
        assert_eq!(f, &expected, "{policy}, job {}", k.id);
    }
    assert!(
        dropped > 0,
        "{policy}: some ended job had PEs, or this proves nothing"
    );
    assert_eq!(
        (kept.events, kept.decisions, kept.unfinished),
        (forgot.events, forgot.decisions, forgot.unfinished),
        "{policy}"
    );
    assert_eq!(kept.policy_stats, forgot.policy_stats, "{policy}");
    assert_eq!(kept.usage, forgot.usage, "{policy}");
    assert_eq!(kept.runtimes, forgot.runtimes, "{policy}");
}

#[test]
fn flat_policies_run_the_same_without_ended_pes() {
    let m = MachineShape::flat(32, 1);
    let jobs = jobs(300, 32, 7);
    for policy in ["fcfs", "easy", "conservative", "gang", "t3d"] {
        let kept = run(policy, m, &jobs, EngineOptions::default());
        let forgot = run(
            policy,
            m,
            &jobs,
            EngineOptions {
                forget_ended_pes: true,
                ..EngineOptions::default()
            },
        );
        same_but_pes(policy, &kept, &forgot);
    }
}

#[test]
fn operations_run_the_same_without_ended_pes() {
    let m = MachineShape::flat(32, 1);
    let jobs = jobs(200, 24, 11);
    let operations = vec![
        (Time::from_secs(600), Operation::Hold(JobId(110))),
        (Time::from_secs(900), Operation::NodeDown(NodeId(3))),
        (Time::from_secs(1500), Operation::Cancel(JobId(130))),
        (Time::from_secs(2000), Operation::NodeUp(NodeId(3))),
        (Time::from_secs(2500), Operation::Release(JobId(110))),
    ];
    for policy in ["easy", "gang"] {
        let opts = |forget| EngineOptions {
            operations: operations.clone(),
            forget_ended_pes: forget,
            ..EngineOptions::default()
        };
        let kept = run(policy, m, &jobs, opts(false));
        let forgot = run(policy, m, &jobs, opts(true));
        same_but_pes(policy, &kept, &forgot);
    }
}

#[test]
fn multicore_policies_run_the_same_without_ended_pes() {
    let m = MachineShape {
        nodes: 16,
        sockets_per_node: 2,
        cores_per_socket: 2,
        mem_per_node_mib: None,
    };
    let jobs = jobs(250, 40, 3);
    for policy in ["scojo-pect", "glomarc"] {
        let opts = |forget| EngineOptions {
            slowdowns: Some(Slowdowns::new(5)),
            forget_ended_pes: forget,
            ..EngineOptions::default()
        };
        let kept = run(policy, m, &jobs, opts(false));
        let forgot = run(policy, m, &jobs, opts(true));
        same_but_pes(policy, &kept, &forgot);
    }
}
