//! `cosched top`: a live terminal view of the machine in the spirit of the T3D's `gangster`
//! display (seed 002 §4, Fig. 8): the node map with a letter per job, the Ousterhout matrix
//! with the slot running now, and the job table, refreshed from the machine manager several
//! times a second. Keys suspend, resume and cancel the selected job.
//!
//! The drawing ([`draw`]) is a pure function of a [`View`], so a unit test renders it on
//! ratatui's test backend; the loop around it only polls the MM and reads keys.

use std::time::{Duration, Instant};

use cosched_client::client::Client;
use cosched_core::{Dur, JobId};
use cosched_proto::proto::{JobInfo, Request, StatusInfo};
use cosched_proto::views::dur;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Row, Table, TableState};

use super::conn::ConnArgs;

#[derive(clap::Args)]
pub struct Args {
    /// How often to ask the machine manager (several times a second by default)
    #[arg(long, default_value = "250ms")]
    pub interval: Dur,
    /// How long an ended job stays in the table
    #[arg(long, default_value = "60s")]
    pub keep_ended: Dur,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Everything one frame shows.
#[derive(Default)]
pub struct View {
    pub status: Option<StatusInfo>,
    /// Live jobs and those ended recently, by id.
    pub jobs: Vec<JobInfo>,
    /// The selected job (kept by id, so a refresh that reorders nothing moves nothing).
    pub selected: Option<JobId>,
    /// The last action's outcome, or the last error talking to the MM.
    pub message: String,
    /// A cancel asked for and not yet confirmed.
    pub confirm_cancel: Option<JobId>,
    pub now_us: i64,
}

/// Letters for jobs, as gangster's: stable per job id, so a job keeps its letter.
const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

pub fn letter(id: JobId) -> char {
    LETTERS[(id.0.wrapping_sub(1) % LETTERS.len() as u64) as usize] as char
}

/// A colour per job, so its PEs stand out in the map and the matrix.
fn colour(id: JobId) -> Color {
    const C: [Color; 6] = [
        Color::Cyan,
        Color::Yellow,
        Color::Green,
        Color::Magenta,
        Color::Blue,
        Color::Red,
    ];
    C[(id.0 % C.len() as u64) as usize]
}

/// The slots of the matrix a job occupies (as `0,2`), `-` when none or no status yet.
fn slots_of(st: Option<&StatusInfo>, id: JobId) -> String {
    st.map_or_else(|| "-".into(), |st| cosched_proto::views::job_slots(st, id))
}

fn user(j: &JobInfo) -> String {
    j.user
        .map_or_else(|| "-".into(), cosched_proto::util::user_name)
}

fn state_text(j: &JobInfo) -> String {
    if j.held && !j.state.is_final() {
        format!("{}(held)", j.state.as_str())
    } else {
        j.state.as_str().to_string()
    }
}

/// One cell of the node map or the matrix: the job's letter, `.` idle, `X` on a down node.
fn cell(job: Option<JobId>, down: bool) -> Span<'static> {
    match job {
        Some(id) => Span::styled(
            letter(id).to_string(),
            Style::default().fg(colour(id)).add_modifier(Modifier::BOLD),
        ),
        None if down => Span::styled("X", Style::default().fg(Color::Red)),
        None => Span::raw("."),
    }
}

