//! Slurm's forms of durations and instants.
//!
//! - `--time` as users write it: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`
//!   (a bare number is minutes), `UNLIMITED` or `INFINITE`.
//! - Durations as `squeue` prints them (`%M`, `%l`: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`) and as
//!   `sacct` and `scontrol` print them (`HH:MM:SS`, `D-HH:MM:SS`); a limit that is not set is
//!   `UNLIMITED` (Slurm's `Partition_Limit`, a limit left to the partition, comes with
//!   partitions).
//! - Instants as `YYYY-MM-DDTHH:MM:SS` in local time, `Unknown` when there is none.
//!
//! Times are whole seconds, as Slurm keeps them. Local time needs the time zone, which is
//! I/O: callers pass the offset from UTC in force at each instant ([`LocalOffset`]).

/// A job's time limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Secs(u64),
    Unlimited,
}

/// Parses `--time` in Slurm's forms; `None` when the text is none of them.
pub fn parse_limit(text: &str) -> Option<Limit> {
    let s = text.trim();
    if s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("infinite") {
        return Some(Limit::Unlimited);
    }
    duration(s).map(Limit::Secs)
}

/// Seconds of a duration in Slurm's numeric forms (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
/// `D-HH:MM`, `D-HH:MM:SS`; a bare number is minutes); `None` when it is none of them.
pub fn duration(s: &str) -> Option<u64> {
    let (days, rest) = match s.split_once('-') {
        Some((d, rest)) => (Some(number(d)?), rest),
        None => (None, s),
    };
    let fields: Vec<u64> = rest.split(':').map(number).collect::<Option<_>>()?;
    // Later fields are minutes or seconds (below 60); after a day count, hours below 24.
    let (h, m, sec) = match (days, fields.as_slice()) {
        (None, [m]) => (0, *m, 0),
        (None, [m, s]) => (0, *m, *s),
        (None, [h, m, s]) => (*h, *m, *s),
        (Some(_), [h]) => (*h, 0, 0),
        (Some(_), [h, m]) => (*h, *m, 0),
        (Some(_), [h, m, s]) => (*h, *m, *s),
        _ => return None,
    };
    let later_ok = match (days, fields.len()) {
        (None, 1) => true,
        (None, 2) => sec < 60,
        (None, _) => m < 60 && sec < 60,
        (Some(_), _) => h < 24 && m < 60 && sec < 60,
    };
    if !later_ok {
        return None;
    }
    days.unwrap_or(0)
        .checked_mul(86_400)?
        .checked_add(h.checked_mul(3_600)?)?
        .checked_add(m.checked_mul(60)?)?
        .checked_add(sec)
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

const YEAR: i64 = 365 * 86_400;

/// `squeue`'s form (`%M`, `%l`, `%L`): `M:SS`, `H:MM:SS` or `D-HH:MM:SS`; `INVALID` below
/// zero or beyond a year.
pub fn squeue_secs(secs: i64) -> String {
    if !(0..=YEAR).contains(&secs) {
        return "INVALID".into();
    }
    let (d, h, m, s) = split(secs);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `sacct`'s and `scontrol`'s form: `HH:MM:SS` or `D-HH:MM:SS`; `INVALID` below zero.
pub fn long_secs(secs: i64) -> String {
    if secs < 0 {
        return "INVALID".into();
    }
    let (d, h, m, s) = split(secs);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn split(secs: i64) -> (i64, i64, i64, i64) {
    (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60)
}

/// A time limit in `squeue`'s form (`UNLIMITED` when none).
pub fn squeue_limit(limit: Limit) -> String {
    match limit {
        Limit::Unlimited => "UNLIMITED".into(),
        Limit::Secs(s) => squeue_secs(i64::try_from(s).unwrap_or(i64::MAX)),
    }
}

/// A time limit in `sacct`'s and `scontrol`'s form (`UNLIMITED` when none).
pub fn long_limit(limit: Limit) -> String {
    match limit {
        Limit::Unlimited => "UNLIMITED".into(),
        Limit::Secs(s) => long_secs(i64::try_from(s).unwrap_or(i64::MAX)),
    }
}

/// The offset from UTC, in seconds, of local time at an instant (seconds since the epoch).
/// The daemons' clients pass the C library's; tests pass a fixed zone.
pub type LocalOffset = fn(i64) -> i64;

/// `YYYY-MM-DDTHH:MM:SS` in local time; `Unknown` when there is no instant.
pub fn timestamp(at: Option<i64>, offset: LocalOffset) -> String {
    let Some(t) = at else {
        return "Unknown".into();
    };
    let local = t + offset(t);
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        secs / 3_600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Year, month, day of a day count since 1970-01-01 (proleptic Gregorian; H. Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_as_users_write_them() {
        assert_eq!(parse_limit("10"), Some(Limit::Secs(600)));
        assert_eq!(parse_limit("1:30"), Some(Limit::Secs(90)));
        assert_eq!(parse_limit("1:00:00"), Some(Limit::Secs(3600)));
        assert_eq!(parse_limit("2-3"), Some(Limit::Secs(2 * 86_400 + 3 * 3600)));
        assert_eq!(parse_limit("1-0:0:1"), Some(Limit::Secs(86_401)));
        assert_eq!(parse_limit("UNLIMITED"), Some(Limit::Unlimited));
        assert_eq!(parse_limit("infinite"), Some(Limit::Unlimited));
        for bad in ["", "1:99", "1-25", "a", "1::2", "1-2-3", "-5"] {
            assert_eq!(parse_limit(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn durations_as_squeue_and_sacct_print_them() {
        // squeue's TIME and TIME_LIMIT columns (captured from Slurm 22.05: "0:00", "10:00",
        // "1:18", "9:54").
        assert_eq!(squeue_secs(0), "0:00");
        assert_eq!(squeue_secs(600), "10:00");
        assert_eq!(squeue_secs(78), "1:18");
        assert_eq!(squeue_secs(3_725), "1:02:05");
        assert_eq!(squeue_secs(90_061), "1-01:01:01");
        assert_eq!(squeue_secs(-1), "INVALID");
        // scontrol's RunTime and TimeLimit (captured: "00:00:05", "00:10:00").
        assert_eq!(long_secs(5), "00:00:05");
        assert_eq!(long_secs(600), "00:10:00");
        assert_eq!(long_secs(90_061), "1-01:01:01");
        assert_eq!(long_limit(Limit::Unlimited), "UNLIMITED");
        assert_eq!(squeue_limit(Limit::Secs(60)), "1:00");
    }

    #[test]
    fn timestamps_in_local_time() {
        // 2026-11-27T10:16:15 UTC.
        let t = 1_795_774_575;
        assert_eq!(timestamp(Some(t), |_| 0), "2026-11-27T10:16:15");
        assert_eq!(timestamp(Some(t), |_| 3_600), "2026-11-27T11:16:15");
        assert_eq!(timestamp(Some(0), |_| 0), "1970-01-01T00:00:00");
        assert_eq!(timestamp(Some(951_782_400), |_| 0), "2000-02-29T00:00:00");
        assert_eq!(timestamp(None, |_| 0), "Unknown");
    }
}
