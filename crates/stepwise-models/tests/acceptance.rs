//! Acceptance of the sequencing baselines on real data and the built-in world (all `#[ignore]`; run with
//! `cargo test -p stepwise-models --test acceptance -- --ignored`). Data: `STEPWISE_SHARED_DATA` (default
//! `<workspace>/../shared/data`); a missing folder is a failure, not a skip. Features are the built-in encoders
//! (TF-IDF text, classical image descriptor) so no model download is needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stepwise_core::procedure::ValidOrders;
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};
use stepwise_core::{Corpus, Procedure};
use stepwise_features::embed::{EmbedOptions, embed_corpus};
use stepwise_features::{FeatureStore, Vectors};
use stepwise_models::item_features::{FeatureKind, FeatureSet};
use stepwise_models::pairwise::PairwiseConfig;
use stepwise_models::sequencer::{ChainStartName, Evaluation, ModelKind, RunConfig, run};
use stepwise_score::bootstrap::BootstrapConfig;
use stepwise_score::predictions::OrderRecord;
use stepwise_score::sequencing_eval::{SequencingOptions, evaluate_orders};
use stepwise_tasks::sequencing::{self, SeqModality, SequencingConfig, Windows, usable_steps};

fn shared_data() -> PathBuf {
    let p = std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    assert!(p.is_dir(), "shared data not found at {} (set STEPWISE_SHARED_DATA)", p.display());
    p
}

fn load(dir: &Path) -> Vectors {
    FeatureStore::open(dir).unwrap().load().unwrap()
}

/// Text (TF-IDF) and image (descriptor) stores of a corpus; image store only when `images`.
fn embed(corpus: &Corpus, root: &Path, images: bool) -> (Vectors, Option<Vectors>) {
    embed_corpus(corpus, &root.join("text"), None, &[], &EmbedOptions::new("tfidf")).unwrap();
    let image = images.then(|| {
        embed_corpus(corpus, &root.join("image"), None, &[], &EmbedOptions::new("descriptor")).unwrap();
        load(&root.join("image"))
    });
    (load(&root.join("text")), image)
}

fn config(model: ModelKind, evaluation: Evaluation) -> RunConfig {
    RunConfig {
        model,
        evaluation,
        chain_start: ChainStartName::Outlier,
        pairwise: PairwiseConfig { seed: 1, ..Default::default() },
        seed: 1,
        train_only: Default::default(),
    }
}

/// (single-reference, multi-reference) metric means.
type Scores = (BTreeMap<String, f64>, BTreeMap<String, f64>);

fn score(instances: &[SequencingInstance], preds: &[OrderPrediction], split: Option<&str>) -> Scores {
    let options = SequencingOptions {
        split: split.map(str::to_string),
        bootstrap: BootstrapConfig { resamples: 0, ..Default::default() },
        ..Default::default()
    };
    let records = OrderRecord::from_predictions(preds);
    let means = |inst: &[SequencingInstance]| {
        let r = evaluate_orders(inst, &records, Path::new("(predictions)"), &options).unwrap();
        r.groups[0].metrics.iter().map(|(k, e)| (k.clone(), e.value)).collect::<BTreeMap<_, _>>()
    };
    let authored: Vec<SequencingInstance> = instances.iter().map(SequencingInstance::authored_only).collect();
    (means(&authored), means(instances))
}

