//! Starting a rank (the shell's side of [`super::launch`]): fork and exec as the job's user,
//! into the job's cgroup, pinned to its CPU, in its own process group, with its PMI socket
//! and output files; and who that user is.

use std::os::fd::RawFd;
use std::path::Path;

use super::launch::{BaseEnv, Creds, RankSpec};
use cosched_core::JobId;

/// Who the ranks of job `job` of user `uid` (group `gid`) run as: `None` for the node
/// manager's own user `me` (or a job recorded without a user); an error when this node
/// manager is not root and the job is another user's.
pub fn run_as(
    job: JobId,
    uid: Option<u32>,
    gid: Option<u32>,
    node: &str,
    me: u32,
) -> Result<Option<Creds>, String> {
    match uid {
        None => Ok(None),
        Some(u) if u == me => Ok(None),
        Some(u) if me != 0 => Err(format!(
            "the node manager of {node} runs as {} (uid {me}) and can run only that user's jobs; job {} belongs to {} (uid {u}): run the node managers as root to run every user's jobs",
            cosched_proto::util::user_name(me),
            job,
            cosched_proto::util::user_name(u)
        )),
        Some(uid) => {
            let gid =
                gid.unwrap_or_else(|| cosched_proto::util::account(uid).map_or(uid, |a| a.gid));
            // Looked up before the fork: reading the group database is not
            // async-signal-safe.
            Ok(Some(Creds {
                uid,
                gid,
                groups: cosched_proto::util::groups_of(uid, gid),
            }))
        }
    }
}

/// A path for `open(2)` in the rank between fork and exec.
fn c_path(p: &Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other(format!("{} contains a NUL byte", p.display())))
}

