//! The T3D scheduler's parameters: job classes (seed 002 Table 1), global limits, the queue →
//! class mapping and the swap cost, read from [`PolicyConfig::options`] (the `[policy]` table
//! of a `--policy-config` TOML file, or `--opt` flags).
//!
//! ```toml
//! [policy]
//! large_job = 64          # "large" from this many PEs
//! large_limit = 192       # PEs large jobs may hold together
//! job_limit = 256         # PEs one job may hold
//! system_limit = 576      # PEs of jobs loaded or swapped to disk (over-allocation)
//! swap_per_pe = "1s"      # moving one PE's state to disk, and again back
//! default_class = "production"
//! [policy.queues]         # SWF queue number -> class
//! 0 = "interactive"
//! [policy.classes.interactive]
//! priority = 4
//! wait = "0s"             # maximum wait before (or between) processor access
//! dnd_per_pe = "10s"      # do-not-disturb time = this x the job's PEs
//! proc_limit = 256
//! preemptible = true
//! [policy.night]          # the non-prime set (optional): any key above but queues/default_class
//! large_limit = 256
//! [policy.night.classes.interactive]
//! priority = 3            # the default at night: interactive = production (§4.2)
//! ```
//!
//! Processor limits default to Table 1's values for the LLNL machine's 256 PEs, scaled to the
//! simulated machine's size.
//!
//! **Day and night** (§4.2: Table 1 and the global limits are "the daytime on week-days" set;
//! "we make interactive jobs higher priority than production jobs during the daytime and
//! assign them equal priority at night"). With a `[policy.night]` table the scheduler switches
//! between two parameter sets: the day set from `day_start` to `day_end` (default 07:00-18:00,
//! Table 2's daytime period) on week-days, the night set otherwise (evenings, nights, and the
//! weekend with `weekends = true`, the default; `day_offset` is the time of day at time 0,
//! a Monday). The night set starts as the day set with interactive jobs at production's
//! priority — the one night value the seed gives — and the table overrides the rest.

use std::collections::BTreeMap;

use cosched_core::Dur;

use crate::opts::{Opts, dur_value};
use crate::prime::PrimeSchedule;
use crate::{ConfigError, JobRequest, PolicyConfig};

/// "One year" of Table 1: never, in practice.
pub const YEAR: Dur = Dur::from_secs(365 * 86_400);

/// One job class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassParams {
    pub name: String,
    /// Higher is more urgent.
    pub priority: u32,
    /// Maximum time to wait for (or between) processor access before a reservation is made.
    pub wait: Dur,
    /// Do-not-disturb time per PE: a job is not preempted before `dnd_per_pe × procs` of
    /// running.
    pub dnd_per_pe: Dur,
    /// PEs the loaded jobs of this class may hold together.
    pub proc_limit: u32,
    /// Debug and benchmark jobs are never preempted.
    pub preemptible: bool,
}

/// Everything the T3D policy is parameterized by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct T3dConfig {
    pub classes: Vec<ClassParams>,
    pub queues: BTreeMap<u32, usize>,
    pub default_class: usize,
    pub large_job: u32,
    pub large_limit: u32,
    pub job_limit: u32,
    pub system_limit: u32,
    pub swap_per_pe: Dur,
    /// The night (non-prime) set and when the day set applies; `None`: one set all the time.
    pub night: Option<DayNight>,
}

/// A second parameter set for the hours outside the day (seed 002 §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DayNight {
    /// Prime time is the day: [`PrimeSchedule::is_prime`] says which set applies.
    pub day: PrimeSchedule,
    /// Same classes, in the same order, as the day set (jobs keep their class index).
    pub set: Box<T3dConfig>,
}

