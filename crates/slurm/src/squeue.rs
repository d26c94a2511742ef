//! `squeue`'s output: its `-o/--format` fields (`%[.][size]type[suffix]`), its `-O/--Format`
//! long names (`type[:[.][size][suffix]]`, comma-separated), its default and `-l` formats, its
//! order (partition, state code, priority), and pending array tasks folded into one line
//! (`6_[1-4%2]`) unless `-r/--array`.
//!
//! A field is left-justified and cut to its size; `.` right-justifies it (cut too, except
//! times and node lists, as in Slurm). The expected lines in the tests were captured from
//! Slurm 22.05 (Debian's slurm-wlm) running the same jobs on loopback.

use thiserror::Error;

use crate::job::{Context, JobView};
use crate::spec::{self, Spec};
use crate::state::JobState;
use crate::time::{self, Limit};

/// The default format (`squeue` alone).
pub const DEFAULT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// `squeue -l`.
pub const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SqueueError {
    #[error("Invalid job format specification: {0}")]
    Field(String),
}

/// A value squeue can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Account,
    ArrayJobId,
    ArrayTaskId,
    BatchHost,
    Cluster,
    Command,
    Comment,
    Contiguous,
    CpusPerTask,
    Dependency,
    EligibleTime,
    EndTime,
    ExcNodes,
    ExitCode,
    Feature,
    GroupId,
    GroupName,
    JobArrayId,
    JobId,
    Licenses,
    MinCpus,
    MinMemory,
    MinTmpDisk,
    Name,
    Nice,
    NodeList,
    NumCpus,
    NumNodes,
    NumTasks,
    OverSubscribe,
    Partition,
    PendingTime,
    Priority,
    PriorityLong,
    Qos,
    Reason,
    ReasonList,
    ReqNodes,
    Requeue,
    Reservation,
    RestartCnt,
    SchedNodes,
    Sct,
    StartTime,
    State,
    StateCompact,
    StdErr,
    StdIn,
    StdOut,
    SubmitTime,
    TimeLeft,
    TimeLimit,
    TimeUsed,
    UserId,
    UserName,
    WcKey,
    WorkDir,
}

