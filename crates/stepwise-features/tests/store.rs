//! The feature store end to end on small corpora written to temporary folders: layout, failures, incremental
//! re-runs, resuming an interrupted run, mismatch errors, determinism across thread counts, and re-creating
//! fitted encoders from a store.

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicUsize, Ordering};
use stepwise_core::Corpus;
use stepwise_features::builtin::descriptor::Descriptor;
use stepwise_features::embed::{EmbedOptions, EmbedReport, embed_corpus};
use stepwise_features::image_source::{FsImageSource, ImageSource};
use stepwise_features::items::{ItemRef, string_items};
use stepwise_features::registry::EncoderContext;
use stepwise_features::store::{FAILURES_FILE, FeatureStore, IDS_FILE, META_FILE, VECTORS_FILE, WORK_DIR};
use stepwise_features::{FeatureError, Item};

fn image(seed: u32) -> image::RgbImage {
    image::RgbImage::from_fn(40 + seed, 30, move |x, y| {
        image::Rgb([((x * (seed + 3)) % 256) as u8, ((y * 7 + seed * 40) % 256) as u8, ((x + y) * seed % 256) as u8])
    })
}

/// A corpus of `n` procedures with 2 steps each: texts, and one image per step (image `i/p{p}s{s}.png`).
/// Procedure 1's second image is corrupt and procedure 2's second image is missing when `bad` is set.
fn write_corpus(dir: &Path, n: usize, bad: bool) -> PathBuf {
    std::fs::create_dir_all(dir.join("i")).unwrap();
    let mut lines = String::new();
    let verbs =
        ["Whisk the eggs with sugar", "Unscrew the back panel", "Boil the pasta in salted water", "Lift the display"];
    for p in 0..n {
        let mut steps = Vec::new();
        for s in 0..2 {
            let rel = format!("i/p{p}s{s}.png");
            let path = dir.join(&rel);
            if bad && p == 1 && s == 1 {
                std::fs::write(&path, b"\x89PNG\r\n\x1a\n truncated garbage").unwrap();
            } else if bad && p == 2 && s == 1 {
                // missing file
            } else {
                image((p * 2 + s) as u32 + 1).save(&path).unwrap();
            }
            let title = if s == 0 { serde_json::json!(format!("Step {s}")) } else { serde_json::Value::Null };
            steps.push(serde_json::json!({
                "title": title,
                "text": format!("{} number {p} then {}.", verbs[p % 4], verbs[(p + s + 1) % 4]),
                "images": [rel],
            }));
        }
        let proc = serde_json::json!({"id": format!("set/p{p}"), "title": format!("P{p}"), "steps": steps});
        lines.push_str(&proc.to_string());
        lines.push('\n');
    }
    let f = dir.join("procedures.jsonl");
    std::fs::write(&f, lines).unwrap();
    f
}

fn embed(corpus: &Path, out: &Path, opts: &EmbedOptions) -> Result<EmbedReport, FeatureError> {
    let c = Corpus::load(corpus).unwrap();
    embed_corpus(&c, out, None, &[], opts)
}

/// Image files, counting how many were decoded (to prove a re-run decodes and encodes nothing).
struct CountingSource {
    inner: FsImageSource,
    loads: AtomicUsize,
}

