//! The options of `sbatch`, `srun` and `salloc`, and what cosched does with each: the one
//! table both the command line and `#SBATCH` directives are parsed with.
//!
//! Each option is [`Support::Same`] (done as Slurm does), [`Support::Own`] (cosched's, not
//! Slurm's: `--class`, `--monitor`, `--strict`), [`Support::Different`] (done, in
//! a way the text says), [`Support::NotYet`] (parsed and mapped, but the part of cosched it
//! needs — job steps, the administrator's limits, node-level placement — is not built: one
//! warning line says so), [`Support::Ignored`] (no meaning here: accepted with one warning
//! line, as a site's Slurm ignores the option of a plugin it does not run) or
//! [`Support::Refused`] (an error saying why). In strict mode (`--strict`, or
//! `COSCHED_SLURM_STRICT=1`) ignored and not-yet options are refused too.
//!
//! Parsing follows getopt_long as Slurm's commands use it: `-n4`, `-n 4`, `--ntasks=4`,
//! `--ntasks 4`, clustered flags (`-vQ`), a long option abbreviated to a unique prefix, an
//! optional argument only after `=`, options ending at `--` or at the first word that is not
//! one (the script and its arguments).

use thiserror::Error;

/// Which command an option belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    Sbatch,
    Srun,
    Salloc,
}

impl Cmd {
    pub fn name(self) -> &'static str {
        match self {
            Cmd::Sbatch => "sbatch",
            Cmd::Srun => "srun",
            Cmd::Salloc => "salloc",
        }
    }
    fn bit(self) -> u8 {
        match self {
            Cmd::Sbatch => SB,
            Cmd::Srun => SR,
            Cmd::Salloc => SA,
        }
    }
}

const SB: u8 = 1;
const SR: u8 = 2;
const SA: u8 = 4;
const ALL: u8 = SB | SR | SA;

/// Whether an option takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    No,
    Required,
    /// Only as `--opt=value` (or `-oVALUE` for a short option).
    Optional,
}

