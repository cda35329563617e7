//! candle ops with their own one-pass backward, for the trainers' hot paths: matrix product on
//! `stepwise-kernels`' GEMM (with the bias fused for linear layers), multi-head attention, softmax over the last
//! dimension, layer norm, GELU (erf), whole transformer layers and the LSTM recurrence.
//!
//! Why: candle's CPU matmul ran at 32–41 GFLOP/s on the trainers' shapes where the packed kernel reaches 145, and
//! candle's composite `layer_norm_slow` / `gelu_erf` / `softmax` build five to ten full-size tensors per call
//! forward and about twice as many backward; candle's fused `layer_norm` / `softmax_last_dim` have no backward at
//! all. Each op here is tested against the composite candle version, forward and backward.
//!
//! Determinism: row-wise work runs rows in parallel but each row sequentially; sums over rows (bias, γ and β
//! gradients) add fixed chunks of rows in a fixed order; the GEMM is thread-count invariant. f32 only.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, D, Layout, Shape, Tensor};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::Mutex;
use stepwise_kernels::math::{self, softmax_row, softmax_row_backward};
use stepwise_kernels::{MatRef, gemm, gemm_batched};

use crate::nn::CResult;

mod layer;
mod lstm;
pub use layer::{LayerShape, transformer_stack};
pub use lstm::lstm_recurrence;

/// Rows per chunk of the deterministic column sums.
const SUM_CHUNK: usize = 256;

/// The f32 data of a storage.
fn f32_data<'a>(storage: &'a CpuStorage, op: &str) -> CResult<&'a [f32]> {
    match storage {
        CpuStorage::F32(data) => Ok(data),
        _ => candle_core::bail!("{op}: f32 only"),
    }
}

/// The contiguous f32 data of a tensor argument and its row length.
pub(crate) fn f32_rows<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> CResult<(&'a [f32], usize)> {
    let data = f32_data(storage, op)?;
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op}: the input must be contiguous");
    };
    Ok((&data[start..end], layout.dims().last().copied().unwrap_or(1).max(1)))
}

/// The contiguous f32 data of a tensor, to read in a backward pass.
pub(crate) fn with_data<R>(t: &Tensor, name: &str, f: impl FnOnce(&[f32]) -> CResult<R>) -> CResult<R> {
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(storage) = &*storage else { candle_core::bail!("{name}: CPU tensors only") };
    f(f32_rows(storage, layout, name)?.0)
}

/// Two contiguous f32 arguments of the same shape (a value and its gradient) and their row length.
fn paired_rows<'a>(
    s1: &'a CpuStorage,
    l1: &Layout,
    s2: &'a CpuStorage,
    l2: &Layout,
    op: &str,
) -> CResult<(&'a [f32], &'a [f32], usize)> {
    if l1.shape() != l2.shape() {
        candle_core::bail!("{op}: shapes {:?} and {:?} differ", l1.dims(), l2.dims());
    }
    let (a, n) = f32_rows(s1, l1, op)?;
    let (b, _) = f32_rows(s2, l2, op)?;
    Ok((a, b, n))
}

/// Sums over the rows of a `rows`-row input into `width` values: `add_rows(range, acc)` adds rows `range` into a
/// zeroed `acc`; chunks of [`SUM_CHUNK`] rows run in parallel and their partials are added in chunk order, so the
/// result does not depend on the thread count.
fn chunked_row_sums(
    rows: usize,
    width: usize,
    add_rows: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync,
) -> Vec<f32> {
    let partials: Vec<Vec<f32>> = (0..rows.div_ceil(SUM_CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut acc = vec![0f32; width];
            add_rows(c * SUM_CHUNK..rows.min((c + 1) * SUM_CHUNK), &mut acc);
            acc
        })
        .collect();
    let mut total = vec![0f32; width];
    for p in &partials {
        total.iter_mut().zip(p).for_each(|(t, v)| *t += v);
    }
    total
}

// ---------------------------------------------------------------------------------------------------------------
// Matrix products

/// A tensor of rank ≥ 2 as `batch` strided matrices: element `(b, i, j)` at `offset + b·bs + i·rs + j·cs`.
#[derive(Debug, Clone, Copy)]
struct Batched {
    batch: usize,
    bs: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
    offset: usize,
}

impl Batched {
    /// `None` when the batch dimensions cannot be walked with one stride (the caller copies first).
    fn of(layout: &Layout) -> Option<Batched> {
        let dims = layout.dims();
        let st = layout.stride();
        let r = dims.len();
        if r < 2 {
            return None;
        }
        // Batch dimensions of size > 1 must nest: stride[i] = stride[i+1] · dims[i+1].
        let outer: Vec<(usize, usize)> = (0..r - 2).filter(|&i| dims[i] > 1).map(|i| (dims[i], st[i])).collect();
        if outer.windows(2).any(|w| w[0].1 != w[1].1 * w[1].0) {
            return None;
        }
        Some(Batched {
            batch: dims[..r - 2].iter().product(),
            bs: outer.last().map_or(0, |&(_, s)| s),
            rows: dims[r - 2],
            cols: dims[r - 1],
            rs: st[r - 2],
            cs: st[r - 1],
            offset: layout.start_offset(),
        })
    }

    fn mat<'a>(&self, data: &'a [f32]) -> CResult<MatRef<'a>> {
        let Some(data) = data.get(self.offset..) else { candle_core::bail!("matmul: offset past the data") };
        Ok(MatRef { data, rows: self.rows, cols: self.cols, rs: self.rs, cs: self.cs })
    }
}

/// A tensor whose batch dimensions nest (copied to contiguous when they do not).
fn walkable(t: &Tensor) -> CResult<Tensor> {
    if Batched::of(t.layout()).is_some() { Ok(t.clone()) } else { t.contiguous() }
}

/// `a · b` over the last two dimensions, batch dimensions equal (no broadcasting); transposed views are read in
/// place.
pub fn matmul(a: &Tensor, b: &Tensor) -> CResult<Tensor> {
    walkable(a)?.apply_op2(&walkable(b)?, MatMul)
}

/// [`matmul`] without a backward pass (inside backward passes).
fn matmul_no_bwd(a: &Tensor, b: &Tensor) -> CResult<Tensor> {
    walkable(a)?.apply_op2_no_bwd(&walkable(b)?, &MatMul)
}

/// The gradient for `arg` only when the graph tracks it: candle's backward pass asks every op for the gradients
/// of all its inputs and accumulates them even for constants (the frozen input features: a GEMM and two
/// full-size passes per step for nothing).
fn tracked(arg: &Tensor, grad: impl FnOnce() -> CResult<Tensor>) -> CResult<Option<Tensor>> {
    if arg.track_op() { grad().map(Some) } else { Ok(None) }
}

