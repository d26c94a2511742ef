//! `sbatch`: a batch script (a file, `--wrap CMD`, or standard input) submitted with Slurm's
//! options from the command line and its `#SBATCH` lines, both read with Slurm's option
//! table (`cosched_slurm::options`) and mapped onto cosched's job options
//! (`batch::from_slurm`). It prints `Submitted batch job N` (`--parsable`: `N`), writes the
//! job's output to `slurm-%j.out` (arrays `slurm-%A_%a.out`) in the working directory unless
//! `-o`, and with `--wait` exits with the job's exit code.
//!
//! Each option cosched ignores or has not built is one warning line; `--strict` or
//! `COSCHED_SLURM_STRICT=1` refuses them. The job is an allocation: the script runs once, on
//! its first node, and `srun` in it starts steps on the allocation's PEs.

use std::io::Read;
use std::time::Duration;

use cosched_core::JobId;
use cosched_proto::jobio;
use cosched_proto::proto::{JobInfo, JobState};
use cosched_slurm::env::{Submission, submit_env};
use cosched_slurm::options::{Cmd, Parsed};

use super::view;
use crate::cmd::batch::{self, JobOpts};
use crate::cmd::daemon::request_of;

/// Why sbatch stops, and its exit status.
struct Stop(i32);

fn error(msg: impl std::fmt::Display) -> Stop {
    eprintln!("sbatch: error: {msg}");
    Stop(1)
}

pub fn run(args: Vec<String>) -> i32 {
    match submit(&args) {
        Ok(code) | Err(Stop(code)) => code,
    }
}

/// Options from the command line; getopt's errors end sbatch with status 255 as Slurm's.
fn parse_cli(args: &[String]) -> Result<(Parsed, bool), Stop> {
    super::parse_options(Cmd::Sbatch, args, 255).map_err(Stop)
}

/// The script to run: its command, default job name, and directives.
struct Source {
    cmd: Vec<String>,
    name: String,
    opts: JobOpts,
    slurm: Parsed,
}

/// Interpreters that take a script's text with `-c` (a script on standard input).
const TAKES_DASH_C: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "python", "python3"];

fn source(cli: &Parsed, strict: bool) -> Result<Source, Stop> {
    if let Some(wrap) = cli.value("wrap") {
        if !cli.rest.is_empty() {
            return Err(error("Script arguments not permitted with --wrap option"));
        }
        return Ok(Source {
            cmd: vec!["/bin/sh".into(), "-c".into(), wrap.to_string()],
            name: "wrap".into(),
            opts: JobOpts::default(),
            slurm: Parsed::default(),
        });
    }
    let not_a_script = || {
        error(
            "This does not look like a batch script.  The first line must start with #! \
             followed by the path to an interpreter.",
        )
    };
    match cli.rest.split_first() {
        Some((path, args)) => {
            let p = std::path::Path::new(path);
            if std::fs::File::open(p).is_err() {
                return Err(error(format!("Unable to open file {path}")));
            }
            if !batch::is_script(p) {
                return Err(not_a_script());
            }
            let script = batch::read_script(p, strict).map_err(error)?;
            let full = std::fs::canonicalize(p).map_err(|e| error(format!("{path}: {e}")))?;
            let mut cmd = script.interpreter;
            cmd.push(full.display().to_string());
            cmd.extend(args.iter().cloned());
            Ok(Source {
                cmd,
                name: full
                    .file_name()
                    .map_or_else(|| "sbatch".into(), |f| f.to_string_lossy().into_owned()),
                opts: script.opts,
                slurm: script.slurm,
            })
        }
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| error(format!("reading the script from standard input: {e}")))?;
            if !text.starts_with("#!") {
                return Err(not_a_script());
            }
            let script = batch::parse_script("(standard input)", &text, strict).map_err(error)?;
            let prog = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
            let interp = match script.interpreter.as_slice() {
                [env, prog_arg] if prog(env) == "env" => prog(prog_arg),
                [first, ..] => prog(first),
                [] => String::new(),
            };
            if !TAKES_DASH_C.contains(&interp.as_str()) {
                return Err(error(format!(
                    "a script on standard input runs only through {} (with -c); give the script as a file",
                    TAKES_DASH_C.join(", ")
                )));
            }
            let mut cmd = script.interpreter;
            cmd.extend(["-c".to_string(), text, "sbatch".to_string()]);
            Ok(Source {
                cmd,
                name: "sbatch".into(),
                opts: script.opts,
                slurm: script.slurm,
            })
        }
    }
}

