//! What users read first, pinned: the `--help` of the binary and of the model commands. A change to a command's
//! options or wording shows up as a snapshot diff to review (`cargo insta review`, or `INSTA_UPDATE=always`).

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
        .args(args)
        .arg("--help")
        // A fixed width: clap wraps help text to the terminal.
        .env("COLUMNS", "100")
        .env_remove("STEPWISE_MODELS")
        .output()
        .expect("run stepwise");
    assert!(out.status.success(), "stepwise {args:?} --help failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

#[test]
fn top_level_help() {
    insta::assert_snapshot!("stepwise", help(&[]));
}

#[test]
fn sequencing_model_commands_help() {
    for cmd in ["pretrain", "train-seq", "seq-study"] {
        insta::assert_snapshot!(cmd, help(&[cmd]));
    }
}

#[test]
fn multiple_choice_model_commands_help() {
    for cmd in ["train", "predict", "study"] {
        insta::assert_snapshot!(cmd, help(&[cmd]));
    }
}

#[test]
fn annotation_commands_help() {
    for cmd in ["create", "serve", "export"] {
        insta::assert_snapshot!(format!("annotate-{cmd}"), help(&["annotate", cmd]));
    }
}

#[test]
fn export_command_help() {
    insta::assert_snapshot!("export", help(&["export"]));
}

#[test]
fn sharded_run_commands_help() {
    insta::assert_snapshot!("features-merge", help(&["features", "merge"]));
    insta::assert_snapshot!("sweep", help(&["sweep"]));
    insta::assert_snapshot!("embed", help(&["embed"]));
}

#[test]
fn r2vq_commands_help() {
    for cmd in ["answer", "split", "train-text", "train-tagger", "tag"] {
        insta::assert_snapshot!(format!("r2vq-{cmd}"), help(&["r2vq", cmd]));
    }
}