fn gemm_err(e: stepwise_kernels::gemm::GemmError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

struct MatMul;

impl CustomOp2 for MatMul {
    fn name(&self) -> &'static str {
        "stepwise-matmul"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (Some(a), Some(b)) = (Batched::of(l1), Batched::of(l2)) else {
            candle_core::bail!("{}: batch dimensions must nest", self.name());
        };
        let (d1, d2) = (l1.dims(), l2.dims());
        if d1.len() != d2.len() || d1[..d1.len() - 2] != d2[..d2.len() - 2] || a.cols != b.rows {
            candle_core::bail!("{}: shapes {d1:?} and {d2:?} do not multiply", self.name());
        }
        let (x, y) = (f32_data(s1, self.name())?, f32_data(s2, self.name())?);
        let mut out = par_zeros(a.batch * a.rows * b.cols);
        if a.batch == 1 {
            gemm(a.mat(x)?, b.mat(y)?, &mut out, false, true).map_err(gemm_err)?;
        } else {
            gemm_batched(a.batch, a.mat(x)?, a.bs, b.mat(y)?, b.bs, &mut out, false).map_err(gemm_err)?;
        }
        let mut shape = d1.to_vec();
        *shape.last_mut().expect("rank ≥ 2") = b.cols;
        Ok((CpuStorage::F32(out), Shape::from(shape)))
    }

    fn bwd(&self, a: &Tensor, b: &Tensor, _res: &Tensor, grad: &Tensor) -> CResult<(Option<Tensor>, Option<Tensor>)> {
        let da = tracked(a, || matmul_no_bwd(grad, &b.transpose(D::Minus2, D::Minus1)?))?;
        let db = tracked(b, || matmul_no_bwd(&a.transpose(D::Minus2, D::Minus1)?, grad))?;
        Ok((da, db))
    }
}

/// `x · w + bias` for `x` of rank ≥ 2 over its last dimension (`w`: `in × out`, `bias`: `out`): the bias is the
/// product's starting value, and its gradient a column sum of the output gradient.
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> CResult<Tensor> {
    let dims = x.dims().to_vec();
    let input = *dims.last().ok_or_else(|| candle_core::Error::Msg("linear: a scalar input".into()))?;
    let x2 = x.reshape((x.elem_count() / input.max(1), input))?;
    let y = match bias {
        Some(b) => x2.apply_op3(&walkable(w)?, &b.contiguous()?, Linear)?,
        None => matmul(&x2, w)?,
    };
    let mut out = dims;
    *out.last_mut().expect("non-empty") = w.dim(1)?;
    y.reshape(out)
}

struct Linear;

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "stepwise-linear"
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
        let (Some(a), Some(w)) = (Batched::of(l1), Batched::of(l2)) else {
            candle_core::bail!("{}: inputs must be matrices", self.name());
        };
        let (bias, n) = f32_rows(s3, l3, self.name())?;
        if a.batch != 1 || w.batch != 1 || a.cols != w.rows || n != w.cols || bias.len() != n {
            candle_core::bail!("{}: shapes {:?}, {:?}, {:?} do not fit", self.name(), l1.dims(), l2.dims(), l3.dims());
        }
        let mut out = repeated_rows(bias, a.rows);
        let (x, y) = (f32_data(s1, self.name())?, f32_data(s2, self.name())?);
        gemm(a.mat(x)?, w.mat(y)?, &mut out, true, true).map_err(gemm_err)?;
        Ok((CpuStorage::F32(out), Shape::from((a.rows, n))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let dx = tracked(x, || matmul_no_bwd(grad, &w.t()?))?;
        let dw = tracked(w, || matmul_no_bwd(&x.t()?, grad))?;
        let db = tracked(b, || grad.contiguous()?.apply_op1_no_bwd(&ColumnSums))?;
        Ok((dx, dw, db))
    }
}

/// `n` copies of `row`, one after another (the starting value of a product with a bias).
fn repeated_rows(row: &[f32], n: usize) -> Vec<f32> {
    let w = row.len().max(1);
    par_vec(row.len() * n, rows_chunk(w), |_, out| out.chunks_exact_mut(w).for_each(|r| r.copy_from_slice(row)))
}

