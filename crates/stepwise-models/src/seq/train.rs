//! Training the sequencing model: fine-tuning on orders (early stopping on the validation loss) and
//! sequence-aware pretraining (a fixed number of epochs), both with Adam, seeded batches and kill-safe
//! checkpoints ([`crate::optim::fit`]).

use rand::Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use stepwise_core::rng::rng_for;
use stepwise_core::{Error, Result};

use super::inputs::{SeqInput, StepInput};
use super::model::{Decoding, OrderLabels, SeqBatch, SeqModel};
use super::pretrain::{self, Objective, PretrainConfig};
use crate::optim::{Adam, Checkpointing, CurvePoint, EpochStats, FitConfig, cerr, fit};

/// Training options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeqTrainConfig {
    pub learning_rate: f64,
    pub batch_size: usize,
    pub max_epochs: usize,
    /// Fine-tuning: stop after this many epochs without a lower validation loss.
    pub patience: usize,
    pub seed: u64,
    /// Which orders fine-tuning learns from (a saved config without it was trained on the authored order).
    #[serde(default = "OrderTargets::authored")]
    pub targets: OrderTargets,
    /// Fine-tuning: dropout rate on the encoder's input rows and its output rows (0: none, the default; the
    /// paper's encoders are pretrained transformers with their own dropout, stepwise's is trained from scratch
    /// on frozen features). Pretraining ignores it. Left out of saved files at 0, so they read and write as
    /// before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropout: f64,
    /// Fine-tuning: the learning rate of a fine-tuned text encoder's layers (`None`: `learning_rate`, as every
    /// other parameter). Pretrained layers are usually fine-tuned at a smaller rate than layers trained from
    /// scratch. Left out of saved files when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_tower_learning_rate: Option<f64>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Default for SeqTrainConfig {
    fn default() -> Self {
        SeqTrainConfig {
            learning_rate: 5e-4,
            batch_size: 16,
            max_epochs: 40,
            patience: 8,
            seed: 0,
            targets: OrderTargets::AllReferences,
            dropout: 0.0,
            text_tower_learning_rate: None,
        }
    }
}

/// The orders fine-tuning (and its validation loss) reads from each instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderTargets {
    /// Every valid order the instance lists: the pairwise head learns the share of references that put a step
    /// first (as the pairwise baseline's labels), the pointer any step a reference may place next.
    AllReferences,
    /// The authored order only, as the sequencing paper trains: where steps may come in any order, the
    /// authored one is the label all the same.
    Authored,
}

impl OrderTargets {
    fn authored() -> OrderTargets {
        OrderTargets::Authored
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OrderTargets::AllReferences => "all-references",
            OrderTargets::Authored => "authored",
        }
    }

    /// The orders of `seq` this choice trains on (with the constraints that complete a sample of them).
    pub fn of(self, seq: &SeqInput) -> OrderLabels<'_> {
        match self {
            OrderTargets::AllReferences => {
                OrderLabels { references: &seq.references, constraints: seq.constraints.as_deref() }
            }
            OrderTargets::Authored => OrderLabels::of_references(&seq.references[..1]),
        }
    }
}

/// What training did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeqTrainReport {
    pub train_sequences: usize,
    pub val_sequences: usize,
    pub parameters: usize,
    pub epochs_run: usize,
    pub best_epoch: usize,
    /// Fine-tuning: the validation loss of the kept epoch.
    pub best_val_loss: Option<f64>,
    pub curve: Vec<CurvePoint>,
    /// Epochs that were restored from a checkpoint instead of run. How the run went, not what it made: not
    /// written to training.json, so a resumed run's files equal an uninterrupted run's (the CLI prints it).
    #[serde(skip)]
    pub resumed_from_epoch: usize,
    pub stopped_early: bool,
}

