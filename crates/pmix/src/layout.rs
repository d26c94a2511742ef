//! A job's placement (which ranks run on which node) and the namespace registration it makes:
//! the keys Open MPI, MPICH and OpenPMIx's own client read at start-up, computed without I/O
//! so the table can be tested and documented (docs/daemons.md, "PMIx").
#![forbid(unsafe_code)]

use std::collections::BTreeSet;

use crate::error::Error;

/// One node of a job: its host name (as the ranks will see it) and its ranks, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobNode {
    pub host: String,
    pub ranks: Vec<u32>,
}

/// A job as PMIx sees it: one application whose ranks 0..N are spread over nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobLayout {
    nspace: String,
    job_id: String,
    nodes: Vec<JobNode>,
    size: u32,
    universe: u32,
}

/// Namespaces are at most 255 bytes (PMIX_MAX_NSLEN).
const NSPACE_MAX: usize = 255;

impl JobLayout {
    /// The layout of namespace `nspace` (the job's id is the namespace too, until
    /// [`JobLayout::with_job_id`]): every rank of 0..N on exactly one node, nodes with distinct
    /// host names.
    pub fn new(nspace: impl Into<String>, nodes: Vec<JobNode>) -> Result<JobLayout, Error> {
        let nspace = nspace.into();
        let bad = |problem: String| Error::Layout {
            nspace: nspace.clone(),
            problem,
        };
        if nspace.is_empty() || nspace.len() > NSPACE_MAX || nspace.contains('\0') {
            return Err(bad(format!(
                "a namespace is 1 to {NSPACE_MAX} bytes without NUL"
            )));
        }
        if nodes.is_empty() {
            return Err(bad("a job has at least one node".into()));
        }
        let mut hosts = BTreeSet::new();
        let mut ranks = BTreeSet::new();
        for node in &nodes {
            if node.host.is_empty() || node.host.contains([',', ';', '\0']) {
                return Err(bad(format!(
                    "host name {:?} is empty or contains ',', ';' or NUL",
                    node.host
                )));
            }
            if !hosts.insert(node.host.as_str()) {
                return Err(bad(format!("host {:?} is listed twice", node.host)));
            }
            if node.ranks.is_empty() {
                return Err(bad(format!("host {:?} has no ranks", node.host)));
            }
            for &r in &node.ranks {
                if !ranks.insert(r) {
                    return Err(bad(format!("rank {r} is placed twice")));
                }
            }
        }
        let size = ranks.len() as u32;
        if ranks.last() != Some(&(size - 1)) {
            return Err(bad(format!(
                "the ranks are not 0..{size}: {} is missing",
                (0..size).find(|r| !ranks.contains(r)).unwrap_or(size)
            )));
        }
        Ok(JobLayout {
            job_id: nspace.clone(),
            nspace,
            nodes,
            size,
            universe: size,
        })
    }

    /// The job's id as the resource manager names it (`PMIX_JOBID`).
    pub fn with_job_id(mut self, job_id: impl Into<String>) -> JobLayout {
        self.job_id = job_id.into();
        self
    }

    /// The universe size (`PMIX_UNIV_SIZE`, `MPI_UNIVERSE_SIZE`): the slots the job could
    /// use; never below the job's size.
    pub fn with_universe_size(mut self, universe: u32) -> JobLayout {
        self.universe = universe.max(self.size);
        self
    }

