//! Exact k-nearest-neighbour search.
//!
//! API contract used by task generators, baselines and audits: distances are "lower is closer" for every metric
//! (cosine: 1 − cos; inner product: −⟨q, x⟩; L2: Euclidean distance), results are sorted by (distance, index),
//! and a filter can exclude candidates per query (e.g. "not from the same procedure").
//!
//! How: queries × base are cut into tiles; each tile's scores come from one matrix multiply (stepwise-kernels'
//! GEMM, which sums every score in a fixed order), are turned into ranking keys in place and scanned against
//! each query's k-th best key at the last cut, so only the few candidates that beat it reach a buffer cut back to
//! the k best whenever it doubles — never a full sort. Tiles run in parallel (rayon) and memory stays within one
//! score tile per worker ([`TileConfig`]). Tile shapes depend on the data sizes only, never on the thread count;
//! the winners are chosen by key in every part alike and only then get their final distance, so results are
//! identical for any `--threads`.
//! Cosine uses the vectors' norms instead of normalised copies (no second copy of the base); L2 uses
//! ‖q‖² + ‖x‖² − 2⟨q, x⟩.
//!
//! On CPUs whose AVX-512 BF16 products outrun f32 FMAs, large searches first screen in bfloat16 and re-rank the
//! candidates a proven error bound cannot rule out with the same f32 kernel ([`screen`]): the results are
//! identical, bit for bit, to the f32 search, so the choice (made by measuring both rates) never shows in outputs.

mod screen;

use std::cmp::Ordering;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use stepwise_kernels::MatRef;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Cosine,
    InnerProduct,
    L2,
}

impl std::str::FromStr for Metric {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cosine" | "cos" => Ok(Metric::Cosine),
            "ip" | "inner_product" | "dot" => Ok(Metric::InnerProduct),
            "l2" | "euclidean" => Ok(Metric::L2),
            other => Err(format!("unknown metric {other:?} (expected cosine, ip or l2)")),
        }
    }
}

impl Metric {
    /// What a distance under this metric is, for column headers: lower is always closer.
    pub fn distance_name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine distance (1 - cos)",
            Metric::InnerProduct => "negative inner product",
            Metric::L2 => "Euclidean distance",
        }
    }
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

/// Tile sizes of the exact search, and whether it screens in bfloat16. Results do not depend on any of them: every
/// score is summed by the same kernel in the same order whatever the tile it falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    /// Base rows per tile.
    pub base_tile: usize,
    /// Bytes of one score tile (query rows × base rows × 4): the memory each worker needs beyond the inputs.
    pub tile_budget_bytes: usize,
    pub screening: Screening,
}

/// Whether the exact search screens candidates in bfloat16 before its f32 re-ranking ([`screen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Screening {
    /// When the CPU runs bfloat16 products faster than f32 ones ([`stepwise_kernels::bf16::pays_off`]) and the
    /// search is large enough to repay converting the base.
    #[default]
    Auto,
    /// Never (the f32 search alone).
    Off,
    /// Always; on CPUs without AVX-512 BF16 with a portable kernel (slow: for tests).
    On,
}

impl Default for TileConfig {
    fn default() -> Self {
        // Larger query tiles pack the base fewer times (docs/performance.md).
        TileConfig { base_tile: 2048, tile_budget_bytes: 16 << 20, screening: Screening::Auto }
    }
}

impl Screening {
    /// Auto's threshold: below about 10⁹ multiply-adds converting the base costs more than screening saves.
    fn applies(self, nq: usize, nb: usize, dim: usize) -> bool {
        match self {
            Screening::Off => false,
            Screening::On => true,
            Screening::Auto => {
                nq >= 64 && dim >= 32 && (nq * nb).saturating_mul(dim) >= 1 << 30 && stepwise_kernels::bf16::pays_off()
            }
        }
    }
}