impl SeqTrainReport {
    /// One line for the terminal: size, data, epochs, the kept epoch's validation loss and any resumption.
    pub fn summary(&self) -> String {
        format!(
            "{} parameters, {} train / {} val sequences, {} epochs (best {}{}){}",
            self.parameters,
            self.train_sequences,
            self.val_sequences,
            self.epochs_run,
            self.best_epoch,
            self.best_val_loss.map_or(String::new(), |v| format!(", val loss {v:.4}")),
            if self.resumed_from_epoch > 0 {
                format!("; resumed after epoch {}", self.resumed_from_epoch)
            } else {
                String::new()
            }
        )
    }
}

/// Progress callback: (epoch, batch, batches per epoch, running loss).
pub type SeqProgress<'a> = &'a mut dyn FnMut(usize, usize, usize, f64);

fn fingerprint(model: &SeqModel, cfg: &impl Serialize, extra: &str, sets: &[&[SeqInput]]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(serde_json::to_string(&model.config).unwrap_or_default().as_bytes());
    h.update(serde_json::to_string(cfg).unwrap_or_default().as_bytes());
    h.update(extra.as_bytes());
    for set in sets {
        h.update(b"|set|");
        for s in *set {
            h.update(s.id.as_bytes());
            for r in &s.references {
                for &i in r {
                    h.update(&(i as u64).to_le_bytes());
                }
            }
            // Hashed only when present, so checkpoints of sequences without constraints resume as before.
            if let Some(constraints) = &s.constraints {
                h.update(b"|constraints|");
                for &[a, b] in constraints {
                    h.update(&(a as u64).to_le_bytes());
                    h.update(&(b as u64).to_le_bytes());
                }
            }
            for st in &s.steps {
                for m in [&st.text, &st.image].into_iter().flatten() {
                    for x in &m.data {
                        h.update(&x.to_le_bytes());
                    }
                }
                for id in st.ids.iter().flatten() {
                    h.update(&id.to_le_bytes());
                }
            }
        }
    }
    h.finalize().to_hex().to_string()
}

fn shuffled(n: usize, seed: u64, stream: &str) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng_for(seed, stream));
    order
}

fn batch_of(model: &SeqModel, steps: &[&[StepInput]]) -> Result<SeqBatch> {
    SeqBatch::new(steps, &model.config).map_err(Error::bad_input)
}

/// The mean order loss over `set` (no gradient step).
pub fn order_loss_of(model: &SeqModel, set: &[SeqInput], batch_size: usize, targets: OrderTargets) -> Result<f64> {
    let mut sum = 0.0;
    for chunk in set.chunks(batch_size.max(1)) {
        let steps: Vec<&[StepInput]> = chunk.iter().map(|s| s.steps.as_slice()).collect();
        let labels: Vec<OrderLabels<'_>> = chunk.iter().map(|s| targets.of(s)).collect();
        let loss = model.order_loss(&batch_of(model, &steps)?, &labels).map_err(cerr)?;
        sum += loss.to_scalar::<f32>().map_err(cerr)? as f64 * chunk.len() as f64;
    }
    Ok(sum / set.len().max(1) as f64)
}

