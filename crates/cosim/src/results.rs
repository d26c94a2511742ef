//! What a run reports: the response and wait times per job, the mean message pending time, and
//! the breakdown of PE time into compute, spin, idle, context switch and overhead. Serialises
//! to the JSON document of `cosched cosim --json`.

use std::collections::BTreeMap;

use cosched_core::{Dur, Time};
use cosched_node::Scheme;
use serde::Serialize;

use crate::workload::AppJob;

/// PE time by use. Per PE (and summed per node) the five parts add up to the elapsed time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breakdown {
    pub compute: Dur,
    pub spin: Dur,
    pub idle: Dur,
    pub context_switch: Dur,
    pub overhead: Dur,
}

impl Breakdown {
    pub fn total(&self) -> Dur {
        self.compute + self.spin + self.idle + self.context_switch + self.overhead
    }
    pub fn plus(&self, o: &Breakdown) -> Breakdown {
        Breakdown {
            compute: self.compute + o.compute,
            spin: self.spin + o.spin,
            idle: self.idle + o.idle,
            context_switch: self.context_switch + o.context_switch,
            overhead: self.overhead + o.overhead,
        }
    }
    /// Fractions of the total (all zero for an empty breakdown).
    pub fn fractions(&self) -> Fractions {
        let t = self.total().0 as f64;
        let f = |d: Dur| if t > 0.0 { d.0 as f64 / t } else { 0.0 };
        Fractions {
            compute: f(self.compute),
            spin: f(self.spin),
            idle: f(self.idle),
            context_switch: f(self.context_switch),
            overhead: f(self.overhead),
        }
    }
}

/// [`Breakdown`] as fractions summing to 1.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Fractions {
    pub compute: f64,
    pub spin: f64,
    pub idle: f64,
    pub context_switch: f64,
    pub overhead: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcResult {
    pub rank: u32,
    pub node: u32,
    pub pe: u32,
    /// Final FCS class (`CS`, `F`, `DC`); null for other schemes.
    pub class: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JobResult {
    pub id: u32,
    pub kind: String,
    pub procs: u32,
    pub work_s: f64,
    pub arrival_s: f64,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    /// End − arrival (null if unfinished at the time limit).
    pub response_s: Option<f64>,
    /// Start − arrival.
    pub wait_s: Option<f64>,
    /// End − start.
    pub runtime_s: Option<f64>,
    /// Response over the job's runtime alone on the machine (with `[mix] slowdown`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    pub processes: Vec<ProcResult>,
}

impl JobResult {
    pub fn new(
        spec: &AppJob,
        start: Option<Time>,
        end: Option<Time>,
        processes: Vec<ProcResult>,
    ) -> JobResult {
        let s = |t: Time| t.as_secs_f64();
        JobResult {
            id: spec.id,
            kind: spec.label.clone(),
            procs: spec.procs,
            work_s: spec.work.as_secs_f64(),
            arrival_s: s(spec.arrival),
            start_s: start.map(s),
            end_s: end.map(s),
            response_s: end.map(|e| e.since(spec.arrival).as_secs_f64()),
            wait_s: start.map(|st| st.since(spec.arrival).as_secs_f64()),
            runtime_s: start.zip(end).map(|(st, e)| e.since(st).as_secs_f64()),
            slowdown: None,
            processes,
        }
    }
}

/// One FCS class change (the `--class-history` file).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ClassChange {
    pub time_s: f64,
    pub job: u32,
    pub rank: u32,
    pub class: &'static str,
}

/// Mean runtime and wait of a group of jobs (short / long, seed 000 §5.4).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupStats {
    pub jobs: usize,
    pub mean_runtime_s: f64,
    pub mean_wait_s: f64,
    pub mean_response_s: f64,
}

/// Breakdown of one node, in seconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeTimes {
    pub compute_s: f64,
    pub spin_s: f64,
    pub idle_s: f64,
    pub context_switch_s: f64,
    pub overhead_s: f64,
}

