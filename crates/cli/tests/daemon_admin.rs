//! A cluster run from its configuration file, as docs/deploy.md sets one up: nodes known by
//! name keep their ids whatever order they join, a stranger is refused, a node is drained
//! and resumed, and a node added to the file joins after `cosched reconfigure` while a job
//! runs elsewhere, with the history kept. Real daemons on loopback.

mod support;

use serde_json::Value;
use support::cluster::Cluster;

const CONFIG: &str = r#"cluster = "test"
head = "127.0.0.1:@PORT@"
state_dir = "@DIR@"
key = "@DIR@/key"
heartbeat = "200ms"
suspect_after = "10s"
down_after = "5m"

[scheduler]
policy = "fcfs"

[[nodes]]
names = "n[1-2]"
cores = 1
"#;

fn status(c: &Cluster) -> Value {
    serde_json::from_str(&c.ok(&["status", "--json"])).unwrap()
}

fn node<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name} in {st}"))
}

/// The node a job's (only) rank ran on: its PE's number, nodes having one PE each.
fn ran_on(c: &Cluster, id: u64) -> u64 {
    let j = c.job(id);
    j["pes"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("one PE: {j}"))
}

#[test]
fn a_configured_cluster_drains_resumes_and_grows_by_reconfiguration_keeping_its_history() {
    // n2 joins before n1: ids follow the configuration, not the order of arrival.
    let c = Cluster::configured("admin", "config", CONFIG, &["n2", "n1"]);
    let st = status(&c);
    assert_eq!(node(&st, "n1")["id"], 0, "{st}");
    assert_eq!(node(&st, "n2")["id"], 1, "{st}");

    // A node manager the configuration does not name is refused, and says why.
    let out = c.run(&[
        "nm",
        "--config",
        c.config_file().to_str().unwrap(),
        "--name",
        "stranger",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node stranger is not in"), "{err}");

    // Drained: n1's running job finishes, new work goes to n2.
    let long = c.submit(&["-n", "1", "--", "sleep", "2"]);
    c.until(30, "job running", || {
        (c.state_of(long).as_deref() == Some("running")).then_some(())
    });
    let busy = ran_on(&c, long);
    let busy_name = if busy == 0 { "n1" } else { "n2" };
    c.ok(&["node", "drain", busy_name, "--reason", "new memory"]);
    let st = status(&c);
    assert_eq!(node(&st, busy_name)["state"], "draining", "{st}");
    assert_eq!(node(&st, busy_name)["reason"]["reason"], "new memory");
    assert!(
        c.ok(&["status"]).contains("drain by"),
        "the table says who drained it"
    );
    let short = c.submit(&["-n", "1", "--", "true"]);
    assert_eq!(c.ended(short, 60)["state"], "completed");
    assert_eq!(
        ran_on(&c, short),
        1 - busy,
        "a drained node starts nothing new"
    );
    assert_eq!(
        c.ended(long, 60)["state"],
        "completed",
        "its job ran to its end"
    );
    assert_eq!(node(&status(&c), busy_name)["state"], "drained");
    // Slurm's form of resume.
    c.ok(&[
        "slurm",
        "scontrol",
        "update",
        &format!("nodename={busy_name}"),
        "state=resume",
    ]);
    assert_eq!(node(&status(&c), busy_name)["state"], "up");

    // A third node: edit the file, reconfigure while a job runs on the other node.
    let running = c.submit(&["-n", "1", "--", "sleep", "4"]);
    c.until(30, "job running", || {
        (c.state_of(running).as_deref() == Some("running")).then_some(())
    });
    let text = std::fs::read_to_string(c.config_file()).unwrap();
    c.write_config(&text.replace("n[1-2]", "n[1-3]"));
    let out = c.run(&["reconfigure"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("nodes added: n3; removed: none"), "{said}");
    c.start_configured_nm("n3");
    c.until(90, "n3 up", || {
        (c.node_state("n3").as_deref() == Some("up")).then_some(())
    });
    let st = status(&c);
    assert_eq!(node(&st, "n3")["id"], 2, "{st}");
    assert_eq!(st["nodes_total"], 3);
    assert_eq!(
        c.ended(running, 120)["state"],
        "completed",
        "the job running across the reconfiguration completes"
    );
    // The history is kept: the jobs from before are still in the accounting, and so are
    // the drain and the resume, with who and why.
    for id in [long, short] {
        assert_eq!(c.job(id)["state"], "completed");
    }
    let db = cosched_mm::db::Db::open(&c.state.db_file()).unwrap();
    let events: Vec<(String, &str, Option<String>, u32)> = db
        .node_events()
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.op.as_str(), e.reason, e.uid))
        .collect();
    let me = unsafe { libc::geteuid() };
    assert_eq!(
        events,
        [
            (
                busy_name.to_string(),
                "drain",
                Some("new memory".into()),
                me
            ),
            (busy_name.to_string(), "resume", None, me),
        ]
    );
}
