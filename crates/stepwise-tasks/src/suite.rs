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

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use stepwise_core::manifest::Manifest;
use stepwise_core::output::write_string_atomic;
use stepwise_core::split::{SplitFractions, assign_splits};
use stepwise_core::{IoResultExt, Procedure, Question, Result, Split, Task, TaskSet};

use crate::catalog::FeatureSources;
use crate::config::{GenerateConfig, ItemKind, Mode};
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
}

/// One (setting, task) row of the counts table.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteRow {
    pub setting: String,
    pub task: Task,
    #[serde(flatten)]
    pub counts: Counts,
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
        rows.extend(write_kind_tasksets(dir, &mut tg, &tasks, cfg, base)?);
    }
    rows.sort_by_key(|r| (cfg.tasks.iter().position(|t| *t == r.task), Mode::parse_label(&r.setting)));
    Ok(rows)
}

/// Write the task sets of `tasks` × `cfg.modes` from a built generator: plan everything, search the neighbours
/// of every planned query once, then build and write one (setting, task) at a time.
pub fn write_kind_tasksets(
    dir: &Path,
    tg: &mut TaskGenerator<'_>,
    tasks: &[Task],
    cfg: &SuiteConfig,
    base: &Manifest,
) -> Result<Vec<SuiteRow>> {
    let mut plans = Vec::new();
    for &task in tasks {
        for &mode in &cfg.modes {
            plans.push(tg.plan(task, mode)?);
        }
    }
    tg.prepare(&plans.iter().collect::<Vec<_>>())?;
    let (methods, fallbacks) = tg.neighbor_methods();
    let mut rows = Vec::new();
    // The previous task set, closed: its files are synced while the next one is generated.
    let mut pending: Option<(TasksetWriter, Manifest)> = None;
    for plan in &plans {
        // Streamed: each chunk of questions is written as soon as it is made.
        let sub = dir.join(plan.mode.label()).join(plan.task.as_str());
        let mut writer = TasksetWriter::create(&sub)?;
        let counts = tg.build_grouped(plan, |groups| writer.append_grouped(groups))?;
        let generated = Generated { task: plan.task, mode: plan.mode, questions: Vec::new(), counts };
        let mut manifest = taskset_manifest(base, &cfg.generate, &generated, Some(cfg.split_fractions));
        manifest.param("neighbor_search", &methods);
        manifest.count("neighbor_exact_fallbacks", fallbacks as u64);
        writer.close();
        if let Some((w, m)) = pending.replace((writer, manifest)) {
            w.finish(&m)?;
        }
        let Generated { counts, task, .. } = generated;
        tracing::info!("{}/{}: {} questions", plan.mode.label(), task, counts.questions);
        rows.push(SuiteRow { setting: plan.mode.label(), task, counts });
    }
    if let Some((w, m)) = pending {
        w.finish(&m)?;
    }
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
    write_string_atomic(&dir.join("counts.json"), &stepwise_core::json::to_pretty_sorted(&rows))?;
    write_string_atomic(&dir.join("counts.md"), &counts_markdown(rows))?;
    let mut m = base.clone();
    m.kind = "suite".to_string();
    m.seed = Some(cfg.generate.seed);
    m.param("generate", &cfg.generate);
    m.param("tasks", cfg.tasks.iter().map(|t| t.as_str()).collect::<Vec<_>>());
    m.param("settings", cfg.modes.iter().map(Mode::label).collect::<Vec<_>>());
    m.param("split_fractions", cfg.split_fractions);
    m.param("layout", "<setting>/<task>/{questions.json,questions.parquet,manifest.json}; counts.json; counts.md");
    m.count("questions", rows.iter().map(|r| r.counts.questions).sum());
    m.count("procedures", procedures.len() as u64);
    for s in Split::ALL {
        m.count(&format!("procedures.{s}"), splits.values().filter(|x| **x == s).count() as u64);
    }
    for r in rows {
        m.count(&format!("{}/{}.questions", r.setting, r.task), r.counts.questions);
    }
    m.write(dir)
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
    m.kind = "taskset".to_string();
    m.seed = Some(cfg.seed);
    m.param("task", g.task.as_str());
    m.param("setting", g.mode.label());
    if let Mode::Knobs(k) = g.mode {
        m.param("knobs", [k.k1, k.k2, k.k3]);
    }
    m.param("generate", cfg);
    if let Some(f) = split_fractions {
        m.param("split_fractions", f);
    }
    m.counts = g.counts.manifest_entries();
    m
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
pub fn counts_markdown(rows: &[SuiteRow]) -> String {
    let mut out = String::from("# Suite counts\n\n");
    out.push_str(
        "Questions per setting and task, their split by procedure, the procedures that gave at least one \
         question, and the question attempts skipped because a constraint could not be met (by reason). \
         Constraints are never relaxed.\n",
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
        out.push_str(&format!("\n## {task}\n\n| setting | questions | train | val | test | procedures used |"));
        for r in &proc_reasons {
            out.push_str(&format!(" procedures skipped: {r} |"));
        }
        for r in &reasons {
            out.push_str(&format!(" skipped: {r} |"));
        }
        out.push_str("\n|---|---:|---:|---:|---:|---:|");
        for _ in proc_reasons.iter().chain(&reasons) {
            out.push_str("---:|");
        }
        out.push('\n');
        for r in rs {
            let c = &r.counts;
            let split = |s: &str| c.questions_by_split.get(s).copied().unwrap_or(0);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |",
                r.setting,
                c.questions,
                split("train"),
                split("val"),
                split("test"),
                c.procedures_used
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
