//! A model of launch time and heartbeat cost against node count and tree fan-out (seed 003
//! §3.3, Eq. 3 and Fig. 10), fitted by least squares on the measurements `cosched cluster
//! bench launch|bcast|compare --csv FILE` writes, and extrapolated to node counts no machine
//! here has (`cosched cluster model`).
//!
//! Seed 003 models a launch as `T = S / BW_transfer(N) + T_exec`, the bandwidth limited by
//! the slowest pipeline stage. Here the terms are linear in their parameters, so one weighted
//! least-squares solve fits each:
//!
//! - send `= a + S·(b + c·N) + d·D`: a fixed cost, a per-MB cost at the root (read, hash),
//!   a per-MB cost per node copy (receive, authenticate, verify, write, forward — on one host
//!   all node managers share its cores, so this work adds up over the N nodes), and a cost
//!   per tree level (pipeline fill, one more hop for the last chunk);
//! - execute `= e + f·N + g·D` (one rank forked per node; on one host the forks queue);
//! - COMPARE-AND-WRITE `= h + j·N + i·D` (the heartbeat's round trip: one combined answer per
//!   level, each node's answer handled once).
//!
//! Two extrapolations, like the seed's two curves (its ES40 cluster and an ideal one): *this
//! host* (all node managers on `cores` cores, the fit as it stands) and *one node manager per
//! host*, where the per-node work runs in parallel and only the busiest stage counts: an
//! interior node receives one copy and forwards `k`, each forward costing `forward_share` of
//! a copy's work, and its link carries `k` copies at `link_mb_s`; each level adds at least one
//! chunk's time through that stage (the pipeline's fill).

use std::path::{Path, PathBuf};

use cosched_core::NodeId;
use cosched_storm::Topology;
use serde::{Deserialize, Serialize};

/// The CSV the benches append to and the model reads: one row per measured setting.
pub const CSV_HEADER: &str =
    "bench,nodes,fanout,depth,mb,chunk_kib,slots,load,send_ms,execute_ms,total_ms,compare_ms,runs";

/// One measured setting (medians over `runs`); times absent where the bench has none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// `launch`, `bcast` or `compare`.
    pub bench: String,
    pub nodes: u32,
    pub fanout: u32,
    pub depth: u32,
    pub mb: f64,
    pub chunk_kib: u32,
    pub slots: u32,
    /// `idle`, `cpu` or `net`.
    pub load: String,
    pub send_ms: Option<f64>,
    pub execute_ms: Option<f64>,
    pub total_ms: Option<f64>,
    pub compare_ms: Option<f64>,
    pub runs: usize,
}

impl Measurement {
    /// The row's fields as the CSV holds them: times to the microsecond, empty where absent.
    fn csv_record(&self) -> [String; 13] {
        let t = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
        [
            self.bench.clone(),
            self.nodes.to_string(),
            self.fanout.to_string(),
            self.depth.to_string(),
            self.mb.to_string(),
            self.chunk_kib.to_string(),
            self.slots.to_string(),
            self.load.clone(),
            t(self.send_ms),
            t(self.execute_ms),
            t(self.total_ms),
            t(self.compare_ms),
            self.runs.to_string(),
        ]
    }
}

/// What was wrong with a measurements CSV, and where.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: {what}", path.display())]
    Row {
        path: PathBuf,
        line: u64,
        what: String,
    },
}

impl Measurement {
    /// A row of `cosched cluster bench launch`, measured with `setup`.
    pub fn of_launch(r: &crate::bench::LaunchRow, setup: &crate::bench::LaunchSetup) -> Self {
        Measurement {
            bench: "launch".into(),
            nodes: r.nodes,
            fanout: setup.fanout,
            depth: r.tree_depth,
            mb: r.mb as f64,
            chunk_kib: setup.chunk >> 10,
            slots: setup.slots,
            load: r.load.clone(),
            send_ms: Some(r.send_ms),
            execute_ms: Some(r.execute_ms),
            total_ms: Some(r.total_ms),
            compare_ms: None,
            runs: r.runs,
        }
    }

    /// A row of `cosched cluster bench bcast` (`mb` MB at fan-out `fanout`, nothing loaded).
    pub fn of_bcast(r: &crate::bench::BcastRow, fanout: u32, mb: u32) -> Self {
        Measurement {
            bench: "bcast".into(),
            nodes: r.nodes,
            fanout,
            depth: depth(r.nodes, fanout),
            mb: mb as f64,
            chunk_kib: r.chunk_kib,
            slots: r.slots,
            load: "idle".into(),
            send_ms: Some(r.median_ms),
            execute_ms: None,
            total_ms: None,
            compare_ms: None,
            runs: r.runs,
        }
    }

