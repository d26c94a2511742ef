//! Gang scheduling with an Ousterhout matrix (`gang`).
//!
//! The matrix has one row (slot) per multiprogramming context and one column per PE. A job
//! holds the same PEs in one row for its whole life; rows take turns on the machine, each for
//! one time quantum, and a multi-context switch between rows costs `context_switch` during
//! which the jobs leaving stop and the jobs arriving have not started yet.
//!
//! - New jobs are packed into rows by `packing`: `buddy` (aligned power-of-two blocks, the
//!   scheme of the seed's gang simulations), `first-fit` (first row with room) or `best-fit`
//!   (the fullest row with room). A new row opens while the multiprogramming level allows.
//! - Alternate scheduling (`alternate = true`, the default): while a row is active, jobs of
//!   other rows whose PEs are all idle in it run too; jobs already running keep running
//!   across a switch when they still fit, so they pay no switch.
//! - When jobs leave, the remaining jobs move to lower rows where their PEs are free
//!   (`repack = true`), and empty rows disappear, so the cycle shortens.
//! - With a memory size per node (`MachineShape::mem_per_node_mib`) and a job memory
//!   (`JobRequest::mem_per_pe_kib`), a job is placed only where its memory fits beside the
//!   jobs of all rows (they are all resident).
//! - No quantum timer runs while nothing would change at a switch (one row, or every job
//!   already running through alternate scheduling).
//! - A held member keeps its place in the matrix but sits out: gang suspends it if it was
//!   running (the ledger keeps a held job running until told otherwise), lets alternate
//!   scheduling use its PEs, counts it as nothing to switch for, and resumes it once released.
//!
//! - Between outside events the rotation repeats: gang answers [`Policy::cycle_point`] each
//!   time one row becomes active (the first row to become active after the last outside
//!   event), so the simulator can skip whole rotations (see the policy contract, `api.rs`,
//!   "Skipping quanta").
//!
//! Relaxed alternate scheduling (seed 000 Fig. 2.3: single processes of a gang filling holes)
//! is a process-level idea that the job-level decisions cannot express, since a job runs on
//! all its PEs or on none; `relaxed = true` is refused with that explanation.

mod bits;
mod place;
mod rotate;

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use cosched_core::{Dur, JobId, MachineShape, PeSet, Time};

use crate::opts::Opts;
use crate::queue::WaitQueue;
use crate::{
    ConfigError, CyclePoint, Decision, Event, JobRequest, MatrixView, Policy, PolicyConfig,
    SlotView,
};
pub(crate) use bits::SortedIds;
pub(crate) use cosched_core::{IdHasher, PeBits as Bits};

/// How a new job is put into the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// An aligned block of the next power of two PEs; the job uses its first PEs and the rest
    /// of the block stays reserved in that row.
    Buddy,
    /// The first row with enough free PEs (lowest-numbered free PEs).
    FirstFit,
    /// The row with the fewest free PEs that still has enough.
    BestFit,
}

impl Packing {
    fn parse(text: &str) -> Option<Packing> {
        match text {
            "buddy" => Some(Packing::Buddy),
            "first-fit" | "first_fit" | "firstfit" => Some(Packing::FirstFit),
            "best-fit" | "best_fit" | "bestfit" => Some(Packing::BestFit),
            _ => None,
        }
    }
}

impl Row {
    /// `block` left the row: words from its first one may have clear bits now.
    fn unfill(&self, block: &PeSet) {
        if let Some(&(s, _)) = block.runs().first() {
            self.full_below
                .set(self.full_below.get().min(s as usize / 64));
        }
    }
}

/// Counters a benchmark or a report reads after a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangStats {
    /// Times the active row changed.
    pub slot_switches: u64,
    /// Slot switches that stopped at least one job and so paid the context-switch cost.
    pub context_switches: u64,
    /// Most rows the matrix ever had.
    pub max_rows: usize,
}

