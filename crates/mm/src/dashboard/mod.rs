//! The machine manager's web dashboard (`cosched mm --http ADDR`, `cluster up --http ADDR`):
//! the live node map and Ousterhout matrix, the queue, utilization and queue length over the
//! last hour, and a page per job.
//!
//! Off by default. Read-only by construction: it reads a [`Snapshot`] of the core through the
//! shell and never sends a client request, so nothing it is asked can change a job. Every
//! page needs the random token the machine manager makes at start-up, logs and writes to
//! `STATE_DIR/http-token` (0600): the dashboard shows every user's jobs and commands, as an
//! administrator's `cosched queue` does.
//!
//! HTTP/1.1 on hyper, one request per connection, GET and HEAD only; at most
//! [`MAX_CONNECTIONS`] at once, a request head of at most [`MAX_HEAD`] bytes arriving within
//! [`READ_TIMEOUT`], a connection closed after [`CONNECTION_TIMEOUT`] whatever it does, so slow
//! or oversized clients cannot starve the rest. The pages ([`pages`]) are server-rendered
//! HTML, and a few lines of JavaScript poll `/api/view` (JSON) once a second to redraw the
//! overview.

mod pages;
mod snapshot;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot};

use cosched_proto::proto::{JobInfo, StatusInfo};
use cosched_proto::{DaemonError, StateDir};

/// What the dashboard shows, read from the core at one instant.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub now_us: i64,
    pub status: StatusInfo,
    /// Live jobs and those ended in the last hour, by id.
    pub jobs: Vec<JobInfo>,
}

/// How the dashboard asks the shell for a [`Snapshot`].
pub type Ask = mpsc::UnboundedSender<oneshot::Sender<Snapshot>>;

/// How often utilization and queue length are sampled, and how many samples are kept (an
/// hour's worth).
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const SAMPLES: usize = 720;
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;
/// A request's head must arrive within this long, and be at most this large (a larger one is
/// answered 431 and the connection closed).
const READ_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_HEAD: usize = 16 * 1024;
/// A connection is closed after this long whatever it is doing, so a client that never reads
/// its answer cannot hold one of the [`MAX_CONNECTIONS`] slots.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// One sample of the machine: when, busy PEs over all PEs, jobs waiting, jobs running.
#[derive(Clone, Copy, Debug, Serialize)]
pub(super) struct Sample {
    t_us: i64,
    util: f64,
    queued: usize,
    running: usize,
}

impl Sample {
    fn of(s: &Snapshot) -> Sample {
        let total = s.status.running.len().max(1);
        let busy = s.status.running.iter().filter(|p| p.is_some()).count();
        Sample {
            t_us: s.now_us,
            util: busy as f64 / total as f64,
            queued: s
                .jobs
                .iter()
                .filter(|j| j.state.as_str() == "queued")
                .count(),
            running: s
                .jobs
                .iter()
                .filter(|j| j.state.as_str() == "running")
                .count(),
        }
    }
}

struct Server {
    token: String,
    ask: Ask,
    history: Mutex<VecDeque<Sample>>,
}

/// Binds `addr`, makes the token, writes `http-token` and `http.addr` in the state directory,
/// logs the URL and serves in the background.
pub async fn start(addr: &str, state: &StateDir, ask: Ask) -> Result<(), DaemonError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| DaemonError::Bind {
            addr: addr.to_string(),
            cause: e,
        })?;
    let bound = listener.local_addr()?;
    let token = format!(
        "{:016x}{:016x}",
        cosched_proto::util::random_u64(),
        cosched_proto::util::random_u64()
    );
    write_private(&state.http_token_file(), &format!("{token}\n"))?;
    cosched_proto::util::write_atomic(&state.http_addr_file(), &format!("{bound}\n"))?;
    tracing::info!(
        "dashboard (read-only): http://{bound}/?token={token} (token also in {})",
        state.http_token_file().display()
    );
    let server = Arc::new(Server {
        token,
        ask,
        history: Mutex::new(VecDeque::new()),
    });
    tokio::spawn(sample_loop(server.clone()));
    tokio::spawn(accept_loop(listener, server));
    Ok(())
}

