//! Placeholder until the owning crate lands.

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
