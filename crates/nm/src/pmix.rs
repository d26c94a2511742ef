//! PMIx for a job's ranks, as the core decides it: one helper process per job per node
//! (`cosched pmix-helper`, [`cosched_pmix::helper`]), started as the job's user before any
//! of the job's ranks, holding OpenPMIx's server for them (docs/daemons.md, "PMIx").
//!
//! 1. Once a launch is prepared, [`Effect::StartHelper`] asks the shell to start the helper
//!    with the job's layout; the shell answers with [`Input::HelperReady`] when the helper is
//!    ready (seconds, at worst): each local rank's PMIx environment, or why there is none.
//!    Only then are the ranks spawned, with it. Meanwhile the core sets the launch aside
//!    ([`super::launch`]): the node's other launches, signals and fences go on.
//! 2. The helper's fences of a job on several nodes go up the tree on the PMI-1 fence path
//!    (numbered from [`FENCE_BASE`], each node's contribution under its own key, combined
//!    with the other nodes' at every hop); the
//!    machine manager's answer goes back to the helper as the concatenation.
//! 3. `MPI_Abort` ([`FromHelper::Abort`]) is remembered and given as the aborting rank's
//!    error when it exits, so the job fails naming the rank, the node and the status; the
//!    machine manager then kills the other ranks, as for any rank exiting non-zero. The
//!    rank is answered before the helper's line is written, so its exit may come first: a
//!    failed exit of a PMIx job's rank is held up to [`ABORT_GRACE`] for its abort.
//! 4. A direct modex (a rank's `PMIx_Get` of a remote rank's key the fence did not bring)
//!    goes through the machine manager to the node of that rank, whose helper gives the
//!    rank's data, and back ([`NmCore::modex_give`], [`NmCore::modex_have`]).
//! 5. The ranks' name requests (`PMIx_Publish`, `Lookup`, `Unpublish`) go to the machine
//!    manager's name service ([`super::names`]) and its answers back to the helper.
//! 6. A helper that exits while the job's ranks run (not because the job is being killed)
//!    ends the job, saying so: the ranks could not finish their start-up or fences without it.

use std::collections::BTreeMap;

use cosched_core::{Dur, JobId, NodeId, Time};
use cosched_pmix::helper::{FromHelper, RankEnvs, Setup, ToHelper, nspace};

use super::core::{Effect, ExitNote, Level, NmCore};
use super::launch::{BaseEnv, RankSpec};
use super::names::Asker;
use cosched_proto::jobio::Mpi;
use cosched_proto::proto::*;

/// PMIx fence `n` of a job travels as PMI fence `FENCE_BASE + n`: the machine manager
/// gathers both kinds alike, and a job speaks one of the two.
pub const FENCE_BASE: u64 = 1 << 32;

/// How long a failed exit of a PMIx job's rank waits for the helper's word of its abort.
pub const ABORT_GRACE: Dur = Dur::from_millis(250);

/// Start a job's helper; answer with [`Input::HelperReady`](super::core::Input::HelperReady).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartHelper {
    /// The helper process, started as a rank is (the job's user, its cgroup, a CPU of the
    /// job's, `PMI_FD` its socket), its output in the job's directory.
    pub spec: RankSpec,
    /// The first line it is sent.
    pub setup: Setup,
}

/// What a job on this node has of PMIx.
#[derive(Clone, Debug, Default)]
pub(super) struct JobPmix {
    /// Each local rank's PMIx environment.
    pub(super) envs: BTreeMap<u32, Vec<(String, String)>>,
    /// Failed exits waiting (until the time) for the rank's abort: (until, launch, exit).
    pub(super) held: Vec<(Time, u64, RankExit)>,
}

