//! Acceptance on real data (all `#[ignore]`; CI runs them with `cargo test --workspace --test acceptance --
//! --ignored`). Data: `STEPWISE_SHARED_DATA` (default `<workspace>/../shared/data`); pretrained models:
//! `STEPWISE_MODELS` (default `<workspace>/models`, filled by `scripts/fetch-models.sh`). Missing data fails.
//!
//! Each test prints the numbers the report quotes. Assertions check what must hold whatever the features: the
//! knobs' constraints, the audit's coverage, and that the measurements are in a sane range — not exact values.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use stepwise_core::corpus::read_procedures_jsonl;
use stepwise_core::{Procedure, Task, TaskSet};
use stepwise_eval::audit::{AuditConfig, TaskAudit, audit, texts_to_encode};
use stepwise_features::image_source::load_image_file;
use stepwise_features::registry::{EncoderContext, build_encoder};
use stepwise_features::store::encode_strings;
use stepwise_features::{Encoder, Item, Vectors};
use stepwise_models::question_vectors::FeatureResolver;
use stepwise_score::bootstrap::BootstrapConfig;
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::suite::procedure_splits;
use stepwise_tasks::{GenerateConfig, Generated, Mode, TaskGenerator};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared_data() -> PathBuf {
    let p = std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/data"));
    assert!(p.is_dir(), "shared data not found at {} (set STEPWISE_SHARED_DATA)", p.display());
    p
}

fn models_dir() -> PathBuf {
    std::env::var_os("STEPWISE_MODELS").map(PathBuf::from).unwrap_or_else(|| workspace().join("models"))
}

