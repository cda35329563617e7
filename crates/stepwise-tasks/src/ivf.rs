//! Inverted-file (IVF) neighbour search for catalogs where exact search is too slow (a 20,000-procedure world
//! has ~230,000 images: exact all-against-all is ~2.6·10¹³ multiply-adds).
//!
//! k-means partitions the items into `lists`; each query scans, exactly, the items of the `probes` lists whose
//! centroids are nearest to it (Jégou et al., "Product quantization for nearest neighbor search", TPAMI 2011,
//! §IV-A, without the quantization: distances are exact, only the candidate set is approximate). Every scan is
//! one call of [`stepwise_features::knn::knn_keys`] on the gathered rows of one list and the queries probing it,
//! so the heavy work stays in the features crate's tiled matrix multiply; a query's partial results are merged
//! by ranking key and only its final k get their L2 distance recomputed. Each query's nearest list is scanned
//! first, and its k-th key there bounds what its other lists offer ([`Ivf::search`]).
//!
//! Determinism: the training sample and the initial centroids come from `rng_for(seed, …)`, centroid sums run
//! in sample order, every list is scanned by the same knn call whatever the thread count, and the partial
//! results of a query are merged by the total order (key, item) — so the neighbours, hence the questions, are
//! identical for any `--threads`.

use std::sync::Mutex;

use rand::seq::index::sample;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use stepwise_core::rng::rng_for;
use stepwise_features::Metric;
use stepwise_features::knn::{KnnOptions, distance, knn, knn_keys, knn_keys_below};

/// IVF parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IvfParams {
    /// k-means lists (0: ⌈√n⌉, the usual choice, which balances centroid and list scans).
    pub lists: usize,
    /// Lists scanned per query: recall and time grow with it.
    pub probes: usize,
    /// k-means iterations (Lloyd).
    pub iterations: usize,
    /// Training sample per list (the sample is `lists × sample_per_list` items, or all items).
    pub sample_per_list: usize,
}

impl Default for IvfParams {
    fn default() -> Self {
        IvfParams {
            lists: 0,
            probes: crate::config::NeighborSearch::DEFAULT_PROBES,
            iterations: 8,
            sample_per_list: 48,
        }
    }
}

impl IvfParams {
    /// The number of lists for `n` items.
    pub fn lists_for(&self, n: usize) -> usize {
        let l = if self.lists == 0 { (n as f64).sqrt().ceil() as usize } else { self.lists };
        l.clamp(1, n.max(1))
    }
}

/// A trained partition of a matrix's rows.
pub struct Ivf {
    dim: usize,
    metric: Metric,
    /// Rows of each list, increasing.
    members: Vec<Vec<u32>>,
    /// The `probes` nearest lists of every row (row-major, `probes` per row), nearest first.
    probe_of: Vec<u32>,
    probes: usize,
}

