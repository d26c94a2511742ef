//! The node scheme a node manager runs and its parameters, from the command line
//! (`cosched nm --node-scheme --fcs-opt --spin-time`) and back to it (for `cluster up`).

use cosched_core::Dur;
use cosched_node::{FcsParams, Scheme};

/// The node scheme and its parameters (`cosched nm --node-scheme --fcs-opt --spin-time`).
#[derive(Clone, Debug)]
pub struct NodeSchemeConfig {
    pub scheme: Scheme,
    /// `sb`: how long a waiting rank spins before it blocks.
    pub spin: Dur,
    /// `fcs`: seed 000 Table 4.1 (for a time slice `t`, 200 ms unless `--fcs-opt t=`).
    pub fcs: FcsParams,
}

impl Default for NodeSchemeConfig {
    fn default() -> Self {
        NodeSchemeConfig {
            scheme: Scheme::Gs,
            spin: Dur::from_micros(100),
            fcs: FcsParams::table_4_1(Dur::from_millis(200)),
        }
    }
}

impl NodeSchemeConfig {
    /// From the command line: the scheme name (`gs`, `local`, `sb`, `fcs`), `KEY=VALUE` FCS
    /// options (`t` first sets every Table 4.1 entry from the time slice; then `max_wdc_wcs`,
    /// `f_thresh`, `dc_thresh`, `cs_thresh`, `max_ctime`, `min_ctime`, `min_init_ctime`,
    /// `max_spin` override single entries) and the `sb` spin time.
    pub fn parse(scheme: &str, fcs_opts: &[String], spin: Option<Dur>) -> Result<Self, String> {
        let scheme: Scheme = scheme.parse().map_err(|e| format!("--node-scheme: {e}"))?;
        if !matches!(
            scheme,
            Scheme::Gs | Scheme::Local | Scheme::Sb | Scheme::Fcs
        ) {
            return Err(format!(
                "--node-scheme {scheme}: a node manager runs gs, local, sb or fcs"
            ));
        }
        let mut c = NodeSchemeConfig {
            scheme,
            ..Default::default()
        };
        if let Some(s) = spin {
            c.spin = s;
        }
        let mut kv: Vec<(String, String)> = Vec::new();
        for o in fcs_opts {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| format!("--fcs-opt {o:?}: expected KEY=VALUE"))?;
            kv.push((k.trim().to_string(), v.trim().to_string()));
        }
        // The time slice first: the other entries are relative to it.
        kv.sort_by_key(|(k, _)| k != "t");
        for (k, v) in kv {
            let dur = || {
                v.parse::<Dur>()
                    .map_err(|e| format!("--fcs-opt {k}={v}: {e}"))
            };
            let f = &mut c.fcs;
            match k.as_str() {
                "t" => *f = FcsParams::table_4_1(dur()?),
                "max_wdc_wcs" => {
                    f.max_wdc_wcs = v
                        .parse()
                        .map_err(|_| format!("--fcs-opt {k}={v}: not a number"))?
                }
                "f_thresh" => f.f_thresh = dur()?,
                "dc_thresh" => f.dc_thresh = dur()?,
                "cs_thresh" => f.cs_thresh = dur()?,
                "max_ctime" => f.max_ctime = dur()?,
                "min_ctime" => f.min_ctime = dur()?,
                "min_init_ctime" => f.min_init_ctime = dur()?,
                "max_spin" => f.max_spin = dur()?,
                _ => {
                    return Err(format!(
                        "--fcs-opt {k}: unknown (t, max_wdc_wcs, f_thresh, dc_thresh, cs_thresh, max_ctime, min_ctime, min_init_ctime, max_spin)"
                    ));
                }
            }
        }
        Ok(c)
    }

    /// The command-line arguments that give this configuration (for `cluster up`).
    pub fn args(&self) -> Vec<String> {
        let f = &self.fcs;
        let mut a = vec![
            "--node-scheme".to_string(),
            self.scheme.name().to_string(),
            "--spin-time".into(),
            self.spin.to_string(),
        ];
        for (k, v) in [
            ("f_thresh", f.f_thresh),
            ("dc_thresh", f.dc_thresh),
            ("cs_thresh", f.cs_thresh),
            ("max_ctime", f.max_ctime),
            ("min_ctime", f.min_ctime),
            ("min_init_ctime", f.min_init_ctime),
            ("max_spin", f.max_spin),
        ] {
            a.push("--fcs-opt".into());
            a.push(format!("{k}={v}"));
        }
        a.push("--fcs-opt".into());
        a.push(format!("max_wdc_wcs={}", f.max_wdc_wcs));
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_relative_to_the_time_slice() {
        let c = NodeSchemeConfig::parse("fcs", &["f_thresh=1ms".into(), "t=100ms".into()], None)
            .unwrap();
        assert_eq!(c.scheme, Scheme::Fcs);
        assert_eq!(c.fcs.dc_thresh, Dur::from_millis(100));
        assert_eq!(c.fcs.f_thresh, Dur::from_millis(1), "set after t");
        assert!(NodeSchemeConfig::parse("dcs", &[], None).is_err());
        assert!(NodeSchemeConfig::parse("fcs", &["bogus=1".into()], None).is_err());
        let again = NodeSchemeConfig::parse("fcs", &[], None).unwrap();
        let args = again.args();
        let opts: Vec<String> = args
            .chunks(2)
            .filter(|c| c[0] == "--fcs-opt")
            .map(|c| c[1].clone())
            .collect();
        let back = NodeSchemeConfig::parse("fcs", &opts, None).unwrap();
        assert_eq!(back.fcs, again.fcs);
    }
}
