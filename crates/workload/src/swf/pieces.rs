//! Reading on every core: the input cut into pieces at line ends, each parsed by a reader
//! of its own, and joined in input order so that the result is one reader's, error for error.

use super::*;

/// Whoever follows a read piece by piece ([`Reader::into_trace_feeding`]).
pub type Feed<'a> = dyn Fn(&[SwfRecord]) + Sync + 'a;

/// About how many bytes of job lines one core parses at a time in [`Reader::into_trace`]:
/// large enough that a piece costs far more than its reader's set-up.
pub(super) const PIECE: usize = 1 << 20;

/// The size of the first piece: pieces start small and double up to [`PIECE`], so that
/// whoever follows the feed (a simulation) gets its first jobs after a few milliseconds
/// instead of after a whole piece has been gunzipped and parsed.
pub(super) const FIRST_PIECE: usize = 1 << 16;

/// What one piece of the input gave.
pub(super) struct Piece {
    /// The first error, which ends the piece (and the trace).
    pub(super) error: Option<SwfError>,
    /// Comment lines among the jobs, in order.
    pub(super) comments: Vec<String>,
    pub(super) report: ReadReport,
}

/// Which threads parse a trace's pieces.
#[derive(Clone, Copy, Debug)]
pub(super) enum Parsers {
    /// rayon's global pool: all cores.
    Shared,
    /// A pool of this many threads of the reading's own; none: the reading thread parses
    /// each piece after reading it.
    Own(usize),
}

/// Runs `op` in a scope of `pool`'s threads, or of the global pool's.
pub(super) fn in_scope<'s, R>(
    pool: Option<&rayon::ThreadPool>,
    op: impl FnOnce(&rayon::Scope<'s>) -> R,
) -> R {
    match pool {
        Some(pool) => pool.in_place_scope(op),
        None => rayon::in_place_scope(op),
    }
}

/// The records of the pieces parsed so far, joined in order by the parsing threads as the
/// pieces complete, so that the copy into one vector overlaps the decompression (which is the
/// longest part of reading) instead of following it on the reading thread.
#[derive(Default)]
pub(super) struct Joined(std::sync::Mutex<JoinState>);

#[derive(Default)]
pub(super) struct JoinState {
    pub(super) records: Vec<SwfRecord>,
    /// Pieces done before one that comes earlier in the input, by number, with whether
    /// they ended in an error.
    pub(super) parked: BTreeMap<usize, (Vec<SwfRecord>, bool)>,
    /// The number of the next piece to append.
    pub(super) next: usize,
    /// A piece ended in an error: the records after it are not the trace's, so the feed
    /// is given no more.
    pub(super) stopped: bool,
}

impl Joined {
    /// Piece `k`'s records (`failed`: the piece ended in an error): appended now if every
    /// piece before it is in, else parked. Each appended piece is handed to `feed`, in input
    /// order, up to and including the first that failed.
    pub(super) fn add(&self, k: usize, records: Vec<SwfRecord>, failed: bool, feed: &Feed) {
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
    pub(super) fn parse_onto(
        &self,
        k: usize,
        parse: impl FnOnce(&mut Vec<SwfRecord>) -> bool,
        feed: &Feed,
    ) {
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

    /// How many records are joined so far (pieces still being parsed, or parked behind one,
    /// are not counted).
    pub(super) fn len(&self) -> usize {
        self.0.lock().map_or(0, |st| st.records.len())
    }

    /// The records of all `pieces` pieces, in input order.
    pub(super) fn into_records(self, pieces: usize) -> Vec<SwfRecord> {
        let st = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        debug_assert!(st.next == pieces && st.parked.is_empty());
        st.records
    }
}

/// Parses one piece of job lines, `first_line` being the number of the line before its first,
/// appending its records to `records`.
pub(super) fn parse_piece(
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
        limit: usize::MAX,
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
