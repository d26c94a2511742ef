//! The MPI conformance set's runner, shared by the tests that run the set under a launcher
//! (included with `#[path]`): builds the programs of `tests/mpi-conformance/` for one MPI,
//! runs each under a [`Launcher`] and checks its verdict against what that launcher is known
//! to do. A launcher is anything that starts N ranks of a program and reports its exit code
//! and output: `pmix-node` on one or two nodes, `cosched submit`, and each MPI's own launcher
//! ([`Own`]: `mpiexec.mpich`, `mpirun.openmpi`), the reference the others are compared with.
//!
//! A program passes when rank 0 printed `conformance NAME: pass` and the job exited 0, or,
//! for `abort`, when the job exited with the code `MPI_Abort` was given (7).

// Each test that includes this module uses the part for its own MPI and launcher.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The folder of the programs (this file's).
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/mpi-conformance");

/// The set, in the order it runs: C programs, then mpi4py ones (`.py`).
pub const PROGRAMS: &[&str] = &[
    "world",
    "ring",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "scatter",
    "allgather",
    "alltoall",
    "scan",
    "reduce_scatter",
    "barrier",
    "comm_split",
    "comm_dup",
    "cart",
    "datatype",
    "nonblocking",
    "persistent",
    "probe",
    "onesided",
    "large",
    "thread_multiple",
    "wtime",
    "nameserv",
    "spawn",
    "abort",
    "py_world",
    "py_collectives",
    "py_p2p",
];

/// The exit code `abort.c` passes to `MPI_Abort`.
const ABORT_CODE: i32 = 7;

/// Which MPI the C programs are built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mpi {
    /// `mpicc.openmpi`; the mpi4py programs too (Debian's mpi4py is built on Open MPI).
    OpenMpi,
    /// `mpicc.mpich`; no mpi4py programs.
    Mpich,
}

impl Mpi {
    fn compiler(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "mpicc.openmpi",
            Mpi::Mpich => "mpicc.mpich",
        }
    }
}

/// What a launcher reports of one run.
pub struct Ran {
    /// The job's exit code (`None`: it did not end with one, e.g. it timed out).
    pub code: Option<i32>,
    /// What its ranks printed (rank 0's at least).
    pub output: String,
}

/// Starts `ranks` ranks of `argv` (the program and its arguments) and waits for them.
pub trait Launcher {
    /// How the table names it, e.g. "pmix-node, 2 nodes".
    fn name(&self) -> String;
    fn run(&self, argv: &[String], ranks: u32) -> Ran;
}

/// The MPI's own launcher on this host, the reference `cosched submit` is compared with:
/// `mpiexec.mpich -n N` (Hydra) or `mpirun.openmpi -n N` (ORTE), run under `timeout` so that a
/// program that hangs fails its entry at [`RUN_LIMIT`] instead of holding the test.
pub struct Own {
    pub mpi: Mpi,
}

impl Own {
    /// The launcher's command line up to the program, or `Err` with a NOTICE's text when it is
    /// not installed.
    fn command(&self, ranks: u32) -> Result<Vec<String>, String> {
        let (exe, package) = match self.mpi {
            Mpi::Mpich => ("mpiexec.mpich", "mpich"),
            Mpi::OpenMpi => ("mpirun.openmpi", "openmpi-bin"),
        };
        if Command::new(exe).arg("--version").output().is_err() {
            return Err(format!(
                "`{exe}` not found (install Debian's {package}, as .ci/run does)"
            ));
        }
        let mut argv = vec![exe.to_owned(), "-n".into(), ranks.to_string()];
        if self.mpi == Mpi::OpenMpi {
            // Four ranks on a 2-core host, and tests run as root in CI's containers.
            argv.extend(["--oversubscribe".into(), "--allow-run-as-root".into()]);
        }
        Ok(argv)
    }

    /// `Err` with a NOTICE's text when the launcher is not installed.
    pub fn available(&self) -> Result<(), String> {
        self.command(1).map(|_| ())
    }
}

impl Launcher for Own {
    fn name(&self) -> String {
        match self.mpi {
            Mpi::Mpich => "mpiexec.mpich, 1 host".into(),
            Mpi::OpenMpi => "mpirun.openmpi --oversubscribe, 1 host".into(),
        }
    }

