//! A sequencing model on disk (`MODEL_DIR` of `stepwise train-seq` or `ENCODER_DIR` of `stepwise pretrain`):
//! `weights.safetensors`, `config.json` (`{"sequencing": model config, "train": ..., "pretrain": ...}`, which
//! tells it from a multiple-choice model), `features.json` and `training.json`, as for [`crate::m3c::saved`].

use std::path::Path;

use serde::{Deserialize, Serialize};
use stepwise_core::json::{read_json, to_pretty_sorted};
use stepwise_core::output::{write_file_atomic, write_string_atomic};
use stepwise_core::sequencing::OrderPrediction;
use stepwise_core::{Error, Result};

use super::model::{SeqConfig, SeqModel};
use super::pretrain::PretrainConfig;
use super::train::{SeqTrainConfig, SeqTrainReport};
use crate::m3c::saved::{CONFIG_FILE, FEATURES_FILE, FeatureIdentity, TRAINING_FILE, WEIGHTS_FILE};
use crate::optim::{load_weights, weights_bytes};

/// `config.json` of a sequencing model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSeqConfig {
    pub sequencing: SeqConfig,
    pub train: SeqTrainConfig,
    /// Set for a pretrained encoder (its objectives); `None` for a fine-tuned model.
    #[serde(default)]
    pub pretrain: Option<PretrainConfig>,
    /// For a fine-tuned model: the pretrained encoder it started from (its folder as given).
    #[serde(default)]
    pub encoder_from: Option<String>,
}

/// Write the model files into `dir` (an output folder the caller commits).
pub fn save(
    dir: &Path,
    model: &SeqModel,
    config: &SavedSeqConfig,
    report: &SeqTrainReport,
    features: &[FeatureIdentity],
) -> Result<()> {
    let bytes = weights_bytes(&model.params)?;
    write_file_atomic(&dir.join(WEIGHTS_FILE), |w| std::io::Write::write_all(w, &bytes))?;
    write_string_atomic(&dir.join(CONFIG_FILE), &to_pretty_sorted(config))?;
    write_string_atomic(&dir.join(FEATURES_FILE), &to_pretty_sorted(&features))?;
    write_string_atomic(&dir.join(TRAINING_FILE), &to_pretty_sorted(report))
}

/// Whether `dir` holds a sequencing model (its config.json has a `sequencing` section).
pub fn is_sequencing_model(dir: &Path) -> bool {
    read_json(&dir.join(CONFIG_FILE)).is_ok_and(|v| v.get("sequencing").is_some())
}

/// A sequencing model read back from `dir`.
pub struct LoadedSeq {
    pub model: SeqModel,
    pub config: SavedSeqConfig,
    pub features: Vec<FeatureIdentity>,
}

/// Read a sequencing model folder (with its pretraining heads when it is a pretrained encoder); errors name the
/// file.
pub fn load(dir: &Path) -> Result<LoadedSeq> {
    if !dir.join(WEIGHTS_FILE).exists() {
        return Err(Error::bad_input(format!(
            "{}: not a model folder (no {WEIGHTS_FILE}; make one with `stepwise pretrain` or `stepwise train-seq`)",
            dir.display()
        )));
    }
    let file = dir.join(CONFIG_FILE);
    let config: SavedSeqConfig =
        serde_json::from_value(read_json(&file)?).map_err(|e| Error::bad_input(format!("{}: {e}", file.display())))?;
    let ffile = dir.join(FEATURES_FILE);
    let features: Vec<FeatureIdentity> = serde_json::from_value(read_json(&ffile)?)
        .map_err(|e| Error::bad_input(format!("{}: {e}", ffile.display())))?;
    let bad = |e: candle_core::Error| Error::bad_input(format!("{}: {e}", file.display()));
    let mut model = SeqModel::new(config.sequencing.clone(), 0).map_err(bad)?;
    if config.pretrain.is_some() {
        model = model.with_pretraining_heads().map_err(bad)?;
    }
    load_weights(&model.params, &dir.join(WEIGHTS_FILE))?;
    Ok(LoadedSeq { model, config, features })
}