impl Ivf {
    /// Train k-means on a seeded sample of `data`'s rows and assign every row to its nearest lists. `metric` is
    /// the search metric (inner product for unit rows, or L2); with inner product the centroids are
    /// re-normalised (spherical k-means).
    pub fn build(data: &[f32], dim: usize, metric: Metric, params: &IvfParams, seed: u64) -> Ivf {
        let n = data.len() / dim.max(1);
        let lists = params.lists_for(n);
        let probes = params.probes.clamp(1, lists);
        let row = |i: usize| &data[i * dim..(i + 1) * dim];

        // Training sample (sorted rows) and initial centroids (a seeded choice of sample rows).
        let mut rng = rng_for(seed, "tasks/ivf/sample");
        let m = (lists * params.sample_per_list.max(1)).min(n);
        let mut rows: Vec<usize> = if m == n { (0..n).collect() } else { sample(&mut rng, n, m).into_vec() };
        rows.sort_unstable();
        let train: Vec<f32> = rows.iter().flat_map(|&i| row(i).iter().copied()).collect();
        let mut rng = rng_for(seed, "tasks/ivf/init");
        let mut centroids: Vec<f32> = sample(&mut rng, m, lists)
            .into_iter()
            .flat_map(|i| train[i * dim..(i + 1) * dim].iter().copied())
            .collect();

        let opts1 = KnnOptions { k: 1, metric };
        for _ in 0..params.iterations {
            let assign = knn(&centroids, &train, dim, opts1, None);
            let mut sums = vec![0f64; lists * dim];
            let mut counts = vec![0usize; lists];
            for (i, a) in assign.iter().enumerate() {
                let Some(c) = a.first().map(|x| x.index) else {
                    continue;
                };
                counts[c] += 1;
                for (s, &x) in sums[c * dim..(c + 1) * dim].iter_mut().zip(&train[i * dim..(i + 1) * dim]) {
                    *s += x as f64;
                }
            }
            for c in 0..lists {
                // An empty list keeps its centroid.
                if counts[c] == 0 {
                    continue;
                }
                let dst = &mut centroids[c * dim..(c + 1) * dim];
                for (d, s) in dst.iter_mut().zip(&sums[c * dim..(c + 1) * dim]) {
                    *d = (*s / counts[c] as f64) as f32;
                }
                if metric == Metric::InnerProduct {
                    stepwise_features::encoder::l2_normalize_rows(dst, dim);
                }
            }
        }
        drop(train);

        // Every row's nearest lists; the first is its own list.
        let assign = knn(&centroids, data, dim, KnnOptions { k: probes, metric }, None);
        let mut members = vec![Vec::new(); lists];
        let mut probe_of = vec![0u32; n * probes];
        for (i, a) in assign.iter().enumerate() {
            for (p, nb) in a.iter().enumerate() {
                probe_of[i * probes + p] = nb.index as u32;
            }
            // Fewer results than probes only when lists < probes (clamped above): repeat the last.
            for p in a.len()..probes {
                probe_of[i * probes + p] = probe_of[i * probes + p.saturating_sub(1)];
            }
            if let Some(first) = a.first() {
                members[first.index].push(i as u32);
            }
        }
        Ivf { dim, metric, members, probe_of, probes }
    }

    pub fn lists(&self) -> usize {
        self.members.len()
    }

    pub fn probes(&self) -> usize {
        self.probes
    }

    /// The rows of each list (each row in the list of its nearest centroid), increasing.
    pub fn members(&self) -> &[Vec<u32>] {
        &self.members
    }

    /// The lists row `row`'s search probes (its `probes` nearest, nearest first; a list repeats when there are
    /// fewer lists than probes).
    pub fn probes_of(&self, row: u32) -> &[u32] {
        &self.probe_of[row as usize * self.probes..(row as usize + 1) * self.probes]
    }

    /// The `k` nearest rows of each query row (rows of the same `data`) among the rows of its probed lists that
    /// `keep(query, row)` accepts, as (row, distance) sorted by (distance, row); distances as knn returns them.
    /// The k are the best by knn's ranking key (for L2 the squared distance from the expansion) over the probed
    /// rows, and only they get their L2 distance recomputed.
    ///
    /// Two passes: each query first scans its nearest list (where most of its neighbours are); the k-th key found
    /// there bounds the rest, so its other lists offer only candidates that can still be among its k best
    /// ([`knn_keys_below`]). A query's k best by (key, row) have keys at most that k-th key, so the result is the
    /// one-pass search's, bit for bit.
    pub fn search(
        &self,
        data: &[f32],
        queries: &[u32],
        k: usize,
        keep: &(dyn Fn(u32, u32) -> bool + Sync),
    ) -> Vec<Vec<(u32, f32)>> {
        let dim = self.dim;
        let lists = self.members.len();
        // The queries scanning each list (positions into `queries`, increasing): as their nearest probe, and as
        // one of their others.
        let mut nearest: Vec<Vec<u32>> = vec![Vec::new(); lists];
        let mut others: Vec<Vec<u32>> = vec![Vec::new(); lists];
        for (qp, &q) in queries.iter().enumerate() {
            let ps = self.probes_of(q);
            for (i, &c) in ps.iter().enumerate() {
                if i == 0 {
                    nearest[c as usize].push(qp as u32);
                } else if !ps[..i].contains(&c) {
                    others[c as usize].push(qp as u32);
                }
            }
        }
        let acc: Vec<Mutex<Vec<(f32, u32)>>> = (0..queries.len()).map(|_| Mutex::new(Vec::new())).collect();
        self.scan_lists(data, queries, &nearest, k, keep, None, &acc);
        let below: Vec<f32> =
            acc.iter().map(|a| bound_beyond(&a.lock().expect("no panics while merging"), k)).collect();
        self.scan_lists(data, queries, &others, k, keep, Some(&below), &acc);
        acc.into_par_iter()
            .zip(queries)
            .map(|(m, &q)| {
                let mut a = m.into_inner().expect("no panics while merging");
                top_k(&mut a, k);
                if self.metric == Metric::L2 {
                    let q = &data[q as usize * dim..(q as usize + 1) * dim];
                    let row = |i: u32| &data[i as usize * dim..(i as usize + 1) * dim];
                    // The rows are scattered over the catalog: each one's misses overlap the work on the AHEAD
                    // rows before it.
                    for &(_, first) in a.iter().take(AHEAD) {
                        stepwise_kernels::math::prefetch(row(first));
                    }
                    for j in 0..a.len() {
                        if let Some(&(_, next)) = a.get(j + AHEAD) {
                            stepwise_kernels::math::prefetch(row(next));
                        }
                        a[j].0 = distance(q, row(a[j].1), Metric::L2);
                    }
                    a.sort_unstable_by(nearest_first);
                }
                a.into_iter().map(|(d, i)| (i, d)).collect()
            })
            .collect()
    }

