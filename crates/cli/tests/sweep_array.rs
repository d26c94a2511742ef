//! A sweep as a job array: `cosched sim sweep --submit` through a loopback cosched cluster's
//! `sbatch` (its Slurm-named link on PATH) and through Debian's Slurm (`slurm-wlm`: one
//! slurmctld and two slurmd on loopback, as `benches/slurm-loopback.sh` sets them up),
//! resumed after points are lost, and `--gather` writing the files of the same sweep run
//! locally, byte for byte apart from the provenance.

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

/// Where the sweep is submitted from, and to which resource manager.
struct Site {
    work: PathBuf,
    env: Vec<(&'static str, String)>,
    /// What to show when something fails: the resource manager's log.
    log: Box<dyn Fn() -> String>,
}

impl Site {
    fn sweep(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(["sim", "sweep"])
            .args(args)
            .current_dir(&self.work)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("SLURM_JOB_ID")
            .output()
            .expect("cosched runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.sweep(args);
        assert!(
            out.status.success(),
            "sim sweep {args:?} failed ({}): {}{}\n--- log ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            (self.log)()
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
                "{done} of {n} points after {secs} s\n--- tasks ---\n{}\n--- log ---\n{}",
                logs(dir),
                (self.log)()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Gathers `arr`, runs the same sweep here into `local`, and compares their files.
    fn gather_matches_local(&self) {
        let dir = self.work.join("arr");
        self.ok(&["--gather", "arr"]);
        let mut local = SWEEP.to_vec();
        local.extend(["--out", "local"]);
        self.ok(&local);
        for f in ["sweep.csv", "sweep.json", "sweep.svg", "sweep.png"] {
            let (a, b) = (self.work.join("local").join(f), dir.join(f));
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

/// A file without its provenance: CSV comment lines, the JSON `provenance` object, the
/// SVG's metadata and description, the PNG's text chunks.
fn without_provenance(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => png_without_text(&bytes),
        Some("json") => {
            let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            v.as_object_mut().unwrap().remove("provenance").unwrap();
            serde_json::to_vec_pretty(&v).unwrap()
        }
        Some("csv") => String::from_utf8(bytes)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("# "))
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes(),
        _ => {
            let text = String::from_utf8(bytes).unwrap();
            let a = text.find("<metadata>").unwrap();
            let b = text.find("</desc>").unwrap();
            format!("{}{}", &text[..a], &text[b..]).into_bytes()
        }
    }
}

/// A PNG's chunks but its `tEXt` ones.
fn png_without_text(png: &[u8]) -> Vec<u8> {
    let mut out = png[..8].to_vec();
    let mut at = 8;
    while at + 8 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let end = at + 12 + len;
        if &png[at + 4..at + 8] != b"tEXt" {
            out.extend_from_slice(&png[at..end]);
        }
        at = end;
    }
    out
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
    let c = std::sync::Arc::new(c);
    let cl = c.clone();
    let s = Site {
        env: vec![
            (
                "PATH",
                format!(
                    "{}:{}",
                    bin_dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
            ("COSCHED_STATE_DIR", c.dir.display().to_string()),
        ],
        work: work.canonicalize().unwrap(),
        log: Box::new(move || cl.mm_log()),
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

    s.gather_matches_local();
}

/// Debian's Slurm on loopback (`benches/slurm-loopback.sh`), on free ports, taken down on
/// drop.
struct Slurm {
    dir: PathBuf,
    script: PathBuf,
}

impl Slurm {
    fn up(dir: PathBuf, nodes: u32) -> Slurm {
        assert!(
            Path::new("/usr/sbin/slurmctld").exists() && Path::new("/usr/sbin/munged").exists(),
            "this test needs Debian's slurm-wlm (slurmctld, slurmd, munge); .ci/run installs it"
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/slurm-loopback.sh");
        let (ctld, node) = free_ports(nodes);
        let s = Slurm { dir, script };
        let out = Command::new("sh")
            .arg(&s.script)
            .args(["up", &nodes.to_string()])
            .arg(&s.dir)
            .env("SLURM_LOOPBACK_CTLD_PORT", ctld.to_string())
            .env("SLURM_LOOPBACK_NODE_PORT", node.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm-loopback.sh up failed: {}{}\n--- slurmctld ---\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            s.log()
        );
        s
    }

    fn conf(&self) -> String {
        self.dir.join("etc/slurm.conf").display().to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/slurmctld.log")).unwrap_or_default()
    }
}

impl Drop for Slurm {
    /// Stops the daemons and waits until they are gone: slurmctld saves its state on its way
    /// out, which would race the removal of the scratch directory.
    fn drop(&mut self) {
        let mut pid_files = vec![self.dir.join("slurmctld.pid"), self.dir.join("munge/pid")];
        if let Ok(d) = std::fs::read_dir(self.dir.join("spool")) {
            pid_files.extend(
                d.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "pid")),
            );
        }
        let pids: Vec<String> = pid_files.iter().map(|p| pid_in_file(p)).collect();
        let _ = Command::new("sh")
            .arg(&self.script)
            .arg("down")
            .arg(&self.dir)
            .output();
        let alive = |pid: &String| {
            !pid.is_empty()
                && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|st| !st.rsplit(") ").next().unwrap_or("").starts_with('Z'))
        };
        let start = Instant::now();
        while pids.iter().any(alive) && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A free port for slurmctld, and a base B with B+1..=B+n free for the slurmd.
fn free_ports(n: u32) -> (u16, u16) {
    use std::net::TcpListener;
    let ctld = TcpListener::bind("127.0.0.1:0").unwrap();
    loop {
        let first = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = first.local_addr().unwrap().port();
        if u32::from(b) + n > 65535 {
            continue;
        }
        let rest: Vec<_> = (1..n)
            .map(|k| TcpListener::bind(("127.0.0.1", b + k as u16)))
            .collect();
        if rest.iter().all(Result::is_ok) {
            return (ctld.local_addr().unwrap().port(), b - 1);
        }
    }
}

#[test]
fn a_forty_point_sweep_submitted_to_debians_slurm_gathers_into_the_local_sweeps_files() {
    let scratch = scratch_dir("sweep", "slurm");
    let slurm = std::sync::Arc::new(Slurm::up(scratch.path().join("slurm"), 2));
    let work = scratch.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let sl = slurm.clone();
    let s = Site {
        env: vec![("SLURM_CONF", slurm.conf())],
        work,
        log: Box::new(move || sl.log()),
    };
    let mut submit = SWEEP.to_vec();
    submit.extend(["--submit", "arr"]);
    let said = s.ok(&submit);
    assert!(
        said.starts_with("Submitted 40 of 40 points as array job "),
        "{said}"
    );
    s.wait_points(&s.work.join("arr"), 40, 600);
    s.gather_matches_local();
}
