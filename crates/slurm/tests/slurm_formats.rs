//! cosched's rendering of Slurm's formats against Slurm's own output for the same jobs.
//!
//! The expected lines are files in `fixtures/slurm-22.05/`, captured from Slurm 22.05.8
//! (Debian's slurm-wlm) on loopback, as `fixtures/slurm-22.05/README.md` tells. Each test
//! describes the jobs of that run as cosched would ([`JobView`]: ids, names, states,
//! times, nodes) and compares line by line. `sacct` needs Slurm's accounting database,
//! which the loopback setup does not run: its expected lines are written from the widths
//! and justification of Slurm's sacct (src/sacct/sacct.c, src/common/print_fields.c) and
//! the examples of its manual.

use cosched_slurm::env::{self, Allocation, StepKind, Submission, Task};
use cosched_slurm::job::{ArrayTask, Context, JobView};
use cosched_slurm::node::{NodeState, NodeView, PartitionView};
use cosched_slurm::state::{JobState, Reason};
use cosched_slurm::time::Limit;
use cosched_slurm::{sacct, scontrol, sinfo, squeue};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/slurm-22.05/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// 2026-11-27T10:16:15 UTC: when the first jobs of the run were submitted.
const T0: i64 = 1_795_774_575;
const WORK: &str = "/tmp/slurmfx/work";

fn ctx(now: i64) -> Context<'static> {
    Context {
        now,
        // The capture ran in UTC.
        offset: |_| 0,
        cluster: "loop",
    }
}

/// A job of the run as it was submitted (`sbatch run.sh`: one task, 10 minutes).
fn job(id: u64, name: &str, state: JobState, reason: Reason) -> JobView {
    JobView {
        id,
        array: None,
        name: name.into(),
        user: "root".into(),
        uid: 0,
        group: "root".into(),
        gid: 0,
        partition: "all".into(),
        state,
        reason,
        submit: T0,
        eligible: Some(T0),
        start: None,
        end: None,
        run_secs: 0,
        suspended_secs: 0,
        limit: Limit::Secs(600),
        nodes: Vec::new(),
        tasks_per_node: Vec::new(),
        whole_node_cpus: None,
        ntasks: 1,
        req_nodes: 1,
        cpus_per_task: 1,
        exit_code: Some(0),
        signal: None,
        work_dir: WORK.into(),
        command: format!("{WORK}/run.sh"),
        stdout: format!("{WORK}/slurm-{id}.out"),
        stderr: format!("{WORK}/slurm-{id}.out"),
        dependency: None,
        held: false,
        restarts: 0,
        batch: true,
        step: None,
    }
}

fn ran(mut j: JobView, start: i64, run: i64, nodes: &[&str]) -> JobView {
    j.start = Some(start);
    j.run_secs = run;
    j.nodes = nodes.iter().map(|s| s.to_string()).collect();
    j.tasks_per_node = vec![1; nodes.len()];
    j.ntasks = nodes.len() as u32;
    j.req_nodes = nodes.len() as u32;
    j
}

fn array_task(mut j: JobView, array: u64, index: u32, throttle: Option<u32>) -> JobView {
    j.array = Some(ArrayTask {
        job: array,
        index,
        throttle,
    });
    j
}

/// The queue as the first squeue saw it: job 1 running on both nodes, the others pending
/// behind it (2 first in line, 3 behind it, 5 until its begin time, the array `arr` with
/// a throttle of 2, 4 held). `run` is job 1's run time at the capture.
fn first_queue(run: i64) -> Vec<JobView> {
    let mut jobs = vec![
        ran(
            job(1, "runner", JobState::Running, Reason::None),
            T0 + 1,
            run,
            &["n1", "n2"],
        ),
        job(2, "waiter", JobState::Pending, Reason::Resources),
        job(3, "second", JobState::Pending, Reason::Priority),
    ];
    let mut later = job(5, "later", JobState::Pending, Reason::BeginTime);
    later.eligible = Some(T0 + 3600);
    jobs.push(later);
    // cosched gives each task its own id; Slurm gives the later tasks theirs when they
    // start. Until then both show one line, `6_[1-4%2]`.
    for (k, id) in [6u64, 15, 16, 17].into_iter().enumerate() {
        let mut t = array_task(
            job(id, "arr", JobState::Pending, Reason::Priority),
            6,
            k as u32 + 1,
            Some(2),
        );
        t.limit = Limit::Secs(60);
        t.command = "(null)".into();
        jobs.push(t);
    }
    let mut held = job(4, "held", JobState::Pending, Reason::JobHeldUser);
    held.held = true;
    jobs.push(held);
    jobs
}

