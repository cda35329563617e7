//! Token-level features in the feature store (`stepwise embed --tokens`): the NumPy files and their agreement with
//! the encoder's own f32 token output, the token ids and their vocabulary, the relation of token vectors to the
//! pooled vector, unsupported encoders, re-runs, resuming, setting mismatches, stores written before token ids,
//! broken files and thread-count determinism. MiniLM token output on real
//! weights is checked in `acceptance_models.rs` (and with a tiny random BERT in the `minilm` unit tests).

use std::path::{Path, PathBuf};

use half::f16;
use stepwise_core::Corpus;
use stepwise_features::embed::{EmbedOptions, EmbedReport, embed_corpus};
use stepwise_features::npy::{parse_header, read_i64_vector, read_matrix};
use stepwise_features::registry::EncoderContext;
use stepwise_features::store::{FeatureStore, IDS_FILE, META_FILE, VECTORS_FILE, WORK_DIR};
use stepwise_features::tokens::{TOKEN_IDS_FILE, TOKEN_OFFSETS_FILE, TOKENS_FILE};
use stepwise_features::{FeatureError, Item, TokenVectors};

/// A text corpus of `n` procedures, 3 steps each, with steps of 0 to ~20 words (some only out-of-vocabulary
/// words once the rare-word cut applies).
fn write_corpus(dir: &Path, n: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let phrases = [
        "Whisk the eggs with the sugar until pale, then fold in the flour and a pinch of salt",
        "Unscrew the back panel and lift the battery out of the case",
        "Boil the pasta in salted water for ten minutes and drain it",
        "Serve warm",
        "Preheat the oven, grease the tin and pour in the batter; bake until golden and a skewer comes out clean",
    ];
    let mut lines = String::new();
    for p in 0..n {
        let mut steps = Vec::new();
        for s in 0..3 {
            let text = if (p + s) % 7 == 6 {
                format!("zzq{p}x{s}") // a word seen once: no vector (min_count 2)
            } else {
                format!("{} {}", phrases[(p + s) % phrases.len()], phrases[(p * 3 + s) % phrases.len()])
            };
            let title = if s == 0 { serde_json::json!(format!("Step {p}")) } else { serde_json::Value::Null };
            steps.push(serde_json::json!({"title": title, "text": text}));
        }
        let proc = serde_json::json!({"id": format!("set/p{p}"), "title": format!("P{p}"), "steps": steps});
        lines.push_str(&proc.to_string());
        lines.push('\n');
    }
    let f = dir.join("procedures.jsonl");
    std::fs::write(&f, lines).unwrap();
    f
}

fn w2v_opts(tokens: Option<usize>) -> EmbedOptions {
    let mut o = EmbedOptions::new("w2v");
    o.ctx.options.insert("dim".into(), "12".into());
    o.ctx.options.insert("epochs".into(), "2".into());
    o.tokens = tokens;
    o
}

fn embed(corpus: &Path, out: &Path, opts: &EmbedOptions) -> Result<EmbedReport, FeatureError> {
    embed_corpus(&Corpus::load(corpus).unwrap(), out, None, &[], opts)
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

const STORE_FILES: &[&str] = &[
    VECTORS_FILE,
    IDS_FILE,
    META_FILE,
    "keys",
    "failures.jsonl",
    "manifest.json",
    TOKENS_FILE,
    TOKEN_OFFSETS_FILE,
    TOKEN_IDS_FILE,
];

/// The text of every item of a store made from `corpus` (text items only).
fn item_texts(corpus: &Path) -> std::collections::HashMap<String, String> {
    let c = Corpus::load(corpus).unwrap();
    stepwise_features::items::corpus_items(&c, stepwise_features::Modality::Text)
        .into_iter()
        .map(|it| match it.content {
            stepwise_features::items::ItemContent::Text(t) => (it.id, t),
            _ => unreachable!("text items"),
        })
        .collect()
}

fn l2(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| if n > 0.0 { x / n } else { 0.0 }).collect()
}