/// `(letter, long name, header, field)`: Slurm's names, letters and headers.
const FIELDS: &[(Option<char>, &str, &str, Field)] = &[
    (Some('a'), "Account", "ACCOUNT", Field::Account),
    (Some('F'), "ArrayJobId", "ARRAY_JOB_ID", Field::ArrayJobId),
    (
        Some('K'),
        "ArrayTaskId",
        "ARRAY_TASK_ID",
        Field::ArrayTaskId,
    ),
    (Some('B'), "BatchHost", "EXEC_HOST", Field::BatchHost),
    (None, "Cluster", "CLUSTER", Field::Cluster),
    (Some('o'), "Command", "COMMAND", Field::Command),
    (Some('k'), "Comment", "COMMENT", Field::Comment),
    (Some('O'), "Contiguous", "CONTIGUOUS", Field::Contiguous),
    (None, "CPUsPerTask", "CPUS_PER_TASK", Field::CpusPerTask),
    (None, "cpus-per-task", "CPUS_PER_TASK", Field::CpusPerTask),
    (Some('E'), "Dependency", "DEPENDENCY", Field::Dependency),
    (None, "EligibleTime", "ELIGIBLE_TIME", Field::EligibleTime),
    (Some('e'), "EndTime", "END_TIME", Field::EndTime),
    (Some('x'), "ExcNodes", "EXC_NODES", Field::ExcNodes),
    (None, "exit_code", "EXIT_CODE", Field::ExitCode),
    (Some('f'), "Feature", "FEATURES", Field::Feature),
    (Some('G'), "GroupId", "GROUP", Field::GroupId),
    (Some('g'), "GroupName", "GROUP", Field::GroupName),
    (Some('i'), "JobArrayId", "JOBID", Field::JobArrayId),
    (Some('A'), "JobId", "JOBID", Field::JobId),
    (Some('W'), "Licenses", "LICENSES", Field::Licenses),
    (Some('c'), "MinCPUs", "MIN_CPUS", Field::MinCpus),
    (Some('m'), "MinMemory", "MIN_MEMORY", Field::MinMemory),
    (Some('d'), "MinTmpDisk", "MIN_TMP_DISK", Field::MinTmpDisk),
    (Some('j'), "Name", "NAME", Field::Name),
    (Some('y'), "Nice", "NICE", Field::Nice),
    (Some('N'), "NodeList", "NODELIST", Field::NodeList),
    (Some('C'), "NumCPUs", "CPUS", Field::NumCpus),
    (Some('D'), "NumNodes", "NODES", Field::NumNodes),
    (None, "NumTasks", "TASKS", Field::NumTasks),
    (
        Some('h'),
        "OverSubscribe",
        "OVER_SUBSCRIBE",
        Field::OverSubscribe,
    ),
    (Some('P'), "Partition", "PARTITION", Field::Partition),
    (None, "PendingTime", "PENDING_TIME", Field::PendingTime),
    (Some('p'), "Priority", "PRIORITY", Field::Priority),
    (Some('Q'), "PriorityLong", "PRIORITY", Field::PriorityLong),
    (Some('q'), "QOS", "QOS", Field::Qos),
    (Some('r'), "Reason", "REASON", Field::Reason),
    (
        Some('R'),
        "ReasonList",
        "NODELIST(REASON)",
        Field::ReasonList,
    ),
    (Some('n'), "ReqNodes", "REQ_NODES", Field::ReqNodes),
    (None, "Requeue", "REQUEUE", Field::Requeue),
    (Some('v'), "Reservation", "RESERVATION", Field::Reservation),
    (None, "RestartCnt", "RESTARTCNT", Field::RestartCnt),
    (Some('Y'), "SchedNodes", "SCHEDNODES", Field::SchedNodes),
    (Some('z'), "SCT", "S:C:T", Field::Sct),
    (Some('S'), "StartTime", "START_TIME", Field::StartTime),
    (Some('T'), "State", "STATE", Field::State),
    (Some('t'), "StateCompact", "ST", Field::StateCompact),
    (None, "StdErr", "STDERR", Field::StdErr),
    (None, "StdIn", "STDIN", Field::StdIn),
    (None, "StdOut", "STDOUT", Field::StdOut),
    (Some('V'), "SubmitTime", "SUBMIT_TIME", Field::SubmitTime),
    (Some('L'), "TimeLeft", "TIME_LEFT", Field::TimeLeft),
    (Some('l'), "TimeLimit", "TIME_LIMIT", Field::TimeLimit),
    (Some('M'), "TimeUsed", "TIME", Field::TimeUsed),
    (Some('U'), "UserId", "UID", Field::UserId),
    (Some('u'), "UserName", "USER", Field::UserName),
    (Some('w'), "WCKey", "WCKEY", Field::WcKey),
    (Some('Z'), "WorkDir", "WORK_DIR", Field::WorkDir),
];

fn header(f: Field) -> &'static str {
    FIELDS
        .iter()
        .find(|e| e.3 == f)
        .map(|e| e.2)
        .unwrap_or_default()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Text(String),
    Field(Spec<Field>),
}

/// A parsed output format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    items: Vec<Item>,
}

impl Format {
    /// An `-o/--format` string: `%[.][size]type[suffix]` fields; text before the first `%`
    /// is printed as it is.
    pub fn short(fmt: &str) -> Result<Format, SqueueError> {
        let (prefix, specs) = spec::percent(fmt).map_err(SqueueError::Field)?;
        let mut items = Vec::new();
        if !prefix.is_empty() {
            items.push(Item::Text(prefix));
        }
        for s in specs {
            let field = FIELDS
                .iter()
                .find(|e| e.0 == Some(s.key))
                .map(|e| e.3)
                .ok_or_else(|| SqueueError::Field(s.key.to_string()))?;
            items.push(Item::Field(s.with_key(field)));
        }
        Ok(Format { items })
    }

    /// A `-O/--Format` string: `type[:[.][size][suffix]]`, comma-separated; a field without
    /// a size is 20 wide.
    pub fn long(fmt: &str) -> Result<Format, SqueueError> {
        let mut items = Vec::new();
        for s in spec::named(fmt) {
            let field = FIELDS
                .iter()
                .find(|e| e.1.eq_ignore_ascii_case(&s.key))
                .map(|e| e.3)
                .ok_or_else(|| SqueueError::Field(s.key.clone()))?;
            items.push(Item::Field(s.with_key(field)));
        }
        Ok(Format { items })
    }

