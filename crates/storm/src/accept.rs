//! Accepting connections on a daemon's listener without letting unauthenticated peers, or a
//! shortage of file descriptors, cost more than a bounded amount or starve the peers that
//! hold the key.
//!
//! - [`accept`] backs off when `accept(2)` fails (EMFILE, ENFILE, ENOMEM…) instead of calling
//!   it again at once: the daemons run at real-time priority, where a busy loop would starve
//!   the node.
//! - [`Admission`] decides which connections may wait for their first frame, the one that
//!   proves the key. A listener accepts every connection at once — it never stops accepting
//!   because unauthenticated peers hold places: a shared set of places, taken before
//!   `accept`, is one that idle connections can fill, and the kernel's backlog behind it, so
//!   that no client and no node manager gets in — and admits it under its peer's name (an
//!   address for TCP, a uid the kernel gives for a Unix socket). A peer may have
//!   [`Limits::per_peer`] connections waiting; its next one makes room by closing its own
//!   oldest that has sent nothing (else its oldest). Beyond [`Limits::total`] in all, the
//!   peer with the most waiting loses one the same way. So a flood of idle connections only
//!   ever displaces the flooder's own, a legitimate client's connection is admitted the
//!   moment it arrives, and one that sends its frame at once is read before it could be
//!   displaced. A connection has [`Limits::first_frame`] to deliver its whole first frame.
//! - Memory: a waiting connection holds what it sent of its first frame, at most
//!   [`crate::frame::MAX_HELLO`]. Bodies up to [`SMALL_HELLO`] (requests, registrations,
//!   topologies) are read at once; larger ones (a broadcast's chunk, a submission with a
//!   large environment) wait for one of [`LARGE_HELLOS`] places first. Unauthenticated peers
//!   can thus make a listener hold at most about `total` × 2 × 64 KiB + 16 × 2 MiB (64 MiB
//!   with the defaults).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncRead;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::FrameError;

/// First frames up to this size are read without waiting for a place among the large ones.
pub const SMALL_HELLO: usize = 64 << 10;
/// First frames larger than [`SMALL_HELLO`] read at once, per listener.
pub const LARGE_HELLOS: usize = 16;

