//! Small shared helpers: the wall clock as cosched time, atomic file writes, signals.

use std::path::Path;

use cosched_core::Time;

/// Now, as microseconds since the Unix epoch (the daemons' time base).
pub fn now() -> Time {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_micros(d.as_micros() as i64)
}

/// Writes a file so that a reader sees either the old or the whole new content.
pub fn write_atomic(path: &Path, content: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content)?;
    std::fs::rename(tmp, path)
}

/// Sends `sig` to the process group `pgid`; a group that is gone is not an error.
pub fn signal_group(pgid: i32, sig: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid addresses a process group; no memory is involved.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// Sends `sig` to one process.
pub fn signal_pid(pid: i32, sig: i32) -> bool {
    // SAFETY: plain kill(2).
    pid > 0 && unsafe { libc::kill(pid, sig) } == 0
}

/// Whether a process with this pid exists (and is not a zombie we could still reap).
pub fn pid_alive(pid: i32) -> bool {
    signal_pid(pid, 0)
}
