//! The Meta-RecipeQA model study over a suite: every model trained on the `train` split of each (setting, task)
//! task set, selected on `val`, tested on `test`; the Hasty Student as the no-training row.
//!
//! Results: per cell (task, setting, model) the test accuracy with a 95% percentile-bootstrap interval resampling
//! procedures; per (task, model) RecipeQA mode next to the mean ± standard deviation over the eight knob
//! settings (Fig. 4); per (task, knob, model) the accuracy at each value of the knob, averaged over the four
//! combinations of the other two knobs (Fig. 5; the tables hold every combination).
//!
//! Finished cells are cached as JSON in a work folder (keyed by a fingerprint of the task set, the features'
//! identities and the configuration), so an interrupted study resumes where it stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::m3c::dataset::{Skipped, TaskInputs, task_inputs};
use crate::m3c::train::{self, TrainConfig};
use crate::m3c::{
    CandidateEmbedding, FeatureSources, HtrnConfig, InputScaling, InputSpec, M3cModel, ModelConfig, QuestionInput,
    ScorerKind,
};
use serde::{Deserialize, Serialize};
use stepwise_core::output::write_string_atomic;
use stepwise_core::split::ProcedureFolds;
use stepwise_core::{Task, TaskSet};

use crate::hasty;
use crate::question_vectors::ItemResolver;
use stepwise_score::bootstrap::{BootstrapConfig, Estimate, Unit, mean_estimate};

/// The settings of a suite, in table order.
pub const SETTINGS: [&str; 9] = [
    "recipeqa",
    "knobs-0-0-0",
    "knobs-0-0-1",
    "knobs-0-1-0",
    "knobs-0-1-1",
    "knobs-1-0-0",
    "knobs-1-0-1",
    "knobs-1-1-0",
    "knobs-1-1-1",
];

/// The name of the no-training row.
pub const HASTY: &str = "Hasty Student";

/// Model sizes and training of a study.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StudyConfig {
    pub models: Vec<ScorerKind>,
    pub tasks: Vec<Task>,
    pub hidden: usize,
    pub attention: usize,
    pub htrn: HtrnConfig,
    /// Use token-level context features when given.
    pub tokens: bool,
    /// How input rows are rescaled, fitted on each training fold ([`InputScaling`]).
    #[serde(default)]
    pub inputs: InputScaling,
    /// Dropout rate while training ([`crate::m3c::ModelConfig::dropout`]).
    #[serde(default)]
    pub dropout: f64,
    /// What the Impatient Reader compares its joint embedding with ([`CandidateEmbedding`]).
    #[serde(default, skip_serializing_if = "CandidateEmbedding::is_default")]
    pub candidate_embedding: CandidateEmbedding,
    pub train: TrainConfig,
    pub bootstrap: BootstrapConfig,
    /// K-fold cross-validation by procedure instead of the suite's split (small datasets): every question is
    /// tested once, by a model that never saw its procedure.
    #[serde(default)]
    pub cv: Option<usize>,
    /// Every model is trained with this many seeds (`train.seed`, `train.seed + 1`, ...); the splits or folds stay
    /// those of `train.seed`.
    #[serde(default = "one_seed")]
    pub seeds: usize,
    /// Train every model on at most this many questions of each training split or fold (a learning curve's
    /// point): whole procedures in a seeded order, each size's questions a prefix of the next size's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_train_questions: Option<usize>,
}

fn one_seed() -> usize {
    1
}

impl StudyConfig {
    /// The training seeds, in order.
    pub fn training_seeds(&self) -> Vec<u64> {
        (0..self.seeds.max(1) as u64).map(|k| self.train.seed.wrapping_add(k)).collect()
    }
}

/// The (setting, task) task set of a suite, when it exists ([`stepwise_tasks::suite::taskset_dir`]: visual
/// ordering's knob-3 = 1 settings share the knob-3 = 0 questions).
pub fn taskset_dir(suite: &Path, setting: &str, task: Task) -> Option<PathBuf> {
    let mode = stepwise_tasks::config::Mode::parse_label(setting)?;
    let dir = stepwise_tasks::suite::taskset_dir(suite, mode, task);
    dir.join(stepwise_core::taskset::QUESTIONS_JSON).exists().then_some(dir)
}

/// Whether a study's input is one task set (its own questions.json) rather than a suite.
pub fn is_one_taskset(input: &Path) -> bool {
    input.join(stepwise_core::taskset::QUESTIONS_JSON).is_file()
}

/// The task sets a study of `task` reads from `input`, each with its setting: a suite's, or — when `input` is one
/// task set ([`is_one_taskset`]) — that set, under the setting its manifest names
/// ([`stepwise_tasks::suite::taskset_setting`]), else as the RecipeQA-mode setting (RecipeQA's own questions,
/// ingested).
pub fn study_tasksets(input: &Path, task: Task) -> stepwise_core::Result<Vec<(&'static str, PathBuf)>> {
    if is_one_taskset(input) {
        let setting = match stepwise_tasks::suite::taskset_setting(input)? {
            Some(mode) => SETTINGS.iter().copied().find(|s| *s == mode.label()).ok_or_else(|| {
                stepwise_core::Error::bad_input(format!(
                    "{}: setting {} is not one a study reports",
                    input.display(),
                    mode.label()
                ))
            })?,
            None => SETTINGS[0],
        };
        return Ok(vec![(setting, input.to_path_buf())]);
    }
    Ok(SETTINGS.iter().filter_map(|&setting| taskset_dir(input, setting, task).map(|dir| (setting, dir))).collect())
}

/// Refuses a study that could measure nothing: without `--cv`, some studied task needs a task set with both
/// train and test questions of it (a RecipeQA file's questions are all in its val split).
pub fn check_splits(input: &Path, sets: &[&TaskSet], tasks: &[Task], cv: Option<usize>) -> stepwise_core::Result<()> {
    if cv.is_some() {
        return Ok(());
    }
    let has =
        |set: &TaskSet, task: Task, split: &str| set.of_task(task.as_str()).any(|q| q.split.as_deref() == Some(split));
    if tasks.iter().any(|&t| sets.iter().any(|s| has(s, t, "train") && has(s, t, "test"))) {
        return Ok(());
    }
    Err(stepwise_core::Error::bad_input(format!(
        "{}: no task set has both train and test questions of the studied tasks: give --cv K to cross-validate by \
         procedure",
        input.display()
    )))
}

