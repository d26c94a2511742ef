//! Benchmarks of the real daemons on an embedded cluster (`cosched cluster bench …`):
//! submit-to-running latency against the number of node managers, the cost of gang
//! time-slicing against the quantum, and the throughput of trivial jobs.
//!
//! Figures are wall-clock measurements on whatever machine runs them; docs/benchmarks.md
//! records the command, the machine and the date next to each.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cosched_core::{Dur, JobId};
use serde::Serialize;

use crate::cluster::{ClusterOptions, node_name, up};
use cosched_proto::DaemonError;
use cosched_proto::proto::{JobState, SubmitRequest, SwitchLog};
use cosched_proto::state_dir::read_pid;
use cosched_proto::util::now;

/// Off-CPU stretches of a spinning rank shorter than this are not kept (a timer interrupt,
/// a page fault): a gang switch stops a rank for far longer.
pub const GAP: Dur = Dur::from_micros(20);

/// Burns `cpu` of this process's CPU time (not wall time): the CPU-bound rank of the gang
/// benchmark, so a rank that is stopped half the time takes twice as long. Returns the
/// stretches longer than [`GAP`] in which it did not run, as (last seen running, first seen
/// running again) in µs of `CLOCK_MONOTONIC` — the node manager's clock — with a resolution
/// of the loop's few microseconds: when a switch really stopped and continued it.
pub fn spin_cpu(cpu: Dur) -> Vec<(i64, i64)> {
    let clock = |id| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec.
        unsafe { libc::clock_gettime(id, &mut ts) };
        ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000
    };
    let used = || clock(libc::CLOCK_PROCESS_CPUTIME_ID);
    let mono = || clock(libc::CLOCK_MONOTONIC);
    let start = used();
    let mut gaps = Vec::new();
    let mut seen = mono();
    let mut x = 0u64;
    'spin: loop {
        // The CPU clock is a system call; the monotonic one is not, and is read often.
        for _ in 0..10 {
            for i in 0..1_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
            std::hint::black_box(x);
            let t = mono();
            if t - seen > GAP.as_micros() {
                gaps.push((seen, t));
            }
            seen = t;
        }
        if used() - start >= cpu.as_micros() {
            break 'spin;
        }
    }
    gaps
}

/// How long this process has been runnable — on a core, or waiting on a run queue for one —
/// from `/proc/self/schedstat` (the kernel's own count; a frozen or stopped process is in
/// neither): what accounting under gang must match.
pub fn runnable() -> Option<Dur> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let mut f = s.split_whitespace().map(|x| x.parse::<i64>().ok());
    let (on_cpu, waiting) = (f.next()??, f.next()??);
    Some(Dur::from_micros((on_cpu + waiting) / 1_000))
}

/// How long this process's cgroup (v2) has been frozen, in all: the kernel's `frozen_usec`
/// (`cgroup.stat.local`, Linux 6.17), which counts from each write of `cgroup.freeze` to the
/// thaw's. `None` without a cgroup v2 or that count.
pub fn frozen() -> Option<Dur> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .trim()
        .to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // The cgroup2 mount: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - cgroup2 SRC OPTS".
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        right
            .starts_with("cgroup2 ")
            .then(|| left.split(' ').nth(4).map(str::to_string))?
    })?;
    let stat = std::fs::read_to_string(format!("{mount}{path}/cgroup.stat.local")).ok()?;
    let us = stat
        .lines()
        .find_map(|l| l.strip_prefix("frozen_usec "))?
        .trim()
        .parse()
        .ok()?;
    Some(Dur::from_micros(us))
}

fn submit(procs: u32, cmd: Vec<String>) -> SubmitRequest {
    SubmitRequest {
        mem: None,
        procs,
        time_limit_us: None,
        class: None,
        name: None,
        cmd,
        cwd: "/".into(),
        user: None,
        io: Default::default(),
        sched: Default::default(),
        layout: None,
        hold: false,
    }
}

fn opts(exe: &Path, dir: &Path, nodes: u32, pes: u32) -> ClusterOptions {
    let _ = std::fs::remove_dir_all(dir);
    let mut o = ClusterOptions::new(exe.to_path_buf(), dir.to_path_buf(), nodes, pes);
    o.timeout = Duration::from_secs(120);
    o
}

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
pub struct GangRow {
    /// `None`: the FCFS baseline (the two jobs one after the other, no time-slicing).
    pub quantum_ms: Option<f64>,
    /// Time from the first submission to the last end, seconds (best of the runs).
    pub makespan_s: f64,
    /// Makespan over the FCFS baseline's, minus one, in percent.
    pub slowdown_pct: f64,
    /// Where the quanta went, over every run of this setting (`None` for FCFS).
    pub switches: Option<SwitchBreakdown>,
}

