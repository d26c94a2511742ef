//! Bad input never panics: arbitrary bytes, and job lines with arbitrary tokens, read as either
//! records or typed errors.

use cosched_workload::swf::{self, Oversize, ReadOptions};
use proptest::prelude::*;

fn opts(lenient: bool, oversize: u8) -> ReadOptions {
    ReadOptions {
        procs: Some(64),
        lenient,
        oversize: match oversize % 3 {
            0 => Oversize::Skip,
            1 => Oversize::Clip,
            _ => Oversize::Error,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000),
                                   lenient: bool, oversize: u8) {
        let _ = swf::read_trace_from(&bytes[..], "fuzz", &opts(lenient, oversize));
    }

    #[test]
    fn lines_of_odd_tokens_read_or_fail_cleanly(
        lines in proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof!["-1", "0", "7", "-7", "1.5", "1e3", "99999999999999999999", "x", "-", ".", "4294967296", "-0.5"],
                15..20),
            1..20),
        lenient: bool,
    ) {
        let text: String = lines.iter().map(|l| l.join(" ") + "\n").collect();
        match swf::read_trace_from(text.as_bytes(), "fuzz", &opts(lenient, 0)) {
            Ok(t) => {
                // Every job line is either a record or a counted skip.
                prop_assert_eq!(t.records.len() as u64 + t.report.skipped_total() + t.report.oversize_skipped,
                                t.report.job_lines);
                prop_assert!(lenient || t.report.skipped_total() == 0);
            }
            Err(e) => {
                prop_assert!(!lenient || e.line_kind().is_none(), "lenient read failed on {}", e);
                prop_assert!(e.to_string().starts_with("fuzz:"));
            }
        }
    }
}
