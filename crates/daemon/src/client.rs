//! A blocking client of the machine manager: one request per connection, answered by one
//! response. User commands and the embedded cluster use it.

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use cosched_core::JobId;
use cosched_storm::Key;
use cosched_storm::frame::{read_blocking, write_blocking};

use crate::DaemonError;
use crate::StateDir;
use crate::proto::*;

#[derive(Clone, Debug)]
pub struct Client {
    pub addr: String,
    key: Key,
}

impl Client {
    pub fn new(addr: String, key: Key) -> Client {
        Client { addr, key }
    }

    /// The client of the cluster whose files are in `state_dir`; `mm` and `key_file`
    /// override the address and key found there.
    pub fn from_state_dir(
        state_dir: &StateDir,
        mm: Option<&str>,
        key_file: Option<&Path>,
    ) -> Result<Client, DaemonError> {
        let addr = match mm {
            Some(a) => a.to_string(),
            None => state_dir.addr()?,
        };
        let key_path = key_file
            .map(Path::to_path_buf)
            .unwrap_or_else(|| state_dir.key_file());
        let key = Key::load(&key_path)?;
        Ok(Client { addr, key })
    }

    pub fn request(&self, req: Request) -> Result<Response, DaemonError> {
        use std::net::ToSocketAddrs;
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
            })?;
        let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(3)).map_err(|e| {
            DaemonError::Connect {
                addr: self.addr.clone(),
                cause: e,
            }
        })?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(15)))?;
        write_blocking(&mut s, &self.key, &Hello::Client(req))?;
        match read_blocking(&mut s, &self.key)? {
            Response::Error(why) => Err(DaemonError::Refused(why)),
            r => Ok(r),
        }
    }

    /// Submits a job; one too large for a request (its environment, mostly) is refused here
    /// with the limit named, since the machine manager would drop it unread.
    pub fn submit(&self, req: SubmitRequest) -> Result<JobId, DaemonError> {
        crate::jobio::check_submit_size(&req).map_err(DaemonError::Refused)?;
        match self.request(Request::Submit(req))? {
            Response::Submitted(id) => Ok(id),
            other => Err(unexpected(other)),
        }
    }

    /// Submits `cmd` on `procs` PEs with no limit, from the current directory.
    pub fn submit_simple(&self, procs: u32, cmd: &[&str]) -> Result<JobId, DaemonError> {
        self.submit(SubmitRequest {
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
        })
    }

    /// Jobs by id (every job if `ids` is empty).
    pub fn jobs(&self, ids: &[JobId]) -> Result<Vec<JobInfo>, DaemonError> {
        match self.request(Request::Jobs { ids: ids.to_vec() })? {
            Response::Jobs(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    pub fn status(&self) -> Result<StatusInfo, DaemonError> {
        match self.request(Request::Status)? {
            Response::Status(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// What the communication monitors of a node (name or number) recorded.
    pub fn monitor(&self, node: &str) -> Result<crate::proto::NodeMonitor, DaemonError> {
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
        match self.request(Request::Output { job, rank })? {
            Response::Output {
                stdout,
                stderr,
                files,
            } => Ok((stdout, stderr, files)),
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

fn unexpected(r: Response) -> DaemonError {
    DaemonError::Refused(format!("unexpected answer from the machine manager: {r:?}"))
}