/// The result of one scheme on one scenario (one grid point).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunResult {
    pub scheme: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<BTreeMap<String, String>>,
    pub mean_response_s: f64,
    pub mean_wait_s: f64,
    /// Mean time from a message's arrival at the NIC to its consumption.
    pub msg_pending_s: f64,
    pub breakdown: Fractions,
    pub makespan_s: f64,
    pub finished_jobs: usize,
    /// True if the run stopped because no process could make progress any more (a bug or an
    /// impossible scenario), rather than because every job finished or the time limit came.
    pub stalled: bool,
    pub events: u64,
    /// Jobs with less than 0.6 s of work (one real minute compressed 100×) and the others.
    pub short: GroupStats,
    pub long: GroupStats,
    /// Mean and coefficient of variation (standard deviation over mean) of the finished jobs'
    /// slowdowns (with `[mix] slowdown`; seed 004 Fig. 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_slowdown: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown_cv: Option<f64>,
    /// Makespan over the sum of the jobs' runtimes alone (with `[mix] batch_slowdown`;
    /// seed 004 Fig. 7's "slowdown relative to BATCH").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_slowdown: Option<f64>,
    pub jobs: Vec<JobResult>,
    #[serde(skip)]
    pub node_breakdown: Vec<Breakdown>,
    #[serde(skip)]
    pub makespan: Dur,
    #[serde(skip)]
    pub class_history: Option<Vec<ClassChange>>,
}

/// Jobs below this much work are "short" in the seed-000 comparison.
pub const SHORT_WORK: Dur = Dur::from_millis(600);

impl RunResult {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scheme: Scheme,
        end: Time,
        events: u64,
        msg_pending_s: f64,
        total: Breakdown,
        nodes: Vec<Breakdown>,
        jobs: Vec<JobResult>,
        history: Option<Vec<ClassChange>>,
    ) -> RunResult {
        let done: Vec<&JobResult> = jobs.iter().filter(|j| j.response_s.is_some()).collect();
        let mean = |xs: &mut dyn Iterator<Item = f64>| {
            let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
            if n > 0 { s / n as f64 } else { 0.0 }
        };
        let group = |short: bool| {
            let g: Vec<&&JobResult> = done
                .iter()
                .filter(|j| (j.work_s < SHORT_WORK.as_secs_f64()) == short)
                .collect();
            GroupStats {
                jobs: g.len(),
                mean_runtime_s: mean(&mut g.iter().filter_map(|j| j.runtime_s)),
                mean_wait_s: mean(&mut g.iter().filter_map(|j| j.wait_s)),
                mean_response_s: mean(&mut g.iter().filter_map(|j| j.response_s)),
            }
        };
        RunResult {
            scheme: scheme.name().to_string(),
            params: None,
            mean_response_s: mean(&mut done.iter().filter_map(|j| j.response_s)),
            mean_wait_s: mean(&mut done.iter().filter_map(|j| j.wait_s)),
            msg_pending_s,
            breakdown: total.fractions(),
            makespan_s: end.as_secs_f64(),
            finished_jobs: done.len(),
            stalled: false,
            events,
            short: group(true),
            long: group(false),
            mean_slowdown: None,
            slowdown_cv: None,
            batch_slowdown: None,
            node_breakdown: nodes,
            makespan: end.since(Time::ZERO),
            class_history: history,
            jobs,
        }
    }

    /// Sets each job's slowdown from its runtime alone (`alone`, seconds, per job in order)
    /// and the mean and coefficient of variation over the finished jobs.
    pub fn set_slowdowns(&mut self, alone: &[f64]) {
        let mut xs = Vec::new();
        for (j, &a) in self.jobs.iter_mut().zip(alone) {
            j.slowdown = j.response_s.filter(|_| a > 0.0).map(|r| r / a);
            xs.extend(j.slowdown);
        }
        if xs.is_empty() {
            return;
        }
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        self.mean_slowdown = Some(mean);
        self.slowdown_cv = Some(if mean > 0.0 { var.sqrt() / mean } else { 0.0 });
    }

    /// Per-node breakdown in seconds.
    pub fn node_times(&self) -> Vec<NodeTimes> {
        self.node_breakdown
            .iter()
            .map(|b| NodeTimes {
                compute_s: b.compute.as_secs_f64(),
                spin_s: b.spin.as_secs_f64(),
                idle_s: b.idle.as_secs_f64(),
                context_switch_s: b.context_switch.as_secs_f64(),
                overhead_s: b.overhead.as_secs_f64(),
            })
            .collect()
    }
}
