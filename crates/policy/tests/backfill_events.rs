//! EASY and conservative backfilling under the events a real machine manager sends besides
//! arrivals and ends: the start-up hello of surviving jobs, nodes going down and coming back,
//! and a job running past its estimate. Driven through the registry, as the daemon will.

use cosched_core::{Dur, JobId, MachineShape, NodeId, PeSet, Time};
use cosched_policy::{Decision, Event, JobRequest, Policy, PolicyConfig, registry};

fn s(t: i64) -> Time {
    Time::from_secs(t)
}

fn submit(p: &mut dyn Policy, now: i64, id: u64, procs: u32, est: i64) -> Vec<Decision> {
    let mut out = Vec::new();
    let req = JobRequest::new(JobId(id), s(now), procs, Dur::from_secs(est));
    p.handle(s(now), Event::Submitted(req), &mut out);
    out
}

fn started(out: &[Decision]) -> Vec<(u64, PeSet)> {
    out.iter()
        .filter_map(|d| match d {
            Decision::Start { job, pes, .. } => Some((job.0, pes.clone())),
            Decision::SetTimer { .. } => None,
            other => panic!("a space-sharing policy decided {other:?}"),
        })
        .collect()
}

fn both(machine: MachineShape) -> Vec<Box<dyn Policy>> {
    let cfg = PolicyConfig::new(machine);
    ["easy", "conservative"]
        .iter()
        .map(|n| registry::build(n, &cfg).unwrap())
        .collect()
}

#[test]
fn hello_rebuilds_state_without_restarting_anything() {
    for mut p in both(MachineShape::flat(8, 1)) {
        let mut out = Vec::new();
        let job = JobRequest::new(JobId(1), s(0), 6, Dur::from_secs(100));
        p.handle(
            s(50),
            Event::Running {
                job,
                pes: PeSet::contiguous(2, 6),
                since: s(0),
            },
            &mut out,
        );
        assert!(
            started(&out).is_empty(),
            "{}: restarted a surviving job",
            p.name()
        );
        // 2 PEs are left (0-1): a 4-PE job waits for the survivor's expected end at 100…
        assert!(
            started(&submit(p.as_mut(), 60, 2, 4, 10)).is_empty(),
            "{}",
            p.name()
        );
        // …and a 2-PE job ending by then backfills onto PEs 0-1, not the survivor's.
        let got = started(&submit(p.as_mut(), 60, 3, 2, 30));
        assert_eq!(got, vec![(3, PeSet::contiguous(0, 2))], "{}", p.name());
        out.clear();
        p.handle(s(100), Event::Ended(JobId(1)), &mut out);
        assert_eq!(
            started(&out).iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![2],
            "{}",
            p.name()
        );
    }
}

#[test]
fn down_nodes_are_not_used_and_come_back() {
    for mut p in both(MachineShape::flat(4, 2)) {
        let mut out = Vec::new();
        p.handle(s(0), Event::NodeDown(NodeId(0)), &mut out);
        p.handle(s(0), Event::NodeDown(NodeId(1)), &mut out);
        assert!(out.is_empty());
        // 4 PEs usable (nodes 2 and 3 = PEs 4-7).
        let got = started(&submit(p.as_mut(), 1, 1, 4, 100));
        assert_eq!(got, vec![(1, PeSet::contiguous(4, 4))], "{}", p.name());
        // A 6-PE job cannot run on what is up; nothing may start on a down node.
        assert!(
            started(&submit(p.as_mut(), 2, 2, 6, 100)).is_empty(),
            "{}",
            p.name()
        );
        out.clear();
        p.handle(s(3), Event::NodeUp(NodeId(0)), &mut out);
        p.handle(s(3), Event::NodeUp(NodeId(1)), &mut out);
        // Back up: job 2 still waits for job 1 (4 + 6 > 8) …
        assert!(started(&out).is_empty(), "{}: {out:?}", p.name());
        out.clear();
        p.handle(s(100), Event::Ended(JobId(1)), &mut out);
        // … and starts when it ends, on whatever is free.
        let got = started(&out);
        assert_eq!(got.len(), 1, "{}", p.name());
        assert_eq!((got[0].0, got[0].1.len()), (2, 6), "{}", p.name());
    }
}

#[test]
fn overrunning_job_keeps_its_pes_and_blocks_the_reservation() {
    for mut p in both(MachineShape::flat(4, 1)) {
        assert_eq!(started(&submit(p.as_mut(), 0, 1, 4, 10)).len(), 1);
        assert!(started(&submit(p.as_mut(), 0, 2, 4, 10)).is_empty());
        // At 50 job 1 is 40 s past its estimate; nothing is free, nothing may start, and the
        // queue keeps its order.
        assert!(
            started(&submit(p.as_mut(), 50, 3, 1, 5)).is_empty(),
            "{}",
            p.name()
        );
        assert_eq!(p.queue(), vec![JobId(2), JobId(3)], "{}", p.name());
        let mut out = Vec::new();
        p.handle(s(60), Event::Ended(JobId(1)), &mut out);
        assert_eq!(
            started(&out).iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![2],
            "{}",
            p.name()
        );
    }
}

#[test]
fn clones_are_independent() {
    for mut p in both(MachineShape::flat(4, 1)) {
        submit(p.as_mut(), 0, 1, 4, 10);
        submit(p.as_mut(), 0, 2, 4, 10);
        let mut fork = p.boxed_clone();
        let mut out = Vec::new();
        fork.handle(s(10), Event::Ended(JobId(1)), &mut out);
        assert_eq!(started(&out).len(), 1);
        assert_eq!(
            p.queue(),
            vec![JobId(2)],
            "{}: the original moved with its clone",
            p.name()
        );
        assert!(fork.queue().is_empty());
    }
}
