//! Adam and kill-safe checkpoints, shared by every trainer of the crate.
//!
//! A checkpoint is one safetensors file written atomically: the weights (`param.*`), Adam's moments (`adam_m.*`,
//! `adam_v.*`), optionally the best weights so far (`best.*`), and in the metadata the run's fingerprint and the
//! trainer's own state as JSON. A checkpoint with another fingerprint belongs to another run and is ignored.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Serialize;
use serde::de::DeserializeOwned;
use stepwise_core::output::write_file_atomic;
use stepwise_core::{Error, Result};

use crate::nn::{CResult, Params};

/// A candle error as a runtime error.
pub fn cerr(e: candle_core::Error) -> Error {
    Error::runtime(format!("candle: {e}"))
}

/// Adam (Kingma & Ba) with bias correction, no weight decay; its state is saved in checkpoints.
///
/// The update is one fused in-place pass per parameter (`p`, `m`, `v` and the gradient read once, written once):
/// written as candle tensor ops it made fourteen full-size temporaries per parameter and took about a twentieth
/// of a training step of `stepwise bench seq-train`.
pub struct Adam {
    pub lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    /// Updates made so far.
    pub step: u64,
    /// First and second moments per parameter, in the parameter's row-major order.
    m: BTreeMap<String, Vec<f32>>,
    v: BTreeMap<String, Vec<f32>>,
    /// Parameters whose names start with a prefix here train at that rate instead of `lr`.
    lr_by_prefix: Vec<(String, f64)>,
}

impl Adam {
    pub fn new(params: &Params, lr: f64) -> CResult<Adam> {
        let mut m = BTreeMap::new();
        let mut v = BTreeMap::new();
        for (name, var) in params.named() {
            m.insert(name.clone(), vec![0.0; var.as_tensor().elem_count()]);
            v.insert(name.clone(), vec![0.0; var.as_tensor().elem_count()]);
        }
        Ok(Adam { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: 0, m, v, lr_by_prefix: Vec::new() })
    }

    /// Train the parameters named `prefix…` at `lr` (e.g. a pretrained encoder fine-tuned more gently than the
    /// layers trained from scratch).
    pub fn with_lr_for(mut self, prefix: &str, lr: f64) -> Adam {
        self.lr_by_prefix.push((prefix.to_string(), lr));
        self
    }

    /// Backpropagate `loss` and update every parameter that received a gradient.
    pub fn step(&mut self, params: &Params, loss: &Tensor) -> CResult<()> {
        let grads = loss.backward()?;
        self.step += 1;
        let t = self.step as i32;
        let rule = AdamRule {
            beta1: self.beta1 as f32,
            beta2: self.beta2 as f32,
            // Bias corrections folded into the two scales.
            m_scale: (1.0 / (1.0 - self.beta1.powi(t))) as f32,
            v_scale: (1.0 / (1.0 - self.beta2.powi(t))) as f32,
            lr: self.lr as f32,
            eps: self.eps as f32,
        };
        for (name, var) in params.named() {
            let Some(g) = grads.get(var.as_tensor()) else { continue };
            let (Some(m), Some(v)) = (self.m.get_mut(name), self.v.get_mut(name)) else {
                candle_core::bail!("Adam has no moments for parameter {name}");
            };
            let count = var.as_tensor().elem_count();
            if m.len() != count || v.len() != count {
                candle_core::bail!(
                    "Adam's moments of {name} hold {}/{} values, the parameter {count}",
                    m.len(),
                    v.len()
                );
            }
            let lr =
                self.lr_by_prefix.iter().find(|(p, _)| name.starts_with(p.as_str())).map_or(self.lr, |(_, lr)| *lr);
            let rule = AdamRule { lr: lr as f32, ..rule };
            let update = AdamUpdate { rule, moments: std::cell::RefCell::new((m, v)) };
            var.as_tensor().inplace_op2(&g.contiguous()?, &update)?;
        }
        Ok(())
    }

    /// The moments of `name` as tensors shaped like `like` (for checkpoints).
    fn moment_tensors(&self, name: &str, like: &Tensor) -> CResult<(Tensor, Tensor)> {
        let get = |map: &BTreeMap<String, Vec<f32>>| match map.get(name) {
            Some(x) => Tensor::from_slice(x, like.shape(), like.device()),
            None => like.zeros_like(),
        };
        Ok((get(&self.m)?, get(&self.v)?))
    }
}

