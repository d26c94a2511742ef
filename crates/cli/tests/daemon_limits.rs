//! What a job may take on its nodes: `--mem` enforced by its cgroup (a job going over it is
//! killed and recorded out of memory, its neighbour on the node untouched), refused at
//! submission when no node has that much, and each rank bound to its own core. Real daemons
//! on loopback.
//!
//! Where the node manager can limit no memory (its log's containment line says why), the
//! memory assertions are skipped with a visible NOTICE; the refusal at submission and the
//! binding are checked everywhere.

mod support;

use support::cluster::Cluster;

/// Whether node manager `node` can limit a job's memory (from its containment line).
fn memory_limits_in_use(c: &Cluster, node: &str) -> bool {
    let line = c.until(30, "the NM's containment line", || {
        let log = std::fs::read_to_string(c.state.nm_log(node)).ok()?;
        log.lines()
            .find(|l| l.contains("containment:"))
            .map(str::to_string)
    });
    let yes = line.contains("memory limits: cgroup");
    if !yes {
        eprintln!("NOTICE: {line}: the memory-limit assertions of this test are skipped");
    }
    yes
}

#[test]
fn a_job_over_its_mem_is_killed_out_of_memory_while_its_neighbour_completes() {
    let c = Cluster::up(
        "limits",
        "oom",
        &["--nodes", "1", "--pes", "2", "--policy", "fcfs"],
    );
    if !memory_limits_in_use(&c, "n0") {
        return;
    }
    let marker = c.dir.join("neighbour-done");
    let neighbour = c.submit(&[
        "-n",
        "1",
        "--mem",
        "64M",
        "--",
        "sh",
        "-c",
        &format!("sleep 2; echo done > {}", marker.display()),
    ]);
    // Touches 512 MiB, eight times its limit.
    let hog = c.submit(&[
        "-n",
        "1",
        "--mem",
        "64M",
        "--",
        "python3",
        "-c",
        "b = bytearray(512 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')",
    ]);
    let j = c.ended(hog, 120);
    assert_eq!(j["state"], "out_of_memory", "{j}");
    let why = j["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("out of memory") && why.contains("--mem=64M"),
        "the reason names the limit: {j}"
    );
    let n = c.ended(neighbour, 120);
    assert_eq!(n["state"], "completed", "the neighbour is untouched: {n}");
    assert!(marker.exists());
    // Slurm's name for it, where tools look.
    let sacct = c.ok(&[
        "slurm",
        "sacct",
        "-j",
        &hog.to_string(),
        "-n",
        "-P",
        "-X",
        "--format=State",
    ]);
    assert_eq!(sacct.trim(), "OUT_OF_MEMORY", "{sacct}");
}

