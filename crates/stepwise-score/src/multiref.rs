//! Scoring a prediction against several valid reference orders.
//!
//! Rule (the multimodal sequencing paper, Wu et al. ACL 2022; released code `trainers/metrics.py`,
//! `multiref_metrics` with `multiref_metrics == "max"`): score the prediction against every reference, pick the
//! ONE reference whose scores are lexicographically largest in the order
//! (position accuracy, PMR, L_r, L_q, τ), and report every metric — including distance — against that reference.
//! Metrics are never mixed across references.
//!
//! Ties on those five keys: the released code sorts whole tuples `(partial_match, exact_match, lcs_substr, lcs,
//! tau, ms, wms, distance_based)` in descending order, so it continues with the larger minimum-swap count, the
//! larger weighted swap count and the larger distance; we do the same so our numbers match the released code.
//! When all eight are equal the first such reference wins (Python's sort is stable), which cannot change any
//! reported metric. All comparisons use exact integer counts (equal counts give equal floats in the released
//! code, so this is the same order).

use std::cmp::Ordering;

use crate::sequence_metrics::{OrderError, OrderScore, Scratch, check_permutation, score_order_unchecked};

/// The prediction's scores against its best reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BestReference {
    /// Index into the references (0 = the authored order).
    pub index: usize,
    pub score: OrderScore,
}

/// Compare two scores of the same prediction (same `n`) by the released code's descending sort key.
pub fn compare_for_selection(a: &OrderScore, b: &OrderScore) -> Ordering {
    a.correct
        .cmp(&b.correct)
        .then(a.exact().cmp(&b.exact()))
        .then(a.lcsubstr.cmp(&b.lcsubstr))
        .then(a.lcs.cmp(&b.lcs))
        // Higher τ is fewer discordant pairs.
        .then(b.discordant.cmp(&a.discordant))
        .then(a.min_swaps.cmp(&b.min_swaps))
        .then(a.weighted_swaps.cmp(&b.weighted_swaps))
        .then(a.distance.cmp(&b.distance))
}

/// The best of `references` for `pred` (all permutations of `0..n`, not checked); `None` if there are none.
pub fn best_reference_unchecked<'a>(
    pred: &[usize],
    references: impl IntoIterator<Item = &'a [usize]>,
    scratch: &mut Scratch,
) -> Option<BestReference> {
    let mut best: Option<BestReference> = None;
    for (index, reference) in references.into_iter().enumerate() {
        let score = score_order_unchecked(pred, reference, scratch);
        let better = match &best {
            None => true,
            Some(b) => compare_for_selection(&score, &b.score) == Ordering::Greater,
        };
        if better {
            best = Some(BestReference { index, score });
        }
    }
    best
}

/// Checked version of [`best_reference_unchecked`]: every reference and the prediction must be permutations of
/// the same `0..n`.
pub fn best_reference(pred: &[usize], references: &[Vec<usize>]) -> Result<Option<BestReference>, OrderError> {
    let Some(first) = references.first() else {
        return Ok(None);
    };
    let n = first.len();
    for r in references {
        check_permutation(r, n)?;
    }
    check_permutation(pred, n)?;
    Ok(best_reference_unchecked(pred, references.iter().map(Vec::as_slice), &mut Scratch::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_reference_is_plain_scoring() {
        let b = best_reference(&[1, 0, 2], &[vec![0, 1, 2]]).unwrap().unwrap();
        assert_eq!(b.index, 0);
        assert_eq!(b.score, crate::sequence_metrics::score_order(&[1, 0, 2], &[0, 1, 2]).unwrap());
    }

    #[test]
    fn an_exact_alternative_wins() {
        let refs = vec![vec![0, 1, 2, 3], vec![1, 0, 2, 3]];
        let b = best_reference(&[1, 0, 2, 3], &refs).unwrap().unwrap();
        assert_eq!(b.index, 1);
        assert!(b.score.exact());
        assert_eq!(b.score.distance, 0);
    }

    /// Position accuracy dominates τ: a reference with more fixed points wins even if τ is worse against it.
    #[test]
    fn keys_are_lexicographic() {
        // pred [0,1,2,3,4]; ref A [4,1,2,3,0]: 3 correct, τ = 1 − 2·7/10 = −0.4;
        // ref B [1,0,3,2,4]: 1 correct, τ = 1 − 2·2/10 = 0.6.
        let pred = [0, 1, 2, 3, 4];
        let a = vec![4, 1, 2, 3, 0];
        let b = vec![1, 0, 3, 2, 4];
        let best = best_reference(&pred, &[b.clone(), a.clone()]).unwrap().unwrap();
        assert_eq!(best.index, 1, "3 correct positions beat 1");
        assert!(best.score.kendall_tau() < crate::sequence_metrics::score_order(&pred, &b).unwrap().kendall_tau());
    }

    /// Equal on all five keys: the released code prefers the larger swap counts, then the larger distance.
    #[test]
    fn ties_follow_the_released_code() {
        use crate::sequence_metrics::score_order;
        let pred: Vec<usize> = vec![2, 0, 4, 1, 3];
        let five = |s: &OrderScore| (s.correct, s.exact(), s.lcsubstr, s.lcs, s.discordant);
        let mut groups: std::collections::BTreeMap<_, Vec<Vec<usize>>> = Default::default();
        for r in stepwise_core::sequencing::all_permutations(5) {
            let s = score_order(&pred, &r).unwrap();
            groups.entry(five(&s)).or_default().push(r);
        }
        // A group of references tied on the five keys whose scores still differ (swap counts or distance).
        let group = groups
            .into_values()
            .find(|g| {
                let scores: Vec<_> = g.iter().map(|r| score_order(&pred, r).unwrap()).collect();
                scores.windows(2).any(|w| compare_for_selection(&w[0], &w[1]) != Ordering::Equal)
            })
            .expect("permutations of 5 have five-key ties with different swap counts");
        let best = best_reference(&pred, &group).unwrap().unwrap();
        for (i, r) in group.iter().enumerate() {
            let c = compare_for_selection(&score_order(&pred, r).unwrap(), &best.score);
            assert_ne!(c, Ordering::Greater, "reference {i} beats the chosen one");
            if c == Ordering::Equal {
                assert!(i >= best.index, "first among equals");
            }
        }
    }

    #[test]
    fn invalid_reference_is_rejected() {
        assert!(best_reference(&[0, 1], &[vec![0, 1], vec![1, 1]]).is_err());
        assert_eq!(best_reference(&[0, 1], &[]).unwrap(), None);
    }
}
