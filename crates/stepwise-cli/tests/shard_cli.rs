//! Sharded runs (`embed --shard`, `features merge`, `sweep --shard`, `sweep --merge`): the merged outputs are
//! byte-identical to a single run's, a killed part resumes, and parts that do not belong together are refused
//! with the part and the reason.

use std::path::Path;

use stepwise_core::output::read_tree;

mod common;
use common::{bin, kill_when_exists, run};

fn ok(args: &[&str], dir: &Path) -> String {
    let (code, _, err) = run(bin().args(args).current_dir(dir));
    assert_eq!(code, 0, "stepwise {args:?}: {err}");
    err
}

fn fails(args: &[&str], dir: &Path) -> String {
    let (code, _, err) = run(bin().args(args).current_dir(dir));
    assert_eq!(code, 2, "stepwise {args:?} should be refused: {err}");
    err
}

fn assert_same_tree(a: &Path, b: &Path) {
    let (x, y) = (read_tree(a).unwrap(), read_tree(b).unwrap());
    assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{} vs {}", a.display(), b.display());
    for (name, bytes) in &x {
        assert!(bytes == &y[name], "{name} differs between {} and {}", a.display(), b.display());
    }
}

fn world(d: &Path) {
    ok(&["-q", "world", "generate", "-n", "48", "--seed", "5", "-o", "world"], d);
}

#[test]
fn merged_feature_stores_equal_a_single_run_for_fitted_token_and_patch_stores() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    // w2v is fitted on the corpus (every part must fit the same model) and stores tokens; descriptor stores patches.
    let cases: [(&str, &[&str], usize); 2] = [
        ("w2v", &["--encoder", "w2v", "--tokens", "--seed", "3"], 3),
        ("img", &["--encoder", "descriptor", "--patches", "--grid", "2"], 2),
    ];
    for (name, opts, n) in cases {
        let single = format!("single-{name}");
        let mut args = vec!["-q", "embed", "world", "-o", &single];
        args.extend_from_slice(opts);
        ok(&args, d);
        let mut parts = Vec::new();
        for i in (0..n).rev() {
            let part = format!("part-{name}-{i}");
            let shard = format!("{i}/{n}");
            let mut args = vec!["embed", "world", "--shard", &shard, "-o", &part];
            args.extend_from_slice(opts);
            let err = ok(&args, d);
            assert!(err.contains(&format!("shard {shard} of the items")), "{err}");
            parts.push(part);
        }
        let merged = format!("merged-{name}");
        let mut args = vec!["features", "merge"];
        args.extend(parts.iter().map(String::as_str));
        args.extend(["-o", merged.as_str()]);
        let err = ok(&args, d);
        assert!(err.contains(&format!("from {n} parts")), "{err}");
        assert_same_tree(&d.join(&single), &d.join(&merged));
        // The parts' own manifests say which shard they hold; the merged one does not.
        let part = std::fs::read_to_string(d.join(&parts[0]).join("manifest.json")).unwrap();
        assert!(part.contains("\"shard\""), "{part}");
    }
}

#[test]
fn a_killed_part_resumes_and_still_merges_identically() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "-o", "single"], d);
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "--shard", "0/2", "-o", "p0"], d);
    // Part 1 killed with SIGKILL once its first checkpoint exists, then re-run: it resumes from its checkpoints.
    let child = bin()
        .args(["-q", "embed", "world", "--encoder", "descriptor", "--shard", "1/2", "--chunk-items", "8", "-o", "p1"])
        .current_dir(d)
        .spawn()
        .unwrap();
    kill_when_exists(child, &d.join("p1/.work/run.json"), "checkpoint");
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "--shard", "1/2", "--chunk-items", "8", "-o", "p1"], d);
    ok(&["-q", "features", "merge", "p1", "p0", "-o", "merged"], d);
    assert_same_tree(&d.join("single"), &d.join("merged"));
}

#[test]
fn merged_suites_equal_a_single_run_with_exact_and_ivf_search() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "-o", "f-img"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "-o", "f-txt"], d);
    for search in ["exact", "ivf"] {
        let options = ["--features", "f-img", "--features", "f-txt", "--neighbors", search, "--seed", "2"];
        let single = format!("single-{search}");
        let mut args = vec!["-q", "sweep", "world", "-o", &single];
        args.extend_from_slice(&options);
        ok(&args, d);
        let mut parts = Vec::new();
        for i in [2, 0, 1] {
            let part = format!("part-{search}-{i}");
            let shard = format!("{i}/3");
            // Thread counts differ between parts: results never depend on them.
            let threads = if i == 1 { "1" } else { "2" };
            let mut args = vec!["-q", "--threads", threads, "sweep", "world", "--shard", &shard, "-o", &part];
            args.extend_from_slice(&options);
            ok(&args, d);
            parts.push(part);
        }
        let merged = format!("merged-{search}");
        let mut args = vec!["sweep", "--merge"];
        args.extend(parts.iter().map(String::as_str));
        args.extend(["-o", merged.as_str()]);
        let err = ok(&args, d);
        assert!(err.contains("from 3 parts"), "{err}");
        assert_same_tree(&d.join(&single), &d.join(&merged));
    }
}

