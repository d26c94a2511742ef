//! Schedules pinned by hash: `cosched sim --jobs-out` of small model runs (T3D and gang at
//! several machine sizes), of the first 20,000 jobs of every shared trace (every
//! space-sharing policy; gang and T3D on KTH-SP2) and of every job of the shared traces (T3D,
//! prime, conservative; Scojo-PECT and G-LOMARC-TS in a test run by name) must stay
//! byte-identical, so a change meant to make a policy or the simulator faster (or tidier)
//! cannot silently change what it decides.
//!
//! The T3D and gang hashes were computed before T3D's PE state moved to runs and
//! bitsets and gang packed by words, the space-sharing ones before the speed work on the
//! waiting queue; that work left them unchanged.
//!
//! **When a change to these policies is meant to change their schedules**, run
//! `cargo test -p cosched --test schedule_hashes`: the failure lists, for every case whose
//! schedule changed, its new hash to put in `CASES` (or `TRACE_CASES`, `WHOLE_TRACE_CASES`,
//! `SLICED_WHOLE_TRACE_CASES`). Update them in the same commit as the change, and say in its
//! message why the schedules changed.

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

/// Like `TRACE_CASES`, on every job of the shared traces: the policies whose passes were made
/// to skip the jobs that cannot act (T3D, prime) and conservative backfilling. Hashes of main's
/// schedules before that work (`cosched sim --trace T --policy P --jobs-out F`).
const WHOLE_TRACE_CASES: &[(&str, &str, &str, &str)] = &[
    (
        "t3d-kth-whole",
        KTH,
        "sim --trace {trace} --policy t3d",
        "3a981017db9bb34d3b06193ae475b1e08c9af1ed7eba6667e578cbab18c73b49",
    ),
    (
        "t3d-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy t3d",
        "a90f22acab231901fcc7e024d2124b29a8ed17d996214dbbc8a10d0adce82e1e",
    ),
    (
        "t3d-sdsc-blue-whole",
        BLUE,
        "sim --trace {trace} --policy t3d",
        "746791e7930d39dca6aa1696ea6eec48d91a764b69bb572e76ddb09cf2fcf0ad",
    ),
    (
        "prime-kth-whole",
        KTH,
        "sim --trace {trace} --policy prime",
        "52fe190b7d1f150b614f9344bfd53f41b26481dfc9bfacecae5e11a2840c53c6",
    ),
    (
        "prime-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy prime",
        "dbbe92a7f7c9c797e028988d1c977c3c400d77c5e9b16a7e65cd0e1f4dac5311",
    ),
    (
        "prime-sdsc-blue-whole",
        BLUE,
        "sim --trace {trace} --policy prime",
        "ada1ae5685b99857a44ce72ace2a9c58202d2dfd50d50109469e26876c465046",
    ),
    (
        "conservative-kth-whole",
        KTH,
        "sim --trace {trace} --policy conservative",
        "0ce75f5fc549f008486e80cda8243f8a7d5a6727bf7f9d5c6aae0376c3f4a529",
    ),
    (
        "conservative-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy conservative",
        "4b0ec8b50248b22defe9f9ae779abdc7e9199cd2112de5a8888d79fedf665478",
    ),
    (
        "conservative-sdsc-blue-whole",
        BLUE,
        "sim --trace {trace} --policy conservative",
        "5106c8f189bd261478f91c23ad6db69f388567ab82f1673dacbb4772a6c697fa",
    ),
];

