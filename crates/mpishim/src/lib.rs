//! The PMPI shim: loaded with `LD_PRELOAD` into a program linked with MPICH (`cosched submit
//! --monitor` sets it), it defines `MPI_Send`, `MPI_Recv`, `MPI_Wait`, `MPI_Waitall`,
//! `MPI_Waitany`, `MPI_Barrier`, `MPI_Allreduce` and `MPI_Bcast`, each of which calls the
//! library's `PMPI_` twin (found with dlsym(RTLD_NEXT)) and records the call — start, end,
//! bytes, peer, kind — into the node's monitor ring through cosched-monitor, as `cosched bsp`
//! records its own messages.
//!
//! Written against MPICH's ABI (Debian's `mpich`, and every MPICH derivative): handles are
//! `int`, `MPI_Status` is five ints with the source third, `MPI_STATUS_IGNORE` is `(void*)1`.
//! Nothing here needs `mpi.h`, so the workspace builds without MPI installed. Peers are ranks
//! in the call's communicator; `MPI_ANY_SOURCE` receives record the actual source. The shim
//! records only: MPICH's progress engine does its own busy polling, so the node manager's spin
//! time does not apply to MPI waits (it does to programs that wait through
//! `cosched_monitor_wait`).

use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::OnceLock;

use cosched_monitor::{Kind, ffi::global, now_ns};

type Comm = c_int;
type Datatype = c_int;
type Op = c_int;
type Request = c_int;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Status {
    count_lo: c_int,
    count_hi_and_cancelled: c_int,
    source: c_int,
    tag: c_int,
    error: c_int,
}

/// MPICH's `MPI_STATUS_IGNORE`: the address 1 (not a pointer to anything).
const STATUS_IGNORE: *mut Status = std::ptr::without_provenance_mut(1);
const SUCCESS: c_int = 0;
const PROC_NULL: c_int = -1;

/// The `PMPI_` function `name` (a NUL-terminated symbol) of the library loaded after us.
fn next(name: &'static [u8]) -> *mut c_void {
    // SAFETY: a NUL-terminated name; RTLD_NEXT searches the objects after this one.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    if p.is_null() {
        let n = String::from_utf8_lossy(&name[..name.len() - 1]);
        eprintln!("cosched-mpishim: {n} not found: is the program linked with MPICH?");
        std::process::abort();
    }
    p
}

macro_rules! pmpi {
    ($name:literal, fn($($arg:ty),*) -> c_int) => {{
        static F: OnceLock<usize> = OnceLock::new();
        let p = *F.get_or_init(|| next(concat!($name, "\0").as_bytes()) as usize);
        // SAFETY: the MPICH function of that name has this signature.
        unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) -> c_int>(p) }
    }};
}

fn type_size(t: Datatype) -> u64 {
    let f = pmpi!("PMPI_Type_size", fn(Datatype, *mut c_int) -> c_int);
    let mut s: c_int = 0;
    // SAFETY: a valid out pointer.
    if unsafe { f(t, &mut s) } != SUCCESS {
        return 0;
    }
    s.max(0) as u64
}

fn bytes(count: c_int, t: Datatype) -> u64 {
    count.max(0) as u64 * type_size(t)
}

/// Bytes a completed receive got, from its status.
fn received(st: &Status, t: Datatype) -> u64 {
    let f = pmpi!(
        "PMPI_Get_count",
        fn(*const Status, Datatype, *mut c_int) -> c_int
    );
    let mut n: c_int = 0;
    // SAFETY: valid pointers.
    if unsafe { f(st, t, &mut n) } != SUCCESS || n < 0 {
        return 0;
    }
    n as u64 * type_size(t)
}

fn record(kind: Kind, peer: c_int, bytes: u64, start: u64) {
    global().record(kind, peer, bytes, start, now_ns());
}

/// # Safety
/// As MPI_Send.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    t: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
) -> c_int {
    let f = pmpi!(
        "PMPI_Send",
        fn(*const c_void, c_int, Datatype, c_int, c_int, Comm) -> c_int
    );
    let s = now_ns();
    // SAFETY: the caller's arguments, passed on.
    let rc = unsafe { f(buf, count, t, dest, tag, comm) };
    if rc == SUCCESS && dest != PROC_NULL {
        record(Kind::Send, dest, bytes(count, t), s);
    }
    rc
}