#[test]
fn parts_that_do_not_belong_together_are_refused_and_nothing_is_written() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "-o", "whole"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "--shard", "0/2", "-o", "a0"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "--shard", "1/2", "-o", "a1"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "--seed", "9", "--shard", "1/2", "-o", "seed9"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "--shard", "1/3", "-o", "b1"], d);
    let e = fails(&["features", "merge", "a0", "-o", "out"], d);
    assert!(e.contains("missing shard(s) 1/2 of the 2-way split"), "{e}");
    let e = fails(&["features", "merge", "a0", "a0", "-o", "out"], d);
    assert!(e.contains("a0 and a0 are both shard 0/2"), "{e}");
    let e = fails(&["features", "merge", "a0", "b1", "-o", "out"], d);
    assert!(e.contains("b1 is shard 1/3 but a0 is shard 0/2"), "{e}");
    let e = fails(&["features", "merge", "a0", "seed9", "-o", "out"], d);
    assert!(e.contains("a0 and seed9 were embedded with different settings (meta.json field `"), "{e}");
    let e = fails(&["features", "merge", "whole", "a1", "-o", "out"], d);
    assert!(e.contains("whole: not a shard store"), "{e}");
    let e = fails(&["sweep", "world", "--features", "a0", "-o", "x"], d);
    assert!(e.contains("a0: shard 0/2 of a sharded embedding, not a whole store"), "{e}");
    let e = fails(&["embed", "world", "--encoder", "w2v", "--shard", "2/2", "-o", "x"], d);
    assert!(e.contains("I must be smaller than N"), "{e}");

    ok(&["-q", "sweep", "world", "--features", "whole", "--task", "textual_cloze", "-o", "suite"], d);
    ok(&["-q", "sweep", "world", "--features", "whole", "--task", "textual_cloze", "--shard", "0/2", "-o", "s0"], d);
    ok(
        &[
            "-q",
            "sweep",
            "world",
            "--features",
            "whole",
            "--task",
            "textual_cloze",
            "--k",
            "20",
            "--shard",
            "1/2",
            "-o",
            "k20",
        ],
        d,
    );
    let e = fails(&["sweep", "--merge", "s0", "k20", "-o", "out"], d);
    assert!(e.contains("are parts of different sweeps (manifest field `command` differs)"), "{e}");
    let e = fails(&["sweep", "--merge", "suite", "s0", "-o", "out"], d);
    assert!(e.contains("suite: a whole suite, not a part"), "{e}");
    let e = fails(&["sweep", "--merge", "whole", "-o", "out"], d);
    assert!(e.contains("a \"features\" folder, not a suite part"), "{e}");
    assert!(!d.join("out").exists());
    let leftovers: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_shard_with_no_items_is_a_valid_empty_part() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    // More shards than items: part 0 of 100000 holds nothing, and says so without failing.
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "--shard", "0/100000", "-o", "empty"], d);
    // A run killed after making its work folder but before its run file left only `.work/`: the next run proceeds
    // (a Ray retry of a killed shard found this and was refused).
    std::fs::create_dir_all(d.join("early/.work")).unwrap();
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "--shard", "1/2", "-o", "early"], d);
    let meta = std::fs::read_to_string(d.join("empty/meta.json")).unwrap();
    assert!(meta.contains("\"count\": 0") && meta.contains("\"shard\": \"0/100000\""), "{meta}");
}

#[test]
fn a_merged_suite_keeps_task_sets_only_an_alias_setting_asked_for() {
    // Visual ordering has no knob 3: asking for knobs-1-1-1 alone writes knobs-1-1-0/visual_ordering, which the
    // counts table lists only as the alias row of knobs-1-1-1.
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "-o", "f"], d);
    let options = ["--features", "f", "--task", "visual_ordering", "--settings", "recipeqa,knobs-1-1-1"];
    ok(&[&["-q", "sweep", "world", "-o", "single"][..], &options[..]].concat(), d);
    assert!(d.join("single/knobs-1-1-0/visual_ordering/questions.json").is_file());
    for i in 0..2 {
        let (shard, out) = (format!("{i}/2"), format!("p{i}"));
        ok(&[&["-q", "sweep", "world", "--shard", &shard, "-o", &out][..], &options[..]].concat(), d);
    }
    ok(&["-q", "sweep", "--merge", "p0", "p1", "-o", "merged"], d);
    assert_same_tree(&d.join("single"), &d.join("merged"));
}

#[test]
fn sweep_refuses_the_families_only_generate_makes_and_writes_nothing() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    world(d);
    for family in ["sequencing", "r2vq"] {
        let err = fails(&["sweep", "world", "--task", family, "-o", "suite"], d);
        assert!(
            err.contains(&format!("--task {family} is made by `stepwise generate --task {family}`, not here")),
            "{err}"
        );
        assert!(!d.join("suite").exists(), "sweep --task {family} left an output folder");
    }
    let err = fails(&["sweep", "world", "--task", "cloze", "-o", "suite"], d);
    assert!(err.contains("unknown task \"cloze\" (textual_cloze, visual_cloze, visual_coherence, visual_ordering, all, sequencing, r2vq)"), "{err}");
}
