//! The Cray T3D class-based gang scheduler (`t3d`): Table 1 defaults, configuration from
//! TOML, and the rules of seed 002 §4 — debug and benchmark jobs are never preempted, no job
//! is preempted before its do-not-disturb time is up, none for a job of a lower-priority class.

mod timeshare_support;

use cosched_core::{Dur, JobId, MachineShape, Time};
use cosched_policy::t3d::{T3d, T3dConfig};
use cosched_policy::{Decision, Policy, PolicyConfig, registry};
use timeshare_support::{TestJob, random_jobs, simulate};

const INTERACTIVE: u32 = 0;
const DEBUG: u32 = 1;
const PRODUCTION: u32 = 2;
const BENCHMARK: u32 = 3;
const STANDBY: u32 = 4;

/// Queues 0-4 map to the five classes in Table 1 order.
fn config(pes: u32) -> PolicyConfig {
    let mut c = PolicyConfig::new(MachineShape::flat(pes, 1));
    c.options = toml::from_str(
        r#"
        [queues]
        0 = "interactive"
        1 = "debug"
        2 = "production"
        3 = "benchmark"
        4 = "standby"
        "#,
    )
    .unwrap();
    c
}

fn tj(id: u64, submit: i64, procs: u32, runtime: i64, queue: u32) -> TestJob {
    let mut j = timeshare_support::job(id, submit, procs, runtime);
    j.req.queue = Some(queue);
    j
}

#[test]
fn table_1_is_the_default_and_scales_with_the_machine() {
    let c = T3dConfig::table_1(256);
    let names: Vec<&str> = c.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["interactive", "debug", "production", "benchmark", "standby"]
    );
    let debug = &c.classes[1];
    assert_eq!(
        (
            debug.priority,
            debug.wait,
            debug.proc_limit,
            debug.preemptible
        ),
        (4, Dur::from_secs(300), 96, false)
    );
    assert_eq!(c.classes[2].wait, Dur::from_secs(3600));
    assert_eq!(c.classes[4].dnd_per_pe, Dur::from_secs(3));
    assert_eq!(
        (c.large_job, c.large_limit, c.job_limit, c.system_limit),
        (64, 192, 256, 576)
    );
    let half = T3dConfig::table_1(128);
    assert_eq!((half.classes[1].proc_limit, half.system_limit), (48, 288));
    // Queue 0 is interactive, any other queue production.
    let mut req = cosched_policy::JobRequest::new(JobId(1), Time::ZERO, 4, Dur::from_secs(1));
    req.queue = Some(0);
    assert_eq!(c.class_of(&req), 0);
    req.queue = Some(7);
    assert_eq!(c.class_of(&req), 2);
    req.class = Some("standby".into());
    assert_eq!(c.class_of(&req), 4);
}

#[test]
fn toml_overrides_and_bad_keys_are_named() {
    let mut c = config(64);
    let extra: toml::Table = toml::from_str(
        r#"
        swap_per_pe = "2s"
        large_job = 16
        [classes.production]
        priority = 5
        dnd_per_pe = "1m"
        [classes.night]
        priority = 2
        "#,
    )
    .unwrap();
    c.options.extend(extra);
    let t = T3d::new(&c).unwrap();
    let cfg = t.config();
    assert_eq!(cfg.swap_per_pe, Dur::from_secs(2));
    assert_eq!(cfg.large_job, 16);
    assert_eq!(cfg.classes[2].priority, 5);
    assert_eq!(cfg.classes[2].dnd_per_pe, Dur::from_secs(60));
    assert_eq!(cfg.classes[5].name, "night");
    c.options = toml::from_str("[classes.debug]\nprio = 3").unwrap();
    let err = registry::build("t3d", &c).err().unwrap().to_string();
    assert!(
        err.contains("classes.debug.prio") && err.contains("priority"),
        "{err}"
    );
    c.options = toml::from_str("[queues]\n0 = \"gold\"").unwrap();
    let err = registry::build("t3d", &c).err().unwrap().to_string();
    assert!(err.contains("gold"), "{err}");
    // A misspelt top-level key of the [policy] table is refused too, with the known ones.
    c.options = toml::from_str("swap_per_p = \"1s\"").unwrap();
    let err = registry::build("t3d", &c).err().unwrap().to_string();
    assert_eq!(
        err,
        "policy t3d: unknown option swap_per_p; known options: classes, day_end, day_offset, \
         day_start, default_class, job_limit, large_job, large_limit, night, queues, swap_per_pe, \
         system_limit, weekends"
    );
}