impl TileConfig {
    /// Query rows per tile for `nq` queries: as many as the budget allows, but (with many queries) at most a
    /// eighth of them so tiles can run in parallel, and never fewer than 64 (matrix-multiply efficiency). It
    /// depends on the sizes only, never on the thread count.
    fn query_tile(&self, nq: usize, base_tile: usize) -> usize {
        let by_budget = (self.tile_budget_bytes / (4 * base_tile.max(1))).max(1);
        let by_count = nq.div_ceil(8).max(64);
        by_budget.min(by_count).clamp(1, nq.max(1))
    }
}

/// The distance between two vectors under `metric` (lower is closer). L2 sums in 16 lanes and a fixed tree
/// (`stepwise_kernels::math::sq_distance_lanes`: the same bits on every machine, at SIMD speed; every search
/// recomputes its winners' L2 distances here).
pub fn distance(a: &[f32], b: &[f32], metric: Metric) -> f32 {
    match metric {
        Metric::InnerProduct => -dot(a, b),
        Metric::Cosine => {
            let na = dot(a, a).sqrt();
            let nb = dot(b, b).sqrt();
            if na == 0.0 || nb == 0.0 { 1.0 } else { clamp_rounding(1.0 - dot(a, b) / (na * nb)) }
        }
        Metric::L2 => stepwise_kernels::math::sq_distance_lanes(a, b).sqrt(),
    }
}

