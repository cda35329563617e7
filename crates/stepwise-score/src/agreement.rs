//! Agreement between orderings (annotators, or a model and annotators): Cohen's κ in the two forms the
//! multimodal sequencing paper uses (Wu et al., ACL 2022, appendix B.3).
//!
//! **Order agreement** (B.3.1). Each order of `n` items is encoded as a binary vector over the `C(n,2)·2` ordered
//! pairs: for every item pair `i < j` two entries, `[i before j]` and `[j before i]` (a one-hot of the pair's
//! relative order). Cohen's κ is computed between the two vectors. The instance's agreement is the mean κ over
//! all pairs of its annotators; the dataset's is the mean over instances. (With this encoding both vectors hold
//! exactly `C(n,2)` ones, so `p_e = 1/2` and κ equals Kendall's τ between the two orders — a property the tests
//! check; we still compute κ from the vectors so the definition stays the paper's.)
//!
//! **Alternative-order agreement** (B.3.2). Annotators may give alternative valid orders besides the gold
//! (authored) order `g`. For two orders `a`, `b`, let `K` be the positions where `a[k] ≠ g[k]` or `b[k] ≠ g[k]`;
//! κ is Cohen's κ between the item labels `a[K]` and `b[K]` (multi-class). The alternatives of two annotators are
//! paired by best match (Algorithm 1 as we implement it): compute κ for every (alternative of A, alternative of
//! B), then greedily take the pair with the highest κ (compared exactly, as fractions of counts; ties: lower
//! index of A, then of B), remove both, repeat until one side runs out; the annotator pair's agreement is the mean κ of its matched pairs. Instance and
//! dataset values are means as above.
//!
//! Cohen's κ follows scikit-learn's `cohen_kappa_score` (unweighted): `κ = 1 − Σ_{i≠j} O_ij / Σ_{i≠j} E_ij`
//! with `O` the confusion counts and `E_ij = O_i· · O_·j / N`; it is undefined (`None`; scikit-learn returns
//! NaN) when no disagreement is expected, i.e. both raters use one and the same single label.

use std::collections::BTreeMap;

/// Cohen's κ between two raters' labels of the same items; `None` when undefined (no items, or zero expected
/// disagreement). Panics if the lengths differ (a programming error, not user data).
pub fn cohen_kappa<T: Ord>(a: &[T], b: &[T]) -> Option<f64> {
    KappaCounts::of(a, b).value()
}

/// The counts κ is made of, so that κ values can be compared exactly (mathematically equal κs computed from
/// different counts may differ in the last bits as floats, which must not decide a best match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KappaCounts {
    /// Items.
    n: u64,
    /// Items the raters label differently.
    observed: u64,
    /// `N · (expected disagreements) = N² − Σ_c row_c·col_c`.
    expected_times_n: u64,
}

impl KappaCounts {
    fn of<T: Ord>(a: &[T], b: &[T]) -> KappaCounts {
        assert_eq!(a.len(), b.len(), "both raters label the same items");
        let mut rows: BTreeMap<&T, u64> = BTreeMap::new();
        let mut cols: BTreeMap<&T, u64> = BTreeMap::new();
        let mut observed = 0u64;
        for (x, y) in a.iter().zip(b) {
            *rows.entry(x).or_default() += 1;
            *cols.entry(y).or_default() += 1;
            observed += u64::from(x != y);
        }
        let n = a.len() as u64;
        // Σ_{i≠j} row_i·col_j = N² − Σ_i row_i·col_i.
        let same: u64 = rows.iter().map(|(label, r)| r * cols.get(label).copied().unwrap_or(0)).sum();
        KappaCounts { n, observed, expected_times_n: n * n - same }
    }

    fn defined(&self) -> bool {
        self.n > 0 && self.expected_times_n > 0
    }

    /// `κ = 1 − observed / expected`, scikit-learn's arithmetic.
    fn value(&self) -> Option<f64> {
        self.defined().then(|| 1.0 - self.observed as f64 / (self.expected_times_n as f64 / self.n as f64))
    }

    /// Exact comparison of two defined κs: κ grows as `observed · n / expected_times_n` shrinks.
    fn cmp_exact(&self, other: &KappaCounts) -> std::cmp::Ordering {
        let lhs = other.observed as u128 * other.n as u128 * self.expected_times_n as u128;
        let rhs = self.observed as u128 * self.n as u128 * other.expected_times_n as u128;
        lhs.cmp(&rhs)
    }
}

