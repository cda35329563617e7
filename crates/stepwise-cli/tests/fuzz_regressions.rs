//! The fuzz targets outside the fuzzer: every built-in seed reaches its reader's happy path, and every input the
//! fuzzer ever found (`fuzz/regressions/<target>/`) is replayed — a panic here is a regression.

use std::path::PathBuf;

use stepwise_cli::fuzz_targets::{TARGETS, Verdict, builtin_seeds, remove_scratch, run};

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
}

#[test]
fn builtin_seeds_are_accepted_by_their_readers() {
    let mut seeded = 0;
    for target in TARGETS {
        for (name, bytes) in builtin_seeds(target).unwrap() {
            assert_eq!(run(target, &bytes).unwrap(), Verdict::Accepted, "{target}: seed {name}");
            seeded += 1;
        }
    }
    remove_scratch();
    assert!(seeded >= 14, "only {seeded} built-in seeds");
}

#[test]
fn found_inputs_are_refused_cleanly() {
    let dir = regressions_dir();
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let target = entry.file_name().to_string_lossy().into_owned();
        assert!(TARGETS.contains(&target.as_str()), "{}: not a fuzz target", entry.path().display());
        for input in std::fs::read_dir(entry.path()).unwrap() {
            let input = input.unwrap().path();
            let bytes = std::fs::read(&input).unwrap();
            // `run` panics on a finding; a clean refusal or an acceptance both pass.
            let verdict = run(&target, &bytes).unwrap();
            eprintln!("{}: {verdict:?}", input.display());
            replayed += 1;
        }
    }
    remove_scratch();
    assert!(replayed > 0, "{}: no findings to replay", dir.display());
}

#[test]
fn a_refusal_names_the_file_and_an_unknown_target_is_an_error() {
    match run("procedure-jsonl", b"{\"id\": 3}\n").unwrap() {
        Verdict::Refused(m) => assert!(m.contains("fuzz-input.jsonl") && m.contains(":1"), "{m}"),
        Verdict::Accepted => panic!("a procedure with a numeric id was accepted"),
    }
    assert!(run("no-such-reader", b"").unwrap_err().contains("the targets: procedure-jsonl"));
    remove_scratch();
}
