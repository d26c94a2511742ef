//! One job line's 18 fields, parsed by hand from its bytes.

use super::*;

pub(super) enum LineClass<'a> {
    Blank,
    Comment(&'a [u8]),
    Job,
}

pub(super) fn classify(line: &[u8]) -> LineClass<'_> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace());
    match start {
        None => LineClass::Blank,
        Some(i) if line[i] == b';' => LineClass::Comment(&line[i + 1..]),
        // cosched's provenance lines (`# key: value`, docs/sim.md) are not SWF, but a file
        // that carries them is still read as the trace it is.
        Some(i) if line[i] == b'#' => LineClass::Blank,
        Some(_) => LineClass::Job,
    }
}

pub(super) enum BadField {
    Count(usize),
    Value {
        field: usize,
        value: String,
        kind: LineErrorKind,
    },
}

/// A field value in fixed point (microunits) and whether it was exactly −1.
pub(super) fn parse_fixed(s: &[u8]) -> Result<i64, LineErrorKind> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut int: i64 = 0;
    let mut i = 0;
    let mut any = false;
    while i < digits.len() && digits[i].is_ascii_digit() {
        int = int
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(digits[i] - b'0')))
            .ok_or(LineErrorKind::OutOfRange)?;
        any = true;
        i += 1;
    }
    let mut frac: i64 = 0;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        let mut scale = MICROS / 10;
        let mut round_up = false;
        let mut first_dropped = true;
        while i < digits.len() && digits[i].is_ascii_digit() {
            let d = i64::from(digits[i] - b'0');
            if scale > 0 {
                frac += d * scale;
                scale /= 10;
            } else if first_dropped {
                round_up = d >= 5;
                first_dropped = false;
            }
            any = true;
            i += 1;
        }
        if round_up {
            frac += 1;
        }
    }
    if i != digits.len() {
        // Exponent notation and the like: rare, so take the slow path.
        let text = std::str::from_utf8(s).map_err(|_| LineErrorKind::NotANumber)?;
        let v: f64 = text.parse().map_err(|_| LineErrorKind::NotANumber)?;
        if v.is_nan() {
            return Err(LineErrorKind::NotANumber);
        }
        if v.abs() > 9.0e12 {
            return Err(LineErrorKind::OutOfRange);
        }
        return Ok((v * MICROS as f64).round() as i64);
    }
    if !any {
        return Err(LineErrorKind::NotANumber);
    }
    let v = int
        .checked_mul(MICROS)
        .and_then(|v| v.checked_add(frac))
        .ok_or(LineErrorKind::OutOfRange)?;
    Ok(if neg { -v } else { v })
}

/// A non-negative micro-value, or `None` for −1.
pub(super) fn known(v: i64) -> Result<Option<i64>, LineErrorKind> {
    match v {
        MINUS_ONE => Ok(None),
        v if v < 0 => Err(LineErrorKind::Negative),
        v => Ok(Some(v)),
    }
}

pub(super) fn whole(v: Option<i64>) -> Result<Option<i64>, LineErrorKind> {
    match v {
        Some(v) if v % MICROS != 0 => Err(LineErrorKind::Fractional),
        v => Ok(v.map(|v| v / MICROS)),
    }
}

pub(super) fn as_u32(v: i64) -> Result<Option<u32>, LineErrorKind> {
    whole(known(v)?)?
        .map(|v| u32::try_from(v).map_err(|_| LineErrorKind::OutOfRange))
        .transpose()
}

pub(super) fn as_u64(v: i64) -> Result<Option<u64>, LineErrorKind> {
    Ok(whole(known(v)?)?.map(|v| v as u64))
}

pub(super) fn as_dur(v: i64) -> Result<Option<Dur>, LineErrorKind> {
    Ok(known(v)?.map(Dur::from_micros))
}

/// Float fields keep their full text precision: parsed with the standard library.
pub(super) fn as_f64(s: &[u8]) -> Result<Option<f64>, LineErrorKind> {
    // Most float fields hold -1 or a whole number: an integer converts to f64 exactly, and
    // identically to the slow path below.
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let v = digits
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
        return match (s[0] == b'-', v) {
            (true, 1) => Ok(None),
            (true, 0) | (false, _) => Ok(Some(v as f64)),
            (true, _) => Err(LineErrorKind::Negative),
        };
    }
    if let Some(v) = short_decimal(s) {
        return Ok(Some(v));
    }
    let text = std::str::from_utf8(s).map_err(|_| LineErrorKind::NotANumber)?;
    let v: f64 = text.parse().map_err(|_| LineErrorKind::NotANumber)?;
    if !v.is_finite() {
        return Err(LineErrorKind::NotANumber);
    }
    if v == -1.0 {
        return Ok(None);
    }
    if v < 0.0 {
        return Err(LineErrorKind::Negative);
    }
    Ok(Some(v))
}

