//! The client's end of a file broadcast: a file streamed to the machine manager in chunks
//! (the scheme: `cosched_proto::bcast`).

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use cosched_proto::DaemonError;
use cosched_proto::bcast::*;
use cosched_proto::proto::*;

use crate::client::Client;

/// What a finished broadcast reports.
#[derive(Clone, Debug)]
pub struct Sent {
    pub nodes: Vec<String>,
    pub bytes: u64,
    /// From the start to the last chunk accepted by the machine manager (which accepts a
    /// chunk only once a slot is free: a slow node stretches this).
    pub streamed: Duration,
    pub took: Duration,
    /// The name the copies were staged under (argv\[0\] for `submit --bcast`:
    /// [`STAGED_PREFIX`] + this).
    pub dest: String,
}

/// The BLAKE3 hash and size of a file (what a broadcast checks: `b3sum` prints the same hash).
pub fn digest_file(path: &Path) -> std::io::Result<([u8; 32], u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut hash = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hash.finalize().into(), size))
}

/// The default staged name of `path`: its file name and 8 bytes of a hash of what identifies
/// this version of the file (device, inode, size, modification time), so two different files
/// of one name, or two versions of one file, never share a copy. Not of its contents: that
/// would read and hash the whole file before the first chunk could leave (about 7 ms for
/// 12 MB, on the launch's critical path); the contents' hash is computed as the chunks go
/// and checked by the machine manager at the end.
pub fn default_dest(path: &Path, meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let base = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let mut h = blake3::Hasher::new();
    for v in [
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
    ] {
        h.update(&v.to_le_bytes());
    }
    let tag: String = h.finalize().as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{base}.{tag}")
}

/// How the file moved between two looks (`None`: it did not, as far as its size and
/// modification time say).
pub(super) fn changed(
    before: &std::fs::Metadata,
    after: &std::fs::Metadata,
) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    if before.size() != after.size() {
        Some("changed size")
    } else if (before.mtime(), before.mtime_nsec()) != (after.mtime(), after.mtime_nsec()) {
        Some("was modified")
    } else {
        None
    }
}

pub(super) fn ask(client: &Client, op: BcastOp) -> Result<BcastReply, DaemonError> {
    match client.request(Request::Bcast(op))? {
        Response::Bcast(r) => Ok(r),
        Response::Error(e) => Err(DaemonError::Refused(e)),
        other => Err(DaemonError::Refused(format!("unexpected answer {other:?}"))),
    }
}

/// How a broadcast is staged: under which name, in which name space, and whose copy it is.
#[derive(Clone, Debug, Default)]
pub struct Staging {
    /// The name (default: [`default_dest`] of the file).
    pub dest: Option<String>,
    pub scope: Scope,
    /// Whose copy it is, for a client holding the cluster key (an administrator, which the
    /// machine manager knows as its own user) that stages for the user it runs as; `None`:
    /// the caller's.
    pub user: Option<u32>,
}

impl Staging {
    /// The caller's own copy under `dest`.
    pub fn named(dest: &str) -> Staging {
        Staging {
            dest: Some(dest.to_string()),
            ..Staging::default()
        }
    }
}

/// Broadcasts `path` to `nodes` (every node in the tree when empty), staged as `staging`
/// says, in chunks of `chunk` bytes with `slots` in flight. Returns once every node holds a
/// verified copy; fails, naming the nodes, when one does not.
pub fn send_file(
    client: &Client,
    path: &Path,
    staging: &Staging,
    chunk: u32,
    slots: u32,
    nodes: &[String],
) -> Result<Sent, DaemonError> {
    if !(1..=MAX_CHUNK).contains(&chunk) || slots == 0 {
        return Err(DaemonError::Config(format!(
            "chunk size must be 1..={MAX_CHUNK} bytes and slots at least 1"
        )));
    }
    let t0 = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    let size = meta.len();
    let dest = staging
        .dest
        .clone()
        .unwrap_or_else(|| default_dest(path, &meta));
    let BcastReply::Started { id, .. } = ask(
        client,
        BcastOp::Begin {
            dest: dest.clone(),
            size,
            chunk,
            slots,
            nodes: nodes.to_vec(),
            scope: staging.scope,
            user: staging.user,
        },
    )?
    else {
        return Err(DaemonError::Refused("unexpected answer to a bcast".into()));
    };
    // Hashed as it is read: the machine manager compares at the end, so a file that changed
    // while it was sent fails the transfer.
    let mut hash = blake3::Hasher::new();
    let mut k = 0u32;
    loop {
        let mut data = Vec::with_capacity(chunk as usize);
        (&mut f).take(chunk as u64).read_to_end(&mut data)?;
        if data.is_empty() {
            break;
        }
        hash.update(&data);
        ask(client, BcastOp::Chunk { id, k, data })?;
        k += 1;
    }
    if let Some(why) = changed(&meta, &f.metadata()?) {
        let why = format!("{} {why} while it was sent", path.display());
        let _ = ask(client, BcastOp::Abort { id, why });
        return Err(DaemonError::Refused(format!(
            "{} changed while it was sent; nothing was launched",
            path.display()
        )));
    }
    let streamed = t0.elapsed();
    let blake3 = hash.finalize().into();
    // A job's copy is named by its transfer, which the job's argv[0] then names.
    let dest = match staging.scope {
        Scope::Job => format!("@{id}/{dest}"),
        _ => dest,
    };
    match ask(client, BcastOp::Finish { id, blake3 })? {
        BcastReply::Done { nodes } => Ok(Sent {
            nodes,
            bytes: size,
            streamed,
            took: t0.elapsed(),
            dest,
        }),
        other => Err(DaemonError::Refused(format!("unexpected answer {other:?}"))),
    }
}
