//! Directories a daemon running as root works in, held open (docs/daemons.md, "Files a root
//! daemon touches").
//!
//! Every file a daemon creates, opens, renames or removes in a directory a user can write is
//! reached relative to a handle of that directory: `openat` with `O_NOFOLLOW`, new files with
//! `O_EXCL`, `fchown` and `fchmod` on the descriptor, `renameat`, `unlinkat`. A path is never
//! looked up twice, so a link a user plants between two system calls is never followed.
//!
//! A directory the daemon keeps for itself (a node manager's work directory, its scratch
//! directory) is checked before anything goes in it: its own, not writable by its group or
//! others, not a link, and reached only through directories that root or the daemon's user
//! alone can change (a directory others may write must be sticky, as `/tmp` and `/dev/shm`
//! are). One that fails is refused with its path and what to do, never used.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

/// A directory the daemon keeps for itself that it must not use, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}", path.display())]
pub struct DirError {
    pub path: PathBuf,
    pub why: String,
}

fn refuse(path: &Path, why: impl Into<String>) -> DirError {
    DirError {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// An open directory and the path it was reached by (for messages, and for what must be
/// named by path: a program a rank executes, a rank's working directory).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// How a subdirectory is opened: a directory, never through a link.
const SUBDIR: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

/// How many times [`Dir::replace`] removes what stands at a name before giving up.
const REPLACE_TRIES: usize = 3;

impl Dir {
    /// Creates `path` if it is missing (and the directories leading to it, mode 0711) and
    /// opens it as a directory of this process's user that nobody else can change (see the
    /// module documentation); then sets its mode to `mode`. Anything else is refused.
    pub fn private(path: &Path, mode: u32) -> Result<Dir, DirError> {
        let abs = std::path::absolute(path)
            .map_err(|e| refuse(path, format!("cannot make it absolute: {e}")))?;
        match (abs.parent(), abs.file_name()) {
            (Some(parent), Some(name)) => trusted(parent)?.private_child(name, mode),
            _ => Err(refuse(
                path,
                "is not a directory a daemon may keep for itself",
            )),
        }
    }

    /// The subdirectory `name`, created if missing, checked as [`Dir::private`] checks, and
    /// set to `mode`.
    pub fn private_child(&self, name: impl AsRef<Path>, mode: u32) -> Result<Dir, DirError> {
        let name = name.as_ref();
        let path = self.path.join(name);
        let fd = self
            .mkdir_open(name, mode)
            .map_err(|e| refuse(&path, open_problem(&path, &e)))?;
        let m = File::from(fd.try_clone().map_err(|e| refuse(&path, e.to_string()))?)
            .metadata()
            .map_err(|e| refuse(&path, format!("cannot look at it: {e}")))?;
        if let Some(why) = private_problem(&m) {
            return Err(refuse(&path, why));
        }
        let dir = Dir { fd, path };
        dir.set_mode(mode)
            .map_err(|e| refuse(&dir.path, format!("cannot set its mode: {e}")))?;
        Ok(dir)
    }

    /// The subdirectory `name` made for someone: created if missing (mode `mode`), opened
    /// without following a link, then given to `owner` (uid, gid) and set to `mode` through
    /// its descriptor.
    pub fn child_for(
        &self,
        name: impl AsRef<Path>,
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> io::Result<Dir> {
        let name = name.as_ref();
        let fd = self.mkdir_open(name, mode)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::fchown(&fd, Some(uid), Some(gid))?;
        }
        let dir = Dir {
            fd,
            path: self.path.join(name),
        };
        dir.set_mode(mode)?;
        Ok(dir)
    }

    /// The existing subdirectory `name`, opened without following a link.
    pub fn child(&self, name: impl AsRef<Path>) -> io::Result<Dir> {
        let name = name.as_ref();
        let fd = rustix::fs::openat(&self.fd, name, SUBDIR, Mode::empty())?;
        Ok(Dir {
            fd,
            path: self.path.join(name),
        })
    }

    /// Opens the directory at `path` as a user would, following links: for a daemon that is
    /// not root, acting in its own user's directories.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = rustix::fs::openat(
            rustix::fs::CWD,
            path,
            OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
            Mode::empty(),
        )?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path the directory was reached by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in it.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// A second handle of the same directory.
    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// A new file `name` of mode `mode`, open for reading and writing: made only where
    /// nothing stands at the name (`O_EXCL`), so never through a link or over a file someone
    /// put there.
    pub fn create_new(&self, name: impl AsRef<Path>, mode: u32) -> io::Result<File> {
        let fd = rustix::fs::openat(
            &self.fd,
            name.as_ref(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        Ok(File::from(fd))
    }

    /// [`Dir::create_new`] in place of whatever stands at `name` (a stale file, or a link a
    /// user planted, is removed: never followed, never truncated). Someone who can write the
    /// directory may plant something again between the removal and the creation; after
    /// [`REPLACE_TRIES`] rounds of that it fails.
    pub fn replace(&self, name: impl AsRef<Path>, mode: u32) -> io::Result<File> {
        let name = name.as_ref();
        for _ in 0..REPLACE_TRIES {
            match self.create_new(name, mode) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let _ = self.remove_file(name);
                }
                r => return r,
            }
        }
        self.create_new(name, mode)
    }

    /// Opens the existing file `name` (for writing too, when `write`), never through a link.
    pub fn open_file(&self, name: impl AsRef<Path>, write: bool) -> io::Result<File> {
        let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
        let fd = rustix::fs::openat(
            &self.fd,
            name.as_ref(),
            access | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(File::from(fd))
    }

    /// Renames `from` to `to`, both in this directory (what stands at `to` is replaced, not
    /// followed).
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
        rustix::fs::renameat(&self.fd, from.as_ref(), &self.fd, to.as_ref())?;
        Ok(())
    }

    /// Removes the file (or link) `name`.
    pub fn remove_file(&self, name: impl AsRef<Path>) -> io::Result<()> {
        rustix::fs::unlinkat(&self.fd, name.as_ref(), AtFlags::empty())?;
        Ok(())
    }

    /// Sets the directory's modification time to now.
    pub fn mark_modified(&self) -> io::Result<()> {
        File::from(self.fd.try_clone()?).set_modified(std::time::SystemTime::now())
    }

    fn set_mode(&self, mode: u32) -> io::Result<()> {
        File::from(self.fd.try_clone()?).set_permissions(std::fs::Permissions::from_mode(mode))
    }

    /// Makes the subdirectory `name` if it is missing and opens it (without following a link).
    fn mkdir_open(&self, name: &Path, mode: u32) -> io::Result<OwnedFd> {
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(rustix::fs::openat(&self.fd, name, SUBDIR, Mode::empty())?)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Why a directory whose metadata is `m` (taken without following a link) is not one that
/// only this process's user can change, if it is not: a link, not a directory, another
/// user's, or writable by its group or others. The one rule for every directory a daemon
/// keeps for itself (its state directory, a node manager's work and scratch directories).
pub fn private_problem(m: &std::fs::Metadata) -> Option<String> {
    if m.file_type().is_symlink() {
        return Some(
            "is a symbolic link: whoever owns the link chooses where it leads; give the real directory"
                .into(),
        );
    }
    if !m.is_dir() {
        return Some("is not a directory; remove it or choose another path".into());
    }
    let me = crate::util::euid();
    if m.uid() != me {
        return Some(format!(
            "is owned by {} (uid {}), not by this user ({}, uid {me}): someone else made it and could have put anything in it; use a directory of your own (or remove this one, after looking at what it holds)",
            crate::util::user_name(m.uid()),
            m.uid(),
            crate::util::user_name(me)
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Some(format!(
            "is writable by its group or others (mode {:o}): they could have planted files or links in it; look at what it holds, then `chmod go-w` it",
            m.mode() & 0o7777
        ));
    }
    None
}

/// What an error opening the directory at `path` (without following a link) means, and what
/// to do. (Looking at the path again only words the message; nothing is decided by it.)
fn open_problem(path: &Path, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR) => std::fs::symlink_metadata(path)
            .ok()
            .and_then(|m| private_problem(&m))
            .unwrap_or_else(|| format!("cannot open it: {e}")),
        _ => format!("cannot create or open it: {e}"),
    }
}

/// Opens `dir`, creating what is missing of it (mode 0711), once every directory from the
/// root to it is checked to be changeable by nobody but root and this process's user: owned
/// by one of them, and not writable by its group or others unless sticky (then others may
/// add entries but not rename or remove those of root's or ours). Links on the way are
/// resolved first, so the directories checked are the ones the path leads to.
fn trusted(dir: &Path) -> Result<Dir, DirError> {
    let mut existing = dir.to_path_buf();
    let mut missing = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match existing.file_name() {
            Some(n) => missing.push(n.to_os_string()),
            None => break,
        }
        existing.pop();
    }
    let real = std::fs::canonicalize(&existing)
        .map_err(|e| refuse(&existing, format!("cannot resolve it: {e}")))?;
    let root = Path::new("/");
    let open = |at: BorrowedFd<'_>, name: &OsStr, path: &Path| {
        rustix::fs::openat(
            at,
            name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refuse(path, open_problem(path, &e.into())))
    };
    let mut fd = open(rustix::fs::CWD, root.as_os_str(), root)?;
    check_trusted(&fd, root)?;
    let mut path = PathBuf::from(root);
    let found = real.components().filter_map(|c| match c {
        Component::Normal(n) => Some((n.to_os_string(), false)),
        _ => None,
    });
    for (name, create) in found.chain(missing.into_iter().rev().map(|n| (n, true))) {
        path.push(&name);
        if create {
            match rustix::fs::mkdirat(&fd, name.as_os_str(), Mode::from_raw_mode(0o711)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(refuse(&path, format!("cannot create it: {e}"))),
            }
        }
        fd = open(fd.as_fd(), &name, &path)?;
        check_trusted(&fd, &path)?;
    }
    Ok(Dir { fd, path })
}

/// Why nobody but root and this process's user can change what lies below `fd`, if they can.
fn check_trusted(fd: &OwnedFd, path: &Path) -> Result<(), DirError> {
    let st = rustix::fs::fstat(fd).map_err(|e| refuse(path, format!("cannot look at it: {e}")))?;
    let me = crate::util::euid();
    if st.st_uid != 0 && st.st_uid != me {
        return Err(refuse(
            path,
            format!(
                "is owned by {} (uid {}): only directories of root's or of this daemon's user ({}) may lead to the daemon's own; choose a directory elsewhere",
                crate::util::user_name(st.st_uid),
                st.st_uid,
                crate::util::user_name(me)
            ),
        ));
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(refuse(
            path,
            format!(
                "is writable by its group or others and not sticky (mode {mode:o}): whoever can write there could replace what lies below it; choose a directory only root and this daemon's user can change"
            ),
        ));
    }
    Ok(())
}

/// Opens the file at `path` (a rank's output, where the job said) for a daemon acting on a
/// user's file: only a regular file, reached without following a last link, and, when
/// `owner` is given, only one of that uid. The path is first opened with `O_PATH`, which
/// opens nothing (a device or FIFO a user pointed it at is never opened), looked at, then
/// opened for real through that handle (`/proc/self/fd/N`): the same file, whatever the path
/// leads to by then. `append`: for writing at its end, else for reading.
pub fn open_regular(path: &Path, owner: Option<u32>, append: bool) -> io::Result<File> {
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    let regular = rustix::fs::FileType::from_raw_mode(st.st_mode).is_file();
    if !regular || owner.is_some_and(|u| u != st.st_uid) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: not a regular file{}",
                path.display(),
                owner.map(|u| format!(" of uid {u}")).unwrap_or_default()
            ),
        ));
    }
    std::fs::OpenOptions::new()
        .read(!append)
        .append(append)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(what: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("cosched-dir-{what}-"))
            .tempdir()
            .unwrap()
    }

    /// A private directory is made with its missing parents, set to its mode, and given back
    /// by its real path; one writable by others, or a link, is refused naming it.
    #[test]
    fn a_private_directory_is_made_checked_and_refused_when_unsafe() {
        let tmp = scratch("private");
        let want = tmp.path().join("a/b/c");
        let d = Dir::private(&want, 0o711).unwrap();
        assert_eq!(d.path(), std::fs::canonicalize(&want).unwrap());
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&want), 0o711);
        assert_eq!(mode(&tmp.path().join("a")), 0o711);

        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Dir::private(&open, 0o711).unwrap_err().to_string();
        assert!(
            e.contains(&open.display().to_string()) && e.contains("writable by its group"),
            "{e}"
        );
        // Below a directory others may write that is not sticky: refused on the way.
        let e = Dir::private(&open.join("x"), 0o711)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not sticky"), "{e}");
        assert!(!open.join("x").exists(), "nothing is made there");
        // Sticky (as /tmp): fine on the way.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Dir::private(&open.join("x"), 0o700).unwrap();

        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&want, &link).unwrap();
        let e = Dir::private(&link, 0o711).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    /// New files are never made through what stands at their name: `create_new` refuses, and
    /// `replace` removes a planted link (its target untouched) and makes a fresh file.
    #[test]
    fn a_new_file_never_goes_through_a_planted_link() {
        let tmp = scratch("replace");
        let d = Dir::private(&tmp.path().join("d"), 0o711).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("f")).unwrap();
        let missing = tmp.path().join("missing");
        std::os::unix::fs::symlink(&missing, d.join("g")).unwrap();
        assert_eq!(
            d.create_new("f", 0o600).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(
            d.create_new("g", 0o600).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        for name in ["f", "g"] {
            let f = d.replace(name, 0o600).unwrap();
            assert!(f.metadata().unwrap().is_file());
            let m = std::fs::symlink_metadata(d.join(name)).unwrap();
            assert!(m.is_file(), "{name}: the link was replaced by a file");
            assert_eq!(m.mode() & 0o777, 0o600);
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!missing.exists(), "the link's missing target was created");
        assert!(d.open_file("f", false).is_ok());
        std::os::unix::fs::symlink(&victim, d.join("h")).unwrap();
        assert!(d.open_file("h", true).is_err(), "opened through a link");
    }

    /// `open_regular` opens a regular file only: not a link's target, not a FIFO (which would
    /// block an open for writing until someone reads).
    #[test]
    fn only_a_regular_file_is_opened_for_a_user() {
        let tmp = scratch("regular");
        let file = tmp.path().join("out");
        std::fs::write(&file, "x").unwrap();
        let me = crate::util::euid();
        assert!(open_regular(&file, Some(me), true).is_ok());
        let e = open_regular(&file, Some(me + 1), true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_regular(&link, None, false).is_err());
        let fifo = tmp.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let e = open_regular(&fifo, None, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    }
}
