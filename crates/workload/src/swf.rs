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

const MICROS: i64 = 1_000_000;

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

fn field_name(field: &usize) -> &'static str {
    FIELD_NAMES
        .get(field.wrapping_sub(1))
        .copied()
        .unwrap_or("unknown field")
}

fn kind_why(kind: &LineErrorKind) -> &'static str {
    kind.why()
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

/// Why a job line is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineErrorKind {
    /// Not 18 fields.
    FieldCount,
    /// A field is not a number.
    NotANumber,
    /// A negative value other than −1.
    Negative,
    /// A fractional value in a field that counts things (processors, ids, status).
    Fractional,
    /// A value too large for its field.
    OutOfRange,
    /// The job number is −1.
    MissingJobNumber,
}

impl LineErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            LineErrorKind::FieldCount => "field_count",
            LineErrorKind::NotANumber => "not_a_number",
            LineErrorKind::Negative => "negative",
            LineErrorKind::Fractional => "fractional",
            LineErrorKind::OutOfRange => "out_of_range",
            LineErrorKind::MissingJobNumber => "missing_job_number",
        }
    }
    fn why(self) -> &'static str {
        match self {
            LineErrorKind::FieldCount => "a job line must have 18 fields",
            LineErrorKind::NotANumber => "not a number",
            LineErrorKind::Negative => "negative (only -1, meaning unknown, is allowed)",
            LineErrorKind::Fractional => "must be a whole number",
            LineErrorKind::OutOfRange => "too large for this field",
            LineErrorKind::MissingJobNumber => "the job number must be known",
        }
    }
}

/// An error reading or writing a trace. Each variant says where (file, line) and what.
#[derive(Debug, thiserror::Error)]
pub enum SwfError {
    // The cause is part of the message rather than a `#[source]`, so that printing the error
    // chain (as anyhow's `{:#}` does) does not repeat it.
    #[error("{path}: cannot read: {cause}")]
    Io { path: String, cause: io::Error },
    #[error(
        "{path}: the gzip stream is truncated or corrupt (after line {line}): {cause}; \
         the file is damaged, download or decompress it again"
    )]
    Gzip {
        path: String,
        line: u64,
        cause: io::Error,
    },
    #[error("{path}:{line}: field {field} ({name}): bad value {value:?}: {why}; pass --lenient to skip bad lines", name = field_name(.field), why = kind_why(.kind))]
    Field {
        path: String,
        line: u64,
        /// 1-based SWF field number.
        field: usize,
        value: String,
        kind: LineErrorKind,
    },
    #[error(
        "{path}:{line}: {found} fields where a job line has 18; pass --lenient to skip bad lines"
    )]
    FieldCount {
        path: String,
        line: u64,
        found: usize,
    },
    #[error(
        "{path}: the machine size is unknown (no MaxProcs or MaxNodes header line); \
         pass --procs N"
    )]
    NoMachineSize { path: String },
    #[error(
        "{path}:{line}: job {job} asks for {asked} PEs but the machine has {procs}; \
         pass --oversize skip or --oversize clip (or a larger --procs)"
    )]
    Oversize {
        path: String,
        line: u64,
        job: u64,
        asked: u32,
        procs: u32,
    },
}

impl SwfError {
    /// The kind of line error, for errors that `--lenient` may skip.
    pub fn line_kind(&self) -> Option<LineErrorKind> {
        match self {
            SwfError::Field { kind, .. } => Some(*kind),
            SwfError::FieldCount { .. } => Some(LineErrorKind::FieldCount),
            _ => None,
        }
    }
}

/// What happened while reading: line counts, skipped lines by kind, oversize jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadReport {
    pub lines: u64,
    pub job_lines: u64,
    pub comment_lines: u64,
    pub blank_lines: u64,
    /// Malformed job lines skipped under `--lenient`, by kind.
    pub skipped: BTreeMap<String, u64>,
    /// The first few skipped lines' messages.
    pub skipped_examples: Vec<String>,
    /// Jobs larger than the machine, whatever was done with them.
    pub oversize: u64,
    pub oversize_skipped: u64,
    pub oversize_clipped: u64,
    pub oversize_examples: Vec<String>,
}

impl ReadReport {
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }

    /// Adds the report of the lines that follow this one's.
    fn absorb(&mut self, later: ReadReport) {
        self.lines += later.lines;
        self.job_lines += later.job_lines;
        self.comment_lines += later.comment_lines;
        self.blank_lines += later.blank_lines;
        for (kind, n) in later.skipped {
            *self.skipped.entry(kind).or_default() += n;
        }
        let room = MAX_EXAMPLES.saturating_sub(self.skipped_examples.len());
        self.skipped_examples
            .extend(later.skipped_examples.into_iter().take(room));
        self.oversize += later.oversize;
        self.oversize_skipped += later.oversize_skipped;
        self.oversize_clipped += later.oversize_clipped;
        let room = MAX_EXAMPLES.saturating_sub(self.oversize_examples.len());
        self.oversize_examples
            .extend(later.oversize_examples.into_iter().take(room));
    }
}

/// Whoever follows a read piece by piece ([`Reader::into_trace_feeding`]).
pub type Feed<'a> = dyn Fn(&[SwfRecord]) + Sync + 'a;

/// About how many bytes of job lines one core parses at a time in [`Reader::into_trace`]:
/// large enough that a piece costs far more than its reader's set-up.
const PIECE: usize = 1 << 20;

