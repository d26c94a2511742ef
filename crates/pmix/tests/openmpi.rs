//! Real Open MPI and mpi4py programs started by `pmix-node` (the crate's small stand-in for
//! the node manager) through the PMIx server: one server for a whole job, two servers (two
//! "nodes", two processes, since OpenPMIx serves one per process) exchanging fences and
//! direct modex over a Unix socket, `MPI_Abort`, the name service across two jobs, and a
//! refused `MPI_Comm_spawn`.
//!
//! Without OpenPMIx (a build with the stand-in), `mpicc.openmpi` (Debian's openmpi-bin and
//! libopenmpi-dev) or, for the mpi4py test, Debian's python3-mpi4py, a test prints a NOTICE
//! and returns.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cosched_workload::notice;

/// The machine has 2 cores: one MPI job at a time, or busy-polling ranks of two tests starve
/// each other into time-outs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const HARNESS: &str = env!("CARGO_BIN_EXE_pmix-node");

/// The test program (tests/mpi/pmix_check.c) built with `mpicc.openmpi`, once per run; `None`
/// (after a NOTICE) when this build has no OpenPMIx or the machine no Open MPI.
fn program() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !cosched_pmix::AVAILABLE {
                notice!(
                    "NOTICE: skipping the Open MPI test: this cosched-pmix was built without OpenPMIx (install libpmix-dev and pkg-config, as .ci/run does)"
                );
                return None;
            }
            if Command::new("mpicc.openmpi").arg("-showme").output().is_err() {
                notice!(
                    "NOTICE: skipping the Open MPI test: `mpicc.openmpi` not found (install Debian's openmpi-bin and libopenmpi-dev, as .ci/run does)"
                );
                return None;
            }
            let dir = tempfile::tempdir().expect("a scratch directory");
            let src = dir.path().join("pmix_check.c");
            std::fs::write(&src, include_str!("mpi/pmix_check.c")).expect("write the program");
            let exe = dir.path().join("pmix_check");
            let out = Command::new("mpicc.openmpi")
                .args(["-O2", "-o"])
                .arg(&exe)
                .arg(&src)
                .output()
                .expect("mpicc.openmpi runs");
            assert!(
                out.status.success(),
                "mpicc.openmpi failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some((dir, exe))
        })
        .as_ref()
        .map(|(_, exe)| exe.as_path())
}

/// What a `pmix-node` run printed and how it ended.
struct Run {
    code: Option<i32>,
    text: String,
    took: Duration,
}

impl Run {
    /// How often `needle` was printed (ranks' lines may interleave: not counted by line).
    fn printed(&self, needle: &str) -> usize {
        self.text.matches(needle).count()
    }

    /// The word printed right after `prefix`.
    fn word_after(&self, prefix: &str) -> &str {
        let at = self
            .text
            .find(prefix)
            .unwrap_or_else(|| panic!("{prefix:?} was not printed:\n{}", self.text));
        let rest = &self.text[at + prefix.len()..];
        rest.split_whitespace().next().unwrap_or("")
    }

    /// The count `pmix-node` printed last for `what` (fences, direct-modex, ...).
    fn count(&self, what: &str) -> u32 {
        let summary = self
            .text
            .lines()
            .rfind(|l| l.starts_with("pmix-node: fences "))
            .unwrap_or_else(|| panic!("no summary line in:\n{}", self.text));
        let words: Vec<&str> = summary.split_whitespace().collect();
        let at = words
            .iter()
            .position(|w| *w == what)
            .unwrap_or_else(|| panic!("no {what} in {summary}"));
        words[at + 1].parse().expect("a count")
    }
}

/// Starts `pmix-node` with `args` and the extra environment `env`; does not wait.
fn start(args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    Command::new(HARNESS)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pmix-node starts")
}

fn finish(child: std::process::Child, started: Instant) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("pmix-node ends");
    Run {
        code: status.code(),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
        took: started.elapsed(),
    }
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Run {
    let t = Instant::now();
    finish(start(args, env), t)
}

