//! The process-level discrete-event simulator: BSP applications on a cluster of nodes × PEs,
//! each node scheduled by a `cosched-node` [`NodeScheduler`](cosched_node::NodeScheduler).
//!
//! - [`scenario`]: the TOML scenario (machine, costs, scheme parameters, workload, grid).
//! - [`workload`]: scenario workloads → BSP jobs (explicit, seed-004 mixes, Lublin model).
//! - [`hyper_erlang`]: the Hyper-Erlang distribution that draws a mix's open arrivals, job
//!   lengths and sizes.
//! - [`engine`]: the event loop: PEs, processes, network, FCFS admission up to the MPL.
//! - [`results`]: results (response, wait, message pending time, time breakdown, classes).
//! - [`spread`]: a sweep over seeds summarised per grid point and scheme (mean, range, and
//!   PROC's paired change against its base scheme).
//!
//! [`run`] simulates one scheme; [`sweep`] runs schemes × grid points in parallel.

pub mod engine;
pub mod hyper_erlang;
pub mod results;
pub mod scenario;
pub mod spread;
pub mod workload;

use std::collections::BTreeMap;

use cosched_node::Scheme;
use rayon::prelude::*;

pub use results::{Breakdown, ClassChange, RunResult};
pub use scenario::{Scenario, ScenarioError};

/// Simulates one scheme on a scenario. `class_history` keeps every FCS class change.
pub fn run(sc: &Scenario, scheme: Scheme, class_history: bool) -> Result<RunResult, ScenarioError> {
    let jobs = workload::build(sc)?;
    let mut r = engine::Engine::new(sc, scheme, &jobs, class_history).run();
    if sc.mix.as_ref().is_some_and(|m| m.slowdown) {
        r.set_slowdowns(&alone(sc, scheme, &jobs));
    }
    if sc.mix.as_ref().is_some_and(|m| m.batch_slowdown) {
        // BATCH runs the jobs one after another, each alone on the machine.
        let batch: f64 = alone(sc, Scheme::Fcfs, &jobs).iter().sum();
        r.batch_slowdown = (batch > 0.0).then(|| r.makespan_s / batch);
    }
    Ok(r)
}

/// Each job's runtime alone on the machine, under the same scheme, arriving at time zero:
/// the "dedicated system" of a slowdown. Jobs of one kind, size and length share one run —
/// their draws differ only by seed, which moves a runtime by far less than the sharing does.
fn alone(sc: &Scenario, scheme: Scheme, jobs: &[workload::AppJob]) -> Vec<f64> {
    let mut by_kind: BTreeMap<(String, u32, u32), f64> = BTreeMap::new();
    jobs.iter()
        .map(|j| {
            *by_kind
                .entry((j.label.clone(), j.procs, j.iterations))
                .or_insert_with(|| {
                    let mut solo = j.clone();
                    solo.arrival = cosched_core::Time::ZERO;
                    let r =
                        engine::Engine::new(sc, scheme, std::slice::from_ref(&solo), false).run();
                    r.jobs[0].runtime_s.unwrap_or(0.0)
                })
        })
        .collect()
}

/// Runs every scheme at every grid point of the scenario, in parallel; `progress` is called
/// after each run with (done, total). Results come back in (grid point, scheme) order.
pub fn sweep(
    sc: &Scenario,
    schemes: &[Scheme],
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<RunResult>, ScenarioError> {
    let points = sc.grid_points();
    let mut tasks = Vec::new();
    for p in &points {
        let applied = sc.with_params(p)?;
        for &s in schemes {
            tasks.push((p.clone(), applied.clone(), s));
        }
    }
    let total = tasks.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    tasks
        .into_par_iter()
        .map(
            |(params, scen, scheme): (BTreeMap<String, String>, Scenario, Scheme)| {
                let mut r = run(&scen, scheme, false)?;
                if !params.is_empty() {
                    r.params = Some(params);
                }
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                progress(n, total);
                Ok(r)
            },
        )
        .collect()
}
