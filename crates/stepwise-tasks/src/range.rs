//! Exact range search over a catalog: every item within a distance of any of a few query items, as a full scan
//! would find it, without scanning the catalog.
//!
//! Knob 2's widened search ([`crate::questions`]) asks, per question, for every item within m_d + s_d of the
//! question's items — a small ball (a few hundred items), but a full scan computes the distance of every one of
//! ~230,000 items at 20,000 procedures, and a suite asks it tens of thousands of times: a full scan dominated
//! the sweep's time (docs/performance.md).
//!
//! How: distances in 480 dimensions do not prune by the triangle inequality (every list's radius exceeds the
//! range), but their top principal directions carry most of the spread. The index keeps P, an orthonormal basis of
//! the catalog's top `PROJ` principal directions (subspace iteration on a sample's covariance), every item's
//! coordinates Px, and the k-means lists of [`crate::ivf`] in that space (centroid and radius). Since
//! ‖q − x‖ ≥ ‖P(q − x)‖, a list whose projected ball is beyond the range, then an item whose projected distance
//! is, cannot hold a result (items are screened a whole list at a time per query, 16 to a vector); the rest get
//! the catalog's own distance and the same test as the full scan. Cosine (1 − ⟨q, x⟩) and inner product (−⟨q, x⟩)
//! use ⟨q, x⟩ = (‖q‖² + ‖x‖² − ‖q − x‖²) / 2. Every bound is lowered by the worst-case f32 rounding of what it is
//! compared with (the projected coordinates, √PROJ·γ·(‖q‖ + ‖x‖); the exact distance, relative (dim + 4)·2⁻²⁴,
//! plus its dot product's γ·‖q‖·‖x‖), so a skipped item's f32 distance is provably beyond the range: the result
//! is the full scan's, item for item and bit for bit. The basis only decides how much is skipped, never what is
//! found.
//!
//! A search may also confine each query to some of the lists (`only`): with IVF neighbours, knob 2 widens each
//! query over the lists its neighbour search probed ([`crate::neighbors::NeighborTable::probed_lists`]).
//!
//! Widened searches share their query items: the 20,000-procedure sweep widens from 383,000 query items, 169,000
//! of them distinct (an image is a question item in several questions, tasks and knob-1 settings).
//! [`RangeIndex::within_cached`] keeps, per query item, its ball — every item within a bound of it, as `within`
//! finds them for that one query — and answers a search from the balls of its queries when they reach far
//! enough: the smallest distance to any query is the minimum over the balls, so the answer is `within`'s, item
//! for item and bit for bit, whatever the cache held before. A question generator may also defer its widened
//! searches ([`RangeIndex::within_kept`]) and have [`RangeIndex::fill_balls`] measure the balls of many questions
//! together, per list in matrix products, then make those questions again: the same balls, computed as products
//! instead of one pass over the lists' rows per ball.

// `!(bound > threshold)` on purpose throughout: a NaN bound must keep its row, never drop it.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use stepwise_features::Metric;
use stepwise_kernels::MatRef;
use stepwise_kernels::math::{
    BLOCK, SCREEN_STEP, block16_sq_distances, block16_sq_distances_screened, sq_distance_lanes,
};

use crate::catalog::Catalog;
use crate::negatives::Cand;

/// Principal directions kept.
const PROJ: usize = 64;
/// A ball is computed this much (relative) beyond the bound asked for, so a later search from the same item
/// with a slightly larger bound finds it (bounds asked from one item differ by a few percent in the
/// 20,000-procedure sweep; the slack chosen there is in docs/performance.md).
const BALL_SLACK: f32 = 0.01;
/// Rows of the covariance sample.
const SAMPLE: usize = 8192;
/// Subspace-iteration rounds.
const ROUNDS: usize = 6;

/// The catalog's items in projected coordinates, grouped by list, with the bounds of [`RangeIndex::within`].
pub struct RangeIndex {
    /// Projected dimensions (min(PROJ, dim)).
    p: usize,
    /// Every item's coordinates Px (`p` per item, by item).
    proj: Vec<f32>,
    /// Items in list order, and where each list starts in it (`lists + 1` entries).
    order: Vec<u32>,
    starts: Vec<usize>,
    /// Projected coordinates in list order, in blocks of [`BLOCK`] items, dimension-major: coordinate `d` of
    /// `order[i]` at `blocks[(i / BLOCK · p + d) · BLOCK + i % BLOCK]` (the last block padded with zeros). A
    /// list's screen reads them contiguously, one vector lane per item (indexed by item instead, the sweep was
    /// slower).
    blocks: Vec<f32>,
    /// The first min([`SCREEN_STEP`], p) coordinates of `blocks` apart, in the same layout: what a knob-3
    /// screen reads of most blocks ([`DistanceScreen::unscreened`]).
    heads: Vec<f32>,
    /// ‖x‖ of `order[i]`.
    norms: Vec<f64>,
    /// Where item `x` sits in `order` (queries are items too).
    position: Vec<u32>,
    /// Per list: projected centroid (`p` values, f64), projected radius, largest ‖x‖.
    centres: Vec<f64>,
    radii: Vec<f64>,
    max_norms: Vec<f64>,
    /// The largest ‖x‖ of the catalog.
    max_norm: f64,
    /// Per catalog item: its ball, once a cached search asked for it ([`RangeIndex::within_cached`]).
    balls: Vec<Mutex<Option<Arc<Ball>>>>,
}

/// Every item within `bound` of one query item over `lists` (its own list numbers, or the whole catalog when
/// `None`), as [`RangeIndex::within`] finds them for that query alone: sorted by (distance, item), no NaN
/// distances.
struct Ball {
    lists: Option<Vec<u32>>,
    bound: f32,
    items: Vec<Cand>,
}

impl Ball {
    /// Whether the ball answers a search to `bound` over `lists` (one entry, or the whole catalog).
    fn serves(&self, bound: f32, lists: Option<&[Vec<u32>]>) -> bool {
        let same_lists = match (&self.lists, lists) {
            (None, None) => true,
            (Some(a), Some(l)) => l.first() == Some(a),
            _ => false,
        };
        same_lists && self.bound >= bound
    }
}

/// How far a ball asked for `bound` is measured ([`BALL_SLACK`] beyond it); NaN for a bound of −∞ or NaN.
fn ball_reach(bound: f32) -> f32 {
    bound + BALL_SLACK * bound.abs()
}

/// ‖v‖, summed in f64.
fn norm64(v: &[f32]) -> f64 {
    v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt()
}

/// Relative rounding of the catalog's f32 distance over `dim` coordinates (module docs): (dim + 4)·2⁻²⁴.
fn distance_rounding(dim: usize) -> f64 {
    (dim as f64 + 4.0) * f64::powi(2.0, -24)
}

