//! Preempting policies honour `PolicyConfig::migration = false` (the machine manager's case:
//! a stopped process cannot move): T3D runs a workload that preempts through the simulator
//! with `no_migration`, whose job ledger refuses a preempted job started on other PEs.

use cosched_core::{Dur, JobId, MachineShape, Time};
use cosched_policy::t3d::T3d;
use cosched_policy::{Decision, Event, MatrixView, Policy, PolicyConfig};
use cosched_sim::{EngineOptions, SimJob, SimResult, simulate};

/// Urgent small jobs arriving among long production and standby ones, on 16 PEs: the urgent
/// classes preempt the others, and preempted jobs come back while the PEs they had are often
/// taken by someone else.
fn workload() -> Vec<SimJob> {
    let classes = [
        "interactive",
        "production",
        "standby",
        "production",
        "interactive",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut t = 0;
    (1..=300)
        .map(|id| {
            t += next(120) as i64;
            let class = classes[next(classes.len() as u64) as usize];
            let (procs, runtime) = if class == "interactive" {
                (1 + next(4) as u32, 10 + next(120) as i64)
            } else {
                (2 + next(12) as u32, 300 + next(3000) as i64)
            };
            let mut j = SimJob::exact(id, Time::from_secs(t), procs, Dur::from_secs(runtime));
            j.req.class = Some(class.to_string());
            j
        })
        .collect()
}

/// Records, for each preempted job, whether it came back on other PEs.
#[derive(Clone)]
struct Moves {
    inner: T3d,
    last: std::collections::HashMap<JobId, cosched_core::PeSet>,
    preempted: std::collections::HashSet<JobId>,
    preemptions: usize,
    moved: usize,
}

impl Policy for Moves {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn observe(&mut self, now: Time, event: Event) {
        self.inner.observe(now, event);
    }
    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        let from = out.len();
        self.inner.decide(now, out);
        for d in &out[from..] {
            match d {
                Decision::Preempt { job } => {
                    self.preempted.insert(*job);
                    self.preemptions += 1;
                }
                Decision::Start { job, pes, .. } => {
                    if self.preempted.remove(job) && self.last.get(job) != Some(pes) {
                        self.moved += 1;
                    }
                    self.last.insert(*job, pes.clone());
                }
                _ => {}
            }
        }
    }
    fn queue(&self) -> Vec<JobId> {
        self.inner.queue()
    }
    fn matrix(&self) -> Option<MatrixView> {
        None
    }
    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }
}

fn run(migration: bool, no_migration: bool) -> (Result<SimResult, String>, Moves) {
    let machine = MachineShape::flat(16, 1);
    let mut cfg = PolicyConfig::new(machine);
    cfg.migration = migration;
    let mut p = Moves {
        inner: T3d::new(&cfg).unwrap(),
        last: Default::default(),
        preempted: Default::default(),
        preemptions: 0,
        moved: 0,
    };
    let opts = EngineOptions {
        no_migration,
        ..EngineOptions::default()
    };
    let r = simulate(machine, &workload(), &mut p, opts).map_err(|e| e.to_string());
    (r, p)
}

#[test]
fn t3d_restarts_preempted_jobs_on_their_own_pes_without_migration() {
    // With migration the workload does move preempted jobs, so the check below has teeth...
    let (r, p) = run(true, false);
    r.unwrap();
    assert!(p.preemptions > 10, "only {} preemptions", p.preemptions);
    assert!(p.moved > 0, "no preempted job moved even with migration on");
    // ...and the ledger refuses such a move when migration is off.
    let (r, _) = run(true, true);
    let err = r.expect_err("the ledger lets a preempted job move");
    assert!(err.contains("migration is off"), "{err}");

    // Told that jobs cannot move, T3D brings every preempted job back where it was.
    let (r, p) = run(false, true);
    let r = r.unwrap();
    assert!(p.preemptions > 10, "only {} preemptions", p.preemptions);
    assert_eq!(p.moved, 0);
    assert_eq!(r.unfinished, 0, "jobs left waiting for their PEs");
    assert!(r.records.iter().all(|x| x.end.is_some()));
    assert!(r.records.iter().any(|x| x.preemptions > 0));
}
