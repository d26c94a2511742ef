//! `cosched replay`: a trace played on a running cluster, each job submitted at its
//! (compressed) submit time as a real job of its size whose ranks burn its (compressed)
//! runtime, with its estimate as the time limit; and `cosched burn`, the hidden rank program.
//!
//! What the replay submits is written down exactly (`--trace-out`): the same jobs, sizes and
//! estimates, which `cosched sim` then simulates, so a real run and its simulation can be set
//! side by side with `cosched compare` (docs/reproductions/sim-vs-real.md).
//!
//! Resuming: the state file (`--state`, `cosched_report::replay`) records which trace job
//! became which cluster job, and an intent before each submission, so a replay killed in
//! between finds that one job by name (`replay-<trace id>`) instead of submitting it twice.
//! The plan and the forecast accuracy are computed there too.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use cosched_client::views;
use cosched_core::{Dur, JobId, Time};
use cosched_proto::proto::{JobInfo, JobQuery, SubmitRequest};
use cosched_report::replay::{
    ForecastError, ForecastLine, Planned, State, StateHeader, StateLine, append, forecast_accuracy,
    plan, planned_swf, read_forecast_log, read_state,
};
use cosched_workload::swf::{self, ReadOptions, SwfHeader, SwfRecord};
use cosched_workload::transform::{self, Steps};
use serde::{Deserialize, Serialize};

use super::acct::run_summary;
use super::conn::ConnArgs;
use super::output::{emit, print_json};

/// How a rank spends its runtime.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BurnMode {
    /// Burn CPU time: a rank that is stopped, or shares its core, takes longer
    Cpu,
    /// Sleep in small steps, counting only the time it was not stopped: no CPU used, so
    /// many PEs can share few cores; a gang-suspended rank still does not count the stop
    Sleep,
}

/// The PEs of the nodes on this host (their tree address is a loopback one: an embedded
/// cluster's), which share its cores; removed nodes do not count.
fn local_pes(nodes: &[cosched_proto::proto::NodeInfo]) -> u32 {
    nodes
        .iter()
        .filter(|n| n.state != "removed")
        .filter(|n| {
            n.addr
                .parse::<std::net::SocketAddr>()
                .is_ok_and(|a| a.ip().is_loopback())
        })
        .map(|n| n.pes)
        .sum()
}

/// The burner when `--burn` is not given: CPU time, unless the `local_pes` PEs of this host's
/// nodes outnumber its `cores`: then ranks burning CPU at once would share cores, take
/// longer than their runtime and be killed at their limits (9 of 30 jobs on 8 PEs over 2
/// cores), so they sleep, which costs no core; the line says so.
fn default_burner(local_pes: u32, cores: u32) -> (BurnMode, Option<String>) {
    if local_pes > cores {
        (
            BurnMode::Sleep,
            Some(format!(
                "the nodes on this host have {local_pes} PEs and it has {cores} cores: ranks sleep their runtime instead of burning CPU (--burn cpu to burn anyway)"
            )),
        )
    } else {
        (BurnMode::Cpu, None)
    }
}

/// `cosched burn`: one rank of a replayed job.
#[derive(clap::Args)]
pub struct BurnArgs {
    /// How long to run (CPU time, or wall time while not stopped)
    #[arg(long = "for")]
    pub dur: Dur,
    #[arg(long, value_enum, default_value = "cpu")]
    pub mode: BurnMode,
}

/// The steps of the stop-aware sleep: at most this much of a stop is taken for work.
const SLEEP_STEP: Duration = Duration::from_millis(5);
/// What a step may overrun its sleep by without being on a run queue (timer slack, the
/// wake-up itself).
const SLEEP_SLACK: Duration = Duration::from_millis(2);

/// This process's time on a CPU and waiting on a run queue (`/proc/self/schedstat`).
fn sched_times() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let mut f = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some(Duration::from_nanos(f.next()??.saturating_add(f.next()??)))
}

