//! The scale of state: queries that page instead of failing once every
//! record together passes the frame limit, `output` that says when it cut a file short, and
//! job directories removed after the retention period. Real daemons on loopback, each test in
//! its own state directory, torn down on drop; every wait polls with a generous deadline.

mod support;
use support::cluster::Cluster;
use support::*;

use cosched_core::JobId;
use cosched_proto::proto::SubmitRequest;

/// Ten jobs with 1.8 MB command lines hold 18 MB of records, more than a frame may carry, so
/// one answer would fail `queue` and `acct` for everyone. They page, listings shorten the
/// command lines with a marker, a job asked by id comes whole, and `acct`'s filters and
/// `--limit` select in the machine manager.
#[test]
fn queue_and_acct_page_past_the_frame_limit() {
    let c = Cluster::up("scale", "page", &["--nodes", "1", "--pes", "1"]);
    let client = c.client();
    let arg = "x".repeat(100_000);
    let begin = cosched_proto::util::now().as_micros() + 3_600_000_000;
    let mut ids = Vec::new();
    for _ in 0..10 {
        let mut cmd = vec!["true".to_string()];
        cmd.extend(std::iter::repeat_n(arg.clone(), 18));
        let mut req = SubmitRequest {
            mem: None,
            procs: 1,
            time_limit_us: None,
            class: None,
            name: Some("big".into()),
            cmd,
            cwd: "/".into(),
            user: None,
            io: Default::default(),
            sched: Default::default(),
            layout: None,
            hold: false,
        };
        // Held back by a begin time an hour away: they stay queued, nothing runs.
        req.sched.begin_us = Some(begin);
        ids.push(client.submit(req).unwrap().0);
    }

    let table = c.ok(&["queue"]);
    assert_eq!(table.matches(" big ").count(), 10, "{table:.2000}");
    let all = c.json(&["acct", "--json"]);
    let jobs = all["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 10);
    let shown: usize = jobs[0]["cmd"]
        .as_array()
        .map_or(0, |a| a.iter().map(|s| s.as_str().unwrap().len()).sum());
    assert!(
        shown < 10_000,
        "a listing shortens the command: {shown} bytes"
    );
    let listed = client.jobs(&[]).unwrap();
    assert_eq!(listed.len(), 10);
    let marker = listed[0].cmd.last().unwrap();
    assert!(marker.contains("shortened"), "{marker:.200}");

    // By id, whole.
    let one = client.jobs(&[JobId(ids[3])]).unwrap();
    assert_eq!(one[0].cmd.len(), 19);
    assert_eq!(one[0].cmd[18], arg);
    let many = client.jobs(&ids.iter().map(|&i| JobId(i)).collect::<Vec<_>>());
    assert_eq!(
        many.unwrap().len(),
        10,
        "ten whole jobs come in several pages"
    );

    // Filters and the limit, applied by the machine manager.
    let three = c.json(&["acct", "--json", "--limit", "3"]);
    let three: Vec<u64> = three["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    assert_eq!(three, ids[..3]);
    let none = c.json(&["acct", "--json", "--state", "completed"]);
    assert_eq!(none["jobs"].as_array().unwrap().len(), 0);
    let other = c.json(&["acct", "--json", "--user", "4000000"]);
    assert_eq!(other["jobs"].as_array().unwrap().len(), 0);
    let queued = c.json(&["acct", "--json", "--state", "PD", "--limit", "20"]);
    assert_eq!(queued["jobs"].as_array().unwrap().len(), 10);
}

/// `output` cuts a file at 4 MiB and says so, with the whole size; `--tail` shows the end.
#[test]
fn output_says_when_it_cut_a_file_and_tail_shows_the_end() {
    let c = Cluster::up("scale", "output", &["--nodes", "1", "--pes", "1"]);
    let id = job_id(&c.ok(&[
        "submit",
        "--",
        "sh",
        "-c",
        "head -c 5000000 /dev/zero | tr '\\0' a; echo END",
    ]));
    c.ok(&["wait", "--timeout", "60s", &id.to_string()]);
    let id = id.to_string();
    let head = c.run(&["output", &id]);
    assert!(head.status.success());
    assert_eq!(head.stdout.len(), 4 << 20);
    assert!(head.stdout.iter().all(|&b| b == b'a'));
    let notice = String::from_utf8_lossy(&head.stderr);
    assert!(
        notice.contains("is 5000004 bytes") && notice.contains("--tail"),
        "{notice}"
    );
    let tail = c.run(&["output", "--tail", &id]);
    assert_eq!(tail.stdout.len(), 4 << 20);
    assert!(tail.stdout.ends_with(b"aEND\n"));
    let json = c.json(&["output", "--json", &id]);
    assert_eq!(json["truncated"], true);
    assert_eq!(json["stdout_size"], 5_000_004);
    // A short file comes whole, with no notice.
    let small = job_id(&c.ok(&["submit", "--", "echo", "hi"])).to_string();
    c.ok(&["wait", "--timeout", "60s", &small]);
    let out = c.run(&["output", &small]);
    assert_eq!(out.stdout, b"hi\n");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With `--keep-jobs 2s` a finished job's directory on its node goes about two seconds after
/// its end, while a file the job directed elsewhere with `--output` stays, and so does a
/// running job's directory.
#[test]
fn finished_job_directories_are_removed_after_the_retention() {
    let c = Cluster::up(
        "scale",
        "keep",
        &["--nodes", "1", "--pes", "2", "--keep-jobs", "2s"],
    );
    let elsewhere = c.dir.join("kept.out");
    let done = job_id(&c.ok(&["submit", "--", "echo", "hi"]));
    let directed = job_id(&c.ok(&[
        "submit",
        "--output",
        elsewhere.to_str().unwrap(),
        "--",
        "echo",
        "mine",
    ]));
    c.ok(&[
        "wait",
        "--timeout",
        "60s",
        &done.to_string(),
        &directed.to_string(),
    ]);
    let running = job_id(&c.ok(&["submit", "--", "sleep", "60"]));
    let nm_dir = std::fs::read_dir(&c.dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("nm-"))
        })
        .expect("the node's work directory");
    let job_dir = |id: u64| nm_dir.join("jobs").join(id.to_string());
    assert_eq!(c.run(&["output", &done.to_string()]).stdout, b"hi\n");
    c.until(30, "the running job's directory", || {
        job_dir(running).is_dir().then_some(())
    });
    // Each finished job's directory goes on its own clock (its own end), so both are waited
    // for: the second job may end a moment after the first.
    c.until(30, "the finished jobs' directories removed", || {
        (!job_dir(done).exists() && !job_dir(directed).exists()).then_some(())
    });
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"mine\n");
    assert!(job_dir(running).is_dir(), "a running job's directory stays");
    // The machine manager forgets them too; their records stay whole, from the database.
    c.until(30, "the machine manager forgetting the ended jobs", || {
        std::fs::read_to_string(c.state.mm_log())
            .ok()?
            .contains("forgot ")
            .then_some(())
    });
    let acct = c.json(&["acct", "--json"]);
    let jobs = acct["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[0]["cmd"], serde_json::json!(["echo", "hi"]));
    assert_eq!(jobs[0]["state"], "completed");
    let out = c.run(&["output", &done.to_string()]);
    assert!(!out.status.success());
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(why.contains("--keep-jobs"), "{why}");
    let one = c.client().jobs(&[JobId(directed)]).unwrap();
    assert_eq!(one[0].io.output.as_deref(), elsewhere.to_str());
}

/// Output files grew without bound: past `--output-cap` a file is cut back to the cap with
/// a notice appended, at the rank's exit and while it runs. That a running rank's file stays
/// within the cap afterwards, the notice once, is the node manager core's tests
/// (`output_files_are_kept_within_the_cap_at_every_heartbeat_and_at_exit_with_one_notice`)
/// and `nm::files`'s (`an_output_file_is_cut_at_the_cap_with_one_notice_however_often_it_grows_past_it`).
#[test]
fn output_files_are_capped_with_a_notice() {
    let cap = 100 * 1024;
    let c = Cluster::up(
        "scale",
        "cap",
        &["--nodes", "1", "--pes", "2", "--output-cap", "100K"],
    );
    let burst = job_id(&c.ok(&[
        "submit",
        "--",
        "sh",
        "-c",
        "head -c 1000000 /dev/zero | tr '\\0' a; echo LAST",
    ]));
    c.ok(&["wait", "--timeout", "60s", &burst.to_string()]);
    let out = c.run(&["output", &burst.to_string()]).stdout;
    let text = String::from_utf8_lossy(&out);
    assert!(out.len() < cap + 1000, "{} bytes", out.len());
    assert!(out[..cap].iter().all(|&b| b == b'a'));
    assert!(text.contains("--output-cap"), "{:?}", &text[cap..]);
    assert!(!text.contains("LAST"));

    // A steady writer: cut while it runs.
    let steady = job_id(&c.ok(&[
        "submit",
        "--",
        "sh",
        "-c",
        "while :; do head -c 20000 /dev/zero | tr '\\0' b; sleep 0.02; done",
    ]))
    .to_string();
    c.until(60, "the steady writer passing the cap", || {
        let o = c.run(&["output", "--json", &steady]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        v["stdout"].as_str()?.contains("--output-cap").then_some(())
    });
    c.ok(&["cancel", &steady]);
}