fn render(fmt: &squeue::Format, jobs: &[JobView], expand: bool, now: i64) -> String {
    let mut out = format!("{}\n", fmt.header());
    for r in squeue::rows(jobs, expand) {
        out += &fmt.line(&r, &ctx(now));
        out.push('\n');
    }
    out
}

#[test]
fn squeue_default_and_long_formats_match_slurms_lines() {
    // Captured 5 s into job 1's run.
    let jobs = first_queue(5);
    let default = squeue::Format::short(squeue::DEFAULT).unwrap();
    assert_eq!(
        render(&default, &jobs, false, T0 + 2),
        fixture("squeue-default.txt")
    );
    let long = squeue::Format::short(squeue::LONG).unwrap();
    assert_eq!(
        render(&long, &jobs, false, T0 + 2),
        fixture("squeue-long.txt")
    );
    // `-r`: one line per array task.
    assert_eq!(
        render(&default, &jobs, true, T0 + 6),
        fixture("squeue-array.txt")
    );
    // The same default format given as -O long names (what squeue builds it from).
    let o = squeue::Format::long(
        "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,statecompact:.2 ,timeused:.10 ,numnodes:.6 ,reasonlist:0",
    )
    .unwrap();
    assert_eq!(render(&o, &jobs, true, T0 + 6), fixture("squeue-array.txt"));
}

#[test]
fn squeue_fields_by_letter_match_slurms_values() {
    let fmt = "%i|%A|%a|%F|%K|%j|%t|%T|%r|%R|%M|%l|%D|%C|%u|%U|%V|%S|%e|%L|%P|%N|%Z|%o";
    let f = squeue::Format::short(fmt).unwrap();
    let jobs = first_queue(6);
    let mut got = String::new();
    for r in squeue::rows(&jobs, true) {
        got += &f.line(&r, &ctx(T0 + 7));
        got.push('\n');
    }
    // Slurm's tasks 2-4 share the array's record, and so its job id (%A), until they start;
    // cosched gives every task its own id at submission.
    let theirs = fixture("squeue-fields.txt")
        .replace("6_2|6|", "6_2|15|")
        .replace("6_3|6|", "6_3|16|")
        .replace("6_4|6|", "6_4|17|");
    assert_eq!(got, theirs);
}

#[test]
fn squeue_of_ended_jobs_matches_slurms_lines() {
    let end = |mut j: JobView, at: i64| {
        j.end = Some(at);
        j
    };
    let cancelled = |id, name, reason| end(job(id, name, JobState::Cancelled, reason), T0 + 9);
    let mut jobs = vec![
        end(
            ran(
                job(1, "runner", JobState::Cancelled, Reason::None),
                T0 + 1,
                8,
                &["n1", "n2"],
            ),
            T0 + 9,
        ),
        cancelled(2, "waiter", Reason::Resources),
        cancelled(3, "second", Reason::Priority),
        cancelled(5, "later", Reason::BeginTime),
    ];
    for (k, id) in [6u64, 15, 16, 17].into_iter().enumerate() {
        let mut t = array_task(
            cancelled(id, "arr", Reason::Priority),
            6,
            k as u32 + 1,
            Some(2),
        );
        t.limit = Limit::Secs(60);
        jobs.push(t);
    }
    let mut killme = cancelled(13, "killme", Reason::Priority);
    killme.limit = Limit::Unlimited;
    jobs.push(killme);
    let mut held = cancelled(4, "held", Reason::JobHeldUser);
    held.held = true;
    jobs.push(held);
    let done = |id, name, nodes: &[&str], run| {
        let mut j = ran(
            job(id, name, JobState::Completed, Reason::None),
            T0 + 20,
            run,
            nodes,
        );
        j.limit = Limit::Unlimited;
        end(j, T0 + 20 + run)
    };
    jobs.push(done(7, "envjob", &["n1", "n2"], 3));
    jobs.push(array_task(done(8, "envjob", &["n1"], 3), 8, 3, None));
    jobs.push(array_task(done(9, "envjob", &["n2"], 3), 8, 5, None));
    jobs.push(done(10, "ok", &["n1"], 0));
    let mut bad = done(11, "bad", &["n2"], 0);
    (bad.state, bad.reason, bad.exit_code) = (JobState::Failed, Reason::NonZeroExitCode, Some(3));
    jobs.push(bad);
    let mut sig = done(14, "sig", &["n2"], 0);
    (sig.state, sig.reason) = (JobState::Failed, Reason::JobLaunchFailure);
    jobs.push(sig);
    let mut slow = done(12, "slow", &["n1"], 78);
    (slow.state, slow.reason, slow.limit) = (JobState::Timeout, Reason::TimeLimit, Limit::Secs(60));
    jobs.push(slow);

    let now = T0 + 200;
    let default = squeue::Format::short(squeue::DEFAULT).unwrap();
    assert_eq!(
        render(&default, &jobs, false, now),
        fixture("squeue-default-ended.txt")
    );
    let long = squeue::Format::short(squeue::LONG).unwrap();
    assert_eq!(
        render(&long, &jobs, false, now),
        fixture("squeue-long-ended.txt")
    );
}

