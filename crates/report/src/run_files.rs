//! What a run writes besides its summary: one CSV line per job (`cosched sim --jobs-out`),
//! the simulated schedule as SWF with a note saying how it was made (`--swf-out`), and the
//! Ousterhout matrix drawing (`--matrix-out`). Writers take any [`io::Write`]; creating files
//! and naming them in errors is the caller's business.

use std::io::{self, Write};

use cosched_core::{Dur, JobRecord, Time};

use crate::gantt::{Gantt, GanttJob};
use crate::matrix_svg;
use crate::metrics::job_metrics;
use crate::provenance::Provenance;
use crate::run::{RunOutput, RunSpec};
use cosched_sim::SimResult;
use cosched_sim::trace::{Estimates, Workload, write_schedule};

/// The columns of the jobs CSV.
pub const JOBS_CSV_COLUMNS: [&str; 16] = [
    "id",
    "submit",
    "start",
    "end",
    "procs",
    "runtime",
    "estimate",
    "wait",
    "response",
    "slowdown",
    "bounded_slowdown",
    "suspended",
    "preemptions",
    "outcome",
    "user",
    "queue",
];

/// One record per job, in workload order, after the provenance's `# key: value` lines (when
/// given): times in seconds, the job's figures (empty when it never finished), time spent
/// suspended, preemptions, outcome, and the trace's user and queue numbers (empty when the
/// trace has none). `bsld_threshold` is the bounded-slowdown threshold. Written with the
/// `csv` crate.
pub fn write_jobs_csv<W: Write>(
    w: W,
    workload: &Workload,
    result: &SimResult,
    bsld_threshold: Dur,
    provenance: Option<&Provenance>,
) -> io::Result<()> {
    let mut out = io::BufWriter::new(w);
    if let Some(p) = provenance {
        out.write_all(p.csv_comments().as_bytes())?;
    }
    let mut w = csv::Writer::from_writer(out);
    w.write_record(JOBS_CSV_COLUMNS)?;
    for (i, ((job, rec), &runtime)) in workload
        .jobs
        .iter()
        .zip(&result.records)
        .zip(&result.runtimes)
        .enumerate()
    {
        let swf = workload.source_record(i);
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
                [
                    jm.wait_s.to_string(),
                    jm.response_s.to_string(),
                    format!("{:.4}", jm.slowdown),
                    format!("{:.4}", jm.bounded_slowdown),
                ]
            }
            _ => Default::default(),
        };
        let outcome = outcome
            .map(|o| format!("{o:?}").to_lowercase())
            .unwrap_or_default();
        let n = |x: Option<u32>| x.map_or(String::new(), |v| v.to_string());
        let [wait, response, slowdown, bsld] = figures;
        w.write_record([
            id.to_string(),
            submit.to_string(),
            t(*start),
            t(*end),
            procs.to_string(),
            runtime.as_secs_f64().to_string(),
            job.req.estimate.as_secs_f64().to_string(),
            wait,
            response,
            slowdown,
            bsld,
            suspended.as_secs_f64().to_string(),
            preemptions.to_string(),
            outcome,
            n(swf.user),
            n(swf.queue),
        ])?;
    }
    w.flush()
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

/// The run's schedule as SWF: the source's header plus [`schedule_note`] and the
/// provenance (as `; Provenance-KEY: value` header lines), then one record per job (see
/// [`write_schedule`]).
pub fn write_schedule_swf<W: Write>(
    w: W,
    spec: &RunSpec,
    run: &RunOutput,
    provenance: Option<&Provenance>,
) -> io::Result<()> {
    let mut header = run.header.clone();
    header.push_line(&schedule_note(
        &run.summary.policy,
        spec.semantics.estimates,
        spec.load,
    ));
    if let Some(p) = provenance {
        for (k, v) in p.pairs() {
            header.push_line(&format!(
                " Provenance-{k}: {}",
                v.replace(['\n', '\r'], " ")
            ));
        }
    }
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

/// The schedule of a run as a [`Gantt`] (jobs on the PEs they last held; a job that spent
/// time suspended is time-shared), titled with the policy and machine size.
pub fn gantt_of(run: &RunOutput, window: Option<std::ops::Range<f64>>) -> Gantt {
    let pes = run.result.machine.total_pes();
    let jobs = run
        .result
        .records
        .iter()
        .map(|r| GanttJob {
            id: r.id.0,
            submit: r.submit.as_secs_f64(),
            start: r.start.map(Time::as_secs_f64),
            end: r.end.map(Time::as_secs_f64),
            pes: r.pes.runs().to_vec(),
            time_shared: r.suspended > Dur::ZERO,
        })
        .collect();
    Gantt {
        title: format!("{} on {pes} PEs", run.summary.policy),
        pes,
        jobs,
        window,
        provenance: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsOptions;
    use crate::run::{Observe, run};
    use crate::setup::Source;
    use cosched_core::MachineShape;
    use cosched_policy::PolicyConfig;
    use cosched_sim::EngineOptions;
    use cosched_sim::trace::Semantics;
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
            ]
            .into(),
            procs: 4,
            digest: crate::setup::FileDigest::known("none: built in memory".into()),
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
            Some(&Provenance {
                version: "cosched t".into(),
                command: "cosched sim".into(),
                input: "three, \"jobs\"".into(),
                input_sha256: "00".into(),
            }),
        )
        .unwrap();
        // Job 2: waits 90 s, responds in 140 s, slowdown 140/50. Job 3 (5 s run): slowdown
        // 85/5 = 17, bounded by the 10 s threshold to 85/10. Job 2 had no requested time, so
        // its estimate is its runtime.
        let expected = format!(
            "# generator: cosched t\n# command: cosched sim\n# input: three, \"jobs\"\n# input_sha256: 00\n\
             {}\n\
             1,0,0,100,4,100,200,0,100,1.0000,1.0000,0,0,completed,,\n\
             2,10,100,150,2,50,50,90,140,2.8000,2.8000,0,0,completed,,\n\
             3,20,100,105,2,5,40,80,85,17.0000,8.5000,0,0,completed,,\n",
            JOBS_CSV_COLUMNS.join(",")
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
        write_schedule_swf(&mut swf, &sp, &out, None).unwrap();
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