#[test]
fn interactive_job_preempts_production_after_its_do_not_disturb_time() {
    let mut p = T3d::new(&config(16)).unwrap();
    // Production on all 16 PEs: do-not-disturb for 16 x 10 s = 160 s.
    let jobs = [
        tj(1, 0, 16, 1000, PRODUCTION),
        tj(2, 10, 4, 50, INTERACTIVE),
    ];
    let run = simulate(&mut p, &jobs, |_, _, _| {});
    let prod = &run.jobs[&JobId(1)];
    let inter = &run.jobs[&JobId(2)];
    assert_eq!(prod.history[1], (Time::from_secs(160), "preempt"));
    // Swapping 16 PEs out takes 16 s; then the interactive job starts.
    assert_eq!(inter.start, Some(Time::from_secs(176)));
    assert_eq!(inter.end, Some(Time::from_secs(226)));
    // The production job comes back after swapping in (16 s) and finishes its work.
    assert_eq!(prod.history[2], (Time::from_secs(242), "start"));
    assert_eq!(prod.end, Some(Time::from_secs(242 + 1000 - 160)));
    assert_eq!(prod.preemptions, 1);
    let q = p.quanta();
    assert_eq!(q.len(), 3);
    assert!(
        q.iter()
            .any(|q| q.job == JobId(1) && q.preempted && q.end - q.start == Dur::from_secs(160))
    );
}

#[test]
fn debug_and_benchmark_jobs_are_never_preempted() {
    for class in [DEBUG, BENCHMARK] {
        let mut c = config(16);
        // Let these classes hold the whole machine for the test.
        c.options.extend(
            toml::from_str::<toml::Table>(
                "[classes.debug]\nproc_limit = 16\n[classes.benchmark]\nproc_limit = 16",
            )
            .unwrap(),
        );
        let mut p = T3d::new(&c).unwrap();
        let jobs = [
            tj(1, 0, 16, 5000, class),
            tj(2, 10, 4, 50, INTERACTIVE),
            tj(3, 20, 8, 50, DEBUG),
        ];
        let run = simulate(&mut p, &jobs, |_, _, _| {});
        assert_eq!(run.jobs[&JobId(1)].preemptions, 0);
        assert!(run.jobs[&JobId(2)].start.unwrap() >= Time::from_secs(5000));
        assert!(p.preemptions().is_empty());
    }
}

#[test]
fn lower_priority_jobs_never_preempt_higher_ones() {
    let mut p = T3d::new(&config(16)).unwrap();
    // A standby job waits "forever" but may not take the production job's PEs, even long
    // after its do-not-disturb time.
    let jobs = [tj(1, 0, 16, 20_000, PRODUCTION), tj(2, 5, 16, 10, STANDBY)];
    let run = simulate(&mut p, &jobs, |_, _, _| {});
    assert_eq!(run.jobs[&JobId(1)].preemptions, 0);
    assert_eq!(run.jobs[&JobId(2)].start, Some(Time::from_secs(20_000)));
}

#[test]
fn class_processor_limit_holds_debug_jobs_back() {
    let mut p = T3d::new(&config(256)).unwrap();
    let jobs = [
        tj(1, 0, 64, 100, DEBUG),
        tj(2, 0, 64, 100, DEBUG),
        tj(3, 0, 32, 100, DEBUG),
    ];
    let run = simulate(&mut p, &jobs, |_, _, _| {});
    // 64 + 64 > 96: job 2 waits for job 1; job 3 fits beside job 1.
    assert_eq!(run.jobs[&JobId(1)].start, Some(Time::ZERO));
    assert_eq!(run.jobs[&JobId(3)].start, Some(Time::ZERO));
    assert_eq!(run.jobs[&JobId(2)].start, Some(Time::from_secs(100)));
}

