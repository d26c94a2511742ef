//! `submit --time`: a job's time limit as a Slurm user writes it, or in cosched's own units.
//!
//! A value with a unit letter (`10m`, `1h30m`, `90s`) is read as every other cosched duration.
//! Anything made only of digits, `:` and `-` is read as Slurm reads `--time`: `MM`, `MM:SS`,
//! `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS` — so a bare number is *minutes* here, as in
//! Slurm (elsewhere in cosched a bare number is seconds; a time limit is where Slurm habits
//! matter). The limit is then checked against the machine manager's maximum.

use cosched_core::Dur;

/// Parses and checks a time limit.
pub fn parse(text: &str) -> Result<Dur, String> {
    let s = text.trim();
    let limit = if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_digit() || c == ':' || c == '-')
    {
        cosched_slurm::time::duration(s)
            .and_then(|secs| i64::try_from(secs).ok())
            .map(Dur::from_secs)
            .ok_or_else(|| {
                format!(
                    "--time {text:?}: expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS \
                 (as in Slurm), or a duration with units such as 10m or 1h30m"
                )
            })?
    } else {
        Dur::parse(s).map_err(|e| format!("--time: {e}"))?
    };
    cosched_mm::check_time_limit(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> i64 {
        parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .as_micros()
            / 1_000_000
    }

    #[test]
    fn slurm_forms() {
        assert_eq!(secs("30"), 30 * 60);
        assert_eq!(secs("30:15"), 30 * 60 + 15);
        assert_eq!(secs("1:00:00"), 3_600);
        assert_eq!(secs("2-12"), 2 * 86_400 + 12 * 3_600);
        assert_eq!(secs("1-2:30"), 86_400 + 2 * 3_600 + 30 * 60);
        assert_eq!(secs("1-0:0:5"), 86_400 + 5);
        // Hours may exceed a day without a day count, as in Slurm.
        assert_eq!(secs("36:00:00"), 36 * 3_600);
    }

    #[test]
    fn cosched_units_still_work() {
        assert_eq!(secs("10m"), 600);
        assert_eq!(secs("1h30m"), 5_400);
        assert_eq!(secs("90s"), 90);
    }

    #[test]
    fn bad_values_say_what_is_accepted() {
        for bad in [
            "1:2:3:4", "1-25", "10:61", "1-", "-5", "1:60:00", "", "0", "0:00",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.contains("--time"),
                "{bad:?} gave an error without the flag: {e}"
            );
        }
        let e = parse("1:2:3:4").unwrap_err();
        assert!(e.contains("HH:MM:SS") && e.contains("10m"), "{e}");
        // The machine manager's maximum still holds.
        assert!(parse("400-0").unwrap_err().contains("at most"));
    }

    #[test]
    fn a_huge_time_limit_is_refused_in_the_users_words() {
        for huge in ["99999999999999d", "1e300"] {
            let e = parse(huge).unwrap_err();
            assert!(
                e.contains(huge) && e.contains("too large") && !e.contains("9223372036854775807"),
                "{huge}: {e}"
            );
        }
    }
}