/// One Adam update of a parameter in place, reading its gradient and updating the parameter's moments (borrowed
/// from [`Adam`]; candle's in-place op hands `cpu_fwd` only `&self`).
struct AdamUpdate<'a> {
    rule: AdamRule,
    moments: std::cell::RefCell<(&'a mut Vec<f32>, &'a mut Vec<f32>)>,
}

/// One step's coefficients.
#[derive(Clone, Copy)]
struct AdamRule {
    beta1: f32,
    beta2: f32,
    m_scale: f32,
    v_scale: f32,
    lr: f32,
    eps: f32,
}

impl AdamRule {
    fn apply(&self, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
        for (((p, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
            *m = self.beta1 * *m + (1.0 - self.beta1) * g;
            *v = self.beta2 * *v + (1.0 - self.beta2) * (g * g);
            *p -= self.lr * (*m * self.m_scale) / ((*v * self.v_scale).sqrt() + self.eps);
        }
    }
}

impl candle_core::InplaceOp2 for AdamUpdate<'_> {
    fn name(&self) -> &'static str {
        "adam-update"
    }

    fn cpu_fwd(
        &self,
        dst: &mut candle_core::CpuStorage,
        dst_l: &candle_core::Layout,
        src: &candle_core::CpuStorage,
        src_l: &candle_core::Layout,
    ) -> CResult<()> {
        use rayon::prelude::*;
        let (candle_core::CpuStorage::F32(p), candle_core::CpuStorage::F32(g)) = (dst, src) else {
            candle_core::bail!("adam-update: parameters and gradients must be f32");
        };
        let (Some((p0, p1)), Some((g0, g1))) = (dst_l.contiguous_offsets(), src_l.contiguous_offsets()) else {
            candle_core::bail!("adam-update: parameter or gradient not contiguous");
        };
        let mut moments = self.moments.borrow_mut();
        let (m, v) = &mut *moments;
        let (p, g) = (&mut p[p0..p1], &g[g0..g1]);
        if g.len() != p.len() || m.len() != p.len() {
            candle_core::bail!("adam-update: {} parameters, {} gradients, {} moments", p.len(), g.len(), m.len());
        }
        // Element-wise, so chunking (and the thread count) cannot change a bit.
        const CHUNK: usize = 1 << 14;
        let rule = self.rule;
        p.par_chunks_mut(CHUNK)
            .zip(m.par_chunks_mut(CHUNK))
            .zip(v.par_chunks_mut(CHUNK))
            .zip(g.par_chunks(CHUNK))
            .for_each(|(((p, m), v), g)| rule.apply(p, m, v, g));
        Ok(())
    }
}

/// Tensors as safetensors bytes (name order; deterministic).
pub fn safetensors_bytes(tensors: &BTreeMap<String, Tensor>, meta: Option<HashMap<String, String>>) -> Result<Vec<u8>> {
    safetensors::serialize(tensors.iter().map(|(k, v)| (k.as_str(), v)), meta)
        .map_err(|e| Error::runtime(format!("safetensors: {e}")))
}

/// The current weights as safetensors bytes.
pub fn weights_bytes(params: &Params) -> Result<Vec<u8>> {
    safetensors_bytes(&params.snapshot().map_err(cerr)?, None)
}

/// Load weights written by [`weights_bytes`] into `params`; the error names the file.
pub fn load_weights(params: &Params, path: &Path) -> Result<()> {
    let bytes = stepwise_core::paths::read_regular_file(path)?;
    let map = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .map_err(|e| Error::bad_input(format!("{}: not a safetensors file: {e}", path.display())))?;
    let map: BTreeMap<String, Tensor> = map.into_iter().collect();
    params.restore(&map).map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))
}

/// Write a checkpoint of `params`, `adam`, the best weights and the trainer's `state`, atomically.
pub fn save_checkpoint<S: Serialize>(
    path: &Path,
    params: &Params,
    adam: &Adam,
    best: Option<&BTreeMap<String, Tensor>>,
    fingerprint: &str,
    state: &S,
) -> Result<()> {
    let mut all = BTreeMap::new();
    for (k, v) in params.named() {
        all.insert(format!("param.{k}"), v.as_tensor().copy().map_err(cerr)?);
    }
    for (k, v) in params.named() {
        let (m, s) = adam.moment_tensors(k, v.as_tensor()).map_err(cerr)?;
        all.insert(format!("adam_m.{k}"), m);
        all.insert(format!("adam_v.{k}"), s);
    }
    if let Some(b) = best {
        for (k, v) in b {
            all.insert(format!("best.{k}"), v.clone());
        }
    }
    let meta = HashMap::from([
        ("fingerprint".to_string(), fingerprint.to_string()),
        ("state".to_string(), serde_json::to_string(state).map_err(|e| Error::runtime(e.to_string()))?),
        ("adam_step".to_string(), adam.step.to_string()),
    ]);
    let bytes = safetensors_bytes(&all, Some(meta))?;
    write_file_atomic(path, |w| std::io::Write::write_all(w, &bytes))
}

