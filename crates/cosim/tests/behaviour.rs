//! Engine-level behaviour: the seed-000 §5.3 classification scenario, time accounting,
//! determinism, and the defining behaviour of SB and GS on small machines.

use cosched_core::Dur;
use cosched_cosim::engine::Engine;
use cosched_cosim::{Scenario, run, workload};
use cosched_node::Scheme;

const SMALL_MIX: &str = r#"
name = "small"
seed = 7
[machine]
nodes = 4
pes_per_node = 1
mpl = 2
[mix]
workload = "WL4"
jobs = 3
procs = 4
pattern = "nn"
v = 0.5
iterations = 150
interarrival = "20ms"
"#;

fn small() -> Scenario {
    Scenario::parse(SMALL_MIX, "small").unwrap()
}

#[test]
fn breakdown_sums_to_elapsed_time_on_every_node() {
    let sc = small();
    for scheme in Scheme::ALL {
        let r = run(&sc, scheme, false).unwrap();
        assert_eq!(r.finished_jobs, 3, "{scheme}");
        assert!(!r.stalled, "{scheme}");
        for (n, b) in r.node_breakdown.iter().enumerate() {
            assert_eq!(b.total(), r.makespan, "{scheme} node {n}: {b:?}");
        }
        let f = r.breakdown;
        let sum = f.compute + f.spin + f.idle + f.context_switch + f.overhead;
        assert!((sum - 1.0).abs() < 1e-9, "{scheme}: {sum}");
        assert!(f.compute > 0.0);
    }
}

#[test]
fn same_input_same_output() {
    let sc = small();
    for scheme in [Scheme::Sb, Scheme::PbProc, Scheme::Fcs] {
        let a = run(&sc, scheme, true).unwrap();
        let b = run(&sc, scheme, true).unwrap();
        assert_eq!(a, b, "{scheme}");
    }
    // A different seed changes the compute draws.
    let mut other = small();
    other.seed = 8;
    assert_ne!(
        run(&sc, Scheme::Sb, false).unwrap().makespan,
        run(&other, Scheme::Sb, false).unwrap().makespan
    );
}

#[test]
fn compute_time_is_the_work_whatever_the_scheme() {
    let sc = small();
    let jobs = workload::build(&sc).unwrap();
    let local = run(&sc, Scheme::Local, false).unwrap();
    let sb = run(&sc, Scheme::Sb, false).unwrap();
    let total =
        |r: &cosched_cosim::RunResult| r.node_breakdown.iter().map(|b| b.compute).sum::<Dur>();
    // Same per-process random streams: the same compute is done, only its placement in time differs.
    assert_eq!(total(&local), total(&sb));
    assert!(jobs.iter().all(|j| j.iterations == 150));
}

/// Two jobs share 2 single-PE nodes; job 1's rank 1 computes 20× longer than its rank 0, so
/// rank 0 waits a long time every iteration.
const IMBALANCED: &str = r#"
seed = 3
[machine]
nodes = 2
pes_per_node = 1
mpl = 2
[costs]
latency = "50us"
[schemes]
timeslice = "10ms"
spin_time = "300us"
[[jobs]]
procs = 2
work = "100ms"
granularity = 0.2
[[jobs.ranks]]
ranks = [1]
work_factor = 20.0
[[jobs]]
procs = 2
work = "200ms"
granularity = 0.2
pattern = "none"
"#;

#[test]
fn sb_blocks_after_its_spin_time() {
    let sc = Scenario::parse(IMBALANCED, "imbalanced").unwrap();
    let jobs = workload::build(&sc).unwrap();
    let waits = u64::from(jobs[0].iterations);
    let sb = run(&sc, Scheme::Sb, false).unwrap();
    let local = run(&sc, Scheme::Local, false).unwrap();
    let spin_sb = sb.node_breakdown[0].spin;
    // Each wait spins at most the spin time (a fresh budget per dispatch), then blocks.
    assert!(spin_sb > Dur::ZERO);
    assert!(
        spin_sb <= Dur::from_micros(300) * (2 * waits as i64),
        "spin {spin_sb}"
    );
    // Spinning forever (LOCAL) wastes far more.
    assert!(
        local.node_breakdown[0].spin > spin_sb * 4,
        "local {} sb {}",
        local.node_breakdown[0].spin,
        spin_sb
    );
}

