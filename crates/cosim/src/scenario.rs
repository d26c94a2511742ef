//! Scenario files (TOML): the machine, the costs, the scheme parameters, the workload (an
//! explicit job list, a seed-004 job mix, or a Lublin model workload) and an optional parameter
//! grid for sweeps. Every field but the workload has a default; durations are strings such as
//! `"100us"` or `"200ms"`.

use std::collections::BTreeMap;
use std::path::Path;

use cosched_core::Dur;
use cosched_node::FcsParamError;
use serde::{Deserialize, Serialize};

use crate::hyper_erlang::HyperErlang;

/// A scenario as read from its file.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default)]
    pub machine: MachineCfg,
    #[serde(default)]
    pub costs: Costs,
    #[serde(default)]
    pub schemes: SchemeCfg,
    #[serde(default)]
    pub app: AppCfg,
    #[serde(default)]
    pub jobs: Vec<JobCfg>,
    pub mix: Option<MixCfg>,
    pub lublin: Option<LublinCfg>,
    #[serde(default)]
    pub limits: Limits,
    /// Sweep grid: parameter name → values (`workload`, `pattern`, `v` / `variance`, `mpl`,
    /// `seed`).
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<toml::Value>>,
}

fn one() -> u64 {
    1
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineCfg {
    pub nodes: u32,
    pub pes_per_node: u32,
    /// Multiprogramming level: processes per PE (rows of the Ousterhout matrix).
    pub mpl: u32,
}

impl Default for MachineCfg {
    fn default() -> Self {
        MachineCfg {
            nodes: 32,
            pes_per_node: 1,
            mpl: 5,
        }
    }
}

/// Costs; defaults are seed 004 Table 3.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    #[serde(with = "dur")]
    pub context_switch: Dur,
    #[serde(with = "dur")]
    pub interrupt: Dur,
    #[serde(with = "dur")]
    pub check_endpoint: Dur,
    #[serde(with = "dur")]
    pub global_info: Dur,
    #[serde(with = "dur")]
    pub queue_reorder: Dur,
    /// One-way end-to-end latency of a message.
    #[serde(with = "dur")]
    pub latency: Dur,
    /// Added transfer time per message: message_bytes / bandwidth (0 = included in latency).
    pub bandwidth_mb_s: f64,
    pub message_bytes: u64,
    /// Fixed part of a message's one-way time, used when a job's messages have their own
    /// sizes (the NAS models): a message of b bytes takes startup + b / bandwidth, the
    /// bandwidth being the one that makes `message_bytes` take `latency` (seed 004 gives only
    /// that one point, 187.97 µs for 32 KB). With `serial_nic` the NIC is busy only for the
    /// transfer part, so a small message does not hold up the next one for its whole latency.
    #[serde(with = "dur")]
    pub startup: Dur,
    /// The sending NIC puts one message on the wire at a time, each occupying it for the whole
    /// transit time, so k messages of one send leave over k transits (seed 004 sizes an
    /// iteration's communication as messages × one-way latency, Table 2). Off: every message
    /// of a send arrives one transit after it.
    pub serial_nic: bool,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            context_switch: Dur::from_micros(100),
            interrupt: Dur::from_micros(30),
            check_endpoint: Dur::from_micros(2),
            global_info: Dur::from_micros(2),
            queue_reorder: Dur::from_micros(2),
            latency: Dur::from_micros(188),
            bandwidth_mb_s: 0.0,
            message_bytes: 32 * 1024,
            startup: Dur::ZERO,
            serial_nic: false,
        }
    }
}

impl Costs {
    /// Time from send to arrival at the receiver's NIC.
    pub fn transit(&self) -> Dur {
        let transfer = if self.bandwidth_mb_s > 0.0 {
            Dur::from_secs_f64(self.message_bytes as f64 / (self.bandwidth_mb_s * 1e6))
        } else {
            Dur::ZERO
        };
        self.latency + transfer
    }