#[derive(Clone, Debug)]
struct Row {
    /// PEs of jobs in this row.
    busy: Bits,
    /// `busy` plus the unused rest of buddy blocks: what packing must avoid.
    reserved: Bits,
    /// Bits set in `reserved` (blocks in a row never overlap, so this is the sum of their
    /// sizes): lets packing turn a job away from a full row without reading its words.
    reserved_count: u32,
    /// Every word of `reserved` below this one is full: where packing starts reading. Lowered
    /// when a block leaves the row, raised by first-fit searches (a cache, hence the cell).
    full_below: Cell<usize>,
    /// Jobs in placement order.
    jobs: Vec<JobId>,
    /// The same jobs in id order: a recomputed target starts from them without sorting.
    ids: SortedIds,
    /// `(job, procs, first and last PE, PEs)` of `jobs`, in the same order: read on every
    /// switch without a lookup.
    entries: Vec<(JobId, u32, [u32; 2], PeSet)>,
    /// `(block, settled)` of `jobs`, in the same order: what repacking reads of each job,
    /// walked without a member lookup. `block` is [`Member::block`]; `settled` is
    /// [`Gang::clears`] when repacking last found no lower row with room for the block (0:
    /// never looked). Rows only gain reservations until a block leaves them, so only the
    /// lower rows cleared after this stamp need looking at again: repacking after a
    /// departure reads the rows that changed, not every row below every job.
    blocks: Vec<(PeSet, u64)>,
    /// [`Gang::clears`] when a block last left this row: a job above that found no room
    /// here after that stamp still finds none (see [`Row::blocks`]).
    cleared_at: u64,
    /// At most the least `settled` stamp of its jobs ([`Row::blocks`]; 0 once a job joins):
    /// while no lower row was cleared after it, repacking has nothing to look at in this row.
    settled: u64,
}

#[derive(Clone, Debug)]
struct Member {
    req: JobRequest,
    pes: PeSet,
    /// The PEs this job keeps others from in its row (its buddy block, or `pes`).
    block: PeSet,
    row: usize,
    held: bool,
    /// A Start or Place was sent for it.
    announced: bool,
}

/// What making a row active does, for one running set before: computed once per matrix
/// version, then replayed on every turn of the cycle (a switch is then a comparison, the
/// decisions and a copy, with no set arithmetic).
#[derive(Clone, Debug)]
struct Switch {
    /// [`Gang::version`] when computed.
    version: u64,
    /// The running set it starts from.
    before: SortedIds,
    /// The target: the running set after it.
    after: SortedIds,
    /// `before` minus `after`, in order: the jobs it stops.
    stops: Vec<JobId>,
    /// `after` minus `before`, in order: the jobs it runs.
    goes: Vec<JobId>,
}

impl Switch {
    /// The switch from `running` to its target (`after`, already set).
    fn from(&mut self, running: &SortedIds) {
        self.before.copy_from(running);
        self.stops.clear();
        self.goes.clear();
        let (stops, goes) = (&mut self.stops, &mut self.goes);
        running.for_each_difference(&self.after, |job| stops.push(job), |job| goes.push(job));
    }
}

/// The state at the last cycle point (see [`Policy::cycle_point`]): what must be equal for
/// the rotation to repeat, and the counters to measure a period by.
#[derive(Clone, Debug, Default)]
struct CycleMark {
    /// The row that had just become active: the phase of the points until the next mark.
    active: usize,
    version: u64,
    running: SortedIds,
    next_token: u64,
    stats: GangStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimerKind {
    QuantumEnd,
    SwitchDone,
}

#[derive(Clone, Debug)]
pub struct Gang {
    machine: MachineShape,
    pes: u32,
    mpl: Option<u32>,
    quantum: Dur,
    context_switch: Dur,
    packing: Packing,
    alternate: bool,
    repack: bool,
    /// `fifo`: the first waiting job that does not fit blocks the others.
    fifo: bool,
    mem_limit_kib: Option<u64>,

