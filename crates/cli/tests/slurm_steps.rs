//! Allocations and job steps on a loopback cluster, as Slurm's users and launchers use
//! them: a batch script runs once, on its allocation's first node, and `srun` in it starts
//! steps on the allocation's PEs (MPICH's ranks through PMI, Open MPI's `mpirun` through
//! `srun` of its daemons); `sacct` shows `N`, `N.batch`, `N.0`, ….

mod support;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::slurm_site::Site;
use support::*;

impl Site {
    /// A `PATH` whose first directory holds the links named after Slurm's commands
    /// (`cosched slurm install-links`), as a user who drives the cluster through them has.
    fn links_on_path(&self) -> String {
        let bin_dir = self.c.dir.join("bin");
        let out = Command::new(bin())
            .args(["slurm", "install-links", bin_dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `sacct -j ID -X -P -n --format=FORMAT`: the allocation's line alone.
    fn sacct_alloc(&self, id: u64, format: &str) -> String {
        let format = format!("--format={format}");
        self.ok("sacct", &["-j", &id.to_string(), "-X", "-P", "-n", &format])
    }

    /// Submits `script` with sbatch and waits for the job's end; its output file.
    fn run(&self, script: &str, secs: u64) -> (u64, String) {
        self.write("job.sh", script);
        let id = self.sbatch(&["job.sh"]);
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
        let out =
            std::fs::read_to_string(self.work.join(format!("slurm-{id}.out"))).unwrap_or_default();
        (id, out)
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
    let s = Site::up("steps", "batch", 2);
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
        s.ok(
            "sacct",
            &["-j", &id.to_string(), "-X", "-P", "-n", "--format=JobID"]
        ),
        format!("{id}\n")
    );
}

#[test]
fn two_nodes_one_task_each_puts_one_rank_on_each_of_two_nodes_and_node_lists_hold() {
    let s = Site::up("steps", "spread", 3);
    // A one-task job first holds a PE of n0: counting PEs alone, both ranks of the next job
    // would land on n0's other PE and n1 would get nothing.
    s.write("hold.sh", "#!/bin/sh\nsleep 30\n");
    let holder = s.ok("sbatch", &["--parsable", "-n", "1", "hold.sh"]);
    let script = "#!/bin/sh\n\
        #SBATCH -N 2 --ntasks-per-node=1\n\
        echo \"nodes $SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST\"\n\
        srun sh -c 'echo \"rank $SLURM_PROCID node $SLURM_NODEID\"'\n";
    let (_, out) = s.run(script, 120);
    assert_eq!(lines_with(&out, "nodes"), ["nodes 2 n[0-1]"], "{out}");
    assert_eq!(
        lines_with(&out, "rank"),
        ["rank 0 node 0", "rank 1 node 1"],
        "{out}"
    );
    // --nodelist takes n2, --exclude keeps the job off n0 (where a PE is free).
    let script = "#!/bin/sh\n\
        #SBATCH -N 2 -n 2 --nodelist=n2 --exclude=n0\n\
        echo \"nodes $SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST\"\n";
    let (_, out) = s.run(script, 120);
    assert_eq!(lines_with(&out, "nodes"), ["nodes 2 n[1-2]"], "{out}");
    s.ok("scancel", &[holder.trim()]);
    // Never possible here: refused at submission, saying why.
    s.write("big.sh", "#!/bin/sh\n#SBATCH -N 4\ntrue\n");
    let out = s.slurm("sbatch", &["big.sh"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("needs 4 nodes; the machine has 3"), "{err}");
    let out = s.slurm("sbatch", &["-n", "1", "-w", "n9", "big.sh"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown node n9"), "{err}");
}

#[test]
fn cpus_per_task_gives_each_task_its_pes_on_one_node_and_pins_it_to_them() {
    let s = Site::up("steps", "cpus", 2);
    // Each task is pinned to the CPUs of its two PEs (fewer on a host with one CPU).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let script = "#!/bin/sh\n\
        #SBATCH -n 2 -c 2\n\
        echo \"alloc $SLURM_NTASKS $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE $SLURM_CPUS_PER_TASK\"\n\
        srun sh -c 'echo \"task $SLURM_PROCID on $SLURMD_NODENAME c=$SLURM_CPUS_PER_TASK cpus $(nproc)\"'\n";
    let (_, out) = s.run(script, 120);
    assert_eq!(
        lines_with(&out, "alloc"),
        ["alloc 2 1(x2) 2(x2) 2"],
        "{out}"
    );
    assert_eq!(
        lines_with(&out, "task"),
        [
            format!("task 0 on n0 c=2 cpus {cpus}"),
            format!("task 1 on n1 c=2 cpus {cpus}")
        ],
        "{out}"
    );
    // Outside an allocation: the job's own ranks hold two PEs each.
    let out = s.slurm(
        "srun",
        &[
            "-n",
            "2",
            "-c",
            "2",
            "sh",
            "-c",
            "echo \"task $SLURM_PROCID on $SLURMD_NODENAME c=$SLURM_CPUS_PER_TASK cpus $(nproc)\"",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines_with(&stdout, "task"),
        [
            format!("task 0 on n0 c=2 cpus {cpus}"),
            format!("task 1 on n1 c=2 cpus {cpus}")
        ],
        "{stdout}"
    );
    // A task larger than a node is refused at submission.
    s.write("wide.sh", "#!/bin/sh\n#SBATCH -n 1 -c 3\ntrue\n");
    let out = s.slurm("sbatch", &["wide.sh"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--cpus-per-task=3: a node has 2 PEs"), "{err}");
}

#[test]
fn exclusive_gives_srun_and_submit_whole_nodes_and_steps_spread_as_the_tasks_asked() {
    let s = Site::up("steps", "whole", 2);
    // srun outside an allocation: an allocation of whole nodes and its step, whose ranks
    // are the tasks asked (one on each node), not one to every PE.
    let out = s.slurm(
        "srun",
        &[
            "--exclusive",
            "-N",
            "2",
            "-n",
            "2",
            "sh",
            "-c",
            "echo \"task $SLURM_PROCID on $SLURMD_NODENAME of $SLURM_NTASKS: $SLURM_TASKS_PER_NODE tasks, $SLURM_JOB_CPUS_PER_NODE cpus\"",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines_with(&stdout, "task"),
        [
            "task 0 on n0 of 2: 1(x2) tasks, 2(x2) cpus",
            "task 1 on n1 of 2: 1(x2) tasks, 2(x2) cpus"
        ],
        "{stdout}"
    );
    // cosched submit --exclusive: one task on a whole node.
    let id = s.c.submit(&["--exclusive", "-n", "1", "--", "true"]);
    s.c.ended(id, 120);
    assert_eq!(
        s.sacct_alloc(id, "AllocCPUS,NNodes,State"),
        "2|1|COMPLETED\n"
    );
    assert_eq!(s.sacct(id, "JobID,NTasks"), format!("{id}|\n{id}.0|1\n"));
    // sbatch --exclusive -N 2 --ntasks-per-node=1: a task on each node, and a step that
    // says nothing of nodes lies as they do; srun --exclusive inside is a step on PEs no
    // running step holds.
    let script = "#!/bin/sh\n\
        #SBATCH --exclusive -N 2 --ntasks-per-node=1\n\
        echo \"alloc $SLURM_NTASKS $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE\"\n\
        srun sh -c 'echo \"rank $SLURM_PROCID on $SLURMD_NODENAME\"'\n\
        srun --exclusive -n 1 sh -c 'echo \"inner step $SLURM_STEP_ID\"'\n";
    let (_, out) = s.run(script, 120);
    assert_eq!(lines_with(&out, "alloc"), ["alloc 2 1(x2) 2(x2)"], "{out}");
    assert_eq!(
        lines_with(&out, "rank"),
        ["rank 0 on n0", "rank 1 on n1"],
        "{out}"
    );
    assert_eq!(lines_with(&out, "inner"), ["inner step 1"], "{out}");
}

#[test]
fn scancel_of_a_step_and_a_killed_srun_end_that_step_alone() {
    let s = Site::up("steps", "stepkill", 1);
    // Each wait loop stands until the step exists: srun may take a while on a loaded machine.
    let script = "#!/bin/sh\n\
        #SBATCH -n 2\n\
        srun -n 1 sleep 120 & p=$!\n\
        until scancel $SLURM_JOB_ID.0 2>/dev/null; do sleep 0.3; done\n\
        wait $p; echo \"srun 0 exited $?\"\n\
        srun -n 1 sleep 120 & p=$!\n\
        until sacct -j $SLURM_JOB_ID -P -n --format=JobID | grep -q '[.]1$'; do sleep 0.3; done\n\
        sleep 1; kill -TERM $p\n\
        wait $p; echo \"srun 1 exited $?\"\n\
        srun -n 1 sh -c 'echo still here'\n";
    let (id, out) = s.run(script, 100);
    // As Slurm's srun: the highest exit status of the tasks, 128 + SIGTERM for a task the
    // cancel ended.
    assert!(out.contains("srun 0 exited 143\n"), "{out}");
    assert!(out.contains("srun 1 exited 143\n"), "{out}");
    assert!(
        out.contains("still here\n"),
        "the allocation went on:\n{out}"
    );
    assert_eq!(
        s.sacct(id, "JobID,State"),
        format!(
            "{id}|COMPLETED\n{id}.batch|COMPLETED\n{id}.0|CANCELLED\n{id}.1|CANCELLED\n{id}.2|COMPLETED\n"
        ),
        "{out}"
    );
}

/// `scancel N.S` is answered only once the step's cancel is durable: the machine manager,
/// killed the moment the answer is back, comes back with the step cancelled.
#[test]
fn a_step_cancel_answered_survives_a_machine_manager_killed_right_after_the_answer() {
    let s = Site::up("steps", "stepdurable", 1);
    s.write(
        "job.sh",
        "#!/bin/sh\n#SBATCH -n 2\nsrun -n 1 sleep 300 &\nsleep 300\n",
    );
    let id = s.sbatch(&["job.sh"]);
    let step = format!("{id}.0");
    s.c.until(120, "step 0 running", || {
        s.sacct(id, "JobID,State")
            .contains(&format!("{step}|RUNNING"))
            .then_some(())
    });
    let addr = s.c.state.addr().unwrap();
    let mm = s.c.pid(s.c.state.mm_pid_file());
    s.ok("scancel", &[&step]);
    support::cluster::signal(&mm, "KILL");
    s.c.reap();
    s.c.restart_mm(&addr);
    let acct = s.c.until(60, "the restarted machine manager's sacct", || {
        let out = s.slurm(
            "sacct",
            &["-j", &id.to_string(), "-P", "-n", "--format=JobID,State"],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(
        acct.contains(&format!("{step}|CANCELLED\n")),
        "the answered cancel was lost:\n{acct}\n--- mm log ---\n{}",
        s.c.mm_log()
    );
    s.ok("scancel", &[&id.to_string()]);
}

/// `salloc` grants an allocation, runs its command here with the allocation's environment
/// (`srun` in it starts a step on the allocation's nodes), and ends the allocation when the
/// command ends, with the command's exit status.
#[test]
fn salloc_runs_its_command_with_the_allocation_and_srun_steps_in_it_then_ends_it() {
    let s = Site::up("steps", "salloc", 2);
    let path = s.links_on_path();
    let cmd = "echo \"job=$SLURM_JOB_ID nodes=$SLURM_JOB_NODELIST n=$SLURM_NNODES\"; \
        srun sh -c 'echo rank $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME'; exit 3";
    let out = s.slurm_env(
        "salloc",
        &["-N", "2", "--ntasks-per-node=1", "sh", "-c", cmd],
        &[("PATH", &path)],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    let id: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .unwrap_or_else(|| panic!("no grant in {stderr:?}"))
        .trim()
        .parse()
        .unwrap();
    assert!(
        stderr.contains(&format!("salloc: Relinquishing job allocation {id}\n")),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("job={id} nodes=n[0-1] n=2\n")),
        "{stdout}"
    );
    assert_eq!(
        lines_with(&stdout, "rank"),
        ["rank 0 of 2 on n0", "rank 1 of 2 on n1"],
        "{stdout}{stderr}"
    );
    let acct = s.sacct(id, "JobID,State,ExitCode");
    assert!(acct.contains(&format!("{id}.0|COMPLETED|0:0\n")), "{acct}");
    // The allocation ends as its command did: FAILED with its code, as Slurm's salloc.
    assert!(acct.starts_with(&format!("{id}|FAILED|3:0\n")), "{acct}");
    assert!(
        s.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T"])
            .trim()
            .is_empty(),
        "the allocation ended with its command"
    );
}

#[test]
fn an_allocation_ends_completed_or_failed_by_its_commands_exit_status() {
    let s = Site::up("steps", "salloc-status", 1);
    let granted = |stderr: &str| -> u64 {
        stderr
            .lines()
            .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
            .unwrap_or_else(|| panic!("no grant in {stderr:?}"))
            .trim()
            .parse()
            .unwrap()
    };
    for (cmd, code, line) in [("exit 0", 0, "COMPLETED|0:0"), ("exit 7", 7, "FAILED|7:0")] {
        let out = s.slurm("salloc", &["-n", "1", "sh", "-c", cmd]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        let id = granted(&stderr);
        let acct = s.ok(
            "sacct",
            &[
                "-j",
                &id.to_string(),
                "-X",
                "-P",
                "-n",
                "--format=State,ExitCode",
            ],
        );
        assert_eq!(acct, format!("{line}\n"), "salloc {cmd}: {stderr}");
    }
}

/// An MPI program that prints its rank and the world's size, and fails unless the world
/// has `argv[1]` ranks.
const WORLD_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0, one = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d (%d in the allreduce)\n", rank, size, sum);
    fflush(stdout);
    MPI_Finalize();
    return size == atoi(argv[1]) && sum == size ? 0 : 1;
}
"#;

/// `WORLD_C` built with `mpicc` (`mpicc.mpich`, `mpicc.openmpi`) into the submit
/// directory; `None` (after a NOTICE) when that MPI is not installed (`.ci/run` installs
/// both).
fn world(s: &Site, mpicc: &str) -> Option<PathBuf> {
    if Command::new(mpicc).arg("-show").output().is_err() {
        eprintln!(
            "NOTICE: skipping: `{mpicc}` not found (install Debian's mpich/libmpich-dev and openmpi-bin/libopenmpi-dev, as .ci/run does)"
        );
        return None;
    }
    let src = s.write("world.c", WORLD_C);
    let exe = s.work.join(format!("world-{mpicc}"));
    let out = Command::new(mpicc)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

#[test]
fn srun_of_an_mpich_program_in_a_batch_script_is_one_world_of_n_ranks() {
    let s = Site::up("steps", "mpich", 2);
    let Some(exe) = world(&s, "mpicc.mpich") else {
        return;
    };
    let script = format!(
        "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=2\necho script ran\nsrun {} 4\necho \"srun exited $?\"\n",
        exe.display()
    );
    let (id, out) = s.run(&script, 180);
    assert_eq!(lines_with(&out, "script"), ["script ran"], "{out}");
    assert_eq!(
        lines_with(&out, "rank"),
        (0..4)
            .map(|r| format!("rank {r} of 4 (4 in the allreduce)"))
            .collect::<Vec<_>>(),
        "{out}"
    );
    assert!(out.contains("srun exited 0\n"), "{out}");
    assert!(
        s.sacct(id, "JobID,State")
            .contains(&format!("{id}.0|COMPLETED")),
        "{}",
        s.sacct(id, "JobID,State")
    );
}

#[test]
fn mpirun_of_open_mpi_in_a_batch_script_is_one_world_of_n_ranks() {
    let s = Site::up("steps", "ompi", 1);
    let Some(exe) = world(&s, "mpicc.openmpi") else {
        return;
    };
    // Open MPI's mpirun sees the allocation (SLURM_JOB_ID, SLURM_NODELIST,
    // SLURM_TASKS_PER_NODE) and starts its daemon on each node with srun.
    let script = format!(
        "#!/bin/sh\n#SBATCH -N 1 -n 2\necho script ran\nmpirun.openmpi --allow-run-as-root {} 2\necho \"mpirun exited $?\"\n",
        exe.display()
    );
    let (id, out) = s.run(&script, 180);
    assert_eq!(lines_with(&out, "script"), ["script ran"], "{out}");
    assert_eq!(
        lines_with(&out, "rank"),
        [
            "rank 0 of 2 (2 in the allreduce)",
            "rank 1 of 2 (2 in the allreduce)"
        ],
        "{out}"
    );
    assert!(out.contains("mpirun exited 0\n"), "{out}");
    // mpirun ends its srun with SIGTERM as it finishes, which cancels the step. A step is
    // recorded by how its tasks ended, as Slurm records it: COMPLETED when the daemon exited 0
    // before the signal reached it, CANCELLED when the signal ended it (a race between
    // mpirun's SIGTERM and its daemon's exit, both outcomes seen on a quiet machine).
    let acct = s.sacct(id, "JobID,JobName,State");
    assert!(
        acct.contains(&format!("{id}.0|orted|COMPLETED"))
            || acct.contains(&format!("{id}.0|orted|CANCELLED")),
        "mpirun's daemon ran as step 0:\n{acct}"
    );
}

/// The Python that has submitit: `COSCHED_SUBMITIT_PYTHON`, else `target/submitit-venv`
/// (made by `.ci/run`).
fn submitit_python() -> PathBuf {
    let python = std::env::var_os("COSCHED_SUBMITIT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/submitit-venv/bin/python")
        });
    let ok = Command::new(&python)
        .args(["-c", "import submitit"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import submitit: run .ci/run's install step (python3 -m venv \
         target/submitit-venv && target/submitit-venv/bin/pip install submitit) or set \
         COSCHED_SUBMITIT_PYTHON",
        python.display()
    );
    python
}

/// submitit's Slurm executor, unchanged: one function, then nine in one batch (a job
/// array); each runs as `srun --unbuffered --output ... python -u -m submitit.core._submit`
/// inside the batch script submitit writes, and the results come back through the files.
const SUBMITIT: &str = r#"
import sys, submitit
def square(x):
    return x * x
ex = submitit.SlurmExecutor(folder=sys.argv[1] + "/%j", max_num_timeout=0)
ex.update_parameters(time=5, nodes=1, ntasks_per_node=1)
one = ex.submit(square, 3)
with ex.batch():
    many = [ex.submit(square, i) for i in range(9)]
print("one", one.result())
print("many", [j.result() for j in many])
print("array", all("_" in j.job_id for j in many), len({j.job_id.split("_")[0] for j in many}))
"#;

#[test]
fn submitits_slurm_executor_runs_ten_functions_through_the_slurm_names() {
    let python = submitit_python();
    let s = Site::up("steps", "submitit", 2);
    let script = s.write("drive.py", SUBMITIT);
    let path = s.links_on_path();
    let out = Command::new(&python)
        .arg(&script)
        .arg(s.work.join("submitit"))
        .current_dir(&s.work)
        .env("PATH", path)
        .env("COSCHED_STATE_DIR", &s.c.dir)
        .env_remove("SLURM_JOB_ID")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "submitit failed: {text}{}\n--- mm log ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.c.mm_log()
    );
    assert_eq!(
        text,
        "one 9\nmany [0, 1, 4, 9, 16, 25, 36, 49, 64]\narray True 1\n"
    );
    // Each task's function ran as step 0 of its allocation.
    let acct = s.ok("sacct", &["-P", "-n", "--format=JobID,State"]);
    assert_eq!(
        acct.lines().filter(|l| l.ends_with(".0|COMPLETED")).count(),
        10,
        "{acct}"
    );
}

#[test]
fn an_sbatch_mpi_directive_is_the_default_of_the_scripts_steps() {
    let s = Site::up("steps", "sbatch-mpi", 2);
    // `--mpi=none`: the steps' ranks get neither PMI-1 (PMI_FD) nor PMIx (a namespace);
    // an srun's own `--mpi` still wins.
    let script = "#!/bin/sh\n\
        #SBATCH -n 2\n\
        #SBATCH --mpi=none\n\
        echo \"type $SLURM_MPI_TYPE\"\n\
        srun sh -c 'echo \"default $SLURM_PROCID pmi1=${PMI_FD:+y} pmix=${PMIX_NAMESPACE:+y}\"'\n\
        srun --mpi=pmi1 sh -c 'echo \"own $SLURM_PROCID pmi1=${PMI_FD:+y} pmix=${PMIX_NAMESPACE:+y}\"'\n";
    let (_, out) = s.run(script, 120);
    assert_eq!(lines_with(&out, "type"), ["type none"], "{out}");
    assert_eq!(
        lines_with(&out, "default"),
        ["default 0 pmi1= pmix=", "default 1 pmi1= pmix="],
        "{out}"
    );
    assert_eq!(
        lines_with(&out, "own"),
        ["own 0 pmi1=y pmix=", "own 1 pmi1=y pmix="],
        "{out}"
    );
}

/// Three nodes of two PEs: n0 and n1 plain in partition `batch` (the default), n2 with
/// features `ib` and `big`, and partition `wide` of all three.
const PARTITIONED: &str = r#"cluster = "test"
head = "127.0.0.1:@PORT@"
state_dir = "@DIR@"
key = "@DIR@/key"
heartbeat = "200ms"

[scheduler]
policy = "fcfs"

[[nodes]]
names = "n[0-1]"
cores = 2

[[nodes]]
names = "n2"
cores = 2
features = ["ib", "big"]

[[partitions]]
name = "batch"
nodes = "n[0-1]"
default = true

[[partitions]]
name = "wide"
nodes = "n[0-2]"
"#;

#[test]
fn partitions_constraints_and_exclusive_choose_a_jobs_nodes_and_unknown_ones_are_refused() {
    let c = support::cluster::Cluster::configured(
        "steps",
        "partitions",
        PARTITIONED,
        &["n0", "n1", "n2"],
    );
    let work = c.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let s = Site {
        work: work.canonicalize().unwrap(),
        c,
    };
    assert_eq!(
        s.ok("sinfo", &["-h", "-o", "%P %D %N"]),
        "batch* 2 n[0-1]\nwide 3 n[0-2]\n"
    );
    let show = "#!/bin/sh\necho \"in $SLURM_JOB_PARTITION on $SLURM_JOB_NODELIST cpus $SLURM_JOB_CPUS_PER_NODE\"\n";
    // No -p: the default partition's nodes.
    let (_, out) = s.run(
        &show.replace("#!/bin/sh\n", "#!/bin/sh\n#SBATCH -N 2\n"),
        120,
    );
    assert_eq!(
        lines_with(&out, "in"),
        ["in batch on n[0-1] cpus 1(x2)"],
        "{out}"
    );
    // A partition and a feature: n2 alone has `big`.
    let (id, out) = s.run(
        &show.replace("#!/bin/sh\n", "#!/bin/sh\n#SBATCH -p wide -C big\n"),
        120,
    );
    assert_eq!(lines_with(&out, "in"), ["in wide on n2 cpus 1"], "{out}");
    assert_eq!(s.sacct_alloc(id, "Partition,NodeList"), "wide|n2\n");
    // A list of partitions: the union of their nodes, the job in the first listed one
    // whose nodes it got.
    let (id, out) = s.run(
        &show.replace("#!/bin/sh\n", "#!/bin/sh\n#SBATCH -p batch,wide -N 3\n"),
        120,
    );
    assert_eq!(
        lines_with(&out, "in"),
        ["in wide on n[0-2] cpus 1(x3)"],
        "{out}"
    );
    assert_eq!(s.sacct_alloc(id, "Partition"), "wide\n");
    let (_, out) = s.run(
        &show.replace("#!/bin/sh\n", "#!/bin/sh\n#SBATCH -p batch,wide -w n1\n"),
        120,
    );
    assert_eq!(lines_with(&out, "in"), ["in batch on n1 cpus 1"], "{out}");
    // Refused at submission, saying why.
    s.write("job.sh", show);
    for (args, why) in [
        (
            vec!["-p", "gpu"],
            "invalid partition specified: gpu; the partitions are batch, wide",
        ),
        (
            vec!["-C", "big"],
            "no node of partition batch has the features",
        ),
        (
            vec!["-w", "n2"],
            "--nodelist: node n2 is not in partition batch",
        ),
        (vec!["-p", "wide", "-C", "[ib|big]"], "a matching set"),
        (
            vec!["-p", "batch,gpu"],
            "invalid partition specified: gpu; the partitions are batch, wide",
        ),
    ] {
        let out = s.slurm("sbatch", &[args.as_slice(), &["job.sh"]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    // --exclusive: the whole node (both PEs), and nobody else there while it runs.
    s.write(
        "hold.sh",
        "#!/bin/sh\necho \"cpus $SLURM_JOB_CPUS_PER_NODE tasks $SLURM_NTASKS\"\nsleep 30\n",
    );
    let whole = s.sbatch(&[
        "-p",
        "wide",
        "-w",
        "n2",
        "--exclusive",
        "-n",
        "1",
        "hold.sh",
    ]);
    let state = |id: u64| s.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T"]);
    s.c.until(60, "the exclusive job running", || {
        (state(whole).trim() == "RUNNING").then_some(())
    });
    let other = s.sbatch(&["-p", "wide", "-w", "n2", "-n", "1", "hold.sh"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        state(other).trim(),
        "PENDING",
        "n2 has a free PE but the exclusive job holds the node"
    );
    s.ok("scancel", &[&whole.to_string()]);
    s.c.until(60, "the other job running once the node is free", || {
        (state(other).trim() == "RUNNING").then_some(())
    });
    s.ok("scancel", &[&other.to_string()]);
    let out =
        std::fs::read_to_string(s.work.join(format!("slurm-{whole}.out"))).unwrap_or_default();
    assert_eq!(lines_with(&out, "cpus"), ["cpus 2 tasks 1"], "{out}");
}

/// `--signal=B:USR1@55` on a one-minute limit: the batch script's shell gets SIGUSR1 about
/// 5 s in (its trap ends the job well before the limit); without `B:` the step's tasks get
/// it and the script does not.
#[test]
fn signal_before_the_time_limit_reaches_the_batch_shell_with_b_and_the_tasks_without() {
    let s = Site::up("steps", "signal", 1);
    let script = "#!/bin/sh\n\
        #SBATCH -n 1 -t 1 --signal=B:USR1@55\n\
        trap 'echo \"script got USR1\"; exit 0' USR1\n\
        i=0; while [ $i -lt 100 ]; do sleep 1; i=$((i+1)); done\n\
        echo 'no signal'\n";
    let (id, out) = s.run(script, 90);
    assert_eq!(lines_with(&out, "script"), ["script got USR1"], "{out}");
    assert_eq!(s.sacct_alloc(id, "State"), "COMPLETED\n", "{out}");

    let script = "#!/bin/sh\n\
        #SBATCH -n 1 -t 1 --signal=USR1@55\n\
        trap 'echo \"script got USR1\"' USR1\n\
        srun sh -c 'trap \"echo task got USR1; exit 0\" USR1; i=0; while [ $i -lt 100 ]; do sleep 1; i=$((i+1)); done'\n\
        echo \"srun exited $?\"\n";
    let (id, out) = s.run(script, 90);
    assert!(out.contains("task got USR1\n"), "{out}");
    assert!(out.contains("srun exited 0\n"), "{out}");
    assert!(!out.contains("script got USR1"), "{out}");
    assert_eq!(s.sacct_alloc(id, "State"), "COMPLETED\n", "{out}");
}

/// `--open-mode=append`: a job's output file is appended to, not cut, so two jobs writing
/// the same `--output` both leave their lines, after what the file held.
#[test]
fn open_mode_append_keeps_what_the_output_file_held() {
    let s = Site::up("steps", "append", 1);
    s.write("shared.out", "before\n");
    for n in 1..=2 {
        let script =
            format!("#!/bin/sh\n#SBATCH -n 1 -o shared.out --open-mode=append\necho job {n}\n");
        s.run(&script, 60);
    }
    let text = std::fs::read_to_string(s.work.join("shared.out")).unwrap();
    assert_eq!(text, "before\njob 1\njob 2\n");
}
