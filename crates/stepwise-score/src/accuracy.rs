//! Multiple-choice accuracy: matching predictions to a task set's questions, per-task accuracy with bootstrap
//! confidence intervals, and the counts a user needs to trust the number.
//!
//! Rules (RecipeQA's official scorer compares, per task and in file order, the predicted index with `answer`):
//! - a question without a prediction (or with `null`) is **missing** and counts as wrong;
//! - a prediction whose index is not a valid choice (negative, or ≥ the number of choices) is **invalid** and
//!   counts as wrong;
//! - a prediction whose qid is not in the task set is **extra** and is ignored — but when too few predictions
//!   match the task set at all (fewer than `min_overlap` of them; zero always), the file is refused: it is most
//!   likely the predictions of another task set;
//! - accuracy = correct / questions of the task, with a percentile bootstrap interval over questions (or over
//!   recipes, resampling all questions of a recipe together).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use stepwise_core::{Error, Result, TaskSet};

use crate::bootstrap::{BootstrapConfig, Estimate, Unit, cluster_labels, mean_estimate};
use crate::predictions::ChoiceRecord;

/// Default minimum share of predictions whose qid is in the task set.
pub const DEFAULT_MIN_OVERLAP: f64 = 0.5;

/// What happened to one question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Correct,
    Wrong,
    Missing,
    Invalid,
}

/// One question's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuestionResult {
    pub qid: String,
    pub task: String,
    pub recipe_id: String,
    /// The correct choice.
    pub answer: usize,
    /// The predicted index as written (None: missing).
    pub predicted: Option<i64>,
    pub outcome: Outcome,
}

/// How predictions related to the task set.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PredictionCounts {
    /// Questions scored (after the task filter).
    pub questions: usize,
    /// Prediction records read for this task set.
    pub predictions: usize,
    /// Questions with a valid prediction.
    pub answered: usize,
    pub missing: usize,
    pub invalid: usize,
    /// Predictions whose qid is not in the task set.
    pub extra: usize,
    /// Predictions for questions of other tasks of the task set (when a task filter is used).
    pub other_task: usize,
    /// A few extra qids, for the report.
    pub extra_examples: Vec<String>,
}

/// Questions of a task set matched with predictions.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// In task-set file order.
    pub results: Vec<QuestionResult>,
    pub counts: PredictionCounts,
}

/// How to match.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchOptions {
    /// Score only this task's questions.
    pub task: Option<String>,
    /// Refuse the file when fewer than this share of predictions have a qid in the task set.
    pub min_overlap: f64,
}

impl Default for MatchOptions {
    fn default() -> Self {
        MatchOptions { task: None, min_overlap: DEFAULT_MIN_OVERLAP }
    }
}

const EXAMPLES: usize = 5;

/// Match `records` (read from `source`, a name for messages) to the questions of `taskset` (`set_name` for
/// messages).
pub fn match_predictions(
    taskset: &TaskSet,
    set_name: &str,
    records: &[ChoiceRecord],
    source: &str,
    options: &MatchOptions,
) -> Result<Matched> {
    if let Some(task) = &options.task
        && taskset.of_task(task).next().is_none()
    {
        let have: Vec<String> = taskset.counts_by_task().into_keys().collect();
        return Err(Error::usage(format!("{set_name} has no `{task}` questions (it has: {})", have.join(", "))));
    }
    let in_set: HashMap<&str, &str> = taskset.questions.iter().map(|q| (q.qid.as_str(), q.task.as_str())).collect();
    let mut by_qid: HashMap<&str, &ChoiceRecord> = HashMap::with_capacity(records.len());
    let mut counts = PredictionCounts { predictions: records.len(), ..Default::default() };
    for r in records {
        match in_set.get(r.qid.as_str()) {
            None => {
                counts.extra += 1;
                if counts.extra_examples.len() < EXAMPLES {
                    counts.extra_examples.push(r.qid.clone());
                }
            }
            Some(task) if options.task.as_deref().is_some_and(|t| t != *task) => counts.other_task += 1,
            Some(_) => {
                by_qid.insert(r.qid.as_str(), r);
            }
        }
    }
    check_overlap(
        records.len(),
        records.len() - counts.extra,
        &counts.extra_examples,
        source,
        set_name,
        options.min_overlap,
    )?;

    let mut results = Vec::new();
    for q in &taskset.questions {
        if options.task.as_deref().is_some_and(|t| t != q.task) {
            continue;
        }
        let predicted = by_qid.get(q.qid.as_str()).and_then(|r| r.answer);
        let outcome = match predicted {
            None => Outcome::Missing,
            Some(i) if i < 0 || i as u64 >= q.choice_list.len() as u64 => Outcome::Invalid,
            Some(i) if i as usize == q.answer => Outcome::Correct,
            Some(_) => Outcome::Wrong,
        };
        match outcome {
            Outcome::Missing => counts.missing += 1,
            Outcome::Invalid => counts.invalid += 1,
            _ => counts.answered += 1,
        }
        results.push(QuestionResult {
            qid: q.qid.clone(),
            task: q.task.clone(),
            recipe_id: q.recipe_id.clone(),
            answer: q.answer,
            predicted,
            outcome,
        });
    }
    counts.questions = results.len();
    Ok(Matched { results, counts })
}

