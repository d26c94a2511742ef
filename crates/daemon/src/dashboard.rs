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
//! A tiny HTTP/1.1 server on tokio (one request per connection, GET and HEAD only): the pages
//! are server-rendered HTML, and a few lines of JavaScript poll `/api/view` (JSON) once a
//! second to redraw the overview.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::proto::{JobInfo, StatusInfo};
use crate::views::dur;
use crate::{DaemonError, StateDir};

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
/// A request's head must arrive within this long, and be at most this large.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_HEAD: usize = 16 * 1024;

/// One sample of the machine: when, busy PEs over all PEs, jobs waiting, jobs running.
#[derive(Clone, Copy, Debug, Serialize)]
struct Sample {
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
        crate::util::random_u64(),
        crate::util::random_u64()
    );
    write_private(&state.http_token_file(), &format!("{token}\n"))?;
    crate::util::write_atomic(&state.http_addr_file(), &format!("{bound}\n"))?;
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
            let _ = serve(conn, &server).await;
        });
    }
}

/// A response: status line, content type, body.
struct Reply {
    status: &'static str,
    kind: &'static str,
    body: String,
}

impl Reply {
    fn html(body: String) -> Reply {
        Reply {
            status: "200 OK",
            kind: "text/html; charset=utf-8",
            body,
        }
    }
    fn error(status: &'static str, why: &str) -> Reply {
        Reply {
            status,
            kind: "text/plain; charset=utf-8",
            body: format!("{why}\n"),
        }
    }
}

async fn serve(mut conn: TcpStream, server: &Server) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    if tokio::time::timeout(READ_TIMEOUT, read).await.is_err() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&head);
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let reply = match method {
        "GET" | "HEAD" => route(server, target).await,
        "" => return Ok(()),
        _ => Reply::error(
            "405 Method Not Allowed",
            "the dashboard is read-only: GET only",
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nX-Content-Type-Options: nosniff\r\n\
         X-Frame-Options: DENY\r\n\r\n",
        reply.status,
        reply.kind,
        reply.body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(reply.body.as_bytes());
    }
    conn.write_all(&out).await?;
    conn.shutdown().await
}

/// Whether two strings are equal, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

async fn route(server: &Server, target: &str) -> Reply {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let token = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .unwrap_or("");
    if path == "/favicon.ico" {
        return Reply::error("404 Not Found", "no icon");
    }
    if !same(token, &server.token) {
        return Reply::error(
            "403 Forbidden",
            "wrong or missing token: open the URL the machine manager logged at start-up (the token is in STATE_DIR/http-token)",
        );
    }
    let Some(snap) = snapshot(server).await else {
        return Reply::error("503 Service Unavailable", "the machine manager is stopping");
    };
    let history: Vec<Sample> = server.history.lock().unwrap().iter().copied().collect();
    match path {
        "/" => Reply::html(overview_page(&snap, &history)),
        "/api/view" => Reply {
            status: "200 OK",
            kind: "application/json",
            body: view_json(&snap, &history).to_string(),
        },
        p => match p
            .strip_prefix("/job/")
            .and_then(|id| id.parse::<u64>().ok())
        {
            Some(id) => match snap.jobs.iter().find(|j| j.id().0 == id) {
                Some(j) => Reply::html(job_page(j, &snap, &server.token)),
                None => Reply::error(
                    "404 Not Found",
                    &format!(
                        "job {id} is neither live nor ended within the hour (`cosched acct` has every job)"
                    ),
                ),
            },
            None => Reply::error("404 Not Found", "no such page"),
        },
    }
}

fn user(j: &JobInfo) -> String {
    j.user.map_or_else(|| "-".into(), crate::util::user_name)
}

fn wait_us(j: &JobInfo, now_us: i64) -> Option<i64> {
    let r = &j.record;
    r.wait()
        .map(|w| w.as_micros())
        .or_else(|| (!j.state.is_final()).then(|| now_us - r.submit.as_micros()))
}

