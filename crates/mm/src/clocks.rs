//! Where an instant of a node's clock falls on the machine manager's, for the run reports
//! that gang accounting follows ([`cosched_proto::proto::FromNode::Runs`]).
//!
//! The two clocks share no epoch (each is its host's monotonic clock). Each report carries
//! the node's clock at its sending; the machine manager's clock when it takes the report in
//! is later by the offset between the clocks plus the message's delay, and the delay varies:
//! a machine manager busy writing its database, a node manager's tree behind a launch, a
//! loaded host, each hold messages for tens of milliseconds. Taking the smallest difference
//! seen recently as the offset (the delay of the fastest message, microseconds on a link
//! that is not busy) books each change at the instant it happened rather than when its
//! message was read, so the start and the stop of a run stretch are not shifted apart by two
//! different delays. Two windows of [`WINDOW`] are kept, so the estimate follows the clocks'
//! drift and forgets a node manager that restarted.

use std::collections::HashMap;

use cosched_core::{Dur, NodeId, Time};

/// How long a smallest difference is kept before newer ones replace it.
pub const WINDOW: Dur = Dur::from_secs(30);

/// The smallest difference seen in the current window and in the one before.
#[derive(Clone, Copy, Debug)]
struct Offset {
    since: Time,
    current: Dur,
    previous: Option<Dur>,
}

/// The offset of each node's clock, learnt from its reports.
#[derive(Debug, Default)]
pub struct NodeClocks {
    nodes: HashMap<NodeId, Offset>,
}

impl NodeClocks {
    /// A message of `node` sent at `sent` on its clock is taken in at `now`: the instant
    /// `at` of the node's clock, on this one (never later than `now`).
    pub fn place(&mut self, node: NodeId, now: Time, sent: Time, at: Time) -> Time {
        let diff = now - sent;
        let o = self.nodes.entry(node).or_insert(Offset {
            since: now,
            current: diff,
            previous: None,
        });
        if now - o.since >= WINDOW {
            *o = Offset {
                since: now,
                current: diff,
                previous: Some(o.current),
            };
        } else if diff < o.current {
            o.current = diff;
        }
        let offset = o.previous.map_or(o.current, |p| p.min(o.current));
        (at + offset).min(now)
    }

    /// The node left (or registered again as a new incarnation): its clock is learnt anew.
    pub fn forget(&mut self, node: NodeId) {
        self.nodes.remove(&node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Time {
        Time::from_micros(ms * 1000)
    }

    #[test]
    fn a_delayed_report_is_booked_when_it_happened_on_the_fastest_offset() {
        let mut c = NodeClocks::default();
        let n = NodeId(1);
        // The node's clock is 5 s behind; the first message takes 2 ms.
        assert_eq!(c.place(n, t(10_002), t(5_000), t(4_990)), t(9_992));
        // A message held 150 ms (a busy machine manager) is booked on the 2-ms offset.
        assert_eq!(c.place(n, t(10_250), t(5_100), t(5_090)), t(10_092));
        // A faster one lowers the offset for what follows.
        assert_eq!(c.place(n, t(10_301), t(5_300), t(5_300)), t(10_301));
        assert_eq!(c.place(n, t(10_500), t(5_400), t(5_390)), t(10_391));
        // Never later than the machine manager's own now.
        assert_eq!(c.place(n, t(10_600), t(5_600), t(5_650)), t(10_600));
    }

    #[test]
    fn the_offset_follows_a_clock_that_moved_after_two_windows() {
        let mut c = NodeClocks::default();
        let n = NodeId(2);
        c.place(n, t(1_000), t(1_000), t(1_000));
        // The node's clock jumps 1 s behind (a new incarnation not forgotten): the old
        // smallest difference holds for the window after its own, then goes.
        let late = t(1_000) + WINDOW;
        assert_eq!(
            c.place(n, late, late - Dur::from_secs(1), late - Dur::from_secs(1)),
            late - Dur::from_secs(1)
        );
        let later = late + WINDOW;
        assert_eq!(
            c.place(
                n,
                later,
                later - Dur::from_secs(1),
                later - Dur::from_secs(1)
            ),
            later
        );
        c.forget(n);
        assert_eq!(c.place(n, t(9), t(1), t(1)), t(9));
    }
}
