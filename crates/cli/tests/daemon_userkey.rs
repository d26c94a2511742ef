//! Identity and ownership over TCP: a remote client with a user's credential (`cosched
//! cluster user-key`, `--user-key`) is that user over TCP, with a user's rights and no more;
//! a credential claimed for another uid, or forged, is refused. Real daemons on loopback.

mod support;
use support::cluster::Cluster;
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
