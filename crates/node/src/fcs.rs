//! Flexible coscheduling (seed 000, Ch. 3 and §4.4.2): each process is classified from its own
//! synchronous communication as CS (needs coscheduling and gets it), F (needs it but is
//! frustrated, e.g. by load imbalance) or DC (does not care). This module holds the six
//! statistics, the reclassification heuristic of Fig. 4.3 with the optimisations of §3.5, and
//! the adaptive spin time `min(2·MAX_nonblock, MAX_spin)`.

use cosched_core::Dur;
use serde::Serialize;
use thiserror::Error;

/// A process's FCS class. The two initial classes are the measuring periods every process goes
/// through after launch (and after a reset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ProcClass {
    InitCs,
    InitDc,
    Cs,
    F,
    Dc,
}

impl ProcClass {
    /// The class as reported (`CS`, `F`, `DC`); the initial classes report as what they act as.
    pub fn label(self) -> &'static str {
        match self {
            ProcClass::InitCs | ProcClass::Cs => "CS",
            ProcClass::F => "F",
            ProcClass::InitDc | ProcClass::Dc => "DC",
        }
    }
    /// Whether the process is scheduled as coscheduled (CS or F) rather than DC.
    pub fn coscheduled(self) -> bool {
        matches!(self, ProcClass::InitCs | ProcClass::Cs | ProcClass::F)
    }
    fn initial(self) -> bool {
        matches!(self, ProcClass::InitCs | ProcClass::InitDc)
    }
}

/// The parameters of seed 000 Table 4.1, as absolute durations (the table gives them as
/// multiples of the time slice T).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FcsParams {
    /// W_DC / W_CS above which a process is CS (2.0).
    pub max_wdc_wcs: f64,
    /// Mean coscheduled wait above which a process is F (T/100).
    pub f_thresh: Dur,
    /// CPU time per synchronous event above which a process is DC (1·T).
    pub dc_thresh: Dur,
    /// CPU time per event below which an effectively communicating process stays CS (T/9).
    pub cs_thresh: Dur,
    /// CPU time in one class after which the class is reset (500·T).
    pub max_ctime: Dur,
    /// Minimum CPU time in a class before reclassification (2·T).
    pub min_ctime: Dur,
    /// Minimum CPU time in each initial class (5·T).
    pub min_init_ctime: Dur,
    /// Absolute upper bound on the adaptive spin time.
    pub max_spin: Dur,
}

impl FcsParams {
    /// Table 4.1 for a time slice `t`; `MAX_spin` (not in the table) defaults to `F_thresh`, the
    /// wait beyond which communication counts as stalled.
    pub fn table_4_1(t: Dur) -> FcsParams {
        FcsParams {
            max_wdc_wcs: 2.0,
            f_thresh: Dur(t.0 / 100),
            dc_thresh: t,
            cs_thresh: Dur(t.0 / 9),
            max_ctime: t * 500,
            min_ctime: t * 2,
            min_init_ctime: t * 5,
            max_spin: Dur(t.0 / 100),
        }
    }

    /// Table 4.1 for the time slice `t`, then `settings` by name ([`FCS_KEYS`]): `t`, wherever
    /// it comes, first sets every entry from a time slice of its own; the others then override
    /// single entries. The one way FCS parameters are set, from a scenario's `[schemes.fcs]`
    /// and from the node manager's `--fcs-opt`; `place` says which, for the errors.
    pub fn build<'a>(
        t: Dur,
        settings: impl IntoIterator<Item = (&'a str, &'a str)>,
        place: &str,
    ) -> Result<FcsParams, FcsParamError> {
        let mut settings: Vec<(&str, &str)> = settings
            .into_iter()
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        // The time slice first: the other entries are relative to it.
        settings.sort_by_key(|&(k, _)| k != "t");
        let mut f = FcsParams::table_4_1(t);
        for (key, value) in settings {
            let bad = |why: String| FcsParamError::Value {
                place: place.to_string(),
                key: key.to_string(),
                value: value.to_string(),
                why,
            };
            let dur = || value.parse::<Dur>().map_err(|e| bad(e.to_string()));
            match key {
                "t" => f = FcsParams::table_4_1(dur()?),
                "max_wdc_wcs" => {
                    f.max_wdc_wcs = value.parse().map_err(|_| bad("not a number".to_string()))?
                }
                "f_thresh" => f.f_thresh = dur()?,
                "dc_thresh" => f.dc_thresh = dur()?,
                "cs_thresh" => f.cs_thresh = dur()?,
                "max_ctime" => f.max_ctime = dur()?,
                "min_ctime" => f.min_ctime = dur()?,
                "min_init_ctime" => f.min_init_ctime = dur()?,
                "max_spin" => f.max_spin = dur()?,
                _ => {
                    return Err(FcsParamError::Unknown {
                        place: place.to_string(),
                        key: key.to_string(),
                    });
                }
            }
        }
        Ok(f)
    }

    /// [`FcsParams::build`] from `KEY=VALUE` words (the node manager's `--fcs-opt`).
    pub fn from_opts(t: Dur, opts: &[String], place: &str) -> Result<FcsParams, FcsParamError> {
        let mut settings = Vec::with_capacity(opts.len());
        for o in opts {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| FcsParamError::NotKeyValue {
                    place: place.to_string(),
                    word: o.clone(),
                })?;
            settings.push((k, v));
        }
        FcsParams::build(t, settings, place)
    }
}

