//! The fuzz targets of cosched: each function takes arbitrary bytes and feeds them to code
//! that reads untrusted input — frames from the network, requests and node reports reaching
//! the machine manager's core, PMI lines from ranks, SWF traces, scenario and policy files.
//! A target must never panic, hang or allocate without bound, whatever the bytes.
//!
//! The targets are written once here and driven twice: by libFuzzer through `cargo fuzz`
//! (the `fuzz/` project at the repository root, nightly; see docs/fuzzing.md) for long runs,
//! and by `tests/bounded.rs`, a short deterministic run over seed inputs and their mutations
//! that is part of the ordinary test suite on stable Rust.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::io::BufReader;

use cosched_core::{Dur, JobId, MachineShape, NodeId, Time};
use cosched_mm::core::{Core, CoreConfig, Input, Recovered};
use cosched_nm::pmi::JobPmi;
use cosched_policy::{PolicyConfig, PolicyOptions, registry};
use cosched_proto::proto::{
    Caller, FromNode, Hello, Placement, Register, Request, Response, ToNode,
};
use cosched_storm::Key;
use cosched_storm::frame::read_blocking;
use cosched_workload::swf::{ReadOptions, Reader};
use serde::{Deserialize, Serialize};

/// The names of the targets, as `cargo fuzz` and the bounded test know them.
pub const TARGETS: &[&str] = &[
    "frame",
    "mm_core",
    "pmi",
    "swf",
    "scenario",
    "policy_options",
    "batch_script",
];

/// Runs the target called `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "frame" => frame(data),
        "mm_core" => mm_core(data),
        "pmi" => pmi(data),
        "swf" => swf(data),
        "scenario" => scenario(data),
        "policy_options" => policy_options(data),
        "batch_script" => batch_script(data),
        _ => panic!("no fuzz target {name:?}; the targets are {TARGETS:?}"),
    }
}

/// The key the frame targets seal and check with (the fuzzer can only get past the tag by
/// finding it, so [`frame`] also decodes payloads as if they had been authenticated).
pub fn fuzz_key() -> Key {
    Key::from_bytes([0x5a; 32])
}

/// A frame as read from a socket, then its payload decoded as every message type a daemon
/// reads (what an authenticated but hostile peer could send).
pub fn frame(data: &[u8]) {
    let key = fuzz_key();
    let _ = read_blocking::<_, Hello>(&mut &data[..], &key);
    let _ = read_blocking::<_, Request>(&mut &data[..], &key);
    let _ = read_blocking::<_, Register>(&mut &data[..], &key);
    let _ = read_blocking::<_, FromNode>(&mut &data[..], &key);
    let _ = read_blocking::<_, ToNode>(&mut &data[..], &key);
    let _ = read_blocking::<_, Response>(&mut &data[..], &key);
    let _ = postcard::from_bytes::<Hello>(data);
    let _ = postcard::from_bytes::<Request>(data);
    let _ = postcard::from_bytes::<Register>(data);
    let _ = postcard::from_bytes::<FromNode>(data);
    let _ = postcard::from_bytes::<ToNode>(data);
}

/// One thing happening to the machine manager, decoded from the fuzzer's bytes.
#[derive(Debug, Serialize, Deserialize)]
pub enum Happening {
    /// A request from the user `uid` (an administrator when the flag is set).
    Client(u32, bool, Request),
    Register(Register),
    FromNode(u32, FromNode),
    Heard(u32),
    /// Time passes, in milliseconds.
    Advance(u16),
}

