//! Writing records and traces in SWF, times exact to the microsecond.

use super::*;

pub(super) struct Secs(pub(super) i64);

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

pub(super) fn opt_secs(v: Option<i64>) -> Secs {
    Secs(v.unwrap_or(MINUS_ONE))
}

pub(super) struct OptNum<T>(Option<T>);

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