/// Each row of `x` (rows of `row.len()` values) plus `row`: a residual's starting value with a bias.
fn rows_plus(x: &[f32], row: &[f32]) -> Vec<f32> {
    let w = row.len().max(1);
    let chunk = rows_chunk(w);
    par_vec(x.len(), chunk, |i, out| {
        for (o, x) in out.chunks_exact_mut(w).zip(x[i * chunk..].chunks_exact(w)) {
            o.iter_mut().zip(x.iter().zip(row)).for_each(|(o, (x, b))| *o = x + b);
        }
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Fresh outputs written in parallel
//
// Why: the fused layer's and attention's outputs (9–77 MB each on `stepwise bench seq-train`) were allocated with
// `vec![0; n]`, `to_vec` or a serial row copy on the calling thread while rayon's workers waited: 15% of a
// training step ran on one core (perf, samples per thread). Here the task that writes a chunk zeroes it first, in
// its own cache, so no pass over the whole output runs alone.

/// Values per task of the parallel fills (64 KiB).
const FILL_CHUNK: usize = 16 * 1024;

/// A multiple of `width` close to [`FILL_CHUNK`] values: chunks of whole rows.
fn rows_chunk(width: usize) -> usize {
    width.max(1) * (FILL_CHUNK / width.max(1)).max(1)
}

/// Zero `chunk` and hand it out as initialised values.
fn zeroed(chunk: &mut [MaybeUninit<f32>]) -> &mut [f32] {
    chunk.fill(MaybeUninit::new(0.0));
    // SAFETY: every element was written just above, and `MaybeUninit<f32>` has the layout of `f32`.
    unsafe { &mut *(chunk as *mut [MaybeUninit<f32>] as *mut [f32]) }
}

/// A new `len`-value vector written in parallel: `fill(i, chunk)` writes the `i`-th piece of `chunk` values (the
/// last may be shorter), zeroed by its own task first.
fn try_par_vec<E: Send>(
    len: usize,
    chunk: usize,
    fill: impl Fn(usize, &mut [f32]) -> Result<(), E> + Sync,
) -> Result<Vec<f32>, E> {
    let mut v = Vec::with_capacity(len);
    v.spare_capacity_mut()[..len].par_chunks_mut(chunk.max(1)).enumerate().try_for_each(|(i, c)| fill(i, zeroed(c)))?;
    // SAFETY: `try_for_each` succeeded, so every chunk of `0..len` went through `zeroed`.
    unsafe { v.set_len(len) };
    Ok(v)
}

/// [`try_par_vec`] with a fill that cannot fail.
pub(crate) fn par_vec(len: usize, chunk: usize, fill: impl Fn(usize, &mut [f32]) + Sync) -> Vec<f32> {
    match try_par_vec::<std::convert::Infallible>(len, chunk, |i, c| {
        fill(i, c);
        Ok(())
    }) {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

/// `len` zeros, written in parallel (an output the GEMM overwrites).
fn par_zeros(len: usize) -> Vec<f32> {
    par_vec(len, FILL_CHUNK, |_, _| {})
}

/// Sum over rows of a contiguous matrix (`rows × n → n`).
fn column_sums(data: &[f32], n: usize) -> Vec<f32> {
    chunked_row_sums(data.len() / n, n, |range, acc| {
        for row in data[range.start * n..range.end * n].chunks_exact(n) {
            acc.iter_mut().zip(row).for_each(|(s, v)| *s += v);
        }
    })
}

struct ColumnSums;

impl CustomOp1 for ColumnSums {
    fn name(&self) -> &'static str {
        "stepwise-column-sums"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (data, n) = f32_rows(storage, layout, self.name())?;
        Ok((CpuStorage::F32(column_sums(data, n)), Shape::from(n)))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Attention

/// Multi-head self-attention over packed projections: `qkv` is `S × L × 3D` (queries, keys, values side by side,
/// head `h` at columns `h·dh..(h+1)·dh` of each), `key_bias` `S × L` (added to every query's scores: 0 for real
/// keys, a large negative number for padding). Returns `S × L × D`: per head `softmax(q kᵀ/√dh + bias) v`.
///
/// One task per sequence computes each head's `L × L` probabilities and its output; when the graph can be
/// differentiated and the `S·H·L·L` probabilities fit [`KEEP_PROBABILITIES_BYTES`], they are kept for the backward
/// pass, otherwise they live in a thread-local buffer and the backward pass recomputes them (as FlashAttention
/// does). Inference through variables also keeps them (candle has no no-grad mode), bounded by the same limit and
/// freed with the graph. Why one op instead of candle's composite ops: the composite version spent more time
/// allocating, adding the mask, copying heads and running softmax over those tensors than in its products
/// (docs/performance.md).
pub fn attention(qkv: &Tensor, key_bias: &Tensor, heads: usize) -> CResult<Tensor> {
    // Kept only for a graph that can be differentiated, and only up to a size: long inputs (16 steps of 110 rows:
    // 0.8 GB per layer at batch 16) recompute instead, and inference through variables never holds much.
    let keep = qkv.track_op() && matches!(qkv.dims(), &[s, l, _] if probabilities_fit(s, heads, l));
    qkv.contiguous()?.apply_op2(&key_bias.contiguous()?, Attention { heads, keep, probabilities: Mutex::new(None) })
}

/// The largest probability tensor [`attention`] keeps for its backward pass (bench seq-train: 77 MB per layer).
const KEEP_PROBABILITIES_BYTES: usize = 256 << 20;

/// Whether the `S·H·L·L` probabilities of `s` sequences of `l` rows and `heads` heads fit
/// [`KEEP_PROBABILITIES_BYTES`].
fn probabilities_fit(s: usize, heads: usize, l: usize) -> bool {
    s.saturating_mul(heads).saturating_mul(l).saturating_mul(l).saturating_mul(4) <= KEEP_PROBABILITIES_BYTES
}

struct Attention {
    heads: usize,
    /// Keep the forward pass's probabilities for the backward pass (when the graph tracks `qkv`): `S·H·L·L`
    /// floats (77 MB per layer on `bench seq-train`) buy back the backward's second `q kᵀ` product and softmax.
    keep: bool,
    /// `S × H × L × L`, taken (and freed) by the backward pass; the backward recomputes them when absent.
    probabilities: Mutex<Option<Vec<f32>>>,
}

/// Shapes of one attention call.
#[derive(Clone, Copy)]
struct AttnDims {
    s: usize,
    l: usize,
    d: usize,
    dh: usize,
    heads: usize,
}

impl AttnDims {
    fn of(name: &str, qkv: &Layout, bias: &Layout, heads: usize) -> CResult<AttnDims> {
        let (s, l, d3) = match qkv.dims() {
            &[s, l, d3] => (s, l, d3),
            other => candle_core::bail!("{name}: qkv must be S × L × 3D, got {other:?}"),
        };
        if bias.dims() != [s, l] {
            candle_core::bail!("{name}: key bias {:?}, expected [{s}, {l}]", bias.dims());
        }
        if heads == 0 || d3 % (3 * heads) != 0 {
            candle_core::bail!("{name}: width {d3} is not 3 × a multiple of {heads} heads");
        }
        let d = d3 / 3;
        Ok(AttnDims { s, l, d, dh: d / heads, heads })
    }

    /// The `L × dh` view of part `part` (0 q, 1 k, 2 v) of head `h` of sequence `b`.
    fn view<'a>(&self, data: &'a [f32], b: usize, h: usize, part: usize) -> MatRef<'a> {
        let start = b * self.l * 3 * self.d + part * self.d + h * self.dh;
        MatRef { data: &data[start..], rows: self.l, cols: self.dh, rs: 3 * self.d, cs: 1 }
    }

    /// The probabilities of (sequence `b`, head `h`) into `p` (`L × L`).
    fn probabilities(&self, qkv: &[f32], bias: &[f32], b: usize, h: usize, p: &mut [f32]) -> CResult<()> {
        let q = self.view(qkv, b, h, 0);
        let k = self.view(qkv, b, h, 1);
        gemm(q, k.t(), p, false, false).map_err(gemm_err)?;
        let (bias, scale) = (&bias[b * self.l..(b + 1) * self.l], 1.0 / (self.dh as f32).sqrt());
        p.chunks_exact_mut(self.l).for_each(|row| softmax_row(row, bias, scale));
        Ok(())
    }
}

/// The attention forward pass on slices: the output (`S × L × D`) and, when `keep`, every head's probabilities
/// (`S × H × L × L`). One task per sequence; heads of a sequence run one after another.
fn attention_forward(dims: AttnDims, qkv: &[f32], bias: &[f32], keep: bool) -> CResult<(Vec<f32>, Option<Vec<f32>>)> {
    let AttnDims { s, l, d, dh, heads } = dims;
    if s * l * d == 0 {
        return Ok((Vec::new(), keep.then(Vec::new)));
    }
    // Both outputs are written by the sequences' tasks, each zeroing its part first (see `try_par_vec`).
    let kept_len = if keep { s * heads * l * l } else { 0 };
    let mut out = Vec::with_capacity(s * l * d);
    let mut kept = Vec::with_capacity(kept_len);
    let mut kept_parts: Vec<&mut [MaybeUninit<f32>]> = if keep {
        kept.spare_capacity_mut()[..kept_len].chunks_mut(heads * l * l).collect()
    } else {
        (0..s).map(|_| Default::default()).collect()
    };
    out.spare_capacity_mut()[..s * l * d]
        .par_chunks_mut(l * d)
        .zip(kept_parts.par_iter_mut())
        .enumerate()
        .try_for_each(|(b, (out_b, kept_b))| {
            let out_b = zeroed(out_b);
            ATTN_BUFS.with(|bufs| {
                let (scratch, o, _) = &mut *bufs.borrow_mut();
                o.resize(l * dh, 0.0);
                for h in 0..heads {
                    let p = if keep {
                        zeroed(&mut kept_b[h * l * l..(h + 1) * l * l])
                    } else {
                        scratch.resize(l * l, 0.0);
                        &mut scratch[..]
                    };
                    dims.probabilities(qkv, bias, b, h, p)?;
                    gemm(MatRef::row_major(p, l, l), dims.view(qkv, b, h, 2), o, false, false).map_err(gemm_err)?;
                    scatter_columns(out_b, o, dh, d, h * dh);
                }
                Ok::<(), candle_core::Error>(())
            })
        })?;
    drop(kept_parts);
    // SAFETY: `try_for_each` succeeded: each of the `s` tasks zeroed its `l·d` output values and, when keeping,
    // its `heads` blocks of `l·l` probabilities.
    unsafe {
        out.set_len(s * l * d);
        kept.set_len(kept_len);
    }
    Ok((out, keep.then_some(kept)))
}

/// The gradient of the attention with respect to `qkv` (`S × L × 3D`) from the output gradient `dout`
/// (`S × L × D`), with the forward pass's probabilities when kept (else recomputed per head).
fn attention_backward(
    dims: AttnDims,
    qkv: &[f32],
    bias: &[f32],
    dout: &[f32],
    kept: Option<&[f32]>,
) -> CResult<Vec<f32>> {
    let AttnDims { s, l, d, dh, heads } = dims;
    if s * l * d == 0 {
        return Ok(Vec::new());
    }
    let scale = 1.0 / (dh as f32).sqrt();
    try_par_vec(s * l * 3 * d, l * 3 * d, |b, dqkv_b| {
        ATTN_BUFS.with(|bufs| {
            let (scratch, dp, o) = &mut *bufs.borrow_mut();
            dp.resize(l * l, 0.0);
            o.resize(l * dh, 0.0);
            for h in 0..heads {
                let p: &[f32] = match kept {
                    Some(kept) => &kept[(b * heads + h) * l * l..][..l * l],
                    None => {
                        scratch.resize(l * l, 0.0);
                        dims.probabilities(qkv, bias, b, h, scratch)?;
                        scratch
                    }
                };
                let dout_h = MatRef { data: &dout[b * l * d + h * dh..], rows: l, cols: dh, rs: d, cs: 1 };
                let pm = MatRef::row_major(p, l, l);
                // dV = Pᵀ · dO: L × dh outputs fill the kernel's tiles (dh = 64 is two 32-wide column tiles; as
                // dVᵀ its 64 rows took six 12-row tiles, 11% of them padding) and scatter as whole rows.
                gemm(pm.t(), dout_h, o, false, false).map_err(gemm_err)?;
                scatter_columns(dqkv_b, o, dh, 3 * d, 2 * d + h * dh);
                // dP = dO · Vᵀ; dS = P ⊙ (dP − Σ_j P ⊙ dP) · scale
                gemm(dout_h, dims.view(qkv, b, h, 2).t(), dp, false, false).map_err(gemm_err)?;
                for (dp, p) in dp.chunks_exact_mut(l).zip(p.chunks_exact(l)) {
                    softmax_row_backward(p, dp, scale);
                }
                let ds = MatRef::row_major(dp, l, l);
                // dQ = dS · K; dK = dSᵀ · Q
                gemm(ds, dims.view(qkv, b, h, 1), o, false, false).map_err(gemm_err)?;
                scatter_columns(dqkv_b, o, dh, 3 * d, h * dh);
                gemm(ds.t(), dims.view(qkv, b, h, 0), o, false, false).map_err(gemm_err)?;
                scatter_columns(dqkv_b, o, dh, 3 * d, d + h * dh);
            }
            Ok::<(), candle_core::Error>(())
        })
    })
}

/// Copy an `L × dh` contiguous block into columns `col..col+dh` of rows `width` apart.
fn scatter_columns(dst: &mut [f32], src: &[f32], dh: usize, width: usize, col: usize) {
    for (r, row) in src.chunks_exact(dh).enumerate() {
        dst[r * width + col..][..dh].copy_from_slice(row);
    }
}

thread_local! {
    /// Per-thread `L × L` buffers of the attention tasks (scores / probabilities and their gradient); cross-entropy
    /// borrows the first for a row's exponentials.
    static ATTN_BUFS: std::cell::RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

impl CustomOp2 for Attention {
    fn name(&self) -> &'static str {
        "stepwise-attention"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        let dims = AttnDims::of(self.name(), l1, l2, self.heads)?;
        let (qkv, _) = f32_rows(s1, l1, self.name())?;
        let (bias, _) = f32_rows(s2, l2, self.name())?;
        let (out, kept) = attention_forward(dims, qkv, bias, self.keep)?;
        if self.keep {
            *self.probabilities.lock().unwrap_or_else(|e| e.into_inner()) = kept;
        }
        Ok((CpuStorage::F32(out), Shape::from((dims.s, dims.l, dims.d))))
    }

    fn bwd(
        &self,
        qkv: &Tensor,
        bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>)> {
        let probabilities = self.probabilities.lock().unwrap_or_else(|e| e.into_inner()).take();
        let dqkv = qkv.apply_op2_no_bwd(
            &bias.contiguous()?,
            &AttentionBackward { heads: self.heads, grad: grad.contiguous()?, probabilities },
        )?;
        Ok((Some(dqkv), None))
    }
}

/// The gradient of [`attention`] with respect to `qkv`, given the output gradient (`S × L × D`).
struct AttentionBackward {
    heads: usize,
    grad: Tensor,
    /// The forward pass's probabilities (`S × H × L × L`), or `None` to recompute them.
    probabilities: Option<Vec<f32>>,
}

impl CustomOp2 for AttentionBackward {
    fn name(&self) -> &'static str {
        "stepwise-attention-backward"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        let dims = AttnDims::of(self.name(), l1, l2, self.heads)?;
        let (qkv, _) = f32_rows(s1, l1, self.name())?;
        let (bias, _) = f32_rows(s2, l2, self.name())?;
        let AttnDims { s, l, d, heads, .. } = dims;
        if self.grad.dims() != [s, l, d] {
            candle_core::bail!("{}: gradient {:?}, expected [{s}, {l}, {d}]", self.name(), self.grad.dims());
        }
        if s * l * d == 0 {
            return Ok((CpuStorage::F32(Vec::new()), Shape::from((s, l, 3 * d))));
        }
        let kept = match &self.probabilities {
            Some(p) if p.len() == s * heads * l * l => Some(p.as_slice()),
            Some(_) => candle_core::bail!("{}: kept probabilities do not fit {:?}", self.name(), l1.dims()),
            None => None,
        };
        let dqkv = with_data(&self.grad, self.name(), |dout| attention_backward(dims, qkv, bias, dout, kept))?;
        Ok((CpuStorage::F32(dqkv), Shape::from((s, l, 3 * d))))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Softmax

/// Softmax over the last dimension with a gradient, one pass each way: forward `y = exp(x - max) / Σ`, backward
/// `dx = y ⊙ (dy - Σ dy ⊙ y)`. The composite `ops::softmax` makes five tensors forward and about twice as many
/// backward, which dominates training time when the rows are long (attention over hundreds of patches and
/// tokens).
pub fn softmax_last_dim(x: &Tensor) -> CResult<Tensor> {
    x.contiguous()?.apply_op1(SoftmaxLastDim)
}

struct SoftmaxLastDim;

impl CustomOp1 for SoftmaxLastDim {
    fn name(&self) -> &'static str {
        "stepwise-softmax-last-dim"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (x, n) = f32_rows(storage, layout, self.name())?;
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(n).zip(x.par_chunks(n)).for_each(|(y, x)| {
            y.copy_from_slice(x);
            softmax_row(y, &[], 1.0);
        });
        Ok((CpuStorage::F32(y), layout.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad_res: &Tensor) -> CResult<Option<Tensor>> {
        Ok(Some(res.contiguous()?.apply_op2_no_bwd(&grad_res.contiguous()?, &SoftmaxBackward)?))
    }
}

/// `(y, dy) → y ⊙ (dy - Σ dy ⊙ y)` row by row.
struct SoftmaxBackward;

impl CustomOp2 for SoftmaxBackward {
    fn name(&self) -> &'static str {
        "stepwise-softmax-backward"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (y, dy, n) = paired_rows(s1, l1, s2, l2, self.name())?;
        let mut dx = dy.to_vec();
        dx.par_chunks_mut(n).zip(y.par_chunks(n)).for_each(|(dx, y)| softmax_row_backward(y, dx, 1.0));
        Ok((CpuStorage::F32(dx), l1.shape().clone()))
    }
}

/// Mean cross-entropy of `logits` (`N × V`) against `labels` (`N` class indices), one pass each way: forward
/// `mean_r (logsumexp(x_r) − x_r[label_r])`, backward `(softmax(x_r) − onehot(label_r)) · g / N`. The composite
/// (`log_softmax`, `gather`, `mean`) made about fifteen `N × V` tensors over the two passes; with the MLM head's
/// 30,522 classes those dominated the pretraining step's loss.
pub fn cross_entropy(logits: &Tensor, labels: &[u32]) -> CResult<Tensor> {
    logits.contiguous()?.apply_op1(CrossEntropy { labels: labels.to_vec(), lse: Mutex::new(Vec::new()) })
}

struct CrossEntropy {
    labels: Vec<u32>,
    /// Each row's log-sum-exp, for the backward pass.
    lse: Mutex<Vec<f32>>,
}

impl CrossEntropy {
    fn check(&self, layout: &Layout) -> CResult<(usize, usize)> {
        let &[n, v] = layout.dims() else {
            candle_core::bail!("{}: logits must be N × V, got {:?}", self.name(), layout.dims());
        };
        if self.labels.len() != n || self.labels.iter().any(|&c| c as usize >= v) {
            candle_core::bail!(
                "{}: {} labels for {n} rows of {v} classes (or a label out of range)",
                self.name(),
                self.labels.len()
            );
        }
        Ok((n, v))
    }
}

impl CustomOp1 for CrossEntropy {
    fn name(&self) -> &'static str {
        "stepwise-cross-entropy"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (n, v) = self.check(layout)?;
        let (x, _) = f32_rows(storage, layout, self.name())?;
        let mut lse = vec![0f32; n];
        if v > 0 {
            lse.par_iter_mut().zip(x.par_chunks(v)).for_each(|(lse, row)| {
                ATTN_BUFS.with(|bufs| {
                    let (scratch, _, _) = &mut *bufs.borrow_mut();
                    scratch.clear();
                    scratch.extend_from_slice(row);
                    let max = math::row_max(row);
                    math::exp_shifted(scratch, max);
                    *lse = max + math::row_sum(scratch).ln();
                });
            });
        }
        let total: f64 =
            lse.iter().zip(&self.labels).enumerate().map(|(r, (&l, &c))| (l - x[r * v + c as usize]) as f64).sum();
        *self.lse.lock().unwrap_or_else(|e| e.into_inner()) = lse;
        Ok((CpuStorage::F32(vec![(total / n.max(1) as f64) as f32]), Shape::from(())))
    }

    fn bwd(&self, logits: &Tensor, _res: &Tensor, grad: &Tensor) -> CResult<Option<Tensor>> {
        let (n, v) = self.check(logits.layout())?;
        let g = grad.to_scalar::<f32>()? / n.max(1) as f32;
        let lse = self.lse.lock().unwrap_or_else(|e| e.into_inner());
        let mut dx = with_data(logits, self.name(), |x| Ok(x.to_vec()))?;
        if v > 0 {
            dx.par_chunks_mut(v).zip(lse.par_iter().zip(self.labels.par_iter())).for_each(|(row, (&lse, &c))| {
                math::exp_shifted(row, lse);
                row[c as usize] -= 1.0;
                row.iter_mut().for_each(|d| *d *= g);
            });
        }
        Ok(Some(Tensor::from_vec(dx, (n, v), logits.device())?))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Layer norm

/// Layer normalisation over the last dimension, `γ ⊙ (x - μ) / √(σ² + eps) + β`, with a one-pass backward.
pub fn layer_norm(x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f32) -> CResult<Tensor> {
    x.contiguous()?.apply_op3(&gamma.contiguous()?, &beta.contiguous()?, LayerNorm { eps })
}

/// Mean and 1/√(var + eps) of a row (two passes: exact for rows far from zero).
#[inline]
fn row_stats(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + eps).sqrt())
}

struct LayerNorm {
    eps: f32,
}

impl CustomOp3 for LayerNorm {
    fn name(&self) -> &'static str {
        "stepwise-layer-norm"
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
        let (x, n) = f32_rows(s1, l1, self.name())?;
        let (g, _) = f32_rows(s2, l2, self.name())?;
        let (b, _) = f32_rows(s3, l3, self.name())?;
        if g.len() != n || b.len() != n {
            candle_core::bail!("{}: rows of {n}, γ of {}, β of {}", self.name(), g.len(), b.len());
        }
        let chunk = rows_chunk(n);
        let y = par_vec(x.len(), chunk, |i, y| {
            for (y, x) in y.chunks_exact_mut(n).zip(x[i * chunk..].chunks_exact(n)) {
                let (mean, rstd) = row_stats(x, self.eps);
                for (((y, &x), &g), &b) in y.iter_mut().zip(x).zip(g).zip(b) {
                    *y = (x - mean) * rstd * g + b;
                }
            }
        });
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        gamma: &Tensor,
        _beta: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dx = x.apply_op3_no_bwd(gamma, &grad, &LayerNormInputGrad { eps: self.eps })?;
        let params = x.apply_op2_no_bwd(&grad, &LayerNormParamGrad { eps: self.eps })?; // 2 × n: dγ, dβ
        Ok((Some(dx), Some(params.get(0)?), Some(params.get(1)?)))
    }
}

/// `dx = rstd · (g·γ - mean(g·γ) - x̂ · mean(g·γ ⊙ x̂))` row by row.
struct LayerNormInputGrad {
    eps: f32,
}

impl CustomOp3 for LayerNormInputGrad {
    fn name(&self) -> &'static str {
        "stepwise-layer-norm-input-grad"
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
        let (x, dy, n) = paired_rows(s1, l1, s3, l3, self.name())?;
        let (gamma, _) = f32_rows(s2, l2, self.name())?;
        if gamma.len() != n {
            candle_core::bail!("{}: rows of {n}, γ of {}", self.name(), gamma.len());
        }
        let chunk = rows_chunk(n);
        let dx = par_vec(x.len(), chunk, |i, dx| {
            let (x, dy) = (&x[i * chunk..], &dy[i * chunk..]);
            for ((dx, x), dy) in dx.chunks_exact_mut(n).zip(x.chunks_exact(n)).zip(dy.chunks_exact(n)) {
                let (mean, rstd) = row_stats(x, self.eps);
                dx.iter_mut().zip(x).for_each(|(o, &x)| *o = (x - mean) * rstd);
                layer_norm_row_grad(dx, rstd, gamma, dy);
            }
        });
        Ok((CpuStorage::F32(dx), l1.shape().clone()))
    }
}

/// One row of the layer norm's input gradient in place: `row` holds `x̂` on entry and
/// `dx = rstd · (dy·γ − mean(dy·γ) − x̂ · mean(dy·γ ⊙ x̂))` on return (each value reads only its own `x̂` after the
/// sums, so no second buffer).
fn layer_norm_row_grad(row: &mut [f32], rstd: f32, gamma: &[f32], dy: &[f32]) {
    let n = row.len().max(1) as f32;
    let (mut sum_g, mut sum_gx) = (0f32, 0f32);
    for ((&xh, &dy), &g) in row.iter().zip(dy).zip(gamma) {
        let gg = dy * g;
        sum_g += gg;
        sum_gx += gg * xh;
    }
    let (mg, mgx) = (sum_g / n, sum_gx / n);
    for ((x, &dy), &g) in row.iter_mut().zip(dy).zip(gamma) {
        *x = rstd * (dy * g - mg - *x * mgx);
    }
}

/// `[Σ_rows dy ⊙ x̂ ; Σ_rows dy]` (`2 × n`), chunk partials added in chunk order.
struct LayerNormParamGrad {
    eps: f32,
}

impl CustomOp2 for LayerNormParamGrad {
    fn name(&self) -> &'static str {
        "stepwise-layer-norm-param-grad"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (x, dy, n) = paired_rows(s1, l1, s2, l2, self.name())?;
        let total = chunked_row_sums(x.len() / n, 2 * n, |range, acc| {
            let (sg, sb) = acc.split_at_mut(n);
            for r in range {
                let (x, dy) = (&x[r * n..(r + 1) * n], &dy[r * n..(r + 1) * n]);
                let (mean, rstd) = row_stats(x, self.eps);
                for (((sg, sb), &x), &dy) in sg.iter_mut().zip(sb.iter_mut()).zip(x).zip(dy) {
                    *sg += dy * (x - mean) * rstd;
                    *sb += dy;
                }
            }
        });
        Ok((CpuStorage::F32(total), Shape::from((2, n))))
    }
}

// ---------------------------------------------------------------------------------------------------------------
// GELU

/// GELU with the erf (BERT, PyTorch's default; erf from [`math::erf`], within 3e-7 of the exact one), one pass
/// each way.
pub fn gelu(x: &Tensor) -> CResult<Tensor> {
    x.contiguous()?.apply_op1(Gelu)
}

const ELEMENT_CHUNK: usize = 4096;

struct Gelu;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "stepwise-gelu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (x, _) = f32_rows(storage, layout, self.name())?;
        let y = par_vec(x.len(), ELEMENT_CHUNK, |i, y| math::gelu(&x[i * ELEMENT_CHUNK..][..y.len()], y));
        Ok((CpuStorage::F32(y), layout.shape().clone()))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> CResult<Option<Tensor>> {
        Ok(Some(arg.apply_op2_no_bwd(&grad.contiguous()?, &GeluBackward)?))
    }
}

