//! R2VQ answers scored as the SemEval-2022 Task 9 leaderboard scored them: exact match (EM) and token-level F1,
//! here per question family as well as overall, with percentile bootstrap intervals.
//!
//! Where the semantics come from: the task's Codalab scoring program (it reads `ref/gold.json` and
//! `res/r2vq_pred.json`, `{recipe: {question: answer or null}}`, and prints EM and F1 averaged over all questions),
//! which uses SQuAD v1.1's `normalize_answer`, `exact_match_score` and `f1_score` (Rajpurkar et al. 2016):
//! lower-case, drop ASCII punctuation, replace the words a/an/the (regex `\b(a|an|the)\b`) by a space, collapse
//! whitespace; F1 over the bags of normalised tokens, 0 when they share none (two empty answers: EM 1, F1 0); the
//! best score over a question's gold answers. A `null` answer matches only `null` (EM = F1 = 1).
//!
//! Two deliberate differences, both for files the official program could not score: a question without a
//! prediction scores 0 (the official program stops with a KeyError), and the string "N/A" — the answer the
//! SemEval files give unanswerable questions — counts as `null` on both sides (the official gold file is not
//! public; participants wrote `null` for these questions).
//!
//! Predictions are JSONL `{"id", "answer"}` keyed by [`question_key`] (`<recipe>/<family>-<index>`), or the
//! official `r2vq_pred.json` layout. An id that names no gold question is refused (the file is for other data).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Serialize;
use stepwise_core::r2vq::{QuestionId, R2vqDocument, family_name, routes_text};
use stepwise_core::{Error, Location, Result};

use crate::bootstrap::{BootstrapConfig, Estimate, Unit, mean_estimates};
use crate::predictions::check_unique;

use stepwise_core::r2vq::answer_match::best_over;
pub use stepwise_core::r2vq::answer_match::{exact_match, normalize_answer, token_f1};

/// A question with its gold answers.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldQuestion {
    /// `<recipe>/<family>-<index>`.
    pub key: String,
    pub recipe: String,
    pub family: u32,
    pub question: String,
    pub answers: Vec<String>,
}

/// The key of a question in predictions files.
pub fn question_key(recipe: &str, id: QuestionId) -> String {
    format!("{recipe}/{id}")
}

/// The answered questions of a document (questions without an `# answer` line are left out).
pub fn gold_questions(doc: &R2vqDocument) -> Vec<GoldQuestion> {
    let mut out = Vec::new();
    for r in &doc.recipes {
        for q in r.questions() {
            if let Some(a) = q.answer {
                out.push(GoldQuestion {
                    key: question_key(&r.id, q.id),
                    recipe: r.id.clone(),
                    family: q.id.family,
                    question: q.question,
                    answers: std::iter::once(a).chain(q.alternatives).collect(),
                });
            }
        }
    }
    out
}

/// One prediction line.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerPrediction {
    pub key: String,
    /// `None`: the prediction is `null` (no answer).
    pub answer: Option<String>,
    /// Line in the predictions file.
    pub line: usize,
    /// How `stepwise r2vq answer` answered it (program, text, unanswerable, not_understood), when the file says.
    pub route: Option<String>,
}

