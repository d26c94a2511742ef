//! The node manager's side of communication monitoring (crates/monitor, docs/monitor.md):
//! at launch it creates the job's ring on the node (one slot per local rank) and gives each
//! rank its file and slot in the environment; on request it reads every ring into
//! [`NodeMonitor`]. When a job is forgotten its ranks' last totals are kept (the last
//! [`KEEP_ENDED`] jobs), so a finished job can still be inspected.
//!
//! The spin time of spin-then-block is written here too (`set_spin`): the initial one at
//! creation, later whatever the node-level scheme decides.

use std::collections::{BTreeMap, HashMap, VecDeque};

use cosched_core::JobId;
use cosched_monitor::ring::Cursor;
use cosched_monitor::{Kind, Record, Ring};

use cosched_proto::dir::Dir;
use cosched_proto::proto::{LastComm, NodeMonitor, ProcMonitor};

/// Ended jobs whose totals are kept.
pub const KEEP_ENDED: usize = 32;

/// Spin time of a new ring: 0, block at once, what an ordinary blocking receive does (local
/// scheduling); the node-level scheme may change it.
pub const DEFAULT_SPIN_NS: u64 = 0;

#[derive(Default)]
pub struct Monitors {
    /// Each live job's ring, its job directory and the ring's name there.
    live: HashMap<JobId, (Ring, Dir, String)>,
    /// Where [`Monitors::records_since`] stopped reading, per job.
    cursors: HashMap<JobId, Cursor>,
    ended: VecDeque<Vec<ProcMonitor>>,
}

impl Monitors {
    /// Creates the ring of `job` in its job directory `dir` for the local `ranks` (in slot
    /// order) and returns the environment each rank gets (by position in `ranks`); empty
    /// when the ring cannot be made (the job runs unmonitored, and the node manager says why).
    ///
    /// The directory is the job's user's, who may have planted anything at the ring's names
    /// (a link there made root truncate and give away the file it led
    /// to). So the file is made relative to the node manager's handle of the directory,
    /// anew (`O_EXCL`, never through a link), given to the user through its descriptor,
    /// and renamed into place within the same handle.
    pub fn prepare(
        &mut self,
        job: JobId,
        dir: &Dir,
        node: &str,
        ranks: &[u32],
        owner: Option<(u32, u32)>,
    ) -> Vec<Vec<(String, String)>> {
        let name = format!("monitor-{node}.ring");
        let tmp = format!("monitor-{node}.tmp");
        let ring = (|| {
            let f = dir.replace(&tmp, 0o600)?;
            // The ranks write it: it is theirs when they run as the job's user.
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
            }
            let ring = Ring::init_file(
                &f,
                job.0,
                node,
                ranks,
                cosched_monitor::ring::DEFAULT_CAPACITY,
                DEFAULT_SPIN_NS,
            )?;
            dir.rename(&tmp, &name)?;
            Ok::<_, std::io::Error>((ring, dir.try_clone()?))
        })();
        let path = dir.join(&name);
        match ring {
            Ok((ring, dir)) => {
                self.live.insert(job, (ring, dir, name));
                (0..ranks.len())
                    .map(|slot| {
                        vec![
                            (
                                cosched_monitor::ENV_RING.to_string(),
                                path.display().to_string(),
                            ),
                            (cosched_monitor::ENV_SLOT.to_string(), slot.to_string()),
                        ]
                    })
                    .collect()
            }
            Err(e) => {
                tracing::warn!(
                    "nm {node}: job {job}: no communication monitor ({}: {e})",
                    path.display()
                );
                vec![Vec::new(); ranks.len()]
            }
        }
    }

    /// Sets the spin time of `job`'s ranks (read at their next wait).
    pub fn set_spin(&self, job: JobId, ns: u64) {
        if let Some((ring, ..)) = self.live.get(&job) {
            ring.set_spin_ns(ns);
        }
    }

    /// The communications `job`'s local ranks recorded since the last call, as (rank, record)
    /// in order per rank, and how many were overwritten before they could be read: what a
    /// node-level scheme (its FCS statistics) consumes at each heartbeat.
    pub fn records_since(&mut self, job: JobId) -> (Vec<(u32, Record)>, u64) {
        let Some((ring, ..)) = self.live.get(&job) else {
            return (Vec::new(), 0);
        };
        let cursor = self.cursors.entry(job).or_insert_with(|| Cursor::new(ring));
        let (recs, lost) = cursor.read(ring);
        let ranks: Vec<u32> = ring.stats().iter().map(|s| s.rank).collect();
        (
            recs.into_iter().map(|(slot, r)| (ranks[slot], r)).collect(),
            lost,
        )
    }

    /// The job ended on this node: its totals are kept, its ring unmapped and removed.
    pub fn forget(&mut self, job: JobId) {
        self.cursors.remove(&job);
        if let Some((ring, dir, name)) = self.live.remove(&job) {
            let mut procs = read(job, &ring);
            for p in &mut procs {
                p.live = false;
            }
            self.ended.push_back(procs);
            while self.ended.len() > KEEP_ENDED {
                self.ended.pop_front();
            }
            drop(ring);
            let _ = dir.remove_file(name);
        }
    }

    /// Everything recorded: the live jobs', then the ended ones'.
    pub fn report(&self, node: &str) -> NodeMonitor {
        let mut live: Vec<_> = self.live.iter().collect();
        live.sort_by_key(|(j, _)| **j);
        let mut procs: Vec<ProcMonitor> = live
            .into_iter()
            .flat_map(|(&job, (ring, ..))| read(job, ring))
            .collect();
        procs.extend(self.ended.iter().flatten().cloned());
        NodeMonitor {
            node: node.to_string(),
            procs,
            ..Default::default()
        }
    }
}

