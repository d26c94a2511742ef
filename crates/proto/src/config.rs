//! The cluster's configuration file (`/etc/cosched/cosched.toml` by default, `--config PATH`
//! anywhere), read by the machine manager, the node managers and the client commands.
//!
//! Pure: [`ClusterConfig::parse`] takes the file's text and returns the checked configuration
//! or an error naming the file, the line and the key ([`ConfigError`]); [`ClusterConfig::load`]
//! only reads the file first. What the file sets is a default: a command-line flag overrides
//! it. The file's form is documented in docs/deploy.md.
//!
//! ```toml
//! cluster = "lab"
//! head = "10.0.0.1:7070"          # where the machine manager listens, and everyone finds it
//! state_dir = "/var/lib/cosched"
//! key = "/etc/cosched/cluster.key"
//! heartbeat = "1s"
//! suspect_after = "10s"
//! down_after = "5m"
//!
//! [scheduler]
//! policy = "gang"
//! mpl = 4
//! options = { packing = "buddy" }
//!
//! [[nodes]]
//! names = "n[01-16]"
//! cores = 4
//! memory = "16G"
//! features = ["ib"]
//!
//! [[partitions]]
//! name = "batch"
//! nodes = "n[01-08]"
//! default = true
//! max_time = "1d"
//! max_nodes = 4
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use cosched_core::Dur;
use serde::Deserialize;
use toml::Spanned;

/// Where the daemons and the commands look for the configuration without `--config`.
pub const DEFAULT_PATH: &str = "/etc/cosched/cosched.toml";

/// The configuration file could not be read, parsed or checked.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration {path}: {cause} (pass --config PATH)")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// Not TOML, a key of the wrong type or one the file may not hold.
    #[error("{path}:{line}: {why}")]
    Syntax {
        path: PathBuf,
        line: usize,
        why: String,
    },
    /// A value that is TOML but makes no sense.
    #[error("{path}:{line}: {key}: {why}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        why: String,
    },
}

/// The checked configuration of a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// The file it was read from (reconfiguration reads it again).
    pub path: PathBuf,
    pub cluster: String,
    /// `HOST:PORT` of the machine manager: where the node managers and clients reach it.
    pub head: Option<String>,
    /// Where the machine manager listens (default: `head`).
    pub listen: Option<String>,
    pub state_dir: Option<PathBuf>,
    /// The cluster key file.
    pub key: Option<PathBuf>,
    pub fanout: Option<u32>,
    pub heartbeat: Option<Dur>,
    pub suspect_after: Option<Dur>,
    pub down_after: Option<Dur>,
    pub kill_wait: Option<Dur>,
    pub keep_jobs: Option<Dur>,
    pub scheduler: Scheduler,
    /// Every node, in the order written.
    pub nodes: Vec<NodeConf>,
    pub partitions: Vec<Partition>,
}

/// The `[scheduler]` table: the policy and its options, as `--policy`, `--mpl`, `--opt`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scheduler {
    pub policy: Option<String>,
    pub mpl: Option<u32>,
    pub quantum: Option<Dur>,
    pub context_switch: Option<Dur>,
    pub requeue: Option<bool>,
    /// The policy's named options as `KEY=VALUE` (what `--opt` takes), in key order.
    pub options: Vec<String>,
}

/// One configured node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConf {
    pub name: String,
    pub cores: u32,
    /// Bytes of memory (`None`: not said).
    pub memory: Option<u64>,
    pub features: Vec<String>,
}

