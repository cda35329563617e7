//! AFLite (Le Bras et al., "Adversarial Filters of Dataset Biases", ICML 2020; used for WinoGrande): remove the
//! questions a simple model answers from surface features alone.
//!
//! Each round: `m` random splits of the current set into `t` training questions and the rest; a linear model (L2
//! logistic regression on each choice's features, the question answered by its highest-scoring choice — the
//! audit's distance probe) is fitted on the training part and answers the rest. A question's predictability is the
//! share of the splits holding it out in which it was answered right. Up to `k` questions with predictability at
//! least `τ` (highest first; ties by qid) are removed; filtering stops when fewer than `k` qualify or the set
//! would shrink below its minimum size.
//!
//! Defaults: the paper's `m` = 64 and `τ` = 0.75. Its absolute sizes (WinoGrande: `k` = 500 of ~40k) assume tens
//! of thousands of items, so `k`, `t` and the minimum size are shares of the set here: `k` = 5% of the starting
//! set, `t` = half of the current set, minimum = half of the starting set. Deterministic: splits come from
//! `rng_for(seed, "aflite/<task>/<round>/<split>")`, counts are integers, ties are broken by qid.

use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::Serialize;
use std::path::Path;
use stepwise_core::rng::rng_for;

use stepwise_core::output::write_string_atomic;
use stepwise_core::taskset::QUESTIONS_JSON;
use stepwise_core::{Task, TaskSet};
use stepwise_models::logreg::LogRegConfig;

use crate::audit::probe::choice_features;
use crate::audit::probe::{fit_on_choices, pick};
use crate::audit::{AuditReport, probe_question};
use stepwise_models::question_vectors::ItemResolver;
use stepwise_score::bootstrap::Estimate;

/// One question: a feature vector per choice and the answer.
#[derive(Debug, Clone)]
pub struct AfliteItem {
    pub qid: String,
    pub choices: Vec<Vec<f64>>,
    pub answer: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct AfliteConfig {
    /// Random splits per round (m).
    pub partitions: usize,
    /// Training share of each split (t = share × current size).
    pub train_share: f64,
    /// Questions removed per round at most (k = share × starting size, at least 1).
    pub slice_share: f64,
    /// Predictability threshold (τ).
    pub threshold: f64,
    /// The set never shrinks below this share of its starting size.
    pub min_share: f64,
    pub seed: u64,
    #[serde(skip)]
    pub logreg: LogRegConfig,
}

impl Default for AfliteConfig {
    fn default() -> Self {
        AfliteConfig {
            partitions: 64,
            train_share: 0.5,
            slice_share: 0.05,
            threshold: 0.75,
            min_share: 0.5,
            seed: 0,
            logreg: LogRegConfig::default(),
        }
    }
}

impl AfliteConfig {
    /// Why the configuration cannot run, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.partitions == 0 {
            return Err("AFLite needs at least one partition (m)".into());
        }
        for (name, v) in [("train share", self.train_share), ("slice share", self.slice_share)] {
            if !(v > 0.0 && v < 1.0) {
                return Err(format!("AFLite {name} must be in (0, 1), got {v}"));
            }
        }
        if !(0.0..=1.0).contains(&self.threshold) || !(0.0..=1.0).contains(&self.min_share) {
            return Err("AFLite threshold and minimum share must be in [0, 1]".into());
        }
        Ok(())
    }
}

/// A removed question.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub qid: String,
    /// Index into the input items.
    pub index: usize,
    /// 1-based round that removed it.
    pub round: usize,
    pub predictability: f64,
}

/// One round's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub size: usize,
    pub removed: usize,
    /// Mean predictability over the questions held out at least once.
    pub mean_predictability: f64,
    pub above_threshold: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct AfliteResult {
    /// Indices of the kept items, in input order.
    pub kept: Vec<usize>,
    pub removed: Vec<Removed>,
    pub rounds: Vec<Round>,
    pub slice: usize,
    pub min_size: usize,
}

