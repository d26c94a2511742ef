//! The machine manager's persistent state in SQLite (WAL mode): every job record and every
//! node's name and id, every administrator's change to a node (drain, down, resume: who,
//! when, why) and the state it left, each user's credential serial, written through on each change so a killed machine manager loses no
//! record, and the nonces of the recent requests that changed something, so a restarted
//! machine manager still refuses them when replayed. Records are stored
//! as JSON documents keyed by id: the schema stays trivial and a record read back is exactly
//! what was written. Rows of `jobs` are never deleted, so its largest id is the high-water
//! mark a restarted machine manager continues from.
//!
//! A write that fails — a full disk, a read-only file system, an I/O error — is a
//! [`DbError::Write`] whose message says which, names the directory and what to do; the
//! transaction is rolled back, and the connection takes the next write when the disk does.

use std::collections::BTreeMap;
use std::path::Path;

use cosched_core::{JobId, NodeId};
use rusqlite::{Connection, params};

use cosched_proto::proto::{JobInfo, NodeChange, NodeOp};
use cosched_proto::state_dir::{FsState, fs_state};
use cosched_proto::user_key::Credential;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A write that did not happen, and why in the user's terms.
    #[error("cannot write the machine manager's database {path}: {why}")]
    Write { path: String, why: String },
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

