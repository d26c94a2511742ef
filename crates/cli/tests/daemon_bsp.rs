//! `cosched bsp` on a real cluster: 8 ranks on a 4-node × 2-PE
//! loopback cluster under each pattern — message counts per rank by pattern, Unix links
//! within a node and TCP between nodes, every checksum equal to the one predicted without
//! running — and the node managers' monitor records (`cosched status --node N --json`) equal
//! to the program's own counts. A rank that dies fails the job with a message naming the rank
//! and its node, and leaves no process of the job behind.

mod support;
use support::cluster::Cluster;
use support::*;

use std::process::Command;
use std::time::{Duration, Instant};

use cosched_bsp::{Params, Pattern, expected_checksums, recv_peers, send_peers};
use serde_json::Value;

/// The processes whose environment holds `needle` (the cluster's own directory: no other
/// test's or user's process matches).
fn processes_with(needle: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if String::from_utf8_lossy(&env).contains(needle) {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

fn bsp_args<'a>(bin: &'a str, pattern: &'a str, iterations: &'a str) -> Vec<&'a str> {
    vec![
        "submit",
        "-n",
        "8",
        bin,
        "bsp",
        "--iterations",
        iterations,
        "--compute",
        "1ms",
        "--pattern",
        pattern,
        "--msg-bytes",
        "4096",
        "--seed",
        "11",
    ]
}

