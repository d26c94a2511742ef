//! Quantum skipping against stepping: gang on random workloads, once as the simulator runs it
//! (skipping whole periods of a steady rotation) and once behind a wrapper that hides
//! `cycle_point`, so every quantum is stepped. Records, event and decision counts must be
//! equal; the runs must have skipped something, or the comparison proves nothing.

use cosched_core::{Dur, JobId, MachineShape, NodeId, Time};
use cosched_policy::{
    CyclePoint, Decision, Event, MatrixView, Policy, PolicyConfig, forecast::SharedForecaster,
    registry,
};
use cosched_sim::engine::{EngineOptions, Operation, SimJob, SimResult, simulate};

/// Forwards everything; with `skip` false it never answers `cycle_point`, so the engine steps.
struct Wrap {
    inner: Box<dyn Policy>,
    skip: bool,
    skipped_cycles: u64,
}

impl Policy for Wrap {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn observe(&mut self, now: Time, event: Event) {
        self.inner.observe(now, event)
    }
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.inner.decide(now, out)
    }
    fn queue(&self) -> Vec<JobId> {
        self.inner.queue()
    }
    fn matrix(&self) -> Option<MatrixView> {
        self.inner.matrix()
    }
    fn stats(&self) -> Vec<(&'static str, f64)> {
        self.inner.stats()
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        self.inner.boxed_clone()
    }
    fn set_forecaster(&mut self, f: SharedForecaster) {
        self.inner.set_forecaster(f)
    }
    fn cycle_point(&mut self, now: Time, jobs: &mut Vec<JobId>) -> Option<CyclePoint> {
        if self.skip {
            self.inner.cycle_point(now, jobs)
        } else {
            None
        }
    }
    fn skip_cycles(&mut self, cycles: u64) -> Option<u64> {
        let token = self.inner.skip_cycles(cycles);
        if token.is_some() {
            self.skipped_cycles += cycles;
        }
        token
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random gang configuration and workload: sizes, arrival gaps and runtimes in microseconds
/// (so rounding is exercised) or, for even seeds, in whole seconds with whole-second quanta
/// (so completions fall exactly on period boundaries and ends tie), some time limits, and
/// some holds, cancels and node failures.
fn case(seed: u64) -> (MachineShape, PolicyConfig, Vec<SimJob>, EngineOptions) {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let nodes = [16, 32, 64, 100][r.below(4) as usize];
    let m = MachineShape::flat(nodes, 1);
    let mut c = PolicyConfig::new(m);
    let coarse = seed.is_multiple_of(2);
    let unit = if coarse { 1_000_000 } else { 1 };
    let quanta = if coarse {
        [1_000_000, 10_000_000, 5_000_000]
    } else {
        [1_000_000, 10_000_000, 7_300_001]
    };
    c.quantum = Some(Dur::from_micros(quanta[r.below(3) as usize]));
    let cost = if coarse { 1_000_000 } else { 1_700_003 };
    c.context_switch = [
        None,
        Some(Dur::from_millis(500)),
        Some(Dur::from_micros(cost)),
    ][r.below(3) as usize];
    c.mpl = [None, Some(2), Some(3)][r.below(3) as usize];
    let packing = ["buddy", "first-fit", "best-fit"][r.below(3) as usize];
    c.options.insert("packing".into(), packing.into());
    c.options
        .insert("alternate".into(), (r.below(4) != 0).into());
    let n = 120;
    let mut t = 0i64;
    let jobs: Vec<SimJob> = (1..=n)
        .map(|id| {
            t += r.below(600_000_000) as i64;
            let procs = 1 + r.below(u64::from(nodes)) as u32;
            let runtime =
                Dur::from_micros(unit * (1 + r.below(3_000_000_000 / unit as u64) as i64));
            let mut j = SimJob::exact(id, Time::from_micros(t), procs, runtime);
            if r.below(5) == 0 {
                j.limit = Some(Dur::from_micros(
                    unit * (1 + r.below(2_000_000_000 / unit as u64) as i64),
                ));
            }
            j
        })
        .collect();
    let mut operations = Vec::new();
    for _ in 0..r.below(6) {
        let at = Time::from_micros(r.below(t as u64 + 1) as i64);
        let job = JobId(1 + r.below(n));
        let op = match r.below(4) {
            0 => Operation::Cancel(job),
            1 => Operation::Hold(job),
            2 => Operation::Release(job),
            _ => Operation::NodeDown(NodeId(r.below(u64::from(nodes)) as u32)),
        };
        operations.push((at, op));
    }
    let opts = EngineOptions {
        operations,
        ..EngineOptions::default()
    };
    (m, c, jobs, opts)
}

fn run(seed: u64, skip: bool) -> (SimResult, u64) {
    let (m, c, jobs, opts) = case(seed);
    let mut p = Wrap {
        inner: registry::build("gang", &c).expect("gang builds"),
        skip,
        skipped_cycles: 0,
    };
    let r = simulate(m, &jobs, &mut p, opts).expect("runs");
    (r, p.skipped_cycles)
}

#[test]
fn skipped_runs_equal_stepped_runs() {
    let mut skipped = 0;
    for seed in 1..=60 {
        let (fast, cycles) = run(seed, true);
        let (slow, none) = run(seed, false);
        assert_eq!(none, 0);
        // The first record that differs, rather than all of them.
        let diff = fast.records.iter().zip(&slow.records).find(|(a, b)| a != b);
        assert!(diff.is_none(), "seed {seed}: skipped vs stepped: {diff:?}");
        assert_eq!(fast.records.len(), slow.records.len());
        assert_eq!(
            (fast.events, fast.decisions, fast.unfinished),
            (slow.events, slow.decisions, slow.unfinished),
            "seed {seed}: counts differ"
        );
        assert_eq!(fast.policy_stats, slow.policy_stats, "seed {seed}");
        skipped += cycles;
    }
    assert!(
        skipped > 1000,
        "only {skipped} cycles skipped: the test compares little"
    );
}