impl T3dConfig {
    /// Table 1 and §4.2's global limits, with processor counts scaled from 256 PEs to `pes`.
    pub fn table_1(pes: u32) -> T3dConfig {
        let scale = |v: u32| ((v as u64 * pes as u64) / 256).max(1) as u32;
        let class = |name: &str, priority, wait: Dur, dnd: Dur, limit, preemptible| ClassParams {
            name: name.to_string(),
            priority,
            wait,
            dnd_per_pe: dnd,
            proc_limit: scale(limit),
            preemptible,
        };
        let s = Dur::from_secs;
        T3dConfig {
            classes: vec![
                class("interactive", 4, s(0), s(10), 256, true),
                class("debug", 4, s(300), YEAR, 96, false),
                class("production", 3, s(3600), s(10), 256, true),
                class("benchmark", 2, YEAR, YEAR, 64, false),
                class("standby", 1, YEAR, s(3), 256, true),
            ],
            queues: BTreeMap::from([(0, 0)]),
            default_class: 2,
            large_job: scale(64),
            large_limit: scale(192),
            job_limit: scale(256),
            system_limit: scale(576),
            swap_per_pe: s(1),
            night: None,
        }
    }

    /// The parameter set that applies at `now`: the night set outside the day, else this one
    /// (returned without its `night`).
    pub fn set_at(&self, now: cosched_core::Time) -> T3dConfig {
        match &self.night {
            Some(n) if !n.day.is_prime(now) => (*n.set).clone(),
            _ => T3dConfig {
                night: None,
                ..self.clone()
            },
        }
    }

    pub fn class_index(&self, name: &str) -> Option<usize> {
        self.classes.iter().position(|c| c.name == name)
    }

    /// The class of a job: its class name when it names a known class, else its queue's
    /// class, else the default class.
    pub fn class_of(&self, req: &JobRequest) -> usize {
        if let Some(i) = req.class.as_deref().and_then(|n| self.class_index(n)) {
            return i;
        }
        req.queue
            .and_then(|q| self.queues.get(&q).copied())
            .unwrap_or(self.default_class)
    }

    /// Table 1 (scaled) overridden by the options, and the night set if one is given.
    pub fn from_policy_config(cfg: &PolicyConfig) -> Result<T3dConfig, ConfigError> {
        let o = Opts::new("t3d", cfg);
        let mut c = T3dConfig::table_1(cfg.machine.total_pes());
        c.apply(&o, cfg.machine.total_pes(), false)?;
        // The schedule's keys are read (and checked) whether or not a night set is given, so
        // that every key is known to [`Opts::finish`].
        let start = o.dur("day_start", Dur::from_secs(7 * 3600))?;
        let end = o.dur("day_end", Dur::from_secs(18 * 3600))?;
        let day_offset = o.dur("day_offset", Dur::ZERO)?;
        let weekends = o.boolean("weekends", true)?;
        if let Some(v) = o.get("night") {
            let toml::Value::Table(table) = v else {
                return Err(o.bad("night", "expected a table ([policy.night])"));
            };
            if !(start < end && end <= Dur::from_secs(86_400)) {
                return Err(o.bad(
                    "day_end",
                    "day_start must come before day_end, within one day",
                ));
            }
            let ncfg = PolicyConfig {
                options: table.clone(),
                ..cfg.clone()
            };
            let no = Opts::new("t3d", &ncfg);
            let mut n = T3dConfig {
                night: None,
                ..c.clone()
            };
            if let (Some(i), Some(p)) = (n.class_index("interactive"), n.class_index("production"))
            {
                n.classes[i].priority = n.classes[p].priority;
            }
            n.apply(&no, cfg.machine.total_pes(), true)
                .and_then(|()| no.finish())
                .map_err(in_night)?;
            c.night = Some(DayNight {
                day: PrimeSchedule::Daily {
                    start,
                    end,
                    day_offset,
                    weekends,
                },
                set: Box::new(n),
            });
        }
        o.finish()?;
        Ok(c)
    }