/// Like `WHOLE_TRACE_CASES`, for the time-slicing policies: Scojo-PECT and G-LOMARC-TS with
/// each of its variants. Hashes of main's schedules, computed once with a release build
/// (`cosched sim --trace T --policy P [--opt variant=V] --jobs-out F`); on HPC2N and
/// SDSC-BLUE one run takes minutes of a release build, too long for the suite, so the test
/// that checks them is run by name, in a release build (see its attribute).
const SLICED_WHOLE_TRACE_CASES: &[(&str, &str, &str, &str)] = &[
    (
        "scojo-pect-kth-whole",
        KTH,
        "sim --trace {trace} --policy scojo-pect",
        "94198d5e99007c4d3b9f6e3fb3950229b80f37f4416b06b86e0334fb463211e0",
    ),
    (
        "scojo-pect-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy scojo-pect",
        "8efab589cb11c4938c710755fa63a6ee9c8fc6533d49f86731dd891a4e00f80c",
    ),
    (
        "scojo-pect-sdsc-blue-whole",
        BLUE,
        "sim --trace {trace} --policy scojo-pect",
        "2a113a7fe74faa06f361fc9f765acee8f0b0a7d8b7e0e59828db3ebade5937c0",
    ),
    (
        "glomarc-kth-whole",
        KTH,
        "sim --trace {trace} --policy glomarc",
        "37b554615e8e3ecb31c3a2772dfb59a21c08de1afe0f560b34b5ec3c4c414609",
    ),
    (
        "glomarc-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy glomarc",
        "70390d63d62dc914319638130ac5ec3874dbadda620e02ad58a14623084371e7",
    ),
    (
        "glomarc-sdsc-blue-whole",
        BLUE,
        "sim --trace {trace} --policy glomarc",
        "e3117459f4f1cd4d6cca90ca2b2158a79ff5bb150064bd76594b269ff192174d",
    ),
    (
        "glomarc-cst-kth-whole",
        KTH,
        "sim --trace {trace} --policy glomarc --opt variant=cst",
        "0de4cfd5724bac3ba4e7794f4fa865b5120a6f8495d5bfe98f53f406b2685d89",
    ),
    (
        "glomarc-cst-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy glomarc --opt variant=cst",
        "3c79e9b1df380f9a03defe4e36bccaec4c25280177cb0bc9af6cfc6054a045d3",
    ),
    (
        "glomarc-cstws-kth-whole",
        KTH,
        "sim --trace {trace} --policy glomarc --opt variant=cstws",
        "609a5ec665d1d9baa6f00e0645e431a3ce1dc074963c0e44a5d1762bcaae3694",
    ),
    (
        "glomarc-cstws-hpc2n-whole",
        HPC2N,
        "sim --trace {trace} --policy glomarc --opt variant=cstws",
        "a8c33c0443e1edf02b7bb8b1298376e8342a8ee3281e525f120f78736c87e8e9",
    ),
    (
        "glomarc-fbo-kth-whole",
        KTH,
        "sim --trace {trace} --policy glomarc --opt variant=fbo",
        "6809962f5c4aa688d89216d4a75dc442364c4529d3825f5b54d35b595785ded2",
    ),
    (
        "glomarc-ns-kth-whole",
        KTH,
        "sim --trace {trace} --policy glomarc --opt variant=ns",
        "e72f599eb34ed2f3ad02b0280693dc710f00535dda6ad37edb114deb46ed822e",
    ),
    (
        "glomarc-nh-kth-whole",
        KTH,
        "sim --trace {trace} --policy glomarc --opt variant=nh",
        "e7a1a2707bcb6d0774559ed72484a426b17daa07e68a2a3cec081533d3005675",
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

#[test]
fn whole_trace_schedules_of_t3d_prime_and_conservative_are_unchanged() {
    check(
        WHOLE_TRACE_CASES
            .iter()
            .map(|&(n, t, a, h)| (n, Some(t), a, h)),
    );
}

#[test]
#[ignore = "minutes of a release build: cargo test --release -p cosched --test schedule_hashes -- --ignored"]
fn whole_trace_schedules_of_the_time_slicing_policies_are_unchanged() {
    check(
        SLICED_WHOLE_TRACE_CASES
            .iter()
            .map(|&(n, t, a, h)| (n, Some(t), a, h)),
    );
}