    /// A row of `cosched cluster bench compare`.
    pub fn of_compare(r: &crate::bench::CompareRow) -> Self {
        Measurement {
            bench: "compare".into(),
            nodes: r.nodes,
            fanout: r.fanout,
            depth: r.tree_depth,
            mb: 0.0,
            chunk_kib: 0,
            slots: 0,
            load: "idle".into(),
            send_ms: None,
            execute_ms: None,
            total_ms: None,
            compare_ms: Some(r.median_ms),
            runs: r.runs,
        }
    }
}

/// Appends `rows` to the CSV at `path`, writing the header first if the file is new or empty,
/// so several bench runs accumulate in one file.
pub fn append_csv(path: &Path, rows: &[Measurement]) -> Result<(), CsvError> {
    let io = |source| CsvError::Io {
        path: path.to_path_buf(),
        source,
    };
    let fresh = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    let mut w = csv::Writer::from_writer(file);
    let result = (|| {
        if fresh {
            w.write_record(CSV_HEADER.split(','))?;
        }
        for r in rows {
            w.write_record(r.csv_record())?;
        }
        w.flush()?;
        Ok::<_, csv::Error>(())
    })();
    result.map_err(|e| io(e.into()))
}

/// Reads a CSV written by [`append_csv`] (lines starting with `#` skipped; repeated headers,
/// as from concatenated files, too).
pub fn read_csv(path: &Path) -> Result<Vec<Measurement>, CsvError> {
    let text = std::fs::read(path).map_err(|source| CsvError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_csv(path, &text)
}

/// [`read_csv`] on the bytes `text` read from `path` (for a caller that keeps the bytes, to
/// record what it fitted on).
pub fn parse_csv(path: &Path, text: &[u8]) -> Result<Vec<Measurement>, CsvError> {
    let row_error = |line: u64, what: String| CsvError::Row {
        path: path.to_path_buf(),
        line,
        what,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text);
    let header = csv::StringRecord::from(CSV_HEADER.split(',').collect::<Vec<_>>());
    let mut rows = Vec::new();
    let mut seen_header = false;
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, csv::Position::line);
            row_error(line, e.to_string())
        })?;
        // Comments are skipped here, not by the reader: its line count leaves them out.
        let line = record.position().map_or(0, csv::Position::line);
        if record.get(0).is_some_and(|f| f.starts_with('#')) {
            continue;
        }
        if record == header {
            seen_header = true;
            continue;
        }
        if !seen_header {
            return Err(row_error(
                line,
                format!("expected the header {CSV_HEADER:?}"),
            ));
        }
        if record.len() != header.len() {
            return Err(row_error(
                line,
                format!("{} fields, not {}", record.len(), header.len()),
            ));
        }
        rows.push(
            record
                .deserialize(Some(&header))
                .map_err(|e| row_error(line, field_error(&e, &header)))?,
        );
    }
    Ok(rows)
}

/// A field that did not parse, by its column name (`nodes: invalid digit found in string`).
fn field_error(e: &csv::Error, header: &csv::StringRecord) -> String {
    match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => {
            let column = err.field().and_then(|i| header.get(i as usize));
            format!("{}: {}", column.unwrap_or("a field"), err.kind())
        }
        _ => e.to_string(),
    }
}

/// Tree depth of `nodes` node managers at fan-out `fanout`, as the tree itself computes it.
pub fn depth(nodes: u32, fanout: u32) -> u32 {
    Topology {
        epoch: 0,
        fanout,
        members: vec![(NodeId(0), String::new()); nodes as usize],
    }
    .depth()
}

/// Least squares with each equation divided by its observed value, so the fit minimises the
/// *relative* error (launch times span two orders of magnitude; unweighted, the largest
/// would decide everything). Solves the normal equations by Gaussian elimination with partial
/// pivoting; `None` when they are singular (too few distinct settings for the parameters).
pub fn relative_lstsq(x: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let p = x.first()?.len();
    let mut a = vec![vec![0.0; p + 1]; p];
    for (row, &obs) in x.iter().zip(y) {
        if obs <= 0.0 {
            continue;
        }
        let w = 1.0 / (obs * obs);
        for i in 0..p {
            for j in 0..p {
                a[i][j] += w * row[i] * row[j];
            }
            a[i][p] += w * row[i] * obs;
        }
    }
    // Scale for the singularity test: the largest diagonal entry.
    let scale = (0..p).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    for col in 0..p {
        let piv = (col..p).max_by(|&r, &s| a[r][col].abs().total_cmp(&a[s][col].abs()))?;
        if a[piv][col].abs() <= scale * 1e-12 {
            return None;
        }
        a.swap(col, piv);
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let m = row[col] / pivot[col];
                for (x, y) in row[col..].iter_mut().zip(&pivot[col..]) {
                    *x -= m * y;
                }
            }
        }
    }
    Some((0..p).map(|i| a[i][p] / a[i][i]).collect())
}