impl RangeIndex {
    /// Index `cat` over the lists `members` (a partition of its items, e.g. k-means lists).
    pub fn new(cat: &Catalog, members: Vec<Vec<u32>>) -> RangeIndex {
        let (dim, n) = (cat.dim, cat.len());
        let p = PROJ.min(dim);
        let basis = principal_basis(cat, p);
        let order: Vec<u32> = members.iter().flatten().copied().collect();
        debug_assert_eq!(order.len(), n);
        let mut starts = Vec::with_capacity(members.len() + 1);
        starts.push(0);
        for list in &members {
            starts.push(starts.last().copied().unwrap_or(0) + list.len());
        }
        // Every item projected in one product, straight from the catalog's rows.
        let mut proj = vec![0f32; n * p];
        if n > 0 && p > 0 {
            let a = MatRef::row_major(&cat.data, n, dim);
            let b = MatRef::row_major(&basis, p, dim).t();
            stepwise_kernels::gemm(a, b, &mut proj, false, true).expect("range: projection shapes match");
        }
        let norms: Vec<f64> = cat.data.chunks(dim.max(1)).map(norm64).collect();
        let lists = members.len();
        let mut centres = vec![0f64; lists * p];
        let mut radii = vec![0f64; lists];
        let mut max_norms = vec![0f64; lists];
        for (c, list) in members.iter().enumerate() {
            let centre = &mut centres[c * p..(c + 1) * p];
            for &x in list {
                let x = x as usize;
                for (m, &v) in centre.iter_mut().zip(&proj[x * p..(x + 1) * p]) {
                    *m += v as f64;
                }
                max_norms[c] = max_norms[c].max(norms[x]);
            }
            let count = list.len().max(1) as f64;
            centre.iter_mut().for_each(|m| *m /= count);
            for &x in list {
                let x = x as usize;
                let d = proj[x * p..(x + 1) * p].iter().zip(centre.iter()).map(|(&v, &m)| (v as f64 - m).powi(2));
                radii[c] = radii[c].max(d.sum::<f64>().sqrt());
            }
        }
        // The coordinates and norms in list order (the projection above reads the catalog's rows in place).
        let mut position = vec![0u32; n];
        let mut blocks = vec![0f32; n.div_ceil(BLOCK) * BLOCK * p];
        for (i, &x) in order.iter().enumerate() {
            position[x as usize] = i as u32;
            for (d, &v) in proj[x as usize * p..(x as usize + 1) * p].iter().enumerate() {
                blocks[(i / BLOCK * p + d) * BLOCK + i % BLOCK] = v;
            }
        }
        let h = SCREEN_STEP.min(p);
        let heads = blocks.chunks(p.max(1) * BLOCK).flat_map(|b| &b[..h * BLOCK]).copied().collect();
        // Over every item, listed or not (a screen from a vector reaches any item).
        let max_norm = norms.iter().copied().fold(0f64, f64::max);
        let norms = order.iter().map(|&x| norms[x as usize]).collect();
        let balls = (0..n).map(|_| Mutex::new(None)).collect();
        RangeIndex {
            p,
            proj,
            order,
            starts,
            blocks,
            heads,
            norms,
            position,
            centres,
            radii,
            max_norms,
            max_norm,
            balls,
        }
    }