/// The size of the first piece: pieces start small and double up to [`PIECE`], so that
/// whoever follows the feed (a simulation) gets its first jobs after a few milliseconds
/// instead of after a whole piece has been gunzipped and parsed.
const FIRST_PIECE: usize = 1 << 16;

/// What one piece of the input gave.
struct Piece {
    /// The first error, which ends the piece (and the trace).
    error: Option<SwfError>,
    /// Comment lines among the jobs, in order.
    comments: Vec<String>,
    report: ReadReport,
}

/// Which threads parse a trace's pieces.
#[derive(Clone, Copy, Debug)]
enum Parsers {
    /// rayon's global pool: all cores.
    Shared,
    /// A pool of this many threads of the reading's own; none: the reading thread parses
    /// each piece after reading it.
    Own(usize),
}

/// Runs `op` in a scope of `pool`'s threads, or of the global pool's.
fn in_scope<'s, R>(pool: Option<&rayon::ThreadPool>, op: impl FnOnce(&rayon::Scope<'s>) -> R) -> R {
    match pool {
        Some(pool) => pool.in_place_scope(op),
        None => rayon::in_place_scope(op),
    }
}

/// The records of the pieces parsed so far, joined in order by the parsing threads as the
/// pieces complete, so that the copy into one vector overlaps the decompression (which is the
/// longest part of reading) instead of following it on the reading thread.
#[derive(Default)]
struct Joined(std::sync::Mutex<JoinState>);

#[derive(Default)]
struct JoinState {
    records: Vec<SwfRecord>,
    /// Pieces done before one that comes earlier in the input, by number, with whether
    /// they ended in an error.
    parked: BTreeMap<usize, (Vec<SwfRecord>, bool)>,
    /// The number of the next piece to append.
    next: usize,
    /// A piece ended in an error: the records after it are not the trace's, so the feed
    /// is given no more.
    stopped: bool,
}

impl Joined {
    /// Piece `k`'s records (`failed`: the piece ended in an error): appended now if every
    /// piece before it is in, else parked. Each appended piece is handed to `feed`, in input
    /// order, up to and including the first that failed.
    fn add(&self, k: usize, records: Vec<SwfRecord>, failed: bool, feed: &Feed) {
        // A poisoned lock means a parsing thread panicked: the scope re-raises that panic.
        let Ok(mut st) = self.0.lock() else { return };
        if k != st.next {
            st.parked.insert(k, (records, failed));
            return;
        }
        let st = &mut *st;
        let mut piece = Some((records, failed));
        while let Some((records, failed)) = piece {
            if !st.stopped {
                feed(&records);
                st.stopped = failed;
            }
            if st.records.is_empty() {
                st.records = records;
            } else {
                st.records.extend(records);
            }
            st.next += 1;
            piece = st.parked.remove(&st.next);
        }
    }

    /// Piece `k`, every piece before it being in, parsed by `parse` straight onto the
    /// records joined so far (no copy); `parse` tells whether the piece ended in an error.
    /// Its records are handed to `feed` as [`Joined::add`] hands them.
    fn parse_onto(&self, k: usize, parse: impl FnOnce(&mut Vec<SwfRecord>) -> bool, feed: &Feed) {
        let Ok(mut st) = self.0.lock() else { return };
        debug_assert!(k == st.next && st.parked.is_empty());
        let from = st.records.len();
        let failed = parse(&mut st.records);
        if !st.stopped {
            feed(&st.records[from..]);
            st.stopped = failed;
        }
        st.next += 1;
    }

    /// The records of all `pieces` pieces, in input order.
    fn into_records(self, pieces: usize) -> Vec<SwfRecord> {
        let st = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        debug_assert!(st.next == pieces && st.parked.is_empty());
        st.records
    }
}