/// The one-hot pair encoding of an order of `n` items: for each item pair `i < j` (in item-index order), the two
/// entries `[i before j]`, `[j before i]`. Length `n(n−1)`.
pub fn pair_encoding(order: &[usize]) -> Vec<u8> {
    let n = order.len();
    let mut pos = vec![0usize; n];
    for (k, &item) in order.iter().enumerate() {
        pos[item] = k;
    }
    let mut v = Vec::with_capacity(n * n.saturating_sub(1));
    for i in 0..n {
        for j in i + 1..n {
            let before = pos[i] < pos[j];
            v.push(u8::from(before));
            v.push(u8::from(!before));
        }
    }
    v
}

/// κ between two orders of the same items via their pair encodings (`None` for fewer than two items).
/// Both must be permutations of `0..n`.
pub fn order_kappa(a: &[usize], b: &[usize]) -> Option<f64> {
    cohen_kappa(&pair_encoding(a), &pair_encoding(b))
}

/// Mean pairwise [`order_kappa`] over all pairs of `orders` (one per annotator); `None` with fewer than two
/// orders or fewer than two items.
pub fn instance_order_kappa(orders: &[&[usize]]) -> Option<f64> {
    mean_defined(pairs(orders.len()).map(|(u, v)| order_kappa(orders[u], orders[v])))
}

/// κ between alternative orders `a` and `b` over the positions where either differs from `gold`; `None` when
/// both equal the gold order (no such position) or κ is undefined.
pub fn alternative_kappa(gold: &[usize], a: &[usize], b: &[usize]) -> Option<f64> {
    alternative_counts(gold, a, b).value()
}

fn alternative_counts(gold: &[usize], a: &[usize], b: &[usize]) -> KappaCounts {
    let positions: Vec<usize> = (0..gold.len()).filter(|&k| a[k] != gold[k] || b[k] != gold[k]).collect();
    let la: Vec<usize> = positions.iter().map(|&k| a[k]).collect();
    let lb: Vec<usize> = positions.iter().map(|&k| b[k]).collect();
    KappaCounts::of(&la, &lb)
}

/// One matched pair of alternatives: indices into A's and B's lists and their κ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchedPair {
    pub a: usize,
    pub b: usize,
    pub kappa: f64,
}

/// Best-match pairing of two annotators' alternatives (greedy on κ, see the module docs). Pairs with an
/// undefined κ are never matched.
pub fn best_match_pairs(gold: &[usize], alts_a: &[Vec<usize>], alts_b: &[Vec<usize>]) -> Vec<MatchedPair> {
    let mut candidates: Vec<(KappaCounts, MatchedPair)> = Vec::new();
    for (i, a) in alts_a.iter().enumerate() {
        for (j, b) in alts_b.iter().enumerate() {
            let counts = alternative_counts(gold, a, b);
            if let Some(kappa) = counts.value() {
                candidates.push((counts, MatchedPair { a: i, b: j, kappa }));
            }
        }
    }
    // Highest κ first, compared exactly; ties by index.
    candidates.sort_by(|(kx, x), (ky, y)| ky.cmp_exact(kx).then(x.a.cmp(&y.a)).then(x.b.cmp(&y.b)));
    let mut used_a = vec![false; alts_a.len()];
    let mut used_b = vec![false; alts_b.len()];
    let mut out = Vec::new();
    for (_, c) in candidates {
        if !used_a[c.a] && !used_b[c.b] {
            used_a[c.a] = true;
            used_b[c.b] = true;
            out.push(c);
        }
    }
    out
}

/// Alternative-order agreement of one instance: for every pair of annotators who both gave alternatives, the
/// mean κ of their best-matched alternatives; then the mean over annotator pairs. `None` when no annotator pair
/// has a matched pair.
pub fn instance_alternative_kappa(gold: &[usize], alternatives: &[&[Vec<usize>]]) -> Option<f64> {
    mean_defined(pairs(alternatives.len()).map(|(u, v)| {
        let matched = best_match_pairs(gold, alternatives[u], alternatives[v]);
        mean_defined(matched.iter().map(|m| Some(m.kappa)))
    }))
}

fn pairs(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |u| (u + 1..n).map(move |v| (u, v)))
}

