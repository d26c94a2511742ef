//! `cosched compare A B`: two schedules of the same jobs set side by side, job by job — a
//! simulation and a real run (`sim --swf-out` against `replay --swf-out`), or two policies.
//!
//! Each side is an SWF file or a cosched jobs CSV (`sim --jobs-out`). Times are taken from
//! each side's first submission, so a real run (epoch times) and a simulation (trace times)
//! line up. Jobs are matched by id; a job found on one side only is listed, never dropped.
//! Reported: per-job differences of start and end (B − A), their distribution, the pairs of
//! jobs whose start order differs (a Kendall-tau count), each side's own summary, and a
//! scatter plot of start in A against start in B drawn with the simulator's plotting code.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cosched_core::{Dur, Time};
use cosched_report::plot::{LineChart, Series, line_chart};
use cosched_report::provenance::{Provenance, csv_table};
use cosched_workload::swf::{self, ReadOptions, SwfRecord};
use serde::Serialize;

use super::output::{emit, print_json};

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

/// One job of a schedule; seconds from the side's first submission.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Job {
    pub id: u64,
    pub submit: f64,
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub procs: Option<u32>,
}

/// True when `path` is a cosched jobs CSV (`sim --jobs-out`, `acct --csv-out`): its first
/// line that is not a `#` provenance comment is the header `id,submit,…`.
pub fn is_jobs_csv(path: &Path) -> anyhow::Result<bool> {
    let f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    for line in std::io::BufReader::new(f).lines() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if !line.starts_with('#') {
            return Ok(line.starts_with("id,submit,"));
        }
    }
    Ok(false)
}

/// The rows of a jobs CSV as column → value maps (`file:line` in errors), read with the `csv`
/// crate: quoted fields (a job name with a comma) and `#` provenance lines are understood.
fn csv_rows(path: &Path) -> anyhow::Result<Vec<(usize, HashMap<String, String>)>> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_path(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let header: Vec<String> = r
        .headers()
        .with_context(|| format!("{}: no header", path.display()))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!("{}:{line}: {e}", path.display())
        })?;
        let line = rec.position().map_or(0, |p| p.line()) as usize;
        rows.push((
            line,
            header
                .iter()
                .cloned()
                .zip(rec.iter().map(str::to_string))
                .collect(),
        ));
    }
    Ok(rows)
}

/// A field of a CSV row in seconds (`None` when empty).
fn secs_field(
    path: &Path,
    line: usize,
    row: &HashMap<String, String>,
    col: &str,
) -> anyhow::Result<Option<f64>> {
    match row.get(col).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map(Some)
            .with_context(|| format!("{}:{line}: {col} {v:?} is not a number", path.display())),
    }
}

fn id_field(path: &Path, line: usize, row: &HashMap<String, String>) -> anyhow::Result<u64> {
    let v = row.get("id").map(String::as_str).unwrap_or("");
    v.parse()
        .with_context(|| format!("{}:{line}: id {v:?} is not a job number", path.display()))
}

/// A jobs CSV as trace records for `replay`: size from `procs`, runtime from `runtime`,
/// estimate from `estimate`.
pub fn read_jobs_csv(path: &Path) -> anyhow::Result<Vec<SwfRecord>> {
    let dur = |s: Option<f64>| s.map(Dur::from_secs_f64);
    csv_rows(path)?
        .into_iter()
        .map(|(line, row)| {
            Ok(SwfRecord {
                job: id_field(path, line, &row)?,
                submit: secs_field(path, line, &row, "submit")?
                    .map(|s| Time::from_micros((s * 1e6).round() as i64)),
                run: dur(secs_field(path, line, &row, "runtime")?),
                req_time: dur(secs_field(path, line, &row, "estimate")?),
                alloc_procs: secs_field(path, line, &row, "procs")?.map(|p| p as u32),
                ..SwfRecord::default()
            })
        })
        .collect()
}