/// One cell of the study.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    pub task: Task,
    pub setting: String,
    pub model: String,
    /// The suite's train split; with `max_train_questions`, what the largest training fold kept.
    pub train_questions: usize,
    pub val_questions: usize,
    pub test_questions: usize,
    /// With several seeds the mean over seeds, its interval over procedures of each question's mean over seeds.
    pub accuracy: Option<EstimateRecord>,
    /// Each training seed's test accuracy, in the order of [`StudyConfig::training_seeds`] (models only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seed_accuracies: Vec<f64>,
    /// Training: the epoch kept, epochs run, parameters (models only; over folds and seeds the median best epoch
    /// and the most epochs run).
    pub best_epoch: Option<usize>,
    pub epochs_run: Option<usize>,
    pub parameters: Option<usize>,
    pub val_accuracy: Option<f64>,
    /// Questions left out for missing vectors.
    pub skipped: Skipped,
    /// Test predictions `(qid, choice)`, one list per training seed (written as JSONL by the caller).
    pub predictions: Vec<Vec<(String, usize)>>,
    /// Each test question's procedure and its correctness averaged over seeds: what the summary resamples
    /// (kept in the work folder's cache, not in `study.json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<(String, f64)>,
    // No wall time here: study.json is byte-identical across runs; the time per cell goes to the log (-v).
}

/// A serialisable [`Estimate`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct EstimateRecord {
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl From<Estimate> for EstimateRecord {
    fn from(e: Estimate) -> Self {
        EstimateRecord { value: e.value, low: e.ci.map(|c| c.low), high: e.ci.map(|c| c.high) }
    }
}

/// Fig. 4: RecipeQA mode next to the knob settings' mean ± std, and the drop between them with its interval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SummaryRow {
    pub task: Task,
    pub model: String,
    pub recipeqa: Option<f64>,
    /// 95% interval of `recipeqa` over procedures.
    #[serde(default)]
    pub recipeqa_ci: Option<[f64; 2]>,
    pub knob_mean: Option<f64>,
    /// 95% interval of `knob_mean` over procedures (all settings resampled together).
    #[serde(default)]
    pub knob_mean_ci: Option<[f64; 2]>,
    /// Standard deviation over the knob settings.
    pub knob_std: Option<f64>,
    pub knob_settings: usize,
    /// RecipeQA mode − the knob settings' mean, with a bootstrap interval over procedures that resamples every
    /// setting's questions of a procedure together.
    #[serde(default)]
    pub difference: Option<EstimateRecord>,
    /// "within noise" or "outside noise": whether the difference's interval contains 0.
    #[serde(default)]
    pub verdict: Option<String>,
    /// Standard deviation of the difference over training seeds (models trained with several seeds).
    #[serde(default)]
    pub difference_sd: Option<f64>,
}

/// Fig. 5: accuracy at each value of one knob, averaged over the four combinations of the other two.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KnobEffect {
    pub task: Task,
    pub knob: usize,
    pub model: String,
    /// Mean accuracy at knob value 0 and 1 (None when a setting is missing).
    pub at: [Option<f64>; 2],
}

/// A trained model against the Hasty Student in one cell, on the test questions both answered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VersusHasty {
    pub task: Task,
    pub setting: String,
    pub model: String,
    /// Test questions both answered (the pairs).
    pub questions: usize,
    /// Model − Hasty Student accuracy (the model's averaged over seeds), with a 95% interval from a paired
    /// bootstrap over procedures (a resample takes a procedure's questions for both).
    pub difference: EstimateRecord,
    /// "within noise" or "outside noise": whether the interval contains 0.
    pub verdict: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StudyReport {
    pub config: StudyConfig,
    pub cells: Vec<Cell>,
    pub summary: Vec<SummaryRow>,
    pub knob_effects: Vec<KnobEffect>,
    /// Every trained model's cell against the Hasty Student's in the same task and setting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versus_hasty: Vec<VersusHasty>,
}

/// Progress events.
pub enum StudyEvent<'a> {
    CellStarted { task: Task, setting: &'a str, model: &'a str, index: usize, total: usize },
    Epoch { epoch: usize, batch: usize, batches: usize, loss: f64, best_val: Option<f64> },
    CellCached { task: Task, setting: &'a str, model: &'a str },
}

/// What a study reads.
pub struct StudyInputs<'a> {
    pub suite: &'a Path,
    pub sources: FeatureSources<'a>,
    /// For the Hasty Student.
    pub resolver: &'a dyn ItemResolver,
    /// Identities of the features (part of the cache key).
    pub features_key: String,
    /// Cache of finished cells (None: no caching).
    pub work_dir: Option<&'a Path>,
}