/// The machine manager's core (no sockets, no clock) fed a sequence of client requests,
/// registrations and node reports decoded from `data`, stepping after each: whatever a
/// client or an authenticated node manager sends, the core must not panic.
pub fn mm_core(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let (nodes, pes) = (1 + u32::from(pick & 3), 1 + u32::from((pick >> 2) & 3));
    let mut options = PolicyOptions::default();
    let policy = match pick >> 4 {
        0..=5 => "fcfs",
        6..=10 => "easy",
        _ => {
            options.mpl = Some(2);
            options.quantum = Some(Dur::from_millis(10));
            "gang"
        }
    };
    let policy =
        cosched_mm::build_policy(policy, nodes, pes, &options).expect("the fuzzed policies build");
    let cfg = CoreConfig {
        nodes,
        pes,
        names: Vec::new(),
        fanout: 2,
        heartbeat: Dur::from_secs(1),
        suspect_after: Dur::from_secs(2),
        down_after: Dur::from_secs(3),
        requeue: pick & 1 == 1,
        kill_wait: Dur::from_millis(50),
        hold_pes_while_completing: pick & 2 == 2,
        keep_jobs: Dur::from_secs(if pick & 4 == 4 { 1 } else { 7 * 86_400 }),
    };
    let mut now = Time::from_secs(1);
    let Ok(mut core) = Core::new(cfg, policy, now, Recovered::default()) else {
        return;
    };
    for (req, h) in (1..).zip(happenings(rest)) {
        let input = match h {
            Happening::Client(uid, admin, request) => Input::Client {
                req,
                request,
                caller: Caller {
                    uid,
                    gid: uid,
                    admin,
                },
            },
            Happening::Register(reg) => Input::Register { req, reg },
            Happening::FromNode(n, msg) => Input::FromNode {
                from: NodeId(n % (nodes + 1)),
                msg,
            },
            Happening::Heard(n) => Input::Heard(NodeId(n % (nodes + 1))),
            Happening::Advance(ms) => {
                now += Dur::from_millis(i64::from(ms));
                core.step(now);
                continue;
            }
        };
        if let Some(w) = core.on(now, input) {
            // Every third change finds the disk full: refused, and nothing may change.
            let result = match w.req % 3 {
                0 => Err("the file system is full (fuzzed)".to_string()),
                _ => Ok(()),
            };
            core.on(now, Input::Written { req: w.req, result });
        }
        core.step(now);
    }
}

/// The happenings encoded in `data`, up to the first that does not decode (at most 256).
pub fn happenings(mut data: &[u8]) -> Vec<Happening> {
    let mut out = Vec::new();
    while out.len() < 256
        && let Ok((h, tail)) = postcard::take_from_bytes::<Happening>(data)
    {
        out.push(h);
        data = tail;
    }
    out
}

/// A job's PMI-1 service on a node, fed lines from its ranks: the first byte picks the job's
/// size, each line is prefixed by the rank that sends it; fences answered as the machine
/// manager would (with what the node sent up).
pub fn pmi(data: &[u8]) {
    let Some((&size, rest)) = data.split_first() else {
        return;
    };
    let size = u32::from(size % 8) + 1;
    let placement = vec![Placement {
        node: NodeId(0),
        ranks: (0..size).map(|r| (r, r)).collect(),
        extra_pes: Vec::new(),
    }];
    let mut job = JobPmi::new(
        JobId(1),
        size,
        &placement,
        (0..size).collect::<BTreeSet<_>>(),
    );
    let text = String::from_utf8_lossy(rest);
    for (n, line) in text.lines().enumerate().take(4096) {
        let rank = line.bytes().next().map_or(0, |b| u32::from(b) % (size + 1));
        for out in job.on_line(rank, line.get(1..).unwrap_or("")) {
            if let cosched_nm::pmi::Out::FenceUp { seq, puts } = out {
                // Every other fence is answered; the rest stay pending for the next lines.
                if n % 2 == 0 {
                    job.fence_done(seq, puts);
                }
            }
        }
    }
}

/// An SWF trace read strictly and leniently; what reads is then simulated under FCFS and
/// EASY on the machine the trace declares (or a small one).
pub fn swf(data: &[u8]) {
    for lenient in [false, true] {
        let opts = ReadOptions {
            procs: if lenient { Some(64) } else { None },
            lenient,
            ..ReadOptions::default()
        };
        let Ok(reader) = Reader::new(BufReader::new(data), "fuzz.swf", opts) else {
            continue;
        };
        let records: Vec<_> = reader.take(200).filter_map(Result::ok).collect();
        if records.is_empty() {
            continue;
        }
        let procs = records
            .iter()
            .map(|r| r.size().unwrap_or(1))
            .max()
            .unwrap_or(1)
            .clamp(1, 4096);
        let work = cosched_sim::trace::prepare(&records, procs, &Default::default(), None);
        for policy in ["fcfs", "easy"] {
            let cfg = PolicyConfig::new(MachineShape::flat(procs, 1));
            let mut p = registry::build(policy, &cfg).expect("builds");
            let _ = cosched_sim::simulate(cfg.machine, &work.jobs, p.as_mut(), Default::default());
        }
    }
}

