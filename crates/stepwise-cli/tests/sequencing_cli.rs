//! `stepwise baseline` and `stepwise select-golden` end to end on a small synthetic corpus whose step texts carry
//! order evidence (a stage word per position), with a TF-IDF feature store.

use std::path::{Path, PathBuf};

use stepwise_core::corpus::write_corpus_files;
use stepwise_core::{Corpus, Manifest, Procedure, Step};
use stepwise_features::embed::{EmbedOptions, embed_corpus};
use stepwise_tasks::sequencing::{self, SequencingConfig, Windows};

mod common;
use common::{bin, run};

const STAGES: [&str; 8] = ["unpack", "rinse", "slice", "season", "stir", "simmer", "plate", "garnish"];
const FILLER: [&str; 6] = ["carefully", "gently", "with care", "slowly", "quickly", "as needed"];

struct Fixture {
    _td: tempfile::TempDir,
    root: PathBuf,
    corpus: PathBuf,
    instances: PathBuf,
    features: PathBuf,
}

fn fixture() -> Fixture {
    let td = tempfile::tempdir().unwrap();
    let root = td.path().to_path_buf();
    let procs: Vec<Procedure> = (0..50)
        .map(|p| Procedure {
            id: format!("synth/{p:02}"),
            category: Some(if p % 3 == 0 { "soup".into() } else { "cake".into() }),
            steps: (0..8)
                .map(|s| Step {
                    title: None,
                    text: Some(format!("{} the item {} {}.", STAGES[s], FILLER[(p + s) % 6], p)),
                    images: if s % 2 == 0 { vec![format!("img/{p}_{s}.jpg")] } else { vec![] },
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let corpus = root.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    write_corpus_files(&corpus, &procs, &mut Manifest::new("corpus")).unwrap();
    let loaded = Corpus::load(&corpus).unwrap();
    let cfg = SequencingConfig { windows: Windows::Count(2), seed: 5, ..Default::default() };
    let g = sequencing::generate(&loaded.procedures, &corpus.join("procedures.jsonl"), None, &cfg).unwrap();
    let instances = root.join("seq");
    sequencing::write_instances_dir(&instances, false, &g, &cfg, std::slice::from_ref(&corpus)).unwrap();
    let features = root.join("feats-text");
    embed_corpus(&loaded, &features, None, &[], &EmbedOptions::new("tfidf")).unwrap();
    Fixture { _td: td, root, corpus, instances, features }
}

fn read_predictions(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn pairwise_predictions_are_valid_deterministic_and_beat_random() {
    let f = fixture();
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let out = f.root.join(format!("pairwise-{threads}.jsonl"));
        let (code, stdout, stderr) = run(bin()
            .env("RAYON_NUM_THREADS", threads)
            .args(["baseline", f.instances.to_str().unwrap(), "--model", "pairwise", "--epochs", "30", "--eval"])
            .args(["--features", f.features.to_str().unwrap(), "--threads", threads, "-o", out.to_str().unwrap()]));
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("| pairwise | text |"), "{stdout}");
        outputs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outputs[0], outputs[1], "predictions must not depend on the thread count");

    let preds = read_predictions(&f.root.join("pairwise-1.jsonl"));
    let instances: Vec<serde_json::Value> = std::fs::read_to_string(f.instances.join("instances.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["split"] == "test")
        .collect();
    assert_eq!(preds.len(), instances.len());
    // The stage words give away the order: the pairwise model should get most instances exactly right.
    let exact = preds.iter().zip(&instances).filter(|(p, i)| p["order"] == i["references"][0]).count();
    assert!(exact * 10 >= preds.len() * 8, "{exact} of {} exact", preds.len());

    let random = f.root.join("random.jsonl");
    let (code, _, stderr) =
        run(bin().args(["baseline", f.instances.to_str().unwrap(), "--model", "random", "-o"]).arg(&random));
    assert_eq!(code, 0, "{stderr}");
    let rp = read_predictions(&random);
    let exact_random = rp.iter().zip(&instances).filter(|(p, i)| p["order"] == i["references"][0]).count();
    assert!(exact_random < exact);
}

#[test]
fn table_merge_and_cross_validation() {
    let f = fixture();
    let dir = f.root.join("results");
    let (code, stdout, stderr) = run(bin()
        .args(["baseline", f.instances.to_str().unwrap(), "--table", "synthetic", "--cv", "4", "--epochs", "10"])
        .args(["--features", f.features.to_str().unwrap(), "-o", dir.to_str().unwrap()]));
    assert_eq!(code, 0, "{stderr}");
    for row in [
        "| synthetic | random | - | 100 |",
        "| synthetic | text-position | - | 100 |",
        "| synthetic | image-chain | text | 100 |",
        "| synthetic | pairwise | text | 100 |",
    ] {
        assert!(stdout.contains(row), "missing {row}:\n{stdout}");
    }
    for file in
        ["results.json", "results.md", "manifest.json", "predictions/pairwise-text.jsonl", "predictions/random.jsonl"]
    {
        assert!(dir.join(file).exists(), "{file}");
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let pmr = |method: &str| {
        results["rows"].as_array().unwrap().iter().find(|r| r["method"] == method).unwrap()["single"]["pmr"]["value"]
            .as_f64()
            .unwrap()
    };
    assert!(pmr("pairwise") > pmr("random") + 0.3, "{results}");
    // Every instance is predicted once in cross-validation.
    assert_eq!(read_predictions(&dir.join("predictions/pairwise-text.jsonl")).len(), 100);

    let merged = f.root.join("merged");
    let (code, stdout, stderr) =
        run(bin().args(["baseline", "--merge"]).arg(&dir).args(["--merge"]).arg(&dir).arg("-o").arg(&merged));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.matches("| synthetic | pairwise | text |").count(), 2);

    // --train-only: synth/00..09 train in every fold and are never predicted or scored.
    let extra = f.root.join("extra");
    let (code, stdout, stderr) = run(bin()
        .args(["baseline", f.instances.to_str().unwrap(), "--table", "synthetic", "--cv", "4", "--epochs", "10"])
        .args(["--train-only", "synth/0", "--features", f.features.to_str().unwrap(), "-o", extra.to_str().unwrap()]));
    assert_eq!(code, 0, "{stderr}");
    for row in ["| synthetic | random | - | 80 |", "| synthetic | pairwise | text | 80 |"] {
        assert!(stdout.contains(row), "missing {row}:\n{stdout}");
    }
    assert!(
        stdout.contains("20 train-only instances (procedures synth/0*) in the training set of every fold"),
        "{stdout}"
    );
    let predicted = read_predictions(&extra.join("predictions/pairwise-text.jsonl"));
    assert_eq!(predicted.len(), 80);
    assert!(predicted.iter().all(|p| !p["id"].as_str().unwrap().starts_with("synth/0")), "{predicted:?}");
}

#[test]
fn bad_usage_and_inputs_exit_2_with_clear_messages() {
    let f = fixture();
    let out = f.root.join("x.jsonl");
    let inst = f.instances.to_str().unwrap();
    let (code, _, stderr) = run(bin().args(["baseline", inst, "--model", "image-chain", "-o"]).arg(&out));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("needs --features"), "{stderr}");
    assert!(!out.exists());

    let (code, _, stderr) = run(bin().args(["baseline", inst, "--model", "random", "--split", "nope", "-o"]).arg(&out));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("splits present"), "{stderr}");

    // Image features asked of text-only instances: each item names what is missing.
    let bad = f.root.join("bad.jsonl");
    std::fs::write(&bad, "{\"id\":\"a\",\"procedure\":\"p\",\"split\":\"test\",\"modality\":\"text\",\"items\":[{\"step\":0}],\"references\":[[1]]}\n").unwrap();
    let (code, _, stderr) = run(bin().args(["baseline", bad.to_str().unwrap(), "--model", "random", "-o"]).arg(&out));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("bad.jsonl:1") && stderr.contains("references[0]"), "{stderr}");

    let (code, _, stderr) =
        run(bin().args(["baseline", inst, "--model", "pairwise", "--features"]).arg(&f.corpus).arg("-o").arg(&out));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a feature store"), "{stderr}");
}

#[test]
fn select_golden_applies_rules_and_records_rejections() {
    let f = fixture();
    let out = f.root.join("golden");
    let (code, _, stderr) = run(bin()
        .args(["select-golden", f.instances.to_str().unwrap(), "--corpus", f.corpus.to_str().unwrap()])
        .args(["--categories", "soup", "--min-images", "3", "--split", "all", "-n", "5", "--seed", "2", "-o"])
        .arg(&out));
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out.join("selection.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert!(lines.iter().all(|l| l["category"] == "soup" && l["images"].as_u64().unwrap() >= 3));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(m["counts"]["rejected_category"].as_u64().unwrap() > 0);
    assert_eq!(m["counts"]["selected"], 5);
    // The subset is a valid instances file.
    assert_eq!(std::fs::read_to_string(out.join("instances.jsonl")).unwrap().lines().count(), 5);

    let (code, _, stderr) = run(bin()
        .args(["select-golden", f.instances.to_str().unwrap(), "--categories", "soup", "-o"])
        .arg(f.root.join("g2")));
    assert_eq!(code, 2);
    assert!(stderr.contains("--categories needs --corpus"), "{stderr}");
    let (code, _, stderr) = run(bin()
        .args(["select-golden", f.instances.to_str().unwrap(), "--complementary", "--features"])
        .arg(&f.features)
        .arg("-o")
        .arg(f.root.join("g3")));
    assert_eq!(code, 2);
    assert!(stderr.contains("one text and one image"), "{stderr}");
}

#[test]
fn generate_sequencing_is_deterministic_and_checks_its_options() {
    let f = fixture();
    let corpus = f.corpus.to_str().unwrap();
    let mut bytes = Vec::new();
    for threads in ["1", "2"] {
        let out = f.root.join(format!("gen-{threads}"));
        let (code, _, stderr) = run(bin()
            .args(["generate", corpus, "--task", "sequencing", "--modality", "text", "--windows", "all", "--seed", "4"])
            .args(["--threads", threads, "-o"])
            .arg(&out));
        assert_eq!(code, 0, "{stderr}");
        let files: Vec<Vec<u8>> = ["instances.jsonl", "instances.parquet", "manifest.json"]
            .iter()
            .map(|n| std::fs::read(out.join(n)).unwrap())
            .collect();
        bytes.push(files);
    }
    assert_eq!(bytes[0], bytes[1], "byte-identical for any --threads");
    // 50 procedures × 4 windows of 5 among 8 text steps.
    assert_eq!(String::from_utf8_lossy(&bytes[0][0]).lines().count(), 200);

    let bad = |extra: &[&str], expect: &str| {
        let (code, _, stderr) = run(bin()
            .args(["generate", corpus, "--task", "sequencing"])
            .args(extra)
            .arg("-o")
            .arg(f.root.join("never")));
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(stderr.contains(expect), "{extra:?}: {stderr}");
        assert!(!f.root.join("never").exists());
    };
    bad(&["--seq-steps", "1"], "--seq-steps");
    bad(&["--windows", "0"], "--windows");
    bad(&["--seq-min-steps", "9"], "--seq-min-steps");
    bad(&["--seq-split", "0.8,0.2"], "--seq-split");
    // Image instances need image steps: the fixture's images exist only as paths on even steps (4 of 8).
    bad(&["--modality", "image"], "no procedure has enough usable steps");
    let alt = f.root.join("alt.jsonl");
    std::fs::write(&alt, "{\"id\":\"synth/00\",\"orders\":[[0,1,2]]}\n{\"id\":\"synth/01\",\"orders\":[[0,1,99]]}\n")
        .unwrap();
    bad(&["--alt-orders", alt.to_str().unwrap()], "alt.jsonl:2: field `orders[0][2]`");
}
