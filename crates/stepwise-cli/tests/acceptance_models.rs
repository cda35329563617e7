//! Acceptance of the commands that read pretrained weights (run with `--ignored`; .ci/run does): the sequencer
//! fine-tuning MiniLM's upper layers (`train-seq --tune-text-layers`) on RecipeQA's dev recipes, then `predict`
//! and `eval` on its test split.
//!
//! Needs the models folder (`scripts/fetch-models.sh`; env `STEPWISE_MODELS`, default `<workspace>/models`) and
//! the shared data (env `STEPWISE_SHARED_DATA`, default `<workspace>/../shared/data`). Either missing is a
//! failure with instructions, never a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn models_dir() -> PathBuf {
    let dir = std::env::var_os("STEPWISE_MODELS").map(PathBuf::from).unwrap_or_else(|| workspace().join("models"));
    assert!(
        dir.join("all-minilm-l6-v2").is_dir(),
        "models folder {} is not installed: run `scripts/fetch-models.sh --models {}` (or set STEPWISE_MODELS)",
        dir.display(),
        dir.display()
    );
    dir
}

fn shared_data() -> PathBuf {
    let dir = std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/data"));
    assert!(dir.join("recipeqa").is_dir(), "shared data not found at {} (set STEPWISE_SHARED_DATA)", dir.display());
    dir
}

fn stepwise(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise")).args(args).arg("-q").output().unwrap();
    assert!(out.status.success(), "stepwise {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// RecipeQA dev recipes (text), MiniLM token store, a small sequencer with MiniLM's last layer fine-tuned for two
/// epochs: the model records the split of the encoder (5 frozen, 1 fine-tuned), its weights hold the fine-tuned
/// layer, prediction recomputes the frozen layers and orders every test instance, and a models folder without
/// MiniLM is refused by name.
#[test]
#[ignore = "needs ../shared/data and the models folder (run by .ci/run)"]
fn sequencer_fine_tunes_minilm_upper_layer_on_recipeqa_dev() {
    let models = models_dir();
    let models = models.to_str().unwrap();
    let recipes = shared_data().join("recipeqa/recipes-dev.json");
    let td = tempfile::tempdir().unwrap();
    let p = |n: &str| td.path().join(n).to_string_lossy().into_owned();
    stepwise(&["ingest", recipes.to_str().unwrap(), "-o", &p("corpus")]);
    stepwise(&["clean", &p("corpus"), "-o", &p("clean")]);
    stepwise(&["embed", &p("clean"), "--encoder", "minilm", "--models", models, "--tokens", "-o", &p("minilm")]);
    stepwise(&[
        "generate",
        &p("clean"),
        "--task",
        "sequencing",
        "--modality",
        "text",
        "--seq-min-steps",
        "3",
        "-o",
        &p("seq"),
    ]);
    let (seq, minilm, model) = (p("seq"), p("minilm"), p("model"));
    stepwise(&[
        "train-seq",
        &seq,
        "--features",
        &minilm,
        "--models",
        models,
        "--dim",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--epochs",
        "2",
        "--patience",
        "2",
        "--seed",
        "1",
        "--tune-text-layers",
        "1",
        "--text-lr",
        "5e-5",
        "-o",
        &model,
    ]);
    let config = read_json(&td.path().join("model/config.json"));
    let tower = &config["sequencing"]["text_tower"];
    assert_eq!(tower["encoder"], "minilm", "{config}");
    assert_eq!((tower["frozen_layers"].as_u64(), tower["tuned_layers"].as_u64()), (Some(5), Some(1)), "{config}");
    assert_eq!(config["train"]["text_tower_learning_rate"], 5e-5, "{config}");
    let weights = std::fs::read(td.path().join("model/weights.safetensors")).unwrap();
    // The safetensors header (JSON at the start of the file) names every tensor.
    let name = b"text_tower.layer0.ff1.weight";
    assert!(weights.windows(name.len()).any(|w| w == name), "no fine-tuned layer in the weights");
    stepwise(&[
        "predict",
        &p("model"),
        &p("seq"),
        "--features",
        &p("minilm"),
        "--models",
        models,
        "--split",
        "test",
        "-o",
        &p("orders.jsonl"),
    ]);
    let orders = std::fs::read_to_string(td.path().join("orders.jsonl")).unwrap();
    let instances = std::fs::read_to_string(td.path().join("seq/instances.jsonl")).unwrap();
    let test = instances.lines().filter(|l| l.contains("\"split\":\"test\"")).count();
    assert!(test >= 20, "{test} test instances");
    assert_eq!(orders.lines().count(), test);
    stepwise(&["eval", &p("seq"), "-p", &p("orders.jsonl"), "--split", "test", "--json", &p("eval.json")]);
    let e = read_json(&td.path().join("eval.json"));
    let all = e["groups"].as_array().unwrap().iter().find(|g| g["group"] == "all").unwrap().clone();
    assert_eq!(all["sequences"], test, "{all}");
    println!("RecipeQA dev test split, MiniLM last layer fine-tuned 2 epochs: PMR {}", all["metrics"]["pmr"]);
    // Prediction must recompute the frozen layers: a models folder without MiniLM is refused by name.
    std::fs::create_dir_all(td.path().join("no-models")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
        .args(["predict", &p("model"), &p("seq"), "--features", &p("minilm"), "--models", &p("no-models")])
        .args(["-o", &p("refused.jsonl"), "-q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("all-minilm-l6-v2"), "{err}");
    assert!(!td.path().join("refused.jsonl").exists());
}
