//! The shortcut panel: how far every cheap shortcut gets on a task, each as an accuracy with a bootstrap interval
//! over procedures, and a verdict on whether any of them beats chance.
//!
//! Entries, for a task with n choices (chance 1/n):
//! - **rank k** (k = 1..n): always pick the choice whose distance to the question ([`super::DistanceSummary`]'s
//!   d) has rank k in ascending order (ties: the lower position first, so rank 1 is the Hasty Student's pick for
//!   cloze and ordering). Together these are the histogram of the answer's distance rank, flat for a set without
//!   a distance cue. For coherence d is each item's distance to the other items, so rank n is the odd one out
//!   (it differs from the Hasty Student's argmax only when the largest distances tie);
//! - **distance + rank probe**: the distance probe ([`super::probe`]) with the choice's rank added as a one-hot,
//!   fitted on the questions of half of the procedures and scored on the other half's (a model never sees a
//!   recipe it is tested on, and no scored question trained it, so its interval holds);
//! - **choice-only probe**: the same model on a value that never looks at the question, only at the other
//!   choices ([`choice_only_definition`]); it catches "the answer looks different from the negatives". For
//!   coherence the choices *are* the question, so its value is d itself.
//! - **not one of a reversed pair** (visual ordering): pick at random among the choices whose reverse is not
//!   shown. A reversed pair cannot hold the answer when a generator never shows the answer's reverse; with
//!   orders drawn alike for answers and negatives it scores chance ([`not_reversed_hit`]).
//!
//! The verdict reads every entry at a Bonferroni-corrected confidence (95% over seven entries: 99.3% each), so a
//! set without any shortcut is called shortcut-free at least 95% of the time; the table shows the 95% intervals.
//!
//! Questions whose number of choices differs from the task's usual one are left out (ranks of different n do not
//! compare) and counted.

use serde::Serialize;
use stepwise_core::shortcut::{order_centrality, spread_and_level};
use stepwise_core::{Choice, Question, Task};

use super::AuditConfig;
use super::probe::{choice_features_with_ranks, fit_on_choices, group_folds, pick, ranks};
use stepwise_score::bootstrap::{BootstrapConfig, Estimate, Interval, Unit, mean_estimate};

/// How far above chance an entry may lie and the task still count as shortcut-free.
pub const MARGIN: f64 = 0.05;

/// What the panel sees of one question.
#[derive(Debug, Clone)]
pub struct ShortcutQuestion {
    /// The question's procedure (`recipe_id`): the unit of resampling and of the probes' halves.
    pub procedure: String,
    /// Per-choice distance to the question (the distance probe's d).
    pub distances: Vec<f64>,
    /// Per-choice relation to the other choices only ([`choice_only_definition`]).
    pub choice_only: Vec<f64>,
    pub answer: usize,
    /// Visual ordering: what "not one of a reversed pair" scores on the question ([`not_reversed_hit`]).
    pub not_reversed: Option<f64>,
}

/// One shortcut and how often it finds the answer.
#[derive(Debug, Clone, Serialize)]
pub struct PanelEntry {
    /// Stable snake_case id for scripts: `rank_1`..`rank_<n>`, `probe_distance_rank`, `probe_choice_only`.
    pub key: String,
    /// What the shortcut does, in words ("nearest to the question").
    pub name: String,
    /// Share of questions it answers, with the interval over procedures.
    pub accuracy: Estimate,
    /// The wider interval the verdict reads ([`ShortcutPanel::verdict_confidence`]).
    pub verdict_ci: Option<Interval>,
    /// Questions it was measured on (a probe: those of the held-out half).
    pub questions: usize,
}

