//! A run's schedule as Batsim's `jobs.csv` (`cosched sim --jobs-out-batsim`), the file
//! Batsim writes as `PREFIX_jobs.csv` and its tools (evalys, batsched's scripts) read.
//!
//! Batsim's columns in Batsim's order ([`BATSIM_JOBS_COLUMNS`]), its final states
//! (`COMPLETED_SUCCESSFULLY`, `COMPLETED_FAILED`, `COMPLETED_WALLTIME_REACHED`,
//! `COMPLETED_KILLED`, `REJECTED`) and its number format (seconds with six decimals, as C++'s
//! `std::to_string(double)` prints them). Values:
//! - `job_id`: the job number; `workload_name`: `w0`, the name Batsim gives its first
//!   workload; `profile`: the delay profile `cosched workload convert --to batsim` writes for
//!   the job's run time ([`cosched_workload::batsim::profile_name`]);
//! - `requested_time`: the estimate the policy saw; `execution_time`: end − start (time
//!   suspended included); `stretch`: turnaround / execution time;
//! - `allocated_resources`: the PEs the job held last, as Batsim's interval set (`0-3 7`).
//!   The space-sharing policies take PEs first fit on PE numbers (`cosched-policy`'s
//!   `PePool`), so these are the lowest-numbered PEs free when the job started;
//! - `consumed_energy`: `-1` (no energy model); `metadata`: empty.
//!
//! Rejected jobs have empty times and resources, as in Batsim. Jobs the run left unfinished
//! (possible only with operations or nodes that stay down) are not written: Batsim writes
//! a job once it is complete. No provenance comment lines precede the header, since Batsim's
//! readers take the first line as the header.

use std::fmt::Write as _;
use std::io::{self, Write};

use cosched_core::{Dur, JobRecord, Outcome};
use cosched_workload::batsim::profile_name;

use cosched_sim::SimResult;
use cosched_sim::trace::Workload;

/// The columns of Batsim's `jobs.csv`, in its order.
pub const BATSIM_JOBS_COLUMNS: [&str; 17] = [
    "job_id",
    "workload_name",
    "profile",
    "submission_time",
    "requested_number_of_resources",
    "requested_time",
    "success",
    "final_state",
    "starting_time",
    "execution_time",
    "finish_time",
    "waiting_time",
    "turnaround_time",
    "stretch",
    "allocated_resources",
    "consumed_energy",
    "metadata",
];

/// The workload name Batsim gives the first (and only) workload of a run.
const WORKLOAD_NAME: &str = "w0";

/// Batsim's final state of a job that ended this way.
fn final_state(o: Outcome) -> &'static str {
    match o {
        Outcome::Completed => "COMPLETED_SUCCESSFULLY",
        Outcome::Failed | Outcome::NodeFailed => "COMPLETED_FAILED",
        Outcome::TimedOut => "COMPLETED_WALLTIME_REACHED",
        Outcome::Cancelled => "COMPLETED_KILLED",
        Outcome::Rejected => "REJECTED",
    }
}

/// Seconds with six decimals, as Batsim prints times.
fn secs(micros: i64) -> String {
    format!("{:.6}", micros as f64 / 1e6)
}

/// PE runs (half-open) as Batsim's interval set: `0-3 7`.
fn interval_set(runs: &[(u32, u32)]) -> String {
    let mut s = String::new();
    for &(lo, hi) in runs {
        if !s.is_empty() {
            s.push(' ');
        }
        if hi - lo == 1 {
            let _ = write!(s, "{lo}");
        } else {
            let _ = write!(s, "{lo}-{}", hi - 1);
        }
    }
    s
}

/// Writes one row per ended job, in workload order (see the module doc).
pub fn write_batsim_jobs_csv<W: Write>(
    w: W,
    workload: &Workload,
    result: &SimResult,
) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(io::BufWriter::new(w));
    w.write_record(BATSIM_JOBS_COLUMNS)?;
    for ((job, rec), &runtime) in workload
        .jobs
        .iter()
        .zip(&result.records)
        .zip(&result.runtimes)
    {
        let JobRecord {
            id,
            submit,
            procs,
            start,
            end,
            outcome,
            pes,
            ..
        } = rec;
        let Some(outcome) = *outcome else { continue };
        let mut row = vec![
            id.to_string(),
            WORKLOAD_NAME.to_string(),
            profile_name(runtime),
            secs(submit.as_micros()),
            procs.to_string(),
            secs(job.req.estimate.as_micros()),
            u8::from(outcome == Outcome::Completed).to_string(),
            final_state(outcome).to_string(),
        ];
        match (start, end) {
            (Some(s), Some(e)) if outcome != Outcome::Rejected => {
                let exec = e.since(*s);
                let turnaround = e.since(*submit);
                let stretch = if exec > Dur::ZERO {
                    turnaround.as_secs_f64() / exec.as_secs_f64()
                } else {
                    1.0
                };
                row.extend([
                    secs(s.as_micros()),
                    secs(exec.as_micros()),
                    secs(e.as_micros()),
                    secs(s.since(*submit).as_micros()),
                    secs(turnaround.as_micros()),
                    format!("{stretch:.6}"),
                    interval_set(pes.runs()),
                    "-1.000000".to_string(),
                ]);
            }
            // Ended without running (rejected, or cancelled while waiting).
            _ => row.extend(std::iter::repeat_n(String::new(), 8)),
        }
        row.push(String::new());
        w.write_record(&row)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pe_runs_are_written_as_batsim_interval_sets() {
        assert_eq!(interval_set(&[(0, 4), (7, 8)]), "0-3 7");
        assert_eq!(interval_set(&[(5, 6)]), "5");
        assert_eq!(interval_set(&[]), "");
        assert_eq!(secs(1_500_000), "1.500000");
        assert_eq!(final_state(Outcome::TimedOut), "COMPLETED_WALLTIME_REACHED");
    }
}