/// Parses one piece of job lines, `first_line` being the number of the line before its first,
/// appending its records to `records`.
fn parse_piece(
    bytes: &[u8],
    first_line: u64,
    name: String,
    gzip: bool,
    opts: ReadOptions,
    procs: u32,
    records: &mut Vec<SwfRecord>,
) -> Piece {
    let mut reader = Reader {
        src: bytes,
        name,
        gzip,
        opts,
        line_no: first_line,
        buf: Vec::with_capacity(256),
        pending: false,
        procs,
        failed: false,
        header: SwfHeader::default(),
        report: ReadReport::default(),
    };
    records.reserve(bytes.len() / 64);
    let mut error = None;
    for rec in reader.by_ref() {
        match rec {
            Ok(rec) => records.push(rec),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    Piece {
        error,
        comments: reader.header.lines,
        report: reader.report,
    }
}

const MAX_EXAMPLES: usize = 5;
/// The end of a line error's message; left out of the examples of lines already skipped.
const LENIENT_HINT: &str = "; pass --lenient to skip bad lines";

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

/// A streaming reader: the header is read on construction, then job records are yielded one
/// by one. Skipped lines and oversize jobs are counted in [`Reader::report`].
pub struct Reader<R> {
    src: R,
    name: String,
    gzip: bool,
    opts: ReadOptions,
    line_no: u64,
    buf: Vec<u8>,
    /// A job line read while looking for the end of the header.
    pending: bool,
    procs: u32,
    failed: bool,
    header: SwfHeader,
    report: ReadReport,
}

impl<R: BufRead> Reader<R> {
    /// Reads the header of an uncompressed source. `name` is used in error messages.
    pub fn new(src: R, name: impl Into<String>, opts: ReadOptions) -> Result<Self, SwfError> {
        Self::with_format(src, name.into(), opts, false)
    }

    fn with_format(src: R, name: String, opts: ReadOptions, gzip: bool) -> Result<Self, SwfError> {
        let mut reader = Reader {
            src,
            name,
            gzip,
            opts,
            line_no: 0,
            buf: Vec::with_capacity(256),
            pending: false,
            procs: 0,
            failed: false,
            header: SwfHeader::default(),
            report: ReadReport::default(),
        };
        // Read comment lines until the first job line (kept pending) or the end.
        while reader.next_line()? {
            match classify(&reader.buf) {
                LineClass::Blank => reader.report.blank_lines += 1,
                LineClass::Comment(text) => {
                    reader.report.comment_lines += 1;
                    let text = String::from_utf8_lossy(text).into_owned();
                    reader.header.push_line(&text);
                }
                LineClass::Job => {
                    reader.pending = true;
                    break;
                }
            }
        }
        reader.procs = match reader.opts.procs.or(reader.header.machine_procs()) {
            Some(p) if p > 0 => p,
            _ => {
                return Err(SwfError::NoMachineSize {
                    path: reader.name.clone(),
                });
            }
        };
        Ok(reader)
    }

    /// The name used in messages (the path, or `<stdin>`).
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn header(&self) -> &SwfHeader {
        &self.header
    }
    pub fn report(&self) -> &ReadReport {
        &self.report
    }
    /// The machine size used for oversize checks.
    pub fn procs(&self) -> u32 {
        self.procs
    }
    pub fn into_parts(self) -> (SwfHeader, ReadReport) {
        (self.header, self.report)
    }

    /// Reads the rest of the input into a [`Trace`], parsing the job lines on all cores.
    ///
    /// The remaining bytes are read in pieces of about [`PIECE`] bytes cut at line ends; each
    /// piece is parsed on the thread pool, while the next is read, by a reader of its own that
    /// starts at the piece's line number, and the pieces are joined in order. Records,
    /// counts, the first examples, comments among the jobs and the first error are therefore
    /// exactly those of reading line by line; an input error ends the input where it
    /// happened, after the lines before it.
    pub fn into_trace(self) -> Result<Trace, SwfError> {
        self.into_trace_in_pieces(FIRST_PIECE, PIECE, Parsers::Shared, &|_| {})
    }

    /// [`Reader::into_trace`], handing each piece's records to `feed` as soon as it and
    /// every piece before it are parsed: `feed` sees the trace's records in input order,
    /// while the rest is still being read (so that a simulation can run beside the
    /// reading). It is called on the parsing threads, one call at a time. A piece that ends
    /// in an error is fed its records before the error and nothing follows it; the error
    /// itself is the result's, exactly as [`Reader::into_trace`] reports it, so whoever
    /// follows the feed must not take the records for the trace before the result is `Ok`.
    ///
    /// The reading leaves one core to whoever consumes the feed: of `n` cores (rayon's
    /// count), this thread decompresses and `n − 2` threads of their own parse. On two cores
    /// this thread parses too: a parsing thread would take turns with the consumer on its
    /// core (measured: the simulation got half a core while the trace was read).
    pub fn into_trace_feeding(self, feed: &Feed) -> Result<Trace, SwfError> {
        let parsers = rayon::current_num_threads().saturating_sub(2);
        self.into_trace_in_pieces(FIRST_PIECE, PIECE, Parsers::Own(parsers), feed)
    }

    /// Reads in pieces of `first` bytes, then twice as many each time up to `most`, parsed
    /// by `parsers`.
    fn into_trace_in_pieces(
        mut self,
        first: usize,
        most: usize,
        parsers: Parsers,
        feed: &Feed,
    ) -> Result<Trace, SwfError> {
        let mut piece = first.min(most);
        let mut carry = Vec::new();
        let mut line = self.line_no;
        if self.pending {
            // The first job line, read while looking for the header's end, is parsed again
            // by its piece, which counts it.
            self.pending = false;
            carry.extend_from_slice(&self.buf);
            carry.push(b'\n');
            line -= 1;
            self.report.lines -= 1;
        }
        let (name, gzip, opts, procs) = (&self.name, self.gzip, &self.opts, self.procs);
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Piece)>();
        let mut input_error = None;
        let mut pieces = 0;
        let joined = Joined::default();
        // This thread reads (and gunzips) piece after piece while the parsers parse the
        // pieces already read: the decompression overlaps the parsing.
        let own_pool = match parsers {
            Parsers::Own(n) if n > 0 => rayon::ThreadPoolBuilder::new().num_threads(n).build().ok(),
            _ => None,
        };
        // No thread to spare (or none could be started): each piece is parsed here.
        let here = matches!(parsers, Parsers::Own(_)) && own_pool.is_none();
        // A block parsed here is read into again: its pages are resident already.
        let mut spare = Vec::new();
        in_scope(own_pool.as_ref(), |scope| {
            loop {
                let mut block = std::mem::take(&mut spare);
                block.clear();
                block.append(&mut carry);
                block.reserve(piece);
                let end = match (&mut self.src).take(piece as u64).read_to_end(&mut block) {
                    Ok(n) => n < piece,
                    Err(cause) => {
                        input_error = Some(cause);
                        true
                    }
                };
                let last_newline = memchr::memrchr(b'\n', &block);
                if !end || input_error.is_some() {
                    // The partial line waits for the next piece; like `read_until`, a line
                    // being read when the input failed is dropped.
                    let cut = last_newline.map_or(0, |i| i + 1);
                    carry = block[cut..].to_vec();
                    block.truncate(cut);
                }
                if !block.is_empty() {
                    let first_line = line;
                    line += memchr::memchr_iter(b'\n', &block).count() as u64;
                    let k = pieces;
                    pieces += 1;
                    // Captures only references and copies: it moves to a parsing thread as is.
                    let parse = move |block: &[u8], records: &mut Vec<SwfRecord>| {
                        let (name, opts) = (name.clone(), opts.clone());
                        parse_piece(block, first_line, name, gzip, opts, procs, records)
                    };
                    if here {
                        let parsed_onto = |records: &mut Vec<SwfRecord>| {
                            let parsed = parse(&block, records);
                            let failed = parsed.error.is_some();
                            let _ = tx.send((k, parsed));
                            failed
                        };
                        joined.parse_onto(k, parsed_onto, feed);
                        spare = block;
                    } else {
                        let (tx, joined) = (tx.clone(), &joined);
                        scope.spawn(move |_| {
                            let mut records = Vec::new();
                            let parsed = parse(&block, &mut records);
                            drop(block);
                            let failed = parsed.error.is_some();
                            joined.add(k, records, failed, feed);
                            // The receiver outlives the scope.
                            let _ = tx.send((k, parsed));
                        });
                    }
                }
                if end {
                    break;
                }
                piece = (piece * 2).min(most);
            }
        });
        drop(tx);
        let mut parsed: Vec<(usize, Piece)> = rx.into_iter().collect();
        parsed.sort_unstable_by_key(|p| p.0);
        let records = joined.into_records(pieces);
        for (_, piece) in parsed {
            if let Some(e) = piece.error {
                return Err(e);
            }
            self.report.absorb(piece.report);
            for line in &piece.comments {
                self.header.push_line(line);
            }
        }
        if let Some(cause) = input_error {
            return Err(self.input_error(line, cause));
        }
        Ok(Trace {
            procs: self.procs,
            header: self.header,
            report: self.report,
            records,
        })
    }

    fn input_error(&self, line: u64, cause: io::Error) -> SwfError {
        if self.gzip {
            SwfError::Gzip {
                path: self.name.clone(),
                line,
                cause,
            }
        } else {
            SwfError::Io {
                path: self.name.clone(),
                cause,
            }
        }
    }

    /// Reads the next line into `buf` (without the line ending); false at the end.
    fn next_line(&mut self) -> Result<bool, SwfError> {
        self.buf.clear();
        let n = match self.src.read_until(b'\n', &mut self.buf) {
            Ok(n) => n,
            Err(cause) => return Err(self.input_error(self.line_no, cause)),
        };
        if n == 0 {
            return Ok(false);
        }
        self.line_no += 1;
        self.report.lines += 1;
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        Ok(true)
    }

    fn next_record(&mut self) -> Result<Option<SwfRecord>, SwfError> {
        loop {
            if self.pending {
                self.pending = false;
            } else if !self.next_line()? {
                return Ok(None);
            }
            match classify(&self.buf) {
                LineClass::Blank => {
                    self.report.blank_lines += 1;
                    continue;
                }
                LineClass::Comment(text) => {
                    // Comments after the first job are rare; keep them with the header.
                    self.report.comment_lines += 1;
                    let text = String::from_utf8_lossy(text).into_owned();
                    self.header.push_line(&text);
                    continue;
                }
                LineClass::Job => {}
            }
            self.report.job_lines += 1;
            let mut rec = match parse_record(&self.buf) {
                Ok(rec) => rec,
                Err(bad) => {
                    let err = self.line_error(bad);
                    if self.opts.lenient {
                        let kind = err.line_kind().map_or("other", LineErrorKind::name);
                        *self.report.skipped.entry(kind.to_string()).or_default() += 1;
                        if self.report.skipped_examples.len() < MAX_EXAMPLES {
                            let msg = err.to_string();
                            let msg = msg.strip_suffix(LENIENT_HINT).unwrap_or(&msg);
                            self.report.skipped_examples.push(msg.to_string());
                        }
                        continue;
                    }
                    return Err(err);
                }
            };
            if let Some(asked) = rec.max_procs().filter(|&p| p > self.procs) {
                self.report.oversize += 1;
                let procs = self.procs;
                let err = SwfError::Oversize {
                    path: self.name.clone(),
                    line: self.line_no,
                    job: rec.job,
                    asked,
                    procs,
                };
                if self.report.oversize_examples.len() < MAX_EXAMPLES {
                    self.report.oversize_examples.push(format!(
                        "{}:{}: job {} asks for {asked} PEs",
                        self.name, self.line_no, rec.job
                    ));
                }
                match self.opts.oversize {
                    Oversize::Error => return Err(err),
                    Oversize::Skip => {
                        self.report.oversize_skipped += 1;
                        continue;
                    }
                    Oversize::Clip => {
                        self.report.oversize_clipped += 1;
                        rec.req_procs = rec.req_procs.map(|p| p.min(procs));
                        rec.alloc_procs = rec.alloc_procs.map(|p| p.min(procs));
                    }
                }
            }
            return Ok(Some(rec));
        }
    }

    fn line_error(&self, bad: BadField) -> SwfError {
        match bad {
            BadField::Count(found) => SwfError::FieldCount {
                path: self.name.clone(),
                line: self.line_no,
                found,
            },
            BadField::Value { field, value, kind } => SwfError::Field {
                path: self.name.clone(),
                line: self.line_no,
                field,
                value,
                kind,
            },
        }
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<SwfRecord, SwfError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.next_record() {
            Ok(Some(rec)) => Some(Ok(rec)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

enum LineClass<'a> {
    Blank,
    Comment(&'a [u8]),
    Job,
}

fn classify(line: &[u8]) -> LineClass<'_> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace());
    match start {
        None => LineClass::Blank,
        Some(i) if line[i] == b';' => LineClass::Comment(&line[i + 1..]),
        // cosched's provenance lines (`# key: value`, docs/sim.md) are not SWF, but a file
        // that carries them is still read as the trace it is.
        Some(i) if line[i] == b'#' => LineClass::Blank,
        Some(_) => LineClass::Job,
    }
}

enum BadField {
    Count(usize),
    Value {
        field: usize,
        value: String,
        kind: LineErrorKind,
    },
}

/// A field value in fixed point (microunits) and whether it was exactly −1.
fn parse_fixed(s: &[u8]) -> Result<i64, LineErrorKind> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut int: i64 = 0;
    let mut i = 0;
    let mut any = false;
    while i < digits.len() && digits[i].is_ascii_digit() {
        int = int
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(digits[i] - b'0')))
            .ok_or(LineErrorKind::OutOfRange)?;
        any = true;
        i += 1;
    }
    let mut frac: i64 = 0;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        let mut scale = MICROS / 10;
        let mut round_up = false;
        let mut first_dropped = true;
        while i < digits.len() && digits[i].is_ascii_digit() {
            let d = i64::from(digits[i] - b'0');
            if scale > 0 {
                frac += d * scale;
                scale /= 10;
            } else if first_dropped {
                round_up = d >= 5;
                first_dropped = false;
            }
            any = true;
            i += 1;
        }
        if round_up {
            frac += 1;
        }
    }
    if i != digits.len() {
        // Exponent notation and the like: rare, so take the slow path.
        let text = std::str::from_utf8(s).map_err(|_| LineErrorKind::NotANumber)?;
        let v: f64 = text.parse().map_err(|_| LineErrorKind::NotANumber)?;
        if v.is_nan() {
            return Err(LineErrorKind::NotANumber);
        }
        if v.abs() > 9.0e12 {
            return Err(LineErrorKind::OutOfRange);
        }
        return Ok((v * MICROS as f64).round() as i64);
    }
    if !any {
        return Err(LineErrorKind::NotANumber);
    }
    let v = int
        .checked_mul(MICROS)
        .and_then(|v| v.checked_add(frac))
        .ok_or(LineErrorKind::OutOfRange)?;
    Ok(if neg { -v } else { v })
}

