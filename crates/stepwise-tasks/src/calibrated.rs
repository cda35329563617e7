//! Calibrated knobs ([`crate::KnobsMode::Calibrated`]): negatives chosen so that no shortcut of the audit's panel
//! — "pick the choice nearest the question", its mirror image "pick the farthest", every rank in between, and
//! the linear probes on the choices' distances and ranks or on their choice-only values — beats chance.
//!
//! The shortcuts read one value per choice, the one the Hasty Student reads (RecipeQA §4.2): cloze, the cosine
//! distance of the choice to the mean of the question items' unit vectors; coherence, each shown image's cosine
//! distance to the mean of the other shown images; ordering, the mean cosine distance between consecutive
//! images. The choice-only probe reads each choice's distance to the other choices (ordering: its mean Kendall
//! distance to the other orders). The probes see each value as a row [x, z, z², rank one-hot]
//! ([`stepwise_core::shortcut`]).
//!
//! A linear probe on such rows is at chance when the rows average to the same on answers as on negatives: the
//! logistic loss is then stationary at zero weights. And a probe is scored by the choice it ranks first, so
//! besides the means, "the answer is the choice whose z is nearest a typical z" must be as rare as chance
//! ([`stepwise_core::shortcut::AIMS`]), and the answer's rank must not depend on how spread out or how far the
//! question's distances are (the rank is balanced within each cell of a [`Grid`] of spread and level). So each
//! question tries several draws of negatives (for every rank its answer can take, [`TRIES_PER_RANK`] draws
//! within knob 2's region and knob 3's band), each draw's **lead** ([`lead`]) says how its answer differs from
//! its negatives in all of these, and [`Balance`] picks among the draws by exponential tilting, so that the kept
//! questions' leads average to zero. A question whose every draw leads far the same way (typically an answer
//! nearer the question than every candidate, which no draw can hide) is mostly left out
//! ([`crate::SkipReason::CalibratedBalance`]). The tilts are fitted on a pilot sample of the plan; each
//! question's pick depends on its own draws and random stream alone, so the draws are the same for any thread
//! count and in any shard.

use std::collections::HashMap;

use rand::Rng;
use rayon::prelude::*;
use stepwise_kernels::math::dot_lanes;

use crate::catalog::Catalog;

/// How calibrated knobs depart from the papers' rules, one line each (recorded in every calibrated task set's
/// manifest; the report lists them).
pub const DEPARTURES: &[&str] = &[
    "Knob 2 keeps the paper's ball (k2 = 0) or shell (k2 = 1) around the answer, but its negatives are chosen \
     within it, not drawn uniformly, and only among the K searched neighbours (no widened search).",
    "Knob 3 no longer asks for one negative at least as close to the question as the answer (on a coin flip's \
     half of the questions, as the paper's implementation did): each question tries negatives that give the \
     answer every rank of distance to the question it can take; k3 = 1 takes them from the candidates nearest the \
     answer's own distance, k3 = 0 from anywhere on each side.",
    "Of the draws tried, each question keeps one at random, weighted by exponential tilting so that what the \
     shortcut probes read (each choice's distance to the question and to the other choices, their z-scores and \
     ranks, which choice sits nearest a typical z, and the answer's rank at each spread and level of the \
     distances) averages the same on answers as on negatives; questions \
     whose every draw leads the same way are mostly left out (calibrated_balance), so a calibrated setting keeps \
     fewer questions than the paper's.",
    "Visual coherence balances the odd image's distance to the other images; visual ordering (no knob 3 in the \
     paper) balances the correct order's chain length and its Kendall distance to the other orders, k2 = 0 taking \
     wrong orders of nearly its length, k2 = 1 any, instead of the paper's uniform (k2 = 0) and length-weighted \
     (k2 = 1) draws; the reversed correct order (the same length) is never a choice.",
    "The shortcuts' distance is cosine on the features whatever --metric says (the Hasty Student's distance); \
     knob 2's regions use --metric as in the paper.",
];

/// Draws tried per question for each rank its answer can take.
pub const TRIES_PER_RANK: usize = 12;

/// How much a choice's raw value weighs in a lead next to its z-score and rank one-hot: choices' cosine distances
/// lie hundredths to tenths apart, z and ranks units apart.
const VALUE_WEIGHT: f64 = 10.0;

/// How much the choice-only values weigh in a lead next to the distances: a smaller weight is a stronger ridge on
/// their tilt, so where the answer looks unlike every draw of negatives (which the choice-only probe then reads)
/// the balance gives way there first and keeps the distance shortcuts at chance.
const CHOICE_ONLY_WEIGHT: f64 = 0.3;

/// The weight of leaving a question out next to keeping it with ordinary draws (lead zero): at zero tilt a
/// question is kept with probability 1 / (1 + `DROP_WEIGHT`).
pub const DROP_WEIGHT: f64 = 0.01;

/// Pilot questions per chunk of the fit's parallel sums.
const FIT_CHUNK: usize = 64;

