//! Everything a run is built from, shared by `cosched sim` and `cosched sim sweep`: where the
//! jobs come from ([`Source`]), and the policy's configuration from command-line options and
//! a TOML file ([`policy_config`]).

use std::path::{Path, PathBuf};

use cosched_core::{Dur, MachineShape};
use cosched_policy::PolicyConfig;
use cosched_workload::lublin::{GenOptions, generate};
use cosched_workload::swf::{ReadOptions, SwfError, SwfHeader, SwfRecord, read_trace};

use crate::trace::{Semantics, Workload, prepare};

/// Where jobs come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A trace, read once.
    Trace {
        path: PathBuf,
        header: Box<SwfHeader>,
        records: Vec<SwfRecord>,
        procs: u32,
    },
    /// The Lublin–Feitelson model, generated anew for each seed.
    Lublin { model: Box<GenOptions> },
}

/// A run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Swf(#[from] SwfError),
    #[error("{path}: {why}")]
    PolicyFile { path: String, why: String },
    #[error("--opt {text:?}: expected KEY=VALUE")]
    BadOpt { text: String },
}

impl Source {
    /// Reads a trace; `procs` overrides the machine size of its header; `first` keeps only
    /// that many jobs.
    pub fn trace(
        path: &Path,
        opts: &ReadOptions,
        first: Option<usize>,
    ) -> Result<Source, SetupError> {
        let mut trace = read_trace(path, opts)?;
        if let Some(n) = first {
            trace.records.truncate(n);
        }
        Ok(Source::Trace {
            path: path.to_path_buf(),
            header: Box::new(trace.header),
            records: trace.records,
            procs: trace.procs,
        })
    }

    /// Machine size in PEs.
    pub fn procs(&self) -> u32 {
        match self {
            Source::Trace { procs, .. } => *procs,
            Source::Lublin { model } => model.procs,
        }
    }

    /// The jobs of one run: `load` rescales inter-arrival times (for the model, as part of
    /// generation), `seed` replaces the model's seed (ignored for traces).
    pub fn workload(
        &self,
        sem: &Semantics,
        load: Option<f64>,
        seed: Option<u64>,
    ) -> (Workload, SwfHeader) {
        match self {
            Source::Trace {
                header,
                records,
                procs,
                ..
            } => (prepare(records, *procs, sem, load), (**header).clone()),
            Source::Lublin { model } => {
                let mut model = model.clone();
                if let Some(s) = seed {
                    model.seed = s;
                }
                model.load = load.or(model.load);
                let trace = generate(&model);
                (
                    prepare(&trace.records, model.procs, sem, None),
                    trace.header,
                )
            }
        }
    }

    /// A short name for tables and plot titles.
    pub fn label(&self) -> String {
        match self {
            Source::Trace { path, .. } => path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            Source::Lublin { model } => format!("lublin, {} jobs, {} PEs", model.jobs, model.procs),
        }
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
pub fn policy_config(machine: MachineShape, o: &PolicyOptions) -> Result<PolicyConfig, SetupError> {
    let mut cfg = PolicyConfig::new(machine);
    cfg.mpl = o.mpl;
    cfg.quantum = o.quantum;
    cfg.context_switch = o.context_switch;
    if let Some(path) = &o.file {
        let err = |why: String| SetupError::PolicyFile {
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
            .ok_or_else(|| SetupError::BadOpt { text: text.clone() })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(SetupError::BadOpt { text: text.clone() });
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
        let dir = std::env::temp_dir().join(format!("cosched-sim-setup-{}", std::process::id()));
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
