//! Shortcuts that need no vectors: question overlap (Meta-RecipeQA's bias 1), answer-position imbalance and
//! choice-length cues.

use std::collections::BTreeMap;

use stepwise_core::{ItemModality, Question, Task};

use super::provenance::Provenance;

/// Whether a question's answer step is revealed by another question of the same procedure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlapFlags {
    /// By another question of the same task.
    pub same_task: bool,
    /// By another question of any task in the file.
    pub any_task: bool,
    /// By a *later* question of the same task (file order): what knob 1 rules out.
    pub later_same_task: bool,
}

/// Bias 1 (Meta-RecipeQA §3.2): for each question, whether its answer step is revealed by another question of
/// the same procedure. `None` when the question has no answer step (ordering) or no provenance. `all` is every
/// question of the file in file order.
pub fn overlap_flags(
    questions: &[&Question],
    prov: &[Provenance],
    all: &[(&Question, &Provenance)],
) -> Vec<Option<OverlapFlags>> {
    let mut by_proc: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (_, p)) in all.iter().enumerate() {
        by_proc.entry(p.procedure.as_str()).or_default().push(i);
    }
    questions
        .iter()
        .zip(prov)
        .map(|(q, p)| {
            let a = p.answer_step?;
            let mut f = OverlapFlags { same_task: false, any_task: false, later_same_task: false };
            let mut after_self = false;
            for &j in by_proc.get(p.procedure.as_str()).map(Vec::as_slice).unwrap_or(&[]) {
                let (oq, op) = all[j];
                if oq.qid == q.qid && oq.task == q.task {
                    after_self = true;
                    continue;
                }
                if op.revealed_steps(oq.task_kind()).contains(&a) {
                    f.any_task = true;
                    if oq.task == q.task {
                        f.same_task = true;
                        f.later_same_task |= after_self;
                    }
                }
            }
            Some(f)
        })
        .collect()
}

/// Answers per choice position, the χ² statistic against a uniform distribution and its p-value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PositionBalance {
    pub counts: Vec<u64>,
    pub chi2: f64,
    pub dof: usize,
    pub p_value: f64,
    /// The most frequent answer position (the "always answer k" baseline).
    pub majority_position: usize,
}

pub fn position_balance(questions: &[&Question]) -> Option<PositionBalance> {
    let k = questions.iter().map(|q| q.choice_list.len()).max()?;
    if k < 2 {
        return None;
    }
    let mut counts = vec![0u64; k];
    for q in questions {
        counts[q.answer] += 1;
    }
    let n = questions.len() as f64;
    let expected = n / k as f64;
    let chi2 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum::<f64>();
    let majority_position =
        counts.iter().enumerate().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0))).map_or(0, |x| x.0);
    Some(PositionBalance { chi2, dof: k - 1, p_value: chi2_sf(chi2, (k - 1) as f64), counts, majority_position })
}

/// Whether the longest and the shortest choice (in characters; ties: lowest index) is the answer, for tasks
/// whose choices are texts.
pub fn length_cues(q: &Question) -> Option<(bool, bool)> {
    if q.task_kind().map(Task::item_modality) != Some(ItemModality::Text) {
        return None;
    }
    let lens: Vec<usize> = q.choice_list.iter().map(|c| c.items().iter().map(|s| s.chars().count()).sum()).collect();
    let longest = lens.iter().enumerate().fold(0, |b, (i, &l)| if l > lens[b] { i } else { b });
    let shortest = lens.iter().enumerate().fold(0, |b, (i, &l)| if l < lens[b] { i } else { b });
    Some((longest == q.answer, shortest == q.answer))
}

/// Survival function of the χ² distribution: P(X ≥ x) = Q(dof/2, x/2), the regularised upper incomplete gamma.
pub fn chi2_sf(x: f64, dof: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    upper_gamma_q(dof / 2.0, x / 2.0)
}

/// Q(a, x) by the series (x < a + 1) or the Lentz continued fraction (otherwise).
fn upper_gamma_q(a: f64, x: f64) -> f64 {
    let ln_pref = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let mut sum = 1.0 / a;
        let mut term = sum;
        let mut ap = a;
        for _ in 0..1000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        (1.0 - sum * ln_pref.exp()).clamp(0.0, 1.0)
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-15 {
                break;
            }
        }
        (ln_pref.exp() * h).clamp(0.0, 1.0)
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let s: f64 = G[0] + (1..9).map(|i| G[i] / (x + i as f64)).sum::<f64>();
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Choice;

    #[test]
    fn chi2_survival_matches_known_values() {
        // scipy.stats.chi2.sf(7.815, 3) ≈ 0.05; sf(2, 2) = e^-1; sf(11.345, 3) ≈ 0.01.
        assert!((chi2_sf(7.814727903251178, 3.0) - 0.05).abs() < 1e-9);
        assert!((chi2_sf(2.0, 2.0) - (-1.0f64).exp()).abs() < 1e-12);
        assert!((chi2_sf(11.344866730144373, 3.0) - 0.01).abs() < 1e-9);
        assert!((chi2_sf(0.5, 1.0) - 0.4795001221869535).abs() < 1e-9);
        assert_eq!(chi2_sf(0.0, 3.0), 1.0);
    }

    #[test]
    fn positions_and_length_cues() {
        let q = |answer: usize, choices: &[&str]| Question {
            task: "textual_cloze".into(),
            choice_list: choices.iter().map(|c| Choice::Item(c.to_string())).collect(),
            answer,
            ..Default::default()
        };
        let qs = [q(0, &["long one", "a", "bb", "ccc"]), q(0, &["x", "yy", "zzz", "w"]), q(2, &["a", "b", "c", "d"])];
        let refs: Vec<&Question> = qs.iter().collect();
        let b = position_balance(&refs).unwrap();
        assert_eq!(b.counts, vec![2, 0, 1, 0]);
        assert_eq!(b.majority_position, 0);
        assert_eq!(b.dof, 3);
        assert_eq!(length_cues(&qs[0]), Some((true, false)));
        assert_eq!(length_cues(&qs[1]), Some((false, true)));
    }
}
