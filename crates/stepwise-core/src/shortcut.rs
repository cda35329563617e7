//! What the shortcut probes read of one question: per choice, a value measured without understanding (its
//! distance to the question, or to the other choices) turned into the probe's feature row. The audit's probes
//! (`stepwise_eval::audit::probe`) fit on these rows, and the calibrated knobs balance the same rows between
//! answers and negatives, so both sides see one definition.

/// How spread out one question's `values` are and how far they lie: their standard deviation and mean (0 and 0
/// for none). What z standardises by, and the axes of the audit's "rank given spread and level", which the
/// calibrated knobs balance on the same definition.
pub fn spread_and_level(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
    (sd, mean)
}

/// The per-choice feature rows of one question's `values`: [x, z, z²] with z = x standardised within the
/// question, so that a linear model can learn "smallest", "largest" or "at a typical value".
pub fn choice_features(values: &[f64]) -> Vec<Vec<f64>> {
    let (sd, mean) = spread_and_level(values);
    values
        .iter()
        .map(|&d| {
            let z = if sd > 1e-12 { (d - mean) / sd } else { 0.0 };
            vec![d, z, z * z]
        })
        .collect()
}

/// The rank of each value in ascending order, 0-based (ties: the lower index ranks first).
pub fn ranks(values: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
    let mut rank = vec![0; values.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    rank
}

/// [`choice_features`] followed by the one-hot of the choice's rank ([`ranks`]) over `width` columns (ranks at or
/// beyond `width` set none): lets a probe learn "the k-th nearest" as well as distances.
pub fn choice_features_with_ranks(values: &[f64], width: usize) -> Vec<Vec<f64>> {
    let rank = ranks(values);
    choice_features(values)
        .into_iter()
        .zip(rank)
        .map(|(mut row, r)| {
            row.extend((0..width).map(|k| f64::from(u8::from(k == r))));
            row
        })
        .collect()
}

/// The z-scores a linear probe on [x, z, z²] can aim at: its score a·z + c·z² (c < 0) picks the choice whose z is
/// nearest −a / 2c, so "the choice nearest a typical z" is a shortcut of its own, however the means of z and z²
/// compare between answers and negatives.
pub const AIMS: [f64; 7] = [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5];

/// How the answer differs from the other choices in what a shortcut probe on `values` reads: its feature row
/// ([`choice_features_with_ranks`] over all positions) minus the mean of the other choices' rows, then for each
/// aim of [`AIMS`] whether the answer is the choice whose z is nearest it, less chance. A probe (or rule) on these
/// features is at chance when this lead averages to zero over the questions; calibrated knobs aim for that.
///
/// Tied values (frequent in discrete values such as Kendall distances) take their ranks, and the nearest-aim
/// event, in expectation over a random order of the tied choices: a task set shuffles its choices, so which of
/// them ranks first is a coin flip for the audit, not the answer's privilege.
pub fn answer_lead(values: &[f64], answer: usize) -> Vec<f64> {
    let n = values.len();
    let mut rows: Vec<Vec<f64>> = choice_features(values);
    for (row, &v) in rows.iter_mut().zip(values) {
        let below = values.iter().filter(|&&w| w < v).count();
        let tied = values.iter().filter(|&&w| w == v).count();
        row.extend((0..n).map(|k| if (below..below + tied).contains(&k) { 1.0 / tied as f64 } else { 0.0 }));
    }
    let others = (n - 1).max(1) as f64;
    let mut lead = rows[answer].clone();
    for row in rows.iter().enumerate().filter(|(c, _)| *c != answer).map(|(_, row)| row) {
        for (l, x) in lead.iter_mut().zip(row) {
            *l -= x / others;
        }
    }
    let chance = 1.0 / n.max(1) as f64;
    for aim in AIMS {
        let off: Vec<f64> = rows.iter().map(|r| (r[1] - aim).abs()).collect();
        let nearest = off.iter().copied().fold(f64::INFINITY, f64::min);
        let tied = off.iter().filter(|&&o| o == nearest).count().max(1);
        lead.push(if off[answer] == nearest { 1.0 / tied as f64 } else { 0.0 } - chance);
    }
    lead
}

/// Share of the pairs of items of `a` (also in `b`) that `b` orders the other way round (0: same order, 1:
/// reversed; 0 when no pair is shared).
pub fn kendall_distance<T: PartialEq>(a: &[T], b: &[T]) -> f64 {
    let pos: Vec<Option<usize>> = a.iter().map(|x| b.iter().position(|y| y == x)).collect();
    let (mut pairs, mut discordant) = (0usize, 0usize);
    for i in 0..pos.len() {
        for j in i + 1..pos.len() {
            if let (Some(p), Some(q)) = (pos[i], pos[j]) {
                pairs += 1;
                discordant += usize::from(p > q);
            }
        }
    }
    if pairs == 0 { 0.0 } else { discordant as f64 / pairs as f64 }
}

/// Each order's mean [`kendall_distance`] to the other orders: what a choice-only probe reads of an ordering
/// question (the order the others are perturbations of sits nearest them).
pub fn order_centrality<T: PartialEq, O: AsRef<[T]>>(orders: &[O]) -> Vec<f64> {
    let n = orders.len();
    (0..n)
        .map(|i| {
            let sum: f64 =
                (0..n).filter(|&j| j != i).map(|j| kendall_distance(orders[i].as_ref(), orders[j].as_ref())).sum();
            if n > 1 { sum / (n - 1) as f64 } else { 0.0 }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_break_ties_by_position_and_features_standardise_within_the_question() {
        assert_eq!(ranks(&[0.3, 0.1, 0.3, 0.2]), vec![2, 0, 3, 1]);
        let rows = choice_features_with_ranks(&[1.0, 3.0], 3);
        assert_eq!(rows, vec![vec![1.0, -1.0, 1.0, 1.0, 0.0, 0.0], vec![3.0, 1.0, 1.0, 0.0, 1.0, 0.0]]);
        // Equal values: z is 0, ranks by position.
        assert_eq!(choice_features(&[2.0, 2.0]), vec![vec![2.0, 0.0, 0.0], vec![2.0, 0.0, 0.0]]);
    }

    #[test]
    fn kendall_distances_and_centrality_of_orders() {
        assert_eq!(kendall_distance(&[0, 1, 2, 3], &[0, 1, 2, 3]), 0.0);
        assert_eq!(kendall_distance(&[0, 1, 2, 3], &[3, 2, 1, 0]), 1.0);
        assert!((kendall_distance(&[0, 1, 2, 3], &[1, 0, 2, 3]) - 1.0 / 6.0).abs() < 1e-12);
        // Items missing from one order are left out of the pairs.
        assert_eq!(kendall_distance(&["a", "b", "c"], &["c", "a"]), 1.0);
        let c = order_centrality(&[vec![0, 1, 2], vec![1, 0, 2], vec![0, 2, 1]]);
        assert_eq!(c, vec![1.0 / 3.0, 0.5, 0.5]);
    }

    #[test]
    fn the_answer_lead_is_its_row_minus_the_mean_of_the_others() {
        let values = [0.2, 0.5, 0.8, 0.5];
        let rows = choice_features_with_ranks(&values, 4);
        let lead = answer_lead(&values, 0);
        // z of the answer is −1.41: nearest the aims −1.5 and −1.0 only.
        assert_eq!(lead[7..], [0.75, 0.75, -0.25, -0.25, -0.25, -0.25, -0.25]);
        for (k, l) in lead[..7].iter().enumerate() {
            let brute = rows[0][k] - (rows[1][k] + rows[2][k] + rows[3][k]) / 3.0;
            assert!((l - brute).abs() < 1e-12, "{k}: {l} vs {brute}");
        }
        // An answer whose values are exchangeable with the negatives' leads by zero on average.
        let mut sum = vec![0.0; lead.len()];
        for a in 0..4 {
            for (s, l) in sum.iter_mut().zip(answer_lead(&[0.1, 0.4, 0.6, 0.9], a)) {
                *s += l;
            }
        }
        assert!(sum.iter().all(|s| s.abs() < 1e-12), "{sum:?}");
        // An answer tied with a negative holds each of their two ranks half the time, and is nearest an aim
        // half the time it and the negative are.
        let values = [0.5, 0.2, 0.5, 0.8];
        let lead = answer_lead(&values, 0);
        assert_eq!(lead[3..7], [-1.0 / 3.0, 0.5 - 1.0 / 6.0, 0.5 - 1.0 / 6.0, -1.0 / 3.0]);
        // The tied pair (choices 0 and 2) shares one z: every aim it is nearer than choices 1 and 3 counts half.
        let z: Vec<f64> = choice_features(&values).iter().map(|r| r[1]).collect();
        for (k, aim) in AIMS.iter().enumerate() {
            let nearest_is_pair = [1, 3].iter().all(|&c| (z[c] - aim).abs() > (z[0] - aim).abs());
            let want = if nearest_is_pair { 0.5 } else { 0.0 } - 0.25;
            assert!((lead[7 + k] - want).abs() < 1e-12, "aim {aim}: {} vs {want}", lead[7 + k]);
        }
    }
}