/// The node's gang switches over a setting's runs ([`cosched_proto::proto::SwitchLog`]), each
/// from the instant it was due (the rotation's announced instant): as the node manager saw
/// it (the outgoing freezes written ahead by the lead, read frozen, the incoming thaw) and as
/// the ranks lived it (their own clocks: the last outgoing rank seen running, the first and
/// the last incoming rank running again; negative: before the instant). A late switch thawed
/// with an outgoing job not read frozen.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchBreakdown {
    pub switches: u64,
    /// Thawed at the bound before the outgoing job read frozen.
    pub late: u64,
    /// Median time between two switches at the node (the quantum as the node lives it).
    pub interval_ms: f64,
    /// Median lead of the outgoing freezes before the instant, µs.
    pub lead_p50_us: f64,
    /// Due → every outgoing job read frozen, median and 90th percentile, µs.
    pub frozen_p50_us: f64,
    pub frozen_p90_us: f64,
    /// Due → incoming jobs thawed, median and 90th percentile, µs.
    pub thawed_p50_us: f64,
    pub thawed_p90_us: f64,
    /// Due → last outgoing rank seen running, median and 90th percentile, µs.
    pub stopped_p50_us: f64,
    pub stopped_p90_us: f64,
    /// Due → first and last incoming rank running again, median and 90th percentile, µs.
    pub first_running_p50_us: f64,
    pub first_running_p90_us: f64,
    pub last_running_p50_us: f64,
    pub last_running_p90_us: f64,
    /// Share of the time between the first and the last switch in which no rank of either job
    /// ran (from the last outgoing rank stopped to the first incoming one running), percent.
    pub both_stopped_pct: f64,
    /// CPU time of the machine manager and of the node manager per switch, µs.
    pub mm_cpu_us: f64,
    pub nm_cpu_us: f64,
}

/// What one gang run left for the breakdown: the node's switches, what the ranks saw of
/// each, and the daemons' CPU time (ms) over the run.
struct GangRun {
    log: SwitchLog,
    seen: Vec<Seen>,
    mm_cpu_ms: f64,
    nm_cpu_ms: f64,
}

fn breakdown(runs: &[GangRun]) -> SwitchBreakdown {
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
        }
    };
    let (mut frozen, mut thawed, mut interval, mut lead) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut stopped, mut first, mut last) = (Vec::new(), Vec::new(), Vec::new());
    let (mut mm, mut nm, mut gap_us, mut span_us) = (0.0, 0.0, 0.0, 0.0);
    let mut b = SwitchBreakdown::default();
    for r in runs {
        b.switches += r.log.count;
        b.late += r.log.late;
        mm += r.mm_cpu_ms;
        nm += r.nm_cpu_ms;
        let t = &r.log.recent;
        for s in t {
            frozen.extend(s.frozen_us.map(f64::from));
            thawed.push(f64::from(s.thawed_us));
            lead.push(f64::from(s.lead_us));
        }
        for w in t.windows(2) {
            interval.push((w[1].at_us - w[0].at_us) as f64 / 1e3);
        }
        if let (Some(a), Some(z)) = (t.first(), t.last()) {
            span_us += (z.at_us - a.at_us) as f64;
        }
        for s in &r.seen {
            stopped.extend(s.stopped.map(|v| v as f64));
            first.extend(s.first.map(|v| v as f64));
            last.extend(s.last.map(|v| v as f64));
            if let (Some(a), Some(z)) = (s.stopped, s.first) {
                gap_us += (z - a).max(0) as f64;
            }
        }
    }
    let per_switch = 1e3 / b.switches.max(1) as f64;
    SwitchBreakdown {
        interval_ms: pct(&mut interval, 0.5),
        lead_p50_us: pct(&mut lead, 0.5),
        frozen_p50_us: pct(&mut frozen, 0.5),
        frozen_p90_us: pct(&mut frozen, 0.9),
        thawed_p50_us: pct(&mut thawed, 0.5),
        thawed_p90_us: pct(&mut thawed, 0.9),
        stopped_p50_us: pct(&mut stopped, 0.5),
        stopped_p90_us: pct(&mut stopped, 0.9),
        first_running_p50_us: pct(&mut first, 0.5),
        first_running_p90_us: pct(&mut first, 0.9),
        last_running_p50_us: pct(&mut last, 0.5),
        last_running_p90_us: pct(&mut last, 0.9),
        both_stopped_pct: if span_us > 0.0 {
            100.0 * gap_us / span_us
        } else {
            0.0
        },
        mm_cpu_us: mm * per_switch,
        nm_cpu_us: nm * per_switch,
        ..b
    }
}

