//! One module per subcommand family; each exposes its clap arguments and a `run` that returns
//! the process exit code.

pub mod acct;
pub mod batch;
pub mod bsp;
pub mod compare;
pub mod conn;
pub mod cosim;
pub mod daemon;
pub mod demo;
pub mod generate;
pub mod interactive;
pub mod launch_model;
pub mod memory;
pub mod output;
pub mod pmix_helper;
pub mod policy_args;
mod progress;
pub mod replay;
pub mod sim;
pub mod slurm;
pub mod submit;
pub mod time_limit;
pub mod top;
pub mod workload;
