//! The per-job PMIx helper: one process per job step per node, run as the job's user, that
//! holds the job's PMIx [`Server`] for the node manager and talks to it over one socket in
//! lines of JSON (docs/daemons.md, "PMIx": a server per job, because OpenPMIx 4 over TCP
//! trusts the ids a client claims, and because OpenPMIx allows one server per process).
//!
//! The node manager starts it (`cosched pmix-helper`) with the socket's descriptor in
//! `PMI_FD`, writes [`ToHelper::Setup`], and reads [`FromHelper::Ready`] with each local
//! rank's environment before it starts any rank. After that the helper reports what the
//! server asks ([`FromHelper::Fence`] of a job on several nodes, [`FromHelper::Abort`],
//! [`FromHelper::Connected`], [`FromHelper::Refused`], the name service's
//! [`FromHelper::Names`], a direct modex's [`FromHelper::Want`]) and completes fences, name
//! requests and direct modex with what the node manager sends down ([`ToHelper::FenceDone`],
//! [`ToHelper::Names`], [`ToHelper::Have`]); it gives its local ranks' data to other nodes
//! ([`ToHelper::Give`], [`FromHelper::Given`]). The node manager closing the
//! socket ends the helper: the job left the node.
//!
//! The protocol types are plain data so the node manager's core can be tested without a
//! helper; [`run`] is the helper itself.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::PathBuf;
use std::sync::mpsc;

use cosched_core::JobId;
use cosched_proto::names::{NameAnswer, NameOp};
use serde::{Deserialize, Serialize};

use crate::{
    Event, JobLayout, JobNode, LookupReply, ModexReply, OPEN_MPI_OVERSUBSCRIBED, OpReply, Proc,
    Published, Server, Status,
};

/// What the helper needs to serve a job on its node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setup {
    /// The job's namespace (`cosched.<job id>`).
    pub nspace: String,
    /// The job's id as the ranks see it (`PMIX_JOBID`).
    pub job_id: String,
    /// This node's name among `nodes`.
    pub host: String,
    /// Every node of the job, in the machine manager's order, with its ranks.
    pub nodes: Vec<(String, Vec<u32>)>,
    /// The server's own directory (made by the helper, private, removed at its end).
    pub dir: PathBuf,
    /// More ranks here than cores: Open MPI is told to yield when idle, as `mpirun` does.
    pub oversubscribed: bool,
    /// `PMIX_UNIV_SIZE` (`MPI_UNIVERSE_SIZE`): the PEs of the job's allocation (never below
    /// the job's size).
    #[serde(default)]
    pub universe: u32,
}

/// Each local rank's PMIx environment, by rank.
pub type RankEnvs = Vec<(u32, Vec<(String, String)>)>;

/// From the node manager to the helper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToHelper {
    Setup(Setup),
    /// Fence `seq` (the helper's numbering, 1, 2, ...) of the job gathered every node's
    /// contribution: `data` is their concatenation.
    FenceDone {
        seq: u64,
        data: Vec<u8>,
    },
    /// Fence `seq` cannot complete (a node of the job is gone): its ranks' fence fails.
    FenceFailed {
        seq: u64,
    },
    /// The name service's answer to the helper's request `tag`, as the machine manager gave
    /// it.
    Names {
        tag: u64,
        answer: NameAnswer,
    },
    /// The data of another node's rank that the helper's direct modex `tag` asked for, or
    /// the PMIx status it failed with.
    Have {
        tag: u64,
        data: Result<Vec<u8>, i32>,
    },
    /// Node `from` asks for the data of local rank `rank` (its direct modex `req`): answered
    /// by [`FromHelper::Given`] with the same `from` and `req`.
    Give {
        from: u32,
        req: u64,
        rank: u32,
    },
}

/// The PMIx namespace of `job`, as its ranks and the ranks of other jobs see it.
pub fn nspace(job: JobId) -> String {
    format!("cosched.{}", job.0)
}

