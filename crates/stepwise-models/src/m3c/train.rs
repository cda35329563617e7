//! Training an M3C model: Adam, mini-batches shuffled per epoch from `rng_for(seed, "m3c/epoch/<e>")`, early
//! stopping on validation accuracy (the weights of the best epoch are kept), and a checkpoint after every epoch
//! from which a killed run resumes to the same final weights as an uninterrupted one.
//!
//! The checkpoint is one safetensors file written atomically (weights, Adam moments, the best weights so far) whose
//! metadata holds the epoch, the early-stopping state, the curve and a fingerprint of the run (configuration,
//! seed and data); a checkpoint with another fingerprint is ignored.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::Tensor;
use rand::Rng;
use serde::{Deserialize, Serialize};
use stepwise_core::rng::rng_for;
use stepwise_core::{Error, Result};

use super::inputs::QuestionInput;
use super::model::{Batch, M3cModel, argmax_rows};
use crate::optim::{Adam, cerr, load_checkpoint, save_checkpoint};

/// Training options (the paper's: Adam, lr 5e-4, early stopping with patience 20 on validation accuracy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub learning_rate: f64,
    pub batch_size: usize,
    pub max_epochs: usize,
    /// Stop after this many epochs without a better validation accuracy.
    pub patience: usize,
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig { learning_rate: 5e-4, batch_size: 32, max_epochs: 100, patience: 20, seed: 0 }
    }
}

/// One epoch of the training curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub train_loss: f64,
    pub train_accuracy: f64,
    pub val_accuracy: Option<f64>,
}

/// What training did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    pub train_questions: usize,
    pub val_questions: usize,
    pub parameters: usize,
    pub epochs_run: usize,
    /// The epoch whose weights were kept (1-based).
    pub best_epoch: usize,
    pub best_val_accuracy: Option<f64>,
    pub curve: Vec<EpochRecord>,
    /// Epochs that were restored from a checkpoint instead of run.
    pub resumed_from_epoch: usize,
    pub stopped_early: bool,
}

/// One optimiser step at a time, outside [`train`] (benchmarks time single steps with it).
pub struct Stepper {
    adam: Adam,
}

impl Stepper {
    pub fn new(model: &M3cModel, learning_rate: f64) -> Result<Stepper> {
        Ok(Stepper { adam: Adam::new(&model.params, learning_rate).map_err(cerr)? })
    }

    /// Forward, loss, backward and an Adam update on `batch`; returns the loss.
    pub fn step(&mut self, model: &M3cModel, batch: &Batch) -> Result<f64> {
        let (loss, _) = model.loss(batch).map_err(cerr)?;
        let l = loss.to_scalar::<f32>().map_err(cerr)? as f64;
        self.adam.step(&model.params, &loss).map_err(cerr)?;
        Ok(l)
    }
}

pub use crate::optim::Checkpointing;

/// Progress callback: (epoch, batch index, batches per epoch, running loss, last validation accuracy).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, usize, f64, Option<f64>);

#[derive(Serialize, Deserialize)]
struct CheckpointState {
    epoch: usize,
    best_epoch: usize,
    best_val_accuracy: Option<u64>,
    since_best: usize,
    /// The curve with every float as its bits (JSON text would not give back the same last digit).
    curve: Vec<(usize, u64, u64, Option<u64>)>,
}

impl CheckpointState {
    fn best_val(&self) -> Option<f64> {
        self.best_val_accuracy.map(f64::from_bits)
    }
}

fn curve_to_bits(c: &[EpochRecord]) -> Vec<(usize, u64, u64, Option<u64>)> {
    c.iter()
        .map(|r| (r.epoch, r.train_loss.to_bits(), r.train_accuracy.to_bits(), r.val_accuracy.map(f64::to_bits)))
        .collect()
}