/// [`relative_lstsq`] with every parameter at least 0: each is a cost, and a negative one
/// (noise on a term the settings barely vary, such as the depth at one fan-out) would make the
/// extrapolation fall with the node count. The most negative is fixed at 0 and the rest
/// refitted until none is negative (a simple active-set rule).
pub fn nonnegative_lstsq(x: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let p = x.first()?.len();
    let mut free: Vec<usize> = (0..p).collect();
    loop {
        let sub: Vec<Vec<f64>> = x
            .iter()
            .map(|row| free.iter().map(|&c| row[c]).collect())
            .collect();
        let got = relative_lstsq(&sub, y)?;
        let worst = (0..free.len())
            .filter(|&i| got[i] < 0.0)
            .min_by(|&i, &j| got[i].total_cmp(&got[j]));
        match worst {
            Some(i) if free.len() > 1 => {
                free.remove(i);
            }
            _ => {
                let mut params = vec![0.0; p];
                for (i, &c) in free.iter().enumerate() {
                    params[c] = got[i].max(0.0);
                }
                return Some(params);
            }
        }
    }
}

/// One fitted term: its parameters (milliseconds, per MB and per node as named) and its
/// relative error on the points it was fitted on.
#[derive(Clone, Debug, Serialize)]
pub struct Fit {
    pub names: Vec<&'static str>,
    pub params: Vec<f64>,
    pub points: usize,
    /// Root mean square and largest |predicted / measured − 1| over the fitted points.
    pub rms_rel_err: f64,
    pub max_rel_err: f64,
}

impl Fit {
    fn new(names: &[&'static str], x: &[Vec<f64>], y: &[f64], what: &str) -> Result<Fit, String> {
        if x.len() < names.len() {
            return Err(format!(
                "{what}: {} measured points for {} parameters",
                x.len(),
                names.len()
            ));
        }
        let params = nonnegative_lstsq(x, y).ok_or_else(|| {
            format!(
                "{what}: the measurements do not tell the parameters {names:?} apart (vary the node count and, for the depth, the fan-out)"
            )
        })?;
        let mut fit = Fit {
            names: names.to_vec(),
            params,
            points: x.len(),
            rms_rel_err: 0.0,
            max_rel_err: 0.0,
        };
        let errs: Vec<f64> = x
            .iter()
            .zip(y)
            .map(|(row, &obs)| (fit.eval(row) / obs - 1.0).abs())
            .collect();
        fit.rms_rel_err = (errs.iter().map(|e| e * e).sum::<f64>() / errs.len() as f64).sqrt();
        fit.max_rel_err = errs.iter().copied().fold(0.0, f64::max);
        Ok(fit)
    }

    fn eval(&self, row: &[f64]) -> f64 {
        self.params.iter().zip(row).map(|(p, x)| p * x).sum()
    }
}

/// What the extrapolation to one node manager per host assumes (not fitted: nothing measured
/// here separates them).
#[derive(Clone, Debug, Serialize)]
pub struct Assumptions {
    /// Cores of the measuring host: the per-node costs fitted there are wall time on that
    /// many cores, so one node's own CPU time is `cores` times as much.
    pub cores: f64,
    /// Bandwidth of one host's link, MB/s (an interior node sends `k` copies through it).
    pub link_mb_s: f64,
    /// Forwarding one copy to a child, as a share of a node copy's whole work.
    pub forward_share: f64,
}

/// The fitted model.
#[derive(Clone, Debug, Serialize)]
pub struct LaunchModel {
    /// Parameters a (ms), b (ms/MB), c (ms/MB/node), d (ms/level).
    pub send: Fit,
    /// Parameters e (ms), f (ms/node), g (ms/level).
    pub execute: Fit,
    /// Parameters h (ms), j (ms/node), i (ms/level); absent without `compare` rows.
    pub compare: Option<Fit>,
    /// Launch rows: |(predicted send + execute) / measured total − 1|, RMS and largest.
    pub total_rms_rel_err: f64,
    pub total_max_rel_err: f64,
    pub assume: Assumptions,
    /// Chunk size of the fitted launches, MB (the pipeline's fill per level).
    pub chunk_mb: f64,
}

fn send_row(n: f64, d: f64, mb: f64) -> Vec<f64> {
    vec![1.0, mb, mb * n, d]
}

fn node_row(n: f64, d: f64) -> Vec<f64> {
    vec![1.0, n, d]
}

/// Predicted times of one setting, milliseconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Prediction {
    pub send_ms: f64,
    pub execute_ms: f64,
    pub compare_ms: Option<f64>,
}

impl Prediction {
    pub fn total_ms(&self) -> f64 {
        self.send_ms + self.execute_ms
    }
}

