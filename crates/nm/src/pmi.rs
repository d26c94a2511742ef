//! PMI-1, the "simple" wire protocol MPICH's start-up speaks, served by the node manager to
//! the ranks of its node, so an MPI program starts under `cosched submit` without `mpiexec`.
//!
//! Each rank gets one end of a socket pair as `PMI_FD` (with `PMI_RANK`, `PMI_SIZE` and
//! `PMI_SPAWNED=0`) and speaks lines of `cmd=NAME key=value ...`. Everything but the fence is
//! answered on the node: `init`, `get_maxes`, `get_appnum`, `get_universe_size`,
//! `get_my_kvsname`, `put` (kept on the node until the next fence), `get` (from the job's
//! key–value space as of the last fence, then this node's puts since), `finalize`; `abort`
//! is the node manager's to carry out (it kills the rank and fails the job);
//! `publish_name`, `lookup_name` and `unpublish_name` go to the machine manager's name
//! service ([`Out::Names`]), whose answer becomes the rank's reply ([`NameCmd::reply`]).
//! A fence (`barrier_in` … `barrier_out`) is a gather up and a broadcast down the tree: once
//! every local rank has entered it, the node sends its puts up ([`Out::FenceUp`]); the machine
//! manager answers, once every node of the job has, with the union of all nodes' puts
//! ([`JobPmi::fence_done`]), and every waiting rank gets `barrier_out`.
//!
//! [`JobPmi`] is the protocol without I/O (lines in, lines and messages out), so it is tested
//! on its own; [`serve_rank`] moves the lines between a rank's socket and the node manager's
//! event loop. Jobs that are not MPI programs never write to the socket and cost nothing.

use std::collections::{BTreeMap, BTreeSet};

use cosched_core::JobId;
use cosched_proto::names::{NameAnswer, NameOp};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use cosched_proto::proto::Placement;

/// Limits announced by `get_maxes`; MPICH splits longer values (its business cards) into
/// several keys itself.
pub const KVSNAME_MAX: usize = 256;
pub const KEYLEN_MAX: usize = 256;
pub const VALLEN_MAX: usize = 1024;

/// What the protocol wants done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// Write this line (with its newline) to the rank.
    Reply(u32, String),
    /// Every local rank entered fence `seq`: send this node's puts up to the machine manager.
    FenceUp {
        seq: u64,
        puts: Vec<(String, String)>,
    },
    /// The rank called `PMI_Abort` (and waits to be killed, as MPICH's client does).
    Abort { rank: u32, code: i32, msg: String },
    /// The rank asks the name service (`MPI_Publish_name` and kin); it waits for the reply
    /// [`NameCmd::reply`] makes of the answer.
    Names { rank: u32, op: NameOp },
    /// A line that is not PMI-1 (or a command not supported): worth a log line.
    Bad { rank: u32, line: String },
}

/// One job's PMI state on one node.
#[derive(Clone, Debug)]
pub struct JobPmi {
    size: u32,
    /// `MPI_UNIVERSE_SIZE`: the PEs of the job's allocation.
    universe: u32,
    kvsname: String,
    local: BTreeSet<u32>,
    /// The job's key–value space as of the last fence (and the process mapping from the start).
    kvs: BTreeMap<String, String>,
    /// This node's puts since the last fence.
    puts: BTreeMap<String, String>,
    /// Local ranks inside the current fence.
    waiting: BTreeSet<u32>,
    /// Fences completed.
    done: u64,
    /// The fence sent up and not answered yet: repeated when the node rejoins the tree.
    up: Option<(u64, Vec<(String, String)>)>,
}

impl JobPmi {
    /// The state for `job` as placed: its local ranks are those `node`'s placement lists.
    /// Its universe is the job's own PEs until [`JobPmi::with_universe`] says otherwise.
    pub fn new(job: JobId, size: u32, placement: &[Placement], local: BTreeSet<u32>) -> JobPmi {
        let mut kvs = BTreeMap::new();
        kvs.insert("PMI_process_mapping".into(), process_mapping(placement));
        JobPmi {
            size,
            universe: size,
            kvsname: format!("cosched_{}", job.0),
            local,
            kvs,
            puts: BTreeMap::new(),
            waiting: BTreeSet::new(),
            done: 0,
            up: None,
        }
    }