/// Run AFLite over `items`; `key` names the set in the split streams (sets of equal size get different splits).
/// Too few items to split (fewer than 4) are all kept, and at least 3 always are.
pub fn aflite(items: &[AfliteItem], key: &str, cfg: &AfliteConfig) -> Result<AfliteResult, String> {
    cfg.check()?;
    let n0 = items.len();
    let slice = ((cfg.slice_share * n0 as f64).round() as usize).max(1);
    let min_size = (cfg.min_share * n0 as f64).ceil() as usize;
    let mut current: Vec<usize> = (0..n0).collect();
    let mut removed = Vec::new();
    let mut rounds = Vec::new();
    while current.len() > min_size.max(3) {
        let round = rounds.len() + 1;
        let t = ((cfg.train_share * current.len() as f64).round() as usize).clamp(1, current.len() - 1);
        // (right, held out) per position in `current`, summed over the splits.
        let counts = (0..cfg.partitions)
            .into_par_iter()
            .map(|split| {
                let mut order: Vec<usize> = (0..current.len()).collect();
                order.shuffle(&mut rng_for(cfg.seed, &format!("aflite/{key}/{round}/{split}")));
                let (train, test) = order.split_at(t);
                let train = train.iter().map(|&p| &items[current[p]]);
                let mut tally = vec![(0u32, 0u32); current.len()];
                // A degenerate training part (one class only) answers nothing: no evidence either way.
                if let Ok(model) = fit_on_choices(train.map(|i| (i.choices.as_slice(), i.answer)), &cfg.logreg) {
                    for &p in test {
                        let item = &items[current[p]];
                        tally[p] = (u32::from(pick(&model, &item.choices) == item.answer), 1);
                    }
                }
                tally
            })
            .reduce(
                || vec![(0, 0); current.len()],
                |mut a, b| {
                    for (x, y) in a.iter_mut().zip(b) {
                        x.0 += y.0;
                        x.1 += y.1;
                    }
                    a
                },
            );
        let scored: Vec<(usize, f64)> = counts
            .iter()
            .enumerate()
            .filter(|(_, c)| c.1 > 0)
            .map(|(p, c)| (p, f64::from(c.0) / f64::from(c.1)))
            .collect();
        let mean = if scored.is_empty() { 0.0 } else { scored.iter().map(|s| s.1).sum::<f64>() / scored.len() as f64 };
        let mut above: Vec<(usize, f64)> = scored.into_iter().filter(|s| s.1 >= cfg.threshold).collect();
        let above_threshold = above.len();
        above.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| items[current[a.0]].qid.cmp(&items[current[b.0]].qid)));
        let room = current.len().saturating_sub(min_size.max(3));
        above.truncate(slice.min(room));
        let take: std::collections::BTreeSet<usize> = above.iter().map(|a| a.0).collect();
        for &(p, score) in &above {
            removed.push(Removed {
                qid: items[current[p]].qid.clone(),
                index: current[p],
                round,
                predictability: score,
            });
        }
        rounds.push(Round { size: current.len(), removed: take.len(), mean_predictability: mean, above_threshold });
        let before = current.len();
        current = current.iter().enumerate().filter(|(p, _)| !take.contains(p)).map(|(_, &i)| i).collect();
        if before - current.len() < slice {
            break;
        }
    }
    Ok(AfliteResult { kept: current, removed, rounds, slice, min_size })
}

/// AFLite over one task of a task set.
#[derive(Debug, Clone, Serialize)]
pub struct TaskFilter {
    pub task: Task,
    pub questions: usize,
    /// Questions with vectors for all their items (the others cannot be scored and are kept).
    pub scored: usize,
    pub result: AfliteResult,
}

