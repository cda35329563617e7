//! What the CLI's integration tests share: running the binary and killing it mid-run.

#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The `stepwise` binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stepwise"))
}

/// Exit code, stdout and stderr of `cmd`.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Wait until `path` exists (a checkpoint, a work folder), then SIGKILL `child`: no chance to clean up.
pub fn kill_when_exists(mut child: Child, path: &Path, what: &str) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "no {what} appeared");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its {what} was seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
