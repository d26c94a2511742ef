//! Unit tests of the policy: the timeline, space sharing, groups, backfilling and the
//! response-time estimates.

use super::*;

fn quad(nodes: u32) -> MachineShape {
    MachineShape {
        nodes,
        sockets_per_node: 2,
        cores_per_socket: 2,
        mem_per_node_mib: None,
    }
}

/// Scojo-PECT with short jobs up to 100 s and medium up to 1000 s on 4 quad-core nodes,
/// so a medium job fits in one long slice: the interval [0, 3600) holds a medium slice
/// [0, 1080) and a long one [1080, 3600), active from 1140.
fn small_types() -> Scojo {
    let mut cfg = PolicyConfig::new(quad(4));
    for (k, v) in [("short_max", 100), ("medium_max", 1000)] {
        cfg.options.insert(k.into(), toml::Value::Integer(v));
    }
    Scojo::new("scojo-pect", Variant::Ssp, &cfg).unwrap()
}

fn submit(p: &mut Scojo, id: u64, at: i64, procs: u32, est: i64) {
    let r = JobRequest::new(JobId(id), Time::from_secs(at), procs, Dur::from_secs(est));
    p.observe(Time::from_secs(at), Event::Submitted(r));
}

fn decide(p: &mut Scojo, at: i64) -> Vec<Decision> {
    let mut out = Vec::new();
    p.decide(Time::from_secs(at), &mut out);
    out
}

fn started_in(out: &[Decision], id: u64) -> Option<Option<u32>> {
    out.iter().find_map(|d| match d {
        Decision::Start { job, slot, .. } if *job == JobId(id) => Some(*slot),
        _ => None,
    })
}

/// §4.8's non-type slice backfilling: a medium job (1000 s) waiting during the long
/// slice starts there when it ends before the slice does, runs to its end there, and is
/// never suspended.
#[test]
fn a_medium_job_backfills_into_the_long_slice_and_ends_there() {
    let mut p = small_types();
    submit(&mut p, 1, 1200, 1, 1000);
    let out = decide(&mut p, 1200);
    assert_eq!(started_in(&out, 1), Some(Some(LONG as u32)), "{out:?}");
    // It ends at 2200, before the long slice's end at 3600.
    p.observe(Time::from_secs(2200), Event::Ended(JobId(1)));
    let out = decide(&mut p, 2200);
    assert!(out.iter().all(|d| !matches!(d, Decision::Suspend { .. })));
    assert!(
        p.vms
            .iter()
            .all(|v| v.alloc.is_empty() && v.queue.is_empty())
    );
}

/// The same job does not backfill when it would outlast the slice (submitted at 2700:
/// 900 s left) — it waits for the next medium slice — nor when it would delay the
/// reservation of a long job (a 16-process long job waits for the node a running long job
/// frees at 2300; the medium job would hold another node until 2500).
#[test]
fn a_medium_job_does_not_backfill_where_it_is_unsafe() {
    let mut p = small_types();
    submit(&mut p, 1, 2700, 1, 1000);
    assert_eq!(started_in(&decide(&mut p, 2700), 1), None);
    // The next interval's medium slice, after its overhead.
    let _ = decide(&mut p, 3600);
    let out = decide(&mut p, 3660);
    assert_eq!(started_in(&out, 1), Some(Some(MEDIUM as u32)), "{out:?}");

    let mut p = small_types();
    submit(&mut p, 1, 1200, 1, 1100);
    assert_eq!(
        started_in(&decide(&mut p, 1200), 1),
        Some(Some(LONG as u32))
    );
    submit(&mut p, 2, 1500, 16, 1100);
    submit(&mut p, 3, 1500, 1, 1000);
    let out = decide(&mut p, 1500);
    assert_eq!(started_in(&out, 2), None);
    assert_eq!(started_in(&out, 3), None, "{out:?}");
    // Without the long job waiting, the same medium job goes in.
    let mut p = small_types();
    submit(&mut p, 1, 1200, 1, 1100);
    let _ = decide(&mut p, 1200);
    submit(&mut p, 3, 1500, 1, 1000);
    let out = decide(&mut p, 1500);
    assert_eq!(started_in(&out, 3), Some(Some(LONG as u32)), "{out:?}");
}