    rows: Vec<Row>,
    members: HashMap<JobId, Member, BuildHasherDefault<IdHasher>>,
    /// Members with no Start or Place sent yet.
    fresh: Vec<JobId>,
    /// Members held by an administrator.
    held_members: usize,
    /// The PEs of the jobs [`Gang::compute_target`] adds beside the active row (all of the
    /// target's PEs while a member is held); all clear between its calls, and reused so a
    /// switch allocates nothing for the mask.
    scratch: Bits,
    /// The runs set in `scratch` by one [`Gang::compute_target`], so it clears just them.
    taken: Vec<(u32, u32)>,
    /// Whether [`Gang::compute_target`] reads the active row's `busy` in place (a machine of
    /// more than [`rotate::IN_PLACE_FROM_PES`] PEs) rather than copying it into the mask.
    in_place: bool,
    /// Reused by [`Gang::compute_target`] for the jobs alternate scheduling adds.
    extra: Vec<JobId>,
    /// Bumped whenever the matrix or a hold changes; [`Gang::target`] results are reused
    /// while it stays the same.
    version: u64,
    /// Per active row: the last switch computed for it. In a steady matrix the cycle
    /// repeats, so most switches find their answer here and only replay it.
    cache: Vec<Option<Switch>>,
    /// Jobs not yet in the matrix, with their holds (a member's hold is [`Member::held`]).
    queue: WaitQueue,
    down: Bits,
    /// PEs set in `down`.
    down_count: u32,
    /// Jobs of the queue that [`Gang::admit`] could not place, valid while `version` and the
    /// down nodes are as they were then: placing jobs only takes room, so a job that did not
    /// fit does not fit until a job leaves or a node comes back, and is not tried again
    /// against every row until then.
    unplaceable: (u64, SortedIds),
    /// Memory in use per node (KiB), summed over all rows.
    mem_used: Vec<u64>,
    /// Counts the blocks that left a row (a departure, or a job repacked lower); stamps
    /// [`Row::cleared_at`] and the jobs' `settled` stamps ([`Row::blocks`]). Starts at 1, so 0
    /// means "never".
    clears: u64,
    /// [`Gang::compact`]'s copy of the rows' [`Row::cleared_at`] below the row it looks at, in
    /// row order: each job's search for a lower row cleared since it settled reads one array,
    /// not a field of every row; reused so repacking allocates nothing for it.
    cleared_stamps: Vec<u64>,
    /// [`Gang::compact`]'s list of the rows below the row it looks at that were cleared since
    /// that row's [`Row::settled`]; reused like `cleared_stamps`.
    recent_rows: Vec<usize>,

    active: usize,
    running: SortedIds,
    /// Between the Suspends and the Resumes of a multi-context switch.
    switching: bool,
    pending: Option<(u64, TimerKind)>,
    next_token: u64,
    stats: GangStats,
    /// What the events of the current instant left for [`Policy::decide`]: whether the
    /// active row emptied, whether its quantum ran out.
    active_gone: bool,
    quantum_over: bool,
    /// Quantum skipping: the state at the last cycle point, …
    mark: Option<CycleMark>,
    /// … whether anything but this policy's own timers was observed since (the next row to
    /// become active is then marked, whichever it is), …
    disturbed: bool,
    /// … and, after a `Steady` answer, the timer tokens and counters of one period.
    period: Option<(u64, GangStats)>,
    /// When the pending timer is due: at a cycle point a whole quantum ahead (it was armed at
    /// this instant), so that two points stand at the same offset from their next switch.
    due: Time,
    /// Switches reused from another running set by [`Gang::same_target_for_running`]: the tests
    /// check that the rule is exercised.
    #[cfg(test)]
    reused_for_running: u64,
    /// Of those, the reuses where a job that differs shares no PE with the active row.
    #[cfg(test)]
    reused_beyond_clashing: u64,
}

/// Default time quantum when none is configured.
pub const DEFAULT_QUANTUM: Dur = Dur::from_secs(10);

impl Gang {
    pub fn new(cfg: &PolicyConfig) -> Result<Gang, ConfigError> {
        let o = Opts::new("gang", cfg);
        let packing_text = o.string("packing", "buddy")?;
        let packing = Packing::parse(&packing_text).ok_or_else(|| {
            o.bad(
                "packing",
                format!("{packing_text:?} is not one of buddy, first-fit, best-fit"),
            )
        })?;
        if o.boolean("relaxed", false)? {
            return Err(o.bad(
                "relaxed",
                "relaxed alternate scheduling runs single processes of a job and cannot be expressed \
                 with job-level decisions; use the process-level simulator (cosim) for it",
            ));
        }
        let quantum = cfg.quantum.unwrap_or(DEFAULT_QUANTUM);
        if quantum <= Dur::ZERO {
            return Err(o.bad("quantum", "must be positive (pass --quantum 10s)"));
        }
        if cfg.mpl == Some(0) {
            return Err(o.bad("mpl", "must be at least 1 (or absent for unlimited)"));
        }
        let queue_order = o.string("queue", "skip")?;
        let fifo = match queue_order.as_str() {
            "fifo" => true,
            "skip" => false,
            other => return Err(o.bad("queue", format!("{other:?} is not one of fifo, skip"))),
        };
        let alternate = o.boolean("alternate", true)?;
        let repack = o.boolean("repack", true)?;
        o.finish()?;
        let machine = cfg.machine;
        let pes = machine.total_pes();
        Ok(Gang {
            machine,
            pes,
            mpl: cfg.mpl,
            quantum,
            context_switch: cfg.context_switch.unwrap_or(Dur::ZERO),
            packing,
            alternate,
            repack,
            fifo,
            mem_limit_kib: machine.mem_per_node_mib.map(|m| m * 1024),
            rows: Vec::new(),
            members: HashMap::default(),
            fresh: Vec::new(),
            held_members: 0,
            scratch: Bits::new(pes),
            taken: Vec::new(),
            in_place: pes > rotate::IN_PLACE_FROM_PES,
            extra: Vec::new(),
            version: 0,
            cache: Vec::new(),
            queue: WaitQueue::default(),
            down: Bits::new(pes),
            down_count: 0,
            unplaceable: (0, SortedIds::default()),
            mem_used: vec![0; machine.nodes as usize],
            clears: 1,
            cleared_stamps: Vec::new(),
            recent_rows: Vec::new(),
            active: 0,
            running: SortedIds::default(),
            switching: false,
            pending: None,
            next_token: 0,
            stats: GangStats::default(),
            active_gone: false,
            quantum_over: false,
            mark: None,
            disturbed: false,
            period: None,
            due: Time::ZERO,
            #[cfg(test)]
            reused_for_running: 0,
            #[cfg(test)]
            reused_beyond_clashing: 0,
        })
    }