/// What cosched does with an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Same,
    /// Not Slurm's: one of cosched's own, what it does.
    Own(&'static str),
    Different(&'static str),
    NotYet(&'static str),
    Ignored(&'static str),
    Refused(&'static str),
}

/// One option of the table.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    pub long: &'static str,
    pub short: Option<char>,
    pub arg: Arg,
    cmds: u8,
    pub support: Support,
}

impl Opt {
    pub fn of(&self, cmd: Cmd) -> bool {
        self.cmds & cmd.bit() != 0
    }
}

const fn o(long: &'static str, short: Option<char>, arg: Arg, cmds: u8, support: Support) -> Opt {
    Opt {
        long,
        short,
        arg,
        cmds,
        support,
    }
}

use Arg::{No, Optional as Opt_, Required as Req};
use Support::{Different, Ignored, NotYet, Own, Refused, Same};

const STEPS: &str = "a part of job steps cosched does not run yet";
const PLACE: &str = "cosched's policies place a job's tasks on any free PEs; this placement \
                     constraint is not honoured yet";
const MEM_PER_CPU: &str = "the job's cgroup on each node is limited to it times the PEs the \
                           job holds there; otherwise as --mem";
const MEM: &str = "the job's cgroup on each node is limited to it (memory.max, no swap); \
                   a job killed for its memory ends OUT_OF_MEMORY; 0 is no limit but the \
                   node's; a job asking more than a node has is refused at submission";
const NO_GPU: &str = "cosched's nodes have no GPUs or generic resources";
const NO_ACCT: &str = "cosched has no accounts, QOS or fair-share";
const NO_TOPO: &str = "cosched places tasks on PEs without a socket/core/thread model";

/// Every option of sbatch, srun and salloc (Slurm 22.05), and cosched's own (`--class`,
/// `--monitor`, `--strict`), which `#SBATCH` lines of cosched's scripts have used.
pub const TABLE: &[Opt] = &[
    o("account", Some('A'), Req, ALL, Ignored(NO_ACCT)),
    o(
        "acctg-freq",
        None,
        Req,
        ALL,
        Ignored("cosched samples no per-task accounting"),
    ),
    o("array", Some('a'), Req, SB, Same),
    o(
        "batch",
        None,
        Req,
        SB,
        Ignored("cosched's nodes have no features"),
    ),
    o(
        "bb",
        None,
        Req,
        ALL,
        Ignored("cosched has no burst buffers"),
    ),
    o(
        "bbf",
        None,
        Req,
        ALL,
        Ignored("cosched has no burst buffers"),
    ),
    o("bcast", None, Opt_, SR, NotYet(STEPS)),
    o("bcast-exclude", None, Req, SR, NotYet(STEPS)),
    o(
        "begin",
        Some('b'),
        Req,
        ALL,
        Different(
            "takes now+N[s|m|h|d|w], HH:MM[:SS] and YYYY-MM-DD[THH:MM[:SS]]; not today, tomorrow, midnight, noon, teatime or MM/DD/YY",
        ),
    ),
    o("bell", None, No, SA, Ignored("cosched rings no bell")),
    o("chdir", Some('D'), Req, ALL, Same),
    o(
        "cluster-constraint",
        None,
        Req,
        ALL,
        Ignored("cosched is one cluster"),
    ),
    o(
        "class",
        None,
        Req,
        SB,
        Own("the job's class, for policies that have classes (t3d)"),
    ),
    o(
        "clusters",
        Some('M'),
        Req,
        SB | SA | SR,
        Refused("cosched submits to one cluster (the one of $COSCHED_STATE_DIR)"),
    ),
    o(
        "comment",
        None,
        Req,
        ALL,
        Ignored("cosched keeps no job comments"),
    ),
    o("compress", None, Opt_, SR, NotYet(STEPS)),
    o(
        "constraint",
        Some('C'),
        Req,
        ALL,
        NotYet("nodes have no features until the administrator's configuration is built"),
    ),
    o(
        "container",
        None,
        Req,
        ALL,
        Refused("cosched runs no OCI containers"),
    ),
    o(
        "contiguous",
        None,
        No,
        ALL,
        Ignored("cosched's nodes have no topology"),
    ),
    o("core-spec", Some('S'), Req, ALL, Ignored(NO_TOPO)),
    o("cores-per-socket", None, Req, ALL, Ignored(NO_TOPO)),
    o(
        "cpu-bind",
        None,
        Req,
        SR,
        Different("accepted; the node manager pins each task to its PE whatever the binding asked"),
    ),
    o(
        "cpu-freq",
        None,
        Req,
        ALL,
        Ignored("cosched does not set CPU frequencies"),
    ),
    o("cpus-per-gpu", None, Req, ALL, Ignored(NO_GPU)),
    o(
        "cpus-per-task",
        Some('c'),
        Req,
        ALL,
        NotYet(
            "SLURM_CPUS_PER_TASK is set, but each task gets one PE until the administrator's limits are built",
        ),
    ),
    o(
        "deadline",
        None,
        Req,
        ALL,
        Ignored("cosched does not remove jobs at a deadline"),
    ),
    o(
        "delay-boot",
        None,
        Req,
        ALL,
        Ignored("cosched does not reboot nodes"),
    ),
    o(
        "dependency",
        Some('d'),
        Req,
        ALL,
        Different(
            "after, afterany, afterok and afternotok (all must hold); not `?`, singleton, aftercorr or +time",
        ),
    ),
    o("disable-status", Some('X'), No, SR, NotYet(STEPS)),
    o("distribution", Some('m'), Req, ALL, Ignored(PLACE)),
    o("epilog", None, Req, SR, NotYet(STEPS)),
    o(
        "error",
        Some('e'),
        Req,
        SB | SR,
        Different("%j %A %a %x %u %N %t %%; not %s, %n or a width such as %5j"),
    ),
    o("exact", None, No, SR, NotYet(STEPS)),
    o("exclude", Some('x'), Req, SB | SA, Same),
    o(
        "exclude",
        Some('x'),
        Req,
        SR,
        Different(
            "outside an allocation as sbatch's; inside one ignored: a step's nodes are chosen with -w/-N among the allocation's",
        ),
    ),
    o("exclusive", None, Opt_, SR, Same),
    o(
        "exclusive",
        None,
        Opt_,
        SB | SA,
        NotYet(
            "a job's tasks get PEs, and other jobs may share its nodes; whole nodes are not reserved yet",
        ),
    ),
    o("export", None, Req, SB | SR, Same),
    o(
        "export-file",
        None,
        Req,
        SB,
        Refused("give the variables with --export"),
    ),
    o("external-launcher", None, No, SR, NotYet(STEPS)),
    o("extra-node-info", Some('B'), Req, ALL, Ignored(NO_TOPO)),
    o(
        "get-user-env",
        None,
        Opt_,
        SB | SA,
        Ignored("the job gets the submitter's environment (--export)"),
    ),
    o(
        "gid",
        None,
        Req,
        SB | SA,
        Refused("submit as the user the job should run as"),
    ),
    o("gpu-bind", None, Req, ALL, Ignored(NO_GPU)),
    o("gpu-freq", None, Req, ALL, Ignored(NO_GPU)),
    o("gpus", Some('G'), Req, ALL, Ignored(NO_GPU)),
    o("gpus-per-node", None, Req, ALL, Ignored(NO_GPU)),
    o("gpus-per-socket", None, Req, ALL, Ignored(NO_GPU)),
    o("gpus-per-task", None, Req, ALL, Ignored(NO_GPU)),
    o("gres", None, Req, ALL, Ignored(NO_GPU)),
    o("gres-flags", None, Req, ALL, Ignored(NO_GPU)),
    o("help", Some('h'), No, ALL, Same),
    o("het-group", None, Req, SR, NotYet(STEPS)),
    o("hint", None, Req, ALL, Ignored(NO_TOPO)),
    o("hold", Some('H'), No, ALL, Same),
    o("ignore-pbs", None, No, SB, Same),
    o("immediate", Some('I'), Opt_, SR | SA, NotYet(STEPS)),
    o(
        "input",
        Some('i'),
        Req,
        SB | SR,
        NotYet("a job's standard input is /dev/null"),
    ),
    o("job-name", Some('J'), Req, ALL, Same),
    o("jobid", None, Req, SR, Same),
    o("kill-command", Some('K'), Opt_, SA, NotYet(STEPS)),
    o("kill-on-bad-exit", Some('K'), Opt_, SR, Same),
    o(
        "kill-on-invalid-dep",
        None,
        Req,
        SB,
        Different("always yes: a job whose dependency can never be satisfied is cancelled"),
    ),
    o("label", Some('l'), No, SR, Same),
    o(
        "licenses",
        Some('L'),
        Req,
        ALL,
        Ignored("cosched has no licenses"),
    ),
    o(
        "mail-type",
        None,
        Req,
        ALL,
        Ignored("cosched sends no mail"),
    ),
    o(
        "mail-user",
        None,
        Req,
        ALL,
        Ignored("cosched sends no mail"),
    ),
    o(
        "mcs-label",
        None,
        Req,
        ALL,
        Ignored("cosched has no MCS plugin"),
    ),
    o("mem", None, Req, ALL, Different(MEM)),
    o("mem-bind", None, Req, ALL, Ignored(NO_TOPO)),
    o("mem-per-cpu", None, Req, ALL, Different(MEM_PER_CPU)),
    o("mem-per-gpu", None, Req, ALL, Ignored(NO_GPU)),
    o("mincpus", None, Req, ALL, Ignored(NO_TOPO)),
    o(
        "monitor",
        None,
        No,
        SB,
        Own("record the MPI program's communication (the PMPI shim; docs/monitor.md)"),
    ),
    o(
        "mpi",
        None,
        Req,
        SB | SR,
        Different(
            "auto (PMI-1 and PMIx: the default), pmix, pmi1 or none; not pmi2 or cray_shasta; for sbatch, the default of the script's steps (SLURM_MPI_TYPE, as srun reads it)",
        ),
    ),
    o("multi-prog", None, No, SR, NotYet(STEPS)),
    o(
        "nice",
        None,
        Opt_,
        ALL,
        Ignored("cosched's policies order jobs themselves"),
    ),
    o(
        "no-allocate",
        Some('Z'),
        No,
        SR,
        Refused("cosched starts nothing outside an allocation"),
    ),
    o("no-bell", None, No, SA, Ignored("cosched rings no bell")),
    o(
        "no-kill",
        Some('k'),
        Opt_,
        ALL,
        Ignored(
            "a job loses the tasks of a failed node; --requeue of the cluster decides what follows",
        ),
    ),
    o(
        "no-requeue",
        None,
        No,
        SB,
        Ignored("requeueing after a node failure follows the cluster's --requeue"),
    ),
    o("nodefile", Some('F'), Req, SB | SA, NotYet(PLACE)),
    o("nodelist", Some('w'), Req, SR, Same),
    o("nodelist", Some('w'), Req, SB | SA, Same),
    o(
        "nodes",
        Some('N'),
        Req,
        ALL,
        Different(
            "exactly N nodes (the minimum of N-M); with --ntasks-per-node M tasks on each in node order, without it -n spread evenly (the first nodes one more); policies that place by their own geometry (scojo, t3d) refuse it",
        ),
    ),
    o("ntasks", Some('n'), Req, ALL, Same),
    o("ntasks-per-core", None, Req, ALL, Ignored(NO_TOPO)),
    o("ntasks-per-gpu", None, Req, ALL, Ignored(NO_GPU)),
    o(
        "ntasks-per-node",
        None,
        Req,
        ALL,
        Different(
            "at most this many tasks on each of the job's nodes (without -n: N × this many tasks)",
        ),
    ),
    o("ntasks-per-socket", None, Req, ALL, Ignored(NO_TOPO)),
    o(
        "open-mode",
        None,
        Req,
        SB | SR,
        Different("truncate (the default) only: append is not supported yet"),
    ),
    o(
        "output",
        Some('o'),
        Req,
        SB | SR,
        Different("%j %A %a %x %u %N %t %%; not %s, %n or a width such as %5j"),
    ),
    o(
        "overcommit",
        Some('O'),
        No,
        ALL,
        Ignored("cosched gives every task a PE; time-sharing is the policy's"),
    ),
    o("overlap", None, No, SR, Same),
    o(
        "oversubscribe",
        Some('s'),
        No,
        ALL,
        Ignored("sharing PEs is the policy's (gang scheduling)"),
    ),
    o("parsable", None, No, SB, Same),
    o(
        "partition",
        Some('p'),
        Req,
        ALL,
        Different("cosched has one partition, `all`; another name is accepted with a warning"),
    ),
    o("power", None, Req, ALL, Ignored("cosched manages no power")),
    o(
        "prefer",
        None,
        Req,
        ALL,
        Ignored("cosched's nodes have no features"),
    ),
    o("preserve-env", Some('E'), No, SR, NotYet(STEPS)),
    o(
        "priority",
        None,
        Req,
        ALL,
        Ignored("cosched's policies order jobs themselves"),
    ),
    o(
        "profile",
        None,
        Req,
        ALL,
        Ignored("cosched gathers no profiles"),
    ),
    o("prolog", None, Req, SR, NotYet(STEPS)),
    o(
        "propagate",
        None,
        Opt_,
        SB | SR,
        Ignored("tasks get the node manager's resource limits"),
    ),
    o("pty", None, No, SR, NotYet(STEPS)),
    o("qos", Some('q'), Req, ALL, Ignored(NO_ACCT)),
    o("quiet", Some('Q'), No, ALL, Same),
    o("quit-on-interrupt", None, No, SR, NotYet(STEPS)),
    o(
        "reboot",
        None,
        No,
        ALL,
        Ignored("cosched does not reboot nodes"),
    ),
    o("relative", Some('r'), Req, SR, NotYet(STEPS)),
    o(
        "requeue",
        None,
        No,
        SB,
        Ignored("requeueing after a node failure follows the cluster's --requeue"),
    ),
    o(
        "reservation",
        None,
        Req,
        ALL,
        Ignored("cosched has no reservations"),
    ),
    o("resv-ports", None, Opt_, SR, NotYet(STEPS)),
    o("send-libs", None, Opt_, SR, NotYet(STEPS)),
    o(
        "signal",
        None,
        Req,
        ALL,
        NotYet(
            "signals before the time limit are not sent yet: the job gets SIGTERM at its limit, then SIGKILL after the cluster's --kill-wait",
        ),
    ),
    o("slurmd-debug", None, Req, SR, Ignored("there is no slurmd")),
    o("sockets-per-node", None, Req, ALL, Ignored(NO_TOPO)),
    o("spread-job", None, No, ALL, NotYet(PLACE)),
    o(
        "strict",
        None,
        No,
        ALL,
        Own("refuse the options cosched ignores or has not built"),
    ),
    o(
        "switches",
        None,
        Req,
        ALL,
        Ignored("cosched's nodes have no switch topology"),
    ),
    o("task-epilog", None, Req, SR, NotYet(STEPS)),
    o("task-prolog", None, Req, SR, NotYet(STEPS)),
    o(
        "test-only",
        None,
        No,
        SB | SR,
        Refused("cosched queue --forecast shows expected starts"),
    ),
    o("thread-spec", None, Req, ALL, Ignored(NO_TOPO)),
    o("threads", Some('T'), Req, SR, NotYet(STEPS)),
    o("threads-per-core", None, Req, ALL, Ignored(NO_TOPO)),
    o("time", Some('t'), Req, ALL, Same),
    o(
        "time-min",
        None,
        Req,
        ALL,
        Ignored("cosched's policies take the time limit as the estimate"),
    ),
    o(
        "tmp",
        None,
        Req,
        ALL,
        Ignored("cosched tracks no temporary disk"),
    ),
    o("tres-per-task", None, Req, ALL, Ignored(NO_GPU)),
    o(
        "uid",
        None,
        Req,
        SB | SA,
        Refused("submit as the user the job should run as"),
    ),
    o(
        "unbuffered",
        Some('u'),
        No,
        SR,
        Different("srun relays its tasks' output line by line as their files grow (every 0.2 s)"),
    ),
    o("usage", None, No, ALL, Same),
    o("use-min-nodes", None, No, ALL, Ignored(PLACE)),
    o("verbose", Some('v'), No, ALL, Same),
    o("version", Some('V'), No, ALL, Same),
    o("wait", Some('W'), No, SB, Same),
    o("wait", Some('W'), Req, SR, NotYet(STEPS)),
    o("wckey", None, Req, ALL, Ignored(NO_ACCT)),
    o("wrap", None, Req, SB, Same),
];

impl Support {
    /// The word docs/slurm.md uses for it.
    pub fn word(self) -> &'static str {
        match self {
            Support::Same => "same",
            Support::Own(_) => "cosched's own",
            Support::Different(_) => "different",
            Support::NotYet(_) => "not yet",
            Support::Ignored(_) => "ignored (warning)",
            Support::Refused(_) => "not supported",
        }
    }

    /// What cosched does, when it is not simply what Slurm does.
    pub fn note(self) -> &'static str {
        match self {
            Support::Same => "",
            Support::Own(s)
            | Support::Different(s)
            | Support::NotYet(s)
            | Support::Ignored(s)
            | Support::Refused(s) => s,
        }
    }
}

/// The table as Markdown, one row per option and command set: what docs/slurm.md shows and
/// `cosched slurm options` prints.
pub fn markdown() -> String {
    let mut out = String::from(
        "| option | short | sbatch | srun | salloc | cosched | how, or why not |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for o in TABLE {
        let mark = |c: Cmd| if o.of(c) { "✓" } else { "" };
        let arg = match o.arg {
            Arg::No => "",
            Arg::Required => "=…",
            Arg::Optional => "[=…]",
        };
        out += &format!(
            "| `--{}{arg}` | {} | {} | {} | {} | {} | {} |\n",
            o.long,
            o.short.map_or_else(String::new, |c| format!("`-{c}`")),
            mark(Cmd::Sbatch),
            mark(Cmd::Srun),
            mark(Cmd::Salloc),
            o.support.word(),
            o.support.note().replace('|', "\\|"),
        );
    }
    out
}

/// An option as given: its table entry and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    pub long: &'static str,
    pub value: Option<String>,
}

