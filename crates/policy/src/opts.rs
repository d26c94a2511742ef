//! Reading a policy's named options from [`PolicyConfig::options`], with errors that name the
//! policy, the option and what was expected.
//!
//! [`Opts`] records every key a policy reads; each policy constructor ends with
//! [`Opts::finish`], which refuses the keys it did not read (a misspelt `--opt packng=…`
//! would otherwise be ignored without a word) and lists the known ones. A policy reads all of
//! its keys whatever their values, so the list is complete.

use std::cell::RefCell;
use std::collections::BTreeSet;

use cosched_core::Dur;

use crate::{ConfigError, PolicyConfig};

/// The options of one policy, read with typed accessors.
pub(crate) struct Opts<'a> {
    pub policy: &'static str,
    table: &'a toml::Table,
    read: RefCell<BTreeSet<String>>,
}

impl<'a> Opts<'a> {
    pub fn new(policy: &'static str, cfg: &'a PolicyConfig) -> Opts<'a> {
        Opts {
            policy,
            table: &cfg.options,
            read: RefCell::new(BTreeSet::new()),
        }
    }

    /// The value of `key`, if given; `key` becomes a known option either way.
    pub fn get(&self, key: &str) -> Option<&'a toml::Value> {
        self.read.borrow_mut().insert(key.to_string());
        self.table.get(key)
    }

    /// Refuses the options given but never read, naming the known ones.
    pub fn finish(self) -> Result<(), ConfigError> {
        let read = self.read.into_inner();
        let unknown: Vec<String> = self
            .table
            .keys()
            .filter(|k| !read.contains(*k))
            .cloned()
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(ConfigError::UnknownOption {
            policy: self.policy.to_string(),
            unknown,
            known: read.into_iter().collect(),
        })
    }

    pub fn bad(&self, option: &str, why: impl Into<String>) -> ConfigError {
        ConfigError::BadOption {
            policy: self.policy.to_string(),
            option: option.to_string(),
            why: why.into(),
        }
    }

    pub fn string(&self, key: &str, default: &str) -> Result<String, ConfigError> {
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.bad(key, format!("expected a string, got {other}"))),
        }
    }

    pub fn boolean(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            // `--opt key=true` may arrive as a string.
            Some(toml::Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(other) => Err(self.bad(key, format!("expected true or false, got {other}"))),
        }
    }

    pub fn uint(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        let parsed = match self.get(key) {
            None => return Ok(default),
            Some(toml::Value::Integer(i)) => u32::try_from(*i).ok(),
            Some(toml::Value::String(s)) => s.trim().parse::<u32>().ok(),
            Some(_) => None,
        };
        parsed.ok_or_else(|| self.bad(key, "expected a non-negative integer"))
    }

    /// A duration: a string such as `"10m"` or `"1h30m"`, or a number of seconds.
    pub fn dur(&self, key: &str, default: Dur) -> Result<Dur, ConfigError> {
        match self.get(key) {
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
