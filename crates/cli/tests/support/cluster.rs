//! A loopback cluster for the tests that kill and restart its daemons (containment, chaos):
//! brought up with `cluster up` in a scratch state directory, its MM and NMs restarted as
//! docs/daemons.md documents (the MM with the command line `cluster up` gave it), everything
//! torn down on drop even when a test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cosched_proto::StateDir;
use serde_json::Value;

use super::*;

/// A cluster brought up for one test; stopped and removed on drop.
pub struct Cluster {
    pub dir: PathBuf,
    pub state: StateDir,
    /// Where its commands run, and so the jobs' working directory: `work` in `dir` for a
    /// cluster brought up by [`Cluster::up_with_work`], else the test's own.
    pub work: Option<PathBuf>,
    /// Daemons this test restarted itself (killed and reaped on drop).
    pub extra: std::sync::Mutex<Vec<Child>>,
}

/// Where [`Cluster::up_in`] keeps the machine manager's command line for
/// [`Cluster::restart_mm`]: beside the state, in the test's own directory.
const MM_ARGS: &str = "test-mm-args";

impl Cluster {
    pub fn up(prefix: &str, name: &str, args: &[&str]) -> Cluster {
        Cluster::up_in(scratch(prefix, name), args)
    }

    /// [`Cluster::up`] with its state in `dir` (a test that keeps programs beside the state
    /// directory gives a subdirectory of its own scratch directory).
    pub fn up_in(dir: PathBuf, args: &[&str]) -> Cluster {
        Cluster::up_in_env(dir, args, &[])
    }

