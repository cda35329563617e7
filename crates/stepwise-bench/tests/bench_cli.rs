//! The `stepwise-bench` program as users run it: directly, and through `stepwise bench`, which forwards to it.
//! The forwarding tests run the `stepwise` program cargo builds next to this one (`cargo test --workspace`
//! builds both).

use std::path::{Path, PathBuf};
use std::process::Command;

fn bench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stepwise-bench"));
    c.env("COLUMNS", "100").env_remove("STEPWISE_MODELS").env_remove("STEPWISE_EXE");
    c
}

/// The `stepwise` program next to `stepwise-bench`.
fn stepwise_program() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_stepwise-bench")).with_file_name("stepwise");
    assert!(p.is_file(), "{} is missing: run the tests with `cargo test --workspace`, which builds it", p.display());
    p
}

fn run(c: &mut Command) -> (i32, String, String) {
    let o = c.output().expect("run the program");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

const BENCHMARKS: &[&str] = &[
    "features",
    "metrics",
    "encoders",
    "ingest",
    "world",
    "sweep",
    "train",
    "seq-train",
    "r2vq",
    "annotate",
    "reliability",
];

#[test]
fn every_benchmark_is_listed_and_has_help_with_examples() {
    let (code, out, err) = run(bench().arg("--help"));
    assert_eq!(code, 0, "{err}");
    for b in BENCHMARKS {
        assert!(out.contains(&format!("  {b} ")), "{b} missing from the list:\n{out}");
        let (code, out, err) = run(bench().args([b, "--help"]));
        assert_eq!(code, 0, "{b}: {err}");
        assert!(out.contains(&format!("Usage: stepwise-bench {b}")), "{b}: {out}");
    }
    let (_, out, _) = run(bench().args(["ingest", "--help"]));
    assert!(out.contains("Example"), "{out}");
}

/// `stepwise bench ...` run through the `stepwise` program, as users type it.
fn stepwise_bench() -> Command {
    let mut c = Command::new(stepwise_program());
    c.arg("bench").env("COLUMNS", "100").env("STEPWISE_BENCH", env!("CARGO_BIN_EXE_stepwise-bench"));
    c
}

#[test]
fn reliability_bench_help() {
    let (code, out, err) = run(stepwise_bench().args(["reliability", "--help"]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("bench-reliability", out);
}

/// The training benchmarks refuse sizes without parameters before they build anything or start Python.
#[test]
fn training_benchmarks_refuse_empty_sizes() {
    for (bench_name, option, value, want) in [
        ("seq-train", "--model-dim", "0", "--model-dim must be at least 1"),
        ("seq-train", "--layers", "0", "--layers must be at least 1"),
        ("seq-train", "--heads", "0", "--heads must be at least 1"),
        ("seq-train", "--dim-text", "0", "--dim-text must be at least 1"),
        ("seq-train", "--model-dim", "30", "--model-dim 30 is not a multiple of --heads 4"),
        ("train", "--model-dim", "0", "--model-dim must be at least 1"),
        ("train", "--hidden", "0", "--hidden must be at least 1"),
        ("train", "--model-dim", "30", "--model-dim 30 is not a multiple of --heads 8"),
    ] {
        let (code, _, err) = run(bench().args([bench_name, option, value, "--python", "/bin/false"]));
        assert_eq!(code, 2, "{bench_name} {option} {value}: {err}");
        assert!(err.contains(want), "{bench_name} {option} {value}: {err}");
    }
}

/// `encoders --photos` checks its folder before loading any model: a folder without photos and a missing folder
/// are usage errors that name the folder (the models folder here does not exist, so reaching the model load
/// would fail differently).
#[test]
fn encoders_photos_folder_is_checked_first() {
    let td = tempfile::tempdir().unwrap();
    std::fs::write(td.path().join("notes.txt"), "not a photo").unwrap();
    let (code, _, err) =
        run(bench().current_dir(td.path()).args(["encoders", "--models", "no-models", "--photos", "."]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--photos .: no .jpg, .jpeg or .png files in it"), "{err}");
    assert!(!err.contains("no-models"), "{err}");

    let (code, _, err) =
        run(bench().current_dir(td.path()).args(["encoders", "--models", "no-models", "--photos", "gone"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("gone: no such file or folder"), "{err}");
    assert!(!err.contains("no-models"), "{err}");
}

/// `stepwise bench ...` is `stepwise-bench ...`: same help (under the name the user typed), same errors and exit
/// codes, global options before `bench` passed on.
#[test]
fn stepwise_bench_forwards_to_the_bench_program() {
    let (code, out, err) = run(stepwise_bench().args(["reliability", "--help"]));
    assert_eq!(code, 0, "{err}");
    let (_, direct, _) = run(bench().args(["reliability", "--help"]));
    assert_eq!(out, direct.replace("Usage: stepwise-bench reliability", "Usage: stepwise bench reliability"));
    assert!(out.contains("Usage: stepwise bench reliability"), "{out}");

    let (code, out, err) = run(stepwise_bench().arg("--help"));
    assert_eq!(code, 0, "{err}");
    for b in BENCHMARKS {
        assert!(out.contains(&format!("  {b} ")), "{b} missing from the list:\n{out}");
    }

    // A usage error keeps its message and its exit code; a global option given before `bench` reaches it.
    let (code, _, err) = run(stepwise_bench().args(["train", "--hidden", "0", "--python", "/bin/false"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--hidden must be at least 1"), "{err}");
    let (code, _, err) = run(Command::new(stepwise_program())
        .args(["--threads", "0", "bench", "metrics"])
        .env("STEPWISE_BENCH", env!("CARGO_BIN_EXE_stepwise-bench")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--threads must be at least 1"), "{err}");
}

/// Without `stepwise-bench` next to it, `stepwise bench` says how to build it (and exits 2, not a crash).
#[test]
fn stepwise_bench_without_the_bench_program_says_how_to_build_it() {
    let td = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let alone = td.path().join("stepwise");
    // A hard link: the program's own path (/proc/self/exe) is then in the folder without stepwise-bench.
    std::fs::hard_link(stepwise_program(), &alone)
        .or_else(|_| std::fs::copy(stepwise_program(), &alone).map(|_| ()))
        .unwrap();
    let (code, _, err) = run(Command::new(&alone).env_remove("STEPWISE_BENCH").args(["bench", "metrics"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cargo build --release -p stepwise-bench"), "{err}");
}
