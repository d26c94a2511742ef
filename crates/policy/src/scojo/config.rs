//! The policy's options: their names, defaults (Table 6 of seed 001 and its §5.1 set-up) and
//! how they are read from a policy configuration.

use cosched_core::{Dur, Milli, SelfLimits};

use super::glomarc::Variant;
use crate::opts::Opts;
use crate::{ConfigError, PolicyConfig};

/// Every option of the policy, with Table 6's values and §5.1's Scojo-PECT set-up as
/// defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct ScojoConfig {
    pub variant: Variant,
    pub interval: Dur,
    pub short_slice: Dur,
    pub medium_share: f64,
    pub overhead: Dur,
    pub short_max: Dur,
    pub medium_max: Dur,
    pub limits: SelfLimits,
    pub min_utilgain: f64,
    pub block_size: u32,
    pub matched_exceed_prim: f64,
    pub running_prim_num: u32,
    pub max_matched_longer_prim: Dur,
    pub f_slack: f64,
    /// Whether step 7's check also covers the waiting jobs a group delays, not only its
    /// members (§4.6: "any other jobs"; option `fair_others`, default true).
    pub fair_others: bool,
    /// Which slowdowns include the self-slowdown (option `sl_self`).
    pub sl_self: SlSelf,
    /// Whether a group must also beat space sharing's gain (PPN / SL_self − 1) when the
    /// head fits now (§4.5 step 4 compares the groups with "space sharing of Case 5"; the
    /// seed defines no gain for a job alone, so this is our reading; option `beat_ssp`).
    pub beat_ssp: bool,
    /// Whether groups (case 1) are also formed while backfilling (§4.5; option
    /// `group_backfill`, off by default: an experiment).
    pub group_backfill: bool,
    /// N_H: read by the metrics, accepted here so one configuration serves both.
    pub n_h: u32,
    pub r_est_scale: f64,
    pub slowdown_seed: u64,
}

/// Every option name (the registry lists them; [`ScojoConfig::from_policy_config`] reads
/// exactly these).
pub const OPTIONS: &[&str] = &[
    "beat_ssp",
    "block_size",
    "f_slack",
    "fair_others",
    "group_backfill",
    "interval",
    "matched_exceed_prim",
    "max_matched_longer_prim",
    "max_sl",
    "medium_max",
    "medium_share",
    "min_utilgain",
    "n_h",
    "overhead",
    "r_est_scale",
    "running_prim_num",
    "self_sl_2",
    "short_max",
    "short_slice",
    "sl_self",
    "slowdown_seed",
    "variant",
];

fn float(o: &Opts, key: &str, default: f64) -> Result<f64, ConfigError> {
    match o.get(key) {
        None => Ok(default),
        Some(toml::Value::Float(f)) if f.is_finite() && *f >= 0.0 => Ok(*f),
        Some(toml::Value::Integer(i)) if *i >= 0 => Ok(*i as f64),
        Some(toml::Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .ok_or_else(|| o.bad(key, "expected a non-negative number")),
        Some(_) => Err(o.bad(key, "expected a non-negative number")),
    }
}

fn milli(o: &Opts, key: &str, default: Milli) -> Result<Milli, ConfigError> {
    let f = float(o, key, f64::from(default) / 1000.0)?;
    Ok((f * 1000.0).round() as Milli)
}

impl ScojoConfig {
    pub fn from_policy_config(
        name: &'static str,
        default_variant: Variant,
        cfg: &PolicyConfig,
    ) -> Result<ScojoConfig, ConfigError> {
        let o = Opts::new(name, cfg);
        let variant = o.string("variant", "")?.parse::<Variant>().or_else(|e| {
            if o.get("variant").is_none() {
                Ok(default_variant)
            } else {
                Err(o.bad("variant", e))
            }
        })?;
        let c = ScojoConfig {
            variant,
            interval: o.dur("interval", Dur::from_secs(3600))?,
            short_slice: o.dur("short_slice", Dur::from_secs(600))?,
            medium_share: float(&o, "medium_share", 0.3)?,
            overhead: o.dur("overhead", Dur::from_secs(60))?,
            short_max: o.dur("short_max", Dur::from_secs(600))?,
            medium_max: o.dur("medium_max", Dur::from_secs(3 * 3600))?,
            limits: SelfLimits {
                max_sl: milli(&o, "max_sl", 1250)?,
                self_sl_2: milli(&o, "self_sl_2", 1120)?,
            },
            min_utilgain: float(&o, "min_utilgain", 0.45)?,
            block_size: o.uint("block_size", 16)?,
            matched_exceed_prim: float(&o, "matched_exceed_prim", 0.125)?,
            running_prim_num: o.uint("running_prim_num", 8)?,
            max_matched_longer_prim: o.dur("max_matched_longer_prim", Dur::from_secs(3000))?,
            f_slack: float(&o, "f_slack", 1.5)?,
            fair_others: o.boolean("fair_others", true)?,
            beat_ssp: o.boolean("beat_ssp", true)?,
            group_backfill: o.boolean("group_backfill", false)?,
            sl_self: match o.string("sl_self", "both")?.as_str() {
                "both" => SlSelf::Both,
                "gain" => SlSelf::Gain,
                "none" => SlSelf::None,
                _ => return Err(o.bad("sl_self", "expected both, gain or none")),
            },
            n_h: o.uint("n_h", 12)?,
            r_est_scale: float(&o, "r_est_scale", 0.75)?,
            slowdown_seed: o.uint("slowdown_seed", 1)?.into(),
        };
        if c.medium_share > 1.0 {
            return Err(o.bad("medium_share", "a share between 0 and 1"));
        }
        if c.interval <= c.short_slice || c.interval.is_zero() {
            return Err(o.bad("interval", "must be longer than short_slice"));
        }
        if c.block_size == 0 {
            return Err(o.bad("block_size", "at least 1"));
        }
        o.finish()?;
        Ok(c)
    }
}

/// Which of G-LOMARC-TS's slowdowns include the job's self-slowdown beside the coscheduling
/// slowdown. §4.7 says SL_i,A "includes both self slowdown, if possible, and coscheduling
/// slowdown"; §4.6 step 1 (pre-selection: "do not slowdown each other severely") does not
/// say. The engine always applies both; this is only what the policy reckons with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlSelf {
    /// Pre-selection and utilization gain both (default).
    Both,
    /// The gain only; pre-selection compares the coscheduling slowdowns with MAX_SL.
    Gain,
    /// Neither: coscheduling slowdowns only.
    None,
}