/// Refuse predictions that mostly do not belong to the evaluated data (a file for another task set or instance
/// set): `matching` of `total` records have a known id.
pub fn check_overlap(
    total: usize,
    matching: usize,
    examples: &[String],
    source: &str,
    target: &str,
    min_overlap: f64,
) -> Result<()> {
    if total == 0 {
        return Ok(());
    }
    let share = matching as f64 / total as f64;
    if matching == 0 || share < min_overlap {
        let quoted: Vec<String> = examples.iter().map(|q| format!("{q:?}")).collect();
        return Err(Error::bad_input(format!(
            "{source}: only {matching} of {total} predictions have an id that exists in {target} (unknown ids \
             include {}); these look like predictions for other data. Check the files, or lower --min-overlap \
             (now {min_overlap}) to score the matching part",
            quoted.join(", ")
        )));
    }
    Ok(())
}

/// Split records from one file among several task sets by qid. A qid found in two sets is ambiguous (an error);
/// records in no set are returned separately.
pub fn route_by_qid(
    sets: &[(&str, &TaskSet)],
    records: Vec<ChoiceRecord>,
) -> Result<(Vec<Vec<ChoiceRecord>>, Vec<ChoiceRecord>)> {
    let mut owner: HashMap<&str, usize> = HashMap::new();
    for (i, (name, ts)) in sets.iter().enumerate() {
        for q in &ts.questions {
            if let Some(prev) = owner.insert(q.qid.as_str(), i) {
                return Err(Error::usage(format!(
                    "qid {:?} is in both {} and {name}: one predictions file cannot be split among these task \
                     sets; give a folder with one predictions file per task set",
                    q.qid, sets[prev].0
                )));
            }
        }
    }
    let mut routed = vec![Vec::new(); sets.len()];
    let mut unrouted = Vec::new();
    for r in records {
        match owner.get(r.qid.as_str()) {
            Some(&i) => routed[i].push(r),
            None => unrouted.push(r),
        }
    }
    Ok((routed, unrouted))
}

/// What the bootstrap resamples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResampleUnit {
    #[default]
    Question,
    /// All questions of a recipe together (questions of one recipe are not independent).
    Recipe,
}

impl ResampleUnit {
    pub fn parse(s: &str) -> Option<ResampleUnit> {
        match s {
            "question" => Some(ResampleUnit::Question),
            "recipe" => Some(ResampleUnit::Recipe),
            _ => None,
        }
    }
}

/// Accuracy of one task (or of all tasks: `task = "all"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskAccuracy {
    pub task: String,
    pub questions: usize,
    pub correct: usize,
    pub wrong: usize,
    pub missing: usize,
    pub invalid: usize,
    pub accuracy: Estimate,
}

/// The name of the row that pools every task.
pub const ALL_TASKS: &str = "all";

