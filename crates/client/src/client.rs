//! A blocking client of the machine manager: one request per connection, answered by one
//! response. User commands and the embedded cluster use it.
//!
//! Local clients talk over the machine manager's Unix socket (`mm.sock` in the state
//! directory), where the kernel tells the machine manager who they are and no key is needed;
//! remote ones (`--mm HOST:PORT`, or `--key-file`) over TCP with the cluster key, which makes
//! them administrators (docs/daemons.md, "Trust model"), or with a
//! user's credential (`--user-key`, [`crate::user_key`]), which makes them that user.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cosched_core::JobId;
use cosched_storm::Key;
use cosched_storm::frame::{read_blocking, write_blocking};

use cosched_proto::DaemonError;
use cosched_proto::StateDir;
use cosched_proto::proto::*;

#[derive(Clone, Debug)]
pub struct Client {
    /// `HOST:PORT`, or the Unix socket's path.
    pub addr: String,
    key: Key,
    /// Where the key came from, to name it when the machine manager refuses it.
    key_file: Option<PathBuf>,
    /// The machine manager's Unix socket, for a local client.
    sock: Option<PathBuf>,
    /// The uid whose credential `key` is, for a client with a user key.
    user: Option<u32>,
}

impl Client {
    /// A client over TCP with the cluster key.
    pub fn new(addr: String, key: Key) -> Client {
        Client {
            addr,
            key,
            key_file: None,
            sock: None,
            user: None,
        }
    }

    /// A client over TCP that acts as Unix user `cred.uid`, by its credential (loaded from
    /// `file`, named when the machine manager refuses it).
    pub fn with_user_key(
        addr: String,
        cred: cosched_proto::user_key::UserKey,
        file: &Path,
    ) -> Client {
        Client {
            key_file: Some(file.to_path_buf()),
            user: Some(cred.uid),
            ..Client::new(addr, cred.key)
        }
    }

    /// A local client over the machine manager's Unix socket `sock`.
    pub fn local(sock: PathBuf) -> Client {
        Client {
            addr: sock.display().to_string(),
            key: local_key(),
            key_file: None,
            sock: Some(sock),
            user: None,
        }
    }

