//! Length-delimited, authenticated frames: the unit every cosched peer sends over TCP.
//!
//! A frame is `u32 length (big-endian) | 32-byte tag | payload`, where the length counts tag
//! and payload and the tag is BLAKE3 in its keyed mode (a MAC), with the cluster key, over the
//! payload. Why BLAKE3 and not HMAC-SHA256: every node checks the tag of every chunk of a file
//! broadcast, so the MAC is the largest per-byte cost of a launch (SHA-256 was 31 %
//! of the cluster's CPU during a 12 MB broadcast to 64 node managers, even with the CPU's SHA
//! extensions); keyed BLAKE3 is a MAC of the same strength that runs several times faster on
//! the vector units. A
//! peer that sends a frame longer than the reader's maximum, a wrong tag or a payload that
//! does not decode gets an error here; callers drop the connection and log it, and keep
//! serving others.
//!
//! The tag can only be checked once the whole body is in, so what a peer that has not yet
//! proven the key can make a daemon hold is bounded by the maximum the reader passes:
//! [`MAX_HELLO`] for the first frame of a connection (a client's request, a registration, a
//! parent's topology), [`MAX_FRAME`] only on connections that have already authenticated.
//! The body grows as bytes arrive instead of being allocated at the announced length, so a
//! peer that announces a big frame and sends nothing costs nothing.
//!
//! A frame of length 0 is not a frame but a refusal notice ([`REFUSAL`]): a daemon that
//! could not authenticate a peer's first frame sends it before closing, so the peer can tell
//! "wrong key" ([`FrameError::Refused`]) from a connection that merely closed. It carries no
//! data and needs no key, so it tells an attacker nothing but that the key was wrong. A frame
//! of length 1 is the busy notice ([`BUSY`]): a daemon closing a connection before it read
//! any request from it (newer connections of the same peer displaced it: see
//! [`crate::accept`]) sends it, so the peer knows its request was not acted on and may send
//! it again ([`FrameError::Busy`]).
//!
//! Payloads are postcard-encoded serde values. Frames are not encrypted (the cluster network
//! is trusted for confidentiality) and carry no replay counter themselves: the daemons put a
//! stamp (clock and nonce) in the first frame of each connection to the machine manager, which
//! refuses one it has seen (docs/daemons.md, "Frames and authentication").

use std::io::{Read, Write};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest frame accepted (tag included) on an authenticated connection; bigger lengths are
/// garbage or abuse. Output fetches (two files of up to 4 MiB) and job lists need this much.
pub const MAX_FRAME: usize = 16 << 20;
/// Longest first frame of a connection, read before the peer has proven the key: a client's
/// request (a submit's command line: Linux caps `execve`'s arguments at about 2 MiB), a node's
/// registration, a parent's topology.
pub const MAX_HELLO: usize = 2 << 20;
/// Bytes reserved ahead of the data: the body grows from here as it arrives.
const INITIAL_BUFFER: usize = 64 << 10;
/// Bytes of the tag (keyed BLAKE3) that opens every frame body.
pub const TAG_LEN: usize = 32;
/// What a user credential is derived under (see [`Key::user_key`]): a new version changes it.
const USER_KEY_CONTEXT: &[u8] = b"cosched user credential v1";
/// The refusal notice: a zero length prefix (see the module documentation).
pub const REFUSAL: [u8; 4] = [0; 4];
/// The busy notice: a length prefix of 1, which no frame has (see the module documentation).
pub const BUSY: [u8; 4] = [0, 0, 0, 1];

/// The cluster key: 32 random bytes, stored as 64 hex digits in a file only its owner reads.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Why a frame could not be read or a key loaded.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {0} bytes is outside 32..={1} (garbage, abuse or a foreign protocol)")]
    BadLength(usize, usize),
    #[error("frame authentication failed (wrong cluster key or tampered data)")]
    BadTag,
    /// The peer could not authenticate what we sent: our key is not the cluster's.
    #[error("the peer refused our frame: authentication failed (the cluster key differs)")]
    Refused,
    /// The peer closed the connection without reading our request: it was not acted on.
    #[error(
        "the daemon closed the connection before reading the request (too many connections of this peer were waiting); it was not acted on"
    )]
    Busy,
    #[error("frame payload does not decode: {0}")]
    Decode(postcard::Error),
    #[error("key file {path}: {why}")]
    KeyFile { path: String, why: String },
}

impl Key {
    pub fn from_bytes(bytes: [u8; 32]) -> Key {
        Key(bytes)
    }

    /// A fresh random key from the operating system.
    pub fn generate() -> Result<Key, FrameError> {
        let mut b = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(Key(b))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(text: &str) -> Option<Key> {
        let t = text.trim();
        if t.len() != 64 {
            return None;
        }
        let mut b = [0u8; 32];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Key(b))
    }

