//! What an evaluation produced, whatever it scored (multiple-choice task sets, sequencing orders, annotators'
//! agreement, R2VQ answers): the Markdown tables, the results JSON, one line per scored item, and the results
//! folder they are written to. `stepwise eval` checks its arguments and calls one of these.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use stepwise_core::json::{to_pretty_sorted, write_canonical};
use stepwise_core::output::{OutputDir, write_file_atomic, write_string_atomic};
use stepwise_core::r2vq::R2vqDocument;
use stepwise_core::{Error, Manifest, Result};

use crate::bootstrap::BootstrapConfig;
use crate::choice_eval::{self, ChoiceEvalOptions, ChoiceSet};
use crate::compare;
use crate::predictions::{self, instances_file};
use crate::r2vq;
use crate::sequencing_eval::{self, SequencingOptions};

/// The results of one evaluation, ready to print and write.
pub struct EvalOutcome {
    pub markdown: String,
    pub results: Value,
    /// File name and lines of the per-item JSONL.
    pub per_item: (&'static str, Vec<Value>),
    /// The files read, hashed into the manifest.
    pub inputs: Vec<PathBuf>,
    pub counts: Vec<(&'static str, u64)>,
}

impl EvalOutcome {
    /// Multiple-choice predictions (`pred_path`: a file, or a folder with one file per set) against task sets.
    pub fn choice(sets: &[ChoiceSet], pred_path: &Path, opts: &ChoiceEvalOptions) -> Result<Self> {
        let evaluation = choice_eval::evaluate(sets, pred_path, opts)?;
        let counts = vec![("sets", evaluation.reports.len() as u64), ("questions", evaluation.questions() as u64)];
        Ok(EvalOutcome {
            markdown: evaluation.markdown(&opts.score.bootstrap),
            results: evaluation.results_json(opts),
            per_item: ("per_question.jsonl", evaluation.per_question_lines()),
            inputs: evaluation.inputs,
            counts,
        })
    }

    /// Order predictions against sequencing instances (`path`: `instances.jsonl` or its folder); `pooled` adds the
    /// micro averages to the table, `per_instance` keeps one line per instance.
    pub fn sequencing(
        path: &Path,
        pred_path: &Path,
        options: &SequencingOptions,
        pooled: bool,
        per_instance: bool,
    ) -> Result<Self> {
        let instances = predictions::read_instances(path)?;
        let preds = predictions::read_order_predictions(pred_path)?;
        let report = sequencing_eval::evaluate_orders(&instances, &preds, pred_path, options)?;
        let models = predictions::models_in(pred_path)?;
        let mut markdown = sequencing_eval::markdown(&report, &options.bootstrap, pooled);
        if !models.is_empty() {
            markdown.push_str(&format!("\nPredictions made by {}.\n", models.join(", ")));
        }
        let lines = if per_instance { report.per_instance_lines() } else { Vec::new() };
        Ok(EvalOutcome {
            results: report.results_json(&options.bootstrap, &models),
            markdown,
            per_item: ("per_instance.jsonl", lines),
            inputs: vec![instances_file(path), pred_path.to_path_buf()],
            counts: vec![("instances", report.counts.scored as u64)],
        })
    }

    /// Two methods' order predictions (`a`, `b`: one file or several, e.g. seeds) compared on the same
    /// sequencing instances, paired.
    pub fn compare_orders(path: &Path, a: &[PathBuf], b: &[PathBuf], options: &SequencingOptions) -> Result<Self> {
        let instances = predictions::read_instances(path)?;
        let comparison = compare::compare_orders(&instances, a, b, options)?;
        Ok(Self::comparison(comparison, vec![instances_file(path)], &options.bootstrap))
    }

    /// Two methods' multiple-choice predictions compared on the same questions of `sets`, paired.
    pub fn compare_choices(sets: &[ChoiceSet], a: &[PathBuf], b: &[PathBuf], opts: &ChoiceEvalOptions) -> Result<Self> {
        let comparison = compare::compare_choices(sets, a, b, opts)?;
        let inputs = sets.iter().map(|s| s.file.clone()).collect();
        Ok(Self::comparison(comparison, inputs, &opts.score.bootstrap))
    }

    fn comparison(c: compare::Comparison, mut inputs: Vec<PathBuf>, config: &BootstrapConfig) -> Self {
        inputs.extend(c.inputs().map(Path::to_path_buf));
        let items = c.rows.iter().map(|r| r.items).max().unwrap_or(0);
        EvalOutcome {
            markdown: c.markdown(config),
            results: c.results_json(config),
            per_item: ("per_item.jsonl", c.per_item_lines()),
            inputs,
            counts: vec![("paired_items", items as u64), ("unpaired_items", c.unpaired as u64)],
        }
    }

    /// Annotators' orders of sequencing instances: Cohen's κ among them.
    pub fn agreement(path: &Path, ann_path: &Path, config: &BootstrapConfig) -> Result<Self> {
        let instances = predictions::read_instances(path)?;
        let annotations = predictions::read_annotations(ann_path)?;
        let report = sequencing_eval::evaluate_agreement(&instances, &annotations, ann_path, config)?;
        Ok(EvalOutcome {
            markdown: sequencing_eval::agreement_markdown(&report, config),
            results: report.results_json(config),
            per_item: ("per_instance.jsonl", report.per_instance.iter().map(|p| json!(p)).collect()),
            inputs: vec![instances_file(path), ann_path.to_path_buf()],
            counts: vec![("instances", report.instances as u64)],
        })
    }

    /// R2VQ answers: exact match and token F1 per family against the `# answer` lines of `doc`, read from
    /// `gold_path`.
    pub fn r2vq(doc: &R2vqDocument, gold_path: &Path, pred_path: &Path, config: &BootstrapConfig) -> Result<Self> {
        let gold = r2vq::gold_questions(doc);
        if gold.is_empty() {
            return Err(Error::usage(format!(
                "{}: no answered question (`# answer` lines); nothing to score",
                gold_path.display()
            )));
        }
        let predictions = r2vq::read_answer_predictions(pred_path)?;
        let scores = r2vq::score(&gold, &predictions, pred_path, config)?;
        Ok(EvalOutcome {
            markdown: r2vq::markdown(&scores, doc, config),
            results: scores.results_json(),
            per_item: (
                "questions.jsonl",
                scores.questions.iter().map(|q| serde_json::to_value(q).unwrap_or(Value::Null)).collect(),
            ),
            inputs: vec![gold_path.to_path_buf(), pred_path.to_path_buf()],
            counts: vec![("questions", gold.len() as u64), ("missing", scores.overall.missing as u64)],
        })
    }

    /// Write the results JSON to `json`, and a results folder to `output` (results.json, results.md, the
    /// per-item JSONL and a manifest with `params` under `eval`), each atomically. Returns the folder written.
    pub fn write(
        &self,
        json: Option<&Path>,
        output: Option<&Path>,
        force: bool,
        seed: u64,
        params: impl Serialize,
    ) -> Result<Option<PathBuf>> {
        let results_text = to_pretty_sorted(&self.results);
        if let Some(path) = json {
            write_string_atomic(path, &results_text)?;
        }
        let Some(dir) = output else { return Ok(None) };
        let folder = OutputDir::create(dir, force)?;
        write_string_atomic(&folder.path().join("results.json"), &results_text)?;
        write_string_atomic(&folder.path().join("results.md"), &self.markdown)?;
        let (name, lines) = &self.per_item;
        write_file_atomic(&folder.path().join(name), |w| {
            for line in lines {
                write_canonical(w, line)?;
                w.write_all(b"\n")?;
            }
            Ok(())
        })?;
        let mut manifest = Manifest::new("eval").with_seed(seed);
        manifest.add_inputs(&self.inputs)?;
        for (k, v) in &self.counts {
            manifest.count(k, *v);
        }
        manifest.param("eval", params);
        manifest.write(folder.path())?;
        Ok(Some(folder.commit()?))
    }
}
