//! `scancel`: cancel jobs by id (`N`, every task of array `N`; `N_M`; `N_[1-3]`) or by
//! filters (`-u`, `--me`, `-n`, `-t`, `-p`, `-w`); `N.S` ends step S of job N alone. As
//! Slurm's, a job that already ended or
//! is unknown is passed over silently (`-v` says so), and the status is 1 only when a
//! cancel was refused (another user's job). `--signal` sends what cosched can: STOP and CONT
//! are its suspend and resume; KILL and TERM end the job (SIGTERM, then SIGKILL after the
//! cluster's kill wait); other signals are refused.

use clap::ArgAction;

use cosched_core::JobId;
use cosched_proto::proto::{JobQuery, Request};
use cosched_slurm::hostlist;
use cosched_slurm::state::JobState;

use super::{fail, job_specs, view};

#[derive(clap::Parser)]
#[command(
    name = "scancel",
    about = "Cancel jobs of the cosched cluster, as Slurm's scancel",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Args {
    /// Job ids: N (a job, or every task of array N), N_M, N_[1-3]
    ids: Vec<String>,
    /// Only jobs of this user
    #[arg(short = 'u', long = "user")]
    user: Option<String>,
    /// Only this user's jobs
    #[arg(long)]
    me: bool,
    /// Only jobs of this name
    #[arg(short = 'n', long = "name", visible_alias = "jobname")]
    name: Option<String>,
    /// Only jobs in this state (PENDING, RUNNING or SUSPENDED)
    #[arg(short = 't', long = "state")]
    state: Option<String>,
    /// Only jobs of this partition
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    /// Only jobs on these nodes (a hostlist)
    #[arg(short = 'w', long = "nodelist")]
    nodelist: Option<String>,
    /// Send this signal instead of cancelling: STOP (suspend), CONT (resume), KILL or TERM
    /// (cancel)
    #[arg(short = 's', long = "signal")]
    signal: Option<String>,
    /// The batch step only (the whole job here: it has no other steps)
    #[arg(short = 'b', long)]
    batch: bool,
    /// Every step (the whole job)
    #[arg(short = 'f', long)]
    full: bool,
    /// Cancel without Slurm's transitional-state retries (no effect here)
    #[arg(short = 'H', long)]
    hurry: bool,
    #[arg(short = 'Q', long)]
    quiet: bool,
    #[arg(short = 'v', long, action = ArgAction::Count)]
    verbose: u8,
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,
}

/// What scancel asks of the machine manager for each job.
fn request(signal: Option<&str>) -> Result<fn(JobId) -> Request, String> {
    let Some(sig) = signal else {
        return Ok(Request::Cancel);
    };
    let s = sig.trim().to_ascii_uppercase();
    let s = s.strip_prefix("SIG").unwrap_or(&s);
    match s {
        "STOP" | "19" | "TSTP" | "20" => Ok(Request::Suspend),
        "CONT" | "18" => Ok(Request::Resume),
        "KILL" | "9" | "TERM" | "15" => Ok(Request::Cancel),
        _ => Err(format!(
            "--signal={sig}: cosched sends a job only STOP and CONT (suspend and resume), or ends it (KILL, TERM)"
        )),
    }
}

/// `N.S` with a step number: the job and the step.
fn step_of(text: &str) -> Option<(JobId, u32)> {
    let (job, step) = text.trim().split_once('.')?;
    Some((JobId(job.parse().ok()?), step.parse().ok()?))
}

