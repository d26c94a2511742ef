//! A job's options as a Slurm user writes them: on the command line of `submit` and `run`,
//! and in the `#COSCHED` / `#SBATCH` directive lines of a batch script.
//!
//! There is one definition of each cosched option, [`JobOpts`]: the command line flattens it
//! into its arguments, and each `#COSCHED` line is parsed with the very same clap
//! definition. `#SBATCH` lines are Slurm's: they are parsed with Slurm's option table
//! (`cosched_slurm::options`, which `sbatch` uses too) and mapped onto [`JobOpts`] by
//! [`from_slurm`], so an option Slurm has but cosched ignores (`--mail-type`, `--account`)
//! is one warning line, not an error. As sbatch does, directives are read from the lines
//! after `#!` up to the first line that is neither blank nor a comment; options given on the
//! command line win over directives, `#COSCHED` lines over `#SBATCH` lines, and a later
//! directive over an earlier one. A directive no one knows is an error naming it, with
//! `file:line`.

use std::path::{Path, PathBuf};

use clap::Parser;
use cosched_core::Dur;
use cosched_proto::jobio::{Mpi, WarnSignal};
use cosched_proto::proto::{ArraySpec, Dependency, NodeLayout, Schedule};
use cosched_proto::start_conditions;
use cosched_slurm::options::{self, Parsed};
use jiff::tz::TimeZone;

