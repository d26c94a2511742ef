//! The reports of job records and cluster status: the SWF export reads back through the
//! workload crate, accounting records carry their fields, the status draws the matrix.

use cosched_client::views;
use cosched_core::{Dur, JobId, JobRecord, NodeId, PeSet, Time};
use cosched_proto::proto::{JobInfo, JobState, NodeInfo, Placement, StatusInfo};
use cosched_workload::swf::{ReadOptions, read_trace_from};

fn job(id: u64, state: JobState) -> JobInfo {
    let s = |us: i64| Time::from_micros(us);
    let submit = 1_000_000 * id as i64;
    let record = JobRecord {
        id: JobId(id),
        submit: s(submit),
        procs: 2,
        start: Some(s(submit + 500_000)),
        end: state.is_final().then_some(s(submit + 3_500_000)),
        suspended: Dur::from_secs(1),
        preemptions: 0,
        pes: PeSet::contiguous(0, 2),
        outcome: state.outcome(),
        exit_code: state.is_final().then_some(0),
    };
    JobInfo {
        mem: None,
        spread: None,
        steps: Vec::new(),
        partition: None,
        tasks: None,
        record,
        state,
        name: format!("j{id}"),
        class: None,
        user: Some(1000),
        gid: Some(1000),
        time_limit_us: Some(60_000_000),
        cmd: vec!["true".into()],
        cwd: "/".into(),
        run_us: 2_000_000,
        placement: vec![Placement {
            node: NodeId(0),
            ranks: vec![(0, 0), (1, 1)],
            extra_pes: Vec::new(),
        }],
        error: None,
        held: false,
        io: Default::default(),
        sched: Default::default(),
        reason: None,
        run: 0,
    }
}

fn status() -> StatusInfo {
    StatusInfo {
        policy: "gang".into(),
        nodes_total: 2,
        pes_per_node: 2,
        fanout: 8,
        tree_depth: 1,
        nodes: vec![
            NodeInfo {
                id: NodeId(0),
                name: "n0".into(),
                state: "up".into(),
                addr: "a".into(),
                pes: 2,
                reason: None,
            },
            NodeInfo {
                id: NodeId(1),
                name: "n1".into(),
                state: "down".into(),
                addr: "b".into(),
                pes: 2,
                reason: None,
            },
        ],
        slots: vec![
            vec![Some(JobId(7)), Some(JobId(7)), None, None],
            vec![Some(JobId(12)), None, None, None],
        ],
        active_slot: Some(1),
        running: vec![Some(JobId(12)), None, None, None],
        switches: 0,
        partitions: Vec::new(),
    }
}

#[test]
fn swf_is_written_by_the_workload_writer_with_a_header_it_reads_back() {
    let jobs = vec![
        job(1, JobState::Completed),
        job(2, JobState::Running),
        job(3, JobState::Cancelled),
    ];
    let (header, records) = views::swf(&jobs, &status());
    let mut text = Vec::new();
    cosched_workload::swf::write_trace(&mut text, &header, &records).unwrap();
    let text = String::from_utf8(text).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with(';'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "only ended jobs: {text}");
    assert!(rows.iter().all(|r| r.len() == 18));
    // Fractional seconds: a real run is timed in microseconds.
    assert_eq!(&rows[0][..5], &["1", "0", "0.5", "3", "2"]);
    assert_eq!(rows[1][1], "2", "submit relative to the first job");
    assert_eq!(rows[0][10], "1");
    assert_eq!(rows[1][10], "5");
    let back = read_trace_from(text.as_bytes(), "acct.swf", &ReadOptions::default()).unwrap();
    assert_eq!(back.procs, 4, "MaxProcs: {text}");
    assert_eq!(back.header.max_nodes, Some(2));
    assert_eq!(back.records.len(), 2);
    let rec = views::acct_record(&jobs[0]);
    for field in [
        "id",
        "state",
        "submit",
        "start",
        "end",
        "procs",
        "exit_code",
        "suspended_s",
    ] {
        assert!(!rec[field].is_null(), "{field} missing: {rec}");
    }
    assert_eq!(rec["suspended_s"], 1.0);
}

#[test]
fn status_draws_the_matrix() {
    let st = status();
    let text = views::status_text(&st);
    assert!(text.contains("nodes 1/2 up"), "{text}");
    let slot1 = text.lines().find(|l| l.starts_with("slot1")).unwrap();
    assert!(
        slot1.contains('*') && slot1.contains("12") && slot1.contains('x'),
        "{text}"
    );
    let slot0 = text.lines().find(|l| l.starts_with("slot0")).unwrap();
    assert_eq!(slot0.matches(" 7").count(), 2, "{text}");
}

#[test]
fn a_held_state_keeps_the_columns_aligned() {
    let mut held = job(1, JobState::Suspended);
    held.held = true;
    let jobs = [held, job(2, JobState::Queued)];
    let table = views::jobs_table(&jobs, 0);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[1].contains("suspended(held)"), "{table}");
    // Every row puts its PROCS figure under the end of the PROCS header.
    let end = lines[0].find("PROCS").unwrap() + "PROCS".len();
    for l in &lines[1..] {
        assert_eq!(&l[end - 1..end], "2", "{table}");
    }
    assert!(table.ends_with('\n'));
}