fn curve_from_bits(c: &[(usize, u64, u64, Option<u64>)]) -> Vec<EpochRecord> {
    c.iter()
        .map(|&(epoch, l, a, v)| EpochRecord {
            epoch,
            train_loss: f64::from_bits(l),
            train_accuracy: f64::from_bits(a),
            val_accuracy: v.map(f64::from_bits),
        })
        .collect()
}

/// A fingerprint of everything that determines training: configs, seed and the data.
pub fn fingerprint(model: &M3cModel, cfg: &TrainConfig, train: &[QuestionInput], val: &[QuestionInput]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(serde_json::to_string(&model.config).unwrap_or_default().as_bytes());
    h.update(serde_json::to_string(cfg).unwrap_or_default().as_bytes());
    for (tag, set) in [("train", train), ("val", val)] {
        h.update(tag.as_bytes());
        for q in set {
            h.update(q.qid.as_bytes());
            h.update(&(q.answer as u64).to_le_bytes());
            for m in q.context.iter().chain(&q.candidates) {
                for x in &m.data {
                    h.update(&x.to_le_bytes());
                }
            }
        }
    }
    h.finalize().to_hex().to_string()
}

/// Train `model` in place on `train`, selecting the epoch on `val` (may be empty: then every epoch runs and the
/// last weights are kept). Returns `Ok(None)` when stopped by `stop_after_epochs` (the checkpoint holds the state).
pub fn train(
    model: &M3cModel,
    train: &[QuestionInput],
    val: &[QuestionInput],
    cfg: &TrainConfig,
    checkpoint: Option<&Checkpointing>,
    progress: Progress<'_>,
) -> Result<Option<TrainReport>> {
    if train.is_empty() {
        return Err(Error::bad_input("no training questions"));
    }
    let batch_size = cfg.batch_size.max(1);
    let fp = fingerprint(model, cfg, train, val);
    let mut adam = Adam::new(&model.params, cfg.learning_rate).map_err(cerr)?;
    let mut state =
        CheckpointState { epoch: 0, best_epoch: 0, best_val_accuracy: None, since_best: 0, curve: Vec::new() };
    let mut curve: Vec<EpochRecord> = Vec::new();
    let mut best: Option<BTreeMap<String, Tensor>> = None;
    if let Some(c) = checkpoint
        && c.path.exists()
    {
        match load_checkpoint::<CheckpointState>(&c.path, &model.params, &mut adam, &fp)? {
            Some((s, b)) => {
                tracing::info!(epoch = s.epoch, "resuming from {}", c.path.display());
                curve = curve_from_bits(&s.curve);
                state = s;
                best = b;
            }
            None => tracing::warn!("ignoring {}: it belongs to another training run", c.path.display()),
        }
    }
    let resumed_from = state.epoch;
    let val_batches: Vec<Batch> = batches(val, batch_size, model)?;
    let mut stopped_early = state.since_best >= cfg.patience && !val.is_empty();
    let mut run_here = 0usize;
    while state.epoch < cfg.max_epochs.max(1) && !stopped_early {
        let epoch = state.epoch;
        let mut order: Vec<usize> = (0..train.len()).collect();
        let mut rng = rng_for(cfg.seed, &format!("m3c/epoch/{epoch}"));
        for j in (1..order.len()).rev() {
            let r = rng.random_range(0..=j);
            order.swap(j, r);
        }
        let n_batches = order.len().div_ceil(batch_size);
        let (mut loss_sum, mut right) = (0f64, 0usize);
        for (bi, chunk) in order.chunks(batch_size).enumerate() {
            let items: Vec<&QuestionInput> = chunk.iter().map(|&i| &train[i]).collect();
            let batch = Batch::new(&items, &model.config).map_err(Error::bad_input)?;
            let (loss, scores) = model.loss(&batch).map_err(cerr)?;
            let l = loss.to_scalar::<f32>().map_err(cerr)? as f64;
            if !l.is_finite() {
                return Err(Error::runtime(format!("training diverged: loss {l} in epoch {}", epoch + 1)));
            }
            adam.step(&model.params, &loss).map_err(cerr)?;
            loss_sum += l * chunk.len() as f64;
            right += argmax_rows(&scores).map_err(cerr)?.iter().zip(&batch.answers).filter(|(p, a)| p == a).count();
            progress(
                epoch + 1,
                bi + 1,
                n_batches,
                loss_sum / ((bi * batch_size + chunk.len()) as f64),
                state.best_val(),
            );
        }
        let val_accuracy = if val.is_empty() { None } else { Some(accuracy_of(model, &val_batches)?) };
        curve.push(EpochRecord {
            epoch: epoch + 1,
            train_loss: loss_sum / train.len() as f64,
            train_accuracy: right as f64 / train.len() as f64,
            val_accuracy,
        });
        state.epoch = epoch + 1;
        match val_accuracy {
            Some(acc) if state.best_val().is_none_or(|b| acc > b) => {
                state.best_val_accuracy = Some(acc.to_bits());
                state.best_epoch = epoch + 1;
                state.since_best = 0;
                best = Some(model.params.snapshot().map_err(cerr)?);
            }
            Some(_) => {
                state.since_best += 1;
                stopped_early = state.since_best >= cfg.patience;
            }
            None => state.best_epoch = epoch + 1,
        }
        state.curve = curve_to_bits(&curve);
        progress(epoch + 1, n_batches, n_batches, loss_sum / train.len() as f64, state.best_val());
        run_here += 1;
        if let Some(c) = checkpoint {
            save_checkpoint(&c.path, &model.params, &adam, best.as_ref(), &fp, &state)?;
            if c.stop_after_epochs.is_some_and(|k| run_here >= k) && state.epoch < cfg.max_epochs && !stopped_early {
                return Ok(None);
            }
        }
    }
    if let Some(b) = &best {
        model.params.restore(b).map_err(cerr)?;
    }
    Ok(Some(TrainReport {
        train_questions: train.len(),
        val_questions: val.len(),
        parameters: model.parameter_count(),
        epochs_run: state.epoch,
        best_epoch: state.best_epoch,
        best_val_accuracy: state.best_val(),
        curve,
        resumed_from_epoch: resumed_from,
        stopped_early,
    }))
}