/// The options of a job (`submit`, `run`, and the directives of a batch script).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct JobOpts {
    /// Ranks (tasks) of the job, one per PE [default: 1, or --nodes × --ntasks-per-node]
    #[arg(short = 'n', long = "ntasks", visible_alias = "pes")]
    pub ntasks: Option<u32>,
    /// Nodes, as Slurm's -N: the job's ranks go on exactly N nodes (with --ntasks-per-node,
    /// M on each, N × M ranks; N alone is one rank per node, or -n spread evenly)
    #[arg(short = 'N', long)]
    pub nodes: Option<u32>,
    /// Ranks per node: at most M on each of its nodes
    #[arg(long)]
    pub ntasks_per_node: Option<u32>,
    /// PEs per rank, as Slurm's -c: each rank holds C PEs of one node and is pinned to
    /// them (the job holds ranks × C PEs)
    #[arg(short = 'c', long)]
    pub cpus_per_task: Option<u32>,
    /// Nodes the job must include, as Slurm's -w: a hostlist (`n[1-3],n7`)
    #[arg(short = 'w', long)]
    pub nodelist: Option<String>,
    /// Nodes the job must not use, as Slurm's -x: a hostlist
    #[arg(short = 'x', long)]
    pub exclude: Option<String>,
    /// The partition to run in, as Slurm's -p [default: the configuration's default
    /// partition]
    #[arg(short = 'p', long)]
    pub partition: Option<String>,
    /// Node features the job's nodes must have, as Slurm's -C: FEATURE, A&B (or A,B), A|B
    #[arg(short = 'C', long)]
    pub constraint: Option<String>,
    /// Whole nodes, as Slurm's --exclusive: the job holds every PE of its nodes, so no
    /// other job runs there while it does
    #[arg(long)]
    pub exclusive: bool,
    /// Time limit (counts only the time the job runs): 10m, 1h30m, or as in Slurm MM, MM:SS,
    /// HH:MM:SS, D-HH[:MM[:SS]] (a bare number is minutes); at most 366 days
    #[arg(short = 't', long, value_parser = parse_time_limit)]
    pub time: Option<Dur>,
    /// Class name (for policies that have classes)
    #[arg(long)]
    pub class: Option<String>,
    /// Job name (default: the program's or the script's name)
    #[arg(short = 'J', long = "job-name", visible_alias = "name")]
    pub name: Option<String>,
    /// The ranks' environment, as Slurm's: ALL (this command's whole environment), NONE
    /// (only cosched's variables), or VAR[,VAR=value...] (only those; may start with ALL,)
    /// [default: ALL]
    #[arg(long)]
    pub export: Option<String>,
    /// MPI start-up servers, as Slurm's --mpi: auto (PMI-1 for MPICH and PMIx for Open MPI
    /// and mpi4py, both to every rank), pmix, pmi1 or none [default: auto]
    #[arg(long, value_parser = parse_mpi)]
    pub mpi: Option<Mpi>,
    /// Standard output of each rank to this file pattern (%j job id, %t rank, %N node, %A
    /// array id, %a array index, %% a %), relative to the working directory; standard error
    /// too unless --error
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Standard error of each rank to this file pattern (same escapes as --output)
    #[arg(short = 'e', long)]
    pub error: Option<String>,
    /// A job array: one job per index, `1-10`, `1,3,5`, `0-15:4`; `%N` at the end lets at
    /// most N tasks run at once (`1-10%2`)
    #[arg(short = 'a', long, value_parser = start_conditions::parse_array)]
    pub array: Option<ArraySpec>,
    /// Start only after other jobs: afterok:ID[:ID...], afternotok:ID, afterany:ID,
    /// after:ID (started), comma-separated (all must hold); an array's id stands for all its
    /// tasks
    #[arg(short = 'd', long, value_parser = parse_deps)]
    pub dependency: Option<Deps>,
    /// Start no earlier than this: now+N[s|m|h|d|w] (bare N is seconds), HH:MM[:SS] (today,
    /// or tomorrow if past), YYYY-MM-DD[THH:MM[:SS]] (local time)
    #[arg(short = 'b', long, value_parser = parse_begin)]
    pub begin: Option<Begin>,
    /// Record the MPI program's communication for `cosched status --node`: preloads the
    /// PMPI shim (libcosched_mpishim.so, beside the cosched binary or $COSCHED_MPISHIM)
    #[arg(long)]
    pub monitor: bool,
    /// The job's working directory (default: this command's); relative output patterns
    /// are relative to it
    #[arg(short = 'D', long)]
    pub chdir: Option<PathBuf>,
    /// Submit the job held: it does not start until `cosched release`
    #[arg(short = 'H', long)]
    pub hold: bool,
    /// Memory of the job on each of its nodes, as Slurm's --mem: 4096 (megabytes), 4G,
    /// 512M; enforced with its cgroup (an OOM kill ends it out_of_memory); 0: no limit but
    /// the node's
    #[arg(long, value_parser = parse_mem, conflicts_with = "mem_per_cpu")]
    pub mem: Option<u64>,
    /// Memory of the job per PE it holds on a node, as Slurm's --mem-per-cpu
    #[arg(long, value_parser = parse_mem)]
    pub mem_per_cpu: Option<u64>,
    /// A signal ahead of the time limit, as Slurm's --signal=[{R|B}:]SIG[@TIME]: SIG
    /// (default USR1) when TIME seconds (default 60) of the limit are left, to the batch
    /// script's shell alone with B:, else to the job's tasks
    #[arg(long, value_parser = WarnSignal::parse)]
    pub signal: Option<WarnSignal>,
    /// How output files are opened, as Slurm's --open-mode: truncate (the default) or
    /// append
    #[arg(long = "open-mode", value_parser = parse_open_mode)]
    pub append: Option<bool>,
}

/// `--open-mode`: whether the output files are appended to.
fn parse_open_mode(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "a" | "append" => Ok(true),
        "t" | "truncate" => Ok(false),
        _ => Err(format!("--open-mode={text}: expected append or truncate")),
    }
}

/// `--dependency`'s list (a newtype, so clap takes it as one value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deps(pub Vec<Dependency>);

/// `--begin` as microseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Begin(pub i64);

fn parse_deps(text: &str) -> Result<Deps, String> {
    start_conditions::parse_dependency(text).map(Deps)
}

fn parse_mem(text: &str) -> Result<u64, String> {
    cosched_slurm::size::parse_mem(text)
}

fn parse_mpi(text: &str) -> Result<Mpi, String> {
    Mpi::parse(text)
}

fn parse_time_limit(text: &str) -> Result<Dur, String> {
    super::time_limit::parse(text)
}

