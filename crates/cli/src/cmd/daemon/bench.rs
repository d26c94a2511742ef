//! `cosched cluster bench ...`: the benchmarks of `cosched-client`'s bench module, run on this
//! binary's daemons, printed as tables or JSON, appended to `--csv` for `cluster model`.

use std::path::PathBuf;

use anyhow::Context;
use cosched_core::Dur;
use cosched_proto::config::parse_bytes;

use crate::cmd::output::{emit, print_json, table};
use crate::cmd::submit::BcastOpts;

#[derive(clap::Subcommand)]
pub enum BenchCmd {
    /// Submit-to-running latency of a job with one rank per node, for several node counts
    Latency {
        /// Node-manager counts to measure
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        nodes: Vec<u32>,
        /// Tree fan-out
        #[arg(long, default_value_t = 8)]
        fanout: u32,
        /// Measured runs per node count (after one warm-up)
        #[arg(long, default_value_t = 7)]
        runs: usize,
        #[arg(long)]
        json: bool,
    },
    /// Slowdown of two CPU-bound jobs time-sliced at MPL 2, against FCFS, per quantum, and
    /// where the quanta went: per switch, from its due instant, the node manager's freezes
    /// and thaws, the ranks' own last stop and first and last run again, the time no rank
    /// ran, late switches, the daemons' CPU per switch
    Gang {
        /// CPU time each rank burns. A pair's fixed costs (its launches and ends) move its
        /// makespan by a few tenths of a second from run to run; at 8 s a rank the FCFS
        /// baseline spreads by about 1 % between runs, at 2 s by 5–8 %, wider than the goals
        #[arg(long, default_value = "8s")]
        cpu: Dur,
        /// Quanta to measure
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1ms,2ms,5ms,10ms,50ms,100ms"
        )]
        quanta: Vec<Dur>,
        /// PEs of the single node (one rank per PE per job)
        #[arg(long, default_value_t = 2)]
        pes: u32,
        /// Runs per setting (the best is reported: other load only adds time)
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[arg(long)]
        json: bool,
    },
    /// Load held by the machine manager: submit latency percentiles and its CPU per job
    /// while a backlog of queued jobs builds up, then for a burst of concurrent submissions
    Load {
        /// Jobs queued behind one that never ends (in phases of 2,000)
        #[arg(long, default_value_t = 10_000)]
        backlog: usize,
        /// Submissions in the burst onto the backlog
        #[arg(long, default_value_t = 1000)]
        burst: usize,
        /// Concurrent clients of the burst
        #[arg(long, default_value_t = 8)]
        clients: usize,
        #[arg(long)]
        json: bool,
    },
    /// Launch of do-nothing programs padded to 4/8/12 MB on every node (`submit --bcast`):
    /// send and execute times, submit to last rank started, idle and under CPU load
    Launch {
        /// Node-manager counts to measure
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        nodes: Vec<u32>,
        /// Program sizes, MB
        #[arg(long, value_delimiter = ',', default_value = "4,8,12")]
        mb: Vec<u32>,
        /// Loads to measure under: idle, cpu (every CPU kept busy), net (a TCP flood over
        /// loopback)
        #[arg(long, value_delimiter = ',', default_value = "idle,cpu")]
        load: Vec<String>,
        /// Tree fan-out
        #[arg(long, default_value_t = 8)]
        fanout: u32,
        #[command(flatten)]
        bcast: BcastOpts,
        /// Measured runs per setting (after one warm-up)
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Also append one row per setting to this CSV (`cluster model --from` reads it)
        #[arg(long)]
        csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Latency of COMPARE-AND-WRITE (the heartbeat's query) against node count and fan-out,
    /// on the node managers' tree transports in this process
    Compare {
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        nodes: Vec<u32>,
        #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
        fanout: Vec<u32>,
        /// Measured queries per setting (after one that connects the tree)
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Also append one row per setting to this CSV (`cluster model --from` reads it)
        #[arg(long)]
        csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Broadcast bandwidth against chunk size × slots (seed 003 Fig. 8)
    Bcast {
        #[arg(long, default_value_t = 16)]
        nodes: u32,
        #[arg(long, default_value_t = 8)]
        fanout: u32,
        /// File size, MB
        #[arg(long, default_value_t = 12)]
        mb: u32,
        /// Chunk sizes (bytes, or with K, M)
        #[arg(long, value_delimiter = ',', default_value = "64K,128K,256K,512K,1M", value_parser = parse_bytes)]
        chunks: Vec<u64>,
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        slots: Vec<u32>,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Also append one row per setting to this CSV (`cluster model --from` reads it)
        #[arg(long)]
        csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Sustained throughput of trivial 1-PE jobs, submitted to completed
    Throughput {
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        #[arg(long, default_value_t = 4)]
        nodes: u32,
        #[arg(long, default_value_t = 2)]
        pes: u32,
        #[arg(long)]
        json: bool,
    },
}

/// Appends a bench's rows to `--csv FILE` when one was given (what `cluster model` fits on).
fn to_csv(
    csv: &Option<PathBuf>,
    rows: impl Iterator<Item = cosched_client::launch_model::Measurement>,
) -> anyhow::Result<()> {
    if let Some(path) = csv {
        let m: Vec<_> = rows.collect();
        cosched_client::launch_model::append_csv(path, &m)?;
    }
    Ok(())
}

pub(super) fn bench(b: BenchCmd) -> anyhow::Result<i32> {
    use cosched_client::bench;
    use cosched_client::launch_model::Measurement;
    let exe = std::env::current_exe().context("finding the cosched executable")?;
    let dir = bench::scratch();
    let result = (|| -> anyhow::Result<()> {
        match b {
            BenchCmd::Latency {
                nodes,
                fanout,
                runs,
                json,
            } => {
                let rows = bench::latency(&exe, &dir, &nodes, fanout, runs.max(1))?;
                if json {
                    return print_json(&rows);
                }
                emit(&table(
                    &["NODES", "DEPTH", "MEDIAN(ms)", "MAX(ms)", "FIRST RANK(ms)"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.tree_depth.to_string(),
                            format!("{:.1}", r.median_ms),
                            format!("{:.1}", r.max_ms),
                            format!("{:.1}", r.first_rank_median_ms),
                        ]
                    }),
                ));
            }
            BenchCmd::Launch {
                nodes,
                mb,
                load,
                fanout,
                bcast,
                runs,
                csv,
                json,
            } => {
                let setup = bench::LaunchSetup {
                    fanout,
                    chunk: u32::try_from(bcast.chunk).unwrap_or(u32::MAX),
                    slots: bcast.slots,
                    runs: runs.max(1),
                };
                let rows = bench::launch(&exe, &dir, &nodes, &mb, &load, &setup)?;
                to_csv(&csv, rows.iter().map(|r| Measurement::of_launch(r, &setup)))?;
                if json {
                    return print_json(&rows);
                }
                emit(&table(
                    &[
                        "NODES",
                        "DEPTH",
                        "MB",
                        "LOAD",
                        "SEND(ms)",
                        "EXECUTE(ms)",
                        "TOTAL(ms)",
                        "MAX(ms)",
                    ],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.tree_depth.to_string(),
                            r.mb.to_string(),
                            r.load.to_string(),
                            format!("{:.1}", r.send_ms),
                            format!("{:.1}", r.execute_ms),
                            format!("{:.1}", r.total_ms),
                            format!("{:.1}", r.total_max_ms),
                        ]
                    }),
                ));
            }
            BenchCmd::Bcast {
                nodes,
                fanout,
                mb,
                chunks,
                slots,
                runs,
                csv,
                json,
            } => {
                let chunks: Vec<u32> = chunks
                    .iter()
                    .map(|&c| u32::try_from(c).unwrap_or(u32::MAX))
                    .collect();
                let rows =
                    bench::bcast(&exe, &dir, nodes, fanout, mb, &chunks, &slots, runs.max(1))?;
                to_csv(
                    &csv,
                    rows.iter().map(|r| Measurement::of_bcast(r, fanout, mb)),
                )?;
                if json {
                    return print_json(&rows);
                }
                emit(&table(
                    &["NODES", "CHUNK(KiB)", "SLOTS", "MEDIAN(ms)", "MB/s"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.chunk_kib.to_string(),
                            r.slots.to_string(),
                            format!("{:.1}", r.median_ms),
                            format!("{:.1}", r.mb_per_s),
                        ]
                    }),
                ));
            }
            BenchCmd::Compare {
                nodes,
                fanout,
                runs,
                csv,
                json,
            } => {
                let rows = bench::compare(&nodes, &fanout, runs.max(1))?;
                to_csv(&csv, rows.iter().map(Measurement::of_compare))?;
                if json {
                    return print_json(&rows);
                }
                emit(&table(
                    &["NODES", "FANOUT", "DEPTH", "MEDIAN(ms)", "MAX(ms)"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.nodes.to_string(),
                            r.fanout.to_string(),
                            r.tree_depth.to_string(),
                            format!("{:.3}", r.median_ms),
                            format!("{:.3}", r.max_ms),
                        ]
                    }),
                ));
            }
            BenchCmd::Gang {
                cpu,
                quanta,
                pes,
                runs,
                json,
            } => {
                let rows = bench::gang(&exe, &dir, pes, cpu, &quanta, runs.max(1))?;
                if json {
                    return print_json(&rows);
                }
                let mut t = table(
                    &["QUANTUM", "MAKESPAN(s)", "SLOWDOWN"],
                    0,
                    rows.iter().map(|r| {
                        vec![
                            r.quantum_ms
                                .map(|q| format!("{q}ms"))
                                .unwrap_or_else(|| "fcfs".into()),
                            format!("{:.3}", r.makespan_s),
                            format!("{:.1}%", r.slowdown_pct),
                        ]
                    }),
                );
                if let Some(best) = rows
                    .iter()
                    .filter(|r| r.quantum_ms.is_some() && r.slowdown_pct <= 2.0)
                    .map(|r| r.quantum_ms.unwrap_or(0.0))
                    .reduce(f64::min)
                {
                    t += &format!("smallest quantum with slowdown <= 2%: {best}ms\n");
                } else {
                    t += "no quantum measured has a slowdown <= 2%\n";
                }
                // Where the quanta went: per switch at the node, from its due instant.
                t += "\nswitches at the node (from the due instant, us, median/p90; node manager: freezes written LEAD ahead, read FROZEN, THAWED; HANDOVERS thawed first, LANDED: their outgoing freezes read frozen at the next switch):\n";
                t += &table(
                    &[
                        "QUANTUM",
                        "SWITCHES",
                        "LATE",
                        "INTERVAL(ms)",
                        "LEAD(us)",
                        "FROZEN(us)",
                        "THAWED(us)",
                        "HANDOVERS(LANDED)",
                        "MM-CPU/SW(us)",
                        "NM-CPU/SW(us)",
                    ],
                    0,
                    rows.iter().filter_map(|r| {
                        let (q, b) = (r.quantum_ms?, r.switches.as_ref()?);
                        Some(vec![
                            format!("{q}ms"),
                            b.switches.to_string(),
                            b.late.to_string(),
                            format!("{:.2}", b.interval_ms),
                            format!("{:.0}", b.lead_p50_us),
                            format!("{:.0}/{:.0}", b.frozen_p50_us, b.frozen_p90_us),
                            format!("{:.0}/{:.0}", b.thawed_p50_us, b.thawed_p90_us),
                            format!("{}({})", b.handovers, b.handovers_landed),
                            format!("{:.0}", b.mm_cpu_us),
                            format!("{:.0}", b.nm_cpu_us),
                        ])
                    }),
                );
                t += "\nthe same switches as the ranks lived them (from the due instant, us, median/p90):\n";
                t += &table(
                    &[
                        "QUANTUM",
                        "LAST-OUT-STOPPED",
                        "FIRST-IN-RUNNING",
                        "LAST-IN-RUNNING",
                        "BOTH-STOPPED",
                    ],
                    0,
                    rows.iter().filter_map(|r| {
                        let (q, b) = (r.quantum_ms?, r.switches.as_ref()?);
                        Some(vec![
                            format!("{q}ms"),
                            format!("{:.0}/{:.0}", b.stopped_p50_us, b.stopped_p90_us),
                            format!(
                                "{:.0}/{:.0}",
                                b.first_running_p50_us, b.first_running_p90_us
                            ),
                            format!("{:.0}/{:.0}", b.last_running_p50_us, b.last_running_p90_us),
                            format!("{:.1}%", b.both_stopped_pct),
                        ])
                    }),
                );
                emit(&t);
            }
            BenchCmd::Load {
                backlog,
                burst,
                clients,
                json,
            } => {
                let rows = bench::load(&exe, &dir, backlog, burst, clients)?;
                if json {
                    return print_json(&rows);
                }
                emit(&table(
                    &[
                        "PHASE",
                        "SUBMITS",
                        "P50(ms)",
                        "P95(ms)",
                        "P99(ms)",
                        "MAX(ms)",
                        "MM CPU/JOB(ms)",
                    ],
                    1,
                    rows.iter().map(|r| {
                        vec![
                            r.what.to_string(),
                            r.submits.to_string(),
                            format!("{:.2}", r.p50_ms),
                            format!("{:.2}", r.p95_ms),
                            format!("{:.2}", r.p99_ms),
                            format!("{:.2}", r.max_ms),
                            format!("{:.3}", r.mm_cpu_ms_per_job),
                        ]
                    }),
                ));
            }
            BenchCmd::Throughput {
                jobs,
                nodes,
                pes,
                json,
            } => {
                let r = bench::throughput(&exe, &dir, nodes, pes, jobs)?;
                if json {
                    return print_json(&r);
                }
                emit(&format!(
                    "{} trivial jobs on {} nodes x {} PEs: {:.2} s, {:.1} jobs/s\n",
                    r.jobs, r.nodes, r.pes, r.elapsed_s, r.jobs_per_s
                ));
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|_| 0)
}