/// From the helper to the node manager.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromHelper {
    /// The server is up and the job registered: each local rank's PMIx environment.
    Ready { envs: RankEnvs },
    /// The server could not be started or the job not registered.
    Failed { why: String },
    /// This node's contribution to the job's fence `seq` (only for a job on several nodes:
    /// one node's fence completes in the helper).
    Fence { seq: u64, data: Vec<u8> },
    /// A rank called `PMIx_Abort` (`MPI_Abort`): it exits by itself with `status`.
    Abort {
        rank: u32,
        status: i32,
        message: String,
    },
    /// A rank connected to the server (its `PMIx_Init`).
    Connected { rank: u32 },
    /// A request the server refused; `explain` is for the job's output.
    Refused { rank: Option<u32>, explain: String },
    /// Rank `rank` asks the name service (its request as the node manager carries it on to
    /// the machine manager); answered by [`ToHelper::Names`] with `tag`.
    Names {
        tag: u64,
        rank: u32,
        request: NameOp,
    },
    /// A local rank wants the data of rank `rank` of another node (direct modex: a key the
    /// fence did not bring); answered by [`ToHelper::Have`] with `tag`.
    Want { tag: u64, rank: u32 },
    /// The answer to [`ToHelper::Give`].
    Given {
        from: u32,
        req: u64,
        data: Result<Vec<u8>, i32>,
    },
}

impl ToHelper {
    /// One line of the protocol, its newline included.
    pub fn line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("plain data encodes");
        s.push('\n');
        s
    }
}

impl FromHelper {
    /// One line of the protocol, its newline included.
    pub fn line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("plain data encodes");
        s.push('\n');
        s
    }

    /// Parses a line the helper wrote.
    pub fn parse(line: &str) -> Result<FromHelper, String> {
        serde_json::from_str(line.trim_end()).map_err(|e| format!("{e} in {line:?}"))
    }
}

enum Msg {
    Pmix(Event),
    Nm(ToHelper),
    NmGone,
}

