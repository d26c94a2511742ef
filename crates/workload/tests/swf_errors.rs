//! Bad input gives typed errors that say where and what, never a panic; --lenient and
//! --oversize change what happens.

use std::io::Write;

use cosched_core::{Dur, Time};
use cosched_workload::swf::{self, Oversize, ReadOptions, SwfError, SwfHeader, SwfRecord};

const GOOD: &str = "; MaxProcs: 8\n\
    1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n\
    2 10 0 50.5 2 -1 -1 2 100 -1 1 2 1 -1 0 -1 -1 -1\n";

fn read(text: &str, opts: &ReadOptions) -> Result<swf::Trace, SwfError> {
    swf::read_trace_from(text.as_bytes(), "test.swf", opts)
}

fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("cosched-{}-{name}", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn fractional_runtimes_and_unknowns_are_read() {
    let t = read(GOOD, &ReadOptions::default()).unwrap();
    assert_eq!(t.records.len(), 2);
    assert_eq!(t.records[1].run, Some(Dur::from_millis(50_500)));
    assert_eq!(t.records[1].submit, Some(Time::from_secs(10)));
    assert_eq!(t.records[0].avg_cpu, None);
    assert_eq!(t.records[1].queue, Some(0));
}

#[test]
fn gzip_is_detected_by_magic_not_name() {
    let plain_named_gz = temp("plain.swf.gz", GOOD.as_bytes());
    let gz_named_plain = temp("packed.swf", &gzip(GOOD.as_bytes()));
    let a = swf::read_trace(&plain_named_gz, &ReadOptions::default()).unwrap();
    let b = swf::read_trace(&gz_named_plain, &ReadOptions::default()).unwrap();
    std::fs::remove_file(plain_named_gz).ok();
    std::fs::remove_file(gz_named_plain).ok();
    assert_eq!(a.records, b.records);
    assert_eq!(a.records.len(), 2);
}

#[test]
fn truncated_gzip_is_a_clear_error() {
    let mut text = String::from("; MaxProcs: 8\n");
    for i in 1..=5000 {
        text.push_str(&format!(
            "{i} {i} 0 100 4 -1 -1 4 200 -1 1 {i} 1 -1 1 -1 -1 -1\n"
        ));
    }
    let packed = gzip(text.as_bytes());
    let path = temp("truncated.swf.gz", &packed[..packed.len() / 2]);
    let result = swf::read_trace(&path, &ReadOptions::default());
    std::fs::remove_file(&path).ok();
    let err = result.expect_err("a truncated gzip must not read as success");
    assert!(matches!(err, SwfError::Gzip { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("truncated"), "{msg}");
    assert!(msg.contains("truncated.swf.gz"), "{msg}");
}

#[test]
fn bad_field_reports_file_line_field_and_value() {
    let text = format!("{GOOD}3 20 0 abc 2 -1 -1 2 100 -1 1 2 1 -1 0 -1 -1 -1\n");
    let err = read(&text, &ReadOptions::default()).unwrap_err();
    match &err {
        SwfError::Field {
            line, field, value, ..
        } => {
            assert_eq!((*line, *field, value.as_str()), (4, 4, "abc"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with("test.swf:4: field 4 (run time)"), "{msg}");
    assert!(msg.contains("--lenient"));
}

#[test]
fn lenient_skips_bad_lines_and_counts_them_by_kind() {
    let text = format!(
        "{GOOD}3 20 0 abc 2 -1 -1 2 100 -1 1 2 1 -1 0 -1 -1 -1\n\
         4 20 0 10 2 -1 -1\n\
         5 30 0 10 -7 -1 -1 2 100 -1 1 2 1 -1 0 -1 -1 -1\n\
         6 30 0 10 2.5 -1 -1 2 100 -1 1 2 1 -1 0 -1 -1 -1\n\
         7 40 0 10 2 -1 -1 2 100 -1 1 2 1 -1 0 -1 -1 -1\n"
    );
    let strict = read(&text, &ReadOptions::default());
    assert!(strict.is_err());
    let t = read(
        &text,
        &ReadOptions {
            lenient: true,
            ..Default::default()
        },
    )
    .unwrap();
    let jobs: Vec<u64> = t.records.iter().map(|r| r.job).collect();
    assert_eq!(jobs, vec![1, 2, 7]);
    assert_eq!(t.report.skipped_total(), 4);
    assert_eq!(t.report.skipped.get("not_a_number"), Some(&1));
    assert_eq!(t.report.skipped.get("field_count"), Some(&1));
    assert_eq!(t.report.skipped.get("negative"), Some(&1));
    assert_eq!(t.report.skipped.get("fractional"), Some(&1));
    assert_eq!(t.report.skipped_examples.len(), 4);
    assert!(t.report.skipped_examples[0].starts_with("test.swf:4: field 4 (run time)"));
    assert!(!t.report.skipped_examples[0].contains("--lenient"));
}

#[test]
fn oversize_jobs_error_skip_or_clip() {
    let text = format!("{GOOD}9 30 0 10 16 -1 -1 16 100 -1 1 2 1 -1 0 -1 -1 -1\n");
    let err = read(&text, &ReadOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(
        err,
        SwfError::Oversize {
            job: 9,
            asked: 16,
            procs: 8,
            line: 4,
            ..
        }
    ));
    assert!(msg.contains("job 9") && msg.contains("--oversize"), "{msg}");
    let skip = read(
        &text,
        &ReadOptions {
            oversize: Oversize::Skip,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(skip.records.len(), 2);
    assert_eq!((skip.report.oversize, skip.report.oversize_skipped), (1, 1));
    let clip = read(
        &text,
        &ReadOptions {
            oversize: Oversize::Clip,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(clip.records.len(), 3);
    assert_eq!(clip.records[2].req_procs, Some(8));
    assert_eq!(clip.records[2].alloc_procs, Some(8));
    assert_eq!(clip.report.oversize_clipped, 1);
    // A larger --procs makes the job fit.
    let big = read(
        &text,
        &ReadOptions {
            procs: Some(16),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        (big.records.len(), big.procs, big.report.oversize),
        (3, 16, 0)
    );
}

#[test]
fn headerless_trace_needs_procs() {
    let text = "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n";
    let err = read(text, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, SwfError::NoMachineSize { .. }));
    assert!(err.to_string().contains("--procs"), "{err}");
    let t = read(
        text,
        &ReadOptions {
            procs: Some(64),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((t.procs, t.records.len()), (64, 1));
}

#[test]
fn every_field_survives_a_round_trip() {
    let rec = SwfRecord {
        job: 42,
        submit: Some(Time::from_micros(1_234_567_890_123_456)),
        wait: Some(Dur::from_micros(1)),
        run: Some(Dur::from_millis(1500)),
        alloc_procs: Some(3),
        avg_cpu: Some(0.123456789),
        used_mem_kib: Some(1e9),
        req_procs: Some(4),
        req_time: Some(Dur::from_secs(3600)),
        req_mem_kib: Some(2048.25),
        status: Some(5),
        user: Some(7),
        group: Some(8),
        app: Some(9),
        queue: Some(10),
        partition: Some(11),
        preceding_job: Some(41),
        think_time: Some(Dur::from_secs(60)),
    };
    let mut header = SwfHeader::default();
    header.push_line(" MaxProcs: 4");
    header.push_line(" Note: round trip");
    let records = vec![
        rec,
        SwfRecord {
            job: 43,
            ..Default::default()
        },
    ];
    let mut bytes = Vec::new();
    swf::write_trace(&mut bytes, &header, &records).unwrap();
    let back = swf::read_trace_from(&bytes[..], "rt", &ReadOptions::default()).unwrap();
    assert_eq!(back.records, records);
    assert_eq!(back.header, header);
}
