//! `cosched acct`: accounting as `sacct` gives it — one row per job, selected by user,
//! state and time window, with the columns asked for (`--format`), as a table or JSON, and
//! the summary metrics of `cosched sim` (mean wait, slowdown, bounded slowdown,
//! utilization) of the jobs selected, computed by the simulator's own metrics code.

use std::path::PathBuf;

use anyhow::Context;
use comfy_table::{CellAlignment, Table, presets};
use cosched_client::views;
use cosched_core::{Dur, MachineShape, Time};
use cosched_proto::proto::{JobInfo, JobState, StatusInfo};
use cosched_report::gantt::{Gantt, GanttJob};
use cosched_report::metrics::Summary;
use cosched_report::provenance::{Provenance, csv_table};
use cosched_workload::swf::write_trace_path;

use super::conn::ConnArgs;
use super::output::{emit, print_json};

/// Columns `--format` knows, in the default order.
const COLUMNS: &[&str] = &[
    "id",
    "name",
    "user",
    "class",
    "state",
    "pes",
    "nodes",
    "submit",
    "start",
    "end",
    "wait",
    "run",
    "suspended",
    "exit",
];
const DEFAULT_FORMAT: &str = "id,name,user,state,pes,nodes,submit,start,end,wait,run,exit";

#[derive(clap::Args)]
pub struct AcctArgs {
    /// Only jobs of these users (names or uids, comma-separated)
    #[arg(short = 'u', long, value_delimiter = ',')]
    user: Vec<String>,
    /// Only jobs in these states (completed, failed, cancelled, timed_out, node_failed,
    /// rejected, queued, running, suspended; or Slurm's CD, F, CA, TO, NF, PD, R, S)
    #[arg(short = 's', long, value_delimiter = ',')]
    state: Vec<String>,
    /// Only jobs not ended before this time (as --begin: now-1h, HH:MM, YYYY-MM-DD[THH:MM])
    #[arg(short = 'S', long)]
    since: Option<String>,
    /// Only jobs submitted by this time (same forms)
    #[arg(short = 'E', long)]
    until: Option<String>,
    /// Columns, comma-separated: id, name, user, class, state, pes, nodes, submit, start,
    /// end, wait, run, suspended, exit
    #[arg(long, default_value = DEFAULT_FORMAT)]
    format: String,
    /// At most this many jobs (the first selected, in id order)
    #[arg(long)]
    limit: Option<usize>,
    /// Also write the selected ended jobs as an SWF trace to this file
    #[arg(long)]
    swf_out: Option<PathBuf>,
    /// Also write the selected jobs as CSV, the --format columns (written with the csv
    /// crate: a name with commas or quotes stays one field; provenance as leading `#` lines)
    #[arg(long, value_name = "FILE.csv")]
    csv_out: Option<PathBuf>,
    /// Draw the selected jobs as a Gantt chart (jobs over PEs and time, utilization and
    /// queue length below; time from the first submission), SVG or PNG by the extension
    #[arg(long, value_name = "FILE.svg|png")]
    gantt_out: Option<PathBuf>,
    /// Time window of --gantt-out, from the first submission: A..B (e.g. 0s..10m)
    #[arg(long, value_name = "A..B", requires = "gantt_out", value_parser = super::sim::parse_window)]
    gantt_window: Option<std::ops::Range<cosched_core::Dur>>,
    /// Instead: the FCS class history of this job's processes as JSON lines (time_s, job,
    /// rank, class: the shape of `cosched cosim --class-history`; time from the job's launch
    /// on each node), from the node managers (docs/daemons.md, "Node schemes")
    #[arg(long, value_name = "JOB")]
    class_history: Option<u64>,
    /// With --class-history: also every local context switch (lines with "switch_in",
    /// "node" and "pe")
    #[arg(long, requires = "class_history")]
    switches: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

pub fn run(a: AcctArgs) -> anyhow::Result<i32> {
    if let Some(job) = a.class_history {
        return class_history(&a, job);
    }
    let columns: Vec<String> = a
        .format
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    if let Some(bad) = columns.iter().find(|c| !COLUMNS.contains(&c.as_str())) {
        anyhow::bail!(
            "--format: unknown column {bad:?} (known: {})",
            COLUMNS.join(", ")
        );
    }
    let states: Vec<JobState> = a
        .state
        .iter()
        .map(|s| state_named(s).ok_or_else(|| anyhow::anyhow!("--state: unknown state {s:?}")))
        .collect::<Result<_, _>>()?;
    let users = Users::load();
    let uids: Vec<u32> = a
        .user
        .iter()
        .map(|u| {
            u.parse()
                .ok()
                .or_else(|| users.uid(u))
                .ok_or_else(|| anyhow::anyhow!("--user: no user {u:?}"))
        })
        .collect::<Result<_, _>>()?;
    let now = cosched_proto::util::now().as_micros();
    let when = |t: &Option<String>, flag: &str| -> anyhow::Result<Option<i64>> {
        t.as_deref()
            .map(|t| super::batch::parse_begin_at(t, now).map_err(|e| e.replace("--begin", flag)))
            .transpose()
            .map_err(anyhow::Error::msg)
    };
    let since = when(&a.since, "--since")?;
    let until = when(&a.until, "--until")?;

    let client = a.conn.client()?;
    let status = client.status()?;
    // The filters are the machine manager's: it answers only the jobs selected, page by
    // page.
    let q = cosched_proto::proto::JobQuery {
        users: uids,
        states,
        since_us: since,
        until_us: until,
        ..Default::default()
    };
    let jobs: Vec<JobInfo> = client.query(q, a.limit)?;
    // The input of a real run's outputs is the records as the machine manager answered them.
    let prov = Provenance::of_bytes(
        &format!(
            "cosched acct: {} job records of the machine manager",
            jobs.len()
        ),
        &serde_json::to_vec(&jobs)?,
    );
    if let Some(path) = &a.swf_out {
        let (mut header, records) = views::swf(&jobs, &status);
        for (k, v) in prov.pairs() {
            header.push_line(&format!(" Provenance-{k}: {v}"));
        }
        write_trace_path(path, &header, &records)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.csv_out {
        let header: Vec<&str> = columns.iter().map(String::as_str).collect();
        let rows = jobs.iter().map(|j| {
            columns
                .iter()
                .map(|c| cell(c, j, &users, now))
                .collect::<Vec<_>>()
        });
        std::fs::write(path, csv_table(Some(&prov), &header, rows))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.gantt_out {
        let g = gantt_of(
            &jobs,
            &status,
            &status.policy,
            a.gantt_window.as_ref(),
            &prov,
        );
        cosched_report::gantt::gantt(path, &g)
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    let summary = run_summary(&jobs, &status);
    if a.conn.json {
        let rows: Vec<serde_json::Value> = jobs
            .iter()
            .map(|j| {
                let mut v = views::acct_record(j);
                v["user"] = serde_json::json!(j.user.map(|u| users.name(u)));
                v["uid"] = serde_json::json!(j.user);
                v["nodes"] = serde_json::json!(j.placement.len());
                v["reason"] = serde_json::json!(j.reason);
                v
            })
            .collect();
        print_json(&serde_json::json!({ "jobs": rows, "summary": summary, "provenance": prov }))?;
        return Ok(0);
    }
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(columns.iter().map(|c| c.to_ascii_uppercase()));
    for j in &jobs {
        t.add_row(columns.iter().map(|c| cell(c, j, &users, now)));
    }
    for (i, c) in columns.iter().enumerate() {
        if let Some(col) = t.column_mut(i)
            && !matches!(c.as_str(), "name" | "user" | "class" | "state")
        {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    emit(&format!("{t}\n\n"));
    emit(&format!(
        "policy            {}\nmachine           {} nodes x {} PEs\njobs              {} selected, {} ended with a run, {} not ended\n",
        summary.policy,
        status.nodes_total,
        status.pes_per_node,
        jobs.len(),
        summary.jobs,
        summary.unfinished
    ));
    super::sim::print_metrics(&summary);
    Ok(0)
}

fn cell(column: &str, j: &JobInfo, users: &Users, now: i64) -> String {
    let r = &j.record;
    let opt_time = |t: Option<Time>| t.map_or_else(|| "-".into(), |t| local_time(t.as_micros()));
    match column {
        "id" => match j.io.array {
            Some(a) => format!("{} ({}_{})", r.id.0, a.job.0, a.index),
            None => r.id.0.to_string(),
        },
        "name" => j.name.clone(),
        "user" => j.user.map_or_else(|| "-".into(), |u| users.name(u)),
        "class" => j.class.clone().unwrap_or_else(|| "-".into()),
        "state" => j.state.as_str().to_string(),
        "pes" => r.procs.to_string(),
        "nodes" => j.placement.len().to_string(),
        "submit" => local_time(r.submit.as_micros()),
        "start" => opt_time(r.start),
        "end" => opt_time(r.end),
        "wait" => {
            let w = r
                .wait()
                .map(|w| w.as_micros())
                .or_else(|| (!j.state.is_final()).then(|| now - r.submit.as_micros()));
            w.map_or_else(|| "-".into(), secs)
        }
        "run" => secs(j.run_us),
        "suspended" => secs(r.suspended.as_micros()),
        "exit" => r.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
        _ => String::new(),
    }
}

/// A real run as a Gantt chart: each job on the PEs its ledger record says it held (the PEs
/// it last held once ended), times in seconds from the first submission; a job that spent
/// time stopped was time-shared.
fn gantt_of(
    jobs: &[JobInfo],
    st: &cosched_proto::proto::StatusInfo,
    policy: &str,
    window: Option<&std::ops::Range<cosched_core::Dur>>,
    prov: &Provenance,
) -> Gantt {
    let t0 = jobs
        .iter()
        .map(|j| j.record.submit)
        .min()
        .unwrap_or(Time::ZERO);
    let at = |t: Time| (t - t0).as_secs_f64();
    let pes = st.nodes_total * st.pes_per_node;
    Gantt {
        title: format!("{policy} on {pes} PEs (a real run)"),
        pes,
        jobs: jobs
            .iter()
            .map(|j| GanttJob {
                id: j.id().0,
                submit: at(j.record.submit),
                start: j.record.start.map(at),
                end: j.record.end.map(at),
                pes: j.record.pes.runs().to_vec(),
                time_shared: j.record.suspended > cosched_core::Dur::ZERO,
            })
            .collect(),
        window: window.map(|w| w.start.as_secs_f64()..w.end.as_secs_f64()),
        provenance: Some(prov.clone()),
    }
}

fn secs(us: i64) -> String {
    format!("{:.2}s", us as f64 / 1e6)
}

/// Local date and time, as sacct shows them (`2026-11-26T09:15:02`).
fn local_time(us: i64) -> String {
    let t = us.div_euclid(1_000_000) as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed struct we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// A state by cosched's name or Slurm's short code.
fn state_named(s: &str) -> Option<JobState> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "completed" | "cd" => JobState::Completed,
        "failed" | "f" => JobState::Failed,
        "cancelled" | "canceled" | "ca" => JobState::Cancelled,
        "timed_out" | "timeout" | "to" => JobState::TimedOut,
        "node_failed" | "node_fail" | "nf" => JobState::NodeFailed,
        "rejected" => JobState::Rejected,
        "out_of_memory" | "oom" => JobState::OutOfMemory,
        "queued" | "pending" | "pd" => JobState::Queued,
        "running" | "r" => JobState::Running,
        "suspended" | "s" => JobState::Suspended,
        _ => return None,
    })
}

/// User names from /etc/passwd (uids shown as numbers when absent).
struct Users(Vec<(String, u32)>);

impl Users {
    fn load() -> Users {
        let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        Users(
            text.lines()
                .filter_map(|l| {
                    let mut f = l.split(':');
                    let name = f.next()?;
                    let uid = f.nth(1)?.parse().ok()?;
                    Some((name.to_string(), uid))
                })
                .collect(),
        )
    }
    fn uid(&self, name: &str) -> Option<u32> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, u)| *u)
    }
    fn name(&self, uid: u32) -> String {
        self.0
            .iter()
            .find(|(_, u)| *u == uid)
            .map_or_else(|| uid.to_string(), |(n, _)| n.clone())
    }
}

/// `--class-history JOB`: asks every node of the job for its observation record (class
/// changes and context switches) and prints the job's lines in time order.
fn class_history(a: &AcctArgs, job: u64) -> anyhow::Result<i32> {
    let client = a.conn.client()?;
    let id = cosched_core::JobId(job);
    let info = client
        .jobs(&[id])?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no job {job}"))?;
    let mut events = Vec::new();
    for p in &info.placement {
        let m = client
            .monitor(&p.node.0.to_string())
            .with_context(|| format!("asking node {} for its record", p.node))?;
        events.extend(m.events.into_iter().filter(|e| e.job == id));
    }
    events.sort_by(|x, y| x.time_s.total_cmp(&y.time_s).then(x.rank.cmp(&y.rank)));
    let mut out = std::io::stdout().lock();
    for e in events {
        let line = if e.switch_in {
            if !a.switches {
                continue;
            }
            serde_json::json!({
                "time_s": e.time_s, "job": job, "rank": e.rank,
                "switch_in": true, "node": e.node, "pe": e.pe,
            })
        } else {
            serde_json::json!({"time_s": e.time_s, "job": job, "rank": e.rank, "class": e.class})
        };
        use std::io::Write;
        writeln!(out, "{line}")?;
    }
    Ok(0)
}

/// The summary `cosched sim` prints, of a real run: every ended job that ran, its runtime
/// being the time it actually ran (stopped time excluded).
pub(super) fn run_summary(jobs: &[JobInfo], st: &StatusInfo) -> Summary {
    let ran = jobs
        .iter()
        .filter(|j| j.record.start.is_some() && j.record.end.is_some())
        .map(|j| (j.record.clone(), Dur::from_micros(j.run_us)));
    cosched_report::metrics::summarize_real(
        &st.policy,
        MachineShape::flat(st.nodes_total.max(1), st.pes_per_node.max(1)),
        ran,
        jobs.iter().filter(|j| !j.state.is_final()).count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_by_either_name() {
        assert_eq!(state_named("CD"), Some(JobState::Completed));
        assert_eq!(state_named("timed_out"), Some(JobState::TimedOut));
        assert_eq!(state_named("PD"), Some(JobState::Queued));
        assert_eq!(state_named("done"), None);
    }
}
