//! Building blocks with gradients: named parameters with seeded initialisation, linear layers, layer norm, a
//! masked bidirectional LSTM, multi-head attention and post-LN transformer layers.
//!
//! Only ops that have a backward pass are used: candle's `ops::sigmoid`, `tanh` and elementwise arithmetic, and
//! for the hot paths [`crate::ops`] (GEMM-backed linear and matmul, softmax, layer norm, GELU, each with a one-pass
//! backward; candle's fused `softmax_last_dim` / `layer_norm` have none). Shapes follow PyTorch's modules
//! (`nn.Linear`, `nn.LSTM` gate order i, f, g, o with two biases, `nn.TransformerEncoderLayer` with
//! `norm_first=False`), so parameter counts match the PyTorch reference of `scripts/bench`.

use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor, Var};
use rand::Rng;
use stepwise_core::rng::rng_for;

use crate::ops::attention;

pub type CResult<T> = candle_core::Result<T>;

/// Named trainable parameters. Each is initialised from its own stream `rng_for(seed, "<family>/init/<name>")`,
/// so a parameter's initial value depends only on the seed, the model family and its name.
pub struct Params {
    vars: BTreeMap<String, Var>,
    seed: u64,
    family: &'static str,
}

impl Params {
    /// Parameters of the GM3C models (family `m3c`).
    pub fn new(seed: u64) -> Self {
        Params::for_family(seed, "m3c")
    }

    /// Parameters of a model family (`m3c`, `seq`): the family names the initialisation streams.
    pub fn for_family(seed: u64, family: &'static str) -> Self {
        Params { vars: BTreeMap::new(), seed, family }
    }

    fn add(&mut self, name: &str, shape: &[usize], data: Vec<f32>) -> CResult<Tensor> {
        if self.vars.contains_key(name) {
            candle_core::bail!("parameter {name} defined twice");
        }
        let v = Var::from_vec(data, shape, &Device::Cpu)?;
        let t = v.as_tensor().clone();
        self.vars.insert(name.to_string(), v);
        Ok(t)
    }

    /// Uniform in ±`bound` (PyTorch's default for linear and LSTM weights).
    pub fn uniform(&mut self, name: &str, shape: &[usize], bound: f32) -> CResult<Tensor> {
        let n: usize = shape.iter().product();
        let mut rng = rng_for(self.seed, &format!("{}/init/{name}", self.family));
        let data = (0..n).map(|_| rng.random_range(-bound..=bound)).collect();
        self.add(name, shape, data)
    }

    /// Normal with mean 0 and deviation `std` (Box–Muller; BERT's embedding initialisation).
    pub fn normal(&mut self, name: &str, shape: &[usize], std: f32) -> CResult<Tensor> {
        let n: usize = shape.iter().product();
        let mut rng = rng_for(self.seed, &format!("{}/init/{name}", self.family));
        let data = (0..n)
            .map(|_| {
                let u1: f32 = rng.random_range(f32::EPSILON..1.0);
                let u2: f32 = rng.random();
                std * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            })
            .collect();
        self.add(name, shape, data)
    }

    pub fn constant(&mut self, name: &str, shape: &[usize], value: f32) -> CResult<Tensor> {
        let n: usize = shape.iter().product();
        self.add(name, shape, vec![value; n])
    }

    /// Every parameter, in name order.
    pub fn named(&self) -> &BTreeMap<String, Var> {
        &self.vars
    }

    pub fn vars(&self) -> Vec<Var> {
        self.vars.values().cloned().collect()
    }

    pub fn count(&self) -> usize {
        self.vars.values().map(|v| v.as_tensor().elem_count()).sum()
    }

