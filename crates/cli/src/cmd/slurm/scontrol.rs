//! `scontrol`: `show job|node|partition [ID]` in Slurm's `Key=Value` records (`-o`: one line
//! each), `show hostnames|hostlist LIST` (a hostlist expanded, one name per line, or
//! compressed), and `hold`, `release`, `suspend`, `resume` of jobs (cosched's hold overlay:
//! a held queued job does not start, a held running one is stopped), and `update
//! NodeName=… State=DRAIN|DOWN|RESUME Reason=…` (`cosched node`). What cosched cannot do to a
//! job after its submission (`update`, `requeue`) is refused with the reason.
//! Commands may be abbreviated, as in Slurm (`scontrol sh j 5`).

use cosched_core::JobId;
use cosched_proto::proto::{JobQuery, NodeOp, Request};
use cosched_slurm::hostlist;

use super::{fail, job_specs, view};

const USAGE: &str = "Usage: scontrol [-o] [-Q] [-v] [-V] COMMAND
  show job [ID] | show node [NAME] | show partition [NAME]
  show hostnames [LIST] | show hostlist LIST
  hold ID... | release ID... | suspend ID... | resume ID...
  update NodeName=LIST State=DRAIN|DOWN|RESUME Reason=TEXT
  version
cosched answers to these of Slurm's scontrol (docs/slurm.md).";

/// Whether `word` names `full`: itself, or a prefix of it (Slurm takes abbreviations).
fn is(word: &str, full: &str) -> bool {
    !word.is_empty() && full.starts_with(&word.to_ascii_lowercase())
}

pub fn run(args: Vec<String>) -> i32 {
    let mut oneliner = false;
    let mut words: Vec<String> = Vec::new();
    for a in args {
        match a.as_str() {
            "-o" | "--oneliner" => oneliner = true,
            "-Q" | "--quiet" | "-d" | "--details" | "-a" | "--all" | "-v" | "--verbose" => {}
            "-h" | "--help" | "--usage" => {
                println!("{USAGE}");
                return 0;
            }
            s if s.starts_with('-') && words.is_empty() => {
                eprintln!("scontrol: unrecognized option '{s}'");
                eprintln!("Try \"scontrol --help\" for more information");
                return 1;
            }
            _ => words.push(a),
        }
    }
    let Some((cmd, rest)) = words.split_first() else {
        eprintln!("{USAGE}");
        return 1;
    };
    let cmd = cmd.to_ascii_lowercase();
    if is(&cmd, "version") {
        return super::version();
    }
    if cmd.len() >= 2 && is(&cmd, "show") {
        return show(rest, oneliner);
    }
    for (name, req) in [
        ("hold", Request::Suspend as fn(JobId) -> Request),
        ("release", Request::Resume),
        ("suspend", Request::Suspend),
        ("resume", Request::Resume),
        ("uhold", Request::Suspend),
    ] {
        if cmd == name || (cmd.len() >= 3 && is(&cmd, name)) {
            return act(rest, req);
        }
    }
    if is(&cmd, "requeue") || is(&cmd, "requeuehold") {
        return fail(
            "scontrol",
            "requeue: cosched requeues a job only when its node fails (the cluster's --requeue); cancel it and submit it again",
        );
    }
    if cmd.len() >= 2 && is(&cmd, "update") && rest.iter().any(|w| key_is(w, "nodename")) {
        return update_node(rest);
    }
    if cmd.len() >= 2 && is(&cmd, "update") {
        return fail(
            "scontrol",
            &format!(
                "update {}: cosched cannot change a job or a node after the fact yet; it can hold, release, suspend and resume jobs (scontrol hold|release|suspend|resume ID)",
                rest.join(" ")
            ),
        );
    }
    fail(
        "scontrol",
        &format!("invalid command: {cmd} (see scontrol --help)"),
    )
}

/// Whether `word` is `KEY=…` for `key` (any case).
fn key_is(word: &str, key: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(k, _)| k.eq_ignore_ascii_case(key))
}

/// `update NodeName=LIST State=DRAIN|DOWN|RESUME|UNDRAIN|IDLE Reason=TEXT`: `cosched node
/// drain|down|resume`.
fn update_node(words: &[String]) -> i32 {
    let (mut nodes, mut state, mut reason) = (None, None, None);
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            return fail("scontrol", &format!("update: {w:?} is not KEY=VALUE"));
        };
        match k.to_ascii_lowercase().as_str() {
            "nodename" => nodes = Some(v.to_string()),
            "state" => state = Some(v.to_ascii_lowercase()),
            "reason" => reason = Some(v.to_string()),
            other => {
                return fail(
                    "scontrol",
                    &format!(
                        "update: cosched changes a node's State (with a Reason) only, not {other}"
                    ),
                );
            }
        }
    }
    let op = match state.as_deref() {
        Some("drain") => NodeOp::Drain,
        Some("down") => NodeOp::Down,
        Some("resume" | "undrain" | "idle") => NodeOp::Resume,
        other => {
            return fail(
                "scontrol",
                &format!(
                    "update: State={} is not one cosched sets (DRAIN, DOWN, RESUME)",
                    other.unwrap_or("")
                ),
            );
        }
    };
    let nodes = vec![nodes.unwrap_or_default()];
    match crate::cmd::daemon::node_op(&Default::default(), op, &nodes, reason.as_deref()) {
        Ok(code) => code,
        Err(e) => fail("scontrol", &e.to_string()),
    }
}