    /// The header line (without its newline).
    pub fn header(&self) -> String {
        self.render(|f| (header(f).to_string(), f != Field::ReasonList))
    }

    /// One job's line (without its newline).
    pub fn line(&self, row: &Row, ctx: &Context) -> String {
        self.render(|f| value(f, row, ctx))
    }

    fn render(&self, mut cell: impl FnMut(Field) -> (String, bool)) -> String {
        let mut out = String::new();
        for item in &self.items {
            match item {
                Item::Text(t) => out += t,
                Item::Field(s) => {
                    let (text, cut) = cell(s.key);
                    out += &spec::fit(&text, s.width, s.right, cut);
                    out += &s.suffix;
                }
            }
        }
        out
    }
}

/// One line of squeue's listing: a job, or pending tasks of one array folded together.
#[derive(Clone, Debug)]
pub struct Row<'a> {
    pub job: &'a JobView,
    /// The folded tasks' indices as Slurm writes them (`1-4%2`), when folded.
    pub tasks: Option<String>,
}

/// The lines of squeue's listing, in its order (partition, state code, priority highest
/// first, then id). The tasks of an array that never started (pending, or cancelled while
/// pending) are folded into one line per state unless `expand` (`-r/--array`), as Slurm
/// keeps an array as one record until a task starts.
pub fn rows(jobs: &[JobView], expand: bool) -> Vec<Row<'_>> {
    let mut sorted: Vec<&JobView> = jobs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.partition.as_str(), a.state.code())
            .cmp(&(b.partition.as_str(), b.state.code()))
            .then(b.priority().cmp(&a.priority()))
            .then(a.id.cmp(&b.id))
    });
    let mut out: Vec<Row> = Vec::new();
    let mut folded: Vec<(usize, Vec<u32>)> = Vec::new();
    for j in sorted {
        let foldable = |x: &JobView| !expand && x.start.is_none() && !x.held;
        if let (true, Some(a)) = (foldable(j), j.array)
            && let Some(k) = out.iter().position(|r| {
                r.job.array.map(|x| x.job) == Some(a.job)
                    && r.job.state == j.state
                    && foldable(r.job)
            })
        {
            match folded.iter_mut().find(|(row, _)| *row == k) {
                Some((_, idx)) => idx.push(a.index),
                None => folded.push((k, vec![out[k].job.array.map_or(0, |x| x.index), a.index])),
            }
            continue;
        }
        out.push(Row {
            job: j,
            tasks: None,
        });
    }
    for (k, mut idx) in folded {
        idx.sort_unstable();
        let throttle = out[k].job.array.and_then(|a| a.throttle);
        out[k].tasks = Some(index_ranges(&idx, throttle));
    }
    out
}

/// Indices as Slurm writes an array's task list: `1-4,7`, with `%N` for a throttle.
pub fn index_ranges(idx: &[u32], throttle: Option<u32>) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && idx[j + 1] == idx[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            idx[i].to_string()
        } else {
            format!("{}-{}", idx[i], idx[j])
        });
        i = j + 1;
    }
    let mut s = parts.join(",");
    if let Some(t) = throttle {
        s += &format!("%{t}");
    }
    s
}

