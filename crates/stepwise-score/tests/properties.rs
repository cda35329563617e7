//! Property tests of the sequencing metrics, multi-reference selection and agreement, against brute-force
//! definitions written independently of the library's kernels.

use proptest::prelude::*;
use stepwise_score::agreement::{cohen_kappa, order_kappa, pair_encoding};
use stepwise_score::multiref::{best_reference, compare_for_selection};
use stepwise_score::sequence_metrics::{Metric, OrderScore, Totals, score_order};

/// A permutation of `0..n` for `n` in `lo..=hi`.
fn permutation(lo: usize, hi: usize) -> impl Strategy<Value = Vec<usize>> {
    (lo..=hi).prop_flat_map(|n| Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
}

/// Two permutations of the same `0..n`.
fn pair(lo: usize, hi: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (lo..=hi).prop_flat_map(|n| {
        let base: Vec<usize> = (0..n).collect();
        (Just(base.clone()).prop_shuffle(), Just(base).prop_shuffle())
    })
}

fn pos(order: &[usize]) -> Vec<usize> {
    let mut p = vec![0; order.len()];
    for (k, &x) in order.iter().enumerate() {
        p[x] = k;
    }
    p
}

/// Longest common subsequence by the textbook table.
fn lcs_table(a: &[usize], b: &[usize]) -> u32 {
    let mut t = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i][j] = if a[i - 1] == b[j - 1] { t[i - 1][j - 1] + 1 } else { t[i - 1][j].max(t[i][j - 1]) };
        }
    }
    t[a.len()][b.len()]
}

/// Longest common substring by trying every start pair.
fn lcsubstr_brute(a: &[usize], b: &[usize]) -> u32 {
    let mut best = 0;
    for i in 0..a.len() {
        for j in 0..b.len() {
            let mut k = 0;
            while i + k < a.len() && j + k < b.len() && a[i + k] == b[j + k] {
                k += 1;
            }
            best = best.max(k as u32);
        }
    }
    best
}