/// A restored trainer state and the best weights it had kept.
pub type Restored<S> = (S, Option<BTreeMap<String, Tensor>>);

/// Restore `params` and `adam` from a checkpoint written by [`save_checkpoint`] with the same `fingerprint`;
/// `Ok(None)` when the checkpoint belongs to another run; an error naming the file when it is unreadable.
pub fn load_checkpoint<S: DeserializeOwned>(
    path: &Path,
    params: &Params,
    adam: &mut Adam,
    fingerprint: &str,
) -> Result<Option<Restored<S>>> {
    let bytes = stepwise_core::paths::read_regular_file(path)?;
    let bad = |e: String| {
        Error::bad_input(format!("{}: unreadable checkpoint ({e}); delete it to start over", path.display()))
    };
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| bad(e.to_string()))?;
    let meta = meta.metadata().clone().unwrap_or_default();
    let field = |k: &str| meta.get(k).cloned().ok_or_else(|| bad(format!("no `{k}` in its metadata")));
    if field("fingerprint")? != fingerprint {
        return Ok(None);
    }
    let state: S = serde_json::from_str(&field("state")?).map_err(|e| bad(e.to_string()))?;
    let adam_step: u64 = field("adam_step")?.parse().map_err(|_| bad("adam_step is not a number".into()))?;
    let map = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu).map_err(|e| bad(e.to_string()))?;
    let mut weights = BTreeMap::new();
    let mut best = BTreeMap::new();
    // Only the file's moments count: a checkpoint without them is refused below, not resumed from zeros.
    adam.m.clear();
    adam.v.clear();
    for (k, v) in map {
        let v = v.to_dtype(DType::F32).map_err(cerr)?;
        if let Some(n) = k.strip_prefix("param.") {
            weights.insert(n.to_string(), v);
        } else if let Some(n) = k.strip_prefix("adam_m.") {
            adam.m.insert(n.to_string(), v.flatten_all().and_then(|t| t.to_vec1()).map_err(|e| bad(e.to_string()))?);
        } else if let Some(n) = k.strip_prefix("adam_v.") {
            adam.v.insert(n.to_string(), v.flatten_all().and_then(|t| t.to_vec1()).map_err(|e| bad(e.to_string()))?);
        } else if let Some(n) = k.strip_prefix("best.") {
            best.insert(n.to_string(), v);
        }
    }
    params.restore(&weights).map_err(|e| bad(e.to_string()))?;
    for (name, var) in params.named() {
        let count = var.as_tensor().elem_count();
        for (kind, map) in [("adam_m", &adam.m), ("adam_v", &adam.v)] {
            match map.get(name) {
                Some(x) if x.len() == count => {}
                Some(x) => return Err(bad(format!("{kind}.{name} holds {} values, the parameter {count}", x.len()))),
                None => return Err(bad(format!("no {kind}.{name}"))),
            }
        }
    }
    adam.step = adam_step;
    Ok(Some((state, (!best.is_empty()).then_some(best))))
}

/// Where and how often checkpoints are written.
#[derive(Debug, Clone)]
pub struct Checkpointing {
    /// The checkpoint file (kept until training finishes).
    pub path: std::path::PathBuf,
    /// Stop (as if killed) after this many epochs of this run — for tests of resumption.
    pub stop_after_epochs: Option<usize>,
}

/// What an epoch measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochStats {
    pub train_loss: f64,
    /// A training metric to record (e.g. accuracy), if the trainer has one.
    pub train_metric: Option<f64>,
    /// The validation criterion (None without validation data).
    pub val: Option<f64>,
}

/// One epoch of a training curve.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CurvePoint {
    pub epoch: usize,
    pub train_loss: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_metric: Option<f64>,
    pub val: Option<f64>,
}

/// The epoch loop's options: at most `max_epochs`, early stopping after `patience` epochs without a better
/// validation criterion (lower is better when `minimize`).
#[derive(Debug, Clone, Copy)]
pub struct FitConfig {
    pub max_epochs: usize,
    pub patience: usize,
    pub minimize: bool,
}

