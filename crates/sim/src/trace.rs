//! From SWF records to simulator jobs, under explicit trace semantics, and back to SWF.
//!
//! The defaults ([`Semantics::default`]) are the ones other simulators use, so results can be
//! set beside theirs:
//! - size: allocated processors (field 5), or requested ones (field 8) when unknown;
//! - jobs with an unknown or non-positive runtime or size are left out and counted;
//! - estimate: the requested time (field 9), or the runtime when that is unknown or not
//!   positive; under [`Estimates::Exact`] the runtime itself ("perfect information");
//! - jobs run their recorded runtime and are never killed at their estimate.
//!
//! Each can be changed ([`SizeField`], [`Estimates`], [`Semantics::kill_at_estimate`]).

use std::io::{self, Write};
use std::sync::Arc;

use serde::Serialize;

use cosched_core::{Dur, JobId, JobRecord};
use cosched_policy::JobRequest;
use cosched_workload::swf::{SwfHeader, SwfRecord, write_trace};

use crate::SimJob;

/// Which SWF field gives a job's size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeField {
    /// Allocated processors (field 5), else requested (field 8).
    #[default]
    Alloc,
    /// Requested processors (field 8), else allocated (field 5).
    Req,
}

impl std::str::FromStr for SizeField {
    type Err = String;
    fn from_str(s: &str) -> Result<SizeField, String> {
        match s {
            "alloc" => Ok(SizeField::Alloc),
            "req" => Ok(SizeField::Req),
            _ => Err(format!("unknown size field {s:?} (use alloc or req)")),
        }
    }
}

/// What the policy is told about runtimes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Estimates {
    /// The trace's requested time (field 9), else the runtime.
    #[default]
    Trace,
    /// The exact runtime.
    Exact,
}

impl std::str::FromStr for Estimates {
    type Err = String;
    fn from_str(s: &str) -> Result<Estimates, String> {
        match s {
            "trace" => Ok(Estimates::Trace),
            "exact" => Ok(Estimates::Exact),
            _ => Err(format!(
                "unknown estimate source {s:?} (use trace or exact)"
            )),
        }
    }
}

/// How trace records become jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Semantics {
    pub size: SizeField,
    pub estimates: Estimates,
    /// Kill jobs when they reach their estimate (their runtime is cut there and they end as
    /// timed out). Off by default: jobs run their recorded runtime.
    pub kill_at_estimate: bool,
}

/// Jobs left out of a trace, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Unknown or non-positive runtime.
    pub runtime: usize,
    /// Unknown or non-positive size.
    pub size: usize,
    /// Larger than the machine.
    pub oversize: usize,
    /// Unknown submit time.
    pub submit: usize,
}

impl Skipped {
    pub fn total(&self) -> usize {
        self.runtime + self.size + self.oversize + self.submit
    }
}

/// A workload ready to simulate.
#[derive(Clone, Debug)]
pub struct Workload {
    pub jobs: Vec<SimJob>,
    /// The records the jobs came from, shared with the `cosched_report::setup::Source` rather than
    /// copied: a record is 240 bytes, and copying a quarter of a million of them (and faulting
    /// in the pages) was a large share of preparing a long trace.
    origin: Arc<Vec<SwfRecord>>,
    /// Where each job's record sits in `origin` (same order as `jobs`).
    kept: Vec<u32>,
    pub skipped: Skipped,
    /// Kept jobs whose estimate fell back to the runtime (no usable requested time).
    pub estimate_from_runtime: usize,
    /// Kept jobs whose runtime exceeds their estimate.
    pub overrunning: usize,
}

impl Workload {
    /// The trace record of the job at `i` (of [`Workload::jobs`]) as read: its user, queue and
    /// the other fields the simulation does not change.
    pub fn source_record(&self, i: usize) -> &SwfRecord {
        &self.origin[self.kept[i] as usize]
    }

    /// The record of the job at `i` as simulated: the source's, with the size (allocated and
    /// requested processors) and the submit time the job was given.
    pub fn record(&self, i: usize) -> SwfRecord {
        let mut r = self.source_record(i).clone();
        let req = &self.jobs[i].req;
        r.submit = Some(req.submit);
        // One size for everything downstream (load computation, SWF output).
        r.alloc_procs = Some(req.procs);
        r.req_procs = Some(req.procs);
        r
    }

    /// The records of every job as simulated (see [`Workload::record`]).
    pub fn records(&self) -> Vec<SwfRecord> {
        (0..self.jobs.len()).map(|i| self.record(i)).collect()
    }
}

