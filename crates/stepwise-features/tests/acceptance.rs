//! Acceptance on the real procedure sets (../shared/data/procedures): the built-in encoders embed every set
//! with no failures, nearest neighbours of real step images and texts make sense, and exact k-NN equals brute
//! force on real features.
//!
//! Every test is `#[ignore]`d: `cargo test -p stepwise-features --test acceptance -- --ignored --nocapture`.
//! The data is found through `STEPWISE_SHARED_DATA` (default `<workspace>/../shared/data`); a missing folder
//! fails the tests.

use std::path::{Path, PathBuf};
use std::time::Instant;

use stepwise_core::Corpus;
use stepwise_core::corpus::read_procedures_jsonl;
use stepwise_features::embed::{EmbedOptions, embed_corpus};
use stepwise_features::items::{ItemRef, corpus_items};
use stepwise_features::knn::{Filter, KnnOptions, Metric, Neighbor, distance, knn, knn_brute_force};
use stepwise_features::registry;
use stepwise_features::store::{FAILURES_FILE, FeatureStore};

const SETS: [&str; 4] = ["gnome-recipes", "howtocook", "based-cooking", "ifixit"];
const BUILTIN: [&str; 3] = ["w2v", "tfidf", "descriptor"];

fn procedures_dir() -> PathBuf {
    let data = std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let dir = data.join("procedures");
    assert!(
        dir.join("gnome-recipes.jsonl").is_file(),
        "shared data not found at {} (set STEPWISE_SHARED_DATA)",
        data.display()
    );
    dir
}

/// All four sets as one corpus (their image paths share the `procedures/` root).
fn all_sets() -> Corpus {
    let dir = procedures_dir();
    let mut procedures = Vec::new();
    for set in SETS {
        procedures.extend(read_procedures_jsonl(&dir.join(format!("{set}.jsonl"))).unwrap());
    }
    Corpus { dir: dir.clone(), image_root: dir, manifest: None, procedures }
}

fn embed(corpus: &Corpus, encoder: &str, out: &Path) -> FeatureStore {
    let r = embed_corpus(corpus, out, None, &[], &EmbedOptions::new(encoder)).unwrap();
    assert!(!r.interrupted);
    FeatureStore::open(out).unwrap()
}

#[test]
#[ignore]
fn builtin_encoders_embed_every_set_without_failures() {
    let dir = procedures_dir();
    let td = tempfile::tempdir().unwrap();
    for set in SETS {
        let corpus = Corpus::load(&dir.join(format!("{set}.jsonl"))).unwrap();
        for encoder in BUILTIN {
            let modality = registry::find(encoder).unwrap().modality;
            let expected = corpus_items(&corpus, modality).len();
            let out = td.path().join(format!("{set}-{encoder}"));
            let t = Instant::now();
            let store = embed(&corpus, encoder, &out);
            println!(
                "{set:>14} {encoder:>10}: {:>5} items, dim {:>4}, {:.2} s",
                store.len(),
                store.dim(),
                t.elapsed().as_secs_f64()
            );
            assert_eq!(std::fs::read(out.join(FAILURES_FILE)).unwrap(), b"", "{set} {encoder}: failures.jsonl");
            assert_eq!(store.len(), expected, "{set} {encoder}: every item has a row");
            assert!(expected > 0);
            for (i, id) in store.ids().iter().enumerate() {
                let n: f32 = store.row(i).iter().map(|x| x * x).sum();
                // Unit rows; only a text with no vocabulary word may be the zero vector.
                let zero_ok = encoder != "descriptor" && n == 0.0;
                assert!((n - 1.0).abs() < 1e-4 || zero_ok, "{set} {encoder} {id}: squared norm {n}");
            }
            // A second run has nothing to do.
            let again = embed_corpus(&corpus, &out, None, &[], &EmbedOptions::new(encoder)).unwrap();
            assert!(again.up_to_date && again.encoded == 0, "{set} {encoder}: {again:?}");
        }
    }
}

fn show(store: &FeatureStore, corpus: &Corpus, query: &str, results: &[Neighbor]) {
    let text = |id: &str| -> String {
        let find = |pid: &str| corpus.procedures.iter().find(|p| p.id == pid);
        let t = match ItemRef::parse(id) {
            Some(ItemRef::Text { procedure, step }) => find(procedure).map(|p| p.steps[step].full_text()),
            Some(ItemRef::Image(path)) => corpus.procedures.iter().find_map(|p| {
                let s = p.steps.iter().position(|s| s.images.iter().any(|i| i == path));
                match s {
                    Some(s) => Some(format!("{}#{s}: {}", p.id, p.steps[s].full_text())),
                    None => p.gallery.iter().flatten().any(|g| g == path).then(|| format!("{} (gallery)", p.id)),
                }
            }),
            _ => None,
        };
        t.unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ").chars().take(90).collect()
    };
    println!("{query}\n      {}", text(query));
    for n in results {
        let id = &store.ids()[n.index];
        println!("  {:.4}  {id}\n      {}", n.distance, text(id));
    }
}

/// The procedure of an item (image items: the first procedure using the image).
fn procedure_of(corpus: &Corpus, id: &str) -> String {
    match ItemRef::parse(id) {
        Some(ItemRef::Image(path)) => corpus
            .procedures
            .iter()
            .find(|p| p.step_images().any(|i| i == path) || p.gallery.iter().flatten().any(|g| g == path))
            .map(|p| p.id.clone())
            .unwrap_or_default(),
        Some(r) => r.procedure().unwrap_or_default().to_string(),
        None => String::new(),
    }
}

