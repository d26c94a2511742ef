//! A gang rotation carried out on this node at the announced instants
//! ([`cosched_proto::rotation`]): which of the node's job cgroups run at each step
//! ([`Program`]), and the timed switch that moves from one step to the next ([`Runner`]),
//! run on the freeze watcher's thread ([`super::freeze_watch`]) so that no switch waits for
//! the event loop or for a message.
//!
//! A switch due at `due`: the outgoing jobs' freezes are written [`Runner::lead`] ahead (a
//! freeze takes effect when each rank next enters the kernel: 5–50 µs for a rank on its
//! core), their `cgroup.events` are read from [`LOOK`] after the write on, and the incoming
//! jobs are thawed as soon as every outgoing one reads frozen — so two jobs are never
//! runnable on one PE — or at the bound (half the next step after `due`), counted late.
//! Between the landing of the last freeze and the thaw no job runs: a read's pause at most,
//! whatever the lead. The lead only places the switch: it is the median time from the
//! freezes' write to the thaw over the last switches (within [`MIN_LEAD`] and [`MAX_LEAD`],
//! never more than a quarter of the step), so the incoming jobs start at the announced
//! instant on the median, on every node alike. The thaw waits for no instant: a look held
//! until `due` left both jobs stopped for the rest of the lead, and a lead learnt from looks
//! the thread made late (a core woken from idle after a long sleep) grew each switch. Each
//! switch is logged ([`Landed`]) for the node manager's accounting and `cluster bench gang`.
//!
//! That is the [`Order::Wait`]. Where every cgroup of the program has a `cpu.idle`
//! ([`crate::contain`]), a switch is the [`Order::Handover`] instead, at the instant itself
//! and with no wait: the outgoing jobs set idle, the incoming ones set normal (one that was
//! idle), thawed, then the outgoing frozen. An outgoing rank stays runnable until its freeze
//! lands, but at idle weight: it gets a core only when no rank at normal weight wants one,
//! so the incoming ranks take the cores at once instead of after a read of the freezes
//! (`benches/idle-handover.c`: a switch every 1 ms loses 3.5–5.2 % of the cores against
//! 7.5–12 % waiting). Two jobs are never runnable at normal weight together. Nothing waits
//! for the outgoing freezes, so they are read once, at the next switch's instant, before its
//! writes, to log whether they had landed by then ([`Landed::frozen`]): every wake of the
//! thread costs a rank its core on a full node, and reading a landing within a step took
//! two to five wakes a switch where the switch itself takes one. No lead places the
//! handover: the switch is one batch of writes at the instant.
//!
//! Pure: time and what the cgroups read come in as arguments; what to write comes out.

use std::collections::{BTreeSet, VecDeque};

use cosched_core::{Dur, JobId, Time};
use cosched_proto::rotation::Rotation;

/// A job's cgroup on this node: (job, launch).
pub type Cg = (JobId, u64);

/// The shortest lead: one read's pause.
pub const MIN_LEAD: Dur = LOOK;
/// The longest lead: a freeze slower than that waits for a core behind other work.
pub const MAX_LEAD: Dur = Dur::from_micros(400);
/// The pause between two reads of a freeze, from its write on, while it is younger than
/// [`YOUNG`]; then each pause doubles, up to [`LAST_LOOK`]: a freeze that has not landed by
/// then waits for its rank to get a core behind other work (milliseconds), and reading every
/// 20 µs meanwhile cost the node manager more CPU than every other part of a switch. The
/// pause also lets a rank that shares the thread's core run into its freeze.
pub const LOOK: Dur = Dur::from_micros(20);
pub const YOUNG: Dur = Dur::from_micros(100);
pub const LAST_LOOK: Dur = Dur::from_micros(250);
/// The longest wait for a freeze to land after its switch is due.
pub const MAX_BOUND: Dur = Dur::from_millis(100);
/// Landing times the lead is taken from.
const LANDINGS: usize = 64;

/// Which cgroups of this node run at each step of a rotation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    pub rotation: Rotation,
    /// The node's cgroups of jobs of the matrix.
    pub cgroups: Vec<Cg>,
}

