//! `sinfo`'s output: a line per partition and node state (or, with `-N`, per node), its
//! default formats, `-o` fields (`%[.][size]type[suffix]`) and `-O` long names. In the
//! default formats the partition and node list columns are as wide as their widest value
//! (at least 9), as Slurm computes them.

use thiserror::Error;

use crate::hostlist;
use crate::node::{NodeState, NodeView, PartitionView};
use crate::spec::{self, Spec};
use crate::time;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SinfoError {
    #[error("Invalid node format specification: {0}")]
    Field(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Avail,
    Cpus,
    CpusState,
    Features,
    Gres,
    JobSize,
    Memory,
    NodeAddr,
    NodeHost,
    NodeList,
    Nodes,
    NodesAi,
    NodesAiot,
    Partition,
    PartitionName,
    Reason,
    StateCompact,
    StateLong,
    Time,
}

/// `(letter, long name, header, field)`.
const FIELDS: &[(Option<char>, &str, &str, Field)] = &[
    (Some('a'), "available", "AVAIL", Field::Avail),
    (Some('A'), "nodeai", "NODES(A/I)", Field::NodesAi),
    (Some('c'), "cpus", "CPUS", Field::Cpus),
    (Some('C'), "cpusstate", "CPUS(A/I/O/T)", Field::CpusState),
    (Some('D'), "nodes", "NODES", Field::Nodes),
    (Some('E'), "reason", "REASON", Field::Reason),
    (Some('f'), "features", "AVAIL_FEATURES", Field::Features),
    (Some('F'), "nodeaiot", "NODES(A/I/O/T)", Field::NodesAiot),
    (Some('G'), "gres", "GRES", Field::Gres),
    (Some('l'), "time", "TIMELIMIT", Field::Time),
    (Some('m'), "memory", "MEMORY", Field::Memory),
    (Some('n'), "nodehost", "HOSTNAMES", Field::NodeHost),
    (Some('N'), "nodelist", "NODELIST", Field::NodeList),
    (Some('o'), "nodeaddr", "NODE_ADDR", Field::NodeAddr),
    (Some('P'), "partition", "PARTITION", Field::Partition),
    (
        Some('R'),
        "partitionname",
        "PARTITION",
        Field::PartitionName,
    ),
    (Some('s'), "size", "JOB_SIZE", Field::JobSize),
    (Some('t'), "statecompact", "STATE", Field::StateCompact),
    (Some('T'), "statelong", "STATE", Field::StateLong),
];

/// `sinfo` alone.
pub const DEFAULT: &str =
    "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statecompact:.6 ,nodelist:0";
/// `sinfo -N`.
pub const NODES: &str = "nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6";
/// `sinfo -l`.
pub const LONG: &str = "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statelong:.11 ,nodelist:0";
/// `sinfo -N -l`.
pub const NODES_LONG: &str =
    "nodelist:0 ,nodes:.6 ,partition:.9 ,statelong:.11 ,cpus:4 ,memory:.6 ,reason:20";

/// A parsed output format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    prefix: String,
    items: Vec<Spec<Field>>,
    /// The default formats size the partition column to its values, and with `-N` the
    /// node list column too.
    auto_part: bool,
    auto_node: bool,
}

impl Format {
    /// One of the default formats ([`DEFAULT`], [`NODES`], …), columns sized to the values
    /// as Slurm sizes them (the node list only per node).
    pub fn default_of(long: &str, per_node: bool) -> Format {
        Format {
            auto_part: true,
            auto_node: per_node,
            ..Format::long(long).expect("the default formats parse")
        }
    }

    /// `-o`: `%[.][size]type[suffix]`.
    pub fn short(fmt: &str) -> Result<Format, SinfoError> {
        let (prefix, specs) = spec::percent(fmt).map_err(SinfoError::Field)?;
        let items = specs
            .into_iter()
            .map(|s| {
                let field = FIELDS
                    .iter()
                    .find(|f| f.0 == Some(s.key))
                    .map(|f| f.3)
                    .ok_or_else(|| SinfoError::Field(s.key.to_string()))?;
                Ok(s.with_key(field))
            })
            .collect::<Result<_, SinfoError>>()?;
        Ok(Format {
            prefix,
            items,
            auto_part: false,
            auto_node: false,
        })
    }

    /// `-O`: `type[:[.][size][suffix]]`, comma-separated (20 wide without a size).
    pub fn long(fmt: &str) -> Result<Format, SinfoError> {
        let items = spec::named(fmt)
            .into_iter()
            .map(|s| {
                let field = FIELDS
                    .iter()
                    .find(|f| f.1.eq_ignore_ascii_case(&s.key))
                    .map(|f| f.3)
                    .ok_or_else(|| SinfoError::Field(s.key.clone()))?;
                Ok(s.with_key(field))
            })
            .collect::<Result<_, SinfoError>>()?;
        Ok(Format {
            prefix: String::new(),
            items,
            auto_part: false,
            auto_node: false,
        })
    }
}

/// One line: a partition and nodes of one state (or one node).
#[derive(Clone, Debug)]
pub struct Row<'a> {
    pub partition: &'a PartitionView,
    pub nodes: Vec<&'a NodeView>,
}

