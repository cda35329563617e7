//! Scoring multiple-choice predictions against one or more task sets, wherever the predictions are: one file for
//! one set, a folder with a file per set, or one JSONL file whose qids are routed to the sets they belong to
//! (predictions matching no set are counted; the file is refused when too few match). With a split, only that
//! split's questions are scored and the predictions for the others set aside. Also what `eval`'s targets are:
//! task sets or sequencing instances ([`resolve_targets`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stepwise_core::taskset::{QUESTIONS_JSON, tasksets_under};
use stepwise_core::{Error, Result, TaskSet};

use crate::accuracy::{self, ChoiceSetReport, MatchOptions, QuestionResult, ScoreOptions};
use crate::bootstrap::BootstrapConfig;
use crate::predictions::{self, ChoiceFormat, ChoiceRecord, instances_file};

/// One task set to score.
#[derive(Debug, Clone)]
pub struct ChoiceSet {
    /// Name in the report: its path, or its folder relative to a suite.
    pub name: String,
    /// The questions file.
    pub file: PathBuf,
}

/// What `stepwise eval` was asked to score, found from its targets: task sets (files, folders, suites), or one
/// sequencing instances file or folder.
#[derive(Debug)]
pub enum EvalTargets {
    Choice(Vec<ChoiceSet>),
    Sequencing(PathBuf),
}

/// Classify `paths`: a `.jsonl` file or a folder with `instances.jsonl` is sequencing instances; another file, a
/// folder with `questions.json`, or a suite (task sets under it) is multiple choice. Mixing the two, several
/// sequencing targets, or a path that is none of these is a usage error naming it.
pub fn resolve_targets(paths: &[PathBuf]) -> Result<EvalTargets> {
    let mut sets = Vec::new();
    let mut sequencing = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(Error::usage(format!("{}: no such file or folder", p.display())));
        }
        if p.is_file() {
            if p.extension().is_some_and(|e| e == "jsonl") {
                sequencing.push(p.clone());
            } else {
                sets.push(ChoiceSet { name: p.display().to_string(), file: p.clone() });
            }
        } else if p.join(QUESTIONS_JSON).is_file() {
            sets.push(ChoiceSet { name: p.display().to_string(), file: p.join(QUESTIONS_JSON) });
        } else if instances_file(p).is_file() {
            sequencing.push(p.clone());
        } else {
            let found = tasksets_under(p)?;
            if found.is_empty() {
                return Err(Error::usage(format!(
                    "{}: not a task set (no {QUESTIONS_JSON}), a sequencing folder (no instances.jsonl) or a suite \
                     (no subfolder with {QUESTIONS_JSON})",
                    p.display()
                )));
            }
            let single = paths.len() == 1;
            for (rel, file) in found {
                let name = if single { rel } else { format!("{}/{rel}", p.display()) };
                sets.push(ChoiceSet { name, file });
            }
        }
    }
    match (sets.is_empty(), sequencing.len()) {
        (false, 0) => Ok(EvalTargets::Choice(sets)),
        (true, 1) => Ok(EvalTargets::Sequencing(sequencing.remove(0))),
        (true, _) => Err(Error::usage("give one sequencing instances file or folder at a time")),
        (false, _) => Err(Error::usage("give either task sets or sequencing instances, not both")),
    }
}

/// How to score.
#[derive(Debug, Clone)]
pub struct ChoiceEvalOptions {
    pub format: ChoiceFormat,
    pub score: ScoreOptions,
    /// Score only the questions of this split.
    pub split: Option<String>,
    /// Keep one line per question ([`ChoiceEvaluation::per_question`]).
    pub per_question: bool,
}

/// The scores of every set.
pub struct ChoiceEvaluation {
    pub reports: Vec<ChoiceSetReport>,
    /// Every question's result with its set's name, when asked for.
    pub per_question: Vec<(String, QuestionResult)>,
    /// Predictions that match no question of any set (routed files only).
    pub unmatched: usize,
    /// The files read: the sets' questions, then the predictions.
    pub inputs: Vec<PathBuf>,
}

