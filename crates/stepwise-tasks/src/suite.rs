//! Suites: every setting (RecipeQA mode and the eight knob settings) × every task as separate task sets with a
//! train/val/test split by procedure — the Meta-RecipeQA benchmark — plus the counts table.
//!
//! Layout of a suite folder:
//! ```text
//! SUITE/manifest.json                      kind "suite": parameters, settings, tasks, totals
//! SUITE/counts.json, SUITE/counts.md       questions, splits, procedures used, skips by reason per (setting, task)
//! SUITE/<setting>/<task>/questions.json    RecipeQA layout, every question with its `split` and `meta`
//! SUITE/<setting>/<task>/questions.parquet the same rows
//! SUITE/<setting>/<task>/manifest.json     kind "taskset": setting, task, parameters, counts
//! ```
//! `<setting>` is `recipeqa` or `knobs-<k1>-<k2>-<k3>`. The split of a procedure is the same in every task set
//! of the suite (one [`assign_splits`] over the corpus), so no procedure is in two splits anywhere.
//!
//! Knob settings with the same k1 are paired ([`Mode::paired`]): the same questions (qids, question items,
//! answers), different negatives. Visual ordering has no knob 3, so it is written once per (k1, k2), under
//! `knobs-<k1>-<k2>-0/visual_ordering`; its k3 = 1 rows in `counts.json` carry `same_as` (the setting whose
//! folder holds their questions) and the suite manifest lists them under `params.same_as`. [`taskset_dir`]
//! resolves any (setting, task) to its folder.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use stepwise_core::manifest::Manifest;
use stepwise_core::output::write_string_atomic;
use stepwise_core::shard::Shard;
use stepwise_core::split::{SplitFractions, assign_splits};
use stepwise_core::{IoResultExt, Procedure, Question, Result, Split, Task, TaskFamily, TaskSet};
use stepwise_features::Vectors;

use crate::catalog::FeatureSources;
use crate::config::{GenerateConfig, ItemKind, KnobSetting, Mode};
use crate::counts::Counts;
use crate::generate::{Generated, TaskGenerator};
use crate::taskset_writer::TasksetWriter;

/// What a suite holds.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    pub generate: GenerateConfig,
    pub tasks: Vec<Task>,
    pub modes: Vec<Mode>,
    pub split_fractions: SplitFractions,
    /// Write only the questions of this contiguous part of the procedures (`stepwise sweep --shard I/N`); the
    /// parts are joined by [`crate::merge::merge_suites`] (`stepwise sweep --merge`).
    pub shard: Option<Shard>,
}

/// One (setting, task) row of the counts table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRow {
    pub setting: String,
    pub task: Task,
    /// Set when this (setting, task) has no folder of its own because its questions are those of another
    /// setting (visual ordering with k3 = 1: the k3 = 0 setting); `counts` are then that setting's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
    #[serde(flatten)]
    pub counts: Counts,
}

/// The folder of the task set holding the questions of `task` in setting `mode` in the suite `suite`:
/// `<suite>/<setting>/<task>`, where visual ordering's k3 = 1 settings resolve to their k3 = 0 setting (knob 3 is
/// not defined for ordering, so a suite writes one ordering task set per (k1, k2)). A consumer iterating over
/// the eight knob settings of each task finds every one's questions through this.
pub fn taskset_dir(suite: &Path, mode: Mode, task: Task) -> std::path::PathBuf {
    suite.join(mode.data_mode(task).label()).join(task.as_str())
}

/// The setting a task set's manifest names (`params.setting`, as `stepwise generate` and `sweep` write it); `None`
/// when the set has no manifest or its manifest names none (RecipeQA's own questions, ingested).
pub fn taskset_setting(dir: &Path) -> Result<Option<Mode>> {
    let path = dir.join(stepwise_core::manifest::MANIFEST_FILE);
    if !path.exists() {
        return Ok(None);
    }
    match Manifest::read(dir)?.params.get("setting") {
        None => Ok(None),
        Some(v) => v.as_str().and_then(Mode::parse_label).map(Some).ok_or_else(|| {
            stepwise_core::Error::bad_input(format!(
                "{}: params.setting {v} is no setting (recipeqa or knobs-<k1>-<k2>-<k3>)",
                path.display()
            ))
        }),
    }
}

