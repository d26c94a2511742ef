//! docs/deploy.md followed on network-namespace hosts: a head node and four compute nodes
//! (n01–n04) joined by a bridge, later a fifth (n05). The commands are the guide's own: its
//! fenced `sh` blocks are read from the file and run in a shell on the host the guide says,
//! and the commands it gives in running text are looked up in it before they are run, so a
//! change to the guide that the test does not follow fails here. The daemons are started with
//! the systemd units' `ExecStart` lines (CI has no systemd), which the guide's own start
//! commands must match, and reloaded with the MM unit's `ExecReload` line.
//!
//! What is the test's and not the guide's goes through [`edit`], which fails if the guide no
//! longer says what it replaces: the machine's size (four one-core nodes, not sixteen of 32),
//! the gang policy with a short quantum, `/usr/bin/cosched` (the binary under test). `scp` is
//! a script that copies between the hosts' directories ([`SCP`]).
//! Each host is a network namespace with its own host name (a UTS namespace, so a node
//! manager finds its name as on a real host), its own `/etc/hosts` naming every host, and its
//! own `/etc/cosched` and `/var/lib/cosched` (directories of the test bind-mounted in a mount
//! namespace of its own). All hosts share the rest of the file system, which plays the shared
//! file system of docs/deploy.md §6.
//!
//! Needs root, iproute2 and util-linux's `unshare`; the MPI part needs MPICH (`mpicc.mpich`).
//! Without them the test says so and returns. Every wait is tens of seconds: it holds on a
//! loaded machine.

mod support;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use support::*;

const GUIDE: &str = include_str!("../../../docs/deploy.md");
const MM_UNIT: &str = include_str!("../../../packaging/cosched-mm.service");
const NM_UNIT: &str = include_str!("../../../packaging/cosched-nm.service");

/// The site's hosts: the head node first, then the compute nodes; the last joins later.
const SITE: [&str; 6] = ["head", "n01", "n02", "n03", "n04", "n05"];

/// Replaces `from` (which must be in `text`: the guide still says it) by `to`.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "docs/deploy.md no longer says {from:?} where the deploy test expects it:\n{text}"
    );
    text.replace(from, to)
}