fn parse_begin(text: &str) -> Result<Begin, String> {
    parse_begin_at(text, cosched_proto::util::now().as_micros()).map(Begin)
}

impl JobOpts {
    /// These options, with those of `other` where these have none.
    pub fn or(self, other: JobOpts) -> JobOpts {
        JobOpts {
            ntasks: self.ntasks.or(other.ntasks),
            nodes: self.nodes.or(other.nodes),
            ntasks_per_node: self.ntasks_per_node.or(other.ntasks_per_node),
            cpus_per_task: self.cpus_per_task.or(other.cpus_per_task),
            nodelist: self.nodelist.or(other.nodelist),
            exclude: self.exclude.or(other.exclude),
            partition: self.partition.or(other.partition),
            constraint: self.constraint.or(other.constraint),
            exclusive: self.exclusive || other.exclusive,
            time: self.time.or(other.time),
            class: self.class.or(other.class),
            name: self.name.or(other.name),
            export: self.export.or(other.export),
            mpi: self.mpi.or(other.mpi),
            output: self.output.or(other.output),
            error: self.error.or(other.error),
            array: self.array.or(other.array),
            dependency: self.dependency.or(other.dependency),
            begin: self.begin.or(other.begin),
            monitor: self.monitor || other.monitor,
            chdir: self.chdir.or(other.chdir),
            hold: self.hold || other.hold,
            // One memory option or the other: the command line's wins as a whole.
            mem: if self.mem_per_cpu.is_some() {
                None
            } else {
                self.mem.or(other.mem)
            },
            mem_per_cpu: if self.mem.is_some() {
                None
            } else {
                self.mem_per_cpu.or(other.mem_per_cpu)
            },
            signal: self.signal.or(other.signal),
            append: self.append.or(other.append),
        }
    }

    /// The memory limit `--mem` or `--mem-per-cpu` asks for (`--mem=0`: none).
    pub fn mem_limit(&self) -> Option<cosched_proto::proto::MemLimit> {
        use cosched_proto::proto::MemLimit;
        match (self.mem, self.mem_per_cpu) {
            (Some(b), _) if b > 0 => Some(MemLimit::PerNode(b)),
            (None, Some(b)) if b > 0 => Some(MemLimit::PerCpu(b)),
            _ => None,
        }
    }

    /// The rank count: -n, else -N × --ntasks-per-node (-N alone: one per node), else 1.
    pub fn ranks(&self) -> Result<u32, String> {
        let from_nodes = self
            .nodes
            .map(|n| n.saturating_mul(self.ntasks_per_node.unwrap_or(1)));
        match (self.ntasks, from_nodes, self.ntasks_per_node) {
            (Some(n), Some(m), Some(_)) if n != m => Err(format!(
                "-n {n} does not match -N {} × --ntasks-per-node {} = {m}",
                self.nodes.unwrap_or(0),
                self.ntasks_per_node.unwrap_or(0)
            )),
            (Some(n), _, _) => Ok(n),
            (None, Some(m), _) => Ok(m),
            (None, None, _) => Ok(1),
        }
    }

    /// PEs per rank (`-c`; 1 without it), checked.
    pub fn cpus(&self) -> Result<u32, String> {
        match self.cpus_per_task {
            Some(0) => Err("--cpus-per-task=0: a task needs at least one PE".into()),
            c => Ok(c.unwrap_or(1)),
        }
    }

    /// The spread over nodes these options ask for: `-N` nodes, `--ntasks-per-node` on each,
    /// `--nodelist` and `--exclude` (hostlists, expanded here); `None` when they ask none.
    pub fn layout(&self) -> Result<Option<NodeLayout>, String> {
        let names = |opt: &str, list: &Option<String>| -> Result<Vec<String>, String> {
            list.as_deref().map_or(Ok(Vec::new()), |l| {
                cosched_slurm::hostlist::expand(l).map_err(|e| format!("--{opt} {l:?}: {e}"))
            })
        };
        let layout = NodeLayout {
            nodes: self.nodes,
            tasks_per_node: self.ntasks_per_node,
            nodelist: names("nodelist", &self.nodelist)?,
            exclude: names("exclude", &self.exclude)?,
            cpus_per_task: self.cpus_per_task.filter(|&c| c > 1),
            partition: self.partition.clone(),
            constraint: self.constraint.clone(),
            exclusive: self.exclusive,
        };
        Ok((layout != NodeLayout::default()).then_some(layout))
    }

