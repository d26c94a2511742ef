//! One simulation run, start to finish: build the policy, prepare the workload, simulate
//! (optionally through the time-sharing [`Observer`]), measure. `cosched sim` runs this once
//! and [`crate::sweep`] runs it for every cell, so a sweep row and a single run of the same
//! policy, load and seed are the same computation, not two that could drift apart.
//!
//! What a run writes (the per-job CSV, the SWF schedule, the matrix drawing) is in
//! [`crate::run_files`]; parsing options and printing stay with the caller.

use std::ops::Range;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use cosched_core::{SelfLimits, Slowdowns, Time};
use cosched_ledger::Refusal;
use cosched_policy::t3d::T3dConfig;
use cosched_policy::{ConfigError, Policy, PolicyConfig, registry};
use cosched_workload::swf::{SwfHeader, SwfRecord};

use crate::metrics::{MetricsOptions, Summary, summarize};
use crate::setup::{OpenTrace, SetupError, Source};
use crate::timeshare_metrics::{MatrixRecord, Observer, TimeshareReport};
use cosched_sim::ahead::Ahead;
use cosched_sim::engine::simulate_streamed;
use cosched_sim::trace::{Intake, Semantics, Workload};
use cosched_sim::{EngineOptions, SimError, SimJob, SimResult, simulate};

/// Everything one run is made of.
///
/// The simulated machine is `config.machine`: the policy is built for that machine, so taking
/// it from one place means the two cannot disagree.
#[derive(Clone, Debug)]
pub struct RunSpec<'a> {
    /// Where the jobs come from (borrowed: a sweep shares one trace between its cells).
    pub source: &'a Source,
    pub semantics: Semantics,
    /// Offered load to rescale to; `None` keeps the workload's own.
    pub load: Option<f64>,
    /// Model seed replacing the source's own (ignored for traces).
    pub seed: Option<u64>,
    /// Policy name, as [`registry::build`] knows it.
    pub policy: &'a str,
    pub config: &'a PolicyConfig,
    pub engine: EngineOptions,
    pub metrics: MetricsOptions,
    /// Watch the policy for time-sharing figures; `None` runs it bare (faster).
    pub observe: Option<Observe>,
}

impl<'a> RunSpec<'a> {
    /// The same run of another source.
    pub fn with_source<'s>(&self, source: &'s Source) -> RunSpec<'s>
    where
        'a: 's,
    {
        RunSpec {
            source,
            ..self.clone()
        }
    }
}

/// What to watch when a run is observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observe {
    /// Also record who ran where inside this window of simulated time, for
    /// [`crate::matrix_svg`].
    pub matrix_window: Option<Range<Time>>,
}

/// Time-sharing figures of an observed run.
#[derive(Clone, Debug)]
pub struct Timeshare {
    pub report: TimeshareReport,
    /// The matrix window's record, when one was asked for.
    pub matrix: Option<MatrixRecord>,
}

/// Wall-clock time of the phases of a run (for `--timing`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Building the policy and preparing the workload (generating it, for a model).
    pub prepare: Duration,
    pub simulate: Duration,
    /// The summary and, when observed, the time-sharing report.
    pub metrics: Duration,
    /// The trace's jobs were read during `simulate` ([`run_read`]), not before the run.
    pub read_while_simulating: bool,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The jobs as simulated (after semantics and load rescaling).
    pub workload: Workload,
    /// The SWF header of the source (the trace's, or the model's).
    pub header: SwfHeader,
    pub result: SimResult,
    pub summary: Summary,
    /// Present when the spec asked to [`Observe`].
    pub timeshare: Option<Timeshare>,
    pub timings: Timings,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The policy could not be built: unknown name or bad options.
    #[error(transparent)]
    Policy(ConfigError),
    /// The simulation stopped (a policy broke its contract, a job cannot fit); `jobs` is how
    /// many jobs the workload had, none of which count as finished.
    #[error("{err}{}", context.as_ref().map_or(String::new(), |c| format!("; {c}")))]
    Sim {
        err: SimError,
        jobs: usize,
        /// What the policy adds about the refused decision ([`Policy::explain`]): an external
        /// policy quotes the reply line that carried it.
        context: Option<String>,
    },
    /// The policy stopped deciding ([`Policy::failure`]): an external policy's child process
    /// exited or answered something that is not a reply.
    #[error("{why}")]
    Failed { why: String, jobs: usize },
    /// The time-sharing report needs the job classes of the configuration, and they are
    /// invalid.
    #[error("the job classes (queues, default_class) decide which jobs are interactive")]
    Classes(#[source] ConfigError),
}

