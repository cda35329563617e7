//! Acceptance tests of the pretrained encoders on real weights and real data. Every test is `#[ignore]`d: run with
//! `cargo test -p stepwise-features --test acceptance_models -- --ignored --nocapture`.
//!
//! Needs the models folder (`scripts/fetch-models.sh`; env `STEPWISE_MODELS`, default `<workspace>/models`) and
//! the shared data (env `STEPWISE_SHARED_DATA`, default `<workspace>/../shared/data`). Both missing is a failure
//! with instructions, never a skip.

use std::path::{Path, PathBuf};
use std::time::Instant;

use stepwise_core::corpus::read_procedures_jsonl;
use stepwise_features::image_source::load_image_file;
use stepwise_features::pretrained::efficientnet_lite::{EfficientNetLite, Variant};
use stepwise_features::registry::{self, EncoderContext};
use stepwise_features::{Encoder, Item};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn models_dir() -> PathBuf {
    let dir = std::env::var_os("STEPWISE_MODELS").map(PathBuf::from).unwrap_or_else(|| workspace().join("models"));
    assert!(
        dir.join("all-minilm-l6-v2").is_dir() && dir.join("effnet-lite0").is_dir(),
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
    assert!(dir.join("procedures").is_dir(), "shared data not found at {} (set STEPWISE_SHARED_DATA)", dir.display());
    dir
}

fn build(name: &str) -> Box<dyn Encoder> {
    let ctx = EncoderContext { models_dir: models_dir(), ..Default::default() };
    registry::build_encoder(name, &ctx).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every step text (title + text) and every step image path of the four procedure sets.
fn procedures() -> (Vec<String>, Vec<PathBuf>) {
    let root = shared_data().join("procedures");
    let mut texts = Vec::new();
    let mut images = std::collections::BTreeSet::new();
    for set in ["gnome-recipes", "howtocook", "based-cooking", "ifixit"] {
        let path = root.join(format!("{set}.jsonl"));
        for p in read_procedures_jsonl(&path).unwrap() {
            for s in &p.steps {
                let t = s.full_text();
                if !t.trim().is_empty() {
                    texts.push(t);
                }
                images.extend(s.images.iter().map(|i| root.join(i)));
            }
        }
    }
    (texts, images.into_iter().collect())
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[test]
#[ignore]
fn minilm_reproduces_the_published_embedding() {
    let enc = build("minilm");
    let v = enc.encode(&[Item::Text("This is an example sentence")]).unwrap();
    println!("minilm('This is an example sentence')[..5] = {:?}", &v[..5]);
    for (got, want) in v.iter().zip([0.06766f32, 0.06350, 0.04871]) {
        assert!((got - want).abs() < 1e-4, "{got} vs published {want}");
    }
    assert!((norm(&v) - 1.0).abs() < 1e-5);
}

#[test]
#[ignore]
fn text_encoders_run_on_every_procedure_step() {
    let (texts, _) = procedures();
    for name in ["minilm", "glove-50d"] {
        let enc = build(name);
        let dim = enc.info().dim;
        let t = Instant::now();
        let mut failures = Vec::new();
        let mut zero = 0;
        for (c, chunk) in texts.chunks(enc.batch_size()).enumerate() {
            let items: Vec<Item> = chunk.iter().map(|s| Item::Text(s)).collect();
            match enc.encode(&items) {
                Ok(v) => {
                    assert_eq!(v.len(), chunk.len() * dim);
                    for row in v.chunks(dim) {
                        assert!(row.iter().all(|x| x.is_finite()), "{name}: non-finite value");
                        let n = norm(row);
                        if n == 0.0 {
                            zero += 1;
                        } else {
                            assert!((n - 1.0).abs() < 1e-4, "{name}: norm {n}");
                        }
                    }
                }
                Err(e) => failures.push(format!("batch {c}: {e}")),
            }
        }
        println!(
            "{name}: {} step texts in {:.1}s, {} failures, {zero} zero vectors (no known word)",
            texts.len(),
            t.elapsed().as_secs_f64(),
            failures.len()
        );
        assert!(failures.is_empty(), "{name}: {failures:?}");
        if name == "minilm" {
            assert_eq!(zero, 0, "MiniLM never gives a zero vector");
        }
    }
}

#[test]
#[ignore]
fn image_encoders_run_on_every_procedure_image() {
    let (_, paths) = procedures();
    let images: Vec<_> = paths.iter().map(|p| load_image_file(p).unwrap_or_else(|e| panic!("{e}"))).collect();
    // The -logits encoders run the same network: a sample of images is enough for them.
    for (name, n) in [
        ("effnet-lite0", images.len()),
        ("effnet-lite2", images.len()),
        ("effnet-lite0-logits", 24),
        ("effnet-lite2-logits", 24),
    ] {
        let (images, paths) = (&images[..n.min(images.len())], &paths[..n.min(paths.len())]);
        let enc = build(name);
        let dim = enc.info().dim;
        let t = Instant::now();
        let mut failures = Vec::new();
        for (chunk, names) in images.chunks(enc.batch_size()).zip(paths.chunks(enc.batch_size())) {
            let items: Vec<Item> = chunk.iter().map(Item::Image).collect();
            match enc.encode(&items) {
                Ok(v) => {
                    assert_eq!(v.len(), chunk.len() * dim);
                    assert!(v.iter().all(|x| x.is_finite()), "{name}: non-finite value");
                }
                Err(e) => failures.push(format!("{}: {e}", names[0].display())),
            }
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{name}: {} images in {secs:.1}s ({:.1}/s), {} failures",
            images.len(),
            images.len() as f64 / secs,
            failures.len()
        );
        assert!(failures.is_empty(), "{name}: {failures:?}");
    }
}

/// Grocery photos of classes that exist in ImageNet: the classifier must mostly name them.
#[test]
#[ignore]
fn effnet_recognises_imagenet_fruit_and_vegetables() {
    const CLASSES: &[(&str, usize)] = &[
        ("Banana", 954),
        ("Lemon", 951),
        ("Orange", 950),
        ("Granny-Smith", 948),
        ("Pineapple", 953),
        ("Pomegranate", 957),
        ("Zucchini", 939),
        ("Cucumber", 943),
    ];
    let root = shared_data().join("distractors/grocery");
    let labels = std::fs::read_to_string(root.join("labels.csv")).unwrap();
    let mut picked: Vec<(PathBuf, usize)> = Vec::new();
    for (label, class) in CLASSES {
        let rows = labels.lines().filter(|l| l.ends_with(",test") && l.split(',').nth(1) == Some(label));
        picked.extend(rows.take(10).map(|l| (root.join(l.split(',').next().unwrap()), *class)));
    }
    let images: Vec<_> = picked.iter().map(|(p, _)| load_image_file(p).unwrap()).collect();
    let refs: Vec<_> = images.iter().collect();
    for variant in [Variant::Lite0, Variant::Lite2] {
        let model = EfficientNetLite::from_models_dir(&models_dir(), variant).unwrap();
        let x = model.preprocess(&refs).unwrap();
        let logits = model.logits_from_features(&model.features_from_inputs(&x));
        let correct = logits
            .chunks(1000)
            .zip(&picked)
            .filter(|(row, (_, class))| {
                let top = (0..1000).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
                top == *class
            })
            .count();
        let acc = correct as f64 / picked.len() as f64;
        println!("{variant:?}: top-1 {correct}/{} = {acc:.3} on grocery photos of ImageNet classes", picked.len());
        assert!(acc >= 0.5, "{variant:?}: top-1 accuracy {acc}");
    }
}

/// Byte-identical outputs for any thread count.
#[test]
#[ignore]
fn outputs_do_not_depend_on_the_thread_count() {
    let (texts, paths) = procedures();
    let texts: Vec<Item> = texts.iter().take(100).map(|s| Item::Text(s)).collect();
    let images: Vec<_> = paths.iter().take(12).map(|p| load_image_file(p).unwrap()).collect();
    let image_items: Vec<Item> = images.iter().map(Item::Image).collect();
    for (name, items) in [("minilm", &texts), ("effnet-lite0", &image_items)] {
        let enc = build(name);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(|| enc.encode(items).unwrap())
        };
        assert_eq!(run(1), run(2), "{name}: 1 vs 2 threads differ");
    }
}
