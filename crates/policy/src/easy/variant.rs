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
}

impl Variant {
    pub const NAMES: &'static str = "cosched, accasim";

    /// The `variant` option.
    pub(crate) fn read(o: &Opts) -> Result<Variant, ConfigError> {
        match o.string("variant", "cosched")?.as_str() {
            "cosched" => Ok(Variant::Cosched),
            "accasim" => Ok(Variant::Accasim),
            other => Err(o.bad(
                "variant",
                format!(
                    "unknown variant {other:?}; the variants are {}",
                    Self::NAMES
                ),
            )),
        }
    }
}

/// AccaSim's blocked head: its id and the slot at which it is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub job: JobId,
    pub slot: Time,
}