    /// The lists a search confined to `only` reaches ([`RangeIndex::within`]): those of any query, in increasing
    /// order; every list without `only`.
    fn reached_lists(&self, only: Option<&[Vec<u32>]>) -> Vec<usize> {
        let lists = self.starts.len() - 1;
        match only {
            Some(only) => {
                let mut all: Vec<usize> = only.iter().flatten().map(|&c| c as usize).filter(|&c| c < lists).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
            None => (0..lists).collect(),
        }
    }

    /// The projected coordinates of item `x`.
    fn coords(&self, x: u32) -> &[f32] {
        let x = x as usize;
        &self.proj[x * self.p..(x + 1) * self.p]
    }

    /// Every item `x` of `cat` whose smallest distance to a query `q` it may be measured from (`x ≠ q`, no shared
    /// procedure) lies in `(above, bound]`, at that distance, sorted by (distance, item): exactly what a scan of
    /// the whole catalog computes — or, with `only` (each query's list numbers, sorted, one entry per query), a
    /// scan in which each query reaches the items of its own lists only.
    pub fn within(
        &self,
        cat: &Catalog,
        queries: &[u32],
        above: f32,
        bound: f32,
        only: Option<&[Vec<u32>]>,
    ) -> Vec<Cand> {
        let p = self.p;
        // Relative rounding of an f32 distance of `dim` terms (module docs), and of a projected coordinate.
        let rel = distance_rounding(cat.dim);
        let coord_err = (p as f64).sqrt() * rel;
        let qs: Vec<Query> = queries
            .iter()
            .map(|&q| {
                let i = self.position[q as usize] as usize;
                Query { item: q, coords: self.coords(q), norm: self.norms[i] }
            })
            .collect();
        let bound64 = bound as f64;
        let target = screen_target(bound64, rel);
        // A lower bound on the catalog's f32 distance from one on the projected distance `pd` (module docs).
        let beyond = |pd: f64, nq: f64, nx: f64| -> bool {
            let l2 = (pd - coord_err * (nq + nx)).max(0.0) / (1.0 + 1e-5);
            beyond_bound(cat.metric, l2, nq, nx, rel, bound64)
        };
        let mut out = Vec::new();
        let (mut d2, mut screen) = (Vec::new(), vec![0f32; qs.len()]);
        let reaches = |qi: usize, c: usize| reaches(only, qi, c as u32);
        for c in self.reached_lists(only) {
            let (a, b) = (self.starts[c], self.starts[c + 1]);
            if a == b {
                continue;
            }
            let centre = &self.centres[c * p..(c + 1) * p];
            let reachable = qs.iter().enumerate().filter(|&(qi, _)| reaches(qi, c)).any(|(_, q)| {
                let d = q.coords.iter().zip(centre).map(|(&v, &m)| (v as f64 - m).powi(2)).sum::<f64>().sqrt();
                // The list's items are within `radii[c]` of the centre (projected), so at least d − r from q.
                let pd = d - self.radii[c];
                // With cosine or inner product the bound falls as ‖x‖ grows: take the list's largest.
                !beyond(pd.max(0.0), q.norm, self.max_norms[c])
            });
            if !reachable {
                continue;
            }
            // The screen: every query's squared projected distance to the list's items (whole blocks), against
            // the square beyond which no item of the list can be in range.
            let (first, last) = (a / BLOCK, b.div_ceil(BLOCK));
            let width = (last - first) * BLOCK;
            d2.clear();
            d2.resize(qs.len() * width, 0f32);
            for (qi, ((q, t), d2)) in qs.iter().zip(&mut screen).zip(d2.chunks_exact_mut(width)).enumerate() {
                if reaches(qi, c) {
                    let q_err = coord_err * q.norm;
                    *t = screen_threshold(cat.metric, p, q.norm, self.max_norms[c], rel, coord_err, q_err, target);
                    block16_sq_distances(&self.blocks[first * BLOCK * p..last * BLOCK * p], q.coords, d2);
                } else {
                    // Every item of the list is skipped for this query (its zero distances exceed −1).
                    *t = -1.0;
                }
            }
            for i in a..b {
                let x = self.order[i];
                let mut best = f32::INFINITY;
                for (qi, q) in qs.iter().enumerate() {
                    // `>`: a NaN distance or threshold keeps the pair.
                    if x == q.item || d2[qi * width + i - first * BLOCK] > screen[qi] {
                        continue;
                    }
                    if !cat.share_owner(q.item, x) {
                        best = best.min(cat.distance(q.item, x));
                    }
                }
                if best > above && best <= bound {
                    out.push(Cand { item: x, dist: best });
                }
            }
        }
        out.sort_unstable_by(Cand::cmp_nearest);
        out
    }

    /// A screen of the catalog's distances ([`Catalog::distance_to`]) from `centroid`, the centroid of `items`
    /// ([`Catalog::centroid`]; knob 3's question), to its items against `bound`: [`DistanceScreen::beyond`] proves
    /// that an item's distance is not within `bound` (above it, or NaN) from its projected coordinates, without
    /// reading its row — `within`'s
    /// bound (module docs) for a query that is not an item. Items it does not rule out may be beyond too. Any
    /// vector may be passed as `centroid` (the screen stays proven; it only rules out less the further the vector
    /// is from the items' centroid).
    pub fn screen_centroid(&self, cat: &Catalog, items: &[u32], centroid: &[f32], bound: f32) -> DistanceScreen<'_> {
        let (p, dim) = (self.p, cat.dim);
        let rel = distance_rounding(dim);
        let coord_err = (p as f64).sqrt() * rel;
        let items: Vec<u32> = items.iter().copied().filter(|&i| (i as usize) < self.position.len()).collect();
        let k = items.len().max(1) as f64;
        // The centroid's coordinates from the items' own (projecting is linear: P of the rows' mean m is the mean
        // of their Px), scaled by σ as the centroid c is (cosine re-normalises the mean): σ·mean(Px̃), 64 sums
        // instead of a 64 × dim product. It is within σ·coord_err·mean‖x‖ (the items' coordinates' rounding) plus
        // ‖P(σm − c)‖ ≤ (1 + 1e-5)·‖σm − c‖ (measured here) plus its own rounding to f32 of P·c.
        let mut mean = vec![0f64; dim];
        let mut coords = vec![0f64; p];
        let mut mean_norm = 0f64;
        for &i in &items {
            let row = cat.row(i);
            mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v as f64);
            coords.iter_mut().zip(self.coords(i)).for_each(|(m, &v)| *m += v as f64);
            mean_norm += norm64(row);
        }
        mean.iter_mut().chain(coords.iter_mut()).for_each(|m| *m /= k);
        mean_norm /= k;
        let nc = norm64(centroid);
        let nm = mean.iter().map(|m| m * m).sum::<f64>().sqrt();
        let sigma = if cat.metric == Metric::Cosine && nm > 0.0 { nc / nm } else { 1.0 };
        let off = mean.iter().zip(centroid).map(|(&m, &v)| (sigma * m - v as f64).powi(2)).sum::<f64>().sqrt();
        let coords: Vec<f32> = coords.iter().map(|&v| (sigma * v) as f32).collect();
        let n_coords = norm64(&coords);
        // The f64 sums' own rounding (~1e-15 relative) is covered by the last two terms' slack.
        let q_err = (sigma * coord_err * mean_norm + off * (1.0 + 1e-5) + f64::powi(2.0, -24) * n_coords)
            * (1.0 + 1e-6)
            + 1e-12 * (nc + sigma * mean_norm);
        // A bound of −∞ rules nothing out (an inner product overflowing to −∞ is within it), nor does a vector of
        // another dimension.
        let t2 = if bound == f32::NEG_INFINITY || centroid.len() != dim {
            f32::NAN
        } else {
            let target = screen_target(bound as f64, rel);
            screen_threshold(cat.metric, p, nc, self.max_norm, rel, coord_err, q_err, target)
        };
        DistanceScreen { index: self, coords, t2 }
    }

    /// The distance at which [`RangeIndex::within`] (same arguments) returns item `x`, when it returns it: its
    /// smallest catalog distance to a query that reaches its list (`x ≠ q`, no shared procedure), kept when in
    /// `(above, bound]` — `within`'s measure of one item, without the search.
    pub fn within_distance(
        &self,
        cat: &Catalog,
        queries: &[u32],
        above: f32,
        bound: f32,
        only: Option<&[Vec<u32>]>,
        x: u32,
    ) -> Option<f32> {
        let i = *self.position.get(x as usize)? as usize;
        // The list holding position i: the last one starting at or before it (empty lists start where the next
        // one does, so they come first).
        let c = self.starts.partition_point(|&s| s <= i).checked_sub(1)? as u32;
        let (mut best, mut reached) = (f32::INFINITY, false);
        for (qi, &q) in queries.iter().enumerate() {
            let reaches = reaches(only, qi, c);
            // A list no query reaches is not searched; an item of a searched list that no query may measure is at
            // +∞ (kept for an infinite bound).
            reached |= reaches;
            if reaches && x != q && !cat.share_owner(q, x) {
                best = best.min(cat.distance(q, x));
            }
        }
        (reached && best > above && best <= bound).then_some(best)
    }

    /// [`RangeIndex::within`], answered from per-query balls kept across calls (module docs): the same result,
    /// item for item and bit for bit. Safe to call from many threads. Each item keeps one ball, recomputed when a
    /// search from it reaches further or over other lists (in a suite an item's lists are its IVF probes, always
    /// the same). `only` as in `within`. A bound of +∞ keeps every item of the query's lists in its ball.
    pub fn within_cached(
        &self,
        cat: &Catalog,
        queries: &[u32],
        above: f32,
        bound: f32,
        only: Option<&[Vec<u32>]>,
    ) -> Vec<Cand> {
        let mut balls = Vec::with_capacity(queries.len());
        for (qi, &q) in queries.iter().enumerate() {
            let lists = match only {
                None => None,
                // A query without an entry in `only` reaches nothing (as in `within`).
                Some(only) => match only.get(qi) {
                    Some(lists) => Some(std::slice::from_ref(lists)),
                    None => continue,
                },
            };
            balls.push(self.ball(cat, q, bound, lists));
        }
        merge_balls(&balls, above, bound)
    }

    /// [`RangeIndex::within_cached`] with per-query lists, when every query's ball is kept already and reaches
    /// `bound`; otherwise `None`, and the balls it lacks are appended to `missing` for
    /// [`RangeIndex::fill_balls`] (a question's widened search deferred until the balls of many are measured
    /// together).
    pub fn within_kept(
        &self,
        queries: &[u32],
        above: f32,
        bound: f32,
        only: &[Vec<u32>],
        missing: &mut Vec<BallRequest>,
    ) -> Option<Vec<Cand>> {
        let mut balls = Vec::with_capacity(queries.len());
        let mut complete = true;
        // A query without an entry in `only` reaches nothing (as in `within`).
        for (&q, lists) in queries.iter().zip(only) {
            match self.kept_ball(q, bound, Some(std::slice::from_ref(lists))) {
                Some(ball) => balls.push(ball),
                None => {
                    complete = false;
                    missing.push(BallRequest { item: q, bound, lists: lists.clone() });
                }
            }
        }
        complete.then(|| merge_balls(&balls, above, bound))
    }

    /// Measure and keep the balls of `requests` together (a little beyond each bound, as [`RangeIndex::within_cached`]
    /// keeps them): per list, one matrix product of the items asking for it against its members screens every
    /// pair with a proven lower bound on its distance (no pair in range is dropped), and the pairs left get the
    /// catalog's own distance, the one `within` measures: each ball is `within`'s for its item, item for item and
    /// bit for bit. Products per list (tiles of 256 asking items) instead of one memory-bound pass over the lists'
    /// rows per ball (a large sweep asks for a ball per item, each over its 8 probed lists of a few hundred items).
    /// Requests with a NaN bound or reach, for items outside the catalog, or whose ball is kept already, are left
    /// to `within_cached`.
    pub fn fill_balls(&self, cat: &Catalog, mut requests: Vec<BallRequest>) {
        // A NaN reach (a bound of NaN or −∞) finds nothing and would never be reused: `ball` does not keep it
        // either.
        requests.retain(|r| !ball_reach(r.bound).is_nan() && (r.item as usize) < self.position.len());
        // One ball per item (its lists are the same in every request: its probes), reaching the largest bound.
        requests.sort_unstable_by(|a, b| a.item.cmp(&b.item).then(b.bound.total_cmp(&a.bound)));
        requests.dedup_by_key(|r| r.item);
        requests.retain(|r| self.kept_ball(r.item, r.bound, Some(std::slice::from_ref(&r.lists))).is_none());
        if requests.is_empty() {
            return;
        }
        let reach: Vec<f32> = requests.iter().map(|r| ball_reach(r.bound)).collect();
        let lists = self.starts.len() - 1;
        let mut by_list: Vec<Vec<u32>> = vec![Vec::new(); lists];
        for (ri, r) in requests.iter().enumerate() {
            let mut ls: Vec<u32> = r.lists.iter().copied().filter(|&c| (c as usize) < lists).collect();
            ls.sort_unstable();
            ls.dedup();
            for c in ls {
                by_list[c as usize].push(ri as u32);
            }
        }
        let found: Vec<Vec<(u32, Cand)>> = by_list
            .par_iter()
            .enumerate()
            .map(|(c, asking)| self.screen_list(cat, c, asking, &requests, &reach))
            .collect();
        let mut items: Vec<Vec<Cand>> = vec![Vec::new(); requests.len()];
        for (ri, cand) in found.into_iter().flatten() {
            items[ri as usize].push(cand);
        }
        for ((r, mut items), reach) in requests.into_iter().zip(items).zip(reach) {
            items.sort_unstable_by(Cand::cmp_nearest);
            let mut slot = self.balls[r.item as usize].lock().unwrap_or_else(|e| e.into_inner());
            // A ball another search kept meanwhile stays when it reaches as far over the same lists.
            if !slot.as_ref().is_some_and(|b| b.serves(reach, Some(std::slice::from_ref(&r.lists)))) {
                *slot = Some(Arc::new(Ball { lists: Some(r.lists), bound: reach, items }));
            }
        }
    }

    /// The ball members in list `c` of the requests `asking` (positions into `requests`), as (request, member).
    fn screen_list(
        &self,
        cat: &Catalog,
        c: usize,
        asking: &[u32],
        requests: &[BallRequest],
        reach: &[f32],
    ) -> Vec<(u32, Cand)> {
        let (a, b) = (self.starts[c], self.starts[c + 1]);
        let mut out = Vec::new();
        if a == b || asking.is_empty() {
            return out;
        }
        let dim = cat.dim;
        let members = &self.order[a..b];
        let mut base = Vec::with_capacity(members.len() * dim);
        for &x in members {
            base.extend_from_slice(cat.row(x));
        }
        // Relative rounding of the catalog's f32 distance (as in `within`), and of an f32 dot product of `dim`
        // terms in any order: |fl(⟨q, x⟩) − ⟨q, x⟩| ≤ γ·‖q‖·‖x‖, γ = dim·u / (1 − dim·u).
        let u = f64::powi(2.0, -24);
        let rel = distance_rounding(dim);
        let gamma = dim as f64 * u / (1.0 - dim as f64 * u) * (1.0 + 1e-3);
        const TILE: usize = 256;
        let mut qmat = Vec::with_capacity(TILE.min(asking.len()) * dim);
        let mut scores = vec![0f32; TILE.min(asking.len()) * members.len()];
        let norms = &self.norms[a..b];
        let norms_sq: Vec<f64> = norms.iter().map(|n| n * n).collect();
        // The members a request's screen leaves (positions in the list).
        let mut near: Vec<u32> = vec![0; members.len()];
        for tile in asking.chunks(TILE) {
            qmat.clear();
            for &ri in tile {
                qmat.extend_from_slice(cat.row(requests[ri as usize].item));
            }
            let scores = &mut scores[..tile.len() * members.len()];
            if dim > 0 {
                let qm = MatRef::row_major(&qmat, tile.len(), dim);
                let bm = MatRef::row_major(&base, members.len(), dim).t();
                stepwise_kernels::gemm(qm, bm, scores, false, false).expect("range: ball product shapes match");
            }
            for (&ri, row) in tile.iter().zip(scores.chunks_exact(members.len())) {
                let q = requests[ri as usize].item;
                let reach = reach[ri as usize];
                let nq = self.norms[self.position[q as usize] as usize];
                // ‖q − x‖² = ‖q‖² + ‖x‖² − 2⟨q, x⟩, less the product's rounding: `sq`, whose square root over
                // (1 + 1e-5) is a lower bound on the true distance. A NaN or infinite product bounds nothing: `sq`
                // is NaN or ±∞, which neither test rules out (−∞ is below any bound).
                let (nq_sq, gamma_q) = (nq * nq, 2.0 * gamma * nq);
                let sq = |s: f32, nx_sq: f64, nx: f64| nq_sq + nx_sq - 2.0 * s as f64 - gamma_q * nx;
                let pairs = row.iter().zip(&norms_sq).zip(norms).map(|((&s, &nx_sq), &nx)| (sq(s, nx_sq, nx), nx));
                let kept = match l2_sq_limit(cat.metric, reach as f64, rel) {
                    // L2 (the common case): one comparison per pair, without square roots.
                    Some(limit) => unscreened(pairs, &mut near, |v, _| l2_rules_out(v, limit)),
                    None => unscreened(pairs, &mut near, |v, nx| {
                        beyond_bound(cat.metric, v.max(0.0).sqrt() / (1.0 + 1e-5), nq, nx, rel, reach as f64)
                    }),
                };
                for &j in &near[..kept] {
                    let x = members[j as usize];
                    // As `within` measures one query: the item itself and items of its procedures are at +∞.
                    let best = if x == q || cat.share_owner(q, x) {
                        f32::INFINITY
                    } else {
                        f32::INFINITY.min(cat.distance(q, x))
                    };
                    // `within`'s test with `above` = −∞ (an overflowed inner product of −∞ is not in a ball).
                    if best > f32::NEG_INFINITY && best <= reach {
                        out.push((ri, Cand { item: x, dist: best }));
                    }
                }
            }
        }
        out
    }

    /// The ball of `q` kept for `lists` when it reaches `bound`.
    fn kept_ball(&self, q: u32, bound: f32, lists: Option<&[Vec<u32>]>) -> Option<Arc<Ball>> {
        let slot = self.balls.get(q as usize)?;
        let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().filter(|b| b.serves(bound, lists)).cloned()
    }

    /// The ball of `q` reaching at least `bound` (over `lists`, one entry, or the whole catalog), from the cache
    /// or computed (a little beyond `bound`: [`BALL_SLACK`]) and kept. The item's lock is held while its ball is
    /// computed, so two searches from one item compute it once.
    fn ball(&self, cat: &Catalog, q: u32, bound: f32, lists: Option<&[Vec<u32>]>) -> Arc<Ball> {
        let compute = |reach: f32| {
            let items = self.within(cat, &[q], f32::NEG_INFINITY, reach, lists);
            Arc::new(Ball { lists: lists.map(|l| l[0].clone()), bound: reach, items })
        };
        let Some(slot) = self.balls.get(q as usize) else {
            return compute(bound);
        };
        // A poisoned lock only means another search panicked: the ball in it is whole or absent.
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ball) = slot.as_ref().filter(|b| b.serves(bound, lists)) {
            return ball.clone();
        }
        let ball = compute(ball_reach(bound));
        // A NaN reach finds nothing and would never be reused: keep the ball that was there.
        if !ball.bound.is_nan() {
            *slot = Some(ball.clone());
        }
        ball
    }
}