    /// `MPI_UNIVERSE_SIZE` is `universe` (the allocation's PEs), never below the job's size.
    pub fn with_universe(mut self, universe: u32) -> JobPmi {
        self.universe = universe.max(self.size);
        self
    }

    /// `MPI_UNIVERSE_SIZE`.
    pub fn universe(&self) -> u32 {
        self.universe
    }

    /// The fence sent up and not yet answered, if any.
    pub fn pending_fence(&self) -> Option<(u64, Vec<(String, String)>)> {
        self.up.clone()
    }

    /// Takes in one line a local rank wrote (without its newline).
    pub fn on_line(&mut self, rank: u32, line: &str) -> Vec<Out> {
        let fields = parse(line);
        let reply = |s: String| vec![Out::Reply(rank, s + "\n")];
        let Some(cmd) = fields.get("cmd") else {
            return vec![Out::Bad {
                rank,
                line: line.into(),
            }];
        };
        match cmd.as_str() {
            "init" => {
                // We speak 1.1 whatever the client asks; MPICH accepts it.
                reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0".into())
            }
            "get_maxes" => reply(format!(
                "cmd=maxes rc=0 kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} vallen_max={VALLEN_MAX}"
            )),
            "get_appnum" => reply("cmd=appnum rc=0 appnum=0".into()),
            "get_universe_size" => reply(format!("cmd=universe_size rc=0 size={}", self.universe)),
            "get_my_kvsname" => reply(format!("cmd=my_kvsname rc=0 kvsname={}", self.kvsname)),
            "put" => {
                let (Some(k), Some(v)) = (fields.get("key"), fields.get("value")) else {
                    return reply("cmd=put_result rc=-1 msg=key_or_value_missing".into());
                };
                if k.len() > KEYLEN_MAX || v.len() > VALLEN_MAX {
                    return reply("cmd=put_result rc=-1 msg=key_or_value_too_long".into());
                }
                self.puts.insert(k.clone(), v.clone());
                reply("cmd=put_result rc=0 msg=success".into())
            }
            "get" => {
                let k = fields.get("key").map(String::as_str).unwrap_or("");
                match self.kvs.get(k).or_else(|| self.puts.get(k)) {
                    Some(v) => reply(format!("cmd=get_result rc=0 msg=success value={v}")),
                    None => reply(format!("cmd=get_result rc=-1 msg=key_{k}_not_found")),
                }
            }
            "barrier_in" => {
                if !self.local.contains(&rank) {
                    return vec![Out::Bad {
                        rank,
                        line: line.into(),
                    }];
                }
                self.waiting.insert(rank);
                if self.waiting.len() < self.local.len() || self.up.is_some() {
                    return Vec::new();
                }
                // The whole node is in: its puts go up, once.
                let seq = self.done + 1;
                let puts: Vec<(String, String)> =
                    std::mem::take(&mut self.puts).into_iter().collect();
                self.up = Some((seq, puts.clone()));
                vec![Out::FenceUp { seq, puts }]
            }
            "finalize" => reply("cmd=finalize_ack".into()),
            "abort" => {
                let code = fields
                    .get("exitcode")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                let msg = fields.get("msg").cloned().unwrap_or_default();
                vec![Out::Abort { rank, code, msg }]
            }
            "publish_name" | "lookup_name" | "unpublish_name" => {
                let Some(service) = fields.get("service").cloned() else {
                    return reply(format!(
                        "cmd={}_result rc=-1 msg=service_missing",
                        &cmd[..cmd.len() - 5]
                    ));
                };
                let op = match cmd.as_str() {
                    "publish_name" => match fields.get("port") {
                        Some(port) => NameOp::Publish {
                            names: vec![(service, port.clone())],
                        },
                        None => return reply("cmd=publish_result rc=-1 msg=port_missing".into()),
                    },
                    "lookup_name" => NameOp::Lookup {
                        names: vec![service],
                        wait: false,
                    },
                    _ => NameOp::Unpublish {
                        names: vec![service],
                    },
                };
                vec![Out::Names { rank, op }]
            }
            other => {
                // Answer something the client recognises as a failure, so that it does not
                // wait for ever on a command we do not serve (spawn, publish_name, …).
                let mut out = reply(format!("cmd={other}_result rc=-1 msg=unsupported"));
                out.push(Out::Bad {
                    rank,
                    line: line.into(),
                });
                out
            }
        }
    }

