//! The clocks the benchmarks read — a process's own CPU time, how long it was runnable or
//! frozen, a daemon's CPU time from /proc — and the CPU-bound rank of the gang benchmark,
//! which records when it was stopped.

use cosched_core::Dur;
use rustix::time::{ClockId, clock_gettime};

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
        let ts = clock_gettime(id);
        ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000
    };
    let used = || clock(ClockId::ProcessCPUTime);
    let mono = || clock(ClockId::Monotonic);
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

/// How long ago this process was forked: from its start in `/proc/self/stat` (clock ticks
/// after boot, so to the tick, 10 ms at 100 Hz) to now on `CLOCK_BOOTTIME`, the clock the
/// kernel stamps it with. Counts its exec and start-up, which a clock started in `main`
/// misses and a job's run time includes. `None` without /proc.
pub fn since_fork() -> Option<Dur> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name (which may hold spaces), field 22 is the start time.
    let after = &stat[stat.rfind(')')? + 2..];
    let ticks: i64 = after.split_whitespace().nth(19)?.parse().ok()?;
    let hz = rustix::param::clock_ticks_per_second() as i64;
    let now = clock_gettime(ClockId::Boottime);
    let now_us = now.tv_sec * 1_000_000 + now.tv_nsec / 1_000;
    Some(Dur::from_micros(now_us - ticks * 1_000_000 / hz))
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

/// User plus system CPU time of process `pid` so far, milliseconds (from /proc).
pub(super) fn cpu_ms(pid: i32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // After the command name (which may hold spaces), fields 14 and 15 are utime, stime.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
    ticks * 1e3 / hz
}
