//! Bias audit of a multiple-choice task set (stepwise's own or an external RecipeQA file): how much of it can be
//! answered without reading the context.
//!
//! Per task:
//! - the **Hasty Student** (RecipeQA §4.2; [`stepwise_models::hasty`]) on the item vectors;
//! - the **distance probe** (Meta-RecipeQA fig. 2; [`probe`]) and the distributions of the choice–question
//!   distances of correct and incorrect choices (for the histogram);
//! - **question overlap** (Meta-RecipeQA bias 1; [`cues::overlap_flags`]);
//! - **answer-position balance** (χ² against uniform, the majority-position baseline) and, for textual choices,
//!   **length cues** (longest / shortest choice);
//! - the **shortcut panel** ([`shortcuts`]): every distance-rank pick, the distance + rank probe and the
//!   choice-only probe side by side, with a verdict on whether the task is shortcut-free.
//!
//! A whole suite (every setting's task sets, a summary side by side, AFLite on each): [`suite`].
//!
//! Accuracies carry 95% percentile-bootstrap intervals ([`stepwise_score::bootstrap`]) resampling *procedures*
//! (questions of one recipe are correlated). Questions whose items have no vector are left out of the vector-based measures
//! and counted.

pub mod cues;
pub mod probe;
pub mod provenance;
pub mod render;
pub mod shortcuts;
pub mod suite;

use std::collections::BTreeMap;

use serde::Serialize;
use stepwise_core::taskset::PLACEHOLDER;
use stepwise_core::{Question, Task, TaskSet, TaskShape};
use stepwise_features::Metric;
use stepwise_features::knn::{distance, dot};
use stepwise_models::hasty;
use stepwise_models::logreg::LogRegConfig;
use stepwise_tasks::counts::FEW_QUESTIONS;

use provenance::{Provenance, ProvenanceSource, provenance};
use stepwise_models::question_vectors::{ItemResolver, QuestionVectors, question_vectors};
use stepwise_score::bootstrap::{BootstrapConfig, Estimate, Unit, mean_estimate};

/// How the audit runs.
#[derive(Debug, Clone, Serialize)]
pub struct AuditConfig {
    pub bootstrap: BootstrapConfig,
    /// Cross-validation folds of the distance probe.
    pub folds: usize,
    pub logreg: LogRegConfig,
    /// Bins of the distance histograms.
    pub bins: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig { bootstrap: BootstrapConfig::default(), folds: 5, logreg: LogRegConfig::default(), bins: 30 }
    }
}

/// The audit of a task set.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    pub questions: usize,
    pub tasks: Vec<TaskAudit>,
    pub config: AuditConfig,
    /// Results that rest on too few questions or are missing for lack of vectors (front-ends add how to fix it).
    pub warnings: Vec<String>,
}

/// The audit of one task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskAudit {
    pub task: Task,
    pub questions: usize,
    /// 1 / number of choices (the most common count).
    pub chance: f64,
    /// Questions whose every item has a vector (the base of the vector-based measures).
    pub with_vectors: usize,
    /// Up to five items without a vector, as examples.
    pub missing_examples: Vec<String>,
    /// Why vector-based measures are absent, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors_unavailable: Option<String>,
    pub hasty_student: Option<Estimate>,
    pub distance_probe: Option<ProbeSummary>,
    pub distances: Option<DistanceSummary>,
    pub overlap: OverlapSummary,
    pub answer_positions: Option<cues::PositionBalance>,
    pub majority_position: Option<Estimate>,
    pub longest_choice: Option<Estimate>,
    pub shortest_choice: Option<Estimate>,
    /// How far every cheap shortcut gets, and whether any beats chance (`None` when no question has vectors).
    pub shortcuts: Option<shortcuts::ShortcutPanel>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeSummary {
    pub accuracy: Estimate,
    pub folds: usize,
    pub features: &'static str,
    /// Weights of each fold's model on the standardised features [d, z, z²], and its bias.
    pub weights: Vec<Vec<f64>>,
}