/// Rounding can put 1 − cos of (nearly) parallel vectors slightly below 0; distances are never negative. NaN
/// stays NaN (it ranks last).
#[inline]
fn clamp_rounding(d: f32) -> f32 {
    if d < 0.0 { 0.0 } else { d }
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Top-k neighbours in `base` (row-major, `dim` columns) of each row of `queries`, with the default tiles.
pub fn knn(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    opts: KnnOptions,
    filter: Option<Filter<'_>>,
) -> Vec<Vec<Neighbor>> {
    knn_with(base, queries, dim, opts, filter, &TileConfig::default())
}

/// [`knn`] with explicit tile sizes.
pub fn knn_with(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    opts: KnnOptions,
    filter: Option<Filter<'_>>,
    tiles: &TileConfig,
) -> Vec<Vec<Neighbor>> {
    search(base, queries, dim, opts, filter, None, tiles, true)
}

/// [`knn`] without the last step for L2: each neighbour's `distance` is the search's ranking key, the squared
/// distance ‖q‖² + ‖x‖² − 2⟨q, x⟩ (clamped at 0), not the Euclidean distance recomputed from the vectors. For
/// searches over parts of a base whose results are merged (IVF lists): rank the union by key, then recompute only
/// the final k with [`distance`]. Other metrics: the same as [`knn`].
pub fn knn_keys(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    opts: KnnOptions,
    filter: Option<Filter<'_>>,
) -> Vec<Vec<Neighbor>> {
    search(base, queries, dim, opts, filter, None, &TileConfig::default(), false)
}

/// [`knn_keys`] among the candidates whose key is below a bound known beforehand: each query `q`'s k best of the
/// base rows with key `< below[q]` (fewer when fewer are); a non-finite bound bounds nothing. For searches whose
/// parts are merged: once one part has given a query k candidates, the others need offer only what beats their
/// k-th key (the IVF search seeds each query's other lists from its own), and the merged k best are the same.
pub fn knn_keys_below(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    opts: KnnOptions,
    filter: Option<Filter<'_>>,
    below: &[f32],
) -> Vec<Vec<Neighbor>> {
    assert_eq!(below.len() * dim, queries.len(), "knn: one bound per query");
    search(base, queries, dim, opts, filter, Some(below), &TileConfig::default(), false)
}

#[allow(clippy::too_many_arguments)]
fn search(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    opts: KnnOptions,
    filter: Option<Filter<'_>>,
    below: Option<&[f32]>,
    tiles: &TileConfig,
    recompute: bool,
) -> Vec<Vec<Neighbor>> {
    if dim == 0 {
        return Vec::new();
    }
    assert!(
        base.len().is_multiple_of(dim) && queries.len().is_multiple_of(dim),
        "knn: matrix lengths are not multiples of dim"
    );
    let nb = base.len() / dim;
    let nq = queries.len() / dim;
    if opts.k == 0 || nb == 0 {
        return vec![Vec::new(); nq];
    }
    let base_norms = Norms::of(base, dim, opts.metric);
    let query_norms = Norms::of(queries, dim, opts.metric);
    let screened = tiles.screening.applies(nq, nb, dim).then(|| screen::Screen::new(base, nb, dim));
    let bt = match screened {
        // The screening kernel's tiles start on whole panels of base rows.
        Some(_) => tiles.base_tile.next_multiple_of(stepwise_kernels::bf16::NR).clamp(1, nb),
        None => tiles.base_tile.clamp(1, nb),
    };
    let qt = tiles.query_tile(nq, bt);
    let n_qt = nq.div_ceil(qt);
    let n_bt = nb.div_ceil(bt);
    // Split the base too when there are too few query tiles to keep every worker busy. This only changes which
    // worker scans which base tiles; the merge below is exact, so results do not depend on it.
    let workers = rayon::current_num_threads().max(1);
    let splits = if n_qt >= 2 * workers { 1 } else { (2 * workers).div_ceil(n_qt).min(n_bt) };
    let per_split = n_bt.div_ceil(splits);
    let units: Vec<(usize, usize, usize)> = (0..n_qt)
        .flat_map(|q| (0..splits).map(move |s| (q, s * per_split, ((s + 1) * per_split).min(n_bt))))
        .filter(|&(_, a, b)| a < b)
        .collect();
    let search = Search { base, queries, dim, nb, nq, bt, qt, opts, filter, below, base_norms, query_norms };
    let partial: Vec<(usize, Vec<Vec<Neighbor>>)> = units
        .par_iter()
        .map(|&(q, b0, b1)| {
            let (start, end) = (b0 * bt, (b1 * bt).min(nb));
            (
                q,
                match &screened {
                    Some(s) => s.unit(&search, q, start, end),
                    None => search.unit(q, start, end),
                },
            )
        })
        .collect();
    let mut out: Vec<Vec<Neighbor>> = vec![Vec::new(); nq];
    for (q, lists) in partial {
        for (r, list) in lists.into_iter().enumerate() {
            out[q * qt + r].extend(list);
        }
    }
    if splits > 1 {
        for list in &mut out {
            list.sort_by(cmp_neighbor);
            list.truncate(opts.k);
        }
    }
    // The winners are chosen by key (over every split alike, so the choice cannot depend on the thread count);
    // only then does L2 measure them directly.
    if recompute && opts.metric == Metric::L2 {
        out.par_iter_mut().enumerate().for_each(|(qi, list)| {
            let q = &queries[qi * dim..(qi + 1) * dim];
            for nb in list.iter_mut() {
                nb.distance = distance(q, &base[nb.index * dim..(nb.index + 1) * dim], Metric::L2);
            }
            list.sort_by(cmp_neighbor);
        });
    }
    out
}

/// What a metric needs besides the dot products.
enum Norms {
    None,
    /// 1/‖x‖ (0 for a zero vector, which makes its cosine distance 1).
    Inverse(Vec<f32>),
    /// ‖x‖².
    Squared(Vec<f32>),
}

impl Norms {
    fn of(m: &[f32], dim: usize, metric: Metric) -> Norms {
        let sq = || -> Vec<f32> { m.par_chunks(dim).map(|r| dot(r, r)).collect() };
        match metric {
            Metric::InnerProduct => Norms::None,
            Metric::Cosine => {
                Norms::Inverse(sq().into_iter().map(|s| if s > 0.0 { 1.0 / s.sqrt() } else { 0.0 }).collect())
            }
            Metric::L2 => Norms::Squared(sq()),
        }
    }

    fn get(&self, i: usize) -> f32 {
        match self {
            Norms::None => 0.0,
            Norms::Inverse(v) | Norms::Squared(v) => v[i],
        }
    }

    fn slice(&self, a: usize, b: usize) -> &[f32] {
        match self {
            Norms::None => &[],
            Norms::Inverse(v) | Norms::Squared(v) => &v[a..b],
        }
    }
}

struct Search<'a> {
    base: &'a [f32],
    queries: &'a [f32],
    dim: usize,
    nb: usize,
    nq: usize,
    bt: usize,
    qt: usize,
    opts: KnnOptions,
    filter: Option<Filter<'a>>,
    /// Per query, the key candidates must stay below ([`knn_keys_below`]).
    below: Option<&'a [f32]>,
    base_norms: Norms,
    query_norms: Norms,
}

