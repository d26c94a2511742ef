//! A launch, as the core carries it out: one chain of effects the shell answers at once.
//!
//! 1. [`Effect::Prepare`]: the shell resolves a staged `argv[0]` (crate::bcast), looks up the
//!    job's user, makes the launch's cgroup, the job's directory and its monitor ring, and
//!    says whether the job's working directory exists here ([`Input::Prepared`]).
//! 2. [`Effect::Spawn`] per local rank, one at a time, with everything the rank is started
//!    with ([`RankSpec`]); the shell forks and execs it and answers with its pid or why it
//!    could not ([`Input::Spawned`]). A rank launched stopped is stopped before the next one
//!    starts.
//! 3. A job launched stopped in a cgroup is frozen only once every rank has started (a rank
//!    joining a frozen cgroup would freeze before its exec, and the spawn waits for the
//!    exec); the launch is acknowledged; ranks that could not start exit with 127.
//!
//! One chain is carried out at a time; launches that arrive meanwhile wait in a queue. A
//! launch whose job gets a PMIx helper leaves the chain between 1 and 2: the helper's
//! readiness is an input that may take seconds ([`super::pmix`]), so the launch is set aside
//! and the next one goes on; once its helper has answered it resumes with 2 as soon as no
//! other chain is under way. Each launch thus moves through its own states — prepared,
//! helper starting, ranks spawning, running — and no launch takes another's place.
//!
//! Numbering: every launch of this node manager gets the next number. It names the launch's
//! cgroup and comes back with the exits of its ranks, so the exit of a rank of an earlier run
//! of a requeued job is never taken for the new run's.

use std::collections::BTreeSet;
use std::path::PathBuf;

use cosched_core::{JobId, NodeId, Time};

use super::core::{CgroupOp, Effect, Level, NmCore, NodeJob, Rank};
use crate::pmi::JobPmi;
use cosched_proto::proto::*;

/// Set up a launch (see the module documentation); answer with [`Input::Prepared`].
///
/// [`Input::Prepared`]: super::core::Input::Prepared
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrepareLaunch {
    pub job: JobId,
    pub launch: u64,
    /// `argv[0]`: a program, or a staged copy's name (`cosched-staged:…`) to resolve.
    pub cmd0: String,
    /// The job's user and group as submitted.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The job's working directory as submitted (checked: does this node have it?).
    pub cwd: String,
    /// The local ranks, in the order of their monitor-ring slots.
    pub ranks: Vec<u32>,
    /// The job's memory limit on this node in bytes (`--mem`, `--mem-per-cpu` × its PEs
    /// here, at most the node's memory), set on its cgroup.
    pub memory: Option<u64>,
    /// A step's ranks join the cgroup of this launch of its allocation (job, launch) rather
    /// than one of their own.
    pub join: Option<(JobId, u64)>,
}

/// The user a job's ranks run as, when it is not the node manager's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creds {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, as `initgroups` would set them.
    pub groups: Vec<u32>,
}

/// What the shell prepared for a launch.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub job: JobId,
    pub launch: u64,
    /// The staged copy `argv[0]` named (`Ok(None)`: it named none), or why it is not
    /// available (the launch then fails naming it).
    pub cmd0: Result<Option<String>, String>,
    /// Who the ranks run as (`None`: the node manager's user), or why they cannot run here.
    pub run_as: Result<Option<Creds>, String>,
    /// A cgroup of its own (`Ok(false)`: the node has none, process groups), or why it
    /// could not be made (process groups then).
    pub cgroup: Result<bool, String>,
    /// The memory limit was set on the job's cgroup, or why not (the job runs without it).
    pub memory: Result<(), String>,
    /// The job's directory was made (or taken back from an earlier run) and given to its user;
    /// or why not.
    pub dir: Result<(), String>,
    /// Each local rank's monitor variables (ring file and slot), by position; empty for a
    /// rank when the ring could not be made.
    pub monitor_env: Vec<Vec<(String, String)>>,
    /// The job's working directory exists on this node (a shared file system).
    pub cwd_exists: bool,
}

/// How a rank's environment starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseEnv {
    /// The node manager's own.
    Inherit,
    /// Exactly these (`--export`: the submitter's choice replaces the node manager's).
    Only(Vec<(String, String)>),
}

