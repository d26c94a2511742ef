//! Watches cgroups being frozen and reports each once the kernel says every process in it is
//! stopped (or none is left), on a thread of its own at the node manager's priority, so the
//! event loop never waits for a freeze. Every [`LOOK`] while a freeze is young (younger than
//! [`YOUNG`]), then less and less often up to [`LAST_LOOK`] apart: on this machine's kernel a
//! freeze of ranks that hold their cores completes in 20–50 µs (median ~30 µs, measured in
//! docs/benchmarks.md), so a look a few tens of microseconds late is what the next job loses
//! at each switch, while a rank that waits for a core behind others stops only when it next
//! runs (milliseconds) and is looked at less often. A look is one read of the cgroup's
//! `cgroup.events` held open (a few microseconds). The kernel's own change notification on
//! `cgroup.events` comes at most every 10 ms per file, too late for a millisecond quantum;
//! a thread that spun on the file without sleeping would keep the rank of its own core from
//! running into its freeze.
//!
//! The same thread carries out an announced gang rotation ([`super::program::Runner`]): it
//! sleeps until the runner's next instant (or a command), writes the freezes and thaws the
//! runner asks for through the cgroups' `cgroup.freeze` held open, and hands each switch's
//! timing back on a channel the shell drains at its own pace, so a switch wakes neither the
//! event loop nor the machine manager.

use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use cosched_core::{JobId, Time};
use tokio::sync::mpsc;

use crate::contain::{Events, Freezer, Idler, JobCgroup};
use crate::program::{Act, Cg, Logged, Order, Program, Runner};

/// The pause between looks while a freeze is younger than [`YOUNG`].
pub const LOOK: Duration = Duration::from_micros(15);
pub const YOUNG: Duration = Duration::from_micros(300);
/// The longest pause between two looks (an old freeze waits for a core).
pub const LAST_LOOK: Duration = Duration::from_micros(250);
/// A freeze not done by then is no longer watched (the core went ahead at its bound long
/// before).
pub const GIVE_UP: Duration = Duration::from_secs(5);

/// One freeze to watch; `gen` comes back with the report, so the shell can drop a report of
/// a freeze that a later thaw made stale.
pub struct Watch {
    pub job: JobId,
    pub launch: u64,
    pub generation: u64,
    pub cgroup: JobCgroup,
}

/// A report: (job, launch, generation) of a cgroup found frozen or empty.
pub type Frozen = (JobId, u64, u64);

/// An announced rotation for the thread to carry out: the program, the cgroups it runs now,
/// and a handle of each cgroup of the program.
pub struct Install {
    pub now: Time,
    pub program: Program,
    pub thawed: BTreeSet<Cg>,
    pub cgroups: Vec<(Cg, JobCgroup)>,
}

enum Cmd {
    Watch(Watch),
    Install(Box<Install>),
    /// The rotation ended here (the policy has no matrix, or no job of it is here).
    Stop,
}

/// The watching thread's end of the node manager; dropping it ends the thread once idle.
pub struct FreezeWatcher {
    tx: std_mpsc::Sender<Cmd>,
    landed: std_mpsc::Receiver<Logged>,
}

impl FreezeWatcher {
    /// The thread runs where the node manager's threads are kept, off the PEs' CPUs where
    /// any are spare (`pin_to_spare_cpus` in [`crate::shell`]). A real-time thread wakes on
    /// the CPU it last ran on, whatever runs there; on a rank's, every switch would preempt
    /// that rank and put its thaws' wake-ups behind the thread's own writes (measured with
    /// `benches/idle-handover.c`, one rank per job at 1-ms quanta: 5.7–6.3 % of the rank's
    /// core lost with the switching thread on it, 0.3–0.4 % with it on the spare core).
    pub fn start(reports: mpsc::UnboundedSender<Frozen>) -> std::io::Result<FreezeWatcher> {
        let (tx, rx) = std_mpsc::channel();
        let (landed_tx, landed) = std_mpsc::channel();
        std::thread::Builder::new()
            .name("freeze-watch".into())
            .spawn(move || watch(rx, reports, landed_tx))?;
        Ok(FreezeWatcher { tx, landed })
    }

    pub fn watch(&self, w: Watch) {
        let _ = self.tx.send(Cmd::Watch(w));
    }

    /// Carries out an announced rotation from now on, in place of the one before.
    pub fn install(&self, i: Install) {
        let _ = self.tx.send(Cmd::Install(Box::new(i)));
    }

    pub fn stop_rotation(&self) {
        let _ = self.tx.send(Cmd::Stop);
    }

    /// The switches the rotation made since the last call.
    pub fn landed(&self) -> Vec<Logged> {
        self.landed.try_iter().collect()
    }
}

/// The thread's clock, the node manager's ([`crate::shell`]): µs of `CLOCK_MONOTONIC`.
fn now() -> Time {
    Time::from_micros((cosched_monitor::now_ns() / 1_000) as i64)
}

/// A cgroup's files held open: `cgroup.freeze`, `cgroup.events`, `cpu.idle`.
type Files = (Freezer, Option<Events>, Option<Idler>);

/// The rotation being carried out, with its cgroups' files held open.
struct Rotating {
    runner: Runner,
    files: HashMap<Cg, Files>,
}

