//! The state directory of a cluster (`$COSCHED_STATE_DIR`, else `~/.cosched`): the one place
//! that knows its layout, so the daemons, the embedded cluster and the user commands cannot
//! disagree about a file name.
//!
//! | path | written by | for |
//! |------|------------|-----|
//! | `mm.addr` | the MM, once it listens | remote clients and `cluster up` find the MM |
//! | `mm.sock` | the MM | local clients: the kernel tells the MM who they are |
//! | `key` | `cluster up` (or `cosched mm` when missing) | frame authentication |
//! | `mm.pid`, `nm-NAME.pid` | `cluster up` and `cosched mm` | `cluster down` stops the daemons (pid and start time) |
//! | `mm.db` (+ `-wal`, `-shm`) | the MM | every job record and node: the history |
//! | `logs/mm.log`, `logs/nm-NAME.log` | `cluster up` (daemon output) | diagnosis |
//! | `nm-NAME/` | the NM of node NAME | job output, `jobs/ID/R.out`, `R.err` |
//!
//! `cluster down` removes what describes running daemons (the address and the pid files) and
//! keeps the history (database), logs and job output, so that the next `cluster up` in the
//! same directory continues where this one stopped.
//!
//! Trust: the daemons run as root on a real cluster, so the directory
//! must be theirs alone. [`StateDir::create`] makes it mode 0700 and [`StateDir::check`]
//! refuses one that is a symbolic link, is owned by another user or is writable by group or
//! others: whoever can write there could plant the key, a pid or a link. Files are written
//! as new private files (mode 0600, never through what stood there), and a pid is signalled
//! only if the process still has the start time recorded with it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::DaemonError;
use crate::util::{pid_alive, process_start};

/// The layout of one state directory. Only names paths and manages the files of running
/// daemons; the database itself is opened by the MM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

const ADDR: &str = "mm.addr";
const KEY: &str = "key";
const DB: &str = "mm.db";
const MM_PID: &str = "mm.pid";
const SOCK: &str = "mm.sock";
const LOGS: &str = "logs";
const NM_PREFIX: &str = "nm-";
const PID_SUFFIX: &str = ".pid";
/// Created and removed at once by [`StateDir::check_writable`].
const WRITE_PROBE: &str = ".write-probe";

