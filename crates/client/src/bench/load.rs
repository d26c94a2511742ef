//! The machine manager under load (a long backlog, then a burst from concurrent clients),
//! and the CPU and network loads the launch benchmark runs under (seed 003 Fig. 3).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::clocks::cpu_ms;
use super::{opts, submit};
use crate::cluster::up;
use cosched_proto::DaemonError;

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