    pub fn stats(&self) -> GangStats {
        self.stats
    }

    /// Jobs running now.
    pub fn running(&self) -> Vec<JobId> {
        self.running.iter().copied().collect()
    }
}

impl Policy for Gang {
    fn places_by_node(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "gang"
    }

    fn observe(&mut self, _now: Time, event: Event) {
        // Anything but a timer of our own breaks the rotation's repetition (timers are told
        // apart below, where a cancelled one is found).
        self.disturbed |= !matches!(event, Event::Timer(_));
        match event {
            Event::Submitted(req) => match self.impossible(&req) {
                Some(why) => self.queue.refuse(req.id, why),
                None => {
                    self.queue.insert(req);
                }
            },
            Event::Ended(id) => {
                if self.remove_member(id) {
                    self.active_gone |= self.compact();
                    self.queue.release(id);
                } else {
                    self.queue.end(id);
                }
            }
            Event::Timer(token) => match self.pending {
                Some((t, TimerKind::QuantumEnd)) if t == token => {
                    self.pending = None;
                    self.quantum_over = true;
                }
                Some((t, TimerKind::SwitchDone)) if t == token => {
                    self.pending = None;
                    self.switching = false;
                }
                _ => self.disturbed = true, // a timer that was cancelled
            },
            Event::Running { job, pes, since: _ } => {
                let row = (0..self.rows.len())
                    .find(|&r| !self.rows[r].reserved.intersects_pes(&pes))
                    .unwrap_or(self.rows.len());
                let id = job.id;
                self.insert(job, row, pes.clone(), pes.clone(), false);
                let m = self.members.get_mut(&id).expect("just inserted");
                m.announced = true;
                // It runs now; keep it running if no running job shares its PEs.
                let clash = self
                    .running
                    .iter()
                    .any(|r| self.members[r].pes.intersects(&pes));
                if !clash {
                    self.running.insert(id);
                }
                self.fresh.retain(|j| *j != id);
            }
            Event::NodeDown(node) => {
                let r = self.machine.pes_of(node);
                self.down.set_range(r.start, r.end);
                self.down_count = self.down.count();
                self.version += 1;
            }
            Event::NodeUp(node) => {
                let r = self.machine.pes_of(node);
                self.down.clear_range(r.start, r.end);
                self.down_count = self.down.count();
                self.version += 1;
            }
            Event::Held(id) => match self.members.get_mut(&id) {
                Some(m) => {
                    if !m.held {
                        m.held = true;
                        self.held_members += 1;
                    }
                    // The driver stopped its processes, but the ledger still has it running
                    // (a hold is an overlay): it stays in `running` until this policy
                    // suspends it, which the next reconcile does since the target leaves
                    // held jobs out. Dropping it here would later Resume a job the ledger
                    // never saw stopped, and let another job onto PEs the ledger deems busy.
                    self.version += 1;
                }
                None => self.queue.hold(id),
            },
            Event::Released(id) => {
                self.version += 1;
                if let Some(m) = self.members.get_mut(&id)
                    && m.held
                {
                    m.held = false;
                    self.held_members -= 1;
                }
                self.queue.release(id);
            }
        }
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.queue.reject_refused(out);
        let active_gone = std::mem::take(&mut self.active_gone);
        let quantum_over = std::mem::take(&mut self.quantum_over);
        // The active row emptied at this instant: its successor starts a fresh quantum
        // (`settle`), whether or not the old quantum also ran out now.
        if quantum_over && !active_gone && !self.switching && self.rows.len() > 1 {
            let next = (self.active + 1) % self.rows.len();
            self.admit();
            self.switch_to(now, next, out);
        } else {
            self.settle(now, out, active_gone);
        }
    }