/// The fit's Hessian is summed over every this-many-th pilot question.
const HESSIAN_STRIDE: usize = 4;

/// The ridge on the tilts: a shortcut no draw can balance gets a large finite tilt rather than an infinite one.
const RIDGE: f64 = 1e-4;

/// Where the fit stops: the norm of the pilot's expected kept lead (plus the ridge's pull). Leads are of order
/// one, and a kept set's mean lead differs from its expectation by about one over the root of its questions, so
/// balancing the pilot more finely changes nothing a probe could read.
const GRADIENT_TOLERANCE: f64 = 1e-4;

/// [`GRADIENT_TOLERANCE`] for the fit whose kept draws cut the grids ([`Balance::fit`]).
const FIRST_TOLERANCE: f64 = 1e-2;

/// The least share of the pilot the balance keeps ([`Balance::fit`] shrinks the tilts until it does).
pub const MIN_KEEP: f64 = 0.2;

/// What one draw does to the shortcuts: `dense`, how its answer differs from its negatives in the probes' rows
/// ([`stepwise_core::shortcut::answer_lead`]) for the choices' distances to the question and, when the task has
/// them apart from the distances, for their choice-only values (weighted by [`CHOICE_ONLY_WEIGHT`]), each raw
/// value weighted by [`VALUE_WEIGHT`]; `ranks`, the distances' rank lead alone (answer minus the others' mean of
/// the rank one-hot); `spread` and `level`, the standard deviation and mean of the distances, which place the
/// draw in a cell of the balance's [`Grid`], where its rank lead is balanced apart from other cells'.
#[derive(Debug, Clone, PartialEq)]
pub struct Lead {
    pub dense: Vec<f64>,
    pub ranks: Vec<f64>,
    pub spread: f64,
    pub level: f64,
}

#[cfg(test)]
impl Lead {
    /// A lead with no rank part (nothing to hold in a grid).
    pub fn plain(dense: Vec<f64>) -> Lead {
        Lead { dense, ranks: Vec::new(), spread: 0.0, level: 0.0 }
    }
}

/// The lead of a draw whose choices have `distances` (the answer at `answer`) and `choice_only` values.
pub fn lead(distances: &[f32], choice_only: Option<&[f32]>, answer: usize) -> Lead {
    let part = |values: &[f64]| {
        let mut l = stepwise_core::shortcut::answer_lead(values, answer);
        l[0] *= VALUE_WEIGHT;
        l
    };
    let wide = |values: &[f32]| -> Vec<f64> { values.iter().map(|&x| f64::from(x)).collect() };
    let distances = wide(distances);
    let mut dense = part(&distances);
    // The rank one-hot follows [x, z, z²] in `answer_lead`.
    let ranks = dense[3..3 + distances.len()].to_vec();
    if let Some(c) = choice_only {
        dense.extend(part(&wide(c)).into_iter().map(|x| x * CHOICE_ONLY_WEIGHT));
    }
    let (spread, level) = stepwise_core::shortcut::spread_and_level(&distances);
    Lead { dense, ranks, spread, level }
}

/// The most cells per axis of the grid of spread and level in which the answer's rank is balanced: the audit's
/// "rank given spread and level" cuts its grid at quintiles, and the rank can depend on spread and level in any
/// shape (a balance of the rank lead times low powers of them left cells at 35-52% on one rank).
pub const MAX_GRID_BINS: usize = 5;

/// Pilot questions per cell of the grid ([`grid_bins`]): fewer, and the tilt fits each cell's noise, leaving
/// questions out until the ridge has to hold it back (a 300-procedure world's fits ran to their last step).
const PILOT_PER_CELL: f64 = 120.0;

/// Cells per axis of the grid for a pilot of `pilot` questions; at least two, which a small pilot fills and which
/// keep the rank apart between closely and widely spread distances (one cell let a rank take 48% of the closest
/// half of a small set's questions).
pub fn grid_bins(pilot: usize) -> usize {
    ((pilot as f64 / PILOT_PER_CELL).sqrt() as usize).clamp(2, MAX_GRID_BINS)
}

/// Where a draw's rank lead goes in its setting's tilt: one block per cell of spread × level, cut at quantiles of
/// the pilot's draws ([`Balance::fit`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grid {
    spread: Vec<f64>,
    level: Vec<f64>,
}

impl Grid {
    /// The grid of `bins` cells per axis cut at the weighted quantiles of `points` (spread, level, weight).
    pub fn fit(points: impl Iterator<Item = (f64, f64, f64)>, bins: usize) -> Grid {
        let points: Vec<(f64, f64, f64)> = points.filter(|p| p.2 > 0.0).collect();
        let total: f64 = points.iter().map(|p| p.2).sum();
        if points.is_empty() || total <= 0.0 {
            return Grid::default();
        }
        let cut = |axis: fn(&(f64, f64, f64)) -> f64| -> Vec<f64> {
            let mut v: Vec<(f64, f64)> = points.iter().map(|p| (axis(p), p.2)).collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut edges = Vec::with_capacity(bins.saturating_sub(1));
            let mut acc = 0.0;
            for &(x, w) in &v {
                acc += w;
                while edges.len() + 1 < bins && acc >= total * (edges.len() + 1) as f64 / bins as f64 {
                    edges.push(x);
                }
            }
            edges
        };
        Grid { spread: cut(|p| p.0), level: cut(|p| p.1) }
    }

