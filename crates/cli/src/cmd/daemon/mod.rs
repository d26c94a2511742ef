//! The resource manager's commands: the daemons (`mm`, `nm`), the embedded cluster
//! (`cluster up|down`) and the user commands (`submit`, `queue`, `wait`, `cancel`, `suspend`,
//! `resume`, `status`, `acct`, `output`), one file per family. The work is in
//! `cosched-mm`, `cosched-nm` and `cosched-client`.

mod bench;
mod jobs;
mod manager;
mod nodes;

use std::path::PathBuf;

use cosched_core::JobId;
use cosched_proto::proto::Request;

pub use crate::cmd::conn::ConnArgs;
use crate::cmd::submit::SubmitArgs;
pub(crate) use crate::cmd::submit::request_of;
use jobs::{IdArgs, IdsArgs, OutputArgs, QueueArgs, StatusArgs, WaitArgs};
use manager::{ClusterCmd, MmArgs, NmArgs};
pub(crate) use nodes::node_op;
use nodes::{BcastArgs, NodeCmd};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run the machine manager (normally started by `cosched cluster up`)
    Mm(Box<MmArgs>),
    /// Run a node manager that joins the machine manager at --mm
    Nm(Box<NmArgs>),
    /// Start or stop an embedded cluster of local daemons
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Submit a parallel job: `cosched submit -n 4 -- ./prog args`, or a batch script with
    /// #SBATCH/#COSCHED lines: `cosched submit job.sh`; prints its id
    Submit(Box<SubmitArgs>),
    /// Run a job interactively: wait for PEs, stream every rank's output, Ctrl-C cancels;
    /// exits with the job's exit code
    Run(Box<super::interactive::RunArgs>),
    /// List waiting, running and recently ended jobs
    Queue(Box<QueueArgs>),
    /// Wait until jobs end; exit status 0 only if all completed with exit code 0
    Wait(Box<WaitArgs>),
    /// Cancel jobs (waiting or running)
    Cancel(Box<IdsArgs>),
    /// Stop a job (SIGSTOP) and keep it from running until `resume`
    Suspend(Box<IdArgs>),
    /// Let a suspended job run again
    Resume(Box<IdArgs>),
    /// Hold jobs: a queued job is not started, a running one is stopped, until `release`
    Hold(Box<IdsArgs>),
    /// Release held jobs
    Release(Box<IdsArgs>),
    /// Node map and Ousterhout matrix (which job each PE runs in each slot)
    Status(Box<StatusArgs>),
    /// Live view: node map, Ousterhout matrix with the active slot, jobs; keys suspend,
    /// resume and cancel the selected job (q quits)
    Top(Box<super::top::Args>),
    /// Accounting: one record per job (filters, columns), summary metrics; SWF export
    Acct(Box<super::acct::AcctArgs>),
    /// Print what a rank of a job wrote to stdout and stderr
    Output(Box<OutputArgs>),
    /// Broadcast a file down the tree to every node manager's scratch directory (pipelined
    /// chunks, each checked by its keyed hash on every node), as your copy for your jobs
    /// (`cosched-staged:NAME`), or published to everyone's with --publish; prints its name
    Bcast(Box<BcastArgs>),
    /// Take nodes out of service or back (administrators): `drain` (running jobs finish,
    /// nothing new starts), `down` (its jobs end now), `resume`; shown by `status`
    #[command(subcommand)]
    Node(NodeCmd),
    /// Write a new cluster key (64 hex digits, mode 0600, a new file: an existing one is
    /// never overwritten) to copy to every host of the cluster
    Keygen {
        /// Where [default: the configuration's `key`, else $COSCHED_STATE_DIR/key]
        #[arg(long)]
        out: Option<PathBuf>,
        /// The cluster's configuration file
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Have the machine manager read its configuration file again (as SIGHUP does): nodes
    /// added or removed, limits changed; it restarts in place, running jobs keep running and
    /// the accounting is kept
    Reconfigure(Box<ConnArgs>),
}

pub fn run(c: Command) -> anyhow::Result<i32> {
    match c {
        Command::Mm(a) => manager::mm(*a),
        Command::Nm(a) => manager::nm(*a),
        Command::Cluster(c) => manager::cluster(c),
        Command::Submit(a) => jobs::submit(*a),
        Command::Run(a) => super::interactive::run(*a),
        Command::Hold(a) => jobs::many(&a, Request::Suspend, "held"),
        Command::Release(a) => jobs::many(&a, Request::Resume, "released"),
        Command::Queue(a) => jobs::queue(*a),
        Command::Wait(a) => jobs::wait(*a),
        Command::Cancel(a) => jobs::many(&a, Request::Cancel, "cancelled"),
        Command::Suspend(a) => jobs::simple(&a, Request::Suspend(JobId(a.id)), "suspended"),
        Command::Resume(a) => jobs::simple(&a, Request::Resume(JobId(a.id)), "resumed"),
        Command::Status(a) => jobs::status(*a),
        Command::Node(c) => nodes::node(c),
        Command::Keygen { out, config } => manager::keygen(out, config),
        Command::Reconfigure(conn) => manager::reconfigure(&conn),
        Command::Acct(a) => super::acct::run(*a),
        Command::Top(a) => super::top::run(*a),
        Command::Bcast(a) => nodes::bcast(*a),
        Command::Output(a) => jobs::output(*a),
    }
}