/// [`RangeIndex::screen_centroid`]: the distances from one vector against one bound.
pub struct DistanceScreen<'a> {
    index: &'a RangeIndex,
    /// The vector's projected coordinates.
    coords: Vec<f32>,
    /// The squared projected distance beyond which an item is out of range ([`screen_threshold`]).
    t2: f32,
}

impl DistanceScreen<'_> {
    /// True when item `x`'s distance from the vector is provably not within the bound: above it, or NaN (false
    /// for items outside the catalog).
    pub fn beyond(&self, x: u32) -> bool {
        // `>`: a NaN distance or threshold rules nothing out.
        (x as usize) < self.index.position.len() && sq_distance_lanes(self.index.coords(x), &self.coords) > self.t2
    }

    /// The members of the lists a search confined to `only` reaches (each query's list numbers, as in
    /// [`RangeIndex::within`]; every list when `None`) that the screen does not rule out, in list order: every
    /// member whose distance may be within the bound is among them (as for
    /// [`DistanceScreen::beyond`]: a member left out is above the bound, or at a NaN distance). Screened a list
    /// at a time from the index's blocks, 16 items to a vector, a block left once its first 16 coordinates put
    /// all of its items beyond ([`block16_sq_distances_screened`]: in the 20,000-procedure sweep the screen
    /// leaves 0.2% of the 690 million members it reads).
    pub fn unscreened(&self, only: Option<&[Vec<u32>]>) -> Vec<u32> {
        let ix = self.index;
        let p = ix.p;
        let (mut out, mut d2) = (Vec::new(), Vec::new());
        for c in ix.reached_lists(only) {
            let (a, b) = (ix.starts[c], ix.starts[c + 1]);
            let (first, last) = (a / BLOCK, b.div_ceil(BLOCK));
            d2.clear();
            d2.resize((last - first) * BLOCK, 0f32);
            if self.coords.len() == p {
                let h = SCREEN_STEP.min(p);
                let blocks = &ix.blocks[first * BLOCK * p..last * BLOCK * p];
                let heads = &ix.heads[first * BLOCK * h..last * BLOCK * h];
                block16_sq_distances_screened(heads, blocks, &self.coords, self.t2, &mut d2);
            }
            // `>`: a NaN threshold rules nothing out.
            out.extend((a..b).filter(|&i| !(d2[i - first * BLOCK] > self.t2)).map(|i| ix.order[i]));
        }
        out
    }
}

/// A ball a deferred widened search needs ([`RangeIndex::within_kept`]): every item within `bound` of `item` over
/// `lists`.
#[derive(Debug, Clone)]
pub struct BallRequest {
    item: u32,
    bound: f32,
    lists: Vec<u32>,
}