/// Filter every RecipeQA task of `ts` separately, on the distance probe's features ([d, z, z²] per choice, see
/// [`crate::audit::probe`]). Returns the kept questions (file order) and each task's filtering.
pub fn filter_taskset(
    ts: &TaskSet,
    resolver: &dyn ItemResolver,
    cfg: &AfliteConfig,
) -> Result<(TaskSet, Vec<TaskFilter>), String> {
    let mut drop = std::collections::BTreeSet::new();
    let mut filters = Vec::new();
    for task in Task::ALL {
        let idx: Vec<usize> = (0..ts.questions.len()).filter(|&i| ts.questions[i].task_kind() == Some(task)).collect();
        if idx.is_empty() {
            continue;
        }
        let mut items = Vec::new();
        let mut at = Vec::new();
        for &i in &idx {
            if let Ok(p) = probe_question(&ts.questions[i], task, resolver) {
                items.push(AfliteItem { qid: p.qid, choices: choice_features(&p.distances), answer: p.answer });
                at.push(i);
            }
        }
        let result = aflite(&items, task.as_str(), cfg)?;
        drop.extend(result.removed.iter().map(|r| at[r.index]));
        filters.push(TaskFilter { task, questions: idx.len(), scored: items.len(), result });
    }
    let kept = TaskSet {
        questions: ts.questions.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, q)| q.clone()).collect(),
        extra: ts.extra.clone(),
    };
    Ok((kept, filters))
}

/// Write AFLite's outputs into `dir`: `questions.json` (the kept questions, a task set), `removed.jsonl` (qid,
/// task, round, predictability per removed question) and `aflite.json` (configuration, each task's filtering, the
/// audit of the kept questions).
pub fn write_outputs(
    dir: &Path,
    kept: &TaskSet,
    filters: &[TaskFilter],
    after: &AuditReport,
    cfg: &AfliteConfig,
) -> stepwise_core::Result<()> {
    kept.write_json(&dir.join(QUESTIONS_JSON))?;
    let removed: Vec<serde_json::Value> = filters
        .iter()
        .flat_map(|f| {
            f.result.removed.iter().map(move |r| {
                serde_json::json!({"qid": r.qid, "task": f.task, "round": r.round, "predictability": r.predictability})
            })
        })
        .collect();
    stepwise_core::json::write_jsonl_atomic(&dir.join("removed.jsonl"), &removed)?;
    let summary = serde_json::json!({"config": cfg, "tasks": filters, "after": after});
    write_string_atomic(&dir.join("aflite.json"), &stepwise_core::json::to_pretty_sorted(&summary))
}