impl Program {
    /// The cgroups that run at `t` (none before the first step).
    pub fn running_at(&self, t: Time) -> BTreeSet<Cg> {
        let Some((s, _)) = self.rotation.at(t) else {
            return BTreeSet::new();
        };
        self.cgroups
            .iter()
            .filter(|(j, _)| s.running.contains(j))
            .copied()
            .collect()
    }
}

/// A write to a cgroup's `cgroup.freeze` (freeze, thaw) or `cpu.idle` (idle, normal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Freeze(Cg),
    Thaw(Cg),
    Idle(Cg),
    Normal(Cg),
}

/// How a switch hands the PEs over (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Freeze the outgoing jobs, wait until they read frozen, thaw the incoming ones.
    #[default]
    Wait,
    /// Outgoing idle, incoming normal and thawed, outgoing frozen; no wait.
    Handover,
}

/// One switch as it went (µs of the node manager's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landed {
    /// The announced instant.
    pub due: Time,
    /// When the outgoing freezes were written, and when they all read frozen (`None`: not
    /// before the thaw, a late switch; under the handover, not known yet: a
    /// [`Logged::Landing`] follows).
    pub frozen_written: Time,
    pub frozen: Option<Time>,
    /// When the incoming jobs were thawed.
    pub thawed: Time,
    pub outgoing: Vec<Cg>,
    pub incoming: Vec<Cg>,
    /// Made as the [`Order::Handover`]: the thaw came first, `frozen` after it.
    pub handover: bool,
}

/// What a runner logs for the node manager's core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Logged {
    /// A switch as it was made: the core books each job's runs from it at once.
    Switch(Landed),
    /// Whether the outgoing freezes of the handover due at `due` had landed when read, at the
    /// next switch's instant (`Some`: by then; `None`: not, or no longer read): the
    /// handover's exposure is at most that long.
    Landing { due: Time, frozen: Option<Time> },
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the next switch (its freeze goes out [`Runner::lead`] before it).
    Idle { due: Option<Time> },
    /// The outgoing freezes are written; the incoming thaw waits for `due` and the freezes.
    Freezing(Pending),
    /// A handover is made; its outgoing freezes are read at the next switch, for the log.
    Landing(Pending),
}

/// A switch under way.
#[derive(Debug)]
struct Pending {
    due: Time,
    /// The next read of the freezes (see [`LOOK`]), and the pause before it.
    look: Time,
    pause: Dur,
    written: Time,
    out: Vec<Cg>,
    inc: Vec<Cg>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Runner {
    program: Program,
    order: Order,
    /// What this runner last thawed and has not frozen since.
    thawed: BTreeSet<Cg>,
    /// What this runner set idle and has not set normal since.
    idle: BTreeSet<Cg>,
    phase: Phase,
    landings: VecDeque<Dur>,
    /// Switches done, those late (under the handover: their freezes not landed by the next
    /// switch), and what is not logged yet.
    pub done: u64,
    pub late: u64,
    log: Vec<Logged>,
}

impl Runner {
    /// A runner of `program` from `now`, the cgroups of `thawed` running (a job launched
    /// stopped is not in it): the step in force now is switched to at once.
    pub fn new(
        now: Time,
        program: Program,
        thawed: BTreeSet<Cg>,
        order: Order,
    ) -> (Runner, Vec<Act>) {
        let mut r = Runner {
            program: Program::default(),
            order,
            thawed,
            idle: BTreeSet::new(),
            phase: Phase::Idle { due: None },
            landings: VecDeque::new(),
            done: 0,
            late: 0,
            log: Vec::new(),
        };
        let acts = r.replace(now, program, order);
        (r, acts)
    }