impl Search<'_> {
    /// An empty top k for query `qi`, bounded when the search has a finite bound for it.
    fn top(&self, qi: usize) -> TopK {
        match self.below.map(|b| b[qi]) {
            Some(bound) if bound.is_finite() => TopK::below(self.opts.k, bound),
            _ => TopK::new(self.opts.k),
        }
    }

    /// Query tile `q` against base rows `b_start..b_end` (whole base tiles): each query's top k, sorted.
    fn unit(&self, q: usize, b_start: usize, b_end: usize) -> Vec<Vec<Neighbor>> {
        let q0 = q * self.qt;
        let q1 = (q0 + self.qt).min(self.nq);
        let rows = q1 - q0;
        let mut tops: Vec<TopK> = (q0..q1).map(|qi| self.top(qi)).collect();
        let mut scores = vec![0f32; rows * self.bt];
        let mut j0 = b_start;
        while j0 < b_end {
            let j1 = (j0 + self.bt).min(b_end);
            let cols = j1 - j0;
            // scores[r][c] = ⟨query q0 + r, base j0 + c⟩, each summed in the kernel's fixed order (the screened
            // search re-ranks its candidates with the same kernel and gets the same bits).
            self.scores(q0, q1, j0, j1, &mut scores[..rows * cols]);
            for (r, top) in tops.iter_mut().enumerate() {
                let row = &mut scores[r * cols..(r + 1) * cols];
                self.to_distances(row, q0 + r, j0, j1);
                match self.filter {
                    None => top.scan(row, j0, |_| true),
                    Some(f) => top.scan(row, j0, |j| f(q0 + r, j)),
                }
            }
            j0 = j1;
        }
        debug_assert!(b_end <= self.nb);
        tops.into_iter().map(|top| self.finish(top)).collect()
    }

    /// `out[r * (j1 − j0) + c] = ⟨query q0 + r, base row j0 + c⟩`.
    fn scores(&self, q0: usize, q1: usize, j0: usize, j1: usize, out: &mut [f32]) {
        let dim = self.dim;
        let a = MatRef::row_major(&self.queries[q0 * dim..q1 * dim], q1 - q0, dim);
        let b = MatRef::row_major(&self.base[j0 * dim..j1 * dim], j1 - j0, dim).t();
        // Shapes and bounds hold by construction (slices cut to the views above); an error would be our bug.
        stepwise_kernels::gemm(a, b, out, false, false).expect("knn: tile shapes match their slices");
    }

    /// One query's winners by ranking key, sorted by (key, index). L2 keys are squared distances from the
    /// expansion ‖q‖² + ‖x‖² − 2⟨q, x⟩, which ranks well but cancels badly for near-identical vectors (a vector's
    /// distance to itself would come out as ~3e-4 instead of 0): [`knn`] recomputes the final winners' distances
    /// directly as √Σ(q−x)².
    fn finish(&self, top: TopK) -> Vec<Neighbor> {
        let mut v: Vec<Neighbor> =
            top.into_best().into_iter().map(|c| Neighbor { index: c.index, distance: c.key }).collect();
        v.sort_by(cmp_neighbor);
        v
    }

    /// Turn dot products into the ranking key in place: the distance itself, except squared for L2 (the final
    /// L2 distances are recomputed once the winners are known).
    fn to_distances(&self, row: &mut [f32], qi: usize, j0: usize, j1: usize) {
        let nq = self.query_norms.get(qi);
        // One loop per metric (each vectorises); `key` is the single formula.
        match self.opts.metric {
            Metric::InnerProduct => row.iter_mut().for_each(|v| *v = key(Metric::InnerProduct, *v, 0.0, 0.0)),
            m => {
                for (v, &nx) in row.iter_mut().zip(self.base_norms.slice(j0, j1)) {
                    *v = key(m, *v, nq, nx);
                }
            }
        }
    }
}

