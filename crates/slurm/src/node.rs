//! What Slurm's commands show of nodes and partitions ([`NodeView`], [`PartitionView`]) and
//! node states as `sinfo` and `scontrol` name them.
//!
//! cosched's node states: `up` (in the tree), `joining` (registered, not yet back in the
//! tree) and `down` (missed its heartbeats). Up nodes are `idle`, `mix` or `alloc` by how
//! many of their PEs jobs hold; a down node is Slurm's `down*` (down and not responding);
//! a joining one `unk` (unknown, as Slurm calls a node it has not heard from yet). A node
//! an administrator drained is `drng` while its jobs run, then `drain`, as in Slurm.

/// A node's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Idle,
    Mixed,
    Allocated,
    Down,
    Unknown,
    /// Drained by an administrator, its jobs still running.
    Draining,
    /// Drained by an administrator, idle.
    Drained,
}

impl NodeState {
    /// The state of a node that is `up`/`joining`/`down` with `used` of its `pes` held.
    pub fn of(cosched: &str, used: u32, pes: u32) -> NodeState {
        match cosched {
            "up" if used == 0 => NodeState::Idle,
            "up" if used >= pes => NodeState::Allocated,
            "up" => NodeState::Mixed,
            "down" => NodeState::Down,
            "draining" => NodeState::Draining,
            "drained" => NodeState::Drained,
            _ => NodeState::Unknown,
        }
    }

    /// `sinfo`'s `%t` (`down*`: down and not responding).
    pub fn compact(self) -> &'static str {
        match self {
            NodeState::Idle => "idle",
            NodeState::Mixed => "mix",
            NodeState::Allocated => "alloc",
            NodeState::Down => "down*",
            NodeState::Unknown => "unk*",
            NodeState::Draining => "drng",
            NodeState::Drained => "drain",
        }
    }

    /// `sinfo`'s `%T`.
    pub fn long(self) -> &'static str {
        match self {
            NodeState::Idle => "idle",
            NodeState::Mixed => "mixed",
            NodeState::Allocated => "allocated",
            NodeState::Down => "down*",
            NodeState::Unknown => "unknown*",
            NodeState::Draining => "draining",
            NodeState::Drained => "drained",
        }
    }

    /// `scontrol show node`'s State.
    pub fn scontrol(self) -> &'static str {
        match self {
            NodeState::Idle => "IDLE",
            NodeState::Mixed => "MIXED",
            NodeState::Allocated => "ALLOCATED",
            NodeState::Down => "DOWN+NOT_RESPONDING",
            NodeState::Unknown => "UNKNOWN+NOT_RESPONDING",
            NodeState::Draining => "MIXED+DRAIN",
            NodeState::Drained => "IDLE+DRAIN",
        }
    }

    /// Whether it is among the states `-t/--states` names (`idle`, `alloc`, `allocated`,
    /// `mix`, `mixed`, `down`, `unk`, `unknown`, `responding`, `no_respond`).
    pub fn matches(self, name: &str) -> bool {
        let n = name.trim().to_ascii_lowercase();
        match n.as_str() {
            "idle" => self == NodeState::Idle,
            "mix" | "mixed" => self == NodeState::Mixed,
            "alloc" | "allocated" => self == NodeState::Allocated,
            "down" => self == NodeState::Down,
            "unk" | "unknown" => self == NodeState::Unknown,
            "drain" => matches!(self, NodeState::Draining | NodeState::Drained),
            "drng" | "draining" => self == NodeState::Draining,
            "drained" => self == NodeState::Drained,
            "no_respond" => matches!(self, NodeState::Down | NodeState::Unknown),
            "responding" => !matches!(self, NodeState::Down | NodeState::Unknown),
            _ => false,
        }
    }
}

/// A node as Slurm's commands show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub state: NodeState,
    /// PEs (Slurm's CPUs) and how many jobs hold.
    pub cpus: u32,
    pub alloc_cpus: u32,
    pub addr: String,
    pub partitions: Vec<String>,
}

/// A partition: a named set of nodes with limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    pub name: String,
    pub default: bool,
    pub up: bool,
    /// The longest time limit a job may have; `None`: unlimited.
    pub max_time_secs: Option<u64>,
    pub nodes: Vec<String>,
    pub total_cpus: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_node_is_shown_as_slurm_shows_one() {
        let draining = NodeState::of("draining", 1, 4);
        let drained = NodeState::of("drained", 0, 4);
        assert_eq!((draining.compact(), drained.compact()), ("drng", "drain"));
        assert_eq!(drained.scontrol(), "IDLE+DRAIN");
        assert!(draining.matches("drain") && drained.matches("drain"));
        assert!(draining.matches("drng") && !drained.matches("drng"));
        assert!(!drained.matches("idle"));
    }
}
