//! Whole post-LN transformer encoder layers (BERT; PyTorch `nn.TransformerEncoderLayer(norm_first=False,
//! activation="gelu", dropout=0)`), one or a stack of several of one shape, as one op with its own backward pass:
//! `y₁ = LN₁(x + SA(x))`, `y = LN₂(y₁ + W₂ GELU(W₁ y₁ + b₁) + b₂)` per layer.
//!
//! Why one op: as a chain of candle ops (even the one-pass ops of this module) every intermediate tensor gets its
//! gradient accumulated by candle's backward pass into a fresh zero tensor (an allocation, a zero fill and an
//! addition per edge, ~160 MB per layer on `stepwise bench seq-train`), and residual additions, bias additions
//! and weight concatenations each take a full pass of their own. Here residuals and biases are the starting
//! values of the products that follow them (the GEMM accumulates into them), the activations the backward pass
//! needs are kept in the op, and the parameters arrive packed in one vector (their gradients leave the same way,
//! split back per parameter by candle's `cat`). Tested against the same layer built from the separate ops,
//! forward and backward.

use std::sync::Mutex;

use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;
use stepwise_kernels::{MatRef, gemm, math};

use super::{
    AttnDims, ELEMENT_CHUNK, attention_backward, attention_forward, chunked_row_sums, column_sums, f32_rows, gemm_err,
    layer_norm_row_grad, par_vec, par_zeros, probabilities_fit, repeated_rows, row_stats, rows_chunk, rows_plus,
    with_data, zeroed,
};
use crate::nn::CResult;

/// The shape of a layer: width, feed-forward width, heads and the two layer norms' epsilons.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerShape {
    pub dim: usize,
    pub ff: usize,
    pub heads: usize,
    pub eps1: f32,
    pub eps2: f32,
}

/// The parameters in their packing order (see [`LayerShape::lengths`]).
#[derive(Clone, Copy)]
enum Part {
    Wq,
    Wk,
    Wv,
    Bq,
    Bk,
    Bv,
    Wo,
    Bo,
    Gamma1,
    Beta1,
    W1,
    B1,
    W2,
    B2,
    Gamma2,
    Beta2,
}

const PARTS: usize = 16;

impl LayerShape {
    /// Lengths of the packed parameters, in order: `Wq, Wk, Wv` (`D × D` each, `in × out`), `bq, bk, bv`, `Wo`,
    /// `bo`, `γ₁, β₁`, `W₁` (`D × F`), `b₁`, `W₂` (`F × D`), `b₂`, `γ₂, β₂`.
    pub fn lengths(&self) -> [usize; PARTS] {
        let (d, f) = (self.dim, self.ff);
        [d * d, d * d, d * d, d, d, d, d * d, d, d, d, d * f, f, f * d, d, d, d]
    }

    /// Values in the packed parameter vector.
    pub fn parameter_count(&self) -> usize {
        self.lengths().iter().sum()
    }

    fn range(&self, part: Part) -> std::ops::Range<usize> {
        let lengths = self.lengths();
        let start: usize = lengths[..part as usize].iter().sum();
        start..start + lengths[part as usize]
    }
}

/// `layers` layers of one shape applied in turn to `x` (`S × L × D`), as one op: `params` holds each layer's
/// packed parameters ([`LayerShape::lengths`]), one layer after another; `key_bias` (`S × L`) is 0 for real keys
/// and a large negative number for padding. Between layers no candle tensor is made, so candle's backward pass
/// does not zero and add a full-size gradient per layer (it does so for every op input).
pub fn transformer_stack(
    x: &Tensor,
    params: &Tensor,
    key_bias: &Tensor,
    shape: LayerShape,
    layers: usize,
) -> CResult<Tensor> {
    let keep = x.track_op() || params.track_op();
    x.contiguous()?.apply_op3(
        &params.contiguous()?,
        &key_bias.contiguous()?,
        FusedLayer { shape, layers, keep, saved: Mutex::new(None) },
    )
}