/// The names of the FCS parameters [`FcsParams::build`] takes: `t` (the time slice, which sets
/// the others) and one per [`FcsParams`] entry.
pub const FCS_KEYS: &str = "t, max_wdc_wcs, f_thresh, dc_thresh, cs_thresh, max_ctime, min_ctime, min_init_ctime, max_spin";

/// A bad FCS setting, with where it was given (`place`: `--fcs-opt`, a scenario's
/// `[schemes.fcs]`).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FcsParamError {
    #[error("{place} {key}: unknown FCS parameter (one of {FCS_KEYS})")]
    Unknown { place: String, key: String },
    #[error("{place} {key}={value}: {why}")]
    Value {
        place: String,
        key: String,
        value: String,
        why: String,
    },
    #[error("{place} {word:?}: expected KEY=VALUE")]
    NotKeyValue { place: String, word: String },
}

/// Per-process FCS state: class, the statistics (C_CS, C_DC, T_CS, T_DC and the derived
/// W_CS, W_DC) and the per-class counters used by the heuristic.
#[derive(Clone, Debug, PartialEq)]
pub struct FcsProc {
    pub class: ProcClass,
    pub c_cs: u64,
    pub c_dc: u64,
    pub t_cs: Dur,
    pub t_dc: Dur,
    /// CPU time spent in the current class.
    pub ctime: Dur,
    /// Blocking communication operations in the current class.
    pub events: u64,
    /// Longest wait that completed without blocking (for the adaptive spin time).
    pub max_nonblock: Option<Dur>,
}

impl Default for FcsProc {
    fn default() -> Self {
        FcsProc {
            class: ProcClass::InitCs,
            c_cs: 0,
            c_dc: 0,
            t_cs: Dur::ZERO,
            t_dc: Dur::ZERO,
            ctime: Dur::ZERO,
            events: 0,
            max_nonblock: None,
        }
    }
}

impl FcsProc {
    /// Charges CPU time to the current class.
    pub fn ran(&mut self, d: Dur) {
        self.ctime += d;
    }

    /// Records one completed synchronous communication operation: `messages` exchanged (in and
    /// out), `waited` while scheduled, and whether it had to block.
    pub fn comm_done(&mut self, messages: u32, waited: Dur, blocked: bool) {
        if self.class.coscheduled() {
            self.c_cs += u64::from(messages);
            self.t_cs += waited;
        } else {
            self.c_dc += u64::from(messages);
            self.t_dc += waited;
        }
        self.events += 1;
        if !blocked {
            self.max_nonblock = Some(self.max_nonblock.map_or(waited, |m| m.max(waited)));
        }
    }

    /// Mean wait per message while coscheduled (W_CS), in µs; None before any message.
    pub fn w_cs(&self) -> Option<f64> {
        (self.c_cs > 0).then(|| self.t_cs.0 as f64 / self.c_cs as f64)
    }
    /// Mean wait per message while DC (W_DC), in µs.
    pub fn w_dc(&self) -> Option<f64> {
        (self.c_dc > 0).then(|| self.t_dc.0 as f64 / self.c_dc as f64)
    }

    /// The spin time before blocking: `min(2·MAX_nonblock, MAX_spin)`, and `MAX_spin` until a
    /// non-blocking completion has been seen.
    pub fn spin_time(&self, p: &FcsParams) -> Dur {
        match self.max_nonblock {
            Some(m) => (m * 2).min(p.max_spin),
            None => p.max_spin,
        }
    }

