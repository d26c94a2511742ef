//! `sacct`: the job records as Slurm's accounting prints them, from the machine manager's
//! database (the same records as `cosched acct`). Without `-j`, the jobs of the time window
//! `-S`/`-E` (from midnight today by default, as sacct), of this user unless `-a`, `-u` or
//! root. One line per job, then one per step (`N.batch`, `N.0`, …) unless `-X`.

use clap::ArgAction;

use cosched_client::client::Client;
use cosched_core::JobId;
use cosched_proto::proto::{JobInfo, JobQuery};
use cosched_slurm::sacct::{self, Style};
use cosched_slurm::state::JobState;

use super::{JobSpec, fail, job_specs, view};

#[derive(clap::Parser)]
#[command(
    name = "sacct",
    about = "Job accounting of the cosched cluster, as Slurm's sacct prints it",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Args {
    /// Every user's jobs
    #[arg(short = 'a', long = "allusers")]
    allusers: bool,
    /// JobID, State and ExitCode only
    #[arg(short = 'b', long)]
    brief: bool,
    /// Separate -p/-P fields with this instead of `|`
    #[arg(long)]
    delimiter: Option<String>,
    /// Show every record of a job (each is shown once here)
    #[arg(short = 'D', long)]
    duplicates: bool,
    /// Jobs that did not end before this time (HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], now-N…)
    #[arg(short = 'S', long = "starttime")]
    start: Option<String>,
    /// Jobs submitted by this time (same forms)
    #[arg(short = 'E', long = "endtime")]
    end: Option<String>,
    /// The fields (`--helpformat` lists them), `Name%N` for a width
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// List the fields
    #[arg(short = 'e', long = "helpformat")]
    helpformat: bool,
    /// These jobs (N, N_M, N.batch; comma-separated)
    #[arg(short = 'j', long = "jobs", value_delimiter = ',')]
    jobs: Vec<String>,
    /// Only jobs of these names
    #[arg(long = "name", value_delimiter = ',')]
    names: Vec<String>,
    /// No header
    #[arg(short = 'n', long = "noheader")]
    noheader: bool,
    /// `|` after every field
    #[arg(short = 'p', long = "parsable")]
    parsable: bool,
    /// `|` between fields
    #[arg(short = 'P', long = "parsable2")]
    parsable2: bool,
    /// Only jobs of these partitions
    #[arg(short = 'r', long = "partition", value_delimiter = ',')]
    partitions: Vec<String>,
    /// Only jobs in these states (names or codes)
    #[arg(short = 's', long = "state", value_delimiter = ',')]
    states: Vec<String>,
    /// Only jobs of these users (names or uids)
    #[arg(
        short = 'u',
        long = "user",
        visible_alias = "uid",
        value_delimiter = ','
    )]
    users: Vec<String>,
    /// Allocations only: no lines of their steps (`N.batch`, `N.0`, …)
    #[arg(short = 'X', long = "allocations")]
    allocations: bool,
    #[arg(short = 'v', long, action = ArgAction::Count)]
    verbose: u8,
    #[arg(short = 'h', long, action = ArgAction::Help)]
    help: Option<bool>,
}

pub fn run(args: Vec<String>) -> i32 {
    let a: Args = match super::parse_args("sacct", &args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if a.helpformat {
        for chunk in sacct::field_names().chunks(4) {
            println!(
                "{}",
                chunk
                    .iter()
                    .map(|n| format!("{n:<20}"))
                    .collect::<String>()
                    .trim_end()
            );
        }
        return 0;
    }
    match report(&a) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => fail("sacct", &e),
    }
}