/// Check a token store against its own encoder: the NumPy files, the offsets, and every item's tokens equal to the
/// encoder's f32 token output rounded to float16. Returns (items with tokens, items capped).
fn check_store_against_encoder(out: &Path, corpus: &Path, cap: usize, models: &Path) -> (usize, usize) {
    let store = FeatureStore::open(out).unwrap();
    let tv = TokenVectors::open(out).unwrap().expect("the store has token output");
    let meta = store.meta().tokens.clone().unwrap();
    assert_eq!((meta.max_tokens, meta.dtype.as_str(), meta.dim), (cap, "float16", store.dim()));
    assert_eq!((tv.max_tokens(), tv.dim, tv.len(), tv.ids()), (cap, store.dim(), store.len(), store.ids()));

    // The files as NumPy sees them.
    let tok_bytes = read(&out.join(TOKENS_FILE));
    let h = parse_header(&out.join(TOKENS_FILE), &tok_bytes).unwrap();
    assert_eq!((h.descr.as_str(), h.fortran_order, h.shape.clone()), ("<f2", false, vec![meta.total, store.dim()]));
    assert_eq!(h.data_offset % 64, 0);
    assert_eq!(tok_bytes.len(), h.data_offset + meta.total * store.dim() * 2);
    let off_bytes = read(&out.join(TOKEN_OFFSETS_FILE));
    let oh = parse_header(&out.join(TOKEN_OFFSETS_FILE), &off_bytes).unwrap();
    assert_eq!((oh.descr.as_str(), oh.shape.clone()), ("<i8", vec![store.len() + 1]));
    let offsets = read_i64_vector(&out.join(TOKEN_OFFSETS_FILE)).unwrap();
    assert_eq!(offsets.len(), store.len() + 1);
    assert_eq!((offsets[0], *offsets.last().unwrap()), (0, meta.total as i64));
    let ((rows, cols), matrix) = read_matrix(&out.join(TOKENS_FILE)).unwrap();
    assert_eq!((rows, cols), (meta.total, store.dim()));
    let ids_bytes = read(&out.join(TOKEN_IDS_FILE));
    let ih = parse_header(&out.join(TOKEN_IDS_FILE), &ids_bytes).unwrap();
    assert_eq!((ih.descr.as_str(), ih.shape.clone()), ("<i8", vec![meta.total]));
    let token_ids = read_i64_vector(&out.join(TOKEN_IDS_FILE)).unwrap();

    let ctx = EncoderContext { models_dir: models.to_path_buf(), ..Default::default() };
    let enc = store.encoder(&ctx).unwrap();
    // The vocabulary in meta.json is the encoder's; every id indexes it.
    let vocab = enc.vocabulary().expect("token encoders have a vocabulary");
    assert_eq!((meta.vocab.as_ref(), tv.vocabulary(), tv.vocab_size()), (Some(&vocab), Some(&vocab), Some(vocab.size)));
    assert!(token_ids.iter().all(|&t| t >= 0 && (t as usize) < vocab.size));
    let texts = item_texts(corpus);
    let dim = store.dim();
    let (mut with_tokens, mut capped) = (0, 0);
    for (i, id) in store.ids().iter().enumerate() {
        // Offsets agree with ids and the accessors.
        let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
        assert!(b >= a && b - a <= cap, "{id}: offsets {a}..{b}");
        assert_eq!(tv.index_of(id), Some(i));
        assert_eq!(tv.row_range(i), a..b);
        assert_eq!(tv.token_count(id), Some(b - a));
        let text = &texts[id];
        let own = enc.encode_with_tokens(&[Item::Text(text)], cap).unwrap();
        // The pooled vector in the store is the encoder's.
        assert_eq!(store.row(i), &own.vectors[..], "{id}: pooled vector");
        assert_eq!(own.counts, [b - a], "{id}: token count");
        // The ids: token_ids.npy rows, the accessors and the encoder's own ids agree.
        assert_eq!(tv.token_ids(i), Some(&token_ids[a..b]), "{id}: token ids");
        assert_eq!(&token_ids[a..b], &own.ids[..], "{id}: the encoder's ids");
        if b == a {
            assert_eq!(tv.get(id), None, "{id}: no tokens is None, never Some(empty)");
            assert_eq!(tv.get_ids(id), None, "{id}");
            continue;
        }
        assert_eq!(tv.get_ids(id), Some(&token_ids[a..b]));
        with_tokens += 1;
        let got = tv.get(id).unwrap();
        assert_eq!(got.len(), (b - a) * dim);
        assert_eq!(&got[..], &matrix[a * dim..b * dim], "{id}: get() and tokens.npy rows");
        for (g, w) in got.iter().zip(&own.tokens) {
            // Exactly the f32 value rounded to float16, hence within half precision of it.
            assert_eq!(*g, f16::from_f32(*w).to_f32(), "{id}");
            assert!((g - w).abs() <= w.abs() * 2f32.powi(-11) + 2f32.powi(-24), "{id}: {g} vs {w}");
        }
        let all = enc.encode_with_tokens(&[Item::Text(text)], usize::MAX).unwrap().counts[0];
        if all > cap {
            capped += 1;
            assert_eq!(b - a, cap);
        }
    }
    (with_tokens, capped)
}