/// `(x, dy) → dy · (Φ(x) + x φ(x))`.
struct GeluBackward;

impl CustomOp2 for GeluBackward {
    fn name(&self) -> &'static str {
        "stepwise-gelu-backward"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        let (x, dy, _) = paired_rows(s1, l1, s2, l2, self.name())?;
        let dx = par_vec(x.len(), ELEMENT_CHUNK, |i, dx| {
            let at = i * ELEMENT_CHUNK..i * ELEMENT_CHUNK + dx.len();
            math::gelu_backward(&x[at.clone()], &dy[at], dx)
        });
        Ok((CpuStorage::F32(dx), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};
    use rand::Rng;
    use stepwise_core::rng::rng_for;

    fn random(shape: &[usize], key: &str) -> Tensor {
        let mut rng = rng_for(7, key);
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    fn flat(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    }

    fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
        }
        assert!(b.iter().any(|v| v.abs() > 1e-3), "{what}: the reference must not be all zeros");
    }

    /// Forward values and the gradients of every input of `f` (ours) and `g` (candle's composite) under the same
    /// random linear loss.
    fn compare(
        inputs: &[Tensor],
        ours: impl Fn(&[Tensor]) -> Tensor,
        reference: impl Fn(&[Tensor]) -> Tensor,
        tol: f32,
    ) {
        let run = |f: &dyn Fn(&[Tensor]) -> Tensor| {
            let vars: Vec<Var> = inputs.iter().map(|t| Var::from_tensor(t).unwrap()).collect();
            let ts: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
            let y = f(&ts);
            let w = random(y.dims(), "loss-weights");
            let loss = (&y * &w).unwrap().sum_all().unwrap();
            let grads = loss.backward().unwrap();
            let g: Vec<Vec<f32>> =
                ts.iter().map(|t| flat(grads.get(t).expect("every input gets a gradient"))).collect();
            (flat(&y), g)
        };
        let (y1, g1) = run(&ours);
        let (y0, g0) = run(&reference);
        assert_close(&y1, &y0, tol, "forward");
        for (i, (a, b)) in g1.iter().zip(&g0).enumerate() {
            assert_close(a, b, tol, &format!("gradient of input {i}"));
        }
    }