    fn cells(&self) -> usize {
        (self.spread.len() + 1) * (self.level.len() + 1)
    }

    fn cell(&self, l: &Lead) -> usize {
        let bin = |x: f64, edges: &[f64]| edges.iter().filter(|&&e| x >= e).count();
        bin(l.spread, &self.spread) * (self.level.len() + 1) + bin(l.level, &self.level)
    }

    /// The length of a tilt for leads shaped like `l`.
    fn dims(&self, l: &Lead) -> usize {
        l.dense.len() + self.cells() * l.ranks.len()
    }

    /// `l`'s nonzero coordinates in the tilt as two runs (start, values): its dense part, then its rank lead in
    /// its cell's block.
    fn runs<'l>(&self, l: &'l Lead) -> [(usize, &'l [f64]); 2] {
        [(0, &l.dense), (l.dense.len() + self.cell(l) * l.ranks.len(), &l.ranks)]
    }

    fn dot(&self, tilt: &[f64], l: &Lead) -> f64 {
        self.runs(l).iter().map(|&(at, xs)| xs.iter().zip(&tilt[at..]).map(|(x, t)| x * t).sum::<f64>()).sum()
    }
}

/// How each question picks its draws so that what the shortcut probes read balances: exponential tilting (the
/// maximum-entropy choice under a moment constraint). Setting j weighs its draw t by exp(−λ_j · lead_t); a question
/// is kept with probability Π_j Z_j / (Π_j Z_j + [`DROP_WEIGHT`]), Z_j the mean weight of setting j's draws, and
/// then each setting draws one of its draws in proportion to its weight. The tilts λ are fitted once, on a pilot
/// sample of the plan's questions, so that the expected lead of the kept questions is zero
/// ([`Balance::fit`]); each question's pick then depends on its own draws and random stream alone, so the kept
/// questions' leads are independent, and a probe cross-validated on them is at chance in expectation (a
/// sequential balance that pins the sum of leads to zero makes every held-out fold the mirror image of its
/// training folds, and the probe falls below chance).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tilt {
    /// One tilt per paired setting, each as long as the setting's leads in its grid ([`Grid`]).
    pub tilts: Vec<Vec<f64>>,
    /// Each paired setting's grid.
    pub grids: Vec<Grid>,
    /// The pilot's expected share of questions kept, and its questions.
    pub expected_keep: f64,
    pub pilot_questions: usize,
}

/// One question's log mean weight per setting and each draw's weight (normalised within the setting).
fn weigh(tilts: &[Vec<f64>], grids: &[Grid], leads: &[&[Lead]]) -> (f64, Vec<Vec<f64>>) {
    let mut log_z = 0.0;
    let mut weights = Vec::with_capacity(leads.len());
    for ((tilt, grid), options) in tilts.iter().zip(grids).zip(leads) {
        let e: Vec<f64> = options.iter().map(|g| -grid.dot(tilt, g)).collect();
        let top = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = e.iter().map(|x| (x - top).exp()).collect();
        let sum: f64 = w.iter().sum();
        log_z += top + (sum / options.len() as f64).ln();
        weights.push(w.into_iter().map(|x| x / sum).collect());
    }
    (log_z, weights)
}

/// A question's term in the fit's objective, log(Π_j Z_j + [`DROP_WEIGHT`]), from `log_z` = Σ_j log Z_j.
fn data_term(log_z: f64) -> f64 {
    (log_z.exp() + DROP_WEIGHT).ln()
}

/// The probability of keeping a question whose settings' log mean weights sum to `log_z`.
fn keep_probability(log_z: f64) -> f64 {
    1.0 / (1.0 + DROP_WEIGHT * (-log_z).exp())
}

impl Tilt {
    /// The tilts for pilot questions `pilot` (per question, per paired setting, the leads of its draws; none
    /// empty), each setting's leads placed by its grid in `grids`: Newton's method on the convex
    /// Σ_q log(Π_j Z_qj + [`DROP_WEIGHT`]) + ridge, whose gradient is the pilot's expected kept lead.
    pub fn fit(pilot: &[Vec<&[Lead]>], grids: &[Grid]) -> Tilt {
        Tilt::fit_to(pilot, grids, GRADIENT_TOLERANCE)
    }

