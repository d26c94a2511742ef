//! Schedules pinned by hash: `cosched sim --jobs-out` of small model runs (T3D and gang at
//! several machine sizes) and of the first 20,000 jobs of every shared trace (every
//! space-sharing policy; gang and T3D on KTH-SP2) must stay byte-identical, so a change meant
//! to make a policy or the simulator faster (or tidier) cannot silently change what it decides.
//!
//! The T3D and gang hashes were computed before the PE-count work of issue 16 (T3D on runs and
//! bitsets, gang's word-level packing), the space-sharing ones before the speed work on the
//! waiting queue; that work left them unchanged.
//!
//! **When a change to these policies is meant to change their schedules**, run
//! `cargo test -p cosched --test schedule_hashes`: the failure lists, for every case whose
//! schedule changed, its new hash to put in `CASES` (or
//! `TRACE_CASES`). Update them in the same commit as the change, and say in its message why the
//! schedules changed.

mod support;

use std::process::Command;

use sha2::{Digest, Sha256};

/// `(name, arguments of cosched, sha256 of its --jobs-out CSV)`.
const CASES: &[(&str, &str, &str)] = &[
    (
        "t3d-128",
        "sim --model lublin --jobs 400 --procs 128 --load 0.8 --seed 1 --policy t3d",
        "169efb689881c95fd13508d5211e34f5fb04255ce3e2c8cad87f724e42f1509d",
    ),
    (
        "t3d-4100",
        "sim --model lublin --jobs 400 --procs 4100 --load 0.9 --seed 2 --policy t3d",
        "6ac50cc9d54ff5c51180c4b825c22c67f2122d0cf960b4e0c3c20f4ec5460d84",
    ),
    (
        "t3d-1000-exact",
        "sim --model lublin --jobs 600 --procs 1000 --load 1.2 --seed 3 --policy t3d --estimates exact",
        "2e089b89475f024ddf7387532d2d976d223c26e4c3ee6c47e2a0929624537a29",
    ),
    (
        "gang-buddy-200",
        "sim --model lublin --jobs 400 --procs 200 --load 0.8 --seed 1 --policy gang --quantum 60s --mpl 3",
        "3073d14e1a5f30e606499ccb3fbdc0e533aa2f008facf11027d3f072845f5c30",
    ),
    (
        "gang-firstfit-4100",
        "sim --model lublin --jobs 400 --procs 4100 --load 0.9 --seed 2 --policy gang --quantum 60s --mpl 3 --opt packing=first-fit --context-switch 1s",
        "99a4338b55094d326ec5994754eb3d22dd2bb01b60b4c9dfad566cc0e6cabddd",
    ),
    (
        "gang-bestfit-4100",
        "sim --model lublin --jobs 400 --procs 4100 --load 0.9 --seed 2 --policy gang --quantum 60s --mpl 3 --opt packing=best-fit",
        "60b70774e0b8b08491978deda56a61fda614607199a6b3a6f65d724b5a505520",
    ),
    (
        "gang-buddy-4100",
        "sim --model lublin --jobs 400 --procs 4100 --load 0.9 --seed 2 --policy gang --quantum 600s",
        "2b20f54ec5bf295f2c69f8e147e7ad98104991168a4425d73604cc7a6a49a8b9",
    ),
];