/// Converts records into jobs for a machine of `procs` PEs; with `load`, rescales the kept
/// jobs' inter-arrival times to that offered load first.
pub fn prepare(records: &[SwfRecord], procs: u32, sem: &Semantics, load: Option<f64>) -> Workload {
    prepare_shared(&Arc::new(records.to_vec()), procs, sem, load)
}

/// [`prepare`] of records the workload may keep a reference to instead of a copy.
pub fn prepare_shared(
    records: &Arc<Vec<SwfRecord>>,
    procs: u32,
    sem: &Semantics,
    load: Option<f64>,
) -> Workload {
    let mut intake = Intake::new(procs, sem);
    // (index in `records`, size) of each kept job.
    let mut kept = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        if let Some(size) = intake.size(r) {
            kept.push((i as u32, size));
        }
    }
    let (origin, kept) = match load {
        // Rescaling moves submit times: the kept records are copied and rescaled (the load
        // computation reads the size used).
        Some(load) => {
            let mut own: Vec<SwfRecord> = kept
                .iter()
                .map(|&(i, size)| {
                    let mut r = records[i as usize].clone();
                    r.alloc_procs = Some(size);
                    r.req_procs = Some(size);
                    r
                })
                .collect();
            cosched_workload::transform::rescale_load(&mut own, procs, load);
            let kept = (0..own.len() as u32).map(|i| (i, None)).collect();
            (Arc::new(own), kept)
        }
        None => {
            let kept = kept.into_iter().map(|(i, s)| (i, Some(s))).collect();
            (Arc::clone(records), kept)
        }
    };
    let kept: Vec<(u32, Option<u32>)> = kept;
    let jobs = kept
        .iter()
        .map(|&(i, size)| intake.job(&origin[i as usize], size))
        .collect();
    intake.workload(jobs, kept.into_iter().map(|k| k.0).collect(), origin)
}

/// Records becoming jobs one at a time, with the count of what was left out and why:
/// [`prepare_shared`] takes a whole trace through it, a run that simulates while the trace
/// is read (`cosched_report::run::run_read`) each piece as it is parsed, so the two cannot differ.
#[derive(Clone, Debug)]
pub struct Intake {
    procs: u32,
    sem: Semantics,
    skipped: Skipped,
    from_runtime: usize,
    overrunning: usize,
}

impl Intake {
    pub fn new(procs: u32, sem: &Semantics) -> Intake {
        Intake {
            procs,
            sem: *sem,
            skipped: Skipped::default(),
            from_runtime: 0,
            overrunning: 0,
        }
    }

    /// The size of the job `r` gives, or `None` (counted) if the job is left out.
    pub fn size(&mut self, r: &SwfRecord) -> Option<u32> {
        let size = match self.sem.size {
            SizeField::Alloc => r.alloc_procs.filter(|&p| p > 0).or(r.req_procs),
            SizeField::Req => r.req_procs.filter(|&p| p > 0).or(r.alloc_procs),
        };
        let Some(size) = size.filter(|&p| p > 0) else {
            self.skipped.size += 1;
            return None;
        };
        if r.run.is_none_or(|d| d <= Dur::ZERO) {
            self.skipped.runtime += 1;
            return None;
        }
        if size > self.procs {
            self.skipped.oversize += 1;
            return None;
        }
        if r.submit.is_none() {
            self.skipped.submit += 1;
            return None;
        }
        Some(size)
    }

    /// The job of a kept record; `size` as [`Intake::size`] gave it, or `None` for the
    /// record's allocated processors (a rescaled copy carries its size there).
    pub fn job(&mut self, r: &SwfRecord, size: Option<u32>) -> SimJob {
        let runtime = r.run.expect("filtered");
        let requested = r.req_time.filter(|&d| d > Dur::ZERO);
        if requested.is_none() {
            self.from_runtime += 1;
        }
        let estimate = match self.sem.estimates {
            Estimates::Exact => runtime,
            Estimates::Trace => requested.unwrap_or(runtime),
        };
        if runtime > estimate {
            self.overrunning += 1;
        }
        let mut req = JobRequest::new(
            JobId(r.job),
            r.submit.expect("filtered"),
            size.or(r.alloc_procs).expect("set"),
            estimate,
        );
        req.queue = r.queue;
        req.user = r.user;
        req.mem_per_pe_kib = r.req_mem_kib.filter(|&m| m > 0.0).map(|m| m as u64);
        SimJob {
            req,
            runtime,
            limit: self.sem.kill_at_estimate.then_some(estimate),
        }
    }

