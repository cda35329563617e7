//! Vectorised elementwise functions: `exp`, softmax rows, GELU (erf) and its derivative.
//!
//! Why: the attention of `stepwise bench seq-train` takes ~77 million exponentials per training step; glibc's
//! scalar `expf` spent about 4% of the step there. One algorithm (Cephes' `expf`: `x = n·ln2 + r`, a degree-6
//! polynomial in `r`, scaled by `2^n` through the exponent bits), written once per instruction set with the same
//! fused multiply-adds in the same order, so every kernel gives the same bits. Inputs below −87.3 give exactly 0
//! (masked attention keys must weigh nothing); accuracy within 2 ulp of the true value elsewhere (tested). GELU
//! likewise: libm's scalar `erff` showed in the training step's profile; [`erf`] is branch-free and written for AVX-512 with the
//! scalar code's operations, so both give the same bits (tested).

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const MAX_X: f32 = 88.376_26;
const MIN_X: f32 = -87.336_55;
const P: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];

/// `e^x` with the shared algorithm, one value.
#[inline]
pub fn exp(x: f32) -> f32 {
    if x < MIN_X {
        return 0.0;
    }
    // Not `min`: NaN must stay NaN (as `_mm512_min_ps(MAX, x)` keeps it).
    let x = if x > MAX_X { MAX_X } else { x };
    let n = (x * LOG2E).round_ties_even();
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    let mut p = P[0];
    for &c in &P[1..] {
        p = p.mul_add(r, c);
    }
    let r2 = r * r;
    let y = p.mul_add(r2, r) + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// 1/√(2π), the normal density's constant.
const INV_SQRT_2PI: f32 = 0.398_942_3;

/// Whether the AVX-512 code runs: the GEMM's one cached detection ([`crate::gemm::Isa::detect`]).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn avx512() -> bool {
    crate::gemm::Isa::detect() == crate::gemm::Isa::Avx512
}

/// `x = clamp(x + bias, lo, hi)` for every value of `xs` (a product's bias and activation; ReLU6 is `0, 6`).
/// `lo ≤ hi`; NaN stays NaN.
pub fn add_clamp(xs: &mut [f32], bias: f32, lo: f32, hi: f32) {
    #[inline(always)]
    fn each(xs: &mut [f32], bias: f32, lo: f32, hi: f32) {
        xs.iter_mut().for_each(|x| *x = (*x + bias).clamp(lo, hi));
    }
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // The same loop compiled for 16 lanes (the crate's baseline target has 4).
        #[target_feature(enable = "avx512f")]
        fn wide(xs: &mut [f32], bias: f32, lo: f32, hi: f32) {
            each(xs, bias, lo, hi)
        }
        // SAFETY: AVX-512F checked.
        return unsafe { wide(xs, bias, lo, hi) };
    }
    each(xs, bias, lo, hi)
}

/// `x[j] = clamp(x[j] + bias[j], lo, hi)` for every value of `xs` ([`add_clamp`] with a bias per value: a
/// channels-last product's bias and activation). `bias` holds at least `xs.len()` values.
pub fn add_each_clamp(xs: &mut [f32], bias: &[f32], lo: f32, hi: f32) {
    #[inline(always)]
    fn each(xs: &mut [f32], bias: &[f32], lo: f32, hi: f32) {
        xs.iter_mut().zip(bias).for_each(|(x, b)| *x = (*x + b).clamp(lo, hi));
    }
    assert!(bias.len() >= xs.len());
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // The same loop compiled for 16 lanes.
        #[target_feature(enable = "avx512f")]
        fn wide(xs: &mut [f32], bias: &[f32], lo: f32, hi: f32) {
            each(xs, bias, lo, hi)
        }
        // SAFETY: AVX-512F checked.
        return unsafe { wide(xs, bias, lo, hi) };
    }
    each(xs, bias, lo, hi)
}

