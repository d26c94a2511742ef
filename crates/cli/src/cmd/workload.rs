//! Placeholder until the workload crate lands.

#[derive(clap::Subcommand)]
pub enum Command {
    /// Summarise a workload (not implemented yet)
    Info,
}

pub fn run(_c: Command) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
