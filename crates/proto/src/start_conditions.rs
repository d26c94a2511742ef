//! When a job may start, besides the policy's say: dependencies on other jobs (Slurm's
//! `--dependency`), a begin time (`--begin`) and job arrays with a throttle (`--array`).
//!
//! The types travel in a submission and stay with the job's record; the parsers of the
//! `--array` and `--dependency` texts live here so that the command line and the machine
//! manager agree on them. The machine manager enforces them (`mm::deferral`): a job whose
//! conditions are not met stays out of the policy's sight.

use cosched_core::JobId;
use serde::{Deserialize, Serialize};

/// Most tasks one array may have (Slurm's default `MaxArraySize` is 1001).
pub const MAX_ARRAY_TASKS: usize = 10_000;
/// Largest array index accepted.
pub const MAX_ARRAY_INDEX: u32 = 4_000_000;

/// The start conditions of a submission (all optional).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Every one of these must be satisfied (Slurm's `,`).
    pub after: Vec<Dependency>,
    /// Not before this instant (microseconds since the Unix epoch, the machine manager's
    /// clock).
    pub begin_us: Option<i64>,
    /// In a submission: one job per index. In a job's record: `None` (the task's own index
    /// and throttle are in its [`crate::jobio::JobIo::array`]).
    pub array: Option<ArraySpec>,
}

impl Schedule {
    pub fn is_empty(&self) -> bool {
        self.after.is_empty() && self.begin_us.is_none() && self.array.is_none()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DepKind {
    /// Once the other job started (or ended).
    After,
    /// Once the other job ended, however.
    AfterAny,
    /// Once the other job completed with exit code 0; never if it ended otherwise.
    AfterOk,
    /// Once the other job ended otherwise than completed with 0; never if it did.
    AfterNotOk,
}

impl DepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::After => "after",
            DepKind::AfterAny => "afterany",
            DepKind::AfterOk => "afterok",
            DepKind::AfterNotOk => "afternotok",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub kind: DepKind,
    pub job: JobId,
}

impl std::fmt::Display for Dependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.job.0)
    }
}

/// `--array`: the indices, and how many tasks may be let loose at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    pub indices: Vec<u32>,
    pub throttle: Option<u32>,
}

/// One task of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The array's id: the id of its first task (as Slurm's `SLURM_ARRAY_JOB_ID`).
    pub job: JobId,
    pub index: u32,
    /// At most this many tasks of the array are given to the policy at once.
    pub throttle: Option<u32>,
}

/// Parses Slurm's `--dependency`: `TYPE:ID[:ID...][,TYPE:ID...]` with TYPE one of `after`,
/// `afterany`, `afterok`, `afternotok` (all must hold). `?` (any of) and other types are
/// refused by name.
pub fn parse_dependency(text: &str) -> Result<Vec<Dependency>, String> {
    let bad = |why: String| format!("--dependency {text:?}: {why}");
    if text.contains('?') {
        return Err(bad(
            "`?` (any one of) is not supported; separate with `,` (all of)".into(),
        ));
    }
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut fields = part.split(':');
        let kind = match fields.next().unwrap_or("") {
            "after" => DepKind::After,
            "afterany" => DepKind::AfterAny,
            "afterok" => DepKind::AfterOk,
            "afternotok" => DepKind::AfterNotOk,
            other => {
                return Err(bad(format!(
                    "unknown dependency type {other:?} (cosched knows after, afterany, afterok, afternotok)"
                )));
            }
        };
        let mut any = false;
        for id in fields {
            // Slurm allows `ID+minutes` for `after`; and `ID_INDEX` for one array task.
            let n: u64 = id
                .parse()
                .map_err(|_| bad(format!("{id:?} is not a job id")))?;
            out.push(Dependency {
                kind,
                job: JobId(n),
            });
            any = true;
        }
        if !any {
            return Err(bad(format!("{part:?} names no job (TYPE:ID[:ID...])")));
        }
    }
    if out.is_empty() {
        return Err(bad("no dependency given".into()));
    }
    Ok(out)
}

/// Parses Slurm's `--array`: `A-B[:STEP]` and single indices, comma-separated, with an
/// optional `%N` throttle at the end (`1-10%2`, `1,3,5`, `0-15:4`).
pub fn parse_array(text: &str) -> Result<ArraySpec, String> {
    let bad = |why: String| format!("--array {text:?}: {why}");
    let (list, throttle) = match text.rsplit_once('%') {
        Some((l, t)) => {
            let t: u32 = t
                .trim()
                .parse()
                .map_err(|_| bad(format!("throttle {t:?} is not a number")))?;
            if t == 0 {
                return Err(bad("the throttle (%N) must be at least 1".into()));
            }
            (l, Some(t))
        }
        None => (text, None),
    };
    let num = |s: &str| -> Result<u32, String> {
        let n: u32 = s
            .trim()
            .parse()
            .map_err(|_| bad(format!("{s:?} is not an index")))?;
        if n > MAX_ARRAY_INDEX {
            return Err(bad(format!("index {n} is above {MAX_ARRAY_INDEX}")));
        }
        Ok(n)
    };
    let mut indices = Vec::new();
    for part in list.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad("an empty element (expected A-B[:STEP] or N)".into()));
        }
        let (range, step) = match part.split_once(':') {
            Some((r, s)) => (r, num(s)?),
            None => (part, 1),
        };
        if step == 0 {
            return Err(bad("a step must be at least 1".into()));
        }
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(range)?;
                (n, n)
            }
        };
        if b < a {
            return Err(bad(format!("{part:?} runs backwards")));
        }
        let mut i = a;
        while i <= b {
            indices.push(i);
            if indices.len() > MAX_ARRAY_TASKS {
                return Err(bad(format!("more than {MAX_ARRAY_TASKS} tasks")));
            }
            i = match i.checked_add(step) {
                Some(n) => n,
                None => break,
            };
        }
    }
    indices.sort_unstable();
    indices.dedup();
    Ok(ArraySpec { indices, throttle })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_as_slurm_writes_them() {
        let a = parse_array("1-10%2").unwrap();
        assert_eq!(a.indices, (1..=10).collect::<Vec<_>>());
        assert_eq!(a.throttle, Some(2));
        assert_eq!(parse_array("1,3,5").unwrap().indices, vec![1, 3, 5]);
        assert_eq!(parse_array("0-15:4").unwrap().indices, vec![0, 4, 8, 12]);
        assert_eq!(
            parse_array("7,1-3").unwrap().indices,
            vec![1, 2, 3, 7],
            "sorted"
        );
        for bad in ["", "3-1", "1-10%0", "a", "1-5:0", "1-20000", "1,,2"] {
            assert!(parse_array(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn dependencies_as_slurm_writes_them() {
        let d = parse_dependency("afterok:3:4,afternotok:5").unwrap();
        assert_eq!(
            d.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            ["afterok:3", "afterok:4", "afternotok:5"]
        );
        assert!(
            parse_dependency("singleton")
                .unwrap_err()
                .contains("singleton")
        );
        assert!(
            parse_dependency("afterok")
                .unwrap_err()
                .contains("names no job")
        );
        assert!(parse_dependency("afterok:1?afterany:2").is_err());
        assert!(parse_dependency("afterok:x").is_err());
    }
}