    /// The machine manager's answer to fence `seq`: the puts of every node of the job.
    /// Releases the waiting ranks; a repeated or stale answer does nothing.
    pub fn fence_done(&mut self, seq: u64, kvs: Vec<(String, String)>) -> Vec<Out> {
        if self.up.as_ref().map(|(s, _)| *s) != Some(seq) {
            return Vec::new();
        }
        self.up = None;
        self.done = seq;
        self.kvs.extend(kvs);
        std::mem::take(&mut self.waiting)
            .into_iter()
            .map(|r| Out::Reply(r, "cmd=barrier_out\n".into()))
            .collect()
    }
}

/// Which PMI-1 name command an answer of the name service is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameCmd {
    Publish,
    Lookup,
    Unpublish,
}

impl NameCmd {
    pub fn of(op: &NameOp) -> NameCmd {
        match op {
            NameOp::Publish { .. } => NameCmd::Publish,
            NameOp::Lookup { .. } => NameCmd::Lookup,
            NameOp::Unpublish { .. } => NameCmd::Unpublish,
        }
    }

    /// The reply line (with its newline) MPICH's client reads: `cmd=publish_result rc=0`,
    /// `cmd=lookup_result rc=0 port=VALUE`, or `rc=-1` with a `msg` (words joined by `_`:
    /// PMI-1 values hold no spaces).
    pub fn reply(self, answer: &NameAnswer) -> String {
        let cmd = match self {
            NameCmd::Publish => "publish_result",
            NameCmd::Lookup => "lookup_result",
            NameCmd::Unpublish => "unpublish_result",
        };
        let failed = |why: &str| format!("cmd={cmd} rc=-1 msg={}\n", why.replace(' ', "_"));
        match answer {
            NameAnswer::Done => format!("cmd={cmd} rc=0 msg=success\n"),
            NameAnswer::Found(found) => match found.first() {
                Some(f) if self == NameCmd::Lookup => {
                    format!("cmd={cmd} rc=0 msg=success port={}\n", f.value)
                }
                _ => format!("cmd={cmd} rc=0 msg=success\n"),
            },
            NameAnswer::NotFound => failed("the name is not published"),
            NameAnswer::Taken(name) => failed(&format!("{name} is already published")),
            NameAnswer::Refused(why) => failed(why),
        }
    }
}