    /// Parameter counts grouped by the first `depth` dot-separated parts of the names.
    pub fn counts_by_prefix(&self, depth: usize) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for (name, v) in &self.vars {
            let key: Vec<&str> = name.split('.').take(depth).collect();
            *m.entry(key.join(".")).or_insert(0) += v.as_tensor().elem_count();
        }
        m
    }

    /// Copies of the current values, by name.
    pub fn snapshot(&self) -> CResult<BTreeMap<String, Tensor>> {
        self.vars.iter().map(|(k, v)| Ok((k.clone(), v.as_tensor().copy()?))).collect()
    }

    /// Set the parameters whose names start with `prefix` from `values` (each must be present with the same
    /// shape); returns how many were set.
    pub fn restore_prefix(&self, values: &BTreeMap<String, Tensor>, prefix: &str) -> CResult<usize> {
        let mut set = 0;
        for (name, v) in self.vars.iter().filter(|(k, _)| k.starts_with(prefix)) {
            let t = values.get(name).ok_or_else(|| candle_core::Error::Msg(format!("missing parameter {name}")))?;
            if t.dims() != v.as_tensor().dims() {
                candle_core::bail!("parameter {name}: shape {:?}, expected {:?}", t.dims(), v.as_tensor().dims());
            }
            v.set(&t.to_dtype(DType::F32)?)?;
            set += 1;
        }
        Ok(set)
    }

    /// Set every parameter from `values` (all names must be present with the same shapes).
    pub fn restore(&self, values: &BTreeMap<String, Tensor>) -> CResult<()> {
        for (name, v) in &self.vars {
            let t = values.get(name).ok_or_else(|| candle_core::Error::Msg(format!("missing parameter {name}")))?;
            if t.dims() != v.as_tensor().dims() {
                candle_core::bail!("parameter {name}: shape {:?}, expected {:?}", t.dims(), v.as_tensor().dims());
            }
            v.set(&t.to_dtype(DType::F32)?)?;
        }
        if let Some(extra) = values.keys().find(|k| !self.vars.contains_key(*k)) {
            candle_core::bail!("unexpected parameter {extra}");
        }
        Ok(())
    }
}

/// `y = x W + b` over the last dimension (`W` stored `in × out`).
#[derive(Clone)]
pub struct Linear {
    pub w: Tensor,
    pub b: Option<Tensor>,
}

impl Linear {
    /// PyTorch's `nn.Linear` initialisation range ±1/√in for weight and bias.
    pub fn new(p: &mut Params, name: &str, input: usize, output: usize, bias: bool) -> CResult<Linear> {
        let bound = 1.0 / (input.max(1) as f32).sqrt();
        let w = p.uniform(&format!("{name}.weight"), &[input, output], bound)?;
        let b = if bias { Some(p.uniform(&format!("{name}.bias"), &[output], bound)?) } else { None };
        Ok(Linear { w, b })
    }

    pub fn forward(&self, x: &Tensor) -> CResult<Tensor> {
        crate::ops::linear(x, &self.w, self.b.as_ref())
    }
}

/// Layer normalisation over the last dimension ([`crate::ops::layer_norm`], one pass each way).
#[derive(Clone)]
pub struct LayerNorm {
    pub gamma: Tensor,
    pub beta: Tensor,
    pub eps: f32,
}

impl LayerNorm {
    pub fn new(p: &mut Params, name: &str, dim: usize, eps: f32) -> CResult<LayerNorm> {
        Ok(LayerNorm {
            gamma: p.constant(&format!("{name}.weight"), &[dim], 1.0)?,
            beta: p.constant(&format!("{name}.bias"), &[dim], 0.0)?,
            eps,
        })
    }

    pub fn forward(&self, x: &Tensor) -> CResult<Tensor> {
        crate::ops::layer_norm(x, &self.gamma, &self.beta, self.eps)
    }
}

/// One direction of an LSTM (PyTorch layout: gates i, f, g, o; biases `b_ih` and `b_hh`).
#[derive(Clone)]
struct LstmDirection {
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
    hidden: usize,
}

impl LstmDirection {
    fn new(p: &mut Params, name: &str, input: usize, hidden: usize) -> CResult<Self> {
        let bound = 1.0 / (hidden.max(1) as f32).sqrt();
        let w_ih = p.uniform(&format!("{name}.weight_ih"), &[input, 4 * hidden], bound)?;
        let w_hh = p.uniform(&format!("{name}.weight_hh"), &[hidden, 4 * hidden], bound)?;
        let b_ih = p.uniform(&format!("{name}.bias_ih"), &[4 * hidden], bound)?;
        let b_hh = p.uniform(&format!("{name}.bias_hh"), &[4 * hidden], bound)?;
        Ok(LstmDirection { w_ih, w_hh, b_ih, b_hh, hidden })
    }