/// Every method × feature view; prints the rows (they go into the report) and returns them.
fn table(
    name: &str,
    instances: &[SequencingInstance],
    set: FeatureSet<'_>,
    evaluation: Evaluation,
) -> BTreeMap<(String, String), Scores> {
    let split = match &evaluation {
        Evaluation::Split(s) => Some(s.clone()),
        Evaluation::CrossValidation(_) => None,
    };
    let mut out = BTreeMap::new();
    let mut runs = vec![(ModelKind::Random, None)];
    if instances[0].items.iter().any(|i| i.text.is_some()) {
        runs.push((ModelKind::TextPosition, None));
    }
    for kind in FeatureKind::ALL {
        if set.restrict(kind).is_some() {
            runs.push((ModelKind::ImageChain, Some(kind)));
            runs.push((ModelKind::Pairwise, Some(kind)));
        }
    }
    for (model, kind) in runs {
        let view = kind.map(|k| set.restrict(k).unwrap()).unwrap_or_default();
        let preds = run(instances, &view, &config(model, evaluation.clone())).unwrap().predictions;
        let s = score(instances, &preds, split.as_deref());
        let features = kind.map_or("-", |k| k.as_str()).to_string();
        println!(
            "{name} | {} | {features} | single PMR {:.3} τ {:.3} acc {:.3} | multi PMR {:.3} τ {:.3} acc {:.3}",
            model.as_str(),
            s.0["pmr"],
            s.0["kendall_tau"],
            s.0["position_accuracy"],
            s.1["pmr"],
            s.1["kendall_tau"],
            s.1["position_accuracy"]
        );
        out.insert((model.as_str().to_string(), features), s);
    }
    out
}

/// The valid orders of a window from the world's own list of valid orders (complete lists only).
fn world_window_orders(vo: &ValidOrders, window: &[usize]) -> std::collections::BTreeSet<Vec<usize>> {
    vo.orders.iter().map(|o| o.iter().copied().filter(|s| window.contains(s)).collect()).collect()
}

#[test]
#[ignore]
fn world_multireference_is_exact_and_pairwise_beats_random() {
    let _ = shared_data();
    let td = tempfile::tempdir().unwrap();
    let corpus_dir = td.path().join("world");
    let mut params = stepwise_world::WorldParams::new(7, stepwise_world::Domain::Cooking, 400);
    // List every valid order up to 5,000 per procedure, so most procedures can be checked exactly.
    params.max_orders = 5000;
    stepwise_world::write_corpus(&params, &corpus_dir, false, &|_| {}).unwrap();
    let corpus = Corpus::load(&corpus_dir).unwrap();
    let cfg = SequencingConfig { modality: SeqModality::Multimodal, seed: 3, ..Default::default() };
    let g = sequencing::generate(&corpus.procedures, &corpus_dir.join("procedures.jsonl"), None, &cfg).unwrap();
    assert!(g.instances.len() > 300, "{:?}", g.stats);

    // Exactness: where the world lists all valid orders of the procedure, their restrictions to the window are
    // exactly the instance's references (a linear extension of the induced sub-order always extends).
    let by_id: BTreeMap<&str, &Procedure> = corpus.procedures.iter().map(|p| (p.id.as_str(), p)).collect();
    let mut checked = 0;
    for inst in &g.instances {
        let p = by_id[inst.procedure.as_str()];
        let Some(vo) = p.annotations.as_ref().and_then(|a| a.valid_orders.as_ref()).filter(|v| v.complete) else {
            continue;
        };
        let mut window: Vec<usize> = inst.items.iter().map(|i| i.step).collect();
        window.sort();
        let ours: std::collections::BTreeSet<Vec<usize>> =
            inst.references.iter().map(|r| r.iter().map(|&k| inst.items[k].step).collect()).collect();
        assert_eq!(ours, world_window_orders(vo, &window), "{}", inst.id);
        checked += 1;
    }
    assert!(checked * 2 > g.instances.len(), "only {checked} of {} instances checked", g.instances.len());
    let multi = g.instances.iter().filter(|i| i.references.len() > 1).count();
    println!(
        "world: {} instances, {multi} with several references, {checked} checked against the world's orders",
        g.instances.len()
    );
    assert!(multi * 5 > g.instances.len(), "the world should have many alternative orders ({multi})");

    let (text, image) = embed(&corpus, td.path(), true);
    let set = FeatureSet { text: Some(&text), image: image.as_ref() };
    let rows = table("world", &g.instances, set, Evaluation::Split("test".into()));
    let get = |m: &str, f: &str| &rows[&(m.to_string(), f.to_string())];
    let random = get("random", "-");
    for f in ["text", "image", "multimodal"] {
        let p = get("pairwise", f);
        assert!(p.0["kendall_tau"] > random.0["kendall_tau"] + 0.2, "{f}: {:?} vs random {:?}", p.0, random.0);
        assert!(p.1["pmr"] >= p.0["pmr"], "multi-reference PMR can only be higher");
    }
    let mm = get("pairwise", "multimodal");
    assert!(mm.1["pmr"] > random.1["pmr"] + 0.1, "{:?} vs {:?}", mm.1, random.1);

    // Deterministic: the same run gives the same predictions.
    let c = config(ModelKind::Pairwise, Evaluation::Split("test".into()));
    let a = run(&g.instances, &set, &c).unwrap().predictions;
    let b = run(&g.instances, &set, &c).unwrap().predictions;
    assert_eq!(a, b);
}

