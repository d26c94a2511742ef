//! Job records: the SQLite store gives back exactly what was written (across reopen, as after
//! an MM restart).

use cosched_core::{Dur, JobId, JobRecord, NodeId, PeSet, Time};
use cosched_mm::db::{Db, NodeRow};
use cosched_mm::parse_pes;
use cosched_proto::proto::{JobInfo, JobState, Placement};

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

#[test]
fn store_round_trips_across_reopen() {
    let dir = std::env::temp_dir().join(format!("cosched-db-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mm.db");
    {
        let db = Db::open(&path).unwrap();
        db.put_job(&job(1, JobState::Running)).unwrap();
        db.put_job(&job(2, JobState::Queued)).unwrap();
        db.put_job(&job(1, JobState::Completed)).unwrap(); // an update, not a second record
        db.put_node(&NodeRow {
            id: NodeId(0),
            name: "n0".into(),
            pes: 2,
        })
        .unwrap();
    }
    let db = Db::open(&path).unwrap();
    let jobs = db.jobs().unwrap();
    assert_eq!(
        jobs,
        vec![job(1, JobState::Completed), job(2, JobState::Queued)]
    );
    assert_eq!(db.max_job_id().unwrap(), JobId(2));
    assert_eq!(
        db.nodes().unwrap(),
        vec![NodeRow {
            id: NodeId(0),
            name: "n0".into(),
            pes: 2
        }]
    );
    assert_eq!(db.journal_mode().unwrap(), "wal");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pe_lists_parse_back() {
    for text in ["0-3,8,10-11", "5", ""] {
        assert_eq!(parse_pes(text).to_string(), text);
    }
}

/// A database written before the records were the ledger's still loads, history intact.
#[test]
fn records_of_the_earlier_format_still_load() {
    let dir = std::env::temp_dir().join(format!("cosched-db-legacy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mm.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE jobs (id INTEGER PRIMARY KEY, doc TEXT NOT NULL);")
            .unwrap();
        let doc = r#"{"id":4,"name":"echo","class":null,"user":1000,"procs":2,"time_limit_us":null,"cmd":["echo"],"cwd":"/","state":"completed","submit_us":1000000,"start_us":1500000,"end_us":3500000,"suspended_us":0,"run_us":2000000,"pes":"0-1","placement":[],"exit_code":0,"error":null,"held":false}"#;
        conn.execute("INSERT INTO jobs (id, doc) VALUES (4, ?1)", [doc])
            .unwrap();
    }
    let jobs = Db::open(&path).unwrap().jobs().unwrap();
    assert_eq!(jobs.len(), 1);
    let r = &jobs[0].record;
    assert_eq!((r.id, r.procs, r.exit_code), (JobId(4), 2, Some(0)));
    assert_eq!(r.end, Some(Time::from_micros(3_500_000)));
    assert_eq!(r.outcome, Some(cosched_core::Outcome::Completed));
    assert_eq!(r.pes.to_string(), "0-1");
    std::fs::remove_dir_all(&dir).unwrap();
}
