//! `stepwise world ...` — not implemented yet (placeholder until its issue lands).

#[derive(clap::Subcommand, Debug)]
pub enum WorldCommand {
    /// Generate a corpus from the built-in world.
    Generate,
}

pub fn run(_cmd: WorldCommand) -> anyhow::Result<()> {
    anyhow::bail!("`stepwise world` is not implemented yet")
}
