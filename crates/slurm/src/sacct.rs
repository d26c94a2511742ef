//! `sacct`'s output: its field names (`--format`, matched as Slurm does: any case, a prefix
//! naming the first field it begins, `Name%N` for a width), its default and `--brief`
//! fields, the table (each field right-justified to its width — `JobID` left — a text too
//! long ending in `+`, a row of dashes under the header) and the `|`-separated forms of
//! `-p` (a `|` after every field) and `-P` (between fields).
//!
//! A job is an allocation's line and, without `-X`, one line per step (`N.batch` for a
//! batch script, `N.0`, `N.1`, … for `srun`'s steps), whose fields that belong to the
//! allocation (partition, user, time limit, priority, reason) are empty, as in Slurm's.
//! Fields cosched does not measure (memory high-water marks, CPU times of the processes)
//! are empty, as Slurm leaves them on an allocation's line.

use thiserror::Error;

use crate::job::{Context, JobView};
use crate::time::{self, Limit};

/// The fields of `sacct` alone.
pub const DEFAULT_FIELDS: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";
/// The fields of `sacct -b/--brief`.
pub const BRIEF_FIELDS: &str = "jobid,state,exitcode";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SacctError {
    #[error("Invalid field requested: \"{0}\"")]
    Field(String),
}

/// How a field prints in a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Text: cut to the width with a `+` as its last character.
    Text,
    /// A number, or an instant, or a duration: never cut.
    Whole,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Account,
    AllocCpus,
    AllocNodes,
    AllocTres,
    AveRss,
    AveVmSize,
    Cluster,
    Comment,
    Constraints,
    CpuTime,
    CpuTimeRaw,
    DerivedExitCode,
    Elapsed,
    ElapsedRaw,
    Eligible,
    End,
    ExitCode,
    Flags,
    Gid,
    Group,
    JobId,
    JobIdRaw,
    JobName,
    MaxRss,
    MaxRssNode,
    MaxRssTask,
    MaxVmSize,
    NCpus,
    NNodes,
    NodeList,
    NTasks,
    Partition,
    Priority,
    Qos,
    Reason,
    ReqCpus,
    ReqMem,
    ReqNodes,
    ReqTres,
    Reservation,
    Start,
    State,
    Submit,
    SubmitLine,
    Suspended,
    SystemCpu,
    Timelimit,
    TimelimitRaw,
    TotalCpu,
    Uid,
    User,
    UserCpu,
    WcKey,
    WorkDir,
}

/// `(name, width, kind, field)` in Slurm's order (which decides what a prefix names); a
/// negative width is left-justified.
const FIELDS: &[(&str, i32, Kind, Field)] = &[
    ("Account", 10, Kind::Text, Field::Account),
    ("AllocCPUS", 10, Kind::Whole, Field::AllocCpus),
    ("AllocNodes", 10, Kind::Text, Field::AllocNodes),
    ("AllocTRES", 10, Kind::Text, Field::AllocTres),
    ("AveRSS", 10, Kind::Text, Field::AveRss),
    ("AveVMSize", 10, Kind::Text, Field::AveVmSize),
    ("Cluster", 10, Kind::Text, Field::Cluster),
    ("Comment", 14, Kind::Text, Field::Comment),
    ("Constraints", 19, Kind::Text, Field::Constraints),
    ("CPUTime", 10, Kind::Whole, Field::CpuTime),
    ("CPUTimeRAW", 10, Kind::Whole, Field::CpuTimeRaw),
    ("DerivedExitCode", 15, Kind::Text, Field::DerivedExitCode),
    ("Elapsed", 10, Kind::Whole, Field::Elapsed),
    ("ElapsedRaw", 10, Kind::Whole, Field::ElapsedRaw),
    ("Eligible", 19, Kind::Whole, Field::Eligible),
    ("End", 19, Kind::Whole, Field::End),
    ("ExitCode", 8, Kind::Text, Field::ExitCode),
    ("Flags", 19, Kind::Text, Field::Flags),
    ("GID", 6, Kind::Whole, Field::Gid),
    ("Group", 9, Kind::Text, Field::Group),
    ("JobID", -12, Kind::Text, Field::JobId),
    ("JobIDRaw", -12, Kind::Text, Field::JobIdRaw),
    ("JobName", 10, Kind::Text, Field::JobName),
    ("MaxRSS", 10, Kind::Text, Field::MaxRss),
    ("MaxRSSNode", 10, Kind::Text, Field::MaxRssNode),
    ("MaxRSSTask", 10, Kind::Whole, Field::MaxRssTask),
    ("MaxVMSize", 10, Kind::Text, Field::MaxVmSize),
    ("NCPUS", 10, Kind::Whole, Field::NCpus),
    ("NNodes", 8, Kind::Whole, Field::NNodes),
    ("NodeList", 15, Kind::Text, Field::NodeList),
    ("NTasks", 8, Kind::Whole, Field::NTasks),
    ("Partition", 10, Kind::Text, Field::Partition),
    ("Priority", 10, Kind::Whole, Field::Priority),
    ("QOS", 10, Kind::Text, Field::Qos),
    ("Reason", 22, Kind::Text, Field::Reason),
    ("ReqCPUS", 8, Kind::Whole, Field::ReqCpus),
    ("ReqMem", 10, Kind::Text, Field::ReqMem),
    ("ReqNodes", 8, Kind::Text, Field::ReqNodes),
    ("ReqTRES", 10, Kind::Text, Field::ReqTres),
    ("Reservation", 20, Kind::Text, Field::Reservation),
    ("Start", 19, Kind::Whole, Field::Start),
    ("State", 10, Kind::Text, Field::State),
    ("Submit", 19, Kind::Whole, Field::Submit),
    ("SubmitLine", 20, Kind::Text, Field::SubmitLine),
    ("Suspended", 10, Kind::Whole, Field::Suspended),
    ("SystemCPU", 10, Kind::Text, Field::SystemCpu),
    ("Timelimit", 10, Kind::Text, Field::Timelimit),
    ("TimelimitRaw", 10, Kind::Text, Field::TimelimitRaw),
    ("TotalCPU", 10, Kind::Text, Field::TotalCpu),
    ("UID", 6, Kind::Whole, Field::Uid),
    ("User", 9, Kind::Text, Field::User),
    ("UserCPU", 10, Kind::Text, Field::UserCpu),
    ("WCKey", 10, Kind::Text, Field::WcKey),
    ("WorkDir", 20, Kind::Text, Field::WorkDir),
];

