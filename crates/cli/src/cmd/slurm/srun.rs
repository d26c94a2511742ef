//! `srun`: inside an allocation (`SLURM_JOB_ID` set, or `--jobid`), a step of it — the
//! machine manager places the step's tasks on the allocation's PEs and the node managers
//! start them in the allocation's cgroup; `srun` relays their output to its own standard
//! output and error (so in a batch script it lands in `slurm-%j.out`), unless `--output`
//! sends it to files, and exits with the highest exit code of the tasks, as Slurm's does.
//! Outside an allocation, an allocation with one step, run from the terminal as `cosched
//! run` runs a job.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use cosched_client::client::Client;
use cosched_core::JobId;
use cosched_mm::steps::STEP_BUSY;
use cosched_proto::jobio;
use cosched_proto::proto::{JobState, Request, StepInfo, StepRequest};
use cosched_slurm::options::{Cmd, Parsed};

use crate::cmd::batch;
use crate::cmd::interactive::{self, Stream};

/// Why srun stops, and its exit status.
struct Stop(i32);

fn error(msg: impl std::fmt::Display) -> Stop {
    eprintln!("srun: error: {msg}");
    Stop(1)
}

pub fn run(args: Vec<String>) -> i32 {
    match srun(&args) {
        Ok(code) | Err(Stop(code)) => code,
    }
}

fn parse(args: &[String]) -> Result<Parsed, Stop> {
    super::parse_options(Cmd::Srun, args, 1)
        .map(|(p, _)| p)
        .map_err(Stop)
}

fn srun(args: &[String]) -> Result<i32, Stop> {
    let p = parse(args)?;
    if p.has("help") || p.has("usage") {
        println!(
            "Usage: srun [OPTIONS...] executable [args...]\n\
             cosched answers to Slurm's srun: inside an allocation it starts a step, outside \
             one it runs a job from the terminal; what cosched does with each option is in \
             docs/slurm.md."
        );
        return Ok(0);
    }
    if p.rest.is_empty() {
        return Err(error("No command given to execute."));
    }
    if !p.has("quiet") {
        for w in &p.warnings {
            eprintln!("{w}");
        }
    }
    let opts = batch::from_slurm(&p).map_err(error)?;
    let client = super::client().map_err(error)?;
    let job = match p.value("jobid") {
        Some(j) => Some(j.to_string()),
        None => std::env::var("SLURM_JOB_ID")
            .or_else(|_| std::env::var("SLURM_JOBID"))
            .ok(),
    };
    let Some(job) = job else {
        // Outside an allocation: one of its own, with one step, from the terminal.
        let req = crate::cmd::daemon::request_of(&opts, p.rest.clone(), None)
            .map_err(|e| error(format!("{e:#}")))?;
        return interactive::follow(&client, req, p.has("label")).map_err(error);
    };
    let job = JobId(
        job.trim()
            .parse()
            .map_err(|_| error(format!("Invalid job id {job:?} (SLURM_JOB_ID, --jobid)")))?,
    );
    let req = step_request(job, &p, &opts)?;
    let relay = req.io.output.is_none();
    let step = start(&client, req, p.has("quiet"))?;
    wait(&client, job, step, p.has("label"), relay)
}

/// The step `p` asks of job `job`.
fn step_request(job: JobId, p: &Parsed, opts: &batch::JobOpts) -> Result<StepRequest, Stop> {
    let env_num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    let placed = opts.nodes.is_some() || opts.ntasks_per_node.is_some() || p.has("nodelist");
    // As Slurm's srun, the allocation's task count is the default (SLURM_NTASKS, which
    // sbatch's environment holds), unless the step says where its tasks go.
    let ntasks = opts
        .ntasks
        .or_else(|| (!placed).then(|| env_num("SLURM_NTASKS")).flatten());
    let nodelist = match p.value("nodelist") {
        None => Vec::new(),
        Some(l) => {
            cosched_slurm::hostlist::expand(l).map_err(|e| error(format!("--nodelist={l}: {e}")))?
        }
    };
    let export = opts.export.clone().unwrap_or_else(|| "ALL".into());
    let env = jobio::parse_export(&export, &jobio::current_environ()).map_err(error)?;
    let cwd = std::env::current_dir().unwrap_or_default();
    let cwd = match &opts.chdir {
        Some(d) => cwd.join(d),
        None => cwd,
    };
    let name = opts.name.clone().unwrap_or_else(|| {
        std::path::Path::new(&p.rest[0])
            .file_name()
            .map_or_else(|| p.rest[0].clone(), |f| f.to_string_lossy().into_owned())
    });
    let user = super::view::user_name(super::view::my_uid());
    let array = match (
        std::env::var("SLURM_ARRAY_JOB_ID").ok(),
        std::env::var("SLURM_ARRAY_TASK_ID").ok(),
    ) {
        (Some(a), Some(t)) => a.parse().ok().zip(t.parse().ok()),
        _ => None,
    };
    let pattern = |pat: &str| jobio::expand_for_step(pat, job, array, &name, &user);
    // As Slurm's srun: `--mpi`, else SLURM_MPI_TYPE (set by an sbatch `--mpi`).
    let mpi = match (opts.mpi, std::env::var("SLURM_MPI_TYPE")) {
        (Some(m), _) => m,
        (None, Ok(v)) => {
            jobio::Mpi::parse(&v).map_err(|e| error(format!("SLURM_MPI_TYPE: {e}")))?
        }
        (None, Err(_)) => jobio::Mpi::default(),
    };
    // As Slurm's srun: `-c`, else SLURM_CPUS_PER_TASK (set by an sbatch `-c`); the step's
    // tasks see the value they run with.
    let cpus_per_task = opts
        .cpus_per_task
        .or_else(|| env_num(cosched_slurm::env::CPUS_PER_TASK))
        .filter(|&c| c > 0);
    let mut env = env;
    if let Some(c) = opts.cpus_per_task {
        env.retain(|(k, _)| k != cosched_slurm::env::CPUS_PER_TASK);
        env.push((cosched_slurm::env::CPUS_PER_TASK.into(), c.to_string()));
    }
    let kill = match p.value("kill-on-bad-exit") {
        Some(v) => v.trim() != "0",
        None => p.has("kill-on-bad-exit"),
    };
    Ok(StepRequest {
        job,
        name: name.clone(),
        cmd: p.rest.clone(),
        cwd: cwd.display().to_string(),
        io: jobio::JobIo {
            env: Some(env),
            output: opts.output.as_deref().map(pattern),
            error: opts.error.as_deref().map(pattern),
            array: None,
            mpi,
            batch: false,
            // A step has no time limit of its own: the allocation's --signal is its.
            signal: None,
            append: opts.append.unwrap_or(false),
        },
        ntasks,
        nodes: opts.nodes,
        tasks_per_node: opts.ntasks_per_node,
        cpus_per_task,
        nodelist,
        overlap: p.has("overlap"),
        kill_on_bad_exit: kill,
    })
}

