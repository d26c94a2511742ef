//! Job records and cluster status for people and programs: tables, the Ousterhout matrix
//! (like the gangster tool of seed 002), accounting records as JSON, and SWF export (through
//! the workload crate's writer). The cells the MM's dashboard shows too are in
//! `cosched_proto::views`.

use std::fmt::Write;

use serde_json::{Value, json};

use cosched_core::{Dur, Time};
use cosched_workload::swf::{SwfHeader, SwfRecord};

use cosched_proto::proto::{JobInfo, StatusInfo};
use cosched_proto::views::dur;

fn secs(us: i64) -> f64 {
    us as f64 / 1e6
}

fn t_secs(t: Time) -> f64 {
    t.as_secs_f64()
}

/// One accounting record (epoch seconds, fractional).
pub fn acct_record(j: &JobInfo) -> Value {
    let r = &j.record;
    json!({
        "id": r.id.0,
        "name": j.name,
        "class": j.class,
        "user": j.user,
        "gid": j.gid,
        "state": j.state.as_str(),
        "submit": t_secs(r.submit),
        "start": r.start.map(t_secs),
        "end": r.end.map(t_secs),
        "procs": r.procs,
        "pes": r.pes.to_string(),
        "exit_code": r.exit_code,
        "suspended_s": r.suspended.as_secs_f64(),
        "preemptions": r.preemptions,
        "run_s": secs(j.run_us),
        "time_limit_s": j.time_limit_us.map(secs),
        "held": j.held,
        "error": j.error,
        "reason": j.reason,
        "array_job": j.io.array.map(|a| a.job.0),
        "array_index": j.io.array.map(|a| a.index),
        "dependency": j.sched.after.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        "cmd": j.cmd,
    })
}

/// The job table of `queue` (through the table crate `acct` uses, so columns stay aligned
/// whatever the widths: a held state, a long reason).
pub fn jobs_table(jobs: &[JobInfo], now_us: i64) -> String {
    jobs_table_forecast(jobs, now_us, None)
}

/// When a forecast expects something, from now: `+12.00s`, `-` when it has already happened
/// or the job is not in the forecast, `never` when the forecast has it never happen.
fn expected_in(at: Option<Option<Time>>, now_us: i64) -> String {
    match at {
        None => "-".into(),
        Some(None) => "never".into(),
        Some(Some(t)) => format!("+{}", dur(Some((t.as_micros() - now_us).max(0)))),
    }
}

/// The job table of `queue --forecast`: [`jobs_table`] with each live job's EXPECTED START
/// (a waiting job's) and EXPECTED END, from now, when `forecast` is given.
pub fn jobs_table_forecast(
    jobs: &[JobInfo],
    now_us: i64,
    forecast: Option<&[cosched_policy::forecast::Expected]>,
) -> String {
    let mut header = vec![
        "ID", "NAME", "STATE", "PROCS", "WAIT", "RUN", "SUSP", "EXIT", "PES",
    ];
    if forecast.is_some() {
        header.extend(["EXPECTED START", "EXPECTED END"]);
    }
    header.push("REASON/ERROR");
    let mut rows = Vec::with_capacity(jobs.len());
    for j in jobs {
        let r = &j.record;
        let wait = r
            .wait()
            .map(|w| w.as_micros())
            .or_else(|| (!j.state.is_final()).then(|| now_us - r.submit.as_micros()));
        let state = if j.held && !j.state.is_final() {
            format!("{}(held)", j.state.as_str())
        } else {
            j.state.as_str().to_string()
        };
        let pes = r.pes.to_string();
        let mut row = vec![
            r.id.0.to_string(),
            truncate(&j.name, 12),
            state,
            r.procs.to_string(),
            dur(wait),
            dur(Some(j.run_us)),
            dur(Some(r.suspended.as_micros())),
            r.exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            truncate(if pes.is_empty() { "-" } else { &pes }, 10),
        ];
        if let Some(f) = forecast {
            let e = f.iter().find(|e| e.job == r.id);
            // A job that has started shows no expected start.
            let start = e.filter(|_| r.start.is_none()).map(|e| e.start);
            row.push(expected_in(start, now_us));
            row.push(expected_in(e.map(|e| e.end), now_us));
        }
        // Why a queued job waits (Slurm's reason), else why it ended.
        row.push(
            j.reason
                .as_deref()
                .or(j.error.as_deref())
                .unwrap_or("")
                .to_string(),
        );
        rows.push(row);
    }
    let right: &[usize] = if forecast.is_some() {
        &[0, 3, 4, 5, 6, 7, 9, 10]
    } else {
        &[0, 3, 4, 5, 6, 7]
    };
    table(&header, right, rows)
}

/// A table as text (comfy-table, no borders): the header and one line per row, the columns
/// in `right` (figures) aligned right, trailing blanks cut; only the header when there is no
/// row.
fn table(header: &[&str], right: &[usize], rows: Vec<Vec<String>>) -> String {
    use comfy_table::{CellAlignment, Table, presets};
    let empty = rows.is_empty();
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header);
    for row in rows {
        t.add_row(row);
    }
    for &i in right {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let lines = t.lines().map(|l| l.trim_end().to_string() + "\n");
    if empty {
        lines.take(1).collect()
    } else {
        lines.collect()
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('…')).collect()
    }
}