/// Draws one frame: header, node map, matrix, job table, keys.
pub fn draw(f: &mut Frame, v: &View) {
    let st = v.status.as_ref();
    let slots = st.map_or(1, |s| s.slots.len().max(1)) as u16;
    let nodes = st.map_or(1, |s| s.nodes.len().max(1)) as u16;
    let [head, top, table, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(nodes.max(slots + 1).min(16) + 2),
        Constraint::Min(4),
        Constraint::Length(2),
    ])
    .areas(f.area());
    let [map_area, matrix_area] =
        Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(top);

    let header = match st {
        Some(s) => format!(
            "cosched top — policy {}, {}/{} nodes up × {} PEs, active slot {}, {} switches",
            s.policy,
            s.nodes.iter().filter(|n| n.state == "up").count(),
            s.nodes_total,
            s.pes_per_node,
            s.active_slot
                .map_or_else(|| "-".into(), |a| format!("{a} of {}", s.slots.len())),
            s.switches
        ),
        None => "cosched top — waiting for the machine manager".into(),
    };
    f.render_widget(
        Paragraph::new(header).style(Style::default().add_modifier(Modifier::BOLD)),
        head,
    );

    // Node map: a row per node, a letter per PE for the job running there now.
    let mut map = Vec::new();
    let mut down_pe = Vec::new();
    if let Some(s) = st {
        let per = s.pes_per_node.max(1) as usize;
        for n in &s.nodes {
            let down = n.state != "up";
            let first = n.id.0 as usize * per;
            let mut spans = vec![Span::raw(format!("{:<8} ", truncate(&n.name, 8)))];
            for pe in first..first + per {
                spans.push(cell(s.running.get(pe).copied().flatten(), down));
            }
            spans.push(Span::styled(
                format!("  {}", n.state),
                if down {
                    Style::default().fg(Color::Red)
                } else {
                    Style::default()
                },
            ));
            map.push(Line::from(spans));
        }
        down_pe = (0..s.running.len())
            .map(|pe| s.nodes.get(pe / per).is_none_or(|n| n.state != "up"))
            .collect();
    }
    f.render_widget(
        Paragraph::new(map).block(Block::bordered().title(" nodes (letter = job, X = down) ")),
        map_area,
    );

    // The Ousterhout matrix: a row per slot, PEs grouped by node; `>` marks the active slot.
    let mut rows = Vec::new();
    if let Some(s) = st {
        let per = s.pes_per_node.max(1) as usize;
        for (i, slot) in s.slots.iter().enumerate() {
            let active = s.active_slot == Some(i as u32);
            let mut spans = vec![Span::styled(
                format!("{}slot {i:<2} ", if active { '>' } else { ' ' }),
                if active {
                    Style::default().add_modifier(Modifier::REVERSED)
                } else {
                    Style::default()
                },
            )];
            for (pe, c) in slot.iter().enumerate() {
                if pe > 0 && pe % per == 0 {
                    spans.push(Span::raw("|"));
                }
                spans.push(cell(*c, down_pe.get(pe).copied().unwrap_or(false)));
            }
            rows.push(Line::from(spans));
        }
    }
    f.render_widget(
        Paragraph::new(rows).block(Block::bordered().title(" Ousterhout matrix (> active slot) ")),
        matrix_area,
    );

    // The job table.
    let header = Row::new([
        "", "ID", "NAME", "USER", "CLASS", "PES", "STATE", "SLOT", "WAIT", "RUN",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let body: Vec<Row> = v
        .jobs
        .iter()
        .map(|j| {
            let r = &j.record;
            let wait = r
                .wait()
                .map(|w| w.as_micros())
                .or_else(|| (!j.state.is_final()).then(|| v.now_us - r.submit.as_micros()));
            Row::new(vec![
                Span::styled(
                    letter(j.id()).to_string(),
                    Style::default().fg(colour(j.id())),
                ),
                Span::raw(j.id().0.to_string()),
                Span::raw(truncate(&j.name, 12)),
                Span::raw(user(j)),
                Span::raw(j.class.clone().unwrap_or_else(|| "-".into())),
                Span::raw(j.procs().to_string()),
                Span::raw(state_text(j)),
                Span::raw(slots_of(st, j.id())),
                Span::raw(dur(wait)),
                Span::raw(dur(Some(j.run_us))),
            ])
        })
        .collect();
    let mut state = TableState::default();
    state.select(
        v.selected
            .and_then(|id| v.jobs.iter().position(|j| j.id() == id)),
    );
    let widths = [
        Constraint::Length(1),
        Constraint::Length(6),
        Constraint::Length(12),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(5),
        Constraint::Length(15),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    f.render_stateful_widget(
        Table::new(body, widths)
            .header(header)
            .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
            // A mark as well as the colours: it shows in a captured pane too.
            .highlight_symbol(">")
            .block(Block::bordered().title(format!(" jobs ({}) ", v.jobs.len()))),
        table,
        &mut state,
    );

    let keys = match v.confirm_cancel {
        Some(id) => format!("cancel job {id}? y to confirm, any other key to keep it"),
        None => "↑/↓ select   s suspend   r resume   c cancel   q quit".into(),
    };
    f.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(
                keys,
                Style::default().add_modifier(Modifier::BOLD),
            )),
            Line::from(v.message.clone()),
        ]),
        foot,
    );
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('…')).collect()
    }
}