impl StateDir {
    /// The state directory at `root` (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> StateDir {
        StateDir { root: root.into() }
    }

    /// The default state directory: `$COSCHED_STATE_DIR`, else `~/.cosched`, else
    /// `$TMPDIR/cosched` when there is no home.
    pub fn from_env() -> StateDir {
        StateDir::new(default_root(
            std::env::var_os("COSCHED_STATE_DIR"),
            std::env::var_os("HOME"),
        ))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The MM's listening address, one line `HOST:PORT`.
    pub fn addr_file(&self) -> PathBuf {
        self.root.join(ADDR)
    }

    /// The machine manager's Unix socket for local clients (their identity is the kernel's).
    pub fn sock_file(&self) -> PathBuf {
        self.root.join(SOCK)
    }

    /// The cluster key (64 hex digits).
    pub fn key_file(&self) -> PathBuf {
        self.root.join(KEY)
    }

    /// The web dashboard's token (0600), when the MM serves one (`--http`).
    pub fn http_token_file(&self) -> PathBuf {
        self.root.join("http-token")
    }

    /// The web dashboard's address, one line `HOST:PORT`, when the MM serves one.
    pub fn http_addr_file(&self) -> PathBuf {
        self.root.join("http.addr")
    }

    /// The dashboard's URL with its token, when this directory's MM serves one.
    pub fn http_url(&self) -> Option<String> {
        let addr = std::fs::read_to_string(self.http_addr_file()).ok()?;
        let token = std::fs::read_to_string(self.http_token_file()).ok()?;
        Some(format!("http://{}/?token={}", addr.trim(), token.trim()))
    }

    /// The MM's SQLite database; SQLite keeps `-wal` and `-shm` files beside it.
    pub fn db_file(&self) -> PathBuf {
        self.root.join(DB)
    }

    pub fn mm_pid_file(&self) -> PathBuf {
        self.root.join(MM_PID)
    }

    pub fn nm_pid_file(&self, node: &str) -> PathBuf {
        self.root.join(format!("{NM_PREFIX}{node}{PID_SUFFIX}"))
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join(LOGS)
    }

    pub fn mm_log(&self) -> PathBuf {
        self.logs_dir().join("mm.log")
    }

    pub fn nm_log(&self, node: &str) -> PathBuf {
        self.logs_dir().join(format!("{NM_PREFIX}{node}.log"))
    }

    /// Where the NM of `node` keeps job output.
    pub fn node_work_dir(&self, node: &str) -> PathBuf {
        self.root.join(format!("{NM_PREFIX}{node}"))
    }

    /// Creates the directory (mode 0700 when it is new) and its `logs/` (0700), after
    /// [`StateDir::check`]ing it and [`StateDir::check_writable`].
    pub fn create(&self) -> Result<(), DaemonError> {
        use std::os::unix::fs::DirBuilderExt;
        let io = |e: std::io::Error| self.error(format!("cannot create it: {e}"));
        if std::fs::symlink_metadata(&self.root).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.root)
                .map_err(io)?;
        }
        self.check()?;
        self.check_writable()?;
        let logs = self.logs_dir();
        if std::fs::symlink_metadata(&logs).is_err() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&logs)
                .map_err(io)?;
        }
        check_private_dir(&logs).map_err(|why| DaemonError::StateDir { dir: logs, why })
    }

    /// Refuses a state directory another user could have planted files in: a symbolic link,
    /// one owned by another user, or one writable by its group or others. The error names
    /// the directory and what to do.
    pub fn check(&self) -> Result<(), DaemonError> {
        check_private_dir(&self.root).map_err(|why| self.error(why))
    }

    /// Refuses a state directory on a read-only file system before a daemon starts on it:
    /// the error names it and what to do, where writing the key or a pid file would fail
    /// with the bare error of the system call. Asked by creating (and
    /// removing) a file there: a file system the kernel turned read-only after a disk error
    /// may still be mounted read-write as far as its flags say.
    pub fn check_writable(&self) -> Result<(), DaemonError> {
        use std::os::unix::fs::OpenOptionsExt;
        let probe = self.root.join(WRITE_PROBE);
        // One left by a daemon killed between the two steps.
        let _ = std::fs::remove_file(&probe);
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&probe);
        match made {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => Err(self.error(
                "is on a read-only file system: remount it read-write, or choose another directory (COSCHED_STATE_DIR, --state-dir)".into(),
            )),
            // A full disk, say: the writes that follow name their files.
            Err(_) => Ok(()),
        }
    }

    fn error(&self, why: String) -> DaemonError {
        DaemonError::StateDir {
            dir: self.root.clone(),
            why,
        }
    }

    /// Records a daemon's pid with its start time, as a new private file.
    pub fn write_pid(&self, path: &Path, pid: i32) -> std::io::Result<()> {
        let start = process_start(pid).ok_or_else(|| {
            std::io::Error::other(format!("process {pid} is gone: no start time to record"))
        })?;
        crate::util::write_atomic(path, &format!("{pid} {start}\n"))
    }

    /// The MM's address, or an error saying how to get one.
    pub fn addr(&self) -> Result<String, DaemonError> {
        std::fs::read_to_string(self.addr_file())
            .map(|a| a.trim().to_string())
            .map_err(|_| DaemonError::StateDir {
                dir: self.root.clone(),
                why: format!(
                    "no {ADDR} here: start a cluster with `cosched cluster up`, set COSCHED_STATE_DIR, or pass --mm ADDR"
                ),
            })
    }

    /// Removes the address and socket of a previous MM, so that a new one is not mistaken
    /// for it.
    pub fn forget_addr(&self) {
        let _ = std::fs::remove_file(self.addr_file());
        let _ = std::fs::remove_file(self.sock_file());
    }

    /// The pid of a machine manager that is alive according to `mm.pid` (the process with
    /// that pid has the start time recorded there).
    pub fn live_mm(&self) -> Option<i32> {
        read_pid(&self.mm_pid_file())
            .and_then(|r| r.verified().ok())
            .filter(|&p| pid_alive(p))
    }

    /// The pid files of the daemons (`mm.pid`, `nm-NAME.pid`) present now.
    pub fn pid_files(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.root)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let daemon = name == MM_PID || name.starts_with(NM_PREFIX);
            // A node's work directory is `nm-NAME`, also when NAME ends in ".pid".
            if daemon && name.ends_with(PID_SUFFIX) && entry.path().is_file() {
                out.push(entry.path());
            }
        }
        out.sort();
        Ok(out)
    }

    /// The cleanup of `cluster down`, first half: reads and removes every pid file, returning
    /// the pids that still name the process that wrote them (so the caller can wait for them
    /// and kill the stragglers) and, for the others, why they must not be signalled. The
    /// database, the key, the logs and the work directories stay: they are the history.
    pub fn take_pids(&self) -> std::io::Result<(Vec<i32>, Vec<String>)> {
        let (mut pids, mut refused) = (Vec::new(), Vec::new());
        for f in self.pid_files()? {
            match read_pid(&f).map(|r| r.verified()) {
                Some(Ok(p)) => pids.push(p),
                Some(Err(why)) => refused.push(format!("{}: {why}; not signalled", f.display())),
                None => {}
            }
            let _ = std::fs::remove_file(&f);
        }
        Ok((pids, refused))
    }
}

