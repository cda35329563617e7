//! `stepwise models ...` — not implemented yet (placeholder until its issue lands).

#[derive(clap::Subcommand, Debug)]
pub enum ModelsCommand {
    /// Convert downloaded weights to safetensors.
    Convert,
}

pub fn run(_cmd: ModelsCommand) -> anyhow::Result<()> {
    anyhow::bail!("`stepwise models` is not implemented yet")
}
