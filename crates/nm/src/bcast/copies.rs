//! The files of staged copies: name-space directories, a copy opened or recycled in place,
//! handed to its user, its space reserved.

use super::reaper::Reaper;
use super::*;

pub(super) fn space_dir(bcast: &Dir, space: Space) -> std::io::Result<Dir> {
    match space {
        Space::Public => bcast.child_for(PUBLIC, 0o755, None),
        Space::User(uid) => user_dir(bcast, uid),
        Space::Job { uid, transfer } => {
            user_dir(bcast, uid)?.child_for(format!("@{transfer}"), 0o711, None)
        }
    }
}

/// User `uid`'s directory under `bcast`: the node manager's, which the user's primary group
/// may enter (0710) and nobody else; as another user than root, simply its own (0700).
pub(super) fn user_dir(bcast: &Dir, uid: u32) -> std::io::Result<Dir> {
    let me = cosched_proto::util::euid();
    if me != 0 {
        return bcast.child_for(uid.to_string(), 0o700, None);
    }
    let gid = cosched_proto::util::account(uid).map_or(uid, |a| a.gid);
    bcast.child_for(uid.to_string(), 0o710, Some((me, gid)))
}

/// The file a transfer writes at `place`, `size` bytes long: the copy it replaces (`old`, set
/// aside in the same directory by [`Reaper::set_aside`]) taken over when nobody else can
/// reach it (see [`recycle`]), else a new file (and `old` goes to the reaper). While it is
/// written it belongs to the node manager and nobody else may open it; [`hand_over`] gives
/// it to the job's user once it is checked.
pub(super) fn open_copy(
    place: &Place,
    size: u64,
    old: Option<String>,
    reaper: &Reaper,
) -> std::io::Result<std::fs::File> {
    if let Some(old) = old {
        match recycle(&place.dir, &old, &place.name, size) {
            Ok(f) => return Ok(f),
            Err(e) => {
                tracing::debug!("{}: not reused: {e}", place.dir.join(&old).display());
                reaper.remove(place.dir.clone(), old);
            }
        }
    }
    let f = place.dir.create_new(&place.name, 0o600)?;
    reserve(&f, 0, size)?;
    Ok(f)
}

/// Takes over the copy `old` that a transfer replaces, as the file of the new one at `name`
/// (`size` bytes), both in `dir`: its pages are written over instead of a new file's being
/// allocated, and the old ones freed. That is a fifth of the CPU of a 12 MB broadcast to 64
/// node managers on one host (`fallocate` and the unlink were 10 % of the profile,
/// and the copy into fresh pages is slower). Refused (`Err`, and the caller creates a new
/// file) unless nobody else can see what is written:
/// - the file is the node manager's and closed to everyone else first (owner the node
///   manager, mode 0600), so no one can open it from then on;
/// - no one holds it open or mapped from before: a write lease (`F_SETLEASE`) is granted only
///   to the one opener of a file, and opening it for writing fails while a job executes it;
/// - it has no other name (a hard link made before it was closed).
///
/// The bytes of the old copy beyond what the new one has written stay readable by nobody but
/// the node manager (until [`hand_over`], which comes only once all of it is written).
pub(super) fn recycle(
    dir: &Dir,
    old: &str,
    name: &str,
    size: u64,
) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let f = dir.open_file(old, true)?;
    // Whether this descriptor is the file's only opener: a write lease is granted only then
    // (it is dropped at once; only its grant is wanted).
    let alone = |f: &std::fs::File| {
        // SAFETY: fcntl on an open descriptor.
        if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(std::io::Error::new(e.kind(), format!("in use: {e}")));
        }
        // SAFETY: as above.
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        Ok(())
    };
    // A job still running from the copy is the common refusal: seen before anything changes.
    alone(&f)?;
    let was = f.metadata()?;
    if !was.is_file() || was.nlink() != 1 {
        return Err(std::io::Error::other(format!("{} links", was.nlink())));
    }
    let me = cosched_proto::util::euid();
    if me == 0 {
        std::os::unix::fs::fchown(&f, Some(0), None)?;
    }
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    // Opened between the first look and the closing: given back as it was (the reaper
    // removes its name; whoever holds it keeps what they opened).
    if let Err(e) = alone(&f) {
        if me == 0 {
            let _ = std::os::unix::fs::fchown(&f, Some(was.uid()), None);
        }
        let _ = f.set_permissions(was.permissions());
        return Err(e);
    }
    // A link made before the file was closed (after it, nobody but the owner can make one).
    let m = f.metadata()?;
    if m.nlink() != 1 {
        return Err(std::io::Error::other(format!("{} links", m.nlink())));
    }
    if m.len() > size {
        f.set_len(size)?;
    } else {
        reserve(&f, m.len(), size)?;
    }
    dir.rename(old, name)?;
    Ok(f)
}

/// Gives a checked copy to whoever may run it: a user's (their own names, or one of their
/// jobs') becomes theirs (when the node manager runs as root) and executable by them alone;
/// a published one stays the node manager's, readable and executable by everyone.
pub(super) fn hand_over(f: &std::fs::File, space: Space) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let uid = match space {
        Space::User(uid) | Space::Job { uid, .. } => uid,
        Space::Public => return f.set_permissions(std::fs::Permissions::from_mode(0o755)),
    };
    if cosched_proto::util::euid() == 0 {
        std::os::unix::fs::fchown(f, Some(uid), None)?;
    }
    f.set_permissions(std::fs::Permissions::from_mode(0o700))
}

/// Allocates bytes `from..size` of the file up front (on tmpfs, its pages): a node without
/// room for it fails when it opens the transfer, before any chunk is sent, not halfway; and
/// the writes then find their pages in place instead of allocating them one by one as each
/// chunk comes.
pub(super) fn reserve(f: &std::fs::File, from: u64, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if size <= from {
        return Ok(());
    }
    // SAFETY: fallocate on an open descriptor; no memory is passed.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            0,
            from as libc::off_t,
            (size - from) as libc::off_t,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // A file system without fallocate: the writes allocate as they go.
        Some(libc::EOPNOTSUPP) => Ok(()),
        _ => Err(std::io::Error::new(
            e.kind(),
            format!("reserving {size} bytes: {e}"),
        )),
    }
}
