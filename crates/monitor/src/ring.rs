//! The ring file: one per job per node, created by the node manager, mapped shared by the
//! node manager and the job's local ranks. Every field is a little-endian 64-bit word
//! accessed atomically, so the file can be read by anything that maps it (a C reader too).
//!
//! ```text
//! header (256 bytes)
//!   0 magic "CSMRING1"        8 version (1)          16 slots         24 capacity (records per slot)
//!  32 record size (48)       40 spin time, ns (the node manager writes it; ranks read it at each wait)
//!  48 job id                 56 created, ns          64..128 node name (NUL-padded)
//! slot i at 256 + i · (256 + capacity · 48):
//!   slot header (256 bytes)
//!     0 rank   8 pid (written by the rank at attach)   16 head: records reserved so far
//!    24 communications   32 bytes   40 Σ (end − start) ns   48 Σ blocked ns   56 Σ spun ns
//!    64 waits that blocked   72 waits   80 state (0 running, 1 spinning, 2 blocked)
//!    88 state since, ns      96 end of the last communication, ns
//!   128 + 8·k: communications of kind k (k = 0..16; see [`Kind`])
//!   records (capacity × 48 bytes): record n is at index n mod capacity
//!     0 seq (n + 1 once complete)  8 start ns  16 end ns  24 bytes
//!    32 peer (low 32 bits, signed; −1 for none or collective) | kind (high 32 bits)
//!    40 blocked ns
//! ```
//!
//! One writer per slot (the rank; a rank's threads may share it: the head is reserved with
//! an atomic add). A writer reserves n = head++, writes the record's fields, then stores
//! seq = n + 1 with release ordering, then adds to the totals. A reader going from its
//! cursor to head reads seq (acquire), the fields, then seq again: a record whose seq is
//! still below n + 1 is being written (the reader stops there for now); one whose seq is above
//! was overwritten by a later lap (counted as lost). Totals are exact whatever the reader
//! misses; times are CLOCK_MONOTONIC nanoseconds.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: u64 = u64::from_le_bytes(*b"CSMRING1");
const VERSION: u64 = 1;
pub const HEADER: usize = 256;
pub const SLOT_HEADER: usize = 256;
pub const RECORD: usize = 48;
/// Records per slot unless the node manager says otherwise: 48 KiB per rank.
pub const DEFAULT_CAPACITY: usize = 1024;

const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_SLOTS: usize = 16;
const H_CAPACITY: usize = 24;
const H_RECORD: usize = 32;
const H_SPIN: usize = 40;
const H_JOB: usize = 48;
const H_CREATED: usize = 56;
const H_NODE: usize = 64;
const NODE_MAX: usize = 64;

const S_RANK: usize = 0;
const S_PID: usize = 8;
const S_HEAD: usize = 16;
const S_COUNT: usize = 24;
const S_BYTES: usize = 32;
const S_COMM: usize = 40;
const S_BLOCKED: usize = 48;
const S_SPUN: usize = 56;
const S_BLOCKS: usize = 64;
const S_WAITS: usize = 72;
const S_STATE: usize = 80;
const S_SINCE: usize = 88;
const S_LAST_END: usize = 96;
const S_BY_KIND: usize = 128;
/// Kinds have numbers below this.
pub const KINDS: usize = 16;

/// What a communication was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Kind {
    Send = 1,
    Recv = 2,
    Wait = 3,
    Barrier = 4,
    Allreduce = 5,
    Bcast = 6,
    Other = 15,
}

impl Kind {
    pub fn from_u32(k: u32) -> Kind {
        match k {
            1 => Kind::Send,
            2 => Kind::Recv,
            3 => Kind::Wait,
            4 => Kind::Barrier,
            5 => Kind::Allreduce,
            6 => Kind::Bcast,
            _ => Kind::Other,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Recv => "recv",
            Kind::Wait => "wait",
            Kind::Barrier => "barrier",
            Kind::Allreduce => "allreduce",
            Kind::Bcast => "bcast",
            Kind::Other => "other",
        }
    }
    pub const ALL: [Kind; 7] = [
        Kind::Send,
        Kind::Recv,
        Kind::Wait,
        Kind::Barrier,
        Kind::Allreduce,
        Kind::Bcast,
        Kind::Other,
    ];
}

/// What a rank is doing, as far as its monitor knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Computing (or anything but waiting in the monitor).
    Running,
    /// Waiting for a message, spinning.
    Spinning,
    /// Waiting for a message, blocked in the kernel.
    Blocked,
}

impl State {
    fn from_u64(v: u64) -> State {
        match v {
            1 => State::Spinning,
            2 => State::Blocked,
            _ => State::Running,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Spinning => "spinning",
            State::Blocked => "blocked",
        }
    }
}