/// First pause after a failed `accept`; it doubles up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A listening socket [`accept`] serves: TCP, or a Unix socket.
pub trait Listener {
    type Conn;
    type Addr;
    fn accept_one(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(Self::Conn, Self::Addr)>>;
}

impl Listener for TcpListener {
    type Conn = TcpStream;
    type Addr = SocketAddr;
    fn accept_one(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(TcpStream, SocketAddr)>> {
        self.accept()
    }
}

impl Listener for UnixListener {
    type Conn = UnixStream;
    type Addr = tokio::net::unix::SocketAddr;
    fn accept_one(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(UnixStream, Self::Addr)>> {
        self.accept()
    }
}

/// Accepts the next connection, pausing (and logging once per streak, as `who`) while
/// `accept` fails.
pub async fn accept<L: Listener>(listener: &L, who: &str) -> (L::Conn, L::Addr) {
    let mut pause = ACCEPT_BACKOFF_MIN;
    let mut failing = false;
    loop {
        match listener.accept_one().await {
            Ok(c) => {
                if failing {
                    tracing::info!("{who}: accepting connections again");
                }
                return c;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!("{who}: cannot accept a connection ({e}); backing off");
                    failing = true;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

/// Lines a [`DropLog`] writes per second at most.
const DROP_LINES_PER_SEC: u32 = 10;

/// The log of connections a daemon drops (displaced, silent, garbage, a wrong key), at most
/// [`DROP_LINES_PER_SEC`] lines a second and then one line saying how many more there were:
/// a flood of connections must not become a flood of the log, whose disk is the state
/// directory's.
#[derive(Clone, Default)]
pub struct DropLog(Arc<Mutex<DropWindow>>);

#[derive(Default)]
struct DropWindow {
    start: Option<std::time::Instant>,
    logged: u32,
    unlogged: u64,
}

impl DropLog {
    /// Logs `what` (a warning) unless this second's lines are used up.
    pub fn dropped(&self, what: std::fmt::Arguments<'_>) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if w.start
            .is_none_or(|s| now.duration_since(s) >= Duration::from_secs(1))
        {
            if w.unlogged > 0 {
                tracing::warn!(
                    "{} more connections were dropped in that second (not logged one by one)",
                    w.unlogged
                );
            }
            *w = DropWindow {
                start: Some(now),
                logged: 0,
                unlogged: 0,
            };
        }
        if w.logged < DROP_LINES_PER_SEC {
            w.logged += 1;
            tracing::warn!("{what}");
        } else {
            w.unlogged += 1;
        }
    }
}

/// What a listener allows connections that have not yet presented their first frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Time a connection has to deliver its whole first frame.
    pub first_frame: Duration,
    /// Connections one peer (an address, a local uid) may have waiting.
    pub per_peer: usize,
    /// Connections waiting, in all.
    pub total: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            first_frame: Duration::from_secs(2),
            per_peer: 16,
            total: 256,
        }
    }
}

/// The connections of one listener waiting for their first frame, by peer; see the module
/// documentation.
pub struct Admission<P> {
    limits: Limits,
    waiting: Arc<Mutex<Waiting<P>>>,
    large: Arc<Semaphore>,
}

impl<P> Clone for Admission<P> {
    fn clone(&self) -> Self {
        Admission {
            limits: self.limits,
            waiting: self.waiting.clone(),
            large: self.large.clone(),
        }
    }
}

struct Waiting<P> {
    by_peer: HashMap<P, VecDeque<Place>>,
    count: usize,
    next: u64,
}

/// One waiting connection: its admission order, whether it has sent anything, and the way
/// to close it.
struct Place {
    seq: u64,
    spoke: Arc<AtomicBool>,
    close: oneshot::Sender<()>,
}

/// Why a first frame was not read.
#[derive(Debug, thiserror::Error)]
pub enum FirstFrameError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("no whole first frame within {0:?}")]
    TimedOut(Duration),
    #[error("closed to make room for newer connections of the same peer ({0} may wait at once)")]
    Displaced(usize),
}

impl<P: Hash + Eq + Clone> Admission<P> {
    pub fn new(limits: Limits) -> Admission<P> {
        let limits = Limits {
            per_peer: limits.per_peer.max(1),
            total: limits.total.max(1),
            ..limits
        };
        Admission {
            limits,
            waiting: Arc::new(Mutex::new(Waiting {
                by_peer: HashMap::new(),
                count: 0,
                next: 0,
            })),
            large: Arc::new(Semaphore::new(LARGE_HELLOS)),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Admits a connection from `peer`, closing another waiting one first if the limits
    /// say so. The ticket keeps its place until it is dropped (once the first frame is read,
    /// or the connection is closed).
    pub fn admit(&self, peer: P) -> Ticket<P> {
        let (close, closed) = oneshot::channel();
        let spoke = Arc::new(AtomicBool::new(false));
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let mine = w.by_peer.get(&peer).map_or(0, VecDeque::len);
        if mine >= self.limits.per_peer {
            w.displace(&peer);
        } else if w.count >= self.limits.total
            && let Some(busiest) = w
                .by_peer
                .iter()
                .max_by_key(|(_, q)| q.len())
                .map(|(p, _)| p.clone())
        {
            w.displace(&busiest);
        }
        let seq = w.next;
        w.next += 1;
        w.count += 1;
        w.by_peer.entry(peer.clone()).or_default().push_back(Place {
            seq,
            spoke: spoke.clone(),
            close,
        });
        Ticket {
            waiting: self.waiting.clone(),
            peer,
            seq,
            spoke,
            closed,
        }
    }

    /// Reads the first frame body of the connection `ticket` admitted (at most `max`
    /// bytes): within [`Limits::first_frame`], unless the connection is displaced first.
    /// The ticket's place is given up when this returns.
    pub async fn first_frame<R: AsyncRead + Unpin>(
        &self,
        r: &mut R,
        mut ticket: Ticket<P>,
        max: usize,
    ) -> Result<Vec<u8>, FirstFrameError> {
        let spoke = ticket.spoke.clone();
        let large = self.large.clone();
        let read = crate::frame::read_body_admitted(r, max, |len| async move {
            spoke.store(true, Ordering::Relaxed);
            large_place(large, len).await
        });
        tokio::select! {
            // A frame that has arrived is read even if its time ran out or it was displaced
            // meanwhile (the daemon was busy): the peer did its part.
            biased;
            body = tokio::time::timeout(self.limits.first_frame, read) => match body {
                Ok(b) => Ok(b?),
                Err(_) => Err(FirstFrameError::TimedOut(self.limits.first_frame)),
            },
            _ = &mut ticket.closed => Err(FirstFrameError::Displaced(self.limits.per_peer)),
        }
    }
}

/// A place among the large first frames, for a body of `len` bytes that needs one.
async fn large_place(large: Arc<Semaphore>, len: usize) -> Option<OwnedSemaphorePermit> {
    if len <= SMALL_HELLO {
        return None;
    }
    large.acquire_owned().await.ok()
}

impl<P: Hash + Eq + Clone> Waiting<P> {
    /// Closes `peer`'s oldest waiting connection that has sent nothing, else its oldest.
    fn displace(&mut self, peer: &P) {
        let Some(q) = self.by_peer.get_mut(peer) else {
            return;
        };
        let k = q
            .iter()
            .position(|p| !p.spoke.load(Ordering::Relaxed))
            .unwrap_or(0);
        if let Some(place) = q.remove(k) {
            let _ = place.close.send(());
            self.count -= 1;
        }
        if q.is_empty() {
            self.by_peer.remove(peer);
        }
    }
}

/// A waiting connection's place (see [`Admission::admit`]).
pub struct Ticket<P: Hash + Eq + Clone> {
    waiting: Arc<Mutex<Waiting<P>>>,
    peer: P,
    seq: u64,
    spoke: Arc<AtomicBool>,
    closed: oneshot::Receiver<()>,
}

impl<P: Hash + Eq + Clone> Drop for Ticket<P> {
    fn drop(&mut self) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let Some(q) = w.by_peer.get_mut(&self.peer) else {
            return;
        };
        if let Some(k) = q.iter().position(|p| p.seq == self.seq) {
            q.remove(k);
            let empty = q.is_empty();
            w.count -= 1;
            if empty {
                w.by_peer.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_peer: usize, total: usize) -> Limits {
        Limits {
            first_frame: Duration::from_secs(2),
            per_peer,
            total,
        }
    }

    fn displaced<P: Hash + Eq + Clone>(t: &mut Ticket<P>) -> bool {
        t.closed.try_recv().is_ok()
    }

    /// A peer's connections beyond its limit displace its own oldest idle one, never another
    /// peer's; one that has sent something goes last.
    #[test]
    fn a_peer_over_its_limit_displaces_only_its_own_idle_connections() {
        let a = Admission::new(limits(2, 100));
        let mut other = a.admit("nm");
        let mut first = a.admit("flood");
        let mut second = a.admit("flood");
        first.spoke.store(true, Ordering::Relaxed);
        let mut third = a.admit("flood");
        assert!(displaced(&mut second), "the oldest idle one makes room");
        assert!(!displaced(&mut first), "one that is sending stays");
        assert!(!displaced(&mut third));
        assert!(
            !displaced(&mut other),
            "another peer is never displaced by it"
        );
        let mut fourth = a.admit("flood");
        assert!(displaced(&mut third), "the idle one again");
        fourth.spoke.store(true, Ordering::Relaxed);
        let _fifth = a.admit("flood");
        assert!(displaced(&mut first), "all sending: the oldest");
        assert!(!displaced(&mut fourth) && !displaced(&mut other));
    }

    /// Beyond the total, the peer holding the most places loses one; a dropped ticket gives
    /// its place back.
    #[test]
    fn beyond_the_total_the_busiest_peer_makes_room() {
        let a = Admission::new(limits(10, 3));
        let mut x1 = a.admit("x");
        let mut x2 = a.admit("x");
        let mut y = a.admit("y");
        let mut z = a.admit("z");
        assert!(displaced(&mut x1), "x held the most");
        assert!(!displaced(&mut x2) && !displaced(&mut y) && !displaced(&mut z));
        drop(z);
        let mut w = a.admit("w");
        assert!(!displaced(&mut x2) && !displaced(&mut y) && !displaced(&mut w));
        let count = a.waiting.lock().unwrap().count;
        assert_eq!(count, 3);
    }

    /// A first frame must arrive whole within the limit; one that arrived is read.
    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_times_out_and_a_frame_is_read() {
        let a = Admission::new(Limits {
            first_frame: Duration::from_secs(2),
            ..limits(4, 8)
        });
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        let t = a.admit(1u32);
        let r = a.first_frame(&mut server, t, 1 << 20).await;
        assert!(matches!(r, Err(FirstFrameError::TimedOut(_))), "{r:?}");
        let key = crate::Key::from_bytes([3; 32]);
        tokio::io::AsyncWriteExt::write_all(&mut client, &key.seal(&7u32))
            .await
            .unwrap();
        let t = a.admit(1u32);
        let body = a.first_frame(&mut server, t, 1 << 20).await.unwrap();
        assert_eq!(key.open::<u32>(&body).unwrap(), 7);
        assert_eq!(a.waiting.lock().unwrap().count, 0, "places given back");
    }
}
