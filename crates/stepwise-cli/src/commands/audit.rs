//! `stepwise audit TASKSET --features F [-o OUT]`: how much of a task set can be answered without reading — the
//! Hasty Student, the distance probe with its histogram, question overlap, answer-position and length cues.

use std::path::PathBuf;

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Task, TaskSet, taskset::QUESTIONS_JSON};
use stepwise_eval::aflite::{self, AfliteConfig};
use stepwise_eval::audit::resolve::FeatureResolver;
use stepwise_eval::audit::{AuditConfig, audit, render, texts_to_encode};
use stepwise_eval::bootstrap::BootstrapConfig;
use stepwise_features::items::str_id;
use stepwise_features::registry::{self, DEFAULT_MODELS_DIR, EncoderContext};
use stepwise_features::store::encode_strings;
use stepwise_features::{Encoder, Vectors};
use stepwise_report::plots::{CORRECT, Histogram, INCORRECT, Series, write_histogram};

use super::generate::{LoadedFeatures, load_pool};
use super::model_features::concat;
use super::models::feature_error;
use crate::usage_bail;

/// Audit a task set (stepwise's own or a RecipeQA file) for answer shortcuts.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise audit suite/recipeqa/visual_cloze --features feats/descriptor -o audit-vc\n  \
    stepwise audit ../shared/data/recipeqa/val-dev.json --text-encoder minilm --models models -o audit-rqa\n\n\
    Output (-o): audit.md, audit.json, distances-<task>.svg/.png (correct vs incorrect choice–question \
    distances), manifest.json; without -o the Markdown is printed. Item vectors come from the question's \
    provenance (stepwise task sets), else image file names (`image:` ids, also by unique file name) and texts \
    (`str:` ids of a text store, or strings encoded now with --text-encoder or the text store's encoder).")]
pub struct Args {
    /// A task-set folder (with questions.json) or a RecipeQA-layout JSON file.
    pub taskset: PathBuf,
    /// Feature store(s): an image store for the visual tasks, a text store for textual cloze.
    #[arg(long, value_name = "DIR")]
    pub features: Vec<PathBuf>,
    /// Extra distractor images the task set used (a feature store or a folder of images, as for generate).
    #[arg(long, value_name = "DIR")]
    pub distractor_pool: Option<PathBuf>,
    /// The feature store of the embedded distractor pool (see generate's --pool-features).
    #[arg(long, value_name = "DIR", requires = "distractor_pool")]
    pub pool_features: Option<PathBuf>,
    /// Encode the texts of textual-cloze questions with this encoder (e.g. `minilm`) instead of the text store.
    #[arg(long, value_name = "NAME")]
    pub text_encoder: Option<String>,
    /// Pretrained models folder.
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Output folder (default: print the Markdown report).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Cross-validation folds of the distance probe.
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Bootstrap resamples for the 95% intervals (0: none).
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    /// Histogram bins.
    #[arg(long, default_value_t = 30)]
    pub bins: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Adversarial filtering (AFLite) on the distance probe's features: also write the task set without the
    /// questions a linear model answers from them (OUT/aflite/) and the audit after filtering.
    #[arg(long, requires = "output")]
    pub aflite: bool,
    /// AFLite: random train/test splits per round (m).
    #[arg(long, default_value_t = 64, value_name = "M")]
    pub aflite_partitions: usize,
    /// AFLite: predictability at or above which a question may be removed (τ).
    #[arg(long, default_value_t = 0.75, value_name = "TAU")]
    pub aflite_threshold: f64,
    /// AFLite: questions removed per round at most, as a share of the task's questions (k).
    #[arg(long, default_value_t = 0.05, value_name = "SHARE")]
    pub aflite_slice: f64,
    /// AFLite: training share of each split (t).
    #[arg(long, default_value_t = 0.5, value_name = "SHARE")]
    pub aflite_train: f64,
    /// AFLite: the task never shrinks below this share of its questions.
    #[arg(long, default_value_t = 0.5, value_name = "SHARE")]
    pub aflite_min: f64,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.folds < 2 {
        usage_bail!("--folds must be at least 2");
    }
    let aflite_cfg = AfliteConfig {
        partitions: args.aflite_partitions,
        train_share: args.aflite_train,
        slice_share: args.aflite_slice,
        threshold: args.aflite_threshold,
        min_share: args.aflite_min,
        seed: args.seed,
        ..Default::default()
    };
    if let (true, Err(e)) = (args.aflite, aflite_cfg.check()) {
        usage_bail!("{e}");
    }
    let out = match &args.output {
        Some(o) => Some(OutputDir::create(o, args.force)?),
        None => None,
    };
    let ts = TaskSet::load(&args.taskset)?;
    let mut features = LoadedFeatures::open(&args.features)?;
    let image_store = features.find("image:");
    let text_store = if args.text_encoder.is_some() {
        None
    } else {
        features.find("title:").or_else(|| features.find("text:")).or_else(|| features.find("str:"))
    };
    for s in [image_store, text_store].into_iter().flatten() {
        features.load(s)?;
    }
    let pool = match &args.distractor_pool {
        Some(p) => Some(load_pool(p, &features, image_store, &args.models, args.pool_features.as_deref())?),
        None => None,
    };
    let images: Option<Vectors> = match (image_store, pool) {
        (Some(i), Some(p)) => Some(concat(features.get(i), &p)?),
        (None, Some(p)) => Some(p),
        (Some(i), None) => Some(features.get(i).clone()),
        (None, None) => None,
    };
    let texts = text_store.map(|i| features.get(i));

