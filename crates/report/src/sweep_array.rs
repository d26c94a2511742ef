//! A sweep that outgrows one machine, as a job array: `cosched sim sweep --submit DIR` writes
//! the sweep's spec into `DIR` and submits one array task per point to whatever answers
//! `sbatch` (a cosched cluster or a site's Slurm); each task (`--point K --spec DIR/spec.json`)
//! runs one point and writes its row and provenance to `DIR/points/K.json`; `--gather DIR`
//! merges the rows into the files a local sweep writes ([`crate::sweep::write_files`]).
//!
//! The spec pins what makes points of one sweep comparable: the binary that runs them (its
//! SHA-256), the sweep's arguments, the input's SHA-256 and the points in order. A task run
//! by another binary, or over another input, refuses to run; a gather refuses a point whose
//! file names another spec. Resumable: a point with a file is done, and submitting again
//! submits only the points without one.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::provenance::{self, Provenance, sha256_hex, shell_quote};
use crate::sweep::{Prepared, SweepRow};
use cosched_slurm::squeue::index_ranges;

/// The spec's file name in a sweep's directory.
pub const SPEC: &str = "spec.json";
/// The directory of the points' results.
const POINTS: &str = "points";
/// The directory of the array tasks' output.
const LOGS: &str = "logs";

/// What a submitted sweep is: written once by `--submit`, read by every task and by gather.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// `cosched <version>` of the submitting binary.
    pub generator: String,
    /// The binary the tasks run, and the SHA-256 of its bytes.
    pub binary: PathBuf,
    pub binary_sha256: String,
    /// The directory the sweep was submitted from: tasks run there, so relative paths in
    /// `args` mean what they meant.
    pub workdir: PathBuf,
    /// The sweep's arguments, as `cosched sim sweep` takes them.
    pub args: Vec<String>,
    /// The input and its SHA-256, as the provenance of every output says them.
    pub input: String,
    pub input_sha256: String,
    /// The figure's title and metric (`--title`, `--metric`).
    pub title: String,
    pub metric: String,
    /// The points, in the order of the table's rows; a task's index is a position here.
    pub points: Vec<PointName>,
}

/// A point, in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointName {
    pub policy: String,
    pub load: Option<f64>,
    pub seed: u64,
}

impl std::fmt::Display for PointName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let load = self
            .load
            .map_or_else(|| "own load".to_string(), |l| format!("load {l}"));
        write!(f, "{}, {load}, seed {}", self.policy, self.seed)
    }
}

/// One point's result, as its task wrote it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointFile {
    /// SHA-256 of the spec file the task ran.
    pub spec_sha256: String,
    pub index: usize,
    /// What made this point: the task's binary, command line and input.
    pub provenance: Provenance,
    pub row: SweepRow,
}

/// A sweep's directory could not be used as asked.
#[derive(Debug, thiserror::Error)]
pub enum ArrayError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path}: not a sweep's spec or point ({source}); was it written by another version of cosched?"
    )]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path} holds another sweep (not the same {field}); give another directory, or remove it to start over"
    )]
    OtherSpec { path: PathBuf, field: &'static str },
    #[error(
        "{what} differs from the one {spec} was submitted with ({expected}, here {found}); a point must be made by the spec's binary over the spec's input"
    )]
    Pinned {
        spec: PathBuf,
        what: &'static str,
        expected: String,
        found: String,
    },
    #[error("point {index} is not one of the {count} points of {spec} (0 to {})", count.saturating_sub(1))]
    NoSuchPoint {
        spec: PathBuf,
        index: usize,
        count: usize,
    },
    #[error("running {program:?} to submit the array: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} refused the array ({status}): {stderr}")]
    Refused {
        program: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error(
        "{dir}: points made by another spec: {}; remove these files and submit again",
        list(points)
    )]
    Foreign { dir: PathBuf, points: Vec<String> },
    #[error(
        "{dir}: {} of {total} points have no result:\n{}\nsubmit them again with `cosched sim sweep --submit {dir}`",
        missing.len(), missing.join("\n")
    )]
    Incomplete {
        dir: PathBuf,
        total: usize,
        missing: Vec<String>,
    },
}

