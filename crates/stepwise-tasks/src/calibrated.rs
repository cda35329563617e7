//! Calibrated knobs ([`crate::KnobsMode::Calibrated`]): negatives chosen so that the distance shortcuts —
//! "pick the choice nearest the question", its mirror image "pick the farthest", and every rank in between —
//! answer at chance.
//!
//! The shortcuts read one distance per choice, the one the Hasty Student reads (RecipeQA §4.2): cloze, the
//! cosine distance of the choice to the mean of the question items' unit vectors; coherence, each shown image's
//! cosine distance to the mean of the other shown images; ordering, the mean cosine distance between consecutive
//! images. The answer's **rank** is how many other choices have a smaller distance. A set is rank-balanced when
//! that rank is uniform over the positions; then no rule that picks the k-th nearest choice beats chance.
//!
//! Each question draws a target rank and its negatives realise it. Not every question can take every rank (an
//! answer closer to the question than every candidate can only be the nearest), and dropping the questions whose
//! drawn rank is out of reach would tilt the kept ranks back towards the shortcut. So the ranks are allocated:
//! a pilot sample of the plan's questions says which rank sets occur how often ([`RankAllocation::solve`], a
//! max-flow from rank sets to ranks), and each question then draws its rank — or, when its set is over-supplied,
//! is left out with [`crate::SkipReason::CalibratedRankBalance`] — so that the kept ranks are uniform in
//! expectation while as many questions as possible are kept.

use std::collections::{BTreeMap, HashMap};

use rand::Rng;
use serde::Serialize;
use stepwise_kernels::math::dot_lanes;

use crate::catalog::Catalog;

/// How calibrated knobs depart from the papers' rules, one line each (recorded in every calibrated task set's
/// manifest; the report lists them).
pub const DEPARTURES: &[&str] = &[
    "Knob 2 keeps the paper's ball (k2 = 0) or shell (k2 = 1) around the answer, but its negatives are chosen \
     within it, not drawn uniformly, and only among the K searched neighbours (no widened search).",
    "Knob 3 no longer asks for one negative at least as close to the question as the answer (on a coin flip's \
     half of the questions, as the paper's implementation did): every question draws a target rank for the \
     answer's distance to the question among the choices, and the negatives realise it; k3 = 1 takes them from \
     the candidates nearest the answer's own distance, k3 = 0 from anywhere on each side.",
    "Target ranks are allocated over the questions from a pilot sample so that the kept ranks are uniform; \
     questions whose ranks are over-supplied are left out (calibrated_rank_balance), so a calibrated setting \
     keeps fewer questions than the paper's.",
    "Of several draws realising the target rank, the one kept spaces the choices' distances most evenly and puts \
     the answer at a drawn rank of distance to the other choices when it can (against choice-only shortcuts).",
    "Visual coherence balances the odd image's rank of distance to the other images; visual ordering (no knob 3 in \
     the paper) balances the correct order's rank of chain length, k2 = 0 taking wrong orders of nearly its \
     length, k2 = 1 any, instead of the paper's uniform (k2 = 0) and length-weighted (k2 = 1) draws; the reversed \
     correct order (the same length) is never a choice.",
    "The shortcuts' distance is cosine on the features whatever --metric says (the Hasty Student's distance); \
     knob 2's regions use --metric as in the paper.",
];

/// A set of ranks (bit r = rank r reachable), at most 16 positions.
pub type RankSet = u16;

/// The ranks `lo..=hi` (empty when `lo > hi`).
pub fn rank_range(lo: usize, hi: usize) -> RankSet {
    (lo..=hi).filter(|&r| r < 16).fold(0, |m, r| m | (1 << r))
}

/// Pilot questions: every `stride`-th planned question (in plan order) with a stride that keeps about
/// `PILOT_QUESTIONS` of them; all of them in small plans.
pub const PILOT_QUESTIONS: usize = 3000;

pub fn pilot_stride(planned: usize) -> usize {
    planned.div_ceil(PILOT_QUESTIONS).max(1)
}

/// The rank distribution of each rank set seen in the pilot: keep the question with probability `keep`, then
/// draw its rank from `ranks` (weights over positions).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RankAllocation {
    pub positions: usize,
    /// Rank set → (keep probability, rank weights).
    pub by_set: BTreeMap<RankSet, (f64, Vec<f64>)>,
    /// The pilot's share of questions kept (before the real draws).
    pub expected_keep: f64,
    pub pilot_questions: usize,
}

