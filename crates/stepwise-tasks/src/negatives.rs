//! Choosing negatives (distractors): RecipeQA's adaptive neighbourhood, Meta-RecipeQA's knob 2 (ball or shell
//! around the answer) and knob 3 (negatives as close to the question as the answer), and wrong orderings.
//!
//! Every function either returns exactly the number of negatives asked for or a [`SkipReason`]: constraints are
//! never relaxed to make a question.

use rand::Rng;
use rand::seq::index::sample;
use serde::Serialize;
use stepwise_core::sequencing::all_permutations;

use crate::counts::SkipReason;

/// A candidate negative and its distance to the query it was found for (the answer, or for coherence the
/// nearest coherent image).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cand {
    pub item: u32,
    pub dist: f32,
}

impl Cand {
    /// Nearest first, ties by item: the order of every candidate list.
    pub fn cmp_nearest(&self, other: &Cand) -> std::cmp::Ordering {
        self.dist.total_cmp(&other.dist).then(self.item.cmp(&other.item))
    }
}

/// The numbers a selection used, recorded in each question's provenance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SelectionStats {
    /// Candidates the rule considered (after validity filters).
    pub candidates: usize,
    /// RecipeQA: the closest candidate's distance and the cut `margin × d_min`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d_min: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f32>,
    /// Knob 2: mean and standard deviation of the reference distances (cloze: the K_C nearest candidates;
    /// coherence: the whole union), and the interval sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub m_d: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s_d: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lo: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hi: Option<f32>,
    /// Candidates left to sample from (after the adaptive cut, or inside the knob-2 region).
    pub pool: usize,
    /// Knob 3: candidates of the pool meeting the closeness constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constrained_pool: Option<usize>,
    /// Knob settings: whether the constraint could not be met among the searched neighbours and the candidates
    /// came from the widened search (every item of the catalog within the region's reach).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub widened: Option<bool>,
}

/// Drop candidates that are the same content as the query (distance ≤ `epsilon`) or already used.
pub fn valid(list: &[(u32, f32)], epsilon: f32, used: &[u32]) -> Vec<Cand> {
    list.iter().filter(|(i, d)| *d > epsilon && !used.contains(i)).map(|&(item, dist)| Cand { item, dist }).collect()
}

/// RecipeQA's adaptive neighbourhood (RecipeQA §3): among the k nearest candidates, those closer than
/// `margin × d_min` (d_min: the closest candidate's distance) are too similar to the answer to be fair
/// distractors and are dropped; `n` negatives are sampled uniformly from the rest. `cands` is sorted by distance.
pub fn adaptive_neighbourhood(
    cands: &[Cand],
    margin: f32,
    n: usize,
    rng: &mut impl Rng,
) -> Result<(Vec<Cand>, SelectionStats), SkipReason> {
    let mut stats = SelectionStats { candidates: cands.len(), ..Default::default() };
    let Some(first) = cands.first() else {
        return Err(SkipReason::TooFewCandidates);
    };
    let threshold = margin * first.dist;
    let rest: Vec<Cand> = cands.iter().copied().filter(|c| c.dist >= threshold).collect();
    stats.d_min = Some(first.dist);
    stats.threshold = Some(threshold);
    stats.pool = rest.len();
    if rest.len() < n {
        return Err(SkipReason::TooFewCandidates);
    }
    Ok((sample_uniform(&rest, n, rng), stats))
}

/// Knob 2's distance statistics (Meta-RecipeQA appendix B): the mean m_d and (population) standard deviation
/// s_d of the distances of `reference` — for cloze the K_C nearest candidates of the answer, for coherence the
/// whole union of the coherent images' neighbour lists (appendix B.1). None when `reference` is empty.
pub fn knob2_stats(reference: &[Cand]) -> Option<(f32, f32)> {
    if reference.is_empty() {
        return None;
    }
    let n = reference.len() as f64;
    let mean = reference.iter().map(|c| c.dist as f64).sum::<f64>() / n;
    let var = reference.iter().map(|c| (c.dist as f64 - mean).powi(2)).sum::<f64>() / n;
    Some((mean as f32, var.sqrt() as f32))
}

/// Knob 2's interval for `setting`: 0 → the ball d < m_d − s_d (hard negatives, close to the answer), reported
/// as (0, m_d − s_d); 1 → the shell m_d − s_d ≤ d ≤ m_d + s_d.
pub fn knob2_interval(m: f32, s: f32, setting: u8) -> (f32, f32) {
    if setting == 0 { (0.0, m - s) } else { (m - s, m + s) }
}

/// True when a candidate at distance `d` is inside knob 2's region for `setting` with interval `(lo, hi)`.
pub fn in_knob2_region(d: f32, (lo, hi): (f32, f32), setting: u8) -> bool {
    if setting == 0 { d < hi } else { d >= lo && d <= hi }
}