#[test]
fn bsp_runs_every_pattern_and_the_monitors_count_what_it_did() {
    let tmp = scratch_dir("bsp", "patterns");
    let dir = tmp.path();
    let c = Cluster::up_in(dir.join("state"), &["--nodes", "4", "--pes", "2"]);
    let iterations = 6u32;
    let it = iterations.to_string();
    let patterns = [Pattern::None, Pattern::Nn, Pattern::Aa, Pattern::Ring];
    let names = ["none", "nn", "aa", "ring"];
    // fcfs runs them one after the other; submitted together to save start-up time.
    let ids: Vec<u64> = names
        .iter()
        .map(|p| job_id(&c.ok(&bsp_args(bin(), p, &it))))
        .collect();
    for ((&id, &pattern), name) in ids.iter().zip(&patterns).zip(names) {
        let j = c.ended(id, 120);
        let out = c.ok(&["output", &id.to_string(), "--rank", "0"]);
        assert_eq!(
            (j["state"].as_str(), j["exit_code"].as_i64()),
            (Some("completed"), Some(0)),
            "{name}: {j}\nrank 0: {out}\n{}",
            c.mm_log()
        );
        let report: Value = serde_json::from_str(out.trim()).expect("rank 0 prints the job's JSON");
        let params = Params {
            iterations,
            pattern,
            msg_bytes: 4096,
            seed: 11,
            ..Params::default()
        };
        let want = expected_checksums(&params, 8);
        assert_eq!(report["size"], 8);
        assert_eq!(report["corrupt"], 0, "{name}");
        let ranks = report["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 8);
        for (r, rank) in ranks.iter().enumerate() {
            let r = r as u32;
            let sends = send_peers(pattern, 8, r);
            let recvs = recv_peers(pattern, 8, r);
            let n = u64::from(iterations);
            assert_eq!(rank["rank"], r);
            assert_eq!(rank["iterations"], iterations);
            assert_eq!(rank["sent_msgs"], n * sends.len() as u64, "{name} rank {r}");
            assert_eq!(rank["recv_msgs"], n * recvs.len() as u64, "{name} rank {r}");
            assert_eq!(
                (
                    rank["sent_checksum"].as_u64(),
                    rank["recv_checksum"].as_u64()
                ),
                (Some(want[r as usize].0), Some(want[r as usize].1)),
                "{name} rank {r}"
            );
            // Ranks 2k and 2k+1 share node n{k}: their link is a Unix socket, the others TCP.
            let linked: std::collections::BTreeSet<u32> =
                sends.iter().chain(&recvs).copied().collect();
            let local = linked.iter().filter(|&&q| q / 2 == r / 2).count() as u64;
            assert_eq!(
                rank["links"]["unix"].as_u64().unwrap_or(0),
                local,
                "{name} rank {r}: {}",
                rank["links"]
            );
            assert_eq!(
                rank["links"]["tcp"].as_u64().unwrap_or(0),
                linked.len() as u64 - local,
                "{name} rank {r}"
            );
            assert_eq!(rank["node"], format!("n{}", r / 2));
            assert_eq!(rank["monitor_attached"], true);
        }
        // The node managers' view of the same run (kept after the job ended).
        for node in 0..4 {
            let m: Value =
                serde_json::from_str(&c.ok(&["status", "--node", &format!("n{node}"), "--json"]))
                    .unwrap();
            let procs: Vec<&Value> = m["procs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["job"] == id)
                .collect();
            assert_eq!(procs.len(), 2, "{name}: node n{node} {m}");
            for p in procs {
                let r = p["rank"].as_u64().unwrap() as usize;
                let rank = &ranks[r];
                let kind = |k: &str| p["by_kind"][k].as_u64().unwrap_or(0);
                assert_eq!(
                    kind("send"),
                    rank["sent_msgs"].as_u64().unwrap(),
                    "{name} {p}"
                );
                assert_eq!(
                    kind("recv"),
                    rank["recv_msgs"].as_u64().unwrap(),
                    "{name} {p}"
                );
                assert_eq!(
                    p["count"].as_u64().unwrap(),
                    rank["monitor_records"].as_u64().unwrap()
                );
                assert_eq!(
                    p["bytes"].as_u64().unwrap(),
                    rank["sent_bytes"].as_u64().unwrap() + rank["recv_bytes"].as_u64().unwrap()
                );
                assert_eq!(p["live"], false);
                assert!(p["pid"].as_u64().unwrap() > 0);
            }
        }
    }
}

#[test]
fn a_rank_that_dies_fails_the_job_naming_it_and_its_node_and_nothing_is_left() {
    let tmp = scratch_dir("bsp", "death");
    let dir = tmp.path();
    let state = dir.join("state");
    let c = Cluster::up_in(state.clone(), &["--nodes", "4", "--pes", "2"]);
    let mut args = bsp_args(bin(), "ring", "100000");
    args.extend(["--kill-rank", "5", "--kill-at", "3"]);
    let id = job_id(&c.ok(&args));
    let j = c.ended(id, 120);
    assert_eq!(j["state"], "failed", "{j}");
    let error = j["error"].as_str().unwrap_or_default();
    // Rank 5 is the second rank of the third node.
    assert!(
        error.contains("rank 5 on node n2") && error.contains("137"),
        "the failure names the rank and its node: {j}"
    );
    let needle = state.to_str().unwrap().to_string();
    let start = Instant::now();
    loop {
        let left: Vec<_> = processes_with(&needle)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(" bsp "))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "ranks of the failed job still run: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The parameters of a scenario job, whether given as the scenario file and job number or as
/// that job's fields in flags, are the simulator's: same iterations, compute, overrides.
#[test]
fn a_scenario_job_and_its_fields_as_flags_give_the_simulators_parameters() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/fcs-classification.toml"
    );
    let dry = |args: &[&str]| -> Value {
        let out = Command::new(bin())
            .arg("bsp")
            .args(args)
            .arg("--dry-run")
            .output()
            .unwrap();
        serde_json::from_str(&succeeded(args, out, "")).unwrap()
    };
    // Job 3: three processes, fine grain (G = 0.1 of the 200 ms slice), rank 0 with 1.5× the
    // work; the scenario's message time is 10 µs.
    let from_file = dry(&["--scenario", scenario, "--job", "3"]);
    let from_flags = dry(&[
        "--procs",
        "3",
        "--work",
        "100s",
        "--granularity",
        "0.1",
        "--timeslice",
        "200ms",
        "--msg-time",
        "10us",
        "--rank-override",
        "0:1.5",
    ]);
    assert_eq!(from_file, from_flags);
    // 20 ms iterations less two 10 µs messages: 5005 iterations of 19.98 ms.
    assert_eq!(from_file["iterations"], 5005);
    assert_eq!(from_file["compute"], 0.01998);
    assert_eq!(
        from_file["rank_overrides"],
        serde_json::json!([[0, 1.5, null]])
    );
    assert_eq!(from_file["pattern"], "aa");
    // Explicit model fields override; a pattern the simulator lacks is the benchmark's own.
    let p = dry(&[
        "--scenario",
        scenario,
        "--job",
        "3",
        "--iterations",
        "7",
        "--pattern",
        "ring",
    ]);
    assert_eq!(
        (p["iterations"].as_u64(), p["pattern"].as_str()),
        (Some(7), Some("ring"))
    );
}
