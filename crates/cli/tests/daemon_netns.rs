//! The same binaries on two "hosts": two network namespaces joined by a veth pair. The machine
//! manager and one node manager run in the first, another node manager in the second; a
//! 2-rank job runs one rank on each, then an MPI ring across the two built with MPICH
//! (PMI-1) and with Open MPI (PMIx). Needs root and iproute2 (`ip netns`); without them the
//! test says so and returns (and without an MPI, that MPI's part).

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cosched_workload::notice;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cosched")
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Two namespaces and the daemons started in them; all removed on drop.
struct Hosts {
    ns: [String; 2],
    dir: std::path::PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
        for ns in &self.ns {
            ip(&["netns", "del", ns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Hosts {
    fn exec(&self, host: usize, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns[host], bin()])
            .args(args)
            .env("COSCHED_STATE_DIR", &self.dir)
            .output()
            .expect("ip netns exec runs")
    }

    fn spawn(&mut self, host: usize, args: &[&str], log: &str) {
        let log = std::fs::File::create(self.dir.join(log)).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[host], bin()])
            .args(args)
            .env("COSCHED_STATE_DIR", &self.dir)
            // Ranks inherit the node manager's environment: MPICH's UCX may then only use
            // TCP, so the MPI job's messages must cross the veth pair (the namespaces share
            // the host's memory, and UCX would otherwise pick shared memory).
            .env("UCX_TLS", "tcp,self")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn a daemon in a namespace");
        self.daemons.push(child);
    }
}