/// Ask the memory system for `data` ahead of its use (a hint: no effect on any result). For rows read in an
/// order no hardware prefetcher can guess — the rows of a query's final candidates, scattered over a catalog
/// larger than the caches: hinting the next row while measuring the current one overlaps their misses.
#[inline]
pub fn prefetch(data: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // One hint per 64-byte line.
        for line in data.chunks(16) {
            // SAFETY: a prefetch never faults, whatever the address; SSE is part of x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr() as *const i8) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Points per block of [`block16_sq_distances`].
pub const BLOCK: usize = 16;

/// Squared Euclidean distances from `q` to points stored in blocks of [`BLOCK`], dimension-major:
/// `blocks[(b·dim + d)·16 + j]` is coordinate `d` of point `16b + j`, `dim = q.len()`. Writes `out[16b + j]` for
/// every whole block that both hold (`Σ_d (x_d − q_d)²` in f32, dimensions in order; the same bits on every
/// instruction set); nothing when `q` is empty. A screen for range searches (`stepwise-tasks`' range index): one
/// vector lane per point, no horizontal sums.
pub fn block16_sq_distances(blocks: &[f32], q: &[f32], out: &mut [f32]) {
    #[inline(always)]
    fn each(blocks: &[f32], q: &[f32], out: &mut [f32]) {
        let dim = q.len();
        if dim == 0 {
            return;
        }
        for (block, o) in blocks.chunks_exact(dim * BLOCK).zip(out.chunks_exact_mut(BLOCK)) {
            let mut acc = [0f32; BLOCK];
            add_sq_diffs(&mut acc, block, q);
            o.copy_from_slice(&acc);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // The same loop compiled for 16 lanes (one register per block).
        #[target_feature(enable = "avx512f")]
        fn wide(blocks: &[f32], q: &[f32], out: &mut [f32]) {
            each(blocks, q, out)
        }
        // SAFETY: AVX-512F checked.
        return unsafe { wide(blocks, q, out) };
    }
    each(blocks, q, out)
}

/// Add `(x_d − q_d)²` to each point's sum in `acc`, for the dimensions of `q` in order, from `cols` (one
/// column of [`BLOCK`] coordinates per dimension): the one accumulation of both block kernels, so they sum in
/// the same order and agree bit for bit.
#[inline(always)]
fn add_sq_diffs(acc: &mut [f32; BLOCK], cols: &[f32], q: &[f32]) {
    for (col, &qd) in cols.chunks_exact(BLOCK).zip(q) {
        for j in 0..BLOCK {
            let t = col[j] - qd;
            acc[j] += t * t;
        }
    }
}

/// Dimensions between the checks of [`block16_sq_distances_screened`], and in its `heads`.
pub const SCREEN_STEP: usize = 16;

/// [`block16_sq_distances`] for a screen against `limit`: a block is left as soon as, after a multiple of 16
/// dimensions, all 16 of its partial sums exceed `limit`, and its outputs are those partial sums. So an output
/// above `limit` is a point whose full sum is above it too (adding a non-negative term never lowers an f32 sum)
/// or NaN (a NaN coordinate past the check); every other output is `block16_sq_distances`'s, bit for bit.
/// `heads` holds the first min(16, dim) coordinates of the same blocks apart (the same layout with that many
/// dimensions), read instead of `blocks`' for them: with coordinates in decreasing order of spread (principal
/// directions) most far blocks are left after them, and a scan then reads 1 KiB per block contiguously instead
/// of the first kilobyte of every 16·dim·4 bytes (a page apart at 64 dimensions).
pub fn block16_sq_distances_screened(heads: &[f32], blocks: &[f32], q: &[f32], limit: f32, out: &mut [f32]) {
    #[inline(always)]
    fn each(heads: &[f32], blocks: &[f32], q: &[f32], limit: f32, out: &mut [f32]) {
        let dim = q.len();
        let h = SCREEN_STEP.min(dim);
        if dim == 0 {
            return;
        }
        let all_beyond = |acc: &[f32; BLOCK]| acc.iter().all(|&a| a > limit);
        let blocks = heads.chunks_exact(h * BLOCK).zip(blocks.chunks_exact(dim * BLOCK));
        for ((head, block), o) in blocks.zip(out.chunks_exact_mut(BLOCK)) {
            let mut acc = [0f32; BLOCK];
            add_sq_diffs(&mut acc, head, q);
            if !all_beyond(&acc) {
                let rest = block[h * BLOCK..].chunks(SCREEN_STEP * BLOCK).zip(q[h..].chunks(SCREEN_STEP));
                for (cols, qs) in rest {
                    add_sq_diffs(&mut acc, cols, qs);
                    if all_beyond(&acc) {
                        break;
                    }
                }
            }
            o.copy_from_slice(&acc);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        #[target_feature(enable = "avx512f")]
        fn wide(heads: &[f32], blocks: &[f32], q: &[f32], limit: f32, out: &mut [f32]) {
            each(heads, blocks, q, limit, out)
        }
        // SAFETY: AVX-512F checked.
        return unsafe { wide(heads, blocks, q, limit, out) };
    }
    each(heads, blocks, q, limit, out)
}

/// `Σ (a_i − b_i)²` over the shorter of the two, element `i` in lane `i % 16` and the lanes added as a fixed
/// tree: the same bits on every instruction set, within (n/16 + 4)·2⁻²⁴ of the exact sum (relative).
pub fn sq_distance_lanes(a: &[f32], b: &[f32]) -> f32 {
    lanes(a, b, |x, y| (x - y) * (x - y))
}

/// `Σ a_i·b_i` in the lane order of [`sq_distance_lanes`]; within (n/16 + 4)·2⁻²⁴ of `Σ |a_i·b_i|` of the exact
/// sum.
pub fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    lanes(a, b, |x, y| x * y)
}

/// `Σ term(a_i, b_i)` in 16 lanes and a fixed tree, compiled for AVX-512 when it runs (one register of lanes).
#[inline(always)]
fn lanes(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
    #[inline(always)]
    fn each(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> f32) -> f32 {
        let mut acc = [0f32; LANES];
        let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        let (ar, br) = (ac.remainder(), bc.remainder());
        for (x, y) in ac.zip(bc) {
            for j in 0..LANES {
                acc[j] += term(x[j], y[j]);
            }
        }
        for (j, (&x, &y)) in ar.iter().zip(br).enumerate() {
            acc[j] += term(x, y);
        }
        tree_sum(acc)
    }
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        #[target_feature(enable = "avx512f")]
        fn wide(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> f32) -> f32 {
            each(a, b, term)
        }
        // SAFETY: AVX-512F checked.
        return unsafe { wide(a, b, term) };
    }
    each(a, b, term)
}

/// Lanes of the deterministic row sum: element `i` goes to partial `i % LANES`, partials are added as a fixed tree.
const LANES: usize = 16;

fn tree_sum(mut partial: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for j in 0..width {
            partial[j] += partial[j + width];
        }
        width /= 2;
    }
    partial[0]
}

/// Sum of a row in the fixed lane order (the same bits from the vector and the scalar code).
pub fn row_sum(xs: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: AVX-512F checked above.
            return unsafe { x86::row_sum_avx512(xs) };
        }
    }
    let mut partial = [0f32; LANES];
    for (i, &x) in xs.iter().enumerate() {
        partial[i % LANES] += x;
    }
    tree_sum(partial)
}

