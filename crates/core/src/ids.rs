//! Identifiers. Plain integers wrapped so a job id is never passed where a node is meant.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                $name(v)
            }
        }
    };
}

id_type!(
    /// A job: the SWF job number in a trace, a counter in the daemons.
    JobId(u64)
);
id_type!(
    /// A node (host) of the machine, numbered from 0.
    NodeId(u32)
);
id_type!(
    /// A processing element (core), numbered node-major from 0: see [`crate::MachineShape`].
    PeId(u32)
);
