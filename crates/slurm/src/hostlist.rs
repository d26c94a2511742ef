//! Slurm's hostlists: `n[01-04,07],gpu1` stands for n01, n02, n03, n04, n07 and gpu1.
//!
//! The one home of the form: `SLURM_JOB_NODELIST`, `squeue`'s and `sacct`'s node lists, and
//! the administrator's configuration (`n[01-16]`) all read and write it here.
//!
//! As in Slurm, a range's width is the width of its first number as written (`[01-10]` is
//! zero-padded to two digits, `[1-10]` is not), several bracketed parts multiply
//! (`r[1-2]n[1-2]` is four names), and a name's trailing digits are its number when names are
//! compressed. Compression keeps the order it is given (Slurm lists a job's nodes in node
//! order): consecutive numbers with the same prefix join into one range, and ranges of the
//! same prefix that follow each other share one bracket.

use thiserror::Error;

/// Most names one hostlist may expand to: a typing error such as `n[1-99999999]` is refused
/// rather than allocated.
pub const MAX_HOSTS: usize = 1 << 20;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HostlistError {
    #[error("hostlist {list:?}: unbalanced brackets")]
    Brackets { list: String },
    #[error("hostlist {list:?}: {range:?} is not a range (N or N-M, digits only)")]
    Range { list: String, range: String },
    #[error("hostlist {list:?}: {range:?} runs backwards")]
    Backwards { list: String, range: String },
    #[error("hostlist {list:?}: an empty name")]
    Empty { list: String },
    #[error("hostlist {list:?}: more than {MAX_HOSTS} names")]
    TooMany { list: String },
}

/// The names a hostlist stands for, in the order written (duplicates kept).
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for item in split_top(list)? {
        let item = item.trim();
        if item.is_empty() {
            // `a,,b` and a trailing comma: Slurm skips them.
            continue;
        }
        expand_item(list, item, &mut out)?;
    }
    Ok(out)
}

/// Splits at commas outside brackets.
fn split_top(list: &str) -> Result<Vec<&str>, HostlistError> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(HostlistError::Brackets { list: list.into() });
        }
    }
    if depth != 0 {
        return Err(HostlistError::Brackets { list: list.into() });
    }
    parts.push(&list[start..]);
    Ok(parts)
}

/// Expands one item (no top-level comma), each bracket multiplying the names so far.
fn expand_item(list: &str, item: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    let mut names = vec![String::new()];
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| HostlistError::Brackets { list: list.into() })?;
        let literal = &rest[..open];
        let numbers = numbers_of(list, &rest[open + 1..close])?;
        let mut next = Vec::with_capacity(names.len() * numbers.len());
        for n in &names {
            for num in &numbers {
                next.push(format!("{n}{literal}{num}"));
            }
            if next.len() + out.len() > MAX_HOSTS {
                return Err(HostlistError::TooMany { list: list.into() });
            }
        }
        names = next;
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        return Err(HostlistError::Brackets { list: list.into() });
    }
    for n in names {
        let name = n + rest;
        if name.is_empty() {
            return Err(HostlistError::Empty { list: list.into() });
        }
        out.push(name);
    }
    if out.len() > MAX_HOSTS {
        return Err(HostlistError::TooMany { list: list.into() });
    }
    Ok(())
}

/// The numbers of a bracket's contents (`01-04,07`), zero-padded to each range's width.
fn numbers_of(list: &str, inside: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for range in inside.split(',') {
        let range = range.trim();
        let bad = || HostlistError::Range {
            list: list.into(),
            range: range.into(),
        };
        let (lo_s, hi_s) = range.split_once('-').unwrap_or((range, range));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo_s) || !digits(hi_s) {
            return Err(bad());
        }
        let lo: u64 = lo_s.parse().map_err(|_| bad())?;
        let hi: u64 = hi_s.parse().map_err(|_| bad())?;
        if hi < lo {
            return Err(HostlistError::Backwards {
                list: list.into(),
                range: range.into(),
            });
        }
        if (hi - lo) as usize >= MAX_HOSTS {
            return Err(HostlistError::TooMany { list: list.into() });
        }
        let width = lo_s.len();
        out.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// A name split into its prefix and trailing number (with the number's written width).
struct Numbered<'a> {
    prefix: &'a str,
    num: u64,
    width: usize,
}

fn numbered(name: &str) -> Option<Numbered<'_>> {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 18 {
        return None;
    }
    let (prefix, num) = name.split_at(name.len() - digits);
    Some(Numbered {
        prefix,
        num: num.parse().ok()?,
        width: digits,
    })
}

