//! What can go wrong reading a trace: a bad line's kind, the reader's errors, and the
//! report of what was skipped.

use super::*;

/// How many examples of skipped lines and oversize jobs a report keeps.
pub(super) const MAX_EXAMPLES: usize = 5;

pub(super) fn field_name(field: &usize) -> &'static str {
    FIELD_NAMES
        .get(field.wrapping_sub(1))
        .copied()
        .unwrap_or("unknown field")
}

pub(super) fn kind_why(kind: &LineErrorKind) -> &'static str {
    kind.why()
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
    pub(super) fn absorb(&mut self, later: ReadReport) {
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