    /// Time from send to arrival of a message of `bytes` bytes: the fixed `startup`, plus the
    /// rest of [`Costs::transit`] scaled by size relative to `message_bytes`.
    pub fn transit_bytes(&self, bytes: u64) -> Dur {
        let full = self.transit();
        let per_byte =
            (full - self.startup).max(Dur::ZERO).0 as f64 / self.message_bytes.max(1) as f64;
        self.startup + Dur((per_byte * bytes as f64).round() as i64)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchemeCfg {
    /// GS/FCS heartbeat interval (seed 000 Table 4.1 T); also the unit of granularity.
    #[serde(with = "dur")]
    pub timeslice: Dur,
    /// SB spin time; default = the one-way latency (seed 004 §4).
    #[serde(with = "opt_dur")]
    pub spin_time: Option<Dur>,
    /// PB boost-thread period.
    #[serde(with = "dur")]
    pub pb_period: Dur,
    /// A bounded spin (SB, FCS) is a budget per message: each message that arrives while a
    /// receive still waits for others restarts it (seed 004 §4: "the spin time for a
    /// message"). Off: one budget per receive operation, however many messages it takes.
    pub spin_per_message: bool,
    /// Period of the Solaris TS starvation check (`ts_update`, once a second in Solaris):
    /// ready processes that are not running rise to their sleep-return priority. Unset: no
    /// such check (the local scheduler only lowers on quantum expiry and raises on wake-up).
    #[serde(with = "opt_dur")]
    pub ts_update: Option<Dur>,
    pub fcs: FcsCfg,
    pub proc: ProcCfg,
}

impl Default for SchemeCfg {
    fn default() -> Self {
        SchemeCfg {
            timeslice: Dur::from_millis(200),
            spin_time: None,
            pb_period: Dur::from_millis(1),
            spin_per_message: false,
            ts_update: None,
            fcs: FcsCfg::default(),
            proc: ProcCfg::default(),
        }
    }
}

/// FCS overrides by name (`cosched_node::FCS_KEYS`, as the node manager's `--fcs-opt`):
/// anything unset follows Table 4.1 scaled to the time slice. Durations are strings
/// (`f_thresh = "2ms"`), `max_wdc_wcs` a number.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(transparent)]
pub struct FcsCfg(pub BTreeMap<String, toml::Value>);

impl FcsCfg {
    /// The FCS parameters for the time slice `t` with these overrides, built by the one
    /// builder the node manager uses too; `place` names the table in errors.
    pub fn params(&self, t: Dur, place: &str) -> Result<cosched_node::FcsParams, FcsParamError> {
        let values: Vec<(&str, String)> = self
            .0
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.as_str(), text)
            })
            .collect();
        cosched_node::FcsParams::build(t, values.iter().map(|(k, v)| (*k, v.as_str())), place)
    }
}

/// SB+PROC's departures from seed 004's reading (`[schemes.proc]`; both off by default, see
/// [`cosched_node::ProcOptions`]).
#[derive(Clone, Copy, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ProcCfg {
    /// The running process stays whenever it and the best ready process both have pending
    /// messages (a woken, boosted process does not preempt it).
    pub keep_reordered: bool,
    /// Ready processes with pending messages compete at every priority level, not only at
    /// the highest ready one (SB's boost sequence).
    pub any_level: bool,
}

impl ProcCfg {
    /// The node scheduler's options.
    pub fn options(self) -> cosched_node::ProcOptions {
        cosched_node::ProcOptions {
            keep_reordered: self.keep_reordered,
            any_level: self.any_level,
        }
    }
}

/// How granularity-based jobs (explicit and Lublin) turn into iterations (seed 000 §4.5).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppCfg {
    /// Estimated time of one message exchange (T_msg).
    #[serde(with = "dur")]
    pub msg_time: Dur,
    /// Time to write one I/O block synchronously (T_IO).
    #[serde(with = "dur")]
    pub io_time: Dur,
}