/// Read predictions: JSONL `{"id", "answer"}` (answer a string, a number, or `null`), or the official
/// `r2vq_pred.json` object `{recipe: {question: answer}}`; errors name the file, line and field; a repeated id is
/// an error.
pub fn read_answer_predictions(path: &Path) -> Result<Vec<AnswerPrediction>> {
    let text = stepwise_core::json::read_text(path)?;
    // Each prediction with where it was read from (`file:line` or `file:recipe.question`), for duplicate errors.
    let mut out: Vec<(AnswerPrediction, String)> = Vec::new();
    match stepwise_core::json::parse_json(path, &text) {
        Ok(serde_json::Value::Object(recipes)) if !recipes.is_empty() && recipes.values().all(|v| v.is_object()) => {
            for (recipe, questions) in &recipes {
                for (q, a) in questions.as_object().into_iter().flatten() {
                    let field = format!("{recipe}.{q}");
                    let location = Location::Record(field.clone());
                    let id: QuestionId =
                        q.parse().map_err(|e: String| Error::field(path, location.clone(), field.clone(), e))?;
                    let answer = answer_value(a).map_err(|m| Error::field(path, location, field.clone(), m))?;
                    let origin = format!("{}:{field}", path.display());
                    let key = question_key(recipe.trim(), id);
                    out.push((AnswerPrediction { key, answer, line: 0, route: None }, origin));
                }
            }
        }
        _ => {
            for r in stepwise_core::json::parse_jsonl(path, &text)? {
                let location = Location::Line { line: r.line, column: None };
                let obj = stepwise_core::json::Obj::new(&r.value, path, &location, "")?;
                let key = obj.req_str("id")?.to_string();
                let answer = match r.value.get("answer") {
                    None => return Err(obj.error("answer", "missing (write null for no answer)")),
                    Some(v) => answer_value(v).map_err(|m| obj.error("answer", m))?,
                };
                let origin = format!("{}:{}", path.display(), r.line);
                let route = obj.opt_str("route")?.map(str::to_string);
                out.push((AnswerPrediction { key, answer, line: r.line, route }, origin));
            }
        }
    }
    check_unique(out.iter().map(|(p, origin)| (p.key.as_str(), origin.as_str())))?;
    Ok(out.into_iter().map(|(p, _)| p).collect())
}

/// A JSON answer: a string, a number or boolean (written as the gold answer would be), or `null`.
fn answer_value(v: &serde_json::Value) -> std::result::Result<Option<String>, String> {
    match v {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s.clone())),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Ok(Some(v.to_string())),
        _ => Err("must be a string, a number or null".into()),
    }
}

/// EM and F1 of a group of questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupScore {
    /// The family number (`None`: all questions).
    pub family: Option<u32>,
    pub name: String,
    pub questions: usize,
    /// Questions without a prediction (scored 0).
    pub missing: usize,
    pub em: Estimate,
    pub f1: Estimate,
    /// Questions per answering route, when the predictions say (`stepwise r2vq answer`'s `route`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub routes: BTreeMap<String, usize>,
}

/// One question's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionScore {
    pub id: String,
    pub family: u32,
    pub prediction: Option<String>,
    pub gold: Vec<String>,
    pub em: f64,
    pub f1: f64,
}

/// Scores per family (family order) and overall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct R2vqScores {
    pub families: Vec<GroupScore>,
    pub overall: GroupScore,
    pub questions: Vec<QuestionScore>,
}

/// Score `predictions` (read from `path`, named in errors) against `gold`. The bootstrap resamples recipes (all
/// questions of a recipe together: they share one annotation); each group has its own seed key (`r2vq/all`,
/// `r2vq/family/<f>`), so its intervals do not depend on the other groups.
pub fn score(
    gold: &[GoldQuestion],
    predictions: &[AnswerPrediction],
    path: &Path,
    config: &BootstrapConfig,
) -> Result<R2vqScores> {
    let known: HashMap<&str, usize> = gold.iter().enumerate().map(|(i, g)| (g.key.as_str(), i)).collect();
    // Outer `None`: no prediction; inner `None`: the prediction is no answer.
    let mut predicted: Vec<Option<Option<&str>>> = vec![None; gold.len()];
    let mut routes: Vec<Option<&str>> = vec![None; gold.len()];
    for p in predictions {
        let Some(&i) = known.get(p.key.as_str()) else {
            let example = gold.first().map_or(String::new(), |g| format!(" (ids look like {:?})", g.key));
            let location = if p.line > 0 { Location::Line { line: p.line, column: None } } else { Location::File };
            return Err(Error::field(
                path,
                location,
                "id",
                format!("{:?} names no question of the gold data{example}", p.key),
            ));
        };
        predicted[i] = Some(p.answer.as_deref());
        routes[i] = p.route.as_deref();
    }
    let questions: Vec<QuestionScore> = gold
        .iter()
        .zip(&predicted)
        .map(|(g, p)| {
            let best = |f: fn(Option<&str>, Option<&str>) -> f64| p.map_or(0.0, |p| best_over(f, p, &g.answers));
            QuestionScore {
                id: g.key.clone(),
                family: g.family,
                prediction: p.flatten().map(str::to_string),
                gold: g.answers.clone(),
                em: best(exact_match),
                f1: best(token_f1),
            }
        })
        .collect();
    let mut recipe_ids: BTreeMap<&str, usize> = BTreeMap::new();
    for g in gold {
        let n = recipe_ids.len();
        recipe_ids.entry(&g.recipe).or_insert(n);
    }
    let group = |family: Option<u32>, rows: &[usize]| -> GroupScore {
        let em: Vec<f64> = rows.iter().map(|&i| questions[i].em).collect();
        let f1: Vec<f64> = rows.iter().map(|&i| questions[i].f1).collect();
        let clusters: Vec<usize> = rows.iter().map(|&i| recipe_ids[gold[i].recipe.as_str()]).collect();
        let key = match family {
            Some(f) => format!("r2vq/family/{f}"),
            None => "r2vq/all".to_string(),
        };
        let est = mean_estimates(&[&em, &f1], Unit::Clusters(&clusters), config, &key);
        GroupScore {
            family,
            name: family.map_or_else(|| "all".to_string(), family_name),
            questions: rows.len(),
            missing: rows.iter().filter(|&&i| predicted[i].is_none()).count(),
            em: est[0],
            f1: est[1],
            routes: rows.iter().filter_map(|&i| routes[i]).fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r.to_string()).or_default() += 1;
                m
            }),
        }
    };
    let mut by_family: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, g) in gold.iter().enumerate() {
        by_family.entry(g.family).or_default().push(i);
    }
    let families = by_family.iter().map(|(&f, rows)| group(Some(f), rows)).collect();
    let all: Vec<usize> = (0..gold.len()).collect();
    Ok(R2vqScores { families, overall: group(None, &all), questions })
}

