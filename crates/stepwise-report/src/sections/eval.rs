//! Evaluations (`stepwise eval`): multiple-choice accuracy per task with intervals, and sequencing metrics.

use std::path::Path;

use stepwise_core::Result;

use super::sequencing::METRICS;
use super::{Ctx, command_of, count};
use stepwise_score::markdown::{signed_number_interval, signed_percent_interval};

use crate::doc::{Block, Section, Table, num_ci, pct_ci};
use crate::plots::BarChart;
use crate::read::{Estimate, JsonFile};
use crate::scan::Artefact;

/// One scored task of a multiple-choice evaluation.
pub struct TaskScore {
    pub set: String,
    pub predictions: Option<String>,
    /// The models that made the predictions, when the predictions name them.
    pub models: Vec<String>,
    pub task: String,
    pub questions: u64,
    pub accuracy: Estimate,
    pub missing: u64,
    pub invalid: u64,
}

/// One group of a sequencing evaluation.
pub struct SeqScore {
    pub group: String,
    pub sequences: u64,
    pub metrics: Vec<Option<Estimate>>,
}

/// One family (or all questions) of an R2VQ evaluation.
pub struct QaScore {
    pub group: String,
    pub questions: u64,
    pub missing: u64,
    pub em: Estimate,
    pub f1: Estimate,
    /// Questions per answering route ("program 12 · text 3"), when the predictions said.
    pub routes: Option<String>,
}

/// One metric of one group in a paired comparison (`eval --versus`).
pub struct CompareRow {
    pub group: String,
    pub label: String,
    pub share: bool,
    pub items: u64,
    pub a: Estimate,
    pub b: Estimate,
    pub difference: Estimate,
    pub verdict: String,
}

pub enum EvalBody {
    MultipleChoice(Vec<TaskScore>),
    /// R2VQ answers: EM and F1 per question family, the last row all questions.
    R2vq(Vec<QaScore>),
    /// Two methods on the same items (`eval --versus`): A − B, paired.
    Comparison {
        a: Vec<String>,
        b: Vec<String>,
        unit: String,
        rows: Vec<CompareRow>,
    },
    Sequencing {
        groups: Vec<SeqScore>,
        scored: Option<u64>,
        alternative_chosen: Option<u64>,
        models: Vec<String>,
    },
}

pub struct EvalInfo {
    pub rel: String,
    pub command: Option<String>,
    pub body: EvalBody,
}

pub fn read(a: &Artefact) -> Result<EvalInfo> {
    let f = JsonFile::read(&a.path)?;
    let r = f.root();
    let kind = r.req_str("kind")?;
    let body = match kind {
        "multiple_choice" => {
            let mut scores = Vec::new();
            for set in r.req("sets")?.items()? {
                let name = set.opt_str("name")?.unwrap_or("–").to_string();
                let predictions = set.opt_str("predictions")?.map(str::to_string);
                let models = string_list(set.get("models")?)?;
                for t in set.req("tasks")?.items()? {
                    scores.push(TaskScore {
                        set: name.clone(),
                        predictions: predictions.clone(),
                        models: models.clone(),
                        task: t.req_str("task")?.to_string(),
                        questions: t.req_u64("questions")?,
                        accuracy: t.req("accuracy")?.estimate()?,
                        missing: t.opt_u64("missing")?.unwrap_or(0),
                        invalid: t.opt_u64("invalid")?.unwrap_or(0),
                    });
                }
            }
            EvalBody::MultipleChoice(scores)
        }
        "sequencing" => {
            let mut groups = Vec::new();
            for g in r.req("groups")?.items()? {
                let m = g.req("metrics")?;
                groups.push(SeqScore {
                    group: g.req_str("group")?.to_string(),
                    sequences: g.req_u64("sequences")?,
                    metrics: METRICS.iter().map(|(k, _, _)| m.opt_estimate(k)).collect::<Result<_>>()?,
                });
            }
            let counts = r.get("counts")?;
            let c = |k: &str| counts.as_ref().map_or(Ok(None), |c| c.opt_u64(k));
            EvalBody::Sequencing {
                groups,
                scored: c("scored")?,
                alternative_chosen: c("alternative_chosen")?,
                models: string_list(r.get("models")?)?,
            }
        }
        "r2vq" => {
            let mut rows = Vec::new();
            for g in r.req("families")?.items()?.into_iter().chain([r.req("overall")?]) {
                rows.push(QaScore {
                    group: g.req_str("name")?.to_string(),
                    questions: g.req_u64("questions")?,
                    missing: g.req_u64("missing")?,
                    em: g.req("em")?.estimate()?,
                    f1: g.req("f1")?.estimate()?,
                    routes: match g.get("routes")? {
                        Some(r) => {
                            let entries = r.entries()?;
                            let counts =
                                entries.iter().map(|(k, v)| Ok((*k, v.u64()? as usize))).collect::<Result<Vec<_>>>()?;
                            Some(stepwise_core::r2vq::routes_text(counts))
                        }
                        None => None,
                    },
                });
            }
            EvalBody::R2vq(rows)
        }
        "comparison" => {
            let mut rows = Vec::new();
            for row in r.req("rows")?.items()? {
                rows.push(CompareRow {
                    group: row.req_str("group")?.to_string(),
                    label: row.req_str("label")?.to_string(),
                    share: row.req("share")?.bool()?,
                    items: row.req_u64("items")?,
                    a: row.req("a")?.estimate()?,
                    b: row.req("b")?.estimate()?,
                    difference: row.req("difference")?.estimate()?,
                    verdict: row.req_str("verdict")?.to_string(),
                });
            }
            EvalBody::Comparison {
                a: string_list(Some(r.req("a")?))?,
                b: string_list(Some(r.req("b")?))?,
                unit: r.req_str("bootstrap_unit")?.to_string(),
                rows,
            }
        }
        other => {
            return Err(r.req("kind")?.error(format!(
                "unknown evaluation kind `{other}` (expected multiple_choice, sequencing, r2vq or comparison)"
            )));
        }
    };
    let dir = a.path.parent().unwrap_or(Path::new("."));
    let is_folder = a.path.file_name().is_some_and(|n| n == "results.json") && dir.join("manifest.json").is_file();
    let rel = if is_folder { a.rel.strip_suffix("/results.json").unwrap_or(&a.rel).to_string() } else { a.rel.clone() };
    Ok(EvalInfo { rel, command: if is_folder { command_of(dir) } else { None }, body })
}