/// The readings of the seed left open are options, with the default the seed's text
/// supports best; a misspelt one is refused.
#[test]
fn open_readings_are_options() {
    let with = |k: &str, v: toml::Value| {
        let mut cfg = PolicyConfig::new(quad(4));
        cfg.options.insert(k.into(), v);
        ScojoConfig::from_policy_config("glomarc", Variant::Glts, &cfg)
    };
    let d = with("n_h", toml::Value::Integer(12)).unwrap();
    assert_eq!(
        (d.sl_self, d.fair_others, d.beat_ssp),
        (SlSelf::Both, true, true)
    );
    assert!(!d.group_backfill);
    assert!(
        with("group_backfill", toml::Value::Boolean(true))
            .unwrap()
            .group_backfill
    );
    let g = with("sl_self", toml::Value::String("gain".into())).unwrap();
    assert_eq!(g.sl_self, SlSelf::Gain);
    assert!(with("sl_self", toml::Value::String("self".into())).is_err());
    assert!(
        !with("beat_ssp", toml::Value::Boolean(false))
            .unwrap()
            .beat_ssp
    );
}

/// Step 7 covers the jobs a group delays, not only its members (§4.6: "any other
/// jobs"). In the long slice a long job (1 process, 1100 s) runs on one node; a 16-process
/// long job W waits for it (all four nodes, from 2300); a 2-process long job P waits
/// behind W. A group with P as primary on two free nodes (one process each) would hold
/// them until 3200 and push W's start back by 900 s of slice time, well past
/// F_slack · R_est for W, though P itself stays within its bound.
#[test]
fn the_fairness_check_covers_the_waiting_jobs_a_group_delays() {
    let build = |fair_others: bool| {
        let mut cfg = PolicyConfig::new(quad(4));
        for (k, v) in [("short_max", 100), ("medium_max", 1000)] {
            cfg.options.insert(k.into(), toml::Value::Integer(v));
        }
        cfg.options
            .insert("fair_others".into(), toml::Value::Boolean(fair_others));
        let mut p = Scojo::new("scojo-pect", Variant::Ssp, &cfg).unwrap();
        submit(&mut p, 1, 1200, 1, 1100);
        submit(&mut p, 2, 1200, 16, 1100);
        submit(&mut p, 3, 1200, 2, 2000);
        let out = decide(&mut p, 1200);
        assert_eq!(started_in(&out, 1), Some(Some(LONG as u32)));
        assert!(started_in(&out, 2).is_none() && started_in(&out, 3).is_none());
        p
    };
    let now = Time::from_secs(1200);
    let p = build(true);
    // P alone, one process a node: 2000 s of response against 1.5 · its estimate.
    let members_only = build(false).fairness(LONG, (JobId(3), 1), &[], now);
    let r_p = p.jobs[&JobId(3)].r_est;
    assert!(
        (members_only - 2000.0 / (1.5 * r_p)).abs() < 1e-6,
        "{members_only}"
    );
    assert!(members_only <= 1.0);
    // W, pushed back from 1160 to 2060 of slice time (P's end), ends after the next
    // medium slice.
    let all = p.fairness(LONG, (JobId(3), 1), &[], now);
    assert!(all > 1.0, "{all}");
    let w = &p.jobs[&JobId(2)];
    let end = p.wall_at(LONG, Time::from_secs(2060) + w.space.dur, now);
    assert!(end > Time::from_secs(4740), "{end}");
    assert!(
        (all - (end.as_secs_f64() - 1200.0) / (1.5 * w.r_est)).abs() < 1e-3,
        "{all}"
    );
    // A job the group does not delay does not count, however late it already is: with W
    // running elsewhere nothing is delayed.
    let mut q = build(true);
    q.vms[LONG].queue.remove(JobId(2));
    let alone = q.fairness(LONG, (JobId(3), 1), &[], now);
    assert!((alone - members_only).abs() < 1e-9, "{alone}");
    // Asked only whether the group passes, the check may stop at the first job too
    // late, and gives the same verdict; below the bound it gives the same worst ratio.
    let quick = |p: &Scojo, stop: f64| {
        p.fairness_from(
            &std::cell::OnceCell::new(),
            LONG,
            (JobId(3), 1),
            &[],
            now,
            stop,
        )
    };
    assert!(quick(&p, 1.0) > 1.0);
    assert!(quick(&p, members_only) > members_only);
    assert_eq!(quick(&p, f64::INFINITY).to_bits(), all.to_bits());
    assert_eq!(quick(&q, 1.0).to_bits(), alone.to_bits());
}