fn show(rest: &[String], oneliner: bool) -> i32 {
    let Some((what, ids)) = rest.split_first() else {
        return fail(
            "scontrol",
            "show what? job, node, partition, hostnames, hostlist",
        );
    };
    let what = what.to_ascii_lowercase();
    if what.starts_with("hostnames") || what == "hostname" {
        let list = match ids.first() {
            Some(l) => l.clone(),
            None => match std::env::var("SLURM_JOB_NODELIST") {
                Ok(l) => l,
                Err(_) => {
                    return fail(
                        "scontrol",
                        "no hostlist given, and SLURM_JOB_NODELIST is not set",
                    );
                }
            },
        };
        return match hostlist::expand(&list) {
            Ok(names) => {
                for n in names {
                    println!("{n}");
                }
                0
            }
            Err(e) => fail("scontrol", &e.to_string()),
        };
    }
    if what.starts_with("hostlist") {
        let Some(list) = ids.first() else {
            return fail("scontrol", "show hostlist needs a list of names");
        };
        let names: Vec<&str> = list.split(',').filter(|n| !n.is_empty()).collect();
        let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        if what == "hostlistsorted" {
            names.sort();
        }
        println!("{}", hostlist::compress(&names));
        return 0;
    }
    let client = match super::client() {
        Ok(c) => c,
        Err(e) => return fail("scontrol", &e),
    };
    let st = match client.status() {
        Ok(s) => s,
        Err(e) => return fail("scontrol", &e.to_string()),
    };
    if is(&what, "jobs") {
        let specs = match job_specs(ids) {
            Ok(s) => s,
            Err(e) => return fail("scontrol", &e),
        };
        let now = super::now_secs();
        // What squeue would show: the live jobs and those ended lately.
        let since = (now - super::squeue::MIN_JOB_AGE_SECS) * 1_000_000;
        let jobs = match client.query(
            JobQuery {
                since_us: Some(since),
                ..JobQuery::default()
            },
            None,
        ) {
            Ok(j) => j,
            Err(e) => return fail("scontrol", &e.to_string()),
        };
        let views = view::job_views(&jobs, &st, &mut view::Names::default());
        let shown: Vec<_> = views
            .iter()
            .filter(|j| specs.is_empty() || specs.iter().any(|s| s.names(j)))
            .collect();
        if shown.is_empty() {
            if specs.is_empty() {
                println!("No jobs in the system");
                return 0;
            }
            eprintln!("slurm_load_jobs error: Invalid job id specified");
            return 1;
        }
        let ctx = super::context(now);
        for j in shown {
            print!("{}", cosched_slurm::scontrol::show_job(j, &ctx, oneliner));
        }
        return 0;
    }
    let (parts, nodes) = view::nodes_view(&st);
    if is(&what, "nodes") {
        let shown: Vec<_> = nodes
            .iter()
            .filter(|n| {
                ids.is_empty()
                    || ids
                        .iter()
                        .any(|i| hostlist::expand(i).is_ok_and(|l| l.contains(&n.name)))
            })
            .collect();
        if shown.is_empty() {
            return fail("scontrol", &format!("Node {} not found", ids.join(",")));
        }
        for n in shown {
            print!("{}", cosched_slurm::scontrol::show_node(n, oneliner));
        }
        return 0;
    }
    if is(&what, "partitions") {
        let shown: Vec<_> = parts
            .iter()
            .filter(|p| ids.is_empty() || ids.contains(&p.name))
            .collect();
        if shown.is_empty() {
            return fail(
                "scontrol",
                &format!("Partition {} not found", ids.join(",")),
            );
        }
        for p in shown {
            print!("{}", cosched_slurm::scontrol::show_partition(p, oneliner));
        }
        return 0;
    }
    fail(
        "scontrol",
        &format!("show {what}: cosched shows job, node, partition, hostnames and hostlist"),
    )
}

/// Sends `req` for every job `ids` name (the tasks of an array for its id); silent when
/// it succeeds, as Slurm's.
fn act(ids: &[String], req: fn(JobId) -> Request) -> i32 {
    if ids.is_empty() {
        return fail("scontrol", "a job id is needed");
    }
    let specs = match job_specs(ids) {
        Ok(s) => s,
        Err(e) => return fail("scontrol", &e),
    };
    let client = match super::client() {
        Ok(c) => c,
        Err(e) => return fail("scontrol", &e),
    };
    let now = super::now_secs();
    let listing = client.query(
        JobQuery {
            since_us: Some(now * 1_000_000),
            ..JobQuery::default()
        },
        None,
    );
    let (jobs, st) = match listing.and_then(|j| Ok((j, client.status()?))) {
        Ok(x) => x,
        Err(e) => return fail("scontrol", &e.to_string()),
    };
    let views = view::job_views(&jobs, &st, &mut view::Names::default());
    let mut status = 0;
    for s in &specs {
        let targets: Vec<_> = views.iter().filter(|j| s.names(j)).collect();
        if targets.is_empty() {
            eprintln!("Invalid job id specified for job {}", s.id);
            status = 1;
        }
        for j in targets {
            if let Err(e) = client.simple(req(JobId(j.id))) {
                eprintln!("scontrol: error: job {}: {e}", j.id_text());
                status = 1;
            }
        }
    }
    status
}