/// Whether query `qi` of a search confined to `only` ([`RangeIndex::within`]) reaches list `c` (every list
/// without `only`; none for a query without an entry in it).
fn reaches(only: Option<&[Vec<u32>]>, qi: usize, c: u32) -> bool {
    only.is_none_or(|only| only.get(qi).is_some_and(|lists| lists.binary_search(&c).is_ok()))
}

/// The answer of a cached search from its queries' balls: each item at its smallest distance to any of them
/// (in query order with `f32::min`, as `within` takes it), kept when in `(above, bound]`.
fn merge_balls(balls: &[Arc<Ball>], above: f32, bound: f32) -> Vec<Cand> {
    // (item, query position, distance) of every ball member within `bound`.
    let mut found: Vec<(u32, u32, f32)> = Vec::new();
    for (qi, ball) in balls.iter().enumerate() {
        let end = ball.items.partition_point(|c| c.dist <= bound);
        found.extend(ball.items[..end].iter().map(|c| (c.item, qi as u32, c.dist)));
    }
    found.sort_unstable_by_key(|&(item, qi, _)| (item, qi));
    let mut out = Vec::new();
    for group in found.chunk_by(|a, b| a.0 == b.0) {
        let best = group.iter().fold(f32::INFINITY, |best, &(_, _, d)| best.min(d));
        if best > above && best <= bound {
            out.push(Cand { item: group[0].0, dist: best });
        }
    }
    out.sort_unstable_by(Cand::cmp_nearest);
    out
}

/// Whether a pair whose true L2 distance is at least `l2` (norms `nq`, `nx`) has a catalog distance beyond `bound`
/// under `metric`, after the f32 distance's rounding (`rel`, module docs); NaN (from NaN vectors) never is.
fn beyond_bound(metric: Metric, l2: f64, nq: f64, nx: f64, rel: f64, bound: f64) -> bool {
    if l2.is_nan() || (metric != Metric::L2 && overflows(nq, nx, rel)) {
        return false;
    }
    let tiny = underflow(rel);
    let lb = match metric {
        Metric::L2 => (l2 * l2 - tiny).max(0.0).sqrt(),
        Metric::Cosine => 1.0 - (nq * nq + nx * nx - l2 * l2) / 2.0 - rel * nq * nx - tiny,
        Metric::InnerProduct => -(nq * nq + nx * nx - l2 * l2) / 2.0 - rel * nq * nx - tiny,
    };
    lb - rel * lb.abs() > bound
}

/// For L2, a limit on [`RangeIndex::screen_list`]'s `sq` (the square of a lower bound on a pair's true distance,
/// before its 1 + 1e-5 allowance) above which a finite `sq` proves the pair beyond `bound` as [`beyond_bound`]
/// does, without a square root per pair: `beyond_bound`'s lower bound `lb` exceeds `target` ([`screen_target`])
/// when `sq / (1 + 1e-5)² − tiny > target²` (`tiny`: [`underflow`]); 1e-9 more covers the rounding of this limit
/// and of `beyond_bound`'s own arithmetic. `None` for other metrics and for a negative or non-finite bound (left
/// to `beyond_bound` pair by pair). Needs `rel` < 1, as `screen_target` does.
fn l2_sq_limit(metric: Metric, bound: f64, rel: f64) -> Option<f64> {
    if metric != Metric::L2 || !(bound >= 0.0 && bound.is_finite()) {
        return None;
    }
    let target = screen_target(bound, rel);
    Some((target * target + underflow(rel)) * (1.0 + 1e-5) * (1.0 + 1e-5) * (1.0 + 1e-9))
}

/// The positions of the `(sq, ‖x‖)` pairs that `rules_out` leaves, written to `near` (branch-free); how many.
fn unscreened(
    pairs: impl Iterator<Item = (f64, f64)>,
    near: &mut [u32],
    rules_out: impl Fn(f64, f64) -> bool,
) -> usize {
    let mut n = 0;
    for (j, (sq, nx)) in pairs.enumerate() {
        near[n] = j as u32;
        n += usize::from(!rules_out(sq, nx));
    }
    n
}

/// Whether `sq` rules its pair out under [`l2_sq_limit`]'s `limit` (NaN and +∞ rule nothing out).
fn l2_rules_out(sq: f64, limit: f64) -> bool {
    sq > limit && sq < f64::INFINITY
}

/// The absolute error products that underflow add to an f32 distance (each loses up to 2⁻¹⁵⁰; the relative
/// rounding `rel` = (dim + 4)·2⁻²⁴ does not cover them): (dim + 4)·2⁻¹⁴⁹, generously.
fn underflow(rel: f64) -> f64 {
    rel * f64::powi(2.0, -125)
}

/// Whether an f32 dot product of vectors with norms `nq` and `nx` may overflow in a partial sum (each is at most
/// ‖q‖·‖x‖ before rounding): then its rounding is unbounded (a finite product can come out infinite), and no
/// cosine or inner-product bound holds.
fn overflows(nq: f64, nx: f64, rel: f64) -> bool {
    !(nq * nx * (1.0 + rel) < f32::MAX as f64)
}

/// One query of [`RangeIndex::within`].
struct Query<'a> {
    item: u32,
    coords: &'a [f32],
    norm: f64,
}

/// A value `target` such that a lower bound `lb` on a pair's distance rules it out of `(−∞, bound]` after the f32
/// distance's rounding (`lb − rel·|lb| > bound`) when `lb > target`.
fn screen_target(bound: f64, rel: f64) -> f64 {
    if bound >= 0.0 { bound / (1.0 - rel) } else { bound / (1.0 + rel) }
}

/// The screen of [`RangeIndex::within`]: a value `t2` such that a pair of a query (norm `nq`, its projected
/// coordinates within `q_err` of the exact ones; an item's are within `coord_err·‖x‖`) and an item of a
/// list (norm at most `max_nx`) whose f32 squared projected distance ([`block16_sq_distances`] over `p`
/// coordinates) exceeds `t2` has a lower bound above `target` on its distance, hence is out of range (`rel`: the
/// exact distance's relative rounding, as in `within`); −1 when every pair is, +∞ (or NaN) when none can be
/// ruled out. The item's norm is taken at the list's largest, which
/// only lowers the bound (module docs: the projected coordinates' rounding grows with it, and with cosine or
/// inner product the bound falls as it grows).
#[allow(clippy::too_many_arguments)]
fn screen_threshold(
    metric: Metric,
    p: usize,
    nq: f64,
    max_nx: f64,
    rel: f64,
    coord_err: f64,
    q_err: f64,
    target: f64,
) -> f32 {
    // The largest true distance ‖q − x‖ a pair in range may have: beyond it, the metric's lower bound exceeds
    // `target` (for cosine and inner product through ⟨q, x⟩ = (‖q‖² + ‖x‖² − ‖q − x‖²) / 2).
    // (Underflowing products: `underflow`, as in `beyond_bound`; overflowing ones bound nothing.)
    let tiny = underflow(rel);
    let l2_max = match metric {
        Metric::L2 if target < 0.0 => return -1.0,
        Metric::L2 => (target * target + tiny).sqrt(),
        _ if overflows(nq, max_nx, rel) => return f32::NAN,
        Metric::Cosine | Metric::InnerProduct => {
            let c0 = if metric == Metric::Cosine { 1.0 } else { 0.0 };
            let r = 2.0 * (target - c0 + rel * nq * max_nx + tiny) + nq * nq + max_nx * max_nx;
            if r < 0.0 {
                return -1.0;
            }
            r.sqrt()
        }
    };
    if l2_max < 0.0 {
        return -1.0;
    }
    // ‖q − x‖ ≥ (pd − q_err − coord_err·‖x‖) / (1 + 1e-5) for the projected distance pd (module docs).
    let t = l2_max * (1.0 + 1e-5) + q_err + coord_err * max_nx;
    // The f32 sum of `p` squared f32 differences is within (p + 2)·2⁻²⁴ of the exact square (relative): allow
    // twice (p + 4)·2⁻²⁴, and four ulps for rounding `t2` to f32.
    let t2 = t * t * (1.0 + 2.0 * (p as f64 + 4.0) * f64::powi(2.0, -24)) * (1.0 + f64::powi(2.0, -22));
    t2 as f32
}