/// The split of every procedure: by procedure, stratified by category, seeded.
pub fn procedure_splits(procedures: &[Procedure], fractions: SplitFractions, seed: u64) -> BTreeMap<String, Split> {
    assign_splits(procedures.iter().map(|p| (p.id.as_str(), p.category.as_deref())), fractions, seed)
}

/// Write a suite into `dir` (normally the path of an [`stepwise_core::output::OutputDir`] that the caller
/// commits): the task sets, then the counts table and the suite manifest. `base` is the manifest every written
/// manifest starts from (command line, inputs, seed).
pub fn write_suite(
    dir: &Path,
    procedures: &[Procedure],
    sources: FeatureSources<'_>,
    cfg: &SuiteConfig,
    base: &Manifest,
) -> Result<Vec<SuiteRow>> {
    let rows = write_suite_tasksets(dir, procedures, sources, cfg, base)?;
    write_suite_summary(dir, procedures, cfg, base, &rows)?;
    Ok(rows)
}

/// Write the task sets of a suite (`<setting>/<task>/`), one item kind at a time (the three visual tasks share
/// a catalog and its neighbours). Memory: one kind's catalog and neighbours, plus one (setting, task)'s
/// questions at a time.
pub fn write_suite_tasksets(
    dir: &Path,
    procedures: &[Procedure],
    sources: FeatureSources<'_>,
    cfg: &SuiteConfig,
    base: &Manifest,
) -> Result<Vec<SuiteRow>> {
    let splits = procedure_splits(procedures, cfg.split_fractions, cfg.generate.seed);
    let mut kinds: Vec<ItemKind> = Vec::new();
    for &t in &cfg.tasks {
        let k = cfg.generate.item_kind(t);
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let mut rows = Vec::new();
    for kind in kinds {
        let tasks: Vec<Task> = cfg.tasks.iter().copied().filter(|&t| cfg.generate.item_kind(t) == kind).collect();
        let mut tg = TaskGenerator::for_kind(kind, procedures, &sources, Some(&splits), &cfg.generate)?;
        if let Some(shard) = cfg.shard {
            tg.restrict_to(shard);
        }
        rows.extend(write_kind_tasksets(dir, &mut tg, &tasks, cfg, base)?);
    }
    rows.sort_by_key(|r| (cfg.tasks.iter().position(|t| *t == r.task), Mode::parse_label(&r.setting)));
    Ok(rows)
}

/// One build of a suite: a plan and the settings made from it together (RecipeQA mode alone, or the knob
/// settings paired by k1), with the requested ones to write and the requested settings that resolve to them.
struct Build {
    plan_mode: Mode,
    task: Task,
    /// Every setting built (pairing needs all of them, written or not).
    modes: Vec<Mode>,
    /// Per built setting: whether its task set is written, and the requested settings that alias it.
    write: Vec<bool>,
    aliases: Vec<Vec<Mode>>,
}

/// The builds of `tasks` × `modes`, in task order then RecipeQA mode, then knob 1 = 0, 1.
fn builds(tasks: &[Task], modes: &[Mode]) -> Vec<Build> {
    let mut out = Vec::new();
    for &task in tasks {
        let mut plan_modes: Vec<Mode> = Vec::new();
        for &m in modes {
            let pm = match m {
                Mode::RecipeQa => Mode::RecipeQa,
                Mode::Knobs(k) => Mode::Knobs(KnobSetting { k1: k.k1, k2: 0, k3: 0 }),
            };
            if !plan_modes.contains(&pm) {
                plan_modes.push(pm);
            }
        }
        plan_modes.sort();
        for pm in plan_modes {
            let built = pm.paired(task);
            let requested: Vec<Mode> = modes.iter().copied().filter(|m| built.contains(&m.data_mode(task))).collect();
            let write = built.iter().map(|b| requested.iter().any(|m| m.data_mode(task) == *b)).collect();
            let aliases = built
                .iter()
                .map(|b| requested.iter().copied().filter(|m| m.data_mode(task) == *b && m != b).collect())
                .collect();
            out.push(Build { plan_mode: pm, task, modes: built, write, aliases });
        }
    }
    out
}

/// Write the task sets of `tasks` × `cfg.modes` from a built generator: plan everything (one plan per task and
/// RecipeQA mode or k1), search the neighbours of every planned query once, then build the paired settings of
/// each plan together, streaming each setting's questions to its own task set. Settings that are needed for
/// pairing but not requested are built and not written.
pub fn write_kind_tasksets(
    dir: &Path,
    tg: &mut TaskGenerator<'_>,
    tasks: &[Task],
    cfg: &SuiteConfig,
    base: &Manifest,
) -> Result<Vec<SuiteRow>> {
    let builds = builds(tasks, &cfg.modes);
    let mut plans = Vec::with_capacity(builds.len());
    for b in &builds {
        plans.push(tg.plan(b.task, b.plan_mode)?);
    }
    tg.prepare(&plans.iter().collect::<Vec<_>>())?;
    let (methods, fallbacks) = tg.neighbor_methods();
    let mut rows = Vec::new();
    // The previous build's task sets, closed: their files are synced while the next ones are generated.
    let mut pending: Vec<(TasksetWriter, Manifest)> = Vec::new();
    for (b, plan) in builds.iter().zip(&plans) {
        // Streamed: each chunk of questions is written as soon as it is made.
        let mut writers: Vec<Option<TasksetWriter>> = Vec::with_capacity(b.modes.len());
        for (m, &w) in b.modes.iter().zip(&b.write) {
            writers.push(if w {
                Some(TasksetWriter::create(&dir.join(m.label()).join(b.task.as_str()))?)
            } else {
                None
            });
        }
        let counts = tg.build_paired(plan, &b.modes, |i, groups| match &mut writers[i] {
            Some(w) => w.append_grouped(groups),
            None => Ok(()),
        })?;
        let paired: Vec<String> = b.modes.iter().map(Mode::label).collect();
        let mut finished = Vec::new();
        for (((mode, writer), counts), aliases) in b.modes.iter().zip(writers).zip(counts).zip(&b.aliases) {
            let Some(mut writer) = writer else {
                continue;
            };
            let generated = Generated { task: b.task, mode: *mode, questions: Vec::new(), counts };
            let mut manifest = taskset_manifest(base, &cfg.generate, &generated, Some(cfg.split_fractions));
            manifest.param("neighbor_search", &methods);
            manifest.count("neighbor_exact_fallbacks", fallbacks as u64);
            if paired.len() > 1 {
                manifest.param("paired_settings", &paired);
            }
            if !aliases.is_empty() {
                manifest.param("also_setting", aliases.iter().map(Mode::label).collect::<Vec<_>>());
            }
            if let Some(shard) = cfg.shard {
                manifest.param(SHARD_PARAM, shard);
            }
            writer.close();
            finished.push((writer, manifest));
            let Generated { counts, task, .. } = generated;
            tracing::info!("{}/{}: {} questions", mode.label(), task, counts.questions);
            for a in aliases {
                rows.push(SuiteRow { setting: a.label(), task, same_as: Some(mode.label()), counts: counts.clone() });
            }
            rows.push(SuiteRow { setting: mode.label(), task, same_as: None, counts });
        }
        for (w, m) in std::mem::replace(&mut pending, finished) {
            w.finish(&m)?;
        }
    }
    for (w, m) in pending {
        w.finish(&m)?;
    }
    // Only the requested settings (a paired setting built for pairing alone is not a row).
    rows.retain(|r| Mode::parse_label(&r.setting).is_some_and(|m| cfg.modes.contains(&m)));
    Ok(rows)
}

/// Write `counts.json`, `counts.md` and the suite's `manifest.json` for `rows`.
pub fn write_suite_summary(
    dir: &Path,
    procedures: &[Procedure],
    cfg: &SuiteConfig,
    base: &Manifest,
    rows: &[SuiteRow],
) -> Result<()> {
    let splits = procedure_splits(procedures, cfg.split_fractions, cfg.generate.seed);
    write_counts(dir, rows)?;
    let mut m = base.clone();
    m.kind = "suite".to_string();
    m.seed = Some(cfg.generate.seed);
    m.param("generate", &cfg.generate);
    m.param("tasks", cfg.tasks.iter().map(|t| t.as_str()).collect::<Vec<_>>());
    m.param("settings", cfg.modes.iter().map(Mode::label).collect::<Vec<_>>());
    m.param("split_fractions", cfg.split_fractions);
    m.param(
        "layout",
        "<setting>/<task>/{questions.json,questions.parquet,manifest.json}; counts.json; counts.md; a (setting, task) \
         listed in same_as has no folder: its questions are in the folder of the setting it maps to",
    );
    let same_as: BTreeMap<String, String> = rows
        .iter()
        .filter_map(|r| r.same_as.as_ref().map(|s| (format!("{}/{}", r.setting, r.task), format!("{s}/{}", r.task))))
        .collect();
    m.param("same_as", &same_as);
    m.param(
        "pairing",
        "knob settings with the same k1 ask the same questions (qids, question items, answers) and differ only in \
         their negatives; visual ordering has no knob 3 and is written once per (k1, k2)",
    );
    m.count("procedures", procedures.len() as u64);
    for s in Split::ALL {
        m.count(&format!("procedures.{s}"), splits.values().filter(|x| **x == s).count() as u64);
    }
    count_rows(&mut m, rows);
    if let Some(shard) = cfg.shard {
        m.param(SHARD_PARAM, shard);
    }
    m.write(dir)
}

/// The task-set folders of a suite's counts rows: each distinct (setting whose folder holds the questions, task),
/// in row order, with the index of a row carrying its counts. A folder may have only alias rows (visual ordering's
/// `knobs-K1-K2-0` written for a requested `knobs-K1-K2-1` alone), so aliases are resolved, not skipped.
pub fn taskset_folders(rows: &[SuiteRow]) -> Vec<(String, Task, usize)> {
    let mut out: Vec<(String, Task, usize)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let setting = r.same_as.clone().unwrap_or_else(|| r.setting.clone());
        match out.iter_mut().find(|(s, t, _)| *s == setting && *t == r.task) {
            // The folder's own row, when there is one, carries its counts as well as any alias does.
            Some(f) if r.same_as.is_none() => f.2 = i,
            Some(_) => {}
            None => out.push((setting, r.task, i)),
        }
    }
    out
}