/// Every cheap shortcut of one task side by side, and whether the task resists all of them.
#[derive(Debug, Clone, Serialize)]
pub struct ShortcutPanel {
    /// Number of choices the panel is about (the task's most common count).
    pub choices: usize,
    /// 1 / `choices`: what every entry scores on a set without shortcuts.
    pub chance: f64,
    /// Questions the panel rests on (with vectors and `choices` choices).
    pub questions: usize,
    /// Questions with vectors left out because they have another number of choices (or an answer out of range).
    pub left_out: usize,
    /// What the choice-only probe's value is for this task.
    pub choice_only: &'static str,
    /// Rank picks 1..n (ascending distance), for ordering "not one of a reversed pair", then the distance + rank
    /// probe and the choice-only probe (each probe only when the questions come from at least two procedures).
    pub entries: Vec<PanelEntry>,
    /// Questions whose answer has distance rank k (index k − 1, ascending distance): flat without a distance cue.
    pub answer_rank_counts: Vec<u64>,
    /// The confidence of the intervals the verdict reads: the bootstrap's, Bonferroni-corrected over the
    /// entries, so that a set without any shortcut is called shortcut-free with at least the bootstrap's
    /// confidence (tested one by one at 95%, six entries flag such a set about a quarter of the time).
    pub verdict_confidence: f64,
    /// Every entry's verdict interval contains chance and none lies more than [`MARGIN`] above it; `None` when
    /// that cannot be judged (see `undetermined`).
    pub shortcut_free: Option<bool>,
    /// Why `shortcut_free` is `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undetermined: Option<String>,
    /// The entry farthest from chance (either side): what to look at first.
    pub worst: Option<PanelEntry>,
}

/// What the choice-only probe's value is for `task`.
pub fn choice_only_definition(task: Task) -> &'static str {
    match task {
        Task::TextualCloze | Task::VisualCloze => "cosine distance of the choice to the mean of the other choices",
        Task::VisualCoherence => {
            "cosine distance of the item to the mean of the other items (the choices are the question, so this is d)"
        }
        Task::VisualOrdering => {
            "mean normalised Kendall τ distance (share of discordant pairs) of the choice's order to the other \
             choices' orders"
        }
    }
}

/// The name of the "k-th smallest distance" pick (k from 1) among `n` choices.
pub fn rank_name(task: Task, k: usize, n: usize) -> String {
    match task {
        Task::TextualCloze | Task::VisualCloze => match k {
            1 => "nearest to the question".into(),
            _ if k == n => "farthest from the question".into(),
            _ => format!("{} nearest to the question", ordinal(k)),
        },
        Task::VisualCoherence => match k {
            _ if k == n && n > 1 => "odd one out (farthest from the others)".into(),
            1 => "closest to the others".into(),
            _ => format!("{} closest to the others", ordinal(k)),
        },
        Task::VisualOrdering => match k {
            1 => "closest chain".into(),
            _ if k == n => "loosest chain".into(),
            _ => format!("{} closest chain", ordinal(k)),
        },
    }
}

