//! Which steps each question shows: the procedure filters and the question positions of RecipeQA mode and of
//! Meta-RecipeQA's knob 1 (question overlap).
//!
//! A plan only picks positions; negatives come later. Positions are drawn from `rng_for(seed, key)` with a key
//! per (task, procedure) that does not include knobs 2 and 3, so the eight knob settings that share k1 ask the
//! same questions and differ only in their negatives: differences between settings measure the knobs, not
//! sampling noise.

use rand::Rng;
use rand::seq::index::sample;
use rayon::prelude::*;
use stepwise_core::rng::rng_for;
use stepwise_core::{Procedure, Task};

use crate::catalog::Catalog;
use crate::config::{GenerateConfig, Mode};
use crate::counts::SkipReason;

/// One question to make: `positions` index the procedure's eligible steps (increasing); `slot` is the position
/// (0..n_items) of the answer — the hidden step (cloze), the replaced step (coherence) or, for ordering, the step
/// knob 1 removes from the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedQuestion {
    /// The attempt number within the procedure (part of the question's random stream key).
    pub attempt: usize,
    pub positions: Vec<usize>,
    pub slot: usize,
}

/// The questions planned for one procedure.
#[derive(Debug, Clone, Default)]
pub struct ProcPlan {
    pub questions: Vec<PlannedQuestion>,
    /// Why the procedure is not used at all.
    pub skipped: Option<SkipReason>,
    /// Knob 1: question attempts not made because the pool ran out.
    pub exhausted: u64,
}

/// The plan of one (task, mode) over the corpus, one entry per procedure in corpus order.
#[derive(Debug, Clone)]
pub struct Plan {
    pub task: Task,
    pub mode: Mode,
    pub procs: Vec<ProcPlan>,
}

/// Plan the questions of `task` in `mode`.
pub fn plan(task: Task, mode: Mode, procedures: &[Procedure], cat: &Catalog, cfg: &GenerateConfig) -> Plan {
    let procs = procedures
        .par_iter()
        .zip(cat.procs.par_iter())
        .map(|(p, entry)| {
            let n_steps = p.steps.len();
            if n_steps < cfg.min_steps || n_steps > cfg.max_steps {
                return ProcPlan { skipped: Some(SkipReason::StepCountOutOfRange), ..Default::default() };
            }
            let n = entry.eligible.len();
            if n < cfg.n_items {
                return ProcPlan { skipped: Some(SkipReason::TooFewEligibleSteps), ..Default::default() };
            }
            match mode {
                Mode::RecipeQa => {
                    let mut rng = rng_for(cfg.seed, &format!("tasks/plan/{task}/recipeqa/{}", p.id));
                    plan_recipeqa(n, cfg, &mut rng)
                }
                Mode::Knobs(k) => {
                    if n < cfg.knob1_min_steps.max(cfg.n_items) {
                        return ProcPlan { skipped: Some(SkipReason::Knob1TooFewSteps), ..Default::default() };
                    }
                    let mut rng = rng_for(cfg.seed, &format!("tasks/plan/{task}/k1={}/{}", k.k1, p.id));
                    plan_knob1(n, k.k1, cfg, &mut rng)
                }
            }
        })
        .collect();
    Plan { task, mode, procs }
}

/// RecipeQA mode (RecipeQA §3): each question samples `n_items` step positions uniformly, kept in increasing
/// order, and an answer slot uniformly; questions of a procedure are independent (so they may overlap — the bias
/// knob 1 removes) but never repeat the same positions.
pub fn plan_recipeqa(n: usize, cfg: &GenerateConfig, rng: &mut impl Rng) -> ProcPlan {
    let wanted = cfg.recipeqa_questions.count(n).min(binomial(n, cfg.n_items));
    let mut questions: Vec<PlannedQuestion> = Vec::with_capacity(wanted);
    let mut draws = 0;
    // Rejection of repeated position sets; the bound only matters when almost every subset is taken.
    while questions.len() < wanted && draws < 64 * wanted.max(1) {
        draws += 1;
        let mut positions: Vec<usize> = sample(rng, n, cfg.n_items).into_vec();
        positions.sort_unstable();
        if questions.iter().any(|q| q.positions == positions) {
            continue;
        }
        let slot = rng.random_range(0..cfg.n_items);
        questions.push(PlannedQuestion { attempt: questions.len(), positions, slot });
    }
    ProcPlan { questions, skipped: None, exhausted: 0 }
}

