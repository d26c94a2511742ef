//! `cosched pmix-helper`: a job's PMIx server on one node, started by the node manager as
//! the job's user before the job's ranks (`cosched_pmix::helper`); not for users to run.

use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

/// Serves the job on the socket the node manager left in `PMI_FD`.
pub fn run() -> anyhow::Result<i32> {
    let fd: i32 = std::env::var("PMI_FD")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&fd| fd > 2)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cosched pmix-helper is started by the node manager, with its socket in PMI_FD"
            )
        })?;
    // SAFETY: the descriptor the node manager left open for this process (checked above to
    // be none of the standard streams), owned from here on by this stream alone.
    let link = unsafe { UnixStream::from_raw_fd(fd) };
    Ok(cosched_pmix::helper::run(link))
}
