//! EASY as other simulators implement it (`--opt variant=NAME`), so that a schedule made on
//! one of them can be reproduced here and told apart from the policy itself. Each variant is
//! the peer's rule as its source reads; docs/sim.md ("EASY variants") says what each changes
//! against cosched's EASY, where in the peer's source, and how far the schedules agree.
//!
//! - `accasim` (AccaSim 1.1.3, `accasim/base/scheduler_class.py`, `EASYBackfilling`): when
//!   the queue head first fails to start it is *blocked* and given a slot, the earliest
//!   expected end of the running jobs at which enough cores are free; the head is tried again
//!   only at instants at or after that slot, and the slot is never recomputed. Meanwhile
//!   every later job that fits starts: the backfilling call passes the reservation an empty
//!   list of reserved nodes, so nothing is kept for the head. A pass runs at every instant
//!   with a job waiting, also when no core is free (AccaSim's `min_resources` is unset by
//!   default), so a head blocked on a full machine gets its slot then.
//! - `pybatsim` (pybatsim 3.2.1, `schedulers/unMaintained/easyBackfillNotopo.py`, adapted
//!   from pyss): the textbook pass, but after *each* event rather than once per instant: each
//!   job end runs a pass, and each submission runs one if the new job fits in the free PEs.
//!   Two jobs ending at one instant can so start a backfilled job on the PEs of the first
//!   before the second frees the head's. The passes count PEs on pyss's CPU snapshot, where a
//!   job holds its PEs until its walltime unless its completion came earlier
//!   ([`super::pyss`]).
//! - `cqsim` (CQSim, `src/CqSim/Cqsim_sim.py`, `event_job` and `start_scan`): a pass after
//!   every event, submissions included, ends before submissions at one instant.
//! - `batsched-easy-bf` (batsched, `src/algo/easy_bf.cpp` over `src/schedule.cpp`): the head
//!   reserves *specific machines*, the lowest-numbered among those free by its shadow time
//!   (first fit); a later job may start now only on free machines it can hold until its
//!   expected end without taking a reserved one while the head would hold it — so a long job
//!   may not use a reserved machine even when the count of extra PEs would allow it, and it
//!   runs on the lowest-numbered unreserved free machines.
//! - `batsched-easy-bf-fast` (batsched, `src/algo/easy_bf_fast.cpp`): the head's shadow time
//!   is computed once, when the job becomes head, and never again, even when jobs end early;
//!   a later job starts only if it fits now and ends by that shadow time (no extra PEs); at an
//!   instant where no job ended only the jobs submitted then are tried.

use cosched_core::{JobId, Time};

use crate::ConfigError;
use crate::opts::Opts;

/// Which simulator's EASY.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// cosched's own: the textbook rule of docs/sim.md, once per instant.
    #[default]
    Cosched,
    Accasim,
    Pybatsim,
    Cqsim,
    BatschedEasyBf,
    BatschedEasyBfFast,
}

impl Variant {
    pub const NAMES: &'static str =
        "cosched, accasim, pybatsim, cqsim, batsched-easy-bf, batsched-easy-bf-fast";

    /// The `variant` option.
    pub(crate) fn read(o: &Opts) -> Result<Variant, ConfigError> {
        match o.string("variant", "cosched")?.as_str() {
            "cosched" => Ok(Variant::Cosched),
            "accasim" => Ok(Variant::Accasim),
            "pybatsim" => Ok(Variant::Pybatsim),
            "cqsim" => Ok(Variant::Cqsim),
            "batsched-easy-bf" => Ok(Variant::BatschedEasyBf),
            "batsched-easy-bf-fast" => Ok(Variant::BatschedEasyBfFast),
            other => Err(o.bad(
                "variant",
                format!(
                    "unknown variant {other:?}; the variants are {}",
                    Self::NAMES
                ),
            )),
        }
    }

    /// Whether the peer schedules after each event instead of once per instant.
    pub fn passes_per_event(self) -> bool {
        matches!(self, Variant::Pybatsim | Variant::Cqsim)
    }
}

/// AccaSim's blocked head: its id and the slot at which it is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub job: JobId,
    pub slot: Time,
}

/// batsched `easy_bf_fast`'s priority job: the head and the shadow time it was given when it
/// became head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub job: JobId,
    pub shadow: Time,
}