    /// [`Tilt::fit`], stopping when the gradient's norm is below `tolerance`.
    fn fit_to(pilot: &[Vec<&[Lead]>], grids: &[Grid], tolerance: f64) -> Tilt {
        // A shortcut no draw can balance would tilt towards leaving every question out: the ridge grows until
        // the pilot keeps at least MIN_KEEP, and the audit shows what stays unbalanced.
        let mut ridge = RIDGE;
        loop {
            let b = Tilt::fit_with(pilot, grids, ridge, tolerance);
            if b.expected_keep >= MIN_KEEP || ridge >= 1e3 || pilot.is_empty() {
                return b;
            }
            ridge *= 3.0;
        }
    }

    fn fit_with(pilot: &[Vec<&[Lead]>], grids: &[Grid], ridge_weight: f64, tolerance: f64) -> Tilt {
        let Some(first) = pilot.first() else { return Tilt::default() };
        let dims: Vec<usize> = first.iter().zip(grids).map(|(o, g)| o.first().map_or(0, |l| g.dims(l))).collect();
        let offsets: Vec<usize> = dims.iter().scan(0, |acc, &d| Some(std::mem::replace(acc, *acc + d))).collect();
        let n: usize = dims.iter().sum();
        let split = |flat: &[f64]| -> Vec<Vec<f64>> {
            dims.iter().zip(&offsets).map(|(&d, &o)| flat[o..o + d].to_vec()).collect()
        };
        // The objective from the sum of its data terms over the pilot (summed per chunk, then in chunk order).
        let total = |data: f64, flat: &[f64]| -> f64 {
            data / pilot.len() as f64 + flat.iter().map(|x| x * x).sum::<f64>() * ridge_weight / 2.0
        };
        let objective = |flat: &[f64]| -> f64 {
            let tilts = split(flat);
            let parts: Vec<f64> = pilot
                .par_chunks(FIT_CHUNK)
                .map(|chunk| chunk.iter().map(|q| data_term(weigh(&tilts, grids, q).0)).sum::<f64>())
                .collect();
            total(parts.iter().sum::<f64>(), flat)
        };
        let mut flat = vec![0.0; n];
        let (mut iterations, mut trials, mut norm) = (0, 0, f64::NAN);
        for _ in 0..50 {
            iterations += 1;
            let tilts = split(&flat);
            // Per chunk of the pilot (fixed chunks, summed in order: the same bits for any thread count), the
            // objective's data term and its gradient and Hessian.
            let scale = 1.0 / pilot.len() as f64;
            let parts: Vec<(f64, Vec<f64>, Vec<f64>)> = pilot
                .par_chunks(FIT_CHUNK)
                .map(|chunk| {
                    let mut value = 0.0;
                    let mut grad = vec![0.0; n];
                    let mut hess = vec![0.0; n * n];
                    let mut e = vec![0.0; n];
                    // The coordinates a question's leads touch (a few cells of each grid): e is zero elsewhere,
                    // and the Hessian's outer products of e need only these.
                    let mut touched = vec![false; n];
                    let mut nonzero: Vec<usize> = Vec::with_capacity(n);
                    for (k, q) in chunk.iter().enumerate() {
                        let (log_z, weights) = weigh(&tilts, grids, q);
                        value += data_term(log_z);
                        let keep = keep_probability(log_z);
                        // The Hessian from every HESSIAN_STRIDE-th question only (scaled up): Newton's steps
                        // with it still converge, for a quarter of the work.
                        let curvature = k % HESSIAN_STRIDE == 0;
                        let hw = HESSIAN_STRIDE as f64 * keep;
                        for &i in &nonzero {
                            e[i] = 0.0;
                            touched[i] = false;
                        }
                        nonzero.clear();
                        // e = ∇ Σ_j log Z_j = −E_w[lead] per setting; its Hessian is the per-setting covariance
                        // E_w[g gᵀ] − E_w[g] E_w[g]ᵀ.
                        for (j, ((options, w), grid)) in q.iter().zip(&weights).zip(grids).enumerate() {
                            let o = offsets[j];
                            let first = nonzero.len();
                            for (g, &p) in options.iter().zip(w) {
                                let runs = grid.runs(g);
                                for &(at, xs) in &runs {
                                    if !xs.is_empty() && !touched[o + at] {
                                        for i in o + at..o + at + xs.len() {
                                            touched[i] = true;
                                            nonzero.push(i);
                                        }
                                    }
                                    for (ea, x) in e[o + at..].iter_mut().zip(xs) {
                                        *ea -= p * x;
                                    }
                                }
                                if curvature {
                                    for &(at, xs) in &runs {
                                        for (a, x) in xs.iter().enumerate() {
                                            let row = &mut hess[(o + at + a) * n + o..];
                                            for &(bt, ys) in &runs {
                                                for (h, y) in row[bt..bt + ys.len()].iter_mut().zip(ys) {
                                                    *h += hw * p * x * y;
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                            if curvature {
                                let block = &nonzero[first..];
                                for &a in block {
                                    let c = hw * e[a];
                                    let row = &mut hess[a * n..(a + 1) * n];
                                    for &b in block {
                                        row[b] -= c * e[b];
                                    }
                                }
                            }
                        }
                        for &i in &nonzero {
                            grad[i] += keep * e[i];
                        }
                        if curvature {
                            for &a in &nonzero {
                                let c = hw * (1.0 - keep) * e[a];
                                let row = &mut hess[a * n..(a + 1) * n];
                                for &b in &nonzero {
                                    row[b] += c * e[b];
                                }
                            }
                        }
                    }
                    (value, grad, hess)
                })
                .collect();
            let mut grad: Vec<f64> = flat.iter().map(|x| x * ridge_weight).collect();
            let mut hess = vec![0.0; n * n];
            for i in 0..n {
                hess[i * n + i] = ridge_weight;
            }
            for (_, g, h) in &parts {
                for (a, b) in grad.iter_mut().zip(g) {
                    *a += scale * b;
                }
                for (a, b) in hess.iter_mut().zip(h) {
                    *a += scale * b;
                }
            }
            norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
            if norm < tolerance {
                break;
            }
            let step = solve(&hess, &grad, n);
            // objective(&flat), from the same sums in the same order.
            let f0 = total(parts.iter().map(|p| p.0).sum::<f64>(), &flat);
            let slope: f64 = grad.iter().zip(&step).map(|(g, s)| g * s).sum();
            let mut t = 1.0;
            loop {
                trials += 1;
                let trial: Vec<f64> = flat.iter().zip(&step).map(|(x, s)| x - t * s).collect();
                if objective(&trial) <= f0 - 1e-4 * t * slope || t < 1e-6 {
                    flat = trial;
                    break;
                }
                t /= 2.0;
            }
        }
        let tilts = split(&flat);
        let expected_keep =
            pilot.iter().map(|q| keep_probability(weigh(&tilts, grids, q).0)).sum::<f64>() / pilot.len() as f64;
        tracing::debug!(
            pilot = pilot.len(),
            dims = n,
            ridge = ridge_weight,
            iterations,
            trials,
            gradient_norm = norm,
            expected_keep,
            "calibrated balance fitted"
        );
        Tilt { tilts, grids: grids.to_vec(), expected_keep, pilot_questions: pilot.len() }
    }

    /// Whether to keep a question whose settings' draws have `leads`, and which draw each setting keeps.
    pub fn pick(&self, leads: &[&[Lead]], rng: &mut impl Rng) -> Option<Vec<usize>> {
        let (log_z, weights) = weigh(&self.tilts, &self.grids, leads);
        if rng.random::<f64>() >= keep_probability(log_z) {
            return None;
        }
        let picks = weights
            .iter()
            .map(|w| {
                let mut x = rng.random::<f64>();
                w.iter()
                    .position(|&p| {
                        x -= p;
                        x < 0.0
                    })
                    .unwrap_or(w.len() - 1)
            })
            .collect();
        Some(picks)
    }
}

/// The tilts a question's pick uses, cross-fitted: the procedures fall into two halves by a hash of their id,
/// each half's tilt is fitted on the other half's pilot questions, so no question's pick depends on its own draws
/// (a tilt fitted on the very questions it picks for pins their expected leads to sum to zero, and a held-out
/// fold then mirrors its training folds: on a 300-procedure world the distance + rank probe fell to 17%). Both
/// halves place the leads in the same grids, cut on the whole pilot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Balance {
    /// `halves[h]`: the tilt for questions of half h, fitted on half 1 − h.
    pub halves: [Tilt; 2],
}

impl Balance {
    /// The half of the procedure with id `procedure`.
    pub fn half(procedure: &str) -> usize {
        (stepwise_core::hash::hash64(&[b"calibrated-half", procedure.as_bytes()]) & 1) as usize
    }

    /// The cross-fitted tilts for pilot questions `pilot` (each with its procedure's half). The grids are cut
    /// twice: first at the quantiles of every draw tried, then, after a first fit, at those of the draws as the
    /// balance keeps them (which ones it keeps shifts spread and level, and a cell the kept questions split
    /// would hide a rank that depends on them within it).
    pub fn fit(pilot: &[(usize, Vec<&[Lead]>)]) -> Balance {
        let settings = pilot.first().map_or(0, |(_, q)| q.len());
        let of = |h: usize| -> Vec<Vec<&[Lead]>> {
            pilot.iter().filter(|(half, _)| *half == h).map(|(_, q)| q.clone()).collect()
        };
        let (ones, zeros) = (of(1), of(0));
        let bins = grid_bins(pilot.len());
        let tried: Vec<Grid> = (0..settings)
            .map(|j| Grid::fit(pilot.iter().flat_map(|(_, q)| q[j].iter()).map(|l| (l.spread, l.level, 1.0)), bins))
            .collect();
        // The first fit only weighs the draws for the second grid's cuts: a coarse balance does.
        let first = [Tilt::fit_to(&ones, &tried, FIRST_TOLERANCE), Tilt::fit_to(&zeros, &tried, FIRST_TOLERANCE)];
        let kept: Vec<Vec<(f64, f64, f64)>> = pilot
            .iter()
            .map(|(h, q)| {
                let t = &first[h & 1];
                let (log_z, weights) = weigh(&t.tilts, &t.grids, q);
                let keep = keep_probability(log_z);
                (q, weights, keep)
            })
            .fold(vec![Vec::new(); settings], |mut acc, (q, weights, keep)| {
                for (j, (options, w)) in q.iter().zip(&weights).enumerate() {
                    acc[j].extend(options.iter().zip(w).map(|(l, p)| (l.spread, l.level, keep * p)));
                }
                acc
            });
        let grids: Vec<Grid> = kept.into_iter().map(|points| Grid::fit(points.into_iter(), bins)).collect();
        Balance { halves: [Tilt::fit(&ones, &grids), Tilt::fit(&zeros, &grids)] }
    }

    /// [`Tilt::pick`] with the tilt for `half`.
    pub fn pick(&self, half: usize, leads: &[&[Lead]], rng: &mut impl Rng) -> Option<Vec<usize>> {
        self.halves[half & 1].pick(leads, rng)
    }
}

/// `x` with `a x = b` for a symmetric positive definite `n × n` matrix `a` (Cholesky).
fn solve(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = a[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            l[i * n + j] = if i == j { s.max(1e-12).sqrt() } else { s / l[j * n + j] };
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - (0..i).map(|k| l[i * n + k] * y[k]).sum::<f64>()) / l[i * n + i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = (y[i] - (i + 1..n).map(|k| l[k * n + i] * x[k]).sum::<f64>()) / l[i * n + i];
    }
    x
}

/// Pilot questions: every `stride`-th planned question (in plan order) with a stride that keeps about
/// `PILOT_QUESTIONS` of them; all of them in small plans.
pub const PILOT_QUESTIONS: usize = 6000;

pub fn pilot_stride(planned: usize) -> usize {
    planned.div_ceil(PILOT_QUESTIONS).max(1)
}

/// Each choice's cosine distance to the mean of the other choices' unit vectors, from their pairwise cosine
/// similarities (`sim[a * n + b]`): what the audit's choice-only probe reads.
pub fn choice_centrality(sim: &[f32], n: usize) -> Vec<f32> {
    let pair_sum: f32 = (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))).map(|(a, b)| sim[a * n + b]).sum();
    let s2 = n as f32 + 2.0 * pair_sum;
    (0..n)
        .map(|x| {
            let sx = 1.0 + (0..n).filter(|&y| y != x).map(|y| sim[x * n + y]).sum::<f32>();
            let len2 = (s2 - 2.0 * sx + 1.0).max(0.0);
            if len2 > 0.0 { 1.0 - (sx - 1.0) / len2.sqrt() } else { 1.0 }
        })
        .collect()
}

/// Unit vectors of catalog rows: the shortcuts' distances are cosine whatever the catalog's metric.
pub struct Unit<'a> {
    cat: &'a Catalog,
}

impl<'a> Unit<'a> {
    pub fn new(cat: &'a Catalog) -> Self {
        Unit { cat }
    }

    /// Cosine distance of item `i` to the direction `v` of length `len`.
    pub fn distance_len(&self, v: &[f32], len: f32, i: u32) -> f32 {
        let ni = self.norm(i);
        if len == 0.0 || ni == 0.0 {
            return 1.0;
        }
        1.0 - dot_lanes(v, self.cat.row(i)) / (len * ni)
    }

    fn norm(&self, i: u32) -> f32 {
        self.cat.norm(i)
    }

    /// The sum of the unit vectors of `items`.
    pub fn sum(&self, items: &[u32]) -> Vec<f32> {
        let mut s = vec![0f32; self.cat.dim];
        for &i in items {
            let n = self.norm(i);
            if n > 0.0 {
                for (a, b) in s.iter_mut().zip(self.cat.row(i)) {
                    *a += b / n;
                }
            }
        }
        s
    }

    /// Cosine distance of item `i` to the direction `v` (any length).
    pub fn distance(&self, v: &[f32], i: u32) -> f32 {
        self.distance_len(v, dot_lanes(v, v).sqrt(), i)
    }

    /// Cosine similarity of two items.
    pub fn similarity(&self, a: u32, b: u32) -> f32 {
        let (na, nb) = (self.norm(a), self.norm(b));
        if na == 0.0 || nb == 0.0 {
            return 0.0;
        }
        dot_lanes(self.cat.row(a), self.cat.row(b)) / (na * nb)
    }
}

/// The shortcut distances of one question's candidates, each measured once however many settings and passes ask
/// (a coherence question's union of neighbour lists holds hundreds of candidates, each asked by four settings
/// twice).
#[derive(Default)]
pub struct Memo {
    basis: Option<Basis>,
    values: HashMap<u32, (f32, Vec<f32>)>,
}

/// What every candidate of a question is measured against: the unit sum of the question items, its length, and
/// for coherence each coherent image's norm and dot with the sum.
struct Basis {
    sum: Vec<f32>,
    len: f32,
    norms: Vec<f32>,
    dots: Vec<f32>,
    answer: f32,
}

impl Memo {
    fn basis(&mut self, unit: &Unit<'_>, items: &[u32], anchor: Option<u32>) -> &Basis {
        self.basis.get_or_insert_with(|| {
            let sum = unit.sum(items);
            let len = dot_lanes(&sum, &sum).sqrt();
            let norms: Vec<f32> = items.iter().map(|&i| unit.norm(i)).collect();
            let dots: Vec<f32> = items
                .iter()
                .zip(&norms)
                .map(|(&i, &n)| if n > 0.0 { dot_lanes(&sum, unit.cat.row(i)) / n } else { 0.0 })
                .collect();
            let answer = anchor.map_or(f32::NAN, |a| unit.distance(&sum, a));
            Basis { sum, len, norms, dots, answer }
        })
    }

    /// Cloze: the answer's distance to the question (the mean of `items`) and candidate `c`'s.
    pub fn cloze(&mut self, unit: &Unit<'_>, items: &[u32], anchor: u32, c: u32) -> (f32, f32) {
        let answer = self.basis(unit, items, Some(anchor)).answer;
        if let Some(v) = self.values.get(&c) {
            return (answer, v.0);
        }
        let b = self.basis.as_ref().expect("set above");
        let d = unit.distance_len(&b.sum, b.len, c);
        self.values.insert(c, (d, Vec::new()));
        (answer, d)
    }

    /// Coherence: the shown images are `coherent` plus a candidate odd image `c`. Returns the odd image's
    /// distance to the mean of the others, and each coherent image's.
    pub fn coherence(&mut self, unit: &Unit<'_>, coherent: &[u32], c: u32) -> (f32, Vec<f32>) {
        self.basis(unit, coherent, None);
        if let Some(v) = self.values.get(&c) {
            return v.clone();
        }
        let b = self.basis.as_ref().expect("set above");
        let nc = unit.norm(c);
        let row = unit.cat.row(c);
        let sc = if nc > 0.0 && b.len > 0.0 { dot_lanes(&b.sum, row) / (nc * b.len) } else { 0.0 };
        let odd = 1.0 - sc;
        let s_norm2 = b.len * b.len;
        let values = coherent
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let c_i = if nc > 0.0 && b.norms[k] > 0.0 {
                    dot_lanes(row, unit.cat.row(i)) / (nc * b.norms[k])
                } else {
                    0.0
                };
                // others of coherent i = sum − u_i + u_c; its dot with u_i = (sum·u_i − 1) + u_c·u_i, its squared
                // length |sum|² + 2 − 2 sum·u_i + 2 sum·u_c − 2 u_i·u_c.
                let dot = b.dots[k] - 1.0 + c_i;
                let len2 = (s_norm2 + 2.0 - 2.0 * b.dots[k] + 2.0 * sc * b.len - 2.0 * c_i).max(0.0);
                if len2 > 0.0 { 1.0 - dot / len2.sqrt() } else { 1.0 }
            })
            .collect::<Vec<f32>>();
        self.values.insert(c, (odd, values.clone()));
        (odd, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::rng::rng_for;

    /// Pilot questions with one setting and one-dimensional leads: a third can only lead by +1 or +2, the rest
    /// have draws on both sides.
    fn skewed_pilot() -> Vec<Vec<Lead>> {
        let leads = |xs: &[f64]| xs.iter().map(|&x| Lead::plain(vec![x])).collect();
        (0..600)
            .map(
                |i| {
                    if i % 3 == 0 { leads(&[1.0, 2.0]) } else { leads(&[-1.0, -0.5, 0.5, 1.0 + (i % 5) as f64 / 10.0]) }
                },
            )
            .collect()
    }

    #[test]
    fn tilting_balances_leads_that_a_plain_pick_would_not() {
        let pilot = skewed_pilot();
        let plain: f64 = pilot.iter().map(|q| q.iter().map(|g| g.dense[0]).sum::<f64>() / q.len() as f64).sum::<f64>();
        assert!(plain / pilot.len() as f64 > 0.3, "the plain pick leads");
        let views: Vec<Vec<&[Lead]>> = pilot.iter().map(|q| vec![q.as_slice()]).collect();
        let grids = [Grid::default()];
        let b = Tilt::fit(&views, &grids);
        assert_eq!(b.pilot_questions, 600);
        // The expected kept lead is zero (up to the ridge), and most questions are kept.
        let (mut lead, mut kept) = (0.0, 0.0);
        for q in &views {
            let (log_z, w) = weigh(&b.tilts, &grids, q);
            let keep = keep_probability(log_z);
            kept += keep;
            lead += keep * q[0].iter().zip(&w[0]).map(|(g, p)| g.dense[0] * p).sum::<f64>();
        }
        assert!((lead / kept).abs() < 1e-3, "{}", lead / kept);
        assert!((b.expected_keep - kept / 600.0).abs() < 1e-12);
        assert!(b.expected_keep > 0.5, "{b:?}");
        // Picking: the realised kept leads average near zero, and the same stream gives the same picks.
        let mut rng = rng_for(5, "pick");
        let (mut sum, mut n) = (0.0, 0usize);
        for _ in 0..20 {
            for q in &views {
                if let Some(p) = b.pick(q, &mut rng) {
                    sum += q[0][p[0]].dense[0];
                    n += 1;
                }
            }
        }
        assert!((sum / n as f64).abs() < 0.02, "{} over {n}", sum / n as f64);
        let again = |seed| {
            let mut rng = rng_for(seed, "pick");
            views.iter().map(|q| b.pick(q, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(again(9), again(9));
    }

    #[test]
    fn grids_cut_at_weighted_quantiles_and_place_the_rank_lead_in_its_cell() {
        // Spread i, level 10 - i, weight 3 for the first ten points and 1 for the other thirty: with two bins
        // the cut is where half the weight lies below.
        let points = (0..40).map(|i| (i as f64, 10.0 - i as f64, if i < 10 { 3.0 } else { 1.0 }));
        let g = Grid::fit(points.clone(), 2);
        assert_eq!(g.spread, vec![9.0]);
        assert_eq!(g.level, vec![0.0]);
        assert_eq!(g.cells(), 4);
        assert_eq!(Grid::fit(points.clone(), 1), Grid { spread: vec![], level: vec![] });
        assert_eq!(Grid::fit(std::iter::empty(), 3), Grid::default());
        // A lead of spread 20 and level -25 lies in the high-spread, low-level cell: its rank lead goes to block 2.
        let l = Lead { dense: vec![1.0, 2.0], ranks: vec![0.5, -0.5], spread: 20.0, level: -25.0 };
        assert_eq!(g.dims(&l), 2 + 4 * 2);
        let mut tilt = vec![0.0; 10];
        tilt[0] = 1.0;
        tilt[2 + 2 * 2] = 4.0;
        tilt[2 + 2 * 2 + 1] = 2.0;
        assert_eq!(g.dot(&tilt, &l), 1.0 + 0.5 * 4.0 - 0.5 * 2.0);
        assert_eq!(grid_bins(100), 2);
        assert_eq!(grid_bins(1500), 3);
        assert_eq!(grid_bins(6000), MAX_GRID_BINS);
    }

    #[test]
    fn the_fit_is_the_same_for_any_thread_count() {
        let pilot = skewed_pilot();
        // Two settings, the second with two-dimensional leads.
        let second: Vec<Vec<Lead>> = pilot
            .iter()
            .map(|q| q.iter().map(|g| Lead::plain(vec![g.dense[0] * 0.5, 1.0 - g.dense[0]])).collect())
            .collect();
        let views: Vec<Vec<&[Lead]>> =
            pilot.iter().zip(&second).map(|(a, b)| vec![a.as_slice(), b.as_slice()]).collect();
        let grids = [Grid::default(), Grid::default()];
        let fit = |threads| {
            rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(|| Tilt::fit(&views, &grids))
        };
        let one = fit(1);
        assert_eq!(one.tilts.len(), 2);
        assert_eq!(one.tilts[1].len(), 2);
        assert_eq!(one, fit(2));
        assert_eq!(one, fit(3));
        assert_eq!(Tilt::fit(&[], &[]), Tilt::default());
    }

    #[test]
    fn coherence_distances_match_a_direct_computation() {
        use crate::catalog::{Item, ProcEntry};
        use stepwise_features::Metric;
        let mut state = 11u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let dim = 7;
        let n = 30;
        let data: Vec<f32> = (0..n * dim).map(|_| next()).collect();
        let items = (0..n).map(|i| Item { feature_id: format!("image:{i}"), content: i.to_string(), owners: vec![] });
        let cat = Catalog {
            kind: crate::config::ItemKind::Image,
            metric: Metric::L2,
            dim,
            data,
            items: items.collect(),
            procs: vec![ProcEntry { eligible: vec![], excluded: vec![] }],
            norms: Default::default(),
        };
        let unit = Unit::new(&cat);
        let coherent = [0u32, 1, 2];
        let mut memo = Memo::default();
        for c in (3..n as u32).chain(3..5) {
            let (odd, values) = memo.coherence(&unit, &coherent, c);
            let rank = values.iter().filter(|&&d| d < odd).count();
            let shown = [0u32, 1, 2, c];
            let d = |k: usize| {
                let others: Vec<u32> = shown.iter().enumerate().filter(|(j, _)| *j != k).map(|(_, &x)| x).collect();
                unit.distance(&unit.sum(&others), shown[k])
            };
            assert!((odd - d(3)).abs() < 1e-5);
            for (k, v) in values.iter().enumerate() {
                assert!((v - d(k)).abs() < 1e-5, "candidate {c}, image {k}");
            }
            let direct = (0..3).filter(|&k| d(k) < d(3)).count();
            assert_eq!(rank, direct, "candidate {c}");
        }
    }
}