/// Choice–question distances of correct and incorrect choices.
#[derive(Debug, Clone, Serialize)]
pub struct DistanceSummary {
    /// What the distance is for this task.
    pub definition: &'static str,
    pub correct_mean: f64,
    pub incorrect_mean: f64,
    /// Share of questions whose answer is the nearest choice (cloze, ordering) or the farthest item (coherence).
    pub answer_is_extreme: f64,
    pub histogram: Histogram,
    #[serde(skip)]
    pub correct: Vec<f64>,
    #[serde(skip)]
    pub incorrect: Vec<f64>,
}

/// Equal-width bins over [edges[0], edges[last]].
#[derive(Debug, Clone, Serialize)]
pub struct Histogram {
    pub edges: Vec<f64>,
    pub correct: Vec<u64>,
    pub incorrect: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OverlapSummary {
    /// Questions by where their step provenance came from (`meta`, `qid`, `unavailable`).
    pub provenance: BTreeMap<String, usize>,
    /// Questions with an answer step (cloze, coherence) and known provenance.
    pub applicable: usize,
    /// Share whose answer step is revealed by another question of the same procedure and task.
    pub same_task: Option<Estimate>,
    /// ... by another question of the same procedure in any task of the file.
    pub any_task: Option<Estimate>,
    /// ... by a later question (file order) of the same procedure and task — zero under knob 1.
    pub later_same_task: Option<Estimate>,
}

/// What the audit derives from one question's vectors.
struct Measured {
    /// The Hasty Student's pick.
    pick: usize,
    /// Per-choice distance to the question (the distance probe's d).
    distances: Vec<f64>,
    /// Per-choice relation to the other choices only (the shortcut panel's choice-only probe).
    choice_only: Vec<f64>,
}

/// The Hasty Student's pick and the per-choice values of the probes for `q`, or why its items have no vectors.
fn measure(q: &Question, task: Task, resolver: &dyn ItemResolver) -> Result<Measured, String> {
    Ok(match &question_vectors(q, task, resolver)? {
        QuestionVectors::Cloze { question, choices } => Measured {
            pick: hasty::cloze(question, choices),
            distances: cloze_distances(question, choices),
            // Each choice against the mean of the other choices: the same computation as coherence's d.
            choice_only: coherence_distances(choices),
        },
        QuestionVectors::Coherence { items } => {
            let d = coherence_distances(items);
            Measured { pick: hasty::coherence(items), choice_only: d.clone(), distances: d }
        }
        QuestionVectors::Ordering { choices } => Measured {
            pick: hasty::ordering(choices),
            distances: ordering_distances(choices),
            choice_only: shortcuts::ordering_choice_only(q),
        },
    })
}

/// The distance probe's input for `q` (its per-choice distances), or why its items have no vectors. AFLite
/// filters on the same features.
pub fn probe_question(q: &Question, task: Task, resolver: &dyn ItemResolver) -> Result<probe::ProbeQuestion, String> {
    let m = measure(q, task, resolver)?;
    Ok(probe::ProbeQuestion { qid: q.qid.clone(), distances: m.distances, answer: q.answer })
}

/// Audit every RecipeQA task present in `ts` (other task names are ignored).
pub fn audit(ts: &TaskSet, resolver: &dyn ItemResolver, cfg: &AuditConfig) -> AuditReport {
    let prov: Vec<Provenance> = ts.questions.iter().map(provenance).collect();
    let all: Vec<(&Question, &Provenance)> = ts.questions.iter().zip(&prov).collect();
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let idx: Vec<usize> = (0..ts.questions.len()).filter(|&i| ts.questions[i].task_kind() == Some(task)).collect();
        if idx.is_empty() {
            continue;
        }
        let qs: Vec<&Question> = idx.iter().map(|&i| &ts.questions[i]).collect();
        let ps: Vec<Provenance> = idx.iter().map(|&i| prov[i].clone()).collect();
        tasks.push(audit_task(task, &qs, &ps, &all, resolver, cfg));
    }
    let warnings = tasks.iter().flat_map(TaskAudit::warnings).collect();
    AuditReport { questions: ts.questions.len(), tasks, config: cfg.clone(), warnings }
}

