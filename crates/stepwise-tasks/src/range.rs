//! Exact range search over a catalog: every item within a distance of any of a few query items, as a full scan
//! would find it, without scanning the catalog.
//!
//! Knob 2's widened search ([`crate::questions`]) asks, per question, for every item within m_d + s_d of the
//! question's items — a small ball, but a full scan computes the distance of every one of ~230,000 items at 20,000
//! procedures, and a suite asks it thousands of times (a 2,000-procedure sweep spent 98% of 130 s there).
//!
//! How: the catalog is partitioned once (the k-means lists of [`crate::ivf`]); each list keeps its centroid μ
//! (the mean of its members, f64) and each item its distance e to it, the list's radius r = max e. A query q
//! bounds the distance to every member x from below — L2: ‖q − x‖ ≥ |‖q − μ‖ − e|; cosine (1 − ⟨q, x⟩ on unit rows)
//! and inner product (−⟨q, x⟩): ⟨q, x⟩ ≤ ⟨q, μ⟩ + ‖q‖·e — so lists and then items whose bound exceeds the range
//! are skipped; the rest get the catalog's own distance, and the same test as the full scan. The bounds are
//! lowered by the worst-case f32 rounding of that distance (relative (dim + 4)·2⁻²⁴, plus the dot product's
//! γ·‖q‖·‖x‖ for cosine and inner product), so a skipped item's f32 distance is provably beyond the range: the
//! result is the full scan's, item for item and bit for bit.

use stepwise_features::Metric;

use crate::catalog::Catalog;
use crate::negatives::Cand;

/// A partition of a catalog's items with the bounds of [`RangeIndex::within`].
pub struct RangeIndex {
    dim: usize,
    /// Members of each list, increasing.
    members: Vec<Vec<u32>>,
    /// Centroid of each list (row-major, f64).
    centroids: Vec<f64>,
    /// ‖μ‖ of each list.
    centroid_norms: Vec<f64>,
    /// Radius of each list: max over members of ‖x − μ‖.
    radii: Vec<f64>,
    /// ‖x − μ‖ of each item to its list's centroid.
    offsets: Vec<f64>,
    /// ‖x‖ of each item.
    norms: Vec<f64>,
}

impl RangeIndex {
    /// Index `cat` over the lists `members` (a partition of its items, e.g. k-means lists).
    pub fn new(cat: &Catalog, members: Vec<Vec<u32>>) -> RangeIndex {
        let dim = cat.dim;
        let mut centroids = vec![0f64; members.len() * dim];
        let mut radii = vec![0f64; members.len()];
        let mut offsets = vec![0f64; cat.len()];
        for (c, list) in members.iter().enumerate() {
            let mu = &mut centroids[c * dim..(c + 1) * dim];
            for &x in list {
                for (m, &v) in mu.iter_mut().zip(cat.row(x)) {
                    *m += v as f64;
                }
            }
            let n = list.len().max(1) as f64;
            mu.iter_mut().for_each(|m| *m /= n);
            for &x in list {
                let e = cat.row(x).iter().zip(mu.iter()).map(|(&v, &m)| (v as f64 - m).powi(2)).sum::<f64>().sqrt();
                offsets[x as usize] = e;
                radii[c] = radii[c].max(e);
            }
        }
        let centroid_norms =
            centroids.chunks(dim.max(1)).map(|m| m.iter().map(|v| v * v).sum::<f64>().sqrt()).collect();
        let norms =
            cat.data.chunks(dim.max(1)).map(|r| r.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt()).collect();
        RangeIndex { dim, members, centroids, centroid_norms, radii, offsets, norms }
    }

