//! Replayed requests refused: the first frame of every connection to the machine manager
//! carries a stamp (the sender's clock and a random nonce), and a stamp far from the machine
//! manager's clock, or a nonce seen recently, is refused.
//!
//! The nonces of requests that changed something (a client's change, a registration, a step
//! of a file broadcast) are written to the database with the change (see `super::store`),
//! and a restarted machine manager starts from those of the last two windows: a frame
//! captured before a restart and replayed after it is refused too, where a window kept in
//! memory only would let a replayed submission create a second job. Why nonces kept in the
//! database rather
//! than requests bound to an epoch of the machine manager that the client must echo: a
//! client sends one frame and reads one, with no earlier contact to learn an epoch from, and
//! the change is written anyway — its nonce is one more row of the same transaction. The
//! nonces of reads stay in memory only: a read replayed after a restart changes nothing.

use std::collections::{HashSet, VecDeque};

use cosched_proto::proto::{REPLAY_WINDOW_US, Stamp};
use cosched_proto::util::now;

/// The nonces of the last two windows, and the stamp's time rule: a request whose stamp is
/// more than [`REPLAY_WINDOW_US`] from the clock (either way), or whose nonce is among them,
/// is a replay or comes from a clock that is badly off, and is refused.
#[derive(Default)]
pub(super) struct Replays {
    seen: HashSet<u64>,
    /// `(time_us, nonce)` in arrival order, to forget them once out of the window.
    order: VecDeque<(i64, u64)>,
}

impl Replays {
    /// The window as a restarted machine manager finds it: `(arrived_us, nonce)` in arrival
    /// order, from the database.
    pub(super) fn restored(recorded: Vec<(i64, u64)>) -> Replays {
        Replays {
            seen: recorded.iter().map(|&(_, n)| n).collect(),
            order: recorded.into(),
        }
    }

    pub(super) fn check(&mut self, s: Stamp) -> Result<(), String> {
        self.check_at(s, now().as_micros())
    }

    pub(super) fn check_at(&mut self, s: Stamp, now_us: i64) -> Result<(), String> {
        while self
            .order
            .front()
            .is_some_and(|&(t, _)| t < forgotten_before(now_us))
        {
            let (_, n) = self.order.pop_front().expect("non-empty");
            self.seen.remove(&n);
        }
        let off = s.time_us.saturating_sub(now_us);
        if off.unsigned_abs() > REPLAY_WINDOW_US as u64 {
            return Err(format!(
                "request stamped {:.1} s from the machine manager's clock (more than {} s): a replayed request, or a clock that is off",
                off as f64 / 1e6,
                REPLAY_WINDOW_US / 1_000_000
            ));
        }
        if !self.seen.insert(s.nonce) {
            return Err(format!(
                "replayed request refused (nonce {:016x} already used)",
                s.nonce
            ));
        }
        self.order.push_back((now_us, s.nonce));
        Ok(())
    }
}

/// A nonce is remembered for two windows after it arrived: its stamp may be up to one window
/// ahead of the clock, and a copy is refused by its time for one window after that. Nonces
/// that arrived before this time are forgotten, in memory and in the database.
pub(super) fn forgotten_before(now_us: i64) -> i64 {
    now_us.saturating_sub(2 * REPLAY_WINDOW_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same stamp twice is refused, and so is one out of the window.
    #[test]
    fn a_stamp_is_accepted_once_and_only_near_the_clock() {
        let mut r = Replays::default();
        let t = 1_000_000_000_000;
        let s = Stamp {
            time_us: t,
            nonce: 7,
        };
        assert!(r.check_at(s, t).is_ok());
        let again = r.check_at(s, t + 1_000_000).unwrap_err();
        assert!(again.contains("replayed"), "{again}");
        let old = Stamp {
            time_us: t - REPLAY_WINDOW_US - 1,
            nonce: 8,
        };
        assert!(r.check_at(old, t).unwrap_err().contains("clock"));
        // Long after, the nonce is forgotten, and its stamp is too old anyway.
        let later = t + 3 * REPLAY_WINDOW_US;
        assert!(r.check_at(s, later).is_err());
        assert_eq!(r.seen.len(), 0);
        assert!(
            r.check_at(
                Stamp {
                    time_us: later,
                    nonce: 9
                },
                later
            )
            .is_ok()
        );
    }

    /// A window restored from the database refuses its nonces, and
    /// forgets them on the same schedule as nonces seen since.
    #[test]
    fn a_restored_window_refuses_the_nonces_recorded_before_the_restart() {
        let t = 1_000_000_000_000;
        let mut r = Replays::restored(vec![(t - 10_000_000, 41), (t - 1_000_000, 42)]);
        let replayed = Stamp {
            time_us: t - 1_000_000,
            nonce: 42,
        };
        assert!(r.check_at(replayed, t).unwrap_err().contains("replayed"));
        let fresh = Stamp {
            time_us: t,
            nonce: 43,
        };
        assert!(r.check_at(fresh, t).is_ok());
        // Two windows after they arrived, the restored nonces go like the others.
        r.check_at(
            Stamp {
                time_us: t + 2 * REPLAY_WINDOW_US,
                nonce: 44,
            },
            t + 2 * REPLAY_WINDOW_US,
        )
        .unwrap();
        assert!(!r.seen.contains(&41) && !r.seen.contains(&42));
    }
}
