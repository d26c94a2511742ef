//! Figures of time-sharing runs, gathered by watching a policy from outside.
//!
//! [`Observer`] wraps any policy and passes every event and decision through unchanged, while
//! it keeps per-job counters (uninterrupted runs — "quanta" —, preemptions, suspensions), the
//! number of multi-context switches, and, inside an optional time window, the sequence of
//! running sets that [`crate::matrix_svg`] draws. [`TimeshareReport`] turns the counters into
//! the figures of seed 002 §4.7-4.8: slowdown and bounded slowdown of interactive jobs
//! (Fig. 12), preemption likelihood by job size (Fig. 13), the histogram of preemptions per
//! job (Fig. 14) and average quantum length by job size (Fig. 15).
//!
//! Which jobs are interactive is decided by the T3D class mapping of the same policy
//! configuration (`queues`, `default_class`; by default queue 0 is interactive), whatever the
//! policy, so gang and batch runs of one trace can be compared class by class.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use cosched_core::{Dur, JobId, PeSet, Time};
use cosched_policy::t3d::T3dConfig;
use cosched_policy::{Decision, Event, MatrixView, Policy};

use crate::metrics::job_metrics;
use cosched_sim::SimResult;

/// Counters of one job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobCounters {
    pub procs: u32,
    pub queue: Option<u32>,
    pub class: Option<String>,
    /// Uninterrupted runs.
    pub quanta: u32,
    pub run: Dur,
    pub preemptions: u32,
    pub suspensions: u32,
    running_since: Option<Time>,
    pes: PeSet,
}

/// One interval of the matrix window: who ran where, and which slot was active.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub from: Time,
    pub to: Time,
    pub active: Option<u32>,
    pub running: Vec<(JobId, PeSet)>,
}

/// What [`Observer`] records for the matrix drawing.
#[derive(Clone, Debug, Default)]
pub struct MatrixRecord {
    pub from: Time,
    pub to: Time,
    /// The matrix when the window opened (or at its first event).
    pub first: Option<(Time, MatrixView)>,
    pub intervals: Vec<Interval>,
    /// Intervals dropped beyond the drawing limit.
    pub dropped: usize,
}

/// Intervals kept for a drawing; more would not be readable.
pub const MAX_INTERVALS: usize = 400;

/// A policy wrapper that records time-sharing figures.
pub struct Observer {
    inner: Box<dyn Policy>,
    pub jobs: HashMap<JobId, JobCounters>,
    /// Instants with a timer at which at least one job was suspended or preempted.
    pub context_switches: u64,
    pub matrix: Option<MatrixRecord>,
    last_running: Vec<(JobId, PeSet)>,
    /// A timer was observed since the last decision.
    timer_fired: bool,
}

impl Observer {
    pub fn new(inner: Box<dyn Policy>) -> Observer {
        Observer {
            inner,
            jobs: HashMap::new(),
            context_switches: 0,
            matrix: None,
            last_running: Vec::new(),
            timer_fired: false,
        }
    }

    /// Also record the running sets between `from` and `to` for a matrix drawing.
    pub fn with_matrix_window(mut self, from: Time, to: Time) -> Observer {
        self.matrix = Some(MatrixRecord {
            from,
            to,
            ..MatrixRecord::default()
        });
        self
    }

    fn stop_run(c: &mut JobCounters, now: Time) {
        if let Some(s) = c.running_since.take() {
            c.quanta += 1;
            c.run += now - s;
        }
    }

    fn apply(&mut self, now: Time, d: &Decision) {
        match d {
            Decision::Start { job, pes, .. } => {
                if let Some(c) = self.jobs.get_mut(job) {
                    c.pes = pes.clone();
                    c.running_since = Some(now);
                }
            }
            Decision::Place { job, pes, .. } => {
                if let Some(c) = self.jobs.get_mut(job) {
                    c.pes = pes.clone();
                }
            }
            Decision::Resume { job } => {
                if let Some(c) = self.jobs.get_mut(job) {
                    c.running_since = Some(now);
                }
            }
            Decision::Suspend { job } => {
                if let Some(c) = self.jobs.get_mut(job) {
                    Observer::stop_run(c, now);
                    c.suspensions += 1;
                }
            }
            Decision::Preempt { job } => {
                if let Some(c) = self.jobs.get_mut(job) {
                    Observer::stop_run(c, now);
                    c.preemptions += 1;
                    c.pes = PeSet::new();
                }
            }
            Decision::Kill { .. } | Decision::Reject { .. } | Decision::SetTimer { .. } => {}
        }
    }