impl TaskAudit {
    /// Measures that are missing or rest on fewer than [`FEW_QUESTIONS`] questions.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if (self.questions as u64) < FEW_QUESTIONS {
            out.push(format!(
                "{}: only {} questions, too few for the accuracies to be compared (intervals are wide)",
                self.task, self.questions
            ));
        }
        if self.with_vectors == 0 {
            out.push(format!(
                "{}: no question has vectors for all its items, so the Hasty Student, the distance probe and the \
                 distance histogram are missing",
                self.task
            ));
        } else if (self.with_vectors as u64) < FEW_QUESTIONS && self.with_vectors < self.questions {
            out.push(format!(
                "{}: the vector-based measures rest on {} of {} questions (the others lack vectors)",
                self.task, self.with_vectors, self.questions
            ));
        }
        out
    }
}

fn audit_task(
    task: Task,
    qs: &[&Question],
    ps: &[Provenance],
    all: &[(&Question, &Provenance)],
    resolver: &dyn ItemResolver,
    cfg: &AuditConfig,
) -> TaskAudit {
    let n_choices = most_common(qs.iter().map(|q| q.choice_list.len())).unwrap_or(4);
    let proc_ids = cluster_ids(qs);
    let estimate = |values: &[f64], clusters: &[usize], what: &str| -> Option<Estimate> {
        (!values.is_empty())
            .then(|| mean_estimate(values, Unit::Clusters(clusters), &cfg.bootstrap, &format!("audit/{task}/{what}")))
    };

    // --- vectors, Hasty Student, distances
    let mut missing_examples: Vec<String> = Vec::new();
    let mut hasty_correct = Vec::new();
    let mut vec_clusters = Vec::new();
    let mut probe_questions = Vec::new();
    let mut correct_d = Vec::new();
    let mut incorrect_d = Vec::new();
    let mut extreme = 0usize;
    let mut shortcut_questions = Vec::new();
    for (qi, q) in qs.iter().enumerate() {
        let Measured { pick, distances: d, choice_only } = match measure(q, task, resolver) {
            Ok(v) => v,
            Err(m) => {
                if missing_examples.len() < 5 && !missing_examples.contains(&m) {
                    missing_examples.push(m);
                }
                continue;
            }
        };
        hasty_correct.push(f64::from(pick == q.answer));
        vec_clusters.push(proc_ids[qi]);
        let ext = if task.shape() == TaskShape::OddOneOut { argmax(&d) } else { argmin(&d) };
        extreme += usize::from(ext == q.answer);
        for (c, &x) in d.iter().enumerate() {
            if c == q.answer { correct_d.push(x) } else { incorrect_d.push(x) }
        }
        shortcut_questions.push(shortcuts::ShortcutQuestion {
            procedure: q.recipe_id.clone(),
            distances: d.clone(),
            choice_only,
            answer: q.answer,
            not_reversed: (task == Task::VisualOrdering).then(|| shortcuts::not_reversed_hit(q)).flatten(),
        });
        probe_questions.push(probe::ProbeQuestion { qid: q.qid.clone(), distances: d, answer: q.answer });
    }
    let with_vectors = hasty_correct.len();
    let vectors_unavailable = (with_vectors == 0).then(|| {
        format!(
            "no question of this task has vectors for all its items{}",
            if missing_examples.is_empty() { String::new() } else { format!(" (e.g. {})", missing_examples[0]) }
        )
    });
    let hasty_student = estimate(&hasty_correct, &vec_clusters, "hasty");
    let distance_probe =
        probe::cross_validate(&probe_questions, cfg.folds, cfg.bootstrap.seed, &cfg.logreg).map(|out| {
            let acc: Vec<f64> = out.correct.iter().map(|&c| f64::from(c)).collect();
            ProbeSummary {
                accuracy: estimate(&acc, &vec_clusters, "probe").expect("the probe ran on at least one question"),
                folds: cfg.folds,
                features: "[d, z, z²], z = d standardised within the question",
                weights: out.models.iter().map(|m| m.weights.iter().copied().chain([m.bias]).collect()).collect(),
            }
        });
    let distances = (with_vectors > 0).then(|| DistanceSummary {
        definition: match task {
            Task::TextualCloze | Task::VisualCloze => "cosine distance of the choice to the mean of the question items",
            Task::VisualCoherence => "cosine distance of the item to the mean of the other items",
            Task::VisualOrdering => "mean cosine distance between consecutive items of the ordering",
        },
        correct_mean: stepwise_score::bootstrap::mean(&correct_d),
        incorrect_mean: stepwise_score::bootstrap::mean(&incorrect_d),
        answer_is_extreme: extreme as f64 / with_vectors as f64,
        histogram: histogram(&correct_d, &incorrect_d, cfg.bins),
        correct: correct_d,
        incorrect: incorrect_d,
    });
    let shortcuts = shortcuts::panel(task, &shortcut_questions, n_choices, cfg);

    // --- overlap
    let flags = cues::overlap_flags(qs, ps, all);
    let mut prov_counts: BTreeMap<String, usize> = BTreeMap::new();
    for p in ps {
        let k = match p.source {
            ProvenanceSource::Meta => "meta",
            ProvenanceSource::Qid => "qid",
            ProvenanceSource::Unavailable => "unavailable",
        };
        *prov_counts.entry(k.to_string()).or_insert(0) += 1;
    }
    let (mut same, mut any, mut later, mut ov_clusters) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, f) in flags.iter().enumerate() {
        if let Some(f) = f {
            same.push(f64::from(f.same_task));
            any.push(f64::from(f.any_task));
            later.push(f64::from(f.later_same_task));
            ov_clusters.push(proc_ids[i]);
        }
    }
    let overlap = OverlapSummary {
        provenance: prov_counts,
        applicable: same.len(),
        same_task: estimate(&same, &ov_clusters, "overlap-same-task"),
        any_task: estimate(&any, &ov_clusters, "overlap-any-task"),
        later_same_task: estimate(&later, &ov_clusters, "overlap-later"),
    };

    // --- positions and lengths
    let answer_positions = cues::position_balance(qs);
    let majority_position = answer_positions.as_ref().and_then(|b| {
        let hits: Vec<f64> = qs.iter().map(|q| f64::from(q.answer == b.majority_position)).collect();
        estimate(&hits, &proc_ids, "majority-position")
    });
    let lens: Vec<(bool, bool)> = qs.iter().filter_map(|q| cues::length_cues(q)).collect();
    let (longest_choice, shortest_choice) = if lens.len() == qs.len() && !lens.is_empty() {
        let l: Vec<f64> = lens.iter().map(|x| f64::from(x.0)).collect();
        let s: Vec<f64> = lens.iter().map(|x| f64::from(x.1)).collect();
        (estimate(&l, &proc_ids, "longest"), estimate(&s, &proc_ids, "shortest"))
    } else {
        (None, None)
    };

    TaskAudit {
        task,
        questions: qs.len(),
        chance: 1.0 / n_choices as f64,
        with_vectors,
        missing_examples,
        vectors_unavailable,
        hasty_student,
        distance_probe,
        distances,
        overlap,
        answer_positions,
        majority_position,
        longest_choice,
        shortest_choice,
        shortcuts,
    }
}

fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
    distance(a, b, Metric::Cosine) as f64
}

/// The mean of unit vectors, re-normalised: "the question" as one vector.
fn centroid(items: &[&[f32]]) -> Vec<f32> {
    let dim = items.first().map_or(0, |v| v.len());
    let mut c = vec![0f32; dim];
    for v in items {
        let n = dot(v, v).sqrt();
        if n > 0.0 {
            for (a, b) in c.iter_mut().zip(v.iter()) {
                *a += b / n;
            }
        }
    }
    c
}

fn cloze_distances(question: &[&[f32]], choices: &[&[f32]]) -> Vec<f64> {
    let c = centroid(question);
    choices.iter().map(|x| cosine_distance(&c, x)).collect()
}

fn coherence_distances(items: &[&[f32]]) -> Vec<f64> {
    (0..items.len())
        .map(|i| {
            let others: Vec<&[f32]> = items.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, v)| *v).collect();
            cosine_distance(&centroid(&others), items[i])
        })
        .collect()
}

fn ordering_distances(choices: &[Vec<&[f32]>]) -> Vec<f64> {
    choices
        .iter()
        .map(|seq| {
            let n = seq.len().saturating_sub(1).max(1) as f64;
            seq.windows(2).map(|w| cosine_distance(w[0], w[1])).sum::<f64>() / n
        })
        .collect()
}

