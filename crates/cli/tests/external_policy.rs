//! External policies (`--policy external:CMD`): the Python FCFS and EASY of
//! `python/examples` give the very schedules of the built-in policies on KTH-SP2, and a
//! Python policy that breaks a promise, dies or answers nonsense stops the run with an error
//! that names the command and the decision or line.
//!
//! Needs `python3` on the PATH and the shared KTH-SP2 trace; without them the tests say so
//! with a NOTICE and check nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

const KTH: &str = "KTH-SP2-1996-2.1-cln.swf.gz";

/// Jobs of KTH-SP2 compared (the whole trace takes seconds more per policy).
const FIRST: &str = "5000";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python(unchecked: &str) -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("NOTICE: python3 is not on the PATH; {unchecked} not checked");
    }
    ok
}

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .expect("cosched runs")
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("cosched-ext-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn python_fcfs_and_easy_schedule_kth_like_the_built_in_ones() {
    let what = "the Python FCFS and EASY schedules";
    if !python(what) {
        return;
    }
    let Some(trace) = cosched_workload::shared::trace(KTH, what) else {
        return;
    };
    let trace = trace.to_str().unwrap();
    let scratch = Scratch::new("same");
    for policy in ["fcfs", "easy"] {
        let script = repo().join(format!("python/examples/{policy}.py"));
        let external = format!("external:python3 {}", script.display());
        let mut csv = Vec::new();
        for (tag, p) in [("built-in", policy), ("python", external.as_str())] {
            let file = scratch.0.join(format!("{policy}-{tag}.csv"));
            let out = cosched(
                &[
                    "sim",
                    "--trace",
                    trace,
                    "--first",
                    FIRST,
                    "--policy",
                    p,
                    "--jobs-out",
                ]
                .into_iter()
                .chain([file.to_str().unwrap()])
                .collect::<Vec<_>>(),
            );
            assert!(
                out.status.success(),
                "{p}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The provenance lines name the command, which differs: the schedules are compared.
            let text = std::fs::read_to_string(&file).unwrap();
            csv.push(
                text.lines()
                    .filter(|l| !l.starts_with('#'))
                    .map(|l| format!("{l}\n"))
                    .collect::<String>(),
            );
        }
        assert!(csv[0].lines().count() > 4000, "{policy}: too few jobs");
        if csv[0] != csv[1] {
            let first = csv[0]
                .lines()
                .zip(csv[1].lines())
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("built-in {a}\n  python {b}"))
                .unwrap_or_else(|| "one schedule is longer".into());
            panic!("{policy}: the Python schedule differs; first difference:\n  {first}");
        }
    }
}

/// Writes a Python policy built on `python/cosched_policy.py` and returns its `--policy`.
fn policy_file(scratch: &Scratch, name: &str, body: &str) -> String {
    let file = scratch.0.join(format!("{name}.py"));
    let text = format!(
        "import sys\nsys.path.insert(0, {:?})\nimport cosched_policy as cp\n\n{body}\n",
        repo().join("python").to_str().unwrap()
    );
    std::fs::write(&file, text).unwrap();
    format!("external:python3 {}", file.display())
}

/// A Python policy that starts every job at once on PEs from 0: the second overlaps the first.
const BUSY: &str = "class Busy(cp.Policy):\n    def on_hello(self, hello):\n        self.new = []\n\
     \x20   def on_submit(self, now, job):\n        self.new.append(job)\n\
     \x20   def decide(self, now):\n        for j in self.new:\n\
     \x20           self.start(j.id, [[0, j.procs]])\n        self.new = []\n\n\
     cp.run(Busy())";

