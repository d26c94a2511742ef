//! What the node scheme is fed, read by the shell: each rank's run state and CPU time from
//! `/proc/PID/stat`, and the records its job's ring gained since the last read.

use cosched_core::{Dur, JobId};

use super::monitor::Monitors;
use super::sched::{ProcSample, Samples};

/// Reads the samples [`super::core::Effect::Sample`] asks for. A rank `/proc` has nothing on
/// (it exited meanwhile) is left out.
pub fn sample(pids: &[i32], jobs: &[JobId], monitors: &mut Monitors) -> Samples {
    let hz = clock_ticks_per_s();
    let procs = pids
        .iter()
        .filter_map(|&pid| {
            let (state, ticks) = proc_stat(pid)?;
            let cpu = Dur((ticks.saturating_mul(1_000_000) / hz) as i64);
            Some(ProcSample { pid, state, cpu })
        })
        .collect();
    let rings = jobs
        .iter()
        .map(|&job| (job, monitors.records_since(job).0))
        .collect();
    Samples { procs, rings }
}

/// The file name of the first MPI library (`libmpi*`: Open MPI's `libmpi.so.40`, MPICH's
/// `libmpich.so.12`) mapped in process `pid`, from `/proc/PID/maps`; `None` when there is none
/// or the process is gone.
pub fn mpi_library(pid: i32) -> Option<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    mpi_in_maps(&maps)
}

fn mpi_in_maps(maps: &str) -> Option<String> {
    maps.lines()
        .filter_map(|l| l.split_ascii_whitespace().nth(5))
        .filter_map(|path| path.rsplit('/').next())
        .find(|name| name.starts_with("libmpi") && name.contains(".so"))
        .map(str::to_string)
}

/// The unit of `/proc/PID/stat`'s CPU times.
fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as u64 } else { 100 }
}

/// (state letter, utime + stime in clock ticks) of a process, from `/proc/PID/stat`.
fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let state = f.first()?.chars().next()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((state, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mpi_library_is_found_by_its_file_name_in_the_maps() {
        let maps = "7f0-7f1 r--p 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f2-7f3 r-xp 00001000 08:01 13 /usr/lib/x86_64-linux-gnu/libmpich.so.12.2.0\n\
                    7f4-7f5 rw-p 00000000 00:00 0 \n";
        assert_eq!(mpi_in_maps(maps).as_deref(), Some("libmpich.so.12.2.0"));
        let ompi = "1-2 r-xp 0 08:01 9 /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40.30.4\n";
        assert_eq!(mpi_in_maps(ompi).as_deref(), Some("libmpi.so.40.30.4"));
        // Not MPI: a name that only starts alike, and this test's own process.
        assert_eq!(
            mpi_in_maps("1-2 r-xp 0 08:01 9 /opt/libmpix_tools.a\n"),
            None
        );
        assert_eq!(mpi_library(std::process::id() as i32), None);
    }

    #[test]
    fn proc_stat_reads_this_process() {
        // This thread runs; the main thread (whose state /proc/PID/stat shows) may wait.
        let (state, _) = proc_stat(std::process::id() as i32).unwrap();
        assert!("RS".contains(state), "{state}");
        assert!(proc_stat(-5).is_none());
        let s = sample(
            &[std::process::id() as i32, -5],
            &[],
            &mut Monitors::default(),
        );
        assert_eq!(s.procs.len(), 1, "only the process /proc has");
    }
}