    fn queue(&self) -> Vec<JobId> {
        self.queue.ids()
    }

    /// The phase is "row `r` just became active, its quantum timer armed at this instant", `r`
    /// the row active at the last mark. There the future depends only on the matrix (its
    /// version), the running set and what will be observed: with equal versions and running
    /// sets and only our timers observed in between, the rotation repeats exactly, whichever
    /// row it is measured from (each turn replays the switch of its row from the running set
    /// the previous turn left). After an outside event the next row to become active is
    /// marked: the earliest point whose state can be compared one cycle later, so a period
    /// is measured from the first switch after the change, whichever row it brings.
    fn cycle_point(&mut self, now: Time, jobs: &mut Vec<JobId>) -> Option<CyclePoint> {
        let at_switch = self.rows.len() > 1
            && !self.switching
            && self.held_members == 0
            && self.fresh.is_empty()
            && matches!(self.pending, Some((_, TimerKind::QuantumEnd)))
            && self.due == now + self.quantum;
        if !at_switch {
            return None;
        }
        // Between marks only the marked row's turns are points: the engine measures a period
        // from its last mark to the next point, which must stand at the same phase.
        let other_row = |m: &CycleMark| m.active != self.active && m.active < self.rows.len();
        if !self.disturbed && self.mark.as_ref().is_some_and(other_row) {
            return None;
        }
        let disturbed = std::mem::take(&mut self.disturbed);
        let mut mark = self.mark.take().unwrap_or_default();
        let steady = !disturbed
            && mark.active == self.active
            && mark.version == self.version
            && mark.running == self.running;
        self.period = steady.then(|| {
            let (now, then) = (self.stats, mark.stats);
            let stats = GangStats {
                slot_switches: now.slot_switches - then.slot_switches,
                context_switches: now.context_switches - then.context_switches,
                max_rows: 0,
            };
            (self.next_token - mark.next_token, stats)
        });
        mark.active = self.active;
        mark.version = self.version;
        mark.running.copy_from(&self.running);
        mark.next_token = self.next_token;
        mark.stats = self.stats;
        self.mark = Some(mark);
        jobs.clear();
        // Row by row, each a copy of a slice: a flattened iterator goes id by id.
        for r in &self.rows {
            jobs.extend_from_slice(&r.jobs);
        }
        Some(if steady {
            CyclePoint::Steady
        } else {
            CyclePoint::Mark
        })
    }

    fn skip_cycles(&mut self, cycles: u64) -> Option<u64> {
        let (tokens, per) = self.period.take()?;
        let (token, kind) = self.pending?;
        let add = cycles * tokens;
        self.next_token += add;
        self.pending = Some((token + add, kind));
        self.stats.slot_switches += cycles * per.slot_switches;
        self.stats.context_switches += cycles * per.context_switches;
        // The next period is measured from here.
        if let Some(m) = self.mark.as_mut() {
            m.next_token = self.next_token;
            m.stats = self.stats;
        }
        Some(token + add)
    }

