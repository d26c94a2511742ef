//! Containment of a job's processes on one node: a cgroup v2 per job when the node manager
//! can make one, its ranks' process groups otherwise.
//!
//! A process group does not hold what leaves it (`setsid`, a daemonising program), so such a
//! process would escape suspend, cancel and the end of its job, and outlive a killed node manager.
//! A cgroup holds every descendant whatever it does with sessions:
//! `cgroup.freeze` stops all of them (suspend, a gang switch), `cgroup.kill` kills all of them,
//! and `cgroup.events` says when the last one is gone. Neither needs a controller enabled, so
//! a leaf under the node manager's own cgroup is enough and the "no internal processes" rule
//! of cgroup v2 never applies.
//!
//! Layout: `<cgroup2 mount>/<the NM's own cgroup>/cosched-<node>-<hash of its work
//! directory>/job-<id>-<instance>-<launch>`. The hash keeps apart the node managers of
//! several clusters on one host (tests run many); the launch number keeps apart two launches
//! of the same job by one node manager (a requeued job placed on the same node while the first
//! launch is in its kill wait), so the delayed `cgroup.kill` of one never hits the other; the
//! instance (the node manager's incarnation, in hex) keeps apart the launches of successive
//! node managers on one work directory, whose launch numbers each start at 1: otherwise a
//! requeued job relaunched by a restarted node manager would get the very directory the new
//! process is still removing, and its ranks could not join it (ENODEV). A job cgroup is always
//! a new directory: one that exists already is refused, never shared. A node manager that
//! starts finds
//! the job cgroups a previous incarnation left (it was killed: its ranks died with it through
//! `PR_SET_PDEATHSIG`, their children did not) and kills them: a new incarnation holds no job,
//! and the machine manager fails or requeues every job the old one held.
//!
//! Memory (`--mem`): the job cgroup's `memory.max` (and `memory.swap.max` 0, so the limit is
//! not dodged into swap) when the node manager's cgroup gives its children the v2 memory
//! controller; on a hybrid host whose memory controller is mounted as cgroup v1, a directory
//! of the same name under the node manager's v1 memory cgroup, with `memory.limit_in_bytes`
//! and `memory.memsw.limit_in_bytes`, which the ranks join as well. Either counts the
//! kernel's OOM kills of the job (`oom_kill` of `memory.events` or `memory.oom_control`), so
//! a job killed for its memory is told from one that failed. Another job on the node is
//! never touched: the kernel's OOM killer acts within the cgroup over its limit.
//!
//! CPU weight (a gang switch's idle handover, [`crate::program`]): the job cgroup's
//! `cpu.idle` when the node manager's cgroup gives its children the v2 cpu controller; on a
//! hybrid host whose cpu controller is mounted as cgroup v1, a directory of the same name
//! under the node manager's v1 cpu cgroup, which the ranks join as well. A job whose
//! `cpu.idle` is 1 runs like `SCHED_IDLE`: it gets a core only when nothing at normal weight
//! wants one. Neither (or no `cpu.idle`: kernel older than 5.15): no job has one, and a
//! switch waits for its outgoing freezes before it thaws.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cosched_core::JobId;

/// The file in a node manager's work directory that names its cgroup directory.
pub const CGROUP_FILE: &str = "cgroup";

/// How a node manager contains its jobs.
#[derive(Debug)]
pub enum Containment {
    /// A cgroup v2 per job.
    Cgroups(Cgroups),
    /// Process groups only (no usable cgroup v2; the reason is kept for the log).
    Groups(String),
}

impl Containment {
    /// The cgroup of launch `launch` of `job`, with its `cgroup.procs` open for the ranks to
    /// join between fork and exec; `None` with process groups, or when the cgroup cannot be
    /// made (logged by the caller with the reason, the job then goes by process groups).
    /// With `memory` (bytes), the cgroup's memory is limited to it; the second value says
    /// why it could not be (the job then runs without the limit, said in the log).
    #[allow(clippy::type_complexity)]
    pub fn for_launch(
        &self,
        job: JobId,
        launch: u64,
        memory: Option<u64>,
    ) -> Result<Option<(JobCgroup, Vec<OwnedFd>, Result<(), String>)>, std::io::Error> {
        let Containment::Cgroups(cg) = self else {
            return Ok(None);
        };
        let mut c = cg.create(job, launch)?;
        let limited = match memory {
            Some(bytes) => cg.limit_memory(&mut c, bytes),
            None => Ok(()),
        };
        match c.procs_fds() {
            Ok(fds) => Ok(Some((c, fds, limited))),
            Err(e) => {
                c.remove_when_empty(Duration::ZERO);
                Err(e)
            }
        }
    }

