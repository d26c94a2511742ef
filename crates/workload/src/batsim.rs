//! Batsim's JSON workload: read into SWF records, and written from them, so that a workload
//! (and a schedule made from it) can be moved between cosched and Batsim.
//!
//! A Batsim workload is one JSON object: `nb_res` (the machine's resources), `jobs` (each with
//! `id`, `subtime`, `res`, an optional `walltime` and the name of a `profile`) and `profiles`
//! (what a job does). cosched simulates rigid jobs of known run time, so it reads the *delay*
//! profiles (`"type": "delay"` in Batsim 4, `"DelayProfile"` in Batsim 5), whose `delay` is the
//! run time; any other profile type is refused, naming the job and the profile.
//!
//! In SWF terms a job becomes: job number = `id` (an integer, a string of digits, or Batsim's
//! `workload!number` form), submit = `subtime`, run time = the profile's `delay`, requested
//! and allocated processors = `res`, requested time = `walltime` (absent or −1: unknown).
//! Times are seconds, fractional allowed. Records come out in submit order (then id), as
//! Batsim submits them.
//!
//! Written, each job gets a delay profile named by [`profile_name`] (one profile per distinct
//! run time), its size (allocated processors, else requested ones: the simulator's default)
//! and its requested time as `walltime`. Batsim kills a job at its walltime, cosched by default
//! does not: a trace whose jobs overrun their requested time is simulated alike only with
//! `cosched sim --kill-at-estimate`.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use cosched_core::{Dur, Time};
use serde::Deserialize;

use crate::swf::{Oversize, ReadOptions, ReadReport, SwfHeader, SwfRecord, Trace};

/// A Batsim workload that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BatsimError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    /// Not JSON, or a field of the wrong type (serde's message carries the line and column).
    #[error("{path}: not a Batsim workload: {source}")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: nb_res is {nb_res}; a Batsim workload needs at least one resource")]
    NoResources { path: String, nb_res: i64 },
    #[error("{path}: jobs[{index}] (id {id}): {what}")]
    Job {
        path: String,
        index: usize,
        id: String,
        what: String,
    },
    #[error("{path}: profile {profile:?}: {what}")]
    Profile {
        path: String,
        profile: String,
        what: String,
    },
    #[error(
        "{path}: jobs[{index}] (id {id}) asks for {asked} resources but the machine has \
         {procs}; pass --oversize skip or --oversize clip (or a larger --procs)"
    )]
    Oversize {
        path: String,
        index: usize,
        id: String,
        asked: u32,
        procs: u32,
    },
}

#[derive(Deserialize)]
struct Doc {
    nb_res: i64,
    jobs: Vec<JobDoc>,
    profiles: BTreeMap<String, ProfileDoc>,
}

#[derive(Deserialize)]
struct JobDoc {
    id: JobIdDoc,
    subtime: f64,
    walltime: Option<f64>,
    res: i64,
    profile: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum JobIdDoc {
    Int(i64),
    Text(String),
}

impl std::fmt::Display for JobIdDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobIdDoc::Int(n) => write!(f, "{n}"),
            JobIdDoc::Text(s) => write!(f, "{s:?}"),
        }
    }
}

#[derive(Deserialize)]
struct ProfileDoc {
    #[serde(rename = "type")]
    kind: String,
    delay: Option<f64>,
}

/// Whether `path` holds a Batsim workload rather than SWF: its name ends in `.json` (or
/// `.json.gz`), or its first non-blank byte (after gzip) is `{` (an SWF file starts with `;` or
/// a digit). Standard input (`-`) is read as SWF.
pub fn is_batsim_workload(path: &Path) -> bool {
    if path.as_os_str() == "-" {
        return false;
    }
    let name = path.to_string_lossy();
    if name.ends_with(".json") || name.ends_with(".json.gz") {
        return true;
    }
    let Ok(r) = open_plain(path) else {
        return false;
    };
    let mut head = Vec::with_capacity(256);
    if r.take(256).read_to_end(&mut head).is_err() {
        return false;
    }
    head.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{')
}

/// The file's bytes, gunzipped when they start with gzip's magic number.
fn open_plain(path: &Path) -> io::Result<Box<dyn Read>> {
    let mut file = BufReader::new(File::open(path)?);
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic)?;
    let head = io::Cursor::new(magic[..n].to_vec()).chain(file);
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(head))
    } else {
        Box::new(head)
    })
}