/// Everything a rank is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankSpec {
    pub job: JobId,
    pub launch: u64,
    pub rank: u32,
    pub argv: Vec<String>,
    /// Where it starts: the job's working directory when this node has it, else the job's
    /// directory on the node.
    pub cwd: PathBuf,
    pub base_env: BaseEnv,
    /// Removed from the base (variables that would point at what this rank does not have).
    pub remove_env: Vec<String>,
    /// Set over the base, in order.
    pub env: Vec<(String, String)>,
    /// The PMI-1 variables, set with `PMI_FD` when the shell gives the rank a PMI socket (a
    /// descriptor below 3 would be taken by the standard streams: then it goes without).
    pub pmi_env: Vec<(String, String)>,
    /// The CPUs it is pinned to: its PE's, or with `--cpus-per-task` those of each PE it
    /// holds.
    pub cpus: Vec<usize>,
    /// Its user, when not the node manager's.
    pub creds: Option<Creds>,
    /// It joins its launch's cgroup (a step's: its allocation's) before `exec`.
    pub cgroup: bool,
    /// Put in front of `PATH`: the node manager's directory of Slurm's commands (`srun`),
    /// for a batch script and a step's ranks.
    pub path_first: Option<PathBuf>,
    /// Its standard output, and its standard error when apart (`None`: merged into `out`).
    pub out: PathBuf,
    pub err: Option<PathBuf>,
    /// Its output files are appended to rather than cut (`--open-mode=append`).
    pub append: bool,
}

/// A launch whose chain of effects is under way.
#[derive(Clone, Debug)]
pub(super) struct Launching {
    pub(super) l: Launch,
    pub(super) launch: u64,
    /// (rank, local PE) of the ranks placed here.
    pub(super) ranks: Vec<(u32, u32)>,
    /// The next rank to start, by position in `ranks`.
    next: usize,
    /// Filled in when prepared.
    pub(super) run_as: Result<Option<Creds>, String>,
    dir_made: bool,
    cwd: PathBuf,
    monitor_env: Vec<Vec<(String, String)>>,
    /// Exits of the ranks that could not start, taken in once the launch is acknowledged.
    failed: Vec<RankExit>,
}

/// The PEs of a placement: `MPI_UNIVERSE_SIZE` of the job placed so, and of its steps.
fn allocation_pes(placement: &[Placement]) -> u32 {
    let pes: BTreeSet<(NodeId, u32)> = placement
        .iter()
        .flat_map(|p| p.pes().map(move |pe| (p.node, pe)))
        .collect();
    pes.len() as u32
}

impl NmCore {
    /// Job `job`'s directory on the node.
    pub(super) fn job_dir(&self, job: JobId) -> PathBuf {
        self.cfg.jobs_dir.join(job.0.to_string())
    }