    /// The start conditions these options ask for.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            after: self
                .dependency
                .as_ref()
                .map(|d| d.0.clone())
                .unwrap_or_default(),
            begin_us: self.begin.map(|b| b.0),
            array: self.array.clone(),
        }
    }
}

/// A directive line parsed with the command line's own definition of the options.
#[derive(clap::Parser)]
#[command(
    name = "directive",
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Directive {
    #[command(flatten)]
    opts: JobOpts,
}

/// A batch script: its interpreter (from `#!`) and the options of its directive lines.
#[derive(Debug)]
pub struct Script {
    /// The `#!` line split into program and optional argument.
    pub interpreter: Vec<String>,
    pub opts: JobOpts,
    /// Its `#SBATCH` lines as Slurm's table read them (sbatch's own options are there too).
    pub slurm: Parsed,
}

/// Whether `path` is a batch script: a file beginning with `#!`.
pub fn is_script(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 2];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
        && &head == b"#!"
}

/// Reads a batch script's `#!` line and directives (`strict`: Slurm options cosched ignores
/// are refused).
///
/// Only the head of the script (the `#!` line and the comment lines before the first command,
/// where directives live) must be UTF-8: what follows is the interpreter's business, as in
/// sbatch.
pub fn read_script(path: &Path, strict: bool) -> Result<Script, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("reading the batch script {}: {e}", path.display()))?;
    let file = path.display().to_string();
    parse_script(&file, directive_head(&file, &bytes)?, strict)
}

/// The script's head as text: its lines up to the first command (a line that is neither
/// blank nor a comment), or an error naming the first line there that is not UTF-8.
fn directive_head<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, String> {
    let mut end = 0;
    for (n, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let trimmed = line.trim_ascii();
        if n > 0 && !trimmed.is_empty() && trimmed[0] != b'#' {
            break;
        }
        std::str::from_utf8(line).map_err(|e| {
            format!(
                "{file}:{}: not UTF-8 text (byte {} of the line); the #! line and the \
                 directives before the first command must be UTF-8",
                n + 1,
                e.valid_up_to() + 1
            )
        })?;
        end += line.len();
    }
    // Every line up to `end` was checked to be UTF-8, so the slice is too.
    Ok(std::str::from_utf8(&bytes[..end]).expect("checked line by line"))
}

/// Parses a script's text (`file` names it in errors).
pub fn parse_script(file: &str, text: &str, strict: bool) -> Result<Script, String> {
    let interpreter: Vec<String> = match text.lines().next() {
        Some(l) if l.starts_with("#!") => l[2..]
            .trim()
            .splitn(2, char::is_whitespace)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        _ => return Err(format!("{file}:1: a batch script begins with a #! line")),
    };
    if interpreter.is_empty() {
        return Err(format!("{file}:1: the #! line names no interpreter"));
    }
    // Each #SBATCH line's values are checked where they are written.
    let mut slurm = Parsed::default();
    for (at, line) in options::directive_lines(file, text, strict)? {
        from_slurm(&line).map_err(|e| format!("{at}: {e}"))?;
        slurm = line.over(slurm);
    }
    let mut opts = JobOpts::default();
    for (n, rest) in options::directive_bodies(text, "#COSCHED") {
        let at = format!("{file}:{n}");
        let words = options::split_words(rest).map_err(|e| format!("{at}: {e}"))?;
        let d = Directive::try_parse_from(&words).map_err(|e| directive_error(&at, &e))?;
        // A later directive wins over an earlier one, as in sbatch.
        opts = d.opts.or(opts);
    }
    let opts = opts.or(from_slurm(&slurm)?);
    Ok(Script {
        interpreter,
        opts,
        slurm,
    })
}

