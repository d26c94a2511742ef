//! The shape of a machine: nodes × sockets × cores per socket, and optional memory per node.
//!
//! PEs are numbered node-major: PE `p` lives on node `p / pes_per_node`. Job-level traces
//! only know a PE count; they use [`MachineShape::flat`] (one PE per node, or the archive's
//! "processors").

use serde::{Deserialize, Serialize};

use crate::{NodeId, PeId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineShape {
    pub nodes: u32,
    pub sockets_per_node: u32,
    pub cores_per_socket: u32,
    /// Memory of one node in MiB, when the policy should respect it.
    pub mem_per_node_mib: Option<u64>,
}

impl MachineShape {
    /// `nodes` nodes of `pes_per_node` PEs each, one socket, no memory limit.
    pub const fn flat(nodes: u32, pes_per_node: u32) -> MachineShape {
        MachineShape {
            nodes,
            sockets_per_node: 1,
            cores_per_socket: pes_per_node,
            mem_per_node_mib: None,
        }
    }
    pub const fn pes_per_node(&self) -> u32 {
        self.sockets_per_node * self.cores_per_socket
    }
    pub const fn total_pes(&self) -> u32 {
        self.nodes * self.pes_per_node()
    }
    pub const fn node_of(&self, pe: PeId) -> NodeId {
        NodeId(pe.0 / self.pes_per_node())
    }
    /// The PEs of one node, in order.
    pub fn pes_of(&self, node: NodeId) -> std::ops::Range<u32> {
        let per = self.pes_per_node();
        node.0 * per..(node.0 + 1) * per
    }
    /// Socket index of a PE within its node.
    pub const fn socket_of(&self, pe: PeId) -> u32 {
        (pe.0 % self.pes_per_node()) / self.cores_per_socket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_is_node_major() {
        let m = MachineShape {
            nodes: 3,
            sockets_per_node: 2,
            cores_per_socket: 4,
            mem_per_node_mib: None,
        };
        assert_eq!(m.total_pes(), 24);
        assert_eq!(m.node_of(PeId(7)), NodeId(0));
        assert_eq!(m.node_of(PeId(8)), NodeId(1));
        assert_eq!(m.socket_of(PeId(12)), 1);
        assert_eq!(m.pes_of(NodeId(2)), 16..24);
    }
}