/// The ranking key of score `s` = ⟨q, x⟩ given the metric's norms of q and x (1/‖·‖ for cosine, ‖·‖² for L2).
#[inline(always)]
fn key(metric: Metric, s: f32, nq: f32, nx: f32) -> f32 {
    match metric {
        Metric::InnerProduct => -s,
        Metric::Cosine => clamp_rounding(1.0 - s * nq * nx),
        Metric::L2 => clamp_rounding(nq + nx - 2.0 * s),
    }
}

/// One candidate, ordered by (distance, index).
#[derive(Debug, Clone, Copy)]
struct Cand {
    key: f32,
    index: usize,
}

impl PartialEq for Cand {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Cand {}

impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cand {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_distance(self.key, other.key).then(self.index.cmp(&other.index))
    }
}

/// The k best candidates of one query seen so far: a buffer of candidates that beat the threshold when offered,
/// cut back to the k best (a linear-time selection) whenever it reaches 2k. Cheaper than a heap of k (an 8-probe
/// IVF search offers ~250 of each list's ~480 rows, 6% of the 20,000-procedure sweep went to heap sifts), and
/// the k best by (key, index) are the same set whatever the order of cuts.
struct TopK {
    k: usize,
    kept: Vec<Cand>,
    /// A key no candidate that can still enter reaches: the k-th best key at the last cut (or once k were kept),
    /// +∞ before (or the bound, when bounded). Never below the true k-th best key, so it only ever lets too many
    /// in, never too few.
    threshold: f32,
    /// Whether only keys below the initial threshold may enter, even before k are kept.
    bounded: bool,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            kept: Vec::with_capacity(k.saturating_mul(2).min(1 << 12) + 1),
            threshold: f32::INFINITY,
            bounded: false,
        }
    }

    /// A top k that only keys `< bound` enter (`bound` finite).
    fn below(k: usize, bound: f32) -> Self {
        TopK { threshold: bound, bounded: true, ..TopK::new(k) }
    }

    /// Whether a candidate must beat the threshold to enter.
    #[inline]
    fn full(&self) -> bool {
        self.bounded || self.kept.len() >= self.k
    }

    /// Offer `keys[c]` for candidate `j0 + c`, in increasing index order, so an equal key never displaces an
    /// earlier (smaller) index. `keep(j)` is asked only for candidates that would enter.
    #[inline]
    fn scan(&mut self, keys: &[f32], j0: usize, keep: impl Fn(usize) -> bool) {
        // Until k are kept (unless bounded), every candidate is offered.
        let mut c = 0;
        while !self.full() && c < keys.len() {
            self.offer(keys[c], j0 + c, &keep);
            c += 1;
        }
        // Then most candidates lose to the threshold: test blocks of 16 at once (a vectorisable reduction) and
        // look closer only at blocks with a winner. A NaN threshold (NaN among the best) lets everything through.
        const BLOCK: usize = 16;
        while c < keys.len() {
            let end = (c + BLOCK).min(keys.len());
            let t = self.threshold;
            if t.is_nan() || keys[c..end].iter().fold(false, |any, &d| any | (d < t)) {
                for (i, &d) in keys[c..end].iter().enumerate() {
                    self.offer(d, j0 + c + i, &keep);
                }
            }
            c = end;
        }
    }

    /// Offer one candidate; indices must increase from one offer to the next (a candidate whose key equals the
    /// threshold then never enters).
    #[inline]
    fn offer(&mut self, key: f32, index: usize, keep: &impl Fn(usize) -> bool) {
        // `<` is false for a NaN key: once k are kept, a NaN (last in the order) cannot be among the best.
        if self.full() && !(key < self.threshold || self.threshold.is_nan()) {
            return;
        }
        if !keep(index) {
            return;
        }
        self.kept.push(Cand { key, index });
        if self.kept.len() == self.k {
            // The first k: the threshold is their largest.
            self.threshold = self.largest_key();
        } else if self.kept.len() >= self.k.saturating_mul(2) {
            self.cut();
        }
    }

    /// Keep the k best, and make their largest key the threshold.
    fn cut(&mut self) {
        if self.k == 0 {
            self.kept.clear();
        } else if self.kept.len() > self.k {
            self.kept.select_nth_unstable(self.k - 1);
            self.kept.truncate(self.k);
            self.threshold = self.largest_key();
        }
    }

    /// The key of the last kept candidate in the (key, index) order.
    fn largest_key(&self) -> f32 {
        self.kept.iter().max().map_or(f32::INFINITY, |c| c.key)
    }

    /// The k best, in no particular order.
    fn into_best(mut self) -> Vec<Cand> {
        self.cut();
        self.kept
    }
}