impl RankAllocation {
    /// The allocation for pilot questions whose rank sets are `sets` (one per question; 0 = no rank reachable)
    /// over `positions` ranks: the largest per-rank quota `c` that a flow from each question to one rank of its
    /// set can fill for every rank (binary search over `c`, each step a max-flow); a set keeps the share of its
    /// questions that the flow assigns, spread over ranks as the flow spreads them.
    pub fn solve(sets: &[RankSet], positions: usize) -> RankAllocation {
        let mut supply: BTreeMap<RankSet, u64> = BTreeMap::new();
        for &s in sets.iter().filter(|&&s| s != 0) {
            *supply.entry(s & rank_range(0, positions - 1)).or_insert(0) += 1;
        }
        supply.retain(|&s, _| s != 0);
        let total: u64 = supply.values().sum();
        let (mut lo, mut hi) = (0u64, total / positions as u64);
        let mut best = flow(&supply, positions, 0).1;
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let (filled, f) = flow(&supply, positions, mid);
            if filled == mid * positions as u64 {
                lo = mid;
                best = f;
            } else {
                hi = mid - 1;
            }
        }
        let by_set = supply
            .iter()
            .map(|(&s, &g)| {
                let f = &best[&s];
                let kept: u64 = f.iter().sum();
                let weights = if kept == 0 { vec![0.0; positions] } else { f.iter().map(|&x| x as f64).collect() };
                (s, (kept as f64 / g as f64, weights))
            })
            .collect();
        let expected_keep = if sets.is_empty() { 0.0 } else { (lo * positions as u64) as f64 / sets.len() as f64 };
        RankAllocation { positions, by_set, expected_keep, pilot_questions: sets.len() }
    }

    /// The rank of a question whose reachable ranks are `set`, or `None` when it is left out for balance (its
    /// set was not seen in the pilot, or the flow keeps only part of its set's questions and the draw says
    /// this one is not among them).
    pub fn draw(&self, set: RankSet, rng: &mut impl Rng) -> Option<usize> {
        let (keep, weights) = self.by_set.get(&set)?;
        let u: f64 = rng.random();
        if u >= *keep {
            return None;
        }
        let total: f64 = weights.iter().sum();
        let mut x = rng.random::<f64>() * total;
        for (r, &w) in weights.iter().enumerate() {
            if w > 0.0 && x < w {
                return Some(r);
            }
            x -= w;
        }
        weights.iter().rposition(|&w| w > 0.0)
    }
}

/// Max-flow from rank sets (supplies) to ranks (demand `quota` each), integral: how much was filled, and each
/// set's flow per rank. Augmenting paths over a graph of at most 2^16 sets and 16 ranks; in practice a handful
/// of sets.
fn flow(supply: &BTreeMap<RankSet, u64>, positions: usize, quota: u64) -> (u64, BTreeMap<RankSet, Vec<u64>>) {
    let sets: Vec<(RankSet, u64)> = supply.iter().map(|(&s, &g)| (s, g)).collect();
    let mut f = vec![vec![0u64; positions]; sets.len()];
    let mut left: Vec<u64> = sets.iter().map(|s| s.1).collect();
    let mut need = vec![quota; positions];
    // Augment along shortest paths set → rank (→ set ← rank)* → rank with residual capacity, by BFS.
    loop {
        // Nodes: sets 0..S, ranks S..S+R.
        let s_n = sets.len();
        let mut prev: Vec<Option<usize>> = vec![None; s_n + positions];
        let mut queue: std::collections::VecDeque<usize> = (0..s_n).filter(|&i| left[i] > 0).collect();
        let mut seen = vec![false; s_n + positions];
        for &i in &queue {
            seen[i] = true;
        }
        let mut end = None;
        while let Some(u) = queue.pop_front() {
            if u < s_n {
                for (r, &wanted) in need.iter().enumerate() {
                    let v = s_n + r;
                    if !seen[v] && sets[u].0 & (1 << r) != 0 {
                        seen[v] = true;
                        prev[v] = Some(u);
                        if wanted > 0 {
                            end = Some(v);
                            break;
                        }
                        queue.push_back(v);
                    }
                }
                if end.is_some() {
                    break;
                }
            } else {
                let r = u - s_n;
                for (i, fi) in f.iter().enumerate() {
                    if !seen[i] && fi[r] > 0 {
                        seen[i] = true;
                        prev[i] = Some(u);
                        queue.push_back(i);
                    }
                }
            }
        }
        let Some(end) = end else { break };
        // Bottleneck along the path.
        let mut path = vec![end];
        while let Some(p) = prev[*path.last().expect("non-empty")] {
            path.push(p);
        }
        path.reverse();
        let mut amount = need[end - s_n].min(left[path[0]]);
        for w in path.windows(2).skip(1).step_by(2) {
            // rank → set edges undo flow on (set, rank)
            amount = amount.min(f[w[1]][w[0] - s_n]);
        }
        left[path[0]] -= amount;
        need[end - s_n] -= amount;
        for (k, w) in path.windows(2).enumerate() {
            if k % 2 == 0 {
                f[w[0]][w[1] - s_n] += amount;
            } else {
                f[w[1]][w[0] - s_n] -= amount;
            }
        }
    }
    let filled = quota * positions as u64 - need.iter().sum::<u64>();
    (filled, sets.iter().map(|s| s.0).zip(f).collect())
}

