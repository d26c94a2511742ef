//! `cosched bsp`: the synthetic BSP benchmark of seed 000 Fig. 4.4 as a real program. Each
//! rank iterates compute → synchronous I/O → exchange with its peers, with the parameters of
//! the process-level simulator's BSP model (`cosched_cosim::workload::AppJob`: iterations,
//! compute, io, pattern, variance, rank overrides), so one scenario job runs both ways.
//!
//! - The ranks start through PMI-1 ([`pmi`]): each publishes where it listens, the fence
//!   makes every address visible, then they connect ([`net`]: Unix sockets within a node, TCP
//!   between nodes). At the end each rank publishes its results and rank 0 prints the job's.
//! - Compute is CPU time of the rank's thread (a stopped rank accumulates none), so the work
//!   is the same whatever the scheduling; I/O is a sleep (a blocking call whose length does not
//!   depend on the CPU, as the simulator models it).
//! - Every send and receive is recorded through `cosched-monitor` into the node's ring, and
//!   every receive waits with the monitor's spin-then-block.
//! - Message payloads are a deterministic function of (seed, iteration, sender, receiver):
//!   each receiver checks what it got, and [`expected_checksums`] predicts every rank's
//!   checksums without running anything.
//!
//! [`burn`] is the other synthetic load: one rank of a replayed trace job (`cosched burn`).

pub mod burn;
pub mod net;
pub mod pmi;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use cosched_cosim::workload::AppJob;
use cosched_monitor::{Kind, Monitor};
use serde::{Deserialize, Serialize};

pub use cosched_cosim::scenario::Pattern;
pub use cosched_cosim::workload::{recv_peers, send_peers};

/// The benchmark's parameters: the simulator's `AppJob` fields plus what only a real run has.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub iterations: u32,
    /// Basic compute per iteration (before variance and the rank's work factor).
    #[serde(with = "secs")]
    pub compute: Duration,
    /// Synchronous I/O per iteration.
    #[serde(with = "secs")]
    pub io: Duration,
    pub pattern: Pattern,
    /// Compute and I/O per iteration are uniform in basic·(1 ± variance).
    pub variance: f64,
    /// (rank, work factor, variance) overrides.
    pub rank_overrides: Vec<(u32, f64, Option<f64>)>,
    /// Payload of each message.
    pub msg_bytes: usize,
    pub seed: u64,
    /// The ranks the parameters were made for (the simulator's `procs`); a run with another
    /// size says so on stderr.
    pub procs: Option<u32>,
    /// Fault injection: (rank, iteration) at which that rank kills itself with SIGKILL.
    pub kill: Option<(u32, u32)>,
    pub label: String,
}

/// Largest message payload: below the sockets' buffers, so sending never waits for the
/// receiver and the exchange cannot deadlock.
pub const MAX_MSG: usize = 64 * 1024;

impl Default for Params {
    fn default() -> Params {
        Params {
            iterations: 100,
            compute: Duration::from_millis(10),
            io: Duration::ZERO,
            pattern: Pattern::Aa,
            variance: 0.0,
            rank_overrides: Vec::new(),
            msg_bytes: 1024,
            seed: 1,
            procs: None,
            kill: None,
            label: String::new(),
        }
    }
}

impl Params {
    /// The parameters of a simulator job.
    pub fn from_app_job(j: &AppJob) -> Params {
        Params {
            iterations: j.iterations,
            compute: Duration::from_micros(j.compute.0.max(0) as u64),
            io: Duration::from_micros(j.io.0.max(0) as u64),
            pattern: j.pattern,
            variance: j.variance,
            rank_overrides: j.rank_overrides.clone(),
            procs: Some(j.procs),
            label: j.label.clone(),
            ..Params::default()
        }
    }

    /// Work factor and variance of one rank (as `AppJob::rank_params`).
    pub fn rank_params(&self, rank: u32) -> (f64, f64) {
        cosched_cosim::workload::rank_params(self.variance, &self.rank_overrides, rank)
    }
}

mod secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// What one rank did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RankReport {
    pub rank: u32,
    pub node: String,
    pub iterations: u32,
    /// Wall time computing, its CPU time, time in I/O.
    pub compute_s: f64,
    pub compute_cpu_s: f64,
    pub io_s: f64,
    /// Wall time of the exchanges (sends and receives), and of it the time waiting for data
    /// (spinning or blocked in the monitor's wait).
    pub comm_s: f64,
    pub wait_s: f64,
    pub blocked_s: f64,
    pub total_s: f64,
    pub sent_msgs: u64,
    pub recv_msgs: u64,
    pub sent_bytes: u64,
    pub recv_bytes: u64,
    /// Wrapping sums of the FNV-1a hashes of the payloads sent and received.
    pub sent_checksum: u64,
    pub recv_checksum: u64,
    /// Received payloads that differ from what the sender must have sent (always 0).
    pub corrupt: u64,
    /// Links by kind ("unix", "tcp").
    pub links: BTreeMap<String, u32>,
    /// What the monitor recorded for this rank (its own view of the node's ring).
    pub monitor_records: u64,
    pub monitor_attached: bool,
}