#[test]
fn a_job_asking_more_memory_than_a_node_has_is_refused_with_the_numbers() {
    let c = Cluster::up("limits", "refuse", &["--nodes", "1", "--pes", "2"]);
    let out = c.run(&["submit", "-n", "1", "--mem", "64T", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("67108864 MiB of memory on a node (--mem=67108864M)")
            && err.contains("node n0 has")
            && err.contains("ask for at most --mem="),
        "{err}"
    );
    // Per PE: two PEs of 40 TiB each is more than a node has too.
    let out = c.run(&["submit", "-n", "2", "--mem-per-cpu", "40T", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("ask for at most --mem-per-cpu="),
        "{err}"
    );
}

/// The configuration's memory of a node, not the host's, bounds what a job may ask.
#[test]
fn a_configured_nodes_memory_bounds_what_a_job_may_ask() {
    let config = r#"cluster = "test"
head = "127.0.0.1:@PORT@"
state_dir = "@DIR@"
key = "@DIR@/key"

[scheduler]
policy = "fcfs"

[[nodes]]
names = "m1"
cores = 1
memory = "100M"
"#;
    let c = Cluster::configured("limits", "configured", config, &["m1"]);
    let out = c.run(&["submit", "--mem", "200M", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("node m1 has 100 MiB"),
        "{err}"
    );
    let ok = c.submit(&["--mem", "50M", "--", "true"]);
    assert_eq!(c.ended(ok, 60)["state"], "completed");
}

/// The CPUs a rank may run on, as its `/proc/PID/status` says.
fn cpus_of(c: &Cluster, rank: u32) -> String {
    let f = c.dir.join(format!("cpus.{rank}"));
    c.until(60, &format!("{} written", f.display()), || {
        let s = std::fs::read_to_string(&f).ok()?;
        let v = s.strip_prefix("Cpus_allowed_list:")?.trim().to_string();
        (!v.is_empty()).then_some(v)
    })
}

/// A PE of the matrix is a core: on a node of as many PEs as the host has cores, each rank
/// is bound to a core of its own. (A node claiming more PEs than the host has cores maps PE
/// k to the host's allowed CPU k modulo their number: docs/daemons.md.)
#[test]
fn each_rank_is_bound_to_its_own_core() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ranks = cores.min(4) as u32;
    let c = Cluster::up(
        "limits",
        "bind",
        &[
            "--nodes",
            "1",
            "--pes",
            &ranks.to_string(),
            "--policy",
            "fcfs",
        ],
    );
    let d = c.dir.display();
    let id = c.submit(&[
        "-n",
        &ranks.to_string(),
        "--",
        "sh",
        "-c",
        &format!("grep Cpus_allowed_list /proc/$$/status > {d}/cpus.$COSCHED_RANK"),
    ]);
    assert_eq!(c.ended(id, 60)["state"], "completed");
    let mut seen = std::collections::BTreeSet::new();
    for r in 0..ranks {
        let cpus = cpus_of(&c, r);
        assert!(
            cpus.parse::<u32>().is_ok(),
            "rank {r} may run on one CPU only, not {cpus:?}"
        );
        assert!(seen.insert(cpus.clone()), "rank {r} shares CPU {cpus}");
    }
}

/// The CPUs each thread of process `pid` may run on, as `/proc/PID/task/TID/status` says.
fn thread_cpus(pid: &str) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// A node whose PEs leave CPUs over keeps the node manager there: every one of its threads
/// (the real-time switching thread among them) may run on the spare CPUs only, while its rank
/// runs on the PE's. On a host of one CPU there is nothing to keep apart and the test says so.
#[test]
fn the_node_manager_keeps_off_the_cpus_of_its_pes() {
    let c = Cluster::up(
        "limits",
        "spare",
        &["--nodes", "1", "--pes", "1", "--policy", "fcfs"],
    );
    let d = c.dir.display();
    let id = c.submit(&[
        "--",
        "sh",
        "-c",
        &format!("grep Cpus_allowed_list /proc/$$/status > {d}/cpus.$COSCHED_RANK"),
    ]);
    assert_eq!(c.ended(id, 60)["state"], "completed");
    let rank = cpus_of(&c, 0);
    let nm = thread_cpus(&c.pid(c.state.nm_pid_file("n0")));
    assert!(!nm.is_empty(), "the node manager's threads were read");
    let host = cosched_proto::util::allowed_cpus(None);
    if host.len() < 2 {
        eprintln!("one CPU on this host: the node manager shares it with the rank");
        assert!(nm.iter().all(|t| *t == rank), "{nm:?} against {rank}");
        return;
    }
    assert_eq!(rank, host[0].to_string(), "PE 0 runs on the first CPU");
    let rank: usize = rank.parse().expect("one CPU");
    for t in &nm {
        assert!(
            !cpu_list(t).contains(&rank),
            "a node manager thread may run on {t}, the rank's CPU {rank}"
        );
        assert!(!cpu_list(t).is_empty(), "{t}");
    }
}

/// The CPUs of a kernel CPU list ("0-2,5").
fn cpu_list(s: &str) -> Vec<usize> {
    s.split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?..=b.parse().ok()?).collect::<Vec<usize>>()),
            None => Some(vec![r.parse().ok()?]),
        })
        .flatten()
        .collect()
}