/// A named set of nodes with its limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub name: String,
    pub nodes: Vec<String>,
    pub default: bool,
    pub max_time: Option<Dur>,
    pub max_nodes: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    cluster: Option<Spanned<String>>,
    head: Option<Spanned<String>>,
    listen: Option<Spanned<String>>,
    state_dir: Option<PathBuf>,
    key: Option<PathBuf>,
    fanout: Option<Spanned<u32>>,
    heartbeat: Option<Spanned<String>>,
    suspect_after: Option<Spanned<String>>,
    down_after: Option<Spanned<String>>,
    kill_wait: Option<Spanned<String>>,
    keep_jobs: Option<Spanned<String>>,
    #[serde(default)]
    scheduler: RawScheduler,
    #[serde(default)]
    nodes: Vec<RawNodes>,
    #[serde(default)]
    partitions: Vec<RawPartition>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawScheduler {
    policy: Option<Spanned<String>>,
    mpl: Option<Spanned<u32>>,
    quantum: Option<Spanned<String>>,
    context_switch: Option<Spanned<String>>,
    requeue: Option<bool>,
    #[serde(default)]
    options: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNodes {
    names: Spanned<String>,
    cores: Spanned<u32>,
    memory: Option<Spanned<String>>,
    #[serde(default)]
    features: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    name: Spanned<String>,
    nodes: Spanned<String>,
    default: Option<Spanned<bool>>,
    max_time: Option<Spanned<String>>,
    max_nodes: Option<Spanned<u32>>,
}

/// Turns byte offsets of the file into `file:line` errors.
struct Src<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Src<'_> {
    fn line(&self, span: Range<usize>) -> usize {
        let at = span.start.min(self.text.len());
        self.text[..at].bytes().filter(|&b| b == b'\n').count() + 1
    }

    fn invalid(&self, span: Range<usize>, key: &str, why: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line: self.line(span),
            key: key.to_string(),
            why: why.into(),
        }
    }

    fn dur(&self, v: &Option<Spanned<String>>, key: &str) -> Result<Option<Dur>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let d: Dur = v.get_ref().parse().map_err(|e| {
            self.invalid(
                v.span(),
                key,
                format!("{e} (a duration such as \"500ms\", \"10s\", \"5m\")"),
            )
        })?;
        if d < Dur::ZERO {
            return Err(self.invalid(v.span(), key, "must not be negative"));
        }
        Ok(Some(d))
    }
}

/// A size in bytes: a number, optionally followed by K, M or G (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        Some((i, 't' | 'T')) => (&t[..i], 1 << 40),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            format!("{s:?} is not a size (a positive number of bytes, or with K, M, G, T)")
        })
}

