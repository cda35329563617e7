//! `stepwise r2vq` on the built-in world: split by recipe, the learned text method, answering by route, the
//! tagger; bad input refused with the file and field named.

use std::path::Path;
use std::process::{Command, Output};

fn stepwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepwise")).args(args).output().expect("run stepwise")
}

fn ok(args: &[&str]) -> String {
    let o = stepwise(args);
    assert!(o.status.success(), "stepwise {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

#[test]
fn split_train_answer_and_tag_on_the_world() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    ok(&["world", "generate", "-n", "40", "--seed", "3", "-o", &p(d, "world")]);
    ok(&["generate", &p(d, "world"), "--task", "r2vq", "--seed", "3", "-o", &p(d, "q")]);
    let train = p(d, "q/train.csv");

    // Split by recipe: the parts are disjoint and together the whole; same seed, same bytes.
    ok(&["r2vq", "split", &train, "--held-out", "0.25", "--seed", "1", "-o", &p(d, "split")]);
    ok(&["r2vq", "split", &train, "--held-out", "0.25", "--seed", "1", "-o", &p(d, "split2")]);
    for f in ["fit.csv", "held-out.csv"] {
        assert_eq!(std::fs::read(d.join("split").join(f)).unwrap(), std::fs::read(d.join("split2").join(f)).unwrap());
    }
    let ids = |f: &str| -> Vec<String> {
        std::fs::read_to_string(d.join("split").join(f))
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("# newdoc id = ").map(str::to_string))
            .collect()
    };
    let (fit, held) = (ids("fit.csv"), ids("held-out.csv"));
    assert!(!held.is_empty() && fit.iter().all(|r| !held.contains(r)), "{fit:?} / {held:?}");

    // The span model: trained on the fit part, asked about the held-out part; deterministic.
    let summary = ok(&["r2vq", "train-text", &p(d, "split/fit.csv"), "--epochs", "3", "-o", &p(d, "span.json")]);
    assert!(summary.contains("span-template questions"), "{summary}");
    ok(&["r2vq", "train-text", &p(d, "split/fit.csv"), "--epochs", "3", "-o", &p(d, "span2.json")]);
    assert_eq!(std::fs::read(d.join("span.json")).unwrap(), std::fs::read(d.join("span2.json")).unwrap());
    let held_csv = p(d, "split/held-out.csv");
    let out = p(d, "answers.jsonl");
    let summary = ok(&["r2vq", "answer", &held_csv, "--text-model", &p(d, "span.json"), "-o", &out]);
    assert!(summary.contains("| family | questions | program | text | unanswerable |"), "{summary}");
    assert!(!summary.contains("fitted on"), "held-out recipes are not the model's: {summary}");
    let answers = std::fs::read_to_string(&out).unwrap();
    assert!(answers.lines().all(|l| l.contains("\"route\":")), "every answer says its route");
    // Asked about its own training recipes, it says so.
    let summary = ok(&["r2vq", "answer", &p(d, "split/fit.csv"), "--text-model", &p(d, "span.json"), "-o", &out]);
    assert!(summary.contains("recipes the text model was fitted on"), "{summary}");

    // The tagger, trained on inline-tagged steps, tags the world's corpus; scores need a layer to compare with.
    let inline = d.join("inline.json");
    let step = "chop ( tool : knife )  ( entity : B-EVENT ) the onion ( participant : chop ) finely . fry ( habitat : \
                pan )  ( entity : B-EVENT ) the carrot ( participant : fry ) for 5 minutes .";
    let recipes: serde_json::Map<String, serde_json::Value> =
        (0..12).map(|k| (format!("r-{k}"), serde_json::json!([step, step]))).collect();
    std::fs::write(&inline, serde_json::Value::Object(recipes).to_string()).unwrap();
    ok(&["r2vq", "train-tagger", inline.to_str().unwrap(), "--epochs", "2", "-o", &p(d, "tagger.json")]);
    ok(&["r2vq", "tag", &p(d, "world"), "--model", &p(d, "tagger.json"), "-o", &p(d, "tagged.csv")]);
    assert!(std::fs::read_to_string(d.join("tagged.csv")).unwrap().contains("# newdoc id = "));
    let o = stepwise(&[
        "r2vq",
        "tag",
        &p(d, "world"),
        "--model",
        &p(d, "tagger.json"),
        "-o",
        &p(d, "t.csv"),
        "--scores",
        &p(d, "s.json"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no cooking-role layer"));
    let summary = ok(&[
        "r2vq",
        "tag",
        &held_csv,
        "--model",
        &p(d, "tagger.json"),
        "-o",
        &p(d, "t.csv"),
        "--scores",
        &p(d, "s.json"),
    ]);
    assert!(summary.contains("| mention EVENT |"), "{summary}");
    let scores: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("s.json")).unwrap()).unwrap();
    assert_eq!(scores["kind"], "r2vq-tagging");
}

#[test]
fn bad_models_and_settings_are_refused_by_name() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    let gold = d.join("gold.csv");
    std::fs::write(
        &gold,
        "# newdoc id = r-1\n# question 7-0 = For how long do you fry the onion?\n# answer 7-0 = N/A\n",
    )
    .unwrap();
    let o = stepwise(&["r2vq", "split", gold.to_str().unwrap(), "--held-out", "1.5", "-o", &p(d, "s")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--held-out 1.5"));
    let model = d.join("model.json");
    std::fs::write(&model, "{\"format\": \"something else\"}").unwrap();
    let o = stepwise(&[
        "r2vq",
        "answer",
        gold.to_str().unwrap(),
        "--text-model",
        model.to_str().unwrap(),
        "-o",
        &p(d, "a"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("model.json") && err.contains("span model"), "{err}");
    assert!(!d.join("a").exists(), "nothing written");
    let o = stepwise(&["r2vq", "tag", gold.to_str().unwrap(), "--model", model.to_str().unwrap(), "-o", &p(d, "t")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("model.json"));
    // No span-template question with an answer to learn from.
    std::fs::write(&gold, "# newdoc id = r-1\n# question 0-0 = How many pans are used?\n# answer 0-0 = 2\n").unwrap();
    let o = stepwise(&["r2vq", "train-text", gold.to_str().unwrap(), "-o", &p(d, "m.json")]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no answered question of a span template"));
}