fn ordinal(k: usize) -> String {
    let suffix = match (k % 10, k % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

/// The panel of `task` over `questions` with the task's usual number of `choices`; `None` when no question has
/// that many choices.
pub fn panel(task: Task, questions: &[ShortcutQuestion], choices: usize, cfg: &AuditConfig) -> Option<ShortcutPanel> {
    let qs: Vec<&ShortcutQuestion> = questions
        .iter()
        .filter(|q| q.distances.len() == choices && q.choice_only.len() == choices && q.answer < choices)
        .collect();
    if qs.is_empty() || choices == 0 {
        return None;
    }
    let chance = 1.0 / choices as f64;
    let procedures: Vec<&str> = qs.iter().map(|q| q.procedure.as_str()).collect();
    let n_procedures = dense_ids(&procedures).iter().max().map_or(0, |m| m + 1);
    // Each entry's hits (1: it found the answer) on the questions it was measured on, with their procedures.
    let mut measured: Vec<(String, String, Vec<f64>, Vec<&str>)> = Vec::new();

    // Rank picks: the answer's rank decides which of them is right.
    let answer_rank: Vec<usize> = qs.iter().map(|q| ranks(&q.distances)[q.answer]).collect();
    let mut answer_rank_counts = vec![0u64; choices];
    for &r in &answer_rank {
        answer_rank_counts[r] += 1;
    }
    for r in 0..choices {
        let hits: Vec<f64> = answer_rank.iter().map(|&a| f64::from(u8::from(a == r))).collect();
        measured.push((format!("rank_{}", r + 1), rank_name(task, r + 1, choices), hits, procedures.clone()));
    }
    if let Some(hits) = qs.iter().map(|q| q.not_reversed).collect::<Option<Vec<f64>>>() {
        measured.push(("not_reversed".to_string(), "not one of a reversed pair".to_string(), hits, procedures.clone()));
    }

    // Probes: fitted on the questions of one half of the procedures and scored on the other half's. A scored
    // question never trained the model that answers it nor any other model, so its hit is an independent draw
    // and the bootstrap interval holds; cross-validated hits are not independent (every question trains the
    // models that score the others) and, on sets whose answers were drawn at random, their intervals missed
    // chance about twice as often as they should.
    let mut missing = Vec::new();
    let answers: Vec<usize> = qs.iter().map(|q| q.answer).collect();
    let half = group_folds(&procedures, 2, cfg.bootstrap.seed, "audit-shortcut-half");
    let scored_on: Vec<&str> = (0..qs.len()).filter(|&q| half[q] == SCORED_HALF).map(|q| procedures[q]).collect();
    let fits = n_procedures >= 2;
    // (key, name, whether the probe sees the choice-only values rather than the distances)
    let probes =
        [("probe_distance_rank", "distance + rank probe", false), ("probe_choice_only", "choice-only probe", true)];
    let mut held_out: Vec<(&str, &str, Option<Vec<bool>>)> = probes
        .iter()
        .map(|&(key, name, choice_only)| {
            let features: Vec<Vec<Vec<f64>>> = qs
                .iter()
                .map(|q| choice_features_with_ranks(if choice_only { &q.choice_only } else { &q.distances }, choices))
                .collect();
            (key, name, fits.then(|| held_out_half(&features, &answers, &half, &cfg.logreg)).flatten())
        })
        .collect();
    // The answer's rank given how the question's distances lie (their spread and level): a set can have a flat
    // rank histogram and still put the answer at rank 1 in tight questions and rank n in loose ones, which the
    // linear probes barely see. Learned on one half, scored on the other, like the probes.
    let rule = fits.then(|| rank_by_spread(&qs, &answer_rank, &half)).flatten();
    held_out.push(("rank_by_spread", "rank given spread and level", rule));
    for (key, name, outcome) in held_out {
        match outcome {
            Some(correct) => {
                let hits: Vec<f64> = correct.iter().map(|&c| f64::from(u8::from(c))).collect();
                measured.push((key.to_string(), name.to_string(), hits, scored_on.clone()));
            }
            None => missing.push(name),
        }
    }

    // Every entry at the bootstrap's confidence for the reader, and Bonferroni-corrected for the verdict.
    let verdict_confidence = 1.0 - (1.0 - cfg.bootstrap.confidence) / measured.len().max(1) as f64;
    let verdict_bootstrap = BootstrapConfig { confidence: verdict_confidence, ..cfg.bootstrap };
    let entries: Vec<PanelEntry> = measured
        .into_iter()
        .map(|(key, name, hits, on)| {
            let clusters = dense_ids(&on);
            let at = |config: &BootstrapConfig| {
                mean_estimate(&hits, Unit::Clusters(&clusters), config, &format!("audit/{task}/shortcut/{key}"))
            };
            PanelEntry {
                accuracy: at(&cfg.bootstrap),
                verdict_ci: at(&verdict_bootstrap).ci,
                questions: hits.len(),
                key,
                name,
            }
        })
        .collect();

    let undetermined = if cfg.bootstrap.resamples == 0 {
        Some("intervals are disabled (0 resamples)".to_string())
    } else if !missing.is_empty() {
        Some(format!(
            "the {} could not be fitted on half of the procedures and scored on the other half ({n_procedures} \
             procedures)",
            missing.join(" and the ")
        ))
    } else if qs.len() < 2 || n_procedures < 2 {
        Some(format!("too few questions ({}) or procedures ({n_procedures}) for an interval", qs.len()))
    } else if entries.iter().any(|e| e.accuracy.ci.is_none() || e.verdict_ci.is_none()) {
        Some("an entry has no interval".to_string())
    } else {
        None
    };
    let shortcut_free = undetermined.is_none().then(|| entries.iter().all(|e| within_chance(e, chance)));
    let worst = entries
        .iter()
        .fold(None::<&PanelEntry>, |w, e| match w {
            Some(w) if (w.accuracy.value - chance).abs() >= (e.accuracy.value - chance).abs() => Some(w),
            _ => Some(e),
        })
        .cloned();
    Some(ShortcutPanel {
        choices,
        chance,
        questions: qs.len(),
        left_out: questions.len() - qs.len(),
        choice_only: choice_only_definition(task),
        entries,
        answer_rank_counts,
        verdict_confidence,
        shortcut_free,
        undetermined,
        worst,
    })
}

/// The half of the procedures whose questions the probes are scored on (fitted on the other one).
const SCORED_HALF: usize = 1;

/// For each question of half [`SCORED_HALF`] (in order), whether the probe fitted on the other half's questions
/// answers it; `None` when a half is empty or the fit fails.
fn held_out_half(
    features: &[Vec<Vec<f64>>],
    answers: &[usize],
    half: &[usize],
    cfg: &stepwise_models::logreg::LogRegConfig,
) -> Option<Vec<bool>> {
    if !half.contains(&SCORED_HALF) {
        return None;
    }
    let train = (0..features.len()).filter(|&q| half[q] != SCORED_HALF);
    let model = fit_on_choices(train.map(|q| (features[q].as_slice(), answers[q])), cfg).ok()?;
    Some(
        (0..features.len())
            .filter(|&q| half[q] == SCORED_HALF)
            .map(|q| pick(&model, &features[q]) == answers[q])
            .collect(),
    )
}

/// Cells per axis of [`rank_by_spread`]'s grid.
const SPREAD_BINS: usize = 5;

/// For each question of half [`SCORED_HALF`] (in order), whether its answer has the distance rank most common,
/// among the other half's questions, in its cell of a grid of the questions' distance spread (standard
/// deviation) and level (mean), each cut at the other half's quintiles; `None` when a half is empty.
fn rank_by_spread(qs: &[&ShortcutQuestion], answer_rank: &[usize], half: &[usize]) -> Option<Vec<bool>> {
    let stats: Vec<(f64, f64)> = qs.iter().map(|q| spread_and_level(&q.distances)).collect();
    let fitted: Vec<usize> = (0..qs.len()).filter(|&q| half[q] != SCORED_HALF).collect();
    if fitted.is_empty() || fitted.len() == qs.len() {
        return None;
    }
    let edges = |axis: fn(&(f64, f64)) -> f64| -> Vec<f64> {
        let mut v: Vec<f64> = fitted.iter().map(|&q| axis(&stats[q])).collect();
        v.sort_by(f64::total_cmp);
        (1..SPREAD_BINS).map(|k| v[k * v.len() / SPREAD_BINS]).collect()
    };
    let (spread_edges, level_edges) = (edges(|s| s.0), edges(|s| s.1));
    let bin = |x: f64, edges: &[f64]| edges.iter().filter(|&&e| x >= e).count();
    let cell = |q: usize| bin(stats[q].0, &spread_edges) * SPREAD_BINS + bin(stats[q].1, &level_edges);
    let choices = qs.iter().map(|q| q.distances.len()).max().unwrap_or(0);
    let mut counts = vec![vec![0usize; choices]; SPREAD_BINS * SPREAD_BINS + 1];
    for &q in &fitted {
        counts[cell(q)][answer_rank[q]] += 1;
        counts[SPREAD_BINS * SPREAD_BINS][answer_rank[q]] += 1;
    }
    // The most common rank (the lowest on a tie); a cell the fitting half never reached takes the overall one.
    let mode = |c: &[usize]| c.iter().enumerate().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0))).map(|(r, _)| r);
    let overall = mode(&counts[SPREAD_BINS * SPREAD_BINS]);
    Some(
        (0..qs.len())
            .filter(|&q| half[q] == SCORED_HALF)
            .map(|q| {
                let c = &counts[cell(q)];
                let pick = if c.iter().sum::<usize>() == 0 { overall } else { mode(c) };
                pick == Some(answer_rank[q])
            })
            .collect(),
    )
}