/// One switch as the ranks lived it, µs from its due instant: the last outgoing rank seen
/// running, the first and the last incoming rank seen running again (`None`: no rank of that
/// side had a stretch off the CPU near the switch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub stopped: Option<i64>,
    pub first: Option<i64>,
    pub last: Option<i64>,
}

/// The off-CPU stretches of each rank of a job (`cluster spin --gaps`), each sorted.
#[derive(Clone, Debug, Default)]
pub struct JobGaps {
    pub job: JobId,
    pub ranks: Vec<Vec<(i64, i64)>>,
}

/// What the ranks saw of the switch due at `due` (µs of the node's clock) from `out` to
/// `inc`: each outgoing rank's stretch off the CPU that starts within `window` of `due`, and
/// each incoming rank's that ends within it.
pub fn seen(due: i64, out: &[JobId], inc: &[JobId], jobs: &[JobGaps], window: i64) -> Seen {
    let near = |t: i64| (due - window..=due + window).contains(&t);
    let mut s = Seen::default();
    for j in jobs {
        let (going, coming) = (out.contains(&j.job), inc.contains(&j.job));
        for gaps in &j.ranks {
            // The stretches that may start or end near `due` start before `due + window`.
            let upto = gaps.partition_point(|g| g.0 <= due + window);
            let near_gaps = gaps[..upto]
                .iter()
                .rev()
                .take_while(|g| g.1 >= due - window);
            for &(a, b) in near_gaps {
                if going && near(a) {
                    s.stopped = Some(s.stopped.map_or(a - due, |x| x.max(a - due)));
                }
                if coming && near(b) {
                    s.first = Some(s.first.map_or(b - due, |x| x.min(b - due)));
                    s.last = Some(s.last.map_or(b - due, |x| x.max(b - due)));
                }
            }
        }
    }
    s
}

/// Parses the `gap START END` lines of a rank's output.
pub fn parse_gaps(out: &str) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("gap ")?.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    v.sort();
    v
}