/// Two medium jobs (1 h, 16 processes) submitted together on 4 quad-core nodes; returns
/// their response-time estimates.
fn estimates() -> (f64, f64) {
    let cfg = PolicyConfig::new(quad(4));
    let mut p = Scojo::new("scojo-pect", Variant::Ssp, &cfg).unwrap();
    for id in [1, 2] {
        let r = JobRequest::new(JobId(id), Time::ZERO, 16, Dur::from_secs(3600));
        p.observe(Time::ZERO, Event::Submitted(r));
    }
    p.decide(Time::ZERO, &mut Vec::new());
    (p.jobs[&JobId(1)].r_est, p.jobs[&JobId(2)].r_est)
}

/// The estimate comes from an FCFS forecast of the job's VM on whole nodes: both jobs
/// take all four nodes, so the second starts when the first is expected to end, at
/// least an hour of VM time later, which moves its estimate by at least 0.75 × 3600 s
/// (VM time runs only in the VM's slices, so wall time passes at least as fast).
#[test]
fn response_estimates_come_from_an_fcfs_forecast_of_the_vm() {
    let (a, b) = estimates();
    assert!(b >= a + 0.75 * 3600.0 - 1e-6, "{a} → {b}");
}

/// The FCFS plan kept between submissions gives each job the start a plan made afresh
/// for it gives, and is made again when the VM changes: jobs of mixed widths submitted
/// while the medium VM is idle, placed one by one on the kept plan, then a start that
/// changes the VM.
#[test]
fn an_fcfs_plan_carried_on_gives_the_starts_of_a_fresh_one() {
    let mut p = small_types();
    let widths = [16, 4, 12, 8, 16, 4, 4];
    for (i, &procs) in widths.iter().enumerate() {
        submit(&mut p, i as u64 + 1, 0, procs, 200 + 100 * i as i64);
    }
    let now = Time::ZERO;
    let ids: Vec<JobId> = p.vms[MEDIUM].queue.to_vec();
    assert_eq!(ids.len(), widths.len());
    let mut kept = Vec::new();
    for &id in &ids {
        kept.push(p.fcfs_start(id, now));
    }
    assert_eq!(
        p.vms[MEDIUM].plan.as_ref().unwrap().placed,
        ids.len(),
        "carried on"
    );
    for (&id, &k) in ids.iter().zip(&kept) {
        let mut fresh = p.clone();
        fresh.vms[MEDIUM].plan = None;
        assert_eq!(fresh.fcfs_start(id, now), k, "job {id}");
    }
    // Later jobs wait for the first one's four nodes: not every job starts at once.
    assert!(kept.iter().any(|&s| s > Some(Time::ZERO)), "{kept:?}");
    // A start changes the VM: the plan is made again, from the new state.
    let mut out = Vec::new();
    p.decide(now, &mut out);
    assert!(started_in(&out, 1).is_some(), "{out:?}");
    let w = *p.vms[MEDIUM].queue.last().unwrap();
    let again = p.fcfs_start(w, now);
    let mut fresh = p.clone();
    fresh.vms[MEDIUM].plan = None;
    assert_eq!(fresh.fcfs_start(w, now), again);
}

/// A backfilling pass stops at the first job from which no job left can start now, though
/// the fewest nodes (job 3's one) and the shortest estimate (job 4's) of the jobs left, taken
/// apart, would fit the window before job 2's reservation: job 3 is too long for it, job 4
/// too wide for the free nodes. The pass places job 2 and leaves jobs 3 and 4 to the next.
#[test]
fn a_pass_stops_where_one_small_long_job_and_one_wide_short_one_cannot_start() {
    let mut p = small_types();
    submit(&mut p, 1, 1200, 1, 3000);
    assert_eq!(
        started_in(&decide(&mut p, 1200), 1),
        Some(Some(LONG as u32))
    );
    submit(&mut p, 2, 1200, 16, 1100);
    submit(&mut p, 3, 1200, 1, 10_000);
    submit(&mut p, 4, 1200, 16, 1001);
    let out = decide(&mut p, 1200);
    assert!(
        out.iter().all(|d| !matches!(d, Decision::Start { .. })),
        "{out:?}"
    );
    let plan = p.vms[LONG].backfill.as_ref().expect("a plan kept");
    assert_eq!(plan.placed, 1, "jobs placed");
}