    /// A launch message: a job placed here starts its chain (see the module documentation);
    /// a repeated or late one is acknowledged again and nothing more.
    pub(super) fn launch(&mut self, now: Time, mut l: Launch) {
        if self.launching.is_some() {
            // A launch (or a step released) in the middle of another launch's chain starts
            // after it.
            self.queued.push_back(l);
            return;
        }
        if self.set_aside(l.job).is_some_and(|run| run >= l.run) {
            // A repeat of a launch whose ranks wait for their helper: acknowledged once they
            // have started.
            return;
        }
        let Some(mine) = l.placement.iter().find(|p| Some(p.node) == self.id) else {
            return;
        };
        let mut ranks = mine.ranks.clone();
        let pes_here = mine.pes().count() as u32;
        if l.io.batch {
            // The script runs once, as rank 0 (on the allocation's first node), without PMI:
            // an MPI launcher in it starts its ranks through `srun`.
            ranks.retain(|&(r, _)| r == 0);
            l.io.mpi = cosched_proto::jobio::Mpi::None;
        }
        let mut join = None;
        if let Some(alloc) = l.within {
            match self.jobs.get(&alloc).filter(|a| a.run == l.run) {
                Some(a) if a.stopped && a.owns_cgroup() => {
                    self.waiting_steps.push(l);
                    return;
                }
                Some(a) => join = a.owns_cgroup().then_some((alloc, a.launch)),
                None => {
                    self.step_without_allocation(l, &ranks);
                    return;
                }
            }
        }
        match self.jobs.get(&l.job).map(|j| j.run) {
            Some(run) if run >= l.run => {
                // Acknowledged even when it is a repeat: the machine manager resends a launch
                // until it hears this.
                self.up(FromNode::Launched {
                    job: l.job,
                    run: l.run,
                });
                return;
            }
            // An earlier run of a requeued job whose forget never came (the node was out of
            // the tree then): its processes go, the new run starts.
            Some(_) => self.forget(now, l.job),
            None => {}
        }
        self.launches += 1;
        let launch = self.launches;
        self.push(Effect::Prepare(Box::new(PrepareLaunch {
            job: l.job,
            launch,
            cmd0: l.cmd.first().cloned().unwrap_or_default(),
            uid: l.uid,
            gid: l.gid,
            cwd: l.cwd.clone(),
            ranks: ranks.iter().map(|&(r, _)| r).collect(),
            memory: l.mem.map(|m| m.on_node(pes_here, self.cfg.memory)),
            join,
        })));
        self.launching = Some(Launching {
            l,
            launch,
            ranks,
            next: 0,
            run_as: Ok(None),
            dir_made: false,
            cwd: PathBuf::new(),
            monitor_env: Vec::new(),
            failed: Vec::new(),
        });
    }

    pub(super) fn launching(&self, job: JobId, launch: u64) -> bool {
        self.launching
            .as_ref()
            .is_some_and(|ln| ln.l.job == job && ln.launch == launch)
    }

    pub(super) fn prepared(&mut self, now: Time, p: Prepared) {
        if !self.launching(p.job, p.launch) {
            return;
        }
        let job = p.job;
        let dir = self.job_dir(job);
        if let Err(why) = &p.cmd0 {
            self.log(Level::Warn, format!("job {job}: {why}"));
        }
        let cgroup = match p.cgroup {
            Ok(c) => c,
            Err(e) => {
                self.log(
                    Level::Warn,
                    format!("job {job}: no cgroup ({e}); process groups"),
                );
                false
            }
        };
        if let (Some(ln), Err(why)) = (&self.launching, &p.memory)
            && let Some(m) = ln.l.mem
        {
            self.log(
                Level::Warn,
                format!(
                    "job {job}: {} is not enforced on this node: {why}",
                    m.option()
                ),
            );
        }
        if let Err(e) = &p.dir {
            self.log(
                Level::Warn,
                format!(
                    "job {job}: cannot make its directory {}: {e}",
                    dir.display()
                ),
            );
        }
        let euid = self.cfg.euid;
        let ln = self.launching.as_mut().expect("checked");
        if let Ok(Some(path)) = p.cmd0
            && let Some(cmd0) = ln.l.cmd.first_mut()
        {
            *cmd0 = path;
        }
        ln.cwd = if p.cwd_exists {
            PathBuf::from(&ln.l.cwd)
        } else {
            dir
        };
        ln.dir_made = p.dir.is_ok();
        ln.monitor_env = p.monitor_env;
        ln.run_as = p.run_as;
        let owner = ln.run_as.as_ref().ok().and_then(Option::as_ref);
        let local: BTreeSet<u32> = ln.ranks.iter().map(|&(r, _)| r).collect();
        // A step's universe is its allocation's; a job's, the PEs it was placed on.
        let universe = match ln.l.within.and_then(|a| self.jobs.get(&a)) {
            Some(alloc) => alloc.pmi.universe(),
            None => allocation_pes(&ln.l.placement),
        };
        let job_state = NodeJob {
            ranks: Default::default(),
            pmi: JobPmi::new(job, ln.l.size, &ln.l.placement, local).with_universe(universe),
            pmix: Default::default(),
            notes: Default::default(),
            aborted: None,
            worlds: super::worlds::Worlds::new(ln.l.size, ln.l.io.mpi),
            cgroup,
            within: ln.l.within,
            stopped: ln.l.stopped,
            launch: ln.launch,
            run: ln.l.run,
            nodes: ln.l.placement.iter().map(|p| p.node).collect(),
            must_own: owner.map(|w| w.uid).filter(|&u| u != 0 && euid == 0),
            began: None,
            held: None,
        };
        self.jobs.insert(job, job_state);
        if self.start_helper(job) {
            let ln = self.launching.take().expect("checked");
            self.helper_waits.push(ln);
        } else {
            self.spawn_next(now);
        }
    }