    fn matrix(&self) -> Option<MatrixView> {
        let slots = self
            .rows
            .iter()
            .map(|r| SlotView {
                jobs: r
                    .jobs
                    .iter()
                    .map(|id| (*id, self.members[id].pes.clone()))
                    .collect(),
            })
            .collect();
        let active = (!self.rows.is_empty() && !self.switching).then_some(self.active as u32);
        Some(MatrixView { slots, active })
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The target after `event` at `t`, computed and by its definition.
    fn target_after(p: &mut Gang, t: Time, event: Event) -> (SortedIds, SortedIds) {
        p.handle(t, event, &mut Vec::new());
        let mut got = SortedIds::default();
        p.compute_target(&mut got);
        (got, p.target_by_definition())
    }

    /// Fires the quantum timer the last decisions armed, if any.
    fn fire(p: &mut Gang, now: Time, out: &mut Vec<Decision>) -> bool {
        let token = out.iter().rev().find_map(|d| match d {
            Decision::SetTimer { token, .. } => Some(*token),
            _ => None,
        });
        out.clear();
        match token.or(p.pending.map(|(t, _)| t)) {
            Some(t) => {
                p.handle(now, Event::Timer(t), out);
                true
            }
            None => false,
        }
    }

    fn goes(out: &[Decision], id: u64) -> bool {
        out.iter().any(
            |d| matches!(d, Decision::Resume { job } | Decision::Start { job, .. } if job.0 == id),
        )
    }

    /// A row's cached switch is not carried past a job joining another row where the cached
    /// row has a hole: alternate scheduling runs the newcomer in that hole during the row's
    /// turn. Row 3 holds G on PEs 0-1 only; after its turns are cached, C joins row 1 on PEs
    /// 2-3 and must run beside G (row 2 is full, so the running set row 3 starts from is
    /// the same with or without C: only the carrying rule can tell its cached switch is stale).
    #[test]
    fn a_cached_switch_is_redone_when_a_job_joins_another_row_beside_its_hole() {
        let mut c = PolicyConfig::new(MachineShape::flat(4, 1));
        c.quantum = Some(Dur::from_secs(10));
        let mut p = Gang::new(&c).unwrap();
        let mut out = Vec::new();
        // A fills row 0; B and F fill row 1; H fills row 2; G opens row 3 on PEs 0-1.
        for (id, procs) in [(1, 4), (2, 2), (3, 2), (6, 4), (4, 2)] {
            let req = JobRequest::new(JobId(id), Time::ZERO, procs, Dur::from_secs(100_000));
            p.handle(Time::ZERO, Event::Submitted(req), &mut out);
        }
        assert_eq!(p.rows.len(), 4);
        assert_eq!(p.members[&JobId(4)].row, 3);
        let mut now = 0;
        fn turn(p: &mut Gang, now: &mut i64, out: &mut Vec<Decision>) {
            *now += 10;
            assert!(fire(p, Time::from_secs(*now), out));
        }
        for _ in 0..4 {
            turn(&mut p, &mut now, &mut out);
        }
        // F leaves row 1 a hole at PEs 2-3, as row 3 has; G stays in row 3 (its PEs are
        // taken in every row below).
        p.handle(Time::from_secs(now + 1), Event::Ended(JobId(3)), &mut out);
        assert_eq!(p.members[&JobId(4)].row, 3);
        for _ in 0..4 {
            turn(&mut p, &mut now, &mut out);
        }
        let req = JobRequest::new(
            JobId(5),
            Time::from_secs(now + 1),
            2,
            Dur::from_secs(100_000),
        );
        p.handle(Time::from_secs(now + 1), Event::Submitted(req), &mut out);
        assert_eq!(p.members[&JobId(5)].row, 1);
        let mut saw_row_3 = false;
        for _ in 0..4 {
            turn(&mut p, &mut now, &mut out);
            if p.active == 3 {
                saw_row_3 = true;
                assert!(
                    p.running.contains(&JobId(5)),
                    "C idle beside G: {:?}",
                    p.running
                );
            }
        }
        assert!(saw_row_3);
    }

    proptest::proptest! {
        /// The target computed with the mask of added jobs beside the active row's `busy`, or
        /// with a copy of the row, is the plain one (a fresh mask of every chosen job),
        /// through arrivals, departures, holds, releases and switches, with each packing and
        /// a few MPLs; and the mask is left clear.
        #[test]
        fn the_target_is_its_definition(
            in_place in proptest::bool::ANY,
            packing in 0usize..3,
            mpl in proptest::option::of(1u32..5),
            ops in proptest::collection::vec((0u8..6, 1u32..17, 0usize..64), 1..80),
        ) {
            let mut c = PolicyConfig::new(MachineShape::flat(16, 1));
            c.quantum = Some(Dur::from_secs(10));
            c.mpl = mpl;
            let name = ["buddy", "first-fit", "best-fit"][packing];
            c.options.insert("packing".into(), toml::Value::from(name));
            let mut p = Gang::new(&c).unwrap();
            // Both ways of holding the active row's PEs, on a machine small enough to fill.
            p.in_place = in_place;
            let mut next = 1u64;
            let mut now = 0i64;
            for (op, procs, pick) in ops {
                now += 1;
                let t = Time::from_secs(now);
                let ids: Vec<JobId> = p.members.keys().copied().collect();
                let any = (!ids.is_empty()).then(|| {
                    let mut ids = ids;
                    ids.sort();
                    ids[pick % ids.len()]
                });
                let event = match (op, any) {
                    (0 | 1, _) | (_, None) => {
                        let req = JobRequest::new(JobId(next), t, procs, Dur::from_secs(100_000));
                        next += 1;
                        Event::Submitted(req)
                    }
                    (2, Some(id)) => Event::Ended(id),
                    (3, Some(id)) => Event::Held(id),
                    (4, Some(id)) => Event::Released(id),
                    _ => match p.pending {
                        Some((token, _)) => Event::Timer(token),
                        None => continue,
                    },
                };
                let (got, by_definition) = target_after(&mut p, t, event);
                proptest::prop_assert_eq!(got, by_definition);
                proptest::prop_assert_eq!(p.scratch.count(), 0);
            }
        }
    }

    /// Gang on 16 one-core PEs with 10 s quanta, and a xorshift stream from `seed` (`rand(n)`
    /// is below `n`): the random runs of the tests below.
    fn small_gang_and_stream(mut seed: u64) -> (Gang, impl FnMut(u64) -> u64) {
        let mut c = PolicyConfig::new(MachineShape::flat(16, 1));
        c.quantum = Some(Dur::from_secs(10));
        let rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        (Gang::new(&c).unwrap(), rand)
    }

    /// A switch reused for another running set (see [`Gang::same_target_for_running`]) is
    /// what a fresh computation gives: debug builds compare the two at every
    /// reuse (`check_carried`), and this run of many small jobs and quanta on 16 PEs, with
    /// departures, takes that reuse often. Every target is also compared with its
    /// definition after each event.
    #[test]
    fn switches_reused_across_clashing_running_sets_are_fresh() {
        let (mut p, mut rand) = small_gang_and_stream(0x2545_f491_4f6c_dd1d);
        let mut next = 1u64;
        for step in 1..=3000i64 {
            let t = Time::from_secs(step);
            let event = match rand(10) {
                0..=2 => {
                    let procs = 1 + rand(8) as u32;
                    let req = JobRequest::new(JobId(next), t, procs, Dur::from_secs(100_000));
                    next += 1;
                    Event::Submitted(req)
                }
                3 if !p.members.is_empty() => {
                    let mut ids: Vec<JobId> = p.members.keys().copied().collect();
                    ids.sort();
                    Event::Ended(ids[rand(ids.len() as u64) as usize])
                }
                _ => match p.pending {
                    Some((token, _)) => Event::Timer(token),
                    None => continue,
                },
            };
            let (got, by_definition) = target_after(&mut p, t, event);
            assert_eq!(got, by_definition);
        }
        assert!(p.reused_for_running > 0, "the reuse never happened");
        assert!(
            p.reused_beyond_clashing > 0,
            "no reuse rested on the target's membership"
        );
    }

    /// The decisions of one instant, with their times relative to `from` and timer tokens
    /// left out (skipping renumbers them).
    fn shifted(now: Time, from: Time, out: &[Decision]) -> Vec<(Dur, Decision)> {
        out.iter()
            .map(|d| match d {
                Decision::SetTimer { at, .. } => (
                    now - from,
                    Decision::SetTimer {
                        at: Time::ZERO + (*at - from),
                        token: 0,
                    },
                ),
                d => (now - from, d.clone()),
            })
            .collect()
    }

    /// Every `Steady` answer is a repetition, as stepping finds it: from the point, a copy of
    /// the policy driven by its own timers alone through one more period makes the decisions
    /// of the period measured (from the mark to the point), at the same offsets, and stands
    /// at a steady point again at its end, answering nothing in between. Arrivals and
    /// departures of small jobs on 16 PEs at random gaps, with the quanta stepped between
    /// them, so marks fall at every row the first switch after an event brings.
    #[test]
    fn a_steady_point_repeats_the_period_stepped_before_it() {
        let (mut p, mut rand) = small_gang_and_stream(0x9e37_79b9_7f4a_7c15);
        let mut next = 1u64;
        let mut outside = Time::from_secs(5);
        // The decisions since the last mark, relative to it.
        let mut mark: Option<Time> = None;
        let mut period: Vec<(Dur, Decision)> = Vec::new();
        let (mut out, mut jobs) = (Vec::new(), Vec::new());
        let (mut steady, mut steady_beyond_row_0) = (0, 0);
        for _ in 0..20_000 {
            out.clear();
            let now = match p.pending {
                Some((token, _)) if p.due <= outside => {
                    let now = p.due;
                    p.handle(now, Event::Timer(token), &mut out);
                    now
                }
                _ => {
                    let now = outside;
                    outside = now + Dur::from_secs(1 + rand(400) as i64);
                    let event = if rand(2) == 0 || p.members.is_empty() {
                        let procs = 1 + rand(8) as u32;
                        next += 1;
                        Event::Submitted(JobRequest::new(
                            JobId(next),
                            now,
                            procs,
                            Dur::from_secs(100_000),
                        ))
                    } else {
                        let mut ids: Vec<JobId> = p.members.keys().copied().collect();
                        ids.sort();
                        Event::Ended(ids[rand(ids.len() as u64) as usize])
                    };
                    p.handle(now, event, &mut out);
                    now
                }
            };
            if let Some(from) = mark {
                period.extend(shifted(now, from, &out));
            }
            match p.cycle_point(now, &mut jobs) {
                None => continue,
                Some(CyclePoint::Mark) => {}
                Some(CyclePoint::Steady) => {
                    let from = mark.expect("a steady point follows a mark");
                    let length = now - from;
                    let mut q = p.clone();
                    let mut again = Vec::new();
                    let (answer, at) = loop {
                        let (token, _) = q.pending.expect("a steady rotation keeps a timer");
                        let at = q.due;
                        assert!(at <= now + length, "the period overran");
                        out.clear();
                        q.handle(at, Event::Timer(token), &mut out);
                        again.extend(shifted(at, now, &out));
                        if let Some(answer) = q.cycle_point(at, &mut jobs) {
                            break (answer, at);
                        }
                    };
                    assert_eq!(answer, CyclePoint::Steady);
                    assert_eq!(at - now, length, "periods of different lengths");
                    assert_eq!(again, period, "the period stepped again differs");
                    assert_eq!(q.running, p.running);
                    steady += 1;
                    steady_beyond_row_0 += usize::from(p.active != 0);
                }
            }
            mark = Some(now);
            period.clear();
        }
        assert!(steady > 100, "only {steady} steady points");
        assert!(
            steady_beyond_row_0 > 10,
            "only {steady_beyond_row_0} steady points at rows other than the first"
        );
    }

    /// A held job is never started or resumed by a switch (the switch paths skip member
    /// lookups while nothing is held, so the held case must still take them), and runs again
    /// once released.
    #[test]
    fn held_members_sit_out_switches_until_released() {
        let mut c = PolicyConfig::new(MachineShape::flat(2, 1));
        c.quantum = Some(Dur::from_secs(10));
        let mut p = Gang::new(&c).unwrap();
        let mut out = Vec::new();
        for id in [1, 2, 3] {
            let req = JobRequest::new(JobId(id), Time::ZERO, 2, Dur::from_secs(1000));
            p.handle(Time::ZERO, Event::Submitted(req), &mut out);
        }
        assert!(goes(&out, 1) && !goes(&out, 2) && !goes(&out, 3), "{out:?}");
        p.handle(Time::ZERO, Event::Held(JobId(2)), &mut out);
        let mut ran = Vec::new();
        for k in 1..=6 {
            assert!(fire(&mut p, Time::from_secs(10 * k), &mut out));
            assert!(!goes(&out, 2), "held job 2 resumed: {out:?}");
            ran.extend([1, 3].into_iter().filter(|&id| goes(&out, id)));
        }
        assert!(ran.contains(&1) && ran.contains(&3), "{ran:?}");
        out.clear();
        p.handle(Time::from_secs(65), Event::Released(JobId(2)), &mut out);
        let mut resumed = goes(&out, 2);
        for k in 7..=9 {
            fire(&mut p, Time::from_secs(10 * k), &mut out);
            resumed |= goes(&out, 2);
        }
        assert!(resumed, "released job 2 never ran again");
    }
}