    #[test]
    fn matmul_matches_candle_forward_and_backward_including_transposed_and_batched_views() {
        let a = random(&[2, 3, 7, 5], "a");
        let b = random(&[2, 3, 5, 9], "b");
        compare(&[a.clone(), b.clone()], |t| matmul(&t[0], &t[1]).unwrap(), |t| t[0].matmul(&t[1]).unwrap(), 1e-5);
        // Transposed operands are read in place.
        let bt = random(&[2, 3, 9, 5], "bt");
        compare(
            &[a, bt],
            |t| matmul(&t[0], &t[1].transpose(2, 3).unwrap()).unwrap(),
            |t| t[0].matmul(&t[1].transpose(2, 3).unwrap().contiguous().unwrap()).unwrap(),
            1e-5,
        );
        // A batch layout that does not nest is copied first.
        let p = random(&[3, 2, 7, 5], "p");
        let q = random(&[2, 3, 5, 4], "q");
        compare(
            &[p, q],
            |t| matmul(&t[0].transpose(0, 1).unwrap(), &t[1]).unwrap(),
            |t| t[0].transpose(0, 1).unwrap().contiguous().unwrap().matmul(&t[1]).unwrap(),
            1e-5,
        );
    }

    #[test]
    fn attention_matches_the_composite_forward_and_backward_with_masked_keys() {
        let (s, l, d, heads) = (3, 37, 16, 4);
        let qkv = random(&[s, l, 3 * d], "qkv");
        // Sequence 1 has 30 real keys, sequence 2 has 5.
        let mut mask = vec![1f32; s * l];
        mask[l + 30..2 * l].iter_mut().for_each(|m| *m = 0.0);
        mask[2 * l + 5..].iter_mut().for_each(|m| *m = 0.0);
        let mask = Tensor::from_vec(mask, (s, l), &Device::Cpu).unwrap();
        let bias = (mask.affine(1.0, -1.0).unwrap() * 1e9).unwrap();
        let b2 = bias.clone();
        compare(
            &[qkv],
            |t| attention(&t[0], &bias, heads).unwrap(),
            |t| {
                let dh = d / heads;
                let part = |i: usize| {
                    t[0].narrow(2, i * d, d)
                        .unwrap()
                        .reshape((s, l, heads, dh))
                        .unwrap()
                        .transpose(1, 2)
                        .unwrap()
                        .contiguous()
                        .unwrap()
                };
                let (q, k, v) = (part(0), part(1), part(2));
                let att = (q.matmul(&k.transpose(2, 3).unwrap().contiguous().unwrap()).unwrap() / (dh as f64).sqrt())
                    .unwrap();
                let att = att.broadcast_add(&b2.reshape((s, 1, 1, l)).unwrap()).unwrap();
                let p = candle_nn::ops::softmax(&att, D::Minus1).unwrap();
                p.matmul(&v).unwrap().transpose(1, 2).unwrap().contiguous().unwrap().reshape((s, l, d)).unwrap()
            },
            1e-4,
        );
    }