/// Fine-tune `model` on the orders of `train`, keeping the epoch with the lowest loss on `val` (all epochs and
/// the last weights when `val` is empty).
pub fn train_orders(
    model: &SeqModel,
    train: &[SeqInput],
    val: &[SeqInput],
    cfg: &SeqTrainConfig,
    checkpoint: Option<&Checkpointing>,
    progress: SeqProgress<'_>,
) -> Result<Option<SeqTrainReport>> {
    if train.is_empty() {
        return Err(Error::bad_input("no training sequences"));
    }
    let bs = cfg.batch_size.max(1);
    let fp = fingerprint(model, cfg, "orders", &[train, val]);
    let mut adam = Adam::new(&model.params, cfg.learning_rate).map_err(cerr)?;
    if let Some(lr) = cfg.text_tower_learning_rate {
        adam = adam.with_lr_for("text_tower.", lr);
    }
    let fit_cfg = FitConfig { max_epochs: cfg.max_epochs, patience: cfg.patience, minimize: true };
    let report = fit(&model.params, &mut adam, &fit_cfg, &fp, checkpoint, |epoch, adam| {
        let order = shuffled(train.len(), cfg.seed, &format!("seq/epoch/{epoch}"));
        let batches = order.len().div_ceil(bs);
        let mut sum = 0.0;
        for (bi, chunk) in order.chunks(bs).enumerate() {
            let steps: Vec<&[StepInput]> = chunk.iter().map(|&i| train[i].steps.as_slice()).collect();
            let labels: Vec<OrderLabels<'_>> = chunk.iter().map(|&i| cfg.targets.of(&train[i])).collect();
            // At rate 0 `nn::dropout` draws nothing and returns its input.
            let mut dropout_rng = rng_for(cfg.seed, &format!("seq/dropout/{epoch}/{bi}"));
            let dropping = Some((cfg.dropout, &mut dropout_rng));
            let loss = model.order_loss_dropping(&batch_of(model, &steps)?, &labels, dropping).map_err(cerr)?;
            let l = loss.to_scalar::<f32>().map_err(cerr)? as f64;
            adam.step(&model.params, &loss).map_err(cerr)?;
            sum += l * chunk.len() as f64;
            progress(epoch + 1, bi + 1, batches, sum / (bi * bs + chunk.len()) as f64);
        }
        let val = if val.is_empty() { None } else { Some(order_loss_of(model, val, bs, cfg.targets)?) };
        Ok(EpochStats { train_loss: sum / train.len() as f64, train_metric: None, val })
    })?;
    Ok(report.map(|r| SeqTrainReport {
        train_sequences: train.len(),
        val_sequences: val.len(),
        parameters: model.parameter_count(),
        epochs_run: r.epochs_run,
        best_epoch: r.best_epoch,
        best_val_loss: r.best_val,
        curve: r.curve,
        resumed_from_epoch: r.resumed_from_epoch,
        stopped_early: r.stopped_early,
    }))
}

/// One pretraining batch: the objective's changed inputs and its targets.
pub struct PretrainBatch {
    pub objective: Objective,
    pub batch: SeqBatch,
    /// MLM: (flat text row of `B·n·s`, id).
    pub mlm: Vec<(usize, i64)>,
    /// ISP / PISP: swapped or not, per sequence.
    pub swapped: Vec<bool>,
    /// SMRM: flat image rows of `B·n·p` that were zeroed, their original rows and each position's shuffled
    /// candidate order.
    pub smrm: Option<(Vec<usize>, candle_core::Tensor, Vec<Vec<usize>>)>,
}

