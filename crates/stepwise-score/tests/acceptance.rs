//! Acceptance tests on real data (RecipeQA dev questions in ../shared/data). Run with
//! `cargo test -p stepwise-score --test acceptance -- --ignored`; they fail loudly when the data is missing.

use std::path::PathBuf;

use stepwise_core::TaskSet;
use stepwise_score::accuracy::{Outcome, ScoreOptions, score_set};
use stepwise_score::bootstrap::BootstrapConfig;
use stepwise_score::predictions::{ChoiceFormat, read_choice_predictions};

fn shared_data() -> PathBuf {
    let dir = std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    assert!(
        dir.join("recipeqa/val-dev.json").is_file(),
        "shared data not found at {} (set STEPWISE_SHARED_DATA)",
        dir.display()
    );
    dir
}

fn options() -> ScoreOptions {
    ScoreOptions { bootstrap: BootstrapConfig { resamples: 1000, confidence: 0.95, seed: 0 }, ..Default::default() }
}

/// A JSONL predictions file for the RecipeQA dev questions: correct on every third question, wrong otherwise,
/// no prediction for every tenth. Per-task accuracy and counts must be exactly what that rule gives.
#[test]
#[ignore]
fn recipeqa_jsonl_per_task_accuracy_with_cis() {
    let path = shared_data().join("recipeqa/val-dev.json");
    let ts = TaskSet::load(&path).unwrap();
    let td = tempfile::tempdir().unwrap();
    let preds = td.path().join("preds.jsonl");
    let mut lines = String::new();
    let mut want: std::collections::BTreeMap<String, (usize, usize, usize)> = Default::default();
    for (i, q) in ts.questions.iter().enumerate() {
        let e = want.entry(q.task.clone()).or_default();
        e.0 += 1;
        if i % 10 == 9 {
            e.2 += 1;
            continue;
        }
        let answer = if i % 3 == 0 { q.answer } else { (q.answer + 1) % q.choice_list.len() };
        if i % 3 == 0 {
            e.1 += 1;
        }
        lines.push_str(&format!("{{\"qid\": \"{}\", \"answer\": {answer}}}\n", q.qid));
    }
    std::fs::write(&preds, lines).unwrap();
    let records = read_choice_predictions(&preds, ChoiceFormat::Auto, Some(&ts), None).unwrap();
    let (report, results) = score_set("val-dev", &ts, &records, "preds.jsonl", &options()).unwrap();

    let tasks: Vec<&str> = report.tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(tasks, ["textual_cloze", "visual_cloze", "visual_coherence", "visual_ordering", "all"]);
    let sizes: Vec<usize> = report.tasks.iter().map(|t| t.questions).collect();
    assert_eq!(sizes, [397, 358, 357, 378, 1490], "the README's counts");
    for t in &report.tasks[..4] {
        let (n, correct, missing) = want[&t.task];
        assert_eq!((t.questions, t.correct, t.missing), (n, correct, missing), "{}", t.task);
        assert!((t.accuracy.value - correct as f64 / n as f64).abs() < 1e-15);
        let ci = t.accuracy.ci.expect("an interval");
        assert!(ci.low < t.accuracy.value && t.accuracy.value < ci.high, "{t:?}");
        // A 95% interval on ~370 questions at p ≈ 0.3 is about ±4.7 points wide.
        assert!(ci.high - ci.low > 0.05 && ci.high - ci.low < 0.14, "{t:?}");
    }
    assert_eq!(report.counts.missing, 149);
    assert_eq!(results.iter().filter(|r| r.outcome == Outcome::Missing).count(), 149);
}

/// RecipeQA's official layout: one list per task in file order. Answering 0 everywhere gives the share of
/// questions whose answer is 0.
#[test]
#[ignore]
fn recipeqa_official_lists() {
    let path = shared_data().join("recipeqa/val-dev.json");
    let ts = TaskSet::load(&path).unwrap();
    let mut lists = serde_json::Map::new();
    for (task, n) in ts.counts_by_task() {
        lists.insert(task, serde_json::json!(vec![0; n]));
    }
    let td = tempfile::tempdir().unwrap();
    let preds = td.path().join("official.json");
    std::fs::write(&preds, serde_json::Value::Object(lists).to_string()).unwrap();
    let records = read_choice_predictions(&preds, ChoiceFormat::Auto, Some(&ts), None).unwrap();
    let (report, _) = score_set("val-dev", &ts, &records, "official.json", &options()).unwrap();
    for t in &report.tasks[..4] {
        let zeros = ts.of_task(&t.task).filter(|q| q.answer == 0).count();
        assert_eq!(t.correct, zeros, "{}", t.task);
        assert_eq!(t.missing + t.invalid, 0);
    }
}

/// Predictions of another task set (no qid in common) are refused with an input error.
#[test]
#[ignore]
fn recipeqa_foreign_predictions_are_refused() {
    let path = shared_data().join("recipeqa/val-dev.json");
    let ts = TaskSet::load(&path).unwrap();
    let td = tempfile::tempdir().unwrap();
    let preds = td.path().join("other.jsonl");
    let lines: String =
        ts.questions.iter().map(|q| format!("{{\"qid\": \"test-{}\", \"answer\": 0}}\n", q.qid)).collect();
    std::fs::write(&preds, lines).unwrap();
    let records = read_choice_predictions(&preds, ChoiceFormat::Auto, Some(&ts), None).unwrap();
    let err = score_set("val-dev", &ts, &records, "other.jsonl", &options()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("only 0 of 1490 predictions"), "{err}");
}