/// Reads a Batsim workload as a trace: records in submit order, a header giving the machine
/// size (`MaxProcs: nb_res`) and the file it came from. `opts.procs` overrides `nb_res`;
/// `opts.oversize` treats jobs larger than the machine as the SWF reader does.
pub fn read_workload(path: &Path, opts: &ReadOptions) -> Result<Trace, BatsimError> {
    let name = path.display().to_string();
    let io_err = |source| BatsimError::Io {
        path: name.clone(),
        source,
    };
    let mut text = String::new();
    open_plain(path)
        .and_then(|mut r| r.read_to_string(&mut text))
        .map_err(io_err)?;
    read_workload_from(&text, &name, opts)
}

/// [`read_workload`] of a document in memory; `name` names it in errors.
pub fn read_workload_from(
    text: &str,
    name: &str,
    opts: &ReadOptions,
) -> Result<Trace, BatsimError> {
    let doc: Doc = serde_json::from_str(text).map_err(|source| BatsimError::Json {
        path: name.to_string(),
        source,
    })?;
    if doc.nb_res < 1 || doc.nb_res > i64::from(u32::MAX) {
        return Err(BatsimError::NoResources {
            path: name.to_string(),
            nb_res: doc.nb_res,
        });
    }
    let procs = opts.procs.unwrap_or(doc.nb_res as u32);
    let mut runs = BTreeMap::new();
    for (pname, p) in &doc.profiles {
        let bad = |what: String| BatsimError::Profile {
            path: name.to_string(),
            profile: pname.clone(),
            what,
        };
        if p.kind != "delay" && p.kind != "DelayProfile" {
            continue;
        }
        match p.delay {
            Some(d) if d.is_finite() && d >= 0.0 => {
                runs.insert(pname.as_str(), Dur::from_secs_f64(d));
            }
            Some(d) => return Err(bad(format!("delay {d} is not a duration in seconds"))),
            None => return Err(bad("a delay profile without a delay field".into())),
        }
    }
    let mut report = ReadReport::default();
    let mut seen = HashSet::with_capacity(doc.jobs.len());
    let mut records = Vec::with_capacity(doc.jobs.len());
    for (index, j) in doc.jobs.iter().enumerate() {
        let bad = |what: String| BatsimError::Job {
            path: name.to_string(),
            index,
            id: j.id.to_string(),
            what,
        };
        let job = job_number(&j.id).ok_or_else(|| {
            bad("id is not a job number (an integer, digits, or workload!number)".into())
        })?;
        if !seen.insert(job) {
            return Err(bad(format!("job number {job} appears twice")));
        }
        if !(j.subtime.is_finite() && j.subtime >= 0.0) {
            return Err(bad(format!(
                "subtime {} is not a time in seconds from 0",
                j.subtime
            )));
        }
        let req_time = match j.walltime {
            None => None,
            Some(-1.0) => None,
            Some(w) if w.is_finite() && w > 0.0 => Some(Dur::from_secs_f64(w)),
            Some(w) => {
                return Err(bad(format!(
                    "walltime {w} is neither a positive duration nor -1 (none)"
                )));
            }
        };
        let Ok(mut res) = u32::try_from(j.res) else {
            return Err(bad(format!("res {} is not a number of resources", j.res)));
        };
        let run = match runs.get(j.profile.as_str()) {
            Some(&d) => d,
            None => {
                return Err(bad(match doc.profiles.get(&j.profile) {
                    Some(p) => format!(
                        "profile {:?} is of type {:?}; cosched reads only delay profiles \
                         (their delay is the run time)",
                        j.profile, p.kind
                    ),
                    None => format!("profile {:?} is not in profiles", j.profile),
                }));
            }
        };
        if res > procs {
            report.oversize += 1;
            match opts.oversize {
                Oversize::Error => {
                    return Err(BatsimError::Oversize {
                        path: name.to_string(),
                        index,
                        id: j.id.to_string(),
                        asked: res,
                        procs,
                    });
                }
                Oversize::Skip => {
                    report.oversize_skipped += 1;
                    continue;
                }
                Oversize::Clip => {
                    report.oversize_clipped += 1;
                    res = procs;
                }
            }
        }
        records.push(SwfRecord {
            job,
            submit: Some(Time::from_secs_f64(j.subtime)),
            run: Some(run),
            alloc_procs: Some(res),
            req_procs: Some(res),
            req_time,
            ..SwfRecord::default()
        });
    }
    records.sort_by_key(|r| (r.submit, r.job));
    report.job_lines = doc.jobs.len() as u64;
    let mut header = SwfHeader::default();
    header.push_line(&format!(" MaxProcs: {}", doc.nb_res));
    header.push_line(&format!(" Note: read from the Batsim workload {name}"));
    Ok(Trace {
        header,
        records,
        procs,
        report,
    })
}