/// The options of a command line or of a script's directives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// In the order given (a later one wins).
    pub opts: Vec<Given>,
    /// The words after the options (the script and its arguments).
    pub rest: Vec<String>,
    /// One line per ignored or not-yet option (each option once).
    pub warnings: Vec<String>,
}

impl Parsed {
    /// The last value of `long`, if given.
    pub fn value(&self, long: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|g| g.long == long)
            .and_then(|g| g.value.as_deref())
    }

    /// Whether `long` was given.
    pub fn has(&self, long: &str) -> bool {
        self.opts.iter().any(|g| g.long == long)
    }

    /// How many times `long` was given (`-vvv`).
    pub fn count(&self, long: &str) -> usize {
        self.opts.iter().filter(|g| g.long == long).count()
    }

    /// These options, with `earlier`'s before them (so that these win) and both warnings.
    pub fn over(mut self, earlier: Parsed) -> Parsed {
        let mut opts = earlier.opts;
        opts.append(&mut self.opts);
        let mut warnings = earlier.warnings;
        for w in self.warnings {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        Parsed {
            opts,
            rest: self.rest,
            warnings,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum OptError {
    #[error("unrecognized option '{0}'")]
    Unknown(String),
    #[error("option '{0}' is ambiguous; possibilities: {1}")]
    Ambiguous(String, String),
    #[error("option '{0}' requires an argument")]
    Missing(String),
    #[error("option '--{0}' doesn't allow an argument")]
    NoValue(String),
    #[error("--{0} is not supported: {1}")]
    Refused(&'static str, &'static str),
    #[error(
        "--{0} is {1} here ({2}), and strict mode (--strict or COSCHED_SLURM_STRICT=1) refuses it"
    )]
    Strict(&'static str, &'static str, &'static str),
}

/// The table's entry for `--long` of `cmd` (exact, or a unique prefix).
fn find_long(cmd: Cmd, name: &str) -> Result<&'static Opt, OptError> {
    let mine = || TABLE.iter().filter(|o| o.of(cmd));
    if let Some(o) = mine().find(|o| o.long == name) {
        return Ok(o);
    }
    let matches: Vec<&Opt> = mine().filter(|o| o.long.starts_with(name)).collect();
    match matches.as_slice() {
        [] => Err(OptError::Unknown(format!("--{name}"))),
        [one] => Ok(one),
        many => Err(OptError::Ambiguous(
            format!("--{name}"),
            many.iter()
                .map(|o| format!("'--{}'", o.long))
                .collect::<Vec<_>>()
                .join(" "),
        )),
    }
}

fn find_short(cmd: Cmd, c: char) -> Result<&'static Opt, OptError> {
    TABLE
        .iter()
        .find(|o| o.of(cmd) && o.short == Some(c))
        .ok_or_else(|| OptError::Unknown(format!("-{c}")))
}