const MINUS_ONE: i64 = -MICROS;

/// A non-negative micro-value, or `None` for −1.
fn known(v: i64) -> Result<Option<i64>, LineErrorKind> {
    match v {
        MINUS_ONE => Ok(None),
        v if v < 0 => Err(LineErrorKind::Negative),
        v => Ok(Some(v)),
    }
}

fn whole(v: Option<i64>) -> Result<Option<i64>, LineErrorKind> {
    match v {
        Some(v) if v % MICROS != 0 => Err(LineErrorKind::Fractional),
        v => Ok(v.map(|v| v / MICROS)),
    }
}

fn as_u32(v: i64) -> Result<Option<u32>, LineErrorKind> {
    whole(known(v)?)?
        .map(|v| u32::try_from(v).map_err(|_| LineErrorKind::OutOfRange))
        .transpose()
}

fn as_u64(v: i64) -> Result<Option<u64>, LineErrorKind> {
    Ok(whole(known(v)?)?.map(|v| v as u64))
}

fn as_dur(v: i64) -> Result<Option<Dur>, LineErrorKind> {
    Ok(known(v)?.map(Dur::from_micros))
}

/// Float fields keep their full text precision: parsed with the standard library.
fn as_f64(s: &[u8]) -> Result<Option<f64>, LineErrorKind> {
    // Most float fields hold -1 or a whole number: an integer converts to f64 exactly, and
    // identically to the slow path below.
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let v = digits
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
        return match (s[0] == b'-', v) {
            (true, 1) => Ok(None),
            (true, 0) | (false, _) => Ok(Some(v as f64)),
            (true, _) => Err(LineErrorKind::Negative),
        };
    }
    if let Some(v) = short_decimal(s) {
        return Ok(Some(v));
    }
    let text = std::str::from_utf8(s).map_err(|_| LineErrorKind::NotANumber)?;
    let v: f64 = text.parse().map_err(|_| LineErrorKind::NotANumber)?;
    if !v.is_finite() {
        return Err(LineErrorKind::NotANumber);
    }
    if v == -1.0 {
        return Ok(None);
    }
    if v < 0.0 {
        return Err(LineErrorKind::Negative);
    }
    Ok(Some(v))
}