/// A process-level scenario file (TOML), as `cosched cosim --scenario` reads it.
pub fn scenario(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = cosched_cosim::scenario::Scenario::parse(text, "fuzz.toml");
    }
}

/// Policy options as `--opt KEY=VALUE` lines (and a `--policy-config` file's `[policy]` table
/// when the text parses as one), given to every policy of the registry.
pub fn policy_options(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let options = PolicyOptions {
        mpl: Some(2),
        quantum: Some(Dur::from_secs(1)),
        opts: text.lines().take(64).map(str::to_string).collect(),
        ..PolicyOptions::default()
    };
    let Ok(mut cfg) = cosched_policy::policy_config(MachineShape::flat(16, 2), &options) else {
        return;
    };
    if let Ok(mut doc) = text.parse::<toml::Table>()
        && let Some(toml::Value::Table(t)) = doc.remove("policy")
    {
        cfg.options.extend(t);
    }
    for name in registry::names() {
        let _ = registry::build(name, &cfg);
    }
}

/// A batch script as `cosched submit script.sh` reads it: its `#!` line and its `#SBATCH` /
/// `#COSCHED` directives (parsed with the command line's own options), then what the job's
/// options come to (ranks, array, dependencies); also each line alone as the `--array`,
/// `--dependency`, `--begin` and `--time` values it could be.
pub fn batch_script(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(script) = cosched::cmd::batch::parse_script("fuzz.sh", text, false) {
        let _ = script.opts.ranks();
        let _ = script.opts.schedule();
    }
    for line in text.lines().take(64) {
        let _ = cosched_proto::start_conditions::parse_array(line);
        let _ = cosched_proto::start_conditions::parse_dependency(line);
        let _ = cosched::cmd::batch::parse_begin_at(line, 1_795_000_000_000_000);
        let _ = cosched::cmd::time_limit::parse(line);
    }
}

/// Seed inputs made of real messages, for the targets that decode them.
pub mod seeds {
    use super::*;
    use cosched_proto::jobio::JobIo;
    use cosched_proto::proto::{HeldJob, RankExit, SubmitRequest};
    use std::path::Path;

    fn submit(procs: u32) -> Request {
        Request::Submit(Box::new(SubmitRequest {
            mem: None,
            procs,
            time_limit_us: Some(5_000_000),
            class: None,
            name: Some("fuzz".into()),
            cmd: vec!["true".into()],
            cwd: "/".into(),
            user: Some(1000),
            io: JobIo::default(),
            sched: Default::default(),
            layout: None,
            hold: false,
        }))
    }

    /// A morning of the machine manager: nodes register and join, jobs are submitted,
    /// launched, suspended, cancelled and exit.
    fn morning() -> Vec<Happening> {
        let reg = |n: u32| Register {
            version: cosched_proto::proto::Version::ours(),
            memory: 1 << 40,
            name: format!("n{n}"),
            pes: 2,
            addr: "127.0.0.1:1".into(),
            jobs: Vec::new(),
            incarnation: 7,
        };
        let exit = |job: u64, rank: u32| FromNode::Exited {
            job: JobId(job),
            run: 1,
            exit: RankExit {
                oom: false,
                rank,
                code: Some(0),
                error: None,
            },
        };
        vec![
            Happening::Register(reg(0)),
            Happening::Register(reg(1)),
            Happening::FromNode(
                0,
                FromNode::Joined {
                    incarnation: 7,
                    epoch: 1,
                },
            ),
            Happening::FromNode(
                1,
                FromNode::Joined {
                    incarnation: 7,
                    epoch: 2,
                },
            ),
            Happening::Client(1000, false, submit(2)),
            Happening::Client(1000, false, submit(3)),
            Happening::Advance(5),
            Happening::FromNode(
                0,
                FromNode::Launched {
                    job: JobId(1),
                    run: 1,
                },
            ),
            Happening::Client(1000, false, Request::Suspend(JobId(1))),
            Happening::Client(1000, false, Request::Resume(JobId(1))),
            Happening::Client(
                1000,
                false,
                Request::Jobs(cosched_proto::proto::JobQuery::default()),
            ),
            Happening::Client(1000, false, Request::Status),
            Happening::Heard(1),
            Happening::FromNode(0, exit(1, 0)),
            Happening::FromNode(0, exit(1, 1)),
            Happening::Client(1000, false, Request::Cancel(JobId(2))),
            Happening::Advance(2000),
            Happening::Register(Register {
                jobs: vec![HeldJob {
                    job: JobId(2),
                    run: 1,
                    ranks: vec![RankExit {
                        oom: false,
                        rank: 0,
                        code: None,
                        error: None,
                    }],
                    aborted: None,
                }],
                ..reg(1)
            }),
            Happening::Advance(4000),
            Happening::Client(
                1000,
                false,
                Request::Output {
                    job: JobId(1),
                    step: None,
                    rank: 0,
                    tail: false,
                },
            ),
            Happening::Client(0, true, Request::Shutdown),
        ]
    }