    /// A new announcement takes over from `now`: whatever runs and should not is frozen now,
    /// what should run and does not is thawed once those freezes land (a switch due now).
    /// Under `order` from the next switch on.
    pub fn replace(&mut self, now: Time, program: Program, order: Order) -> Vec<Act> {
        // A switch in progress: its thaw is dropped, its freezes stand (they are written). A
        // handover is made and logged already; its landing is no longer read, so counted late.
        match std::mem::replace(&mut self.phase, Phase::Idle { due: None }) {
            Phase::Freezing(p) => {
                for c in &p.out {
                    self.thawed.remove(c);
                }
            }
            Phase::Landing(p) => self.landing(now, p.due, false),
            Phase::Idle { .. } => {}
        }
        self.program = program;
        self.order = order;
        // A cgroup no longer in the program is the shell's again (it left the matrix), at
        // normal weight.
        let known: BTreeSet<Cg> = self.program.cgroups.iter().copied().collect();
        self.thawed.retain(|c| known.contains(c));
        let mut acts: Vec<Act> = self
            .idle
            .iter()
            .filter(|c| !known.contains(c))
            .map(|&c| Act::Normal(c))
            .collect();
        self.idle.retain(|c| known.contains(c));
        self.phase = Phase::Idle {
            due: self.program.rotation.next_after(now),
        };
        // Before its first step an announcement changes nothing yet.
        if self.program.rotation.at(now).is_some() {
            acts.extend(self.start(now, now));
        }
        acts
    }

    /// The rotation ends here: every cgroup this runner set idle is set normal again (the
    /// shell's once more).
    pub fn stop(&mut self) -> Vec<Act> {
        if let Phase::Landing(p) = std::mem::replace(&mut self.phase, Phase::Idle { due: None }) {
            self.landing(p.written, p.due, false);
        }
        std::mem::take(&mut self.idle)
            .into_iter()
            .map(Act::Normal)
            .collect()
    }

    /// The cgroups of the program carried out.
    pub fn cgroups(&self) -> &[Cg] {
        &self.program.cgroups
    }

    /// How this runner's switches are made.
    pub fn order(&self) -> Order {
        self.order
    }

    /// A cgroup left the node: nothing of it is written again.
    pub fn forget(&mut self, cg: Cg) {
        self.program.cgroups.retain(|&c| c != cg);
        self.thawed.remove(&cg);
        self.idle.remove(&cg);
        if let Phase::Freezing(p) | Phase::Landing(p) = &mut self.phase {
            p.out.retain(|&c| c != cg);
            p.inc.retain(|&c| c != cg);
        }
    }

    /// The lead of a freeze before its switch (see the module documentation).
    pub fn lead(&self) -> Dur {
        let mut v: Vec<Dur> = self.landings.iter().copied().collect();
        v.sort();
        let median = v.get(v.len() / 2).copied().unwrap_or(MIN_LEAD);
        median.clamp(MIN_LEAD, MAX_LEAD)
    }

    /// When [`Runner::step`] must be called next.
    pub fn wake(&self) -> Option<Time> {
        match &self.phase {
            Phase::Idle { due } => due.map(|d| d - self.lead_before(d)),
            Phase::Freezing(p) | Phase::Landing(p) => Some(p.look),
        }
    }

    /// The lead before the switch due at `due`: at most a quarter of the step it ends (none
    /// under the handover).
    fn lead_before(&self, due: Time) -> Dur {
        if self.order == Order::Handover {
            return Dur::ZERO;
        }
        let lead = self.lead();
        match self.program.rotation.at(due - Dur::from_micros(1)) {
            Some((_, began)) => lead.min(Dur((due - began).0 / 4)),
            None => lead,
        }
    }

    /// Time has come to `now`; `frozen` reads whether a cgroup is frozen (or empty). Returns
    /// the writes to make, in order.
    pub fn step(&mut self, now: Time, frozen: impl Fn(Cg) -> bool) -> Vec<Act> {
        match std::mem::replace(&mut self.phase, Phase::Idle { due: None }) {
            Phase::Idle { due: None } => Vec::new(),
            Phase::Idle { due: Some(due) } => {
                if now < due - self.lead_before(due) {
                    self.phase = Phase::Idle { due: Some(due) };
                    return Vec::new();
                }
                self.start(now, due)
            }
            Phase::Freezing(mut p) => {
                if now < p.look {
                    self.phase = Phase::Freezing(p);
                    return Vec::new();
                }
                let landed = p.out.iter().all(|&c| frozen(c));
                if !landed && now < p.due + self.bound(p.due) {
                    p.pause = if now < p.written + YOUNG {
                        LOOK
                    } else {
                        Dur(p.pause.0 * 2).min(LAST_LOOK)
                    };
                    p.look = now + p.pause;
                    self.phase = Phase::Freezing(p);
                    return Vec::new();
                }
                self.finish(now, p, landed)
            }
            Phase::Landing(p) => {
                if now < p.look {
                    self.phase = Phase::Landing(p);
                    return Vec::new();
                }
                let landed = p.out.iter().all(|&c| frozen(c));
                self.landing(now, p.due, landed);
                self.phase = Phase::Idle {
                    due: self.program.rotation.next_after(p.due.max(p.written)),
                };
                // The look is the next switch's instant: that switch is made on this wake.
                self.step(now, frozen)
            }
        }
    }