    /// The workload of `jobs`, made of the records at `kept` in `origin`, with this
    /// intake's counts.
    pub fn workload(
        self,
        jobs: Vec<SimJob>,
        kept: Vec<u32>,
        origin: Arc<Vec<SwfRecord>>,
    ) -> Workload {
        Workload {
            jobs,
            kept,
            origin,
            skipped: self.skipped,
            estimate_from_runtime: self.from_runtime,
            overrunning: self.overrunning,
        }
    }
}

/// The simulated schedule as SWF: each kept record with its wait, run time (start to end,
/// suspensions included), status and processors as simulated. Jobs that never ran get
/// unknown (-1) wait and run times and status 5 (cancelled).
pub fn write_schedule<W: Write>(
    w: W,
    header: &SwfHeader,
    workload: &Workload,
    records: &[JobRecord],
) -> io::Result<()> {
    let mut out = Vec::with_capacity(records.len());
    for (i, rec) in records.iter().enumerate().take(workload.jobs.len()) {
        let mut r = workload.record(i);
        r.set_schedule(rec);
        out.push(r);
    }
    write_trace(w, header, &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::Time;

    fn rec(
        job: u64,
        submit: i64,
        run: Option<i64>,
        alloc: Option<u32>,
        req: Option<u32>,
        req_time: Option<i64>,
    ) -> SwfRecord {
        SwfRecord {
            job,
            submit: Some(Time::from_secs(submit)),
            run: run.map(Dur::from_secs),
            alloc_procs: alloc,
            req_procs: req,
            req_time: req_time.map(Dur::from_secs),
            ..SwfRecord::default()
        }
    }

    #[test]
    fn default_semantics() {
        let records = vec![
            rec(1, 0, Some(100), Some(4), Some(8), Some(500)), // alloc wins: 4 PEs, est 500
            rec(2, 1, Some(100), None, Some(8), None),         // req used, est = runtime
            rec(3, 2, None, Some(4), None, Some(10)),          // no runtime: skipped
            rec(4, 3, Some(0), Some(4), None, Some(10)),       // zero runtime: skipped
            rec(5, 4, Some(10), None, None, Some(10)),         // no size: skipped
            rec(6, 5, Some(10), Some(64), None, Some(10)),     // too large: skipped
            rec(7, 6, Some(50), Some(2), None, Some(10)),      // overruns its estimate
        ];
        let w = prepare(&records, 32, &Semantics::default(), None);
        let got: Vec<_> = w
            .jobs
            .iter()
            .map(|j| {
                (
                    j.req.id.0,
                    j.req.procs,
                    j.req.estimate.as_secs(),
                    j.runtime.as_secs(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(1, 4, 500, 100), (2, 8, 100, 100), (7, 2, 10, 50)]
        );
        assert_eq!(
            w.skipped,
            Skipped {
                runtime: 2,
                size: 1,
                oversize: 1,
                submit: 0
            }
        );
        assert_eq!((w.estimate_from_runtime, w.overrunning), (1, 1));
        assert!(w.jobs.iter().all(|j| j.limit.is_none()));

        let sem = Semantics {
            size: SizeField::Req,
            estimates: Estimates::Exact,
            kill_at_estimate: true,
        };
        let w = prepare(&records, 32, &sem, None);
        let got: Vec<_> = w
            .jobs
            .iter()
            .map(|j| (j.req.id.0, j.req.procs, j.req.estimate.as_secs()))
            .collect();
        assert_eq!(got, vec![(1, 8, 100), (2, 8, 100), (7, 2, 50)]);
        assert_eq!(w.jobs[2].limit, Some(Dur::from_secs(50)));
    }

    #[test]
    fn load_rescaling_stretches_arrivals() {
        let records: Vec<_> = (0..10)
            .map(|i| rec(i + 1, i as i64 * 100, Some(100), Some(4), None, None))
            .collect();
        // Offered load now: 10 * 4 * 100 / (8 * 900) = 0.555…; ask for half of that.
        let w = prepare(
            &records,
            8,
            &Semantics::default(),
            Some(4000.0 / 7200.0 / 2.0),
        );
        assert_eq!(w.jobs[1].req.submit, Time::from_secs(200));
        assert_eq!(w.jobs[9].req.submit, Time::from_secs(1800));
    }
}