/// Draws tried per question when choosing among the negatives that realise its target rank.
pub const TRIES: usize = 48;

/// How unevenly `values` (the choices' shortcut distances) are spaced: the spread of the gaps between
/// consecutive sorted values over their mean (0 for equal gaps). A choice whose value stands apart from the
/// others — an outlier below, above or in a wide gap — is what a probe on the distances and their z-scores
/// reads; evenly spaced values leave nothing of the kind to read.
pub fn unevenness(values: &[f32]) -> f32 {
    let mut v: Vec<f32> = values.to_vec();
    v.sort_by(f32::total_cmp);
    let gaps: Vec<f32> = v.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return 0.0;
    }
    let mean = gaps.iter().sum::<f32>() / gaps.len() as f32;
    if mean <= 0.0 {
        return 0.0;
    }
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f32>() / gaps.len() as f32;
    var.sqrt() / mean
}

/// The rank of `values[i]` among `values` (how many are smaller).
pub fn rank_of(values: &[f32], i: usize) -> usize {
    values.iter().filter(|&&x| x < values[i]).count()
}

/// Each choice's cosine distance to the mean of the other choices' unit vectors, from their pairwise cosine
/// similarities (`sim[a * n + b]`): what the audit's choice-only probe reads.
pub fn choice_centrality(sim: &[f32], n: usize) -> Vec<f32> {
    let pair_sum: f32 = (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))).map(|(a, b)| sim[a * n + b]).sum();
    let s2 = n as f32 + 2.0 * pair_sum;
    (0..n)
        .map(|x| {
            let sx = 1.0 + (0..n).filter(|&y| y != x).map(|y| sim[x * n + y]).sum::<f32>();
            let len2 = (s2 - 2.0 * sx + 1.0).max(0.0);
            if len2 > 0.0 { 1.0 - (sx - 1.0) / len2.sqrt() } else { 1.0 }
        })
        .collect()
}

/// The mean normalised Kendall distance of each order to the other orders (the ordering task's choice-only
/// reading).
pub fn order_centrality(orders: &[&[usize]]) -> Vec<f32> {
    let kendall = |a: &[usize], b: &[usize]| -> f32 {
        let n = a.len();
        let mut pos = vec![0usize; n];
        for (i, &x) in b.iter().enumerate() {
            pos[x] = i;
        }
        let mut disc = 0usize;
        for i in 0..n {
            for j in i + 1..n {
                disc += usize::from(pos[a[i]] > pos[a[j]]);
            }
        }
        let pairs = n * n.saturating_sub(1) / 2;
        if pairs == 0 { 0.0 } else { disc as f32 / pairs as f32 }
    };
    (0..orders.len())
        .map(|i| {
            let others: Vec<f32> =
                (0..orders.len()).filter(|&j| j != i).map(|j| kendall(orders[i], orders[j])).collect();
            others.iter().sum::<f32>() / others.len().max(1) as f32
        })
        .collect()
}

/// Among tried draws (each with its choices' shortcut distances and the answer's choice-only rank), the one to
/// keep: a draw whose choice-only rank is `centre_target` if any (so that rank spreads over the positions too),
/// and of those the most evenly spaced ([`unevenness`]); ties to the earliest.
pub fn best_draw(tried: &[(Vec<f32>, usize)], centre_target: usize) -> Option<usize> {
    let matching: Vec<usize> = (0..tried.len()).filter(|&i| tried[i].1 == centre_target).collect();
    let pool: Vec<usize> = if matching.is_empty() { (0..tried.len()).collect() } else { matching };
    pool.into_iter().min_by(|&a, &b| unevenness(&tried[a].0).total_cmp(&unevenness(&tried[b].0)).then(a.cmp(&b)))
}