/// Whether two written widths can share a range: the same, or neither zero-padded (`n9`
/// and `n10`).
fn widths_join(a: (u64, usize), b: (u64, usize)) -> bool {
    let padded = |(n, w): (u64, usize)| w > n.to_string().len();
    a.1 == b.1 || (!padded(a) && !padded(b))
}

/// One run of a compressed list: a prefix with its ranges, or a name without a number.
enum Group {
    Ranges {
        prefix: String,
        /// `(lo, hi, width)`.
        ranges: Vec<(u64, u64, usize)>,
    },
    Plain(String),
}

/// The compressed hostlist of `names`, in their order.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let mut groups: Vec<Group> = Vec::new();
    for name in names.iter().map(AsRef::as_ref) {
        let Some(n) = numbered(name) else {
            groups.push(Group::Plain(name.to_string()));
            continue;
        };
        if let Some(Group::Ranges { prefix, ranges }) = groups.last_mut()
            && prefix == n.prefix
        {
            let last = ranges.last_mut().expect("a group has a range");
            if n.num == last.1 + 1 && widths_join((last.1, last.2), (n.num, n.width)) {
                last.1 = n.num;
                last.2 = last.2.min(n.width);
            } else {
                ranges.push((n.num, n.num, n.width));
            }
            continue;
        }
        groups.push(Group::Ranges {
            prefix: n.prefix.to_string(),
            ranges: vec![(n.num, n.num, n.width)],
        });
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|g| match g {
            Group::Plain(s) => s,
            Group::Ranges { prefix, ranges } => {
                let text: Vec<String> = ranges
                    .iter()
                    .map(|&(lo, hi, w)| {
                        if lo == hi {
                            format!("{lo:0w$}")
                        } else {
                            format!("{lo:0w$}-{hi:0w$}")
                        }
                    })
                    .collect();
                if ranges.len() == 1 && ranges[0].0 == ranges[0].1 {
                    format!("{prefix}{}", text[0])
                } else {
                    format!("{prefix}[{}]", text.join(","))
                }
            }
        })
        .collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn expands_as_slurm_writes_them() {
        assert_eq!(
            expand("n[01-04,07],gpu1").unwrap(),
            names(&["n01", "n02", "n03", "n04", "n07", "gpu1"])
        );
        assert_eq!(expand("n[9-11]").unwrap(), names(&["n9", "n10", "n11"]));
        assert_eq!(
            expand("r[1-2]n[1-2]").unwrap(),
            names(&["r1n1", "r1n2", "r2n1", "r2n2"])
        );
        assert_eq!(expand("n[1-2]-ib").unwrap(), names(&["n1-ib", "n2-ib"]));
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
        assert_eq!(expand("a,,b,").unwrap(), names(&["a", "b"]));
        for bad in ["n[1-", "n]1[", "n[a-b]", "n[3-1]", "n[1-2", "n[[1]]", "n[]"] {
            assert!(expand(bad).is_err(), "{bad:?} accepted");
        }
        assert!(matches!(
            expand("n[1-99999999]"),
            Err(HostlistError::TooMany { .. })
        ));
    }

    #[test]
    fn compresses_as_slurm_writes_them() {
        assert_eq!(compress(&["n1", "n2"]), "n[1-2]");
        assert_eq!(compress(&["n1"]), "n1");
        assert_eq!(compress(&["n1", "n3"]), "n[1,3]");
        assert_eq!(
            compress(&["n01", "n02", "n03", "n04", "n07", "gpu1"]),
            "n[01-04,07],gpu1"
        );
        assert_eq!(compress(&["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(compress(&["n09", "n10"]), "n[09-10]");
        assert_eq!(
            compress(&["n8", "n09"]),
            "n[8,09]",
            "a padded width does not join"
        );
        assert_eq!(compress(&["login", "n0", "n1"]), "login,n[0-1]");
        assert_eq!(compress::<&str>(&[]), "");
        // Order is kept: Slurm lists nodes in node order, which is the caller's.
        assert_eq!(compress(&["n2", "n1"]), "n[2,1]");
    }

    proptest! {
        #[test]
        fn compress_then_expand_gives_the_names_back(
            nums in proptest::collection::vec(0u64..40, 0..30),
            pad in 0usize..3,
            prefixes in proptest::collection::vec(prop_oneof![Just("n"), Just("gpu"), Just("r1n")], 30),
        ) {
            let names: Vec<String> = nums
                .iter()
                .zip(&prefixes)
                .map(|(n, p)| format!("{p}{n:0pad$}"))
                .collect();
            let list = compress(&names);
            prop_assert_eq!(expand(&list).unwrap(), names);
        }
    }
}
