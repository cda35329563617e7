//! BF16 screening products: `C = Ã·B̃ᵀ` where Ã and B̃ are f32 rows rounded to bfloat16 (8 significant bits) and
//! every product is accumulated in f32.
//!
//! Why: on CPUs with AVX-512 BF16, `vdpbf16ps` does 32 multiply-adds per instruction where an f32 FMA does 16, so
//! scores that only need to be close (candidates for an exact re-ranking, as in the exact k-NN) cost half as much.
//! The rounding of the inputs is the only approximation; [`Bf16Rows`] records how large it is per row (the norm
//! of the rounding residual) so callers can bound the error of every score.
//!
//! Layout: rows are packed into panels of `panel` rows; within a panel, pair `t` of every row (elements `2t`,
//! `2t + 1`, as one 32-bit word, low half first) is stored next to the same pair of the panel's other rows — the
//! operand layout of `vdpbf16ps` (a broadcast word from the left, a vector of 16 words from the right).
//!
//! Determinism: each score is summed by the same kernel in the same order whatever the thread count. The portable
//! kernel (machines without AVX-512 BF16, and tests) computes the same products in the same bound but need not
//! match the hardware's bits (the instruction flushes denormals).

use rayon::prelude::*;

/// Rows of the left operand per micro-kernel tile.
pub const MR: usize = 12;
/// Rows of the right operand per micro-kernel tile (two vectors of 16 lanes).
pub const NR: usize = 32;

/// Whether this CPU runs the AVX-512 BF16 kernel.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether screening in bfloat16 is faster than f32 arithmetic on this CPU: `vdpbf16ps` measured against the f32
/// FMA on one thread (about 20 ms each, once per process). Where AVX-512 BF16 exists it does twice the work per
/// instruction, but some CPUs issue it at a quarter of the FMA rate (this project's benchmark machine does
/// about half the f32 FMA's GFLOP/s with it: docs/performance.md). Callers whose results do not depend on the choice (the exact k-NN) may use it freely.
pub fn pays_off() -> bool {
    static FASTER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FASTER.get_or_init(|| {
        if !available() {
            return false;
        }
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
        let Ok(pool) = pool else { return false };
        pool.install(|| {
            let f32_peak = crate::peak::fma_peak_gflops(0.02);
            crate::peak::bf16_dot_peak_gflops(0.02).is_some_and(|b| b > 1.25 * f32_peak)
        })
    })
}

