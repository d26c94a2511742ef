//! A gang rotation announced ahead, through the core under the virtual clock: the core hands
//! it to the watcher's thread ([`Effect::Program`]), whose runner ([`crate::program::Runner`],
//! driven here as the thread drives it) freezes the outgoing job ahead of each announced
//! instant and thaws the incoming one once the freeze has landed; the switches it made come
//! back to the core ([`Input::Switched`]), which reports each job's runs with the instant
//! they changed, and logs them; a new announcement takes over from where the node stands.

use super::*;
use crate::program::{Act, Cg, Landed, Logged, Order, Program, Runner};
use cosched_proto::rotation::{Cycle, Rotation, Step};

/// A freeze lands this long after its write (a rank on its core).
const LANDING: Dur = Dur::from_micros(30);

fn step(at: Time, job: u64) -> Step {
    Step {
        at,
        slot: Some(job as u32 - 1),
        running: vec![JobId(job)],
    }
}

/// Jobs 1 and 2 take turns every 10 ms from 10 ms on, job 1 first.
fn alternating() -> Rotation {
    alternating_every(Dur::from_millis(10))
}

/// Jobs 1 and 2 take turns every `q` from 10 ms on, job 1 first.
fn alternating_every(q: Dur) -> Rotation {
    Rotation {
        rows: vec![(JobId(1), 0), (JobId(2), 1)],
        steps: vec![step(ms(10), 1), step(ms(10) + q, 2)],
        cycle: Some(Cycle {
            from: 0,
            period: Dur(2 * q.0),
        }),
    }
}

