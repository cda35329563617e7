//! `stepwise train`, `predict` and `study` end to end on a small world corpus (w2v text + descriptor image
//! features): determinism across thread counts, the feature-identity check, resumption after `kill -9`, and a
//! study over a suite.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;
use common::{bin, kill_when_exists, run};

fn ok(args: &[&str]) {
    let (code, _, err) = run(bin().args(args).arg("-q"));
    assert_eq!(code, 0, "stepwise {}: {err}", args.join(" "));
}

struct Fixture {
    _td: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn p(&self, name: &str) -> String {
        self.root.join(name).to_string_lossy().into_owned()
    }
}

/// A world of 40 procedures in 4 shared styles, w2v and descriptor stores, visual-cloze questions in RecipeQA
/// mode, and a visual-cloze suite with paper knobs (built once for all tests).
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let td = tempfile::tempdir().unwrap();
        let root = td.path().to_path_buf();
        let f = Fixture { _td: td, root };
        ok(&["world", "generate", "-n", "40", "--seed", "3", "--styles", "4", "-o", &f.p("world")]);
        // Token-level text features: the context encoder's first level (a BiLSTM over each step's tokens) runs.
        ok(&["embed", &f.p("world"), "--encoder", "w2v", "--seed", "1", "--tokens", "-o", &f.p("w2v")]);
        ok(&["embed", &f.p("world"), "--encoder", "descriptor", "-o", &f.p("desc")]);
        let feats = ["--features", &f.p("w2v"), "--features", &f.p("desc")];
        ok(&[
            &["generate", &f.p("world")],
            &feats[..],
            &["--task", "visual_cloze", "--mode", "recipeqa", "-o", &f.p("vc")],
        ]
        .concat());
        // Paper knobs: the study test needs test questions in every setting, and calibrated knobs (the default)
        // drop questions to keep the answer ranks uniform — on 40 procedures some settings keep no test question.
        ok(&[
            &["sweep", &f.p("world")],
            &feats[..],
            &["--task", "visual_cloze", "--knobs-mode", "paper", "-o", &f.p("suite")],
        ]
        .concat());
        f
    })
}

const SMALL: [&str; 10] =
    ["--hidden", "8", "--attention", "8", "--htrn-layers", "1", "--htrn-dim", "16", "--htrn-heads", "2"];

