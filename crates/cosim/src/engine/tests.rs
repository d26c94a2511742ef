use super::*;
use crate::workload;

/// Node 0 holds job 1's rank 0, which waits about 9 ms every iteration for its slow peer
/// on node 1, and job 2's compute-only process behind it.
const SPINNER: &str = r#"
seed = 4
[machine]
nodes = 2
pes_per_node = 1
mpl = 2
[costs]
latency = "50us"
[schemes]
timeslice = "10ms"
spin_time = "188us"
[[jobs]]
procs = 2
work = "1ms"
granularity = 0.1
pattern = "nn"
[[jobs.ranks]]
ranks = [1]
work_factor = 10.0
[[jobs]]
procs = 1
work = "20ms"
granularity = 1.0
pattern = "none"
"#;

/// The load-information charge of SB+PROC interrupts whatever runs on the PE, here a
/// spinning receiver; the receiver then goes on with the spin budget it had left, so it
/// blocks after its spin time even while messages for another process keep arriving.
#[test]
fn a_resumed_spinner_keeps_its_remaining_spin_across_a_charge() {
    let sc = Scenario::parse(SPINNER, "spinner").unwrap();
    let jobs = workload::build(&sc).unwrap();
    assert_eq!(jobs[0].iterations, 1);
    let mut e = Engine::new(&sc, Scheme::SbProc, &jobs, false);
    // Job 2's process (id 2, node 0) hears from node 1 every 50 µs for 12 ms, about a
    // message it will never consume: each costs node 0 the 2 µs charge and nothing else.
    for k in 0..240 {
        e.at(
            Time(50 * k + 25),
            Ev::Msg {
                dst: 2,
                iter: u32::MAX,
                from_node: 1,
                info: LoadInfo {
                    ts: Dur::from_millis(1),
                    enp_milli: 1000,
                },
            },
        );
    }
    let r = e.run();
    assert_eq!(r.finished_jobs, 2);
    let node0 = r.node_breakdown[0];
    // One wait, one spin budget: 188 µs of spin, not the 9 ms until the peer's message.
    assert!(
        node0.spin <= Dur::from_micros(188),
        "spin {} on node 0: {node0:?}",
        node0.spin
    );
    assert!(node0.overhead >= Dur::from_micros(2 * 240));
}
/// A one-way ring sends one message per iteration to the next rank and waits for one
/// from the rank before: the job finishes, and a chain of four ranks with two iterations
/// moves eight messages, where the two-way NN pattern moves sixteen.
#[test]
fn a_ring_job_sends_to_the_next_rank_and_finishes() {
    let text = |pattern: &str| {
        format!(
            "seed = 1\n[machine]\nnodes = 4\npes_per_node = 1\n[schemes]\n\
                 timeslice = \"10ms\"\n[[jobs]]\nprocs = 4\nwork = \"2ms\"\n\
                 granularity = 0.1\npattern = \"{pattern}\"\n"
        )
    };
    let run = |pattern: &str| {
        let sc = Scenario::parse(&text(pattern), pattern).unwrap();
        let jobs = workload::build(&sc).unwrap();
        let e = Engine::new(&sc, Scheme::Fcfs, &jobs, false);
        (jobs[0].iterations, e.run())
    };
    let (iters, ring) = run("ring");
    assert_eq!(iters, 2);
    assert_eq!(ring.finished_jobs, 1);
    assert!(!ring.stalled);
    let (_, nn) = run("nn");
    assert_eq!(nn.finished_jobs, 1);
    assert_eq!(
        nn.events - ring.events,
        8,
        "ring {} events, nn {}",
        ring.events,
        nn.events
    );
}