#[test]
fn w2v_tokens_round_trip_and_their_mean_is_the_pooled_direction() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 12);
    let out = td.path().join("w2v-tokens");
    let cap = 8;
    let r = embed(&corpus, &out, &w2v_opts(Some(cap))).unwrap();
    let (with_tokens, capped) = check_store_against_encoder(&out, &corpus, cap, Path::new("models"));
    assert!(with_tokens > 20 && capped > 5, "the corpus exercises the cap: {with_tokens} items, {capped} capped");
    assert!(with_tokens < r.stored, "some items have no in-vocabulary word");
    assert_eq!(r.tokens, Some(TokenVectors::open(&out).unwrap().unwrap().total_tokens()));

    // w2v pools by the L2-normalised mean of the word vectors: from the float16 tokens of every uncapped item.
    let store = FeatureStore::open(&out).unwrap();
    let tv = store.tokens().unwrap().unwrap();
    let dim = store.dim();
    let mut checked = 0;
    for (i, id) in store.ids().iter().enumerate() {
        let Some(t) = tv.get(id) else {
            assert!(store.row(i).iter().all(|&x| x == 0.0), "{id}: no known word, zero vector");
            continue;
        };
        if tv.row_range(i).len() == cap {
            continue; // possibly capped: the pooled vector also averages words beyond the cap
        }
        let n = t.len() / dim;
        let mean: Vec<f32> = (0..dim).map(|d| (0..n).map(|k| t[k * dim + d]).sum::<f32>() / n as f32).collect();
        for (a, b) in l2(&mean).iter().zip(store.row(i)) {
            assert!((a - b).abs() < 2e-3, "{id}: mean of tokens {a} vs pooled {b}");
        }
        checked += 1;
    }
    assert!(checked > 10, "{checked}");

    // Same inputs without --tokens: the pooled output is byte-identical, meta.json has no `tokens` entry and the
    // token files are absent.
    let plain = td.path().join("w2v");
    embed(&corpus, &plain, &w2v_opts(None)).unwrap();
    for f in [VECTORS_FILE, IDS_FILE, "keys", "failures.jsonl"] {
        assert_eq!(read(&plain.join(f)), read(&out.join(f)), "{f}");
    }
    assert!(!std::fs::read_to_string(plain.join(META_FILE)).unwrap().contains("\"tokens\""));
    assert!(!plain.join(TOKENS_FILE).exists() && !plain.join(TOKEN_OFFSETS_FILE).exists());
    assert!(TokenVectors::open(&plain).unwrap().is_none());
}

