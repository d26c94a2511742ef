//! Accepting connections on a daemon's listener without letting unauthenticated peers, or a
//! shortage of file descriptors, cost more than a bounded amount (issue 10, finding 5).
//!
//! - [`accept`] backs off when `accept(2)` fails (EMFILE, ENFILE, ENOMEM…) instead of calling
//!   it again at once: the daemons run at real-time priority, where a busy loop would starve
//!   the node.
//! - [`Gate`] caps the connections that have not yet presented an authenticated first frame.
//!   Each holds at most [`crate::frame::MAX_HELLO`] bytes and at most
//!   [`crate::node::HANDSHAKE_TIMEOUT`], so the memory held for unauthenticated peers is at most
//!   [`MAX_UNAUTHENTICATED`] × `MAX_HELLO` (32 MiB). Beyond the cap the listener stops
//!   accepting until a slot frees: further connections wait in the kernel's backlog, which
//!   costs the daemon nothing, and a burst of legitimate clients is delayed, not refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections per listener allowed to be between accept and their first authenticated frame.
pub const MAX_UNAUTHENTICATED: usize = 16;

/// First pause after a failed `accept`; it doubles up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Accepts the next connection, pausing (and logging once per streak, as `who`) while
/// `accept` fails.
pub async fn accept(listener: &TcpListener, who: &str) -> (TcpStream, SocketAddr) {
    let mut pause = ACCEPT_BACKOFF_MIN;
    let mut failing = false;
    loop {
        match listener.accept().await {
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

/// The cap on unauthenticated connections of one listener.
#[derive(Clone)]
pub struct Gate(Arc<Semaphore>);

impl Default for Gate {
    fn default() -> Gate {
        Gate::new(MAX_UNAUTHENTICATED)
    }
}

impl Gate {
    pub fn new(cap: usize) -> Gate {
        Gate(Arc::new(Semaphore::new(cap)))
    }

    /// A slot for one connection until it has authenticated (drop the permit then); waits
    /// while all are taken. Take it before `accept`, so waiting leaves peers in the backlog.
    pub async fn enter(&self) -> OwnedSemaphorePermit {
        self.0
            .clone()
            .acquire_owned()
            .await
            .expect("the gate's semaphore is never closed")
    }

    /// A slot if one is free now.
    pub fn try_enter(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_admits_at_most_its_cap_and_frees_slots_on_drop() {
        let g = Gate::new(2);
        let a = g.try_enter().expect("first");
        let _b = g.try_enter().expect("second");
        assert!(g.try_enter().is_none(), "a third must wait");
        drop(a);
        assert!(g.try_enter().is_some(), "a freed slot is reused");
    }
}