/// One blocking communication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    /// The peer rank; −1 for none (a collective, a wait on several requests).
    pub peer: i32,
    pub kind: Kind,
    /// Of the time between start and end, how much was spent blocked in the kernel.
    pub blocked_ns: u64,
}

/// One slot's totals and latest record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotStats {
    pub slot: usize,
    pub rank: u32,
    /// 0 until the rank attached.
    pub pid: u32,
    /// Records written (communications recorded, whether or not still in the ring).
    pub records: u64,
    pub count: u64,
    pub bytes: u64,
    /// Σ (end − start) over the communications.
    pub comm_ns: u64,
    pub blocked_ns: u64,
    pub spun_ns: u64,
    pub waits: u64,
    /// Waits that ran out of spin and blocked.
    pub blocks: u64,
    pub state: State,
    pub state_since_ns: u64,
    pub last: Option<Record>,
    /// Communications by kind number (`Kind as usize`).
    pub by_kind: [u64; KINDS],
}

impl SlotStats {
    /// Communications of one kind.
    pub fn of(&self, k: Kind) -> u64 {
        self.by_kind[k as usize]
    }
}

/// A mapping of a ring (the node manager's or a rank's view; both may write).
pub struct Ring {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: every access to the mapping goes through atomics.
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Bytes of a ring with `slots` slots of `capacity` records.
pub fn size(slots: usize, capacity: usize) -> usize {
    HEADER + slots * (SLOT_HEADER + capacity * RECORD)
}

/// Gives the ring file its `len` bytes on disk before it is mapped. A page of a shared
/// mapping that the file system cannot back when it is first written (a full disk, a sparse
/// file) raises SIGBUS in whoever writes it — the node manager initialising the ring, or a
/// rank recording — so the space is taken here, where a full disk is an error to report.
fn allocate(f: &std::fs::File, len: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    // SAFETY: fallocate on an open descriptor; no memory is passed.
    if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
        return Err(e);
    }
    // A file system without fallocate: zeros written allocate the blocks as well.
    let zeros = vec![0u8; 64 * 1024];
    let mut at = 0;
    while at < len {
        let n = zeros.len().min(len - at);
        f.write_all_at(&zeros[..n], at as u64)?;
        at += n;
    }
    Ok(())
}

impl Ring {
    /// Creates (or replaces) the ring file at `path` for `job` on `node`, with one slot per
    /// rank in `ranks` (slot i is `ranks[i]`), `capacity` records per slot and the initial
    /// spin time. The file is created mode 0600: only the job's user and the node manager
    /// read it. It is written under a temporary name and renamed into place, so a rank never
    /// maps a half-initialised header; that name is made anew (`O_EXCL`, never through a
    /// link that stood there). A node manager running as root, in a directory the job's user
    /// can write, makes the file relative to its handle of the directory instead and calls
    /// [`Ring::init_file`].
    pub fn create(
        path: &Path,
        job: u64,
        node: &str,
        ranks: &[u32],
        capacity: usize,
        spin_ns: u64,
    ) -> io::Result<Ring> {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = path.with_extension("tmp");
        // A stale one (an earlier run that died) goes; a link is removed, not followed.
        let _ = std::fs::remove_file(&tmp);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let ring = Ring::init_file(&f, job, node, ranks, capacity, spin_ns)?;
        std::fs::rename(&tmp, path)?;
        Ok(ring)
    }

    /// Sizes the new, empty file `f` for the ring of `job` on `node` (one slot per rank in
    /// `ranks`, `capacity` records per slot), maps it and writes its header.
    pub fn init_file(
        f: &std::fs::File,
        job: u64,
        node: &str,
        ranks: &[u32],
        capacity: usize,
        spin_ns: u64,
    ) -> io::Result<Ring> {
        let capacity = capacity.max(1);
        let len = size(ranks.len(), capacity);
        allocate(f, len)?;
        let ring = Ring::map(f, len)?;
        ring.init(job, node, ranks, capacity, spin_ns);
        Ok(ring)
    }

    /// A ring in a private anonymous mapping (a monitor without a node manager).
    pub fn anonymous(slots: usize, capacity: usize) -> io::Result<Ring> {
        let len = size(slots, capacity);
        // SAFETY: a fresh anonymous mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = Ring { ptr: p.cast(), len };
        let ranks: Vec<u32> = (0..slots as u32).collect();
        ring.init(0, "", &ranks, capacity, 0);
        Ok(ring)
    }

