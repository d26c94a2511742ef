//! Launch benchmarks: submit-to-running latency against node count, launch of padded
//! programs through a file broadcast, broadcast bandwidth, COMPARE latency of the tree and
//! the throughput of trivial jobs.

use std::path::Path;
use std::time::{Duration, Instant};

use cosched_core::JobId;
use serde::Serialize;

use super::load::{CpuLoad, NetLoad};
use super::{opts, submit};
use crate::cluster::up;
use cosched_proto::DaemonError;
use cosched_proto::proto::JobState;
use cosched_proto::util::now;

#[derive(Clone, Debug, Serialize)]
pub struct LatencyRow {
    pub nodes: u32,
    pub tree_depth: u32,
    /// Median and worst over the repetitions, milliseconds: from just before the submit
    /// request leaves the client to the moment the last rank's process runs (`date`).
    pub median_ms: f64,
    pub max_ms: f64,
    /// Median over runs of the time until the *first* rank runs.
    pub first_rank_median_ms: f64,
    pub runs: usize,
}

/// Submit-to-running latency of a job with one rank on every node.
pub fn latency(
    exe: &Path,
    dir: &Path,
    nodes: &[u32],
    fanout: u32,
    runs: usize,
) -> Result<Vec<LatencyRow>, DaemonError> {
    let mut rows = Vec::new();
    for &n in nodes {
        let mut o = opts(exe, &dir.join(format!("lat{n}")), n, 1);
        o.settings.fanout = fanout;
        let c = up(&o)?;
        let depth = c.client.status()?.tree_depth;
        let mut lat = Vec::new();
        let mut first_lat = Vec::new();
        for _ in 0..runs + 1 {
            let t0 = now();
            let id = c
                .client
                .submit(submit(n, vec!["date".into(), "+%s%N".into()]))?;
            c.client.wait(&[id], Duration::from_secs(60))?;
            let (mut first, mut last) = (i64::MAX, 0i64);
            for rank in 0..n {
                let (out, _, _) = c.client.output(id, rank)?;
                let ns: i64 = String::from_utf8_lossy(&out).trim().parse().unwrap_or(0);
                last = last.max(ns / 1_000);
                first = first.min(ns / 1_000);
            }
            lat.push((last - t0.as_micros()) as f64 / 1_000.0);
            first_lat.push((first - t0.as_micros()) as f64 / 1_000.0);
        }
        // The first run warms caches (page cache, the tree's connections).
        lat.remove(0);
        first_lat.remove(0);
        lat.sort_by(f64::total_cmp);
        first_lat.sort_by(f64::total_cmp);
        rows.push(LatencyRow {
            nodes: n,
            tree_depth: depth,
            median_ms: lat[lat.len() / 2],
            max_ms: *lat.last().unwrap_or(&0.0),
            first_rank_median_ms: first_lat[first_lat.len() / 2],
            runs,
        });
        c.down()?;
    }
    Ok(rows)
}

#[derive(Clone, Debug, Serialize)]
pub struct ThroughputRow {
    pub nodes: u32,
    pub pes: u32,
    pub jobs: usize,
    /// From the first submission to the last end.
    pub elapsed_s: f64,
    pub jobs_per_s: f64,
}

/// Trivial 1-PE jobs (`true`), submitted back to back, until all have completed.
pub fn throughput(
    exe: &Path,
    dir: &Path,
    nodes: u32,
    pes: u32,
    jobs: usize,
) -> Result<ThroughputRow, DaemonError> {
    let c = up(&opts(exe, &dir.join("tput"), nodes, pes))?;
    let start = Instant::now();
    let ids: Vec<JobId> = (0..jobs)
        .map(|_| c.client.submit(submit(1, vec!["true".into()])))
        .collect::<Result<_, _>>()?;
    let done = c.client.wait(&ids, Duration::from_secs(600))?;
    let elapsed = start.elapsed().as_secs_f64();
    let bad = done
        .iter()
        .filter(|j| j.state != JobState::Completed)
        .count();
    c.down()?;
    if bad > 0 {
        return Err(DaemonError::Refused(format!(
            "{bad} of {jobs} trivial jobs did not complete"
        )));
    }
    Ok(ThroughputRow {
        nodes,
        pes,
        jobs,
        elapsed_s: elapsed,
        jobs_per_s: jobs as f64 / elapsed,
    })
}