    /// Scan each list against the queries `scanning` it (positions into `queries`), each query's candidates
    /// bounded by `below` when given, adding every query's k best by key (as (key, row)) to its `acc`.
    #[allow(clippy::too_many_arguments)]
    fn scan_lists(
        &self,
        data: &[f32],
        queries: &[u32],
        scanning: &[Vec<u32>],
        k: usize,
        keep: &(dyn Fn(u32, u32) -> bool + Sync),
        below: Option<&[f32]>,
        acc: &[Mutex<Vec<(f32, u32)>>],
    ) {
        let dim = self.dim;
        let opts = KnnOptions { k, metric: self.metric };
        (0..scanning.len()).into_par_iter().for_each(|c| {
            let qs = &scanning[c];
            let base_rows = &self.members[c];
            if qs.is_empty() || base_rows.is_empty() {
                return;
            }
            let mut base = Vec::with_capacity(base_rows.len() * dim);
            for &r in base_rows {
                base.extend_from_slice(&data[r as usize * dim..(r as usize + 1) * dim]);
            }
            let mut qmat = Vec::with_capacity(qs.len() * dim);
            for &qp in qs {
                let q = queries[qp as usize] as usize;
                qmat.extend_from_slice(&data[q * dim..(q + 1) * dim]);
            }
            let filter = |qi: usize, j: usize| keep(queries[qs[qi] as usize], base_rows[j]);
            // Ranking keys: only the final k of each query get their L2 distance recomputed (`search`).
            let found = match below {
                None => knn_keys(&base, &qmat, dim, opts, Some(&filter)),
                Some(below) => {
                    let bounds: Vec<f32> = qs.iter().map(|&qp| below[qp as usize]).collect();
                    knn_keys_below(&base, &qmat, dim, opts, Some(&filter), &bounds)
                }
            };
            for (qi, list) in found.into_iter().enumerate() {
                let mut a = acc[qs[qi] as usize].lock().expect("no panics while merging");
                a.extend(list.into_iter().map(|nb| (nb.distance, base_rows[nb.index])));
                if a.len() > 2 * k {
                    top_k(&mut a, k);
                }
            }
        });
    }
}

/// Rows hinted ahead of the final recompute ([`Ivf::search`]).
const AHEAD: usize = 2;

/// What a query's other lists must beat, from the k best keys of its nearest list: keys below the next float
/// after the k-th (every key up to it may still win on its row). Unbounded (+∞) when the list gave fewer than k,
/// or any NaN — NaN keys rank last, so a finite key from another list would displace one (`f32::max` would skip
/// the NaN and bound too tightly).
fn bound_beyond(nearest: &[(f32, u32)], k: usize) -> f32 {
    if k == 0 || nearest.len() < k || nearest.iter().any(|x| x.0.is_nan()) {
        return f32::INFINITY;
    }
    let kth = nearest.iter().map(|x| x.0).fold(f32::NEG_INFINITY, f32::max);
    if kth.is_finite() { kth.next_up() } else { f32::INFINITY }
}