/// The job options Slurm's options (parsed with its table) come to. sbatch's own options
/// (`--wait`, `--parsable`, …) and those cosched ignores stay in [`Parsed`] for the caller.
pub fn from_slurm(p: &Parsed) -> Result<JobOpts, String> {
    let num = |long: &str| -> Result<Option<u32>, String> {
        p.value(long)
            .map(|v| {
                // `-N min-max`: the minimum, as Slurm's allocation starts from it.
                let v = v.split('-').next().unwrap_or(v);
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("--{long} {v:?} is not a number"))
            })
            .transpose()
    };
    let time = match p.value("time") {
        None => None,
        Some(t) => match cosched_slurm::time::parse_limit(t) {
            Some(cosched_slurm::time::Limit::Unlimited) => None,
            _ => Some(parse_time_limit(t)?),
        },
    };
    Ok(JobOpts {
        ntasks: num("ntasks")?,
        nodes: num("nodes")?,
        ntasks_per_node: num("ntasks-per-node")?,
        cpus_per_task: num("cpus-per-task")?,
        nodelist: p.value("nodelist").map(str::to_string),
        exclude: p.value("exclude").map(str::to_string),
        partition: p.value("partition").map(str::to_string),
        constraint: p.value("constraint").map(str::to_string),
        exclusive: p.has("exclusive"),
        time,
        class: p.value("class").map(str::to_string),
        name: p.value("job-name").map(str::to_string),
        export: p.value("export").map(str::to_string),
        mpi: p.value("mpi").map(Mpi::parse).transpose()?,
        output: p.value("output").map(str::to_string),
        error: p.value("error").map(str::to_string),
        array: p
            .value("array")
            .map(start_conditions::parse_array)
            .transpose()?,
        dependency: p.value("dependency").map(parse_deps).transpose()?,
        begin: p.value("begin").map(parse_begin).transpose()?,
        monitor: p.has("monitor"),
        chdir: p.value("chdir").map(PathBuf::from),
        hold: p.has("hold"),
        mem: p.value("mem").map(parse_mem).transpose()?,
        mem_per_cpu: p.value("mem-per-cpu").map(parse_mem).transpose()?,
        signal: p.value("signal").map(WarnSignal::parse).transpose()?,
        append: p.value("open-mode").map(parse_open_mode).transpose()?,
    })
}

fn directive_error(at: &str, e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() == ErrorKind::UnknownArgument {
        let arg = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.clone(),
            _ => "?".into(),
        };
        return format!(
            "{at}: unknown directive {arg} (directives take the options of `cosched submit`: \
             -n/--ntasks, -N/--nodes, --ntasks-per-node, -c/--cpus-per-task, -w/--nodelist, -x/--exclude, -p/--partition, -C/--constraint, --exclusive, -t/--time, -J/--job-name, -o/--output, \
             -e/--error, --array, --dependency, --begin, --class, --export, --mpi, -D/--chdir, \
             -H/--hold, --mem, --mem-per-cpu, --signal, --open-mode, --monitor)"
        );
    }
    format!("{at}: {}", first_line(e))
}

/// The first line of a clap error, without its `error: `.
pub(crate) fn first_line(e: &clap::Error) -> String {
    let text = e.to_string();
    text.lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string()
}

/// `--begin` at `now_us`: `now`, `now+N[unit]`, `HH:MM[:SS]`, `YYYY-MM-DD[THH:MM[:SS]]`, a
/// date and time in the local time zone (`TZ`, else /etc/localtime).
pub fn parse_begin_at(text: &str, now_us: i64) -> Result<i64, String> {
    parse_begin_in(text, now_us, &TimeZone::system())
}