    /// A job killed while its launch is set aside: its ranks are not started, and their
    /// exits say why.
    pub(super) fn kill_set_aside(&mut self, job: JobId) {
        for ln in self
            .helper_waits
            .iter_mut()
            .chain(self.resumable.iter_mut())
        {
            if ln.l.job == job {
                ln.run_as = Err("the job was killed before its ranks started".into());
            }
        }
    }

    /// A launch set aside whose job was forgotten meanwhile: none of its ranks will start.
    pub(super) fn setup_dropped(&mut self, ln: &Launching) {
        self.push(Effect::SetupDone {
            job: ln.l.job,
            launch: ln.launch,
        });
    }

    /// The run of `job` whose launch is set aside (its helper starting, or answered and
    /// waiting for its turn), if one is.
    pub(super) fn set_aside(&self, job: JobId) -> Option<u32> {
        self.helper_waits
            .iter()
            .chain(&self.resumable)
            .find(|ln| ln.l.job == job)
            .map(|ln| ln.l.run)
    }

    /// Its launch here has not finished: prepared, waiting for its PMIx helper or starting
    /// its ranks. Until every rank has started only the launch writes its cgroup's freezer
    /// (a rank that joins a frozen cgroup freezes before its exec, and a job launched
    /// stopped is frozen at the end of its launch).
    pub(super) fn launch_under_way(&self, job: JobId) -> bool {
        self.launching.iter().any(|ln| ln.l.job == job) || self.set_aside(job).is_some()
    }

    /// Starts the next chain while none is under way: a launch whose helper has answered
    /// first (its job is prepared and waits only for this), then the queued ones in order.
    pub(super) fn next_launch(&mut self, now: Time) {
        while self.launching.is_none() {
            if let Some(ln) = self.resumable.pop_front() {
                if self
                    .jobs
                    .get(&ln.l.job)
                    .is_some_and(|j| j.launch == ln.launch)
                {
                    self.launching = Some(ln);
                    self.spawn_next(now);
                } else {
                    // Forgotten while it waited: nothing of it is left to run.
                    self.setup_dropped(&ln);
                }
            } else if let Some(l) = self.queued.pop_front() {
                self.launch(now, l);
            } else {
                return;
            }
        }
    }

    /// Asks for the next rank to be started, or finishes the launch.
    pub(super) fn spawn_next(&mut self, now: Time) {
        loop {
            let Some(ln) = &self.launching else { return };
            let Some(&(rank, pe)) = ln.ranks.get(ln.next) else {
                self.launched(now);
                return;
            };
            match &ln.run_as {
                Ok(creds) => {
                    let spec = self.spec(ln, rank, pe, creds.clone());
                    self.push(Effect::Spawn(Box::new(spec)));
                    return;
                }
                Err(why) => {
                    let why = why.clone();
                    self.rank_failed(rank, why);
                }
            }
        }
    }

