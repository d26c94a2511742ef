//! The dashboard's pages: the overview (HTML with the script that redraws it), its JSON view
//! and a page per job, all rendered from one [`Snapshot`].

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Sample, Snapshot};
use cosched_proto::proto::JobInfo;
use cosched_proto::views::dur;

fn user(j: &JobInfo) -> String {
    j.user
        .map_or_else(|| "-".into(), cosched_proto::util::user_name)
}

fn wait_us(j: &JobInfo, now_us: i64) -> Option<i64> {
    let r = &j.record;
    r.wait()
        .map(|w| w.as_micros())
        .or_else(|| (!j.state.is_final()).then(|| now_us - r.submit.as_micros()))
}

/// What `/api/view` answers and the overview page starts from.
pub(super) fn view_json(s: &Snapshot, history: &[Sample]) -> Value {
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
                "slot": cosched_proto::views::job_slots(st, j.id()),
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
pub(super) fn esc(s: &str) -> String {
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
pub(super) fn overview_page(s: &Snapshot, history: &[Sample]) -> String {
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
pub(super) fn job_page(j: &JobInfo, s: &Snapshot, token: &str) -> String {
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
        ("slot", cosched_proto::views::job_slots(&s.status, r.id)),
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
