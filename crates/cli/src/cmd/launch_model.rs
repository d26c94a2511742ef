//! `cosched cluster model`: fits the launch model (`cosched_client::launch_model`) on a bench
//! CSV, prints its parameters, its error on the measured points and its extrapolation, and
//! draws it in the form of seed 003 Fig. 10.

use std::path::PathBuf;

use anyhow::Context;
use cosched_client::launch_model::{Assumptions, LaunchModel, depth, parse_csv};
use cosched_report::plot::{LineChart, Series, line_chart};
use cosched_report::provenance::Provenance;

use super::output::{emit, print_json};

#[derive(clap::Args)]
pub struct ModelArgs {
    /// The CSV `cosched cluster bench launch|bcast|compare --csv FILE` appended to
    #[arg(long)]
    from: PathBuf,
    /// Tree fan-out of the extrapolation (default: the launch rows' fan-out)
    #[arg(long)]
    fanout: Option<u32>,
    /// Program size, MB
    #[arg(long, default_value_t = 12.0)]
    mb: f64,
    /// Extrapolate up to this many node managers (powers of 4, and this)
    #[arg(long, default_value_t = 16_384)]
    max_nodes: u32,
    /// Cores of the host that measured (default: this host's)
    #[arg(long)]
    cores: Option<f64>,
    /// One node manager per host: each host's link bandwidth, MB/s (default: 10 Gb/s)
    #[arg(long, default_value_t = 1250.0)]
    link_mbs: f64,
    /// One node manager per host: forwarding a copy to a child, as a share of a node copy's
    /// whole work (receive, authenticate, verify, write)
    #[arg(long, default_value_t = 0.5)]
    forward_share: f64,
    /// Draw the figure here (.svg or .png)
    #[arg(long)]
    plot: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Row {
    nodes: u32,
    depth: u32,
    measured_total_ms: Option<f64>,
    this_host: cosched_client::launch_model::Prediction,
    one_per_host: cosched_client::launch_model::Prediction,
}

pub fn run(a: ModelArgs) -> anyhow::Result<i32> {
    let bytes = std::fs::read(&a.from).with_context(|| format!("reading {}", a.from.display()))?;
    let rows = parse_csv(&a.from, &bytes)?;
    let cores = a
        .cores
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64));
    let assume = Assumptions {
        cores,
        link_mb_s: a.link_mbs,
        forward_share: a.forward_share,
    };
    let m = LaunchModel::fit(&rows, assume)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.from.display()))?;
    let launches: Vec<_> = rows
        .iter()
        .filter(|r| r.bench == "launch" && r.load == "idle")
        .collect();
    let fanout = a
        .fanout
        .or_else(|| launches.first().map(|r| r.fanout))
        .unwrap_or(8);
    // Measured totals at this size and fan-out (the median where a setting was run twice).
    let measured = |n: u32| -> Option<f64> {
        let mut v: Vec<f64> = launches
            .iter()
            .filter(|r| r.nodes == n && r.fanout == fanout && (r.mb - a.mb).abs() < 1e-9)
            .filter_map(|r| r.total_ms)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let mut counts: Vec<u32> = std::iter::successors(Some(1u32), |&n| n.checked_mul(4))
        .take_while(|&n| n <= a.max_nodes)
        .collect();
    for r in &launches {
        if r.fanout == fanout && !counts.contains(&r.nodes) && r.nodes <= a.max_nodes {
            counts.push(r.nodes);
        }
    }
    if !counts.contains(&a.max_nodes) {
        counts.push(a.max_nodes);
    }
    counts.sort_unstable();
    let table: Vec<Row> = counts
        .iter()
        .map(|&n| Row {
            nodes: n,
            depth: depth(n, fanout),
            measured_total_ms: measured(n),
            this_host: m.on_this_host(n, fanout, a.mb),
            one_per_host: m.one_per_host(n, fanout, a.mb),
        })
        .collect();
    if a.json {
        print_json(
            &serde_json::json!({ "model": m, "fanout": fanout, "mb": a.mb, "table": table }),
        )?;
    } else {
        emit(&report(&m, fanout, a.mb, &table));
    }
    if let Some(path) = &a.plot {
        let chart = figure(
            &m,
            fanout,
            a.mb,
            &table,
            Provenance::of_bytes(&a.from.display().to_string(), &bytes),
        );
        line_chart(path, &chart).with_context(|| format!("drawing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(0)
}

fn fit_line(what: &str, f: &cosched_client::launch_model::Fit) -> String {
    let params: Vec<String> = f
        .names
        .iter()
        .zip(&f.params)
        .map(|(n, p)| format!("{n}={p:.4}"))
        .collect();
    format!(
        "{what:<8} {}  | {} points, error RMS {:.1} %, max {:.1} %\n",
        params.join(" "),
        f.points,
        f.rms_rel_err * 100.0,
        f.max_rel_err * 100.0
    )
}

fn report(m: &LaunchModel, fanout: u32, mb: f64, table: &[Row]) -> String {
    let mut t = String::from("fitted (weighted least squares on the idle rows):\n");
    t += &fit_line("send", &m.send);
    t += &fit_line("execute", &m.execute);
    if let Some(c) = &m.compare {
        t += &fit_line("compare", c);
    } else {
        t += "compare  (no `bench compare` rows: heartbeat cost not modelled)\n";
    }
    t += &format!(
        "launch total (send + execute) on the measured launches: error RMS {:.1} %, max {:.1} %\n",
        m.total_rms_rel_err * 100.0,
        m.total_max_rel_err * 100.0
    );
    t += &format!(
        "one NM per host assumes {} cores measured, links of {} MB/s, forwarding share {}\n\n",
        m.assume.cores, m.assume.link_mb_s, m.assume.forward_share
    );
    t += &format!("{mb} MB, fan-out {fanout}; times in ms\n");
    t += &format!(
        "{:>6} {:>5} {:>9} | {:>10} {:>9} {:>10} {:>9} | {:>9} {:>9} {:>9} {:>9}\n",
        "NODES",
        "DEPTH",
        "MEASURED",
        "HOST SEND",
        "EXECUTE",
        "TOTAL",
        "COMPARE",
        "1/H SEND",
        "EXECUTE",
        "TOTAL",
        "COMPARE"
    );
    let o = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for r in table {
        t += &format!(
            "{:>6} {:>5} {:>9} | {:>10.1} {:>9.1} {:>10.1} {:>9} | {:>9.1} {:>9.1} {:>9.1} {:>9}\n",
            r.nodes,
            r.depth,
            o(r.measured_total_ms),
            r.this_host.send_ms,
            r.this_host.execute_ms,
            r.this_host.total_ms(),
            o(r.this_host.compare_ms),
            r.one_per_host.send_ms,
            r.one_per_host.execute_ms,
            r.one_per_host.total_ms(),
            o(r.one_per_host.compare_ms),
        );
    }
    t += "HOST: all node managers on the measuring host; 1/H: one node manager per host\n";
    t
}

/// Seed 003 Fig. 10: launch time against node count, measured points and model curves. The x
/// axis is log₂ of the node count (the chart has no log x axis), labelled with the counts.
fn figure(m: &LaunchModel, fanout: u32, mb: f64, table: &[Row], prov: Provenance) -> LineChart {
    let x = |n: u32| (n as f64).log2() + 1.0;
    let max = table.last().map_or(1, |r| r.nodes);
    let x_names = (0..=x(max).ceil() as u32 - 1)
        .map(|k| {
            if k % 2 == 0 {
                (1u64 << k).to_string()
            } else {
                String::new()
            }
        })
        .collect();
    let line = |name: &str, f: &dyn Fn(&Row) -> Option<f64>| Series {
        name: name.into(),
        points: table
            .iter()
            .filter_map(|r| f(r).map(|v| (x(r.nodes), v)))
            .collect(),
        ..Default::default()
    };
    let mut series = vec![
        Series {
            markers_only: true,
            ..line("measured, this host", &|r| r.measured_total_ms)
        },
        line("model, all NMs on this host", &|r| {
            Some(r.this_host.total_ms())
        }),
        line("model, one NM per host", &|r| {
            Some(r.one_per_host.total_ms())
        }),
    ];
    if m.compare.is_some() {
        series.push(line("heartbeat COMPARE, one NM per host", &|r| {
            r.one_per_host.compare_ms
        }));
    }
    // Seed 003's own figures: 110 ms measured on 64 nodes, 135 ms modelled on 16,384 (12 MB).
    series.push(Series {
        name: "seed 003 (QsNET, 12 MB)".into(),
        points: vec![(x(64), 110.0), (x(16_384), 135.0)],
        markers_only: true,
        ..Default::default()
    });
    LineChart {
        title: format!("Launch of {mb} MB against node count (fan-out {fanout}; seed 003 Fig. 10)"),
        x_label: "node managers".into(),
        y_label: "launch time (ms)".into(),
        log_y: true,
        series,
        note: format!(
            "model error on measured launches: RMS {:.0} %, max {:.0} %",
            m.total_rms_rel_err * 100.0,
            m.total_max_rel_err * 100.0
        ),
        provenance: Some(prov),
        x_names,
    }
}