pub fn run(args: Vec<String>) -> i32 {
    let a: Args = match super::parse_args("scancel", &args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let filtered = a.user.is_some()
        || a.me
        || a.name.is_some()
        || a.state.is_some()
        || a.partition.is_some()
        || a.nodelist.is_some();
    if a.ids.is_empty() && !filtered {
        return fail("scancel", "No job identification provided");
    }
    // `N.S` names one step: it ends alone, its allocation and other steps go on.
    let (steps, ids): (Vec<String>, Vec<String>) = a
        .ids
        .iter()
        .flat_map(|i| i.split(',').map(str::to_string).collect::<Vec<_>>())
        .partition(|i| step_of(i).is_some());
    let mut status = 0;
    if !steps.is_empty() {
        let client = match super::client() {
            Ok(c) => c,
            Err(e) => return fail("scancel", &e),
        };
        for text in &steps {
            let (job, step) = step_of(text).expect("partitioned");
            if a.verbose > 0 {
                eprintln!("scancel: Terminating step {text}");
            }
            if let Err(e) = client.simple(Request::CancelStep { job, step }) {
                eprintln!("scancel: error: Kill job error on job id {text}: {e}");
                status = 1;
            }
        }
        if ids.is_empty() && !filtered {
            return status;
        }
    }
    let req = match request(a.signal.as_deref()) {
        Ok(r) => r,
        Err(e) => return fail("scancel", &e),
    };
    let specs = match job_specs(&ids) {
        Ok(s) => s,
        Err(e) => return fail("scancel", &e),
    };
    let state = match a.state.as_deref().map(|s| JobState::parse(s).ok_or(s)) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(s)) => return fail("scancel", &format!("Invalid job state specified: {s}")),
    };
    let uid = match (&a.user, a.me) {
        (Some(u), _) => match view::uid_of(u) {
            Some(uid) => Some(uid),
            None => return fail("scancel", &format!("Invalid user name: {u}")),
        },
        (None, true) => Some(view::my_uid()),
        (None, false) => None,
    };
    let nodes = match a.nodelist.as_deref().map(hostlist::expand).transpose() {
        Ok(n) => n,
        Err(e) => return fail("scancel", &e.to_string()),
    };
    let client = match super::client() {
        Ok(c) => c,
        Err(e) => return fail("scancel", &e),
    };
    // The live jobs: only those can be cancelled.
    let live = client.query(
        JobQuery {
            states: vec![
                cosched_proto::proto::JobState::Queued,
                cosched_proto::proto::JobState::Running,
                cosched_proto::proto::JobState::Suspended,
            ],
            ..JobQuery::default()
        },
        None,
    );
    let (jobs, st) = match live.and_then(|j| Ok((j, client.status()?))) {
        Ok(x) => x,
        Err(e) => return fail("scancel", &e.to_string()),
    };
    let views = view::job_views(&jobs, &st, &mut view::Names::default());
    for s in &specs {
        if a.verbose > 0 && !views.iter().any(|j| s.names(j)) {
            eprintln!("scancel: Job {} is already done or unknown", s.id);
        }
    }
    for j in views
        .iter()
        .filter(|j| specs.is_empty() || specs.iter().any(|s| s.names(j)))
        .filter(|j| uid.is_none_or(|u| j.uid == u))
        .filter(|j| a.name.as_ref().is_none_or(|n| &j.name == n))
        .filter(|j| state.is_none_or(|s| j.state == s))
        .filter(|j| a.partition.as_ref().is_none_or(|p| &j.partition == p))
        .filter(|j| {
            nodes
                .as_ref()
                .is_none_or(|n| j.nodes.iter().any(|x| n.contains(x)))
        })
    {
        if a.verbose > 0 {
            eprintln!("scancel: Terminating job {}", j.id_text());
        }
        if let Err(e) = client.simple(req(JobId(j.id))) {
            let msg = e.to_string();
            // Ended since the listing: as Slurm, not an error.
            if msg.contains("already ended") {
                continue;
            }
            eprintln!(
                "scancel: error: Kill job error on job id {}: {msg}",
                j.id_text()
            );
            status = 1;
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_onto_what_cosched_does() {
        let r = |s| request(Some(s)).map(|f| f(JobId(1)));
        assert!(matches!(r("STOP"), Ok(Request::Suspend(_))));
        assert!(matches!(r("SIGCONT"), Ok(Request::Resume(_))));
        assert!(matches!(r("9"), Ok(Request::Cancel(_))));
        assert!(matches!(
            request(None).map(|f| f(JobId(1))),
            Ok(Request::Cancel(_))
        ));
        assert!(r("USR1").unwrap_err().contains("only STOP and CONT"));
    }

    #[test]
    fn a_step_id_names_one_step_and_batch_or_array_ids_name_jobs() {
        assert_eq!(step_of("12.3"), Some((JobId(12), 3)));
        assert_eq!(step_of("12.batch"), None);
        assert_eq!(step_of("12_4"), None);
        assert_eq!(step_of("12"), None);
    }
}
