//! Auditing a suite (`stepwise audit SUITE -o OUT`): every task set's audit, AFLite on each with the filtered
//! task sets laid out as a suite, and one table of every setting side by side. Also the pieces the one-task-set
//! audit shares with it: the vectors an audit reads (and their loading) and AFLite's run.

use std::path::Path;

use serde::Serialize;
use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::write_string_atomic;
use stepwise_core::{Error, IoResultExt, ItemModality, Task, TaskSet, taskset::QUESTIONS_JSON};
use stepwise_features::items::str_id;
use stepwise_features::registry::{self, EncoderContext};
use stepwise_features::store::encode_strings;
use stepwise_features::stores::{LoadedStores, load_pool};
use stepwise_features::{Encoder, FeatureError, Modality, Vectors};
use stepwise_score::bootstrap::Interval;
use stepwise_tasks::suite::{SuiteRow, taskset_folders};

use super::render::PlotLinks;
use super::shortcuts::{MARGIN, PanelEntry};
use super::{AuditConfig, AuditReport, audit, render, texts_to_encode};
use crate::aflite::{self, AfliteConfig};
use stepwise_models::model_features::concat;
use stepwise_models::question_vectors::FeatureResolver;

type Result<T> = std::result::Result<T, FeatureError>;

/// What an audit reads, loaded: the feature stores, the image vectors (with a distractor pool's), which store holds
/// the texts, and an encoder for texts no store holds.
pub struct AuditInputs {
    pub features: LoadedStores,
    images: Option<Vectors>,
    text_store: Option<usize>,
    encoder: Option<Box<dyn Encoder>>,
}

/// Where an audit's vectors come from besides the feature stores.
pub struct AuditSources<'a> {
    /// Encode texts with this encoder instead of the text store's.
    pub text_encoder: Option<&'a str>,
    /// Extra distractor images: a folder of images or a feature store.
    pub distractor_pool: Option<&'a Path>,
    /// The store a folder pool's vectors are embedded into (resumable), else they are embedded in memory.
    pub pool_features: Option<&'a Path>,
    /// The pretrained models folder (for the encoders).
    pub models: &'a Path,
    /// Seed of a fitted `text_encoder`.
    pub seed: u64,
}

impl AuditInputs {
    /// Load the image and text stores of `features` and the distractor pool, and build the text encoder.
    pub fn load(mut features: LoadedStores, src: &AuditSources<'_>) -> Result<Self> {
        let image_store = features.find("image:");
        let text_store = if src.text_encoder.is_some() {
            None
        } else {
            features.find("title:").or_else(|| features.find("text:")).or_else(|| features.find("str:"))
        };
        for s in [image_store, text_store].into_iter().flatten() {
            features.load(s)?;
        }
        let pool = match src.distractor_pool {
            Some(p) => {
                let main = image_store.map(|i| &features.stores[i].1);
                Some(load_pool(p, main, src.models, src.pool_features)?)
            }
            None => None,
        };
        let images: Option<Vectors> = match (image_store, pool) {
            (Some(i), Some(p)) => Some(concat(features.get(i), &p)?),
            (None, Some(p)) => Some(p),
            (Some(i), None) => Some(features.get(i).clone()),
            (None, None) => None,
        };
        // Texts without a vector are encoded per task set (external RecipeQA files: titles are not in any store).
        let encoder: Option<Box<dyn Encoder>> = match (src.text_encoder, text_store) {
            (Some(name), _) => {
                let ctx = EncoderContext { models_dir: src.models.to_path_buf(), seed: src.seed, ..Default::default() };
                let enc = registry::build_encoder(name, &ctx)?;
                if enc.info().modality != Modality::Text {
                    return Err(FeatureError::usage(format!("--text-encoder {name}: not a text encoder")));
                }
                Some(enc)
            }
            (None, Some(i)) => {
                let ctx = EncoderContext { models_dir: src.models.to_path_buf(), ..Default::default() };
                Some(features.stores[i].1.encoder(&ctx)?)
            }
            (None, None) => None,
        };
        Ok(AuditInputs { features, images, text_store, encoder })
    }

    /// The vectors, as the audits read them.
    pub fn vectors(&self) -> AuditVectors<'_> {
        AuditVectors {
            images: self.images.as_ref(),
            texts: self.text_store.map(|i| self.features.get(i)),
            encoder: self.encoder.as_deref(),
        }
    }
}

/// The vectors an audit reads: the image vectors (with a distractor pool's), the text store's, and an encoder for
/// texts no store holds.
#[derive(Clone, Copy)]
pub struct AuditVectors<'a> {
    pub images: Option<&'a Vectors>,
    pub texts: Option<&'a Vectors>,
    pub encoder: Option<&'a dyn Encoder>,
}

