//! `pmix-node`: plays a node manager's part around the PMIx server, small, for the crate's
//! tests and for trying an MPI program by hand: starts the server, registers jobs, starts
//! this node's ranks with their PMIx environment, and answers the server's events. With a
//! peer (`--listen PATH` on one node, `--connect PATH` on the other), fences and direct modex
//! go to the other node over a Unix socket, the part the STORM tree will play between node
//! managers.
//!
//! ```text
//! pmix-node --node n0 [--listen PATH | --connect PATH] [--timeout SECS]
//!     --job NSPACE HOST:NRANKS[,HOST:NRANKS...] [--universe N] -- PROGRAM ARGS...
//!     [--job ...]
//! ```
//!
//! Ranks are placed in order, NRANKS per host; with more ranks here than cores, they are told
//! so (`OPEN_MPI_OVERSUBSCRIBED`), as `mpirun` would. Lines it prints for the tests:
//! `pmix-node: abort NSPACE:RANK status S at T µs: MESSAGE`, `pmix-node: refused ...`,
//! `pmix-node: exit NSPACE:RANK code C`, and at the end `pmix-node: fences F direct-modex D
//! local-modex L connected C finalized F`. Its exit code is the first non-zero rank code (an
//! aborted job's is the abort status).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cosched_pmix::{
    Event, JobLayout, JobNode, LookupReply, ModexReply, Names, OPEN_MPI_OVERSUBSCRIBED, Proc,
    Server, Status,
};

struct JobArgs {
    nspace: String,
    nodes: Vec<(String, u32)>,
    universe: Option<u32>,
    argv: Vec<String>,
}

struct Args {
    node: String,
    listen: Option<PathBuf>,
    connect: Option<PathBuf>,
    timeout: Duration,
    jobs: Vec<JobArgs>,
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "pmix-node: {problem}\nusage: pmix-node --node NAME [--listen PATH | --connect PATH] [--timeout SECS] --job NSPACE HOST:N[,HOST:N...] [--universe N] -- PROGRAM ARGS... [--job ...]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1).peekable();
    let mut args = Args {
        node: String::new(),
        listen: None,
        connect: None,
        timeout: Duration::from_secs(120),
        jobs: Vec::new(),
    };
    let value = |it: &mut std::iter::Peekable<std::iter::Skip<std::env::Args>>, flag: &str| {
        it.next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--node" => args.node = value(&mut it, "--node"),
            "--listen" => args.listen = Some(value(&mut it, "--listen").into()),
            "--connect" => args.connect = Some(value(&mut it, "--connect").into()),
            "--timeout" => {
                let s = value(&mut it, "--timeout");
                let secs = s
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("--timeout {s:?} is not seconds")));
                args.timeout = Duration::from_secs(secs);
            }
            "--job" => {
                let nspace = value(&mut it, "--job");
                let spec = value(&mut it, "--job");
                let nodes = spec
                    .split(',')
                    .map(|hn| {
                        let (h, n) = hn.split_once(':').unwrap_or_else(|| {
                            usage(&format!("{hn:?} in --job is not HOST:NRANKS"))
                        });
                        let n = n.parse().unwrap_or_else(|_| {
                            usage(&format!("{n:?} in --job is not a number of ranks"))
                        });
                        (h.to_owned(), n)
                    })
                    .collect();
                let mut job = JobArgs {
                    nspace,
                    nodes,
                    universe: None,
                    argv: Vec::new(),
                };
                while let Some(a) = it.next() {
                    match a.as_str() {
                        "--universe" => {
                            let s = value(&mut it, "--universe");
                            job.universe = Some(s.parse().unwrap_or_else(|_| {
                                usage(&format!("--universe {s:?} is not a number"))
                            }));
                        }
                        "--" => break,
                        other => usage(&format!("unexpected {other:?} before -- in --job")),
                    }
                }
                while it.peek().is_some_and(|a| a != "--job") {
                    job.argv.extend(it.next());
                }
                if job.argv.is_empty() {
                    usage("--job needs a program after --");
                }
                args.jobs.push(job);
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    if args.node.is_empty() || args.jobs.is_empty() {
        usage("--node and at least one --job are needed");
    }
    args
}