fn submit(args: &[String]) -> Result<i32, Stop> {
    let (cli, strict) = parse_cli(args)?;
    if cli.has("help") || cli.has("usage") {
        println!(
            "Usage: sbatch [OPTIONS...] script [args...]\n\
             cosched answers to Slurm's sbatch: every option of Slurm 22.05 is known; what \
             cosched does with each is in docs/slurm.md (`--strict` refuses those it ignores)."
        );
        return Ok(0);
    }
    let src = source(&cli, strict)?;
    // The command line wins over the script's directives.
    let all = cli.clone().over(src.slurm);
    let mut opts = batch::from_slurm(&cli).map_err(error)?.or(src.opts);
    let quiet = all.has("quiet");
    let warnings = all.warnings.clone();
    for w in &warnings {
        eprintln!("{w}");
    }

    let uid = view::my_uid();
    let user = view::user_name(uid);
    let name = opts.name.clone().unwrap_or_else(|| src.name.clone());
    let array = opts.array.as_ref().map(|a| a.indices.clone());
    let default_out = if array.is_some() {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    };
    opts.output = Some(jobio::expand_at_submission(
        opts.output.as_deref().unwrap_or(default_out),
        &name,
        &user,
    ));
    opts.error = opts
        .error
        .as_deref()
        .map(|e| jobio::expand_at_submission(e, &name, &user));
    opts.name = Some(name);
    let mut req = request_of(&opts, src.cmd, None).map_err(|e| error(format!("{e:#}")))?;
    // An allocation: the script runs once, on its first node; `srun` in it starts steps.
    req.io.batch = true;
    let slurm_vars = submit_env(&Submission {
        submit_dir: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        submit_host: view::host_name(),
        cluster: cosched_slurm::DEFAULT_CLUSTER.into(),
        // The machine manager sets the partition the job runs in (the default's name
        // without -p) when it starts.
        partition: opts
            .partition
            .clone()
            .unwrap_or_else(|| cosched_slurm::DEFAULT_PARTITION.into()),
        user,
        uid,
        gid: cosched_proto::util::egid(),
        cpus_per_task: opts.cpus_per_task,
        ntasks_per_node: opts.ntasks_per_node,
        array: array.clone(),
    });
    let env = req.io.env.get_or_insert_with(Vec::new);
    env.retain(|(k, _)| !slurm_vars.iter().any(|(s, _)| s == k));
    env.extend(slurm_vars);
    // The script itself runs without PMI; its `--mpi` is its steps' default, which `srun`
    // reads from SLURM_MPI_TYPE (as Slurm's does).
    if let Some(mpi) = opts.mpi {
        env.retain(|(k, _)| k != "SLURM_MPI_TYPE");
        env.push(("SLURM_MPI_TYPE".into(), mpi.name().into()));
    }

    let client = super::client().map_err(error)?;
    let count = array.as_ref().map_or(1, Vec::len) as u64;
    let id = client
        .submit(req)
        .map_err(|e| error(format!("Batch job submission failed: {e}")))?;
    if all.has("parsable") {
        println!("{id}");
    } else if !quiet {
        println!("Submitted batch job {id}");
    }
    if !all.has("wait") {
        return Ok(0);
    }
    let ids: Vec<JobId> = (id.0..id.0 + count).map(JobId).collect();
    let jobs = wait(&client, &ids).map_err(|e| error(format!("waiting for job {id}: {e}")))?;
    Ok(jobs.iter().map(exit_status).max().unwrap_or(0))
}

/// Polls until every job has ended (every 0.1 s at first, then at most every 2 s).
fn wait(
    client: &cosched_client::client::Client,
    ids: &[JobId],
) -> Result<Vec<JobInfo>, cosched_proto::DaemonError> {
    let mut pause = Duration::from_millis(100);
    loop {
        let jobs = client.jobs(ids)?;
        if jobs.iter().all(|j| j.state.is_final()) {
            return Ok(jobs);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// `sbatch --wait`'s status for a job: its exit code, 1 when it ended otherwise (a signal,
/// its limit, a cancel, a lost node).
fn exit_status(j: &JobInfo) -> i32 {
    match (j.state, j.record.exit_code) {
        (JobState::Completed | JobState::Failed, Some(c)) => c,
        (JobState::Completed, None) => 0,
        _ => 1,
    }
}