/// A Batsim job id as a job number: an integer, a string of digits, or `workload!number`.
fn job_number(id: &JobIdDoc) -> Option<u64> {
    match id {
        JobIdDoc::Int(n) => u64::try_from(*n).ok(),
        JobIdDoc::Text(s) => s.rsplit('!').next()?.parse().ok(),
    }
}

/// The name of the delay profile of a job running `run`: `delay` and the run time in seconds
/// (`delay3600`, `delay2.5`). The workload writer and the `jobs.csv` writer both name
/// profiles so, so that a schedule's rows point at the workload's profiles.
pub fn profile_name(run: Dur) -> String {
    format!("delay{}", Seconds(run.as_micros()))
}

/// Seconds from microseconds, without a fractional part when whole (`3600`, `2.5`).
struct Seconds(i64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (s, us) = (self.0.div_euclid(1_000_000), self.0.rem_euclid(1_000_000));
        if us == 0 {
            write!(f, "{s}")
        } else {
            let frac = format!("{us:06}");
            write!(f, "{s}.{}", frac.trim_end_matches('0'))
        }
    }
}

/// What [`write_workload`] left out: records without a positive run time or size, or with
/// no submit time (Batsim needs all three).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub jobs: usize,
    pub left_out: usize,
}

/// Writes `records` as a Batsim workload for a machine of `procs` resources, one job per
/// line; `description` goes into the document's `description` field (Batsim ignores it).
pub fn write_workload<W: Write>(
    w: W,
    procs: u32,
    records: &[SwfRecord],
    description: &str,
) -> io::Result<Written> {
    let mut w = io::BufWriter::new(w);
    let mut profiles = BTreeMap::new();
    let mut written = Written::default();
    writeln!(w, "{{")?;
    writeln!(
        w,
        "  \"description\": {},",
        serde_json::to_string(description)?
    )?;
    writeln!(w, "  \"nb_res\": {procs},")?;
    writeln!(w, "  \"jobs\": [")?;
    let mut first = true;
    for r in records {
        let size = r.alloc_procs.filter(|&p| p > 0).or(r.req_procs);
        let (Some(submit), Some(run), Some(size)) = (
            r.submit,
            r.run.filter(|&d| d > Dur::ZERO),
            size.filter(|&p| p > 0),
        ) else {
            written.left_out += 1;
            continue;
        };
        let profile = profile_name(run);
        let walltime = r
            .req_time
            .filter(|&d| d > Dur::ZERO)
            .map(|d| format!(", \"walltime\": {}", Seconds(d.as_micros())))
            .unwrap_or_default();
        write!(
            w,
            "{}    {{\"id\": {}, \"subtime\": {}, \"res\": {size}{walltime}, \"profile\": \"{profile}\"}}",
            if first { "" } else { ",\n" },
            r.job,
            Seconds(submit.as_micros()),
        )?;
        first = false;
        profiles.entry(profile).or_insert(run);
        written.jobs += 1;
    }
    writeln!(w, "\n  ],")?;
    writeln!(w, "  \"profiles\": {{")?;
    let n = profiles.len();
    for (i, (name, run)) in profiles.into_iter().enumerate() {
        writeln!(
            w,
            "    \"{name}\": {{\"type\": \"delay\", \"delay\": {}}}{}",
            Seconds(run.as_micros()),
            if i + 1 < n { "," } else { "" }
        )?;
    }
    writeln!(w, "  }}")?;
    writeln!(w, "}}")?;
    w.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAYS: &str = r#"{
    "nb_res": 4,
    "jobs": [
        {"id": 2, "subtime": 3, "walltime": 100, "res": 1, "profile": "d10"},
        {"id": "w0!1", "subtime": 0.5, "res": 4, "profile": "d2"},
        {"id": "7", "subtime": 3, "walltime": -1, "res": 2, "profile": "d10"}
    ],
    "profiles": {
        "d10": {"type": "delay", "delay": 10},
        "d2": {"type": "DelayProfile", "delay": 2.25},
        "big": {"type": "parallel_homogeneous", "cpu": 1e9, "com": 0}
    }
}"#;

    fn read(text: &str) -> Result<Trace, BatsimError> {
        read_workload_from(text, "w.json", &ReadOptions::default())
    }

    #[test]
    fn delay_jobs_become_records_in_submit_order() {
        let t = read(DELAYS).unwrap();
        assert_eq!(t.procs, 4);
        assert_eq!(t.header.machine_procs(), Some(4));
        let got: Vec<_> = t
            .records
            .iter()
            .map(|r| {
                (
                    r.job,
                    r.submit.unwrap().as_micros(),
                    r.run.unwrap().as_micros(),
                    r.alloc_procs.unwrap(),
                    r.req_time.map(|d| d.as_secs()),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 500_000, 2_250_000, 4, None),
                (2, 3_000_000, 10_000_000, 1, Some(100)),
                (7, 3_000_000, 10_000_000, 2, None),
            ]
        );
    }

    #[test]
    fn written_workload_reads_back_the_same_jobs() {
        let t = read(DELAYS).unwrap();
        let mut out = Vec::new();
        let n = write_workload(&mut out, 4, &t.records, "test \"quoted\"").unwrap();
        assert_eq!(
            n,
            Written {
                jobs: 3,
                left_out: 0
            }
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\"delay2.25\": {\"type\": \"delay\", \"delay\": 2.25}"),
            "{text}"
        );
        let back = read(&text).unwrap();
        assert_eq!(back.records, t.records);
        // The profile names are those the jobs.csv writer gives.
        assert_eq!(profile_name(Dur::from_secs(3600)), "delay3600");
    }

    #[test]
    fn records_batsim_cannot_run_are_left_out_of_a_written_workload() {
        let mut t = read(DELAYS).unwrap();
        t.records[0].run = None;
        t.records[1].alloc_procs = Some(0);
        t.records[1].req_procs = None;
        let mut out = Vec::new();
        let n = write_workload(&mut out, 4, &t.records, "").unwrap();
        assert_eq!(
            n,
            Written {
                jobs: 1,
                left_out: 2
            }
        );
        assert_eq!(
            read(std::str::from_utf8(&out).unwrap())
                .unwrap()
                .records
                .len(),
            1
        );
    }

    fn err(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn bad_workloads_are_refused_naming_the_job_and_field() {
        let job = |j: &str| {
            format!(
                r#"{{"nb_res": 4, "jobs": [{j}], "profiles": {{"d": {{"type": "delay", "delay": 5}}, "p": {{"type": "parallel"}}}}}}"#
            )
        };
        assert_eq!(
            err(&job(r#"{"id": 3, "subtime": 0, "res": 1, "profile": "x"}"#)),
            "w.json: jobs[0] (id 3): profile \"x\" is not in profiles"
        );
        assert_eq!(
            err(&job(r#"{"id": 3, "subtime": 0, "res": 1, "profile": "p"}"#)),
            "w.json: jobs[0] (id 3): profile \"p\" is of type \"parallel\"; cosched reads \
             only delay profiles (their delay is the run time)"
        );
        assert_eq!(
            err(&job(
                r#"{"id": 3, "subtime": -4, "res": 1, "profile": "d"}"#
            )),
            "w.json: jobs[0] (id 3): subtime -4 is not a time in seconds from 0"
        );
        assert_eq!(
            err(&job(
                r#"{"id": "a!b", "subtime": 0, "res": 1, "profile": "d"}"#
            )),
            "w.json: jobs[0] (id \"a!b\"): id is not a job number (an integer, digits, or \
             workload!number)"
        );
        assert_eq!(
            err(&job(
                r#"{"id": 1, "subtime": 0, "res": 1, "profile": "d"}, {"id": "1", "subtime": 1, "res": 1, "profile": "d"}"#
            )),
            "w.json: jobs[1] (id \"1\"): job number 1 appears twice"
        );
        assert_eq!(
            err(&job(
                r#"{"id": 1, "subtime": 0, "walltime": 0, "res": 1, "profile": "d"}"#
            )),
            "w.json: jobs[0] (id 1): walltime 0 is neither a positive duration nor -1 (none)"
        );
        assert_eq!(
            err(&job(r#"{"id": 1, "subtime": 0, "res": 9, "profile": "d"}"#)),
            "w.json: jobs[0] (id 1) asks for 9 resources but the machine has 4; pass \
             --oversize skip or --oversize clip (or a larger --procs)"
        );
        // A field of the wrong type: serde's message, with the line and column.
        let e = err(
            "{\"nb_res\": 4,\n \"jobs\": [{\"id\": 1, \"subtime\": 0, \"res\": \"4\", \"profile\": \"d\"}],\n \"profiles\": {}}",
        );
        assert!(
            e.starts_with("w.json: not a Batsim workload: invalid type: string \"4\"")
                && e.ends_with("line 2 column 44"),
            "{e}"
        );
        assert!(
            err("{\"jobs\": [], \"profiles\": {}}").contains("missing field `nb_res`"),
            "nb_res is required"
        );
        assert_eq!(
            err(r#"{"nb_res": 0, "jobs": [], "profiles": {}}"#),
            "w.json: nb_res is 0; a Batsim workload needs at least one resource"
        );
        assert_eq!(
            err(r#"{"nb_res": 2, "jobs": [], "profiles": {"d": {"type": "delay"}}}"#),
            "w.json: profile \"d\": a delay profile without a delay field"
        );
    }

    #[test]
    fn oversize_jobs_are_skipped_or_clipped_on_request() {
        let text = r#"{"nb_res": 2, "jobs": [{"id": 1, "subtime": 0, "res": 3, "profile": "d"},
            {"id": 2, "subtime": 0, "res": 1, "profile": "d"}],
            "profiles": {"d": {"type": "delay", "delay": 1}}}"#;
        let with = |oversize| {
            read_workload_from(
                text,
                "w.json",
                &ReadOptions {
                    oversize,
                    ..ReadOptions::default()
                },
            )
            .unwrap()
        };
        let skip = with(Oversize::Skip);
        assert_eq!(skip.records.len(), 1);
        assert_eq!(skip.report.oversize_skipped, 1);
        let clip = with(Oversize::Clip);
        assert_eq!(clip.records[0].alloc_procs, Some(2));
    }

    #[test]
    fn batsim_files_are_told_from_swf_by_name_or_first_byte() {
        let dir = std::env::temp_dir().join(format!("cosched-batsim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("w.txt");
        std::fs::write(&json, "\n  {\"nb_res\": 1}").unwrap();
        let swf = dir.join("t.swf");
        std::fs::write(
            &swf,
            "; MaxProcs: 4\n1 0 0 1 1 -1 -1 1 1 -1 1 1 1 1 1 1 -1 -1\n",
        )
        .unwrap();
        assert!(is_batsim_workload(&json));
        assert!(!is_batsim_workload(&swf));
        assert!(is_batsim_workload(&dir.join("absent.json")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