/// Runs one job of `ranks` ranks on one `pmix-node`: `argv` is the program and its arguments.
fn run_one_node(nspace: &str, ranks: u32, argv: &[&str]) -> Run {
    let spec = format!("n0:{ranks}");
    let mut args = vec![
        "--node",
        "n0",
        "--timeout",
        "90",
        "--job",
        nspace,
        &spec,
        "--",
    ];
    args.extend(argv);
    run(&args, &[])
}

/// Runs an 8-rank job as 4 + 4 ranks on two `pmix-node`s joined by a Unix socket.
fn run_on_two_nodes(prog: &Path, env: &[(&str, &str)]) -> (Run, Run) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let sock = dir.path().join("peer.sock");
    let (sock, prog) = (sock.to_str().unwrap(), prog.to_str().unwrap());
    // Both "nodes" are this machine: each keeps Open MPI's shared-memory segments in its own
    // directory, where on two hosts the host names would keep them apart.
    let shm: Vec<PathBuf> = ["n0", "n1"]
        .iter()
        .map(|n| {
            let d = dir.path().join(n);
            std::fs::create_dir(&d).unwrap();
            d
        })
        .collect();
    let node = |name: &str, role: &str, shm: &Path| {
        let mut e: Vec<(&str, &str)> = env.to_vec();
        e.push((
            "OMPI_MCA_btl_vader_backing_directory",
            shm.to_str().unwrap(),
        ));
        start(
            &[
                "--node",
                name,
                role,
                sock,
                "--timeout",
                "90",
                "--job",
                "job8",
                "n0:4,n1:4",
                "--",
                prog,
                "ring",
                "8",
            ],
            &e,
        )
    };
    let t = Instant::now();
    let a = node("n0", "--listen", &shm[0]);
    let b = node("n1", "--connect", &shm[1]);
    (finish(a, t), finish(b, t))
}

#[test]
fn open_mpi_ranks_on_one_server_form_one_world() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_one_node("job4", 4, &[prog.to_str().unwrap(), "ring", "4"]);
    assert_eq!(r.code, Some(0), "{}", r.text);
    assert_eq!(r.printed(" of 4: ring from "), 4, "{}", r.text);
    assert_eq!(r.printed("WRONG"), 0, "{}", r.text);
    assert_eq!(r.count("connected"), 4, "{}", r.text);
    assert_eq!(r.count("finalized"), 4, "{}", r.text);
}

#[test]
fn open_mpi_job_across_two_servers_exchanges_its_fences() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = run_on_two_nodes(prog, &[]);
    for r in [&a, &b] {
        assert_eq!(r.code, Some(0), "{}\n---\n{}", a.text, b.text);
        assert_eq!(r.printed(" of 8: ring from "), 4, "{}", r.text);
        assert_eq!(r.printed("WRONG"), 0, "{}", r.text);
        // MPI_Init's modex and MPI_Finalize's barrier went through the pair at least.
        assert!(r.count("fences") >= 2, "{}", r.text);
    }
}

#[test]
fn open_mpi_job_across_two_servers_gets_remote_data_by_direct_modex() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Open MPI's asynchronous modex: no data in the fence, each peer's address fetched when
    // first needed.
    let env = [
        ("OMPI_MCA_pmix_base_async_modex", "1"),
        ("OMPI_MCA_pmix_base_collect_data", "0"),
    ];
    let (a, b) = run_on_two_nodes(prog, &env);
    for r in [&a, &b] {
        assert_eq!(r.code, Some(0), "{}\n---\n{}", a.text, b.text);
        assert_eq!(r.printed(" of 8: ring from "), 4, "{}", r.text);
        assert!(r.count("direct-modex") > 0, "{}", r.text);
        // Each node answered the other's requests from its own ranks' data.
        assert!(r.count("local-modex") > 0, "{}", r.text);
    }
}

