//! The `stepwise` command line as a library: the binary (`src/main.rs`) calls [`main`]; the fuzz targets
//! (`fuzz/`) parse command lines with [`parse_command_line`]. Each command lives in `commands/<name>.rs` with its
//! clap `Args` and `run`.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad input or usage.

pub mod allocator;
pub mod cli_util;
mod commands;
pub mod fuzz_targets;

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
    #[command(flatten)]
    globals: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// The options every stepwise program takes (`stepwise` and `stepwise-bench`), before or after the command.
#[derive(clap::Args, Debug)]
pub struct GlobalArgs {
    /// Print only errors (no progress bars, no summaries on stderr).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// More log output (-v info, -vv debug, -vvv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long, global = true, value_name = "N")]
    pub threads: Option<usize>,
}

#[derive(Subcommand, Debug)]
enum Command {
    Demo(commands::demo::Args),
    Ingest(commands::ingest::Args),
    Clean(commands::clean::Args),
    Stats(commands::stats::Args),
    /// The built-in procedure world: generate a corpus with exact ground truth, render images, contact sheets.
    #[command(subcommand)]
    World(commands::world::WorldCommand),
    Embed(commands::embed::Args),
    /// Feature stores: join the part stores of a sharded `stepwise embed` run.
    #[command(subcommand)]
    Features(commands::features::FeaturesCommand),
    Neighbors(commands::neighbors::Args),
    /// Pretrained models in the local models folder: list, convert, classify images, encode texts or images.
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    Generate(commands::generate::Args),
    Sweep(commands::sweep::Args),
    Audit(commands::audit::Args),
    Export(commands::export::Args),
    Eval(commands::eval::Args),
    Baseline(commands::baseline::Args),
    Train(commands::train::Args),
    Predict(commands::predict::Args),
    Pretrain(commands::train_seq::PretrainArgs),
    TrainSeq(commands::train_seq::TrainSeqArgs),
    SeqStudy(commands::seq_study::Args),
    Study(commands::study::Args),
    SelectGolden(commands::select_golden::Args),
    /// R2VQ (SemEval-2022 Task 9) annotation: event-ordering instances.
    #[command(subcommand)]
    R2vq(commands::r2vq::R2vqCommand),
    /// Human judgements in a web app: ordering studies and alternative orders (create, serve, export).
    #[command(subcommand)]
    Annotate(commands::annotate::AnnotateCommand),
    Report(commands::report::Args),
    Bench(commands::bench::Args),
}

/// The `stepwise` program: parse `std::env::args`, run the command, map errors to exit codes.
pub fn main() -> ExitCode {
    run_program(|cli: &Cli| &cli.globals, dispatch)
}

/// A stepwise program's life (`stepwise`, `stepwise-bench`): parse the command line as `P`, set up the process
/// from its [`GlobalArgs`] (logging, `--quiet`, threads, the command line manifests record), run, and map an
/// error to its exit code.
pub fn run_program<P: Parser>(
    globals: impl FnOnce(&P) -> &GlobalArgs,
    run: impl FnOnce(P) -> anyhow::Result<()>,
) -> ExitCode {
    // candle 0.11 runs large elementwise ops on its own spin-waiting thread pool; when the cores are shared
    // (another build, another job) the spinning main thread waits for a descheduled worker, which made training
    // several times slower on a loaded machine (docs/performance.md). Matrix products still use every thread
    // (rayon). Set before any candle op so the pool is created with this size; a user's own
    // CANDLE_NUM_THREADS wins.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
    let parsed = match P::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let g = globals(&parsed);
    cli_util::init_logging(g.quiet, g.verbose);
    stepwise_core::progress::set_quiet(g.quiet);
    stepwise_core::manifest::set_command_line(cli_util::canonical_command_line(std::env::args()));
    if let Err(e) = cli_util::init_threads(g.threads) {
        eprintln!("error: {e:#}");
        return ExitCode::from(2);
    }
    match run(parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cli_util::exit_code(&e))
        }
    }
}

/// Run one command (the arms of the CLI, shared by `main` and [`run_in_process`]).
fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo(a) => commands::demo::run(a),
        Command::Ingest(a) => commands::ingest::run(a),
        Command::Clean(a) => commands::clean::run(a),
        Command::Stats(a) => commands::stats::run(a),
        Command::World(c) => commands::world::run(c),
        Command::Embed(a) => commands::embed::run(a),
        Command::Neighbors(a) => commands::neighbors::run(a),
        Command::Models(c) => commands::models::run(c),
        Command::Features(c) => commands::features::run(c),
        Command::Generate(a) => commands::generate::run(a),
        Command::Sweep(a) => commands::sweep::run(a),
        Command::Audit(a) => commands::audit::run(a),
        Command::Export(a) => commands::export::run(a),
        Command::Eval(a) => commands::eval::run(a),
        Command::Baseline(a) => commands::baseline::run(a),
        Command::Train(a) => commands::train::run(a),
        Command::Predict(a) => commands::predict::run(a),
        Command::Pretrain(a) => commands::train_seq::run_pretrain(a),
        Command::TrainSeq(a) => commands::train_seq::run_train_seq(a),
        Command::SeqStudy(a) => commands::seq_study::run(a),
        Command::Study(a) => commands::study::run(a),
        Command::SelectGolden(a) => commands::select_golden::run(a),
        Command::R2vq(c) => commands::r2vq::run(c),
        Command::Annotate(c) => commands::annotate::run(c),
        Command::Report(a) => commands::report::run(a),
        Command::Bench(a) => commands::bench::run(a, &cli.globals),
    }
}

/// Run a `stepwise` command line in this process (`argv` without the program name), exactly as the CLI would —
/// `stepwise demo` runs its stages this way. Process-wide settings (`--quiet`, `--threads`, logging) stay as the
/// outer invocation set them; manifests written meanwhile record this command line (then the outer one again).
/// A command line that does not parse is a usage error.
pub(crate) fn run_in_process<S: AsRef<str>>(argv: &[S]) -> anyhow::Result<()> {
    let args: Vec<String> =
        std::iter::once("stepwise").chain(argv.iter().map(AsRef::as_ref)).map(String::from).collect();
    let cli =
        Cli::try_parse_from(&args).map_err(|e| anyhow::Error::new(cli_util::UsageError(e.render().to_string())))?;
    let outer = stepwise_core::manifest::command_line();
    stepwise_core::manifest::set_command_line(cli_util::canonical_command_line(args.into_iter()));
    let result = dispatch(cli);
    stepwise_core::manifest::set_command_line(outer);
    result
}

/// Parse a `stepwise` command line (`argv` without the program name) as the CLI would, without running it: `Err`
/// holds clap's message. For the argument-parsing fuzz target.
pub fn parse_command_line<S: AsRef<str>>(argv: &[S]) -> Result<(), String> {
    let args = std::iter::once("stepwise").chain(argv.iter().map(AsRef::as_ref));
    Cli::try_parse_from(args).map(|_| ()).map_err(|e| e.render().to_string())
}