/// An orthonormal basis (`p × dim`, row-major) of the catalog's top `p` principal directions: subspace iteration
/// on the covariance of an evenly spaced sample of rows, orthonormalised in f64 (Gram–Schmidt, twice). Only its
/// orthonormality matters for exactness; how well it captures the spread decides the speed.
fn principal_basis(cat: &Catalog, p: usize) -> Vec<f32> {
    let (dim, n) = (cat.dim, cat.len());
    if p == 0 || n == 0 {
        return vec![0f32; p * dim];
    }
    let step = n.div_ceil(SAMPLE).max(1);
    let picks: Vec<u32> = (0..n as u32).step_by(step).collect();
    let mut mean = vec![0f64; dim];
    for &i in &picks {
        for (m, &v) in mean.iter_mut().zip(cat.row(i)) {
            *m += v as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= picks.len() as f64);
    let mut centred = Vec::with_capacity(picks.len() * dim);
    for &i in &picks {
        centred.extend(cat.row(i).iter().zip(&mean).map(|(&v, &m)| (v as f64 - m) as f32));
    }
    let x = MatRef::row_major(&centred, picks.len(), dim);
    let mut cov = vec![0f32; dim * dim];
    stepwise_kernels::gemm(x.t(), x, &mut cov, false, true).expect("range: covariance shapes match");
    // Start from fixed pseudo-random directions (columns of a dim × p matrix, stored as p rows of dim).
    let mut basis: Vec<f64> = (0..p * dim)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f64 / (1u64 << 24) as f64 - 0.5)
        .collect();
    orthonormalise(&mut basis, p, dim);
    let mut next = vec![0f32; p * dim];
    for _ in 0..ROUNDS {
        let b32: Vec<f32> = basis.iter().map(|&v| v as f32).collect();
        // next (p × dim) = basis (p × dim) · cov (dim × dim; symmetric).
        let a = MatRef::row_major(&b32, p, dim);
        stepwise_kernels::gemm(a, MatRef::row_major(&cov, dim, dim), &mut next, false, true)
            .expect("range: iteration shapes match");
        basis = next.iter().map(|&v| v as f64).collect();
        orthonormalise(&mut basis, p, dim);
    }
    basis.iter().map(|&v| v as f32).collect()
}