/// What the epoch loop did.
#[derive(Debug, Clone, PartialEq)]
pub struct FitReport {
    pub epochs_run: usize,
    /// The epoch whose weights were kept (1-based).
    pub best_epoch: usize,
    pub best_val: Option<f64>,
    pub curve: Vec<CurvePoint>,
    pub resumed_from_epoch: usize,
    pub stopped_early: bool,
}

#[derive(Serialize, serde::Deserialize)]
struct FitState {
    epoch: usize,
    best_epoch: usize,
    /// Floats as bits: JSON text would not give back the same last digit.
    best_val: Option<u64>,
    since_best: usize,
    curve: Vec<(usize, u64, Option<u64>, Option<u64>)>,
}

/// Run epochs with early stopping and a checkpoint after each (a killed run resumes to the same weights):
/// `run_epoch(e, adam)` trains epoch `e` (0-based) and measures it. The best epoch's weights are restored at
/// the end (the last epoch's without validation). `Ok(None)` when stopped by `stop_after_epochs`.
pub fn fit(
    params: &Params,
    adam: &mut Adam,
    cfg: &FitConfig,
    fingerprint: &str,
    checkpoint: Option<&Checkpointing>,
    mut run_epoch: impl FnMut(usize, &mut Adam) -> Result<EpochStats>,
) -> Result<Option<FitReport>> {
    let mut state = FitState { epoch: 0, best_epoch: 0, best_val: None, since_best: 0, curve: Vec::new() };
    let mut best: Option<BTreeMap<String, Tensor>> = None;
    if let Some(c) = checkpoint
        && c.path.exists()
    {
        match load_checkpoint::<FitState>(&c.path, params, adam, fingerprint)? {
            Some((s, b)) => {
                tracing::info!(epoch = s.epoch, "resuming from {}", c.path.display());
                state = s;
                best = b;
            }
            None => tracing::warn!("ignoring {}: it belongs to another training run", c.path.display()),
        }
    }
    let resumed_from = state.epoch;
    let better = |v: f64, b: f64| if cfg.minimize { v < b } else { v > b };
    let mut stopped_early = state.best_val.is_some() && state.since_best >= cfg.patience;
    let mut run_here = 0usize;
    while state.epoch < cfg.max_epochs.max(1) && !stopped_early {
        let epoch = state.epoch;
        let stats = run_epoch(epoch, adam)?;
        if !stats.train_loss.is_finite() {
            return Err(Error::runtime(format!("training diverged: loss {} in epoch {}", stats.train_loss, epoch + 1)));
        }
        state.curve.push((
            epoch + 1,
            stats.train_loss.to_bits(),
            stats.train_metric.map(f64::to_bits),
            stats.val.map(f64::to_bits),
        ));
        state.epoch = epoch + 1;
        match stats.val {
            Some(v) if state.best_val.map(f64::from_bits).is_none_or(|b| better(v, b)) => {
                state.best_val = Some(v.to_bits());
                state.best_epoch = epoch + 1;
                state.since_best = 0;
                best = Some(params.snapshot().map_err(cerr)?);
            }
            Some(_) => {
                state.since_best += 1;
                stopped_early = state.since_best >= cfg.patience;
            }
            None => state.best_epoch = epoch + 1,
        }
        run_here += 1;
        if let Some(c) = checkpoint {
            save_checkpoint(&c.path, params, adam, best.as_ref(), fingerprint, &state)?;
            if c.stop_after_epochs.is_some_and(|k| run_here >= k) && state.epoch < cfg.max_epochs && !stopped_early {
                return Ok(None);
            }
        }
    }
    if let Some(b) = &best {
        params.restore(b).map_err(cerr)?;
    }
    let curve = state
        .curve
        .iter()
        .map(|&(epoch, l, m, v)| CurvePoint {
            epoch,
            train_loss: f64::from_bits(l),
            train_metric: m.map(f64::from_bits),
            val: v.map(f64::from_bits),
        })
        .collect();
    Ok(Some(FitReport {
        epochs_run: state.epoch,
        best_epoch: state.best_epoch,
        best_val: state.best_val.map(f64::from_bits),
        curve,
        resumed_from_epoch: resumed_from,
        stopped_early,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Textbook Adam in f64 on the loss Σ w·x (gradient x), for `steps` updates.
    fn reference(w0: &[f32], x: &[f32], steps: i32, lr: f64) -> Vec<f64> {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
        let mut w: Vec<f64> = w0.iter().map(|&v| v as f64).collect();
        let (mut m, mut v) = (vec![0f64; w.len()], vec![0f64; w.len()]);
        for t in 1..=steps {
            for i in 0..w.len() {
                let g = x[i] as f64;
                m[i] = b1 * m[i] + (1.0 - b1) * g;
                v[i] = b2 * v[i] + (1.0 - b2) * g * g;
                let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
                w[i] -= lr * mh / (vh.sqrt() + eps);
            }
        }
        w
    }

    #[test]
    fn fused_update_follows_the_textbook_rule_and_checkpoints_keep_the_moments() {
        // 70_000 values: more than one parallel chunk of the update.
        let n = 70_000;
        let mut params = Params::for_family(3, "test");
        let w = params.uniform("w", &[n], 1.0).unwrap();
        let x = Tensor::from_vec(
            (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect::<Vec<f32>>(),
            n,
            &Device::Cpu,
        )
        .unwrap();
        let w0: Vec<f32> = w.to_vec1().unwrap();
        let xs: Vec<f32> = x.to_vec1().unwrap();
        let mut adam = Adam::new(&params, 1e-2).unwrap();
        for _ in 0..3 {
            let loss = (params.named()["w"].as_tensor() * &x).unwrap().sum_all().unwrap();
            adam.step(&params, &loss).unwrap();
        }
        let got: Vec<f32> = params.named()["w"].as_tensor().to_vec1().unwrap();
        let want = reference(&w0, &xs, 3, 1e-2);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((*g as f64 - w).abs() < 1e-5, "w[{i}]: {g} vs {w}");
        }

        // A checkpoint restores weights, moments and step count: the next update is the same either way.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.safetensors");
        save_checkpoint(&path, &params, &adam, None, "fp", &0u32).unwrap();
        let mut resumed_params = Params::for_family(99, "test");
        resumed_params.uniform("w", &[n], 1.0).unwrap();
        let mut resumed = Adam::new(&resumed_params, 1e-2).unwrap();
        let (_state, best): Restored<u32> =
            load_checkpoint(&path, &resumed_params, &mut resumed, "fp").unwrap().expect("same fingerprint");
        assert!(best.is_none());
        assert_eq!(resumed.step, 3);
        for (p, a) in [(&params, &mut adam), (&resumed_params, &mut resumed)] {
            let loss = (p.named()["w"].as_tensor() * &x).unwrap().sum_all().unwrap();
            a.step(p, &loss).unwrap();
        }
        let a: Vec<f32> = params.named()["w"].as_tensor().to_vec1().unwrap();
        let b: Vec<f32> = resumed_params.named()["w"].as_tensor().to_vec1().unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "resumed update differs");
    }

    #[test]
    fn a_checkpoint_whose_moments_do_not_fit_the_parameters_is_refused_with_its_name() {
        let mut params = Params::for_family(1, "test");
        params.uniform("w", &[4], 1.0).unwrap();
        let adam = Adam::new(&params, 1e-2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.safetensors");
        save_checkpoint(&path, &params, &adam, None, "fp", &0u32).unwrap();
        // Overwrite the file with moments of another size.
        let mut all = BTreeMap::new();
        all.insert("param.w".to_string(), Tensor::zeros(4, DType::F32, &Device::Cpu).unwrap());
        all.insert("adam_m.w".to_string(), Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap());
        all.insert("adam_v.w".to_string(), Tensor::zeros(4, DType::F32, &Device::Cpu).unwrap());
        let meta = HashMap::from([
            ("fingerprint".to_string(), "fp".to_string()),
            ("state".to_string(), "0".to_string()),
            ("adam_step".to_string(), "1".to_string()),
        ]);
        std::fs::write(&path, safetensors_bytes(&all, Some(meta)).unwrap()).unwrap();
        let mut fresh = Adam::new(&params, 1e-2).unwrap();
        let err = load_checkpoint::<u32>(&path, &params, &mut fresh, "fp").unwrap_err().to_string();
        assert!(err.contains("ckpt.safetensors") && err.contains("adam_m.w holds 3 values"), "{err}");
        // Without moments at all: refused too (resuming from zero moments would skew the bias correction).
        all.remove("adam_m.w");
        all.remove("adam_v.w");
        let meta = HashMap::from([
            ("fingerprint".to_string(), "fp".to_string()),
            ("state".to_string(), "0".to_string()),
            ("adam_step".to_string(), "1".to_string()),
        ]);
        std::fs::write(&path, safetensors_bytes(&all, Some(meta)).unwrap()).unwrap();
        let err = load_checkpoint::<u32>(&path, &params, &mut fresh, "fp").unwrap_err().to_string();
        assert!(err.contains("no adam_m.w"), "{err}");
    }
}
