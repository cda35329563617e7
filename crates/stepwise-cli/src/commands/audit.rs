//! `stepwise audit TASKSET --features F [-o OUT]`: how much of a task set can be answered without reading — the
//! Hasty Student, the distance probe with its histogram, question overlap, answer-position and length cues, and
//! the shortcut panel (every distance-rank pick and two probes against chance, with a verdict).

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{TaskSet, taskset::QUESTIONS_JSON};
use stepwise_eval::aflite::AfliteConfig;
use stepwise_eval::audit::render::PlotLinks;
use stepwise_eval::audit::suite::{AuditInputs, AuditSources, Filtered, audit_suite, run_aflite};
use stepwise_eval::audit::{AuditConfig, audit, render};
use stepwise_features::registry::DEFAULT_MODELS_DIR;
use stepwise_report::plots::{CORRECT, Histogram, INCORRECT, Series, write_histogram};
use stepwise_score::bootstrap::BootstrapConfig;

use super::generate::open_stores;
use crate::cli_util::feature_error;
use crate::usage_bail;

/// Audit a task set (stepwise's own or a RecipeQA file) for answer shortcuts.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise audit suite/recipeqa/visual_cloze --features feats/descriptor -o audit-vc\n  \
    stepwise audit ../shared/data/recipeqa/val-dev.json --text-encoder minilm --models models -o audit-rqa\n  \
    stepwise audit suite/knobs-0-0-0/visual_cloze --features feats/descriptor --aflite -o audit-vc-aflite\n  \
    stepwise audit suite --features feats/descriptor --features feats/w2v --aflite -o audit-suite\n\n\
    Output (-o): audit.md, audit.json, distances-<task>.svg/.png (correct vs incorrect choice–question \
    distances), ranks-<task>.svg/.png (the answer's distance rank among the choices, for the shortcut panel), \
    manifest.json; without -o the Markdown is printed. With --aflite also aflite/: questions.json \
    (the task set after adversarial filtering), removed.jsonl (each removed question with its predictability \
    score and round) and aflite.json, and the audit after filtering in audit.md. A suite gets \
    OUT/<setting>/<task>/ per task set (no plots), a summary of every setting in OUT/audit.md and, with \
    --aflite, OUT/aflite/<setting>/<task>/ laid out as a suite (`stepwise study OUT/aflite` trains the models on \
    the filtered questions). Item vectors come from the question's \
    provenance (stepwise task sets), else image file names (`image:` ids, also by unique file name) and texts \
    (`str:` ids of a text store, or strings encoded now with --text-encoder or the text store's encoder).")]
pub struct Args {
    /// A task-set folder (with questions.json), a RecipeQA-layout JSON file, or a suite (`stepwise sweep`'s
    /// output: every task set audited, with a summary of all settings side by side; needs -o).
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
    let suite = is_suite(&args.taskset);
    if suite && args.output.is_none() {
        usage_bail!(
            "{}: a suite; auditing one needs -o OUT (a report per task set and a summary)",
            args.taskset.display()
        );
    }
    let out = match &args.output {
        Some(o) => Some(OutputDir::create(o, args.force)?),
        None => None,
    };
    let sources = AuditSources {
        text_encoder: args.text_encoder.as_deref(),
        distractor_pool: args.distractor_pool.as_deref(),
        pool_features: args.pool_features.as_deref(),
        models: &args.models,
        seed: args.seed,
    };
    let loaded = AuditInputs::load(open_stores(&args.features)?, &sources).map_err(feature_error)?;
    let inputs = loaded.vectors();
    let cfg = AuditConfig {
        bootstrap: BootstrapConfig { resamples: args.resamples, seed: args.seed, ..Default::default() },
        folds: args.folds,
        bins: args.bins.max(1),
        ..Default::default()
    };
    if suite {
        let out = out.expect("checked above");
        let aflite = args.aflite.then_some(&aflite_cfg);
        // The feature stores are hashed once: every task set's manifest lists the same ones.
        let hashes = loaded.features.input_hashes().map_err(feature_error)?;
        let md =
            audit_suite(&args.taskset, inputs, &hashes, &cfg, aflite, args.seed, out.path()).map_err(feature_error)?;
        let dest = out.commit()?;
        if !stepwise_core::progress::is_quiet() {
            eprint!("{md}");
            eprintln!("\nwrote {}", dest.display());
        }
        return Ok(());
    }
    let ts = TaskSet::load(&args.taskset)?;
    let encoded = inputs.encode_missing(&ts).map_err(feature_error)?;
    let resolver = inputs.resolver(encoded.as_ref());
    let mut report = audit(&ts, &resolver, &cfg);
    inputs.explain_missing(&mut report);
    for w in &report.warnings {
        crate::cli_util::warn_user(w);
    }
    let source = args.taskset.display().to_string();

    let Some(out) = out else {
        print!("{}", render::markdown(&report, &source, &PlotLinks::default()));
        return Ok(());
    };
    let mut plots = PlotLinks::default();
    for t in &report.tasks {
        if let Some(p) = &t.shortcuts {
            let name = format!("ranks-{}", t.task);
            let title = format!("{}: distance rank of the answer among the choices", t.task);
            // One bin per rank k, centred on k.
            let edges: Vec<f64> = (0..=p.choices).map(|k| k as f64 + 0.5).collect();
            let h = Histogram {
                title: &title,
                x_label: "rank of the answer's distance (1 = smallest); flat without a distance cue",
                edges: &edges,
                series: vec![Series { label: "answers", counts: &p.answer_rank_counts, color: CORRECT }],
                normalize: true,
            };
            write_histogram(&h, &out.path().join(format!("{name}.svg")), &out.path().join(format!("{name}.png")))?;
            plots.ranks.push((t.task, format!("{name}.svg")));
        }
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
        plots.distances.push((t.task, format!("{name}.svg")));
    }
    let mut markdown = render::markdown(&report, &source, &plots);
    let filtered = if args.aflite {
        let (section, filtered) = run_aflite(&ts, &resolver, &cfg, &aflite_cfg, &report, &out.path().join("aflite"))
            .map_err(feature_error)?;
        markdown.push('\n');
        markdown.push_str(&section);
        Some(filtered)
    } else {
        None
    };
    write_string_atomic(&out.path().join("audit.md"), &markdown)?;
    write_string_atomic(&out.path().join("audit.json"), &stepwise_core::json::to_pretty_sorted(&report))?;
    let mut m = Manifest::new("audit").with_seed(args.seed);
    let file = if args.taskset.is_dir() { args.taskset.join(QUESTIONS_JSON) } else { args.taskset.clone() };
    m.inputs.push(InputHash::of(&file)?);
    m.inputs.extend(loaded.features.input_hashes().map_err(feature_error)?);
    m.param("text_encoder", inputs.encoder.map(|e| e.info().name.clone()));
    if let Some(Filtered { filters, .. }) = &filtered {
        m.param("aflite", &aflite_cfg);
        for f in filters {
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
            eprintln!("{}", render::summary_line(t));
        }
        for f in filtered.iter().flat_map(|f| &f.filters) {
            eprintln!("AFLite: {} {} questions removed (see aflite/removed.jsonl)", f.result.removed.len(), f.task);
        }
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// True when `path` is a suite folder (`stepwise sweep`'s output).
fn is_suite(path: &Path) -> bool {
    path.join(stepwise_core::manifest::MANIFEST_FILE).is_file() && Manifest::read(path).is_ok_and(|m| m.kind == "suite")
}