#[test]
fn mpi4py_collectives_see_the_whole_job() {
    if program().is_none() {
        return;
    }
    let has_mpi4py = Command::new("/usr/bin/python3")
        .args(["-c", "import mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_mpi4py {
        notice!(
            "NOTICE: skipping the mpi4py test: /usr/bin/python3 cannot import mpi4py (install Debian's python3-mpi4py, as .ci/run does)"
        );
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("collectives.py");
    std::fs::write(&script, include_str!("mpi/collectives.py")).unwrap();
    let r = run_one_node(
        "py4",
        4,
        &["/usr/bin/python3", script.to_str().unwrap(), "4"],
    );
    assert_eq!(r.code, Some(0), "{}", r.text);
    assert_eq!(r.printed(" of 4: allreduce 6, bcast "), 4, "{}", r.text);
    assert_eq!(r.printed("WRONG"), 0, "{}", r.text);
}

/// Processes still running this program, by their command line.
fn survivors(prog: &Path) -> Vec<String> {
    let needle = prog.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains(needle) && cmd.contains(" abort ")).then_some(cmd)
        })
        .collect()
}

#[test]
fn mpi_abort_is_reported_within_a_second_and_no_rank_is_left() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_one_node("aborts", 4, &[prog.to_str().unwrap(), "abort", "4"]);
    // The harness exits with the abort's status, as the job would.
    assert_eq!(r.code, Some(7), "{}", r.text);
    let stamp = |prefix: &str| -> i64 {
        let word = r.word_after(prefix);
        let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no time after {prefix:?} in:\n{}", r.text))
    };
    let called = stamp("rank 1: abort at ");
    let reported = stamp("pmix-node: abort aborts:1 status 7 at ");
    let latency = reported - called;
    assert!(
        (0..1_000_000).contains(&latency),
        "the abort reached the harness {latency} µs after the rank called it:\n{}",
        r.text
    );
    assert!(
        survivors(prog).is_empty(),
        "left running: {:?}",
        survivors(prog)
    );
}

#[test]
fn a_name_published_by_one_job_is_found_by_another() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("service");
    let (p, n) = (prog.to_str().unwrap(), name.to_str().unwrap());
    let r = run(
        &[
            "--node",
            "n0",
            "--timeout",
            "90",
            "--job",
            "server",
            "n0:2",
            "--",
            p,
            "publish",
            "2",
            n,
            "--job",
            "client",
            "n0:2",
            "--",
            p,
            "lookup",
            "2",
            n,
        ],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.text);
    let published = r.word_after("rank 0: published ");
    let found = r.word_after(&format!("rank 0: looked up {n}: "));
    assert_eq!(found, published, "{}", r.text);
}

#[test]
fn spawn_is_refused_with_a_clear_error_without_a_hang() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_one_node("spawner", 2, &[prog.to_str().unwrap(), "spawn", "2"]);
    assert_eq!(r.code, Some(0), "{}", r.text);
    // The rank's call failed (Open MPI's words) and the job's output says why (ours).
    assert_eq!(r.printed("MPI_Comm_spawn failed: "), 1, "{}", r.text);
    assert!(
        r.text.contains(
            "refused Spawn from spawner:0: MPI_Comm_spawn / PMIx_Spawn is not supported by cosched"
        ),
        "{}",
        r.text
    );
    assert!(r.took < Duration::from_secs(80), "took {:?}", r.took);
}

#[test]
fn a_node_that_vanishes_ends_the_job_on_the_other_instead_of_a_hang() {
    let Some(prog) = program() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("peer.sock");
    let sock = sock.to_str().unwrap();
    let t = Instant::now();
    let a = start(
        &[
            "--node",
            "n0",
            "--listen",
            sock,
            "--timeout",
            "120",
            "--job",
            "lost",
            "n0:4,n1:4",
            "--",
            prog.to_str().unwrap(),
            "ring",
            "8",
        ],
        &[],
    );
    // The other node joins, then cannot start its ranks and goes.
    let b = run(
        &[
            "--node",
            "n1",
            "--connect",
            sock,
            "--job",
            "lost",
            "n0:4,n1:4",
            "--",
            "/nonexistent/program",
        ],
        &[],
    );
    assert_eq!(b.code, Some(2), "{}", b.text);
    let a = finish(a, t);
    assert_eq!(a.code, Some(1), "{}", a.text);
    assert!(a.text.contains("the other node is gone"), "{}", a.text);
    assert!(
        a.took < Duration::from_secs(60),
        "took {:?}:\n{}",
        a.took,
        a.text
    );
}