impl ImageSource for CountingSource {
    fn load(&self, rel_path: &str) -> Result<image::RgbImage, String> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(rel_path)
    }

    fn fingerprint(&self, rel_path: &str) -> Result<String, String> {
        self.inner.fingerprint(rel_path)
    }
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn descriptor_store_layout_failures_and_rows() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 4, true);
    let out = td.path().join("feat");
    let r = embed(&corpus, &out, &EmbedOptions::new("descriptor")).unwrap();
    assert_eq!((r.items, r.stored, r.failed, r.encoded), (8, 6, 2, 7));
    let store = FeatureStore::open(&out).unwrap();
    assert_eq!(store.len(), 6);
    assert_eq!(store.info().name, "descriptor");
    assert_eq!(store.ids()[0], "image:i/p0s0.png");
    assert!(store.index_of("image:i/p1s1.png").is_none());
    let fails = store.failures().unwrap();
    assert_eq!(fails.len(), 2);
    assert_eq!(fails[0].id, "image:i/p1s1.png");
    assert!(fails[0].reason.contains("cannot decode") && fails[0].key.is_some(), "{:?}", fails[0]);
    assert_eq!(fails[1].id, "image:i/p2s1.png");
    assert!(fails[1].reason.contains("cannot read") && fails[1].key.is_none(), "{:?}", fails[1]);
    // Rows are the descriptor of each image, read through the memory map and by load().
    let d = Descriptor::new();
    let expect = d.describe(&image(2));
    assert_eq!(store.get("image:i/p0s1.png").unwrap(), &expect[..]);
    let v = store.load().unwrap();
    assert_eq!(v.get("image:i/p0s1.png").unwrap(), &expect[..]);
    // vectors.npy is a plain (6, dim) float32 array.
    let ((rows, cols), data) = stepwise_features::npy::read_matrix(&out.join(VECTORS_FILE)).unwrap();
    assert_eq!((rows, cols), (6, store.dim()));
    assert_eq!(data, v.data);
    assert!(!out.join(WORK_DIR).exists());
    assert!(out.join("manifest.json").exists());
}

#[test]
fn rerun_with_nothing_new_does_no_work_and_new_items_are_added() {
    let td = tempfile::tempdir().unwrap();
    let cdir = td.path().join("c");
    let corpus = write_corpus(&cdir, 3, true);
    let out = td.path().join("feat");
    embed(&corpus, &out, &EmbedOptions::new("descriptor")).unwrap();
    let before = (read(&out.join(VECTORS_FILE)), read(&out.join(META_FILE)), read(&out.join(FAILURES_FILE)));
    let mtime = std::fs::metadata(out.join(VECTORS_FILE)).unwrap().modified().unwrap();
    let counting = CountingSource { inner: FsImageSource::new(&cdir), loads: AtomicUsize::new(0) };
    let c = Corpus::load(&corpus).unwrap();
    let r = embed_corpus(&c, &out, Some(&counting), &[], &EmbedOptions::new("descriptor")).unwrap();
    assert!(r.up_to_date, "{r:?}");
    assert_eq!(r.encoded, 0);
    assert_eq!(counting.loads.load(Ordering::SeqCst), 0, "a re-run with nothing new decoded images");
    assert_eq!(std::fs::metadata(out.join(VECTORS_FILE)).unwrap().modified().unwrap(), mtime, "store rewritten");
    assert_eq!((read(&out.join(VECTORS_FILE)), read(&out.join(META_FILE)), read(&out.join(FAILURES_FILE))), before);

    // Two more procedures (4 new images, one of them missing already counted): only they are encoded.
    let corpus = write_corpus(&cdir, 5, true);
    let r = embed(&corpus, &out, &EmbedOptions::new("descriptor")).unwrap();
    assert!(!r.up_to_date);
    assert_eq!(r.encoded, 4, "{r:?}");
    assert_eq!(r.stored, 8);
    // Same result as embedding the grown corpus from scratch.
    let fresh = td.path().join("fresh");
    embed(&corpus, &fresh, &EmbedOptions::new("descriptor")).unwrap();
    assert_eq!(read(&out.join(VECTORS_FILE)), read(&fresh.join(VECTORS_FILE)));
    assert_eq!(read(&out.join(IDS_FILE)), read(&fresh.join(IDS_FILE)));

    // A changed image is re-encoded (its content key changed).
    image(99).save(cdir.join("i/p0s0.png")).unwrap();
    let r = embed(&corpus, &out, &EmbedOptions::new("descriptor")).unwrap();
    assert_eq!(r.encoded, 1);
    let store = FeatureStore::open(&out).unwrap();
    assert_eq!(store.get("image:i/p0s0.png").unwrap(), &Descriptor::new().describe(&image(99))[..]);
}