/// A non-negative decimal `digits.digits` with at most 15 significant digits, converted as the
/// standard library converts it: both the digits as an integer and the power of ten are exact
/// doubles, and one IEEE division of exact operands is correctly rounded (Clinger's fast
/// path). Anything else (signs, exponents, long fractions) is left to the standard parser.
fn short_decimal(s: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let dot = s.iter().position(|&b| b == b'.')?;
    let (int, frac) = (&s[..dot], &s[dot + 1..]);
    if int.is_empty() || frac.is_empty() || int.len() + frac.len() > 15 {
        return None;
    }
    let mut m: u64 = 0;
    for &d in int.iter().chain(frac) {
        if !d.is_ascii_digit() {
            return None;
        }
        m = m * 10 + u64::from(d - b'0');
    }
    Some(m as f64 / POW10[frac.len()])
}

/// `u8::is_ascii_whitespace` as one comparison for the common bytes: splitting fields is a
/// large share of reading a trace, and the five-way match costs several branches per byte.
#[inline(always)]
fn is_space(b: u8) -> bool {
    b <= b' ' && b.is_ascii_whitespace()
}

fn parse_record(line: &[u8]) -> Result<SwfRecord, BadField> {
    // One pass splits the line and reads each field that is a plain integer (all but a few
    // fields of real traces) as it goes; `NOT_PLAIN` marks a field read from its text below.
    const NOT_PLAIN: i64 = i64::MIN;
    // Twelve digits times a million stay within i64, so a plain field cannot overflow.
    const PLAIN_DIGITS: usize = 12;
    let mut fields: [&[u8]; 18] = [&[]; 18];
    let mut plain = [NOT_PLAIN; 18];
    let mut count = 0;
    let (mut i, n) = (0, line.len());
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i == n {
            break;
        }
        let start = i;
        let neg = line[i] == b'-';
        i += usize::from(neg);
        let digits = i;
        let mut v: i64 = 0;
        while i < n && line[i].is_ascii_digit() {
            v = v.wrapping_mul(10).wrapping_add(i64::from(line[i] - b'0'));
            i += 1;
        }
        let is_plain = i > digits && i - digits <= PLAIN_DIGITS && (i == n || is_space(line[i]));
        while i < n && !is_space(line[i]) {
            i += 1;
        }
        if count < 18 {
            fields[count] = &line[start..i];
            if is_plain {
                plain[count] = if neg { -v * MICROS } else { v * MICROS };
            }
        }
        count += 1;
    }
    if count != 18 {
        return Err(BadField::Count(count));
    }
    // The error closures borrow the fields: capturing the array by value would copy its 18
    // slices for every field parsed.
    let fields = &fields;
    let bad = |i: usize| {
        move |kind| BadField::Value {
            field: i + 1,
            value: String::from_utf8_lossy(fields[i]).into_owned(),
            kind,
        }
    };
    let fixed = |i: usize| match plain[i] {
        NOT_PLAIN => parse_fixed(fields[i]).map_err(bad(i)),
        v => Ok(v),
    };
    let job = as_u64(fixed(0)?)
        .map_err(bad(0))?
        .ok_or_else(|| bad(0)(LineErrorKind::MissingJobNumber))?;
    Ok(SwfRecord {
        job,
        submit: as_dur(fixed(1)?)
            .map_err(bad(1))?
            .map(|d| Time::from_micros(d.as_micros())),
        wait: as_dur(fixed(2)?).map_err(bad(2))?,
        run: as_dur(fixed(3)?).map_err(bad(3))?,
        alloc_procs: as_u32(fixed(4)?).map_err(bad(4))?,
        avg_cpu: as_f64(fields[5]).map_err(bad(5))?,
        used_mem_kib: as_f64(fields[6]).map_err(bad(6))?,
        req_procs: as_u32(fixed(7)?).map_err(bad(7))?,
        req_time: as_dur(fixed(8)?).map_err(bad(8))?,
        req_mem_kib: as_f64(fields[9]).map_err(bad(9))?,
        status: {
            // Status may be any small integer; −1 is unknown.
            let v = whole(Some(fixed(10)?)).map_err(bad(10))?.unwrap_or(-1);
            if v == -1 {
                None
            } else {
                Some(i32::try_from(v).map_err(|_| bad(10)(LineErrorKind::OutOfRange))?)
            }
        },
        user: as_u32(fixed(11)?).map_err(bad(11))?,
        group: as_u32(fixed(12)?).map_err(bad(12))?,
        app: as_u32(fixed(13)?).map_err(bad(13))?,
        queue: as_u32(fixed(14)?).map_err(bad(14))?,
        partition: as_u32(fixed(15)?).map_err(bad(15))?,
        preceding_job: as_u64(fixed(16)?).map_err(bad(16))?,
        think_time: as_dur(fixed(17)?).map_err(bad(17))?,
    })
}

