//! Two schedules of the same jobs side by side, job by job (`cosched compare A B`): a
//! simulation and a real run, or two policies.
//!
//! Each side is an SWF file or a cosched jobs CSV (what [`crate::run_files`] writes). Times are
//! taken from each side's first submission, so a real run (epoch times) and a simulation
//! (trace times) line up. Jobs are matched by id; a job found on one side only is listed, never
//! dropped. Computed: per-job differences of start and end (B − A), their distribution, the
//! pairs of jobs whose start order differs (a Kendall-tau count, with a Fenwick tree), and each
//! side's own summary.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use cosched_core::{Dur, Time};
use cosched_workload::swf::{self, ReadOptions, SwfError, SwfRecord};
use serde::Serialize;

/// Why a schedule could not be read or compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: {source}", path.display())]
    Csv {
        path: PathBuf,
        line: u64,
        source: csv::Error,
    },
    #[error("{}:{line}: {what}", path.display())]
    Field {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error("reading {}: {source}", path.display())]
    Swf { path: PathBuf, source: SwfError },
    #[error("{}: job {job} appears twice: a schedule lists each job once", path.display())]
    Twice { path: PathBuf, job: u64 },
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
pub fn is_jobs_csv(path: &Path) -> Result<bool, CompareError> {
    let read = |source| CompareError::Read {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(read)?;
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(read)?;
        if !line.starts_with('#') {
            return Ok(line.starts_with("id,submit,"));
        }
    }
    Ok(false)
}

/// A CSV row: column → value.
type Fields = HashMap<String, String>;

/// The rows of a jobs CSV as column → value maps (`file:line` in errors), read with the `csv`
/// crate: quoted fields (a job name with a comma) and `#` provenance lines are understood.
fn csv_rows(path: &Path) -> Result<Vec<(usize, Fields)>, CompareError> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| CompareError::Csv {
            path: path.to_path_buf(),
            line: 0,
            source: e,
        })?;
    let header: Vec<String> = r
        .headers()
        .map_err(|e| CompareError::Csv {
            path: path.to_path_buf(),
            line: 1,
            source: e,
        })?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| CompareError::Csv {
            path: path.to_path_buf(),
            line: e.position().map_or(0, |p| p.line()),
            source: e,
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
) -> Result<Option<f64>, CompareError> {
    match row.get(col).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| CompareError::Field {
                path: path.to_path_buf(),
                line,
                what: format!("{col} {v:?} is not a number"),
            }),
    }
}

fn id_field(path: &Path, line: usize, row: &HashMap<String, String>) -> Result<u64, CompareError> {
    let v = row.get("id").map(String::as_str).unwrap_or("");
    v.parse().map_err(|_| CompareError::Field {
        path: path.to_path_buf(),
        line,
        what: format!("id {v:?} is not a job number"),
    })
}

/// A jobs CSV as trace records for `replay`: size from `procs`, runtime from `runtime`,
/// estimate from `estimate`.
pub fn read_jobs_csv(path: &Path) -> Result<Vec<SwfRecord>, CompareError> {
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
pub fn load(path: &Path) -> Result<Vec<Job>, CompareError> {
    let mut jobs: Vec<Job> = if is_jobs_csv(path)? {
        csv_rows(path)?
            .into_iter()
            .map(|(line, row)| {
                let us = |col| -> Result<Option<f64>, CompareError> {
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
            .collect::<Result<_, CompareError>>()?
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
        .map_err(|e| CompareError::Swf {
            path: path.to_path_buf(),
            source: e,
        })?;
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
pub fn compare(
    a_file: &Path,
    a: &[Job],
    b_file: &Path,
    b: &[Job],
) -> Result<Comparison, CompareError> {
    let index = |jobs: &[Job], file: &Path| -> Result<BTreeMap<u64, Job>, CompareError> {
        let mut m = BTreeMap::new();
        for j in jobs {
            if m.insert(j.id, *j).is_some() {
                return Err(CompareError::Twice {
                    path: file.to_path_buf(),
                    job: j.id,
                });
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