impl Row<'_> {
    fn state(&self) -> Option<NodeState> {
        self.nodes.first().map(|n| n.state)
    }
}

/// The lines: per partition, its nodes grouped by state in order of first appearance; with
/// `per_node`, one line per node of each partition.
pub fn rows<'a>(parts: &'a [PartitionView], nodes: &'a [NodeView], per_node: bool) -> Vec<Row<'a>> {
    let mut out = Vec::new();
    for p in parts {
        let mine = nodes.iter().filter(|n| p.nodes.contains(&n.name));
        if per_node {
            out.extend(mine.map(|n| Row {
                partition: p,
                nodes: vec![n],
            }));
            continue;
        }
        let mut groups: Vec<Row> = Vec::new();
        for n in mine {
            match groups.iter_mut().find(|g| g.state() == Some(n.state)) {
                Some(g) => g.nodes.push(n),
                None => groups.push(Row {
                    partition: p,
                    nodes: vec![n],
                }),
            }
        }
        if groups.is_empty() {
            groups.push(Row {
                partition: p,
                nodes: Vec::new(),
            });
        }
        out.extend(groups);
    }
    out
}

/// The lines `sinfo` prints (with the header unless `noheader`).
pub fn render(format: &Format, rows: &[Row], noheader: bool) -> Vec<String> {
    let node_width = rows
        .iter()
        .map(|r| node_list(r).len())
        .chain([9])
        .max()
        .unwrap_or(9);
    let part_width = rows
        .iter()
        .map(|r| r.partition.name.len() + usize::from(r.partition.default))
        .chain([9])
        .max()
        .unwrap_or(9);
    let width_of = |item: &Spec<Field>| match item.key {
        Field::NodeList | Field::NodeHost if format.auto_node => node_width,
        Field::Partition | Field::PartitionName if format.auto_part => part_width,
        _ => item.width,
    };
    let line = |cell: &dyn Fn(Field) -> String| {
        let mut out = format.prefix.clone();
        for item in &format.items {
            out += &spec::fit(&cell(item.key), width_of(item), item.right, true);
            out += &item.suffix;
        }
        out
    };
    let mut out = Vec::new();
    if !noheader {
        out.push(line(&|f| {
            FIELDS
                .iter()
                .find(|e| e.3 == f)
                .map_or("", |e| e.2)
                .to_string()
        }));
    }
    for r in rows {
        out.push(line(&|f| value(f, r)));
    }
    out
}

fn node_list(r: &Row) -> String {
    hostlist::compress(&r.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>())
}

fn value(f: Field, r: &Row) -> String {
    let p = r.partition;
    let count = |pred: &dyn Fn(&NodeView) -> bool| r.nodes.iter().filter(|n| pred(n)).count();
    let alloc = count(&|n| matches!(n.state, NodeState::Allocated | NodeState::Mixed));
    let idle = count(&|n| n.state == NodeState::Idle);
    let total = r.nodes.len();
    match f {
        Field::Avail => if p.up { "up" } else { "down" }.into(),
        Field::Cpus => {
            let mut c: Vec<u32> = r.nodes.iter().map(|n| n.cpus).collect();
            c.sort_unstable();
            c.dedup();
            match (c.first(), c.last()) {
                (Some(a), Some(b)) if a != b => format!("{a}+"),
                (Some(a), _) => a.to_string(),
                _ => "0".into(),
            }
        }
        Field::CpusState => {
            let a: u32 = r.nodes.iter().map(|n| n.alloc_cpus).sum();
            let o: u32 = r
                .nodes
                .iter()
                .filter(|n| matches!(n.state, NodeState::Down | NodeState::Unknown))
                .map(|n| n.cpus)
                .sum();
            let t: u32 = r.nodes.iter().map(|n| n.cpus).sum();
            format!("{a}/{}/{o}/{t}", t - a - o)
        }
        Field::Features | Field::Gres => "(null)".into(),
        Field::JobSize => "1-infinite".into(),
        Field::Memory => "1".into(),
        Field::NodeAddr => {
            let a: Vec<&str> = r.nodes.iter().map(|n| n.addr.as_str()).collect();
            a.join(",")
        }
        Field::NodeHost | Field::NodeList => node_list(r),
        Field::Nodes => total.to_string(),
        Field::NodesAi => format!("{alloc}/{idle}"),
        Field::NodesAiot => format!("{alloc}/{idle}/{}/{total}", total - alloc - idle),
        Field::Partition => {
            let star = if p.default { "*" } else { "" };
            format!("{}{star}", p.name)
        }
        Field::PartitionName => p.name.clone(),
        Field::Reason => match r.state() {
            Some(NodeState::Down) => "Not responding".into(),
            _ => "none".into(),
        },
        Field::StateCompact => r.state().map_or("n/a", NodeState::compact).into(),
        Field::StateLong => r.state().map_or("n/a", NodeState::long).into(),
        Field::Time => match p.max_time_secs {
            None => "infinite".into(),
            Some(s) => time::squeue_secs(s as i64),
        },
    }
}