    /// Run over `x` (`S × L × in`); `mask` (`S × L`, 1 = real step) keeps the state through padding, whose
    /// outputs are zero. Returns the outputs (`S × L × H`) and the final hidden state (`S × H`).
    fn run(&self, x: &Tensor, mask: Option<&Tensor>, reverse: bool) -> CResult<(Tensor, Tensor)> {
        let (outs, h, _) = self.run_from(x, mask, reverse, None)?;
        Ok((outs, h))
    }

    /// [`run`](Self::run) from an initial state `(h0, c0)` (`S × H` each; zeros when `None`); also returns the
    /// final cell state. The recurrence is one op ([`crate::ops::lstm_recurrence`]); the outputs are contiguous,
    /// the final states are views into the op's result (row stride `(L + 2)·H`).
    fn run_from(
        &self,
        x: &Tensor,
        mask: Option<&Tensor>,
        reverse: bool,
        init: Option<(&Tensor, &Tensor)>,
    ) -> CResult<(Tensor, Tensor, Tensor)> {
        let (s, l, input) = x.dims3()?;
        let h_dim = self.hidden;
        // Both biases are parameters (PyTorch's layout); their sum is taken here so each gets its gradient.
        let b = (&self.b_ih + &self.b_hh)?;
        let xw = crate::ops::linear(&x.reshape((s * l, input))?, &self.w_ih, Some(&b))?.reshape((s, l, 4 * h_dim))?;
        let hc0 = match init {
            Some((h0, c0)) => Tensor::cat(&[h0, c0], 1)?,
            None => Tensor::zeros((s, 2 * h_dim), DType::F32, &Device::Cpu)?,
        };
        let y = crate::ops::lstm_recurrence(&xw, &self.w_hh, &hc0, mask, reverse)?;
        Ok((y.narrow(1, 0, l)?.contiguous()?, y.narrow(1, l, 1)?.squeeze(1)?, y.narrow(1, l + 1, 1)?.squeeze(1)?))
    }

    /// One step on the raw input `x_t` (`S × in`).
    fn cell(&self, x_t: &Tensor, h: &Tensor, c: &Tensor) -> CResult<(Tensor, Tensor)> {
        let (_, h, c) = self.run_from(&x_t.unsqueeze(1)?, None, false, Some((h, c)))?;
        Ok((h, c))
    }
}

/// A one-layer, one-direction LSTM with an initial state (the pointer network's decoder).
#[derive(Clone)]
pub struct Lstm {
    dir: LstmDirection,
}

impl Lstm {
    pub fn new(p: &mut Params, name: &str, input: usize, hidden: usize) -> CResult<Lstm> {
        Ok(Lstm { dir: LstmDirection::new(p, name, input, hidden)? })
    }

    /// Outputs (`S × L × H`) of the whole input `x` (`S × L × in`) from the state `(h0, c0)`.
    pub fn forward(&self, x: &Tensor, h0: &Tensor, c0: &Tensor) -> CResult<Tensor> {
        Ok(self.dir.run_from(x, None, false, Some((h0, c0)))?.0)
    }

    /// One step: the new `(h, c)` after input `x_t` (`S × in`).
    pub fn step(&self, x_t: &Tensor, h: &Tensor, c: &Tensor) -> CResult<(Tensor, Tensor)> {
        self.dir.cell(x_t, h, c)
    }
}

/// A one-layer bidirectional LSTM.
#[derive(Clone)]
pub struct BiLstm {
    fwd: LstmDirection,
    bwd: LstmDirection,
}

impl BiLstm {
    pub fn new(p: &mut Params, name: &str, input: usize, hidden: usize) -> CResult<BiLstm> {
        Ok(BiLstm {
            fwd: LstmDirection::new(p, &format!("{name}.forward"), input, hidden)?,
            bwd: LstmDirection::new(p, &format!("{name}.backward"), input, hidden)?,
        })
    }