impl From<DbError> for cosched_proto::DaemonError {
    fn from(e: DbError) -> Self {
        cosched_proto::DaemonError::Db(Box::new(e))
    }
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
        let conn = Connection::open(path).map_err(|cause| write_error(&p, 0, cause))?;
        let failed = |cause| write_error(&p, last_errno(&conn), cause);
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(failed)?;
        // NORMAL in WAL mode survives a killed process (not a power cut): what we need.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(failed)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, doc TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS nodes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, pes INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS nonces (nonce INTEGER PRIMARY KEY, at INTEGER NOT NULL);
             CREATE INDEX IF NOT EXISTS nonces_at ON nonces (at);
             CREATE TABLE IF NOT EXISTS node_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, node INTEGER NOT NULL, doc TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS node_admin (node INTEGER PRIMARY KEY, doc TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS user_credentials (uid INTEGER PRIMARY KEY, doc TEXT NOT NULL);",
        )
        .map_err(failed)?;
        Ok(Db { conn, path: p })
    }

    fn err(&self, cause: rusqlite::Error) -> DbError {
        DbError::Sqlite {
            path: self.path.clone(),
            cause,
        }
    }

    pub fn put_job(&self, job: &JobInfo) -> Result<(), DbError> {
        self.write(&Batch {
            jobs: vec![(job.id(), job_doc(job))],
            ..Batch::default()
        })
    }

    /// Writes a batch in one transaction: all of it, or (on an error) none of it.
    pub fn write(&self, b: &Batch) -> Result<(), DbError> {
        let failed = |cause| write_error(&self.path, last_errno(&self.conn), cause);
        let tx = self.conn.unchecked_transaction().map_err(failed)?;
        {
            let mut put = tx
                .prepare_cached("INSERT INTO jobs (id, doc) VALUES (?1, ?2) ON CONFLICT(id) DO UPDATE SET doc = excluded.doc")
                .map_err(failed)?;
            for (id, doc) in &b.jobs {
                put.execute(params![id.0 as i64, doc]).map_err(failed)?;
            }
            for node in &b.nodes {
                tx.execute(
                    "INSERT INTO nodes (id, name, pes) VALUES (?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET name = excluded.name, pes = excluded.pes",
                    params![node.id.0, node.name, node.pes],
                )
                .map_err(failed)?;
            }
            for c in &b.node_changes {
                let doc = serde_json::to_string(c).expect("a node change always serialises");
                tx.execute(
                    "INSERT INTO node_events (node, doc) VALUES (?1, ?2)",
                    params![c.node.0, doc],
                )
                .map_err(failed)?;
                // The state it leaves: what a restart finds.
                if c.op == NodeOp::Resume {
                    tx.execute("DELETE FROM node_admin WHERE node = ?1", params![c.node.0])
                } else {
                    tx.execute(
                        "INSERT INTO node_admin (node, doc) VALUES (?1, ?2) ON CONFLICT(node) DO UPDATE SET doc = excluded.doc",
                        params![c.node.0, doc],
                    )
                }
                .map_err(failed)?;
            }
            for (uid, c) in &b.credentials {
                let doc = serde_json::to_string(c).expect("a credential always serialises");
                tx.execute(
                    "INSERT INTO user_credentials (uid, doc) VALUES (?1, ?2) ON CONFLICT(uid) DO UPDATE SET doc = excluded.doc",
                    params![uid, doc],
                )
                .map_err(failed)?;
            }
            let mut seen = tx
                .prepare_cached("INSERT OR IGNORE INTO nonces (nonce, at) VALUES (?1, ?2)")
                .map_err(failed)?;
            for &(at, nonce) in &b.nonces {
                // The nonce's 64 bits as SQLite's signed integer.
                seen.execute(params![nonce as i64, at]).map_err(failed)?;
            }
            if let Some(before) = b.forget_nonces_before {
                tx.execute("DELETE FROM nonces WHERE at < ?1", params![before])
                    .map_err(failed)?;
            }
        }
        tx.commit().map_err(failed)
    }

    /// The nonces recorded at `since` (µs) or later, as `(at, nonce)` in the order they
    /// arrived.
    pub fn nonces(&self, since: i64) -> Result<Vec<(i64, u64)>, DbError> {
        let mut stmt = self
            .conn
            .prepare("SELECT at, nonce FROM nonces WHERE at >= ?1 ORDER BY at")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![since], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
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
        self.write(&Batch {
            nodes: vec![node.clone()],
            ..Batch::default()
        })
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

    /// The nodes administrators left drained or down, with why.
    pub fn node_admin(&self) -> Result<BTreeMap<NodeId, NodeChange>, DbError> {
        Ok(self
            .docs(
                "SELECT node, doc FROM node_admin ORDER BY node",
                "node state",
            )?
            .into_iter()
            .map(|(_, c): (i64, NodeChange)| (c.node, c))
            .collect())
    }

    /// Each user's current credential serial (and expiry), by uid.
    pub fn credentials(&self) -> Result<BTreeMap<u32, Credential>, DbError> {
        Ok(self
            .docs("SELECT uid, doc FROM user_credentials", "credential of uid")?
            .into_iter()
            .map(|(uid, c)| (uid as u32, c))
            .collect())
    }

    /// Every administrator's change to a node, oldest first (drain, down, resume: who, when,
    /// why).
    pub fn node_events(&self) -> Result<Vec<NodeChange>, DbError> {
        Ok(self
            .docs(
                "SELECT seq, doc FROM node_events ORDER BY seq",
                "node event",
            )?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// The `(key, JSON document)` rows `sql` selects, decoded; one that does not decode is
    /// [`DbError::Corrupt`], named `what KEY`.
    fn docs<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        what: &str,
    ) -> Result<Vec<(i64, T)>, DbError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (key, doc) = row.map_err(|e| self.err(e))?;
            let v = serde_json::from_str(&doc).map_err(|e| DbError::Corrupt {
                path: self.path.clone(),
                what: format!("{what} {key}"),
                why: e.to_string(),
            })?;
            out.push((key, v));
        }
        Ok(out)
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

/// What one transaction writes ([`Db::write`]).
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// Job records as [`job_doc`] makes them, by id.
    pub jobs: Vec<(JobId, String)>,
    pub nodes: Vec<NodeRow>,
    /// Administrators' changes to nodes.
    pub node_changes: Vec<NodeChange>,
    /// Users' credentials issued or revoked: the serial (and expiry) now accepted.
    pub credentials: Vec<(u32, Credential)>,
    /// Nonces of requests, with the time (µs) they arrived.
    pub nonces: Vec<(i64, u64)>,
    /// Nonces that arrived before this time (µs) are forgotten.
    pub forget_nonces_before: Option<i64>,
}

/// A job's record as the database stores it.
pub fn job_doc(job: &JobInfo) -> String {
    serde_json::to_string(job).expect("a job record always serialises")
}

