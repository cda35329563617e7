//! The LSTM recurrence (PyTorch's layout: gates i, f, g, o) over a whole sequence as one op with its own backward
//! pass.
//!
//! Why one op: as candle ops each time step made about a dozen small tensors forward and twice as many backward,
//! each one an allocation and a pass on the calling thread; on `stepwise bench train` the two BiLSTMs took 2.5×
//! PyTorch's time although their products are a small share of the step. Here a time step is one GEMM into the
//! gates' pre-activations (which start as the input projection, computed for all steps beforehand) and one pass
//! over the rows in parallel; the backward pass walks the steps in reverse with the activations the forward pass
//! kept, and the recurrent weight's gradient is one product over all steps. Tested against the per-step composite
//! of candle ops, forward and backward.

use std::sync::Mutex;

use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};
use rayon::prelude::*;
use stepwise_kernels::{MatRef, gemm};

use super::{f32_rows, gemm_err, with_data};
use crate::nn::CResult;

/// Rows of one time step per parallel task (a row is `4H` gate values).
const ROWS_PER_TASK: usize = 4;

/// The recurrence of one LSTM direction.
///
/// - `xw`: `S × L × 4H`, the input projection `x_t W_ih + b` of every step;
/// - `w_hh`: `H × 4H`, the recurrent weight;
/// - `hc0`: `S × 2H`, the initial state `[h₀ | c₀]`;
/// - `mask` (`S × L`, 1 = real step, not differentiated): at a masked step the state passes through unchanged and
///   the output is zero;
/// - `reverse`: run from the last step to the first.
///
/// Returns `S × (L + 2) × H`: the outputs of the `L` steps, then the final hidden state, then the final cell state.
pub fn lstm_recurrence(
    xw: &Tensor,
    w_hh: &Tensor,
    hc0: &Tensor,
    mask: Option<&Tensor>,
    reverse: bool,
) -> CResult<Tensor> {
    let mask = match mask {
        Some(m) => {
            let (s, l, _) = xw.dims3()?;
            if m.dims() != [s, l] {
                candle_core::bail!("stepwise-lstm: a mask of shape {:?} for {s} × {l} steps", m.dims());
            }
            Some(m.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
        }
        None => None,
    };
    let keep = xw.track_op() || w_hh.track_op() || hc0.track_op();
    xw.contiguous()?.apply_op3(
        &w_hh.contiguous()?,
        &hc0.contiguous()?,
        LstmRecurrence { mask, reverse, keep, saved: Mutex::new(None) },
    )
}

struct LstmRecurrence {
    /// `S × L` values, row-major (its shape checked by [`lstm_recurrence`]).
    mask: Option<Vec<f32>>,
    reverse: bool,
    /// Keep the activations for a backward pass (the graph tracks an input).
    keep: bool,
    saved: Mutex<Option<Saved>>,
}

/// What the backward pass reads, per time step `t` (indexed by time, whichever the direction).
struct Saved {
    /// Activated gates `[i | f | g | o]`, `L × S × 4H`.
    gates: Vec<f32>,
    /// The cell state before step `t`, `L × S × H`.
    c_prev: Vec<f32>,
    /// `tanh` of the new cell state of step `t`, `L × S × H`.
    tanh_c: Vec<f32>,
    /// The hidden state before step `t`, `S × L × H` (the rows of the recurrent weight's gradient product).
    h_prev: Vec<f32>,
}

/// Sizes of one call: sequences, steps, hidden width.
#[derive(Clone, Copy)]
struct Dims {
    s: usize,
    l: usize,
    h: usize,
}

impl LstmRecurrence {
    fn dims(&self, xw: &Layout, w_hh: &Layout, hc0: &Layout) -> CResult<Dims> {
        let name = self.name();
        let (s, l, g4) = match xw.dims() {
            &[s, l, g4] => (s, l, g4),
            other => candle_core::bail!("{name}: the input projection must be S × L × 4H, got {other:?}"),
        };
        let h = g4 / 4;
        if h == 0 || g4 != 4 * h || w_hh.dims() != [h, g4] || hc0.dims() != [s, 2 * h] {
            candle_core::bail!(
                "{name}: shapes {:?} (input projection), {:?} (recurrent weight), {:?} (initial state) do not fit",
                xw.dims(),
                w_hh.dims(),
                hc0.dims()
            );
        }
        Ok(Dims { s, l, h })
    }

    /// The time index of the `k`-th step taken.
    fn time(&self, k: usize, l: usize) -> usize {
        if self.reverse { l - 1 - k } else { k }
    }

    fn mask_at(&self, r: usize, t: usize, l: usize) -> f32 {
        self.mask.as_ref().map_or(1.0, |m| m[r * l + t])
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl CustomOp3 for LstmRecurrence {
    fn name(&self) -> &'static str {
        "stepwise-lstm"
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
        let Dims { s, l, h } = self.dims(l1, l2, l3)?;
        let name = self.name();
        let (xw, w, hc0) = (f32_rows(s1, l1, name)?.0, f32_rows(s2, l2, name)?.0, f32_rows(s3, l3, name)?.0);
        let mut h_state: Vec<f32> = hc0.chunks_exact(2 * h).flat_map(|r| r[..h].iter().copied()).collect();
        let mut c_state: Vec<f32> = hc0.chunks_exact(2 * h).flat_map(|r| r[h..].iter().copied()).collect();
        let mut out = vec![0f32; s * (l + 2) * h];
        let mut saved = self.keep.then(|| Saved {
            gates: vec![0f32; l * s * 4 * h],
            c_prev: vec![0f32; l * s * h],
            tanh_c: vec![0f32; l * s * h],
            h_prev: vec![0f32; s * l * h],
        });
        let mut g = vec![0f32; s * 4 * h];
        let mut step_out = vec![0f32; s * h];
        let (mut scratch_c, mut scratch_t) =
            if saved.is_some() { (Vec::new(), Vec::new()) } else { (vec![0f32; s * h], vec![0f32; s * h]) };
        for k in 0..l {
            let t = self.time(k, l);
            for (r, row) in g.chunks_exact_mut(4 * h).enumerate() {
                row.copy_from_slice(&xw[(r * l + t) * 4 * h..][..4 * h]);
            }
            if s > 0 {
                gemm(MatRef::row_major(&h_state, s, h), MatRef::row_major(w, h, 4 * h), &mut g, true, true)
                    .map_err(gemm_err)?;
            }
            if let Some(sv) = saved.as_mut() {
                for (r, hr) in h_state.chunks_exact(h).enumerate() {
                    sv.h_prev[(r * l + t) * h..][..h].copy_from_slice(hr);
                }
            }
            // The kept buffers of step t, or scratch rows when nothing is kept.
            let (c_prev_t, tanh_c_t): (&mut [f32], &mut [f32]) = match saved.as_mut() {
                Some(sv) => (&mut sv.c_prev[t * s * h..][..s * h], &mut sv.tanh_c[t * s * h..][..s * h]),
                None => (&mut scratch_c, &mut scratch_t),
            };
            g.par_chunks_mut(4 * h)
                .zip(h_state.par_chunks_mut(h))
                .zip(c_state.par_chunks_mut(h))
                .zip(c_prev_t.par_chunks_mut(h))
                .zip(tanh_c_t.par_chunks_mut(h))
                .zip(step_out.par_chunks_mut(h))
                .enumerate()
                .with_min_len(ROWS_PER_TASK)
                .for_each(|(r, (((((gr, hr), cr), cp), tc), o))| {
                    let m = self.mask_at(r, t, l);
                    let (gi, rest) = gr.split_at_mut(h);
                    let (gf, rest) = rest.split_at_mut(h);
                    let (gg, go) = rest.split_at_mut(h);
                    for j in 0..h {
                        let (i, f, c, og) = (sigmoid(gi[j]), sigmoid(gf[j]), gg[j].tanh(), sigmoid(go[j]));
                        (gi[j], gf[j], gg[j], go[j]) = (i, f, c, og);
                        let c_old = cr[j];
                        let c_new = f * c_old + i * c;
                        let tanh_new = c_new.tanh();
                        let h_new = og * tanh_new;
                        cp[j] = c_old;
                        tc[j] = tanh_new;
                        o[j] = h_new * m;
                        hr[j] += m * (h_new - hr[j]);
                        cr[j] += m * (c_new - c_old);
                    }
                });
            if let Some(sv) = saved.as_mut() {
                sv.gates[t * s * 4 * h..][..s * 4 * h].copy_from_slice(&g);
            }
            for (r, o) in step_out.chunks_exact(h).enumerate() {
                out[(r * (l + 2) + t) * h..][..h].copy_from_slice(o);
            }
        }
        for r in 0..s {
            out[(r * (l + 2) + l) * h..][..h].copy_from_slice(&h_state[r * h..][..h]);
            out[(r * (l + 2) + l + 1) * h..][..h].copy_from_slice(&c_state[r * h..][..h]);
        }
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = saved;
        Ok((CpuStorage::F32(out), Shape::from((s, l + 2, h))))
    }

    fn bwd(
        &self,
        xw: &Tensor,
        w_hh: &Tensor,
        hc0: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let name = self.name();
        let Dims { s, l, h } = self.dims(xw.layout(), w_hh.layout(), hc0.layout())?;
        let (want_xw, want_w, want_hc) = (xw.track_op(), w_hh.track_op(), hc0.track_op());
        if !(want_xw || want_w || want_hc) {
            return Ok((None, None, None));
        }
        let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        let Some(sv) = saved.as_ref() else {
            candle_core::bail!("{name}: backward pass without the forward pass's activations");
        };
        let grad = grad.contiguous()?;
        let (dxw, dh, dc) = with_data(&grad, name, |gr| {
            with_data(w_hh, name, |w| {
                // The final states' gradients start the carried ones.
                let mut dh = vec![0f32; s * h];
                let mut dc = vec![0f32; s * h];
                for r in 0..s {
                    dh[r * h..][..h].copy_from_slice(&gr[(r * (l + 2) + l) * h..][..h]);
                    dc[r * h..][..h].copy_from_slice(&gr[(r * (l + 2) + l + 1) * h..][..h]);
                }
                let mut dxw = vec![0f32; s * l * 4 * h];
                let mut dg = vec![0f32; s * 4 * h];
                for k in (0..l).rev() {
                    let t = self.time(k, l);
                    let gates = &sv.gates[t * s * 4 * h..][..s * 4 * h];
                    let c_prev = &sv.c_prev[t * s * h..][..s * h];
                    let tanh_c = &sv.tanh_c[t * s * h..][..s * h];
                    dg.par_chunks_mut(4 * h)
                        .zip(dh.par_chunks_mut(h))
                        .zip(dc.par_chunks_mut(h))
                        .enumerate()
                        .with_min_len(ROWS_PER_TASK)
                        .for_each(|(r, ((dgr, dhr), dcr))| {
                            let m = self.mask_at(r, t, l);
                            let ga = &gates[r * 4 * h..][..4 * h];
                            let (cp, tc) = (&c_prev[r * h..][..h], &tanh_c[r * h..][..h]);
                            let dout = &gr[(r * (l + 2) + t) * h..][..h];
                            for j in 0..h {
                                let (i, f, c, o) = (ga[j], ga[h + j], ga[2 * h + j], ga[3 * h + j]);
                                let dh_new = m * (dhr[j] + dout[j]);
                                let dc_new = m * dcr[j] + dh_new * o * (1.0 - tc[j] * tc[j]);
                                dgr[j] = dc_new * c * i * (1.0 - i);
                                dgr[h + j] = dc_new * cp[j] * f * (1.0 - f);
                                dgr[2 * h + j] = dc_new * i * (1.0 - c * c);
                                dgr[3 * h + j] = dh_new * tc[j] * o * (1.0 - o);
                                dcr[j] = dc_new * f + (1.0 - m) * dcr[j];
                                dhr[j] *= 1.0 - m;
                            }
                        });
                    if s > 0 {
                        let wt = MatRef::row_major(w, h, 4 * h).t();
                        gemm(MatRef::row_major(&dg, s, 4 * h), wt, &mut dh, true, true).map_err(gemm_err)?;
                    }
                    for (r, row) in dg.chunks_exact(4 * h).enumerate() {
                        dxw[(r * l + t) * 4 * h..][..4 * h].copy_from_slice(row);
                    }
                }
                Ok((dxw, dh, dc))
            })
        })?;
        let dw = if want_w && s * l > 0 {
            let mut dw = vec![0f32; h * 4 * h];
            let hp = MatRef::row_major(&sv.h_prev, s * l, h).t();
            gemm(hp, MatRef::row_major(&dxw, s * l, 4 * h), &mut dw, false, true).map_err(gemm_err)?;
            Some(Tensor::from_vec(dw, (h, 4 * h), w_hh.device())?)
        } else if want_w {
            Some(w_hh.zeros_like()?)
        } else {
            None
        };
        let dhc = if want_hc {
            let v: Vec<f32> =
                dh.chunks_exact(h).zip(dc.chunks_exact(h)).flat_map(|(a, b)| a.iter().chain(b)).copied().collect();
            Some(Tensor::from_vec(v, (s, 2 * h), hc0.device())?)
        } else {
            None
        };
        let dxw = if want_xw { Some(Tensor::from_vec(dxw, (s, l, 4 * h), xw.device())?) } else { None };
        Ok((dxw, dw, dhc))
    }
}