/// The guide's fenced `sh` block that contains `needle` (exactly one).
fn block(needle: &str) -> String {
    let mut found = Vec::new();
    let mut lines = GUIDE.lines();
    while let Some(l) = lines.next() {
        if l.trim() == "```sh" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            let body = body.join("\n") + "\n";
            if body.contains(needle) {
                found.push(body);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "docs/deploy.md: one ```sh block with {needle:?} expected, found {found:?}"
    );
    found.pop().unwrap()
}

/// A command the guide gives in running text (`` `COMMAND` ``), checked to be there.
fn said(command: &str) -> String {
    assert!(
        GUIDE.contains(&format!("`{command}`")),
        "docs/deploy.md no longer gives the command `{command}`"
    );
    command.to_string()
}

/// A unit's `ExecStart` command line.
fn exec_start(unit: &str) -> String {
    unit.lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("the unit has an ExecStart line")
        .to_string()
}

/// The namespaces, the hosts' directories and the daemons; all removed on drop.
struct Site {
    tag: u32,
    root: PathBuf,
    /// (host, process group) of each daemon started.
    daemons: Vec<(usize, Child)>,
    namespaces: Vec<String>,
    /// Mount points this test made on the real host (removed again if still empty).
    made: Vec<PathBuf>,
}

impl Drop for Site {
    fn drop(&mut self) {
        for (_, d) in &mut self.daemons {
            // The daemon's whole process group: ip, unshare, sh and cosched.
            unsafe { libc::kill(-(d.id() as i32), libc::SIGKILL) };
            let _ = d.wait();
        }
        for ns in &self.namespaces {
            ip(&["netns", "del", ns]);
        }
        for dir in self.made.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Site {
    fn ns(&self, host: usize) -> String {
        format!("cd{}h{host}", self.tag)
    }

    fn host_dir(&self, host: usize) -> PathBuf {
        self.root.join(SITE[host])
    }

    /// The shared file system: jobs are submitted from here, programs live here.
    fn shared(&self) -> PathBuf {
        self.root.join("shared")
    }

    /// `sh -c SCRIPT` on `host`: in its network namespace, with its name, `/etc/hosts`,
    /// `/etc/cosched` and `/var/lib/cosched`, the binary under test first on `PATH`.
    fn command(&self, host: usize, script: &str) -> Command {
        let h = self.host_dir(host);
        let bin_dir = Path::new(bin()).parent().unwrap();
        let path = format!(
            "{}:{}:{}",
            self.root.join("bin").display(),
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(host)])
            .args(["unshare", "--mount", "--uts", "--propagation", "private"])
            .args([
                "sh",
                "-c",
                "mount --bind \"$0/etc/cosched\" /etc/cosched && \
                 mount --bind \"$0/var/lib/cosched\" /var/lib/cosched && \
                 mount --bind \"$0/hosts\" /etc/hosts && hostname \"$1\" && \
                 exec sh -c \"$2\"",
            ])
            .arg(&h)
            .arg(SITE[host])
            .arg(script)
            .env("PATH", path)
            .env("SITE", &self.root)
            .env_remove("COSCHED_STATE_DIR")
            .env_remove("COSCHED_CONFIG")
            .current_dir(self.shared());
        c
    }

    fn run(&self, host: usize, script: &str) -> Output {
        self.command(host, script)
            .output()
            .expect("ip netns exec runs")
    }

    /// Runs `script` on `host`, which must succeed; its standard output.
    fn ok(&self, host: usize, script: &str) -> String {
        let out = self.run(host, script);
        assert!(
            out.status.success(),
            "on {}: {script}\nfailed ({}): {}{}\n{}",
            SITE[host],
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Starts a daemon on `host` with a unit's `ExecStart` line, `/usr/bin/cosched` being
    /// the binary under test.
    fn start(&mut self, host: usize, unit: &str) {
        let line = edit(&exec_start(unit), "/usr/bin/cosched", bin());
        let log = std::fs::File::create(self.root.join(format!("{}.log", SITE[host]))).unwrap();
        let mut c = self.command(host, &format!("exec {line}"));
        // The hosts share the machine's memory: without this, MPICH's UCX would pass the MPI
        // job's messages through shared memory, not over the network between the hosts.
        c.env("UCX_TLS", "tcp,self")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = c.spawn().expect("start a daemon on a host");
        self.daemons.push((host, child));
    }

    fn logs(&self) -> String {
        let mut all = String::new();
        for h in SITE {
            if let Ok(text) = std::fs::read_to_string(self.root.join(format!("{h}.log"))) {
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                all += &format!("--- {h}.log (last lines) ---\n");
                for l in tail.iter().rev() {
                    all += l;
                    all.push('\n');
                }
            }
        }
        all
    }

    fn until<T>(&self, secs: u64, what: &str, f: impl FnMut() -> Option<T>) -> T {
        until_or(secs, f, || {
            format!(
                "timed out after {secs} s waiting for {what}\n{}",
                self.logs()
            )
        })
    }

    fn status(&self) -> Value {
        serde_json::from_str(&self.ok(0, "cosched status --json")).unwrap()
    }

    /// How many times the MM has started (its log says where it listens each time).
    fn mm_starts(&self) -> usize {
        std::fs::read_to_string(self.root.join("head.log"))
            .unwrap_or_default()
            .matches("mm: listening on")
            .count()
    }

    /// Waits until the MM has started more than `before` times and `up` nodes are up: after
    /// a reconfiguration it restarts in place, and its socket refuses for a moment.
    fn restarted_with(&self, before: usize, up: &[&str]) {
        self.until(60, "the MM started again", || {
            (self.mm_starts() > before).then_some(())
        });
        self.until(90, &format!("{up:?} up"), || {
            let out = self.run(0, "cosched status --json");
            let v: Value = serde_json::from_slice(&out.stdout).ok()?;
            let nodes = v["nodes"].as_array()?;
            up.iter()
                .all(|name| {
                    nodes
                        .iter()
                        .any(|n| n["name"] == *name && n["state"] == "up")
                })
                .then_some(())
        });
    }

    fn node(&self, name: &str) -> Value {
        let st = self.status();
        st["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("node {name} in {st}"))
    }

    fn submit(&self, args: &str) -> u64 {
        job_id(&self.ok(0, &format!("cosched submit {args}")))
    }

    fn job(&self, id: u64) -> Value {
        let v: Value = serde_json::from_str(&self.ok(0, "cosched acct --json")).unwrap();
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("job {id} in {v}"))
    }

    fn state(&self, id: u64) -> String {
        self.job(id)["state"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn ended(&self, id: u64, secs: u64) -> Value {
        self.until(secs, &format!("the end of job {id}"), || {
            let j = self.job(id);
            let s = j["state"].as_str().unwrap_or_default();
            (!["queued", "running", "suspended"].contains(&s)).then_some(j)
        })
    }

    fn running(&self, id: u64) {
        self.until(60, &format!("job {id} running"), || {
            (self.state(id) == "running").then_some(())
        });
    }

    /// What each rank of job `id` wrote, by rank.
    fn outputs(&self, id: u64, ranks: usize) -> Vec<String> {
        (0..ranks)
            .map(|r| {
                self.ok(0, &format!("cosched output {id} --rank {r}"))
                    .trim()
                    .to_string()
            })
            .collect()
    }

    fn key(&self, host: usize) -> String {
        std::fs::read_to_string(self.host_dir(host).join("etc/cosched/cluster.key")).unwrap()
    }
}

/// Brings up the namespaces: each host's veth into a bridge in a switch namespace.
fn network(site: &mut Site) -> bool {
    let sw = format!("cd{}sw", site.tag);
    if !ip(&["netns", "add", &sw]) {
        return false;
    }
    site.namespaces.push(sw.clone());
    let sw = sw.as_str();
    assert!(ip(&["-n", sw, "link", "add", "br0", "type", "bridge"]));
    assert!(ip(&["-n", sw, "link", "set", "br0", "up"]));
    let subnet = format!("10.{}.{}", 100 + site.tag % 100, site.tag / 100 % 250);
    let mut hosts = String::from("127.0.0.1 localhost\n");
    for (i, name) in SITE.iter().enumerate() {
        hosts += &format!("{subnet}.{} {name}\n", i + 1);
    }
    for (i, _) in SITE.iter().enumerate() {
        let ns = site.ns(i);
        assert!(ip(&["netns", "add", &ns]), "netns add {ns}");
        site.namespaces.push(ns.clone());
        let a = format!("cd{}e{i}", site.tag);
        let b = format!("cd{}s{i}", site.tag);
        let addr = format!("{subnet}.{}/24", i + 1);
        let (a, b, ns, addr) = (a.as_str(), b.as_str(), ns.as_str(), addr.as_str());
        for args in [
            &["link", "add", a, "type", "veth", "peer", "name", b][..],
            &["link", "set", a, "netns", ns],
            &["link", "set", b, "netns", sw],
            &["-n", sw, "link", "set", b, "master", "br0"],
            &["-n", sw, "link", "set", b, "up"],
            &["-n", ns, "addr", "add", addr, "dev", a],
            &["-n", ns, "link", "set", a, "up"],
            &["-n", ns, "link", "set", "lo", "up"],
        ] {
            assert!(ip(args), "network setup failed at: ip {args:?}");
        }
        let h = site.host_dir(i);
        std::fs::create_dir_all(h.join("etc/cosched")).unwrap();
        std::fs::create_dir_all(h.join("var/lib/cosched")).unwrap();
        std::fs::write(h.join("hosts"), &hosts).unwrap();
    }
    true
}

/// `scp [-p] FILE... HOST:DIR/` between the hosts' directories: what the guide's key loop
/// runs over ssh between real hosts.
const SCP: &str = r#"#!/bin/sh
set -e
[ "$1" = -p ] && shift
eval "dest=\${$#}"
host=${dest%%:*}
dir=${dest#*:}
n=$(($# - 1))
for f in "$@"; do
  [ "$n" -gt 0 ] || break
  n=$((n - 1))
  cp -p "$f" "$SITE/$host$dir"
done
"#;

#[test]
fn a_cluster_deployed_as_docs_deploy_md_says_runs_mpi_and_gang_jobs_drains_grows_and_rotates_keys()
{
    if !is_root() || !ip(&["-V"]) || Command::new("unshare").arg("--help").output().is_err() {
        notice("deploy test skipped: it needs root, iproute2 (`ip netns`) and `unshare`");
        return;
    }
    let tag = std::process::id() % 10_000;
    let root = scratch("deploy", "four-hosts");
    let mut site = Site {
        tag,
        root: root.clone(),
        daemons: Vec::new(),
        namespaces: Vec::new(),
        made: Vec::new(),
    };
    // The mount points of the hosts' own directories, as the package makes them.
    for dir in ["/etc/cosched", "/var/lib/cosched"] {
        if !Path::new(dir).exists() {
            std::fs::create_dir_all(dir).unwrap();
            site.made.push(dir.into());
        }
    }
    std::fs::create_dir_all(site.shared()).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::write(root.join("bin/scp"), SCP).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("bin/scp"), std::fs::Permissions::from_mode(0o755)).unwrap();
    if !network(&mut site) {
        notice("deploy test skipped: `ip netns add` is not permitted here");
        return;
    }

    // §2 and §3 on the head node: the configuration file, the key, both copied to every
    // compute node. The test's machine: four one-core nodes, gang scheduling.
    let size = |text: &str| {
        let text = edit(text, "n[01-16]", "n[01-04]");
        let text = edit(&text, "cores = 32", "cores = 1");
        let text = edit(&text, "memory = \"128G\"", "memory = \"2G\"");
        let text = edit(&text, "max_nodes = 8", "max_nodes = 4");
        let text = edit(&text, "policy = \"easy\"", "policy = \"gang\"");
        let text = edit(&text, "# mpl = 2", "mpl = 2");
        edit(&text, "# quantum = \"30s\"", "quantum = \"1s\"")
    };
    site.ok(0, &size(&block("cat > /etc/cosched/cosched.toml")));
    site.ok(0, &edit(&block("cosched keygen"), "n[01-16]", "n[01-04]"));
    let key = site.key(0);
    for (h, name) in SITE.iter().enumerate().take(5).skip(1) {
        assert_eq!(site.key(h), key, "the key copied to {name}");
        let conf = site.host_dir(h).join("etc/cosched/cosched.toml");
        assert!(conf.exists(), "the configuration copied to {name}");
    }

    // §4: the daemons, by the units' command lines, which are the guide's.
    let start = block("cosched mm --config");
    let (prepare, mm): (Vec<&str>, Vec<&str>) =
        start.lines().partition(|l| !l.starts_with("cosched mm "));
    assert_eq!(
        mm,
        [edit(&exec_start(MM_UNIT), "/usr/bin/", "")],
        "the guide starts the MM as its unit does"
    );
    let nm = block("cosched nm --config");
    assert!(
        nm.starts_with(&edit(&exec_start(NM_UNIT), "/usr/bin/", "")),
        "the guide starts the NM as its unit does: {nm}"
    );
    site.ok(0, &prepare.join("\n"));
    site.start(0, MM_UNIT);
    for h in 1..=4 {
        site.start(h, NM_UNIT);
    }
    site.until(90, "four nodes up", || {
        let out = site.run(0, "cosched status --json");
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let up = v["nodes"].as_array()?;
        (up.iter().filter(|n| n["state"] == "up").count() == 4).then_some(())
    });
    for (i, name) in ["n01", "n02", "n03", "n04"].iter().enumerate() {
        assert_eq!(site.node(name)["id"], i, "ids follow the configuration");
    }

    // §7: a job on every node; each rank runs on its own host, under the host's name.
    let check = edit(&block("cosched submit -n 64"), "-n 64", "-n 4");
    let printed = site.ok(0, &check);
    let id: u64 = printed
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("the job id among what §7 printed:\n{printed}"));
    assert_eq!(site.ended(id, 90)["state"], "completed");
    let mut names = site.outputs(id, 4);
    names.sort();
    assert_eq!(names, ["n01", "n02", "n03", "n04"]);

    // An MPICH program across the four hosts (its ranks meet through the node managers'
    // PMI and talk over the bridge).
    if Command::new("mpicc.mpich").arg("-show").output().is_ok() {
        let src = site.shared().join("ring.c");
        std::fs::write(&src, include_str!("mpi/ring.c")).unwrap();
        site.ok(0, "mpicc.mpich -O2 -o ring ring.c");
        let mpi = site.submit("-n 4 -- ./ring 5");
        let j = site.ended(mpi, 120);
        let out = site.outputs(mpi, 4);
        assert_eq!(j["state"], "completed", "{j}\nranks wrote: {out:?}");
        for (rank, line) in out.iter().enumerate() {
            let want = format!(
                "rank {rank} of 4: ring from {}, allreduce 6, ring sum 6, 5 iterations, ok",
                (rank + 3) % 4
            );
            assert_eq!(line, &want);
        }
    } else {
        notice(
            "deploy test: the MPI job was NOT run: `mpicc.mpich` not found (install mpich and libmpich-dev, as .ci/run does)",
        );
    }

    // Gang: two jobs on all four nodes at once, time-sliced.
    let gang: Vec<u64> = (0..2).map(|_| site.submit("-n 4 -- sleep 4")).collect();
    for &g in &gang {
        site.running(g);
    }
    for &g in &gang {
        let j = site.ended(g, 120);
        assert_eq!(j["state"], "completed", "{j}");
        assert!(
            j["suspended_s"].as_f64().unwrap_or(0.0) > 0.0,
            "the two jobs shared the nodes by turns: {j}"
        );
    }

    // Maintenance: n01 drained while a job runs there, which finishes; nothing new starts
    // on it until it is resumed. (Gang packs a job into an aligned block of nodes: a 2-node
    // job goes to n01–n02 on a free machine, to n03–n04 with n01 out.)
    let busy = site.submit("-n 4 -- sleep 3");
    site.running(busy);
    let drain = edit(
        &said("cosched node drain n07 --reason \"new DIMM\""),
        "n07",
        "n01",
    );
    site.ok(0, &drain);
    assert_eq!(site.node("n01")["state"], "draining");
    let meanwhile = site.submit("-n 2 -- hostname");
    assert_eq!(site.ended(meanwhile, 120)["state"], "completed");
    assert_eq!(
        site.outputs(meanwhile, 2),
        ["n03", "n04"],
        "a draining node starts nothing"
    );
    assert_eq!(site.ended(busy, 120)["state"], "completed");
    site.until(30, "n01 drained", || {
        (site.node("n01")["state"] == "drained").then_some(())
    });
    assert!(site.ok(0, "cosched status").contains("new DIMM"));
    site.ok(0, &edit(&said("cosched node resume n07"), "n07", "n01"));
    assert_eq!(site.node("n01")["state"], "up");
    let back = site.submit("-n 2 -- hostname");
    assert_eq!(site.ended(back, 120)["state"], "completed");
    assert_eq!(
        site.outputs(back, 2),
        ["n01", "n02"],
        "n01 takes work again"
    );

    // A fifth node: the file edited on every host, `cosched reconfigure` while a job runs
    // on the others, then the node manager started on the new host.
    let elsewhere = site.submit("-n 4 -- sleep 6");
    site.running(elsewhere);
    let conf = std::fs::read_to_string(site.host_dir(0).join("etc/cosched/cosched.toml")).unwrap();
    let grown = edit(
        &edit(&conf, "n[01-04]", "n[01-05]"),
        "max_nodes = 4",
        "max_nodes = 5",
    );
    for h in 0..=5 {
        std::fs::write(site.host_dir(h).join("etc/cosched/cosched.toml"), &grown).unwrap();
    }
    std::fs::copy(
        site.host_dir(0).join("etc/cosched/cluster.key"),
        site.host_dir(5).join("etc/cosched/cluster.key"),
    )
    .unwrap();
    let starts = site.mm_starts();
    let out = site.run(0, &said("cosched reconfigure"));
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{told}");
    assert!(told.contains("nodes added: n05"), "{told}");
    site.start(5, NM_UNIT);
    site.restarted_with(starts, &SITE[1..]);
    assert_eq!(site.node("n05")["id"], 4, "the next free id");
    assert_eq!(
        site.ended(elsewhere, 120)["state"],
        "completed",
        "the job running across the reconfiguration completes"
    );
    for old in [id, busy, meanwhile, back] {
        assert_eq!(site.state(old), "completed", "history kept: job {old}");
    }

    // `systemctl reload cosched-mm` (the unit's ExecReload, SIGHUP) after a limit changed in
    // the file: the MM takes the file again and every node comes back.
    let shorter = edit(&grown, "max_time = \"2d\"", "max_time = \"1d\"");
    for h in 0..SITE.len() {
        std::fs::write(site.host_dir(h).join("etc/cosched/cosched.toml"), &shorter).unwrap();
    }
    let reload = MM_UNIT
        .lines()
        .find_map(|l| l.strip_prefix("ExecReload="))
        .expect("the MM's unit has an ExecReload line");
    let pid = pid_in_file(&site.host_dir(0).join("var/lib/cosched/mm.pid"));
    let starts = site.mm_starts();
    site.ok(0, &edit(reload, "$MAINPID", &pid));
    site.restarted_with(starts, &SITE[1..]);
    let log = std::fs::read_to_string(site.root.join("head.log")).unwrap();
    let line = log.lines().find(|l| l.contains("mm: SIGHUP:"));
    assert!(
        line.is_some_and(|l| l.contains(" INFO ")),
        "the reload was not taken: {line:?}"
    );

    // The cluster key rotated under a running job on all five nodes: the job completes, and
    // every node manager has written the new key to its own key file.
    let across = site.submit("-n 5 -- sleep 6");
    site.running(across);
    site.ok(0, &said("cosched cluster rotate-key --grace 10m"));
    assert_eq!(site.ended(across, 120)["state"], "completed");
    let new_key = site.key(0);
    assert_ne!(new_key, key, "the head's key file holds a new key");
    for (h, name) in SITE.iter().enumerate().skip(1) {
        site.until(30, &format!("the new key on {name}"), || {
            (site.key(h) == new_key).then_some(())
        });
    }
    let after = site.submit("-n 5 -- true");
    assert_eq!(site.ended(after, 120)["state"], "completed");

    // User credentials: two users' from the head node, used from n03; one user's revoked.
    let users = block("cosched cluster user-key --uid 1001 --out");
    let mut lines = users.lines().filter(|l| !l.starts_with('#'));
    let issue = lines.next().unwrap().to_string();
    let use_ = lines.next().unwrap().to_string();
    let revoke = lines.next().unwrap().to_string();
    // The credential is handed to the user in the shared directory (both commands run there).
    let for_uid = |line: &str, uid: &str| edit(line, "1001", uid).replace("/root/", "");
    for uid in ["65534", "65533"] {
        site.ok(0, &for_uid(&issue, uid));
        site.ok(3, &for_uid(&use_, uid));
    }
    site.ok(0, &for_uid(&revoke, "65534"));
    let refused = site.run(3, &for_uid(&use_, "65534"));
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("authentication failed"),
        "a revoked credential still works: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    site.ok(3, &for_uid(&use_, "65533"));
}