/// The error number of the last system call of `conn` that failed (0 if none).
fn last_errno(conn: &Connection) -> i32 {
    // SAFETY: the connection's own handle, alive for the call; sqlite3_system_errno only
    // reads the error number SQLite kept.
    unsafe { rusqlite::ffi::sqlite3_system_errno(conn.handle()) }
}

/// The error of a write to the database at `path` that failed with `cause` (and system error
/// `errno`, 0 if unknown): a full disk, a read-only file system or an I/O error of the
/// directory that holds it, said so with what to do. The error number says which; without
/// one, the file system is asked (statvfs).
fn write_error(path: &str, errno: i32, cause: rusqlite::Error) -> DbError {
    let dir = Path::new(path).parent().unwrap_or(Path::new("."));
    let state = match errno {
        libc::ENOSPC | libc::EDQUOT => Some(FsState::Full),
        libc::EROFS => Some(FsState::ReadOnly),
        _ => fs_state(dir),
    };
    let why = match state {
        Some(FsState::ReadOnly) => format!(
            "{} is on a read-only file system ({cause}); remount it read-write (or move the state directory) and ask again",
            dir.display()
        ),
        Some(FsState::Full) => format!(
            "the file system of {} is full ({cause}); free space on it and ask again",
            dir.display()
        ),
        _ => format!(
            "{cause}{}; check the disk of {} (free space, how it is mounted, the kernel log) and ask again",
            if errno != 0 {
                format!(" ({})", std::io::Error::from_raw_os_error(errno))
            } else {
                String::new()
            },
            dir.display()
        ),
    };
    DbError::Write {
        path: path.to_string(),
        why,
    }
}

/// Records written before the machine manager kept the ledger's `JobRecord` (flat fields,
/// microseconds): read so that an older state directory keeps its history.
mod legacy {
    use cosched_core::{Dur, JobId, JobRecord, Time};
    use serde::Deserialize;

    use crate::parse_pes;
    use cosched_proto::proto::{JobInfo, JobState, Placement};

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
            mem: None,
            spread: None,
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
            steps: Vec::new(),
            partition: None,
            tasks: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch the database cannot take is written not at all — no
    /// record and no nonce of it — and the error names the database; the same connection
    /// takes the next batch once there is room. SQLite's page limit stands for the full disk.
    #[test]
    fn a_batch_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mm.db");
        let db = Db::open(&path).unwrap();
        let doc = |id: u64| (JobId(id), format!("{{\"pad\":\"{}\"}}", "x".repeat(4000)));
        db.write(&Batch {
            jobs: vec![doc(1)],
            ..Batch::default()
        })
        .unwrap();
        let pages: i64 = db
            .conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        db.conn
            .pragma_update(None, "max_page_count", pages + 2)
            .unwrap();
        let big = Batch {
            jobs: (2..40).map(doc).collect(),
            nonces: vec![(5, 77)],
            ..Batch::default()
        };
        let e = db.write(&big).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        let ids: Vec<i64> = db
            .conn
            .prepare("SELECT id FROM jobs")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ids, vec![1], "nothing of the refused batch is written");
        assert!(db.nonces(0).unwrap().is_empty());
        db.conn
            .pragma_update(None, "max_page_count", 1_000_000)
            .unwrap();
        db.write(&big).unwrap();
        assert_eq!(db.nonces(0).unwrap(), vec![(5, 77)]);
    }

    /// Nonces are read back in arrival order from a time on, and forgotten before one.
    #[test]
    fn nonces_are_read_back_and_forgotten_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("mm.db")).unwrap();
        let nonces = vec![(10, u64::MAX), (20, 2), (30, 3)];
        db.write(&Batch {
            nonces,
            ..Batch::default()
        })
        .unwrap();
        assert_eq!(db.nonces(15).unwrap(), vec![(20, 2), (30, 3)]);
        assert_eq!(db.nonces(0).unwrap()[0], (10, u64::MAX), "all 64 bits kept");
        db.write(&Batch {
            forget_nonces_before: Some(25),
            ..Batch::default()
        })
        .unwrap();
        assert_eq!(db.nonces(0).unwrap(), vec![(30, 3)]);
    }
}