#[test]
fn squeue_shows_suspended_and_dependent_jobs_as_slurm_does() {
    let mut susp = ran(
        job(20, "susp", JobState::Suspended, Reason::None),
        T0,
        2,
        &["n1"],
    );
    susp.limit = Limit::Unlimited;
    let mut dep = job(21, "dep", JobState::Pending, Reason::Dependency);
    dep.dependency = Some("afterok:20".into());
    let default = squeue::Format::short(squeue::DEFAULT).unwrap();
    assert_eq!(
        render(&default, &[susp, dep], false, T0 + 10),
        fixture("squeue-suspended-dependency.txt")
    );
}

/// A record's lines as `(keys, values)` per line.
fn record(text: &str) -> Vec<Vec<(String, String)>> {
    text.lines()
        .map(|l| {
            l.split_whitespace()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (k.to_string(), v.to_string())
                })
                .collect::<Vec<_>>()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

/// Keys whose values cosched cannot have as Slurm's run had them: the submitting host and
/// session, when the scheduler last looked at the job, the memory configured for the
/// loopback nodes (which cosched does not track), and Slurm's priority counter (which skips
/// held jobs; cosched's follows the job id).
const OWN_VALUES: [&str; 4] = ["AllocNode:Sid", "LastSchedEval", "TRES", "Priority"];

/// Compares a `scontrol show job` record with Slurm's: the same keys on the same lines in
/// the same order, the same values but for [`OWN_VALUES`], and the same layout.
fn same_record(ours: &str, theirs: &str) {
    let (a, b) = (record(ours), record(theirs));
    assert_eq!(a.len(), b.len(), "lines:\n{ours}\n---\n{theirs}");
    for (la, lb) in a.iter().zip(&b) {
        let keys = |l: &[(String, String)]| l.iter().map(|kv| kv.0.clone()).collect::<Vec<_>>();
        assert_eq!(keys(la), keys(lb), "keys of a line");
        for ((k, va), (_, vb)) in la.iter().zip(lb) {
            if !OWN_VALUES.contains(&k.as_str()) {
                assert_eq!(va, vb, "{k}:\n{ours}\n---\n{theirs}");
            }
        }
    }
    // Every line after the first indented by three spaces; the record closed the same way
    // (a job's with an indented empty line and a blank line, others with a blank line).
    let end = |s: &str| s[s.trim_end().len()..].to_string();
    assert_eq!(end(ours), end(theirs));
    assert!(
        ours.lines()
            .skip(1)
            .filter(|l| !l.is_empty())
            .all(|l| l.starts_with("   "))
    );
}

#[test]
fn scontrol_show_job_matches_slurms_records() {
    let jobs = first_queue(5);
    let running = &jobs[0];
    same_record(
        &scontrol::show_job(running, &ctx(T0 + 6), false),
        &fixture("scontrol-job-1.txt"),
    );
    let pending = &jobs[1];
    same_record(
        &scontrol::show_job(pending, &ctx(T0 + 6), false),
        &fixture("scontrol-job-2.txt"),
    );
    let later = jobs.iter().find(|j| j.id == 5).unwrap();
    same_record(
        &scontrol::show_job(later, &ctx(T0 + 6), false),
        &fixture("scontrol-job-5.txt"),
    );

    // Ended: failed with exit code 3, and timed out (Slurm's ExitCode 0:15: killed by
    // SIGTERM at the limit).
    let t = T0 + 32;
    let mut bad = ran(
        job(11, "bad", JobState::Failed, Reason::NonZeroExitCode),
        t,
        0,
        &["n2"],
    );
    (bad.submit, bad.eligible, bad.end, bad.exit_code) = (t, Some(t), Some(t), Some(3));
    (bad.limit, bad.command) = (Limit::Unlimited, "(null)".into());
    same_record(
        &scontrol::show_job(&bad, &ctx(t + 100), false),
        &fixture("scontrol-job-11-end.txt"),
    );
    let mut slow = ran(
        job(12, "slow", JobState::Timeout, Reason::TimeLimit),
        t + 3,
        78,
        &["n1"],
    );
    (slow.submit, slow.eligible, slow.end) = (t, Some(t), Some(t + 81));
    (slow.limit, slow.command, slow.exit_code, slow.signal) =
        (Limit::Secs(60), "(null)".into(), Some(0), Some(15));
    same_record(
        &scontrol::show_job(&slow, &ctx(t + 100), false),
        &fixture("scontrol-job-12-end.txt"),
    );

    // Pending on a dependency: never eligible yet.
    let s = T0 + 167;
    let mut dep = job(21, "dep", JobState::Pending, Reason::Dependency);
    (dep.submit, dep.eligible, dep.limit) = (s, None, Limit::Unlimited);
    (dep.dependency, dep.command) = (Some("afterok:20".into()), "(null)".into());
    same_record(
        &scontrol::show_job(&dep, &ctx(s + 1), false),
        &fixture("scontrol-job-dependency.txt"),
    );

    // One line per record with -o.
    let one = scontrol::show_job(running, &ctx(T0 + 6), true);
    assert_eq!(one.lines().count(), 1);
    assert!(one.starts_with("JobId=1 JobName=runner UserId=root(0) "));
}

#[test]
fn scontrol_show_node_and_partition_carry_slurms_keys() {
    let n1 = NodeView {
        name: "n1".into(),
        state: NodeState::Allocated,
        cpus: 1,
        alloc_cpus: 1,
        addr: "127.0.0.1".into(),
        partitions: vec!["all".into()],
    };
    let ours = record(&scontrol::show_node(&n1, false));
    let theirs = record(&fixture("scontrol-node-n1-alloc.txt"));
    let flat = |r: &[Vec<(String, String)>]| r.concat();
    for key in [
        "NodeName",
        "CPUAlloc",
        "CPUEfctv",
        "CPUTot",
        "NodeAddr",
        "State",
        "Partitions",
        "AllocTRES",
    ] {
        let get = |r: &[(String, String)]| r.iter().find(|kv| kv.0 == key).cloned();
        assert_eq!(get(&flat(&ours)), get(&flat(&theirs)), "{key}");
    }
    let (parts, _) = loop_nodes([NodeState::Allocated, NodeState::Idle]);
    // Slurm's loopback partition had memory configured; cosched tracks none.
    let ours = scontrol::show_partition(&parts[0], false)
        .replace("TRES=cpu=2,node=2", "TRES=cpu=2,mem=200M,node=2");
    same_record(&ours, &fixture("scontrol-partition.txt"));
}

fn loop_nodes(states: [NodeState; 2]) -> (Vec<PartitionView>, Vec<NodeView>) {
    let nodes: Vec<NodeView> = ["n1", "n2"]
        .iter()
        .zip(states)
        .map(|(n, state)| NodeView {
            name: n.to_string(),
            state,
            cpus: 1,
            alloc_cpus: u32::from(state == NodeState::Allocated),
            addr: "127.0.0.1".into(),
            partitions: vec!["all".into()],
        })
        .collect();
    let parts = vec![PartitionView {
        name: "all".into(),
        default: true,
        up: true,
        max_time_secs: None,
        nodes: vec!["n1".into(), "n2".into()],
        total_cpus: 2,
    }];
    (parts, nodes)
}

fn sinfo_text(fmt: &str, per_node: bool, parts: &[PartitionView], nodes: &[NodeView]) -> String {
    let f = sinfo::Format::default_of(fmt, per_node);
    let rows = sinfo::rows(parts, nodes, per_node);
    sinfo::render(&f, &rows, false)
        .into_iter()
        .map(|l| l + "\n")
        .collect()
}

#[test]
fn sinfo_default_and_per_node_formats_match_slurms_lines() {
    let (parts, nodes) = loop_nodes([NodeState::Idle, NodeState::Idle]);
    assert_eq!(
        sinfo_text(sinfo::DEFAULT, false, &parts, &nodes),
        fixture("sinfo-idle.txt")
    );
    assert_eq!(
        sinfo_text(sinfo::NODES, true, &parts, &nodes),
        fixture("sinfo-N-idle.txt")
    );
    // n2 was set down by Slurm's administrator (it still answered); a cosched node is down
    // when it stopped answering, which Slurm marks `*` (not responding).
    let (parts, nodes) = loop_nodes([NodeState::Allocated, NodeState::Down]);
    assert_eq!(
        sinfo_text(sinfo::DEFAULT, false, &parts, &nodes),
        fixture("sinfo-default.txt").replace("  down n2", " down* n2")
    );
    assert_eq!(
        sinfo_text(sinfo::NODES, true, &parts, &nodes),
        fixture("sinfo-N.txt").replace("down  ", "down* ")
    );
}

/// `KEY=VALUE` lines of an env capture (a `N: ` label of `srun -l` removed).
fn env_of(text: &str, label: Option<&str>) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| match label {
            Some(p) => l.strip_prefix(p),
            None => Some(l),
        })
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Variables Slurm sets that describe Slurm itself (its configuration, its daemons'
/// ports, the task's pid) and that cosched does not set.
const SLURM_OWN: &[&str] = &[
    "SLURM_CONF",
    "SLURM_TASK_PID",
    "SLURM_PRIO_PROCESS",
    "SLURM_WORKING_CLUSTER",
    "SLURM_NODE_ALIASES",
    "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0",
    "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_UMASK",
    "SLURM_LABELIO",
    "SLURM_DISTRIBUTION",
];

/// Compares cosched's variables with Slurm's but for [`SLURM_OWN`] and `ours_only`, which
/// cosched sets where that Slurm run did not.
fn same_env(mut ours: Vec<(String, String)>, theirs: Vec<(String, String)>, ours_only: &[&str]) {
    ours.sort();
    ours.retain(|(k, _)| !ours_only.contains(&k.as_str()));
    let theirs: Vec<_> = theirs
        .into_iter()
        .filter(|(k, _)| !SLURM_OWN.contains(&k.as_str()))
        .collect();
    assert_eq!(ours, theirs);
}

fn loop_submission(array: Option<Vec<u32>>, per_node: Option<u32>) -> Submission {
    Submission {
        submit_dir: WORK.into(),
        submit_host: "vm".into(),
        cluster: "loop".into(),
        partition: "all".into(),
        user: "root".into(),
        uid: 0,
        gid: 0,
        cpus_per_task: None,
        ntasks_per_node: per_node,
        array,
    }
}

#[test]
fn slurm_environment_matches_a_batch_script_and_a_step_of_slurms() {
    // `sbatch -N 2 --ntasks-per-node=1 env.sh` (job 7): the batch script on n1, then
    // `srun -l env` in it.
    let nodes = [("n1".to_string(), 1), ("n2".to_string(), 1)];
    let alloc = Allocation {
        job_id: 7,
        name: "envjob",
        array: None,
        nodes: &nodes,
        cpus: &[1, 1],
    };
    let common = [
        env::submit_env(&loop_submission(None, Some(1))),
        env::allocation_env(&alloc),
    ]
    .concat();
    let batch = env::task_env(&Task {
        step: StepKind::Batch,
        rank: 0,
        layout: &nodes[..1],
    });
    same_env(
        [common.clone(), batch].concat(),
        env_of(&fixture("env-batch-N2.txt"), None),
        &[],
    );
    for rank in 0..2 {
        let task = env::task_env(&Task {
            step: StepKind::Step(0),
            rank,
            layout: &nodes,
        });
        // A step's variables are set over the allocation's (srun's SLURM_NTASKS, ...).
        let mut env = common.clone();
        env.retain(|(k, _)| !task.iter().any(|(t, _)| t == k));
        env.extend(task);
        same_env(
            env,
            env_of(&fixture("env-step-N2.txt"), Some(&format!("{rank}: "))),
            &[],
        );
    }

    // `sbatch --array=3-5:2 -N1 env.sh`: task 3 (job 9) ran on n1.
    let one = [("n1".to_string(), 1)];
    let alloc = Allocation {
        job_id: 9,
        name: "envjob",
        array: Some((8, 3)),
        nodes: &one,
        cpus: &[1],
    };
    let batch = env::task_env(&Task {
        step: StepKind::Batch,
        rank: 0,
        layout: &one,
    });
    same_env(
        [
            env::submit_env(&loop_submission(Some(vec![3, 5]), None)),
            env::allocation_env(&alloc),
            batch,
        ]
        .concat(),
        env_of(&fixture("env-batch-array.txt"), None),
        // Slurm sets the task count only when one was asked for (-n, or -N with
        // --ntasks-per-node); cosched always does, as scripts read it.
        &["SLURM_NTASKS", "SLURM_NPROCS"],
    );
}

#[test]
fn sacct_table_and_parsable_forms_follow_slurms_printing() {
    let jobs = first_queue(5);
    let c = ctx(T0 + 6);
    let cols = sacct::columns(sacct::DEFAULT_FIELDS).unwrap();
    let head = sacct::header(&cols, sacct::Style::Table, "|");
    // Widths 12 (JobID, left), 10, 10, 10, 10, 10, 8; a space after every field.
    assert_eq!(
        head,
        [
            "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
            "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
        ]
    );
    assert_eq!(
        sacct::line(&cols, &jobs[0], &c, sacct::Style::Table, "|"),
        "1                runner        all                     2    RUNNING      0:0 "
    );
    // A pending array task: no CPUs allocated yet.
    let task = jobs.iter().find(|j| j.id == 15).unwrap();
    assert_eq!(
        sacct::line(&cols, task, &c, sacct::Style::Table, "|"),
        "6_2                 arr        all                     0    PENDING      0:0 "
    );
    // What submitit and workflow tools parse: -P (no trailing delimiter) and -p.
    let cols = sacct::columns("JobID,State,ExitCode").unwrap();
    assert_eq!(
        sacct::header(&cols, sacct::Style::Parsable2, "|"),
        ["JobID|State|ExitCode"]
    );
    assert_eq!(
        sacct::line(&cols, &jobs[0], &c, sacct::Style::Parsable2, "|"),
        "1|RUNNING|0:0"
    );
    assert_eq!(
        sacct::line(&cols, &jobs[0], &c, sacct::Style::Parsable, "|"),
        "1|RUNNING|0:0|"
    );
    // Field names: any case, a prefix, a width; unknown ones refused by name.
    let cols = sacct::columns("jobid%5,jobname%-4,elapsed,start,end,nodel").unwrap();
    assert_eq!(
        sacct::header(&cols, sacct::Style::Table, "|")[0],
        "JobID JobN    Elapsed               Start                 End        NodeList "
    );
    let mut long = jobs[0].clone();
    long.name = "a-long-name".into();
    assert_eq!(
        sacct::line(&cols, &long, &c, sacct::Style::Table, "|"),
        "    1 a-l+   00:00:05 2026-11-27T10:16:16             Unknown          n[1-2] "
    );
    assert_eq!(
        sacct::columns("JobID,Bogus").unwrap_err().to_string(),
        "Invalid field requested: \"Bogus\""
    );
}

/// docs/slurm.md shows the option table as `cosched slurm options` prints it: the one
/// table, not a copy kept by hand.
#[test]
fn docs_slurm_md_lists_every_option_as_the_table_says() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/slurm.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = "<!-- the option table: `cosched slurm options` -->\n";
    let end = "<!-- end of the option table -->";
    let from = doc.find(start).expect("the table's start marker") + start.len();
    let to = doc[from..].find(end).expect("the table's end marker") + from;
    assert_eq!(
        &doc[from..to],
        cosched_slurm::options::markdown(),
        "docs/slurm.md's option table differs from the table: paste `cosched slurm options` between the markers"
    );
}