/// What the backward pass reads of one layer, kept by the forward pass.
struct Saved {
    /// The layer's input when it is not the op's (the previous layer's output).
    input: Option<Vec<f32>>,
    qkv: Vec<f32>,
    /// The attention probabilities when they fit (`probabilities_fit`; else recomputed).
    probabilities: Option<Vec<f32>>,
    attn: Vec<f32>,
    y1: Vec<f32>,
    xhat1: Vec<f32>,
    rstd1: Vec<f32>,
    h: Vec<f32>,
    g: Vec<f32>,
    xhat2: Vec<f32>,
    rstd2: Vec<f32>,
}

struct FusedLayer {
    shape: LayerShape,
    /// Layers applied in turn, each with its own parameters.
    layers: usize,
    /// Keep the activations for a backward pass (the graph tracks `x` or the parameters).
    keep: bool,
    /// Per layer, first to last.
    saved: Mutex<Option<Vec<Saved>>>,
}

/// The checked shapes of one call of `layers` layers.
fn dims_of(
    name: &str,
    shape: &LayerShape,
    layers: usize,
    x: &Layout,
    params: &Layout,
    bias: &Layout,
) -> CResult<AttnDims> {
    let (s, l, d) = match x.dims() {
        &[s, l, d] => (s, l, d),
        other => candle_core::bail!("{name}: input must be S × L × D, got {other:?}"),
    };
    if layers == 0 || shape.parameter_count() == 0 {
        candle_core::bail!("{name}: {layers} layers of width {} and feed-forward width {}", shape.dim, shape.ff);
    }
    if d != shape.dim || shape.heads == 0 || d % shape.heads != 0 {
        candle_core::bail!("{name}: width {d} with a layer of width {} and {} heads", shape.dim, shape.heads);
    }
    if params.dims() != [layers * shape.parameter_count()] {
        candle_core::bail!(
            "{name}: packed parameters {:?}, expected [{}] ({layers} layers)",
            params.dims(),
            layers * shape.parameter_count()
        );
    }
    if bias.dims() != [s, l] {
        candle_core::bail!("{name}: key bias {:?}, expected [{s}, {l}]", bias.dims());
    }
    Ok(AttnDims { s, l, d, dh: d / shape.heads, heads: shape.heads })
}

/// `[Wq | Wk | Wv]` (`D × 3D`) from the packed parameters.
fn qkv_weights(p: &[f32], shape: &LayerShape) -> Vec<f32> {
    let d = shape.dim;
    let (wq, wk, wv) = (&p[shape.range(Part::Wq)], &p[shape.range(Part::Wk)], &p[shape.range(Part::Wv)]);
    let mut w = Vec::with_capacity(3 * d * d);
    for r in 0..d {
        for part in [wq, wk, wv] {
            w.extend_from_slice(&part[r * d..(r + 1) * d]);
        }
    }
    w
}

/// Layer norm of the rows of `r` (width `d`): the output, `r` turned into `x̂` in place, and each row's 1/σ.
fn layer_norm_keeping(r: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32, d: usize) -> (Vec<f32>, Vec<f32>) {
    let rows = r.len() / d;
    let mut y = Vec::with_capacity(rows * d);
    let mut rstd = vec![0f32; rows];
    // `y` is written row by row by the tasks that compute the rows (no serial zero fill; see `try_par_vec`).
    y.spare_capacity_mut()[..rows * d].par_chunks_mut(d).zip(r.par_chunks_mut(d)).zip(rstd.par_iter_mut()).for_each(
        |((y, x), rs)| {
            let y = zeroed(y);
            let (mean, inv) = row_stats(x, eps);
            *rs = inv;
            for ((y, x), (&g, &b)) in y.iter_mut().zip(x.iter_mut()).zip(gamma.iter().zip(beta)) {
                *x = (*x - mean) * inv;
                *y = *x * g + b;
            }
        },
    );
    // SAFETY: the zip above ran over all `rows` rows (`r` holds `rows · d` values, `rstd` `rows`), each row of `y`
    // went through `zeroed`.
    unsafe { y.set_len(rows * d) };
    (y, rstd)
}