    fn run(&self, argv: &[String], ranks: u32) -> Ran {
        let launcher = self.command(ranks).expect("the launcher was checked");
        let out = Command::new("timeout")
            .args(["--kill-after=10s", &format!("{}s", RUN_LIMIT.as_secs())])
            .args(&launcher)
            .args(argv)
            .output()
            .unwrap_or_else(|e| panic!("timeout {} runs: {e}", launcher[0]));
        Ran {
            code: out.status.code(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

/// The set built for one MPI, in a scratch copy of the folder (mpi4py programs import
/// `conformance.py` from beside them, and nothing is written into the repository).
pub struct Built {
    pub mpi: Mpi,
    dir: tempfile::TempDir,
}

impl Built {
    /// Copies the folder and compiles every C program with the MPI's `mpicc`; `Err` with a
    /// NOTICE's text when that compiler (or, for Open MPI, python3's mpi4py) is missing.
    pub fn new(mpi: Mpi) -> Result<Built, String> {
        let cc = mpi.compiler();
        if Command::new(cc).arg("-show").output().is_err()
            && Command::new(cc).arg("-showme").output().is_err()
        {
            return Err(format!(
                "`{cc}` not found (install Debian's {}, as .ci/run does)",
                match mpi {
                    Mpi::OpenMpi => "openmpi-bin and libopenmpi-dev",
                    Mpi::Mpich => "mpich and libmpich-dev",
                }
            ));
        }
        if mpi == Mpi::OpenMpi && !has_mpi4py() {
            return Err(
                "/usr/bin/python3 cannot import mpi4py (install Debian's python3-mpi4py, as .ci/run does)"
                    .into(),
            );
        }
        let dir = tempfile::tempdir().expect("a scratch directory");
        for entry in std::fs::read_dir(DIR).expect("tests/mpi-conformance is readable") {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
        for name in PROGRAMS.iter().filter(|n| !n.starts_with("py_")) {
            let out = Command::new(cc)
                .current_dir(dir.path())
                .args(["-O2", "-pthread", "-o", name, &format!("{name}.c")])
                .output()
                .unwrap_or_else(|e| panic!("{cc} runs: {e}"));
            assert!(
                out.status.success(),
                "{cc} {name}.c failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(Built { mpi, dir })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The programs this MPI runs.
    fn programs(&self) -> impl Iterator<Item = &'static str> + '_ {
        PROGRAMS
            .iter()
            .copied()
            .filter(move |n| self.mpi == Mpi::OpenMpi || !n.starts_with("py_"))
    }

    /// The command line of `name` for a job of `ranks` ranks.
    fn argv(&self, name: &str, ranks: u32) -> Vec<String> {
        let path = |f: String| -> String { self.dir().join(f).to_str().unwrap().to_owned() };
        let mut argv = if name.starts_with("py_") {
            vec!["/usr/bin/python3".into(), path(format!("{name}.py"))]
        } else {
            vec![path(name.to_owned())]
        };
        argv.push(ranks.to_string());
        if name == "nameserv" {
            // A name of this run's own: jobs of other runs may share a name service.
            argv.push(format!("cosched-conformance-{}", std::process::id()));
        }
        argv
    }

    /// Runs the set under `launcher` with `ranks` ranks and checks every verdict: a program in
    /// `known` (name, why) must fail (so that a fix shows, and its entry is removed), every
    /// other must pass. Prints the table of verdicts either way, then panics on a mismatch.
    pub fn check(&self, launcher: &dyn Launcher, ranks: u32, known: &[(&str, &str)]) {
        for (name, _) in known {
            assert!(
                self.programs().any(|p| p == *name),
                "known failure {name:?} is not a program of this set"
            );
        }
        let mut table = Vec::new();
        let mut wrong = Vec::new();
        for name in self.programs() {
            let t = Instant::now();
            let ran = launcher.run(&self.argv(name, ranks), ranks);
            let took = t.elapsed();
            let passed = if name == "abort" {
                ran.code == Some(ABORT_CODE)
            } else {
                ran.code == Some(0) && ran.output.contains(&format!("conformance {name}: pass"))
            };
            let said = ran
                .output
                .lines()
                .find(|l| l.contains("conformance ") && !l.contains(": pass"))
                .unwrap_or("")
                .trim();
            let known_why = known.iter().find(|(n, _)| *n == name).map(|(_, w)| *w);
            let verdict = match (passed, known_why) {
                (true, None) => "pass".to_owned(),
                (false, Some(why)) => format!("fails (known: {why})"),
                (true, Some(_)) => {
                    wrong.push(format!(
                        "{name} passes now: remove it from the known failures"
                    ));
                    "pass (listed as a known failure)".to_owned()
                }
                (false, None) => {
                    wrong.push(format!(
                        "{name} failed: exit code {:?}, {said:?}\n{}",
                        ran.code,
                        tail(&ran.output)
                    ));
                    format!("FAIL (exit code {:?}) {said}", ran.code)
                }
            };
            table.push(format!(
                "| {name} | {verdict} | {:.1} s |",
                took.as_secs_f64()
            ));
        }
        eprintln!(
            "MPI conformance set, {:?}, {} ranks, {}:\n{}",
            self.mpi,
            ranks,
            launcher.name(),
            table.join("\n")
        );
        assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
    }
}

fn has_mpi4py() -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", "import mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The last lines of a run's output, for a failure's message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A launcher's own bound on one run, generous for a loaded 2-core machine: a program that
/// hangs fails its entry instead of the whole test.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// A scratch path for launchers that need one (sockets, shared-memory directories).
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("a scratch directory");
    let p = d.path().to_path_buf();
    (d, p)
}
