//! `stepwise audit TASKSET --features F [-o OUT]`: how much of a task set can be answered without reading — the
//! Hasty Student, the distance probe with its histogram, question overlap, answer-position and length cues, and
//! the shortcut panel (every distance-rank pick and two probes against chance, with a verdict).

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Task, TaskSet, taskset::QUESTIONS_JSON};
use stepwise_eval::aflite::{self, AfliteConfig};
use stepwise_eval::audit::render::PlotLinks;
use stepwise_eval::audit::resolve::FeatureResolver;
use stepwise_eval::audit::shortcuts::{MARGIN, PanelEntry, ShortcutPanel};
use stepwise_eval::audit::{AuditConfig, AuditReport, audit, render, texts_to_encode};
use stepwise_score::bootstrap::{BootstrapConfig, Estimate, Interval};
use stepwise_features::items::str_id;
use stepwise_features::registry::{self, DEFAULT_MODELS_DIR, EncoderContext};
use stepwise_features::store::encode_strings;
use stepwise_features::{Encoder, Vectors};
use stepwise_report::plots::{CORRECT, Histogram, INCORRECT, Series, write_histogram};
use stepwise_tasks::suite::{SuiteRow, taskset_folders};

use super::generate::{LoadedFeatures, load_pool};
use super::model_features::concat;
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
    let inputs = AuditInputs::load(&args)?;
    let cfg = AuditConfig {
        bootstrap: BootstrapConfig { resamples: args.resamples, seed: args.seed, ..Default::default() },
        folds: args.folds,
        bins: args.bins.max(1),
        ..Default::default()
    };
    if suite {
        let out = out.expect("checked above");
        return audit_suite(&args, &inputs, &cfg, &aflite_cfg, out);
    }
    let ts = TaskSet::load(&args.taskset)?;
    let encoded = inputs.encode_missing(&ts)?;
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
            plots.ranks.push((t.task.clone(), format!("{name}.svg")));
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
        plots.distances.push((t.task.clone(), format!("{name}.svg")));
    }
    let mut markdown = render::markdown(&report, &source, &plots);
    let filtered = if args.aflite {
        let (section, filtered) = run_aflite(&ts, &resolver, &cfg, &aflite_cfg, &report, &out.path().join("aflite"))?;
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
    m.inputs.extend(inputs.features.input_hashes()?);
    m.param("text_encoder", inputs.encoder.as_ref().map(|e| e.info().name.clone()));
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
            eprintln!(
                "{:<17} {:>5} questions ({} with vectors): Hasty Student {}, distance probe {}{}",
                t.task,
                t.questions,
                t.with_vectors,
                percent(t.hasty_student),
                percent(t.distance_probe.as_ref().map(|p| p.accuracy)),
                t.shortcuts.as_ref().map_or(String::new(), |p| format!(", {}", verdict_text(p)))
            );
        }
        for f in filtered.iter().flat_map(|f| &f.filters) {
            eprintln!("AFLite: {} {} questions removed (see aflite/removed.jsonl)", f.result.removed.len(), f.task);
        }
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

fn percent(e: Option<Estimate>) -> String {
    e.map_or("–".to_string(), |e| format!("{:.1}%", 100.0 * e.value))
}

/// An accuracy in % with its interval when it has one: `82.1 [78.0, 86.0]`.
fn with_interval(value: f64, ci: Option<Interval>) -> String {
    let v = stepwise_score::markdown::percent(value);
    if ci.is_some() { format!("{v} {}", stepwise_score::markdown::percent_interval(ci)) } else { v }
}

/// A shortcut and its accuracy: `nearest to the question 41.0 [35.2, 47.1]`.
fn entry_text(e: &PanelEntry) -> String {
    format!("{} {}", e.name, with_interval(e.accuracy.value, e.accuracy.ci))
}

/// The shortcut panel's verdict in a few words.
fn verdict_text(p: &ShortcutPanel) -> String {
    match (p.shortcut_free, &p.worst) {
        (Some(true), _) => "shortcut-free".into(),
        (Some(false), Some(w)) => format!("not shortcut-free (worst: {})", entry_text(w)),
        (Some(false), None) => "not shortcut-free".into(),
        (None, _) => "shortcut-freedom undetermined".into(),
    }
}

