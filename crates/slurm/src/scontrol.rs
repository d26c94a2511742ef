//! `scontrol show job|node|partition`: records in Slurm's `Key=Value` layout, one record per
//! block (lines indented by three spaces, a blank line after each), or one line each with
//! `-o/--oneliner`.
//!
//! The keys and their order are Slurm 22.05's (captured from Debian's slurm-wlm on loopback;
//! see the tests). Keys for what cosched does not have (accounts, QOS, memory, generic
//! resources) carry the values Slurm shows when they are not set.

use crate::job::{Context, JobView};
use crate::node::{NodeView, PartitionView};
use crate::state::JobState;
use crate::time::{self, Limit};

/// Lines of one record; joined by [`record`].
type Lines = Vec<Vec<String>>;

/// A record as text: its lines, each a list of `Key=Value` words. In Slurm's layout every
/// line after the first is indented and a blank line closes the record; a job's record has
/// an indented empty line before it (`job`).
fn record(lines: Lines, oneliner: bool, job: bool) -> String {
    let lines: Vec<String> = lines.into_iter().map(|l| l.join(" ")).collect();
    if oneliner {
        format!("{}\n", lines.join(" "))
    } else if job {
        format!("{}\n   \n\n", lines.join("\n   "))
    } else {
        format!("{}\n\n", lines.join("\n   "))
    }
}

/// `scontrol show job` of one job.
pub fn show_job(j: &JobView, ctx: &Context, oneliner: bool) -> String {
    let ts = |t: Option<i64>| time::timestamp(t, ctx.offset);
    let mut first = vec![format!("JobId={}", j.id)];
    if let Some(a) = j.array {
        first.push(format!("ArrayJobId={}", a.job));
        first.push(format!("ArrayTaskId={}", a.index));
        if let Some(t) = a.throttle {
            first.push(format!("ArrayTaskThrottle={t}"));
        }
    }
    first.push(format!("JobName={}", j.name));
    let run = if j.state == JobState::Pending {
        0
    } else {
        j.run_secs
    };
    let limit = match j.limit {
        Limit::Unlimited => "UNLIMITED".to_string(),
        l => time::long_limit(l),
    };
    let started = j.start.is_some();
    let end = match (j.end_time(ctx.now), j.state.is_live(), j.limit) {
        (_, true, Limit::Unlimited) if started => "Unknown".into(),
        (e, _, _) => ts(e),
    };
    let start = ts(j.start_time(ctx.now));
    let dependency = j.dependency.as_deref().map_or("(null)".into(), |d| {
        if j.state == JobState::Pending {
            format!("{d}(unfulfilled)")
        } else {
            d.to_string()
        }
    });
    let nodes = j.node_list();
    let mut lines: Lines = vec![
        first,
        vec![
            format!("UserId={}({})", j.user, j.uid),
            format!("GroupId={}({})", j.group, j.gid),
            "MCS_label=N/A".into(),
        ],
        vec![
            format!("Priority={}", j.priority()),
            "Nice=0".into(),
            "Account=(null)".into(),
            "QOS=(null)".into(),
        ],
        vec![
            format!("JobState={}", j.state.name()),
            format!("Reason={}", j.reason.name()),
            format!("Dependency={dependency}"),
        ],
        vec![
            "Requeue=1".into(),
            format!("Restarts={}", j.restarts),
            format!("BatchFlag={}", u8::from(j.batch)),
            "Reboot=0".into(),
            format!("ExitCode={}", j.exit_text()),
        ],
        vec![
            format!("RunTime={}", time::long_secs(run)),
            format!("TimeLimit={limit}"),
            "TimeMin=N/A".into(),
        ],
        vec![
            format!("SubmitTime={}", ts(Some(j.submit))),
            format!("EligibleTime={}", ts(j.eligible)),
        ],
        vec![format!("AccrueTime={}", ts(j.eligible))],
        vec![
            format!("StartTime={start}"),
            format!("EndTime={end}"),
            "Deadline=N/A".into(),
        ],
        vec![
            format!(
                "SuspendTime={}",
                if j.state == JobState::Suspended {
                    "Unknown"
                } else {
                    "None"
                }
            ),
            format!("SecsPreSuspend={}", j.suspended_secs),
            format!("LastSchedEval={}", ts(j.start.or(j.eligible))),
            "Scheduler=Main".into(),
        ],
        vec![
            format!("Partition={}", j.partition),
            format!("AllocNode:Sid={}:0", ctx.cluster),
        ],
        vec!["ReqNodeList=(null)".into(), "ExcNodeList=(null)".into()],
        vec![format!("NodeList={nodes}")],
    ];
    if let Some(host) = j.nodes.first().filter(|_| j.batch) {
        lines.push(vec![format!("BatchHost={host}")]);
    }
    lines.extend([
        vec![
            format!("NumNodes={}", j.num_nodes()),
            format!("NumCPUs={}", j.num_cpus()),
            format!("NumTasks={}", j.ntasks),
            format!("CPUs/Task={}", j.cpus_per_task.max(1)),
            "ReqB:S:C:T=0:0:*:*".into(),
        ],
        vec![format!(
            "TRES=cpu={},node={},billing={}",
            j.num_cpus(),
            j.num_nodes(),
            j.num_cpus()
        )],
        vec![
            "Socks/Node=*".into(),
            "NtasksPerN:B:S:C=0:0:*:*".into(),
            "CoreSpec=*".into(),
        ],
        vec![
            format!("MinCPUsNode={}", j.cpus_per_task.max(1)),
            "MinMemoryNode=0".into(),
            "MinTmpDiskNode=0".into(),
        ],
        vec!["Features=(null)".into(), "DelayBoot=00:00:00".into()],
        vec![
            "OverSubscribe=OK".into(),
            "Contiguous=0".into(),
            "Licenses=(null)".into(),
            "Network=(null)".into(),
        ],
        vec![format!("Command={}", j.command)],
        vec![format!("WorkDir={}", j.work_dir)],
        vec![format!("StdErr={}", j.stderr)],
        vec!["StdIn=/dev/null".into()],
        vec![format!("StdOut={}", j.stdout)],
        vec!["Power=".into()],
    ]);
    record(lines, oneliner, true)
}