/// The options the time-sharing report reads, whatever the policy: T3D's class mapping,
/// which says which jobs are interactive.
pub const CLASS_OPTIONS: &[&str] = &["classes", "default_class", "queues"];

/// Performs one run.
pub fn run(spec: &RunSpec) -> Result<RunOutput, RunError> {
    let clock = Instant::now();
    // An observed run's report reads the class options; the policy is given them only if it
    // takes them. Unobserved, they are the policy's alone, and refused if it does not.
    let own;
    let config = if spec.observe.is_some() {
        let takes = registry::options(spec.policy).unwrap_or_default();
        let mut c = spec.config.clone();
        c.options
            .retain(|k, _| !CLASS_OPTIONS.contains(&k) || takes.contains(&k));
        own = c;
        &own
    } else {
        spec.config
    };
    let (mut workload, header) = spec.source.workload(&spec.semantics, spec.load, spec.seed);
    let mut engine = spec.engine.clone();
    let multi;
    let config = match multicore(spec, config, &mut workload) {
        Some((c, model)) => {
            engine.slowdowns = Some(model);
            multi = c;
            &multi
        }
        None => config,
    };
    let mut policy = registry::build(spec.policy, config).map_err(RunError::Policy)?;
    let t_prepare = clock.elapsed();
    let machine = spec.config.machine;
    let sim = |p: &mut dyn Policy| {
        let res = simulate(machine, &workload.jobs, p, engine.clone());
        let jobs = workload.jobs.len();
        // A failed policy decides nothing more, so the run ends (or is refused) for that
        // reason: the failure is what to report.
        if let Some(why) = p.failure() {
            return Err(RunError::Failed { why, jobs });
        }
        res.map_err(|err| {
            let context = match &err {
                SimError::Ledger(e) => match e.refusal() {
                    Refusal::Violation { job, .. } => p.explain(*job),
                    Refusal::DuplicateJob { .. } => None,
                },
                _ => None,
            };
            RunError::Sim { err, jobs, context }
        })
    };
    let (result, observer) = match &spec.observe {
        Some(o) => {
            let mut obs = Observer::new(policy);
            if let Some(w) = &o.matrix_window {
                obs = obs.with_matrix_window(w.start, w.end);
            }
            (sim(&mut obs)?, Some(obs))
        }
        None => (sim(policy.as_mut())?, None),
    };
    let t_simulate = clock.elapsed();
    let summary = summarize(&result, &spec.metrics);
    let timeshare = match observer {
        Some(mut o) => {
            let end = result
                .records
                .iter()
                .filter_map(|r| r.end)
                .max()
                .unwrap_or(Time::ZERO);
            o.finish(end);
            // Which jobs are interactive comes from the T3D class mapping of the same
            // configuration, whatever the policy (see timeshare_metrics); the other policy's
            // own options are none of its business.
            let classes = T3dConfig::from_policy_config(&registry::restrict("t3d", spec.config))
                .map_err(RunError::Classes)?;
            let report = TimeshareReport::build(&result, &o, &classes, spec.metrics.bsld_threshold);
            Some(Timeshare {
                report,
                matrix: o.matrix.take(),
            })
        }
        None => None,
    };
    let t_metrics = clock.elapsed();
    Ok(RunOutput {
        workload,
        header,
        result,
        summary,
        timeshare,
        timings: Timings {
            prepare: t_prepare,
            simulate: t_simulate - t_prepare,
            metrics: t_metrics - t_simulate,
            read_while_simulating: false,
        },
    })
}