/// Score `predictions` (a file or a folder of per-set files) against `sets`.
pub fn evaluate(sets: &[ChoiceSet], predictions: &Path, opts: &ChoiceEvalOptions) -> Result<ChoiceEvaluation> {
    let mut loaded: Vec<(&ChoiceSet, TaskSet)> =
        sets.iter().map(|s| Ok((s, TaskSet::load(&s.file)?))).collect::<Result<_>>()?;
    let task = opts.score.matching.task.as_deref();
    let mut inputs: Vec<PathBuf> = sets.iter().map(|s| s.file.clone()).collect();

    // Predictions per set: one file for one set; a folder of per-set files; or one JSONL file split by qid.
    let mut per_set: Vec<(Vec<ChoiceRecord>, String)> = Vec::new();
    let mut unmatched = 0usize;
    if loaded.len() == 1 {
        if predictions.is_dir() {
            return Err(Error::usage(format!("{}: for one task set, give a predictions file", predictions.display())));
        }
        let records = predictions::read_choice_predictions(predictions, opts.format, Some(&loaded[0].1), task)?;
        per_set.push((records, predictions.display().to_string()));
        inputs.push(predictions.to_path_buf());
    } else if predictions.is_dir() {
        for (set, ts) in &loaded {
            let file = per_set_file(predictions, set)?;
            let records = predictions::read_choice_predictions(&file, opts.format, Some(ts), task)?;
            per_set.push((records, file.display().to_string()));
            inputs.push(file);
        }
    } else {
        if opts.format == ChoiceFormat::Official {
            return Err(Error::usage(
                "official per-task lists belong to one task set; give a folder with one file per set",
            ));
        }
        let records = predictions::read_choice_predictions(predictions, ChoiceFormat::Jsonl, None, None)?;
        let total = records.len();
        let named: Vec<(&str, &TaskSet)> = loaded.iter().map(|(s, ts)| (s.name.as_str(), ts)).collect();
        let (routed, rest) = accuracy::route_by_qid(&named, records)?;
        let examples: Vec<String> = rest.iter().take(5).map(|r| r.qid.clone()).collect();
        accuracy::check_overlap(
            total,
            total - rest.len(),
            &examples,
            &predictions.display().to_string(),
            "the task sets",
            opts.score.matching.min_overlap,
        )?;
        unmatched = rest.len();
        for records in routed {
            per_set.push((records, predictions.display().to_string()));
        }
        inputs.push(predictions.to_path_buf());
    }

    // A split: score only the questions of that split (e.g. the test split a model was selected on val for);
    // predictions of the set's other questions are set aside, not counted as foreign.
    if let Some(split) = &opts.split {
        for ((s, ts), (records, _)) in loaded.iter_mut().zip(per_set.iter_mut()) {
            ts.questions.retain(|q| q.split.as_deref() == Some(split.as_str()));
            if ts.questions.is_empty() {
                return Err(Error::usage(format!("{}: no question of split `{split}`", s.file.display())));
            }
            let keep: HashSet<&str> = ts.questions.iter().map(|q| q.qid.as_str()).collect();
            records.retain(|r| keep.contains(r.qid.as_str()));
        }
    }
    let mut reports: Vec<ChoiceSetReport> = Vec::new();
    let mut per_question = Vec::new();
    for ((set, ts), (records, source)) in loaded.iter().zip(&per_set) {
        // A routed set may have received no records: every question is missing, no overlap check needed.
        let (mut report, results) = if records.is_empty() {
            let score = ScoreOptions {
                matching: MatchOptions { min_overlap: 0.0, ..opts.score.matching.clone() },
                ..opts.score.clone()
            };
            accuracy::score_set(&set.name, ts, records, source, &score)?
        } else {
            accuracy::score_set(&set.name, ts, records, source, &opts.score)?
        };
        if opts.per_question {
            per_question.extend(results.into_iter().map(|r| (set.name.clone(), r)));
        }
        let file = Path::new(source);
        if file.is_file() {
            report.models = predictions::models_in(file)?;
        }
        reports.push(report);
    }
    Ok(ChoiceEvaluation { reports, per_question, unmatched, inputs })
}

impl ChoiceEvaluation {
    /// The accuracy table, then who made the predictions and how many matched no question.
    pub fn markdown(&self, config: &BootstrapConfig) -> String {
        let mut markdown = accuracy::markdown(&self.reports, config);
        for r in self.reports.iter().filter(|r| !r.models.is_empty()) {
            markdown.push_str(&format!("- {}: predictions made by {}\n", r.name, r.models.join(", ")));
        }
        if self.unmatched > 0 {
            markdown
                .push_str(&format!("- {} predictions match no question of any task set (ignored)\n", self.unmatched));
        }
        markdown
    }

    /// The results file (`kind` multiple_choice).
    pub fn results_json(&self, opts: &ChoiceEvalOptions) -> Value {
        json!({
            "kind": "multiple_choice",
            "bootstrap": opts.score.bootstrap,
            "bootstrap_unit": opts.score.unit,
            "sets": self.reports,
            "unmatched_predictions": self.unmatched,
        })
    }

    /// One JSON line per question (set, qid, task, recipe, answer, prediction, outcome).
    pub fn per_question_lines(&self) -> Vec<Value> {
        self.per_question.iter().map(|(set, r)| question_line(set, r)).collect()
    }

    /// Questions scored over all sets.
    pub fn questions(&self) -> usize {
        self.reports.iter().map(|r| r.counts.questions).sum()
    }
}

/// The predictions file of `set` inside a predictions folder.
fn per_set_file(dir: &Path, set: &ChoiceSet) -> Result<PathBuf> {
    let candidates = [
        dir.join(&set.name).join("predictions.jsonl"),
        dir.join(format!("{}.jsonl", set.name)),
        dir.join(&set.name).join("predictions.json"),
        dir.join(format!("{}.json", set.name)),
    ];
    match candidates.iter().find(|c| c.is_file()) {
        Some(c) => Ok(c.clone()),
        None => {
            let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
            Err(Error::bad_input(format!("no predictions for task set {}: tried {}", set.name, tried.join(", "))))
        }
    }
}

fn question_line(set: &str, r: &QuestionResult) -> Value {
    json!({
        "set": set,
        "qid": r.qid,
        "task": r.task,
        "recipe_id": r.recipe_id,
        "answer": r.answer,
        "predicted": r.predicted,
        "outcome": r.outcome,
    })
}
