//! Marker files that ranks of the fault tests write, to check afterwards that no two runs of
//! a rank overlapped and that every completed job ran each rank to its end.
//!
//! A rank appends `S rank node start_ns dur_ms` to a file named by its job id when it starts
//! (the start time taken before its SIGTERM trap is set), and `E rank end_ns` when it ends,
//! also when it is terminated (`SIGTERM`, trapped): [`script`] writes such a rank. A rank
//! without its `E` line was SIGKILLed and ran at the latest until `dur_ms` + [`SLACK`] after
//! it started (it runs nothing longer).

use std::collections::BTreeMap;
use std::path::Path;

/// How long past its planned end a rank without an end marker may have run (it was
/// SIGKILLed: its `sleep` may still finish).
pub const SLACK: u64 = 100;

/// A shell script for `sh -c` that leaves the markers in `dir` and sleeps `dur_ms`.
pub fn script(dir: &str, dur_ms: u64) -> String {
    format!(
        "f={dir}/$COSCHED_JOB_ID; t=$(date +%s%N); trap 'echo \"E $COSCHED_RANK $(date +%s%N)\" >> $f; exit 143' TERM; echo \"S $COSCHED_RANK $COSCHED_NODE $t {dur_ms}\" >> $f; sleep {}.{:03}; echo \"E $COSCHED_RANK $(date +%s%N)\" >> $f",
        dur_ms / 1000,
        dur_ms % 1000
    )
}

#[derive(Debug)]
pub struct Start {
    pub rank: u32,
    /// Shown in failure messages (through Debug) only.
    #[allow(dead_code)]
    pub node: String,
    pub at: u64,
    pub dur_ms: u64,
    pub end: Option<u64>,
}

impl Start {
    /// When it ended, or the latest it may have (see the module documentation).
    pub fn ended_by(&self) -> u64 {
        self.end
            .unwrap_or(self.at + (self.dur_ms + SLACK) * 1_000_000)
    }
}

/// The rank starts recorded in the marker file of one job, with their ends matched.
pub fn starts(file: &Path) -> Vec<Start> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out: Vec<Start> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["S", rank, node, at, dur] => out.push(Start {
                rank: rank.parse().unwrap(),
                node: node.to_string(),
                at: at.parse().unwrap(),
                dur_ms: dur.parse().unwrap(),
                end: None,
            }),
            ["E", rank, at] => {
                let rank: u32 = rank.parse().unwrap();
                let at: u64 = at.parse().unwrap();
                // The latest start of that rank before this end without an end yet.
                if let Some(s) = out
                    .iter_mut()
                    .rev()
                    .find(|s| s.rank == rank && s.end.is_none() && s.at <= at)
                {
                    s.end = Some(at);
                }
            }
            // A rank terminated while its trap's `date` ran (a second signal): no time.
            ["E", _rank] => {}
            // A torn file is reported, not ignored.
            _ => panic!("{}: unexpected marker line {line:?}", file.display()),
        }
    }
    out
}

/// The starts of each rank, by rank.
pub fn by_rank(starts: &[Start]) -> BTreeMap<u32, Vec<&Start>> {
    let mut per_rank: BTreeMap<u32, Vec<&Start>> = BTreeMap::new();
    for s in starts {
        per_rank.entry(s.rank).or_default().push(s);
    }
    per_rank
}

/// The first pair of runs of one rank where the later started before the earlier ended.
pub fn overlap<'a>(runs: &[&'a Start]) -> Option<(&'a Start, &'a Start)> {
    let mut sorted = runs.to_vec();
    sorted.sort_by_key(|s| s.at);
    sorted
        .windows(2)
        .find(|w| w[0].ended_by() > w[1].at)
        .map(|w| (w[0], w[1]))
}

/// The lines of a machine manager's log that name job `id`.
pub fn job_log(log: &str, id: u64) -> String {
    let (a, b) = (format!("job {id}:"), format!("job {id} "));
    log.lines()
        .filter(|l| l.contains(&a) || l.contains(&b))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Processes whose environment carries `CHAOS_MARK=tag`.
pub fn carriers(tag: &str) -> Vec<(i32, String)> {
    let needle = format!("CHAOS_MARK={tag}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            let cmd = std::fs::read_to_string(e.path().join("cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            found.push((pid, cmd));
        }
    }
    found
}
