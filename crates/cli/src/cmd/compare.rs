//! `cosched compare A B`: two schedules of the same jobs set side by side, job by job — a
//! simulation and a real run (`sim --swf-out` against `replay --swf-out`), or two policies.
//! The comparison is `cosched_report::compare`; here: the arguments, the table, the CSV and
//! the scatter plot of start in A against start in B.

use std::path::{Path, PathBuf};

use anyhow::Context;
use cosched_report::compare::{Comparison, Job, Row, compare, load};
use cosched_report::plot::{LineChart, Series, line_chart};
use cosched_report::provenance::{Provenance, csv_table};

use super::output::{emit, print_json, table};

#[derive(clap::Args)]
pub struct Args {
    /// The first schedule (the reference, e.g. the simulation): SWF or jobs CSV
    pub a: PathBuf,
    /// The second schedule (e.g. the real run): SWF or jobs CSV
    pub b: PathBuf,
    /// B's job ids are cluster job ids: translate them to trace ids with this replay state
    /// file (`replay --state`); not needed with `replay --swf-out`, which writes trace ids
    #[arg(long)]
    pub map: Option<PathBuf>,
    /// Write one CSV line per job (both sides' times, the differences, inverted pairs)
    #[arg(long)]
    pub out_csv: Option<PathBuf>,
    /// Draw start in A against start in B (.svg or .png)
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Jobs shown in the table of the largest start differences
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
}

fn opt(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v:.6}"))
}

fn write_csv(path: &Path, c: &Comparison, prov: &Provenance) -> anyhow::Result<()> {
    let header = [
        "id",
        "in",
        "submit_a",
        "submit_b",
        "start_a",
        "start_b",
        "end_a",
        "end_b",
        "d_start",
        "d_end",
        "inverted_pairs",
    ];
    let rows = c.rows.iter().map(|r| {
        let side = match (r.a, r.b) {
            (Some(_), Some(_)) => "both",
            (Some(_), None) => "a",
            _ => "b",
        };
        let f = |j: Option<Job>, g: fn(&Job) -> Option<f64>| opt(j.as_ref().and_then(g));
        vec![
            r.id.to_string(),
            side.to_string(),
            f(r.a, |j| Some(j.submit)),
            f(r.b, |j| Some(j.submit)),
            f(r.a, |j| j.start),
            f(r.b, |j| j.start),
            f(r.a, |j| j.end),
            f(r.b, |j| j.end),
            opt(r.d_start),
            opt(r.d_end),
            r.inverted.to_string(),
        ]
    });
    std::fs::write(path, csv_table(Some(prov), &header, rows))
        .with_context(|| format!("writing {}", path.display()))
}

fn plot(path: &Path, c: &Comparison, a: &Path, b: &Path, prov: Provenance) -> anyhow::Result<()> {
    let points: Vec<(f64, f64)> = c
        .rows
        .iter()
        .filter_map(|r| Some((r.a?.start?, r.b?.start?)))
        .collect();
    let top = points.iter().fold(0.0f64, |m, p| m.max(p.0).max(p.1));
    let name = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        )
    };
    let chart = LineChart {
        x_names: Vec::new(),
        title: format!(
            "start times: {} jobs, {} of {} pairs inverted",
            points.len(),
            c.inverted_pairs,
            c.pairs
        ),
        x_label: format!("start in {} (s from first submit)", name(a)),
        y_label: format!("start in {} (s)", name(b)),
        log_y: false,
        note: String::new(),
        provenance: Some(prov),
        series: vec![
            Series {
                name: "same start".into(),
                points: vec![(0.0, 0.0), (top, top)],
                ..Series::default()
            },
            Series {
                name: "job".into(),
                points,
                markers_only: true,
                ..Series::default()
            },
        ],
    };
    line_chart(path, &chart).map_err(anyhow::Error::msg)
}