/// Like `CASES`, on shared traces: `(name, trace file, arguments with {trace}, sha256)`.
const TRACE_CASES: &[(&str, &str, &str, &str)] = &[
    (
        "gang-kth-3000",
        KTH,
        "sim --trace {trace} --first 3000 --policy gang --quantum 10s",
        "2eb2642da2199e9ff103be1fa5b6a0cbc7dc735285aae4a1677de35832c93054",
    ),
    (
        "t3d-kth-3000",
        KTH,
        "sim --trace {trace} --first 3000 --policy t3d",
        "ba019cb39135e2ac8e03df2daa17532d23af785296b16857fe02155bae438ea8",
    ),
    (
        "fcfs-kth",
        KTH,
        "sim --trace {trace} --first 20000 --policy fcfs",
        "ae6c0ec9fb5168ec6b3d7a1e213a2a4cb9ffe1c254684b8d8068c09df8eb639a",
    ),
    (
        "easy-kth",
        KTH,
        "sim --trace {trace} --first 20000 --policy easy",
        "f6828b991c035e0eebdefaa1b7e72ae5458b5ac62a7e601031b492d087656aac",
    ),
    (
        "conservative-kth",
        KTH,
        "sim --trace {trace} --first 20000 --policy conservative",
        "be49ee339cfd1ae9f36d44db6b00ac5520e534be25327180b91d3c3c37199c27",
    ),
    (
        "fcfs-sdsc-blue",
        BLUE,
        "sim --trace {trace} --first 20000 --policy fcfs",
        "549a6ed8b0fc9aced992c044ca056fb2a71e70a8e0895a1406dcbdd96ff8aa4e",
    ),
    (
        "easy-sdsc-blue",
        BLUE,
        "sim --trace {trace} --first 20000 --policy easy",
        "e857654ba8c389369895149399cd9fc720184831501d9a73d82874960c899807",
    ),
    (
        "conservative-sdsc-blue",
        BLUE,
        "sim --trace {trace} --first 20000 --policy conservative",
        "1c4c55d5c86f6964a2bd7c50f9af66eae8db0c1b19448df2b6b0dd90bf1b33a1",
    ),
    (
        "fcfs-hpc2n",
        HPC2N,
        "sim --trace {trace} --first 20000 --policy fcfs",
        "e503e7d9511b787ed2fad959858987fd0417e4badf1757444afe4f47ffddb741",
    ),
    (
        "easy-hpc2n",
        HPC2N,
        "sim --trace {trace} --first 20000 --policy easy",
        "5b6af5a001d5ee5fc878edaea7b320beaa453adcc5ece68c14014f1e3c0dfb5e",
    ),
    (
        "conservative-hpc2n",
        HPC2N,
        "sim --trace {trace} --first 20000 --policy conservative",
        "e2150d46e8766390ef95350abb65c5c71796c8c67f415e41ca36adaa896e7e98",
    ),
];

const KTH: &str = "KTH-SP2-1996-2.1-cln.swf.gz";
const BLUE: &str = "SDSC-BLUE-2000-4.2-cln.swf.gz";
const HPC2N: &str = "HPC2N-2002-2.1-cln.swf.gz";

/// The sha256 (hex) of the `--jobs-out` CSV of `cosched ARGS`.
fn schedule_hash(name: &str, args: &str) -> String {
    let dir = support::scratch_dir("hashes", name);
    let csv = dir.path().join(format!("{name}.csv"));
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args.split_whitespace())
        .arg("--jobs-out")
        .arg(&csv)
        .output()
        .expect("cosched runs");
    assert!(
        out.status.success(),
        "{name}: cosched {args} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The schedule, as pinned before the CSV grew provenance lines (they name temporary
    // paths) and the trace's user and queue columns (the last two, never quoted: numbers).
    let text = std::fs::read_to_string(&csv).unwrap();
    let bytes: Vec<u8> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let cut = l.rmatch_indices(',').nth(1).map_or(l.len(), |(i, _)| i);
            format!("{}\n", &l[..cut])
        })
        .collect::<String>()
        .into_bytes();
    assert!(
        bytes.iter().filter(|&&b| b == b'\n').count() > 100,
        "{name}: too few jobs in the schedule to pin anything"
    );
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks every case `(name, trace file if any, arguments, hash)` and fails once, listing every
/// changed case with its new hash. Cases on a trace that is not there are left out, with a
/// notice.
fn check<'a>(cases: impl Iterator<Item = (&'a str, Option<&'a str>, &'a str, &'a str)>) {
    let mut changed = Vec::new();
    for (name, trace, args, want) in cases {
        let run = match trace {
            Some(file) => {
                let Some(path) =
                    cosched_workload::shared::trace(file, &format!("the {name} schedule hash"))
                else {
                    continue;
                };
                args.replace("{trace}", path.to_str().expect("a UTF-8 path"))
            }
            None => args.to_string(),
        };
        let got = schedule_hash(name, &run);
        if got != want {
            changed.push(format!("    {name}: {got:?}"));
        }
    }
    assert!(
        changed.is_empty(),
        "these schedules changed; if that is intended, put the new hashes in \
         crates/cli/tests/schedule_hashes.rs (and say why in the commit):\n{}",
        changed.join("\n")
    );
}

#[test]
fn t3d_and_gang_schedules_on_the_model_are_unchanged() {
    check(CASES.iter().map(|&(n, a, h)| (n, None, a, h)));
}

#[test]
fn schedules_on_the_shared_traces_are_unchanged() {
    check(TRACE_CASES.iter().map(|&(n, t, a, h)| (n, Some(t), a, h)));
}