/// Parses `args` (without the program name) against `cmd`'s options. Options end at `--`
/// or at the first other word, which begins [`Parsed::rest`].
pub fn parse(cmd: Cmd, args: &[String], strict: bool) -> Result<Parsed, OptError> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let opt = find_long(cmd, name)?;
            let value = match (opt.arg, inline) {
                (Arg::No, Some(_)) => return Err(OptError::NoValue(opt.long.into())),
                (Arg::No, None) | (Arg::Optional, None) => None,
                (_, Some(v)) => Some(v),
                (Arg::Required, None) => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| OptError::Missing(format!("--{}", opt.long)))?;
                    i += 1;
                    Some(v.clone())
                }
            };
            take(cmd, opt, value, strict, &mut out)?;
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let opt = find_short(cmd, chars[k])?;
                k += 1;
                let attached: String = chars[k..].iter().collect();
                let value = match opt.arg {
                    Arg::No => None,
                    Arg::Optional => {
                        k = chars.len();
                        (!attached.is_empty()).then_some(attached)
                    }
                    Arg::Required => {
                        k = chars.len();
                        if attached.is_empty() {
                            let v = args
                                .get(i)
                                .ok_or_else(|| OptError::Missing(format!("-{}", chars[0])))?;
                            i += 1;
                            Some(v.clone())
                        } else {
                            Some(attached)
                        }
                    }
                };
                take(cmd, opt, value, strict, &mut out)?;
            }
            continue;
        }
        // The first word that is not an option: the script (or program) and its arguments.
        i -= 1;
        break;
    }
    out.rest = args[i..].to_vec();
    Ok(out)
}