    /// Outputs (`S × L × 2H`, forward then backward; zero at padding) and the summary `[h_fwd(last), h_bwd(first)]`
    /// (`S × 2H`).
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> CResult<(Tensor, Tensor)> {
        let (of, hf) = self.fwd.run(x, mask, false)?;
        let (ob, hb) = self.bwd.run(x, mask, true)?;
        Ok((Tensor::cat(&[&of, &ob], 2)?, Tensor::cat(&[&hf, &hb], 1)?))
    }
}

/// Multi-head self-attention (PyTorch `nn.MultiheadAttention` parameter count: q, k, v and output projections).
#[derive(Clone)]
pub struct SelfAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    heads: usize,
}

impl SelfAttention {
    pub fn new(p: &mut Params, name: &str, dim: usize, heads: usize) -> CResult<Self> {
        if heads == 0 || !dim.is_multiple_of(heads) {
            candle_core::bail!("attention: width {dim} is not a multiple of {heads} heads");
        }
        Ok(SelfAttention {
            q: Linear::new(p, &format!("{name}.q"), dim, dim, true)?,
            k: Linear::new(p, &format!("{name}.k"), dim, dim, true)?,
            v: Linear::new(p, &format!("{name}.v"), dim, dim, true)?,
            o: Linear::new(p, &format!("{name}.out"), dim, dim, true)?,
            heads,
        })
    }

    /// `x`: `S × L × D`; `key_bias`: `S × 1 × 1 × L` (0 for real keys, a large negative number for padding). The
    /// heads run in [`crate::ops::attention`].
    pub fn forward(&self, x: &Tensor, key_bias: Option<&Tensor>) -> CResult<Tensor> {
        let (s, l, _) = x.dims3()?;
        // One product for q, k and v (the parameters stay separate, as PyTorch names them).
        let bias = |lin: &Linear| {
            lin.b.clone().ok_or_else(|| candle_core::Error::Msg("attention: a projection without bias".into()))
        };
        let w = Tensor::cat(&[&self.q.w, &self.k.w, &self.v.w], 1)?;
        let b = Tensor::cat(&[bias(&self.q)?, bias(&self.k)?, bias(&self.v)?], 0)?;
        let qkv = crate::ops::linear(x, &w, Some(&b))?;
        let key_bias = match key_bias {
            Some(kb) => kb.reshape((s, l))?,
            None => Tensor::zeros((s, l), DType::F32, &Device::Cpu)?,
        };
        self.o.forward(&attention(&qkv, &key_bias, self.heads)?)
    }
}

/// A post-LN transformer encoder layer (BERT; PyTorch `nn.TransformerEncoderLayer(norm_first=False,
/// activation="gelu", dropout=0)`): `x = LN(x + SA(x)); x = LN(x + FFN(x))`.
#[derive(Clone)]
pub struct TransformerLayer {
    attn: SelfAttention,
    ln1: LayerNorm,
    ff1: Linear,
    ff2: Linear,
    ln2: LayerNorm,
}

impl TransformerLayer {
    pub fn new(p: &mut Params, name: &str, dim: usize, heads: usize, ff: usize) -> CResult<Self> {
        Ok(TransformerLayer {
            attn: SelfAttention::new(p, &format!("{name}.attn"), dim, heads)?,
            ln1: LayerNorm::new(p, &format!("{name}.norm1"), dim, 1e-12)?,
            ff1: Linear::new(p, &format!("{name}.ff1"), dim, ff, true)?,
            ff2: Linear::new(p, &format!("{name}.ff2"), ff, dim, true)?,
            ln2: LayerNorm::new(p, &format!("{name}.norm2"), dim, 1e-12)?,
        })
    }

    /// `x`: `S × L × D`; `key_bias`: `S × 1 × 1 × L` as [`key_bias`] makes it. One fused op (a stack of one,
    /// [`transformer_stack`]) over the parameters packed into one vector.
    pub fn forward(&self, x: &Tensor, key_bias: Option<&Tensor>) -> CResult<Tensor> {
        transformer_stack(std::slice::from_ref(self), x, key_bias)
    }