    /// Cgroups when this process can make them (`COSCHED_NO_CGROUPS=1` forces the fallback,
    /// for tests of it), else process groups.
    /// `instance` tells this node manager's job cgroups from an earlier one's (its
    /// incarnation).
    /// `weigh`: give each job a cpu cgroup for the idle handover (under `gs` only: the other
    /// schemes stop ranks one by one or run jobs side by side, and a cgroup per job there
    /// would share the cores by job instead of by process, against their ranks' nice values).
    pub fn detect(node: &str, workdir: &Path, instance: u64, weigh: bool) -> Containment {
        if std::env::var_os("COSCHED_NO_CGROUPS").is_some_and(|v| v == "1") {
            return Containment::Groups("COSCHED_NO_CGROUPS=1".into());
        }
        match Cgroups::detect(node, workdir, instance, weigh) {
            Ok(c) => Containment::Cgroups(c),
            Err(why) => Containment::Groups(why),
        }
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        match self {
            Containment::Cgroups(c) => format!(
                "containment: cgroup v2 per job under {} (freeze, kill); memory limits: {}; cpu weight: {}",
                c.base.display(),
                match &c.memory {
                    Memory::V2 => "cgroup v2 memory.max".to_string(),
                    Memory::V1 { base } => format!("cgroup v1 under {}", base.display()),
                    Memory::None(why) => format!("none ({why})"),
                },
                match &c.cpu {
                    Cpu::V2 => "cgroup v2 cpu.idle: gang switches hand over at once".to_string(),
                    Cpu::V1 { base } => format!(
                        "cgroup v1 cpu.idle under {}: gang switches hand over at once",
                        base.display()
                    ),
                    Cpu::None(why) => {
                        format!("none ({why}): gang switches wait for their freezes")
                    }
                }
            ),
            Containment::Groups(why) => {
                format!("containment: process groups only (no cgroup v2: {why})")
            }
        }
    }
}

/// The node manager's cgroup subtree.
#[derive(Debug)]
pub struct Cgroups {
    base: PathBuf,
    /// In every job cgroup's name: this node manager's, not an earlier one's on the same
    /// work directory (see the module documentation).
    instance: u64,
    memory: Memory,
    cpu: Cpu,
}

/// Where a job's `cpu.idle` is (see the module documentation).
#[derive(Clone, Debug)]
enum Cpu {
    /// The v2 cpu controller is enabled for the job cgroups.
    V2,
    /// A cgroup v1 cpu hierarchy: the job's directory of the same name under `base`.
    V1 { base: PathBuf },
    /// Neither: why (switches keep the freeze-then-thaw order).
    None(String),
}

/// Where a job's memory limit is written (see the module documentation).
#[derive(Clone, Debug)]
enum Memory {
    /// The v2 memory controller is enabled for the job cgroups.
    V2,
    /// A cgroup v1 memory hierarchy: the job's directory of the same name under `base`.
    V1 { base: PathBuf },
    /// Neither: why (memory limits are not enforced).
    None(String),
}

/// One launch of a job on this node: its cgroup directory.
#[derive(Clone, Debug)]
pub struct JobCgroup {
    pub dir: PathBuf,
    /// Its memory cgroup when that is apart (cgroup v1), or the v2 cgroup itself when the
    /// memory controller is on there: where its limit and OOM kills are.
    mem: Option<MemDir>,
    /// The directory of its `cpu.idle` (the v2 cgroup itself, or its v1 cpu cgroup).
    cpu: Option<PathBuf>,
}

#[derive(Clone, Debug)]
enum MemDir {
    V2,
    V1(PathBuf),
}