/// The timeline walked slice by slice, as [`Scojo::wall_at`] must answer.
fn wall_at_slice_by_slice(p: &Scojo, k: usize, v: Time, now: Time) -> Time {
    let mut need = v - p.vms[k].vnow(now);
    let mut t = now;
    let Some(mut s) = p.slice else {
        return now + need.max(Dur::ZERO);
    };
    let mut t0 = p.interval_start;
    let mut list = p.slices_of(t0, p.short_here);
    let mut pos = list
        .iter()
        .position(|x| (x.kind, x.begin) == (s.kind, s.begin));
    for _ in 0..100_000 {
        if need <= Dur::ZERO {
            break;
        }
        if s.kind == k {
            let from = t.max(s.active);
            let avail = (s.end - from).max(Dur::ZERO);
            if avail >= need {
                return from + need;
            }
            need -= avail;
        }
        t = s.end;
        match pos {
            Some(p) if p + 1 < list.len() => pos = Some(p + 1),
            _ => {
                t0 += p.cfg.interval;
                list = p.slices_of(t0, false);
                pos = Some(0);
            }
        }
        s = list[pos.expect("set above")];
    }
    t + need.max(Dur::ZERO)
}

/// Passing whole plain intervals at once gives the wall times of the slice-by-slice
/// walk, for VM times from a second to years ahead (the walk's cap), from
/// instants in every kind of slice, with and without a short slice in the interval.
#[test]
fn wall_times_passing_whole_intervals_match_the_slice_by_slice_walk() {
    let mut p = small_types();
    submit(&mut p, 1, 0, 4, 50);
    submit(&mut p, 2, 0, 16, 500);
    submit(&mut p, 3, 0, 16, 5000);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut checked = 0;
    for now in [0, 30, 700, 1300, 2900, 3600, 4000, 7300, 9000] {
        let now = Time::from_secs(now);
        p.decide(now, &mut Vec::new());
        for k in [MEDIUM, LONG] {
            let base = p.vms[k].vnow(now);
            for i in 0..400 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let scale = 10i64.pow(i % 9);
                let v = base + Dur::from_micros((x % 1_000_000) as i64 * 1000 * scale);
                let got = p.wall_at(k, v, now);
                let want = wall_at_slice_by_slice(&p, k, v, now);
                assert_eq!(got, want, "VM {k}, v {v}, now {now:?}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 9 * 2 * 400);
}

/// A random stream of submissions and ends for the randomized tests (xorshift, seeded): each
/// step moves the clock 1–60 s, submits a job of 1 to `max_procs` processes one step in
/// `submit_one_in`, and ends one of the started jobs one step in four.
struct Stream {
    x: u64,
    running: Vec<JobId>,
    next_id: u64,
    now: i64,
}

impl Stream {
    fn new(seed: u64) -> Stream {
        Stream {
            x: seed,
            running: Vec::new(),
            next_id: 1,
            now: 0,
        }
    }

    fn rand(&mut self, n: u64) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x % n
    }

    /// The next step's submission and end, observed by `p`; returns the step's instant.
    fn step(&mut self, p: &mut Scojo, submit_one_in: u64, max_procs: u64) -> Time {
        self.now += 1 + self.rand(60) as i64;
        let t = Time::from_secs(self.now);
        if self.rand(submit_one_in) == 0 {
            let procs = 1 + self.rand(max_procs) as u32;
            let est = 20 + self.rand(2500) as i64;
            submit(p, self.next_id, self.now, procs, est);
            self.next_id += 1;
        }
        if !self.running.is_empty() && self.rand(4) == 0 {
            let k = self.rand(self.running.len() as u64) as usize;
            p.observe(t, Event::Ended(self.running.swap_remove(k)));
        }
        t
    }

    /// The jobs `decisions` started, which later steps may end.
    fn started(&mut self, decisions: &[Decision]) {
        self.running
            .extend(decisions.iter().filter_map(|d| match d {
                Decision::Start { job, .. } => Some(*job),
                _ => None,
            }));
    }
}

/// A backfilling plan kept between decisions decides as a plan made afresh at each one: a
/// random stream of submissions and ends on 8 quad-core nodes over several intervals, with
/// every decision made twice from the same state, once with the kept plans and once without.
#[test]
fn a_kept_backfilling_plan_decides_as_a_fresh_one() {
    let mut cfg = PolicyConfig::new(quad(8));
    for (k, v) in [("short_max", 100), ("medium_max", 1000)] {
        cfg.options.insert(k.into(), toml::Value::Integer(v));
    }
    let mut p = Scojo::new("scojo-pect", Variant::Ssp, &cfg).unwrap();
    let mut s = Stream::new(0x2545_f491_4f6c_dd1d);
    let mut reused = 0;
    for _ in 0..2000 {
        let t = s.step(&mut p, 3, 24);
        let now = s.now;
        // Plans kept from an earlier clock of the same VM state, on free nodes: the
        // pass places on them only what was added since.
        reused += p
            .vms
            .iter()
            .filter(|vm| {
                vm.free_nodes().next().is_some()
                    && vm
                        .backfill
                        .as_ref()
                        .is_some_and(|b| b.epoch == vm.epoch && vm.vnow(t) > b.at)
            })
            .count();
        let mut fresh = p.clone();
        for vm in &mut fresh.vms {
            vm.backfill = None;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        p.decide(t, &mut a);
        fresh.decide(t, &mut b);
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "at {now} s");
        s.started(&a);
    }
    assert!(reused > 100, "plans kept {reused} times");
}

/// Deferring the placements beyond any start now's window decides as placing every job: a
/// random stream that submits faster than the machine runs (the queue grows to hundreds of
/// jobs, most of them fitting far ahead) on 8 quad-core nodes, under Scojo-PECT and
/// G-LOMARC-TS, with every decision made twice from the same state, with deferral and
/// without.
#[test]
fn deferring_far_placements_decides_as_placing_every_job() {
    for (name, variant) in [("scojo-pect", Variant::Ssp), ("glomarc", Variant::Glts)] {
        let mut cfg = PolicyConfig::new(quad(8));
        for (k, v) in [("short_max", 100), ("medium_max", 1000)] {
            cfg.options.insert(k.into(), toml::Value::Integer(v));
        }
        let mut p = Scojo::new(name, variant, &cfg).unwrap();
        let mut s = Stream::new(0x9e37_79b9_7f4a_7c15);
        let mut kept_deferred = 0;
        for _ in 0..3000 {
            let t = s.step(&mut p, 2, 24);
            let now = s.now;
            let mut plain = p.clone();
            plain.defer = false;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            p.decide(t, &mut a);
            plain.decide(t, &mut b);
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name} at {now} s");
            s.started(&a);
            kept_deferred += p
                .vms
                .iter()
                .filter(|vm| vm.backfill.as_ref().is_some_and(|b| !b.deferred.is_empty()))
                .count();
        }
        let queued: usize = p.vms.iter().map(|vm| vm.queue.len()).sum();
        assert!(queued > 100, "{name}: {queued} jobs waiting at the end");
        assert!(
            kept_deferred > 100,
            "{name}: plans with deferred jobs {kept_deferred}"
        );
    }
}

/// The node releases counted job by job are those of the node-by-node walk, counted by
/// time: a random stream of submissions, ends and nodes going down and up on 8 quad-core
/// nodes, with groups (G-LOMARC-TS, two jobs on one node's lanes) and without, every VM
/// compared after every decision.
#[test]
fn node_releases_counted_by_job_are_those_counted_by_node() {
    for variant in [Variant::Ssp, Variant::Glts, Variant::Cst] {
        let mut cfg = PolicyConfig::new(quad(8));
        for (k, v) in [("short_max", 100), ("medium_max", 1000)] {
            cfg.options.insert(k.into(), toml::Value::Integer(v));
        }
        let mut p = Scojo::new("glomarc", variant, &cfg).unwrap();
        let mut s = Stream::new(0x9e37_79b9_7f4a_7c15);
        let (mut shared, mut checked) = (0, 0);
        for _ in 0..1500 {
            let t = s.step(&mut p, 2, 12);
            let now = s.now;
            match s.rand(40) {
                0 => p.observe(t, Event::NodeDown(cosched_core::NodeId(s.rand(8) as u32))),
                1 => p.observe(t, Event::NodeUp(cosched_core::NodeId(s.rand(8) as u32))),
                _ => {}
            }
            let mut out = Vec::new();
            p.decide(t, &mut out);
            s.started(&out);
            for k in [SHORT, MEDIUM, LONG] {
                let v = p.vms[k].vnow(t);
                let mut by_job = Vec::new();
                p.release_counts(k, v, &mut by_job);
                let mut times: Vec<Time> = p.node_releases_iter(k, v).map(|(_, e)| e).collect();
                times.sort_unstable();
                let mut by_node: Vec<(Time, u32)> = Vec::new();
                for e in times {
                    match by_node.last_mut() {
                        Some(last) if last.0 == e => last.1 += 1,
                        _ => by_node.push((e, 1)),
                    }
                }
                assert_eq!(by_job, by_node, "{variant:?}, VM {k} at {now} s");
                checked += by_job.len();
                shared += p.vms[k]
                    .lanes
                    .iter()
                    .filter(
                        |l| matches!(l, [Some(a), Some(b)] if a != b && *a != DOWN && *b != DOWN),
                    )
                    .count();
            }
        }
        assert!(checked > 1000, "{variant:?}: {checked} release times");
        if variant != Variant::Ssp {
            assert!(shared > 0, "{variant:?}: no node shared by two jobs");
        }
    }
}
