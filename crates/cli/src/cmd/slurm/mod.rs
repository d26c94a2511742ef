//! Slurm's commands over cosched: `sbatch`, `srun`, `salloc`, `squeue`, `scancel`, `sacct`,
//! `sinfo` and `scontrol`, with Slurm's options, output formats and exit codes (docs/slurm.md). The
//! `cosched` binary answers to these names when it is run through a link so named
//! (`cosched slurm install-links DIR`), and always as `cosched slurm CMD ...`.
//!
//! Each command is a file: it parses Slurm's arguments, asks the machine manager (the same
//! requests as cosched's own commands), and prints through `cosched_slurm`, which owns the
//! formats; `srun` and `salloc` work with the machine manager's job steps.

use std::path::Path;

use cosched_client::client::Client;

pub mod sacct;
pub mod salloc;
pub mod sbatch;
pub mod scancel;
pub mod scontrol;
pub mod sinfo;
pub mod squeue;
pub mod srun;
pub mod view;

/// The names cosched answers to.
pub const COMMANDS: &[&str] = &[
    "sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "srun", "salloc",
];

/// `cosched slurm`: a Slurm command by name, or the links that make them commands.
#[derive(clap::Args)]
pub struct Args {
    /// `CMD [ARGS...]` with CMD one of sbatch, srun, salloc, squeue, scancel, sacct, sinfo,
    /// scontrol;
    /// `install-links DIR`: a link per command in DIR to this binary (put DIR on PATH);
    /// `options`: what cosched does with each sbatch/srun/salloc option (Markdown)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD [ARGS]"
    )]
    words: Vec<String>,
}

/// The Slurm command `argv0` names, when the binary was run through such a link.
pub fn command_of(argv0: &std::ffi::OsStr) -> Option<&'static str> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    COMMANDS.iter().copied().find(|c| *c == name)
}

/// `cosched slurm ...`.
pub fn run(a: Args) -> anyhow::Result<i32> {
    let (first, rest) = a.words.split_first().expect("clap requires a word");
    if first == "options" {
        print!("{}", cosched_slurm::options::markdown());
        return Ok(0);
    }
    if first == "install-links" {
        let [dir] = rest else {
            anyhow::bail!("usage: cosched slurm install-links DIR");
        };
        return install_links(Path::new(dir));
    }
    match COMMANDS.iter().find(|c| *c == first) {
        Some(c) => Ok(dispatch(c, rest.to_vec())),
        None => anyhow::bail!(
            "{first:?} is not a Slurm command cosched answers to (it knows {}, and install-links DIR)",
            COMMANDS.join(", ")
        ),
    }
}

/// Runs Slurm command `name` with `args` (without the program name); the exit status.
pub fn dispatch(name: &str, args: Vec<String>) -> i32 {
    if let [only] = args.as_slice()
        && (only == "-V" || only == "--version")
    {
        return version();
    }
    match name {
        "sbatch" => sbatch::run(args),
        "squeue" => squeue::run(args),
        "scancel" => scancel::run(args),
        "sacct" => sacct::run(args),
        "sinfo" => sinfo::run(args),
        "scontrol" => scontrol::run(args),
        "srun" => srun::run(args),
        "salloc" => salloc::run(args),
        other => fail(other, "not a Slurm command cosched answers to"),
    }
}

/// A link named after each command in `dir`, to this binary. An existing link to it is
/// kept; any other file of that name is left alone and named.
fn install_links(dir: &Path) -> anyhow::Result<i32> {
    use anyhow::Context;
    let exe = std::env::current_exe().context("finding the cosched executable")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut refused = Vec::new();
    for c in COMMANDS {
        let link = dir.join(c);
        match std::fs::read_link(&link) {
            Ok(to) if to == exe => continue,
            Ok(_) => {
                std::fs::remove_file(&link)
                    .with_context(|| format!("replacing the link {}", link.display()))?;
            }
            Err(_) if link.symlink_metadata().is_ok() => {
                refused.push(link.display().to_string());
                continue;
            }
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&exe, &link)
            .with_context(|| format!("linking {} to {}", link.display(), exe.display()))?;
    }
    println!(
        "{}: {} -> {}",
        dir.display(),
        COMMANDS.join(", "),
        exe.display()
    );
    if !refused.is_empty() {
        anyhow::bail!(
            "left alone (not links; remove them to link): {}",
            refused.join(", ")
        );
    }
    Ok(0)
}

/// The machine manager of `$COSCHED_STATE_DIR` (or `~/.cosched`).
/// A client found as cosched's own commands find one (state directory, configuration).
pub(crate) fn client() -> Result<Client, String> {
    crate::cmd::daemon::ConnArgs::default()
        .client()
        .map_err(|e| e.to_string())
}

