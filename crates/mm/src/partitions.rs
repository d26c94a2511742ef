//! Partitions and node features (the configuration's `[[partitions]]` and `[[nodes]]
//! features`): which nodes a job may use by its `--partition` and `--constraint`, and the
//! limits its partition sets. Pure: nodes by name; the core turns the nodes a job may not
//! use into nodes its [`cosched_policy::Spread`] excludes.
//!
//! Where the restriction lives: the policies see the machine whole, as the simulator does,
//! and a restricted job carries its allowed nodes in its spread, the one rule every
//! node-aware policy and the ledger already ask. A job that names no partition and no
//! constraint on a cluster whose default partition is every node (every cluster without a
//! configuration) has no restriction, hence no spread: it is scheduled exactly as the
//! simulator schedules it.

use std::collections::BTreeMap;

use cosched_core::{Dur, NodeId};
use cosched_proto::config::{ClusterConfig, Partition};
use cosched_proto::proto::{NodeLayout, PartitionInfo};
use cosched_slurm::constraint::Constraint;

use super::core::Core;

/// The partitions and the nodes' features, by node name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partitions {
    /// As configured; empty: one partition of every node (`all`), the default.
    pub parts: Vec<Partition>,
    /// Each configured node's features.
    pub features: BTreeMap<String, Vec<String>>,
}

/// What of a job's options bears on where it may run.
#[derive(Clone, Copy, Debug, Default)]
pub struct JobPlace<'a> {
    /// `--partition`.
    pub partition: Option<&'a str>,
    /// `--constraint`.
    pub constraint: Option<&'a str>,
    pub time_limit: Option<Dur>,
    /// `-N`.
    pub nodes_asked: Option<u32>,
    /// `--nodelist`, by name.
    pub required: &'a [String],
}

/// Where a job may run, as its options and the configuration say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restriction {
    /// Its partition's name, or its list's names (`a,b`) without the partitions whose
    /// limits it exceeds.
    pub partition: String,
    /// Whether it may use every node (then it needs no spread for this).
    pub whole: bool,
}