    fn record_matrix(&mut self, now: Time) {
        let Some(rec) = &self.matrix else { return };
        if now < rec.from || now > rec.to {
            return;
        }
        let mut running: Vec<(JobId, PeSet)> = self
            .jobs
            .iter()
            .filter(|(_, c)| c.running_since.is_some())
            .map(|(id, c)| (*id, c.pes.clone()))
            .collect();
        running.sort_by_key(|r| r.0);
        let active = self.inner.matrix().and_then(|m| m.active);
        let first_needed = rec.first.is_none();
        let snapshot = if first_needed {
            self.inner.matrix()
        } else {
            None
        };
        let rec = self.matrix.as_mut().expect("checked above");
        if let Some(m) = snapshot {
            rec.first = Some((now, m));
        }
        let same = rec
            .intervals
            .last()
            .is_some_and(|l| l.running == running && l.active == active);
        if same {
            return;
        }
        if let Some(last) = rec.intervals.last_mut() {
            last.to = now;
        }
        // An interval that lasted no time (decisions at one instant) is replaced.
        if rec.intervals.last().is_some_and(|l| l.from == now) {
            rec.intervals.pop();
        }
        if rec.intervals.len() >= MAX_INTERVALS {
            rec.dropped += 1;
            return;
        }
        rec.intervals.push(Interval {
            from: now,
            to: rec.to,
            active,
            running: running.clone(),
        });
        self.last_running = running;
    }

    /// Closes the matrix window at the end of a run.
    pub fn finish(&mut self, end: Time) {
        if let Some(rec) = &mut self.matrix
            && let Some(last) = rec.intervals.last_mut()
        {
            last.to = last.to.min(end.max(last.from));
        }
    }
}

impl Policy for Observer {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn observe(&mut self, now: Time, event: Event) {
        match &event {
            Event::Submitted(req) => {
                self.jobs.insert(
                    req.id,
                    JobCounters {
                        procs: req.procs,
                        queue: req.queue,
                        class: req.class.clone(),
                        ..JobCounters::default()
                    },
                );
            }
            Event::Ended(id) => {
                if let Some(c) = self.jobs.get_mut(id) {
                    Observer::stop_run(c, now);
                }
            }
            Event::Timer(_) => self.timer_fired = true,
            _ => {}
        }
        self.inner.observe(now, event);
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        let before = out.len();
        self.inner.decide(now, out);
        let mut stopped = false;
        for d in &out[before..] {
            stopped |= matches!(d, Decision::Suspend { .. } | Decision::Preempt { .. });
            self.apply(now, d);
        }
        // A context switch is a timer's instant that stops jobs.
        if std::mem::take(&mut self.timer_fired) && stopped {
            self.context_switches += 1;
        }
        self.record_matrix(now);
    }

    fn queue(&self) -> Vec<JobId> {
        self.inner.queue()
    }

    fn matrix(&self) -> Option<MatrixView> {
        self.inner.matrix()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        self.inner.stats()
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn set_forecaster(&mut self, forecaster: cosched_policy::forecast::SharedForecaster) {
        self.inner.set_forecaster(forecaster);
    }

    fn explain(&self, job: JobId) -> Option<String> {
        self.inner.explain(job)
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(Observer {
            inner: self.inner.boxed_clone(),
            jobs: self.jobs.clone(),
            context_switches: self.context_switches,
            matrix: self.matrix.clone(),
            last_running: self.last_running.clone(),
            timer_fired: self.timer_fired,
        })
    }
}

/// One bucket of a histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    pub label: String,
    pub count: usize,
}

