//! The distance probe (Meta-RecipeQA fig. 2): how well a linear classifier that sees only each choice's
//! distance to the question picks the answer. A high accuracy means the question set can be answered by
//! "which choice looks like the question", without comprehension.
//!
//! Per choice, d is its cosine distance to the question: to the mean of the question items (cloze), to the mean
//! of the other items (coherence), or the mean distance between consecutive items (ordering). The classifier
//! sees [d, z, z²] with z = d standardised within its question, so it can learn "nearest", "farthest" or "at a
//! typical distance". Logistic regression (L2) is trained on choices with k-fold cross-validation *grouped by
//! question* (all choices of a question in one fold; folds dealt from a seeded hash order of qids), and each held-
//! out question is answered by its highest-scoring choice (ties: lowest index).
//!
//! The shortcut panel ([`super::shortcuts`]) reuses the same model with the choice's rank among its question's
//! choices added ([`choice_features_with_ranks`]) and folds grouped by procedure ([`group_folds`],
//! [`cross_validate_folds`]).

use stepwise_core::hash::hash64;
use stepwise_models::logreg::{LogRegConfig, LogisticRegression};

/// One question's per-choice distances and its answer.
#[derive(Debug, Clone)]
pub struct ProbeQuestion {
    pub qid: String,
    pub distances: Vec<f64>,
    pub answer: usize,
}

/// The per-choice feature rows the probes see (one definition, shared with the calibrated knobs).
pub use stepwise_core::shortcut::{choice_features, choice_features_with_ranks, ranks};

/// The probe's model fitted on whole questions' choices: one row per choice, labelled whether it is the answer.
pub fn fit_on_choices<'a>(
    questions: impl IntoIterator<Item = (&'a [Vec<f64>], usize)>,
    cfg: &LogRegConfig,
) -> Result<LogisticRegression, String> {
    let mut x = Vec::new();
    let mut y = Vec::new();
    for (choices, answer) in questions {
        for (c, row) in choices.iter().enumerate() {
            x.push(row.clone());
            y.push(c == answer);
        }
    }
    LogisticRegression::fit(&x, &y, cfg)
}

/// The choice `model` scores highest (ties: the lowest index).
pub fn pick(model: &LogisticRegression, choices: &[Vec<f64>]) -> usize {
    let mut best = (0usize, f64::NEG_INFINITY);
    for (c, row) in choices.iter().enumerate() {
        let s = model.decision(row);
        if s > best.1 {
            best = (c, s);
        }
    }
    best.0
}

/// Cross-validated predictions: for each question (input order), whether the probe picked the answer, and its
/// fold; plus the fitted models (one per fold). `None` when there are fewer questions than folds or fewer than
/// two folds.
pub struct ProbeOutcome {
    pub correct: Vec<bool>,
    pub fold: Vec<usize>,
    pub models: Vec<LogisticRegression>,
}

pub fn cross_validate(
    questions: &[ProbeQuestion],
    folds: usize,
    seed: u64,
    cfg: &LogRegConfig,
) -> Option<ProbeOutcome> {
    if folds < 2 || questions.len() < folds {
        return None;
    }
    let mut order: Vec<(u64, usize)> = questions
        .iter()
        .enumerate()
        .map(|(i, q)| (hash64(&[&seed.to_le_bytes(), b"audit-probe-fold", q.qid.as_bytes()]), i))
        .collect();
    order.sort();
    let mut fold = vec![0usize; questions.len()];
    for (rank, &(_, i)) in order.iter().enumerate() {
        fold[i] = rank % folds;
    }
    let feats: Vec<Vec<Vec<f64>>> = questions.iter().map(|q| choice_features(&q.distances)).collect();
    let answers: Vec<usize> = questions.iter().map(|q| q.answer).collect();
    cross_validate_folds(&feats, &answers, fold, folds, cfg)
}

/// The fold of each row: the distinct `groups` are dealt round-robin over `folds` in the order of
/// `hash64(seed, salt, group)`, and every row takes its group's fold (so a group never straddles two folds).
pub fn group_folds(groups: &[&str], folds: usize, seed: u64, salt: &str) -> Vec<usize> {
    let mut distinct: Vec<&str> = groups.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut order: Vec<(u64, &str)> =
        distinct.into_iter().map(|g| (hash64(&[&seed.to_le_bytes(), salt.as_bytes(), g.as_bytes()]), g)).collect();
    order.sort();
    let of: std::collections::BTreeMap<&str, usize> =
        order.iter().enumerate().map(|(rank, &(_, g))| (g, rank % folds.max(1))).collect();
    groups.iter().map(|g| of[g]).collect()
}

/// Cross-validation on given per-question choice features (`features[q][c]`, rows of equal length) and folds
/// (`fold[q]` in `0..folds`): each fold's questions are answered by a model fitted on the others. `None` when a
/// fold is empty or a fit fails.
pub fn cross_validate_folds(
    features: &[Vec<Vec<f64>>],
    answers: &[usize],
    fold: Vec<usize>,
    folds: usize,
    cfg: &LogRegConfig,
) -> Option<ProbeOutcome> {
    if folds < 2 || (0..folds).any(|f| !fold.contains(&f)) {
        return None;
    }
    let mut correct = vec![false; features.len()];
    let mut models = Vec::with_capacity(folds);
    for f in 0..folds {
        let train = (0..features.len()).filter(|&qi| fold[qi] != f);
        let model = fit_on_choices(train.map(|qi| (features[qi].as_slice(), answers[qi])), cfg).ok()?;
        for qi in (0..features.len()).filter(|&qi| fold[qi] == f) {
            correct[qi] = pick(&model, &features[qi]) == answers[qi];
        }
        models.push(model);
    }
    Some(ProbeOutcome { correct, fold, models })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_distance_bias_is_found_and_its_absence_is_not_invented() {
        // Biased: the answer is always the nearest choice.
        let biased: Vec<ProbeQuestion> = (0..200)
            .map(|i| {
                let answer = i % 4;
                let distances =
                    (0..4).map(|c| if c == answer { 0.1 } else { 0.5 + 0.1 * ((i + c) % 3) as f64 }).collect();
                ProbeQuestion { qid: format!("q{i}"), distances, answer }
            })
            .collect();
        let out = cross_validate(&biased, 5, 0, &LogRegConfig::default()).unwrap();
        assert!(out.correct.iter().all(|&c| c));
        assert_eq!(out.models.len(), 5);
        // Unbiased: distances carry no information about the answer.
        let fair: Vec<ProbeQuestion> = (0..400)
            .map(|i| {
                let distances = (0..4).map(|c| (((i * 31 + c * 17) % 97) as f64) / 97.0).collect();
                ProbeQuestion { qid: format!("q{i}"), distances, answer: (i * 7 / 3) % 4 }
            })
            .collect();
        let out = cross_validate(&fair, 5, 0, &LogRegConfig::default()).unwrap();
        let acc = out.correct.iter().filter(|&&c| c).count() as f64 / out.correct.len() as f64;
        assert!(acc < 0.4, "{acc}");
        // Folds group whole questions and are balanced.
        let mut per_fold = [0usize; 5];
        for &f in &out.fold {
            per_fold[f] += 1;
        }
        assert!(per_fold.iter().all(|&n| n == 80));
        assert!(cross_validate(&fair[..3], 5, 0, &LogRegConfig::default()).is_none());
    }
}
