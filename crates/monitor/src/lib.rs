//! Communication monitoring for the ranks of a cosched job (seed 000 §4.2's libmonitor): each
//! rank reports every blocking communication (start, end, bytes, peer, kind) into a per-node
//! shared-memory ring that the node manager reads, and waits for its messages with
//! spin-then-block, spinning for a time the node manager writes into the same segment
//! (seed 000 §3.5).
//!
//! - [`ring`]: the file's layout, creating and mapping it, and reading it (the node manager's
//!   side: per-rank totals and the records since the last read).
//! - [`Monitor`]: one rank's writer — records, counters, and [`Monitor::wait_fd`].
//! - [`ffi`]: the C ABI over a process-wide monitor (`include/cosched_monitor.h`), for C
//!   programs and the PMPI shim.
//!
//! A rank finds its ring through `COSCHED_MONITOR_RING` (the file) and `COSCHED_MONITOR_SLOT`
//! (its slot), which the node manager sets at launch. Without them (a program started by
//! hand) the monitor writes into a private anonymous mapping of the same layout, so the
//! program runs the same way and can still read its own totals.

pub mod ffi;
pub mod ring;

use std::io;
use std::os::fd::RawFd;
use std::path::Path;

pub use ring::{Kind, Record, Ring, SlotStats};

/// Environment variable naming the node's ring file for this job.
pub const ENV_RING: &str = "COSCHED_MONITOR_RING";
/// Environment variable giving this rank's slot in the ring.
pub const ENV_SLOT: &str = "COSCHED_MONITOR_SLOT";

/// Nanoseconds on CLOCK_MONOTONIC: the clock of every time in the ring, shared by the ranks
/// and the node manager of a node.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread in nanoseconds (what a stopped rank does not accumulate).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How one [`Monitor::wait_fd`] went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitOutcome {
    /// `revents` of the descriptor.
    pub revents: i16,
    /// Time spent spinning (polling without sleeping).
    pub spun_ns: u64,
    /// Time spent blocked in the kernel after the spin ran out (0 if the spin sufficed).
    pub blocked_ns: u64,
}

/// One rank's writer into its slot of the ring.
pub struct Monitor {
    ring: Ring,
    slot: usize,
    attached: bool,
}