/// Writes `path` readable by its owner only, whatever the umask.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(text.as_bytes())
}

async fn snapshot(server: &Server) -> Option<Snapshot> {
    let (tx, rx) = oneshot::channel();
    server.ask.send(tx).ok()?;
    rx.await.ok()
}

async fn sample_loop(server: Arc<Server>) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tick.tick().await;
        let Some(s) = snapshot(&server).await else {
            return;
        };
        let mut h = server.history.lock().unwrap();
        h.push_back(Sample::of(&s));
        while h.len() > SAMPLES {
            h.pop_front();
        }
    }
}

async fn accept_loop(listener: TcpListener, server: Arc<Server>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((conn, _)) = listener.accept().await else {
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(respond(&server, &req).await) }
            });
            // One request per connection: the page's script opens a new one each poll.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(conn), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
        });
    }
}

/// A response: status, content type, body.
struct Reply {
    status: StatusCode,
    kind: &'static str,
    body: String,
}

impl Reply {
    fn html(body: String) -> Reply {
        Reply {
            status: StatusCode::OK,
            kind: "text/html; charset=utf-8",
            body,
        }
    }
    fn error(status: StatusCode, why: &str) -> Reply {
        Reply {
            status,
            kind: "text/plain; charset=utf-8",
            body: format!("{why}\n"),
        }
    }
}