#[test]
fn random_mixed_workloads_obey_the_rules() {
    for seed in 1..=6 {
        let mut c = config(64);
        c.options
            .insert("swap_per_pe".into(), toml::Value::String("200ms".into()));
        let mut p = T3d::new(&c).unwrap();
        let jobs: Vec<TestJob> = random_jobs(seed, 150, 64, 40)
            .into_iter()
            .enumerate()
            .map(|(i, mut j)| {
                j.req.queue = Some(
                    [
                        INTERACTIVE,
                        INTERACTIVE,
                        PRODUCTION,
                        PRODUCTION,
                        DEBUG,
                        BENCHMARK,
                        STANDBY,
                    ][i % 7],
                );
                j
            })
            .collect();
        let classes: std::collections::HashMap<JobId, u32> = jobs
            .iter()
            .map(|j| (j.req.id, j.req.queue.unwrap()))
            .collect();
        let run = simulate(&mut p as &mut dyn Policy, &jobs, |_, _, _| {});
        for (id, l) in &run.jobs {
            assert!(l.end.is_some(), "seed {seed}: job {id} never finished");
            let mut last_start = None;
            for &(t, what) in &l.history {
                match what {
                    "start" => last_start = Some(t),
                    "preempt" => {
                        let class = classes[id];
                        assert!(
                            class != DEBUG && class != BENCHMARK,
                            "seed {seed}: job {id} of class {class} preempted"
                        );
                        let dnd = Dur::from_secs(
                            if class == STANDBY { 3 } else { 10 } * l_procs(&jobs, *id) as i64,
                        );
                        let since = last_start.expect("preempted after a start");
                        assert!(
                            t - since >= dnd,
                            "seed {seed}: job {id} preempted {} after its start",
                            t - since
                        );
                    }
                    _ => {}
                }
            }
        }
        let cfg = p.config().clone();
        for pre in p.preemptions() {
            let (v, f) = (&cfg.classes[pre.victim_class], &cfg.classes[pre.for_class]);
            assert!(
                v.priority <= f.priority,
                "seed {seed}: {} preempted for {}",
                v.name,
                f.name
            );
        }
        if seed == 1 {
            assert!(
                !p.preemptions().is_empty(),
                "the workload should cause preemptions"
            );
        }
        let _ = Decision::Kill { job: JobId(0) };
    }
}

fn l_procs(jobs: &[TestJob], id: JobId) -> u32 {
    jobs.iter().find(|j| j.req.id == id).unwrap().req.procs
}

#[test]
fn pes_of_a_node_that_is_down_are_not_used() {
    let mut p = T3d::new(&config(64)).unwrap();
    let mut out = Vec::new();
    p.handle(
        Time::ZERO,
        cosched_policy::Event::NodeDown(cosched_core::NodeId(0)),
        &mut out,
    );
    let mut req = cosched_policy::JobRequest::new(JobId(1), Time::ZERO, 63, Dur::from_secs(10));
    req.queue = Some(PRODUCTION);
    p.handle(Time::ZERO, cosched_policy::Event::Submitted(req), &mut out);
    match &out[..] {
        [Decision::Start { pes, .. }] => assert_eq!(pes.to_string(), "1-63"),
        other => panic!("{other:?}"),
    }
    let mut req = cosched_policy::JobRequest::new(JobId(2), Time::ZERO, 1, Dur::from_secs(10));
    req.queue = Some(PRODUCTION);
    out.clear();
    p.handle(Time::ZERO, cosched_policy::Event::Submitted(req), &mut out);
    assert!(
        !out.iter().any(|d| matches!(d, Decision::Start { .. })),
        "{out:?}"
    );
    out.clear();
    p.handle(
        Time::from_secs(1),
        cosched_policy::Event::NodeUp(cosched_core::NodeId(0)),
        &mut out,
    );
    assert!(
        matches!(&out[..], [Decision::Start { job: JobId(2), .. }]),
        "{out:?}"
    );
}