/// Accuracy per task (tasks in name order, which is RecipeQA's task order), plus an [`ALL_TASKS`] row when there
/// is more than one task. `key` makes the bootstrap streams of this task set distinct from others'.
pub fn accuracy_by_task(
    results: &[QuestionResult],
    unit: ResampleUnit,
    config: &BootstrapConfig,
    key: &str,
) -> Vec<TaskAccuracy> {
    let mut by_task: BTreeMap<&str, Vec<&QuestionResult>> = BTreeMap::new();
    for r in results {
        by_task.entry(r.task.as_str()).or_default().push(r);
    }
    let mut rows: Vec<TaskAccuracy> =
        by_task.iter().map(|(task, rs)| task_accuracy(task, rs, unit, config, &format!("{key}/{task}"))).collect();
    if by_task.len() > 1 {
        let all: Vec<&QuestionResult> = results.iter().collect();
        rows.push(task_accuracy(ALL_TASKS, &all, unit, config, &format!("{key}/{ALL_TASKS}")));
    }
    rows
}

fn task_accuracy(
    task: &str,
    results: &[&QuestionResult],
    unit: ResampleUnit,
    config: &BootstrapConfig,
    key: &str,
) -> TaskAccuracy {
    let count = |o: Outcome| results.iter().filter(|r| r.outcome == o).count();
    let values: Vec<f64> = results.iter().map(|r| f64::from(u8::from(r.outcome == Outcome::Correct))).collect();
    let clusters: Vec<usize>;
    let resample = match unit {
        ResampleUnit::Question => Unit::Rows,
        ResampleUnit::Recipe => {
            clusters = cluster_labels(results.iter().map(|r| r.recipe_id.as_str()));
            Unit::Clusters(&clusters)
        }
    };
    TaskAccuracy {
        task: task.to_string(),
        questions: results.len(),
        correct: count(Outcome::Correct),
        wrong: count(Outcome::Wrong),
        missing: count(Outcome::Missing),
        invalid: count(Outcome::Invalid),
        accuracy: mean_estimate(&values, resample, config, key),
    }
}

/// The scored result of one task set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChoiceSetReport {
    /// The task set's name in the report (its path, or its folder relative to a suite).
    pub name: String,
    /// Where the predictions came from.
    pub predictions: String,
    /// The models that made them, when the predictions name them (see [`crate::predictions::MODEL_FIELD`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    pub counts: PredictionCounts,
    pub tasks: Vec<TaskAccuracy>,
}

/// Options of [`score_set`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScoreOptions {
    pub matching: MatchOptions,
    pub unit: ResampleUnit,
    pub bootstrap: BootstrapConfig,
}

/// Score one task set end to end: match, then accuracy per task with intervals.
pub fn score_set(
    name: &str,
    taskset: &TaskSet,
    records: &[ChoiceRecord],
    predictions_path: &str,
    options: &ScoreOptions,
) -> Result<(ChoiceSetReport, Vec<QuestionResult>)> {
    let matched = match_predictions(taskset, name, records, predictions_path, &options.matching)?;
    let tasks = accuracy_by_task(&matched.results, options.unit, &options.bootstrap, name);
    let report = ChoiceSetReport {
        name: name.to_string(),
        predictions: predictions_path.to_string(),
        models: Vec::new(),
        counts: matched.counts,
        tasks,
    };
    Ok((report, matched.results))
}

