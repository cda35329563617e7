//! The pair classifier: logistic regression or a one-hidden-layer MLP (ReLU) over pair features, as candle
//! `Var`s initialised from a seeded generator (candle's own random init is not seeded).

use candle_core::{DType, Device, Tensor, Var};
use rand::Rng;
use stepwise_core::rng::rng_for;

/// The classifier family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Classifier {
    /// Logistic regression: one linear layer.
    LogReg,
    /// Linear → ReLU → linear.
    Mlp { hidden: usize },
}

/// Weights `w` (`in × out`) and bias `b` (`out`) of one linear layer.
pub struct Linear {
    pub w: Var,
    pub b: Var,
}

pub struct Net {
    pub layers: Vec<Linear>,
}

fn cerr(e: candle_core::Error) -> stepwise_core::Error {
    stepwise_core::Error::runtime(format!("candle: {e}"))
}

impl Net {
    /// A network for `input` features, weights uniform in ±1/√fan_in (PyTorch's `nn.Linear` default range),
    /// drawn from `rng_for(seed, "pairwise/init/<layer>")`.
    pub fn new(input: usize, classifier: Classifier, seed: u64) -> stepwise_core::Result<Net> {
        let sizes = match classifier {
            Classifier::LogReg => vec![input, 1],
            Classifier::Mlp { hidden } => vec![input, hidden, 1],
        };
        let mut layers = Vec::new();
        for (l, pair) in sizes.windows(2).enumerate() {
            let (fan_in, fan_out) = (pair[0], pair[1]);
            let bound = 1.0 / (fan_in.max(1) as f32).sqrt();
            let mut rng = rng_for(seed, &format!("pairwise/init/{l}"));
            let mut draw = |k: usize| -> Vec<f32> { (0..k).map(|_| rng.random_range(-bound..bound)).collect() };
            let w = Var::from_vec(draw(fan_in * fan_out), (fan_in, fan_out), &Device::Cpu).map_err(cerr)?;
            let b = Var::from_vec(draw(fan_out), fan_out, &Device::Cpu).map_err(cerr)?;
            layers.push(Linear { w, b });
        }
        Ok(Net { layers })
    }

    /// Every trainable variable.
    pub fn vars(&self) -> Vec<Var> {
        self.layers.iter().flat_map(|l| [l.w.clone(), l.b.clone()]).collect()
    }

    /// Logits (`batch`) for pair features `x` (`batch × input`).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        for (k, l) in self.layers.iter().enumerate() {
            h = h.matmul(l.w.as_tensor())?.broadcast_add(l.b.as_tensor())?;
            if k + 1 < self.layers.len() {
                h = h.relu()?;
            }
        }
        h.squeeze(1)
    }

    /// A copy of the current weights (for keeping the best epoch).
    pub fn snapshot(&self) -> candle_core::Result<Vec<Tensor>> {
        self.vars().iter().map(|v| v.as_tensor().copy()).collect()
    }

    pub fn restore(&self, weights: &[Tensor]) -> candle_core::Result<()> {
        for (v, t) in self.vars().iter().zip(weights) {
            v.set(t)?;
        }
        Ok(())
    }

    pub fn parameter_count(&self) -> usize {
        self.vars().iter().map(|v| v.as_tensor().elem_count()).sum()
    }
}

/// Binary cross-entropy with logits and soft targets, averaged: `softplus(z) − y·z` with
/// `softplus(z) = max(z, 0) + ln(1 + e^{−|z|})` (stable for large |z|). Uses only ops with gradients.
pub fn bce_with_logits(z: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
    let softplus = (z.relu()? + z.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?)?;
    (softplus - (y * z)?)?.mean_all()
}

/// The logistic function, elementwise (for predictions, not training).
pub fn sigmoid(z: &Tensor) -> candle_core::Result<Tensor> {
    z.neg()?.exp()?.affine(1.0, 1.0)?.recip()
}

/// Pair features `[a, b, a − b, a ⊙ b]` for rows `ia`, `ib` of `items`.
pub fn pair_features(items: &Tensor, ia: &Tensor, ib: &Tensor) -> candle_core::Result<Tensor> {
    let a = items.index_select(ia, 0)?;
    let b = items.index_select(ib, 0)?;
    let diff = (&a - &b)?;
    let prod = (&a * &b)?;
    Tensor::cat(&[&a, &b, &diff, &prod], 1)
}

pub fn u32_tensor(v: &[u32]) -> candle_core::Result<Tensor> {
    Tensor::from_slice(v, v.len(), &Device::Cpu)
}

pub fn f32_tensor(v: &[f32]) -> candle_core::Result<Tensor> {
    Tensor::from_slice(v, v.len(), &Device::Cpu)
}

pub fn matrix(data: &[f32], rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    Tensor::from_slice(data, (rows, cols), &Device::Cpu)?.to_dtype(DType::F32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_gets_a_gradient() {
        for classifier in [Classifier::LogReg, Classifier::Mlp { hidden: 8 }] {
            let net = Net::new(4 * 3, classifier, 1).unwrap();
            let items = matrix(&[0.1, -0.2, 0.3, 0.5, 0.4, -0.1, -0.3, 0.2, 0.9], 3, 3).unwrap();
            let ia = u32_tensor(&[0, 1, 2, 0]).unwrap();
            let ib = u32_tensor(&[1, 2, 0, 2]).unwrap();
            let x = pair_features(&items, &ia, &ib).unwrap();
            let y = f32_tensor(&[1.0, 0.0, 0.5, 1.0]).unwrap();
            let loss = bce_with_logits(&net.forward(&x).unwrap(), &y).unwrap();
            let grads = loss.backward().unwrap();
            for (k, v) in net.vars().iter().enumerate() {
                let g = grads.get(v.as_tensor()).unwrap_or_else(|| panic!("{classifier:?}: var {k} has no gradient"));
                let norm: f32 = g.sqr().unwrap().sum_all().unwrap().to_scalar().unwrap();
                assert!(norm > 0.0, "{classifier:?}: var {k} has a zero gradient");
            }
        }
    }

    #[test]
    fn bce_matches_the_formula() {
        let z = f32_tensor(&[-30.0, -1.0, 0.0, 2.0, 40.0]).unwrap();
        let y = f32_tensor(&[0.0, 1.0, 0.5, 0.0, 1.0]).unwrap();
        let got: f32 = bce_with_logits(&z, &y).unwrap().to_scalar().unwrap();
        let expect: f64 = [(-30.0f64, 0.0f64), (-1.0, 1.0), (0.0, 0.5), (2.0, 0.0), (40.0, 1.0)]
            .iter()
            .map(|&(z, y)| {
                let p = 1.0 / (1.0 + (-z).exp());
                -(y * p.max(1e-300).ln() + (1.0 - y) * (1.0 - p).max(1e-300).ln())
            })
            .sum::<f64>()
            / 5.0;
        assert!((got as f64 - expect).abs() < 1e-5, "{got} vs {expect}");
    }
}