/// Run the study. Cells whose task set is absent are skipped; a task set whose questions all lack vectors gives
/// cells without accuracy (and its skipped examples).
pub fn run_study(
    inp: &StudyInputs<'_>,
    cfg: &StudyConfig,
    on_event: &mut dyn FnMut(StudyEvent<'_>),
) -> stepwise_core::Result<StudyReport> {
    let mut plan: Vec<(Task, &str, PathBuf)> = Vec::new();
    for &task in &cfg.tasks {
        plan.extend(study_tasksets(inp.suite, task)?.into_iter().map(|(setting, dir)| (task, setting, dir)));
    }
    if plan.is_empty() {
        return Err(stepwise_core::Error::bad_input(format!(
            "{}: no task set of the requested tasks in this suite (expected <setting>/<task>/questions.json, as \
             `stepwise sweep` writes)",
            inp.suite.display()
        )));
    }
    let total = plan.len() * (cfg.models.len() + 1);
    let mut cells = Vec::new();
    let mut index = 0;
    for (task, setting, dir) in &plan {
        let set = TaskSet::load(dir)?;
        // One task set holds several tasks, maybe not this one (a suite's set holds its own task).
        if set.of_task(task.as_str()).next().is_none() {
            continue;
        }
        let (set_hash, _) = stepwise_core::hash::hash_file(&dir.join(stepwise_core::taskset::QUESTIONS_JSON))?;
        // Hasty Student on the test split.
        index += 1;
        on_event(StudyEvent::CellStarted { task: *task, setting, model: HASTY, index, total });
        cells.push(hasty_cell(&set, *task, setting, inp.resolver, &cfg.bootstrap, cfg.cv.is_some()));

        let spec = InputSpec::for_task(*task, &inp.sources, cfg.tokens);
        let dims = spec.dims(&inp.sources);
        let inputs = task_inputs(&set, *task, &spec, &inp.sources);
        for &model in &cfg.models {
            index += 1;
            let name = model.display();
            let key = cell_key(&set_hash, &inp.features_key, cfg, model, *task, setting);
            let cache =
                inp.work_dir.map(|w| w.join(format!("{}__{setting}__{}__{key}.json", task.as_str(), model.as_str())));
            if let Some(c) = cache.as_ref().filter(|c| c.exists())
                && let Ok(text) = std::fs::read_to_string(c)
                && let Ok(cell) = serde_json::from_str::<Cell>(&text)
            {
                on_event(StudyEvent::CellCached { task: *task, setting, model: name });
                cells.push(cell);
                continue;
            }
            on_event(StudyEvent::CellStarted { task: *task, setting, model: name, index, total });
            let started = std::time::Instant::now();
            let mut cell = Cell {
                task: *task,
                setting: setting.to_string(),
                model: name.to_string(),
                train_questions: inputs.split("train").len(),
                val_questions: inputs.split("val").len(),
                test_questions: inputs.split("test").len(),
                accuracy: None,
                best_epoch: None,
                epochs_run: None,
                parameters: None,
                val_accuracy: None,
                skipped: inputs.skipped.clone(),
                predictions: Vec::new(),
                outcomes: Vec::new(),
                seed_accuracies: Vec::new(),
            };
            let folds = plan_folds(&inputs, cfg);
            if cfg.max_train_questions.is_some() {
                cell.train_questions = folds.iter().map(|f| f.train.len()).max().unwrap_or(0);
            }
            if let Ok((dc, dq)) = dims
                && folds.iter().all(|f| !f.train.is_empty())
                && folds.iter().any(|f| !f.test.is_empty())
            {
                let mut mc = ModelConfig::new(model, spec, dc, dq);
                mc.hidden = cfg.hidden;
                mc.attention = cfg.attention;
                mc.htrn = cfg.htrn;
                mc.dropout = cfg.dropout;
                let mc = mc.with_candidate_embedding(cfg.candidate_embedding);
                let tested: Vec<&QuestionInput> = folds.iter().flat_map(|f| f.test_refs.iter().copied()).collect();
                let (mut best, mut epochs, mut val_acc) = (Vec::new(), Vec::new(), Vec::new());
                let mut correct = vec![0.0; tested.len()];
                for seed in cfg.training_seeds() {
                    let tc = TrainConfig { seed, ..cfg.train.clone() };
                    let mut pred: Vec<usize> = Vec::with_capacity(tested.len());
                    for fold in &folds {
                        let fold_config = mc.clone().scaled_on(cfg.inputs, &fold.train);
                        let m = M3cModel::new(fold_config, seed)
                            .map_err(|e| stepwise_core::Error::runtime(e.to_string()))?;
                        let report = train::train(
                            &m,
                            &fold.train,
                            &fold.val,
                            &tc,
                            None,
                            &mut |epoch, batch, batches, loss, best_val| {
                                on_event(StudyEvent::Epoch { epoch, batch, batches, loss, best_val })
                            },
                        )?
                        .ok_or_else(|| stepwise_core::Error::runtime("training stopped before its end"))?;
                        let p = train::predict(&m, &fold.test, tc.batch_size)?;
                        pred.extend(p.into_iter().map(|(c, _)| c));
                        best.push(report.best_epoch);
                        epochs.push(report.epochs_run);
                        val_acc.extend(report.best_val_accuracy);
                        cell.parameters = Some(report.parameters);
                    }
                    let hits: Vec<f64> = pred.iter().zip(&tested).map(|(p, q)| f64::from(*p == q.answer)).collect();
                    correct.iter_mut().zip(&hits).for_each(|(c, h)| *c += h);
                    cell.seed_accuracies.push(stepwise_score::bootstrap::mean(&hits));
                    cell.predictions.push(pred.iter().zip(&tested).map(|(p, q)| (q.qid.clone(), *p)).collect());
                }
                let runs = cell.seed_accuracies.len() as f64;
                correct.iter_mut().for_each(|c| *c /= runs);
                let clusters = cluster_ids(tested.iter().map(|q| q.recipe_id.as_str()));
                let key = format!("study/{}/{setting}/{}", task.as_str(), model.as_str());
                cell.accuracy = Some(mean_estimate(&correct, Unit::Clusters(&clusters), &cfg.bootstrap, &key).into());
                best.sort_unstable();
                cell.best_epoch = best.get(best.len() / 2).copied();
                cell.epochs_run = epochs.into_iter().max();
                cell.val_accuracy = (!val_acc.is_empty()).then(|| val_acc.iter().sum::<f64>() / val_acc.len() as f64);
                cell.test_questions = tested.len();
                cell.outcomes = tested.iter().zip(&correct).map(|(q, c)| (q.recipe_id.clone(), *c)).collect();
            }
            tracing::info!(
                task = task.as_str(),
                setting,
                model = name,
                seconds = started.elapsed().as_secs_f64(),
                "cell done"
            );
            if let Some(c) = &cache {
                write_string_atomic(
                    c,
                    &serde_json::to_string(&cell).map_err(|e| stepwise_core::Error::runtime(e.to_string()))?,
                )?;
            }
            cells.push(cell);
        }
    }
    let summary = summarize(&cells, cfg);
    let knob_effects = knob_effects(&cells, cfg);
    let versus_hasty = versus_hasty(&cells, &cfg.bootstrap);
    Ok(StudyReport { config: cfg.clone(), cells, summary, knob_effects, versus_hasty })
}

/// Each trained model's cell against the Hasty Student's of the same task and setting, paired by question
/// ([`VersusHasty`]); cells without per-question outcomes (no accuracy) are left out.
fn versus_hasty(cells: &[Cell], bs: &BootstrapConfig) -> Vec<VersusHasty> {
    // A cell's outcomes are in the order of its first seed's predictions.
    let by_qid = |c: &Cell| -> BTreeMap<String, (String, f64)> {
        let qids = c.predictions.first().map(|p| p.iter().map(|(q, _)| q.clone())).into_iter().flatten();
        qids.zip(c.outcomes.iter().cloned()).collect()
    };
    let mut out = Vec::new();
    for hasty in cells.iter().filter(|c| c.model == HASTY && !c.outcomes.is_empty()) {
        let base = by_qid(hasty);
        for c in cells.iter().filter(|c| {
            c.model != HASTY && c.task == hasty.task && c.setting == hasty.setting && !c.outcomes.is_empty()
        }) {
            let model = by_qid(c);
            let pairs: Vec<(&str, f64)> = model
                .iter()
                .filter_map(|(q, (recipe, x))| base.get(q).map(|(_, h)| (recipe.as_str(), x - h)))
                .collect();
            if pairs.is_empty() {
                continue;
            }
            let diffs: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            let clusters = cluster_ids(pairs.iter().map(|p| p.0));
            let key = format!("study/{}/{}/{}/versus-hasty", c.task.as_str(), c.setting, c.model);
            // One procedure's questions say nothing of how another's would go: no interval.
            let e = mean_estimate(&diffs, Unit::Clusters(&clusters), bs, &key);
            out.push(VersusHasty {
                task: c.task,
                setting: c.setting.clone(),
                model: c.model.clone(),
                questions: pairs.len(),
                verdict: e.ci.map(|ci| stepwise_score::bootstrap::noise_verdict(ci.low, ci.high).to_string()),
                difference: e.into(),
            });
        }
    }
    out
}

/// One training run of a cell: its train, val and test questions.
struct Fold<'a> {
    train: Vec<QuestionInput>,
    val: Vec<QuestionInput>,
    test: Vec<QuestionInput>,
    test_refs: Vec<&'a QuestionInput>,
}

