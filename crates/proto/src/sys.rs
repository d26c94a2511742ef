//! The C library calls no safe wrapper offers, each behind a safe function: the password and
//! group databases (they go through the C library's name service switch, which a system call
//! wrapper such as rustix cannot reach: an account may live in LDAP or sssd), the real-time
//! scheduling class, and glibc's allocator thresholds. Every other system call of this crate
//! goes through rustix; this is the one module allowed `unsafe`.
#![allow(unsafe_code)]

use std::ffi::CStr;

use crate::util::Account;

/// The account of `uid` in the password database (getpwuid_r), if it has one.
pub(crate) fn account(uid: u32) -> Option<Account> {
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: getpwuid_r writes into `pw` and `buf` (of the length given) only; the strings
    // are read before `buf` goes.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) != 0
            || out.is_null()
        {
            return None;
        }
        Some(Account {
            name: CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
            gid: pw.pw_gid,
        })
    }
}

/// The name of group `gid` in the group database (getgrgid_r), if it has one.
pub(crate) fn group_name(gid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: getgrgid_r writes into `gr` and `buf` (of the length given) only; the name is
    // read before `buf` goes.
    unsafe {
        let mut gr: libc::group = std::mem::zeroed();
        let mut out: *mut libc::group = std::ptr::null_mut();
        if libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) != 0
            || out.is_null()
        {
            return None;
        }
        Some(CStr::from_ptr(gr.gr_name).to_string_lossy().into_owned())
    }
}

/// The uid of the account `name` in the password database (getpwnam_r), if there is one.
pub(crate) fn uid_of_name(name: &CStr) -> Option<u32> {
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: getpwnam_r writes into `pw` and `buf` (of the length given) only.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwnam_r(
            name.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        ) != 0
            || out.is_null()
        {
            return None;
        }
        Some(pw.pw_uid)
    }
}

/// The groups of user `name` whose primary group is `primary` (getgrouplist, as
/// `initgroups` sees them); `None` when the list does not fit 65,536 groups.
pub(crate) fn group_list(name: &CStr, primary: u32) -> Option<Vec<u32>> {
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let want = n;
        // SAFETY: getgrouplist writes at most `n` groups into `groups` and sets `n`.
        let r = unsafe { libc::getgrouplist(name.as_ptr(), primary, groups.as_mut_ptr(), &mut n) };
        if r >= 0 {
            groups.truncate(n as usize);
            return Some(groups);
        }
        if n <= want {
            n = want * 2;
        }
        if n > 65536 {
            return None;
        }
    }
}

/// Puts this process in the real-time FIFO class at priority 1, its children reset to the
/// normal class at fork (`SCHED_RESET_ON_FORK`); whether it was allowed.
pub(crate) fn realtime_fifo_1() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler on this process with a valid sched_param it only reads.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) == 0
    }
}

/// Makes glibc keep freed blocks below `mmap` bytes on its heap, and trim the heap only past
/// `trim` bytes free (mallopt).
pub(crate) fn keep_freed_below(mmap: i32, trim: i32) {
    // SAFETY: mallopt only sets allocator parameters; it is safe to call at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, mmap);
        libc::mallopt(libc::M_TRIM_THRESHOLD, trim);
    }
}
