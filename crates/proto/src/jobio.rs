//! A job's environment and output files as a batch user expects them (Slurm's `--export`,
//! `--output`, `--error`): parsing `--export` against the submitter's environment, the
//! size check that keeps a submission inside the first-frame limit, the job-wide variables
//! (node list, tasks per node) and the expansion of output file patterns.

use std::path::{Path, PathBuf};

use cosched_core::JobId;
use serde::{Deserialize, Serialize};

use crate::proto::{Hello, Placement, Request, Stamp, SubmitRequest};

/// What a job's ranks get besides their command: chosen at submission, kept with the job's
/// record (so a restarted machine manager launches a queued job the same way) and sent to
/// the nodes once, in the launch message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobIo {
    /// The ranks' environment (`--export`): `None` leaves them the node manager's own (what
    /// library callers that do not choose get); `Some` is exactly these variables. cosched's
    /// variables are added either way. Never shown to clients (see `Core::request`): it may
    /// hold secrets and can be large.
    pub env: Option<Vec<(String, String)>>,
    /// `--output` pattern; `None`: the rank's `<rank>.out` in the node's work directory.
    pub output: Option<String>,
    /// `--error` pattern; `None`: with `--output`, the same file as standard output (as
    /// Slurm does); without, the rank's `<rank>.err` in the node's work directory.
    pub error: Option<String>,
    /// The array task this job is (`--array`): its output patterns expand `%A` and `%a`,
    /// and its ranks get the array variables.
    #[serde(default)]
    pub array: Option<crate::start_conditions::ArrayTask>,
    /// Which MPI start-up servers its ranks get (`--mpi`).
    #[serde(default)]
    pub mpi: Mpi,
    /// The command is a batch script (`sbatch`): it runs once, as rank 0 on the first node
    /// of the allocation, without PMI; the allocation's other PEs hold nothing until a step
    /// (`srun`) starts there.
    #[serde(default)]
    pub batch: bool,
    /// A signal sent ahead of the time limit (`--signal`).
    #[serde(default)]
    pub signal: Option<WarnSignal>,
    /// Its output files are opened for appending, not cut to nothing (`--open-mode=append`).
    #[serde(default)]
    pub append: bool,
}

/// Slurm's `--signal=[{R|B}:]SIG[@TIME]`: `sig` sent when the job has `before_s` seconds
/// of its time limit left, to the batch script's shell alone (`B:`) or to the job's tasks
/// (its steps' ranks, or its own ranks when it has no script).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarnSignal {
    pub sig: i32,
    pub before_s: u32,
    pub script: bool,
}

/// Signals by the names Slurm's `--signal` takes (with or without `SIG`).
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ABRT", libc::SIGABRT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
];

impl WarnSignal {
    /// Slurm's default lead time: 60 s before the limit.
    pub const DEFAULT_BEFORE_S: u32 = 60;
    /// The longest lead time Slurm takes (0xffff seconds).
    pub const MAX_BEFORE_S: u32 = 65535;

    /// Parses `[{R|B}:]SIG[@TIME]`: SIG a name (`USR1`, `SIGUSR1`) or number, TIME seconds
    /// (default 60).
    pub fn parse(text: &str) -> Result<WarnSignal, String> {
        let bad = |why: &str| {
            format!("--signal={text}: {why} (expected [{{R|B}}:]SIG[@TIME], e.g. B:USR1@120)")
        };
        let (flags, rest) = match text.split_once(':') {
            Some((f, r)) => (f, r),
            None => ("", text),
        };
        let script = match flags.to_ascii_uppercase().as_str() {
            "" | "R" => false,
            "B" | "BR" | "RB" => true,
            _ => return Err(bad("the flags before ':' are R or B")),
        };
        let (name, time) = match rest.split_once('@') {
            Some((n, t)) => (n, Some(t)),
            None => (rest, None),
        };
        let upper = name.trim().to_ascii_uppercase();
        let short = upper.strip_prefix("SIG").unwrap_or(&upper);
        let sig = match short.parse::<i32>() {
            Ok(n) if SIGNALS.iter().any(|&(_, s)| s == n) => n,
            Ok(_) => return Err(bad("not a signal number cosched sends")),
            Err(_) => SIGNALS
                .iter()
                .find(|(n, _)| *n == short)
                .map(|&(_, s)| s)
                .ok_or_else(|| bad("unknown signal name"))?,
        };
        let before_s = match time {
            None => Self::DEFAULT_BEFORE_S,
            Some(t) => t
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|&s| s <= Self::MAX_BEFORE_S)
                .ok_or_else(|| bad("TIME is seconds, at most 65535"))?,
        };
        Ok(WarnSignal {
            sig,
            before_s,
            script,
        })
    }
}

