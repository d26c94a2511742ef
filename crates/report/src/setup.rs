//! Where the jobs of a run come from ([`Source`]), shared by `cosched sim` and `cosched sim
//! sweep`. The policy's configuration is built by `cosched_policy::policy_config`, the same
//! for the simulator and the machine manager.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use cosched_workload::batsim::{BatsimError, read_workload};
use cosched_workload::feitelson97;
use cosched_workload::lublin::{GenOptions, generate};
use cosched_workload::swf::{Feed, ReadOptions, Reader, SwfError, SwfHeader, SwfRecord, open};

use cosched_sim::trace::{Semantics, Workload, prepare_shared};

/// Where jobs come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A trace, read once.
    Trace {
        path: PathBuf,
        header: Box<SwfHeader>,
        /// Shared with the workloads prepared from it (and with clones of the source).
        records: Arc<Vec<SwfRecord>>,
        procs: u32,
        /// The file's SHA-256, for the provenance of the outputs.
        digest: FileDigest,
    },
    /// The Lublin–Feitelson model, generated anew for each seed.
    Lublin { model: Box<GenOptions> },
    /// Seed 002's model (Poisson arrivals, hyperexponential runtimes), generated anew for each
    /// seed.
    Feitelson97 { model: Box<feitelson97::Options> },
}

/// The SHA-256 of a trace file (hex, as [`crate::provenance::file_sha256`] gives it),
/// computed on a thread of its own from the moment the trace has been read: hashing a
/// 4 MB log in software costs about as many instructions as simulating a fifth of it, and
/// the simulation leaves the second core idle. Clones share the one computation.
#[derive(Clone, Debug)]
pub struct FileDigest(Arc<DigestState>);

#[derive(Debug)]
struct DigestState {
    running: Mutex<Option<JoinHandle<String>>>,
    value: OnceLock<String>,
}

impl FileDigest {
    /// Starts hashing `path`.
    pub fn start(path: &Path) -> FileDigest {
        let path = path.to_path_buf();
        let running = std::thread::Builder::new()
            .name("trace-sha256".into())
            .spawn(move || crate::provenance::file_sha256(&path))
            // No thread to be had: hash on first use instead.
            .ok();
        FileDigest(Arc::new(DigestState {
            running: Mutex::new(running),
            value: OnceLock::new(),
        }))
    }

    /// The digest already known (for a source built in memory).
    pub fn known(hex: String) -> FileDigest {
        FileDigest(Arc::new(DigestState {
            running: Mutex::new(None),
            value: OnceLock::from(hex),
        }))
    }

    /// The digest, waiting for the hashing thread if it is still at work; `path` is hashed
    /// here if no thread could be started.
    pub fn get(&self, path: &Path) -> &str {
        self.0.value.get_or_init(|| {
            let running = self.0.running.lock().map(|mut r| r.take());
            match running {
                Ok(Some(h)) => h
                    .join()
                    .unwrap_or_else(|_| crate::provenance::file_sha256(path)),
                _ => crate::provenance::file_sha256(path),
            }
        })
    }
}

/// A trace whose header has been read but not its jobs ([`Source::open_trace`]).
pub struct OpenTrace {
    path: PathBuf,
    reader: Reader<Box<dyn std::io::BufRead>>,
    /// Keep only this many jobs.
    first: Option<usize>,
}

impl OpenTrace {
    /// Machine size in PEs (`--procs`, else the header's).
    pub fn procs(&self) -> u32 {
        self.reader.procs()
    }

    /// How many jobs the trace says it holds (its header's `MaxRecords`, at most the jobs
    /// kept), for reserving room once instead of growing as they come; 0 if it does not say.
    /// Capped, so that a wrong header costs address space at most, never memory (room
    /// reserved and never written is not touched).
    pub fn expected_jobs(&self) -> usize {
        const CAP: u64 = 1 << 22;
        let said = self.reader.header().max_records.unwrap_or(0).min(CAP) as usize;
        said.min(self.first.unwrap_or(usize::MAX))
    }

