//! The job environment as batch users expect it, end to end on a loopback
//! cluster: `--export` (default ALL, NONE, a list), the node list and tasks per node, the
//! working directory, `--output` patterns, and an oversized environment refused with the
//! limit named.

mod support;
use support::cluster::Cluster;

use std::os::unix::process::CommandExt;
use std::path::Path;

/// A 2 × 2 cluster whose commands run in a working directory of their own.
fn up(name: &str) -> Cluster {
    Cluster::up_with_work("test", name, &["--nodes", "2", "--pes", "2"])
}

/// Submits, waits for success, returns the job id.
fn job(c: &Cluster, args: &[&str], env: &[(&str, &str)]) -> String {
    let id = c
        .ok_env(&[&["submit"], args].concat(), env)
        .trim()
        .to_string();
    c.ok(&["wait", &id]);
    id
}

fn rank_output(c: &Cluster, id: &str, rank: u32) -> String {
    c.ok(&["output", id, "--rank", &rank.to_string()])
}

const SHOW: &str = "echo \"[$COSCHED_ENV_A][$COSCHED_ENV_B][$COSCHED_RANK][$COSCHED_JOB_NODELIST][$COSCHED_TASKS_PER_NODE][$COSCHED_NODE][$(pwd -P)]\"";

/// The fields [`SHOW`] printed.
fn fields(line: &str) -> Vec<String> {
    line.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split("][")
        .map(str::to_string)
        .collect()
}

#[test]
fn export_node_list_tasks_per_node_working_directory_and_output_patterns() {
    let c = up("jobenv");
    let env = [("COSCHED_ENV_A", "from-submitter"), ("COSCHED_ENV_B", "b")];
    let work = c.work().display().to_string();

    // Default (ALL): the submitter's variables reach every rank; 3 ranks on 2 nodes × 2 PEs
    // are 2 on the first node and 1 on the second.
    let id = job(&c, &["-n", "3", "--", "sh", "-c", SHOW], &env);
    let mut nodes = Vec::new();
    for rank in 0..3 {
        let f = fields(&rank_output(&c, &id, rank));
        assert_eq!(f[0], "from-submitter", "rank {rank}: {f:?}");
        assert_eq!(f[1], "b");
        assert_eq!(f[2], rank.to_string());
        assert_eq!(f[4], "2,1", "tasks per node");
        assert_eq!(f[6], work, "the working directory is the submitter's");
        nodes.push((f[3].clone(), f[5].clone()));
    }
    let list = format!("{},{}", nodes[0].1, nodes[2].1);
    assert_ne!(nodes[0].1, nodes[2].1, "rank 2 is on the second node");
    assert_eq!(nodes[1].1, nodes[0].1);
    assert!(nodes.iter().all(|(l, _)| *l == list), "{nodes:?}");

    // NONE: the submitter's variables are gone, cosched's are there.
    let id = job(
        &c,
        &["-n", "2", "--export", "NONE", "--", "sh", "-c", SHOW],
        &env,
    );
    for rank in 0..2 {
        let f = fields(&rank_output(&c, &id, rank));
        assert_eq!((f[0].as_str(), f[1].as_str()), ("", ""), "{f:?}");
        assert_eq!(f[2], rank.to_string());
        // 2 ranks fit on one node: the list is that node, with both tasks.
        assert_eq!(
            (f[3].as_str(), f[4].as_str()),
            (f[5].as_str(), "2"),
            "{f:?}"
        );
    }

    // A list: a value given, a variable taken from the environment, the rest left out.
    let id = job(
        &c,
        &[
            "-n",
            "1",
            "--export",
            "COSCHED_ENV_A=bar,PATH",
            "--",
            "sh",
            "-c",
            SHOW,
        ],
        &env,
    );
    let f = fields(&rank_output(&c, &id, 0));
    assert_eq!((f[0].as_str(), f[1].as_str()), ("bar", ""), "{f:?}");

    // --output: one file per rank in the working directory, standard error with it.
    let id = job(
        &c,
        &[
            "-n",
            "3",
            "--output",
            "out-%j-%t.txt",
            "--",
            "sh",
            "-c",
            "echo out $COSCHED_RANK; echo err $COSCHED_RANK >&2",
        ],
        &[],
    );
    for rank in 0..3 {
        let file = c.work().join(format!("out-{id}-{rank}.txt"));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(text, format!("out {rank}\nerr {rank}\n"));
        // `cosched output` still shows it, and says where it is.
        let out = c.run(&["output", &id, "--rank", &rank.to_string()]);
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), text);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&file.display().to_string()),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // A bad --export is refused before anything is sent.
    let out = c.run(&["submit", "-n", "1", "--export", "A-B", "--", "true"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a variable name"));
}

#[test]
fn an_environment_larger_than_a_request_may_be_is_refused_naming_the_limit() {
    let c = up("jobenv-big");
    // 2.5 MiB of environment: exec allows that only with a larger stack limit (a quarter of
    // it), so the submitting process gets one.
    let chunk = "x".repeat(100 << 10);
    let names: Vec<String> = (0..25).map(|i| format!("COSCHED_BIG_{i}")).collect();
    let env: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), chunk.as_str())).collect();
    let mut cmd = c.command(&["submit", "-n", "1", "--", "true"], &env);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64 << 20,
                rlim_max: libc::RLIM_INFINITY,
            };
            let mut old: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_STACK, &mut old);
            let lim = libc::rlimit {
                rlim_max: old.rlim_max,
                rlim_cur: lim.rlim_cur.min(old.rlim_max),
            };
            libc::setrlimit(libc::RLIMIT_STACK, &lim);
            Ok(())
        });
    }
    let out = cmd.output().expect("cosched runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("2 MiB") && err.contains("--export"), "{err}");
    assert!(Path::new(&c.dir).exists());
}