/// What a pid file says: the pid and, when it has one, the process's start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidRecord {
    pub pid: i32,
    pub start: Option<u64>,
}

impl PidRecord {
    /// The pid, if the process with it is the one that was recorded: a pid without a start
    /// time (an old or planted file) or whose process started at another time (gone, the
    /// pid reused) is refused with the reason.
    pub fn verified(&self) -> Result<i32, String> {
        let Some(start) = self.start else {
            return Err(format!(
                "pid {} is recorded without its start time (an old or planted file)",
                self.pid
            ));
        };
        match process_start(self.pid) {
            None => Err(format!("process {} is gone", self.pid)),
            Some(s) if s != start => Err(format!(
                "process {} started at tick {s}, not at {start} as recorded: it is another process",
                self.pid
            )),
            Some(_) => Ok(self.pid),
        }
    }
}

/// Why `dir` is not a directory only this user can change, if it is not (crate::dir's rule).
fn check_private_dir(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot read it: {e}"))?;
    crate::dir::private_problem(&m).map_or(Ok(()), Err)
}

/// What the file system of a directory says about writing there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsState {
    ReadOnly,
    /// No block or no inode left for this user.
    Full,
    Writable,
}

/// The state of the file system `dir` is on (statvfs), if it can be asked.
pub fn fs_state(dir: &Path) -> Option<FsState> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(
        if st.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
            FsState::ReadOnly
        } else if st.f_bavail == 0 || (st.f_files > 0 && st.f_favail == 0) {
            FsState::Full
        } else {
            FsState::Writable
        },
    )
}

/// `$COSCHED_STATE_DIR` (when set and not empty), else `$HOME/.cosched`, else the temporary
/// directory's `cosched`.
fn default_root(state_dir: Option<OsString>, home: Option<OsString>) -> PathBuf {
    if let Some(d) = state_dir.filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    match home {
        Some(h) => PathBuf::from(h).join(".cosched"),
        None => std::env::temp_dir().join("cosched"),
    }
}