/// A schedule (SWF or jobs CSV) as jobs, rebased to its first submission.
pub fn load(path: &Path) -> anyhow::Result<Vec<Job>> {
    let mut jobs: Vec<Job> = if is_jobs_csv(path)? {
        csv_rows(path)?
            .into_iter()
            .map(|(line, row)| {
                let us = |col| -> anyhow::Result<Option<f64>> {
                    Ok(secs_field(path, line, &row, col)?.map(|s| (s * 1e6).round()))
                };
                Ok(Job {
                    id: id_field(path, line, &row)?,
                    submit: us("submit")?.unwrap_or(f64::NAN),
                    start: us("start")?,
                    end: us("end")?,
                    procs: secs_field(path, line, &row, "procs")?.map(|p| p as u32),
                })
            })
            .collect::<anyhow::Result<_>>()?
    } else {
        // The machine size only matters to the reader for oversize jobs; a schedule is
        // compared as written.
        let t = swf::read_trace(
            path,
            &ReadOptions {
                procs: Some(1 << 30),
                ..ReadOptions::default()
            },
        )
        .with_context(|| format!("reading {}", path.display()))?;
        t.records
            .iter()
            .map(|r| {
                // Whole microseconds (exact in an f64): jobs that start at one instant
                // keep equal starts, which the order comparison relies on.
                let submit = r.submit.map_or(f64::NAN, |t| t.as_micros() as f64);
                let start = r.wait.map(|w| submit + w.as_micros() as f64);
                Job {
                    id: r.job,
                    submit,
                    start,
                    end: start.and_then(|s| r.run.map(|d| s + d.as_micros() as f64)),
                    procs: r.size(),
                }
            })
            .collect()
    };
    let t0 = jobs
        .iter()
        .map(|j| j.submit)
        .filter(|s| s.is_finite())
        .fold(f64::INFINITY, f64::min);
    let t0 = if t0.is_finite() { t0 } else { 0.0 };
    // Microseconds until here; seconds from the first submission from here on.
    let secs = |us: f64| (us - t0) / 1e6;
    for j in &mut jobs {
        j.submit = secs(j.submit);
        j.start = j.start.map(secs);
        j.end = j.end.map(secs);
    }
    Ok(jobs)
}

/// A distribution of differences (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    pub n: usize,
    /// Mean of B − A (the sign says which side is later).
    pub mean: f64,
    pub mean_abs: f64,
    pub p50_abs: f64,
    pub p90_abs: f64,
    pub max_abs: f64,
}

impl Stats {
    fn of(d: &[f64]) -> Stats {
        if d.is_empty() {
            return Stats::default();
        }
        let n = d.len();
        let mut abs: Vec<f64> = d.iter().map(|x| x.abs()).collect();
        abs.sort_by(f64::total_cmp);
        // Nearest rank.
        let q = |p: f64| abs[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Stats {
            n,
            mean: d.iter().sum::<f64>() / n as f64,
            mean_abs: abs.iter().sum::<f64>() / n as f64,
            p50_abs: q(0.5),
            p90_abs: q(0.9),
            max_abs: abs[n - 1],
        }
    }
}

/// One side's own summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SideSummary {
    pub file: String,
    pub jobs: usize,
    pub ended: usize,
    pub mean_wait_s: f64,
    pub mean_response_s: f64,
    /// Last end, from the first submission.
    pub makespan_s: f64,
}

fn side_summary(file: &Path, jobs: &[Job]) -> SideSummary {
    let ended: Vec<&Job> = jobs
        .iter()
        .filter(|j| j.start.is_some() && j.end.is_some())
        .collect();
    let n = ended.len().max(1) as f64;
    SideSummary {
        file: file.display().to_string(),
        jobs: jobs.len(),
        ended: ended.len(),
        mean_wait_s: ended
            .iter()
            .map(|j| j.start.unwrap() - j.submit)
            .sum::<f64>()
            / n,
        mean_response_s: ended.iter().map(|j| j.end.unwrap() - j.submit).sum::<f64>() / n,
        makespan_s: ended.iter().map(|j| j.end.unwrap()).fold(0.0, f64::max),
    }
}

/// One job in the comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub id: u64,
    pub a: Option<Job>,
    pub b: Option<Job>,
    /// start in B − start in A.
    pub d_start: Option<f64>,
    pub d_end: Option<f64>,
    /// Pairs this job is in whose start order differs between A and B.
    pub inverted: u64,
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub a: SideSummary,
    pub b: SideSummary,
    /// Every job of either side, by id.
    pub rows: Vec<Row>,
    pub only_a: Vec<u64>,
    pub only_b: Vec<u64>,
    pub matched: usize,
    /// Submit times differ too in a real run: the replay submits a little late.
    pub d_submit: Stats,
    pub d_start: Stats,
    pub d_end: Stats,
    /// Pairs of jobs started on both sides whose start order differs (ties are not).
    pub inverted_pairs: u64,
    pub pairs: u64,
    /// Kendall's tau over those pairs: 1 − 2·inverted/pairs.
    pub kendall_tau: f64,
}

