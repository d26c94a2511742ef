//! The shell's side of the database: a client's change written in one transaction before it
//! takes effect (see [`super::changes`]), the records the core changes on its own written at
//! each step, and what the disk refused kept and written again until it takes it, so a full
//! or read-only disk costs the machine manager neither its records nor its life.
//!
//! Each step's records go in one transaction. A record equal to what a change of the same
//! step wrote already (a submission that stays queued) is not written twice.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use cosched_core::{JobId, NodeId};

use super::replays::forgotten_before;
use crate::db::{Batch, Db, DbError, NodeRow, job_doc};
use cosched_proto::proto::{JobInfo, NodeChange, Stamp};
use cosched_proto::user_key::Credential;

/// While the disk refuses writes, the records kept are tried again at most this often.
const RETRY_EVERY: Duration = Duration::from_millis(250);

pub(super) struct Store {
    db: Db,
    /// Records and nonces to write at the next flush: the newest version of each record,
    /// also those the disk refused so far.
    jobs: BTreeMap<JobId, String>,
    nodes: BTreeMap<NodeId, NodeRow>,
    nonces: Vec<(i64, u64)>,
    /// Documents the changes of this step wrote: the step's record of such a job is written
    /// only if it differs.
    written: HashMap<JobId, String>,
    /// Why the last flush failed, while it fails; and when to try again.
    failing: Option<(String, Instant)>,
}

impl Store {
    pub(super) fn new(db: Db) -> Store {
        Store {
            db,
            jobs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            nonces: Vec::new(),
            written: HashMap::new(),
            failing: None,
        }
    }

    /// Writes a client's change — its records and the request's nonce, arriving at `now_us`
    /// — in one transaction. On an error nothing of it is written; the message names the
    /// database and what to do, for the client.
    pub(super) fn change(
        &mut self,
        jobs: &[JobInfo],
        nodes: &[NodeChange],
        stamp: Stamp,
        now_us: i64,
    ) -> Result<(), String> {
        let docs: Vec<(JobId, String)> = jobs.iter().map(|j| (j.id(), job_doc(j))).collect();
        let batch = Batch {
            jobs: docs.clone(),
            node_changes: nodes.to_vec(),
            nonces: vec![(now_us, stamp.nonce)],
            forget_nonces_before: Some(forgotten_before(now_us)),
            ..Batch::default()
        };
        self.db.write(&batch).map_err(|e| e.to_string())?;
        for (id, doc) in docs {
            // Newer than a version the disk refused before: that one must not follow it.
            self.jobs.remove(&id);
            self.written.insert(id, doc);
        }
        Ok(())
    }

    /// Writes user `uid`'s credential serial now; on an error nothing is written and the
    /// message names the database and what to do.
    pub(super) fn credential(&mut self, uid: u32, c: Credential) -> Result<(), String> {
        let batch = Batch {
            credentials: vec![(uid, c)],
            ..Batch::default()
        };
        self.db.write(&batch).map_err(|e| e.to_string())
    }

    /// A job's record to write at the next flush.
    pub(super) fn job(&mut self, info: &JobInfo) {
        let doc = job_doc(info);
        if self.written.get(&info.id()) == Some(&doc) {
            return;
        }
        self.jobs.insert(info.id(), doc);
    }

    pub(super) fn node(&mut self, row: NodeRow) {
        self.nodes.insert(row.id, row);
    }

    /// The nonce of a request that changes state without a change of its own (a node's
    /// registration, a step of a file broadcast), written at the next flush.
    pub(super) fn nonce(&mut self, stamp: Stamp, now_us: i64) {
        self.nonces.push((now_us, stamp.nonce));
    }

    /// The job's record as last written or to be written: one the disk refused is newer
    /// than the database's.
    pub(super) fn read_job(&self, id: JobId) -> Result<Option<JobInfo>, DbError> {
        match self.jobs.get(&id) {
            Some(doc) => Ok(serde_json::from_str(doc).ok()),
            None => self.db.job(id),
        }
    }

    /// Writes what this step changed (and what the disk refused before) in one transaction.
    /// While the disk refuses, the records are kept and tried again every [`RETRY_EVERY`];
    /// the log says when writing stops and when it resumes, not at every try.
    pub(super) fn flush(&mut self, now_us: i64) {
        self.written.clear();
        if self.jobs.is_empty() && self.nodes.is_empty() && self.nonces.is_empty() {
            return;
        }
        if let Some((_, next)) = &self.failing
            && Instant::now() < *next
        {
            return;
        }
        let batch = Batch {
            jobs: std::mem::take(&mut self.jobs).into_iter().collect(),
            nodes: std::mem::take(&mut self.nodes).into_values().collect(),
            nonces: std::mem::take(&mut self.nonces),
            forget_nonces_before: Some(forgotten_before(now_us)),
            ..Batch::default()
        };
        match self.db.write(&batch) {
            Ok(()) => {
                if self.failing.take().is_some() {
                    tracing::info!(
                        "mm: the database takes writes again; the records kept meanwhile are written"
                    );
                }
            }
            Err(e) => {
                if self.failing.is_none() {
                    tracing::warn!(
                        "mm: {e}; {} records are kept in memory and written once the disk takes them (a client's change is refused while the disk refuses it)",
                        batch.jobs.len() + batch.nodes.len()
                    );
                }
                self.failing = Some((e.to_string(), Instant::now() + RETRY_EVERY));
                self.jobs = batch.jobs.into_iter().collect();
                self.nodes = batch.nodes.into_iter().map(|n| (n.id, n)).collect();
                self.nonces = batch.nonces;
            }
        }
    }
}
