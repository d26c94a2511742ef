//! A scheduler written for Batsim runs as a cosched policy through `python/batsim_bridge.py`:
//! pybatsim's own EASY (the peer `--opt variant=pybatsim` follows) schedules KTH-SP2's first
//! jobs under the bridge, and every job starts when the variant starts it.
//!
//! pybatsim and pyzmq are Python packages from the registry; `.ci/run` installs them into
//! `target/pybatsim-venv` (or set `COSCHED_PYBATSIM_VENV` to a virtual environment that has
//! them). Without them the tests fail, saying how to install them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kth() -> PathBuf {
    repo().join("../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz")
}

/// The virtual environment with pybatsim 3.2.1 and pyzmq.
fn venv() -> PathBuf {
    let venv = std::env::var_os("COSCHED_PYBATSIM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/pybatsim-venv"));
    let ok = Command::new(venv.join("bin/python"))
        .args(["-c", "import batsim, zmq, docopt"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} has no pybatsim: run .ci/run's install step (python3 -m venv target/pybatsim-venv \
         && target/pybatsim-venv/bin/pip install --no-deps pybatsim==3.2.1 procset \
         sortedcontainers docopt && target/pybatsim-venv/bin/pip install --only-binary :all: \
         pyzmq) or set COSCHED_PYBATSIM_VENV",
        venv.display()
    );
    venv
}

/// Runs `cosched sim` in `dir`, where pybatsim writes its event log (out_events.csv).
fn sim(dir: &Path, args: &[&str]) -> Output {
    Command::new(support::bin())
        .current_dir(dir)
        .arg("sim")
        .args(args)
        .output()
        .expect("cosched runs")
}

/// Job id → start time, from a `--jobs-out` CSV.
fn starts(csv: &Path) -> HashMap<u64, String> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let id = header.iter().position(|h| *h == "id").unwrap();
    let start = header.iter().position(|h| *h == "start").unwrap();
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[id].parse().unwrap(), f[start].to_string())
        })
        .collect()
}

#[test]
fn pybatsim_easy_through_the_bridge_starts_every_job_when_the_pybatsim_variant_does() {
    let venv = venv();
    let dir = support::scratch_dir("batsim-bridge", "easy");
    // pybatsim's EASY; the venv's lib/pythonX.Y is whichever Python made it.
    let lib = venv.join("lib");
    let scheduler = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages/schedulers"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no pybatsim schedulers under {}", lib.display()))
        .join("unMaintained/easyBackfillNotopo.py");
    let policy = format!(
        "external:{} {} --sched '{} {} -s {{endpoint}}'",
        venv.join("bin/python").display(),
        repo().join("python/batsim_bridge.py").display(),
        venv.join("bin/pybatsim").display(),
        scheduler.display()
    );
    let bridged = dir.path().join("bridged.csv");
    let variant = dir.path().join("variant.csv");
    let trace = kth();
    let common = [
        "--trace",
        trace.to_str().unwrap(),
        "--first",
        "1500",
        "--kill-at-estimate",
    ];
    let mut args: Vec<&str> = common.to_vec();
    args.extend(["--policy", &policy, "--jobs-out", bridged.to_str().unwrap()]);
    let out = sim(dir.path(), &args);
    assert!(
        out.status.success(),
        "the bridged run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args: Vec<&str> = common.to_vec();
    args.extend([
        "--policy",
        "easy",
        "--opt",
        "variant=pybatsim",
        "--jobs-out",
        variant.to_str().unwrap(),
    ]);
    let out = sim(dir.path(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (bridged, variant) = (starts(&bridged), starts(&variant));
    assert_eq!(bridged.len(), 1500, "every job of the prefix has a record");
    let mut differ: Vec<_> = variant
        .iter()
        .filter(|(id, start)| bridged.get(id) != Some(start))
        .map(|(id, start)| (*id, start.clone(), bridged.get(id).cloned()))
        .collect();
    differ.sort();
    assert!(
        differ.is_empty(),
        "{} of {} jobs start elsewhere under pybatsim's own EASY than under \
         variant=pybatsim; first (id, variant's start, pybatsim's start): {:?}",
        differ.len(),
        variant.len(),
        &differ[..differ.len().min(5)]
    );
}

#[test]
fn a_scheduler_the_bridge_cannot_start_stops_the_run_with_its_name() {
    let venv = venv();
    let policy = format!(
        "external:{} {} --sched '/nonexistent/batsched -s {{endpoint}}'",
        venv.join("bin/python").display(),
        repo().join("python/batsim_bridge.py").display(),
    );
    let trace = kth();
    let dir = support::scratch_dir("batsim-bridge", "no-scheduler");
    let out = sim(
        dir.path(),
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--first",
            "10",
            "--policy",
            &policy,
        ],
    );
    assert!(!out.status.success(), "the run must stop");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot start the scheduler '/nonexistent/batsched'"),
        "the error names the scheduler: {stderr}"
    );
}
