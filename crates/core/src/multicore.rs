//! Multi-core nodes as seed 001 (G-LOMARC-TS, §4.4, §4.9–4.10) models them: the slowdown a
//! job suffers from its own processes sharing a node (core and node self-slowdowns SL_crs,
//! SL_nos) and from another job's processes on the same node (coscheduling slowdown SL_cos),
//! where a job's processes sit on a node (Fig. 12), and the two size rules built on them
//! (formula 7, the workload transformation; formula 11, the space-sharing PPN).
//!
//! Everything here is pure and shared: the workload transformation, the policies (which are
//! told the slowdowns, as the seed's users tell them) and the simulator engine (which turns
//! the slowdowns in force into progress rates) read the same [`Slowdowns`], so the three can
//! never disagree about a job.
//!
//! Slowdowns are integers in thousandths (`1250` = 1.25) so rates, and the end times computed
//! from them, are exact integer arithmetic and the same on every machine.

use serde::{Deserialize, Serialize};

use crate::{JobId, MachineShape, NodeId, PeId};

/// A slowdown factor in thousandths: `1000` runs at full speed, `1250` takes 25 % longer.
pub type Milli = u32;

/// Table 4 of the seed: the share of jobs (or job pairs) whose slowdown falls in each of the
/// bins `[0.9, 1.0)`, `[1.0, 1.1)`, … `[1.7, 1.8)`, in percent.
pub const TABLE4_CRS: [u32; 9] = [0, 25, 17, 17, 13, 17, 8, 3, 0];
pub const TABLE4_NOS: [u32; 9] = [25, 45, 12, 5, 13, 0, 0, 0, 0];
pub const TABLE4_COS: [u32; 9] = [0, 68, 17, 7, 3, 2, 1, 1, 1];

/// The slowdown model of one run: every job's SL_crs and SL_nos and every ordered pair's
/// SL_cos, drawn from Table 4 by hashing the seed with the job ids. Drawing by hash instead of
/// from a stream means a job's slowdowns do not depend on which other jobs exist or in which
/// order anyone asks, so the workload transformation, the policy and the engine agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Slowdowns {
    pub seed: u64,
}

/// SplitMix64: a small, well-mixed hash for deterministic draws.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A draw from a Table 4 row: a bin by its share, then a value uniform in the bin, to the
/// thousandth.
fn draw(table: &[u32; 9], h: u64) -> Milli {
    let total: u32 = table.iter().sum();
    let mut pick = (h % u64::from(total)) as u32;
    let within = ((h >> 32) % 100) as u32;
    for (bin, &share) in table.iter().enumerate() {
        if pick < share {
            return 900 + 100 * bin as u32 + within;
        }
        pick -= share;
    }
    unreachable!("pick < total")
}

impl Slowdowns {
    pub const fn new(seed: u64) -> Slowdowns {
        Slowdowns { seed }
    }
    fn hash(&self, tag: u64, a: JobId, b: JobId) -> u64 {
        mix(mix(mix(self.seed ^ tag).wrapping_add(a.0)).wrapping_add(b.0))
    }
    /// Core self-slowdown: two processes of the job on the two cores of one processor.
    pub fn crs(&self, job: JobId) -> Milli {
        draw(&TABLE4_CRS, self.hash(1, job, job))
    }
    /// Node self-slowdown: two processes of the job on two processors of one node.
    pub fn nos(&self, job: JobId) -> Milli {
        draw(&TABLE4_NOS, self.hash(2, job, job))
    }
    /// Coscheduling slowdown of `job` when `with`'s processes share its nodes.
    pub fn cos(&self, job: JobId, with: JobId) -> Milli {
        draw(&TABLE4_COS, self.hash(3, job, with))
    }
    /// Self-slowdown of `job` with `ppn` of its processes on a node laid out as in Fig. 12
    /// (a job's processes on different processors first): 1 alone, SL_nos for one per
    /// processor, SL_nos · SL_crs once processors hold two of them.
    pub fn self_slowdown(&self, job: JobId, ppn: u32, sockets: u32) -> Milli {
        match ppn {
            0 | 1 => 1000,
            p if p <= sockets => self.nos(job),
            _ => mul(self.nos(job), self.crs(job)),
        }
    }
}