#[test]
fn gs_never_runs_two_jobs_in_one_pe_slot() {
    let mut sc = small();
    sc.schemes.timeslice = Dur::from_millis(5);
    let jobs = workload::build(&sc).unwrap();
    let (r, trace) = Engine::new(&sc, Scheme::Gs, &jobs, false)
        .traced()
        .run_traced();
    assert_eq!(r.finished_jobs, 3);
    assert!(!trace.is_empty());
    let t = sc.schemes.timeslice.as_micros();
    let mut seen = std::collections::BTreeMap::new();
    for d in &trace {
        // The slot a dispatch belongs to: heartbeats at k·T, context switch completes just after.
        let slot = (d.at.as_micros() - 1).max(0) / t;
        seen.entry((slot, d.pe))
            .or_insert_with(std::collections::BTreeSet::new)
            .insert(d.job);
    }
    let slot_of = |secs: f64| ((secs * 1e6).round() as i64 - 1).max(0) / t;
    let entered_or_left_in = |job: u32, slot: i64| {
        let j = r.jobs.iter().find(|j| j.id == job).unwrap();
        slot_of(j.end_s.unwrap()) == slot || slot_of(j.start_s.unwrap()) == slot
    };
    let mut slots = 0;
    for ((slot, pe), mut js) in seen {
        // A job that exits mid-slot leaves the slot empty and alternate scheduling may fill it
        // until a newly admitted job takes the row: only those transitions mix jobs.
        js.retain(|&j| !entered_or_left_in(j, slot));
        assert!(js.len() <= 1, "slot {slot} PE {pe} ran jobs {js:?}");
        slots += 1;
    }
    assert!(slots > 20, "the run spans many slots");
}

#[test]
fn fcs_classification_scenario_of_seed_000() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/fcs-classification.toml"
    );
    let sc = Scenario::load(std::path::Path::new(path)).unwrap();
    let r = run(&sc, Scheme::Fcs, true).unwrap();
    let classes = |id: u32| -> Vec<&str> {
        r.jobs
            .iter()
            .find(|j| j.id == id)
            .unwrap()
            .processes
            .iter()
            .map(|p| p.class.unwrap())
            .collect()
    };
    // Job 2 (fine, balanced) never leaves CS.
    assert_eq!(classes(2), ["CS", "CS"]);
    let h = r.class_history.as_ref().unwrap();
    assert!(
        !h.iter().any(|c| c.job == 2 && c.class != "CS"),
        "job 2 changed class"
    );
    // Job 3: the slow process CS, the two fast ones frustrated.
    assert_eq!(classes(3), ["CS", "F", "F"]);
    // Job 4 (no communication) → DC; job 5 (75 % variance) → all F; job 6 (coarse) → all DC.
    assert_eq!(classes(4), ["DC"]);
    assert_eq!(classes(5), ["F", "F", "F", "F"]);
    assert_eq!(classes(6), ["DC", "DC", "DC", "DC"]);
    // Job 1 goes through the initial CS and DC periods and (at least in part) back to CS.
    assert!(h.iter().any(|c| c.job == 1 && c.class == "DC"));
    assert!(classes(1).contains(&"CS"), "{:?}", classes(1));
}

