//! What a run writes besides its summary: one CSV line per job (`cosched sim --jobs-out`),
//! the simulated schedule as SWF with a note saying how it was made (`--swf-out`), and the
//! Ousterhout matrix drawing (`--matrix-out`). Writers take any [`io::Write`]; creating files
//! and naming them in errors is the caller's business.

use std::io::{self, Write};

use cosched_core::{Dur, JobRecord, Time};

use crate::SimResult;
use crate::matrix_svg;
use crate::metrics::job_metrics;
use crate::run::{RunOutput, RunSpec};
use crate::trace::{Estimates, Workload, write_schedule};

/// The header line of the jobs CSV.
pub const JOBS_CSV_HEADER: &str = "id,submit,start,end,procs,runtime,estimate,wait,response,slowdown,bounded_slowdown,suspended,preemptions,outcome";

/// One line per job, in workload order: times in seconds, the job's figures (empty when it
/// never finished), time spent suspended, preemptions and outcome. `bsld_threshold` is the
/// bounded-slowdown threshold.
pub fn write_jobs_csv<W: Write>(
    w: W,
    workload: &Workload,
    result: &SimResult,
    bsld_threshold: Dur,
) -> io::Result<()> {
    let mut out = io::BufWriter::new(w);
    writeln!(out, "{JOBS_CSV_HEADER}")?;
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
            suspended,
            preemptions,
            outcome,
            ..
        } = rec;
        let t = |x: Option<Time>| x.map_or(String::new(), |t| t.to_string());
        let figures = match (start, end) {
            (Some(s), Some(e)) => {
                let jm = job_metrics(*submit, *s, *e, runtime, bsld_threshold);
                format!(
                    "{},{},{:.4},{:.4}",
                    jm.wait_s, jm.response_s, jm.slowdown, jm.bounded_slowdown
                )
            }
            _ => ",,,".to_string(),
        };
        let outcome = outcome
            .map(|o| format!("{o:?}").to_lowercase())
            .unwrap_or_default();
        writeln!(
            out,
            "{id},{submit},{},{},{procs},{},{},{figures},{},{preemptions},{outcome}",
            t(*start),
            t(*end),
            runtime.as_secs_f64(),
            job.req.estimate.as_secs_f64(),
            suspended.as_secs_f64(),
        )?;
    }
    out.flush()
}

/// The header line added to a simulated schedule, so the file says where it came from
/// (SWF header lines start with `;`, which the writer adds).
pub fn schedule_note(policy: &str, estimates: Estimates, load: Option<f64>) -> String {
    format!(
        " Note: schedule simulated by cosched sim, policy {policy}, estimates {estimates:?}{}",
        load.map(|l| format!(", offered load rescaled to {l}"))
            .unwrap_or_default()
    )
}

/// The run's schedule as SWF: the source's header plus [`schedule_note`], then one record
/// per job (see [`write_schedule`]).
pub fn write_schedule_swf<W: Write>(w: W, spec: &RunSpec, run: &RunOutput) -> io::Result<()> {
    let mut header = run.header.clone();
    header.push_line(&schedule_note(
        &run.summary.policy,
        spec.semantics.estimates,
        spec.load,
    ));
    write_schedule(w, &header, &run.workload, &run.result.records)
}