/// A Markdown table of accuracies (one row per set and task) followed by notes on missing, invalid and extra
/// predictions.
pub fn markdown(reports: &[ChoiceSetReport], config: &BootstrapConfig) -> String {
    let level = format!("{:.0}% CI", config.confidence * 100.0);
    let mut out = String::new();
    let show_set = reports.len() > 1;
    if show_set {
        out.push_str(&format!("| set | task | questions | accuracy (%) | {level} | missing | invalid |\n"));
        out.push_str("|---|---|---:|---:|---|---:|---:|\n");
    } else {
        out.push_str(&format!("| task | questions | accuracy (%) | {level} | missing | invalid |\n"));
        out.push_str("|---|---:|---:|---|---:|---:|\n");
    }
    for r in reports {
        for t in &r.tasks {
            let set = if show_set { format!("| {} ", r.name) } else { String::new() };
            out.push_str(&format!(
                "{set}| {} | {} | {} | {} | {} | {} |\n",
                t.task,
                t.questions,
                crate::markdown::percent(t.accuracy.value),
                crate::markdown::percent_interval(t.accuracy.ci),
                t.missing,
                t.invalid
            ));
        }
    }
    let mut notes = Vec::new();
    for r in reports {
        let c = &r.counts;
        let prefix = if show_set { format!("{}: ", r.name) } else { String::new() };
        if c.missing > 0 {
            notes.push(format!(
                "{prefix}{} of {} questions have no prediction (scored as wrong)",
                c.missing, c.questions
            ));
        }
        if c.invalid > 0 {
            notes.push(format!("{prefix}{} predictions are not a valid choice index (scored as wrong)", c.invalid));
        }
        if c.extra > 0 {
            let ex: Vec<String> = c.extra_examples.iter().map(|q| format!("{q:?}")).collect();
            notes.push(format!(
                "{prefix}{} predictions have a qid not in the task set (ignored; e.g. {})",
                c.extra,
                ex.join(", ")
            ));
        }
        if c.other_task > 0 {
            notes.push(format!("{prefix}{} predictions are for other tasks (ignored)", c.other_task));
        }
    }
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            out.push_str(&format!("- {n}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Five questions: three textual_cloze (answers 0, 1, 2; 4 choices), two visual_cloze (answers 3, 0).
    fn taskset() -> TaskSet {
        let q = |qid: &str, recipe: &str, task: &str, answer: u64| {
            serde_json::json!({"qid": qid, "recipe_id": recipe, "task": task, "question": ["@placeholder"],
                               "choice_list": ["a", "b", "c", "d"], "answer": answer})
        };
        let v = serde_json::json!({"data": [
            q("t1", "r1", "textual_cloze", 0), q("t2", "r1", "textual_cloze", 1), q("t3", "r2", "textual_cloze", 2),
            q("v1", "r1", "visual_cloze", 3), q("v2", "r3", "visual_cloze", 0)]});
        TaskSet::from_json(&v, Path::new("t.json")).unwrap()
    }

    fn rec(qid: &str, answer: Option<i64>) -> ChoiceRecord {
        ChoiceRecord { qid: qid.into(), answer, origin: "p".into() }
    }

    fn cfg() -> BootstrapConfig {
        BootstrapConfig { resamples: 200, confidence: 0.95, seed: 1 }
    }

    /// Hand-computed table: t1 correct, t2 wrong (2 ≠ 1), t3 missing, v1 invalid (index 7), v2 correct;
    /// one extra qid. textual_cloze 1/3, visual_cloze 1/2, all 2/5.
    #[test]
    fn hand_computed_table() {
        let ts = taskset();
        let records =
            vec![rec("t1", Some(0)), rec("t2", Some(2)), rec("v1", Some(7)), rec("v2", Some(0)), rec("zz", Some(1))];
        let m = match_predictions(&ts, "ts", &records, "p", &MatchOptions::default()).unwrap();
        let outcomes: Vec<Outcome> = m.results.iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [Outcome::Correct, Outcome::Wrong, Outcome::Missing, Outcome::Invalid, Outcome::Correct]);
        assert_eq!((m.counts.missing, m.counts.invalid, m.counts.extra, m.counts.answered), (1, 1, 1, 3));
        let rows = accuracy_by_task(&m.results, ResampleUnit::Question, &cfg(), "k");
        let got: Vec<(&str, usize, usize, f64)> =
            rows.iter().map(|r| (r.task.as_str(), r.questions, r.correct, r.accuracy.value)).collect();
        assert_eq!(got, vec![("textual_cloze", 3, 1, 1.0 / 3.0), ("visual_cloze", 2, 1, 0.5), ("all", 5, 2, 0.4)]);
        for r in &rows {
            let ci = r.accuracy.ci.unwrap();
            assert!(ci.low <= r.accuracy.value && r.accuracy.value <= ci.high);
        }
        // Recipe-level resampling gives another (valid) interval.
        let by_recipe = accuracy_by_task(&m.results, ResampleUnit::Recipe, &cfg(), "k");
        assert_eq!(by_recipe[2].accuracy.value, 0.4);
    }

    #[test]
    fn negative_and_null_answers() {
        let ts = taskset();
        let records = vec![rec("t1", Some(-1)), rec("t2", None), rec("t3", Some(2))];
        let m = match_predictions(&ts, "ts", &records, "p", &MatchOptions::default()).unwrap();
        assert_eq!(m.results[0].outcome, Outcome::Invalid);
        assert_eq!(m.results[1].outcome, Outcome::Missing);
        assert_eq!(m.results[2].outcome, Outcome::Correct);
    }

    #[test]
    fn predictions_for_another_task_set_are_refused() {
        let ts = taskset();
        let records = vec![rec("x1", Some(0)), rec("x2", Some(0))];
        let e = match_predictions(&ts, "ts", &records, "p.jsonl", &MatchOptions::default()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(msg.contains("only 0 of 2 predictions"), "{msg}");
        assert!(msg.contains("\"x1\""), "{msg}");
        // Below the threshold (1 of 3 < 0.5) is refused; with a lower threshold it is scored.
        let records = vec![rec("t1", Some(0)), rec("x1", Some(0)), rec("x2", Some(0))];
        assert!(match_predictions(&ts, "ts", &records, "p", &MatchOptions::default()).is_err());
        let lenient = MatchOptions { min_overlap: 0.3, ..Default::default() };
        let m = match_predictions(&ts, "ts", &records, "p", &lenient).unwrap();
        assert_eq!(m.counts.extra, 2);
    }

    #[test]
    fn task_filter() {
        let ts = taskset();
        let records = vec![rec("t1", Some(0)), rec("v2", Some(0))];
        let opts = MatchOptions { task: Some("visual_cloze".into()), ..Default::default() };
        let m = match_predictions(&ts, "ts", &records, "p", &opts).unwrap();
        assert_eq!(m.results.len(), 2);
        assert_eq!(m.counts.other_task, 1);
        let bad = MatchOptions { task: Some("visual_ordering".into()), ..Default::default() };
        let e = match_predictions(&ts, "ts", &records, "p", &bad).unwrap_err().to_string();
        assert!(e.contains("has no `visual_ordering` questions"), "{e}");
    }

    #[test]
    fn routing_among_sets() {
        let a = taskset();
        let v = serde_json::json!({"data": [{"qid": "b1", "recipe_id": "r", "task": "textual_cloze",
            "question": ["q"], "choice_list": ["a", "b"], "answer": 1}]});
        let b = TaskSet::from_json(&v, Path::new("b.json")).unwrap();
        let (routed, rest) =
            route_by_qid(&[("a", &a), ("b", &b)], vec![rec("t1", Some(0)), rec("b1", Some(1)), rec("q", None)])
                .unwrap();
        assert_eq!(routed[0].len(), 1);
        assert_eq!(routed[1][0].qid, "b1");
        assert_eq!(rest.len(), 1);
        let e = route_by_qid(&[("a", &a), ("a2", &a)], vec![]).unwrap_err().to_string();
        assert!(e.contains("is in both a and a2"), "{e}");
    }

    #[test]
    fn markdown_lists_counts() {
        let ts = taskset();
        let records = vec![rec("t1", Some(0)), rec("zz", Some(0)), rec("t2", Some(1)), rec("v1", Some(3))];
        let opts = ScoreOptions { bootstrap: cfg(), ..Default::default() };
        let (report, _) = score_set("ts", &ts, &records, "p", &opts).unwrap();
        let md = markdown(&[report], &cfg());
        assert!(md.starts_with("| task | questions | accuracy (%) | 95% CI | missing | invalid |"), "{md}");
        assert!(md.contains("| textual_cloze | 3 | 66.7 |"), "{md}");
        assert!(md.contains("2 of 5 questions have no prediction"), "{md}");
        assert!(md.contains("1 predictions have a qid not in the task set"), "{md}");
    }
}