/// Order by distance, then index (total order, NaN last).
pub fn cmp_neighbor(a: &Neighbor, b: &Neighbor) -> std::cmp::Ordering {
    cmp_distance(a.distance, b.distance).then(a.index.cmp(&b.index))
}

/// A total order on distances: IEEE order where it is defined (so −0 ties with +0), NaN of either sign after
/// everything (`total_cmp` alone would put a negative NaN first).
fn cmp_distance(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) if a == b => Ordering::Equal,
        (false, false) => a.total_cmp(&b),
        (a_nan, b_nan) => a_nan.cmp(&b_nan),
    }
}

/// Brute-force reference: every distance by [`distance`], fully sorted. For tests and cross-checks only.
pub fn knn_brute_force(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    opts: KnnOptions,
    filter: Option<Filter<'_>>,
) -> Vec<Vec<Neighbor>> {
    if dim == 0 {
        return Vec::new();
    }
    queries
        .chunks(dim)
        .enumerate()
        .map(|(qi, q)| {
            let mut all: Vec<Neighbor> = base
                .chunks(dim)
                .enumerate()
                .filter(|(j, _)| filter.is_none_or(|f| f(qi, *j)))
                .map(|(j, x)| Neighbor { index: j, distance: distance(q, x, opts.metric) })
                .collect();
            all.sort_by(cmp_neighbor);
            all.truncate(opts.k);
            all
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_example_all_metrics() {
        let base = [1.0, 0.0, 0.0, 1.0, 2.0, 2.0, -1.0, 0.0];
        let q = [1.0, 0.1];
        let ip = knn(&base, &q, 2, KnnOptions { k: 2, metric: Metric::InnerProduct }, None);
        assert_eq!(ip[0].iter().map(|n| n.index).collect::<Vec<_>>(), [2, 0]);
        let cos = knn(&base, &q, 2, KnnOptions { k: 4, metric: Metric::Cosine }, None);
        assert_eq!(cos[0].iter().map(|n| n.index).collect::<Vec<_>>(), [0, 2, 1, 3]);
        let l2 = knn(&base, &q, 2, KnnOptions { k: 1, metric: Metric::L2 }, None);
        assert_eq!(l2[0][0].index, 0);
        assert!((l2[0][0].distance - 0.1).abs() < 1e-6);
    }

    #[test]
    fn l2_distance_to_itself_is_exactly_zero() {
        // ‖q‖² + ‖x‖² − 2⟨q, x⟩ alone would leave rounding noise here; the final distances are recomputed.
        let base: Vec<f32> = (0..64 * 3).map(|i| ((i * 37) % 101) as f32 / 7.3 - 6.0).collect();
        let r = knn(&base, &base, 64, KnnOptions { k: 1, metric: Metric::L2 }, None);
        for (i, n) in r.iter().enumerate() {
            assert_eq!((n[0].index, n[0].distance), (i, 0.0));
        }
    }

    #[test]
    fn cosine_distance_of_parallel_vectors_is_never_negative() {
        // 1 − cos rounds below zero for some parallel pairs; the reported distance is clamped at 0.
        let base: Vec<f32> = (0..200 * 7).map(|i| ((i * 53) % 97) as f32 / 9.1 - 5.0).collect();
        let scaled: Vec<f32> = base.iter().map(|x| x * 3.0).collect();
        let r = knn(&base, &scaled, 7, KnnOptions { k: 1, metric: Metric::Cosine }, None);
        for (i, n) in r.iter().flatten().enumerate() {
            assert!(n.distance >= 0.0 && n.distance < 1e-6, "{n:?}");
            let d = distance(&base[i * 7..(i + 1) * 7], &scaled[i * 7..(i + 1) * 7], Metric::Cosine);
            assert!((0.0..1e-6).contains(&d), "row {i}: {d}");
        }
    }

    #[test]
    fn empty_inputs() {
        let o = KnnOptions { k: 3, metric: Metric::L2 };
        assert!(knn(&[], &[], 4, o, None).is_empty());
        assert_eq!(knn(&[], &[1.0, 2.0], 2, o, None), vec![Vec::<Neighbor>::new()]);
        assert_eq!(knn(&[1.0, 2.0], &[1.0, 2.0], 2, KnnOptions { k: 0, ..o }, None), vec![Vec::<Neighbor>::new()]);
    }

    #[test]
    fn bounded_keys_are_the_unbounded_keys_below_the_bound() {
        // Small integers: many tied keys, so a bound equal to a key must exclude every candidate at it.
        let (dim, nb, nq) = (6, 300, 7);
        let val = |i: usize, salt: usize| ((i.wrapping_mul(2_654_435_761) + salt) >> 7) as f32 % 7.0 - 3.0;
        let base: Vec<f32> = (0..nb * dim).map(|i| val(i, 1)).collect();
        let queries: Vec<f32> = (0..nq * dim).map(|i| val(i, 99)).collect();
        let keep = |q: usize, j: usize| !(q + j).is_multiple_of(5);
        let filter: Filter<'_> = &keep;
        for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
            for screening in [Screening::Off, Screening::On] {
                for base_tile in [16, 2048] {
                    let tiles = TileConfig { base_tile, screening, ..TileConfig::default() };
                    let every = KnnOptions { k: nb, metric };
                    let all = search(&base, &queries, dim, every, Some(filter), None, &tiles, false);
                    for k in [1, 5, 40] {
                        for rank in [0, 3, 20, 100, nb] {
                            let mut below: Vec<f32> =
                                all.iter().map(|l| l.get(rank).map_or(f32::INFINITY, |n| n.distance)).collect();
                            below[nq - 1] = f32::NAN; // bounds nothing
                            let opts = KnnOptions { k, metric };
                            let got = search(&base, &queries, dim, opts, Some(filter), Some(&below), &tiles, false);
                            for (qi, (got, all)) in got.iter().zip(&all).enumerate() {
                                let bound = below[qi];
                                let want: Vec<Neighbor> = all
                                    .iter()
                                    .filter(|n| !bound.is_finite() || n.distance < bound)
                                    .take(k)
                                    .copied()
                                    .collect();
                                assert_eq!(got, &want, "{metric:?} {screening:?} tile {base_tile} k={k} rank {rank}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn nan_rows_rank_last() {
        let base = [f32::NAN, 0.0, 1.0, 0.0, 0.0, 1.0];
        let r = knn(&base, &[1.0, 0.0], 2, KnnOptions { k: 3, metric: Metric::L2 }, None);
        assert_eq!(r[0].iter().map(|n| n.index).collect::<Vec<_>>(), [1, 2, 0]);
        let r = knn(&base, &[1.0, 0.0], 2, KnnOptions { k: 2, metric: Metric::L2 }, None);
        assert_eq!(r[0].iter().map(|n| n.index).collect::<Vec<_>>(), [1, 2]);
    }
}