#[test]
fn glove_tokens_are_its_word_vectors() {
    let td = tempfile::tempdir().unwrap();
    let models = td.path().join("models");
    let g = models.join("glove-6b-50d");
    std::fs::create_dir_all(&g).unwrap();
    let words = ["the", "eggs", "whisk", "sugar", "flour", "oven", "bake", "pan", "seared", "serve", "warm"];
    let data: Vec<f32> = (0..words.len() * 4).map(|i| ((i * 37 % 19) as f32 - 9.0) * 0.173).collect();
    stepwise_features::npy::write_matrix(&g.join("vectors.npy"), words.len(), 4, &data).unwrap();
    std::fs::write(g.join("vocab.txt"), words.join("\n") + "\n").unwrap();
    let corpus = write_corpus(&td.path().join("c"), 6);
    let out = td.path().join("glove");
    let mut opts = EmbedOptions::new("glove-50d");
    opts.ctx.models_dir = models.clone();
    opts.tokens = Some(3);
    embed(&corpus, &out, &opts).unwrap();
    let (with_tokens, capped) = check_store_against_encoder(&out, &corpus, 3, &models);
    assert!(with_tokens > 5 && capped > 3, "{with_tokens} {capped}");
    let tv = TokenVectors::open(&out).unwrap().unwrap();
    let meta = FeatureStore::open(&out).unwrap().meta().tokens.clone().unwrap();
    assert!(meta.token.contains("GloVe"), "{}", meta.token);
    // "Step 0\nWhisk the eggs with the sugar ..." → the first 3 known words: whisk, the, eggs.
    assert!(item_texts(&corpus)["text:set/p0#0"].starts_with("Step 0\nWhisk the eggs"));
    let want: Vec<f32> = [2usize, 0, 1].iter().flat_map(|&w| data[w * 4..w * 4 + 4].to_vec()).collect();
    let want: Vec<f32> = want.iter().map(|&x| f16::from_f32(x).to_f32()).collect();
    assert_eq!(tv.get("text:set/p0#0").unwrap(), want);
    // Their ids are the lines of vocab.txt; the vocabulary is vocab.txt's 11 words.
    assert_eq!(tv.get_ids("text:set/p0#0"), Some(&[2i64, 0, 1][..]));
    let vocab = tv.vocabulary().unwrap();
    assert_eq!(vocab.size, 11);
    assert_eq!(vocab.blake3, stepwise_core::hash::hash_str(&(words.join("\n") + "\n")));
    assert!(vocab.name.contains("vocab.txt"), "{}", vocab.name);
}

#[test]
fn stores_without_token_ids_stay_readable_and_a_token_run_adds_them() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 6);
    let out = td.path().join("feat");
    embed(&corpus, &out, &w2v_opts(Some(5))).unwrap();
    let fresh: Vec<Vec<u8>> = STORE_FILES.iter().map(|f| read(&out.join(f))).collect();
    // Make it a store of the previous format: no token_ids.npy, no tokens.vocab / tokens.ids_blake3.
    std::fs::remove_file(out.join(TOKEN_IDS_FILE)).unwrap();
    let mut meta: serde_json::Value = serde_json::from_slice(&read(&out.join(META_FILE))).unwrap();
    let t = meta["tokens"].as_object_mut().unwrap();
    assert!(t.remove("vocab").is_some() && t.remove("ids_blake3").is_some());
    std::fs::write(out.join(META_FILE), stepwise_core::json::to_pretty_sorted(&meta)).unwrap();
    let tv = TokenVectors::open(&out).unwrap().unwrap();
    assert!(tv.total_tokens() > 0 && tv.get("text:set/p0#0").is_some());
    assert_eq!((tv.token_ids(0), tv.get_ids("text:set/p0#0"), tv.vocab_size()), (None, None, None));
    // A --tokens run re-encodes its items (their rows lack ids) and writes what a fresh run writes.
    let r = embed(&corpus, &out, &w2v_opts(Some(5))).unwrap();
    assert!(!r.up_to_date && r.encoded > 0 && r.reused == 0, "{r:?}");
    for (f, want) in STORE_FILES.iter().zip(&fresh) {
        assert_eq!(&read(&out.join(f)), want, "{f}");
    }
    assert!(TokenVectors::open(&out).unwrap().unwrap().vocab_size().is_some());
}