    pub fn load(path: &Path) -> Result<Key, FrameError> {
        let err = |why: String| FrameError::KeyFile {
            path: path.display().to_string(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        Key::from_hex(&text).ok_or_else(|| err("expected 64 hex digits".into()))
    }

    /// Writes the key readable by its owner only, as a new file: see [`write_private`].
    pub fn save(&self, path: &Path) -> Result<(), FrameError> {
        write_private(path, format!("{}\n", self.to_hex()).as_bytes())?;
        Ok(())
    }

    /// The credential of Unix user `uid`: keyed `BLAKE3(cluster key, "cosched user credential
    /// v1" || uid as 4 big-endian bytes)`. The administrator gives it to that user (like a
    /// per-user munge key); a frame sealed with it proves "I am `uid`" to the machine manager,
    /// which derives the same key from the cluster key. It cannot be turned into another
    /// user's credential or the cluster key, and rotating the cluster key revokes every one.
    pub fn user_key(&self, uid: u32) -> Key {
        let mut mac = self.mac();
        mac.update(USER_KEY_CONTEXT);
        mac.update(&uid.to_be_bytes());
        Key(*mac.finalize().as_bytes())
    }

    /// The `serial`-th credential of `uid`: serial 0 is [`Key::user_key`]; each later one
    /// also hashes the serial, so that issuing serial n+1 (the machine manager then accepts
    /// only it) revokes every earlier credential of that user and no one else's.
    pub fn user_key_serial(&self, uid: u32, serial: u32) -> Key {
        if serial == 0 {
            return self.user_key(uid);
        }
        let mut mac = self.mac();
        mac.update(USER_KEY_CONTEXT);
        mac.update(&uid.to_be_bytes());
        mac.update(b"serial");
        mac.update(&serial.to_be_bytes());
        Key(*mac.finalize().as_bytes())
    }

    /// The keyed hash every tag and credential is computed with.
    fn mac(&self) -> blake3::Hasher {
        blake3::Hasher::new_keyed(&self.0)
    }

    /// Encodes `msg` into a whole frame, length prefix included. The payload is measured,
    /// then encoded in place behind room left for the length and tag, which are filled in
    /// after: a payload of megabytes (a broadcast's chunk) is copied once, into a buffer of
    /// the right size, not grown in steps and copied again.
    pub fn seal<T: Serialize>(&self, msg: &T) -> Vec<u8> {
        let size = postcard::serialize_with_flavor(msg, postcard::ser_flavors::Size::default())
            .expect("in-memory serialisation cannot fail");
        let mut head = Vec::with_capacity(4 + TAG_LEN + size);
        head.resize(4 + TAG_LEN, 0);
        let mut out = postcard::serialize_with_flavor(msg, Behind(head))
            .expect("in-memory serialisation cannot fail");
        let tag = *self.mac().update(&out[4 + TAG_LEN..]).finalize().as_bytes();
        let len = (out.len() - 4) as u32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        out[4..4 + TAG_LEN].copy_from_slice(&tag);
        out
    }

    /// Checks the tag of a frame body (what follows the length) and decodes its payload
    /// (which may borrow from `body`).
    pub fn open<'a, T: Deserialize<'a>>(&self, body: &'a [u8]) -> Result<T, FrameError> {
        if body.len() < TAG_LEN {
            return Err(FrameError::BadLength(body.len(), TAG_LEN));
        }
        let (tag, payload) = body.split_at(TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().expect("split at TAG_LEN");
        // `blake3::Hash`'s equality is constant-time: the comparison leaks nothing of the tag.
        if self.mac().update(payload).finalize() != tag {
            return Err(FrameError::BadTag);
        }
        postcard::from_bytes(payload).map_err(FrameError::Decode)
    }
}

/// A postcard output that appends to a buffer already holding a frame's head.
struct Behind(Vec<u8>);

impl postcard::ser_flavors::Flavor for Behind {
    type Output = Vec<u8>;
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }
    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

/// Writes `content` to `path` as a new file of mode 0600 owned by this process's user, never
/// through whatever stood at `path` (a file planted there by another user
/// kept its owner and mode 0666, and a symbolic link was followed to overwrite its target).
/// The content goes to a fresh temporary name in the same directory, created with `O_EXCL`
/// (which also refuses to follow a link), and is renamed over `path`: `rename` replaces a
/// link or file at `path` itself, and a reader sees the old content or the whole new one.
pub fn write_private(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let tmp = path.with_file_name(format!(
        ".{}.{}.{nanos}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
    })
}

/// The wall clock in µs since the epoch: grace deadlines of keys are shared between hosts.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn check_len(len: usize, max: usize) -> Result<usize, FrameError> {
    if len == 0 {
        return Err(FrameError::Refused);
    }
    if len == 1 {
        return Err(FrameError::Busy);
    }
    if (TAG_LEN..=max).contains(&len) {
        Ok(len)
    } else {
        Err(FrameError::BadLength(len, max))
    }
}

/// Reads one frame of at most [`MAX_FRAME`] bytes from a blocking stream (a client reading
/// the machine manager's answer).
pub fn read_blocking<R: Read, T: DeserializeOwned>(r: &mut R, key: &Key) -> Result<T, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = check_len(u32::from_be_bytes(len) as usize, MAX_FRAME)?;
    let mut body = Vec::with_capacity(len.min(INITIAL_BUFFER));
    if r.take(len as u64).read_to_end(&mut body)? < len {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
    }
    key.open(&body)
}

/// Writes one frame to a blocking stream.
pub fn write_blocking<W: Write, T: Serialize>(
    w: &mut W,
    key: &Key,
    msg: &T,
) -> Result<(), FrameError> {
    w.write_all(&key.seal(msg))?;
    w.flush()?;
    Ok(())
}

/// Reads one frame of at most `max` bytes ([`MAX_HELLO`] before the peer is authenticated,
/// [`MAX_FRAME`] after) from an async stream.
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    r: &mut R,
    key: &Key,
    max: usize,
) -> Result<T, FrameError> {
    key.open(&read_body(r, max).await?)
}