/// Keep the `k` smallest by (distance, row), sorted. A total order, so the result does not depend on the order
/// partial lists were merged in.
fn top_k(a: &mut Vec<(f32, u32)>, k: usize) {
    if a.len() > k {
        a.select_nth_unstable_by(k, nearest_first);
        a.truncate(k);
    }
    a.sort_unstable_by(nearest_first);
}

/// (distance or key, row) by distance, then row.
fn nearest_first(x: &(f32, u32), y: &(f32, u32)) -> std::cmp::Ordering {
    x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn points(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        // Clustered unit vectors: 40 centres, points near them.
        let mut rng = rng_for(seed, "ivf-test");
        let centres: Vec<f32> = (0..40 * dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let mut data: Vec<f32> = (0..n)
            .flat_map(|i| {
                let c = i % 40;
                let v: Vec<f32> =
                    (0..dim).map(|d| centres[c * dim + d] + 0.5 * rng.random_range(-1.0f32..1.0)).collect();
                v
            })
            .collect();
        stepwise_features::encoder::l2_normalize_rows(&mut data, dim);
        data
    }

    #[test]
    fn recall_is_high_and_results_are_reproducible_and_filtered() {
        let (n, dim, k) = (3000, 16, 20);
        let data = points(n, dim, 1);
        let params = IvfParams { probes: 6, ..Default::default() };
        let ivf = Ivf::build(&data, dim, Metric::InnerProduct, &params, 7);
        assert_eq!(ivf.lists(), 55);
        let queries: Vec<u32> = (0..n as u32).step_by(13).collect();
        // Exclude the query itself and rows of the same "procedure" (blocks of 10).
        let keep = |q: u32, r: u32| q / 10 != r / 10;
        let got = ivf.search(&data, &queries, k, &keep);
        let again = Ivf::build(&data, dim, Metric::InnerProduct, &params, 7).search(&data, &queries, k, &keep);
        assert_eq!(got, again);
        let filter = |qi: usize, j: usize| keep(queries[qi], j as u32);
        let qmat: Vec<f32> =
            queries.iter().flat_map(|&q| data[q as usize * dim..(q as usize + 1) * dim].to_vec()).collect();
        let exact = knn(&data, &qmat, dim, KnnOptions { k, metric: Metric::InnerProduct }, Some(&filter));
        let (mut hit, mut total) = (0, 0);
        for ((q, g), e) in queries.iter().zip(&got).zip(&exact) {
            assert!(g.windows(2).all(|w| (w[0].1, w[0].0) <= (w[1].1, w[1].0)));
            assert!(g.iter().all(|&(r, _)| keep(*q, r)));
            let e: std::collections::HashSet<u32> = e.iter().map(|nb| nb.index as u32).collect();
            hit += g.iter().filter(|x| e.contains(&x.0)).count();
            total += e.len();
            // Distances are exact for the neighbours found.
            for &(r, d) in g {
                let want =
                    -stepwise_features::knn::dot(&data[*q as usize * dim..][..dim], &data[r as usize * dim..][..dim]);
                assert!((d - want).abs() < 1e-4);
            }
        }
        assert!(hit as f64 / total as f64 > 0.9, "recall {hit}/{total}");
    }

    #[test]
    fn probing_every_l2_list_is_the_exact_search_bit_for_bit() {
        // The winners by ranking key over all lists, then their distances recomputed: what exact knn returns.
        let (n, dim, k) = (700, 12, 15);
        let data = points(n, dim, 3);
        let params = IvfParams { lists: 6, probes: 6, ..Default::default() };
        let ivf = Ivf::build(&data, dim, Metric::L2, &params, 4);
        let queries: Vec<u32> = (0..n as u32).step_by(3).collect();
        let keep = |q: u32, r: u32| q / 7 != r / 7;
        let got = ivf.search(&data, &queries, k, &keep);
        let qmat: Vec<f32> =
            queries.iter().flat_map(|&q| data[q as usize * dim..(q as usize + 1) * dim].to_vec()).collect();
        let filter = |qi: usize, j: usize| keep(queries[qi], j as u32);
        let exact = knn(&data, &qmat, dim, KnnOptions { k, metric: Metric::L2 }, Some(&filter));
        for (g, e) in got.iter().zip(&exact) {
            let g: Vec<(u32, u32)> = g.iter().map(|&(r, d)| (r, d.to_bits())).collect();
            let e: Vec<(u32, u32)> = e.iter().map(|nb| (nb.index as u32, nb.distance.to_bits())).collect();
            assert_eq!(g, e);
        }
    }

    #[test]
    fn a_search_is_the_exact_search_over_the_probed_lists_bit_for_bit() {
        // The other lists bounded by the nearest one's k-th key lose nothing: the result is the exact search
        // restricted to each query's probed lists, winners and distances.
        let (n, dim) = (900, 10);
        let data = points(n, dim, 5);
        for (metric, probes, k) in [(Metric::L2, 2, 12), (Metric::L2, 3, 40), (Metric::Cosine, 2, 25)] {
            let params = IvfParams { lists: 9, probes, ..Default::default() };
            let ivf = Ivf::build(&data, dim, metric, &params, 6);
            let mut list_of = vec![0u32; n];
            for (c, m) in ivf.members().iter().enumerate() {
                m.iter().for_each(|&r| list_of[r as usize] = c as u32);
            }
            let queries: Vec<u32> = (0..n as u32).step_by(2).collect();
            let keep = |q: u32, r: u32| q / 4 != r / 4;
            let got = ivf.search(&data, &queries, k, &keep);
            let qmat: Vec<f32> =
                queries.iter().flat_map(|&q| data[q as usize * dim..(q as usize + 1) * dim].to_vec()).collect();
            let probed = |qi: usize, j: usize| {
                let q = queries[qi];
                keep(q, j as u32) && ivf.probes_of(q).contains(&list_of[j])
            };
            let exact = knn(&data, &qmat, dim, KnnOptions { k, metric }, Some(&probed));
            for (qi, (g, e)) in got.iter().zip(&exact).enumerate() {
                let g: Vec<(u32, u32)> = g.iter().map(|&(r, d)| (r, d.to_bits())).collect();
                let e: Vec<(u32, u32)> = e.iter().map(|nb| (nb.index as u32, nb.distance.to_bits())).collect();
                assert_eq!(g, e, "{metric:?} probes {probes} k={k} query {qi}");
            }
        }
    }

    #[test]
    fn other_lists_are_bounded_by_the_nearest_lists_kth_key_unless_it_is_short_or_has_a_nan() {
        let keys = [(0.5, 3), (-2.0, 1), (0.5, 9)];
        assert_eq!(bound_beyond(&keys, 3), 0.5f32.next_up());
        assert_eq!(bound_beyond(&[(-0.0, 1)], 1), (-0.0f32).next_up(), "both zeros get in");
        assert!(bound_beyond(&keys, 3) > 0.5 && bound_beyond(&[(-1.5, 0)], 1) > -1.5);
        for (keys, k) in [(&keys[..], 4), (&keys[..], 0), (&[(0.0, 0), (f32::NAN, 1)][..], 2), (&[(f32::MAX, 0)], 1)] {
            assert_eq!(bound_beyond(keys, k), f32::INFINITY, "{keys:?} k={k}");
        }
    }

    #[test]
    fn probing_every_list_is_exact() {
        let (n, dim, k) = (500, 8, 10);
        let data = points(n, dim, 2);
        let params = IvfParams { lists: 5, probes: 5, ..Default::default() };
        let ivf = Ivf::build(&data, dim, Metric::InnerProduct, &params, 1);
        let queries: Vec<u32> = (0..n as u32).collect();
        let keep = |q: u32, r: u32| q != r;
        let got = ivf.search(&data, &queries, k, &keep);
        let filter = |qi: usize, j: usize| qi != j;
        let exact = knn(&data, &data, dim, KnnOptions { k, metric: Metric::InnerProduct }, Some(&filter));
        for (g, e) in got.iter().zip(&exact) {
            let gi: Vec<u32> = g.iter().map(|x| x.0).collect();
            let ei: Vec<u32> = e.iter().map(|x| x.index as u32).collect();
            assert_eq!(gi, ei);
        }
    }
}