/// `--begin` at `now_us`, dates and times of day read in `tz`.
fn parse_begin_in(text: &str, now_us: i64, tz: &TimeZone) -> Result<i64, String> {
    let s = text.trim();
    let bad = || {
        format!(
            "--begin {text:?}: expected now+N[s|m|h|d|w], HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]]"
        )
    };
    if let Some(rest) = s.strip_prefix("now") {
        if rest.is_empty() {
            return Ok(now_us);
        }
        // `now-N` too: `acct --since now-1h`.
        let (sign, rest) = match (rest.strip_prefix('+'), rest.strip_prefix('-')) {
            (Some(r), _) => (1, r),
            (None, Some(r)) => (-1, r),
            _ => return Err(bad()),
        };
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        let unit = match &rest[digits..] {
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "h" | "hour" | "hours" => 3_600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 7 * 86_400,
            _ => return Err(bad()),
        };
        return (sign * n)
            .checked_mul(unit)
            .and_then(|s| s.checked_mul(1_000_000))
            .and_then(|us| us.checked_add(now_us))
            .ok_or_else(bad);
    }
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (Some(d), Some(t)),
        None if s.contains('-') => (Some(s), None),
        None => (None, Some(s)),
    };
    let nums =
        |t: &str, sep: char| -> Option<Vec<i32>> { t.split(sep).map(|f| f.parse().ok()).collect() };
    let hms = match time {
        Some(t) => match nums(t, ':').ok_or_else(bad)?.as_slice() {
            [h, m] => (*h, *m, 0),
            [h, m, s] => (*h, *m, *s),
            _ => return Err(bad()),
        },
        None => (0, 0, 0),
    };
    if !(0..24).contains(&hms.0) || !(0..60).contains(&hms.1) || !(0..60).contains(&hms.2) {
        return Err(bad());
    }
    let now_s = now_us.div_euclid(1_000_000);
    let today = local_date(now_s, tz).ok_or_else(bad)?;
    let (y, mo, d) = match date {
        Some(d) => match nums(d, '-').ok_or_else(bad)?.as_slice() {
            [y, m, d] if (1..=12).contains(m) && (1..=31).contains(d) => {
                let first = i16::try_from(*y)
                    .ok()
                    .and_then(|y| jiff::civil::Date::new(y, *m as i8, 1).ok())
                    .ok_or_else(bad)?;
                if *d > i32::from(first.days_in_month()) {
                    return Err(format!(
                        "--begin {text:?}: {y:04}-{m:02} has {} days",
                        first.days_in_month()
                    ));
                }
                (*y, *m, *d)
            }
            _ => return Err(bad()),
        },
        None => (today.0, today.1, today.2),
    };
    let mut at = local_epoch(tz, (y, mo, d), hms).ok_or_else(bad)?;
    if date.is_none() && at <= now_s {
        // A time of day already past means tomorrow, as in Slurm.
        at += 86_400;
    }
    Ok(at * 1_000_000)
}

/// Year, month, day of the date at `secs` since the epoch, in `tz`.
fn local_date(secs: i64, tz: &TimeZone) -> Option<(i32, i32, i32)> {
    let d = jiff::Timestamp::from_second(secs)
        .ok()?
        .to_zoned(tz.clone())
        .date();
    Some((d.year().into(), d.month().into(), d.day().into()))
}