fn histogram(correct: &[f64], incorrect: &[f64], bins: usize) -> Histogram {
    let bins = bins.max(1);
    let all = correct.iter().chain(incorrect).copied().filter(|x| x.is_finite());
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
    let (lo, hi) = if lo.is_finite() { (lo, if hi > lo { hi } else { lo + 1.0 }) } else { (0.0, 1.0) };
    let w = (hi - lo) / bins as f64;
    let edges: Vec<f64> = (0..=bins).map(|i| lo + w * i as f64).collect();
    let count = |xs: &[f64]| {
        let mut c = vec![0u64; bins];
        for &x in xs.iter().filter(|x| x.is_finite()) {
            c[(((x - lo) / w) as usize).min(bins - 1)] += 1;
        }
        c
    };
    Histogram { edges, correct: count(correct), incorrect: count(incorrect) }
}

/// Index of the smallest value (ties: the lowest index; 0 for an empty slice).
pub(crate) fn argmin(xs: &[f64]) -> usize {
    xs.iter().enumerate().fold(0, |b, (i, &x)| if x < xs[b] { i } else { b })
}

/// Index of the largest value (ties: the lowest index; 0 for an empty slice).
fn argmax(xs: &[f64]) -> usize {
    xs.iter().enumerate().fold(0, |b, (i, &x)| if x > xs[b] { i } else { b })
}

fn most_common(xs: impl Iterator<Item = usize>) -> Option<usize> {
    let mut m: BTreeMap<usize, usize> = BTreeMap::new();
    for x in xs {
        *m.entry(x).or_insert(0) += 1;
    }
    m.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|x| x.0)
}

/// A dense cluster label per question: its procedure (`recipe_id`).
fn cluster_ids(qs: &[&Question]) -> Vec<usize> {
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    qs.iter()
        .map(|q| {
            let n = ids.len();
            *ids.entry(q.recipe_id.as_str()).or_insert(n)
        })
        .collect()
}