    // Texts without a vector are encoded now (external RecipeQA files: titles are not in any store).
    let encoder: Option<Box<dyn Encoder>> = match (&args.text_encoder, text_store) {
        (Some(name), _) => {
            let ctx = EncoderContext { models_dir: args.models.clone(), seed: args.seed, ..Default::default() };
            let enc = registry::build_encoder(name, &ctx).map_err(feature_error)?;
            if enc.info().modality != stepwise_features::Modality::Text {
                usage_bail!("--text-encoder {name}: not a text encoder");
            }
            Some(enc)
        }
        (None, Some(i)) => {
            let ctx = EncoderContext { models_dir: args.models.clone(), ..Default::default() };
            Some(features.stores[i].1.encoder(&ctx).map_err(feature_error)?)
        }
        (None, None) => None,
    };
    let encoded = match &encoder {
        Some(enc) => {
            let todo: Vec<String> = texts_to_encode(&ts)
                .into_iter()
                .filter(|t| texts.is_none_or(|v| v.get(&str_id(t)).is_none()))
                .collect();
            let pb = stepwise_core::progress::spinner(&format!("encoding {} texts", todo.len()));
            let v = encode_strings(enc.as_ref(), &todo).map_err(feature_error)?;
            pb.finish_and_clear();
            Some(v)
        }
        None => None,
    };
    let resolver = FeatureResolver::new(images.as_ref(), texts, encoded.as_ref());
    let cfg = AuditConfig {
        bootstrap: BootstrapConfig { resamples: args.resamples, seed: args.seed, ..Default::default() },
        folds: args.folds,
        bins: args.bins.max(1),
        ..Default::default()
    };
    let mut report = audit(&ts, &resolver, &cfg);
    // Say which option is missing when a whole kind of vector is.
    let visual = report.tasks.iter().any(|t| t.task != Task::TextualCloze.as_str() && t.with_vectors == 0);
    if visual && images.is_none() {
        report.warnings.push(
            "no image feature store was given: pass --features with one (e.g. from `stepwise embed CORPUS --encoder \
             descriptor -o feats/descriptor`) for the visual tasks' vector-based measures"
                .into(),
        );
    }
    let textual = report.tasks.iter().any(|t| t.task == Task::TextualCloze.as_str() && t.with_vectors == 0);
    if textual && texts.is_none() && encoder.is_none() {
        report.warnings.push(
            "no text feature store or --text-encoder was given: pass one of them for textual cloze's vector-based \
             measures"
                .into(),
        );
    }
    for w in &report.warnings {
        crate::cli_util::warn_user(w);
    }
    let source = args.taskset.display().to_string();