fn list(points: &[String]) -> String {
    points.join(", ")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArrayError + use<> {
    let path = path.to_path_buf();
    move |source| ArrayError::Io { path, source }
}

impl ArraySpec {
    /// The spec of `sweep`, to be run by this binary from the current directory.
    pub fn new(
        sweep: &Prepared,
        prov: &Provenance,
        args: Vec<String>,
        title: String,
        metric: String,
    ) -> Result<ArraySpec, ArrayError> {
        let binary = std::env::current_exe().map_err(io(Path::new("/proc/self/exe")))?;
        let workdir = std::env::current_dir().map_err(io(Path::new(".")))?;
        Ok(ArraySpec {
            generator: provenance::version(),
            binary_sha256: binary_sha256(&binary)?,
            binary,
            workdir,
            args,
            input: prov.input.clone(),
            input_sha256: prov.input_sha256.clone(),
            title,
            metric,
            points: names(sweep),
        })
    }

    /// The first field in which `other` differs, if any.
    fn differs(&self, other: &ArraySpec) -> Option<&'static str> {
        [
            ("binary", self.binary_sha256 == other.binary_sha256),
            ("arguments", self.args == other.args),
            ("input", self.input_sha256 == other.input_sha256),
            ("points", self.points == other.points),
            ("title", self.title == other.title),
            ("metric", self.metric == other.metric),
            ("working directory", self.workdir == other.workdir),
        ]
        .into_iter()
        .find(|(_, same)| !same)
        .map(|(f, _)| f)
    }
}

/// The points of a prepared sweep, in words.
fn names(sweep: &Prepared) -> Vec<PointName> {
    sweep
        .points()
        .iter()
        .map(|p| PointName {
            policy: sweep.entry(p).to_string(),
            load: p.load,
            seed: p.seed,
        })
        .collect()
}