/// The texts of a task set's textual-cloze questions (question items and choices), for encoding up front.
pub fn texts_to_encode(ts: &TaskSet) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for q in ts.of_task(Task::TextualCloze.as_str()) {
        out.extend(q.question.iter().filter(|s| *s != PLACEHOLDER).cloned());
        for c in &q.choice_list {
            out.extend(c.items().into_iter().map(str::to_string));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Choice;
    use stepwise_features::Vectors;
    use stepwise_models::question_vectors::FeatureResolver;

    /// A visual-cloze set where the answer is always the image nearest the question: the Hasty Student and the
    /// probe must find it; the answer positions are balanced.
    #[test]
    fn a_biased_set_is_detected() {
        let mut ids = Vec::new();
        let mut data = Vec::new();
        let mut questions = Vec::new();
        for i in 0..120 {
            let angle = i as f32 * 0.37;
            let (s, c) = angle.sin_cos();
            let mut push = |name: String, v: [f32; 3]| {
                ids.push(format!("image:{name}"));
                data.extend_from_slice(&v);
                name
            };
            let qv: Vec<String> = (0..3).map(|k| push(format!("q{i}_{k}.jpg"), [c, s, 0.1 * k as f32])).collect();
            let answer = i % 4;
            let choices: Vec<String> = (0..4)
                .map(|k| {
                    if k == answer {
                        push(format!("a{i}.jpg"), [c, s, 0.05])
                    } else {
                        push(format!("n{i}_{k}.jpg"), [-s, c, 0.3 * k as f32])
                    }
                })
                .collect();
            let mut question = qv.clone();
            question.insert(2, PLACEHOLDER.to_string());
            questions.push(Question {
                qid: format!("2000-{}-0-1-2-{}", i / 2, 3 + i % 2),
                recipe_id: format!("r{}", i / 2),
                task: "visual_cloze".into(),
                question,
                choice_list: choices.into_iter().map(Choice::Item).collect(),
                answer,
                ..Default::default()
            });
        }
        let v = Vectors::new(3, ids, data);
        let ts = TaskSet { questions, extra: Default::default() };
        let r = FeatureResolver::new(Some(&v), None, None);
        let cfg =
            AuditConfig { bootstrap: BootstrapConfig { resamples: 200, ..Default::default() }, ..Default::default() };
        let rep = audit(&ts, &r, &cfg);
        let t = &rep.tasks[0];
        assert_eq!(t.with_vectors, 120);
        assert_eq!(t.hasty_student.unwrap().value, 1.0);
        assert!(t.distance_probe.as_ref().unwrap().accuracy.value > 0.95);
        let ci = t.hasty_student.unwrap().ci.unwrap();
        assert!(ci.low <= 1.0 && ci.high >= ci.low);
        assert_eq!(t.answer_positions.as_ref().unwrap().counts, vec![30, 30, 30, 30]);
        let d = t.distances.as_ref().unwrap();
        assert!(d.correct_mean < d.incorrect_mean);
        assert_eq!(d.histogram.correct.iter().sum::<u64>(), 120);
        assert_eq!(d.histogram.incorrect.iter().sum::<u64>(), 360);
        // Two questions per recipe with the same positions (0-1-2-3), answer at position 2: overlap everywhere.
        assert_eq!(t.overlap.applicable, 120);
        assert_eq!(t.overlap.same_task.unwrap().value, 1.0);
        // Only the first question of each pair is revealed by a later one.
        assert_eq!(t.overlap.later_same_task.unwrap().value, 0.5);
        // The shortcut panel names the same shortcut, and the report shows it.
        let p = t.shortcuts.as_ref().unwrap();
        assert_eq!(p.answer_rank_counts, vec![120, 0, 0, 0]);
        assert_eq!(p.shortcut_free, Some(false));
        assert_eq!(p.worst.as_ref().map(|w| (w.key.as_str(), w.accuracy.value)), Some(("rank_1", 1.0)));
        let plots = render::PlotLinks { ranks: vec![(t.task, "ranks-visual_cloze.svg".into())], ..Default::default() };
        let md = render::markdown(&rep, "test", &plots);
        assert!(
            md.contains("## Shortcut panel") && md.contains("| visual_cloze | nearest to the question | 100.0 ["),
            "{md}"
        );
        assert!(md.contains("**visual_cloze: not shortcut-free — worst: nearest to the question 100.0 ["), "{md}");
        assert!(md.contains("120 / 0 / 0 / 0 ([ranks-visual_cloze.svg](ranks-visual_cloze.svg))"), "{md}");
        // Missing vectors are counted, not fatal.
        let empty = Vectors::new(3, vec![], vec![]);
        let r = FeatureResolver::new(Some(&empty), None, None);
        let rep = audit(&ts, &r, &cfg);
        assert_eq!(rep.tasks[0].with_vectors, 0);
        assert!(rep.tasks[0].hasty_student.is_none() && rep.tasks[0].vectors_unavailable.is_some());
        assert!(rep.tasks[0].shortcuts.is_none());
    }
}
