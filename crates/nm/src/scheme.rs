//! The node scheme a node manager runs and its parameters, from the command line
//! (`cosched nm --node-scheme --fcs-opt --spin-time`) and back to it (for `cluster up`).

use cosched_core::Dur;
use cosched_node::{FcsParams, Scheme};

/// The FCS time slice unless `--fcs-opt t=` gives one.
const FCS_T: Dur = Dur::from_millis(200);

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
            fcs: FcsParams::table_4_1(FCS_T),
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
        c.fcs = FcsParams::from_opts(FCS_T, fcs_opts, "--fcs-opt").map_err(|e| e.to_string())?;
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
