//! Parsing a command line against the table, as getopt_long does for Slurm's commands.

use thiserror::Error;

use super::{Arg, Cmd, Opt, Support, TABLE};

/// An option as given: its table entry and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    pub long: &'static str,
    pub value: Option<String>,
}

/// The options of a command line or of a script's directives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// In the order given (a later one wins).
    pub opts: Vec<Given>,
    /// The words after the options (the script and its arguments).
    pub rest: Vec<String>,
    /// One line per ignored or not-yet option (each option once).
    pub warnings: Vec<String>,
}

impl Parsed {
    /// The last value of `long`, if given.
    pub fn value(&self, long: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|g| g.long == long)
            .and_then(|g| g.value.as_deref())
    }

    /// Whether `long` was given.
    pub fn has(&self, long: &str) -> bool {
        self.opts.iter().any(|g| g.long == long)
    }

    /// How many times `long` was given (`-vvv`).
    pub fn count(&self, long: &str) -> usize {
        self.opts.iter().filter(|g| g.long == long).count()
    }

    /// These options, with `earlier`'s before them (so that these win) and both warnings.
    pub fn over(mut self, earlier: Parsed) -> Parsed {
        let mut opts = earlier.opts;
        opts.append(&mut self.opts);
        let mut warnings = earlier.warnings;
        for w in self.warnings {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        Parsed {
            opts,
            rest: self.rest,
            warnings,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum OptError {
    #[error("unrecognized option '{0}'")]
    Unknown(String),
    #[error("option '{0}' is ambiguous; possibilities: {1}")]
    Ambiguous(String, String),
    #[error("option '{0}' requires an argument")]
    Missing(String),
    #[error("option '--{0}' doesn't allow an argument")]
    NoValue(String),
    #[error("--{0} is not supported: {1}")]
    Refused(&'static str, &'static str),
    #[error(
        "--{0} is {1} here ({2}), and strict mode (--strict or COSCHED_SLURM_STRICT=1) refuses it"
    )]
    Strict(&'static str, &'static str, &'static str),
}

/// The table's entry for `--long` of `cmd` (exact, or a unique prefix).
fn find_long(cmd: Cmd, name: &str) -> Result<&'static Opt, OptError> {
    let mine = || TABLE.iter().filter(|o| o.of(cmd));
    if let Some(o) = mine().find(|o| o.long == name) {
        return Ok(o);
    }
    let matches: Vec<&Opt> = mine().filter(|o| o.long.starts_with(name)).collect();
    match matches.as_slice() {
        [] => Err(OptError::Unknown(format!("--{name}"))),
        [one] => Ok(one),
        many => Err(OptError::Ambiguous(
            format!("--{name}"),
            many.iter()
                .map(|o| format!("'--{}'", o.long))
                .collect::<Vec<_>>()
                .join(" "),
        )),
    }
}

fn find_short(cmd: Cmd, c: char) -> Result<&'static Opt, OptError> {
    TABLE
        .iter()
        .find(|o| o.of(cmd) && o.short == Some(c))
        .ok_or_else(|| OptError::Unknown(format!("-{c}")))
}

/// Parses `args` (without the program name) against `cmd`'s options. Options end at `--`
/// or at the first other word, which begins [`Parsed::rest`].
pub fn parse(cmd: Cmd, args: &[String], strict: bool) -> Result<Parsed, OptError> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let opt = find_long(cmd, name)?;
            let value = match (opt.arg, inline) {
                (Arg::No, Some(_)) => return Err(OptError::NoValue(opt.long.into())),
                (Arg::No, None) | (Arg::Optional, None) => None,
                (_, Some(v)) => Some(v),
                (Arg::Required, None) => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| OptError::Missing(format!("--{}", opt.long)))?;
                    i += 1;
                    Some(v.clone())
                }
            };
            take(cmd, opt, value, strict, &mut out)?;
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let opt = find_short(cmd, chars[k])?;
                k += 1;
                let attached: String = chars[k..].iter().collect();
                let value = match opt.arg {
                    Arg::No => None,
                    Arg::Optional => {
                        k = chars.len();
                        (!attached.is_empty()).then_some(attached)
                    }
                    Arg::Required => {
                        k = chars.len();
                        if attached.is_empty() {
                            let v = args
                                .get(i)
                                .ok_or_else(|| OptError::Missing(format!("-{}", chars[0])))?;
                            i += 1;
                            Some(v.clone())
                        } else {
                            Some(attached)
                        }
                    }
                };
                take(cmd, opt, value, strict, &mut out)?;
            }
            continue;
        }
        // The first word that is not an option: the script (or program) and its arguments.
        i -= 1;
        break;
    }
    out.rest = args[i..].to_vec();
    Ok(out)
}

/// Records one option, or refuses it.
fn take(
    cmd: Cmd,
    opt: &'static Opt,
    value: Option<String>,
    strict: bool,
    out: &mut Parsed,
) -> Result<(), OptError> {
    let warning = match opt.support {
        Support::Refused(why) => return Err(OptError::Refused(opt.long, why)),
        Support::Ignored(why) if strict => return Err(OptError::Strict(opt.long, "ignored", why)),
        Support::NotYet(why) if strict => {
            return Err(OptError::Strict(opt.long, "not built yet", why));
        }
        Support::Ignored(why) => Some(format!(
            "{}: warning: --{} is ignored: {why}",
            cmd.name(),
            opt.long
        )),
        Support::NotYet(why) => Some(format!(
            "{}: warning: --{} is not fully supported yet: {why}",
            cmd.name(),
            opt.long
        )),
        Support::Same | Support::Own(_) | Support::Different(_) => None,
    };
    if let Some(w) = warning
        && !out.warnings.contains(&w)
    {
        out.warnings.push(w);
    }
    out.opts.push(Given {
        long: opt.long,
        value,
    });
    Ok(())
}