/// Asks for the step; while the PEs it needs are held by other steps, asks again every
/// second, as Slurm's srun does.
fn start(client: &Client, req: StepRequest, quiet: bool) -> Result<StepInfo, Stop> {
    let mut said = false;
    loop {
        match client.step(req.clone()) {
            Ok(s) => return Ok(s),
            Err(e) => {
                let text = e.to_string();
                let Some(at) = text.find(STEP_BUSY) else {
                    return Err(error(format!(
                        "Unable to create step for job {}: {text}",
                        req.job
                    )));
                };
                if !said && !quiet {
                    said = true;
                    eprintln!(
                        "srun: Job {} step creation temporarily disabled, retrying ({})",
                        req.job,
                        &text[at + STEP_BUSY.len()..]
                    );
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// SIGINTs and SIGTERMs srun received while it follows its step.
static SIGINTS: AtomicU32 = AtomicU32::new(0);
static SIGTERMED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGTERM {
        SIGTERMED.store(true, Ordering::SeqCst);
    } else {
        SIGINTS.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether the signals so far end the step, as Slurm's srun: SIGTERM, or a second SIGINT
/// within a second of the first (one alone only says so).
struct Interrupts {
    seen: u32,
    last: Option<std::time::Instant>,
}

impl Interrupts {
    fn end_step(&mut self) -> bool {
        if SIGTERMED.load(Ordering::SeqCst) {
            return true;
        }
        let n = SIGINTS.load(Ordering::SeqCst);
        if n == self.seen {
            return false;
        }
        self.seen = n;
        let now = std::time::Instant::now();
        let twice = n >= 2 && self.last.is_some_and(|t| now - t <= Duration::from_secs(1));
        if !twice {
            eprintln!("srun: interrupt (one more within 1 sec to abort)");
        }
        self.last = Some(now);
        twice
    }
}

/// Follows step `step` of `job` to its end, relaying its tasks' output when `relay`;
/// Slurm's exit status: the highest exit code of the tasks (128 + the signal for one a
/// cancel ended, 143 for SIGTERM). SIGTERM, or SIGINT twice within
/// a second, ends the step (`Request::CancelStep`), as killing Slurm's srun does.
fn wait(
    client: &Client,
    job: JobId,
    step: StepInfo,
    label: bool,
    relay: bool,
) -> Result<i32, Stop> {
    let k = step.id;
    let mut streams: Vec<(Stream, Stream)> =
        (0..step.ntasks()).map(|_| Default::default()).collect();
    let fetch = |rank: u32| client.task_output(job, Some(k), rank, false);
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to atomics, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let mut interrupts = Interrupts {
        seen: 0,
        last: None,
    };
    let mut cancelled = false;
    let st = loop {
        if !cancelled && interrupts.end_step() {
            cancelled = true;
            eprintln!("srun: Cancelling step {job}.{k}");
            if let Err(e) = client.simple(Request::CancelStep { job, step: k }) {
                eprintln!("srun: error: cancelling step {job}.{k}: {e}");
            }
        }
        let info = client
            .jobs(&[job])
            .map_err(|e| error(format!("job {job}: {e}")))?
            .pop()
            .ok_or_else(|| error(format!("job {job} vanished")))?;
        let st = info.steps.iter().find(|s| s.id == k).cloned();
        // A cancelled step's tasks are being ended: their exits, which make its record and
        // srun's status, are awaited while the allocation holds its nodes.
        let holds = matches!(info.state, JobState::Running | JobState::Suspended);
        let ended = st.as_ref().is_none_or(|s| {
            s.state.is_final()
                && (s.state != JobState::Cancelled || !holds || s.ranks.iter().all(Option::is_some))
        });
        if relay {
            interactive::poll_with(&fetch, &mut streams, label, ended);
        }
        if ended {
            break st;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let Some(st) = st else {
        return Err(error(format!("step {job}.{k} vanished")));
    };
    if let Some(e) = &st.error {
        eprintln!("srun: error: step {job}.{k}: {e}");
    }
    Ok(match (st.state, st.exit_code) {
        (JobState::Completed, _) => 0,
        (_, Some(c)) if c != 0 => c,
        _ => 1,
    })
}