/// Asks the MM for the status and the jobs; keeps live jobs and those ended within `keep`.
fn refresh(client: &Client, v: &mut View, keep: Dur) {
    v.now_us = cosched_proto::util::now().as_micros();
    match client.status().and_then(|st| Ok((st, client.jobs(&[])?))) {
        Ok((st, jobs)) => {
            let now = v.now_us;
            v.status = Some(st);
            v.jobs = jobs
                .into_iter()
                .filter(|j| {
                    !j.state.is_final()
                        || j.record
                            .end
                            .is_some_and(|e| now - e.as_micros() < keep.as_micros())
                })
                .collect();
            v.jobs.sort_by_key(|j| j.id());
            if v.selected
                .is_none_or(|s| !v.jobs.iter().any(|j| j.id() == s))
            {
                v.selected = v
                    .jobs
                    .iter()
                    .find(|j| !j.state.is_final())
                    .or(v.jobs.first())
                    .map(|j| j.id());
            }
            if v.message.starts_with("machine manager: ") {
                v.message.clear();
            }
        }
        Err(e) => v.message = format!("machine manager: {e}"),
    }
}

/// Moves the selection by `by` rows.
fn select(v: &mut View, by: isize) {
    if v.jobs.is_empty() {
        return;
    }
    let at = v
        .selected
        .and_then(|id| v.jobs.iter().position(|j| j.id() == id))
        .unwrap_or(0) as isize;
    let to = (at + by).clamp(0, v.jobs.len() as isize - 1) as usize;
    v.selected = Some(v.jobs[to].id());
}

fn act(client: &Client, v: &mut View, req: Request, done: &str) {
    let id = match &req {
        Request::Cancel(id) | Request::Suspend(id) | Request::Resume(id) => *id,
        _ => return,
    };
    v.message = match client.simple(req) {
        Ok(()) => format!("job {id} {done}"),
        Err(e) => format!("job {id}: {e}"),
    };
}

