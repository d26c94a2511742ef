//! Every registered policy rejects a job that can never run on the machine (larger than it,
//! or asking for no PE) with a reason, instead of letting it block the queue, and a job that
//! is only too large for the nodes up now waits for them instead.

use cosched_core::{Dur, JobId, MachineShape, NodeId, Time};
use cosched_policy::{Decision, Event, JobRequest, PolicyConfig, registry};

fn sub(id: u64, procs: u32) -> Event {
    Event::Submitted(JobRequest::new(
        JobId(id),
        Time::ZERO,
        procs,
        Dur::from_secs(60),
    ))
}

fn starts(out: &[Decision], id: u64) -> bool {
    out.iter().any(
        |d| matches!(d, Decision::Start { job, .. } | Decision::Place { job, .. } if job.0 == id),
    )
}

#[test]
fn every_policy_rejects_what_can_never_run_and_goes_on() {
    let cfg = PolicyConfig::new(MachineShape::flat(4, 2));
    for name in registry::names() {
        let mut p = registry::build(name, &cfg).unwrap();
        let mut out = Vec::new();
        p.observe(Time::ZERO, sub(1, 9));
        p.observe(Time::ZERO, sub(2, 0));
        p.observe(Time::ZERO, sub(3, 8));
        p.decide(Time::ZERO, &mut out);
        let rejected: Vec<(u64, String)> = out
            .iter()
            .filter_map(|d| match d {
                Decision::Reject { job, why } => Some((job.0, why.to_string())),
                _ => None,
            })
            .collect();
        assert_eq!(
            rejected,
            vec![
                (1, "needs 9 PEs; the machine has 8".to_string()),
                (2, "asks for no PE".to_string())
            ],
            "{name}"
        );
        assert!(
            starts(&out, 3),
            "{name}: the job behind was blocked: {out:?}"
        );
        assert_eq!(p.queue(), Vec::<JobId>::new(), "{name}");
    }
}

#[test]
fn a_job_too_large_for_the_nodes_up_waits_for_them() {
    let cfg = PolicyConfig::new(MachineShape::flat(4, 2));
    for name in registry::names() {
        let mut p = registry::build(name, &cfg).unwrap();
        let mut out = Vec::new();
        p.observe(Time::ZERO, Event::NodeDown(NodeId(3)));
        p.observe(Time::ZERO, sub(1, 8));
        p.decide(Time::ZERO, &mut out);
        assert!(
            !out.iter()
                .any(|d| matches!(d, Decision::Reject { .. } | Decision::Start { .. })),
            "{name}: {out:?}"
        );
        out.clear();
        p.handle(Time::from_secs(5), Event::NodeUp(NodeId(3)), &mut out);
        assert!(starts(&out, 1), "{name}: {out:?}");
    }
}
