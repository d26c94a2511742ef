//! T3D's two passes visit only the waiting jobs that may act, found through its lanes (the
//! waiting jobs of each class in pass order with the least width over every span). In debug
//! builds every pass also walks the plain order and asserts that each job the lanes passed
//! over would have done nothing (`T3d::pass`). These runs drive that check through what
//! moves the bounds: every class in use (queues mapped to all five, a new one), tight class,
//! large-job and system limits, preemption with swap costs, the night set, jobs that must
//! come back on their own PEs, holds and node failures.

use cosched_core::{Dur, JobId, MachineShape, NodeId, Time};
use cosched_policy::{PolicyConfig, registry};
use cosched_sim::engine::{EngineOptions, Operation, SimJob, simulate};

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

/// A random T3D configuration, workload and operations.
fn case(seed: u64) -> (MachineShape, PolicyConfig, Vec<SimJob>, EngineOptions) {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let pes = [16, 48, 64, 130][r.below(4) as usize];
    let m = MachineShape::flat(pes, 1);
    let mut c = PolicyConfig::new(m);
    c.migration = r.below(3) != 0;
    // The `[policy]` table's keys.
    let mut toml = String::new();
    toml += &format!("swap_per_pe = \"{}s\"\n", r.below(3));
    if r.below(2) == 0 {
        toml += &format!("large_job = {}\n", 1 + r.below(u64::from(pes) / 2));
        toml += &format!("large_limit = {}\n", 1 + r.below(u64::from(pes)));
    }
    if r.below(2) == 0 {
        toml += &format!(
            "system_limit = {}\n",
            u64::from(pes) / 2 + r.below(2 * u64::from(pes))
        );
    }
    toml += "[queues]\n0 = \"interactive\"\n1 = \"debug\"\n2 = \"production\"\n";
    toml += "3 = \"benchmark\"\n4 = \"standby\"\n5 = \"bulk\"\n";
    toml += &format!(
        "[classes.production]\nwait = \"{}s\"\nproc_limit = {}\n",
        r.below(3000),
        1 + r.below(u64::from(pes))
    );
    toml += &format!(
        "[classes.bulk]\npriority = 2\nwait = \"{}s\"\ndnd_per_pe = \"{}s\"\npreemptible = true\n",
        r.below(2000),
        r.below(5)
    );
    toml += &format!("[classes.standby]\nwait = \"{}s\"\n", r.below(4000));
    if r.below(2) == 0 {
        toml += "[night]\nlarge_limit = 8\n";
    }
    c.options = toml::from_str(&toml).unwrap_or_else(|e| panic!("{toml}: {e}"));
    let n = 150;
    let mut t = 0i64;
    let jobs: Vec<SimJob> = (1..=n)
        .map(|id| {
            t += r.below(900) as i64;
            let procs = 1 + r.below(u64::from(pes)) as u32;
            let runtime = Dur::from_secs(1 + r.below(7200) as i64);
            let estimate = Dur::from_secs(runtime.as_secs() + r.below(3600) as i64);
            let mut j = SimJob::with_estimate(id, Time::from_secs(t), procs, runtime, estimate);
            j.req.queue = Some(r.below(6) as u32);
            j
        })
        .collect();
    let mut operations = Vec::new();
    for _ in 0..r.below(8) {
        let at = Time::from_secs(r.below(t as u64 + 1) as i64);
        let job = JobId(1 + r.below(n));
        let op = match r.below(5) {
            0 => Operation::Hold(job),
            1 => Operation::Release(job),
            2 => Operation::Cancel(job),
            3 => Operation::NodeDown(NodeId(r.below(u64::from(pes)) as u32)),
            _ => Operation::NodeUp(NodeId(r.below(u64::from(pes)) as u32)),
        };
        operations.push((at, op));
    }
    let opts = EngineOptions {
        operations,
        no_migration: !c.migration,
        ..EngineOptions::default()
    };
    (m, c, jobs, opts)
}

#[test]
fn t3d_passes_skip_only_jobs_that_would_do_nothing() {
    let (mut preempted, mut started) = (0, 0);
    for seed in 1..=80 {
        let (m, c, jobs, opts) = case(seed);
        let mut p = registry::build("t3d", &c).expect("t3d builds");
        let r = simulate(m, &jobs, p.as_mut(), opts).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        preempted += r.records.iter().map(|x| x.preemptions).sum::<u32>();
        started += r.records.iter().filter(|x| x.start.is_some()).count();
    }
    // The runs must preempt and start plenty, or the check saw little.
    assert!(
        preempted > 200 && started > 5000,
        "{preempted} preemptions, {started} starts"
    );
}
