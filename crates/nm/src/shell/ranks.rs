//! A launch carried out: its ranks prepared and spawned as their users, its PMIx helper
//! started and served, and its cgroup operations.

use std::collections::BTreeSet;

use super::*;
use crate::freeze_watch::Install;
use crate::program::{Cg, Program};

impl Shell {
    /// Sets up a launch: a staged `argv[0]` resolved (this node's copy, of the job's user or
    /// published), the job's cgroup, its user, its directory (made, or taken back from an
    /// earlier run, relative to the handle of `jobs/`, and given to the user through its own
    /// handle) and its monitor ring.
    pub(super) fn prepare(&mut self, p: &PrepareLaunch) -> Prepared {
        let cmd0 = match &mut self.stager {
            Some(st) => {
                let uid = p.uid.unwrap_or_else(cosched_proto::util::euid);
                st.resolve(&p.cmd0, p.job, uid)
                    .map(|found| found.map(|path| path.display().to_string()))
            }
            None => Ok(None),
        };
        let no_cgroup = || Err("the node has no cgroups".to_string());
        let (cgroup, procs, memory) = match p.join {
            // A step: into its allocation's cgroups, under the allocation's memory limit.
            Some(alloc) => match self.cgroups.get(&alloc).map(|cg| cg.procs_fds()) {
                Some(Ok(procs)) => (Ok(true), procs, Ok(())),
                Some(Err(e)) => (Err(e.to_string()), Vec::new(), no_cgroup()),
                None => (Ok(false), Vec::new(), no_cgroup()),
            },
            None => match self.contain.for_launch(p.job, p.launch, p.memory) {
                Ok(Some((cg, procs, memory))) => {
                    self.cgroups.insert((p.job, p.launch), cg);
                    (Ok(true), procs, memory)
                }
                Ok(None) => (Ok(false), Vec::new(), no_cgroup()),
                Err(e) => (Err(e.to_string()), Vec::new(), no_cgroup()),
            },
        };
        let run_as = crate::spawn::run_as(
            p.job,
            p.uid,
            p.gid,
            &self.cfg.name,
            cosched_proto::util::euid(),
        );
        let owner = run_as
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map(|c| (c.uid, c.gid));
        let dir = self.jobs_dir.child_for(p.job.0.to_string(), 0o700, owner);
        let monitor_env = match &dir {
            Ok(h) => self
                .monitors
                .prepare(p.job, h, &self.cfg.name, &p.ranks, owner),
            Err(_) => vec![Vec::new(); p.ranks.len()],
        };
        let prepared = Prepared {
            job: p.job,
            launch: p.launch,
            cmd0,
            run_as,
            cgroup,
            memory,
            dir: dir.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            monitor_env,
            cwd_exists: Path::new(&p.cwd).is_dir(),
        };
        self.preparing.insert(
            (p.job, p.launch),
            Preparing {
                dir: dir.ok(),
                procs,
            },
        );
        prepared
    }

    /// The `cgroup.procs` descriptors the process `s` describes joins.
    pub(super) fn procs_of(&self, s: &RankSpec) -> Vec<std::os::fd::RawFd> {
        self.preparing
            .get(&(s.job, s.launch))
            .filter(|_| s.cgroup)
            .map(|p| p.procs.iter().map(crate::contain::raw).collect())
            .unwrap_or_default()
    }

