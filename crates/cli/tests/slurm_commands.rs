//! Slurm's commands on a loopback cluster, as the tools that drive Slurm use them
//! (submitit, Snakemake, Nextflow): `sbatch --parsable`, polling `squeue -h -j N -o %T` and
//! `sacct -j N -P -n --format=JobID,State,ExitCode`, `scancel`; scripts with directives
//! cosched ignores (one warning each, refused in strict mode); `scontrol show job` and hold
//! and release; arrays with `%A`/`%a` and `SLURM_ARRAY_*`; `--wait`; the commands under
//! their own names through `cosched slurm install-links`.

mod support;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::slurm_site::Site;

impl Site {
    /// Polls `squeue -h -j ID -o %T` until it prints nothing (the job left the live
    /// states), collecting the states it printed; at most `secs` (generous: a loaded
    /// machine).
    fn poll_squeue(&self, id: u64, secs: u64) -> Vec<String> {
        let start = Instant::now();
        let mut seen: Vec<String> = Vec::new();
        loop {
            let out = self.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T"]);
            let state = out.trim().to_string();
            if state.is_empty() {
                return seen;
            }
            if seen.last() != Some(&state) {
                seen.push(state);
            }
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "job {id} still {seen:?} after {secs} s\n--- mm log ---\n{}",
                self.c.mm_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn submitit_style_polling_sees_slurms_states_and_exit_codes() {
    let s = Site::up("slurm", "poll", 2);
    s.write(
        "fails.sh",
        "#!/bin/sh\n#SBATCH --job-name=fails\necho out; echo err >&2; sleep 1; exit 3\n",
    );
    let id = s.sbatch(&["fails.sh"]);
    let states = s.poll_squeue(id, 60);
    assert!(
        states.iter().all(|st| st == "PENDING" || st == "RUNNING"),
        "squeue -o %T printed {states:?}"
    );
    assert_eq!(
        s.sacct(id, "JobID,State,ExitCode"),
        format!("{id}|FAILED|3:0\n{id}.batch|FAILED|3:0\n")
    );
    // Slurm's default output file, in the submit directory, standard error with it.
    assert_eq!(read(&s.work.join(format!("slurm-{id}.out"))), "out\nerr\n");

    // Plain sbatch says "Submitted batch job N", as tools parse it.
    s.write("ok.sh", "#!/bin/sh\ntrue\n");
    let out = s.ok("sbatch", &["ok.sh"]);
    let ok: u64 = out
        .strip_prefix("Submitted batch job ")
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("sbatch printed {out:?}"));
    s.poll_squeue(ok, 60);
    assert_eq!(
        s.sacct(ok, "JobID,State,ExitCode"),
        format!("{ok}|COMPLETED|0:0\n{ok}.batch|COMPLETED|0:0\n")
    );

    // scancel of a running job: CANCELLED, killed by SIGTERM as Slurm reports it.
    let long = s.sbatch(&["--wrap", "sleep 300"]);
    let start = Instant::now();
    while s
        .ok("squeue", &["-h", "-j", &long.to_string(), "-o", "%t"])
        .trim()
        != "R"
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "job {long} never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    s.ok("scancel", &[&long.to_string()]);
    s.poll_squeue(long, 60);
    assert_eq!(
        s.sacct(long, "JobID,State,ExitCode"),
        format!("{long}|CANCELLED|0:15\n{long}.batch|CANCELLED|0:15\n")
    );
    // scancel of a job that has ended is not an error, as in Slurm.
    s.ok("scancel", &[&long.to_string()]);

    // squeue of an unknown job: Slurm's message and status.
    let out = s.slurm("squeue", &["-j", "999"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Invalid job id specified"),
        "{}",
        stderr(&out)
    );
    // -t all lists ended jobs in squeue's default format.
    let all = s.ok("squeue", &["-t", "all"]);
    assert!(all.starts_with(
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
    ));
    let failed = all
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id.to_string().as_str()))
        .unwrap_or_else(|| panic!("job {id} in {all}"));
    let f: Vec<&str> = failed.split_whitespace().collect();
    assert_eq!(
        (f[1], f[2], f[4], f[7]),
        ("all", "fails", "F", "(NonZeroExitCode)"),
        "{failed}"
    );
}

#[test]
fn a_script_with_directives_cosched_ignores_runs_with_one_warning_each() {
    let s = Site::up("slurm", "directives", 2);
    s.write(
        "site.sh",
        "#!/bin/bash\n#SBATCH --partition=all\n#SBATCH --mem=1G\n#SBATCH -A proj --qos=normal\n\
         #SBATCH --mail-type=END,FAIL --mail-user=me@example.org\n#SBATCH --gres=gpu:1\n\
         #SBATCH --exclusive --requeue --signal=B:USR1@60\n#SBATCH --chdir=sub\n\
         #SBATCH -o out-%x-%j.txt -J site\npwd\n",
    );
    std::fs::create_dir_all(s.work.join("sub")).unwrap();
    let out = s.slurm("sbatch", &["--parsable", "site.sh"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let warnings: Vec<String> = stderr(&out).lines().map(str::to_string).collect();
    for opt in [
        "--account",
        "--qos",
        "--mail-type",
        "--mail-user",
        "--gres",
        "--requeue",
    ] {
        assert_eq!(
            warnings
                .iter()
                .filter(|w| w.contains(&format!("warning: {opt}")))
                .count(),
            1,
            "one warning for {opt}: {warnings:#?}"
        );
    }
    // --signal is honoured: no warning.
    assert_eq!(warnings.len(), 6, "{warnings:#?}");
    s.poll_squeue(id, 60);
    assert_eq!(
        s.sacct(id, "JobID,State,ExitCode"),
        format!("{id}|COMPLETED|0:0\n{id}.batch|COMPLETED|0:0\n")
    );
    // --chdir: the job ran in sub/, its relative output file went there, named by %x and %j.
    let text = read(&s.work.join(format!("sub/out-site-{id}.txt")));
    assert_eq!(text.trim(), s.work.join("sub").display().to_string());

    // Strict mode refuses the first ignored option, with the reason; nothing is submitted.
    let before = s.ok("squeue", &["-h", "-t", "all"]).lines().count();
    let out = s.slurm("sbatch", &["--strict", "site.sh"]);
    assert_eq!(out.status.code(), Some(1));
    // --partition (`all`, the one partition of a cluster without a configuration),
    // --exclusive and --mem are honoured, so strict mode passes them; --account is the
    // first it refuses.
    assert!(
        stderr(&out).contains("site.sh:4: --account is ignored here"),
        "{}",
        stderr(&out)
    );
    let out = s.slurm_env("sbatch", &["site.sh"], &[("COSCHED_SLURM_STRICT", "1")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(s.ok("squeue", &["-h", "-t", "all"]).lines().count(), before);

    // An option no Slurm has: getopt's message and Slurm's status.
    let out = s.slurm("sbatch", &["--bogus", "site.sh"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(stderr(&out).contains("unrecognized option '--bogus'"));
    // -N 2 --ntasks-per-node=1 is honoured (slurm_steps.rs checks where the ranks go): no
    // warning; a spread the machine cannot give is refused at submission, saying why.
    s.write(
        "two.sh",
        "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=1\necho $SLURM_NTASKS\n",
    );
    let out = s.slurm("sbatch", &["two.sh"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("spread"), "{}", stderr(&out));
    s.write(
        "three.sh",
        "#!/bin/sh\n#SBATCH -N 3 --ntasks-per-node=1\necho $SLURM_NTASKS\n",
    );
    let out = s.slurm("sbatch", &["three.sh"]);
    assert!(!out.status.success(), "3 nodes of 2 were accepted");
    assert!(stderr(&out).contains("3 nodes"), "{}", stderr(&out));
}

#[test]
fn scontrol_shows_jobs_in_slurms_records_and_holds_and_releases_them() {
    let s = Site::up("slurm", "scontrol", 2);
    let id = s.sbatch(&["--hold", "-J", "waits", "-t", "10", "--wrap", "echo done"]);
    let line = s.ok("squeue", &["-h", "-j", &id.to_string()]);
    assert!(
        line.contains("(JobHeldUser)") && line.contains(" PD "),
        "{line}"
    );
    let rec = s.ok("scontrol", &["show", "job", &id.to_string()]);
    let first: Vec<&str> = rec.lines().take(6).collect();
    assert_eq!(first[0], format!("JobId={id} JobName=waits"));
    assert_eq!(
        first[3],
        "   JobState=PENDING Reason=JobHeldUser Dependency=(null)"
    );
    assert_eq!(
        first[5],
        "   RunTime=00:00:00 TimeLimit=00:10:00 TimeMin=N/A"
    );
    assert!(rec.ends_with("   Power=\n   \n\n"), "{rec}");
    // One line with -o.
    let one = s.ok("scontrol", &["-o", "show", "job", &id.to_string()]);
    assert_eq!(one.lines().count(), 1);
    s.ok("scontrol", &["release", &id.to_string()]);
    s.poll_squeue(id, 60);
    assert_eq!(
        s.sacct(id, "JobID,State,ExitCode"),
        format!("{id}|COMPLETED|0:0\n{id}.batch|COMPLETED|0:0\n")
    );
    assert_eq!(read(&s.work.join(format!("slurm-{id}.out"))), "done\n");
    let rec = s.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(
        rec.contains("   JobState=COMPLETED Reason=None Dependency=(null)\n"),
        "{rec}"
    );
    assert!(
        rec.contains(&format!("   StdOut={}/slurm-{id}.out\n", s.work.display())),
        "{rec}"
    );

    // Nodes, partition, hostlists.
    let node = s.ok("scontrol", &["show", "node", "n1"]);
    assert!(node.starts_with("NodeName=n1 "), "{node}");
    let part = s.ok("scontrol", &["show", "partition"]);
    assert!(
        part.starts_with("PartitionName=all\n") && part.contains(" Nodes=n[0-1]\n"),
        "{part}"
    );
    assert_eq!(
        s.ok("scontrol", &["show", "hostnames", "n[0-1],x"]),
        "n0\nn1\nx\n"
    );
    assert_eq!(
        s.ok("scontrol", &["show", "hostlist", "n0,n1,n2"]),
        "n[0-2]\n"
    );
    assert_eq!(
        s.ok("sinfo", &[]),
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\nall*         up   infinite      2   idle n[0-1]\n"
    );
    let out = s.slurm("scontrol", &["show", "job", "999"]);
    assert_eq!(out.status.code(), Some(1));
    let out = s.slurm("scontrol", &["requeue", &id.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("requeue"), "{}", stderr(&out));
}

#[test]
fn array_tasks_agree_on_percent_a_and_slurm_array_task_id_and_wait_returns_the_exit_code() {
    let s = Site::up("slurm", "array", 2);
    s.write(
        "arr.sh",
        "#!/bin/sh\n#SBATCH --array=1-3\n#SBATCH -o arr-%A_%a-%x.out\n\
         echo \"$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX $SLURM_JOB_NAME $SLURM_SUBMIT_DIR $SLURM_JOB_NODELIST $SLURM_TASKS_PER_NODE\"\n\
         exit $SLURM_ARRAY_TASK_ID\n",
    );
    let out = s.slurm("sbatch", &["--wait", "arr.sh"]);
    let first: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("Submitted batch job ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    // The highest exit code of the tasks, as Slurm's --wait.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    for i in 1..=3 {
        let text = read(&s.work.join(format!("arr-{first}_{i}-arr.sh.out")));
        let f: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            &f[..6],
            [&first.to_string(), &i.to_string(), "3", "1", "3", "arr.sh"]
        );
        assert_eq!(f[6], s.work.display().to_string());
        assert!(f[7] == "n0" || f[7] == "n1", "{text}");
        assert_eq!(f[8], "1");
    }
    // sacct -j of the array: every task, as N_M, and its batch step.
    let lines = s.sacct(first, "JobID,State,ExitCode");
    assert_eq!(
        lines,
        format!(
            "{first}_1|FAILED|1:0\n{first}_1.batch|FAILED|1:0\n{first}_2|FAILED|2:0\n{first}_2.batch|FAILED|2:0\n{first}_3|FAILED|3:0\n{first}_3.batch|FAILED|3:0\n"
        )
    );
}

#[test]
fn the_commands_answer_to_their_own_names_through_links() {
    let s = Site::up("slurm", "links", 2);
    let bin_dir = s.c.dir.join("bin");
    let out =
        s.c.run(&["slurm", "install-links", bin_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = |name: &str, args: &[&str]| {
        Command::new(bin_dir.join(name))
            .args(args)
            .current_dir(&s.work)
            .env("COSCHED_STATE_DIR", &s.c.dir)
            .output()
            .unwrap()
    };
    let v = run("squeue", &["--version"]);
    assert_eq!(String::from_utf8_lossy(&v.stdout), "slurm 22.05.8\n");
    s.write("j.sh", "#!/bin/sh\necho hi\n");
    let out = run("sbatch", &["--parsable", "j.sh"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    s.poll_squeue(id.parse().unwrap(), 60);
    let acct = run(
        "sacct",
        &["-j", &id, "-P", "-n", "-o", "JobID,JobName,State"],
    );
    assert_eq!(
        String::from_utf8_lossy(&acct.stdout),
        format!("{id}|j.sh|COMPLETED\n{id}.batch|batch|COMPLETED\n")
    );
    // srun outside an allocation: one of its own, with one step, from the terminal.
    let out = run("srun", &["-n", "2", "--label", "echo", "from srun"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines, ["0: from srun", "1: from srun"]);
    // A second install keeps the links.
    let again =
        s.c.run(&["slurm", "install-links", bin_dir.to_str().unwrap()]);
    assert!(again.status.success(), "{}", stderr(&again));
}