/// The entry's verdict interval contains chance and its value is at most [`MARGIN`] above it.
fn within_chance(e: &PanelEntry, chance: f64) -> bool {
    let contains = e.verdict_ci.is_some_and(|ci| ci.low <= chance && chance <= ci.high);
    contains && e.accuracy.value <= chance + MARGIN
}

/// Dense labels in order of first appearance.
fn dense_ids(keys: &[&str]) -> Vec<usize> {
    let mut ids: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    keys.iter()
        .map(|k| {
            let n = ids.len();
            *ids.entry(k).or_insert(n)
        })
        .collect()
}

/// The ordering choice-only value of each choice of `q`: its mean normalised Kendall τ distance to the other
/// choices' orders, from `meta.choice_orders` when it has one order per choice, else from the positions of the
/// shown items in the `Choice::Sequence`s.
pub fn ordering_choice_only(q: &Question) -> Vec<f64> {
    let orders = q.provenance().choice_orders.filter(|o| o.len() == q.choice_list.len());
    match orders {
        Some(o) => order_centrality(&o),
        None => {
            let seqs: Vec<Vec<&str>> = q
                .choice_list
                .iter()
                .map(|c| match c {
                    Choice::Sequence(s) => s.iter().map(String::as_str).collect(),
                    Choice::Item(_) => Vec::new(),
                })
                .collect();
            order_centrality(&seqs)
        }
    }
}

