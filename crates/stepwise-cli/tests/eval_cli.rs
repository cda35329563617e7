//! `stepwise eval` end to end on small generated files: tables, exit codes, output folders, determinism.

use std::path::Path;
use std::process::{Command, Output};

fn stepwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepwise")).args(args).output().expect("run stepwise")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A task set with 3 textual_cloze and 2 visual_cloze questions (answers 0, 1, 2, 3, 0).
fn write_taskset(dir: &Path) -> String {
    let q = |qid: &str, recipe: &str, task: &str, answer: u64| {
        serde_json::json!({"qid": qid, "recipe_id": recipe, "task": task, "question": ["@placeholder"],
                           "choice_list": ["a", "b", "c", "d"], "answer": answer})
    };
    let v = serde_json::json!({"data": [
        q("t1", "r1", "textual_cloze", 0), q("t2", "r1", "textual_cloze", 1), q("t3", "r2", "textual_cloze", 2),
        q("v1", "r1", "visual_cloze", 3), q("v2", "r3", "visual_cloze", 0)]});
    let p = dir.join("set.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p.display().to_string()
}

#[test]
fn multiple_choice_table_and_outputs() {
    let td = tempfile::tempdir().unwrap();
    let set = write_taskset(td.path());
    let preds = td.path().join("p.jsonl");
    std::fs::write(&preds, "{\"qid\":\"t1\",\"answer\":0}\n{\"qid\":\"t2\",\"answer\":3}\n{\"qid\":\"v1\",\"answer\":9}\n{\"qid\":\"v2\",\"answer\":0}\n").unwrap();
    let out_dir = td.path().join("res");
    let o =
        stepwise(&["eval", &set, "-p", preds.to_str().unwrap(), "-o", out_dir.to_str().unwrap(), "--bootstrap", "200"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("| textual_cloze | 3 | 33.3 |"), "{md}");
    assert!(md.contains("| visual_cloze | 2 | 50.0 |"), "{md}");
    assert!(md.contains("| all | 5 | 40.0 |"), "{md}");
    assert!(md.contains("1 of 5 questions have no prediction"), "{md}");
    for f in ["results.json", "results.md", "per_question.jsonl", "manifest.json"] {
        assert!(out_dir.join(f).is_file(), "{f}");
    }
    let per_q = std::fs::read_to_string(out_dir.join("per_question.jsonl")).unwrap();
    assert_eq!(per_q.lines().count(), 5);
    assert!(per_q.contains("\"outcome\":\"invalid\""), "{per_q}");

    // Same results for any thread count.
    let j1 = td.path().join("a.json");
    let j2 = td.path().join("b.json");
    let a = stepwise(&["--threads", "1", "eval", &set, "-p", preds.to_str().unwrap(), "--json", j1.to_str().unwrap()]);
    let b = stepwise(&["--threads", "2", "eval", &set, "-p", preds.to_str().unwrap(), "--json", j2.to_str().unwrap()]);
    assert!(a.status.success() && b.status.success());
    assert_eq!(std::fs::read(&j1).unwrap(), std::fs::read(&j2).unwrap());

    // An existing output folder needs --force.
    let again = stepwise(&["eval", &set, "-p", preds.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
}

#[test]
fn foreign_predictions_exit_2() {
    let td = tempfile::tempdir().unwrap();
    let set = write_taskset(td.path());
    let preds = td.path().join("p.jsonl");
    std::fs::write(&preds, "{\"qid\":\"x1\",\"answer\":0}\n{\"qid\":\"x2\",\"answer\":0}\n").unwrap();
    let o = stepwise(&["eval", &set, "-p", preds.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("only 0 of 2 predictions"), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty());
}

#[test]
fn suite_folder_with_per_set_predictions() {
    let td = tempfile::tempdir().unwrap();
    let suite = td.path().join("suite");
    for setting in ["easy", "hard"] {
        let dir = suite.join(setting).join("textual_cloze");
        std::fs::create_dir_all(&dir).unwrap();
        let set = write_taskset(td.path());
        std::fs::copy(&set, dir.join("questions.json")).unwrap();
        let pdir = td.path().join("preds").join(setting).join("textual_cloze");
        std::fs::create_dir_all(&pdir).unwrap();
        let answer = if setting == "easy" { 0 } else { 1 };
        std::fs::write(pdir.join("predictions.jsonl"), format!("{{\"qid\":\"t1\",\"answer\":{answer}}}\n")).unwrap();
    }
    let o = stepwise(&[
        "eval",
        suite.to_str().unwrap(),
        "-p",
        td.path().join("preds").to_str().unwrap(),
        "--bootstrap",
        "0",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("| easy/textual_cloze | textual_cloze | 3 | 33.3 |"), "{md}");
    assert!(md.contains("| hard/textual_cloze | textual_cloze | 3 | 0.0 |"), "{md}");
}

fn write_sequencing(dir: &Path) -> (String, String) {
    let inst = |id: &str, refs: &str, n: usize| {
        let items: Vec<String> = (0..n).map(|k| format!("{{\"step\":{k}}}")).collect();
        format!(
            "{{\"id\":\"{id}\",\"procedure\":\"p\",\"split\":\"test\",\"modality\":\"text\",\"items\":[{}],\"references\":{refs}}}\n",
            items.join(",")
        )
    };
    let instances = dir.join("instances.jsonl");
    std::fs::write(
        &instances,
        inst("a", "[[2,0,1]]", 3) + &inst("b", "[[0,1,2]]", 3) + &inst("c", "[[0,1,2,3],[1,0,2,3]]", 4),
    )
    .unwrap();
    let preds = dir.join("orders.jsonl");
    std::fs::write(
        &preds,
        "{\"id\":\"a\",\"order\":[2,0,1]}\n{\"id\":\"b\",\"order\":[2,1,0]}\n{\"id\":\"c\",\"order\":[1,0,2,3]}\n",
    )
    .unwrap();
    (instances.display().to_string(), preds.display().to_string())
}

#[test]
fn sequencing_metrics_and_errors() {
    let td = tempfile::tempdir().unwrap();
    let (instances, preds) = write_sequencing(td.path());
    let out = td.path().join("seq");
    let o =
        stepwise(&["eval", &instances, "-p", &preds, "--pooled", "--bootstrap", "100", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    // PMR: a and c (against its alternative) are exact, b is reversed → 2/3.
    assert!(md.contains("| all | 3 | 77.8 ["), "{md}");
    assert!(md.contains("Rouge-S (pooled)"), "{md}");
    assert!(md.contains("1 were scored against an alternative order"), "{md}");
    let per = std::fs::read_to_string(out.join("per_instance.jsonl")).unwrap();
    assert!(per.contains("\"id\":\"c\"") && per.contains("\"reference\":1"), "{per}");

    let bad = td.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\":\"a\",\"order\":[2,0,1]}\n{\"id\":\"b\",\"order\":[0,0,1]}\n{\"id\":\"c\",\"order\":[1,0,2,3]}\n",
    )
    .unwrap();
    let o = stepwise(&["eval", &instances, "-p", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("bad.jsonl:2: field `order`: not an order of the 3 items of instance \"b\""), "{err}");
}

#[test]
fn agreement_mode() {
    let td = tempfile::tempdir().unwrap();
    let (instances, _) = write_sequencing(td.path());
    let ann = td.path().join("ann.jsonl");
    std::fs::write(
        &ann,
        "{\"id\":\"c\",\"annotator\":\"w1\",\"order\":[0,1,2,3],\"alternatives\":[[1,0,2,3]]}\n\
         {\"id\":\"c\",\"annotator\":\"w2\",\"order\":[0,1,3,2],\"alternatives\":[[1,0,2,3]]}\n",
    )
    .unwrap();
    let o = stepwise(&["eval", &instances, "--agreement", ann.to_str().unwrap(), "--bootstrap", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    // One discordant pair of 6: κ = 1 − 2/6.
    assert!(md.contains("| order (pairwise one-hot) | 1 | 0.667 |"), "{md}");
    assert!(md.contains("| alternative orders (best match) | 1 | 1.000 |"), "{md}");
}

/// Two R2VQ recipes with gold answers in the SemEval layout (header-only: scoring needs no annotation).
fn write_r2vq_gold(dir: &Path) -> String {
    let p = dir.join("gold.csv");
    std::fs::write(
        &p,
        "# newdoc id = r-1\n# question 0-0 = How many pans are used?\n# answer 0-0 = 2\n\
         # question 4-0 = Cutting x and adding y, which comes first?\n# answer 4-0 = the first event\n\
         # newdoc id = r-2\n# question 2-0 = How do you cut the onion?\n# answer 2-0 = by using a knife\n\
         # question 18-0 = What is in the mix?\n# answer 18-0 = N/A\n",
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn r2vq_answers_are_scored_per_family_and_foreign_ids_are_refused() {
    let td = tempfile::tempdir().unwrap();
    let gold = write_r2vq_gold(td.path());
    let preds = td.path().join("p.jsonl");
    std::fs::write(
        &preds,
        "{\"id\":\"r-1/0-0\",\"answer\":2}\n{\"id\":\"r-1/4-0\",\"answer\":\"The first event.\"}\n\
         {\"id\":\"r-2/2-0\",\"answer\":\"with a knife\"}\n",
    )
    .unwrap();
    let out_dir = td.path().join("res");
    let o = stepwise(&["eval", &gold, "-p", preds.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("4 questions of 2 recipes"), "{md}");
    assert!(md.contains("| 4 event ordering | 1 | 0 | 100.0"), "{md}");
    // "with a knife" vs "by using a knife": 1 shared token of 2 and 3 → F1 0.4.
    // One question of one recipe: nothing to resample, so no interval (not a zero-width one).
    assert!(md.contains("| 2 implicit argument | 1 | 0 | 0.0 | 40.0 |"), "{md}");
    assert!(md.contains("| 18 unanswerable | 1 | 1 | 0.0"), "{md}");
    assert!(md.contains("| **all** | 4 | 1 | 50.0"), "{md}");
    let rows = std::fs::read_to_string(out_dir.join("questions.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 4);
    // Same inputs and seed, same bytes.
    let again = stepwise(&["eval", &gold, "-p", preds.to_str().unwrap()]);
    assert_eq!(text(&again.stdout), md);

    std::fs::write(&preds, "{\"id\":\"r-9/0-0\",\"answer\":\"2\"}\n").unwrap();
    let o = stepwise(&["eval", &gold, "-p", preds.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("p.jsonl:1: field `id`: \"r-9/0-0\" names no question"), "{}", text(&o.stderr));
    let o = stepwise(&["eval", &gold, &gold, "-p", preds.to_str().unwrap(), "--task", "r2vq"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("one gold file"), "{}", text(&o.stderr));
}

#[test]
fn versus_compares_two_methods_on_the_same_items() {
    let td = tempfile::tempdir().unwrap();
    // Multiple choice: A answers t1, t2 and v2 right (3 of 5), B only t1 (1 of 5); A − B = +40 points.
    let set = write_taskset(td.path());
    let a = td.path().join("a.jsonl");
    let b = td.path().join("b.jsonl");
    std::fs::write(&a, "{\"qid\":\"t1\",\"answer\":0}\n{\"qid\":\"t2\",\"answer\":1}\n{\"qid\":\"t3\",\"answer\":0}\n{\"qid\":\"v1\",\"answer\":0}\n{\"qid\":\"v2\",\"answer\":0}\n").unwrap();
    std::fs::write(&b, "{\"qid\":\"t1\",\"answer\":0}\n{\"qid\":\"t2\",\"answer\":0}\n{\"qid\":\"t3\",\"answer\":0}\n{\"qid\":\"v1\",\"answer\":0}\n").unwrap();
    let out = td.path().join("cmp");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let o = stepwise(&["eval", &set, "-p", a, "--versus", b, "--bootstrap", "200", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("| textual_cloze | accuracy (%) | 3 | 66.7 ["), "{md}");
    assert!(md.contains("| visual_cloze | accuracy (%) | 2 | 50.0 ["), "{md}");
    assert!(md.contains("| 33.3 [") && md.contains("| +33.3 ["), "{md}");
    assert!(md.contains("A − B on the same questions"), "{md}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["kind"], "comparison");
    assert_eq!(results["scored"], "multiple_choice");
    let per = std::fs::read_to_string(out.join("per_item.jsonl")).unwrap();
    assert_eq!(per.lines().count(), 5, "{per}");
    assert!(per.contains("\"id\":\"t2\"") && per.contains("\"accuracy\":{\"a\":1.0,\"b\":0.0}"), "{per}");

    // Sequencing, two files on side A (their per-sequence mean) against one on side B.
    let (instances, preds) = write_sequencing(td.path());
    let right = td.path().join("right.jsonl");
    std::fs::write(
        &right,
        "{\"id\":\"a\",\"order\":[2,0,1]}\n{\"id\":\"b\",\"order\":[0,1,2]}\n{\"id\":\"c\",\"order\":[0,1,2,3]}\n",
    )
    .unwrap();
    let right = right.to_str().unwrap();
    let o = stepwise(&["eval", &instances, "-p", right, "-p", &preds, "--versus", &preds, "--bootstrap", "100"]);
    assert_eq!(o.status.code(), Some(2), "a file on both sides is refused");
    assert!(text(&o.stderr).contains("given twice"), "{}", text(&o.stderr));
    let wrong = td.path().join("wrong.jsonl");
    std::fs::write(
        &wrong,
        "{\"id\":\"a\",\"order\":[0,1,2]}\n{\"id\":\"b\",\"order\":[2,1,0]}\n{\"id\":\"c\",\"order\":[3,2,1,0]}\n",
    )
    .unwrap();
    let o = stepwise(&[
        "eval",
        &instances,
        "-p",
        right,
        "-p",
        &preds,
        "--versus",
        wrong.to_str().unwrap(),
        "--bootstrap",
        "100",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    // A: right (PMR 1) and preds (2/3) → 5/6 per sequence on average; B: 0.
    assert!(md.contains("| all | PMR (%) | 3 | 83.3 [") && md.contains("| +83.3 ["), "{md}");
    assert!(md.contains("- A: 2 files (") && md.contains("100.0, 66.7"), "{md}");

    // What --versus does not apply to, and several -p without it.
    let o = stepwise(&["eval", &instances, "-p", right, "--versus", &preds, "--pooled"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let o = stepwise(&["eval", &instances, "-p", right, "-p", &preds]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("several --predictions are compared with --versus"), "{}", text(&o.stderr));
}