impl Cgroups {
    fn detect(node: &str, workdir: &Path, instance: u64, weigh: bool) -> Result<Cgroups, String> {
        let (mount, root) = cgroup2_mount().ok_or("no cgroup2 file system mounted")?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or("this process is in no cgroup v2 (no `0::` line in /proc/self/cgroup)")?;
        // The mount may show a subtree only (a container's namespace): paths are relative to it.
        let rel = own.strip_prefix(root.trim_end_matches('/')).unwrap_or(own);
        let mine = mount.join(rel.trim_start_matches('/'));
        let key = workdir
            .canonicalize()
            .unwrap_or_else(|_| workdir.to_path_buf());
        let base = mine.join(format!(
            "cosched-{}-{:016x}",
            sanitize(node),
            fnv1a(key.as_os_str().as_encoded_bytes())
        ));
        match std::fs::create_dir(&base) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", base.display())),
        }
        // The root cgroup has neither freeze nor kill; a child has them when the kernel does
        // (the freezer since 5.2, cgroup.kill since 5.14).
        for f in [
            "cgroup.freeze",
            "cgroup.kill",
            "cgroup.procs",
            "cgroup.events",
        ] {
            if !base.join(f).exists() {
                return Err(format!(
                    "{} has no {f} (kernel too old for the freezer or cgroup.kill)",
                    base.display()
                ));
            }
        }
        // Written down for operators and for tests that clean up after killed node managers.
        let _ = std::fs::write(workdir.join(CGROUP_FILE), format!("{}\n", base.display()));
        let leaf = base.file_name().expect("named above").to_owned();
        let memory = memory_controller(&base, &leaf);
        let cpu = if weigh {
            cpu_controller(&base, &leaf)
        } else {
            Cpu::None("the node scheme has no gang rotation".into())
        };
        Ok(Cgroups {
            base,
            instance,
            memory,
            cpu,
        })
    }

    /// Limits `c`'s memory to `bytes` (without swap where the host counts it).
    fn limit_memory(&self, c: &mut JobCgroup, bytes: u64) -> Result<(), String> {
        let said = |f: &Path, e: std::io::Error| format!("{}: {e}", f.display());
        match &self.memory {
            Memory::None(why) => Err(why.clone()),
            Memory::V2 => {
                let f = c.dir.join("memory.max");
                write_file(&f, &bytes.to_string()).map_err(|e| said(&f, e))?;
                // Absent when the kernel keeps no swap accounting: then there is no swap
                // to dodge the limit into either.
                let _ = write_file(&c.dir.join("memory.swap.max"), "0");
                c.mem = Some(MemDir::V2);
                Ok(())
            }
            Memory::V1 { base } => {
                let dir = base.join(c.dir.file_name().expect("a job cgroup has a name"));
                std::fs::create_dir(&dir).map_err(|e| said(&dir, e))?;
                c.mem = Some(MemDir::V1(dir.clone()));
                let f = dir.join("memory.limit_in_bytes");
                write_file(&f, &bytes.to_string()).map_err(|e| said(&f, e))?;
                // Memory plus swap, after the memory limit (the kernel wants it no lower);
                // absent without swap accounting.
                let _ = write_file(&dir.join("memory.memsw.limit_in_bytes"), &bytes.to_string());
                Ok(())
            }
        }
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Creates the cgroup of launch `launch` of `job`: a new directory. One that exists
    /// already belongs to another launch (perhaps being removed, when its processes would
    /// fail to join it) and is refused with its path.
    pub fn create(&self, job: JobId, launch: u64) -> std::io::Result<JobCgroup> {
        let name = job_cgroup_name(job, self.instance, launch);
        let dir = self.base.join(&name);
        std::fs::create_dir(&dir).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        // Without a cpu cgroup the job's switches wait for their freezes (see the module
        // documentation): a failure here costs speed, not the job.
        let cpu = match &self.cpu {
            Cpu::None(_) => None,
            Cpu::V2 => Some(dir.clone()).filter(|d| d.join("cpu.idle").exists()),
            Cpu::V1 { base } => {
                let d = base.join(&name);
                match std::fs::create_dir(&d) {
                    Ok(()) if d.join("cpu.idle").exists() => Some(d),
                    Ok(()) => {
                        let _ = std::fs::remove_dir(&d);
                        None
                    }
                    Err(_) => None,
                }
            }
        };
        Ok(JobCgroup {
            dir,
            mem: None,
            cpu,
        })
    }

    /// The job cgroups under the node manager's directory, with their v1 memory
    /// directories.
    fn job_cgroups(&self) -> Vec<JobCgroup> {
        let Ok(rd) = std::fs::read_dir(&self.base) else {
            return Vec::new();
        };
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("job-") && e.path().is_dir())
            .map(|e| JobCgroup {
                dir: e.path(),
                mem: match &self.memory {
                    Memory::V1 { base } => Some(MemDir::V1(base.join(e.file_name()))),
                    _ => None,
                },
                cpu: match &self.cpu {
                    Cpu::V1 { base } => Some(base.join(e.file_name())),
                    _ => None,
                },
            })
            .collect()
    }

    /// Kills what is left in every job cgroup and removes them and the node manager's own
    /// directory (waiting at most `within` for the kills): the end of a node manager that
    /// shuts down. What cannot be removed yet is reaped by the next one on this work directory.
    pub fn clear(&self, within: Duration) {
        let deadline = std::time::Instant::now() + within;
        for cg in self.job_cgroups() {
            cg.freeze(false);
            cg.kill();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            cg.remove_when_empty(left);
        }
        let _ = std::fs::remove_dir(&self.base);
        if let Memory::V1 { base } = &self.memory {
            let _ = std::fs::remove_dir(base);
        }
        if let Cpu::V1 { base } = &self.cpu {
            let _ = std::fs::remove_dir(base);
        }
    }

    /// Job cgroups left by an earlier node manager on this work directory: every one is
    /// killed and removed (see the module documentation). Returns how many there were.
    pub fn reap_orphans(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for cg in self.job_cgroups() {
            cg.kill();
            found.push(cg.dir.clone());
            std::thread::spawn(move || cg.remove_when_empty(Duration::from_secs(10)));
        }
        found
    }
}

