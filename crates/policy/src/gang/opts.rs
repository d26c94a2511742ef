//! Reading the named options of the time-sharing policies from [`PolicyConfig::options`],
//! with errors that name the policy, the option and what was expected.

use cosched_core::Dur;

use crate::{ConfigError, PolicyConfig};

/// The options of one policy, read with typed accessors.
pub(crate) struct Opts<'a> {
    pub policy: &'static str,
    pub table: &'a toml::Table,
}

impl<'a> Opts<'a> {
    pub fn new(policy: &'static str, cfg: &'a PolicyConfig) -> Opts<'a> {
        Opts {
            policy,
            table: &cfg.options,
        }
    }

    pub fn bad(&self, option: &str, why: impl Into<String>) -> ConfigError {
        ConfigError::BadOption {
            policy: self.policy.to_string(),
            option: option.to_string(),
            why: why.into(),
        }
    }

    pub fn string(&self, key: &str, default: &str) -> Result<String, ConfigError> {
        match self.table.get(key) {
            None => Ok(default.to_string()),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.bad(key, format!("expected a string, got {other}"))),
        }
    }

    pub fn boolean(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.table.get(key) {
            None => Ok(default),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            // `--opt key=true` may arrive as a string.
            Some(toml::Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(other) => Err(self.bad(key, format!("expected true or false, got {other}"))),
        }
    }

    pub fn uint(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        let parsed = match self.table.get(key) {
            None => return Ok(default),
            Some(toml::Value::Integer(i)) => u32::try_from(*i).ok(),
            Some(toml::Value::String(s)) => s.trim().parse::<u32>().ok(),
            Some(_) => None,
        };
        parsed.ok_or_else(|| self.bad(key, "expected a non-negative integer"))
    }

    /// A duration: a string such as `"10m"` or `"1h30m"`, or a number of seconds.
    pub fn dur(&self, key: &str, default: Dur) -> Result<Dur, ConfigError> {
        match self.table.get(key) {
            None => Ok(default),
            Some(v) => dur_value(v).ok_or_else(|| {
                self.bad(
                    key,
                    "expected a duration such as \"10m\" or a number of seconds",
                )
            }),
        }
    }
}

/// A TOML value read as a duration (string with units, or seconds).
pub(crate) fn dur_value(v: &toml::Value) -> Option<Dur> {
    match v {
        toml::Value::String(s) => Dur::parse(s).ok(),
        toml::Value::Integer(i) if *i >= 0 => Some(Dur::from_secs(*i)),
        toml::Value::Float(f) if f.is_finite() && *f >= 0.0 => Some(Dur::from_secs_f64(*f)),
        _ => None,
    }
}