/// The product of two slowdowns, rounded to the thousandth.
pub const fn mul(a: Milli, b: Milli) -> Milli {
    ((a as u64 * b as u64 + 500) / 1000) as Milli
}

/// The thresholds of formulas 7 and 11 (Table 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfLimits {
    /// MAX_SL: the most slowdown a job tolerates (1.25).
    pub max_sl: Milli,
    /// SELF_SL_2: the most self-slowdown tolerated with two processes per node (1.12).
    pub self_sl_2: Milli,
}

impl Default for SelfLimits {
    fn default() -> Self {
        SelfLimits {
            max_sl: 1250,
            self_sl_2: 1120,
        }
    }
}

impl SelfLimits {
    /// Formula 11: processes per node under space sharing (1, 2 or 4 on the seed's nodes;
    /// `pes_per_node` in general, and 2 stands for "one per processor").
    pub fn ppn(&self, size: u32, crs: Milli, nos: Milli, pes_per_node: u32, sockets: u32) -> u32 {
        if size <= 1 {
            1
        } else if mul(crs, nos) <= self.max_sl {
            pes_per_node
        } else if nos <= self.self_sl_2 {
            sockets.max(1)
        } else {
            1
        }
    }

    /// Formula 7: a job's process count on the multi-core machine. Its runtime stays; its size
    /// grows by the processes per node it can use, divided by the slowdown that costs
    /// (rounded to the nearest process, never below the original size nor above its size
    /// times the processes per node, so it fits on as many nodes as at its original size).
    pub fn transform_size(&self, size: u32, crs: Milli, nos: Milli) -> u32 {
        let scaled = |factor: u64, sl: Milli| -> u32 {
            let v = (u64::from(size) * factor * 1000 + u64::from(sl) / 2) / u64::from(sl);
            // A speed-up (slowdown below 1) does not make more processes fit on a node.
            (v.min(u64::from(size) * factor) as u32).max(size)
        };
        if size <= 1 {
            size
        } else if mul(crs, nos) <= self.max_sl {
            scaled(4, mul(crs, nos))
        } else if nos <= self.self_sl_2 {
            scaled(2, nos)
        } else {
            size
        }
    }
}

/// Where on a node a job's processes go (Fig. 12). A node's cores form two *lanes*: lane `l`
/// is core `l` of every processor. A job alone with one process per processor or fewer takes
/// core 0 of the first `ppn` processors; a second job takes the other lane, so processes of
/// one job sit on different processors and processes of different jobs share a processor
/// (the seed's simplification, §4.10). A job with more processes than processors takes
/// whole lanes, all of them at `pes_per_node`.
impl MachineShape {
    /// The cores of `node` that a job with `ppn` processes there takes, starting at lane
    /// `lane`.
    pub fn node_cores(&self, node: NodeId, ppn: u32, lane: u32) -> Vec<PeId> {
        let base = node.0 * self.pes_per_node();
        let sockets = self.sockets_per_node;
        let mut v = Vec::with_capacity(ppn as usize);
        for k in 0..ppn.min(self.pes_per_node()) {
            let (l, s) = (lane + k / sockets, k % sockets);
            v.push(PeId(
                base + s * self.cores_per_socket + l % self.cores_per_socket,
            ));
        }
        v.sort_unstable();
        v
    }

    /// Lane of a core within its processor.
    pub const fn lane_of(&self, pe: PeId) -> u32 {
        pe.0 % self.cores_per_socket
    }
}

/// How a job sits on one node, for its slowdown there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeShare {
    /// Its processes on the node.
    pub ppn: u32,
    /// The other job on the node, if any.
    pub partner: Option<JobId>,
}

