//! Unit tests of the node manager's core under a virtual clock: the test is the shell (it
//! answers the core's questions the way the shell would, from state it sets up) and the
//! machine manager. Nothing sleeps, no process runs.

mod kill;
mod launch;
mod names;
mod pmix;
mod registration;
mod rotation;
mod scheme;
mod steps;
mod switch;
mod upkeep;
mod worlds;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use cosched_core::{Dur, JobId, NodeId, Time};
use cosched_monitor::Record;

use super::core::{CoreConfig, Effect, Input, NmCore};
use super::launch::Prepared;
use super::sched::{ProcSample, Samples};
use super::scheme::NodeSchemeConfig;
use cosched_proto::proto::*;

/// `ms` milliseconds into the test.
/// A gang rotation that stands still at `s` (a strobe taken at once).
fn still(s: Strobe) -> cosched_proto::rotation::Rotation {
    cosched_proto::rotation::Rotation::still(Time::ZERO, s)
}

fn ms(ms: i64) -> Time {
    Time::from_micros(ms * 1_000)
}

/// The configuration of the tests' node: `n0`, 2 PEs on CPUs 4 and 5, a 1,000-byte output
/// cap, a retention of 4 s.
fn config(scheme: &str) -> CoreConfig {
    CoreConfig {
        memory: 1 << 40,
        name: "n0".into(),
        pes: 2,
        mm: "mm:7070".into(),
        addr: "10.0.0.1:4000".into(),
        incarnation: 77,
        cpus: vec![4, 5],
        cpu_offset: 0,
        keep_jobs: Dur::from_secs(4),
        output_cap: 1_000,
        node_scheme: NodeSchemeConfig::parse(scheme, &[], None).unwrap(),
        euid: 1000,
        jobs_dir: PathBuf::from("/work/jobs"),
        pmix_helper: None,
        slurm_bin: Some(PathBuf::from("/w/slurm-bin")),
    }
}

/// The machine manager's acceptance, with a 10 s heartbeat (the node registers again after
/// 40.2 s of silence), a 100 s down rule (the node may be declared down after 59.8 s of
/// silence), a 5 s kill wait and a membership begun at tree epoch 1.
fn accepted(drop_jobs: Vec<JobId>) -> RegisterReply {
    accepted_since(1, drop_jobs)
}

/// [`accepted`], the node's membership begun at tree epoch `epoch`.
fn accepted_since(epoch: u64, drop_jobs: Vec<JobId>) -> RegisterReply {
    RegisterReply::Accepted {
        node: NodeId(0),
        heartbeat_us: 10_000_000,
        suspect_after_us: 0,
        down_after_us: 100_000_000,
        kill_wait_us: 5_000_000,
        drop_jobs,
        epoch,
    }
}

/// One node manager's core and the test playing its shell.
struct Node {
    core: NmCore,
    now: Time,
    /// The pid the next rank gets.
    next_pid: i32,
    /// (job, rank) of every pid handed out.
    pids: BTreeMap<i32, (JobId, u32)>,
    /// Launches get a cgroup each.
    cgroups: bool,
    /// These ranks fail to start, with this reason.
    fail: BTreeMap<u32, String>,
    /// What `/proc` shows, per pid: state and CPU time so far.
    procs: BTreeMap<i32, (char, Dur)>,
    /// Records waiting in each job's ring (taken by the next sample).
    rings: BTreeMap<JobId, Vec<(u32, Record)>>,
    /// Output files and their sizes.
    sizes: BTreeMap<PathBuf, u64>,
    /// Job directories and how long ago each changed.
    dirs: Vec<(JobId, Dur)>,
    /// The launches whose setup (cgroup, job directory) the shell holds, from
    /// [`Effect::Prepare`] to [`Effect::SetupDone`]: a rank spawned outside it would not
    /// join its cgroup, and a kill of the cgroup would miss it.
    setups: BTreeSet<(JobId, u64)>,
    /// Spawns are answered only on [`Node::release_spawns`] (a launch left under way).
    hold_spawns: bool,
    held_spawns: Vec<Input>,
}

impl Node {
    /// A node that has just started: it asks to register.
    fn starting(scheme: &str) -> (Node, Vec<Effect>) {
        Node::starting_with(config(scheme))
    }

    fn starting_with(cfg: CoreConfig) -> (Node, Vec<Effect>) {
        let mut n = Node {
            core: NmCore::new(cfg, ms(0)),
            now: ms(0),
            next_pid: 100,
            pids: BTreeMap::new(),
            cgroups: false,
            fail: BTreeMap::new(),
            procs: BTreeMap::new(),
            rings: BTreeMap::new(),
            sizes: BTreeMap::new(),
            dirs: Vec::new(),
            setups: BTreeSet::new(),
            hold_spawns: false,
            held_spawns: Vec::new(),
        };
        let fx = n.pump();
        (n, fx)
    }

