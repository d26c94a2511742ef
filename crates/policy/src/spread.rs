//! [`Spread`]: the rule for where a job's tasks may go by node (Slurm's `-N`,
//! `--ntasks-per-node`, `--nodelist`, `--exclude`), in one place. The pool's allocation
//! ([`crate::PePool::allocate_for`]), gang's packing, the policies' "never" check and the
//! ledger's check of a start all ask it.
//!
//! A job without a spread (every trace job) never reaches this module: its PEs are any free
//! ones, as the policies have always chosen them.
//!
//! `procs` is the job's PEs: with `--cpus-per-task c` a task holds `c` PEs of one node, so
//! the counts below are of tasks (`procs / c`, nodes of `PEs / c` tasks) and every node's
//! share of PEs is a multiple of `c`.
//!
//! Counts: with `-N n --ntasks-per-node m` the nodes get `m` tasks each in node order until
//! the tasks are placed (Slurm's block distribution); with `-N n` alone the tasks are spread
//! evenly (the first `procs % n` nodes one more). With neither, only the node filters apply
//! and the tasks take free PEs of the required nodes first, then of the other allowed
//! nodes in node order, each required node at least one. Nodes are tried required first,
//! then in node order, for the fixed counts too.

use cosched_core::{MachineShape, NodeId, PeSet};
use serde::{Deserialize, Serialize};

/// Where a job's tasks may go by node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    /// On exactly this many nodes (at least the required ones); `None`: as many as the
    /// counts need.
    pub nodes: Option<u32>,
    /// At most this many tasks on each node.
    pub tasks_per_node: Option<u32>,
    /// Nodes the job must include (`--nodelist`), sorted.
    pub required: Vec<NodeId>,
    /// Nodes it must not use (`--exclude`), sorted.
    pub excluded: Vec<NodeId>,
    /// PEs of one node each task holds (`--cpus-per-task`); 0 is read as 1.
    #[serde(default)]
    pub cpus_per_task: u32,
}

/// `tasks` tasks on `nodes` nodes, in node order, as Slurm lays them out: with
/// `--ntasks-per-node m` (`per_node`) blocks of `m`, full nodes first, a node that would be
/// left without a task taking one from the last full node (block distribution); without it
/// evenly, the first `tasks % nodes` nodes one more. Fewer tasks than nodes leave the last
/// nodes empty; tasks beyond `nodes × m` are the caller's to refuse.
pub fn task_layout(tasks: u32, nodes: u32, per_node: Option<u32>) -> Vec<u32> {
    let n = nodes.max(1);
    match per_node {
        Some(m) => {
            let mut left = tasks;
            (0..n)
                .map(|i| {
                    let rest_nodes = n - i - 1;
                    let take = m
                        .min(left.saturating_sub(rest_nodes))
                        .max(u32::from(left > 0));
                    left -= take;
                    take
                })
                .collect()
        }
        None => (0..n)
            .map(|i| tasks / n + u32::from(i < tasks % n))
            .collect(),
    }
}

impl Spread {
    /// The tasks per node, largest first, when the spread fixes them: `Ok(None)` when only
    /// the node filters apply; `Err` when no machine of this shape could place `procs` tasks
    /// so (the message says which numbers disagree).
    fn counts(&self, procs: u32, machine: &MachineShape) -> Result<Option<Vec<u32>>, String> {
        let c = self.cpus();
        if !procs.is_multiple_of(c) {
            return Err(format!(
                "{procs} PEs are not whole tasks of --cpus-per-task={c}"
            ));
        }
        if c > machine.pes_per_node() {
            return Err(format!(
                "--cpus-per-task={c}: a node has {} PEs",
                machine.pes_per_node()
            ));
        }
        Ok(self
            .task_counts(procs / c, machine.pes_per_node() / c, machine)?
            .map(|counts| counts.into_iter().map(|n| n * c).collect()))
    }

    /// PEs per task.
    fn cpus(&self) -> u32 {
        self.cpus_per_task.max(1)
    }

