//! Exact search screened in bfloat16: scores of every pair at twice the f32 rate, then exact f32 scores for the
//! candidates a proven error bound cannot rule out.
//!
//! The bound. With x̃ the bfloat16 rounding of x and s̃ the screening score (x̃ and q̃ multiplied exactly, summed in
//! f32), the f32 score s that the plain search computes satisfies
//!
//! |s − s̃| ≤ (‖q‖ + ‖q − q̃‖)·‖x − x̃‖ + ‖q − q̃‖·‖x‖ + γ·(‖q̃‖·‖x̃‖ + ‖q‖·‖x‖) = ε
//!
//! (Cauchy–Schwarz on ⟨q, x⟩ − ⟨q̃, x̃⟩, plus γ = γₙ + 2⁻²⁰ for the f32 summation of each side and the rounding of
//! the bound's own arithmetic; a term of order dim·2⁻¹²⁰ covers the instruction's flushing of denormals). The norms
//! are measured per row when the base and queries are converted, so ε is per pair, typically a third of the
//! worst case |x − x̃| ≤ 2⁻⁸|x|. Each score's ranking key (distance, lower is closer) then lies in
//! [lower, upper] = key(s̃ ± ε), widened by 2⁻²⁰ of the key's scale for the f32 rounding of the key formula.
//!
//! Per query the screen keeps T, at least the k-th smallest `upper` seen (exactly that after the last cut of its
//! `TopK`), and every candidate with `lower ≤ T`. A row it drops has an exact key above T, and k rows have exact
//! keys at most T, so it is not among the k nearest. The
//! kept candidates are scored by the same f32 kernel as the plain search and ranked by the same `TopK`: the output
//! is the plain search's, bit for bit. Rows or queries with NaN or infinite values have NaN bounds and are always
//! kept, so they fall back to exact scoring (per pair), never to a guess.

// `!(bound > threshold)` on purpose throughout: a NaN bound must keep its row, never drop it.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use stepwise_kernels::MatRef;
use stepwise_kernels::bf16::{self, Bf16Rows};

use super::{Metric, Neighbor, Norms, Search, TopK, clamp_rounding, key};

/// A base matrix converted for screening.
pub(super) struct Screen {
    base: Bf16Rows,
}

/// Candidates are compacted against the current threshold when their list grows past this many per query
/// (beyond `2k`).
const COMPACT_SLACK: usize = 1024;

/// Relative allowance for the f32 rounding of the key formula and of the bounds' own arithmetic.
const KEY_SLACK: f32 = 1.0 / (1 << 20) as f32;

impl Screen {
    pub(super) fn new(base: &[f32], nb: usize, dim: usize) -> Screen {
        Screen { base: Bf16Rows::new(base, nb, dim, bf16::NR) }
    }

    /// [`Search::unit`] with screening: query tile `q` against base rows `b_start..b_end` (`b_start` a multiple
    /// of the screening panel).
    pub(super) fn unit(&self, s: &Search, q: usize, b_start: usize, b_end: usize) -> Vec<Vec<Neighbor>> {
        let dim = s.dim;
        let q0 = q * s.qt;
        let q1 = (q0 + s.qt).min(s.nq);
        let rows = q1 - q0;
        let qb = Bf16Rows::new(&s.queries[q0 * dim..q1 * dim], rows, dim, bf16::MR);
        let gamma = bf16::accumulation_error_factor(dim) + KEY_SLACK;
        let tiny = dim as f32 * f32::powi(2.0, -120);
        let mut screens: Vec<QueryScreen> = (0..rows)
            .map(|r| {
                let (nq, dq, tq) = (qb.norms()[r], qb.residuals()[r], qb.rounded_norms()[r]);
                QueryScreen {
                    top: s.top(q0 + r),
                    cands: Vec::new(),
                    compact_at: 2 * s.opts.k + COMPACT_SLACK,
                    // ε = a·‖x − x̃‖ + b·‖x‖ + c·‖x̃‖ + d (module docs).
                    coef: [nq + dq, dq + gamma * nq, gamma * tq + tiny, tiny * (1.0 + tq)],
                }
            })
            .collect();
        let mut scores = vec![0f32; rows * s.bt];
        let mut upper = vec![0f32; s.bt];
        let mut j0 = b_start;
        while j0 < b_end {
            let j1 = (j0 + s.bt).min(b_end);
            let cols = j1 - j0;
            bf16::screen(&qb, &self.base, j0, j1, &mut scores[..rows * cols], cols);
            for (r, qs) in screens.iter_mut().enumerate() {
                let row = &mut scores[r * cols..(r + 1) * cols];
                self.bounds(s, q0 + r, &qs.coef, j0, row, &mut upper[..cols]);
                qs.scan(row, &upper[..cols], j0, |j| s.filter.is_none_or(|f| f(q0 + r, j)));
            }
            j0 = j1;
        }
        let mut gathered = Vec::new();
        let mut exact = Vec::new();
        screens
            .into_iter()
            .enumerate()
            .map(|(r, mut qs)| {
                let qi = q0 + r;
                qs.top.cut();
                let threshold = qs.top.threshold;
                let cands: Vec<usize> = qs.cands.iter().filter(|c| !(c.0 > threshold)).map(|c| c.1).collect();
                gathered.clear();
                for &j in &cands {
                    gathered.extend_from_slice(&s.base[j * dim..(j + 1) * dim]);
                }
                exact.clear();
                exact.resize(cands.len(), 0f32);
                let a = MatRef::row_major(&s.queries[qi * dim..(qi + 1) * dim], 1, dim);
                let b = MatRef::row_major(&gathered, cands.len(), dim).t();
                stepwise_kernels::gemm(a, b, &mut exact, false, false).expect("knn: candidate shapes match");
                let mut top = s.top(qi);
                let nq = s.query_norms.get(qi);
                for (&j, &sc) in cands.iter().zip(&exact) {
                    top.offer(key(s.opts.metric, sc, nq, s.base_norms.get(j)), j, &|_| true);
                }
                s.finish(top)
            })
            .collect()
    }

