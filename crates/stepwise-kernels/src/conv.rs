//! Depthwise convolution of one channel plane (EfficientNet-Lite's 3×3 and 5×5, stride 1 or 2, TensorFlow "SAME"
//! padding), with the folded batch-norm bias and the ReLU6 clamp fused in.
//!
//! Why a kernel here: compiled for the baseline x86-64 target, the encoders' loops ran on 4-wide SSE and swept the
//! whole plane once per tap (a 112×112 plane does not fit in L1), and the depthwise layers took 57% of
//! EfficientNet-Lite0's time. Here each output row is finished while it is in L1, stride 2 reads de-interleaved
//! (even / odd column) copies so every tap is a contiguous run, and the loops are compiled for AVX-512 when the
//! CPU has it (the same operations in the same order, so the same bits, as the portable build).

#[cfg(target_arch = "x86_64")]
use crate::math::avx512;

/// `out (oh × ow) = clamp(bias + Σ w[ky][kx] · x[oy·s + ky − pad_top][ox·s + kx − pad_left], lo, hi)` over the
/// `k × k` taps, zeros outside the `h × w` plane. `scratch` is work space kept by the caller.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_plane(
    plane: &[f32],
    (h, w): (usize, usize),
    weights: &[f32],
    k: usize,
    stride: usize,
    (pad_top, pad_left): (usize, usize),
    bias: f32,
    (lo, hi): (f32, f32),
    out: &mut [f32],
    (oh, ow): (usize, usize),
    scratch: &mut Vec<f32>,
) {
    assert!(plane.len() >= h * w && weights.len() >= k * k && out.len() >= oh * ow && stride >= 1);
    if oh == 0 || ow == 0 {
        return;
    }
    // Padded rows, each split into `stride` phases: phase r holds columns r, r + s, r + 2s, …
    let ph = (oh - 1) * stride + k;
    let pw = (ow - 1) * stride + k;
    let phase_w = pw.div_ceil(stride);
    let row_len = stride * phase_w;
    // Only the padding needs zeros; a buffer of the right size from the previous plane of the layer keeps its
    // zeros there (rows and columns outside the copied plane are never written).
    // The geometry is recorded after the rows (sizes below 2^24 are exact in f32).
    let key = [h, w, k, stride, pad_top, pad_left, oh, ow].map(|v| v as f32);
    let body = ph * row_len;
    if scratch.len() != body + key.len() || scratch[body..] != key {
        scratch.clear();
        scratch.resize(body + key.len(), 0.0);
        scratch[body..].copy_from_slice(&key);
    }
    for y in 0..h {
        let py = y + pad_top;
        if py >= ph {
            break;
        }
        let dst = &mut scratch[py * row_len..(py + 1) * row_len];
        let src = &plane[y * w..(y + 1) * w];
        if stride == 1 {
            let n = w.min(pw - pad_left.min(pw));
            dst[pad_left..pad_left + n].copy_from_slice(&src[..n]);
            continue;
        }
        // Column x lands in phase (x + pad_left) % stride at (x + pad_left) / stride.
        #[cfg(target_arch = "x86_64")]
        if stride == 2 && avx512() {
            // The even columns of the plane fill one phase, the odd ones the other: one vector split per 32 values
            // (a scalar scatter took a tenth of EfficientNet's time on the 112 × 112 stride-2 layer).
            let (phase0, phase1) = dst.split_at_mut(phase_w);
            let range = |phase: usize| {
                let first = (phase + 2 - pad_left % 2) % 2;
                let (start, end) = ((first + pad_left) / 2, (pw - phase).div_ceil(2).min(phase_w));
                (first, start.min(end)..end)
            };
            let ((f0, r0), (_, r1)) = (range(0), range(1));
            let (p0, p1) = (&mut phase0[r0], &mut phase1[r1]);
            let (even, odd) = if f0 == 0 { (p0, p1) } else { (p1, p0) };
            // SAFETY: AVX-512F checked.
            unsafe { x86::split_even_odd(src, even, odd) };
            continue;
        }
        for phase in 0..stride {
            let first = (phase + stride - pad_left % stride) % stride;
            let out = &mut dst[phase * phase_w..(phase + 1) * phase_w];
            let start = (first + pad_left) / stride;
            let end = (pw - phase).div_ceil(stride).min(phase_w);
            for (o, &v) in out[start.min(end)..end].iter_mut().zip(src.iter().skip(first).step_by(stride)) {
                *o = v;
            }
        }
    }
    let padded = &scratch[..];
    let geometry = Geometry { k, stride, row_len, phase_w, oh, ow };
    #[cfg(target_arch = "x86_64")]
    if avx512() && k <= x86::MAX_K {
        // SAFETY: AVX-512F checked; `padded` holds `(oh - 1) * stride + k` rows of `row_len`, `out` `oh * ow`.
        return unsafe { x86::rows_avx512(padded, weights, &geometry, bias, (lo, hi), out) };
    }
    rows(padded, weights, &geometry, bias, (lo, hi), out)
}