/// The manifest parameter naming the part of a sharded suite (absent from a whole suite).
pub const SHARD_PARAM: &str = "shard";

/// The rows of a suite's `counts.json`.
pub fn read_counts(dir: &Path) -> Result<Vec<SuiteRow>> {
    let path = dir.join("counts.json");
    serde_json::from_value(stepwise_core::json::read_json(&path)?)
        .map_err(|e| stepwise_core::Error::bad_input(format!("{}: not a counts table: {e}", path.display())))
}

/// `counts.json` and `counts.md` (with the warnings) of `rows`.
pub fn write_counts(dir: &Path, rows: &[SuiteRow]) -> Result<()> {
    write_string_atomic(&dir.join("counts.json"), &stepwise_core::json::to_pretty_sorted(&rows))?;
    let mut md = counts_markdown(rows);
    let warnings = counts_warnings(rows);
    if !warnings.is_empty() {
        md += "\n## Warnings\n\n";
        for w in &warnings {
            md += &format!("- {w}\n");
        }
    }
    write_string_atomic(&dir.join("counts.md"), &md)
}

/// The suite manifest's counts that come from the rows: questions in total and per (setting, task).
pub(crate) fn count_rows(m: &mut Manifest, rows: &[SuiteRow]) {
    m.count("questions", rows.iter().filter(|r| r.same_as.is_none()).map(|r| r.counts.questions).sum());
    for r in rows {
        m.count(&format!("{}/{}.questions", r.setting, r.task), r.counts.questions);
        if r.same_as.is_none() {
            m.count(&format!("{}/{}.questions_widened", r.setting, r.task), r.counts.questions_widened);
        }
    }
}