    /// Maps an existing ring file, checking its header.
    pub fn open(path: &Path) -> io::Result<Ring> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let len = f.metadata()?.len() as usize;
        let bad = |why: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a cosched monitor ring: {why}", path.display()),
            )
        };
        if len < HEADER {
            return Err(bad(format!("{len} bytes")));
        }
        let ring = Ring::map(&f, len)?;
        if ring.word(H_MAGIC).load(Ordering::Acquire) != MAGIC {
            return Err(bad("wrong magic".into()));
        }
        if ring.word(H_VERSION).load(Ordering::Relaxed) != VERSION
            || ring.word(H_RECORD).load(Ordering::Relaxed) != RECORD as u64
        {
            return Err(bad("another version of the layout".into()));
        }
        let want = size(ring.slots(), ring.capacity());
        if want > len {
            return Err(bad(format!("{len} bytes, the header says {want}")));
        }
        Ok(ring)
    }

    fn map(f: &std::fs::File, len: usize) -> io::Result<Ring> {
        use std::os::fd::AsRawFd;
        // SAFETY: a shared mapping of a file at least `len` bytes long.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring { ptr: p.cast(), len })
    }

    fn init(&self, job: u64, node: &str, ranks: &[u32], capacity: usize, spin_ns: u64) {
        let w = |off: usize, v: u64| self.word(off).store(v, Ordering::Relaxed);
        w(H_VERSION, VERSION);
        w(H_SLOTS, ranks.len() as u64);
        w(H_CAPACITY, capacity as u64);
        w(H_RECORD, RECORD as u64);
        w(H_SPIN, spin_ns);
        w(H_JOB, job);
        w(H_CREATED, crate::now_ns());
        let mut name = [0u8; NODE_MAX];
        let n = node.len().min(NODE_MAX - 1);
        name[..n].copy_from_slice(&node.as_bytes()[..n]);
        for (i, chunk) in name.chunks(8).enumerate() {
            w(
                H_NODE + 8 * i,
                u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
            );
        }
        for (i, &r) in ranks.iter().enumerate() {
            self.word(self.slot_off(i) + S_RANK)
                .store(u64::from(r), Ordering::Relaxed);
        }
        self.word(H_MAGIC).store(MAGIC, Ordering::Release);
    }

    /// The 64-bit word at byte offset `off`.
    fn word(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.len,
            "offset {off} in the ring"
        );
        // SAFETY: in bounds and aligned (the mapping is page-aligned); atomics only.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }

    fn slot_off(&self, slot: usize) -> usize {
        HEADER + slot * (SLOT_HEADER + self.capacity() * RECORD)
    }

    pub fn slots(&self) -> usize {
        self.word(H_SLOTS).load(Ordering::Relaxed) as usize
    }
    pub fn capacity(&self) -> usize {
        self.word(H_CAPACITY).load(Ordering::Relaxed) as usize
    }
    pub fn job(&self) -> u64 {
        self.word(H_JOB).load(Ordering::Relaxed)
    }
    pub fn node(&self) -> String {
        let mut bytes = Vec::with_capacity(NODE_MAX);
        for i in 0..NODE_MAX / 8 {
            bytes.extend_from_slice(
                &self
                    .word(H_NODE + 8 * i)
                    .load(Ordering::Relaxed)
                    .to_le_bytes(),
            );
        }
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    }
    /// The spin time ranks use in their next waits.
    pub fn spin_ns(&self) -> u64 {
        self.word(H_SPIN).load(Ordering::Relaxed)
    }
    /// Sets the spin time (the node manager's control; `u64::MAX`: spin for ever).
    pub fn set_spin_ns(&self, ns: u64) {
        self.word(H_SPIN).store(ns, Ordering::Relaxed);
    }

    /// Slot `i` (panics out of range).
    pub fn slot(&self, i: usize) -> Slot<'_> {
        assert!(i < self.slots(), "slot {i} of {}", self.slots());
        Slot {
            ring: self,
            off: self.slot_off(i),
            index: i,
        }
    }

    /// Every slot's totals.
    pub fn stats(&self) -> Vec<SlotStats> {
        (0..self.slots()).map(|i| self.slot(i).stats()).collect()
    }
}

/// One rank's slot.
pub struct Slot<'a> {
    ring: &'a Ring,
    off: usize,
    index: usize,
}

