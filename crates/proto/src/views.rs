//! Cells of job and cluster views that both the MM's dashboard and the client's tables show;
//! the tables themselves, accounting records and SWF export are `cosched_client::views`.

use crate::proto::StatusInfo;

fn secs(us: i64) -> f64 {
    us as f64 / 1e6
}

/// A duration for a table cell (`-` when there is none).
pub fn dur(us: Option<i64>) -> String {
    match us {
        None => "-".into(),
        Some(us) if us < 10_000_000 => format!("{:.2}s", secs(us)),
        Some(us) => format!("{:.0}s", secs(us)),
    }
}

/// The slots of the Ousterhout matrix job `id` is in (`0,2`), `-` when none (`top` and the
/// dashboard).
pub fn job_slots(st: &StatusInfo, id: cosched_core::JobId) -> String {
    let s: Vec<String> = st
        .slots
        .iter()
        .enumerate()
        .filter(|(_, row)| row.contains(&Some(id)))
        .map(|(i, _)| i.to_string())
        .collect();
    if s.is_empty() {
        "-".into()
    } else {
        s.join(",")
    }
}