/// What `/api/view` answers and the overview page starts from.
fn view_json(s: &Snapshot, history: &[Sample]) -> Value {
    let st = &s.status;
    let jobs: Vec<Value> = s
        .jobs
        .iter()
        .map(|j| {
            json!({
                "id": j.id().0,
                "name": j.name,
                "user": user(j),
                "class": j.class,
                "pes": j.procs(),
                "state": j.state.as_str(),
                "held": j.held,
                "slot": crate::views::job_slots(st, j.id()),
                "wait": dur(wait_us(j, s.now_us)),
                "run": dur(Some(j.run_us)),
                "why": j.reason.as_deref().or(j.error.as_deref()).unwrap_or(""),
            })
        })
        .collect();
    let now = Sample::of(s);
    json!({
        "now_us": s.now_us,
        "policy": st.policy,
        "pes_per_node": st.pes_per_node,
        "nodes": st.nodes.iter().map(|n| json!({"name": n.name, "state": n.state})).collect::<Vec<_>>(),
        "slots": st.slots,
        "active_slot": st.active_slot,
        "running": st.running,
        "switches": st.switches,
        "jobs": jobs,
        "util": now.util,
        "queued": now.queued,
        "history": history.iter().chain(std::iter::once(&now)).map(|h| json!([h.t_us, h.util, h.queued])).collect::<Vec<_>>(),
    })
}