/// Seconds with as many decimals as needed to be exact (at most 6).
struct Secs(i64);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0;
        let sign = if us < 0 { "-" } else { "" };
        let abs = us.unsigned_abs();
        let (whole, frac) = (abs / MICROS as u64, abs % MICROS as u64);
        if frac == 0 {
            return f.pad(&format!("{sign}{whole}"));
        }
        let mut digits = format!("{frac:06}");
        while digits.ends_with('0') {
            digits.pop();
        }
        f.pad(&format!("{sign}{whole}.{digits}"))
    }
}

fn opt_secs(v: Option<i64>) -> Secs {
    Secs(v.unwrap_or(MINUS_ONE))
}

struct OptNum<T>(Option<T>);

impl<T: fmt::Display> fmt::Display for OptNum<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => f.pad(&v.to_string()),
            None => f.pad("-1"),
        }
    }
}

/// Writes one job line (no line ending).
pub fn write_record<W: Write>(w: &mut W, r: &SwfRecord) -> io::Result<()> {
    write!(
        w,
        "{:>7} {:>9} {:>7} {:>7} {:>5} {:>7} {:>5} {:>5} {:>7} {:>5} {:>2} {:>4} {:>3} {:>3} {:>2} {:>2} {:>3} {:>3}",
        r.job,
        opt_secs(r.submit.map(Time::as_micros)),
        opt_secs(r.wait.map(Dur::as_micros)),
        opt_secs(r.run.map(Dur::as_micros)),
        OptNum(r.alloc_procs),
        OptNum(r.avg_cpu),
        OptNum(r.used_mem_kib),
        OptNum(r.req_procs),
        opt_secs(r.req_time.map(Dur::as_micros)),
        OptNum(r.req_mem_kib),
        OptNum(r.status),
        OptNum(r.user),
        OptNum(r.group),
        OptNum(r.app),
        OptNum(r.queue),
        OptNum(r.partition),
        OptNum(r.preceding_job),
        opt_secs(r.think_time.map(Dur::as_micros)),
    )
}