#[test]
fn interrupted_run_resumes_and_matches_an_uninterrupted_one() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 6, false);
    let out = td.path().join("feat");
    let mut opts = EmbedOptions::new("descriptor");
    opts.chunk_items = 3;
    opts.stop_after = Some(4);
    let r = embed(&corpus, &out, &opts).unwrap();
    assert!(r.interrupted);
    assert_eq!(r.encoded, 6); // two chunks of 3
    assert!(out.join(WORK_DIR).is_dir());
    let e = FeatureStore::open(&out).unwrap_err().to_string();
    assert!(e.contains("unfinished"), "{e}");
    // Resume: only the remaining 6 of 12 images are encoded.
    opts.stop_after = None;
    let r = embed(&corpus, &out, &opts).unwrap();
    assert_eq!((r.encoded, r.reused, r.stored), (6, 6, 12), "{r:?}");
    assert!(!out.join(WORK_DIR).exists());
    let straight = td.path().join("straight");
    embed(&corpus, &straight, &EmbedOptions::new("descriptor")).unwrap();
    for f in [VECTORS_FILE, IDS_FILE, META_FILE, "keys", FAILURES_FILE, "manifest.json"] {
        assert_eq!(read(&out.join(f)), read(&straight.join(f)), "{f} differs");
    }
}

#[test]
fn mismatched_encoder_or_options_are_errors_unless_forced() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 3, false);
    let out = td.path().join("feat");
    let mut w2v = EmbedOptions::new("w2v");
    w2v.ctx.options.insert("dim".into(), "8".into());
    w2v.ctx.options.insert("min_count".into(), "1".into());
    embed(&corpus, &out, &w2v).unwrap();

    let err = embed(&corpus, &out, &EmbedOptions::new("tfidf")).unwrap_err();
    assert!(matches!(err, FeatureError::Mismatch(_)), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("w2v") && err.to_string().contains("--force"), "{err}");

    let mut other_dim = w2v.clone();
    other_dim.ctx.options.insert("dim".into(), "16".into());
    let err = embed(&corpus, &out, &other_dim).unwrap_err();
    assert!(err.to_string().contains("dim=8") && err.to_string().contains("dim=16"), "{err}");

    let mut other_seed = w2v.clone();
    other_seed.ctx.seed = 5;
    assert!(matches!(embed(&corpus, &out, &other_seed), Err(FeatureError::Mismatch(_))));

    // The encoder changed since (simulated by editing the recorded version): an error, not silent mixing.
    let meta_path = out.join(META_FILE);
    let meta = std::fs::read_to_string(&meta_path).unwrap().replace("w2v-sgns-1", "w2v-sgns-0");
    std::fs::write(&meta_path, meta).unwrap();
    let err = embed(&corpus, &out, &w2v).unwrap_err();
    assert!(err.to_string().contains("version"), "{err}");

    let mut forced = EmbedOptions::new("tfidf");
    forced.force = true;
    embed(&corpus, &out, &forced).unwrap();
    assert_eq!(FeatureStore::open(&out).unwrap().info().name, "tfidf");
}

#[test]
fn outputs_are_identical_for_any_thread_count() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 8, true);
    for encoder in ["descriptor", "w2v", "tfidf"] {
        let run = |threads: usize| {
            let out = td.path().join(format!("{encoder}-{threads}"));
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let mut opts = EmbedOptions::new(encoder);
            opts.chunk_items = 5;
            opts.ctx.options = match encoder {
                "w2v" => {
                    [("dim", "12"), ("min_count", "1")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
                }
                _ => Default::default(),
            };
            pool.install(|| embed(&corpus, &out, &opts)).unwrap();
            out
        };
        let a = run(1);
        for threads in [2, 4] {
            let b = run(threads);
            for f in [VECTORS_FILE, IDS_FILE, META_FILE, "keys", FAILURES_FILE, "manifest.json"] {
                assert_eq!(
                    read(&a.join(f)),
                    read(&b.join(f)),
                    "{encoder}: {f} differs between 1 and {threads} threads"
                );
            }
        }
    }
}