    /// The parameters flattened, in the fused op's packing order ([`crate::ops::LayerShape::lengths`]).
    fn packed_parts(&self) -> CResult<Vec<Tensor>> {
        let a = &self.attn;
        let bias = |lin: &Linear| {
            lin.b.clone().ok_or_else(|| candle_core::Error::Msg("transformer layer: a linear without bias".into()))
        };
        let parts = [
            a.q.w.clone(),
            a.k.w.clone(),
            a.v.w.clone(),
            bias(&a.q)?,
            bias(&a.k)?,
            bias(&a.v)?,
            a.o.w.clone(),
            bias(&a.o)?,
            self.ln1.gamma.clone(),
            self.ln1.beta.clone(),
            self.ff1.w.clone(),
            bias(&self.ff1)?,
            self.ff2.w.clone(),
            bias(&self.ff2)?,
            self.ln2.gamma.clone(),
            self.ln2.beta.clone(),
        ];
        parts.iter().map(|t| t.flatten_all()).collect()
    }

    fn shape(&self) -> CResult<crate::ops::LayerShape> {
        Ok(crate::ops::LayerShape {
            dim: self.ff1.w.dim(0)?,
            ff: self.ff1.w.dim(1)?,
            heads: self.attn.heads,
            eps1: self.ln1.eps,
            eps2: self.ln2.eps,
        })
    }

    /// The same layer as a chain of the separate ops (the reference the fused op is tested against).
    #[cfg(test)]
    pub(crate) fn forward_unfused(&self, x: &Tensor, key_bias: Option<&Tensor>) -> CResult<Tensor> {
        let x = self.ln1.forward(&(x + self.attn.forward(x, key_bias)?)?)?;
        let h = self.ff2.forward(&crate::ops::gelu(&self.ff1.forward(&x)?)?)?;
        self.ln2.forward(&(x + h)?)
    }
}

/// `layers` applied in turn to `x` (`S × L × D`; `key_bias` as in [`TransformerLayer::forward`]) as one fused op
/// ([`crate::ops::transformer_stack`]); `x` itself when there are none. The layers must have one shape.
pub fn transformer_stack(layers: &[TransformerLayer], x: &Tensor, key_bias: Option<&Tensor>) -> CResult<Tensor> {
    let Some(first) = layers.first() else { return Ok(x.clone()) };
    let shape = first.shape()?;
    let mut parts = Vec::with_capacity(16 * layers.len());
    for layer in layers {
        if layer.shape()? != shape {
            candle_core::bail!("transformer stack: layers of different shapes");
        }
        parts.extend(layer.packed_parts()?);
    }
    let packed = Tensor::cat(&parts, 0)?;
    let (s, l, _) = x.dims3()?;
    let key_bias = match key_bias {
        Some(kb) => kb.reshape((s, l))?,
        None => Tensor::zeros((s, l), DType::F32, &Device::Cpu)?,
    };
    crate::ops::transformer_stack(x, &packed, &key_bias, shape, layers.len())
}

/// The additive key bias of attention for a 0/1 mask `S × L`: `S × 1 × 1 × L`, 0 where 1, −1e9 where 0.
pub fn key_bias(mask: &Tensor) -> CResult<Tensor> {
    let (s, l) = mask.dims2()?;
    (mask.affine(1.0, -1.0)? * 1e9)?.reshape((s, 1, 1, l))
}

/// Mean over dimension 1 of `x` (`S × L × H`) counting only positions where `mask` (`S × L`) is 1.
pub fn masked_mean(x: &Tensor, mask: &Tensor) -> CResult<Tensor> {
    let m = mask.unsqueeze(2)?;
    let sum = x.broadcast_mul(&m)?.sum(1)?;
    let count = mask.sum_keepdim(1)?.clamp(1.0, f64::MAX)?;
    sum.broadcast_div(&count)
}

