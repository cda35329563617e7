//! `stepwise pretrain`, `train-seq`, `predict` (sequencing models) and `seq-study` end to end on a small world
//! (w2v token features with ids, descriptor image features): thread-count determinism, the pretrained-encoder
//! start, predictions scored by `stepwise eval`, resumption after `kill -9`, refusals with exit 2, and a study.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;
use common::{bin, kill_when_exists, run};

fn ok(args: &[String]) -> String {
    let (code, _, err) = run(bin().args(args));
    assert_eq!(code, 0, "stepwise {}: {err}", args.join(" "));
    err
}

fn s(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

struct Fixture {
    _td: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn p(&self, name: &str) -> String {
        self.root.join(name).to_string_lossy().into_owned()
    }

    fn features(&self) -> Vec<String> {
        s(&["--features", &self.p("w2v"), "--features", &self.p("desc")])
    }
}

/// A world of 40 procedures, w2v (with tokens) and descriptor stores, multimodal sequencing instances.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let td = tempfile::tempdir().unwrap();
        let f = Fixture { root: td.path().to_path_buf(), _td: td };
        ok(&s(&["world", "generate", "-n", "40", "--seed", "5", "-o", &f.p("world"), "-q"]));
        ok(&s(&["embed", &f.p("world"), "--encoder", "w2v", "--seed", "1", "--tokens", "-o", &f.p("w2v"), "-q"]));
        ok(&s(&["embed", &f.p("world"), "--encoder", "descriptor", "-o", &f.p("desc"), "-q"]));
        ok(&s(&[
            "generate",
            &f.p("world"),
            "--task",
            "sequencing",
            "--modality",
            "multimodal",
            "--windows",
            "2",
            "--seed",
            "1",
            "-o",
            &f.p("seq"),
            "-q",
        ]));
        f
    })
}

const SMALL: [&str; 8] = ["--dim", "16", "--layers", "1", "--heads", "2", "--batch-size", "8"];

fn train_args(f: &Fixture, out: &str, epochs: &str, extra: &[&str]) -> Vec<String> {
    let mut a = s(&["train-seq", &f.p("seq")]);
    a.extend(f.features());
    a.extend(s(&["--epochs", epochs, "--patience", epochs, "-o", out]));
    a.extend(s(&SMALL));
    a.extend(s(extra));
    a
}

fn pretrain_args(f: &Fixture, out: &str, epochs: &str, objectives: &str) -> Vec<String> {
    let mut a = s(&["pretrain", &f.p("seq")]);
    a.extend(f.features());
    a.extend(s(&["--objectives", objectives, "--epochs", epochs, "-o", out]));
    a.extend(s(&SMALL));
    a
}

fn weights(dir: &str) -> Vec<u8> {
    std::fs::read(Path::new(dir).join("weights.safetensors")).unwrap()
}

#[test]
fn pretrained_and_fine_tuned_weights_are_identical_for_any_thread_count_and_orders_feed_eval() {
    let f = fixture();
    for threads in ["1", "2"] {
        let enc = f.p(&format!("enc-{threads}"));
        let mut a = pretrain_args(f, &enc, "2", "mlm,isp,pisp,smrm");
        a.extend(s(&["--threads", threads]));
        let err = ok(&a);
        assert!(err.contains("pretraining (mlm+isp+pisp+smrm)"), "{err}");
        ok(&train_args(f, &f.p(&format!("m-{threads}")), "3", &["--encoder", &enc, "--threads", threads]));
    }
    assert_eq!(weights(&f.p("enc-1")), weights(&f.p("enc-2")));
    assert_eq!(weights(&f.p("m-1")), weights(&f.p("m-2")));
    let config = std::fs::read_to_string(Path::new(&f.p("m-1")).join("config.json")).unwrap();
    assert!(config.contains("\"encoder_from\"") && config.contains("enc-1"), "{config}");

    let preds = f.p("orders.jsonl");
    let mut a = s(&["predict", &f.p("m-1"), &f.p("seq"), "--split", "test", "-o", &preds]);
    a.extend(f.features());
    ok(&a);
    let lines = std::fs::read_to_string(&preds).unwrap();
    assert!(lines.lines().count() > 0);
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let mut order: Vec<u64> = v["order"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        order.sort_unstable();
        assert_eq!(order, (0..order.len() as u64).collect::<Vec<_>>(), "not a permutation: {l}");
    }
    ok(&s(&["eval", &f.p("seq"), "-p", &preds, "--split", "test", "-o", &f.p("eval"), "-q"]));
    let r = std::fs::read_to_string(Path::new(&f.p("eval")).join("results.json")).unwrap();
    assert!(r.contains("\"pmr\""), "{r}");

    // The pointer left out: the jointly trained pairwise head alone orders every instance, and says so.
    let head = f.p("orders-head.jsonl");
    let mut a = s(&["predict", &f.p("m-1"), &f.p("seq"), "--split", "test", "--decoder", "pairwise-head", "-o", &head]);
    a.extend(f.features());
    ok(&a);
    let head_lines = std::fs::read_to_string(&head).unwrap();
    assert_eq!(head_lines.lines().count(), lines.lines().count());
    for l in head_lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["model"], "sequencer (multimodal) + pretraining, pairwise head alone", "{l}");
        let mut order: Vec<u64> = v["order"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        order.sort_unstable();
        assert_eq!(order, (0..order.len() as u64).collect::<Vec<_>>(), "not a permutation: {l}");
    }
    ok(&s(&["eval", &f.p("seq"), "-p", &head, "--versus", &preds, "--split", "test", "-o", &f.p("eval-head"), "-q"]));
}