    /// Every item `x` of `cat` whose smallest distance to a query `q` it may be measured from (`x ≠ q`, no shared
    /// procedure) lies in `(above, bound]`, at that distance, sorted by (distance, item): exactly what a scan of
    /// the whole catalog computes.
    pub fn within(&self, cat: &Catalog, queries: &[u32], above: f32, bound: f32) -> Vec<Cand> {
        let dim = self.dim;
        // Relative rounding of an f32 distance (see module docs), and the dot product's absolute term factor.
        let rel = (dim as f64 + 4.0) * f64::powi(2.0, -24);
        let qs: Vec<(&[f32], f64)> = queries
            .iter()
            .map(|&q| {
                let row = cat.row(q);
                (row, row.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt())
            })
            .collect();
        let bound64 = bound as f64;
        let lowered = |lb: f64, slack: f64| lb - rel * lb.abs() - slack;
        let mut out = Vec::new();
        // Per query, per list: what the item bound needs (‖q − μ‖ for L2, ⟨q, μ⟩ otherwise).
        let mut per_query = vec![0f64; qs.len()];
        for (c, list) in self.members.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let mu = &self.centroids[c * dim..(c + 1) * dim];
            let (r, norm_mu) = (self.radii[c], self.centroid_norms[c]);
            let mut reachable = false;
            for (p, &(q, nq)) in per_query.iter_mut().zip(&qs) {
                *p = match cat.metric {
                    Metric::L2 => q.iter().zip(mu).map(|(&a, &m)| (a as f64 - m).powi(2)).sum::<f64>().sqrt(),
                    _ => q.iter().zip(mu).map(|(&a, &m)| a as f64 * m).sum::<f64>(),
                };
                // Any member is within r of μ (L2: the query may be inside the ball).
                let lb = match cat.metric {
                    Metric::L2 => (*p - r).max(0.0),
                    m => self.lower_bound(m, *p, nq, r, norm_mu, rel),
                };
                // `!(lb > bound)`: NaN (from NaN vectors) never skips.
                reachable |= !(lowered(lb, 0.0) > bound64);
            }
            if !reachable {
                continue;
            }
            for &x in list {
                let e = self.offsets[x as usize];
                let near = per_query.iter().zip(&qs).any(|(&p, &(_, nq))| {
                    !(lowered(self.lower_bound(cat.metric, p, nq, e, norm_mu, rel), 0.0) > bound64)
                });
                if !near {
                    continue;
                }
                let row = cat.row(x);
                let nx = self.norms[x as usize];
                let mut best = f32::INFINITY;
                for (&q, &(qrow, nq)) in queries.iter().zip(&qs) {
                    // The vectorised bound first: the catalog's own (sequential, exact) distance only when it
                    // cannot rule the pair out.
                    if x != q
                        && !(lowered(fast_lower_bound(cat.metric, qrow, row, nq, nx), 0.0) > bound64)
                        && !cat.share_owner(q, x)
                    {
                        best = best.min(cat.distance(q, x));
                    }
                }
                if best > above && best <= bound {
                    out.push(Cand { item: x, dist: best });
                }
            }
        }
        out.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.item.cmp(&b.item)));
        out
    }

    /// A lower bound on the distance from a query to a vector at distance `e` from the centroid (cosine, inner
    /// product: within `e`), before rounding allowances: `p` is ‖q − μ‖ (L2) or ⟨q, μ⟩ (cosine, inner product),
    /// `nq` = ‖q‖. For cosine and inner product the dot product's own f32 error, γ·‖q‖·‖x‖ with ‖x‖ ≤ ‖μ‖ + e, is
    /// subtracted here.
    #[inline]
    fn lower_bound(&self, metric: Metric, p: f64, nq: f64, e: f64, norm_mu: f64, rel: f64) -> f64 {
        match metric {
            Metric::L2 => (p - e).abs(),
            Metric::Cosine => 1.0 - p - nq * e - rel * nq * (norm_mu + e),
            Metric::InnerProduct => -p - nq * e - rel * nq * (norm_mu + e),
        }
    }
}

