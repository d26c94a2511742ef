//! Placeholder until the daemons land.

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run the machine manager (not implemented yet)
    Mm,
}

pub fn run(_c: Command) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