/// Maximum over dimension 1 of `x` (`S × L × H`) over positions where `mask` is 1 (padding pushed to −1e9).
pub fn masked_max(x: &Tensor, mask: &Tensor) -> CResult<Tensor> {
    let bias = (mask.affine(1.0, -1.0)? * 1e9)?.unsqueeze(2)?;
    x.broadcast_add(&bias)?.max(1)
}

/// Cosine similarity of rows (`S × H` each) → `S`.
pub fn row_cosine(a: &Tensor, b: &Tensor) -> CResult<Tensor> {
    let dot = (a * b)?.sum(1)?;
    let na = a.sqr()?.sum(1)?.affine(1.0, 1e-12)?.sqrt()?;
    let nb = b.sqr()?.sum(1)?.affine(1.0, 1e-12)?.sqrt()?;
    dot.div(&(na * nb)?)
}

/// Inverted dropout: each element kept with probability 1 − `rate` and scaled by 1 / (1 − `rate`); `x` itself
/// without `rng` or at rate 0. The mask is drawn in element order from `rng`, so it does not depend on threads.
pub fn dropout(x: &Tensor, rate: f64, rng: Option<&mut rand_chacha::ChaCha8Rng>) -> CResult<Tensor> {
    use rand::Rng;
    let Some(rng) = rng.filter(|_| rate > 0.0) else {
        return Ok(x.clone());
    };
    let keep = 1.0 - rate;
    let scale = (1.0 / keep) as f32;
    let mask: Vec<f32> = (0..x.elem_count()).map(|_| if rng.random::<f64>() < keep { scale } else { 0.0 }).collect();
    x * Tensor::from_vec(mask, x.shape(), x.device())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(data: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_slice(data, shape, &Device::Cpu).unwrap()
    }

    /// The fused layer against the same layer as separate ops: forward values and the gradient of the input and
    /// of every parameter, with padded keys, for head sizes on both attention paths (16: AVX-512 kernel, 6: GEMM),
    /// and the same bits for any thread count.
    #[test]
    fn fused_transformer_layer_matches_the_separate_ops_forward_and_backward() {
        use rand::Rng;
        for (case, (s, l, d, heads, ff)) in
            [(3, 7, 32, 2, 48), (2, 5, 12, 2, 20), (1, 1, 16, 1, 8)].into_iter().enumerate()
        {
            let mut p = Params::new(11 + case as u64);
            let layer = TransformerLayer::new(&mut p, "t", d, heads, ff).unwrap();
            // Non-trivial layer-norm parameters (they start at 1 and 0).
            let mut rng = stepwise_core::rng::rng_for(3, "fused-layer");
            for (name, var) in p.named() {
                if name.contains("norm") {
                    let n = var.as_tensor().elem_count();
                    let v: Vec<f32> = (0..n).map(|_| rng.random_range(0.5..1.5)).collect();
                    var.set(&Tensor::from_vec(v, n, &Device::Cpu).unwrap()).unwrap();
                }
            }
            let xs: Vec<f32> = (0..s * l * d).map(|_| rng.random_range(-2.0..2.0)).collect();
            let x = candle_core::Var::from_tensor(&t(&xs, &[s, l, d])).unwrap();
            let mut mask = vec![1f32; s * l];
            if l > 2 {
                mask[l - 1] = 0.0; // the first sequence's last key is padding
                mask[2 * l - 2] = 0.0;
            }
            let bias = key_bias(&t(&mask, &[s, l])).unwrap();
            let w: Vec<f32> = (0..s * l * d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let w = t(&w, &[s, l, d]);
            let run = |fused: bool| {
                let y = if fused {
                    layer.forward(x.as_tensor(), Some(&bias)).unwrap()
                } else {
                    layer.forward_unfused(x.as_tensor(), Some(&bias)).unwrap()
                };
                let grads = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let mut out = vec![("forward".to_string(), y.flatten_all().unwrap().to_vec1::<f32>().unwrap())];
                let gx = grads.get(x.as_tensor()).expect("the input gets a gradient");
                out.push(("input".into(), gx.flatten_all().unwrap().to_vec1::<f32>().unwrap()));
                for (name, var) in p.named() {
                    let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("{name} gets no gradient"));
                    out.push((name.clone(), g.flatten_all().unwrap().to_vec1::<f32>().unwrap()));
                }
                out
            };
            let (fused, reference) = (run(true), run(false));
            assert_eq!(fused.len(), 2 + 16);
            for ((name, a), (_, b)) in fused.iter().zip(&reference) {
                let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
                // The key bias shifts every score of a query's row alike: its gradient is zero in exact arithmetic;
                // with one token the softmax is constant and queries and keys get none either.
                let zero =
                    name.ends_with("attn.k.bias") || (l == 1 && (name.contains("attn.q") || name.contains("attn.k")));
                if !zero {
                    assert!(scale > 1e-4, "case {case}: {name}: the reference is all zeros");
                }
                let scale = scale.max(1e-3);
                for (i, (u, v)) in a.iter().zip(b).enumerate() {
                    assert!((u - v).abs() <= 2e-4 * scale, "case {case}: {name}[{i}]: fused {u} vs separate {v}");
                }
            }
            let bits = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| run(true))
            };
            let one = bits(1);
            for (name, a) in &bits(3)
                .iter()
                .zip(&one)
                .map(|((n, a), (_, b))| (n.clone(), (a.clone(), b.clone())))
                .collect::<Vec<_>>()
            {
                assert!(
                    a.0.iter().zip(&a.1).all(|(u, v)| u.to_bits() == v.to_bits()),
                    "case {case}: {name} depends on threads"
                );
            }
        }
    }

    /// Three layers as one stacked op against the same layers one op each: the same values forward and the same
    /// gradients of the input and of every layer's parameters (the stack only skips candle's tensors in between);
    /// no layers is the input itself.
    #[test]
    fn stacked_layers_are_the_layers_one_after_another() {
        use rand::Rng;
        let (s, l, d, heads, ff) = (2, 6, 16, 2, 24);
        let mut p = Params::new(5);
        let layers: Vec<TransformerLayer> =
            (0..3).map(|i| TransformerLayer::new(&mut p, &format!("t{i}"), d, heads, ff).unwrap()).collect();
        let mut rng = stepwise_core::rng::rng_for(9, "stack");
        for (name, var) in p.named() {
            // Non-trivial layer norms and biases (they start at 1 and 0).
            let n = var.as_tensor().elem_count();
            let range = if name.contains("norm") { 0.5..1.5 } else { -0.2..0.2 };
            if name.contains("norm") || name.ends_with("bias") {
                let v: Vec<f32> = (0..n).map(|_| rng.random_range(range.clone())).collect();
                var.set(&Tensor::from_vec(v, n, &Device::Cpu).unwrap()).unwrap();
            }
        }
        let xs: Vec<f32> = (0..s * l * d).map(|_| rng.random_range(-2.0..2.0)).collect();
        let x = candle_core::Var::from_tensor(&t(&xs, &[s, l, d])).unwrap();
        let mut mask = vec![1f32; s * l];
        mask[l - 1] = 0.0;
        let bias = key_bias(&t(&mask, &[s, l])).unwrap();
        let w: Vec<f32> = (0..s * l * d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let w = t(&w, &[s, l, d]);
        let run = |stacked: bool| {
            let y = if stacked {
                transformer_stack(&layers, x.as_tensor(), Some(&bias)).unwrap()
            } else {
                layers.iter().fold(x.as_tensor().clone(), |h, layer| layer.forward(&h, Some(&bias)).unwrap())
            };
            let grads = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let mut out = vec![("forward".to_string(), flat(&y))];
            out.push(("input".into(), flat(grads.get(x.as_tensor()).expect("the input gets a gradient"))));
            for (name, var) in p.named() {
                let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("{name} gets no gradient"));
                out.push((name.clone(), flat(g)));
            }
            out
        };
        let (stacked, one_by_one) = (run(true), run(false));
        assert_eq!(stacked.len(), 2 + 3 * 16);
        for ((name, a), (_, b)) in stacked.iter().zip(&one_by_one) {
            assert!(name.ends_with("k.bias") || b.iter().any(|v| v.abs() > 1e-4), "{name}: all zeros");
            assert_eq!(a, b, "{name}");
        }
        let none = transformer_stack(&[], x.as_tensor(), Some(&bias)).unwrap();
        assert_eq!(none.flatten_all().unwrap().to_vec1::<f32>().unwrap(), xs);
    }

    #[test]
    fn masked_lstm_ignores_padding() {
        let mut p = Params::new(3);
        let lstm = BiLstm::new(&mut p, "l", 2, 4).unwrap();
        // The same sequence, once alone (length 2) and once padded to length 4 with garbage.
        let alone = t(&[0.1, 0.2, 0.3, -0.4], &[1, 2, 2]);
        let padded = t(&[0.1, 0.2, 0.3, -0.4, 9.0, 9.0, -7.0, 5.0], &[1, 4, 2]);
        let mask = t(&[1.0, 1.0, 0.0, 0.0], &[1, 4]);
        let (oa, sa) = lstm.forward(&alone, None).unwrap();
        let (op, sp) = lstm.forward(&padded, Some(&mask)).unwrap();
        let sa = sa.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let sp = sp.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (a, b) in sa.iter().zip(&sp) {
            assert!((a - b).abs() < 1e-6, "{sa:?} vs {sp:?}");
        }
        let oa = oa.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let op = op.narrow(1, 0, 2).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (a, b) in oa.iter().zip(&op) {
            assert!((a - b).abs() < 1e-6);
        }
        assert_eq!(p.count(), 2 * (2 * 16 + 4 * 16 + 2 * 16));
    }

    #[test]
    fn lstm_steps_one_at_a_time_give_the_whole_sequences_outputs() {
        let mut p = Params::new(5);
        let lstm = Lstm::new(&mut p, "l", 3, 4).unwrap();
        let x = t(
            &[0.1, -0.2, 0.3, 0.5, 0.4, -0.6, -0.3, 0.2, 0.9, 0.7, 0.0, -0.1, 0.2, 0.2, -0.8, 0.6, 0.1, 0.3],
            &[2, 3, 3],
        );
        let h0 = t(&[0.1, 0.2, -0.3, 0.4, 0.0, -0.5, 0.6, 0.1], &[2, 4]);
        let c0 = t(&[-0.2, 0.3, 0.1, 0.0, 0.4, 0.2, -0.1, 0.5], &[2, 4]);
        let whole = lstm.forward(&x, &h0, &c0).unwrap();
        let (mut h, mut c) = (h0, c0);
        for step in 0..3 {
            (h, c) = lstm.step(&x.narrow(1, step, 1).unwrap().squeeze(1).unwrap(), &h, &c).unwrap();
            let want = whole.narrow(1, step, 1).unwrap().squeeze(1).unwrap().flatten_all().unwrap();
            let (got, want) = (h.flatten_all().unwrap().to_vec1::<f32>().unwrap(), want.to_vec1::<f32>().unwrap());
            // The input projection of one step and of the whole sequence are products of different heights,
            // which may round differently in the last bit.
            assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6), "step {step}: {got:?} vs {want:?}");
        }
    }

    #[test]
    fn attention_ignores_masked_keys() {
        let mut p = Params::new(4);
        let layer = TransformerLayer::new(&mut p, "t", 4, 2, 8).unwrap();
        let x = t(&[0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, 5.0, -5.0, 5.0, -5.0], &[1, 3, 4]);
        let y = t(&[0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -3.0, 3.0, 1.0, 0.0], &[1, 3, 4]);
        let bias = key_bias(&t(&[1.0, 1.0, 0.0], &[1, 3])).unwrap();
        let a = layer.forward(&x, Some(&bias)).unwrap().narrow(1, 0, 2).unwrap().flatten_all().unwrap();
        let b = layer.forward(&y, Some(&bias)).unwrap().narrow(1, 0, 2).unwrap().flatten_all().unwrap();
        let (a, b) = (a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        for (u, v) in a.iter().zip(&b) {
            assert!((u - v).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }
}
