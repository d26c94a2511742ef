//! The name service across jobs, nodes and users, end to end, for one MPI (the program
//! `tests/mpi/names.c` built with that MPI's compiler): a job on node n0 publishes a port name,
//! another user's job on n1 does not find it, a job of the same user on n1 finds the same port;
//! a name left published goes when its job ends.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::cluster::Cluster;
use super::user::{cosched_as, second_user};
use super::{job_id, notice};

/// Builds `names.c` with `compiler` (`mpicc.openmpi`, `mpicc.mpich`) into `dir`; `None`
/// (after a NOTICE) when the machine has no such compiler.
pub fn build(dir: &Path, compiler: &str) -> Option<PathBuf> {
    if Command::new(compiler).arg("-show").output().is_err() {
        notice(&format!(
            "skipping the name service test: `{compiler}` not found (.ci/run installs Debian's mpich, libmpich-dev, openmpi-bin and libopenmpi-dev)"
        ));
        return None;
    }
    let src = dir.join("names.c");
    std::fs::write(&src, include_str!("../mpi/names.c")).unwrap();
    let exe = dir.join("names");
    let out = Command::new(compiler)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} runs: {e}"));
    assert!(
        out.status.success(),
        "{compiler} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// What rank 0 of job `id` wrote.
fn rank0(c: &Cluster, id: u64) -> String {
    c.ok(&["output", &id.to_string(), "--rank", "0"])
}

/// Job `id` completed with exit code 0; what its rank 0 wrote.
fn completed(c: &Cluster, id: u64, what: &str) -> String {
    let j = c.ended(id, 120);
    let out = rank0(c, id);
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0)),
        "{what} (job {id}): {j}\nrank 0 wrote: {out}\n--- mm log ---\n{}",
        c.mm_log()
    );
    out
}

/// The scenario, on a cluster of two nodes of two PEs in `tmp` (a directory of the test's
/// own), with `prog` the program built by [`build`]. `test` names the test in a NOTICE when
/// no second user can be made (not root): that part is then left out.
pub fn across_jobs_nodes_and_users(test: &str, tmp: &Path, prog: &Path) {
    // The other user's job must reach the program and the cluster.
    std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    let c = Cluster::up_in(tmp.join("state"), &["--nodes", "2", "--pes", "2"]);
    std::fs::set_permissions(&c.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let name = format!("cosched-names-{}", std::process::id());
    let cue = tmp.join("found");
    let (p, cue) = (prog.to_str().unwrap(), cue.to_str().unwrap());
    let server = c.submit(&["-n", "2", "-w", "n0", p, "publish", &name, cue]);
    let port = c.until(120, "the publishing job's port", || {
        // Its output is not there until its rank 0 started.
        let out = c.run(&["output", &server.to_string(), "--rank", "0"]);
        let out = String::from_utf8_lossy(&out.stdout);
        let line = out.lines().find(|l| l.starts_with("published "))?;
        Some(line["published ".len()..].to_string())
    });

    // Another user's job, on the other node, while the name is published: not found, at once.
    match second_user(test) {
        Some(u) => {
            let d = tmp.to_str().unwrap();
            let args = [
                "submit", "-n", "2", "-w", "n1", "-D", d, p, "absent", &name, cue,
            ];
            let out = cosched_as(&u, &c.dir, &args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let theirs = job_id(&String::from_utf8_lossy(&out.stdout));
            let said = completed(&c, theirs, "another user's lookup");
            assert!(said.contains("not found in "), "{said}");
        }
        None => notice(&format!(
            "{test}: another user's lookup was not tried (needs root)"
        )),
    }

    // A job of the same user on the other node finds the port.
    let client = c.submit(&["-n", "2", "-w", "n1", p, "lookup", &name, cue]);
    let said = completed(&c, client, "the looking-up job");
    assert!(said.contains(&format!("looked up {port}\n")), "{said}");
    let said = completed(&c, server, "the publishing job");
    assert!(said.contains("unpublished"), "{said}");
    for (id, node) in [(server, "n0"), (client, "n1")] {
        let said = rank0(&c, id);
        assert!(
            said.starts_with(&format!("on node {node}\n")),
            "job {id}: {said}"
        );
    }

    // Left published when its job ends, the name goes with the job.
    let left = c.submit(&["-n", "2", "-w", "n0", p, "leave", &name, cue]);
    let said = completed(&c, left, "the job that leaves its name published");
    assert!(said.contains("published "), "{said}");
    let after = c.submit(&["-n", "2", "-w", "n1", p, "absent", &name, cue]);
    let said = completed(&c, after, "the lookup after the publishing job ended");
    assert!(said.contains("not found in "), "{said}");
}