/// The audit report's AFLite section: per task, questions kept and removed, and the Hasty Student's and the
/// distance probe's accuracy before and after filtering.
pub fn markdown_section(
    cfg: &AfliteConfig,
    filters: &[TaskFilter],
    before: &AuditReport,
    after: &AuditReport,
) -> String {
    let mut s = format!(
        "## AFLite\n\nAdversarial filtering (Le Bras et al. 2020) on the distance probe's features: {} random splits per round, \
         training share {}, up to k = {} of a task's questions removed per round when the \
         probe's linear model answers them right in at least τ = {} of the splits holding them out, never below {} \
         of its questions; seed {}. The filtered task set is `aflite/questions.json`, the removed questions with \
         their scores `aflite/removed.jsonl`.\n\n\
         | task | questions | scored | removed | rounds | Hasty Student before → after | distance probe before → after |\n\
         |---|---:|---:|---:|---:|---|---|\n",
        cfg.partitions, cfg.train_share, cfg.slice_share, cfg.threshold, cfg.min_share, cfg.seed,
    );
    let find = |r: &AuditReport, task: Task| r.tasks.iter().find(|t| t.task == task).cloned();
    let pct = |e: Option<Estimate>| e.map_or("–".to_string(), |e| format!("{:.1}", 100.0 * e.value));
    for f in filters {
        let (b, a) = (find(before, f.task), find(after, f.task));
        let hasty = |t: &Option<crate::audit::TaskAudit>| pct(t.as_ref().and_then(|t| t.hasty_student));
        let probe = |t: &Option<crate::audit::TaskAudit>| {
            pct(t.as_ref().and_then(|t| t.distance_probe.as_ref().map(|p| p.accuracy)))
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} → {} | {} → {} |\n",
            f.task,
            f.questions,
            f.scored,
            f.result.removed.len(),
            f.result.rounds.len(),
            hasty(&b),
            hasty(&a),
            probe(&b),
            probe(&a)
        ));
    }
    s.push_str(
        "\nAccuracies in %; \"after\" is the audit of the filtered set (the probe cross-validated anew). AFLite \
         filters on the probe's own features, so the probe's fall is expected by construction; the Hasty Student \
         (no training) and trained models are the independent measures.\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::argmin;

    /// Half the questions carry a shortcut (the answer is the nearest choice), half carry none.
    fn mixed(n: usize) -> Vec<AfliteItem> {
        (0..n)
            .map(|i| {
                let answer = (i * 7 / 3) % 4;
                let distances: Vec<f64> = if i % 2 == 0 {
                    (0..4).map(|c| if c == answer { 0.1 } else { 0.5 + 0.1 * ((i + c) % 3) as f64 }).collect()
                } else {
                    (0..4).map(|c| (((i * 31 + c * 17) % 97) as f64) / 97.0).collect()
                };
                AfliteItem { qid: format!("q{i:04}"), choices: choice_features(&distances), answer }
            })
            .collect()
    }

    #[test]
    fn questions_with_a_shortcut_go_first_and_the_shortcut_weakens() {
        let items = mixed(400);
        let cfg = AfliteConfig { partitions: 16, ..AfliteConfig::default() };
        let r = aflite(&items, "t", &cfg).unwrap();
        assert!(!r.removed.is_empty());
        // Mostly questions with the shortcut go (a fair question whose answer happens to be the nearest choice is
        // just as predictable), and the shortcut's strength falls: "nearest is right" drops towards chance.
        let shortcut = r.removed.iter().filter(|x| x.index % 2 == 0).count();
        assert!(shortcut as f64 >= 0.8 * r.removed.len() as f64, "{shortcut} of {}", r.removed.len());
        let nearest_right = |idx: &mut dyn Iterator<Item = usize>| {
            let (mut right, mut n) = (0, 0);
            for i in idx {
                let d: Vec<f64> = items[i].choices.iter().map(|f| f[0]).collect();
                right += usize::from(argmin(&d) == items[i].answer);
                n += 1;
            }
            right as f64 / n as f64
        };
        let before = nearest_right(&mut (0..items.len()));
        let after = nearest_right(&mut r.kept.iter().copied());
        assert!(before > 0.6 && after < 0.45, "nearest-is-right {before} → {after}");
        assert!(r.kept.len() >= r.min_size && r.kept.len() + r.removed.len() == items.len());
        assert!(r.removed.iter().all(|x| x.predictability >= cfg.threshold));
        assert!(r.rounds.iter().all(|round| round.removed <= r.slice));
        // Deterministic, whatever the thread count.
        let again =
            rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| aflite(&items, "t", &cfg));
        let again = again.unwrap();
        assert_eq!(r.kept, again.kept);
        assert_eq!(
            r.removed.iter().map(|x| (x.index, x.predictability.to_bits())).collect::<Vec<_>>(),
            again.removed.iter().map(|x| (x.index, x.predictability.to_bits())).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_set_without_shortcuts_loses_nothing_and_bad_parameters_are_refused() {
        let fair: Vec<AfliteItem> =
            mixed(400).into_iter().enumerate().filter(|(i, _)| i % 2 == 1).map(|x| x.1).collect();
        let r = aflite(&fair, "t", &AfliteConfig { partitions: 16, ..AfliteConfig::default() }).unwrap();
        assert!(r.removed.len() < r.slice, "{} removed from a set with no shortcut", r.removed.len());
        assert_eq!(r.rounds.len(), 1);
        assert!(aflite(&fair, "t", &AfliteConfig { partitions: 0, ..AfliteConfig::default() }).is_err());
        assert!(aflite(&fair, "t", &AfliteConfig { train_share: 1.0, ..AfliteConfig::default() }).is_err());
        // Too few questions to split: all kept.
        assert_eq!(aflite(&fair[..3], "t", &AfliteConfig::default()).unwrap().kept, vec![0, 1, 2]);
    }
}