impl ClusterConfig {
    /// Reads and checks the configuration at `path`.
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        ClusterConfig::parse(path, &text)
    }

    /// The configuration a command uses: `explicit` (`--config`) if given, else
    /// `$COSCHED_CONFIG` if set, either of which must exist; else [`DEFAULT_PATH`] if it
    /// exists; else none (the single-machine defaults).
    pub fn find(explicit: Option<&Path>) -> Result<Option<ClusterConfig>, ConfigError> {
        let env = std::env::var_os("COSCHED_CONFIG").map(PathBuf::from);
        match explicit.or(env.as_deref()) {
            Some(p) => ClusterConfig::load(p).map(Some),
            None if Path::new(DEFAULT_PATH).exists() => {
                ClusterConfig::load(Path::new(DEFAULT_PATH)).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Parses and checks `text`, the contents of the file at `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<ClusterConfig, ConfigError> {
        let src = Src { path, text };
        let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_path_buf(),
            line: e.span().map_or(1, |s| src.line(s)),
            why: e.message().trim().to_string(),
        })?;
        let cluster = match raw.cluster {
            Some(c) if c.get_ref().trim().is_empty() => {
                return Err(src.invalid(c.span(), "cluster", "the cluster's name is empty"));
            }
            Some(c) => c.into_inner(),
            None => "cosched".to_string(),
        };
        for (v, key) in [(&raw.head, "head"), (&raw.listen, "listen")] {
            if let Some(v) = v
                && !v.get_ref().contains(':')
            {
                return Err(src.invalid(
                    v.span(),
                    key,
                    format!("{:?} is not HOST:PORT", v.get_ref()),
                ));
            }
        }
        if let Some(f) = &raw.fanout
            && *f.get_ref() == 0
        {
            return Err(src.invalid(f.span(), "fanout", "must be at least 1"));
        }
        let heartbeat = src.dur(&raw.heartbeat, "heartbeat")?;
        if let (Some(d), Some(v)) = (heartbeat, &raw.heartbeat)
            && d == Dur::ZERO
        {
            return Err(src.invalid(v.span(), "heartbeat", "must be positive"));
        }
        let scheduler = scheduler(&src, raw.scheduler)?;
        let nodes = nodes(&src, &raw.nodes)?;
        let partitions = partitions(&src, &raw.partitions, &nodes)?;
        Ok(ClusterConfig {
            path: path.to_path_buf(),
            cluster,
            head: raw.head.map(Spanned::into_inner),
            listen: raw.listen.map(Spanned::into_inner),
            state_dir: raw.state_dir,
            key: raw.key,
            fanout: raw.fanout.map(Spanned::into_inner),
            heartbeat,
            suspect_after: src.dur(&raw.suspect_after, "suspect_after")?,
            down_after: src.dur(&raw.down_after, "down_after")?,
            kill_wait: src.dur(&raw.kill_wait, "kill_wait")?,
            keep_jobs: src.dur(&raw.keep_jobs, "keep_jobs")?,
            scheduler,
            nodes,
            partitions,
        })
    }

    /// The configured node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodeConf> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Cores per node: the machine is a grid of nodes × PEs, so every node has the same
    /// (checked when parsed); `None` without nodes.
    pub fn cores(&self) -> Option<u32> {
        self.nodes.first().map(|n| n.cores)
    }

    /// The node names, in the order written.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }
}

fn scheduler(src: &Src, raw: RawScheduler) -> Result<Scheduler, ConfigError> {
    if let Some(m) = &raw.mpl
        && *m.get_ref() == 0
    {
        return Err(src.invalid(m.span(), "scheduler.mpl", "must be at least 1"));
    }
    Ok(Scheduler {
        policy: raw.policy.map(Spanned::into_inner),
        mpl: raw.mpl.map(Spanned::into_inner),
        quantum: src.dur(&raw.quantum, "scheduler.quantum")?,
        context_switch: src.dur(&raw.context_switch, "scheduler.context_switch")?,
        requeue: raw.requeue,
        // `--opt` reads a value as TOML: each option is written back as TOML.
        options: raw
            .options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    })
}

fn nodes(src: &Src, raw: &[RawNodes]) -> Result<Vec<NodeConf>, ConfigError> {
    let mut out: Vec<NodeConf> = Vec::new();
    let mut seen = BTreeSet::new();
    for (k, r) in raw.iter().enumerate() {
        let key = |field: &str| format!("nodes[{k}].{field}");
        let names = cosched_slurm::hostlist::expand(r.names.get_ref())
            .map_err(|e| src.invalid(r.names.span(), &key("names"), e.to_string()))?;
        if names.is_empty() {
            return Err(src.invalid(r.names.span(), &key("names"), "names no node"));
        }
        let cores = *r.cores.get_ref();
        if cores == 0 {
            return Err(src.invalid(r.cores.span(), &key("cores"), "must be at least 1"));
        }
        if let Some(first) = out.first()
            && first.cores != cores
        {
            return Err(src.invalid(
                r.cores.span(),
                &key("cores"),
                format!(
                    "{cores} cores, but node {} has {}: every node of a cluster has the same number of cores (the machine is a grid of nodes × PEs); give these nodes cores = {} or run them as a separate cluster",
                    first.name, first.cores, first.cores
                ),
            ));
        }
        let memory = match &r.memory {
            Some(m) => Some(
                parse_bytes(m.get_ref()).map_err(|e| src.invalid(m.span(), &key("memory"), e))?,
            ),
            None => None,
        };
        for name in names {
            if !seen.insert(name.clone()) {
                return Err(src.invalid(
                    r.names.span(),
                    &key("names"),
                    format!("node {name} is configured twice"),
                ));
            }
            out.push(NodeConf {
                name,
                cores,
                memory,
                features: r.features.clone(),
            });
        }
    }
    Ok(out)
}

fn partitions(
    src: &Src,
    raw: &[RawPartition],
    nodes: &[NodeConf],
) -> Result<Vec<Partition>, ConfigError> {
    let mut out: Vec<Partition> = Vec::new();
    for (k, r) in raw.iter().enumerate() {
        let key = |field: &str| format!("partitions[{k}].{field}");
        let name = r.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(src.invalid(r.name.span(), &key("name"), "the partition's name is empty"));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(src.invalid(
                r.name.span(),
                &key("name"),
                format!("partition {name} is configured twice"),
            ));
        }
        let members = cosched_slurm::hostlist::expand(r.nodes.get_ref())
            .map_err(|e| src.invalid(r.nodes.span(), &key("nodes"), e.to_string()))?;
        if let Some(stranger) = members
            .iter()
            .find(|m| !nodes.iter().any(|n| &n.name == *m))
        {
            return Err(src.invalid(
                r.nodes.span(),
                &key("nodes"),
                format!("node {stranger} is not configured (add it to a [[nodes]] entry)"),
            ));
        }
        let default = r.default.as_ref().is_some_and(|d| *d.get_ref());
        if let Some(d) = &r.default
            && default
            && let Some(other) = out.iter().find(|p| p.default)
        {
            return Err(src.invalid(
                d.span(),
                &key("default"),
                format!(
                    "partition {} is the default already: one partition is",
                    other.name
                ),
            ));
        }
        let max_nodes = r.max_nodes.as_ref().map(|m| *m.get_ref());
        if let (Some(m), Some(v)) = (max_nodes, &r.max_nodes)
            && (m == 0 || m as usize > members.len())
        {
            return Err(src.invalid(
                v.span(),
                &key("max_nodes"),
                format!(
                    "{m}: must be between 1 and the partition's {} nodes",
                    members.len()
                ),
            ));
        }
        out.push(Partition {
            name,
            nodes: members,
            default,
            max_time: src.dur(&r.max_time, &key("max_time"))?,
            max_nodes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
        ClusterConfig::parse(Path::new("/etc/cosched/cosched.toml"), text)
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    const FULL: &str = r#"cluster = "lab"
head = "10.0.0.1:7070"
state_dir = "/var/lib/cosched"
key = "/etc/cosched/cluster.key"
heartbeat = "1s"
suspect_after = "10s"
down_after = "5m"

[scheduler]
policy = "gang"
mpl = 4
options = { packing = "buddy", large_job = 32 }

[[nodes]]
names = "n[01-03]"
cores = 4
memory = "16G"
features = ["ib"]

[[nodes]]
names = "gpu1"
cores = 4

[[partitions]]
name = "batch"
nodes = "n[01-02]"
default = true
max_time = "1d"
max_nodes = 2
"#;

    #[test]
    fn a_full_file_names_its_nodes_in_order_with_their_limits() {
        let c = parse(FULL).unwrap();
        assert_eq!(c.cluster, "lab");
        assert_eq!(c.head.as_deref(), Some("10.0.0.1:7070"));
        assert_eq!(c.heartbeat, Some(Dur::from_secs(1)));
        assert_eq!(c.down_after, Some(Dur::from_secs(300)));
        assert_eq!(c.node_names(), ["n01", "n02", "n03", "gpu1"]);
        assert_eq!(c.node("n02").unwrap().memory, Some(16 << 30));
        assert_eq!(c.node("n02").unwrap().features, ["ib"]);
        assert!(c.node("gpu1").unwrap().features.is_empty());
        assert_eq!(c.cores(), Some(4));
        assert_eq!(c.scheduler.policy.as_deref(), Some("gang"));
        assert_eq!(c.scheduler.mpl, Some(4));
        assert_eq!(c.scheduler.options, ["large_job=32", "packing=\"buddy\""]);
        let p = &c.partitions[0];
        assert_eq!((p.name.as_str(), p.default), ("batch", true));
        assert_eq!(p.nodes, ["n01", "n02"]);
        assert_eq!(p.max_time, Some(Dur::from_secs(86_400)));
        assert_eq!(p.max_nodes, Some(2));
    }

    #[test]
    fn an_empty_file_is_the_single_machine_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.cluster, "cosched");
        assert!(c.nodes.is_empty() && c.head.is_none() && c.cores().is_none());
    }

    #[test]
    fn a_syntax_error_names_the_file_and_line() {
        let e = err("cluster = \"lab\"\n\n[[nodes]]\nnames = n01\n");
        assert!(e.starts_with("/etc/cosched/cosched.toml:4: "), "{e}");
    }

    #[test]
    fn an_unknown_key_names_its_line() {
        let e = err("cluster = \"lab\"\nheartbeet = \"1s\"\n");
        assert!(e.starts_with("/etc/cosched/cosched.toml:2: "), "{e}");
        assert!(e.contains("heartbeet"), "{e}");
    }

    #[test]
    fn a_bad_duration_names_line_and_key() {
        let e = err("cluster = \"lab\"\n\ndown_after = \"five minutes\"\n");
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:3: down_after: "),
            "{e}"
        );
    }

    #[test]
    fn a_bad_hostlist_names_line_and_key() {
        let e = err("[[nodes]]\nnames = \"n[05-01]\"\ncores = 2\n");
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:2: nodes[0].names: "),
            "{e}"
        );
        assert!(e.contains("backwards"), "{e}");
    }

    #[test]
    fn a_node_configured_twice_is_refused() {
        let e =
            err("[[nodes]]\nnames = \"n[1-3]\"\ncores = 2\n[[nodes]]\nnames = \"n3\"\ncores = 2\n");
        assert!(
            e.starts_with(
                "/etc/cosched/cosched.toml:5: nodes[1].names: node n3 is configured twice"
            ),
            "{e}"
        );
    }

    #[test]
    fn nodes_of_different_core_counts_are_refused_with_the_line() {
        let e = err("[[nodes]]\nnames = \"a\"\ncores = 2\n[[nodes]]\nnames = \"b\"\ncores = 8\n");
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:6: nodes[1].cores: 8 cores, but node a has 2"),
            "{e}"
        );
    }

    #[test]
    fn a_partition_of_unconfigured_nodes_is_refused() {
        let e = err(
            "[[nodes]]\nnames = \"n[1-2]\"\ncores = 2\n[[partitions]]\nname = \"p\"\nnodes = \"n[1-3]\"\n",
        );
        assert!(
            e.starts_with(
                "/etc/cosched/cosched.toml:6: partitions[0].nodes: node n3 is not configured"
            ),
            "{e}"
        );
    }

    #[test]
    fn two_default_partitions_are_refused() {
        let e = err(
            "[[nodes]]\nnames = \"n1\"\ncores = 2\n[[partitions]]\nname = \"a\"\nnodes = \"n1\"\ndefault = true\n[[partitions]]\nname = \"b\"\nnodes = \"n1\"\ndefault = true\n",
        );
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:11: partitions[1].default: partition a is the default already"),
            "{e}"
        );
    }

    #[test]
    fn a_partition_larger_than_its_nodes_is_refused() {
        let e = err(
            "[[nodes]]\nnames = \"n[1-2]\"\ncores = 2\n[[partitions]]\nname = \"p\"\nnodes = \"n[1-2]\"\nmax_nodes = 3\n",
        );
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:7: partitions[0].max_nodes: 3"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_memory_size_names_line_and_key() {
        let e = err("[[nodes]]\nnames = \"n1\"\ncores = 2\nmemory = \"lots\"\n");
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:4: nodes[0].memory: "),
            "{e}"
        );
    }

    #[test]
    fn a_head_without_a_port_is_refused() {
        let e = err("head = \"10.0.0.1\"\n");
        assert!(
            e.starts_with("/etc/cosched/cosched.toml:1: head: \"10.0.0.1\" is not HOST:PORT"),
            "{e}"
        );
    }

    /// The configuration docs/deploy.md tells an administrator to write, and the one the
    /// package installs, are read as they are.
    #[test]
    fn the_deploy_guides_and_the_packages_configurations_parse() {
        let guide = include_str!("../../../docs/deploy.md");
        let start = guide
            .find("cat > /etc/cosched/cosched.toml <<'EOF'\n")
            .expect("the guide writes the file");
        let body = &guide[start..];
        let body = &body[body.find('\n').unwrap() + 1..];
        let text = &body[..body.find("\nEOF\n").expect("the heredoc ends")];
        let c = parse(text).unwrap();
        assert_eq!(c.nodes.len(), 16);
        assert_eq!(c.head.as_deref(), Some("head:7070"));
        let shipped = parse(include_str!("../../../packaging/cosched.toml")).unwrap();
        assert!(
            shipped.nodes.is_empty() && shipped.head.is_none(),
            "the package's file changes nothing until the administrator says so"
        );
    }

    #[test]
    fn a_missing_explicit_file_is_named() {
        let e = ClusterConfig::find(Some(Path::new("/nonexistent/cosched.toml")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/cosched.toml"), "{e}");
    }
}