fn binary_sha256(path: &Path) -> Result<String, ArrayError> {
    Ok(sha256_hex(&std::fs::read(path).map_err(io(path))?))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<(T, Vec<u8>), ArrayError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let v = serde_json::from_slice(&bytes).map_err(|source| ArrayError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    Ok((v, bytes))
}

/// Writes `bytes` to `path` through a temporary name in the same directory, so a reader
/// (a gather, a second task of the same point) sees the whole file or none.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ArrayError> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// A sweep's directory: its spec and the SHA-256 of the spec's file.
pub struct SweepDir {
    pub dir: PathBuf,
    pub spec: ArraySpec,
    pub spec_sha256: String,
}

impl SweepDir {
    /// Writes `spec` into `dir` (made absolute, created with its `points` and `logs`); a
    /// directory that already holds the same spec is resumed, one with another is refused.
    pub fn create(dir: &Path, spec: ArraySpec) -> Result<SweepDir, ArrayError> {
        std::fs::create_dir_all(dir.join(POINTS)).map_err(io(dir))?;
        std::fs::create_dir_all(dir.join(LOGS)).map_err(io(dir))?;
        let dir = dir.canonicalize().map_err(io(dir))?;
        let path = dir.join(SPEC);
        if path.exists() {
            let old = SweepDir::open(&dir)?;
            return match old.spec.differs(&spec) {
                None => Ok(old),
                Some(field) => Err(ArrayError::OtherSpec { path, field }),
            };
        }
        let mut bytes = serde_json::to_vec_pretty(&spec).unwrap_or_default();
        bytes.push(b'\n');
        write_atomic(&path, &bytes)?;
        Ok(SweepDir {
            spec_sha256: sha256_hex(&bytes),
            dir,
            spec,
        })
    }

    /// The sweep in `dir`.
    pub fn open(dir: &Path) -> Result<SweepDir, ArrayError> {
        let dir = dir.canonicalize().map_err(io(dir))?;
        let (spec, bytes) = read_json(&dir.join(SPEC))?;
        Ok(SweepDir {
            spec_sha256: sha256_hex(&bytes),
            dir,
            spec,
        })
    }

    fn point_path(&self, index: usize) -> PathBuf {
        self.dir.join(POINTS).join(format!("{index}.json"))
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.dir.join(LOGS).join(format!("{index}.out"))
    }

    /// Each point's result, where its file exists: `Ok` if this spec made it, `Err` with
    /// what is wrong otherwise.
    fn results(&self) -> Vec<Option<Result<SweepRow, String>>> {
        (0..self.spec.points.len())
            .map(|i| {
                let path = self.point_path(i);
                if !path.exists() {
                    return None;
                }
                Some(match read_json::<PointFile>(&path) {
                    Ok((p, _)) if p.spec_sha256 == self.spec_sha256 && p.index == i => Ok(p.row),
                    Ok((p, _)) => Err(format!(
                        "{} (spec {}, index {})",
                        path.display(),
                        p.spec_sha256,
                        p.index
                    )),
                    Err(e) => Err(e.to_string()),
                })
            })
            .collect()
    }

    /// The points without a result of this spec, in order.
    pub fn missing(&self) -> Vec<usize> {
        self.results()
            .iter()
            .enumerate()
            .filter(|(_, r)| !matches!(r, Some(Ok(_))))
            .map(|(i, _)| i)
            .collect()
    }

    /// The batch script of an array of `indices`: each task runs its point with the spec's
    /// binary from the spec's working directory, its output in `logs/INDEX.out`.
    pub fn script(&self, indices: &[usize]) -> String {
        let q = |p: &Path| shell_quote(&p.display().to_string());
        format!(
            "#!/bin/sh\n\
             #SBATCH --job-name=cosched-sweep\n\
             #SBATCH --array={array}\n\
             #SBATCH --ntasks=1\n\
             #SBATCH --output={logs}/%a.out\n\
             # One point of the sweep in {dir} per array task (`cosched sim sweep --gather` merges them).\n\
             cd {workdir} || exit 1\n\
             exec {binary} sim sweep --point \"$SLURM_ARRAY_TASK_ID\" --spec {spec}\n",
            array = index_ranges(&indices.iter().map(|&i| i as u32).collect::<Vec<_>>(), None),
            logs = self.dir.join(LOGS).display(),
            dir = self.dir.display(),
            workdir = q(&self.spec.workdir),
            binary = q(&self.spec.binary),
            spec = q(&self.dir.join(SPEC)),
        )
    }

    /// Submits the points without a result as one array with `sbatch` (a program on PATH or
    /// a path); the job id it printed, or `None` when every point is done. The script is
    /// kept as `DIR/submit-N.sh`, N counting the submissions.
    pub fn submit(&self, sbatch: &OsStr) -> Result<Option<(String, Vec<usize>)>, ArrayError> {
        let missing = self.missing();
        if missing.is_empty() {
            return Ok(None);
        }
        let n = (1..)
            .find(|n| !self.dir.join(format!("submit-{n}.sh")).exists())
            .unwrap_or(1);
        let script = self.dir.join(format!("submit-{n}.sh"));
        write_atomic(&script, self.script(&missing).as_bytes())?;
        let program = sbatch.to_string_lossy().into_owned();
        let out = Command::new(sbatch)
            .arg("--parsable")
            .arg(&script)
            .current_dir(&self.spec.workdir)
            .output()
            .map_err(|source| ArrayError::Spawn {
                program: program.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(ArrayError::Refused {
                program,
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        // `--parsable` prints `ID` or `ID;CLUSTER`.
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text
            .trim()
            .split(';')
            .next()
            .unwrap_or_default()
            .to_string();
        Ok(Some((id, missing)))
    }

    /// Runs point `index` of `sweep` (the spec's arguments, parsed again) and writes its
    /// file. Refused when this binary, the input or the points differ from the spec's.
    pub fn run_point(
        &self,
        sweep: &Prepared,
        prov: &Provenance,
        index: usize,
    ) -> Result<PointFile, ArrayError> {
        let spec_path = self.dir.join(SPEC);
        let pinned = |what, expected: &str, found: &str| {
            if expected == found {
                Ok(())
            } else {
                Err(ArrayError::Pinned {
                    spec: spec_path.clone(),
                    what,
                    expected: expected.to_string(),
                    found: found.to_string(),
                })
            }
        };
        let exe = std::env::current_exe().map_err(io(Path::new("/proc/self/exe")))?;
        pinned(
            "the binary's SHA-256",
            &self.spec.binary_sha256,
            &binary_sha256(&exe)?,
        )?;
        pinned(
            "the input's SHA-256",
            &self.spec.input_sha256,
            &prov.input_sha256,
        )?;
        let here = names(sweep);
        if here != self.spec.points {
            return Err(ArrayError::OtherSpec {
                path: spec_path,
                field: "points",
            });
        }
        if index >= here.len() {
            return Err(ArrayError::NoSuchPoint {
                spec: spec_path,
                index,
                count: here.len(),
            });
        }
        let point = PointFile {
            spec_sha256: self.spec_sha256.clone(),
            index,
            provenance: prov.clone(),
            row: sweep.run_point(index),
        };
        let mut bytes = serde_json::to_vec_pretty(&point).unwrap_or_default();
        bytes.push(b'\n');
        write_atomic(&self.point_path(index), &bytes)?;
        Ok(point)
    }

    /// Every point's row, in order, with the provenance of the merged files (this process's
    /// command, the spec's input). Refused, naming them, while points are missing (with the
    /// end of each one's task output, when there is one) or were made by another spec.
    pub fn gather(&self) -> Result<(Vec<SweepRow>, Provenance), ArrayError> {
        let results = self.results();
        let foreign: Vec<String> = results
            .iter()
            .filter_map(|r| r.as_ref()?.as_ref().err().cloned())
            .collect();
        if !foreign.is_empty() {
            return Err(ArrayError::Foreign {
                dir: self.dir.clone(),
                points: foreign,
            });
        }
        let missing: Vec<String> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_none())
            .map(|(i, _)| {
                let log = self.log_path(i);
                let tail = std::fs::read_to_string(&log).ok().and_then(|t| {
                    t.lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .map(String::from)
                });
                match tail {
                    Some(t) => format!(
                        "  point {i} ({}): failed? {} ends: {t}",
                        self.spec.points[i],
                        log.display()
                    ),
                    None => format!("  point {i} ({}): not run yet", self.spec.points[i]),
                }
            })
            .collect();
        if !missing.is_empty() {
            return Err(ArrayError::Incomplete {
                dir: self.dir.clone(),
                total: results.len(),
                missing,
            });
        }
        let rows = results.into_iter().flatten().flatten().collect();
        let prov = Provenance {
            version: provenance::version(),
            command: provenance::command_line(),
            input: self.spec.input.clone(),
            input_sha256: self.spec.input_sha256.clone(),
        };
        Ok((rows, prov))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsOptions;
    use crate::setup::Source;
    use crate::sweep::{Metric, Outputs, SweepSpec, prepare, run, write_files};
    use cosched_policy::PolicyOptions;
    use cosched_sim::EngineOptions;
    use cosched_sim::trace::Semantics;
    use cosched_workload::lublin::GenOptions;

    fn sweep() -> SweepSpec {
        SweepSpec {
            source: Source::Lublin {
                model: Box::new(GenOptions {
                    jobs: 200,
                    procs: 32,
                    seed: 5,
                    ..GenOptions::default()
                }),
            },
            // A policy that breaks nothing and one option value that fails at run time
            // would need a broken policy; failed rows are covered by the NaN round trip.
            policies: vec!["fcfs".into(), "easy".into()],
            loads: vec![Some(0.6), Some(0.9)],
            seeds: vec![1, 2],
            semantics: Semantics::default(),
            engine: EngineOptions::default(),
            policy: PolicyOptions::default(),
            metrics: MetricsOptions {
                batch_size: 50,
                ..MetricsOptions::default()
            },
            stop: None,
            machine: None,
        }
    }

    fn array_spec(s: &SweepSpec, args: &[&str]) -> ArraySpec {
        ArraySpec::new(
            &prepare(s).unwrap(),
            &Provenance::of(&s.source),
            args.iter().map(|a| a.to_string()).collect(),
            "t".into(),
            "bsld".into(),
        )
        .unwrap()
    }

    /// The files a gathered sweep writes are those of the same sweep run here, byte for
    /// byte, apart from the provenance (the command differs).
    #[test]
    fn gathered_points_write_the_files_of_a_local_sweep() {
        let s = sweep();
        let tmp = tempfile::tempdir().unwrap();
        let dir = SweepDir::create(&tmp.path().join("arr"), array_spec(&s, &["--x"])).unwrap();
        let prepared = prepare(&s).unwrap();
        let prov = Provenance::of(&s.source);
        assert_eq!(dir.missing(), (0..8).collect::<Vec<_>>());
        // In any order, as array tasks finish.
        for i in (0..8).rev() {
            dir.run_point(&prepared, &prov, i).unwrap();
        }
        assert!(dir.missing().is_empty());
        let (rows, gathered_prov) = dir.gather().unwrap();
        let local = run(&s, &|| {}).unwrap();
        assert_eq!(rows, local);
        fn out(d: &Path) -> Outputs<'_> {
            Outputs {
                dir: d,
                title: "t",
                metric: Metric::Bsld,
                plots: &[],
            }
        }
        let here = tmp.path().join("local");
        write_files(&local, &prov, &out(&here)).unwrap();
        write_files(&rows, &gathered_prov, &out(&dir.dir)).unwrap();
        let without_provenance = |p: PathBuf| {
            let text = std::fs::read_to_string(p).unwrap();
            let mut v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("provenance");
                return v.to_string();
            }
            text.lines()
                .filter(|l| !l.starts_with("# "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for f in ["sweep.csv", "sweep.json"] {
            assert_eq!(
                without_provenance(here.join(f)),
                without_provenance(dir.dir.join(f)),
                "{f}"
            );
        }
        let svg = |p: PathBuf| {
            let t = std::fs::read_to_string(p).unwrap();
            let a = t.find("<metadata>").unwrap();
            let b = t.find("</desc>").unwrap();
            format!("{}{}", &t[..a], &t[b..])
        };
        assert_eq!(svg(here.join("sweep.svg")), svg(dir.dir.join("sweep.svg")));
    }

    /// A failed point's NaN figures are JSON `null`, and read back as NaN.
    #[test]
    fn a_failed_points_row_reads_back() {
        let row = SweepRow {
            policy: "easy".into(),
            load: None,
            seed: 1,
            jobs: 0,
            unfinished: 3,
            mean_wait_s: f64::NAN,
            mean_response_s: f64::NAN,
            mean_slowdown: f64::NAN,
            mean_bounded_slowdown: f64::NAN,
            p90_bounded_slowdown: f64::NAN,
            p90_wait_s: f64::NAN,
            bounded_slowdown_ci90: None,
            utilization: f64::NAN,
            makespan_s: 0.1 + 0.2,
            error: Some("broke its contract".into()),
            multicore: None,
        };
        let text = serde_json::to_string(&row).unwrap();
        assert!(text.contains("\"mean_wait_s\":null"), "{text}");
        let back: SweepRow = serde_json::from_str(&text).unwrap();
        assert!(back.mean_wait_s.is_nan() && back.utilization.is_nan());
        assert_eq!(back.makespan_s.to_bits(), (0.1f64 + 0.2).to_bits());
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    /// Gather names each missing point (with the end of its task's output) and refuses a
    /// point made by another spec; a directory keeps its sweep.
    #[test]
    fn gather_names_missing_and_foreign_points() {
        let s = sweep();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("arr");
        let dir = SweepDir::create(&path, array_spec(&s, &["--a"])).unwrap();
        let prepared = prepare(&s).unwrap();
        let prov = Provenance::of(&s.source);
        for i in [0, 1, 2, 4, 5, 6, 7] {
            dir.run_point(&prepared, &prov, i).unwrap();
        }
        std::fs::write(dir.log_path(3), "starting\nerror: out of memory\n\n").unwrap();
        let err = dir.gather().unwrap_err().to_string();
        assert!(err.contains("1 of 8 points have no result"), "{err}");
        assert!(
            err.contains("point 3 (fcfs, load 0.9, seed 2): failed? ")
                && err.contains("3.out ends: error: out of memory"),
            "{err}"
        );
        // Resubmitting the same sweep resumes it; another is refused.
        let again = SweepDir::create(&path, array_spec(&s, &["--a"])).unwrap();
        assert_eq!(again.missing(), [3]);
        let other = SweepDir::create(&path, array_spec(&s, &["--b"]))
            .err()
            .unwrap();
        assert!(
            matches!(
                other,
                ArrayError::OtherSpec {
                    field: "arguments",
                    ..
                }
            ),
            "{other}"
        );
        // A point file of another spec.
        dir.run_point(&prepared, &prov, 3).unwrap();
        let p3 = dir.point_path(3);
        let text = std::fs::read_to_string(&p3).unwrap();
        std::fs::write(&p3, text.replace(&dir.spec_sha256, "0000")).unwrap();
        let err = dir.gather().unwrap_err().to_string();
        assert!(
            err.contains("points made by another spec") && err.contains("3.json"),
            "{err}"
        );
        assert_eq!(dir.missing(), [3]);
        // Another input is refused before running.
        let mut other_input = prov.clone();
        other_input.input_sha256 = "ff".into();
        let err = dir.run_point(&prepared, &other_input, 3).unwrap_err();
        assert!(matches!(err, ArrayError::Pinned { .. }), "{err}");
        let err = dir.run_point(&prepared, &prov, 8).unwrap_err().to_string();
        assert!(err.contains("point 8 is not one of the 8 points"), "{err}");
    }

    /// Submission: only the points without a result, as one array, through the program
    /// given; its `--parsable` id (with or without a cluster) comes back.
    #[test]
    fn submit_sends_only_the_missing_points() {
        let s = sweep();
        let tmp = tempfile::tempdir().unwrap();
        let dir = SweepDir::create(&tmp.path().join("arr"), array_spec(&s, &[])).unwrap();
        let prepared = prepare(&s).unwrap();
        let prov = Provenance::of(&s.source);
        for i in [0, 1, 5] {
            dir.run_point(&prepared, &prov, i).unwrap();
        }
        let fake = tmp.path().join("sbatch");
        let seen = tmp.path().join("seen");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\necho \"$@\" > {0}\ncat \"$2\" >> {0}\necho '77;loop'\n",
                seen.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (id, points) = dir.submit(fake.as_os_str()).unwrap().unwrap();
        assert_eq!((id.as_str(), points), ("77", vec![2, 3, 4, 6, 7]));
        let seen = std::fs::read_to_string(seen).unwrap();
        assert!(seen.starts_with("--parsable "), "{seen}");
        assert!(seen.contains("#SBATCH --array=2-4,6-7\n"), "{seen}");
        assert!(
            seen.contains("sim sweep --point \"$SLURM_ARRAY_TASK_ID\" --spec "),
            "{seen}"
        );
        assert!(dir.dir.join("submit-1.sh").exists());
        for i in [2, 3, 4, 6, 7] {
            dir.run_point(&prepared, &prov, i).unwrap();
        }
        assert!(dir.submit(fake.as_os_str()).unwrap().is_none());
        let refusing = tmp.path().join("refusing");
        std::fs::write(
            &refusing,
            "#!/bin/sh\necho 'sbatch: error: no partition' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&refusing, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(dir.point_path(0)).unwrap();
        let err = dir.submit(refusing.as_os_str()).unwrap_err().to_string();
        assert!(err.contains("sbatch: error: no partition"), "{err}");
    }
}