/// Modified Gram–Schmidt on the `p` rows of `m` (each `dim` long), run twice; a row that vanishes (rank below p)
/// is replaced by a unit vector orthogonal to the others when one exists, else zeroed (a zero row only weakens
/// the bound).
fn orthonormalise(m: &mut [f64], p: usize, dim: usize) {
    for _ in 0..2 {
        for r in 0..p {
            let (done, rest) = m.split_at_mut(r * dim);
            let row = &mut rest[..dim];
            for prev in done.chunks(dim) {
                let d: f64 = row.iter().zip(prev).map(|(a, b)| a * b).sum();
                row.iter_mut().zip(prev).for_each(|(a, b)| *a -= d * b);
            }
            let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 1e-9 {
                row.iter_mut().for_each(|v| *v /= norm);
            } else {
                row.iter_mut().for_each(|v| *v = 0.0);
            }
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
        Catalog { kind: ItemKind::Image, metric, dim, data, items, procs: Vec::new(), norms: Default::default() }
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
        out.sort_unstable_by(Cand::cmp_nearest);
        out
    }

    #[test]
    fn range_search_is_the_full_scan_for_every_metric_and_radius() {
        // 12 dimensions: the basis spans them all; 48: it keeps 32 of them.
        for (metric, dim) in
            [Metric::L2, Metric::Cosine, Metric::InnerProduct].into_iter().flat_map(|m| [(m, 12), (m, 48)])
        {
            let cat = catalog(900, dim, metric, 3);
            // Uneven lists, one empty, one holding a single item.
            let mut members: Vec<Vec<u32>> = vec![Vec::new(); 9];
            for x in 0..cat.len() as u32 {
                members[if x == 5 { 8 } else { (x as usize * 7 + x as usize / 50) % 7 }].push(x);
            }
            let index = RangeIndex::new(&cat, members.clone());
            for queries in [vec![0u32], vec![3, 400, 401], vec![10, 11, 12, 13, 600]] {
                let d: Vec<f32> = (0..cat.len() as u32).map(|x| cat.distance(queries[0], x)).collect();
                let mut sorted = d.clone();
                sorted.sort_by(f32::total_cmp);
                for &bound in &[sorted[1], sorted[20], sorted[300], sorted[899], f32::INFINITY, -1.0] {
                    let fast = index.within(&cat, &queries, 0.0, bound, None);
                    let slow = full_scan(&cat, &queries, 0.0, bound);
                    let bits = |v: &[Cand]| v.iter().map(|c| (c.item, c.dist.to_bits())).collect::<Vec<_>>();
                    assert_eq!(bits(&fast), bits(&slow), "{metric:?} dim {dim} {queries:?} bound {bound}");
                    // Each query confined to some lists: the full scan over the pairs it reaches.
                    let only: Vec<Vec<u32>> =
                        (0..queries.len()).map(|qi| vec![qi as u32 % 3, 4 + qi as u32, 8]).collect();
                    let some = index.within(&cat, &queries, 0.0, bound, Some(&only));
                    // Items of the lists some query reaches (at an infinite distance when none of those queries
                    // may measure it, as the full scan keeps them for an infinite bound).
                    let in_lists = |x: u32| only.iter().flatten().any(|&l| members[l as usize].contains(&x));
                    let mut reached: Vec<Cand> = (0..cat.len() as u32)
                        .filter(|&x| in_lists(x))
                        .filter_map(|x| {
                            let best = queries
                                .iter()
                                .zip(&only)
                                .filter(|(q, lists)| {
                                    **q != x
                                        && !cat.share_owner(**q, x)
                                        && lists.iter().any(|&l| members[l as usize].contains(&x))
                                })
                                .map(|(&q, _)| cat.distance(q, x))
                                .fold(f32::INFINITY, f32::min);
                            (best > 0.0 && best <= bound).then_some(Cand { item: x, dist: best })
                        })
                        .collect();
                    reached.sort_unstable_by(Cand::cmp_nearest);
                    assert_eq!(bits(&some), bits(&reached), "{metric:?} dim {dim} {queries:?} bound {bound} lists");
                    // One item measured as the search measures it: its distance when the search returns it.
                    for (only, found) in [(None, &fast), (Some(&only[..]), &some)] {
                        for x in 0..cat.len() as u32 + 1 {
                            let want = found.iter().find(|c| c.item == x).map(|c| c.dist.to_bits());
                            let got = index.within_distance(&cat, &queries, 0.0, bound, only, x).map(f32::to_bits);
                            assert_eq!(got, want, "{metric:?} dim {dim} {queries:?} bound {bound} item {x}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_distance_screen_rules_out_only_items_beyond_the_bound() {
        for (metric, dim) in [(Metric::L2, 48), (Metric::Cosine, 48), (Metric::InnerProduct, 48), (Metric::L2, 7)] {
            let cat = catalog(900, dim, metric, 5);
            let members: Vec<Vec<u32>> =
                (0..7).map(|l| (0..cat.len() as u32).filter(|x| (*x as usize * 3 + 2) % 7 == l).collect()).collect();
            let index = RangeIndex::new(&cat, members.clone());
            // Items beyond the finite bounds below the farthest, from the items' own centroids, and those ruled out.
            let (mut beyond_finite, mut ruled_out) = (0usize, 0usize);
            // Question centroids (of items of one cluster, and of several), a row itself, a NaN vector, and vectors
            // that are not the items' centroid (the screen stays proven, only weaker).
            let mut nan = cat.centroid(&[6, 12, 18]);
            nan[3] = f32::NAN;
            let vectors: Vec<(Vec<u32>, Vec<f32>)> = vec![
                (vec![6, 12, 18], cat.centroid(&[6, 12, 18])),
                (vec![1, 2, 3, 4], cat.centroid(&[1, 2, 3, 4])),
                (vec![11], cat.row(11).to_vec()),
                (vec![6, 12, 18], nan),
                (vec![1, 2, 3, 4], cat.centroid(&[6, 12, 18])),
                (vec![], cat.row(11).to_vec()),
                (vec![5, 5000], cat.centroid(&[5])),
            ];
            for (vi, (items, v)) in vectors.iter().enumerate() {
                let d: Vec<f32> = (0..cat.len() as u32).map(|x| cat.distance_to(v, x)).collect();
                let mut sorted = d.clone();
                sorted.sort_by(f32::total_cmp);
                // Bounds at items' own distances (ties must stay in), from the nearest to the farthest, and
                // beyond every item on either side.
                for bound in [
                    sorted[0],
                    sorted[1],
                    sorted[40],
                    sorted[450],
                    sorted[899],
                    f32::INFINITY,
                    -1e30,
                    f32::NEG_INFINITY,
                ] {
                    let screen = index.screen_centroid(&cat, items, v, bound);
                    let counted = vi < 3 && bound.is_finite() && bound > sorted[0] && bound < sorted[899];
                    // The members of some lists (in list order) or of all that the screen leaves: it drops only
                    // items beyond the bound, and the same ones as `beyond`, away from the threshold.
                    // Two queries' lists (a list beyond the index's, one shared): lists 1 and 4, in that order.
                    let only = [vec![4u32, 1], vec![99, 4]];
                    for only in [None, Some(&only[..])] {
                        let left = screen.unscreened(only);
                        let listed: Vec<u32> = match only {
                            Some(_) => [1, 4].iter().flat_map(|&l| members[l].iter()).copied().collect(),
                            None => members.iter().flatten().copied().collect(),
                        };
                        let kept: Vec<u32> = listed.iter().copied().filter(|x| left.contains(x)).collect();
                        assert_eq!(kept, left, "{metric:?} dim {dim}: the left items are listed members in order");
                        for &x in listed.iter().filter(|x| !left.contains(x)) {
                            let dx = d[x as usize];
                            assert!(dx > bound || dx.is_nan(), "{metric:?} dim {dim}: {x} at {dx} dropped, {bound}");
                        }
                        let agree = listed.iter().filter(|&&x| left.contains(&x) != screen.beyond(x)).count();
                        assert!(agree * 100 >= listed.len() * 99, "{metric:?} dim {dim}: {agree} of {}", listed.len());
                    }
                    for (x, &dx) in d.iter().enumerate() {
                        if screen.beyond(x as u32) {
                            assert!(
                                dx > bound || dx.is_nan(),
                                "{metric:?} dim {dim}: item {x} at {dx} ruled out beyond {bound}"
                            );
                            ruled_out += usize::from(counted);
                        }
                        beyond_finite += usize::from(counted && dx > bound);
                    }
                    assert!(!screen.beyond(cat.len() as u32), "an item outside the catalog is never ruled out");
                }
            }
            // The screen does work: items beyond the bounds are ruled out without their rows.
            assert!(ruled_out * 2 > beyond_finite, "{metric:?} dim {dim}: {ruled_out} of {beyond_finite} ruled out");
        }
    }

    #[test]
    fn the_squared_l2_limit_rules_out_only_what_beyond_bound_does() {
        // Bounds from 0 to large, dims small and large; `sq` swept across the limit in relative steps of 1e-12 up
        // to 1e-6: whatever the limit rules out beyond_bound rules out too, and the limit sits within 1e-8 above
        // beyond_bound's own boundary (it screens as much).
        let mut checked = 0;
        for dim in [7usize, 48, 480] {
            let rel = distance_rounding(dim);
            for bound in [0.0f64, 1e-30, 1e-6, 0.3, 1.0, 7.5, 1e6, f32::MAX as f64] {
                let limit = l2_sq_limit(Metric::L2, bound, rel).expect("a finite bound ≥ 0 has a limit");
                assert!(limit.is_finite() && limit > 0.0, "dim {dim} bound {bound}: limit {limit}");
                let beyond =
                    |sq: f64| beyond_bound(Metric::L2, sq.max(0.0).sqrt() / (1.0 + 1e-5), 1.0, 1.0, rel, bound);
                for step in 1..=6i32 {
                    for scale in [1e-12, 1e-9, 1e-6] {
                        let sq = limit * (1.0 + scale * step as f64);
                        assert!(l2_rules_out(sq, limit) && beyond(sq), "dim {dim} bound {bound} sq {sq}");
                        checked += 1;
                    }
                }
                assert!(!l2_rules_out(limit, limit), "dim {dim} bound {bound}");
                assert!(!beyond(limit * (1.0 - 1e-8)), "dim {dim} bound {bound}: limit too loose");
            }
            // Nothing without a limit's proof: NaN, +∞, −∞; no limit where beyond_bound decides pair by pair.
            for sq in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0] {
                assert!(!l2_rules_out(sq, 1.0), "sq {sq}");
            }
            for bound in [-1.0, f64::INFINITY, f64::NAN] {
                assert!(l2_sq_limit(Metric::L2, bound, rel).is_none());
            }
            assert!(l2_sq_limit(Metric::Cosine, 0.5, rel).is_none());
            assert!(l2_sq_limit(Metric::InnerProduct, 0.5, rel).is_none());
        }
        assert_eq!(checked, 3 * 8 * 6 * 3);
    }

    #[test]
    fn a_distance_screen_rules_out_no_dot_product_that_overflows() {
        // Two rows whose f32 inner product overflows in a partial sum (lanes 0 and 8 add to 3.5e38) although the
        // exact one is 2.5e38: the catalog's distance is −∞, within any bound, while the exact −2.5e38 is beyond
        // −3e38. The rows sit where the covariance sample (every second row here) does not reach, so the basis
        // stays full and the screen sharp. Found by a review; every pair must be kept.
        let dim = 16;
        let mut cat = catalog(2 * SAMPLE + 16, dim, Metric::InnerProduct, 2);
        let a = 1.75e38f32.sqrt();
        for (row, second) in [(1u32, 1e19f32), (3, -1e19)] {
            let r = row as usize * dim;
            cat.data[r..r + dim].fill(0.0);
            cat.data[r] = a;
            cat.data[r + 1] = second;
            cat.data[r + 8] = a;
        }
        let members = vec![(0..cat.len() as u32).collect::<Vec<_>>()];
        let index = RangeIndex::new(&cat, members);
        let c = cat.row(1).to_vec();
        assert_eq!(cat.distance_to(&c, 3), f32::NEG_INFINITY);
        for bound in [-3e38f32, -1e38, 0.0] {
            assert!(!index.screen_centroid(&cat, &[1], &c, bound).beyond(3), "bound {bound}");
        }
    }

    #[test]
    fn balls_measured_together_are_the_range_search_bit_for_bit() {
        for (metric, dim) in [(Metric::L2, 48), (Metric::Cosine, 12), (Metric::InnerProduct, 48), (Metric::L2, 7)] {
            let cat = catalog(900, dim, metric, 9);
            let members: Vec<Vec<u32>> =
                (0..7).map(|l| (0..cat.len() as u32).filter(|x| (*x as usize * 5 + 1) % 7 == l).collect()).collect();
            let bits = |v: &[Cand]| v.iter().map(|c| (c.item, c.dist.to_bits())).collect::<Vec<_>>();
            let d: Vec<f32> = (0..cat.len() as u32).map(|x| cat.distance(0, x)).collect();
            let mut sorted = d.clone();
            sorted.sort_by(f32::total_cmp);
            // Items on several lists (one list twice, one out of range), bounds from tiny to everything, +∞, a
            // negative one, and one item asked twice with different bounds.
            let asks: Vec<(u32, f32, Vec<u32>)> = vec![
                (0, sorted[40], vec![0, 3]),
                (0, sorted[300], vec![0, 3]),
                (7, sorted[2], vec![1]),
                (400, sorted[120], vec![2, 2, 5, 6]),
                (401, f32::INFINITY, vec![4]),
                (13, -1.0, vec![0, 1, 2, 3, 4, 5, 6]),
                (600, sorted[899], vec![6, 99]),
                (899, sorted[60], vec![0, 1, 2, 3, 4, 5, 6]),
            ];
            let index = RangeIndex::new(&cat, members.clone());
            let mut missing = Vec::new();
            for (q, bound, lists) in &asks {
                let only = [lists.clone()];
                assert!(index.within_kept(&[*q], f32::NEG_INFINITY, *bound, &only, &mut missing).is_none());
            }
            assert_eq!(missing.len(), asks.len());
            index.fill_balls(&cat, missing);
            for (q, bound, lists) in &asks {
                let only = [lists.clone()];
                let what = format!("{metric:?} dim {dim} item {q} bound {bound} lists {lists:?}");
                let mut none = Vec::new();
                let kept = index.within_kept(&[*q], f32::NEG_INFINITY, *bound, &only, &mut none);
                assert!(none.is_empty(), "{what}: not kept");
                // The ball reaches beyond the bound asked (BALL_SLACK): compare it whole with a fresh search.
                let ball = index.kept_ball(*q, *bound, Some(&only)).expect("kept");
                let fresh = index.within(&cat, &[*q], f32::NEG_INFINITY, ball.bound, Some(&only));
                assert_eq!(bits(&ball.items), bits(&fresh), "{what}");
                let plain = index.within(&cat, &[*q], f32::NEG_INFINITY, *bound, Some(&only));
                assert_eq!(bits(&kept.unwrap_or_default()), bits(&plain), "{what}");
            }
            // Several queries at once: answered from the filled balls as the uncached search.
            let queries = [0u32, 400, 899];
            let only: Vec<Vec<u32>> = vec![vec![0, 3], vec![2, 2, 5, 6], (0..7).collect()];
            let mut missing = Vec::new();
            let kept = index.within_kept(&queries, sorted[0], sorted[40], &only, &mut missing);
            assert!(missing.is_empty());
            let plain = index.within(&cat, &queries, sorted[0], sorted[40], Some(&only));
            assert_eq!(bits(&kept.unwrap_or_default()), bits(&plain), "{metric:?} dim {dim} together");
            assert!(!plain.is_empty());
        }
    }

    #[test]
    fn balls_measured_together_keep_within_s_answer_for_overflowing_and_nan_rows() {
        for metric in [Metric::InnerProduct, Metric::L2] {
            balls_keep_within_s_answer_for_overflowing_and_nan_rows(metric);
        }
    }

    fn balls_keep_within_s_answer_for_overflowing_and_nan_rows(metric: Metric) {
        // Products that overflow to ±∞ (rows of 1e30 against rows of ±1e30: inner products, and L2's squared
        // distances) and a NaN row.
        let mut cat = catalog(300, 16, metric, 2);
        for (row, v) in [(7usize, 1e30f32), (13, 1e30), (9, -1e30), (10, f32::NAN)] {
            cat.data[row * 16..(row + 1) * 16].iter_mut().for_each(|x| *x = v);
        }
        let members: Vec<Vec<u32>> = (0..3).map(|l| (0..300u32).filter(|x| x % 3 == l).collect()).collect();
        let index = RangeIndex::new(&cat, members);
        let bits = |v: &[Cand]| v.iter().map(|c| (c.item, c.dist.to_bits())).collect::<Vec<_>>();
        let asks = [(7u32, 0.5f32), (8, f32::INFINITY), (9, -0.1), (10, 1.0), (11, f32::NEG_INFINITY), (12, 0.2)];
        let mut missing = Vec::new();
        for &(q, bound) in &asks {
            assert!(index.within_kept(&[q], f32::NEG_INFINITY, bound, &[vec![0, 1, 2]], &mut missing).is_none());
        }
        index.fill_balls(&cat, missing);
        for &(q, bound) in &asks {
            let only = [vec![0u32, 1, 2]];
            let plain = index.within(&cat, &[q], f32::NEG_INFINITY, bound, Some(&only));
            let mut more = Vec::new();
            let kept = index.within_kept(&[q], f32::NEG_INFINITY, bound, &only, &mut more);
            // A bound of −∞ reaches NaN: never kept, left to the uncached search.
            assert_eq!(more.is_empty(), bound != f32::NEG_INFINITY, "item {q} bound {bound}");
            if let Some(kept) = kept {
                assert_eq!(bits(&kept), bits(&plain), "item {q} bound {bound}");
                // The ball whole, as a fresh search to its reach (an item at −∞ is in neither).
                let ball = index.kept_ball(q, bound, Some(&only)).expect("kept");
                let fresh = index.within(&cat, &[q], f32::NEG_INFINITY, ball.bound, Some(&only));
                assert_eq!(bits(&ball.items), bits(&fresh), "item {q} bound {bound} ball");
            }
            let cached = index.within_cached(&cat, &[q], f32::NEG_INFINITY, bound, Some(&only));
            assert_eq!(bits(&cached), bits(&plain), "item {q} bound {bound} cached");
        }
    }

    #[test]
    fn cached_range_search_is_the_uncached_one_whatever_the_cache_holds() {
        for (metric, dim) in [(Metric::L2, 48), (Metric::Cosine, 12), (Metric::InnerProduct, 48)] {
            let cat = catalog(900, dim, metric, 5);
            let members: Vec<Vec<u32>> =
                (0..7).map(|l| (0..cat.len() as u32).filter(|x| (*x as usize * 5 + 1) % 7 == l).collect()).collect();
            let index = RangeIndex::new(&cat, members.clone());
            let bits = |v: &[Cand]| v.iter().map(|c| (c.item, c.dist.to_bits())).collect::<Vec<_>>();
            // Overlapping query sets, so later searches meet balls computed for earlier ones; bounds rising (balls
            // recomputed further), then falling (answered from a ball's prefix), then ±∞; whole-catalog and
            // per-query lists alternating for the same items.
            let sets = [vec![0u32, 7], vec![7], vec![3, 400, 401], vec![400, 0, 13, 600, 7], vec![7, 7]];
            let d: Vec<f32> = (0..cat.len() as u32).map(|x| cat.distance(0, x)).collect();
            let mut sorted = d.clone();
            sorted.sort_by(f32::total_cmp);
            let rising = [sorted[2], sorted[40], sorted[41], sorted[300]];
            let last = [f32::INFINITY, -1.0, sorted[5]];
            for &bound in rising.iter().chain(rising.iter().rev()).chain(&last) {
                for queries in &sets {
                    let only: Vec<Vec<u32>> = (0..queries.len()).map(|qi| vec![qi as u32 % 3, 5]).collect();
                    for only in [None, Some(&only[..]), Some(&only[..only.len() - 1])] {
                        // Above the nearest distance (inner-product distances are negative).
                        let plain = index.within(&cat, queries, sorted[0], bound, only);
                        let cached = index.within_cached(&cat, queries, sorted[0], bound, only);
                        let what = format!("{metric:?} {queries:?} bound {bound} lists {only:?}");
                        assert_eq!(bits(&cached), bits(&plain), "{what}");
                        assert!(only.is_some() || bound != sorted[300] || !plain.is_empty(), "{what}: found nothing");
                    }
                }
            }
            // Per-query lists only (no whole-catalog search in between evicting the balls), rising then falling
            // bounds, and the same item over different lists from one search to the next and within one search.
            let index = RangeIndex::new(&cat, members);
            for &bound in rising.iter().chain(rising.iter().rev()) {
                for shift in 0..3u32 {
                    for queries in &sets {
                        let only: Vec<Vec<u32>> =
                            (0..queries.len() as u32).map(|qi| vec![(qi + shift) % 3, 3 + qi % 4]).collect();
                        let plain = index.within(&cat, queries, sorted[0], bound, Some(&only));
                        let cached = index.within_cached(&cat, queries, sorted[0], bound, Some(&only));
                        assert_eq!(bits(&cached), bits(&plain), "{metric:?} {queries:?} bound {bound} lists {only:?}");
                    }
                }
            }
        }
    }
}