/// Unit vectors of catalog rows: the shortcuts' distances are cosine whatever the catalog's metric.
pub struct Unit<'a> {
    cat: &'a Catalog,
}

impl<'a> Unit<'a> {
    pub fn new(cat: &'a Catalog) -> Self {
        Unit { cat }
    }

    /// Cosine distance of item `i` to the direction `v` of length `len`.
    pub fn distance_len(&self, v: &[f32], len: f32, i: u32) -> f32 {
        let ni = self.norm(i);
        if len == 0.0 || ni == 0.0 {
            return 1.0;
        }
        1.0 - dot_lanes(v, self.cat.row(i)) / (len * ni)
    }

    fn norm(&self, i: u32) -> f32 {
        let r = self.cat.row(i);
        dot_lanes(r, r).sqrt()
    }

    /// The sum of the unit vectors of `items`.
    pub fn sum(&self, items: &[u32]) -> Vec<f32> {
        let mut s = vec![0f32; self.cat.dim];
        for &i in items {
            let n = self.norm(i);
            if n > 0.0 {
                for (a, b) in s.iter_mut().zip(self.cat.row(i)) {
                    *a += b / n;
                }
            }
        }
        s
    }

    /// Cosine distance of item `i` to the direction `v` (any length).
    pub fn distance(&self, v: &[f32], i: u32) -> f32 {
        self.distance_len(v, dot_lanes(v, v).sqrt(), i)
    }

    /// Cosine similarity of two items.
    pub fn similarity(&self, a: u32, b: u32) -> f32 {
        let (na, nb) = (self.norm(a), self.norm(b));
        if na == 0.0 || nb == 0.0 {
            return 0.0;
        }
        dot_lanes(self.cat.row(a), self.cat.row(b)) / (na * nb)
    }
}

/// The shortcut distances of one question's candidates, each measured once however many settings and passes ask
/// (a coherence question's union of neighbour lists holds hundreds of candidates, each asked by four settings
/// twice).
#[derive(Default)]
pub struct Memo {
    basis: Option<Basis>,
    values: HashMap<u32, (f32, Vec<f32>)>,
}

/// What every candidate of a question is measured against: the unit sum of the question items, its length, and
/// for coherence each coherent image's norm and dot with the sum.
struct Basis {
    sum: Vec<f32>,
    len: f32,
    norms: Vec<f32>,
    dots: Vec<f32>,
    answer: f32,
}

impl Memo {
    fn basis(&mut self, unit: &Unit<'_>, items: &[u32], anchor: Option<u32>) -> &Basis {
        self.basis.get_or_insert_with(|| {
            let sum = unit.sum(items);
            let len = dot_lanes(&sum, &sum).sqrt();
            let norms: Vec<f32> = items.iter().map(|&i| unit.norm(i)).collect();
            let dots: Vec<f32> = items
                .iter()
                .zip(&norms)
                .map(|(&i, &n)| if n > 0.0 { dot_lanes(&sum, unit.cat.row(i)) / n } else { 0.0 })
                .collect();
            let answer = anchor.map_or(f32::NAN, |a| unit.distance(&sum, a));
            Basis { sum, len, norms, dots, answer }
        })
    }

    /// Cloze: the answer's distance to the question (the mean of `items`) and candidate `c`'s.
    pub fn cloze(&mut self, unit: &Unit<'_>, items: &[u32], anchor: u32, c: u32) -> (f32, f32) {
        let answer = self.basis(unit, items, Some(anchor)).answer;
        if let Some(v) = self.values.get(&c) {
            return (answer, v.0);
        }
        let b = self.basis.as_ref().expect("set above");
        let d = unit.distance_len(&b.sum, b.len, c);
        self.values.insert(c, (d, Vec::new()));
        (answer, d)
    }