#[test]
fn time_limit_stops_the_run_and_reports_unfinished_jobs() {
    let mut sc = small();
    sc.limits.max_time = Some(Dur::from_millis(30));
    let r = run(&sc, Scheme::Gs, false).unwrap();
    assert!(r.finished_jobs < 3);
    assert_eq!(r.makespan, Dur::from_millis(30));
    assert!(
        r.jobs
            .iter()
            .any(|j| j.response_s.is_none() && j.end_s.is_none())
    );
    for b in &r.node_breakdown {
        assert_eq!(b.total(), r.makespan);
    }
}

/// One all-to-all job of 5 ranks alone on 5 nodes, with almost no compute or I/O: each
/// iteration is its communication.
const AA_ALONE: &str = r#"
seed = 5
[machine]
nodes = 5
pes_per_node = 1
mpl = 1
[mix]
workload = "WL3"
jobs = 1
procs = 5
pattern = "aa"
v = 0.0
iterations = 50
without_io = true
"#;

#[test]
fn serial_nic_sends_one_message_per_transit() {
    let mut sc = Scenario::parse(AA_ALONE, "aa-alone").unwrap();
    let transit = sc.costs.transit();
    let jobs = workload::build(&sc).unwrap();
    // Table 2 sizing: compute = 25/70 of 4 transits per iteration.
    let iteration_compute = jobs[0].compute;
    let parallel = run(&sc, Scheme::Local, false).unwrap();
    sc.costs.serial_nic = true;
    let serial = run(&sc, Scheme::Local, false).unwrap();
    let iters = 50;
    // All messages of a send in flight together: about compute + 1 transit per iteration.
    assert!(
        parallel.makespan < (iteration_compute + transit * 2) * iters,
        "parallel {}",
        parallel.makespan
    );
    // One at a time: the last of the 4 leaves 4 transits after the send.
    assert!(
        serial.makespan >= (iteration_compute + transit * 4) * iters,
        "serial {}",
        serial.makespan
    );
    assert!(
        serial.makespan < (iteration_compute + transit * 5) * iters,
        "serial {}",
        serial.makespan
    );
}

/// Three ranks in a ring, alone, equal compute, a serial NIC: each receive's two messages
/// arrive one and two transits (188 µs each) after the send; SB spins 250 µs.
const RING_SB: &str = r#"
seed = 9
[machine]
nodes = 3
pes_per_node = 1
mpl = 1
[costs]
serial_nic = true
[schemes]
spin_time = "250us"
[mix]
workload = "WL2"
jobs = 1
procs = 3
pattern = "nn"
v = 0.0
iterations = 40
without_io = true
"#;

#[test]
fn spin_per_message_restarts_the_spin_budget_on_each_message() {
    let mut sc = Scenario::parse(RING_SB, "ring-sb").unwrap();
    // One budget for the whole receive: it runs out 62 µs after the first message, the
    // process blocks and the PE idles until the second message wakes it.
    let per_receive = run(&sc, Scheme::Sb, false).unwrap();
    assert!(
        per_receive.node_breakdown[0].idle > Dur::ZERO,
        "{:?}",
        per_receive.node_breakdown[0]
    );
    // A fresh budget after the first message covers the second: no block, no idle.
    sc.schemes.spin_per_message = true;
    let per_message = run(&sc, Scheme::Sb, false).unwrap();
    for b in &per_message.node_breakdown {
        assert_eq!(b.idle, Dur::ZERO, "{b:?}");
    }
    assert!(per_message.makespan < per_receive.makespan);
}