/// Encode images (paths relative to `root`) with `enc`, in parallel batches; unreadable images are left out.
fn encode_images(
    enc: &dyn Encoder,
    root: &Path,
    paths: &[String],
    load: &(dyn Fn(&Path, &str) -> Option<image::RgbImage> + Sync),
) -> Vectors {
    let dim = enc.info().dim;
    let rows: Vec<(String, Vec<f32>)> = paths
        .par_chunks(64)
        .flat_map_iter(|chunk| {
            let imgs: Vec<(String, image::RgbImage)> =
                chunk.iter().filter_map(|p| load(root, p).map(|im| (p.clone(), im))).collect();
            let items: Vec<Item<'_>> = imgs.iter().map(|(_, im)| Item::Image(im)).collect();
            let out = enc.encode(&items).expect("the descriptor encodes every decoded image");
            imgs.into_iter()
                .map(|(p, _)| p)
                .zip(out.chunks(dim).map(<[f32]>::to_vec).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        })
        .collect();
    let ids = rows.iter().map(|(p, _)| format!("image:{p}")).collect();
    Vectors::new(dim, ids, rows.into_iter().flat_map(|(_, v)| v).collect())
}

fn load_file(root: &Path, rel: &str) -> Option<image::RgbImage> {
    load_image_file(&root.join(rel)).ok()
}

fn quiet_audit() -> AuditConfig {
    AuditConfig { bootstrap: BootstrapConfig { resamples: 500, ..Default::default() }, ..Default::default() }
}

fn pct(t: &TaskAudit) -> (String, String) {
    let f = |e: Option<stepwise_score::bootstrap::Estimate>| match e {
        Some(e) => format!(
            "{:.1} [{:.1}, {:.1}]",
            100.0 * e.value,
            100.0 * e.ci.map_or(f64::NAN, |c| c.low),
            100.0 * e.ci.map_or(f64::NAN, |c| c.high)
        ),
        None => "–".into(),
    };
    (f(t.hasty_student), f(t.distance_probe.as_ref().map(|p| p.accuracy)))
}

#[test]
#[ignore]
fn textual_cloze_hasty_student_on_recipeqa_val_dev() {
    let ts = TaskSet::load(&shared_data().join("recipeqa/val-dev.json")).expect("val-dev.json reads");
    let models = models_dir();
    let ctx = EncoderContext { models_dir: models.clone(), ..Default::default() };
    let enc = build_encoder("minilm", &ctx).unwrap_or_else(|e| {
        panic!("MiniLM is needed ({e}); run scripts/fetch-models.sh (models folder {})", models.display())
    });
    let texts = texts_to_encode(&ts);
    let encoded = encode_strings(enc.as_ref(), &texts).expect("MiniLM encodes the titles");
    let resolver = FeatureResolver::new(None, None, Some(&encoded));
    let report = audit(&ts, &resolver, &quiet_audit());
    let t =
        report.tasks.iter().find(|t| t.task == stepwise_core::Task::TextualCloze).expect("val-dev has textual cloze");
    assert_eq!(t.questions, 397);
    assert_eq!(t.with_vectors, 397, "every title has a vector");
    let (hasty, probe) = pct(t);
    println!(
        "val-dev textual_cloze, MiniLM: Hasty Student {hasty}, distance probe {probe} (RecipeQA paper, test: 26.89)"
    );
    let h = t.hasty_student.expect("computed").value;
    assert!(h > 0.25 && h < 0.9, "Hasty Student {h} outside a sane range");
    // The visual tasks cannot be measured: the images are not distributed.
    assert!(report.tasks.iter().filter(|t| t.task != stepwise_core::Task::TextualCloze).all(|t| t.with_vectors == 0));
}

/// Generate visual cloze in RecipeQA mode and the 8 knob settings; audit each. Returns one line per setting.
fn sweep_visual_cloze(
    procedures: &[Procedure],
    images: &Vectors,
    pool: Option<&Vectors>,
    cfg: &GenerateConfig,
) -> Vec<(Mode, Generated, TaskAudit)> {
    let splits = procedure_splits(procedures, Default::default(), cfg.seed);
    let sources = FeatureSources { features: images, extra_pool: pool, allow_missing: true };
    let mut tg = TaskGenerator::for_kind(cfg.item_kind(Task::VisualCloze), procedures, &sources, Some(&splits), cfg)
        .expect("catalog builds");
    let plans: Vec<_> = Mode::suite().into_iter().map(|m| tg.plan(Task::VisualCloze, m).expect("plans")).collect();
    tg.prepare(&plans.iter().collect::<Vec<_>>()).expect("neighbours");
    let mut all_images = images.clone();
    if let Some(p) = pool {
        all_images = Vectors::new(
            images.dim,
            images.ids.iter().chain(&p.ids).cloned().collect(),
            images.data.iter().chain(&p.data).copied().collect(),
        );
    }
    let resolver = FeatureResolver::new(Some(&all_images), None, None);
    let mut out = Vec::new();
    for plan in &plans {
        let g = tg.build(plan);
        let ts = TaskSet { questions: g.questions.clone(), extra: Default::default() };
        let t =
            if ts.questions.is_empty() { None } else { audit(&ts, &resolver, &quiet_audit()).tasks.into_iter().next() };
        if let Some(t) = t {
            assert_eq!(t.with_vectors, t.questions, "every generated item has a vector");
            out.push((plan.mode, g, t));
        } else {
            println!("  {}: no questions ({:?})", plan.mode, g.counts.questions_skipped);
        }
    }
    out
}

fn print_table(name: &str, rows: &[(Mode, Generated, TaskAudit)]) {
    println!("{name}: visual cloze");
    println!("  setting        questions  skipped  Hasty Student          distance probe");
    for (m, g, t) in rows {
        let (h, p) = pct(t);
        println!(
            "  {:<14} {:>9}  {:>7}  {:<22} {}",
            m.label(),
            g.counts.questions,
            g.counts.questions_skipped_total(),
            h,
            p
        );
    }
    println!("  skipped question attempts by reason:");
    for (m, g, _) in rows {
        let reasons: Vec<String> = g.counts.questions_skipped.iter().map(|(r, n)| format!("{r}={n}")).collect();
        println!("  {:<14} {}", m.label(), if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") });
    }
}

#[test]
#[ignore]
fn visual_cloze_on_real_step_image_procedures_with_grocery_distractors() {
    let data = shared_data();
    let root = data.join("procedures");
    let mut procedures = Vec::new();
    for set in ["gnome-recipes", "howtocook", "based-cooking", "ifixit"] {
        procedures.extend(read_procedures_jsonl(&root.join(format!("{set}.jsonl"))).expect("procedures read"));
    }
    let enc = build_encoder("descriptor", &EncoderContext::default()).expect("the built-in descriptor");
    let mut paths: Vec<String> = procedures.iter().flat_map(|p| p.step_images().map(str::to_string)).collect();
    paths.sort();
    paths.dedup();
    let images = encode_images(enc.as_ref(), &root, &paths, &load_file);
    let grocery = data.join("distractors/grocery");
    let mut pool_paths: Vec<String> = stepwise_core::json::read_text(&grocery.join("labels.csv"))
        .expect("labels.csv")
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next().map(str::to_string))
        .collect();
    pool_paths.sort();
    let pool = encode_images(enc.as_ref(), &grocery, &pool_paths, &load_file);
    println!("{} step images, {} pool images (descriptor)", images.len(), pool.len());
    assert!(pool.len() > 5000);
    // Real procedures have no narrative first step: every step can be a question item.
    let cfg = GenerateConfig { seed: 0, skip_first_step: false, ..Default::default() };
    let rows = sweep_visual_cloze(&procedures, &images, Some(&pool), &cfg);
    print_table("real procedures + grocery pool", &rows);
    let recipeqa = rows.iter().find(|r| r.0 == Mode::RecipeQa).expect("RecipeQA mode gives questions");
    assert!(recipeqa.1.counts.questions >= 10);
    assert!(rows.len() >= 5, "most settings give questions");
    // Pool images are used as distractors.
    let pool_used = rows.iter().flat_map(|r| &r.1.questions).any(|q| {
        q.extra["meta"]["choice_sources"].as_array().is_some_and(|a| a.iter().any(|s| s.get("pool").is_some()))
    });
    assert!(pool_used);
}

#[test]
#[ignore]
fn visual_cloze_on_the_built_in_world() {
    let params = stepwise_world::WorldParams {
        images_stored: false,
        ..stepwise_world::WorldParams::new(0, stepwise_world::Domain::Cooking, 200)
    };
    let procedures = stepwise_world::generate(&params).expect("world generates");
    let world = stepwise_world::WorldImages::new(params.clone());
    let enc = build_encoder("descriptor", &EncoderContext::default()).expect("the built-in descriptor");
    let paths: Vec<String> = procedures.iter().flat_map(|p| p.step_images().map(str::to_string)).collect();
    let render = |_: &Path, rel: &str| world.render(rel).ok();
    let images = encode_images(enc.as_ref(), Path::new(""), &paths, &render);
    assert_eq!(images.len(), paths.len(), "every world image renders");
    let cfg = GenerateConfig { seed: 0, ..Default::default() };
    let rows = sweep_visual_cloze(&procedures, &images, None, &cfg);
    print_table("built-in world (200 procedures)", &rows);
    let rq = rows.iter().find(|r| r.0 == Mode::RecipeQa).expect("RecipeQA mode gives questions");
    // The world gives each procedure its own visual style: in RecipeQA mode the answer is the choice nearest the
    // question far more often than chance.
    assert!(rq.2.distance_probe.as_ref().expect("probe ran").accuracy.value > 0.5);
}