/// Records one option, or refuses it.
fn take(
    cmd: Cmd,
    opt: &'static Opt,
    value: Option<String>,
    strict: bool,
    out: &mut Parsed,
) -> Result<(), OptError> {
    let warning = match opt.support {
        Support::Refused(why) => return Err(OptError::Refused(opt.long, why)),
        Support::Ignored(why) if strict => return Err(OptError::Strict(opt.long, "ignored", why)),
        Support::NotYet(why) if strict => {
            return Err(OptError::Strict(opt.long, "not built yet", why));
        }
        Support::Ignored(why) => Some(format!(
            "{}: warning: --{} is ignored: {why}",
            cmd.name(),
            opt.long
        )),
        Support::NotYet(why) => Some(format!(
            "{}: warning: --{} is not fully supported yet: {why}",
            cmd.name(),
            opt.long
        )),
        Support::Same | Support::Own(_) | Support::Different(_) => None,
    };
    if let Some(w) = warning
        && !out.warnings.contains(&w)
    {
        out.warnings.push(w);
    }
    out.opts.push(Given {
        long: opt.long,
        value,
    });
    Ok(())
}

/// The directive lines of a script that begin with `prefix` (`#SBATCH`, `#COSCHED`): those
/// after the `#!` line up to the first line that is neither blank nor a comment, as sbatch
/// reads them; each with its line number (from 1) and the text after the prefix.
pub fn directive_bodies<'a>(text: &'a str, prefix: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            break;
        }
        if let Some(rest) = line
            .strip_prefix(prefix)
            .filter(|r| r.is_empty() || r.starts_with(char::is_whitespace))
        {
            out.push((n + 1, rest));
        }
    }
    out
}

