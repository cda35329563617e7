//! The paper-style baselines table (`stepwise baseline --table`): every baseline with every feature view the
//! stores and the instances allow, each run's predictions scored into a row of the sequencing results table.

use stepwise_core::Result;
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};
use stepwise_score::sequencing_table::{self as table, Row};

use crate::item_features::FeatureKind;
use crate::sequencer::{self, Evaluation, ModelKind, RunConfig, RunOutput};
use crate::sequencing_features::SequencingFeatures;

/// One (method, feature view) of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRun {
    pub model: ModelKind,
    /// `None` for the methods that read no features.
    pub kind: Option<FeatureKind>,
}

impl TableRun {
    /// The feature view's name, `-` for none.
    pub fn features(&self) -> &'static str {
        self.kind.map_or("-", |k| k.as_str())
    }

    /// The predictions file's name: `pairwise-multimodal.jsonl`, `random.jsonl`.
    pub fn file_name(&self) -> String {
        match self.kind {
            Some(k) => format!("{}-{}.jsonl", self.model.as_str(), k.as_str()),
            None => format!("{}.jsonl", self.model.as_str()),
        }
    }

    /// How prediction files name the method: `pairwise (multimodal)`, `random`.
    pub fn label(&self) -> String {
        model_label(self.model.as_str(), self.features())
    }
}

/// A baseline's name with the features it read, as prediction files name it: `pairwise (multimodal)`, `random`.
fn model_label(model: &str, features: &str) -> String {
    if features == "-" { model.to_string() } else { format!("{model} ({features})") }
}

/// Every (method, feature view) the loaded stores and the instances allow: random, text-position when the
/// instances have text, image-chain and pairwise on every available view.
pub fn table_runs(instances: &[SequencingInstance], loaded: &SequencingFeatures) -> Vec<TableRun> {
    let has_text = instances.iter().any(|i| i.items.iter().any(|it| it.text.is_some() || it.title.is_some()));
    let kinds: Vec<FeatureKind> =
        FeatureKind::ALL.into_iter().filter(|k| loaded.set().restrict(*k).is_some()).collect();
    let mut runs = vec![TableRun { model: ModelKind::Random, kind: None }];
    if has_text {
        runs.push(TableRun { model: ModelKind::TextPosition, kind: None });
    }
    for model in [ModelKind::ImageChain, ModelKind::Pairwise] {
        for &k in &kinds {
            runs.push(TableRun { model, kind: Some(k) });
        }
    }
    runs
}

/// The split the predictions are scored on: the evaluated split, or every instance under cross-validation.
fn eval_split(config: &RunConfig) -> Option<&str> {
    match &config.evaluation {
        Evaluation::Split(s) => Some(s.as_str()),
        Evaluation::CrossValidation(_) => None,
    }
}

/// The table's first note: what was predicted, by which protocol.
pub fn protocol_note(dataset: &str, evaluation: &Evaluation) -> String {
    match evaluation {
        Evaluation::Split(s) => format!(
            "{dataset}: predictions on the `{s}` split; the pairwise model trains on `train`, selects its epoch on `val`"
        ),
        Evaluation::CrossValidation(k) => format!(
            "{dataset}: {k}-fold cross-validation by procedure (every instance predicted by a model that never saw its procedure)"
        ),
    }
}

/// What one table run produced: its predictions, its row, and a note on the pairwise training when it trained.
pub struct RunResult {
    pub predictions: Vec<OrderPrediction>,
    pub row: Row,
    pub note: Option<String>,
}

/// Run one (method, feature view) of `dataset`'s table with `base`'s protocol and options, and score it.
pub fn run_table_row(
    dataset: &str,
    run: TableRun,
    instances: &[SequencingInstance],
    loaded: &SequencingFeatures,
    base: &RunConfig,
    seed: u64,
) -> Result<RunResult> {
    let set = match run.kind {
        Some(k) => loaded.set().restrict(k).expect("runs only for available views"),
        None => Default::default(),
    };
    let config = RunConfig { model: run.model, ..base.clone() };
    let out = sequencer::run(instances, &set, &config)?;
    let row = score_row(dataset, run, instances, &out.predictions, &config, seed)?;
    let note = training_note(run.model.as_str(), run.features(), &out).map(|n| format!("{dataset}: {n}"));
    Ok(RunResult { predictions: out.predictions, row, note })
}

/// `run`'s predictions scored into a row of `dataset`'s table, on the split `config` predicts.
pub fn score_row(
    dataset: &str,
    run: TableRun,
    instances: &[SequencingInstance],
    predictions: &[OrderPrediction],
    config: &RunConfig,
    seed: u64,
) -> Result<Row> {
    let studied: Vec<SequencingInstance>;
    let instances = if config.train_only.is_empty() {
        instances
    } else {
        studied = instances.iter().filter(|i| !config.train_only.contains(&i.procedure)).cloned().collect();
        &studied
    };
    let (n, multi_reference, single, multi) = table::score(instances, predictions, eval_split(config), seed)?;
    Ok(Row {
        dataset: dataset.to_string(),
        method: run.model.as_str().into(),
        features: run.features().into(),
        sequences: n,
        multi_reference,
        seeds: Some(1),
        single,
        multi,
    })
}

/// The pairwise model's training per fold, one line (`None` for methods that do not train).
pub fn training_note(method: &str, features: &str, out: &RunOutput) -> Option<String> {
    if out.training.is_empty() {
        return None;
    }
    let parts: Vec<String> = out
        .training
        .iter()
        .map(|t| {
            format!(
                "{} train / {} val pairs, best epoch {}/{}, val pair accuracy {}",
                t.train_pairs,
                t.val_pairs,
                t.best_epoch,
                t.epochs_run,
                t.val_pair_accuracy.map_or("n/a".into(), |a| format!("{:.1}%", a * 100.0))
            )
        })
        .collect();
    Some(format!("{method} ({features}): {}", parts.join("; ")))
}
