//! The machine manager's persistent state in SQLite (WAL mode): every job record and every
//! node's name and id, written through on each change so a killed machine manager loses no
//! record. Records are stored as JSON documents keyed by id: the schema stays trivial and a
//! record read back is exactly what was written.

use std::path::Path;

use cosched_core::{JobId, NodeId};
use rusqlite::{Connection, params};

use crate::proto::JobInfo;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database {path}: {cause}")]
    Sqlite {
        path: String,
        cause: rusqlite::Error,
    },
    #[error("database {path}: record {what} does not decode: {why}")]
    Corrupt {
        path: String,
        what: String,
        why: String,
    },
}

pub struct Db {
    conn: Connection,
    path: String,
}

/// A node as remembered across restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub id: NodeId,
    pub name: String,
    pub pes: u32,
}

impl Db {
    pub fn open(path: &Path) -> Result<Db, DbError> {
        let p = path.display().to_string();
        let err = |cause| DbError::Sqlite {
            path: p.clone(),
            cause,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        // NORMAL in WAL mode survives a killed process (not a power cut): what we need.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, doc TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS nodes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, pes INTEGER NOT NULL);",
        )
        .map_err(err)?;
        Ok(Db { conn, path: p })
    }

    fn err(&self, cause: rusqlite::Error) -> DbError {
        DbError::Sqlite {
            path: self.path.clone(),
            cause,
        }
    }

    pub fn put_job(&self, job: &JobInfo) -> Result<(), DbError> {
        let doc = serde_json::to_string(job).expect("a job record always serialises");
        self.conn
            .prepare_cached("INSERT INTO jobs (id, doc) VALUES (?1, ?2) ON CONFLICT(id) DO UPDATE SET doc = excluded.doc")
            .and_then(|mut s| s.execute(params![job.id().0 as i64, doc]))
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    pub fn jobs(&self) -> Result<Vec<JobInfo>, DbError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, doc FROM jobs ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, doc) = row.map_err(|e| self.err(e))?;
            let job = serde_json::from_str(&doc)
                .or_else(|e| legacy::job(&doc).ok_or(e))
                .map_err(|e| DbError::Corrupt {
                    path: self.path.clone(),
                    what: format!("job {id}"),
                    why: e.to_string(),
                })?;
            out.push(job);
        }
        Ok(out)
    }

    /// One job's record, if the database has it.
    pub fn job(&self, id: JobId) -> Result<Option<JobInfo>, DbError> {
        let doc: Option<String> = self
            .conn
            .prepare_cached("SELECT doc FROM jobs WHERE id = ?1")
            .and_then(|mut s| {
                let mut rows = s.query(params![id.0 as i64])?;
                rows.next()?.map(|r| r.get(0)).transpose()
            })
            .map_err(|e| self.err(e))?;
        let Some(doc) = doc else {
            return Ok(None);
        };
        serde_json::from_str(&doc)
            .or_else(|e| legacy::job(&doc).ok_or(e))
            .map(Some)
            .map_err(|e| DbError::Corrupt {
                path: self.path.clone(),
                what: format!("job {id}"),
                why: e.to_string(),
            })
    }

    pub fn put_node(&self, node: &NodeRow) -> Result<(), DbError> {
        self.conn
            .execute(
                "INSERT INTO nodes (id, name, pes) VALUES (?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET name = excluded.name, pes = excluded.pes",
                params![node.id.0, node.name, node.pes],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    pub fn nodes(&self) -> Result<Vec<NodeRow>, DbError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, name, pes FROM nodes ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(NodeRow {
                    id: NodeId(r.get(0)?),
                    name: r.get(1)?,
                    pes: r.get(2)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The journal mode in force (`wal` once opened).
    pub fn journal_mode(&self) -> Result<String, DbError> {
        self.conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    pub fn max_job_id(&self) -> Result<JobId, DbError> {
        let v: Option<i64> = self
            .conn
            .query_row("SELECT MAX(id) FROM jobs", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok(JobId(v.unwrap_or(0) as u64))
    }
}

/// Records written before the machine manager kept the ledger's `JobRecord` (flat fields,
/// microseconds): read so that an older state directory keeps its history.
mod legacy {
    use cosched_core::{Dur, JobId, JobRecord, Time};
    use serde::Deserialize;

    use crate::mm::parse_pes;
    use crate::proto::{JobInfo, JobState, Placement};

    #[derive(Deserialize)]
    struct Old {
        id: JobId,
        name: String,
        class: Option<String>,
        user: Option<u32>,
        procs: u32,
        time_limit_us: Option<i64>,
        cmd: Vec<String>,
        cwd: String,
        state: JobState,
        submit_us: i64,
        start_us: Option<i64>,
        end_us: Option<i64>,
        suspended_us: i64,
        run_us: i64,
        pes: String,
        placement: Vec<Placement>,
        exit_code: Option<i32>,
        error: Option<String>,
        held: bool,
    }

    pub fn job(doc: &str) -> Option<JobInfo> {
        let o: Old = serde_json::from_str(doc).ok()?;
        Some(JobInfo {
            record: JobRecord {
                id: o.id,
                submit: Time::from_micros(o.submit_us),
                procs: o.procs,
                start: o.start_us.map(Time::from_micros),
                end: o.end_us.map(Time::from_micros),
                suspended: Dur::from_micros(o.suspended_us),
                preemptions: 0,
                pes: parse_pes(&o.pes),
                outcome: o.state.outcome(),
                exit_code: o.exit_code,
            },
            state: o.state,
            name: o.name,
            class: o.class,
            user: o.user,
            gid: None,
            time_limit_us: o.time_limit_us,
            cmd: o.cmd,
            cwd: o.cwd,
            run_us: o.run_us,
            placement: o.placement,
            error: o.error,
            held: o.held,
            io: Default::default(),
            sched: Default::default(),
            reason: None,
            run: 0,
        })
    }
}