    /// The source as far as it is known: the header and machine size, no jobs (for a
    /// [`crate::run::RunSpec`] given to [`crate::run::run_read`]).
    pub fn header_only(&self) -> Source {
        Source::Trace {
            path: self.path.clone(),
            header: Box::new(self.reader.header().clone()),
            records: Arc::new(Vec::new()),
            procs: self.procs(),
            digest: FileDigest::known(String::new()),
        }
    }

    /// Reads the jobs, on all cores (see [`Reader::into_trace`]).
    pub fn read(self) -> Result<Source, SetupError> {
        let first = self.first.unwrap_or(usize::MAX);
        let trace = self.reader.stop_after(first).into_trace()?;
        Ok(Self::source(self.path, trace, first))
    }

    /// Reads the jobs, handing `feed` each piece of the kept records as soon as it is parsed,
    /// in input order (see [`Reader::into_trace_feeding`]: after an error, the feed's records
    /// are not the trace's).
    pub fn read_feeding(self, feed: &Feed) -> Result<Source, SetupError> {
        let first = self.first.unwrap_or(usize::MAX);
        // The feed is called one piece at a time; this counts the records it was offered.
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let kept = |r: &[SwfRecord]| {
            let before = seen.fetch_add(r.len(), std::sync::atomic::Ordering::Relaxed);
            let n = first.saturating_sub(before).min(r.len());
            if n > 0 {
                feed(&r[..n]);
            }
        };
        let trace = self.reader.stop_after(first).into_trace_feeding(&kept)?;
        Ok(Self::source(self.path, trace, first))
    }

    /// The source of `path`'s `trace`, its first `first` jobs kept.
    fn source(path: PathBuf, mut trace: cosched_workload::swf::Trace, first: usize) -> Source {
        trace.records.truncate(first);
        // Started after the read, so that it shares the cores with the simulation (which
        // uses one), not with the parsing (which uses all).
        let digest = FileDigest::start(&path);
        Source::Trace {
            path,
            header: Box::new(trace.header),
            records: Arc::new(trace.records),
            procs: trace.procs,
            digest,
        }
    }
}

/// A run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Swf(#[from] SwfError),
    #[error(transparent)]
    Batsim(#[from] BatsimError),
}

impl Source {
    /// Reads a trace; `procs` overrides the machine size of its header; `first` keeps only
    /// that many jobs.
    pub fn trace(
        path: &Path,
        opts: &ReadOptions,
        first: Option<usize>,
    ) -> Result<Source, SetupError> {
        Source::open_trace(path, opts, first)?.read()
    }

    /// Reads a Batsim JSON workload (see [`cosched_workload::batsim`]) as a trace: `procs`
    /// overrides its `nb_res`, `first` keeps only the first jobs in submit order.
    pub fn batsim(
        path: &Path,
        opts: &ReadOptions,
        first: Option<usize>,
    ) -> Result<Source, SetupError> {
        let trace = read_workload(path, opts)?;
        Ok(OpenTrace::source(
            path.to_path_buf(),
            trace,
            first.unwrap_or(usize::MAX),
        ))
    }

    /// Reads a trace's header only, as [`Source::trace`] would: the machine size is then
    /// known, and the jobs can be read while a run simulates them ([`OpenTrace::read`],
    /// [`crate::run::run_read`]).
    pub fn open_trace(
        path: &Path,
        opts: &ReadOptions,
        first: Option<usize>,
    ) -> Result<OpenTrace, SetupError> {
        Ok(OpenTrace {
            path: path.to_path_buf(),
            reader: open(path, opts)?,
            first,
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
            } => (
                prepare_shared(records, *procs, sem, load),
                (**header).clone(),
            ),
            Source::Lublin { model } => {
                let mut model = model.clone();
                if let Some(s) = seed {
                    model.seed = s;
                }
                model.load = load.or(model.load);
                let trace = generate(&model);
                (
                    prepare_shared(&Arc::new(trace.records), model.procs, sem, None),
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
                    prepare_shared(&Arc::new(trace.records), model.procs, sem, None),
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