fn ids_text(ids: &[u64]) -> String {
    let shown: Vec<String> = ids.iter().take(20).map(u64::to_string).collect();
    let more = ids.len().saturating_sub(20);
    if more > 0 {
        format!("{} … and {more} more", shown.join(" "))
    } else {
        shown.join(" ")
    }
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let ja = load(&a.a)?;
    let mut jb = load(&a.b)?;
    if let Some(map) = &a.map {
        let m = cosched_report::replay::read_mapping(map)?;
        for j in &mut jb {
            if let Some(&t) = m.get(&j.id) {
                j.id = t;
            }
        }
    }
    let c = compare(&a.a, &ja, &a.b, &jb)?;
    // The inputs are read again for their hash only when a file is written.
    if a.out_csv.is_some() || a.plot.is_some() {
        let prov = Provenance::of_bytes(
            &format!("{} vs {}", a.a.display(), a.b.display()),
            &[std::fs::read(&a.a)?, std::fs::read(&a.b)?].concat(),
        );
        if let Some(p) = &a.out_csv {
            write_csv(p, &c, &prov)?;
        }
        if let Some(p) = &a.plot {
            plot(p, &c, &a.a, &a.b, prov)?;
        }
    }
    if a.json {
        print_json(&c)?;
        return Ok(0);
    }
    let mut t = String::new();
    for (tag, s) in [("A", &c.a), ("B", &c.b)] {
        t += &format!(
            "{tag}  {}: {} jobs, {} ended; mean wait {:.3} s, mean response {:.3} s, makespan {:.3} s\n",
            s.file, s.jobs, s.ended, s.mean_wait_s, s.mean_response_s, s.makespan_s
        );
    }
    t += &format!(
        "matched           {} jobs ({} only in A, {} only in B)\n",
        c.matched,
        c.only_a.len(),
        c.only_b.len()
    );
    t += &table(
        &[
            "(s)",
            "n",
            "mean(B-A)",
            "mean|d|",
            "p50|d|",
            "p90|d|",
            "max|d|",
        ],
        1,
        [
            ("submit", &c.d_submit),
            ("start", &c.d_start),
            ("end", &c.d_end),
        ]
        .into_iter()
        .map(|(what, s)| {
            let f = |x: f64| format!("{x:.3}");
            vec![
                what.to_string(),
                s.n.to_string(),
                f(s.mean),
                f(s.mean_abs),
                f(s.p50_abs),
                f(s.p90_abs),
                f(s.max_abs),
            ]
        }),
    );
    let in_pairs = c.rows.iter().filter(|r| r.inverted > 0).count();
    t += &format!(
        "start order       {} of {} pairs inverted (Kendall tau {:.4}); {in_pairs} jobs in an inverted pair\n",
        c.inverted_pairs, c.pairs, c.kendall_tau
    );
    let mut worst: Vec<&Row> = c.rows.iter().filter(|r| r.d_start.is_some()).collect();
    worst.sort_by(|x, y| {
        y.d_start
            .unwrap()
            .abs()
            .total_cmp(&x.d_start.unwrap().abs())
            .then(x.id.cmp(&y.id))
    });
    if a.top > 0 && !worst.is_empty() {
        t += "\n";
        t += &table(
            &["JOB", "START A", "START B", "dSTART", "dEND", "INVERTED"],
            0,
            worst.iter().take(a.top).map(|r| {
                let f = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.3}"));
                vec![
                    r.id.to_string(),
                    f(r.a.and_then(|j| j.start)),
                    f(r.b.and_then(|j| j.start)),
                    f(r.d_start),
                    f(r.d_end),
                    r.inverted.to_string(),
                ]
            }),
        );
    }
    if !c.only_a.is_empty() {
        t += &format!(
            "\nonly in A ({}): {}\n",
            c.only_a.len(),
            ids_text(&c.only_a)
        );
    }
    if !c.only_b.is_empty() {
        t += &format!(
            "\nonly in B ({}): {}\n",
            c.only_b.len(),
            ids_text(&c.only_b)
        );
    }
    emit(&t);
    Ok(0)
}