#[test]
fn two_hosts_over_network_namespaces() {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root || !ip(&["-V"]) {
        notice!("NOTICE: skipping the multi-host test: it needs root and iproute2 (`ip netns`)");
        return;
    }
    let tag = std::process::id() % 10_000;
    let ns = [format!("csa{tag}"), format!("csb{tag}")];
    let dir = std::env::temp_dir().join(format!("cosched-netns-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut hosts = Hosts {
        ns: ns.clone(),
        dir: dir.clone(),
        daemons: Vec::new(),
    };
    if !ip(&["netns", "add", &ns[0]]) || !ip(&["netns", "add", &ns[1]]) {
        notice!("NOTICE: skipping the multi-host test: `ip netns add` is not permitted here");
        return;
    }
    let (va, vb) = (format!("cva{tag}"), format!("cvb{tag}"));
    let subnet = format!("10.{}.{}", 100 + tag % 100, tag / 100 % 250);
    let (addr_a, addr_b) = (format!("{subnet}.1"), format!("{subnet}.2"));
    for (ok, what) in [
        (
            ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]),
            "veth pair",
        ),
        (ip(&["link", "set", &va, "netns", &ns[0]]), "move veth a"),
        (ip(&["link", "set", &vb, "netns", &ns[1]]), "move veth b"),
        (
            ip(&[
                "-n",
                &ns[0],
                "addr",
                "add",
                &format!("{addr_a}/24"),
                "dev",
                &va,
            ]),
            "address a",
        ),
        (
            ip(&[
                "-n",
                &ns[1],
                "addr",
                "add",
                &format!("{addr_b}/24"),
                "dev",
                &vb,
            ]),
            "address b",
        ),
        (ip(&["-n", &ns[0], "link", "set", &va, "up"]), "veth a up"),
        (ip(&["-n", &ns[1], "link", "set", &vb, "up"]), "veth b up"),
        (ip(&["-n", &ns[0], "link", "set", "lo", "up"]), "lo a up"),
        (ip(&["-n", &ns[1], "link", "set", "lo", "up"]), "lo b up"),
    ] {
        assert!(ok, "network setup failed at: {what}");
    }
    // The cluster key, shared by hand as an administrator would (e.g. over ssh).
    let key = dir.join("key");
    std::fs::write(&key, "5a".repeat(32)).unwrap();
    let key = key.to_str().unwrap().to_string();
    let mm = format!("{addr_a}:7070");
    let d = dir.to_str().unwrap().to_string();
    hosts.spawn(
        0,
        &[
            "mm",
            "--listen",
            &mm,
            "--nodes",
            "2",
            "--pes",
            "1",
            "--fanout",
            "1",
            "--state-dir",
            &d,
            "--key-file",
            &key,
        ],
        "mm.log",
    );
    let wa = format!("{d}/host-a");
    let wb = format!("{d}/host-b");
    hosts.spawn(
        0,
        &[
            "nm",
            "--mm",
            &mm,
            "--name",
            "host-a",
            "--pes",
            "1",
            "--workdir",
            &wa,
            "--key-file",
            &key,
        ],
        "a.log",
    );
    hosts.spawn(
        1,
        &[
            "nm",
            "--mm",
            &mm,
            "--name",
            "host-b",
            "--pes",
            "1",
            "--workdir",
            &wb,
            "--key-file",
            &key,
        ],
        "b.log",
    );

    let conn = ["--mm", mm.as_str(), "--key-file", key.as_str()];
    let start = Instant::now();
    loop {
        let out = hosts.exec(1, &[&["status", "--json"][..], &conn].concat());
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let up = v["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["state"] == "up")
                .count();
            if up == 2 {
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nodes did not register: {}",
            std::fs::read_to_string(dir.join("mm.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Submitted from host b, one rank per host; each reports where it ran.
    let out = hosts.exec(
        1,
        &[
            &["submit", "-n", "2"][..],
            &conn,
            &["--", "sh", "-c", "echo $COSCHED_NODE"],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let out = hosts.exec(0, &[&["wait", &id, "--timeout", "20s"][..], &conn].concat());
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut where_ = Vec::new();
    for rank in ["0", "1"] {
        let out = hosts.exec(1, &[&["output", &id, "--rank", rank][..], &conn].concat());
        assert!(out.status.success());
        where_.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
    }
    where_.sort();
    assert_eq!(where_, vec!["host-a", "host-b"]);

    // An MPICH program across the two hosts: its ranks find each other through the node
    // managers' PMI-1 and talk over the veth pair (TCP only, see `spawn`).
    if Command::new("mpicc.mpich").arg("-show").output().is_err() {
        notice!(
            "NOTICE: skipping the MPICH part of the multi-host test: `mpicc.mpich` not found (install mpich and libmpich-dev, as .ci/run does)"
        );
    } else {
        ring_across_the_hosts(&hosts, &conn, "mpicc.mpich");
    }
    // The same program built with Open MPI: its ranks find each other through each node's
    // PMIx helper, the fences of their start-up gathered through the tree.
    if !cosched_pmix::AVAILABLE {
        notice!(
            "NOTICE: skipping the Open MPI part of the multi-host test: this cosched was built without OpenPMIx (libpmix-dev)"
        );
    } else if Command::new("mpicc.openmpi")
        .arg("-showme")
        .output()
        .is_err()
    {
        notice!(
            "NOTICE: skipping the Open MPI part of the multi-host test: `mpicc.openmpi` not found (install openmpi-bin and libopenmpi-dev, as .ci/run does)"
        );
    } else {
        ring_across_the_hosts(&hosts, &conn, "mpicc.openmpi");
    }
}

/// Builds the ring (ring and allreduce, sums and `MPI_Comm_size` checked by the program)
/// with `mpicc` and runs it with one rank on each host, submitted from host b.
fn ring_across_the_hosts(hosts: &Hosts, conn: &[&str], mpicc: &str) {
    let dir = &hosts.dir;
    let src = dir.join("ring.c");
    std::fs::write(&src, include_str!("mpi/ring.c")).unwrap();
    let ring = dir.join(format!("ring-{mpicc}"));
    let built = Command::new(mpicc)
        .arg("-O2")
        .arg("-o")
        .arg(&ring)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{mpicc} runs: {e}"));
    assert!(
        built.status.success(),
        "{mpicc} failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ring = ring.to_str().unwrap();
    let out = hosts.exec(
        1,
        &[&["submit", "-n", "2"][..], conn, &["--", ring, "5"]].concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let out = hosts.exec(0, &[&["wait", &id, "--timeout", "60s"][..], conn].concat());
    let mut outputs = String::new();
    for rank in ["0", "1"] {
        let o = hosts.exec(1, &[&["output", &id, "--rank", rank][..], conn].concat());
        outputs += &String::from_utf8_lossy(&o.stdout);
        outputs += &String::from_utf8_lossy(&o.stderr);
    }
    assert!(
        out.status.success(),
        "the {mpicc} job across two hosts failed: {}{}\nranks wrote:\n{outputs}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for rank in 0..2 {
        let want = format!(
            "rank {rank} of 2: ring from {}, allreduce 1, ring sum 1, 5 iterations, ok",
            1 - rank
        );
        assert!(
            outputs.contains(&want),
            "{mpicc}: missing {want:?} in:\n{outputs}"
        );
    }
}
