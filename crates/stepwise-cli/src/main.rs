//! The `stepwise` command line. Each command lives in `commands/<name>.rs` with its clap `Args` and `run`.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad input or usage.

mod cli_util;
mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "stepwise",
    version,
    about = "Multimodal procedural comprehension: ingest procedure corpora, embed steps, generate benchmark tasks \
             with control knobs, run baselines, evaluate and audit.",
    after_help = "Start with `stepwise demo`: it runs the whole pipeline on the built-in synthetic corpus.\n\
                  Exit codes: 0 success, 1 runtime failure, 2 bad input or usage."
)]
struct Cli {
    /// Print only errors (no progress bars, no summaries on stderr).
    #[arg(short, long, global = true)]
    quiet: bool,
    /// More log output (-v info, -vv debug, -vvv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Demo(commands::demo::Args),
    Ingest(commands::ingest::Args),
    Clean(commands::clean::Args),
    Stats(commands::stats::Args),
    #[command(subcommand)]
    World(commands::world::WorldCommand),
    Embed(commands::embed::Args),
    Neighbors(commands::neighbors::Args),
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    Generate(commands::generate::Args),
    Sweep(commands::sweep::Args),
    Audit(commands::audit::Args),
    Eval(commands::eval::Args),
    Baseline(commands::baseline::Args),
    SelectGolden(commands::select_golden::Args),
    Report(commands::report::Args),
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    cli_util::init_logging(cli.quiet, cli.verbose);
    stepwise_core::progress::set_quiet(cli.quiet);
    stepwise_core::manifest::set_command_line(cli_util::canonical_command_line(std::env::args()));
    if let Err(e) = cli_util::init_threads(cli.threads) {
        eprintln!("error: {e:#}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Demo(a) => commands::demo::run(a),
        Command::Ingest(a) => commands::ingest::run(a),
        Command::Clean(a) => commands::clean::run(a),
        Command::Stats(a) => commands::stats::run(a),
        Command::World(c) => commands::world::run(c),
        Command::Embed(a) => commands::embed::run(a),
        Command::Neighbors(a) => commands::neighbors::run(a),
        Command::Models(c) => commands::models::run(c),
        Command::Generate(a) => commands::generate::run(a),
        Command::Sweep(a) => commands::sweep::run(a),
        Command::Audit(a) => commands::audit::run(a),
        Command::Eval(a) => commands::eval::run(a),
        Command::Baseline(a) => commands::baseline::run(a),
        Command::SelectGolden(a) => commands::select_golden::run(a),
        Command::Report(a) => commands::report::run(a),
        Command::Bench(c) => commands::bench::run(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cli_util::exit_code(&e))
        }
    }
}