/// Knob 1 (Meta-RecipeQA §3.2, appendix B): questions are sampled one after another from a pool of the
/// procedure's steps; after each question the step of its answer leaves the pool, so no later question shows it.
/// Setting 0 allows at most ⌊n/2⌋ questions; setting 1 at most ⌊n/3⌋ and removes one further random step per
/// question. Steps leave the pool whether or not the question survives its negative constraints later, so a
/// skipped question never frees a step (and all settings sharing k1 share positions).
pub fn plan_knob1(n: usize, k1: u8, cfg: &GenerateConfig, rng: &mut impl Rng) -> ProcPlan {
    let budget = if k1 == 0 { n / 2 } else { n / 3 };
    let mut pool: Vec<usize> = (0..n).collect();
    let mut questions = Vec::with_capacity(budget);
    let mut exhausted = 0u64;
    for attempt in 0..budget {
        if pool.len() < cfg.n_items {
            exhausted = (budget - attempt) as u64;
            break;
        }
        let mut picks: Vec<usize> = sample(rng, pool.len(), cfg.n_items).into_vec();
        picks.sort_unstable();
        let positions: Vec<usize> = picks.iter().map(|&i| pool[i]).collect();
        let slot = rng.random_range(0..cfg.n_items);
        pool.retain(|&p| p != positions[slot]);
        if k1 == 1 && !pool.is_empty() {
            let extra = rng.random_range(0..pool.len());
            pool.remove(extra);
        }
        questions.push(PlannedQuestion { attempt, positions, slot });
    }
    ProcPlan { questions, skipped: None, exhausted }
}

fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut r: u128 = 1;
    for i in 0..k {
        r = r * (n - i) as u128 / (i + 1) as u128;
    }
    r.min(usize::MAX as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QuestionsPerProcedure;
    use proptest::prelude::*;
    use stepwise_core::rng::rng_for;

    #[test]
    fn binomials() {
        assert_eq!(binomial(4, 4), 1);
        assert_eq!(binomial(10, 4), 210);
        assert_eq!(binomial(3, 4), 0);
    }

    #[test]
    fn recipeqa_positions_are_increasing_and_distinct() {
        let cfg = GenerateConfig { recipeqa_questions: QuestionsPerProcedure::Fixed(5), ..Default::default() };
        let p = plan_recipeqa(6, &cfg, &mut rng_for(1, "t"));
        assert_eq!(p.questions.len(), 5);
        for q in &p.questions {
            assert!(q.positions.windows(2).all(|w| w[0] < w[1]) && q.positions.len() == 4 && q.slot < 4);
        }
        let mut sets: Vec<_> = p.questions.iter().map(|q| q.positions.clone()).collect();
        sets.dedup();
        assert_eq!(sets.len(), 5);
        // Only one 4-subset of 4 steps exists.
        assert_eq!(plan_recipeqa(4, &cfg, &mut rng_for(1, "t")).questions.len(), 1);
    }

    proptest! {
        /// Knob 1's guarantee: no question shows (as an item or answer) the answer step of an earlier question.
        #[test]
        fn knob1_answers_never_reappear(n in 5usize..30, k1 in 0u8..2, seed in 0u64..1000) {
            let cfg = GenerateConfig::default();
            let p = plan_knob1(n, k1, &cfg, &mut rng_for(seed, "x"));
            let budget = if k1 == 0 { n / 2 } else { n / 3 };
            prop_assert_eq!(p.questions.len() as u64 + p.exhausted, budget as u64);
            let mut answered = Vec::new();
            for q in &p.questions {
                for pos in &q.positions {
                    prop_assert!(!answered.contains(pos));
                }
                answered.push(q.positions[q.slot]);
            }
        }
    }

    #[test]
    fn knob1_setting_one_uses_a_smaller_budget_and_pool() {
        let cfg = GenerateConfig::default();
        let p0 = plan_knob1(12, 0, &cfg, &mut rng_for(3, "x"));
        let p1 = plan_knob1(12, 1, &cfg, &mut rng_for(3, "x"));
        assert_eq!(p0.questions.len(), 6);
        assert!(p1.questions.len() <= 4);
    }
}