/// A script's `#SBATCH` directives, each line's words parsed with the table, with where it
/// is (`file:line`, for errors about its values).
pub fn directive_lines(
    file: &str,
    text: &str,
    strict: bool,
) -> Result<Vec<(String, Parsed)>, String> {
    let mut out = Vec::new();
    for (n, rest) in directive_bodies(text, "#SBATCH") {
        let at = format!("{file}:{n}");
        let words = split_words(rest).map_err(|e| format!("{at}: {e}"))?;
        let parsed = parse(Cmd::Sbatch, &words, strict).map_err(|e| format!("{at}: {e}"))?;
        if let Some(extra) = parsed.rest.first() {
            return Err(format!(
                "{at}: {extra:?} is not an option (a directive holds options only)"
            ));
        }
        out.push((at, parsed));
    }
    Ok(out)
}

/// A script's directives as one set of options (a later line wins), each option's warning
/// once.
pub fn directives(file: &str, text: &str, strict: bool) -> Result<Parsed, String> {
    Ok(directive_lines(file, text, strict)?
        .into_iter()
        .fold(Parsed::default(), |acc, (_, p)| p.over(acc)))
}

/// Splits a directive's text into words: whitespace separates, '…' and "…" quote, and a
/// word beginning with `#` starts a comment.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None if c == '#' && !in_word => break,
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Whether strict mode is asked for by the environment's `COSCHED_SLURM_STRICT` value.
pub fn strict_from_env(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("no"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn getopt_forms_are_all_read() {
        let p = parse(
            Cmd::Sbatch,
            &args("-n4 -N 2 --ntasks-per-node=2 --time 10 -vQ --job-n=x job.sh a -n 9"),
            false,
        )
        .unwrap();
        assert_eq!(p.value("ntasks"), Some("4"));
        assert_eq!(p.value("nodes"), Some("2"));
        assert_eq!(p.value("ntasks-per-node"), Some("2"));
        assert_eq!(p.value("time"), Some("10"));
        assert_eq!(p.value("job-name"), Some("x"), "a unique prefix");
        assert!(p.has("verbose") && p.has("quiet"));
        assert_eq!(p.rest, args("job.sh a -n 9"), "options end at the script");
        let p = parse(Cmd::Sbatch, &args("--exclusive -- x"), false).unwrap();
        assert_eq!(p.value("exclusive"), None);
        assert_eq!(p.rest, args("x"));
        let p = parse(Cmd::Sbatch, &args("--exclusive=user x"), false).unwrap();
        assert_eq!(p.value("exclusive"), Some("user"));
        // cosched's own --strict is an option of every command.
        assert!(
            parse(Cmd::Sbatch, &args("--strict x"), true)
                .unwrap()
                .has("strict")
        );
    }

    #[test]
    fn each_ignored_option_warns_once_and_strict_refuses_it() {
        let p = parse(
            Cmd::Sbatch,
            &args("--mail-type=ALL --mail-type=END -A proj --qos normal x"),
            false,
        )
        .unwrap();
        // One line per option, however often it is given.
        assert_eq!(p.warnings.len(), 3, "{:?}", p.warnings);
        assert!(p.warnings[0].starts_with("sbatch: warning: --mail-type is ignored"));
        assert!(p.warnings[1].contains("--account") && p.warnings[2].contains("--qos"));
        let e = parse(Cmd::Sbatch, &args("--mail-type=ALL x"), true).unwrap_err();
        assert!(matches!(e, OptError::Strict("mail-type", ..)), "{e}");
        let e = parse(Cmd::Sbatch, &args("--input=in.txt x"), true).unwrap_err();
        assert!(e.to_string().contains("strict mode"), "{e}");
        // Same and different options pass strict mode.
        assert!(parse(Cmd::Sbatch, &args("-n 2 -J a --mem=4G x"), true).is_ok());
    }

    #[test]
    fn unknown_refused_and_malformed_options_are_errors() {
        let e = parse(Cmd::Sbatch, &args("--bogus x"), false).unwrap_err();
        assert_eq!(e.to_string(), "unrecognized option '--bogus'");
        let e = parse(Cmd::Sbatch, &args("--uid=5 x"), false).unwrap_err();
        assert!(matches!(e, OptError::Refused("uid", _)));
        assert!(matches!(
            parse(Cmd::Sbatch, &args("--nt=3"), false),
            Err(OptError::Ambiguous(..))
        ));
        assert!(matches!(
            parse(Cmd::Sbatch, &args("-n"), false),
            Err(OptError::Missing(_))
        ));
        assert!(matches!(
            parse(Cmd::Sbatch, &args("--parsable=1"), false),
            Err(OptError::NoValue(_))
        ));
        // srun's -W takes seconds, sbatch's is a flag: each command its own entry.
        assert_eq!(
            parse(Cmd::Srun, &args("-W 5 prog"), false)
                .unwrap()
                .value("wait"),
            Some("5")
        );
        assert_eq!(
            parse(Cmd::Sbatch, &args("-W x"), false).unwrap().rest,
            args("x")
        );
        // srun-only options are not sbatch's.
        assert!(parse(Cmd::Sbatch, &args("--pty x"), false).is_err());
    }

    #[test]
    fn every_option_is_in_the_table_once_per_command() {
        for cmd in [Cmd::Sbatch, Cmd::Srun, Cmd::Salloc] {
            let mine: Vec<&Opt> = TABLE.iter().filter(|o| o.of(cmd)).collect();
            for o in &mine {
                assert_eq!(
                    mine.iter().filter(|x| x.long == o.long).count(),
                    1,
                    "--{} twice for {cmd:?}",
                    o.long
                );
                if let Some(c) = o.short {
                    assert_eq!(
                        mine.iter().filter(|x| x.short == Some(c)).count(),
                        1,
                        "-{c} twice for {cmd:?}"
                    );
                }
            }
        }
        // The options sbatch --help lists (Slurm 22.05) are all known to sbatch.
        for long in [
            "array",
            "account",
            "bb",
            "bbf",
            "begin",
            "comment",
            "cpu-freq",
            "cpus-per-task",
            "dependency",
            "deadline",
            "delay-boot",
            "chdir",
            "error",
            "export",
            "export-file",
            "get-user-env",
            "gid",
            "gres",
            "gres-flags",
            "hold",
            "ignore-pbs",
            "input",
            "job-name",
            "no-kill",
            "licenses",
            "clusters",
            "container",
            "distribution",
            "mail-type",
            "mail-user",
            "mcs-label",
            "ntasks",
            "nice",
            "no-requeue",
            "ntasks-per-node",
            "nodes",
            "output",
            "overcommit",
            "partition",
            "parsable",
            "power",
            "priority",
            "profile",
            "propagate",
            "qos",
            "quiet",
            "reboot",
            "requeue",
            "oversubscribe",
            "core-spec",
            "signal",
            "spread-job",
            "switches",
            "thread-spec",
            "time",
            "time-min",
            "uid",
            "use-min-nodes",
            "verbose",
            "wait",
            "wckey",
            "wrap",
            "cluster-constraint",
            "contiguous",
            "constraint",
            "nodefile",
            "mem",
            "mincpus",
            "reservation",
            "tmp",
            "nodelist",
            "exclude",
            "exclusive",
            "mem-per-cpu",
            "sockets-per-node",
            "cores-per-socket",
            "threads-per-core",
            "extra-node-info",
            "ntasks-per-core",
            "ntasks-per-socket",
            "cpus-per-gpu",
            "gpus",
            "gpu-bind",
            "gpu-freq",
            "gpus-per-node",
            "gpus-per-socket",
            "gpus-per-task",
            "mem-per-gpu",
            "help",
            "usage",
            "version",
            "open-mode",
        ] {
            assert!(
                TABLE.iter().any(|o| o.long == long && o.of(Cmd::Sbatch)),
                "--{long}"
            );
        }
    }

    #[test]
    fn directives_are_read_with_the_same_table() {
        let text = "#!/bin/sh\n#SBATCH -n 2\n#SBATCH --mail-type=END # comment\n\
                    #SBATCH --job-name 'a b'\n#SBATCH -n 3\n\necho\n#SBATCH --bogus\n";
        let p = directives("j.sh", text, false).unwrap();
        assert_eq!(p.value("ntasks"), Some("3"), "a later directive wins");
        assert_eq!(p.value("job-name"), Some("a b"));
        assert_eq!(p.warnings.len(), 1);
        let e = directives("j.sh", "#!/bin/sh\n#SBATCH --bogus\n", false).unwrap_err();
        assert_eq!(e, "j.sh:2: unrecognized option '--bogus'");
        let e = directives("j.sh", "#!/bin/sh\n#SBATCH -n 1 extra\n", false).unwrap_err();
        assert!(e.starts_with("j.sh:2: \"extra\" is not an option"), "{e}");
        let e = directives("j.sh", "#!/bin/sh\n#SBATCH --qos=x\n", true).unwrap_err();
        assert!(e.starts_with("j.sh:2: --qos is ignored here"), "{e}");
    }

    #[test]
    fn strictness_from_the_environment() {
        assert!(strict_from_env(Some("1")));
        assert!(strict_from_env(Some("yes")));
        assert!(!strict_from_env(Some("0")));
        assert!(!strict_from_env(Some("")));
        assert!(!strict_from_env(None));
    }
}
