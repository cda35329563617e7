//! `stepwise features merge PART... -o FEATURES`: join the part stores of a sharded `stepwise embed` run.

use std::path::PathBuf;

use stepwise_features::merge::merge_stores;

use crate::cli_util::feature_error;

/// Feature stores: join the parts of a sharded embedding run.
#[derive(clap::Subcommand, Debug)]
pub enum FeaturesCommand {
    Merge(MergeArgs),
}

/// Join the part stores of `stepwise embed --shard I/N` runs into the store a single run writes.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise embed corpus/ --encoder descriptor --shard 0/2 -o parts/0\n  \
    stepwise embed corpus/ --encoder descriptor --shard 1/2 -o parts/1\n  \
    stepwise features merge parts/0 parts/1 -o features/descriptor\n\n\
    The parts may be given in any order; every shard of the split must be there once, embedded from the same \
    items with the same encoder, options and seed (checked). The merged store is byte-identical to \
    `stepwise embed corpus/ --encoder descriptor -o features/descriptor` (its manifest records that command).")]
pub struct MergeArgs {
    /// Part stores (folders written by `stepwise embed --shard I/N`).
    #[arg(required = true)]
    pub parts: Vec<PathBuf>,
    /// Output feature-store folder.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

pub fn run(cmd: FeaturesCommand) -> anyhow::Result<()> {
    match cmd {
        FeaturesCommand::Merge(a) => {
            let r = merge_stores(&a.parts, &a.output, a.force).map_err(feature_error)?;
            if !stepwise_core::progress::is_quiet() {
                eprintln!("{}: {} items, {} failures, from {} parts", a.output.display(), r.stored, r.failed, r.parts);
            }
            Ok(())
        }
    }
}