    /// The client of the cluster whose files are in `state_dir`: over its Unix socket when
    /// there is one, else over TCP to `mm.addr` with its key; `mm` and `key_file` choose TCP
    /// with that address and key.
    pub fn from_state_dir(
        state_dir: &StateDir,
        mm: Option<&str>,
        key_file: Option<&Path>,
    ) -> Result<Client, DaemonError> {
        use std::os::unix::fs::FileTypeExt;
        let sock = state_dir.sock_file();
        if mm.is_none() && key_file.is_none() {
            match std::fs::symlink_metadata(&sock) {
                Ok(m) if m.file_type().is_socket() => return Ok(Client::local(sock)),
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    return Err(DaemonError::StateDir {
                        dir: state_dir.root().to_path_buf(),
                        why: "not open to this user, so its mm.sock cannot be reached (for a cluster shared by several users the administrator makes it mode 0711 or 0755)".into(),
                    });
                }
                _ => {}
            }
        }
        let addr = match mm {
            Some(a) => a.to_string(),
            None => state_dir.addr()?,
        };
        let key_path = key_file
            .map(Path::to_path_buf)
            .unwrap_or_else(|| state_dir.key_file());
        let key = Key::load(&key_path)?;
        Ok(Client {
            key_file: Some(key_path),
            ..Client::new(addr, key)
        })
    }

    /// Sends `req` and returns the answer. A request the machine manager closed unread — it
    /// said so ([`cosched_storm::FrameError::Busy`]: newer connections of this peer displaced
    /// this one), or it closed before the request was written whole — was not acted on, and
    /// is sent again, with a new stamp, for up to [`UNREAD_RETRY_FOR`].
    pub fn request(&self, req: Request) -> Result<Response, DaemonError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(10);
        loop {
            match self.request_once(req.clone()) {
                Err(Attempt::Unread(_)) if start.elapsed() < UNREAD_RETRY_FOR => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(Attempt::Unread(e) | Attempt::Failed(e)) => return Err(e),
                Ok(Response::Error(why)) => return Err(DaemonError::Refused(why)),
                Ok(r) => return Ok(r),
            }
        }
    }

    /// One connection: `req` sent, the answer read.
    fn request_once(&self, req: Request) -> Result<Response, Attempt> {
        use std::net::ToSocketAddrs;
        let failed = |e: DaemonError| Attempt::Failed(e);
        if let Some(sock) = &self.sock {
            let connect = || -> std::io::Result<std::os::unix::net::UnixStream> {
                let (_dir, path) = cosched_proto::util::socket_path(sock)?;
                std::os::unix::net::UnixStream::connect(path)
            };
            let mut s = connect()
                .map_err(|e| DaemonError::Connect {
                    addr: sock.display().to_string(),
                    cause: e,
                })
                .map_err(failed)?;
            s.set_read_timeout(Some(Duration::from_secs(15)))
                .map_err(|e| failed(e.into()))?;
            write_blocking(&mut s, &self.key, &Hello::Client(Stamp::now(), req))
                .map_err(|e| Attempt::Unread(e.into()))?;
            return read_blocking(&mut s, &self.key).map_err(|e| Attempt::of_answer(e.into()));
        }
        let sock = self
            .addr
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                DaemonError::Config(format!(
                    "machine manager address {:?} is not a reachable HOST:PORT (--mm)",
                    self.addr
                ))
            })
            .map_err(failed)?;
        let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(3))
            .map_err(|e| DaemonError::Connect {
                addr: self.addr.clone(),
                cause: e,
            })
            .map_err(failed)?;
        s.set_nodelay(true).map_err(|e| failed(e.into()))?;
        s.set_read_timeout(Some(Duration::from_secs(15)))
            .map_err(|e| failed(e.into()))?;
        let hello = match self.user {
            Some(uid) => Hello::User(uid, Stamp::now(), req),
            None => Hello::Client(Stamp::now(), req),
        };
        write_blocking(&mut s, &self.key, &hello).map_err(|e| Attempt::Unread(e.into()))?;
        read_blocking(&mut s, &self.key).map_err(|e| match e {
            cosched_storm::FrameError::Refused => {
                let file = self
                    .key_file
                    .as_deref()
                    .map_or_else(|| "use".into(), |p| p.display().to_string());
                Attempt::Failed(DaemonError::Refused(match self.user {
                    Some(uid) => format!(
                        "authentication failed: the user key in {file} is not uid {uid}'s on this cluster (a forged or old key, or the cluster key was rotated)"
                    ),
                    None => format!(
                        "authentication failed: the key in {file} does not match the cluster's"
                    ),
                }))
            }
            e => Attempt::of_answer(e.into()),
        })
    }

    /// Submits a job; one too large for a request (its environment, mostly) is refused here
    /// with the limit named, since the machine manager would drop it unread.
    pub fn submit(&self, req: SubmitRequest) -> Result<JobId, DaemonError> {
        cosched_proto::jobio::check_submit_size(&req).map_err(DaemonError::Refused)?;
        match self.request(Request::Submit(Box::new(req)))? {
            Response::Submitted(id) => Ok(id),
            other => Err(unexpected(other)),
        }
    }

    /// Submits `cmd` on `procs` PEs with no limit, from the current directory.
    pub fn submit_simple(&self, procs: u32, cmd: &[&str]) -> Result<JobId, DaemonError> {
        self.submit(SubmitRequest {
            mem: None,
            procs,
            time_limit_us: None,
            class: None,
            name: None,
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            user: None,
            io: Default::default(),
            sched: Default::default(),
            layout: None,
            hold: false,
        })
    }

    /// Jobs by id (every job if `ids` is empty).
    pub fn jobs(&self, ids: &[JobId]) -> Result<Vec<JobInfo>, DaemonError> {
        self.query(
            JobQuery {
                ids: ids.to_vec(),
                ..JobQuery::default()
            },
            None,
        )
    }

    /// Every job `q` selects (at most `max`, the first in id order), fetched page by page:
    /// each answer stays far below the frame limit however many jobs
    /// the machine manager holds.
    pub fn query(&self, mut q: JobQuery, max: Option<usize>) -> Result<Vec<JobInfo>, DaemonError> {
        let mut all: Vec<JobInfo> = Vec::new();
        loop {
            if let Some(m) = max {
                let left = m.saturating_sub(all.len());
                if left == 0 {
                    return Ok(all);
                }
                q.limit = left.min(MAX_PAGE_JOBS as usize) as u32;
            }
            let page = match self.request(Request::Jobs(q.clone()))? {
                Response::Jobs(p) => p,
                other => return Err(unexpected(other)),
            };
            let got = page.jobs.len();
            if let Some(last) = page.jobs.last() {
                q.after = Some(last.id());
            }
            q.skip += got as u32;
            all.extend(page.jobs);
            // An empty page with more to come cannot happen (a page holds at least one
            // record); stopping there keeps a confused answer from looping forever.
            if !page.more || got == 0 {
                return Ok(all);
            }
        }
    }

    pub fn status(&self) -> Result<StatusInfo, DaemonError> {
        match self.request(Request::Status)? {
            Response::Status(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// Drains, sets down or resumes nodes (administrators only).
    pub fn node(
        &self,
        op: cosched_proto::proto::NodeOp,
        nodes: &[String],
        reason: Option<&str>,
    ) -> Result<(), DaemonError> {
        match self.request(Request::Node {
            op,
            nodes: nodes.to_vec(),
            reason: reason.map(str::to_string),
        })? {
            Response::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Has the machine manager issue user `uid` a new credential serial (revoking the
    /// earlier ones), valid until `expires_us` if given.
    pub fn credential(
        &self,
        uid: u32,
        expires_us: Option<i64>,
    ) -> Result<cosched_proto::user_key::Credential, DaemonError> {
        match self.request(Request::Credential { uid, expires_us })? {
            Response::Credential(c) => Ok(c),
            other => Err(unexpected(other)),
        }
    }

    /// Has the machine manager read its configuration again; returns what changes.
    pub fn reconfigure(&self) -> Result<String, DaemonError> {
        match self.request(Request::Reconfigure)? {
            Response::Reconfigured(what) => Ok(what),
            other => Err(unexpected(other)),
        }
    }

    /// Has the machine manager give every daemon a new cluster key, the old one accepted for
    /// `grace_us` more; returns what it did.
    pub fn rotate_key(&self, grace_us: i64) -> Result<String, DaemonError> {
        match self.request(Request::RotateKey { grace_us })? {
            Response::KeyRotated(what) => Ok(what),
            other => Err(unexpected(other)),
        }
    }

    /// Each live job's expected start and end ([`Request::Forecast`]).
    pub fn forecast(&self) -> Result<Vec<cosched_policy::forecast::Expected>, DaemonError> {
        match self.request(Request::Forecast)? {
            Response::Forecast(f) => Ok(f),
            other => Err(unexpected(other)),
        }
    }

    /// What the communication monitors of a node (name or number) recorded.
    pub fn monitor(&self, node: &str) -> Result<cosched_proto::proto::NodeMonitor, DaemonError> {
        match self.request(Request::Monitor {
            node: node.to_string(),
        })? {
            Response::Monitor(m) => Ok(m),
            other => Err(unexpected(other)),
        }
    }

    /// A rank's standard output and error, and where they are when the job gave
    /// `--output`/`--error` patterns (empty otherwise).
    #[allow(clippy::type_complexity)]
    pub fn output(
        &self,
        job: JobId,
        rank: u32,
    ) -> Result<(Vec<u8>, Vec<u8>, Vec<String>), DaemonError> {
        let o = self.rank_output(job, rank, false)?;
        Ok((o.stdout, o.stderr, o.files))
    }

    /// A rank's output with the files' whole sizes: at most [`MAX_OUTPUT`](cosched_proto::proto::MAX_OUTPUT) bytes
    /// of each file, from its beginning or (`tail`) its end.
    pub fn rank_output(
        &self,
        job: JobId,
        rank: u32,
        tail: bool,
    ) -> Result<RankOutput, DaemonError> {
        self.task_output(job, None, rank, tail)
    }

    /// [`Client::rank_output`] of a rank of `job`, or of its step `step`.
    pub fn task_output(
        &self,
        job: JobId,
        step: Option<u32>,
        rank: u32,
        tail: bool,
    ) -> Result<RankOutput, DaemonError> {
        let req = Request::Output {
            job,
            step,
            rank,
            tail,
        };
        match self.request(req)? {
            Response::Output(o) => Ok(o),
            other => Err(unexpected(other)),
        }
    }

    /// Starts a step in a running allocation (`srun` inside a job).
    pub fn step(&self, req: StepRequest) -> Result<StepInfo, DaemonError> {
        match self.request(Request::Step(Box::new(req)))? {
            Response::Step(s) => Ok(*s),
            other => Err(unexpected(other)),
        }
    }

    /// Cancel, suspend, resume or shut down.
    pub fn simple(&self, req: Request) -> Result<(), DaemonError> {
        match self.request(req)? {
            Response::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Waits until every job has ended (polling every 20 ms); returns their records.
    pub fn wait(&self, ids: &[JobId], timeout: Duration) -> Result<Vec<JobInfo>, DaemonError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            let jobs = self.jobs(ids)?;
            if jobs.iter().all(|j| j.state.is_final()) {
                return Ok(jobs);
            }
            if start.elapsed() >= timeout {
                let left: Vec<String> = jobs
                    .iter()
                    .filter(|j| !j.state.is_final())
                    .map(|j| j.id().to_string())
                    .collect();
                return Err(DaemonError::Timeout(format!(
                    "jobs {} still not ended after {timeout:?} (raise --timeout)",
                    left.join(", ")
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

/// How long a request closed unread is sent again (see [`Client::request`]).
pub const UNREAD_RETRY_FOR: Duration = Duration::from_secs(10);

/// Why one connection's request got no answer.
enum Attempt {
    /// The request was not read, so not acted on: it may be sent again.
    Unread(DaemonError),
    Failed(DaemonError),
}

impl Attempt {
    /// A failure to read the answer: the request was not read if the machine manager said
    /// so, or reset the connection (a socket closed with data it had not read is reset, not
    /// closed: had it read the request, it would have answered or closed).
    fn of_answer(e: DaemonError) -> Attempt {
        use cosched_storm::FrameError;
        match e {
            DaemonError::Frame(FrameError::Busy) => Attempt::Unread(e),
            DaemonError::Frame(FrameError::Io(ref io))
                if io.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                Attempt::Unread(e)
            }
            e => Attempt::Failed(e),
        }
    }
}

fn unexpected(r: Response) -> DaemonError {
    DaemonError::Refused(format!("unexpected answer from the machine manager: {r:?}"))
}