impl AuditVectors<'_> {
    /// Vectors of the texts of `ts` that no store holds, encoded now.
    pub fn encode_missing(&self, ts: &TaskSet) -> Result<Option<Vectors>> {
        let Some(enc) = self.encoder else { return Ok(None) };
        let texts = self.texts;
        let todo: Vec<String> =
            texts_to_encode(ts).into_iter().filter(|t| texts.is_none_or(|v| v.get(&str_id(t)).is_none())).collect();
        let pb = stepwise_core::progress::spinner(&format!("encoding {} texts", todo.len()));
        let v = encode_strings(enc, &todo)?;
        pb.finish_and_clear();
        Ok(Some(v))
    }

    pub fn resolver<'b>(&'b self, encoded: Option<&'b Vectors>) -> FeatureResolver<'b> {
        FeatureResolver::new(self.images, self.texts, encoded)
    }

    /// Say which option is missing when a whole kind of vector is.
    pub fn explain_missing(&self, report: &mut AuditReport) {
        let visual = report.tasks.iter().any(|t| t.task.item_modality() == ItemModality::Image && t.with_vectors == 0);
        if visual && self.images.is_none() {
            report.warnings.push(
                "no image feature store was given: pass --features with one (e.g. from `stepwise embed CORPUS \
                 --encoder descriptor -o feats/descriptor`) for the visual tasks' vector-based measures"
                    .into(),
            );
        }
        let textual = report.tasks.iter().any(|t| t.task.item_modality() == ItemModality::Text && t.with_vectors == 0);
        if textual && self.texts.is_none() && self.encoder.is_none() {
            report.warnings.push(
                "no text feature store or --text-encoder was given: pass one of them for textual cloze's \
                 vector-based measures"
                    .into(),
            );
        }
    }
}

/// What AFLite did to one task set.
pub struct Filtered {
    pub filters: Vec<aflite::TaskFilter>,
    pub kept: TaskSet,
    pub after: AuditReport,
}

/// AFLite on `ts`: the filtered task set and its files in `dir`, the audit after filtering; returns the report's
/// AFLite section and what was filtered.
pub fn run_aflite(
    ts: &TaskSet,
    resolver: &FeatureResolver<'_>,
    cfg: &AuditConfig,
    aflite_cfg: &AfliteConfig,
    before: &AuditReport,
    dir: &Path,
) -> Result<(String, Filtered)> {
    let (kept, filters) =
        aflite::filter_taskset(ts, resolver, aflite_cfg).map_err(|e| Error::runtime(format!("AFLite: {e}")))?;
    let after = audit(&kept, resolver, cfg);
    let section = aflite::markdown_section(aflite_cfg, &filters, before, &after);
    if kept.questions.is_empty() {
        return Err(Error::usage("AFLite removed every question (raise --aflite-min)").into());
    }
    aflite::write_outputs(dir, &kept, &filters, &after, aflite_cfg)?;
    Ok((section, Filtered { filters, kept, after }))
}

/// One row of a suite audit's summary.
#[derive(Serialize)]
pub struct SuiteAuditRow {
    pub setting: String,
    pub task: String,
    pub questions: usize,
    pub hasty_student: Option<f64>,
    /// The Hasty Student's interval over procedures (`None` without resamples).
    pub hasty_student_ci: Option<Interval>,
    pub distance_probe: Option<f64>,
    pub distance_probe_ci: Option<Interval>,
    /// The shortcut panel's verdict (`None`: no vectors, no intervals or too few procedures to judge).
    pub shortcut_free: Option<bool>,
    /// The panel entry farthest from chance.
    pub worst_shortcut: Option<PanelEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aflite: Option<AfliteRow>,
}

#[derive(Serialize)]
pub struct AfliteRow {
    pub kept: usize,
    pub hasty_student: Option<f64>,
    pub distance_probe: Option<f64>,
}

