//! What a submission is made of: the job's options and command (or batch script) turned into
//! a request, with the file `--bcast` stages for it; shared by `submit`, `run` and `sbatch`.

use std::path::PathBuf;

use anyhow::Context;
use cosched_client::bcast::Staging;
use cosched_client::client::Client;
use cosched_proto::config::parse_bytes;
use cosched_proto::jobio;
use cosched_proto::proto::{JobIo, Scope, SubmitRequest};

use super::batch::{self, JobOpts};
use super::conn::{ConnArgs, current_uid};

#[derive(clap::Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub(crate) job: JobOpts,
    #[command(flatten)]
    pub(crate) conn: ConnArgs,
    /// Broadcast FILE to every node first and run the staged copies: argv[0] of the command
    /// is replaced by the node's copy (the command may then be left out: FILE alone runs)
    #[arg(long, value_name = "FILE")]
    pub(crate) bcast: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) bcast_opts: BcastOpts,
    /// The program and its arguments (a `--` before them is optional), or a batch script
    /// (a file beginning with #!) and its arguments
    #[arg(trailing_var_arg = true, required_unless_present = "bcast")]
    pub(crate) cmd: Vec<String>,
}

/// How a file is broadcast (`cosched bcast`, `cosched submit --bcast`).
#[derive(clap::Args, Clone)]
pub struct BcastOpts {
    /// Chunk size of a file broadcast (bytes, or with K, M; at most 1984K)
    #[arg(long, default_value = "512K", value_parser = parse_bytes)]
    pub(crate) chunk: u64,
    /// Chunks of a file broadcast in flight (the sender reuses a slot once every node holds
    /// its chunk)
    #[arg(long, default_value_t = cosched_proto::bcast::DEFAULT_SLOTS)]
    pub(crate) slots: u32,
}

/// Broadcasts `file` with `opts` (to `nodes`, or all), staged as `staging` says.
pub(crate) fn bcast_file(
    client: &Client,
    file: &std::path::Path,
    staging: &Staging,
    opts: &BcastOpts,
    nodes: &[String],
) -> anyhow::Result<cosched_client::bcast::Sent> {
    let chunk = u32::try_from(opts.chunk).unwrap_or(u32::MAX);
    Ok(cosched_client::bcast::send_file(
        client, file, staging, chunk, opts.slots, nodes,
    )?)
}

/// `submit --bcast FILE` (and `run --bcast`): the copy staged for this job alone, and the
/// command line that runs it (argv\[0\] replaced, or FILE alone when there is no command).
pub(crate) fn bcast_for_job(
    conn: &ConnArgs,
    client: &Client,
    file: &std::path::Path,
    opts: &BcastOpts,
    cmd: &mut Vec<String>,
) -> anyhow::Result<cosched_client::bcast::Sent> {
    let sent = bcast_file(client, file, &conn.staging(None, Scope::Job), opts, &[])?;
    let staged = format!("{}{}", cosched_proto::bcast::STAGED_PREFIX, sent.dest);
    match cmd.first_mut() {
        Some(c0) => *c0 = staged,
        None => cmd.push(staged),
    }
    Ok(sent)
}

/// The submission of a command, or of a batch script with its directives (the command
/// line's options win over them). The warnings of Slurm options cosched ignores go to
/// stderr; `COSCHED_SLURM_STRICT=1` refuses them instead.
pub(crate) fn submit_request(cli: JobOpts, mut cmd: Vec<String>) -> anyhow::Result<SubmitRequest> {
    let mut opts = cli;
    let mut default_name = None;
    if let Some(first) = cmd.first().cloned()
        && batch::is_script(std::path::Path::new(&first))
    {
        let strict = cosched_slurm::options::strict_from_env(
            std::env::var("COSCHED_SLURM_STRICT").ok().as_deref(),
        );
        let script =
            batch::read_script(std::path::Path::new(&first), strict).map_err(anyhow::Error::msg)?;
        for w in &script.slurm.warnings {
            eprintln!("{w}");
        }
        opts = opts.or(script.opts);
        let path = std::fs::canonicalize(&first).with_context(|| format!("finding {first}"))?;
        default_name = path.file_name().map(|f| f.to_string_lossy().into_owned());
        // Run through its interpreter, as sbatch does: the script needs no execute bit.
        let mut full = script.interpreter;
        full.push(path.display().to_string());
        full.extend(cmd.drain(1..));
        cmd = full;
    }
    request_of(&opts, cmd, default_name)
}