/// Seed 004 Table 4, WL1 NN: without the Solaris starvation check the spinning schemes run the
/// batch one job at a time (the job whose processes keep returning from I/O holds the top
/// levels) and LOCAL's messages wait 0.05 ms; with it, the starved processes come back once a
/// second, the jobs interleave uncoordinated, and messages wait tens of ms (paper: 94.6 ms).
#[test]
fn ts_update_makes_local_messages_wait_for_quanta_as_in_table_4() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/proc-fig4.toml");
    let mut sc = Scenario::load(&path).unwrap();
    assert_eq!(sc.schemes.ts_update, Some(Dur::from_secs(1)));
    let mix = sc.mix.as_mut().unwrap();
    mix.workload = "WL1".into();
    mix.pattern = Some(cosched_cosim::scenario::Pattern::Nn);
    let with = run(&sc, Scheme::Local, false).unwrap();
    sc.schemes.ts_update = None;
    let without = run(&sc, Scheme::Local, false).unwrap();
    assert!(without.msg_pending_s < 0.001, "{}", without.msg_pending_s);
    assert!(with.msg_pending_s > 0.030, "{}", with.msg_pending_s);
    assert!(with.makespan > without.makespan * 5);
}

/// `per_process_v`: each process keeps one factor 1 + unif(−v/2, v/2) for the whole run and no
/// per-iteration noise, so CPUs differ persistently in load.
#[test]
fn per_process_v_draws_one_factor_per_rank() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/proc-fig4.toml");
    let mut sc = Scenario::load(&path).unwrap();
    sc.mix.as_mut().unwrap().per_process_v = true;
    let jobs = workload::build(&sc).unwrap();
    let mut factors = Vec::new();
    for j in &jobs {
        for r in 0..j.procs {
            let (f, v) = j.rank_params(r);
            assert!((0.75..=1.25).contains(&f), "{f}");
            assert_eq!(v, 0.0);
            factors.push(f);
        }
    }
    let mean = factors.iter().sum::<f64>() / factors.len() as f64;
    assert!((mean - 1.0).abs() < 0.03, "{mean}");
    assert!(factors.iter().any(|&f| (f - 1.0).abs() > 0.2));
    // Off (the default): every rank has factor 1 and the per-iteration variance v/2.
    sc.mix.as_mut().unwrap().per_process_v = false;
    let j = &workload::build(&sc).unwrap()[0];
    assert_eq!(j.rank_params(3), (1.0, 0.25));
}

/// Seed 004 Fig. 5: blocking schemes are fairer (lower coefficient of variation of slowdown)
/// than spinning ones. Holds here with load imbalance (v = 0.5); at the figure's v = 0.0 every
/// scheme runs the same lock-step and the CVs coincide (docs/reproductions/proc-fig4.md).
#[test]
fn sb_slowdowns_vary_less_than_pb_slowdowns() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/proc-fig5.toml");
    let mut sc = Scenario::load(&path).unwrap();
    let mix = sc.mix.as_mut().unwrap();
    assert!(mix.slowdown);
    mix.v = 0.5;
    mix.iterations = Some(200);
    let cv = |scheme| {
        let r = run(&sc, scheme, false).unwrap();
        for j in &r.jobs {
            // Nobody runs faster than alone (within the draws' noise).
            assert!(
                j.slowdown.unwrap() > 0.95,
                "{scheme} job {}: {:?}",
                j.id,
                j.slowdown
            );
        }
        r.slowdown_cv.unwrap()
    };
    let (sb, pb) = (cv(Scheme::Sb), cv(Scheme::Pb));
    assert!(sb < pb, "SB {sb} PB {pb}");
}

/// CC (seed 004 §2): a sender whose 4 messages take 4 transits on a serial NIC spins for one
/// spin time and then blocks until the send completes. Alone on its PE it leaves the PE idle
/// where SB spins through the send; with a second job on the PE, that job runs instead.
#[test]
fn cc_sender_blocks_on_a_long_nic_queue() {
    let mut sc = Scenario::parse(AA_ALONE, "aa-alone").unwrap();
    sc.costs.serial_nic = true;
    let sb = run(&sc, Scheme::Sb, false).unwrap();
    let cc = run(&sc, Scheme::Cc, false).unwrap();
    assert_eq!(cc.finished_jobs, 1);
    let idle = |r: &cosched_cosim::RunResult| r.node_breakdown[0].idle;
    // Per iteration CC idles while the NIC works, about 4 transits minus the spin, less the
    // receive's own waiting that SB also idles through.
    let iters = 50;
    assert!(
        idle(&cc) > idle(&sb) + sc.costs.transit() * iters,
        "cc {:?} sb {:?}",
        idle(&cc),
        idle(&sb)
    );
    // The wake-up costs an interrupt per iteration, so CC is not faster alone.
    assert!(cc.makespan >= sb.makespan);
}