    /// A handover's outgoing freezes read at `now`: landed by then (`landed`) or not (nor
    /// when no longer read: a new announcement).
    fn landing(&mut self, now: Time, due: Time, landed: bool) {
        self.late += u64::from(!landed);
        self.log.push(Logged::Landing {
            due,
            frozen: landed.then_some(now),
        });
    }

    /// The handover of the switch due at `due`, made at `now` (see the module
    /// documentation): no job at normal weight is ever runnable beside another.
    fn hand_over(&mut self, now: Time, due: Time, out: Vec<Cg>, inc: Vec<Cg>) -> Vec<Act> {
        let mut acts: Vec<Act> = out.iter().map(|&c| Act::Idle(c)).collect();
        acts.extend(self.thaws(&inc));
        acts.extend(out.iter().map(|&c| Act::Freeze(c)));
        for c in &out {
            self.thawed.remove(c);
            self.idle.insert(*c);
        }
        let look = match self.program.rotation.next_after(due) {
            Some(next) => next.max(now),
            None => now + MAX_BOUND,
        };
        self.done += 1;
        // Logged at once: the core books the runs from it, and a job that ends before the
        // next switch must find its last run booked.
        self.log.push(Logged::Switch(Landed {
            due,
            frozen_written: now,
            frozen: out.is_empty().then_some(now),
            thawed: now,
            outgoing: out.clone(),
            incoming: inc.clone(),
            handover: true,
        }));
        self.phase = if out.is_empty() {
            Phase::Idle {
                due: self.program.rotation.next_after(due.max(now)),
            }
        } else {
            Phase::Landing(Pending {
                due,
                look,
                pause: LAST_LOOK,
                written: now,
                out,
                inc,
            })
        };
        acts
    }

    /// The thaws of `inc`, each set normal first if it is idle; they are thawed from now.
    fn thaws(&mut self, inc: &[Cg]) -> Vec<Act> {
        let mut acts = Vec::new();
        for &c in inc {
            if self.idle.remove(&c) {
                acts.push(Act::Normal(c));
            }
            acts.push(Act::Thaw(c));
            self.thawed.insert(c);
        }
        acts
    }

    /// How long after `due` a thaw waits for freezes that have not landed: half the step
    /// that starts then, at most [`MAX_BOUND`] (a rank that waits for a core behind other
    /// work freezes only when it gets one).
    fn bound(&self, due: Time) -> Dur {
        match self.program.rotation.next_after(due) {
            Some(next) => Dur((next - due).0 / 2).min(MAX_BOUND),
            None => MAX_BOUND,
        }
    }

    /// The switches done since the last call.
    pub fn take_log(&mut self) -> Vec<Logged> {
        std::mem::take(&mut self.log)
    }

    /// The switch due at `due` begins at `now`: from what this runner has running (not what
    /// the step before says: the two differ after a replaced program's switch) to what runs
    /// from `due`. A step that changes nothing here is no switch.
    fn start(&mut self, now: Time, due: Time) -> Vec<Act> {
        let after = self.program.running_at(due);
        let out: Vec<Cg> = self.thawed.difference(&after).copied().collect();
        let inc: Vec<Cg> = after.difference(&self.thawed).copied().collect();
        if out.is_empty() && inc.is_empty() {
            self.phase = Phase::Idle {
                due: self.program.rotation.next_after(due),
            };
            return Vec::new();
        }
        if self.order == Order::Handover {
            return self.hand_over(now, due, out, inc);
        }
        let acts: Vec<Act> = out.iter().map(|&c| Act::Freeze(c)).collect();
        for c in &out {
            self.thawed.remove(c);
        }
        // Nothing to wait for: the thaw waits for the instant alone.
        let look = if out.is_empty() {
            due.max(now)
        } else {
            now + LOOK
        };
        self.phase = Phase::Freezing(Pending {
            due,
            look,
            pause: LOOK,
            written: now,
            out,
            inc,
        });
        acts
    }

