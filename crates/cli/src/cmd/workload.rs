//! `cosched workload …`: summarise SWF traces, generate Lublin–Feitelson workloads, and
//! transform traces (load, compression, first jobs, time windows). The work is done by
//! `cosched-workload`; this module parses arguments and prints.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cosched_workload::batsim;
use cosched_workload::feitelson97;
use cosched_workload::lublin::{self, EstimateModel, GenOptions, LublinParams};
use cosched_workload::summary::{Summary, summarize};
use cosched_workload::swf::{self, Oversize, ReadOptions, SwfHeader, SwfRecord, Trace};
use cosched_workload::transform;

use cosched_report::provenance::{Provenance, command_line, file_sha256, version};
use cosched_report::setup::Source;

use super::output::table;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Summarise a trace: jobs, machine size, span, offered load, sizes, runtimes, estimates
    Info(InfoArgs),
    /// Generate a synthetic workload (Lublin–Feitelson model) as an SWF file
    Gen(GenArgs),
    /// Rescale the load, compress time, or cut a trace, and write it as SWF
    Transform(TransformArgs),
    /// Write a trace (SWF or Batsim JSON) in another format: a Batsim JSON workload or SWF
    Convert(ConvertArgs),
}

/// The formats `workload convert` writes.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Batsim's JSON workload: one delay profile per distinct run time
    Batsim,
    /// The Standard Workload Format
    Swf,
}

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Input trace: SWF (plain or gzip) or a Batsim JSON workload
    pub input: PathBuf,
    /// Output format
    #[arg(long, value_enum)]
    pub to: Format,
    /// Output file (`-` writes to standard output and prints nothing else)
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// How to read an input trace.
#[derive(clap::Args, Clone)]
pub struct ReadArgs {
    /// Machine size in PEs (overrides the header; required when the trace has no
    /// MaxProcs/MaxNodes line)
    #[arg(long, value_name = "N")]
    pub procs: Option<u32>,
    /// Skip malformed job lines instead of failing, and report how many of each kind
    #[arg(long)]
    pub lenient: bool,
    /// What to do with jobs larger than the machine: skip them, clip them to the machine
    /// size, or stop with an error
    #[arg(long, value_name = "skip|clip|error", default_value = "error")]
    pub oversize: Oversize,
}

impl ReadArgs {
    fn options(&self) -> anyhow::Result<ReadOptions> {
        if self.procs == Some(0) {
            bail!("--procs must be at least 1");
        }
        Ok(ReadOptions {
            procs: self.procs,
            lenient: self.lenient,
            oversize: self.oversize,
        })
    }
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// SWF trace, plain or gzip-compressed (`-` reads standard input)
    pub file: PathBuf,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Lublin–Feitelson with separate batch and interactive jobs (the published default)
    Lublin,
    /// Lublin–Feitelson with the whole-sample parameters (no job types)
    LublinUntyped,
    /// Seed 002's model: Poisson arrivals, three-stage hyperexponential runtimes growing with
    /// size, re-runs (no daily cycle; --estimates and --start-hour do not apply)
    Feitelson97,
}