impl JobCgroup {
    /// The `cgroup.procs` files a rank joins (the job cgroup's, and its v1 memory and cpu
    /// cgroups'), opened for writing, for a child to move itself in between fork and exec
    /// (see [`join_self`]).
    pub fn procs_fds(&self) -> std::io::Result<Vec<OwnedFd>> {
        let open = |d: &Path| -> std::io::Result<OwnedFd> {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))?;
            Ok(f.into())
        };
        let mut fds = vec![open(&self.dir)?];
        if let Some(MemDir::V1(d)) = &self.mem {
            fds.push(open(d)?);
        }
        if let Some(d) = self.cpu.as_ref().filter(|d| **d != self.dir) {
            fds.push(open(d)?);
        }
        Ok(fds)
    }

    /// How many of its processes the kernel killed for going over its memory limit.
    pub fn oom_kills(&self) -> u64 {
        let (file, dir) = match &self.mem {
            None => return 0,
            Some(MemDir::V2) => ("memory.events", &self.dir),
            Some(MemDir::V1(d)) => ("memory.oom_control", d),
        };
        std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|s| field(&s, "oom_kill"))
            .unwrap_or(0)
    }

    /// Stops (`true`) or thaws every process of the job. A freeze is asynchronous: the kernel
    /// stops each process when it next runs, and says so in `cgroup.events` once all are
    /// ([`JobCgroup::stopped`], [`JobCgroup::events`] to watch it); this does not wait.
    pub fn freeze(&self, on: bool) {
        let _ = write_file(&self.dir.join("cgroup.freeze"), if on { "1" } else { "0" });
    }

    /// Whether nothing of the job can run: every process frozen, or none left (also when the
    /// cgroup is gone or unreadable, as nothing will report otherwise).
    pub fn stopped(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events")).map_or(true, |s| stopped_in(&s))
    }

    /// The job's `cgroup.events` held open, to look at [`Events::stopped`] again and again
    /// without a path walk and an open each time (a freeze is watched every few
    /// microseconds); `None` when it cannot be opened (the cgroup is gone).
    pub fn events(&self) -> Option<Events> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.dir.join("cgroup.events"))
            .ok()
            .map(Events)
    }

    /// The job's `cgroup.freeze` held open for writing, so that a timed switch writes it
    /// without a path walk and an open (`None` when it cannot be opened: the cgroup is gone).
    pub fn freezer(&self) -> Option<Freezer> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.dir.join("cgroup.freeze"))
            .ok()
            .map(Freezer)
    }

    /// The job's `cpu.idle` held open for writing (`None`: the job has no cpu cgroup, or it
    /// is gone), for a switch's idle handover ([`crate::program`]).
    pub fn idler(&self) -> Option<Idler> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.cpu.as_ref()?.join("cpu.idle"))
            .ok()
            .map(Idler)
    }

    /// Whether the job runs at idle weight (`cpu.idle` reads 1; false without one).
    pub fn idle(&self) -> bool {
        self.cpu.as_ref().is_some_and(|d| {
            std::fs::read_to_string(d.join("cpu.idle")).is_ok_and(|s| s.trim() == "1")
        })
    }

    /// Whether a freeze is asked for (`cgroup.freeze` reads 1): a watch of a freeze ends once
    /// the job is thawed again.
    pub fn freezing(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.freeze")).is_ok_and(|s| s.trim() == "1")
    }

    /// The processes in the job's cgroup now.
    pub fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Sends `sig` to every process of the job.
    pub fn signal(&self, sig: i32) {
        for pid in self.members() {
            // SAFETY: kill with a pid read from the cgroup; at worst ESRCH.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// SIGKILL to every process of the job, as one operation of the kernel (a process that
    /// forks meanwhile cannot escape it).
    pub fn kill(&self) {
        let _ = write_file(&self.dir.join("cgroup.kill"), "1");
    }

    /// Whether any process is still in the cgroup (true when it cannot be read but exists).
    pub fn populated(&self) -> bool {
        match self.event("populated") {
            Some(v) => v != 0,
            None => self.dir.exists(),
        }
    }

    fn event(&self, name: &str) -> Option<u64> {
        let s = std::fs::read_to_string(self.dir.join("cgroup.events")).ok()?;
        field(&s, name)
    }

    /// Removes the cgroup (and its v1 memory cgroup) once its last process is gone (polls
    /// for at most `within`).
    pub fn remove_when_empty(&self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                if let Some(MemDir::V1(d)) = &self.mem {
                    // Its processes are gone from the other hierarchy too: they have exited.
                    let _ = std::fs::remove_dir(d);
                }
                if let Some(d) = self.cpu.as_ref().filter(|d| **d != self.dir) {
                    let _ = std::fs::remove_dir(d);
                }
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Between fork and exec: moves the calling process into the cgroup whose `cgroup.procs` is
/// open as `fd` ("0" means the writer). Only `write`, which is async-signal-safe.
pub fn join_self(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: writes one byte from a static buffer.
    let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The descriptor of an [`OwnedFd`] (for a `pre_exec` closure, which must not own it).
pub fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// An open `cgroup.freeze` ([`JobCgroup::freezer`]).
pub struct Freezer(std::fs::File);

impl Freezer {
    /// Freezes (`true`) or thaws the job; a cgroup gone meanwhile has nothing to freeze.
    pub fn set(&self, on: bool) {
        use std::os::unix::fs::FileExt;
        let _ = self.0.write_at(if on { b"1" } else { b"0" }, 0);
    }
}

/// An open `cpu.idle` ([`JobCgroup::idler`]).
pub struct Idler(std::fs::File);

impl Idler {
    /// Idle weight (`true`) or normal; a cgroup gone meanwhile has nothing to weigh.
    pub fn set(&self, idle: bool) {
        use std::os::unix::fs::FileExt;
        let _ = self.0.write_at(if idle { b"1" } else { b"0" }, 0);
    }
}

/// An open `cgroup.events` ([`JobCgroup::events`]); each read starts from its beginning, and
/// the kernel renders the file anew for it.
pub struct Events(std::fs::File);

impl Events {
    /// [`JobCgroup::stopped`], read through the open file.
    pub fn stopped(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        match self.0.read_at(&mut buf, 0) {
            Ok(n) => std::str::from_utf8(&buf[..n]).map_or(true, stopped_in),
            Err(_) => true,
        }
    }
}

/// Whether `cgroup.events` text says nothing of the cgroup can run: frozen, or empty.
fn stopped_in(events: &str) -> bool {
    field(events, "frozen") != Some(0) || field(events, "populated") == Some(0)
}

/// The value of `name` in a cgroup file of `KEY VALUE` lines.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Where the node manager can limit a job's memory: the v2 controller enabled for the
/// children of `base`, else a cgroup v1 memory hierarchy in which it makes a directory
/// `leaf` of its own, else nowhere (why).
fn memory_controller(base: &Path, leaf: &std::ffi::OsStr) -> Memory {
    let controllers = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "memory") {
        match write_file(&base.join("cgroup.subtree_control"), "+memory") {
            Ok(()) => return Memory::V2,
            Err(e) => {
                return Memory::None(format!(
                    "cannot enable the memory controller in {}: {e}",
                    base.display()
                ));
            }
        }
    }
    let dir = match v1_dir("memory", leaf) {
        Ok(dir) => dir,
        Err(V1Missing::Hierarchy) => {
            return Memory::None(format!(
                "the memory controller is not delegated to {} (enable it in the cgroup.subtree_control of its parent) and no cgroup v1 memory hierarchy is mounted",
                base.display()
            ));
        }
        Err(V1Missing::Dir(why)) => return Memory::None(why),
    };
    if !dir.join("memory.limit_in_bytes").exists() {
        return Memory::None(format!("{} has no memory.limit_in_bytes", dir.display()));
    }
    Memory::V1 { base: dir }
}

/// Where the node manager sets a job's `cpu.idle`: the v2 cpu controller enabled for the
/// children of `base`, else a cgroup v1 cpu hierarchy in which it makes a directory `leaf` of
/// its own, else nowhere (why).
fn cpu_controller(base: &Path, leaf: &std::ffi::OsStr) -> Cpu {
    let controllers = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "cpu") {
        return match write_file(&base.join("cgroup.subtree_control"), "+cpu") {
            Ok(()) if base.join("cpu.idle").exists() => Cpu::V2,
            Ok(()) => Cpu::None(format!(
                "{} has no cpu.idle (kernel older than 5.15)",
                base.display()
            )),
            Err(e) => Cpu::None(format!(
                "cannot enable the cpu controller in {}: {e}",
                base.display()
            )),
        };
    }
    let dir = match v1_dir("cpu", leaf) {
        Ok(dir) => dir,
        Err(V1Missing::Hierarchy) => {
            return Cpu::None(format!(
                "the cpu controller is not delegated to {} and no cgroup v1 cpu hierarchy is mounted",
                base.display()
            ));
        }
        Err(V1Missing::Dir(why)) => return Cpu::None(why),
    };
    if !dir.join("cpu.idle").exists() {
        return Cpu::None(format!(
            "{} has no cpu.idle (kernel older than 5.15)",
            dir.display()
        ));
    }
    Cpu::V1 { base: dir }
}

/// Why a job directory under a cgroup v1 hierarchy cannot be had.
enum V1Missing {
    /// No hierarchy of the controller is mounted.
    Hierarchy,
    /// The hierarchy is there but not this process's place in it, or the directory: why.
    Dir(String),
}

/// The directory `leaf` beside this process's own cgroup in the v1 hierarchy of controller
/// `ctl` (made if it is not there yet).
fn v1_dir(ctl: &str, leaf: &std::ffi::OsStr) -> Result<PathBuf, V1Missing> {
    let (mount, root) = v1_mount(ctl).ok_or(V1Missing::Hierarchy)?;
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let own = own
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, path) = (f.next()?, f.next()?, f.next()?);
            c.split(',').any(|c| c == ctl).then_some(path)
        })
        .ok_or_else(|| V1Missing::Dir(format!("this process is in no cgroup v1 {ctl} cgroup")))?;
    let rel = own.strip_prefix(root.trim_end_matches('/')).unwrap_or(own);
    let dir = mount.join(rel.trim_start_matches('/')).join(leaf);
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dir),
        Err(e) => Err(V1Missing::Dir(format!(
            "cannot create {}: {e}",
            dir.display()
        ))),
    }
}

