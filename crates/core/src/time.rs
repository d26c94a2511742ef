//! Integer time. One tick is a microsecond: fine enough for the process-level simulator's
//! context switches (tens of µs) and wide enough (±292,000 years) for any trace.
//!
//! [`Time`] is an instant (since the start of a workload, or the Unix epoch in the daemons);
//! [`Dur`] is a span. Floating point appears only at the edges, when a figure is reported.

use std::fmt;
use std::ops::{Add, AddAssign, Mul, Sub, SubAssign};

use serde::{Deserialize, Serialize};

const MICROS_PER_SEC: i64 = 1_000_000;

/// An instant, in microseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Time(pub i64);

/// A span of time, in microseconds. May be negative as the result of a subtraction.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Dur(pub i64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(i64::MAX);

    pub const fn from_micros(us: i64) -> Time {
        Time(us)
    }
    pub const fn from_secs(s: i64) -> Time {
        Time(s.saturating_mul(MICROS_PER_SEC))
    }
    /// Rounds to the nearest microsecond; for reading fractional seconds from traces.
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s * MICROS_PER_SEC as f64).round() as i64)
    }
    pub const fn as_micros(self) -> i64 {
        self.0
    }
    /// Whole seconds, rounded toward negative infinity.
    pub const fn as_secs(self) -> i64 {
        self.0.div_euclid(MICROS_PER_SEC)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / MICROS_PER_SEC as f64
    }
    /// The span from `earlier` to `self` (saturating, like `-`).
    pub const fn since(self, earlier: Time) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }
}

impl Dur {
    pub const ZERO: Dur = Dur(0);
    pub const MAX: Dur = Dur(i64::MAX);

    pub const fn from_micros(us: i64) -> Dur {
        Dur(us)
    }
    pub const fn from_millis(ms: i64) -> Dur {
        Dur(ms * 1_000)
    }
    pub const fn from_secs(s: i64) -> Dur {
        Dur(s.saturating_mul(MICROS_PER_SEC))
    }
    pub fn from_secs_f64(s: f64) -> Dur {
        Dur((s * MICROS_PER_SEC as f64).round() as i64)
    }
    pub const fn as_micros(self) -> i64 {
        self.0
    }
    pub const fn as_secs(self) -> i64 {
        self.0.div_euclid(MICROS_PER_SEC)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / MICROS_PER_SEC as f64
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub fn max(self, other: Dur) -> Dur {
        Dur(self.0.max(other.0))
    }
    pub fn min(self, other: Dur) -> Dur {
        Dur(self.0.min(other.0))
    }

    /// Parses a human duration: a number followed by a unit (`us`, `ms`, `s`, `m`, `h`, `d`),
    /// several of them concatenated (`1h30m`), or a bare number of seconds (`90`, `0.5`).
    pub fn parse(text: &str) -> Result<Dur, ParseDurError> {
        let s = text.trim();
        let err = |why: &'static str| ParseDurError {
            text: text.to_string(),
            why,
        };
        if s.is_empty() {
            return Err(err("empty"));
        }
        // The largest duration held is i64::MAX µs (about 292,000 years); a float cast above
        // it would saturate silently to that value.
        let micros = |v: f64| -> Result<i64, ParseDurError> {
            let us = v.round();
            if us < i64::MAX as f64 {
                Ok(us as i64)
            } else {
                Err(err("too large (at most about 292,000 years)"))
            }
        };
        if let Ok(secs) = s.parse::<f64>() {
            if !secs.is_finite() || secs < 0.0 {
                return Err(err("must be a finite, non-negative number"));
            }
            return micros(secs * MICROS_PER_SEC as f64).map(Dur);
        }
        let mut total: i64 = 0;
        let mut rest = s;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| err("a number must be followed by a unit (us, ms, s, m, h, d)"))?;
            if num_len == 0 {
                return Err(err("expected a number"));
            }
            let value: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
            rest = &rest[num_len..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let unit = match &rest[..unit_len] {
                "us" | "µs" => 1,
                "ms" => 1_000,
                "s" | "sec" => MICROS_PER_SEC,
                "m" | "min" => 60 * MICROS_PER_SEC,
                "h" => 3_600 * MICROS_PER_SEC,
                "d" => 86_400 * MICROS_PER_SEC,
                _ => return Err(err("unknown unit (use us, ms, s, m, h or d)")),
            };
            total = total
                .checked_add(micros(value * unit as f64)?)
                .ok_or_else(|| err("too large (at most about 292,000 years)"))?;
            rest = &rest[unit_len..];
        }
        Ok(Dur(total))
    }
}

/// A duration that could not be parsed; says what the text was and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad duration {text:?}: {why}")]
pub struct ParseDurError {
    pub text: String,
    pub why: &'static str,
}

impl std::str::FromStr for Dur {
    type Err = ParseDurError;
    fn from_str(s: &str) -> Result<Dur, ParseDurError> {
        Dur::parse(s)
    }
}