/// Audit every task set of a suite (and filter each with AFLite): OUT/<setting>/<task>/{audit.md, audit.json},
/// OUT/aflite/<setting>/<task>/ (the filtered task sets, laid out as a suite) and a summary table of every setting
/// next to each other in OUT/audit.md.
/// Returns the summary's Markdown.
pub fn audit_suite(
    suite: &Path,
    inputs: AuditVectors<'_>,
    feature_hashes: &[InputHash],
    cfg: &AuditConfig,
    aflite: Option<&AfliteConfig>,
    seed: u64,
    out: &Path,
) -> Result<String> {
    let rows = stepwise_tasks::suite::read_counts(suite)?;
    let mut summary = Vec::new();
    let mut aflite_counts: Vec<((String, Task), stepwise_tasks::Counts)> = Vec::new();
    // "suite-audit", not "audit": the report reads the task sets' audits below it.
    let mut m = Manifest::new("suite-audit").with_seed(seed);
    m.inputs.push(InputHash::of(&suite.join(stepwise_core::manifest::MANIFEST_FILE))?);
    m.inputs.extend(feature_hashes.iter().cloned());
    for (setting, task, r) in taskset_folders(&rows) {
        let counts = &rows[r].counts;
        let rel = Path::new(&setting).join(task.as_str());
        if counts.questions == 0 {
            if aflite.is_some() {
                // Nothing to filter: the filtered suite keeps the (empty) task set, as the source suite does.
                let (from, to) = (suite.join(&rel), out.join("aflite").join(&rel));
                std::fs::create_dir_all(&to).at(&to)?;
                for f in [QUESTIONS_JSON, stepwise_core::taskset::QUESTIONS_PARQUET] {
                    if from.join(f).is_file() {
                        std::fs::copy(from.join(f), to.join(f)).at(from.join(f))?;
                    }
                }
            }
            continue;
        }
        let ts = TaskSet::load(&suite.join(&rel))?;
        let encoded = inputs.encode_missing(&ts)?;
        let resolver = inputs.resolver(encoded.as_ref());
        let mut report = audit(&ts, &resolver, cfg);
        inputs.explain_missing(&mut report);
        let dir = out.join(&rel);
        std::fs::create_dir_all(&dir).at(&dir)?;
        let mut markdown = render::markdown(&report, &suite.join(&rel).display().to_string(), &PlotLinks::default());
        let audited = report.tasks.first();
        let hasty = audited.and_then(|t| t.hasty_student);
        let probe = audited.and_then(|t| t.distance_probe.as_ref()).map(|p| p.accuracy);
        let panel = audited.and_then(|t| t.shortcuts.as_ref());
        let aflite_row = if let Some(aflite_cfg) = aflite {
            // OUT/aflite/ is laid out as a suite, so `stepwise study OUT/aflite` trains the models after filtering.
            let aflite_dir = out.join("aflite").join(&rel);
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
        let mut tm = Manifest::new("audit").with_seed(seed);
        tm.inputs.push(InputHash::of(&suite.join(&rel).join(QUESTIONS_JSON))?);
        tm.inputs.extend(feature_hashes.iter().cloned());
        tm.count("questions", report.questions as u64);
        if let Some(aflite_cfg) = aflite {
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
            aflite: aflite_row,
        });
    }
    if summary.is_empty() {
        return Err(Error::usage(format!("{}: the suite has no questions to audit", suite.display())).into());
    }
    if let Some(aflite_cfg) = aflite {
        m.param("aflite", aflite_cfg);
        // The filtered task sets' own suite manifest: the source suite's parameters, this run's command and the
        // questions kept (what `stepwise study` and `stepwise export` read).
        let source = Manifest::read(suite)?;
        let mut am = Manifest::new("suite").with_seed(source.seed.unwrap_or(seed));
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
        am.write(&out.join("aflite"))?;
        // Its counts table: the source suite's, with AFLite's removals as one more reason questions were left out.
        let find = |setting: &str, task: Task| aflite_counts.iter().find(|(k, _)| k.0 == setting && k.1 == task);
        let aflite_rows: Vec<SuiteRow> = rows
            .iter()
            .map(|r| {
                let own = find(r.same_as.as_deref().unwrap_or(&r.setting), r.task);
                SuiteRow { counts: own.map_or_else(|| r.counts.clone(), |(_, c)| c.clone()), ..r.clone() }
            })
            .collect();
        stepwise_tasks::suite::write_counts(&out.join("aflite"), &aflite_rows)?;
    }
    let md = summary_markdown(&suite.display().to_string(), &summary, aflite);
    write_string_atomic(&out.join("audit.md"), &md)?;
    // An object, not a bare list of rows: nothing should mistake it for a suite's counts table.
    let json = serde_json::json!({"suite": suite.display().to_string(), "rows": summary});
    write_string_atomic(&out.join("audit.json"), &stepwise_core::json::to_pretty_sorted(&json))?;
    m.write(out)?;
    Ok(md)
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
fn summary_markdown(source: &str, rows: &[SuiteAuditRow], aflite: Option<&AfliteConfig>) -> String {
    let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.1}", 100.0 * v));
    let ci = |v: Option<f64>, ci: Option<Interval>| v.map_or("–".to_string(), |v| with_interval(v, ci));
    let mut md = format!(
        "# Suite audit\n\n{source}: how much of each task set the Hasty Student and the distance probe answer without \
         reading (accuracy, %, with 95% bootstrap intervals over procedures){}. **Shortcut-free**: every shortcut of \
         the shortcut panel (each distance-rank pick, the distance + rank probe, the choice-only probe, the rank given \
         the distances' spread and level and, for ordering, \"not one of a reversed pair\") has an interval \
         containing chance, at a confidence Bonferroni-corrected over the panel's entries, and none lies \
         more than {:.0} points above it (–: cannot be judged, for lack of vectors, intervals or procedures); the \
         worst shortcut is the one farthest from chance. A set without any shortcut passes at least 95% of the \
         time, so of many such sets about one in twenty is flagged by chance. Each task set's \
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

/// An accuracy in % with its interval when it has one: `82.1 [78.0, 86.0]`.
fn with_interval(value: f64, ci: Option<Interval>) -> String {
    let v = stepwise_score::markdown::percent(value);
    if ci.is_some() { format!("{v} {}", stepwise_score::markdown::percent_interval(ci)) } else { v }
}

/// A shortcut and its accuracy: `nearest to the question 41.0 [35.2, 47.1]`.
pub(crate) fn entry_text(e: &PanelEntry) -> String {
    format!("{} {}", e.name, with_interval(e.accuracy.value, e.accuracy.ci))
}