/// The helper, on the socket `link` to its node manager (descriptor `PMI_FD`); returns the
/// process's exit code once the node manager closes the socket.
pub fn run(link: std::os::unix::net::UnixStream) -> i32 {
    let mut out = match link.try_clone() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cosched pmix-helper: cannot use its socket: {e}");
            return 2;
        }
    };
    let mut lines = BufReader::new(link);
    let mut first = String::new();
    let setup = match lines.read_line(&mut first) {
        Ok(n) if n > 0 => match serde_json::from_str::<ToHelper>(first.trim_end()) {
            Ok(ToHelper::Setup(s)) => s,
            other => {
                eprintln!("cosched pmix-helper: expected the setup first, got {other:?}");
                return 2;
            }
        },
        _ => return 2,
    };
    let (tx, rx) = mpsc::channel();
    let started = start(&setup, tx.clone());
    let (server, local) = match started {
        Ok((server, envs)) => {
            let local: BTreeSet<u32> = envs.iter().map(|(rank, _)| *rank).collect();
            if out
                .write_all(FromHelper::Ready { envs }.line().as_bytes())
                .is_err()
            {
                return 2;
            }
            (server, local)
        }
        Err(why) => {
            let _ = out.write_all(FromHelper::Failed { why: why.clone() }.line().as_bytes());
            eprintln!("cosched pmix-helper: {why}");
            let _ = std::fs::remove_dir_all(&setup.dir);
            return 1;
        }
    };
    std::thread::spawn(move || {
        for line in lines.lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<ToHelper>(&line) {
                Ok(m) => {
                    if tx.send(Msg::Nm(m)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    eprintln!("cosched pmix-helper: a line of the node manager does not parse: {e}")
                }
            }
        }
        let _ = tx.send(Msg::NmGone);
    });
    let mut h = Helper {
        alone: setup.nodes.len() <= 1,
        nspace: setup.nspace.clone(),
        local,
        out,
        fences: BTreeMap::new(),
        next_fence: 0,
        names: BTreeMap::new(),
        wanted: BTreeMap::new(),
        giving: BTreeMap::new(),
        next_tag: 0,
    };
    for msg in rx {
        match msg {
            Msg::Pmix(e) => h.on_event(e),
            Msg::Nm(ToHelper::FenceDone { seq, data }) => {
                if let Some(reply) = h.fences.remove(&seq) {
                    reply.ok(&data);
                }
            }
            Msg::Nm(ToHelper::FenceFailed { seq }) => {
                if let Some(reply) = h.fences.remove(&seq) {
                    reply.fail(Status::UNREACH);
                }
            }
            Msg::Nm(ToHelper::Names { tag, answer }) => {
                if let Some(waiting) = h.names.remove(&tag) {
                    waiting.answer(answer);
                }
            }
            Msg::Nm(ToHelper::Have { tag, data }) => {
                if let Some(reply) = h.wanted.remove(&tag) {
                    match data {
                        Ok(d) => reply.ok(&d),
                        Err(status) => reply.fail(Status(status)),
                    }
                }
            }
            Msg::Nm(ToHelper::Give { from, req, rank }) => {
                h.next_tag += 1;
                let tag = h.next_tag;
                if let Err(e) = server.local_modex(&setup.nspace, rank, tag) {
                    eprintln!("cosched pmix-helper: {e}");
                    let data = Err(Status::NOT_FOUND.0);
                    h.send(FromHelper::Given { from, req, data });
                } else {
                    h.giving.insert(tag, (from, req));
                }
            }
            Msg::Nm(ToHelper::Setup(_)) => {}
            Msg::NmGone => break,
        }
    }
    // Unanswered fences and name requests fail (their handles answer an error when dropped)
    // before the server goes.
    h.fences.clear();
    h.names.clear();
    h.wanted.clear();
    let _ = server.deregister_job(&setup.nspace);
    drop(server);
    let _ = std::fs::remove_dir_all(&setup.dir);
    0
}

/// Starts the server, registers the job and its local ranks: their environments.
fn start(s: &Setup, tx: mpsc::Sender<Msg>) -> Result<(Server, RankEnvs), String> {
    // Made anew: a directory left by an earlier run of the job is not trusted.
    let _ = std::fs::remove_dir_all(&s.dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&s.dir)
        .map_err(|e| {
            format!(
                "cannot make the PMIx server's directory {}: {e}",
                s.dir.display()
            )
        })?;
    let server = Server::start(&s.dir, &s.host, move |e| {
        let _ = tx.send(Msg::Pmix(e));
    })
    .map_err(|e| format!("cannot start the PMIx server: {e}"))?;
    let nodes = s
        .nodes
        .iter()
        .map(|(host, ranks)| JobNode {
            host: host.clone(),
            ranks: ranks.clone(),
        })
        .collect();
    let layout = JobLayout::new(s.nspace.clone(), nodes)
        .map_err(|e| e.to_string())?
        .with_job_id(s.job_id.clone())
        .with_universe_size(s.universe);
    let jobdir = s.dir.join("job");
    std::fs::create_dir(&jobdir).map_err(|e| format!("cannot make {}: {e}", jobdir.display()))?;
    server
        .register_job(&layout, &s.host, Some(&jobdir))
        .map_err(|e| e.to_string())?;
    let node = layout.node_id(&s.host).map_err(|e| e.to_string())?;
    // The ranks run as the helper's user (the job's), and connect with those ids.
    let me = std::fs::metadata("/proc/self")
        .map_err(|e| format!("cannot read the helper's own ids (/proc/self): {e}"))?;
    let mut envs = Vec::new();
    for &rank in layout.local_ranks(node) {
        server
            .register_client(&s.nspace, rank, me.uid(), me.gid())
            .map_err(|e| e.to_string())?;
        let mut env = server
            .client_env(&s.nspace, rank)
            .map_err(|e| e.to_string())?;
        if s.oversubscribed {
            let (k, v) = OPEN_MPI_OVERSUBSCRIBED;
            env.push((k.into(), v.into()));
        }
        // Open MPI names its shared-memory segments by host, job and local rank: node
        // managers sharing a host (a loopback cluster) would otherwise collide on them.
        env.push((
            "OMPI_MCA_btl_vader_backing_directory".into(),
            s.dir.display().to_string(),
        ));
        envs.push((rank, env));
    }
    Ok((server, envs))
}