    /// Overrides this set with the options `o` reads. A night set (`night`) may change the
    /// classes it has, not add any, and does not read the queue mapping.
    fn apply(&mut self, o: &Opts, pes: u32, night: bool) -> Result<(), ConfigError> {
        let c = self;
        if let Some(v) = o.get("classes") {
            let toml::Value::Table(classes) = v else {
                return Err(o.bad(
                    "classes",
                    "expected a table of classes ([policy.classes.NAME])",
                ));
            };
            for (name, body) in classes {
                let toml::Value::Table(body) = body else {
                    return Err(o.bad(&format!("classes.{name}"), "expected a table"));
                };
                let idx = match c.class_index(name) {
                    Some(i) => i,
                    None if night => {
                        return Err(o.bad(
                            &format!("classes.{name}"),
                            "the night set may only change the day's classes (add it to [policy.classes] first)",
                        ));
                    }
                    None => {
                        c.classes.push(ClassParams {
                            name: name.clone(),
                            priority: 1,
                            wait: YEAR,
                            dnd_per_pe: Dur::from_secs(10),
                            proc_limit: pes,
                            preemptible: true,
                        });
                        c.classes.len() - 1
                    }
                };
                let class = &mut c.classes[idx];
                for (key, value) in body {
                    let field = format!("classes.{name}.{key}");
                    let as_u32 = || value.as_integer().and_then(|i| u32::try_from(i).ok());
                    match key.as_str() {
                        "priority" => class.priority = as_u32().ok_or_else(|| o.bad(&field, "expected a non-negative integer"))?,
                        "proc_limit" => class.proc_limit = as_u32().ok_or_else(|| o.bad(&field, "expected a non-negative integer"))?,
                        "wait" => class.wait = dur_value(value).ok_or_else(|| o.bad(&field, "expected a duration such as \"5m\""))?,
                        "dnd_per_pe" => class.dnd_per_pe = dur_value(value).ok_or_else(|| o.bad(&field, "expected a duration such as \"10s\""))?,
                        "preemptible" => class.preemptible = value.as_bool().ok_or_else(|| o.bad(&field, "expected true or false"))?,
                        _ => return Err(o.bad(&field, "unknown key; known: priority, wait, dnd_per_pe, proc_limit, preemptible")),
                    }
                }
            }
        }
        if !night {
            if let Some(v) = o.get("queues") {
                let toml::Value::Table(queues) = v else {
                    return Err(o.bad("queues", "expected a table of queue number = \"class\""));
                };
                c.queues.clear();
                for (q, class) in queues {
                    let field = format!("queues.{q}");
                    let q: u32 = q
                        .parse()
                        .map_err(|_| o.bad(&field, "a queue must be a number"))?;
                    let name = class
                        .as_str()
                        .ok_or_else(|| o.bad(&field, "expected a class name"))?;
                    let idx = c
                        .class_index(name)
                        .ok_or_else(|| o.bad(&field, format!("unknown class {name:?}")))?;
                    c.queues.insert(q, idx);
                }
            }
            let default = o.string("default_class", "production")?;
            c.default_class = c
                .class_index(&default)
                .ok_or_else(|| o.bad("default_class", format!("unknown class {default:?}")))?;
        }
        c.large_job = o.uint("large_job", c.large_job)?;
        c.large_limit = o.uint("large_limit", c.large_limit)?;
        c.job_limit = o.uint("job_limit", c.job_limit)?;
        c.system_limit = o.uint("system_limit", c.system_limit)?;
        c.swap_per_pe = o.dur("swap_per_pe", c.swap_per_pe)?;
        Ok(())
    }
}

/// Names a key of the night table as `night.KEY` in an error.
fn in_night(e: ConfigError) -> ConfigError {
    match e {
        ConfigError::BadOption {
            policy,
            option,
            why,
        } => ConfigError::BadOption {
            policy,
            option: format!("night.{option}"),
            why,
        },
        ConfigError::UnknownOption {
            policy,
            unknown,
            known,
        } => ConfigError::UnknownOption {
            policy,
            unknown: unknown.into_iter().map(|k| format!("night.{k}")).collect(),
            known: known.into_iter().map(|k| format!("night.{k}")).collect(),
        },
        other => other,
    }
}