/// What a key does; `false` to quit.
fn key(client: &Client, v: &mut View, code: KeyCode, mods: KeyModifiers) -> bool {
    if let Some(id) = v.confirm_cancel.take() {
        if matches!(code, KeyCode::Char('y') | KeyCode::Char('Y')) {
            act(client, v, Request::Cancel(id), "cancelled");
        } else {
            v.message = format!("job {id} kept");
        }
        return true;
    }
    let selected = v
        .selected
        .filter(|id| v.jobs.iter().any(|j| j.id() == *id && !j.state.is_final()));
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return false,
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return false,
        KeyCode::Up | KeyCode::Char('k') => select(v, -1),
        KeyCode::Down | KeyCode::Char('j') => select(v, 1),
        KeyCode::Char('s') | KeyCode::Char('r') | KeyCode::Char('c') if selected.is_none() => {
            v.message = "no live job selected".into();
        }
        KeyCode::Char('s') => act(client, v, Request::Suspend(selected.unwrap()), "suspended"),
        KeyCode::Char('r') => act(client, v, Request::Resume(selected.unwrap()), "resumed"),
        KeyCode::Char('c') => v.confirm_cancel = selected,
        _ => {}
    }
    true
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let client = a.conn.client()?;
    // The first answer before the screen is taken: a cluster that is not there is an error
    // on a normal terminal, not a blank view.
    client.status()?;
    let interval = Duration::from_micros(a.interval.as_micros().max(20_000) as u64);
    let mut terminal = ratatui::init();
    let mut v = View::default();
    let result = (|| -> anyhow::Result<()> {
        let mut next = Instant::now();
        loop {
            if Instant::now() >= next {
                refresh(&client, &mut v, a.keep_ended);
                next = Instant::now() + interval;
            }
            terminal.draw(|f| draw(f, &v))?;
            if event::poll(next.saturating_duration_since(Instant::now()))?
                && let Event::Key(k) = event::read()?
                && k.kind == KeyEventKind::Press
            {
                if !key(&client, &mut v, k.code, k.modifiers) {
                    return Ok(());
                }
                // Show the action's effect at once.
                next = Instant::now();
            }
        }
    })();
    ratatui::restore();
    result?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{JobRecord, JobSpec, NodeId, Time};
    use cosched_proto::proto::{JobState, NodeInfo};
    use ratatui::{Terminal, backend::TestBackend};

    fn job(id: u64, procs: u32, state: JobState, class: Option<&str>) -> JobInfo {
        let spec = JobSpec::new(id, Time::from_secs(100), procs, Dur::from_secs(60));
        let mut record = JobRecord::new(&spec);
        if state != JobState::Queued {
            record.start = Some(Time::from_secs(103));
        }
        JobInfo {
            mem: None,
            spread: None,
            steps: Vec::new(),
            partition: None,
            tasks: None,
            record,
            state,
            name: format!("job{id}"),
            class: class.map(str::to_string),
            user: None,
            gid: None,
            time_limit_us: None,
            cmd: vec!["sleep".into()],
            cwd: "/".into(),
            run_us: 5_000_000,
            placement: vec![],
            error: None,
            held: false,
            io: Default::default(),
            sched: Default::default(),
            reason: None,
            run: 0,
        }
    }

    fn render(v: &View) -> String {
        let mut t = Terminal::new(TestBackend::new(100, 24)).unwrap();
        t.draw(|f| draw(f, v)).unwrap();
        let buf = t.backend().buffer();
        let mut s = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                s.push_str(buf[(x, y)].symbol());
            }
            s.push('\n');
        }
        s
    }

    #[test]
    fn draws_map_matrix_and_jobs() {
        // 3 nodes × 2 PEs, node 2 down; two slots: job 1 on PEs 0-3 in slot 0, job 2 on PEs
        // 0-1 and job 3 on PE 2 in slot 1, which is active.
        let node = |i: u32, state: &str| NodeInfo {
            id: NodeId(i),
            name: format!("n{i}"),
            state: state.into(),
            addr: String::new(),
            pes: 2,
            reason: None,
        };
        let a = Some(JobId(1));
        let b = Some(JobId(2));
        let c = Some(JobId(3));
        let st = StatusInfo {
            policy: "gang".into(),
            nodes_total: 3,
            pes_per_node: 2,
            fanout: 8,
            tree_depth: 1,
            nodes: vec![node(0, "up"), node(1, "up"), node(2, "down")],
            slots: vec![
                vec![a, a, a, a, None, None],
                vec![b, b, c, None, None, None],
            ],
            active_slot: Some(1),
            running: vec![b, b, c, None, None, None],
            switches: 7,
            partitions: Vec::new(),
        };
        let v = View {
            status: Some(st),
            jobs: vec![
                job(1, 4, JobState::Suspended, Some("batch")),
                job(2, 2, JobState::Running, None),
                job(3, 1, JobState::Running, Some("inter")),
                job(4, 6, JobState::Queued, None),
            ],
            selected: Some(JobId(2)),
            message: "job 9 resumed".into(),
            confirm_cancel: None,
            now_us: Time::from_secs(110).as_micros(),
        };
        let s = render(&v);
        let lines: Vec<&str> = s.lines().collect();
        assert!(
            s.contains("policy gang, 2/3 nodes up × 2 PEs, active slot 1 of 2"),
            "{s}"
        );
        // The node map: node 0 runs B twice, node 1 runs C and is idle on its other PE,
        // node 2 is down.
        assert!(lines.iter().any(|l| l.contains("n0       BB  up")), "{s}");
        assert!(lines.iter().any(|l| l.contains("n1       C.  up")), "{s}");
        assert!(lines.iter().any(|l| l.contains("n2       XX  down")), "{s}");
        // The matrix: slot 0 (not active) holds A on 4 PEs; slot 1 is marked active.
        assert!(lines.iter().any(|l| l.contains(" slot 0  AA|AA|XX")), "{s}");
        assert!(lines.iter().any(|l| l.contains(">slot 1  BB|C.|XX")), "{s}");
        // The table: class, PEs, state, slot, wait (queued: until now) and run.
        // A row's cells: the frame, the selection mark and the padding aside.
        let row = |id: &str| {
            lines
                .iter()
                .map(|l| {
                    l.trim_matches(|c| c == '│' || c == ' ')
                        .trim_start_matches('>')
                        .split_whitespace()
                        .collect::<Vec<_>>()
                })
                .find(|cells| cells.get(1) == Some(&id))
                .unwrap_or_else(|| panic!("no row for job {id} in\n{s}"))
        };
        assert_eq!(
            row("1"),
            [
                "A",
                "1",
                "job1",
                "-",
                "batch",
                "4",
                "suspended",
                "0",
                "3.00s",
                "5.00s"
            ]
        );
        assert_eq!(row("3")[4..8], ["inter", "1", "running", "1"]);
        assert_eq!(row("4")[6..9], ["queued", "-", "10s"]);
        // The selected job is marked.
        assert!(lines.iter().any(|l| l.starts_with("│>B 2 ")), "{s}");
        assert!(s.contains("c cancel"), "{s}");
        assert!(s.contains("job 9 resumed"), "{s}");
        // A cancel asks first.
        let v = View {
            confirm_cancel: Some(JobId(2)),
            ..v
        };
        assert!(render(&v).contains("cancel job 2? y to confirm"));
    }

    #[test]
    fn letters_are_stable_and_wrap() {
        assert_eq!(letter(JobId(1)), 'A');
        assert_eq!(letter(JobId(26)), 'Z');
        assert_eq!(letter(JobId(27)), 'a');
        assert_eq!(letter(JobId(53)), 'A');
    }
}
