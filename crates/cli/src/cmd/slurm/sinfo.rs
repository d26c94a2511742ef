//! `sinfo`: the cluster's partitions (`all` without a configuration) and their nodes, by
//! state (`idle`, `mix`, `alloc`, `down*`), as Slurm's sinfo prints them.

use clap::ArgAction;

use cosched_slurm::hostlist;
use cosched_slurm::sinfo::{self, Format};

use super::{fail, view};

#[derive(clap::Parser)]
#[command(
    name = "sinfo",
    about = "Partitions and nodes of the cosched cluster, as Slurm's sinfo prints them",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Args {
    /// Every partition (all are shown)
    #[arg(short = 'a', long)]
    all: bool,
    /// Group only nodes of the same state (as by default here)
    #[arg(short = 'e', long)]
    exact: bool,
    /// No header
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    /// One line per node
    #[arg(short = 'N', long = "Node")]
    node: bool,
    /// The long format
    #[arg(short = 'l', long)]
    long: bool,
    /// Only these nodes (a hostlist)
    #[arg(short = 'n', long = "nodes")]
    nodes: Option<String>,
    /// Output format: %[.][size]type[suffix]
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// Output format by field names: type[:[.][size][suffix]],...
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    /// Only these partitions
    #[arg(short = 'p', long = "partition", value_delimiter = ',')]
    partitions: Vec<String>,
    /// Only nodes in these states (idle, mix, alloc, down, unk, responding, no_respond)
    #[arg(short = 't', long = "states", value_delimiter = ',')]
    states: Vec<String>,
    #[arg(short = 'v', long, action = ArgAction::Count)]
    verbose: u8,
    #[arg(long, action = ArgAction::Help)]
    help: Option<bool>,
}

pub fn run(args: Vec<String>) -> i32 {
    let a: Args = match super::parse_args("sinfo", &args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let format = match (&a.format, &a.format_long) {
        (Some(f), _) => Format::short(f),
        (None, Some(f)) => Format::long(f),
        (None, None) => Ok(Format::default_of(
            match (a.node, a.long) {
                (true, true) => sinfo::NODES_LONG,
                (true, false) => sinfo::NODES,
                (false, true) => sinfo::LONG,
                (false, false) => sinfo::DEFAULT,
            },
            a.node,
        )),
    };
    let format = match format {
        Ok(f) => f,
        Err(e) => return fail("sinfo", &e.to_string()),
    };
    let wanted = match a.nodes.as_deref().map(hostlist::expand).transpose() {
        Ok(n) => n,
        Err(e) => return fail("sinfo", &e.to_string()),
    };
    let st = match super::client().and_then(|c| c.status().map_err(|e| e.to_string())) {
        Ok(st) => st,
        Err(e) => return fail("sinfo", &e),
    };
    let (mut parts, mut nodes) = view::nodes_view(&st);
    parts.retain(|p| a.partitions.is_empty() || a.partitions.contains(&p.name));
    nodes.retain(|n| wanted.as_ref().is_none_or(|w| w.contains(&n.name)));
    nodes.retain(|n| a.states.is_empty() || a.states.iter().any(|s| n.state.matches(s)));
    let rows = sinfo::rows(&parts, &nodes, a.node);
    let mut out = String::new();
    if a.long {
        out += &cosched_slurm::squeue::long_date(&super::context(super::now_secs()));
        out.push('\n');
    }
    for l in sinfo::render(&format, &rows, a.noheader) {
        out += &l;
        out.push('\n');
    }
    print!("{out}");
    0
}