/// Parses `cmd`'s options with Slurm's table, strictly when `COSCHED_SLURM_STRICT` or
/// `--strict` asks (returned too); on an error says it as Slurm's command does and gives
/// its status: 1 for a refused option, `usage_status` for one getopt refuses.
pub(crate) fn parse_options(
    cmd: cosched_slurm::options::Cmd,
    args: &[String],
    usage_status: i32,
) -> Result<(cosched_slurm::options::Parsed, bool), i32> {
    use cosched_slurm::options::{self, OptError};
    let name = cmd.name();
    let env_strict =
        options::strict_from_env(std::env::var("COSCHED_SLURM_STRICT").ok().as_deref());
    let parse = |strict| {
        options::parse(cmd, args, strict).map_err(|e| match e {
            OptError::Refused(..) | OptError::Strict(..) => fail(name, &e.to_string()),
            e => {
                eprintln!("{name}: {e}");
                eprintln!("Try \"{name} --help\" for more information");
                usage_status
            }
        })
    };
    let p = parse(env_strict)?;
    if !env_strict && p.has("strict") {
        return Ok((parse(true)?, true));
    }
    Ok((p, env_strict))
}

/// Prints `CMD: error: MSG` and gives Slurm's failure status.
pub(crate) fn fail(cmd: &str, msg: &str) -> i32 {
    eprintln!("{cmd}: error: {msg}");
    1
}

/// Parses a query command's arguments with clap; on a bad option, says so as Slurm's
/// commands do (status 1), or prints the help (status 0).
pub(crate) fn parse_args<T: clap::Parser>(cmd: &str, args: &[String]) -> Result<T, i32> {
    T::try_parse_from(std::iter::once(cmd.to_string()).chain(args.iter().cloned())).map_err(|e| {
        use clap::error::ErrorKind;
        match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                print!("{e}");
                0
            }
            _ => {
                eprintln!("{cmd}: error: {}", crate::cmd::batch::first_line(&e));
                eprintln!("Try \"{cmd} --help\" for more information");
                1
            }
        }
    })
}

/// Prints Slurm's version line (`CMD -V`, `CMD --version`), which Open MPI's launcher reads
/// from `srun --version`.
pub(crate) fn version() -> i32 {
    println!("slurm {}", cosched_slurm::SLURM_VERSION);
    0
}

/// The context the formatters need: now, the local time zone, the cluster's name.
pub(crate) fn context(now: i64) -> cosched_slurm::job::Context<'static> {
    cosched_slurm::job::Context {
        now,
        offset: view::local_offset,
        cluster: cosched_slurm::DEFAULT_CLUSTER,
    }
}

/// Now, in seconds since the epoch.
pub(crate) fn now_secs() -> i64 {
    cosched_proto::util::now().as_micros().div_euclid(1_000_000)
}

/// Job ids as Slurm's commands take them: `N` (a job, or every task of array N),
/// `N_M` (task M of array N), `N_[1-3,5]` (those tasks); `N.S` (a step) is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobSpec {
    pub id: u64,
    /// Only these tasks of array `id`.
    pub tasks: Option<Vec<u32>>,
}

impl JobSpec {
    pub fn parse(text: &str) -> Result<JobSpec, String> {
        let bad = || format!("Invalid job id specified: {text}");
        if text.contains('.') {
            let (job, step) = text.split_once('.').unwrap_or_default();
            if step == "batch" || step == "extern" {
                return JobSpec::parse(job);
            }
            return Err(format!(
                "{text}: job steps are not built in cosched yet; give the job's id"
            ));
        }
        let (id, tasks) = match text.split_once('_') {
            None => (text, None),
            Some((id, t)) => {
                let t = t.trim_start_matches('[').trim_end_matches(']');
                let spec = cosched_proto::start_conditions::parse_array(t).map_err(|_| bad())?;
                (id, Some(spec.indices))
            }
        };
        Ok(JobSpec {
            id: id.trim().parse().map_err(|_| bad())?,
            tasks,
        })
    }

    /// Whether the job `j` is one this names.
    pub fn names(&self, j: &cosched_slurm::job::JobView) -> bool {
        match (&self.tasks, j.array) {
            (None, None) => j.id == self.id,
            (None, Some(a)) => j.id == self.id || a.job == self.id,
            (Some(t), Some(a)) => a.job == self.id && t.contains(&a.index),
            (Some(_), None) => false,
        }
    }
}

/// Comma- and space-separated job ids.
pub(crate) fn job_specs(items: &[String]) -> Result<Vec<JobSpec>, String> {
    items
        .iter()
        .flat_map(|s| split_ids(s))
        .map(|s| JobSpec::parse(&s))
        .collect()
}

/// Splits `1,2_[3,4],5` at the commas outside brackets.
fn split_ids(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_in_slurms_forms() {
        assert_eq!(
            job_specs(&["1,2_[3-4,6]".into(), "7_2".into(), "8.batch".into()]).unwrap(),
            vec![
                JobSpec { id: 1, tasks: None },
                JobSpec {
                    id: 2,
                    tasks: Some(vec![3, 4, 6])
                },
                JobSpec {
                    id: 7,
                    tasks: Some(vec![2])
                },
                JobSpec { id: 8, tasks: None },
            ]
        );
        assert!(JobSpec::parse("8.0").unwrap_err().contains("steps"));
        assert!(JobSpec::parse("x").is_err());
    }

    #[test]
    fn the_binary_answers_to_slurms_names_only() {
        assert_eq!(command_of("/usr/local/bin/sbatch".as_ref()), Some("sbatch"));
        assert_eq!(command_of("squeue".as_ref()), Some("squeue"));
        assert_eq!(command_of("/x/cosched".as_ref()), None);
        assert_eq!(command_of("sbatch2".as_ref()), None);
    }
}
