//! A script's `#SBATCH` directives: finding the lines, splitting their words, parsing them
//! with the table; and strict mode from the environment.

use super::{Cmd, Parsed, parse};

/// The directive lines of a script that begin with `prefix` (`#SBATCH`, `#COSCHED`): those
/// after the `#!` line up to the first line that is neither blank nor a comment, as sbatch
/// reads them; each with its line number (from 1) and the text after the prefix.
pub fn directive_bodies<'a>(text: &'a str, prefix: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            break;
        }
        if let Some(rest) = line
            .strip_prefix(prefix)
            .filter(|r| r.is_empty() || r.starts_with(char::is_whitespace))
        {
            out.push((n + 1, rest));
        }
    }
    out
}

/// A script's `#SBATCH` directives, each line's words parsed with the table, with where it
/// is (`file:line`, for errors about its values).
pub fn directive_lines(
    file: &str,
    text: &str,
    strict: bool,
) -> Result<Vec<(String, Parsed)>, String> {
    let mut out = Vec::new();
    for (n, rest) in directive_bodies(text, "#SBATCH") {
        let at = format!("{file}:{n}");
        let words = split_words(rest).map_err(|e| format!("{at}: {e}"))?;
        let parsed = parse(Cmd::Sbatch, &words, strict).map_err(|e| format!("{at}: {e}"))?;
        if let Some(extra) = parsed.rest.first() {
            return Err(format!(
                "{at}: {extra:?} is not an option (a directive holds options only)"
            ));
        }
        out.push((at, parsed));
    }
    Ok(out)
}

/// A script's directives as one set of options (a later line wins), each option's warning
/// once.
pub fn directives(file: &str, text: &str, strict: bool) -> Result<Parsed, String> {
    Ok(directive_lines(file, text, strict)?
        .into_iter()
        .fold(Parsed::default(), |acc, (_, p)| p.over(acc)))
}

/// Splits a directive's text into words: whitespace separates, '…' and "…" quote, and a
/// word beginning with `#` starts a comment.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None if c == '#' && !in_word => break,
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Whether strict mode is asked for by the environment's `COSCHED_SLURM_STRICT` value.
pub fn strict_from_env(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("no"))
}
