//! Acceptance tests of the pretrained encoders on real weights and real data. Every test is `#[ignore]`d: run with
//! `cargo test -p stepwise-features --test acceptance_models -- --ignored --nocapture`.
//!
//! Each pretrained encoder (minilm, glove-50d, effnet-lite0, effnet-lite2) embeds the ../shared/data/procedures
//! sets through the feature store with an empty `failures.jsonl` (every image; every text except MiniLM, which
//! gets a quarter of the two large text sets to keep the dev-profile run short); the -logits variants run on a
//! sample of the images. Patch grids of effnet-lite0/2 (grid 1 = the pooled feature within float16 rounding, the
//! native grid averages to it) and token ids of MiniLM and GloVe on a known sentence are checked on generated
//! inputs.
//!
//! Needs the models folder (`scripts/fetch-models.sh`; env `STEPWISE_MODELS`, default `<workspace>/models`) and
//! the shared data (env `STEPWISE_SHARED_DATA`, default `<workspace>/../shared/data`). Both missing is a failure
//! with instructions, never a skip.

use std::path::{Path, PathBuf};
use std::time::Instant;

use stepwise_core::Corpus;
use stepwise_core::corpus::read_procedures_jsonl;
use stepwise_features::embed::{EmbedOptions, embed_corpus};
use stepwise_features::image_source::load_image_file;
use stepwise_features::items::corpus_items;
use stepwise_features::patches::adaptive_bins;
use stepwise_features::pretrained::efficientnet_lite::{EfficientNetLite, Variant};
use stepwise_features::pretrained::minilm::MiniLm;
use stepwise_features::registry::{self, EncoderContext};
use stepwise_features::store::{FAILURES_FILE, FeatureStore, VECTORS_FILE};
use stepwise_features::{Encoder, Item, Normalization, PatchGrids, TokenVectors};

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

