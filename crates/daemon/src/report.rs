//! Job records and cluster status for people and programs: tables, the Ousterhout matrix
//! (like the gangster tool of seed 002), accounting records as JSON, and SWF export.

use std::fmt::Write;

use serde_json::{Value, json};

use crate::proto::{JobInfo, JobState, StatusInfo};

fn secs(us: i64) -> f64 {
    us as f64 / 1e6
}

/// One accounting record (epoch seconds, fractional).
pub fn acct_record(j: &JobInfo) -> Value {
    json!({
        "id": j.id.0,
        "name": j.name,
        "class": j.class,
        "state": j.state.as_str(),
        "submit": secs(j.submit_us),
        "start": j.start_us.map(secs),
        "end": j.end_us.map(secs),
        "procs": j.procs,
        "pes": j.pes,
        "exit_code": j.exit_code,
        "suspended_s": secs(j.suspended_us),
        "run_s": secs(j.run_us),
        "time_limit_s": j.time_limit_us.map(secs),
        "held": j.held,
        "error": j.error,
        "cmd": j.cmd,
    })
}

fn dur(us: Option<i64>) -> String {
    match us {
        None => "-".into(),
        Some(us) if us < 10_000_000 => format!("{:.2}s", secs(us)),
        Some(us) => format!("{:.0}s", secs(us)),
    }
}

/// The job table of `queue` and `acct`.
pub fn jobs_table(jobs: &[JobInfo], now_us: i64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>6}  {:<12} {:<11} {:>5}  {:>8}  {:>8}  {:>8}  {:>4}  {:<10} ERROR",
        "ID", "NAME", "STATE", "PROCS", "WAIT", "RUN", "SUSP", "EXIT", "PES"
    );
    for j in jobs {
        let wait = j
            .start_us
            .map(|s| s - j.submit_us)
            .or_else(|| (!j.state.is_final()).then(|| now_us - j.submit_us));
        let state = if j.held && !j.state.is_final() {
            format!("{}(held)", j.state.as_str())
        } else {
            j.state.as_str().to_string()
        };
        let _ = writeln!(
            s,
            "{:>6}  {:<12} {:<11} {:>5}  {:>8}  {:>8}  {:>8}  {:>4}  {:<10} {}",
            j.id.0,
            truncate(&j.name, 12),
            state,
            j.procs,
            dur(wait),
            dur(Some(j.run_us)),
            dur(Some(j.suspended_us)),
            j.exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            truncate(if j.pes.is_empty() { "-" } else { &j.pes }, 10),
            j.error.as_deref().unwrap_or(""),
        );
    }
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('…')).collect()
    }
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
    let _ = writeln!(
        s,
        "\n{:>4}  {:<10} {:<5} {:<22} PES",
        "NODE", "NAME", "STATE", "ADDRESS"
    );
    for n in &st.nodes {
        let first = n.id.0 * st.pes_per_node;
        let pes = cosched_core::PeSet::contiguous(first, n.pes);
        let _ = writeln!(
            s,
            "{:>4}  {:<10} {:<5} {:<22} {pes}",
            n.id.0, n.name, n.state, n.addr
        );
    }
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

/// The Standard Workload Format (18 fields per job; times relative to the first submission),
/// so a real run can be set beside its simulation.
pub fn swf(jobs: &[JobInfo]) -> String {
    let t0 = jobs.iter().map(|j| j.submit_us).min().unwrap_or(0);
    let mut s = String::from("; SWF written by cosched acct (real run on the cosched daemons)\n");
    let _ = writeln!(s, "; UnixStartTime: {}", t0 / 1_000_000);
    for j in jobs.iter().filter(|j| j.state.is_final()) {
        let wait = j
            .start_us
            .map(|st| (st - j.submit_us) / 1_000_000)
            .unwrap_or(-1);
        let run = match (j.start_us, j.end_us) {
            (Some(a), Some(b)) => (b - a) / 1_000_000,
            _ => -1,
        };
        let status = match j.state {
            JobState::Completed => 1,
            JobState::Cancelled => 5,
            _ => 0,
        };
        let req_time = j.time_limit_us.map(|t| t / 1_000_000).unwrap_or(-1);
        let procs = if j.start_us.is_some() {
            j.procs as i64
        } else {
            -1
        };
        let _ = writeln!(
            s,
            "{} {} {} {} {} -1 -1 {} {} -1 {} {} -1 -1 -1 -1 -1 -1",
            j.id.0,
            (j.submit_us - t0) / 1_000_000,
            wait,
            run,
            procs,
            j.procs,
            req_time,
            status,
            j.user.map(|u| u as i64).unwrap_or(-1),
        );
    }
    s
}
