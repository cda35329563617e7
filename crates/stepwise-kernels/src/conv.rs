//! Depthwise convolution of one channel plane (EfficientNet-Lite's 3×3 and 5×5, stride 1 or 2, TensorFlow "SAME"
//! padding), with the folded batch-norm bias and the ReLU6 clamp fused in.
//!
//! Why a kernel here: compiled for the baseline x86-64 target, the encoders' loops ran on 4-wide SSE and swept the
//! whole plane once per tap (a 112×112 plane does not fit in L1), and the depthwise layers took most of
//! EfficientNet-Lite0's time (docs/performance.md). Here each output row is finished while it is in L1, stride 2 reads de-interleaved
//! (even / odd column) copies so every tap is a contiguous run, and the loops are compiled for AVX-512 when the
//! CPU has it (the same operations in the same order, so the same bits, as the portable build).
//!
//! [`depthwise_channels_last`] is the same convolution over a channels-last map (`[y][x][channel]`): the vector
//! lanes are channels, so a 7 × 7 map fills every lane and stride 2 needs no de-interleaving. On planes that
//! small, 7 of 16 lanes did work and the 7 × 7 depthwise layers ran far slower than onnxruntime's
//! channel-blocked ones.

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

/// [`depthwise_plane`] over every channel of a channels-last map: pixel (y, x) of channel `ch` at
/// `map[(y·w + x)·c + ch]`, tap (ky, kx) of channel `ch` at `weights[(ky·k + kx)·c + ch]`, its bias `bias[ch]`;
/// writes `out[(oy·ow + ox)·c + ch]`. Each channel's values are those of [`depthwise_plane`] on its own plane, bit
/// for bit (for kernels of side 3, 5 or 7 and strides 1 or 2, which run vectorised in both on AVX-512, or on a CPU
/// without it; elsewhere a clamp to a zero bound may keep the other sign of a zero): the same taps in the same
/// order, zeros read outside the map (the AVX-512 path copies one run of 16 channels at a time into a small
/// zero-bordered map, the border zeroed once per call; a zero-filled padded copy of the whole map per call cost as
/// much as the convolution on 7 × 7 maps).
#[allow(clippy::too_many_arguments)]
pub fn depthwise_channels_last(
    map: &[f32],
    (h, w): (usize, usize),
    c: usize,
    weights: &[f32],
    bias: &[f32],
    k: usize,
    stride: usize,
    (pad_top, pad_left): (usize, usize),
    (lo, hi): (f32, f32),
    out: &mut [f32],
    (oh, ow): (usize, usize),
) {
    assert!(map.len() >= h * w * c && weights.len() >= k * k * c && bias.len() >= c && stride >= 1);
    assert!(out.len() >= oh * ow * c);
    if oh == 0 || ow == 0 || c == 0 {
        return;
    }
    let g = ChannelsLast { h, w, c, k, stride, pad_top, pad_left, oh, ow };
    #[cfg(target_arch = "x86_64")]
    if avx512() && matches!(k, 3 | 5 | 7) && matches!(stride, 1 | 2) {
        // SAFETY: AVX-512F checked; sizes asserted above.
        return unsafe { x86::channels_last_avx512(map, weights, bias, &g, (lo, hi), out) };
    }
    channels_last(map, weights, bias, &g, (lo, hi), out)
}

/// The geometry of a channels-last map and its output.
struct ChannelsLast {
    h: usize,
    w: usize,
    c: usize,
    k: usize,
    stride: usize,
    pad_top: usize,
    pad_left: usize,
    oh: usize,
    ow: usize,
}

impl ChannelsLast {
    /// The map row (or column) that output row `o` reads at tap `t`, if inside the map.
    fn source(o: usize, t: usize, stride: usize, pad: usize, size: usize) -> Option<usize> {
        (o * stride + t).checked_sub(pad).filter(|&i| i < size)
    }
}