/// Build the batch of `objective` from ordered sequences (each sub-sampled to at least 2 steps). MLM masks
/// rows in every batch (L = L_MLM + L_obj) when the model has an MLM head.
pub fn pretrain_batch(
    model: &SeqModel,
    seqs: &[Vec<StepInput>],
    objective: Objective,
    cfg: &PretrainConfig,
    rng: &mut impl Rng,
) -> Result<PretrainBatch> {
    let mut seqs: Vec<Vec<StepInput>> =
        seqs.iter().map(|s| pretrain::subsample(s, model.config.max_steps, rng)).collect();
    let mut swapped = vec![false; seqs.len()];
    match objective {
        Objective::Isp => {
            for (s, flag) in seqs.iter_mut().zip(&mut swapped) {
                *flag = pretrain::isp_swap(s, cfg.swap_probability, rng).is_some();
            }
        }
        Objective::Pisp => {
            for (s, flag) in seqs.iter_mut().zip(&mut swapped) {
                *flag = pretrain::pisp_swap(s, cfg.swap_probability, cfg.pisp_max_patches, rng).is_some();
            }
        }
        Objective::Mlm | Objective::Smrm => {}
    }
    // Positions are drawn per sequence and step; the flat row indices come from the padded batch's sizes (rows
    // beyond the model's caps are not in the batch, so they are neither targets nor candidates).
    let mut smrm_masked: Vec<(Vec<Vec<usize>>, Vec<Vec<f32>>)> = Vec::new();
    if objective == Objective::Smrm {
        for s in seqs.iter_mut() {
            let pos = pretrain::smrm_positions(s, cfg.smrm_rate, cfg.smrm_max_overlap, rng);
            let originals = pretrain::zero_patches(s, &pos);
            smrm_masked.push((pos, originals));
        }
    }
    let with_mlm = model.config.vocab > 0 && model.config.uses_text();
    let mlm_pos: Vec<Vec<Vec<usize>>> = if with_mlm {
        seqs.iter().map(|s| pretrain::mlm_positions(s, cfg.mlm_rate, rng)).collect()
    } else {
        Vec::new()
    };
    let refs: Vec<&[StepInput]> = seqs.iter().map(Vec::as_slice).collect();
    let mut batch = batch_of(model, &refs)?;
    let (n, s_max, p) = (batch.n, batch.s, batch.p);
    let mut mlm = Vec::new();
    if with_mlm {
        let mut mask = vec![0f32; seqs.len() * n * s_max];
        for (bi, (s, steps)) in seqs.iter().zip(&mlm_pos).enumerate() {
            for (k, rows) in steps.iter().enumerate() {
                let ids = s[k].ids.as_deref().unwrap_or(&[]);
                for &r in rows.iter().filter(|&&r| r < s_max) {
                    let flat = (bi * n + k) * s_max + r;
                    mask[flat] = 1.0;
                    mlm.push((flat, ids[r]));
                }
            }
        }
        batch.text_masked =
            Some(candle_core::Tensor::from_vec(mask, (seqs.len(), n, s_max), &candle_core::Device::Cpu).map_err(cerr)?);
    }
    let mut smrm_rows = Vec::new();
    let mut originals: Vec<f32> = Vec::new();
    for (bi, (pos, orig)) in smrm_masked.iter().enumerate() {
        // zero_patches returned the originals in (step, position) order.
        let mut next = orig.iter();
        for (k, rows) in pos.iter().enumerate() {
            for &r in rows {
                let row = next.next().expect("one original per masked position");
                if r < p {
                    smrm_rows.push((bi * n + k) * p + r);
                    originals.extend_from_slice(row);
                }
            }
        }
    }
    let smrm = if objective == Objective::Smrm && !smrm_rows.is_empty() {
        let k = smrm_rows.len();
        let orig = candle_core::Tensor::from_vec(originals, (k, model.config.image_dim), &candle_core::Device::Cpu)
            .map_err(cerr)?;
        let perms = (0..k)
            .map(|_| {
                let mut p: Vec<usize> = (0..k).collect();
                p.shuffle(rng);
                p
            })
            .collect();
        Some((smrm_rows, orig, perms))
    } else {
        None
    };
    Ok(PretrainBatch { objective, batch, mlm, swapped, smrm })
}

/// The pretraining loss of one batch: L_MLM (when the model has an MLM head) + the objective's loss.
pub fn pretrain_loss(model: &SeqModel, pb: &PretrainBatch) -> candle_core::Result<Option<candle_core::Tensor>> {
    let enc = model.encode(&pb.batch)?;
    let mut parts = Vec::new();
    if let Some(l) = model.mlm_loss(&enc, &pb.batch, &pb.mlm)? {
        parts.push(l);
    }
    let obj = match pb.objective {
        Objective::Mlm => None,
        Objective::Isp => model.swap_loss(&enc, &pb.batch, &pb.swapped, false)?,
        Objective::Pisp => model.swap_loss(&enc, &pb.batch, &pb.swapped, true)?,
        Objective::Smrm => match &pb.smrm {
            Some((rows, orig, perms)) => model.smrm_loss(&enc, &pb.batch, rows, orig, perms)?,
            None => None,
        },
    };
    parts.extend(obj);
    let mut it = parts.into_iter();
    let Some(first) = it.next() else { return Ok(None) };
    it.try_fold(first, |acc, l| acc + l).map(Some)
}

