//! The user's job commands: `submit`, `queue`, `wait`, `cancel`, `suspend`, `resume`, `hold`,
//! `release`, `status` and `output`.

use std::io::Write;
use std::time::Duration;

use cosched_client::views;
use cosched_core::{Dur, JobId};
use cosched_proto::proto::{JobInfo, Request};

use crate::cmd::conn::{ConnArgs, now_us};
use crate::cmd::output::{emit, print_json};
use crate::cmd::submit::{SubmitArgs, bcast_for_job, submit_request};

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Instead: what the communication monitors of this node (name or number) recorded for
    /// each rank of its jobs and of its last ended jobs (docs/monitor.md)
    #[arg(long)]
    node: Option<String>,
}

#[derive(clap::Args)]
pub struct IdsArgs {
    /// Job ids
    #[arg(required = true)]
    ids: Vec<u64>,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct QueueArgs {
    /// Every job ever submitted, not only live and recently ended ones
    #[arg(long)]
    all: bool,
    /// Each live job's expected start and end: a copy of the cluster's policy run forward,
    /// every job taking its time limit and nothing new arriving (not for external policies)
    #[arg(long)]
    forecast: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct WaitArgs {
    /// Job ids
    #[arg(required = true)]
    ids: Vec<u64>,
    /// Give up after this long (exit status 2)
    #[arg(long, default_value = "1h")]
    timeout: Dur,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct IdArgs {
    /// Job id
    pub(super) id: u64,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(clap::Args)]
pub struct OutputArgs {
    /// Job id
    id: u64,
    /// Rank whose output to print
    #[arg(long, default_value_t = 0)]
    rank: u32,
    /// Print the end of a file longer than 4 MiB rather than its beginning
    #[arg(long)]
    tail: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

/// `cosched submit`.
pub(super) fn submit(a: SubmitArgs) -> anyhow::Result<i32> {
    let client = a.conn.client()?;
    let mut cmd = a.cmd;
    if let Some(file) = &a.bcast {
        let sent = bcast_for_job(&a.conn, &client, file, &a.bcast_opts, &mut cmd)?;
        eprintln!(
            "staged {} ({} bytes) on {} nodes in {:.1} ms",
            file.display(),
            sent.bytes,
            sent.nodes.len(),
            sent.took.as_secs_f64() * 1e3
        );
    }
    let mut job = a.job;
    if let Some(file) = &a.bcast
        && job.name.is_none()
    {
        job.name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    let mut req = submit_request(job, cmd)?;
    if a.conn.user_key.is_some() {
        // The credential says who submits; this process's uid may be another's.
        req.user = None;
    }
    let tasks = req.sched.array.as_ref().map(|s| s.indices.len());
    let id = client.submit(req)?;
    if a.conn.json {
        let ids: Vec<u64> = (id.0..id.0 + tasks.unwrap_or(1) as u64).collect();
        print_json(&serde_json::json!({ "id": id.0, "ids": ids }))?;
    } else {
        emit(&format!("{id}\n"));
        if let Some(n) = tasks {
            eprintln!(
                "array job {id}: {n} tasks, jobs {id}..{} (`--dependency afterok:{id}` waits for them all)",
                id.0 + n as u64 - 1
            );
        }
    }
    Ok(0)
}

/// `cosched queue`.
pub(super) fn queue(a: QueueArgs) -> anyhow::Result<i32> {
    let now = now_us();
    // Live jobs and those ended in the last five minutes, selected by the machine
    // manager and fetched page by page.
    let q = cosched_proto::proto::JobQuery {
        since_us: (!a.all).then_some(now - 300_000_000),
        ..Default::default()
    };
    let client = a.conn.client()?;
    let shown: Vec<JobInfo> = client.query(q, None)?;
    let forecast = if a.forecast {
        Some(client.forecast()?)
    } else {
        None
    };
    if a.conn.json {
        let jobs: Vec<_> = shown
            .iter()
            .map(|j| {
                let mut rec = views::acct_record(j);
                if let Some(e) = forecast
                    .as_deref()
                    .and_then(|f| f.iter().find(|e| e.job == j.record.id))
                {
                    rec["expected_start"] = e.start.map(|t| t.as_secs_f64()).into();
                    rec["expected_end"] = e.end.map(|t| t.as_secs_f64()).into();
                }
                rec
            })
            .collect();
        print_json(&serde_json::json!({ "jobs": jobs }))?;
    } else {
        emit(&views::jobs_table_forecast(
            &shown,
            now,
            forecast.as_deref(),
        ));
    }
    Ok(0)
}

/// `cosched wait`.
pub(super) fn wait(a: WaitArgs) -> anyhow::Result<i32> {
    let ids: Vec<JobId> = a.ids.iter().map(|&i| JobId(i)).collect();
    let timeout = Duration::from_micros(a.timeout.as_micros().max(0) as u64);
    let jobs = a.conn.client()?.wait(&ids, timeout)?;
    let ok = jobs
        .iter()
        .all(|j| j.state.as_str() == "completed" && j.record.exit_code == Some(0));
    if a.conn.json {
        print_json(&serde_json::json!({
            "ok": ok, "jobs": jobs.iter().map(views::acct_record).collect::<Vec<_>>()
        }))?;
    } else {
        emit(&views::jobs_table(&jobs, now_us()));
    }
    Ok(if ok { 0 } else { 1 })
}

/// `cosched status`: the machine, or with `--node` what its monitors recorded.
pub(super) fn status(a: StatusArgs) -> anyhow::Result<i32> {
    if a.node.is_some() {
        let m = a
            .conn
            .client()?
            .monitor(a.node.as_deref().expect("checked"))?;
        if a.conn.json {
            print_json(&m)?;
        } else {
            emit(&views::monitor_text(&m));
        }
        Ok(0)
    } else {
        let conn = &a.conn;
        let st = conn.client()?.status()?;
        if conn.json {
            print_json(&st)?;
        } else {
            emit(&views::status_text(&st));
        }
        Ok(0)
    }
}

/// `cosched output`.
pub(super) fn output(a: OutputArgs) -> anyhow::Result<i32> {
    let o = a.conn.client()?.rank_output(JobId(a.id), a.rank, a.tail)?;
    // A file cut to MAX_OUTPUT is said so, with its size.
    if !a.conn.json {
        let part = if a.tail { "last" } else { "first" };
        for (what, got, size) in [
            ("output", o.stdout.len() as u64, o.sizes.0),
            ("error", o.stderr.len() as u64, o.sizes.1),
        ] {
            if size > got {
                eprintln!(
                    "cosched: job {} rank {}'s standard {what} is {size} bytes; showing its {part} {got} (--tail shows the end; the whole file stays on the node)",
                    a.id, a.rank
                );
            }
        }
    }
    let (out, err, files) = (&o.stdout, &o.stderr, &o.files);
    if !files.is_empty() && !a.conn.json {
        eprintln!(
            "cosched: job {} rank {} wrote to {} (its --output/--error)",
            a.id,
            a.rank,
            files.join(" and ")
        );
    }
    if a.conn.json {
        print_json(&serde_json::json!({
            "id": a.id, "rank": a.rank,
            "stdout": String::from_utf8_lossy(out), "stderr": String::from_utf8_lossy(err),
            "files": files,
            "stdout_size": o.sizes.0, "stderr_size": o.sizes.1,
            "truncated": o.cut(), "tail": o.tail,
        }))?;
    } else {
        let _ = std::io::stdout().write_all(out);
        let _ = std::io::stderr().write_all(err);
    }
    Ok(0)
}

/// Holds or releases each job; every id is tried, and the exit status is 1 if any failed.
pub(super) fn many(a: &IdsArgs, req: fn(JobId) -> Request, done: &str) -> anyhow::Result<i32> {
    let client = a.conn.client()?;
    let mut results = Vec::new();
    let mut failed = false;
    for &id in &a.ids {
        match client.simple(req(JobId(id))) {
            Ok(()) => {
                results.push(serde_json::json!({ "id": id, "result": done }));
                if !a.conn.json {
                    emit(&format!("job {id} {done}\n"));
                }
            }
            Err(e) => {
                failed = true;
                results.push(serde_json::json!({ "id": id, "error": e.to_string() }));
                if !a.conn.json {
                    eprintln!("error: job {id}: {e}");
                }
            }
        }
    }
    if a.conn.json {
        print_json(&serde_json::json!({ "jobs": results }))?;
    }
    Ok(if failed { 1 } else { 0 })
}

pub(super) fn simple(a: &IdArgs, req: Request, done: &str) -> anyhow::Result<i32> {
    a.conn.client()?.simple(req)?;
    if a.conn.json {
        print_json(&serde_json::json!({ "id": a.id, "result": done }))?;
    } else {
        emit(&format!("job {} {done}\n", a.id));
    }
    Ok(0)
}