/// What AFLite did to one task set.
struct Filtered {
    filters: Vec<aflite::TaskFilter>,
    kept: TaskSet,
    after: AuditReport,
}

/// AFLite on `ts`: the filtered task set and its files in `dir`, the audit after filtering; returns the report's
/// AFLite section and what was filtered.
fn run_aflite(
    ts: &TaskSet,
    resolver: &FeatureResolver<'_>,
    cfg: &AuditConfig,
    aflite_cfg: &AfliteConfig,
    before: &AuditReport,
    dir: &Path,
) -> anyhow::Result<(String, Filtered)> {
    let (kept, filters) =
        aflite::filter_taskset(ts, resolver, aflite_cfg).map_err(|e| anyhow::anyhow!("AFLite: {e}"))?;
    let after = audit(&kept, resolver, cfg);
    let section = aflite::markdown_section(aflite_cfg, &filters, before, &after);
    if kept.questions.is_empty() {
        usage_bail!("AFLite removed every question (raise --aflite-min)");
    }
    aflite::write_outputs(dir, &kept, &filters, &after, aflite_cfg)?;
    Ok((section, Filtered { filters, kept, after }))
}

/// True when `path` is a suite folder (`stepwise sweep`'s output).
fn is_suite(path: &Path) -> bool {
    path.join(stepwise_core::manifest::MANIFEST_FILE).is_file() && Manifest::read(path).is_ok_and(|m| m.kind == "suite")
}

/// The vectors an audit reads: the image store (with the distractor pool), the text store, and an encoder for
/// texts no store holds.
struct AuditInputs {
    features: LoadedFeatures,
    images: Option<Vectors>,
    text_store: Option<usize>,
    encoder: Option<Box<dyn Encoder>>,
}

impl AuditInputs {
    fn load(args: &Args) -> anyhow::Result<Self> {
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
        // Texts without a vector are encoded per task set (external RecipeQA files: titles are not in any store).
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
        Ok(AuditInputs { features, images, text_store, encoder })
    }

    fn texts(&self) -> Option<&Vectors> {
        self.text_store.map(|i| self.features.get(i))
    }

    /// Vectors of the texts of `ts` that no store holds, encoded now.
    fn encode_missing(&self, ts: &TaskSet) -> anyhow::Result<Option<Vectors>> {
        let Some(enc) = &self.encoder else { return Ok(None) };
        let texts = self.texts();
        let todo: Vec<String> =
            texts_to_encode(ts).into_iter().filter(|t| texts.is_none_or(|v| v.get(&str_id(t)).is_none())).collect();
        let pb = stepwise_core::progress::spinner(&format!("encoding {} texts", todo.len()));
        let v = encode_strings(enc.as_ref(), &todo).map_err(feature_error)?;
        pb.finish_and_clear();
        Ok(Some(v))
    }

    fn resolver<'a>(&'a self, encoded: Option<&'a Vectors>) -> FeatureResolver<'a> {
        FeatureResolver::new(self.images.as_ref(), self.texts(), encoded)
    }

    /// Say which option is missing when a whole kind of vector is.
    fn explain_missing(&self, report: &mut AuditReport) {
        let visual = report.tasks.iter().any(|t| t.task != Task::TextualCloze.as_str() && t.with_vectors == 0);
        if visual && self.images.is_none() {
            report.warnings.push(
                "no image feature store was given: pass --features with one (e.g. from `stepwise embed CORPUS \
                 --encoder descriptor -o feats/descriptor`) for the visual tasks' vector-based measures"
                    .into(),
            );
        }
        let textual = report.tasks.iter().any(|t| t.task == Task::TextualCloze.as_str() && t.with_vectors == 0);
        if textual && self.texts().is_none() && self.encoder.is_none() {
            report.warnings.push(
                "no text feature store or --text-encoder was given: pass one of them for textual cloze's \
                 vector-based measures"
                    .into(),
            );
        }
    }
}