/// An optional list of strings (`models`); absent in evaluations written before models were recorded.
fn string_list(v: Option<crate::read::Node<'_>>) -> Result<Vec<String>> {
    match v {
        None => Ok(Vec::new()),
        Some(v) => v.items()?.iter().map(|m| m.str().map(str::to_string)).collect(),
    }
}

pub fn section(ctx: &Ctx, evals: &[EvalInfo]) -> Result<Option<Section>> {
    if evals.is_empty() {
        return Ok(None);
    }
    let mut s = Section::new("evaluation", "Evaluation of predictions");
    s.para("Predictions scored by `stepwise eval`: missing predictions count as wrong; intervals are 95% bootstrap intervals.");
    for (ei, e) in evals.iter().enumerate() {
        s.push(Block::Heading(format!("`{}`", e.rel)));
        if let Some(c) = &e.command {
            s.para(format!("Made by `{c}`."));
        }
        match &e.body {
            EvalBody::MultipleChoice(scores) => {
                let mut t = Table::new(&[
                    "task set",
                    "predictions",
                    "model",
                    "task",
                    ">questions",
                    "accuracy %",
                    ">missing",
                    ">invalid",
                ]);
                for sc in scores {
                    t.row(vec![
                        sc.set.clone(),
                        sc.predictions.as_deref().map_or("–".into(), |p| format!("`{p}`")),
                        if sc.models.is_empty() { "–".into() } else { sc.models.join(", ") },
                        sc.task.clone(),
                        count(sc.questions),
                        pct_ci(sc.accuracy.value, sc.accuracy.ci),
                        count(sc.missing),
                        count(sc.invalid),
                    ]);
                }
                s.table(t);
                let per_task: Vec<&TaskScore> = scores.iter().filter(|x| x.task != "all").collect();
                if per_task.len() > 1 {
                    let cats = per_task.iter().map(|x| x.task.clone()).collect();
                    let chart = BarChart::new("Accuracy per task", "task", "accuracy", cats).with_series(
                        "accuracy",
                        per_task.iter().map(|x| Some(x.accuracy.value)).collect(),
                        Some(per_task.iter().map(|x| x.accuracy.ci).collect()),
                    );
                    let chart = BarChart { y_range: Some((0.0, 1.0)), ..chart };
                    s.push(Block::Figures(vec![ctx.plot(
                        &format!("eval-{ei}"),
                        format!("Accuracy per task of `{}` with 95% intervals.", e.rel),
                        &chart,
                    )?]));
                }
            }
            EvalBody::R2vq(rows) => {
                s.para("R2VQ answers: exact match and token F1 after SQuAD normalisation, per question family.");
                let with_routes = rows.iter().any(|r| r.routes.is_some());
                let mut cols = vec!["family", ">questions", ">missing", ">EM %", ">F1 %"];
                if with_routes {
                    s.para(
                        "Answered by: a family's program on the annotation, the text method (where the annotation \
                         lacks the layer the program reads, or a fitted policy prefers it), or unanswerable (N/A).",
                    );
                    cols.push("answered by");
                }
                let mut t = Table::new(&cols);
                for r in rows {
                    let mut row = vec![
                        r.group.clone(),
                        count(r.questions),
                        count(r.missing),
                        pct_ci(r.em.value, r.em.ci),
                        pct_ci(r.f1.value, r.f1.ci),
                    ];
                    if with_routes {
                        row.push(r.routes.clone().unwrap_or_else(|| "–".into()));
                    }
                    t.row(row);
                }
                s.table(t);
                let families = &rows[..rows.len().saturating_sub(1)];
                if families.len() > 1 {
                    let cats = families.iter().map(|r| r.group.clone()).collect();
                    let chart = BarChart::new("EM and F1 per family", "family", "score", cats)
                        .with_series(
                            "EM",
                            families.iter().map(|r| Some(r.em.value)).collect(),
                            Some(families.iter().map(|r| r.em.ci).collect()),
                        )
                        .with_series(
                            "F1",
                            families.iter().map(|r| Some(r.f1.value)).collect(),
                            Some(families.iter().map(|r| r.f1.ci).collect()),
                        );
                    let chart = BarChart { y_range: Some((0.0, 1.0)), ..chart };
                    s.push(Block::Figures(vec![ctx.plot(
                        &format!("eval-{ei}"),
                        format!("EM and F1 per family of `{}` with 95% intervals.", e.rel),
                        &chart,
                    )?]));
                }
            }
            EvalBody::Comparison { a, b, unit, rows } => {
                let files = |f: &[String]| f.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ");
                s.para(format!(
                    "Two methods on the same items: A = {}, B = {} (a side with several files, e.g. seeds, is their \
                     per-item mean). A − B is paired (bootstrap over {unit}s, A and B on the same resamples); outside \
                     noise when its interval excludes 0.",
                    files(a),
                    files(b)
                ));
                let mut t = Table::new(&["group", "metric", ">n", "A", "B", "A − B", "verdict"]);
                for r in rows {
                    let (a, b, d) = if r.share {
                        (
                            pct_ci(r.a.value, r.a.ci),
                            pct_ci(r.b.value, r.b.ci),
                            signed_percent_interval(r.difference.value, r.difference.ci),
                        )
                    } else {
                        (
                            num_ci(r.a.value, r.a.ci, 3),
                            num_ci(r.b.value, r.b.ci, 3),
                            signed_number_interval(r.difference.value, r.difference.ci, 3),
                        )
                    };
                    let label = if r.share { format!("{} %", r.label) } else { r.label.clone() };
                    t.row(vec![r.group.clone(), label, count(r.items), a, b, d, r.verdict.clone()]);
                }
                s.table(t);
            }
            EvalBody::Sequencing { groups, scored, alternative_chosen, models } => {
                if !models.is_empty() {
                    s.para(format!("Predictions made by {}.", models.join(", ")));
                }
                let mut cols = vec!["group".to_string(), ">sequences".into()];
                cols.extend(METRICS.iter().map(|(_, c, _)| format!(">{c}")));
                let mut t = Table::new(&cols);
                for g in groups {
                    let mut row = vec![g.group.clone(), count(g.sequences)];
                    row.extend(METRICS.iter().zip(&g.metrics).map(|((_, _, share), m)| match m {
                        None => "–".into(),
                        Some(m) if *share => pct_ci(m.value, m.ci),
                        Some(m) => num_ci(m.value, m.ci, 3),
                    }));
                    t.row(row);
                }
                s.para("Each sequence is scored against its best valid order (multi-reference).");
                s.table(t);
                if let (Some(n), Some(a)) = (scored, alternative_chosen) {
                    s.para(format!("{} sequences scored; for {} of them an alternative valid order matched the prediction better than the authored one.", count(*n), count(*a)));
                }
            }
        }
    }
    Ok(Some(s))
}
