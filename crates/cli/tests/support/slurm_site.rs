//! A loopback cluster driven through Slurm's command names, as a Slurm user's scripts and
//! tools drive it: `cosched slurm CMD ARGS` run in a submit directory of the cluster's own.

use std::path::PathBuf;
use std::process::{Command, Output};

use super::bin;
use super::cluster::Cluster;

/// A loopback cluster of nodes × 2 PEs and a working directory for the jobs (the submit
/// directory).
pub struct Site {
    pub c: Cluster,
    pub work: PathBuf,
}

impl Site {
    /// A cluster of `nodes` × 2 PEs, its state under `cosched-PREFIX-NAME-…`.
    pub fn up(prefix: &str, name: &str, nodes: u32) -> Site {
        let nodes = nodes.to_string();
        let c = Cluster::up(prefix, name, &["--nodes", &nodes, "--pes", "2"]);
        let work = c.dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        Site {
            work: work.canonicalize().unwrap(),
            c,
        }
    }

    /// Runs Slurm command `cmd` (`cosched slurm CMD ARGS`) in the working directory.
    pub fn slurm(&self, cmd: &str, args: &[&str]) -> Output {
        self.slurm_env(cmd, args, &[])
    }

    /// The same with `env` set. The test's own environment names no job and asks for no
    /// strictness, whatever the shell that runs the suite has.
    pub fn slurm_env(&self, cmd: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(bin())
            .arg("slurm")
            .arg(cmd)
            .args(args)
            .current_dir(&self.work)
            .env("COSCHED_STATE_DIR", &self.c.dir)
            .env_remove("COSCHED_SLURM_STRICT")
            .env_remove("SLURM_JOB_ID")
            .env_remove("SLURM_JOBID")
            .envs(env.iter().copied())
            .output()
            .expect("cosched runs")
    }

    /// The stdout of a Slurm command that must succeed.
    pub fn ok(&self, cmd: &str, args: &[&str]) -> String {
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

    /// Writes `text` to file `name` of the working directory.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `sbatch --parsable ARGS`: the job id.
    pub fn sbatch(&self, args: &[&str]) -> u64 {
        let out = self.ok("sbatch", &[&["--parsable"], args].concat());
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("--parsable printed {out:?}"))
    }

    /// `sacct -j ID -P -n --format=FORMAT`.
    pub fn sacct(&self, id: u64, format: &str) -> String {
        self.ok(
            "sacct",
            &[
                "-j",
                &id.to_string(),
                "-P",
                "-n",
                &format!("--format={format}"),
            ],
        )
    }
}
