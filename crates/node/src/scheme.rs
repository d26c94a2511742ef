//! The coscheduling schemes by name. Seed 004 Table 1 classifies the implicit ones by what a
//! waiting process does (spin, block, spin then block) and what the kernel does when a message
//! arrives (nothing, interrupt and boost, periodic boost); GS and FCS are explicit (a global
//! heartbeat switches slots), FCFS is batch (one process per PE).

use std::fmt;
use std::str::FromStr;

/// One coscheduling scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Local OS scheduling only; waiting processes spin.
    Local,
    /// Immediate block; interrupt and boost on arrival.
    Ib,
    /// Spin-block (implicit coscheduling, ICS); interrupt and boost on arrival.
    Sb,
    /// Demand-based coscheduling: spin; interrupt and boost when the receiver is not running.
    Dcs,
    /// Periodic boost: spin; a kernel thread boosts a process with pending messages.
    Pb,
    /// SB with PROC reordering at every scheduler invocation.
    SbProc,
    /// PB with PROC reordering at every periodic-boost invocation.
    PbProc,
    /// Gang scheduling: strict slots of an Ousterhout matrix, waiting processes spin.
    Gs,
    /// Flexible coscheduling: gang slots plus per-process classification.
    Fcs,
    /// Batch: multiprogramming level 1, dedicated PEs.
    Fcfs,
    /// Co-ordinated coscheduling (seed 004 §2, Agarwal et al.): SB on the receiving side, and
    /// a sender spins for the spin time waiting for its send to complete, then blocks until
    /// it does (a long NIC queue means another process had better use the CPU).
    Cc,
}

impl Scheme {
    pub const ALL: [Scheme; 11] = [
        Scheme::Local,
        Scheme::Ib,
        Scheme::Sb,
        Scheme::Dcs,
        Scheme::Pb,
        Scheme::SbProc,
        Scheme::PbProc,
        Scheme::Gs,
        Scheme::Fcs,
        Scheme::Fcfs,
        Scheme::Cc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Local => "local",
            Scheme::Ib => "ib",
            Scheme::Sb => "sb",
            Scheme::Dcs => "dcs",
            Scheme::Pb => "pb",
            Scheme::SbProc => "sb+proc",
            Scheme::PbProc => "pb+proc",
            Scheme::Gs => "gs",
            Scheme::Fcs => "fcs",
            Scheme::Fcfs => "fcfs",
            Scheme::Cc => "cc",
        }
    }

    /// Schemes driven by a global heartbeat over an Ousterhout matrix.
    pub fn is_gang(self) -> bool {
        matches!(self, Scheme::Gs | Scheme::Fcs | Scheme::Fcfs)
    }

    /// Schemes that carry PROC load information on messages.
    pub fn uses_proc(self) -> bool {
        matches!(self, Scheme::SbProc | Scheme::PbProc)
    }

    /// The scheme a PROC scheme adds reordering to (SB+PROC: SB, PB+PROC: PB).
    pub fn proc_base(self) -> Option<Scheme> {
        match self {
            Scheme::SbProc => Some(Scheme::Sb),
            Scheme::PbProc => Some(Scheme::Pb),
            _ => None,
        }
    }

    /// Schemes whose senders wait (spin, then block) for their send to complete.
    pub fn waits_for_send(self) -> bool {
        self == Scheme::Cc
    }

    /// Schemes with a periodic boost thread.
    pub fn uses_periodic_boost(self) -> bool {
        matches!(self, Scheme::Pb | Scheme::PbProc)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name that is not one of [`Scheme::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown scheme {0:?} (known: local, ib, sb, dcs, pb, sb+proc, pb+proc, gs, fcs, fcfs, cc; ics is an alias of sb)"
)]
pub struct UnknownScheme(pub String);

impl FromStr for Scheme {
    type Err = UnknownScheme;
    fn from_str(s: &str) -> Result<Scheme, UnknownScheme> {
        let lower = s.trim().to_ascii_lowercase();
        if lower == "ics" {
            return Ok(Scheme::Sb);
        }
        Scheme::ALL
            .into_iter()
            .find(|k| k.name() == lower)
            .ok_or_else(|| UnknownScheme(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_alias() {
        for s in Scheme::ALL {
            assert_eq!(s.name().parse::<Scheme>().unwrap(), s);
        }
        assert_eq!("ICS".parse::<Scheme>().unwrap(), Scheme::Sb);
        assert!("gang".parse::<Scheme>().is_err());
    }
}