/// The pid (and start time, when recorded) in a pid file; `None` when the file is missing or
/// holds no number.
pub fn read_pid(path: &Path) -> Option<PidRecord> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut words = text.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    let start = words.next().and_then(|w| w.parse().ok());
    Some(PidRecord { pid, start })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> StateDir {
        let d = std::env::temp_dir().join(format!(
            "cosched-statedir-{name}-{}-{}",
            std::process::id(),
            crate::util::now().as_micros()
        ));
        let _ = std::fs::remove_dir_all(&d);
        StateDir::new(d)
    }

    #[test]
    fn every_file_has_its_documented_name() {
        let s = StateDir::new("/s");
        assert_eq!(s.addr_file(), Path::new("/s/mm.addr"));
        assert_eq!(s.key_file(), Path::new("/s/key"));
        assert_eq!(s.db_file(), Path::new("/s/mm.db"));
        assert_eq!(s.mm_pid_file(), Path::new("/s/mm.pid"));
        assert_eq!(s.nm_pid_file("n3"), Path::new("/s/nm-n3.pid"));
        assert_eq!(s.logs_dir(), Path::new("/s/logs"));
        assert_eq!(s.mm_log(), Path::new("/s/logs/mm.log"));
        assert_eq!(s.nm_log("n3"), Path::new("/s/logs/nm-n3.log"));
        assert_eq!(s.node_work_dir("n3"), Path::new("/s/nm-n3"));
    }

    #[test]
    fn default_location_prefers_the_variable_then_home() {
        assert_eq!(
            default_root(Some("/x".into()), Some("/home/u".into())),
            Path::new("/x")
        );
        // An empty variable is as good as unset (`COSCHED_STATE_DIR= cosched …`).
        assert_eq!(
            default_root(Some("".into()), Some("/home/u".into())),
            Path::new("/home/u/.cosched")
        );
        assert_eq!(
            default_root(None, None),
            std::env::temp_dir().join("cosched")
        );
    }

    #[test]
    fn create_makes_the_directory_and_its_logs() {
        let s = scratch("create");
        s.create().unwrap();
        assert!(s.logs_dir().is_dir());
        s.create().unwrap(); // again: not an error
        std::fs::remove_dir_all(s.root()).unwrap();
    }

    #[test]
    fn addr_is_trimmed_and_its_absence_says_what_to_do() {
        let s = scratch("addr");
        s.create().unwrap();
        let err = s.addr().unwrap_err().to_string();
        assert!(err.contains("no mm.addr here"), "{err}");
        assert!(err.contains(&s.root().display().to_string()), "{err}");
        std::fs::write(s.addr_file(), "127.0.0.1:7070\n").unwrap();
        assert_eq!(s.addr().unwrap(), "127.0.0.1:7070");
        s.forget_addr();
        assert!(s.addr().is_err());
        std::fs::remove_dir_all(s.root()).unwrap();
    }

    #[test]
    fn down_takes_the_pid_files_and_keeps_the_history() {
        let s = scratch("down");
        s.create().unwrap();
        let me = std::process::id() as i32;
        s.write_pid(&s.mm_pid_file(), me).unwrap();
        std::fs::write(s.nm_pid_file("n0"), "102\n").unwrap();
        std::fs::write(s.nm_pid_file("n1"), "garbage\n").unwrap();
        std::fs::write(s.db_file(), "db").unwrap();
        std::fs::write(s.key_file(), "k").unwrap();
        std::fs::write(s.mm_log(), "log").unwrap();
        std::fs::write(s.root().join("other.pid"), "103\n").unwrap();
        // A node named "x.pid" has a work directory that looks like a pid file.
        std::fs::create_dir_all(s.node_work_dir("x.pid").join("jobs")).unwrap();
        std::fs::create_dir_all(s.node_work_dir("n0").join("jobs")).unwrap();

        assert_eq!(
            s.pid_files().unwrap(),
            vec![s.mm_pid_file(), s.nm_pid_file("n0"), s.nm_pid_file("n1")]
        );
        let (pids, refused) = s.take_pids().unwrap();
        // The unreadable one is removed, not returned; the one without a start time refused.
        assert_eq!(pids, vec![me]);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("pid 102") && refused[0].contains("not signalled"));
        assert!(s.pid_files().unwrap().is_empty());
        for kept in [
            s.db_file(),
            s.key_file(),
            s.mm_log(),
            s.root().join("other.pid"),
        ] {
            assert!(kept.is_file(), "{} was removed", kept.display());
        }
        assert!(s.node_work_dir("n0").join("jobs").is_dir());
        assert!(s.node_work_dir("x.pid").is_dir());
        std::fs::remove_dir_all(s.root()).unwrap();
    }

    #[test]
    fn a_dead_machine_manager_is_not_live() {
        let s = scratch("live");
        s.create().unwrap();
        assert_eq!(s.live_mm(), None);
        let me = std::process::id() as i32;
        s.write_pid(&s.mm_pid_file(), me).unwrap();
        assert_eq!(s.live_mm(), Some(me));
        // The pid alone, or with another start time, is not this process.
        std::fs::write(s.mm_pid_file(), format!("{me}\n")).unwrap();
        assert_eq!(s.live_mm(), None);
        std::fs::write(s.mm_pid_file(), format!("{me} 1\n")).unwrap();
        assert_eq!(s.live_mm(), None);
        // Pid max on Linux is at most 2^22, so this pid cannot exist.
        std::fs::write(s.mm_pid_file(), "2000000000 5\n").unwrap();
        assert_eq!(s.live_mm(), None);
        std::fs::remove_dir_all(s.root()).unwrap();
    }

    /// a new state directory is private; one that is a link, or writable
    /// by others, is refused with its path in the message.
    #[test]
    fn the_directory_is_created_private_and_an_unsafe_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let s = scratch("private");
        s.create().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(s.root()), 0o700);
        assert_eq!(mode(&s.logs_dir()), 0o700);
        std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = s.create().unwrap_err().to_string();
        assert!(err.contains(&s.root().display().to_string()), "{err}");
        assert!(err.contains("writable by its group or others"), "{err}");
        std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        s.check().unwrap();
        let link = StateDir::new(s.root().with_extension("link"));
        std::os::unix::fs::symlink(s.root(), link.root()).unwrap();
        let err = link.create().unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_file(link.root()).unwrap();
        std::fs::remove_dir_all(s.root()).unwrap();
    }
}
