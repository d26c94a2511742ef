//! File broadcast end to end: a file larger than the 16 MiB frame cap reaches 16
//! node managers identical, a slow node throttles the sender without loss, a node killed in
//! the middle fails the transfer with its name and nothing is launched, so does one that
//! cannot create its copy (at once), a file changed while it is sent fails, `submit --bcast`
//! runs the staged copy, and the copies go when the cluster goes down. (COMPARE-AND-WRITE's
//! one combined answer on 64 nodes is tested on the node managers' tree transport itself:
//! crates/storm/tests/combine.rs.)

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cosched_client::bcast::digest_file;
use cosched_proto::StateDir;
use serde_json::Value;
use support::cluster::{Cluster, signal};
use support::*;

/// `cluster up ARGS` with the node managers' scratch directories under the test's own
/// directory (removed with it) and `env` set for the daemons.
fn up(name: &str, args: &[&str], env: &[(&str, &str)]) -> Cluster {
    let dir = scratch("bcast", name);
    start(&dir, args, env);
    Cluster {
        state: StateDir::new(&dir),
        dir,
        work: None,
        extra: Default::default(),
    }
}

/// `cluster up ARGS` in `dir`, with the node managers' scratch directories under it.
fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) {
    let mut cmd = Command::new(bin());
    cmd.args(["cluster", "up"])
        .args(args)
        .env("COSCHED_STATE_DIR", dir)
        .env("COSCHED_SCRATCH", dir.join("scratch"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("cosched runs");
    assert!(
        out.status.success(),
        "cluster up failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A file of `len` bytes that no two offsets of which repeat in a short period.
fn make_file(dir: &Path, name: &str, len: usize) -> PathBuf {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(len);
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

/// A cluster of `nodes` node managers of 1 PE each, which write every chunk 40 ms late, and a
/// file of 32 chunks of 256 KiB in it: over a second of transfer for a test to act in.
fn slowed(name: &str, nodes: usize, file: &str) -> (Cluster, PathBuf) {
    let n = nodes.to_string();
    let c = up(
        name,
        &["--nodes", &n, "--pes", "1"],
        &[("COSCHED_TEST_CHUNK_DELAY_MS", "40")],
    );
    c.until(30, "all nodes up", || (c.nodes_up() == nodes).then_some(()));
    let file = make_file(&c.dir, file, 32 * 256 * 1024);
    (c, file)
}

/// `cosched ARGS FILE` against the cluster, started in the background with its output kept.
fn in_background(c: &Cluster, args: &[&str], file: &Path) -> std::process::Child {
    Command::new(bin())
        .args(args)
        .arg(file)
        .env("COSCHED_STATE_DIR", &c.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Where node `node` stages `dest` for this process's user (its own names: `cosched bcast`).
fn copy_of(c: &Cluster, node: &str, dest: &str) -> PathBuf {
    c.dir
        .join("scratch")
        .join(node)
        .join("bcast")
        .join(support::user::euid().to_string())
        .join(dest)
}

/// The files under `dir`, however deep (a job's copy is in a directory of its transfer).
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => files_under(&e.path()),
                    _ => 1,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn bcast_json(c: &Cluster, args: &[&str]) -> Value {
    let out = c.ok(&[&["bcast", "--json"], args].concat());
    serde_json::from_str(&out).unwrap()
}

#[test]
fn a_20_mb_file_reaches_16_node_managers_identical_and_submit_runs_the_staged_copy() {
    let c = up(
        "big",
        &["--nodes", "16", "--pes", "1", "--fanout", "2"],
        &[],
    );
    c.until(30, "16 nodes up", || (c.nodes_up() == 16).then_some(()));
    let file = make_file(&c.dir, "big.bin", 20_000_000);
    let want = digest_file(&file).unwrap();
    let v = bcast_json(&c, &[file.to_str().unwrap(), "--dest", "big.copy"]);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 16, "{v}");
    assert_eq!(v["bytes"], 20_000_000);
    for i in 0..16 {
        let copy = copy_of(&c, &format!("n{i}"), "big.copy");
        assert_eq!(digest_file(&copy).unwrap(), want, "copy on n{i}");
    }
    eprintln!(
        "20 MB to 16 node managers (fan-out 2) in {:.0} ms",
        v["seconds"].as_f64().unwrap() * 1e3
    );

    // submit --bcast: every rank runs its node's copy staged for the job (argv[0] is its path).
    let script = c.dir.join("whoami.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"$0 $1\"\n").unwrap();
    let id = c.submit(&[
        "-n",
        "16",
        "--bcast",
        script.to_str().unwrap(),
        "--",
        "x",
        "arg",
    ]);
    c.ok(&["wait", "--timeout", "60s", &id.to_string()]);
    for rank in [0, 15] {
        let out = c.ok(&["output", &id.to_string(), "--rank", &rank.to_string()]);
        let scratch = c.dir.join("scratch");
        assert!(
            out.starts_with(scratch.to_str().unwrap())
                && out.contains("/bcast/")
                && out.contains("/@")
                && out.contains("/whoami.sh.")
                && out.trim_end().ends_with(" arg"),
            "rank {rank} ran {out:?}, not a staged copy"
        );
    }

    // The copies hold tmpfs memory: a clean shutdown removes them, and a node manager that
    // starts removes what a crashed run of it left.
    c.ok(&["cluster", "down"]);
    for i in 0..16 {
        let dir = c.dir.join("scratch").join(format!("n{i}"));
        assert!(!dir.exists(), "{} left after cluster down", dir.display());
    }
    let stale = copy_of(&c, "n0", "stale.copy");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(&stale, "left by a crash").unwrap();
    start(
        &c.dir,
        &["--nodes", "16", "--pes", "1", "--fanout", "2"],
        &[],
    );
    c.until(30, "the stale copy removed by n0's start", || {
        (!stale.exists()).then_some(())
    });
}

#[test]
fn a_slow_node_throttles_the_sender_without_loss() {
    const DELAY_MS: u64 = 60;
    let c = up(
        "slow",
        &["--nodes", "4", "--pes", "1"],
        &[("COSCHED_TEST_CHUNK_DELAY_MS", &format!("n2={DELAY_MS}"))],
    );
    c.until(30, "4 nodes up", || (c.nodes_up() == 4).then_some(()));
    // 12 chunks of 256 KiB, 2 in flight: chunk 11 may leave only once n2 wrote chunk 9, so
    // the sender streams for at least 10 of n2's delays.
    let file = make_file(&c.dir, "mid.bin", 12 * 256 * 1024);
    let want = digest_file(&file).unwrap();
    let v = bcast_json(
        &c,
        &[
            file.to_str().unwrap(),
            "--dest",
            "mid",
            "--chunk",
            "256K",
            "--slots",
            "2",
        ],
    );
    let streamed = Duration::from_secs_f64(v["streamed_seconds"].as_f64().unwrap());
    assert!(
        streamed >= Duration::from_millis(10 * DELAY_MS * 9 / 10),
        "the sender was not held back by the slow node: all chunks sent after {streamed:?}"
    );
    for i in 0..4 {
        assert_eq!(
            digest_file(&copy_of(&c, &format!("n{i}"), "mid")).unwrap(),
            want
        );
    }
}

#[test]
fn a_node_killed_mid_transfer_fails_it_by_name_and_nothing_is_launched() {
    let (c, file) = slowed("kill", 4, "prog.bin");
    // Over a second of transfer to kill n3 in.
    let child = in_background(
        &c,
        &["submit", "-n", "4", "--chunk", "256K", "--bcast"],
        &file,
    );
    let victim = c.dir.join("scratch/n3/bcast");
    c.until(20, "n3 has created its copy", || {
        (files_under(&victim) > 0).then_some(())
    });
    // The copy is created at its full size (its space reserved): a few of the 32 chunks in.
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    signal(&c.pid(c.state.nm_pid_file("n3")), "KILL");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the submit must fail: {err}");
    assert!(
        err.contains("n3") && err.contains("nothing was launched"),
        "{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "failed only after {:?}",
        t0.elapsed()
    );
    let v: Value = serde_json::from_str(&c.ok(&["acct", "--json"])).unwrap();
    assert_eq!(
        v["jobs"].as_array().unwrap().len(),
        0,
        "a job was submitted: {v}"
    );
    // The survivors drop their partial copies.
    c.until(10, "partial copies removed", || {
        (0..3)
            .all(|i| files_under(&c.dir.join(format!("scratch/n{i}/bcast"))) == 0)
            .then_some(())
    });
}

/// The client hashes the file as it reads it, and checks after the last chunk that its size
/// and modification time did not move: a file that changes while it is sent fails the
/// transfer, and the nodes drop their copies.
#[test]
fn a_file_changed_while_it_is_sent_fails_the_transfer() {
    let (c, file) = slowed("changed", 2, "data.bin");
    let child = in_background(&c, &["bcast", "--chunk", "256K", "--dest", "data"], &file);
    let copy = copy_of(&c, "n0", "data");
    c.until(20, "n0 has created its copy", || {
        copy.exists().then_some(())
    });
    // The last chunk, not read by the client yet (4 slots of 32 at 40 ms a chunk), changes.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(b"changed", 32 * 256 * 1024 - 7).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the broadcast must fail: {err}");
    assert!(
        err.contains("changed while it was sent") && err.contains("nothing was launched"),
        "{err}"
    );
    c.until(10, "partial copies removed", || {
        (0..2)
            .all(|i| !copy_of(&c, &format!("n{i}"), "data").exists())
            .then_some(())
    });
}

/// The machine manager hashes the chunks it passes on and compares at the finish with the
/// hash the client read: chunks that are not what the client hashed fail the transfer there
/// (a client's bug, or a message altered on its way), and the nodes drop their copies.
#[test]
fn chunks_that_do_not_have_the_clients_hash_fail_at_the_machine_manager() {
    use cosched_client::client::Client;
    use cosched_proto::DaemonError;
    use cosched_proto::proto::{BcastOp, BcastReply, Request, Response};
    let c = up("hash", &["--nodes", "2", "--pes", "1"], &[]);
    c.until(30, "all nodes up", || (c.nodes_up() == 2).then_some(()));
    let client = Client::from_state_dir(&c.state, None, None).unwrap();
    let ask = |op| client.request(Request::Bcast(op));
    let data = vec![7u8; 1000];
    let Ok(Response::Bcast(BcastReply::Started { id, .. })) = ask(BcastOp::Begin {
        dest: "h".into(),
        size: data.len() as u64,
        chunk: 512,
        slots: 4,
        nodes: vec![],
        scope: Default::default(),
        user: None,
    }) else {
        panic!("not started")
    };
    for (k, part) in data.chunks(512).enumerate() {
        let r = ask(BcastOp::Chunk {
            id,
            k: k as u32,
            data: part.to_vec(),
        });
        assert!(matches!(r, Ok(Response::Bcast(BcastReply::Sent))), "{r:?}");
    }
    let file = c.dir.join("h.bin");
    std::fs::write(&file, &data).unwrap();
    let (mut wrong, _) = digest_file(&file).unwrap();
    wrong[0] ^= 1;
    match ask(BcastOp::Finish { id, blake3: wrong }) {
        Err(DaemonError::Refused(e)) => assert!(
            e.contains("do not have the hash") && e.contains("nothing was launched"),
            "{e}"
        ),
        r => panic!("a wrong hash was accepted: {r:?}"),
    }
    c.until(10, "copies removed", || {
        (0..2)
            .all(|i| !copy_of(&c, &format!("n{i}"), "h").exists())
            .then_some(())
    });
}

/// A node that cannot create its copy (here its scratch directory is a file; out of room
/// is the same path) fails the transfer at the start, at once and by name, rather than at
/// the 30-second deadline for slow nodes.
#[test]
fn a_node_that_cannot_create_the_copy_fails_the_transfer_at_once_by_name() {
    let dir = scratch("bcast", "nocreate");
    std::fs::create_dir_all(dir.join("scratch")).unwrap();
    std::fs::write(dir.join("scratch/n1"), b"not a directory").unwrap();
    start(&dir, &["--nodes", "2", "--pes", "1"], &[]);
    let c = Cluster {
        state: StateDir::new(&dir),
        dir,
        work: None,
        extra: Default::default(),
    };
    c.until(30, "all nodes up", || (c.nodes_up() == 2).then_some(()));
    let file = make_file(&c.dir, "f.bin", 100_000);
    let t0 = Instant::now();
    let out = Command::new(bin())
        .args(["bcast", "--dest", "f"])
        .arg(&file)
        .env("COSCHED_STATE_DIR", &c.dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the broadcast must fail: {err}");
    assert!(
        err.contains("n1") && !err.contains("n0") && err.contains("could not create the file"),
        "{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "failed only after {:?}",
        t0.elapsed()
    );
    c.until(10, "n0's partial copy removed", || {
        (!copy_of(&c, "n0", "f").exists()).then_some(())
    });
}

/// A node manager writes a new copy over the pages of the one it replaces, but
/// never while a job still reads it: a shell reads its script as it goes, so a script that
/// is re-broadcast under its name while it runs must go on with the text it started with,
/// and the new copy must be whole beside it.
#[test]
fn a_copy_being_run_is_not_written_over_by_the_next_broadcast_of_its_name() {
    let c = up("inuse", &["--nodes", "2", "--pes", "1"], &[]);
    c.until(30, "2 nodes up", || (c.nodes_up() == 2).then_some(()));
    // The shell reads the part after the sleep only once the sleep is over: past 64 KiB of
    // comments, well beyond what it reads at the start.
    let script = |word: &str| {
        let mut s = String::from("#!/bin/sh\nsleep 2\n");
        s.push_str(
            &"#................................................................\n".repeat(1024),
        );
        s.push_str(&format!("echo {word}\n"));
        let p = c.dir.join(format!("{word}.sh"));
        std::fs::write(&p, s).unwrap();
        p
    };
    let (one, two) = (script("one"), script("two"));
    c.ok(&["bcast", one.to_str().unwrap(), "--dest", "prog.sh"]);
    let id = c.submit(&["-n", "2", "--", "cosched-staged:prog.sh"]);
    c.until(30, "the job running", || {
        (c.state_of(id).as_deref() == Some("running")).then_some(())
    });
    // "Running" is set when the ranks are forked: give the shells time to open their
    // scripts (they then sleep 2 s).
    std::thread::sleep(Duration::from_millis(500));
    c.ok(&["bcast", two.to_str().unwrap(), "--dest", "prog.sh"]);
    c.ok(&["wait", "--timeout", "60s", &id.to_string()]);
    for rank in 0..2 {
        let out = c.ok(&["output", &id.to_string(), "--rank", &rank.to_string()]);
        assert_eq!(
            out.trim(),
            "one",
            "rank {rank} read the next broadcast's text"
        );
    }
    for node in ["n0", "n1"] {
        assert_eq!(
            digest_file(&copy_of(&c, node, "prog.sh")).unwrap(),
            digest_file(&two).unwrap(),
            "the new copy on {node}"
        );
    }
}