/// Compares two schedules (jobs rebased as [`load`] does).
pub fn compare(a_file: &Path, a: &[Job], b_file: &Path, b: &[Job]) -> anyhow::Result<Comparison> {
    let index = |jobs: &[Job], file: &Path| -> anyhow::Result<BTreeMap<u64, Job>> {
        let mut m = BTreeMap::new();
        for j in jobs {
            if m.insert(j.id, *j).is_some() {
                bail!("{}: job {} appears twice", file.display(), j.id);
            }
        }
        Ok(m)
    };
    let (ma, mb) = (index(a, a_file)?, index(b, b_file)?);
    let mut ids: Vec<u64> = ma.keys().chain(mb.keys()).copied().collect();
    ids.sort_unstable();
    ids.dedup();
    let mut rows: Vec<Row> = ids
        .iter()
        .map(|id| {
            let (ja, jb) = (ma.get(id).copied(), mb.get(id).copied());
            let diff = |f: fn(&Job) -> Option<f64>| Some(f(&jb?)? - f(&ja?)?);
            Row {
                id: *id,
                a: ja,
                b: jb,
                d_start: diff(|j| j.start),
                d_end: diff(|j| j.end),
                inverted: 0,
            }
        })
        .collect();
    // Start order: the jobs started on both sides, ordered by (start A, start B); an
    // inverted pair is one whose later job in A starts strictly earlier in B.
    let mut both: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].d_start.is_some())
        .collect();
    let sa = |r: &Row| r.a.and_then(|j| j.start).unwrap_or(0.0);
    let sb = |r: &Row| r.b.and_then(|j| j.start).unwrap_or(0.0);
    both.sort_by(|&x, &y| {
        sa(&rows[x])
            .total_cmp(&sa(&rows[y]))
            .then(sb(&rows[x]).total_cmp(&sb(&rows[y])))
    });
    let bs: Vec<f64> = both.iter().map(|&i| sb(&rows[i])).collect();
    let counts = inversions(&bs);
    for (k, &i) in both.iter().enumerate() {
        rows[i].inverted = counts[k];
    }
    let inverted_pairs = counts.iter().sum::<u64>() / 2;
    let n = both.len() as u64;
    let pairs = n * n.saturating_sub(1) / 2;
    let d = |f: fn(&Row) -> Option<f64>| Stats::of(&rows.iter().filter_map(f).collect::<Vec<_>>());
    Ok(Comparison {
        a: side_summary(a_file, a),
        b: side_summary(b_file, b),
        only_a: rows
            .iter()
            .filter(|r| r.b.is_none())
            .map(|r| r.id)
            .collect(),
        only_b: rows
            .iter()
            .filter(|r| r.a.is_none())
            .map(|r| r.id)
            .collect(),
        matched: rows
            .iter()
            .filter(|r| r.a.is_some() && r.b.is_some())
            .count(),
        d_submit: d(|r| Some(r.b?.submit - r.a?.submit)),
        d_start: d(|r| r.d_start),
        d_end: d(|r| r.d_end),
        inverted_pairs,
        pairs,
        kendall_tau: if pairs == 0 {
            1.0
        } else {
            1.0 - 2.0 * inverted_pairs as f64 / pairs as f64
        },
        rows,
    })
}

/// For each element of `v`, the number of pairs it is in that are strictly inverted (an
/// earlier element greater, or a later one smaller): a Fenwick tree over ranks, O(n log n),
/// so a whole archive log compares in a moment.
pub fn inversions(v: &[f64]) -> Vec<u64> {
    let n = v.len();
    let mut sorted: Vec<f64> = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let rank = |x: f64| sorted.partition_point(|&y| y < x); // 0-based
    let m = sorted.len();
    let mut out = vec![0u64; n];
    // Earlier elements greater than v[k].
    let mut tree = vec![0u64; m + 1];
    for k in 0..n {
        let r = rank(v[k]);
        let le = prefix(&tree, r + 1);
        out[k] += k as u64 - le;
        add(&mut tree, r + 1);
    }
    // Later elements smaller than v[k].
    let mut tree = vec![0u64; m + 1];
    for k in (0..n).rev() {
        let r = rank(v[k]);
        out[k] += prefix(&tree, r);
        add(&mut tree, r + 1);
    }
    out
}