    #[test]
    fn attention_backward_gives_the_same_bits_from_kept_and_recomputed_probabilities() {
        let (s, l, d, heads) = (2, 29, 16, 4);
        let qkv = Var::from_tensor(&random(&[s, l, 3 * d], "qkv-kept")).unwrap();
        let bias = Tensor::zeros((s, l), candle_core::DType::F32, &Device::Cpu).unwrap();
        let y = attention(qkv.as_tensor(), &bias, heads).unwrap();
        let loss = (&y * &random(y.dims(), "w-kept")).unwrap().sum_all().unwrap();
        // The first backward pass takes the forward pass's probabilities, the second recomputes them.
        let first = flat(loss.backward().unwrap().get(qkv.as_tensor()).unwrap());
        let second = flat(loss.backward().unwrap().get(qkv.as_tensor()).unwrap());
        assert!(first.iter().any(|v| *v != 0.0));
        assert_eq!(
            first.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            second.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn constant_inputs_get_no_gradient_and_parameters_the_same_one() {
        // A frozen input (a plain tensor) next to a parameter: only the parameter's gradient is made, and it is
        // the gradient candle's own product gives.
        let x = random(&[6, 5], "const-x");
        let w = Var::from_tensor(&random(&[5, 3], "const-w")).unwrap();
        let b = Var::from_tensor(&random(&[3], "const-b")).unwrap();
        for y in [linear(&x, w.as_tensor(), Some(b.as_tensor())).unwrap(), matmul(&x, w.as_tensor()).unwrap()] {
            let grads = (&y * &random(y.dims(), "const-loss")).unwrap().sum_all().unwrap().backward().unwrap();
            assert!(grads.get(&x).is_none(), "a constant input must not get a gradient");
            let reference = (x.matmul(w.as_tensor()).unwrap() * &random(y.dims(), "const-loss")).unwrap();
            let reference = reference.sum_all().unwrap().backward().unwrap();
            assert_close(
                &flat(grads.get(w.as_tensor()).unwrap()),
                &flat(reference.get(w.as_tensor()).unwrap()),
                1e-5,
                "dW",
            );
        }
    }

    #[test]
    fn empty_batches_give_empty_results_not_panics() {
        let qkv = Var::from_tensor(&Tensor::zeros((2, 0, 24), candle_core::DType::F32, &Device::Cpu).unwrap()).unwrap();
        let bias = Tensor::zeros((2, 0), candle_core::DType::F32, &Device::Cpu).unwrap();
        let y = attention(qkv.as_tensor(), &bias, 4).unwrap();
        assert_eq!(y.dims(), &[2, 0, 8]);
        let grads = y.sum_all().unwrap().backward().unwrap();
        assert_eq!(grads.get(qkv.as_tensor()).unwrap().dims(), &[2, 0, 24]);
        let x = Tensor::zeros((0, 5), candle_core::DType::F32, &Device::Cpu).unwrap();
        let w = random(&[5, 3], "empty-w");
        let b = random(&[3], "empty-b");
        assert_eq!(linear(&x, &w, Some(&b)).unwrap().dims(), &[0, 3]);
        assert_eq!(layer_norm(&x, &random(&[5], "g"), &random(&[5], "b"), 1e-5).unwrap().dims(), &[0, 5]);
        assert_eq!(gelu(&x).unwrap().dims(), &[0, 5]);
        assert_eq!(softmax_last_dim(&x).unwrap().dims(), &[0, 5]);
    }

    #[test]
    fn linear_matches_candle_forward_and_backward() {
        let x = random(&[4, 300, 40], "x"); // more rows than one column-sum chunk
        let w = random(&[40, 33], "w");
        let b = random(&[33], "bias");
        compare(
            &[x, w, b],
            |t| linear(&t[0], &t[1], Some(&t[2])).unwrap(),
            |t| {
                t[0].reshape((1200, 40))
                    .unwrap()
                    .matmul(&t[1])
                    .unwrap()
                    .broadcast_add(&t[2])
                    .unwrap()
                    .reshape((4, 300, 33))
                    .unwrap()
            },
            1e-4,
        );
    }

    #[test]
    fn cross_entropy_matches_candle_forward_and_backward() {
        let logits = random(&[37, 70], "ce-logits");
        let labels: Vec<u32> = (0..37).map(|r| (r * 13 % 70) as u32).collect();
        let y = Tensor::from_vec(labels.clone(), (37, 1), &Device::Cpu).unwrap();
        compare(
            &[logits],
            |t| cross_entropy(&t[0], &labels).unwrap(),
            |t| {
                let logp = candle_nn::ops::log_softmax(&t[0], D::Minus1).unwrap();
                logp.gather(&y, 1).unwrap().squeeze(1).unwrap().mean_all().unwrap().neg().unwrap()
            },
            1e-5,
        );
        assert!(cross_entropy(&random(&[2, 3], "ce-bad"), &[0, 3]).is_err(), "a label out of range is an error");
    }

    #[test]
    fn layer_norm_matches_candle_forward_and_backward() {
        let x = random(&[3, 300, 24], "ln-x").affine(1.5, 0.7).unwrap();
        let g = random(&[24], "ln-g");
        let b = random(&[24], "ln-b");
        compare(
            &[x, g, b],
            |t| layer_norm(&t[0], &t[1], &t[2], 1e-5).unwrap(),
            |t| candle_nn::ops::layer_norm_slow(&t[0], &t[1], &t[2], 1e-5).unwrap(),
            2e-4,
        );
    }

    #[test]
    fn gelu_matches_candle_forward_and_backward() {
        let x = random(&[5, 1000], "gelu-x").affine(2.0, 0.0).unwrap();
        compare(&[x], |t| gelu(&t[0]).unwrap(), |t| t[0].gelu_erf().unwrap(), 1e-5);
    }

    #[test]
    fn softmax_matches_candle_forward_and_backward() {
        let x = random(&[2, 3, 37], "sm-x").affine(3.0, 0.0).unwrap();
        compare(
            &[x],
            |t| softmax_last_dim(&t[0].transpose(0, 1).unwrap()).unwrap(),
            |t| candle_nn::ops::softmax(&t[0].transpose(0, 1).unwrap(), D::Minus1).unwrap(),
            1e-5,
        );
    }

    #[test]
    fn ops_give_the_same_bits_for_any_thread_count() {
        let x = random(&[600, 48], "det-x");
        let w = random(&[48, 40], "det-w");
        let b = random(&[40], "det-b");
        let g = random(&[40], "det-g");
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let vars: Vec<Var> = [&x, &w, &b, &g].iter().map(|t| Var::from_tensor(t).unwrap()).collect();
                let t: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
                let h = gelu(&linear(&t[0], &t[1], Some(&t[2])).unwrap()).unwrap();
                let y = softmax_last_dim(&layer_norm(&h, &t[3], &t[2], 1e-12).unwrap()).unwrap();
                let loss = y.sqr().unwrap().sum_all().unwrap();
                let grads = loss.backward().unwrap();
                t.iter().map(|t| flat(grads.get(t).unwrap())).collect::<Vec<_>>()
            })
        };
        let one = run(1);
        for threads in [2, 3] {
            let other = run(threads);
            for (a, b) in one.iter().zip(&other) {
                assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()), "{threads} threads differ");
            }
        }
    }

    /// The LSTM recurrence as candle ops, one step at a time (what `nn::LstmDirection` ran before the fused op).
    fn lstm_composite(xw: &Tensor, w_hh: &Tensor, hc0: &Tensor, mask: Option<&Tensor>, reverse: bool) -> Tensor {
        let (_, l, g4) = xw.dims3().unwrap();
        let h = g4 / 4;
        let sig = |x: Tensor| candle_nn::ops::sigmoid(&x).unwrap();
        let (mut hs, mut cs) = (hc0.narrow(1, 0, h).unwrap(), hc0.narrow(1, h, h).unwrap());
        let mut outs = vec![hs.zeros_like().unwrap(); l];
        let steps: Vec<usize> = if reverse { (0..l).rev().collect() } else { (0..l).collect() };
        for t in steps {
            let g = (xw.narrow(1, t, 1).unwrap().squeeze(1).unwrap() + hs.matmul(w_hh).unwrap()).unwrap();
            let i = sig(g.narrow(1, 0, h).unwrap());
            let f = sig(g.narrow(1, h, h).unwrap());
            let c = g.narrow(1, 2 * h, h).unwrap().tanh().unwrap();
            let o = sig(g.narrow(1, 3 * h, h).unwrap());
            let c_new = ((f * &cs).unwrap() + (i * c).unwrap()).unwrap();
            let h_new = (o * c_new.tanh().unwrap()).unwrap();
            match mask {
                Some(m) => {
                    let mt = m.narrow(1, t, 1).unwrap();
                    hs = (&hs + h_new.broadcast_sub(&hs).unwrap().broadcast_mul(&mt).unwrap()).unwrap();
                    cs = (&cs + c_new.broadcast_sub(&cs).unwrap().broadcast_mul(&mt).unwrap()).unwrap();
                    outs[t] = h_new.broadcast_mul(&mt).unwrap();
                }
                None => {
                    (hs, cs) = (h_new.clone(), c_new);
                    outs[t] = h_new;
                }
            }
        }
        outs.push(hs);
        outs.push(cs);
        Tensor::stack(&outs, 1).unwrap()
    }

    #[test]
    fn lstm_recurrence_matches_the_per_step_composite_forward_and_backward() {
        let (s, l, h) = (5, 7, 6);
        let xw = random(&[s, l, 4 * h], "lstm-xw");
        let w = random(&[h, 4 * h], "lstm-w").affine(0.5, 0.0).unwrap();
        let hc0 = random(&[s, 2 * h], "lstm-hc0");
        // Sequence 1 is padded after 4 steps, sequence 3 has a hole, sequence 4 has no real step.
        let mut m = vec![1f32; s * l];
        m[l + 4..2 * l].iter_mut().for_each(|v| *v = 0.0);
        m[3 * l + 2] = 0.0;
        m[4 * l..5 * l].iter_mut().for_each(|v| *v = 0.0);
        let mask = Tensor::from_vec(m, (s, l), &Device::Cpu).unwrap();
        for reverse in [false, true] {
            for mask in [None, Some(&mask)] {
                compare(
                    &[xw.clone(), w.clone(), hc0.clone()],
                    |t| lstm_recurrence(&t[0], &t[1], &t[2], mask, reverse).unwrap(),
                    |t| lstm_composite(&t[0], &t[1], &t[2], mask, reverse),
                    1e-4,
                );
            }
        }
    }

    #[test]
    fn lstm_recurrence_refuses_shapes_that_do_not_fit() {
        let xw = random(&[2, 3, 8], "bad-xw");
        let hc0 = random(&[2, 4], "bad-hc0");
        assert!(lstm_recurrence(&xw, &random(&[2, 6], "bad-w"), &hc0, None, false).is_err());
        assert!(lstm_recurrence(&xw, &random(&[2, 8], "ok-w"), &random(&[3, 4], "bad-h"), None, false).is_err());
        let mask = Tensor::ones((2, 4), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert!(lstm_recurrence(&xw, &random(&[2, 8], "ok-w"), &hc0, Some(&mask), false).is_err());
        // A transposed mask (L × S) has the right number of values but not the right shape.
        let transposed = Tensor::ones((3, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert!(lstm_recurrence(&xw, &random(&[2, 8], "ok-w"), &hc0, Some(&transposed), false).is_err());
    }

    #[test]
    fn lstm_recurrence_of_no_steps_or_no_sequences_is_the_initial_state() {
        let w = Var::from_tensor(&random(&[2, 8], "empty-w")).unwrap();
        // No steps: the final states are the initial ones, and their gradient passes straight through.
        let hc0 = Var::from_tensor(&random(&[3, 4], "empty-hc0")).unwrap();
        let xw = Tensor::zeros((3, 0, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        let y = lstm_recurrence(&xw, w.as_tensor(), hc0.as_tensor(), None, false).unwrap();
        assert_eq!(y.dims(), [3, 2, 2]);
        assert_eq!(flat(&y), flat(hc0.as_tensor()));
        let grads = y.sum_all().unwrap().backward().unwrap();
        assert!(flat(grads.get(hc0.as_tensor()).unwrap()).iter().all(|&g| g == 1.0));
        assert!(flat(grads.get(w.as_tensor()).unwrap()).iter().all(|&g| g == 0.0));
        // No sequences.
        let xw = Tensor::zeros((0, 5, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        let hc0 = Tensor::zeros((0, 4), candle_core::DType::F32, &Device::Cpu).unwrap();
        let y = lstm_recurrence(&xw, w.as_tensor(), &hc0, None, true).unwrap();
        assert_eq!(y.dims(), [0, 7, 2]);
        assert!(y.sum_all().unwrap().backward().is_ok());
    }

    #[test]
    fn lstm_recurrence_gives_the_same_bits_for_any_thread_count() {
        // Enough rows that a step's rows split over several tasks.
        let (s, l, h) = (40, 5, 24);
        let inputs = [
            random(&[s, l, 4 * h], "det-lstm-xw"),
            random(&[h, 4 * h], "det-lstm-w"),
            random(&[s, 2 * h], "det-lstm-hc"),
        ];
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let vars: Vec<Var> = inputs.iter().map(|t| Var::from_tensor(t).unwrap()).collect();
                let t: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
                let y = lstm_recurrence(&t[0], &t[1], &t[2], None, true).unwrap();
                let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
                let mut all = vec![flat(&y)];
                all.extend(t.iter().map(|t| flat(grads.get(t).unwrap())));
                all
            })
        };
        let one = run(1);
        for threads in [2, 3] {
            let other = run(threads);
            for (a, b) in one.iter().zip(&other) {
                assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()), "{threads} threads differ");
            }
        }
    }
}