    pub fn nspace(&self) -> &str {
        &self.nspace
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn nodes(&self) -> &[JobNode] {
        &self.nodes
    }

    /// The index (node id) of `host` in the job.
    pub fn node_id(&self, host: &str) -> Result<usize, Error> {
        self.nodes
            .iter()
            .position(|n| n.host == host)
            .ok_or_else(|| Error::NotANode {
                nspace: self.nspace.clone(),
                node: host.into(),
                nodes: self
                    .nodes
                    .iter()
                    .map(|n| n.host.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
            })
    }

    /// The ranks of node `node` (by id).
    pub fn local_ranks(&self, node: usize) -> &[u32] {
        &self.nodes[node].ranks
    }

    /// The records registering this namespace on node `node` (by id), with the job's
    /// scratch directory on that node if it has one.
    pub fn registration(&self, node: usize, tmpdir: Option<&str>) -> Vec<Info> {
        let here = &self.nodes[node];
        let hosts: Vec<&str> = self.nodes.iter().map(|n| n.host.as_str()).collect();
        let ppn: Vec<String> = self.nodes.iter().map(|n| list(&n.ranks, ",")).collect();
        let mut job = vec![
            Info::new(keys::JOBID, Value::Str(self.job_id.clone())),
            Info::new(keys::JOB_SIZE, Value::U32(self.size)),
            Info::new(keys::MAX_PROCS, Value::U32(self.universe)),
            Info::new(keys::UNIV_SIZE, Value::U32(self.universe)),
            Info::new(keys::JOB_NUM_APPS, Value::U32(1)),
            Info::new(keys::APPNUM, Value::U32(0)),
            Info::new(keys::NPROC_OFFSET, Value::Rank(0)),
            Info::new(keys::NUM_NODES, Value::U32(self.nodes.len() as u32)),
            Info::new(keys::NODE_MAP, Value::NodeRegex(hosts.join(","))),
            Info::new(keys::PROC_MAP, Value::ProcRegex(ppn.join(";"))),
            Info::new(keys::SPAWNED, Value::Bool(false)),
            Info::new(keys::TDIR_RMCLEAN, Value::Bool(true)),
            // This node, as a job-level fact (what OpenPMIx answers for the wildcard rank).
            Info::new(keys::HOSTNAME, Value::Str(here.host.clone())),
            Info::new(keys::NODEID, Value::U32(node as u32)),
            Info::new(keys::LOCAL_SIZE, Value::U32(here.ranks.len() as u32)),
            Info::new(keys::LOCAL_PEERS, Value::Str(list(&here.ranks, ","))),
            Info::new(keys::LOCALLDR, Value::Rank(min(&here.ranks))),
            Info::new(keys::NODE_SIZE, Value::U32(here.ranks.len() as u32)),
        ];
        if let Some(dir) = tmpdir {
            job.push(Info::new(keys::TMPDIR, Value::Str(dir.into())));
            job.push(Info::new(keys::NSDIR, Value::Str(dir.into())));
        }
        job.push(Info::new(
            keys::APP_INFO_ARRAY,
            Value::Array(vec![
                Info::new(keys::APPNUM, Value::U32(0)),
                Info::new(keys::APP_SIZE, Value::U32(self.size)),
                Info::new(keys::APPLDR, Value::Rank(0)),
            ]),
        ));
        for (id, n) in self.nodes.iter().enumerate() {
            job.push(Info::new(
                keys::NODE_INFO_ARRAY,
                Value::Array(vec![
                    Info::new(keys::HOSTNAME, Value::Str(n.host.clone())),
                    Info::new(keys::NODEID, Value::U32(id as u32)),
                    Info::new(keys::LOCAL_SIZE, Value::U32(n.ranks.len() as u32)),
                    Info::new(keys::LOCAL_PEERS, Value::Str(list(&n.ranks, ","))),
                    Info::new(keys::LOCALLDR, Value::Rank(min(&n.ranks))),
                    Info::new(keys::NODE_SIZE, Value::U32(n.ranks.len() as u32)),
                ]),
            ));
        }
        for (id, n) in self.nodes.iter().enumerate() {
            for (local, &rank) in n.ranks.iter().enumerate() {
                job.push(Info::new(
                    keys::PROC_INFO_ARRAY,
                    Value::Array(vec![
                        Info::new(keys::RANK, Value::Rank(rank)),
                        Info::new(keys::APPNUM, Value::U32(0)),
                        Info::new(keys::APP_RANK, Value::Rank(rank)),
                        Info::new(keys::GLOBAL_RANK, Value::Rank(rank)),
                        Info::new(keys::LOCAL_RANK, Value::U16(local as u16)),
                        // Ranks of other jobs on the node are the node manager's to count;
                        // within the job, the node rank is the local rank.
                        Info::new(keys::NODE_RANK, Value::U16(local as u16)),
                        Info::new(keys::NODEID, Value::U32(id as u32)),
                        Info::new(keys::HOSTNAME, Value::Str(n.host.clone())),
                        Info::new(keys::REINCARNATION, Value::U32(0)),
                    ]),
                ));
            }
        }
        job
    }
}

fn list(ranks: &[u32], sep: &str) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

fn min(ranks: &[u32]) -> u32 {
    ranks.iter().copied().min().unwrap_or(0)
}

/// One registration record: a PMIx key and its typed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub key: &'static str,
    pub value: Value,
}

impl Info {
    fn new(key: &'static str, value: Value) -> Info {
        Info { key, value }
    }
}

/// The value types a registration uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(String),
    U32(u32),
    U16(u16),
    Rank(u32),
    Bool(bool),
    /// A comma-separated host list, turned into OpenPMIx's regex (`PMIx_generate_regex`).
    NodeRegex(String),
    /// Ranks per node (`0,1;2,3`), turned into OpenPMIx's regex (`PMIx_generate_ppn`).
    ProcRegex(String),
    /// An array of records (node, application and process arrays).
    Array(Vec<Info>),
}

