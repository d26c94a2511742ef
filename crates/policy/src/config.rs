//! A policy's configuration: the machine, the generic time-sharing knobs and the named
//! options, built once from command-line options and a TOML file ([`policy_config`]) for
//! every driver — `cosched sim`, `sim sweep`, `cosched mm` and `cluster up` alike.

use std::path::PathBuf;

use cosched_core::{Dur, MachineShape};
use serde::{Deserialize, Serialize};

/// Everything a policy is built from: the machine and the options given on the command line
/// or in a configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    pub machine: MachineShape,
    /// Multiprogramming level of time-sharing policies; `None` = unlimited.
    pub mpl: Option<u32>,
    /// Time quantum of time-sharing policies.
    pub quantum: Option<Dur>,
    /// Cost of one multi-context switch.
    pub context_switch: Option<Dur>,
    /// Whether a preempted job may start again on other PEs with its work kept (true in the
    /// simulator, which models checkpoint and restart; false on the machine manager, whose
    /// stopped processes stay where they are).
    pub migration: bool,
    /// Named options of a particular policy (`packing = "buddy"`, `large_job = 32`, …), and the
    /// contents of a policy's TOML file under `[policy]`.
    pub options: toml::Table,
}

impl PolicyConfig {
    pub fn new(machine: MachineShape) -> PolicyConfig {
        PolicyConfig {
            machine,
            mpl: None,
            quantum: None,
            context_switch: None,
            migration: true,
            options: toml::Table::new(),
        }
    }
}

/// A policy could not be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {why}")]
    PolicyFile { path: String, why: String },
    #[error("--opt {text:?}: expected KEY=VALUE")]
    BadOpt { text: String },
    #[error("unknown policy {name:?}; known policies: {known}")]
    UnknownPolicy { name: String, known: String },
    #[error("{}", unknown_option(.policy, .unknown, .known))]
    UnknownOption {
        policy: String,
        /// The keys given that the policy does not read.
        unknown: Vec<String>,
        /// The keys it reads (empty: it takes no options).
        known: Vec<String>,
    },
    /// An external policy (`external:CMD`) could not be started or refused its hello.
    #[error("policy {policy}: {why}")]
    External { policy: String, why: String },
    #[error("policy {policy}: option {option}: {why}")]
    BadOption {
        policy: String,
        option: String,
        why: String,
    },
}

fn unknown_option(policy: &str, unknown: &[String], known: &[String]) -> String {
    let s = if unknown.len() == 1 { "" } else { "s" };
    let unknown = unknown.join(", ");
    if known.is_empty() {
        format!("policy {policy}: unknown option{s} {unknown}; {policy} takes no options")
    } else {
        let known = known.join(", ");
        format!("policy {policy}: unknown option{s} {unknown}; known options: {known}")
    }
}

/// Generic policy options, as the command line gives them.
#[derive(Clone, Debug, Default)]
pub struct PolicyOptions {
    pub mpl: Option<u32>,
    pub quantum: Option<Dur>,
    pub context_switch: Option<Dur>,
    /// A TOML file whose `[policy]` table fills the named options.
    pub file: Option<PathBuf>,
    /// `KEY=VALUE` pairs; they override the file's.
    pub opts: Vec<String>,
}

/// Builds a [`PolicyConfig`]. Values of `--opt` are read as TOML values when they parse
/// (`32`, `true`, `"x"`, `[1, 2]`), else as strings (`packing=buddy`).
pub fn policy_config(
    machine: MachineShape,
    o: &PolicyOptions,
) -> Result<PolicyConfig, ConfigError> {
    let mut cfg = PolicyConfig::new(machine);
    cfg.mpl = o.mpl;
    cfg.quantum = o.quantum;
    cfg.context_switch = o.context_switch;
    if let Some(path) = &o.file {
        let err = |why: String| ConfigError::PolicyFile {
            path: path.display().to_string(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| err(e.to_string()))?;
        match doc.remove("policy") {
            Some(toml::Value::Table(t)) => cfg.options.extend(t),
            Some(_) => return Err(err("`policy` must be a table ([policy])".into())),
            None => return Err(err("no [policy] table".into())),
        }
    }
    for text in &o.opts {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| ConfigError::BadOpt { text: text.clone() })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(ConfigError::BadOpt { text: text.clone() });
        }
        let value = value.trim();
        let parsed = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        cfg.options.insert(key.to_string(), parsed);
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_as_toml_or_strings() {
        let dir =
            std::env::temp_dir().join(format!("cosched-policy-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("p.toml");
        std::fs::write(&file, "[policy]\nlarge_job = 32\npacking = \"first\"\n").unwrap();
        let o = PolicyOptions {
            mpl: Some(3),
            file: Some(file.clone()),
            opts: vec!["packing=buddy".into(), "alternate = true".into()],
            ..PolicyOptions::default()
        };
        let cfg = policy_config(MachineShape::flat(8, 1), &o).unwrap();
        assert_eq!(cfg.mpl, Some(3));
        assert_eq!(cfg.options["large_job"].as_integer(), Some(32));
        assert_eq!(cfg.options["packing"].as_str(), Some("buddy"));
        assert_eq!(cfg.options["alternate"].as_bool(), Some(true));
        let bad = PolicyOptions {
            opts: vec!["nokey".into()],
            ..PolicyOptions::default()
        };
        assert!(
            policy_config(MachineShape::flat(8, 1), &bad)
                .unwrap_err()
                .to_string()
                .contains("KEY=VALUE")
        );
        std::fs::write(&file, "[other]\n").unwrap();
        let err = policy_config(MachineShape::flat(8, 1), &o)
            .unwrap_err()
            .to_string();
        assert!(err.contains("p.toml") && err.contains("[policy]"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
