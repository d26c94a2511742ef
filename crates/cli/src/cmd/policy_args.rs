//! The policy options every driver takes — `cosched sim`, `sim sweep`, `cosched mm` and
//! `cluster up` — in one clap struct, turned into the policy crate's [`PolicyOptions`] (whose
//! `policy_config` builds the configuration for all of them).

use std::path::PathBuf;

use clap::Args as ClapArgs;
use cosched_core::Dur;
use cosched_policy::PolicyOptions;

/// Options every policy may read (each ignores what it does not use).
#[derive(ClapArgs, Clone, Debug, Default)]
pub struct PolicyArgs {
    /// Multiprogramming level (time-sharing policies)
    #[arg(long)]
    pub mpl: Option<u32>,
    /// Time quantum, e.g. 10s, 50ms (time-sharing policies)
    #[arg(long, value_name = "DUR")]
    pub quantum: Option<Dur>,
    /// Cost of one context switch, e.g. 50ms
    #[arg(long, value_name = "DUR")]
    pub context_switch: Option<Dur>,
    /// TOML file whose [policy] table sets policy options
    #[arg(long, value_name = "FILE.toml")]
    pub policy_config: Option<PathBuf>,
    /// A policy option KEY=VALUE (repeatable; overrides the file)
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    pub opts: Vec<String>,
}

impl PolicyArgs {
    pub fn options(&self) -> PolicyOptions {
        PolicyOptions {
            mpl: self.mpl,
            quantum: self.quantum,
            context_switch: self.context_switch,
            file: self.policy_config.clone(),
            opts: self.opts.clone(),
        }
    }
}