pub fn burn(a: BurnArgs) -> anyhow::Result<i32> {
    match a.mode {
        BurnMode::Cpu => cosched_client::bench::spin_cpu(a.dur),
        BurnMode::Sleep => {
            // A step counts what it slept plus the time it ran or waited for a CPU: a late
            // wake-up on a busy machine is running time (the time limit counts it so), a
            // stop is not. A stopped or frozen process is on no run queue, so the stop never
            // shows in those times, whether the node manager used SIGSTOP or the cgroup
            // freezer (which sends no signal: a first version that watched for SIGCONT
            // counted frozen time as work; one before it, which took any long step for a
            // stop, undercounted on a loaded machine and a job overran its limit).
            let target = Duration::from_micros(a.dur.as_micros().max(0) as u64);
            let mut done = Duration::ZERO;
            let mut last = std::time::Instant::now();
            let mut busy = sched_times();
            while done < target {
                let ask = SLEEP_STEP.min(target - done);
                std::thread::sleep(ask);
                let now = std::time::Instant::now();
                let busy_now = sched_times();
                let bound = match (busy, busy_now) {
                    (Some(b0), Some(b1)) => ask + b1.saturating_sub(b0) + SLEEP_SLACK,
                    // Without schedstat: a step much longer than asked was a stop.
                    _ => ask + 2 * SLEEP_STEP,
                };
                done += (now - last).min(bound);
                (last, busy) = (now, busy_now);
            }
        }
    }
    Ok(0)
}

/// `cosched replay`.
#[derive(clap::Args)]
pub struct Args {
    /// The trace: SWF (plain or gzip) or a cosched jobs CSV (`sim --jobs-out`)
    pub trace: PathBuf,
    /// Divide every time of the trace (submit, runtime, estimate) by this factor
    #[arg(long, default_value_t = 1.0)]
    pub compress: f64,
    /// Only the jobs submitted in FROM..TO of the trace (before compression: 10d..12d)
    #[arg(long, value_parser = parse_window)]
    pub window: Option<Range<Time>>,
    /// Only the first N jobs (of the window)
    #[arg(long)]
    pub first: Option<usize>,
    /// Scale every job's size by (cluster PEs / trace machine PEs), rounded, at least 1.
    /// Without it a job larger than the cluster is refused
    #[arg(long)]
    pub scale_sizes: bool,
    /// Machine size of the trace in PEs (overrides its header; needed for a header-less SWF
    /// or a jobs CSV with --scale-sizes)
    #[arg(long)]
    pub procs: Option<u32>,
    /// What a rank does for its runtime: burn CPU time, or sleep (counting only the time it
    /// is not stopped) [default: cpu; sleep when the cluster's nodes on this host have more
    /// PEs than it has cores, where burning ranks would share cores and overrun their limits]
    #[arg(long, value_enum)]
    pub burn: Option<BurnMode>,
    /// Added to each job's time limit (its estimate, or its runtime when larger), so that a
    /// rank's start-up does not make it overrun
    #[arg(long, default_value = "1s")]
    pub limit_slack: Dur,
    /// Record the submissions here as they happen; run again with the same file to resume
    /// an interrupted replay (only the jobs not yet submitted are, at their original times)
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Write the jobs as replayed (sizes scaled, times compressed, limits as estimates) as
    /// SWF: `cosched sim --trace` of it simulates exactly what was submitted
    #[arg(long)]
    pub trace_out: Option<PathBuf>,
    /// At the end, write the real schedule as SWF with the trace's job ids (for `compare`)
    #[arg(long)]
    pub swf_out: Option<PathBuf>,
    /// Right after each submission, ask the machine manager for its forecast (as `queue
    /// --forecast`) and append that job's expected start here, one JSON line per job; at the
    /// end, the forecast error against the actual starts is in the summary
    #[arg(long)]
    pub forecast_log: Option<PathBuf>,
    /// Submit and return, without waiting for the jobs to end
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}

fn parse_window(text: &str) -> Result<Range<Time>, String> {
    transform::parse_window(text).map_err(|e| e.to_string())
}

fn now_us() -> i64 {
    cosched_proto::util::now().as_micros()
}

/// The job name of a replayed trace job (found by name when a resume must adopt it).
fn job_name(trace_id: u64) -> String {
    format!("replay-{trace_id}")
}