/// # Safety
/// As MPI_Recv.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    t: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    status: *mut Status,
) -> c_int {
    let f = pmpi!(
        "PMPI_Recv",
        fn(*mut c_void, c_int, Datatype, c_int, c_int, Comm, *mut Status) -> c_int
    );
    // Our own status when the caller ignores it: the source and size are recorded.
    let mut mine = Status::default();
    let st = if status == STATUS_IGNORE || status.is_null() {
        &mut mine as *mut Status
    } else {
        status
    };
    let s = now_ns();
    // SAFETY: the caller's arguments (or our status), passed on.
    let rc = unsafe { f(buf, count, t, source, tag, comm, st) };
    if rc == SUCCESS && source != PROC_NULL {
        // SAFETY: filled by PMPI_Recv.
        let st = unsafe { &*st };
        record(Kind::Recv, st.source, received(st, t), s);
    }
    rc
}

/// # Safety
/// As MPI_Wait.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Wait(request: *mut Request, status: *mut Status) -> c_int {
    let f = pmpi!("PMPI_Wait", fn(*mut Request, *mut Status) -> c_int);
    let s = now_ns();
    // SAFETY: the caller's arguments.
    let rc = unsafe { f(request, status) };
    if rc == SUCCESS {
        record(Kind::Wait, -1, 0, s);
    }
    rc
}

/// # Safety
/// As MPI_Waitall.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut Request,
    statuses: *mut Status,
) -> c_int {
    let f = pmpi!(
        "PMPI_Waitall",
        fn(c_int, *mut Request, *mut Status) -> c_int
    );
    let s = now_ns();
    // SAFETY: the caller's arguments.
    let rc = unsafe { f(count, requests, statuses) };
    if rc == SUCCESS {
        record(Kind::Wait, -1, 0, s);
    }
    rc
}

/// # Safety
/// As MPI_Waitany.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut Request,
    index: *mut c_int,
    status: *mut Status,
) -> c_int {
    let f = pmpi!(
        "PMPI_Waitany",
        fn(c_int, *mut Request, *mut c_int, *mut Status) -> c_int
    );
    let s = now_ns();
    // SAFETY: the caller's arguments.
    let rc = unsafe { f(count, requests, index, status) };
    if rc == SUCCESS {
        record(Kind::Wait, -1, 0, s);
    }
    rc
}

/// # Safety
/// As MPI_Barrier.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Barrier(comm: Comm) -> c_int {
    let f = pmpi!("PMPI_Barrier", fn(Comm) -> c_int);
    let s = now_ns();
    // SAFETY: the caller's argument.
    let rc = unsafe { f(comm) };
    if rc == SUCCESS {
        record(Kind::Barrier, -1, 0, s);
    }
    rc
}

/// # Safety
/// As MPI_Allreduce.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    t: Datatype,
    op: Op,
    comm: Comm,
) -> c_int {
    let f = pmpi!(
        "PMPI_Allreduce",
        fn(*const c_void, *mut c_void, c_int, Datatype, Op, Comm) -> c_int
    );
    let s = now_ns();
    // SAFETY: the caller's arguments.
    let rc = unsafe { f(sendbuf, recvbuf, count, t, op, comm) };
    if rc == SUCCESS {
        record(Kind::Allreduce, -1, bytes(count, t), s);
    }
    rc
}

/// # Safety
/// As MPI_Bcast.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    t: Datatype,
    root: c_int,
    comm: Comm,
) -> c_int {
    let f = pmpi!(
        "PMPI_Bcast",
        fn(*mut c_void, c_int, Datatype, c_int, Comm) -> c_int
    );
    let s = now_ns();
    // SAFETY: the caller's arguments.
    let rc = unsafe { f(buffer, count, t, root, comm) };
    if rc == SUCCESS {
        record(Kind::Bcast, root, bytes(count, t), s);
    }
    rc
}