/// The matrix drawing of an observed run with a matrix window, titled with the policy and
/// machine size; `None` when no window was recorded.
pub fn matrix_svg(run: &RunOutput) -> Option<String> {
    let rec = run.timeshare.as_ref()?.matrix.as_ref()?;
    let pes = run.result.machine.total_pes();
    let title = format!("{} on {pes} PEs", run.summary.policy);
    Some(matrix_svg::render(rec, pes, &title))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineOptions;
    use crate::metrics::MetricsOptions;
    use crate::run::{Observe, run};
    use crate::setup::Source;
    use crate::trace::Semantics;
    use cosched_core::MachineShape;
    use cosched_policy::PolicyConfig;
    use cosched_workload::swf::{SwfHeader, SwfRecord, read_trace_from};

    fn job(id: u64, submit: i64, procs: u32, run_s: i64, req_s: Option<i64>) -> SwfRecord {
        SwfRecord {
            job: id,
            submit: Some(Time::from_secs(submit)),
            run: Some(Dur::from_secs(run_s)),
            alloc_procs: Some(procs),
            req_procs: Some(procs),
            req_time: req_s.map(Dur::from_secs),
            ..SwfRecord::default()
        }
    }

    /// Three jobs on 4 PEs under FCFS: job 1 fills the machine for 100 s, then jobs 2 and 3
    /// start side by side.
    fn three_jobs() -> Source {
        let mut header = SwfHeader::default();
        header.push_line(" MaxProcs: 4");
        Source::Trace {
            path: "three.swf".into(),
            header: Box::new(header),
            records: vec![
                job(1, 0, 4, 100, Some(200)),
                job(2, 10, 2, 50, None),
                job(3, 20, 2, 5, Some(40)),
            ],
            procs: 4,
        }
    }

    fn spec<'a>(src: &'a Source, cfg: &'a PolicyConfig, load: Option<f64>) -> RunSpec<'a> {
        RunSpec {
            source: src,
            semantics: Semantics::default(),
            load,
            seed: None,
            policy: "fcfs",
            config: cfg,
            engine: EngineOptions::default(),
            metrics: MetricsOptions::default(),
            observe: None,
        }
    }

    #[test]
    fn jobs_csv_of_a_three_job_run() {
        let src = three_jobs();
        let cfg = PolicyConfig::new(MachineShape::flat(4, 1));
        let sp = spec(&src, &cfg, None);
        let out = run(&sp).unwrap();
        let mut csv = Vec::new();
        write_jobs_csv(
            &mut csv,
            &out.workload,
            &out.result,
            sp.metrics.bsld_threshold,
        )
        .unwrap();
        // Job 2: waits 90 s, responds in 140 s, slowdown 140/50. Job 3 (5 s run): slowdown
        // 85/5 = 17, bounded by the 10 s threshold to 85/10. Job 2 had no requested time, so
        // its estimate is its runtime.
        let expected = format!(
            "{JOBS_CSV_HEADER}\n\
             1,0,0,100,4,100,200,0,100,1.0000,1.0000,0,0,completed\n\
             2,10,100,150,2,50,50,90,140,2.8000,2.8000,0,0,completed\n\
             3,20,100,105,2,5,40,80,85,17.0000,8.5000,0,0,completed\n"
        );
        assert_eq!(String::from_utf8(csv).unwrap(), expected);
    }

    #[test]
    fn schedule_swf_carries_the_note_and_the_simulated_times() {
        let src = three_jobs();
        let cfg = PolicyConfig::new(MachineShape::flat(4, 1));
        let sp = spec(&src, &cfg, None);
        let out = run(&sp).unwrap();
        let mut swf = Vec::new();
        write_schedule_swf(&mut swf, &sp, &out).unwrap();
        let text = String::from_utf8(swf).unwrap();
        assert!(
            text.contains("; MaxProcs: 4\n"),
            "source header kept: {text}"
        );
        assert!(
            text.contains(
                "; Note: schedule simulated by cosched sim, policy fcfs, estimates Trace\n"
            ),
            "{text}"
        );
        let back = read_trace_from(text.as_bytes(), "back", &Default::default()).unwrap();
        let waits: Vec<_> = back
            .records
            .iter()
            .map(|r| r.wait.unwrap().as_secs())
            .collect();
        assert_eq!(waits, [0, 90, 80]);
        assert_eq!(
            schedule_note("easy", Estimates::Exact, Some(0.9)),
            " Note: schedule simulated by cosched sim, policy easy, estimates Exact, offered load rescaled to 0.9"
        );
    }

    #[test]
    fn matrix_svg_only_for_an_observed_window() {
        let src = three_jobs();
        let cfg = PolicyConfig::new(MachineShape::flat(4, 1));
        let out = run(&spec(&src, &cfg, None)).unwrap();
        assert!(matrix_svg(&out).is_none());
        let out = run(&RunSpec {
            observe: Some(Observe {
                matrix_window: Some(Time::ZERO..Time::from_secs(200)),
            }),
            ..spec(&src, &cfg, None)
        })
        .unwrap();
        let svg = matrix_svg(&out).expect("window recorded");
        assert!(
            svg.starts_with("<svg") && svg.contains("fcfs on 4 PEs"),
            "{svg}"
        );
    }
}
