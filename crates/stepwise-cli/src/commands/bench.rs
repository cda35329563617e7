//! `stepwise bench ...`: benchmarks that print throughput and ratios against a reference measured in the same run.
//! Each benchmark lives with the command family it measures; this module only dispatches.

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Placeholder until the first benchmark lands.
    None,
}

pub fn run(_cmd: BenchCommand) -> anyhow::Result<()> {
    anyhow::bail!("no benchmarks yet")
}