/// Which MPI start-up servers a job's ranks get (`--mpi`, Slurm's flag name). A rank that
/// reaches neither runs as an MPI world of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mpi {
    /// PMI-1 to every rank, and PMIx to every rank of a job of more than one rank where the
    /// node manager can serve it (a one-rank job is a world of one either way): MPICH, Open
    /// MPI and mpi4py start with nothing to choose. A PMIx server that cannot start is
    /// warned about and the ranks start with PMI-1 alone.
    #[default]
    Auto,
    /// PMIx only; a PMIx server that cannot start fails the job's ranks on that node.
    Pmix,
    /// PMI-1 only.
    Pmi1,
    /// Neither.
    None,
}

impl Mpi {
    /// Parses `--mpi`.
    pub fn parse(s: &str) -> Result<Mpi, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Mpi::Auto),
            "pmix" => Ok(Mpi::Pmix),
            "pmi1" | "pmi" => Ok(Mpi::Pmi1),
            "none" => Ok(Mpi::None),
            _ => Err(format!(
                "--mpi {s:?}: expected auto (PMI-1 and PMIx), pmix, pmi1 or none"
            )),
        }
    }

    /// Its name, as `--mpi` takes it (and `SLURM_MPI_TYPE` carries it to a batch script's
    /// steps).
    pub fn name(self) -> &'static str {
        match self {
            Mpi::Auto => "auto",
            Mpi::Pmix => "pmix",
            Mpi::Pmi1 => "pmi1",
            Mpi::None => "none",
        }
    }

    /// Whether the ranks get a PMI-1 socket.
    pub fn pmi1(self) -> bool {
        matches!(self, Mpi::Auto | Mpi::Pmi1)
    }
}

/// Parses `--export` (Slurm's syntax): `ALL`, `NONE`, or a comma-separated list of `VAR`
/// (taken from `environ`; skipped when absent, as Slurm does) and `VAR=value`, optionally
/// beginning with `ALL` (the whole environment plus those). Values cannot contain commas.
pub fn parse_export(
    spec: &str,
    environ: &[(String, String)],
) -> Result<Vec<(String, String)>, String> {
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("NONE") {
        return Ok(Vec::new());
    }
    let mut out: Vec<(String, String)> = Vec::new();
    let set = |k: &str, v: &str, out: &mut Vec<(String, String)>| {
        out.retain(|(o, _)| o != k);
        out.push((k.to_string(), v.to_string()));
    };
    for (n, item) in spec.split(',').enumerate() {
        let item = item.trim();
        if n == 0 && item.eq_ignore_ascii_case("ALL") {
            out.extend(environ.iter().cloned());
            continue;
        }
        let (name, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
        if name.is_empty()
            || name.starts_with(|c: char| c.is_ascii_digit())
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!(
                "--export: {item:?} is not a variable name (expected ALL, NONE or VAR[=value],...)"
            ));
        }
        match value {
            Some(v) => set(name, v, &mut out),
            None => {
                if let Some((_, v)) = environ.iter().find(|(k, _)| k == name) {
                    set(name, &v.clone(), &mut out);
                }
            }
        }
    }
    Ok(out)
}

/// The submitter's environment as UTF-8 pairs; variables that are not UTF-8 cannot travel
/// in the protocol and are named on stderr.
pub fn current_environ() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in std::env::vars_os() {
        match (k.into_string(), v.into_string()) {
            (Ok(k), Ok(v)) => out.push((k, v)),
            (k, _) => eprintln!(
                "cosched: not exporting {:?}: not UTF-8",
                k.unwrap_or_else(|k| k.to_string_lossy().into_owned())
            ),
        }
    }
    out
}

/// Slack for the frame's seal (length, nonce, tag) around the encoded request.
const SEAL_SLACK: usize = 128;

/// A submission must fit in the first frame of a not-yet-authenticated connection
/// ([`cosched_storm::frame::MAX_HELLO`]); the machine manager would drop a larger one
/// without a word, so the client says why instead.
pub fn check_submit_size(req: &SubmitRequest) -> Result<(), String> {
    let limit = cosched_storm::frame::MAX_HELLO;
    let size = postcard::to_stdvec(&Hello::Client(
        Stamp::now(),
        Request::Submit(Box::new(req.clone())),
    ))
    .map(|v| v.len())
    .unwrap_or(usize::MAX)
    .saturating_add(SEAL_SLACK);
    if size <= limit {
        return Ok(());
    }
    let env: usize = req
        .io
        .env
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum();
    Err(format!(
        "the submission takes {size} bytes (its environment {env}), more than the {limit} bytes (2 MiB) a request may be; export fewer variables (--export NONE or --export VAR,...)"
    ))
}