/// `x` rounded to the nearest bfloat16, ties to even (NaN stays a quiet NaN; values beyond the largest bfloat16
/// become infinities, as in hardware conversion).
pub fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// The f32 value of a bfloat16.
pub fn from_bf16(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// A row-major f32 matrix rounded to bfloat16 and packed in panels, with the size of each row's rounding.
#[derive(Debug, Clone)]
pub struct Bf16Rows {
    rows: usize,
    dim: usize,
    pairs: usize,
    panel: usize,
    data: Vec<u32>,
    /// ‖x‖ of each f32 row.
    norms: Vec<f32>,
    /// ‖x − x̃‖: the rounding residual of each row.
    residuals: Vec<f32>,
    /// ‖x̃‖ of each rounded row.
    rounded_norms: Vec<f32>,
}

impl Bf16Rows {
    /// Pack `rows × dim` row-major values into panels of `panel` rows ([`MR`] for a left operand, [`NR`] for a
    /// right one). Norms are computed in f64 and rounded up, so they bound the true values.
    pub fn new(m: &[f32], rows: usize, dim: usize, panel: usize) -> Bf16Rows {
        assert!(panel > 0 && m.len() == rows * dim, "Bf16Rows: {} values for {rows} × {dim}", m.len());
        let pairs = dim.div_ceil(2);
        let panels = rows.div_ceil(panel);
        let mut data = vec![0u32; panels * pairs * panel];
        data.par_chunks_mut((pairs * panel).max(1)).enumerate().for_each(|(p, out)| {
            for r in 0..panel.min(rows.saturating_sub(p * panel)) {
                let row = &m[(p * panel + r) * dim..][..dim];
                for t in 0..pairs {
                    let lo = to_bf16(row[2 * t]) as u32;
                    let hi = if 2 * t + 1 < dim { to_bf16(row[2 * t + 1]) as u32 } else { 0 };
                    out[t * panel + r] = lo | (hi << 16);
                }
            }
        });
        let stats: Vec<(f32, f32, f32)> = m
            .par_chunks(dim.max(1))
            .take(rows)
            .map(|row| {
                let (mut n, mut d, mut t) = (0f64, 0f64, 0f64);
                for &x in row {
                    let r = from_bf16(to_bf16(x)) as f64;
                    n += x as f64 * x as f64;
                    d += (x as f64 - r) * (x as f64 - r);
                    t += r * r;
                }
                (round_up(n.sqrt()), round_up(d.sqrt()), round_up(t.sqrt()))
            })
            .collect();
        let (norms, rest): (Vec<f32>, Vec<(f32, f32)>) = stats.into_iter().map(|(n, d, t)| (n, (d, t))).unzip();
        let (residuals, rounded_norms) = rest.into_iter().unzip();
        Bf16Rows { rows, dim, pairs, panel, data, norms, residuals, rounded_norms }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// ‖x‖ per row (rounded up).
    pub fn norms(&self) -> &[f32] {
        &self.norms
    }

    /// ‖x − x̃‖ per row, x̃ the bfloat16 rounding (rounded up).
    pub fn residuals(&self) -> &[f32] {
        &self.residuals
    }

    /// ‖x̃‖ per row (rounded up).
    pub fn rounded_norms(&self) -> &[f32] {
        &self.rounded_norms
    }

    fn panel_ptr(&self, p: usize) -> *const u32 {
        self.data[p * self.pairs * self.panel..].as_ptr()
    }
}

/// The smallest f32 not below `x` (NaN stays NaN).
fn round_up(x: f64) -> f32 {
    let f = x as f32;
    if (f as f64) < x { f32::from_bits(f.to_bits() + 1) } else { f }
}

/// Worst-case error of an f32 sum of `n` terms in any order, relative to the sum of their magnitudes
/// (γₙ = n·u / (1 − n·u), u = 2⁻²⁴), with a small allowance for the products' own rounding.
pub fn accumulation_error_factor(n: usize) -> f32 {
    let u = f64::powi(2.0, -24);
    let nu = (n as f64 + 2.0) * u;
    round_up(nu / (1.0 - nu).max(0.5))
}

/// `out[r * ldc + c] = ⟨ã_r, b̃_{j0 + c}⟩` for every row `r` of `a` and `c < j1 − j0`: `a` packed with panels of
/// [`MR`] rows, `b` with panels of [`NR`], `j0` a multiple of [`NR`]. Runs on the calling thread.
pub fn screen(a: &Bf16Rows, b: &Bf16Rows, j0: usize, j1: usize, out: &mut [f32], ldc: usize) {
    assert!(a.panel == MR && b.panel == NR, "screen: operands packed with panels of {} and {}", a.panel, b.panel);
    assert!(a.dim == b.dim, "screen: dimensions {} and {}", a.dim, b.dim);
    assert!(j0.is_multiple_of(NR) && j0 <= j1 && j1 <= b.rows, "screen: columns {j0}..{j1} of {}", b.rows);
    let cols = j1 - j0;
    assert!(cols <= ldc && (a.rows == 0 || (a.rows - 1) * ldc + cols <= out.len()), "screen: output too small");
    let hw = available();
    let mut tile = [0f32; MR * NR];
    for bp in (j0 / NR)..j1.div_ceil(NR) {
        let c0 = bp * NR - j0;
        let nc = NR.min(j1 - bp * NR);
        for ap in 0..a.rows.div_ceil(MR) {
            let nr = MR.min(a.rows - ap * MR);
            // SAFETY: both panels hold `pairs` words per row of the panel (checked sizes above); `tile` is MR × NR.
            unsafe {
                #[cfg(target_arch = "x86_64")]
                if hw {
                    x86::kernel(a.pairs, a.panel_ptr(ap), b.panel_ptr(bp), tile.as_mut_ptr());
                } else {
                    kernel_portable(a.pairs, a.panel_ptr(ap), b.panel_ptr(bp), tile.as_mut_ptr());
                }
                #[cfg(not(target_arch = "x86_64"))]
                kernel_portable(a.pairs, a.panel_ptr(ap), b.panel_ptr(bp), tile.as_mut_ptr());
            }
            for r in 0..nr {
                let dst = &mut out[(ap * MR + r) * ldc + c0..][..nc];
                dst.copy_from_slice(&tile[r * NR..r * NR + nc]);
            }
        }
    }
}

/// The same tile as the AVX-512 kernel, in scalar code.
///
/// # Safety
/// `ap` valid for `pairs * MR` reads, `bp` for `pairs * NR`, `c` for `MR * NR` writes.
unsafe fn kernel_portable(pairs: usize, ap: *const u32, bp: *const u32, c: *mut f32) {
    let mut acc = [0f32; MR * NR];
    for t in 0..pairs {
        for i in 0..MR {
            // SAFETY: t < pairs, i < MR, j < NR (caller's contract).
            let a = unsafe { *ap.add(t * MR + i) };
            let (alo, ahi) = (from_bf16(a as u16), from_bf16((a >> 16) as u16));
            for j in 0..NR {
                let b = unsafe { *bp.add(t * NR + j) };
                let v = acc[i * NR + j] + ahi * from_bf16((b >> 16) as u16);
                acc[i * NR + j] = v + alo * from_bf16(b as u16);
            }
        }
    }
    // SAFETY: caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), c, MR * NR) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// One row of the tile: `c0 += a·b0`, `c1 += a·b1` with the word pair `a` broadcast from `ap[$i]`.
    macro_rules! row {
        ($a:expr, $i:expr, $b0:expr, $b1:expr, $c0:ident, $c1:ident) => {
            let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(*$a.add($i) as i32));
            $c0 = _mm512_dpbf16_ps($c0, av, $b0);
            $c1 = _mm512_dpbf16_ps($c1, av, $b1);
        };
    }

    /// 12 × 32 tile: two vectors of 16 word pairs, twelve broadcast rows, 24 accumulators (named locals: an
    /// array spills, as in the f32 kernel).
    ///
    /// # Safety
    /// AVX-512F and AVX-512 BF16 available; `ap` valid for `pairs * 12` reads, `bp` for `pairs * 32`, `c` for
    /// `12 * 32` writes.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn kernel(pairs: usize, ap: *const u32, bp: *const u32, c: *mut f32) {
        unsafe {
            let z = _mm512_setzero_ps();
            let (mut c00, mut c01, mut c10, mut c11, mut c20, mut c21, mut c30, mut c31) = (z, z, z, z, z, z, z, z);
            let (mut c40, mut c41, mut c50, mut c51, mut c60, mut c61, mut c70, mut c71) = (z, z, z, z, z, z, z, z);
            let (mut c80, mut c81, mut c90, mut c91, mut ca0, mut ca1, mut cb0, mut cb1) = (z, z, z, z, z, z, z, z);
            let (mut a, mut b) = (ap, bp);
            for _ in 0..pairs {
                let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b as *const __m512i));
                let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(16) as *const __m512i));
                row!(a, 0, b0, b1, c00, c01);
                row!(a, 1, b0, b1, c10, c11);
                row!(a, 2, b0, b1, c20, c21);
                row!(a, 3, b0, b1, c30, c31);
                row!(a, 4, b0, b1, c40, c41);
                row!(a, 5, b0, b1, c50, c51);
                row!(a, 6, b0, b1, c60, c61);
                row!(a, 7, b0, b1, c70, c71);
                row!(a, 8, b0, b1, c80, c81);
                row!(a, 9, b0, b1, c90, c91);
                row!(a, 10, b0, b1, ca0, ca1);
                row!(a, 11, b0, b1, cb0, cb1);
                a = a.add(12);
                b = b.add(32);
            }
            for (i, (x, y)) in [
                (c00, c01),
                (c10, c11),
                (c20, c21),
                (c30, c31),
                (c40, c41),
                (c50, c51),
                (c60, c61),
                (c70, c71),
                (c80, c81),
                (c90, c91),
                (ca0, ca1),
                (cb0, cb1),
            ]
            .into_iter()
            .enumerate()
            {
                _mm512_storeu_ps(c.add(i * 32), x);
                _mm512_storeu_ps(c.add(i * 32 + 16), y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 20011) as f32 / 10005.5 - 1.0
            })
            .collect()
    }

    #[test]
    fn rounding_is_to_nearest_even_and_keeps_specials() {
        assert_eq!(from_bf16(to_bf16(1.0)), 1.0);
        // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: ties to the even mantissa (1).
        assert_eq!(from_bf16(to_bf16(1.0 + 1.0 / 256.0)), 1.0);
        assert_eq!(from_bf16(to_bf16(1.0 + 3.0 / 256.0)), 1.0 + 4.0 / 256.0);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
        assert_eq!(from_bf16(to_bf16(f32::MAX)), f32::INFINITY);
        for x in values(10_000, 3) {
            let r = from_bf16(to_bf16(x));
            assert!((r - x).abs() <= x.abs() / 256.0, "{x} -> {r}");
        }
    }

    #[test]
    fn scores_match_the_rounded_products_on_edge_shapes() {
        for &(m, n, dim) in &[(1, 1, 1), (12, 32, 2), (13, 33, 7), (25, 70, 64), (5, 100, 129)] {
            let a = values(m * dim, 1);
            let b = values(n * dim, 2);
            let pa = Bf16Rows::new(&a, m, dim, MR);
            let pb = Bf16Rows::new(&b, n, dim, NR);
            for j0 in (0..n).step_by(NR) {
                let j1 = n.min(j0 + 40);
                let mut out = vec![f32::NAN; m * (j1 - j0)];
                screen(&pa, &pb, j0, j1, &mut out, j1 - j0);
                let bound = accumulation_error_factor(dim);
                for r in 0..m {
                    for c in 0..j1 - j0 {
                        let (x, y) = (&a[r * dim..][..dim], &b[(j0 + c) * dim..][..dim]);
                        let exact: f64 = x
                            .iter()
                            .zip(y)
                            .map(|(&p, &q)| from_bf16(to_bf16(p)) as f64 * from_bf16(to_bf16(q)) as f64)
                            .sum();
                        let mag: f64 = x
                            .iter()
                            .zip(y)
                            .map(|(&p, &q)| (from_bf16(to_bf16(p)) * from_bf16(to_bf16(q))).abs() as f64)
                            .sum();
                        let got = out[r * (j1 - j0) + c] as f64;
                        assert!(
                            (got - exact).abs() <= bound as f64 * mag + 1e-30,
                            "{m}x{n}x{dim} ({r},{c}): {got} vs {exact}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rows_record_their_norms_and_rounding_residuals() {
        let dim = 9;
        let m = values(3 * dim, 5);
        let p = Bf16Rows::new(&m, 3, dim, NR);
        for r in 0..3 {
            let row = &m[r * dim..][..dim];
            let n: f64 = row.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            let d: f64 = row.iter().map(|&x| (x - from_bf16(to_bf16(x))) as f64).map(|e| e * e).sum::<f64>().sqrt();
            assert!(p.norms()[r] as f64 >= n && (p.norms()[r] as f64) < n * (1.0 + 1e-6));
            assert!(p.residuals()[r] as f64 >= d && p.residuals()[r] as f64 <= n / 256.0);
            assert!(p.rounded_norms()[r] > 0.0);
        }
    }

    #[test]
    fn hardware_and_portable_kernels_agree_within_the_bound() {
        if !available() {
            return;
        }
        let (m, n, dim) = (12, 32, 300);
        let (a, b) = (values(m * dim, 7), values(n * dim, 8));
        let (pa, pb) = (Bf16Rows::new(&a, m, dim, MR), Bf16Rows::new(&b, n, dim, NR));
        let mut hw = vec![0f32; MR * NR];
        let mut sw = vec![0f32; MR * NR];
        // SAFETY: both operands are single full panels of `pairs` words per row.
        unsafe {
            x86::kernel(pa.pairs, pa.panel_ptr(0), pb.panel_ptr(0), hw.as_mut_ptr());
            kernel_portable(pa.pairs, pa.panel_ptr(0), pb.panel_ptr(0), sw.as_mut_ptr());
        }
        let bound = 2.0 * accumulation_error_factor(dim) * dim as f32;
        for (h, s) in hw.iter().zip(&sw) {
            assert!((h - s).abs() <= bound, "{h} vs {s}");
        }
    }
}
