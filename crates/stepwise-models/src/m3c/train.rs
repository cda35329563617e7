//! Training an M3C model: Adam, mini-batches shuffled per epoch from `rng_for(seed, "m3c/epoch/<e>")`, early
//! stopping on validation accuracy (the weights of the best epoch are kept), and a checkpoint after every epoch
//! from which a killed run resumes to the same final weights as an uninterrupted one.
//!
//! The epoch loop, Adam and the checkpoints are [`crate::optim`]'s (one safetensors file written atomically:
//! weights, Adam moments, the best weights so far, the loop's state and a fingerprint of the run — configuration,
//! seed and data; a checkpoint with another fingerprint is ignored).

use std::path::Path;

use rand::Rng;
use serde::{Deserialize, Serialize};
use stepwise_core::rng::rng_for;
use stepwise_core::{Error, Result};

use super::inputs::QuestionInput;
use super::model::{Batch, M3cModel, argmax_rows};
use crate::optim::{Adam, EpochStats, FitConfig, cerr, fit};

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
    /// Epochs that were restored from a checkpoint instead of run. How the run went, not what it made: not
    /// written to training.json, so a resumed run's files equal an uninterrupted run's (the CLI prints it).
    #[serde(skip)]
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
            let items = q.candidate_items.as_ref().filter(|_| model.config.reads_candidate_items());
            for m in q.context.iter().chain(&q.candidates).chain(items) {
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
    let val_batches: Vec<Batch> = batches(val, batch_size, model)?;
    let fit_cfg = FitConfig { max_epochs: cfg.max_epochs, patience: cfg.patience, minimize: false };
    let mut best_val: Option<f64> = None;
    let report = fit(&model.params, &mut adam, &fit_cfg, &fp, checkpoint, |epoch, adam| {
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
            let mut dropout_rng = rng_for(cfg.seed, &format!("m3c/dropout/{epoch}/{bi}"));
            let (loss, scores) = model.training_loss(&batch, &mut dropout_rng).map_err(cerr)?;
            let l = loss.to_scalar::<f32>().map_err(cerr)? as f64;
            if !l.is_finite() {
                return Err(Error::runtime(format!("training diverged: loss {l} in epoch {}", epoch + 1)));
            }
            adam.step(&model.params, &loss).map_err(cerr)?;
            loss_sum += l * chunk.len() as f64;
            right += argmax_rows(&scores).map_err(cerr)?.iter().zip(&batch.answers).filter(|(p, a)| p == a).count();
            progress(epoch + 1, bi + 1, n_batches, loss_sum / ((bi * batch_size + chunk.len()) as f64), best_val);
        }
        let val_accuracy = if val.is_empty() { None } else { Some(accuracy_of(model, &val_batches)?) };
        if let Some(v) = val_accuracy {
            best_val = Some(best_val.map_or(v, |b: f64| b.max(v)));
        }
        let train_loss = loss_sum / train.len() as f64;
        progress(epoch + 1, n_batches, n_batches, train_loss, best_val);
        Ok(EpochStats { train_loss, train_metric: Some(right as f64 / train.len() as f64), val: val_accuracy })
    })?;
    Ok(report.map(|r| TrainReport {
        train_questions: train.len(),
        val_questions: val.len(),
        parameters: model.parameter_count(),
        epochs_run: r.epochs_run,
        best_epoch: r.best_epoch,
        best_val_accuracy: r.best_val,
        curve: r
            .curve
            .iter()
            .map(|p| EpochRecord {
                epoch: p.epoch,
                train_loss: p.train_loss,
                train_accuracy: p.train_metric.unwrap_or(f64::NAN),
                val_accuracy: p.val,
            })
            .collect(),
        resumed_from_epoch: r.resumed_from_epoch,
        stopped_early: r.stopped_early,
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