/// Node names of a placement, comma-separated, in rank order (`COSCHED_JOB_NODELIST`), and
/// the ranks on each (`COSCHED_TASKS_PER_NODE`, e.g. `2,2,1`).
pub fn nodelist_and_tasks(
    placement: &[Placement],
    name: impl Fn(&Placement) -> String,
) -> (String, String) {
    let names: Vec<String> = placement.iter().map(&name).collect();
    let tasks: Vec<String> = placement
        .iter()
        .map(|p| p.ranks.len().to_string())
        .collect();
    (names.join(","), tasks.join(","))
}

/// Expands `%j` (job id), `%t` (rank), `%N` (node name), `%A` (the array's id; the job id
/// outside an array), `%a` (the array index; 0 outside an array) and `%%` in an output
/// pattern; any other `%` sequence is kept as written.
pub fn expand(
    pattern: &str,
    job: JobId,
    array: Option<&crate::start_conditions::ArrayTask>,
    rank: u32,
    node: &str,
) -> String {
    escapes(pattern, |c| match c {
        'j' => Some(job.0.to_string()),
        't' => Some(rank.to_string()),
        'N' => Some(node.to_string()),
        'A' => Some(array.map_or(job, |a| a.job).0.to_string()),
        'a' => Some(array.map_or(0, |a| a.index).to_string()),
        '%' => Some("%".into()),
        _ => None,
    })
}

/// Expands the escapes of an output pattern that are known at submission — `%x` (the job's
/// name) and `%u` (its user's name) — and keeps every other `%` sequence, `%%` included, for
/// [`expand`] on the node.
pub fn expand_at_submission(pattern: &str, name: &str, user: &str) -> String {
    escapes(pattern, |c| match c {
        'x' => Some(name.to_string()),
        'u' => Some(user.to_string()),
        _ => None,
    })
}

/// Expands what `srun` knows of a step's output pattern before the step is placed: `%j`
/// (the allocation's id), `%A` and `%a` (its array's id and index, when it is an array
/// task; else the job id and 0), `%x` (the step's name) and `%u` (its user); `%t`, `%N` and
/// `%%` are left for [`expand`] on the node.
pub fn expand_for_step(
    pattern: &str,
    job: JobId,
    array: Option<(u64, u32)>,
    name: &str,
    user: &str,
) -> String {
    escapes(pattern, |c| match c {
        'j' => Some(job.0.to_string()),
        'A' => Some(array.map_or(job.0, |a| a.0).to_string()),
        'a' => Some(array.map_or(0, |a| a.1).to_string()),
        'x' => Some(name.to_string()),
        'u' => Some(user.to_string()),
        // Kept for the node: `%%` stays `%%` so the node's expansion makes it `%`.
        '%' => Some("%%".into()),
        _ => None,
    })
}

/// `pattern` with each `%c` replaced by what `value(c)` gives; a sequence it gives nothing
/// for is kept as written (a `%` at the end too).
fn escapes(pattern: &str, value: impl Fn(char) -> Option<String>) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e) => match value(e) {
                Some(v) => out += &v,
                None => {
                    out.push('%');
                    out.push(e);
                }
            },
            None => out.push('%'),
        }
    }
    out
}

/// Where one rank's standard output and error go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankFiles {
    pub out: PathBuf,
    pub err: PathBuf,
    /// Both streams go to `out` (an `--output` without `--error`).
    pub merged: bool,
}