/// A do-nothing program of `bytes` bytes: a shell script that prints the time it started
/// (ns) and exits, padded with a comment line so the launch must move the whole file (seed
/// 003's launch programs are padded the same way). The shell never reads past the `exec`.
pub fn padded_program(path: &Path, bytes: usize) -> std::io::Result<()> {
    let head = b"#!/bin/sh\nexec date +%s%N\n#";
    let mut data = Vec::with_capacity(bytes.max(head.len()));
    data.extend_from_slice(head);
    data.resize(bytes.max(head.len()), b'x');
    std::fs::write(path, &data)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[derive(Clone, Debug, Serialize)]
pub struct LaunchRow {
    pub nodes: u32,
    pub tree_depth: u32,
    pub mb: u32,
    /// "idle", "cpu" (every CPU kept busy by a spinning thread meanwhile) or "net" (a TCP
    /// flood over loopback meanwhile, [`NetLoad`]).
    pub load: String,
    /// Medians over the runs, milliseconds. Send: the broadcast, from the submit command's
    /// start until every node holds a verified copy. Execute: from then until the last rank
    /// has started (it prints the time). Total: submit to last rank started.
    pub send_ms: f64,
    pub execute_ms: f64,
    pub total_ms: f64,
    pub total_max_ms: f64,
    pub runs: usize,
}

/// What [`launch`] measures with: chunk size and slots of the broadcast, tree fan-out.
#[derive(Clone, Debug)]
pub struct LaunchSetup {
    pub fanout: u32,
    pub chunk: u32,
    pub slots: u32,
    pub runs: usize,
}

/// Removes the broadcast copies of a cluster's node managers (they are on tmpfs).
fn drop_copies(state: &cosched_proto::StateDir, nodes: u32) {
    for i in 0..nodes {
        let name = format!("n{i}");
        let dir = cosched_proto::bcast::scratch_dir(&name, &state.node_work_dir(&name));
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Launch of do-nothing programs padded to `mbs` MB on every node (one rank per node, `cosched
/// submit --bcast` as a user runs it: broadcast, then launch of the staged copies), for each
/// node count, idle and (with `loads` holding "cpu") with every CPU busy.
pub fn launch(
    exe: &Path,
    dir: &Path,
    nodes: &[u32],
    mbs: &[u32],
    loads: &[String],
    s: &LaunchSetup,
) -> Result<Vec<LaunchRow>, DaemonError> {
    let mut rows = Vec::new();
    std::fs::create_dir_all(dir)?;
    for &mb in mbs {
        padded_program(&dir.join(format!("prog{mb}")), mb as usize * 1_000_000)?;
    }
    for &n in nodes {
        let mut o = opts(exe, &dir.join(format!("launch{n}")), n, 1);
        o.settings.fanout = s.fanout;
        let c = up(&o)?;
        let depth = c.client.status()?.tree_depth;
        for load in loads {
            for &mb in mbs {
                let prog = dir.join(format!("prog{mb}"));
                let (mut send, mut exec, mut total) = (Vec::new(), Vec::new(), Vec::new());
                let _busy = (load == "cpu").then(CpuLoad::start);
                let _flood = (load == "net").then(NetLoad::start).transpose()?;
                for _ in 0..s.runs + 1 {
                    let t0 = now();
                    crate::bcast::send_file(
                        &c.client,
                        &prog,
                        &crate::bcast::Staging::named(&format!("prog{mb}")),
                        s.chunk,
                        s.slots,
                        &[],
                    )?;
                    let t1 = now();
                    let cmd = vec![format!("{}prog{mb}", cosched_proto::bcast::STAGED_PREFIX)];
                    let id = c.client.submit(submit(n, cmd))?;
                    let jobs = c.client.wait(&[id], Duration::from_secs(120))?;
                    if let Some(j) = jobs.iter().find(|j| j.state != JobState::Completed) {
                        // Say why (a node declared dead under the load, say) without the
                        // whole record, which names every node.
                        return Err(DaemonError::Refused(format!(
                            "launch on {n} nodes, {mb} MB: job {} ended {} ({})",
                            j.id(),
                            j.state.as_str(),
                            j.error.as_deref().unwrap_or("no error recorded")
                        )));
                    }
                    let mut last = 0i64;
                    for rank in 0..n {
                        let (out, _, _) = c.client.output(id, rank)?;
                        let ns: i64 = String::from_utf8_lossy(&out).trim().parse().unwrap_or(0);
                        last = last.max(ns / 1_000);
                    }
                    send.push((t1 - t0).as_micros() as f64 / 1e3);
                    exec.push((last - t1.as_micros()) as f64 / 1e3);
                    total.push((last - t0.as_micros()) as f64 / 1e3);
                }
                // The first run warms the page cache and the tree's connections.
                for v in [&mut send, &mut exec, &mut total] {
                    v.remove(0);
                    v.sort_by(f64::total_cmp);
                }
                rows.push(LaunchRow {
                    nodes: n,
                    tree_depth: depth,
                    mb,
                    load: load.clone(),
                    send_ms: send[send.len() / 2],
                    execute_ms: exec[exec.len() / 2],
                    total_ms: total[total.len() / 2],
                    total_max_ms: *total.last().unwrap_or(&0.0),
                    runs: s.runs,
                });
                // Progress on stderr: a sweep over many clusters takes minutes.
                let r = rows.last().expect("pushed");
                eprintln!(
                    "launch: {} nodes, {} MB, {}: total {:.1} ms",
                    r.nodes, r.mb, r.load, r.total_ms
                );
            }
        }
        drop_copies(&c.state_dir, n);
        c.down()?;
    }
    Ok(rows)
}

#[derive(Clone, Debug, Serialize)]
pub struct BcastRow {
    pub nodes: u32,
    pub chunk_kib: u32,
    pub slots: u32,
    /// Median over the runs of file size over broadcast time (start to every copy verified).
    pub mb_per_s: f64,
    pub median_ms: f64,
    pub runs: usize,
}

/// Broadcast bandwidth of a `mb` MB file to `nodes` node managers for each chunk size and
/// slot count (seed 003 Fig. 8).
#[allow(clippy::too_many_arguments)]
pub fn bcast(
    exe: &Path,
    dir: &Path,
    nodes: u32,
    fanout: u32,
    mb: u32,
    chunks: &[u32],
    slots: &[u32],
    runs: usize,
) -> Result<Vec<BcastRow>, DaemonError> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("payload");
    padded_program(&file, mb as usize * 1_000_000)?;
    let mut o = opts(exe, &dir.join("bcast"), nodes, 1);
    o.settings.fanout = fanout;
    let c = up(&o)?;
    let mut rows = Vec::new();
    for &chunk in chunks {
        for &sl in slots {
            let mut t = Vec::new();
            for _ in 0..runs + 1 {
                let sent = crate::bcast::send_file(
                    &c.client,
                    &file,
                    &crate::bcast::Staging::named("payload"),
                    chunk,
                    sl,
                    &[],
                )?;
                t.push(sent.took.as_secs_f64() * 1e3);
            }
            t.remove(0);
            t.sort_by(f64::total_cmp);
            let med = t[t.len() / 2];
            rows.push(BcastRow {
                nodes,
                chunk_kib: chunk >> 10,
                slots: sl,
                mb_per_s: mb as f64 / (med / 1e3),
                median_ms: med,
                runs,
            });
            eprintln!(
                "bcast: {nodes} nodes, {} KiB × {sl}: {med:.1} ms",
                chunk >> 10
            );
        }
    }
    drop_copies(&c.state_dir, nodes);
    c.down()?;
    Ok(rows)
}

#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub nodes: u32,
    pub fanout: u32,
    pub tree_depth: u32,
    /// Median and worst round trip of one COMPARE (the heartbeat's query), milliseconds.
    pub median_ms: f64,
    pub max_ms: f64,
    pub runs: usize,
}

/// Latency of COMPARE-AND-WRITE (the heartbeat's query: does every node hold sequence
/// number s?) from the root to one combined answer, against node count and fan-out. The
/// nodes are the node managers' tree transports (`cosched_storm::spawn_node`) over loopback
/// TCP, all in this process on one thread: the heartbeat's cost without the rest of a node
/// manager, which the machine manager's heartbeat does not expose.
pub fn compare(
    nodes: &[u32],
    fanouts: &[u32],
    runs: usize,
) -> Result<Vec<CompareRow>, DaemonError> {
    use cosched_storm::{Cmp, Cond, Dest, Key, Root, RootEvent, spawn_node};
    const T: Duration = Duration::from_secs(20);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let refused = |why: String| DaemonError::Refused(why);
    rt.block_on(async {
        let key = Key::generate().map_err(|e| refused(format!("cluster key: {e}")))?;
        let mut rows = Vec::new();
        for &k in fanouts {
            for &n in nodes {
                let mut handles = Vec::new();
                let mut members = Vec::new();
                for i in 0..n {
                    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                    members.push((cosched_core::NodeId(i), l.local_addr()?.to_string()));
                    // The deliveries are dropped: a COMPARE delivers nothing to the manager.
                    handles.push(spawn_node(l, key.clone(), cosched_core::NodeId(i)).0);
                }
                let (mut root, mut up) = Root::new(key.clone(), k);
                root.set_members(1, members);
                let mut lat = Vec::new();
                // Run 0 connects the tree (and waits for every node); it is not counted.
                for seq in 0..=runs as i64 {
                    for h in &handles {
                        h.vars.set(1, seq);
                    }
                    let t = Instant::now();
                    let cond = Cond {
                        var: 1,
                        cmp: Cmp::Ge,
                        value: seq,
                    };
                    let id = root.compare(&Dest::All, cond, None, T);
                    loop {
                        match tokio::time::timeout(T, up.recv()).await {
                            Ok(Some(RootEvent::Answer(o))) if o.id() == id => {
                                if !o.holds_everywhere() {
                                    return Err(refused(format!(
                                        "COMPARE on {n} nodes (fan-out {k}) did not hold: {:?}",
                                        o.answer
                                    )));
                                }
                                break;
                            }
                            Ok(Some(_)) => {}
                            _ => {
                                return Err(refused(format!(
                                    "no COMPARE answer from {n} nodes (fan-out {k}) in {T:?}"
                                )));
                            }
                        }
                    }
                    lat.push(t.elapsed().as_secs_f64() * 1e3);
                }
                lat.remove(0);
                lat.sort_by(f64::total_cmp);
                rows.push(CompareRow {
                    nodes: n,
                    fanout: k,
                    tree_depth: crate::launch_model::depth(n, k),
                    median_ms: lat[lat.len() / 2],
                    max_ms: *lat.last().unwrap_or(&0.0),
                    runs,
                });
                let r = rows.last().expect("pushed");
                eprintln!("compare: {n} nodes, fan-out {k}: {:.3} ms", r.median_ms);
                drop(root);
                drop(handles);
            }
        }
        Ok(rows)
    })
}