#[derive(clap::Args)]
pub struct GenArgs {
    /// Workload model
    #[arg(long, value_enum, default_value = "lublin")]
    pub model: Model,
    /// Number of jobs
    #[arg(long, value_name = "N")]
    pub jobs: usize,
    /// Machine size in PEs (job sizes scale with it)
    #[arg(long, value_name = "P")]
    pub procs: u32,
    /// Rescale inter-arrival times so the offered load is L
    #[arg(long, value_name = "L")]
    pub load: Option<f64>,
    /// Random seed: the same seed gives the same file, byte for byte
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Requested times: exact (= runtime) or popular (overestimated, rounded up to round values)
    #[arg(long, value_name = "exact|popular", default_value = "exact")]
    pub estimates: EstimateModel,
    /// Hour of the day (0–23) at which the workload starts
    #[arg(long, value_name = "H", default_value_t = 0)]
    pub start_hour: u32,
    /// Output file (gzip-compressed when it ends in .gz; `-` writes the trace to standard
    /// output and prints nothing else)
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Print the summary of the generated workload as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct TransformArgs {
    /// Input SWF trace, plain or gzip-compressed (`-` reads standard input)
    pub input: PathBuf,
    /// Output file (gzip-compressed when it ends in .gz; `-` writes the trace to standard
    /// output and prints nothing else)
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Keep only jobs submitted in FROM..TO (durations such as 10d, 36h, 3600; either side
    /// may be empty), shifted so that FROM becomes time 0
    #[arg(long, value_name = "FROM..TO")]
    pub window: Option<String>,
    /// Keep only the first N jobs (after --window)
    #[arg(long, value_name = "N")]
    pub first: Option<usize>,
    /// Divide all times by F (after --first)
    #[arg(long, value_name = "F")]
    pub compress: Option<f64>,
    /// Rescale inter-arrival times so the offered load is L (last)
    #[arg(long, value_name = "L")]
    pub load: Option<f64>,
    /// Print the summary of the output as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: Command) -> anyhow::Result<i32> {
    match c {
        Command::Info(a) => info(a),
        Command::Gen(a) => gen_cmd(a),
        Command::Transform(a) => transform_cmd(a),
        Command::Convert(a) => convert_cmd(a),
    }
}

/// Reads an SWF trace or a Batsim JSON workload (told apart by
/// [`batsim::is_batsim_workload`]).
fn read(path: &Path, args: &ReadArgs) -> anyhow::Result<Trace> {
    let opts = args.options()?;
    if batsim::is_batsim_workload(path) {
        return Ok(batsim::read_workload(path, &opts)?);
    }
    Ok(swf::read_trace(path, &opts)?)
}

fn convert_cmd(a: ConvertArgs) -> anyhow::Result<i32> {
    let mut trace = read(&a.input, &a.read)?;
    let prov = input_provenance(&a.input);
    match a.to {
        Format::Swf => {
            stamp(&mut trace.header, &prov);
            write(&a.output, &trace.header, &trace.records)?;
            finish(&trace, &a.output, false, &prov)
        }
        Format::Batsim => {
            let description = format!(
                "converted by {} from {} (sha256 {}): {}",
                prov.version, prov.input, prov.input_sha256, prov.command
            );
            let context = || format!("cannot write {}", a.output.display());
            let written = if a.output.as_os_str() == "-" {
                batsim::write_workload(
                    io::stdout().lock(),
                    trace.procs,
                    &trace.records,
                    &description,
                )
                .with_context(context)?
            } else {
                let file = std::fs::File::create(&a.output).with_context(context)?;
                batsim::write_workload(file, trace.procs, &trace.records, &description)
                    .with_context(context)?
            };
            if a.output.as_os_str() != "-" {
                // A closed pipe only loses this line.
                let _ = writeln!(
                    io::stdout().lock(),
                    "wrote {} jobs on {} resources to {}{}",
                    group(written.jobs as f64),
                    trace.procs,
                    a.output.display(),
                    if written.left_out > 0 {
                        format!(
                            " ({} left out: no positive run time or size, or no submit time)",
                            group(written.left_out as f64)
                        )
                    } else {
                        String::new()
                    }
                );
            }
            Ok(0)
        }
    }
}

fn positive(name: &str, v: Option<f64>) -> anyhow::Result<()> {
    match v {
        Some(x) if !(x > 0.0 && x.is_finite()) => {
            bail!("{name} must be a positive number, not {x}")
        }
        _ => Ok(()),
    }
}

fn info(a: InfoArgs) -> anyhow::Result<i32> {
    let summary = cosched_workload::summary::summarize_file(&a.file, &a.read.options()?)?;
    let prov = input_provenance(&a.file);
    emit_with(&summary, a.json, None, Some(&prov))?;
    Ok(0)
}

/// The provenance of an output made from the file `path` (`-`: standard input, not hashed).
fn input_provenance(path: &Path) -> Provenance {
    let (input, input_sha256) = if path.as_os_str() == "-" {
        (
            "<stdin>".to_string(),
            "standard input: not hashed".to_string(),
        )
    } else {
        (path.display().to_string(), file_sha256(path))
    };
    Provenance {
        version: version(),
        command: command_line(),
        input,
        input_sha256,
    }
}

/// The provenance as SWF header lines (`; Provenance-KEY: value`), which SWF readers skip.
fn stamp(header: &mut SwfHeader, prov: &Provenance) {
    for (k, v) in prov.pairs() {
        header.push_line(&format!(" Provenance-{k}: {v}"));
    }
}

/// Prints the summary (after an optional first line, tables only). A closed pipe
/// (`… | head`) ends the output quietly.
pub fn emit(summary: &Summary, json: bool, preamble: Option<String>) -> anyhow::Result<()> {
    emit_with(summary, json, preamble, None)
}

/// [`emit`], the JSON with a `provenance` object when one is given.
fn emit_with(
    summary: &Summary,
    json: bool,
    preamble: Option<String>,
    prov: Option<&Provenance>,
) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    let result = if json {
        let mut doc = serde_json::to_value(summary)?;
        if let Some(p) = prov {
            doc["provenance"] = serde_json::to_value(p)?;
        }
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        preamble
            .map_or(Ok(()), |p| writeln!(out, "{p}\n"))
            .and_then(|()| print_summary(summary, &mut out))
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

fn gen_cmd(a: GenArgs) -> anyhow::Result<i32> {
    if a.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    super::memory::check_jobs_fit_here(
        a.jobs,
        "generating the jobs",
        super::memory::GEN_BYTES_PER_JOB,
    )?;
    if a.procs == 0 {
        bail!("--procs must be at least 1");
    }
    if a.start_hour > 23 {
        bail!("--start-hour must be 0..23, not {}", a.start_hour);
    }
    positive("--load", a.load)?;
    if a.model == Model::Feitelson97 {
        if a.start_hour != 0 || a.estimates != EstimateModel::Exact {
            bail!("--start-hour and --estimates do not apply to --model feitelson97");
        }
        let model = feitelson97::Options {
            jobs: a.jobs,
            procs: a.procs,
            seed: a.seed,
            load: a.load,
            ..feitelson97::Options::default()
        };
        let mut trace = feitelson97::generate(&model);
        let prov = Provenance::of(&Source::Feitelson97 {
            model: Box::new(model),
        });
        stamp(&mut trace.header, &prov);
        write(&a.output, &trace.header, &trace.records)?;
        return finish(&trace, &a.output, a.json, &prov);
    }
    let opts = GenOptions {
        jobs: a.jobs,
        procs: a.procs,
        seed: a.seed,
        load: a.load,
        params: match a.model {
            Model::Lublin => LublinParams::default(),
            Model::LublinUntyped | Model::Feitelson97 => LublinParams::untyped(),
        },
        estimates: a.estimates,
        start_hour: a.start_hour,
    };
    let mut trace = lublin::generate(&opts);
    // The input of a generated trace is the model's parameters, hashed as the simulator
    // hashes a model workload.
    let prov = Provenance::of(&Source::Lublin {
        model: Box::new(opts.clone()),
    });
    stamp(&mut trace.header, &prov);
    write(&a.output, &trace.header, &trace.records)?;
    finish(&trace, &a.output, a.json, &prov)
}

fn write(path: &Path, header: &SwfHeader, records: &[SwfRecord]) -> anyhow::Result<()> {
    swf::write_trace_path(path, header, records)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn finish(trace: &Trace, output: &Path, json: bool, prov: &Provenance) -> anyhow::Result<i32> {
    if output.as_os_str() == "-" {
        // The trace itself went to standard output; nothing else may.
        return Ok(0);
    }
    let summary = summarize(trace, &output.display().to_string());
    let wrote = format!(
        "wrote {} jobs to {}",
        group(trace.records.len() as f64),
        output.display()
    );
    emit_with(&summary, json, Some(wrote), Some(prov))?;
    Ok(0)
}

fn transform_cmd(a: TransformArgs) -> anyhow::Result<i32> {
    positive("--load", a.load)?;
    positive("--compress", a.compress)?;
    let window = a
        .window
        .as_deref()
        .map(|text| transform::parse_window(text).with_context(|| format!("--window {text:?}")))
        .transpose()?;
    let steps = transform::Steps {
        window,
        first: a.first,
        compress: a.compress,
        load: a.load,
    };
    let mut trace = read(&a.input, &a.read)?;
    let name = a.input.file_name().map_or_else(
        || a.input.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (header, records) =
        transform::apply(trace.header, trace.records, trace.procs, &name, &steps).map_err(|e| {
            match e {
                transform::TransformError::UndefinedLoad => anyhow::Error::new(e).context("--load"),
                other => other.into(),
            }
        })?;
    (trace.header, trace.records) = (header, records);
    let prov = input_provenance(&a.input);
    stamp(&mut trace.header, &prov);
    write(&a.output, &trace.header, &trace.records)?;
    finish(&trace, &a.output, a.json, &prov)
}

/// A number with thousands separators (no decimals).
fn group(v: f64) -> String {
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// Seconds in a compact human form: `45 s`, `12.5 min`, `3.2 h`, `12.1 d`.
fn human_secs(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 2.0 * 86400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} d", s / 86400.0)
    }
}

/// Prints a workload summary as a human-readable table (used by `workload info`, `gen`,
/// `transform` and `demo`).
pub fn print_summary(s: &Summary, out: &mut impl Write) -> io::Result<()> {
    let row = |out: &mut dyn Write, k: &str, v: String| writeln!(out, "{k:<18} {v}");
    row(out, "workload", s.source.clone())?;
    row(
        out,
        "jobs",
        format!(
            "{}{}",
            group(s.jobs as f64),
            if s.users > 0 {
                format!(" from {} users", s.users)
            } else {
                String::new()
            }
        ),
    )?;
    let mut machine = format!("{} PEs", group(f64::from(s.procs)));
    for part in [&s.computer, &s.installation].into_iter().flatten() {
        machine.push_str(&format!(", {part}"));
    }
    row(out, "machine", machine)?;
    for a in &s.acknowledge {
        row(out, "acknowledge", a.clone())?;
    }
    row(
        out,
        "span",
        format!(
            "{} ({} s, first to last submit)",
            human_secs(s.span_s),
            group(s.span_s)
        ),
    )?;
    row(out, "offered load", format!("{:.3}", s.offered_load))?;
    if let Some(m) = s.mean_interarrival_s {
        row(out, "mean inter-arrival", format!("{m:.1} s"))?;
    }
    let z = &s.size;
    row(
        out,
        "sizes",
        format!(
            "serial {:.1} %, power of two {:.1} % of parallel, mean {:.1}, median {}, max {}",
            z.serial_pct, z.pow2_pct_of_parallel, z.mean, z.median, z.max
        ),
    )?;
    let bins = z.histogram.iter().map(|b| {
        let label = if b.from == b.to {
            b.from.to_string()
        } else {
            format!("{}-{}", b.from, b.to)
        };
        let pct = if z.known == 0 {
            0.0
        } else {
            100.0 * b.jobs as f64 / z.known as f64
        };
        vec![label, group(b.jobs as f64), format!("{pct:.1}%")]
    });
    write!(out, "{}", table(&["PEs", "jobs", "%"], 0, bins))?;
    if let Some(q) = &s.runtime_s {
        writeln!(out, "runtime (s)")?;
        let header = [
            "min", "p10", "p25", "median", "p75", "p90", "p99", "max", "mean",
        ];
        let figures = [
            q.min, q.p10, q.p25, q.p50, q.p75, q.p90, q.p99, q.max, q.mean,
        ];
        let row = figures.iter().map(|&x| group(x)).collect();
        write!(out, "{}", table(&header, 0, std::iter::once(row)))?;
    }
    if let Some(m) = s.mean_log_runtime {
        row(out, "mean ln(runtime)", format!("{m:.3}"))?;
    }
    match &s.estimates {
        Some(e) => row(
            out,
            "estimates",
            format!(
                "{} jobs; runtime/request median {:.2}, mean {:.2}; {:.1} % exact, {:.1} % overran",
                group(e.jobs as f64),
                e.accuracy.p50,
                e.accuracy.mean,
                e.exact_pct,
                e.overrun_pct
            ),
        )?,
        None => row(out, "estimates", "none in this workload".into())?,
    }
    let statuses: Vec<String> = s
        .status
        .iter()
        .map(|(k, n)| format!("{k}: {}", group(*n as f64)))
        .collect();
    row(out, "status", statuses.join(", "))?;
    if s.queues.len() > 1 || s.queues.first().is_some_and(|(q, _)| *q >= 0) {
        let queues: Vec<String> = s
            .queues
            .iter()
            .map(|(k, n)| format!("{k}: {}", group(*n as f64)))
            .collect();
        row(out, "queues", queues.join(", "))?;
    }
    let r = &s.read;
    if r.lines > 0 {
        row(
            out,
            "read",
            format!(
                "{} lines: {} jobs, {} comments, {} blank",
                group(r.lines as f64),
                group(r.job_lines as f64),
                group(r.comment_lines as f64),
                group(r.blank_lines as f64)
            ),
        )?;
    }
    if r.skipped_total() > 0 {
        let kinds: Vec<String> = r.skipped.iter().map(|(k, n)| format!("{k} {n}")).collect();
        row(
            out,
            "skipped (lenient)",
            format!("{} lines: {}", r.skipped_total(), kinds.join(", ")),
        )?;
        for e in &r.skipped_examples {
            writeln!(out, "  {e}")?;
        }
    }
    if r.oversize > 0 {
        row(
            out,
            "oversize jobs",
            format!(
                "{} ({} skipped, {} clipped)",
                r.oversize, r.oversize_skipped, r.oversize_clipped
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(group(243_306.0), "243,306");
        assert_eq!(group(12.0), "12");
        assert_eq!(group(-1_000.0), "-1,000");
    }
}
