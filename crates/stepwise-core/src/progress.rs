//! Progress bars: drawn on stderr only when stdout is a terminal and the user did not ask for `--quiet`.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Called once by the CLI for `--quiet`.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn is_quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

fn visible() -> bool {
    !is_quiet() && std::io::stdout().is_terminal()
}

/// A bar for `len` items with rate and ETA; hidden when not on a terminal.
pub fn bar(len: u64, message: &str) -> ProgressBar {
    if !visible() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} ({per_sec}, ETA {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(message.to_string());
    pb
}

/// A spinner for work of unknown length; hidden when not on a terminal.
pub fn spinner(message: &str) -> ProgressBar {
    if !visible() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_message(message.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}