/// The split (one fold: `train`/`val`/`test`), or with `cv = K` K folds by procedure ([`ProcedureFolds`]: fold k is
/// tested, fold k+1 selects the epoch, the rest trains).
fn plan_folds<'a>(inputs: &'a TaskInputs, cfg: &StudyConfig) -> Vec<Fold<'a>> {
    let limit = |train: Vec<QuestionInput>| match cfg.max_train_questions {
        Some(n) => first_questions(train, n, cfg.train.seed),
        None => train,
    };
    let Some(k) = cfg.cv.filter(|&k| k >= 3) else {
        let test = inputs.split("test");
        return vec![Fold {
            train: limit(inputs.split("train").to_vec()),
            val: inputs.split("val").to_vec(),
            test: test.to_vec(),
            test_refs: test.iter().collect(),
        }];
    };
    let all: Vec<&QuestionInput> = inputs.by_split.values().flatten().collect();
    let folds = ProcedureFolds::new(all.iter().map(|q| q.recipe_id.as_str()), k, cfg.train.seed)
        .expect("k >= 3 was checked above");
    (0..k)
        .map(|f| {
            let [train, val, test] = folds.indices(&all, f, |q| q.recipe_id.as_str());
            let pick = |ix: &[usize]| ix.iter().map(|&i| all[i]).collect::<Vec<_>>();
            let owned = |ix: &[usize]| pick(ix).into_iter().cloned().collect::<Vec<_>>();
            Fold { train: limit(owned(&train)), val: owned(&val), test: owned(&test), test_refs: pick(&test) }
        })
        .collect()
}

/// At most `n` of `questions`: procedures taken whole in an order seeded by `seed` (the last one taken may be
/// cut), the kept questions in their given order. The procedure order is the same for every `n`, so a smaller
/// training set is part of every larger one, and an `n` at or above the count keeps all of them as they were.
pub fn first_questions(questions: Vec<QuestionInput>, n: usize, seed: u64) -> Vec<QuestionInput> {
    if questions.len() <= n {
        return questions;
    }
    let rank = |recipe: &str| {
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        h.update(b"study/max-train-questions/");
        h.update(recipe.as_bytes());
        *h.finalize().as_bytes()
    };
    let mut order: Vec<([u8; 32], &str, usize)> =
        questions.iter().enumerate().map(|(i, q)| (rank(&q.recipe_id), q.recipe_id.as_str(), i)).collect();
    order.sort_unstable();
    let mut keep = vec![false; questions.len()];
    for &(_, _, i) in &order[..n] {
        keep[i] = true;
    }
    questions.into_iter().zip(keep).filter_map(|(q, k)| k.then_some(q)).collect()
}

fn cell_key(set_hash: &str, features: &str, cfg: &StudyConfig, model: ScorerKind, task: Task, setting: &str) -> String {
    let mut h = blake3::Hasher::new();
    for part in
        [set_hash, features, &serde_json::to_string(cfg).unwrap_or_default(), model.as_str(), task.as_str(), setting]
    {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex()[..16].to_string()
}

fn cluster_ids<'a>(recipes: impl Iterator<Item = &'a str>) -> Vec<usize> {
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    recipes
        .map(|r| {
            let n = ids.len();
            *ids.entry(r).or_insert(n)
        })
        .collect()
}

fn hasty_cell(
    set: &TaskSet,
    task: Task,
    setting: &str,
    resolver: &dyn ItemResolver,
    bs: &BootstrapConfig,
    all_questions: bool,
) -> Cell {
    let mut skipped = Skipped::default();
    let (mut correct, mut recipes, mut predictions) = (Vec::new(), Vec::new(), Vec::new());
    let count = |split: &str| set.of_task(task.as_str()).filter(|q| q.split.as_deref() == Some(split)).count();
    // With cross-validation every question is tested; else the test split.
    for q in set.of_task(task.as_str()).filter(|q| all_questions || q.split.as_deref() == Some("test")) {
        match hasty::choose(q, task, resolver) {
            Ok(c) => {
                correct.push(f64::from(c == q.answer));
                recipes.push(q.recipe_id.as_str());
                predictions.push((q.qid.clone(), c));
            }
            Err(e) => {
                skipped.count += 1;
                if skipped.examples.len() < 5 {
                    skipped.examples.push(e);
                }
            }
        }
    }
    let clusters = cluster_ids(recipes.iter().copied());
    let accuracy = (!correct.is_empty()).then(|| {
        mean_estimate(&correct, Unit::Clusters(&clusters), bs, &format!("study/{}/{setting}/hasty", task.as_str()))
            .into()
    });
    Cell {
        task,
        setting: setting.to_string(),
        model: HASTY.to_string(),
        train_questions: count("train"),
        val_questions: count("val"),
        test_questions: correct.len(),
        accuracy,
        best_epoch: None,
        epochs_run: None,
        parameters: None,
        val_accuracy: None,
        skipped,
        predictions: vec![predictions],
        outcomes: recipes.iter().zip(&correct).map(|(r, c)| (r.to_string(), *c)).collect(),
        seed_accuracies: Vec::new(),
    }
}

fn model_names(cfg: &StudyConfig) -> Vec<String> {
    std::iter::once(HASTY.to_string()).chain(cfg.models.iter().map(|m| m.display().to_string())).collect()
}