#[test]
fn encoders_without_token_output_are_usage_errors() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 2);
    let out = td.path().join("feat");
    for encoder in ["tfidf", "descriptor", "effnet-lite0", "clip-text"] {
        let mut opts = EmbedOptions::new(encoder);
        opts.tokens = Some(32);
        let e = embed(&corpus, &out, &opts).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{encoder}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(encoder) && msg.contains("per-token") && msg.contains("w2v, minilm, glove-50d"), "{msg}");
        assert!(!out.exists(), "{encoder}: a refused run left {}", out.display());
    }
    let e = embed(&corpus, &out, &w2v_opts(Some(0))).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("--max-tokens"), "{e}");
}

#[test]
fn token_outputs_are_identical_for_any_thread_count() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 10);
    let run = |threads: usize| {
        let out = td.path().join(format!("t{threads}"));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut opts = w2v_opts(Some(5));
        opts.chunk_items = 7;
        pool.install(|| embed(&corpus, &out, &opts)).unwrap();
        out
    };
    let a = run(1);
    let b = run(2);
    for f in STORE_FILES {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f} differs between 1 and 2 threads");
    }
}

#[test]
fn token_runs_resume_reuse_and_refuse_other_settings() {
    let td = tempfile::tempdir().unwrap();
    let cdir = td.path().join("c");
    let corpus = write_corpus(&cdir, 10);
    let out = td.path().join("feat");
    let mut opts = w2v_opts(Some(6));
    opts.chunk_items = 4;
    opts.stop_after = Some(9);
    // Interrupted: chunks with tokens in .work/, no store yet.
    let r = embed(&corpus, &out, &opts).unwrap();
    assert!(r.interrupted && out.join(WORK_DIR).is_dir(), "{r:?}");
    assert!(TokenVectors::open(&out).is_err(), "an unfinished run is not a store");
    // Another token setting cannot resume it.
    let e = embed(&corpus, &out, &w2v_opts(Some(7))).unwrap_err();
    assert!(matches!(e, FeatureError::Mismatch(_)) && e.to_string().contains("--max-tokens 6"), "{e}");
    // Resume: identical to an uninterrupted run.
    opts.stop_after = None;
    let r = embed(&corpus, &out, &opts).unwrap();
    assert!(r.reused >= 12 && !r.interrupted, "{r:?}");
    let straight = td.path().join("straight");
    embed(&corpus, &straight, &w2v_opts(Some(6))).unwrap();
    for f in STORE_FILES {
        assert_eq!(read(&out.join(f)), read(&straight.join(f)), "{f}: resumed vs straight");
    }

    // Nothing new: up to date, nothing rewritten.
    let mtime = std::fs::metadata(out.join(TOKENS_FILE)).unwrap().modified().unwrap();
    let r = embed(&corpus, &out, &w2v_opts(Some(6))).unwrap();
    assert!(r.up_to_date && r.tokens.is_some(), "{r:?}");
    assert_eq!(std::fs::metadata(out.join(TOKENS_FILE)).unwrap().modified().unwrap(), mtime);

    // New strings: only they are encoded, the store's token vectors are reused, and the result equals a fresh run.
    let extra = stepwise_features::items::string_items(&["whisk the eggs", "lift the panel and serve warm"]);
    let c = Corpus::load(&corpus).unwrap();
    let r = embed_corpus(&c, &out, None, &extra, &w2v_opts(Some(6))).unwrap();
    assert_eq!(r.encoded, 2, "{r:?}");
    let fresh = td.path().join("fresh");
    embed_corpus(&c, &fresh, None, &extra, &w2v_opts(Some(6))).unwrap();
    for f in STORE_FILES {
        assert_eq!(read(&out.join(f)), read(&fresh.join(f)), "{f}: extended vs fresh");
    }
    let tv = TokenVectors::open(&out).unwrap().unwrap();
    assert_eq!(tv.token_count(&extra[0].id), Some(3));

    // A store with tokens is not extended without them (or with another cap), and vice versa; --force replaces.
    for other in [None, Some(32)] {
        let e = embed_corpus(&c, &out, None, &extra, &w2v_opts(other)).unwrap_err();
        assert!(matches!(e, FeatureError::Mismatch(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("with token output (--tokens --max-tokens 6)") && msg.contains("--force"), "{msg}");
    }
    let plain = td.path().join("plain");
    embed(&corpus, &plain, &w2v_opts(None)).unwrap();
    let e = embed(&corpus, &plain, &w2v_opts(Some(6))).unwrap_err();
    assert!(e.to_string().contains("without token output"), "{e}");
    let mut forced = w2v_opts(Some(6));
    forced.force = true;
    embed(&corpus, &plain, &forced).unwrap();
    for f in STORE_FILES {
        assert_eq!(read(&plain.join(f)), read(&straight.join(f)), "{f}: forced vs straight");
    }
}

#[test]
fn broken_token_files_are_clear_errors() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 4);
    let out = td.path().join("feat");
    embed(&corpus, &out, &w2v_opts(Some(4))).unwrap();
    let good_offsets = read(&out.join(TOKEN_OFFSETS_FILE));
    let good_tokens = read(&out.join(TOKENS_FILE));

    // Offsets from another run.
    let mut offsets = read_i64_vector(&out.join(TOKEN_OFFSETS_FILE)).unwrap();
    offsets[1] += 1;
    stepwise_features::npy::write_i64_vector(&out.join(TOKEN_OFFSETS_FILE), &offsets).unwrap();
    let e = TokenVectors::open(&out).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains(TOKEN_OFFSETS_FILE) && e.to_string().contains("--force"), "{e}");
    std::fs::write(out.join(TOKEN_OFFSETS_FILE), &good_offsets).unwrap();

    // A truncated token matrix.
    std::fs::write(out.join(TOKENS_FILE), &good_tokens[..good_tokens.len() - 2]).unwrap();
    let e = TokenVectors::open(&out).unwrap_err();
    assert!(e.to_string().contains(TOKENS_FILE) && e.to_string().contains("truncated"), "{e}");
    // Missing.
    std::fs::remove_file(out.join(TOKENS_FILE)).unwrap();
    let e = TokenVectors::open(&out).unwrap_err();
    assert!(e.to_string().contains(TOKENS_FILE), "{e}");
    std::fs::write(out.join(TOKENS_FILE), &good_tokens).unwrap();
    assert!(TokenVectors::open(&out).unwrap().is_some());

    // Token ids from another run.
    let good_ids = read(&out.join(TOKEN_IDS_FILE));
    let mut ids = read_i64_vector(&out.join(TOKEN_IDS_FILE)).unwrap();
    ids[0] += 1;
    stepwise_features::npy::write_i64_vector(&out.join(TOKEN_IDS_FILE), &ids).unwrap();
    let e = TokenVectors::open(&out).unwrap_err();
    assert!(e.to_string().contains(TOKEN_IDS_FILE) && e.to_string().contains("--force"), "{e}");
    std::fs::write(out.join(TOKEN_IDS_FILE), &good_ids).unwrap();
    assert!(TokenVectors::open(&out).unwrap().unwrap().token_ids(0).is_some());
}