struct Geometry {
    k: usize,
    stride: usize,
    row_len: usize,
    phase_w: usize,
    oh: usize,
    ow: usize,
}

/// The output rows from the padded, phase-split plane (portable; [`x86::rows_avx512`] does the same per lane).
fn rows(padded: &[f32], weights: &[f32], g: &Geometry, bias: f32, (lo, hi): (f32, f32), out: &mut [f32]) {
    let Geometry { k, stride, row_len, phase_w, oh, ow } = *g;
    for oy in 0..oh {
        let orow = &mut out[oy * ow..(oy + 1) * ow];
        orow.fill(bias);
        for ky in 0..k {
            let prow = &padded[(oy * stride + ky) * row_len..][..row_len];
            for kx in 0..k {
                let wv = weights[ky * k + kx];
                let src = &prow[(kx % stride) * phase_w + kx / stride..][..ow];
                for (o, &x) in orow.iter_mut().zip(src) {
                    *o = wv.mul_add(x, *o);
                }
            }
        }
        for o in orow.iter_mut() {
            *o = o.clamp(lo, hi);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::Geometry;

    /// The largest kernel side of the vector path (its taps live in registers and a stack array).
    pub const MAX_K: usize = 7;

    /// `even[i] = src[2i]`, `odd[i] = src[2i + 1]` for as many values as both sides have.
    ///
    /// # Safety
    /// AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn split_even_odd(src: &[f32], even: &mut [f32], odd: &mut [f32]) {
        let ne = even.len().min(src.len().div_ceil(2));
        let no = odd.len().min(src.len() / 2);
        let ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let mut i = 0;
        while 2 * i + 32 <= src.len() && i + 16 <= ne && i + 16 <= no {
            // SAFETY: 32 source values from 2i, 16 destination values from i on each side (checked above).
            unsafe {
                let a = _mm512_loadu_ps(src.as_ptr().add(2 * i));
                let b = _mm512_loadu_ps(src.as_ptr().add(2 * i + 16));
                _mm512_storeu_ps(even.as_mut_ptr().add(i), _mm512_permutex2var_ps(a, ie, b));
                _mm512_storeu_ps(odd.as_mut_ptr().add(i), _mm512_permutex2var_ps(a, io, b));
            }
            i += 16;
        }
        for j in i..ne {
            even[j] = src[2 * j];
        }
        for j in i..no {
            odd[j] = src[2 * j + 1];
        }
    }

    /// Output rows computed at once: independent accumulators hide the FMA latency (one accumulator per run of
    /// 16 outputs made a k²-long dependency chain, and the kernel ran at a tenth of its FMA rate).
    const R: usize = 4;

    /// [`super::rows`] with runs of 16 output columns of `R` rows held in registers across all taps (masked at the
    /// end of a row): per tap, one load and one FMA per row; the same operations per lane in the same order as the
    /// portable code.
    ///
    /// # Safety
    /// AVX-512F available; sizes as in [`super::depthwise_plane`].
    #[target_feature(enable = "avx512f")]
    pub unsafe fn rows_avx512(
        padded: &[f32],
        weights: &[f32],
        g: &Geometry,
        bias: f32,
        clamp: (f32, f32),
        out: &mut [f32],
    ) {
        // SAFETY: forwarded contract; each instance is the same code with the kernel side known.
        unsafe {
            match g.k {
                3 => rows_k::<3>(padded, weights, g, bias, clamp, out),
                5 => rows_k::<5>(padded, weights, g, bias, clamp, out),
                _ => rows_k::<MAX_K>(padded, weights, g, bias, clamp, out),
            }
        }
    }

    /// [`rows_avx512`] for kernels of side at most `K` (exactly `K` unrolls the taps).
    #[target_feature(enable = "avx512f")]
    unsafe fn rows_k<const K: usize>(
        padded: &[f32],
        weights: &[f32],
        g: &Geometry,
        bias: f32,
        (lo, hi): (f32, f32),
        out: &mut [f32],
    ) {
        let Geometry { k, stride, row_len, phase_w, oh, ow } = *g;
        assert!(k <= K && padded.len() >= ((oh - 1) * stride + k) * row_len && out.len() >= oh * ow);
        assert!(weights.len() >= k * k);
        let (lo, hi, b) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi), _mm512_set1_ps(bias));
        let (pp, op) = (padded.as_ptr(), out.as_mut_ptr());
        // Where tap (ky, kx) starts in a padded row, and its weight in all lanes.
        let mut offsets = [[0usize; K]; K];
        let mut taps = [[_mm512_setzero_ps(); K]; K];
        for ky in 0..k {
            for kx in 0..k {
                offsets[ky][kx] = (kx % stride) * phase_w + kx / stride;
                taps[ky][kx] = _mm512_set1_ps(weights[ky * k + kx]);
            }
        }
        let mut oy = 0;
        while oy < oh {
            let rows = R.min(oh - oy);
            for x0 in (0..ow).step_by(16) {
                let m: __mmask16 = if ow - x0 >= 16 { 0xffff } else { ((1u32 << (ow - x0)) - 1) as u16 };
                let mut acc = [b; R];
                for ky in 0..k {
                    for kx in 0..k {
                        let (tap, off) = (taps[ky][kx], offsets[ky][kx] + x0);
                        for (r, a) in acc.iter_mut().enumerate().take(rows) {
                            let row = ((oy + r) * stride + ky) * row_len;
                            // SAFETY: tap reads end at offset + ow - 1 < row_len within row `(oy + r) * stride +
                            // ky` < the padded rows; masked lanes are not read.
                            let x = unsafe { _mm512_maskz_loadu_ps(m, pp.add(row + off)) };
                            *a = _mm512_fmadd_ps(tap, x, *a);
                        }
                    }
                }
                for (r, a) in acc.iter().enumerate().take(rows) {
                    let v = _mm512_min_ps(_mm512_max_ps(*a, lo), hi);
                    // SAFETY: columns x0.. of row oy + r, masked to the row's end.
                    unsafe { _mm512_mask_storeu_ps(op.add((oy + r) * ow + x0), m, v) };
                }
            }
            oy += rows;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_portable_rows_agree_bit_for_bit() {
        let (h, w, k) = (13usize, 29usize, 5usize);
        for stride in [1, 2] {
            let (oh, ow) = (h.div_ceil(stride), w.div_ceil(stride));
            let plane: Vec<f32> = (0..h * w).map(|i| ((i * 7919 % 97) as f32 - 48.0) * 0.07).collect();
            let wts: Vec<f32> = (0..k * k).map(|i| ((i * 31 % 17) as f32 - 8.0) * 0.11).collect();
            let mut fast = vec![0f32; oh * ow];
            let mut scratch = Vec::new();
            depthwise_plane(
                &plane,
                (h, w),
                &wts,
                k,
                stride,
                (2, 2),
                0.5,
                (-1.0, 6.0),
                &mut fast,
                (oh, ow),
                &mut scratch,
            );
            let ph = (oh - 1) * stride + k;
            let pw = (ow - 1) * stride + k;
            let phase_w = pw.div_ceil(stride);
            let g = Geometry { k, stride, row_len: stride * phase_w, phase_w, oh, ow };
            let mut portable = vec![0f32; oh * ow];
            rows(&scratch[..ph * g.row_len], &wts, &g, 0.5, (-1.0, 6.0), &mut portable);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&portable), "stride {stride}");
        }
    }

    #[test]
    fn matches_a_naive_same_convolution() {
        // One work buffer for every case, in an order that changes the geometry back and forth.
        let mut scratch = vec![f32::NAN; 3];
        for &(h, w, k, stride) in &[
            (7usize, 6usize, 3usize, 1usize),
            (7, 6, 3, 2),
            (15, 15, 5, 2),
            (14, 9, 5, 1),
            (1, 1, 3, 1),
            (2, 3, 5, 2),
            (7, 6, 3, 1),
            (15, 15, 5, 2),
        ] {
            let oh = h.div_ceil(stride);
            let ow = w.div_ceil(stride);
            let pt = ((oh - 1) * stride + k).saturating_sub(h) / 2;
            let pl = ((ow - 1) * stride + k).saturating_sub(w) / 2;
            let plane: Vec<f32> = (0..h * w).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.3).collect();
            let wts: Vec<f32> = (0..k * k).map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.5).collect();
            let mut out = vec![0f32; oh * ow];
            depthwise_plane(
                &plane,
                (h, w),
                &wts,
                k,
                stride,
                (pt, pl),
                0.25,
                (0.0, 6.0),
                &mut out,
                (oh, ow),
                &mut scratch,
            );
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0.25f64;
                    for ky in 0..k {
                        for kx in 0..k {
                            let iy = (oy * stride + ky) as isize - pt as isize;
                            let ix = (ox * stride + kx) as isize - pl as isize;
                            if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                acc += wts[ky * k + kx] as f64 * plane[iy as usize * w + ix as usize] as f64;
                            }
                        }
                    }
                    let want = acc.clamp(0.0, 6.0);
                    let got = out[oy * ow + ox] as f64;
                    assert!((got - want).abs() < 1e-5, "{h}x{w} k{k} s{stride} ({oy},{ox}): {got} vs {want}");
                }
            }
        }
    }
}