/// Two CPU-bound jobs filling one node at MPL 2, under FCFS and under gang at each quantum.
pub fn gang(
    exe: &Path,
    dir: &Path,
    pes: u32,
    cpu: Dur,
    quanta: &[Dur],
    runs: usize,
) -> Result<Vec<GangRow>, DaemonError> {
    let one = |policy: &str, quantum: Option<Dur>| -> Result<(f64, GangRun), DaemonError> {
        let mut o = opts(exe, &dir.join("gang"), 1, pes);
        o.settings.policy = policy.into();
        if policy == "gang" {
            o.settings.policy_options.mpl = Some(2);
            o.settings.policy_options.quantum = quantum;
        }
        let c = up(&o)?;
        let cmd = vec![
            o.exe.display().to_string(),
            "cluster".into(),
            "spin".into(),
            cpu.to_string(),
            "--gaps".into(),
        ];
        let pid = |f: PathBuf| read_pid(&f).map_or(0, |p| p.pid);
        let (mm_pid, nm_pid) = (
            pid(c.state_dir.mm_pid_file()),
            pid(c.state_dir.nm_pid_file(&node_name(0))),
        );
        let (mm0, nm0) = (cpu_ms(mm_pid), cpu_ms(nm_pid));
        let a = c.client.submit(submit(pes, cmd.clone()))?;
        let b = c.client.submit(submit(pes, cmd))?;
        let jobs = c.client.wait(&[a, b], Duration::from_secs(600))?;
        let mut run = GangRun {
            log: SwitchLog::default(),
            seen: Vec::new(),
            mm_cpu_ms: cpu_ms(mm_pid) - mm0,
            nm_cpu_ms: cpu_ms(nm_pid) - nm0,
        };
        run.log = c.client.monitor(&node_name(0))?.switches;
        let mut gaps = Vec::new();
        for &job in &[a, b] {
            let mut ranks = Vec::new();
            for rank in 0..pes {
                let (out, _, _) = c.client.output(job, rank)?;
                ranks.push(parse_gaps(&String::from_utf8_lossy(&out)));
            }
            gaps.push(JobGaps { job, ranks });
        }
        let window = quantum.map_or(0, |q| q.as_micros() / 2);
        run.seen = run
            .log
            .recent
            .iter()
            .map(|s| seen(s.at_us, &s.outgoing, &s.incoming, &gaps, window))
            .collect();
        let first = jobs
            .iter()
            .map(|j| j.record.submit.as_micros())
            .min()
            .unwrap_or(0);
        let last = jobs
            .iter()
            .filter_map(|j| j.record.end)
            .map(|t| t.as_micros())
            .max()
            .unwrap_or(0);
        if jobs.iter().any(|j| j.state != JobState::Completed) {
            return Err(DaemonError::Refused(format!(
                "a benchmark job did not complete: {jobs:?}"
            )));
        }
        c.down()?;
        Ok(((last - first) as f64 / 1e6, run))
    };
    // Other load on the machine only ever adds time, so the best run is the least noisy.
    let best = |v: Vec<f64>| v.into_iter().fold(f64::INFINITY, f64::min);
    // Rounds over all settings, so a change in the machine's other load touches every
    // setting alike; each setting keeps its best run.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); quanta.len() + 1];
    let mut logs: Vec<Vec<GangRun>> = (0..quanta.len()).map(|_| Vec::new()).collect();
    for _ in 0..runs {
        times[0].push(one("fcfs", None)?.0);
        for (i, &q) in quanta.iter().enumerate() {
            let (t, run) = one("gang", Some(q))?;
            times[i + 1].push(t);
            logs[i].push(run);
        }
    }
    let base = best(times[0].clone());
    let mut rows = vec![GangRow {
        quantum_ms: None,
        makespan_s: base,
        slowdown_pct: 0.0,
        switches: None,
    }];
    for (i, &q) in quanta.iter().enumerate() {
        let m = best(times[i + 1].clone());
        rows.push(GangRow {
            quantum_ms: Some(q.as_micros() as f64 / 1e3),
            makespan_s: m,
            slowdown_pct: (m / base - 1.0) * 100.0,
            switches: Some(breakdown(&logs[i])),
        });
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

/// A scratch directory for benchmark clusters.
pub fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("cosched-bench-{}", std::process::id()))
}

/// Submit latencies of one phase of [`load`], milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct LoadPhase {
    pub what: String,
    pub submits: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The MM's CPU time (user + system) during the phase, per submission.
    pub mm_cpu_ms_per_job: f64,
}

/// Load held by the machine manager: `backlog` jobs queued behind one that never ends (on a
/// 1-node × 1-PE cluster nothing else can start), submitted one after another in phases of
/// 2,000, then a burst of `burst` submissions from `clients` concurrent clients onto that
/// backlog. Per phase: the submit round-trip percentiles and the MM's CPU per submission.
pub fn load(
    exe: &Path,
    dir: &Path,
    backlog: usize,
    burst: usize,
    clients: usize,
) -> Result<Vec<LoadPhase>, DaemonError> {
    let c = up(&opts(exe, &dir.join("load"), 1, 1))?;
    let mm = c
        .state_dir
        .live_mm()
        .ok_or_else(|| DaemonError::Refused("the machine manager's pid is unknown".into()))?;
    let blocker = c
        .client
        .submit(submit(1, vec!["sleep".into(), "100000".into()]))?;
    let queued = || submit(1, vec!["true".into()]);
    let mut phases = Vec::new();
    let mut done = 0;
    while done < backlog {
        let n = (backlog - done).min(2_000);
        let cpu0 = cpu_ms(mm);
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            c.client.submit(queued())?;
            lat.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let cpu = cpu_ms(mm) - cpu0;
        phases.push(phase(format!("queue {}..{}", done, done + n), lat, cpu));
        done += n;
    }
    // The burst: `clients` threads, each with its own connection per request (as separate
    // `cosched submit` commands would be).
    let cpu0 = cpu_ms(mm);
    let per = burst.div_ceil(clients.max(1));
    let lat: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients.max(1))
            .map(|k| {
                let n = per.min(burst.saturating_sub(k * per));
                let client = &c.client;
                s.spawn(move || -> Result<Vec<f64>, DaemonError> {
                    let mut lat = Vec::with_capacity(n);
                    for _ in 0..n {
                        let t = Instant::now();
                        client.submit(queued())?;
                        lat.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    Ok(lat)
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().expect("a client thread")?);
        }
        Ok::<_, DaemonError>(all)
    })?;
    let cpu = cpu_ms(mm) - cpu0;
    phases.push(phase(
        format!("burst of {burst} from {clients} clients onto {backlog} queued"),
        lat,
        cpu,
    ));
    // Queue listing with everything there (what `cosched queue` costs at this size).
    let t = Instant::now();
    let cpu0 = cpu_ms(mm);
    let listed = c.client.jobs(&[])?.len();
    phases.push(LoadPhase {
        what: format!("one `queue` listing {listed} jobs"),
        submits: 0,
        p50_ms: t.elapsed().as_secs_f64() * 1e3,
        p95_ms: 0.0,
        p99_ms: 0.0,
        max_ms: 0.0,
        mm_cpu_ms_per_job: cpu_ms(mm) - cpu0,
    });
    let _ = c
        .client
        .simple(cosched_proto::proto::Request::Cancel(blocker));
    c.down()?;
    Ok(phases)
}