/// One row of a suite audit's summary.
#[derive(serde::Serialize)]
struct SuiteAuditRow {
    setting: String,
    task: String,
    questions: usize,
    hasty_student: Option<f64>,
    /// The Hasty Student's interval over procedures (`None` without resamples).
    hasty_student_ci: Option<Interval>,
    distance_probe: Option<f64>,
    distance_probe_ci: Option<Interval>,
    /// The shortcut panel's verdict (`None`: no vectors, no intervals or too few procedures to judge).
    shortcut_free: Option<bool>,
    /// The panel entry farthest from chance.
    worst_shortcut: Option<PanelEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aflite: Option<AfliteRow>,
}

#[derive(serde::Serialize)]
struct AfliteRow {
    kept: usize,
    hasty_student: Option<f64>,
    distance_probe: Option<f64>,
}

/// Audit every task set of a suite (and filter each with AFLite): OUT/<setting>/<task>/{audit.md, audit.json},
/// OUT/aflite/<setting>/<task>/ (the filtered task sets, laid out as a suite) and a summary table of every setting
/// next to each other in OUT/audit.md.
fn audit_suite(
    args: &Args,
    inputs: &AuditInputs,
    cfg: &AuditConfig,
    aflite_cfg: &AfliteConfig,
    out: OutputDir,
) -> anyhow::Result<()> {
    let rows = stepwise_tasks::suite::read_counts(&args.taskset)?;
    let mut summary = Vec::new();
    let mut aflite_counts: Vec<((String, Task), stepwise_tasks::Counts)> = Vec::new();
    // "suite-audit", not "audit": the report reads the task sets' audits below it.
    let mut m = Manifest::new("suite-audit").with_seed(args.seed);
    m.inputs.push(InputHash::of(&args.taskset.join(stepwise_core::manifest::MANIFEST_FILE))?);
    // The feature stores are hashed once: every task set's manifest lists the same ones.
    let feature_hashes = inputs.features.input_hashes()?;
    m.inputs.extend(feature_hashes.iter().cloned());
    for (setting, task, r) in taskset_folders(&rows) {
        let counts = &rows[r].counts;
        let rel = Path::new(&setting).join(task.as_str());
        if counts.questions == 0 {
            if args.aflite {
                // Nothing to filter: the filtered suite keeps the (empty) task set, as the source suite does.
                let (from, to) = (args.taskset.join(&rel), out.path().join("aflite").join(&rel));
                std::fs::create_dir_all(&to).map_err(|e| anyhow::anyhow!("{}: {e}", to.display()))?;
                for f in [QUESTIONS_JSON, stepwise_core::taskset::QUESTIONS_PARQUET] {
                    if from.join(f).is_file() {
                        std::fs::copy(from.join(f), to.join(f))
                            .map_err(|e| anyhow::anyhow!("{}: {e}", from.join(f).display()))?;
                    }
                }
            }
            continue;
        }
        let ts = TaskSet::load(&args.taskset.join(&rel))?;
        let encoded = inputs.encode_missing(&ts)?;
        let resolver = inputs.resolver(encoded.as_ref());
        let mut report = audit(&ts, &resolver, cfg);
        inputs.explain_missing(&mut report);
        let dir = out.path().join(&rel);
        std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        let mut markdown =
            render::markdown(&report, &args.taskset.join(&rel).display().to_string(), &PlotLinks::default());
        let audited = report.tasks.first();
        let hasty = audited.and_then(|t| t.hasty_student);
        let probe = audited.and_then(|t| t.distance_probe.as_ref()).map(|p| p.accuracy);
        let panel = audited.and_then(|t| t.shortcuts.as_ref());
        let aflite = if args.aflite {
            // OUT/aflite/ is laid out as a suite, so `stepwise study OUT/aflite` trains the models after filtering.
            let aflite_dir = out.path().join("aflite").join(&rel);
            let (section, f) = run_aflite(&ts, &resolver, cfg, aflite_cfg, &report, &aflite_dir)?;
            markdown.push('\n');
            markdown.push_str(&section);
            let removed: u64 = f.filters.iter().map(|f| f.result.removed.len() as u64).sum();
            m.count(&format!("{setting}/{task}.aflite_removed"), removed);
            aflite_counts.push(((setting.clone(), task), counts_after(counts, &f.kept, removed)));
            let after = f.after;
            let t = after.tasks.first();
            Some(AfliteRow {
                kept: after.questions,
                hasty_student: t.and_then(|t| t.hasty_student).map(|e| e.value),
                distance_probe: t.and_then(|t| t.distance_probe.as_ref()).map(|p| p.accuracy.value),
            })
        } else {
            None
        };
        write_string_atomic(&dir.join("audit.md"), &markdown)?;
        write_string_atomic(&dir.join("audit.json"), &stepwise_core::json::to_pretty_sorted(&report))?;
        // Each task set's audit is an audit of its own (what `stepwise report` shows per setting).
        let mut tm = Manifest::new("audit").with_seed(args.seed);
        tm.inputs.push(InputHash::of(&args.taskset.join(&rel).join(QUESTIONS_JSON))?);
        tm.inputs.extend(feature_hashes.iter().cloned());
        tm.count("questions", report.questions as u64);
        if args.aflite {
            tm.param("aflite", aflite_cfg);
        }
        tm.write(&dir)?;
        m.count(&format!("{setting}/{task}.questions"), report.questions as u64);
        summary.push(SuiteAuditRow {
            setting: setting.clone(),
            task: task.as_str().to_string(),
            questions: report.questions,
            hasty_student: hasty.map(|e| e.value),
            hasty_student_ci: hasty.and_then(|e| e.ci),
            distance_probe: probe.map(|e| e.value),
            distance_probe_ci: probe.and_then(|e| e.ci),
            shortcut_free: panel.and_then(|p| p.shortcut_free),
            worst_shortcut: panel.and_then(|p| p.worst.clone()),
            aflite,
        });
    }
    if summary.is_empty() {
        usage_bail!("{}: the suite has no questions to audit", args.taskset.display());
    }
    if args.aflite {
        m.param("aflite", aflite_cfg);
        // The filtered task sets' own suite manifest: the source suite's parameters, this run's command and the
        // questions kept (what `stepwise study` and `stepwise export` read).
        let source = Manifest::read(&args.taskset)?;
        let mut am = Manifest::new("suite").with_seed(source.seed.unwrap_or(args.seed));
        // The source suite's inputs (its corpus first: `stepwise export` finds the corpus through it).
        am.inputs = source.inputs.clone();
        am.params = source.params;
        am.param("aflite", aflite_cfg);
        am.count("questions", summary.iter().filter_map(|r| r.aflite.as_ref()).map(|a| a.kept as u64).sum());
        for r in &summary {
            if let Some(a) = &r.aflite {
                am.count(&format!("{}/{}.questions", r.setting, r.task), a.kept as u64);
            }
        }
        am.write(&out.path().join("aflite"))?;
        // Its counts table: the source suite's, with AFLite's removals as one more reason questions were left out.
        let find = |setting: &str, task: Task| aflite_counts.iter().find(|(k, _)| k.0 == setting && k.1 == task);
        let aflite_rows: Vec<SuiteRow> = rows
            .iter()
            .map(|r| {
                let own = find(r.same_as.as_deref().unwrap_or(&r.setting), r.task);
                SuiteRow { counts: own.map_or_else(|| r.counts.clone(), |(_, c)| c.clone()), ..r.clone() }
            })
            .collect();
        stepwise_tasks::suite::write_counts(&out.path().join("aflite"), &aflite_rows)?;
    }
    let md = suite_summary_markdown(&args.taskset.display().to_string(), &summary, args.aflite.then_some(aflite_cfg));
    write_string_atomic(&out.path().join("audit.md"), &md)?;
    // An object, not a bare list of rows: nothing should mistake it for a suite's counts table.
    let json = serde_json::json!({"suite": args.taskset.display().to_string(), "rows": summary});
    write_string_atomic(&out.path().join("audit.json"), &stepwise_core::json::to_pretty_sorted(&json))?;
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprint!("{md}");
        eprintln!("\nwrote {}", dest.display());
    }
    Ok(())
}