/// Answers one request: GET and HEAD routed (hyper leaves out a HEAD answer's body), anything
/// else refused; every answer uncacheable and never framed or sniffed.
async fn respond(server: &Server, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = match *req.method() {
        Method::GET | Method::HEAD => route(server, req.uri()).await,
        _ => Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the dashboard is read-only: GET only",
        ),
    };
    let mut res = Response::new(Full::new(Bytes::from(reply.body)));
    *res.status_mut() = reply.status;
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(reply.kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// Whether two strings are equal, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

async fn route(server: &Server, uri: &hyper::Uri) -> Reply {
    let path = uri.path();
    let token = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .unwrap_or("");
    if path == "/favicon.ico" {
        return Reply::error(StatusCode::NOT_FOUND, "no icon");
    }
    if !same(token, &server.token) {
        return Reply::error(
            StatusCode::FORBIDDEN,
            "wrong or missing token: open the URL the machine manager logged at start-up (the token is in STATE_DIR/http-token)",
        );
    }
    let Some(snap) = snapshot(server).await else {
        return Reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the machine manager is stopping",
        );
    };
    let history: Vec<Sample> = server.history.lock().unwrap().iter().copied().collect();
    match path {
        "/" => Reply::html(pages::overview_page(&snap, &history)),
        "/api/view" => Reply {
            status: StatusCode::OK,
            kind: "application/json",
            body: pages::view_json(&snap, &history).to_string(),
        },
        p => match p
            .strip_prefix("/job/")
            .and_then(|id| id.parse::<u64>().ok())
        {
            Some(id) => match snap.jobs.iter().find(|j| j.id().0 == id) {
                Some(j) => Reply::html(pages::job_page(j, &snap, &server.token)),
                None => Reply::error(
                    StatusCode::NOT_FOUND,
                    &format!(
                        "job {id} is neither live nor ended within the hour (`cosched acct` has every job)"
                    ),
                ),
            },
            None => Reply::error(StatusCode::NOT_FOUND, "no such page"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_compares() {
        assert_eq!(
            pages::esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }

    /// A dashboard on loopback over an empty machine; its address, token and state directory.
    async fn serving() -> (String, String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let (ask, mut asked) = mpsc::unbounded_channel::<oneshot::Sender<Snapshot>>();
        tokio::spawn(async move {
            while let Some(reply) = asked.recv().await {
                let _ = reply.send(Snapshot {
                    now_us: 0,
                    status: StatusInfo {
                        policy: "easy".into(),
                        nodes_total: 0,
                        pes_per_node: 1,
                        fanout: 2,
                        tree_depth: 0,
                        nodes: Vec::new(),
                        slots: Vec::new(),
                        active_slot: None,
                        running: Vec::new(),
                        switches: 0,
                        partitions: Vec::new(),
                    },
                    jobs: Vec::new(),
                });
            }
        });
        start("127.0.0.1:0", &state, ask).await.unwrap();
        let addr = std::fs::read_to_string(state.http_addr_file()).unwrap();
        let token = std::fs::read_to_string(state.http_token_file()).unwrap();
        (addr.trim().into(), token.trim().into(), dir)
    }

    /// Sends `request` on a new connection and reads until the server closes it.
    async fn exchange(addr: &str, request: &[u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        // A server that refuses a request may close before reading all of it: the write may
        // fail and the read end in a reset; what it answered before that is what counts.
        let _ = c.write_all(request).await;
        let mut out = Vec::new();
        let read = c.read_to_end(&mut out);
        let _ = tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .expect("the server closes the connection");
        String::from_utf8_lossy(&out).into_owned()
    }

    fn get(target: &str) -> Vec<u8> {
        format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
    }

    #[tokio::test]
    async fn answers_carry_the_security_headers_and_head_has_no_body() {
        let (addr, token, _dir) = serving().await;
        let out = exchange(&addr, &get(&format!("/api/view?token={token}"))).await;
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        for h in [
            "content-type: application/json",
            "cache-control: no-store",
            "referrer-policy: no-referrer",
            "x-content-type-options: nosniff",
            "x-frame-options: DENY",
            "connection: close",
        ] {
            assert!(out.contains(h), "{h} missing: {out}");
        }
        assert!(out.contains("\"policy\":\"easy\""), "{out}");
        let head = format!("HEAD /?token={token} HTTP/1.1\r\nHost: x\r\n\r\n");
        let out = exchange(&addr, head.as_bytes()).await;
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.contains("content-length: "), "{head}");
        assert_eq!(body, "", "a HEAD answer has no body");
        let out = exchange(&addr, b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
        let out = exchange(&addr, &get("/api/view?token=wrong")).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    }

    #[tokio::test]
    async fn an_oversized_request_head_is_refused_and_the_dashboard_keeps_serving() {
        let (addr, token, _dir) = serving().await;
        let big = format!(
            "GET /?token={token} HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
            "a".repeat(4 * MAX_HEAD)
        );
        let out = exchange(&addr, big.as_bytes()).await;
        assert!(
            out.is_empty() || out.starts_with("HTTP/1.1 431"),
            "an oversized head is not served: {out}"
        );
        let out = exchange(&addr, &get(&format!("/?token={token}"))).await;
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    }

    #[tokio::test]
    async fn a_client_stalled_mid_request_is_cut_off_and_others_are_served() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, token, _dir) = serving().await;
        let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stalled
            .write_all(format!("GET /?token={token} HTTP/1.1\r\nHost:").as_bytes())
            .await
            .unwrap();
        // Others are served meanwhile, also more than the connection limit one after another.
        for _ in 0..MAX_CONNECTIONS + 1 {
            let out = exchange(&addr, &get(&format!("/api/view?token={token}"))).await;
            assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        }
        let mut out = Vec::new();
        let closed = tokio::time::timeout(
            READ_TIMEOUT + Duration::from_secs(10),
            stalled.read_to_end(&mut out),
        )
        .await;
        assert!(
            closed.is_ok(),
            "the stalled connection is closed once its head is overdue"
        );
        let out = String::from_utf8_lossy(&out);
        assert!(
            !out.contains("200 OK"),
            "a request whose head never ends is not answered: {out}"
        );
    }
}
