//! How much order evidence a modality's features carry for one instance, without training: the *path support*
//! of the authored order.
//!
//! Steps change the scene (or the text's topic) a little at a time, so in a modality that carries order
//! evidence the authored sequence is a smooth path: consecutive items are similar. The path score of an order
//! is the mean cosine similarity of consecutive items; the support of the authored order is the share of all
//! n! orders whose path score is strictly lower (ties count one half) — 1 when the authored order is the
//! smoothest path, about 0.5 when the features do not prefer it over a random order. A path and its reverse
//! have the same score, so support measures adjacency evidence, not direction; its maximum is 1 − 1/n!.
//! For n ≤ 8 all orders are enumerated; above, 20,000 seeded random orders estimate the share.

use rand::Rng;
use stepwise_core::rng::rng_for;

use crate::item_features::{ItemMatrix, cosine};

/// Mean cosine similarity of consecutive items of `order` under the similarity matrix `sim`.
fn path_score(sim: &[Vec<f32>], order: &[usize]) -> f64 {
    if order.len() < 2 {
        return 0.0;
    }
    order.windows(2).map(|w| sim[w[0]][w[1]] as f64).sum::<f64>() / (order.len() - 1) as f64
}

/// The support of `order` (see module docs); `key` seeds the sampling for long instances.
pub fn path_support(x: &ItemMatrix, order: &[usize], seed: u64, key: &str) -> f64 {
    let n = x.len();
    if n < 2 {
        return 0.5;
    }
    let sim: Vec<Vec<f32>> = (0..n).map(|i| (0..n).map(|j| cosine(x.row(i), x.row(j))).collect()).collect();
    let target = path_score(&sim, order);
    let (mut below, mut ties, mut total) = (0u64, 0u64, 0u64);
    let mut tally = |p: &[usize]| {
        let s = path_score(&sim, p);
        // Float sums of the same terms in another order may differ in the last bits: compare with a tolerance.
        if (s - target).abs() <= 1e-9 {
            ties += 1;
        } else if s < target {
            below += 1;
        }
        total += 1;
    };
    if n <= 8 {
        stepwise_core::sequencing::for_each_permutation(n, &mut tally);
    } else {
        let mut rng = rng_for(seed, &format!("order-evidence/{key}"));
        let mut perm: Vec<usize> = (0..n).collect();
        for _ in 0..20_000 {
            for j in (1..n).rev() {
                let r = rng.random_range(0..=j);
                perm.swap(j, r);
            }
            tally(&perm);
        }
    }
    (below as f64 + 0.5 * ties as f64) / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smooth_path_has_high_support_and_noise_about_half() {
        // Items on a line in authored order 0..5: the authored path is (one of) the smoothest.
        let n = 5;
        let data: Vec<f32> = (0..n)
            .flat_map(|i| {
                let a = i as f32 * 0.4;
                [a.cos(), a.sin()]
            })
            .collect();
        let x = ItemMatrix { dim: 2, data };
        let authored: Vec<usize> = (0..n).collect();
        let s = path_support(&x, &authored, 0, "k");
        assert!(s > 0.98, "{s}");
        // Identical items: every order ties → exactly 0.5.
        let flat = ItemMatrix { dim: 2, data: vec![1.0; 2 * n] };
        assert_eq!(path_support(&flat, &authored, 0, "k"), 0.5);
    }

    #[test]
    fn long_instances_are_sampled_deterministically() {
        let n = 10;
        let data: Vec<f32> = (0..n).flat_map(|i| [(i as f32 * 0.3).cos(), (i as f32 * 0.3).sin()]).collect();
        let x = ItemMatrix { dim: 2, data };
        let order: Vec<usize> = (0..n).collect();
        let a = path_support(&x, &order, 1, "long");
        assert_eq!(a, path_support(&x, &order, 1, "long"));
        assert!(a > 0.95, "{a}");
    }
}