impl Default for AppCfg {
    fn default() -> Self {
        AppCfg {
            msg_time: Dur::from_micros(10),
            io_time: Dur::from_micros(17_500),
        }
    }
}

/// Who exchanges with whom each iteration of a BSP job: the one pattern type of the simulator's
/// model and of the real benchmark (`cosched bsp`), so one scenario job runs both ways.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// No communication.
    None,
    /// Nearest neighbour: to and from rank ± 1 (on a ring of the ranks).
    Nn,
    /// All-to-all: to and from every other rank.
    Aa,
    /// One-way ring: to rank + 1, from rank − 1.
    Ring,
}

impl Pattern {
    pub fn parse(s: &str) -> Option<Pattern> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Some(Pattern::None),
            "nn" => Some(Pattern::Nn),
            "aa" => Some(Pattern::Aa),
            "ring" => Some(Pattern::Ring),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Pattern::None => "none",
            Pattern::Nn => "NN",
            Pattern::Aa => "AA",
            Pattern::Ring => "ring",
        }
    }
}

/// One explicit job (seed 000 Fig. 4.4 benchmark).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobCfg {
    #[serde(with = "dur", default)]
    pub arrival: Dur,
    pub procs: u32,
    /// Total work W.
    #[serde(with = "dur")]
    pub work: Dur,
    /// Iteration length as a fraction of the time slice (G).
    pub granularity: f64,
    #[serde(default = "pattern_aa")]
    pub pattern: Pattern,
    /// Compute per iteration is uniform in w·(1 ± variance).
    #[serde(default)]
    pub variance: f64,
    /// I/O blocks per iteration (B).
    #[serde(default)]
    pub io_blocks: u32,
    /// Per-rank deviations (a slower process, a different variance).
    #[serde(default)]
    pub ranks: Vec<RankCfg>,
}

fn pattern_aa() -> Pattern {
    Pattern::Aa
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankCfg {
    pub ranks: Vec<u32>,
    #[serde(default = "one_f")]
    pub work_factor: f64,
    pub variance: Option<f64>,
}

fn one_f() -> f64 {
    1.0
}

/// A seed-004 workload (Table 2): every job has `procs` processes and either the
/// computation / I/O / communication shares of J1, J2 or J3 (WL1–WL3; WL4 mixes them
/// equally), or one of the NAS job models LU, CG, IS, FT (Table 2(b); see
/// [`crate::workload::nas_model`]), which bring their own pattern, message sizes and
/// iteration count.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixCfg {
    pub workload: String,
    pub jobs: u32,
    pub procs: u32,
    /// Required for WL1–WL4; a NAS model has its own (giving one is an error).
    #[serde(default)]
    pub pattern: Option<Pattern>,
    /// Per-iteration compute and I/O are multiplied by 1 + unif(−v/2, v/2) (seed 004 §4).
    pub v: f64,
    /// Required for WL1–WL4; for a NAS model it replaces the model's own count.
    #[serde(default)]
    pub iterations: Option<u32>,
    /// Also report each scheme's slowdown relative to BATCH: its makespan over the sum of
    /// the jobs' runtimes alone on the machine (seed 004 Fig. 7). Costs one extra run per
    /// kind of job.
    #[serde(default)]
    pub batch_slowdown: bool,
    /// Time between arrivals (0: all at once). Excludes `[mix.arrivals]`.
    #[serde(with = "dur", default)]
    pub interarrival: Dur,
    /// Open arrivals: Hyper-Erlang gaps between jobs, scaled to an offered load (seed 004 §4
    /// draws its arrivals from a Hyper-Erlang fit to SDSC SP2).
    #[serde(default)]
    pub arrivals: Option<ArrivalsCfg>,
    /// Job lengths: each job's iteration count is a Hyper-Erlang draw whose mean is
    /// `iterations` (the NAS model's own count if unset). Unset: every job has that count.
    #[serde(default)]
    pub length: Option<DrawCfg>,
    /// Job sizes: each job's process count is a Hyper-Erlang draw whose mean is `procs`,
    /// rounded and kept within the machine. Unset: every job has `procs` processes (as in
    /// seed 004, whose jobs all have 32).
    #[serde(default)]
    pub size: Option<DrawCfg>,
    /// Drop the I/O share (for sensitivity studies; the compute share is unchanged).
    #[serde(default)]
    pub without_io: bool,
    /// Draw each process's factor 1 + unif(−v/2, v/2) once, for the whole run, instead of
    /// afresh every iteration: a persistent imbalance across CPUs (seed 004 Fig. 3(b), "we
    /// model the load imbalance across CPUs"), so that nodes differ in load the way PROC
    /// exploits. Off: per-iteration noise, which averages out over a run.
    #[serde(default)]
    pub per_process_v: bool,
    /// Also report each job's slowdown — its response over its runtime alone on the machine
    /// — and their coefficient of variation (seed 004 Fig. 5's fairness measure). Costs one
    /// extra run per kind of job.
    #[serde(default)]
    pub slowdown: bool,
}