    fn spec(&self, ln: &Launching, rank: u32, pe: u32, creds: Option<Creds>) -> RankSpec {
        let l = &ln.l;
        let name = &self.cfg.name;
        let dir = self.job_dir(l.job);
        let files = cosched_proto::jobio::rank_files(&l.io, &ln.cwd, &dir, l.job, rank, name);
        let mine = l.placement.iter().find(|p| Some(p.node) == self.id);
        let mut cpus: Vec<usize> = std::iter::once(pe)
            .chain(mine.into_iter().flat_map(|p| p.pes_of(rank).skip(1)))
            .map(|pe| self.cfg.cpu_of(pe))
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        let mut env = l.env.clone();
        env.extend([
            (
                "COSCHED_JOB_ID".to_string(),
                l.within.unwrap_or(l.job).0.to_string(),
            ),
            ("COSCHED_RANK".to_string(), rank.to_string()),
            ("COSCHED_SIZE".to_string(), l.size.to_string()),
            ("COSCHED_NODE".to_string(), name.clone()),
            ("COSCHED_PE".to_string(), pe.to_string()),
        ]);
        // Slurm's per-task variables (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, ...): the
        // other nodes' names are not needed for them, only this one's.
        let layout: Vec<(String, u32)> = l
            .placement
            .iter()
            .map(|p| {
                let here = Some(p.node) == self.id;
                let name = if here { name.clone() } else { String::new() };
                (name, p.ranks.len() as u32)
            })
            .collect();
        env.extend(cosched_slurm::env::task_env(&cosched_slurm::env::Task {
            step: cosched_slurm::env::StepKind::Batch,
            rank,
            layout: &layout,
        }));
        if let Some(m) = ln.monitor_env.get(ln.next) {
            env.extend(m.iter().cloned());
        }
        if let Some(pmix) = self.jobs.get(&l.job).and_then(|j| j.pmix.envs.get(&rank)) {
            env.extend(pmix.iter().cloned());
        }
        RankSpec {
            job: l.job,
            launch: ln.launch,
            rank,
            argv: l.cmd.clone(),
            cwd: ln.cwd.clone(),
            base_env: match &l.io.env {
                Some(e) => BaseEnv::Only(e.clone()),
                None => BaseEnv::Inherit,
            },
            // PMI variables exported from a submitter that is itself a rank would point at a
            // descriptor this rank does not have.
            remove_env: [
                "PMI_FD",
                "PMI_RANK",
                "PMI_SIZE",
                "PMI_SPAWNED",
                cosched_monitor::ENV_RING,
                cosched_monitor::ENV_SLOT,
            ]
            .map(String::from)
            .to_vec(),
            env,
            // Empty: no PMI-1 socket (`--mpi pmix|none`).
            pmi_env: if l.io.mpi.pmi1() {
                vec![
                    ("PMI_RANK".into(), rank.to_string()),
                    ("PMI_SIZE".into(), l.size.to_string()),
                    ("PMI_SPAWNED".into(), "0".into()),
                ]
            } else {
                Vec::new()
            },
            cpus,
            creds,
            cgroup: self.jobs.get(&l.job).is_some_and(|j| j.cgroup),
            path_first: (l.io.batch || l.within.is_some())
                .then(|| self.cfg.slurm_bin.clone())
                .flatten(),
            out: files.out,
            err: (!files.merged).then_some(files.err),
            append: l.io.append,
        }
    }

    pub(super) fn spawned(
        &mut self,
        now: Time,
        job: JobId,
        launch: u64,
        rank: u32,
        result: Result<i32, String>,
    ) {
        if !self.launching(job, launch) {
            return;
        }
        let ln = self.launching.as_ref().expect("checked");
        let Some(&(expected, pe)) = ln.ranks.get(ln.next) else {
            return;
        };
        if expected != rank {
            return;
        }
        match result {
            Ok(pid) => self.rank_started(now, rank, pe, pid),
            Err(e) => {
                let cmd0 = ln.l.cmd.first().cloned().unwrap_or_default();
                self.rank_failed(rank, format!("cannot launch {cmd0:?}: {e}"));
            }
        }
        self.spawn_next(now);
    }

    fn rank_started(&mut self, now: Time, rank: u32, pe: u32, pid: i32) {
        let ln = self.launching.as_mut().expect("launching");
        ln.next += 1;
        let job = ln.l.job;
        let dir = self.cfg.jobs_dir.join(job.0.to_string());
        let f =
            cosched_proto::jobio::rank_files(&ln.l.io, &ln.cwd, &dir, job, rank, &self.cfg.name);
        let files = if f.merged {
            vec![f.out]
        } else {
            vec![f.out, f.err]
        };
        self.owners.insert(pid, job);
        let j = self.jobs.get_mut(&job).expect("inserted when prepared");
        // Launched stopped, or stopped by a switch since its launch began.
        let stopped = j.stopped;
        j.began.get_or_insert(now);
        j.ranks.insert(
            rank,
            Rank {
                pgid: pid,
                exit: None,
                files,
                capped: vec![false; 2],
            },
        );
        j.worlds.started(now, rank);
        let step = j.within.is_some();
        // Stopped at once; in a cgroup, the whole job is frozen once every rank has started.
        if stopped && !j.owns_cgroup() {
            j.held.get_or_insert(now);
            self.push(Effect::Signal {
                pgid: pid,
                sig: libc::SIGSTOP,
            });
        }
        // A step's ranks are stopped and continued with their allocation (its cgroup, or
        // its process groups with the allocation's: see `NmCore::signal`), not scheduled by
        // the node scheme on their own.
        if !step {
            self.nsched.add(now, job, rank, pe, pid, stopped);
        }
    }