struct Helper {
    /// The job has no other node: its fences complete here.
    alone: bool,
    /// The job's namespace, and its ranks on this node.
    nspace: String,
    local: BTreeSet<u32>,
    out: std::os::unix::net::UnixStream,
    /// Fences sent to the node manager, by sequence number.
    fences: BTreeMap<u64, ModexReply>,
    next_fence: u64,
    /// Name requests sent to the node manager, by tag.
    names: BTreeMap<u64, NameReply>,
    /// Direct modex requests sent to the node manager, by tag.
    wanted: BTreeMap<u64, ModexReply>,
    /// Local ranks' data asked by other nodes, by the server's tag: (node, its request).
    giving: BTreeMap<u64, (u32, u64)>,
    /// Tags of requests of all kinds, one numbering.
    next_tag: u64,
}

/// A rank's name request waiting for the name service's answer.
enum NameReply {
    Op(OpReply),
    Lookup(LookupReply),
}

impl NameReply {
    fn answer(self, answer: NameAnswer) {
        match (self, name_result(answer)) {
            (NameReply::Op(r), Ok(_)) => r.ok(),
            (NameReply::Lookup(r), Ok(found)) => r.found(&found),
            (NameReply::Op(r), Err((status, why))) => {
                eprintln!("cosched pmix-helper: name service: {why}");
                r.fail(status)
            }
            (NameReply::Lookup(r), Err((status, why))) => {
                eprintln!("cosched pmix-helper: name service: {why}");
                r.fail(status)
            }
        }
    }
}

/// The name service's answer as the rank's PMIx call returns it: what a lookup found, each
/// name with who published it (its job's namespace and rank); or the PMIx status MPI expects
/// of the failure, with its reason for the helper's log.
fn name_result(answer: NameAnswer) -> Result<Vec<Published>, (Status, String)> {
    match answer {
        NameAnswer::Done => Ok(Vec::new()),
        NameAnswer::Found(found) => Ok(found
            .into_iter()
            .map(|f| Published {
                owner: Proc::new(nspace(f.job), f.rank),
                key: f.name,
                value: f.value,
            })
            .collect()),
        NameAnswer::NotFound => Err((Status::NOT_FOUND, "the name is not published".into())),
        NameAnswer::Taken(name) => Err((
            Status::DUPLICATE_KEY,
            format!("{name} is already published"),
        )),
        NameAnswer::Refused(why) => Err((Status::ERROR, why)),
    }
}

impl Helper {
    fn send(&mut self, m: FromHelper) {
        // A node manager that went away closes the socket, which ends the loop.
        let _ = self.out.write_all(m.line().as_bytes());
    }

