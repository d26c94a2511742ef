//! Nodes and files across them: `node drain|down|resume` and `bcast`.

use std::path::PathBuf;

use cosched_proto::proto::{NodeOp, Scope};

use crate::cmd::conn::ConnArgs;
use crate::cmd::output::{emit, print_json};
use crate::cmd::submit::{BcastOpts, bcast_file};

/// What `cosched node` does.
#[derive(clap::Subcommand)]
pub enum NodeCmd {
    /// Let the nodes' running jobs finish and start nothing new there (Slurm's DRAIN)
    Drain(Box<NodeArgs>),
    /// End the nodes' jobs now (node_failed, or requeued with --requeue) and start nothing
    /// there
    Down(Box<NodeArgs>),
    /// Put drained or down nodes back in service
    Resume(Box<NodeArgs>),
}

#[derive(clap::Args)]
pub struct NodeArgs {
    /// Node names or hostlists (`n[01-04]`)
    #[arg(required = true)]
    nodes: Vec<String>,
    /// Why (required for drain and down; kept with who and when)
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    conn: ConnArgs,
}

impl NodeCmd {
    fn parts(self) -> (NodeOp, Box<NodeArgs>) {
        match self {
            NodeCmd::Drain(a) => (NodeOp::Drain, a),
            NodeCmd::Down(a) => (NodeOp::Down, a),
            NodeCmd::Resume(a) => (NodeOp::Resume, a),
        }
    }
}

#[derive(clap::Args)]
pub struct BcastArgs {
    /// The file to send
    file: PathBuf,
    /// Name to stage it under, within each node manager's scratch directory (default: the
    /// file name and a hash prefix); an absolute path is taken as is by node managers not
    /// running as root
    #[arg(long)]
    dest: Option<String>,
    /// Publish it: a read-only copy every user's jobs may run as `cosched-staged:NAME` (when
    /// they have no copy of that name of their own); administrators only
    #[arg(long)]
    publish: bool,
    /// Only these nodes (names, comma-separated; default: every node in the tree)
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    #[command(flatten)]
    opts: BcastOpts,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Drains, sets down or resumes nodes given by name or hostlist (`cosched node`, `scontrol
/// update nodename=… state=…`).
pub(crate) fn node_op(
    conn: &ConnArgs,
    op: NodeOp,
    lists: &[String],
    reason: Option<&str>,
) -> anyhow::Result<i32> {
    let mut names = Vec::new();
    for l in lists {
        names.extend(cosched_slurm::hostlist::expand(l)?);
    }
    conn.client()?.node(op, &names, reason)?;
    let done = match op {
        NodeOp::Drain => "drained",
        NodeOp::Down => "set down",
        NodeOp::Resume => "resumed",
    };
    eprintln!("{done} {}", cosched_slurm::hostlist::compress(&names));
    Ok(0)
}

/// `cosched node drain|down|resume`.
pub(super) fn node(c: NodeCmd) -> anyhow::Result<i32> {
    let (op, a) = c.parts();
    node_op(&a.conn, op, &a.nodes, a.reason.as_deref())
}

/// `cosched bcast`.
pub(super) fn bcast(a: BcastArgs) -> anyhow::Result<i32> {
    let client = a.conn.client()?;
    let scope = if a.publish {
        Scope::Public
    } else {
        Scope::User
    };
    let staging = a.conn.staging(a.dest.as_deref(), scope);
    let sent = bcast_file(&client, &a.file, &staging, &a.opts, &a.nodes)?;
    let secs = sent.took.as_secs_f64();
    if a.conn.json {
        print_json(&serde_json::json!({
            "dest": sent.dest, "bytes": sent.bytes, "nodes": sent.nodes,
            "seconds": secs, "streamed_seconds": sent.streamed.as_secs_f64(), "mb_per_s": sent.bytes as f64 / secs / 1e6,
        }))?;
    } else {
        emit(&format!(
            "{} ({} bytes) staged as {} on {} nodes in {:.1} ms ({:.1} MB/s)\n",
            a.file.display(),
            sent.bytes,
            sent.dest,
            sent.nodes.len(),
            secs * 1e3,
            sent.bytes as f64 / secs / 1e6
        ));
    }
    Ok(0)
}