fn train_args(f: &Fixture, model: &str, out: &str, epochs: &str) -> Vec<String> {
    let mut a: Vec<String> = ["train", &f.p("vc"), "--features", &f.p("w2v"), "--features", &f.p("desc")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(
        ["--model", model, "--epochs", epochs, "--patience", epochs, "--batch-size", "8", "-o", out].map(String::from),
    );
    a.extend(SMALL.map(String::from));
    a
}

#[test]
fn trained_weights_are_identical_for_any_thread_count_and_predictions_feed_eval() {
    let f = fixture();
    let mut weights = Vec::new();
    for threads in ["1", "2"] {
        let out = f.p(&format!("bidaf-t{threads}"));
        let (code, _, err) = run(bin().args(train_args(f, "bidaf", &out, "3")).args(["--threads", threads]));
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("BiDAF on visual_cloze"), "{err}");
        weights.push(std::fs::read(Path::new(&out).join("weights.safetensors")).unwrap());
        for file in [
            "config.json",
            "features.json",
            "training.json",
            "training_curve.svg",
            "training_curve.png",
            "manifest.json",
        ] {
            assert!(Path::new(&out).join(file).exists(), "{file}");
        }
    }
    assert_eq!(weights[0], weights[1], "weights differ between --threads 1 and 2");

    let preds = f.p("bidaf.jsonl");
    let (code, _, err) = run(bin().args(["predict", &f.p("bidaf-t1"), &f.p("vc"), "-o", &preds]).args([
        "--features",
        &f.p("w2v"),
        "--features",
        &f.p("desc"),
    ]));
    assert_eq!(code, 0, "{err}");
    let lines = std::fs::read_to_string(&preds).unwrap();
    let n_questions =
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(f.root.join("vc/questions.json")).unwrap())
            .unwrap()["data"]
            .as_array()
            .unwrap()
            .len();
    assert_eq!(lines.lines().count(), n_questions);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert!(first["answer"].as_u64().unwrap() < 4 && first["scores"].as_array().unwrap().len() == 4, "{first}");
    let (code, out, err) = run(bin().args(["eval", &f.p("vc"), "-p", &preds, "--split", "test"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("visual_cloze") || err.contains("visual_cloze"), "{out}{err}");
}

#[test]
fn predict_refuses_features_the_model_was_not_trained_on() {
    let f = fixture();
    let model = f.p("impatient-m");
    let (code, _, err) = run(bin().args(train_args(f, "impatient", &model, "1")));
    assert_eq!(code, 0, "{err}");
    // word2vec fitted with another seed: same encoder name and dimension, different vectors.
    ok(&["embed", &f.p("world"), "--encoder", "w2v", "--seed", "2", "-o", &f.p("w2v-seed2")]);
    let preds = f.p("refused.jsonl");
    let (code, _, err) = run(bin().args(["predict", &model, &f.p("vc"), "-o", &preds]).args([
        "--features",
        &f.p("w2v-seed2"),
        "--features",
        &f.p("desc"),
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("w2v-seed2") && err.contains("text features do not match"), "{err}");
    assert!(!Path::new(&preds).exists(), "nothing is written");
    // A model folder that is not one.
    let (code, _, err) = run(bin().args(["predict", &f.p("desc"), &f.p("vc"), "-o", &preds]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a model folder"), "{err}");
}

#[test]
fn a_killed_training_resumes_to_the_weights_of_an_uninterrupted_run() {
    let f = fixture();
    let straight = f.p("htrn-straight");
    let (code, _, err) = run(bin().args(train_args(f, "htrn", &straight, "20")));
    assert_eq!(code, 0, "{err}");

    let resumed = f.p("htrn-resumed");
    let checkpoint = f.root.join(".htrn-resumed.checkpoint.safetensors");
    // Wait for the first checkpoint (after epoch 1), then SIGKILL — no chance to clean up.
    kill_when_exists(
        bin().args(train_args(f, "htrn", &resumed, "20")).arg("-q").spawn().unwrap(),
        &checkpoint,
        "checkpoint",
    );
    assert!(!Path::new(&resumed).exists(), "killed before the end: no model folder");
    let (code, _, err) = run(bin().args(train_args(f, "htrn", &resumed, "20")));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("resumed after epoch"), "{err}");
    assert_eq!(
        std::fs::read(Path::new(&straight).join("weights.safetensors")).unwrap(),
        std::fs::read(Path::new(&resumed).join("weights.safetensors")).unwrap()
    );
    assert!(!checkpoint.exists(), "the checkpoint is removed once the model is written");
}

#[test]
fn a_study_trains_every_model_on_every_setting_with_several_seeds() {
    let f = fixture();
    let out = f.p("study");
    let mut args: Vec<String> = ["study", &f.p("suite"), "--features", &f.p("w2v"), "--features", &f.p("desc")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(
        ["--epochs", "2", "--patience", "2", "--resamples", "50", "--seeds", "2", "-o", &out].map(String::from),
    );
    args.extend(SMALL.map(String::from));
    let (code, _, err) = run(bin().args(&args));
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(Path::new(&out).join("study.md")).unwrap();
    for needle in [
        "## visual_cloze",
        "| recipeqa |",
        "| knobs-1-1-1 |",
        "Hasty Student",
        "Impatient Reader",
        "BiDAF",
        "HTRN",
        "every model trained with 2 seeds",
        "inputs raw (the papers'), no dropout",
        "RecipeQA − knobs",
        "Each model − the Hasty Student on the same test questions",
    ] {
        assert!(md.contains(needle), "{needle} missing:\n{md}");
    }
    let study: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&out).join("study.json")).unwrap()).unwrap();
    let cells = study["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 9 * 4, "9 settings × (Hasty + 3 models)");
    for c in cells {
        let acc = c["accuracy"]["value"].as_f64().unwrap_or_else(|| panic!("no accuracy: {c}"));
        assert!((0.0..=1.0).contains(&acc));
        // A model's accuracy is the mean of its seeds' (every seed tests the same questions).
        if c["model"] != "Hasty Student" {
            let seeds: Vec<f64> =
                c["seed_accuracies"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(seeds.len(), 2, "{c}");
            assert!((acc - (seeds[0] + seeds[1]) / 2.0).abs() < 1e-12, "{c}");
        }
    }
    // Every trained cell against the Hasty Student of its setting, on the same test questions.
    let versus = study["versus_hasty"].as_array().unwrap();
    assert_eq!(versus.len(), 9 * 3, "9 settings × 3 models");
    for v in versus {
        let hasty = cells.iter().find(|c| c["setting"] == v["setting"] && c["model"] == "Hasty Student").unwrap();
        let model = cells.iter().find(|c| c["setting"] == v["setting"] && c["model"] == v["model"]).unwrap();
        assert_eq!(v["questions"], model["test_questions"], "{v}");
        let d = v["difference"]["value"].as_f64().unwrap();
        let expected = model["accuracy"]["value"].as_f64().unwrap() - hasty["accuracy"]["value"].as_f64().unwrap();
        assert!((d - expected).abs() < 1e-9, "all questions paired, so the difference of the accuracies: {v}");
    }
    for row in study["summary"].as_array().unwrap() {
        let d = &row["difference"];
        let (value, low, high) =
            (d["value"].as_f64().unwrap(), d["low"].as_f64().unwrap(), d["high"].as_f64().unwrap());
        assert!(low <= value + 1e-12 && value <= high + 1e-12, "{row}");
        let recipeqa = row["recipeqa"].as_f64().unwrap();
        assert!((value - (recipeqa - row["knob_mean"].as_f64().unwrap())).abs() < 1e-12, "{row}");
        let verdict = if low > 0.0 || high < 0.0 { "outside noise" } else { "within noise" };
        assert_eq!(row["verdict"], verdict, "{row}");
        assert_eq!(row["difference_sd"].is_null(), row["model"] == "Hasty Student", "{row}");
    }
    for file in [
        "fig4-visual_cloze.png",
        "fig5-visual_cloze-knob3.svg",
        "predictions/visual_cloze/recipeqa/htrn__seed0.jsonl",
        "predictions/visual_cloze/recipeqa/htrn__seed1.jsonl",
        "predictions/visual_cloze/recipeqa/hasty-student.jsonl",
    ] {
        assert!(Path::new(&out).join(file).exists(), "{file}");
    }
    // Each seed's predictions are what `stepwise eval` scores as that seed's accuracy.
    let cell = cells.iter().find(|c| c["setting"] == "recipeqa" && c["model"] == "HTRN").unwrap();
    for (k, acc) in cell["seed_accuracies"].as_array().unwrap().iter().enumerate() {
        let preds = Path::new(&out).join(format!("predictions/visual_cloze/recipeqa/htrn__seed{k}.jsonl"));
        let (code, stdout, err) = run(bin().args([
            "eval",
            &format!("{}/recipeqa/visual_cloze", f.p("suite")),
            "--split",
            "test",
            "-p",
            preds.to_str().unwrap(),
        ]));
        assert_eq!(code, 0, "{err}");
        let shown = format!("{:.1}", 100.0 * acc.as_f64().unwrap());
        assert!(stdout.contains(&shown), "seed {k}: eval and study agree on {shown}:\n{stdout}");
    }
    assert!(!f.root.join(".study.study-work").exists(), "the work folder is removed after success");
}

#[test]
fn a_study_reads_one_task_set_under_its_own_setting() {
    let f = fixture();
    let study = |input: &str, out: &str, extra: &[&str]| {
        let mut args: Vec<String> = ["study", input, "--features", &f.p("w2v"), "--features", &f.p("desc")]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(
            ["--model", "impatient", "--epochs", "1", "--patience", "1", "--resamples", "20", "-o", out]
                .map(String::from),
        );
        args.extend(SMALL.map(String::from));
        args.extend(extra.iter().map(|s| s.to_string()));
        run(bin().args(&args))
    };
    let study_json = |out: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(Path::new(out).join("study.json")).unwrap()).unwrap()
    };
    let cells = |out: &str| study_json(out)["cells"].as_array().unwrap().clone();
    let questions = |dir: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(Path::new(dir).join("questions.json")).unwrap()).unwrap()
    };
    // A copy of the RecipeQA-mode set: its questions with `edit` applied, and its manifest (or none).
    let copy =
        |name: &str, manifest: Option<&dyn Fn(&mut serde_json::Value)>, edit: &dyn Fn(&mut serde_json::Value)| {
            let dir = f.root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let mut set = questions(&f.p("vc"));
            for q in set["data"].as_array_mut().unwrap() {
                edit(q);
            }
            std::fs::write(dir.join("questions.json"), set.to_string()).unwrap();
            if let Some(change) = manifest {
                let text = std::fs::read_to_string(Path::new(&f.p("vc")).join("manifest.json")).unwrap();
                let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
                change(&mut m);
                std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
            }
            dir.to_string_lossy().into_owned()
        };
    // The RecipeQA-mode task set, cross-validated with two seeds: every question is tested once, and the model
    // is compared with the Hasty Student on all of them.
    let out = f.p("study-one");
    let (code, _, err) = study(&f.p("vc"), &out, &["--cv", "3", "--seeds", "2"]);
    assert_eq!(code, 0, "{err}");
    let all = questions(&f.p("vc"))["data"].as_array().unwrap().len();
    let got = cells(&out);
    assert_eq!(got.len(), 2, "Hasty Student and the Impatient Reader: {got:?}");
    for c in &got {
        assert_eq!(c["setting"], "recipeqa", "{c}");
        assert_eq!(c["test_questions"].as_u64(), Some(all as u64), "{c}");
    }
    let versus = study_json(&out)["versus_hasty"].as_array().unwrap().clone();
    assert_eq!(versus.len(), 1, "{versus:?}");
    assert_eq!(versus[0]["questions"].as_u64(), Some(all as u64));
    let difference = got[1]["accuracy"]["value"].as_f64().unwrap() - got[0]["accuracy"]["value"].as_f64().unwrap();
    assert!((versus[0]["difference"]["value"].as_f64().unwrap() - difference).abs() < 1e-9, "{versus:?}");
    let md = std::fs::read_to_string(Path::new(&out).join("study.md")).unwrap();
    assert!(md.contains(&format!("({all}) |")), "the pairs are counted:\n{md}");
    // A knob setting's task set keeps its setting's name (from its manifest), and its own split.
    let knob = format!("{}/knobs-0-1-1/visual_cloze", f.p("suite"));
    let out = f.p("study-knob");
    let (code, _, err) = study(&knob, &out, &["--seeds", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(cells(&out).iter().all(|c| c["setting"] == "knobs-0-1-1"), "{:?}", cells(&out));
    // A set whose manifest names no setting (as `stepwise ingest` writes for RecipeQA's questions), or that has
    // no manifest, is RecipeQA mode; a setting no study knows is refused by its field.
    let unnamed = copy("unnamed", Some(&|m| drop(m["params"].as_object_mut().unwrap().remove("setting"))), &|_| {});
    let no_manifest = copy("no-manifest", None, &|q| q["split"] = "val".into());
    for (input, out) in [(&unnamed, "study-unnamed"), (&no_manifest, "study-no-manifest")] {
        let (code, _, err) = study(input, &f.p(out), &["--cv", "3", "--seeds", "1"]);
        assert_eq!(code, 0, "{input}: {err}");
        assert!(cells(&f.p(out)).iter().all(|c| c["setting"] == "recipeqa"), "{input}");
    }
    let odd = copy("odd-setting", Some(&|m| m["params"]["setting"] = "knobs-2-0-0".into()), &|_| {});
    let (code, _, err) = study(&odd, &f.p("study-odd"), &["--cv", "3", "--seeds", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("params.setting") && err.contains("knobs-2-0-0"), "{err}");
    // A task the set does not hold is refused by name.
    let (code, _, err) = study(&f.p("vc"), &f.p("study-absent"), &["--task", "textual_cloze", "--cv", "3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no textual_cloze questions"), "{err}");
    // Without train and test questions (RecipeQA's are all in val; here train and val only), --cv is asked for.
    let no_test = copy("no-test", Some(&|_| {}), &|q| {
        if q["split"] == "test" {
            q["split"] = "val".into();
        }
    });
    for input in [&no_manifest, &no_test] {
        let (code, _, err) = study(input, &f.p("study-refused"), &["--seeds", "1"]);
        assert_eq!(code, 2, "{input}: {err}");
        assert!(err.contains("no task set has both train and test questions") && err.contains("--cv"), "{err}");
    }
}

#[test]
fn rescaled_inputs_and_dropout_are_saved_and_bad_values_refused() {
    let f = fixture();
    let model = f.p("bidaf-centred");
    let mut args = train_args(f, "bidaf", &model, "1");
    args.extend(["--inputs", "centered", "--dropout", "0.2"].map(String::from));
    let (code, _, err) = run(bin().args(&args));
    assert_eq!(code, 0, "{err}");
    let config = std::fs::read_to_string(Path::new(&model).join("config.json")).unwrap();
    assert!(config.contains("\"method\": \"centered\"") && config.contains("\"dropout\": 0.2"), "{config}");
    let preds = f.p("centred.jsonl");
    ok(&["predict", &model, &f.p("vc"), "--features", &f.p("w2v"), "--features", &f.p("desc"), "-o", &preds]);
    assert!(std::fs::read_to_string(&preds).unwrap().lines().count() > 0);

    // RecipeQA §4.2's candidate embedding: recorded in the config, read back by predict.
    let model = f.p("impatient-item");
    let mut args = train_args(f, "impatient", &model, "1");
    args.extend(["--candidate-embedding", "item"].map(String::from));
    let (code, _, err) = run(bin().args(&args));
    assert_eq!(code, 0, "{err}");
    let config = std::fs::read_to_string(Path::new(&model).join("config.json")).unwrap();
    assert!(config.contains("\"candidate_embedding\": \"item\""), "{config}");
    let preds = f.p("item.jsonl");
    ok(&["predict", &model, &f.p("vc"), "--features", &f.p("w2v"), "--features", &f.p("desc"), "-o", &preds]);
    assert!(std::fs::read_to_string(&preds).unwrap().lines().count() > 0);
    // Another model records nothing: the option changes only the Impatient Reader.
    let model = f.p("bidaf-item");
    let mut args = train_args(f, "bidaf", &model, "1");
    args.extend(["--candidate-embedding", "item"].map(String::from));
    let (code, _, err) = run(bin().args(&args));
    assert_eq!(code, 0, "{err}");
    let config = std::fs::read_to_string(Path::new(&model).join("config.json")).unwrap();
    assert!(!config.contains("candidate_embedding"), "{config}");

    for (option, value, says) in [
        ("--dropout", "1", "--dropout"),
        ("--inputs", "scaled", "--inputs"),
        ("--candidate-embedding", "answer", "--candidate-embedding"),
    ] {
        let out = f.p(&format!("refused-{}", &option[2..]));
        let mut args = train_args(f, "bidaf", &out, "1");
        args.extend([option, value].map(String::from));
        let (code, _, err) = run(bin().args(&args));
        assert_eq!(code, 2, "{option} {value}: {err}");
        assert!(err.contains(says), "{err}");
        assert!(!Path::new(&out).exists(), "{option} {value}: nothing is written");
    }
}