    /// Sends rank `rank`'s name request to the node manager; `reply` waits for its answer.
    fn ask_names(&mut self, rank: u32, request: NameOp, reply: NameReply) {
        self.next_tag += 1;
        let tag = self.next_tag;
        self.names.insert(tag, reply);
        self.send(FromHelper::Names { tag, rank, request });
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::ClientConnected { client } => {
                self.send(FromHelper::Connected { rank: client.rank })
            }
            Event::ClientFinalized { .. } => {}
            Event::LocalModex { tag, result, .. } => {
                if let Some((from, req)) = self.giving.remove(&tag) {
                    let data = result.map_err(|s| s.0);
                    self.send(FromHelper::Given { from, req, data });
                }
            }
            Event::Fence { data, reply, .. } => {
                if self.alone {
                    reply.ok(&data);
                    return;
                }
                self.next_fence += 1;
                let seq = self.next_fence;
                self.fences.insert(seq, reply);
                self.send(FromHelper::Fence { seq, data });
            }
            // A key the fence did not bring (Open MPI with `pmix_base_async_modex=1`): the node
            // manager asks the rank's node, whose helper answers with its local data.
            Event::DirectModex { target, reply } => {
                self.next_tag += 1;
                let tag = self.next_tag;
                self.wanted.insert(tag, reply);
                self.send(FromHelper::Want {
                    tag,
                    rank: target.rank,
                });
            }
            Event::Abort {
                client,
                status,
                message,
                ..
            } => self.send(FromHelper::Abort {
                rank: client.rank,
                status,
                message,
            }),
            // Every range is the user's: the machine manager keeps one name space per user
            // across jobs and nodes.
            Event::Publish {
                client,
                names,
                reply,
                ..
            } => {
                let request = NameOp::Publish { names };
                self.ask_names(client.rank, request, NameReply::Op(reply))
            }
            Event::Lookup {
                client,
                keys,
                wait,
                reply,
                ..
            } => {
                let request = NameOp::Lookup { names: keys, wait };
                self.ask_names(client.rank, request, NameReply::Lookup(reply))
            }
            Event::Unpublish {
                client,
                keys,
                reply,
                ..
            } => {
                let request = NameOp::Unpublish { names: keys };
                self.ask_names(client.rank, request, NameReply::Op(reply))
            }
            // Told to the ranks it serves: a refused collective lists other jobs' and other
            // nodes' ranks too.
            Event::Refused { client, request } => {
                let ours = |c: &Proc| c.nspace == self.nspace && self.local.contains(&c.rank);
                if client.as_ref().is_none_or(ours) {
                    self.send(FromHelper::Refused {
                        rank: client.map(|c| c.rank),
                        explain: request.explain().to_string(),
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_proto::names::FoundName;

    #[test]
    fn a_lookup_names_the_publisher_by_its_jobs_namespace_and_rank() {
        let found = NameAnswer::Found(vec![FoundName {
            name: "svc".into(),
            value: "port".into(),
            job: JobId(9),
            rank: 3,
        }]);
        let owner = Proc::new("cosched.9".to_string(), 3);
        let want = Published {
            owner,
            key: "svc".into(),
            value: "port".into(),
        };
        assert_eq!(name_result(found), Ok(vec![want]));
        assert_eq!(name_result(NameAnswer::Done), Ok(Vec::new()));
    }

    #[test]
    fn the_name_services_refusals_become_the_pmix_statuses_mpi_expects() {
        let status = |a| name_result(a).map_err(|(s, _)| s);
        assert_eq!(status(NameAnswer::NotFound), Err(Status::NOT_FOUND));
        assert_eq!(
            status(NameAnswer::Taken("svc".into())),
            Err(Status::DUPLICATE_KEY)
        );
        assert_eq!(
            status(NameAnswer::Refused("the job is not running".into())),
            Err(Status::ERROR)
        );
    }

    #[test]
    fn name_requests_and_answers_cross_the_helpers_socket_as_the_machine_manager_has_them() {
        let ask = FromHelper::Names {
            tag: 4,
            rank: 1,
            request: NameOp::Lookup {
                names: vec!["svc".into()],
                wait: true,
            },
        };
        assert_eq!(FromHelper::parse(&ask.line()), Ok(ask));
        let answer = ToHelper::Names {
            tag: 4,
            answer: NameAnswer::Taken("svc".into()),
        };
        let back: ToHelper = serde_json::from_str(answer.line().trim_end()).unwrap();
        assert_eq!(back, answer);
    }
}
