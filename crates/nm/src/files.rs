//! The files the shell touches for the core: output files cut at the cap or told something
//! (a rank's MPI ran alone, a PMIx request refused), job directories
//! listed and removed after the retention, a rank's output read for `cosched output`, the
//! error file of a rank that could not start. Every file a user could have swapped is opened
//! without following links, and as root only when it is the job's user's own.

use std::path::Path;
use std::time::SystemTime;

use cosched_core::{Dur, JobId};

use super::core::{CapOutput, ReadOutput};
use cosched_proto::dir::Dir;
use cosched_proto::proto::FromNode;
use cosched_proto::proto::MAX_OUTPUT;

/// Cuts an output file past its `keep` back to it, appending the cap's notice the first
/// time; returns whether the notice was appended. Only a regular file (of the job's user, as
/// root) is cut: a link the user put where the output was must not make root cut another
/// file.
pub fn cap_output(c: &CapOutput, cap: u64) -> bool {
    use std::io::Write;
    if std::fs::metadata(&c.path).map_or(true, |m| m.len() <= c.keep) {
        return false;
    }
    let Ok(mut f) = cosched_proto::dir::open_regular(&c.path, c.must_own, true) else {
        return false;
    };
    if f.set_len(c.keep).is_err() {
        return false;
    }
    c.notice && {
        let _ = f.write_all(super::cap_notice(cap).as_bytes());
        true
    }
}

/// Appends `text` to a rank's output file: only to a regular file (of the job's user, as
/// root), for the reason [`cap_output`] gives. A file that is not there (the rank's output went
/// elsewhere) gets nothing.
pub fn append_output(path: &Path, text: &str, must_own: Option<u32>) {
    use std::io::Write;
    if let Ok(mut f) = cosched_proto::dir::open_regular(path, must_own, true) {
        let _ = f.write_all(text.as_bytes());
    }
}

/// Slurm's command names a batch script and a step find on their `PATH`: `srun` above all,
/// and the commands scripts call to look at the cluster.
pub const SLURM_COMMANDS: &[&str] = &[
    "srun", "sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "salloc",
];

/// `WORKDIR/slurm-bin`, the node manager's own directory (mode 0755, in its private work
/// directory: no user can put anything there) of links named after Slurm's commands to the
/// `cosched` binary `exe`, which answers to those names; `None` (and a warning) when it
/// cannot be made, and then a batch script finds only the `srun` of its own `PATH`.
pub fn slurm_bin(workdir: &Path, exe: &Path, node: &str) -> Option<std::path::PathBuf> {
    let made = Dir::private(workdir, 0o711)
        .map_err(|e| e.to_string())
        .and_then(|w| {
            w.private_child("slurm-bin", 0o755)
                .map_err(|e| e.to_string())
        })
        .and_then(|dir| {
            for name in SLURM_COMMANDS {
                if std::fs::read_link(dir.join(name)).is_ok_and(|to| to == exe) {
                    continue;
                }
                let _ = dir.remove_file(name);
                std::os::unix::fs::symlink(exe, dir.join(name))
                    .map_err(|e| format!("{}: {e}", dir.join(name).display()))?;
            }
            Ok(dir.path().to_path_buf())
        });
    match made {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(
                "nm {node}: no directory of Slurm's commands for batch scripts ({e}): srun is found only on their own PATH"
            );
            None
        }
    }
}

/// The job directories in `jobs` (`WORKDIR/jobs/ID`), each with the time since it last
/// changed. Not followed: only a real directory counts.
pub fn job_dirs(jobs: &Dir) -> Vec<(JobId, Dur)> {
    let Ok(entries) = std::fs::read_dir(jobs.path()) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let Ok(m) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !m.is_dir() {
            continue;
        }
        let ended = m.modified().unwrap_or(now);
        let age = now.duration_since(ended).unwrap_or_default();
        out.push((JobId(id), Dur(age.as_micros().min(i64::MAX as u128) as i64)));
    }
    out.sort_unstable();
    out
}

/// Removes a job's directory on the node (`--keep-jobs` is over); the log line says so.
pub fn remove_job_dir(jobs: &Dir, job: JobId, node: &str, keep: std::time::Duration) {
    let path = jobs.join(job.0.to_string());
    match std::fs::remove_dir_all(&path) {
        Ok(()) => tracing::info!(
            "nm {node}: removed the directory of job {job}, ended more than {keep:?} ago (--keep-jobs)"
        ),
        Err(err) => tracing::warn!("nm {node}: cannot remove {}: {err}", path.display()),
    }
}

