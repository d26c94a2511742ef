//! PROC, process reordering (seed 004 §3, Algorithm 1). Every node piggybacks on each outgoing
//! message its mean time between context switches TS and its expected number of processes to
//! run before the current one runs again, ENP. A receiving node keeps, per remote node and per
//! local process, the latest of these; when several local processes have pending messages, it
//! prefers the one whose peer is expected to be scheduled soonest (least expected remaining
//! time, ERT).
//!
//! ENP is kept in thousandths so that all of this stays in integer arithmetic.
//!
//! [`ProcOptions`] holds the readings of SB+PROC that the paper leaves open; their defaults
//! are the paper's reading.

use cosched_core::{Dur, Time};

/// How SB+PROC applies Algorithm 1. The defaults follow seed 004 §5.1: SB+PROC reorders SB's
/// *boost sequence* — the woken, boosted processes waiting at the highest ready level — and
/// otherwise schedules as SB does. Each option is a departure from that reading, kept so that
/// its effect can be measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcOptions {
    /// Keep the running process whenever both it and the best ready process have pending
    /// messages, so that a woken, boosted process does not preempt it (SB's rule would let
    /// the higher priority preempt).
    pub keep_reordered: bool,
    /// When the best ready process has pending messages, let every ready process with pending
    /// messages compete, whatever its priority level (default: only those at the highest
    /// ready level).
    pub any_level: bool,
}

/// The load-imbalance information a node attaches to each message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LoadInfo {
    /// Mean CPU time between consecutive context switches on the sender's node (TS_i).
    pub ts: Dur,
    /// Expected number of processes to run before the current one again, × 1000 (ENP_i).
    pub enp_milli: i64,
}

/// What a node measures about itself to produce [`LoadInfo`].
#[derive(Clone, Debug, Default)]
pub struct LoadTracker {
    last_switch: Option<Time>,
    /// Running mean of the time between switches (EWMA, weight 1/8).
    ts: Option<Dur>,
    wakeups: u64,
}

impl LoadTracker {
    /// A context switch happened at `now`.
    pub fn switched(&mut self, now: Time) {
        if let Some(last) = self.last_switch {
            let gap = now.since(last);
            self.ts = Some(match self.ts {
                None => gap,
                Some(ts) => Dur(ts.0 + (gap.0 - ts.0) / 8),
            });
        }
        self.last_switch = Some(now);
    }

    /// A process was woken or boosted (I/O completion or message).
    pub fn woke(&mut self) {
        self.wakeups += 1;
    }

    /// TS and ENP at `now`, given how many processes are ready at the highest ready level.
    pub fn info(&self, now: Time, ready_at_top: u32) -> LoadInfo {
        let ts = self.ts.unwrap_or(Dur::ZERO);
        // Expected extra wake-ups during TS × ready_at_top, at the rate observed so far.
        let horizon = ts.0 * i64::from(ready_at_top);
        let extra_milli = if now.0 > 0 {
            (self.wakeups as i64 * 1000).saturating_mul(horizon) / now.0
        } else {
            0
        };
        LoadInfo {
            ts,
            enp_milli: i64::from(ready_at_top) * 1000 + extra_milli,
        }
    }
}

/// One remote node as seen from here: T_ij (last message from it) and TS_ij.
#[derive(Clone, Copy, Debug, Default)]
pub struct RemoteNode {
    pub last_msg: Time,
    pub ts: Dur,
}

/// Per (local process, remote node): ENP_ijk and T_ijk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcRemote {
    pub node: u32,
    pub enp_milli: i64,
    pub at: Time,
}

/// Records an arriving message's information for local process `entries` and the node table.
pub fn record(
    remotes: &mut Vec<RemoteNode>,
    entries: &mut Vec<ProcRemote>,
    from: u32,
    info: LoadInfo,
    now: Time,
) {
    let i = from as usize;
    if remotes.len() <= i {
        remotes.resize(i + 1, RemoteNode::default());
    }
    remotes[i] = RemoteNode {
        last_msg: now,
        ts: info.ts,
    };
    match entries.iter_mut().find(|e| e.node == from) {
        Some(e) => {
            e.enp_milli = info.enp_milli;
            e.at = now;
        }
        None => entries.push(ProcRemote {
            node: from,
            enp_milli: info.enp_milli,
            at: now,
        }),
    }
}