    /// Replace the screening scores of one query's row by the lower bounds of their keys, and write the upper
    /// bounds to `upper` (module docs).
    fn bounds(&self, s: &Search, qi: usize, coef: &[f32; 4], j0: usize, row: &mut [f32], upper: &mut [f32]) {
        let j1 = j0 + row.len();
        let (dx, nx, tx) =
            (&self.base.residuals()[j0..j1], &self.base.norms()[j0..j1], &self.base.rounded_norms()[j0..j1]);
        let [a, b, c, d] = *coef;
        let eps = |i: usize| a * dx[i] + b * nx[i] + c * tx[i] + d;
        match s.opts.metric {
            Metric::InnerProduct => {
                for i in 0..row.len() {
                    let (v, e) = (row[i], eps(i));
                    row[i] = -(v + e);
                    upper[i] = -(v - e);
                }
            }
            Metric::Cosine => {
                let iq = s.query_norms.get(qi);
                let norms = match &s.base_norms {
                    Norms::Inverse(v) => &v[j0..j1],
                    _ => unreachable!("cosine search has inverse norms"),
                };
                for i in 0..row.len() {
                    let (v, e, w) = (row[i], eps(i), iq * norms[i]);
                    row[i] = 1.0 - (v + e) * w - KEY_SLACK;
                    upper[i] = clamp_rounding(1.0 - (v - e) * w + KEY_SLACK);
                }
            }
            Metric::L2 => {
                let sq = s.query_norms.get(qi);
                let norms = match &s.base_norms {
                    Norms::Squared(v) => &v[j0..j1],
                    _ => unreachable!("L2 search has squared norms"),
                };
                for i in 0..row.len() {
                    let (v, e, m) = (row[i], eps(i), sq + norms[i]);
                    row[i] = m - 2.0 * (v + e) - KEY_SLACK * m;
                    upper[i] = clamp_rounding(m - 2.0 * (v - e) + KEY_SLACK * m);
                }
            }
        }
    }
}

/// One query's screening state.
struct QueryScreen {
    /// The smallest upper bounds kept so far (at most 2k): `top.threshold` is T, exact after `top.cut()`.
    top: TopK,
    /// (lower bound, row) of every row kept while its lower bound was at most the T of the moment.
    cands: Vec<(f32, usize)>,
    /// Compact `cands` when it grows past this (doubled when compaction leaves it above half, e.g. many ties).
    compact_at: usize,
    /// ε's coefficients for this query (see [`Screen::bounds`]).
    coef: [f32; 4],
}

impl QueryScreen {
    /// Offer rows `j0 + c` with key bounds `lower[c]`, `upper[c]`; `keep(j)` (the caller's filter) is asked only for
    /// rows that could enter.
    #[inline]
    fn scan(&mut self, lower: &[f32], upper: &[f32], j0: usize, keep: impl Fn(usize) -> bool) {
        const BLOCK: usize = 16;
        let mut c = 0;
        while c < lower.len() {
            let end = (c + BLOCK).min(lower.len());
            let t = self.top.threshold;
            // `!(l > t)`: NaN bounds (or a NaN threshold) always pass.
            if lower[c..end].iter().fold(false, |any, &l| any | !(l > t)) {
                for i in c..end {
                    if !(lower[i] > self.top.threshold) && keep(j0 + i) {
                        self.cands.push((lower[i], j0 + i));
                        self.top.offer(upper[i], j0 + i, &|_| true);
                    }
                }
                if self.cands.len() > self.compact_at {
                    let t = self.top.threshold;
                    self.cands.retain(|c| !(c.0 > t));
                    if self.cands.len() > self.compact_at / 2 {
                        self.compact_at *= 2;
                    }
                }
            }
            c = end;
        }
    }
}