/// Starts the rank `s` describes; `pmi_fd` is the rank's end of its PMI socket pair (kept
/// across its exec), `cgroup_procs` the `cgroup.procs` of its cgroups, open for writing.
pub fn spawn_rank(
    s: &RankSpec,
    pmi_fd: Option<RawFd>,
    cgroup_procs: &[RawFd],
) -> std::io::Result<tokio::process::Child> {
    let cwd = s.cwd.as_path();
    let run_as = s.creds.as_ref();
    // As another user, the rank creates its files itself (below, after taking the user's
    // identity); as ourselves, we do, to name the file in the error.
    let (out, err): (std::process::Stdio, std::process::Stdio) = if run_as.is_some() {
        (std::process::Stdio::null(), std::process::Stdio::null())
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        let create = |p: &Path| {
            if let Some(dir) = p.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            std::fs::OpenOptions::new()
                .create(true)
                // Appending: a file cut back at --output-cap then grows from its end. (The
                // standard library refuses truncate with append: the flag is given as is.)
                .append(true)
                .custom_flags(if s.append { 0 } else { libc::O_TRUNC })
                .mode(0o600)
                .open(p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        let out = create(&s.out)?;
        let err = match &s.err {
            None => out.try_clone()?,
            Some(e) => create(e)?,
        };
        (out.into(), err.into())
    };
    let creds = run_as.cloned();
    let trunc = if s.append { 0 } else { libc::O_TRUNC };
    let child_files = match run_as {
        Some(_) => Some((c_path(&s.out)?, s.err.as_deref().map(c_path).transpose()?)),
        None => None,
    };
    // The directories of its output files that do not exist yet, outermost first: the
    // rank makes them as its user (tools such as submitit make a job's folder only once
    // sbatch has answered, and a job here may start within that moment).
    let child_dirs: Vec<std::ffi::CString> = match run_as {
        Some(_) => [Some(s.out.as_path()), s.err.as_deref()]
            .into_iter()
            .flatten()
            .filter_map(Path::parent)
            .flat_map(|d| {
                let mut missing: Vec<&Path> = d.ancestors().take_while(|a| !a.exists()).collect();
                missing.reverse();
                missing
            })
            .map(c_path)
            .collect::<std::io::Result<_>>()?,
        None => Vec::new(),
    };
    let mut cmd = tokio::process::Command::new(&s.argv[0]);
    cmd.args(&s.argv[1..]);
    if let BaseEnv::Only(env) = &s.base_env {
        cmd.env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    for k in &s.remove_env {
        cmd.env_remove(k);
    }
    cmd.envs(s.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(dir) = &s.path_first {
        let base = match &s.base_env {
            BaseEnv::Only(env) => env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone()),
            BaseEnv::Inherit => std::env::var("PATH").ok(),
        };
        cmd.env("PATH", path_with_first(dir, base.as_deref()));
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let pmi_fd = pmi_fd.filter(|&fd| fd > 2);
    if let Some(fd) = pmi_fd {
        cmd.env("PMI_FD", fd.to_string())
            .envs(s.pmi_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    // As another user, the rank enters its directory only once it is that user, so it gets
    // no further than the user could.
    let child_cwd = match run_as {
        Some(_) => Some(c_path(cwd)?),
        None => {
            cmd.current_dir(cwd);
            None
        }
    };
    let cpus = s.cpus.clone();
    let cgroup_procs = cgroup_procs.to_vec();
    let nm_pid = std::process::id();
    // SAFETY: only async-signal-safe calls (write, fcntl, prctl, getppid, sched_setaffinity,
    // setgroups, setgid, setuid, chdir, mkdir, open, dup2) between fork and exec, on data prepared
    // before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // Into the job's cgroup first: whatever the rank starts is then in it too.
            for &fd in &cgroup_procs {
                crate::contain::join_self(fd)?;
            }
            // The PMI socket is created close-on-exec, like every descriptor of the node
            // manager; only this rank's end is made to survive its exec.
            if let Some(fd) = pmi_fd
                && libc::fcntl(fd, libc::F_SETFD, 0) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            // Ranks run at normal priority whatever the node manager's.
            let normal = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal);
            libc::setpriority(libc::PRIO_PROCESS, 0, 0);
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in &cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            // The job's user: groups first, uid last (after it, no more changes are allowed).
            if let Some(c) = &creds
                && (libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0
                    || libc::setgid(c.gid) != 0
                    || libc::setuid(c.uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            // A rank must not outlive its node manager: a killed NM takes its processes along,
            // as a crashed node would. Set after the identity change, which clears it. A node
            // manager that died before this line sends no signal: then the rank is already
            // an orphan and must not run (the machine manager takes its job for lost when the
            // next node manager registers, and may start it elsewhere at once).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() as u32 != nm_pid {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(dir) = &child_cwd
                && libc::chdir(dir.as_ptr()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Output files created by the user, with the user's rights.
            for dir in &child_dirs {
                libc::mkdir(dir.as_ptr(), 0o755);
            }
            if let Some((out, err)) = &child_files {
                let open = |p: &std::ffi::CString| {
                    let fd = libc::open(
                        p.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | trunc | libc::O_APPEND | libc::O_CLOEXEC,
                        0o600,
                    );
                    if fd < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(fd)
                    }
                };
                let o = open(out)?;
                let e = match err {
                    Some(p) => open(p)?,
                    None => o,
                };
                if libc::dup2(o, 1) < 0 || libc::dup2(e, 2) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        // Failed as the job's user: entering the directory, creating an output file or the
        // exec itself; say where.
        Err(e) if let Some(who) = run_as => Err(std::io::Error::new(
            e.kind(),
            format!(
                "{e} (as {} in {}, output {})",
                cosched_proto::util::user_name(who.uid),
                cwd.display(),
                s.out.display()
            ),
        )),
        r => r,
    }
}

/// `PATH` with `dir` first (once), or with the system's usual directories after it when
/// there was none.
pub fn path_with_first(dir: &Path, path: Option<&str>) -> String {
    let dir = dir.display().to_string();
    match path.filter(|p| !p.is_empty()) {
        Some(p) if p.split(':').next() == Some(dir.as_str()) => p.to_string(),
        Some(p) => format!("{dir}:{p}"),
        None => format!("{dir}:/usr/local/bin:/usr/bin:/bin"),
    }
}

/// A rank's exit code as cosched records it: its status, or 128 + the signal that killed it.
pub fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}