/// Knob 2's region: the candidates of `cands` (sorted by distance) inside the ball (setting 0) or the shell
/// (setting 1) that m_d and s_d of the `k_c` nearest candidates define ([`knob2_stats`]). Every candidate
/// counts, not only the K_C nearest: K_C sets the statistics, the searched neighbourhood the pool.
pub fn knob2_region(cands: &[Cand], k_c: usize, setting: u8) -> (Vec<Cand>, SelectionStats) {
    let reference = &cands[..cands.len().min(k_c)];
    let mut stats = SelectionStats { candidates: cands.len(), ..Default::default() };
    let Some((m, s)) = knob2_stats(reference) else {
        return (Vec::new(), stats);
    };
    let region = region_of(cands, m, s, setting, &mut stats);
    (region, stats)
}

/// The candidates of `cands` inside the region of (m, s) for `setting`, with the interval and pool size
/// recorded in `stats`.
pub fn region_of(cands: &[Cand], m: f32, s: f32, setting: u8, stats: &mut SelectionStats) -> Vec<Cand> {
    let interval = knob2_interval(m, s, setting);
    let region: Vec<Cand> = cands.iter().copied().filter(|c| in_knob2_region(c.dist, interval, setting)).collect();
    stats.m_d = Some(m);
    stats.s_d = Some(s);
    stats.lo = Some(interval.0);
    stats.hi = Some(interval.1);
    stats.pool = region.len();
    region
}

/// Draw `n` negatives from `pool`. With `n_constrained > 0` (knob 3, setting 1), that many are drawn first from
/// the candidates satisfying `close` (the rest from the whole pool), so at least `n_constrained` negatives meet
/// the constraint. Errors: the pool is smaller than `n` (knob 2 region too small), or too few candidates meet
/// the constraint.
pub fn draw_with_constraint(
    pool: &[Cand],
    n: usize,
    n_constrained: usize,
    close: impl Fn(&Cand) -> bool,
    stats: &mut SelectionStats,
    rng: &mut impl Rng,
) -> Result<Vec<Cand>, SkipReason> {
    if pool.len() < n {
        return Err(SkipReason::Knob2RegionTooSmall);
    }
    if n_constrained == 0 {
        return Ok(sample_uniform(pool, n, rng));
    }
    let constrained: Vec<Cand> = pool.iter().copied().filter(|c| close(c)).collect();
    stats.constrained_pool = Some(constrained.len());
    if constrained.len() < n_constrained.min(n) {
        return Err(SkipReason::Knob3NoCloseNegative);
    }
    let mut out = sample_uniform(&constrained, n_constrained.min(n), rng);
    let rest: Vec<Cand> = pool.iter().copied().filter(|c| !out.iter().any(|o| o.item == c.item)).collect();
    out.extend(sample_uniform(&rest, n - out.len(), rng));
    Ok(out)
}

/// `n` distinct candidates drawn uniformly (in draw order).
pub fn sample_uniform(cands: &[Cand], n: usize, rng: &mut impl Rng) -> Vec<Cand> {
    let n = n.min(cands.len());
    sample(rng, cands.len(), n).into_iter().map(|i| cands[i]).collect()
}