fn acc(cells: &[Cell], task: Task, setting: &str, model: &str) -> Option<f64> {
    cells
        .iter()
        .find(|c| c.task == task && c.setting == setting && c.model == model)
        .and_then(|c| c.accuracy.map(|a| a.value))
}

fn summarize(cells: &[Cell], cfg: &StudyConfig) -> Vec<SummaryRow> {
    let mut out = Vec::new();
    for &task in &cfg.tasks {
        for model in model_names(cfg) {
            let knobs: Vec<f64> = SETTINGS[1..].iter().filter_map(|s| acc(cells, task, s, &model)).collect();
            let recipeqa = acc(cells, task, "recipeqa", &model);
            if recipeqa.is_none() && knobs.is_empty() {
                continue;
            }
            let mean = (!knobs.is_empty()).then(|| stepwise_score::bootstrap::mean(&knobs));
            let std = stepwise_score::bootstrap::sample_sd(&knobs);
            let of = |setting: &str| cells.iter().find(|c| c.task == task && c.setting == setting && c.model == model);
            let [recipeqa_ci, knob_mean_ci, difference_ci] = drop_intervals(
                of("recipeqa"),
                &SETTINGS[1..].iter().filter_map(|s| of(s)).collect::<Vec<_>>(),
                &cfg.bootstrap,
                &format!("study/{}/summary/{model}", task.as_str()),
            );
            let difference = recipeqa.zip(mean).map(|(r, m)| EstimateRecord {
                value: r - m,
                low: difference_ci.map(|c| c[0]),
                high: difference_ci.map(|c| c[1]),
            });
            out.push(SummaryRow {
                task,
                model: model.clone(),
                recipeqa,
                recipeqa_ci,
                knob_mean: mean,
                knob_mean_ci,
                knob_std: std,
                knob_settings: knobs.len(),
                verdict: difference_ci.map(|[lo, hi]| stepwise_score::bootstrap::noise_verdict(lo, hi).to_string()),
                difference_sd: difference.and_then(|_| difference_sd(of("recipeqa"), &SETTINGS[1..], &of)),
                difference,
            });
        }
    }
    out
}

/// 95% intervals of RecipeQA mode's accuracy, the knob settings' mean accuracy and their difference, from one
/// bootstrap over procedures: a resample draws procedures and takes every setting's test questions of each, so
/// the settings' shared procedures move together. A resample in which a setting has no question is dropped.
fn drop_intervals(recipeqa: Option<&Cell>, knobs: &[&Cell], bs: &BootstrapConfig, key: &str) -> [Option<[f64; 2]>; 3] {
    let Some(recipeqa) = recipeqa.filter(|c| !c.outcomes.is_empty()) else {
        return [None; 3];
    };
    let knobs: Vec<&Cell> = knobs.iter().copied().filter(|c| !c.outcomes.is_empty()).collect();
    // Rows: (setting index, procedure, correctness); setting 0 is RecipeQA mode.
    let rows: Vec<(usize, &str, f64)> = std::iter::once(recipeqa)
        .chain(knobs.iter().copied())
        .enumerate()
        .flat_map(|(s, c)| c.outcomes.iter().map(move |(r, x)| (s, r.as_str(), *x)))
        .collect();
    let clusters = cluster_ids(rows.iter().map(|r| r.1));
    let settings = knobs.len() + 1;
    let cis =
        stepwise_score::bootstrap::percentile_intervals(rows.len(), Unit::Clusters(&clusters), bs, key, 3, |w, out| {
            let (mut sum, mut n) = (vec![0.0; settings], vec![0u64; settings]);
            for (&(s, _, x), &w) in rows.iter().zip(w) {
                sum[s] += f64::from(w) * x;
                n[s] += u64::from(w);
            }
            let means: Vec<f64> =
                sum.iter().zip(&n).map(|(s, &n)| if n == 0 { f64::NAN } else { s / n as f64 }).collect();
            let knob_mean = if settings > 1 { stepwise_score::bootstrap::mean(&means[1..]) } else { f64::NAN };
            out.copy_from_slice(&[means[0], knob_mean, means[0] - knob_mean]);
        });
    let pair = |i: usize| cis[i].map(|c| [c.low, c.high]);
    [pair(0), pair(1), pair(2)]
}

/// The standard deviation over training seeds of RecipeQA mode − the knob settings' mean, each seed's
/// difference from its own accuracies (None with one seed or the Hasty Student).
fn difference_sd<'c>(
    recipeqa: Option<&Cell>,
    knob_settings: &[&str],
    of: &dyn Fn(&str) -> Option<&'c Cell>,
) -> Option<f64> {
    let r = &recipeqa?.seed_accuracies;
    let knobs: Vec<&Vec<f64>> = knob_settings.iter().filter_map(|s| of(s)).map(|c| &c.seed_accuracies).collect();
    if r.len() < 2 || knobs.is_empty() || knobs.iter().any(|k| k.len() != r.len()) {
        return None;
    }
    let d: Vec<f64> = (0..r.len())
        .map(|k| r[k] - stepwise_score::bootstrap::mean(&knobs.iter().map(|v| v[k]).collect::<Vec<_>>()))
        .collect();
    stepwise_score::bootstrap::sample_sd(&d)
}

fn knob_effects(cells: &[Cell], cfg: &StudyConfig) -> Vec<KnobEffect> {
    let mut out = Vec::new();
    for &task in &cfg.tasks {
        for knob in 0..3 {
            for model in model_names(cfg) {
                let mut at = [None, None];
                for (value, slot) in at.iter_mut().enumerate() {
                    let vals: Vec<f64> = SETTINGS[1..]
                        .iter()
                        .filter(|s| s.as_bytes()[6 + 2 * knob] == b'0' + value as u8)
                        .filter_map(|s| acc(cells, task, s, &model))
                        .collect();
                    if vals.len() == 4 {
                        *slot = Some(vals.iter().sum::<f64>() / 4.0);
                    }
                }
                if at.iter().any(Option::is_some) {
                    out.push(KnobEffect { task, knob: knob + 1, model, at });
                }
            }
        }
    }
    out
}

