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
pub struct Adam {
    pub lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    /// Updates made so far.
    pub step: u64,
    m: BTreeMap<String, Tensor>,
    v: BTreeMap<String, Tensor>,
}

impl Adam {
    pub fn new(params: &Params, lr: f64) -> CResult<Adam> {
        let mut m = BTreeMap::new();
        let mut v = BTreeMap::new();
        for (name, var) in params.named() {
            m.insert(name.clone(), var.as_tensor().zeros_like()?);
            v.insert(name.clone(), var.as_tensor().zeros_like()?);
        }
        Ok(Adam { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: 0, m, v })
    }

    /// Backpropagate `loss` and update every parameter that received a gradient.
    pub fn step(&mut self, params: &Params, loss: &Tensor) -> CResult<()> {
        let grads = loss.backward()?;
        self.step += 1;
        let t = self.step as i32;
        let c1 = 1.0 - self.beta1.powi(t);
        let c2 = 1.0 - self.beta2.powi(t);
        for (name, var) in params.named() {
            let Some(g) = grads.get(var.as_tensor()) else { continue };
            // Detached: the moments must not hold this step's graph (it would chain every step's graph).
            let g = g.detach();
            let m = (self.m[name].affine(self.beta1, 0.0)? + g.affine(1.0 - self.beta1, 0.0)?)?;
            let v = (self.v[name].affine(self.beta2, 0.0)? + g.sqr()?.affine(1.0 - self.beta2, 0.0)?)?;
            let update = (m.affine(1.0 / c1, 0.0)? / v.affine(1.0 / c2, 0.0)?.sqrt()?.affine(1.0, self.eps)?)?;
            var.set(&(var.as_tensor().detach() - update.affine(self.lr, 0.0)?)?)?;
            self.m.insert(name.clone(), m);
            self.v.insert(name.clone(), v);
        }
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
    let bytes = std::fs::read(path).map_err(|e| Error::runtime(format!("{}: {e}", path.display())))?;
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
    for (k, v) in &adam.m {
        all.insert(format!("adam_m.{k}"), v.clone());
    }
    for (k, v) in &adam.v {
        all.insert(format!("adam_v.{k}"), v.clone());
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
    let bytes = std::fs::read(path).map_err(|e| Error::runtime(format!("{}: {e}", path.display())))?;
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
    for (k, v) in map {
        let v = v.to_dtype(DType::F32).map_err(cerr)?;
        if let Some(n) = k.strip_prefix("param.") {
            weights.insert(n.to_string(), v);
        } else if let Some(n) = k.strip_prefix("adam_m.") {
            adam.m.insert(n.to_string(), v);
        } else if let Some(n) = k.strip_prefix("adam_v.") {
            adam.v.insert(n.to_string(), v);
        } else if let Some(n) = k.strip_prefix("best.") {
            best.insert(n.to_string(), v);
        }
    }
    params.restore(&weights).map_err(|e| bad(e.to_string()))?;
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