    /// Starts a rank with its PMI socket (our end served by a task, its end inherited) and
    /// a task that reports its exit.
    pub(super) fn spawn(&mut self, s: &RankSpec) -> Result<i32, String> {
        // No PMI-1 for this job (`--mpi`): no socket.
        let pair = if s.pmi_env.is_empty() {
            Err(std::io::ErrorKind::Unsupported.into())
        } else {
            std::os::unix::net::UnixStream::pair()
        };
        let pmi_fd = pair.as_ref().ok().map(|(_, theirs)| theirs.as_raw_fd());
        let procs = self.procs_of(s);
        let mut child = crate::spawn::spawn_rank(s, pmi_fd, &procs).map_err(|e| e.to_string())?;
        // Our copy of the rank's end must go, or we would never see it close.
        let ours = pair.ok().and_then(|(ours, _theirs)| {
            ours.set_nonblocking(true).ok()?;
            tokio::net::UnixStream::from_std(ours).ok()
        });
        let (job, rank, launch) = (s.job, s.rank, s.launch);
        if let Some(stream) = ours {
            let (tx, rx) = mpsc::unbounded_channel();
            let to_nm = self.pmi_tx.clone();
            tokio::spawn(crate::pmi::serve_rank(stream, job, rank, to_nm, rx));
            self.pmi.insert((job, rank), tx);
        }
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let tx = self.exits_tx.clone();
        let cg = self.cgroups.get(&(job, launch)).cloned();
        tokio::spawn(async move {
            let code = match child.wait().await {
                Ok(st) => crate::spawn::exit_code(st),
                Err(_) => -1,
            };
            let exit = RankExit {
                rank,
                code: Some(code),
                error: None,
                // A rank that failed while its job's cgroup counted an OOM kill was killed
                // for the job's memory (itself, or a process it waited for).
                oom: code != 0 && cg.is_some_and(|c| c.oom_kills() > 0),
            };
            let _ = tx.send((job, launch, exit));
        });
        Ok(pid)
    }

    /// Starts a job's PMIx helper as a rank is started, its socket in `PMI_FD`, and leaves
    /// the rest to [`serve_helper`]: the helper's readiness, its lines and its exit come as
    /// inputs, so the loop serves the node's other jobs while it starts. An error here is
    /// one the helper never started with.
    pub(super) fn start_helper(&mut self, h: &StartHelper) -> Result<(), String> {
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        let procs = self.procs_of(&h.spec);
        let mut child = crate::spawn::spawn_rank(&h.spec, Some(theirs.as_raw_fd()), &procs)
            .map_err(|e| format!("cannot start {}: {e}", h.spec.argv[0]))?;
        drop(theirs);
        let (job, launch) = (h.spec.job, h.spec.launch);
        let tx = self.helper_tx.clone();
        let pid = child.id().map_or(0, |p| p as i32);
        tokio::spawn(async move {
            let code = match child.wait().await {
                Ok(st) => crate::spawn::exit_code(st),
                Err(_) => -1,
            };
            let _ = tx.send(Input::HelperExited { job, launch, code });
        });
        let stream = ours
            .set_nonblocking(true)
            .and_then(|_| tokio::net::UnixStream::from_std(ours))
            .map_err(|e| {
                cosched_proto::util::signal_group(pid, libc::SIGKILL);
                format!("the PMIx helper's socket: {e}")
            })?;
        let (to_helper, lines) = mpsc::unbounded_channel::<String>();
        self.helpers.insert(job, to_helper);
        let helper = Helper {
            job,
            launch,
            pid,
            setup: cosched_pmix::helper::ToHelper::Setup(h.setup.clone()).line(),
            exe: h.spec.argv[0].clone(),
            log: h.spec.out.clone(),
            node: self.cfg.name.clone(),
        };
        tokio::spawn(serve_helper(helper, stream, lines, self.helper_tx.clone()));
        Ok(())
    }

    /// Hands a gang rotation to the watcher's thread with a handle of each cgroup it
    /// switches. A freeze the core asked for earlier and the watcher still reports on is
    /// stale from now: the thread owns these cgroups' freezes.
    pub(super) fn program(&mut self, program: Program, thawed: BTreeSet<Cg>) {
        let cgroups = program
            .cgroups
            .iter()
            .filter_map(|c| Some((*c, self.cgroups.get(c)?.clone())))
            .collect();
        for &c in &program.cgroups {
            self.generation += 1;
            self.generations.insert(c, self.generation);
        }
        self.watcher.install(Install {
            now: now(),
            program,
            thawed,
            cgroups,
        });
    }