/// Figures by job size (powers of two).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeRow {
    pub size: String,
    pub jobs: usize,
    /// Fraction of jobs preempted at least once (Fig. 13).
    pub preempted_fraction: f64,
    /// Mean uninterrupted run, over preempted jobs and over all jobs, in seconds (Fig. 15).
    pub mean_quantum_preempted_s: Option<f64>,
    pub mean_quantum_all_s: Option<f64>,
}

/// The report of a time-sharing run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeshareReport {
    pub jobs: usize,
    pub interactive_jobs: usize,
    pub interactive_mean_slowdown: f64,
    pub interactive_mean_bounded_slowdown: f64,
    /// Total response over total runtime of interactive jobs (the seed's "1.18").
    pub interactive_response_over_runtime: f64,
    /// The worst interactive slowdown (the seed's one-second job delayed 23 minutes: 1371).
    pub interactive_max_slowdown: f64,
    pub interactive_slowdown_hist: Vec<Bin>,
    pub interactive_bounded_slowdown_hist: Vec<Bin>,
    pub preemptions_total: u64,
    pub preempted_jobs_fraction: f64,
    pub max_preemptions: u32,
    pub preemptions_hist: Vec<Bin>,
    pub by_size: Vec<SizeRow>,
    pub suspensions_total: u64,
    pub context_switches: u64,
    pub mean_quantum_s: f64,
}

fn size_bucket(procs: u32) -> (u32, String) {
    let hi = procs.max(1).next_power_of_two();
    let lo = hi / 2 + 1;
    let label = if hi <= 1 {
        "1".to_string()
    } else if lo == hi {
        hi.to_string()
    } else {
        format!("{lo}-{hi}")
    };
    (hi, label)
}

fn hist(values: impl Iterator<Item = f64>) -> Vec<Bin> {
    // Unit-wide bins from 1 to 10, then one open bin, as in Fig. 12.
    let mut counts = [0usize; 10];
    for v in values {
        let i = ((v.max(1.0) - 1.0).floor() as usize).min(9);
        counts[i] += 1;
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &count)| Bin {
            label: if i == 9 {
                ">=10".to_string()
            } else {
                format!("{}-{}", i + 1, i + 2)
            },
            count,
        })
        .collect()
}

impl TimeshareReport {
    /// Builds the report from a run's records and the observer's counters; `classes` says
    /// which jobs are interactive, `threshold` is the bounded-slowdown threshold.
    pub fn build(
        result: &SimResult,
        obs: &Observer,
        classes: &T3dConfig,
        threshold: Dur,
    ) -> TimeshareReport {
        let interactive = classes.class_index("interactive");
        let mut inter_sld = Vec::new();
        let mut inter_bsld = Vec::new();
        let (mut inter_resp, mut inter_run) = (0.0, 0.0);
        let mut by_size: BTreeMap<u32, (String, Vec<&JobCounters>)> = BTreeMap::new();
        let mut finished = 0;
        for (rec, &runtime) in result.records.iter().zip(&result.runtimes) {
            let (Some(start), Some(end)) = (rec.start, rec.end) else {
                continue;
            };
            let Some(c) = obs.jobs.get(&rec.id) else {
                continue;
            };
            finished += 1;
            let req = {
                let mut r = cosched_policy::JobRequest::new(rec.id, rec.submit, rec.procs, runtime);
                r.queue = c.queue;
                r.class = c.class.clone();
                r
            };
            if interactive.is_some() && Some(classes.class_of(&req)) == interactive {
                let m = job_metrics(rec.submit, start, end, runtime, threshold);
                inter_sld.push(m.slowdown);
                inter_bsld.push(m.bounded_slowdown);
                inter_resp += m.response_s;
                inter_run += runtime.as_secs_f64();
            }
            let (key, label) = size_bucket(c.procs);
            by_size
                .entry(key)
                .or_insert_with(|| (label, Vec::new()))
                .1
                .push(c);
        }
        let all: Vec<&JobCounters> = by_size
            .values()
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let mean_quantum = |jobs: &[&JobCounters]| -> Option<f64> {
            let q: u64 = jobs.iter().map(|c| c.quanta as u64).sum();
            (q > 0).then(|| jobs.iter().map(|c| c.run.as_secs_f64()).sum::<f64>() / q as f64)
        };
        let mut pre_hist = [0usize; 12];
        for c in &all {
            pre_hist[(c.preemptions as usize).min(11)] += 1;
        }
        let preempted = all.iter().filter(|c| c.preemptions > 0).count();
        TimeshareReport {
            jobs: finished,
            interactive_jobs: inter_sld.len(),
            interactive_mean_slowdown: mean(&inter_sld),
            interactive_mean_bounded_slowdown: mean(&inter_bsld),
            interactive_response_over_runtime: if inter_run > 0.0 {
                inter_resp / inter_run
            } else {
                0.0
            },
            interactive_max_slowdown: inter_sld.iter().copied().fold(0.0, f64::max),
            interactive_slowdown_hist: hist(inter_sld.iter().copied()),
            interactive_bounded_slowdown_hist: hist(inter_bsld.iter().copied()),
            preemptions_total: all.iter().map(|c| c.preemptions as u64).sum(),
            preempted_jobs_fraction: if all.is_empty() {
                0.0
            } else {
                preempted as f64 / all.len() as f64
            },
            max_preemptions: all.iter().map(|c| c.preemptions).max().unwrap_or(0),
            preemptions_hist: pre_hist
                .iter()
                .enumerate()
                .map(|(i, &count)| Bin {
                    label: if i == 11 { ">10".into() } else { i.to_string() },
                    count,
                })
                .collect(),
            by_size: by_size
                .values()
                .map(|(label, jobs)| {
                    let pre: Vec<&JobCounters> =
                        jobs.iter().copied().filter(|c| c.preemptions > 0).collect();
                    SizeRow {
                        size: label.clone(),
                        jobs: jobs.len(),
                        preempted_fraction: pre.len() as f64 / jobs.len() as f64,
                        mean_quantum_preempted_s: mean_quantum(&pre),
                        mean_quantum_all_s: mean_quantum(jobs),
                    }
                })
                .collect(),
            suspensions_total: all.iter().map(|c| c.suspensions as u64).sum(),
            context_switches: obs.context_switches,
            mean_quantum_s: mean_quantum(&all).unwrap_or(0.0),
        }
    }