/// `scontrol show node` of one node.
pub fn show_node(n: &NodeView, oneliner: bool) -> String {
    let lines: Lines = vec![
        vec![
            format!("NodeName={}", n.name),
            "Arch=x86_64".into(),
            format!("CoresPerSocket={}", n.cpus),
        ],
        vec![
            format!("CPUAlloc={}", n.alloc_cpus),
            format!("CPUEfctv={}", n.cpus),
            format!("CPUTot={}", n.cpus),
            "CPULoad=N/A".into(),
        ],
        vec!["AvailableFeatures=(null)".into()],
        vec!["ActiveFeatures=(null)".into()],
        vec!["Gres=(null)".into()],
        vec![
            format!("NodeAddr={}", n.addr),
            format!("NodeHostName={}", n.name),
        ],
        vec![
            "RealMemory=1".into(),
            "AllocMem=0".into(),
            "Sockets=1".into(),
            "Boards=1".into(),
        ],
        vec![
            format!("State={}", n.state.scontrol()),
            "ThreadsPerCore=1".into(),
            "TmpDisk=0".into(),
            "Weight=1".into(),
            "Owner=N/A".into(),
            "MCS_label=N/A".into(),
        ],
        vec![format!("Partitions={}", n.partitions.join(","))],
        vec![format!("CfgTRES=cpu={},billing={}", n.cpus, n.cpus)],
        vec![if n.alloc_cpus > 0 {
            format!("AllocTRES=cpu={}", n.alloc_cpus)
        } else {
            "AllocTRES=".into()
        }],
    ];
    record(lines, oneliner, false)
}

/// `scontrol show partition` of one partition.
pub fn show_partition(p: &PartitionView, oneliner: bool) -> String {
    let yes = |b: bool| if b { "YES" } else { "NO" };
    let max_time = match p.max_time_secs {
        None => "UNLIMITED".into(),
        Some(s) => time::long_secs(s as i64),
    };
    let lines: Lines = vec![
        vec![format!("PartitionName={}", p.name)],
        vec![
            "AllowGroups=ALL".into(),
            "AllowAccounts=ALL".into(),
            "AllowQos=ALL".into(),
        ],
        vec![
            "AllocNodes=ALL".into(),
            format!("Default={}", yes(p.default)),
            "QoS=N/A".into(),
        ],
        vec![
            "DefaultTime=NONE".into(),
            "DisableRootJobs=NO".into(),
            "ExclusiveUser=NO".into(),
            "GraceTime=0".into(),
            "Hidden=NO".into(),
        ],
        vec![
            "MaxNodes=UNLIMITED".into(),
            format!("MaxTime={max_time}"),
            "MinNodes=0".into(),
            "LLN=NO".into(),
            "MaxCPUsPerNode=UNLIMITED".into(),
        ],
        vec![format!("Nodes={}", crate::hostlist::compress(&p.nodes))],
        vec![
            "PriorityJobFactor=1".into(),
            "PriorityTier=1".into(),
            "RootOnly=NO".into(),
            "ReqResv=NO".into(),
            "OverSubscribe=NO".into(),
        ],
        vec!["OverTimeLimit=NONE".into(), "PreemptMode=OFF".into()],
        vec![
            format!("State={}", if p.up { "UP" } else { "DOWN" }),
            format!("TotalCPUs={}", p.total_cpus),
            format!("TotalNodes={}", p.nodes.len()),
            "SelectTypeParameters=NONE".into(),
        ],
        vec!["JobDefaults=(null)".into()],
        vec![
            "DefMemPerNode=UNLIMITED".into(),
            "MaxMemPerNode=UNLIMITED".into(),
        ],
        vec![format!(
            "TRES=cpu={},node={},billing={}",
            p.total_cpus,
            p.nodes.len(),
            p.total_cpus
        )],
    ];
    record(lines, oneliner, false)
}
