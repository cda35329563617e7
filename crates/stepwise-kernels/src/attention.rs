//! One head of scaled dot-product attention over one short sequence, without a mask:
//! `out = softmax(Q·Kᵀ · scale) · V`.
//!
//! Why not two [`crate::gemm`] calls: a BERT head over a 48-token text is 150 K multiply-adds, and packing, edge
//! tiles and dispatch made attention 10% of MiniLM's time for 2% of its arithmetic. The AVX-512 kernel keeps
//! `Kᵀ` transposed in a small buffer and runs register tiles of 4 query rows; other CPUs (or head sizes that are not
//! a multiple of 16) take the GEMM path. Both are independent of the thread count; they differ from each other in
//! the last bits (different summation order), so a machine gives the same results on every run.

use crate::gemm::{GemmError, MatRef, gemm};
use crate::math::softmax_row;

/// `out (len × dh, row-major) = softmax(Q·Kᵀ · scale) · V` for `len × dh` views `q`, `k`, `v` whose rows are `ld`
/// values apart (one head's columns of a packed QKV matrix); `buf` is work space kept by the caller.
#[allow(clippy::too_many_arguments)]
pub fn attention_head(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    ld: usize,
    len: usize,
    dh: usize,
    scale: f32,
    out: &mut [f32],
    buf: &mut Vec<f32>,
) -> Result<(), GemmError> {
    if len == 0 || dh == 0 {
        return Ok(());
    }
    let need = (len - 1) * ld + dh;
    if q.len() < need || k.len() < need || v.len() < need || dh > ld || out.len() < len * dh {
        return Err(GemmError(format!("attention: views of {len} × {dh} (rows {ld} apart) reach past their data")));
    }
    #[cfg(target_arch = "x86_64")]
    if dh.is_multiple_of(16) && crate::gemm::Isa::detect() == crate::gemm::Isa::Avx512 {
        let lp = len.div_ceil(16) * 16;
        buf.resize(dh * lp + len * lp, 0.0);
        // SAFETY: AVX-512F detected; bounds checked above; `buf` holds the transposed keys and the scores.
        unsafe { x86::attention_avx512(q, k, v, ld, len, dh, scale, out, buf) };
        return Ok(());
    }
    buf.resize(len * len, 0.0);
    let q = MatRef { data: q, rows: len, cols: dh, rs: ld, cs: 1 };
    let kt = MatRef { data: k, rows: dh, cols: len, rs: 1, cs: ld };
    let v = MatRef { data: v, rows: len, cols: dh, rs: ld, cs: 1 };
    gemm(q, kt, buf, false, false)?;
    for row in buf.chunks_mut(len) {
        softmax_row(row, &[], scale);
    }
    gemm(MatRef::row_major(buf, len, len), v, &mut out[..len * dh], false, false)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::math::x86::exp_v;

    /// `row[..len] = softmax(row[..len] · scale)` in place, on a row padded to whole vectors (padding set to 0):
    /// one pass for the maximum, one for the exponentials and their sum, one to normalise.
    ///
    /// # Safety
    /// AVX-512F available; `row` valid for `len` rounded up to 16 values.
    #[target_feature(enable = "avx512f")]
    unsafe fn softmax_padded(row: *mut f32, len: usize, scale: f32) {
        unsafe {
            let s = _mm512_set1_ps(scale);
            let mask = |j: usize| -> __mmask16 { ((1u32 << (len - j).min(16)) - 1) as u16 };
            let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
            for j in (0..len).step_by(16) {
                let x = _mm512_mul_ps(_mm512_loadu_ps(row.add(j)), s);
                max = _mm512_mask_max_ps(max, mask(j), max, x);
            }
            let m = _mm512_set1_ps(_mm512_reduce_max_ps(max));
            let mut sum = _mm512_setzero_ps();
            for j in (0..len).step_by(16) {
                let e = exp_v(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(row.add(j)), s), m));
                let e = _mm512_maskz_mov_ps(mask(j), e);
                sum = _mm512_add_ps(sum, e);
                _mm512_storeu_ps(row.add(j), e);
            }
            let inv = _mm512_set1_ps(1.0 / _mm512_reduce_add_ps(sum));
            for j in (0..len).step_by(16) {
                _mm512_storeu_ps(row.add(j), _mm512_mul_ps(_mm512_loadu_ps(row.add(j)), inv));
            }
        }
    }

    /// Query rows per register tile.
    const R: usize = 4;

    /// # Safety
    /// AVX-512F available; `dh % 16 == 0`; the views hold `len` rows of `dh` values `ld` apart; `out` holds
    /// `len * dh` values; `buf` holds `dh * lp + len * lp` values with `lp = len` rounded up to 16.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attention_avx512(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        ld: usize,
        len: usize,
        dh: usize,
        scale: f32,
        out: &mut [f32],
        buf: &mut [f32],
    ) {
        let lp = len.div_ceil(16) * 16;
        let (kt, scores) = buf.split_at_mut(dh * lp);
        // Kᵀ, zero-padded to whole vectors of keys.
        for d in 0..dh {
            let row = &mut kt[d * lp..(d + 1) * lp];
            for (t, x) in row[..len].iter_mut().enumerate() {
                *x = k[t * ld + d];
            }
            row[len..].fill(0.0);
        }
        let (qp, kp, vp) = (q.as_ptr(), kt.as_ptr(), v.as_ptr());
        let sp = scores.as_mut_ptr();
        let op = out.as_mut_ptr();
        // SAFETY: every pointer offset below stays inside the sizes of the contract.
        unsafe {
            let mut i = 0;
            while i < len {
                let rows = R.min(len - i);
                // Scores of rows i..i+rows, 16 keys at a time.
                for j in (0..lp).step_by(16) {
                    let mut acc = [_mm512_setzero_ps(); R];
                    for d in 0..dh {
                        let kv = _mm512_loadu_ps(kp.add(d * lp + j));
                        for (r, a) in acc.iter_mut().enumerate().take(rows) {
                            *a = _mm512_fmadd_ps(_mm512_set1_ps(*qp.add((i + r) * ld + d)), kv, *a);
                        }
                    }
                    for (r, a) in acc.iter().enumerate().take(rows) {
                        let keep = (len - j).min(16);
                        _mm512_mask_storeu_ps(sp.add((i + r) * lp + j), ((1u32 << keep) - 1) as u16, *a);
                    }
                }
                for r in 0..rows {
                    softmax_padded(sp.add((i + r) * lp), len, scale);
                }
                let sp = scores.as_ptr();
                // Outputs of rows i..i+rows, 16 dimensions at a time.
                for c in (0..dh).step_by(16) {
                    let mut acc = [_mm512_setzero_ps(); R];
                    for t in 0..len {
                        let vv = _mm512_loadu_ps(vp.add(t * ld + c));
                        for (r, a) in acc.iter_mut().enumerate().take(rows) {
                            *a = _mm512_fmadd_ps(_mm512_set1_ps(*sp.add((i + r) * lp + t)), vv, *a);
                        }
                    }
                    for (r, a) in acc.iter().enumerate().take(rows) {
                        _mm512_storeu_ps(op.add((i + r) * dh + c), *a);
                    }
                }
                i += rows;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// softmax(Q·Kᵀ·scale)·V in f64, straight from the definition.
    fn naive(q: &[f32], k: &[f32], v: &[f32], ld: usize, len: usize, dh: usize, scale: f32) -> Vec<f64> {
        let mut out = vec![0f64; len * dh];
        for i in 0..len {
            let s: Vec<f64> = (0..len)
                .map(|j| (0..dh).map(|d| q[i * ld + d] as f64 * k[j * ld + d] as f64).sum::<f64>() * scale as f64)
                .collect();
            let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let z: f64 = e.iter().sum();
            for j in 0..len {
                for d in 0..dh {
                    out[i * dh + d] += e[j] / z * v[j * ld + d] as f64;
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_definition_for_odd_lengths_and_both_paths() {
        for &(len, dh) in &[(1, 16), (5, 32), (17, 32), (48, 32), (33, 64), (7, 8), (3, 12)] {
            let ld = 3 * dh + 5;
            let data: Vec<f32> = (0..len * ld).map(|i| ((i * 7919 % 113) as f32 - 56.0) / 40.0).collect();
            let (q, k, v) = (&data[..], &data[dh..], &data[2 * dh..]);
            let want = naive(q, k, v, ld, len, dh, 0.17);
            let mut out = vec![0f32; len * dh];
            let mut buf = Vec::new();
            attention_head(q, k, v, ld, len, dh, 0.17, &mut out, &mut buf).unwrap();
            let diff = out.iter().zip(&want).map(|(a, b)| (*a as f64 - b).abs()).fold(0f64, f64::max);
            assert!(diff < 1e-5, "len {len}, dh {dh}: {diff} from the definition");
        }
    }

    #[test]
    fn refuses_views_past_their_data() {
        let data = vec![0f32; 10];
        let mut out = vec![0f32; 64];
        let err = attention_head(&data, &data, &data, 16, 2, 16, 1.0, &mut out, &mut Vec::new()).unwrap_err();
        assert!(err.0.contains("reach past"), "{err}");
    }
}