/// The manifest of one generated task set: the base manifest with the setting, the task, the parameters and
/// the counts.
pub fn taskset_manifest(
    base: &Manifest,
    cfg: &GenerateConfig,
    g: &Generated,
    split_fractions: Option<SplitFractions>,
) -> Manifest {
    let mut m = base.clone();
    m.kind = TaskFamily::RecipeQa(g.task).manifest_kind().to_string();
    m.seed = Some(cfg.seed);
    m.param("task", g.task.as_str());
    m.param("setting", g.mode.label());
    if let Mode::Knobs(k) = g.mode {
        m.param("knobs", [k.k1, k.k2, k.k3]);
        m.param("knobs_mode", cfg.knobs_mode.as_str());
        if cfg.knobs_mode == crate::KnobsMode::Calibrated {
            m.param("knobs_departures", crate::calibrated::DEPARTURES);
        }
    }
    let data = g.mode.data_mode(g.task);
    if data != g.mode {
        m.param("same_as", data.label());
    }
    m.param("generate", cfg);
    if let Some(f) = split_fractions {
        m.param("split_fractions", f);
    }
    m.counts = g.counts.manifest_entries();
    m
}

/// What one task set of several question types is made from (`stepwise generate --task a,b,...`).
pub struct TaskSetInputs<'a> {
    /// The corpus, named in errors.
    pub corpus: &'a Path,
    pub procedures: &'a [Procedure],
    /// Per task, in the order given, the vectors holding its items.
    pub tasks: Vec<(Task, &'a Vectors)>,
    pub splits: &'a BTreeMap<String, Split>,
    pub split_fractions: SplitFractions,
    /// Extra distractor images.
    pub pool: Option<&'a Vectors>,
    pub allow_missing: bool,
}

