//! Exact k-NN equals brute force: all metrics, filters, k larger than the base, ties, many tile shapes, and
//! identical results for any thread count; with bfloat16 screening, identical bit for bit to the f32 search.

use proptest::prelude::*;
use stepwise_features::knn::{
    Filter, KnnOptions, Metric, Neighbor, Screening, TileConfig, distance, knn, knn_brute_force, knn_keys, knn_with,
};

const METRICS: [Metric; 3] = [Metric::Cosine, Metric::InnerProduct, Metric::L2];

/// Small integers: every dot product and squared distance is exact in f32 whatever the summation order, so the
/// fast search must agree with brute force exactly, including the index order of tied distances.
fn int_matrix(rows: usize, dim: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec((-3i8..=3).prop_map(f32::from), rows * dim)
}

fn tiles() -> impl Strategy<Value = TileConfig> {
    (1usize..40, 1usize..3000, any::<bool>()).prop_map(|(base_tile, budget, screen)| TileConfig {
        base_tile,
        tile_budget_bytes: budget,
        screening: if screen { Screening::On } else { Screening::Off },
    })
}

fn indices(r: &[Neighbor]) -> Vec<usize> {
    r.iter().map(|n| n.index).collect()
}

/// Same neighbours, up to the order of near-ties (cosine distances are rounded differently by the two methods).
fn assert_equivalent(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    metric: Metric,
    fast: &[Vec<Neighbor>],
    slow: &[Vec<Neighbor>],
    eps: f32,
) {
    assert_eq!(fast.len(), slow.len());
    for (qi, (f, s)) in fast.iter().zip(slow).enumerate() {
        assert_eq!(f.len(), s.len(), "query {qi}: {} vs {} neighbours", f.len(), s.len());
        for (a, b) in f.iter().zip(s) {
            assert!((a.distance - b.distance).abs() <= eps, "query {qi}: {a:?} vs {b:?}");
            let q = &queries[qi * dim..(qi + 1) * dim];
            let true_d = distance(q, &base[a.index * dim..(a.index + 1) * dim], metric);
            assert!((a.distance - true_d).abs() <= eps, "query {qi}: reported {a:?}, true {true_d}");
        }
        for w in f.windows(2) {
            assert!(w[0].distance <= w[1].distance + eps, "query {qi}: not sorted: {w:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn integer_data_matches_brute_force_exactly(
        (dim, nb, nq) in (1usize..20, 1usize..120, 1usize..12),
        k in 0usize..140,
        tiles in tiles(),
        seed in any::<u64>(),
    ) {
        let base: Vec<f32> = (0..nb * dim).map(|i| ((seed.wrapping_add(i as u64 * 2654435761) >> 7) % 7) as f32 - 3.0).collect();
        let queries: Vec<f32> = (0..nq * dim).map(|i| ((seed.wrapping_mul(31).wrapping_add(i as u64 * 40503) >> 5) % 7) as f32 - 3.0).collect();
        for metric in [Metric::InnerProduct, Metric::L2] {
            let opts = KnnOptions { k, metric };
            let fast = knn_with(&base, &queries, dim, opts, None, &tiles);
            let slow = knn_brute_force(&base, &queries, dim, opts, None);
            prop_assert_eq!(&fast, &slow, "{:?}", metric);
            let keep = |q: usize, j: usize| !(q + j).is_multiple_of(3);
            let filter: Filter<'_> = &keep;
            let fast = knn_with(&base, &queries, dim, opts, Some(filter), &tiles);
            let slow = knn_brute_force(&base, &queries, dim, opts, Some(filter));
            prop_assert_eq!(&fast, &slow, "{:?} filtered", metric);
        }
        let opts = KnnOptions { k, metric: Metric::Cosine };
        let fast = knn_with(&base, &queries, dim, opts, None, &tiles);
        let slow = knn_brute_force(&base, &queries, dim, opts, None);
        assert_equivalent(&base, &queries, dim, Metric::Cosine, &fast, &slow, 1e-5);
    }

    #[test]
    fn float_data_matches_brute_force(
        base in int_matrix(90, 24),
        q in int_matrix(7, 24),
        noise in proptest::collection::vec(-0.5f32..0.5, 90 * 24),
        k in 1usize..30,
        tiles in tiles(),
    ) {
        let base: Vec<f32> = base.iter().zip(&noise).map(|(a, b)| a + b).collect();
        for metric in METRICS {
            let opts = KnnOptions { k, metric };
            let fast = knn_with(&base, &q, 24, opts, None, &tiles);
            let slow = knn_brute_force(&base, &q, 24, opts, None);
            assert_equivalent(&base, &q, 24, metric, &fast, &slow, 1e-4);
        }
    }
}

#[test]
fn random_data_default_tiles_all_metrics() {
    // Enough rows for several default-sized tiles and the base-splitting path (few query tiles).
    let (dim, nb, nq) = (33, 5000, 20);
    let mut s = 12345u64;
    let mut next = || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    let base: Vec<f32> = (0..nb * dim).map(|_| next()).collect();
    let queries: Vec<f32> = (0..nq * dim).map(|_| next()).collect();
    for metric in METRICS {
        let opts = KnnOptions { k: 10, metric };
        let fast = knn(&base, &queries, dim, opts, None);
        let slow = knn_brute_force(&base, &queries, dim, opts, None);
        assert_equivalent(&base, &queries, dim, metric, &fast, &slow, 1e-4);
        // Random floats have no near-ties here: the indices agree exactly.
        for (f, s) in fast.iter().zip(&slow) {
            assert_eq!(indices(f), indices(s), "{metric:?}");
        }
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let (dim, nb, nq) = (16, 3000, 37);
    let base: Vec<f32> = (0..nb * dim).map(|i| ((i * 7919) % 1009) as f32 / 1009.0 - 0.5).collect();
    let queries: Vec<f32> = (0..nq * dim).map(|i| ((i * 104729) % 997) as f32 / 997.0 - 0.5).collect();
    // Also near-duplicate rows, where the ranking key (‖q‖² + ‖x‖² − 2⟨q, x⟩) and the recomputed L2 distance
    // can order two candidates differently at the k-th place: the winners must not depend on how the base is
    // split between workers.
    let hard = hard_rows(nb, dim, 9);
    let hard_queries = hard[..nq * dim].to_vec();
    for (base, queries, screening) in
        [(&base, &queries, Screening::Off), (&base, &queries, Screening::On), (&hard, &hard_queries, Screening::Off)]
    {
        let tiles = TileConfig { base_tile: 256, tile_budget_bytes: 64 * 256 * 4, screening };
        for metric in METRICS {
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| knn_with(base, queries, dim, KnnOptions { k: 7, metric }, None, &tiles))
            };
            let one = run(1);
            for t in [2, 3, 8] {
                let other = run(t);
                // Bitwise equal distances, same order.
                for (a, b) in one.iter().zip(&other) {
                    assert_eq!(a.len(), b.len());
                    for (x, y) in a.iter().zip(b) {
                        assert_eq!(
                            (x.index, x.distance.to_bits()),
                            (y.index, y.distance.to_bits()),
                            "{metric:?} threads={t} {screening:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn default_tiles_do_not_depend_on_thread_count() {
    // Few queries over many base tiles (the base is split between workers) and many queries over a tiny base.
    for (nb, nq) in [(9000, 3), (7, 3000)] {
        let dim = 24;
        let base: Vec<f32> = (0..nb * dim).map(|i| ((i * 7919) % 1013) as f32 / 1013.0 - 0.5).collect();
        let queries: Vec<f32> = (0..nq * dim).map(|i| ((i * 104729) % 991) as f32 / 991.0 - 0.5).collect();
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| knn(&base, &queries, dim, KnnOptions { k: 5, metric: Metric::Cosine }, None))
        };
        let one = run(1);
        let bits = |r: &Vec<Vec<Neighbor>>| -> Vec<(usize, u32)> {
            r.iter().flatten().map(|n| (n.index, n.distance.to_bits())).collect()
        };
        assert_eq!(bits(&one), bits(&run(4)), "nb={nb} nq={nq}");
        assert_eq!(bits(&one), bits(&run(7)), "nb={nb} nq={nq}");
    }
}

#[test]
fn k_larger_than_base_returns_everything_kept_sorted() {
    let base = [0.0, 0.0, 3.0, 4.0, 1.0, 0.0, 0.0, 0.0];
    let keep = |_q: usize, j: usize| j != 2;
    let r = knn(&base, &[0.0, 0.0], 2, KnnOptions { k: 10, metric: Metric::L2 }, Some(&keep));
    assert_eq!(indices(&r[0]), [0, 3, 1]);
    assert_eq!(r[0].iter().map(|n| n.distance).collect::<Vec<_>>(), [0.0, 0.0, 5.0]);
}

/// Rows that stress the screening bound: clusters of near-duplicates (many candidates within the bfloat16
/// error of the k-th), exact duplicates (ties broken by index), rows that differ only beyond bfloat16's 8 bits,
/// zero rows, wide magnitudes, and a few NaN / infinite values.
fn hard_rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    let centres: Vec<f32> = (0..8 * dim).map(|_| next()).collect();
    let mut m = Vec::with_capacity(n * dim);
    for i in 0..n {
        let c = &centres[(i % 8) * dim..][..dim];
        let scale = [1.0f32, 1e-3, 1e3, 1.0, 1.0][i % 5];
        for &x in c.iter() {
            let v = match i % 7 {
                0 => x,                         // exact duplicate of its centre
                1 => x * (1.0 + 1e-3 * next()), // within bfloat16's rounding
                2 => 0.0,                       // zero row
                _ => x + 0.05 * next(),
            };
            m.push(v * scale);
        }
    }
    m
}

#[test]
fn screened_search_is_the_f32_search_bit_for_bit() {
    let dim = 40;
    let base = hard_rows(3000, dim, 1);
    let mut queries = hard_rows(150, dim, 2);
    queries.extend_from_slice(&base[..5 * dim]); // queries equal to base rows
    let mut base_bad = base.clone();
    base_bad[17 * dim + 3] = f32::NAN;
    base_bad[29 * dim] = f32::INFINITY;
    base_bad[31 * dim + 1] = f32::MAX; // rounds to infinity in bfloat16
    let keep = |q: usize, j: usize| (q * 7 + j) % 11 != 0;
    let filter: Filter<'_> = &keep;
    for base in [&base, &base_bad] {
        for metric in METRICS {
            for k in [1, 10, 200] {
                for filter in [None, Some(filter)] {
                    let opts = KnnOptions { k, metric };
                    let run = |screening| {
                        let tiles = TileConfig { screening, ..TileConfig::default() };
                        knn_with(base, &queries, dim, opts, filter, &tiles)
                    };
                    let (plain, screened) = (run(Screening::Off), run(Screening::On));
                    for (qi, (a, b)) in plain.iter().zip(&screened).enumerate() {
                        let bits =
                            |r: &[Neighbor]| r.iter().map(|n| (n.index, n.distance.to_bits())).collect::<Vec<_>>();
                        assert_eq!(bits(a), bits(b), "{metric:?} k={k} filtered={} query {qi}", filter.is_some());
                    }
                }
            }
        }
    }
}

#[test]
fn keys_rank_as_the_search_does_and_are_squared_l2_distances() {
    let (dim, nb, nq) = (33, 3000, 9);
    let base = hard_rows(nb, dim, 3);
    let queries = hard_rows(nq, dim, 4);
    for metric in METRICS {
        let opts = KnnOptions { k: 40, metric };
        let keep = |q: usize, j: usize| !(q + j).is_multiple_of(5);
        let filter: Filter<'_> = &keep;
        let full = knn(&base, &queries, dim, opts, Some(filter));
        let keys = knn_keys(&base, &queries, dim, opts, Some(filter));
        for (qi, (f, k)) in full.iter().zip(&keys).enumerate() {
            let sq = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>();
            let nq = sq(&queries[qi * dim..(qi + 1) * dim]);
            // The same winners; sorted by key, which for L2 may order near-ties differently from the
            // recomputed distances.
            let mut fi = indices(f);
            let mut ki = indices(k);
            if metric == Metric::L2 {
                fi.sort_unstable();
                ki.sort_unstable();
                for nb in k {
                    let d = f.iter().find(|x| x.index == nb.index).expect("same winners").distance;
                    // The expansion's rounding grows with the norms, not with the distance.
                    let nx = sq(&base[nb.index * dim..(nb.index + 1) * dim]);
                    assert!((nb.distance - d * d).abs() <= 1e-5 * (1.0 + nq + nx), "{} vs {}²", nb.distance, d);
                }
            } else {
                assert_eq!(f, k, "{metric:?}");
            }
            assert_eq!(fi, ki, "{metric:?}");
            assert!(k.windows(2).all(|w| w[0].distance <= w[1].distance));
        }
    }
}