/// [`depthwise_channels_last`], portable ([`x86::channels_last_avx512`] does the same per lane).
fn channels_last(map: &[f32], weights: &[f32], bias: &[f32], g: &ChannelsLast, (lo, hi): (f32, f32), out: &mut [f32]) {
    let ChannelsLast { h, w, c, k, stride, pad_top, pad_left, oh, ow } = *g;
    let zeros = vec![0f32; c];
    for oy in 0..oh {
        for ox in 0..ow {
            let o = &mut out[(oy * ow + ox) * c..][..c];
            o.copy_from_slice(&bias[..c]);
            for ky in 0..k {
                let iy = ChannelsLast::source(oy, ky, stride, pad_top, h);
                for kx in 0..k {
                    let ix = ChannelsLast::source(ox, kx, stride, pad_left, w);
                    let wv = &weights[(ky * k + kx) * c..][..c];
                    let x = match (iy, ix) {
                        (Some(iy), Some(ix)) => &map[(iy * w + ix) * c..][..c],
                        _ => &zeros[..],
                    };
                    o.iter_mut().zip(x).zip(wv).for_each(|((o, &x), &w)| *o = w.mul_add(x, *o));
                }
            }
            o.iter_mut().for_each(|o| *o = o.clamp(lo, hi));
        }
    }
}