fn batches(set: &[QuestionInput], size: usize, model: &M3cModel) -> Result<Vec<Batch>> {
    set.chunks(size)
        .map(|c| Batch::new(&c.iter().collect::<Vec<_>>(), &model.config).map_err(Error::bad_input))
        .collect()
}

fn accuracy_of(model: &M3cModel, batches: &[Batch]) -> Result<f64> {
    let (mut right, mut total) = (0usize, 0usize);
    for b in batches {
        let pred = argmax_rows(&model.scores(b).map_err(cerr)?).map_err(cerr)?;
        right += pred.iter().zip(&b.answers).filter(|(p, a)| p == a).count();
        total += b.answers.len();
    }
    Ok(right as f64 / total.max(1) as f64)
}

/// The predicted choice and the scores of every question, in input order.
pub fn predict(model: &M3cModel, set: &[QuestionInput], batch_size: usize) -> Result<Vec<(usize, Vec<f32>)>> {
    let mut out = Vec::with_capacity(set.len());
    for b in batches(set, batch_size.max(1), model)? {
        let s = model.scores(&b).map_err(cerr)?;
        let pred = argmax_rows(&s).map_err(cerr)?;
        let rows = s.to_vec2::<f32>().map_err(cerr)?;
        out.extend(pred.into_iter().zip(rows));
    }
    Ok(out)
}

/// The weights as safetensors bytes (name order; deterministic).
pub fn weights_bytes(model: &M3cModel) -> Result<Vec<u8>> {
    crate::optim::weights_bytes(&model.params)
}

/// Load weights written by [`weights_bytes`] into `model`; the error names the file.
pub fn load_weights(model: &M3cModel, path: &Path) -> Result<()> {
    crate::optim::load_weights(&model.params, path)
}
