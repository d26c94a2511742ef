//! The local OS scheduler: a multilevel feedback queue shaped like the Solaris time-sharing
//! class that seed 004's simulator emulates. 60 priority levels (59 is best); the quantum is
//! longer at low priorities; a process that uses its whole quantum drops 10 levels; one that
//! wakes from sleep returns at 50 or above; a coscheduling boost puts it at the top.

use cosched_core::Dur;

/// Highest priority; where boosts put a process.
pub const MAX_PRI: u8 = 59;
/// Priority of a newly started process.
pub const START_PRI: u8 = 29;

/// The quantum a process at `pri` receives (Solaris TS table: 200 ms at 0–9 down to 20 ms at
/// 50–59).
pub fn quantum(pri: u8) -> Dur {
    let band = i64::from(pri.min(MAX_PRI) / 10);
    Dur::from_millis(200 - 36 * band)
}

/// Priority after using a full quantum (`ts_tqexp`).
pub fn on_quantum_expired(pri: u8) -> u8 {
    pri.saturating_sub(10)
}

/// Priority after waking from sleep: I/O or a blocked receive (`ts_slpret`).
pub fn on_wake(pri: u8) -> u8 {
    (50 + pri / 10).max(pri).min(MAX_PRI)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shape() {
        assert_eq!(quantum(0), Dur::from_millis(200));
        assert_eq!(quantum(59), Dur::from_millis(20));
        assert!(quantum(30) > quantum(40));
        assert_eq!(on_quantum_expired(5), 0);
        assert_eq!(on_quantum_expired(59), 49);
        assert!(on_wake(10) >= 50);
        assert_eq!(on_wake(59), 59);
    }
}