    /// [`Cluster::up_in`] with `env` set for `cluster up` and so for its daemons.
    pub fn up_in_env(dir: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Cluster {
        std::fs::create_dir_all(&dir).unwrap();
        let c = Cluster {
            state: StateDir::new(&dir),
            dir,
            work: None,
            extra: Default::default(),
        };
        c.up_again_env(args, env);
        c
    }

    /// [`Cluster::up`] whose commands run in a working directory of their own, `work` in
    /// the cluster's directory (see [`Cluster::work`]), as a user's would: relative paths
    /// given to them, and the jobs' files, are there.
    pub fn up_with_work(prefix: &str, name: &str, args: &[&str]) -> Cluster {
        let dir = scratch(prefix, name);
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let c = Cluster {
            state: StateDir::new(&dir),
            work: Some(work.canonicalize().unwrap()),
            dir,
            extra: Default::default(),
        };
        c.up_again(args);
        c
    }

    /// The jobs' working directory of a cluster brought up by [`Cluster::up_with_work`].
    pub fn work(&self) -> &Path {
        self.work
            .as_deref()
            .expect("brought up by Cluster::up_with_work")
    }

    /// Brings the cluster up again in the same state directory (after `cluster down`).
    pub fn up_again(&self, args: &[&str]) {
        self.up_again_env(args, &[]);
    }

    fn up_again_env(&self, args: &[&str], env: &[(&str, &str)]) {
        let mut full = vec!["cluster", "up"];
        full.extend_from_slice(args);
        let out = self.run_env(&full, env);
        assert!(
            out.status.success(),
            "cluster up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mm = self.pid(self.state.mm_pid_file());
        let cmdline = std::fs::read(format!("/proc/{mm}/cmdline")).unwrap();
        std::fs::write(self.dir.join(MM_ARGS), cmdline).unwrap();
    }

    /// A cluster started as an administrator starts one: `cosched mm --config FILE` and
    /// `cosched nm --config FILE --name NAME` for each of `nodes`, from `config` written to
    /// `cosched.toml` in its directory with `@DIR@` (the state directory) and `@PORT@` (a
    /// free port) filled in. Returns once every node is up.
    pub fn configured(prefix: &str, name: &str, config: &str, nodes: &[&str]) -> Cluster {
        let dir = scratch(prefix, name);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = Cluster {
            state: StateDir::new(&dir),
            dir,
            work: None,
            extra: Default::default(),
        };
        c.write_config(
            &config
                .replace("@DIR@", c.dir.to_str().unwrap())
                .replace("@PORT@", &port.to_string()),
        );
        std::fs::create_dir_all(c.state.mm_log().parent().unwrap()).unwrap();
        let args: Vec<String> = ["mm", "--config", c.config_file().to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        c.spawn(&args, c.state.mm_log());
        c.until(30, "the machine manager's address", || c.state.addr().ok());
        for n in nodes {
            c.start_configured_nm(n);
        }
        c.until(60, "every node up", || {
            (c.nodes_up() == nodes.len()).then_some(())
        });
        c
    }

    /// Where [`Cluster::configured`] keeps the configuration file.
    pub fn config_file(&self) -> PathBuf {
        self.dir.join("cosched.toml")
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(self.config_file(), text).unwrap();
    }

    /// Starts node manager `name` as the configuration names it.
    pub fn start_configured_nm(&self, name: &str) {
        let args: Vec<String> = [
            "nm",
            "--config",
            self.config_file().to_str().unwrap(),
            "--name",
            name,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.spawn(&args, self.state.nm_log(name));
    }

    /// `cosched ARGS` for this cluster with `env` added, in its working directory if it has
    /// one; not started yet.
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .env("COSCHED_STATE_DIR", &self.dir)
            .envs(env.iter().copied());
        if let Some(work) = &self.work {
            cmd.current_dir(work);
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    /// [`Cluster::run`] with `env` added.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().expect("cosched runs")
    }

    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_env(args, &[])
    }

    /// [`Cluster::ok`] with `env` added.
    pub fn ok_env(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let log = format!("\n--- mm log ---\n{}", self.mm_log());
        succeeded(args, self.run_env(args, env), &log)
    }

    /// The JSON a command that succeeded printed (`--json`).
    pub fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// A client of this cluster's machine manager.
    pub fn client(&self) -> cosched_client::client::Client {
        cosched_client::client::Client::from_state_dir(&self.state, None, None).unwrap()
    }

    pub fn submit(&self, args: &[&str]) -> u64 {
        job_id(&self.ok(&[&["submit"], args].concat()))
    }

    /// Polls until `pred` holds (at most `secs`), retrying while the MM does not answer.
    pub fn until<T>(&self, secs: u64, what: &str, pred: impl FnMut() -> Option<T>) -> T {
        until_or(secs, pred, || {
            format!(
                "{what} not reached in {secs} s\n--- mm log ---\n{}",
                self.mm_log()
            )
        })
    }

    pub fn state_of(&self, id: u64) -> Option<String> {
        let out = self.run(&["acct", "--json"]);
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["jobs"]
            .as_array()?
            .iter()
            .find(|j| j["id"] == id)
            .map(|j| j["state"].as_str().unwrap().to_string())
    }

    /// Every job's record in `cosched acct --json`.
    pub fn jobs(&self) -> Vec<Value> {
        let v: Value = serde_json::from_str(&self.ok(&["acct", "--json"])).unwrap();
        v["jobs"].as_array().unwrap().clone()
    }

    /// The job's record in `cosched acct --json`.
    pub fn job(&self, id: u64) -> Value {
        self.jobs()
            .into_iter()
            .find(|j| j["id"] == id)
            .expect("job in acct")
    }

    /// Polls until `pred` holds on job `id`'s record (at most `secs`) and returns the record.
    pub fn job_until(&self, id: u64, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
        self.until(secs, &format!("the state wanted of job {id}"), || {
            let j = self.job(id);
            pred(&j).then_some(j)
        })
    }

    /// Polls until the job has ended (at most `secs`: generous, on a loaded 2-core machine)
    /// and returns its record.
    pub fn ended(&self, id: u64, secs: u64) -> Value {
        self.until(secs, &format!("the end of job {id}"), || {
            let j = self.job(id);
            let state = j["state"].as_str().unwrap_or_default();
            (!["queued", "running", "suspended"].contains(&state)).then_some(j)
        })
    }

    pub fn nodes_up(&self) -> usize {
        let out = self.run(&["status", "--json"]);
        if !out.status.success() {
            return 0;
        }
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v["nodes"]
            .as_array()
            .map(|n| n.iter().filter(|n| n["state"] == "up").count())
            .unwrap_or(0)
    }

    /// The state `status` shows for node `name` (`up`, `not_responding`, `joining`,
    /// `down`); `None` while the machine manager does not answer.
    pub fn node_state(&self, name: &str) -> Option<String> {
        let out = self.run(&["status", "--json"]);
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["name"] == name)
            .and_then(|n| n["state"].as_str())
            .map(str::to_string)
    }

    pub fn pid(&self, file: PathBuf) -> String {
        pid_in_file(&file)
    }

    pub fn mm_log(&self) -> String {
        std::fs::read_to_string(self.state.mm_log()).unwrap_or_default()
    }

    pub fn log_file(&self, path: PathBuf) -> std::fs::File {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap()
    }

    /// Starts a daemon with `args`, its output appended to `log`.
    pub fn spawn(&self, args: &[String], log: PathBuf) {
        let log = self.log_file(log);
        let child = Command::new(bin())
            .args(args)
            .env("COSCHED_STATE_DIR", &self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start a daemon");
        self.extra.lock().unwrap().push(child);
    }

    /// Restarts the machine manager on this state directory with the command line `cluster
    /// up` gave it, listening on `listen`.
    pub fn restart_mm(&self, listen: &str) {
        let cmdline = std::fs::read(self.dir.join(MM_ARGS)).expect("brought up by Cluster::up");
        let mut args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .skip(1)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let at = args.iter().position(|a| a == "--listen").expect("--listen") + 1;
        args[at] = listen.to_string();
        self.spawn(&args, self.state.mm_log());
        let pid = self.extra.lock().unwrap().last().unwrap().id();
        // As `cluster up` writes it: the pid and the process's start time.
        self.state
            .write_pid(&self.state.mm_pid_file(), pid as i32)
            .unwrap();
    }

    /// Restarts node manager `name` (the `i`-th of the embedded cluster) as `cluster up` did.
    pub fn restart_nm(&self, i: u32, pes: u32) {
        let name = format!("n{i}");
        let addr = self.state.addr().unwrap();
        let args: Vec<String> = [
            "nm",
            "--mm",
            &addr,
            "--name",
            &name,
            "--pes",
            &pes.to_string(),
            "--workdir",
            self.state.node_work_dir(&name).to_str().unwrap(),
            "--key-file",
            self.state.key_file().to_str().unwrap(),
            "--cpu-offset",
            &(i * pes).to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.spawn(&args, self.state.nm_log(&name));
        let pid = self.extra.lock().unwrap().last().unwrap().id();
        self.state
            .write_pid(&self.state.nm_pid_file(&name), pid as i32)
            .unwrap();
    }

    /// Reaps the restarted daemons that were killed since (no zombies left to look alive).
    pub fn reap(&self) {
        for c in self.extra.lock().unwrap().iter_mut() {
            let _ = c.try_wait();
        }
    }

    pub fn pids(&self) -> Vec<String> {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".pid"))
                    // The first field: a pid file also holds the process's start time.
                    .map(|e| pid_in_file(&e.path()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let pids = self.pids();
        let _ = self.run(&["cluster", "down"]);
        for p in pids {
            signal(&p, "CONT");
            signal(&p, "KILL");
        }
        for c in self.extra.lock().unwrap().iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        remove_cgroups(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn signal(pid: &str, sig: &str) {
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -{sig} {pid} 2>/dev/null"))
        .status();
}

/// Removes the cgroup directories of the cluster's node managers (named in each NM work
/// directory's `cgroup` file): a node manager killed by the test cannot, and no later one on
/// that work directory will. What is still in them is killed first.
pub fn remove_cgroups(state: &std::path::Path) {
    let Ok(rd) = std::fs::read_dir(state) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(base) = std::fs::read_to_string(e.path().join("cgroup")) else {
            continue;
        };
        let base = PathBuf::from(base.trim());
        if let Ok(jobs) = std::fs::read_dir(&base) {
            for j in jobs.flatten().filter(|j| j.path().is_dir()) {
                let _ = std::fs::write(j.path().join("cgroup.kill"), "1");
                let deadline = Instant::now() + Duration::from_secs(2);
                while std::fs::remove_dir(j.path()).is_err() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = std::fs::remove_dir(&base);
    }
}