/// A task set of several question types in one setting, ready to write ([`write_taskset`]).
pub struct GeneratedTaskSet {
    pub questions: Vec<Question>,
    pub manifest: Manifest,
    /// Counts per task (the summary table, [`counts_markdown`]).
    pub rows: Vec<SuiteRow>,
    /// [`counts_warnings`] of the rows, also recorded in the manifest.
    pub warnings: Vec<String>,
}

/// Generate the questions of every task in `inputs` in `mode`, in the order given; consecutive tasks of one item
/// kind that read the same vectors share a catalog and its neighbours. `base` is the manifest of the inputs (the
/// command line, input hashes). A set with no question at all is an error naming the corpus and the counts.
pub fn generate_taskset(
    inputs: &TaskSetInputs<'_>,
    cfg: &GenerateConfig,
    mode: Mode,
    base: &Manifest,
) -> Result<GeneratedTaskSet> {
    let Some(&(first, _)) = inputs.tasks.first() else {
        return Err(stepwise_core::Error::usage("no task to generate"));
    };
    let mut generated = Vec::new();
    let mut current: Option<(&Vectors, TaskGenerator<'_>)> = None;
    for &(task, features) in &inputs.tasks {
        let kind = cfg.item_kind(task);
        if current.as_ref().is_none_or(|(v, g)| !std::ptr::eq(*v, features) || g.kind != kind) {
            let sources = FeatureSources { features, extra_pool: inputs.pool, allow_missing: inputs.allow_missing };
            current =
                Some((features, TaskGenerator::for_kind(kind, inputs.procedures, &sources, Some(inputs.splits), cfg)?));
        }
        let (_, tg) = current.as_mut().expect("set above");
        generated.push(tg.generate(task, mode)?);
    }
    let mut manifest = if let [g] = generated.as_slice() {
        taskset_manifest(base, cfg, g, Some(inputs.split_fractions))
    } else {
        let mut m = base.clone();
        m.kind = TaskFamily::RecipeQa(first).manifest_kind().into();
        m.seed = Some(cfg.seed);
        m.param("tasks", inputs.tasks.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>());
        m.param("setting", mode.label());
        m.param("generate", cfg);
        m.param("split_fractions", inputs.split_fractions);
        m.count("questions", generated.iter().map(|g| g.counts.questions).sum());
        for g in &generated {
            for (k, v) in g.counts.manifest_entries() {
                m.count(&format!("{}.{k}", g.task), v);
            }
        }
        m
    };
    let rows: Vec<SuiteRow> = generated
        .iter()
        .map(|g| SuiteRow { setting: mode.label(), task: g.task, same_as: None, counts: g.counts.clone() })
        .collect();
    let questions: Vec<Question> = generated.into_iter().flat_map(|g| g.questions).collect();
    if questions.is_empty() {
        return Err(stepwise_core::Error::bad_input(format!(
            "{}: no question could be made ({})",
            inputs.corpus.display(),
            rows.iter()
                .map(|r| format!("{}: {:?}", r.task, r.counts.manifest_entries()))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    let warnings = counts_warnings(&rows);
    if !warnings.is_empty() {
        manifest.param("warnings", &warnings);
    }
    Ok(GeneratedTaskSet { questions, manifest, rows, warnings })
}

/// Write a task-set folder: `questions.json` (RecipeQA layout), `questions.parquet` and `manifest.json`.
pub fn write_taskset(dir: &Path, questions: Vec<Question>, manifest: &Manifest) -> Result<()> {
    std::fs::create_dir_all(dir).at(dir)?;
    let ts = TaskSet { questions, extra: BTreeMap::new() };
    let (a, b) = rayon::join(
        || ts.write_json(&dir.join(stepwise_core::taskset::QUESTIONS_JSON)),
        || ts.write_parquet(&dir.join(stepwise_core::taskset::QUESTIONS_PARQUET)),
    );
    a?;
    b?;
    manifest.write(dir)
}

/// The counts table as Markdown: one table per task, one row per setting, a column per skip reason.
/// The warnings of every row (see [`Counts::warnings`]), labelled `task setting`; settings of one task with the
/// same warning share one line (`textual_cloze recipeqa, knobs-0-0-0 (2 settings): ...`).
pub fn counts_warnings(rows: &[SuiteRow]) -> Vec<String> {
    let mut grouped: Vec<(Task, String, Vec<&str>)> = Vec::new();
    for r in rows.iter().filter(|r| r.same_as.is_none()) {
        for w in r.counts.warnings() {
            match grouped.iter_mut().find(|(t, body, _)| *t == r.task && *body == w) {
                Some(g) => g.2.push(&r.setting),
                None => grouped.push((r.task, w, vec![&r.setting])),
            }
        }
    }
    grouped
        .into_iter()
        .map(|(task, body, settings)| {
            let n = if settings.len() > 1 { format!(" ({} settings)", settings.len()) } else { String::new() };
            format!("{task} {}{n}: {body}", settings.join(", "))
        })
        .collect()
}

pub fn counts_markdown(rows: &[SuiteRow]) -> String {
    let mut out = String::from("# Suite counts\n\n");
    out.push_str(
        "Questions per setting and task, their split by procedure, the procedures that gave at least one \
         question, the questions whose negatives needed a widened search, and the question attempts skipped \
         because a constraint could not be met (by reason). Constraints are never relaxed. Knob settings with \
         the same k1 ask the same questions: when a setting cannot meet its constraint among the K nearest \
         neighbours, its search is widened to every item within the region's reach (counted as widened); a \
         question no candidate can serve is dropped from all the paired settings (counted under the failing \
         setting's reason, and as paired_setting_failed in the others). Visual ordering has no knob 3: its k3 = 1 \
         settings are the k3 = 0 ones. \"Kept of planned\": the share of the plan's questions a setting kept (a \
         setting keeping under half is named in the warnings). Calibrated knobs skip a question whose answer \
         cannot take any rank in some paired setting (calibrated_rank_unreachable) or that no draw of negatives can \
         balance (calibrated_balance: its answer stands apart from every candidate; kept, it would bring a \
         shortcut back).\n",
    );
    let mut tasks: Vec<Task> = rows.iter().map(|r| r.task).collect();
    tasks.dedup();
    for task in tasks {
        let rs: Vec<&SuiteRow> = rows.iter().filter(|r| r.task == task).collect();
        let mut reasons: Vec<String> = rs.iter().flat_map(|r| r.counts.questions_skipped.keys().cloned()).collect();
        reasons.sort();
        reasons.dedup();
        let mut proc_reasons: Vec<String> =
            rs.iter().flat_map(|r| r.counts.procedures_skipped.keys().cloned()).collect();
        proc_reasons.sort();
        proc_reasons.dedup();
        out.push_str(&format!(
            "\n## {task}\n\n| setting | questions | kept of planned | train | val | test | procedures used | widened |"
        ));
        for r in &proc_reasons {
            out.push_str(&format!(" procedures skipped: {r} |"));
        }
        for r in &reasons {
            out.push_str(&format!(" skipped: {r} |"));
        }
        out.push_str("\n|---|---:|---:|---:|---:|---:|---:|---:|");
        for _ in proc_reasons.iter().chain(&reasons) {
            out.push_str("---:|");
        }
        out.push('\n');
        for r in rs {
            if let Some(same) = &r.same_as {
                out.push_str(&format!(
                    "| {} | same as {same} (no knob 3 for {task}; questions in {same}/{task}) |",
                    r.setting
                ));
                for _ in 0..6 + proc_reasons.len() + reasons.len() {
                    out.push_str(" |");
                }
                out.push('\n');
                continue;
            }
            let c = &r.counts;
            let split = |s: &str| c.questions_by_split.get(s).copied().unwrap_or(0);
            let kept = c.retention().map_or("–".to_string(), |k| format!("{:.1}% of {}", 100.0 * k, c.planned()));
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                r.setting,
                c.questions,
                kept,
                split("train"),
                split("val"),
                split("test"),
                c.procedures_used,
                c.questions_widened
            ));
            for k in &proc_reasons {
                out.push_str(&format!(" {} |", c.procedures_skipped.get(k).copied().unwrap_or(0)));
            }
            for k in &reasons {
                out.push_str(&format!(" {} |", c.questions_skipped.get(k).copied().unwrap_or(0)));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(setting: &str, task: Task, questions: u64, skipped: &[(&str, u64)]) -> SuiteRow {
        let counts = Counts {
            questions,
            procedures: 100,
            procedures_used: 100,
            questions_skipped: skipped.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        };
        SuiteRow { setting: setting.into(), task, same_as: None, counts }
    }

    #[test]
    fn warnings_name_the_main_reason_and_group_settings_with_the_same_warning() {
        let rows = [
            row("recipeqa", Task::VisualCloze, 700, &[]),
            row("knobs-0-0-1", Task::VisualCloze, 21, &[("knob3_no_close_negative", 2400)]),
            row(
                "knobs-0-0-0",
                Task::VisualCloze,
                21,
                &[("knob2_region_too_small", 3), ("paired_setting_failed", 2400)],
            ),
            row("knobs-1-0-1", Task::VisualCloze, 21, &[("knob3_no_close_negative", 2400)]),
        ];
        let w = counts_warnings(&rows);
        // Each setting: too few questions, and too little of its plan kept.
        assert_eq!(w.len(), 4, "{w:#?}");
        let find = |prefix: &str, part: &str| {
            w.iter()
                .find(|x| x.starts_with(prefix) && x.contains(part))
                .unwrap_or_else(|| panic!("{prefix} {part}: {w:#?}"))
        };
        let few = find("visual_cloze knobs-0-0-1, knobs-1-0-1 (2 settings): only 21 questions", "most attempts failed");
        assert!(few.contains("(knob3_no_close_negative: 2400; distractors are scarce"), "{few}");
        let few = find("visual_cloze knobs-0-0-0: only 21 questions", "");
        assert!(few.contains("(paired_setting_failed: 2400; settings with the same k1"), "{few}");
        find("visual_cloze knobs-0-0-1, knobs-1-0-1 (2 settings): keeps 0.9% of its 2421 planned", "below the 50%");
        find("visual_cloze knobs-0-0-0: keeps 0.9% of its 2424 planned questions", "below the 50%");
        let mut many_left_out = row("recipeqa", Task::TextualCloze, 300, &[]);
        many_left_out.counts.procedures_skipped.insert("too_few_eligible_steps".into(), 64);
        let w = counts_warnings(&[many_left_out]);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("textual_cloze recipeqa: 64 of 100 procedures were left out (too_few_eligible_steps: 64;")
        );
    }

    #[test]
    fn every_skip_reason_has_a_name_that_maps_back() {
        for r in crate::counts::ALL_REASONS {
            assert_eq!(crate::counts::SkipReason::from_name(r.as_str()), Some(r));
        }
    }
}