    /// A node registered as node 0 and in the tree.
    fn up(scheme: &str) -> Node {
        let (mut n, _) = Node::starting(scheme);
        n.on(ms(0), Input::Registration(Ok(accepted(Vec::new()))));
        n.on(
            ms(0),
            Input::Topology {
                epoch: 1,
                member: true,
            },
        );
        n
    }

    /// Carries out the core's effects as the shell would, answering its questions; returns
    /// every effect, in order.
    fn pump(&mut self) -> Vec<Effect> {
        let mut all = Vec::new();
        while let Some(e) = self.core.poll_effect() {
            let answer = match &e {
                Effect::SetupDone { job, launch } => {
                    assert!(
                        self.setups.remove(&(*job, *launch)),
                        "job {job} launch {launch}: its setup let go twice, or never prepared"
                    );
                    None
                }
                Effect::Prepare(p) => {
                    self.setups.insert((p.job, p.launch));
                    Some(Input::Prepared(Box::new(Prepared {
                        memory: Ok(()),
                        job: p.job,
                        launch: p.launch,
                        cmd0: Ok(None),
                        run_as: Ok(None),
                        cgroup: Ok(self.cgroups),
                        dir: Ok(()),
                        monitor_env: p
                            .ranks
                            .iter()
                            .enumerate()
                            .map(|(slot, _)| {
                                vec![(cosched_monitor::ENV_SLOT.into(), slot.to_string())]
                            })
                            .collect(),
                        cwd_exists: false,
                    })))
                }
                Effect::Spawn(s) => {
                    assert!(
                        self.setups.contains(&(s.job, s.launch)),
                        "job {} rank {} spawned after its launch's setup was let go: it would run outside its cgroup",
                        s.job,
                        s.rank
                    );
                    let result = match self.fail.get(&s.rank) {
                        Some(why) => Err(why.clone()),
                        None => {
                            let pid = self.next_pid;
                            self.next_pid += 1;
                            self.pids.insert(pid, (s.job, s.rank));
                            self.procs.insert(pid, ('R', Dur::ZERO));
                            Ok(pid)
                        }
                    };
                    Some(Input::Spawned {
                        job: s.job,
                        launch: s.launch,
                        rank: s.rank,
                        result,
                    })
                }
                Effect::Sample { pids, jobs } => {
                    let procs = pids
                        .iter()
                        .filter_map(|pid| {
                            let &(state, cpu) = self.procs.get(pid)?;
                            Some(ProcSample {
                                pid: *pid,
                                state,
                                cpu,
                            })
                        })
                        .collect();
                    let rings = jobs
                        .iter()
                        .map(|j| (*j, self.rings.remove(j).unwrap_or_default()))
                        .collect();
                    Some(Input::Samples(Samples { procs, rings }))
                }
                Effect::CapOutput(c) => {
                    let size = self.sizes.get(&c.path).copied().unwrap_or(0);
                    if size > c.keep {
                        let notice = super::cap_notice(1_000).len() as u64;
                        let cut = c.keep + if c.notice { notice } else { 0 };
                        self.sizes.insert(c.path.clone(), cut);
                    }
                    (size > c.keep && c.notice).then_some(Input::OutputCapped {
                        job: c.job,
                        rank: c.rank,
                        file: c.file,
                    })
                }
                Effect::Sweep { .. } => Some(Input::JobDirs(self.dirs.clone())),
                _ => None,
            };
            let held = self.hold_spawns && matches!(e, Effect::Spawn(_));
            all.push(e);
            match answer {
                Some(i) if held => self.held_spawns.push(i),
                Some(i) => self.core.on(self.now, i),
                None => {}
            }
        }
        all
    }

    /// Answers the first spawn held back at `at`, holding the next; returns the effects.
    fn answer_held_spawn(&mut self, at: Time) -> Vec<Effect> {
        self.now = at;
        let i = self.held_spawns.remove(0);
        self.core.on(at, i);
        self.pump()
    }

    /// Answers the spawns held back, and every one after, at `at`; returns the effects.
    fn release_spawns(&mut self, at: Time) -> Vec<Effect> {
        self.now = at;
        self.hold_spawns = false;
        for i in std::mem::take(&mut self.held_spawns) {
            self.core.on(at, i);
        }
        self.pump()
    }

    /// Passes `input` at `at` (timers due before are not fired: see [`Node::until`]).
    fn on(&mut self, at: Time, input: Input) -> Vec<Effect> {
        self.now = at;
        self.core.on(at, input);
        self.pump()
    }