fn discordant_brute(p: &[usize], g: &[usize]) -> u64 {
    let (pp, pg) = (pos(p), pos(g));
    let n = p.len();
    let mut d = 0;
    for x in 0..n {
        for y in x + 1..n {
            if (pp[x] < pp[y]) != (pg[x] < pg[y]) {
                d += 1;
            }
        }
    }
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn perfect_prediction(g in permutation(1, 12)) {
        let s = score_order(&g, &g).unwrap();
        let n = g.len() as u32;
        prop_assert!(s.exact());
        prop_assert_eq!(Metric::Pmr.value(&s), 1.0);
        prop_assert_eq!(s.kendall_tau(), 1.0);
        prop_assert_eq!(s.distance, 0);
        prop_assert_eq!(s.position_accuracy(), 1.0);
        prop_assert_eq!((s.lcs, s.lcsubstr), (n, n));
    }

    #[test]
    fn reversed_prediction(g in permutation(2, 12)) {
        let rev: Vec<usize> = g.iter().rev().copied().collect();
        let s = score_order(&rev, &g).unwrap();
        let n = g.len() as u64;
        prop_assert_eq!(s.kendall_tau(), -1.0);
        prop_assert_eq!((s.lcs, s.lcsubstr), (1, 1));
        prop_assert_eq!(s.correct as u64, n % 2);
        // Σ |k − (n−1−k)| = floor(n²/2).
        prop_assert_eq!(s.distance, n * n / 2);
        prop_assert_eq!(Metric::Pmr.value(&s), 0.0);
    }

    #[test]
    fn kernel_matches_brute_force((p, g) in pair(1, 14)) {
        let s = score_order(&p, &g).unwrap();
        let (pp, pg) = (pos(&p), pos(&g));
        let n = p.len();
        prop_assert_eq!(s.correct as usize, (0..n).filter(|&k| p[k] == g[k]).count());
        prop_assert_eq!(s.distance, (0..n).map(|x| pp[x].abs_diff(pg[x]) as u64).sum::<u64>());
        prop_assert_eq!(s.lcs, lcs_table(&p, &g));
        prop_assert_eq!(s.lcsubstr, lcsubstr_brute(&p, &g));
        prop_assert_eq!(s.discordant, discordant_brute(&p, &g));
        for (w, window) in [1usize, 2, 3].into_iter().enumerate() {
            prop_assert_eq!(s.within[w] as usize, (0..n).filter(|&x| pp[x].abs_diff(pg[x]) <= window).count());
        }
    }

    #[test]
    fn bounds_and_symmetry((p, g) in pair(1, 12)) {
        let s = score_order(&p, &g).unwrap();
        let t = score_order(&g, &p).unwrap();
        let n = p.len() as u32;
        prop_assert!(s.lcsubstr <= s.lcs && s.lcs <= n && s.lcsubstr >= 1);
        prop_assert!((-1.0..=1.0).contains(&s.kendall_tau()));
        prop_assert_eq!(s.distance % 2, 0, "displacements of a permutation sum to an even number");
        prop_assert!(s.distance <= (n as u64 * n as u64) / 2);
        prop_assert_eq!((s.correct, s.distance, s.lcs, s.lcsubstr, s.discordant), (t.correct, t.distance, t.lcs, t.lcsubstr, t.discordant));
        prop_assert_eq!(s.exact(), p == g);
    }

    /// Renaming items the same way in both orders changes nothing.
    #[test]
    fn relabelling_invariance((p, g) in pair(1, 10), seed in any::<u64>()) {
        let n = p.len();
        let mut names: Vec<usize> = (0..n).collect();
        // A deterministic shuffle of the names from `seed`.
        let mut x = seed | 1;
        for i in (1..n).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            names.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let rp: Vec<usize> = p.iter().map(|&i| names[i]).collect();
        let rg: Vec<usize> = g.iter().map(|&i| names[i]).collect();
        prop_assert_eq!(score_order(&p, &g).unwrap(), score_order(&rp, &rg).unwrap());
    }

    /// The chosen reference is at least as good as every reference on the selection key, and with one
    /// reference it is plain scoring.
    #[test]
    fn best_reference_is_maximal(refs in (2usize..8).prop_flat_map(|n| {
        let base: Vec<usize> = (0..n).collect();
        (proptest::collection::vec(Just(base.clone()).prop_shuffle(), 1..5), Just(base).prop_shuffle())
    })) {
        let (references, pred) = refs;
        let best = best_reference(&pred, &references).unwrap().unwrap();
        for r in &references {
            let s = score_order(&pred, r).unwrap();
            prop_assert_ne!(compare_for_selection(&s, &best.score), std::cmp::Ordering::Greater);
            // The first key dominates: no reference has more correct positions.
            prop_assert!(s.correct <= best.score.correct);
        }
        prop_assert_eq!(best.score, score_order(&pred, &references[best.index]).unwrap());
        let single = best_reference(&pred, &references[..1]).unwrap().unwrap();
        prop_assert_eq!(single.score, score_order(&pred, &references[0]).unwrap());
    }

    /// κ of the pair one-hot encoding equals Kendall's τ, and κ is symmetric.
    #[test]
    fn order_kappa_is_tau((a, b) in pair(2, 10)) {
        let k = order_kappa(&a, &b).unwrap();
        let tau = score_order(&b, &a).unwrap().kendall_tau();
        prop_assert!((k - tau).abs() < 1e-12);
        prop_assert_eq!(pair_encoding(&a).len(), a.len() * (a.len() - 1));
        let (ea, eb) = (pair_encoding(&a), pair_encoding(&b));
        prop_assert_eq!(cohen_kappa(&ea, &eb), cohen_kappa(&eb, &ea));
    }

    /// Averages over sequences equal the mean of per-sequence values.
    #[test]
    fn totals_are_means(cases in proptest::collection::vec(pair(1, 8), 1..20)) {
        let scores: Vec<OrderScore> = cases.iter().map(|(p, g)| score_order(p, g).unwrap()).collect();
        let t = Totals::of(&scores);
        for m in Metric::ALL {
            let direct = scores.iter().map(|s| m.value(s)).sum::<f64>() / scores.len() as f64;
            prop_assert!((t.mean(m) - direct).abs() < 1e-12);
        }
    }
}