/// A small model workload: no trace needed.
fn run_model(policy: &str) -> (bool, String) {
    let out = cosched(&[
        "sim", "--model", "lublin", "--jobs", "60", "--procs", "16", "--seed", "1", "--policy",
        policy,
    ]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_python_policy_that_starts_jobs_on_busy_pes_is_refused_with_the_decision() {
    let what = "the error of a Python policy that breaks a promise";
    if !python(what) {
        return;
    }
    let scratch = Scratch::new("busy");
    let policy = policy_file(&scratch, "busy", BUSY);
    let (ok, err) = run_model(&policy);
    assert!(!ok, "the run must fail");
    assert!(
        err.contains(&format!("policy {policy} broke its contract at t="))
            && err.contains("some of which another job runs on")
            && err.contains("the decision came from line ")
            && err.contains(&format!("of the output of {policy}: {{"))
            && err.contains("\"type\":\"start\""),
        "{err}"
    );
}

/// The same broken promise under the machine manager: the decision is refused with a clear
/// line in the MM log (quoting the policy's reply line), and the job it was about ends as
/// failed with the refusal as its error instead of waiting forever; the job started first
/// runs to completion. `acct --gantt-out` then draws the real run.
#[test]
fn the_machine_manager_reports_a_python_policy_that_breaks_a_promise() {
    let what = "the machine manager's handling of a Python policy that breaks a promise";
    if !python(what) {
        return;
    }
    let scratch = Scratch::new("mm-busy");
    let policy = policy_file(&scratch, "busy", BUSY);
    let c = support::cluster::Cluster::up(
        "ext",
        "busy",
        &["--nodes", "1", "--pes", "2", "--policy", &policy],
    );
    let name = "solve \"big\", then small";
    let first = c.submit(&["-n", "2", "--name", name, "--", "sleep", "2"]);
    c.until(30, "the first job running", || {
        (c.state_of(first).as_deref() == Some("running")).then_some(())
    });
    let second = c.submit(&["-n", "2", "--", "true"]);
    c.until(30, "the second job failed", || {
        (c.state_of(second).as_deref() == Some("failed")).then_some(())
    });
    let log = c.mm_log();
    assert!(
        log.contains("mm: decision refused: policy external:")
            && log.contains(&format!("job {second}: "))
            && log.contains("the decision came from line"),
        "{log}"
    );
    let acct: serde_json::Value = serde_json::from_str(&c.ok(&["acct", "--json"])).unwrap();
    let job = |id: u64| {
        acct["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap()
    };
    assert!(
        job(second)["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("the policy broke its contract")),
        "{acct}"
    );
    assert!(
        acct["provenance"]["input_sha256"].as_str().is_some(),
        "{acct}"
    );
    c.until(30, "the first job completed", || {
        (c.state_of(first).as_deref() == Some("completed")).then_some(())
    });
    // The real run as a Gantt chart: the first job, on PEs 0-1, is one rectangle.
    let svg = scratch.0.join("run.svg");
    c.ok(&["acct", "--gantt-out", svg.to_str().unwrap()]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let pieces = text
        .lines()
        .filter(|l| {
            l.contains("<rect") && l.contains("opacity=\"0.8\"") && !l.contains("fill=\"none\"")
        })
        .count();
    assert_eq!(pieces, 1, "{text}");
    assert!(text.contains("(a real run)") && text.contains("<metadata>"));
    // The accounting as CSV: the name with a quote and a comma comes back as it was.
    let csv = scratch.0.join("acct.csv");
    c.ok(&[
        "acct",
        "--format",
        "id,name,state",
        "--csv-out",
        csv.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("# generator: cosched "), "{text}");
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let row = rows.iter().find(|r| r[0] == first.to_string()).unwrap();
    assert_eq!((&row[1], &row[2]), (name, "completed"), "{text}");
}

#[test]
fn a_python_policy_that_dies_or_answers_nonsense_is_reported() {
    let what = "the errors of failing Python policies";
    if !python(what) {
        return;
    }
    let scratch = Scratch::new("fail");
    // Raises at its third decide: the traceback goes to stderr, the run names the command.
    let dies = policy_file(
        &scratch,
        "dies",
        "class Dies(cp.Policy):\n    n = 0\n    def decide(self, now):\n        self.n += 1\n\
         \x20       if self.n == 3:\n            raise RuntimeError('policy bug')\n\n\
         cp.run(Dies())",
    );
    let (ok, err) = run_model(&dies);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "policy {dies}: the command ended (exit status: 1)"
        )) && err.contains("instead of answering the decide at t=")
            && err.contains("after line 3 of its output")
            && err.contains("RuntimeError: policy bug"),
        "{err}"
    );
    // Options reach the child in its hello, which may refuse them.
    let picky = policy_file(
        &scratch,
        "picky",
        "class Picky(cp.Policy):\n    def on_hello(self, hello):\n\
         \x20       if self.options.get('quantum_s') != 30:\n\
         \x20           raise cp.Refuse(f'quantum_s must be 30, not {self.options}')\n\n\
         cp.run(Picky())",
    );
    let (ok, err) = run_model(&picky);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "policy {picky}: refused the hello: quantum_s must be 30"
        )),
        "{err}"
    );
    let out = cosched(&[
        "sim",
        "--model",
        "lublin",
        "--jobs",
        "20",
        "--procs",
        "16",
        "--policy",
        &picky,
        "--opt",
        "quantum_s=30",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unknown = policy_file(
        &scratch,
        "unknown",
        "class Launch(cp.Policy):\n    def decide(self, now):\n\
         \x20       self._out.append({'type': 'launch', 'job': 1})\n\n\
         cp.run(Launch())",
    );
    let (ok, err) = run_model(&unknown);
    assert!(!ok);
    assert!(
        err.contains(&format!("policy {unknown}: line 2 of its output"))
            && err.contains("unknown variant `launch`"),
        "{err}"
    );
}

/// A sweep takes `external:CMD` beside built-in policies (and an option only the child reads):
/// each cell starts its own child, and the Python EASY's rows equal the built-in EASY's.
#[test]
fn a_sweep_runs_the_python_easy_beside_the_built_in_one() {
    let what = "an external policy in a sweep";
    if !python(what) {
        return;
    }
    let scratch = Scratch::new("sweep");
    let script = repo().join("python/examples/easy.py");
    let policies = format!("easy,external:python3 {}", script.display());
    let out = cosched(&[
        "sim",
        "sweep",
        "--model",
        "lublin",
        "--jobs",
        "300",
        "--procs",
        "32",
        "--policies",
        &policies,
        "--loads",
        "0.6,0.9",
        "--seeds",
        "1,2",
        "--opt",
        "unused_by_easy=1",
        "--out",
        scratch.0.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scratch.0.join("sweep.json")).unwrap())
            .unwrap();
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    let figures = |policy: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["policy"] == policy)
            .map(|r| {
                let mut r = r.clone();
                r.as_object_mut().unwrap().remove("policy");
                r.to_string()
            })
            .collect()
    };
    let (builtin, python) = (figures("easy"), figures(&policies[5..]));
    assert_eq!(builtin.len(), 4);
    assert_eq!(builtin, python);
}