    /// [`Self::counts`] in tasks: `procs` tasks on nodes of `per` tasks each.
    fn task_counts(
        &self,
        procs: u32,
        per: u32,
        machine: &MachineShape,
    ) -> Result<Option<Vec<u32>>, String> {
        let need = self.required.len() as u32;
        let n = match (self.nodes, self.tasks_per_node) {
            (None, None) => return Ok(None),
            (Some(n), _) => n.max(need),
            (None, Some(m)) => procs.div_ceil(m.max(1)).max(need),
        };
        if n == 0 {
            return Err("-N 0: a job needs at least one node".into());
        }
        if n > machine.nodes {
            return Err(format!(
                "needs {n} nodes; the machine has {}",
                machine.nodes
            ));
        }
        if procs < n {
            return Err(format!(
                "{procs} tasks cannot cover {n} nodes (at least one task on each)"
            ));
        }
        if let Some(m) = self.tasks_per_node {
            if m == 0 {
                return Err("--ntasks-per-node=0: a node needs at least one task".into());
            }
            if u64::from(n) * u64::from(m) < u64::from(procs) {
                return Err(format!(
                    "{procs} tasks do not fit on {n} nodes × {m} tasks per node"
                ));
            }
        }
        let mut counts = task_layout(procs, n, self.tasks_per_node);
        counts.sort_unstable_by(|a, b| b.cmp(a));
        if counts[0] > per {
            return Err(format!(
                "needs {} tasks on a node; a node has {} PEs",
                counts[0],
                machine.pes_per_node()
            ));
        }
        Ok(Some(counts))
    }

    /// Why `procs` tasks can never be placed so on `machine`, even with every node up and
    /// idle; `None` if they can.
    pub fn never(&self, procs: u32, machine: &MachineShape) -> Option<String> {
        if let Some(n) = self.required.iter().find(|n| n.0 >= machine.nodes) {
            return Some(format!(
                "--nodelist names node {} beyond the machine's {} nodes",
                n.0, machine.nodes
            ));
        }
        if let Some(n) = self.required.iter().find(|n| self.excluded.contains(n)) {
            return Some(format!("node {} is both required and excluded", n.0));
        }
        if let Err(why) = self.counts(procs, machine) {
            return Some(why);
        }
        if self.choose(procs, machine, |_| true).is_none() {
            let allowed = machine.nodes - self.excluded.len() as u32;
            return Some(format!(
                "{procs} tasks do not fit on the {allowed} nodes left after --exclude"
            ));
        }
        None
    }

    /// The PEs to give `procs` tasks now, where `free` says which PEs are free: lowest
    /// nodes and PEs first, required nodes always. `None` if they cannot be placed now.
    pub fn choose(
        &self,
        procs: u32,
        machine: &MachineShape,
        free: impl Fn(u32) -> bool,
    ) -> Option<PeSet> {
        let counts = self.counts(procs, machine).ok()?;
        let allowed = (0..machine.nodes)
            .map(NodeId)
            .filter(|n| self.excluded.binary_search(n).is_err());
        // Required nodes first, then the others in node order.
        let order = self.required.iter().copied().chain(
            allowed
                .clone()
                .filter(|n| self.required.binary_search(n).is_err()),
        );
        let free_on = |n: NodeId| machine.pes_of(n).filter(|&p| free(p)).collect::<Vec<_>>();
        let mut pes = Vec::new();
        match counts {
            None => {
                let c = self.cpus();
                let mut left = procs;
                for (k, node) in order.enumerate() {
                    let f = free_on(node);
                    // Whole tasks only: a task's PEs are on one node.
                    let room = f.len() as u32 / c * c;
                    let required = k < self.required.len();
                    if room == 0 && required {
                        return None;
                    }
                    // Leave one task for each required node still to come.
                    let later = self.required.len().saturating_sub(k + 1) as u32 * c;
                    let take = room.min(left.saturating_sub(later));
                    pes.extend_from_slice(&f[..take as usize]);
                    left -= take;
                    if left == 0 && k + 1 >= self.required.len() {
                        break;
                    }
                }
                if left > 0 {
                    return None;
                }
            }
            Some(counts) => {
                let mut taken = vec![false; counts.len()];
                let mut placed = 0;
                for (k, node) in order.enumerate() {
                    let f = free_on(node);
                    // The largest count still open that this node can hold.
                    match (0..counts.len()).find(|&i| !taken[i] && counts[i] as usize <= f.len()) {
                        Some(i) => {
                            taken[i] = true;
                            pes.extend_from_slice(&f[..counts[i] as usize]);
                            placed += 1;
                        }
                        None if k < self.required.len() => return None,
                        None => {}
                    }
                    if placed == counts.len() {
                        break;
                    }
                }
                if placed < counts.len() {
                    return None;
                }
            }
        }
        Some(PeSet::from_pes(pes))
    }