/// Reads at most [`MAX_OUTPUT`] bytes of a rank's output files (their beginning, or their
/// end with `tail`) for `cosched output`; `job_dir` is the job's directory on the node.
pub fn read_output(r: &ReadOutput, job_dir: &Path, node: &str) -> FromNode {
    // The directory the rank started in (see super::launch).
    let cwd = Path::new(&r.cwd);
    let cwd = if cwd.is_dir() { cwd } else { job_dir };
    let f = cosched_proto::jobio::rank_files(&r.io, cwd, job_dir, r.job, r.rank, node);
    // At most MAX_OUTPUT bytes of a file, its beginning or its end, and its size.
    let read = |path: &Path| -> Option<(Vec<u8>, u64)> {
        use std::io::{Read, Seek};
        let mut f = match r.must_own {
            Some(u) => cosched_proto::dir::open_regular(path, Some(u), false),
            None => std::fs::File::open(path),
        }
        .ok()?;
        let size = f.metadata().ok()?.len();
        if r.tail && size > MAX_OUTPUT {
            f.seek(std::io::SeekFrom::Start(size - MAX_OUTPUT)).ok()?;
        }
        let mut buf = Vec::new();
        f.take(MAX_OUTPUT).read_to_end(&mut buf).ok()?;
        Some((buf, size))
    };
    // Merged streams are in one file: shown once, as standard output.
    let err = if f.merged {
        Some((Vec::new(), 0))
    } else {
        read(&f.err)
    };
    let (found, (stdout, out_size), (stderr, err_size)) = match (read(&f.out), err) {
        (Some(o), Some(e)) => (true, o, e),
        _ => (false, (Vec::new(), 0), (Vec::new(), 0)),
    };
    let mut files = Vec::new();
    if r.io.output.is_some() || r.io.error.is_some() {
        files.push(f.out.display().to_string());
        if !f.merged {
            files.push(f.err.display().to_string());
        }
    }
    FromNode::Output {
        req: r.req,
        found,
        stdout,
        stderr,
        files,
        sizes: (out_size, err_size),
    }
}

/// Writes file `name` of a rank that could not start (its error) in the job's directory
/// `dir`: a new private file in place of whatever the user left at the name (never written
/// through it), given to the job's user (uid, gid) through its descriptor.
pub fn write_rank_file(dir: &Dir, name: &str, content: &[u8], owner: Option<(u32, u32)>) {
    use std::io::Write;
    if let Ok(mut f) = dir.replace(name, 0o600) {
        if let Some((uid, gid)) = owner {
            let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
        }
        let _ = f.write_all(content);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn check(path: &Path, keep: u64, notice: bool) -> CapOutput {
        CapOutput {
            job: JobId(1),
            rank: 0,
            file: 0,
            path: path.to_path_buf(),
            keep,
            notice,
            must_own: None,
        }
    }

    fn append(path: &Path, byte: u8, n: usize) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(&vec![byte; n]).unwrap();
    }

    /// What a steady writer's file goes through: cut with the notice at the first check past
    /// the cap, then cut back after the notice at every later check, the notice kept once.
    #[test]
    fn an_output_file_is_cut_at_the_cap_with_one_notice_however_often_it_grows_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let cap = 1_000;
        let notice = super::super::cap_notice(cap);
        append(&out, b'a', 900);
        assert!(!cap_output(&check(&out, cap, true), cap), "under the cap");
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 900);
        append(&out, b'a', 500);
        assert!(cap_output(&check(&out, cap, true), cap));
        let after = cap + notice.len() as u64;
        for _ in 0..3 {
            append(&out, b'b', 700);
            assert!(!cap_output(&check(&out, after, false), cap));
            let text = std::fs::read(&out).unwrap();
            assert_eq!(text.len() as u64, after);
            assert!(text[..cap as usize].iter().all(|&b| b == b'a'));
            assert_eq!(&text[cap as usize..], notice.as_bytes());
        }
    }

    #[test]
    fn a_link_where_an_output_was_is_not_cut_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        append(&target, b'p', 5_000);
        let out = dir.path().join("out");
        std::os::unix::fs::symlink(&target, &out).unwrap();
        assert!(!cap_output(&check(&out, 1_000, true), 1_000));
        assert_eq!(std::fs::metadata(&target).unwrap().len(), 5_000);
    }
}
