//! The Standard Workload Format (SWF 2.2) of the Parallel Workloads Archive: a streaming reader
//! for plain and gzip files, a writer, and the header labels.
//!
//! A job line has 18 whitespace-separated numeric fields; `-1` means "unknown" and becomes
//! `None` here. Times are seconds in the file (sometimes fractional) and integer microseconds
//! ([`Time`], [`Dur`]) in memory, so that read → write → read gives identical records.
//!
//! The reader parses fields by hand from the raw bytes of each line (no regex, no allocation per
//! field): reading a 243,000-job archive log costs little more than decompressing it.
//! Comment lines (`;`) are kept verbatim in [`SwfHeader::lines`] and their `Label: value` form
//! is parsed into the typed fields of [`SwfHeader`].

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

use cosched_core::{Dur, JobRecord, Time};
use serde::{Deserialize, Serialize};

mod error;
mod fields;
mod pieces;
mod reader;
#[cfg(test)]
mod tests;
mod write;

pub use error::{LineErrorKind, ReadReport, SwfError};
pub use pieces::Feed;
pub use reader::Reader;
pub use write::{write_record, write_trace, write_trace_path};

const MICROS: i64 = 1_000_000;
/// `-1` ("unknown") in microunits.
const MINUS_ONE: i64 = -MICROS;

/// One job line: all 18 SWF fields. `None` stands for `-1` (unknown).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwfRecord {
    /// 1: job number.
    pub job: u64,
    /// 2: submit time (seconds since the log's start in the file).
    pub submit: Option<Time>,
    /// 3: wait time.
    pub wait: Option<Dur>,
    /// 4: run time (may be fractional in some logs).
    pub run: Option<Dur>,
    /// 5: number of allocated processors.
    pub alloc_procs: Option<u32>,
    /// 6: average CPU time used per processor (seconds).
    pub avg_cpu: Option<f64>,
    /// 7: used memory per processor, KiB.
    pub used_mem_kib: Option<f64>,
    /// 8: requested number of processors.
    pub req_procs: Option<u32>,
    /// 9: requested (estimated) run time.
    pub req_time: Option<Dur>,
    /// 10: requested memory per processor, KiB.
    pub req_mem_kib: Option<f64>,
    /// 11: status (1 completed, 0 failed, 5 cancelled, 2–4 checkpoint/swap records).
    pub status: Option<i32>,
    /// 12: user id.
    pub user: Option<u32>,
    /// 13: group id.
    pub group: Option<u32>,
    /// 14: executable (application) number.
    pub app: Option<u32>,
    /// 15: queue number.
    pub queue: Option<u32>,
    /// 16: partition number.
    pub partition: Option<u32>,
    /// 17: preceding job number.
    pub preceding_job: Option<u64>,
    /// 18: think time from the preceding job.
    pub think_time: Option<Dur>,
}

impl SwfRecord {
    /// Fills in what a schedule did with the job, from its record: submit time, wait, run
    /// time (start to end, stops included), processors and status. Jobs that never ran get
    /// unknown wait and run times and status 5 (cancelled) unless their outcome says else.
    pub fn set_schedule(&mut self, rec: &JobRecord) {
        self.submit = Some(rec.submit);
        self.wait = rec.wait();
        self.run = rec.wallclock();
        self.alloc_procs = Some(rec.procs);
        self.status = Some(rec.outcome.map_or(5, |o| o.swf_status()));
    }
}