    /// Whether `pes` place `procs` tasks as this spread asks (the ledger's check of a start).
    pub fn admits(&self, procs: u32, machine: &MachineShape, pes: &PeSet) -> bool {
        let mut per_node: Vec<(NodeId, u32)> = Vec::new();
        for p in pes.iter() {
            let n = machine.node_of(p);
            match per_node.last_mut() {
                Some((last, c)) if *last == n => *c += 1,
                _ => per_node.push((n, 1)),
            }
        }
        if per_node
            .iter()
            .any(|(n, _)| self.excluded.binary_search(n).is_ok())
            || !self
                .required
                .iter()
                .all(|r| per_node.iter().any(|(n, _)| n == r))
        {
            return false;
        }
        if per_node
            .iter()
            .any(|&(_, n)| !n.is_multiple_of(self.cpus()))
        {
            return false;
        }
        match self.counts(procs, machine) {
            Err(_) => false,
            Ok(None) => pes.len() >= procs,
            Ok(Some(counts)) => {
                let mut got: Vec<u32> = per_node.iter().map(|&(_, c)| c).collect();
                got.sort_unstable_by(|a, b| b.cmp(a));
                got == counts
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(nodes: Option<u32>, tpn: Option<u32>) -> Spread {
        Spread {
            nodes,
            tasks_per_node: tpn,
            ..Spread::default()
        }
    }

    #[test]
    fn two_nodes_one_task_each_takes_one_pe_on_each_of_two_nodes() {
        let m = MachineShape::flat(4, 4);
        let s = spread(Some(2), Some(1));
        let pes = s.choose(2, &m, |_| true).unwrap();
        assert_eq!(pes.to_string(), "0,4");
        assert!(s.admits(2, &m, &pes));
        assert!(!s.admits(2, &m, &PeSet::contiguous(0, 2)), "both on node 0");
        // Node 1 full: nodes 0 and 2.
        let pes = s.choose(2, &m, |p| !(4..8).contains(&p)).unwrap();
        assert_eq!(pes.to_string(), "0,8");
    }

    #[test]
    fn counts_are_blocks_with_tasks_per_node_and_even_without() {
        let m = MachineShape::flat(4, 4);
        let s = spread(Some(2), Some(3));
        assert_eq!(s.choose(5, &m, |_| true).unwrap().to_string(), "0-2,4-5");
        let s = spread(Some(3), None);
        assert_eq!(
            s.choose(7, &m, |_| true).unwrap().to_string(),
            "0-2,4-5,8-9"
        );
        // --ntasks-per-node alone: as many nodes as the tasks need.
        let s = spread(None, Some(2));
        assert_eq!(s.choose(5, &m, |_| true).unwrap().to_string(), "0-1,4-5,8");
    }

    #[test]
    fn task_layout_is_blocks_in_node_order_with_tasks_per_node_and_even_without() {
        assert_eq!(task_layout(5, 2, Some(3)), [3, 2]);
        assert_eq!(task_layout(4, 2, Some(3)), [3, 1]);
        assert_eq!(task_layout(4, 3, Some(3)), [2, 1, 1]);
        assert_eq!(task_layout(2, 2, Some(1)), [1, 1]);
        assert_eq!(task_layout(5, 3, None), [2, 2, 1]);
        assert_eq!(task_layout(1, 3, None), [1, 0, 0]);
        assert_eq!(task_layout(1, 3, Some(2)), [1, 0, 0]);
    }

    #[test]
    fn a_node_too_busy_for_its_share_is_passed_over() {
        let m = MachineShape::flat(3, 4);
        let s = spread(Some(2), Some(2));
        // Node 0 has one free PE: nodes 1 and 2.
        let pes = s.choose(4, &m, |p| p == 3 || p >= 4).unwrap();
        assert_eq!(pes.to_string(), "4-5,8-9");
        assert!(s.choose(4, &m, |p| p < 5).is_none(), "only node 0 has room");
    }

    #[test]
    fn nodelist_nodes_are_always_used_and_excluded_ones_never() {
        let m = MachineShape::flat(4, 2);
        let s = Spread {
            nodes: Some(2),
            required: vec![NodeId(3)],
            excluded: vec![NodeId(0)],
            ..Spread::default()
        };
        let pes = s.choose(2, &m, |_| true).unwrap();
        assert_eq!(pes.to_string(), "2,6");
        assert!(s.admits(2, &m, &pes));
        assert!(
            !s.admits(2, &m, &PeSet::from_pes([0, 6])),
            "node 0 is excluded"
        );
        assert!(
            !s.admits(2, &m, &PeSet::from_pes([2, 4])),
            "node 3 is required"
        );
        assert!(s.choose(2, &m, |p| p < 6).is_none(), "node 3 is busy");
        // Filters only: free PEs of allowed nodes, the required node included.
        let s = Spread {
            required: vec![NodeId(3)],
            excluded: vec![NodeId(0)],
            ..Spread::default()
        };
        assert_eq!(s.choose(3, &m, |_| true).unwrap().to_string(), "2,6-7");
        assert_eq!(s.choose(5, &m, |_| true).unwrap().to_string(), "2-4,6-7");
        assert!(s.choose(7, &m, |_| true).is_none());
    }

    #[test]
    fn cpus_per_task_keeps_each_tasks_pes_on_one_node() {
        let m = MachineShape::flat(2, 2);
        // 2 tasks × 2 PEs on nodes of 2 PEs: one task per node, both its PEs.
        let s = Spread {
            cpus_per_task: 2,
            ..Spread::default()
        };
        assert_eq!(s.choose(4, &m, |_| true).unwrap().to_string(), "0-3");
        // PE 1 busy: node 0 has no room for a whole task, and node 1 holds one task only.
        assert!(s.choose(4, &m, |p| p != 1).is_none());
        assert_eq!(s.choose(2, &m, |p| p != 1).unwrap().to_string(), "2-3");
        assert!(s.admits(4, &m, &PeSet::contiguous(0, 4)));
        assert!(
            !s.admits(2, &m, &PeSet::from_pes([1, 2])),
            "a task split over two nodes"
        );
        // With -N: tasks per node, then PEs.
        let m = MachineShape::flat(3, 4);
        let s = Spread {
            nodes: Some(2),
            cpus_per_task: 2,
            ..Spread::default()
        };
        // Nodes 0 and 1: two tasks (PEs 0-3), then one (PEs 4-5).
        assert_eq!(s.choose(6, &m, |_| true).unwrap().to_string(), "0-5");
        assert!(s.never(6, &m).is_none());
        assert!(s.never(5, &m).unwrap().contains("whole tasks"));
        let s = Spread {
            cpus_per_task: 5,
            ..Spread::default()
        };
        assert!(s.never(5, &m).unwrap().contains("4 PEs"));
    }

    #[test]
    fn impossible_spreads_say_why() {
        let m = MachineShape::flat(2, 4);
        assert!(
            spread(Some(3), Some(1))
                .never(3, &m)
                .unwrap()
                .contains("3 nodes")
        );
        assert!(
            spread(Some(2), Some(5))
                .never(10, &m)
                .unwrap()
                .contains("4 PEs")
        );
        assert!(
            spread(Some(2), None)
                .never(1, &m)
                .unwrap()
                .contains("cover")
        );
        let s = Spread {
            excluded: vec![NodeId(0)],
            ..Spread::default()
        };
        assert!(s.never(5, &m).unwrap().contains("--exclude"));
        assert_eq!(s.never(4, &m), None);
        assert_eq!(spread(Some(2), Some(1)).never(2, &m), None);
    }
}