    let Some(out) = out else {
        print!("{}", render::markdown(&report, &source, &[]));
        return Ok(());
    };
    let mut plots = Vec::new();
    for t in &report.tasks {
        let Some(d) = &t.distances else { continue };
        let name = format!("distances-{}", t.task);
        let title = format!("{}: choice–question distance", t.task);
        let h = Histogram {
            title: &title,
            x_label: d.definition,
            edges: &d.histogram.edges,
            series: vec![
                Series { label: "correct choices", counts: &d.histogram.correct, color: CORRECT },
                Series { label: "incorrect choices", counts: &d.histogram.incorrect, color: INCORRECT },
            ],
            normalize: true,
        };
        write_histogram(&h, &out.path().join(format!("{name}.svg")), &out.path().join(format!("{name}.png")))?;
        plots.push((t.task.clone(), format!("{name}.svg")));
    }
    let mut markdown = render::markdown(&report, &source, &plots);
    let mut aflite_filters: Vec<aflite::TaskFilter> = Vec::new();
    if args.aflite {
        let (kept, filters) =
            aflite::filter_taskset(&ts, &resolver, &aflite_cfg).map_err(|e| anyhow::anyhow!("AFLite: {e}"))?;
        let after = audit(&kept, &resolver, &cfg);
        markdown.push('\n');
        markdown.push_str(&aflite::markdown_section(&aflite_cfg, &filters, &report, &after));
        if kept.questions.is_empty() {
            usage_bail!("AFLite removed every question (raise --aflite-min)");
        }
        aflite::write_outputs(&out.path().join("aflite"), &kept, &filters, &after, &aflite_cfg)?;
        aflite_filters = filters;
    }
    write_string_atomic(&out.path().join("audit.md"), &markdown)?;
    write_string_atomic(&out.path().join("audit.json"), &stepwise_core::json::to_pretty_sorted(&report))?;
    let mut m = Manifest::new("audit").with_seed(args.seed);
    let file = if args.taskset.is_dir() { args.taskset.join(QUESTIONS_JSON) } else { args.taskset.clone() };
    m.inputs.push(InputHash::of(&file)?);
    m.inputs.extend(features.input_hashes()?);
    m.param("text_encoder", encoder.as_ref().map(|e| e.info().name.clone()));
    if args.aflite {
        m.param("aflite", &aflite_cfg);
        for f in &aflite_filters {
            m.count(&format!("{}.aflite_removed", f.task), f.result.removed.len() as u64);
        }
    }
    m.count("questions", report.questions as u64);
    for t in &report.tasks {
        m.count(&format!("{}.questions", t.task), t.questions as u64);
        m.count(&format!("{}.with_vectors", t.task), t.with_vectors as u64);
    }
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        for t in &report.tasks {
            let f = |e: Option<stepwise_eval::bootstrap::Estimate>| {
                e.map_or("–".to_string(), |e| format!("{:.1}%", 100.0 * e.value))
            };
            eprintln!(
                "{:<17} {:>5} questions ({} with vectors): Hasty Student {}, distance probe {}",
                t.task,
                t.questions,
                t.with_vectors,
                f(t.hasty_student),
                f(t.distance_probe.as_ref().map(|p| p.accuracy))
            );
        }
        for f in &aflite_filters {
            eprintln!("AFLite: {} {} questions removed (see aflite/removed.jsonl)", f.result.removed.len(), f.task);
        }
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}