/// Text for HTML: `<`, `>`, `&` and quotes escaped (job names and commands are users').
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:sans-serif;margin:1em;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 6px;text-align:left}\
.grid td{width:1.4em;text-align:center;font-family:monospace;border:1px solid #ccc}\
.grid td.sep{border:none;width:.4em}.idle{color:#aaa}.down{background:#f88;color:#700}\
.active{font-weight:bold;background:#ffd}.jobs tr:nth-child(even){background:#f4f4f4}\
h2{font-size:1.1em;margin:.8em 0 .2em}#err{color:#b00}a{color:#036}";

/// The overview: the page's frame with the first view inside; the script draws it and
/// redraws it from `/api/view` every second.
fn overview_page(s: &Snapshot, history: &[Sample]) -> String {
    // `<` never appears raw inside the script, so no string in the JSON can end it.
    let data = view_json(s, history).to_string().replace('<', "\\u003c");
    format!(
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>cosched dashboard</title><style>{STYLE}</style></head>
<body>
<h1>cosched <small id="head"></small></h1>
<div id="err"></div>
<h2>Nodes (letter = job running now, X = node down)</h2><table class="grid" id="nodes"></table>
<h2>Ousterhout matrix (&#9654; = active slot)</h2><table class="grid" id="matrix"></table>
<h2>Utilization and queue length, last hour</h2>
<svg id="chart" width="640" height="140" style="border:1px solid #ccc"></svg>
<div><span style="color:#2a7">&#9644; utilization (0&ndash;100%)</span> &nbsp; <span style="color:#c50">&#9644; jobs waiting (max <span id="qmax"></span>)</span></div>
<h2>Queue</h2><table class="jobs" id="jobs"></table>
<p><small>Read-only. Refreshed every second.</small></p>
<script>
const T = new URLSearchParams(location.search).get('token') || '';
const L = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const esc = s => String(s).replace(/[&<>"']/g, c => ({{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}})[c]);
const letter = id => L[(id - 1) % L.length];
const colour = id => 'hsl(' + (id * 67 % 360) + ',65%,75%)';
function cell(id, down) {{
  if (id === null) return down ? '<td class="down">X</td>' : '<td class="idle">.</td>';
  return '<td style="background:' + colour(id) + '" title="job ' + id + '">' + letter(id) + '</td>';
}}
function render(v) {{
  const per = v.pes_per_node, down = pe => (v.nodes[Math.floor(pe / per)] || {{}}).state !== 'up';
  const up = v.nodes.filter(n => n.state === 'up').length;
  document.getElementById('head').textContent = 'policy ' + v.policy + ', ' + up + '/' + v.nodes.length +
    ' nodes up × ' + per + ' PEs, utilization ' + Math.round(v.util * 100) + '%, ' + v.queued + ' waiting, ' +
    v.switches + ' switches';
  document.getElementById('nodes').innerHTML = v.nodes.map((n, i) => '<tr><th>' + esc(n.name) + '</th>' +
    v.running.slice(i * per, (i + 1) * per).map(j => cell(j, n.state !== 'up')).join('') +
    '<td class="sep"></td><td>' + esc(n.state) + '</td></tr>').join('');
  document.getElementById('matrix').innerHTML = v.slots.map((row, s) =>
    '<tr' + (s === v.active_slot ? ' class="active"' : '') + '><th>' + (s === v.active_slot ? '&#9654; ' : '') +
    'slot ' + s + '</th>' + row.map((j, pe) => (pe > 0 && pe % per === 0 ? '<td class="sep"></td>' : '') +
    cell(j, down(pe))).join('') + '</tr>').join('');
  const cols = ['', 'id', 'name', 'user', 'class', 'PEs', 'state', 'slot', 'wait', 'run', 'reason/error'];
  document.getElementById('jobs').innerHTML = '<tr>' + cols.map(c => '<th>' + c + '</th>').join('') + '</tr>' +
    v.jobs.map(j => '<tr id="job-' + j.id + '"><td style="background:' + colour(j.id) + '">' + letter(j.id) +
      '</td><td><a href="/job/' + j.id + '?token=' + esc(T) + '">' + j.id + '</a></td><td>' + esc(j.name) +
      '</td><td>' + esc(j.user) + '</td><td>' + esc(j.class || '-') + '</td><td>' + j.pes + '</td><td>' +
      esc(j.state + (j.held ? '(held)' : '')) + '</td><td>' + esc(j.slot) + '</td><td>' + esc(j.wait) +
      '</td><td>' + esc(j.run) + '</td><td>' + esc(j.why) + '</td></tr>').join('');
  const W = 640, H = 140, t0 = v.now_us - 3600e6, x = t => ((t - t0) / 3600e6 * W).toFixed(1);
  const qmax = Math.max(1, ...v.history.map(h => h[2]));
  document.getElementById('qmax').textContent = qmax;
  const line = (f, c) => '<polyline fill="none" stroke="' + c + '" stroke-width="2" points="' +
    v.history.map(h => x(h[0]) + ',' + (H - 5 - f(h) * (H - 10)).toFixed(1)).join(' ') + '"/>';
  document.getElementById('chart').innerHTML = line(h => h[1], '#2a7') + line(h => h[2] / qmax, '#c50');
}}
async function poll() {{
  try {{
    const r = await fetch('/api/view?token=' + encodeURIComponent(T));
    if (!r.ok) throw new Error(r.status + ' ' + (await r.text()));
    render(await r.json());
    document.getElementById('err').textContent = '';
  }} catch (e) {{
    document.getElementById('err').textContent = 'machine manager unreachable: ' + e.message;
  }}
}}
render({data});
setInterval(poll, 1000);
</script>
</body></html>
"#
    )
}

/// A job's page: its record, server-rendered, reloaded every two seconds.
fn job_page(j: &JobInfo, s: &Snapshot, token: &str) -> String {
    let r = &j.record;
    let ago = |t: Option<cosched_core::Time>| match t {
        Some(t) => format!("{} ago", dur(Some(s.now_us - t.as_micros()))),
        None => "-".into(),
    };
    let nodes: Vec<String> = j
        .placement
        .iter()
        .map(|p| {
            let name = s
                .status
                .nodes
                .iter()
                .find(|n| n.id == p.node)
                .map_or_else(|| p.node.to_string(), |n| n.name.clone());
            format!(
                "{name} (ranks {})",
                p.ranks
                    .iter()
                    .map(|r| r.0.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect();
    let rows: Vec<(&str, String)> = vec![
        ("id", r.id.to_string()),
        ("name", j.name.clone()),
        ("user", user(j)),
        ("class", j.class.clone().unwrap_or_else(|| "-".into())),
        (
            "state",
            format!(
                "{}{}",
                j.state.as_str(),
                if j.held { " (held)" } else { "" }
            ),
        ),
        ("PEs", r.procs.to_string()),
        ("slot", crate::views::job_slots(&s.status, r.id)),
        (
            "nodes",
            if nodes.is_empty() {
                "-".into()
            } else {
                nodes.join("; ")
            },
        ),
        ("submitted", ago(Some(r.submit))),
        ("started", ago(r.start)),
        ("ended", ago(r.end)),
        ("wait", dur(wait_us(j, s.now_us))),
        ("run", dur(Some(j.run_us))),
        ("suspended", dur(Some(r.suspended.as_micros()))),
        ("preemptions", r.preemptions.to_string()),
        ("time limit", dur(j.time_limit_us)),
        (
            "exit code",
            r.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
        ),
        (
            "dependencies",
            j.sched
                .after
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "reason / error",
            j.reason.clone().or(j.error.clone()).unwrap_or_default(),
        ),
        ("command", j.cmd.join(" ")),
        ("directory", j.cwd.clone()),
    ];
    let mut table = String::new();
    for (k, v) in rows {
        let _ = writeln!(table, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    format!(
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>job {id} · cosched</title><style>{STYLE}</style></head>
<body><p><a href="/?token={token}">&larr; dashboard</a></p>
<h1>job {id}: {name}</h1>
<table class="jobs" id="job">{table}</table>
<p><small>Read-only; `cosched output {id}` prints what its ranks wrote.</small></p>
</body></html>
"#,
        id = r.id,
        name = esc(&j.name),
        token = esc(token),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_compares() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }
}