impl SwfRecord {
    /// The job's size in PEs: requested processors, else allocated ones.
    pub fn size(&self) -> Option<u32> {
        self.req_procs.or(self.alloc_procs)
    }
    /// The largest of the requested and allocated processor counts (what must fit the machine).
    pub fn max_procs(&self) -> Option<u32> {
        match (self.req_procs, self.alloc_procs) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The SWF field names, indexed by field number − 1 (used in error messages).
pub const FIELD_NAMES: [&str; 18] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable number",
    "queue number",
    "partition number",
    "preceding job",
    "think time",
];

/// The header: every comment line verbatim (for writing back) plus the labels it defines.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwfHeader {
    /// Comment lines in file order, without the leading `;`.
    pub lines: Vec<String>,
    pub version: Option<String>,
    pub computer: Option<String>,
    pub installation: Option<String>,
    pub acknowledge: Vec<String>,
    pub information: Vec<String>,
    pub conversion: Option<String>,
    pub max_jobs: Option<u64>,
    pub max_records: Option<u64>,
    pub preemption: Option<String>,
    pub unix_start_time: Option<i64>,
    pub time_zone: Option<i64>,
    pub time_zone_string: Option<String>,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    pub max_nodes: Option<u32>,
    pub max_procs: Option<u32>,
    pub max_runtime: Option<i64>,
    pub max_memory: Option<i64>,
    pub allow_overuse: Option<String>,
    pub max_queues: Option<u32>,
    pub max_partitions: Option<u32>,
    /// `Queue: N name` lines.
    pub queues: Vec<(u32, String)>,
    /// `Partition: N name` lines.
    pub partitions: Vec<(u32, String)>,
    /// `Note:` lines, with their unlabelled continuation lines appended.
    pub notes: Vec<String>,
    /// Any other `Label: value` line.
    pub other: Vec<(String, String)>,
}

impl SwfHeader {
    /// The machine size in PEs: `MaxProcs`, falling back to `MaxNodes`.
    pub fn machine_procs(&self) -> Option<u32> {
        self.max_procs.or(self.max_nodes).filter(|&p| p > 0)
    }

    /// Appends one comment line (text after `;`) and parses its label, if any. A label whose
    /// value is not a number where one is expected is kept verbatim but left unparsed.
    pub fn push_line(&mut self, text: &str) {
        self.lines.push(text.to_string());
        let trimmed = text.trim();
        let Some((label, value)) = split_label(trimmed) else {
            // An unlabelled line continues the previous Note or Information line (the archive
            // wraps long notes and lists several URLs under one label).
            if trimmed.is_empty() {
                return;
            }
            match self.continued_label() {
                Some("Note") => {
                    if let Some(note) = self.notes.last_mut() {
                        note.push('\n');
                        note.push_str(trimmed);
                    }
                }
                Some("Information") => self.information.push(trimmed.to_string()),
                _ => {}
            }
            return;
        };
        let value = value.trim();
        let num = |v: &str| v.parse::<i64>().ok();
        match label {
            "Version" => self.version = Some(value.into()),
            "Computer" => self.computer = Some(value.into()),
            "Installation" => self.installation = Some(value.into()),
            "Acknowledge" => self.acknowledge.push(value.into()),
            "Information" => self.information.push(value.into()),
            "Conversion" => self.conversion = Some(value.into()),
            "MaxJobs" => self.max_jobs = num(value).and_then(|v| u64::try_from(v).ok()),
            "MaxRecords" => self.max_records = num(value).and_then(|v| u64::try_from(v).ok()),
            "Preemption" => self.preemption = Some(value.into()),
            "UnixStartTime" => self.unix_start_time = num(value),
            "TimeZone" => self.time_zone = num(value),
            "TimeZoneString" => self.time_zone_string = Some(value.into()),
            "StartTime" => self.start_time = Some(value.into()),
            "EndTime" => self.end_time = Some(value.into()),
            "MaxNodes" => self.max_nodes = num(value).and_then(|v| u32::try_from(v).ok()),
            "MaxProcs" => self.max_procs = num(value).and_then(|v| u32::try_from(v).ok()),
            "MaxRuntime" => self.max_runtime = num(value),
            "MaxMemory" => self.max_memory = num(value),
            "AllowOveruse" => self.allow_overuse = Some(value.into()),
            "MaxQueues" => self.max_queues = num(value).and_then(|v| u32::try_from(v).ok()),
            "MaxPartitions" => self.max_partitions = num(value).and_then(|v| u32::try_from(v).ok()),
            "Queue" | "Partition" => {
                let mut parts = value.splitn(2, char::is_whitespace);
                let id = parts.next().and_then(|v| v.parse::<u32>().ok());
                let name = parts.next().unwrap_or("").trim().to_string();
                match (id, label) {
                    (Some(id), "Queue") => self.queues.push((id, name)),
                    (Some(id), _) => self.partitions.push((id, name)),
                    (None, _) => self.other.push((label.into(), value.into())),
                }
            }
            "Note" => self.notes.push(value.into()),
            _ => self.other.push((label.into(), value.into())),
        }
    }