/// `even[i] = src[2i]`, `odd[i] = src[2i + 1]` for as many values as each side holds: the two column phases a
/// stride-2 convolution reads (one vector permute per 32 values where the CPU has AVX-512).
pub fn deinterleave(src: &[f32], even: &mut [f32], odd: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: AVX-512F checked.
        return unsafe { x86::split_even_odd(src, even, odd) };
    }
    even.iter_mut().zip(src.iter().step_by(2)).for_each(|(e, &v)| *e = v);
    odd.iter_mut().zip(src.iter().skip(1).step_by(2)).for_each(|(o, &v)| *o = v);
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

    use super::{ChannelsLast, Geometry};

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
    /// end of a row), the same operations per lane in the same order as the portable code: sides 3 and 5 with
    /// stride 1 or 2 through [`sliding_rows`], the rest through [`rows_k`] (per tap, one load and one FMA per row).
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
        // SAFETY: forwarded contract; each instance is the same code with the kernel side (and stride) known.
        unsafe {
            match (g.k, g.stride) {
                (3, 1) => sliding_rows::<3, 1, 8>(padded, weights, g, bias, clamp, out),
                (3, 2) => sliding_rows::<3, 2, 8>(padded, weights, g, bias, clamp, out),
                (5, 1) => sliding_rows::<5, 1, 4>(padded, weights, g, bias, clamp, out),
                (5, 2) => sliding_rows::<5, 2, 4>(padded, weights, g, bias, clamp, out),
                // Side 7, or a stride above 2 (EfficientNet has neither).
                _ => rows_k::<MAX_K>(padded, weights, g, bias, clamp, out),
            }
        }
    }

    /// [`rows_k`] for side `K` and stride `S` known, `R` output rows at a time: each padded row a block of output
    /// rows reads is loaded once per tap column and multiplied into every row of the block that uses it (row `r`
    /// uses padded row `r·S + ky` for tap row `ky`), where `rows_k` loaded it once per output row and tap — 18
    /// loads instead of 72 for eight rows of a 3 × 3 kernel. Each output still adds its taps in the order `(ky,
    /// kx)`, so the bits are `rows_k`'s. The rows left over after the blocks of `R` run one at a time.
    #[target_feature(enable = "avx512f")]
    unsafe fn sliding_rows<const K: usize, const S: usize, const R: usize>(
        padded: &[f32],
        weights: &[f32],
        g: &Geometry,
        bias: f32,
        (lo, hi): (f32, f32),
        out: &mut [f32],
    ) {
        let Geometry { k, stride, row_len, phase_w, oh, ow } = *g;
        assert!(k == K && stride == S && padded.len() >= ((oh - 1) * stride + k) * row_len && out.len() >= oh * ow);
        assert!(weights.len() >= k * k);
        let mut taps = [[_mm512_setzero_ps(); K]; K];
        for (ky, row) in taps.iter_mut().enumerate() {
            for (kx, t) in row.iter_mut().enumerate() {
                *t = _mm512_set1_ps(weights[ky * K + kx]);
            }
        }
        let block = SlidingBlock {
            padded: padded.as_ptr(),
            out: out.as_mut_ptr(),
            row_len,
            phase_w,
            ow,
            bias: _mm512_set1_ps(bias),
            lo: _mm512_set1_ps(lo),
            hi: _mm512_set1_ps(hi),
        };
        let mut oy = 0;
        while oy + R <= oh {
            // SAFETY: rows oy..oy + R are output rows; the padded rows they read exist (asserted above).
            unsafe { block.rows::<K, S, R>(&taps, oy) };
            oy += R;
        }
        while oy < oh {
            // SAFETY: as above, for one row.
            unsafe { block.rows::<K, S, 1>(&taps, oy) };
            oy += 1;
        }
    }

    /// What [`sliding_rows`]' blocks share.
    struct SlidingBlock {
        padded: *const f32,
        out: *mut f32,
        row_len: usize,
        phase_w: usize,
        ow: usize,
        bias: __m512,
        lo: __m512,
        hi: __m512,
    }

    impl SlidingBlock {
        /// Output rows `oy..oy + R`, every run of 16 columns (the last one masked).
        ///
        /// # Safety
        /// AVX-512F available; rows `oy..oy + R` exist in the output and padded rows `oy·S..(oy + R - 1)·S + K`
        /// in the padded plane.
        #[inline(always)]
        // `kx` places the load as well as picking the tap (of a row chosen per output row).
        #[allow(clippy::needless_range_loop)]
        unsafe fn rows<const K: usize, const S: usize, const R: usize>(&self, taps: &[[__m512; K]; K], oy: usize) {
            let ow = self.ow;
            let mut x0 = 0;
            while x0 < ow {
                let m: __mmask16 = if ow - x0 >= 16 { 0xffff } else { ((1u32 << (ow - x0)) - 1) as u16 };
                let mut acc = [self.bias; R];
                // Padded row oy·S + j feeds output row r through tap row j − r·S.
                for j in 0..(R - 1) * S + K {
                    let row = (oy * S + j) * self.row_len;
                    for kx in 0..K {
                        let off = (kx % S) * self.phase_w + kx / S + x0;
                        // SAFETY: a tap's run ends at offset + ow − 1 < row_len in an existing padded row; masked
                        // lanes are not read.
                        let x = unsafe { _mm512_maskz_loadu_ps(m, self.padded.add(row + off)) };
                        for (r, a) in acc.iter_mut().enumerate() {
                            if j >= r * S && j - r * S < K {
                                // SAFETY: AVX-512F available (the caller's contract).
                                *a = unsafe { _mm512_fmadd_ps(taps[j - r * S][kx], x, *a) };
                            }
                        }
                    }
                }
                for (r, a) in acc.iter().enumerate() {
                    // SAFETY: AVX-512F available; columns x0.. of output row oy + r, masked to the row's end.
                    unsafe {
                        let v = _mm512_min_ps(_mm512_max_ps(*a, self.lo), self.hi);
                        _mm512_mask_storeu_ps(self.out.add((oy + r) * ow + x0), m, v)
                    };
                }
                x0 += 16;
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

    /// [`super::channels_last`] with 16 channels per vector (masked for the last ones) and `R` outputs of a row
    /// in registers across all taps, the block's `K × K` tap vectors with them as far as the 32 registers go (the
    /// 7 × 7 ones spill to the stack). Pixels outside the map are the zero border of [`channels_last_k`]'s copy
    /// (zeros, as the portable code reads).
    ///
    /// # Safety
    /// AVX-512F available; sizes as in [`super::depthwise_channels_last`]; a kernel side of 3, 5 or 7.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn channels_last_avx512(
        map: &[f32],
        weights: &[f32],
        bias: &[f32],
        g: &ChannelsLast,
        clamp: (f32, f32),
        out: &mut [f32],
    ) {
        // SAFETY: forwarded contract; each instance is the same code with the kernel side and stride known.
        unsafe {
            match (g.k, g.stride) {
                (3, 1) => channels_last_k::<3, 7, 1>(map, weights, bias, g, clamp, out),
                (3, 2) => channels_last_k::<3, 7, 2>(map, weights, bias, g, clamp, out),
                (5, 1) => channels_last_k::<5, 7, 1>(map, weights, bias, g, clamp, out),
                (5, 2) => channels_last_k::<5, 7, 2>(map, weights, bias, g, clamp, out),
                (7, 1) => channels_last_k::<7, 4, 1>(map, weights, bias, g, clamp, out),
                (7, 2) => channels_last_k::<7, 4, 2>(map, weights, bias, g, clamp, out),
                _ => unreachable!("checked by the caller"),
            }
        }
    }

    /// [`channels_last_avx512`] for kernels of side `K`, `R` outputs at once.
    ///
    /// Each run of 16 channels is first copied into a zero-bordered map of its own (`[y][x][16]`, padding
    /// included, the border zeroed once per call): the taps then read whole aligned vectors at a fixed pixel
    /// stride with no masks, where reading the map in place needed a lane mask per pixel at the borders and a
    /// pointer per tap row at a stride of `c` channels (the bookkeeping took more time than the multiply-adds on
    /// 9 × 9 maps). A pixel of the padding adds `tap · 0`, as a padded plane does.
    #[target_feature(enable = "avx512f")]
    unsafe fn channels_last_k<const K: usize, const R: usize, const S: usize>(
        map: &[f32],
        weights: &[f32],
        bias: &[f32],
        g: &ChannelsLast,
        (lo, hi): (f32, f32),
        out: &mut [f32],
    ) {
        const { assert!(R >= 1 && R <= 7, "the runs of a row have 1 to 7 outputs") };
        let ChannelsLast { h, w, c, k, stride, pad_top, pad_left, oh, ow } = *g;
        assert!(k == K && stride == S && weights.len() >= k * k * c && bias.len() >= c && out.len() >= oh * ow * c);
        assert!(map.len() >= h * w * c);
        let (ph, pw) = ((oh - 1) * S + K, (ow - 1) * S + K);
        let mut padded = vec![0f32; ph * pw * 16];
        // The map's rows and columns that land inside the padded map (SAME padding may leave the last ones out).
        let (rows, cols) = (h.min(ph.saturating_sub(pad_top)), w.min(pw.saturating_sub(pad_left)));
        let (lo, hi) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
        for c0 in (0..c).step_by(16) {
            let m: __mmask16 = if c - c0 >= 16 { 0xffff } else { ((1u32 << (c - c0)) - 1) as u16 };
            // SAFETY: channels c0.. of each tap, of the bias and of the map's pixels, masked to `c`; padded pixel
            // (y + pad_top, x + pad_left) lies inside `padded` for y < rows, x < cols.
            let (taps, b) = unsafe {
                for y in 0..rows {
                    let src = map.as_ptr().add(y * w * c + c0);
                    let dst = padded.as_mut_ptr().add(((y + pad_top) * pw + pad_left) * 16);
                    for x in 0..cols {
                        _mm512_storeu_ps(dst.add(x * 16), _mm512_maskz_loadu_ps(m, src.add(x * c)));
                    }
                }
                let mut taps = [[_mm512_setzero_ps(); K]; K];
                for (t, tap) in taps.iter_mut().flatten().enumerate() {
                    *tap = _mm512_maskz_loadu_ps(m, weights.as_ptr().add(t * c + c0));
                }
                (taps, _mm512_maskz_loadu_ps(m, bias.as_ptr().add(c0)))
            };
            let g = Chunk { padded: padded.as_ptr(), pw, op: out.as_mut_ptr(), c, c0, m, ow, lo, hi, b };
            // A row in runs of nearly equal length (17 = 6 + 6 + 5, not 7 + 7 + 2 + 1): a run of one or two
            // outputs is a chain of K² dependent multiply-adds, bound by their latency.
            let runs = ow.div_ceil(R);
            for oy in 0..oh {
                let mut ox = 0;
                for run in 0..runs {
                    let n = ow / runs + usize::from(run < ow % runs);
                    // SAFETY (all calls): outputs ox..ox + n of row oy lie inside the output (the runs add up to
                    // ow; n <= R).
                    unsafe {
                        match n {
                            7 => outputs::<K, 7, S>(&g, &taps, oy, ox),
                            6 => outputs::<K, 6, S>(&g, &taps, oy, ox),
                            5 => outputs::<K, 5, S>(&g, &taps, oy, ox),
                            4 => outputs::<K, 4, S>(&g, &taps, oy, ox),
                            3 => outputs::<K, 3, S>(&g, &taps, oy, ox),
                            2 => outputs::<K, 2, S>(&g, &taps, oy, ox),
                            _ => outputs::<K, 1, S>(&g, &taps, oy, ox),
                        }
                    }
                    ox += n;
                }
                debug_assert_eq!(ox, ow);
            }
        }
    }

    /// What [`outputs`] needs besides the taps.
    struct Chunk {
        /// The run of channels' zero-bordered map: padded pixel (y, x) at `(y·pw + x)·16`.
        padded: *const f32,
        pw: usize,
        op: *mut f32,
        c: usize,
        c0: usize,
        m: __mmask16,
        ow: usize,
        lo: __m512,
        hi: __m512,
        b: __m512,
    }

    /// `N` consecutive outputs `ox..` of row `oy`, channels `c0..`, stride `S` (fixed counts keep the accumulators
    /// in registers and resolve which tap meets which pixel at compile time).
    ///
    /// Each pixel of a tap row is loaded once and multiplied into every output it reaches (up to `K` of them)
    /// instead of once per output and tap: the kernel is bound by its loads. An output still takes its taps
    /// in the order `ky`, then `kx` ascending (the pixels of a row are visited left to right), as the planes do.
    ///
    /// # Safety
    /// AVX-512F available; the kernel side is `K`, the stride `S`; `ox + N <= ow`, `oy < oh`, pointers as in
    /// [`channels_last_k`].
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn outputs<const K: usize, const N: usize, const S: usize>(
        g: &Chunk,
        taps: &[[__m512; K]; K],
        oy: usize,
        ox: usize,
    ) {
        let mut acc = [g.b; N];
        for (ky, row_of_taps) in taps.iter().enumerate() {
            // SAFETY: padded row oy·S + ky < ph, pixels ox·S.. ox·S + (N − 1)·S + K − 1 < pw (caller).
            let row = unsafe { g.padded.add(((oy * S + ky) * g.pw + ox * S) * 16) };
            for i in 0..(N - 1) * S + K {
                // SAFETY: as above.
                let x = unsafe { _mm512_loadu_ps(row.add(i * 16)) };
                for (j, a) in acc.iter_mut().enumerate() {
                    // Output j meets pixel i at tap kx = i − j·S.
                    if i >= j * S && i - j * S < K {
                        *a = _mm512_fmadd_ps(row_of_taps[i - j * S], x, *a);
                    }
                }
            }
        }
        for (j, a) in acc.iter().enumerate() {
            let v = _mm512_min_ps(_mm512_max_ps(*a, g.lo), g.hi);
            // SAFETY: output pixel (oy, ox + j) lies inside the output (caller), channels masked.
            unsafe { _mm512_mask_storeu_ps(g.op.add((oy * g.ow + ox + j) * g.c + g.c0), g.m, v) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TensorFlow "SAME" output sides and leading pads of an `h × w` plane: `((oh, ow), (pad_top, pad_left))`.
    fn same(h: usize, w: usize, k: usize, stride: usize) -> ((usize, usize), (usize, usize)) {
        let side = |n: usize| {
            let o = n.div_ceil(stride);
            (o, ((o - 1) * stride + k).saturating_sub(n) / 2)
        };
        let ((oh, pt), (ow, pl)) = (side(h), side(w));
        ((oh, ow), (pt, pl))
    }

    #[test]
    fn vector_and_portable_rows_agree_bit_for_bit() {
        // Every side and stride the vector path specialises (and 7, which it does not), on heights that leave 0 to
        // 7 rows after the blocks of 8 or 4, and widths ending in full and masked vectors.
        for (h, w, k, stride) in [
            (13usize, 29usize, 5usize, 1usize),
            (13, 29, 5, 2),
            (17, 32, 3, 1),
            (23, 33, 3, 1),
            (9, 16, 3, 2),
            (19, 65, 3, 2),
            (14, 7, 5, 1),
            (11, 40, 5, 2),
            (12, 20, 7, 1),
            (10, 21, 3, 3),
        ] {
            let ((oh, ow), pad) = same(h, w, k, stride);
            let plane: Vec<f32> = (0..h * w).map(|i| ((i * 7919 % 97) as f32 - 48.0) * 0.07).collect();
            let wts: Vec<f32> = (0..k * k).map(|i| ((i * 31 % 17) as f32 - 8.0) * 0.11).collect();
            let mut fast = vec![0f32; oh * ow];
            let mut scratch = Vec::new();
            depthwise_plane(&plane, (h, w), &wts, k, stride, pad, 0.5, (-1.0, 6.0), &mut fast, (oh, ow), &mut scratch);
            let ph = (oh - 1) * stride + k;
            let pw = (ow - 1) * stride + k;
            let phase_w = pw.div_ceil(stride);
            let g = Geometry { k, stride, row_len: stride * phase_w, phase_w, oh, ow };
            let mut portable = vec![0f32; oh * ow];
            rows(&scratch[..ph * g.row_len], &wts, &g, 0.5, (-1.0, 6.0), &mut portable);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&portable), "{h}x{w} side {k} stride {stride}");
        }
    }

    #[test]
    fn channels_last_is_each_channels_plane_bit_for_bit() {
        // One work buffer per path, geometries changing back and forth; 17 and 40 channels end in a masked vector.
        let mut plane_scratch = Vec::new();
        for &(h, w, k, stride, c) in &[
            (7usize, 7usize, 5usize, 1usize, 32usize),
            (14, 14, 5, 2, 17),
            (7, 6, 3, 1, 40),
            (9, 11, 3, 2, 1),
            (7, 7, 5, 1, 32),
            (2, 3, 5, 2, 5),
            (13, 12, 7, 1, 16),
            // Lite2's sides: rows ending in runs of 4, 2 and 1 outputs; 7 × 7 taps with stride 2.
            (33, 33, 5, 1, 24),
            (33, 33, 3, 2, 17),
            (17, 17, 5, 2, 16),
            (5, 5, 3, 1, 16),
            (13, 13, 7, 2, 16),
            // Rows cut into runs of every length from 1 to 7 (and 4 for side 7): 1 to 15 outputs wide.
            (3, 1, 3, 1, 16),
            (3, 2, 5, 1, 16),
            (3, 3, 3, 1, 16),
            (3, 9, 3, 1, 16),
            (4, 10, 3, 1, 16),
            (3, 11, 5, 1, 16),
            (2, 12, 3, 1, 16),
            (3, 13, 5, 1, 16),
            (3, 15, 3, 1, 16),
            (3, 20, 5, 2, 16),
            (2, 27, 3, 2, 16),
            (3, 5, 7, 1, 16),
            (4, 9, 7, 1, 16),
        ] {
            let ((oh, ow), (pt, pl)) = same(h, w, k, stride);
            let planes: Vec<Vec<f32>> = (0..c)
                .map(|i| (0..h * w).map(|p| (((p + 3 * i) * 7919 % 97) as f32 - 48.0) * 0.07).collect())
                .collect();
            let taps: Vec<Vec<f32>> =
                (0..c).map(|i| (0..k * k).map(|t| (((t + i) * 31 % 17) as f32 - 8.0) * 0.11).collect()).collect();
            let bias: Vec<f32> = (0..c).map(|i| (i % 5) as f32 * 0.25 - 0.5).collect();
            let mut map = vec![0f32; h * w * c];
            let mut weights = vec![0f32; k * k * c];
            for i in 0..c {
                planes[i].iter().enumerate().for_each(|(p, &v)| map[p * c + i] = v);
                taps[i].iter().enumerate().for_each(|(t, &v)| weights[t * c + i] = v);
            }
            let mut got = vec![f32::NAN; oh * ow * c];
            let (clamp, pads) = ((-1.0, 6.0), (pt, pl));
            depthwise_channels_last(&map, (h, w), c, &weights, &bias, k, stride, pads, clamp, &mut got, (oh, ow));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for i in 0..c {
                let mut want = vec![0f32; oh * ow];
                let (p, t) = (&planes[i], &taps[i]);
                depthwise_plane(p, (h, w), t, k, stride, pads, bias[i], clamp, &mut want, (oh, ow), &mut plane_scratch);
                let channel: Vec<f32> = (0..oh * ow).map(|j| got[j * c + i]).collect();
                assert_eq!(bits(&channel), bits(&want), "{h}x{w} k{k} s{stride} c{c}, channel {i}");
            }
            // The portable loops give the same bits as the vector kernel.
            let g = ChannelsLast { h, w, c, k, stride, pad_top: pt, pad_left: pl, oh, ow };
            let mut portable = vec![f32::NAN; oh * ow * c];
            channels_last(&map, &weights, &bias, &g, clamp, &mut portable);
            assert_eq!(bits(&portable), bits(&got), "portable, {h}x{w} k{k} s{stride} c{c}");
        }
    }

    #[test]
    fn deinterleave_splits_even_and_odd_columns() {
        for n in [0usize, 1, 2, 31, 32, 33, 64, 67, 224] {
            let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let (mut even, mut odd) = (vec![-1.0; n.div_ceil(2)], vec![-1.0; n / 2]);
            deinterleave(&src, &mut even, &mut odd);
            assert!(even.iter().enumerate().all(|(i, &v)| v == (2 * i) as f32), "{n}");
            assert!(odd.iter().enumerate().all(|(i, &v)| v == (2 * i + 1) as f32), "{n}");
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
            let ((oh, ow), (pt, pl)) = same(h, w, k, stride);
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
