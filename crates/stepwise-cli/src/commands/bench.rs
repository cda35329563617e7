//! `stepwise bench ...`: the benchmarks live beside the product, in the `stepwise-bench` program (crate
//! `stepwise-bench`); this command runs it with the same arguments, so `stepwise bench train` and
//! `stepwise-bench train` are one command.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::cli_util::STEPWISE_EXE;
use crate::usage_bail;

/// The environment variable naming the `stepwise-bench` program (default: the one next to `stepwise`).
pub const STEPWISE_BENCH: &str = "STEPWISE_BENCH";

/// Benchmarks that print their targets and ratios against a reference measured in the same run.
#[derive(clap::Args, Debug)]
#[command(
    disable_help_flag = true,
    after_help = "Runs the stepwise-bench program next to stepwise (build it with `cargo build --release -p \
                  stepwise-bench`, or name it in $STEPWISE_BENCH). `stepwise bench --help` lists the benchmarks."
)]
pub struct Args {
    /// The benchmark and its options, as `stepwise-bench` takes them.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "BENCHMARK")]
    pub args: Vec<OsString>,
}

/// Run `stepwise-bench` with the global options this `stepwise` was given and `args`, and exit as it does.
pub fn run(args: Args, globals: &crate::GlobalArgs) -> anyhow::Result<()> {
    let bench = bench_program()?;
    let mut argv: Vec<OsString> = Vec::new();
    if globals.quiet {
        argv.push("--quiet".into());
    }
    argv.extend(std::iter::repeat_n(OsString::from("--verbose"), globals.verbose as usize));
    if let Some(n) = globals.threads {
        argv.extend(["--threads".into(), n.to_string().into()]);
    }
    argv.extend(args.args);
    let mut command = Command::new(&bench);
    command.args(&argv).env(STEPWISE_EXE, std::env::current_exe()?);
    // Its usage lines and errors then read `stepwise bench ...`, the name the user typed.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::arg0(&mut command, "stepwise bench");
    let status = command.status().map_err(|e| anyhow::anyhow!("running {}: {e}", bench.display()))?;
    match status.code() {
        Some(0) => Ok(()),
        // It has printed its own error; exit with its code.
        Some(code) => std::process::exit(code),
        None => anyhow::bail!("{} was stopped by a signal ({status})", bench.display()),
    }
}

/// `$STEPWISE_BENCH`, else `stepwise-bench` next to this program.
fn bench_program() -> anyhow::Result<PathBuf> {
    match crate::cli_util::companion_program("stepwise-bench", STEPWISE_BENCH) {
        Ok(p) => Ok(p),
        Err(looked_at) => usage_bail!(
            "stepwise bench runs the stepwise-bench program, which is not at {}: build it with `cargo build \
             --release -p stepwise-bench` (or `cargo install --path crates/stepwise-bench`), or name it in \
             ${STEPWISE_BENCH}",
            looked_at.display()
        ),
    }
}