/// ERT_jk of one process: the least, over the remote nodes it has pending messages from, of the
/// expected time until that peer runs again (lines 5–16 of Algorithm 1). Ages the entries as
/// Algorithm 1 does (lines 9–12).
pub fn expected_remaining(
    remotes: &[RemoteNode],
    entries: &mut [ProcRemote],
    pending_from: &[u32],
    now: Time,
) -> Option<i64> {
    let mut best: Option<i64> = None;
    for e in entries
        .iter_mut()
        .filter(|e| pending_from.contains(&e.node))
    {
        let r = remotes.get(e.node as usize).copied().unwrap_or_default();
        if e.at < r.last_msg && r.ts.0 > 0 {
            e.enp_milli -= (r.last_msg.since(e.at).0 * 1000) / r.ts.0;
            e.at = r.last_msg;
        }
        let ert = r.ts.0 * e.enp_milli / 1000 - now.since(e.at).0;
        best = Some(best.map_or(ert, |b| b.min(ert)));
    }
    best
}

/// The candidate set of preferable processes: the indices of `erts` holding the least value
/// (lines 17–22). Empty when fewer than two processes have pending messages: Algorithm 1 is not
/// invoked then.
pub fn candidate_set(erts: &[(usize, i64)]) -> Vec<usize> {
    if erts.len() < 2 {
        return Vec::new();
    }
    let least = erts.iter().map(|&(_, e)| e).min().unwrap_or(0);
    erts.iter()
        .filter(|&&(_, e)| e == least)
        .map(|&(k, _)| k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_the_process_whose_peer_runs_soonest() {
        let mut remotes = Vec::new();
        let mut a = Vec::new();
        let mut b = Vec::new();
        // Node 1 is lightly loaded (ENP 1), node 2 heavily (ENP 4); same TS.
        record(
            &mut remotes,
            &mut a,
            1,
            LoadInfo {
                ts: Dur(1000),
                enp_milli: 1000,
            },
            Time(0),
        );
        record(
            &mut remotes,
            &mut b,
            2,
            LoadInfo {
                ts: Dur(1000),
                enp_milli: 4000,
            },
            Time(0),
        );
        let ea = expected_remaining(&remotes, &mut a, &[1], Time(100)).unwrap();
        let eb = expected_remaining(&remotes, &mut b, &[2], Time(100)).unwrap();
        assert_eq!(ea, 900);
        assert_eq!(eb, 3900);
        assert_eq!(candidate_set(&[(0, ea), (1, eb)]), vec![0]);
        assert!(candidate_set(&[(0, ea)]).is_empty());
    }

    #[test]
    fn stale_entries_age_by_newer_node_information() {
        let mut remotes = Vec::new();
        let mut a = Vec::new();
        let mut other = Vec::new();
        record(
            &mut remotes,
            &mut a,
            1,
            LoadInfo {
                ts: Dur(1000),
                enp_milli: 3000,
            },
            Time(0),
        );
        // A later message from node 1 to another process: 2000 µs later → two switches passed.
        record(
            &mut remotes,
            &mut other,
            1,
            LoadInfo {
                ts: Dur(1000),
                enp_milli: 5000,
            },
            Time(2000),
        );
        let ea = expected_remaining(&remotes, &mut a, &[1], Time(2000)).unwrap();
        assert_eq!(a[0].enp_milli, 1000);
        assert_eq!(ea, 1000);
    }

    #[test]
    fn tracker_means_switch_gaps() {
        let mut t = LoadTracker::default();
        t.switched(Time(0));
        t.switched(Time(800));
        assert_eq!(t.info(Time(800), 2).ts, Dur(800));
        assert_eq!(t.info(Time(800), 2).enp_milli, 2000);
    }
}
