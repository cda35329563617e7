//! Exact k-nearest-neighbour search.
//!
//! API contract used by task generators, baselines and audits: distances are "lower is closer" for every metric
//! (cosine: 1 − cos; inner product: −⟨q, x⟩; L2: Euclidean distance), results are sorted by (distance, index),
//! and a filter can exclude candidates per query (e.g. "not from the same procedure").

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Cosine,
    InnerProduct,
    L2,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbor {
    /// Row index in the base matrix.
    pub index: usize,
    /// Lower is closer (see module docs).
    pub distance: f32,
}

#[derive(Debug, Clone, Copy)]
pub struct KnnOptions {
    pub k: usize,
    pub metric: Metric,
}

/// Keeps candidate `j` for query `q` when it returns true.
pub type Filter<'a> = &'a (dyn Fn(usize, usize) -> bool + Sync);

/// The distance between two vectors under `metric` (lower is closer).
pub fn distance(a: &[f32], b: &[f32], metric: Metric) -> f32 {
    match metric {
        Metric::InnerProduct => -dot(a, b),
        Metric::Cosine => {
            let na = dot(a, a).sqrt();
            let nb = dot(b, b).sqrt();
            if na == 0.0 || nb == 0.0 { 1.0 } else { 1.0 - dot(a, b) / (na * nb) }
        }
        Metric::L2 => a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>().sqrt(),
    }
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Top-k neighbours in `base` (row-major, `dim` columns) of each row of `queries`.
pub fn knn(base: &[f32], queries: &[f32], dim: usize, opts: KnnOptions, filter: Option<Filter<'_>>) -> Vec<Vec<Neighbor>> {
    let nq = if dim == 0 { 0 } else { queries.len() / dim };
    (0..nq)
        .into_par_iter()
        .map(|qi| {
            let q = &queries[qi * dim..(qi + 1) * dim];
            let mut all: Vec<Neighbor> = base
                .chunks(dim)
                .enumerate()
                .filter(|(j, _)| filter.is_none_or(|f| f(qi, *j)))
                .map(|(j, x)| Neighbor { index: j, distance: distance(q, x, opts.metric) })
                .collect();
            let k = opts.k.min(all.len());
            if k < all.len() {
                all.select_nth_unstable_by(k, cmp_neighbor);
                all.truncate(k);
            }
            all.sort_by(cmp_neighbor);
            all
        })
        .collect()
}

/// Order by distance, then index (total order, NaN last).
pub fn cmp_neighbor(a: &Neighbor, b: &Neighbor) -> std::cmp::Ordering {
    a.distance.total_cmp(&b.distance).then(a.index.cmp(&b.index))
}