/// Frames between two `pmix-node`s: kind, tag, length, bytes.
#[derive(Debug)]
enum Frame {
    /// A node's contribution to the next fence of a namespace.
    Fence { nspace: String, data: Vec<u8> },
    /// Asks for a rank's data (direct modex).
    Want { tag: u64, target: Proc },
    /// The answer to `Want`.
    Have {
        tag: u64,
        result: Result<Vec<u8>, i32>,
    },
    /// A rank aborted: end the ranks of that namespace.
    Abort { nspace: String, status: i32 },
    /// Every rank of the sender has exited: its going is not a loss.
    Done,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u32).to_le_bytes());
    out.extend(s.as_bytes());
}

fn encode(f: &Frame) -> Vec<u8> {
    let mut body = Vec::new();
    let kind = match f {
        Frame::Fence { nspace, data } => {
            put_str(&mut body, nspace);
            body.extend(data);
            1u8
        }
        Frame::Want { tag, target } => {
            body.extend(tag.to_le_bytes());
            body.extend(target.rank.to_le_bytes());
            put_str(&mut body, &target.nspace);
            2
        }
        Frame::Have { tag, result } => {
            body.extend(tag.to_le_bytes());
            match result {
                Ok(d) => {
                    body.extend(0i32.to_le_bytes());
                    body.extend(d);
                }
                Err(s) => body.extend(s.to_le_bytes()),
            }
            3
        }
        Frame::Abort { nspace, status } => {
            body.extend(status.to_le_bytes());
            put_str(&mut body, nspace);
            4
        }
        Frame::Done => 5,
    };
    let mut out = vec![kind];
    out.extend((body.len() as u32).to_le_bytes());
    out.extend(body);
    out
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

fn decode(kind: u8, body: &[u8]) -> Option<Frame> {
    let mut c = Cursor(body);
    Some(match kind {
        1 => Frame::Fence {
            nspace: c.str()?,
            data: c.0.to_vec(),
        },
        2 => {
            let tag = c.u64()?;
            let rank = c.u32()?;
            Frame::Want {
                tag,
                target: Proc::new(c.str()?, rank),
            }
        }
        3 => {
            let tag = c.u64()?;
            let status = c.u32()? as i32;
            Frame::Have {
                tag,
                result: if status == 0 {
                    Ok(c.0.to_vec())
                } else {
                    Err(status)
                },
            }
        }
        4 => {
            let status = c.u32()? as i32;
            Frame::Abort {
                status,
                nspace: c.str()?,
            }
        }
        5 => Frame::Done,
        _ => return None,
    })
}

enum Msg {
    Pmix(Event),
    Peer(Frame),
    PeerGone,
}

fn read_frames(mut stream: UnixStream, tx: mpsc::Sender<Msg>) {
    loop {
        let mut head = [0u8; 5];
        if stream.read_exact(&mut head).is_err() {
            let _ = tx.send(Msg::PeerGone);
            return;
        }
        let len = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes")) as usize;
        let mut body = vec![0; len];
        if stream.read_exact(&mut body).is_err() {
            let _ = tx.send(Msg::PeerGone);
            return;
        }
        match decode(head[0], &body) {
            Some(f) => {
                let _ = tx.send(Msg::Peer(f));
            }
            None => {
                eprintln!(
                    "pmix-node: a frame from the peer does not parse (kind {})",
                    head[0]
                );
                let _ = tx.send(Msg::PeerGone);
                return;
            }
        }
    }
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

/// One namespace's fences in progress: this node's contributions and the peer's, matched in
/// order (every node goes through a job's fences in the same order).
#[derive(Default)]
struct Fences {
    mine: VecDeque<(Vec<u8>, ModexReply)>,
    theirs: VecDeque<Vec<u8>>,
}

struct Node {
    server: Server,
    peer: Option<UnixStream>,
    /// No peer was asked for: every fence is this node's alone.
    alone: bool,
    /// The peer said its ranks have all exited.
    peer_done: bool,
    /// Which side of the pair this node is: its contribution goes first in a fence's answer.
    first: bool,
    fences: HashMap<String, Fences>,
    wanted: HashMap<u64, ModexReply>,
    next_tag: u64,
    names: Names,
    waiting_lookups: Vec<(Vec<String>, LookupReply)>,
    ranks: Vec<(Proc, Child)>,
    /// Ranks that completed their connection to the server.
    connected: HashSet<Proc>,
    /// Jobs being ended: their ranks are killed once connected.
    ending: HashSet<String>,
    exit_code: i32,
    counts: BTreeMap<&'static str, u32>,
}

impl Node {
    fn send(&mut self, f: &Frame) {
        if let Some(p) = &mut self.peer
            && p.write_all(&encode(f)).is_err()
        {
            self.peer_gone();
        }
    }

    /// The other node is gone: what waits for it cannot be answered, and its ranks will never
    /// answer ours. The replies are dropped (the ranks' fence or get fails), and the ranks are
    /// ended as a failed job: Open MPI 4.1 ignores a failed fence in `MPI_Init` and would
    /// wait for the missing ranks in its first collective for ever. A peer whose ranks have
    /// all exited ([`Frame::Done`]) went through the job's last fence with ours, so ours
    /// finishing after it is no loss, unless one of them still waits for it.
    fn peer_gone(&mut self) {
        let waiting = !self.wanted.is_empty() || self.fences.values().any(|f| !f.mine.is_empty());
        if self.peer.take().is_some() && !self.ranks.is_empty() && (!self.peer_done || waiting) {
            eprintln!("pmix-node: the other node is gone: ending the job");
            if self.exit_code == 0 {
                self.exit_code = 1;
            }
            let jobs: Vec<String> = self.ranks.iter().map(|(p, _)| p.nspace.clone()).collect();
            for nspace in jobs {
                self.end_job(&nspace);
            }
        }
        self.fences.clear();
        self.wanted.clear();
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    fn complete_fences(&mut self, nspace: &str) {
        let first = self.first;
        let Some(f) = self.fences.get_mut(nspace) else {
            return;
        };
        while !f.mine.is_empty() && !f.theirs.is_empty() {
            let (mine, reply) = f.mine.pop_front().expect("checked");
            let theirs = f.theirs.pop_front().expect("checked");
            let all = if first {
                [mine, theirs].concat()
            } else {
                [theirs, mine].concat()
            };
            reply.ok(&all);
        }
    }

    /// Ends a job's ranks: those connected to the server now, the others as soon as they
    /// connect. OpenPMIx 4.2 can wedge its progress thread when a client dies in the middle
    /// of its connection handshake (seen here as "PMIX ERROR: UNREACHABLE" in
    /// ptl_base_connection_hdlr.c, then every later server call waits for ever), so a rank is
    /// not killed while it may be in that handshake.
    fn end_job(&mut self, nspace: &str) {
        self.ending.insert(nspace.to_owned());
        for (p, child) in &mut self.ranks {
            if p.nspace == nspace && self.connected.contains(p) {
                let _ = child.kill();
            }
        }
    }

    fn on_connected(&mut self, client: Proc) {
        self.count("connected");
        if self.ending.contains(&client.nspace)
            && let Some((_, child)) = self.ranks.iter_mut().find(|(p, _)| *p == client)
        {
            let _ = child.kill();
        }
        self.connected.insert(client);
    }

    fn serve_lookups(&mut self) {
        let pending = std::mem::take(&mut self.waiting_lookups);
        for (keys, reply) in pending {
            let found = self.names.find(&keys);
            if found.len() == keys.len() {
                reply.found(&found);
            } else {
                self.waiting_lookups.push((keys, reply));
            }
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::ClientConnected { client } => self.on_connected(client),
            Event::ClientFinalized { .. } => self.count("finalized"),
            Event::Fence {
                procs, data, reply, ..
            } => {
                self.count("fences");
                let nspace = procs.first().map(|p| p.nspace.clone()).unwrap_or_default();
                if self.alone {
                    reply.ok(&data);
                    return;
                }
                self.send(&Frame::Fence {
                    nspace: nspace.clone(),
                    data: data.clone(),
                });
                if self.peer.is_none() {
                    reply.fail(Status::UNREACH);
                    return;
                }
                self.fences
                    .entry(nspace.clone())
                    .or_default()
                    .mine
                    .push_back((data, reply));
                self.complete_fences(&nspace);
            }
            Event::DirectModex { target, reply } => {
                self.count("direct-modex");
                if self.peer.is_none() {
                    reply.fail(if self.alone {
                        Status::NOT_FOUND
                    } else {
                        Status::UNREACH
                    });
                    return;
                }
                let tag = self.next_tag;
                self.next_tag += 1;
                self.wanted.insert(tag, reply);
                // A failed send drops the reply with the others (peer_gone).
                self.send(&Frame::Want { tag, target });
            }
            Event::LocalModex { tag, result, .. } => {
                self.count("local-modex");
                self.send(&Frame::Have {
                    tag,
                    result: result.map_err(|s| s.0),
                });
            }
            Event::Abort {
                client,
                status,
                message,
                ..
            } => {
                println!(
                    "pmix-node: abort {client} status {status} at {} µs: {message}",
                    now_us()
                );
                if self.exit_code == 0 {
                    self.exit_code = if status == 0 { 1 } else { status };
                }
                self.end_job(&client.nspace);
                self.send(&Frame::Abort {
                    nspace: client.nspace,
                    status,
                });
            }
            Event::Publish {
                client,
                names,
                reply,
                ..
            } => {
                for (key, _) in &names {
                    println!("pmix-node: {client} published {key}");
                }
                self.names.publish(&client, names);
                reply.ok();
                self.serve_lookups();
            }
            Event::Lookup {
                keys, wait, reply, ..
            } => {
                let found = self.names.find(&keys);
                if found.len() == keys.len() {
                    reply.found(&found);
                } else if wait {
                    self.waiting_lookups.push((keys, reply));
                } else if found.is_empty() {
                    reply.fail(Status::NOT_FOUND);
                } else {
                    reply.found(&found);
                }
            }
            Event::Unpublish {
                client,
                keys,
                reply,
                ..
            } => {
                self.names.unpublish(&client, &keys);
                reply.ok();
            }
            Event::Refused { client, request } => {
                let who = client.map(|c| c.to_string()).unwrap_or("a tool".into());
                eprintln!(
                    "pmix-node: refused {request:?} from {who}: {}",
                    request.explain()
                );
            }
        }
    }

    fn on_frame(&mut self, f: Frame) {
        match f {
            Frame::Fence { nspace, data } => {
                self.fences
                    .entry(nspace.clone())
                    .or_default()
                    .theirs
                    .push_back(data);
                self.complete_fences(&nspace);
            }
            Frame::Want { tag, target } => {
                if let Err(e) = self.server.local_modex(&target.nspace, target.rank, tag) {
                    eprintln!("pmix-node: {e}");
                    self.send(&Frame::Have {
                        tag,
                        result: Err(Status::NOT_FOUND.0),
                    });
                }
            }
            Frame::Have { tag, result } => {
                if let Some(reply) = self.wanted.remove(&tag) {
                    match result {
                        Ok(d) => reply.ok(&d),
                        Err(s) => reply.fail(Status(s)),
                    }
                }
            }
            Frame::Abort { nspace, status } => {
                if self.exit_code == 0 {
                    self.exit_code = if status == 0 { 1 } else { status };
                }
                self.end_job(&nspace);
            }
            Frame::Done => self.peer_done = true,
        }
    }
}

fn main() -> ExitCode {
    let args = parse_args();
    // A fresh directory of a random name, not one named after the pid: a run killed before
    // its cleanup leaves its directory behind, and a later run given the same pid must not
    // fail on it.
    let dir = match tempfile::Builder::new().prefix("pmix-node.").tempdir() {
        Ok(d) => d,
        Err(e) => {
            let parent = std::env::temp_dir();
            eprintln!(
                "pmix-node: cannot create a directory in {}: {e}",
                parent.display()
            );
            return ExitCode::from(2);
        }
    };
    let result = run(args, dir.path());
    drop(dir);
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("pmix-node: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args, dir: &std::path::Path) -> Result<i32, Box<dyn std::error::Error>> {
    let (tx, rx) = mpsc::channel();
    let events = tx.clone();
    let server = Server::start(dir, &args.node, move |e| {
        let _ = events.send(Msg::Pmix(e));
    })?;
    let peer = match (&args.listen, &args.connect) {
        (Some(path), _) => {
            let listener = UnixListener::bind(path)?;
            Some(listener.accept()?.0)
        }
        (None, Some(path)) => {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match UnixStream::connect(path) {
                    Ok(s) => break Some(s),
                    Err(e) if Instant::now() > deadline => {
                        return Err(
                            format!("cannot reach the peer at {}: {e}", path.display()).into()
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        (None, None) => None,
    };
    if let Some(p) = &peer {
        let (stream, tx) = (p.try_clone()?, tx.clone());
        std::thread::spawn(move || read_frames(stream, tx));
    }
    let me = std::fs::metadata("/proc/self")?;
    let mut node = Node {
        server,
        first: args.listen.is_some() || peer.is_none(),
        alone: peer.is_none(),
        peer_done: false,
        peer,
        fences: HashMap::new(),
        wanted: HashMap::new(),
        next_tag: 0,
        names: Names::default(),
        waiting_lookups: Vec::new(),
        ranks: Vec::new(),
        connected: HashSet::new(),
        ending: HashSet::new(),
        exit_code: 0,
        counts: BTreeMap::new(),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let local_ranks: usize = args
        .jobs
        .iter()
        .flat_map(|j| &j.nodes)
        .filter(|(h, _)| *h == args.node)
        .map(|(_, n)| *n as usize)
        .sum();
    let oversubscribed = local_ranks > cores;
    for job in &args.jobs {
        let mut next = 0;
        let nodes = job
            .nodes
            .iter()
            .map(|(host, n)| {
                let ranks = (next..next + n).collect();
                next += n;
                JobNode {
                    host: host.clone(),
                    ranks,
                }
            })
            .collect();
        let mut layout = JobLayout::new(job.nspace.clone(), nodes)?;
        if let Some(u) = job.universe {
            layout = layout.with_universe_size(u);
        }
        let jobdir = dir.join(&job.nspace);
        std::fs::create_dir(&jobdir)?;
        node.server
            .register_job(&layout, &args.node, Some(&jobdir))?;
        let node_id = layout.node_id(&args.node)?;
        for &rank in layout.local_ranks(node_id) {
            node.server
                .register_client(&job.nspace, rank, me.uid(), me.gid())?;
            let mut env = node.server.client_env(&job.nspace, rank)?;
            if oversubscribed {
                let (k, v) = OPEN_MPI_OVERSUBSCRIBED;
                env.push((k.into(), v.into()));
            }
            let child = Command::new(&job.argv[0])
                .args(&job.argv[1..])
                .envs(env)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", job.argv[0]))?;
            node.ranks
                .push((Proc::new(job.nspace.clone(), rank), child));
        }
    }
    let deadline = Instant::now() + args.timeout;
    let mut running = node.ranks.len();
    while running > 0 {
        if Instant::now() > deadline {
            eprintln!(
                "pmix-node: timed out after {} s: killing the ranks",
                args.timeout.as_secs()
            );
            for (_, c) in &mut node.ranks {
                let _ = c.kill();
            }
            node.exit_code = 124;
        }
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Msg::Pmix(e)) => node.on_event(e),
            Ok(Msg::Peer(f)) => node.on_frame(f),
            Ok(Msg::PeerGone) => node.peer_gone(),
            Err(_) => {}
        }
        running = 0;
        let mut exits = Vec::new();
        for (p, child) in &mut node.ranks {
            match child.try_wait() {
                Ok(Some(status)) => exits.push((p.clone(), status)),
                Ok(None) => running += 1,
                Err(_) => {}
            }
        }
        for (p, status) in exits {
            let code = status.code().unwrap_or(128 + 9);
            println!("pmix-node: exit {p} code {code}");
            if code != 0 && node.exit_code == 0 {
                node.exit_code = code;
            }
            node.ranks.retain(|(q, _)| *q != p);
            let _ = node.server.deregister_client(&p.nspace, p.rank);
        }
    }
    // What the server said before the last rank exited (its finalize, say) still counts.
    while let Ok(msg) = rx.try_recv() {
        match msg {
            Msg::Pmix(e) => node.on_event(e),
            Msg::Peer(f) => node.on_frame(f),
            Msg::PeerGone => node.peer_gone(),
        }
    }
    node.send(&Frame::Done);
    for job in &args.jobs {
        let _ = node.server.deregister_job(&job.nspace);
    }
    let counts: Vec<String> = [
        "fences",
        "direct-modex",
        "local-modex",
        "connected",
        "finalized",
    ]
    .iter()
    .map(|k| format!("{k} {}", node.counts.get(k).copied().unwrap_or(0)))
    .collect();
    println!("pmix-node: {}", counts.join(" "));
    Ok(node.exit_code)
}