/// Writes a trace: the header's comment lines verbatim, then one line per record.
pub fn write_trace<W: Write>(w: W, header: &SwfHeader, records: &[SwfRecord]) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, w);
    for line in &header.lines {
        writeln!(w, ";{line}")?;
    }
    for r in records {
        write_record(&mut w, r)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}

/// Writes a trace to a file, gzip-compressed when the name ends in `.gz`.
/// The path `-` writes (uncompressed) to standard output.
pub fn write_trace_path(path: &Path, header: &SwfHeader, records: &[SwfRecord]) -> io::Result<()> {
    if path.as_os_str() == "-" {
        return write_trace(io::stdout().lock(), header, records);
    }
    let file = File::create(path)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        write_trace(&mut gz, header, records)?;
        gz.finish()?.sync_all()
    } else {
        write_trace(file, header, records)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An input that fails partway fails the pieced read as it fails one reader.
    #[test]
    fn an_input_error_ends_a_pieced_read_as_it_ends_one_reader() {
        struct FailsAt(std::io::Cursor<Vec<u8>>, u64);
        impl Read for FailsAt {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                if self.0.position() >= self.1 {
                    return Err(io::Error::other("disk gone"));
                }
                let room = (self.1 - self.0.position()) as usize;
                let n = out.len().min(room);
                self.0.read(&mut out[..n])
            }
        }
        let mut body = String::from("; MaxProcs: 8\n");
        for id in 1..200 {
            body += &format!(
                "{id} {} 5 60 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n",
                id * 10
            );
        }
        let src = || FailsAt(std::io::Cursor::new(body.clone().into_bytes()), 3000);
        let one = read_trace_from(src(), "t.swf", &ReadOptions::default()).unwrap_err();
        for piece in [1, 100, 1 << 20] {
            for parsers in ALL_PARSERS {
                let reader = Reader::new(BufReader::new(src()), "t.swf", ReadOptions::default());
                let cut = reader
                    .unwrap()
                    .into_trace_in_pieces(piece, piece, parsers, &|_| {})
                    .unwrap_err();
                assert_eq!(one.to_string(), cut.to_string(), "{parsers:?}");
                assert!(cut.to_string().contains("disk gone"), "{cut}");
            }
        }
    }

    /// Every way of parsing the pieces: on all cores, on a pool of the reading's own, and on
    /// the reading thread.
    const ALL_PARSERS: [Parsers; 3] = [Parsers::Shared, Parsers::Own(2), Parsers::Own(0)];

    /// Parsing in pieces gives what reading line by line gives, whatever the cuts and
    /// whichever threads parse: records,
    /// report, comments among the jobs, and the first error with its line number.
    #[test]
    fn pieces_read_exactly_as_one_reader() {
        let job = |id: u32, procs: u32| {
            format!(
                "{id} {} 5 60 {procs} -1 -1 {procs} 100 -1 1 1 1 -1 1 -1 -1 -1\n",
                id * 10
            )
        };
        let mut body = String::from("; MaxProcs: 8\n; Note: first\n");
        for id in 1..40 {
            body += &job(id, 1 + id % 8);
            match id % 9 {
                3 => body += "; Note: among the jobs\n   continued\n",
                5 => body += "\n",
                7 => body += "12 bad line\n",
                8 => body += &job(900 + id, 64),
                _ => {}
            }
        }
        body += "41 410 5 60 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1"; // no final newline
        for lenient in [false, true] {
            for oversize in [Oversize::Error, Oversize::Skip, Oversize::Clip] {
                let opts = ReadOptions {
                    lenient,
                    oversize,
                    ..ReadOptions::default()
                };
                let one = read_trace_from(body.as_bytes(), "t.swf", &opts);
                // Fixed sizes, and sizes that double from the first.
                let sizes = [(1, 1), (7, 7), (50, 50), (333, 333), (1 << 20, 1 << 20)];
                let cuts = sizes.into_iter().chain([(1, 64), (7, 400), (30, 30 << 8)]);
                for ((piece, most), parsers) in cuts.flat_map(|c| ALL_PARSERS.map(|p| (c, p))) {
                    let reader = Reader::new(body.as_bytes(), "t.swf", opts.clone()).unwrap();
                    let fed = std::sync::Mutex::new(Vec::new());
                    let cut = reader.into_trace_in_pieces(piece, most, parsers, &|r| {
                        fed.lock().unwrap().extend_from_slice(r)
                    });
                    let fed = fed.into_inner().unwrap();
                    let at = format!("piece {piece}, {parsers:?}");
                    match (&one, &cut) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a, b, "{at}");
                            // The feed saw the records, in order, as they were joined.
                            assert_eq!(fed, b.records, "{at}");
                        }
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{at}"),
                        _ => panic!("{at}: {:?} vs {:?}", one.is_ok(), cut.is_ok()),
                    }
                }
            }
        }
    }

    fn fixed(s: &str) -> Result<i64, LineErrorKind> {
        parse_fixed(s.as_bytes())
    }

    #[test]
    fn fixed_point_parsing_is_exact() {
        assert_eq!(fixed("12"), Ok(12_000_000));
        assert_eq!(fixed("-1"), Ok(-1_000_000));
        assert_eq!(fixed("-1.00"), Ok(-1_000_000));
        assert_eq!(fixed("0.5"), Ok(500_000));
        assert_eq!(fixed("1234567890.123456"), Ok(1_234_567_890_123_456));
        assert_eq!(fixed("1.0000005"), Ok(1_000_001));
        assert_eq!(fixed("1e3"), Ok(1_000_000_000));
        assert_eq!(fixed("abc"), Err(LineErrorKind::NotANumber));
        assert_eq!(fixed("."), Err(LineErrorKind::NotANumber));
        for nan in ["NaN", "nan", "-NaN"] {
            assert_eq!(fixed(nan), Err(LineErrorKind::NotANumber), "{nan}");
        }
        assert_eq!(fixed("inf"), Err(LineErrorKind::OutOfRange));
        assert_eq!(
            fixed("99999999999999999999"),
            Err(LineErrorKind::OutOfRange)
        );
    }

    #[test]
    fn seconds_print_exactly() {
        assert_eq!(Secs(12_000_000).to_string(), "12");
        assert_eq!(Secs(12_500_000).to_string(), "12.5");
        assert_eq!(Secs(1).to_string(), "0.000001");
        assert_eq!(Secs(-1_000_000).to_string(), "-1");
    }

    #[test]
    fn header_labels_are_parsed() {
        let mut h = SwfHeader::default();
        for line in [
            " MaxNodes: 144",
            " MaxProcs: 1152",
            " Queue:  0  interactive    ",
            " Partition:  2  ALL",
            " Information: http://a.example/",
            "              http://b.example/",
            " Note: first",
            "       continued",
            " UnixStartTime: 956700003",
            " TimeZoneString: US/Pacific",
        ] {
            h.push_line(line);
        }
        assert_eq!(h.machine_procs(), Some(1152));
        assert_eq!(h.queues, vec![(0, "interactive".to_string())]);
        assert_eq!(h.partitions, vec![(2, "ALL".to_string())]);
        assert_eq!(h.notes, vec!["first\ncontinued".to_string()]);
        assert_eq!(
            h.information,
            vec!["http://a.example/", "http://b.example/"]
        );
        assert_eq!(h.unix_start_time, Some(956_700_003));
        assert_eq!(h.time_zone_string.as_deref(), Some("US/Pacific"));
        let mut nodes_only = SwfHeader::default();
        nodes_only.push_line(" MaxNodes: 100");
        assert_eq!(nodes_only.machine_procs(), Some(100));
    }

    /// Whole numbers are read in the pass that splits the line; the same value written with a
    /// fraction goes the general way. Both must give the same record, or the same error, in
    /// every field, including the signs, zeros and lengths at the fast path's edges.
    #[test]
    fn plain_integers_read_as_the_general_path_reads_them() {
        let base: Vec<&str> = "7 100 5 60 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1"
            .split(' ')
            .collect();
        let tokens = [
            "0",
            "-0",
            "1",
            "-1",
            "-2",
            "007",
            "999999999999",
            "1000000000000",
            "9223372036854",
            "9223372036855",
            "4294967295",
            "4294967296",
            "12345678901234567890",
        ];
        for field in 0..18 {
            for t in tokens {
                if t == "-0" && [5, 6, 9].contains(&field) {
                    // A float field's whole −0 has always read as 0, its −0.0 as −0.
                    continue;
                }
                let line = |v: &str| {
                    let mut f = base.clone();
                    f[field] = v;
                    f.join("  ")
                };
                let plain = parse_record(line(t).as_bytes());
                let general = parse_record(line(&format!("{t}.0")).as_bytes());
                let show = |r: Result<SwfRecord, BadField>| match r {
                    Ok(rec) => format!("{rec:?}"),
                    Err(BadField::Value { field, kind, .. }) => format!("field {field}: {kind:?}"),
                    Err(BadField::Count(n)) => format!("{n} fields"),
                };
                assert_eq!(show(plain), show(general), "field {} = {t}", field + 1);
            }
        }
    }

    /// The float fields' short decimals are converted as the standard library converts them.
    #[test]
    fn short_decimals_convert_as_the_standard_library() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(16);
        let mut texts: Vec<String> = ["0.1", "0.3", "163.38", "973.72", "1.5", "0.000000000000001"]
            .map(String::from)
            .to_vec();
        for _ in 0..200_000 {
            let int_digits = rng.random_range(1..=10);
            let frac_digits = rng.random_range(1..=(16 - int_digits));
            let digits = |n: usize, rng: &mut rand_pcg::Pcg64| -> String {
                (0..n)
                    .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                    .collect()
            };
            texts.push(format!(
                "{}.{}",
                digits(int_digits, &mut rng),
                digits(frac_digits, &mut rng)
            ));
        }
        for t in &texts {
            let want: f64 = t.parse().unwrap();
            let got = as_f64(t.as_bytes()).unwrap().unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{t}");
        }
        // Beyond the fast path: still the standard library's value.
        for t in ["1234567890.1234567", "-0.5", "1.5e3", ".5", "5."] {
            assert_eq!(short_decimal(t.as_bytes()), None, "{t}");
        }
    }

    #[test]
    fn bad_field_names_line_field_and_value() {
        let text = "; MaxProcs: 8\n1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n\
                    2 5 -1 x7 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n";
        let err = read_trace_from(text.as_bytes(), "t.swf", &ReadOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("t.swf:3"), "{msg}");
        assert!(msg.contains("field 4 (run time)"), "{msg}");
        assert!(msg.contains("\"x7\""), "{msg}");
        assert!(msg.contains("--lenient"), "{msg}");
    }
}