/// The step texts and titles (text encoders) or step and gallery images (image encoders) of the four sets,
/// embedded through the feature store like `stepwise embed` does: `failures.jsonl` is empty and every row is a
/// finite (unit, for L2-normalised encoders) vector. `every`: keep every n-th procedure of the two large text
/// sets (howtocook, 368 procedures in Chinese; based-cooking, 345 in English) so the slowest encoder stays within
/// a few minutes in the dev profile; the small sets (gnome-recipes, ifixit: most of the images) are kept whole.
fn embed_all_sets(name: &str, every: usize) {
    let root = shared_data().join("procedures");
    let mut procedures = Vec::new();
    for set in ["gnome-recipes", "howtocook", "based-cooking", "ifixit"] {
        let all = read_procedures_jsonl(&root.join(format!("{set}.jsonl"))).unwrap();
        let step = if matches!(set, "howtocook" | "based-cooking") { every.max(1) } else { 1 };
        procedures.extend(all.into_iter().step_by(step));
    }
    let corpus = Corpus { dir: root.clone(), image_root: root, manifest: None, procedures };
    let modality = registry::find(name).unwrap().modality;
    let expected = corpus_items(&corpus, modality).len();
    let td = tempfile::tempdir().unwrap();
    let out = td.path().join(name);
    let mut opts = EmbedOptions::new(name);
    opts.ctx.models_dir = models_dir();
    let t = Instant::now();
    let report = embed_corpus(&corpus, &out, None, &[], &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    let secs = t.elapsed().as_secs_f64();
    let store = FeatureStore::open(&out).unwrap();
    println!(
        "{name}: {} {modality:?} items in {secs:.1} s ({:.1}/s), dim {}, {} failures",
        store.len(),
        report.encoded as f64 / secs,
        store.dim(),
        report.failed
    );
    assert_eq!(std::fs::read(out.join(FAILURES_FILE)).unwrap(), b"", "{name}: failures.jsonl is not empty");
    assert_eq!(store.len(), expected, "{name}: every item has a row");
    let mut zero = 0;
    for (i, id) in store.ids().iter().enumerate() {
        let row = store.row(i);
        assert!(row.iter().all(|x| x.is_finite()), "{name} {id}: non-finite value");
        let n = norm(row);
        if n == 0.0 {
            zero += 1;
        } else if store.info().normalization == Normalization::L2 {
            assert!((n - 1.0).abs() < 1e-4, "{name} {id}: norm {n}");
        }
    }
    // Only GloVe can meet a text with no known word (e.g. a Chinese step: GloVe 6B is English).
    if name != "glove-50d" {
        assert_eq!(zero, 0, "{name}: zero vectors");
    } else {
        println!("{name}: {zero} zero vectors (no in-vocabulary word)");
    }
    let again = embed_corpus(&corpus, &out, None, &[], &opts).unwrap();
    assert!(again.up_to_date && again.encoded == 0, "{name}: re-run did work: {again:?}");
}

#[test]
#[ignore]
fn minilm_embeds_step_texts_of_every_set_without_failures() {
    // The slowest encoder in the dev profile (~16 texts/s on 2 busy cores for all 6,285): a quarter of the large
    // sets (~1,700 texts, English and Chinese, short and over 256 tokens).
    embed_all_sets("minilm", 4);
}

#[test]
#[ignore]
fn glove_embeds_every_step_text_without_failures() {
    embed_all_sets("glove-50d", 1);
}

#[test]
#[ignore]
fn effnet_lite0_embeds_every_step_image_without_failures() {
    embed_all_sets("effnet-lite0", 1);
}

#[test]
#[ignore]
fn effnet_lite2_embeds_every_step_image_without_failures() {
    embed_all_sets("effnet-lite2", 1);
}

/// The -logits encoders run the same network as the pooled ones: a sample of real images is enough.
#[test]
#[ignore]
fn effnet_logits_run_on_a_sample_of_procedure_images() {
    let (_, paths) = procedures();
    let images: Vec<_> = paths.iter().take(24).map(|p| load_image_file(p).unwrap_or_else(|e| panic!("{e}"))).collect();
    let items: Vec<Item> = images.iter().map(Item::Image).collect();
    for name in ["effnet-lite0-logits", "effnet-lite2-logits"] {
        let enc = build(name);
        let v = enc.encode(&items).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(v.len(), items.len() * 1000, "{name}");
        assert!(v.iter().all(|x| x.is_finite()), "{name}: non-finite value");
        println!("{name}: {} images, 1000 logits each", items.len());
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

/// MiniLM token output through the feature store (`--tokens`): per item, the last hidden states of its first
/// `cap` word pieces without [CLS]/[SEP], stored as float16 (exactly the encoder's f32 values rounded); the pooled
/// vectors are byte-identical to a run without tokens; the pooled vector (mean over every position, [CLS] and
/// [SEP] included) points close to the mean of the token vectors of an uncapped text.
#[test]
#[ignore]
fn minilm_token_vectors_through_the_store() {
    let texts = [
        "Preheat the oven to 180°C and grease a 20 cm round cake tin with butter.",
        "Whisk the eggs and sugar until pale and fluffy, about five minutes; then sift in the flour, fold gently \
         with a spatula so the batter keeps its air, pour it into the tin, level the top and bake for 25 to 30 \
         minutes until a skewer comes out clean.",
        "将鸡蛋打入碗中，加盐搅匀。",
        "Unscrew the two Phillips #00 screws holding the battery connector bracket.",
        "Serve.",
    ];
    let td = tempfile::tempdir().unwrap();
    let steps: Vec<_> = texts.iter().map(|t| serde_json::json!({"text": t})).collect();
    let proc = serde_json::json!({"id": "t/p0", "title": "Cake", "steps": steps});
    let corpus_path = td.path().join("procedures.jsonl");
    std::fs::write(&corpus_path, format!("{proc}\n")).unwrap();
    let corpus = Corpus::load(&corpus_path).unwrap();
    let cap = 16;
    let mut opts = EmbedOptions::new("minilm");
    opts.ctx.models_dir = models_dir();
    let plain = td.path().join("plain");
    embed_corpus(&corpus, &plain, None, &[], &opts).unwrap();
    opts.tokens = Some(cap);
    let out = td.path().join("tokens");
    embed_corpus(&corpus, &out, None, &[], &opts).unwrap();
    assert_eq!(std::fs::read(out.join(VECTORS_FILE)).unwrap(), std::fs::read(plain.join(VECTORS_FILE)).unwrap());

    let store = FeatureStore::open(&out).unwrap();
    let tv = TokenVectors::open(&out).unwrap().expect("token output");
    assert_eq!((tv.dim, tv.max_tokens(), tv.len()), (384, cap, texts.len()));
    let enc = build("minilm");
    let minilm = MiniLm::from_models_dir(&models_dir()).unwrap();
    // The store encoded the five texts as one batch: the same call gives exactly its values.
    let items: Vec<Item> = texts.iter().map(|t| Item::Text(t)).collect();
    let own = enc.encode_with_tokens(&items, cap).unwrap();
    let mut at = 0;
    for (i, text) in texts.iter().enumerate() {
        let id = format!("text:t/p0#{i}");
        let pieces = minilm.tokenize(&[text]).unwrap()[0].len() - 2; // without [CLS] and [SEP]
        let n = tv.token_count(&id).unwrap();
        assert_eq!(n, pieces.min(cap), "{id}: {pieces} word pieces");
        assert_eq!(own.counts[i], n);
        let got = tv.get(&id).unwrap();
        for (g, w) in got.iter().zip(&own.tokens[at * 384..(at + n) * 384]) {
            assert_eq!(*g, half::f16::from_f32(*w).to_f32(), "{id}");
        }
        at += n;
        // Alone (no padding), the text's token vectors agree within float16 precision.
        let alone = enc.encode_with_tokens(&[Item::Text(text)], cap).unwrap();
        let diff = got.iter().zip(&alone.tokens).map(|(g, w)| (g - w).abs() - w.abs() / 1024.0).fold(0f32, f32::max);
        assert!(alone.counts == [n] && diff < 1e-4, "{id}: alone vs batched: {diff}");
        let mean: Vec<f32> = (0..384).map(|d| (0..n).map(|k| got[k * 384 + d]).sum::<f32>() / n as f32).collect();
        let pooled = store.get(&id).unwrap();
        let cos = mean.iter().zip(pooled).map(|(a, b)| a * b).sum::<f32>() / norm(&mean);
        let max_abs = got.iter().fold(0f32, |m, x| m.max(x.abs()));
        println!(
            "{id}: {pieces} word pieces, {n} tokens kept, max |value| {max_abs:.2}, cos(mean of tokens, pooled) {cos:.3}"
        );
        if pieces <= cap {
            assert!(cos > 0.9, "{id}: cos {cos}");
        }
    }
}

/// A corpus of `n` one-step procedures with generated images (stripes and gradients of several sizes).
fn image_corpus(dir: &Path, n: usize) -> Corpus {
    std::fs::create_dir_all(dir.join("i")).unwrap();
    let mut lines = String::new();
    for p in 0..n as u32 {
        let img = image::RgbImage::from_fn(180 + 40 * p, 150 + 25 * (p % 3), move |x, y| {
            let stripe = if ((x + 3 * y) / (9 + p)) % 2 == 0 { 230 } else { 25 };
            image::Rgb([((x * (p + 2)) % 256) as u8, stripe, ((y * 3 + 60 * p) % 256) as u8])
        });
        img.save(dir.join(format!("i/{p}.png"))).unwrap();
        let step = serde_json::json!({"text": format!("Step {p}"), "images": [format!("i/{p}.png")]});
        lines.push_str(&serde_json::json!({"id": format!("img/p{p}"), "title": "T", "steps": [step]}).to_string());
        lines.push('\n');
    }
    std::fs::write(dir.join("procedures.jsonl"), lines).unwrap();
    Corpus::load(&dir.join("procedures.jsonl")).unwrap()
}

#[test]
#[ignore]
fn effnet_patch_grids_through_the_store() {
    let td = tempfile::tempdir().unwrap();
    let corpus = image_corpus(&td.path().join("c"), 5);
    for (name, native) in [("effnet-lite0", 7), ("effnet-lite2", 9)] {
        let run = |grid: Option<usize>| {
            let mut opts = EmbedOptions::new(name);
            opts.ctx.models_dir = models_dir();
            opts.patches = grid;
            let out = td.path().join(format!("{name}-{grid:?}"));
            embed_corpus(&corpus, &out, None, &[], &opts).unwrap();
            out
        };
        let plain = run(None);
        let store = FeatureStore::open(&plain).unwrap();
        let (g1, g3, gn) = (run(Some(1)), run(Some(3)), run(Some(native)));
        for out in [&g1, &g3, &gn] {
            let v = std::fs::read(out.join(VECTORS_FILE)).unwrap();
            assert_eq!(v, std::fs::read(plain.join(VECTORS_FILE)).unwrap(), "{name}: pooled vectors changed");
        }
        let [p1, p3, pn] = [&g1, &g3, &gn].map(|o| PatchGrids::open(o).unwrap().unwrap());
        assert_eq!((p1.dim, p3.per_item(), pn.per_item()), (1280, 9, native * native));
        for (i, id) in store.ids().iter().enumerate() {
            let pooled = store.row(i);
            // Grid 1 is the pooled vector, within float16 rounding.
            let one = p1.get(id).unwrap();
            for (g, w) in one.iter().zip(pooled) {
                assert!((g - w).abs() <= w.abs() * 2f32.powi(-11) + 2f32.powi(-24), "{name} {id}: {g} vs {w}");
            }
            // The native grid averages to the pooled vector; cell (0, 0) of 3x3 averages its top-left block.
            let all = pn.get(id).unwrap();
            let three = p3.get(id).unwrap();
            let block = adaptive_bins(native, 3)[0].clone();
            let mut worst = (0f32, 0f32);
            for c in 0..1280 {
                let mean = (0..native * native).map(|p| all[p * 1280 + c]).sum::<f32>() / (native * native) as f32;
                let cell = block.clone().flat_map(|y| block.clone().map(move |x| y * native + x));
                let cell: f32 = cell.map(|p| all[p * 1280 + c]).sum::<f32>() / (block.len() * block.len()) as f32;
                worst.0 = worst.0.max((mean - pooled[c]).abs() / (1.0 + pooled[c].abs()));
                worst.1 = worst.1.max((cell - three[c]).abs() / (1.0 + three[c].abs()));
            }
            assert!(worst.0 < 2e-3 && worst.1 < 2e-3, "{name} {id}: relative differences {worst:?}");
            let last = native * native - 1;
            assert_ne!(&all[..1280], &all[last * 1280..], "{name} {id}: the corner patches are equal");
        }
        println!("{name}: patch grids 1, 3 and {native} agree with the pooled feature");
    }
}

#[test]
#[ignore]
fn token_ids_of_a_known_sentence_match_the_vocabularies() {
    let td = tempfile::tempdir().unwrap();
    let proc = serde_json::json!({"id": "t/p0", "title": null, "steps": [{"text": "Whisk the eggs."}]});
    let path = td.path().join("procedures.jsonl");
    std::fs::write(&path, format!("{proc}\n")).unwrap();
    let corpus = Corpus::load(&path).unwrap();
    let embed_tokens = |name: &str| {
        let mut opts = EmbedOptions::new(name);
        opts.ctx.models_dir = models_dir();
        opts.tokens = Some(16);
        let out = td.path().join(name);
        embed_corpus(&corpus, &out, None, &[], &opts).unwrap();
        TokenVectors::open(&out).unwrap().unwrap()
    };
    // MiniLM: the uncased BERT WordPiece vocabulary (30522 ids; [CLS] 101, [SEP] 102, [MASK] 103, "the" 1996).
    let tv = embed_tokens("minilm");
    let minilm = MiniLm::from_models_dir(&models_dir()).unwrap();
    let ids = minilm.tokenize(&["Whisk the eggs."]).unwrap().remove(0);
    assert_eq!((ids[0], ids[ids.len() - 1]), (101, 102));
    let want: Vec<i64> = ids[1..ids.len() - 1].iter().map(|&i| i as i64).collect();
    let got = tv.get_ids("text:t/p0#0").unwrap();
    assert_eq!(got, &want[..]);
    assert!(got.contains(&1996), "{got:?}");
    let vocab = tv.vocabulary().unwrap();
    assert_eq!((vocab.size, vocab.special.get("[MASK]"), vocab.special.get("[UNK]")), (30522, Some(&103), Some(&100)));
    println!("minilm: {got:?} of {}", vocab.size);
    // GloVe: lines of vocab.txt ("the" is its first word).
    let tv = embed_tokens("glove-50d");
    let words = std::fs::read_to_string(models_dir().join("glove-6b-50d/vocab.txt")).unwrap();
    let line = |w: &str| words.lines().position(|l| l == w).unwrap() as i64;
    assert_eq!(tv.get_ids("text:t/p0#0").unwrap(), &[line("whisk"), 0, line("eggs")]);
    assert_eq!(tv.vocab_size(), Some(400_000));
}

/// The step bodies of the RecipeQA dev recipes (`recipeqa/recipes-dev.json`), one text per step.
fn recipeqa_dev_texts() -> Vec<String> {
    let path = shared_data().join("recipeqa/recipes-dev.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let recipes = doc["recipes"].as_array().unwrap_or_else(|| panic!("{}: no `recipes` array", path.display()));
    let texts: Vec<String> = recipes
        .iter()
        .flat_map(|r| r["steps"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["body"].as_str().map(str::to_string))
        .filter(|t| !t.trim().is_empty())
        .collect();
    assert!(texts.len() > 1000, "{}: only {} step texts", path.display(), texts.len());
    texts
}

/// Issue 17: MiniLM moved from candle-transformers' BERT to stepwise's own kernels; the embeddings must stay
/// within 1e-5 of candle's (max abs difference per coordinate) on real texts: the RecipeQA dev step texts (some
/// truncated at 256 word pieces) and a sample of the procedure step texts (English and Chinese).
#[test]
#[ignore]
fn minilm_matches_candle_transformers_bert_on_real_texts() {
    use candle_core::{DType, Device, Tensor};
    use candle_transformers::models::bert::{BertModel, Config};

    let dir = models_dir().join("all-minilm-l6-v2");
    let minilm = MiniLm::from_dir(&dir).unwrap();
    let cfg: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    // SAFETY: the installed weights are not modified while mapped.
    let vb = unsafe {
        candle_nn::VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &Device::Cpu)
    }
    .unwrap();
    let candle = BertModel::load(vb, &cfg).unwrap();
    let (procedure_texts, _) = procedures();
    let recipeqa = recipeqa_dev_texts();
    let mut texts: Vec<&str> = recipeqa.iter().step_by(4).map(String::as_str).collect();
    texts.extend(procedure_texts.iter().step_by((procedure_texts.len() / 300).max(1)).map(String::as_str));
    let ids = minilm.tokenize(&texts).unwrap();
    let ours = minilm.embed_ids(&ids).unwrap();
    let mut worst = (0f32, 0usize);
    for (i, seq) in ids.iter().enumerate() {
        let input = Tensor::new(seq.as_slice(), &Device::Cpu).unwrap().unsqueeze(0).unwrap();
        let hidden = candle.forward(&input, &input.zeros_like().unwrap(), None).unwrap();
        let mut want: Vec<f32> = hidden.mean(1).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let n = norm(&want);
        want.iter_mut().for_each(|x| *x /= n);
        let got = &ours[i * 384..(i + 1) * 384];
        let diff = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        if diff > worst.0 {
            worst = (diff, i);
        }
    }
    println!(
        "MiniLM vs candle-transformers on {} real texts ({} RecipeQA dev steps, {} procedure steps): max |diff| {:.2e} \
         (text {}, {} tokens)",
        texts.len(),
        recipeqa.len().div_ceil(4),
        texts.len() - recipeqa.len().div_ceil(4),
        worst.0,
        worst.1,
        ids[worst.1].len()
    );
    assert!(worst.0 < 1e-5, "max abs difference {} on text {}", worst.0, worst.1);
}

/// The FLOP counts `stepwise bench encoders` prints: the real networks against the PyTorch reproduction's table
/// (d-li14/efficientnet-lite.pytorch: Lite0 0.385 G, Lite2 0.860 G multiply-adds, with the 1280 × 1000 classifier).
#[test]
#[ignore]
fn effnet_flop_counts_match_the_published_multiply_adds() {
    for (variant, published) in [(Variant::Lite0, 0.385e9), (Variant::Lite2, 0.860e9)] {
        let model = EfficientNetLite::from_models_dir(&models_dir(), variant).unwrap();
        let macs = model.flops_per_image() / 2.0 + 1280.0 * 1000.0;
        println!("{variant:?}: {:.4} G multiply-adds (published {:.3})", macs / 1e9, published / 1e9);
        assert!((macs / published - 1.0).abs() < 0.005, "{variant:?}: {macs} vs {published}");
    }
}
