//! Reads the archive logs in ../shared/traces: every job line becomes a record, and writing a
//! trace back and reading it again gives the same records and header.

use std::io::Read;
use std::path::{Path, PathBuf};

use cosched_workload::swf::{self, ReadOptions};

fn traces_dir() -> Option<PathBuf> {
    cosched_workload::shared::traces_dir("the archive-trace tests")
}

fn gz_traces(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".swf.gz"))
        .collect();
    v.sort();
    v
}

/// Counts job lines independently of the reader: decompress everything, count lines that
/// are neither blank nor comments.
fn count_job_lines(path: &Path) -> usize {
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .count()
}

#[test]
fn every_archive_trace_parses_with_one_record_per_job_line() {
    let Some(dir) = traces_dir() else { return };
    let traces = gz_traces(&dir);
    assert!(
        traces.len() >= 3,
        "expected the archive traces in {}",
        dir.display()
    );
    for path in traces {
        let trace =
            swf::read_trace(&path, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let expected = count_job_lines(&path);
        assert_eq!(trace.records.len(), expected, "{}", path.display());
        assert_eq!(trace.report.job_lines as usize, expected);
        assert_eq!(trace.report.skipped_total(), 0);
        assert_eq!(Some(trace.procs), trace.header.machine_procs());
        assert!(
            !trace.header.acknowledge.is_empty(),
            "{}: acknowledgement kept",
            path.display()
        );
        if let Some(max_records) = trace.header.max_records {
            // The cleaned logs drop some jobs, never add any.
            assert!(trace.records.len() as u64 <= max_records);
        }
    }
}

#[test]
fn known_header_values_are_read() {
    let Some(dir) = traces_dir() else { return };
    let trace = swf::read_trace(
        &dir.join("SDSC-BLUE-2000-4.2-cln.swf.gz"),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(trace.procs, 1152);
    assert_eq!(trace.header.max_nodes, Some(144));
    assert_eq!(trace.header.unix_start_time, Some(956_700_003));
    assert_eq!(trace.header.time_zone_string.as_deref(), Some("US/Pacific"));
    assert_eq!(trace.header.queues.len(), 24);
    assert_eq!(trace.header.queues[0], (0, "interactive".to_string()));
    assert_eq!(trace.records[0].job, 9);
    assert_eq!(trace.records[0].run.map(|d| d.as_secs()), Some(50866));
    assert_eq!(trace.records[0].req_procs, Some(256));
    assert_eq!(trace.records[0].group, None);
}

#[test]
fn write_then_read_gives_identical_records_and_header() {
    let Some(dir) = traces_dir() else { return };
    let path = dir.join("KTH-SP2-1996-2.1-cln.swf.gz");
    let original = swf::read_trace(&path, &ReadOptions::default()).unwrap();
    // The second URL is an unlabelled continuation of the Information line.
    assert_eq!(original.header.information.len(), 2);
    assert!(original.header.notes.iter().any(|n| n.contains("job<=14")));
    let mut bytes = Vec::new();
    swf::write_trace(&mut bytes, &original.header, &original.records).unwrap();
    let again = swf::read_trace_from(&bytes[..], "roundtrip", &ReadOptions::default()).unwrap();
    assert_eq!(again.records, original.records);
    assert_eq!(again.header, original.header);
    // And through a gzip file on disk.
    let out = std::env::temp_dir().join(format!("cosched-roundtrip-{}.swf.gz", std::process::id()));
    swf::write_trace_path(&out, &original.header, &original.records).unwrap();
    let from_gz = swf::read_trace(&out, &ReadOptions::default()).unwrap();
    std::fs::remove_file(&out).ok();
    assert_eq!(from_gz.records, original.records);
    assert_eq!(from_gz.header, original.header);
}

#[test]
fn streaming_summary_equals_in_memory_summary() {
    let Some(dir) = traces_dir() else { return };
    let path = dir.join("KTH-SP2-1996-2.1-cln.swf.gz");
    let opts = ReadOptions::default();
    let streamed = cosched_workload::summary::summarize_file(&path, &opts).unwrap();
    let trace = swf::read_trace(&path, &opts).unwrap();
    let in_memory = cosched_workload::summarize(&trace, &path.display().to_string());
    assert_eq!(streamed, in_memory);
    assert_eq!(streamed.jobs, 27_992);
    assert_eq!(streamed.procs, 100);
    assert!(streamed.acknowledge[0].contains("Malinowsky"));
    // KTH requested times: every job has one.
    assert_eq!(streamed.estimates.as_ref().unwrap().jobs, 27_992);
}
