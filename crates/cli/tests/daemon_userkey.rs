//! Identity and ownership over TCP: a remote client with a user's credential (`cosched
//! cluster user-key`, `--user-key`) is that user over TCP, with a user's rights and no more;
//! a credential claimed for another uid, or forged, is refused. Real daemons on loopback.

mod support;
use support::cluster::{Cluster, signal};
use support::*;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Output;

use serde_json::Value;

/// A Unix user other than root that every system has; jobs run as it when the test is root.
const USER: u32 = 65534;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cosched ARGS --mm ADDR --user-key FILE`.
fn as_user(c: &Cluster, file: &std::path::Path, args: &[&str]) -> Output {
    let addr = c.state.addr().unwrap();
    // The connection's options before the rest: a submit's command follows `--`.
    let mut full: Vec<&str> = args[..1].to_vec();
    full.extend(["--mm", &addr, "--user-key", file.to_str().unwrap()]);
    full.extend(&args[1..]);
    c.run(&full)
}

fn job_uid(c: &Cluster, id: u64) -> u64 {
    let v: Value = serde_json::from_str(&c.ok(&["acct", "--json"])).unwrap();
    let rec = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("job {id} in {v}"))
        .clone();
    rec["uid"]
        .as_u64()
        .unwrap_or_else(|| panic!("uid in {rec}"))
}

#[test]
fn a_user_key_acts_as_its_user_over_tcp_and_nothing_else() {
    let c = Cluster::up("userkey", "acts", &["--nodes", "1", "--pes", "2"]);
    let file = c.dir.join("u.key");
    let f = file.to_str().unwrap();
    c.ok(&[
        "cluster",
        "user-key",
        "--uid",
        &USER.to_string(),
        "--out",
        f,
    ]);
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), std::fs::metadata("/proc/self").unwrap().uid());

    // Root's job, through the local socket.
    let roots = c.submit(&["-n", "1", "--", "sleep", "60"]);
    // The user's job, over TCP with the credential: recorded as the user's.
    let out = as_user(&c, &file, &["submit", "-n", "1", "--", "sleep", "60"]);
    let mine = job_id(&succeeded(&["submit (user key)"], out, ""));
    assert_eq!(job_uid(&c, mine), USER as u64);

    let out = as_user(&c, &file, &["cancel", &roots.to_string()]);
    assert!(
        !out.status.success()
            && text(&out).contains(&format!("permission denied: job {roots} belongs to root")),
        "{}",
        text(&out)
    );
    assert_eq!(c.state_of(roots).as_deref(), Some("running"));
    if meta.uid() == 0 {
        let out = as_user(&c, &file, &["cancel", &mine.to_string()]);
        assert!(out.status.success(), "{}", text(&out));
        c.until(5, "the user's job cancelled", || {
            (c.state_of(mine).as_deref() == Some("cancelled")).then_some(())
        });
    } else {
        // A node manager that is not root cannot run uid USER's job: it has failed already.
        notice(
            "a_user_key_acts_as_its_user_over_tcp_and_nothing_else: not run as root, so the user's job could not run and cancelling it was NOT tried",
        );
    }
    assert_eq!(c.state_of(roots).as_deref(), Some("running"));

    // The user's key with a claim of uid 0: refused, and nothing submitted.
    let stolen = c.dir.join("claim-root.key");
    let body = std::fs::read_to_string(&file).unwrap();
    let claimed = body.replace(&format!("uid {USER}"), "uid 0");
    assert_ne!(claimed, body);
    std::fs::write(&stolen, claimed).unwrap();
    let out = as_user(&c, &stolen, &["submit", "-n", "1", "--", "true"]);
    assert!(
        !out.status.success() && text(&out).contains("authentication failed"),
        "{}",
        text(&out)
    );
    // A garbled key for the right uid: refused too.
    let key_line = body.lines().find(|l| l.starts_with("key ")).unwrap();
    let flipped = if key_line.ends_with('0') { "1" } else { "0" };
    let garbled = format!("uid {USER}\n{}{flipped}\n", &key_line[..key_line.len() - 1]);
    let forged = c.dir.join("forged.key");
    std::fs::write(&forged, garbled).unwrap();
    let out = as_user(&c, &forged, &["cancel", &roots.to_string()]);
    assert!(
        !out.status.success() && text(&out).contains("authentication failed"),
        "{}",
        text(&out)
    );
    let v: Value = serde_json::from_str(&c.ok(&["acct", "--json"])).unwrap();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(c.state_of(roots).as_deref(), Some("running"));
}

/// A user key is written only by the cluster key's holder.
#[test]
fn no_user_key_without_the_cluster_key() {
    let tmp = scratch_dir("userkey", "nokey");
    let dir = tmp.path();
    let out = cosched(
        dir,
        &[
            "cluster",
            "user-key",
            "--uid",
            "1000",
            "--key-file",
            "/nonexistent/key",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("cluster key"), "{}", text(&out));
}

/// One user's credentials are revoked by issuing that user a new serial: the old file is
/// refused, another user's still works, and the new file works; a credential past its
/// expiry is refused with the reason.
#[test]
fn a_revoked_user_credential_is_refused_while_another_users_still_works() {
    let c = Cluster::up("userkey", "revoke", &["--nodes", "1", "--pes", "1"]);
    let key = |name: &str, uid: u32, extra: &[&str]| {
        let file = c.dir.join(name);
        let uid = uid.to_string();
        let mut args = vec![
            "cluster",
            "user-key",
            "--uid",
            &uid,
            "--out",
            file.to_str().unwrap(),
        ];
        args.extend(extra);
        c.ok(&args);
        file
    };
    let a = key("a.key", USER, &[]);
    let b = key("b.key", USER - 1, &[]);
    for f in [&a, &b] {
        let out = as_user(&c, f, &["queue"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    c.ok(&[
        "cluster",
        "user-key",
        "--uid",
        &USER.to_string(),
        "--revoke",
    ]);
    let out = as_user(&c, &a, &["queue"]);
    assert!(!out.status.success(), "a revoked credential still works");
    assert!(
        text(&out).contains("authentication failed"),
        "{}",
        text(&out)
    );
    let out = as_user(&c, &b, &["queue"]);
    assert!(out.status.success(), "another user's: {}", text(&out));
    let a2 = key("a2.key", USER, &[]);
    let out = as_user(&c, &a2, &["queue"]);
    assert!(out.status.success(), "the new one: {}", text(&out));
    // Expiring: valid for a second, then refused with the reason.
    let short = key("short.key", USER, &["--expires", "1s"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let out = as_user(&c, &short, &["queue"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("expired"), "{}", text(&out));
}

/// `cosched cluster rotate-key` during a running two-node job over a chain of node managers
/// (fan-out 1: the second is the first's child, so an interior node forwards frames of both
/// keys): the job completes, both nodes stay up, the key file holds a new key; a client with
/// a copy of the old key gets through during the grace period and is refused after it, and
/// the cluster still runs jobs over the tree with the new key only.
#[test]
fn the_cluster_key_rotates_during_a_running_job_and_the_old_key_is_refused_after_the_grace_period()
{
    let c = Cluster::up(
        "userkey",
        "rotate",
        &["--nodes", "2", "--pes", "1", "--fanout", "1"],
    );
    let key_file = c.state.key_file();
    let old = c.dir.join("old.key");
    std::fs::copy(&key_file, &old).unwrap();
    let addr = c.state.addr().unwrap();
    let with_old = |args: &[&str]| {
        let mut full: Vec<&str> = args[..1].to_vec();
        full.extend(["--mm", &addr, "--key-file", old.to_str().unwrap()]);
        full.extend(&args[1..]);
        c.run(&full)
    };
    let job = c.submit(&["-n", "2", "--", "sleep", "4"]);
    c.until(20, "the job running", || {
        (c.state_of(job).as_deref() == Some("running")).then_some(())
    });
    const GRACE_S: u64 = 8;
    let rotated_at = std::time::Instant::now();
    c.ok(&["cluster", "rotate-key", "--grace", &format!("{GRACE_S}s")]);
    assert_ne!(
        std::fs::read_to_string(&key_file).unwrap(),
        std::fs::read_to_string(&old).unwrap(),
        "the key file holds the new key"
    );
    let out = with_old(&["queue"]);
    if rotated_at.elapsed().as_secs() < GRACE_S {
        assert!(
            out.status.success(),
            "the old key during the grace period: {}",
            text(&out)
        );
    }
    let ended = c.ended(job, 30);
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(c.nodes_up(), 2, "{}", c.mm_log());
    // The node managers took the key themselves (they would have registered again if not).
    let log = c.mm_log();
    assert!(log.contains("the cluster key was rotated"), "{log}");
    assert!(
        !log.contains("registered with the previous cluster key"),
        "{log}"
    );

    let wait = std::time::Duration::from_secs(GRACE_S + 1).saturating_sub(rotated_at.elapsed());
    std::thread::sleep(wait);
    let out = with_old(&["queue"]);
    assert!(
        !out.status.success(),
        "the old key after the grace period works"
    );
    assert!(
        text(&out).contains("authentication failed"),
        "{}",
        text(&out)
    );
    // The tree runs on the new key alone: a job on both nodes completes.
    let after = c.submit(&["-n", "2", "--", "true"]);
    assert_eq!(c.ended(after, 30)["state"], "completed");
    assert_eq!(c.nodes_up(), 2);
}

/// A node manager that was down during a rotation and comes back with the old key in its
/// key file, within the grace period: the machine manager gives it the new key at
/// registration, it writes the key to its file and registers again with it, and runs jobs
/// over the tree sealed with the new key.
#[test]
fn a_node_manager_that_missed_a_rotation_gets_the_new_key_when_it_registers_again() {
    let c = Cluster::up("userkey", "late", &["--nodes", "2", "--pes", "1"]);
    let old = c.dir.join("old.key");
    std::fs::copy(c.state.key_file(), &old).unwrap();
    signal(&c.pid(c.state.nm_pid_file("n1")), "KILL");
    c.until(30, "n1 away", || {
        (c.node_state("n1").as_deref() != Some("up")).then_some(())
    });
    c.ok(&["cluster", "rotate-key", "--grace", "10m"]);
    // n1 again, with its own copy of the old key, as a host the new key did not reach.
    let addr = c.state.addr().unwrap();
    let args: Vec<String> = [
        "nm",
        "--mm",
        &addr,
        "--name",
        "n1",
        "--pes",
        "1",
        "--workdir",
        c.state.node_work_dir("n1").to_str().unwrap(),
        "--key-file",
        old.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    c.spawn(&args, c.state.nm_log("n1"));
    c.until(30, "n1 up again", || (c.nodes_up() == 2).then_some(()));
    assert!(
        c.mm_log()
            .contains("registered with the previous cluster key: given the new one"),
        "{}",
        c.mm_log()
    );
    assert_eq!(
        std::fs::read_to_string(&old).unwrap(),
        std::fs::read_to_string(c.state.key_file()).unwrap(),
        "n1 wrote the new key to its key file"
    );
    let job = c.submit(&["-n", "2", "--", "true"]);
    assert_eq!(c.ended(job, 30)["state"], "completed");
}