/// Seed 000 §5.4 (docs/reproductions/fcs-512.md): the workload is §4.6's draw — the untyped
/// Lublin model splits into about the thesis's 236 short / 276 long jobs (short: under one
/// real minute of work) — and long jobs run faster under FCS than GS, and under GS than local,
/// as in the thesis (181.0 < 192.0 < 215 s). The thesis's FCS < ICS is not reproduced (ICS is
/// 3–7 % ahead here), so it is not pinned.
#[test]
fn fcs_512_is_the_theses_draw_and_fcs_beats_gs_beats_local() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/fcs-512.toml");
    let sc = Scenario::load(std::path::Path::new(path)).unwrap();
    let jobs = workload::build(&sc).unwrap();
    let short: Vec<f64> = jobs
        .iter()
        .map(|j| j.work.as_secs_f64())
        .filter(|&w| w < 0.6)
        .collect();
    assert_eq!(jobs.len(), 512);
    assert!(
        (216..=256).contains(&short.len()),
        "{} short jobs (thesis 236)",
        short.len()
    );
    let mean_short = short.iter().sum::<f64>() / short.len() as f64;
    assert!(
        (0.18..0.23).contains(&mean_short),
        "mean short work {mean_short} s (thesis 0.203 s)"
    );
    // Three 512-job runs (a few CPU seconds each), side by side.
    let long = |scheme| run(&sc, scheme, false).unwrap().long.mean_runtime_s;
    let (fcs, gs, local) = std::thread::scope(|s| {
        let f = s.spawn(|| long(Scheme::Fcs));
        let g = s.spawn(|| long(Scheme::Gs));
        let l = long(Scheme::Local);
        (f.join().unwrap(), g.join().unwrap(), l)
    });
    assert!(
        fcs < gs && gs < local,
        "long-job runtime FCS {fcs} GS {gs} local {local}"
    );
}

/// Seed 004 Fig. 7 on the FT model (scenarios/proc-fig7.toml): spin-block overlaps one job's
/// all-to-all with the others' computation and beats BATCH, while LOCAL's spinning receivers
/// run the jobs one after another, as BATCH does (docs/reproductions/proc-fig7.md).
#[test]
fn nas_ft_sb_beats_batch_and_local_does_not() {
    let mut sc = Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/proc-fig7.toml"
    )))
    .unwrap();
    let mix = sc.mix.as_mut().unwrap();
    mix.workload = "FT".into();
    mix.iterations = Some(8);
    let sb = run(&sc, Scheme::Sb, false).unwrap().batch_slowdown.unwrap();
    let local = run(&sc, Scheme::Local, false)
        .unwrap()
        .batch_slowdown
        .unwrap();
    assert!(sb < 0.8, "SB against BATCH: {sb}");
    assert!((local - 1.0).abs() < 0.05, "LOCAL against BATCH: {local}");
}

/// With `[costs] startup`, the sending NIC is busy only for a message's transfer: the
/// startup part of one message's latency overlaps the next message's transfer.
#[test]
fn startup_latency_overlaps_on_a_serial_nic() {
    let text = "[machine]\nnodes = 4\nmpl = 1\n[costs]\nserial_nic = true\nstartup = \"100us\"\n\
                [mix]\nworkload = \"WL3\"\njobs = 1\nprocs = 4\npattern = \"aa\"\nv = 0.0\niterations = 100\n";
    let sc = Scenario::parse(text, "t").unwrap();
    let jobs = workload::build(&sc).unwrap();
    let r = Engine::new(&sc, Scheme::Local, &jobs, false).run();
    // Compute and I/O are sized from 3 × 188 µs of communication; the three messages now
    // take 3 × 88 µs of transfer plus one 100 µs startup, 364 µs (564 if serialised whole).
    let j = &jobs[0];
    let want = (j.compute + j.io).as_secs_f64() + 364e-6;
    let iter = r.makespan_s / 100.0;
    assert!(
        (iter - want).abs() < 0.03 * want,
        "iteration {iter} s, want {want} s"
    );
}