/// Lower-case hexadecimal: a fence's bytes as the value of a PMI key.
fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl NmCore {
    /// After a launch is prepared: asks for the job's helper when its ranks get PMIx here.
    /// Returns whether it did (the ranks then wait for [`NmCore::helper_ready`]).
    pub(super) fn start_helper(&mut self, job: JobId) -> bool {
        let Some(ln) = &self.launching else {
            return false;
        };
        let l = &ln.l;
        let wanted = match l.io.mpi {
            Mpi::Pmix => true,
            Mpi::Auto => l.size > 1,
            Mpi::Pmi1 | Mpi::None => false,
        };
        let Ok(creds) = &ln.run_as else {
            // The ranks cannot run here; they fail with the reason.
            return false;
        };
        if !wanted {
            return false;
        }
        let Some(exe) = self.cfg.pmix_helper.clone() else {
            let why = "this node manager cannot start a PMIx server (cosched pmix-helper)";
            if l.io.mpi == Mpi::Pmix {
                self.launching.as_mut().expect("checked").run_as = Err(why.into());
            }
            return false;
        };
        let me = self.id.map_or(0, |n| n.0);
        let nodes: Vec<(String, Vec<u32>)> = l
            .placement
            .iter()
            .map(|p| {
                let ranks = p.ranks.iter().map(|&(r, _)| r).collect();
                (format!("node{}", p.node.0), ranks)
            })
            .collect();
        let dir = self.job_dir(job);
        let first_pe = ln.ranks.first().map_or(0, |&(_, pe)| pe);
        let cpu = self.cfg.cpu_of(first_pe);
        let spec = RankSpec {
            job,
            launch: ln.launch,
            rank: u32::MAX,
            argv: vec![exe.display().to_string(), "pmix-helper".into()],
            cwd: dir.clone(),
            base_env: BaseEnv::Inherit,
            remove_env: Vec::new(),
            env: Vec::new(),
            pmi_env: Vec::new(),
            cpus: vec![cpu],
            creds: creds.clone(),
            cgroup: self.jobs.get(&job).is_some_and(|j| j.cgroup),
            path_first: None,
            out: dir.join("pmix-helper.log"),
            err: None,
            append: false,
        };
        let setup = Setup {
            nspace: nspace(job),
            job_id: job.0.to_string(),
            host: format!("node{me}"),
            nodes,
            dir: dir.join("pmix"),
            oversubscribed: ln.ranks.len() > self.cfg.cpus.len(),
            universe: self.jobs.get(&job).map_or(l.size, |j| j.pmi.universe()),
        };
        self.push(Effect::StartHelper(Box::new(StartHelper { spec, setup })));
        true
    }

    /// The shell's answer to [`Effect::StartHelper`]: the ranks start, with their PMIx
    /// environment; without one, under `--mpi=pmix` they fail with the reason, else they
    /// start with PMI-1 alone.
    pub(super) fn helper_ready(
        &mut self,
        now: Time,
        job: JobId,
        launch: u64,
        result: Result<RankEnvs, String>,
    ) {
        let Some(at) = self
            .helper_waits
            .iter()
            .position(|ln| ln.l.job == job && ln.launch == launch)
        else {
            return;
        };
        let mut ln = self.helper_waits.remove(at);
        if self.jobs.get(&job).is_none_or(|j| j.launch != launch) {
            // Forgotten while its helper started: nothing of it is left to run.
            self.setup_dropped(&ln);
            return;
        }
        match result {
            Ok(envs) => {
                if let Some(j) = self.jobs.get_mut(&job) {
                    j.pmix.envs = envs.into_iter().collect();
                }
            }
            Err(why) => {
                let why = format!("the job's PMIx server could not start: {why}");
                if ln.l.io.mpi == Mpi::Pmix {
                    // A kill's reason, set while the helper started, stays.
                    if ln.run_as.is_ok() {
                        ln.run_as = Err(why);
                    }
                } else {
                    self.log(
                        Level::Warn,
                        format!("job {job}: {why}; its ranks get PMI-1 alone"),
                    );
                }
            }
        }
        self.resumable.push_back(ln);
        self.next_launch(now);
    }

    /// A line of a job's helper.
    pub(super) fn helper_said(&mut self, now: Time, job: JobId, launch: u64, msg: FromHelper) {
        let Some(j) = self.jobs.get_mut(&job).filter(|j| j.launch == launch) else {
            return;
        };
        match msg {
            FromHelper::Fence { seq, data } => {
                let key = format!("pmix.{:010}", self.id.map_or(0, |n| n.0));
                self.fence_up(job, FENCE_BASE + seq, vec![(key, hex(&data))]);
            }
            FromHelper::Abort {
                rank,
                status,
                message,
            } => {
                // The rank exits on its own once its abort is acknowledged, with `status`.
                self.aborted(job, rank, status, &message, false);
                let held: Vec<(Time, u64, RankExit)> = self
                    .jobs
                    .get_mut(&job)
                    .map(|j| {
                        j.pmix
                            .held
                            .extract_if(.., |(_, _, e)| e.rank == rank)
                            .collect()
                    })
                    .unwrap_or_default();
                for (_, launch, exit) in held {
                    let exit = self.explained(job, exit);
                    self.exit_taken(now, job, launch, exit);
                }
            }
            FromHelper::Refused { rank, explain } => {
                // The rank's error output tells its user why the call failed; the library's
                // own error code says only that it did.
                let file = rank.and_then(|r| j.ranks.get(&r)?.files.last().cloned());
                let must_own = j.must_own;
                let who = rank.map_or_else(|| "a tool".into(), |r| format!("rank {r}"));
                if let Some(path) = file {
                    let text = format!("cosched: {who}: {explain}\n");
                    self.push(Effect::AppendOutput {
                        path,
                        text,
                        must_own,
                    });
                }
                self.log(Level::Warn, format!("job {job} {who}: {explain}"));
            }
            FromHelper::Connected { rank } => j.worlds.reached(rank),
            FromHelper::Want { tag, rank } => {
                let run = j.run;
                self.up(FromNode::ModexWant {
                    job,
                    run,
                    rank,
                    req: tag,
                });
            }
            FromHelper::Given { from, req, data } => {
                let run = j.run;
                self.modex_answer((job, run), NodeId(from), req, data);
            }
            FromHelper::Names { tag, rank, request } => {
                self.ask_names(job, rank, request, Asker::Helper { tag });
            }
            FromHelper::Ready { .. } => {}
            FromHelper::Failed { why } => {
                self.log(Level::Warn, format!("job {job}: PMIx helper: {why}"));
            }
        }
    }

    /// The machine manager's answer to a PMIx fence of `job`: every node's contribution, in
    /// the order of their keys.
    pub(super) fn pmix_fence_done(&mut self, job: JobId, seq: u64, kvs: Vec<(String, String)>) {
        if !self.jobs.contains_key(&job) {
            return;
        }
        let mut parts: Vec<(String, String)> = kvs;
        parts.sort();
        let mut data = Vec::new();
        for (key, value) in &parts {
            match unhex(value) {
                Some(d) => data.extend(d),
                None => {
                    self.log(
                        Level::Warn,
                        format!("job {job}: PMIx fence {seq}: {key} is not hexadecimal"),
                    );
                    let msg = ToHelper::FenceFailed { seq };
                    self.push(Effect::ToHelper { job, msg });
                    return;
                }
            }
        }
        let msg = ToHelper::FenceDone { seq, data };
        self.push(Effect::ToHelper { job, msg });
    }

    /// Node `from` wants the data of local rank `rank` of `job` (its direct modex `req`): the
    /// job's helper gives it, or the request fails at once when the job has none here.
    pub(super) fn modex_give(&mut self, job: JobId, rank: u32, from: NodeId, req: u64) {
        match self.jobs.get(&job) {
            Some(j) if j.pmix.envs.contains_key(&rank) => {
                let msg = ToHelper::Give {
                    from: from.0,
                    req,
                    rank,
                };
                self.push(Effect::ToHelper { job, msg });
            }
            j => {
                let run = j.map_or(0, |j| j.run);
                let data = Err(cosched_pmix::Status::NOT_FOUND.0);
                self.modex_answer((job, run), from, req, data);
            }
        }
    }

    /// This node's answer to node `to`'s direct modex `req`, up to the machine manager.
    fn modex_answer(
        &mut self,
        (job, run): (JobId, u32),
        to: NodeId,
        req: u64,
        data: Result<Vec<u8>, i32>,
    ) {
        self.up(FromNode::ModexHave {
            job,
            run,
            to,
            req,
            data,
        });
    }

    /// Another node's answer to the helper's direct modex `req`.
    pub(super) fn modex_have(&mut self, job: JobId, req: u64, data: Result<Vec<u8>, i32>) {
        if self.jobs.contains_key(&job) {
            let msg = ToHelper::Have { tag: req, data };
            self.push(Effect::ToHelper { job, msg });
        }
    }

    /// A job's helper exited with `code`: while ranks of the job still run and the job is
    /// not being killed, the job ends, each running rank's exit saying why.
    pub(super) fn helper_exited(&mut self, now: Time, job: JobId, launch: u64, code: i32) {
        let killing = self.kills.iter().any(|k| k.job == job);
        let Some(j) = self.jobs.get_mut(&job).filter(|j| j.launch == launch) else {
            return;
        };
        let running: Vec<u32> = j
            .ranks
            .iter()
            .filter(|(_, r)| r.exit.is_none() && r.pgid > 0)
            .map(|(&rank, _)| rank)
            .collect();
        if running.is_empty() || killing {
            return;
        }
        let why = format!(
            "the job's PMIx server (cosched pmix-helper) exited with code {code} while its ranks ran; see pmix-helper.log in the job's directory on the node"
        );
        for rank in running {
            j.notes
                .entry(rank)
                .or_insert_with(|| ExitNote::said(why.clone()));
        }
        self.log(Level::Warn, format!("job {job}: {why}; ending the job"));
        self.terminate(now, job);
    }

    /// Holds a failed exit of a rank of a job with PMIx, not being killed, that says nothing
    /// more than its code: its abort may be on its way. Returns the exit when not held.
    pub(super) fn hold_for_abort(
        &mut self,
        now: Time,
        job: JobId,
        launch: u64,
        exit: RankExit,
    ) -> Option<RankExit> {
        let killing = self.kills.iter().any(|k| k.job == job);
        match self.jobs.get_mut(&job) {
            Some(j)
                if j.launch == launch
                    && !j.pmix.envs.is_empty()
                    && exit.error.is_none()
                    && exit.code != Some(0)
                    && !killing =>
            {
                j.pmix.held.push((now + ABORT_GRACE, launch, exit));
                None
            }
            _ => Some(exit),
        }
    }

    /// When the first held exit is due.
    pub(super) fn held_until(&self) -> Option<Time> {
        self.jobs
            .values()
            .flat_map(|j| j.pmix.held.iter().map(|h| h.0))
            .min()
    }

    /// Takes in the held exits that are due.
    pub(super) fn release_held(&mut self, now: Time) {
        let mut due = Vec::new();
        for (&job, j) in &mut self.jobs {
            due.extend(
                j.pmix
                    .held
                    .extract_if(.., |h| h.0 <= now)
                    .map(|(_, launch, exit)| (job, launch, exit)),
            );
        }
        for (job, launch, exit) in due {
            self.exit_taken(now, job, launch, exit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_bytes_survive_hex_and_odd_or_bad_digits_are_refused() {
        let data = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(hex(&data), "00017f80ff");
        assert_eq!(unhex("00017f80ff").as_deref(), Some(&data[..]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
