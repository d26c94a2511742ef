//! The only unsafe code of the crate: the C glue's functions (src/sys/glue.c) declared and
//! wrapped in safe functions that take and give Rust types. The glue owns every PMIx type;
//! what crosses here is strings, integers, byte slices and the flat `csp_event_t` record.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr::NonNull;

use crate::event::{Proc, RawEvent, RawKind};
use crate::layout::{Info, Value};

#[repr(C)]
struct CProc {
    nspace: *const c_char,
    rank: u32,
}

#[repr(C)]
struct CEvent {
    kind: c_int,
    proc_: CProc,
    status: c_int,
    message: *const c_char,
    procs: *const CProc,
    nprocs: usize,
    data: *const c_char,
    ndata: usize,
    flag: c_int,
    range: c_int,
    keys: *const *const c_char,
    values: *const *const c_char,
    nkeys: usize,
    tag: u64,
    req: *mut c_void,
}

#[repr(C)]
struct CInfo {
    key: *const c_char,
    type_: c_int,
    num: u64,
    str_: *const c_char,
    children: *const CInfo,
    nchildren: usize,
}

type Sink = unsafe extern "C" fn(ctx: *mut c_void, ev: *const CEvent);

unsafe extern "C" {
    fn csp_init(
        tmpdir: *const c_char,
        hostname: *const c_char,
        sink: Sink,
        ctx: *mut c_void,
    ) -> c_int;
    fn csp_finalize() -> c_int;
    fn csp_register_nspace(
        nspace: *const c_char,
        nlocal: u32,
        infos: *const CInfo,
        n: usize,
    ) -> c_int;
    fn csp_deregister_nspace(nspace: *const c_char) -> c_int;
    fn csp_register_client(nspace: *const c_char, rank: u32, uid: u32, gid: u32) -> c_int;
    fn csp_deregister_client(nspace: *const c_char, rank: u32) -> c_int;
    fn csp_setup_fork(nspace: *const c_char, rank: u32, env: *mut *mut *mut c_char) -> c_int;
    fn csp_free_env(env: *mut *mut c_char);
    fn csp_local_modex(nspace: *const c_char, rank: u32, tag: u64) -> c_int;
    fn csp_reply_modex(req: *mut c_void, status: c_int, data: *const c_char, ndata: usize);
    fn csp_reply_op(req: *mut c_void, status: c_int);
    fn csp_reply_lookup(
        req: *mut c_void,
        status: c_int,
        owners: *const CProc,
        keys: *const *const c_char,
        values: *const *const c_char,
        n: usize,
    );
    fn csp_error_string(status: c_int) -> *const c_char;
    fn csp_version() -> *const c_char;
}

/// A request of the library waiting for its answer: the glue's heap record of the library's
/// callback. Answered exactly once (the `reply_*` functions take it by value and the glue
/// frees it).
#[derive(Debug)]
pub(crate) struct Request(NonNull<c_void>);

// SAFETY: the record is a plain heap block the glue allocated for this request alone; nothing
// else refers to it until it is answered, and the library's callbacks it holds may be called
// from any thread (they hand the answer to the library's progress thread themselves).
unsafe impl Send for Request {}

/// The event handler the glue calls on the library's progress thread; `ctx` is the `Box`
/// [`init`] leaked.
type Handler = Box<dyn Fn(RawEvent) + Send + Sync>;

/// Reads a C string the glue passed for the duration of a callback.
///
/// SAFETY (callers): `p` is NULL or points to a NUL-terminated string valid for the call.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's promise above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// SAFETY (callers): `p.nspace` as for [`text`].
unsafe fn proc_of(p: &CProc) -> Proc {
    Proc {
        // SAFETY: the caller's promise.
        nspace: unsafe { text(p.nspace) },
        rank: p.rank,
    }
}

/// SAFETY (callers): `ptr` is NULL (with `n` = 0) or points to `n` valid items.
unsafe fn slice<'a, T>(ptr: *const T, n: usize) -> &'a [T] {
    if ptr.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(ptr, n) }
    }
}

