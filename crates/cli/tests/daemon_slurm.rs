//! Slurm-style use end to end on loopback clusters: batch scripts with #SBATCH
//! lines, arrays with a throttle, dependencies, `cosched run`, hold and release, `acct`'s
//! filters, and a client with the wrong key told why.

mod support;
use support::cluster::Cluster;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A 2 × 2 cluster whose commands run in a working directory of their own.
fn up(name: &str) -> Cluster {
    Cluster::up_with_work("slurm", name, &["--nodes", "2", "--pes", "2"])
}

/// Waits for the jobs to end (whatever their outcome); returns their JSON records.
fn wait(c: &Cluster, ids: &[u64]) -> Vec<serde_json::Value> {
    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let mut args = vec!["wait", "--json", "--timeout", "60s"];
    args.extend(ids.iter().map(String::as_str));
    let out = c.run(&args);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "wait {ids:?} printed no JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["jobs"].as_array().unwrap().clone()
}

/// Job `id` as `queue --all --json` lists it (with why it waits).
fn queued(c: &Cluster, id: u64) -> serde_json::Value {
    let out = c.ok(&["queue", "--all", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("job {id} not listed: {out}"))
        .clone()
}

/// Writes `text` to `name` in the jobs' working directory.
fn write(c: &Cluster, name: &str, text: &str) -> PathBuf {
    let p = c.work().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_batch_script_runs_with_its_sbatch_lines() {
    let c = up("script");
    // No execute bit: the #! line's interpreter runs it, as sbatch does.
    write(
        &c,
        "job.sh",
        "#!/bin/sh\n# a comment before the directives\n#SBATCH -n 3\n#SBATCH --time=5:00 # five minutes\n\
         #SBATCH -J hello -o out-%j-%t.txt\n#COSCHED --export=NONE\n\n\
         echo \"rank $SLURM_PROCID of $SLURM_NTASKS job $SLURM_JOB_ID name $SLURM_JOB_NAME arg $1\"\n\
         #SBATCH -n 4\n",
    );
    let id = c.submit(&["job.sh", "first"]);
    let j = &wait(&c, &[id])[0];
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(
        j["procs"], 3,
        "the directive after the first command is not read"
    );
    assert_eq!(j["name"], "hello");
    assert_eq!(j["time_limit_s"], 300.0);
    for rank in 0..3 {
        let text = read(&c.work().join(format!("out-{id}-{rank}.txt")));
        assert_eq!(
            text.trim(),
            format!("rank {rank} of 3 job {id} name hello arg first")
        );
    }

    // The command line wins over the directives; a limit in Slurm's MM:SS form is enforced.
    write(
        &c,
        "short.sh",
        "#!/bin/sh\n#SBATCH -n 3 --time=0:01\nsleep 30\n",
    );
    let id = c.submit(&["-n", "1", "short.sh"]);
    let j = &wait(&c, &[id])[0];
    assert_eq!(
        (j["procs"].as_u64(), j["state"].as_str()),
        (Some(1), Some("timed_out")),
        "{j}"
    );

    // An option no Slurm has is an error naming it, with file and line; nothing is
    // submitted.
    write(
        &c,
        "bad.sh",
        "#!/bin/sh\n#SBATCH -n 1\n#SBATCH --bogus=4G\ntrue\n",
    );
    let out = c.run(&["submit", "bad.sh"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.sh:3: unrecognized option '--bogus'"),
        "{err}"
    );
    // One Slurm has but cosched does not enforce yet is a warning, and the job runs.
    write(
        &c,
        "input.sh",
        "#!/bin/sh\n#SBATCH -n 1\n#SBATCH --input=in.txt\ntrue\n",
    );
    let out = c.run(&["submit", "input.sh"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: --input is not fully supported yet"),
        "{err}"
    );
}

#[test]
fn an_array_with_a_throttle_never_runs_more_than_that_at_once() {
    let c = up("array");
    let script = "date +%s.%N > start-$SLURM_ARRAY_TASK_ID; sleep 0.3; date +%s.%N > end-$COSCHED_ARRAY_TASK_ID";
    let first = c.submit(&[
        "--array=1-10%2",
        "-o",
        "arr-%A_%a.out",
        "--",
        "/bin/sh",
        "-c",
        script,
    ]);
    let ids: Vec<u64> = (first..first + 10).collect();
    let jobs = wait(&c, &ids);
    assert!(jobs.iter().all(|j| j["state"] == "completed"), "{jobs:?}");
    assert!(jobs.iter().all(|j| j["array_job"] == first));
    let t = |name: String| -> f64 { read(&c.work().join(name)).trim().parse().unwrap() };
    let spans: Vec<(f64, f64)> = (1..=10)
        .map(|i| (t(format!("start-{i}")), t(format!("end-{i}"))))
        .collect();
    // The most tasks running at any start (4 PEs are free: only the throttle limits).
    let most = spans
        .iter()
        .map(|&(s, _)| spans.iter().filter(|&&(a, b)| a <= s && s < b).count())
        .max()
        .unwrap();
    assert!(most <= 2, "{most} tasks ran at once with %2: {spans:?}");
    for i in 1..=10 {
        assert!(
            c.work().join(format!("arr-{first}_{i}.out")).exists(),
            "%A_%a of task {i}"
        );
    }
}

#[test]
fn dependencies_wait_for_and_follow_the_exit_code() {
    let c = up("deps");
    // Long enough for the checks below on a loaded machine.
    let a = c.submit(&["--", "/bin/sh", "-c", "sleep 3"]);
    let ok = c.submit(&["--dependency", &format!("afterok:{a}"), "--", "/bin/true"]);
    let notok = c.submit(&["-d", &format!("afternotok:{a}"), "--", "/bin/true"]);
    let j = queued(&c, ok);
    assert_eq!(j["state"], "queued");
    assert_eq!(j["reason"], format!("Dependency (afterok:{a})"));
    let f = c.submit(&["--", "/bin/sh", "-c", "exit 3"]);
    let after_f = c.submit(&["-d", &format!("afterok:{f}"), "--", "/bin/true"]);
    let notok_f = c.submit(&[
        "-d",
        &format!("afternotok:{f},afterany:{a}"),
        "--",
        "/bin/true",
    ]);
    let jobs = wait(&c, &[a, ok, notok, f, after_f, notok_f]);
    let state = |i: usize| jobs[i]["state"].as_str().unwrap();
    assert_eq!(
        (0..6).map(state).collect::<Vec<_>>(),
        [
            "completed",
            "completed",
            "cancelled",
            "failed",
            "cancelled",
            "completed"
        ]
    );
    assert!(
        jobs[1]["start"].as_f64().unwrap() >= jobs[0]["end"].as_f64().unwrap(),
        "afterok started before its dependency ended: {jobs:?}"
    );
    for i in [2, 4] {
        assert!(
            jobs[i]["error"]
                .as_str()
                .unwrap()
                .contains("dependency never satisfied"),
            "{}",
            jobs[i]
        );
        assert!(jobs[i]["start"].is_null());
    }
    // A begin time: held back with its reason, then run once it has passed.
    let begin = c.submit(&["--begin", "now+3", "--", "/bin/true"]);
    let j = queued(&c, begin);
    assert!(
        j["reason"].as_str().unwrap().starts_with("BeginTime"),
        "{j}"
    );
    let j = &wait(&c, &[begin])[0];
    assert_eq!(j["state"], "completed");
    assert!(
        j["start"].as_f64().unwrap() - j["submit"].as_f64().unwrap() >= 1.5,
        "{j}"
    );

    // An unknown job cannot be depended on.
    let out = c.run(&["submit", "-d", "afterok:999", "--", "/bin/true"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no job 999"));
}

#[test]
fn run_streams_output_returns_the_exit_code_and_ctrl_c_cancels() {
    let c = up("run");
    let out = c.run(&[
        "run",
        "-n",
        "2",
        "--label",
        "--",
        "/bin/sh",
        "-c",
        "echo one-$COSCHED_RANK; echo two-$COSCHED_RANK",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for line in ["0: one-0", "0: two-0", "1: one-1", "1: two-1"] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing from {text:?}"
        );
    }
    let out = c.run(&[
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("err\n"));

    // Output streams while the job runs; Ctrl-C cancels the job and run exits 130.
    let mut child = c
        .command(
            &["run", "--", "/bin/sh", "-c", "echo started; sleep 60"],
            &[],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("no output streamed from the running job in 30 s")
        });
    assert_eq!(line, "started\n");
    let q: serde_json::Value = serde_json::from_str(&c.ok(&["queue", "--json"])).unwrap();
    let id = q["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["state"] == "running")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(queued(&c, id)["state"], "cancelled");
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn hold_release_acct_filters_and_a_wrong_key() {
    let c = up("hold");
    // A job behind one that fills the machine, held: it does not start when PEs free up.
    // Long enough to hold the others before it ends, on a loaded machine too.
    let big = c.submit(&["-n", "4", "--", "/bin/sh", "-c", "sleep 3"]);
    let small = c.submit(&["--", "/bin/true"]);
    let fails = c.submit(&["--", "/bin/sh", "-c", "exit 2"]);
    assert_eq!(
        c.ok(&["hold", &small.to_string(), &fails.to_string()])
            .lines()
            .count(),
        2
    );
    wait(&c, &[big]);
    std::thread::sleep(Duration::from_millis(500));
    for id in [small, fails] {
        let j = queued(&c, id);
        assert_eq!(
            (j["state"].as_str(), j["held"].as_bool()),
            (Some("queued"), Some(true)),
            "{j}"
        );
    }
    c.ok(&["release", &small.to_string(), &fails.to_string()]);
    let jobs = wait(&c, &[small, fails]);
    assert_eq!(
        (jobs[0]["state"].as_str(), jobs[1]["state"].as_str()),
        (Some("completed"), Some("failed"))
    );
    let out = c.run(&["release", "9999"]);
    assert!(!out.status.success());

    // acct: by state, by user, by time, chosen columns, the summary.
    let acct = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&c.ok(&[&["acct", "--json"], args].concat())).unwrap()
    };
    let ids = |v: &serde_json::Value| -> Vec<u64> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ids(&acct(&["--state", "failed"])), [fails]);
    assert_eq!(ids(&acct(&["--state", "CD"])), [big, small]);
    let uid = unsafe { libc::getuid() }.to_string();
    assert_eq!(ids(&acct(&["--user", &uid])), [big, small, fails]);
    assert!(ids(&acct(&["--user", "4242"])).is_empty());
    assert!(
        ids(&acct(&["--since", "now+1h"])).is_empty(),
        "all ended before"
    );
    assert_eq!(
        ids(&acct(&["--until", "now-1h"])).len(),
        0,
        "none submitted an hour ago"
    );
    let all = acct(&[]);
    assert_eq!(all["summary"]["jobs"], 3);
    assert!(all["summary"]["utilization"].as_f64().unwrap() > 0.0);
    let table = c.ok(&["acct", "--format", "id,pes,exit", "--state", "failed"]);
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["ID", "PES", "EXIT"]
    );
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        [fails.to_string().as_str(), "1", "2"]
    );
    assert!(table.contains("mean bounded sld"), "{table}");
    let out = c.run(&["acct", "--format", "id,bogus"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown column \"bogus\""));

    // The daemons' logs: a UTC timestamp and a level on every line.
    let log = read(&c.dir.join("logs/mm.log"));
    let first = log.lines().next().unwrap_or("");
    let (stamp, rest) = first.split_once(' ').unwrap_or(("", ""));
    assert!(
        stamp.len() >= 20
            && stamp.as_bytes()[4] == b'-'
            && stamp.contains('T')
            && stamp.ends_with('Z'),
        "{first:?}"
    );
    assert!(rest.trim_start().starts_with("INFO mm: "), "{first:?}");

    // A client with another key is told that the key is wrong, and which file it used.
    let other = c.dir.join("other.key");
    std::fs::write(&other, format!("{}\n", "ab".repeat(32))).unwrap();
    let out = c.run(&["queue", "--key-file", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "authentication failed: the key in {} does not match the cluster's",
            other.display()
        )),
        "{err}"
    );
}