/// The files of rank `rank`: patterns relative to the job's working directory `cwd`, the
/// defaults (`<rank>.out`, `<rank>.err`) in `job_dir`, the node's work directory for the job.
pub fn rank_files(
    io: &JobIo,
    cwd: &Path,
    job_dir: &Path,
    job: JobId,
    rank: u32,
    node: &str,
) -> RankFiles {
    let at = |p: &str| cwd.join(expand(p, job, io.array.as_ref(), rank, node));
    let out = io
        .output
        .as_deref()
        .map_or_else(|| job_dir.join(format!("{rank}.out")), at);
    let (err, merged) = match (&io.output, &io.error) {
        (_, Some(e)) => (at(e), false),
        (Some(_), None) => (out.clone(), true),
        (None, None) => (job_dir.join(format!("{rank}.err")), false),
    };
    RankFiles { out, err, merged }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_option_reads_slurm_forms() {
        let w = |sig, before_s, script| WarnSignal {
            sig,
            before_s,
            script,
        };
        assert_eq!(WarnSignal::parse("USR1"), Ok(w(libc::SIGUSR1, 60, false)));
        assert_eq!(
            WarnSignal::parse("B:SIGUSR2@5"),
            Ok(w(libc::SIGUSR2, 5, true))
        );
        assert_eq!(WarnSignal::parse("R:10@300"), Ok(w(10, 300, false)));
        assert_eq!(WarnSignal::parse("term@0"), Ok(w(libc::SIGTERM, 0, false)));
        for bad in ["X:USR1", "NOPE", "USR1@-1", "USR1@70000", "99"] {
            assert!(WarnSignal::parse(bad).is_err(), "{bad}");
        }
    }

    fn env() -> Vec<(String, String)> {
        vec![("HOME".into(), "/h".into()), ("FOO".into(), "x".into())]
    }

    #[test]
    fn export_follows_slurm() {
        assert_eq!(parse_export("ALL", &env()).unwrap(), env());
        assert!(parse_export("NONE", &env()).unwrap().is_empty());
        assert_eq!(
            parse_export("FOO,BAR=1,MISSING", &env()).unwrap(),
            vec![("FOO".into(), "x".into()), ("BAR".into(), "1".into())]
        );
        let all = parse_export("ALL,FOO=y", &env()).unwrap();
        assert_eq!(
            all,
            vec![("HOME".into(), "/h".into()), ("FOO".into(), "y".into())]
        );
        assert!(parse_export("FOO,1X=2", &env()).is_err());
        assert!(parse_export("A-B", &env()).is_err());
    }

    #[test]
    fn patterns_expand_and_default_files_stay() {
        let j = JobId(7);
        assert_eq!(
            expand("o-%j-%t-%N-%%-%x", j, None, 3, "n1"),
            "o-7-3-n1-%-%x"
        );
        assert_eq!(expand("%A_%a", j, None, 3, "n1"), "7_0");
        let task = crate::start_conditions::ArrayTask {
            job: JobId(5),
            index: 9,
            throttle: None,
        };
        assert_eq!(
            expand("s-%A_%a-%j.out", j, Some(&task), 0, "n"),
            "s-5_9-7.out"
        );
        let io = JobIo::default();
        let f = rank_files(&io, Path::new("/c"), Path::new("/w/7"), j, 2, "n");
        assert_eq!(f.out, Path::new("/w/7/2.out"));
        assert_eq!(f.err, Path::new("/w/7/2.err"));
        let io = JobIo {
            output: Some("out-%t".into()),
            ..JobIo::default()
        };
        let f = rank_files(&io, Path::new("/c"), Path::new("/w/7"), j, 2, "n");
        assert_eq!((f.out.as_path(), f.merged), (Path::new("/c/out-2"), true));
        let io = JobIo {
            error: Some("/abs/e-%N".into()),
            ..JobIo::default()
        };
        let f = rank_files(&io, Path::new("/c"), Path::new("/w/7"), j, 2, "n");
        assert_eq!(f.out, Path::new("/w/7/2.out"));
        assert_eq!(f.err, Path::new("/abs/e-n"));
    }

    #[test]
    fn submission_expands_the_name_and_user_and_leaves_the_rest_to_the_node() {
        let p = expand_at_submission("o-%x-%u-%j-%%x-%A_%a-%N-%t.out%", "job", "ann");
        assert_eq!(p, "o-job-ann-%j-%%x-%A_%a-%N-%t.out%");
        let task = crate::start_conditions::ArrayTask {
            job: JobId(5),
            index: 2,
            throttle: None,
        };
        assert_eq!(
            expand(&p, JobId(6), Some(&task), 1, "n0"),
            "o-job-ann-6-%x-5_2-n0-1.out%"
        );
    }

    #[test]
    fn a_steps_pattern_names_the_allocation_and_leaves_the_task_to_the_node() {
        let p = expand_for_step("%j_%t_log.%x-%%t", JobId(12), None, "py", "ann");
        assert_eq!(p, "12_%t_log.py-%%t");
        assert_eq!(expand(&p, JobId(99), None, 3, "n"), "12_3_log.py-%t");
        let a = expand_for_step("%A_%a_%t", JobId(12), Some((10, 2)), "x", "u");
        assert_eq!(a, "10_2_%t");
    }

    #[test]
    fn an_oversized_environment_is_refused_naming_the_limit() {
        let mut req = SubmitRequest {
            mem: None,
            procs: 1,
            time_limit_us: None,
            class: None,
            name: None,
            cmd: vec!["true".into()],
            cwd: "/".into(),
            user: None,
            io: JobIo {
                env: Some(vec![("BIG".into(), "x".repeat(1 << 20))]),
                ..JobIo::default()
            },
            sched: Default::default(),
            layout: None,
            hold: false,
        };
        assert!(check_submit_size(&req).is_ok());
        req.io.env = Some(vec![("BIG".into(), "x".repeat(3 << 20))]);
        let e = check_submit_size(&req).unwrap_err();
        assert!(e.contains("2097152 bytes (2 MiB)"), "{e}");
    }
}
