//! The client side of PMI-1 (the node manager's server is crates/nm/src/pmi.rs): a rank
//! speaks `cmd=NAME key=value` lines on the descriptor named by `PMI_FD`. Only what the
//! benchmark needs: init, the kvs name, put, get, the fence and finalize.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

/// A rank's connection to its node manager's PMI server.
pub struct Pmi {
    rd: BufReader<UnixStream>,
    wr: UnixStream,
    pub rank: u32,
    pub size: u32,
    kvsname: String,
}

fn bad(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Fields of a reply line (as the server's parser: split at spaces, then at the first `=`).
fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_ascii_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Pmi {
    /// Connects through `PMI_FD`, `PMI_RANK`, `PMI_SIZE`; `None` when the process was not
    /// started by a PMI server (run by hand: one rank alone).
    pub fn from_env() -> io::Result<Option<Pmi>> {
        let Ok(fd) = std::env::var("PMI_FD") else {
            return Ok(None);
        };
        let num = |name: &str| -> io::Result<u32> {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(format!("{name} is missing or not a number")))
        };
        let fd: i32 = fd
            .parse()
            .map_err(|_| bad(format!("PMI_FD={fd:?} is not a descriptor")))?;
        let (rank, size) = (num("PMI_RANK")?, num("PMI_SIZE")?);
        // SAFETY: the descriptor the node manager left open for this process, used only here.
        let stream = unsafe { UnixStream::from_raw_fd(fd) };
        let mut p = Pmi {
            rd: BufReader::new(stream.try_clone()?),
            wr: stream,
            rank,
            size,
            kvsname: String::new(),
        };
        p.call(
            "cmd=init pmi_version=1 pmi_subversion=1",
            "response_to_init",
        )?;
        let r = p.call("cmd=get_my_kvsname", "my_kvsname")?;
        p.kvsname = r
            .get("kvsname")
            .cloned()
            .ok_or_else(|| bad("my_kvsname without kvsname".into()))?;
        Ok(Some(p))
    }

    /// Sends one command and reads its reply, which must be `cmd=want` with rc=0 (when it has
    /// an rc).
    fn call(&mut self, line: &str, want: &str) -> io::Result<BTreeMap<String, String>> {
        self.wr.write_all(format!("{line}\n").as_bytes())?;
        let mut reply = String::new();
        if self.rd.read_line(&mut reply)? == 0 {
            return Err(bad(format!(
                "the PMI server closed the connection (after {line:?})"
            )));
        }
        let f = fields(&reply);
        if f.get("cmd").map(String::as_str) != Some(want) {
            return Err(bad(format!("PMI: {line:?} answered {:?}", reply.trim())));
        }
        if f.get("rc").is_some_and(|rc| rc != "0") {
            return Err(bad(format!("PMI: {line:?} failed: {}", reply.trim())));
        }
        Ok(f)
    }

    /// Publishes `key` = `value` (visible to the other ranks after the next fence). Neither
    /// may contain spaces.
    pub fn put(&mut self, key: &str, value: &str) -> io::Result<()> {
        if value.contains(char::is_whitespace) || key.contains(char::is_whitespace) {
            return Err(bad(format!("PMI value with spaces: {key}={value}")));
        }
        let line = format!("cmd=put kvsname={} key={key} value={value}", self.kvsname);
        self.call(&line, "put_result").map(|_| ())
    }

    /// The value of `key` as of the last fence.
    pub fn get(&mut self, key: &str) -> io::Result<String> {
        let line = format!("cmd=get kvsname={} key={key}", self.kvsname);
        let f = self.call(&line, "get_result")?;
        f.get("value")
            .cloned()
            .ok_or_else(|| bad(format!("PMI get {key}: no value")))
    }

    /// The fence: returns once every rank of the job entered it, with every put before it
    /// visible.
    pub fn fence(&mut self) -> io::Result<()> {
        self.call("cmd=barrier_in", "barrier_out").map(|_| ())
    }

    pub fn finalize(&mut self) -> io::Result<()> {
        self.call("cmd=finalize", "finalize_ack").map(|_| ())
    }
}