unsafe extern "C" fn trampoline(ctx: *mut c_void, ev: *const CEvent) {
    // SAFETY: the glue passes the record it built on its stack for this call, with every
    // pointer in it valid (or NULL with a zero count) until the call returns; everything is
    // copied out before returning.
    let ev = unsafe { &*ev };
    let Some(kind) = RawKind::from_code(ev.kind) else {
        return;
    };
    // SAFETY: as above, for each pointer of the record.
    let raw = unsafe {
        RawEvent {
            kind,
            client: proc_of(&ev.proc_),
            status: ev.status,
            message: text(ev.message),
            procs: slice(ev.procs, ev.nprocs)
                .iter()
                .map(|p| proc_of(p))
                .collect(),
            data: slice(ev.data.cast::<u8>(), ev.ndata).to_vec(),
            flag: ev.flag,
            range: ev.range,
            keys: slice(ev.keys, ev.nkeys).iter().map(|k| text(*k)).collect(),
            values: slice(ev.values, if ev.values.is_null() { 0 } else { ev.nkeys })
                .iter()
                .map(|v| text(*v))
                .collect(),
            tag: ev.tag,
            req: NonNull::new(ev.req).map(Request),
        }
    };
    // SAFETY: `ctx` is the handler `init` leaked, alive until `finalize` has returned (after
    // which the library calls nothing).
    let handler = unsafe { &*(ctx as *const Handler) };
    // A panic must not unwind into C: the event is lost, but its reply handle (if any) was
    // dropped during the unwind and so answered with an error.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(raw)));
}

/// The handler `init` leaked, to reclaim after `finalize`.
pub(crate) struct Installed(*mut Handler);

// SAFETY: the pointer is only turned back into its Box by `finalize`, on whatever thread
// shuts the server down; the Box's content is Send + Sync.
unsafe impl Send for Installed {}
// SAFETY: as above; `Installed` offers no access to the handler.
unsafe impl Sync for Installed {}

pub(crate) fn init(tmpdir: &CStr, hostname: &CStr, handler: Handler) -> Result<Installed, i32> {
    let ctx = Box::into_raw(Box::new(handler));
    // SAFETY: both strings are valid for the call (the glue copies them); `ctx` stays valid
    // until `finalize` reclaims it.
    let rc = unsafe { csp_init(tmpdir.as_ptr(), hostname.as_ptr(), trampoline, ctx.cast()) };
    if rc == 0 {
        Ok(Installed(ctx))
    } else {
        // SAFETY: the library failed to start and kept no reference to `ctx`.
        drop(unsafe { Box::from_raw(ctx) });
        Err(rc)
    }
}

pub(crate) fn finalize(installed: Installed) -> i32 {
    // SAFETY: no argument; the library stops its progress thread before returning.
    let rc = unsafe { csp_finalize() };
    // SAFETY: the progress thread is gone, so no callback can use the handler any more.
    drop(unsafe { Box::from_raw(installed.0) });
    rc
}

/// A registration record as the glue reads it, with the C strings it points into.
struct CInfos {
    infos: Vec<CInfo>,
    _children: Vec<CInfos>,
    _strings: Vec<CString>,
}

fn c_infos(list: &[Info]) -> CInfos {
    let mut strings = Vec::new();
    let mut children = Vec::new();
    let mut infos = Vec::with_capacity(list.len());
    for info in list {
        let key = CString::new(info.key).expect("PMIx keys are constants without NUL");
        let (type_, num, s, kids) = match &info.value {
            Value::Str(s) => (1, 0, Some(s.as_str()), None),
            Value::U32(v) => (2, u64::from(*v), None, None),
            Value::U16(v) => (3, u64::from(*v), None, None),
            Value::Rank(v) => (4, u64::from(*v), None, None),
            Value::Bool(v) => (5, u64::from(*v), None, None),
            Value::NodeRegex(s) => (6, 0, Some(s.as_str()), None),
            Value::ProcRegex(s) => (7, 0, Some(s.as_str()), None),
            Value::Array(items) => (8, 0, None, Some(c_infos(items))),
        };
        let str_ = match s {
            Some(s) => {
                // Layout strings were checked for NUL when the layout was built.
                let c = CString::new(s).unwrap_or_default();
                let p = c.as_ptr();
                strings.push(c);
                p
            }
            None => std::ptr::null(),
        };
        let (kptr, nchildren) = match &kids {
            Some(k) => (k.infos.as_ptr(), k.infos.len()),
            None => (std::ptr::null(), 0),
        };
        infos.push(CInfo {
            key: key.as_ptr(),
            type_,
            num,
            str_,
            children: kptr,
            nchildren,
        });
        strings.push(key);
        children.extend(kids);
    }
    CInfos {
        infos,
        _children: children,
        _strings: strings,
    }
}