#[test]
fn refusals_exit_2_and_write_nothing() {
    let f = fixture();
    // MLM without token ids: a text store of pooled vectors.
    ok(&s(&["embed", &f.p("world"), "--encoder", "w2v", "--seed", "1", "-o", &f.p("w2v-pooled"), "-q"]));
    let out = f.p("enc-pooled");
    let (code, _, err) = run(bin().args(s(&[
        "pretrain",
        &f.p("seq"),
        "--features",
        &f.p("w2v-pooled"),
        "--features",
        &f.p("desc"),
        "--objectives",
        "mlm,isp",
        "-o",
        &out,
    ])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tokens"), "{err}");
    assert!(!Path::new(&out).exists());
    // An unknown objective.
    let (code, _, err) = run(bin().args(pretrain_args(f, &out, "1", "mlm,jigsaw")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("jigsaw"), "{err}");
    // Sizes the transformer cannot have: a usage error before anything is trained or written.
    let study = f.p("study-refused");
    let mut a = s(&["seq-study", &f.p("seq")]);
    a.extend(f.features());
    a.extend(s(&["--dim", "16", "--heads", "3", "-o", &study]));
    let (code, _, err) = run(bin().args(a));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--dim 16 is not a multiple of --heads 3"), "{err}");
    assert!(!Path::new(&study).exists());
    // A dropout rate that keeps nothing.
    let m = f.p("m-dropout-1");
    let (code, _, err) = run(bin().args(train_args(f, &m, "1", &["--dropout", "1"])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--dropout must be at least 0 and below 1"), "{err}");
    assert!(!Path::new(&m).exists());
    // Fine-tuning the text encoder needs that encoder's token store (here w2v tokens), and --text-lr needs it on.
    let m = f.p("m-tune");
    let (code, _, err) = run(bin().args(train_args(f, &m, "1", &["--tune-text-layers", "1"])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a text store embedded with `--encoder minilm --tokens`"), "{err}");
    let (code, _, err) = run(bin().args(train_args(f, &m, "1", &["--text-lr", "1e-5"])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--text-lr is the learning rate of the layers --tune-text-layers fine-tunes"), "{err}");
    let (code, _, err) =
        run(bin().args(train_args(f, &m, "1", &["--encoder", &f.p("m-none"), "--tune-text-layers", "1"])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--encoder and --tune-text-layers"), "{err}");
    assert!(!Path::new(&m).exists());
    // A fine-tuned model's features must match: w2v with another seed is another vector space.
    let m = f.p("m-refuse");
    ok(&train_args(f, &m, "1", &[]));
    ok(&s(&["embed", &f.p("world"), "--encoder", "w2v", "--seed", "2", "--tokens", "-o", &f.p("w2v-seed2"), "-q"]));
    let preds = f.p("refused.jsonl");
    let (code, _, err) = run(bin().args(s(&[
        "predict",
        &m,
        &f.p("seq"),
        "--features",
        &f.p("w2v-seed2"),
        "--features",
        &f.p("desc"),
        "-o",
        &preds,
    ])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("do not match"), "{err}");
    assert!(!Path::new(&preds).exists());
    // A pretrained encoder has no decoder to predict with.
    ok(&pretrain_args(f, &f.p("enc-only"), "1", "isp"));
    let mut a = s(&["predict", &f.p("enc-only"), &f.p("seq"), "-o", &preds]);
    a.extend(f.features());
    let (code, _, err) = run(bin().args(a));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("train-seq --encoder"), "{err}");
}

#[test]
fn a_killed_pretraining_resumes_to_the_weights_of_an_uninterrupted_run() {
    let f = fixture();
    let straight = f.p("pre-straight");
    ok(&pretrain_args(f, &straight, "6", "mlm,smrm"));
    let resumed = f.p("pre-resumed");
    let checkpoint = f.root.join(".pre-resumed.checkpoint.safetensors");
    // Wait for the first checkpoint (after epoch 1), then SIGKILL — no chance to clean up.
    kill_when_exists(
        bin().args(pretrain_args(f, &resumed, "6", "mlm,smrm")).arg("-q").spawn().unwrap(),
        &checkpoint,
        "checkpoint",
    );
    assert!(!Path::new(&resumed).exists(), "killed before the end: no model folder");
    let err = ok(&pretrain_args(f, &resumed, "6", "mlm,smrm"));
    assert!(err.contains("resumed after epoch"), "{err}");
    assert_eq!(weights(&straight), weights(&resumed));
    assert!(!checkpoint.exists());
}

#[test]
fn a_seq_study_fills_tables_2_3_and_4() {
    let f = fixture();
    let out = f.p("study");
    let mut a = s(&["seq-study", &f.p("seq")]);
    a.extend(f.features());
    a.extend(s(&["--epochs", "2", "--pretrain-epochs", "1", "--name", "world", "-o", &out, "-q"]));
    a.extend(s(&SMALL));
    ok(&a);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&out).join("results.json")).unwrap()).unwrap();
    let rows = r["rows"].as_array().unwrap();
    let cell = |method: &str, features: &str| rows.iter().any(|x| x["method"] == method && x["features"] == features);
    for k in ["image", "text", "multimodal"] {
        assert!(cell("sequencer", k), "{k} from scratch missing");
    }
    // Table 2's pretrained cells (text: MLM alone; image: no MLM) and the Table 3 ablation.
    assert!(cell("sequencer + MLM", "text"));
    assert!(cell("sequencer + ISP+SMRM", "image"));
    for m in ["MLM", "MLM+ISP", "MLM+SMRM", "MLM+ISP+PISP", "MLM+ISP+SMRM"] {
        assert!(cell(&format!("sequencer + {m}"), "multimodal"), "{m} missing");
    }
    // The pairwise baseline on each modality's pooled vectors, then the cells.
    assert_eq!(rows.len(), 3 + 3 + 2 + 5);
    for k in ["image", "text", "multimodal"] {
        assert!(cell("pairwise", k), "{k} pairwise reference missing");
    }
    for row in rows {
        for metric in ["accuracy", "pmr", "kendall_tau"] {
            let found = row["single"].as_object().unwrap().keys().any(|k| k.contains(metric));
            assert!(found || metric == "accuracy", "{metric} missing in {row}");
        }
    }
    let bd = std::fs::read_to_string(Path::new(&out).join("breakdown.md")).unwrap();
    assert!(bd.contains("| All |") && bd.contains("| Multi. |"), "{bd}");
    assert!(!f.root.join(".study.seq-study-work").exists(), "the work folder is removed at the end");
    // The report shows it as a sequencing results table.
    ok(&s(&["report", &out, "-o", &f.p("study-report.html"), "-q"]));
    let md = std::fs::read_to_string(f.root.join("study-report.md")).unwrap();
    assert!(md.contains("sequencer + MLM+ISP+SMRM") && md.contains("By subset of instances"), "{md}");
}

#[test]
fn several_seeds_give_a_spread_and_a_comparison_with_the_pairwise_baseline() {
    let f = fixture();
    let study = |name: &str| {
        let out = f.p(name);
        let mut a = s(&["seq-study", &f.p("seq"), "--features", &f.p("w2v"), "--no-ablation", "--seeds", "2"]);
        a.extend(s(&["--seed", "5", "--epochs", "1", "--pretrain-epochs", "1", "-o", &out, "-q"]));
        a.extend(s(&SMALL));
        ok(&a);
        out
    };
    let out = study("study-seeds");
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&out).join("seeds.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    let methods: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["pairwise", "sequencer", "sequencer + MLM"]);
    for r in rows {
        assert_eq!(r["spread"]["seeds"], serde_json::json!([5, 6]), "{r}");
        let per_seed: Vec<f64> =
            r["spread"]["multi"]["pmr"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(per_seed.len(), 2);
        let mean = (per_seed[0] + per_seed[1]) / 2.0;
        assert!((r["pmr"]["value"].as_f64().unwrap() - mean).abs() < 1e-9, "{r}");
        // Every cell is compared with the pairwise baseline on the same sequences; the baseline with nothing.
        assert_eq!(r["versus"].is_null(), r["method"] == "pairwise", "{r}");
    }
    for k in [
        "text__none__seed5",
        "text__none__seed6",
        "text__mlm__seed5",
        "text__mlm__seed6",
        "pairwise__text__seed5",
        "pairwise__text__seed6",
    ] {
        assert!(Path::new(&out).join("predictions").join(format!("{k}.jsonl")).is_file(), "{k} missing");
    }
    let md = std::fs::read_to_string(Path::new(&out).join("seeds.md")).unwrap();
    assert!(md.contains("vs pairwise (text): "), "{md}");
    assert!(md.contains("noise |"), "{md}");
    // The report shows the seeds table beside the results.
    ok(&s(&["report", &out, "-o", &f.p("seeds-report.html"), "-q"]));
    let report = std::fs::read_to_string(f.root.join("seeds-report.md")).unwrap();
    assert!(
        report.contains("Seeds: each method's multi-reference PMR") && report.contains("vs pairwise (text): "),
        "{report}"
    );
    // Same seeds, same study.
    let again = study("study-seeds-again");
    for file in ["seeds.json", "results.json"] {
        assert_eq!(
            std::fs::read(Path::new(&out).join(file)).unwrap(),
            std::fs::read(Path::new(&again).join(file)).unwrap(),
            "{file} differs between two runs"
        );
    }
}

#[test]
fn cross_validation_predicts_every_instance_once() {
    let f = fixture();
    let out = f.p("study-cv");
    let mut a = s(&["seq-study", &f.p("seq"), "--features", &f.p("w2v"), "--cv", "3", "--no-ablation", "--seeds", "1"]);
    a.extend(s(&["--epochs", "1", "--pretrain-epochs", "1", "-o", &out, "-q"]));
    a.extend(s(&SMALL));
    ok(&a);
    let instances = std::fs::read_to_string(Path::new(&f.p("seq")).join("instances.jsonl")).unwrap();
    let ids: BTreeSet<String> = instances
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
        .collect();
    for cell in ["text__none", "text__mlm", "pairwise__text"] {
        let preds = std::fs::read_to_string(Path::new(&out).join("predictions").join(format!("{cell}.jsonl"))).unwrap();
        let got: Vec<String> = preds
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(got.len(), ids.len(), "{cell}: one prediction per instance");
        assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), ids, "{cell}");
    }
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&out).join("results.json")).unwrap()).unwrap();
    assert!(r["rows"].as_array().unwrap().iter().all(|row| row["sequences"] == ids.len()), "{r}");
    assert!(r["notes"].to_string().contains("3-fold cross-validation by procedure"), "{r}");
    // Fewer than 3 folds cannot hold train, val and test.
    let mut a = s(&["seq-study", &f.p("seq"), "--features", &f.p("w2v"), "--cv", "2", "-o", &f.p("cv2")]);
    a.extend(s(&SMALL));
    let (code, _, err) = run(bin().args(a));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 3 folds"), "{err}");
    assert!(!Path::new(&f.p("cv2")).exists());
}

#[test]
fn max_sentences_cuts_step_texts_before_token_embedding() {
    let td = tempfile::tempdir().unwrap();
    let corpus = td.path().join("c.jsonl");
    let step = |t: &str| format!(r#"{{"images":[],"text":"{t}","title":null}}"#);
    let lines: Vec<String> = (0..6)
        .map(|i| {
            format!(
                r#"{{"category":"c","id":"x/{i}","lang":"en","license":"MIT","source":"s","steps":[{},{}],"title":"T{i}"}}"#,
                step("Chop the onion. Add the salt. Stir well."),
                step("Heat the pan until hot."),
            )
        })
        .collect();
    std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();
    let c = corpus.to_string_lossy().into_owned();
    let tokens = |dir: &Path| -> (u64, serde_json::Value) {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
        (m["tokens"]["total"].as_u64().unwrap(), m["max_sentences"].clone())
    };
    let store = td.path().join("w2v");
    let embed = |out: &Path, extra: &[&str]| {
        let mut a = s(&[
            "embed",
            &c,
            "--encoder",
            "w2v",
            "--seed",
            "1",
            "--encoder-opt",
            "min_count=1",
            "--tokens",
            "-q",
            "-o",
        ]);
        a.push(out.to_string_lossy().into_owned());
        a.extend(s(extra));
        ok(&a)
    };
    embed(&store, &[]);
    assert_eq!(tokens(&store), (6 * (8 + 5), serde_json::Value::Null));
    // Re-running with the cut re-encodes the cut steps, and the store says what it holds. Per procedure: step 1
    // keeps "Chop the onion." (3 of 8 words), step 2 is one sentence (5 words).
    embed(&store, &["--max-sentences", "1"]);
    assert_eq!(tokens(&store), (6 * (3 + 5), serde_json::json!(1)));
    let (code, _, err) =
        run(bin().args(s(&["embed", &c, "--encoder", "descriptor", "--max-sentences", "2", "-o", "x"])));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("text encoder"), "{err}");
}
