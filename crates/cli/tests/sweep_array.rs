//! A sweep as a job array on a loopback cluster: `cosched sim sweep --submit` through the
//! cluster's `sbatch` (its Slurm-named link on PATH), resumed after points are lost, and
//! `--gather` writing the files of the same sweep run locally, byte for byte apart from the
//! provenance.

mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::cluster::Cluster;
use support::*;

/// 2 policies × 5 loads × 4 seeds: 40 points.
const SWEEP: &[&str] = &[
    "--model",
    "lublin",
    "--jobs",
    "300",
    "--procs",
    "32",
    "--policies",
    "fcfs,easy",
    "--loads",
    "0.5,0.6,0.7,0.8,0.9",
    "--seeds",
    "1,2,3,4",
    "--batch-size",
    "50",
    "--no-progress",
];

struct Site {
    c: Cluster,
    work: PathBuf,
    path: String,
}

impl Site {
    fn sweep(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(["sim", "sweep"])
            .args(args)
            .current_dir(&self.work)
            .env("PATH", &self.path)
            .env("COSCHED_STATE_DIR", &self.c.dir)
            .env_remove("SLURM_JOB_ID")
            .output()
            .expect("cosched runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.sweep(args);
        assert!(
            out.status.success(),
            "sim sweep {args:?} failed ({}): {}{}\n--- mm log ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.c.mm_log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Waits until `dir` has a result for each of `n` points.
    fn wait_points(&self, dir: &Path, n: usize, secs: u64) {
        let start = Instant::now();
        loop {
            let done = std::fs::read_dir(dir.join("points"))
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                        .count()
                })
                .unwrap_or(0);
            if done >= n {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "{done} of {n} points after {secs} s\n--- logs ---\n{}\n--- mm log ---\n{}",
                logs(dir),
                self.c.mm_log()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

fn logs(dir: &Path) -> String {
    std::fs::read_dir(dir.join("logs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.path().display(),
                        std::fs::read_to_string(e.path()).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A file's text without its provenance: CSV comment lines, the JSON `provenance` object,
/// the SVG's metadata and description.
fn without_provenance(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => text
            .lines()
            .filter(|l| !l.starts_with("# "))
            .collect::<Vec<_>>()
            .join("\n"),
        Some("json") => {
            let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
            v.as_object_mut().unwrap().remove("provenance").unwrap();
            serde_json::to_string_pretty(&v).unwrap()
        }
        _ => {
            let a = text.find("<metadata>").unwrap();
            let b = text.find("</desc>").unwrap();
            format!("{}{}", &text[..a], &text[b..])
        }
    }
}

#[test]
fn a_forty_point_sweep_submitted_to_a_cluster_gathers_into_the_local_sweeps_files() {
    let c = Cluster::up("sweep", "array", &["--nodes", "2", "--pes", "2"]);
    let work = c.dir.join("work");
    let bin_dir = c.dir.join("bin");
    std::fs::create_dir_all(&work).unwrap();
    let out = Command::new(bin())
        .args(["slurm", "install-links", bin_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = Site {
        path: format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        work: work.canonicalize().unwrap(),
        c,
    };
    let dir = s.work.join("arr");
    let mut submit = SWEEP.to_vec();
    submit.extend(["--submit", "arr"]);
    let said = s.ok(&submit);
    assert!(
        said.starts_with("Submitted 40 of 40 points as array job "),
        "{said}"
    );
    s.wait_points(&dir, 40, 600);

    // Two points lost: gather names them, a bare resubmission runs only them.
    for i in [7, 31] {
        std::fs::remove_file(dir.join(format!("points/{i}.json"))).unwrap();
    }
    let out = s.sweep(&["--gather", "arr"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("2 of 40 points have no result"), "{err}");
    assert!(err.contains("point 31 (easy, load 0.7, seed 4)"), "{err}");
    let said = s.ok(&["--submit", "arr"]);
    assert!(
        said.starts_with("Submitted 2 of 40 points as array job "),
        "{said}"
    );
    assert!(
        std::fs::read_to_string(dir.join("submit-2.sh"))
            .unwrap()
            .contains("#SBATCH --array=7,31\n")
    );
    s.wait_points(&dir, 40, 300);
    let said = s.ok(&["--submit", "arr"]);
    assert!(said.starts_with("every point of "), "{said}");
    // Another sweep in the same directory is refused.
    let mut other: Vec<&str> = SWEEP
        .iter()
        .map(|&a| if a == "300" { "301" } else { a })
        .collect();
    other.extend(["--submit", "arr"]);
    let out = s.sweep(&other);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("holds another sweep (not the same arguments)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    s.ok(&["--gather", "arr"]);
    let mut local = SWEEP.to_vec();
    local.extend(["--out", "local"]);
    s.ok(&local);
    for f in ["sweep.csv", "sweep.json", "sweep.svg"] {
        let (a, b) = (s.work.join("local").join(f), dir.join(f));
        assert!(
            without_provenance(&a) == without_provenance(&b),
            "{f} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| !l.starts_with('#')).count(), 41);
    assert!(
        csv.contains("# command: ") && csv.contains("--gather arr"),
        "{csv}"
    );
}