impl LoadedSeq {
    /// How prediction files name this model: `sequencer (multimodal)`, with ` + pretraining` when it was
    /// fine-tuned from a pretrained encoder.
    pub fn name(&self) -> String {
        let pretrained = if self.config.encoder_from.is_some() { " + pretraining" } else { "" };
        format!("sequencer ({}){pretrained}", self.config.sequencing.modality.as_str())
    }

    /// [`Self::name`] with the decoding when it is not the model's own (what a prediction file records).
    pub fn name_decoded(&self, decoding: super::Decoding) -> String {
        match decoding {
            super::Decoding::PairwiseHead if self.config.sequencing.decoder != super::DecoderKind::Pairwise => {
                format!("{}, pairwise head alone", self.name())
            }
            _ => self.name(),
        }
    }

    /// A usage error naming `dir` unless this is a fine-tuned model (a pretrained encoder has no order decoder).
    pub fn require_decoder(&self, dir: &Path) -> Result<()> {
        if self.config.pretrain.is_some() {
            return Err(Error::usage(format!(
                "{}: a pretrained encoder has no order decoder; fine-tune it with `stepwise train-seq --encoder`",
                dir.display()
            )));
        }
        Ok(())
    }

    /// A usage error naming `dir` unless this is a pretrained encoder.
    pub fn require_encoder(&self, dir: &Path) -> Result<()> {
        if self.config.pretrain.is_none() {
            return Err(Error::usage(format!(
                "{}: not a pretrained encoder (make one with `stepwise pretrain`)",
                dir.display()
            )));
        }
        Ok(())
    }

    /// The orders this model predicts for the instances of `data` in `split` (all when `None`), in instance
    /// order; an instance without vectors gets none and is counted in `missing`. A pretrained encoder is a usage
    /// error naming `dir` ([`Self::require_decoder`]).
    pub fn predict(
        &self,
        data: &super::data::SeqData,
        split: Option<&str>,
        decoding: super::Decoding,
        dir: &Path,
    ) -> Result<SeqPredictions> {
        self.require_decoder(dir)?;
        let in_split = |s: &str| split.is_none_or(|sp| sp == s);
        let wanted: Vec<super::SeqInput> = data.inputs.iter().filter(|s| in_split(&s.split)).cloned().collect();
        let orders = super::predict_orders(&self.model, &wanted, self.config.train.batch_size, decoding)?;
        let mut by_id: std::collections::HashMap<&str, Vec<usize>> =
            wanted.iter().map(|s| s.id.as_str()).zip(orders).collect();
        let mut out = SeqPredictions::default();
        for inst in data.instances.iter().filter(|i| in_split(&i.split)) {
            match by_id.remove(inst.id.as_str()) {
                Some(order) => out.predictions.push(OrderPrediction { id: inst.id.clone(), order }),
                None => out.missing += 1,
            }
        }
        Ok(out)
    }

    /// Start `config` (a fine-tuning run's) from this pretrained encoder: its modality, widths and sizes must be
    /// `config`'s, and its position, step and vocabulary tables are kept. Usage errors name `dir`.
    pub fn adopt_as_encoder(&self, config: &mut SeqConfig, dir: &Path) -> Result<()> {
        self.require_encoder(dir)?;
        let pc = &self.config.sequencing;
        if (pc.modality, pc.text_dim, pc.image_dim, pc.dim, pc.layers, pc.heads)
            != (config.modality, config.text_dim, config.image_dim, config.dim, config.layers, config.heads)
        {
            return Err(Error::usage(format!(
                "{}: the encoder was pretrained as {} {}×{} with {} heads ({}-d text, {}-d image); this run asks for \
                 {} {}×{} with {} heads ({}-d text, {}-d image)",
                dir.display(),
                pc.modality.as_str(),
                pc.layers,
                pc.dim,
                pc.heads,
                pc.text_dim,
                pc.image_dim,
                config.modality.as_str(),
                config.layers,
                config.dim,
                config.heads,
                config.text_dim,
                config.image_dim
            )));
        }
        config.max_patches = pc.max_patches;
        config.max_tokens = pc.max_tokens;
        config.max_steps = pc.max_steps;
        config.vocab = pc.vocab;
        Ok(())
    }
}

/// What [`LoadedSeq::predict`] ordered: one prediction per instance with vectors, and how many had none.
#[derive(Debug, Default)]
pub struct SeqPredictions {
    pub predictions: Vec<OrderPrediction>,
    pub missing: usize,
}