    /// The label of the labelled line that the newest (unlabelled) line continues: walk back
    /// over unlabelled lines; an empty comment line breaks the continuation.
    fn continued_label(&self) -> Option<&str> {
        for line in self.lines.iter().rev().skip(1) {
            if let Some((label, _)) = split_label(line.trim()) {
                return Some(label);
            }
            if line.trim().is_empty() {
                return None;
            }
        }
        None
    }
}

/// `Label: value` where the label is one word of letters and the colon is followed by a space
/// (or ends the line).
fn split_label(text: &str) -> Option<(&str, &str)> {
    let colon = text.find(':')?;
    let label = &text[..colon];
    if label.is_empty() || !label.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    // `Label: value`, not a URL such as `http://…` on a continuation line.
    if text[colon + 1..].starts_with(|c: char| !c.is_whitespace()) {
        return None;
    }
    Some((label, &text[colon + 1..]))
}

/// What to do with a job that asks for more PEs than the machine has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Oversize {
    /// Drop the job (counted in the report).
    Skip,
    /// Reduce its requested and allocated processors to the machine size (counted).
    Clip,
    /// Stop with an error naming the job, the line and the `--oversize` flag.
    #[default]
    Error,
}

impl std::str::FromStr for Oversize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skip" => Ok(Oversize::Skip),
            "clip" => Ok(Oversize::Clip),
            "error" => Ok(Oversize::Error),
            _ => Err(format!(
                "unknown oversize policy {s:?} (use skip, clip or error)"
            )),
        }
    }
}

/// How to read a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Machine size in PEs; overrides the header's MaxProcs/MaxNodes. Required when the trace
    /// has neither.
    pub procs: Option<u32>,
    /// Skip malformed job lines (counted by kind in [`ReadReport`]) instead of failing.
    pub lenient: bool,
    pub oversize: Oversize,
}

/// A trace in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub header: SwfHeader,
    pub records: Vec<SwfRecord>,
    /// Machine size in PEs (from `--procs` or the header).
    pub procs: u32,
    pub report: ReadReport,
}

/// Reads a whole trace (plain or gzip, detected by magic bytes).
///
/// The job lines are parsed on all cores ([`Reader::into_trace`]); the result is the one a
/// single streaming [`Reader`] gives, error for error.
pub fn read_trace(path: &Path, opts: &ReadOptions) -> Result<Trace, SwfError> {
    open(path, opts)?.into_trace()
}

/// Opens a trace file for streaming; gzip is detected by its magic bytes, not the name.
/// The path `-` reads standard input (named `<stdin>` in messages).
pub fn open(path: &Path, opts: &ReadOptions) -> Result<Reader<Box<dyn BufRead>>, SwfError> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    };
    let io_err = |cause| SwfError::Io {
        path: name.clone(),
        cause,
    };
    let input: Box<dyn Read> = if stdin {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(path).map_err(io_err)?)
    };
    let mut buffered = BufReader::with_capacity(1 << 16, input);
    let magic = buffered.fill_buf().map_err(io_err)?;
    let gzip = magic.len() >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    let src: Box<dyn BufRead> = if gzip {
        Box::new(BufReader::with_capacity(
            1 << 18,
            flate2::bufread::MultiGzDecoder::new(buffered),
        ))
    } else {
        Box::new(buffered)
    };
    Reader::with_format(src, name, opts.clone(), gzip)
}

/// Reads everything from a reader into memory (for tests and small inputs).
pub fn read_trace_from<R: Read>(src: R, name: &str, opts: &ReadOptions) -> Result<Trace, SwfError> {
    let mut reader = Reader::new(BufReader::new(src), name, opts.clone())?;
    let mut records = Vec::new();
    for rec in reader.by_ref() {
        records.push(rec?);
    }
    Ok(Trace {
        procs: reader.procs(),
        header: reader.header,
        report: reader.report,
        records,
    })
}