    /// Rank `rank` could not start (`why`): said in the log and in its error file; it exits
    /// with 127 once the launch is acknowledged.
    fn rank_failed(&mut self, rank: u32, why: String) {
        let ln = self.launching.as_mut().expect("launching");
        ln.next += 1;
        let (job, launch) = (ln.l.job, ln.launch);
        let dir_made = ln.dir_made;
        let owner = match &ln.run_as {
            Ok(Some(c)) => Some((c.uid, c.gid)),
            _ => None,
        };
        ln.failed.push(RankExit {
            rank,
            code: Some(127),
            error: Some(why.clone()),
            oom: false,
        });
        if let Some(j) = self.jobs.get_mut(&job) {
            j.ranks.insert(
                rank,
                Rank {
                    pgid: 0,
                    exit: None,
                    files: Vec::new(),
                    capped: Vec::new(),
                },
            );
        }
        self.log(Level::Warn, format!("job {job} rank {rank}: {why}"));
        if dir_made {
            self.push(Effect::WriteRankFile {
                job,
                launch,
                name: format!("{rank}.err"),
                content: format!("cosched: {why}\n").into_bytes(),
                owner,
            });
            self.push(Effect::WriteRankFile {
                job,
                launch,
                name: format!("{rank}.out"),
                content: Vec::new(),
                owner,
            });
        }
    }

    /// Every rank has started or failed: a job in a cgroup that is to stand stopped (launched
    /// stopped, or stopped since by a switch, which left the freeze to this) is frozen, the
    /// launch acknowledged, and the failed ranks' exits taken in.
    fn launched(&mut self, now: Time) {
        let Some(ln) = self.launching.take() else {
            return;
        };
        let job = ln.l.job;
        self.push(Effect::SetupDone {
            job,
            launch: ln.launch,
        });
        if self
            .jobs
            .get(&job)
            .is_some_and(|j| j.stopped && j.owns_cgroup())
        {
            self.push(Effect::Cgroup {
                job,
                launch: ln.launch,
                op: CgroupOp::Freeze,
            });
        }
        self.up(FromNode::Launched { job, run: ln.l.run });
        for exit in ln.failed {
            self.on(
                now,
                super::core::Input::Exited {
                    job,
                    launch: ln.launch,
                    exit,
                },
            );
        }
    }
}

impl NmCore {
    /// A step whose allocation this node does not run (it ended here, or its launch has not
    /// arrived): its ranks here exit with 127, saying why.
    fn step_without_allocation(&mut self, l: Launch, ranks: &[(u32, u32)]) {
        let alloc = l.within.unwrap_or(l.job);
        let why = format!(
            "job {alloc} (run {}) is not running on this node: its step cannot start here",
            l.run
        );
        self.log(Level::Warn, why.clone());
        for &(rank, _) in ranks {
            self.up(FromNode::Exited {
                job: l.job,
                run: l.run,
                exit: RankExit {
                    rank,
                    code: Some(127),
                    error: Some(why.clone()),
                    oom: false,
                },
            });
        }
    }

    /// The steps of `job` that waited for it to continue are launched (one after the
    /// other: see [`NmCore::launch`]).
    pub(super) fn release_steps(&mut self, job: JobId) {
        let (ready, wait): (Vec<Launch>, Vec<Launch>) = std::mem::take(&mut self.waiting_steps)
            .into_iter()
            .partition(|l| l.within == Some(job));
        self.waiting_steps = wait;
        self.queued.extend(ready);
    }
}