/// The report of R2VQ answers to `doc`'s questions: what was scored and how, then [`markdown_table`].
pub fn markdown(scores: &R2vqScores, doc: &R2vqDocument, config: &BootstrapConfig) -> String {
    let mut markdown = format!(
        "R2VQ answers: {} questions of {} recipe{}; EM and token F1 in % (SQuAD normalisation){}\n\n",
        scores.questions.len(),
        doc.recipes.len(),
        if doc.recipes.len() == 1 { "" } else { "s" },
        if config.resamples > 0 {
            format!(", {:.0}% intervals over {} recipe resamples", 100.0 * config.confidence, config.resamples)
        } else {
            String::new()
        }
    );
    markdown.push_str(&markdown_table(scores));
    markdown
}

impl R2vqScores {
    /// The results file (`kind` r2vq).
    pub fn results_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "r2vq",
            "task": "r2vq",
            "families": self.families,
            "overall": self.overall,
        })
    }
}

/// The results as a Markdown table (EM and F1 in percent with their intervals).
pub fn markdown_table(scores: &R2vqScores) -> String {
    let pct = |e: &Estimate| match e.ci {
        Some(ci) => format!("{:.1} [{:.1}, {:.1}]", 100.0 * e.value, 100.0 * ci.low, 100.0 * ci.high),
        None => format!("{:.1}", 100.0 * e.value),
    };
    let with_routes = !scores.overall.routes.is_empty();
    let mut s = String::from("| family | questions | missing | EM | F1 |");
    s.push_str(if with_routes {
        " answered by |\n|---|---:|---:|---:|---:|---|\n"
    } else {
        "\n|---|---:|---:|---:|---:|\n"
    });
    for g in scores.families.iter().chain(std::iter::once(&scores.overall)) {
        let label = match g.family {
            Some(f) => format!("{f} {}", g.name),
            None => "**all**".to_string(),
        };
        s.push_str(&format!("| {label} | {} | {} | {} | {} |", g.questions, g.missing, pct(&g.em), pct(&g.f1)));
        if with_routes {
            s.push_str(&format!(" {} |", routes_text(g.routes.iter().map(|(r, n)| (r.as_str(), *n)))));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_em_and_f1_follow_squad() {
        assert_eq!(normalize_answer("The  Pan!"), "pan");
        assert_eq!(normalize_answer("N/A"), "na");
        assert_eq!(
            normalize_answer("theme of a\u{2019}s tHe_x"),
            "theme of \u{2019}s thex",
            "only whole words; _ is punctuation"
        );
        let (em, f1) = (|p, g| exact_match(Some(p), Some(g)), |p, g| token_f1(Some(p), Some(g)));
        assert_eq!(em("a pan", "The pan."), 1.0);
        assert_eq!(em("pot", "pan"), 0.0);
        // Shared tokens 2 ("by", "knife"), prediction 3 tokens, gold 4 → P 2/3, R 1/2, F1 4/7.
        assert!((f1("by sharp knife", "by using a big knife") - 4.0 / 7.0).abs() < 1e-12);
        // SQuAD v1.1: two answers that normalise to nothing match exactly but share no token.
        assert_eq!((em("the", "a"), f1("the", "a")), (1.0, 0.0));
        assert_eq!(f1("the", "pan"), 0.0);
        // Repeated tokens count once each.
        assert!((f1("pan pan", "pan") - 2.0 / 3.0).abs() < 1e-12);
        // No answer: null and "N/A" are the same, and match only each other.
        assert_eq!((exact_match(None, Some("N/A")), token_f1(Some("n/a "), Some("N/A"))), (1.0, 1.0));
        assert_eq!((exact_match(None, Some("pan")), token_f1(Some("N/A"), Some("na"))), (0.0, 0.0));
    }

    fn gold() -> Vec<GoldQuestion> {
        let q = |recipe: &str, f: u32, i: u32, a: &str| GoldQuestion {
            key: question_key(recipe, QuestionId { family: f, index: i }),
            recipe: recipe.into(),
            family: f,
            question: "?".into(),
            answers: vec![a.into()],
        };
        vec![
            q("r-1", 0, 0, "2"),
            q("r-1", 4, 0, "the first event"),
            q("r-2", 4, 0, "the second event"),
            q("r-2", 18, 0, "N/A"),
        ]
    }

    #[test]
    fn families_and_overall_are_scored_missing_is_wrong_and_unknown_ids_are_refused() {
        let p = |key: &str, answer: &str, line| AnswerPrediction {
            key: key.into(),
            answer: Some(answer.into()),
            line,
            route: (line == 1).then(|| "program".to_string()),
        };
        let mut preds = vec![p("r-1/0-0", "2", 1), p("r-1/4-0", "first event", 2), p("r-2/18-0", "n/a", 3)];
        preds[2].answer = None;
        let cfg = BootstrapConfig { resamples: 200, ..BootstrapConfig::default() };
        let s = score(&gold(), &preds, Path::new("p.jsonl"), &cfg).unwrap();
        assert_eq!(s.families.iter().map(|g| g.family.unwrap()).collect::<Vec<_>>(), [0, 4, 18]);
        let f4 = &s.families[1];
        assert_eq!((f4.questions, f4.missing, f4.em.value), (2, 1, 0.5));
        assert_eq!(s.overall.em.value, 0.75);
        assert!(s.overall.f1.ci.is_some());
        let table = markdown_table(&s);
        assert!(
            table.contains("| 4 event ordering | 2 | 1 | 50.0") && table.contains("| **all** | 4 | 1 | 75.0"),
            "{table}"
        );
        assert!(
            table.contains("answered by |") && table.contains("| program 1 |"),
            "routes when the file says: {table}"
        );
        let e = score(&gold(), &[p("r-3/0-0", "1", 7)], Path::new("p.jsonl"), &cfg).unwrap_err().to_string();
        assert!(e.starts_with("p.jsonl:7: field `id`") && e.contains("r-3/0-0") && e.contains("r-1/0-0"), "{e}");
    }

    #[test]
    fn prediction_files_are_read_with_line_errors_and_repeated_ids_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.jsonl");
        std::fs::write(
            &f,
            "{\"id\": \"r-1/0-0\", \"answer\": 2}\n{\"id\": \"r-1/4-0\", \"answer\": \"the first event\"}\n",
        )
        .unwrap();
        let got = read_answer_predictions(&f).unwrap();
        assert_eq!((got[0].answer.as_deref(), got[1].line), (Some("2"), 2));
        // The official submission layout.
        std::fs::write(&f, "{\"r-378\": {\"4-1\": \"the second event\", \"0-5\": \"1\", \"18-1\": null}}").unwrap();
        let got = read_answer_predictions(&f).unwrap();
        let keys: Vec<(&str, Option<&str>)> = got.iter().map(|p| (p.key.as_str(), p.answer.as_deref())).collect();
        // Recipe keys equal after trimming name the same questions.
        std::fs::write(&f, "{\"r-1\": {\"4-1\": \"a\"}, \" r-1\": {\"4-1\": \"b\"}}").unwrap();
        assert!(read_answer_predictions(&f).unwrap_err().to_string().contains("duplicate id \"r-1/4-1\""));
        assert_eq!(keys, [("r-378/0-5", Some("1")), ("r-378/18-1", None), ("r-378/4-1", Some("the second event"))]);
        std::fs::write(&f, "{\"id\": \"a\", \"answer\": \"x\"}\n{\"id\": \"a\", \"answer\": \"y\"}\n").unwrap();
        assert!(read_answer_predictions(&f).unwrap_err().to_string().contains("duplicate id \"a\""));
        std::fs::write(&f, "{\"id\": \"a\", \"answer\": [1]}\n").unwrap();
        let e = read_answer_predictions(&f).unwrap_err().to_string();
        assert!(e.contains("p.jsonl:1") && e.contains("`answer`"), "{e}");
    }
}

/// Precision, recall and F1 of one annotation label (counts of items: mentions, links, hidden arguments).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelScore {
    pub label: String,
    pub gold: usize,
    pub predicted: usize,
    pub correct: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// The cooking-role layer of `predicted` against `gold` (same recipes, same words per step; sentences may split
/// steps differently, so tokens are placed by their index in the step): per ENTITY kind the mentions' first
/// tokens, the PART links (participant token → event token), and per hidden role the (event, value name) pairs.
pub fn tagging_scores(gold: &R2vqDocument, predicted: &R2vqDocument) -> Vec<LabelScore> {
    use std::collections::BTreeSet;
    use stepwise_core::r2vq::EntityTag;
    type Item = (String, usize, usize, String);
    // label -> items (recipe, step, token in step, what)
    fn items(doc: &R2vqDocument) -> BTreeMap<String, BTreeSet<Item>> {
        let mut out: BTreeMap<String, BTreeSet<Item>> = BTreeMap::new();
        for r in &doc.recipes {
            for (s, p) in r.steps().enumerate() {
                let mut offset = 0;
                for sentence in &p.sentences {
                    for (k, t) in sentence.tokens.iter().enumerate() {
                        let at = offset + k;
                        let mut add = |label: String, what: String| {
                            out.entry(label).or_default().insert((r.id.clone(), s, at, what));
                        };
                        if let EntityTag::Begin(kind) = t.entity {
                            add(format!("mention {}", kind.as_str()), String::new());
                        }
                        if let Some(event) = t.part {
                            add("PART link".into(), (offset + event - 1).to_string());
                        }
                        for h in &t.hidden {
                            for v in &h.values {
                                add(format!("hidden {}", h.role.as_str()), v.name.to_lowercase());
                            }
                        }
                    }
                    offset += sentence.tokens.len();
                }
            }
        }
        out
    }
    let (g, p) = (items(gold), items(predicted));
    let labels: BTreeSet<&String> = g.keys().chain(p.keys()).collect();
    let empty = BTreeSet::new();
    labels
        .into_iter()
        .map(|label| {
            let (gi, pi) = (g.get(label).unwrap_or(&empty), p.get(label).unwrap_or(&empty));
            let correct = gi.intersection(pi).count();
            let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            let (precision, recall) = (ratio(correct, pi.len()), ratio(correct, gi.len()));
            let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
            LabelScore { label: label.clone(), gold: gi.len(), predicted: pi.len(), correct, precision, recall, f1 }
        })
        .collect()
}

/// A Markdown table of [`tagging_scores`] (percentages).
pub fn tagging_table(scores: &[LabelScore]) -> String {
    let mut s = String::from(
        "| label | gold | predicted | correct | precision | recall | F1 |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for l in scores {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} |\n",
            l.label,
            l.gold,
            l.predicted,
            l.correct,
            100.0 * l.precision,
            100.0 * l.recall,
            100.0 * l.f1
        ));
    }
    s
}
