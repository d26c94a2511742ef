//! Where the jobs of a run come from ([`Source`]), shared by `cosched sim` and `cosched sim
//! sweep`. The policy's configuration is built by `cosched_policy::policy_config`, the same
//! for the simulator and the machine manager.

use std::path::{Path, PathBuf};

use cosched_workload::feitelson97;
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
    /// Seed 002's model (Poisson arrivals, hyperexponential runtimes), generated anew for each
    /// seed.
    Feitelson97 { model: Box<feitelson97::Options> },
}

/// A run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Swf(#[from] SwfError),
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

    /// How many jobs a model generates (`None` for a trace).
    pub fn model_jobs(&self) -> Option<usize> {
        match self {
            Source::Trace { .. } => None,
            Source::Lublin { model } => Some(model.jobs),
            Source::Feitelson97 { model } => Some(model.jobs),
        }
    }

    /// The same source generating `jobs` jobs (a trace is returned unchanged).
    pub fn with_jobs(&self, jobs: usize) -> Source {
        let mut s = self.clone();
        match &mut s {
            Source::Trace { .. } => {}
            Source::Lublin { model } => model.jobs = jobs,
            Source::Feitelson97 { model } => model.jobs = jobs,
        }
        s
    }

    /// Machine size in PEs.
    pub fn procs(&self) -> u32 {
        match self {
            Source::Trace { procs, .. } => *procs,
            Source::Lublin { model } => model.procs,
            Source::Feitelson97 { model } => model.procs,
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
            Source::Feitelson97 { model } => {
                let mut model = model.clone();
                if let Some(s) = seed {
                    model.seed = s;
                }
                model.load = load.or(model.load);
                let trace = feitelson97::generate(&model);
                (
                    prepare(&trace.records, model.procs, sem, None),
                    trace.header,
                )
            }
        }
    }

    /// The model's seed (1 for a trace), or `seed` when given: what a run's slowdowns are
    /// drawn from.
    pub fn seed(&self, seed: Option<u64>) -> u64 {
        match self {
            Source::Trace { .. } => seed.unwrap_or(1),
            Source::Lublin { model } => seed.unwrap_or(model.seed),
            Source::Feitelson97 { model } => seed.unwrap_or(model.seed),
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
            Source::Feitelson97 { model } => {
                format!("feitelson97, {} jobs, {} PEs", model.jobs, model.procs)
            }
        }
    }
}