/// The shape of a Hyper-Erlang draw (`[mix.length]`, `[mix.size]`): its squared coefficient
/// of variation and the common order of its Erlang branches (1: hyperexponential). The mean
/// comes from the field the draw replaces.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrawCfg {
    pub cv2: f64,
    #[serde(default = "one_u32")]
    pub order: u32,
}

fn one_u32() -> u32 {
    1
}

/// Open arrivals (`[mix.arrivals]`): Hyper-Erlang gaps with this shape, whose mean makes the
/// drawn jobs' offered load — their processes × runtime alone, summed, over the machine's PEs
/// × the arrival span — equal `load`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalsCfg {
    pub load: f64,
    pub cv2: f64,
    #[serde(default = "one_u32")]
    pub order: u32,
}

/// A Lublin-model workload (seed 000 §4.6).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LublinCfg {
    pub jobs: usize,
    pub load: f64,
    #[serde(default = "hundred")]
    pub compress: f64,
    pub granularities: Vec<f64>,
    pub variances: Vec<f64>,
    /// Probabilities of none / NN / AA.
    pub pattern_weights: [f64; 3],
    #[serde(default)]
    pub io_blocks: u32,
    /// Keep only the first this many jobs (for quick runs); 0 = all.
    #[serde(default)]
    pub take: usize,
    /// Which variant of the model draws the jobs (`cosched workload gen --model`).
    #[serde(default)]
    pub model: LublinModel,
}

/// The variant of the Lublin–Feitelson model a `[lublin]` workload is drawn from.
#[derive(Clone, Copy, Debug, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LublinModel {
    /// Separate batch and interactive job streams (the published default).
    #[default]
    Lublin,
    /// The whole-sample parameters, no job types: seed 000 §4.6's draw (its 236 short /
    /// 276 long jobs with a mean of 20.3 s / 114 min are what this variant gives, while
    /// the typed one gives about two thirds short jobs; docs/reproductions/fcs-512.md).
    LublinUntyped,
}

fn hundred() -> f64 {
    100.0
}

#[derive(Clone, Copy, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Stop the simulation at this simulated time (jobs unfinished are reported as such).
    #[serde(with = "opt_dur")]
    pub max_time: Option<Dur>,
}

/// A scenario that could not be read or makes no sense.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: field `{field}`: {why}")]
    Invalid {
        path: String,
        field: String,
        why: String,
    },
    #[error(transparent)]
    Fcs(#[from] FcsParamError),
}

mod dur {
    use cosched_core::Dur;
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        let s = String::deserialize(d)?;
        Dur::parse(&s).map_err(serde::de::Error::custom)
    }
}

