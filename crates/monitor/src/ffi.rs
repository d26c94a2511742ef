//! The C ABI (declared in `include/cosched_monitor.h`): a process-wide monitor, attached on
//! first use to the ring the node manager named in the environment (or private without one).
//! Used by C programs linked with `-lcosched_monitor` and by the PMPI shim.

use std::os::raw::{c_int, c_short};
use std::sync::OnceLock;

use crate::{Kind, Monitor};

static MONITOR: OnceLock<Monitor> = OnceLock::new();

/// The process's monitor, attached on first use.
pub fn global() -> &'static Monitor {
    MONITOR.get_or_init(|| {
        Monitor::from_env().unwrap_or_else(|e| {
            eprintln!("cosched-monitor: {e}; recording into a private ring");
            Monitor::private()
        })
    })
}

/// Attaches the process's monitor: 1 when it writes into the node manager's ring, 0 when
/// into a private one (no node manager: the program was not started by cosched).
#[unsafe(no_mangle)]
pub extern "C" fn cosched_monitor_init() -> c_int {
    c_int::from(global().attached())
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of the records.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_monitor_now() -> u64 {
    crate::now_ns()
}

/// Records one blocking communication. `kind` is one of COSCHED_MONITOR_SEND … (an unknown
/// value is recorded as OTHER); `peer` is −1 for none.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_monitor_record(
    kind: c_int,
    peer: c_int,
    bytes: u64,
    start_ns: u64,
    end_ns: u64,
    blocked_ns: u64,
) {
    global().record_blocked(
        Kind::from_u32(kind as u32),
        peer,
        bytes,
        start_ns,
        end_ns,
        blocked_ns,
    );
}

/// The spin time the node manager currently asks for, in nanoseconds.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_monitor_spin_ns() -> u64 {
    global().spin_ns()
}

/// Spin-then-block until `events` (POLLIN, POLLOUT) are ready on `fd`: returns the poll
/// revents, or −1 with errno set. `blocked_ns`, when not NULL, receives the time spent
/// blocked (0 when the spin sufficed).
///
/// # Safety
/// `blocked_ns` is NULL or points to a writable u64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cosched_monitor_wait(
    fd: c_int,
    events: c_short,
    blocked_ns: *mut u64,
) -> c_int {
    match global().wait_fd(fd, events) {
        Ok(w) => {
            if !blocked_ns.is_null() {
                // SAFETY: the caller's pointer.
                unsafe { *blocked_ns = w.blocked_ns };
            }
            c_int::from(w.revents)
        }
        Err(e) => {
            // SAFETY: errno is thread-local.
            unsafe { *libc::__errno_location() = e.raw_os_error().unwrap_or(libc::EIO) };
            -1
        }
    }
}

/// This process's totals: communications recorded and their bytes (either pointer may be
/// NULL).
///
/// # Safety
/// Each pointer is NULL or points to a writable u64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cosched_monitor_totals(count: *mut u64, bytes: *mut u64) {
    let s = global().stats();
    // SAFETY: the caller's pointers.
    unsafe {
        if !count.is_null() {
            *count = s.count;
        }
        if !bytes.is_null() {
            *bytes = s.bytes;
        }
    }
}