/// Reads one frame body (tag and payload, length removed) of at most `max` bytes without
/// decoding it, so a caller can authenticate and inspect it with [`Key::open`]. The length is
/// checked before any of the body is read, and the body is held only as far as it has arrived.
pub async fn read_body<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Vec<u8>, FrameError> {
    read_body_admitted(r, max, |_| async {}).await
}

/// [`read_body`] with `admit` called once the length is known and before any of the body is
/// read: what it returns (a permit for a large body, say) is held while the body is read.
pub async fn read_body_admitted<R, F, Fut, P>(
    r: &mut R,
    max: usize,
    admit: F,
) -> Result<Vec<u8>, FrameError>
where
    R: AsyncRead + Unpin,
    F: FnOnce(usize) -> Fut,
    Fut: std::future::Future<Output = P>,
{
    let len = read_len(r, max).await?;
    let _held = admit(len).await;
    let mut body = Vec::with_capacity(len.min(INITIAL_BUFFER));
    read_rest(r, len, &mut body).await?;
    Ok(body)
}

/// Reads one whole frame (length prefix included) of at most `max` bytes from a peer that has
/// already proven the key (a parent after its topology, a child dialled at an authenticated
/// address), so a router can authenticate it with [`Key::open`] on `&frame[4..]` and forward
/// the very same buffer: no copy per hop. The buffer is allocated at the announced length at
/// once (an authenticated peer has no reason to lie about it, and `max` still bounds it);
/// the bytes are read into it without zeroing it first.
pub async fn read_whole<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Vec<u8>, FrameError> {
    let len = read_len(r, max).await?;
    let mut frame = Vec::with_capacity(4 + len);
    frame.extend_from_slice(&(len as u32).to_be_bytes());
    read_rest(r, len, &mut frame).await?;
    Ok(frame)
}

/// A tree link's read half behind a 64 KiB buffer: a small frame (a query, an answer, a
/// heartbeat: most frames) then costs one `recv` with its length, not one for the length and
/// one for the rest; a chunk frame's bytes beyond what the buffer holds are still read
/// straight into the frame (the buffer steps aside for reads larger than itself). On the
/// interior node managers of a broadcast, small frames were most of a thousand `recv` calls
/// per transfer.
pub fn buffered<R: AsyncRead>(r: R) -> tokio::io::BufReader<R> {
    tokio::io::BufReader::with_capacity(64 << 10, r)
}

async fn read_len<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<usize, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    check_len(u32::from_be_bytes(len) as usize, max)
}

/// Appends exactly `len` bytes to `buf`. `read_to_end` grows the buffer only when it is full
/// (so it holds at most about twice what the peer really sent) and fills the spare capacity
/// without zeroing it.
async fn read_rest<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
    buf: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let start = buf.len();
    (&mut *r).take(len as u64).read_to_end(buf).await?;
    if buf.len() - start < len {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
    }
    Ok(())
}

/// Tells a peer whose request is closed unread so ([`BUSY`]), before closing.
pub async fn write_busy<W: AsyncWrite + Unpin>(w: &mut W) {
    let _ = w.write_all(&BUSY).await;
    let _ = w.flush().await;
}

/// Tells a peer whose frame failed authentication so ([`REFUSAL`]), before closing.
pub async fn write_refusal<W: AsyncWrite + Unpin>(w: &mut W) {
    let _ = w.write_all(&REFUSAL).await;
    let _ = w.flush().await;
}