    /// A plain-text rendering for terminals.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        use std::fmt::Write;
        let _ = writeln!(s, "time sharing");
        let _ = writeln!(
            s,
            "  interactive jobs   {} (mean slowdown {:.2}, bounded {:.2}, max {:.0}, total response/runtime {:.2})",
            self.interactive_jobs,
            self.interactive_mean_slowdown,
            self.interactive_mean_bounded_slowdown,
            self.interactive_max_slowdown,
            self.interactive_response_over_runtime
        );
        // The histograms of Figs. 12 and 14, one line each: "label:count".
        let line = |bins: &[Bin]| {
            bins.iter()
                .map(|b| format!("{}:{}", b.label, b.count))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            s,
            "  slowdown hist      {}",
            line(&self.interactive_slowdown_hist)
        );
        let _ = writeln!(
            s,
            "  bounded sld hist   {}",
            line(&self.interactive_bounded_slowdown_hist)
        );
        let _ = writeln!(
            s,
            "  preemptions        {} ({:.1} % of jobs preempted, at most {} for one job)",
            self.preemptions_total,
            100.0 * self.preempted_jobs_fraction,
            self.max_preemptions
        );
        let _ = writeln!(s, "  preemptions hist   {}", line(&self.preemptions_hist));
        let _ = writeln!(
            s,
            "  suspensions        {}, context switches {}",
            self.suspensions_total, self.context_switches
        );
        let _ = writeln!(s, "  mean quantum       {:.1} s", self.mean_quantum_s);
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
        let rows = self.by_size.iter().map(|r| {
            vec![
                r.size.clone(),
                r.jobs.to_string(),
                format!("{:.1}%", 100.0 * r.preempted_fraction),
                f(r.mean_quantum_preempted_s),
                f(r.mean_quantum_all_s),
            ]
        });
        let header = [
            "size",
            "jobs",
            "preempted",
            "quantum(pre) s",
            "quantum(all) s",
        ];
        for line in crate::table::table(&header, 1, rows).lines() {
            let _ = writeln!(s, " {line}");
        }
        s
    }
}
