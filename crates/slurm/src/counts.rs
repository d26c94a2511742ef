//! Slurm's per-node count lists: `2(x3),1` is 2, 2, 2, 1 — the form of
//! `SLURM_TASKS_PER_NODE`, `SLURM_JOB_CPUS_PER_NODE` and `SLURM_STEP_TASKS_PER_NODE`, which
//! Open MPI's and MPICH's launchers parse to learn how many ranks go on each node.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("count list {list:?}: {part:?} is not N or N(xM)")]
pub struct CountsError {
    pub list: String,
    pub part: String,
}

/// The compressed form of `counts`: runs of equal counts as `N(xM)`.
pub fn compress(counts: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let run = counts[i..].iter().take_while(|&&c| c == counts[i]).count();
        parts.push(if run > 1 {
            format!("{}(x{run})", counts[i])
        } else {
            counts[i].to_string()
        });
        i += run;
    }
    parts.join(",")
}

/// The counts of a compressed list.
pub fn expand(list: &str) -> Result<Vec<u32>, CountsError> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || CountsError {
            list: list.into(),
            part: part.into(),
        };
        let (n, times) = match part.split_once("(x") {
            Some((n, rest)) => {
                let times = rest.strip_suffix(')').ok_or_else(bad)?;
                (n, times.parse::<usize>().map_err(|_| bad())?)
            }
            None => (part, 1),
        };
        let n: u32 = n.parse().map_err(|_| bad())?;
        if times == 0 || times > crate::hostlist::MAX_HOSTS {
            return Err(bad());
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_are_written_as_slurm_does() {
        assert_eq!(compress(&[2, 2, 2, 1]), "2(x3),1");
        assert_eq!(compress(&[1, 1]), "1(x2)");
        assert_eq!(compress(&[4]), "4");
        assert_eq!(compress(&[1, 2, 1]), "1,2,1");
        assert_eq!(compress(&[]), "");
        assert_eq!(expand("2(x3),1").unwrap(), vec![2, 2, 2, 1]);
        assert_eq!(expand("4(x30)").unwrap().len(), 30);
        for bad in ["2(x)", "2(x3", "x", "2(x0)", "-1"] {
            assert!(expand(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn compress_then_expand_gives_the_counts_back(v in proptest::collection::vec(1u32..4, 0..40)) {
            prop_assert_eq!(expand(&compress(&v)).unwrap(), v);
        }
    }
}