    fn finish(&mut self, now: Time, p: Pending, landed: bool) -> Vec<Act> {
        let Pending {
            due,
            written,
            out,
            inc,
            ..
        } = p;
        if landed && !out.is_empty() {
            self.landings.push_back(now - written);
            while self.landings.len() > LANDINGS {
                self.landings.pop_front();
            }
        }
        self.done += 1;
        self.late += u64::from(!landed);
        let acts = self.thaws(&inc);
        self.log.push(Logged::Switch(Landed {
            due,
            frozen_written: written,
            frozen: landed.then_some(now),
            thawed: now,
            outgoing: out,
            incoming: inc,
            handover: false,
        }));
        // The next switch after the one just made (a replaced program's is due now).
        let from = now.max(due);
        self.phase = Phase::Idle {
            due: self.program.rotation.next_after(from),
        };
        acts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_proto::rotation::{Cycle, Step};
    use std::collections::BTreeMap;

    fn us(n: i64) -> Time {
        Time::from_micros(n)
    }

    const A: Cg = (JobId(1), 1);
    const B: Cg = (JobId(2), 1);

    /// The switches of a runner's log.
    fn switches(log: Vec<Logged>) -> Vec<Landed> {
        log.into_iter()
            .filter_map(|l| match l {
                Logged::Switch(l) => Some(l),
                Logged::Landing { .. } => None,
            })
            .collect()
    }

    /// The landings of a runner's log: (due, read frozen at).
    fn landings(log: &[Logged]) -> Vec<(Time, Option<Time>)> {
        log.iter()
            .filter_map(|l| match *l {
                Logged::Landing { due, frozen } => Some((due, frozen)),
                Logged::Switch(_) => None,
            })
            .collect()
    }

    /// Jobs 1 and 2 alternate every `q` µs from `from`, job 1 first.
    fn alternate(from: i64, q: i64) -> Program {
        let step = |at: i64, job: u64| Step {
            at: us(at),
            slot: Some(job as u32 - 1),
            running: vec![JobId(job)],
        };
        Program {
            rotation: Rotation {
                rows: vec![(JobId(1), 0), (JobId(2), 1)],
                steps: vec![step(from, 1), step(from + q, 2)],
                cycle: Some(Cycle {
                    from: 0,
                    period: Dur::from_micros(2 * q),
                }),
            },
            cgroups: vec![A, B],
        }
    }

    /// A node whose freezes land `landing` µs after their write: the runner driven at its
    /// own wake-ups until `until`, every write kept with its instant.
    struct Node {
        written: BTreeMap<Cg, (Time, bool)>,
        acts: Vec<(Time, Act)>,
        landing: i64,
        /// The cgroups whose `cpu.idle` is 1.
        idle: BTreeSet<Cg>,
        /// Two jobs may be runnable together, one at idle weight (the handover).
        handover: bool,
    }

    fn node(landing: i64, handover: bool) -> Node {
        Node {
            written: BTreeMap::new(),
            acts: Vec::new(),
            landing,
            idle: BTreeSet::new(),
            handover,
        }
    }

    impl Node {
        fn frozen(&self, c: Cg, now: Time) -> bool {
            self.written
                .get(&c)
                .is_some_and(|&(t, freeze)| freeze && now - t >= Dur::from_micros(self.landing))
        }
        /// Runnable: thawed, or frozen with the freeze not landed yet.
        fn runnable(&self, c: Cg, now: Time) -> bool {
            !self.frozen(c, now) && self.written.contains_key(&c)
        }
        /// Runnable at normal weight.
        fn normal(&self, c: Cg, now: Time) -> bool {
            self.runnable(c, now) && !self.idle.contains(&c)
        }
        /// Applies each write in turn; after each, no two jobs are runnable at normal
        /// weight, and none is thawed while idle.
        fn apply(&mut self, now: Time, acts: Vec<Act>) {
            for a in acts {
                self.acts.push((now, a));
                match a {
                    Act::Freeze(c) => {
                        self.written.insert(c, (now, true));
                    }
                    Act::Thaw(c) => {
                        assert!(!self.idle.contains(&c), "thawed idle: {:?}", self.acts);
                        self.written.insert(c, (now, false));
                    }
                    Act::Idle(c) => {
                        self.idle.insert(c);
                    }
                    Act::Normal(c) => {
                        self.idle.remove(&c);
                    }
                }
                assert!(
                    !(self.normal(A, now) && self.normal(B, now)),
                    "both jobs runnable at normal weight at {now}: {:?}",
                    self.acts
                );
            }
        }
        fn check(&self, t: Time) {
            assert!(
                self.handover || !(self.runnable(A, t) && self.runnable(B, t)),
                "both jobs runnable at {t}: {:?}",
                self.acts
            );
            assert!(!(self.normal(A, t) && self.normal(B, t)));
        }
        fn run(&mut self, r: &mut Runner, until: Time) {
            while let Some(t) = r.wake().filter(|&t| t <= until) {
                let acts = r.step(t, |c| self.frozen(c, t));
                self.apply(t, acts);
                self.check(t);
            }
        }
    }

    impl Node {
        /// As [`Node::run`] from `from`, with a thread that wakes 80 µs late after a sleep
        /// longer than 50 µs in which no job could run (a core woken from idle, on a virtual
        /// machine), as the thread of a real node manager does.
        fn run_waking_late(&mut self, r: &mut Runner, from: Time, until: Time) {
            let mut now = from;
            while let Some(w) = r.wake().filter(|&t| t <= until) {
                let idle = !self.runnable(A, w) && !self.runnable(B, w);
                let late = if idle && w - now > Dur::from_micros(50) {
                    Dur::from_micros(80)
                } else {
                    Dur::ZERO
                };
                now = (w + late).max(now);
                let t = now;
                let acts = r.step(t, |c| self.frozen(c, t));
                self.apply(t, acts);
                self.check(t);
            }
        }
    }

    /// Freezes that landed slowly for a while (ranks waiting for their cores behind other
    /// work) made the lead long; once they land in 10 µs again, the lead comes back down,
    /// although the thread wakes late after every long sleep in which the cores stood idle
    /// (a lead learnt from looks made late grew by the lateness at each switch).
    #[test]
    fn the_lead_comes_back_down_when_freezes_land_fast_again_on_a_thread_that_wakes_late() {
        let mut n = node(300, false);
        n.written.insert(A, (us(0), false));
        let (mut r, _) = Runner::new(us(0), alternate(2_000, 2_000), [A].into(), Order::Wait);
        n.run_waking_late(&mut r, us(0), us(140_000));
        assert!(r.lead() >= Dur::from_micros(250), "{:?}", r.lead());
        r.take_log();
        n.landing = 10;
        n.run_waking_late(&mut r, us(140_000), us(280_000));
        assert!(r.lead() <= Dur::from_micros(40), "{:?}", r.lead());
        let log = switches(r.take_log());
        let last = log.last().unwrap();
        let gap = last.thawed - (last.frozen_written + Dur::from_micros(10));
        assert!(gap <= LOOK, "no job runs {gap:?}: {last:?}");
        assert_eq!(r.late, 0);
    }

    #[test]
    fn the_runner_freezes_ahead_and_thaws_once_frozen_at_the_announced_instant() {
        let mut n = node(30, false);
        // Job 1 runs (it was thawed before); the rotation starts later.
        n.written.insert(A, (us(0), false));
        let (mut r, acts) = Runner::new(us(0), alternate(1_000, 1_000), [A].into(), Order::Wait);
        assert!(acts.is_empty(), "job 1 already runs: {acts:?}");
        n.run(&mut r, us(10_000));
        let log = switches(r.take_log());
        assert_eq!(log.len(), 9, "a switch each ms from 2 ms on: {log:?}");
        // No job runs from the landing to the thaw: a look's pause at most.
        let gap = |l: &Landed| l.thawed - (l.frozen_written + Dur::from_micros(30));
        for (k, l) in log.iter().enumerate() {
            assert_eq!(l.due, us(2_000 + 1_000 * k as i64));
            assert!(l.frozen_written < l.due, "the freeze goes out ahead: {l:?}");
            assert!(l.frozen.is_some() && gap(l) <= LOOK, "{l:?}");
            // Within the landing and a look of the due instant.
            assert!((l.thawed - l.due).0.abs() <= 30 + LOOK.0, "{l:?}");
        }
        assert_eq!(r.late, 0);
        // The lead settled on the freeze's write to the thaw: the thaw falls on the instant.
        let last = log.last().unwrap();
        assert_eq!(last.thawed, last.due, "lead {:?}", r.lead());
        assert_eq!(
            (log[0].outgoing.clone(), log[0].incoming.clone()),
            (vec![A], vec![B])
        );
    }

    #[test]
    fn a_new_announcement_takes_over_and_a_freeze_that_does_not_land_holds_the_thaw() {
        let mut n = node(30, false);
        n.written.insert(A, (us(0), false));
        let (mut r, _) = Runner::new(us(0), alternate(0, 1_000), [A].into(), Order::Wait);
        n.run(&mut r, us(2_500));
        // Job 1 runs from 2 ms. A new announcement at 2.5 ms: job 2 alone from now on.
        let mut p = alternate(0, 1_000);
        p.rotation.steps = vec![Step {
            at: us(2_500),
            slot: Some(1),
            running: vec![JobId(2)],
        }];
        p.rotation.cycle = None;
        let acts = r.replace(us(2_500), p, Order::Wait);
        assert_eq!(acts, [Act::Freeze(A)]);
        n.apply(us(2_500), acts);
        n.run(&mut r, us(10_000));
        let last = switches(r.take_log()).pop().unwrap();
        assert_eq!((last.due, last.incoming.clone()), (us(2_500), vec![B]));
        assert!(last.thawed >= us(2_530));
        assert_eq!(r.wake(), None, "nothing more announced");

        // A freeze that never lands: the thaw waits half the step, then goes, counted late.
        let mut n = node(i64::MAX / 2, false);
        n.written.insert(A, (us(0), false));
        let (mut r, _) = Runner::new(us(0), alternate(1_000, 1_000), [A].into(), Order::Wait);
        let mut seen = Vec::new();
        let thawed = loop {
            let now = r.wake().unwrap();
            seen.extend(r.step(now, |_| false).into_iter().map(|a| (now, a)));
            if seen.iter().any(|(_, a)| matches!(a, Act::Thaw(_))) {
                break now;
            }
        };
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(
            seen[0].0 < us(2_000) && seen[0].1 == Act::Freeze(A),
            "{seen:?}"
        );
        assert_eq!(seen[1].1, Act::Thaw(B));
        assert!(
            thawed >= us(2_500) && thawed < us(2_500) + LAST_LOOK,
            "{thawed}"
        );
        assert_eq!(r.late, 1);
    }

    /// The handover: at the instant itself, the outgoing job set idle, the incoming one set
    /// normal (when it was idle) and thawed, then the outgoing frozen; its freeze is read
    /// on until it lands, which the log gives as the exposure.
    #[test]
    fn the_handover_switches_at_the_instant_and_logs_when_the_outgoing_freeze_landed() {
        let mut n = node(800, true);
        n.written.insert(A, (us(0), false));
        let (mut r, acts) =
            Runner::new(us(0), alternate(2_000, 2_000), [A].into(), Order::Handover);
        assert!(acts.is_empty(), "job 1 already runs: {acts:?}");
        n.run(&mut r, us(19_500));
        let at = |t: i64| -> Vec<Act> {
            n.acts
                .iter()
                .filter(|(w, _)| *w == us(t))
                .map(|&(_, a)| a)
                .collect()
        };
        assert_eq!(at(4_000), [Act::Idle(A), Act::Thaw(B), Act::Freeze(A)]);
        assert_eq!(
            at(6_000),
            [Act::Idle(B), Act::Normal(A), Act::Thaw(A), Act::Freeze(B)],
            "job 1 was idle: set normal before its thaw"
        );
        let log = r.take_log();
        let made = switches(log.clone());
        assert_eq!(made.len(), 8, "a switch every 2 ms from 4 ms on: {log:?}");
        for (k, l) in made.iter().enumerate() {
            assert!(l.handover);
            assert_eq!(l.due, us(4_000 + 2_000 * k as i64));
            assert_eq!(
                (l.frozen_written, l.thawed, l.frozen),
                (l.due, l.due, None),
                "no lead, logged at once: {l:?}"
            );
        }
        // Each landing is read at the next switch, on its wake: the last one's is not yet.
        let read = landings(&log);
        assert_eq!(read.len(), 7, "{log:?}");
        for (k, &(due, frozen)) in read.iter().enumerate() {
            assert_eq!(due, us(4_000 + 2_000 * k as i64));
            assert_eq!(frozen, Some(due + Dur::from_micros(2_000)), "{log:?}");
        }
        assert_eq!(r.late, 0);
        // One wake a switch: none between a switch and the next.
        assert!(
            n.acts.iter().all(|(t, _)| t.as_micros() % 2_000 == 0),
            "{:?}",
            n.acts
        );
        assert_eq!(r.wake(), Some(us(20_000)));
        // The end of the rotation: job 2, out at 18 ms, is set normal again.
        assert_eq!(r.stop(), [Act::Normal(B)]);
        assert_eq!(r.wake(), None);
        assert_eq!(
            landings(&r.take_log()),
            [(us(18_000), None)],
            "the last handover's landing, no longer read"
        );
        assert_eq!(r.late, 1);
    }

    /// A handover whose outgoing freeze has not landed by the next switch is logged so,
    /// counted late; the rotation goes on. A new announcement in the wait order sets an idle
    /// incoming job normal before its thaw, and the end of the rotation sets every idle job
    /// normal again.
    #[test]
    fn a_handover_freeze_that_does_not_land_is_late_and_idle_jobs_end_normal() {
        let mut n = node(2_500, true);
        n.written.insert(A, (us(0), false));
        let (mut r, _) = Runner::new(us(0), alternate(2_000, 2_000), [A].into(), Order::Handover);
        n.run(&mut r, us(9_500));
        let log = r.take_log();
        assert_eq!(switches(log.clone()).len(), 3, "{log:?}");
        assert_eq!(
            landings(&log),
            [(us(4_000), None), (us(6_000), None)],
            "read at 6 and 8 ms, 2 ms after their writes"
        );
        assert_eq!(r.late, 2);
        // A new announcement while a handover's landing is not read yet: the handover was
        // logged when made, its landing is logged late.
        let mut m = node(1_500, true);
        m.written.insert(A, (us(0), false));
        let (mut q, _) = Runner::new(us(0), alternate(2_000, 2_000), [A].into(), Order::Handover);
        m.run(&mut q, us(4_100));
        let made = switches(q.take_log());
        assert!(made.len() == 1 && made[0].due == us(4_000), "{made:?}");
        let acts = q.replace(us(4_100), alternate(2_000, 2_000), Order::Handover);
        assert!(acts.is_empty(), "job 2's step is in force: {acts:?}");
        assert_eq!(landings(&q.take_log()), [(us(4_000), None)]);
        assert_eq!(q.late, 1);
        // Job 2 runs from 8 ms; job 1 is idle (and frozen). The wait order from 9.5 ms.
        n.handover = false;
        n.landing = 30;
        let acts = r.replace(us(9_500), alternate(2_000, 2_000), Order::Wait);
        assert!(acts.is_empty(), "job 2's step is in force: {acts:?}");
        n.run(&mut r, us(11_000));
        let last = switches(r.take_log()).pop().unwrap();
        assert!(!last.handover && last.frozen.is_some(), "{last:?}");
        let at_thaw: Vec<Act> = n
            .acts
            .iter()
            .filter(|(w, _)| *w == last.thawed)
            .map(|&(_, a)| a)
            .collect();
        assert_eq!(at_thaw, [Act::Normal(A), Act::Thaw(A)]);
        // Job 2, frozen by the wait order, was never set idle since 8 ms: nothing to undo.
        assert_eq!(r.stop(), []);
    }
}