impl Monitor {
    /// The monitor the node manager prepared for this process (see [`ENV_RING`]), or a
    /// private one when there is none. An error only when the variables are set but the
    /// ring cannot be used (a file of the wrong layout, a slot out of range).
    pub fn from_env() -> io::Result<Monitor> {
        match (std::env::var_os(ENV_RING), std::env::var(ENV_SLOT)) {
            (Some(path), Ok(slot)) => {
                let slot: usize = slot.parse().map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{ENV_SLOT}={slot:?} is not a slot number"),
                    )
                })?;
                Monitor::attach(Path::new(&path), slot)
            }
            _ => Ok(Monitor::private()),
        }
    }

    /// Attaches to slot `slot` of the ring file at `path`.
    pub fn attach(path: &Path, slot: usize) -> io::Result<Monitor> {
        let ring = Ring::open(path)?;
        if slot >= ring.slots() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "slot {slot} out of range: {} has {} slots",
                    path.display(),
                    ring.slots()
                ),
            ));
        }
        ring.slot(slot).set_pid(std::process::id());
        Ok(Monitor {
            ring,
            slot,
            attached: true,
        })
    }

    /// A monitor writing into a private mapping (one slot, spin time 0: block at once).
    pub fn private() -> Monitor {
        Monitor {
            ring: Ring::anonymous(1, ring::DEFAULT_CAPACITY).expect("an anonymous mapping"),
            slot: 0,
            attached: false,
        }
    }

    /// Whether the records go to a node manager's ring (not a private mapping).
    pub fn attached(&self) -> bool {
        self.attached
    }

    /// The spin time the node manager currently asks for.
    pub fn spin_ns(&self) -> u64 {
        self.ring.spin_ns()
    }

    /// Records one communication.
    pub fn record(&self, kind: Kind, peer: i32, bytes: u64, start_ns: u64, end_ns: u64) {
        self.record_blocked(kind, peer, bytes, start_ns, end_ns, 0);
    }

    /// Records one communication of which `blocked_ns` were spent blocked in the kernel.
    pub fn record_blocked(
        &self,
        kind: Kind,
        peer: i32,
        bytes: u64,
        start_ns: u64,
        end_ns: u64,
        blocked_ns: u64,
    ) {
        self.ring.slot(self.slot).push(Record {
            start_ns,
            end_ns: end_ns.max(start_ns),
            bytes,
            peer,
            kind,
            blocked_ns,
        });
    }

    /// This rank's totals as the node manager sees them.
    pub fn stats(&self) -> SlotStats {
        self.ring.slot(self.slot).stats()
    }

    /// Marks the rank as computing, spinning or blocked (for a reader deciding what to run).
    pub fn set_state(&self, state: ring::State) {
        self.ring.slot(self.slot).set_state(state, now_ns());
    }

    /// Spin-then-block on `fd` until one of `events` (POLLIN, POLLOUT) is ready: polls
    /// without sleeping for up to the node manager's spin time, then blocks in poll(2). A
    /// spin time of 0 blocks at once (what an ordinary blocking call does); `u64::MAX` spins
    /// for ever (what a busy-polling MPI does).
    pub fn wait_fd(&self, fd: RawFd, events: i16) -> io::Result<WaitOutcome> {
        let slot = self.ring.slot(self.slot);
        let spin = self.ring.spin_ns();
        let t0 = now_ns();
        let mut out = WaitOutcome::default();
        if spin > 0 {
            slot.set_state(ring::State::Spinning, t0);
            loop {
                let r = poll_once(fd, events, 0)?;
                let t = now_ns();
                if r != 0 {
                    out.revents = r;
                    out.spun_ns = t - t0;
                    slot.add_wait(out);
                    slot.set_state(ring::State::Running, t);
                    return Ok(out);
                }
                if t - t0 >= spin {
                    out.spun_ns = t - t0;
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let t1 = now_ns();
        slot.set_state(ring::State::Blocked, t1);
        let r = loop {
            match poll_once(fd, events, -1) {
                Ok(0) => continue,
                Ok(r) => break r,
                Err(e) => {
                    slot.set_state(ring::State::Running, now_ns());
                    return Err(e);
                }
            }
        };
        let t2 = now_ns();
        out.revents = r;
        out.blocked_ns = t2 - t1;
        slot.add_wait(out);
        slot.set_state(ring::State::Running, t2);
        Ok(out)
    }
}

/// One poll(2) of one descriptor; EINTR counts as "not ready yet".
fn poll_once(fd: RawFd, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(if n == 0 { 0 } else { p.revents })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring's path in a directory of its own, removed with the guard.
    fn scratch(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::Builder::new()
            .prefix(&format!("cosched-monitor-{name}-"))
            .tempdir()
            .unwrap();
        let ring = d.path().join("ring");
        (d, ring)
    }

    #[test]
    fn records_written_by_a_rank_are_read_by_the_node_manager_in_order() {
        let (_dir, path) = scratch("order");
        let nm = Ring::create(&path, 7, "n3", &[4, 5], 8, 0).unwrap();
        let m = Monitor::attach(&path, 1).unwrap();
        for i in 0..5u64 {
            m.record(Kind::Send, 4, 100 + i, 10 * i, 10 * i + 3);
        }
        let stats = nm.stats();
        assert_eq!(stats[0].count, 0);
        assert_eq!(stats[1].rank, 5);
        assert_eq!(stats[1].pid, std::process::id());
        assert_eq!((stats[1].count, stats[1].bytes), (5, 510));
        assert_eq!(stats[1].comm_ns, 15);
        assert_eq!((stats[1].of(Kind::Send), stats[1].of(Kind::Recv)), (5, 0));
        assert_eq!(stats[1].last.unwrap().bytes, 104);
        let mut cursor = ring::Cursor::new(&nm);
        let (recs, lost) = cursor.read(&nm);
        assert_eq!(lost, 0);
        assert_eq!(
            recs.iter().map(|(s, r)| (*s, r.bytes)).collect::<Vec<_>>(),
            (100..105).map(|b| (1, b)).collect::<Vec<_>>()
        );
        assert!(cursor.read(&nm).0.is_empty(), "nothing new");
        assert_eq!(nm.job(), 7);
        assert_eq!(nm.node(), "n3");
    }

    #[test]
    fn a_reader_that_falls_behind_loses_the_oldest_records_and_says_how_many() {
        let (_dir, path) = scratch("lap");
        let nm = Ring::create(&path, 1, "n0", &[0], 4, 0).unwrap();
        let m = Monitor::attach(&path, 0).unwrap();
        let mut cursor = ring::Cursor::new(&nm);
        for i in 0..10u64 {
            m.record(Kind::Recv, 2, i, i, i);
        }
        let (recs, lost) = cursor.read(&nm);
        assert_eq!(lost, 6);
        assert_eq!(
            recs.iter().map(|(_, r)| r.bytes).collect::<Vec<_>>(),
            vec![6, 7, 8, 9]
        );
        // The totals are exact whatever the reader missed.
        assert_eq!(nm.stats()[0].count, 10);
    }

    #[test]
    fn spin_then_block_spins_for_the_node_managers_time_then_blocks() {
        let (_dir, path) = scratch("spin");
        let nm = Ring::create(&path, 1, "n0", &[0], 4, 0).unwrap();
        let m = Monitor::attach(&path, 0).unwrap();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::Write;
        use std::os::fd::AsRawFd;
        // Spin time 0: blocks at once, for about the 50 ms the writer takes.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            (&b).write_all(b"x").unwrap();
            b
        });
        let w = m.wait_fd(a.as_raw_fd(), libc::POLLIN).unwrap();
        assert_eq!(w.spun_ns, 0);
        assert!(w.blocked_ns >= 40_000_000, "{w:?}");
        let b = writer.join().unwrap();
        // 20 ms of spin with nothing coming: spins it all, then blocks.
        nm.set_spin_ns(20_000_000);
        assert_eq!(m.spin_ns(), 20_000_000);
        let mut buf = [0u8; 1];
        use std::io::Read;
        (&a).read_exact(&mut buf).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(80));
            (&b).write_all(b"y").unwrap();
            b
        });
        let w = m.wait_fd(a.as_raw_fd(), libc::POLLIN).unwrap();
        assert!(w.spun_ns >= 20_000_000 && w.blocked_ns > 0, "{w:?}");
        let b = writer.join().unwrap();
        // Data already there: the spin finds it, no block.
        (&b).write_all(b"z").unwrap();
        let w = m.wait_fd(a.as_raw_fd(), libc::POLLIN).unwrap();
        assert_eq!(w.blocked_ns, 0);
        let s = nm.stats()[0];
        assert_eq!((s.waits, s.blocks), (3, 2));
        assert_eq!(s.state, ring::State::Running);
    }

    #[test]
    fn a_private_monitor_counts_without_a_node_manager() {
        let m = Monitor::private();
        assert!(!m.attached());
        m.record(Kind::Barrier, -1, 0, 1, 2);
        assert_eq!(m.stats().count, 1);
    }

    #[test]
    fn a_file_that_is_not_a_ring_is_refused() {
        let (_dir, path) = scratch("bad");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        let e = Monitor::attach(&path, 0).err().unwrap();
        assert!(e.to_string().contains("not a cosched monitor ring"), "{e}");
    }
}