mod opt_dur {
    use cosched_core::Dur;
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| Dur::parse(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: p.clone(),
            source,
        })?;
        Scenario::parse(&text, &p)
    }

    /// Parses and validates scenario text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let sc: Scenario = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let at = line.map(|l| format!(":{l}")).unwrap_or_default();
            ScenarioError::Parse {
                path: format!("{origin}{at}"),
                message: e.message().to_string(),
            }
        })?;
        sc.validate(origin)?;
        Ok(sc)
    }

    /// The FCS parameters: Table 4.1 for the time slice with `[schemes.fcs]`'s overrides
    /// (checked when the scenario is parsed).
    pub fn fcs_params(&self) -> cosched_node::FcsParams {
        self.fcs_params_at(&self.name)
            .expect("[schemes.fcs] is checked when the scenario is parsed")
    }

    fn fcs_params_at(&self, origin: &str) -> Result<cosched_node::FcsParams, FcsParamError> {
        let place = format!("{origin}: [schemes.fcs]");
        self.schemes.fcs.params(self.schemes.timeslice, &place)
    }

    fn validate(&self, origin: &str) -> Result<(), ScenarioError> {
        let bad = |field: &str, why: &str| {
            Err(ScenarioError::Invalid {
                path: origin.to_string(),
                field: field.to_string(),
                why: why.to_string(),
            })
        };
        let m = self.machine;
        if m.nodes == 0 || m.pes_per_node == 0 || m.mpl == 0 {
            return bad(
                "machine",
                "nodes, pes_per_node and mpl must all be at least 1",
            );
        }
        if self.schemes.timeslice <= Dur::ZERO {
            return bad("schemes.timeslice", "must be positive");
        }
        if self.schemes.pb_period <= Dur::ZERO {
            return bad("schemes.pb_period", "must be positive");
        }
        if self.schemes.ts_update.is_some_and(|d| d <= Dur::ZERO) {
            return bad("schemes.ts_update", "must be positive");
        }
        self.fcs_params_at(origin)?;
        let sources = usize::from(!self.jobs.is_empty())
            + usize::from(self.mix.is_some())
            + usize::from(self.lublin.is_some());
        if sources != 1 {
            return bad(
                "jobs / mix / lublin",
                "give exactly one workload: [[jobs]], [mix] or [lublin]",
            );
        }
        let Some(total) = m.nodes.checked_mul(m.pes_per_node) else {
            return bad("machine", "nodes × pes_per_node must be below 2³²");
        };
        for (i, j) in self.jobs.iter().enumerate() {
            let f = |name: &str| format!("jobs[{i}].{name}");
            if j.procs == 0 || j.procs > total {
                return bad(
                    &f("procs"),
                    &format!("must be between 1 and the machine's {total} PEs"),
                );
            }
            if !j.granularity.is_finite() || j.granularity <= 0.0 {
                return bad(
                    &f("granularity"),
                    "must be a positive fraction of the time slice",
                );
            }
            if !(0.0..1.0).contains(&j.variance) {
                return bad(&f("variance"), "must be in [0, 1)");
            }
            for r in &j.ranks {
                if r.ranks.iter().any(|&k| k >= j.procs) {
                    return bad(&f("ranks"), "rank out of range for the job's procs");
                }
            }
        }
        if let Some(mix) = &self.mix {
            let nas = crate::workload::nas_model(&mix.workload).is_some();
            if crate::workload::mix_shares(&mix.workload, 0).is_none() && !nas {
                return bad(
                    "mix.workload",
                    "must be WL1, WL2, WL3, WL4, LU, CG, IS or FT",
                );
            }
            if nas && mix.pattern.is_some() {
                return bad(
                    "mix.pattern",
                    "a NAS model (LU, CG, IS, FT) has its own pattern; leave it out",
                );
            }
            if !nas && (mix.pattern.is_none() || mix.iterations.is_none()) {
                return bad("mix", "WL1..WL4 need a pattern and iterations");
            }
            if mix.procs == 0 || mix.procs > total {
                return bad(
                    "mix.procs",
                    &format!("must be between 1 and the machine's {total} PEs"),
                );
            }
            if mix.iterations == Some(0) || mix.jobs == 0 {
                return bad("mix", "jobs and iterations must be at least 1");
            }
            if !(0.0..2.0).contains(&mix.v) {
                return bad("mix.v", "must be in [0, 2)");
            }
            if let Some(a) = mix.arrivals {
                if mix.interarrival > Dur::ZERO {
                    return bad(
                        "mix.arrivals",
                        "give either a fixed interarrival or [mix.arrivals], not both",
                    );
                }
                if !(a.load.is_finite() && a.load > 0.0) {
                    return bad("mix.arrivals.load", "must be a positive offered load");
                }
                if let Err(e) = HyperErlang::fit(1.0, a.cv2, a.order) {
                    return bad("mix.arrivals", &e.to_string());
                }
            }
            for (field, d) in [("mix.length", mix.length), ("mix.size", mix.size)] {
                if let Some(d) = d
                    && let Err(e) = HyperErlang::fit(1.0, d.cv2, d.order)
                {
                    return bad(field, &e.to_string());
                }
            }
        }
        if let Some(l) = &self.lublin {
            if l.granularities.is_empty() || l.variances.is_empty() {
                return bad(
                    "lublin",
                    "granularities and variances need at least one value",
                );
            }
            if l.pattern_weights.iter().any(|w| *w < 0.0)
                || l.pattern_weights.iter().sum::<f64>() <= 0.0
            {
                return bad(
                    "lublin.pattern_weights",
                    "must be non-negative and not all zero",
                );
            }
        }
        for key in self.grid.keys() {
            if !["workload", "pattern", "v", "variance", "mpl", "seed"].contains(&key.as_str()) {
                return bad(
                    &format!("grid.{key}"),
                    "unknown grid parameter (use workload, pattern, v, variance, mpl or seed)",
                );
            }
        }
        Ok(())
    }

    /// The grid points: every combination of the grid's values (one empty point if no grid).
    pub fn grid_points(&self) -> Vec<BTreeMap<String, String>> {
        let mut points = vec![BTreeMap::new()];
        for (key, values) in &self.grid {
            let mut next = Vec::new();
            for p in &points {
                for v in values {
                    let mut q = p.clone();
                    let text = match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    q.insert(key.clone(), text);
                    next.push(q);
                }
            }
            points = next;
        }
        points
    }

    /// A copy with one grid point applied.
    pub fn with_params(
        &self,
        params: &BTreeMap<String, String>,
    ) -> Result<Scenario, ScenarioError> {
        let mut sc = self.clone();
        let bad = |field: &str, why: String| ScenarioError::Invalid {
            path: self.name.clone(),
            field: format!("grid.{field}"),
            why,
        };
        for (k, v) in params {
            match k.as_str() {
                "workload" => match sc.mix.as_mut() {
                    Some(m) => m.workload = v.clone(),
                    None => return Err(bad(k, "needs a [mix] workload".into())),
                },
                "pattern" => {
                    let p = Pattern::parse(v)
                        .ok_or_else(|| bad(k, format!("{v:?} is not none, nn, aa or ring")))?;
                    if let Some(m) = sc.mix.as_mut() {
                        m.pattern = Some(p);
                    }
                    for j in &mut sc.jobs {
                        j.pattern = p;
                    }
                }
                "v" | "variance" => {
                    let x: f64 = v
                        .parse()
                        .map_err(|_| bad(k, format!("{v:?} is not a number")))?;
                    if let Some(m) = sc.mix.as_mut() {
                        m.v = x;
                    }
                    for j in &mut sc.jobs {
                        j.variance = x;
                    }
                }
                "mpl" => {
                    sc.machine.mpl = v
                        .parse()
                        .map_err(|_| bad(k, format!("{v:?} is not a whole number")))?
                }
                "seed" => {
                    sc.seed = v
                        .parse()
                        .map_err(|_| bad(k, format!("{v:?} is not a whole number")))?
                }
                _ => return Err(bad(k, "unknown grid parameter".into())),
            }
        }
        Ok(sc)
    }
}

#[cfg(test)]
mod tests;