pub(crate) fn register_nspace(nspace: &CStr, nlocal: u32, infos: &[Info]) -> i32 {
    let c = c_infos(infos);
    // SAFETY: every pointer in `c` points into strings and vectors `c` owns (a CString's and
    // a Vec's heap buffers do not move when the owner does), alive until after the call; the
    // glue copies what it keeps.
    unsafe { csp_register_nspace(nspace.as_ptr(), nlocal, c.infos.as_ptr(), c.infos.len()) }
}

pub(crate) fn deregister_nspace(nspace: &CStr) -> i32 {
    // SAFETY: a valid C string for the call.
    unsafe { csp_deregister_nspace(nspace.as_ptr()) }
}

pub(crate) fn register_client(nspace: &CStr, rank: u32, uid: u32, gid: u32) -> i32 {
    // SAFETY: a valid C string for the call.
    unsafe { csp_register_client(nspace.as_ptr(), rank, uid, gid) }
}

pub(crate) fn deregister_client(nspace: &CStr, rank: u32) -> i32 {
    // SAFETY: a valid C string for the call.
    unsafe { csp_deregister_client(nspace.as_ptr(), rank) }
}

pub(crate) fn setup_fork(nspace: &CStr, rank: u32) -> Result<Vec<String>, i32> {
    let mut env: *mut *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid C string and a place for the glue to store the array it allocates.
    let rc = unsafe { csp_setup_fork(nspace.as_ptr(), rank, &mut env) };
    let mut out = Vec::new();
    if !env.is_null() {
        let mut i = 0;
        loop {
            // SAFETY: `env` is a NULL-terminated array of C strings (PMIx's argv).
            let item = unsafe { *env.add(i) };
            if item.is_null() {
                break;
            }
            // SAFETY: each item is a NUL-terminated string of that array.
            out.push(unsafe { text(item) });
            i += 1;
        }
        // SAFETY: the array the glue allocated, freed once, with PMIx's own argv free.
        unsafe { csp_free_env(env) };
    }
    if rc == 0 { Ok(out) } else { Err(rc) }
}

pub(crate) fn local_modex(nspace: &CStr, rank: u32, tag: u64) -> i32 {
    // SAFETY: a valid C string for the call (the glue copies it).
    unsafe { csp_local_modex(nspace.as_ptr(), rank, tag) }
}

pub(crate) fn reply_modex(req: Request, status: i32, data: &[u8]) {
    // SAFETY: `req` is an unanswered modex request (Request is answered once, by value);
    // the glue copies `data` before returning.
    unsafe { csp_reply_modex(req.0.as_ptr(), status, data.as_ptr().cast(), data.len()) }
}

pub(crate) fn reply_op(req: Request, status: i32) {
    // SAFETY: `req` is an unanswered operation request.
    unsafe { csp_reply_op(req.0.as_ptr(), status) }
}

pub(crate) fn reply_lookup(req: Request, status: i32, found: &[(Proc, String, String)]) {
    let strings: Vec<(CString, CString, CString)> = found
        .iter()
        .map(|(owner, k, v)| {
            (
                CString::new(owner.nspace.as_str()).unwrap_or_default(),
                CString::new(k.as_str()).unwrap_or_default(),
                CString::new(v.as_str()).unwrap_or_default(),
            )
        })
        .collect();
    let owners: Vec<CProc> = strings
        .iter()
        .zip(found)
        .map(|((ns, _, _), (owner, _, _))| CProc {
            nspace: ns.as_ptr(),
            rank: owner.rank,
        })
        .collect();
    let keys: Vec<*const c_char> = strings.iter().map(|(_, k, _)| k.as_ptr()).collect();
    let values: Vec<*const c_char> = strings.iter().map(|(_, _, v)| v.as_ptr()).collect();
    // SAFETY: `req` is an unanswered lookup request; the three arrays have `found.len()`
    // items pointing into `strings`, alive for the call; the library packs them before the
    // glue returns.
    unsafe {
        csp_reply_lookup(
            req.0.as_ptr(),
            status,
            owners.as_ptr(),
            keys.as_ptr(),
            values.as_ptr(),
            found.len(),
        )
    }
}

pub(crate) fn error_string(status: i32) -> String {
    // SAFETY: PMIx returns a pointer to a static string for every status.
    unsafe { text(csp_error_string(status)) }
}

pub(crate) fn version() -> String {
    // SAFETY: a static string.
    unsafe { text(csp_version()) }
}