/// Run `$body` compiled for AVX-512 (where `mul_add` is one instruction and loops vectorise) when the CPU has it,
/// else as portable code (where `mul_add` is a correct but slow library call).
macro_rules! with_avx512 {
    ($name:ident, $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,fma")]
            unsafe fn $name<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            if avx512() {
                // SAFETY: AVX-512F (which implies FMA) checked above.
                return unsafe {
                    $name(
                        #[inline(always)]
                        || $body,
                    )
                };
            }
        }
        $body
    }};
}

/// The largest value of a row (NaN only when every value is; −∞ for an empty row), taken in LANES partial
/// maxima: one `max` chain runs at the instruction's latency. A maximum does not depend on the order it is taken
/// in, so the result is the chain's.
pub fn row_max(xs: &[f32]) -> f32 {
    with_avx512!(row_max_avx512, row_max_impl(xs))
}

#[inline(always)]
fn row_max_impl(xs: &[f32]) -> f32 {
    let mut partial = [f32::NEG_INFINITY; LANES];
    for chunk in xs.chunks(LANES) {
        partial.iter_mut().zip(chunk).for_each(|(m, &x)| *m = m.max(x));
    }
    partial.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// `row = softmax(row · scale + bias)` in place (`bias` as long as the row, or empty for none).
pub fn softmax_row(row: &mut [f32], bias: &[f32], scale: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() && (bias.is_empty() || bias.len() >= row.len()) {
            // SAFETY: AVX-512F checked above; `bias` is empty or covers the row.
            return unsafe { x86::softmax_row_avx512(row, bias, scale) };
        }
    }
    softmax_row_impl(row, bias, scale)
}

#[inline(always)]
fn softmax_row_impl(row: &mut [f32], bias: &[f32], scale: f32) {
    // The maximum in LANES partial maxima: one `max` chain per row ran at its latency, ~4 cycles a value (the
    // maximum of a set does not depend on the order it is taken in, so the bits are those of the chain).
    let mut partial = [f32::NEG_INFINITY; LANES];
    if bias.is_empty() {
        for chunk in row.chunks_mut(LANES) {
            for (x, m) in chunk.iter_mut().zip(partial.iter_mut()) {
                *x *= scale;
                *m = m.max(*x);
            }
        }
    } else {
        for (chunk, bias) in row.chunks_mut(LANES).zip(bias.chunks(LANES)) {
            for ((x, &b), m) in chunk.iter_mut().zip(bias).zip(partial.iter_mut()) {
                *x = x.mul_add(scale, b);
                *m = m.max(*x);
            }
        }
    }
    let max = partial.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    exp_shifted(row, max);
    let inv = 1.0 / row_sum(row);
    row.iter_mut().for_each(|x| *x *= inv);
}

/// `row = (row − mean) / √(var + eps) · gamma + beta` in place (`var` the biased variance, both over the row, summed
/// in the fixed lane order of [`row_sum`]): a transformer's layer normalisation of one token.
pub fn layer_norm_row(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    with_avx512!(layer_norm_row_avx512, layer_norm_row_impl(row, gamma, beta, eps))
}