/// How the models were trained beyond their sizes (inputs, dropout, the Impatient Reader's candidate embedding,
/// a cut training set), departures from the papers named.
fn training_setup(cfg: &StudyConfig) -> String {
    let limit = cfg.max_train_questions.map_or(String::new(), |n| {
        format!(", training sets cut to at most {n} questions (whole procedures in a seeded order)")
    });
    let inputs = match cfg.inputs {
        InputScaling::Raw => "inputs raw (the papers')".to_string(),
        InputScaling::Centered => "inputs centred on the training rows (a departure from the papers)".to_string(),
        InputScaling::Standardized => {
            "inputs standardised on the training rows (a departure from the papers)".to_string()
        }
    };
    let dropout = if cfg.dropout > 0.0 {
        format!("dropout {} (a departure: the papers state none)", cfg.dropout)
    } else {
        "no dropout".to_string()
    };
    // Said only when it is not the default, so that the line of a study without the option is unchanged.
    let candidate = match (cfg.models.contains(&ScorerKind::Impatient), cfg.candidate_embedding) {
        (true, CandidateEmbedding::Item) => {
            ", the Impatient Reader compares g with the candidate's own item (RecipeQA §4.2's baseline; orderings \
             keep the query summary)"
        }
        _ => "",
    };
    format!("{inputs}, {dropout}{candidate}{limit}")
}