fn mean_defined(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let (sum, count) = values.flatten().fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    (count > 0).then(|| sum / count as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequence_metrics::score_order;

    /// Hand-computed: a = [1,1,0,0], b = [1,0,0,0]: O = [[2,0],[1,1]] (rows a=0,1... ), p_o = 3/4,
    /// marginals a: 0→2, 1→2; b: 0→3, 1→1; p_e = (2·3 + 2·1)/16 = 1/2; κ = (3/4 − 1/2)/(1/2) = 1/2.
    #[test]
    fn kappa_hand_computed() {
        let k = cohen_kappa(&[1, 1, 0, 0], &[1, 0, 0, 0]).unwrap();
        assert!((k - 0.5).abs() < 1e-15);
        // Three classes: a = [0,1,2,0,1,2], b = [0,1,2,1,2,0]: p_o = 1/2, p_e = 3·(2/6·2/6) = 1/3,
        // κ = (1/2 − 1/3)/(2/3) = 1/4.
        let k = cohen_kappa(&[0, 1, 2, 0, 1, 2], &[0, 1, 2, 1, 2, 0]).unwrap();
        assert!((k - 0.25).abs() < 1e-15);
        assert_eq!(cohen_kappa(&[3, 3], &[3, 3]), None);
        assert_eq!(cohen_kappa::<u8>(&[], &[]), None);
        // Perfect disagreement on a balanced binary labelling: κ = −1.
        assert!((cohen_kappa(&[0, 1, 0, 1], &[1, 0, 1, 0]).unwrap() + 1.0).abs() < 1e-15);
    }

    #[test]
    fn pair_encoding_is_one_hot_per_pair() {
        let v = pair_encoding(&[2, 0, 1]);
        // pairs (0,1): 0 before 1 → [1,0]; (0,2): 2 first → [0,1]; (1,2): 2 first → [0,1].
        assert_eq!(v, vec![1, 0, 0, 1, 0, 1]);
    }

    #[test]
    fn order_kappa_equals_kendall_tau() {
        let a = [3, 1, 4, 0, 2];
        for b in [[3, 1, 4, 0, 2], [2, 0, 4, 1, 3], [0, 1, 2, 3, 4], [1, 4, 0, 2, 3]] {
            let k = order_kappa(&a, &b).unwrap();
            let tau = score_order(&b, &a).unwrap().kendall_tau();
            assert!((k - tau).abs() < 1e-12, "{b:?}: κ {k} τ {tau}");
        }
        assert_eq!(order_kappa(&[0], &[0]), None);
    }

    #[test]
    fn instance_kappa_averages_annotator_pairs() {
        let x: &[usize] = &[0, 1, 2];
        let y: &[usize] = &[1, 0, 2];
        let z: &[usize] = &[2, 1, 0];
        let want = (order_kappa(x, y).unwrap() + order_kappa(x, z).unwrap() + order_kappa(y, z).unwrap()) / 3.0;
        assert!((instance_order_kappa(&[x, y, z]).unwrap() - want).abs() < 1e-15);
        assert_eq!(instance_order_kappa(&[x]), None);
    }

    /// Gold [0,1,2,3]; a = [1,0,2,3] (swap first two), b = [1,0,3,2] (both swaps). K = {0,1,2,3};
    /// a[K] = [1,0,2,3], b[K] = [1,0,3,2]: p_o = 1/2, each label once per rater → p_e = 4·(1/4·1/4) = 1/4,
    /// κ = (1/2 − 1/4)/(3/4) = 1/3.
    #[test]
    fn alternative_kappa_hand_computed() {
        let gold = [0, 1, 2, 3];
        let k = alternative_kappa(&gold, &[1, 0, 2, 3], &[1, 0, 3, 2]).unwrap();
        assert!((k - 1.0 / 3.0).abs() < 1e-15);
        // Same alternative → K = {0,1}, identical labels → κ = 1.
        assert!((alternative_kappa(&gold, &[1, 0, 2, 3], &[1, 0, 2, 3]).unwrap() - 1.0).abs() < 1e-15);
        // Both equal to gold → undefined.
        assert_eq!(alternative_kappa(&gold, &gold, &gold), None);
    }

    #[test]
    fn best_match_pairs_greedily() {
        let gold = vec![0, 1, 2, 3];
        let a = vec![vec![1, 0, 2, 3], vec![0, 1, 3, 2]];
        let b = vec![vec![0, 1, 3, 2], vec![1, 0, 2, 3]];
        let m = best_match_pairs(&gold, &a, &b);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].a, m[0].b), (0, 1));
        assert_eq!((m[1].a, m[1].b), (1, 0));
        assert!(m.iter().all(|p| (p.kappa - 1.0).abs() < 1e-15));
        let inst = instance_alternative_kappa(&gold, &[&a, &b]).unwrap();
        assert!((inst - 1.0).abs() < 1e-15);
        // An annotator without alternatives contributes no pair.
        assert_eq!(instance_alternative_kappa(&gold, &[&a, &[]]), None);
    }
}
