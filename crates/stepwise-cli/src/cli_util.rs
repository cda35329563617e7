//! Shared plumbing of the commands: logging, threads, exit codes, the canonical command line.

use stepwise_core::Error;
use stepwise_features::FeatureError;

/// Logging to stderr: warnings by default, nothing but errors with `--quiet`, more with `-v`.
pub fn init_logging(quiet: bool, verbose: u8) {
    let level = if quiet {
        "error"
    } else {
        match verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("STEPWISE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colour only for a terminal: a log file or a pipe must not get escape codes ("\x1b[33m WARN").
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .without_time()
        .try_init();
}

/// Print a warning the user must see (not a log line: shown even without `-v`, hidden by `--quiet`).
pub fn warn_user(msg: &str) {
    if !stepwise_core::progress::is_quiet() {
        eprintln!("warning: {msg}");
    }
}

/// Size rayon's global pool. Results never depend on it (every random stream is keyed by item, not by thread).
pub fn init_threads(threads: Option<usize>) -> anyhow::Result<()> {
    if let Some(n) = threads {
        if n == 0 {
            anyhow::bail!("--threads must be at least 1");
        }
        rayon::ThreadPoolBuilder::new().num_threads(n).build_global()?;
    }
    Ok(())
}

/// Exit code for an error: the library error's own (2 bad input/usage, 1 runtime), 2 for anyhow errors that wrap
/// an input problem, else 1.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(se) = cause.downcast_ref::<Error>() {
            return se.exit_code() as u8;
        }
        if cause.downcast_ref::<UsageError>().is_some() {
            return 2;
        }
    }
    1
}

/// A usage problem found by a command itself (bad option combination): exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Return early from a command with a usage error (exit code 2).
#[macro_export]
macro_rules! usage_bail {
    ($($t:tt)*) => { return Err(anyhow::Error::new($crate::cli_util::UsageError(format!($($t)*)))) };
}

/// A [`FeatureError`] as a CLI error with the right exit code (2 for what the user can fix).
pub fn feature_error(e: FeatureError) -> anyhow::Error {
    match e {
        FeatureError::Core(c) => anyhow::Error::new(c),
        FeatureError::MissingModel(m) | FeatureError::Mismatch(m) | FeatureError::NoItems(m) => {
            anyhow::Error::new(UsageError(m))
        }
        FeatureError::Encoder(m) => anyhow::anyhow!(m),
    }
}

/// A usage error naming the first option whose value is 0 where at least 1 is needed.
pub fn require_at_least_one(options: &[(&str, usize)]) -> anyhow::Result<()> {
    if let Some((name, _)) = options.iter().find(|(_, v)| *v == 0) {
        usage_bail!("{name} must be at least 1");
    }
    Ok(())
}

/// A usage error unless a dropout rate keeps something: at least 0 and below 1 (NaN refused).
pub fn require_dropout_rate(name: &str, rate: f64) -> anyhow::Result<()> {
    if !(0.0..1.0).contains(&rate) {
        usage_bail!("{name} must be at least 0 and below 1");
    }
    Ok(())
}

/// A usage error unless a transformer's width is a multiple of its attention heads (both checked to be at least 1
/// by [`require_at_least_one`]).
pub fn require_heads_divide(
    (width_name, width): (&str, usize),
    (heads_name, heads): (&str, usize),
) -> anyhow::Result<()> {
    if !width.is_multiple_of(heads) {
        usage_bail!("{width_name} {width} is not a multiple of {heads_name} {heads}");
    }
    Ok(())
}

/// The command line recorded in manifests: `stepwise` and the arguments, without options that do not change
/// results (output path, threads, verbosity, --force), so reruns into another folder give identical manifests.
/// `--shard I/N` is left out too: the parts of a sharded run record their shard separately, so the merged output
/// records the command of the single run it equals.
pub fn canonical_command_line(args: impl Iterator<Item = String>) -> Vec<String> {
    const DROP_WITH_VALUE: &[&str] = &["-o", "--output", "--threads", "--shard"];
    const DROP_FLAG: &[&str] = &["-q", "--quiet", "-v", "-vv", "-vvv", "--verbose", "--force"];
    let mut out = vec!["stepwise".to_string()];
    let mut skip_next = false;
    for a in args.skip(1) {
        if skip_next {
            skip_next = false;
            continue;
        }
        if DROP_WITH_VALUE.contains(&a.as_str()) {
            skip_next = true;
            continue;
        }
        if DROP_FLAG.contains(&a.as_str()) || DROP_WITH_VALUE.iter().any(|f| a.starts_with(&format!("{f}="))) {
            continue;
        }
        out.push(mask_url_password(&a));
    }
    out
}

/// `scheme://user:secret@host/…` → `scheme://user:***@host/…`: manifests travel with outputs (the annotation
/// dashboard's export download records the server's `--database` URL), a password must not.
fn mask_url_password(a: &str) -> String {
    let Some(start) = a.find("://").map(|i| i + 3) else {
        return a.to_string();
    };
    let rest = &a[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    match authority.rfind('@').and_then(|at| authority[..at].find(':').map(|colon| (colon, at))) {
        Some((colon, at)) => format!("{}{}:***{}", &a[..start], &rest[..colon], &rest[at..]),
        None => a.to_string(),
    }
}

/// A companion program of this one (`stepwise` and `stepwise-bench` call each other): the one named in `$env_var`,
/// else `name` next to this program, where cargo builds and installs both. `Err` holds the path looked at.
pub fn companion_program(name: &str, env_var: &str) -> Result<std::path::PathBuf, std::path::PathBuf> {
    if let Some(p) = std::env::var_os(env_var) {
        return Ok(p.into());
    }
    let me = std::env::current_exe().unwrap_or_default();
    let sibling = me.with_file_name(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if sibling.is_file() { Ok(sibling) } else { Err(sibling) }
}

/// The environment variable that names the `stepwise` program to `stepwise-bench` (`stepwise bench` sets it to
/// itself; see [`companion_program`]).
pub const STEPWISE_EXE: &str = "STEPWISE_EXE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_drops_output_and_threads() {
        let args = ["target/stepwise", "world", "generate", "-n", "5", "-o", "x", "--threads=2", "--seed", "3", "-q"];
        let c = canonical_command_line(args.iter().map(|s| s.to_string()));
        assert_eq!(c, ["stepwise", "world", "generate", "-n", "5", "--seed", "3"]);
        let args = ["stepwise", "sweep", "c", "--shard", "1/2", "--seed", "3", "--shard=0/2"];
        let c = canonical_command_line(args.iter().map(|s| s.to_string()));
        assert_eq!(c, ["stepwise", "sweep", "c", "--seed", "3"]);
    }

    #[test]
    fn command_line_masks_passwords_in_urls() {
        let args = [
            "stepwise",
            "annotate",
            "serve",
            "--database",
            "postgres://lab:s3cret@db:5432/study?sslmode=require",
            "--database=postgres://u:p@h/d",
            "postgres://lab@db/study",
            "sqlite:///tmp/a@b.sqlite",
        ];
        let c = canonical_command_line(args.iter().map(|s| s.to_string()));
        assert_eq!(
            c[3..],
            [
                "--database",
                "postgres://lab:***@db:5432/study?sslmode=require",
                "--database=postgres://u:***@h/d",
                "postgres://lab@db/study",
                "sqlite:///tmp/a@b.sqlite"
            ]
        );
    }
}