#[inline(always)]
fn layer_norm_row_impl(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len().max(1) as f32;
    let mean = row_sum(row) / n;
    let mut partial = [0f32; LANES];
    for chunk in row.chunks_mut(LANES) {
        for (x, p) in chunk.iter_mut().zip(partial.iter_mut()) {
            *x -= mean;
            *p = x.mul_add(*x, *p);
        }
    }
    let inv = 1.0 / (tree_sum(partial) / n + eps).sqrt();
    for ((x, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
        *x = (*x * inv).mul_add(g, b);
    }
}

// erf's series below 0.5: 2/√π · (−1)^k / (k! (2k+1)), highest power first.
const ERF_SERIES: [f32; 8] = [
    -1.492565e-05,
    1.20553326e-04,
    -8.548327e-04,
    5.223978e-03,
    -2.6866172e-02,
    1.1283792e-01,
    -3.7612638e-01,
    1.1283792e+00,
];
const ERF_P: f32 = 0.327_591_1;
const ERF_A: [f32; 5] = [1.061_405_4, -1.453_152_1, 1.421_413_8, -0.284_496_74, 0.254_829_6];

/// The softmax gradient of one row, in place: `g = p ⊙ (g − Σ g ⊙ p) · scale` (`p` the probabilities, `g` the
/// gradient of the output on entry; `scale` the factor the scores were multiplied by, 1 for a plain softmax).
pub fn softmax_row_backward(p: &[f32], g: &mut [f32], scale: f32) {
    with_avx512!(softmax_row_backward_avx512, softmax_row_backward_impl(p, g, scale))
}

#[inline(always)]
fn softmax_row_backward_impl(p: &[f32], g: &mut [f32], scale: f32) {
    // Σ g ⊙ p in LANES partial sums added as a fixed tree (as [`row_sum`]): one sequential sum ran at the add's
    // latency.
    let mut partial = [0f32; LANES];
    for (gc, pc) in g.chunks(LANES).zip(p.chunks(LANES)) {
        for ((g, p), acc) in gc.iter().zip(pc).zip(partial.iter_mut()) {
            *acc = g.mul_add(*p, *acc);
        }
    }
    let dot = tree_sum(partial);
    g.iter_mut().zip(p).for_each(|(g, p)| *g = p * (*g - dot) * scale);
}

/// `erf(x)`: below |x| = 0.5 its Maclaurin series to x¹⁵ (error under 1e-9), above it Abramowitz & Stegun 7.1.26
/// (1.5e-7 absolute in exact arithmetic, where `1 − poly·e^(−x²)` no longer cancels); both computed and one
/// selected, so the loop has no branch and vectorises, unlike libm's `erff`. Absolute error below 3e-7 in f32
/// (tested against an f64 reference).
#[inline]
pub fn erf(x: f32) -> f32 {
    let x2 = x * x;
    let mut series = ERF_SERIES[0];
    for &c in &ERF_SERIES[1..] {
        series = series.mul_add(x2, c);
    }
    let small = x * series;
    let ax = x.abs();
    let t = 1.0 / ERF_P.mul_add(ax, 1.0);
    let mut poly = ERF_A[0];
    for &a in &ERF_A[1..] {
        poly = poly.mul_add(t, a);
    }
    let large = (1.0 - poly * t * exp(-x2)).copysign(x);
    if ax < 0.5 { small } else { large }
}

/// GELU with the erf: `y = x · Φ(x)`, `Φ(x) = (1 + erf(x/√2)) / 2`.
pub fn gelu(x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: AVX-512F checked above.
            return unsafe { x86::gelu_avx512(x, y) };
        }
    }
    gelu_impl(x, y)
}

#[inline(always)]
pub(crate) fn gelu_impl(x: &[f32], y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = x * 0.5 * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// The GELU gradient: `dx = dy · (Φ(x) + x · φ(x))`.
pub fn gelu_backward(x: &[f32], dy: &[f32], dx: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: AVX-512F checked above.
            return unsafe { x86::gelu_backward_avx512(x, dy, dx) };
        }
    }
    gelu_backward_impl(x, dy, dx)
}

#[inline(always)]
pub(crate) fn gelu_backward_impl(x: &[f32], dy: &[f32], dx: &mut [f32]) {
    for ((dx, &x), &g) in dx.iter_mut().zip(x).zip(dy) {
        *dx = g * gelu_slope(x);
    }
}

/// `Φ(x) + x · φ(x)`, the GELU's derivative.
#[inline(always)]
fn gelu_slope(x: f32) -> f32 {
    let cdf = 0.5 * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2));
    x.mul_add(INV_SQRT_2PI * exp(-0.5 * x * x), cdf)
}

/// [`gelu_backward`] into the output gradient itself: `g = g · (Φ(x) + x · φ(x))`, the same bits. The fused
/// transformer layer's backward pass turns its 8,800 × 1,024 product gradient into the GELU input's in place
/// instead of filling a second buffer of that size.
pub fn gelu_backward_in_place(x: &[f32], g: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: AVX-512F checked above.
            return unsafe { x86::gelu_backward_in_place_avx512(x, g) };
        }
    }
    g.iter_mut().zip(x).for_each(|(g, &x)| *g *= gelu_slope(x));
}

