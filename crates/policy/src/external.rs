//! External policies: `--policy external:CMD` runs CMD as a child process and speaks the
//! cosched policy protocol with it, JSON lines over its standard input and output, so a policy
//! can be written in any language (`python/cosched_policy.py` is a Python base class).
//!
//! The child is the policy's pure state machine; [`External`] is only its shell, the one
//! policy that spawns a process (the design's "a policy never spawns anything" holds for the
//! child's logic, which sees time only as an argument). The protocol (version
//! [`PROTOCOL`], documented in `docs/external-policies.md`):
//!
//! - cosched sends `{"type":"hello","protocol":1,"machine":{…},"options":{…},…}` once; the
//!   child answers `{"type":"hello","protocol":1}` (or `{"type":"error","message":…}`, which
//!   refuses the configuration).
//! - Per instant, one round trip: the events the driver observed are batched into
//!   `{"type":"decide","now":T,"events":[…]}`, answered by one line
//!   `{"type":"decisions","decisions":[…]}`.
//!
//! Times are seconds (an integer when whole, else a fraction to the microsecond); PE sets are
//! lists of half-open runs `[[start, end], …]`.
//!
//! A failure of the child (it exits, writes a line that is not a reply, names an unknown
//! decision) cannot be returned through [`Policy::decide`]: the policy stops deciding and
//! [`Policy::failure`] says what happened, naming the command and the line; drivers check it
//! after a run. A decision the ledger refuses is traced back to the reply line that carried
//! it by [`Policy::explain`].
//!
//! A copy ([`Policy::boxed_clone`]) of an external policy cannot share its child, and replaying
//! the whole exchange into a second child would cost as much as the run so far: the copy is a
//! policy that decides nothing and whose [`Policy::failure`] says why.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use cosched_core::{JobId, PeSet, Time};
use serde::{Deserialize, Serialize};

use crate::{ConfigError, Decision, Event, JobRequest, Never, Policy, PolicyConfig};

/// The protocol version this side speaks.
pub const PROTOCOL: u32 = 1;

/// The registry prefix: `external:CMD`.
pub const PREFIX: &str = "external:";

/// Lines quoted in error messages are cut to this many characters.
const QUOTE: usize = 300;

/// An external policy: a child process spoken to in JSON lines.
pub struct External {
    /// `external:CMD`, as given.
    name: String,
    io: Option<Io>,
    /// Events of the current instant, as JSON objects separated by commas.
    events: Vec<u8>,
    /// Lines read from the child so far (the hello reply is line 1).
    line_no: u64,
    /// The last reply line, for [`Policy::explain`].
    line: String,
    failed: Option<String>,
    /// Live jobs' submit times and the waiting ones in (submit, id) order, for
    /// [`Policy::queue`]: the child's own order is not visible from here.
    submit: HashMap<JobId, Time>,
    waiting: BTreeSet<(Time, JobId)>,
    round_trips: u64,
    events_sent: u64,
}

struct Io {
    child: Child,
    to: BufWriter<ChildStdin>,
    from: BufReader<ChildStdout>,
}

impl Drop for External {
    fn drop(&mut self) {
        if let Some(io) = self.io.take() {
            stop(io);
        }
    }
}

/// Closes the child's input (a well-behaved child exits at end of input), gives it a moment,
/// then kills it; returns its exit status when known.
fn stop(io: Io) -> Option<std::process::ExitStatus> {
    let Io {
        mut child,
        to,
        from,
        ..
    } = io;
    drop(to);
    drop(from);
    for _ in 0..50 {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// Seconds on the wire: an integer when whole, else a fraction to the microsecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Secs(i64);

impl Serialize for Secs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0 % 1_000_000 == 0 {
            s.serialize_i64(self.0 / 1_000_000)
        } else {
            s.serialize_f64(self.0 as f64 / 1e6)
        }
    }
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Secs, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        let micros = match n.as_i64() {
            Some(s) => s.checked_mul(1_000_000),
            None => n
                .as_f64()
                .map(|x| (x * 1e6).round())
                .filter(|x| x.is_finite() && x.abs() < 9.2e18)
                .map(|x| x as i64),
        };
        micros
            .map(Secs)
            .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a time in seconds")))
    }
}

#[derive(Serialize)]
struct WireJob<'a> {
    id: u64,
    submit: Secs,
    procs: u32,
    estimate: Secs,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mem_per_pe_kib: Option<u64>,
}