impl Slowdowns {
    /// Slowdown of `job` on one node: its self-slowdown times the coscheduling slowdown its
    /// partner causes.
    pub fn on_node(&self, job: JobId, share: NodeShare, sockets: u32) -> Milli {
        let own = self.self_slowdown(job, share.ppn, sockets);
        match share.partner {
            Some(p) => mul(own, self.cos(job, p)),
            None => own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_table4_and_are_deterministic() {
        let s = Slowdowns::new(7);
        let n = 20_000u64;
        let mut bins = [[0u32; 9]; 3];
        for j in 0..n {
            let id = JobId(j);
            assert_eq!(s.crs(id), Slowdowns::new(7).crs(id));
            for (k, v) in [s.crs(id), s.nos(id), s.cos(id, JobId(j + 1))]
                .into_iter()
                .enumerate()
            {
                assert!((900..1800).contains(&v), "{v}");
                bins[k][((v - 900) / 100) as usize] += 1;
            }
        }
        for (k, table) in [TABLE4_CRS, TABLE4_NOS, TABLE4_COS].iter().enumerate() {
            for b in 0..9 {
                let got = f64::from(bins[k][b]) * 100.0 / n as f64;
                assert!(
                    (got - f64::from(table[b])).abs() < 1.0,
                    "row {k} bin {b}: {got}"
                );
            }
        }
        assert_ne!(s.cos(JobId(1), JobId(2)), s.cos(JobId(2), JobId(1)));
    }

    #[test]
    fn formulas_7_and_11() {
        let l = SelfLimits::default();
        // Serial jobs never grow and use one core.
        assert_eq!(l.transform_size(1, 1000, 1000), 1);
        assert_eq!(l.ppn(1, 1000, 1000, 4, 2), 1);
        // SL_crs · SL_nos = 1.1 ≤ 1.25: four per node, size × 4 / 1.1.
        assert_eq!(l.ppn(8, 1100, 1000, 4, 2), 4);
        assert_eq!(l.transform_size(8, 1100, 1000), 29);
        // 1.3 · 1.05 > 1.25 but SL_nos = 1.05 ≤ 1.12: two per node, size × 2 / 1.05.
        assert_eq!(l.ppn(8, 1300, 1050, 4, 2), 2);
        assert_eq!(l.transform_size(8, 1300, 1050), 15);
        // Both too slow: unchanged, one per node.
        assert_eq!(l.ppn(8, 1300, 1200, 4, 2), 1);
        assert_eq!(l.transform_size(8, 1300, 1200), 8);
    }

    #[test]
    fn layout_puts_a_jobs_processes_on_different_processors() {
        let m = MachineShape {
            nodes: 4,
            sockets_per_node: 2,
            cores_per_socket: 2,
            mem_per_node_mib: None,
        };
        // Node 1 holds PEs 4..8: processor 0 = {4, 5}, processor 1 = {6, 7}.
        assert_eq!(m.node_cores(NodeId(1), 1, 0), vec![PeId(4)]);
        assert_eq!(m.node_cores(NodeId(1), 2, 0), vec![PeId(4), PeId(6)]);
        assert_eq!(m.node_cores(NodeId(1), 2, 1), vec![PeId(5), PeId(7)]);
        assert_eq!(m.node_cores(NodeId(1), 1, 1), vec![PeId(5)]);
        assert_eq!(
            m.node_cores(NodeId(1), 4, 0),
            vec![PeId(4), PeId(5), PeId(6), PeId(7)]
        );
        let s = Slowdowns::new(3);
        let j = JobId(9);
        assert_eq!(s.self_slowdown(j, 1, 2), 1000);
        assert_eq!(s.self_slowdown(j, 2, 2), s.nos(j));
        assert_eq!(s.self_slowdown(j, 4, 2), mul(s.nos(j), s.crs(j)));
        let share = NodeShare {
            ppn: 2,
            partner: Some(JobId(4)),
        };
        assert_eq!(s.on_node(j, share, 2), mul(s.nos(j), s.cos(j, JobId(4))));
    }
}