/// The layer norm's backward pass from kept `x̂` and 1/σ: the input gradient, then `[dγ ; dβ]` (chunk partials
/// added in chunk order).
fn layer_norm_grads(xhat: &[f32], rstd: &[f32], gamma: &[f32], dy: &[f32], d: usize) -> (Vec<f32>, Vec<f32>) {
    // x̂ copied into the gradient's rows, which the row helper turns into dx in place.
    let chunk = rows_chunk(d);
    let dx = par_vec(xhat.len(), chunk, |i, dx| {
        let start = i * chunk;
        dx.copy_from_slice(&xhat[start..start + dx.len()]);
        for ((dx, dy), &rs) in dx.chunks_exact_mut(d).zip(dy[start..].chunks_exact(d)).zip(&rstd[start / d..]) {
            layer_norm_row_grad(dx, rs, gamma, dy);
        }
    });
    let params = chunked_row_sums(rstd.len(), 2 * d, |range, acc| {
        let (sg, sb) = acc.split_at_mut(d);
        for r in range {
            let (xhat, dy) = (&xhat[r * d..(r + 1) * d], &dy[r * d..(r + 1) * d]);
            for (((sg, sb), &xh), &dy) in sg.iter_mut().zip(sb.iter_mut()).zip(xhat).zip(dy) {
                *sg += dy * xh;
                *sb += dy;
            }
        }
    });
    (dx, params)
}

/// `C = A·B` for row-major operands (`a`: `m × k`, `b`: `k × n`), `C` accumulated into when `accumulate`.
fn matmul_into(a: MatRef, b: MatRef, c: &mut [f32], accumulate: bool) -> CResult<()> {
    gemm(a, b, c, accumulate, true).map_err(gemm_err)
}

impl CustomOp3 for FusedLayer {
    fn name(&self) -> &'static str {
        "stepwise-transformer-layer"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        let name = self.name();
        let dims = dims_of(name, &self.shape, self.layers, l1, l2, l3)?;
        let (x, _) = f32_rows(s1, l1, name)?;
        let (p, _) = f32_rows(s2, l2, name)?;
        let (bias, _) = f32_rows(s3, l3, name)?;
        let out_shape = Shape::from((dims.s, dims.l, dims.d));
        if dims.s * dims.l == 0 {
            return Ok((CpuStorage::F32(Vec::new()), out_shape));
        }
        let count = self.shape.parameter_count();
        let mut saved = Vec::new();
        let mut y: Option<Vec<f32>> = None;
        for params in p.chunks_exact(count) {
            let input = y.as_deref().unwrap_or(x);
            let (out, kept) = self.layer_forward(dims, input, params, bias)?;
            if let Some(mut kept) = kept {
                kept.input = y.take();
                saved.push(kept);
            }
            y = Some(out);
        }
        if self.keep {
            *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
        }
        let Some(y) = y else { candle_core::bail!("{name}: no layers") };
        Ok((CpuStorage::F32(y), out_shape))
    }

    fn bwd(
        &self,
        x: &Tensor,
        params: &Tensor,
        key_bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let name = self.name();
        let dims = dims_of(name, &self.shape, self.layers, x.layout(), params.layout(), key_bias.layout())?;
        let n = dims.s * dims.l;
        let (want_dx, want_dp) = (x.track_op(), params.track_op());
        if n == 0 || !(want_dx || want_dp) {
            let zeros = |want: bool, t: &Tensor| want.then(|| t.zeros_like()).transpose();
            return Ok((zeros(want_dx, x)?, zeros(want_dp, params)?, None));
        }
        let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        let Some(saved) = saved.as_ref().filter(|sv| sv.len() == self.layers) else {
            candle_core::bail!("{name}: backward pass without the forward pass's activations");
        };
        let grad = grad.contiguous()?;
        let count = self.shape.parameter_count();
        let (dx, dp) = with_data(x, name, |x| {
            with_data(params, name, |p| {
                with_data(key_bias, name, |bias| {
                    with_data(&grad, name, |dy| {
                        let mut dp = vec![0f32; p.len()];
                        let mut dy = std::borrow::Cow::Borrowed(dy);
                        let mut dx = None;
                        // Last layer first; each layer's input gradient is the output gradient of the one before.
                        let layers = saved.iter().zip(p.chunks_exact(count)).zip(dp.chunks_exact_mut(count));
                        for (i, ((sv, params), dp)) in layers.enumerate().rev() {
                            let input = sv.input.as_deref().unwrap_or(x);
                            dx = self.backward(dims, sv, input, params, bias, &dy, dp, i > 0 || want_dx)?;
                            if let Some(g) = dx.take_if(|_| i > 0) {
                                dy = std::borrow::Cow::Owned(g);
                            }
                        }
                        Ok((dx, dp))
                    })
                })
            })
        })?;
        let dx = match dx {
            Some(dx) => Some(Tensor::from_vec(dx, x.shape(), x.device())?),
            None => None,
        };
        let dp = if want_dp { Some(Tensor::from_vec(dp, params.shape(), params.device())?) } else { None };
        Ok((dx, dp, None))
    }
}