fn read_input(a: &Args) -> anyhow::Result<(SwfHeader, Vec<SwfRecord>, u32)> {
    if cosched_report::compare::is_jobs_csv(&a.trace)? {
        let records = cosched_report::compare::read_jobs_csv(&a.trace)?;
        let procs = a
            .procs
            .or_else(|| records.iter().filter_map(|r| r.alloc_procs).max())
            .unwrap_or(1);
        return Ok((SwfHeader::default(), records, procs));
    }
    let t = swf::read_trace(
        &a.trace,
        &ReadOptions {
            procs: a.procs,
            lenient: false,
            // Oversize against the cluster is decided here (--scale-sizes), not by the reader.
            oversize: swf::Oversize::Skip,
        },
    )
    .with_context(|| format!("reading {}", a.trace.display()))?;
    Ok((t.header, t.records, t.procs))
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if !(a.compress > 0.0 && a.compress.is_finite()) {
        bail!("--compress must be a positive number, not {}", a.compress);
    }
    let (header, records, trace_pes) = read_input(&a)?;
    let source = a.trace.display().to_string();
    let steps = Steps {
        window: a.window.clone(),
        first: a.first,
        compress: Some(a.compress),
        load: None,
    };
    let (_, records) = transform::apply(header, records, trace_pes, &source, &steps)?;
    let client = a.conn.client()?;
    let status = client
        .status()
        .context("asking the machine manager for its size")?;
    let cluster_pes = status.nodes_total * status.pes_per_node;
    let burn = match a.burn {
        Some(b) => b,
        None => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            let (b, why) = default_burner(local_pes(&status.nodes), cores);
            if let Some(why) = why {
                eprintln!("replay: {why}");
            }
            b
        }
    };
    let (plan, left) = plan(
        &records,
        trace_pes,
        cluster_pes,
        a.scale_sizes,
        a.limit_slack,
    )?;
    if plan.is_empty() {
        bail!(
            "no job to replay in {source} (window and --first leave none, or none has a size and a runtime)"
        );
    }
    if let Some(path) = &a.trace_out {
        let (h, r) = planned_swf(&plan, cluster_pes, &source);
        swf::write_trace_path(path, &h, &r)
            .with_context(|| format!("writing {}", path.display()))?;
    }

    let want = StateHeader {
        replay: 1,
        start_us: now_us(),
        trace: std::fs::canonicalize(&a.trace)
            .unwrap_or_else(|_| a.trace.clone())
            .display()
            .to_string(),
        compress: a.compress,
        window: a
            .window
            .as_ref()
            .map(|w| (w.start.as_micros(), w.end.as_micros())),
        first: a.first,
        scale_sizes: a.scale_sizes,
        jobs: plan.len(),
    };
    let mut st = match &a.state {
        Some(p) => read_state(p)?,
        None => State::default(),
    };
    let start_us = match &st.header {
        Some(h) => {
            let same = StateHeader {
                start_us: h.start_us,
                ..want.clone()
            };
            if *h != same {
                bail!(
                    "--state {}: the state of another replay ({} jobs of {}, compress {}); remove it or pass another file",
                    a.state.as_ref().expect("read").display(),
                    h.jobs,
                    h.trace,
                    h.compress
                );
            }
            h.start_us
        }
        None => want.start_us,
    };
    let mut state_file = match &a.state {
        Some(p) => {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening the state file {}", p.display()))?;
            if st.header.is_none() {
                append(&mut f, &want)?;
            } else if !std::fs::read(p)?.ends_with(b"\n") {
                // A line torn by the kill: the next one starts on a line of its own.
                f.write_all(b"\n")?;
            }
            Some(f)
        }
        None => None,
    };
    if let (Some(p), Some(f)) = (st.pending.take(), state_file.as_mut()) {
        // Killed between an intent and its record: the job may be in the cluster already.
        let q = JobQuery {
            since_us: Some(p.at_us),
            ..Default::default()
        };
        let found = client
            .query(q, None)?
            .into_iter()
            .find(|j| j.name == job_name(p.trace_id) && j.record.submit.as_micros() >= p.at_us);
        if let Some(j) = found {
            let l = StateLine {
                job: Some(j.id().0),
                ..p
            };
            append(f, &l)?;
            st.done.insert(l.trace_id, (j.id().0, l.due_us, l.at_us));
        }
    }
    let resumed = st.done.len();
    if resumed > 0 {
        eprintln!(
            "resuming: {resumed} of {} jobs already submitted; the others at their times from the start {} s ago",
            plan.len(),
            (now_us() - start_us) / 1_000_000
        );
    } else if a.state.is_none() {
        eprintln!("(no --state: this replay cannot be resumed if it is interrupted)");
    }

    let mut forecast_file = match &a.forecast_log {
        Some(p) => {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening the forecast log {}", p.display()))?;
            if std::fs::read(p).is_ok_and(|b| !b.is_empty() && !b.ends_with(b"\n")) {
                f.write_all(b"\n")?;
            }
            Some(f)
        }
        None => None,
    };
    let exe = std::env::current_exe().context("finding the cosched executable")?;
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "/".into());
    let bar = super::progress::bar(
        plan.len() as u64,
        "{bar:40} {pos}/{len} submitted {msg}",
        false,
    );
    bar.set_position(resumed as u64);
    let todo: Vec<&Planned> = plan
        .iter()
        .filter(|p| !st.done.contains_key(&p.trace_id))
        .collect();
    for p in todo {
        let due = start_us + p.at.as_micros();
        let wait = due - now_us();
        if wait > 0 {
            bar.set_message(format!(
                "(next: trace job {} in {:.1} s)",
                p.trace_id,
                wait as f64 / 1e6
            ));
            std::thread::sleep(Duration::from_micros(wait as u64));
        }
        let mut line = StateLine {
            trace_id: p.trace_id,
            job: None,
            due_us: due,
            at_us: now_us(),
        };
        if let Some(f) = state_file.as_mut() {
            append(f, &line)?;
        }
        let req = SubmitRequest {
            procs: p.procs,
            time_limit_us: Some(p.limit.as_micros()),
            class: None,
            name: Some(job_name(p.trace_id)),
            cmd: vec![
                exe.display().to_string(),
                "burn".into(),
                "--for".into(),
                p.runtime.to_string(),
                "--mode".into(),
                format!("{burn:?}").to_lowercase(),
            ],
            cwd: cwd.clone(),
            user: None,
            io: Default::default(),
            sched: Default::default(),
            layout: None,
            hold: false,
            mem: None,
        };
        let id = client
            .submit(req)
            .with_context(|| format!("submitting trace job {}", p.trace_id))?;
        line.job = Some(id.0);
        if let Some(f) = state_file.as_mut() {
            append(f, &line)?;
        }
        st.done.insert(p.trace_id, (id.0, line.due_us, line.at_us));
        if let Some(f) = forecast_file.as_mut() {
            // The same request as `queue --forecast`; the job's own entry is kept. A failed
            // forecast is recorded, not fatal: the replay itself must go on.
            let asked_us = now_us();
            let (expected, error) = match client.forecast() {
                Ok(all) => (
                    all.iter()
                        .find(|e| e.job == id)
                        .and_then(|e| e.start)
                        .map(|t| t.as_micros()),
                    None,
                ),
                Err(e) => (None, Some(e.to_string())),
            };
            append(
                f,
                &ForecastLine {
                    trace_id: p.trace_id,
                    job: id.0,
                    asked_us,
                    expected_start_us: expected,
                    error,
                },
            )?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let ids: Vec<JobId> = st.done.values().map(|&(j, _, _)| JobId(j)).collect();
    let mut lags: Vec<i64> = st.done.values().map(|&(_, due, at)| at - due).collect();
    lags.sort_unstable();
    let lag = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    if a.no_wait {
        emit(&format!(
            "submitted {} jobs ({} before this run); not waiting (--no-wait)\n",
            ids.len(),
            resumed
        ));
        return Ok(0);
    }

    let bar = super::progress::bar(
        ids.len() as u64,
        "{bar:40} {pos}/{len} ended, {elapsed} elapsed",
        false,
    );
    let jobs: Vec<JobInfo> = loop {
        let jobs = client.jobs(&ids)?;
        let ended = jobs.iter().filter(|j| j.state.is_final()).count();
        bar.set_position(ended as u64);
        if ended == jobs.len() {
            break jobs;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    bar.finish_and_clear();
    let status = client.status()?;
    let by_job: HashMap<u64, u64> = st.done.iter().map(|(&t, &(j, _, _))| (j, t)).collect();
    if let Some(path) = &a.swf_out {
        let (mut h, mut records) = views::swf(&jobs, &status);
        for r in &mut records {
            r.job = by_job.get(&r.job).copied().unwrap_or(r.job);
        }
        h.push_line(&format!(
            " Note: cosched replay of {source}: job numbers are the trace's"
        ));
        swf::write_trace_path(path, &h, &records)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let mut states: BTreeMap<&str, usize> = BTreeMap::new();
    for j in &jobs {
        *states.entry(j.state.as_str()).or_default() += 1;
    }
    let all_ok = jobs.iter().all(|j| j.state.as_str() == "completed");
    let summary = run_summary(&jobs, &status);
    let accuracy = match &a.forecast_log {
        Some(p) => {
            let starts: HashMap<u64, i64> = jobs
                .iter()
                .filter_map(|j| Some((j.id().0, j.record.start?.as_micros())))
                .collect();
            Some(forecast_accuracy(&read_forecast_log(p)?, &starts))
        }
        None => None,
    };
    if a.conn.json {
        print_json(&serde_json::json!({
            "trace": source,
            "jobs": ids.len(),
            "resumed": resumed,
            "left_out": left,
            "states": states,
            "submit_lag_ms": { "p50": lag(0.5), "p90": lag(0.9), "max": lag(1.0) },
            "summary": summary,
            "forecast_error": accuracy,
        }))?;
    } else {
        let states: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
        emit(&format!(
            "replayed          {} jobs of {source} ({} submitted before a resume); left out: {} without runtime, {} without size, {} without submit time\n\
             ended             {}\n\
             submit lag        p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms after the due time\n\
             policy            {}\n\
             machine           {} nodes x {} PEs\n",
            ids.len(),
            resumed,
            left.runtime,
            left.size,
            left.submit,
            states.join(", "),
            lag(0.5),
            lag(0.9),
            lag(1.0),
            summary.policy,
            status.nodes_total,
            status.pes_per_node,
        ));
        if let Some(acc) = &accuracy {
            let line = |e: &ForecastError| {
                format!(
                    "{} jobs: |actual - expected| mean {:.3} s, p50 {:.3}, p90 {:.3}, max {:.3}; signed mean {:+.3} s",
                    e.n, e.mean_abs, e.p50_abs, e.p90_abs, e.max_abs, e.mean_signed
                )
            };
            emit(&format!(
                "forecast error    {} ({} logged, {} without a forecast or a start)\n",
                line(&acc.all),
                acc.logged,
                acc.unmatched,
            ));
            emit(&format!("  forecast waiting {}\n", line(&acc.waited)));
        }
        super::sim::print_metrics(&summary);
    }
    Ok(if all_ok { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(addr: &str, pes: u32, state: &str) -> cosched_proto::proto::NodeInfo {
        cosched_proto::proto::NodeInfo {
            id: cosched_core::NodeId(0),
            name: "n".into(),
            state: state.into(),
            addr: addr.into(),
            pes,
            reason: None,
        }
    }

    /// More PEs on this host's nodes than it has cores: ranks sleep, and the line says why;
    /// as many or fewer, or nodes on other hosts: they burn CPU.
    #[test]
    fn ranks_sleep_when_this_hosts_nodes_have_more_pes_than_cores() {
        let embedded = [
            node("127.0.0.1:4001", 4, "up"),
            node("127.0.0.1:4002", 4, "up"),
        ];
        assert_eq!(local_pes(&embedded), 8);
        let (b, why) = default_burner(local_pes(&embedded), 2);
        assert_eq!(b, BurnMode::Sleep);
        assert!(why.unwrap().contains("8 PEs and it has 2 cores"));
        assert_eq!(
            default_burner(local_pes(&embedded), 8),
            (BurnMode::Cpu, None)
        );
        let remote = [
            node("10.0.0.2:4001", 32, "up"),
            node("10.0.0.3:4001", 32, "up"),
        ];
        assert_eq!(default_burner(local_pes(&remote), 2), (BurnMode::Cpu, None));
        let removed = [
            node("127.0.0.1:4001", 2, "up"),
            node("127.0.0.1:4002", 8, "removed"),
        ];
        assert_eq!(
            default_burner(local_pes(&removed), 2),
            (BurnMode::Cpu, None)
        );
    }
}