/// The study as Markdown: per task the per-setting table with intervals, the Fig. 4 summary and the knob effects.
pub fn markdown(r: &StudyReport) -> String {
    use std::fmt::Write;
    let pct = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{:.1}", 100.0 * v));
    let est = |e: Option<EstimateRecord>| match e {
        Some(EstimateRecord { value, low: Some(l), high: Some(h) }) => {
            format!("{:.1} [{:.1}, {:.1}]", 100.0 * value, 100.0 * l, 100.0 * h)
        }
        Some(e) => format!("{:.1}", 100.0 * e.value),
        None => "–".to_string(),
    };
    let ci = |c: Option<[f64; 2]>| c.map_or(String::new(), |[l, h]| format!(" [{:.1}, {:.1}]", 100.0 * l, 100.0 * h));
    let signed_est = |d: EstimateRecord| stepwise_score::markdown::signed_percent_interval(d.value, d.low.zip(d.high));
    let models = model_names(&r.config);
    let seeds = r.config.training_seeds();
    let mut s = String::new();
    let _ = writeln!(s, "# Model study\n");
    let _ = writeln!(
        s,
        "Test accuracy (%) with 95% bootstrap intervals over procedures; {} (Adam, lr {}, batch {}, at most {} \
         epochs, patience {}); LSTM hidden {}, HTRN {} layers × {} wide × {} heads; {}; {}. Knob settings are \
         `knobs-<k1>-<k2>-<k3>`.\n",
        match r.config.cv {
            Some(k) => format!(
                "{k}-fold cross-validation by procedure (each fold tested once, the next fold selects the epoch, \
                 the rest trains; test questions = all questions)"
            ),
            None => "models trained on `train`, epoch selected on `val`, tested on `test`".to_string(),
        },
        r.config.train.learning_rate,
        r.config.train.batch_size,
        r.config.train.max_epochs,
        r.config.train.patience,
        r.config.hidden,
        r.config.htrn.layers,
        r.config.htrn.dim,
        r.config.htrn.heads,
        training_setup(&r.config),
        if seeds.len() > 1 {
            format!(
                "every model trained with {} seeds ({}): a value is the mean over seeds, its interval resamples \
                 procedures of each question's mean over seeds, and (sd …) is the standard deviation over seeds",
                seeds.len(),
                seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )
        } else {
            format!("one training seed ({})", r.config.train.seed)
        }
    );
    for &task in &r.config.tasks {
        let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.task == task).collect();
        if cells.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {task}\n");
        let _ = write!(s, "| setting | test questions |");
        for m in &models {
            let _ = write!(s, " {m} |");
        }
        let _ = write!(s, "\n|---|---:|");
        for _ in &models {
            let _ = write!(s, "---|");
        }
        s.push('\n');
        for setting in SETTINGS {
            let row: Vec<&&Cell> = cells.iter().filter(|c| c.setting == setting).collect();
            if row.is_empty() {
                continue;
            }
            let n = row.iter().map(|c| c.test_questions).max().unwrap_or(0);
            let _ = write!(s, "| {setting} | {n} |");
            for m in &models {
                let cell = row.iter().find(|c| &c.model == m);
                let sd = cell
                    .and_then(|c| stepwise_score::bootstrap::sample_sd(&c.seed_accuracies))
                    .map_or(String::new(), |sd| format!(" (sd {:.1})", 100.0 * sd));
                let _ = write!(s, " {}{sd} |", est(cell.and_then(|c| c.accuracy)));
            }
            s.push('\n');
        }
        let versus: Vec<&VersusHasty> = r.versus_hasty.iter().filter(|v| v.task == task).collect();
        if !versus.is_empty() {
            let trained = &models[1..];
            let _ = write!(
                s,
                "\nEach model − the Hasty Student on the same test questions (points; 95% interval from a paired \
                 bootstrap over procedures; within noise when it contains 0; the pairs in parentheses):\n\n| setting |"
            );
            for m in trained {
                let _ = write!(s, " {m} |");
            }
            let _ = write!(s, "\n|---|");
            for _ in trained {
                let _ = write!(s, "---|");
            }
            s.push('\n');
            for setting in SETTINGS {
                if !versus.iter().any(|v| v.setting == setting) {
                    continue;
                }
                let _ = write!(s, "| {setting} |");
                for m in trained {
                    let text =
                        versus.iter().find(|v| v.setting == setting && &v.model == m).map_or("–".into(), |v| {
                            let verdict = v.verdict.as_deref().unwrap_or("no interval");
                            format!("{} {verdict} ({})", signed_est(v.difference), v.questions)
                        });
                    let _ = write!(s, " {text} |");
                }
                s.push('\n');
            }
        }
        let _ = writeln!(
            s,
            "\n| model | RecipeQA mode | knob settings: mean | std over settings (n) | RecipeQA − knobs | sd over \
             seeds | |\n|---|---:|---:|---:|---:|---:|---|"
        );
        for row in r.summary.iter().filter(|x| x.task == task) {
            let difference = row.difference.map_or("–".into(), signed_est);
            let _ = writeln!(
                s,
                "| {} | {}{} | {}{} | {} ({}) | {difference} | {} | {} |",
                row.model,
                pct(row.recipeqa),
                ci(row.recipeqa_ci),
                pct(row.knob_mean),
                ci(row.knob_mean_ci),
                pct(row.knob_std),
                row.knob_settings,
                pct(row.difference_sd),
                row.verdict.as_deref().unwrap_or("no interval"),
            );
        }
        let _ = writeln!(
            s,
            "\nRecipeQA − knobs: the drop from RecipeQA mode to the knob settings' mean, with a 95% interval from \
             one bootstrap over procedures (each resample takes a procedure's questions in every setting); within \
             noise when that interval contains 0."
        );
        let effects: Vec<&KnobEffect> = r.knob_effects.iter().filter(|e| e.task == task).collect();
        if !effects.is_empty() {
            let _ = writeln!(
                s,
                "\nKnob effects (accuracy at each value, mean over the four combinations of the other two knobs):\n\n\
                 | knob | model | value 0 | value 1 |\n|---|---|---:|---:|"
            );
            for e in effects {
                let _ = writeln!(s, "| {} | {} | {} | {} |", e.knob, e.model, pct(e.at[0]), pct(e.at[1]));
            }
        }
        let skipped: usize = cells.iter().filter(|c| c.model == HASTY).map(|c| c.skipped.count).sum();
        if skipped > 0 {
            let _ = writeln!(s, "\n{skipped} test questions had items without vectors and were left out.");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item_features::ItemMatrix;

    fn q(i: usize, recipe: usize) -> QuestionInput {
        let m = ItemMatrix { dim: 1, data: vec![i as f32] };
        QuestionInput {
            qid: i.to_string(),
            recipe_id: format!("r{recipe}"),
            context: vec![m.clone()],
            candidates: vec![m.clone(), m],
            candidate_items: None,
            answer: 0,
        }
    }

    /// A model cell of `setting` whose seeds scored `seeds` and whose questions (one per procedure `p0`, `p1`,
    /// ...) were right on average `outcomes[i]`.
    fn scored(setting: &str, outcomes: &[f64], seeds: &[f64]) -> Cell {
        Cell {
            task: Task::VisualCloze,
            setting: setting.into(),
            model: "HTRN".into(),
            train_questions: 0,
            val_questions: 0,
            test_questions: outcomes.len(),
            accuracy: Some(EstimateRecord { value: stepwise_score::bootstrap::mean(outcomes), low: None, high: None }),
            seed_accuracies: seeds.to_vec(),
            best_epoch: None,
            epochs_run: None,
            parameters: None,
            val_accuracy: None,
            skipped: Skipped::default(),
            predictions: Vec::new(),
            outcomes: outcomes.iter().enumerate().map(|(i, x)| (format!("p{i}"), *x)).collect(),
        }
    }

    #[test]
    fn each_model_is_compared_with_the_hasty_student_question_by_question() {
        // Six procedures, two questions each; the model's cell lists them in another order and misses one.
        let qids: Vec<String> = (0..12).map(|i| format!("q{i}")).collect();
        let mut hasty = scored("recipeqa", &[0.0; 12], &[]);
        hasty.model = HASTY.into();
        hasty.outcomes = (0..12).map(|i| (format!("p{}", i / 2), f64::from(i % 3 == 0))).collect();
        hasty.predictions = vec![qids.iter().map(|q| (q.clone(), 0)).collect()];
        let mut model = scored("recipeqa", &[0.0; 11], &[0.5, 0.5]);
        let order: Vec<usize> = (1..12).rev().collect();
        model.outcomes = order.iter().map(|&i| (format!("p{}", i / 2), if i % 2 == 0 { 1.0 } else { 0.5 })).collect();
        model.predictions = vec![order.iter().map(|&i| (qids[i].clone(), 1)).collect(); 2];
        let bs = BootstrapConfig { resamples: 200, seed: 1, ..Default::default() };
        let v = versus_hasty(&[hasty.clone(), model.clone()], &bs);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].model.as_str(), v[0].questions), ("HTRN", 11), "q0 has no pair");
        // By question: the model's (1.0 on even qids, 0.5 on odd) − the Hasty Student's (1 when i % 3 == 0).
        let expected: f64 = (1..12).map(|i| if i % 2 == 0 { 1.0 } else { 0.5 } - f64::from(i % 3 == 0)).sum::<f64>();
        assert!((v[0].difference.value - expected / 11.0).abs() < 1e-12, "{:?}", v[0]);
        let (lo, hi) = (v[0].difference.low.unwrap(), v[0].difference.high.unwrap());
        assert!(lo <= v[0].difference.value && v[0].difference.value <= hi);
        assert_eq!(v[0].verdict.as_deref(), Some(stepwise_score::bootstrap::noise_verdict(lo, hi)));
        // One procedure: no interval, no verdict.
        let one =
            |c: &Cell| Cell { outcomes: c.outcomes.iter().map(|(_, x)| ("p0".to_string(), *x)).collect(), ..c.clone() };
        let v = versus_hasty(&[one(&hasty), one(&model)], &bs);
        assert_eq!((v[0].difference.low, v[0].verdict.as_deref()), (None, None), "{:?}", v[0]);
        // Another setting's Hasty Student is not this model's reference; a cell without outcomes has no row.
        hasty.setting = "knobs-0-0-0".into();
        assert!(versus_hasty(&[hasty, model.clone()], &bs).is_empty());
        let mut empty = model;
        empty.outcomes.clear();
        assert!(versus_hasty(&[empty], &bs).is_empty());
    }

    fn config(seeds: usize) -> StudyConfig {
        StudyConfig {
            models: vec![ScorerKind::Htrn],
            tasks: vec![Task::VisualCloze],
            hidden: 8,
            attention: 8,
            htrn: HtrnConfig::default(),
            tokens: false,
            inputs: InputScaling::Raw,
            dropout: 0.0,
            candidate_embedding: CandidateEmbedding::QuerySummary,
            train: TrainConfig::default(),
            bootstrap: BootstrapConfig { resamples: 400, seed: 3, ..Default::default() },
            cv: None,
            seeds,
            max_train_questions: None,
        }
    }

    #[test]
    fn the_training_line_names_the_impatient_readers_candidate_embedding_only_when_it_departs() {
        let mut cfg = config(1);
        cfg.models = vec![ScorerKind::Impatient, ScorerKind::Htrn];
        assert_eq!(training_setup(&cfg), "inputs raw (the papers'), no dropout");
        cfg.candidate_embedding = CandidateEmbedding::Item;
        let line = training_setup(&cfg);
        assert!(line.contains("compares g with the candidate's own item (RecipeQA §4.2's baseline"), "{line}");
        // Without the Impatient Reader there is nothing to say.
        cfg.models = vec![ScorerKind::Htrn];
        assert_eq!(training_setup(&cfg), "inputs raw (the papers'), no dropout");
    }

    #[test]
    fn the_drop_to_the_knob_settings_resamples_each_procedure_in_every_setting_together() {
        // 30 procedures whose questions are right or wrong alike in every setting: the settings do not differ, and
        // because a resample takes a procedure in every setting, no resample can make them differ.
        let same: Vec<f64> = (0..30).map(|i| f64::from(i % 3 == 0)).collect();
        let cells: Vec<Cell> = SETTINGS.iter().map(|s| scored(s, &same, &[0.3, 0.4, 0.3])).collect();
        let htrn = |cells: &[Cell], seeds: usize| {
            let rows = summarize(cells, &config(seeds));
            assert_eq!(rows.len(), 1, "no Hasty Student cells, no Hasty Student row");
            rows.into_iter().next().unwrap()
        };
        let row = htrn(&cells, 3);
        assert_eq!(row.model, "HTRN");
        let d = row.difference.unwrap();
        for x in [d.value, d.low.unwrap(), d.high.unwrap()] {
            assert!(x.abs() < 1e-12, "{d:?}");
        }
        assert_eq!(row.verdict.as_deref(), Some("within noise"));
        let [lo, hi] = row.recipeqa_ci.unwrap();
        assert!(lo < 1.0 / 3.0 && hi > 1.0 / 3.0, "{lo} {hi}: the accuracy itself still varies");
        // Each seed's own difference: RecipeQA 0.3, 0.4, 0.3 against the same knob values gives 0 every time.
        assert!(row.difference_sd.unwrap() < 1e-12);

        // RecipeQA mode right on every question, the knob settings on a third: a drop of 2/3 outside noise, and
        // the seeds' differences (0.9 − 0.2, 0.8 − 0.3, 0.7 − 0.1) spread as their sample sd.
        let mut cells: Vec<Cell> = SETTINGS[1..].iter().map(|s| scored(s, &same, &[0.2, 0.3, 0.1])).collect();
        cells.insert(0, scored("recipeqa", &[1.0; 30], &[0.9, 0.8, 0.7]));
        let row = htrn(&cells, 3);
        let d = row.difference.unwrap();
        assert!((d.value - 2.0 / 3.0).abs() < 1e-12, "{d:?}");
        assert!(d.low.unwrap() > 0.3 && d.high.unwrap() < 1.0, "{d:?}");
        assert_eq!(row.verdict.as_deref(), Some("outside noise"));
        let diffs = [0.7, 0.5, 0.6];
        let brute = (diffs.iter().map(|x| (x - 0.6f64).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!((row.difference_sd.unwrap() - brute).abs() < 1e-12);
        assert_eq!(row.knob_settings, 8);

        // One seed: no spread over seeds.
        let cells: Vec<Cell> = SETTINGS.iter().map(|s| scored(s, &same, &[0.3])).collect();
        assert_eq!(htrn(&cells, 1).difference_sd, None);
    }

    #[test]
    fn cross_validation_tests_every_question_once_and_never_trains_on_its_procedure() {
        let mut inputs = TaskInputs::default();
        // 40 questions of 13 procedures, spread over the suite's splits (ignored under --cv).
        for i in 0..40 {
            let split = ["train", "val", "test"][i % 3];
            inputs.by_split.entry(split.to_string()).or_default().push(q(i, i % 13));
        }
        let cfg = StudyConfig {
            models: vec![],
            tasks: vec![],
            hidden: 8,
            attention: 8,
            htrn: HtrnConfig::default(),
            tokens: false,
            inputs: InputScaling::Centered,
            dropout: 0.0,
            candidate_embedding: CandidateEmbedding::QuerySummary,
            train: TrainConfig::default(),
            bootstrap: BootstrapConfig::default(),
            cv: Some(5),
            seeds: 1,
            max_train_questions: None,
        };
        let folds = plan_folds(&inputs, &cfg);
        assert_eq!(folds.len(), 5);
        let mut tested: Vec<String> = folds.iter().flat_map(|f| f.test.iter().map(|q| q.qid.clone())).collect();
        tested.sort();
        let mut all: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        all.sort();
        assert_eq!(tested, all, "every question is tested exactly once");
        for f in &folds {
            let procs =
                |v: &[QuestionInput]| v.iter().map(|q| q.recipe_id.clone()).collect::<std::collections::BTreeSet<_>>();
            let (tr, va, te) = (procs(&f.train), procs(&f.val), procs(&f.test));
            assert!(tr.is_disjoint(&te) && tr.is_disjoint(&va) && va.is_disjoint(&te));
            assert_eq!(f.train.len() + f.val.len() + f.test.len(), 40);
        }
        // Without --cv: the suite's split.
        let one = plan_folds(&inputs, &StudyConfig { cv: None, ..cfg.clone() });
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].test.len(), inputs.split("test").len());

        // A learning curve's point: each fold trains on at most n questions, whole procedures but one, and a
        // smaller n's training questions are among a larger n's (up to the whole fold, kept as it was);
        // validation and test questions are untouched.
        let cut = |n: usize| plan_folds(&inputs, &StudyConfig { max_train_questions: Some(n), ..cfg.clone() });
        let qids = |v: &[QuestionInput]| v.iter().map(|q| q.qid.clone()).collect::<Vec<_>>();
        let whole = folds.iter().map(|f| f.train.len()).max().unwrap();
        for (n, m) in [(5, 12), (12, whole), (whole - 1, whole)] {
            let (small, large) = (cut(n), cut(m));
            for ((s, l), full) in small.iter().zip(&large).zip(&folds) {
                assert_eq!(s.train.len(), n.min(full.train.len()));
                assert_eq!(l.train.len(), m.min(full.train.len()));
                let kept = qids(&l.train);
                assert!(qids(&s.train).iter().all(|q| kept.contains(q)), "nested: {n} within {m}");
                // Kept in the fold's own order.
                let positions: Vec<usize> =
                    s.train.iter().map(|q| full.train.iter().position(|x| x.qid == q.qid).unwrap()).collect();
                assert!(positions.is_sorted());
                assert_eq!((qids(&s.val), qids(&s.test)), (qids(&full.val), qids(&full.test)));
                // Procedures come whole but at most one.
                let cut_procs = s
                    .train
                    .iter()
                    .map(|q| q.recipe_id.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .filter(|p| {
                        let kept = s.train.iter().filter(|q| q.recipe_id == *p).count();
                        kept < full.train.iter().filter(|q| q.recipe_id == *p).count()
                    })
                    .count();
                assert!(cut_procs <= 1, "{cut_procs} procedures cut at {n}");
            }
        }
        assert_eq!(qids(&cut(whole)[0].train), qids(&folds[0].train), "a limit at the size keeps everything");
    }
}