fn phase(what: String, mut lat: Vec<f64>, cpu_ms: f64) -> LoadPhase {
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if lat.is_empty() {
            0.0
        } else {
            lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1]
        }
    };
    LoadPhase {
        what,
        submits: lat.len(),
        p50_ms: pct(0.50),
        p95_ms: pct(0.95),
        p99_ms: pct(0.99),
        max_ms: lat.last().copied().unwrap_or(0.0),
        mm_cpu_ms_per_job: cpu_ms / lat.len().max(1) as f64,
    }
}

/// User plus system CPU time of process `pid` so far, milliseconds (from /proc).
fn cpu_ms(pid: i32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // After the command name (which may hold spaces), fields 14 and 15 are utime, stime.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks * 1e3 / hz
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

/// Keeps every CPU busy while it lives (the "CPU load" of seed 003 Fig. 3): one spinning
/// thread per online CPU, stopped on drop.
pub struct CpuLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    pub fn start() -> CpuLoad {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        for i in 0..100_000u64 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                        }
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        CpuLoad { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Keeps the network busy while it lives (the "network load" of seed 003 Fig. 3): one pair
/// per online CPU, a writer sending 64 KiB blocks as fast as TCP takes them to a reader that
/// discards them, over `addr`'s interface (loopback by default); stopped on drop.
pub struct NetLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl NetLoad {
    pub fn start() -> std::io::Result<NetLoad> {
        NetLoad::on("127.0.0.1:0")
    }

    pub fn on(addr: &str) -> std::io::Result<NetLoad> {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering::Relaxed;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut threads = Vec::new();
        for _ in 0..n {
            let l = std::net::TcpListener::bind(addr)?;
            let mut w = std::net::TcpStream::connect(l.local_addr()?)?;
            let (mut r, _) = l.accept()?;
            // A blocked writer notices the stop once the reader is gone or its timeout ends.
            w.set_write_timeout(Some(Duration::from_millis(100)))?;
            r.set_read_timeout(Some(Duration::from_millis(100)))?;
            let st = stop.clone();
            threads.push(std::thread::spawn(move || {
                let block = vec![0x5au8; 64 << 10];
                while !st.load(Relaxed) {
                    let _ = w.write(&block);
                }
            }));
            let st = stop.clone();
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                while !st.load(Relaxed) {
                    if let Ok(0) = r.read(&mut buf) {
                        break;
                    }
                }
            }));
        }
        Ok(NetLoad { stop, threads })
    }
}

impl Drop for NetLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_as_the_ranks_saw_it_is_read_from_their_gaps() {
        // Job 1's two ranks stop at 990 and 1_004 and run again at 2_030; job 2's run again
        // at 1_010 and 1_025 after a stretch from 0.
        let jobs = [
            JobGaps {
                job: JobId(1),
                ranks: vec![vec![(100, 150), (990, 2_030)], vec![(1_004, 2_030)]],
            },
            JobGaps {
                job: JobId(2),
                ranks: vec![vec![(0, 1_010)], vec![(0, 1_025), (1_500, 1_530)]],
            },
        ];
        let s = seen(1_000, &[JobId(1)], &[JobId(2)], &jobs, 500);
        assert_eq!(
            s,
            Seen {
                stopped: Some(4),
                first: Some(10),
                last: Some(25)
            }
        );
        // Nothing near: nothing seen.
        assert_eq!(
            seen(5_000, &[JobId(1)], &[JobId(2)], &jobs, 500),
            Seen::default()
        );
        assert_eq!(parse_gaps("x\ngap 5 9\ngap 1 2\n"), vec![(1, 2), (5, 9)]);
    }
}
