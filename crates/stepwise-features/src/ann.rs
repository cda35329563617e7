//! Approximate nearest neighbours: an HNSW graph (the usearch crate) for collections where exact search is too
//! slow. Distances follow [`crate::knn`]'s convention (lower is closer: cosine 1 − cos, inner product −⟨q, x⟩,
//! L2 Euclidean), so results can be compared with exact search directly ([`recall_at_k`]).
//!
//! Determinism: an index built with `AnnParams { parallel_build: false, .. }` inserts rows in order on one
//! thread and is reproducible; a parallel build is faster but its graph (hence its approximate answers)
//! depends on thread scheduling. Use exact search ([`crate::knn::knn`]) wherever results reach an output.

use rayon::prelude::*;
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::FeatureError;
use crate::knn::{Metric, Neighbor, cmp_neighbor};

/// HNSW parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnParams {
    /// Links per node (HNSW's M).
    pub connectivity: usize,
    /// Candidate list size while inserting (efConstruction).
    pub expansion_add: usize,
    /// Candidate list size while searching (ef); raise it for recall, lower it for speed.
    pub expansion_search: usize,
    /// Insert from all rayon threads (fast, not reproducible) or in order on one thread.
    pub parallel_build: bool,
}

impl Default for AnnParams {
    fn default() -> Self {
        AnnParams { connectivity: 16, expansion_add: 128, expansion_search: 64, parallel_build: true }
    }
}

/// An HNSW index over the rows of a matrix; keys are row indices.
pub struct AnnIndex {
    index: Index,
    metric: Metric,
    dim: usize,
    len: usize,
}

impl AnnIndex {
    /// Index the rows of `base` (row-major, `dim` columns).
    pub fn build(base: &[f32], dim: usize, metric: Metric, params: &AnnParams) -> Result<Self, FeatureError> {
        if dim == 0 || !base.len().is_multiple_of(dim) {
            return Err(runtime(format!("ann: {} values are not rows of dimension {dim}", base.len())));
        }
        let options = IndexOptions {
            dimensions: dim,
            metric: match metric {
                Metric::Cosine => MetricKind::Cos,
                Metric::InnerProduct => MetricKind::IP,
                Metric::L2 => MetricKind::L2sq,
            },
            quantization: ScalarKind::F32,
            connectivity: params.connectivity,
            expansion_add: params.expansion_add,
            expansion_search: params.expansion_search,
            multi: false,
        };
        let index = Index::new(&options).map_err(|e| runtime(format!("ann: cannot create index: {e}")))?;
        let len = base.len() / dim;
        let threads = if params.parallel_build { rayon::current_num_threads().max(1) } else { 1 };
        index
            .reserve_capacity_and_threads(len, threads.max(rayon::current_num_threads()))
            .map_err(|e| runtime(format!("ann: cannot reserve {len} vectors: {e}")))?;
        let add = |i: usize| {
            index.add(i as u64, &base[i * dim..(i + 1) * dim]).map_err(|e| runtime(format!("ann: add row {i}: {e}")))
        };
        if params.parallel_build {
            (0..len).into_par_iter().try_for_each(add)?;
        } else {
            (0..len).try_for_each(add)?;
        }
        Ok(AnnIndex { index, metric, dim, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The SIMD kernel usearch uses for this index's distances (e.g. `haswell`, `skylake`, or `serial`).
    pub fn hardware_acceleration(&self) -> String {
        self.index.hardware_acceleration()
    }

    /// Change the search-time candidate list size (ef).
    pub fn set_expansion_search(&self, ef: usize) {
        self.index.change_expansion_search(ef);
    }

    /// Approximate top-k of each query row, sorted by (distance, index); queries run in parallel.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Neighbor>>, FeatureError> {
        if !queries.len().is_multiple_of(self.dim) {
            return Err(runtime(format!("ann: {} query values are not rows of dimension {}", queries.len(), self.dim)));
        }
        queries
            .par_chunks(self.dim)
            .map(|q| {
                let m = self.index.search(q, k.min(self.len)).map_err(|e| runtime(format!("ann: search: {e}")))?;
                let mut out: Vec<Neighbor> = m
                    .keys
                    .iter()
                    .zip(&m.distances)
                    .map(|(&key, &d)| Neighbor { index: key as usize, distance: self.to_distance(d) })
                    .collect();
                out.sort_by(cmp_neighbor);
                Ok(out)
            })
            .collect()
    }

    /// usearch's distance → ours: IP is `1 − ⟨q, x⟩` there, L2 is squared.
    fn to_distance(&self, d: f32) -> f32 {
        match self.metric {
            Metric::Cosine => d,
            Metric::InnerProduct => d - 1.0,
            Metric::L2 => d.max(0.0).sqrt(),
        }
    }
}

/// Mean over queries of |approx ∩ exact| / |exact| (by index; queries with no exact neighbours are skipped).
pub fn recall_at_k(approx: &[Vec<Neighbor>], exact: &[Vec<Neighbor>]) -> f64 {
    let mut total = 0.0;
    let mut n = 0usize;
    for (a, e) in approx.iter().zip(exact) {
        if e.is_empty() {
            continue;
        }
        let truth: std::collections::HashSet<usize> = e.iter().map(|x| x.index).collect();
        total += a.iter().filter(|x| truth.contains(&x.index)).count() as f64 / truth.len() as f64;
        n += 1;
    }
    if n == 0 { 1.0 } else { total / n as f64 }
}

fn runtime(msg: String) -> FeatureError {
    FeatureError::Core(stepwise_core::Error::runtime(msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knn::{KnnOptions, knn};

    fn random(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        use rand::Rng;
        let mut rng = stepwise_core::rng::rng_for(seed, "ann-test");
        (0..n * dim).map(|_| rng.random::<f32>() - 0.5).collect()
    }

    #[test]
    fn high_recall_and_matching_distances_on_small_data() {
        let (dim, n) = (16, 2000);
        let base = random(n, dim, 1);
        let queries = random(50, dim, 2);
        for metric in [Metric::Cosine, Metric::InnerProduct, Metric::L2] {
            let idx = AnnIndex::build(&base, dim, metric, &AnnParams { expansion_search: 200, ..Default::default() })
                .unwrap();
            assert_eq!(idx.len(), n);
            let approx = idx.search(&queries, 10).unwrap();
            let exact = knn(&base, &queries, dim, KnnOptions { k: 10, metric }, None);
            let r = recall_at_k(&approx, &exact);
            assert!(r > 0.95, "{metric:?}: recall {r}");
            // Same distance convention as exact search for the neighbours both found.
            for (a, e) in approx.iter().zip(&exact) {
                for x in a {
                    if let Some(y) = e.iter().find(|y| y.index == x.index) {
                        assert!((x.distance - y.distance).abs() < 1e-4, "{metric:?}: {} vs {}", x.distance, y.distance);
                    }
                }
            }
        }
    }

    #[test]
    fn sequential_build_is_reproducible() {
        let (dim, n) = (8, 500);
        let base = random(n, dim, 3);
        let p = AnnParams { parallel_build: false, expansion_search: 16, ..Default::default() };
        let a = AnnIndex::build(&base, dim, Metric::L2, &p).unwrap().search(&base[..80], 5).unwrap();
        let b = AnnIndex::build(&base, dim, Metric::L2, &p).unwrap().search(&base[..80], 5).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn recall_counts_overlap() {
        let n = |i| Neighbor { index: i, distance: 0.0 };
        assert_eq!(recall_at_k(&[vec![n(1), n(2)]], &[vec![n(2), n(3)]]), 0.5);
    }
}