fn add(tree: &mut [u64], mut i: usize) {
    while i < tree.len() {
        tree[i] += 1;
        i += i & i.wrapping_neg();
    }
}

/// Sum of the first `i` positions.
fn prefix(tree: &[u64], mut i: usize) -> u64 {
    let mut s = 0;
    while i > 0 {
        s += tree[i];
        i -= i & i.wrapping_neg();
    }
    s
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
        let m = super::replay::read_mapping(map)?;
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
    t += "                  n      mean(B-A)  mean|d|    p50|d|    p90|d|    max|d|   (s)\n";
    for (what, s) in [
        ("submit", &c.d_submit),
        ("start", &c.d_start),
        ("end", &c.d_end),
    ] {
        t += &format!(
            "{what:<12} {:>7} {:>12.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}\n",
            s.n, s.mean, s.mean_abs, s.p50_abs, s.p90_abs, s.max_abs
        );
    }
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
        t += &format!(
            "\n{:>10} {:>12} {:>12} {:>10} {:>10} {:>9}\n",
            "JOB", "START A", "START B", "dSTART", "dEND", "INVERTED"
        );
        for r in worst.iter().take(a.top) {
            t += &format!(
                "{:>10} {:>12.3} {:>12.3} {:>10.3} {:>10} {:>9}\n",
                r.id,
                r.a.and_then(|j| j.start).unwrap_or(f64::NAN),
                r.b.and_then(|j| j.start).unwrap_or(f64::NAN),
                r.d_start.unwrap_or(f64::NAN),
                r.d_end.map_or("-".into(), |d| format!("{d:.3}")),
                r.inverted
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, submit: f64, start: Option<f64>, end: Option<f64>) -> Job {
        Job {
            id,
            submit,
            start,
            end,
            procs: Some(1),
        }
    }

    /// All pairs, the slow way.
    fn brute(v: &[f64]) -> Vec<u64> {
        (0..v.len())
            .map(|k| {
                (0..v.len())
                    .filter(|&i| (i < k && v[i] > v[k]) || (i > k && v[i] < v[k]))
                    .count() as u64
            })
            .collect()
    }

    #[test]
    fn inversions_match_the_pairwise_count() {
        assert_eq!(inversions(&[1.0, 2.0, 3.0]), vec![0, 0, 0]);
        assert_eq!(inversions(&[3.0, 2.0, 1.0]), vec![2, 2, 2]);
        // Ties are not inversions.
        assert_eq!(inversions(&[1.0, 1.0, 0.5]), vec![1, 1, 2]);
        let mut x = 7u64;
        let v: Vec<f64> = (0..200)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 50) as f64
            })
            .collect();
        assert_eq!(inversions(&v), brute(&v));
    }

    #[test]
    fn compare_counts_inversions_and_lists_missing_jobs() {
        let p = Path::new("x");
        let a = vec![
            job(1, 0.0, Some(0.0), Some(10.0)),
            job(2, 1.0, Some(10.0), Some(20.0)),
            job(3, 2.0, Some(20.0), Some(30.0)),
            job(4, 3.0, Some(30.0), Some(40.0)),
            job(5, 4.0, None, None),
        ];
        // B swaps 2 and 3, starts 4 later, lacks 1's partner 5 and has 6.
        let b = vec![
            job(1, 0.0, Some(0.0), Some(10.0)),
            job(2, 1.0, Some(21.0), Some(31.0)),
            job(3, 2.0, Some(11.0), Some(21.0)),
            job(4, 3.0, Some(35.0), Some(45.0)),
            job(6, 5.0, Some(50.0), Some(60.0)),
        ];
        let c = compare(p, &a, p, &b).unwrap();
        assert_eq!(c.only_a, vec![5]);
        assert_eq!(c.only_b, vec![6]);
        assert_eq!(c.matched, 4);
        assert_eq!(c.rows.len(), 6, "every job of either side is a row");
        assert_eq!((c.inverted_pairs, c.pairs), (1, 6));
        let inv: Vec<(u64, u64)> = c.rows.iter().map(|r| (r.id, r.inverted)).collect();
        assert_eq!(inv, vec![(1, 0), (2, 1), (3, 1), (4, 0), (5, 0), (6, 0)]);
        assert!((c.kendall_tau - (1.0 - 2.0 / 6.0)).abs() < 1e-12);
        // Start differences 0, 11, -9, 5: |d| sorted 0, 5, 9, 11.
        assert_eq!(c.d_start.n, 4);
        assert!((c.d_start.mean - 7.0 / 4.0).abs() < 1e-12);
        assert!((c.d_start.mean_abs - 25.0 / 4.0).abs() < 1e-12);
        assert_eq!((c.d_start.p50_abs, c.d_start.max_abs), (5.0, 11.0));
        assert_eq!(c.a.ended, 4);
    }

    #[test]
    fn load_rebases_swf_and_csv_to_the_first_submit() {
        let dir = std::env::temp_dir().join(format!("cosched-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("j.csv");
        std::fs::write(
            &csv,
            "id,submit,start,end,procs,runtime,estimate,wait,response,slowdown,bounded_slowdown,suspended,preemptions,outcome\n\
             4,100,105.5,110,2,4.5,10,5.5,10,1,1,0,0,completed\n\
             5,101,,,1,3,3,,,,,0,0,\n",
        )
        .unwrap();
        let j = load(&csv).unwrap();
        assert_eq!(j[0], job(4, 0.0, Some(5.5), Some(10.0)).clone_with_procs(2));
        assert_eq!((j[1].submit, j[1].start), (1.0, None));
        let recs = read_jobs_csv(&csv).unwrap();
        assert_eq!(recs[0].run, Some(Dur::from_millis(4_500)));
        // As `sim --jobs-out` writes it now: provenance comment lines first, and a quoted
        // field holding a comma.
        let stamped = dir.join("stamped.csv");
        std::fs::write(
            &stamped,
            "# generator: cosched 0.1.0\n# command: cosched sim\n\
             id,submit,start,end,procs,runtime,estimate,user,queue,name\n\
             4,100,105.5,110,2,4.5,10,1,2,\"a, b\"\n",
        )
        .unwrap();
        assert!(is_jobs_csv(&stamped).unwrap());
        let j = load(&stamped).unwrap();
        assert_eq!(j[0], job(4, 0.0, Some(5.5), Some(10.0)).clone_with_procs(2));
        let swf = dir.join("s.swf");
        std::fs::write(
            &swf,
            "; MaxProcs: 4\n7 1000 5 20 2 -1 -1 2 30 -1 1 -1 -1 -1 -1 -1 -1 -1\n8 1010 -1 -1 1 -1 -1 1 30 -1 5 -1 -1 -1 -1 -1 -1 -1\n",
        )
        .unwrap();
        let j = load(&swf).unwrap();
        assert_eq!(j[0], job(7, 0.0, Some(5.0), Some(25.0)).clone_with_procs(2));
        assert_eq!((j[1].submit, j[1].start), (10.0, None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn jobs_started_at_one_instant_tie_whatever_their_submit_times() {
        // 0.1 + 0.5 and 0.2 + 0.4 differ in floating point; both jobs started at 0.6 s.
        let dir = std::env::temp_dir().join(format!("cosched-compare-tie-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line =
            |id, sub, wait| format!("{id} {sub} {wait} 1 1 -1 -1 1 9 -1 1 -1 -1 -1 -1 -1 -1 -1\n");
        let (a, b) = (dir.join("a.swf"), dir.join("b.swf"));
        std::fs::write(
            &a,
            format!("; MaxProcs: 4\n{}{}", line(1, 0.1, 0.5), line(2, 0.2, 0.4)),
        )
        .unwrap();
        std::fs::write(
            &b,
            format!("; MaxProcs: 4\n{}{}", line(1, 0.1, 1.0), line(2, 0.2, 0.8)),
        )
        .unwrap();
        let (ja, jb) = (load(&a).unwrap(), load(&b).unwrap());
        assert_eq!(ja[0].start, ja[1].start);
        let c = compare(&a, &ja, &b, &jb).unwrap();
        assert_eq!(c.inverted_pairs, 0, "a tie in A is no inversion");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    impl Job {
        fn clone_with_procs(mut self, p: u32) -> Job {
            self.procs = Some(p);
            self
        }
    }
}