/// A field's value for a row, and whether a right-justified value is cut to the width.
fn value(f: Field, row: &Row, ctx: &Context) -> (String, bool) {
    let j = row.job;
    let ts = |t: Option<i64>| match t {
        Some(_) => time::timestamp(t, ctx.offset),
        None => "N/A".to_string(),
    };
    let null = |s: Option<&str>| s.map_or_else(|| "(null)".to_string(), str::to_string);
    let text = match f {
        Field::Account | Field::Comment | Field::Feature | Field::Qos => "(null)".into(),
        Field::Licenses | Field::Reservation | Field::WcKey | Field::SchedNodes => "(null)".into(),
        Field::ArrayJobId => j.array.map_or(j.id, |a| a.job).to_string(),
        Field::ArrayTaskId => match (&row.tasks, j.array) {
            (Some(t), _) => t.clone(),
            (None, Some(a)) => a.index.to_string(),
            (None, None) => "N/A".into(),
        },
        Field::BatchHost => j.nodes.first().cloned().unwrap_or_else(|| "n/a".into()),
        Field::Cluster => ctx.cluster.to_string(),
        Field::Command => j.command.clone(),
        Field::Contiguous => "0".into(),
        Field::CpusPerTask | Field::MinCpus => j.cpus_per_task.max(1).to_string(),
        Field::Dependency => null(j.dependency.as_deref()),
        Field::EligibleTime => ts(j.eligible),
        Field::EndTime => ts(j.end_time(ctx.now)),
        Field::ExcNodes | Field::ReqNodes => String::new(),
        Field::ExitCode => j.exit_text(),
        Field::GroupId => j.gid.to_string(),
        Field::GroupName => j.group.clone(),
        Field::JobArrayId => match (&row.tasks, j.array) {
            (Some(t), Some(a)) => format!("{}_[{t}]", a.job),
            _ => j.id_text(),
        },
        Field::JobId => j.id.to_string(),
        Field::MinMemory | Field::MinTmpDisk | Field::Nice => "0".into(),
        Field::Name => j.name.clone(),
        Field::NodeList => return (j.node_list(), false),
        Field::NumCpus => j.num_cpus().to_string(),
        Field::NumNodes => j.num_nodes().to_string(),
        Field::NumTasks => j.ntasks.to_string(),
        Field::OverSubscribe => "OK".into(),
        Field::Partition => j.partition.clone(),
        Field::PendingTime => {
            let until = j.start.unwrap_or(ctx.now);
            (until - j.eligible.unwrap_or(until)).max(0).to_string()
        }
        Field::Priority => format!("{:.14}", j.priority() as f64 / f64::from(u32::MAX)),
        Field::PriorityLong => j.priority().to_string(),
        Field::Reason => j.reason.name().into(),
        Field::ReasonList => {
            let shows_reason = matches!(
                j.state,
                JobState::Pending
                    | JobState::Timeout
                    | JobState::OutOfMemory
                    | JobState::Deadline
                    | JobState::Failed
            );
            if shows_reason {
                format!("({})", j.reason.name())
            } else {
                return (j.node_list(), false);
            }
        }
        Field::Requeue => "1".into(),
        Field::RestartCnt => j.restarts.to_string(),
        Field::Sct => "*:*:*".into(),
        Field::StartTime => ts(j.start_time(ctx.now)),
        Field::State => j.state.name().into(),
        Field::StateCompact => j.state.code().into(),
        Field::StdErr => j.stderr.clone(),
        Field::StdIn => "/dev/null".into(),
        Field::StdOut => j.stdout.clone(),
        Field::SubmitTime => ts(Some(j.submit)),
        Field::TimeLeft => match j.limit {
            Limit::Unlimited => "UNLIMITED".into(),
            Limit::Secs(l) => return (time::squeue_secs(l as i64 - j.run_secs), false),
        },
        Field::TimeLimit => match j.limit {
            Limit::Unlimited => "UNLIMITED".into(),
            l => return (time::squeue_limit(l), false),
        },
        Field::TimeUsed => return (time::squeue_secs(j.run_secs), false),
        Field::UserId => j.uid.to_string(),
        Field::UserName => j.user.clone(),
        Field::WorkDir => j.work_dir.clone(),
    };
    (text, true)
}

/// The date line `squeue -l` prints first (`Fri Nov 27 10:16:17 2026`).
pub fn long_date(ctx: &Context) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let local = ctx.now + (ctx.offset)(ctx.now);
    let stamp = time::timestamp(Some(ctx.now), ctx.offset);
    // `YYYY-MM-DDTHH:MM:SS`
    let (y, rest) = stamp.split_at(4);
    let month: usize = rest[1..3].parse().unwrap_or(1);
    let day: u32 = rest[4..6].parse().unwrap_or(1);
    let weekday = DAYS[local.div_euclid(86_400).rem_euclid(7) as usize];
    format!(
        "{weekday} {} {day:>2} {} {y}",
        MONTHS[month - 1],
        &rest[7..15]
    )
}