impl FusedLayer {
    /// One layer over `x` with its packed parameters `p`: the output and, when the op keeps activations, what its
    /// backward pass reads (without the input).
    fn layer_forward(&self, dims: AttnDims, x: &[f32], p: &[f32], bias: &[f32]) -> CResult<(Vec<f32>, Option<Saved>)> {
        let shape = &self.shape;
        let (n, d, f) = (dims.s * dims.l, dims.d, shape.ff);
        let part = |pt: Part| &p[shape.range(pt)];
        // qkv = x [Wq Wk Wv] + [bq bk bv]
        let b_qkv = [part(Part::Bq), part(Part::Bk), part(Part::Bv)].concat();
        let mut qkv = repeated_rows(&b_qkv, n);
        matmul_into(MatRef::row_major(x, n, d), MatRef::row_major(&qkv_weights(p, shape), d, 3 * d), &mut qkv, true)?;
        let keep_probabilities = self.keep && probabilities_fit(dims.s, dims.heads, dims.l);
        let (attn, probabilities) = attention_forward(dims, &qkv, bias, keep_probabilities)?;
        // y₁ = LN₁(x + attn Wo + bo)
        let mut r1 = rows_plus(x, part(Part::Bo));
        matmul_into(MatRef::row_major(&attn, n, d), MatRef::row_major(part(Part::Wo), d, d), &mut r1, true)?;
        let (y1, rstd1) = layer_norm_keeping(&mut r1, part(Part::Gamma1), part(Part::Beta1), shape.eps1, d);
        // h = y₁ W₁ + b₁; g = GELU(h)
        let mut h = repeated_rows(part(Part::B1), n);
        matmul_into(MatRef::row_major(&y1, n, d), MatRef::row_major(part(Part::W1), d, f), &mut h, true)?;
        let g = par_vec(h.len(), ELEMENT_CHUNK, |i, g| math::gelu(&h[i * ELEMENT_CHUNK..][..g.len()], g));
        // y = LN₂(y₁ + g W₂ + b₂)
        let mut r2 = rows_plus(&y1, part(Part::B2));
        matmul_into(MatRef::row_major(&g, n, f), MatRef::row_major(part(Part::W2), f, d), &mut r2, true)?;
        let (y, rstd2) = layer_norm_keeping(&mut r2, part(Part::Gamma2), part(Part::Beta2), shape.eps2, d);
        let saved = self.keep.then_some(Saved {
            input: None,
            qkv,
            probabilities,
            attn,
            y1,
            xhat1: r1,
            rstd1,
            h,
            g,
            xhat2: r2,
            rstd2,
        });
        Ok((y, saved))
    }