    /// For `frame` (`framed`: whole sealed frames and bare payloads) or `mm_core` (a policy
    /// byte, then the happenings).
    pub fn messages(framed: bool) -> Vec<Vec<u8>> {
        let key = fuzz_key();
        let mut out = Vec::new();
        if framed {
            for h in morning() {
                match h {
                    Happening::Client(_, _, r) => {
                        out.push(key.seal(&r));
                        out.push(postcard::to_stdvec(&r).expect("encodes"));
                    }
                    Happening::Register(r) => out.push(key.seal(&r)),
                    Happening::FromNode(_, m) => out.push(key.seal(&m)),
                    _ => {}
                }
            }
        } else {
            for pick in [0x05u8, 0x76, 0xf9] {
                let mut v = vec![pick];
                for h in morning() {
                    v.extend(postcard::to_stdvec(&h).expect("encodes"));
                }
                out.push(v);
            }
        }
        out
    }

    fn repo_file(path: &str) -> Vec<u8> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path);
        std::fs::read(&p).unwrap_or_else(|e| panic!("seed file {}: {e}", p.display()))
    }

    /// Valid (or nearly valid) inputs for each target, so mutations reach past the first check.
    pub fn for_target(target: &str) -> Vec<Vec<u8>> {
        match target {
            "frame" | "mm_core" => messages(target == "frame"),
            "pmi" => vec![
                b"\x02\x00cmd=init pmi_version=1 pmi_subversion=1\n\x00cmd=get_maxes\n\x01cmd=init pmi_version=1 pmi_subversion=1\n\x00cmd=put kvsname=kvs_1 key=a value=b\n\x00cmd=barrier_in\n\x01cmd=barrier_in\n\x01cmd=get kvsname=kvs_1 key=a\n\x00cmd=finalize\n".to_vec(),
                b"\x04\x00cmd=get_my_kvsname\n\x03cmd=get_appnum\n\x02cmd=get_universe_size\n\x01cmd=abort exitcode=3 message=bye\n\x00mcmd=spawn\n".to_vec(),
            ],
            "swf" => vec![
                b"; MaxProcs: 16\n1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n2 10 0 50 16 -1 -1 16 60 -1 1 2 1 -1 1 -1 -1 -1\n3 11 -1 -1 2 -1 -1 2 10 -1 5 2 1 -1 1 -1 -1 -1\n".to_vec(),
                b"; MaxNodes: 8\n; MaxProcs: 32\n1 0 0 1e3 8 1.5 -1 8 2000 -1 1 3 1 -1 2 -1 -1 -1\n".to_vec(),
            ],
            "scenario" => ["scenarios/fcs-classification.toml", "scenarios/proc-fig4.toml", "scenarios/fcs-512.toml"]
                .iter()
                .map(|p| repo_file(p))
                .collect(),
            "policy_options" => vec![
                repo_file("docs/t3d.toml"),
                b"packing=buddy\nbackfill=true\nreserve_depth=2\nmigration=false\n".to_vec(),
                b"[policy]\nclasses = [\"a\", \"b\"]\nprime_start = \"08:00\"\n".to_vec(),
            ],
            "batch_script" => vec![
            b"#!/bin/sh\n#SBATCH -n 4\n#SBATCH --time=1-02:03:04 -J name\n#SBATCH --array=0-15:4%2\n#COSCHED --dependency=afterok:3:4,afterany:5\n#SBATCH -o out.%A_%a.%t --begin=now+10m\nsrun hostname\n".to_vec(),
            b"#! /usr/bin/env bash -l\n#SBATCH -N 2 --ntasks-per-node=2 --class batch\n#SBATCH --export=ALL,X=1 -e err.%j\n#SBATCH --begin 2026-11-27T08:00\necho\n".to_vec(),
        ],
        other => panic!("no seeds for {other}"),
        }
    }
}