/// The names `--helpformat` lists.
pub fn field_names() -> Vec<&'static str> {
    FIELDS.iter().map(|f| f.0).collect()
}

/// One column of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    name: &'static str,
    width: i32,
    kind: Kind,
    field: Field,
}

/// The columns of a `--format` list: names in any case, a prefix naming the first field it
/// begins (`jobid` is JobID, `end` is End), `Name%N` setting the width (`%-N` left-justified),
/// `ALL` for every field.
pub fn columns(list: &str) -> Result<Vec<Column>, SacctError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, Some(w.trim().parse::<i32>().unwrap_or(0))),
            None => (item, None),
        };
        let column = |&(n, w, kind, field): &(&'static str, i32, Kind, Field)| Column {
            name: n,
            width: width.unwrap_or(w),
            kind,
            field,
        };
        if name.eq_ignore_ascii_case("all") {
            out.extend(FIELDS.iter().map(column));
            continue;
        }
        let lower = name.to_ascii_lowercase();
        let def = FIELDS
            .iter()
            .find(|f| !lower.is_empty() && f.0.to_ascii_lowercase().starts_with(&lower))
            .ok_or_else(|| SacctError::Field(name.to_string()))?;
        out.push(column(def));
    }
    Ok(out)
}

/// How rows are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns, a row of dashes under the header.
    Table,
    /// `-p`: the delimiter after every field.
    Parsable,
    /// `-P`: the delimiter between fields.
    Parsable2,
}

/// The header lines (the names, and in a table the dashes).
pub fn header(cols: &[Column], style: Style, delimiter: &str) -> Vec<String> {
    let names: Vec<String> = cols.iter().map(|c| c.name.to_string()).collect();
    match style {
        Style::Table => {
            let mut top = String::new();
            let mut dashes = String::new();
            for c in cols {
                let w = c.width.unsigned_abs() as usize;
                let name: String = c.name.chars().take(w).collect();
                top += &justify(&name, c.width);
                top.push(' ');
                dashes += &"-".repeat(w);
                dashes.push(' ');
            }
            vec![top, dashes]
        }
        _ => vec![join(&names, style, delimiter)],
    }
}

/// One job's row.
pub fn line(
    cols: &[Column],
    job: &JobView,
    ctx: &Context,
    style: Style,
    delimiter: &str,
) -> String {
    let values: Vec<Option<String>> = cols.iter().map(|c| value(c.field, job, ctx)).collect();
    match style {
        Style::Table => {
            let mut out = String::new();
            for (c, v) in cols.iter().zip(values) {
                let w = c.width.unsigned_abs() as usize;
                let text = match v {
                    None => String::new(),
                    Some(v) if c.kind == Kind::Text && v.chars().count() > w && w > 0 => {
                        let mut cut: String = v.chars().take(w - 1).collect();
                        cut.push('+');
                        cut
                    }
                    Some(v) => v,
                };
                out += &justify(&text, c.width);
                out.push(' ');
            }
            out
        }
        _ => {
            let v: Vec<String> = values.into_iter().map(Option::unwrap_or_default).collect();
            join(&v, style, delimiter)
        }
    }
}

