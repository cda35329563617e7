//! The `stepwise-bench` program (`stepwise bench ...` forwards here): the benchmarks live in the library.
//!
//! Exit codes: 0 success (targets met or only reported), 1 a failed run or guarantee, 2 bad input or usage.

use clap::Parser;
use stepwise_cli::GlobalArgs;

// The same allocator and settings as `stepwise`: the benchmarks measure what the product does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// stepwise's benchmarks: each prints its targets and ratios against a reference measured in the same run.
#[derive(Parser, Debug)]
#[command(name = "stepwise-bench", version)]
struct Cli {
    #[command(flatten)]
    globals: GlobalArgs,
    #[command(subcommand)]
    bench: stepwise_bench::BenchCommand,
}

fn main() -> std::process::ExitCode {
    stepwise_cli::allocator::keep_freed_memory();
    stepwise_cli::run_program(|cli: &Cli| &cli.globals, |cli| stepwise_bench::run(cli.bench))
}
