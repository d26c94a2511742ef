use super::fields::{BadField, as_f64, parse_fixed, parse_record, short_decimal};
use super::pieces::Parsers;
use super::write::Secs;
use super::*;

/// An input that reads its bytes up to an offset, then fails.
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

/// An input that fails partway fails the pieced read as it fails one reader.
#[test]
fn an_input_error_ends_a_pieced_read_as_it_ends_one_reader() {
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

/// A read told to stop after `n` records holds the whole read's first records, at least
/// `n` of them; parsed on the reading thread, it does not reach what lies well beyond them:
/// here a bad line and an input that fails, each of which ends the whole read in an error.
/// (Parsing threads may lag the reading by any number of pieces, each of which is read.)
#[test]
fn a_read_stopped_after_n_records_is_a_prefix_and_reads_no_further() {
    let mut body = String::from("; MaxProcs: 8\n");
    for id in 1..2000 {
        body += &format!(
            "{id} {} 5 60 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n",
            id * 10
        );
    }
    let whole = read_trace_from(body.as_bytes(), "t.swf", &ReadOptions::default()).unwrap();
    let bad = format!("{body}12 bad line\n");
    let len = body.len() as u64;
    for parsers in ALL_PARSERS {
        for n in [0, 1, 10, 100] {
            let at = format!("{n} records, {parsers:?}");
            let serial = matches!(parsers, Parsers::Own(0));
            let reader = Reader::new(bad.as_bytes(), "t.swf", ReadOptions::default()).unwrap();
            let cut = reader
                .stop_after(n)
                .into_trace_in_pieces(64, 256, parsers, &|_| {});
            let cut = match cut {
                Ok(cut) => cut,
                Err(_) if !serial => continue,
                Err(e) => panic!("{at}: {e}"),
            };
            assert!(cut.records.len() >= n, "{at}");
            assert_eq!(cut.records, whole.records[..cut.records.len()], "{at}");
            if !serial {
                continue;
            }
            assert!(cut.records.len() < 1000, "{at}: read {}", cut.records.len());
            let failing = FailsAt(std::io::Cursor::new(body.clone().into_bytes()), len - 100);
            let reader = Reader::new(BufReader::new(failing), "t.swf", ReadOptions::default());
            let cut = reader
                .unwrap()
                .stop_after(n)
                .into_trace_in_pieces(64, 256, parsers, &|_| {});
            assert!(cut.unwrap().records.len() >= n, "{at}");
        }
        // Without a stop, both reach their error.
        let reader = Reader::new(bad.as_bytes(), "t.swf", ReadOptions::default()).unwrap();
        assert!(
            reader
                .into_trace_in_pieces(64, 256, parsers, &|_| {})
                .is_err()
        );
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