/// Exact neighbours of the given items among items of other procedures (and with `prefix`).
fn neighbours(store: &FeatureStore, corpus: &Corpus, queries: &[&str], k: usize, prefix: &str) -> Vec<Vec<Neighbor>> {
    let procs: Vec<String> = store.ids().iter().map(|id| procedure_of(corpus, id)).collect();
    let rows: Vec<usize> = queries.iter().map(|q| store.index_of(q).unwrap_or_else(|| panic!("no item {q}"))).collect();
    let q: Vec<f32> = rows.iter().flat_map(|&r| store.row(r).to_vec()).collect();
    let keep = |qi: usize, j: usize| procs[j] != procs[rows[qi]] && store.ids()[j].starts_with(prefix);
    let filter: Filter<'_> = &keep;
    knn(store.data(), &q, store.dim(), KnnOptions { k, metric: Metric::Cosine }, Some(filter))
}

#[test]
#[ignore]
fn nearest_neighbours_of_real_step_images() {
    let corpus = all_sets();
    let td = tempfile::tempdir().unwrap();
    let store = embed(&corpus, "descriptor", &td.path().join("descriptor"));
    // An iMac rear view (ifixit teardown), a bowl of borscht, a wok of 大盘鸡 (howtocook gallery).
    let queries = [
        "image:images/ifixit/0ad75669.jpg",
        "image:images/gnome-recipes/borscht.jpg",
        "image:images/howtocook/meat_dish/52b51631/76422ecd.jpg",
    ];
    let results = neighbours(&store, &corpus, &queries, 4, "image:");
    for (q, r) in queries.iter().zip(&results) {
        show(&store, &corpus, q, r);
    }
    // The teardown photo's neighbours are teardown photos, not food.
    assert!(results[0].iter().all(|n| store.ids()[n.index].starts_with("image:images/ifixit/")), "{:?}", results[0]);
    // Set-level 1-NN: ifixit photos (21% of the images) mostly find an ifixit photo of another guide (54 of 73
    // when this was written).
    let ifixit: Vec<&str> =
        store.ids().iter().map(String::as_str).filter(|id| id.starts_with("image:images/ifixit/")).collect();
    let nn = neighbours(&store, &corpus, &ifixit, 1, "image:");
    let same = nn.iter().filter(|r| store.ids()[r[0].index].starts_with("image:images/ifixit/")).count();
    println!("ifixit images whose nearest other-procedure image is ifixit: {same}/{}", ifixit.len());
    assert!(same as f64 >= 0.6 * ifixit.len() as f64, "{same}/{}", ifixit.len());
}

#[test]
#[ignore]
fn nearest_neighbours_of_real_step_texts() {
    let corpus = all_sets();
    let td = tempfile::tempdir().unwrap();
    let queries = [
        "text:gnome-recipes/R_Donauwellen_by_mclasen#4", // Spread the dried cherries on top of the dough.
        "text:howtocook/meat_dish/新疆大盘鸡/新疆大盘鸡#0", // chop the meat, soak in salted water to remove the blood
        "text:based-cooking/bolo-do-caco#6",             // Knead to obtain a homogeneous and elastic dough.
    ];
    for encoder in ["w2v", "tfidf"] {
        let store = embed(&corpus, encoder, &td.path().join(encoder));
        println!("== {encoder}");
        let results = neighbours(&store, &corpus, &queries, 4, "text:");
        for (q, r) in queries.iter().zip(&results) {
            show(&store, &corpus, q, r);
        }
        // Soaking meat to remove blood (血水): the closest steps of other recipes are about the same thing.
        let text_of = |n: &Neighbor| {
            let Some(ItemRef::Text { procedure, step }) = ItemRef::parse(&store.ids()[n.index]) else {
                return String::new();
            };
            corpus.procedures.iter().find(|p| p.id == procedure).map(|p| p.steps[step].full_text()).unwrap_or_default()
        };
        let blood = results[1].iter().take(3).filter(|n| text_of(n).contains("血水")).count();
        assert!(blood >= 2, "{encoder}: {blood} of the top 3 neighbours mention 血水");
        // Kneading dough: a neighbour in the top 4 is about dough or kneading.
        assert!(
            results[2].iter().any(|n| {
                let t = text_of(n).to_lowercase();
                t.contains("dough") || t.contains("knead")
            }),
            "{encoder}: no dough/knead step among the neighbours of the kneading step"
        );
    }
}

#[test]
#[ignore]
fn exact_knn_equals_brute_force_on_real_features() {
    let corpus = all_sets();
    let td = tempfile::tempdir().unwrap();
    for (encoder, n_queries) in [("descriptor", usize::MAX), ("w2v", 300), ("tfidf", 100)] {
        let store = embed(&corpus, encoder, &td.path().join(encoder));
        let dim = store.dim();
        let nq = n_queries.min(store.len());
        let queries = &store.data()[..nq * dim];
        for metric in [Metric::Cosine, Metric::InnerProduct, Metric::L2] {
            let opts = KnnOptions { k: 10, metric };
            let fast = knn(store.data(), queries, dim, opts, None);
            let slow = knn_brute_force(store.data(), queries, dim, opts, None);
            for (qi, (f, s)) in fast.iter().zip(&slow).enumerate() {
                assert_eq!(f.len(), s.len());
                for (a, b) in f.iter().zip(s) {
                    // Same neighbours; the order may differ only between near-equal distances.
                    assert!((a.distance - b.distance).abs() < 1e-5, "{encoder} {metric:?} q{qi}: {a:?} vs {b:?}");
                    let q = &queries[qi * dim..(qi + 1) * dim];
                    let d = distance(q, store.row(a.index), metric);
                    assert!((a.distance - d).abs() < 1e-5, "{encoder} {metric:?} q{qi}: {a:?} true {d}");
                }
            }
            println!("{encoder} {metric:?}: {nq} queries over {} rows agree with brute force", store.len());
        }
    }
}