fn read(job: JobId, ring: &Ring) -> Vec<ProcMonitor> {
    let now = cosched_monitor::now_ns();
    let spin_ns = ring.spin_ns();
    ring.stats()
        .into_iter()
        .map(|s| ProcMonitor {
            job,
            rank: s.rank,
            pid: s.pid,
            live: true,
            state: s.state.name().to_string(),
            count: s.count,
            bytes: s.bytes,
            comm_ns: s.comm_ns,
            waits: s.waits,
            blocks: s.blocks,
            spun_ns: s.spun_ns,
            blocked_ns: s.blocked_ns,
            spin_ns,
            by_kind: Kind::ALL
                .iter()
                .filter(|&&k| s.of(k) > 0)
                .map(|&k| (k.name().to_string(), s.of(k)))
                .collect::<BTreeMap<_, _>>(),
            last: s.last.map(|r| LastComm {
                kind: r.kind.name().to_string(),
                peer: r.peer,
                bytes: r.bytes,
                duration_ns: r.end_ns - r.start_ns,
                ago_ns: now.saturating_sub(r.end_ns),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// links planted at both names of the ring (its
    /// temporary one and its own) are replaced, never followed: an existing file they lead
    /// to keeps its bytes, a missing one is not created.
    #[test]
    fn monitor_ring_is_not_created_through_a_planted_link() {
        let tmp = tempfile::Builder::new()
            .prefix("cosched-nm-monitor-link-")
            .tempdir()
            .unwrap();
        let jobdir = tmp.path().join("job");
        std::fs::create_dir(&jobdir).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let missing = tmp.path().join("ld.so.preload");
        std::os::unix::fs::symlink(&victim, jobdir.join("monitor-n0.tmp")).unwrap();
        std::os::unix::fs::symlink(&missing, jobdir.join("monitor-n0.ring")).unwrap();
        let mut m = Monitors::default();
        let env = m.prepare(JobId(1), &Dir::open(&jobdir).unwrap(), "n0", &[0], None);
        assert!(!env[0].is_empty(), "the job is monitored");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!missing.exists(), "the link's target was created");
        let ring = std::fs::symlink_metadata(jobdir.join("monitor-n0.ring")).unwrap();
        assert!(ring.is_file(), "the ring is a file of its own");
        assert!(!jobdir.join("monitor-n0.tmp").exists());
    }

    #[test]
    fn a_rank_attached_through_its_environment_is_reported_live_then_ended() {
        let dir = std::env::temp_dir().join(format!(
            "cosched-nm-monitor-{}-{}",
            std::process::id(),
            cosched_monitor::now_ns()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let handle = Dir::open(&dir).unwrap();
        let mut m = Monitors::default();
        let env = m.prepare(JobId(3), &handle, "n1", &[4, 5], None);
        assert_eq!(env.len(), 2);
        let get = |k: &str| env[1].iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get(cosched_monitor::ENV_SLOT), "1");
        let path = PathBuf::from(get(cosched_monitor::ENV_RING));
        let rank5 = cosched_monitor::Monitor::attach(&path, 1).unwrap();
        rank5.record(Kind::Allreduce, -1, 8, 100, 250);
        rank5.record(Kind::Send, 4, 64, 300, 310);
        m.set_spin(JobId(3), 5_000);
        let (recs, lost) = m.records_since(JobId(3));
        assert_eq!(lost, 0);
        assert_eq!(
            recs.iter()
                .map(|(r, rec)| (*r, rec.kind))
                .collect::<Vec<_>>(),
            vec![(5, Kind::Allreduce), (5, Kind::Send)]
        );
        assert!(m.records_since(JobId(3)).0.is_empty(), "each record once");
        let r = m.report("n1");
        assert_eq!(r.node, "n1");
        assert_eq!(r.procs.len(), 2);
        let p = &r.procs[1];
        assert_eq!((p.rank, p.count, p.bytes, p.comm_ns), (5, 2, 72, 160));
        assert_eq!(p.by_kind.get("allreduce"), Some(&1));
        assert_eq!(p.spin_ns, 5_000);
        assert!(p.live && p.pid == std::process::id());
        assert_eq!(p.last.as_ref().unwrap().peer, 4);
        assert_eq!(r.procs[0].pid, 0, "rank 4 never attached");
        m.forget(JobId(3));
        assert!(!path.exists(), "the ring file goes with the job");
        let r = m.report("n1");
        assert_eq!(r.procs.len(), 2);
        assert!(r.procs.iter().all(|p| !p.live));
        assert_eq!(r.procs[1].count, 2, "the final totals are kept");
        for j in 10..10 + KEEP_ENDED as u64 {
            m.prepare(JobId(j), &handle, "n1", &[0], None);
            m.forget(JobId(j));
        }
        assert!(m.report("n1").procs.iter().all(|p| p.job != JobId(3)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