impl Partitions {
    /// The configuration's.
    pub fn of(conf: &ClusterConfig) -> Partitions {
        Partitions {
            parts: conf.partitions.clone(),
            features: conf
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.features.clone()))
                .collect(),
        }
    }

    /// The partitions a job asking for `asked` may run in (`None`: none named; `a,b`: a
    /// list, Slurm's "whichever can start it first"), in the list's order without repeats;
    /// empty for the one partition of a cluster that configures none. Refused, naming the
    /// partitions there are, when it names another or names none and no partition is the
    /// default.
    pub fn resolve(&self, asked: Option<&str>) -> Result<Vec<&Partition>, String> {
        let known = || {
            if self.parts.is_empty() {
                cosched_slurm::DEFAULT_PARTITION.to_string()
            } else {
                self.parts
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let Some(list) = asked else {
            if self.parts.is_empty() {
                return Ok(Vec::new());
            }
            return self
                .parts
                .iter()
                .find(|p| p.default)
                .map(|p| vec![p])
                .ok_or_else(|| {
                    format!(
                        "no partition specified and none is the default; name one with -p ({})",
                        known()
                    )
                });
        };
        let mut out: Vec<&Partition> = Vec::new();
        for name in list.split(',') {
            if name.is_empty() {
                return Err(format!(
                    "--partition={list}: an empty name in the list; name partitions of {}",
                    known()
                ));
            }
            if self.parts.is_empty() && name == cosched_slurm::DEFAULT_PARTITION {
                continue;
            }
            let p = self.parts.iter().find(|p| p.name == name).ok_or_else(|| {
                format!(
                    "invalid partition specified: {name}; the partitions are {}",
                    known()
                )
            })?;
            if !out.iter().any(|q| q.name == p.name) {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// The partition of its list a job placed on `nodes` (names) runs in: the first listed
    /// one that holds all of them, else the first that holds its first node (the policy
    /// may place a job of a list across partitions: see docs/slurm.md); a single name, or a
    /// job not placed yet, is `list` itself.
    pub fn ran_in<'a>(&self, list: &'a str, nodes: &[&str]) -> &'a str {
        let Some(first) = nodes.first().filter(|_| list.contains(',')) else {
            return list;
        };
        let holds = |name: &str, node: &str| {
            self.parts
                .iter()
                .any(|p| p.name == name && p.nodes.iter().any(|m| m == node))
        };
        let mut names = list.split(',');
        names
            .clone()
            .find(|p| nodes.iter().all(|n| holds(p, n)))
            .or_else(|| names.find(|p| holds(p, first)))
            .unwrap_or(list)
    }

    /// Where a job with these options may run, given the machine's nodes by name (`nodes`):
    /// its partition (or list), and whether `allowed` (which it fills) is every node. Refused, saying
    /// why, when the partition is unknown, a limit of it is exceeded (`time_limit`,
    /// `nodes_asked`), the constraint is malformed, no node of the partition has the
    /// features, or a node the job requires (`--nodelist`) is not among those it may use.
    pub fn restrict<'a>(
        &self,
        nodes: &[&'a str],
        job: &JobPlace,
        allowed: &mut Vec<&'a str>,
    ) -> Result<Restriction, String> {
        let JobPlace {
            partition,
            constraint,
            time_limit,
            nodes_asked,
            required,
        } = *job;
        let listed = self.resolve(partition)?;
        // A listed partition whose limits the job exceeds is left out of its list, as
        // Slurm's EnforcePartLimits=ANY; refused when every one is.
        let mut exceeded = Vec::new();
        let parts: Vec<&Partition> = listed
            .iter()
            .copied()
            .filter(|p| match over_limits(p, time_limit, nodes_asked) {
                Some(why) => {
                    exceeded.push(why);
                    false
                }
                None => true,
            })
            .collect();
        if parts.is_empty() && !exceeded.is_empty() {
            return Err(exceeded.join("; "));
        }
        let name = if parts.is_empty() {
            cosched_slurm::DEFAULT_PARTITION.to_string()
        } else {
            parts
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let constraint = constraint
            .map(Constraint::parse)
            .transpose()
            .map_err(|e| e.to_string())?;
        if parts.is_empty() && constraint.is_none() {
            // Every node, also those not registered yet.
            allowed.clear();
            allowed.extend_from_slice(nodes);
            return Ok(Restriction {
                partition: name,
                whole: true,
            });
        }
        let no_features: Vec<String> = Vec::new();
        // A list's nodes are the union of its partitions'.
        let in_parts =
            |n: &str| parts.is_empty() || parts.iter().any(|p| p.nodes.iter().any(|m| m == n));
        allowed.clear();
        allowed.extend(nodes.iter().copied().filter(|n| {
            in_parts(n)
                && constraint
                    .as_ref()
                    .is_none_or(|c| c.admits(self.features.get(*n).unwrap_or(&no_features)))
        }));
        // An unknown node is the spread's to refuse, naming the nodes there are.
        if let Some(n) = required
            .iter()
            .find(|n| nodes.contains(&n.as_str()) && !allowed.contains(&n.as_str()))
        {
            let in_partition = in_parts(n);
            return Err(if in_partition {
                format!("--nodelist: node {n} lacks the features --constraint asks")
            } else {
                format!("--nodelist: node {n} is not in partition {name}")
            });
        }
        if allowed.is_empty() {
            return Err(match &constraint {
                Some(c) => format!(
                    "Requested node configuration is not available: no node of partition {name} has the features --constraint asks ({})",
                    c.features().join(", ")
                ),
                None => format!("partition {name} has none of the machine's nodes"),
            });
        }
        Ok(Restriction {
            partition: name,
            whole: allowed.len() == nodes.len(),
        })
    }
}

/// Why a job with this time limit and `-N` exceeds partition `p`'s limits; `None` when it
/// does not.
fn over_limits(p: &Partition, time_limit: Option<Dur>, nodes_asked: Option<u32>) -> Option<String> {
    let name = &p.name;
    if let (Some(max), Some(t)) = (p.max_time, time_limit)
        && t > max
    {
        return Some(format!(
            "the time limit {t} exceeds partition {name}'s limit of {max}; ask at most -t {max}"
        ));
    }
    if let (Some(max), Some(n)) = (p.max_nodes, nodes_asked)
        && n > max
    {
        return Some(format!(
            "-N {n} exceeds partition {name}'s limit of {max} nodes"
        ));
    }
    None
}

/// `--exclusive`: how many whole nodes of `per` PEs a job of `procs` PEs laid out by `l`
/// takes (`-N`, else as many as its tasks need). A job with a script (`batch`: sbatch,
/// salloc) is an allocation whose steps place their tasks within the nodes; a job without
/// one is an allocation and its one step, whose ranks are its tasks, at least one on each
/// node.
pub fn whole_nodes(l: &NodeLayout, procs: u32, per: u32, batch: bool) -> Result<u32, String> {
    let c = l.cpus_per_task.unwrap_or(1).max(1);
    let tasks = procs / c;
    // Tasks a node holds.
    let fit = (per / c).min(l.tasks_per_node.unwrap_or(u32::MAX));
    if fit == 0 {
        return Err(format!("--cpus-per-task={c}: a node has {per} PEs"));
    }
    let need = tasks.div_ceil(fit).max(l.nodelist.len() as u32).max(1);
    match l.nodes {
        Some(n) if n < need => Err(format!(
            "{tasks} tasks do not fit on {n} whole nodes of {per} PEs"
        )),
        Some(n) if !batch && tasks < n => Err(format!(
            "-n {tasks} cannot cover {n} whole nodes: a job without a script runs a task on \
             each of its nodes; ask -n {n} or more, or -N {tasks}"
        )),
        Some(n) => Ok(n),
        None => Ok(need),
    }
}

impl Core {
    /// The configuration's partitions and node features (the shell gives them once the
    /// core is made; a core without them has one partition of every node).
    pub fn set_partitions(&mut self, p: Partitions) {
        self.partitions = p;
    }

    /// Where a job laid out by `l` with this time limit may run: its partition, and the
    /// nodes it may not use (empty when it may use every node). Refused, saying why.
    pub(super) fn restriction(
        &self,
        l: &NodeLayout,
        time_limit: Option<Dur>,
    ) -> Result<(String, Vec<NodeId>), String> {
        let live = || self.nodes.iter().filter(|e| !e.removed);
        let names: Vec<&str> = live().map(|e| e.row.name.as_str()).collect();
        let job = JobPlace {
            partition: l.partition.as_deref(),
            constraint: l.constraint.as_deref(),
            time_limit,
            nodes_asked: l.nodes,
            required: &l.nodelist,
        };
        let mut allowed = Vec::new();
        let r = self.partitions.restrict(&names, &job, &mut allowed)?;
        let outside = if r.whole {
            Vec::new()
        } else {
            live()
                .filter(|e| !allowed.contains(&e.row.name.as_str()))
                .map(|e| e.row.id)
                .collect()
        };
        Ok((r.partition, outside))
    }

    /// The partition job `i` runs (or ran) in: the one of its list whose nodes it got, its
    /// list while it waits (see [`Partitions::ran_in`]).
    pub(super) fn partition_of(&self, i: cosched_ledger::Ix) -> Option<String> {
        let s = &self.side[i];
        let list = s.partition.as_deref()?;
        let names: Vec<String> = s.placement.iter().map(|p| self.node_name(p.node)).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Some(self.partitions.ran_in(list, &names).to_string())
    }

    /// The partitions as clients see them; empty without a configuration.
    pub(super) fn partition_infos(&self) -> Vec<PartitionInfo> {
        self.partitions
            .parts
            .iter()
            .map(|p| PartitionInfo {
                name: p.name.clone(),
                nodes: p.nodes.clone(),
                default: p.default,
                max_time_us: p.max_time.map(|d| d.as_micros()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> Partitions {
        let part = |name: &str, nodes: &[&str], default: bool| Partition {
            name: name.into(),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            default,
            max_time: Some(Dur::from_secs(3600)),
            max_nodes: None,
        };
        Partitions {
            parts: vec![
                part("batch", &["n0", "n1"], true),
                part("big", &["n1", "n2"], false),
            ],
            features: [("n1", vec!["ib"]), ("n2", vec!["ib", "big"])]
                .into_iter()
                .map(|(n, f)| (n.to_string(), f.into_iter().map(String::from).collect()))
                .collect(),
        }
    }

    const NODES: &[&str] = &["n0", "n1", "n2"];

    fn allowed(p: &Partitions, part: Option<&str>, c: Option<&str>) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let job = JobPlace {
            partition: part,
            constraint: c,
            ..JobPlace::default()
        };
        p.restrict(NODES, &job, &mut out)?;
        Ok(out.into_iter().map(String::from).collect())
    }

    #[test]
    fn a_job_runs_in_its_partition_or_the_default_on_nodes_with_its_features() {
        let p = parts();
        assert_eq!(allowed(&p, None, None).unwrap(), ["n0", "n1"]);
        assert_eq!(allowed(&p, Some("big"), None).unwrap(), ["n1", "n2"]);
        assert_eq!(allowed(&p, Some("big"), Some("big")).unwrap(), ["n2"]);
        assert_eq!(allowed(&p, Some("batch"), Some("ib|big")).unwrap(), ["n1"]);
        let e = allowed(&p, None, Some("big")).unwrap_err();
        assert!(
            e.contains("no node of partition batch has the features"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_partition_is_refused_naming_the_known_ones() {
        let p = parts();
        let e = allowed(&p, Some("gpu"), None).unwrap_err();
        assert!(e.contains("gpu") && e.contains("batch, big"), "{e}");
        // Without a configuration: `all`, every node, and no other name.
        let none = Partitions::default();
        let mut out = Vec::new();
        let r = none
            .restrict(NODES, &JobPlace::default(), &mut out)
            .unwrap();
        assert_eq!((r.partition.as_str(), r.whole), ("all", true));
        assert!(allowed(&none, Some("all"), None).unwrap().len() == 3);
        let e = allowed(&none, Some("gpu"), None).unwrap_err();
        assert!(e.contains("the partitions are all"), "{e}");
        let e = allowed(&none, None, Some("ib")).unwrap_err();
        assert!(
            e.contains("no node of partition all has the features"),
            "{e}"
        );
    }

    #[test]
    fn a_partition_list_is_the_union_of_its_partitions_and_runs_in_the_one_whose_nodes_it_got() {
        let p = parts();
        assert_eq!(
            allowed(&p, Some("batch,big"), None).unwrap(),
            ["n0", "n1", "n2"]
        );
        assert_eq!(
            allowed(&p, Some("big,batch,big"), Some("ib")).unwrap(),
            ["n1", "n2"]
        );
        let mut out = Vec::new();
        let job = JobPlace {
            partition: Some("big,batch,big"),
            ..JobPlace::default()
        };
        let r = p.restrict(NODES, &job, &mut out).unwrap();
        assert_eq!(r.partition, "big,batch");
        let e = allowed(&p, Some("batch,gpu"), None).unwrap_err();
        assert!(e.contains("invalid partition specified: gpu"), "{e}");
        assert!(
            allowed(&p, Some("batch,"), None)
                .unwrap_err()
                .contains("empty name")
        );
        // The first listed partition that holds all its nodes, else the first holding its
        // first node; one name, or no nodes yet, is the list.
        assert_eq!(p.ran_in("batch,big", &["n1", "n2"]), "big");
        assert_eq!(p.ran_in("batch,big", &["n1"]), "batch");
        assert_eq!(p.ran_in("batch,big", &["n0", "n2"]), "batch");
        assert_eq!(p.ran_in("big,batch", &["n0", "n2"]), "batch");
        assert_eq!(p.ran_in("batch,big", &[]), "batch,big");
        assert_eq!(p.ran_in("big", &["n0"]), "big");
    }

    #[test]
    fn a_listed_partition_whose_limits_the_job_exceeds_is_left_out_of_its_list() {
        let mut p = parts();
        p.parts[1].max_time = None;
        let mut out = Vec::new();
        let job = JobPlace {
            partition: Some("batch,big"),
            time_limit: Some(Dur::from_secs(7200)),
            ..JobPlace::default()
        };
        let r = p.restrict(NODES, &job, &mut out).unwrap();
        assert_eq!((r.partition.as_str(), &out[..]), ("big", &["n1", "n2"][..]));
        p.parts[1].max_time = Some(Dur::from_secs(60));
        let e = p.restrict(NODES, &job, &mut out).unwrap_err();
        assert!(
            e.contains("partition batch's limit") && e.contains("partition big's limit"),
            "{e}"
        );
    }

    #[test]
    fn a_partitions_limits_are_refused_at_submission() {
        let p = parts();
        let mut out = Vec::new();
        let long = JobPlace {
            time_limit: Some(Dur::from_secs(7200)),
            ..JobPlace::default()
        };
        let e = p.restrict(NODES, &long, &mut out).unwrap_err();
        assert!(e.contains("partition batch's limit"), "{e}");
    }

    #[test]
    fn an_exclusive_allocation_takes_the_whole_nodes_its_tasks_need() {
        let l = |nodes: Option<u32>, c: Option<u32>| NodeLayout {
            nodes,
            cpus_per_task: c,
            exclusive: true,
            ..NodeLayout::default()
        };
        assert_eq!(whole_nodes(&l(None, None), 1, 4, true), Ok(1));
        assert_eq!(whole_nodes(&l(None, None), 5, 4, true), Ok(2));
        // 3 tasks of 2 PEs on nodes of 3: one task a node.
        assert_eq!(whole_nodes(&l(None, Some(2)), 6, 3, true), Ok(3));
        assert_eq!(whole_nodes(&l(Some(3), None), 1, 4, true), Ok(3));
        assert!(whole_nodes(&l(Some(1), None), 5, 4, true).is_err());
        // Without a script, its ranks are the tasks: one on each node at least.
        assert_eq!(whole_nodes(&l(None, None), 5, 4, false), Ok(2));
        assert!(
            whole_nodes(&l(Some(3), None), 2, 4, false)
                .unwrap_err()
                .contains("cannot cover 3 whole nodes")
        );
    }

    #[test]
    fn a_required_node_outside_the_partition_or_without_the_features_is_refused() {
        let p = parts();
        let mut out = Vec::new();
        let required = ["n2".to_string()];
        let job = JobPlace {
            required: &required,
            ..JobPlace::default()
        };
        let e = p.restrict(NODES, &job, &mut out).unwrap_err();
        assert_eq!(e, "--nodelist: node n2 is not in partition batch");
        let job = JobPlace {
            partition: Some("big"),
            constraint: Some("big"),
            required: &["n1".to_string()],
            ..JobPlace::default()
        };
        let e = p.restrict(NODES, &job, &mut out).unwrap_err();
        assert!(e.contains("node n1 lacks the features"), "{e}");
    }
}