/// Writes one frame to an async stream.
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    key: &Key,
    msg: &T,
) -> Result<(), FrameError> {
    w.write_all(&key.seal(msg)).await?;
    w.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user credential is fixed by the cluster key and the uid, differs for every uid and
    /// key, and is neither the cluster key nor open-able with it.
    #[test]
    fn user_keys_are_derived_per_uid() {
        let k = Key::from_bytes([7; 32]);
        assert_eq!(k.user_key(1000), k.user_key(1000));
        assert_ne!(k.user_key(1000), k.user_key(1001));
        assert_ne!(k.user_key(1000), k);
        assert_ne!(Key::from_bytes([8; 32]).user_key(1000), k.user_key(1000));
        assert_eq!(k.user_key_serial(1000, 0), k.user_key(1000));
        assert_ne!(k.user_key_serial(1000, 1), k.user_key(1000));
        assert_ne!(k.user_key_serial(1000, 1), k.user_key_serial(1000, 2));
        assert_ne!(k.user_key_serial(1000, 1), k.user_key_serial(1001, 1));
        let frame = k.user_key(1000).seal(&1u32);
        assert!(matches!(
            read_blocking::<_, u32>(&mut &frame[..], &k),
            Err(FrameError::BadTag)
        ));
        assert_eq!(
            read_blocking::<_, u32>(&mut &frame[..], &k.user_key(1000)).unwrap(),
            1
        );
    }

    #[test]
    fn round_trip_and_rejections() {
        let k = Key::from_bytes([7; 32]);
        let frame = k.seal(&("hello", 42u32));
        let mut r = &frame[..];
        let v: (String, u32) = read_blocking(&mut r, &k).unwrap();
        assert_eq!(v, ("hello".to_string(), 42));

        let other = Key::from_bytes([8; 32]);
        let mut r = &frame[..];
        assert!(matches!(
            read_blocking::<_, (String, u32)>(&mut r, &other),
            Err(FrameError::BadTag)
        ));

        let mut tampered = frame.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(matches!(
            read_blocking::<_, (String, u32)>(&mut &tampered[..], &k),
            Err(FrameError::BadTag)
        ));

        let garbage = b"GET / HTTP/1.1\r\n\r\n";
        assert!(matches!(
            read_blocking::<_, u32>(&mut &garbage[..], &k),
            Err(FrameError::BadLength(..))
        ));
        assert!(matches!(
            read_blocking::<_, u32>(&mut &[][..], &k),
            Err(FrameError::Closed)
        ));
        assert!(matches!(
            read_blocking::<_, u32>(&mut &REFUSAL[..], &k),
            Err(FrameError::Refused)
        ));
    }

    /// a first frame longer than the reader's maximum is refused from
    /// its length alone, before any of its body is read; a body that stops short is an error,
    /// not a frame.
    #[tokio::test]
    async fn lengths_are_checked_against_the_readers_maximum_before_the_body() {
        let k = Key::from_bytes([7; 32]);
        let big = k.seal(&vec![1u8; MAX_HELLO]);
        // Only the length prefix: were the body awaited, this would fail with an i/o error.
        let r = read_frame::<_, Vec<u8>>(&mut &big[..4], &k, MAX_HELLO).await;
        assert!(
            matches!(r, Err(FrameError::BadLength(n, MAX_HELLO)) if n > MAX_HELLO),
            "{r:?}"
        );
        let v: Vec<u8> = read_frame(&mut &big[..], &k, MAX_FRAME).await.unwrap();
        assert_eq!(v.len(), MAX_HELLO);
        let short = &big[..big.len() - 1];
        assert!(matches!(
            read_frame::<_, Vec<u8>>(&mut &short[..], &k, MAX_FRAME).await,
            Err(FrameError::Io(_))
        ));
    }

    /// the key never goes through a file or link planted at its path.
    #[test]
    fn a_saved_key_replaces_a_planted_file_or_link_and_is_private() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("cosched-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let key_path = dir.join("key");
        std::os::unix::fs::symlink(&victim, &key_path).unwrap();
        let k = Key::generate().unwrap();
        k.save(&key_path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let m = std::fs::symlink_metadata(&key_path).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(m.mode() & 0o777, 0o600);
        // A world-writable file in its place is replaced, not reused.
        std::fs::remove_file(&key_path).unwrap();
        std::fs::write(&key_path, "x").unwrap();
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o666)).unwrap();
        k.save(&key_path).unwrap();
        assert_eq!(std::fs::metadata(&key_path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(Key::load(&key_path).unwrap(), k);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn key_hex_round_trip() {
        let k = Key::generate().unwrap();
        assert_eq!(Key::from_hex(&k.to_hex()), Some(k.clone()));
        assert_eq!(Key::from_hex("zz"), None);
        assert_ne!(k, Key::generate().unwrap());
    }
}