/// `xs[i] = e^(xs[i] − shift)` for every element.
pub fn exp_shifted(xs: &mut [f32], shift: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: AVX-512F checked above.
            unsafe { x86::exp_shifted_avx512(xs, shift) };
            return;
        }
    }
    xs.iter_mut().for_each(|x| *x = exp(*x - shift));
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn row_sum_avx512(xs: &[f32]) -> f32 {
        let mut chunks = xs.chunks_exact(LANES);
        let mut acc = _mm512_setzero_ps();
        for c in &mut chunks {
            // SAFETY: 16 values per chunk.
            acc = _mm512_add_ps(acc, unsafe { _mm512_loadu_ps(c.as_ptr()) });
        }
        let mut partial = [0f32; LANES];
        // SAFETY: 16 floats.
        unsafe { _mm512_storeu_ps(partial.as_mut_ptr(), acc) };
        for (j, &x) in chunks.remainder().iter().enumerate() {
            partial[j] += x;
        }
        tree_sum(partial)
    }

    /// [`softmax_row`] in two passes with explicit vectors (scale, bias and maximum; exponentials and their sum),
    /// then the division: the same operations in the same order as the portable code, so the same bits. The
    /// compiler does not vectorise the portable loops' exponentials (docs/performance.md).
    ///
    /// # Safety
    /// AVX-512F available; `bias` empty or at least as long as `row`.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn softmax_row_avx512(row: &mut [f32], bias: &[f32], scale: f32) {
        let n = row.len();
        let full = n / LANES * LANES;
        let ptr = row.as_mut_ptr();
        let sc = _mm512_set1_ps(scale);
        let mut mx = _mm512_set1_ps(f32::NEG_INFINITY);
        // SAFETY (all blocks below): `i + 16 <= full <= n` and `bias` is empty or holds `n` values.
        for i in (0..full).step_by(LANES) {
            unsafe {
                let x = _mm512_loadu_ps(ptr.add(i));
                let x = if bias.is_empty() {
                    _mm512_mul_ps(x, sc)
                } else {
                    _mm512_fmadd_ps(x, sc, _mm512_loadu_ps(bias.as_ptr().add(i)))
                };
                _mm512_storeu_ps(ptr.add(i), x);
                // `max(x, m)` returns `m` when `x` is NaN, as `f32::max` does.
                mx = _mm512_max_ps(x, mx);
            }
        }
        let mut partial = [0f32; LANES];
        unsafe { _mm512_storeu_ps(partial.as_mut_ptr(), mx) };
        for j in 0..n - full {
            let x = &mut row[full + j];
            *x = if bias.is_empty() { *x * scale } else { x.mul_add(scale, bias[full + j]) };
            partial[j] = partial[j].max(*x);
        }
        let max = partial.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let shift = _mm512_set1_ps(max);
        let mut acc = _mm512_setzero_ps();
        for i in (0..full).step_by(LANES) {
            unsafe {
                let e = exp_v(_mm512_sub_ps(_mm512_loadu_ps(ptr.add(i)), shift));
                _mm512_storeu_ps(ptr.add(i), e);
                acc = _mm512_add_ps(acc, e);
            }
        }
        unsafe { _mm512_storeu_ps(partial.as_mut_ptr(), acc) };
        for j in 0..n - full {
            let x = &mut row[full + j];
            *x = exp(*x - max);
            partial[j] += *x;
        }
        let inv = 1.0 / tree_sum(partial);
        let inv_v = _mm512_set1_ps(inv);
        for i in (0..full).step_by(LANES) {
            unsafe { _mm512_storeu_ps(ptr.add(i), _mm512_mul_ps(_mm512_loadu_ps(ptr.add(i)), inv_v)) };
        }
        row[full..].iter_mut().for_each(|x| *x *= inv);
    }

    /// `e^x` on 16 lanes: the operations of [`exp`] in the same order.
    #[inline(always)]
    pub(crate) unsafe fn exp_v(x: __m512) -> __m512 {
        unsafe {
            let zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(MIN_X), _CMP_LT_OQ);
            let x = _mm512_min_ps(_mm512_set1_ps(MAX_X), x); // NaN passes through
            let n = _mm512_roundscale_ps(
                _mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
            );
            let neg_n = _mm512_sub_ps(_mm512_setzero_ps(), n);
            let r = _mm512_fmadd_ps(neg_n, _mm512_set1_ps(LN2_LO), _mm512_fmadd_ps(neg_n, _mm512_set1_ps(LN2_HI), x));
            let mut p = _mm512_set1_ps(P[0]);
            for &k in &P[1..] {
                p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k));
            }
            let r2 = _mm512_mul_ps(r, r);
            let y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0));
            let bits = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)));
            let y = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
            _mm512_mask_blend_ps(zero, y, _mm512_setzero_ps())
        }
    }

    /// `erf(x)` on 16 lanes: the operations of [`erf`] in the same order.
    #[inline(always)]
    unsafe fn erf_v(x: __m512) -> __m512 {
        unsafe {
            let one = _mm512_set1_ps(1.0);
            let x2 = _mm512_mul_ps(x, x);
            let mut series = _mm512_set1_ps(ERF_SERIES[0]);
            for &c in &ERF_SERIES[1..] {
                series = _mm512_fmadd_ps(series, x2, _mm512_set1_ps(c));
            }
            let small = _mm512_mul_ps(x, series);
            let ax = _mm512_abs_ps(x);
            let t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(ERF_P), ax, one));
            let mut poly = _mm512_set1_ps(ERF_A[0]);
            for &a in &ERF_A[1..] {
                poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(a));
            }
            let e = exp_v(_mm512_sub_ps(_mm512_setzero_ps(), x2));
            let large = _mm512_sub_ps(one, _mm512_mul_ps(_mm512_mul_ps(poly, t), e));
            // copysign(large, x)
            let sign = _mm512_set1_epi32(i32::MIN);
            let large = _mm512_castsi512_ps(_mm512_or_si512(
                _mm512_andnot_si512(sign, _mm512_castps_si512(large)),
                _mm512_and_si512(sign, _mm512_castps_si512(x)),
            ));
            let use_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.5), _CMP_LT_OQ);
            _mm512_mask_blend_ps(use_small, large, small)
        }
    }

    /// # Safety
    /// AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn exp_shifted_avx512(xs: &mut [f32], shift: f32) {
        let mut chunks = xs.chunks_exact_mut(16);
        let s = _mm512_set1_ps(shift);
        for c in &mut chunks {
            // SAFETY: 16 values per chunk.
            unsafe {
                let x = _mm512_sub_ps(_mm512_loadu_ps(c.as_ptr()), s);
                _mm512_storeu_ps(c.as_mut_ptr(), exp_v(x));
            }
        }
        chunks.into_remainder().iter_mut().for_each(|x| *x = exp(*x - shift));
    }

    /// # Safety
    /// AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn gelu_avx512(x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let full = n / 16 * 16;
        for i in (0..full).step_by(16) {
            // SAFETY: i + 16 <= n for both slices.
            unsafe {
                let v = _mm512_loadu_ps(x.as_ptr().add(i));
                let e = erf_v(_mm512_mul_ps(v, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2)));
                let r = _mm512_mul_ps(_mm512_mul_ps(v, _mm512_set1_ps(0.5)), _mm512_add_ps(_mm512_set1_ps(1.0), e));
                _mm512_storeu_ps(y.as_mut_ptr().add(i), r);
            }
        }
        gelu_impl(&x[full..n], &mut y[full..n]);
    }

    /// # Safety
    /// AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn gelu_backward_avx512(x: &[f32], dy: &[f32], dx: &mut [f32]) {
        let n = x.len().min(dy.len()).min(dx.len());
        let full = n / 16 * 16;
        for i in (0..full).step_by(16) {
            // SAFETY: i + 16 <= n for all three slices.
            unsafe {
                let g = _mm512_loadu_ps(dy.as_ptr().add(i));
                _mm512_storeu_ps(
                    dx.as_mut_ptr().add(i),
                    _mm512_mul_ps(g, gelu_slope_v(_mm512_loadu_ps(x.as_ptr().add(i)))),
                );
            }
        }
        gelu_backward_impl(&x[full..n], &dy[full..n], &mut dx[full..n]);
    }

    /// # Safety
    /// AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn gelu_backward_in_place_avx512(x: &[f32], g: &mut [f32]) {
        let n = x.len().min(g.len());
        let full = n / 16 * 16;
        for i in (0..full).step_by(16) {
            // SAFETY: i + 16 <= n for both slices.
            unsafe {
                let slope = gelu_slope_v(_mm512_loadu_ps(x.as_ptr().add(i)));
                let p = g.as_mut_ptr().add(i);
                _mm512_storeu_ps(p, _mm512_mul_ps(_mm512_loadu_ps(p), slope));
            }
        }
        g[full..n].iter_mut().zip(&x[full..n]).for_each(|(g, &x)| *g *= gelu_slope(x));
    }

    /// [`gelu_slope`] on 16 lanes, the same operations in the same order.
    #[inline(always)]
    unsafe fn gelu_slope_v(v: __m512) -> __m512 {
        unsafe {
            let e = erf_v(_mm512_mul_ps(v, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2)));
            let cdf = _mm512_mul_ps(_mm512_set1_ps(0.5), _mm512_add_ps(_mm512_set1_ps(1.0), e));
            let density = exp_v(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5), v), v));
            _mm512_fmadd_ps(v, _mm512_mul_ps(_mm512_set1_ps(INV_SQRT_2PI), density), cdf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_and_vector_and_scalar_agree_bit_for_bit() {
        let xs: Vec<f32> = (0..200_001).map(|i| -87.0 + 175.0 * i as f32 / 200_000.0).collect();
        let mut v = xs.clone();
        exp_shifted(&mut v, 0.0);
        for (&x, &y) in xs.iter().zip(&v) {
            assert_eq!(y.to_bits(), exp(x).to_bits(), "vector and scalar differ at {x}");
            let want = (x as f64).exp();
            let ulp = (want as f32).to_bits().abs_diff(y.to_bits());
            assert!(ulp <= 2, "exp({x}) = {y}, want {want} ({ulp} ulp)");
        }
    }

    #[test]
    fn block16_distances_are_each_points_sum_in_dimension_order() {
        let (dim, points) = (5, 3 * BLOCK);
        let coords: Vec<Vec<f32>> =
            (0..points).map(|i| (0..dim).map(|d| ((i * 7 + d * 13) % 23) as f32 * 0.37 - 3.1).collect()).collect();
        let mut blocks = vec![0f32; points * dim];
        for (i, x) in coords.iter().enumerate() {
            for (d, &v) in x.iter().enumerate() {
                blocks[(i / BLOCK * dim + d) * BLOCK + i % BLOCK] = v;
            }
        }
        let q: Vec<f32> = (0..dim).map(|d| d as f32 * 0.91 - 1.7).collect();
        // One slot more than the blocks hold: left as it was.
        let mut out = vec![-1f32; points + 1];
        block16_sq_distances(&blocks, &q, &mut out);
        for (i, x) in coords.iter().enumerate() {
            let want = x.iter().zip(&q).fold(0f32, |acc, (&v, &qd)| acc + (v - qd) * (v - qd));
            assert_eq!(out[i].to_bits(), want.to_bits(), "point {i}");
        }
        assert_eq!(out[points], -1.0);
        // NaN coordinates give NaN distances (a screen must keep them).
        blocks[BLOCK + 2] = f32::NAN;
        block16_sq_distances(&blocks, &q, &mut out);
        assert!(out[2].is_nan() && !out[3].is_nan());
    }

    #[test]
    fn screened_block16_distances_stop_only_blocks_beyond_the_limit() {
        // 40 dimensions (checks after 16 and 32) and 5 (all in the heads).
        for dim in [40, 5] {
            screened_block16_distances_in(dim);
        }
    }

    fn screened_block16_distances_in(dim: usize) {
        // Four blocks: near points, far ones, a mix, one NaN point.
        let points = 4 * BLOCK;
        let coords: Vec<Vec<f32>> = (0..points)
            .map(|i| {
                let shift = match i / BLOCK {
                    0 => 0.0,
                    1 => 9.0,
                    2 if i % 3 == 0 => 0.0,
                    2 => 9.0,
                    _ => 0.0,
                };
                (0..dim)
                    .map(|d| ((i * 7 + d * 13) % 23) as f32 * 0.03 - 0.3 + if d < 16 { shift } else { 0.0 })
                    .collect()
            })
            .collect();
        let mut blocks = vec![0f32; points * dim];
        for (i, x) in coords.iter().enumerate() {
            for (d, &v) in x.iter().enumerate() {
                blocks[(i / BLOCK * dim + d) * BLOCK + i % BLOCK] = v;
            }
        }
        blocks[(3 * dim + dim / 2) * BLOCK + 5] = f32::NAN;
        // The first 16 coordinates apart.
        let h = SCREEN_STEP.min(dim);
        let heads: Vec<f32> = blocks.chunks(dim * BLOCK).flat_map(|b| b[..h * BLOCK].to_vec()).collect();
        let q = vec![0.05f32; dim];
        let mut full = vec![0f32; points];
        block16_sq_distances(&blocks, &q, &mut full);
        for limit in [0.0f32, 1.0, 10.0, 1e4, f32::INFINITY, f32::NAN, -1.0] {
            let mut out = vec![0f32; points];
            block16_sq_distances_screened(&heads, &blocks, &q, limit, &mut out);
            for i in 0..points {
                // An output above the limit is a point whose full sum is above it or NaN (a NaN term after the
                // block was left); any other output is the full sum.
                if out[i] > limit {
                    assert!(full[i] > limit || full[i].is_nan(), "point {i} limit {limit}");
                } else {
                    assert_eq!(out[i].to_bits(), full[i].to_bits(), "point {i} limit {limit}");
                }
                // A block with a point whose full sum is not above the limit is measured in full.
                let block = i / BLOCK * BLOCK..(i / BLOCK + 1) * BLOCK;
                if full[block].iter().any(|&f| f <= limit || (limit.is_nan() && !f.is_nan())) {
                    assert_eq!(out[i].to_bits(), full[i].to_bits(), "point {i} limit {limit}");
                }
            }
        }
        // The far block is left early: its outputs are the first 16 dimensions' sums.
        let mut out = vec![0f32; points];
        block16_sq_distances_screened(&heads, &blocks, &q, 10.0, &mut out);
        let (far, far_full) = (&out[BLOCK..2 * BLOCK], &full[BLOCK..2 * BLOCK]);
        assert!(far.iter().zip(far_full).all(|(a, b)| if dim > 16 { a < b && *a > 10.0 } else { a == b }), "{dim}");
    }

    #[test]
    fn lane_sums_follow_the_fixed_lane_order() {
        for n in [0, 5, 16, 37, 480] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 11) % 17) as f32 * 0.29 - 2.3).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 5) % 13) as f32 * -0.41 + 1.9).collect();
            let mut sq = [0f32; LANES];
            let mut dot = [0f32; LANES];
            for i in 0..n {
                sq[i % LANES] += (a[i] - b[i]) * (a[i] - b[i]);
                dot[i % LANES] += a[i] * b[i];
            }
            assert_eq!(sq_distance_lanes(&a, &b).to_bits(), tree_sum(sq).to_bits(), "n = {n}");
            assert_eq!(dot_lanes(&a, &b).to_bits(), tree_sum(dot).to_bits(), "n = {n}");
            let exact: f64 = a.iter().zip(&b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
            assert!((sq_distance_lanes(&a, &b) as f64 - exact).abs() <= 1e-5 * exact.max(1e-30), "n = {n}");
        }
    }

    #[test]
    fn row_sums_and_softmax_rows_agree_between_vector_and_scalar_order() {
        let xs: Vec<f32> = (0..37).map(|i| ((i * 7919) % 101) as f32 / 7.0 - 5.0).collect();
        let mut partial = [0f32; LANES];
        for (i, &x) in xs.iter().enumerate() {
            partial[i % LANES] += x;
        }
        assert_eq!(row_sum(&xs).to_bits(), tree_sum(partial).to_bits());
        let mut row = xs.clone();
        let bias: Vec<f32> = (0..37).map(|i| if i > 30 { -1e9 } else { 0.0 }).collect();
        softmax_row(&mut row, &bias, 0.5);
        let max = xs[..31].iter().map(|x| x * 0.5).fold(f32::NEG_INFINITY, f32::max);
        let denom: f64 = xs[..31].iter().map(|&x| ((x * 0.5 - max) as f64).exp()).sum();
        for (i, (&p, &x)) in row.iter().zip(&xs).enumerate() {
            let want = if i > 30 { 0.0 } else { ((x * 0.5 - max) as f64).exp() / denom };
            assert!((p as f64 - want).abs() < 1e-6, "{i}: {p} vs {want}");
        }
    }

    #[test]
    fn vector_softmax_rows_give_the_portable_bits() {
        // Lengths around the 16-lane width and an attention row's 550; with and without a key bias (masked keys).
        for n in [1, 15, 16, 17, 37, 550] {
            let xs: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1013) as f32 / 37.0 - 13.0).collect();
            let bias: Vec<f32> = (0..n).map(|i| if i % 5 == 3 { -1e9 } else { (i % 7) as f32 * 0.25 }).collect();
            for b in [&bias[..], &[]] {
                let (mut fast, mut portable) = (xs.clone(), xs.clone());
                softmax_row(&mut fast, b, 0.125);
                softmax_row_impl(&mut portable, b, 0.125);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&fast), bits(&portable), "n {n}, bias {}", !b.is_empty());
            }
        }
    }

    #[test]
    fn erf_and_gelu_are_close_to_the_exact_functions() {
        for i in -6000..=6000 {
            let x = i as f32 / 1000.0;
            let want = libm_free_erf(x as f64);
            assert!((erf(x) as f64 - want).abs() < 3e-7, "erf({x}) = {} vs {want}", erf(x));
        }
        let xs: Vec<f32> = (-400..=400).map(|i| i as f32 / 50.0).collect();
        let mut y = vec![0f32; xs.len()];
        gelu(&xs, &mut y);
        let ones = vec![1f32; xs.len()];
        let mut dx = vec![0f32; xs.len()];
        gelu_backward(&xs, &ones, &mut dx);
        for ((&x, &y), &d) in xs.iter().zip(&y).zip(&dx) {
            let g = |x: f64| x * 0.5 * (1.0 + libm_free_erf(x / std::f64::consts::SQRT_2));
            assert!((y as f64 - g(x as f64)).abs() < 1e-6 * (1.0 + x.abs() as f64), "gelu({x})");
            let h = 1e-4;
            let numeric = (g(x as f64 + h) - g(x as f64 - h)) / (2.0 * h);
            assert!((d as f64 - numeric).abs() < 1e-5, "gelu'({x}) = {d} vs {numeric}");
        }
    }

    #[test]
    fn vector_and_scalar_gelu_agree_bit_for_bit() {
        let xs: Vec<f32> = (-5000..5000).map(|i| i as f32 / 613.0).collect();
        let gs: Vec<f32> = xs.iter().map(|x| (x * 3.7).sin()).collect();
        let (mut y, mut y0) = (vec![0f32; xs.len()], vec![0f32; xs.len()]);
        gelu(&xs, &mut y);
        gelu_impl(&xs, &mut y0);
        let (mut d, mut d0) = (vec![0f32; xs.len()], vec![0f32; xs.len()]);
        gelu_backward(&xs, &gs, &mut d);
        gelu_backward_impl(&xs, &gs, &mut d0);
        let mut in_place = gs.clone();
        gelu_backward_in_place(&xs, &mut in_place);
        for i in 0..xs.len() {
            assert_eq!(y[i].to_bits(), y0[i].to_bits(), "gelu({})", xs[i]);
            assert_eq!(d[i].to_bits(), d0[i].to_bits(), "gelu'({})", xs[i]);
            assert_eq!(in_place[i].to_bits(), d0[i].to_bits(), "gelu'({}) in place", xs[i]);
        }
    }

    /// erf in f64 by its Maclaurin series (|x| ≤ 3) or the continued fraction of erfc (beyond): a reference
    /// independent of the code under test.
    fn libm_free_erf(x: f64) -> f64 {
        let ax = x.abs();
        let v = if ax <= 3.0 {
            let (mut term, mut sum, mut n) = (ax, ax, 0.0);
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -ax * ax / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (ax + f);
            }
            1.0 - (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f)
        };
        if x < 0.0 { -v } else { v }
    }

    #[test]
    fn exp_of_very_negative_inputs_is_exactly_zero_and_large_inputs_stay_finite() {
        let mut v = vec![-1e9f32, -88.0, -1e30, f32::NEG_INFINITY, 0.0, 100.0];
        v.extend(std::iter::repeat_n(-1e9, 20));
        exp_shifted(&mut v, 0.0);
        assert_eq!(&v[..4], &[0.0, 0.0, 0.0, 0.0]);
        assert_eq!(v[4], 1.0);
        assert!(v[5].is_finite() && v[5] > 1e38);
        assert!(v[6..].iter().all(|&y| y == 0.0));
        let mut nan = vec![f32::NAN; 17];
        exp_shifted(&mut nan, 0.0);
        assert!(nan.iter().all(|y| y.is_nan()), "NaN must propagate: {nan:?}");
    }
}