/// A non-negative decimal `digits.digits` with at most 15 significant digits, converted as the
/// standard library converts it: both the digits as an integer and the power of ten are exact
/// doubles, and one IEEE division of exact operands is correctly rounded (Clinger's fast
/// path). Anything else (signs, exponents, long fractions) is left to the standard parser.
pub(super) fn short_decimal(s: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let dot = s.iter().position(|&b| b == b'.')?;
    let (int, frac) = (&s[..dot], &s[dot + 1..]);
    if int.is_empty() || frac.is_empty() || int.len() + frac.len() > 15 {
        return None;
    }
    let mut m: u64 = 0;
    for &d in int.iter().chain(frac) {
        if !d.is_ascii_digit() {
            return None;
        }
        m = m * 10 + u64::from(d - b'0');
    }
    Some(m as f64 / POW10[frac.len()])
}

/// `u8::is_ascii_whitespace` as one comparison for the common bytes: splitting fields is a
/// large share of reading a trace, and the five-way match costs several branches per byte.
#[inline(always)]
pub(super) fn is_space(b: u8) -> bool {
    b <= b' ' && b.is_ascii_whitespace()
}

pub(super) fn parse_record(line: &[u8]) -> Result<SwfRecord, BadField> {
    // One pass splits the line and reads each field that is a plain integer (all but a few
    // fields of real traces) as it goes; `NOT_PLAIN` marks a field read from its text below.
    const NOT_PLAIN: i64 = i64::MIN;
    // Twelve digits times a million stay within i64, so a plain field cannot overflow.
    const PLAIN_DIGITS: usize = 12;
    let mut fields: [&[u8]; 18] = [&[]; 18];
    let mut plain = [NOT_PLAIN; 18];
    let mut count = 0;
    let (mut i, n) = (0, line.len());
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i == n {
            break;
        }
        let start = i;
        let neg = line[i] == b'-';
        i += usize::from(neg);
        let digits = i;
        let mut v: i64 = 0;
        while i < n && line[i].is_ascii_digit() {
            v = v.wrapping_mul(10).wrapping_add(i64::from(line[i] - b'0'));
            i += 1;
        }
        let is_plain = i > digits && i - digits <= PLAIN_DIGITS && (i == n || is_space(line[i]));
        while i < n && !is_space(line[i]) {
            i += 1;
        }
        if count < 18 {
            fields[count] = &line[start..i];
            if is_plain {
                plain[count] = if neg { -v * MICROS } else { v * MICROS };
            }
        }
        count += 1;
    }
    if count != 18 {
        return Err(BadField::Count(count));
    }
    // The error closures borrow the fields: capturing the array by value would copy its 18
    // slices for every field parsed.
    let fields = &fields;
    let bad = |i: usize| {
        move |kind| BadField::Value {
            field: i + 1,
            value: String::from_utf8_lossy(fields[i]).into_owned(),
            kind,
        }
    };
    let fixed = |i: usize| match plain[i] {
        NOT_PLAIN => parse_fixed(fields[i]).map_err(bad(i)),
        v => Ok(v),
    };
    let job = as_u64(fixed(0)?)
        .map_err(bad(0))?
        .ok_or_else(|| bad(0)(LineErrorKind::MissingJobNumber))?;
    Ok(SwfRecord {
        job,
        submit: as_dur(fixed(1)?)
            .map_err(bad(1))?
            .map(|d| Time::from_micros(d.as_micros())),
        wait: as_dur(fixed(2)?).map_err(bad(2))?,
        run: as_dur(fixed(3)?).map_err(bad(3))?,
        alloc_procs: as_u32(fixed(4)?).map_err(bad(4))?,
        avg_cpu: as_f64(fields[5]).map_err(bad(5))?,
        used_mem_kib: as_f64(fields[6]).map_err(bad(6))?,
        req_procs: as_u32(fixed(7)?).map_err(bad(7))?,
        req_time: as_dur(fixed(8)?).map_err(bad(8))?,
        req_mem_kib: as_f64(fields[9]).map_err(bad(9))?,
        status: {
            // Status may be any small integer; −1 is unknown.
            let v = whole(Some(fixed(10)?)).map_err(bad(10))?.unwrap_or(-1);
            if v == -1 {
                None
            } else {
                Some(i32::try_from(v).map_err(|_| bad(10)(LineErrorKind::OutOfRange))?)
            }
        },
        user: as_u32(fixed(11)?).map_err(bad(11))?,
        group: as_u32(fixed(12)?).map_err(bad(12))?,
        app: as_u32(fixed(13)?).map_err(bad(13))?,
        queue: as_u32(fixed(14)?).map_err(bad(14))?,
        partition: as_u32(fixed(15)?).map_err(bad(15))?,
        preceding_job: as_u64(fixed(16)?).map_err(bad(16))?,
        think_time: as_dur(fixed(17)?).map_err(bad(17))?,
    })
}
