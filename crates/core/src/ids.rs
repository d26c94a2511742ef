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

/// A hasher for job ids: they are already well-spread integers, so a multiply is enough and
/// much cheaper than SipHash on the hot paths of simulators and policies.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A hash map keyed by job ids, hashed with [`IdHasher`].
pub type IdMap<V> = std::collections::HashMap<JobId, V, std::hash::BuildHasherDefault<IdHasher>>;