impl<'a> From<&'a JobRequest> for WireJob<'a> {
    fn from(j: &'a JobRequest) -> WireJob<'a> {
        WireJob {
            id: j.id.0,
            submit: Secs(j.submit.0),
            procs: j.procs,
            estimate: Secs(j.estimate.0),
            user: j.user,
            queue: j.queue,
            class: j.class.as_deref(),
            mem_per_pe_kib: j.mem_per_pe_kib,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent<'a> {
    Submitted {
        job: WireJob<'a>,
    },
    Ended {
        job: u64,
    },
    Held {
        job: u64,
    },
    Released {
        job: u64,
    },
    NodeDown {
        node: u32,
    },
    NodeUp {
        node: u32,
    },
    Timer {
        token: u64,
    },
    Running {
        job: WireJob<'a>,
        pes: &'a [(u32, u32)],
        since: Secs,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum WireDecision {
    Start {
        job: u64,
        pes: Vec<(u32, u32)>,
        #[serde(default)]
        slot: Option<u32>,
    },
    Place {
        job: u64,
        pes: Vec<(u32, u32)>,
        #[serde(default)]
        slot: Option<u32>,
    },
    Suspend {
        job: u64,
    },
    Resume {
        job: u64,
    },
    Preempt {
        job: u64,
    },
    Kill {
        job: u64,
    },
    Reject {
        job: u64,
        why: Never,
    },
    SetTimer {
        at: Secs,
        token: u64,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Reply {
    Hello { protocol: u32 },
    Decisions { decisions: Vec<WireDecision> },
    Error { message: String },
}

/// A PE set from runs, which must be increasing and disjoint.
fn pe_set(runs: &[(u32, u32)]) -> Result<PeSet, String> {
    let mut set = PeSet::new();
    let mut last = None;
    for &(s, e) in runs {
        if s >= e || last.is_some_and(|l| s < l) {
            return Err(format!(
                "PE runs must be increasing, disjoint [start, end) pairs; got {runs:?}"
            ));
        }
        set.push_sorted(s, e);
        last = Some(e);
    }
    Ok(set)
}

fn quote(line: &str) -> String {
    let line = line.trim_end();
    match line.char_indices().nth(QUOTE) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

impl External {
    /// Starts `external:CMD` (`name` is the whole registry name) and exchanges hellos.
    pub fn new(name: &str, cfg: &PolicyConfig) -> Result<External, ConfigError> {
        let err = |why: String| ConfigError::External {
            policy: name.to_string(),
            why,
        };
        let cmd = name.strip_prefix(PREFIX).unwrap_or(name);
        let argv = shlex::split(cmd)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| err("give a command after `external:` (quotes must match)".into()))?;
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("cannot start {:?}: {e}", argv[0])))?;
        let io = Io {
            to: BufWriter::new(child.stdin.take().expect("piped")),
            from: BufReader::new(child.stdout.take().expect("piped")),
            child,
        };
        let mut p = External {
            name: name.to_string(),
            io: Some(io),
            events: Vec::new(),
            line_no: 0,
            line: String::new(),
            failed: None,
            submit: HashMap::new(),
            waiting: BTreeSet::new(),
            round_trips: 0,
            events_sent: 0,
        };
        let m = cfg.machine;
        let hello = serde_json::json!({
            "type": "hello",
            "protocol": PROTOCOL,
            "policy": name,
            "machine": {
                "nodes": m.nodes,
                "sockets_per_node": m.sockets_per_node,
                "cores_per_socket": m.cores_per_socket,
                "pes_per_node": m.pes_per_node(),
                "total_pes": m.total_pes(),
                "mem_per_node_mib": m.mem_per_node_mib,
            },
            "migration": cfg.migration,
            "mpl": cfg.mpl,
            "quantum": cfg.quantum.map(|d| Secs(d.0)),
            "context_switch": cfg.context_switch.map(|d| Secs(d.0)),
            "options": cfg.options,
        });
        let mut msg = serde_json::to_vec(&hello).expect("JSON values serialize");
        msg.push(b'\n');
        match p.exchange(&msg, "the hello") {
            Ok(Reply::Hello { protocol }) if protocol == PROTOCOL => Ok(p),
            Ok(Reply::Hello { protocol }) => Err(err(format!(
                "it speaks protocol version {protocol}; this cosched speaks version {PROTOCOL}"
            ))),
            Ok(Reply::Error { message }) => Err(err(format!("refused the hello: {message}"))),
            Ok(Reply::Decisions { .. }) => Err(err(format!(
                "line {} answers the hello with decisions: {}",
                p.line_no,
                quote(&p.line)
            ))),
            Err(why) => Err(err(why)),
        }
    }

    /// A copy that cannot decide (see the module doc).
    fn uncopyable(&self) -> External {
        External {
            name: self.name.clone(),
            io: None,
            events: Vec::new(),
            line_no: 0,
            line: String::new(),
            failed: Some(format!(
                "policy {}: an external policy cannot be copied (its state lives in the child \
                 process); forecasts and other copies need a built-in policy",
                self.name
            )),
            submit: self.submit.clone(),
            waiting: self.waiting.clone(),
            round_trips: 0,
            events_sent: 0,
        }
    }

    /// Sends `msg` (one line) and reads one reply line. `what` names the message for errors.
    fn exchange(&mut self, msg: &[u8], what: &str) -> Result<Reply, String> {
        let io = self.io.as_mut().ok_or("the child is gone")?;
        let sent = io.to.write_all(msg).and_then(|()| io.to.flush());
        self.line.clear();
        let read = match sent {
            Ok(()) => io.from.read_line(&mut self.line),
            Err(e) => Err(e),
        };
        match read {
            Ok(n) if n > 0 => {}
            other => {
                let why = match other {
                    Err(e) => format!(": {e}"),
                    Ok(_) => String::new(),
                };
                let status = self.io.take().and_then(stop);
                let status = status.map_or("its status is unknown".to_string(), |s| s.to_string());
                return Err(format!(
                    "the command ended ({status}) instead of answering {what} (after line {} of \
                     its output){why}",
                    self.line_no
                ));
            }
        }
        self.line_no += 1;
        serde_json::from_str(&self.line).map_err(|e| {
            format!(
                "line {} of its output is not a reply to {what}: {e}: {}",
                self.line_no,
                quote(&self.line)
            )
        })
    }

    fn fail(&mut self, why: String) {
        self.failed = Some(format!("policy {}: {why}", self.name));
        if let Some(io) = self.io.take() {
            stop(io);
        }
    }

    fn push_event(&mut self, ev: &WireEvent) {
        if !self.events.is_empty() {
            self.events.push(b',');
        }
        serde_json::to_writer(&mut self.events, ev).expect("events serialize");
        self.events_sent += 1;
    }

    fn decision(&mut self, d: WireDecision) -> Result<Decision, String> {
        Ok(match d {
            WireDecision::Start { job, pes, slot } => {
                self.leaves_queue(JobId(job));
                Decision::Start {
                    job: JobId(job),
                    pes: pe_set(&pes)?,
                    slot,
                }
            }
            WireDecision::Place { job, pes, slot } => {
                self.leaves_queue(JobId(job));
                Decision::Place {
                    job: JobId(job),
                    pes: pe_set(&pes)?,
                    slot,
                }
            }
            WireDecision::Suspend { job } => Decision::Suspend { job: JobId(job) },
            WireDecision::Resume { job } => Decision::Resume { job: JobId(job) },
            WireDecision::Preempt { job } => {
                if let Some(&t) = self.submit.get(&JobId(job)) {
                    self.waiting.insert((t, JobId(job)));
                }
                Decision::Preempt { job: JobId(job) }
            }
            WireDecision::Kill { job } => Decision::Kill { job: JobId(job) },
            WireDecision::Reject { job, why } => {
                self.leaves_queue(JobId(job));
                Decision::Reject {
                    job: JobId(job),
                    why,
                }
            }
            WireDecision::SetTimer { at, token } => Decision::SetTimer {
                at: Time(at.0),
                token,
            },
        })
    }

    fn leaves_queue(&mut self, job: JobId) {
        if let Some(&t) = self.submit.get(&job) {
            self.waiting.remove(&(t, job));
        }
    }

    /// The decisions of the last reply that name `job`, as the child wrote them.
    fn decisions_about(&self, job: JobId) -> Vec<String> {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&self.line) else {
            return Vec::new();
        };
        v.get("decisions")
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
            .filter(|d| d.get("job").and_then(|j| j.as_u64()) == Some(job.0))
            .map(|d| d.to_string())
            .collect()
    }
}

impl Policy for External {
    fn name(&self) -> &str {
        &self.name
    }

    fn observe(&mut self, _now: Time, event: Event) {
        if self.failed.is_some() {
            return;
        }
        let ev = match &event {
            Event::Submitted(j) => {
                self.submit.insert(j.id, j.submit);
                self.waiting.insert((j.submit, j.id));
                WireEvent::Submitted { job: j.into() }
            }
            Event::Ended(id) => {
                if let Some(t) = self.submit.remove(id) {
                    self.waiting.remove(&(t, *id));
                }
                WireEvent::Ended { job: id.0 }
            }
            Event::Timer(token) => WireEvent::Timer { token: *token },
            Event::NodeDown(n) => WireEvent::NodeDown { node: n.0 },
            Event::NodeUp(n) => WireEvent::NodeUp { node: n.0 },
            Event::Held(id) => WireEvent::Held { job: id.0 },
            Event::Released(id) => WireEvent::Released { job: id.0 },
            Event::Running { job, pes, since } => {
                self.submit.insert(job.id, job.submit);
                WireEvent::Running {
                    job: job.into(),
                    pes: pes.runs(),
                    since: Secs(since.0),
                }
            }
        };
        self.push_event(&ev);
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        if self.failed.is_some() {
            return;
        }
        let mut msg = Vec::with_capacity(self.events.len() + 64);
        write!(
            msg,
            "{{\"type\":\"decide\",\"now\":{},\"events\":[",
            serde_json::to_string(&Secs(now.0)).expect("a number")
        )
        .expect("writes to a Vec");
        msg.append(&mut self.events);
        msg.extend_from_slice(b"]}\n");
        self.round_trips += 1;
        let what = format!("the decide at t={now}");
        let decisions = match self.exchange(&msg, &what) {
            Ok(Reply::Decisions { decisions }) => decisions,
            Ok(Reply::Error { message }) => {
                let line = self.line_no;
                return self.fail(format!(
                    "reported an error at t={now} (line {line} of its output): {message}"
                ));
            }
            Ok(Reply::Hello { .. }) => {
                let (line, text) = (self.line_no, quote(&self.line));
                return self.fail(format!(
                    "line {line} of its output answers {what} with a hello: {text}"
                ));
            }
            Err(why) => return self.fail(why),
        };
        for d in decisions {
            match self.decision(d) {
                Ok(d) => out.push(d),
                Err(why) => {
                    let (line, text) = (self.line_no, quote(&self.line));
                    return self.fail(format!("line {line} of its output: {why}: {text}"));
                }
            }
        }
    }

    fn queue(&self) -> Vec<JobId> {
        self.waiting.iter().map(|&(_, id)| id).collect()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("round_trips", self.round_trips as f64),
            ("events_sent", self.events_sent as f64),
        ]
    }

    fn failure(&self) -> Option<String> {
        self.failed.clone()
    }

    fn explain(&self, job: JobId) -> Option<String> {
        let found = self.decisions_about(job);
        if found.is_empty() {
            return None;
        }
        Some(format!(
            "the decision came from line {} of the output of {}: {}",
            self.line_no,
            self.name,
            quote(&found.join(", "))
        ))
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.uncopyable())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{Dur, MachineShape};

    /// `external:sh FILE` for a script in a scratch file, which removes itself as it starts
    /// (`sh` keeps it open).
    fn sh(script: &str) -> String {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file =
            std::env::temp_dir().join(format!("cosched-external-{}-{n}.sh", std::process::id()));
        std::fs::write(&file, format!("rm -f \"$0\"\n{script}")).unwrap();
        format!("{PREFIX}sh {}", file.display())
    }

    /// A shell child answering the hello, then one fixed reply per decide.
    fn scripted(replies: &[&str]) -> String {
        let mut s = String::from("read h\nprintf '%s\\n' '{\"type\":\"hello\",\"protocol\":1}'\n");
        for r in replies {
            s.push_str(&format!("read l\nprintf '%s\\n' '{r}'\n"));
        }
        s.push_str("read l\n");
        sh(&s)
    }

    fn cfg() -> PolicyConfig {
        PolicyConfig::new(MachineShape::flat(4, 1))
    }

    fn job(id: u64) -> Event {
        Event::Submitted(JobRequest::new(
            JobId(id),
            Time::ZERO,
            2,
            Dur::from_secs(60),
        ))
    }

    #[test]
    fn decisions_come_back_typed() {
        let reply = r#"{"type":"decisions","decisions":[{"type":"start","job":1,"pes":[[0,2]]},{"type":"set_timer","at":1.5,"token":7},{"type":"reject","job":2,"why":{"too_large":{"procs":9,"machine":4}}}]}"#;
        let mut p = External::new(&scripted(&[reply]), &cfg()).unwrap();
        p.observe(Time::ZERO, job(1));
        p.observe(Time::ZERO, job(2));
        assert_eq!(p.queue(), vec![JobId(1), JobId(2)]);
        let mut out = Vec::new();
        p.decide(Time::ZERO, &mut out);
        assert_eq!(p.failure(), None);
        assert_eq!(
            out,
            vec![
                Decision::Start {
                    job: JobId(1),
                    pes: PeSet::contiguous(0, 2),
                    slot: None
                },
                Decision::SetTimer {
                    at: Time::from_micros(1_500_000),
                    token: 7
                },
                Decision::Reject {
                    job: JobId(2),
                    why: Never::TooLarge {
                        procs: 9,
                        machine: 4
                    }
                },
            ]
        );
        assert!(p.queue().is_empty());
        let why = p.explain(JobId(1)).unwrap();
        assert!(
            why.contains("line 2 of the output") && why.contains("\"start\""),
            "{why}"
        );
    }

    #[test]
    fn an_unknown_decision_names_the_command_and_the_line() {
        let reply = r#"{"type":"decisions","decisions":[{"type":"launch","job":1}]}"#;
        let name = scripted(&[reply]);
        let mut p = External::new(&name, &cfg()).unwrap();
        p.observe(Time::ZERO, job(1));
        let mut out = Vec::new();
        p.decide(Time::ZERO, &mut out);
        let err = p.failure().unwrap();
        assert!(out.is_empty());
        assert!(
            err.starts_with(&format!("policy {name}: line 2 of its output"))
                && err.contains("unknown variant `launch`")
                && err.contains("\"launch\""),
            "{err}"
        );
        // A misspelt field is refused too, not ignored.
        let reply = r#"{"type":"decisions","decisions":[{"type":"start","job":1,"pes":[[0,1]],"slott":0}]}"#;
        let mut q = External::new(&scripted(&[reply]), &cfg()).unwrap();
        q.decide(Time::ZERO, &mut out);
        let err = q.failure().unwrap();
        assert!(err.contains("unknown field `slott`"), "{err}");
        // Once failed, it stays quiet.
        p.observe(Time::ZERO, job(2));
        p.decide(Time::ZERO, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_child_that_exits_or_speaks_nonsense_is_reported() {
        let mut p = External::new(&scripted(&[]), &cfg()).unwrap();
        let mut out = Vec::new();
        p.decide(Time::from_secs(5), &mut out);
        let err = p.failure().unwrap();
        assert!(
            err.contains("ended (exit status: 0) instead of answering the decide at t=5"),
            "{err}"
        );
        let mut p = External::new(&scripted(&["not json"]), &cfg()).unwrap();
        p.decide(Time::ZERO, &mut out);
        let err = p.failure().unwrap();
        assert!(
            err.contains("line 2 of its output is not a reply") && err.ends_with("not json"),
            "{err}"
        );
        let Err(e) = External::new(&sh("exit 3"), &cfg()) else {
            panic!("no hello")
        };
        assert!(e.to_string().contains("exit status: 3"), "{e}");
        let Err(e) = External::new(
            &sh("read h\nprintf '%s\\n' '{\"type\":\"hello\",\"protocol\":2}'\n"),
            &cfg(),
        ) else {
            panic!("wrong version")
        };
        assert!(e.to_string().contains("protocol version 2"), "{e}");
        let Err(e) = External::new("external:/nonexistent/policy", &cfg()) else {
            panic!("no such command")
        };
        assert!(e.to_string().contains("cannot start"), "{e}");
    }

    #[test]
    fn a_copy_refuses_to_decide_and_says_why() {
        let p = External::new(&scripted(&[]), &cfg()).unwrap();
        let c = p.boxed_clone();
        assert!(c.failure().unwrap().contains("cannot be copied"));
    }
}