impl Slot<'_> {
    fn w(&self, field: usize) -> &AtomicU64 {
        self.ring.word(self.off + field)
    }
    fn rec(&self, n: u64, field: usize) -> &AtomicU64 {
        let cap = self.ring.capacity() as u64;
        self.ring
            .word(self.off + SLOT_HEADER + (n % cap) as usize * RECORD + field)
    }

    pub fn set_pid(&self, pid: u32) {
        self.w(S_PID).store(u64::from(pid), Ordering::Relaxed);
    }

    pub fn set_state(&self, s: State, now: u64) {
        self.w(S_SINCE).store(now, Ordering::Relaxed);
        let v = match s {
            State::Running => 0,
            State::Spinning => 1,
            State::Blocked => 2,
        };
        self.w(S_STATE).store(v, Ordering::Release);
    }

    pub(crate) fn add_wait(&self, w: crate::WaitOutcome) {
        self.w(S_WAITS).fetch_add(1, Ordering::Relaxed);
        self.w(S_SPUN).fetch_add(w.spun_ns, Ordering::Relaxed);
        if w.blocked_ns > 0 {
            self.w(S_BLOCKS).fetch_add(1, Ordering::Relaxed);
            self.w(S_BLOCKED).fetch_add(w.blocked_ns, Ordering::Relaxed);
        }
    }

    /// Appends a record and adds it to the totals.
    pub fn push(&self, r: Record) {
        let n = self.w(S_HEAD).fetch_add(1, Ordering::AcqRel);
        self.rec(n, 8).store(r.start_ns, Ordering::Relaxed);
        self.rec(n, 16).store(r.end_ns, Ordering::Relaxed);
        self.rec(n, 24).store(r.bytes, Ordering::Relaxed);
        let pk = u64::from(r.peer as u32) | (u64::from(r.kind as u32) << 32);
        self.rec(n, 32).store(pk, Ordering::Relaxed);
        self.rec(n, 40).store(r.blocked_ns, Ordering::Relaxed);
        self.rec(n, 0).store(n + 1, Ordering::Release);
        self.w(S_COUNT).fetch_add(1, Ordering::Relaxed);
        self.w(S_BY_KIND + 8 * (r.kind as usize % KINDS))
            .fetch_add(1, Ordering::Relaxed);
        self.w(S_BYTES).fetch_add(r.bytes, Ordering::Relaxed);
        self.w(S_COMM)
            .fetch_add(r.end_ns - r.start_ns, Ordering::Relaxed);
        self.w(S_LAST_END).fetch_max(r.end_ns, Ordering::Release);
    }

    /// Record `n` if it is complete and still there: `Err(true)` overwritten, `Err(false)`
    /// not complete yet.
    fn read(&self, n: u64) -> Result<Record, bool> {
        let seq = self.rec(n, 0).load(Ordering::Acquire);
        if seq != n + 1 {
            return Err(seq > n + 1);
        }
        let start_ns = self.rec(n, 8).load(Ordering::Relaxed);
        let end_ns = self.rec(n, 16).load(Ordering::Relaxed);
        let bytes = self.rec(n, 24).load(Ordering::Relaxed);
        let pk = self.rec(n, 32).load(Ordering::Relaxed);
        let blocked_ns = self.rec(n, 40).load(Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Acquire);
        let again = self.rec(n, 0).load(Ordering::Relaxed);
        if again != n + 1 {
            return Err(true);
        }
        Ok(Record {
            start_ns,
            end_ns,
            bytes,
            peer: pk as u32 as i32,
            kind: Kind::from_u32((pk >> 32) as u32),
            blocked_ns,
        })
    }

    pub fn stats(&self) -> SlotStats {
        let r = |f: usize| self.w(f).load(Ordering::Acquire);
        let head = r(S_HEAD);
        let last = (head > 0).then(|| self.read(head - 1).ok()).flatten();
        SlotStats {
            slot: self.index,
            rank: r(S_RANK) as u32,
            pid: r(S_PID) as u32,
            records: head,
            count: r(S_COUNT),
            bytes: r(S_BYTES),
            comm_ns: r(S_COMM),
            blocked_ns: r(S_BLOCKED),
            spun_ns: r(S_SPUN),
            waits: r(S_WAITS),
            blocks: r(S_BLOCKS),
            state: State::from_u64(r(S_STATE)),
            state_since_ns: r(S_SINCE),
            last,
            by_kind: std::array::from_fn(|k| r(S_BY_KIND + 8 * k)),
        }
    }
}

/// A reader's position in every slot: what it has already read.
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    next: Vec<u64>,
}

impl Cursor {
    /// A cursor at the start of every slot of `ring`.
    pub fn new(ring: &Ring) -> Cursor {
        Cursor {
            next: vec![0; ring.slots()],
        }
    }

    /// The records written since the last read, slot by slot in order, and how many were
    /// overwritten before they could be read.
    pub fn read(&mut self, ring: &Ring) -> (Vec<(usize, Record)>, u64) {
        let cap = ring.capacity() as u64;
        let mut out = Vec::new();
        let mut lost = 0;
        self.next.resize(ring.slots(), 0);
        for (i, next) in self.next.iter_mut().enumerate() {
            let slot = ring.slot(i);
            let head = slot.w(S_HEAD).load(Ordering::Acquire);
            if head > *next + cap {
                lost += head - cap - *next;
                *next = head - cap;
            }
            while *next < head {
                match slot.read(*next) {
                    Ok(r) => out.push((i, r)),
                    Err(true) => lost += 1,
                    // Still being written: read it next time.
                    Err(false) => break,
                }
                *next += 1;
            }
        }
        (out, lost)
    }
}