fn report(a: &Args) -> Result<String, String> {
    let fields = match (&a.format, a.brief) {
        (Some(f), _) => f.clone(),
        (None, true) => sacct::BRIEF_FIELDS.into(),
        (None, false) => {
            std::env::var("SACCT_FORMAT").unwrap_or_else(|_| sacct::DEFAULT_FIELDS.into())
        }
    };
    let cols = sacct::columns(&fields).map_err(|e| e.to_string())?;
    let style = match (a.parsable2, a.parsable) {
        (true, _) => Style::Parsable2,
        (false, true) => Style::Parsable,
        _ => Style::Table,
    };
    let delimiter = a.delimiter.as_deref().unwrap_or("|");
    let states: Vec<JobState> = a
        .states
        .iter()
        .map(|s| JobState::parse(s).ok_or_else(|| format!("unrecognized job state value '{s}'")))
        .collect::<Result<_, _>>()?;
    let mut uids = Vec::new();
    for u in &a.users {
        uids.push(view::uid_of(u).ok_or_else(|| format!("Invalid user id: {u}"))?);
    }
    let me = view::my_uid();
    // As sacct: a user sees their own jobs unless they ask for others' (root sees all).
    if uids.is_empty() && !a.allusers && me != 0 && a.jobs.is_empty() {
        uids.push(me);
    }
    let now = super::now_secs();
    let when = |t: &Option<String>, flag: &str| -> Result<Option<i64>, String> {
        t.as_deref()
            .map(|t| time_at(t, now * 1_000_000).map_err(|e| e.replace("--begin", flag)))
            .transpose()
    };
    let specs = job_specs(&a.jobs)?;
    let mut since = when(&a.start, "--starttime")?;
    if since.is_none() && specs.is_empty() {
        since = Some(midnight(now) * 1_000_000);
    }
    let until = when(&a.end, "--endtime")?;
    let client = super::client()?;
    let st = client.status().map_err(|e| e.to_string())?;
    let mut phases = Vec::new();
    for s in &states {
        phases.extend(s.phases().iter().map(|p| view::cosched_state(*p)));
    }
    if !states.is_empty() && phases.is_empty() {
        // Only states cosched never gives a job: none match.
        return Ok(render(&cols, &[], style, delimiter, a.noheader, now));
    }
    let jobs: Vec<JobInfo> = if specs.is_empty() {
        client
            .query(
                JobQuery {
                    users: uids,
                    states: phases,
                    since_us: since,
                    until_us: until,
                    ..JobQuery::default()
                },
                None,
            )
            .map_err(|e| e.to_string())?
    } else {
        by_ids(&client, &specs)?
            .into_iter()
            .filter(|j| uids.is_empty() || j.user.is_some_and(|u| uids.contains(&u)))
            .filter(|j| phases.is_empty() || phases.contains(&j.state))
            .collect()
    };
    let views: Vec<_> = view::job_views(&jobs, &st, &mut view::Names::default())
        .into_iter()
        .zip(&jobs)
        .filter(|(j, _)| specs.is_empty() || specs.iter().any(|s| s.names(j)))
        .filter(|(j, _)| a.names.is_empty() || a.names.contains(&j.name))
        .filter(|(j, _)| j.in_partitions(&a.partitions))
        .flat_map(|(j, info)| {
            let steps = if a.allocations {
                Vec::new()
            } else {
                view::step_views(info, &j, &st, now)
            };
            std::iter::once(j).chain(steps)
        })
        .collect();
    Ok(render(&cols, &views, style, delimiter, a.noheader, now))
}

fn render(
    cols: &[sacct::Column],
    views: &[cosched_slurm::job::JobView],
    style: Style,
    delimiter: &str,
    noheader: bool,
    now: i64,
) -> String {
    let ctx = super::context(now);
    let mut out = String::new();
    if !noheader {
        for l in sacct::header(cols, style, delimiter) {
            out += &l;
            out.push('\n');
        }
    }
    for j in views {
        out += &sacct::line(cols, j, &ctx, style, delimiter);
        out.push('\n');
    }
    out
}

/// The jobs `specs` name: each id, and for the id of an array every task (its tasks have
/// the ids after it). Unknown ids are passed over, as sacct shows nothing for them.
fn by_ids(client: &Client, specs: &[JobSpec]) -> Result<Vec<JobInfo>, String> {
    let mut out: Vec<JobInfo> = Vec::new();
    for s in specs {
        let Ok(found) = client.jobs(&[JobId(s.id)]) else {
            continue;
        };
        let Some(head) = found.into_iter().next() else {
            continue;
        };
        let array = head.io.array.filter(|t| t.job == head.id());
        out.push(head);
        if array.is_some() {
            let rest = client
                .query(
                    JobQuery {
                        after: Some(JobId(s.id)),
                        ..JobQuery::default()
                    },
                    Some(cosched_proto::start_conditions::MAX_ARRAY_TASKS),
                )
                .map_err(|e| e.to_string())?;
            out.extend(
                rest.into_iter()
                    .take_while(|j| j.io.array.is_some_and(|t| t.job == JobId(s.id))),
            );
        }
    }
    out.sort_by_key(JobInfo::id);
    out.dedup_by_key(|j| j.id());
    Ok(out)
}

/// An instant of `-S`/`-E` (µs since the epoch): the forms of `--begin`, but a time of day
/// is today's even when it has passed (sacct looks back).
fn time_at(text: &str, now_us: i64) -> Result<i64, String> {
    let t = crate::cmd::batch::parse_begin_at(text, now_us)?;
    let time_of_day = !text.contains('-') && !text.starts_with("now");
    Ok(if time_of_day && t > now_us {
        t - 86_400_000_000
    } else {
        t
    })
}

/// Local midnight of the day of `now` (seconds since the epoch).
fn midnight(now: i64) -> i64 {
    let local = now + view::local_offset(now);
    now - local.rem_euclid(86_400)
}
