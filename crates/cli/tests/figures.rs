//! Figures, Gantt charts and provenance from the command line: a sweep with two variants of
//! one policy draws two series named by their options; every JSON, CSV and figure carries
//! the provenance; a Gantt chart of a hand-made trace has one rectangle per job piece.

use std::path::PathBuf;
use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("cosched runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "cosched failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A scratch directory removed at the end of the test.
struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("cosched-figures-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self, f: &str) -> String {
        self.0.join(f).to_str().unwrap().to_string()
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_sweep_with_two_variants_of_one_policy_draws_two_series() {
    let s = Scratch::new("variants");
    ok(&cosched(&[
        "sim",
        "sweep",
        "--model",
        "lublin",
        "--procs",
        "32",
        "--jobs",
        "300",
        "--loads",
        "0.6,0.9",
        "--seeds",
        "1,2",
        "--policies",
        "gang:quantum=10s,gang:quantum=600s,easy",
        "--metric",
        "p90-wait",
        "--out",
        &s.path("out"),
    ]));
    let svg = std::fs::read_to_string(s.0.join("out/sweep.svg")).unwrap();
    for name in ["gang quantum=10s", "gang quantum=600s", "easy"] {
        assert_eq!(
            svg.matches(&format!(">{name}<")).count()
                + svg.matches(&format!(">\n{name}\n<")).count(),
            1,
            "one legend entry {name:?}"
        );
    }
    assert!(svg.contains("p90 wait (s)"), "the metric is the y axis");
    assert!(
        svg.contains("90 % Student-t confidence interval"),
        "the bars are said"
    );
    // The two variants really ran with their own quanta: their figures differ.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.0.join("out/sweep.json")).unwrap())
            .unwrap();
    let wait = |p: &str| -> Vec<f64> {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["policy"] == p)
            .map(|r| r["mean_response_s"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(wait("gang:quantum=10s").len(), 4);
    assert_ne!(wait("gang:quantum=10s"), wait("gang:quantum=600s"));
    // A metric that does not exist is refused with the list.
    let bad = cosched(&[
        "sim", "sweep", "--model", "lublin", "--procs", "8", "--metric", "speed",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("p90-bsld"));
}

#[test]
fn every_output_carries_its_provenance() {
    let s = Scratch::new("provenance");
    let swf = s.path("tiny.swf");
    std::fs::write(
        &swf,
        "; MaxProcs: 4\n1 0 0 100 4 -1 -1 4 100 -1 1 7 1 -1 2 -1 -1 -1\n2 10 0 50 2 -1 -1 2 60 -1 1 8 1 -1 3 -1 -1 -1\n",
    )
    .unwrap();
    let json = ok(&cosched(&[
        "sim",
        "--trace",
        &swf,
        "--policy",
        "fcfs",
        "--json",
        "--jobs-out",
        &s.path("jobs.csv"),
        "--gantt-out",
        &s.path("g.svg"),
        "--swf-out",
        &s.path("out.swf"),
    ]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let want = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(std::fs::read(&swf).unwrap());
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_eq!(doc["provenance"]["input_sha256"], want.as_str());
    assert!(
        doc["provenance"]["generator"]
            .as_str()
            .unwrap()
            .starts_with("cosched ")
    );
    assert!(
        doc["provenance"]["command"]
            .as_str()
            .unwrap()
            .contains("--policy fcfs")
    );
    let csv = std::fs::read_to_string(s.0.join("jobs.csv")).unwrap();
    assert!(csv.contains(&format!("# input_sha256: {want}\n")), "{csv}");
    // User and queue columns, from SWF fields 12 and 15.
    let data: Vec<&str> = csv.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(data[0].ends_with(",user,queue"), "{}", data[0]);
    assert!(
        data[1].ends_with(",7,2") && data[2].ends_with(",8,3"),
        "{csv}"
    );
    let svg = std::fs::read_to_string(s.0.join("g.svg")).unwrap();
    assert!(svg.contains(&format!("input_sha256=\"{want}\"")));
    assert!(svg.contains("<desc>generator: cosched "));
    // The schedule written as SWF is still a trace, provenance and all.
    let out_swf = std::fs::read_to_string(s.0.join("out.swf")).unwrap();
    assert!(out_swf.contains("; Provenance-input_sha256: "));
    ok(&cosched(&["workload", "info", &s.path("out.swf")]));
    // And a CSV-commented SWF (# lines) reads as the same trace.
    std::fs::write(
        s.0.join("commented.swf"),
        format!("# generator: x\n{}", std::fs::read_to_string(&swf).unwrap()),
    )
    .unwrap();
    let info = ok(&cosched(&[
        "workload",
        "info",
        &s.path("commented.swf"),
        "--json",
    ]));
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["jobs"], 2, "{info}");
}

/// Four PEs under FCFS: job 1 on PE 0 (ends at 10 s), job 2 on PEs 1-2, job 3 on PE 3 (ends
/// at 15 s); job 4 (2 PEs, at 20 s) gets the free PEs 0 and 3, not contiguous: two
/// rectangles. Job 5 comes after all. Six pieces; the window cuts jobs out.
#[test]
fn a_gantt_chart_has_one_rectangle_per_job_piece() {
    let s = Scratch::new("gantt");
    let swf = s.path("tiny.swf");
    std::fs::write(
        &swf,
        "; MaxProcs: 4\n\
         1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 0 0 200 2 -1 -1 2 200 -1 1 1 1 -1 1 -1 -1 -1\n\
         3 0 0 15 1 -1 -1 1 15 -1 1 1 1 -1 1 -1 -1 -1\n\
         4 20 0 50 2 -1 -1 2 50 -1 1 1 1 -1 1 -1 -1 -1\n\
         5 400 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let pieces = |svg: &str| -> usize {
        // Job rectangles are the only filled rects drawn at opacity 0.8.
        svg.lines()
            .filter(|l| {
                l.contains("<rect") && l.contains("opacity=\"0.8\"") && !l.contains("fill=\"none\"")
            })
            .count()
    };
    let jobs = s.path("jobs.csv");
    ok(&cosched(&[
        "sim",
        "--trace",
        &swf,
        "--policy",
        "fcfs",
        "--gantt-out",
        &s.path("all.svg"),
        "--jobs-out",
        &jobs,
    ]));
    let all = std::fs::read_to_string(s.0.join("all.svg")).unwrap();
    assert_eq!(pieces(&all), 6, "{all}");
    ok(&cosched(&[
        "sim",
        "--trace",
        &swf,
        "--policy",
        "fcfs",
        "--gantt-out",
        &s.path("w.svg"),
        "--gantt-window",
        "0s..150s",
    ]));
    // 0..150 s: jobs 1 to 4 (five pieces), not job 5.
    assert_eq!(
        pieces(&std::fs::read_to_string(s.0.join("w.svg")).unwrap()),
        5
    );
    ok(&cosched(&[
        "sim",
        "--trace",
        &swf,
        "--policy",
        "fcfs",
        "--gantt-out",
        &s.path("g.png"),
    ]));
    let png = std::fs::read(s.0.join("g.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.windows(14).any(|w| w == b"tEXtgenerator\0"));
    let bad = cosched(&[
        "sim",
        "--trace",
        &swf,
        "--gantt-out",
        &s.path("x.svg"),
        "--gantt-window",
        "5m..1m",
    ]);
    assert!(!bad.status.success());
}