/// A task set's counts after AFLite kept `kept` of its questions: questions, splits and procedures used are
/// those of `kept`, and the removed questions are skipped attempts (`aflite_removed`).
fn counts_after(before: &stepwise_tasks::Counts, kept: &TaskSet, removed: u64) -> stepwise_tasks::Counts {
    let mut c = before.clone();
    c.questions = kept.questions.len() as u64;
    c.questions_by_split.clear();
    for q in &kept.questions {
        *c.questions_by_split.entry(q.split.clone().unwrap_or_else(|| "none".to_string())).or_insert(0) += 1;
    }
    c.procedures_used =
        kept.questions.iter().map(|q| q.recipe_id.as_str()).collect::<std::collections::BTreeSet<_>>().len() as u64;
    if removed > 0 {
        *c.questions_skipped.entry("aflite_removed".to_string()).or_insert(0) += removed;
    }
    c
}

/// The suite audit's table: one row per (setting, task), the settings of a task next to each other.
fn suite_summary_markdown(source: &str, rows: &[SuiteAuditRow], aflite: Option<&AfliteConfig>) -> String {
    let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.1}", 100.0 * v));
    let ci = |v: Option<f64>, ci: Option<Interval>| v.map_or("–".to_string(), |v| with_interval(v, ci));
    let mut md = format!(
        "# Suite audit\n\n{source}: how much of each task set the Hasty Student and the distance probe answer without \
         reading (accuracy, %, with 95% bootstrap intervals over procedures){}. **Shortcut-free**: every shortcut of \
         the shortcut panel (each distance-rank pick, the distance + rank probe and the choice-only probe) has an \
         interval containing chance and none lies more than {:.0} points above it (–: cannot be judged, for lack \
         of vectors, intervals or procedures); the worst shortcut is the one farthest from chance. Each task set's \
         audit.md lists the whole panel.\n\n",
        if aflite.is_some() { ", and after adversarial filtering (AFLite) on the probe's features" } else { "" },
        100.0 * MARGIN
    );
    if let Some(c) = aflite {
        md += &format!(
            "AFLite: m = {} partitions, training share {}, threshold τ = {}, at most {} of the questions removed per \
             round, never below {} of them. The probe's fall after filtering is partly by construction (AFLite \
             removes what its linear models answer); the Hasty Student's is the independent measure. Each task set's \
             audit.md has the details; aflite/<setting>/<task>/ holds the filtered questions and the removed ones \
             with their scores, laid out as a suite (`stepwise study aflite/` trains the models on what is left).\n\n",
            c.partitions, c.train_share, c.threshold, c.slice_share, c.min_share
        );
    }
    md += "| task | setting | questions | Hasty Student | distance probe | shortcut-free | worst shortcut |";
    md += if aflite.is_some() { " AFLite kept | Hasty after | probe after |\n" } else { "\n" };
    md += "|---|---|---:|---:|---:|---|---|";
    md += if aflite.is_some() { "---:|---:|---:|\n" } else { "\n" };
    let mut sorted: Vec<&SuiteAuditRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.task.cmp(&b.task));
    for r in sorted {
        let free = match r.shortcut_free {
            Some(true) => "yes",
            Some(false) => "no",
            None => "–",
        };
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.task,
            r.setting,
            r.questions,
            ci(r.hasty_student, r.hasty_student_ci),
            ci(r.distance_probe, r.distance_probe_ci),
            free,
            r.worst_shortcut.as_ref().map_or("–".to_string(), entry_text)
        );
        if let Some(a) = &r.aflite {
            md += &format!(" {} | {} | {} |", a.kept, pct(a.hasty_student), pct(a.distance_probe));
        }
        md.push('\n');
    }
    md
}