/// Pretrain `model` (built with its pretraining heads) on the ordered sequences of `train` for
/// `cfg.max_epochs` epochs. Per mini-batch the objective is drawn uniformly from `pcfg.objectives` (MLM, when
/// chosen, is added to every batch: L = L_MLM + L_obj).
pub fn pretrain(
    model: &SeqModel,
    train: &[SeqInput],
    cfg: &SeqTrainConfig,
    pcfg: &PretrainConfig,
    checkpoint: Option<&Checkpointing>,
    progress: SeqProgress<'_>,
) -> Result<Option<SeqTrainReport>> {
    if train.is_empty() {
        return Err(Error::bad_input("no training sequences"));
    }
    let objectives: Vec<Objective> = pcfg.objectives.iter().copied().filter(|o| *o != Objective::Mlm).collect();
    let with_mlm = pcfg.objectives.contains(&Objective::Mlm);
    if with_mlm && model.config.vocab == 0 {
        return Err(Error::usage(
            "MLM needs token ids: embed the text with `stepwise embed --tokens` (a store of pooled vectors has none)",
        ));
    }
    if objectives.iter().any(|o| !o.needs_text()) && !model.config.uses_image() {
        return Err(Error::usage("ISP, PISP and SMRM need image features"));
    }
    if objectives.is_empty() && !with_mlm {
        return Err(Error::usage("no pretraining objective"));
    }
    let ordered: Vec<Vec<StepInput>> = train.iter().map(SeqInput::in_order).collect();
    let bs = cfg.batch_size.max(1);
    let fp = fingerprint(model, &(cfg, pcfg), "pretrain", &[train]);
    let mut adam = Adam::new(&model.params, cfg.learning_rate).map_err(cerr)?;
    let fit_cfg = FitConfig { max_epochs: cfg.max_epochs, patience: usize::MAX, minimize: true };
    let report = fit(&model.params, &mut adam, &fit_cfg, &fp, checkpoint, |epoch, adam| {
        let order = shuffled(ordered.len(), cfg.seed, &format!("seq/pretrain/epoch/{epoch}"));
        let batches = order.len().div_ceil(bs);
        let mut sum = 0.0;
        for (bi, chunk) in order.chunks(bs).enumerate() {
            let mut rng = rng_for(cfg.seed, &format!("seq/pretrain/{epoch}/{bi}"));
            let objective =
                if objectives.is_empty() { Objective::Mlm } else { objectives[rng.random_range(0..objectives.len())] };
            let seqs: Vec<Vec<StepInput>> = chunk.iter().map(|&i| ordered[i].clone()).collect();
            let pb = pretrain_batch(model, &seqs, objective, pcfg, &mut rng)?;
            let Some(loss) = pretrain_loss(model, &pb).map_err(cerr)? else { continue };
            let l = loss.to_scalar::<f32>().map_err(cerr)? as f64;
            adam.step(&model.params, &loss).map_err(cerr)?;
            sum += l * chunk.len() as f64;
            progress(epoch + 1, bi + 1, batches, sum / (bi * bs + chunk.len()) as f64);
        }
        Ok(EpochStats { train_loss: sum / ordered.len() as f64, train_metric: None, val: None })
    })?;
    Ok(report.map(|r| SeqTrainReport {
        train_sequences: train.len(),
        val_sequences: 0,
        parameters: model.parameter_count(),
        epochs_run: r.epochs_run,
        best_epoch: r.best_epoch,
        best_val_loss: None,
        curve: r.curve,
        resumed_from_epoch: r.resumed_from_epoch,
        stopped_early: false,
    }))
}

/// The predicted order of every sequence (item indices in predicted procedural order), in input order.
pub fn predict_orders(
    model: &SeqModel,
    set: &[SeqInput],
    batch_size: usize,
    decoding: Decoding,
) -> Result<Vec<Vec<usize>>> {
    let mut out = Vec::with_capacity(set.len());
    for chunk in set.chunks(batch_size.max(1)) {
        let steps: Vec<&[StepInput]> = chunk.iter().map(|s| s.steps.as_slice()).collect();
        out.extend(model.decode(&batch_of(model, &steps)?, decoding).map_err(cerr)?);
    }
    Ok(out)
}
