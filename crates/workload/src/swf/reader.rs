//! The streaming reader: the header on construction, then one job record at a time.

use super::error::MAX_EXAMPLES;
use super::fields::{BadField, LineClass, classify, parse_record};
use super::pieces::{FIRST_PIECE, Joined, PIECE, Parsers, Piece, in_scope, parse_piece};
use super::*;

/// The end of a line error's message; left out of the examples of lines already skipped.
pub(super) const LENIENT_HINT: &str = "; pass --lenient to skip bad lines";

/// A streaming reader: the header is read on construction, then job records are yielded one
/// by one. Skipped lines and oversize jobs are counted in [`Reader::report`].
pub struct Reader<R> {
    pub(super) src: R,
    pub(super) name: String,
    pub(super) gzip: bool,
    pub(super) opts: ReadOptions,
    pub(super) line_no: u64,
    pub(super) buf: Vec<u8>,
    /// A job line read while looking for the end of the header.
    pub(super) pending: bool,
    pub(super) procs: u32,
    pub(super) failed: bool,
    pub(super) header: SwfHeader,
    pub(super) report: ReadReport,
    /// The piecewise reads stop once this many records are in ([`Reader::stop_after`]).
    pub(super) limit: usize,
}

impl<R: BufRead> Reader<R> {
    /// Reads the header of an uncompressed source. `name` is used in error messages.
    pub fn new(src: R, name: impl Into<String>, opts: ReadOptions) -> Result<Self, SwfError> {
        Self::with_format(src, name.into(), opts, false)
    }

    pub(super) fn with_format(
        src: R,
        name: String,
        opts: ReadOptions,
        gzip: bool,
    ) -> Result<Self, SwfError> {
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
            limit: usize::MAX,
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

    /// [`Reader::into_trace`] and [`Reader::into_trace_feeding`] stop reading once `records`
    /// records are in: a run of a trace's first jobs does not decompress and parse the rest.
    /// The trace then holds at least `records` records (more, up to the end of the pieces
    /// already read), or all of them if the input has fewer, and the counts, the comments
    /// and any error are those of the lines read: a bad line after them is not seen.
    pub fn stop_after(mut self, records: usize) -> Self {
        self.limit = records;
        self
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
    pub(super) fn into_trace_in_pieces(
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
        let limit = self.limit;
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
                if joined.len() >= limit {
                    break;
                }
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

    pub(super) fn input_error(&self, line: u64, cause: io::Error) -> SwfError {
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
    pub(super) fn next_line(&mut self) -> Result<bool, SwfError> {
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

    pub(super) fn next_record(&mut self) -> Result<Option<SwfRecord>, SwfError> {
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

    pub(super) fn line_error(&self, bad: BadField) -> SwfError {
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