/// What a node's communication monitors recorded, one line per rank (`status --node`).
pub fn monitor_text(m: &cosched_proto::proto::NodeMonitor) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "node {}: {} monitored ranks", m.node, m.procs.len());
    let secs = |ns: u64| format!("{:.3}s", ns as f64 * 1e-9);
    let rows = m.procs.iter().map(|p| {
        let state = if p.live { p.state.as_str() } else { "ended" };
        let last = p.last.as_ref().map_or_else(String::new, |l| {
            format!(
                "{} peer {} {} B, {:.1} µs, {} ago",
                l.kind,
                l.peer,
                l.bytes,
                l.duration_ns as f64 * 1e-3,
                secs(l.ago_ns)
            )
        });
        vec![
            p.job.0.to_string(),
            p.rank.to_string(),
            p.pid.to_string(),
            state.to_string(),
            p.count.to_string(),
            p.bytes.to_string(),
            secs(p.comm_ns),
            p.waits.to_string(),
            p.blocks.to_string(),
            secs(p.blocked_ns),
            last,
        ]
    });
    let header = [
        "JOB", "RANK", "PID", "STATE", "COMMS", "BYTES", "COMM", "WAITS", "BLOCKS", "BLOCKED",
        "LAST",
    ];
    s.push_str(&table(
        &header,
        &[0, 1, 2, 4, 5, 6, 7, 8, 9],
        rows.collect(),
    ));
    s
}

/// The node map and the Ousterhout matrix (rows: slots, columns: PEs grouped by node).
pub fn status_text(st: &StatusInfo) -> String {
    let mut s = String::new();
    let up = st.nodes.iter().filter(|n| n.state == "up").count();
    let _ = writeln!(
        s,
        "policy {}  nodes {up}/{} up  {} PEs per node  tree fan-out {} depth {}  switches sent {}",
        st.policy, st.nodes_total, st.pes_per_node, st.fanout, st.tree_depth, st.switches
    );
    let nodes = st.nodes.iter().map(|n| {
        let first = n.id.0 * st.pes_per_node;
        let pes = cosched_core::PeSet::contiguous(first, n.pes);
        let mut pes = pes.to_string();
        if let Some(c) = &n.reason {
            let _ = write!(
                pes,
                "  ({} by {} at {}Z: {})",
                c.op.as_str(),
                cosched_proto::util::user_name(c.uid),
                cosched_slurm::time::timestamp(Some(c.at_us / 1_000_000), |_| 0),
                c.reason.as_deref().unwrap_or("")
            );
        }
        vec![
            n.id.0.to_string(),
            n.name.clone(),
            n.state.clone(),
            n.addr.clone(),
            pes,
        ]
    });
    s.push('\n');
    s.push_str(&table(
        &["NODE", "NAME", "STATE", "ADDRESS", "PES"],
        &[0],
        nodes.collect(),
    ));
    let width = st
        .slots
        .iter()
        .flatten()
        .chain(st.running.iter())
        .flatten()
        .map(|j| j.0.to_string().len())
        .max()
        .unwrap_or(1)
        .max(2);
    let _ = writeln!(
        s,
        "\nOusterhout matrix (job per PE and slot; * = active slot, . = idle, x = node down)"
    );
    let mut header = String::from("       ");
    for pe in 0..st.running.len() {
        if pe > 0 && (pe as u32).is_multiple_of(st.pes_per_node) {
            header.push_str(" |");
        }
        let _ = write!(header, " {:>width$}", pe);
    }
    let _ = writeln!(s, "{header}");
    let down: Vec<bool> = (0..st.running.len())
        .map(|pe| {
            st.nodes
                .get(pe / st.pes_per_node.max(1) as usize)
                .is_none_or(|n| n.state != "up")
        })
        .collect();
    let row = |cells: &[Option<cosched_core::JobId>]| {
        let mut r = String::new();
        for (pe, c) in cells.iter().enumerate() {
            if pe > 0 && (pe as u32).is_multiple_of(st.pes_per_node) {
                r.push_str(" |");
            }
            let cell = match c {
                Some(j) => j.0.to_string(),
                None if down[pe] => "x".into(),
                None => ".".into(),
            };
            let _ = write!(r, " {cell:>width$}");
        }
        r
    };
    for (i, slot) in st.slots.iter().enumerate() {
        let mark = if st.active_slot == Some(i as u32) {
            '*'
        } else {
            ' '
        };
        let _ = writeln!(s, "slot{i:<2}{mark}{}", row(slot));
    }
    let _ = writeln!(s, "running{}", row(&st.running));
    s
}

/// The ended jobs of a real run as a Standard Workload Format trace (times relative to the
/// first submission, with the header's machine size), for the workload crate's writer — so
/// `cosched workload info` reads it back and a real run can be set beside its simulation.
pub fn swf(jobs: &[JobInfo], st: &StatusInfo) -> (SwfHeader, Vec<SwfRecord>) {
    let t0 = jobs
        .iter()
        .map(|j| j.record.submit)
        .min()
        .unwrap_or(Time::ZERO);
    let mut records = Vec::new();
    for j in jobs.iter().filter(|j| j.state.is_final()) {
        let mut r = SwfRecord {
            job: j.id().0,
            req_procs: Some(j.procs()),
            req_time: j.time_limit_us.map(Dur::from_micros),
            user: j.user,
            ..SwfRecord::default()
        };
        r.set_schedule(&j.record);
        r.submit = Some(Time::ZERO + (j.record.submit - t0));
        records.push(r);
    }
    let mut header = SwfHeader::default();
    let procs = st.nodes_total * st.pes_per_node;
    for line in [
        " Version: 2.2".to_string(),
        " Computer: cosched daemons (a real run)".to_string(),
        format!(" MaxJobs: {}", records.len()),
        format!(" MaxRecords: {}", records.len()),
        format!(" MaxNodes: {}", st.nodes_total),
        format!(" MaxProcs: {procs}"),
        format!(" UnixStartTime: {}", t0.as_secs()),
        format!(
            " Note: written by cosched acct; policy {}, {} nodes x {} PEs",
            st.policy, st.nodes_total, st.pes_per_node
        ),
    ] {
        header.push_line(&line);
    }
    (header, records)
}
