//! `cosched burn`: the synthetic load of one rank of a replayed trace job, which spends a
//! given runtime either computing (CPU time) or sleeping while counting only the time it was
//! not stopped, so that many PEs can share few cores.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How a rank spends its runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum BurnMode {
    /// Burn CPU time: a rank that is stopped, or shares its core, takes longer
    Cpu,
    /// Sleep in small steps, counting only the time it was not stopped: no CPU used, so
    /// many PEs can share few cores; a gang-suspended rank still does not count the stop
    Sleep,
}

/// The steps of the stop-aware sleep: at most this much of a stop is taken for work.
const SLEEP_STEP: Duration = Duration::from_millis(5);
/// What a step may overrun its sleep by without being on a run queue (timer slack, the
/// wake-up itself).
const SLEEP_SLACK: Duration = Duration::from_millis(2);

/// This process's time on a CPU and waiting on a run queue (`/proc/self/schedstat`).
fn sched_times() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let mut f = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some(Duration::from_nanos(f.next()??.saturating_add(f.next()??)))
}

/// Spends `runtime` the `mode` way; returns when it is done (the calling thread's CPU time
/// for [`BurnMode::Cpu`], the process's unstopped time for [`BurnMode::Sleep`]).
pub fn burn(runtime: Duration, mode: BurnMode) {
    match mode {
        BurnMode::Cpu => crate::compute_for(runtime),
        BurnMode::Sleep => sleep_unstopped(runtime),
    }
}

fn sleep_unstopped(target: Duration) {
    // A step counts what it slept plus the time it ran or waited for a CPU: a late wake-up on
    // a busy machine is running time (the time limit counts it so), a stop is not. A stopped
    // or frozen process is on no run queue, so the stop never shows in those times, whether
    // the node manager used SIGSTOP or the cgroup freezer (which sends no signal, so watching
    // for SIGCONT would count frozen time as work; taking any long step for a stop would
    // undercount on a loaded machine and let a job overrun its limit).
    let mut done = Duration::ZERO;
    let mut last = Instant::now();
    let mut busy = sched_times();
    while done < target {
        let ask = SLEEP_STEP.min(target - done);
        std::thread::sleep(ask);
        let now = Instant::now();
        let busy_now = sched_times();
        let bound = match (busy, busy_now) {
            (Some(b0), Some(b1)) => ask + b1.saturating_sub(b0) + SLEEP_SLACK,
            // Without schedstat: a step much longer than asked was a stop.
            _ => ask + 2 * SLEEP_STEP,
        };
        done += (now - last).min(bound);
        (last, busy) = (now, busy_now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_burn_uses_its_runtime_of_cpu_time() {
        let cpu0 = cosched_monitor::thread_cpu_ns();
        burn(Duration::from_millis(30), BurnMode::Cpu);
        assert!(cosched_monitor::thread_cpu_ns() - cpu0 >= 30_000_000);
    }

    #[test]
    fn a_sleep_burn_uses_little_cpu_and_at_least_its_runtime_of_wall_time() {
        let (t0, cpu0) = (Instant::now(), cosched_monitor::thread_cpu_ns());
        burn(Duration::from_millis(50), BurnMode::Sleep);
        assert!(t0.elapsed() >= Duration::from_millis(50));
        // Generous for a loaded machine: a CPU burn of 50 ms would use all 50 ms.
        assert!(cosched_monitor::thread_cpu_ns() - cpu0 < 25_000_000);
    }
}
