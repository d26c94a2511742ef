//! Allocations and job steps on a loopback cluster, as Slurm's users and launchers use
//! them: a batch script runs once, on its allocation's first node, and `srun` in it starts
//! steps on the allocation's PEs (MPICH's ranks through PMI, Open MPI's `mpirun` through
//! `srun` of its daemons); `sacct` shows `N`, `N.batch`, `N.0`, ….

mod support;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::cluster::Cluster;
use support::*;

/// A loopback cluster of `nodes` × 2 PEs and a submit directory.
struct Site {
    c: Cluster,
    work: PathBuf,
}

impl Site {
    fn up(name: &str, nodes: &str) -> Site {
        let c = Cluster::up("steps", name, &["--nodes", nodes, "--pes", "2"]);
        let work = c.dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        Site {
            work: work.canonicalize().unwrap(),
            c,
        }
    }

    fn slurm(&self, cmd: &str, args: &[&str]) -> Output {
        Command::new(bin())
            .arg("slurm")
            .arg(cmd)
            .args(args)
            .current_dir(&self.work)
            .env("COSCHED_STATE_DIR", &self.c.dir)
            .env_remove("COSCHED_SLURM_STRICT")
            .env_remove("SLURM_JOB_ID")
            .env_remove("SLURM_JOBID")
            .output()
            .expect("cosched runs")
    }

    fn ok(&self, cmd: &str, args: &[&str]) -> String {
        let out = self.slurm(cmd, args);
        assert!(
            out.status.success(),
            "{cmd} {args:?} failed ({}): {}{}\n--- mm log ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.c.mm_log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Submits `script` with sbatch and waits for the job's end; its output file.
    fn run(&self, script: &str, secs: u64) -> (u64, String) {
        self.write("job.sh", script);
        let id: u64 = self
            .ok("sbatch", &["--parsable", "job.sh"])
            .trim()
            .parse()
            .unwrap();
        let start = Instant::now();
        while !self
            .ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T"])
            .trim()
            .is_empty()
        {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "job {id} still running after {secs} s; its output so far:\n{}\n--- mm log ---\n{}",
                std::fs::read_to_string(self.work.join(format!("slurm-{id}.out")))
                    .unwrap_or_default(),
                self.c.mm_log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = std::fs::read_to_string(self.work.join(format!("slurm-{id}.out")))
            .unwrap_or_default();
        (id, out)
    }

    /// `sacct -j ID -P -n --format=...`.
    fn sacct(&self, id: u64, format: &str) -> String {
        self.ok(
            "sacct",
            &["-j", &id.to_string(), "-P", "-n", &format!("--format={format}")],
        )
    }
}

/// The lines of `text` that begin with `prefix`, sorted.
fn lines_with(text: &str, prefix: &str) -> Vec<String> {
    let mut l: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(String::from)
        .collect();
    l.sort();
    l
}

#[test]
fn srun_in_a_batch_script_starts_steps_and_the_script_runs_once() {
    let s = Site::up("batch", "2");
    let script = "#!/bin/sh\n\
        #SBATCH -n 4\n\
        echo \"script on $SLURM_JOB_NUM_NODES nodes, $SLURM_NTASKS tasks ($SLURM_TASKS_PER_NODE)\"\n\
        srun sh -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS step $SLURM_STEP_ID local $SLURM_LOCALID\"'\n\
        srun -n 1 --label sh -c 'echo labelled; exit 3'; echo \"srun exited $?\"\n";
    let (id, out) = s.run(script, 120);
    assert_eq!(
        lines_with(&out, "script"),
        ["script on 2 nodes, 4 tasks (2(x2))"],
        "the script ran once:\n{out}"
    );
    assert_eq!(
        lines_with(&out, "task"),
        [
            "task 0 of 4 step 0 local 0",
            "task 1 of 4 step 0 local 1",
            "task 2 of 4 step 0 local 0",
            "task 3 of 4 step 0 local 1",
        ],
        "{out}"
    );
    assert!(out.contains("0: labelled\n"), "{out}");
    assert!(out.contains("srun exited 3\n"), "{out}");
    assert_eq!(
        s.sacct(id, "JobID,JobName,State,ExitCode,NTasks"),
        format!(
            "{id}|job.sh|COMPLETED|0:0|\n{id}.batch|batch|COMPLETED|0:0|1\n{id}.0|sh|COMPLETED|0:0|4\n{id}.1|sh|FAILED|3:0|1\n"
        )
    );
    assert_eq!(
        s.ok("sacct", &["-j", &id.to_string(), "-X", "-P", "-n", "--format=JobID"]),
        format!("{id}\n")
    );
}