/// A sweep over seeds: each grid point (seed aside) and scheme is summarised once, over every
/// seed; SB+PROC's change against SB is paired seed by seed.
#[test]
fn a_seed_grid_is_summarised_per_point_with_procs_paired_change() {
    let text = format!("{SMALL_MIX}[grid]\nseed = [1, 2, 3]\n");
    let sc = Scenario::parse(&text, "seeds").unwrap();
    let rows = cosched_cosim::sweep(&sc, &[Scheme::Sb, Scheme::SbProc], &|_, _| {}).unwrap();
    assert_eq!(rows.len(), 6);
    let spread = cosched_cosim::spread::over_seeds(&rows);
    assert_eq!(spread.len(), 2);
    let sb: Vec<&cosched_cosim::RunResult> = rows.iter().filter(|r| r.scheme == "sb").collect();
    let s = &spread[0];
    assert_eq!((s.scheme.as_str(), s.seeds.len()), ("sb", 3));
    let responses: Vec<f64> = sb.iter().map(|r| r.mean_response_s).collect();
    assert_eq!(s.response_s.mean, responses.iter().sum::<f64>() / 3.0);
    assert_eq!(
        s.response_s.max,
        responses.iter().copied().fold(f64::MIN, f64::max)
    );
    assert!(s.vs_base.is_none());
    let p = spread[1].vs_base.as_ref().unwrap();
    assert_eq!(p.base, "sb");
    let mut pct: Vec<f64> = rows
        .iter()
        .filter(|r| r.scheme == "sb+proc")
        .map(|r| {
            let seed = &r.params.as_ref().unwrap()["seed"];
            let o = sb
                .iter()
                .find(|o| &o.params.as_ref().unwrap()["seed"] == seed)
                .unwrap();
            100.0 * (r.mean_response_s - o.mean_response_s) / o.mean_response_s
        })
        .collect();
    pct.sort_by(f64::total_cmp);
    assert_eq!(
        (
            p.response_pct.min,
            p.response_pct.median,
            p.response_pct.max
        ),
        (pct[0], pct[1], pct[2])
    );
    // Different seeds draw different compute times.
    assert!(s.response_s.min < s.response_s.max);
}

/// A slowdown divides a job's response by its own runtime alone: jobs of one kind but of
/// different lengths (`[mix.length]`) are each measured at their length.
#[test]
fn slowdowns_of_jobs_of_different_lengths_use_their_own_runtime_alone() {
    let text = SMALL_MIX.replace("WL4", "WL1").replace(
        "interarrival = \"20ms\"",
        "slowdown = true\n[mix.length]\ncv2 = 2.0\n",
    );
    let sc = Scenario::parse(&text, "lengths").unwrap();
    let r = run(&sc, Scheme::Sb, false).unwrap();
    let jobs = workload::build(&sc).unwrap();
    let alone: Vec<(u32, f64)> = r
        .jobs
        .iter()
        .zip(&jobs)
        .map(|(j, spec)| (spec.iterations, j.response_s.unwrap() / j.slowdown.unwrap()))
        .collect();
    let (short, long) = (
        alone.iter().min_by_key(|a| a.0).unwrap(),
        alone.iter().max_by_key(|a| a.0).unwrap(),
    );
    assert!(short.0 < long.0, "{alone:?}");
    assert!(short.1 < long.1, "{alone:?}");
}
