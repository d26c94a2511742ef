//! `squeue`: the queue as Slurm prints it. It lists what the machine manager holds live and
//! what ended in the last five minutes (Slurm's MinJobAge), filtered as squeue filters —
//! by default the live states only; `-t all` shows the ended ones too.

use clap::ArgAction;

use cosched_proto::proto::JobQuery;
use cosched_slurm::hostlist;
use cosched_slurm::squeue::{self, Format};
use cosched_slurm::state::{JobState, state_names};

use super::{JobSpec, fail, job_specs, view};

/// How long Slurm keeps an ended job in the queue (MinJobAge's default).
pub const MIN_JOB_AGE_SECS: i64 = 300;

#[derive(clap::Parser)]
#[command(
    name = "squeue",
    about = "The queue of the cosched cluster, as Slurm's squeue prints it",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Args {
    /// Show the jobs of hidden partitions too (every partition is shown)
    #[arg(short = 'a', long)]
    all: bool,
    /// One line per array task (pending tasks of an array are one line otherwise)
    #[arg(short = 'r', long = "array")]
    array: bool,
    /// No header
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,
    /// Repeat every this many seconds
    #[arg(short = 'i', long)]
    iterate: Option<u64>,
    /// These jobs (N, N_M, N_[1-3]; comma-separated)
    #[arg(short = 'j', long = "jobs", value_delimiter = ',')]
    jobs: Vec<String>,
    /// The long format (with STATE and TIME_LIMIT)
    #[arg(short = 'l', long)]
    long: bool,
    /// Only this user's jobs
    #[arg(long)]
    me: bool,
    /// Only jobs of these names
    #[arg(short = 'n', long = "name", value_delimiter = ',')]
    names: Vec<String>,
    /// Output format: %[.][size]type[suffix] fields (squeue's letters)
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// Output format by field names: type[:[.][size][suffix]],...
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    /// Only jobs of these partitions
    #[arg(short = 'p', long = "partition", value_delimiter = ',')]
    partitions: Vec<String>,
    /// Only jobs in these states (names or codes, or `all`)
    #[arg(short = 't', long = "states", value_delimiter = ',')]
    states: Vec<String>,
    /// Only jobs of these users (names or uids)
    #[arg(short = 'u', long = "user", value_delimiter = ',')]
    users: Vec<String>,
    /// Only jobs on these nodes (a hostlist)
    #[arg(short = 'w', long = "nodelist")]
    nodelist: Option<String>,
    #[arg(short = 'v', long, action = ArgAction::Count)]
    verbose: u8,
}

pub fn run(args: Vec<String>) -> i32 {
    let a: Args = match super::parse_args("squeue", &args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    loop {
        let code = once(&a);
        match a.iterate {
            Some(secs) if code == 0 => {
                println!();
                std::thread::sleep(std::time::Duration::from_secs(secs.max(1)));
            }
            _ => return code,
        }
    }
}

fn once(a: &Args) -> i32 {
    let fmt = match format(a) {
        Ok(f) => f,
        Err(e) => return fail("squeue", &e),
    };
    let specs = match job_specs(&a.jobs) {
        Ok(s) => s,
        Err(e) => return fail("squeue", &e),
    };
    let states = match states(&a.states) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut uids: Vec<u32> = Vec::new();
    for u in a
        .users
        .iter()
        .chain(std::env::var("SQUEUE_USERS").ok().as_slice())
    {
        match view::uid_of(u) {
            Some(uid) => uids.push(uid),
            // As Slurm: the user is named, and matches no job.
            None => eprintln!("squeue: error: Invalid user: {u}\n"),
        }
    }
    let users_given = !a.users.is_empty() || a.me;
    if a.me {
        uids.push(view::my_uid());
    }
    let nodes = match a.nodelist.as_deref().map(hostlist::expand).transpose() {
        Ok(n) => n,
        Err(e) => return fail("squeue", &e.to_string()),
    };
    let client = match super::client() {
        Ok(c) => c,
        Err(e) => return fail("squeue", &e),
    };
    let now = super::now_secs();
    let listing = client.query(
        JobQuery {
            since_us: Some((now - MIN_JOB_AGE_SECS) * 1_000_000),
            ..JobQuery::default()
        },
        None,
    );
    let (jobs, st) = match listing.and_then(|j| Ok((j, client.status()?))) {
        Ok(x) => x,
        Err(e) => return fail("squeue", &e.to_string()),
    };
    let views = view::job_views(&jobs, &st, &mut view::Names::default());
    if let [one] = specs.as_slice()
        && !views.iter().any(|j| one.names(j))
    {
        eprintln!("slurm_load_jobs error: Invalid job id specified");
        return 1;
    }
    let shown: Vec<_> = views
        .into_iter()
        .filter(|j| specs.is_empty() || specs.iter().any(|s: &JobSpec| s.names(j)))
        .filter(|j| match &states {
            None => j.state.is_live(),
            Some(list) => list.is_empty() || list.contains(&j.state),
        })
        .filter(|j| !users_given || uids.contains(&j.uid))
        .filter(|j| a.names.is_empty() || a.names.contains(&j.name))
        .filter(|j| j.in_partitions(&a.partitions))
        .filter(|j| {
            nodes
                .as_ref()
                .is_none_or(|n| j.nodes.iter().any(|x| n.contains(x)))
        })
        .collect();
    let ctx = super::context(now);
    let mut out = String::new();
    if a.long {
        out += &squeue::long_date(&ctx);
        out.push('\n');
    }
    if !a.noheader {
        out += &fmt.header();
        out.push('\n');
    }
    for row in squeue::rows(&shown, a.array) {
        out += &fmt.line(&row, &ctx);
        out.push('\n');
    }
    print!("{out}");
    0
}

/// The format asked for: `-o`, `-O`, `-l`, `$SQUEUE_FORMAT`, `$SQUEUE_FORMAT2`, or the
/// default.
fn format(a: &Args) -> Result<Format, String> {
    if a.long && a.format.is_some() {
        return Err(
            "Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry."
                .into(),
        );
    }
    let r = match (&a.format, &a.format_long, a.long) {
        (Some(f), _, _) => Format::short(f),
        (None, Some(f), _) => Format::long(f),
        (None, None, true) => Format::short(squeue::LONG),
        (None, None, false) => match (
            std::env::var("SQUEUE_FORMAT"),
            std::env::var("SQUEUE_FORMAT2"),
        ) {
            (Ok(f), _) => Format::short(&f),
            (_, Ok(f)) => Format::long(&f),
            _ => Format::short(squeue::DEFAULT),
        },
    };
    r.map_err(|e| e.to_string())
}

/// `-t`: `None` when not given (the live states), empty for `all`.
fn states(list: &[String]) -> Result<Option<Vec<JobState>>, i32> {
    let env = std::env::var("SQUEUE_STATES").ok();
    let list: Vec<String> = if list.is_empty() {
        match env {
            Some(e) => e.split(',').map(str::to_string).collect(),
            None => return Ok(None),
        }
    } else {
        list.to_vec()
    };
    if list.iter().any(|s| s.eq_ignore_ascii_case("all")) {
        return Ok(Some(Vec::new()));
    }
    list.iter()
        .map(|s| {
            JobState::parse(s).ok_or_else(|| {
                eprintln!("squeue: error: Invalid job state specified: {s}");
                eprintln!("squeue: error: Valid job states include: {}", state_names());
                1
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