    pub(super) fn cgroup(&mut self, job: JobId, launch: u64, op: CgroupOp) {
        if matches!(op, CgroupOp::Freeze | CgroupOp::Thaw) {
            self.generation += 1;
            self.generations.insert((job, launch), self.generation);
        }
        let Some(cg) = self.cgroups.get(&(job, launch)) else {
            if op == CgroupOp::Freeze {
                // Gone (killed): nothing of it runs.
                self.core.on(now(), Input::Frozen { job, launch });
            }
            return;
        };
        match op {
            CgroupOp::Freeze => {
                cg.freeze(true);
                self.watcher.watch(Watch {
                    job,
                    launch,
                    generation: self.generation,
                    cgroup: cg.clone(),
                });
            }
            CgroupOp::Thaw => cg.freeze(false),
            CgroupOp::Signal(sig) => cg.signal(sig),
            CgroupOp::Terminate { grace } => {
                cg.freeze(false);
                if !cg.populated() {
                    cg.remove_when_empty(Duration::ZERO);
                    self.cgroups.remove(&(job, launch));
                    let _ = self.empty_tx.send((job, launch));
                    return;
                }
                cg.signal(libc::SIGTERM);
                cg.signal(libc::SIGCONT);
                // Watched until everything in it exited on SIGTERM (then it goes at once),
                // at most for the grace (then the core's SIGKILL comes).
                let (cg, tx) = (cg.clone(), self.empty_tx.clone());
                let grace = Duration::from_micros(grace.0.max(0) as u64);
                tokio::spawn(async move {
                    let deadline = tokio::time::Instant::now() + grace;
                    while tokio::time::Instant::now() < deadline && cg.populated() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if !cg.populated() {
                        let _ = tx.send((job, launch));
                    }
                });
            }
            CgroupOp::Kill => {
                let cg = self.cgroups.remove(&(job, launch)).expect("looked up");
                cg.kill();
                tokio::task::spawn_blocking(move || cg.remove_when_empty(Duration::from_secs(10)));
            }
        }
    }
}

/// A job's helper being served by [`serve_helper`].
pub(super) struct Helper {
    job: JobId,
    launch: u64,
    /// Its process group, killed when it fails to get ready.
    pid: i32,
    /// The first line it is sent.
    setup: String,
    exe: String,
    log: std::path::PathBuf,
    node: String,
}

/// Sends a helper its setup and waits (at most [`HELPER_READY`]) for its ranks'
/// environments, answered as [`Input::HelperReady`]; then writes what comes on `lines` to it
/// and passes its lines on as [`Input::Helper`], until it closes its socket.
pub(super) async fn serve_helper(
    h: Helper,
    stream: tokio::net::UnixStream,
    mut lines: mpsc::UnboundedReceiver<String>,
    tx: mpsc::UnboundedSender<Input>,
) {
    use cosched_pmix::helper::FromHelper;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (job, launch) = (h.job, h.launch);
    let (read, mut write) = stream.into_split();
    let mut read = tokio::io::BufReader::new(read);
    let first = async {
        write.write_all(h.setup.as_bytes()).await?;
        let mut line = String::new();
        read.read_line(&mut line).await?;
        Ok::<_, std::io::Error>(line)
    };
    let ready = match tokio::time::timeout(HELPER_READY, first).await {
        Ok(Ok(l)) if l.trim().is_empty() => Err(format!(
            "{} pmix-helper exited before it was ready (its log: {})",
            h.exe,
            h.log.display()
        )),
        Ok(Ok(l)) => match FromHelper::parse(l.trim_end()) {
            Ok(FromHelper::Ready { envs }) => Ok(envs),
            Ok(FromHelper::Failed { why }) => Err(why),
            Ok(other) => Err(format!(
                "the PMIx helper said {other:?} before it was ready"
            )),
            Err(e) => Err(format!("the PMIx helper's answer does not parse: {e}")),
        },
        Ok(Err(e)) => Err(format!("the PMIx helper's socket: {e}")),
        Err(_) => Err(format!(
            "no answer from the PMIx helper within {HELPER_READY:?}"
        )),
    };
    let failed = ready.is_err();
    if failed && h.pid > 0 {
        cosched_proto::util::signal_group(h.pid, libc::SIGKILL);
    }
    let _ = tx.send(Input::HelperReady {
        job,
        launch,
        result: ready,
    });
    if failed {
        return;
    }
    tokio::spawn(async move {
        while let Some(l) = lines.recv().await {
            if write.write_all(l.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let mut read = read.lines();
    while let Ok(Some(line)) = read.next_line().await {
        match FromHelper::parse(&line) {
            Ok(msg) => {
                let _ = tx.send(Input::Helper { job, launch, msg });
            }
            Err(e) => tracing::warn!("nm {}: job {job}: a line of its PMIx helper: {e}", h.node),
        }
    }
}