/// The PMIx keys registered, named as their `PMIX_*` macros in pmix_common.h.
pub mod keys {
    pub const JOBID: &str = "pmix.jobid";
    pub const JOB_SIZE: &str = "pmix.job.size";
    pub const UNIV_SIZE: &str = "pmix.univ.size";
    pub const MAX_PROCS: &str = "pmix.max.size";
    pub const JOB_NUM_APPS: &str = "pmix.job.napps";
    pub const APPNUM: &str = "pmix.appnum";
    pub const APP_SIZE: &str = "pmix.app.size";
    pub const APPLDR: &str = "pmix.aldr";
    pub const APP_RANK: &str = "pmix.apprank";
    pub const GLOBAL_RANK: &str = "pmix.grank";
    pub const NPROC_OFFSET: &str = "pmix.offset";
    pub const NUM_NODES: &str = "pmix.num.nodes";
    pub const NODE_MAP: &str = "pmix.nmap";
    pub const PROC_MAP: &str = "pmix.pmap";
    pub const SPAWNED: &str = "pmix.spawned";
    pub const TDIR_RMCLEAN: &str = "pmix.tdir.rmclean";
    pub const TMPDIR: &str = "pmix.tmpdir";
    pub const NSDIR: &str = "pmix.nsdir";
    pub const HOSTNAME: &str = "pmix.hname";
    pub const NODEID: &str = "pmix.nodeid";
    pub const LOCAL_SIZE: &str = "pmix.local.size";
    pub const LOCAL_PEERS: &str = "pmix.lpeers";
    pub const LOCALLDR: &str = "pmix.lldr";
    pub const NODE_SIZE: &str = "pmix.node.size";
    pub const RANK: &str = "pmix.rank";
    pub const LOCAL_RANK: &str = "pmix.lrank";
    pub const NODE_RANK: &str = "pmix.nrank";
    pub const REINCARNATION: &str = "pmix.reinc";
    pub const APP_INFO_ARRAY: &str = "pmix.app.arr";
    pub const NODE_INFO_ARRAY: &str = "pmix.node.arr";
    pub const PROC_INFO_ARRAY: &str = "pmix.pdata";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nodes() -> JobLayout {
        JobLayout::new(
            "cosched.7",
            vec![
                JobNode {
                    host: "n0".into(),
                    ranks: vec![0, 1],
                },
                JobNode {
                    host: "n1".into(),
                    ranks: vec![2, 3],
                },
            ],
        )
        .unwrap()
    }

    fn get<'a>(infos: &'a [Info], key: &str) -> Vec<&'a Value> {
        infos
            .iter()
            .filter(|i| i.key == key)
            .map(|i| &i.value)
            .collect()
    }

    #[test]
    fn registration_describes_this_node_and_every_rank() {
        let layout = two_nodes().with_universe_size(6).with_job_id("7");
        let infos = layout.registration(1, Some("/tmp/j7"));
        assert_eq!(get(&infos, keys::JOB_SIZE), [&Value::U32(4)]);
        assert_eq!(get(&infos, keys::UNIV_SIZE), [&Value::U32(6)]);
        assert_eq!(get(&infos, keys::JOBID), [&Value::Str("7".into())]);
        assert_eq!(
            get(&infos, keys::NODE_MAP),
            [&Value::NodeRegex("n0,n1".into())]
        );
        assert_eq!(
            get(&infos, keys::PROC_MAP),
            [&Value::ProcRegex("0,1;2,3".into())]
        );
        assert_eq!(get(&infos, keys::LOCAL_PEERS), [&Value::Str("2,3".into())]);
        assert_eq!(get(&infos, keys::LOCALLDR), [&Value::Rank(2)]);
        assert_eq!(get(&infos, keys::NODEID), [&Value::U32(1)]);
        assert_eq!(get(&infos, keys::TMPDIR), [&Value::Str("/tmp/j7".into())]);
        assert_eq!(get(&infos, keys::NODE_INFO_ARRAY).len(), 2);
        let procs = get(&infos, keys::PROC_INFO_ARRAY);
        assert_eq!(procs.len(), 4);
        // Rank 3 is the second rank of node 1.
        let Value::Array(rank3) = procs[3] else {
            panic!("a process record is an array")
        };
        assert_eq!(get(rank3, keys::RANK), [&Value::Rank(3)]);
        assert_eq!(get(rank3, keys::LOCAL_RANK), [&Value::U16(1)]);
        assert_eq!(get(rank3, keys::NODEID), [&Value::U32(1)]);
        assert_eq!(get(rank3, keys::HOSTNAME), [&Value::Str("n1".into())]);
    }

    #[test]
    fn universe_size_is_never_below_the_job_size() {
        let layout = two_nodes().with_universe_size(1);
        assert_eq!(
            get(&layout.registration(0, None), keys::UNIV_SIZE),
            [&Value::U32(4)]
        );
    }

    #[test]
    fn layouts_that_cannot_be_registered_are_refused_with_the_reason() {
        let node = |host: &str, ranks: Vec<u32>| JobNode {
            host: host.into(),
            ranks,
        };
        let err = |nodes| JobLayout::new("j", nodes).unwrap_err().to_string();
        assert!(err(vec![node("a", vec![0]), node("a", vec![1])]).contains("listed twice"));
        assert!(err(vec![node("a", vec![0, 2])]).contains("1 is missing"));
        assert!(err(vec![node("a", vec![0]), node("b", vec![0])]).contains("placed twice"));
        assert!(err(vec![node("a,b", vec![0])]).contains("contains ','"));
        assert!(err(vec![]).contains("at least one node"));
        assert!(JobLayout::new("", vec![node("a", vec![0])]).is_err());
    }

    #[test]
    fn a_host_outside_the_job_is_named_with_the_jobs_nodes() {
        let e = two_nodes().node_id("n9").unwrap_err().to_string();
        assert!(e.contains("\"n9\"") && e.contains("n0,n1"), "{e}");
    }
}