    /// The heuristic of Fig. 4.3. Returns the new class when it changes.
    pub fn reclassify(&mut self, p: &FcsParams) -> Option<ProcClass> {
        let old = self.class;
        if old.initial() && self.ctime < p.min_init_ctime {
            return None;
        }
        if self.ctime < p.min_ctime {
            return None;
        }
        if self.ctime > p.max_ctime {
            *self = FcsProc {
                max_nonblock: self.max_nonblock,
                ..FcsProc::default()
            };
            return (old != ProcClass::InitCs).then_some(ProcClass::InitCs);
        }
        let per_event = if self.events == 0 {
            None
        } else {
            Some(Dur(self.ctime.0 / self.events as i64))
        };
        let new = if old == ProcClass::InitCs {
            // §3.5.2: effective fine-grained communicators never leave the initial CS class.
            let fine = per_event.is_some_and(|e| e < p.cs_thresh);
            let effective = self.w_cs().is_some_and(|w| w <= p.f_thresh.0 as f64);
            if fine && effective {
                return None;
            }
            ProcClass::InitDc
        } else if per_event.is_none_or(|e| e > p.dc_thresh) {
            ProcClass::Dc
        } else if self.w_cs().unwrap_or(0.0) > p.f_thresh.0 as f64 {
            ProcClass::F
        } else {
            let ratio = match (self.w_dc(), self.w_cs()) {
                (Some(dc), Some(cs)) if cs > 0.0 => dc / cs,
                (Some(dc), _) if dc > 0.0 => f64::INFINITY,
                _ => 0.0,
            };
            if ratio > p.max_wdc_wcs {
                ProcClass::Cs
            } else {
                ProcClass::Dc
            }
        };
        self.ctime = Dur::ZERO;
        self.events = 0;
        self.class = new;
        (new != old).then_some(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t` sets every entry whatever its position, later keys override single entries, and a
    /// bad key or value is refused with its place, key and value.
    #[test]
    fn build_sets_t_first_then_single_entries_and_names_bad_settings() {
        let f = FcsParams::build(
            Dur::from_millis(200),
            [("f_thresh", "1ms"), ("t", "100ms"), ("max_wdc_wcs", "3")],
            "here",
        )
        .unwrap();
        let want = FcsParams {
            f_thresh: Dur::from_millis(1),
            max_wdc_wcs: 3.0,
            ..FcsParams::table_4_1(Dur::from_millis(100))
        };
        assert_eq!(f, want);
        assert_eq!(
            FcsParams::build(Dur::from_millis(200), [], "here").unwrap(),
            FcsParams::table_4_1(Dur::from_millis(200))
        );
        let e = FcsParams::build(Dur::from_secs(1), [("bogus", "1")], "s.toml: [schemes.fcs]");
        assert_eq!(
            e.unwrap_err().to_string(),
            format!("s.toml: [schemes.fcs] bogus: unknown FCS parameter (one of {FCS_KEYS})")
        );
        let e = FcsParams::build(Dur::from_secs(1), [("max_wdc_wcs", "x")], "--fcs-opt");
        assert_eq!(
            e.unwrap_err().to_string(),
            "--fcs-opt max_wdc_wcs=x: not a number"
        );
        let e = FcsParams::from_opts(Dur::from_secs(1), &["f_thresh".into()], "--fcs-opt");
        assert_eq!(
            e.unwrap_err().to_string(),
            "--fcs-opt \"f_thresh\": expected KEY=VALUE"
        );
        assert!(
            FcsParams::from_opts(Dur::from_secs(1), &["min_ctime=soon".into()], "--fcs-opt")
                .is_err()
        );
    }

    fn params() -> FcsParams {
        FcsParams::table_4_1(Dur::from_millis(200))
    }

    #[test]
    fn table_values() {
        let p = params();
        assert_eq!(p.f_thresh, Dur::from_millis(2));
        assert_eq!(p.min_init_ctime, Dur::from_secs(1));
        assert_eq!(p.max_ctime, Dur::from_secs(100));
    }

    #[test]
    fn silent_process_goes_through_initial_classes_to_dc() {
        let p = params();
        let mut f = FcsProc::default();
        f.ran(Dur::from_millis(500));
        assert_eq!(f.reclassify(&p), None, "too early");
        f.ran(Dur::from_millis(600));
        assert_eq!(f.reclassify(&p), Some(ProcClass::InitDc));
        f.ran(Dur::from_millis(1100));
        assert_eq!(f.reclassify(&p), Some(ProcClass::Dc));
    }

    #[test]
    fn long_waits_make_f_and_short_coscheduled_waits_make_cs() {
        let p = params();
        let mut slow = FcsProc {
            class: ProcClass::InitDc,
            ..FcsProc::default()
        };
        let mut good = slow.clone();
        for _ in 0..100 {
            slow.comm_done(1, Dur::from_millis(10), true);
            good.comm_done(1, Dur::from_millis(3), true);
        }
        slow.ran(Dur::from_secs(2));
        good.ran(Dur::from_secs(2));
        slow.class = ProcClass::InitDc;
        // Good waits 3 ms in DC; now give it coscheduled statistics with tiny waits.
        good.class = ProcClass::Cs;
        for _ in 0..100 {
            good.comm_done(1, Dur::from_micros(20), false);
            slow.class = ProcClass::Cs;
            slow.comm_done(1, Dur::from_millis(10), true);
        }
        good.class = ProcClass::InitDc;
        slow.class = ProcClass::InitDc;
        assert_eq!(slow.reclassify(&p), Some(ProcClass::F));
        assert_eq!(good.reclassify(&p), Some(ProcClass::Cs));
    }

    #[test]
    fn adaptive_spin_is_bounded() {
        let p = params();
        let mut f = FcsProc::default();
        assert_eq!(f.spin_time(&p), p.max_spin);
        f.comm_done(1, Dur::from_micros(30), false);
        assert_eq!(f.spin_time(&p), Dur::from_micros(60));
        f.comm_done(1, Dur::from_secs(1), false);
        assert_eq!(f.spin_time(&p), p.max_spin);
    }

    #[test]
    fn reset_after_max_ctime() {
        let p = params();
        let mut f = FcsProc {
            class: ProcClass::Dc,
            ..FcsProc::default()
        };
        f.ran(Dur::from_secs(101));
        assert_eq!(f.reclassify(&p), Some(ProcClass::InitCs));
        assert_eq!(f.ctime, Dur::ZERO);
    }
}