impl fmt::Display for Dur {
    /// The shortest exact form: `1h30m`, `50ms`, `2.5s` is shown as `2500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0;
        if us == 0 {
            return f.write_str("0s");
        }
        if us < 0 {
            f.write_str("-")?;
        }
        let us = us.unsigned_abs();
        for (unit, name) in [
            (86_400_000_000u64, "d"),
            (3_600_000_000, "h"),
            (60_000_000, "m"),
            (1_000_000, "s"),
            (1_000, "ms"),
            (1, "us"),
        ] {
            if us.is_multiple_of(unit) {
                return write!(f, "{}{}", us / unit, name);
            }
        }
        unreachable!("every integer is a multiple of 1")
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % MICROS_PER_SEC == 0 {
            write!(f, "{}", self.0 / MICROS_PER_SEC)
        } else {
            write!(f, "{:.6}", self.as_secs_f64())
        }
    }
}

// The arithmetic saturates at the ends of the range instead of wrapping (or panicking in
// debug builds): a time limit of "forever" plus a start time must give "never", not an
// instant in the distant past that makes a daemon wake in a loop.
// Within the range, which every real trace and clock reading is far inside, the results are
// the exact ones.
impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        *self = *self + d;
    }
}
impl Sub<Dur> for Time {
    type Output = Time;
    fn sub(self, d: Dur) -> Time {
        Time(self.0.saturating_sub(d.0))
    }
}
impl SubAssign<Dur> for Time {
    fn sub_assign(&mut self, d: Dur) {
        *self = *self - d;
    }
}
impl Sub for Time {
    type Output = Dur;
    fn sub(self, other: Time) -> Dur {
        Dur(self.0.saturating_sub(other.0))
    }
}
impl Add for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0.saturating_add(d.0))
    }
}
impl AddAssign for Dur {
    fn add_assign(&mut self, d: Dur) {
        *self = *self + d;
    }
}
impl Sub for Dur {
    type Output = Dur;
    fn sub(self, d: Dur) -> Dur {
        Dur(self.0.saturating_sub(d.0))
    }
}
impl SubAssign for Dur {
    fn sub_assign(&mut self, d: Dur) {
        *self = *self - d;
    }
}
impl Mul<i64> for Dur {
    type Output = Dur;
    fn mul(self, k: i64) -> Dur {
        Dur(self.0.saturating_mul(k))
    }
}
impl std::iter::Sum for Dur {
    fn sum<I: Iterator<Item = Dur>>(iter: I) -> Dur {
        iter.fold(Dur::ZERO, |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Time::MAX + Dur(1), Time::MAX);
        assert_eq!(Time(5) + Dur::MAX, Time::MAX);
        assert_eq!(Time(-5) - Dur::MAX, Time(i64::MIN));
        assert_eq!(Time::MAX - Time(-1), Dur::MAX);
        assert_eq!(Dur::MAX * 5, Dur::MAX);
        assert_eq!([Dur::MAX, Dur(1)].into_iter().sum::<Dur>(), Dur::MAX);
        let mut t = Time(1);
        t += Dur::MAX;
        assert_eq!(t, Time::MAX);
        // Exact inside the range.
        assert_eq!(Time(7) + Dur(3) - Dur(2), Time(8));
        assert_eq!(Dur(4) * 3, Dur(12));
    }

    #[test]
    fn parses_units_and_bare_seconds() {
        assert_eq!(Dur::parse("50ms").unwrap(), Dur::from_millis(50));
        assert_eq!(Dur::parse("1ms").unwrap(), Dur::from_micros(1_000));
        assert_eq!(Dur::parse("10s").unwrap(), Dur::from_secs(10));
        assert_eq!(Dur::parse("1h30m").unwrap(), Dur::from_secs(5_400));
        assert_eq!(Dur::parse("90").unwrap(), Dur::from_secs(90));
        assert_eq!(Dur::parse("0.5").unwrap(), Dur::from_millis(500));
        assert_eq!(Dur::parse("2.5s").unwrap(), Dur::from_millis(2_500));
    }

    #[test]
    fn rejects_garbage_with_reason() {
        let e = Dur::parse("10 parsecs").unwrap_err();
        assert!(e.to_string().contains("unit"), "{e}");
        assert!(Dur::parse("").is_err());
        for huge in [
            "99999999999999999d",
            "1e300",
            "9223372036854775807s",
            "106751991d106751991d",
        ] {
            let e = Dur::parse(huge).unwrap_err();
            assert!(e.to_string().contains("too large"), "{huge}: {e}");
        }
        assert!(Dur::parse("-3").is_err());
        assert!(Dur::parse("ms").is_err());
    }

    #[test]
    fn display_round_trips() {
        for text in ["0s", "50ms", "1h", "90s", "1500us", "3d"] {
            let d = Dur::parse(text).unwrap();
            assert_eq!(Dur::parse(&d.to_string()).unwrap(), d, "{text}");
        }
        assert_eq!(Dur::from_secs(5_400).to_string(), "90m");
    }

    #[test]
    fn arithmetic() {
        let t = Time::from_secs(10);
        assert_eq!((t + Dur::from_secs(5)) - t, Dur::from_secs(5));
        assert_eq!(Time::from_micros(-1).as_secs(), -1);
        assert_eq!(Time::from_secs_f64(1.25).as_micros(), 1_250_000);
    }
}