impl Rotating {
    /// The handover when every cgroup of the rotation has a `cpu.idle`, else the wait; the
    /// log says which when it changes.
    fn new(i: Install, before: Option<Rotating>) -> Rotating {
        let files: HashMap<Cg, Files> = i
            .cgroups
            .iter()
            .filter_map(|(c, cg)| Some((*c, (cg.freezer()?, cg.events(), cg.idler()))))
            .collect();
        let order = if !files.is_empty() && files.values().all(|(_, _, i)| i.is_some()) {
            Order::Handover
        } else {
            Order::Wait
        };
        if before.as_ref().is_none_or(|r| r.runner.order() != order) {
            tracing::info!(
                "gang rotation: {}",
                match order {
                    Order::Handover => "idle handover (cpu.idle on every job)",
                    Order::Wait => "freeze, wait until frozen, thaw (a job has no cpu.idle)",
                }
            );
        }
        let (runner, acts, old) = match before {
            Some(mut r) => {
                let acts = r.runner.replace(i.now, i.program, &i.thawed, order);
                (r.runner, acts, Some(r.files))
            }
            None => {
                let (runner, acts) = Runner::new(i.now, i.program, &i.thawed, order);
                (runner, acts, None)
            }
        };
        // A cgroup that left the rotation is set normal through its files of before.
        let mut r = Rotating { runner, files };
        if let Some(old) = old {
            for (c, f) in old {
                r.files.entry(c).or_insert(f);
            }
            r.write(&acts);
            let known: std::collections::HashSet<Cg> = r.runner.cgroups().iter().copied().collect();
            r.files.retain(|c, _| known.contains(c));
        } else {
            r.write(&acts);
        }
        r
    }

    fn write(&self, acts: &[Act]) {
        for a in acts {
            let c = match *a {
                Act::Freeze(c) | Act::Thaw(c) | Act::Idle(c) | Act::Normal(c) => c,
            };
            let Some((f, _, idle)) = self.files.get(&c) else {
                continue;
            };
            match *a {
                Act::Freeze(_) => f.set(true),
                Act::Thaw(_) => f.set(false),
                Act::Idle(_) => idle.iter().for_each(|i| i.set(true)),
                Act::Normal(_) => idle.iter().for_each(|i| i.set(false)),
            }
        }
    }

    /// Runs the runner's step due by now; its finished switches go to `landed`, those an
    /// announcement finished as well (a replaced program's first handover is done at once,
    /// and a program of one job wakes the runner no more: its thaw must still be booked).
    fn step(&mut self, landed: &std_mpsc::Sender<Logged>) {
        let t = now();
        if self.runner.wake().is_some_and(|w| w <= t) {
            let files = &self.files;
            let acts = self.runner.step(t, |c| {
                files
                    .get(&c)
                    .is_none_or(|(_, e, _)| e.as_ref().is_none_or(Events::stopped))
            });
            self.write(&acts);
        }
        for l in self.runner.take_log() {
            let _ = landed.send(l);
        }
    }
}

fn watch(
    rx: std_mpsc::Receiver<Cmd>,
    reports: mpsc::UnboundedSender<Frozen>,
    landed: std_mpsc::Sender<Logged>,
) {
    // Threads do not inherit the node manager's real-time class (it resets on fork): behind
    // CPU-bound ranks a watcher of normal priority would itself wait for a core.
    cosched_proto::util::raise_priority();
    cosched_proto::util::precise_timers();
    let mut pending: Vec<(Watch, Option<Events>, Instant)> = Vec::new();
    let mut rotating: Option<Rotating> = None;
    let mut pause = LOOK;
    loop {
        // Until the runner's next instant or the next look, or a command.
        let runner_in = rotating
            .as_ref()
            .and_then(|r| r.runner.wake())
            .map(|w| Duration::from_micros(w.since(now()).0.max(0) as u64));
        let look_in = (!pending.is_empty()).then_some(pause);
        let cmd = match (runner_in, look_in) {
            (None, None) => rx.recv().ok(),
            (a, b) => {
                let wait = a.into_iter().chain(b).min().unwrap_or(LOOK);
                match rx.recv_timeout(wait) {
                    Ok(c) => Some(c),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => None,
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        };
        let mut cmds: Vec<Cmd> = cmd.into_iter().collect();
        if cmds.is_empty() && runner_in.is_none() && look_in.is_none() {
            return;
        }
        cmds.extend(rx.try_iter());
        for c in cmds {
            match c {
                Cmd::Watch(w) => pending.push(opened(w)),
                Cmd::Install(i) => rotating = Some(Rotating::new(*i, rotating.take())),
                Cmd::Stop => {
                    if let Some(mut r) = rotating.take() {
                        let acts = r.runner.stop();
                        r.write(&acts);
                        for l in r.runner.take_log() {
                            let _ = landed.send(l);
                        }
                    }
                }
            }
        }
        if let Some(r) = &mut rotating {
            r.step(&landed);
        }
        if pending.is_empty() {
            continue;
        }
        pending.retain(|(w, events, since)| {
            if events.as_ref().is_none_or(Events::stopped) {
                let _ = reports.send((w.job, w.launch, w.generation));
                return false;
            }
            // Thawed meanwhile (the core moved on): nothing to report. Not asked of a young
            // freeze (a path walk a look; a stale report is dropped by the shell anyway).
            let age = since.elapsed();
            age < GIVE_UP && (age < YOUNG || w.cgroup.freezing())
        });
        let youngest = pending.iter().map(|(_, _, since)| since.elapsed()).min();
        pause = match youngest {
            Some(age) if age < YOUNG => LOOK,
            _ => (pause * 2).min(LAST_LOOK),
        };
    }
}

/// A watch with its cgroup's `cgroup.events` open (none when the cgroup is gone: stopped).
fn opened(w: Watch) -> (Watch, Option<Events>, Instant) {
    let events = w.cgroup.events();
    (w, events, Instant::now())
}