/// A lower bound on the distance of `q` and `x` from a vectorised f32 sum (16 independent lanes, so it runs at
/// SIMD speed, unlike the catalog's sequential sum), before the allowance for the exact distance's rounding:
/// the sum's own worst-case error, γ = (dim + 8)·2⁻²⁴ relative to the sum of the terms' magnitudes, is taken
/// off (twice for cosine and inner product, whose exact dot product has the same error). `nq`, `nx` are the norms.
fn fast_lower_bound(metric: Metric, q: &[f32], x: &[f32], nq: f64, nx: f64) -> f64 {
    const LANES: usize = 16;
    let gamma = (q.len() as f64 + 8.0) * f64::powi(2.0, -24);
    let mut acc = [0f32; LANES];
    let (qc, xc) = (q.chunks_exact(LANES), x.chunks_exact(LANES));
    let (qr, xr) = (qc.remainder(), xc.remainder());
    match metric {
        Metric::L2 => {
            for (a, b) in qc.zip(xc) {
                for i in 0..LANES {
                    let d = a[i] - b[i];
                    acc[i] += d * d;
                }
            }
            for (i, (a, b)) in qr.iter().zip(xr).enumerate() {
                acc[i] += (a - b) * (a - b);
            }
            let d2 = acc.iter().map(|&v| v as f64).sum::<f64>();
            (d2 / (1.0 + gamma)).sqrt()
        }
        m => {
            for (a, b) in qc.zip(xc) {
                for i in 0..LANES {
                    acc[i] += a[i] * b[i];
                }
            }
            for (i, (a, b)) in qr.iter().zip(xr).enumerate() {
                acc[i] += a * b;
            }
            let dot = acc.iter().map(|&v| v as f64).sum::<f64>();
            let c0 = if m == Metric::Cosine { 1.0 } else { 0.0 };
            c0 - dot - 2.0 * gamma * nq * nx
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Item;
    use crate::config::ItemKind;

    fn catalog(n: usize, dim: usize, metric: Metric, seed: u64) -> Catalog {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let centres: Vec<f32> = (0..6 * dim).map(|_| next()).collect();
        let mut data = Vec::with_capacity(n * dim);
        for i in 0..n {
            let c = &centres[(i % 6) * dim..][..dim];
            for &v in c {
                data.push(if i % 11 == 0 { v } else { v + 0.2 * next() });
            }
        }
        if metric == Metric::Cosine {
            stepwise_features::encoder::l2_normalize_rows(&mut data, dim);
        }
        let items = (0..n)
            .map(|i| Item { feature_id: format!("image:{i}"), content: format!("{i}"), owners: vec![(i / 3) as u32] })
            .collect();
        Catalog { kind: ItemKind::Image, metric, dim, data, items, procs: Vec::new() }
    }

    fn full_scan(cat: &Catalog, queries: &[u32], above: f32, bound: f32) -> Vec<Cand> {
        let mut out = Vec::new();
        for x in 0..cat.len() as u32 {
            let mut best = f32::INFINITY;
            for &q in queries {
                if x != q && !cat.share_owner(q, x) {
                    best = best.min(cat.distance(q, x));
                }
            }
            if best > above && best <= bound {
                out.push(Cand { item: x, dist: best });
            }
        }
        out.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.item.cmp(&b.item)));
        out
    }

    #[test]
    fn range_search_is_the_full_scan_for_every_metric_and_radius() {
        for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
            let cat = catalog(900, 12, metric, 3);
            // Uneven lists, one empty, one holding a single item.
            let mut members: Vec<Vec<u32>> = vec![Vec::new(); 9];
            for x in 0..cat.len() as u32 {
                members[if x == 5 { 8 } else { (x as usize * 7 + x as usize / 50) % 7 }].push(x);
            }
            let index = RangeIndex::new(&cat, members);
            for queries in [vec![0u32], vec![3, 400, 401], vec![10, 11, 12, 13, 600]] {
                let d: Vec<f32> = (0..cat.len() as u32).map(|x| cat.distance(queries[0], x)).collect();
                let mut sorted = d.clone();
                sorted.sort_by(f32::total_cmp);
                for &bound in &[sorted[1], sorted[20], sorted[300], sorted[899], f32::INFINITY, -1.0] {
                    let fast = index.within(&cat, &queries, 0.0, bound);
                    let slow = full_scan(&cat, &queries, 0.0, bound);
                    let bits = |v: &[Cand]| v.iter().map(|c| (c.item, c.dist.to_bits())).collect::<Vec<_>>();
                    assert_eq!(bits(&fast), bits(&slow), "{metric:?} {queries:?} bound {bound}");
                }
            }
        }
    }
}