    /// One layer's backward pass from its input `x`, parameters `p` and output gradient `dy`: its input gradient
    /// (when `want_dx`), its parameters' gradient written to `dp`.
    #[allow(clippy::too_many_arguments)]
    fn backward(
        &self,
        dims: AttnDims,
        sv: &Saved,
        x: &[f32],
        p: &[f32],
        bias: &[f32],
        dy: &[f32],
        dp: &mut [f32],
        want_dx: bool,
    ) -> CResult<Option<Vec<f32>>> {
        let shape = &self.shape;
        let (n, d, f) = (dims.s * dims.l, dims.d, shape.ff);
        let part = |pt: Part| &p[shape.range(pt)];
        let put = |dp: &mut [f32], pt: Part, values: &[f32]| dp[shape.range(pt)].copy_from_slice(values);
        // LN₂
        let (dr2, dln2) = layer_norm_grads(&sv.xhat2, &sv.rstd2, part(Part::Gamma2), dy, d);
        put(dp, Part::Gamma2, &dln2[..d]);
        put(dp, Part::Beta2, &dln2[d..]);
        // W₂, b₂ and dg = dr₂ W₂ᵀ
        matmul_into(
            MatRef::row_major(&sv.g, n, f).t(),
            MatRef::row_major(&dr2, n, d),
            &mut dp[shape.range(Part::W2)],
            false,
        )?;
        put(dp, Part::B2, &column_sums(&dr2, d));
        let mut dg = par_zeros(n * f);
        matmul_into(MatRef::row_major(&dr2, n, d), MatRef::row_major(part(Part::W2), f, d).t(), &mut dg, false)?;
        // GELU
        dg.par_chunks_mut(ELEMENT_CHUNK)
            .zip(sv.h.par_chunks(ELEMENT_CHUNK))
            .for_each(|(g, h)| math::gelu_backward_in_place(h, g));
        let dh = dg;
        // W₁, b₁ and dy₁ = dr₂ (the residual) + dh W₁ᵀ
        matmul_into(
            MatRef::row_major(&sv.y1, n, d).t(),
            MatRef::row_major(&dh, n, f),
            &mut dp[shape.range(Part::W1)],
            false,
        )?;
        put(dp, Part::B1, &column_sums(&dh, f));
        let mut dy1 = dr2;
        matmul_into(MatRef::row_major(&dh, n, f), MatRef::row_major(part(Part::W1), d, f).t(), &mut dy1, true)?;
        drop(dh);
        // LN₁
        let (dr1, dln1) = layer_norm_grads(&sv.xhat1, &sv.rstd1, part(Part::Gamma1), &dy1, d);
        drop(dy1);
        put(dp, Part::Gamma1, &dln1[..d]);
        put(dp, Part::Beta1, &dln1[d..]);
        // Wo, bo and the attention output's gradient
        matmul_into(
            MatRef::row_major(&sv.attn, n, d).t(),
            MatRef::row_major(&dr1, n, d),
            &mut dp[shape.range(Part::Wo)],
            false,
        )?;
        put(dp, Part::Bo, &column_sums(&dr1, d));
        let mut dattn = par_zeros(n * d);
        matmul_into(MatRef::row_major(&dr1, n, d), MatRef::row_major(part(Part::Wo), d, d).t(), &mut dattn, false)?;
        let dqkv = attention_backward(dims, &sv.qkv, bias, &dattn, sv.probabilities.as_deref())?;
        drop(dattn);
        // [Wq Wk Wv], [bq bk bv] and dx = dr₁ (the residual) + dqkv [Wq Wk Wv]ᵀ
        let mut dw = vec![0f32; 3 * d * d];
        matmul_into(MatRef::row_major(x, n, d).t(), MatRef::row_major(&dqkv, n, 3 * d), &mut dw, false)?;
        for (i, pt) in [Part::Wq, Part::Wk, Part::Wv].into_iter().enumerate() {
            let dst = &mut dp[shape.range(pt)];
            for r in 0..d {
                dst[r * d..(r + 1) * d].copy_from_slice(&dw[r * 3 * d + i * d..][..d]);
            }
        }
        let db = column_sums(&dqkv, 3 * d);
        for (i, pt) in [Part::Bq, Part::Bk, Part::Bv].into_iter().enumerate() {
            put(dp, pt, &db[i * d..(i + 1) * d]);
        }
        let dx = if want_dx {
            let mut dx = dr1;
            matmul_into(
                MatRef::row_major(&dqkv, n, 3 * d),
                MatRef::row_major(&qkv_weights(p, shape), d, 3 * d).t(),
                &mut dx,
                true,
            )?;
            Some(dx)
        } else {
            None
        };
        Ok(dx)
    }
}