    /// A message of the machine manager's at `at`, sent within the node's membership.
    fn tree(&mut self, at: Time, msg: ToNode) -> Vec<Effect> {
        let epoch = self.core.membership;
        self.on(at, Input::Tree { epoch, msg })
    }

    /// Fires every timer due up to `at`, at its time; returns the effects.
    fn until(&mut self, at: Time) -> Vec<Effect> {
        let mut all = Vec::new();
        while let Some(w) = self.core.next_wake().filter(|&w| w <= at) {
            all.extend(self.on(w.max(self.now), Input::Timer));
        }
        self.now = at;
        all
    }

    /// The pid of rank `rank` of `job` (its last one).
    fn pid(&self, job: u64, rank: u32) -> i32 {
        *self
            .pids
            .iter()
            .rev()
            .find(|(_, v)| **v == (JobId(job), rank))
            .expect("spawned")
            .0
    }
}

/// A launch of `job`'s run `run`, with `ranks` (rank, local PE) on node 0.
fn launch(job: u64, run: u32, ranks: &[(u32, u32)], stopped: bool) -> ToNode {
    ToNode::Launch(Launch {
        mem: None,
        job: JobId(job),
        size: ranks.len() as u32,
        cmd: vec!["/bin/prog".into(), "arg".into()],
        cwd: "/home/ann/run".into(),
        env: vec![("COSCHED_JOB_NAME".into(), "prog".into())],
        io: JobIo::default(),
        stopped,
        uid: None,
        gid: None,
        placement: vec![Placement {
            node: NodeId(0),
            ranks: ranks.to_vec(),
            extra_pes: Vec::new(),
        }],
        run,
        within: None,
    })
}

/// The messages sent up (alone or gathered with other nodes').
fn ups(fx: &[Effect]) -> Vec<FromNode> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Up(m) | Effect::Gather { msg: m, .. } => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// The freeze of launch `launch` of `job`, launched stopped in a cgroup, has landed.
fn launch_frozen(job: u64, launch: u64) -> Input {
    Input::Frozen {
        job: JobId(job),
        launch,
    }
}

/// The run-state changes sent up, in order, whatever messages carried them.
fn run_changes(fx: &[Effect]) -> Vec<RunChange> {
    ups(fx)
        .into_iter()
        .flat_map(|m| match m {
            FromNode::Runs { changes, .. } => changes,
            _ => Vec::new(),
        })
        .collect()
}

/// The signals sent, as (process group, signal).
fn signals(fx: &[Effect]) -> Vec<(i32, i32)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Signal { pgid, sig } => Some((*pgid, *sig)),
            _ => None,
        })
        .collect()
}

/// The rank exits sent up, as (job, run, rank, code).
fn exits(fx: &[Effect]) -> Vec<(u64, u32, u32, Option<i32>)> {
    ups(fx)
        .into_iter()
        .filter_map(|m| match m {
            FromNode::Exited { job, run, exit } => Some((job.0, run, exit.rank, exit.code)),
            _ => None,
        })
        .collect()
}

/// A rank's exit with `code`.
fn exit(rank: u32, code: i32) -> RankExit {
    RankExit {
        oom: false,
        rank,
        code: Some(code),
        error: None,
    }
}

/// The ranks whose processes may run after these effects, given which did before: a new
/// process runs; a rank runs when its group got SIGCONT last, or its job's cgroup was thawed
/// last.
fn runnable(n: &Node, fx: &[Effect], before: &BTreeSet<(JobId, u32)>) -> BTreeSet<(JobId, u32)> {
    let mut now = before.clone();
    for e in fx {
        match e {
            Effect::Spawn(s) => {
                now.insert((s.job, s.rank));
            }
            Effect::Signal { pgid, sig } => {
                let Some(&rank) = n.pids.get(pgid) else {
                    continue;
                };
                match *sig {
                    libc::SIGSTOP => now.remove(&rank),
                    libc::SIGCONT => now.insert(rank),
                    _ => continue,
                };
            }
            Effect::Cgroup { job, op, .. } => {
                let ranks = n.pids.values().filter(|(j, _)| j == job).copied();
                match op {
                    super::core::CgroupOp::Freeze => {
                        for r in ranks {
                            now.remove(&r);
                        }
                    }
                    super::core::CgroupOp::Thaw => now.extend(ranks),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    now
}

/// The jobs of these ranks.
fn jobs(ranks: &BTreeSet<(JobId, u32)>) -> BTreeSet<JobId> {
    ranks.iter().map(|(j, _)| *j).collect()
}
