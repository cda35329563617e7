//! What a new user hit following the README tour and making ordinary mistakes (issue 15): one test per item, each
//! with the exact command, its exit code and the message the user now reads.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{bin, run};

/// `stepwise ARGS` with `STEPWISE_MODELS` cleared (the CI exports it), run in `cwd`.
fn sw(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    run(bin().current_dir(cwd).env_remove("STEPWISE_MODELS").args(args))
}

/// A small world corpus with text and image stores and a visual-cloze task set, made once for the file's tests.
struct World {
    dir: PathBuf,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("stepwise-newcomer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for args in [
            &["world", "generate", "-n", "40", "--seed", "1", "-o", "world", "-q"][..],
            &["embed", "world", "--encoder", "descriptor", "-o", "feats/desc", "-q"],
            &["embed", "world", "--encoder", "w2v", "-o", "feats/w2v", "-q"],
            &["generate", "world", "--features", "feats/desc", "--task", "visual_cloze", "-o", "vc", "-q"],
        ] {
            let (code, _, err) = sw(&dir, args);
            assert_eq!(code, 0, "{args:?}: {err}");
        }
        World { dir }
    })
}

/// Item 1: a word of the vocabulary given with `--vocab` is never split, and the report counts such splits.
#[test]
fn clean_never_splits_a_word_of_the_given_vocabulary() {
    let td = tempfile::tempdir().unwrap();
    // "for" and "give" are frequent, "forgive" rare: the corpus model alone cuts it, as it cut RecipeQA's words.
    let mut lines = String::new();
    for i in 0..12 {
        let text = if i == 0 {
            "Please forgive the mess, then give it a stir for a minute."
        } else {
            "Give the sauce a stir for a minute, then give it a rest for a minute."
        };
        lines.push_str(&format!(
            r#"{{"id":"p/{i}","title":"Sauce {i}","steps":[{{"text":"{text}"}},{{"text":"Give it time for the flavours."}},{{"text":"Serve it for dinner."}}]}}"#
        ));
        lines.push('\n');
    }
    std::fs::write(td.path().join("c.jsonl"), lines).unwrap();
    std::fs::write(td.path().join("vocab.txt"), "the\nforgive\ngive\nfor\n").unwrap();
    let (code, _, err) = sw(td.path(), &["clean", "c.jsonl", "-o", "plain", "-q"]);
    assert_eq!(code, 0, "{err}");
    let plain = std::fs::read_to_string(td.path().join("plain/procedures.jsonl")).unwrap();
    assert!(plain.contains("for give"), "without --vocab the corpus model splits the rare word: {plain}");

    let (code, _, err) = sw(td.path(), &["clean", "c.jsonl", "-o", "kept", "--vocab", "vocab.txt"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("segmenter kept 1 vocabulary words whole"), "{err}");
    let kept = std::fs::read_to_string(td.path().join("kept/procedures.jsonl")).unwrap();
    assert!(kept.contains("Please forgive the mess") && !kept.contains("for give"), "{kept}");
    let md = std::fs::read_to_string(td.path().join("kept/clean_report.md")).unwrap();
    assert!(md.contains("- words of the reference vocabulary split: 0"), "{md}");
    assert!(md.contains("would split them): 1 (forgive)"), "{md}");
}

/// Item 2: `STEPWISE_MODELS` is honoured wherever `--models` exists, and the error names both.
#[test]
fn models_folder_comes_from_stepwise_models_and_the_error_says_so() {
    let w = world();
    let (code, _, err) = run(bin().current_dir(&w.dir).env("STEPWISE_MODELS", "/nowhere/models").args([
        "embed",
        "world",
        "--encoder",
        "minilm",
        "-o",
        "feats/minilm",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nowhere/models/all-minilm-l6-v2"), "the env folder is used: {err}");
    assert!(err.contains("scripts/fetch-models.sh"), "{err}");
    assert!(err.contains("pass `--models DIR` or set STEPWISE_MODELS=DIR"), "{err}");
    let (code, _, err) = sw(&w.dir, &["embed", "world", "--encoder", "minilm", "--models", "/elsewhere", "-o", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("/elsewhere/all-minilm-l6-v2"), "{err}");
    let (_, help, _) = sw(&w.dir, &["embed", "--help"]);
    assert!(help.contains("STEPWISE_MODELS"), "{help}");
}

/// Item 3: embedding that yields no item is an error naming the cause, and generate names it too.
#[test]
fn embedding_nothing_is_an_error_with_the_cause() {
    let td = tempfile::tempdir().unwrap();
    std::fs::write(
        td.path().join("text.jsonl"),
        r#"{"id":"t/1","title":"T","steps":[{"text":"Mix."},{"text":"Bake."},{"text":"Serve."}]}"#,
    )
    .unwrap();
    let (code, _, err) = sw(td.path(), &["ingest", "text.jsonl", "-o", "textonly", "-q"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = sw(td.path(), &["embed", "textonly", "--encoder", "descriptor", "-o", "f"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the corpus has no step images"), "{err}");
    assert!(err.contains("embed it with a text encoder"), "{err}");
    assert!(!td.path().join("f").exists(), "nothing is written");

    // Every image referenced, none readable (RecipeQA without its images).
    std::fs::write(
        td.path().join("img.jsonl"),
        r#"{"id":"i/1","title":"T","steps":[{"text":"Mix.","images":["a.jpg"]},{"text":"Bake.","images":["b.jpg"]},{"text":"Serve.","images":["c.jpg"]}]}"#,
    )
    .unwrap();
    let (code, _, err) = sw(td.path(), &["ingest", "img.jsonl", "-o", "noimages", "-q"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = sw(td.path(), &["embed", "noimages", "--encoder", "descriptor", "-o", "f2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("all 3 inputs failed to encode"), "{err}");
    assert!(err.contains("failures.jsonl"), "{err}");
    assert!(td.path().join("f2/failures.jsonl").is_file(), "the failure list is kept");
    let (code, _, err) = sw(td.path(), &["embed", "noimages", "--encoder", "descriptor", "-o", "f2"]);
    assert_eq!(code, 2, "a re-run says it again: {err}");
    let (code, _, err) =
        sw(td.path(), &["generate", "noimages", "--features", "f2", "--task", "visual_cloze", "-o", "vc"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the `descriptor` store holds no vectors (3 inputs failed to encode"), "{err}");
}

/// Item 4: analyses that rest on no or few items warn on the console and in their report, naming the option.
#[test]
fn thin_results_warn_and_name_the_missing_option() {
    let w = world();
    let (code, _, err) = sw(&w.dir, &["audit", "vc", "-o", "audit-nofeat"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: no image feature store was given: pass --features"), "{err}");
    assert!(err.contains("warning: visual_cloze: no question has vectors"), "{err}");
    let md = std::fs::read_to_string(w.dir.join("audit-nofeat/audit.md")).unwrap();
    assert!(md.contains("## Warnings") && md.contains("pass --features"), "{md}");

    // World steps rarely have titles: textual cloze leaves most procedures out, and few questions remain.
    let (code, _, err) =
        sw(&w.dir, &["generate", "world", "--features", "feats/w2v", "--task", "textual_cloze", "-o", "tc"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("procedures were left out (too_few_eligible_steps"), "{err}");
    assert!(err.contains("lower --items or pass --keep-first-step"), "{err}");
    assert!(err.contains("warning: textual_cloze recipeqa: only"), "{err}");
    let m = std::fs::read_to_string(w.dir.join("tc/manifest.json")).unwrap();
    assert!(m.contains("\"warnings\""), "{m}");
}

/// Item 5: the report labels audits by what they audited, summarises one-task sets, and replaces its own previous
/// output (never a file it did not write).
#[test]
fn report_labels_summaries_and_rerun() {
    let w = world();
    let (code, _, err) =
        sw(&w.dir, &["audit", "vc", "--features", "feats/desc", "-o", "audit-vc", "--resamples", "50"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = sw(&w.dir, &["report", ".", "-o", "rep/report.html"]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(w.dir.join("rep/report.md")).unwrap();
    assert!(md.contains("Task set `vc`, setting RecipeQA:"), "the one-task set is summarised: {md}");
    assert!(md.contains("`vc` (RecipeQA)"), "the audit is labelled by its task set: {md}");
    assert!(!md.contains("| `audit-vc` |"), "not by the audit's folder name: {md}");
    let (code, _, err) = sw(&w.dir, &["report", ".", "-o", "rep/report.html"]);
    assert_eq!(code, 0, "a re-run replaces its own report: {err}");
    std::fs::write(w.dir.join("rep/mine.html"), "<html>my notes</html>").unwrap();
    let (code, _, err) = sw(&w.dir, &["report", ".", "-o", "rep/mine.html"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("was not written by `stepwise report`"), "{err}");
    assert_eq!(std::fs::read_to_string(w.dir.join("rep/mine.html")).unwrap(), "<html>my notes</html>");
}

/// Item 6: warnings without colour codes off a terminal; a missing file named once with a hint; predictions of
/// the other kind recognised; ingest's image counts labelled; a text store's items explained; neighbours' column
/// named; `world sheet` says what it wrote.
#[test]
fn smaller_messages() {
    let w = world();
    let (code, _, err) = sw(&w.dir, &["ingest", "missing.jsonl", "-o", "x"]);
    assert_eq!(code, 2);
    assert_eq!(err.matches("no such file or folder").count(), 1, "{err}");
    assert!(err.contains("relative paths start from the current folder"), "{err}");
    assert!(!err.contains("os error"), "{err}");

    let (code, _, err) = sw(&w.dir, &["generate", "world", "--task", "sequencing", "-o", "seq", "-q"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) =
        sw(&w.dir, &["baseline", "seq", "--model", "random", "--features", "feats/w2v", "-o", "seq.jsonl"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("WARN") && !err.contains('\u{1b}'), "no escape codes in a pipe: {err:?}");
    let (code, _, err) = sw(&w.dir, &["eval", "vc", "-p", "seq.jsonl"]);
    assert_eq!(code, 2);
    assert!(err.contains("looks like sequencing predictions"), "{err}");

    let (code, _, err) = sw(&w.dir, &["ingest", "world/procedures.jsonl", "-o", "re-ingested"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("step images; ") && err.contains("distinct image files referenced"), "{err}");

    let (code, _, err) = sw(&w.dir, &["embed", "world", "--encoder", "w2v", "-o", "feats/w2v-again"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("step texts, ") && err.contains("step titles"), "{err}");

    let ids = std::fs::read_to_string(w.dir.join("feats/desc/ids")).unwrap();
    let first = ids.lines().next().unwrap();
    let (code, out, err) = sw(&w.dir, &["neighbors", "feats/desc", "--id", first, "-k", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("rank, cosine distance (1 - cos) (lower is nearer), item id"), "{out}");

    let (code, _, err) = sw(&w.dir, &["world", "sheet", "world", "-o", "sheet.png"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("wrote sheet.png"), "{err}");
}

/// Item 5: an evaluation names the model that made the predictions (prediction lines carry `model`), and so does
/// the report.
#[test]
fn eval_and_report_name_the_model_behind_the_predictions() {
    let w = world();
    let (code, _, err) = sw(&w.dir, &["generate", "world", "--task", "sequencing", "-o", "seq-m", "-q"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = sw(
        &w.dir,
        &["baseline", "seq-m", "--model", "pairwise", "--features", "feats/w2v", "-o", "runs-m/pairwise.jsonl"],
    );
    assert_eq!(code, 0, "{err}");
    let preds = std::fs::read_to_string(w.dir.join("runs-m/pairwise.jsonl")).unwrap();
    assert!(preds.lines().all(|l| l.contains(r#""model":"pairwise (text)""#)), "{preds}");
    let (code, _, err) =
        sw(&w.dir, &["eval", "seq-m", "-p", "runs-m/pairwise.jsonl", "--split", "test", "-o", "runs-m/eval-seq"]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(w.dir.join("runs-m/eval-seq/results.md")).unwrap();
    assert!(md.contains("Predictions made by pairwise (text)."), "{md}");

    // Multiple choice: whatever wrote the file, its `model` is reported.
    let ts = std::fs::read_to_string(w.dir.join("vc/questions.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&ts).unwrap();
    let lines: String = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| format!("{{\"qid\":{},\"answer\":0,\"model\":\"my-model\"}}\n", q["qid"]))
        .collect();
    std::fs::write(w.dir.join("runs-m/vc.jsonl"), lines).unwrap();
    let (code, _, err) = sw(&w.dir, &["eval", "vc", "-p", "runs-m/vc.jsonl", "-o", "runs-m/eval-vc"]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(w.dir.join("runs-m/eval-vc/results.md")).unwrap();
    assert!(md.contains("predictions made by my-model"), "{md}");
    let (code, _, err) = sw(&w.dir, &["report", "runs-m", "-o", "runs-m/report.html"]);
    assert_eq!(code, 0, "{err}");
    let report = std::fs::read_to_string(w.dir.join("runs-m/report.md")).unwrap();
    assert!(report.contains("Predictions made by pairwise (text)."), "{report}");
    assert!(report.contains("| my-model |"), "{report}");
}