/// The mount point of the cgroup v1 hierarchy of controller `ctl` and the cgroup it shows as
/// its root.
fn v1_mount(ctl: &str) -> Option<(PathBuf, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, _source, opts) = (r.next()?, r.next()?, r.next()?);
        if fstype != "cgroup" || !opts.split(',').any(|o| o == ctl) {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        (f.len() >= 5).then(|| (PathBuf::from(unescape(f[4])), unescape(f[3])))
    })
}

/// The mount point of the cgroup2 file system and the cgroup it shows as its root.
fn cgroup2_mount() -> Option<(PathBuf, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Fields: id parent dev root mountpoint options [optional...] - fstype source superopts
    let mut found = None;
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        if f.len() < 5 {
            continue;
        }
        let m = (PathBuf::from(unescape(f[4])), unescape(f[3]));
        // The conventional place first (a pure v2 host), then any (a hybrid host's
        // /sys/fs/cgroup/unified).
        if m.0 == Path::new("/sys/fs/cgroup") {
            return Some(m);
        }
        found.get_or_insert(m);
    }
    found
}

/// mountinfo escapes spaces and a few other bytes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory name of launch `launch` of `job` by node manager `instance`.
fn job_cgroup_name(job: JobId, instance: u64, launch: u64) -> String {
    format!("job-{}-{instance:x}-{launch}", job.0)
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a: a hash that stays the same across builds (the directory name must survive a
/// restart of the node manager with another binary).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape(r"/x\04"), r"/x\04");
    }

    /// A restarted node manager's launch numbers start at 1 again, so its job cgroups must
    /// still be named apart from its predecessor's.
    #[test]
    fn job_cgroups_of_successive_node_managers_have_different_names() {
        let (job, launch) = (JobId(7), 1);
        assert_ne!(
            job_cgroup_name(job, 0x1000, launch),
            job_cgroup_name(job, 0x1001, launch)
        );
        assert!(job_cgroup_name(job, 0x1000, launch).starts_with("job-7-"));
    }

    /// Creating a job cgroup never takes over a directory that exists (an earlier launch's,
    /// perhaps being removed).
    #[test]
    fn a_job_cgroup_that_exists_already_is_refused() {
        let base = std::env::temp_dir().join(format!("cosched-cg-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let cg = Cgroups {
            base: base.clone(),
            instance: 5,
            memory: Memory::None("a test".into()),
            cpu: Cpu::None("a test".into()),
        };
        let first = cg.create(JobId(3), 1).unwrap();
        assert!(first.dir.is_dir());
        let again = cg.create(JobId(3), 1).unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(
            again.to_string().contains(&first.dir.display().to_string()),
            "{again}"
        );
        let next = Cgroups {
            base: base.clone(),
            instance: 6,
            memory: Memory::None("a test".into()),
            cpu: Cpu::None("a test".into()),
        };
        assert!(
            next.create(JobId(3), 1).is_ok(),
            "a new instance's name is free"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_directory_key_is_stable_and_names_are_safe() {
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_ne!(fnv1a(b"/a"), fnv1a(b"/b"));
        assert_eq!(sanitize("n0/../x y"), "n0____x_y");
    }

    /// A job's v1 cpu directory is made beside its cgroup and joined by its ranks; one
    /// without `cpu.idle` (not a cpu hierarchy) is not kept, and the job has no weight.
    #[test]
    fn a_v1_cpu_directory_is_joined_and_one_without_cpu_idle_is_not_kept() {
        let tmp = std::env::temp_dir().join(format!("cosched-cpu-{}", std::process::id()));
        let (base, cpu) = (tmp.join("v2"), tmp.join("cpu"));
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(&cpu).unwrap();
        let cg = Cgroups {
            base: base.clone(),
            instance: 5,
            memory: Memory::None("a test".into()),
            cpu: Cpu::V1 { base: cpu.clone() },
        };
        let job = cg.create(JobId(3), 1).unwrap();
        assert!(job.cpu.is_none() && job.idler().is_none() && !job.idle());
        assert_eq!(std::fs::read_dir(&cpu).unwrap().count(), 0, "nothing left");
        // With a cpu.idle (a real v1 cpu hierarchy makes one in every directory).
        let name = job_cgroup_name(JobId(4), 5, 1);
        let withidle = JobCgroup {
            dir: base.join(&name),
            mem: None,
            cpu: Some(cpu.join(&name)),
        };
        std::fs::create_dir_all(withidle.cpu.as_ref().unwrap()).unwrap();
        std::fs::create_dir_all(&withidle.dir).unwrap();
        for d in [&withidle.dir, withidle.cpu.as_ref().unwrap()] {
            std::fs::write(d.join("cgroup.procs"), "").unwrap();
        }
        std::fs::write(withidle.cpu.as_ref().unwrap().join("cpu.idle"), "0").unwrap();
        assert_eq!(
            withidle.procs_fds().unwrap().len(),
            2,
            "the ranks join both"
        );
        withidle.idler().unwrap().set(true);
        assert!(withidle.idle());
        withidle.idler().unwrap().set(false);
        assert!(!withidle.idle());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