/// What "pick at random among the choices whose reverse is not shown" scores on an ordering question `q` (its
/// shown sequences): 1 / (such choices) when the answer is one of them, else 0; every choice counts when each is
/// in a reversed pair. `None` when a choice is not a sequence or the answer is out of range.
pub fn not_reversed_hit(q: &Question) -> Option<f64> {
    let seqs: Vec<&[String]> = q
        .choice_list
        .iter()
        .map(|c| match c {
            Choice::Sequence(s) => Some(s.as_slice()),
            Choice::Item(_) => None,
        })
        .collect::<Option<_>>()?;
    let reversed_shown = |i: usize| seqs.iter().enumerate().any(|(j, s)| j != i && s.iter().eq(seqs[i].iter().rev()));
    let alone: Vec<usize> = (0..seqs.len()).filter(|&i| !reversed_shown(i)).collect();
    let eligible: Vec<usize> = if alone.is_empty() { (0..seqs.len()).collect() } else { alone };
    (q.answer < seqs.len()).then(|| if eligible.contains(&q.answer) { 1.0 / eligible.len() as f64 } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use stepwise_score::bootstrap::BootstrapConfig;

    fn cfg(resamples: usize) -> AuditConfig {
        AuditConfig { bootstrap: BootstrapConfig { resamples, ..Default::default() }, ..Default::default() }
    }

    fn question(i: usize, distances: Vec<f64>, choice_only: Vec<f64>, answer: usize) -> ShortcutQuestion {
        ShortcutQuestion { procedure: format!("r{}", i / 2), distances, choice_only, answer, not_reversed: None }
    }

    fn entry<'a>(p: &'a ShortcutPanel, key: &str) -> &'a PanelEntry {
        p.entries.iter().find(|e| e.key == key).unwrap_or_else(|| panic!("no entry {key}"))
    }

    #[test]
    fn rank_picks_match_a_brute_force_count_with_ties() {
        // Distances from a handful of values, so many questions have ties.
        let qs: Vec<ShortcutQuestion> = (0..40)
            .map(|i| {
                let d: Vec<f64> = (0..4).map(|c| ((i * 7 + c * 3 + i * c) % 5) as f64 / 4.0).collect();
                question(i, d.clone(), d, (i * 3 + i / 5) % 4)
            })
            .collect();
        assert!(qs.iter().any(|q| q.distances.iter().filter(|&&x| x == q.distances[0]).count() > 1));
        let p = panel(Task::VisualCloze, &qs, 4, &cfg(50)).unwrap();
        // Brute force: rank of c = smaller distances + equal distances at a lower position.
        let brute = |d: &[f64], c: usize| (0..d.len()).filter(|&j| d[j] < d[c] || (d[j] == d[c] && j < c)).count();
        let mut counts = [0u64; 4];
        for q in &qs {
            let r = ranks(&q.distances);
            for (c, &rc) in r.iter().enumerate() {
                assert_eq!(rc, brute(&q.distances, c), "{:?}", q.distances);
            }
            counts[brute(&q.distances, q.answer)] += 1;
        }
        assert_eq!(p.answer_rank_counts, counts.to_vec());
        assert_eq!(p.answer_rank_counts.iter().sum::<u64>(), 40);
        for k in 1..=4 {
            let e = entry(&p, &format!("rank_{k}"));
            assert_eq!(e.questions, 40);
            assert!((e.accuracy.value - counts[k - 1] as f64 / 40.0).abs() < 1e-12, "rank {k}");
            // Brute force of "pick the k-th nearest choice".
            let hits =
                qs.iter().filter(|q| (0..4).find(|&c| brute(&q.distances, c) == k - 1) == Some(q.answer)).count();
            assert_eq!(hits as u64, counts[k - 1]);
        }
        // Rank 1 is the audit's argmin (ties: the lowest index).
        let nearest = qs.iter().filter(|q| super::super::argmin(&q.distances) == q.answer).count();
        assert_eq!(nearest as u64, counts[0]);
        assert_eq!(entry(&p, "rank_1").name, "nearest to the question");
        assert_eq!(entry(&p, "rank_4").name, "farthest from the question");
        assert_eq!(rank_name(Task::VisualCoherence, 4, 4), "odd one out (farthest from the others)");
        assert_eq!(rank_name(Task::VisualOrdering, 2, 4), "2nd closest chain");
    }

    #[test]
    fn an_always_nearest_answer_is_not_shortcut_free() {
        let qs: Vec<ShortcutQuestion> = (0..120)
            .map(|i| {
                let answer = i % 4;
                let d: Vec<f64> =
                    (0..4).map(|c| if c == answer { 0.1 } else { 0.5 + 0.1 * ((i + c) % 3) as f64 }).collect();
                let co: Vec<f64> = (0..4).map(|c| ((i * 5 + c * 11) % 13) as f64).collect();
                question(i, d, co, answer)
            })
            .collect();
        let p = panel(Task::TextualCloze, &qs, 4, &cfg(200)).unwrap();
        assert_eq!(p.shortcut_free, Some(false));
        let w = p.worst.as_ref().unwrap();
        assert_eq!((w.key.as_str(), w.accuracy.value), ("rank_1", 1.0));
        assert_eq!(p.answer_rank_counts, vec![120, 0, 0, 0]);
        assert_eq!(entry(&p, "probe_distance_rank").accuracy.value, 1.0);
        assert_eq!(p.entries.len(), 7);
        // Without intervals the verdict is undetermined, the worst entry is still named.
        let p = panel(Task::TextualCloze, &qs, 4, &cfg(0)).unwrap();
        assert!(p.shortcut_free.is_none() && p.undetermined.is_some());
        assert_eq!(p.worst.unwrap().key, "rank_1");
        // Too few procedures for the probes: undetermined, the rank picks are still there.
        let p = panel(Task::TextualCloze, &qs[..2], 4, &cfg(50)).unwrap();
        assert!(p.shortcut_free.is_none() && p.entries.len() == 4, "{p:?}");
    }

    #[test]
    fn exchangeable_distances_give_chance_and_a_flat_histogram() {
        let mut rng = stepwise_core::rng::rng_for(7, "shortcut-test");
        let qs: Vec<ShortcutQuestion> = (0..400)
            .map(|i| {
                let d: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
                let co: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
                question(i, d, co, rng.random_range(0..4))
            })
            .collect();
        let p = panel(Task::VisualCloze, &qs, 4, &cfg(200)).unwrap();
        for key in ["probe_distance_rank", "probe_choice_only"] {
            let v = entry(&p, key).accuracy.value;
            assert!(v < p.chance + 0.1, "{key}: {v}");
        }
        // 100 expected per rank, standard deviation ≈ 8.7.
        assert!(p.answer_rank_counts.iter().all(|&c| (65..=135).contains(&c)), "{:?}", p.answer_rank_counts);
        assert!((p.worst.unwrap().accuracy.value - 0.25).abs() < 0.1);
    }

    /// The verdict's false alarms: sets whose answers are drawn at random among exchangeable choices (no
    /// shortcut exists) are called shortcut-free at least 95% of the time, and each probe's 95% interval contains
    /// chance about 95% of the time. Cross-validated probes (every question trains the models that score the
    /// others) missed chance about twice as often, and six entries at 95% each flagged about a quarter of the sets.
    #[test]
    fn sets_without_shortcuts_pass_at_the_stated_confidence() {
        let sets = 40;
        let (mut flagged, mut probe_misses, mut probes) = (0, 0, 0);
        for set in 0..sets {
            let mut rng = stepwise_core::rng::rng_for(set, "shortcut-null");
            // 300 procedures of 4 questions, each procedure with its own scale of distances (as real ones have).
            let qs: Vec<ShortcutQuestion> = (0..1200)
                .map(|i| {
                    let scale = 1.0 + (i / 4 % 7) as f64;
                    let d: Vec<f64> = (0..4).map(|_| scale * rng.random::<f64>()).collect();
                    let co: Vec<f64> = (0..4).map(|_| rng.random::<f64>().powi(3)).collect();
                    ShortcutQuestion {
                        procedure: format!("r{}", i / 4),
                        distances: d,
                        choice_only: co,
                        answer: rng.random_range(0..4),
                        not_reversed: None,
                    }
                })
                .collect();
            let p = panel(Task::VisualCloze, &qs, 4, &cfg(400)).unwrap();
            assert!((p.verdict_confidence - (1.0 - 0.05 / 7.0)).abs() < 1e-12);
            flagged += usize::from(p.shortcut_free == Some(false));
            for e in p.entries.iter().filter(|e| e.key.starts_with("probe")) {
                let ci = e.accuracy.ci.unwrap();
                probes += 1;
                probe_misses += usize::from(!(ci.low <= p.chance && p.chance <= ci.high));
                // Scored on the half of the procedures the probe was not fitted on.
                assert_eq!(e.questions, 600);
            }
        }
        // Expected: about 2 of 40 flagged (at most 5%), about 4 of 80 probe intervals missing chance.
        assert!(flagged <= 5, "{flagged} of {sets} sets without shortcuts flagged");
        assert!(probe_misses <= 9, "{probe_misses} of {probes} probe intervals missed chance");
    }

    /// Visual cloze where the answer points away from the negatives but every choice is equally far from the
    /// question (d depends only on an iid draw): only the choice-only probe finds the answer.
    #[test]
    fn the_choice_only_probe_sees_an_answer_unlike_the_negatives() {
        use crate::audit::audit;
        use stepwise_core::TaskSet;
        use stepwise_core::taskset::PLACEHOLDER;
        use stepwise_features::Vectors;
        use stepwise_models::question_vectors::FeatureResolver;

        let mut rng = stepwise_core::rng::rng_for(3, "choice-only-test");
        let (mut ids, mut data, mut questions) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..160 {
            let mut push = |name: String, v: [f32; 4]| {
                ids.push(format!("image:{name}"));
                data.extend_from_slice(&v);
                name
            };
            let mut question: Vec<String> =
                (0..3).map(|k| push(format!("q{i}_{k}.jpg"), [0.0, 0.0, 1.0, 0.0])).collect();
            question.insert(1, PLACEHOLDER.to_string());
            let answer = i % 4;
            let choices: Vec<Choice> = (0..4)
                .map(|k| {
                    let r = rng.random_range(0.0..0.5f32);
                    let v = if k == answer {
                        [0.0, 1.0, r, 0.0]
                    } else {
                        let (s, c) = (0.1 * k as f32).sin_cos();
                        [c, 0.0, r, s]
                    };
                    Choice::Item(push(format!("c{i}_{k}.jpg"), v))
                })
                .collect();
            questions.push(Question {
                qid: format!("q{i}"),
                recipe_id: format!("r{}", i / 2),
                task: "visual_cloze".into(),
                question,
                choice_list: choices,
                answer,
                ..Default::default()
            });
        }
        let v = Vectors::new(4, ids, data);
        let ts = TaskSet { questions, extra: Default::default() };
        let rep = audit(&ts, &FeatureResolver::new(Some(&v), None, None), &cfg(200));
        let p = rep.tasks[0].shortcuts.as_ref().unwrap();
        assert_eq!((p.questions, p.left_out), (160, 0));
        let choice_only = entry(p, "probe_choice_only").accuracy.value;
        let distance = entry(p, "probe_distance_rank").accuracy.value;
        assert!(choice_only > 0.9, "{choice_only}");
        assert!(distance < p.chance + 0.15, "{distance}");
        assert_eq!(p.shortcut_free, Some(false));
        assert_eq!(p.worst.as_ref().unwrap().key, "probe_choice_only");
    }

    /// A flat rank histogram that hides a rule: the answer is the nearest choice in tight questions and the
    /// farthest in loose ones. The rank picks sit near chance; "rank given spread and level" finds it.
    #[test]
    fn a_rank_that_follows_the_spread_is_a_shortcut() {
        let mut rng = stepwise_core::rng::rng_for(11, "rank-by-spread-test");
        let qs: Vec<ShortcutQuestion> = (0..800)
            .map(|i| {
                let tight = i % 2 == 0;
                let scale = if tight { 0.01 } else { 0.3 };
                let d: Vec<f64> = (0..4).map(|_| 0.4 + scale * rng.random::<f64>()).collect();
                let order = ranks(&d);
                let want = if tight { 0 } else { 3 };
                let answer = order.iter().position(|&r| r == want).unwrap();
                let co: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
                question(i, d, co, answer)
            })
            .collect();
        let p = panel(Task::TextualCloze, &qs, 4, &cfg(200)).unwrap();
        for key in ["rank_1", "rank_4"] {
            assert!((entry(&p, key).accuracy.value - 0.5).abs() < 1e-12, "{key}");
        }
        let rule = entry(&p, "rank_by_spread");
        assert!(rule.accuracy.value > 0.95, "{rule:?}");
        assert_eq!(rule.questions, 400);
        assert_eq!(p.shortcut_free, Some(false));
    }

    /// "Not one of a reversed pair" on single questions, and on an ordering set whose answer is never in the
    /// reversed pair it shows (as calibrated ordering made them before it dropped such pairs): half the questions
    /// are answered where chance is a quarter.
    #[test]
    fn a_reversed_pair_without_the_answer_is_a_shortcut() {
        let seq = |s: &str| Choice::Sequence(s.chars().map(String::from).collect());
        let q = |choices: [&str; 4], answer: usize| Question {
            choice_list: choices.iter().map(|c| seq(c)).collect(),
            answer,
            ..Default::default()
        };
        assert_eq!(not_reversed_hit(&q(["abcd", "dcba", "bacd", "acbd"], 2)), Some(0.5));
        assert_eq!(not_reversed_hit(&q(["abcd", "dcba", "bacd", "acbd"], 0)), Some(0.0));
        assert_eq!(not_reversed_hit(&q(["abcd", "bacd", "acbd", "abdc"], 1)), Some(0.25));
        // Every choice in a pair: all count.
        assert_eq!(not_reversed_hit(&q(["abcd", "dcba", "bacd", "dcab"], 3)), Some(0.25));
        let items = Question { choice_list: vec![Choice::Item("x".into()); 4], ..Default::default() };
        assert_eq!(not_reversed_hit(&items), None);

        let mut rng = stepwise_core::rng::rng_for(3, "reversed-pair-test");
        let qs: Vec<ShortcutQuestion> = (0..400)
            .map(|i| {
                let d: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
                let co: Vec<f64> = (0..4).map(|_| rng.random::<f64>()).collect();
                // Choices 1 and 2 are each other's reverse; the answer is 0 or 3.
                let answer = if rng.random::<bool>() { 0 } else { 3 };
                let hit = not_reversed_hit(&q(["abcd", "bdca", "acdb", "dabc"], answer));
                ShortcutQuestion { not_reversed: hit, ..question(i, d, co, answer) }
            })
            .collect();
        let p = panel(Task::VisualOrdering, &qs, 4, &cfg(200)).unwrap();
        assert_eq!(entry(&p, "not_reversed").accuracy.value, 0.5);
        assert_eq!(entry(&p, "not_reversed").name, "not one of a reversed pair");
        assert_eq!(p.shortcut_free, Some(false));
        assert!((p.verdict_confidence - (1.0 - 0.05 / 8.0)).abs() < 1e-12);
    }

    #[test]
    fn ordering_choice_only_reads_the_shown_orders_or_the_recorded_ones() {
        let seq = |s: &[&str]| Choice::Sequence(s.iter().map(|x| x.to_string()).collect());
        let mut q = Question {
            choice_list: vec![seq(&["a", "b", "c"]), seq(&["a", "c", "b"]), seq(&["c", "b", "a"])],
            ..Default::default()
        };
        // a-b-c: 1/3 to a-c-b, 1 to c-b-a.
        let v = ordering_choice_only(&q);
        assert!((v[0] - 2.0 / 3.0).abs() < 1e-12 && (v[2] - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-12, "{v:?}");
        // meta.choice_orders wins over the shown strings.
        q.extra.insert("meta".into(), serde_json::json!({"choice_orders": [[0, 1, 2], [0, 1, 2], [0, 1, 2]]}));
        assert_eq!(ordering_choice_only(&q), vec![0.0, 0.0, 0.0]);
    }
}