/// The submission of `cmd` with `opts` (a script already resolved into its interpreter and
/// path); `default_name` names the job when `opts` do not.
pub(crate) fn request_of(
    opts: &JobOpts,
    cmd: Vec<String>,
    default_name: Option<String>,
) -> anyhow::Result<SubmitRequest> {
    let cpus = opts.cpus().map_err(anyhow::Error::msg)?;
    // The job holds each rank's PEs.
    let procs = opts
        .ranks()
        .map_err(anyhow::Error::msg)?
        .checked_mul(cpus)
        .ok_or_else(|| anyhow::anyhow!("-n × --cpus-per-task={cpus} is too many PEs"))?;
    let export = opts.export.clone().unwrap_or_else(|| "ALL".into());
    let mut env =
        jobio::parse_export(&export, &jobio::current_environ()).map_err(anyhow::Error::msg)?;
    if let Some(c) = opts.cpus_per_task {
        env.retain(|(k, _)| k != cosched_slurm::env::CPUS_PER_TASK);
        env.push((cosched_slurm::env::CPUS_PER_TASK.into(), c.to_string()));
    }
    if opts.monitor {
        preload_shim(&mut env)?;
    }
    let cwd = match &opts.chdir {
        Some(d) => std::env::current_dir().unwrap_or_default().join(d),
        None => std::env::current_dir().unwrap_or_default(),
    };
    Ok(SubmitRequest {
        procs,
        time_limit_us: opts.time.map(|d| d.as_micros()),
        class: opts.class.clone(),
        name: opts.name.clone().or(default_name),
        cmd,
        cwd: cwd.display().to_string(),
        user: Some(current_uid()),
        io: JobIo {
            env: Some(env),
            output: opts.output.clone(),
            error: opts.error.clone(),
            array: None,
            mpi: opts.mpi.unwrap_or_default(),
            batch: false,
            signal: opts.signal,
            append: opts.append.unwrap_or(false),
        },
        sched: opts.schedule(),
        layout: opts.layout().map_err(anyhow::Error::msg)?,
        hold: opts.hold,
        mem: opts.mem_limit(),
    })
}

/// `submit --monitor`: the PMPI shim goes first in the ranks' LD_PRELOAD. It is
/// `$COSCHED_MPISHIM`, else beside the binary (`cargo build` puts it there), else in the
/// package's library directory (`/usr/bin/cosched` → `/usr/lib/cosched/`).
fn preload_shim(env: &mut Vec<(String, String)>) -> anyhow::Result<()> {
    const NAME: &str = "libcosched_mpishim.so";
    let candidates: Vec<PathBuf> = match std::env::var_os("COSCHED_MPISHIM") {
        Some(p) => vec![PathBuf::from(p)],
        None => {
            let exe = std::env::current_exe()?;
            let bin = exe.parent().unwrap_or(std::path::Path::new("."));
            vec![bin.join(NAME), bin.join("../lib/cosched").join(NAME)]
        }
    };
    let Some(shim) = candidates.iter().find(|p| p.is_file()) else {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "--monitor: {NAME} not found at {} (`cargo build --release` builds it beside the cosched binary; the package installs it in /usr/lib/cosched; or set COSCHED_MPISHIM)",
            tried.join(" nor ")
        );
    };
    let shim = shim.canonicalize()?.display().to_string();
    let old = env
        .iter()
        .position(|(k, _)| k == "LD_PRELOAD")
        .map(|i| env.remove(i).1);
    let value = match old {
        Some(o) if !o.is_empty() => format!("{shim}:{o}"),
        _ => shim,
    };
    env.push(("LD_PRELOAD".into(), value));
    Ok(())
}