/// Why a run of a trace read as it runs ([`run_read`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadRunError {
    /// Reading the trace failed (as [`Source::trace`] reports it).
    #[error(transparent)]
    Read(#[from] SetupError),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Reads a trace and runs it: `spec` is the run, its source replaced by the trace as read
/// (give it [`OpenTrace::header_only`]). The outcome is that of [`Source::trace`] then
/// [`run`], errors included, but when the run allows it the
/// simulation goes on beside the reading: it runs on a thread of its own, taking each piece
/// of jobs as it is parsed (the gunzip and the parsing on the other core) and waiting for
/// more only when its clock reaches the last submit time it knows.
///
/// This takes a run with the trace's own load, unobserved, on a flat machine, with no
/// operations (everything else needs every job at the start); and a trace in submit order,
/// which logs are. Otherwise, or if the trace turns out not to be in order where it matters,
/// or the simulation or the policy fails, the trace is read whole and [`run`] runs it again,
/// so that what is reported is exactly what it reports. A read error is reported once the
/// whole trace has been read, as [`Source::trace`] reports it, and nothing of the run.
pub fn run_read(open: OpenTrace, spec: &RunSpec) -> Result<(Source, RunOutput), ReadRunError> {
    let whole = |open: OpenTrace| -> Result<(Source, RunOutput), ReadRunError> {
        let src = open.read()?;
        let out = run(&spec.with_source(&src))?;
        Ok((src, out))
    };
    let streams = spec.load.is_none()
        && spec.observe.is_none()
        && spec.engine.operations.is_empty()
        && spec.engine.slowdowns.is_none()
        && !is_multicore(spec.policy);
    if !streams {
        return whole(open);
    }
    let clock = Instant::now();
    let Ok(mut policy) = registry::build(spec.policy, spec.config) else {
        return whole(open);
    };
    let t_prepare = clock.elapsed();
    // The jobs of the records fed so far, and where their records sit in the trace.
    let intake = Mutex::new((Intake::new(open.procs(), &spec.semantics), Vec::new(), 0u32));
    let (tx, rx) = mpsc::channel::<Vec<SimJob>>();
    let (machine, engine) = (spec.config.machine, spec.engine.clone());
    let expected = open.expected_jobs();
    let ahead = &Ahead::new();
    let outcome = std::thread::scope(|scope| {
        let sim = std::thread::Builder::new()
            .name("simulate".into())
            .spawn_scoped(scope, move || {
                let res = simulate_streamed(machine, expected, rx, ahead, policy.as_mut(), engine);
                res.ok().filter(|_| policy.failure().is_none())
            });
        let Ok(sim) = sim else {
            // No thread to simulate on.
            return Err(Box::new(open));
        };
        // Called on the parsing threads, one piece at a time, in input order. The channel
        // is unbounded: the trace stays in memory anyway, and a parsing thread that waited
        // for the simulation here would hold up the others.
        let feed = |records: &[SwfRecord]| {
            let Ok(mut st) = intake.lock() else { return };
            let (intake, kept, seen) = &mut *st;
            let mut jobs = Vec::with_capacity(records.len());
            for r in records {
                if let Some(size) = intake.size(r) {
                    kept.push(*seen);
                    jobs.push(intake.job(r, Some(size)));
                }
                *seen += 1;
            }
            // The pages these jobs will be written to are mapped here, where there is time
            // to spare, not by the simulation's first writes (see `ahead`).
            ahead.populate(kept.len());
            // The simulation may have stopped (an error): the run is done again anyway.
            let _ = tx.send(jobs);
        };
        let read = open.read_feeding(&feed);
        // The input has ended: the simulation runs out the jobs it has.
        drop(tx);
        let simulated = sim.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        Ok((read, simulated))
    });
    let (read, simulated) = match outcome {
        Ok(done) => done,
        Err(open) => return whole(*open),
    };
    let src = read?;
    let Some((result, jobs)) = simulated else {
        let out = run(&spec.with_source(&src))?;
        return Ok((src, out));
    };
    let t_simulate = clock.elapsed();
    let (intake, kept, _) = intake.into_inner().unwrap_or_else(|e| e.into_inner());
    let Source::Trace {
        records, header, ..
    } = &src
    else {
        unreachable!("read from a trace")
    };
    let workload = intake.workload(jobs, kept, Arc::clone(records));
    let header = (**header).clone();
    let summary = summarize(&result, &spec.metrics);
    let t_metrics = clock.elapsed();
    let out = RunOutput {
        workload,
        header,
        result,
        summary,
        timeshare: None,
        timings: Timings {
            prepare: t_prepare,
            simulate: t_simulate - t_prepare,
            metrics: t_metrics - t_simulate,
            read_while_simulating: true,
        },
    };
    Ok((src, out))
}

/// Whether `policy` schedules multi-core nodes with contention (seed 001): it takes a
/// `slowdown_seed`.
pub fn is_multicore(policy: &str) -> bool {
    registry::options(policy).is_some_and(|o| o.contains(&"slowdown_seed"))
}

/// For a multi-core policy: the slowdown model (seeded by the `slowdown_seed` option, else by
/// the run's workload seed), the configuration that tells the policy that seed, and the
/// workload transformed by formula 7 (each job's process count grown as its self-slowdowns
/// allow, runtimes kept). The policy, the engine and the transformation read the same model.
fn multicore(
    spec: &RunSpec,
    config: &PolicyConfig,
    workload: &mut Workload,
) -> Option<(PolicyConfig, Slowdowns)> {
    if !is_multicore(spec.policy) {
        return None;
    }
    let mut c = config.clone();
    let seed = match c
        .options
        .get("slowdown_seed")
        .and_then(toml::Value::as_integer)
    {
        Some(s) => s as u64,
        None => {
            let s = spec.source.seed(spec.seed) & 0x7fff_ffff;
            c.options
                .insert("slowdown_seed".into(), toml::Value::Integer(s as i64));
            s
        }
    };
    let model = Slowdowns::new(seed);
    let milli = |key: &str, default: u32| {
        c.options
            .get(key)
            .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
            .map_or(default, |f| (f * 1000.0).round() as u32)
    };
    let limits = SelfLimits {
        max_sl: milli("max_sl", 1250),
        self_sl_2: milli("self_sl_2", 1120),
    };
    let total = c.machine.total_pes();
    // The workload's records take their size from the jobs (`Workload::record`).
    for job in &mut workload.jobs {
        let id = job.req.id;
        job.req.procs = limits
            .transform_size(job.req.procs, model.crs(id), model.nos(id))
            .min(total);
    }
    Some((c, model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::MachineShape;
    use cosched_workload::lublin::GenOptions;

    fn model(seed: u64) -> Source {
        Source::Lublin {
            model: Box::new(GenOptions {
                jobs: 300,
                procs: 32,
                seed,
                ..GenOptions::default()
            }),
        }
    }

    fn spec<'a>(source: &'a Source, policy: &'a str, config: &'a PolicyConfig) -> RunSpec<'a> {
        RunSpec {
            source,
            semantics: Semantics::default(),
            load: Some(0.8),
            seed: None,
            policy,
            config,
            engine: EngineOptions::default(),
            metrics: MetricsOptions::default(),
            observe: None,
        }
    }

    #[test]
    fn a_run_is_the_workload_simulated_and_summarised() {
        let src = model(5);
        let cfg = PolicyConfig::new(MachineShape::flat(32, 1));
        let out = run(&spec(&src, "easy", &cfg)).unwrap();
        // The same steps by hand give the same records.
        let (w, _) = src.workload(&Semantics::default(), Some(0.8), None);
        let mut p = registry::build("easy", &cfg).unwrap();
        let direct = simulate(cfg.machine, &w.jobs, p.as_mut(), EngineOptions::default()).unwrap();
        assert_eq!(out.result.records, direct.records);
        assert_eq!(out.workload.jobs.len(), 300);
        assert_eq!(out.summary.jobs, 300);
        assert_eq!(out.summary.policy, "easy");
        assert!(out.timeshare.is_none());
        // A seed replaces the model's: another workload, another schedule.
        let reseeded = run(&RunSpec {
            seed: Some(6),
            ..spec(&src, "easy", &cfg)
        })
        .unwrap();
        assert_ne!(reseeded.result.records, out.result.records);
    }

    #[test]
    fn observing_changes_nothing_but_adds_the_timeshare_report() {
        let src = model(2);
        let mut cfg = PolicyConfig::new(MachineShape::flat(32, 1));
        cfg.quantum = Some(cosched_core::Dur::from_secs(60));
        let bare = run(&spec(&src, "gang", &cfg)).unwrap();
        let watched = run(&RunSpec {
            observe: Some(Observe::default()),
            ..spec(&src, "gang", &cfg)
        })
        .unwrap();
        assert_eq!(bare.result.records, watched.result.records);
        let ts = watched.timeshare.expect("observed");
        assert!(ts.matrix.is_none(), "no window asked for");
        assert!(ts.report.context_switches > 0, "gang at load 0.8 switches");
        let windowed = run(&RunSpec {
            observe: Some(Observe {
                matrix_window: Some(Time::ZERO..Time::from_secs(3600)),
            }),
            ..spec(&src, "gang", &cfg)
        })
        .unwrap();
        let rec = windowed.timeshare.unwrap().matrix.expect("window recorded");
        assert!(!rec.intervals.is_empty());
    }

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("cosched-run-read-")
            .tempdir()
            .unwrap()
    }

    /// A Lublin trace of `jobs` jobs written to a file of its own in `dir` (`edit` changes
    /// its records first).
    fn trace_file(
        dir: &tempfile::TempDir,
        name: &str,
        jobs: usize,
        edit: impl FnOnce(&mut Vec<cosched_workload::swf::SwfRecord>),
    ) -> std::path::PathBuf {
        let mut t = cosched_workload::lublin::generate(&GenOptions {
            jobs,
            procs: 64,
            seed: 3,
            ..GenOptions::default()
        });
        edit(&mut t.records);
        let path = dir.path().join(name);
        cosched_workload::swf::write_trace_path(&path, &t.header, &t.records).unwrap();
        path
    }

    /// `run_read` of `path` against reading it first and running it.
    fn read_then_run_equals_run_read(path: &std::path::Path, first: Option<usize>) {
        let opts = cosched_workload::swf::ReadOptions::default();
        for policy in ["easy", "fcfs"] {
            let src = Source::trace(path, &opts, first).unwrap();
            let cfg = PolicyConfig::new(MachineShape::flat(src.procs(), 1));
            let before = run(&RunSpec {
                load: None,
                ..spec(&src, policy, &cfg)
            })
            .unwrap();
            let open = Source::open_trace(path, &opts, first).unwrap();
            let known = open.header_only();
            let (read, after) = run_read(
                open,
                &RunSpec {
                    load: None,
                    ..spec(&known, policy, &cfg)
                },
            )
            .unwrap();
            assert_eq!(after.result.records, before.result.records, "{policy}");
            assert_eq!(after.workload.jobs, before.workload.jobs);
            assert_eq!(after.workload.records(), before.workload.records());
            assert_eq!(after.workload.skipped, before.workload.skipped);
            assert_eq!(after.header, before.header);
            let json = |s: &Summary| serde_json::to_string(s).unwrap();
            assert_eq!(json(&after.summary), json(&before.summary));
            assert_eq!(read.procs(), src.procs());
        }
    }

    #[test]
    fn a_trace_run_as_it_is_read_is_the_run_of_the_trace_read_first() {
        // Several pieces of a megabyte, so that the simulation waits for the reading.
        let dir = scratch();
        let path = trace_file(&dir, "sorted.swf", 40_000, |_| {});
        read_then_run_equals_run_read(&path, None);
        read_then_run_equals_run_read(&path, Some(25_000));
        // Out of submit order: simulated again from the whole trace, the same run.
        let path = trace_file(&dir, "unsorted.swf", 40_000, |r| {
            r[35_000].submit = r[100].submit;
            r[200].run = None;
        });
        read_then_run_equals_run_read(&path, None);
    }

    #[test]
    fn a_bad_line_late_in_a_trace_read_as_it_runs_is_the_reading_error() {
        let dir = scratch();
        let path = trace_file(&dir, "bad.swf", 40_000, |_| {});
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("40001 1 2 3\n");
        std::fs::write(&path, text).unwrap();
        let opts = cosched_workload::swf::ReadOptions::default();
        let want = Source::trace(&path, &opts, None).unwrap_err().to_string();
        let open = Source::open_trace(&path, &opts, None).unwrap();
        let known = open.header_only();
        let cfg = PolicyConfig::new(MachineShape::flat(64, 1));
        let got = run_read(
            open,
            &RunSpec {
                load: None,
                ..spec(&known, "easy", &cfg)
            },
        )
        .unwrap_err();
        assert!(matches!(got, ReadRunError::Read(_)), "{got}");
        assert_eq!(got.to_string(), want);
        assert!(want.contains(":40"), "{want}");
    }

    #[test]
    fn errors_say_which_step_failed() {
        let src = model(1);
        let cfg = PolicyConfig::new(MachineShape::flat(32, 1));
        assert!(matches!(
            run(&spec(&src, "no-such-policy", &cfg)),
            Err(RunError::Policy(ConfigError::UnknownPolicy { .. }))
        ));
        // Job classes are options of t3d and of the time-sharing report only: a run without
        // the report refuses them for another policy, a run with it checks them.
        let mut bad = cfg.clone();
        bad.options
            .insert("default_class".into(), toml::Value::String("nope".into()));
        let err = run(&spec(&src, "easy", &bad)).unwrap_err().to_string();
        assert!(err.contains("unknown option default_class"), "{err}");
        let err = run(&RunSpec {
            observe: Some(Observe::default()),
            ..spec(&src, "easy", &bad)
        })
        .unwrap_err();
        assert!(matches!(err, RunError::Classes(_)), "{err}");
    }
}