/// Wrong orderings for visual ordering: `n` distinct non-identity permutations of `0..n_items`, drawn uniformly
/// (RecipeQA; knob 2 setting 0) or, with `weight`, without replacement with probability proportional to
/// `weight(perm)` (knob 2 setting 1: the sum of distances between consecutive images along the order).
pub fn wrong_orders(
    n_items: usize,
    n: usize,
    weight: Option<&dyn Fn(&[usize]) -> f64>,
    rng: &mut impl Rng,
) -> Result<(Vec<Vec<usize>>, Vec<f64>), SkipReason> {
    let wrong: Vec<Vec<usize>> = all_permutations(n_items).into_iter().skip(1).collect();
    if wrong.len() < n {
        return Err(SkipReason::TooFewOrderings);
    }
    let Some(weight) = weight else {
        let picked = sample(rng, wrong.len(), n).into_iter().map(|i| wrong[i].clone()).collect();
        return Ok((picked, Vec::new()));
    };
    let mut weights: Vec<f64> = wrong.iter().map(|p| weight(p).max(0.0)).collect();
    let mut alive: Vec<bool> = vec![true; wrong.len()];
    let mut picked = Vec::with_capacity(n);
    let mut picked_w = Vec::with_capacity(n);
    for _ in 0..n {
        let total: f64 = weights.iter().zip(&alive).filter(|(_, a)| **a).map(|(w, _)| w).sum();
        let idx = if total > 0.0 {
            let mut r = rng.random::<f64>() * total;
            let mut chosen = None;
            for (i, (w, a)) in weights.iter().zip(&alive).enumerate() {
                if !*a {
                    continue;
                }
                chosen = Some(i);
                if r < *w {
                    break;
                }
                r -= w;
            }
            chosen.expect("some order is alive")
        } else {
            // All remaining weights are zero (identical images): equal weights, i.e. uniform.
            let alive_idx: Vec<usize> = (0..wrong.len()).filter(|&i| alive[i]).collect();
            alive_idx[rng.random_range(0..alive_idx.len())]
        };
        alive[idx] = false;
        picked.push(wrong[idx].clone());
        picked_w.push(weights[idx]);
        weights[idx] = 0.0;
    }
    Ok((picked, picked_w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::rng::rng_for;

    fn cands(ds: &[f32]) -> Vec<Cand> {
        ds.iter().enumerate().map(|(i, &d)| Cand { item: i as u32, dist: d }).collect()
    }

    #[test]
    fn adaptive_neighbourhood_drops_near_duplicates() {
        let c = cands(&[0.1, 0.11, 0.119, 0.125, 0.3, 0.4, 0.5]);
        let (got, st) = adaptive_neighbourhood(&c, 1.2, 3, &mut rng_for(1, "a")).unwrap();
        assert_eq!(st.pool, 4); // 0.125, 0.3, 0.4, 0.5 are ≥ 1.2 × 0.1
        assert!(got.iter().all(|g| g.dist >= 0.12));
        assert_eq!(
            adaptive_neighbourhood(&c[..4], 1.2, 3, &mut rng_for(1, "a")).unwrap_err(),
            SkipReason::TooFewCandidates
        );
    }

    #[test]
    fn knob2_ball_and_shell_follow_mean_and_std() {
        // Distances 1..=10: mean 5.5, population std ≈ 2.872.
        let c = cands(&(1..=10).map(|x| x as f32).collect::<Vec<_>>());
        let (ball, st) = knob2_region(&c, 10, 0);
        assert!((st.m_d.unwrap() - 5.5).abs() < 1e-6 && (st.s_d.unwrap() - 2.8723).abs() < 1e-3);
        assert_eq!(ball.iter().map(|c| c.dist).collect::<Vec<_>>(), vec![1.0, 2.0]);
        let (shell, _) = knob2_region(&c, 10, 1);
        assert_eq!(shell.iter().map(|c| c.dist).collect::<Vec<_>>(), vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        // Only the K_C nearest set m_d and s_d (1..=4: 2.5 and ≈ 1.118); the region takes every candidate.
        let (shell, st) = knob2_region(&c, 4, 1);
        assert!((st.m_d.unwrap() - 2.5).abs() < 1e-6);
        assert_eq!(shell.iter().map(|c| c.dist).collect::<Vec<_>>(), vec![2.0, 3.0]);
        assert_eq!(st.candidates, 10);
        let (ball, _) = knob2_region(&c, 4, 0);
        assert_eq!(ball.iter().map(|c| c.dist).collect::<Vec<_>>(), vec![1.0]);
    }

    #[test]
    fn knob3_constraint_is_met_or_the_question_is_skipped() {
        let c = cands(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let mut st = SelectionStats::default();
        for seed in 0..20 {
            let got = draw_with_constraint(&c, 3, 1, |c| c.item == 4, &mut st, &mut rng_for(seed, "k")).unwrap();
            assert!(got.iter().any(|g| g.item == 4));
            let mut items: Vec<u32> = got.iter().map(|g| g.item).collect();
            items.sort();
            items.dedup();
            assert_eq!(items.len(), 3);
        }
        let e = draw_with_constraint(&c, 3, 1, |_| false, &mut st, &mut rng_for(0, "k")).unwrap_err();
        assert_eq!(e, SkipReason::Knob3NoCloseNegative);
        let e = draw_with_constraint(&c[..2], 3, 0, |_| true, &mut st, &mut rng_for(0, "k")).unwrap_err();
        assert_eq!(e, SkipReason::Knob2RegionTooSmall);
    }

    #[test]
    fn weighted_orders_prefer_heavy_ones() {
        // Weight 1000 for one order, 1 for the others: it is almost always among the 3 picked.
        let heavy = vec![3, 2, 1, 0];
        let w = |p: &[usize]| if p == heavy.as_slice() { 1000.0 } else { 1.0 };
        let mut hits = 0;
        for seed in 0..50 {
            let (orders, ws) = wrong_orders(4, 3, Some(&w), &mut rng_for(seed, "o")).unwrap();
            assert_eq!(orders.len(), 3);
            assert!(orders.iter().all(|o| o != &vec![0, 1, 2, 3]));
            assert_eq!(ws.len(), 3);
            hits += orders.contains(&heavy) as usize;
        }
        assert!(hits >= 48, "{hits}");
        let (u, _) = wrong_orders(4, 3, None, &mut rng_for(1, "o")).unwrap();
        assert_eq!(u.len(), 3);
        assert!(wrong_orders(2, 3, None, &mut rng_for(1, "o")).is_err());
    }
}