#[test]
#[ignore]
fn recipeqa_text_pairwise_beats_random_and_cues() {
    let data = shared_data();
    let td = tempfile::tempdir().unwrap();
    let corpus_dir = td.path().join("rqa");
    let opts = stepwise_ingest::IngestOptions { format: Some("recipeqa-recipes".into()), ..Default::default() };
    stepwise_ingest::ingest(
        &[data.join("recipeqa/recipes-dev.json")],
        &corpus_dir,
        &stepwise_ingest::Registry::builtin(),
        &opts,
    )
    .unwrap();
    let corpus = Corpus::load(&corpus_dir).unwrap();
    assert_eq!(corpus.procedures.len(), 413);
    let cfg = SequencingConfig { min_steps: 4, seed: 1, ..Default::default() };
    let g = sequencing::generate(&corpus.procedures, &corpus_dir.join("procedures.jsonl"), None, &cfg).unwrap();
    assert_eq!(g.instances.len(), 413);
    let (text, _) = embed(&corpus, td.path(), false);
    let rows =
        table("recipeqa", &g.instances, FeatureSet { text: Some(&text), image: None }, Evaluation::CrossValidation(5));
    let tau = |m: &str, f: &str| rows[&(m.to_string(), f.to_string())].0["kendall_tau"];
    assert!(tau("random", "-").abs() < 0.1);
    assert!(tau("text-position", "-") > 0.15, "recipes carry position cues");
    assert!(tau("pairwise", "text") > tau("random", "-") + 0.2);
}

#[test]
#[ignore]
fn real_image_procedures_run_in_every_modality() {
    let data = shared_data().join("procedures");
    let mut procedures = Vec::new();
    for set in ["gnome-recipes", "howtocook", "based-cooking", "ifixit"] {
        procedures.extend(stepwise_core::corpus::read_procedures_jsonl(&data.join(format!("{set}.jsonl"))).unwrap());
    }
    // The ones with at least 4 image steps, as the acceptance asks.
    procedures.retain(|p| usable_steps(p, SeqModality::Multimodal).len() >= 4);
    assert!(procedures.len() >= 20, "{}", procedures.len());
    let corpus = Corpus { dir: data.clone(), image_root: data.clone(), manifest: None, procedures };
    let cfg = SequencingConfig {
        modality: SeqModality::Multimodal,
        min_steps: 4,
        windows: Windows::All,
        seed: 1,
        ..Default::default()
    };
    let g = sequencing::generate(&corpus.procedures, &data.join("*.jsonl"), None, &cfg).unwrap();
    assert_eq!(g.stats.procedures_used, corpus.procedures.len());
    let td = tempfile::tempdir().unwrap();
    let (text, image) = embed(&corpus, td.path(), true);
    let set = FeatureSet { text: Some(&text), image: image.as_ref() };
    let rows = table("procedures", &g.instances, set, Evaluation::CrossValidation(5));
    assert_eq!(rows.len(), 8, "random, text-position, and image-chain + pairwise for 3 views");
    let c = config(ModelKind::Pairwise, Evaluation::CrossValidation(5));
    let a = run(&g.instances, &set, &c).unwrap().predictions;
    assert_eq!(a.len(), g.instances.len());
    assert_eq!(a, run(&g.instances, &set, &c).unwrap().predictions);
}