#[test]
fn fitted_encoders_are_recreated_from_the_store() {
    let td = tempfile::tempdir().unwrap();
    let corpus_path = write_corpus(&td.path().join("c"), 6, false);
    let corpus = Corpus::load(&corpus_path).unwrap();
    for encoder in ["w2v", "tfidf"] {
        let out = td.path().join(encoder);
        let mut opts = EmbedOptions::new(encoder);
        opts.ctx.seed = 3;
        let extra = string_items(&["whisk the eggs", "lift the panel"]);
        embed_corpus(&corpus, &out, None, &extra, &opts).unwrap();
        let store = FeatureStore::open(&out).unwrap();
        assert!(store.meta().fitted);
        // Text, title and string items follow the id convention.
        assert!(store.ids().iter().any(|id| matches!(ItemRef::parse(id), Some(ItemRef::Title { .. }))));
        let text_id = "text:set/p2#1";
        let text = corpus.procedures[2].steps[1].full_text();
        let enc = store.encoder(&EncoderContext::default()).unwrap();
        assert_eq!(enc.info(), store.info());
        assert_eq!(enc.encode(&[Item::Text(&text)]).unwrap(), store.get(text_id).unwrap(), "{encoder}");
        let strings = store.encode_strings(&EncoderContext::default(), &["whisk the eggs"]).unwrap();
        assert_eq!(strings.row(0), store.get(&strings.ids[0]).unwrap(), "{encoder}: str: item");
    }
}

#[test]
fn extra_strings_do_not_change_a_fitted_model() {
    let td = tempfile::tempdir().unwrap();
    let corpus = Corpus::load(&write_corpus(&td.path().join("c"), 5, false)).unwrap();
    for encoder in ["w2v", "tfidf"] {
        let plain = td.path().join(format!("{encoder}-plain"));
        let with = td.path().join(format!("{encoder}-with"));
        embed_corpus(&corpus, &plain, None, &[], &EmbedOptions::new(encoder)).unwrap();
        let extra = string_items(&["unscrew unscrew unscrew the eggs", "completely new words here"]);
        embed_corpus(&corpus, &with, None, &extra, &EmbedOptions::new(encoder)).unwrap();
        let (a, b) = (FeatureStore::open(&plain).unwrap(), FeatureStore::open(&with).unwrap());
        assert_eq!(a.info(), b.info(), "{encoder}");
        for id in a.ids() {
            assert_eq!(a.get(id), b.get(id), "{encoder}: {id}");
        }
        assert_eq!(b.len(), a.len() + 2);
    }
}

#[test]
fn broken_stores_are_clear_errors() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 2, false);
    let out = td.path().join("feat");
    embed(&corpus, &out, &EmbedOptions::new("descriptor")).unwrap();
    std::fs::write(out.join(IDS_FILE), "image:x\n").unwrap();
    let e = FeatureStore::open(&out).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("ids") && e.to_string().contains("--force"), "{e}");
    let e = FeatureStore::open(&td.path().join("nothing")).unwrap_err().to_string();
    assert!(e.contains("not a feature store"), "{e}");
    // Embedding into a folder that holds something else is refused (it would be replaced) unless forced.
    let other = td.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("precious.txt"), "keep me").unwrap();
    let e = embed(&corpus, &other, &EmbedOptions::new("descriptor")).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(other.join("precious.txt").exists());
    // A text encoder given image items (or the reverse) is a usage error.
    let items =
        stepwise_features::items::corpus_items(&Corpus::load(&corpus).unwrap(), stepwise_features::Modality::Image);
    let src = stepwise_features::image_source::FsImageSource::new(td.path().join("c"));
    let e = stepwise_features::embed::embed_items(&td.path().join("x"), &items, &src, &EmbedOptions::new("tfidf"))
        .unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
}

#[test]
fn missing_model_folder_says_how_to_install_and_leaves_nothing_behind() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 2, false);
    let out = td.path().join("feat");
    for encoder in ["minilm", "effnet-lite0", "glove-50d"] {
        let mut opts = EmbedOptions::new(encoder);
        opts.ctx.models_dir = td.path().join("no-models");
        let e = embed(&corpus, &out, &opts).unwrap_err();
        assert!(matches!(e, FeatureError::MissingModel(_)), "{encoder}: {e}");
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("scripts/fetch-models.sh"), "{encoder}: {e}");
        assert!(!out.exists(), "{encoder}: a failed run left {}", out.display());
    }
}