fn join(values: &[String], style: Style, delimiter: &str) -> String {
    match style {
        Style::Parsable => values.iter().map(|v| format!("{v}{delimiter}")).collect(),
        _ => values.join(delimiter),
    }
}

/// `text` right-justified in `width` (left when negative).
fn justify(text: &str, width: i32) -> String {
    let w = width.unsigned_abs() as usize;
    let pad = " ".repeat(w.saturating_sub(text.chars().count()));
    if width < 0 {
        format!("{text}{pad}")
    } else {
        format!("{pad}{text}")
    }
}

/// A field's value for a job; `None` where Slurm leaves the field empty.
fn value(f: Field, j: &JobView, ctx: &Context) -> Option<String> {
    let started = j.start.is_some();
    let cpus = if started { j.num_cpus() } else { 0 };
    let elapsed = if started { j.run_secs } else { 0 };
    let date = |t: Option<i64>| Some(time::timestamp(t, ctx.offset));
    let tres = || {
        format!(
            "billing={},cpu={},node={}",
            j.num_cpus(),
            j.num_cpus(),
            j.num_nodes()
        )
    };
    let step = j.step.is_some();
    if step
        && matches!(
            f,
            Field::Partition
                | Field::User
                | Field::Uid
                | Field::Group
                | Field::Gid
                | Field::Timelimit
                | Field::TimelimitRaw
                | Field::Priority
                | Field::Reason
                | Field::ReqNodes
                | Field::ReqCpus
                | Field::WorkDir
                | Field::SubmitLine
        )
    {
        return None;
    }
    Some(match f {
        Field::NTasks if step => j.ntasks.to_string(),
        Field::Account
        | Field::AveRss
        | Field::AveVmSize
        | Field::Comment
        | Field::Constraints
        | Field::MaxRss
        | Field::MaxRssNode
        | Field::MaxRssTask
        | Field::MaxVmSize
        | Field::NTasks
        | Field::Qos
        | Field::Reservation
        | Field::SystemCpu
        | Field::TotalCpu
        | Field::UserCpu
        | Field::WcKey => return None,
        Field::AllocCpus | Field::NCpus => cpus.to_string(),
        Field::AllocNodes => if started { j.num_nodes() } else { 0 }.to_string(),
        Field::AllocTres => {
            if started {
                tres()
            } else {
                return None;
            }
        }
        Field::Cluster => ctx.cluster.to_string(),
        Field::CpuTime => time::long_secs(elapsed * i64::from(cpus)),
        Field::CpuTimeRaw => (elapsed * i64::from(cpus)).to_string(),
        Field::DerivedExitCode => "0:0".into(),
        Field::Elapsed => time::long_secs(elapsed),
        Field::ElapsedRaw => elapsed.to_string(),
        Field::Eligible => return date(j.eligible),
        Field::End => return date(j.end),
        Field::ExitCode => j.exit_text(),
        Field::Flags => "SchedMain".into(),
        Field::Gid => j.gid.to_string(),
        Field::Group => j.group.clone(),
        Field::JobId => j.id_text(),
        Field::JobIdRaw => j.raw_id(),
        Field::JobName => j.name.clone(),
        Field::NNodes => j.num_nodes().to_string(),
        Field::NodeList => {
            if j.nodes.is_empty() {
                "None assigned".into()
            } else {
                j.node_list()
            }
        }
        Field::Partition => j.partition.clone(),
        Field::Priority => j.priority().to_string(),
        Field::Reason => j.reason.name().into(),
        Field::ReqCpus => j.num_cpus().to_string(),
        Field::ReqMem => "0".into(),
        Field::ReqNodes => j.req_nodes.max(1).to_string(),
        Field::ReqTres => tres(),
        Field::Start => return date(j.start),
        Field::State => j.state.name().into(),
        Field::Submit => return date(Some(j.submit)),
        Field::SubmitLine => j.command.clone(),
        Field::Suspended => time::long_secs(j.suspended_secs),
        Field::Timelimit => time::long_limit(j.limit),
        Field::TimelimitRaw => match j.limit {
            Limit::Unlimited => "UNLIMITED".into(),
            Limit::Secs(s) => s.div_ceil(60).to_string(),
        },
        Field::Uid => j.uid.to_string(),
        Field::User => j.user.clone(),
        Field::WorkDir => j.work_dir.clone(),
    })
}
