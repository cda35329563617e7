//! `stepwise demo` — not implemented yet (placeholder until its issue lands).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`stepwise demo` is not implemented yet")
}