impl LaunchModel {
    /// Fits the model on the idle rows of `rows`: send on `launch` rows and on `bcast` rows
    /// at the launch rows' chunk size and slot count (the model has no chunk term), execute on
    /// `launch` rows, COMPARE on `compare` rows.
    pub fn fit(rows: &[Measurement], assume: Assumptions) -> Result<LaunchModel, String> {
        let idle: Vec<&Measurement> = rows.iter().filter(|r| r.load == "idle").collect();
        let launches: Vec<&&Measurement> = idle.iter().filter(|r| r.bench == "launch").collect();
        let setting = launches.first().map(|r| (r.chunk_kib, r.slots));
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for r in &idle {
            let usable = r.bench == "launch"
                || (r.bench == "bcast" && setting.is_none_or(|s| s == (r.chunk_kib, r.slots)));
            if let (true, Some(t)) = (usable, r.send_ms) {
                xs.push(send_row(r.nodes as f64, r.depth as f64, r.mb));
                ys.push(t);
            }
        }
        let send = Fit::new(
            &["a_ms", "b_ms_per_mb", "c_ms_per_mb_node", "d_ms_per_level"],
            &xs,
            &ys,
            "send",
        )?;
        let (mut xe, mut ye) = (Vec::new(), Vec::new());
        let mut totals = Vec::new();
        for r in &launches {
            if let Some(t) = r.execute_ms {
                xe.push(node_row(r.nodes as f64, r.depth as f64));
                ye.push(t);
            }
            if let Some(t) = r.total_ms {
                totals.push((r, t));
            }
        }
        let execute = Fit::new(
            &["e_ms", "f_ms_per_node", "g_ms_per_level"],
            &xe,
            &ye,
            "execute",
        )?;
        let (mut xc, mut yc) = (Vec::new(), Vec::new());
        for r in idle.iter().filter(|r| r.bench == "compare") {
            if let Some(t) = r.compare_ms {
                xc.push(node_row(r.nodes as f64, r.depth as f64));
                yc.push(t);
            }
        }
        let compare = if xc.is_empty() {
            None
        } else {
            Some(Fit::new(
                &["h_ms", "j_ms_per_node", "i_ms_per_level"],
                &xc,
                &yc,
                "compare",
            )?)
        };
        let mut m = LaunchModel {
            send,
            execute,
            compare,
            total_rms_rel_err: 0.0,
            total_max_rel_err: 0.0,
            assume,
            chunk_mb: setting.map_or(0.5, |(c, _)| c as f64 * 1024.0 / 1e6),
        };
        let errs: Vec<f64> = totals
            .iter()
            .map(|(r, t)| (m.on_this_host(r.nodes, r.fanout, r.mb).total_ms() / t - 1.0).abs())
            .collect();
        if !errs.is_empty() {
            m.total_rms_rel_err =
                (errs.iter().map(|e| e * e).sum::<f64>() / errs.len() as f64).sqrt();
            m.total_max_rel_err = errs.iter().copied().fold(0.0, f64::max);
        }
        Ok(m)
    }

    /// All `nodes` node managers on the measuring host, as measured.
    pub fn on_this_host(&self, nodes: u32, fanout: u32, mb: f64) -> Prediction {
        let (n, d) = (nodes as f64, depth(nodes, fanout) as f64);
        Prediction {
            send_ms: self.send.eval(&send_row(n, d, mb)),
            execute_ms: self.execute.eval(&node_row(n, d)),
            compare_ms: self.compare.as_ref().map(|c| c.eval(&node_row(n, d))),
        }
    }

    /// One node manager per host: each node's work on its own cores, so the per-node terms
    /// count once (for the busiest node) instead of `nodes` times, and the link of a node
    /// with `k` children carries `k` copies.
    pub fn one_per_host(&self, nodes: u32, fanout: u32, mb: f64) -> Prediction {
        let d = depth(nodes, fanout) as f64;
        let k = fanout.min(nodes).max(1) as f64;
        let a = &self.assume;
        let p = &self.send.params;
        let copy = p[2] * a.cores;
        let stage = (copy * (1.0 + (k - 1.0) * a.forward_share)).max(k * 1e3 / a.link_mb_s);
        let e = &self.execute.params;
        Prediction {
            // A level costs at least the pipeline's fill: its node forwards chunk k only once
            // it holds it, one chunk's stage time after its parent.
            send_ms: p[0] + mb * (p[1] + stage) + p[3].max(self.chunk_mb * stage) * d,
            execute_ms: e[0] + e[1] * a.cores + e[2] * d,
            // Each level's node combines the answers of its k children on its own CPU.
            compare_ms: self
                .compare
                .as_ref()
                .map(|c| c.params[0] + d * (c.params[2] + c.params[1] * a.cores * k)),
        }
    }
}

#[cfg(test)]
mod tests;