/// Seconds since the epoch of a date and time in `tz`. A time skipped by a change to summer
/// time is taken after the change, a time that occurs twice the first time, as mktime does.
fn local_epoch(
    tz: &TimeZone,
    (y, mo, d): (i32, i32, i32),
    (h, mi, s): (i32, i32, i32),
) -> Option<i64> {
    let small = |v: i32| i8::try_from(v).ok();
    let at = jiff::civil::DateTime::new(
        i16::try_from(y).ok()?,
        small(mo)?,
        small(d)?,
        small(h)?,
        small(mi)?,
        small(s)?,
        0,
    )
    .ok()?;
    Some(at.to_zoned(tz.clone()).ok()?.timestamp().as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_use_the_command_lines_options() {
        let s = parse_script(
            "job.sh",
            "#!/bin/bash -l\n#SBATCH -n 3\n#SBATCH --time=1:00:00 -J hello # a comment\n\
             #COSCHED --array=1-10%2\n#SBATCH -o out-%A_%a.txt --dependency=afterok:4:5\n\
             # plain comment\n\necho hi\n#SBATCH -n 9\n",
            false,
        )
        .unwrap();
        assert_eq!(s.interpreter, ["/bin/bash", "-l"]);
        assert_eq!(
            s.opts.ntasks,
            Some(3),
            "directives stop at the first command"
        );
        assert_eq!(s.opts.time, Some(Dur::from_secs(3600)));
        assert_eq!(s.opts.name.as_deref(), Some("hello"));
        assert_eq!(s.opts.array.as_ref().unwrap().throttle, Some(2));
        assert_eq!(s.opts.output.as_deref(), Some("out-%A_%a.txt"));
        assert_eq!(s.opts.dependency.as_ref().unwrap().0.len(), 2);
        // The command line wins.
        let cli = JobOpts {
            ntasks: Some(5),
            ..JobOpts::default()
        };
        let merged = cli.or(s.opts);
        assert_eq!(
            (merged.ntasks, merged.name.as_deref()),
            (Some(5), Some("hello"))
        );
    }

    #[test]
    fn unknown_and_bad_directives_are_named_with_file_and_line() {
        let e = parse_script(
            "j.sh",
            "#!/bin/sh\n#SBATCH -n 2\n#SBATCH --bogus=4G\n",
            false,
        )
        .unwrap_err();
        assert_eq!(e, "j.sh:3: unrecognized option '--bogus'");
        let e = parse_script("j.sh", "#!/bin/sh\n#COSCHED --bogus\n", false).unwrap_err();
        assert!(e.starts_with("j.sh:2: unknown directive --bogus"), "{e}");
        let e = parse_script("j.sh", "#!/bin/sh\n#SBATCH --time=1:99\n", false).unwrap_err();
        assert!(e.starts_with("j.sh:2:") && e.contains("--time"), "{e}");
        let e = parse_script("j.sh", "#!/bin/sh\n#SBATCH --array=5-1\n", false).unwrap_err();
        assert!(e.starts_with("j.sh:2:") && e.contains("backwards"), "{e}");
        assert!(parse_script("j.sh", "echo\n", false).is_err());
    }

    #[test]
    fn sbatch_lines_keep_coscheds_own_class_and_monitor_options() {
        let s = parse_script(
            "j.sh",
            "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=2 --class batch --monitor\n",
            true,
        )
        .unwrap();
        assert_eq!(s.opts.class.as_deref(), Some("batch"));
        assert!(s.opts.monitor);
        assert_eq!(s.opts.ranks(), Ok(4));
        assert!(s.slurm.warnings.is_empty(), "{:?}", s.slurm.warnings);
    }

    #[test]
    fn slurm_options_cosched_ignores_are_warnings_unless_strict() {
        let text = "#!/bin/sh\n#SBATCH -n 2 --mem=4G\n#SBATCH --mail-type=ALL -A proj\n\
                    #SBATCH -D /tmp -H -t UNLIMITED -N 1-3\n";
        let s = parse_script("j.sh", text, false).unwrap();
        assert_eq!(s.opts.ntasks, Some(2));
        assert_eq!(s.slurm.warnings.len(), 2, "{:?}", s.slurm.warnings);
        assert_eq!(s.opts.mem, Some(4 << 30), "--mem is honoured");
        assert_eq!(s.opts.chdir.as_deref(), Some(Path::new("/tmp")));
        assert!(s.opts.hold);
        assert_eq!(s.opts.time, None, "UNLIMITED is no limit");
        assert_eq!(s.opts.nodes, Some(1), "the minimum of a node range");
        let e = parse_script("j.sh", text, true).unwrap_err();
        assert!(e.starts_with("j.sh:3: --mail-type is ignored here"), "{e}");
    }

    #[test]
    fn a_script_head_that_is_not_utf8_is_refused_with_its_line() {
        let e = directive_head(
            "j.sh",
            b"#!/bin/sh\n#SBATCH -n 2\n#SBATCH -J caf\xe9\necho\n",
        )
        .unwrap_err();
        assert!(e.starts_with("j.sh:3: not UTF-8"), "{e}");
        // Bytes after the first command are the interpreter's business.
        let head = directive_head("j.sh", b"#!/bin/sh\n#SBATCH -n 2\necho caf\xe9\n").unwrap();
        assert_eq!(head, "#!/bin/sh\n#SBATCH -n 2\n");
        assert_eq!(
            parse_script("j.sh", head, false).unwrap().opts.ntasks,
            Some(2)
        );
    }

    #[test]
    fn ranks_from_nodes() {
        let o = |n, nn, per| JobOpts {
            ntasks: n,
            nodes: nn,
            ntasks_per_node: per,
            ..JobOpts::default()
        };
        assert_eq!(o(None, None, None).ranks(), Ok(1));
        assert_eq!(o(None, Some(2), Some(3)).ranks(), Ok(6));
        assert_eq!(o(None, Some(2), None).ranks(), Ok(2));
        assert_eq!(o(Some(4), Some(2), None).ranks(), Ok(4));
        assert!(o(Some(4), Some(2), Some(3)).ranks().is_err());
    }

    #[test]
    fn begin_times() {
        let now = 1_700_000_000_000_000;
        assert_eq!(parse_begin_at("now+90", now), Ok(now + 90_000_000));
        assert_eq!(parse_begin_at("now+2m", now), Ok(now + 120_000_000));
        assert_eq!(parse_begin_at("now+1hour", now), Ok(now + 3_600_000_000));
        let t = parse_begin_at("2030-01-02T03:04:05", now).unwrap();
        assert!(t > now);
        let next = parse_begin_at("00:00", now).unwrap();
        assert!(
            next > now && next - now <= 86_400_000_000,
            "a time of day is in the next 24 h"
        );
        assert_eq!(parse_begin_at("now-1h", now), Ok(now - 3_600_000_000));
        let leap = parse_begin_at("2028-02-29", now).unwrap();
        assert_eq!(
            parse_begin_at("2028-03-01", now).unwrap() - leap,
            86_400_000_000
        );
        let e = parse_begin_at("2027-02-30", now).unwrap_err();
        assert!(e.contains("2027-02 has 28 days"), "{e}");
        for bad in [
            "now+",
            "now*5",
            "tomorrow",
            "25:00",
            "2030-13-01",
            "now+5y",
            "2027-02-29",
            "2030-04-31",
            "2100-02-29",
        ] {
            assert!(parse_begin_at(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn begin_dates_are_read_in_the_time_zone_given() {
        // New York: UTC-5 in winter, UTC-4 in summer (from the second Sunday of March, 02:00).
        let ny = TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap();
        let utc = TimeZone::UTC;
        let now = 1_700_000_000_000_000; // 2023-11-14T22:13:20Z
        let at = |text, tz| parse_begin_in(text, now, tz).unwrap() / 1_000_000;
        // 2030-01-15T12:00 and 2030-07-15T12:00, in UTC seconds.
        assert_eq!(at("2030-01-15T12:00", &utc), 1_894_708_800);
        assert_eq!(at("2030-01-15T12:00", &ny), 1_894_708_800 + 5 * 3600);
        assert_eq!(at("2030-07-15T12:00", &utc), 1_910_347_200);
        assert_eq!(at("2030-07-15T12:00", &ny), 1_910_347_200 + 4 * 3600);
        // 02:30 on 2030-03-10 does not exist in New York: the clocks go from 02:00 to 03:00.
        assert_eq!(
            at("2030-03-10T02:30", &ny),
            at("2030-03-10T03:30", &ny),
            "a skipped time is taken after the change"
        );
        // A time of day is the next one in that zone: at 22:13 UTC (17:13 in New York) 18:00
        // is still ahead in New York (23:00 UTC), but passed in UTC (tomorrow's).
        assert_eq!(at("18:00", &ny), 1_700_002_800);
        assert_eq!(at("18:00", &utc), 1_700_071_200);
    }
}