    /// Coherence: the shown images are `coherent` plus a candidate odd image `c`. Returns the odd image's
    /// distance to the mean of the others, and each coherent image's.
    pub fn coherence(&mut self, unit: &Unit<'_>, coherent: &[u32], c: u32) -> (f32, Vec<f32>) {
        self.basis(unit, coherent, None);
        if let Some(v) = self.values.get(&c) {
            return v.clone();
        }
        let b = self.basis.as_ref().expect("set above");
        let nc = unit.norm(c);
        let row = unit.cat.row(c);
        let sc = if nc > 0.0 && b.len > 0.0 { dot_lanes(&b.sum, row) / (nc * b.len) } else { 0.0 };
        let odd = 1.0 - sc;
        let s_norm2 = b.len * b.len;
        let values = coherent
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let c_i = if nc > 0.0 && b.norms[k] > 0.0 {
                    dot_lanes(row, unit.cat.row(i)) / (nc * b.norms[k])
                } else {
                    0.0
                };
                // others of coherent i = sum − u_i + u_c; its dot with u_i = (sum·u_i − 1) + u_c·u_i, its squared
                // length |sum|² + 2 − 2 sum·u_i + 2 sum·u_c − 2 u_i·u_c.
                let dot = b.dots[k] - 1.0 + c_i;
                let len2 = (s_norm2 + 2.0 - 2.0 * b.dots[k] + 2.0 * sc * b.len - 2.0 * c_i).max(0.0);
                if len2 > 0.0 { 1.0 - dot / len2.sqrt() } else { 1.0 }
            })
            .collect::<Vec<f32>>();
        self.values.insert(c, (odd, values.clone()));
        (odd, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::rng::rng_for;

    #[test]
    fn the_allocation_is_uniform_over_ranks_and_keeps_what_it_can() {
        // 4 positions. 100 questions can take any rank, 300 only ranks 0..=1, 100 only rank 0.
        let mut sets = vec![rank_range(0, 3); 100];
        sets.extend(vec![rank_range(0, 1); 300]);
        sets.extend(vec![rank_range(0, 0); 100]);
        let a = RankAllocation::solve(&sets, 4);
        // Ranks 2 and 3 can only come from the 100 free questions: 50 each, so 50 per rank, 200 kept.
        assert!((a.expected_keep - 200.0 / 500.0).abs() < 1e-9, "{a:?}");
        let mut counts = [0usize; 4];
        let mut rng = rng_for(3, "alloc");
        for &s in sets.iter().cycle().take(50_000) {
            if let Some(r) = a.draw(s, &mut rng) {
                assert!(s & (1 << r) != 0, "a drawn rank is reachable");
                counts[r] += 1;
            }
        }
        let total: usize = counts.iter().sum();
        for c in counts {
            assert!((c as f64 / total as f64 - 0.25).abs() < 0.01, "{counts:?}");
        }
        // Everyone free: everything kept.
        let a = RankAllocation::solve(&[rank_range(0, 3); 40], 4);
        assert_eq!(a.expected_keep, 1.0);
        // Unseen or empty sets are left out.
        assert_eq!(a.draw(rank_range(1, 1), &mut rng), None);
        assert_eq!(RankAllocation::solve(&[0, 0], 4).expected_keep, 0.0);
    }

    #[test]
    fn coherence_distances_match_a_direct_computation() {
        use crate::catalog::{Item, ProcEntry};
        use stepwise_features::Metric;
        let mut state = 11u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let dim = 7;
        let n = 30;
        let data: Vec<f32> = (0..n * dim).map(|_| next()).collect();
        let items = (0..n).map(|i| Item { feature_id: format!("image:{i}"), content: i.to_string(), owners: vec![] });
        let cat = Catalog {
            kind: crate::config::ItemKind::Image,
            metric: Metric::L2,
            dim,
            data,
            items: items.collect(),
            procs: vec![ProcEntry { eligible: vec![], excluded: vec![] }],
        };
        let unit = Unit::new(&cat);
        let coherent = [0u32, 1, 2];
        let mut memo = Memo::default();
        for c in (3..n as u32).chain(3..5) {
            let (odd, values) = memo.coherence(&unit, &coherent, c);
            let rank = values.iter().filter(|&&d| d < odd).count();
            let shown = [0u32, 1, 2, c];
            let d = |k: usize| {
                let others: Vec<u32> = shown.iter().enumerate().filter(|(j, _)| *j != k).map(|(_, &x)| x).collect();
                unit.distance(&unit.sum(&others), shown[k])
            };
            assert!((odd - d(3)).abs() < 1e-5);
            for (k, v) in values.iter().enumerate() {
                assert!((v - d(k)).abs() < 1e-5, "candidate {c}, image {k}");
            }
            let direct = (0..3).filter(|&k| d(k) < d(3)).count();
            assert_eq!(rank, direct, "candidate {c}");
        }
    }
}
