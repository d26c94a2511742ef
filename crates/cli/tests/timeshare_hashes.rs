//! The schedules of T3D and gang, pinned by hash: `cosched sim --jobs-out` of a few small runs
//! must stay byte-identical, so a change meant to make these policies faster (or tidier)
//! cannot silently change what they decide.
//!
//! The hashes were computed before the PE-count work of issue 16 (T3D on runs and bitsets,
//! gang's word-level packing) and that work left them unchanged.
//!
//! **When a change to these policies is meant to change their schedules**, run
//! `cargo test -p cosched --test timeshare_hashes`: the failure lists, for every case whose
//! schedule changed, the line to put in `CASES` (or `TRACE_CASES`) instead, with the new
//! hash. Update them in the same commit as the change, and say in its message why the
//! schedules changed.

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

/// Like `CASES`, on the first 3,000 jobs of the shared KTH-SP2 trace (`{trace}` in the
/// arguments).
const TRACE_CASES: &[(&str, &str, &str)] = &[
    (
        "gang-kth-3000",
        "sim --trace {trace} --first 3000 --policy gang --quantum 10s",
        "2eb2642da2199e9ff103be1fa5b6a0cbc7dc735285aae4a1677de35832c93054",
    ),
    (
        "t3d-kth-3000",
        "sim --trace {trace} --first 3000 --policy t3d",
        "ba019cb39135e2ac8e03df2daa17532d23af785296b16857fe02155bae438ea8",
    ),
];

const KTH: &str = "KTH-SP2-1996-2.1-cln.swf.gz";

/// The sha256 (hex) of the `--jobs-out` CSV of `cosched ARGS`.
fn schedule_hash(name: &str, args: &str) -> String {
    let dir = std::env::temp_dir().join(format!("cosched-hashes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join(format!("{name}.csv"));
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
    let bytes = std::fs::read(&csv).unwrap();
    assert!(
        bytes.iter().filter(|&&b| b == b'\n').count() > 100,
        "{name}: too few jobs in the schedule to pin anything"
    );
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks every case and fails once, listing every changed case with its new line.
fn check(cases: &[(&str, &str, &str)], trace: Option<&str>) {
    let mut changed = Vec::new();
    for &(name, args, want) in cases {
        let run = match trace {
            Some(t) => args.replace("{trace}", t),
            None => args.to_string(),
        };
        let got = schedule_hash(name, &run);
        if got != want {
            changed.push(format!("    ({name:?}, {args:?}, {got:?}),"));
        }
    }
    assert!(
        changed.is_empty(),
        "these schedules changed; if that is intended, put these lines in \
         crates/cli/tests/timeshare_hashes.rs (and say why in the commit):\n{}",
        changed.join("\n")
    );
}

#[test]
fn t3d_and_gang_schedules_on_the_model_are_unchanged() {
    check(CASES, None);
}

#[test]
fn t3d_and_gang_schedules_on_kth_are_unchanged() {
    let Some(path) = cosched_workload::shared::trace(KTH, "the T3D and gang hashes on KTH-SP2")
    else {
        return;
    };
    check(TRACE_CASES, Some(path.to_str().expect("a UTF-8 path")));
}