/// `cmd=put kvsname=k key=a value=b=c` → {cmd: put, kvsname: k, key: a, value: b=c}: fields
/// are separated by spaces and split at their first `=` (values may hold `=`, not spaces).
pub fn parse(line: &str) -> BTreeMap<String, String> {
    line.split_ascii_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `PMI_process_mapping` value MPICH reads to learn which ranks share a node:
/// `(vector,(first node,node count,ranks per node),...)`, nodes counted within the job.
/// Ranks are numbered node after node (the machine manager places them so), so runs of
/// nodes with the same number of ranks make one block each.
pub fn process_mapping(placement: &[Placement]) -> String {
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    for (i, p) in placement.iter().enumerate() {
        let n = p.ranks.len();
        match blocks.last_mut() {
            Some((_, count, per)) if *per == n => *count += 1,
            _ => blocks.push((i, 1, n)),
        }
    }
    let body: Vec<String> = blocks
        .iter()
        .map(|(first, count, per)| format!("({first},{count},{per})"))
        .collect();
    format!("(vector,{})", body.join(","))
}

/// A line from rank `rank` of `job`, for the node manager's event loop.
#[derive(Debug)]
pub struct FromRank {
    pub job: JobId,
    pub rank: u32,
    pub line: String,
}

/// Longest line taken from a rank: more than any PMI-1 command with the limits above.
const MAX_LINE: usize = 64 * 1024;

/// Moves lines between a rank's end of its PMI socket pair and the node manager: what the
/// rank writes goes to `to_nm`, what arrives on `replies` is written back. Ends when the rank
/// closes its end (it exited) or writes a line longer than any PMI-1 command.
pub async fn serve_rank(
    stream: tokio::net::UnixStream,
    job: JobId,
    rank: u32,
    to_nm: mpsc::UnboundedSender<FromRank>,
    mut replies: mpsc::UnboundedReceiver<String>,
) {
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let mut buf = Vec::new();
    loop {
        // Partial lines stay in `buf` when the other branch wins (read_until appends).
        let mut limited = (&mut rd).take((MAX_LINE + 1 - buf.len().min(MAX_LINE)) as u64);
        tokio::select! {
            n = limited.read_until(b'\n', &mut buf) => {
                match n {
                    Ok(0) | Err(_) => return,
                    Ok(_) if !buf.ends_with(b"\n") => return,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                        buf.clear();
                        if to_nm.send(FromRank { job, rank, line }).is_err() {
                            return;
                        }
                    }
                }
            }
            Some(line) = replies.recv() => {
                if wr.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::NodeId;

    fn placement() -> Vec<Placement> {
        vec![
            Placement {
                node: NodeId(3),
                ranks: vec![(0, 0), (1, 1)],
                extra_pes: Vec::new(),
            },
            Placement {
                node: NodeId(5),
                ranks: vec![(2, 0), (3, 1)],
                extra_pes: Vec::new(),
            },
            Placement {
                node: NodeId(6),
                ranks: vec![(4, 0)],
                extra_pes: Vec::new(),
            },
        ]
    }

    fn replies(out: &[Out]) -> Vec<(u32, String)> {
        out.iter()
            .filter_map(|o| match o {
                Out::Reply(r, s) => Some((*r, s.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn process_mapping_makes_one_block_per_run_of_equal_nodes() {
        assert_eq!(process_mapping(&placement()), "(vector,(0,2,2),(2,1,1))");
    }

    #[test]
    fn parse_splits_fields_at_their_first_equals_sign() {
        let f = parse("cmd=put kvsname=k key=a value=b=c==");
        assert_eq!(f["cmd"], "put");
        assert_eq!(f["value"], "b=c==");
    }

    #[test]
    fn a_fence_goes_up_once_every_local_rank_is_in_and_releases_them_on_the_answer() {
        let mut p = JobPmi::new(JobId(7), 5, &placement(), [0, 1].into());
        let init = p.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1");
        assert!(replies(&init)[0].1.starts_with("cmd=response_to_init "));
        let name = p.on_line(1, "cmd=get_my_kvsname");
        assert_eq!(
            replies(&name)[0].1,
            "cmd=my_kvsname rc=0 kvsname=cosched_7\n"
        );
        p.on_line(0, "cmd=put kvsname=cosched_7 key=card0 value=x=1");
        assert!(
            p.on_line(0, "cmd=barrier_in").is_empty(),
            "rank 1 is not in yet"
        );
        let up = p.on_line(1, "cmd=barrier_in");
        assert_eq!(
            up,
            vec![Out::FenceUp {
                seq: 1,
                puts: vec![("card0".into(), "x=1".into())]
            }]
        );
        // Not visible elsewhere before the answer; the other node's card arrives with it.
        let miss = p.on_line(0, "cmd=get kvsname=cosched_7 key=card2");
        assert!(replies(&miss)[0].1.contains("rc=-1"));
        assert!(
            p.fence_done(2, vec![]).is_empty(),
            "a stale answer is ignored"
        );
        let out = p.fence_done(
            1,
            vec![("card0".into(), "x=1".into()), ("card2".into(), "y".into())],
        );
        assert_eq!(
            replies(&out),
            vec![
                (0, "cmd=barrier_out\n".to_string()),
                (1, "cmd=barrier_out\n".to_string())
            ]
        );
        assert!(
            p.fence_done(1, vec![]).is_empty(),
            "a repeat releases nobody"
        );
        let hit = p.on_line(1, "cmd=get kvsname=cosched_7 key=card2");
        assert_eq!(
            replies(&hit)[0].1,
            "cmd=get_result rc=0 msg=success value=y\n"
        );
        let map = p.on_line(1, "cmd=get kvsname=cosched_7 key=PMI_process_mapping");
        assert!(
            replies(&map)[0]
                .1
                .ends_with("value=(vector,(0,2,2),(2,1,1))\n")
        );
        // The next fence is number 2 and carries only the new puts.
        p.on_line(0, "cmd=barrier_in");
        assert_eq!(
            p.on_line(1, "cmd=barrier_in"),
            vec![Out::FenceUp {
                seq: 2,
                puts: vec![]
            }]
        );
    }

    #[test]
    fn abort_and_unknown_commands_are_reported() {
        let mut p = JobPmi::new(JobId(1), 1, &placement()[2..], [4].into());
        assert_eq!(
            p.on_line(4, "cmd=abort exitcode=3"),
            vec![Out::Abort {
                rank: 4,
                code: 3,
                msg: String::new()
            }]
        );
        let out = p.on_line(4, "cmd=spawn");
        assert_eq!(
            replies(&out)[0].1,
            "cmd=spawn_result rc=-1 msg=unsupported\n"
        );
        assert!(matches!(p.on_line(4, "garbage"), v if matches!(v[0], Out::Bad { .. })));
    }

    /// The lines MPICH 4.0.2's client sends for `MPI_Publish_name`, `MPI_Lookup_name` and
    /// `MPI_Unpublish_name`, and the replies it reads.
    #[test]
    fn name_commands_go_to_the_name_service_and_its_answers_become_mpichs_replies() {
        use cosched_proto::names::FoundName;
        let mut p = JobPmi::new(JobId(1), 1, &placement()[2..], [4].into());
        let port = "tag#0$description#n0$port#38113$ifname#10.0.0.1$";
        let publish = p.on_line(4, &format!("cmd=publish_name service=svc port={port}"));
        let names = vec![("svc".to_string(), port.to_string())];
        assert_eq!(
            publish,
            vec![Out::Names {
                rank: 4,
                op: NameOp::Publish { names }
            }]
        );
        let lookup = p.on_line(4, "cmd=lookup_name service=svc");
        let Out::Names { op, .. } = &lookup[0] else {
            panic!("{lookup:?}")
        };
        assert_eq!(
            *op,
            NameOp::Lookup {
                names: vec!["svc".into()],
                wait: false
            }
        );
        let found = NameAnswer::Found(vec![FoundName {
            name: "svc".into(),
            value: port.into(),
            job: JobId(2),
            rank: 0,
        }]);
        assert_eq!(
            NameCmd::of(op).reply(&found),
            format!("cmd=lookup_result rc=0 msg=success port={port}\n")
        );
        assert_eq!(
            NameCmd::Lookup.reply(&NameAnswer::NotFound),
            "cmd=lookup_result rc=-1 msg=the_name_is_not_published\n"
        );
        assert_eq!(
            NameCmd::Publish.reply(&NameAnswer::Taken("svc".into())),
            "cmd=publish_result rc=-1 msg=svc_is_already_published\n"
        );
        let unpublish = p.on_line(4, "cmd=unpublish_name service=svc");
        let Out::Names { op, .. } = &unpublish[0] else {
            panic!("{unpublish:?}")
        };
        assert_eq!(
            NameCmd::of(op).reply(&NameAnswer::Done),
            "cmd=unpublish_result rc=0 msg=success\n"
        );
        let bad = p.on_line(4, "cmd=publish_name service=svc");
        assert_eq!(
            replies(&bad)[0].1,
            "cmd=publish_result rc=-1 msg=port_missing\n"
        );
    }
}
