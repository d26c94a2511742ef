//! `salloc`: an allocation for a command run here — by default the user's shell — with the
//! allocation's `SLURM_*` environment, so that `srun` in it starts steps on the allocation's
//! PEs, as Slurm's `salloc` does. It says `Granted job allocation N` on standard error once
//! the job runs, and `Relinquishing job allocation N` when the command has ended, which ends
//! the allocation; its exit status is the command's.
//!
//! The allocation's own launch, on its first node, is a holder process that only keeps the
//! allocation's processes' cgroup until the allocation ends (Slurm keeps the allocation
//! without a process). salloc ends it with the command's exit status, so `sacct` shows it
//! `COMPLETED` or `FAILED` with that code, as Slurm does.

use std::time::Duration;

use cosched_client::client::Client;
use cosched_core::JobId;
use cosched_proto::proto::{JobInfo, Request};
use cosched_slurm::env::{Submission, submit_env};
use cosched_slurm::options::Cmd;

use crate::cmd::batch;

/// Why salloc stops, and its exit status.
struct Stop(i32);

fn error(msg: impl std::fmt::Display) -> Stop {
    eprintln!("salloc: error: {msg}");
    Stop(1)
}

/// What runs on the allocation's first node while the allocation lasts: a process that
/// waits for the allocation's end (it is ended with it).
const HOLDER: &[&str] = &["sleep", "infinity"];

pub fn run(args: Vec<String>) -> i32 {
    match salloc(&args) {
        Ok(code) | Err(Stop(code)) => code,
    }
}

fn salloc(args: &[String]) -> Result<i32, Stop> {
    let (p, _) = super::parse_options(Cmd::Salloc, args, 1).map_err(Stop)?;
    if p.has("help") || p.has("usage") {
        println!(
            "Usage: salloc [OPTIONS...] [command [args...]]\n\
             cosched answers to Slurm's salloc: an allocation for a command run here (your \
             shell by default), in which srun starts steps; what cosched does with each \
             option is in docs/slurm.md."
        );
        return Ok(0);
    }
    if !p.has("quiet") {
        for w in &p.warnings {
            eprintln!("{w}");
        }
    }
    let opts = batch::from_slurm(&p).map_err(error)?;
    let cmd = if p.rest.is_empty() {
        vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())]
    } else {
        p.rest.clone()
    };
    let name = opts.name.clone().unwrap_or_else(|| {
        std::path::Path::new(&cmd[0])
            .file_name()
            .map_or_else(|| cmd[0].clone(), |f| f.to_string_lossy().into_owned())
    });
    let mut req = crate::cmd::submit::request_of(
        &opts,
        HOLDER.iter().map(|s| s.to_string()).collect(),
        Some(name.clone()),
    )
    .map_err(|e| error(format!("{e:#}")))?;
    // Run once, on the first node, as a batch script is: the allocation's PEs are its steps'.
    req.io.batch = true;
    let client = super::client().map_err(error)?;
    let id = client
        .submit(req)
        .map_err(|e| error(format!("Job submission failed: {e}")))?;
    eprintln!("salloc: Pending job allocation {id}");
    let info = match wait_running(&client, id) {
        Ok(info) => info,
        Err(stop) => {
            relinquish(&client, id, None);
            return Err(stop);
        }
    };
    eprintln!("salloc: Granted job allocation {id}");
    let env = allocation_env(&client, &info, &opts)?;
    // As Slurm's salloc: a Ctrl-C is the command's (the terminal sends it to the whole
    // foreground group), not salloc's.
    // SAFETY: setting a signal's disposition to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let status = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .envs(env)
        .status();
    let code = match &status {
        Ok(s) => s
            .code()
            .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(s).unwrap_or(0)),
        // The shell's status for a command it cannot run.
        Err(_) => 127,
    };
    relinquish(&client, id, Some(code));
    status.map_err(|e| error(format!("cannot run {}: {e}", cmd[0])))?;
    Ok(code)
}

/// Waits until job `id` runs; its record then. A job that ends first is an error.
fn wait_running(client: &Client, id: JobId) -> Result<JobInfo, Stop> {
    let mut said = false;
    loop {
        let info = client
            .jobs(&[id])
            .map_err(|e| error(format!("job {id}: {e}")))?
            .pop()
            .ok_or_else(|| error(format!("job {id} vanished")))?;
        if info.state.is_final() {
            return Err(error(format!(
                "Job allocation {id} has been revoked ({}{})",
                info.state.as_str(),
                info.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )));
        }
        if !info.placement.is_empty() && info.record.start.is_some() {
            return Ok(info);
        }
        if !said {
            said = true;
            eprintln!("salloc: job {id} queued and waiting for resources");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The environment of the command: the allocation's `SLURM_*` variables (as a batch script
/// of the same job has them) over salloc's own.
fn allocation_env(
    client: &Client,
    info: &JobInfo,
    opts: &batch::JobOpts,
) -> Result<Vec<(String, String)>, Stop> {
    let st = client
        .status()
        .map_err(|e| error(format!("the cluster's status: {e}")))?;
    let nodes =
        cosched_mm::deferral::slurm_nodes(&info.placement, info.tasks, st.pes_per_node, |n| {
            super::view::node_name(&st, n)
        });
    let uid = super::view::my_uid();
    let mut env = submit_env(&Submission {
        submit_dir: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        submit_host: super::view::host_name(),
        cluster: cosched_slurm::DEFAULT_CLUSTER.into(),
        partition: cosched_slurm::DEFAULT_PARTITION.into(),
        user: super::view::user_name(uid),
        uid,
        gid: cosched_proto::util::egid(),
        cpus_per_task: opts.cpus_per_task,
        ntasks_per_node: opts.ntasks_per_node,
        array: None,
    });
    let ntasks = nodes.iter().map(|n| n.1).sum();
    env.extend(cosched_mm::deferral::slurm_env(
        info.id(),
        &info.name,
        ntasks,
        &nodes,
        None,
    ));
    Ok(env)
}

/// Ends allocation `id`, saying so: with the exit code of its command once that ran, else
/// (it never got to run) with a cancel.
fn relinquish(client: &Client, id: JobId, exit_code: Option<i32>) {
    eprintln!("salloc: Relinquishing job allocation {id}");
    let req = match exit_code {
        Some(exit_code) => Request::Relinquish { job: id, exit_code },
        None => Request::Cancel(id),
    };
    if let Err(e) = client.simple(req) {
        eprintln!("salloc: error: ending job allocation {id}: {e}");
    }
}