/// The whole job's result, printed by rank 0.
#[derive(Clone, Debug, Serialize)]
pub struct JobReport {
    pub size: u32,
    pub params: Params,
    pub ranks: Vec<RankReport>,
    pub sent_msgs: u64,
    pub recv_msgs: u64,
    pub sent_checksum: u64,
    pub recv_checksum: u64,
    pub corrupt: u64,
    /// Slowest rank's total time.
    pub elapsed_s: f64,
}

/// What a run ends with: this rank's report, and the job's when this is rank 0.
pub struct Outcome {
    pub rank: RankReport,
    pub job: Option<JobReport>,
}

/// A failed run: why, for stderr (the rank exits non-zero with it).
#[derive(Debug)]
pub struct BspError(pub String);

impl std::fmt::Display for BspError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BspError {}

impl BspError {
    /// The run failed because a peer went away (died, or was killed with the job).
    pub fn peer_lost(&self) -> bool {
        self.0.contains(": lost rank ")
    }
}

fn err<E: std::fmt::Display>(ctx: &str) -> impl Fn(E) -> BspError + '_ {
    move |e| BspError(format!("{ctx}: {e}"))
}

/// SplitMix64: a tiny deterministic generator for payloads and variance draws.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [−1, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// The payload `from` sends `to` in iteration `iter`.
pub fn payload(seed: u64, iter: u32, from: u32, to: u32, len: usize) -> Vec<u8> {
    let mut m = Mix(seed ^ (u64::from(iter) << 40) ^ (u64::from(from) << 20) ^ u64::from(to));
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&m.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// FNV-1a, 64 bits.
pub fn fnv(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Every rank's (sent, received) checksum for a run of `size` ranks, computed without
/// running: what a correct run reports.
pub fn expected_checksums(p: &Params, size: u32) -> Vec<(u64, u64)> {
    (0..size)
        .map(|r| {
            let (mut sent, mut recv) = (0u64, 0u64);
            for it in 0..p.iterations {
                for &to in &send_peers(p.pattern, size, r) {
                    sent = sent.wrapping_add(fnv(&payload(p.seed, it, r, to, p.msg_bytes)));
                }
                for &from in &recv_peers(p.pattern, size, r) {
                    recv = recv.wrapping_add(fnv(&payload(p.seed, it, from, r, p.msg_bytes)));
                }
            }
            (sent, recv)
        })
        .collect()
}

/// Busy computation until this thread has used `cpu` of CPU time.
fn compute_for(cpu: Duration) {
    let target = cosched_monitor::thread_cpu_ns() + cpu.as_nanos() as u64;
    let mut x: u64 = 1;
    while cosched_monitor::thread_cpu_ns() < target {
        for i in 0..2_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
}

/// Message header: iteration, sender, payload length, a marker.
const HEADER: usize = 16;
const MARK: u32 = 0xB5B0_DA7A;

/// Runs this rank of the benchmark.
pub fn run(p: &Params) -> Result<Outcome, BspError> {
    if p.msg_bytes > MAX_MSG {
        return Err(BspError(format!(
            "--msg-bytes {} is above the largest message, {MAX_MSG}",
            p.msg_bytes
        )));
    }
    let started = Instant::now();
    let mut pmi = pmi::Pmi::from_env().map_err(err("PMI start-up"))?;
    let (rank, size) = pmi.as_ref().map_or((0, 1), |p| (p.rank, p.size));
    if let Some(procs) = p.procs
        && procs != size
    {
        eprintln!("bsp: the parameters are for {procs} ranks; running with {size}");
    }
    let node = std::env::var("COSCHED_NODE").unwrap_or_else(|_| "local".into());
    let job = std::env::var("COSCHED_JOB_ID").unwrap_or_else(|_| std::process::id().to_string());
    let monitor = Monitor::from_env().map_err(err("monitor"))?;
    let sends = send_peers(p.pattern, size, rank);
    let recvs = recv_peers(p.pattern, size, rank);
    let linked: BTreeSet<u32> = sends.iter().chain(&recvs).copied().collect();

    // Start-up: publish, fence, connect up, accept down.
    let mut links: BTreeMap<u32, net::Link> = BTreeMap::new();
    if let Some(pmi) = pmi.as_mut() {
        let listeners = net::Listeners::bind(&job, rank, &node).map_err(err("listen"))?;
        pmi.put(&format!("bsp-card-{rank}"), &listeners.card.encode())
            .map_err(err("PMI put"))?;
        pmi.fence().map_err(err("PMI fence"))?;
        for &peer in linked.iter().filter(|&&q| q > rank) {
            let v = pmi
                .get(&format!("bsp-card-{peer}"))
                .map_err(err("PMI get"))?;
            let card = net::Card::decode(&v)
                .ok_or_else(|| BspError(format!("rank {peer} published {v:?}")))?;
            let link = net::connect(rank, &node, &card).map_err(|e| {
                BspError(format!("connecting to rank {peer} on {}: {e}", card.node))
            })?;
            links.insert(peer, link);
        }
        let lower: Vec<u32> = linked.iter().filter(|&&q| q < rank).copied().collect();
        links.extend(
            listeners
                .accept(&lower, Duration::from_secs(120))
                .map_err(err("accepting links"))?,
        );
    }
    let mut r = RankReport {
        rank,
        node: node.clone(),
        monitor_attached: monitor.attached(),
        ..RankReport::default()
    };
    for l in links.values() {
        *r.links.entry(l.kind().to_string()).or_default() += 1;
    }

    let (factor, variance) = p.rank_params(rank);
    let mut rng = Mix(p.seed ^ u64::from(rank).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut draw = |basic: Duration, factor: f64| {
        let jitter = if variance > 0.0 {
            variance * rng.unit()
        } else {
            0.0
        };
        basic.mul_f64((factor * (1.0 + jitter)).max(0.0))
    };
    let mut buf = vec![0u8; HEADER + p.msg_bytes];
    let cpu0 = cosched_monitor::thread_cpu_ns();
    let loop_start = Instant::now();
    for it in 0..p.iterations {
        if p.kill == Some((rank, it)) {
            eprintln!("bsp: rank {rank} kills itself at iteration {it} (--kill-rank)");
            // SAFETY: raising a signal at ourselves.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let t = Instant::now();
        compute_for(draw(p.compute, factor));
        r.compute_s += t.elapsed().as_secs_f64();
        if !p.io.is_zero() {
            let t = Instant::now();
            std::thread::sleep(draw(p.io, 1.0));
            r.io_s += t.elapsed().as_secs_f64();
        }
        let t_comm = Instant::now();
        for &to in &sends {
            let data = payload(p.seed, it, rank, to, p.msg_bytes);
            let mut msg = Vec::with_capacity(HEADER + data.len());
            msg.extend_from_slice(&it.to_le_bytes());
            msg.extend_from_slice(&rank.to_le_bytes());
            msg.extend_from_slice(&(data.len() as u32).to_le_bytes());
            msg.extend_from_slice(&MARK.to_le_bytes());
            msg.extend_from_slice(&data);
            let s = cosched_monitor::now_ns();
            let link = links.get_mut(&to).expect("a link to every peer");
            link.write_all(&msg)
                .map_err(|e| lost(rank, to, it, &e.to_string()))?;
            monitor.record(
                Kind::Send,
                to as i32,
                data.len() as u64,
                s,
                cosched_monitor::now_ns(),
            );
            r.sent_msgs += 1;
            r.sent_bytes += data.len() as u64;
            r.sent_checksum = r.sent_checksum.wrapping_add(fnv(&data));
        }
        for &from in &recvs {
            let s = cosched_monitor::now_ns();
            let link = links.get_mut(&from).expect("a link to every peer");
            let mut got = 0;
            let mut blocked = 0;
            while got < buf.len() {
                let w = monitor
                    .wait_fd(link.fd(), libc::POLLIN)
                    .map_err(|e| lost(rank, from, it, &e.to_string()))?;
                r.wait_s += (w.spun_ns + w.blocked_ns) as f64 * 1e-9;
                blocked += w.blocked_ns;
                match link.read_some(&mut buf[got..]) {
                    Ok(0) => return Err(lost(rank, from, it, "connection closed")),
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(lost(rank, from, it, &e.to_string())),
                }
            }
            let word = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4"));
            if (word(0), word(4), word(8) as usize, word(12)) != (it, from, p.msg_bytes, MARK) {
                return Err(BspError(format!(
                    "rank {rank}: message from rank {from} out of step at iteration {it} (header {:?})",
                    &buf[..HEADER]
                )));
            }
            let data = &buf[HEADER..];
            monitor.record_blocked(
                Kind::Recv,
                from as i32,
                data.len() as u64,
                s,
                cosched_monitor::now_ns(),
                blocked,
            );
            r.blocked_s += blocked as f64 * 1e-9;
            r.recv_msgs += 1;
            r.recv_bytes += data.len() as u64;
            let h = fnv(data);
            r.recv_checksum = r.recv_checksum.wrapping_add(h);
            if data != payload(p.seed, it, from, rank, p.msg_bytes).as_slice() {
                r.corrupt += 1;
            }
        }
        r.comm_s += t_comm.elapsed().as_secs_f64();
        r.iterations = it + 1;
    }
    r.compute_cpu_s = (cosched_monitor::thread_cpu_ns() - cpu0) as f64 * 1e-9;
    r.total_s = loop_start.elapsed().as_secs_f64();
    r.monitor_records = monitor.stats().records;
    let _ = started;

    // Results: every rank publishes its own; rank 0 gathers them.
    let mut job_report = None;
    if let Some(pmi) = pmi.as_mut() {
        let mine = serde_json::to_string(&r).expect("serialises");
        pmi.put(&format!("bsp-result-{rank}"), &mine)
            .map_err(err("PMI put of the results"))?;
        pmi.fence().map_err(err("PMI fence"))?;
        if rank == 0 {
            let mut ranks = Vec::new();
            for q in 0..size {
                let v = pmi
                    .get(&format!("bsp-result-{q}"))
                    .map_err(err("PMI get of the results"))?;
                ranks.push(
                    serde_json::from_str(&v)
                        .map_err(|e| BspError(format!("rank {q}'s results: {e}")))?,
                );
            }
            job_report = Some(summarise(p, size, ranks));
        }
        pmi.finalize().map_err(err("PMI finalize"))?;
    } else {
        job_report = Some(summarise(p, 1, vec![r.clone()]));
    }
    Ok(Outcome {
        rank: r,
        job: job_report,
    })
}

fn summarise(p: &Params, size: u32, ranks: Vec<RankReport>) -> JobReport {
    let sum = |f: fn(&RankReport) -> u64| ranks.iter().map(f).fold(0u64, u64::wrapping_add);
    JobReport {
        size,
        params: p.clone(),
        sent_msgs: sum(|r| r.sent_msgs),
        recv_msgs: sum(|r| r.recv_msgs),
        sent_checksum: sum(|r| r.sent_checksum),
        recv_checksum: sum(|r| r.recv_checksum),
        corrupt: sum(|r| r.corrupt),
        elapsed_s: ranks.iter().map(|r| r.total_s).fold(0.0, f64::max),
        ranks,
    }
}

fn lost(rank: u32, peer: u32, it: u32, why: &str) -> BspError {
    BspError(format!(
        "rank {rank}: lost rank {peer} at iteration {it} ({why})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_by_pattern_for_eight_ranks() {
        assert_eq!(send_peers(Pattern::Ring, 8, 7), vec![0]);
        assert_eq!(recv_peers(Pattern::Ring, 8, 0), vec![7]);
        assert_eq!(send_peers(Pattern::Nn, 8, 0), vec![1, 7]);
        assert_eq!(recv_peers(Pattern::Aa, 8, 3).len(), 7);
        assert!(send_peers(Pattern::None, 8, 3).is_empty());
        assert!(send_peers(Pattern::Ring, 1, 0).is_empty());
    }

    #[test]
    fn one_rank_alone_runs_without_pmi_and_matches_the_prediction() {
        let p = Params {
            iterations: 3,
            compute: Duration::from_millis(2),
            io: Duration::from_millis(4),
            variance: 0.5,
            ..Params::default()
        };
        // Without PMI_FD the rank is alone: no peers, no messages.
        if std::env::var_os("PMI_FD").is_some() {
            return;
        }
        let out = run(&p).unwrap();
        assert_eq!(out.rank.iterations, 3);
        assert_eq!(out.rank.sent_msgs, 0);
        // Compute and I/O per iteration are at least basic·(1 − variance).
        assert!(out.rank.compute_cpu_s >= 0.003, "{:?}", out.rank);
        assert!(out.rank.io_s >= 0.006, "{:?}", out.rank);
        assert_eq!(expected_checksums(&p, 1), vec![(0, 0)]);
        assert_eq!(out.job.unwrap().size, 1);
    }

    #[test]
    fn checksums_balance_over_the_job() {
        let p = Params {
            iterations: 2,
            pattern: Pattern::Ring,
            ..Params::default()
        };
        let c = expected_checksums(&p, 4);
        let sent = c.iter().fold(0u64, |a, x| a.wrapping_add(x.0));
        let recv = c.iter().fold(0u64, |a, x| a.wrapping_add(x.1));
        assert_eq!(sent, recv);
        assert_ne!(c[0].1, c[1].1);
    }
}