/// The program the core handed over in `fx`.
fn program(fx: &[Effect]) -> (Program, BTreeSet<Cg>) {
    let p: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Program { program, thawed } => Some((program.clone(), thawed.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(p.len(), 1, "one program handed over: {fx:?}");
    p[0].clone()
}

/// The watcher's thread: the runner stepped at its own wake-ups up to `until`, each write
/// kept with its instant; a cgroup reads frozen [`LANDING`] after its freeze's write.
struct Thread {
    runner: Runner,
    writes: Vec<(Time, Act)>,
}

impl Thread {
    fn run(&mut self, until: Time) {
        while let Some(t) = self.runner.wake().filter(|&t| t <= until) {
            let writes = &self.writes;
            let acts = self.runner.step(t, |c| frozen_at(writes, c, t));
            self.writes.extend(acts.into_iter().map(|a| (t, a)));
        }
    }
}

/// Whether cgroup `c` reads frozen at `t` after `writes`.
fn frozen_at(writes: &[(Time, Act)], c: Cg, t: Time) -> bool {
    let last = writes
        .iter()
        .rev()
        .find(|(_, a)| matches!(a, Act::Freeze(x) | Act::Thaw(x) if *x == c));
    matches!(last, Some((w, Act::Freeze(_))) if t - *w >= LANDING)
}

fn runs(fx: &[Effect]) -> Vec<(u64, bool, i64)> {
    run_changes(fx)
        .into_iter()
        .map(|c| (c.job.0, c.runs, c.at_us))
        .collect()
}

/// How many messages went up with run states.
fn runs_messages(fx: &[Effect]) -> usize {
    ups(fx)
        .iter()
        .filter(|m| matches!(m, FromNode::Runs { .. }))
        .count()
}

#[test]
fn an_announced_rotation_is_switched_at_its_instants_by_the_watchers_thread() {
    let mut n = Node::up("gs");
    n.cgroups = true;
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    n.tree(ms(0), launch(2, 1, &[(0, 0), (1, 1)], true));
    n.on(ms(0), launch_frozen(2, 2));
    let (a, b): (Cg, Cg) = ((JobId(1), 1), (JobId(2), 2));

    let fx = n.tree(ms(10), ToNode::Rotation(alternating()));
    let (p, thawed) = program(&fx);
    assert_eq!(p.cgroups, [a, b]);
    assert_eq!(
        thawed,
        BTreeSet::from([a]),
        "job 1 runs, job 2 was launched stopped"
    );
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Cgroup { .. } | Effect::Signal { .. })),
        "the core itself switches nothing: {fx:?}"
    );
    // Nothing to do on the event loop until the thread's switches are taken in.
    assert!(
        n.core
            .next_wake()
            .is_some_and(|w| w >= ms(10) + Dur::from_millis(50))
    );

    let (runner, acts) = Runner::new(ms(10), p, thawed, Order::Wait);
    assert!(acts.is_empty(), "job 1's step is the one in force");
    let mut th = Thread {
        runner,
        writes: Vec::new(),
    };
    th.run(ms(45));
    // Freeze ahead of each instant, thaw at it once landed: 20, 30 and 40 ms.
    let at = |k: usize| th.writes[k].0;
    let acts: Vec<Act> = th.writes.iter().map(|w| w.1).collect();
    assert_eq!(
        acts,
        [
            Act::Freeze(a),
            Act::Thaw(b),
            Act::Freeze(b),
            Act::Thaw(a),
            Act::Freeze(a),
            Act::Thaw(b)
        ]
    );
    for (k, due) in [(1, ms(20)), (3, ms(30)), (5, ms(40))] {
        assert!(
            at(k - 1) < due,
            "the freeze goes out ahead: {:?}",
            th.writes
        );
        assert!(at(k) >= due && at(k) - due <= LANDING, "{:?}", th.writes);
        // Never both runnable: the thaw follows the freeze's landing.
        assert!(at(k) - at(k - 1) >= LANDING);
    }

    // The core takes the switches in: each job's runs, booked when they changed.
    let landed = switches(th.runner.take_log());
    assert_eq!(landed.len(), 3);
    let thaw_b = landed[0].thawed;
    let fx = n.on(ms(60), Input::Switched(logged(&landed)));
    assert_eq!(runs_messages(&fx), 1, "one message for the batch: {fx:?}");
    let r = runs(&fx);
    assert_eq!(
        r.iter().map(|&(j, on, _)| (j, on)).collect::<Vec<_>>(),
        [
            (1, true),
            (1, false),
            (2, false),
            (2, true),
            (2, false),
            (1, true),
            (1, false),
            (2, true)
        ],
        "each job's first report starts with its run since its launch"
    );
    assert_eq!(
        (r[0].2, r[2].2),
        (0, 0),
        "both launched at 0, job 2 frozen at once"
    );
    assert_eq!(r[3].2, thaw_b.as_micros(), "job 2 ran from its thaw");
    let log = {
        let fx = n.tree(ms(60), ToNode::FetchMonitor { req: 1 });
        match &fx[..] {
            [Effect::SendMonitor { switches, .. }] => switches.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!((log.count, log.late), (3, 0));
    let t = &log.recent[0];
    assert_eq!(t.at_us, ms(20).as_micros());
    assert_eq!(
        (t.outgoing.clone(), t.incoming.clone()),
        (vec![JobId(1)], vec![JobId(2)])
    );
    assert!(t.lead_us > 0 && t.frozen_us.is_some());

    // A new announcement at 45 ms (job 2 runs since 40 ms): job 1 alone from 50 ms on. The
    // thread's runner takes it over from where the node stands.
    let r2 = Rotation {
        rows: vec![(JobId(1), 0), (JobId(2), 1)],
        steps: vec![step(ms(45), 2), step(ms(50), 1)],
        cycle: None,
    };
    let fx = n.tree(ms(45), ToNode::Rotation(r2));
    let (p2, _) = program(&fx);
    let acts = th.runner.replace(ms(45), p2, Order::Wait);
    assert!(
        acts.is_empty(),
        "job 2 runs in the new one's first step too: {acts:?}"
    );
    th.writes.clear();
    th.run(ms(200));
    let acts: Vec<Act> = th.writes.iter().map(|w| w.1).collect();
    assert_eq!(acts, [Act::Freeze(b), Act::Thaw(a)], "then nothing more");
    assert!(th.writes[1].0 >= ms(50));
    assert_eq!(th.runner.wake(), None);
}

/// At 1-ms quanta the watcher's thread makes 50 switches between two looks of the core; the
/// machine manager hears of them in one message, each change still with its own instant, so
/// its accounting books what ran exactly and a switch costs neither side a message.
#[test]
fn a_batch_of_switches_goes_up_in_one_runs_message_with_each_changes_instant() {
    let mut n = Node::up("gs");
    n.cgroups = true;
    n.tree(ms(0), launch(1, 1, &[(0, 0), (1, 1)], false));
    n.tree(ms(0), launch(2, 1, &[(0, 0), (1, 1)], true));
    n.on(ms(0), launch_frozen(2, 2));
    let fx = n.tree(
        ms(10),
        ToNode::Rotation(alternating_every(Dur::from_millis(1))),
    );
    let (p, thawed) = program(&fx);
    let (runner, _) = Runner::new(ms(10), p, thawed, Order::Wait);
    let mut th = Thread {
        runner,
        writes: Vec::new(),
    };
    th.run(ms(60) + Dur::from_micros(500));
    let landed = switches(th.runner.take_log());
    assert_eq!(landed.len(), 50, "a switch each ms from 11 to 60 ms");
    let fx = n.on(ms(61), Input::Switched(logged(&landed)));
    assert_eq!(runs_messages(&fx), 1, "{fx:?}");
    let mut r = runs(&fx);
    // Each job's first report starts with its run since its launch.
    assert_eq!((r.remove(0), r.remove(1)), ((1, true, 0), (2, false, 0)));
    assert_eq!(r.len(), 100, "each switch stops one job and runs the other");
    for (l, pair) in landed.iter().zip(r.chunks(2)) {
        let at = |t: Time| t.as_micros();
        let (out, inc) = (l.outgoing[0].0.0, l.incoming[0].0.0);
        assert_eq!(pair[0], (out, false, at(l.frozen_written)), "{l:?}");
        assert_eq!(pair[1], (inc, true, at(l.thawed)), "{l:?}");
    }
}

/// Under `gs` a job's run here is its ranks' life: its first report (made once the job is in
/// the matrix) starts at its first rank's start, its last rank's exit ends it ahead of the
/// exit's message, and a switch taken in after that reports no run.
#[test]
fn a_jobs_run_reports_span_its_ranks_life() {
    let mut n = Node::up("gs");
    n.cgroups = true;
    let fx = n.tree(ms(3), launch(1, 1, &[(0, 0), (1, 1)], false));
    assert_eq!(runs(&fx), [], "not in a matrix yet");
    n.tree(ms(10), ToNode::Rotation(alternating()));
    let switch = |due: Time, out: bool| Landed {
        due,
        frozen_written: due - Dur::from_micros(50),
        frozen: Some(due),
        thawed: due,
        outgoing: if out { vec![(JobId(1), 1)] } else { Vec::new() },
        incoming: if out { Vec::new() } else { vec![(JobId(1), 1)] },
        handover: false,
    };
    let fx = n.on(ms(21), Input::Switched(logged(&[switch(ms(20), true)])));
    assert_eq!(
        runs(&fx),
        [
            (1, true, ms(3).as_micros()),
            (1, false, (ms(20) - Dur::from_micros(50)).as_micros())
        ],
        "it ran from its first rank's start"
    );
    n.on(ms(31), Input::Switched(logged(&[switch(ms(30), false)])));
    let exited = |rank: u32| Input::Exited {
        job: JobId(1),
        launch: 1,
        exit: exit(rank, 0),
    };
    assert_eq!(runs(&n.on(ms(35), exited(0))), [], "rank 1 still runs");
    let ups = ups(&n.on(ms(36), exited(1)));
    assert!(
        matches!(&ups[..], [FromNode::Runs { changes, sent_us }, FromNode::Exited { .. }]
            if *sent_us == ms(36).as_micros()
                && changes.iter().map(|c| (c.runs, c.at_us)).eq([(false, ms(36).as_micros())])),
        "the run ends with the last rank, reported before its exit: {ups:?}"
    );
    let fx = n.on(ms(41), Input::Switched(logged(&[switch(ms(40), false)])));
    assert_eq!(runs(&fx), [], "no run after the last rank's exit");
}

/// The switches of a runner's log (the wait order logs nothing else).
fn switches(log: Vec<Logged>) -> Vec<Landed> {
    log.into_iter()
        .map(|l| match l {
            Logged::Switch(l) => l,
            other => panic!("a landing of the wait order: {other:?}"),
        })
        .collect()
}

/// `switches` as the watcher's thread hands them to the core.
fn logged(switches: &[Landed]) -> Vec<Logged> {
    switches.iter().cloned().map(Logged::Switch).collect()
}
